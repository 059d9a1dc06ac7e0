/*
 * engine.h: the engine handle, one open database.
 *
 * Everything one open database needs hangs off mf_engine_t (no process
 * globals): storage, catalog, the cursor table, parameters, the operation
 * registry, the write observers, the TTL monitor, the profiler's settings,
 * the logical session cache and the cursor reaper. mf_engine_open builds them in order and
 * mf_engine_close tears them down in reverse, so two engines can be open in
 * one process and each expires its own data. The command layer (cmd/) runs
 * commands against an engine; include/mayfly.h is the public face of it.
 *
 * Fields are set by mf_engine_open (and, before serving, by the front end:
 * cmdline, host, port, on_shutdown) and immutable after that, except the
 * atomics and the structures with their own locks.
 */
#ifndef MF_ENGINE_H
#define MF_ENGINE_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "catalog/observer.h"
#include "common/compressor.h"
#include "common/curop.h"
#include "common/error.h"
#include "common/failpoint.h"
#include "common/params.h"
#include "common/sysres.h"
#include "storage/storage.h"

typedef struct mf_cursors mf_cursors_t;

/* What a command does, for replication's admission check (mf_repl_hooks_t.admit). */
typedef enum { MF_REPL_OTHER = 0, MF_REPL_READ, MF_REPL_WRITE } mf_repl_kind_t;

typedef enum { MF_STMT_BEGIN = 0, MF_STMT_BEGIN_INSERTS, MF_STMT_FAILED, MF_STMT_UNTRACKED } mf_stmt_event_t;

/* The most failed statements a session row lists; a retry of a write with more answers 217. */
#define MF_STMT_RESUME_MAX 64

/*
 * A retried insert, update or delete whose first attempt did part of its
 * statements (mongod re-runs the statements its oplog does not show, so a
 * retried ordered insert stopped by a duplicate key fails again instead of
 * reporting success): statements below s are done except the ne listed in
 * e (ascending), which failed without writing and run again with every
 * statement from s on; counts are the inserts, updates and deletes the
 * done ones made, added to the reply's, upserts those of the inserts that
 * a bulkWrite's updates made. A bulkWrite retry comes here even when
 * every op is done, its reply rebuilt from these.
 */
typedef struct mf_stmt_resume {
    int64_t s;
    int64_t e[MF_STMT_RESUME_MAX];
    int ne;
    int64_t counts[3];
    int64_t upserts;
} mf_stmt_resume_t;

/*
 * Replication's figures for serverStatus (mf_repl_hooks_t.stats), counted
 * since the member started: applied holds the operations the applier
 * applied from other members' entries by kind (insert, update, delete,
 * command: opcountersRepl); retried_commands the retryable writes
 * answered from their session rows as retries, retried_statements the
 * statements those held; session_writes the session rows written
 * (mongod's config.transactions writes).
 */
typedef struct mf_repl_stats {
    int64_t applied[4];
    int64_t retried_commands, retried_statements, session_writes;
} mf_repl_stats_t;

/*
 * Replication's face to the command layer: src/repl/repl.c fills one in and
 * hangs it on the engine (eng->repl, before serving); NULL on a standalone.
 * The command layer is below replication, so it calls up only through these.
 */
typedef struct mf_repl_hooks {
    /*
     * hello / isMaster: appends the writable-primary flag (ismaster under
     * the legacy names), secondary, and the set's fields (setName, hosts,
     * primary, me, setVersion, electionId, lastWrite).
     */
    void (*hello)(void *arg, const bson_t *cmd, bool legacy_name, bson_t *reply);
    /* May a command of this kind on db run on this member now? 0, or -1 with err (10107, 13435). */
    int (*admit)(void *arg, const char *db, mf_repl_kind_t kind, bool secondary_ok, mf_error_t *err);
    /* The replSet* commands (and the members' internal ones): fills reply; 0 or -1 with err. */
    int (*command)(void *arg, const char *name, const bson_t *cmd, bson_t *reply, mf_error_t *err);
    /*
     * Around every command, on its thread: begin with the write concern's
     * wtimeout (ms, 0 none) for the writes it makes (and the command, for
     * retryable writes); end once it is done and
     * holds no lock (a DDL command waits there for its log entry's commit).
     */
    /*
     * begin may answer the command itself (a retried retryable write): it
     * then fills reply and returns 1; -1 fails the command with err; 0 runs
     * it; 2 runs it as the retry of an insert, update or delete that did
     * part of its statements, described in *resume (see mf_stmt_resume_t).
     * nstmts: an insert's, update's or delete's statements (in its body or
     * a document sequence), 1 for any other command.
     */
    int (*command_begin)(void *arg, const char *name, const bson_t *cmd, int64_t nstmts, int64_t wtimeout_ms,
                         bson_t *reply, mf_stmt_resume_t *resume, mf_error_t *err);
    void (*command_end)(void *arg);
    /*
     * A retryable insert, update, delete or bulkWrite reports its statements
     * (indices into the command's array, ascending), so its session row can
     * say which ones a retry must run again: MF_STMT_BEGIN before an
     * update's or delete's statement runs, MF_STMT_BEGIN_INSERTS before a
     * bulkWrite's run of consecutive inserts starting at index (each
     * document inserted or failed is the next statement), MF_STMT_FAILED
     * when one (an insert's document too) fails without writing,
     * MF_STMT_UNTRACKED (index ignored) when the command cannot say which
     * ones it wrote (an insert into a time-series collection): its retry is
     * answered from counts. NULL allowed.
     */
    void (*stmt)(void *arg, int64_t index, mf_stmt_event_t what);
    /*
     * After a command failed with 64 WriteConcernFailed (its wtimeout ran
     * out): the inserts, updates and deletes it had written (counts[0..2]),
     * which raft may still commit; false if none.
     */
    bool (*wtimeout_counts)(void *arg, int64_t counts[3]);
    /* The data-bearing members in the set's config (a numeric w above it cannot be satisfied). */
    int (*data_members)(void *arg);
    /*
     * A numeric write concern w above a majority: after this thread's
     * command wrote (and raft committed it on a majority), waits until w
     * members' logs hold its last entry, or wtimeout_ms (0: no limit) runs
     * out (64 WriteConcernFailed), the member steps down (189) or the
     * operation is interrupted; 0, or -1 with err. Returns at once when the
     * command wrote nothing or w is at most a majority.
     */
    int (*wait_members)(void *arg, int w, int64_t wtimeout_ms, mf_error_t *err);
    /*
     * Causal consistency. op_time: the reply's operationTime and
     * $clusterTime.clusterTime (a Timestamp) for this thread's command, at
     * least the last oplog timestamp it wrote. after_cluster_time: waits
     * until this member has applied (secs, inc) (readConcern
     * afterClusterTime or atClusterTime, named by field for its error;
     * gsecs/ginc the command's gossiped $clusterTime, 0 none); 0, or -1
     * with err.
     */
    void (*op_time)(void *arg, uint32_t *secs, uint32_t *inc);
    int (*after_cluster_time)(void *arg, const char *field, uint32_t secs, uint32_t inc, uint32_t gsecs, uint32_t ginc,
                              mf_error_t *err);
    /* serverStatus's figures (mf_repl_stats_t) into out; any thread, takes no lock. */
    void (*stats)(void *arg, mf_repl_stats_t *out);
    /*
     * Whether session id's transaction txn committed, from the session row
     * its commit's entry left on every member (a commit retried on a later
     * primary, cmd/cmd_txn.c). Any thread; reads storage.
     */
    bool (*txn_committed)(void *arg, const uint8_t id[16], int64_t txn);
    /*
     * The txnNumber of session id's newest retryable write or committed
     * transaction, from its session row; -1 when it has none. A transaction
     * may not start below it (225) or at it (117), as mongod's one
     * txnNumber per session. Any thread; reads storage. NULL allowed.
     */
    int64_t (*session_txn)(void *arg, const uint8_t id[16]);
} mf_repl_hooks_t;
typedef struct mf_profiler mf_profiler_t;
typedef struct mf_ttl_monitor mf_ttl_monitor_t;

/*
 * The engine handle: everything one open database needs hangs off it (no
 * process globals), so two engines can be open in one process, each with
 * its own parameters, operations, observers, TTL monitor and cursors.
 */
typedef struct mf_engine {
    mf_storage_t *st;
    mf_catalog_t *cat;
    mf_cursors_t *cursors;
    mf_params_t *params;         /* server parameters */
    mf_curops_t *curops;         /* operations in flight (currentOp, killOp) */
    mf_failpoints_t *failpoints; /* fault injection (configureFailPoint, common/failpoint.h) */
    mf_failpoint_t *fp_fail_command; /* failpoints' failCommand and maxTimeAlwaysTimeOut, looked at on */
    mf_failpoint_t *fp_max_time;     /* every request: found once (they live as long as failpoints) */
    mf_failpoint_t *fp_getmore;      /* failGetMoreAfterCursorCheckout, looked at on every getMore */
    mf_param_t *prm_notablescan;     /* params' notablescan, read as each command begins (found once) */
    mf_param_t *prm_user_roles;      /* params' enableAccessToUserRoles, read as each command begins (found once) */
    mf_observers_t *observers;   /* write observers: opcounters, TTL wake-ups */
    mf_ttl_monitor_t *ttl;       /* the TTL monitor */
    struct mf_autocompact *autocompact; /* background compaction (autoCompact; catalog/autocompact.h) */
    struct mf_archive *archive;  /* archive-on-expire's segments under <dbpath>/archive (archive/archive.h) */
    mf_profiler_t *profiler;     /* profiling levels */
    struct mf_sessions *sessions; /* the logical session cache (engine/sessions.h) */
    /*
     * Multi-document transactions (cmd/cmd_txn.c): the command layer's
     * registry, made on first use (a compare-and-swap), and its stop
     * function, which mf_engine_close calls first (each open transaction
     * rolls back, its thread exits) before anything it uses closes.
     */
    _Atomic(void *) txns;
    void (*txns_stop)(void *txns);
    /* ... and its abort of every open transaction, at each role change (mongod aborts them on step-down) and shutdown. */
    void (*txns_abort_all)(void *txns);
    bool in_memory;              /* WiredTiger in memory (--inMemory) */
    mf_sysres_t sysres;          /* the CPUs and memory granted, read once at open (common/sysres.h) */
    char *tmp_dir;               /* aggregation spill files (<dbpath>/_tmp), NULL in memory ($TMPDIR) */
    /*
     * fsync {lock: true} (cmd_compact.c): while fsync_count > 0 no write
     * commits: mf_engine_write_gate holds every writer (commands before
     * they start, document-write transactions before they commit, DDL
     * before it begins) until fsyncUnlock brings the count to 0. fsync_locked
     * mirrors count > 0 for the writers' lock-free fast path.
     */
    pthread_mutex_t fsync_mu;
    pthread_cond_t fsync_cv;
    int64_t fsync_count;          /* guarded by fsync_mu */
    _Atomic bool fsync_locked;
    /*
     * Writers past the gate and not yet committed or rolled back (document
     * transactions between their commit's prepare and its end, catalog
     * changes between begin and end): the lock waits for them to drain
     * before its checkpoint, so nothing commits after it answers.
     */
    _Atomic int64_t fsync_inflight;
    pthread_t reaper;            /* closes idle cursors */
    pthread_mutex_t reaper_mu;
    pthread_cond_t reaper_cv;
    bool reaper_stop;
    bson_oid_t process_id;    /* hello's topologyVersion.processId: one per engine */
    _Atomic int64_t topology_version; /* hello's topologyVersion.counter: bumped on every role change */
    pthread_mutex_t topo_mu;          /* guards on_topology, on_stop_request and on_log_rotate (their setters) */
    void (*on_topology)(void *arg);   /* the network layer's: answer held awaitable hellos now */
    void *on_topology_arg;
    void (*on_stop_request)(void *arg); /* the network layer's: begin a clean shutdown (the shutdown command) */
    void *on_stop_request_arg;
    int (*on_log_rotate)(void *arg);   /* the process's: reopen its log file (the logRotate command) */
    void *on_log_rotate_arg;
    pthread_mutex_t net_status_mu;    /* guards on_net_status (its own: it waits on the pools' locks) */
    void (*on_net_status)(void *arg, bson_t *network); /* the network layer's: its part of serverStatus.network */
    void *on_net_status_arg;
    bool auth_enabled;           /* access control (--auth, --keyFile): cmd/cmd_auth.c checks every network command */
    _Atomic int64_t users_gen;   /* bumped on every change to admin.system.users or .roles (auth/users.h) */
    /*
     * Held by the user and role management commands (cmd_auth.c), as
     * mongod's user management lock: one at a time, so a role's existence
     * checked by one still holds when it writes (no reference to a role a
     * concurrent dropRole removed, no cycle from two crossing grants).
     */
    pthread_mutex_t auth_mgmt_mu;
    /*
     * Set once a user or role has been seen (cmd_auth.c), and never cleared
     * while the engine runs: the localhost exception stays closed after the
     * auth collections are renamed or dropped, as mongod's
     * _hasAnyPrivilegeDocuments.
     */
    _Atomic bool auth_docs_seen;
    struct mf_scram_cred *cluster_cred; /* --keyFile: __system@local's SCRAM-SHA-256 credential (owned), or NULL */
    struct mf_saslprep *saslprep; /* RFC 4013 profile for SCRAM-SHA-256 passwords (auth/saslprep.h): read-only, any thread */
    const mf_repl_hooks_t *repl; /* NULL: a standalone server */
    void *repl_arg;
    int64_t start_ms;         /* wall clock at start, ms since epoch */
    int64_t start_mono_ms;    /* monotonic clock at start */
    char host[256];           /* "hostname:port" for hello.me */
    int port;
    bson_t *cmdline_argv;     /* getCmdLineOpts.argv */
    bson_t *startup_warnings; /* getLog "startupWarnings": log lines (an array of strings), or NULL; set before serving */
    bson_t *cmdline_parsed;   /* getCmdLineOpts.parsed */
    /* serverStatus counters (opcounters, connections, TTL) */
    _Atomic int64_t op_insert, op_query, op_update, op_delete, op_getmore, op_command;
    /*
     * serverStatus metrics.commands: two counters per command the command
     * layer knows (total, failed), by its index in cmd_dispatch.c's tables;
     * allocated by that layer on first use (NULL before), freed with the
     * engine. cmd_unknown: commands of no known name (metrics.commands
     * "<UNKNOWN>"). docs_returned: documents handed to clients in cursor
     * batches (metrics.document.returned).
     */
    _Atomic(_Atomic int64_t *) cmd_counts;
    /*
     * logComponentVerbosity's components and sub-components (cmd_admin.c
     * names them, by index): each one's verbosity + 1, so 0 (as the engine
     * starts) is mongod's -1, "the parent's level" (logLevel's at the top).
     */
#define MF_LOG_COMPONENTS 52
    _Atomic int8_t log_verbosity[MF_LOG_COMPONENTS];
    _Atomic int64_t cmd_unknown, docs_returned;
    /*
     * serverStatus metrics.commands.create.validator / collMod.validator
     * (mongod's ValidatorCounters): [0] create, [1] collMod; each total,
     * failed, jsonSchema (validators given, refused, with a top-level
     * $jsonSchema).
     */
    _Atomic int64_t validator_counts[2][3];
    /*
     * serverStatus metrics.queryExecutor and metrics.operation, summed from
     * each finished operation's scan figures (mf_curop_scan_t): keys and
     * documents examined, operations that scanned a whole collection (and
     * of those, the ones not on a tailable cursor), write conflicts retried.
     */
    _Atomic int64_t qe_scanned, qe_scanned_objects, qe_collscans, qe_collscans_nontailable, write_conflicts;
    _Atomic int64_t scan_and_order; /* operations that ran a blocking sort (metrics.operation.scanAndOrder) */
    /*
     * serverStatus asserts.user: commands answered with an error (ok: 0)
     * and write errors in write commands' replies, MongoDB's uasserts
     * (kept by cmd/cmd_dispatch.c).
     */
    _Atomic int64_t asserts_user;
    /* serverStatus globalLock.activeClients: commands running that read or write documents (cmd_dispatch.c). */
    _Atomic int64_t active_readers, active_writers;
    _Atomic int64_t conn_current, conn_total, conn_active;
    _Atomic int64_t conn_rejected; /* connections closed at accept (src/net/net.c): over --maxConns, or no fds left */
    _Atomic int64_t conn_max; /* connections the server accepts at once (src/net/net.c), 0 before it serves */
    /*
     * serverStatus network (kept by src/net/net.c): the bytes of the
     * messages read and written on client connections (inside TLS on a TLS
     * one), the messages read, and those a worker read and ran on a
     * connection it held (no thread hand-off).
     */
    _Atomic int64_t net_bytes_in, net_bytes_out, net_requests, net_held_requests;
    /*
     * Wire compression (src/net/net.c): the compressors the server offers
     * (--networkMessageCompressors, in its order; empty: disabled, and
     * always empty for an embedded engine), set by mf_net_serve before the
     * first connection and read-only after; hello negotiates from it and
     * serverStatus lists it. net_compression[id] counts, as mongod's
     * network.compression does, the bytes given to and produced by that
     * compressor ([0] compressor in, [1] compressor out) and decompressor
     * ([2] in, [3] out), message bodies without their headers.
     */
    mf_compressor_list_t net_compressors;
    _Atomic int64_t net_compression[MF_COMPRESSOR_COUNT][4];
    /*
     * What compression saved: the logical bytes (messages as they are
     * uncompressed, mongod's bytesIn / bytesOut) less the physical ones
     * (net_bytes_in / net_bytes_out, mongod's physicalBytesIn / Out).
     */
    _Atomic int64_t net_logical_in_extra, net_logical_out_extra;
    _Atomic int64_t batched_deletes_docs, batched_deletes_batches;
    /*
     * serverStatus metrics.getLastError (cmd_dispatch.c): waits for a write
     * concern of w > 1 members after the write, their milliseconds, and how
     * many ran out of wtimeout.
     */
    _Atomic int64_t wc_waits, wc_wait_ms, wc_timeouts;
    _Atomic int64_t next_conn_id;
    _Atomic int64_t fg_ops;   /* data commands started: the TTL pacer yields while it moves */
    /*
     * Shutdown hook, NULL for none; set before serving. On SIGINT/SIGTERM the
     * network layer (src/net/net.c) stops accepting and reading, closes idle
     * connections, then calls on_shutdown(on_shutdown_arg) once, on its I/O
     * thread, before it waits for the commands in flight (each one's reply
     * is still written, then its connection closes): the place to interrupt
     * running operations (InterruptedAtShutdown) so that the wait ends
     * promptly. Must not block.
     */
    void (*on_shutdown)(void *arg);
    void *on_shutdown_arg;
} mf_engine_t;

/*
 * Engine options: dbpath (must exist or be creatable; with in_memory only a
 * scratch home for WiredTiger), in_memory, and parameter assignments
 * ("name=value", as --setParameter) applied before anything starts.
 */
typedef struct mf_engine_opts {
    const char *dbpath;
    bool in_memory;
    int64_t cache_mb; /* WiredTiger's cache in MB; 0: mongod's default for the memory granted (storage.h) */
    const char *const *set_params;
    size_t nset_params;
    bool repl_member; /* started with --replSet: the TTL monitor starts paused until this member is primary */
    bool auth;        /* access control on (--auth) */
    /*
     * What this process is granted (common/sysres.h), as the caller read it
     * (main reads it once to size the cache and the warm workers); NULL: the
     * engine reads it. Copied into eng->sysres.
     */
    const mf_sysres_t *sysres;
} mf_engine_opts_t;

/*
 * mf_engine_open: opens storage and catalog, starts the TTL monitor and the
 * cursor reaper. Returns 0 with *out, or -1 with err (nothing left open).
 */
int mf_engine_open(const mf_engine_opts_t *opts, mf_engine_t **out, mf_error_t *err) MF_WUR;
/*
 * mf_engine_interrupt: interrupts every operation in flight and every one
 * started from now on (11600 InterruptedAtShutdown): the first step of a
 * shutdown, so close does not wait for long queries.
 */
void mf_engine_interrupt(mf_engine_t *eng);
/*
 * mf_engine_write_gate: returns at once unless the server is fsync-locked;
 * then waits until it is unlocked, in short slices that let killOp,
 * maxTimeMS and shutdown end the wait for the calling thread's operation
 * (-1 with err as mf_curop_check; currentOp shows it waitingForLock).
 * Without an operation it waits until unlocked or shutdown. Returns 0 when
 * the caller may write.
 */
int mf_engine_write_gate(mf_engine_t *eng, mf_error_t *err) MF_WUR;
/*
 * mf_engine_fsync_lock: raises the fsync lock count, then waits until every
 * writer already past the gate has finished (bounded by the operation's
 * killOp / maxTimeMS: -1 with err, the count lowered again). Returns the
 * new count, or -1. mf_engine_fsync_unlock lowers it: the new count, or -1
 * when it was not locked.
 */
int64_t mf_engine_fsync_lock(mf_engine_t *eng, mf_error_t *err);
int64_t mf_engine_fsync_unlock(mf_engine_t *eng);
/*
 * mf_engine_topology_changed: bumps topology_version and wakes the awaitable
 * hellos waiting on it (on_topology). Any thread.
 */
void mf_engine_topology_changed(mf_engine_t *eng);
/* mf_engine_set_topology_hook: sets (or with NULL clears) on_topology; after it returns the old hook is not running. */
void mf_engine_set_topology_hook(mf_engine_t *eng, void (*fn)(void *arg), void *arg);
/*
 * mf_engine_set_stop_hook: sets (or with NULL clears) on_stop_request, as
 * mf_engine_set_topology_hook. mf_engine_request_stop asks the network
 * layer to shut the server down as SIGTERM does (any thread; returns at
 * once); false when nothing serves the engine (embedded use).
 */
void mf_engine_set_stop_hook(mf_engine_t *eng, void (*fn)(void *arg), void *arg);
bool mf_engine_request_stop(mf_engine_t *eng);
/*
 * mf_engine_set_log_rotate_hook: sets (or with NULL clears) on_log_rotate,
 * as mf_engine_set_topology_hook: the process that logs to a file reopens
 * it (after a log rotator moved it away). mf_engine_rotate_log calls it (any
 * thread): 0 when done or when there is no log file, -1 with errno when the
 * file cannot be opened.
 */
void mf_engine_set_log_rotate_hook(mf_engine_t *eng, int (*fn)(void *arg), void *arg);
/*
 * mf_engine_set_net_status_hook: sets (or with NULL clears) on_net_status:
 * the network layer appends what only it knows (its worker pools) to
 * serverStatus's network section. mf_engine_net_status_append calls it
 * (any thread; nothing without a network layer, as embedded) under
 * net_status_mu, which the setter takes too, so a cleared hook is not
 * running: the hook must not block for long nor call back into the engine.
 */
void mf_engine_set_net_status_hook(mf_engine_t *eng, void (*fn)(void *arg, bson_t *network), void *arg);
void mf_engine_net_status_append(mf_engine_t *eng, bson_t *network);
int mf_engine_rotate_log(mf_engine_t *eng);
/* mf_engine_close: stops background work, checkpoints and frees eng. No command may be running. */
void mf_engine_close(mf_engine_t *eng);

#endif /* MF_ENGINE_H */
