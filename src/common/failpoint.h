/*
 * failpoint.h: named fault-injection points (mongod's fail points), one
 * registry per engine.
 *
 * A fail point is a named place in the code that asks "should I misbehave
 * now?". Off (the normal state) that question costs one relaxed atomic load.
 * The configureFailPoint command (enabled only with --setParameter
 * enableTestCommands=1, as in mongod) sets a point's mode and data:
 *   "off", "alwaysOn", {times: n} (fires n times, then turns itself off),
 *   {skip: n} (lets n evaluations pass, then fires every time),
 *   {activationProbability: p} (fires with probability p),
 * with an optional data document the code at the point reads (failCommand's
 * errorCode, failCommands, blockTimeMS, ...). configureFailPoint answers
 * with count, the number of times the point had fired before the change.
 *
 * The registry holds a fixed list of names (MF_FAILPOINT_NAMES below), so a
 * misspelt name is refused (266 FailPointSetFailed) instead of silently
 * doing nothing. The points:
 *   failCommand                 the command layer (cmd_dispatch.c): fail, block
 *                               or drop a connection for chosen commands, or add
 *                               a writeConcernError to their reply
 *   maxTimeAlwaysTimeOut        any command with maxTimeMS fails with 50 at once
 *   failGetMoreAfterCursorCheckout a getMore fails once it has its cursor
 *                               (cmd_find.c), data {errorCode} (default 1
 *                               InternalError): the drivers' change stream
 *                               tests use it, as the error then carries the
 *                               labels a change stream's getMore gets
 *   hangTTLMonitorBetweenPasses the TTL monitor runs no pass while it is on
 *   ttlMonitorFailBatch         a TTL delete batch fails before it commits (the
 *                               documents stay; the monitor retries), data
 *                               {errorCode} optional (default 112 WriteConflict)
 *   hangTTLMonitorAfterReadAhead a parallel TTL round waits, while on, just after
 *                               the monitor has read the next round's keys
 *                               (its deleters go on with the round's pieces)
 *   slowTTLDeleters             a TTL deleter thread (not the monitor's) takes
 *                               data {usPerDoc} (default 1000) longer per
 *                               document of each piece it deletes, as if slowed
 *                               by other work
 *   hangTTLDeleterInBatch       a TTL round's pieces (one transaction each)
 *                               wait, while on (a minute at most), at their
 *                               first document: that transaction is open
 *   pauseTTLWriterBeforeNote    a committed write that dirtied a TTL index
 *                               waits, data {ms}, before it tells the monitor
 *   hangWhileHoldingUserManagementLock a user or role management command
 *                               waits, while on, holding the lock that runs
 *                               them one at a time (until it is killed, times
 *                               out, or a minute passes)
 *
 * Thread safety: every function may be called from any thread. Evaluation
 * (mf_failpoint_eval) takes the point's mutex only when the point is on.
 */
#ifndef MF_FAILPOINT_H
#define MF_FAILPOINT_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct mf_failpoints mf_failpoints_t;
typedef struct mf_failpoint mf_failpoint_t;

/* mf_failpoints_new / mf_failpoints_free: an engine's registry (every point off). */
mf_failpoints_t *mf_failpoints_new(void);
void mf_failpoints_free(mf_failpoints_t *reg);

/* mf_failpoint_find: the point called name, or NULL (the pointer lives as long as reg). */
mf_failpoint_t *mf_failpoint_find(mf_failpoints_t *reg, const char *name);

/*
 * mf_failpoint_configure: applies a configureFailPoint command document
 * ({configureFailPoint: name, mode, data}) to reg. On success *count is the
 * number of times the point fired before. Errors as mongod: 266 for an
 * unknown name, 20 for a missing mode, 2 BadValue / 14 TypeMismatch for a
 * bad mode or data.
 */
int mf_failpoint_configure(mf_failpoints_t *reg, const bson_t *cmd, int64_t *count, mf_error_t *err) MF_WUR;

/*
 * mf_failpoint_eval: decides whether fp fires at this evaluation. filter,
 * when not NULL, is asked first with the point's data; if it says no, the
 * evaluation does not count towards {times}/{skip}. When the point fires
 * and data_out is not NULL, *data_out is initialised with a copy of the
 * data (the caller destroys it). Returns false at once when fp is NULL or
 * off.
 */
bool mf_failpoint_eval(mf_failpoint_t *fp, bool (*filter)(void *arg, const bson_t *data), void *arg,
                       bson_t *data_out);

/* mf_failpoint_on: true if fp is set to anything but off (a cheap pre-check; NULL: false). */
bool mf_failpoint_on(const mf_failpoint_t *fp);

/* mf_failpoint_times_entered: how many times fp has fired since the registry was made. */
int64_t mf_failpoint_times_entered(mf_failpoint_t *fp);

/*
 * mf_failpoint_set: sets fp from code (a test or an embedded caller):
 * mode "off"/"alwaysOn", times > 0 for {times}, data may be NULL.
 */
void mf_failpoint_set(mf_failpoint_t *fp, bool on, int64_t times, const bson_t *data);

#endif /* MF_FAILPOINT_H */
