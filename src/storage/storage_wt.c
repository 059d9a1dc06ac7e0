/*
 * storage_wt.c: the WiredTiger adapter (see storage.h for the table layout).
 *
 * Sessions are per thread: a thread-local pointer caches the thread's session
 * for one mf_storage_t. A command's cursors are closed when it ends
 * (mf_storage_session_release); WiredTiger's own cursor cache (cache_cursors,
 * its default) keeps them, reset, for the session's next command: reopening
 * one costs about a quarter of opening it, and a cached cursor does not count
 * as a use of its table, so a drop succeeds while other threads are idle. A
 * drop that still meets EBUSY (a checkpoint holding the table, say) is queued
 * and retried by the flusher thread.
 *
 * The flusher thread wakes every 100 ms: it syncs the log (so an
 * unacknowledged-durability write is on disk within ~100 ms), retries pending
 * drops, runs the periodic hook (the catalog's size flush) about once a
 * second, and every 60 s WiredTiger checkpoints on its own
 * (checkpoint=(wait=60)). Pending drops live in a growable list; they are not
 * persisted here: the catalog drops every coll-* / index-* table it does not
 * name when it opens, which also covers a crash before a retry succeeded.
 *
 * Fault injection (tests only, per storage, no process globals):
 * mf_storage_fault_set arms a countdown on one table; the cursor operation
 * that exhausts it fails once with -1 as a WiredTiger error would (EIO).
 * When unarmed the cost is one relaxed atomic load per cursor operation.
 *
 * End-of-transaction callbacks (mf_txn_on_end) are per session and run on
 * the session's thread right after commit or rollback, then are cleared.
 *
 * Open files: every table is a file WiredTiger keeps open while it is in
 * use and closes (its sweep) once idle for a while; a table create and a
 * cursor open may each take a descriptor, and WiredTiger panics when its
 * own threads cannot open a file (the journal's next file, its directory).
 * So a cursor open (and a file's statistics, and compact) is refused with
 * TooManyFilesOpen while fewer than MF_FDS_OPEN_RESERVE descriptors are
 * left (common/fds.h), the server's own tables excepted (own_table).
 * Counting costs a read of /proc, so it is done once per budget of opens,
 * one thread at a time (fd_count_lock: each count holds a descriptor): a
 * count that finds F free allows (F - reserve) / 2 more opens before the
 * next one (each open takes at most one descriptor; the other half is for
 * sockets and WiredTiger's own). Far from the limit that is a count every
 * few thousand opens; near it, every open. Each accepted socket takes one
 * from the budget (mf_storage_fd_taken), and one accepted within the
 * ports' reserve ends it (mf_storage_fds_low). A count short of
 * fd_enough, a refused create, a socket in the reserve, or any EMFILE or
 * ENFILE WiredTiger reports (its event handler, any thread) puts the
 * storage under descriptor pressure: the flusher switches WiredTiger's sweep
 * to close any table idle for a second (file_manager, reconfigured; the
 * sweep looks every second) and checkpoints every 2 s instead of 60 (a
 * table with changes not yet checkpointed is never closed), until
 * fd_enough are free again, then back to the normal ten minutes beyond
 * close_handle_minimum (a quarter of the limit, at most 250). Reconfiguring
 * the checkpoint period restarts WiredTiger's checkpoint thread, so the
 * flusher may wait behind a checkpoint in flight at those two moments. A
 * restart with more tables than the limit allows then opens and closes them
 * in turn instead of stopping the server.
 *
 * Space (compact, fsync, collStats): a table's size is its file's size;
 * deletions free blocks inside the file, which a checkpoint makes reusable,
 * and WT_SESSION::compact moves live blocks off the end of the file and
 * truncates it (mf_storage_compact, in interruptible rounds).
 */
#include "common/alloc.h"
#include "storage/storage.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <wiredtiger.h>

#include "common/clock.h"
#include "common/curop.h"
#include "common/fds.h"
#include "common/fmt.h"
#include "common/log.h"
#include "common/sysres.h"

#define MF_CURSOR_CACHE 32

typedef struct txn_cb {
    void (*fn)(void *arg, bool committed);
    void *arg;
} txn_cb_t;

struct mf_cur {
    WT_CURSOR *wt;
    mf_sess_t *s;
    bool rid_keys; /* key_format q (record table) vs u (bytes) */
    bool in_use;
    /*
     * parked: closed with mf_cur_close_near inside a transaction, still on
     * its entry; mf_cur_open_near takes it as it is, anything else resets
     * it first, and the transaction's end resets it. near: the last find or
     * remove_here left it on an entry, so the next find looks just past it.
     */
    bool parked, near;
    /*
     * near_skip: finds left to make without looking near, after a look
     * that missed (deletes in random order): the steps cost only when
     * they usually find the key.
     */
    uint8_t near_skip;
    /*
     * idle: its last operation was an insert, after which WiredTiger holds
     * no page for it and keeps no position (WT_CURSOR::insert ends with a
     * reset of its own), so closing it need not reset it again. Every other
     * operation clears it (cur_begin).
     */
    bool idle;
    char uri[96];
};

/*
 * A session keeps up to MF_CURSOR_CACHE closed-but-open cursors, keyed by
 * table, so a command that writes many documents opens each table's cursor
 * once. mf_storage_session_release closes them all (into WiredTiger's cursor
 * cache, see above); the command layer calls it when a command ends, so an
 * idle session holds no open cursor and a drop can proceed.
 */
struct mf_sess {
    WT_SESSION *wt;
    mf_storage_t *st;
    bool in_txn;
    mf_cur_t *cache[MF_CURSOR_CACHE];
    int ncache;
    txn_cb_t *cbs; /* end-of-transaction callbacks, growable */
    int ncbs, capcbs;
    /* The transaction's own pre-commit step (mf_txn_on_prepare), cleared when it ends. */
    int (*prep_fn)(void *arg, mf_sess_t *s, mf_error_t *err);
    void *prep_arg;
    /* Range guards the transaction entered (its commit waits while one is closed), growable. */
    mf_rguard_t **entered;
    int nentered, capentered;
    /* The guard it commits through (mf_txn_commit_unless_entered), NULL if none, and its token. */
    mf_rguard_t *hold;
    int64_t hold_token;
    /*
     * A user transaction (mf_txn_user_begin): the WiredTiger transaction
     * stays open across commands; mf_txn_begin/commit/abort nest inside it
     * (depth) and only count. writes: write attempts on the session, so an
     * inner abort after one dooms the transaction (the inner work cannot be
     * undone alone); depth_writes: the count at each nested begin.
     */
    bool user, doomed;
    int depth;
    uint64_t writes;
    uint64_t depth_writes[16];
};

static void rguards_leave(mf_sess_t *s);

struct mf_storage {
    /*
     * WiredTiger's event handler for this connection (first, so the
     * handler finds its storage: it is handed back the pointer given).
     */
    WT_EVENT_HANDLER events;
    WT_CONNECTION *conn;
    pthread_t flusher;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stopping;
    char **pending_drops; /* growable, guarded by lock */
    int npending, cappending;
    /* Periodic hook: called by the flusher about once a second, under hook_lock. */
    pthread_mutex_t hook_lock;
    void (*periodic)(void *arg);
    void *periodic_arg;
    /* Fault injection (see the file comment); guarded by fault_lock. */
    _Atomic bool fault_armed;
    pthread_mutex_t fault_lock;
    char *fault_uri;
    int fault_left;
    WT_SESSION *flush_sess;
    /* Every thread's session, so close can release them (guarded by lock). */
    mf_sess_t **sessions;
    int nsessions, capsessions;
    uint64_t gen;
    bool in_memory;
    bool has_snappy, has_zlib; /* block compressors loaded (WiredTiger's own extensions, when installed) */
    bool has_zstd;             /* ext/wt_zstd (libmayfly_wt_zstd.so) loaded */
    void (*txn_hook)(void *arg, bool committed);
    void *txn_hook_arg;
    /*
     * Open files (see the file comment). fd_limit: the soft limit at open,
     * INT64_MAX for none (or in memory: no files). fd_budget: cursor opens
     * (and accepted sockets, mf_storage_fd_taken) left before the next
     * count. fd_pressure: set by a count or by the
     * event handler, cleared by the flusher, which alone reconfigures
     * WiredTiger (fm_pressure: what it last set; fm_normal: the normal
     * file_manager configuration).
     */
    int64_t fd_limit;
    /* fd_budget on a cache line of its own, whatever the allocation's alignment: every uncached open takes from it. */
    char fd_pad_before[64];
    _Atomic int64_t fd_budget;
    char fd_pad_after[64];
    _Atomic bool fd_pressure;
    pthread_mutex_t fd_count_lock; /* one count at a time: each holds a descriptor of its own */
    bool fm_pressure;
    char fm_normal[128];
    int64_t fm_logged_ms; /* when the flusher last logged pressure (once a minute) */
    bool fm_logged;       /* ... and whether that was this time's, so its end is logged too */
    int (*precommit_hook)(void *arg, mf_sess_t *s, mf_error_t *err);
    void *precommit_hook_arg;
};

/*
 * Each thread's sessions, one per storage instance it has used (an
 * embedding application may have several engines open). An instance is
 * known by a generation number, not its pointer, because a storage reopened
 * in the same process may get the old address back. A thread using more
 * than MF_TLS_SESSIONS instances opens a fresh session for the overflow,
 * still owned (and closed) by its storage.
 */
#define MF_TLS_SESSIONS 8
static __thread struct {
    uint64_t gen;
    mf_sess_t *s;
    uint64_t used; /* tls_clock when last returned: the least recently used slot is reused */
} tls_sess[MF_TLS_SESSIONS];
static __thread uint64_t tls_clock;
/* Process-wide source of unique storage generations (identity only, no state). */
static _Atomic uint64_t storage_gen;

/*
 * WiredTiger's errors go to the log. A panic (WT_PANIC: e.g. the disk filled
 * up in the middle of a write) leaves the connection unusable: answering
 * ping while every data command fails would hide that from a supervisor, so
 * the process stops at once, as mongod does (its fatal assertion), and a
 * restart recovers from the journal.
 */
static int
wt_handle_error(WT_EVENT_HANDLER *handler, WT_SESSION *session, int error, const char *message)
{
    mf_storage_t *st = (mf_storage_t *)(void *)handler; /* the first member (see struct mf_storage) */
    (void)session;
    if (error == EMFILE || error == ENFILE)
        mf_storage_fds_low(st); /* only atomics: this may run on any thread, under any lock, ours included */
    if (error == WT_PANIC) {
        mf_log(MF_LOG_ERROR, "STORAGE", "WiredTiger panic, stopping the server (a restart recovers from the "
               "journal): %s", message);
        abort();
    }
    mf_log(MF_LOG_ERROR, "STORAGE", "WiredTiger: %s", message);
    return 0;
}


void
mf_storage_set_txn_hook(mf_storage_t *st, void (*fn)(void *arg, bool committed), void *arg)
{
    st->txn_hook_arg = arg;
    st->txn_hook = fn;
}

void
mf_storage_set_precommit_hook(mf_storage_t *st, int (*fn)(void *arg, mf_sess_t *s, mf_error_t *err), void *arg)
{
    st->precommit_hook_arg = arg;
    st->precommit_hook = fn;
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
        return mf_err_write_conflict(err);
    if (ret == EMFILE || ret == ENFILE)
        return mf_err_set(err, MF_E_TooManyFilesOpen, "%s: %s", what, wiredtiger_strerror(ret));
    return mf_err_set(err, MF_E_InternalError, "%s: %s", what, wiredtiger_strerror(ret));
}

/* Queues uri for a later drop (st->lock held). Ignores a uri already queued. */
static void
pending_add_locked(mf_storage_t *st, const char *uri)
{
    for (int i = 0; i < st->npending; i++) {
        if (strcmp(st->pending_drops[i], uri) == 0)
            return;
    }
    if (st->npending == st->cappending) {
        st->cappending = st->cappending ? st->cappending * 2 : 16;
        st->pending_drops = mf_realloc(st->pending_drops, (size_t)st->cappending * sizeof(*st->pending_drops));
    }
    st->pending_drops[st->npending++] = mf_strdup(uri);
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

static int64_t fd_enough(mf_storage_t *st);

/* own_table: the server's own few tables (catalog, sizes, archive, replication state): never refused, a bounded number. */
static bool
own_table(const char *uri)
{
    return strncmp(uri, "table:_mf_", 10) == 0 || strncmp(uri, "table:mf_", 9) == 0;
}

/*
 * fd_gate: before a cursor open that may open a table's file; 0 to go on,
 * or -1 with TooManyFilesOpen in err while fewer than MF_FDS_OPEN_RESERVE
 * descriptors are left (see "Open files" in the file comment).
 */
static int
fd_gate(mf_storage_t *st, const char *uri, mf_error_t *err)
{
    if (st->fd_limit == INT64_MAX || atomic_fetch_sub_explicit(&st->fd_budget, 1, memory_order_relaxed) > 0)
        return 0;
    if (own_table(uri))
        return 0;
    /*
     * One count at a time (each opens /proc): a thread that waited here
     * takes from the budget the count before it left, if any.
     */
    pthread_mutex_lock(&st->fd_count_lock);
    if (atomic_fetch_sub_explicit(&st->fd_budget, 1, memory_order_relaxed) > 0) {
        pthread_mutex_unlock(&st->fd_count_lock);
        return 0;
    }
    int64_t nfree = mf_fds_free();
    /* Short of what ends the pressure: start closing idle tables now, before opens are refused. */
    if (nfree < fd_enough(st))
        atomic_store(&st->fd_pressure, true);
    atomic_store(&st->fd_budget, nfree >= MF_FDS_OPEN_RESERVE ? (nfree - MF_FDS_OPEN_RESERVE) / 2 : 0);
    pthread_mutex_unlock(&st->fd_count_lock);
    if (nfree >= MF_FDS_OPEN_RESERVE)
        return 0;
    return mf_err_set(err, MF_E_TooManyFilesOpen,
                      "Too many open files: %lld of the %lld file descriptors this process may open (ulimit -n) are "
                      "left, too few to open %s; idle tables are being closed, retry shortly, or raise the limit",
                      (long long)nfree, (long long)st->fd_limit, uri);
}

void
mf_storage_fd_taken(mf_storage_t *st)
{
    atomic_fetch_sub_explicit(&st->fd_budget, 1, memory_order_relaxed);
}

void
mf_storage_fds_low(mf_storage_t *st)
{
    atomic_store(&st->fd_budget, 0);
    atomic_store(&st->fd_pressure, true);
}

/* Under pressure: close what is idle for a second; checkpoint every 2 s, since a table with unwritten changes stays open. */
#define FM_PRESSURE "file_manager=(close_idle_time=1,close_scan_interval=1,close_handle_minimum=0),checkpoint=(wait=2)"

/*
 * fd_enough: free descriptors that end the pressure (and below which a count
 * starts it): a quarter of the limit, at least twice the ports' reserve,
 * but at most half the limit (a small one could never free 128).
 */
static int64_t
fd_enough(mf_storage_t *st)
{
    int64_t want = st->fd_limit / 4 > 2 * MF_FDS_CONN_RESERVE ? st->fd_limit / 4 : 2 * MF_FDS_CONN_RESERVE;
    return want < st->fd_limit / 2 ? want : st->fd_limit / 2;
}

/* fd_tick: the flusher's part in "Open files" (see the file comment); every tick, on its thread. */
static void
fd_tick(mf_storage_t *st, unsigned ticks)
{
    if (st->fd_limit == INT64_MAX)
        return;
    if (!st->fm_pressure) {
        if (!atomic_load(&st->fd_pressure))
            return;
        /* A failed reconfigure is tried again at the next tick, its failure logged once a minute. */
        int ret = st->conn->reconfigure(st->conn, FM_PRESSURE);
        st->fm_pressure = ret == 0;
        st->fm_logged = mf_log_due(&st->fm_logged_ms, 60000); /* once a minute: a load can flip it often */
        if (!st->fm_logged)
            return;
        mf_log(MF_LOG_WARN, "STORAGE", "Too many open files: %lld of the %lld file descriptors this process may open "
               "(ulimit -n) are left; tables idle for a second are closed until %lld are free, and opening one is "
               "refused with TooManyFilesOpen while fewer than %d are left%s%s",
               (long long)mf_fds_free(), (long long)st->fd_limit, (long long)fd_enough(st), MF_FDS_OPEN_RESERVE,
               ret ? "; reconfiguring WiredTiger failed: " : "", ret ? wiredtiger_strerror(ret) : "");
        return;
    }
    if (ticks % 10 != 0)
        return;
    /* Cleared before the count, so that a refusal meanwhile sets it again rather than being lost. */
    atomic_store(&st->fd_pressure, false);
    int64_t nfree = mf_fds_free();
    if (nfree < fd_enough(st)) {
        atomic_store(&st->fd_pressure, true);
        return;
    }
    int ret = st->conn->reconfigure(st->conn, st->fm_normal);
    st->fm_pressure = ret != 0; /* failed: still under the pressure settings, tried again next time */
    if (ret != 0)
        atomic_store(&st->fd_pressure, true);
    if (st->fm_logged || ret != 0)
        mf_log(MF_LOG_INFO, "STORAGE", "Open files back under the limit: %lld of %lld descriptors free; tables idle for "
           "ten minutes are closed again%s%s", (long long)nfree, (long long)st->fd_limit,
           ret ? "; reconfiguring WiredTiger failed: " : "", ret ? wiredtiger_strerror(ret) : "");
}

static void *
flusher_main(void *arg)
{
    mf_storage_t *st = arg;
    struct timespec ts;
    unsigned ticks = 0;

    pthread_setname_np(pthread_self(), "mf-flush"); /* top -H, perf and /proc tell it from WiredTiger's threads */
    pthread_mutex_lock(&st->lock);
    while (!st->stopping) {
        ts = mf_mono_deadline(100); /* the condvar waits on the monotonic clock */
        pthread_cond_timedwait(&st->cond, &st->lock, &ts);
        if (st->stopping)
            break;
        int have_drops = st->npending;
        pthread_mutex_unlock(&st->lock);
        if (!st->in_memory)
            (void)st->flush_sess->log_flush(st->flush_sess, "sync=on");
        if (have_drops)
            try_pending_drops(st);
        fd_tick(st, ++ticks);
        if (ticks % 10 == 0) {
            pthread_mutex_lock(&st->hook_lock);
            if (st->periodic)
                st->periodic(st->periodic_arg);
            pthread_mutex_unlock(&st->hook_lock);
        }
        pthread_mutex_lock(&st->lock);
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

int
mf_storage_open(const char *dbpath, mf_storage_t **out, mf_error_t *err)
{
    return mf_storage_open_ex(dbpath, false, 0, out, err);
}

#define DIRTY_TARGET_MAX (INT64_C(1024) * 1024 * 1024 / 20) /* 5 % of 1 GB: see mf_storage_open_ex */

int64_t
mf_storage_cache_mb_default(int64_t mem_limit)
{
    int64_t mb = mem_limit / (1024 * 1024);
    int64_t half = (mb - 1024) / 2;
    if (half > MF_STORAGE_CACHE_MAX_MB)
        return MF_STORAGE_CACHE_MAX_MB;
    return half > MF_STORAGE_CACHE_MIN_MB ? half : MF_STORAGE_CACHE_MIN_MB;
}

/* dir_of: the directory part of path into out ("" when there is none). */
static void
dir_of(const char *path, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        out[0] = '\0';
}

/*
 * find_zstd_ext: libmayfly_wt_zstd.so (ext/wt_zstd) beside the running
 * binary, beside the library this code is in (libmayfly.so), or in the lib
 * directory next to an installed bin/. True with its path in out.
 */
static bool
find_zstd_ext(char *out, size_t outlen)
{
    char dirs[3][600], self[512];
    Dl_info info;
    int n = 0;
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);

    if (len > 0) {
        self[len] = '\0';
        dir_of(self, dirs[n], sizeof dirs[n]);
        snprintf(dirs[n + 1], sizeof dirs[n + 1], "%.512s/../lib", dirs[n]);
        n += 2;
    }
    if (dladdr((void *)find_zstd_ext, &info) != 0 && info.dli_fname != NULL)
        dir_of(info.dli_fname, dirs[n++], sizeof dirs[0]);
    for (int i = 0; i < n; i++) {
        snprintf(out, outlen, "%.600s/libmayfly_wt_zstd.so", dirs[i][0] ? dirs[i] : ".");
        if (access(out, R_OK) == 0)
            return true;
    }
    return false;
}

/*
 * compressor_extensions: WiredTiger's snappy and zlib block compressors are
 * extension libraries installed beside libwiredtiger (Debian's
 * libwiredtiger0 ships them), and mayfly's zstd one (ext/wt_zstd) sits
 * beside mayflyd or libmayfly.so. Those found are loaded (",extensions=[...]"
 * into ext) and tables get compressed as mongod's are; absent, tables are
 * created uncompressed. Tables keep the compressor they were created with.
 */
static void
compressor_extensions(mf_storage_t *st, char *ext, size_t extlen)
{
    Dl_info info;
    char dir[512], snappy[700], zlib[700], zstd[700];
    const char *libs[3];
    int nlibs = 0;
    size_t n = 0;

    ext[0] = '\0';
    if (dladdr((void *)wiredtiger_open, &info) != 0 && info.dli_fname != NULL) {
        dir_of(info.dli_fname, dir, sizeof dir);
        snprintf(snappy, sizeof snappy, "%s/libwiredtiger_snappy.so", dir);
        snprintf(zlib, sizeof zlib, "%s/libwiredtiger_zlib.so", dir);
        if ((st->has_snappy = access(snappy, R_OK) == 0))
            libs[nlibs++] = snappy;
        if ((st->has_zlib = access(zlib, R_OK) == 0))
            libs[nlibs++] = zlib;
    }
    if ((st->has_zstd = find_zstd_ext(zstd, sizeof zstd)))
        libs[nlibs++] = zstd;
    if (nlibs == 0)
        return;
    n += (size_t)snprintf(ext + n, extlen - n, ",extensions=[");
    for (int i = 0; i < nlibs && n < extlen; i++)
        n += (size_t)snprintf(ext + n, extlen - n, "%s\"%s\"", i ? "," : "", libs[i]);
    if (n < extlen)
        snprintf(ext + n, extlen - n, "]");
}

const char *
mf_storage_table_config(mf_storage_t *st, int kind)
{
    switch (kind) {
    case MF_TABLE_DOCS_DENSE:
        if (st->has_zstd)
            return "key_format=q,value_format=u,leaf_value_max=64MB,block_compressor=zstd";
        if (st->has_zlib)
            return "key_format=q,value_format=u,leaf_value_max=64MB,block_compressor=zlib";
        /* fall through */
    case MF_TABLE_DOCS:
        return st->has_snappy ? "key_format=q,value_format=u,leaf_value_max=64MB,block_compressor=snappy"
                              : "key_format=q,value_format=u,leaf_value_max=64MB";
    default:
        /* No prefix compression (mongod has it): searches then rebuild no keys; see docs/ARCHITECTURE.md. */
        return "key_format=u,value_format=u,prefix_compression=false";
    }
}

/* storage_free: destroys st's locks and frees it (its connection closed or never opened). */
static void
storage_free(mf_storage_t *st)
{
    pthread_mutex_destroy(&st->lock);
    pthread_mutex_destroy(&st->hook_lock);
    pthread_mutex_destroy(&st->fault_lock);
    pthread_mutex_destroy(&st->fd_count_lock);
    pthread_cond_destroy(&st->cond);
    free(st);
}

int
mf_storage_open_ex(const char *dbpath, bool in_memory, int64_t cache_mb, mf_storage_t **out, mf_error_t *err)
{
    mf_storage_t *st;
    int ret;

    if (mkdir(dbpath, 0755) != 0 && errno != EEXIST)
        return mf_err_set(err, MF_E_InternalError, "cannot create dbpath %s: %s", dbpath, strerror(errno));
    st = mf_calloc(1, sizeof(*st));
    pthread_mutex_init(&st->lock, NULL);
    pthread_mutex_init(&st->hook_lock, NULL);
    pthread_mutex_init(&st->fault_lock, NULL);
    pthread_mutex_init(&st->fd_count_lock, NULL);
    mf_cond_init_mono(&st->cond);
    st->events.handle_error = wt_handle_error;
    st->fd_limit = in_memory ? INT64_MAX : mf_fds_limit();
    /* Handles beyond a quarter of the limit (at most WiredTiger's default 250) are closed after 10 idle minutes. */
    snprintf(st->fm_normal, sizeof st->fm_normal,
             "file_manager=(close_idle_time=600,close_scan_interval=1,close_handle_minimum=%lld),checkpoint=(wait=60)",
             (long long)(st->fd_limit / 4 < 250 ? st->fd_limit / 4 : 250));
    /*
     * In memory: no journal, no checkpoints, nothing written to dbpath (it
     * only has to exist); the data goes with the last close. The cache must
     * hold all of it.
     */
    char config[4096], ext[2400];
    compressor_extensions(st, ext, sizeof ext);
    if (cache_mb <= 0) {
        mf_sysres_t res;
        mf_sysres_read("", &res);
        cache_mb = mf_storage_cache_mb_default(res.mem_limit);
    }
    if (cache_mb > MF_STORAGE_CACHE_MAX_MB)
        cache_mb = MF_STORAGE_CACHE_MAX_MB;
    /*
     * Dirty pages are written out in the background from 5 % of the cache
     * (WiredTiger's default), but from at most what that was with the 1 GB
     * cache of earlier versions: a TTL burst's deletions leave their pages
     * full of deleted entries until those are written out, and the next
     * deletions step over them. With mongod's default cache on a 24 GB
     * machine (11.5 GB, 575 MB of it dirty before any write-out) a burst of
     * 1,000,000 cost 2.94-3.06 µs of server CPU per document, with the
     * write-out from 51 MB 2.30-2.43, with the 1 GB cache 2.18-2.26
     * (session 51, alternating probes). Application threads are still only
     * made to evict at 20 % of the cache. On disk only: in memory there is
     * nowhere to write pages out to, and the cap only made eviction scrub.
     */
    char dirty[64] = "";
    if (!in_memory && cache_mb * 1024 * 1024 / 20 > DIRTY_TARGET_MAX)
        snprintf(dirty, sizeof(dirty), ",eviction_dirty_target=%lld", (long long)DIRTY_TARGET_MAX);
    snprintf(config, sizeof config, "%s,cache_size=%lldMB%s%s%s%s",
             in_memory ? "create,in_memory=true,session_max=2000,"
                         "eviction=(threads_min=1,threads_max=2),statistics=(fast)"
                       : "create,session_max=2000,"
                         "log=(enabled=true,file_max=100MB,archive=true),"
                         "transaction_sync=(enabled=false),"
                         "eviction=(threads_min=1,threads_max=2),statistics=(fast)",
             (long long)cache_mb, dirty, in_memory ? "" : ",", in_memory ? "" : st->fm_normal, ext);
    ret = wiredtiger_open(dbpath, &st->events, config, &st->conn);
    st->in_memory = in_memory;
    if (ret != 0) {
        /*
         * Recovery after a crash keeps every table it replays open at once:
         * with more of them changed since the last checkpoint than files
         * this process may open, it cannot finish. Nothing is lost; a start
         * with a higher limit recovers it.
         */
        bool no_fds = atomic_load(&st->fd_pressure);
        int64_t limit = st->fd_limit;
        storage_free(st);
        if (no_fds)
            return mf_err_set(err, MF_E_TooManyFilesOpen, "wiredtiger_open(%s): %s: too many open files (the limit is "
                              "%lld): recovering from the journal opens every collection and index changed since "
                              "the last checkpoint at once; nothing is lost, start again with a higher limit "
                              "(ulimit -n, or LimitNOFILE= in a systemd unit)", dbpath, wiredtiger_strerror(ret),
                              (long long)limit);
        return mf_err_set(err, MF_E_InternalError, "wiredtiger_open(%s): %s", dbpath, wiredtiger_strerror(ret));
    }
    ret = st->conn->open_session(st->conn, NULL, NULL, &st->flush_sess);
    if (ret != 0) {
        st->conn->close(st->conn, NULL);
        storage_free(st);
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
        rguards_leave(s); /* a transaction still open ends with the session */
        s->wt->close(s->wt, NULL);
        free(s->cbs);
        free(s->entered);
        free(s);
    }
    free(st->sessions);
    /* WT_CONNECTION::close checkpoints every table. */
    st->conn->close(st->conn, NULL);
    for (int i = 0; i < st->npending; i++)
        free(st->pending_drops[i]);
    free(st->pending_drops);
    free(st->fault_uri);
    storage_free(st);
}

mf_sess_t *
mf_storage_session(mf_storage_t *st)
{
    int free_slot = -1, lru = 0;
    for (int i = 0; i < MF_TLS_SESSIONS; i++) {
        if (tls_sess[i].s != NULL && tls_sess[i].gen == st->gen) {
            tls_sess[i].used = ++tls_clock;
            return tls_sess[i].s;
        }
        if (free_slot < 0 && tls_sess[i].s == NULL)
            free_slot = i;
        if (tls_sess[i].used < tls_sess[lru].used)
            lru = i;
    }
    /*
     * Every slot taken: reuse the least recently used one. Its session stays
     * owned by its storage (closed with it, or already gone with a closed
     * one, which is the usual case: an application that closes and reopens
     * databases), only this thread's shortcut to it is forgotten.
     */
    if (free_slot < 0)
        free_slot = lru;
    mf_sess_t *s = mf_calloc(1, sizeof(*s));
    int ret = st->conn->open_session(st->conn, NULL, "isolation=snapshot", &s->wt);
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
    tls_sess[free_slot].s = s;
    tls_sess[free_slot].gen = st->gen;
    tls_sess[free_slot].used = ++tls_clock;
    return s;
}

void
mf_storage_session_close_thread(mf_storage_t *st)
{
    mf_sess_t *s = NULL;
    for (int i = 0; i < MF_TLS_SESSIONS; i++) {
        if (tls_sess[i].s != NULL && tls_sess[i].gen == st->gen) {
            s = tls_sess[i].s;
            tls_sess[i].s = NULL;
            tls_sess[i].gen = 0;
            break;
        }
    }
    if (s == NULL)
        return;
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < st->nsessions; i++) {
        if (st->sessions[i] == s) {
            st->sessions[i] = st->sessions[--st->nsessions];
            break;
        }
    }
    pthread_mutex_unlock(&st->lock);
    mf_storage_session_release(s);
    rguards_leave(s); /* a transaction still open ends with the session */
    s->wt->close(s->wt, NULL);
    free(s->cbs);
    free(s->entered);
    free(s);
}

/*
 * read_stats: reads n statistics (keys) of the statistics cursor stat_uri
 * ("statistics:" for the connection's, "statistics:file:..." for a file's)
 * into vals (0 where missing), the cursor opened with config. Returns 0, or
 * the WiredTiger error of opening the cursor.
 *
 * file_stats: the same for table uri's file (WT_STAT_DSRC_* keys); config
 * "statistics=(size)" reads only the file size, from the file system,
 * "statistics=(fast)" the block manager's counters too.
 */
static int
read_stats(mf_sess_t *s, const char *stat_uri, const char *config, const int *keys, int64_t *vals, int n)
{
    WT_CURSOR *c;

    for (int i = 0; i < n; i++)
        vals[i] = 0;
    int ret = s->wt->open_cursor(s->wt, stat_uri, NULL, config, &c);
    if (ret != 0)
        return ret;
    for (int i = 0; i < n; i++) {
        const char *desc, *pvalue;
        c->set_key(c, keys[i]);
        if (c->search(c) == 0)
            (void)c->get_value(c, &desc, &pvalue, &vals[i]);
    }
    c->close(c);
    return 0;
}

static int
file_stats(mf_sess_t *s, const char *uri, const char *config, const int *keys, int64_t *vals, int n)
{
    char stat_uri[512];
    /* A file's statistics open it, as a cursor does (its size alone is read from the file system). */
    if (strcmp(config, "statistics=(size)") != 0 && fd_gate(s->st, uri, NULL) != 0)
        return EMFILE;
    const char *name = strchr(uri, ':');
    snprintf(stat_uri, sizeof(stat_uri), "statistics:file:%s.wt", name ? name + 1 : uri);
    return read_stats(s, stat_uri, config, keys, vals, n);
}

int64_t
mf_storage_table_size(mf_sess_t *s, const char *uri)
{
    static const int key = WT_STAT_DSRC_BLOCK_SIZE;
    int64_t size;
    return file_stats(s, uri, "statistics=(size)", &key, &size, 1) == 0 ? size : 0;
}

const char *
mf_storage_home(mf_storage_t *st)
{
    return st->conn->get_home(st->conn);
}

int
mf_storage_table_space(mf_sess_t *s, const char *uri, int64_t *file_bytes, int64_t *free_bytes, mf_error_t *err)
{
    static const int keys[2] = {WT_STAT_DSRC_BLOCK_SIZE, WT_STAT_DSRC_BLOCK_REUSE_BYTES};
    int64_t vals[2];
    *file_bytes = *free_bytes = 0;
    if (s->st->in_memory)
        return 0;
    int ret = file_stats(s, uri, "statistics=(fast)", keys, vals, 2);
    if (ret != 0)
        return wt_err(err, ret, "table statistics");
    *file_bytes = vals[0];
    *free_bytes = vals[1];
    return 0;
}

/*
 * collStats' WiredTiger sections (mf_storage_table_stats_bson).
 *
 * A table is one column group whose source is a file; the file's creation
 * config is what mongod shows as creationString. The statistics cursor
 * yields (description, printable value, value) rows in WiredTiger's order,
 * descriptions like "block-manager: blocks allocated"; they are gathered
 * into one document per group and the groups appended in byte order at the
 * end, as mongod's std::map of builders does. A group's document is
 * bson_new's (a bson_t is 128-byte aligned and may point into itself, so
 * it is neither embedded in a plain allocation nor moved).
 */
typedef struct stat_group {
    char *name;
    bson_t *doc;
} stat_group_t;

static int
stat_group_cmp(const void *a, const void *b)
{
    return strcmp((*(stat_group_t *const *)a)->name, (*(stat_group_t *const *)b)->name);
}

/* config_value: the value of key in WiredTiger config string cfg, quotes removed, into buf; false when absent. */
static bool
config_value(WT_SESSION *wt, const char *cfg, const char *key, char *buf, size_t cap)
{
    WT_CONFIG_PARSER *p;
    WT_CONFIG_ITEM v;
    bool found = false;

    if (cfg == NULL || wiredtiger_config_parser_open(wt, cfg, strlen(cfg), &p) != 0)
        return false;
    if (p->get(p, key, &v) == 0 && v.len < cap) {
        const char *str = v.str;
        size_t len = v.len;
        if (len >= 2 && str[0] == '"' && str[len - 1] == '"') {
            str++;
            len -= 2;
        }
        memcpy(buf, str, len);
        buf[len] = '\0';
        found = true;
    }
    (void)p->close(p);
    return found;
}

/*
 * table_creation: appends creationString and type for table uri (mongod's
 * fetchTypeAndSourceURI then getMetadataCreate): the column group's source
 * and type from the "metadata:" cursor, then the source's creation config
 * from "metadata:create". A uri that is not a table is its own source.
 */
static void
table_creation(WT_SESSION *wt, const char *uri, bson_t *out)
{
    char colgroup[512], source[512], type[64] = "file";
    WT_CURSOR *mc = NULL;
    const char *val = NULL;
    int ret = 0;

    mf_strlcpy(source, uri, sizeof(source));
    if (strncmp(uri, "table:", 6) == 0) {
        snprintf(colgroup, sizeof(colgroup), "colgroup:%s", uri + 6);
        if ((ret = wt->open_cursor(wt, "metadata:", NULL, NULL, &mc)) == 0) {
            mc->set_key(mc, colgroup);
            if ((ret = mc->search(mc)) == 0 && (ret = mc->get_value(mc, &val)) == 0) {
                if (!config_value(wt, val, "source", source, sizeof(source)))
                    ret = WT_NOTFOUND;
                (void)config_value(wt, val, "type", type, sizeof(type));
            }
            mc->close(mc);
            mc = NULL;
        }
    }
    if (ret == 0 && (ret = wt->open_cursor(wt, "metadata:create", NULL, NULL, &mc)) == 0) {
        mc->set_key(mc, source);
        if ((ret = mc->search(mc)) == 0 && (ret = mc->get_value(mc, &val)) == 0) {
            BSON_APPEND_UTF8(out, "creationString", val); /* copied before the cursor closes */
            BSON_APPEND_UTF8(out, "type", type);
        }
        mc->close(mc);
    }
    if (ret != 0) {
        /* mongod: {error, code, reason} in its place, and no type. */
        bson_t e;
        char reason[640];
        snprintf(reason, sizeof(reason), "Unable to find metadata for %s: %s", source, wiredtiger_strerror(ret));
        BSON_APPEND_DOCUMENT_BEGIN(out, "creationString", &e);
        BSON_APPEND_UTF8(&e, "error", "unable to retrieve creation config");
        BSON_APPEND_INT32(&e, "code", MF_E_NoSuchKey);
        BSON_APPEND_UTF8(&e, "reason", reason);
        bson_append_document_end(out, &e);
    }
}

/* stat_append: appends one statistic, described by desc, to its group (found or added in *groups) or to out. */
static void
stat_append(bson_t *out, stat_group_t ***groups, int *ngroups, int *capgroups, const char *desc, int64_t v)
{
    const char *colon = strchr(desc, ':'), *cut = colon ? colon : strchr(desc, ' ');
    size_t plen = cut ? (size_t)(cut - desc) : strlen(desc);
    const char *name = cut ? cut + 1 : "num";

    if (plen == 0) { /* mongod: a description with no group stays at the top, whole */
        mf_append_number(out, desc, v);
        return;
    }
    while (*name == ' ')
        name++;
    stat_group_t *g = NULL;
    for (int i = 0; i < *ngroups && g == NULL; i++)
        if (strncmp((*groups)[i]->name, desc, plen) == 0 && (*groups)[i]->name[plen] == '\0')
            g = (*groups)[i];
    if (g == NULL) {
        if (*ngroups == *capgroups) {
            *capgroups = *capgroups ? *capgroups * 2 : 16;
            *groups = mf_realloc(*groups, (size_t)*capgroups * sizeof(**groups));
        }
        g = mf_malloc(sizeof(*g));
        g->name = mf_strndup(desc, plen);
        g->doc = bson_new();
        (*groups)[(*ngroups)++] = g;
    }
    mf_append_number(g->doc, name, v);
}

/* stats_to_bson: every row of statistics cursor c into out, one document per group in byte order; closes c. */
static void
stats_to_bson(WT_CURSOR *c, bson_t *out)
{
    stat_group_t **groups = NULL;
    int ngroups = 0, capgroups = 0;
    while (c->next(c) == 0) {
        const char *desc, *pvalue;
        int64_t v;
        if (c->get_value(c, &desc, &pvalue, &v) != 0)
            break;
        stat_append(out, &groups, &ngroups, &capgroups, desc, v); /* desc copied before the next step */
    }
    c->close(c);
    if (ngroups > 1)
        qsort(groups, (size_t)ngroups, sizeof(*groups), stat_group_cmp);
    for (int i = 0; i < ngroups; i++) {
        BSON_APPEND_DOCUMENT(out, groups[i]->name, groups[i]->doc);
        bson_destroy(groups[i]->doc);
        free(groups[i]->name);
        free(groups[i]);
    }
    free(groups);
}

int
mf_storage_table_stats_bson(mf_sess_t *s, const char *uri, const bson_t *metadata, bson_t *out, mf_error_t *err)
{
    char stat_uri[600];
    int ret;
    WT_CURSOR *c = NULL;
    mf_error_t ferr;

    BSON_APPEND_DOCUMENT(out, "metadata", metadata);
    table_creation(s->wt, uri, out);
    snprintf(stat_uri, sizeof(stat_uri), "statistics:%s", uri);
    /* A table's statistics open its file, as a cursor does (see "Open files"). */
    if (fd_gate(s->st, uri, &ferr) != 0)
        ret = EMFILE;
    else
        ret = s->wt->open_cursor(s->wt, stat_uri, NULL, "statistics=(fast)", &c);
    if (ret != 0) {
        /* mongod's appendCustomStats: the failure in the document, collStats still answers. */
        char reason[800];
        snprintf(reason, sizeof(reason), "unable to open cursor at URI %s. reason: %s", stat_uri,
                 wiredtiger_strerror(ret));
        BSON_APPEND_UTF8(out, "error", "unable to retrieve statistics");
        BSON_APPEND_INT32(out, "code", MF_E_CursorNotFound);
        BSON_APPEND_UTF8(out, "reason", reason);
        return wt_err(err, ret, "table statistics");
    }
    BSON_APPEND_UTF8(out, "uri", stat_uri);
    stats_to_bson(c, out);
    return 0;
}

int
mf_storage_conn_stats_bson(mf_sess_t *s, bson_t *out, mf_error_t *err)
{
    WT_CURSOR *c = NULL;
    int ret = s->wt->open_cursor(s->wt, "statistics:", NULL, "statistics=(fast)", &c);
    if (ret != 0)
        return wt_err(err, ret, "connection statistics");
    BSON_APPEND_UTF8(out, "uri", "statistics:");
    stats_to_bson(c, out);
    return 0;
}

int
mf_storage_checkpoint(mf_sess_t *s, mf_error_t *err)
{
    if (s->st->in_memory)
        return 0;
    int ret = s->wt->checkpoint(s->wt, NULL);
    if (ret != 0)
        return wt_err(err, ret, "checkpoint");
    return 0;
}

/*
 * Compaction runs in rounds: WT_SESSION::compact with a timeout of one
 * second returns ETIMEDOUT when there is more to do (after at least one pass
 * over the file; what it moved stays moved), so between rounds the calling
 * operation can be killed, time out or be stopped by shutdown. EBUSY (the
 * file is in use by a drop or another checkpoint) and WT_ROLLBACK are
 * retried after a short pause, at most COMPACT_BUSY_RETRIES times in a row (about 2 s).
 */
#define COMPACT_BUSY_RETRIES 200
#define COMPACT_BUSY_PAUSE_MS 10

int
mf_storage_compact_round(mf_sess_t *s, const char *uri, mf_compact_round_t *out, mf_error_t *err)
{
    *out = MF_COMPACT_DONE;
    if (s->st->in_memory)
        return 0;
    if (s->in_txn)
        return mf_err_set(err, MF_E_InternalError, "compact %s: a transaction is open", uri);
    mf_storage_session_release(s); /* compact wants no cursor of ours on the file */
    if (fd_gate(s->st, uri, err) != 0)
        return -1;
    int ret = s->wt->compact(s->wt, uri, "timeout=1");
    if (ret == 0)
        return 0;
    if (ret == ETIMEDOUT) {
        *out = MF_COMPACT_MORE;
        return 0;
    }
    if (ret == EBUSY || ret == WT_ROLLBACK) {
        *out = MF_COMPACT_BUSY;
        return 0;
    }
    if (ret == ENOENT) {
        *out = MF_COMPACT_GONE;
        return 0;
    }
    return wt_err(err, ret, "compact");
}

int
mf_storage_compact(mf_sess_t *s, const char *uri, mf_error_t *err)
{
    int busy = 0;
    for (;;) {
        mf_compact_round_t r;
        if (mf_curop_check_current(err) != 0 || mf_storage_compact_round(s, uri, &r, err) != 0)
            return -1;
        if (r == MF_COMPACT_DONE)
            return 0;
        if (r == MF_COMPACT_GONE)
            return wt_err(err, ENOENT, "compact");
        if (r == MF_COMPACT_MORE) {
            busy = 0;
            continue;
        }
        if (++busy > COMPACT_BUSY_RETRIES)
            return wt_err(err, EBUSY, "compact");
        struct timespec ts = {0, COMPACT_BUSY_PAUSE_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int
mf_storage_create(mf_sess_t *s, const char *uri, const char *config, mf_error_t *err)
{
    /* See common/fds.h: WiredTiger panics when a create cannot open its files; refuse it before that. */
    int64_t nfree = s->st->in_memory || own_table(uri) ? INT64_MAX : mf_fds_free();
    if (nfree < MF_FDS_CREATE_RESERVE) {
        mf_storage_fds_low(s->st); /* idle tables are closed to make room (see "Open files") */
        return mf_err_set(err, MF_E_TooManyFilesOpen,
                          "Too many open files: %lld of the %lld file descriptors this process may open (ulimit -n) "
                          "are left, too few to create a collection or index (%s); drop unused collections or "
                          "indexes, close connections, or raise the limit",
                          (long long)nfree, (long long)mf_fds_limit(), uri);
    }
    atomic_fetch_sub_explicit(&s->st->fd_budget, 2, memory_order_relaxed); /* its file, and a directory sync */
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
    pending_add_locked(st, uri);
    pthread_mutex_unlock(&st->lock);
}

void
mf_storage_drop_later(mf_storage_t *st, const char *uri)
{
    pthread_mutex_lock(&st->lock);
    pending_add_locked(st, uri);
    pthread_mutex_unlock(&st->lock);
}

int
mf_storage_pending_drops(mf_storage_t *st)
{
    pthread_mutex_lock(&st->lock);
    int n = st->npending;
    pthread_mutex_unlock(&st->lock);
    return n;
}

void
mf_storage_retry_drops(mf_storage_t *st)
{
    try_pending_drops(st);
}

int
mf_storage_list_tables(mf_storage_t *st, const char *prefix, void (*fn)(void *arg, const char *uri), void *arg,
                       mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(st);
    WT_CURSOR *c;
    const char *key;
    size_t plen = strlen(prefix);
    int ret = s->wt->open_cursor(s->wt, "metadata:", NULL, NULL, &c);
    if (ret != 0)
        return wt_err(err, ret, "open metadata cursor");
    c->set_key(c, prefix);
    int exact;
    ret = c->search_near(c, &exact);
    if (ret == 0 && exact < 0)
        ret = c->next(c);
    while (ret == 0) {
        if ((ret = c->get_key(c, &key)) != 0)
            break;
        if (strncmp(key, prefix, plen) != 0)
            break;
        fn(arg, key);
        ret = c->next(c);
    }
    c->close(c);
    if (ret != 0 && ret != WT_NOTFOUND)
        return wt_err(err, ret, "metadata scan");
    return 0;
}

void
mf_storage_set_periodic(mf_storage_t *st, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&st->hook_lock);
    st->periodic = fn;
    st->periodic_arg = arg;
    pthread_mutex_unlock(&st->hook_lock);
}

void
mf_storage_fault_set(mf_storage_t *st, const char *uri, int after_ops)
{
    pthread_mutex_lock(&st->fault_lock);
    free(st->fault_uri);
    st->fault_uri = uri ? mf_strdup(uri) : NULL;
    st->fault_left = after_ops;
    atomic_store(&st->fault_armed, uri != NULL);
    pthread_mutex_unlock(&st->fault_lock);
}

/*
 * fault_hit: true when this operation on c must fail (the armed countdown on
 * c's table ran out); disarms itself then.
 */
static bool
fault_hit(mf_cur_t *c)
{
    mf_storage_t *st = c->s->st;
    bool hit = false;
    if (!atomic_load_explicit(&st->fault_armed, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&st->fault_lock);
    if (st->fault_uri != NULL && strcmp(st->fault_uri, c->uri) == 0) {
        if (st->fault_left-- <= 0) {
            hit = true;
            free(st->fault_uri);
            st->fault_uri = NULL;
            atomic_store(&st->fault_armed, false);
        }
    }
    pthread_mutex_unlock(&st->fault_lock);
    return hit;
}

/* The start of an operation on c: it may leave c positioned (not idle); true when it must fail (fault_hit). */
static inline bool
cur_begin(mf_cur_t *c)
{
    c->idle = false;
    return fault_hit(c);
}

bool
mf_txn_on_end(mf_sess_t *s, void (*fn)(void *arg, bool committed), void *arg)
{
    for (int i = 0; i < s->ncbs; i++) {
        if (s->cbs[i].fn == fn && s->cbs[i].arg == arg)
            return false;
    }
    if (s->ncbs == s->capcbs) {
        s->capcbs = s->capcbs ? s->capcbs * 2 : 4;
        s->cbs = mf_realloc(s->cbs, (size_t)s->capcbs * sizeof(*s->cbs));
    }
    s->cbs[s->ncbs].fn = fn;
    s->cbs[s->ncbs].arg = arg;
    s->ncbs++;
    return true;
}

void *
mf_txn_on_end_find(mf_sess_t *s, void (*fn)(void *arg, bool committed), bool (*match)(const void *arg, const void *key),
                   const void *key)
{
    for (int i = 0; i < s->ncbs; i++) {
        if (s->cbs[i].fn == fn && match(s->cbs[i].arg, key))
            return s->cbs[i].arg;
    }
    return NULL;
}

bool
mf_txn_on_prepare(mf_sess_t *s, int (*fn)(void *arg, mf_sess_t *s, mf_error_t *err), void *arg)
{
    if (s->user)
        return false; /* a nested step's arg would not live until the user transaction commits */
    if (s->prep_fn != NULL)
        return s->prep_fn == fn && s->prep_arg == arg;
    s->prep_fn = fn;
    s->prep_arg = arg;
    return true;
}

bool
mf_rguard_enter(mf_sess_t *s, mf_rguard_t *g)
{
    if (!s->in_txn) {
        /* The operation commits on its own: counted until mf_rguard_exit, and it must not start while g is closed. */
        atomic_fetch_add(&g->active, 1);
        atomic_fetch_add(&g->gen, 1);
        while (atomic_load(&g->closed) > 0)
            sched_yield();
        return true;
    }
    for (int i = 0; i < s->nentered; i++) {
        if (s->entered[i] == g)
            return false;
    }
    if (s->nentered == s->capentered) {
        s->capentered = s->capentered ? s->capentered * 2 : 4;
        s->entered = mf_realloc(s->entered, (size_t)s->capentered * sizeof(*s->entered));
    }
    s->entered[s->nentered++] = g;
    /* active first: a truncater reading its token between the two sees the writer either way. */
    atomic_fetch_add(&g->active, 1);
    atomic_fetch_add(&g->gen, 1);
    return false;
}

void
mf_rguard_exit(mf_rguard_t *g)
{
    atomic_fetch_sub(&g->active, 1);
}

int64_t
mf_rguard_token(mf_rguard_t *g)
{
    /* gen before active: a writer entering in between raises gen past the token. */
    int64_t gen = atomic_load(&g->gen);
    return atomic_load(&g->active) == 0 ? gen : -1;
}

bool
mf_rguard_unchanged(mf_rguard_t *g, int64_t token)
{
    return token >= 0 && atomic_load(&g->gen) == token;
}

void
mf_txn_commit_unless_entered(mf_sess_t *s, mf_rguard_t *g, int64_t token)
{
    s->hold = g;
    s->hold_token = token;
}

/* The transaction's end for the range guards it entered: they no longer count it. */
static void
rguards_leave(mf_sess_t *s)
{
    for (int i = 0; i < s->nentered; i++)
        atomic_fetch_sub(&s->entered[i]->active, 1);
    s->nentered = 0;
}

#define RGUARD_WAIT_MS 20 /* a writer waits this long at most for a closed guard, then rolls back */

/*
 * Just before the engine commit: closes the guard the transaction commits
 * through and checks no writer entered it since its token (false: it must
 * roll back; the guard is open again), then waits while a guard it entered
 * is closed. Between a writer's gen increment and a truncater's close, in
 * whichever order (both sequentially consistent), one of them sees the
 * other. A guard stays closed until the truncater's commit_transaction
 * returns, which in WiredTiger 3.x ends with an eviction check: with the
 * cache full that could wait for the very snapshots the waiting writers
 * hold, so a writer waits RGUARD_WAIT_MS at most and then rolls back
 * (false), releasing its snapshot; a write conflict, which callers retry.
 */
static bool
rguards_pass(mf_sess_t *s)
{
    if (s->hold != NULL) {
        atomic_fetch_add(&s->hold->closed, 1);
        if (s->nentered > 0 || !mf_rguard_unchanged(s->hold, s->hold_token)) {
            atomic_fetch_sub(&s->hold->closed, 1);
            s->hold = NULL;
            return false;
        }
    }
    int64_t deadline = 0;
    for (int i = 0; i < s->nentered; i++) {
        for (int spins = 0; atomic_load(&s->entered[i]->closed) > 0; spins++) {
            if (spins < 64)
                continue;
            sched_yield();
            if (spins % 64 != 0)
                continue;
            if (deadline == 0)
                deadline = mf_mono_us() + RGUARD_WAIT_MS * 1000;
            else if (mf_mono_us() > deadline)
                return false;
        }
    }
    return true;
}

/* Runs and clears s's end-of-transaction callbacks (which must not register new ones: none does). */
static void
run_txn_cbs(mf_sess_t *s, bool committed)
{
    int n = s->ncbs;
    s->ncbs = 0;
    s->prep_fn = NULL;
    s->prep_arg = NULL;
    for (int i = 0; i < n; i++)
        s->cbs[i].fn(s->cbs[i].arg, committed);
}

/* Resets the cursors left parked on entries (mf_cur_close_near): nothing stays pinned past a transaction. */
static void
unpark(mf_sess_t *s)
{
    for (int i = 0; i < s->ncache; i++) {
        mf_cur_t *c = s->cache[i];
        if (c->parked) {
            c->wt->reset(c->wt);
            c->parked = c->near = false;
        }
    }
}

/* A nested transaction in a doomed user transaction: it cannot run (the user transaction can only roll back). */
static int
doomed_err(mf_error_t *err)
{
    return mf_err_write_conflict(err);
}

int
mf_txn_begin(mf_sess_t *s, mf_error_t *err)
{
    if (s->user) {
        if (s->doomed)
            return doomed_err(err);
        if (s->depth < (int)(sizeof(s->depth_writes) / sizeof(s->depth_writes[0])))
            s->depth_writes[s->depth] = s->writes;
        s->depth++;
        return 0;
    }
    int ret = s->wt->begin_transaction(s->wt, NULL);
    if (ret != 0)
        return wt_err(err, ret, "begin_transaction");
    s->in_txn = true;
    return 0;
}

int
mf_txn_commit(mf_sess_t *s, bool durable, mf_error_t *err)
{
    if (s->user) {
        /* Nested: the work stays in the user transaction, committed with it. */
        (void)durable;
        if (s->depth > 0)
            s->depth--;
        return s->doomed ? doomed_err(err) : 0;
    }
    /* The transaction's own step first (it may still write), then the engine-wide hook (replication). */
    if (s->prep_fn != NULL && s->prep_fn(s->prep_arg, s, err) != 0) {
        mf_txn_abort(s);
        return -1;
    }
    if (s->st->precommit_hook && s->st->precommit_hook(s->st->precommit_hook_arg, s, err) != 0) {
        mf_txn_abort(s);
        return -1;
    }
    if (!rguards_pass(s)) {
        mf_txn_abort(s);
        return mf_err_write_conflict(err);
    }
    int ret = s->wt->commit_transaction(s->wt, durable ? "sync=on" : NULL);
    s->in_txn = false;
    if (s->hold != NULL) {
        atomic_fetch_sub(&s->hold->closed, 1);
        s->hold = NULL;
    }
    rguards_leave(s);
    unpark(s);
    run_txn_cbs(s, ret == 0);
    if (s->st->txn_hook)
        s->st->txn_hook(s->st->txn_hook_arg, ret == 0);
    if (ret != 0)
        return wt_err(err, ret, "commit_transaction");
    return 0;
}

void
mf_txn_abort(mf_sess_t *s)
{
    if (s->user) {
        /* Nested: what it wrote cannot be undone alone, so the user transaction can now only roll back. */
        if (s->depth > 0) {
            s->depth--;
            int d = s->depth < (int)(sizeof(s->depth_writes) / sizeof(s->depth_writes[0])) ? s->depth : -1;
            if (d < 0 || s->depth_writes[d] != s->writes)
                s->doomed = true;
        }
        return;
    }
    if (s->in_txn) {
        s->wt->rollback_transaction(s->wt, NULL);
        s->hold = NULL;
        rguards_leave(s);
        unpark(s);
        run_txn_cbs(s, false);
        if (s->st->txn_hook)
            s->st->txn_hook(s->st->txn_hook_arg, false);
    }
    s->in_txn = false;
}

bool
mf_txn_active(mf_sess_t *s)
{
    return s->user ? s->depth > 0 : s->in_txn;
}

int
mf_txn_user_begin(mf_sess_t *s, mf_error_t *err)
{
    if (s->user || s->in_txn)
        return mf_err_set(err, MF_E_InternalError, "a transaction is already open on this session");
    if (mf_txn_begin(s, err) != 0)
        return -1;
    s->user = true;
    s->doomed = false;
    s->depth = 0;
    return 0;
}

int
mf_txn_user_commit(mf_sess_t *s, bool durable, mf_error_t *err)
{
    if (!s->user)
        return mf_err_set(err, MF_E_InternalError, "no user transaction is open on this session");
    bool doomed = s->doomed;
    s->user = s->doomed = false;
    s->depth = 0;
    if (doomed) {
        mf_txn_abort(s);
        return doomed_err(err);
    }
    return mf_txn_commit(s, durable, err);
}

void
mf_txn_user_abort(mf_sess_t *s)
{
    s->user = s->doomed = false;
    s->depth = 0;
    mf_txn_abort(s);
}

bool
mf_txn_user(mf_sess_t *s)
{
    return s->user;
}

bool
mf_txn_user_doomed(mf_sess_t *s)
{
    return s->user && s->doomed;
}

/* Opens a cursor on uri from the session's cache or WiredTiger; keep: leave a parked one on its entry. */
static int
cur_open(mf_sess_t *s, const char *uri, bool keep, mf_cur_t **out, mf_error_t *err)
{
    WT_CURSOR *c;
    for (int i = 0; i < s->ncache; i++) {
        mf_cur_t *mc = s->cache[i];
        if (!mc->in_use && strcmp(mc->uri, uri) == 0) {
            if (mc->parked && !keep) {
                mc->wt->reset(mc->wt);
                mc->near = false;
            }
            mc->parked = false;
            mc->in_use = true;
            *out = mc;
            return 0;
        }
    }
    if (fd_gate(s->st, uri, err) != 0)
        return -1;
    int ret = s->wt->open_cursor(s->wt, uri, NULL, "overwrite=false", &c);
    if (ret != 0)
        return wt_err(err, ret, "open_cursor");
    mf_cur_t *mc = mf_calloc(1, sizeof(*mc));
    mc->wt = c;
    mc->s = s;
    mc->rid_keys = strcmp(c->key_format, "q") == 0;
    mc->in_use = true;
    mf_strlcpy(mc->uri, uri, sizeof(mc->uri));
    if (strlen(uri) < sizeof(mc->uri) && s->ncache < MF_CURSOR_CACHE)
        s->cache[s->ncache++] = mc;
    *out = mc;
    return 0;
}

int
mf_cur_open(mf_sess_t *s, const char *uri, mf_cur_t **out, mf_error_t *err)
{
    return cur_open(s, uri, false, out, err);
}

int
mf_cur_open_near(mf_sess_t *s, const char *uri, mf_cur_t **out, mf_error_t *err)
{
    return cur_open(s, uri, true, out, err);
}

/* Closes c; park: a cached cursor inside a transaction keeps its entry for mf_cur_open_near. */
static void
cur_close(mf_cur_t *c, bool park)
{
    if (c == NULL)
        return;
    mf_sess_t *s = c->s;
    for (int i = 0; i < s->ncache; i++) {
        if (s->cache[i] == c) {
            if (park && s->in_txn) {
                c->parked = true;
            } else if (!c->idle) {
                c->wt->reset(c->wt);
                c->near = false;
            }
            c->in_use = false;
            return;
        }
    }
    c->wt->close(c->wt);
    free(c);
}

void
mf_cur_close(mf_cur_t *c)
{
    cur_close(c, false);
}

void
mf_cur_close_near(mf_cur_t *c)
{
    cur_close(c, true);
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
    if (cur_begin(c))
        return -1;
    return map_ret(c->wt->next(c->wt));
}

int
mf_cur_prev(mf_cur_t *c)
{
    if (cur_begin(c))
        return -1;
    return map_ret(c->wt->prev(c->wt));
}

void
mf_cur_reset(mf_cur_t *c)
{
    c->wt->reset(c->wt);
    c->near = false;
}

int
mf_cur_search_rid(mf_cur_t *c, int64_t rid)
{
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, rid);
    return map_ret(c->wt->search(c->wt));
}

/* Sets key (len bytes) on c and runs op (search, remove, reserve): the mapped result. */
static int
key_op(mf_cur_t *c, const void *key, size_t len, int (*op)(WT_CURSOR *))
{
    WT_ITEM k = {.data = key, .size = len};
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, &k);
    return map_ret(op(c->wt));
}

int
mf_cur_search_bytes(mf_cur_t *c, const void *key, size_t len)
{
    return key_op(c, key, len, c->wt->search);
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
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, rid);
    return seek_ge(c);
}

int
mf_cur_seek_bytes_ge(mf_cur_t *c, const void *key, size_t len)
{
    WT_ITEM k = {.data = key, .size = len};
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, &k);
    return seek_ge(c);
}

int
mf_cur_reserve(mf_cur_t *c)
{
    c->s->writes++;
    c->idle = false;
    return map_ret(c->wt->reserve(c->wt));
}

int
mf_cur_remove_here(mf_cur_t *c)
{
    c->s->writes++;
    if (cur_begin(c))
        return -1;
    int ret = map_ret(c->wt->remove(c->wt));
    c->near = ret == 0; /* a positioned remove stays on the entry */
    return ret;
}

/*
 * How many entries past its position a find steps through before it
 * searches from the root: a few, for entries in between that the caller
 * leaves alone (a document not due, another document's key).
 */
#define NEAR_STEPS 4

/* The order of c's current key against key: <0, 0, >0. */
static int
near_cmp(mf_cur_t *c, const void *key, size_t len, int64_t rid)
{
    if (c->rid_keys) {
        int64_t k = 0;
        c->wt->get_key(c->wt, &k);
        return k < rid ? -1 : k > rid;
    }
    WT_ITEM k = {0};
    c->wt->get_key(c->wt, &k);
    size_t n = k.size < len ? k.size : len;
    int r = n ? memcmp(k.data, key, n) : 0;
    return r != 0 ? r : k.size < len ? -1 : k.size > len;
}

/* After a near look that missed, this many finds search from the root straight away. */
#define NEAR_BACKOFF 16

/* Steps c forward from its entry looking for the key; true when c is on it. */
static bool
find_near(mf_cur_t *c, const void *key, size_t len, int64_t rid)
{
    if (!c->near)
        return false;
    c->near = false;
    if (c->near_skip > 0) {
        c->near_skip--;
        return false;
    }
    for (int i = 0; i < NEAR_STEPS; i++) {
        if (c->wt->next(c->wt) != 0)
            break;
        int r = near_cmp(c, key, len, rid);
        if (r == 0)
            return true;
        if (r > 0)
            break;
    }
    c->near_skip = NEAR_BACKOFF;
    return false;
}

/* Positions c exactly on key (len bytes; rid on a record table): a step from its entry, else a search. */
static int
cur_find(mf_cur_t *c, const void *key, size_t len, int64_t rid)
{
    WT_ITEM k = {.data = key, .size = len};
    int ret = 0;

    if (cur_begin(c))
        return -1;
    if (!find_near(c, key, len, rid)) {
        if (c->rid_keys)
            c->wt->set_key(c->wt, rid);
        else
            c->wt->set_key(c->wt, &k);
        ret = map_ret(c->wt->search(c->wt));
    }
    c->near = ret == 0;
    return ret;
}

int
mf_cur_find_bytes(mf_cur_t *c, const void *key, size_t len)
{
    return cur_find(c, key, len, 0);
}

int
mf_cur_find_rid(mf_cur_t *c, int64_t rid)
{
    return cur_find(c, NULL, 0, rid);
}

int
mf_cur_reserve_bytes(mf_cur_t *c, const void *key, size_t klen)
{
    c->s->writes++;
    return key_op(c, key, klen, c->wt->reserve);
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
    c->s->writes++;
    WT_ITEM v = {.data = val, .size = len};
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, rid);
    c->wt->set_value(c->wt, &v);
    int ret = map_ret(c->wt->insert(c->wt));
    c->idle = true;
    c->near = false;
    return ret;
}

int
mf_cur_update_rid(mf_cur_t *c, int64_t rid, const void *val, size_t len)
{
    c->s->writes++;
    WT_ITEM v = {.data = val, .size = len};
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, rid);
    c->wt->set_value(c->wt, &v);
    return map_ret(c->wt->update(c->wt));
}

int
mf_cur_remove_rid(mf_cur_t *c, int64_t rid)
{
    c->s->writes++;
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, rid);
    return map_ret(c->wt->remove(c->wt));
}

int
mf_cur_insert_bytes(mf_cur_t *c, const void *key, size_t klen, const void *val, size_t vlen)
{
    c->s->writes++;
    WT_ITEM k = {.data = key, .size = klen}, v = {.data = val, .size = vlen};
    if (cur_begin(c))
        return -1;
    c->wt->set_key(c->wt, &k);
    c->wt->set_value(c->wt, &v);
    int ret = map_ret(c->wt->insert(c->wt));
    c->idle = true;
    c->near = false;
    return ret;
}

int
mf_cur_put_bytes(mf_cur_t *c, const void *key, size_t klen, const void *val, size_t vlen)
{
    c->s->writes++;
    WT_ITEM k = {.data = key, .size = klen}, v = {.data = val, .size = vlen};
    int ret;
    if (cur_begin(c))
        return -1;
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
mf_key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, n) : 0;
    return r != 0 ? r : alen < blen ? -1 : alen > blen;
}

/* A record id given as 8 bytes big-endian (the byte form of a record table's key, see storage.h). */
static int64_t
rid_of_bytes(const void *key, size_t len)
{
    const uint8_t *b = key;
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && i < len; i++)
        v = v << 8 | b[i];
    return (int64_t)v;
}

/* Whether c (positioned) is on the byte key k. */
static bool
cur_on_key(mf_cur_t *c, const mf_key_span_t *k)
{
    WT_ITEM item = {0};
    c->wt->get_key(c->wt, &item);
    return item.size == k->len && memcmp(item.data, k->data, item.size) == 0;
}

int
mf_cur_range_runs(mf_cur_t *c, const mf_key_span_t *keys, size_t n, size_t min_run, size_t max_short, size_t *runs,
                  size_t *nruns)
{
    size_t i = 0, nr = 0, shorts = 0;
    int ret = 0;
    *nruns = 0;
    if (c->rid_keys)
        return -1;
    /*
     * From each run's first key on, the entries in order: each must be the
     * next key given (keys are unique). The first that is not ends the run;
     * the next one starts with a search for its first key. A key the
     * transaction does not see is a run of one.
     */
    while (i < n) {
        size_t first = i;
        ret = mf_cur_seek_bytes_ge(c, keys[i].data, keys[i].len);
        if (ret == 0 && cur_on_key(c, &keys[i])) {
            while (++i < n && (ret = map_ret(c->wt->next(c->wt))) == 0 && cur_on_key(c, &keys[i]))
                ;
        } else {
            i++;
        }
        if (ret != 0 && ret != MF_NOTFOUND)
            break;
        ret = 0;
        runs[nr++] = i - first;
        if (i - first < min_run && (shorts += i - first) > max_short)
            break; /* too scattered to be worth more searches */
    }
    mf_cur_reset(c);
    if (ret != 0)
        return ret;
    *nruns = i == n && shorts <= max_short ? nr : 0;
    return 0;
}

int
mf_truncate_range(mf_sess_t *s, const char *uri, const void *lo, size_t lolen, const void *hi, size_t hilen,
                  mf_error_t *err)
{
    mf_cur_t *start, *stop;
    s->writes++;
    if (mf_cur_open(s, uri, &start, err) != 0)
        return -1;
    if (mf_cur_open(s, uri, &stop, err) != 0) {
        mf_cur_close(start);
        return -1;
    }
    int ret = -1;
    if (!fault_hit(start)) {
        WT_ITEM a = {.data = lo, .size = lolen}, b = {.data = hi, .size = hilen};
        if (start->rid_keys) {
            start->wt->set_key(start->wt, rid_of_bytes(lo, lolen));
            stop->wt->set_key(stop->wt, rid_of_bytes(hi, hilen));
        } else {
            start->wt->set_key(start->wt, &a);
            stop->wt->set_key(stop->wt, &b);
        }
        int wret = s->wt->truncate(s->wt, NULL, start->wt, stop->wt, NULL);
        ret = map_ret(wret);
        if (ret == MF_NOTFOUND)
            ret = 0; /* nothing in the range */
        if (ret == -1)
            wt_err(err, wret, "truncate");
    } else {
        mf_err_set(err, MF_E_InternalError, "truncate of %s failed (fault injected)", uri);
    }
    mf_cur_reset(start);
    mf_cur_reset(stop);
    mf_cur_close(start);
    mf_cur_close(stop);
    return ret;
}

int
mf_cur_remove_bytes(mf_cur_t *c, const void *key, size_t klen)
{
    c->s->writes++;
    return key_op(c, key, klen, c->wt->remove);
}
