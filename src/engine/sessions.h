/*
 * sessions.h: the logical session cache (MongoDB's LogicalSessionCache).
 *
 * Every command that carries an lsid, startSession and refreshSessions
 * record the session here: its id (the client's UUID) and uid (SHA-256 of
 * the authenticated user's "user@db", or of "" without access control, as
 * mongod computes it) with the time of its last use. endSessions,
 * killSessions and killAllSessions remove entries; a session unused for
 * localLogicalSessionTimeoutMinutes is gone. $listLocalSessions (and, in
 * mayfly, $listSessions) list what is cached.
 *
 * Design: a hash table keyed by (id, uid), chained, that doubles when it
 * grows past its bucket count, plus a doubly linked list ordered by last
 * use (most recent at the head). A touch moves its entry to the head, so
 * the tail holds the stalest sessions; each touch then drops at most two
 * expired entries from the tail. Expiry therefore costs O(1) per command
 * and the cache never scans itself on the command path; a listing skips
 * (and drops) whatever has expired since. The cache holds at most
 * maxSessions entries (1,000,000 by default, as mongod): a new session
 * beyond that fails with 261 TooManyLogicalSessions.
 *
 * One per engine (mf_engine_t.sessions). Thread-safe: one mutex guards the
 * table and list, held only for the few pointer moves of an operation (and
 * for the callbacks of mf_sessions_each, which must not call back in).
 */
#ifndef MF_SESSIONS_H
#define MF_SESSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define MF_SESSION_UID_LEN 32

typedef struct mf_sessions mf_sessions_t;

/* One cached session, as mf_sessions_each shows it (valid during the callback only). */
typedef struct mf_session_info {
    uint8_t id[16];
    uint8_t uid[MF_SESSION_UID_LEN];
    int64_t last_use_ms; /* wall clock, ms since the epoch */
    const char *user;    /* "user@db", or "" when the session's creator was not authenticated */
} mf_session_info_t;

/* mf_sessions_new: an empty cache holding at most max_sessions entries (>= 1). Never NULL. */
mf_sessions_t *mf_sessions_new(int64_t max_sessions);
/* mf_sessions_free: frees the cache and its entries (NULL is ignored). */
void mf_sessions_free(mf_sessions_t *s);

/* mf_session_uid: the uid of user ("user@db", or "" for no user): SHA-256 of that string, as mongod's digest. */
void mf_session_uid(const char *user, uint8_t uid[MF_SESSION_UID_LEN]);

/*
 * mf_sessions_touch: records the use of session (id, uid of user) at now_ms:
 * refreshes its lastUse, or adds it. Sessions last used before now_ms -
 * timeout_ms count as gone. Returns 0, or -1 with 261 TooManyLogicalSessions
 * when it is new and the cache is full.
 */
int mf_sessions_touch(mf_sessions_t *s, const uint8_t id[16], const char *user, int64_t now_ms, int64_t timeout_ms,
                      mf_error_t *err) MF_WUR;
/* mf_sessions_touch_uid: the same, also giving the session's uid in uid (what currentOp's lsid shows). */
int mf_sessions_touch_uid(mf_sessions_t *s, const uint8_t id[16], const char *user, int64_t now_ms, int64_t timeout_ms,
                          uint8_t uid[MF_SESSION_UID_LEN], mf_error_t *err) MF_WUR;

/* mf_sessions_end: removes session (id, uid); false if it was not cached. */
bool mf_sessions_end(mf_sessions_t *s, const uint8_t id[16], const uint8_t uid[MF_SESSION_UID_LEN]);

/* mf_sessions_end_all: removes every session of uid (NULL: of every user); returns how many. Walks the cache. */
size_t mf_sessions_end_all(mf_sessions_t *s, const uint8_t *uid);

/*
 * mf_sessions_each: calls fn for every session not expired at now_ms, most
 * recently used first, whose uid is one of the nuids in uids (uids NULL:
 * every session); expired ones met on the way are dropped. fn runs under
 * the cache's lock and must not call mf_sessions_*.
 */
void mf_sessions_each(mf_sessions_t *s, int64_t now_ms, int64_t timeout_ms, const uint8_t (*uids)[MF_SESSION_UID_LEN],
                      size_t nuids, void (*fn)(void *arg, const mf_session_info_t *info), void *arg);

/* mf_sessions_count: the entries cached now (expired ones not yet dropped included). */
size_t mf_sessions_count(mf_sessions_t *s);

#endif /* MF_SESSIONS_H */
