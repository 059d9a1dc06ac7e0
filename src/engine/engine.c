/*
 * engine.c: the engine handle's life: open, interrupt, close.
 *
 * An engine owns, and frees in reverse order: its parameters, its operation
 * registry, storage (WiredTiger, on disk or in memory), the catalog, the
 * write observer list (opcounters and the TTL monitor observe it), the TTL
 * monitor, the profiler's settings, the cursor table, the thread that
 * reaps idle cursors and the SASLprep profile for SCRAM-SHA-256 passwords. Nothing lives in process globals, so any number of
 * engines can be open in one process, each expiring its own data
 * (tests/unit/test_api.c opens two).
 *
 * Opcounters come from the observer list: every document inserted, updated
 * or deleted by a client command counts once (background work such as the
 * TTL monitor does not count, as in mongod). The TTL pacer watches a
 * separate counter of data commands started (fg_ops).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "auth/saslprep.h"
#include "auth/users.h"
#include "engine/engine.h"
#include "engine/cursor.h"
#include "engine/profiler.h"
#include "engine/sessions.h"
#include "common/log.h"
#include "common/sched.h"
#include "query/agg_spill.h"
#include "query/agg_write.h"
#include "catalog/autocompact.h"
#include "catalog/timeseries.h"
#include "ttl/ttl.h"
#include "archive/archive.h"

/* The TTL pacer's view of foreground load: data commands started so far. */
static int64_t
foreground_ops(void *arg)
{
    mf_engine_t *e = arg;
    return atomic_load(&e->fg_ops);
}

/* A TTL batch finished: profile it like the delete it is (SPEC D4). */
static void
ttl_batch_done(void *arg, const char *ns, const char *index, int64_t secs, int64_t deleted, int64_t millis)
{
    mf_engine_t *e = arg;
    char db[128];
    const char *dot = strchr(ns, '.');
    if (dot == NULL || (size_t)(dot - ns) >= sizeof(db))
        return;
    memcpy(db, ns, (size_t)(dot - ns));
    db[dot - ns] = '\0';
    if (!mf_profile_wants(e->profiler, db, mf_profile_slow(e->profiler, millis)))
        return;
    bson_t entry, cmd;
    bson_init(&entry);
    BSON_APPEND_UTF8(&entry, "op", "remove");
    BSON_APPEND_UTF8(&entry, "ns", ns);
    BSON_APPEND_DOCUMENT_BEGIN(&entry, "command", &cmd);
    BSON_APPEND_UTF8(&cmd, "delete", dot + 1);
    BSON_APPEND_UTF8(&cmd, "ttlIndex", index);
    BSON_APPEND_INT64(&cmd, "expireAfterSeconds", secs);
    bson_append_document_end(&entry, &cmd);
    BSON_APPEND_INT64(&entry, "ndeleted", deleted);
    BSON_APPEND_INT64(&entry, "millis", millis);
    BSON_APPEND_DATE_TIME(&entry, "ts", mf_now_ms());
    BSON_APPEND_UTF8(&entry, "desc", "TTLMonitor");
    BSON_APPEND_UTF8(&entry, "client", "TTLMonitor");
    BSON_APPEND_UTF8(&entry, "user", "");
    mf_profile_write(e, db, &entry);
    bson_destroy(&entry);
}

/* ---------- opcounters, from the write observer ---------- */

/*
 * Counts are kept per thread until the transaction ends, so a write retried
 * after a conflict, or rolled back, is not counted. (Per-thread state of one
 * transaction, not shared: the observer list reports a transaction's end on
 * the thread that ran it.)
 */
static _Thread_local struct {
    int64_t ins, upd, del;
} pending;

/*
 * Only writes made by a client command count: not background work (the TTL
 * monitor) nor what the server writes after a command ended (the profiler).
 */
static bool
counted(void)
{
    mf_curop_t *op = mf_curop_current();
    return op != NULL && !mf_curop_is_background(op);
}

static void
count_insert(void *arg, mf_coll_t *c, const bson_t *doc)
{
    if (counted())
        pending.ins++;
}

static void
count_update(void *arg, mf_coll_t *c, const bson_t *olddoc, const bson_t *newdoc)
{
    if (counted())
        pending.upd++;
}

static void
count_delete(void *arg, mf_coll_t *c, const bson_t *olddoc)
{
    if (counted())
        pending.del++;
}

static void
count_txn_end(void *arg, bool committed)
{
    mf_engine_t *e = arg;
    if (committed) {
        if (pending.ins)
            atomic_fetch_add(&e->op_insert, pending.ins);
        if (pending.upd)
            atomic_fetch_add(&e->op_update, pending.upd);
        if (pending.del)
            atomic_fetch_add(&e->op_delete, pending.del);
    }
    pending.ins = pending.upd = pending.del = 0;
}

/* ---------- the cursor reaper ---------- */

static void *
reaper_main(void *arg)
{
    mf_engine_t *e = arg;
    pthread_setname_np(pthread_self(), "mf-reaper");
    pthread_mutex_lock(&e->reaper_mu);
    while (!e->reaper_stop) {
        struct timespec ts = mf_mono_deadline(1000);
        pthread_cond_timedwait(&e->reaper_cv, &e->reaper_mu, &ts);
        if (e->reaper_stop)
            break;
        pthread_mutex_unlock(&e->reaper_mu);
        int n = mf_cursors_reap(e->cursors, mf_mono_ms(), mf_param_get(e->params, "cursorTimeoutMillis"));
        if (n > 0)
            mf_log(MF_LOG_INFO, "QUERY", "reaped %d idle cursors", n);
        mf_alloc_decay(); /* an idle server's freed pages go back to the OS after their decay (common/alloc.h) */
        pthread_mutex_lock(&e->reaper_mu);
    }
    pthread_mutex_unlock(&e->reaper_mu);
    return NULL;
}

/*
 * The background compactor's way through the write gate (catalog/
 * autocompact.h): never waits here (it waits in its own thread, where it
 * can be stopped), counted in flight while a compaction round or its
 * checkpoint writes, as gate_enter counts a writer.
 */
static bool
autocompact_enter(void *arg)
{
    mf_engine_t *eng = arg;
    if (atomic_load(&eng->fsync_locked))
        return false;
    atomic_fetch_add(&eng->fsync_inflight, 1);
    if (!atomic_load(&eng->fsync_locked))
        return true;
    atomic_fetch_sub(&eng->fsync_inflight, 1);
    return false;
}

static void
autocompact_leave(void *arg)
{
    mf_engine_t *eng = arg;
    atomic_fetch_sub(&eng->fsync_inflight, 1);
}

/* ---------- open / close ---------- */

/* An $out that a crash interrupted leaves its temporary collection (tmp.agg_out.*): start-up drops it, as mongod does. */
static bool
is_agg_out_temp(const mf_coll_t *c)
{
    return strncmp(c->name, MF_AGG_OUT_TMP_PREFIX, strlen(MF_AGG_OUT_TMP_PREFIX)) == 0;
}

/*
 * SPEC I2: a dropped collection's archive goes with it. DDL is reported
 * after its transaction committed, on the dropping thread, so the archive's
 * own transaction can use that thread's session.
 */
static void
archive_on_ddl(void *arg, const mf_ddl_event_t *ev)
{
    mf_engine_t *eng = arg;
    mf_error_t err;
    if (ev->kind != MF_DDL_DROP_COLL || eng->archive == NULL)
        return;
    mf_archive_stats_t st;
    mf_archive_stats(eng->archive, ev->uuid, &st);
    if (st.segments == 0)
        return;
    mf_sess_t *s = mf_storage_session(eng->st);
    if (mf_txn_active(s) || mf_archive_drop(eng->archive, s, ev->uuid, &err) != 0)
        mf_log(MF_LOG_WARN, "STORAGE", "the archive of dropped collection %s was not removed: %s", ev->ns,
               mf_txn_active(s) ? "a transaction is open" : err.msg);
}

static int engine_open(const mf_engine_opts_t *opts, mf_engine_t **out, mf_error_t *err);

/*
 * The threads the engine starts (WiredTiger's, the flusher, the TTL
 * monitor, the reaper) are background threads: they are started while the
 * calling thread asks for MF_BACKGROUND_SLICE_NS, which they inherit
 * (common/sched.h), and the caller's own slice is put back afterwards.
 */
int
mf_engine_open(const mf_engine_opts_t *opts, mf_engine_t **out, mf_error_t *err)
{
    uint64_t old = 0;
    bool asked = mf_sched_slice_set(MF_BACKGROUND_SLICE_NS, &old) == 0;
    int rc = engine_open(opts, out, err);
    if (asked)
        (void)mf_sched_slice_set(old, NULL);
    return rc;
}

static int fsync_gate_prepare(void *arg, mf_sess_t *s, mf_error_t *err);
static void fsync_gate_txn_end(void *arg, bool committed);
static int fsync_gate_ddl(void *arg, mf_error_t *err);
static void fsync_gate_ddl_done(void *arg);

static int
engine_open(const mf_engine_opts_t *opts, mf_engine_t **out, mf_error_t *err)
{
    mf_engine_t *eng = mf_calloc(1, sizeof(*eng));
    pthread_mutex_init(&eng->topo_mu, NULL);
    pthread_mutex_init(&eng->net_status_mu, NULL);
    pthread_mutex_init(&eng->fsync_mu, NULL);
    pthread_cond_init(&eng->fsync_cv, NULL);
    pthread_mutex_init(&eng->auth_mgmt_mu, NULL);
    const char *dbpath = opts->dbpath ? opts->dbpath : "./data";

    eng->params = mf_params_new();
    eng->curops = mf_curops_new();
    eng->failpoints = mf_failpoints_new();
    eng->fp_fail_command = mf_failpoint_find(eng->failpoints, "failCommand");
    eng->fp_max_time = mf_failpoint_find(eng->failpoints, "maxTimeAlwaysTimeOut");
    eng->fp_getmore = mf_failpoint_find(eng->failpoints, "failGetMoreAfterCursorCheckout");
    eng->prm_notablescan = mf_param_find(eng->params, "notablescan");
    eng->prm_user_roles = mf_param_find(eng->params, "enableAccessToUserRoles");
    eng->profiler = mf_profiler_new();
    eng->in_memory = opts->in_memory;
    if (opts->sysres != NULL)
        eng->sysres = *opts->sysres;
    else
        mf_sysres_read("", &eng->sysres);
    for (size_t i = 0; i < opts->nset_params; i++) {
        if (mf_param_set_string(eng->params, opts->set_params[i], err) != 0)
            goto err_free;
    }
    eng->sessions = mf_sessions_new(mf_param_get(eng->params, "maxSessions"));
    /* Opened here, on one thread, before any command runs: see auth/saslprep.h. */
    if (mf_saslprep_open(&eng->saslprep, err) != 0)
        goto err_free;
    int64_t cache_mb = opts->cache_mb > 0 ? opts->cache_mb : mf_storage_cache_mb_default(eng->sysres.mem_limit);
    if (mf_storage_open_ex(dbpath, opts->in_memory, cache_mb, &eng->st, err) != 0)
        goto err_free;
    eng->observers = mf_observers_new(eng->st);
    mf_observer_t gate = {.on_txn_prepare = fsync_gate_prepare, .on_txn_end = fsync_gate_txn_end, .arg = eng};
    if (mf_observers_add(eng->observers, &gate, err) != 0)
        goto err_storage;
    mf_observer_t counters = {.on_insert = count_insert, .on_update = count_update, .on_delete = count_delete,
                              .on_txn_end = count_txn_end, .arg = eng};
    mf_observer_t users = mf_users_watch(&eng->users_gen);
    if (mf_observers_add(eng->observers, &counters, err) != 0 || mf_observers_add(eng->observers, &users, err) != 0)
        goto err_storage;
    eng->auth_enabled = opts->auth;
    if (mf_catalog_open(eng->st, &eng->cat, err) != 0)
        goto err_storage;
    mf_catalog_set_observers(eng->cat, eng->observers);
    mf_catalog_set_ddl_gate(eng->cat, fsync_gate_ddl, fsync_gate_ddl_done, eng);
    mf_catalog_drop_where(eng->cat, is_agg_out_temp, NULL, "a temporary collection left by an interrupted $out");
    mf_ts_drop_orphans(eng->cat);
    eng->cursors = mf_cursors_new();
    if (!opts->in_memory)
        eng->tmp_dir = mf_spill_dir_prepare(dbpath); /* emptied of an earlier process's spill files */
    bson_oid_init(&eng->process_id, NULL);
    eng->start_ms = mf_now_ms();
    eng->start_mono_ms = mf_mono_ms();
    atomic_store(&eng->next_conn_id, 1);
    /*
     * SPEC E3: a replica-set member restarted as a standalone (its
     * local.system.replset still holds the set's config) must not expire
     * documents on its own: only a primary does. Until this build runs
     * replica sets, every node is a standalone.
     */
    /* SPEC I2: the archive, recovered to what committed (its files cut to their committed lengths). */
    char archive_dir[4096];
    snprintf(archive_dir, sizeof(archive_dir), "%s/archive", dbpath);
    if (mf_archive_open(eng->st, archive_dir, 0, !opts->in_memory, &eng->archive, err) != 0)
        goto err_catalog;
    mf_observer_t arch = {.on_ddl = archive_on_ddl, .arg = eng};
    if (mf_observers_add(eng->observers, &arch, err) != 0)
        goto err_catalog;
    const char *ttl_off = NULL;
    mf_catalog_rdlock(eng->cat);
    mf_coll_t *rs = mf_catalog_coll_find(eng->cat, "local", "system.replset");
    if (rs != NULL && atomic_load(&rs->approx_count) > 0 && !opts->repl_member)
        ttl_off = "this node holds a replica-set configuration (local.system.replset) but was started without "
                  "--replSet; a member taken out of its set does not expire documents";
    mf_catalog_unlock(eng->cat);
    mf_ttl_env_t tenv = {.st = eng->st,
                         .cat = eng->cat,
                         .params = eng->params,
                         .curops = eng->curops,
                         .failpoints = eng->failpoints,
                         .observers = eng->observers,
                         .batched_docs = &eng->batched_deletes_docs,
                         .batched_batches = &eng->batched_deletes_batches,
                         .foreground_ops = foreground_ops,
                         .on_batch = ttl_batch_done,
                         .arg = eng,
                         .disabled_reason = ttl_off,
                         .paused_reason = opts->repl_member ? "this replica-set member is not primary" : NULL,
                         .archive = eng->archive,
                         .replicated = opts->repl_member,
                         .cpus = eng->sysres.cpus_usable};
    if (mf_ttl_monitor_start(&tenv, &eng->ttl, err) != 0)
        goto err_catalog;
    mf_autocompact_env_t aenv = {.st = eng->st, .cat = eng->cat, .enter = autocompact_enter,
                                 .leave = autocompact_leave, .arg = eng};
    eng->autocompact = mf_autocompact_new(&aenv);
    pthread_mutex_init(&eng->reaper_mu, NULL);
    mf_cond_init_mono(&eng->reaper_cv);
    if (pthread_create(&eng->reaper, NULL, reaper_main, eng) != 0) {
        mf_err_set(err, MF_E_InternalError, "cannot start the cursor reaper thread");
        pthread_cond_destroy(&eng->reaper_cv);
        pthread_mutex_destroy(&eng->reaper_mu);
        mf_autocompact_free(eng->autocompact);
        mf_ttl_monitor_free(eng->ttl);
        goto err_catalog;
    }
    *out = eng;
    return 0;

err_catalog:
    mf_archive_close(eng->archive);
    mf_cursors_free(eng->cursors);
    free(eng->tmp_dir);
    mf_catalog_close(eng->cat);
err_storage:
    mf_storage_close(eng->st);
    mf_observers_free(eng->observers);
err_free:
    mf_saslprep_close(eng->saslprep);
    mf_sessions_free(eng->sessions);
    mf_profiler_free(eng->profiler);
    mf_curops_free(eng->curops);
    mf_failpoints_free(eng->failpoints);
    mf_params_free(eng->params);
    pthread_mutex_destroy(&eng->topo_mu);
    pthread_mutex_destroy(&eng->net_status_mu);
    pthread_mutex_destroy(&eng->auth_mgmt_mu);
    pthread_mutex_destroy(&eng->fsync_mu);
    pthread_cond_destroy(&eng->fsync_cv);
    free(eng);
    return -1;
}

/* Every open multi-document transaction rolls back (cmd/cmd_txn.c's, when it has made its registry). */
static void
abort_transactions(mf_engine_t *eng)
{
    void *txns = atomic_load(&eng->txns);
    if (txns != NULL && eng->txns_abort_all != NULL)
        eng->txns_abort_all(txns);
}

void
mf_engine_interrupt(mf_engine_t *eng)
{
    mf_curops_interrupt_all(eng->curops, MF_E_InterruptedAtShutdown);
    abort_transactions(eng);
    /* An fsync lock ends with the process (as mongod's): writers without an operation stop waiting. */
    pthread_mutex_lock(&eng->fsync_mu);
    eng->fsync_count = 0;
    atomic_store(&eng->fsync_locked, false);
    pthread_cond_broadcast(&eng->fsync_cv);
    pthread_mutex_unlock(&eng->fsync_mu);
}

/* Waits while fsync-locked (see mf_engine_write_gate). */
static int
gate_wait(mf_engine_t *eng, mf_error_t *err)
{
    mf_curop_t *op = mf_curop_current();
    int64_t t0 = mf_mono_us();
    int rc = 0;
    mf_curop_set_waiting_for_lock(op, true);
    pthread_mutex_lock(&eng->fsync_mu);
    while (eng->fsync_count > 0) {
        if ((rc = mf_curop_check(op, err)) != 0)
            break;
        struct timespec ts = mf_real_deadline(20); /* a slice: killOp, maxTimeMS and shutdown are seen within it */
        pthread_cond_timedwait(&eng->fsync_cv, &eng->fsync_mu, &ts);
    }
    pthread_mutex_unlock(&eng->fsync_mu);
    mf_curop_set_waiting_for_lock(op, false);
    if (op != NULL)
        mf_curop_add_paused(op, mf_mono_us() - t0);
    return rc;
}

int
mf_engine_write_gate(mf_engine_t *eng, mf_error_t *err)
{
    if (!atomic_load(&eng->fsync_locked))
        return 0;
    return gate_wait(eng, err);
}

/*
 * The gate of a writer about to commit: waits while locked, then counts
 * itself in flight. The writer's increment and the lock's flag are both
 * sequentially consistent, so either the lock sees the writer (and waits
 * for it) or the writer sees the lock (and steps back out to wait).
 */
static int
gate_enter(mf_engine_t *eng, mf_error_t *err)
{
    for (;;) {
        if (mf_engine_write_gate(eng, err) != 0)
            return -1;
        atomic_fetch_add(&eng->fsync_inflight, 1);
        if (!atomic_load(&eng->fsync_locked))
            return 0;
        atomic_fetch_sub(&eng->fsync_inflight, 1);
    }
}

int64_t
mf_engine_fsync_lock(mf_engine_t *eng, mf_error_t *err)
{
    pthread_mutex_lock(&eng->fsync_mu);
    int64_t n = ++eng->fsync_count;
    atomic_store(&eng->fsync_locked, true);
    pthread_mutex_unlock(&eng->fsync_mu);
    /* Writers already past the gate finish (their commits are short); then nothing else commits. */
    while (atomic_load(&eng->fsync_inflight) > 0) {
        if (mf_curop_check_current(err) != 0) {
            (void)mf_engine_fsync_unlock(eng);
            return -1;
        }
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    return n;
}

int64_t
mf_engine_fsync_unlock(mf_engine_t *eng)
{
    pthread_mutex_lock(&eng->fsync_mu);
    int64_t n = eng->fsync_count > 0 ? --eng->fsync_count : -1;
    if (n == 0) {
        atomic_store(&eng->fsync_locked, false);
        pthread_cond_broadcast(&eng->fsync_cv);
    }
    pthread_mutex_unlock(&eng->fsync_mu);
    return n;
}

/*
 * A document-write transaction's commit (the first observer, so before
 * replication logs it): through the gate, counted in flight until its end.
 * The thread remembers that it entered: a transaction refused at the gate
 * has nothing to undo at its end.
 */
static _Thread_local mf_engine_t *tls_gate_entered;

static int
fsync_gate_prepare(void *arg, mf_sess_t *s, mf_error_t *err)
{
    (void)s;
    if (tls_gate_entered == arg)
        return 0; /* already in flight (counted once until its end) */
    if (gate_enter(arg, err) != 0)
        return -1;
    tls_gate_entered = arg;
    return 0;
}

static void
fsync_gate_txn_end(void *arg, bool committed)
{
    (void)committed;
    if (tls_gate_entered == arg) {
        tls_gate_entered = NULL;
        atomic_fetch_sub(&((mf_engine_t *)arg)->fsync_inflight, 1);
    }
}

/* Around a catalog change (catalog.c's ddl_begin / ddl_end). */
static int
fsync_gate_ddl(void *arg, mf_error_t *err)
{
    return gate_enter(arg, err);
}

static void
fsync_gate_ddl_done(void *arg)
{
    atomic_fetch_sub(&((mf_engine_t *)arg)->fsync_inflight, 1);
}

void
mf_engine_topology_changed(mf_engine_t *eng)
{
    abort_transactions(eng); /* a step-down ends them (a step-up finds none) */
    atomic_fetch_add(&eng->topology_version, 1);
    pthread_mutex_lock(&eng->topo_mu);
    if (eng->on_topology)
        eng->on_topology(eng->on_topology_arg);
    pthread_mutex_unlock(&eng->topo_mu);
}

void
mf_engine_set_topology_hook(mf_engine_t *eng, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&eng->topo_mu);
    eng->on_topology = fn;
    eng->on_topology_arg = arg;
    pthread_mutex_unlock(&eng->topo_mu);
}

void
mf_engine_set_stop_hook(mf_engine_t *eng, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&eng->topo_mu);
    eng->on_stop_request = fn;
    eng->on_stop_request_arg = arg;
    pthread_mutex_unlock(&eng->topo_mu);
}

void
mf_engine_set_log_rotate_hook(mf_engine_t *eng, int (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&eng->topo_mu);
    eng->on_log_rotate = fn;
    eng->on_log_rotate_arg = arg;
    pthread_mutex_unlock(&eng->topo_mu);
}

void
mf_engine_set_net_status_hook(mf_engine_t *eng, void (*fn)(void *arg, bson_t *network), void *arg)
{
    pthread_mutex_lock(&eng->net_status_mu);
    eng->on_net_status = fn;
    eng->on_net_status_arg = arg;
    pthread_mutex_unlock(&eng->net_status_mu);
}

void
mf_engine_net_status_append(mf_engine_t *eng, bson_t *network)
{
    pthread_mutex_lock(&eng->net_status_mu);
    if (eng->on_net_status != NULL)
        eng->on_net_status(eng->on_net_status_arg, network);
    pthread_mutex_unlock(&eng->net_status_mu);
}

int
mf_engine_rotate_log(mf_engine_t *eng)
{
    pthread_mutex_lock(&eng->topo_mu);
    int rc = eng->on_log_rotate != NULL ? eng->on_log_rotate(eng->on_log_rotate_arg) : 0;
    pthread_mutex_unlock(&eng->topo_mu);
    return rc;
}

bool
mf_engine_request_stop(mf_engine_t *eng)
{
    pthread_mutex_lock(&eng->topo_mu);
    bool served = eng->on_stop_request != NULL;
    if (served)
        eng->on_stop_request(eng->on_stop_request_arg);
    pthread_mutex_unlock(&eng->topo_mu);
    return served;
}

void
mf_engine_close(mf_engine_t *eng)
{
    if (eng == NULL)
        return;
    mf_engine_interrupt(eng);
    void *txns = atomic_load(&eng->txns);
    if (txns != NULL && eng->txns_stop != NULL)
        eng->txns_stop(txns);
    pthread_mutex_lock(&eng->reaper_mu);
    eng->reaper_stop = true;
    pthread_cond_signal(&eng->reaper_cv);
    pthread_mutex_unlock(&eng->reaper_mu);
    pthread_join(eng->reaper, NULL);
    pthread_cond_destroy(&eng->reaper_cv);
    pthread_mutex_destroy(&eng->reaper_mu);
    mf_ttl_monitor_stop(eng->ttl);
    mf_autocompact_free(eng->autocompact); /* its thread ends within a compaction round */
    mf_cursors_free(eng->cursors); /* removes the spill files of open aggregation cursors */
    free(eng->tmp_dir);
    mf_catalog_close(eng->cat);
    mf_archive_close(eng->archive);
    mf_storage_close(eng->st);
    mf_ttl_monitor_free(eng->ttl);
    mf_observers_free(eng->observers);
    mf_profiler_free(eng->profiler);
    mf_sessions_free(eng->sessions);
    mf_saslprep_close(eng->saslprep);
    mf_curops_free(eng->curops);
    mf_failpoints_free(eng->failpoints);
    mf_params_free(eng->params);
    if (eng->startup_warnings)
        bson_destroy(eng->startup_warnings);
    free((void *)atomic_load(&eng->cmd_counts));
    if (eng->cmdline_argv)
        bson_destroy(eng->cmdline_argv);
    if (eng->cmdline_parsed)
        bson_destroy(eng->cmdline_parsed);
    pthread_mutex_destroy(&eng->fsync_mu);
    pthread_cond_destroy(&eng->fsync_cv);
    pthread_mutex_destroy(&eng->topo_mu);
    pthread_mutex_destroy(&eng->net_status_mu);
    pthread_mutex_destroy(&eng->auth_mgmt_mu);
    free(eng->cluster_cred);
    free(eng);
}
