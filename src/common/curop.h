/*
 * curop.h: the registry of operations in flight, for currentOp and killOp,
 * and interruption.
 *
 * Every engine owns one registry (mf_curops_t). Every command run by
 * mf_cmd_run registers itself for its duration; a background task (an index
 * build, a TTL deletion batch) registers itself the same way. Entries are
 * owned by the registry; a caller keeps the pointer mf_curop_begin returned
 * until it calls mf_curop_end, and may update progress in between. All
 * functions are thread-safe (one mutex, never held while calling out), and
 * none takes the catalog lock, so currentOp answers while DDL holds it.
 *
 * Interruption: killOp (mf_curops_kill) and shutdown (mf_curops_interrupt_all)
 * set an operation's kill code; every long loop calls mf_curop_check (or
 * mf_curop_check_current for the calling thread's operation) at its yield
 * points, which fails with that code (11601 Interrupted, 11600
 * InterruptedAtShutdown) or with 50 MaxTimeMSExpired once the operation's
 * deadline has passed. This module sits in common/ so that every layer
 * (query execution, the TTL monitor, index builds) can check it.
 */
#ifndef MF_CUROP_H
#define MF_CUROP_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct mf_curop mf_curop_t;
typedef struct mf_curops mf_curops_t;
typedef struct mf_curop_conn mf_curop_conn_t;

/* mf_curops_new / mf_curops_free: an engine's registry. Free only when no operation is registered. */
mf_curops_t *mf_curops_new(void);
void mf_curops_free(mf_curops_t *reg);

/*
 * mf_curop_begin: registers an operation. op_type is MongoDB's "op" field
 * ("command", "query", "insert", "update", "remove", "getmore", "none"); ns is
 * "db.coll" (may be ""); desc is the thread description currentOp shows
 * ("conn12", "TTLMonitor", "IndexBuildsCoordinator"); command may be NULL
 * (copied; one over 1 KB is shown as {$truncated: "<text>"} like mongod);
 * client_id is the connection id (0 for background work).
 * Returns the entry; never NULL.
 */
mf_curop_t *mf_curop_begin(mf_curops_t *reg, const char *op_type, const char *ns, const char *desc, const bson_t *command,
                           int64_t client_id);

/*
 * mf_command_shown: a copy of command for currentOp and logs (caller
 * destroys it): the command itself up to max bytes, else {$truncated:
 * "<its relaxed extended JSON, cut at max bytes>"}, as mongod shows large
 * commands; either way with its secrets blanked (mf_command_redacted).
 * NULL gives {}.
 */
bson_t *mf_command_shown(const bson_t *command, size_t max);

/*
 * mf_command_redacted: for the commands that carry secrets (createUser,
 * updateUser, saslStart, saslContinue, authenticate), a copy with their
 * top-level pwd and payload replaced by "xxx", as mongod blanks them before
 * a command is shown, logged or profiled; NULL for any other command (show
 * it as it is). The caller destroys the copy.
 */
bson_t *mf_command_redacted(const bson_t *command);

/*
 * mf_curop_add_paused: adds us microseconds during which op waited for
 * something other than its own work (a tailable awaitData getMore waiting
 * for documents): as mongod's paused timer, that time is left out of its
 * latency (opLatencies, latencyStats, top) and of the slow-query log.
 * mf_curop_paused_us reads the total. NULL is ignored (0).
 */
void mf_curop_add_paused(mf_curop_t *op, int64_t us);
int64_t mf_curop_paused_us(const mf_curop_t *op);

/*
 * What an operation's queries read, as mongod's profiler and slow query log
 * report it: keys and documents examined, over every scan the operation ran,
 * and the summary of its first plan ("COLLSCAN", "IXSCAN { a: 1 }"); whether
 * one of its scans read the whole collection (serverStatus
 * metrics.queryExecutor.collectionScans); whether it sorted in memory
 * (hasSortStage, metrics.operation.scanAndOrder); the write conflicts it retried
 * (the profiler's writeConflicts, metrics.operation.writeConflicts).
 */
typedef struct mf_curop_scan {
    int64_t keys_examined, docs_examined, write_conflicts;
    bool collscan;
    bool has_sort_stage; /* it sorted results no index ordered (a blocking sort: mongod's hasSortStage) */
    char plan[160]; /* "" when no query ran */
} mf_curop_scan_t;

/*
 * mf_curop_note_scan: adds a scan's keys and documents to op (NULL: no
 * operation, nothing done); collscan: the scan was a collection scan; plan
 * is its summary, kept if op has none yet (plan_fn builds it into buf only
 * then, so a repeated scan costs no text); from then on currentOp shows it
 * as planSummary (the executor notes it before its scan starts).
 */
void mf_curop_note_scan(mf_curop_t *op, int64_t keys, int64_t docs, bool collscan,
                        void (*plan_fn)(const void *arg, char *buf, size_t cap), const void *arg);
/* mf_curop_note_sort: op (NULL: none, nothing done) ran a blocking sort. Its own thread only. */
void mf_curop_note_sort(mf_curop_t *op);
/* mf_curop_note_conflict: op (NULL: none, nothing done) met a write conflict and retries. */
void mf_curop_note_conflict(mf_curop_t *op);
/* mf_curop_scan_of: op's scan figures so far into *out (zero for NULL). */
void mf_curop_scan_of(const mf_curop_t *op, mf_curop_scan_t *out);

/*
 * Who runs an operation, as currentOp shows it: remote, the client's
 * address ("127.0.0.1:53211", "client"); app, its handshake's application
 * name ("appName"; may be NULL or ""); metadata, its handshake's client
 * metadata ("clientMetadata"; may be NULL); user and user_db, the
 * authenticated user ("effectiveUsers"; NULL: none); lsid_id and lsid_uid,
 * the command's logical session ("lsid" {id, uid}; NULL: none; copied).
 * The user and the addresses are copied (a user is cut at
 * MF_CUROP_USER_MAX - 1 bytes, its database at MF_CUROP_DB_MAX - 1, as the
 * connection's auth state bounds them); the metadata is borrowed: it must
 * stay valid until the operation ends, as a connection's does (it is set
 * once, at the first hello).
 */
#define MF_CUROP_USER_MAX 256
#define MF_CUROP_DB_MAX 128
typedef struct mf_curop_client {
    const char *remote, *app;
    const bson_t *metadata;
    const char *user, *user_db;
    const uint8_t *lsid_id, *lsid_uid;
    mf_curop_conn_t *conn; /* the connection's entry (mf_curops_conn_open), NULL none: op counts as its activity */
} mf_curop_client_t;

/* mf_curop_set_client: records who runs op (NULL op or who->remote: nothing done). */
void mf_curop_set_client(mf_curop_t *op, const mf_curop_client_t *who);

/*
 * Client connections, for $currentOp's idleConnections (currentOp with
 * $all: true). mf_curops_conn_open registers connection id from remote
 * ("ip:port") and returns its entry, owned by the registry until
 * mf_curop_conn_close (call it once, after the connection's last command
 * ended). mf_curop_conn_hello records its handshake's application name
 * (copied) and metadata (borrowed: it must stay valid until the close, as
 * mf_client_t's does). An operation given the entry in mf_curop_set_client
 * makes the connection active until it ends, and records its user (copied).
 * mf_curops_report_idle_conns calls fn(arg, doc) with the currentOp
 * document of every connection no operation runs for ({type: "op", host,
 * desc: "connN", connectionId, client, appName?, clientMetadata?, active:
 * false, currentOpTime: now, effectiveUsers?, isFromUserConnection}; host
 * NULL: left out), built under the mutex and handed out after it.
 */
mf_curop_conn_t *mf_curops_conn_open(mf_curops_t *reg, int64_t id, const char *remote);
void mf_curop_conn_hello(mf_curop_conn_t *c, const char *app, const bson_t *metadata);
void mf_curop_conn_close(mf_curop_conn_t *c);
void mf_curops_report_idle_conns(mf_curops_t *reg, const char *host, void (*fn)(void *arg, const bson_t *doc), void *arg);

/* mf_curop_set_progress: sets msg and progress {done, total} shown by currentOp. */
void mf_curop_set_progress(mf_curop_t *op, const char *msg, int64_t done, int64_t total);

/*
 * mf_curop_interrupt: op (not NULL) fails with code ("operation was
 * interrupted") at its next check, unless it was already killed: as
 * mongod's killOperation with a code (killCursors of a pinned cursor: 237).
 */
void mf_curop_interrupt(mf_curop_t *op, int code);

/* mf_curop_killed: true once killOp or shutdown targeted this operation (NULL: false). */
bool mf_curop_killed(const mf_curop_t *op);

/* mf_curop_set_deadline: the operation fails with 50 once the monotonic clock passes mono_ms (0: none). */
void mf_curop_set_deadline(mf_curop_t *op, int64_t mono_ms);
/* mf_curop_deadline: op's deadline (monotonic ms), 0 when it has none (or op is NULL). */
int64_t mf_curop_deadline(const mf_curop_t *op);

/*
 * mf_curop_check: the yield-point check. Returns 0 if op (may be NULL) may go
 * on; otherwise -1 with err set: 11601 Interrupted "operation was
 * interrupted" after killOp, 11600 InterruptedAtShutdown at shutdown, 50
 * MaxTimeMSExpired "operation exceeded time limit" past its deadline.
 * mf_curop_check_current checks the calling thread's current operation.
 */
int mf_curop_check(const mf_curop_t *op, mf_error_t *err) MF_WUR;
int mf_curop_check_current(mf_error_t *err) MF_WUR;

/*
 * mf_curop_lock: locks mu for the calling thread's current operation,
 * waiting in short slices so that killOp, maxTimeMS and shutdown end the
 * wait (-1, err set as mf_curop_check; mu not held). currentOp shows the
 * operation waitingForLock meanwhile, and the wait counts as paused time.
 * Without a current operation it is pthread_mutex_lock. Returns 0 with mu
 * held.
 */
int mf_curop_lock(pthread_mutex_t *mu, mf_error_t *err) MF_WUR;

/* mf_curop_set_waiting_for_lock: what currentOp's waitingForLock shows for op (NULL: nothing done). */
void mf_curop_set_waiting_for_lock(mf_curop_t *op, bool waiting);

/* mf_curop_is_background: true for an operation of the server's own (desc not "conn<N>": TTLMonitor ...). */
bool mf_curop_is_background(const mf_curop_t *op);

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

/* mf_curop_client_id: op's connection id (0 for background work or a NULL op). */
int64_t mf_curop_client_id(const mf_curop_t *op);

/*
 * mf_curops_report_each: calls fn with each operation's currentOp document
 * (valid during the call), outside the registry's mutex, in opid order: as
 * mongod's, {type: "op", host (left out when NULL), desc, connectionId?,
 * client?, appName?, clientMetadata?, active: true, currentOpTime (now),
 * effectiveUsers?, isFromUserConnection, opid, lsid?, secs_running,
 * microsecs_running, op, ns, command, msg?, progress?, numYields,
 * waitingForLock, killPending?}.
 */
void mf_curops_report_each(mf_curops_t *reg, const char *host, void (*fn)(void *arg, const bson_t *doc), void *arg);

/* mf_curops_seed_opid: the next opid handed out (tests: opids wrap from 2^31-1 back to 1). */
void mf_curops_seed_opid(mf_curops_t *reg, int64_t next);

/* mf_curop_owner_is: whether owner, a "user@db" (as a cursor's owner), names user on db. */
bool mf_curop_owner_is(const char *owner, const char *user, const char *db);

/* mf_curops_kill: marks opid killed (11601 at its next check); false if unknown. */
bool mf_curops_kill(mf_curops_t *reg, int64_t opid);

/*
 * mf_curops_kill_as: mf_curops_kill for a caller who may kill only the
 * operations of owner ("user@db"; NULL: any operation, as mf_curops_kill).
 * Returns 1 killed, 0 no operation opid, -1 opid runs for someone else (a
 * background operation, another user, an unauthenticated connection), which
 * is left running.
 */
int mf_curops_kill_as(mf_curops_t *reg, int64_t opid, const char *owner);

/*
 * mf_curops_interrupt_all: marks every registered operation, and every one
 * registered from now on, killed with code (11600 InterruptedAtShutdown at
 * shutdown).
 */
void mf_curops_interrupt_all(mf_curops_t *reg, int code);

/*
 * Per-namespace usage (the top command), kept as operations end:
 * time in microseconds and count, per MF_TOP_* slot. mf_curops_top_get
 * copies ns's counters (zeros and false when it has none). A dropped or
 * renamed collection's counters go (mongod's Top::collectionDropped). Only
 * reads and writes of documents add a namespace (see top_record in curop.c),
 * MF_TOP_MAX_NS at most.
 */
enum {
    MF_TOP_TOTAL = 0,
    MF_TOP_READ_LOCK,
    MF_TOP_WRITE_LOCK,
    MF_TOP_QUERIES,
    MF_TOP_GETMORE,
    MF_TOP_INSERT,
    MF_TOP_UPDATE,
    MF_TOP_REMOVE,
    MF_TOP_COMMANDS,
    MF_TOP_N
};
#define MF_TOP_MAX_NS 10000 /* namespaces kept at most (about 2 KB each) */
bool mf_curops_top_get(mf_curops_t *reg, const char *ns, int64_t time_us[MF_TOP_N], int64_t count[MF_TOP_N]);
/*
 * mf_curops_top_forget: forgets db.coll's counters and latencies, or those of
 * every collection of db when coll is NULL (drops, renames, replacements).
 */
void mf_curops_top_forget(mf_curops_t *reg, const char *db, const char *coll);

/*
 * Operation latencies (serverStatus opLatencies, $collStats latencyStats):
 * each client command that ends is counted once, server-wide and in its
 * namespace's entry (the top table above), in the histogram of its kind,
 * with the time from its registration to mf_curop_end in microseconds.
 * The buckets are MongoDB's (OperationLatencyHistogram): powers of two up
 * to 1024 µs, each power split in two from 2048 µs to 2^21 µs, powers of
 * two again up to 2^40 µs, the last bucket taking everything above; bucket
 * 0 holds 0 and 1 µs. Kinds follow mongod's read/write/command split; the
 * kind is set by the caller (mf_curop_set_latency_kind), and an operation
 * left at MF_LAT_NONE (the default: background work, awaitable hellos) is
 * not counted.
 */
enum { MF_LAT_READS = 0, MF_LAT_WRITES, MF_LAT_COMMANDS, MF_LAT_TRANSACTIONS, MF_LAT_N, MF_LAT_NONE = -1 };
#define MF_LAT_BUCKETS 51
typedef struct mf_latency {
    int64_t buckets[MF_LAT_BUCKETS];
    int64_t sum_us; /* "latency": the total, µs */
    int64_t ops;
} mf_latency_t;

/* mf_latency_bucket: the bucket that holds a latency of us microseconds. */
int mf_latency_bucket(uint64_t us);
/* mf_latency_lower_bound: bucket b's lower bound in µs, as the histogram's "micros" shows it (0 <= b < MF_LAT_BUCKETS). */
uint64_t mf_latency_lower_bound(int b);

/* mf_curop_set_latency_kind: counts op, when it ends, as kind (an MF_LAT_* value; MF_LAT_NONE: not at all). */
void mf_curop_set_latency_kind(mf_curop_t *op, int kind);

/*
 * mf_curop_set_no_table_scan / mf_curop_no_table_scan: whether the
 * notablescan parameter was on when a client's command began (the command
 * layer sets it; the planner reads it through mf_curop_current, see
 * query/plan.c no_table_scan). False for the server's own operations.
 */
void mf_curop_set_no_table_scan(mf_curop_t *op, bool on);

/*
 * mf_curop_now_ms: the wall clock when op began (NULL: now), milliseconds
 * since the epoch: aggregation's $$NOW, one value for the whole operation
 * as in mongod.
 */
int64_t mf_curop_now_ms(const mf_curop_t *op);
/* mf_curop_set_now_ms: makes ms (not 0) op's $$NOW: a getMore takes its cursor's (mf_cursor_t.now_ms). */
void mf_curop_set_now_ms(mf_curop_t *op, int64_t ms);
bool mf_curop_no_table_scan(const mf_curop_t *op);

/*
 * mf_curop_set_origin: the command that opened the cursor op (a getMore)
 * reads, copied (op or origin NULL: nothing done); currentOp, the profiler
 * and the slow-query log show it as originatingCommand, as mongod's.
 * mf_curop_take_origin: it, or NULL, now the caller's (bson_destroy), and
 * op's no longer (the command layer takes it as the operation ends, for
 * its profile entry and log line).
 */
void mf_curop_set_origin(mf_curop_t *op, const bson_t *origin);
bson_t *mf_curop_take_origin(mf_curop_t *op);

/*
 * mf_curops_latency_get: copies the latencies of ns ("db.coll"), or the
 * server-wide ones when ns is NULL, into out[MF_LAT_N] (zeros and false when
 * ns has none).
 */
bool mf_curops_latency_get(mf_curops_t *reg, const char *ns, mf_latency_t out[MF_LAT_N]);

/*
 * mf_latency_append: appends key: {reads, writes, commands, transactions},
 * each {histogram (only when histograms is set: one {micros, count} per
 * bucket holding any, in ascending order), latency, ops,
 * queryableEncryptionLatencyMicros (always 0)} as mongod shows them.
 */
void mf_latency_append(bson_t *parent, const char *key, const mf_latency_t lat[MF_LAT_N], bool histograms);

/* mf_curops_count: operations registered now. */
int mf_curops_count(mf_curops_t *reg);

#endif /* MF_CUROP_H */
