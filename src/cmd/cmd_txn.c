/*
 * cmd_txn.c: multi-document transactions on a replica-set member (mongod's
 * TransactionParticipant, for one member: startTransaction, the commands
 * that continue it, commitTransaction and abortTransaction).
 *
 * One thread per open transaction. Everything mayfly keeps per storage
 * transaction is per thread: the WiredTiger session, the oplog observer's
 * buffer of ops, the TTL observer's notes, the catalog's lock session,
 * replication's per-command state. So a transaction gets a thread of its
 * own from startTransaction to its end, and each of its commands is handed
 * to that thread (mf_cmd_txn_route, called first thing by mf_cmd_run on the
 * connection's worker, which waits for the reply). On its thread the
 * command runs through mf_cmd_run as any other, inside one WiredTiger
 * transaction that stays open (storage.h's user transactions: the command's
 * own begin/commit nest inside it), and under a catalog lock session held
 * until the end (catalog.h's mf_catalog_session_hold), as mongod's
 * transaction keeps its intent locks: no DDL changes a collection the
 * transaction has touched before it ends. commitTransaction commits it
 * through the normal path (the pre-commit hook logs every op as one raft
 * entry, so the transaction replicates whole or not at all);
 * abortTransaction, a failed command or write error in it, a newer
 * transaction on the session, transactionLifetimeLimitSeconds or shutdown
 * roll it back. The thread then exits.
 *
 * Sessions' states live in a small hash table keyed by the lsid and the
 * uid of its user, as mongod keys sessions: the highest txnNumber seen and
 * what became of it, so a commit retried after it committed answers ok and
 * a late command of an aborted one answers 251 NoSuchTransaction. Entries
 * of ended transactions idle for more than half an hour are dropped as
 * their bucket is walked.
 *
 * Differences from mongod, kept on purpose: a collection that a
 * transaction's write would create, or that `create` (or `createIndexes`
 * on a missing collection) names, is created outside the transaction right
 * before (a helper thread runs the command, replicated as any DDL), so
 * others see it before the commit; an abort drops it again if it is still
 * empty (utxn_t.created). Other DDL is refused with 263. Reads see a snapshot of
 * the member taken at the transaction's first read (readConcern "snapshot",
 * whatever level was asked). Statements are not profiled (the profiler
 * would write inside the transaction). A secondary applies a committed
 * transaction's entry in one storage transaction (repl.c's apply_whole).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog/catalog.h"
#include "cmd/cmd.h"
#include "cmd/crud.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "doc/value.h"
#include "engine/sessions.h"
#include "storage/storage.h"

#define BUCKETS 256
#define IDLE_FORGET_MS (30 * 60 * 1000) /* an ended transaction's entry is forgotten after this idle time */

/*
 * T_UNKNOWN: its commit failed after its raft entry was submitted (a
 * wtimeout, a step-down, an interruption, a conflict at the very end): the
 * entry may still commit, and then every member applies it. Only its
 * session row, replicated with it, can tell (repl's txn_committed).
 */
typedef enum { T_NONE, T_ACTIVE, T_COMMITTED, T_ABORTED, T_UNKNOWN } txn_state_t;

/* One command handed to a transaction's thread. */
typedef struct job {
    mf_client_t *client;
    const char *db;
    const bson_t *cmd;
    const mf_docseq_t *seqs;
    size_t nseqs;
    bool legacy;
    bson_t *reply;
    bool done;
} job_t;

typedef struct mf_txns mf_txns_t;

/* A collection a transaction created (outside it): dropped again if the transaction aborts. */
typedef struct created {
    char *db, *name;
    uint8_t uuid[16];
} created_t;

/* A logical session's transaction state (guarded by the registry's mu). */
typedef struct utxn {
    struct utxn *next;
    mf_txns_t *t;
    uint8_t id[16];
    uint8_t uid[MF_SESSION_UID_LEN];
    int64_t num;       /* the newest txnNumber started on the session */
    txn_state_t state; /* of num */
    bool thread;       /* its thread runs (state ACTIVE, or ending) */
    bool busy;         /* a command is queued or running on it */
    bool first_ran;    /* the first command ran: readConcern only there */
    bool abort_req;    /* roll back at the next idle moment (newer transaction, killSessions) */
    job_t *job;        /* the command to run, NULL none */
    int64_t deadline_ms; /* monotonic: transactionLifetimeLimitSeconds after the start */
    int64_t last_ms;     /* monotonic: last use */
    pthread_cond_t cv;   /* job handed over, job done, thread gone */
    /*
     * What $currentOp shows of it while no command runs (an idleSession,
     * mf_cmd_txn_report_idle): when num started (wall clock ms, monotonic
     * us), the time its commands have run (us), the readConcern its first
     * command gave (owned, NULL none), and the connection that ran its last
     * command (id, address, application name, a copy of its handshake
     * metadata: owned, NULL none), which may have closed since.
     */
    int64_t start_wall_ms, start_us, active_us;
    int64_t busy_from_us; /* monotonic: when the command running now (busy) was handed over */
    uint32_t read_secs, read_inc; /* readTimestamp: the member's optime when its snapshot began (0: none yet, standalone) */
    bson_t *read_concern;
    int64_t conn_id;
    char remote[80];
    char app[129];
    bson_t *meta;
    /*
     * The collections its statements created (create, createIndexes, an
     * insert or upsert into a missing one), which exist outside it: if it
     * aborts, each still empty and still the same collection (UUID) is
     * dropped, so an aborted transaction leaves no collection behind, as
     * in mongod. Touched only by its thread, and reset at its start.
     */
    created_t *created;
    int ncreated;
    bool undoing; /* aborted with collections to drop: the statement that ended it answers once they are */
} utxn_t;

struct mf_txns {
    mf_engine_t *eng;
    pthread_mutex_t mu;
    pthread_cond_t gone; /* a thread exited */
    utxn_t *buckets[BUCKETS];
    int nthreads;
    int nactive; /* transactions running a command now */
    bool stop;
    /* serverStatus transactions */
    int64_t started, committed, aborted;
};

/* The transaction the calling thread runs (its own thread), NULL elsewhere. */
static _Thread_local utxn_t *tls_txn;

bool
mf_cmd_txn_identity(bson_t *out)
{
    utxn_t *e = tls_txn;
    bson_t l;
    if (e == NULL)
        return false;
    BSON_APPEND_DOCUMENT_BEGIN(out, "lsid", &l);
    BSON_APPEND_BINARY(&l, "id", BSON_SUBTYPE_UUID, e->id, 16);
    BSON_APPEND_BINARY(&l, "uid", BSON_SUBTYPE_BINARY, e->uid, MF_SESSION_UID_LEN);
    bson_append_document_end(out, &l);
    BSON_APPEND_INT64(out, "txnNumber", e->num);
    return true;
}

bool
mf_cmd_in_txn(void)
{
    return tls_txn != NULL;
}

/* ---------- the registry ---------- */

static void
created_clear(utxn_t *e)
{
    for (int i = 0; i < e->ncreated; i++) {
        free(e->created[i].db);
        free(e->created[i].name);
    }
    free(e->created);
    e->created = NULL;
    e->ncreated = 0;
}

/* Frees a session's entry and what it owns. */
static void
entry_free(utxn_t *e)
{
    created_clear(e);
    if (e->read_concern != NULL)
        bson_destroy(e->read_concern);
    if (e->meta != NULL)
        bson_destroy(e->meta);
    pthread_cond_destroy(&e->cv);
    free(e);
}

static void
txns_stop(void *arg)
{
    mf_txns_t *t = arg;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    for (int b = 0; b < BUCKETS; b++)
        for (utxn_t *e = t->buckets[b]; e != NULL; e = e->next)
            pthread_cond_broadcast(&e->cv);
    while (t->nthreads > 0)
        pthread_cond_wait(&t->gone, &t->mu);
    pthread_mutex_unlock(&t->mu);
    for (int b = 0; b < BUCKETS; b++) {
        utxn_t *e = t->buckets[b];
        while (e != NULL) {
            utxn_t *n = e->next;
            entry_free(e);
            e = n;
        }
    }
    atomic_store(&t->eng->txns, NULL);
    pthread_cond_destroy(&t->gone);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* engine.h's txns_abort_all: every open transaction rolls back at its next idle moment (a role change, shutdown). */
static void
txns_abort_all(void *arg)
{
    mf_txns_t *t = arg;
    pthread_mutex_lock(&t->mu);
    for (int b = 0; b < BUCKETS; b++)
        for (utxn_t *e = t->buckets[b]; e != NULL; e = e->next)
            if (e->thread) {
                e->abort_req = true;
                pthread_cond_broadcast(&e->cv);
            }
    pthread_mutex_unlock(&t->mu);
}

static mf_txns_t *
txns_of(mf_engine_t *eng)
{
    mf_txns_t *t = atomic_load(&eng->txns);
    if (t != NULL)
        return t;
    mf_txns_t *n = mf_calloc(1, sizeof(*n));
    n->eng = eng;
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->gone, NULL);
    void *expected = NULL;
    if (!atomic_compare_exchange_strong(&eng->txns, &expected, n)) {
        pthread_cond_destroy(&n->gone);
        pthread_mutex_destroy(&n->mu);
        free(n);
        return expected;
    }
    eng->txns_stop = txns_stop;
    eng->txns_abort_all = txns_abort_all;
    return n;
}

static unsigned
bucket_of(const uint8_t id[16])
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ id[i]) * 16777619u;
    return h % BUCKETS;
}

/* The session's entry (t->mu held); created when create. Drops stale ended entries met on the way. */
static utxn_t *
entry_find(mf_txns_t *t, const uint8_t id[16], const uint8_t uid[MF_SESSION_UID_LEN], bool create)
{
    int64_t now = mf_mono_ms();
    utxn_t **pp = &t->buckets[bucket_of(id)];
    while (*pp != NULL) {
        utxn_t *e = *pp;
        if (memcmp(e->id, id, 16) == 0 && memcmp(e->uid, uid, MF_SESSION_UID_LEN) == 0)
            return e;
        if (!e->thread && !e->busy && e->state != T_ACTIVE && now - e->last_ms > IDLE_FORGET_MS) {
            *pp = e->next;
            entry_free(e);
            continue;
        }
        pp = &e->next;
    }
    if (!create)
        return NULL;
    utxn_t *e = mf_calloc(1, sizeof(*e));
    e->t = t;
    memcpy(e->id, id, 16);
    memcpy(e->uid, uid, MF_SESSION_UID_LEN);
    e->num = -1;
    e->last_ms = now;
    pthread_cond_init(&e->cv, NULL);
    e->next = t->buckets[bucket_of(id)];
    t->buckets[bucket_of(id)] = e;
    return e;
}

/* ---------- a transaction's thread ---------- */

static void route_error(mf_engine_t *eng, bson_t *reply, const mf_error_t *err, bool commit_or_abort, bool quiet);

/* Ends the transaction as state (t->mu held) and counts it. */
static void
set_ended(utxn_t *e, txn_state_t state)
{
    if (e->state != T_ACTIVE)
        return;
    e->state = state;
    e->undoing = state == T_ABORTED && e->ncreated > 0; /* set on its thread, the only writer of ncreated */
    if (state == T_COMMITTED)
        e->t->committed++;
    else if (state == T_ABORTED)
        e->t->aborted++;
}

/*
 * After an abort, with the transaction's locks released: drops each
 * collection it created that is still the one it created and still empty
 * (a document another client wrote there keeps it: nothing is lost).
 * Replicated and seen by change streams as any drop.
 */
static void
drop_created(mf_engine_t *eng, utxn_t *e)
{
    for (int i = 0; i < e->ncreated; i++) {
        created_t *k = &e->created[i];
        mf_error_t err = {0};
        int r = 0;
        mf_catalog_wrlock(eng->cat);
        mf_coll_t *c = mf_catalog_coll_find(eng->cat, k->db, k->name);
        if (c != NULL && memcmp(c->uuid, k->uuid, 16) == 0)
            r = mf_catalog_coll_drop_if_empty(eng->cat, c, &err);
        mf_catalog_unlock(eng->cat);
        if (r == 1)
            mf_curops_top_forget(eng->curops, k->db, k->name);
        else if (r < 0)
            mf_log(MF_LOG_WARN, "TXN", "could not drop %s.%s, created by aborted transaction %lld: %s", k->db,
                   k->name, (long long)e->num, err.msg);
    }
    created_clear(e);
}

static void *
txn_main(void *arg)
{
    utxn_t *e = arg;
    mf_txns_t *t = e->t;
    mf_engine_t *eng = t->eng;
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(eng->st);

    tls_txn = e;
    /* Read before the snapshot begins, so the snapshot holds at least what this time names. */
    uint32_t read_secs = 0, read_inc = 0;
    if (eng->repl != NULL && eng->repl->op_time != NULL)
        eng->repl->op_time(eng->repl_arg, &read_secs, &read_inc);
    bool open = mf_txn_user_begin(s, &err) == 0;
    if (!open)
        mf_log(MF_LOG_ERROR, "TXN", "cannot begin a transaction: %s", err.msg);
    mf_catalog_session_hold(eng->cat);
    pthread_mutex_lock(&t->mu);
    e->read_secs = read_secs;
    e->read_inc = read_inc;
    if (!open)
        set_ended(e, T_ABORTED);
    for (;;) {
        if (e->state == T_ACTIVE && (t->stop || e->abort_req || mf_mono_ms() >= e->deadline_ms)) {
            if (!t->stop && !e->abort_req)
                mf_log(MF_LOG_INFO, "TXN", "aborting transaction %lld: older than transactionLifetimeLimitSeconds",
                       (long long)e->num);
            set_ended(e, T_ABORTED);
        }
        if (e->job != NULL && e->state != T_ACTIVE) {
            /* Queued before the transaction ended: it has nothing to run in. */
            mf_error_t jerr = {0};
            mf_err_set(&jerr, MF_E_NoSuchTransaction, "Transaction %lld has been aborted.", (long long)e->num);
            route_error(eng, e->job->reply, &jerr, false, false);
            e->job->done = true;
            e->job = NULL;
            pthread_cond_broadcast(&e->cv);
        }
        if (e->job != NULL) {
            job_t *j = e->job;
            pthread_mutex_unlock(&t->mu);
            mf_cmd_run(eng, j->client, j->db, j->cmd, j->seqs, j->nseqs, j->legacy, j->reply);
            mf_storage_session_release(s);
            pthread_mutex_lock(&t->mu);
            e->job = NULL;
            j->done = true;
            e->first_ran = true;
            e->last_ms = mf_mono_ms();
            pthread_cond_broadcast(&e->cv);
            continue;
        }
        if (e->state != T_ACTIVE)
            break;
        int64_t wait_ms = e->deadline_ms - mf_mono_ms();
        if (wait_ms > 1000)
            wait_ms = 1000;
        if (wait_ms < 1)
            wait_ms = 1;
        struct timespec ts = mf_real_deadline(wait_ms);
        pthread_cond_timedwait(&e->cv, &t->mu, &ts);
    }
    bool undo = e->state == T_ABORTED && !t->stop; /* at shutdown DDL might wait on replication: left */
    pthread_mutex_unlock(&t->mu);
    if (mf_txn_user(s))
        mf_txn_user_abort(s);
    mf_catalog_session_unhold();
    tls_txn = NULL;
    if (undo)
        drop_created(eng, e);
    mf_storage_session_close_thread(eng->st);
    pthread_mutex_lock(&t->mu);
    e->thread = false;
    e->abort_req = false;
    e->undoing = false;
    t->nthreads--;
    pthread_cond_broadcast(&e->cv);
    pthread_cond_broadcast(&t->gone);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* ---------- routing ---------- */

/*
 * mongod's isTransientTransactionError (error_labels.cpp): the whole
 * transaction may be retried. A write conflict, a lock timeout, a snapshot
 * error; NoSuchTransaction (for a commit or abort only without a write
 * concern error); for other statements any retriable error (a failover).
 */
static bool
transient(int code, bool commit_or_abort, bool has_wce)
{
    if (code == MF_E_WriteConflict || code == MF_E_LockTimeout || code == MF_E_SnapshotTooOld || code == 246)
        return true;
    if (commit_or_abort)
        return code == MF_E_NoSuchTransaction && !has_wce;
    return code == MF_E_NoSuchTransaction || mf_cmd_retryable_code(code);
}

static void
append_label(bson_t *reply, const char *label)
{
    bson_t labels;
    BSON_APPEND_ARRAY_BEGIN(reply, "errorLabels", &labels);
    BSON_APPEND_UTF8(&labels, "0", label);
    bson_append_array_end(reply, &labels);
}

/*
 * An error reply for a command refused before it reached its transaction,
 * with mongod's labels (none when quiet: a commit of unknown outcome must
 * not be run again).
 */
static void
route_error(mf_engine_t *eng, bson_t *reply, const mf_error_t *err, bool commit_or_abort, bool quiet)
{
    (void)eng;
    mf_cmd_error_reply(reply, err);
    if (quiet)
        return;
    if (transient(err->code, commit_or_abort, false))
        append_label(reply, "TransientTransactionError");
    else if (commit_or_abort && mf_cmd_retryable_code(err->code))
        append_label(reply, "RetryableWriteError"); /* the driver retries the commit or abort on the new primary */
}

/* The lsid's id (16 bytes) from cmd: false when there is none usable (the normal path reports it). */
static bool
lsid_of(const bson_t *cmd, uint8_t id[16])
{
    bson_iter_t it, f;
    bson_subtype_t sub;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, cmd, "lsid") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f) ||
        !bson_iter_find(&f, "id") || !BSON_ITER_HOLDS_BINARY(&f))
        return false;
    bson_iter_binary(&f, &sub, &len, &data);
    if (len != 16 || sub != BSON_SUBTYPE_UUID)
        return false;
    memcpy(id, data, 16);
    return true;
}

/*
 * A command of a transaction that committed (here, or under an earlier
 * primary): a retried commit answers ok as the commit did (true, reply
 * written); anything else is 256 TransactionCommitted (false, err set).
 */
static bool
committed_reply(bson_t *reply, bool commit, int64_t num, mf_error_t *err)
{
    if (commit) {
        BSON_APPEND_DOUBLE(reply, "ok", 1.0);
        return true;
    }
    mf_err_set(err, MF_E_TransactionCommitted, "Transaction %lld has been committed.", (long long)num);
    return false;
}

/* Records client as the one running e's command now (t->mu held): what an idleSession shows of it. */
static void
note_client(utxn_t *e, const mf_client_t *client)
{
    if (client == NULL) {
        e->conn_id = 0;
        e->remote[0] = e->app[0] = '\0';
        if (e->meta != NULL)
            bson_destroy(e->meta);
        e->meta = NULL;
        return;
    }
    /* A connection's metadata never changes once set: copy it only when another connection (or the first) runs. */
    if (e->conn_id != client->id || (e->meta == NULL) != (client->metadata == NULL)) {
        if (e->meta != NULL)
            bson_destroy(e->meta);
        e->meta = client->metadata != NULL ? bson_copy(client->metadata) : NULL;
    }
    e->conn_id = client->id;
    snprintf(e->remote, sizeof(e->remote), "%s", client->remote);
    snprintf(e->app, sizeof(e->app), "%s", client->app_name);
}

/* The work of mf_cmd_txn_route once a command may be a transaction's (apart: its error buffer costs a memset). */
static bool __attribute__((noinline))
route(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd, const mf_docseq_t *seqs,
      size_t nseqs, bool legacy, bson_t *reply)
{
    bson_iter_t it;
    mf_error_t err = {0};
    uint8_t id[16], uid[MF_SESSION_UID_LEN];
    char user[300];
    int64_t num;
    bool quiet = false; /* an error without labels (see route_error) */

    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return false;
    const char *name = bson_iter_key(&it);
    bool commit = strcmp(name, "commitTransaction") == 0, abort = strcmp(name, "abortTransaction") == 0;
    bool has_ac = bson_has_field(cmd, "autocommit");
    if (!has_ac && !commit && !abort && !bson_has_field(cmd, "startTransaction"))
        return false;
    /* mongod's OperationSessionInfo checks (initializeOperationSessionInfo), in its order. */
    bool start = false;
    if (bson_iter_init_find(&it, cmd, "startTransaction")) {
        if (!BSON_ITER_HOLDS_BOOL(&it)) {
            mf_err_set(&err, MF_E_TypeMismatch, "BSON field 'OperationSessionInfo.startTransaction' is the wrong type "
                                                "'%s', expected type 'bool'", mf_type_name(bson_iter_type(&it)));
            goto fail;
        }
        if (!bson_iter_bool(&it)) {
            mf_err_set(&err, MF_E_InvalidOptions, "Specifying startTransaction=false is not allowed.");
            goto fail;
        }
        start = true;
    }
    if (bson_iter_init_find(&it, cmd, "autocommit")) {
        if (!BSON_ITER_HOLDS_BOOL(&it)) {
            mf_err_set(&err, MF_E_TypeMismatch, "BSON field 'OperationSessionInfo.autocommit' is the wrong type '%s', "
                                                "expected type 'bool'", mf_type_name(bson_iter_type(&it)));
            goto fail;
        }
        if (bson_iter_bool(&it)) {
            mf_err_set(&err, MF_E_InvalidOptions, "Specifying autocommit=true is not allowed.");
            goto fail;
        }
    } else if (start) {
        mf_err_set(&err, MF_E_InvalidOptions, "'startTransaction' field requires 'autocommit' field to also be "
                                              "specified");
        goto fail;
    }
    if (!lsid_of(cmd, id))
        return false; /* mf_cmd_run reports the missing or bad lsid */
    if (!bson_iter_init_find(&it, cmd, "txnNumber") || !BSON_ITER_HOLDS_NUMBER(&it)) {
        mf_err_set(&err, MF_E_InvalidOptions, "'autocommit' field requires a transaction number to also be specified");
        goto fail;
    }
    num = bson_iter_as_int64(&it);
    if (num < 0) {
        mf_err_set(&err, MF_E_InvalidOptions, "Transaction number cannot be negative");
        goto fail;
    }
    if (!has_ac) {
        mf_err_set(&err, MF_E_InvalidOptions, "%s must be run within a transaction", name);
        goto fail;
    }
    /* mongod's validateSessionOptions: commands that cannot open a transaction, refused before one is begun. */
    if (start && (commit || abort || strcmp(name, "killCursors") == 0)) {
        if (commit || abort)
            mf_err_set(&err, MF_E_OperationNotSupportedInTransaction, "Cannot start a transaction with %s",
                       commit ? "a commit" : "an abort");
        else
            mf_err_set(&err, MF_E_OperationNotSupportedInTransaction,
                       "Cannot run killCursors as the first operation in a multi-document transaction.");
        quiet = true; /* no transaction was touched: nothing to retry */
        goto fail;
    }
    {
        mf_op_t op;
        memset(&op, 0, sizeof(op));
        op.eng = eng;
        op.client = client;
        op.cmd = cmd;
        op.db = db;
        mf_cmd_auth_owner(&op, user, sizeof(user));
        mf_session_uid(user, uid);
    }

    /* Only a writable primary runs transactions (mongod's beginOrContinue): commit and abort retry elsewhere. */
    if (eng->repl->admit(eng->repl_arg, db, MF_REPL_WRITE, false, &err) != 0)
        goto fail;

    mf_txns_t *t = txns_of(eng);
    job_t job = {client, db, cmd, seqs, nseqs, legacy, reply, false};
    utxn_t *e;
    bool looked = false, row_committed = false;
    int64_t waited = 0;
    /* A start below (or at) the number of the session's last retryable write is refused as one below a transaction's. */
    int64_t row_num = start && eng->repl->session_txn != NULL ? eng->repl->session_txn(eng->repl_arg, id) : -1;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        /*
         * A number this member does not know, or a commit whose outcome is
         * unknown here: the session row its commit's entry left on every
         * member says whether it committed (read without the registry lock:
         * a storage read). A commit or abort of an unknown outcome waits up
         * to 2 s for the entry to be applied here.
         */
        e = entry_find(t, id, uid, start);
        bool unknown = e != NULL && num == e->num && e->state == T_UNKNOWN;
        if (start || looked || eng->repl->txn_committed == NULL ||
            !(e == NULL || num > e->num || e->state == T_NONE || unknown))
            break;
        pthread_mutex_unlock(&t->mu);
        row_committed = eng->repl->txn_committed(eng->repl_arg, id, num);
        if (!row_committed && unknown && (commit || abort) && waited < 2000) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
            waited += 20;
        } else {
            looked = true;
        }
        pthread_mutex_lock(&t->mu);
    }
    if (row_committed) {
        if (e != NULL && num == e->num && e->state == T_UNKNOWN) {
            e->state = T_COMMITTED;
            t->committed++;
        }
        pthread_mutex_unlock(&t->mu);
        if (committed_reply(reply, commit, num, &err))
            return true;
        goto fail;
    }
    if (e == NULL) {
        pthread_mutex_unlock(&t->mu);
        mf_err_set(&err, MF_E_NoSuchTransaction, "Given transaction number %lld does not match any in-progress "
                                                  "transactions.", (long long)num);
        goto fail;
    }
    e->last_ms = mf_mono_ms();
    if (start) {
        /* A newer transaction ends the session's open one (mongod aborts it). */
        while (num > e->num && e->thread && !t->stop) {
            e->abort_req = true;
            pthread_cond_broadcast(&e->cv);
            pthread_cond_wait(&e->cv, &t->mu);
        }
    } else {
        /* One command of a session at a time: a second waits for the first, as mongod's session checkout. */
        while (e->busy && !t->stop)
            pthread_cond_wait(&e->cv, &t->mu);
    }
    /* Checked after the waits: another command of the session may have moved its number meanwhile. */
    if (t->stop) {
        pthread_mutex_unlock(&t->mu);
        mf_err_set(&err, MF_E_InterruptedAtShutdown, "interrupted at shutdown");
        goto fail;
    }
    if (num < e->num || num < row_num) {
        int64_t newer = e->num > row_num ? e->num : row_num;
        pthread_mutex_unlock(&t->mu);
        mf_err_set(&err, MF_E_TransactionTooOld, "Cannot start transaction %lld on session because a newer "
                                                 "transaction %lld has already started.", (long long)num,
                   (long long)newer);
        goto fail;
    }
    if (start) {
        if (num == e->num || num == row_num) {
            pthread_mutex_unlock(&t->mu);
            mf_err_set(&err, MF_E_ConflictingOperationInProgress, "Only servers in a sharded cluster can start a new "
                                                                  "transaction at the active transaction number");
            goto fail;
        }
        int64_t limit_s = mf_param_get(eng->params, "transactionLifetimeLimitSeconds");
        e->num = num;
        e->state = T_ACTIVE;
        e->first_ran = false;
        e->abort_req = false;
        /* One clock reading for the start and the deadline: an idleSession's expiryTime is their difference. */
        e->start_us = mf_mono_us();
        e->start_wall_ms = mf_now_ms();
        e->deadline_ms = e->start_us / 1000 + (limit_s > INT64_MAX / 4000 ? INT64_MAX / 4 : limit_s * 1000);
        e->active_us = 0;
        e->read_secs = e->read_inc = 0;
        created_clear(e);
        if (e->read_concern != NULL)
            bson_destroy(e->read_concern);
        e->read_concern = NULL;
        if (bson_iter_init_find(&it, cmd, "readConcern") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_iter_document(&it, &len, &data);
            e->read_concern = bson_new_from_data(data, len);
        }
        pthread_attr_t attr;
        pthread_t th;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        e->thread = true;
        t->nthreads++;
        t->started++;
        if (pthread_create(&th, &attr, txn_main, e) != 0) {
            e->thread = false;
            t->nthreads--;
            set_ended(e, T_ABORTED);
            pthread_attr_destroy(&attr);
            pthread_mutex_unlock(&t->mu);
            mf_err_set(&err, MF_E_InternalError, "cannot start a thread for the transaction");
            goto fail;
        }
        pthread_attr_destroy(&attr);
        /* Its first command waits for nothing: the thread is new. */
    } else if (num > e->num || e->state == T_NONE) {
        pthread_mutex_unlock(&t->mu);
        mf_err_set(&err, MF_E_NoSuchTransaction, "Given transaction number %lld does not match any in-progress "
                                                  "transactions. The active transaction number is %lld",
                   (long long)num, (long long)e->num);
        goto fail;
    }
    if (e->state == T_COMMITTED) {
        pthread_mutex_unlock(&t->mu);
        if (committed_reply(reply, commit, num, &err))
            return true;
        goto fail;
    }
    if (e->state == T_UNKNOWN) {
        /* Its commit's entry may still commit: no label that would have the driver run it again. */
        pthread_mutex_unlock(&t->mu);
        quiet = true;
        mf_err_set(&err, MF_E_NoSuchTransaction, "Transaction %lld's commit has an unknown outcome: it was logged "
                   "but not yet applied here; it may still commit", (long long)num);
        goto fail;
    }
    if (e->state != T_ACTIVE || !e->thread) {
        pthread_mutex_unlock(&t->mu);
        mf_err_set(&err, MF_E_NoSuchTransaction, "Transaction %lld has been aborted.", (long long)num);
        goto fail;
    }
    e->busy = true;
    t->nactive++;
    note_client(e, client);
    e->job = &job;
    pthread_cond_broadcast(&e->cv);
    e->busy_from_us = mf_mono_us();
    while (!job.done || (e->undoing && e->thread))
        pthread_cond_wait(&e->cv, &t->mu);
    e->active_us += mf_mono_us() - e->busy_from_us;
    e->busy = false;
    t->nactive--;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&t->mu);
    return true;

fail:
    route_error(eng, reply, &err, commit || abort, quiet);
    return true;
}

bool
mf_cmd_txn_route(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd, const mf_docseq_t *seqs,
                 size_t nseqs, bool legacy, bson_t *reply)
{
    /* Standalone, replication's applier, or the transaction's own thread: nothing to route (the common case). */
    if (eng->repl == NULL || tls_txn != NULL || (client != NULL && client->internal))
        return false;
    /* One pass over the command's keys: only a command naming a transaction goes further. */
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return false;
    const char *name = bson_iter_key(&it);
    bool txn = strcmp(name, "commitTransaction") == 0 || strcmp(name, "abortTransaction") == 0;
    while (!txn && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        txn = (k[0] == 'a' && strcmp(k, "autocommit") == 0) || (k[0] == 's' && strcmp(k, "startTransaction") == 0);
    }
    if (!txn)
        return false;
    mf_cmd_auth_refresh(eng, client); /* here, outside the transaction's snapshot: a revoke applies at once */
    return route(eng, client, db, cmd, seqs, nseqs, legacy, reply);
}

/* ---------- on the transaction's thread ---------- */

/* mongod's allow list of commands in a transaction (service_entry_point_common.cpp's txnCmdAllowlist). */
static bool
allowed_in_txn(const char *name)
{
    static const char *const ok[] = {"abortTransaction", "aggregate", "commitTransaction", "create", "delete",
                                     "createIndexes", "distinct", "find", "findandmodify", "findAndModify", "getMore", "insert",
                                     "killCursors", "update", "bulkWrite", NULL};
    for (int i = 0; ok[i] != NULL; i++)
        if (strcmp(ok[i], name) == 0)
            return true;
    return false;
}

int
mf_cmd_txn_check(mf_op_t *op)
{
    utxn_t *e = tls_txn;
    bson_iter_t it;
    bool commit_or_abort = strcmp(op->name, "commitTransaction") == 0 || strcmp(op->name, "abortTransaction") == 0;
    if (strcmp(op->name, "count") == 0)
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot run 'count' in a multi-document transaction. Please see "
                          "http://dochub.mongodb.org/core/transaction-count for a recommended alternative.");
    if (!allowed_in_txn(op->name))
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot run '%s' in a multi-document transaction.", op->name);
    /* bulkWrite, which runs on admin, is the one command a transaction may send there (mongod 8.0). */
    if (!commit_or_abort && ((strcmp(op->db, "admin") == 0 && strcmp(op->name, "bulkWrite") != 0) ||
                             strcmp(op->db, "config") == 0 || strcmp(op->db, "local") == 0))
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot run command against the '%s' database in a transaction.", op->db);
    if (!commit_or_abort && mf_op_has(op, "writeConcern"))
        return mf_err_set(&op->err, MF_E_InvalidOptions, "writeConcern is not allowed within a multi-statement transaction");
    if (mf_op_find(op, "readConcern", &it)) {
        if (e->first_ran || !mf_op_has(op, "startTransaction"))
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Only the first command in a transaction may specify a readConcern");
        bson_iter_t rc;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &rc) && bson_iter_find(&rc, "level") &&
            BSON_ITER_HOLDS_UTF8(&rc)) {
            const char *lvl = bson_iter_utf8(&rc, NULL);
            if (strcmp(lvl, "local") != 0 && strcmp(lvl, "majority") != 0 && strcmp(lvl, "snapshot") != 0)
                return mf_err_set(&op->err, MF_E_InvalidOptions,
                                  "The readConcern level must be either 'local' (default), 'majority' or "
                                  "'snapshot' in order to run in a transaction");
        }
    }
    /* shard_role.cpp's acquisition: the view catalog's collection is never read in a transaction. */
    if ((strcmp(op->name, "find") == 0 || strcmp(op->name, "aggregate") == 0 || strcmp(op->name, "distinct") == 0) &&
        bson_iter_init(&it, op->cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it) &&
        strcmp(bson_iter_utf8(&it, NULL), "system.views") == 0)
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot access system.views collection in a transaction");
    if (strcmp(op->name, "aggregate") == 0 && mf_op_find(op, "pipeline", &it) && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t st, stage;
        if (bson_iter_recurse(&it, &st))
            while (bson_iter_next(&st))
                if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &stage) && bson_iter_next(&stage) &&
                    (strcmp(bson_iter_key(&stage), "$out") == 0 || strcmp(bson_iter_key(&stage), "$merge") == 0 ||
                     strcmp(bson_iter_key(&stage), "$changeStream") == 0))
                    return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                                      "%s cannot be used in a transaction", bson_iter_key(&stage));
    }
    return 0;
}

bool
mf_cmd_txn_number(mf_op_t *op, int64_t *n)
{
    bson_iter_t it;
    *n = 0;
    if (!mf_op_has(op, "autocommit") || !mf_op_find(op, "txnNumber", &it) || !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    *n = bson_iter_as_int64(&it);
    return true;
}

int
mf_cmd_txn_check_cursor(mf_op_t *op, int64_t cursor_id, bool in_txn, int64_t txn_number)
{
    int64_t mine;
    bool here = mf_cmd_txn_number(op, &mine);
    if (here && !in_txn)
        return mf_err_set(&op->err, MF_E_Location50739, "Cannot run getMore on cursor %lld, which was not created "
                          "in a transaction, in transaction %lld", (long long)cursor_id, (long long)mine);
    if (!here && in_txn)
        return mf_err_set(&op->err, MF_E_Location50740, "Cannot run getMore on cursor %lld, which was created in "
                          "transaction %lld, without a txnNumber", (long long)cursor_id, (long long)txn_number);
    if (here && mine != txn_number)
        return mf_err_set(&op->err, MF_E_Location50741, "Cannot run getMore on cursor %lld, which was created in "
                          "transaction %lld, in transaction %lld", (long long)cursor_id, (long long)txn_number,
                          (long long)mine);
    return 0;
}

/*
 * Runs a create (or a createIndexes) of db.name on a thread of its own
 * (outside the transaction, replicated as any DDL); then, in a lock session
 * of that thread's own (the transaction's would keep the collection locked),
 * reads the UUID of what is there now.
 */
typedef struct create_job {
    mf_engine_t *eng;
    mf_client_t *client;
    const char *db, *name;
    bson_t cmd, reply;
    bool found;
    uint8_t uuid[16];
} create_job_t;

static void *
create_main(void *arg)
{
    create_job_t *cj = arg;
    mf_cmd_run(cj->eng, cj->client, cj->db, &cj->cmd, NULL, 0, false, &cj->reply);
    mf_catalog_rdlock(cj->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(cj->eng->cat, cj->db, cj->name);
    if (c != NULL) {
        cj->found = true;
        memcpy(cj->uuid, c->uuid, 16);
    }
    mf_catalog_unlock(cj->eng->cat);
    mf_storage_session_close_thread(cj->eng->st);
    return NULL;
}

/* Notes db.name (uuid) as created by the calling thread's transaction. */
static void
note_created(const char *db, const char *name, const uint8_t uuid[16])
{
    utxn_t *e = tls_txn;
    if (e == NULL)
        return;
    e->created = mf_realloc(e->created, (size_t)(e->ncreated + 1) * sizeof(*e->created));
    created_t *k = &e->created[e->ncreated++];
    k->db = mf_strdup(db);
    k->name = mf_strdup(name);
    memcpy(k->uuid, uuid, 16);
}

/*
 * Whether any statement of a write command's array field (in the body or a
 * document sequence, as drivers send it) upserts.
 */
static bool
any_upsert(mf_op_t *op, const char *field)
{
    bson_t *docs;
    size_t n;
    bson_iter_t it;
    bool any = false;
    if (mf_op_docs(op, field, true, &docs, &n) != 0) {
        mf_err_clear(&op->err); /* the command itself reports a malformed array */
        return false;
    }
    for (size_t i = 0; i < n && !any; i++)
        any = bson_iter_init_find(&it, &docs[i], "upsert") && bson_iter_as_bool(&it);
    free(docs);
    return any;
}

/*
 * Creates db.name on a helper thread, outside the transaction, and waits for
 * it: cmd is the create or createIndexes command to run (NULL: {create:
 * name}); its reply, when reply is given, goes there (op->reply: the
 * statement's own). A collection it created is noted for an abort to drop.
 * Returns 0 when it was created or already existed (unless cmd was given),
 * or -1 with op->err.
 */
static int
create_outside(mf_op_t *op, const char *db, const char *name, const bson_t *cmd, bson_t *reply)
{
    create_job_t cj = {.eng = op->eng, .client = op->client, .db = db, .name = name};
    int rc = 0;
    bson_init(&cj.cmd);
    bson_init(&cj.reply);
    if (cmd != NULL)
        bson_copy_to_excluding_noinit(cmd, &cj.cmd, "lsid", "txnNumber", "autocommit", "startTransaction",
                                      "readConcern", "$db", "$clusterTime", "$readPreference", NULL);
    else
        BSON_APPEND_UTF8(&cj.cmd, "create", name);
    pthread_t th;
    if (pthread_create(&th, NULL, create_main, &cj) != 0) {
        rc = mf_err_set(&op->err, MF_E_InternalError, "cannot start a thread to create %s.%s", db, name);
    } else {
        pthread_join(th, NULL);
        bson_iter_t r;
        bool ok = bson_iter_init_find(&r, &cj.reply, "ok") && bson_iter_as_double(&r) == 1.0;
        int code = bson_iter_init_find(&r, &cj.reply, "code") ? (int)bson_iter_as_int64(&r) : 0;
        bool created = ok && (cmd == NULL || strcmp(op->name, "create") == 0 ||
                              (bson_iter_init_find(&r, &cj.reply, "createdCollectionAutomatically") &&
                               bson_iter_as_bool(&r)));
        if (created && cj.found)
            note_created(db, name, cj.uuid);
        if (!ok && (cmd != NULL || code != MF_E_NamespaceExists)) {
            const char *msg = bson_iter_init_find(&r, &cj.reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&r)
                                  ? bson_iter_utf8(&r, NULL) : "create failed";
            rc = mf_err_set(&op->err, code ? code : MF_E_InternalError, "%s", msg);
        } else if (ok && reply != NULL) {
            /* The statement's reply: what the command answered, but its ok (appended by the dispatcher). */
            bson_copy_to_excluding_noinit(&cj.reply, reply, "ok", "$clusterTime", "operationTime", NULL);
        }
    }
    bson_destroy(&cj.cmd);
    bson_destroy(&cj.reply);
    return rc;
}

/*
 * The checks and creations of mf_cmd_txn_prepare for one collection a write
 * names: a time-series or capped one is refused (263, as mongod: buckets are
 * shared, and capped trimming would conflict with every other writer); a
 * missing one is created outside the transaction when creates is set.
 */
static int
prepare_target(mf_op_t *op, const char *db, const char *name, bool creates)
{
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, db, name);
    bool ts = c != NULL && c->is_timeseries, capped = c != NULL && c->capped, exists = c != NULL;
    mf_catalog_unlock(op->eng->cat);
    if (ts)
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot write to a time-series collection in a multi-document transaction: %s.%s", db, name);
    if (capped)
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Collection '%s.%s' is a capped collection. Writes in transactions are not allowed on "
                          "capped collections.", db, name);
    return exists || !creates ? 0 : create_outside(op, db, name, NULL, NULL);
}

/*
 * bulkWrite's part of mf_cmd_txn_prepare: every namespace of nsInfo that an
 * op writes to, checked (as mongod's transaction checks a write's
 * namespace: not config, local (50790) or system.* (50791)), and created
 * when an insert or an upsert names it. One pass over the ops marks the
 * namespaces, one over nsInfo acts. A malformed request is left for the
 * command to report.
 */
static int
prepare_bulk_write(mf_op_t *op)
{
    bson_t *ops = NULL, *ns = NULL;
    size_t nops = 0, nns = 0;
    bool *named = NULL, *creates = NULL;
    int rc = 0;
    if (mf_op_docs(op, "ops", true, &ops, &nops) != 0 || mf_op_docs(op, "nsInfo", true, &ns, &nns) != 0) {
        mf_err_clear(&op->err);
        goto out;
    }
    named = mf_calloc(nns ? nns : 1, sizeof(bool));
    creates = mf_calloc(nns ? nns : 1, sizeof(bool));
    for (size_t k = 0; k < nops; k++) {
        bson_iter_t it, up;
        if (!bson_iter_init(&it, &ops[k]) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_NUMBER(&it))
            continue;
        int64_t i = bson_iter_as_int64(&it);
        if (i < 0 || (uint64_t)i >= nns)
            continue;
        named[i] = true;
        creates[i] = creates[i] || strcmp(bson_iter_key(&it), "insert") == 0 ||
                     (strcmp(bson_iter_key(&it), "update") == 0 && bson_iter_init_find(&up, &ops[k], "upsert") &&
                      bson_iter_as_bool(&up));
    }
    for (size_t i = 0; i < nns && rc == 0; i++) {
        bson_iter_t it;
        const char *full = bson_iter_init_find(&it, &ns[i], "ns") && BSON_ITER_HOLDS_UTF8(&it)
                               ? bson_iter_utf8(&it, NULL) : NULL;
        const char *dot = full != NULL ? strchr(full, '.') : NULL;
        if (!named[i] || dot == NULL || dot == full || dot[1] == '\0' || (size_t)(dot - full) >= 128)
            continue;
        char db[128];
        snprintf(db, sizeof(db), "%.*s", (int)(dot - full), full);
        if (strcmp(db, "config") == 0)
            rc = mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                            "Cannot run command against the 'config' database in a transaction.");
        else if (strcmp(db, "local") == 0)
            rc = mf_err_set(&op->err, MF_E_Location50790,
                            "Cannot write to unreplicated collection %s within a transaction.", full);
        else if (strncmp(dot + 1, "system.", 7) == 0)
            rc = mf_err_set(&op->err, MF_E_Location50791, "Cannot write to system collection %s within a transaction.",
                            full);
        else
            rc = prepare_target(op, db, dot + 1, creates[i]);
    }
out:
    free(named);
    free(creates);
    free(ops);
    free(ns);
    return rc;
}

/*
 * createIndexes in a transaction (mongod's runCreateIndexesWithCoordinator):
 * on a collection that does not exist yet it creates both, outside the
 * transaction as any create here; on one this transaction created, only
 * while the transaction has not used it (its lock would keep the index
 * build waiting until it ends); on any other, 263.
 */
static int
prepare_create_indexes(mf_op_t *op, const char *name)
{
    utxn_t *e = tls_txn;
    for (int i = 0; i < e->ncreated; i++) {
        if (strcmp(e->created[i].db, op->db) != 0 || strcmp(e->created[i].name, name) != 0)
            continue;
        if (!mf_catalog_session_has(op->db, name))
            return 0;
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot create new indexes on collection %s.%s in a multi-document transaction after the "
                          "transaction has read or written it (mayfly builds indexes outside the transaction)",
                          op->db, name);
    }
    mf_catalog_rdlock(op->eng->cat);
    bool exists = mf_catalog_coll_find(op->eng->cat, op->db, name) != NULL;
    mf_catalog_unlock(op->eng->cat);
    if (exists)
        return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot create new indexes on existing collection %s.%s in a multi-document transaction.",
                          op->db, name);
    return 0;
}

int
mf_cmd_txn_prepare(mf_op_t *op, bool *done)
{
    bson_iter_t it;
    *done = false;
    if (strcmp(op->name, "bulkWrite") == 0)
        return prepare_bulk_write(op);
    bool is_create = strcmp(op->name, "create") == 0, is_cix = strcmp(op->name, "createIndexes") == 0;
    bool fam = strcmp(op->name, "findAndModify") == 0 || strcmp(op->name, "findandmodify") == 0;
    bool writes = strcmp(op->name, "insert") == 0 || strcmp(op->name, "update") == 0 ||
                  strcmp(op->name, "delete") == 0 || fam;
    if ((!writes && !is_create && !is_cix) || !bson_iter_init(&it, op->cmd) || !bson_iter_next(&it) ||
        !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    const char *name = bson_iter_utf8(&it, NULL);
    if (is_create) {
        /* mongod's createCollection checks, in its order. */
        if (mf_op_has(op, "timeseries"))
            return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                              "Cannot create a time-series collection in a multi-document transaction.");
        if (mf_op_has(op, "viewOn"))
            return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                              "Cannot create a view in a multi-document transaction.");
        if (strncmp(name, "system.", 7) == 0)
            return mf_err_set(&op->err, MF_E_OperationNotSupportedInTransaction,
                              "Cannot create system collection %s.%s within a transaction.", op->db, name);
    }
    if (is_cix && prepare_create_indexes(op, name) != 0)
        return -1;
    if (is_create || is_cix) {
        /* The command runs outside the transaction, and its reply is the statement's. */
        if (create_outside(op, op->db, name, op->cmd, op->reply) != 0)
            return -1;
        *done = true;
        return 0;
    }
    /* mongod's doTransactionValidationForWrites (time-series buckets excepted; admin is refused before). */
    if (strncmp(name, "system.", 7) == 0 && strncmp(name, "system.buckets.", 15) != 0)
        return mf_err_set(&op->err, MF_E_Location50791, "Cannot write to system collection %s.%s within a transaction.",
                          op->db, name);
    bool creates = strcmp(op->name, "insert") == 0 ||
                   (strcmp(op->name, "update") == 0 && any_upsert(op, "updates")) ||
                   (fam && mf_op_find(op, "upsert", &it) && bson_iter_as_bool(&it));
    return prepare_target(op, op->db, name, creates);
}

/* Aborts the calling thread's transaction (its thread; its registry lock not held). */
static void
abort_here(mf_op_t *op)
{
    utxn_t *e = tls_txn;
    if (op->sess != NULL && mf_txn_user(op->sess))
        mf_txn_user_abort(op->sess);
    else
        op = NULL; /* not begun here: the thread rolls back when the command returns */
    pthread_mutex_lock(&e->t->mu);
    if (op == NULL)
        e->abort_req = true;
    else
        set_ended(e, T_ABORTED);
    pthread_mutex_unlock(&e->t->mu);
}

/*
 * A write error in a transaction ends the batch there and aborts the
 * transaction (mongod's write_ops_exec handleError): the reply keeps its
 * first write error only. A WriteConflict instead fails the command as a
 * whole, so its TransientTransactionError label reaches the driver: op->err
 * is set, the reply emptied, and true returned.
 */
bool
mf_cmd_txn_write_error(mf_op_t *op)
{
    bson_iter_t it, a, d;
    if (strcmp(op->name, "bulkWrite") == 0) {
        /* Its errors are cursor items; it ran ordered and stopped at the first (cmd_bulkwrite.c). */
        if (bson_iter_init_find(&it, op->reply, "nErrors") && bson_iter_as_int64(&it) > 0)
            abort_here(op);
        return false;
    }
    if (!bson_iter_init_find(&it, op->reply, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &a) || !bson_iter_next(&a) || !BSON_ITER_HOLDS_DOCUMENT(&a))
        return false;
    int code = MF_E_InternalError;
    const char *msg = "write error";
    if (bson_iter_recurse(&a, &d)) {
        while (bson_iter_next(&d)) {
            const char *k = bson_iter_key(&d);
            if (strcmp(k, "code") == 0)
                code = (int)bson_iter_as_int64(&d);
            else if (strcmp(k, "errmsg") == 0 && BSON_ITER_HOLDS_UTF8(&d))
                msg = bson_iter_utf8(&d, NULL);
        }
    }
    if (code == MF_E_WriteConflict) {
        mf_err_set(&op->err, code, "%s", msg);
        bson_reinit(op->reply);
        return true;
    }
    /* The reply again, with only the first write error. */
    bson_t copy, errs;
    bson_init(&copy);
    bson_iter_t r;
    bson_iter_init(&r, op->reply);
    while (bson_iter_next(&r)) {
        if (strcmp(bson_iter_key(&r), "writeErrors") != 0) {
            bson_append_value(&copy, bson_iter_key(&r), -1, bson_iter_value(&r));
            continue;
        }
        const uint8_t *data;
        uint32_t len;
        bson_t first;
        bson_iter_document(&a, &len, &data);
        BSON_APPEND_ARRAY_BEGIN(&copy, "writeErrors", &errs);
        if (bson_init_static(&first, data, len))
            BSON_APPEND_DOCUMENT(&errs, "0", &first);
        bson_append_array_end(&copy, &errs);
    }
    bson_reinit(op->reply);
    bson_concat(op->reply, &copy);
    bson_destroy(&copy);
    abort_here(op);
    return false;
}

void
mf_cmd_txn_failed(mf_op_t *op, bson_t *reply, bool ran)
{
    utxn_t *e = tls_txn;
    bool commit = op->name != NULL && strcmp(op->name, "commitTransaction") == 0;
    bool abort = op->name != NULL && strcmp(op->name, "abortTransaction") == 0;
    /*
     * A command that failed running aborts its transaction (mongod's
     * invokeWithSessionCheckedOut); one refused before it ran (not allowed,
     * a readConcern or writeConcern out of place) leaves it be, unless it
     * was the first, which then started nothing.
     */
    if (!commit && !abort && (ran || !e->first_ran))
        abort_here(op);
    if (op->fp_labels_given)
        return; /* failCommand's errorLabels replace mongod's own (mf_failcommand_labels appends them) */
    if (commit && e->state == T_UNKNOWN)
        return; /* its entry may still commit: nothing that would have the driver run it again */
    if (transient(op->err.code, commit || abort, bson_has_field(reply, "writeConcernError")))
        append_label(reply, "TransientTransactionError");
}

/* ---------- commitTransaction, abortTransaction ---------- */

static int
cmd_commit(mf_op_t *op)
{
    utxn_t *e = tls_txn;
    if (e == NULL)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "commitTransaction must be run within a transaction");
    bool durable = mf_crud_want_durable(op);
    int rc = mf_txn_user_commit(op->sess, durable, &op->err);
    /*
     * Only a member that was not primary refuses before logging the entry;
     * any other failure (a wtimeout, a step-down, an interruption, a
     * conflict at the very end) comes after, and the entry may still
     * commit: its outcome is unknown here until its session row says.
     */
    bool before_logging = op->err.code == MF_E_NotWritablePrimary;
    pthread_mutex_lock(&e->t->mu);
    set_ended(e, rc == 0 ? T_COMMITTED : before_logging ? T_ABORTED : T_UNKNOWN);
    pthread_mutex_unlock(&e->t->mu);
    return rc;
}

static int
cmd_abort(mf_op_t *op)
{
    utxn_t *e = tls_txn;
    if (e == NULL)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "abortTransaction must be run within a transaction");
    mf_txn_user_abort(op->sess);
    pthread_mutex_lock(&e->t->mu);
    set_ended(e, T_ABORTED);
    pthread_mutex_unlock(&e->t->mu);
    return 0;
}

static const char *const commit_fields[] = {"recoveryToken", NULL};

const mf_cmd_def_t mf_cmds_txn[] = {
    {"commitTransaction", cmd_commit, MF_CMD_ADMIN_ONLY, commit_fields},
    {"abortTransaction", cmd_abort, MF_CMD_ADMIN_ONLY, commit_fields},
    {NULL, NULL, 0, NULL},
};

void
mf_cmd_txn_stats(mf_engine_t *eng, bson_t *out)
{
    mf_txns_t *t = atomic_load(&eng->txns);
    int64_t started = 0, committed = 0, aborted = 0, open = 0, active = 0;
    if (t != NULL) {
        pthread_mutex_lock(&t->mu);
        started = t->started;
        committed = t->committed;
        aborted = t->aborted;
        open = t->nthreads;
        active = t->nactive;
        pthread_mutex_unlock(&t->mu);
    }
    BSON_APPEND_INT64(out, "currentOpen", open);
    BSON_APPEND_INT64(out, "currentActive", active);
    BSON_APPEND_INT64(out, "currentInactive", open - active > 0 ? open - active : 0);
    BSON_APPEND_INT64(out, "totalStarted", started);
    BSON_APPEND_INT64(out, "totalCommitted", committed);
    BSON_APPEND_INT64(out, "totalAborted", aborted);
}

/* mongod's dateToISOStringLocal: "2026-12-04T01:02:03.456+0000", in the server's time zone. */
static void
iso_local(int64_t ms, char *buf, size_t cap)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char zone[8];
    if (localtime_r(&secs, &tm) == NULL) {
        snprintf(buf, cap, "%lld", (long long)ms); /* past what the calendar holds (a lifetime limit near INT64_MAX) */
        return;
    }
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof(zone), "%z", &tm);
    snprintf(buf + n, cap - n, ".%03d%s", (int)(ms % 1000), zone);
}

/*
 * Appends mongod's "transaction" sub-document of e (t->mu held) to out:
 * parameters {txnNumber, txnRetryCounter, autocommit, readConcern?},
 * readTimestamp, startWallClockTime,
 * timeOpenMicros, timeActiveMicros (with the command running now, if
 * any), timeInactiveMicros, expiryTime.
 */
static void
txn_stats(const utxn_t *e, int64_t now_us, bson_t *out)
{
    bson_t tx, par;
    char when[48];
    int64_t open_us = now_us - e->start_us;
    int64_t active_us = e->active_us + (e->busy ? now_us - e->busy_from_us : 0);

    BSON_APPEND_DOCUMENT_BEGIN(out, "transaction", &tx);
    BSON_APPEND_DOCUMENT_BEGIN(&tx, "parameters", &par);
    BSON_APPEND_INT64(&par, "txnNumber", e->num);
    BSON_APPEND_INT32(&par, "txnRetryCounter", 0); /* mongod's; only its internal transactions retry under one number */
    BSON_APPEND_BOOL(&par, "autocommit", false);
    if (e->read_concern != NULL)
        BSON_APPEND_DOCUMENT(&par, "readConcern", e->read_concern);
    bson_append_document_end(&tx, &par);
    BSON_APPEND_TIMESTAMP(&tx, "readTimestamp", e->read_secs, e->read_inc);
    iso_local(e->start_wall_ms, when, sizeof(when));
    BSON_APPEND_UTF8(&tx, "startWallClockTime", when);
    BSON_APPEND_INT64(&tx, "timeOpenMicros", open_us);
    BSON_APPEND_INT64(&tx, "timeActiveMicros", active_us);
    BSON_APPEND_INT64(&tx, "timeInactiveMicros", open_us - active_us);
    /* When it is aborted: the deadline it started with (transactionLifetimeLimitSeconds then), on the wall clock. */
    iso_local(e->start_wall_ms + (e->deadline_ms - e->start_us / 1000), when, sizeof(when));
    BSON_APPEND_UTF8(&tx, "expiryTime", when);
    bson_append_document_end(out, &tx);
}

/* One idleSession document for e (t->mu held) into out (initialised here). */
static void
idle_doc(const mf_txns_t *t, const utxn_t *e, int64_t now_us, bson_t *out)
{
    bson_t ls;

    bson_init(out);
    BSON_APPEND_UTF8(out, "type", "idleSession");
    BSON_APPEND_UTF8(out, "host", t->eng->host);
    BSON_APPEND_UTF8(out, "desc", "inactive transaction");
    if (e->remote[0])
        BSON_APPEND_UTF8(out, "client", e->remote);
    if (e->conn_id > 0)
        mf_append_number(out, "connectionId", e->conn_id);
    if (e->app[0])
        BSON_APPEND_UTF8(out, "appName", e->app);
    if (e->meta != NULL)
        BSON_APPEND_DOCUMENT(out, "clientMetadata", e->meta);
    BSON_APPEND_DOCUMENT_BEGIN(out, "lsid", &ls);
    BSON_APPEND_BINARY(&ls, "id", BSON_SUBTYPE_UUID, e->id, 16);
    BSON_APPEND_BINARY(&ls, "uid", BSON_SUBTYPE_BINARY, e->uid, MF_SESSION_UID_LEN);
    bson_append_document_end(out, &ls);
    txn_stats(e, now_us, out);
    BSON_APPEND_BOOL(out, "waitingForLock", false);
    BSON_APPEND_BOOL(out, "active", false);
}

/* mf_cmd_txn_report_ops' hand-over: each operation's document, with its transaction's when it runs in one. */
typedef struct ops_ctx {
    mf_txns_t *t;
    void (*fn)(void *arg, const bson_t *doc);
    void *arg;
} ops_ctx_t;

/* The 16- or 32-byte binary at path in doc into out; false when it is not one of that length. */
static bool
doc_binary(const bson_t *doc, const char *path, uint8_t *out, uint32_t want)
{
    bson_iter_t it, f;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &f) || !BSON_ITER_HOLDS_BINARY(&f))
        return false;
    bson_iter_binary(&f, NULL, &len, &data);
    if (len != want)
        return false;
    memcpy(out, data, len);
    return true;
}

static void
op_with_txn(void *arg, const bson_t *doc)
{
    ops_ctx_t *c = arg;
    uint8_t id[16], uid[MF_SESSION_UID_LEN];
    bson_iter_t it, f;
    bson_t out;
    bool in_txn = false;

    if (c->t != NULL && doc_binary(doc, "lsid.id", id, 16) && doc_binary(doc, "lsid.uid", uid, MF_SESSION_UID_LEN)) {
        /* Its command's txnNumber, unless the command is shown truncated. */
        int64_t num = -1;
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "command.txnNumber", &f) &&
            BSON_ITER_HOLDS_NUMBER(&f))
            num = bson_iter_as_int64(&f);
        pthread_mutex_lock(&c->t->mu);
        utxn_t *e = entry_find(c->t, id, uid, false);
        /* The session's transaction runs a command now, and this is it: the session runs one at a time. */
        if (e != NULL && e->state == T_ACTIVE && e->busy && (num < 0 || num == e->num)) {
            bson_init(&out);
            bson_concat(&out, doc);
            txn_stats(e, mf_mono_us(), &out);
            in_txn = true;
        }
        pthread_mutex_unlock(&c->t->mu);
    }
    if (!in_txn) {
        c->fn(c->arg, doc);
        return;
    }
    c->fn(c->arg, &out);
    bson_destroy(&out);
}

void
mf_cmd_txn_report_ops(mf_engine_t *eng, void (*fn)(void *arg, const bson_t *doc), void *arg)
{
    ops_ctx_t c = {atomic_load(&eng->txns), fn, arg};
    mf_curops_report_each(eng->curops, eng->host, op_with_txn, &c);
}

void
mf_cmd_txn_report_idle(mf_engine_t *eng, void (*fn)(void *arg, const bson_t *doc), void *arg)
{
    mf_txns_t *t = atomic_load(&eng->txns);
    if (t == NULL)
        return;
    /* Built under the lock, handed to fn after it (fn may be slow: a filter, a reply). */
    size_t n = 0, cap = 0;
    bson_t *docs = NULL;
    int64_t now = mf_mono_us();
    pthread_mutex_lock(&t->mu);
    for (int b = 0; b < BUCKETS; b++)
        for (utxn_t *e = t->buckets[b]; e != NULL; e = e->next) {
            if (e->state != T_ACTIVE || !e->thread || e->busy)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                docs = mf_realloc(docs, cap * sizeof(*docs));
            }
            idle_doc(t, e, now, &docs[n++]);
        }
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        fn(arg, &docs[i]);
        bson_destroy(&docs[i]);
    }
    free(docs);
}

int
mf_cmd_txn_retryable(mf_op_t *op)
{
    bson_iter_t it;
    uint8_t id[16], uid[MF_SESSION_UID_LEN];
    char user[300];
    mf_txns_t *t = atomic_load(&op->eng->txns);
    if (t == NULL || !lsid_of(op->cmd, id) || !mf_op_find(op, "txnNumber", &it) || !BSON_ITER_HOLDS_NUMBER(&it))
        return 0;
    int64_t num = bson_iter_as_int64(&it);
    mf_cmd_auth_owner(op, user, sizeof(user));
    mf_session_uid(user, uid);
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    utxn_t *e = entry_find(t, id, uid, false);
    if (e != NULL && e->num > num) {
        rc = mf_err_set(&op->err, MF_E_TransactionTooOld, "Retryable write with txnNumber %lld is prohibited on "
                        "session because a newer transaction with txnNumber %lld has already started on this "
                        "session.", (long long)num, (long long)e->num);
    } else if (e != NULL && e->num == num && e->state != T_NONE) {
        /*
         * The number is a transaction's (running, committed or aborted): a
         * write without autocommit: false may not join it or run beside it
         * (mongod's _beginOrContinueRetryableWrite); it would have run
         * outside the transaction, and the commit then failed on its row.
         */
        rc = mf_err_set(&op->err, MF_E_InvalidOptions,
                        "Must specify autocommit=false on all operations of a multi-statement transaction.");
    } else if (e != NULL && e->num < num && e->thread) {
        e->abort_req = true; /* a newer number on the session ends its transaction, as in mongod */
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void
mf_cmd_txn_end_sessions(mf_engine_t *eng, const uint8_t id[16], const uint8_t *uid)
{
    mf_txns_t *t = atomic_load(&eng->txns);
    if (t == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    for (int b = 0; b < BUCKETS; b++)
        for (utxn_t *e = t->buckets[b]; e != NULL; e = e->next)
            if ((id == NULL || memcmp(e->id, id, 16) == 0) &&
                (uid == NULL || memcmp(e->uid, uid, MF_SESSION_UID_LEN) == 0) && e->thread) {
                e->abort_req = true;
                pthread_cond_broadcast(&e->cv);
            }
    pthread_mutex_unlock(&t->mu);
}
