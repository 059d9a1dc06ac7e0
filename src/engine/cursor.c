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
#include "engine/engine.h"

struct mf_cursors {
    pthread_mutex_t lock;
    mf_cursor_t **slots; /* chained by linear probing is overkill; use a simple vector */
    size_t n, cap;
    int64_t timed_out;
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
    mf_plan_free(c->plan);
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
    return c;
}

static ssize_t
find_slot(mf_cursors_t *t, int64_t id)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->slots[i]->id == id)
            return (ssize_t)i;
    }
    return -1;
}

static void
remove_slot(mf_cursors_t *t, size_t i)
{
    t->slots[i] = t->slots[--t->n];
}

int64_t
mf_cursors_register(mf_cursors_t *t, mf_cursor_t *c)
{
    pthread_mutex_lock(&t->lock);
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
    t->slots[t->n++] = c;
    c->in_use = true;
    c->last_used_ms = mf_mono_ms();
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
        }
    }
    pthread_mutex_unlock(&t->lock);
    return c;
}

void
mf_cursors_checkin(mf_cursors_t *t, mf_cursor_t *c)
{
    pthread_mutex_lock(&t->lock);
    c->in_use = false;
    c->last_used_ms = mf_mono_ms();
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
    pthread_mutex_unlock(&t->lock);
    mf_cursor_free(c);
}

int
mf_cursors_kill(mf_cursors_t *t, int64_t id, const char *owner)
{
    mf_cursor_t *victim = NULL;
    pthread_mutex_lock(&t->lock);
    ssize_t i = find_slot(t, id);
    if (i < 0) {
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    if (owner != NULL && strcmp(t->slots[i]->owner, owner) != 0) {
        pthread_mutex_unlock(&t->lock);
        return -1;
    }
    if (t->slots[i]->in_use) {
        t->slots[i]->killed = true;
    } else {
        victim = t->slots[i];
        remove_slot(t, (size_t)i);
    }
    pthread_mutex_unlock(&t->lock);
    mf_cursor_free(victim);
    return 1;
}

int
mf_cursors_reap(mf_cursors_t *t, int64_t now_ms, int64_t timeout_ms)
{
    int reaped = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < t->n;) {
        mf_cursor_t *c = t->slots[i];
        if (!c->in_use && now_ms - c->last_used_ms > timeout_ms) {
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

int64_t
mf_cursors_timed_out(mf_cursors_t *t)
{
    pthread_mutex_lock(&t->lock);
    int64_t n = t->timed_out;
    pthread_mutex_unlock(&t->lock);
    return n;
}
