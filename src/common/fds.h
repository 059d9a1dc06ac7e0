/*
 * fds.h: file descriptors as a resource the server shares out.
 *
 * Every collection and index is a file WiredTiger keeps open, and every
 * connection is a socket; all of them come from one per-process limit
 * (RLIMIT_NOFILE). WiredTiger panics when it cannot open a file it needs in
 * the middle of its work (the directory sync of a table it creates, its next
 * journal file), which stops the server. So the ports stop accepting before
 * the descriptors run out (MF_FDS_CONN_RESERVE, checked on each accepted
 * socket by its number), a table create is refused with TooManyFilesOpen
 * while fewer than MF_FDS_CREATE_RESERVE would be left (mf_fds_free, an
 * exact count when it matters), and so is opening a cursor while fewer than
 * MF_FDS_OPEN_RESERVE are left (a table whose file WiredTiger closed takes
 * one to reopen: a restart with more tables than the limit, say); what is
 * left after all three is the storage engine's margin for the files it
 * opens on its own (its next journal file, the directory it lists).
 */
#ifndef MF_FDS_H
#define MF_FDS_H

#include <stdbool.h>
#include <stdint.h>

#define MF_FDS_CREATE_RESERVE 32 /* a table create must leave this many free */
#define MF_FDS_OPEN_RESERVE 24   /* a cursor open (maybe of a closed table's file) must leave this many free */
#define MF_FDS_CONN_RESERVE 64   /* an accepted socket numbered this close to the limit is closed */

/* mf_fds_limit: the soft limit on open files now, or INT64_MAX when there is none (or it is unknown). */
int64_t mf_fds_limit(void);

/*
 * mf_fds_free: how many more descriptors this process may open now (the
 * soft limit minus those open), 0 when not one more can be; INT64_MAX
 * without a limit. Cheap while the descriptor table is well under the limit
 * (its size, FDSize in /proc/self/status, bounds the open ones); otherwise
 * it counts /proc/self/fd, O(open descriptors). For rare operations (a table
 * create), not per request.
 */
int64_t mf_fds_free(void);

/*
 * mf_fd_in_reserve: whether descriptor fd, just handed out, lies within the
 * last reserve ones below limit. Descriptors are handed out lowest-free
 * first, so at least fd others are open: true means the process is that
 * close to its limit (false can still be close, when closed descriptors
 * left holes below fd).
 */
static inline bool
mf_fd_in_reserve(int fd, int64_t limit, int reserve)
{
    return fd >= 0 && limit != INT64_MAX && (int64_t)fd >= limit - reserve;
}

#endif /* MF_FDS_H */
