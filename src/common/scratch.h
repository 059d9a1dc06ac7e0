/*
 * scratch.h: the home directory of an in-memory engine opened without a
 * path.
 *
 * WiredTiger wants a home directory even in memory, and the archive keeps
 * its directory and segment files there (an in-memory engine's spill files
 * go to $TMPDIR instead); with no --dbpath that home is a fresh directory
 * under /tmp that lives as long as the engine. Nothing in it outlives the process (in memory, nothing is
 * durable), so closing removes it with whatever is in it. Both the server
 * (src/server/main.c) and the embedding API (src/api/api.c) use these.
 */
#ifndef MF_SCRATCH_H
#define MF_SCRATCH_H

#include <stddef.h>

/*
 * mf_scratch_make: creates a new directory /tmp/mayfly-mem-XXXXXX and
 * writes its path into buf (len bytes, at least 32). Returns 0, or -1 with
 * errno set and buf emptied.
 */
int mf_scratch_make(char *buf, size_t len);

/*
 * mf_scratch_remove: removes dir and everything under it, without
 * following symbolic links; "" is a no-op. Errors are ignored (a file left
 * behind in /tmp is not worth failing a shutdown for).
 */
void mf_scratch_remove(const char *dir);

#endif
