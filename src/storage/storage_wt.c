/*
 * storage_wt.c: the WiredTiger adapter (see storage.h for the table layout).
 *
 * Sessions are per thread: a thread-local pointer caches the thread's session
 * for one mf_storage_t. Sessions are opened with cache_cursors=false so that a
 * command's cursors are really closed when it ends, which lets a drop succeed
 * while other threads are idle; a drop that still meets EBUSY (a checkpoint
 * holding the table, say) is queued and retried by the flusher thread.
 *
 * The flusher thread wakes every 100 ms: it syncs the log (so an
 * unacknowledged-durability write is on disk within ~100 ms), retries pending
 * drops, and every 60 s WiredTiger checkpoints on its own (checkpoint=(wait=60)).
 */
#include "common/alloc.h"
#include "storage/storage.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <wiredtiger.h>

#include "common/log.h"

#define MF_CURSOR_CACHE 32

struct mf_cur {
    WT_CURSOR *wt;
    mf_sess_t *s;
    bool rid_keys; /* key_format q (record table) vs u (bytes) */
    bool in_use;
    char uri[96];
};

/*
 * A session keeps up to MF_CURSOR_CACHE closed-but-open cursors, keyed by
 * table, so a command that writes many documents opens each table's cursor
 * once. mf_storage_session_release closes them all; the command layer calls
 * it when a command ends, so an idle session holds no cursor and a drop can
 * proceed.
 */
struct mf_sess {
    WT_SESSION *wt;
    mf_storage_t *st;
    bool in_txn;
    mf_cur_t *cache[MF_CURSOR_CACHE];
    int ncache;
};

#define MF_MAX_PENDING_DROPS 256

struct mf_storage {
    WT_CONNECTION *conn;
    pthread_t flusher;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stopping;
    char *pending_drops[MF_MAX_PENDING_DROPS];
    int npending;
    WT_SESSION *flush_sess;
    /* Every thread's session, so close can release them (guarded by lock). */
    mf_sess_t **sessions;
    int nsessions, capsessions;
    uint64_t gen;
};

static __thread mf_sess_t *tls_sess;
/*
 * Which storage instance tls_sess belongs to: a generation number, not the
 * pointer, because a storage reopened in the same process may get the old
 * address back (an embedding application that closes and reopens).
 */
static __thread uint64_t tls_gen;
static _Atomic uint64_t storage_gen;
static void (*txn_hook)(bool committed);

void
mf_storage_set_txn_hook(void (*fn)(bool committed))
{
    txn_hook = fn;
}

static int
map_ret(int ret)
{
    switch (ret) {
    case 0:
        return 0;
    case WT_NOTFOUND:
        return MF_NOTFOUND;
    case WT_DUPLICATE_KEY:
        return MF_DUPKEY;
    case WT_ROLLBACK:
        return MF_CONFLICT;
    default:
        return -1;
    }
}

const char *
mf_storage_strerror(int wt_ret)
{
    return wiredtiger_strerror(wt_ret);
}

static int
wt_err(mf_error_t *err, int ret, const char *what)
{
    if (ret == WT_ROLLBACK)
        return mf_err_set(err, MF_E_WriteConflict, "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.");
    return mf_err_set(err, MF_E_InternalError, "%s: %s", what, wiredtiger_strerror(ret));
}

static void
try_pending_drops(mf_storage_t *st)
{
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < st->npending;) {
        int ret = st->flush_sess->drop(st->flush_sess, st->pending_drops[i], "force=true");
        if (ret == 0 || ret == ENOENT) {
            free(st->pending_drops[i]);
            st->pending_drops[i] = st->pending_drops[--st->npending];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&st->lock);
}

static void *
flusher_main(void *arg)
{
    mf_storage_t *st = arg;
    struct timespec ts;

    pthread_mutex_lock(&st->lock);
    while (!st->stopping) {
        clock_gettime(CLOCK_MONOTONIC, &ts); /* the condvar waits on the monotonic clock */
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&st->cond, &st->lock, &ts);
        if (st->stopping)
            break;
        int have_drops = st->npending;
        pthread_mutex_unlock(&st->lock);
        (void)st->flush_sess->log_flush(st->flush_sess, "sync=on");
        if (have_drops)
            try_pending_drops(st);
        pthread_mutex_lock(&st->lock);
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

int
mf_storage_open(const char *dbpath, mf_storage_t **out, mf_error_t *err)
{
    mf_storage_t *st;
    int ret;

    if (mkdir(dbpath, 0755) != 0 && errno != EEXIST)
        return mf_err_set(err, MF_E_InternalError, "cannot create dbpath %s: %s", dbpath, strerror(errno));
    st = mf_calloc(1, sizeof(*st));
    pthread_mutex_init(&st->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->cond, &ca);
    pthread_condattr_destroy(&ca);
    ret = wiredtiger_open(dbpath, NULL,
                          "create,cache_size=1G,session_max=2000,"
                          "log=(enabled=true,file_max=100MB,archive=true),"
                          "transaction_sync=(enabled=false),checkpoint=(wait=60),"
                          "eviction=(threads_min=1,threads_max=2),statistics=(fast)",
                          &st->conn);
    if (ret != 0) {
        free(st);
        return mf_err_set(err, MF_E_InternalError, "wiredtiger_open(%s): %s", dbpath, wiredtiger_strerror(ret));
    }
    ret = st->conn->open_session(st->conn, NULL, NULL, &st->flush_sess);
    if (ret != 0) {
        st->conn->close(st->conn, NULL);
        free(st);
        return mf_err_set(err, MF_E_InternalError, "open_session: %s", wiredtiger_strerror(ret));
    }
    st->gen = atomic_fetch_add(&storage_gen, 1) + 1;
    pthread_create(&st->flusher, NULL, flusher_main, st);
    *out = st;
    return 0;
}

void
mf_storage_close(mf_storage_t *st)
{
    pthread_mutex_lock(&st->lock);
    st->stopping = true;
    pthread_cond_signal(&st->cond);
    pthread_mutex_unlock(&st->lock);
    pthread_join(st->flusher, NULL);
    try_pending_drops(st);
    /*
     * Every thread that used storage has stopped by now (workers idle, the
     * TTL monitor joined): close their sessions and free our wrappers.
     */
    for (int i = 0; i < st->nsessions; i++) {
        mf_sess_t *s = st->sessions[i];
        for (int k = 0; k < s->ncache; k++) {
            s->cache[k]->wt->close(s->cache[k]->wt);
            free(s->cache[k]);
        }
        s->wt->close(s->wt, NULL);
        free(s);
    }
    free(st->sessions);
    /* WT_CONNECTION::close checkpoints every table. */
    st->conn->close(st->conn, NULL);
    for (int i = 0; i < st->npending; i++)
        free(st->pending_drops[i]);
    pthread_mutex_destroy(&st->lock);
    pthread_cond_destroy(&st->cond);
    free(st);
}

mf_sess_t *
mf_storage_session(mf_storage_t *st)
{
    if (tls_sess != NULL && tls_gen == st->gen)
        return tls_sess;
    mf_sess_t *s = mf_calloc(1, sizeof(*s));
    int ret = st->conn->open_session(st->conn, NULL, "isolation=snapshot,cache_cursors=false", &s->wt);
    if (ret != 0) {
        mf_log(MF_LOG_ERROR, "STORAGE", "open_session failed: %s", wiredtiger_strerror(ret));
        abort();
    }
    s->st = st;
    pthread_mutex_lock(&st->lock);
    if (st->nsessions == st->capsessions) {
        st->capsessions = st->capsessions ? st->capsessions * 2 : 16;
        st->sessions = mf_realloc(st->sessions, (size_t)st->capsessions * sizeof(*st->sessions));
    }
    st->sessions[st->nsessions++] = s;
    pthread_mutex_unlock(&st->lock);
    tls_sess = s;
    tls_gen = st->gen;
    return s;
}

void
mf_storage_session_close_thread(mf_storage_t *st)
{
    mf_sess_t *s = tls_sess;
    if (s == NULL || tls_gen != st->gen)
        return;
    tls_sess = NULL;
    tls_gen = 0;
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < st->nsessions; i++) {
        if (st->sessions[i] == s) {
            st->sessions[i] = st->sessions[--st->nsessions];
            break;
        }
    }
    pthread_mutex_unlock(&st->lock);
    for (int k = 0; k < s->ncache; k++) {
        s->cache[k]->wt->close(s->cache[k]->wt);
        free(s->cache[k]);
    }
    s->wt->close(s->wt, NULL);
    free(s);
}

int64_t
mf_storage_table_size(mf_sess_t *s, const char *uri)
{
    WT_CURSOR *c;
    char stat_uri[512];
    int64_t total = 0;
    const char *name = strchr(uri, ':');

    snprintf(stat_uri, sizeof(stat_uri), "statistics:file:%s.wt", name ? name + 1 : uri);
    if (s->wt->open_cursor(s->wt, stat_uri, NULL, "statistics=(size)", &c) != 0)
        return 0;
    c->set_key(c, WT_STAT_DSRC_BLOCK_SIZE);
    if (c->search(c) == 0) {
        const char *desc, *pvalue;
        int64_t value;
        if (c->get_value(c, &desc, &pvalue, &value) == 0)
            total = value;
    }
    c->close(c);
    return total;
}

int
mf_storage_create(mf_sess_t *s, const char *uri, const char *config, mf_error_t *err)
{
    int ret = s->wt->create(s->wt, uri, config);
    if (ret != 0)
        return wt_err(err, ret, "create table");
    return 0;
}

void
mf_storage_drop(mf_storage_t *st, const char *uri)
{
    mf_sess_t *s = mf_storage_session(st);
    mf_storage_session_release(s);
    int ret = s->wt->drop(s->wt, uri, "force=true");
    if (ret == 0 || ret == ENOENT)
        return;
    pthread_mutex_lock(&st->lock);
    if (st->npending < MF_MAX_PENDING_DROPS)
        st->pending_drops[st->npending++] = mf_strdup(uri);
    pthread_mutex_unlock(&st->lock);
}

int
mf_txn_begin(mf_sess_t *s, mf_error_t *err)
{
    int ret = s->wt->begin_transaction(s->wt, NULL);
    if (ret != 0)
        return wt_err(err, ret, "begin_transaction");
    s->in_txn = true;
    return 0;
}

int
mf_txn_commit(mf_sess_t *s, bool durable, mf_error_t *err)
{
    int ret = s->wt->commit_transaction(s->wt, durable ? "sync=on" : NULL);
    s->in_txn = false;
    if (txn_hook)
        txn_hook(ret == 0);
    if (ret != 0)
        return wt_err(err, ret, "commit_transaction");
    return 0;
}

void
mf_txn_abort(mf_sess_t *s)
{
    if (s->in_txn) {
        s->wt->rollback_transaction(s->wt, NULL);
        if (txn_hook)
            txn_hook(false);
    }
    s->in_txn = false;
}

bool
mf_txn_active(mf_sess_t *s)
{
    return s->in_txn;
}

int
mf_cur_open(mf_sess_t *s, const char *uri, mf_cur_t **out, mf_error_t *err)
{
    WT_CURSOR *c;
    for (int i = 0; i < s->ncache; i++) {
        mf_cur_t *mc = s->cache[i];
        if (!mc->in_use && strcmp(mc->uri, uri) == 0) {
            mc->in_use = true;
            *out = mc;
            return 0;
        }
    }
    int ret = s->wt->open_cursor(s->wt, uri, NULL, "overwrite=false", &c);
    if (ret != 0)
        return wt_err(err, ret, "open_cursor");
    mf_cur_t *mc = mf_calloc(1, sizeof(*mc));
    mc->wt = c;
    mc->s = s;
    mc->rid_keys = strcmp(c->key_format, "q") == 0;
    mc->in_use = true;
    snprintf(mc->uri, sizeof(mc->uri), "%s", uri);
    if (strlen(uri) < sizeof(mc->uri) && s->ncache < MF_CURSOR_CACHE)
        s->cache[s->ncache++] = mc;
    *out = mc;
    return 0;
}

void
mf_cur_close(mf_cur_t *c)
{
    if (c == NULL)
        return;
    mf_sess_t *s = c->s;
    for (int i = 0; i < s->ncache; i++) {
        if (s->cache[i] == c) {
            c->wt->reset(c->wt);
            c->in_use = false;
            return;
        }
    }
    c->wt->close(c->wt);
    free(c);
}

void
mf_storage_session_release(mf_sess_t *s)
{
    int keep = 0;
    for (int i = 0; i < s->ncache; i++) {
        mf_cur_t *c = s->cache[i];
        if (c->in_use) {
            s->cache[keep++] = c; /* still open by a caller: it closes it itself later */
            continue;
        }
        c->wt->close(c->wt);
        free(c);
    }
    s->ncache = keep;
}

int
mf_cur_next(mf_cur_t *c)
{
    return map_ret(c->wt->next(c->wt));
}

int
mf_cur_prev(mf_cur_t *c)
{
    return map_ret(c->wt->prev(c->wt));
}

void
mf_cur_reset(mf_cur_t *c)
{
    c->wt->reset(c->wt);
}

int
mf_cur_search_rid(mf_cur_t *c, int64_t rid)
{
    c->wt->set_key(c->wt, rid);
    return map_ret(c->wt->search(c->wt));
}

int
mf_cur_search_bytes(mf_cur_t *c, const void *key, size_t len)
{
    WT_ITEM k = {.data = key, .size = len};
    c->wt->set_key(c->wt, &k);
    return map_ret(c->wt->search(c->wt));
}

static int
seek_ge(mf_cur_t *c)
{
    int exact;
    int ret = c->wt->search_near(c->wt, &exact);
    if (ret != 0)
        return map_ret(ret);
    if (exact < 0) {
        ret = c->wt->next(c->wt);
        if (ret != 0)
            return map_ret(ret);
    }
    return 0;
}

int
mf_cur_seek_rid_ge(mf_cur_t *c, int64_t rid)
{
    c->wt->set_key(c->wt, rid);
    return seek_ge(c);
}

int
mf_cur_seek_bytes_ge(mf_cur_t *c, const void *key, size_t len)
{
    WT_ITEM k = {.data = key, .size = len};
    c->wt->set_key(c->wt, &k);
    return seek_ge(c);
}

int64_t
mf_cur_rid(mf_cur_t *c)
{
    int64_t rid = 0;
    c->wt->get_key(c->wt, &rid);
    return rid;
}

void
mf_cur_key_bytes(mf_cur_t *c, const uint8_t **key, size_t *len)
{
    WT_ITEM k = {0};
    c->wt->get_key(c->wt, &k);
    *key = k.data;
    *len = k.size;
}

void
mf_cur_value(mf_cur_t *c, const uint8_t **val, size_t *len)
{
    WT_ITEM v = {0};
    c->wt->get_value(c->wt, &v);
    *val = v.data;
    *len = v.size;
}

int
mf_cur_insert_rid(mf_cur_t *c, int64_t rid, const void *val, size_t len)
{
    WT_ITEM v = {.data = val, .size = len};
    c->wt->set_key(c->wt, rid);
    c->wt->set_value(c->wt, &v);
    return map_ret(c->wt->insert(c->wt));
}

int
mf_cur_update_rid(mf_cur_t *c, int64_t rid, const void *val, size_t len)
{
    WT_ITEM v = {.data = val, .size = len};
    c->wt->set_key(c->wt, rid);
    c->wt->set_value(c->wt, &v);
    return map_ret(c->wt->update(c->wt));
}

int
mf_cur_remove_rid(mf_cur_t *c, int64_t rid)
{
    c->wt->set_key(c->wt, rid);
    return map_ret(c->wt->remove(c->wt));
}

int
mf_cur_insert_bytes(mf_cur_t *c, const void *key, size_t klen, const void *val, size_t vlen)
{
    WT_ITEM k = {.data = key, .size = klen}, v = {.data = val, .size = vlen};
    c->wt->set_key(c->wt, &k);
    c->wt->set_value(c->wt, &v);
    return map_ret(c->wt->insert(c->wt));
}

int
mf_cur_put_bytes(mf_cur_t *c, const void *key, size_t klen, const void *val, size_t vlen)
{
    WT_ITEM k = {.data = key, .size = klen}, v = {.data = val, .size = vlen};
    int ret;
    c->wt->set_key(c->wt, &k);
    c->wt->set_value(c->wt, &v);
    ret = c->wt->insert(c->wt);
    if (ret == WT_DUPLICATE_KEY) {
        c->wt->set_key(c->wt, &k);
        c->wt->set_value(c->wt, &v);
        ret = c->wt->update(c->wt);
    }
    return map_ret(ret);
}

int
mf_cur_remove_bytes(mf_cur_t *c, const void *key, size_t klen)
{
    WT_ITEM k = {.data = key, .size = klen};
    c->wt->set_key(c->wt, &k);
    return map_ret(c->wt->remove(c->wt));
}
