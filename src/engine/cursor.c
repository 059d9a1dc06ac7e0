/*
 * cursor.c: the cursor table (see cursor.h).
 *
 * A mutex-guarded open hash table keyed by cursor id (random positive
 * int63). A cursor killed while checked out is only marked; the command
 * holding it frees it at check-in, so no one frees memory in use.
 */
#include "common/alloc.h"
#include "engine/cursor.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/curop.h"
#include "engine/engine.h"
#include "engine/sessions.h"

/* How long a noCursorTimeout cursor opened in a session lasts idle: as long as the session would (30 minutes). */
#define SESSION_IDLE_MS (30 * 60 * 1000LL)

/*
 * An int64 -> int64 hash map, open addressing with linear probing and
 * backward-shift deletion (no tombstones), kept at most half full. Key 0 is
 * "empty": cursor ids are never 0, and client ids are stored plus one.
 */
typedef struct imap {
    struct {
        int64_t k, v;
    } *e;
    size_t cap, n; /* cap: 0 or a power of two */
} imap_t;

static size_t
imap_home(const imap_t *m, int64_t k)
{
    uint64_t h = (uint64_t)k * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 17) & (m->cap - 1);
}

/* The entry holding k, or -1. */
static ssize_t
imap_find(const imap_t *m, int64_t k)
{
    if (m->cap == 0 || k == 0)
        return -1; /* 0 marks an empty bucket, never a key: no id 0 (a client's getMore 0) may find one */
    for (size_t i = imap_home(m, k);; i = (i + 1) & (m->cap - 1)) {
        if (m->e[i].k == k)
            return (ssize_t)i;
        if (m->e[i].k == 0)
            return -1;
    }
}

static void imap_put(imap_t *m, int64_t k, int64_t v);

static void
imap_grow(imap_t *m)
{
    imap_t old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->e = mf_calloc(m->cap, sizeof(*m->e));
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.e[i].k != 0)
            imap_put(m, old.e[i].k, old.e[i].v);
    }
    free(old.e);
}

/* Sets k's value (adding k if absent). */
static void
imap_put(imap_t *m, int64_t k, int64_t v)
{
    if ((m->n + 1) * 2 > m->cap)
        imap_grow(m);
    size_t i = imap_home(m, k);
    while (m->e[i].k != 0 && m->e[i].k != k)
        i = (i + 1) & (m->cap - 1);
    if (m->e[i].k == 0)
        m->n++;
    m->e[i].k = k;
    m->e[i].v = v;
}

static void
imap_del(imap_t *m, int64_t k)
{
    ssize_t f = imap_find(m, k);
    if (f < 0)
        return;
    size_t i = (size_t)f, j = i;
    m->e[i].k = 0;
    m->n--;
    /* Shift back the entries of the probe run that could not sit where they wanted while i was taken. */
    for (;;) {
        j = (j + 1) & (m->cap - 1);
        if (m->e[j].k == 0)
            return;
        size_t home = imap_home(m, m->e[j].k);
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->e[i] = m->e[j];
            m->e[j].k = 0;
            i = j;
        }
    }
}

struct mf_cursors {
    pthread_mutex_t lock;
    mf_cursor_t **slots; /* the open cursors, in no order */
    size_t n, cap;
    imap_t by_id;        /* cursor id -> its index in slots */
    imap_t per_client;   /* client id + 1 -> how many open cursors it has */
    int64_t timed_out;
    mf_cursors_metrics_t metrics; /* serverStatus metrics.cursor's counters */
    uint64_t rng;
};

mf_cursors_t *
mf_cursors_new(void)
{
    mf_cursors_t *t = mf_calloc(1, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->rng = (uint64_t)mf_now_ms() * 6364136223846793005ULL + 1442695040888963407ULL;
    return t;
}

void
mf_cursor_free(mf_cursor_t *c)
{
    if (c == NULL)
        return;
    free(c->db);
    free(c->coll);
    mf_docvec_destroy(&c->docs);
    if (c->matcher)
        mf_matcher_free(c->matcher);
    if (c->proj)
        mf_projection_free(c->proj);
    if (c->filter)
        bson_destroy(c->filter);
    if (c->collation)
        bson_destroy(c->collation);
    if (c->stash)
        bson_destroy(c->stash);
    if (c->resume_token)
        bson_destroy(c->resume_token);
    if (c->key_meta)
        bson_destroy(c->key_meta);
    mf_sort_free(c->sort_spec);
    mf_plan_free(c->plan);
    if (c->origin)
        bson_destroy(c->origin);
    free(c->plan_summary);
    if (c->ext != NULL && c->ext_free != NULL)
        c->ext_free(c->ext);
    free(c);
}

void
mf_cursors_free(mf_cursors_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        mf_cursor_free(t->slots[i]);
    free(t->slots);
    free(t->by_id.e);
    free(t->per_client.e);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

mf_cursor_t *
mf_cursor_new(int kind, const char *db, const char *coll)
{
    mf_cursor_t *c = mf_calloc(1, sizeof(*c));
    c->kind = kind;
    c->db = mf_strdup(db);
    c->coll = mf_strdup(coll);
    mf_docvec_init(&c->docs);
    c->limit_left = -1;
    c->max_time_left_ms = -1;
    return c;
}

static ssize_t
find_slot(mf_cursors_t *t, int64_t id)
{
    ssize_t e = imap_find(&t->by_id, id);
    return e < 0 ? -1 : (ssize_t)t->by_id.e[e].v;
}

static int64_t
client_count(mf_cursors_t *t, int64_t client_id)
{
    ssize_t e = imap_find(&t->per_client, client_id + 1);
    return e < 0 ? 0 : t->per_client.e[e].v;
}

static void
client_add(mf_cursors_t *t, int64_t client_id, int64_t d)
{
    int64_t n = client_count(t, client_id) + d;
    if (n > 0)
        imap_put(&t->per_client, client_id + 1, n);
    else
        imap_del(&t->per_client, client_id + 1);
}

/* The lifespan bucket of a cursor that lived ms (incrementCursorLifespanMetric's bounds). */
static int
lifespan_bucket(int64_t ms)
{
    static const int64_t bounds[MF_CURSOR_LIFESPANS - 1] = {1000, 5000, 15000, 30000, 60000, 600000};
    int b = 0;
    while (b < MF_CURSOR_LIFESPANS - 1 && ms >= bounds[b])
        b++;
    return b;
}

/*
 * remove_slot: takes slot i's cursor out of the table (the caller frees
 * it) and counts it as closed: its lifespan, whether it returned more than
 * one batch (mongod's ClientCursor::dispose). Table lock held.
 */
static void
remove_slot(mf_cursors_t *t, size_t i)
{
    mf_cursor_t *gone = t->slots[i];
    t->metrics.lifespan[lifespan_bucket(mf_now_ms() - gone->created_wall_ms)]++;
    if (gone->n_batches > 1)
        t->metrics.more_than_one_batch++;
    imap_del(&t->by_id, gone->id);
    client_add(t, gone->client_id, -1);
    t->slots[i] = t->slots[--t->n];
    if (i < t->n)
        imap_put(&t->by_id, t->slots[i]->id, (int64_t)i);
}

int64_t
mf_cursors_register(mf_cursors_t *t, mf_cursor_t *c, int64_t max_total, int64_t max_per_client)
{
    pthread_mutex_lock(&t->lock);
    if ((max_total > 0 && (int64_t)t->n >= max_total) ||
        (max_per_client > 0 && client_count(t, c->client_id) >= max_per_client)) {
        pthread_mutex_unlock(&t->lock);
        return -1;
    }
    do {
        t->rng ^= t->rng << 13;
        t->rng ^= t->rng >> 7;
        t->rng ^= t->rng << 17;
        c->id = (int64_t)(t->rng & 0x3fffffffffffffffULL);
    } while (c->id == 0 || find_slot(t, c->id) >= 0);
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->slots = mf_realloc(t->slots, t->cap * sizeof(*t->slots));
    }
    imap_put(&t->by_id, c->id, (int64_t)t->n);
    client_add(t, c->client_id, 1);
    t->metrics.total_opened++;
    t->slots[t->n++] = c;
    c->in_use = true;
    c->last_used_ms = mf_mono_ms();
    c->created_wall_ms = c->used_wall_ms = mf_now_ms();
    c->now_ms = mf_curop_now_ms(mf_curop_current()); /* registered by the opening command, on its thread */
    pthread_mutex_unlock(&t->lock);
    return c->id;
}

mf_cursor_t *
mf_cursors_checkout(mf_cursors_t *t, int64_t id, bool *busy)
{
    mf_cursor_t *c = NULL;
    *busy = false;
    pthread_mutex_lock(&t->lock);
    ssize_t i = find_slot(t, id);
    if (i >= 0) {
        if (t->slots[i]->in_use)
            *busy = true;
        else {
            c = t->slots[i];
            c->in_use = true;
            c->pinned_by = mf_curop_current();
        }
    }
    pthread_mutex_unlock(&t->lock);
    return c;
}

bool
mf_cursors_lists_indexes(mf_cursors_t *t, int64_t id)
{
    pthread_mutex_lock(&t->lock);
    ssize_t i = find_slot(t, id);
    bool yes = i >= 0 && t->slots[i]->lists_indexes;
    pthread_mutex_unlock(&t->lock);
    return yes;
}

void
mf_cursors_checkin(mf_cursors_t *t, mf_cursor_t *c)
{
    pthread_mutex_lock(&t->lock);
    c->in_use = false;
    c->pinned_by = NULL;
    c->last_used_ms = mf_mono_ms();
    c->used_wall_ms = mf_now_ms();
    if (c->killed) {
        ssize_t i = find_slot(t, c->id);
        if (i >= 0)
            remove_slot(t, (size_t)i);
        pthread_mutex_unlock(&t->lock);
        mf_cursor_free(c);
        return;
    }
    pthread_mutex_unlock(&t->lock);
}

void
mf_cursors_release(mf_cursors_t *t, mf_cursor_t *c)
{
    pthread_mutex_lock(&t->lock);
    ssize_t i = find_slot(t, c->id);
    if (i >= 0 && t->slots[i] == c)
        remove_slot(t, (size_t)i);
    c->pinned_by = NULL;
    pthread_mutex_unlock(&t->lock);
    mf_cursor_free(c);
}

bool
mf_cursors_others(mf_cursors_t *t, int64_t id, const char *owner, char *ns, size_t ns_cap)
{
    pthread_mutex_lock(&t->lock);
    ssize_t i = find_slot(t, id);
    bool theirs = i >= 0 && strcmp(t->slots[i]->owner, owner) != 0;
    if (theirs)
        snprintf(ns, ns_cap, "%s.%s", t->slots[i]->db, t->slots[i]->coll);
    pthread_mutex_unlock(&t->lock);
    return theirs;
}

int
mf_cursors_kill(mf_cursors_t *t, int64_t id, const char *owner, char *ns, size_t ns_cap)
{
    mf_cursor_t *victim = NULL;
    pthread_mutex_lock(&t->lock);
    ssize_t i = find_slot(t, id);
    if (i < 0) {
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    if (owner != NULL && strcmp(t->slots[i]->owner, owner) != 0) {
        snprintf(ns, ns_cap, "%s.%s", t->slots[i]->db, t->slots[i]->coll);
        pthread_mutex_unlock(&t->lock);
        return -1;
    }
    if (t->slots[i]->in_use) {
        t->slots[i]->killed = true;
        /* The getMore using it stops at its next interruption check (mongod's killOperation with CursorKilled). */
        if (t->slots[i]->pinned_by != NULL)
            mf_curop_interrupt(t->slots[i]->pinned_by, MF_E_CursorKilled);
    } else {
        victim = t->slots[i];
        remove_slot(t, (size_t)i);
    }
    pthread_mutex_unlock(&t->lock);
    mf_cursor_free(victim);
    return 1;
}

int
mf_cursors_kill_where(mf_cursors_t *t, bool (*match)(void *arg, const mf_cursor_t *c), void *arg)
{
    int n = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n;) {
        mf_cursor_t *c = t->slots[i];
        if (!match(arg, c)) {
            i++;
            continue;
        }
        n++;
        if (c->in_use) {
            c->killed = true;
            /* The getMore using it stops too, as killSessions kills the sessions' operations (killSessionsLocalKillOps). */
            if (c->pinned_by != NULL)
                mf_curop_interrupt(c->pinned_by, MF_E_Interrupted);
            i++;
        } else {
            remove_slot(t, i);
            mf_cursor_free(c); /* as the reaper does, under the lock */
        }
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}

void
mf_cursors_report_idle(mf_cursors_t *t, void (*fn)(void *arg, const bson_t *doc), void *arg)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n; i++) {
        const mf_cursor_t *c = t->slots[i];
        if (c->in_use || c->killed)
            continue;
        bson_t doc, cur, ls;
        char ns[512];
        snprintf(ns, sizeof(ns), "%s.%s", c->db, c->coll);
        bson_init(&doc);
        BSON_APPEND_UTF8(&doc, "type", "idleCursor");
        BSON_APPEND_UTF8(&doc, "ns", ns);
        if (c->has_lsid) {
            uint8_t uid[MF_SESSION_UID_LEN];
            mf_session_uid(c->owner, uid);
            BSON_APPEND_DOCUMENT_BEGIN(&doc, "lsid", &ls);
            BSON_APPEND_BINARY(&ls, "id", BSON_SUBTYPE_UUID, c->lsid, 16);
            BSON_APPEND_BINARY(&ls, "uid", BSON_SUBTYPE_BINARY, uid, MF_SESSION_UID_LEN);
            bson_append_document_end(&doc, &ls);
        }
        if (c->plan_summary != NULL)
            BSON_APPEND_UTF8(&doc, "planSummary", c->plan_summary);
        BSON_APPEND_DOCUMENT_BEGIN(&doc, "cursor", &cur);
        BSON_APPEND_INT64(&cur, "cursorId", c->id);
        BSON_APPEND_DATE_TIME(&cur, "createdDate", c->created_wall_ms);
        BSON_APPEND_DATE_TIME(&cur, "lastAccessDate", c->used_wall_ms);
        BSON_APPEND_INT64(&cur, "nDocsReturned", c->n_docs);
        BSON_APPEND_INT64(&cur, "nBatchesReturned", c->n_batches);
        BSON_APPEND_BOOL(&cur, "noCursorTimeout", c->no_timeout);
        BSON_APPEND_BOOL(&cur, "tailable", c->tailable);
        BSON_APPEND_BOOL(&cur, "awaitData", c->await_data);
        if (c->origin != NULL)
            BSON_APPEND_DOCUMENT(&cur, "originatingCommand", c->origin);
        bson_append_document_end(&doc, &cur);
        fn(arg, &doc);
        bson_destroy(&doc);
    }
    pthread_mutex_unlock(&t->lock);
}

int
mf_cursors_reap(mf_cursors_t *t, int64_t now_ms, int64_t timeout_ms)
{
    int reaped = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n;) {
        mf_cursor_t *c = t->slots[i];
        int64_t limit = !c->no_timeout ? timeout_ms : c->has_lsid ? SESSION_IDLE_MS : INT64_MAX;
        if (!c->in_use && now_ms - c->last_used_ms > limit) {
            remove_slot(t, i);
            mf_cursor_free(c);
            reaped++;
            t->timed_out++;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&t->lock);
    return reaped;
}

int64_t
mf_cursors_open_count(mf_cursors_t *t)
{
    pthread_mutex_lock(&t->lock);
    int64_t n = (int64_t)t->n;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void
mf_cursors_open_stats(mf_cursors_t *t, int64_t *total, int64_t *no_timeout, int64_t *pinned)
{
    int64_t nt = 0, pin = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n; i++) {
        nt += t->slots[i]->no_timeout;
        pin += t->slots[i]->in_use;
    }
    *total = (int64_t)t->n;
    pthread_mutex_unlock(&t->lock);
    *no_timeout = nt;
    *pinned = pin;
}

int64_t
mf_cursors_timed_out(mf_cursors_t *t)
{
    pthread_mutex_lock(&t->lock);
    int64_t n = t->timed_out;
    pthread_mutex_unlock(&t->lock);
    return n;
}

void
mf_cursors_metrics(mf_cursors_t *t, mf_cursors_metrics_t *out)
{
    pthread_mutex_lock(&t->lock);
    *out = t->metrics;
    pthread_mutex_unlock(&t->lock);
}
