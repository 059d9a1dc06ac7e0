/*
 * curop.h: the registry of operations in flight, for currentOp and killOp.
 *
 * Every command run by mf_cmd_run registers itself for its duration; a
 * background task (an index build, a TTL deletion batch) registers itself
 * the same way. Entries are owned by the registry; a caller keeps the pointer
 * mf_curop_begin returned until it calls mf_curop_end, and may update
 * progress in between. All functions are thread-safe (one mutex, never held
 * while calling out), and none takes the catalog lock, so currentOp answers
 * while DDL (an index build) holds it.
 */
#ifndef MF_CUROP_H
#define MF_CUROP_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct mf_curop mf_curop_t;

/*
 * mf_curop_begin: registers an operation. op_type is MongoDB's "op" field
 * ("command", "query", "insert", "update", "remove", "getmore", "none"); ns is
 * "db.coll" (may be ""); desc is the thread description currentOp shows
 * ("conn12", "TTLMonitor", "IndexBuildsCoordinator"); command may be NULL
 * (copied; one over 1 KB is shown as {$truncated: "<text>"} like mongod);
 * client_id is the connection id (0 for background work).
 * Returns the entry; never NULL.
 */
mf_curop_t *mf_curop_begin(const char *op_type, const char *ns, const char *desc, const bson_t *command,
                           int64_t client_id);

/* mf_curop_set_client: records the client's address ("127.0.0.1:53211") shown as "client". */
void mf_curop_set_client(mf_curop_t *op, const char *remote);

/* mf_curop_set_progress: sets msg and progress {done, total} shown by currentOp. */
void mf_curop_set_progress(mf_curop_t *op, const char *msg, int64_t done, int64_t total);

/* mf_curop_killed: true once killOp targeted this operation (checked by long-running loops). */
bool mf_curop_killed(const mf_curop_t *op);

/* mf_curop_opid: the operation's id. */
int64_t mf_curop_opid(const mf_curop_t *op);

/* mf_curop_end: unregisters and frees op (NULL is ignored). */
void mf_curop_end(mf_curop_t *op);

/*
 * mf_curop_set_current / mf_curop_current: the calling thread's current
 * operation (set by mf_cmd_run around a command), so code below the command
 * (an index build) can report progress on it. NULL when none.
 */
void mf_curop_set_current(mf_curop_t *op);
mf_curop_t *mf_curop_current(void);

/*
 * mf_curop_report: appends one document per registered operation to the
 * array builder arr (opid, active, op, ns, desc, command, secs_running,
 * microsecs_running, msg, progress, client/connectionId), keys "<*count>",
 * "<*count + 1>" ..., advancing *count. include_idle has no effect (mayfly
 * registers active operations only).
 */
void mf_curop_report(bson_t *arr, int *count);

/*
 * mf_curop_report_each: calls fn with each operation's currentOp document
 * (valid during the call), outside the registry's mutex, in opid order.
 */
void mf_curop_report_each(void (*fn)(void *arg, const bson_t *doc), void *arg);

/* mf_curop_kill: marks opid killed; false if unknown. */
bool mf_curop_kill(int64_t opid);

#endif /* MF_CUROP_H */
