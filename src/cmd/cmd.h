/*
 * cmd.h: the command layer, the engine's entry point.
 *
 * mf_cmd_run takes one command (a database name, the command document and
 * any OP_MSG document sequences) and produces the reply document. It is the
 * only place that turns an mf_error_t into {ok: 0, errmsg, code, codeName}.
 * Commands are looked up in one table (cmd_dispatch.c) that every cmd_*.c
 * file contributes rows to; each row names the handler and flags.
 *
 * Threading: mf_cmd_run is called on worker threads, any number at once; it
 * uses the calling thread's storage session. Engine-wide state lives in
 * mf_engine_t: immutable after start except for the atomics and the
 * structures with their own locks (catalog, cursor table).
 */
#ifndef MF_CMD_H
#define MF_CMD_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "catalog/observer.h"
#include "common/clock.h"
#include "common/curop.h"
#include "common/error.h"
#include "common/limits.h"
#include "common/params.h"
#include "storage/storage.h"

typedef struct mf_cursors mf_cursors_t;
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
    mf_observers_t *observers;   /* write observers: opcounters, TTL wake-ups */
    mf_ttl_monitor_t *ttl;       /* the TTL monitor */
    mf_profiler_t *profiler;     /* profiling levels */
    bool in_memory;              /* WiredTiger in memory (--inMemory) */
    pthread_t reaper;            /* closes idle cursors */
    pthread_mutex_t reaper_mu;
    pthread_cond_t reaper_cv;
    bool reaper_stop;
    int64_t start_ms;         /* wall clock at start, ms since epoch */
    int64_t start_mono_ms;    /* monotonic clock at start */
    char host[256];           /* "hostname:port" for hello.me */
    int port;
    bson_t *cmdline_argv;     /* getCmdLineOpts.argv */
    bson_t *cmdline_parsed;   /* getCmdLineOpts.parsed */
    /* serverStatus counters (opcounters, connections, TTL) */
    _Atomic int64_t op_insert, op_query, op_update, op_delete, op_getmore, op_command;
    _Atomic int64_t conn_current, conn_total, conn_active;
    _Atomic int64_t batched_deletes_docs, batched_deletes_batches;
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

/* Connection-level state a command may read (hello, whatsmyuri, ...). */
typedef struct mf_client {
    int64_t id;
    char remote[80];  /* "127.0.0.1:53211" (an IPv6 address of up to 63 characters and a port fit) */
    bool helloed;     /* has done the handshake */
} mf_client_t;

/* The operation context handed to each command handler. */
typedef struct mf_op {
    mf_engine_t *eng;
    mf_client_t *client;
    mf_sess_t *sess;
    const char *db;
    const bson_t *cmd;
    const char *name;          /* the command name as sent (first key) */
    const mf_docseq_t *seqs;   /* OP_MSG kind-1 sections */
    size_t nseqs;
    bool legacy;               /* arrived as OP_QUERY */
    bson_t *reply;             /* initialised; the handler appends its fields */
    mf_error_t err;
    /* write-error details for write commands that fail as a whole */
} mf_op_t;

typedef int (*mf_cmd_fn)(mf_op_t *op);

#define MF_CMD_ADMIN_ONLY 0x1 /* must run against the admin database */
#define MF_CMD_WRITE 0x2      /* counts as a write for serverStatus */
#define MF_CMD_NO_DB 0x4      /* database name is not validated */

typedef struct mf_cmd_def {
    const char *name;
    mf_cmd_fn fn;
    unsigned flags;
    /*
     * The command's own fields (NULL-terminated), or NULL for "not checked".
     * When set, any other field that is not a generic argument (lsid, $db,
     * writeConcern ...) fails with 40415 "BSON field 'x.y' is an unknown field."
     */
    const char *const *fields;
} mf_cmd_def_t;

/* Per-file command tables (NULL-name terminated). */
extern const mf_cmd_def_t mf_cmds_admin[];
extern const mf_cmd_def_t mf_cmds_crud[];
extern const mf_cmd_def_t mf_cmds_coll[];
extern const mf_cmd_def_t mf_cmds_collmod[];

/*
 * Engine options: dbpath (must exist or be creatable; with in_memory only a
 * scratch home for WiredTiger), in_memory, and parameter assignments
 * ("name=value", as --setParameter) applied before anything starts.
 */
typedef struct mf_engine_opts {
    const char *dbpath;
    bool in_memory;
    const char *const *set_params;
    size_t nset_params;
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
/* mf_engine_close: stops background work, checkpoints and frees eng. No command may be running. */
void mf_engine_close(mf_engine_t *eng);

/*
 * mf_cmd_run: runs one command and fills reply (initialised by the caller)
 * with the full reply including ok. db is the target database. Never fails:
 * errors become {ok: 0, ...} replies.
 */
void mf_cmd_run(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd, const mf_docseq_t *seqs,
                size_t nseqs, bool legacy, bson_t *reply);

/*
 * mf_cmd_error_reply: replaces reply's content with MongoDB's error reply
 * {ok: 0, errmsg, code, codeName, ...err->info} (the network layer uses it
 * for requests that never reach a command). mf_cmd_legacy_query_error: the
 * OP_QUERY refusal shape ({$err, code, ok: 0, errmsg}).
 */
void mf_cmd_error_reply(bson_t *reply, const mf_error_t *err);
void mf_cmd_legacy_query_error(bson_t *reply, const mf_error_t *err, const char *dollar_err);

/* Helpers for handlers (cmd_util.c). Clocks: common/clock.h. */

/*
 * mf_op_docs: the documents of array field `field`, taken from the command
 * body or from a kind-1 sequence with that identifier. *docs points at an
 * array of static views valid for the command's life (free with free()).
 * Returns 0, or -1 with err (14 TypeMismatch if the field is not an array).
 * A missing field yields zero documents when optional, else 40414-style error.
 */
int mf_op_docs(mf_op_t *op, const char *field, bool optional, bson_t **docs, size_t *n) MF_WUR;

/* Field access with MongoDB's type errors (14 TypeMismatch "BSON field 'x.y' is the wrong type 'string', expected type 'object'"). */
int mf_op_get_doc(mf_op_t *op, const char *field, bson_t *out, bool *present) MF_WUR;
int mf_op_get_int64(mf_op_t *op, const char *field, int64_t *out, bool *present) MF_WUR;
int mf_op_get_bool(mf_op_t *op, const char *field, bool *out, bool *present) MF_WUR;
int mf_op_get_string(mf_op_t *op, const char *field, const char **out, bool *present) MF_WUR;

/* mf_op_coll_name: the collection named by the command's first field (must be a string). */
int mf_op_coll_name(mf_op_t *op, const char **name) MF_WUR;

/* mf_check_doc_for_storage: depth, size and field-name checks before a document is written. */
int mf_check_doc_for_storage(const bson_t *doc, mf_error_t *err) MF_WUR;

#endif /* MF_CMD_H */
