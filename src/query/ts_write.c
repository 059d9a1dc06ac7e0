/*
 * ts_write.c: writes to time-series collections (see ts_write.h).
 *
 * Inserts. Each buckets collection keeps its open buckets in memory
 * (mf_coll_t.ts_state, under ts_mu, so inserts into one time-series
 * collection run one at a time; others are not affected): a hash table
 * from the metaField value to the bucket being filled, with the record id
 * and length of its stored form. A measurement goes into its meta's open
 * bucket while mf_bucket_fits (time span from the bucket's rounded start,
 * 1,000 measurements, 128,000 bytes); otherwise a new bucket replaces it.
 * A chunk of measurements is one transaction: the buckets it touched are
 * written once each at its end (inserted, or replaced in place). An open
 * bucket already stored is checked against storage the first time a chunk
 * touches it (same stored length, or it is reloaded from the stored
 * document; gone, and a new bucket starts), so deletes and TTL expiry never
 * lose or resurrect measurements. Any failure or write conflict drops the
 * whole in-memory state (the next chunk starts new buckets), and a conflict
 * retries the chunk. Per-measurement errors are reported only once the
 * chunk commits, so a retry cannot report one twice.
 *
 * Deletes and updates take ts_mu too and drop the in-memory state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/coll_write.h"
#include "catalog/timeseries.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "common/docvec.h"
#include "doc/bucket.h"
#include "doc/check.h"
#include "doc/match.h"
#include "doc/update.h"
#include "doc/value.h"
#include "query/batch.h"
#include "query/exec.h"
#include "query/ts_write.h"

#define TS_HASH 1024
#define TS_CHUNK 10000 /* measurements per transaction */
#define TS_ATTEMPTS 1000

typedef struct open_bucket {
    struct open_bucket *next; /* hash chain, or the closed list */
    uint8_t *key;             /* the meta value as a one-field document's bytes (NULL: no meta) */
    size_t keylen;
    uint64_t hash;
    mf_bucket_t *b;
    int64_t rid;         /* 0: not stored yet */
    uint32_t stored_len; /* length of the stored document this state matches */
    bool dirty;          /* changed in this chunk */
    bool checked;        /* checked against storage in this chunk */
} open_bucket_t;

typedef struct ts_state {
    open_bucket_t *tab[TS_HASH];
    open_bucket_t *closed; /* replaced in this chunk: written at its end, then freed */
} ts_state_t;

static void
ob_free(open_bucket_t *o)
{
    mf_bucket_free(o->b);
    free(o->key);
    free(o);
}

static void
state_clear(ts_state_t *st)
{
    for (int i = 0; i < TS_HASH; i++) {
        while (st->tab[i]) {
            open_bucket_t *o = st->tab[i];
            st->tab[i] = o->next;
            ob_free(o);
        }
    }
    while (st->closed) {
        open_bucket_t *o = st->closed;
        st->closed = o->next;
        ob_free(o);
    }
}

static void
state_free(void *arg)
{
    ts_state_t *st = arg;
    state_clear(st);
    free(st);
}

/* The collection's state, created on first use. ts_mu held. */
static ts_state_t *
state_of(mf_coll_t *b)
{
    if (b->ts_state == NULL) {
        b->ts_state = mf_calloc(1, sizeof(ts_state_t));
        b->ts_state_free = state_free;
    }
    return b->ts_state;
}

static uint64_t
fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* meta_key: the meta value's bytes as {"": meta} (key NULL when there is none). */
static void
meta_key(const bson_value_t *meta, bson_t *holder, const uint8_t **key, size_t *keylen)
{
    bson_init(holder);
    *key = NULL;
    *keylen = 0;
    if (meta == NULL)
        return;
    bson_append_value(holder, "", 0, meta);
    *key = bson_get_data(holder);
    *keylen = holder->len;
}

static open_bucket_t **
lookup(ts_state_t *st, const uint8_t *key, size_t keylen, uint64_t h)
{
    open_bucket_t **pp = &st->tab[h % TS_HASH];
    for (; *pp; pp = &(*pp)->next) {
        open_bucket_t *o = *pp;
        if (o->hash == h && o->keylen == keylen && (keylen == 0 || memcmp(o->key, key, keylen) == 0))
            return pp;
    }
    return pp;
}

/*
 * check_stored: makes o match its stored document in this transaction:
 * unchanged (same length), reloaded, or gone (*gone). 0, MF_CONFLICT, -1.
 */
static int
check_stored(mf_sess_t *s, mf_coll_t *c, const mf_ts_spec_t *spec, open_bucket_t *o, bool *gone, mf_error_t *err)
{
    bson_t doc;
    *gone = false;
    if (o->rid == 0 || o->checked)
        return 0;
    int r = mf_coll_fetch(s, c, o->rid, &doc, err);
    if (r == MF_NOTFOUND) {
        *gone = true;
        return 0;
    }
    if (r != 0)
        return r;
    if (doc.len != o->stored_len) {
        mf_bucket_t *nb = mf_bucket_from_doc(spec, &doc, err);
        if (nb == NULL) {
            bson_destroy(&doc);
            *gone = true; /* not a bucket we can extend: leave it as it is, start a new one */
            mf_err_clear(err);
            return 0;
        }
        mf_bucket_free(o->b);
        o->b = nb;
        o->stored_len = doc.len;
    }
    bson_destroy(&doc);
    o->checked = true;
    return 0;
}

/* flush_one: writes o if dirty (insert, or replace of its stored form). 0, MF_CONFLICT, -1. */
static int
flush_one(mf_sess_t *s, mf_coll_t *c, open_bucket_t *o, mf_error_t *err)
{
    bson_t doc, old;
    int r;

    if (!o->dirty)
        return 0;
    mf_bucket_to_doc(o->b, &doc);
    if (o->rid == 0) {
        r = mf_coll_insert(s, c, &doc, &o->rid, err);
    } else {
        r = mf_coll_fetch(s, c, o->rid, &old, err);
        if (r == 0) {
            r = mf_coll_replace(s, c, o->rid, &old, &doc, err);
            bson_destroy(&old);
        }
    }
    if (r == 0)
        o->stored_len = doc.len;
    bson_destroy(&doc);
    return r;
}

static int
flush_all(mf_sess_t *s, mf_coll_t *c, ts_state_t *st, mf_error_t *err)
{
    for (open_bucket_t *o = st->closed; o; o = o->next) {
        int r = flush_one(s, c, o, err);
        if (r != 0)
            return r;
    }
    for (int i = 0; i < TS_HASH; i++)
        for (open_bucket_t *o = st->tab[i]; o; o = o->next) {
            int r = flush_one(s, c, o, err);
            if (r != 0)
                return r;
        }
    return 0;
}

/* After a commit: nothing dirty, closed buckets freed, every open one to be checked again next chunk. */
static void
state_committed(ts_state_t *st)
{
    while (st->closed) {
        open_bucket_t *o = st->closed;
        st->closed = o->next;
        ob_free(o);
    }
    for (int i = 0; i < TS_HASH; i++)
        for (open_bucket_t *o = st->tab[i]; o; o = o->next)
            o->dirty = o->checked = false;
}

typedef struct doc_error {
    size_t index;
    mf_error_t err;
} doc_error_t;

/* check_time: m has a Date in the timeField (else 2, MongoDB's message) and can be stored. 0 or -1. */
static int
check_time(const mf_ts_spec_t *spec, const bson_t *m, mf_error_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, m, spec->time_field) || !BSON_ITER_HOLDS_DATE_TIME(&it))
        return mf_err_set(err, MF_E_BadValue, "'%s' must be present and contain a valid BSON UTC datetime value",
                          spec->time_field);
    return mf_check_doc_for_storage(m, err);
}

/* time_of: the Date in m's timeField (0 when there is none: callers have checked it). */
static int64_t
time_of(const mf_ts_spec_t *spec, const bson_t *m)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, m, spec->time_field) || !BSON_ITER_HOLDS_DATE_TIME(&it))
        return 0;
    return bson_iter_date_time(&it);
}

/*
 * meta_of: doc's field (a measurement's metaField, or a bucket's "meta")
 * into *store, or NULL when absent or the collection has no metaField.
 */
static const bson_value_t *
meta_of(const mf_ts_spec_t *spec, const bson_t *doc, const char *field, bson_value_t *store)
{
    bson_iter_t it;
    if (spec->meta_field == NULL || !bson_iter_init_find(&it, doc, field))
        return NULL;
    *store = *bson_iter_value(&it);
    return store;
}

/*
 * measurement_check: the measurement's time (a Date) and its storage form
 * (with _id, appended when missing) in *out. 0, or -1 with err.
 */
static int
measurement_check(const mf_ts_spec_t *spec, const bson_t *doc, int64_t *t, bson_t *out, mf_error_t *err)
{
    bson_iter_t it;
    if (check_time(spec, doc, err) != 0)
        return -1;
    *t = time_of(spec, doc);
    bson_copy_to(doc, out);
    if (!bson_iter_init_find(&it, doc, "_id")) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(out, "_id", &oid);
    }
    return 0;
}

/* add_one: measurement m (time t) into its meta's bucket. 0, MF_CONFLICT, -1. */
static int
add_one(mf_sess_t *s, mf_coll_t *c, const mf_ts_spec_t *spec, ts_state_t *st, const bson_t *m, int64_t t,
        mf_error_t *err)
{
    bson_value_t meta_v;
    const bson_value_t *meta = meta_of(spec, m, spec->meta_field, &meta_v);
    bson_t holder;
    const uint8_t *key;
    size_t keylen;
    int rc = 0;

    meta_key(meta, &holder, &key, &keylen);
    uint64_t h = fnv(key ? key : (const uint8_t *)"", keylen);
    open_bucket_t **pp = lookup(st, key, keylen, h), *o = *pp;
    if (o != NULL) {
        bool gone;
        if ((rc = check_stored(s, c, spec, o, &gone, err)) != 0)
            goto out;
        if (gone || !mf_bucket_fits(o->b, t, m->len, MF_TS_BUCKET_MAX_COUNT, MF_TS_BUCKET_MAX_BYTES)) {
            /* Close it: written at the chunk's end if this chunk changed it, then freed. */
            *pp = o->next;
            o->next = st->closed;
            st->closed = o;
            if (gone)
                o->dirty = false;
            o = NULL;
        }
    }
    if (o == NULL) {
        o = mf_calloc(1, sizeof *o);
        o->b = mf_bucket_new(spec, meta, t);
        o->hash = h;
        o->keylen = keylen;
        if (keylen) {
            o->key = mf_malloc(keylen);
            memcpy(o->key, key, keylen);
        }
        o->checked = true;
        o->next = st->tab[h % TS_HASH];
        st->tab[h % TS_HASH] = o;
    }
    if ((rc = mf_bucket_add(o->b, m, err)) == 0)
        o->dirty = true;
out:
    bson_destroy(&holder);
    return rc;
}

bool
mf_ts_is_timeseries(mf_catalog_t *cat, const char *db, const char *coll)
{
    mf_catalog_rdlock(cat);
    mf_coll_t *c = mf_catalog_coll_find(cat, db, coll);
    bool ts = c != NULL && c->is_view && c->is_timeseries;
    mf_catalog_unlock(cat);
    return ts;
}

/* buckets_acquire: a shared session holding time-series view db.coll's buckets (*b) and their spec. */
static int
buckets_acquire(mf_catalog_t *cat, const char *db, const char *coll, mf_coll_t **b, mf_ts_spec_t *spec, mf_error_t *err)
{
    mf_catalog_rdlock(cat);
    mf_coll_t *v = mf_catalog_coll_find(cat, db, coll);
    *b = mf_ts_buckets_of(cat, v);
    if (*b == NULL || !mf_ts_spec_of(*b, spec))
        return mf_err_set(err, MF_E_NamespaceNotFound, "time-series collection %s.%s has no buckets collection", db, coll);
    return 0;
}

int
mf_ts_insert(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *docs,
             size_t n, bool ordered, mf_write_error_fn on_error, void *arg, int64_t *inserted, mf_error_t *err)
{
    mf_coll_t *b;
    mf_ts_spec_t spec;
    doc_error_t *errs = NULL;
    size_t nerrs = 0, start = 0;
    bool stop = false;
    int rc = -1;

    *inserted = 0;
    if (buckets_acquire(cat, db, coll, &b, &spec, err) != 0)
        goto out_unlock;
    pthread_mutex_lock(&b->ts_mu);
    ts_state_t *st = state_of(b);
    size_t caperrs = 0; /* errs grows with the failures (an error is 5 KB: a chunk's worth up front would be 51 MB) */
    while (start < n && !stop) {
        size_t end = start + TS_CHUNK < n ? start + TS_CHUNK : n, stop_at = end;
        int64_t ok = 0;
        int r = 0;
        for (int attempt = 0;; attempt++) {
            if (mf_curop_check_current(err) != 0)
                goto out;
            nerrs = 0;
            ok = 0;
            stop_at = end;
            if (mf_txn_begin(s, err) != 0)
                goto out;
            r = 0;
            for (size_t i = start; i < end && r == 0; i++) {
                bson_t m;
                int64_t t = 0;
                mf_error_t e;
                mf_err_clear(&e);
                if (measurement_check(&spec, &docs[i], &t, &m, &e) != 0) {
                    if (nerrs == caperrs) {
                        caperrs = caperrs ? caperrs * 2 : 8;
                        errs = mf_realloc(errs, caperrs * sizeof(*errs));
                    }
                    errs[nerrs].index = i;
                    errs[nerrs++].err = e;
                    if (ordered) {
                        stop_at = i;
                        break;
                    }
                    continue;
                }
                r = add_one(s, b, &spec, st, &m, t, err);
                bson_destroy(&m);
                if (r == 0)
                    ok++;
            }
            if (r == 0)
                r = flush_all(s, b, st, err);
            if (r == 0) {
                r = mf_txn_commit(s, durable, err);
                if (r == 0)
                    break;
            } else {
                mf_txn_abort(s);
            }
            state_clear(st);
            if (r != MF_CONFLICT || attempt >= TS_ATTEMPTS)
                goto out;
            mf_err_clear(err);
            mf_batch_backoff(attempt);
        }
        state_committed(st);
        *inserted += ok;
        for (size_t k = 0; k < nerrs; k++)
            on_error(arg, errs[k].index, &errs[k].err);
        stop = stop_at < end;
        start = end;
    }
    rc = 0;
out:
    pthread_mutex_unlock(&b->ts_mu);
out_unlock:
    mf_catalog_unlock(cat);
    free(errs);
    return rc;
}

/* ---------- deletes ---------- */

typedef struct rids {
    int64_t *v;
    size_t n, cap;
} rids_t;

static int
rid_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    rids_t *r = arg;
    (void)doc;
    (void)d;
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 64;
        r->v = mf_realloc(r->v, r->cap * sizeof *r->v);
    }
    r->v[r->n++] = rid;
    return 0;
}

/*
 * Per-bucket work for deletes and updates: each bucket of the candidate
 * list in its own transaction, re-read inside it (a bucket gone meanwhile
 * is skipped). ops->work does the write on its current content; a write
 * conflict retries the bucket after ops->reset drops what the failed
 * attempt counted, and ops->commit folds the attempt's counts in once it
 * committed. ops->stop (may be NULL) ends the loop early. Interruption
 * (killOp, maxTimeMS, shutdown) is checked between buckets.
 */
typedef struct bucket_ops {
    int (*work)(void *arg, mf_sess_t *s, mf_coll_t *b, int64_t rid, const bson_t *doc, mf_error_t *err);
    void (*reset)(void *arg);
    void (*commit)(void *arg);
    bool (*stop)(void *arg);
    void *arg;
} bucket_ops_t;

static int
for_each_bucket(mf_sess_t *s, mf_coll_t *b, bool durable, const rids_t *rv, const bucket_ops_t *ops, mf_error_t *err)
{
    for (size_t i = 0; i < rv->n; i++) {
        if (ops->stop != NULL && ops->stop(ops->arg))
            break;
        if (mf_curop_check_current(err) != 0)
            return -1;
        for (int attempt = 0;; attempt++) {
            bson_t doc;
            ops->reset(ops->arg);
            int r = mf_txn_begin(s, err);
            if (r != 0)
                return -1;
            r = mf_coll_fetch(s, b, rv->v[i], &doc, err);
            if (r == MF_NOTFOUND) {
                mf_txn_abort(s);
                mf_err_clear(err);
                break;
            }
            if (r == 0) {
                r = ops->work(ops->arg, s, b, rv->v[i], &doc, err);
                bson_destroy(&doc);
            }
            if (r == 0 && (r = mf_txn_commit(s, durable, err)) == 0) {
                ops->commit(ops->arg);
                break;
            }
            if (r != 0 && mf_txn_active(s))
                mf_txn_abort(s);
            if (r != MF_CONFLICT || attempt >= TS_ATTEMPTS)
                return -1;
            mf_err_clear(err);
            mf_batch_backoff(attempt);
        }
    }
    return 0;
}

/*
 * A measurement-level rewrite of one bucket: each measurement is offered
 * to an edit function, which keeps it (returns 0, *out untouched), drops it
 * (1), or replaces it (2, *out initialised with the new measurement). A
 * replacement that still belongs here (same meta, time within the bucket's
 * span) stays in the bucket; one that does not moves to a bucket of its
 * own. The rewritten bucket starts where the old one did, so its expiry
 * never comes earlier for a measurement that stays.
 */
typedef int (*edit_fn)(void *arg, const bson_t *meas, bson_t *out, mf_error_t *err);

typedef struct rewrite {
    mf_bucket_t *keep;  /* the rewritten bucket (NULL while empty) */
    mf_docvec_t moved;  /* replacements that leave the bucket */
    int64_t edited;     /* measurements dropped or replaced */
} rewrite_t;


static bool
same_meta(const bson_value_t *a, const bson_value_t *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return mf_value_cmp(a, b) == 0 && a->value_type == b->value_type;
}

/* rewrite_bucket: applies edit to every measurement of bucket doc into *rw (caller frees with rewrite_free). */
static int
rewrite_bucket(const mf_ts_spec_t *spec, const bson_t *doc, edit_fn edit, void *arg, rewrite_t *rw, mf_error_t *err)
{
    mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(spec, doc, err);
    bson_value_t bm_store, nm_store;
    const bson_value_t *bmeta = meta_of(spec, doc, "meta", &bm_store);
    char minf[300];
    bson_iter_t it;
    int64_t start = 0;
    bson_t meas;
    int rc = 0;

    memset(rw, 0, sizeof *rw);
    mf_docvec_init(&rw->moved);
    if (u == NULL)
        return -1;
    snprintf(minf, sizeof minf, "control.min.%s", spec->time_field);
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, minf, &it) && BSON_ITER_HOLDS_DATE_TIME(&it))
        start = bson_iter_date_time(&it);
    while (rc == 0 && mf_bucket_unpacker_next(u, &meas) == 1) {
        bson_t out;
        const bson_t *put = &meas;
        int r = edit(arg, &meas, &out, err);
        if (r < 0) {
            rc = -1;
        } else if (r == 1) {
            rw->edited++;
        } else {
            if (r == 2) {
                rw->edited++;
                put = &out;
                int64_t t = time_of(spec, &out);
                if (!same_meta(meta_of(spec, &out, spec->meta_field, &nm_store), bmeta) || t < start ||
                    t >= start + spec->max_span_s * 1000) {
                    mf_docvec_push(&rw->moved, &out);
                    put = NULL;
                }
            }
            if (put != NULL) {
                if (rw->keep == NULL)
                    rw->keep = mf_bucket_new(spec, bmeta, start);
                rc = mf_bucket_add(rw->keep, put, err);
            }
            if (r == 2)
                bson_destroy(&out);
        }
        bson_destroy(&meas);
    }
    mf_bucket_unpacker_free(u);
    return rc;
}

static void
rewrite_free(rewrite_t *rw)
{
    mf_bucket_free(rw->keep);
    mf_docvec_destroy(&rw->moved);
}

/*
 * rewrite_apply: writes rw over bucket rid (old content doc) in the
 * caller's transaction: replaced, or removed when nothing stays; each moved
 * measurement goes into a new bucket of its own. 0, MF_CONFLICT, -1.
 */
static int
rewrite_apply(mf_sess_t *s, mf_coll_t *b, const mf_ts_spec_t *spec, int64_t rid, const bson_t *doc, rewrite_t *rw,
              mf_error_t *err)
{
    int r;
    if (rw->keep != NULL) {
        bson_t neu;
        mf_bucket_to_doc(rw->keep, &neu);
        r = mf_coll_replace(s, b, rid, doc, &neu, err);
        bson_destroy(&neu);
    } else {
        r = mf_coll_remove(s, b, rid, doc, err);
    }
    for (size_t i = 0; r == 0 && i < rw->moved.len; i++) {
        const bson_t *m = rw->moved.docs[i];
        bson_value_t ms;
        int64_t t = time_of(spec, m);
        mf_bucket_t *nb = mf_bucket_new(spec, meta_of(spec, m, spec->meta_field, &ms), t);
        r = mf_bucket_add(nb, m, err);
        if (r == 0) {
            bson_t nd;
            mf_bucket_to_doc(nb, &nd);
            r = mf_coll_insert(s, b, &nd, NULL, err);
            bson_destroy(&nd);
        }
        mf_bucket_free(nb);
    }
    return r;
}

/* The delete's edit: drop what the filter matches, up to the budget (< 0: all). */
typedef struct del_edit {
    const mf_matcher_t *m;
    int64_t budget;
} del_edit_t;

static int
del_edit(void *arg, const bson_t *meas, bson_t *out, mf_error_t *err)
{
    del_edit_t *x = arg;
    (void)out;
    (void)err;
    if (x->budget != 0 && mf_matcher_match(x->m, meas, NULL)) {
        if (x->budget > 0)
            x->budget--;
        return 1;
    }
    return 0;
}

/*
 * candidates: the record ids of the buckets of b that may hold a
 * measurement matching q, into rv. whole: q is on the metaField alone and
 * *bf already holds its bucket-level form (a whole-bucket write); else *bf
 * is replaced by the conservative bucket filter from q. The open buckets
 * are dropped first (ts_mu held): the write may change them. 0 or -1.
 */
static int
candidates(mf_sess_t *s, mf_coll_t *b, const mf_ts_spec_t *spec, const bson_t *q, bool whole, bson_t *bf,
           rids_t *rv, mf_error_t *err)
{
    mf_matcher_t *bm;
    int rc;

    if (b->ts_state != NULL)
        state_clear(b->ts_state);
    if (!whole) {
        bson_destroy(bf);
        mf_bucket_filter_from_match(spec, q, bf);
    }
    if ((bm = mf_matcher_new(bf, err)) == NULL)
        return -1;
    mf_plan_request_t req = {.filter = bf};
    rc = mf_exec_query(s, b, &req, bm, rid_visit, rv, NULL, err);
    mf_matcher_free(bm);
    return rc;
}

typedef struct del_ctx {
    const mf_ts_spec_t *spec;
    const mf_matcher_t *m;
    bool meta_only;
    int64_t limit;
    mf_write_delete_result_t *res;
    int64_t removed; /* in the attempt */
} del_ctx_t;

static int
del_work(void *arg, mf_sess_t *s, mf_coll_t *b, int64_t rid, const bson_t *doc, mf_error_t *err)
{
    del_ctx_t *x = arg;
    int r;
    if (x->meta_only) {
        mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(x->spec, doc, err);
        x->removed = u ? (int64_t)mf_bucket_unpacker_count(u) : 0;
        mf_bucket_unpacker_free(u);
        return mf_coll_remove(s, b, rid, doc, err);
    }
    del_edit_t de = {x->m, x->limit > 0 ? x->limit - x->res->deleted : -1};
    rewrite_t rw;
    r = rewrite_bucket(x->spec, doc, del_edit, &de, &rw, err);
    x->removed = rw.edited;
    if (r == 0 && x->removed > 0)
        r = rewrite_apply(s, b, x->spec, rid, doc, &rw, err);
    rewrite_free(&rw);
    return r;
}

static void
del_reset(void *arg)
{
    ((del_ctx_t *)arg)->removed = 0;
}

static void
del_commit(void *arg)
{
    del_ctx_t *x = arg;
    x->res->deleted += x->removed;
    x->res->batches++;
}

static bool
del_stop(void *arg)
{
    del_ctx_t *x = arg;
    return x->limit > 0 && x->res->deleted >= x->limit;
}

int
mf_ts_delete(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *stmt,
             mf_write_delete_result_t *res, mf_error_t *err)
{
    bson_iter_t it;
    bson_t q, bf;
    mf_coll_t *b;
    mf_ts_spec_t spec;
    int64_t limit = 0;
    bool have_q = false;
    mf_matcher_t *m = NULL;
    rids_t rv = {0};
    int rc = -1;

    memset(res, 0, sizeof *res);
    bson_init(&bf);
    if (bson_iter_init_find(&it, stmt, "q") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&q, data, len);
        have_q = true;
    }
    if (bson_iter_init_find(&it, stmt, "limit") && mf_value_is_number(bson_iter_value(&it)))
        limit = (int64_t)mf_value_as_double(bson_iter_value(&it));
    if (!have_q)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'delete.deletes.q' is missing but a required field");
    if ((m = mf_matcher_new(&q, err)) == NULL)
        return -1;
    if (buckets_acquire(cat, db, coll, &b, &spec, err) != 0)
        goto out_unlock;
    pthread_mutex_lock(&b->ts_mu);
    bool meta_only = limit == 0 && mf_bucket_filter_meta_only(&spec, &q, &bf);
    if (candidates(s, b, &spec, &q, meta_only, &bf, &rv, err) != 0)
        goto out;
    /* One bucket per transaction: each is either deleted or rewritten whole. */
    del_ctx_t dx = {&spec, m, meta_only, limit, res, 0};
    bucket_ops_t ops = {del_work, del_reset, del_commit, del_stop, &dx};
    if (for_each_bucket(s, b, durable, &rv, &ops, err) != 0)
        goto out;
    res->batched = limit == 0 && res->deleted > 0;
    rc = 0;
out:
    pthread_mutex_unlock(&b->ts_mu);
out_unlock:
    mf_catalog_unlock(cat);
    mf_matcher_free(m);
    bson_destroy(&bf);
    free(rv.v);
    return rc;
}

/* ---------- updates ---------- */

/* meta_path: path is the metaField or below it. */
static bool
meta_path(const mf_ts_spec_t *spec, const char *path)
{
    size_t ml = strlen(spec->meta_field);
    return strncmp(path, spec->meta_field, ml) == 0 && (path[ml] == '\0' || path[ml] == '.');
}

/* update_meta_only: every operator of update u names only metaField paths. */
static bool
update_meta_only(const mf_ts_spec_t *spec, const bson_t *u)
{
    bson_iter_t it, f;
    if (spec->meta_field == NULL || !bson_iter_init(&it, u))
        return false;
    while (bson_iter_next(&it)) {
        if (bson_iter_key(&it)[0] != '$' || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f))
            return false;
        while (bson_iter_next(&f)) {
            if (!meta_path(spec, bson_iter_key(&f)))
                return false;
            if (strcmp(bson_iter_key(&it), "$rename") == 0 &&
                (!BSON_ITER_HOLDS_UTF8(&f) || !meta_path(spec, bson_iter_utf8(&f, NULL))))
                return false;
        }
    }
    return true;
}

/* The update's edit: apply the update to what the filter matches, up to the budget (< 0: all). */
typedef struct upd_edit {
    const mf_ts_spec_t *spec;
    const mf_matcher_t *m;
    const mf_update_t *up;
    int64_t budget;
    int64_t matched, modified;
} upd_edit_t;

static int
upd_edit(void *arg, const bson_t *meas, bson_t *out, mf_error_t *err)
{
    upd_edit_t *x = arg;
    mf_match_details_t d = {.array_pos = -1};
    bool changed = false;

    if (x->budget == 0 || !mf_matcher_match(x->m, meas, &d))
        return 0;
    if (x->budget > 0)
        x->budget--;
    x->matched++;
    bson_init(out);
    if (mf_update_apply(x->up, meas, &d, false, out, &changed, err) != 0 || (changed && check_time(x->spec, out, err) != 0)) {
        bson_destroy(out);
        return -1;
    }
    if (!changed) {
        bson_destroy(out);
        return 0;
    }
    x->modified++;
    return 2;
}

/* meta_update: a multi update of the metaField only, applied to whole buckets (no unpacking). */
typedef struct meta_ctx {
    const mf_ts_spec_t *spec;
    const mf_update_t *up;
    mf_write_update_result_t *res;
    int64_t count; /* in the attempt */
    bool changed;
} meta_ctx_t;

static int
meta_work(void *arg, mf_sess_t *s, mf_coll_t *b, int64_t rid, const bson_t *doc, mf_error_t *err)
{
    meta_ctx_t *x = arg;
    bson_iter_t it, di;
    bson_t metadoc, newmeta, neu;
    int r;

    /* Apply the update to {<metaField>: meta}; the bucket takes the result's metaField as its meta. */
    bson_init(&metadoc);
    if (bson_iter_init_find(&it, doc, "meta"))
        bson_append_value(&metadoc, x->spec->meta_field, -1, bson_iter_value(&it));
    bson_init(&newmeta);
    r = mf_update_apply(x->up, &metadoc, NULL, false, &newmeta, &x->changed, err);
    if (r == 0) {
        mf_bucket_unpacker_t *pk = mf_bucket_unpacker_new(x->spec, doc, err);
        x->count = pk ? (int64_t)mf_bucket_unpacker_count(pk) : 0;
        mf_bucket_unpacker_free(pk);
    }
    if (r == 0 && x->changed) {
        bson_init(&neu);
        bson_iter_init(&di, doc);
        while (bson_iter_next(&di)) {
            if (strcmp(bson_iter_key(&di), "meta") == 0)
                continue;
            bson_append_value(&neu, bson_iter_key(&di), -1, bson_iter_value(&di));
            if (strcmp(bson_iter_key(&di), "control") == 0 && bson_iter_init_find(&it, &newmeta, x->spec->meta_field))
                bson_append_value(&neu, "meta", 4, bson_iter_value(&it));
        }
        r = mf_coll_replace(s, b, rid, doc, &neu, err);
        bson_destroy(&neu);
    }
    bson_destroy(&metadoc);
    bson_destroy(&newmeta);
    return r;
}

static void
meta_reset(void *arg)
{
    meta_ctx_t *x = arg;
    x->count = 0;
    x->changed = false;
}

static void
meta_commit(void *arg)
{
    meta_ctx_t *x = arg;
    x->res->matched += x->count;
    if (x->changed)
        x->res->modified += x->count;
}

/* The general path: each candidate bucket rewritten measurement by measurement (upd_edit). */
typedef struct meas_ctx {
    const mf_ts_spec_t *spec;
    upd_edit_t *ue;
    upd_edit_t committed; /* the counts as of the last commit */
} meas_ctx_t;

static int
meas_work(void *arg, mf_sess_t *s, mf_coll_t *b, int64_t rid, const bson_t *doc, mf_error_t *err)
{
    meas_ctx_t *x = arg;
    rewrite_t rw;
    int r = rewrite_bucket(x->spec, doc, upd_edit, x->ue, &rw, err);
    if (r == 0 && rw.edited > 0)
        r = rewrite_apply(s, b, x->spec, rid, doc, &rw, err);
    rewrite_free(&rw);
    return r;
}

static void
meas_reset(void *arg)
{
    meas_ctx_t *x = arg;
    *x->ue = x->committed;
}

static void
meas_commit(void *arg)
{
    meas_ctx_t *x = arg;
    x->committed = *x->ue;
}

static bool
meas_stop(void *arg)
{
    return ((meas_ctx_t *)arg)->ue->budget == 0;
}

/* upsert_one: no measurement matched an upsert: the one built from its query and update goes in a new bucket. */
static int
upsert_one(mf_sess_t *s, mf_coll_t *b, const mf_ts_spec_t *spec, bool durable, const bson_t *q, const mf_update_t *up,
           mf_write_update_result_t *res, mf_error_t *err)
{
    bson_t seed, m, full;
    bool changed;
    bson_iter_t it;
    int rc = -1;

    bson_init(&seed);
    bson_init(&m);
    if (mf_update_upsert_seed(q, false, &seed, err) != 0)
        goto out;
    if (mf_update_apply(up, &seed, NULL, true, &m, &changed, err) != 0)
        goto out;
    bson_init(&full);
    bson_copy_to_excluding_noinit(&m, &full, "", NULL);
    if (!bson_iter_init_find(&it, &m, "_id")) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(&full, "_id", &oid);
    }
    if (check_time(spec, &full, err) == 0) {
        bson_value_t ms;
        int64_t t = time_of(spec, &full);
        for (int attempt = 0;; attempt++) {
            mf_bucket_t *nb = mf_bucket_new(spec, meta_of(spec, &full, spec->meta_field, &ms), t);
            bson_t nd;
            int r = mf_bucket_add(nb, &full, err);
            if (r == 0 && (r = mf_txn_begin(s, err)) == 0) {
                mf_bucket_to_doc(nb, &nd);
                r = mf_coll_insert(s, b, &nd, NULL, err);
                bson_destroy(&nd);
                if (r == 0)
                    r = mf_txn_commit(s, durable, err);
                else
                    mf_txn_abort(s);
            }
            mf_bucket_free(nb);
            if (r == 0) {
                bson_iter_init_find(&it, &full, "_id");
                res->upserted = true;
                bson_value_copy(bson_iter_value(&it), &res->upserted_id);
                res->matched = 1;
                rc = 0;
                break;
            }
            if (r != MF_CONFLICT || attempt >= TS_ATTEMPTS)
                break;
            mf_err_clear(err);
            mf_batch_backoff(attempt);
        }
    }
    bson_destroy(&full);
out:
    bson_destroy(&seed);
    bson_destroy(&m);
    return rc;
}

int
mf_ts_update(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *stmt,
             mf_write_update_result_t *res, mf_error_t *err)
{
    bson_iter_t it;
    bson_t q, u, bf;
    mf_coll_t *b;
    mf_ts_spec_t spec;
    bool multi = false, have_q = false, have_u = false, upsert = false, pipeline = false;
    const bson_value_t *af = NULL;
    bson_value_t af_store;
    mf_update_t *up = NULL;
    mf_matcher_t *m = NULL;
    rids_t rv = {0};
    int rc = -1;

    memset(res, 0, sizeof *res);
    bson_init(&bf);
    bson_iter_init(&it, stmt);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const uint8_t *data;
        uint32_t len;
        if (strcmp(k, "q") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            bson_init_static(&q, data, len);
            have_q = true;
        } else if (strcmp(k, "u") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            bson_init_static(&u, data, len);
            have_u = true;
        } else if (strcmp(k, "u") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            pipeline = true;
        } else if (strcmp(k, "multi") == 0) {
            multi = bson_iter_as_bool(&it);
        } else if (strcmp(k, "upsert") == 0) {
            upsert = bson_iter_as_bool(&it);
        } else if (strcmp(k, "arrayFilters") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            af_store = *bson_iter_value(&it);
            af = &af_store;
        }
    }
    if (pipeline)
        return mf_err_set(err, MF_E_InvalidOptions, "Pipeline updates are not supported on time-series collections");
    if (!have_q || !have_u)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'update.updates.%s' is missing but a required field",
                          have_q ? "u" : "q");
    if ((up = mf_update_new(&u, af, err)) == NULL || (m = mf_matcher_new(&q, err)) == NULL)
        goto out_free;
    if (buckets_acquire(cat, db, coll, &b, &spec, err) != 0)
        goto out_unlock;
    pthread_mutex_lock(&b->ts_mu);
    bool whole = multi && !mf_update_is_replacement(up) && mf_bucket_filter_meta_only(&spec, &q, &bf) &&
                 update_meta_only(&spec, &u);
    if (candidates(s, b, &spec, &q, whole, &bf, &rv, err) != 0)
        goto out;
    if (whole) {
        meta_ctx_t mx = {&spec, up, res, 0, false};
        bucket_ops_t ops = {meta_work, meta_reset, meta_commit, NULL, &mx};
        rc = for_each_bucket(s, b, durable, &rv, &ops, err);
    } else {
        upd_edit_t ue = {&spec, m, up, multi ? -1 : 1, 0, 0};
        meas_ctx_t mx = {&spec, &ue, ue};
        bucket_ops_t ops = {meas_work, meas_reset, meas_commit, meas_stop, &mx};
        rc = for_each_bucket(s, b, durable, &rv, &ops, err);
        res->matched = mx.committed.matched;
        res->modified = mx.committed.modified;
    }
    if (rc == 0 && upsert && res->matched == 0)
        rc = upsert_one(s, b, &spec, durable, &q, up, res, err);
out:
    pthread_mutex_unlock(&b->ts_mu);
out_unlock:
    mf_catalog_unlock(cat);
out_free:
    if (up)
        mf_update_free(up);
    mf_matcher_free(m);
    bson_destroy(&bf);
    free(rv.v);
    return rc;
}
