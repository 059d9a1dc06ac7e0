/*
 * autocompact.c: background compaction (autocompact.h), as mongod 8.0's
 * autoCompact drives WiredTiger's.
 *
 * The WiredTiger here (3.2) has no background compaction of its own, so
 * this thread does what WiredTiger 11's does for mongod: passes over every
 * table, compacting those worth it. A pass:
 *   - lists the tables of every collection and index (the oplog excluded:
 *     mongod excludes it too, counted as "skipped file as it is part of the
 *     exclude list"), locking each collection only while it is listed;
 *   - skips a file smaller than 1 MB, or with less than freeSpaceTargetMB
 *     free (as of the last checkpoint: the first pass after enabling starts
 *     with one, so a runOnce right after a mass deletion sees its space;
 *     later passes rely on the periodic checkpoint), or whose compaction
 *     failed in the last day (WiredTiger's rule: retrying at once would
 *     fail again);
 *   - compacts the others one at a time, in rounds of about a second
 *     (mf_storage_compact_round), checking between rounds that it is still
 *     wanted (disabled, reconfigured, shutdown); each round (and the
 *     first pass's checkpoint) goes through the engine's write gate, so
 *     it waits while an fsyncLock holds the files still, and an fsyncLock
 *     taken meanwhile waits for the round to end.
 * Passes start a minute apart; runOnce stops after the first.
 *
 * No collection lock is held while a table is compacted: reads and writes
 * go on (they make compaction less effective, not wrong), and DDL is never
 * kept waiting. A table dropped meanwhile is in use by the compaction, so
 * its drop is deferred by storage and retried (storage.h), and the
 * compaction ends with GONE or its next round does. The thread runs at the
 * lowest priority (nice 19): it is background work for idle time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "catalog/autocompact.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#define MB (1024 * 1024)
#define PASS_INTERVAL_MS (60 * 1000)
#define MIN_FILE_BYTES (1 * MB)
#define FAILED_SKIP_MS (24LL * 3600 * 1000)
#define BUSY_RETRIES 200 /* rounds that found the file in use, 10 ms apart, before the pass moves on */
#define BUSY_PAUSE_MS 10
#define HELD_PAUSE_MS 200
#define ROUND_GAP_MS 20
#define AUTOCOMPACT_NICE 19

typedef struct table {
    char *uri;
    char *label; /* "collection db.c", "index 'x_1' of db.c": for the log */
} table_t;

typedef struct table_list {
    table_t *v;
    int n, cap, excluded;
} table_list_t;

typedef struct failed {
    char *uri;
    int64_t at_ms;
} failed_t;

struct mf_autocompact {
    mf_autocompact_env_t env;
    pthread_mutex_t mu; /* guards the configuration and the thread's life */
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop, enabled, run_once;
    int64_t target_bytes;
    uint64_t gen; /* moves at every set: a pass of an older configuration stops */
    /* The thread's own: compactions that failed, and when (skipped for a day). */
    failed_t *failed;
    int nfailed;
    /* What serverStatus shows (WiredTiger's background compaction statistics). */
    _Atomic int64_t n_success, n_failed, n_interrupted, n_skipped, n_excluded, bytes_recovered, files_tracked;
};

mf_autocompact_t *
mf_autocompact_new(const mf_autocompact_env_t *env)
{
    mf_autocompact_t *ac = mf_calloc(1, sizeof(*ac));
    ac->env = *env;
    pthread_mutex_init(&ac->mu, NULL);
    mf_cond_init_mono(&ac->cv);
    return ac;
}

void
mf_autocompact_free(mf_autocompact_t *ac)
{
    if (ac == NULL)
        return;
    pthread_mutex_lock(&ac->mu);
    ac->stop = true;
    bool started = ac->started;
    pthread_cond_broadcast(&ac->cv);
    pthread_mutex_unlock(&ac->mu);
    if (started)
        pthread_join(ac->thread, NULL);
    for (int i = 0; i < ac->nfailed; i++)
        free(ac->failed[i].uri);
    free(ac->failed);
    pthread_cond_destroy(&ac->cv);
    pthread_mutex_destroy(&ac->mu);
    free(ac);
}

/* Whether the pass of configuration gen should go on. */
static bool
still_wanted(mf_autocompact_t *ac, uint64_t gen)
{
    pthread_mutex_lock(&ac->mu);
    bool yes = !ac->stop && ac->enabled && ac->gen == gen;
    pthread_mutex_unlock(&ac->mu);
    return yes;
}

/* Sleeps ms unless stop, disable or a new configuration wakes the thread first; false once gen is no longer wanted. */
static bool
pause_while_wanted(mf_autocompact_t *ac, uint64_t gen, int64_t ms)
{
    pthread_mutex_lock(&ac->mu);
    if (!ac->stop && ac->enabled && ac->gen == gen) {
        struct timespec ts = mf_mono_deadline(ms);
        pthread_cond_timedwait(&ac->cv, &ac->mu, &ts);
    }
    bool yes = !ac->stop && ac->enabled && ac->gen == gen;
    pthread_mutex_unlock(&ac->mu);
    return yes;
}

/*
 * Enters the engine's write gate (env.enter), waiting while an fsyncLock
 * holds the files still; false once gen is no longer wanted (nothing
 * entered). On true the caller calls leave_gate after its round.
 */
static bool
enter_gate(mf_autocompact_t *ac, uint64_t gen)
{
    for (;;) {
        if (!still_wanted(ac, gen))
            return false;
        if (ac->env.enter == NULL || ac->env.enter(ac->env.arg))
            return true;
        if (!pause_while_wanted(ac, gen, HELD_PAUSE_MS))
            return false;
    }
}

static void
leave_gate(mf_autocompact_t *ac)
{
    if (ac->env.leave != NULL)
        ac->env.leave(ac->env.arg);
}

static void
list_add(table_list_t *l, const char *uri, char *label)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = mf_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
    }
    l->v[l->n].uri = mf_strdup(uri);
    l->v[l->n].label = label;
    l->n++;
}

static char *
label_of(const char *fmt, const char *a, const char *b, const char *c)
{
    size_t n = strlen(fmt) + strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = mf_calloc(1, n);
    snprintf(s, n, fmt, a, b, c);
    return s;
}

static void
collect_tables(void *arg, mf_coll_t *c)
{
    table_list_t *l = arg;
    if (c->is_view)
        return;
    if (strcmp(c->db, "local") == 0 && strcmp(c->name, "oplog.rs") == 0) {
        l->excluded += 1 + c->nindexes;
        return;
    }
    list_add(l, c->uri, label_of("collection %s.%s%s", c->db, c->name, ""));
    for (int i = 0; i < c->nindexes; i++)
        list_add(l, c->indexes[i]->uri, label_of("index '%s' of %s.%s", c->indexes[i]->name, c->db, c->name));
}

static void
list_free(table_list_t *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].uri);
        free(l->v[i].label);
    }
    free(l->v);
}

/* Whether uri's compaction failed less than a day ago; forgets failures older than that. */
static bool
failed_recently(mf_autocompact_t *ac, const char *uri, int64_t now)
{
    bool found = false;
    for (int i = 0; i < ac->nfailed;) {
        if (now - ac->failed[i].at_ms >= FAILED_SKIP_MS) {
            free(ac->failed[i].uri);
            ac->failed[i] = ac->failed[--ac->nfailed];
            continue;
        }
        if (strcmp(ac->failed[i].uri, uri) == 0)
            found = true;
        i++;
    }
    return found;
}

static void
remember_failure(mf_autocompact_t *ac, const char *uri, int64_t now)
{
    ac->failed = mf_realloc(ac->failed, (size_t)(ac->nfailed + 1) * sizeof(*ac->failed));
    ac->failed[ac->nfailed].uri = mf_strdup(uri);
    ac->failed[ac->nfailed].at_ms = now;
    ac->nfailed++;
}

/* table t's file size now, or fallback when it cannot be read (dropped meanwhile). */
static int64_t
file_size(mf_sess_t *s, const table_t *t, int64_t fallback)
{
    int64_t file_bytes, free_bytes;
    mf_error_t err;
    return mf_storage_table_space(s, t->uri, &file_bytes, &free_bytes, &err) == 0 ? file_bytes : fallback;
}

/*
 * Compacts one table worth it; false once the pass should stop (gen no
 * longer wanted). The bytes recovered are the sum of each round's own
 * shrinking, measured around it: a compact command that took its turn on
 * the same table between rounds counts what it freed, not this.
 */
static bool
compact_one(mf_autocompact_t *ac, mf_sess_t *s, const table_t *t, int64_t file_bytes, uint64_t gen)
{
    int busy = 0;
    int64_t t0 = mf_mono_ms(), round_start = file_bytes, gained = 0;
    mf_error_t err;
    for (;;) {
        if (!enter_gate(ac, gen)) {
            atomic_fetch_add(&ac->n_interrupted, 1);
            mf_log(MF_LOG_INFO, "STORAGE", "autoCompact: compaction of %s interrupted", t->label);
            return false;
        }
        mf_compact_round_t r;
        int rc = mf_storage_compact_round(s, t->uri, &r, &err);
        leave_gate(ac);
        if (rc == 0 && (r == MF_COMPACT_MORE || r == MF_COMPACT_DONE)) {
            int64_t now_bytes = file_size(s, t, round_start);
            gained += round_start > now_bytes ? round_start - now_bytes : 0;
            round_start = now_bytes;
        }
        if (rc != 0) {
            /* Out of file descriptors clears by itself: the next pass tries again; WiredTiger's failures wait a day. */
            bool transient = err.code == MF_E_TooManyFilesOpen;
            atomic_fetch_add(&ac->n_failed, 1);
            if (!transient)
                remember_failure(ac, t->uri, mf_mono_ms());
            mf_log(MF_LOG_WARN, "STORAGE", "autoCompact: compaction of %s failed (%s): %s", t->label,
                   transient ? "tried again next pass" : "skipped for a day", err.msg);
            return true;
        }
        if (r == MF_COMPACT_GONE)
            return true;
        if (r == MF_COMPACT_MORE) {
            /* A breath between rounds: a compact command on this table (EBUSY while a round runs) gets its turn. */
            busy = 0;
            (void)pause_while_wanted(ac, gen, ROUND_GAP_MS);
            round_start = file_size(s, t, round_start);
            continue;
        }
        if (r == MF_COMPACT_BUSY) {
            if (++busy > BUSY_RETRIES)
                return true; /* in use (a compact command on it, a long checkpoint): the next pass tries again */
            (void)pause_while_wanted(ac, gen, BUSY_PAUSE_MS); /* enter_gate sees an interruption */
            continue;
        }
        atomic_fetch_add(&ac->n_success, 1);
        atomic_fetch_add(&ac->bytes_recovered, gained);
        mf_log(MF_LOG_INFO, "STORAGE",
               "autoCompact: compacted %s: %lld bytes before, %lld after (%lld recovered), %lld ms", t->label, (long long)file_bytes, (long long)round_start, (long long)gained,
               (long long)(mf_mono_ms() - t0));
        return true;
    }
}

static void
run_pass(mf_autocompact_t *ac, uint64_t gen, int64_t target_bytes, bool first)
{
    mf_sess_t *s = mf_storage_session(ac->env.st);
    mf_error_t err;
    table_list_t l = {0};

    if (first && enter_gate(ac, gen)) {
        if (mf_storage_checkpoint(s, &err) != 0)
            mf_log(MF_LOG_WARN, "STORAGE", "autoCompact: checkpoint before the first pass failed: %s", err.msg);
        leave_gate(ac);
    }
    mf_catalog_rdlock(ac->env.cat);
    mf_catalog_coll_visit(ac->env.cat, NULL, collect_tables, &l);
    mf_catalog_unlock(ac->env.cat);
    atomic_store(&ac->files_tracked, l.n);
    atomic_fetch_add(&ac->n_excluded, l.excluded);
    for (int i = 0; i < l.n; i++) {
        if (!still_wanted(ac, gen)) {
            atomic_fetch_add(&ac->n_interrupted, 1);
            break;
        }
        if (failed_recently(ac, l.v[i].uri, mf_mono_ms()))
            continue;
        int64_t file_bytes, free_bytes;
        if (mf_storage_table_space(s, l.v[i].uri, &file_bytes, &free_bytes, &err) != 0)
            continue; /* dropped since the listing */
        if (file_bytes < MIN_FILE_BYTES || free_bytes < target_bytes) {
            atomic_fetch_add(&ac->n_skipped, 1);
            continue;
        }
        if (!compact_one(ac, s, &l.v[i], file_bytes, gen))
            break;
    }
    list_free(&l);
}

static void *
autocompact_main(void *arg)
{
    mf_autocompact_t *ac = arg;
    uint64_t last_gen = 0;
    pthread_setname_np(pthread_self(), "mf-autocompact");
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), AUTOCOMPACT_NICE); /* best effort */
    pthread_mutex_lock(&ac->mu);
    while (!ac->stop) {
        if (!ac->enabled) {
            pthread_cond_wait(&ac->cv, &ac->mu);
            continue;
        }
        uint64_t gen = ac->gen;
        int64_t target = ac->target_bytes;
        bool first = gen != last_gen;
        last_gen = gen;
        pthread_mutex_unlock(&ac->mu);
        run_pass(ac, gen, target, first);
        pthread_mutex_lock(&ac->mu);
        if (ac->gen == gen && ac->enabled && ac->run_once) {
            ac->enabled = false;
            mf_log(MF_LOG_INFO, "STORAGE", "autoCompact: the runOnce pass is over; background compaction is off");
        }
        if (!ac->stop && ac->enabled && ac->gen == gen) {
            struct timespec ts = mf_mono_deadline(PASS_INTERVAL_MS);
            pthread_cond_timedwait(&ac->cv, &ac->mu, &ts);
        }
    }
    pthread_mutex_unlock(&ac->mu);
    mf_storage_session_close_thread(ac->env.st);
    return NULL;
}

int
mf_autocompact_set(mf_autocompact_t *ac, bool enable, bool run_once, int64_t free_space_target_mb, mf_error_t *err)
{
    int rc = 0;
    pthread_mutex_lock(&ac->mu);
    if (ac->enabled == enable) {
        rc = mf_err_set(err, MF_E_BadValue, "Background compaction is already %s", enable ? "enabled" : "disabled");
        goto done;
    }
    if (enable && !ac->started) {
        if (pthread_create(&ac->thread, NULL, autocompact_main, ac) != 0) {
            rc = mf_err_set(err, MF_E_InternalError, "cannot start the background compaction thread");
            goto done;
        }
        ac->started = true;
    }
    ac->enabled = enable;
    ac->run_once = run_once;
    ac->target_bytes = free_space_target_mb * MB;
    ac->gen++;
    pthread_cond_broadcast(&ac->cv);
done:
    pthread_mutex_unlock(&ac->mu);
    return rc;
}

void
mf_autocompact_stats_bson(mf_autocompact_t *ac, bson_t *out)
{
    bson_t g;
    pthread_mutex_lock(&ac->mu);
    bool running = ac->enabled;
    pthread_mutex_unlock(&ac->mu);
    /* WiredTiger's names and order (its statistics are sorted by description within a group). */
    BSON_APPEND_DOCUMENT_BEGIN(out, "compact", &g);
    BSON_APPEND_INT64(&g, "background compact failed calls", atomic_load(&ac->n_failed));
    BSON_APPEND_INT64(&g, "background compact interrupted", atomic_load(&ac->n_interrupted));
    BSON_APPEND_INT64(&g, "background compact recovered bytes", atomic_load(&ac->bytes_recovered));
    BSON_APPEND_INT64(&g, "background compact running", running ? 1 : 0);
    BSON_APPEND_INT64(&g, "background compact skipped file as it is part of the exclude list",
                      atomic_load(&ac->n_excluded));
    BSON_APPEND_INT64(&g, "background compact skipped file as not meeting requirements for compaction",
                      atomic_load(&ac->n_skipped));
    BSON_APPEND_INT64(&g, "background compact successful calls", atomic_load(&ac->n_success));
    BSON_APPEND_INT64(&g, "number of files tracked by background compaction", atomic_load(&ac->files_tracked));
    bson_append_document_end(out, &g);
}
