/*
 * catalog.c: the in-memory catalog and its persistence (see catalog.h).
 *
 * The in-memory catalog is an array of mf_coll_t kept sorted by namespace,
 * guarded by one pthread rwlock. Each DDL operation (create, drop, rename,
 * index add/drop, collMod, dropDatabase) makes all its catalog changes in ONE
 * WiredTiger transaction, committed with sync, then updates memory: a crash
 * or a storage error at any point leaves either the old or the new catalog,
 * never a mix (a rename never leaves two entries on one table). Tables are
 * created before their entry commits and dropped after it is gone, so a
 * crash leaves at worst an unnamed table, never a dangling entry; open drops
 * every coll-* / index-* table that no entry names.
 *
 * Multikey: a writer that produces more than one key for an index whose
 * committed entry does not say multikey rewrites the entry inside its own
 * transaction (mf_catalog_index_mark_multikey), so the flag is durable
 * exactly when the first multikey document is. A restart never forgets it,
 * and queries keep de-duplicating record ids. The same goes for its
 * multikey paths (mf_index_t.mk_paths, the entry's multikeyPaths: a number
 * per field, bit p for an array at its path's component p): a document
 * whose paths the committed entry does not cover writes it again, once a
 * transaction (see mk_note_t).
 *
 * Sizes (mongod's sizeStorer): each collection's document count and data size
 * live in table:_mf_sizes (key: the collection's ident, value BSON {count,
 * size}), written by the storage flusher about once a second and at close,
 * and in the DDL transaction that creates or drops the collection. Open reads
 * them instead of scanning documents; the next record id is one cursor step
 * back from the end of the record table.
 *
 * Option fields (capped limits, view flag, the parsed validator) are derived
 * from c->options at load, at create and in every mf_catalog_coll_persist,
 * always under the write lock, so readers holding the shared lock see one
 * consistent validator; collMod, which replaces c->options and persists,
 * needs nothing else.
 *
 * Views (see "system.views" below) are catalog entries, mirrored as documents
 * of their database's system.views collection in the same transactions.
 */
#include "common/alloc.h"
#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "doc/collation.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "common/log.h"
#include "doc/expr.h"
#include "doc/jsonschema.h"
#include "doc/match.h"
#include "doc/value.h"
#include "doc/geo.h"
#include "doc/text.h"
#include "index/index_spec.h"

#define CATALOG_URI "table:_mf_catalog"
#define LOAD_FDS_WAIT_MS 60000 /* how long a start waits for file descriptors (see mf_catalog_open) */
#define SIZES_URI "table:_mf_sizes"

struct mf_catalog {
    mf_storage_t *st;
    _Atomic uint64_t ts_clock; /* the last Timestamp mf_catalog_tick_ts gave, (seconds << 32 | increment) */
    mf_observers_t *observers; /* the engine's; NULL until set */
    /* Around each DDL transaction (the engine's fsync lock): gate before it begins, gate_done once it ended. */
    int (*ddl_gate)(void *arg, mf_error_t *err);
    void (*ddl_gate_done)(void *arg);
    void *ddl_gate_arg;
    pthread_rwlock_t lock;  /* the map (colls[]) only: held for a lookup or a map change, never while waiting */
    pthread_mutex_t ddl_mu; /* one catalog change at a time, taken inside DDL functions after collection locks */
    mf_coll_t **colls;
    int ncolls;
    int cap;
    pthread_mutex_t flush_lock; /* one size flush at a time (flusher thread, close) */
    bool flush_error_logged;
    _Atomic bool collated; /* some collection or view ever had a default collation (mf_catalog_has_collations) */
    _Atomic uint64_t version; /* mf_catalog_version: bumped by every change of the map or of an entry */
    /*
     * Collection lock figures (mf_catalog_lock_stats), [0] shared and [1]
     * exclusive, kept by the lock sessions with relaxed atomics: locks
     * taken, those that had to wait, the microseconds they waited, and the
     * threads waiting now.
     */
    _Atomic int64_t lk_acquired[2], lk_waits[2], lk_wait_us[2], lk_waiting[2];
};

#define SYSTEM_VIEWS "system.views"
static int views_coll(mf_catalog_t *cat, const char *db, bool create, struct mf_coll **out, mf_error_t *err);
static int views_def_put(mf_sess_t *s, struct mf_coll *sv, const struct mf_coll *v, mf_error_t *err);

static void
random_hex(char *out, size_t nbytes)
{
    uint8_t buf[16];
    FILE *f = fopen("/dev/urandom", "rb");
    if (f == NULL || fread(buf, 1, nbytes, f) != nbytes) {
        for (size_t i = 0; i < nbytes; i++)
            buf[i] = (uint8_t)rand();
    }
    if (f)
        fclose(f);
    for (size_t i = 0; i < nbytes; i++)
        sprintf(out + 2 * i, "%02x", buf[i]);
}

static void
index_free(mf_index_t *ix)
{
    if (ix == NULL)
        return;
    free(ix->name);
    bson_destroy(ix->spec);
    free(ix->uri);
    free(ix->ident);
    mf_keypattern_destroy(&ix->kp);
    if (ix->partial)
        mf_matcher_free(ix->partial);
    free(ix);
}

/* The option fields of mf_coll_t, parsed from an options document. */
typedef struct parsed_opts {
    bool capped;
    int64_t size, max;
    bool view;
    bool timeseries;
    bool clustered; /* options.clusteredIndex */
    int64_t expire; /* expireAfterSeconds, or -1 */
    bool pre_images; /* changeStreamPreAndPostImages.enabled */
    mf_matcher_t *validator;
    mf_collation_t *validator_coll; /* the collection's default collation, which the validator compares under */
    int level, action;
} parsed_opts_t;

/* Frees what p owns (its validator and that one's collation). */
static void
parsed_opts_free(parsed_opts_t *p)
{
    if (p->validator)
        mf_matcher_free(p->validator);
    mf_collation_free(p->validator_coll);
    p->validator = NULL;
    p->validator_coll = NULL;
}

static int
opt_int64(const bson_iter_t *it, const char *name, int64_t *out, mf_error_t *err)
{
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'create.%s' is the wrong type '%s', expected types '[long, int, decimal, double']",
                          name, mf_type_name(v->value_type));
    double d = mf_value_as_double(v);
    if (!(d >= -9.2e18 && d <= 9.2e18))
        return mf_err_set(err, MF_E_BadValue, "BSON field 'create.%s' is out of range", name);
    *out = (int64_t)d;
    return 0;
}

/*
 * parse_options: derives the option fields from options (see catalog.h).
 * On success the caller owns p->validator.
 */
/* Whether a collection of cat has that UUID (takes the catalog's lock briefly). */
static bool
uuid_taken(mf_catalog_t *cat, const uint8_t uuid[16])
{
    bool taken = false;
    pthread_rwlock_rdlock(&cat->lock);
    for (int i = 0; i < cat->ncolls && !taken; i++)
        taken = memcmp(cat->colls[i]->uuid, uuid, 16) == 0;
    pthread_rwlock_unlock(&cat->lock);
    return taken;
}

/* Copies the 16-byte binary at it into uuid; anything else leaves uuid as it was. */
static void
uuid_of(const bson_iter_t *it, uint8_t uuid[16])
{
    const uint8_t *bin;
    uint32_t len;
    bson_subtype_t st;
    if (!BSON_ITER_HOLDS_BINARY(it))
        return;
    bson_iter_binary(it, &st, &len, &bin);
    if (len == 16)
        memcpy(uuid, bin, 16);
}

/* Whether options has field k set to the string v. */
static bool
opt_is(const bson_t *options, const char *k, const char *v)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, options, k) && BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), v) == 0;
}

static int
parse_options(const bson_t *options, bool exact_size, bool collmod, parsed_opts_t *p, mf_error_t *err)
{
    bson_iter_t it;
    bool has_size = false;

    memset(p, 0, sizeof(*p));
    p->expire = -1;
    if (options == NULL || !bson_iter_init(&it, options))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "timeseries") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            p->timeseries = true;
        } else if (strcmp(k, "clusteredIndex") == 0) {
            p->clustered = true;
        } else if (strcmp(k, "changeStreamPreAndPostImages") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t e;
            p->pre_images = bson_iter_recurse(&it, &e) && bson_iter_find(&e, "enabled") && bson_iter_as_bool(&e);
        } else if (strcmp(k, "expireAfterSeconds") == 0 && mf_value_is_number(bson_iter_value(&it))) {
            p->expire = bson_iter_as_int64(&it);
        } else if (strcmp(k, "capped") == 0) {
            p->capped = bson_iter_as_bool(&it);
        } else if (strcmp(k, "size") == 0) {
            if (opt_int64(&it, k, &p->size, err) != 0)
                goto fail;
            has_size = true;
        } else if (strcmp(k, "max") == 0) {
            if (opt_int64(&it, k, &p->max, err) != 0)
                goto fail;
        } else if (strcmp(k, "viewOn") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it)) {
                mf_err_set(err, MF_E_TypeMismatch, "BSON field 'create.viewOn' is the wrong type '%s', expected type 'string'",
                           mf_type_name(bson_iter_type(&it)));
                goto fail;
            }
            if (bson_iter_utf8(&it, NULL)[0] == '\0') {
                mf_err_set(err, MF_E_BadValue, "'viewOn' cannot be empty");
                goto fail;
            }
            p->view = true;
        } else if (strcmp(k, "pipeline") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it)) {
                mf_err_set(err, MF_E_TypeMismatch, "BSON field 'create.pipeline' is the wrong type '%s', expected type 'array'",
                           mf_type_name(bson_iter_type(&it)));
                goto fail;
            }
        } else if (strcmp(k, "validator") == 0) {
            bson_t vd;
            const uint8_t *data;
            uint32_t len;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
                mf_err_set(err, MF_E_TypeMismatch, "BSON field 'validator' is the wrong type '%s', expected type 'object'",
                           mf_type_name(bson_iter_type(&it)));
                goto fail;
            }
            bson_iter_document(&it, &len, &data);
            if (!bson_init_static(&vd, data, len)) {
                mf_err_set(err, MF_E_BadValue, "invalid validator document");
                goto fail;
            }
            bson_value_t tv;
            mf_error_t te = {0};
            if (mf_text_find(&vd, &tv, &te) != 0) { /* no text plan validates a document */
                mf_err_set(err, MF_E_BadValue, "$text is not allowed in this context"); /* parseText: 2 */
                goto bad_validator;
            }
            if (mf_geo_filter_has_near(&vd)) { /* nor does a nearest-first search */
                mf_err_set(err, MF_E_Location5626500, MF_GEO_NEAR_CONTEXT_MSG);
                goto bad_validator;
            }
            parsed_opts_free(p);
            /*
             * Under the collection's default collation, as mongod parses and
             * runs a validator with the collection's collator, whatever a
             * write's own collation (mf_coll_validate).
             */
            bson_iter_t ci;
            if (bson_iter_init_find(&ci, options, "collation") && BSON_ITER_HOLDS_DOCUMENT(&ci) &&
                mf_collation_from_value(bson_iter_value(&ci), &p->validator_coll, err) != 0)
                goto fail;
            const mf_collation_t *saved = mf_collation_current();
            mf_collation_set_current(p->validator_coll);
            /* No encrypt keywords where a failing document would be logged or kept in plain (warn, moderate). */
            bool allowed = mf_jsonschema_allow_encrypt(!opt_is(options, "validationAction", "warn") &&
                                                       !opt_is(options, "validationLevel", "moderate"));
            bool in_validator = mf_expr_parsing_validator(true);
            p->validator = bson_empty(&vd) ? NULL : mf_matcher_new(&vd, err);
            mf_expr_parsing_validator(in_validator);
            mf_jsonschema_allow_encrypt(allowed);
            mf_collation_set_current(saved);
            if (!bson_empty(&vd) && p->validator == NULL)
                goto bad_validator;
        } else if (strcmp(k, "validationLevel") == 0 || strcmp(k, "validationAction") == 0) {
            bool level = k[10] == 'L';
            const char *v = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
            int code = -1;
            if (level)
                code = strcmp(v, "strict") == 0 ? MF_VALIDATION_STRICT
                       : strcmp(v, "moderate") == 0 ? MF_VALIDATION_MODERATE
                       : strcmp(v, "off") == 0 ? MF_VALIDATION_OFF : -1;
            else
                code = strcmp(v, "error") == 0 || strcmp(v, "errorAndLog") == 0 ? MF_VALIDATION_ERROR
                       : strcmp(v, "warn") == 0 ? MF_VALIDATION_WARN : -1;
            if (!BSON_ITER_HOLDS_UTF8(&it)) {
                mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'string'", k,
                           mf_type_name(bson_iter_type(&it)));
                goto fail;
            }
            if (code < 0) {
                mf_err_set(err, MF_E_BadValue, "Enumeration value '%s' for field '%s' is not a valid value.", v, k);
                goto fail;
            }
            if (level)
                p->level = code;
            else
                p->action = code;
        }
    }
    if (p->capped && !p->view) {
        if (!has_size) {
            mf_err_set(err, MF_E_InvalidOptions, "the 'size' field is required when 'capped' is true");
            goto fail;
        }
        if (p->size <= 0) {
            mf_err_set(err, MF_E_Location51024, "BSON field 'size' value must be >= 1, actual value '%lld'",
                       (long long)p->size);
            goto fail;
        }
        /*
         * create: at least 4096 bytes, rounded up to a multiple of 256. A
         * size set by collMod cappedSize is kept as given (exact_size), as
         * MongoDB 8.0's collMod keeps it (capped_resize.js: 256, 50 * 1023).
         */
        if (exact_size)
            ;
        else if (p->size <= 4096)
            p->size = 4096;
        else if (p->size % 256 != 0)
            p->size += 256 - p->size % 256;
        if (p->max < 0)
            p->max = 0;
    }
    if (p->view && (p->capped || p->validator != NULL)) {
        mf_err_set(err, MF_E_InvalidOptions, "Invalid view option: %s", p->capped ? "capped" : "validator");
        goto fail;
    }
    return 0;
bad_validator:
    /* collMod's parseValidator gives a validator's parse error its context; create's userCreateNS answers it bare. */
    if (collmod)
        mf_err_context(err, "Parsing of collection validator failed");
fail:
    parsed_opts_free(p);
    return -1;
}

int
mf_coll_validator_allowed(const char *db, const char *name, const uint8_t uuid[16], const bson_t *options,
                          mf_error_t *err)
{
    bson_iter_t it;
    char u[37];
    if (options == NULL || !bson_iter_init_find(&it, options, "validator") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return 0;
    const uint8_t *data;
    uint32_t len;
    bson_iter_document(&it, &len, &data);
    if (len <= 5) /* {} */
        return 0;
    mf_fmt_uuid(uuid, u);
    if (strncmp(name, "system.", 7) == 0 && strncmp(name, "system.buckets.", 15) != 0)
        return mf_err_set(err, MF_E_InvalidOptions, "Document validators not allowed on system collection %s.%s with UUID %s",
                          db, name, u);
    bool internal = strcmp(db, "admin") == 0 || strcmp(db, "local") == 0 || strcmp(db, "config") == 0;
    if (internal && !(strcmp(db, "config") == 0 && strcmp(name, "settings") == 0))
        return mf_err_set(err, MF_E_InvalidOptions,
                          "Document validators are not allowed on collection %s.%s with UUID %s in the %s internal database",
                          db, name, u, db);
    return 0;
}

int
mf_coll_options_check(const bson_t *options, bool collmod, mf_error_t *err)
{
    parsed_opts_t p;
    if (parse_options(options, false, collmod, &p, err) != 0)
        return -1;
    parsed_opts_free(&p);
    return 0;
}

/* Installs p's fields on c (taking p's validator). Write lock held (or c not yet published). */
static void
apply_options(mf_coll_t *c, parsed_opts_t *p)
{
    if (c->validator)
        mf_matcher_free(c->validator);
    mf_collation_free(c->validator_coll);
    c->validator = p->validator;
    c->validator_coll = p->validator_coll;
    p->validator = NULL;
    p->validator_coll = NULL;
    c->capped = p->capped && !p->view;
    c->capped_size = c->capped ? p->size : 0;
    c->capped_max = c->capped ? p->max : 0;
    c->is_view = p->view;
    int64_t old_ts = c->ts_expire, old_cl = c->clustered_expire;
    c->is_timeseries = p->timeseries;
    c->ts_expire = p->timeseries ? p->expire : -1;
    c->clustered = p->clustered && !p->timeseries;
    c->clustered_expire = c->clustered ? p->expire : -1;
    if (c->ts_expire != old_ts || c->clustered_expire != old_cl) {
        /*
         * Expiry turned on, off or changed: writes made while it was off
         * recorded no Dates, so the TTL monitor's floor for these indexes
         * is forgotten (unknown: it scans from the first Date again).
         */
        for (int i = 0; i < c->nindexes; i++)
            atomic_store(&c->indexes[i]->ttl_dirty_min, INT64_MIN);
    }
    c->pre_images = p->pre_images && !p->view;
    c->validation_level = p->level;
    c->validation_action = p->action;
}

static void
coll_free(mf_coll_t *c)
{
    if (c == NULL)
        return;
    pthread_rwlock_destroy(&c->lock);
    if (c->ts_state != NULL && c->ts_state_free != NULL)
        c->ts_state_free(c->ts_state);
    void *filters = atomic_load(&c->index_filters);
    if (filters != NULL && c->index_filters_free != NULL)
        c->index_filters_free(filters);
    pthread_mutex_destroy(&c->ts_mu);
    if (c->validator)
        mf_matcher_free(c->validator);
    mf_collation_free(c->validator_coll);
    for (int i = 0; i < c->nindexes; i++)
        index_free(c->indexes[i]);
    free(c->db);
    free(c->name);
    free(c->ns);
    free(c->ident);
    free(c->uri);
    if (c->options)
        bson_destroy(c->options);
    free(c);
}

/* A growable array of collections, filled by mf_catalog_coll_list. */
typedef struct coll_vec {
    mf_coll_t **v;
    int n, cap;
} coll_vec_t;

static void
collect_into(void *arg, mf_coll_t *c)
{
    coll_vec_t *cv = arg;
    if (cv->n == cv->cap) {
        cv->cap = cv->cap ? cv->cap * 2 : 16;
        cv->v = mf_realloc(cv->v, (size_t)cv->cap * sizeof(*cv->v));
    }
    cv->v[cv->n++] = c;
}

/* ---------- Locking ----------
 *
 * Each collection has a reader-writer lock and a reference count. A thread's
 * lock session (below) records every collection it has found and locked;
 * mf_catalog_unlock at depth 0 releases them all. The map lock (cat->lock)
 * is held only to look a collection up and pin it (refs + 1); the
 * collection's own lock is then taken without the map lock, so a thread
 * waiting for a collection never holds up lookups of others. After the wait
 * the collection is checked again: dropped meanwhile gives NULL, renamed
 * meanwhile retries the lookup.
 *
 * Deadlocks: readers take shared locks only; DDL takes exclusive ones. A
 * DDL's first exclusive lock is waited for without limit (it holds no other
 * collection). A further one (rename onto an existing target, dropDatabase)
 * is waited for at most LOCK_TIMEOUT_MS: a reader holding that collection
 * might be waiting for one the DDL holds ($lookup from it), and the timeout
 * breaks that cycle (the DDL then fails or skips, logged). Sessions that
 * lock many collections (listCollections, the TTL monitor, dropDatabase) do
 * so in namespace order, as they come from the sorted map, so they never
 * form a cycle among themselves.
 */
#define LOCK_TIMEOUT_MS 10000
#define SESSION_INLINE 32

typedef struct held {
    mf_coll_t *c;
    bool excl;
} held_t;

/* The calling thread's lock session (per-thread state of the command it runs). */
typedef struct lock_session {
    mf_catalog_t *cat;
    int depth;
    bool excl;
    int n, cap, nexcl;
    bool timed_out; /* a bounded wait gave up (checked by DDL that must not skip a collection) */
    bool held;      /* mf_catalog_session_hold: a multi-document transaction's, kept across its commands */
    held_t inline_v[SESSION_INLINE];
    held_t *v; /* inline_v or a heap array past SESSION_INLINE */
} lock_session_t;

static _Thread_local lock_session_t T;

static void
coll_unref(mf_coll_t *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        coll_free(c);
}

static held_t *
session_find(mf_coll_t *c)
{
    for (int i = 0; i < T.n; i++) {
        if (T.v[i].c == c)
            return &T.v[i];
    }
    return NULL;
}

static void
session_add(mf_coll_t *c, bool excl)
{
    if (T.v == NULL) {
        T.v = T.inline_v;
        T.cap = SESSION_INLINE;
    }
    if (T.n == T.cap) {
        held_t *nv = mf_malloc((size_t)T.cap * 2 * sizeof(*nv));
        memcpy(nv, T.v, (size_t)T.n * sizeof(*nv));
        if (T.v != T.inline_v)
            free(T.v);
        T.v = nv;
        T.cap *= 2;
    }
    T.v[T.n].c = c;
    T.v[T.n].excl = excl;
    T.n++;
    if (excl)
        T.nexcl++;
}

static void
session_release(void)
{
    for (int i = T.n - 1; i >= 0; i--) {
        pthread_rwlock_unlock(&T.v[i].c->lock);
        coll_unref(T.v[i].c);
    }
    if (T.v != T.inline_v)
        free(T.v);
    T.v = NULL;
    T.n = T.cap = T.nexcl = 0;
}

/*
 * Locks pinned collection c for the session (shared, or exclusive in a DDL
 * session). Returns true when held (the pin now belongs to the session),
 * false when the wait timed out (the pin is dropped).
 */
static bool
session_lock(mf_coll_t *c)
{
    bool excl = T.excl;
    held_t *h = session_find(c);
    if (h != NULL) {
        coll_unref(c); /* the session's pin already holds it */
        return true;
    }
    mf_catalog_t *cat = T.cat;
    int m = excl ? 1 : 0;
    /* A lock free at once is not a wait: only the blocking path below is timed (serverStatus locks). */
    int r = excl ? pthread_rwlock_trywrlock(&c->lock) : pthread_rwlock_tryrdlock(&c->lock);
    if (r != 0) {
        int64_t t0 = mf_mono_us();
        atomic_fetch_add_explicit(&cat->lk_waiting[m], 1, memory_order_relaxed);
        if (!excl) {
            r = pthread_rwlock_rdlock(&c->lock);
        } else if (T.nexcl == 0) {
            r = pthread_rwlock_wrlock(&c->lock);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts); /* timedwrlock measures CLOCK_REALTIME */
            ts.tv_sec += LOCK_TIMEOUT_MS / 1000;
            r = pthread_rwlock_timedwrlock(&c->lock, &ts);
            if (r != 0) {
                T.timed_out = true;
                mf_log(MF_LOG_WARN, "STORAGE", "could not lock %s within %d ms for a catalog change", c->ns,
                       LOCK_TIMEOUT_MS);
            }
        }
        atomic_fetch_sub_explicit(&cat->lk_waiting[m], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&cat->lk_waits[m], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&cat->lk_wait_us[m], mf_mono_us() - t0, memory_order_relaxed);
    }
    if (r != 0) {
        coll_unref(c);
        return false;
    }
    atomic_fetch_add_explicit(&cat->lk_acquired[m], 1, memory_order_relaxed);
    session_add(c, excl);
    return true;
}

/* Drops c from the session (after a lookup found it renamed or dropped under the wait). */
static void
session_forget(mf_coll_t *c)
{
    for (int i = 0; i < T.n; i++) {
        if (T.v[i].c == c) {
            if (T.v[i].excl)
                T.nexcl--;
            T.v[i] = T.v[--T.n];
            pthread_rwlock_unlock(&c->lock);
            coll_unref(c);
            return;
        }
    }
}

/*
 * session_take: makes pinned collection c the session's (locked until the
 * session ends). Without a session (start-up, tests of the catalog alone)
 * the caller owns all access and the pin is simply dropped. Returns false,
 * the pin dropped, when c was dropped while we waited or a bounded wait
 * gave up.
 */
static bool
session_take(mf_coll_t *c)
{
    if (T.depth == 0) {
        coll_unref(c);
        return true;
    }
    if (!session_lock(c))
        return false;
    if (c->dropped) {
        session_forget(c);
        return false;
    }
    return true;
}

void
mf_catalog_rdlock(mf_catalog_t *cat)
{
    if (T.depth++ == 0) {
        T.cat = cat;
        T.excl = false;
        T.timed_out = false;
    }
}

void
mf_catalog_wrlock(mf_catalog_t *cat)
{
    if (T.depth++ == 0) {
        T.cat = cat;
        T.timed_out = false;
    }
    T.excl = true; /* collections found from now on are locked exclusively */
}

void
mf_catalog_lock_stats(mf_catalog_t *cat, mf_lock_stats_t *out)
{
    for (int m = 0; m < 2; m++) {
        out->acquired[m] = atomic_load_explicit(&cat->lk_acquired[m], memory_order_relaxed);
        out->waits[m] = atomic_load_explicit(&cat->lk_waits[m], memory_order_relaxed);
        out->wait_us[m] = atomic_load_explicit(&cat->lk_wait_us[m], memory_order_relaxed);
        out->waiting[m] = atomic_load_explicit(&cat->lk_waiting[m], memory_order_relaxed);
    }
}

void
mf_catalog_unlock(mf_catalog_t *cat)
{
    (void)cat;
    if (T.depth > 0 && --T.depth == 0) {
        session_release();
        T.cat = NULL;
        T.excl = false;
    }
}

void
mf_catalog_session_hold(mf_catalog_t *cat)
{
    mf_catalog_rdlock(cat);
    T.held = true;
}

void
mf_catalog_session_unhold(void)
{
    T.held = false;
    (void)mf_catalog_session_end_all();
}

bool
mf_catalog_session_has(const char *db, const char *name)
{
    for (int i = 0; i < T.n; i++)
        if (strcmp(T.v[i].c->db, db) == 0 && strcmp(T.v[i].c->name, name) == 0)
            return true;
    return false;
}

bool
mf_catalog_session_end_all(void)
{
    if (T.depth == 0)
        return false;
    T.depth = 0;
    session_release();
    T.cat = NULL;
    T.excl = false;
    return true;
}

static mf_coll_t *
lookup(mf_catalog_t *cat, const char *db, const char *name)
{
    size_t dl = strlen(db);
    for (int i = 0; i < cat->ncolls; i++) {
        mf_coll_t *c = cat->colls[i];
        if (strncmp(c->ns, db, dl) == 0 && c->ns[dl] == '.' && strcmp(c->ns + dl + 1, name) == 0)
            return c;
    }
    return NULL;
}

static bool
ns_is(const mf_coll_t *c, const char *db, const char *name)
{
    size_t dl = strlen(db);
    return strncmp(c->ns, db, dl) == 0 && c->ns[dl] == '.' && strcmp(c->ns + dl + 1, name) == 0;
}

bool
mf_catalog_db_is_internal(const char *db)
{
    return strcmp(db, "admin") == 0 || strcmp(db, "config") == 0 || strcmp(db, "local") == 0;
}

mf_coll_t *
mf_catalog_coll_find(mf_catalog_t *cat, const char *db, const char *name)
{
    for (;;) {
        pthread_rwlock_rdlock(&cat->lock);
        mf_coll_t *c = lookup(cat, db, name);
        if (c != NULL)
            atomic_fetch_add(&c->refs, 1);
        pthread_rwlock_unlock(&cat->lock);
        if (c == NULL || !session_take(c))
            return NULL;
        if (ns_is(c, db, name))
            return c;
        /* Renamed while we waited: look the name up again. */
        session_forget(c);
    }
}

mf_coll_t *
mf_catalog_coll_find_uuid(mf_catalog_t *cat, const uint8_t uuid[16])
{
    pthread_rwlock_rdlock(&cat->lock);
    mf_coll_t *c = NULL;
    for (int i = 0; i < cat->ncolls; i++) {
        if (memcmp(cat->colls[i]->uuid, uuid, 16) == 0) {
            c = cat->colls[i];
            atomic_fetch_add(&c->refs, 1);
            break;
        }
    }
    pthread_rwlock_unlock(&cat->lock);
    return c != NULL && session_take(c) ? c : NULL;
}

void
mf_catalog_names(mf_catalog_t *cat, void (*fn)(void *arg, const char *db, const char *name, const uint8_t uuid[16]),
                 void *arg)
{
    pthread_rwlock_rdlock(&cat->lock);
    for (int i = 0; i < cat->ncolls; i++)
        fn(arg, cat->colls[i]->db, cat->colls[i]->name, cat->colls[i]->uuid);
    pthread_rwlock_unlock(&cat->lock);
}

/* coll_walk: mf_catalog_coll_list (keep: the session holds what it visited) or _visit (it does not). */
static void
coll_walk(mf_catalog_t *cat, const char *db, void (*fn)(void *arg, mf_coll_t *c), void *arg, bool keep)
{
    mf_coll_t **v;
    int n = 0;

    pthread_rwlock_rdlock(&cat->lock);
    v = mf_malloc(((size_t)cat->ncolls + 1) * sizeof(*v));
    for (int i = 0; i < cat->ncolls; i++) {
        if (db == NULL || strcmp(cat->colls[i]->db, db) == 0) {
            v[n] = cat->colls[i];
            atomic_fetch_add(&v[n]->refs, 1);
            n++;
        }
    }
    pthread_rwlock_unlock(&cat->lock);
    /* In namespace order (the map is sorted): see "Deadlocks" above. */
    for (int i = 0; i < n; i++) {
        bool held = T.depth > 0 && session_find(v[i]) != NULL;
        if (!session_take(v[i]))
            continue;
        fn(arg, v[i]);
        if (!keep && T.depth > 0 && !held)
            session_forget(v[i]); /* visited: hold nothing past the call */
    }
    free(v);
}

void
mf_catalog_coll_list(mf_catalog_t *cat, const char *db, void (*fn)(void *arg, mf_coll_t *c), void *arg)
{
    coll_walk(cat, db, fn, arg, true);
}

void
mf_catalog_coll_visit(mf_catalog_t *cat, const char *db, void (*fn)(void *arg, mf_coll_t *c), void *arg)
{
    coll_walk(cat, db, fn, arg, false);
}

/* Replaces the n bytes of msg (cap bytes, NUL-terminated) at pos with `with`, cutting at cap; the new end of `with`. */
static size_t
msg_splice(char *msg, size_t cap, size_t pos, size_t n, const char *with)
{
    char out[1024];
    snprintf(out, sizeof(out), "%.*s%s%s", (int)pos, msg, with, msg + pos + n);
    size_t len = strlen(out) < cap ? strlen(out) : cap - 1;
    memcpy(msg, out, len);
    msg[len] = '\0';
    return pos + strlen(with) < len ? pos + strlen(with) : len;
}

/* How a user knows table uri: collection c's records, or its index ix (NULL: the records). */
static void
table_label(const mf_coll_t *c, const mf_index_t *ix, char *out, size_t cap)
{
    if (ix == NULL)
        snprintf(out, cap, "collection %s", c->ns);
    else
        snprintf(out, cap, "index '%s' of %s", ix->name, c->ns);
}

typedef struct table_name {
    const char *uri;
    char name[400];
} table_name_t;

static void
table_name_visit(void *arg, mf_coll_t *c)
{
    table_name_t *t = arg;
    if (t->name[0] != '\0')
        return;
    if (strcmp(c->uri, t->uri) == 0) {
        table_label(c, NULL, t->name, sizeof(t->name));
        return;
    }
    for (int i = 0; i < c->nindexes; i++) {
        if (strcmp(c->indexes[i]->uri, t->uri) == 0) {
            table_label(c, c->indexes[i], t->name, sizeof(t->name));
            return;
        }
    }
}

void
mf_catalog_name_tables(mf_catalog_t *cat, char *msg, size_t cap)
{
    static const char prefix[] = "table:";
    size_t from = 0;

    for (;;) {
        char *at = strstr(msg + from, prefix);
        if (at == NULL)
            return;
        size_t n = sizeof(prefix) - 1;
        while (at[n] == '-' || at[n] == '_' || (at[n] >= '0' && at[n] <= '9') || (at[n] >= 'a' && at[n] <= 'z') ||
               (at[n] >= 'A' && at[n] <= 'Z'))
            n++;
        char uri[128];
        table_name_t t = {.uri = uri};
        if (n < sizeof(uri)) {
            memcpy(uri, at, n);
            uri[n] = '\0';
            mf_catalog_rdlock(cat);
            mf_catalog_coll_visit(cat, NULL, table_name_visit, &t);
            mf_catalog_unlock(cat);
        }
        size_t pos = (size_t)(at - msg);
        if (t.name[0] == '\0') {
            from = pos + n;
            continue;
        }
        from = msg_splice(msg, cap, pos, n, t.name);
    }
}

/*
 * Creates table uri (kind: mf_storage_table_config's) for collection c, or
 * for its index ix if not NULL. A refusal for want of file descriptors
 * (TooManyFilesOpen) names the collection or index, not the table.
 */
static int
table_create(mf_catalog_t *cat, mf_sess_t *s, const mf_coll_t *c, const mf_index_t *ix, int kind, mf_error_t *err)
{
    const char *uri = ix ? ix->uri : c->uri;
    if (mf_storage_create(s, uri, mf_storage_table_config(cat->st, kind), err) == 0)
        return 0;
    char *at = err->code == MF_E_TooManyFilesOpen ? strstr(err->msg, uri) : NULL;
    if (at != NULL) {
        char label[400];
        table_label(c, ix, label, sizeof(label));
        msg_splice(err->msg, sizeof(err->msg), (size_t)(at - err->msg), strlen(uri), label);
    }
    return -1;
}

mf_coll_t *
mf_catalog_coll_find_pair(mf_catalog_t *cat, const char *db, const char *name, const char *db2, const char *name2,
                          mf_coll_t **second)
{
    int o = strcmp(db, db2);
    if (o == 0)
        o = strcmp(name, name2);
    mf_coll_t *first;
    if (o <= 0) {
        first = mf_catalog_coll_find(cat, db, name);
        *second = o == 0 ? first : mf_catalog_coll_find(cat, db2, name2);
    } else {
        *second = mf_catalog_coll_find(cat, db2, name2);
        first = mf_catalog_coll_find(cat, db, name);
    }
    return first;
}

bool
mf_catalog_lock_timed_out(void)
{
    return T.timed_out;
}

bson_t *
mf_index_set_spec(mf_index_t *ix, bson_t *spec)
{
    bson_t *old = ix->spec;
    ix->spec = spec;
    ix->expire_secs = mf_ttl_index_seconds(spec, &ix->expire_secs) ? ix->expire_secs : -1;
    return old;
}

/* Builds an mf_index_t from a spec and an ident. Returns NULL with err on a bad spec. */
static mf_index_t *
index_from_spec(const bson_t *spec, const char *ident, mf_error_t *err)
{
    bson_iter_t it;
    mf_index_t *ix = mf_calloc(1, sizeof(*ix));
    ix->since_ms = mf_now_ms();
    atomic_store(&ix->ttl_dirty_min, INT64_MIN); /* unknown: the TTL monitor scans it from the first Date */
    atomic_store(&ix->ttl_noted_due, INT64_MAX);

    (void)mf_index_set_spec(ix, bson_copy(spec)); /* ix had no spec */
    ix->ident = mf_strdup(ident);
    size_t ulen = strlen(ident) + 8;
    ix->uri = mf_malloc(ulen);
    snprintf(ix->uri, ulen, "table:%s", ident);
    if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it))
        ix->name = mf_strdup(bson_iter_utf8(&it, NULL));
    else
        ix->name = mf_strdup("?");
    if (bson_iter_init_find(&it, spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t key;
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&key, data, len) || mf_keypattern_parse(&key, &ix->kp, err) != 0) {
            index_free(ix);
            return NULL;
        }
    }
    if (bson_iter_init_find(&it, spec, "collation") &&
        mf_collation_from_value(bson_iter_value(&it), &ix->kp.collation, err) != 0) {
        index_free(ix);
        return NULL;
    }
    if (ix->kp.is_text && (ix->kp.text = mf_text_spec_new(spec, err)) == NULL) {
        index_free(ix);
        return NULL;
    }
    if (ix->kp.is_wildcard && bson_iter_init_find(&it, spec, "wildcardProjection") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        /* The spec's projection replaces the default one mf_keypattern_parse made (index/index_wild.c). */
        bson_t proj;
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&proj, data, len) || mf_keypattern_set_wildcard_projection(&ix->kp, &proj, err) != 0) {
            index_free(ix);
            return NULL;
        }
    }
    if (bson_iter_init_find(&it, spec, "min") && mf_value_is_number(bson_iter_value(&it)))
        ix->kp.geo_min = mf_value_as_double(bson_iter_value(&it)); /* a 2d index's range */
    if (bson_iter_init_find(&it, spec, "max") && mf_value_is_number(bson_iter_value(&it)))
        ix->kp.geo_max = mf_value_as_double(bson_iter_value(&it));
    if (bson_iter_init_find(&it, spec, "unique"))
        ix->unique = bson_iter_as_bool(&it);
    if (bson_iter_init_find(&it, spec, "prepareUnique"))
        ix->prepare_unique = bson_iter_as_bool(&it);
    if (bson_iter_init_find(&it, spec, "sparse"))
        ix->sparse = bson_iter_as_bool(&it);
    ix->is_id = ix->kp.nfields == 1 && strcmp(ix->kp.fields[0], "_id") == 0 &&
                (strcmp(ix->name, "_id_") == 0 ||
                 (bson_iter_init_find(&it, spec, "clustered") && bson_iter_as_bool(&it)));
    if (ix->is_id)
        ix->unique = true;
    ix->rid_in_key = !ix->unique; /* an entry saying ridInKey overrides (coll_from_bson) */
    ix->key_types = true;         /* keyFormat 3; an entry of an older format overrides (coll_from_bson) */
    if (bson_iter_init_find(&it, spec, "partialFilterExpression") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t pf;
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        /*
         * Compiled under the index's collation, under which it is matched
         * (mf_index_covers): a $in list is sorted for the collation that
         * will search it.
         */
        const mf_collation_t *saved = mf_collation_current();
        mf_collation_set_current(ix->kp.collation);
        if (bson_init_static(&pf, data, len))
            ix->partial = mf_matcher_new(&pf, err);
        mf_collation_set_current(saved);
        if (ix->partial == NULL) {
            index_free(ix);
            return NULL;
        }
    }
    return ix;
}

/* Serialises c's catalog entry into out (initialised here). */
static void
coll_to_bson(const mf_coll_t *c, bson_t *out)
{
    bson_t arr, child;
    char key[16];

    bson_init(out);
    BSON_APPEND_UTF8(out, "ns", c->ns);
    BSON_APPEND_UTF8(out, "db", c->db);
    BSON_APPEND_UTF8(out, "name", c->name);
    bson_append_binary(out, "uuid", -1, BSON_SUBTYPE_UUID, c->uuid, 16);
    BSON_APPEND_UTF8(out, "ident", c->ident);
    BSON_APPEND_DOCUMENT(out, "options", c->options);
    if (c->capped_exact)
        BSON_APPEND_BOOL(out, "cappedExact", true); /* options.size is not rounded again at load */
    BSON_APPEND_ARRAY_BEGIN(out, "indexes", &arr);
    for (int i = 0, n = 0; i < c->nindexes; i++) {
        if (c->indexes[i]->building)
            continue; /* stored when its build commits */
        snprintf(key, sizeof(key), "%d", n++);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &child);
        BSON_APPEND_DOCUMENT(&child, "spec", c->indexes[i]->spec);
        BSON_APPEND_UTF8(&child, "ident", c->indexes[i]->ident);
        BSON_APPEND_BOOL(&child, "multikey", atomic_load(&c->indexes[i]->multikey));
        if (atomic_load(&c->indexes[i]->multikey)) {
            bson_t mkp;
            char fk[16];
            BSON_APPEND_ARRAY_BEGIN(&child, "multikeyPaths", &mkp);
            for (int f = 0; f < c->indexes[i]->kp.nfields; f++) {
                snprintf(fk, sizeof(fk), "%d", f);
                BSON_APPEND_INT64(&mkp, fk, (int64_t)atomic_load(&c->indexes[i]->mk_paths[f]));
            }
            bson_append_array_end(&child, &mkp);
        }
        if (c->indexes[i]->rid_in_key && c->indexes[i]->unique)
            BSON_APPEND_BOOL(&child, "ridInKey", true);
        /* Decimals keyed exactly (index/keystring.c); an entry without it is read as format 1. */
        if (!c->indexes[i]->kp.legacy_decimals)
            BSON_APPEND_INT32(&child, "keyFormat", c->indexes[i]->key_types ? 3 : 2);
        bson_append_document_end(&arr, &child);
    }
    bson_append_array_end(out, &arr);
}

/* A new collection object: its lock, and the catalog's reference. */
static mf_coll_t *
coll_alloc(void)
{
    mf_coll_t *c = mf_calloc(1, sizeof(*c));
    pthread_rwlock_init(&c->lock, NULL);
    pthread_mutex_init(&c->ts_mu, NULL);
    c->ts_expire = -1;
    atomic_store(&c->refs, 1);
    return c;
}

static mf_coll_t *
coll_from_bson(const bson_t *doc, mf_error_t *err)
{
    bson_iter_t it, ai;
    mf_coll_t *c = coll_alloc();

    if (bson_iter_init_find(&it, doc, "db"))
        c->db = mf_strdup(bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, doc, "name"))
        c->name = mf_strdup(bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, doc, "ns"))
        c->ns = mf_strdup(bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, doc, "ident"))
        c->ident = mf_strdup(bson_iter_utf8(&it, NULL));
    if (bson_iter_init_find(&it, doc, "uuid"))
        uuid_of(&it, c->uuid);
    if (c->db == NULL || c->name == NULL || c->ns == NULL || c->ident == NULL) {
        coll_free(c);
        mf_err_set(err, MF_E_InternalError, "corrupt catalog entry");
        return NULL;
    }
    size_t ulen = strlen(c->ident) + 8;
    c->uri = mf_malloc(ulen);
    snprintf(c->uri, ulen, "table:%s", c->ident);
    if (bson_iter_init_find(&it, doc, "options") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        c->options = bson_new_from_data(data, len);
    } else {
        c->options = bson_new();
    }
    {
        parsed_opts_t po;
        mf_error_t perr;
        c->capped_exact = bson_iter_init_find(&it, doc, "cappedExact") && bson_iter_as_bool(&it);
        if (parse_options(c->options, c->capped_exact, false, &po, &perr) != 0)
            mf_log(MF_LOG_ERROR, "STORAGE", "collection %s: ignoring unusable options: %s", c->ns, perr.msg);
        else
            apply_options(c, &po);
    }
    if (bson_iter_init_find(&it, doc, "indexes") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai)) {
        while (bson_iter_next(&ai)) {
            bson_iter_t f;
            bson_t spec;
            const uint8_t *data;
            uint32_t len;
            const char *ident = NULL;
            bool multikey = false, rid_in_key = false, have_paths = false;
            uint32_t mk[MF_KP_MAX_FIELDS] = {0};
            int64_t key_format = 1; /* entries written before keyFormat existed hold format 1 keys */
            if (!BSON_ITER_HOLDS_DOCUMENT(&ai) || !bson_iter_recurse(&ai, &f))
                continue;
            bool have_spec = false;
            while (bson_iter_next(&f)) {
                if (strcmp(bson_iter_key(&f), "spec") == 0 && BSON_ITER_HOLDS_DOCUMENT(&f)) {
                    bson_iter_document(&f, &len, &data);
                    have_spec = bson_init_static(&spec, data, len);
                } else if (strcmp(bson_iter_key(&f), "ident") == 0 && BSON_ITER_HOLDS_UTF8(&f)) {
                    ident = bson_iter_utf8(&f, NULL);
                } else if (strcmp(bson_iter_key(&f), "multikey") == 0) {
                    multikey = bson_iter_as_bool(&f);
                } else if (strcmp(bson_iter_key(&f), "multikeyPaths") == 0 && BSON_ITER_HOLDS_ARRAY(&f)) {
                    bson_iter_t pi;
                    have_paths = bson_iter_recurse(&f, &pi);
                    for (int n = 0; have_paths && bson_iter_next(&pi) && n < MF_KP_MAX_FIELDS; n++)
                        mk[n] = BSON_ITER_HOLDS_NUMBER(&pi) ? (uint32_t)bson_iter_as_int64(&pi) : UINT32_MAX;
                } else if (strcmp(bson_iter_key(&f), "ridInKey") == 0) {
                    rid_in_key = bson_iter_as_bool(&f);
                } else if (strcmp(bson_iter_key(&f), "keyFormat") == 0 && BSON_ITER_HOLDS_NUMBER(&f)) {
                    key_format = bson_iter_as_int64(&f);
                }
            }
            if (!have_spec || ident == NULL || c->nindexes >= MF_MAX_INDEXES)
                continue;
            if (key_format > 3) {
                /* Keys this version cannot read or maintain: the entry is unreadable (left out, tables kept). */
                mf_err_set(err, MF_E_UnsupportedFormat, "an index of %s has key format %lld; this version reads "
                           "formats 1 to 3 only", c->ns, (long long)key_format);
                coll_free(c);
                return NULL;
            }
            mf_index_t *ix = index_from_spec(&spec, ident, err);
            if (ix == NULL) {
                coll_free(c);
                return NULL;
            }
            atomic_store(&ix->multikey, multikey);
            atomic_store(&ix->multikey_durable, multikey);
            for (int n = 0; multikey && n < ix->kp.nfields; n++) {
                /* An entry from before multikeyPaths: every component of every field may be an array. */
                uint32_t m = have_paths ? mk[n] : UINT32_MAX;
                atomic_store(&ix->mk_paths[n], m);
                atomic_store(&ix->mk_durable[n], m);
            }
            ix->rid_in_key = ix->rid_in_key || rid_in_key;
            ix->kp.legacy_decimals = key_format < 2;
            ix->key_types = key_format >= 3;
            c->indexes[c->nindexes++] = ix;
        }
    }
    return c;
}

/*
 * write_result: the outcome of one put or remove (removing: a missing key is
 * fine) on a catalog table: 0, MF_CONFLICT with err set (WriteConflict), or
 * -1 with err set.
 */
static int
write_result(int ret, bool removing, const char *what, const char *key, mf_error_t *err)
{
    if (ret == 0 || (removing && ret == MF_NOTFOUND))
        return 0;
    if (ret == MF_CONFLICT) {
        mf_err_write_conflict(err);
        return MF_CONFLICT;
    }
    return mf_err_set(err, MF_E_InternalError, "%s write failed for %s", what, key);
}

/*
 * entry_write: puts (entry != NULL) or removes ns's catalog entry inside the
 * session's current transaction. Returns 0, MF_CONFLICT (err set), or -1
 * with err.
 */
static int
entry_write(mf_sess_t *s, const char *ns, const bson_t *entry, mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;

    if (mf_cur_open(s, CATALOG_URI, &cur, err) != 0)
        return -1;
    if (entry)
        ret = mf_cur_put_bytes(cur, ns, strlen(ns), bson_get_data(entry), entry->len);
    else
        ret = mf_cur_remove_bytes(cur, ns, strlen(ns));
    mf_cur_close(cur);
    return write_result(ret, entry == NULL, "catalog", ns, err);
}

/* sizes_write: puts (count >= 0) or removes (count < 0) ident's stored sizes in the current transaction. */
static int
sizes_write(mf_sess_t *s, const char *ident, int64_t count, int64_t size, mf_error_t *err)
{
    mf_cur_t *cur;
    bson_t v;
    int ret;

    if (mf_cur_open(s, SIZES_URI, &cur, err) != 0)
        return -1;
    if (count >= 0) {
        bson_init(&v);
        BSON_APPEND_INT64(&v, "count", count);
        BSON_APPEND_INT64(&v, "size", size);
        ret = mf_cur_put_bytes(cur, ident, strlen(ident), bson_get_data(&v), v.len);
        bson_destroy(&v);
    } else {
        ret = mf_cur_remove_bytes(cur, ident, strlen(ident));
    }
    mf_cur_close(cur);
    return write_result(ret, count < 0, "size", ident, err);
}

/* ddl_begin / ddl_end: one DDL transaction on this thread's session; ddl_end commits with sync when rc is 0. */
static int
ddl_begin(mf_catalog_t *cat, mf_sess_t **s, mf_error_t *err)
{
    *s = mf_storage_session(cat->st);
    if (cat->ddl_gate != NULL && cat->ddl_gate(cat->ddl_gate_arg, err) != 0)
        return -1;
    if (mf_txn_begin(*s, err) == 0)
        return 0;
    if (cat->ddl_gate_done != NULL)
        cat->ddl_gate_done(cat->ddl_gate_arg);
    return -1;
}

void
mf_catalog_set_ddl_gate(mf_catalog_t *cat, int (*fn)(void *arg, mf_error_t *err), void (*done)(void *arg), void *arg)
{
    cat->ddl_gate_arg = arg;
    cat->ddl_gate_done = done;
    cat->ddl_gate = fn;
}

static int
ddl_end(mf_catalog_t *cat, mf_sess_t *s, int rc, mf_error_t *err)
{
    if (rc != 0)
        mf_txn_abort(s);
    else
        rc = mf_txn_commit(s, true, err); /* DDL is always made durable before it is acknowledged */
    if (cat->ddl_gate_done != NULL)
        cat->ddl_gate_done(cat->ddl_gate_arg);
    return rc != 0 ? -1 : 0;
}

/* After an entry holding ix's flags as they are now committed: they are durable. */
static void
index_flags_durable(mf_index_t *ix)
{
    if (!atomic_load(&ix->multikey))
        return;
    for (int f = 0; f < ix->kp.nfields; f++)
        atomic_fetch_or(&ix->mk_durable[f], atomic_load(&ix->mk_paths[f]));
    atomic_store(&ix->multikey_durable, true);
}

/* After c's entry committed (write lock held, so no writer is in flight): its multikey flags are durable. */
static void
mark_flags_durable(mf_coll_t *c)
{
    for (int i = 0; i < c->nindexes; i++)
        index_flags_durable(c->indexes[i]);
}

int
mf_catalog_coll_persist(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err)
{
    bson_t entry;
    parsed_opts_t po;
    mf_sess_t *s;
    int ret;

    if (parse_options(c->options, c->capped_exact, false, &po, err) != 0)
        return -1;
    /* A view's new definition replaces its system.views document in the same transaction. */
    mf_coll_t *sv = NULL;
    if (po.view && views_coll(cat, c->db, true, &sv, err) != 0) {
        parsed_opts_free(&po);
        return -1;
    }
    coll_to_bson(c, &entry);
    ret = ddl_begin(cat, &s, err);
    if (ret == 0) {
        ret = entry_write(s, c->ns, &entry, err);
        if (ret == 0 && sv != NULL)
            ret = views_def_put(s, sv, c, err);
        ret = ddl_end(cat, s, ret, err);
    }
    bson_destroy(&entry);
    if (ret == 0) {
        apply_options(c, &po);
        mark_flags_durable(c);
    } else {
        parsed_opts_free(&po);
    }
    atomic_fetch_add(&cat->version, 1); /* also on failure: the caller may have changed c in memory first */
    return ret;
}

int
mf_catalog_coll_resize_capped(mf_catalog_t *cat, mf_coll_t *c, int64_t size, int64_t max, mf_error_t *err)
{
    bson_t *opts = bson_new(), *old = c->options;
    bool old_exact = c->capped_exact;
    bson_iter_t it;

    bson_iter_init(&it, old);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if ((size >= 0 && strcmp(k, "size") == 0) || (max >= 0 && strcmp(k, "max") == 0))
            continue;
        bson_append_value(opts, k, -1, bson_iter_value(&it));
    }
    if (size >= 0)
        BSON_APPEND_INT64(opts, "size", size);
    if (max >= 0)
        BSON_APPEND_INT64(opts, "max", max);
    c->options = opts;
    c->capped_exact = old_exact || size >= 0;
    if (mf_catalog_coll_persist(cat, c, err) != 0) {
        c->options = old;
        c->capped_exact = old_exact;
        bson_destroy(opts);
        return -1;
    }
    bson_destroy(old);
    return 0;
}

/*
 * What one transaction's entry writes said of one index (mark_multikey):
 * the paths it wrote, made durable when the transaction commits.
 */
typedef struct mk_note {
    mf_index_t *ix;
    uint32_t written[MF_KP_MAX_FIELDS];
} mk_note_t;

/* Runs when a transaction that wrote a multikey flag ends (on its thread, catalog lock still held if committed). */
static void
multikey_txn_end(void *arg, bool committed)
{
    mk_note_t *n = arg;
    /* Only a commit touches ix: an abort may come after the lock was released. */
    if (committed) {
        for (int f = 0; f < n->ix->kp.nfields; f++)
            atomic_fetch_or(&n->ix->mk_durable[f], n->written[f]);
        atomic_store(&n->ix->multikey_durable, true);
    }
    free(n);
}

static bool
note_of(const void *arg, const void *ix)
{
    return ((const mk_note_t *)arg)->ix == ix;
}

/* Whether every bit of mk is in have (nf fields). */
static bool
mk_covered(const uint32_t *mk, const uint32_t *have, int nf)
{
    for (int f = 0; f < nf; f++)
        if (mk[f] & ~have[f])
            return false;
    return true;
}

int
mf_catalog_index_mark_multikey(mf_sess_t *s, mf_coll_t *c, mf_index_t *ix, const uint32_t *mk, mf_error_t *err)
{
    bson_t entry;
    int ret, nf = ix->kp.nfields;
    uint32_t written[MF_KP_MAX_FIELDS], durable[MF_KP_MAX_FIELDS];

    /* In memory first: readers planning now de-duplicate and see the paths (conservative if this aborts). */
    for (int f = 0; f < nf; f++)
        atomic_fetch_or(&ix->mk_paths[f], mk[f]);
    atomic_store(&ix->multikey, true);
    if (atomic_load(&ix->multikey_durable)) {
        for (int f = 0; f < nf; f++)
            durable[f] = atomic_load(&ix->mk_durable[f]);
        if (mk_covered(mk, durable, nf))
            return 0;
    }
    /* What the entry written now holds at least (it reads the paths again, perhaps with more bits). */
    for (int f = 0; f < nf; f++)
        written[f] = atomic_load(&ix->mk_paths[f]);
    if (!mf_txn_active(s)) {
        /* Every writer runs in a transaction; be safe anyway: a transaction of its own. */
        if (mf_txn_begin(s, err) != 0)
            return -1;
        coll_to_bson(c, &entry);
        ret = entry_write(s, c->ns, &entry, err);
        bson_destroy(&entry);
        if (ret != 0) {
            mf_txn_abort(s);
            return ret;
        }
        if (mf_txn_commit(s, true, err) != 0)
            return -1;
        for (int f = 0; f < nf; f++)
            atomic_fetch_or(&ix->mk_durable[f], written[f]);
        atomic_store(&ix->multikey_durable, true);
        return 0;
    }
    /* Once per transaction, unless its document has paths the entry this transaction wrote does not. */
    mk_note_t *n = mf_txn_on_end_find(s, multikey_txn_end, note_of, ix);
    if (n != NULL && mk_covered(mk, n->written, nf))
        return 0;
    coll_to_bson(c, &entry);
    ret = entry_write(s, c->ns, &entry, err);
    bson_destroy(&entry);
    if (n == NULL) {
        n = mf_calloc(1, sizeof(*n));
        n->ix = ix;
        (void)mf_txn_on_end(s, multikey_txn_end, n);
    }
    memcpy(n->written, written, sizeof(written));
    return ret;
}

static int
coll_cmp(const void *a, const void *b)
{
    return strcmp((*(mf_coll_t *const *)a)->ns, (*(mf_coll_t *const *)b)->ns);
}

/* Reports a DDL change to the observers (catalog.h: after it committed, write lock held). */
static void
report_ddl(mf_catalog_t *cat, mf_ddl_kind_t kind, const mf_coll_t *c, const char *ns, const char *to_ns,
           const bson_t *detail)
{
    mf_ddl_event_t ev = {kind, ns ? ns : c->ns, to_ns, c->uuid, detail};
    atomic_fetch_add(&cat->version, 1);
    mf_observers_ddl(cat->observers, &ev);
}

uint64_t
mf_catalog_version(mf_catalog_t *cat)
{
    return atomic_load(&cat->version);
}

bool
mf_catalog_has_collations(mf_catalog_t *cat)
{
    return atomic_load_explicit(&cat->collated, memory_order_relaxed);
}

static bool
is_system_views(const mf_coll_t *c)
{
    return strcmp(c->name, SYSTEM_VIEWS) == 0;
}

/*
 * The observers c's document writes report to: none for system.views, whose
 * documents only mirror views (the view's DDL event carries its definition:
 * the oplog, change streams and opcounters see that, as mongod's see the
 * view catalog's change and not a user write).
 */
static mf_observers_t *
observers_for(const mf_catalog_t *cat, const mf_coll_t *c)
{
    return is_system_views(c) ? NULL : cat->observers;
}

/* Adds c to the map (taking the map lock: lookups never see it half-added). */
static void
catalog_insert(mf_catalog_t *cat, mf_coll_t *c)
{
    c->observers = observers_for(cat, c);
    if (c->options != NULL && bson_has_field(c->options, "collation"))
        atomic_store(&cat->collated, true);
    pthread_rwlock_wrlock(&cat->lock);
    if (cat->ncolls == cat->cap) {
        cat->cap = cat->cap ? cat->cap * 2 : 16;
        cat->colls = mf_realloc(cat->colls, (size_t)cat->cap * sizeof(*cat->colls));
    }
    cat->colls[cat->ncolls++] = c;
    qsort(cat->colls, (size_t)cat->ncolls, sizeof(*cat->colls), coll_cmp);
    atomic_fetch_add(&cat->version, 1);
    pthread_rwlock_unlock(&cat->lock);
}

/* Removes c from the map and marks it dropped (those waiting for its lock see that). */
static void
catalog_remove(mf_catalog_t *cat, mf_coll_t *c)
{
    pthread_rwlock_wrlock(&cat->lock);
    for (int i = 0; i < cat->ncolls; i++) {
        if (cat->colls[i] == c) {
            memmove(&cat->colls[i], &cat->colls[i + 1], (size_t)(cat->ncolls - i - 1) * sizeof(*cat->colls));
            cat->ncolls--;
            break;
        }
    }
    c->dropped = true;
    atomic_fetch_add(&cat->version, 1);
    pthread_rwlock_unlock(&cat->lock);
}

/* Maps a cursor status other than 0 / MF_NOTFOUND to err (storage errors surface, never read as the end). */
static int
scan_error(int ret, const char *what, const char *name, mf_error_t *err)
{
    if (ret == MF_CONFLICT)
        return mf_err_set(err, MF_E_WriteConflict, "write conflict while reading %s of %s", what, name);
    return mf_err_set(err, MF_E_InternalError, "storage error while reading %s of %s", what, name);
}

/*
 * coll_load_stats: sets a freshly loaded collection's next record id (one
 * step back from the end of its record table) and its count and size (from
 * sizes, the _mf_sizes cursor; a full count only when it has no entry, as
 * for data written before sizes were stored). Returns 0 or -1 with err.
 */
static int
coll_load_stats(mf_sess_t *s, mf_cur_t *sizes, mf_coll_t *c, bool recount, mf_error_t *err)
{
    mf_cur_t *cur;
    int64_t count = 0, size = 0;
    int ret;

    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    ret = mf_cur_prev(cur);
    if (ret == 0)
        atomic_store(&c->next_rid, mf_cur_rid(cur) + 1);
    else if (ret == MF_NOTFOUND)
        atomic_store(&c->next_rid, 1);
    else
        goto err_close;
    ret = recount ? MF_NOTFOUND : mf_cur_search_bytes(sizes, c->ident, strlen(c->ident));
    if (ret == 0) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        bson_iter_t it;
        mf_cur_value(sizes, &v, &len);
        if (bson_init_static(&doc, v, len)) {
            if (bson_iter_init_find(&it, &doc, "count"))
                count = bson_iter_as_int64(&it);
            if (bson_iter_init_find(&it, &doc, "size"))
                size = bson_iter_as_int64(&it);
        }
    } else if (ret == MF_NOTFOUND) {
        mf_cur_reset(cur);
        while ((ret = mf_cur_next(cur)) == 0) {
            const uint8_t *v;
            size_t len;
            mf_cur_value(cur, &v, &len);
            count++;
            size += (int64_t)len;
        }
        if (ret != MF_NOTFOUND)
            goto err_close;
        if (!recount)
            mf_log(MF_LOG_INFO, "STORAGE", "collection %s: no stored size, counted %lld documents", c->ns,
                   (long long)count);
        /* Make the next flush store them, so the next start need not count again. */
        c->flushed_count = -1;
    } else {
        mf_cur_close(cur);
        return scan_error(ret, "the stored size", c->ns, err);
    }
    mf_cur_close(cur);
    atomic_store(&c->approx_count, count < 0 ? 0 : count);
    atomic_store(&c->approx_size, size < 0 ? 0 : size);
    if (c->flushed_count != -1) {
        c->flushed_count = count;
        c->flushed_size = size;
    }
    return 0;

err_close:
    mf_cur_close(cur);
    return scan_error(ret, "the records", c->ns, err);
}

typedef struct name_list {
    char **v;
    int n, cap;
} name_list_t;

static void
name_list_add(void *arg, const char *name)
{
    name_list_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = mf_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = mf_strdup(name);
}

static void
name_list_free(name_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
}

/* Is uri the record table or an index table of some loaded collection? */
static bool
catalog_names_uri(mf_catalog_t *cat, const char *uri)
{
    for (int i = 0; i < cat->ncolls; i++) {
        mf_coll_t *c = cat->colls[i];
        if (strcmp(c->uri, uri) == 0)
            return true;
        for (int k = 0; k < c->nindexes; k++) {
            if (strcmp(c->indexes[k]->uri, uri) == 0)
                return true;
        }
    }
    return false;
}

/*
 * drop_orphans: drops every coll-* / index-* table no entry names: tables of
 * a DDL that crashed before its entry committed, and drops that were still
 * pending at a crash (mf_storage_drop queues busy tables in memory only).
 */
static int
drop_orphans(mf_catalog_t *cat, mf_error_t *err)
{
    name_list_t l = {0};
    int rc = 0;

    if (mf_storage_list_tables(cat->st, "table:coll-", name_list_add, &l, err) != 0 ||
        mf_storage_list_tables(cat->st, "table:index-", name_list_add, &l, err) != 0) {
        rc = -1;
        goto out;
    }
    for (int i = 0; i < l.n; i++) {
        if (catalog_names_uri(cat, l.v[i]))
            continue;
        mf_log(MF_LOG_INFO, "STORAGE", "dropping table %s: no catalog entry names it", l.v[i]);
        mf_storage_drop(cat->st, l.v[i]);
    }
out:
    name_list_free(&l);
    return rc;
}

static int flush_sizes(mf_catalog_t *cat, bool durable, bool try_lock, mf_error_t *err);

/*
 * The clean-shutdown mark, a key of the sizes table no ident can take
 * (idents are "coll-<hex>"): written durably by mf_catalog_close after the
 * last size flush, removed durably by mf_catalog_open once it has read it.
 */
#define CLEAN_MARK "~clean-shutdown"

static int
clean_mark(mf_catalog_t *cat, bool set, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);
    if (mf_txn_begin(s, err) != 0)
        return -1;
    if (set ? sizes_write(s, CLEAN_MARK, 1, 0, err) != 0 : sizes_write(s, CLEAN_MARK, -1, 0, err) != 0) {
        mf_txn_abort(s);
        return -1;
    }
    return mf_txn_commit(s, true, err);
}

/*
 * The flusher's once-a-second size flush. It only tries the catalog lock: a
 * long DDL (an index build) must not stall the flusher's log syncs; the
 * sizes are written at the next tick instead.
 */
static void
sizes_periodic(void *arg)
{
    mf_catalog_t *cat = arg;
    mf_error_t err;
    if (flush_sizes(cat, false, true, &err) < 0 && !cat->flush_error_logged) {
        cat->flush_error_logged = true;
        mf_log(MF_LOG_WARN, "STORAGE", "storing collection sizes failed (will retry): %s", err.msg);
    }
}

int
mf_catalog_flush_sizes(mf_catalog_t *cat, bool durable, mf_error_t *err)
{
    return flush_sizes(cat, durable, false, err);
}

/* flush_sizes: see mf_catalog_flush_sizes; with try_lock, returns 1 (nothing done) if the lock is busy. */
static int
flush_sizes(mf_catalog_t *cat, bool durable, bool try_lock, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);
    int rc = 0;
    int64_t *vals = NULL;

    pthread_mutex_lock(&cat->flush_lock);
    if (try_lock) {
        if (pthread_rwlock_tryrdlock(&cat->lock) != 0) {
            pthread_mutex_unlock(&cat->flush_lock);
            return 1;
        }
    } else {
        pthread_rwlock_rdlock(&cat->lock);
    }
    vals = mf_calloc((size_t)cat->ncolls * 2 + 1, sizeof(*vals));
    bool any = false;
    for (int i = 0; i < cat->ncolls && !any; i++) {
        mf_coll_t *c = cat->colls[i];
        any = atomic_load(&c->approx_count) != c->flushed_count || atomic_load(&c->approx_size) != c->flushed_size;
    }
    if (!any)
        goto out;
    if (mf_txn_begin(s, err) != 0) {
        rc = -1;
        goto out;
    }
    for (int i = 0; i < cat->ncolls && rc == 0; i++) {
        mf_coll_t *c = cat->colls[i];
        vals[2 * i] = atomic_load(&c->approx_count);
        vals[2 * i + 1] = atomic_load(&c->approx_size);
        if (vals[2 * i] == c->flushed_count && vals[2 * i + 1] == c->flushed_size)
            continue;
        rc = sizes_write(s, c->ident, vals[2 * i] < 0 ? 0 : vals[2 * i], vals[2 * i + 1], err) != 0 ? -1 : 0;
    }
    if (rc != 0) {
        mf_txn_abort(s);
        goto out;
    }
    if (mf_txn_commit(s, durable, err) != 0) {
        rc = -1;
        goto out;
    }
    for (int i = 0; i < cat->ncolls; i++) {
        cat->colls[i]->flushed_count = vals[2 * i];
        cat->colls[i]->flushed_size = vals[2 * i + 1];
    }
out:
    pthread_rwlock_unlock(&cat->lock);
    mf_storage_session_release(s);
    pthread_mutex_unlock(&cat->flush_lock);
    free(vals);
    return rc;
}

void
mf_catalog_coll_set_sizes(mf_coll_t *c, int64_t count, int64_t size)
{
    atomic_store(&c->approx_count, count);
    atomic_store(&c->approx_size, size);
}

static int views_mend(mf_catalog_t *cat, mf_error_t *err);

int
mf_catalog_open(mf_storage_t *st, mf_catalog_t **out, mf_error_t *err)
{
    mf_catalog_t *cat = mf_calloc(1, sizeof(*cat));
    mf_sess_t *s = mf_storage_session(st);
    mf_cur_t *cur = NULL, *sizes = NULL;
    int ret, unreadable = 0;

    cat->st = st;
    pthread_rwlock_init(&cat->lock, NULL);
    pthread_mutex_init(&cat->ddl_mu, NULL);
    pthread_mutex_init(&cat->flush_lock, NULL);
    if (mf_storage_create(s, CATALOG_URI, "key_format=u,value_format=u", err) != 0 ||
        mf_storage_create(s, SIZES_URI, "key_format=u,value_format=u", err) != 0 ||
        mf_cur_open(s, CATALOG_URI, &cur, err) != 0)
        goto err_free;
    while ((ret = mf_cur_next(cur)) == 0) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        mf_cur_value(cur, &v, &len);
        if (!bson_init_static(&doc, v, len)) {
            mf_log(MF_LOG_ERROR, "STORAGE", "skipping unreadable catalog entry (not BSON)");
            unreadable++;
            continue;
        }
        mf_coll_t *c = coll_from_bson(&doc, err);
        if (c == NULL) {
            mf_log(MF_LOG_ERROR, "STORAGE", "skipping unreadable catalog entry: %s", err->msg);
            unreadable++;
            continue;
        }
        catalog_insert(cat, c);
    }
    mf_cur_close(cur);
    cur = NULL;
    if (ret != MF_NOTFOUND) {
        scan_error(ret, "the catalog", CATALOG_URI, err);
        goto err_free;
    }
    if (mf_cur_open(s, SIZES_URI, &sizes, err) != 0)
        goto err_free;
    /*
     * Sizes are stored once a second, so after a crash they lag the records
     * WiredTiger recovered (mongod's sizeStorer drifts the same way until a
     * validate). A clean close leaves a mark (mf_catalog_close); without it
     * every collection is counted here, before anything is served.
     */
    bool clean = mf_cur_search_bytes(sizes, CLEAN_MARK, strlen(CLEAN_MARK)) == 0;
    bool recount = !clean && cat->ncolls > 0;
    int64_t recount_start = mf_mono_ms(), recounted = 0;
    mf_cur_reset(sizes);
    for (int i = 0, waited = 0; i < cat->ncolls; i++) {
        while (coll_load_stats(s, sizes, cat->colls[i], recount, err) != 0) {
            /*
             * More collections than files this process may open (after a
             * crash, recovery has just opened every table it replayed): the
             * storage closes idle tables under that pressure, so wait for
             * them (the cursors of this session released first) instead of
             * failing the start, for a minute in all.
             */
            if (err->code != MF_E_TooManyFilesOpen || waited >= LOAD_FDS_WAIT_MS)
                goto err_free;
            if (waited == 0)
                mf_log(MF_LOG_WARN, "STORAGE", "loading the catalog waits for idle tables to close: %s", err->msg);
            mf_cur_close(sizes);
            sizes = NULL;
            mf_storage_session_release(s);
            struct timespec ts = {0, 100 * 1000000L};
            nanosleep(&ts, NULL);
            waited += 100;
            if (mf_cur_open(s, SIZES_URI, &sizes, err) != 0)
                goto err_free;
        }
    }
    mf_cur_close(sizes);
    sizes = NULL;
    mf_storage_session_release(s);
    if (recount) {
        for (int i = 0; i < cat->ncolls; i++)
            recounted += atomic_load(&cat->colls[i]->approx_count);
        mf_log(MF_LOG_INFO, "STORAGE",
               "not shut down cleanly: collection sizes counted again (%d collections, %lld documents, %lld ms)",
               cat->ncolls, (long long)recounted, (long long)(mf_mono_ms() - recount_start));
        if (flush_sizes(cat, true, false, err) < 0)
            goto err_free;
    }
    /* The mark is consumed: a crash from here on must count again. */
    if (clean && clean_mark(cat, false, err) != 0)
        goto err_free;
    /* An unreadable entry may name tables: then nothing counts as orphaned (never drop data on a guess). */
    if (unreadable > 0)
        mf_log(MF_LOG_WARN, "STORAGE", "%d unreadable catalog entries: not dropping unnamed tables", unreadable);
    else if (drop_orphans(cat, err) != 0)
        goto err_free;
    if (views_mend(cat, err) != 0)
        goto err_free;
    mf_log(MF_LOG_INFO, "STORAGE", "catalog loaded: %d collections", cat->ncolls);
    mf_storage_set_periodic(st, sizes_periodic, cat);
    *out = cat;
    return 0;

err_free:
    mf_log(MF_LOG_ERROR, "STORAGE", "cannot load the catalog: %s", err->msg);
    mf_cur_close(sizes);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    for (int i = 0; i < cat->ncolls; i++)
        coll_free(cat->colls[i]);
    free(cat->colls);
    pthread_rwlock_destroy(&cat->lock);
    pthread_mutex_destroy(&cat->ddl_mu);
    pthread_mutex_destroy(&cat->flush_lock);
    free(cat);
    return -1;
}

void
mf_catalog_close(mf_catalog_t *cat)
{
    mf_error_t err;

    if (cat == NULL)
        return;
    mf_storage_set_periodic(cat->st, NULL, NULL);
    if (mf_catalog_flush_sizes(cat, true, &err) != 0)
        mf_log(MF_LOG_WARN, "STORAGE", "storing collection sizes at shutdown failed: %s", err.msg);
    else if (clean_mark(cat, true, &err) != 0)
        mf_log(MF_LOG_WARN, "STORAGE", "marking the clean shutdown failed (the next start counts again): %s", err.msg);
    for (int i = 0; i < cat->ncolls; i++)
        coll_free(cat->colls[i]);
    free(cat->colls);
    pthread_rwlock_destroy(&cat->lock);
    pthread_mutex_destroy(&cat->ddl_mu);
    pthread_mutex_destroy(&cat->flush_lock);
    free(cat);
}

void
mf_catalog_set_observers(mf_catalog_t *cat, mf_observers_t *obs)
{
    cat->observers = obs;
    for (int i = 0; i < cat->ncolls; i++)
        cat->colls[i]->observers = observers_for(cat, cat->colls[i]);
}

mf_observers_t *
mf_catalog_observers(mf_catalog_t *cat)
{
    return cat->observers;
}

mf_storage_t *
mf_catalog_storage(mf_catalog_t *cat)
{
    return cat->st;
}






mf_index_t *
mf_coll_index_by_name(mf_coll_t *c, const char *name)
{
    for (int i = 0; i < c->nindexes; i++) {
        if (strcmp(c->indexes[i]->name, name) == 0)
            return c->indexes[i];
    }
    return NULL;
}

/* mf_key_pattern_equal: see catalog.h. */
bool
mf_key_pattern_equal(const bson_t *a, const bson_t *b)
{
    bson_iter_t x, y;
    if (!bson_iter_init(&x, a) || !bson_iter_init(&y, b))
        return false;
    for (;;) {
        bool nx = bson_iter_next(&x), ny = bson_iter_next(&y);
        if (nx != ny)
            return false;
        if (!nx)
            return true;
        if (strcmp(bson_iter_key(&x), bson_iter_key(&y)) != 0)
            return false;
        const bson_value_t *vx = bson_iter_value(&x), *vy = bson_iter_value(&y);
        if (mf_value_is_number(vx) && mf_value_is_number(vy)) {
            if (mf_value_cmp(vx, vy) != 0)
                return false;
        } else if (vx->value_type == BSON_TYPE_UTF8 && vy->value_type == BSON_TYPE_UTF8) {
            if (vx->value.v_utf8.len != vy->value.v_utf8.len ||
                memcmp(vx->value.v_utf8.str, vy->value.v_utf8.str, vx->value.v_utf8.len) != 0)
                return false;
        } else {
            return false; /* a stored key pattern holds only numbers and strings */
        }
    }
}

int
mf_coll_indexes_by_key(mf_coll_t *c, const bson_t *kp, bool ready_only, mf_index_t **first, mf_index_t **second)
{
    int n = 0;
    *first = *second = NULL;
    for (int i = 0; i < c->nindexes; i++) {
        bson_t key;
        if ((ready_only && c->indexes[i]->building) || !mf_index_spec_key(c->indexes[i]->spec, &key) ||
            !mf_key_pattern_equal(&key, kp))
            continue;
        if (n == 0)
            *first = c->indexes[i];
        else if (n == 1)
            *second = c->indexes[i];
        n++;
    }
    return n;
}

bool
mf_catalog_db_name_ok(const char *db, size_t len, bool dollar_ok)
{
    if (len == 0 || len >= 64)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = db[i];
        if (ch == '/' || ch == '\\' || ch == '.' || ch == ' ' || ch == '"' || (ch == '$' && !dollar_ok))
            return false;
    }
    return true;
}

int
mf_catalog_check_db_name(const char *db, mf_error_t *err)
{
    size_t n = strlen(db);
    /* Names must be valid UTF-8: drivers decode them in listDatabases replies. */
    if (!mf_catalog_db_name_ok(db, n, false) || !bson_utf8_validate(db, n, false))
        return mf_err_set(err, MF_E_InvalidNamespace, "Invalid database name: '%s'", db);
    return 0;
}

int
mf_catalog_check_coll_name(const char *db, const char *name, mf_error_t *err)
{
    if (name[0] == '\0')
        return mf_err_set(err, MF_E_InvalidNamespace, "Invalid namespace specified '%s.'", db);
    if (strchr(name, '$') != NULL || name[0] == '.' || !bson_utf8_validate(name, strlen(name), false))
        return mf_err_set(err, MF_E_InvalidNamespace, "Invalid collection name: %s", name);
    if (strlen(db) + 1 + strlen(name) > 255)
        return mf_err_set(err, MF_E_InvalidNamespace, "Fully qualified namespace is too long. Namespace: %s.%s Max: 255",
                          db, name);
    return 0;
}

/*
 * Builds the _id index spec: {v: 2, key: {_id: 1}, name: "_id_"}, or for a
 * clustered collection (options.clusteredIndex, already normalised by the
 * command layer) that index's name with unique: true, clustered: true, as
 * listIndexes shows it. mayfly keeps a clustered collection's documents in
 * record-id order like any other and its _id index as this index; what
 * makes it clustered to a client (the spec, TTL on _id through the
 * collection's expireAfterSeconds) is all there.
 */
static void
id_index_spec(bson_t *spec, const bson_t *options)
{
    bson_t key;
    bson_iter_t it, ci;
    const char *name = "_id_";
    bool clustered = options != NULL && bson_iter_init_find(&it, options, "clusteredIndex");
    if (clustered && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &ci) && bson_iter_find(&ci, "name") &&
        BSON_ITER_HOLDS_UTF8(&ci))
        name = bson_iter_utf8(&ci, NULL);
    bson_init(spec);
    BSON_APPEND_INT32(spec, "v", 2);
    BSON_APPEND_DOCUMENT_BEGIN(spec, "key", &key);
    BSON_APPEND_INT32(&key, "_id", 1);
    bson_append_document_end(spec, &key);
    BSON_APPEND_UTF8(spec, "name", name);
    if (clustered) {
        BSON_APPEND_BOOL(spec, "unique", true);
        BSON_APPEND_BOOL(spec, "clustered", true);
    }
    /* The collection's default collation is its _id index's too (as mongod), so _id queries under it use the index. */
    if (options != NULL && bson_iter_init_find(&it, options, "collation") && BSON_ITER_HOLDS_DOCUMENT(&it))
        bson_append_value(spec, "collation", -1, bson_iter_value(&it));
}

static mf_index_t *
new_index(mf_coll_t *c, const bson_t *spec, mf_error_t *err)
{
    char hex[33], ident[64];
    random_hex(hex, 8);
    snprintf(ident, sizeof(ident), "index-%s", hex);
    mf_index_t *ix = index_from_spec(spec, ident, err);
    (void)c;
    return ix;
}

/* ---------- system.views ----------
 *
 * MongoDB keeps a database's view definitions as the documents of its
 * <db>.system.views collection (durable_view_catalog.cpp, view_catalog.cpp
 * _upsertIntoCatalog): {_id: "<db>.<view>", viewOn, pipeline} plus
 * collation when the view has one. mayfly's views are catalog entries (reads
 * resolve them from memory); system.views is kept as their mirror, a real
 * collection, so find, aggregate, count and listCollections show what
 * mongod's show. It is created with the database's first view and kept
 * after its last (mongod's getOrCreateCollection; only a drop removes it),
 * and each view's document is written in the same DDL transaction as the
 * view's entry, so the two never disagree after a crash. Dropping
 * system.views drops every view of its database in one transaction (mongod
 * clears its view catalog when system.views goes). mf_catalog_open mends a
 * database whose mirror is missing or differs (data written before it
 * existed). A client never writes it (crud.h: 73 "cannot write to").
 */

/* view_def: v's definition as mongod's system.views holds it (out initialised here). */
static void
view_def(const mf_coll_t *v, bson_t *out)
{
    bson_iter_t it;
    bson_t empty;
    bson_init(out);
    BSON_APPEND_UTF8(out, "_id", v->ns);
    if (v->options != NULL && bson_iter_init_find(&it, v->options, "viewOn"))
        bson_append_value(out, "viewOn", 6, bson_iter_value(&it));
    if (v->options != NULL && bson_iter_init_find(&it, v->options, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_append_value(out, "pipeline", 8, bson_iter_value(&it));
    } else {
        BSON_APPEND_ARRAY_BEGIN(out, "pipeline", &empty);
        bson_append_array_end(out, &empty);
    }
    if (v->options != NULL && bson_iter_init_find(&it, v->options, "collation") && BSON_ITER_HOLDS_DOCUMENT(&it))
        bson_append_value(out, "collation", 9, bson_iter_value(&it));
}

/*
 * view_doc_id: the current document of cur, a cursor on system.views, in *d
 * (static: valid until the cursor moves; empty when it is not BSON), and its
 * _id, the view's namespace, or NULL when it has no string _id.
 */
static const char *
view_doc_id(mf_cur_t *cur, bson_t *d)
{
    const uint8_t *v;
    size_t len;
    bson_iter_t it;

    mf_cur_value(cur, &v, &len);
    if (!bson_init_static(d, v, len)) {
        bson_init(d);
        return NULL;
    }
    if (!bson_iter_init_find(&it, d, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

/*
 * views_def_find: the document of sv whose _id is ns, read in s's
 * transaction: 0 with *rid and *doc (a copy the caller destroys),
 * MF_NOTFOUND, or -1 with err. A scan: a database has few views.
 */
static int
views_def_find(mf_sess_t *s, mf_coll_t *sv, const char *ns, int64_t *rid, bson_t *doc, mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;

    if (mf_cur_open(s, sv->uri, &cur, err) != 0)
        return -1;
    while ((ret = mf_cur_next(cur)) == 0) {
        bson_t d;
        const char *id = view_doc_id(cur, &d);
        if (id == NULL || strcmp(id, ns) != 0)
            continue;
        *rid = mf_cur_rid(cur);
        bson_copy_to(&d, doc);
        break;
    }
    mf_cur_close(cur);
    if (ret == 0 || ret == MF_NOTFOUND)
        return ret;
    return scan_error(ret, "the view definitions", sv->ns, err);
}

/*
 * views_def_write: in s's transaction, makes sv hold def as its document
 * with _id ns, or none when def is NULL. Returns 0, MF_CONFLICT or -1 with
 * err.
 */
static int
views_def_write(mf_sess_t *s, mf_coll_t *sv, const char *ns, const bson_t *def, mf_error_t *err)
{
    int64_t rid = 0;
    bson_t old;
    int ret = views_def_find(s, sv, ns, &rid, &old, err);

    if (ret == MF_NOTFOUND) {
        ret = def != NULL ? mf_coll_insert(s, sv, def, NULL, err) : 0;
    } else if (ret == 0) {
        if (def == NULL)
            ret = mf_coll_remove(s, sv, rid, &old, err);
        else if (!bson_equal(&old, def))
            ret = mf_coll_replace(s, sv, rid, &old, def, err);
        bson_destroy(&old);
    }
    if (ret == MF_CONFLICT)
        mf_err_write_conflict(err);
    return ret;
}

/* views_def_put: views_def_write of view v's current definition. */
static int
views_def_put(mf_sess_t *s, mf_coll_t *sv, const mf_coll_t *v, mf_error_t *err)
{
    bson_t def;
    view_def(v, &def);
    int ret = views_def_write(s, sv, v->ns, &def, err);
    bson_destroy(&def);
    return ret;
}

/*
 * views_coll: db's system.views, found (and so locked) in the caller's lock
 * session, created empty with default options when missing and create is
 * set; *out NULL when missing and not created. Called before ddl_mu is
 * taken. Returns 0, or -1 with err (a bounded lock wait that gave up is
 * 24 LockTimeout: the mirror must not be skipped).
 */
static int
views_coll(mf_catalog_t *cat, const char *db, bool create, mf_coll_t **out, mf_error_t *err)
{
    for (int attempt = 0;; attempt++) {
        *out = mf_catalog_coll_find(cat, db, SYSTEM_VIEWS);
        if (*out == NULL && T.depth > 0 && mf_catalog_lock_timed_out())
            return mf_err_set(err, MF_E_LockTimeout, "%s.%s stayed in use for %d ms", db, SYSTEM_VIEWS,
                              LOCK_TIMEOUT_MS);
        if (*out != NULL || !create)
            return 0;
        if (mf_catalog_coll_create(cat, db, SYSTEM_VIEWS, NULL, out, err) == 0)
            return 0;
        /* Another thread created it meanwhile: find it. */
        if (err->code != MF_E_NamespaceExists || attempt > 0)
            return -1;
        mf_err_clear(err);
    }
}

/*
 * views_mirror_ok: whether sv holds exactly the definitions of db's nviews
 * views, one document each. Open time: no session, nothing else running.
 */
static bool
views_mirror_ok(mf_catalog_t *cat, mf_sess_t *s, const char *db, mf_coll_t *sv, int nviews)
{
    mf_cur_t *cur;
    mf_error_t err;
    int ret, matched = 0;
    bool ok = true;
    size_t dl = strlen(db);

    if (mf_cur_open(s, sv->uri, &cur, &err) != 0)
        return false;
    while (ok && (ret = mf_cur_next(cur)) == 0) {
        const uint8_t *v;
        size_t len;
        bson_t d, def;
        bson_iter_t it;
        mf_cur_value(cur, &v, &len);
        ok = bson_init_static(&d, v, len) && bson_iter_init_find(&it, &d, "_id") && BSON_ITER_HOLDS_UTF8(&it);
        const char *id = ok ? bson_iter_utf8(&it, NULL) : "";
        mf_coll_t *view = ok && strncmp(id, db, dl) == 0 && id[dl] == '.' ? lookup(cat, db, id + dl + 1) : NULL;
        ok = view != NULL && view->is_view;
        if (ok) {
            view_def(view, &def);
            ok = bson_equal(&d, &def);
            bson_destroy(&def);
            matched++;
        }
    }
    mf_cur_close(cur);
    return ok && matched == nviews;
}

/*
 * views_mend: at open, makes each database's system.views hold exactly its
 * views' definitions, creating it where a database has views and no
 * system.views (data from before the mirror), in one transaction per
 * database that differs. Open time: no lock session, nothing else running.
 * Returns 0 or -1 with err.
 */
static int
views_mend(mf_catalog_t *cat, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);
    char last[256] = "";
    int rc = 0;

    for (int i = 0; i < cat->ncolls && rc == 0; i++) {
        mf_coll_t *c = cat->colls[i];
        if ((!c->is_view && !is_system_views(c)) || strcmp(c->db, last) == 0)
            continue;
        snprintf(last, sizeof(last), "%s", c->db);
        coll_vec_t views = {0};
        for (int j = 0; j < cat->ncolls; j++)
            if (cat->colls[j]->is_view && strcmp(cat->colls[j]->db, last) == 0)
                collect_into(&views, cat->colls[j]);
        mf_coll_t *sv = lookup(cat, last, SYSTEM_VIEWS);
        if (sv != NULL && views_mirror_ok(cat, s, last, sv, views.n)) {
            free(views.v);
            continue;
        }
        mf_log(MF_LOG_INFO, "STORAGE", "writing the view definitions of database %s into %s.%s (%d views)", last,
               last, SYSTEM_VIEWS, views.n);
        if (sv == NULL)
            rc = mf_catalog_coll_create(cat, last, SYSTEM_VIEWS, NULL, &sv, err);
        if (rc == 0)
            rc = mf_txn_begin(s, err);
        if (rc == 0) {
            /* Documents that name no view go; each view's is put. */
            mf_cur_t *cur;
            int64_t *rids = NULL;
            bson_t *docs = NULL;
            int n = 0, ret = 0;
            if ((rc = mf_cur_open(s, sv->uri, &cur, err)) == 0) {
                while ((ret = mf_cur_next(cur)) == 0) {
                    bson_t d;
                    const char *id = view_doc_id(cur, &d);
                    size_t dl = strlen(last);
                    mf_coll_t *view = id != NULL && strncmp(id, last, dl) == 0 && id[dl] == '.'
                                          ? lookup(cat, last, id + dl + 1)
                                          : NULL;
                    if (view != NULL && view->is_view)
                        continue;
                    rids = mf_realloc(rids, (size_t)(n + 1) * sizeof(*rids));
                    docs = mf_realloc(docs, (size_t)(n + 1) * sizeof(*docs));
                    rids[n] = mf_cur_rid(cur);
                    bson_copy_to(&d, &docs[n]);
                    n++;
                }
                mf_cur_close(cur);
                if (ret != MF_NOTFOUND)
                    rc = scan_error(ret, "the view definitions", sv->ns, err);
            }
            for (int k = 0; k < n && rc == 0; k++)
                rc = mf_coll_remove(s, sv, rids[k], &docs[k], err);
            for (int k = 0; k < views.n && rc == 0; k++)
                rc = views_def_put(s, sv, views.v[k], err);
            for (int k = 0; k < n; k++)
                bson_destroy(&docs[k]);
            free(rids);
            free(docs);
            if (rc != 0) {
                if (rc == MF_CONFLICT)
                    mf_err_write_conflict(err);
                mf_txn_abort(s);
                rc = -1;
            } else {
                rc = mf_txn_commit(s, true, err);
            }
        }
        free(views.v);
    }
    mf_storage_session_release(s);
    return rc != 0 ? -1 : 0;
}

int
mf_catalog_coll_create(mf_catalog_t *cat, const char *db, const char *name, const bson_t *options, mf_coll_t **out,
                       mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);
    char hex[33];
    bson_t idspec;

    if (mf_catalog_check_db_name(db, err) != 0 || mf_catalog_check_coll_name(db, name, err) != 0)
        return -1;
    parsed_opts_t po;
    if (parse_options(options, false, false, &po, err) != 0)
        return -1;
    /* A view's definition goes into system.views too: made first, unless the name is taken already. */
    mf_coll_t *sv = NULL;
    if (po.view) {
        pthread_rwlock_rdlock(&cat->lock);
        bool taken = lookup(cat, db, name) != NULL;
        pthread_rwlock_unlock(&cat->lock);
        if (taken || views_coll(cat, db, true, &sv, err) != 0) {
            parsed_opts_free(&po);
            return taken ? mf_err_set(err, MF_E_NamespaceExists, "Collection %s.%s already exists.", db, name) : -1;
        }
    }
    /* One creation at a time: the name is checked and taken under ddl_mu. */
    pthread_mutex_lock(&cat->ddl_mu);
    pthread_rwlock_rdlock(&cat->lock);
    bool exists = lookup(cat, db, name) != NULL;
    pthread_rwlock_unlock(&cat->lock);
    if (exists) {
        pthread_mutex_unlock(&cat->ddl_mu);
        parsed_opts_free(&po); /* apply_options never took them */
        return mf_err_set(err, MF_E_NamespaceExists, "Collection %s.%s already exists.", db, name);
    }

    mf_coll_t *c = coll_alloc();
    apply_options(c, &po);
    c->db = mf_strdup(db);
    c->name = mf_strdup(name);
    size_t nl = strlen(db) + strlen(name) + 2;
    c->ns = mf_malloc(nl);
    snprintf(c->ns, nl, "%s.%s", db, name);
    random_hex(hex, 16);
    for (int i = 0; i < 16; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        c->uuid[i] = (uint8_t)v;
    }
    c->uuid[6] = (uint8_t)((c->uuid[6] & 0x0f) | 0x40);
    c->uuid[8] = (uint8_t)((c->uuid[8] & 0x3f) | 0x80);
    /* A replica set's secondary creates the collection with the primary's UUID (options.uuid, not stored). */
    bson_iter_t ui;
    bson_t stored;
    if (mf_coll_validator_allowed(db, name, c->uuid, options, err) != 0)
        goto err_free;
    bson_init(&stored);
    if (options != NULL && bson_iter_init_find(&ui, options, "uuid")) {
        /* Taken already (a log replayed from further back than needed): the collection keeps a fresh one. */
        uint8_t want[16];
        memcpy(want, c->uuid, 16);
        uuid_of(&ui, want);
        if (!uuid_taken(cat, want))
            memcpy(c->uuid, want, 16);
        bson_copy_to_excluding_noinit(options, &stored, "uuid", NULL);
    } else if (options != NULL) {
        bson_concat(&stored, options);
    }
    char ident[64];
    snprintf(ident, sizeof(ident), "coll-%.16s", hex);
    c->ident = mf_strdup(ident);
    size_t ul = strlen(ident) + 8;
    c->uri = mf_malloc(ul);
    snprintf(c->uri, ul, "table:%s", ident);
    c->options = bson_copy(&stored);
    bson_destroy(&stored);
    atomic_store(&c->next_rid, 1);

    mf_index_t *ix = NULL;
    if (!c->is_view) {
        id_index_spec(&idspec, options);
        ix = new_index(c, &idspec, err);
        bson_destroy(&idspec);
        if (ix == NULL)
            goto err_free;
        c->indexes[c->nindexes++] = ix;
    }
    if (table_create(cat, s, c, NULL, c->is_timeseries ? MF_TABLE_DOCS_DENSE : MF_TABLE_DOCS, err) != 0)
        goto err_free;
    if (ix != NULL && table_create(cat, s, c, ix, MF_TABLE_INDEX, err) != 0) {
        ix = NULL; /* never made: only the collection's table is dropped */
        goto err_drop;
    }
    {
        /* The entry and its zero sizes in one synced transaction. */
        bson_t entry;
        mf_sess_t *ds;
        coll_to_bson(c, &entry);
        int rc = ddl_begin(cat, &ds, err);
        if (rc == 0) {
            rc = entry_write(ds, c->ns, &entry, err);
            if (rc == 0)
                rc = sizes_write(ds, c->ident, 0, 0, err);
            if (rc == 0 && sv != NULL)
                rc = views_def_put(ds, sv, c, err);
            rc = ddl_end(cat, ds, rc, err);
        }
        bson_destroy(&entry);
        if (rc != 0)
            goto err_drop;
    }
    if (T.depth > 0) {
        /* The creating session holds it, as if it had found it (exclusive in a DDL session); nobody else sees it yet. */
        if (T.excl)
            pthread_rwlock_wrlock(&c->lock);
        else
            pthread_rwlock_rdlock(&c->lock);
        atomic_fetch_add_explicit(&cat->lk_acquired[T.excl ? 1 : 0], 1, memory_order_relaxed);
        atomic_fetch_add(&c->refs, 1);
        session_add(c, T.excl);
    }
    catalog_insert(cat, c);
    pthread_mutex_unlock(&cat->ddl_mu);
    mf_log(MF_LOG_INFO, "STORAGE", "createCollection %s", c->ns);
    report_ddl(cat, MF_DDL_CREATE_COLL, c, NULL, NULL, c->options);
    if (out)
        *out = c;
    return 0;

err_drop:
    mf_storage_drop(cat->st, c->uri);
    if (ix != NULL)
        mf_storage_drop(cat->st, ix->uri);
err_free:
    pthread_mutex_unlock(&cat->ddl_mu);
    coll_free(c);
    return -1;
}

/* After c's entry is gone (committed): forget it and drop its tables. Write lock held. */
static void
coll_forget(mf_catalog_t *cat, mf_coll_t *c)
{
    catalog_remove(cat, c);
    mf_storage_drop(cat->st, c->uri);
    for (int i = 0; i < c->nindexes; i++)
        mf_storage_drop(cat->st, c->indexes[i]->uri);
    mf_log(MF_LOG_INFO, "STORAGE", "dropCollection %s", c->ns);
    report_ddl(cat, MF_DDL_DROP_COLL, c, NULL, NULL, NULL);
    coll_unref(c); /* the catalog's reference; freed once no session holds it */
}

int
mf_catalog_db_drop(mf_catalog_t *cat, const char *db, int *ndropped, mf_error_t *err)
{
    mf_sess_t *s;
    coll_vec_t cv = {0};
    mf_coll_t **v;
    int n, rc;

    *ndropped = 0;
    /* Every collection of db, locked by the caller's (DDL) session. */
    T.timed_out = false;
    mf_catalog_coll_list(cat, db, collect_into, &cv);
    v = cv.v;
    n = cv.n;
    if (T.timed_out) {
        free(v);
        return mf_err_set(err, MF_E_LockTimeout, "dropDatabase %s: a collection stayed in use for %d ms; nothing dropped",
                          db, LOCK_TIMEOUT_MS);
    }
    if (n == 0) {
        free(v);
        return 0;
    }
    rc = ddl_begin(cat, &s, err);
    if (rc == 0) {
        for (int i = 0; i < n && rc == 0; i++) {
            rc = entry_write(s, v[i]->ns, NULL, err);
            if (rc == 0)
                rc = sizes_write(s, v[i]->ident, -1, 0, err);
        }
        rc = ddl_end(cat, s, rc, err);
    }
    if (rc == 0) {
        for (int i = 0; i < n; i++)
            coll_forget(cat, v[i]);
        *ndropped = n;
        /* Then the database itself (the oplog logs a dropDatabase: change streams report it). */
        mf_ddl_event_t ev = {MF_DDL_DROP_DB, db, NULL, NULL, NULL};
        atomic_fetch_add(&cat->version, 1);
        mf_observers_ddl(cat->observers, &ev);
    }
    free(v);
    return rc;
}

/*
 * views_of: every view of db, found (so locked) in the caller's session,
 * into cv. Returns 0, or -1 with err when a bounded lock wait gave up.
 */
static int
views_of(mf_catalog_t *cat, const char *db, coll_vec_t *cv, mf_error_t *err)
{
    int n = 0;
    char **names = NULL;
    size_t dl = strlen(db);

    pthread_rwlock_rdlock(&cat->lock);
    for (int i = 0; i < cat->ncolls; i++) {
        const mf_coll_t *c = cat->colls[i];
        if (c->is_view && strncmp(c->ns, db, dl) == 0 && c->ns[dl] == '.') {
            names = mf_realloc(names, (size_t)(n + 1) * sizeof(*names));
            names[n++] = mf_strdup(c->name);
        }
    }
    pthread_rwlock_unlock(&cat->lock);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        mf_coll_t *v = rc == 0 ? mf_catalog_coll_find(cat, db, names[i]) : NULL;
        if (v != NULL && v->is_view)
            collect_into(cv, v);
        else if (rc == 0 && v == NULL && T.depth > 0 && mf_catalog_lock_timed_out())
            rc = mf_err_set(err, MF_E_LockTimeout, "view %s.%s stayed in use for %d ms", db, names[i], LOCK_TIMEOUT_MS);
        free(names[i]);
    }
    free(names);
    return rc;
}

int
mf_catalog_coll_drop(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err)
{
    mf_sess_t *s;
    mf_coll_t *sv = NULL;
    coll_vec_t views = {0};

    /* A view's document leaves system.views with it; system.views takes every view of its database along. */
    if (c->is_view && views_coll(cat, c->db, false, &sv, err) != 0)
        return -1;
    if (is_system_views(c) && views_of(cat, c->db, &views, err) != 0) {
        free(views.v);
        return -1;
    }
    int rc = ddl_begin(cat, &s, err);
    if (rc == 0) {
        for (int i = 0; i < views.n && rc == 0; i++) {
            rc = entry_write(s, views.v[i]->ns, NULL, err);
            if (rc == 0)
                rc = sizes_write(s, views.v[i]->ident, -1, 0, err);
        }
        if (rc == 0 && sv != NULL)
            rc = views_def_write(s, sv, c->ns, NULL, err);
        if (rc == 0)
            rc = entry_write(s, c->ns, NULL, err);
        if (rc == 0)
            rc = sizes_write(s, c->ident, -1, 0, err);
        rc = ddl_end(cat, s, rc, err);
    }
    if (rc == 0) {
        for (int i = 0; i < views.n; i++)
            coll_forget(cat, views.v[i]);
        coll_forget(cat, c);
    }
    free(views.v);
    return rc != 0 ? -1 : 0;
}

int
mf_catalog_coll_drop_if_empty(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err)
{
    mf_cur_t *cur;
    mf_sess_t *s = mf_storage_session(cat->st);
    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    int ret = mf_cur_next(cur);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    if (ret == 0)
        return 0;
    if (ret != MF_NOTFOUND)
        return mf_err_set(err, MF_E_InternalError, "cannot read %s (%d)", c->ns, ret);
    return mf_catalog_coll_drop(cat, c, err) == 0 ? 1 : -1;
}

/*
 * rename_impl: renames c to to_db.to_name, replacing target (the collection
 * there, or NULL) in the same transaction.
 */
static int
rename_impl(mf_catalog_t *cat, mf_coll_t *c, mf_coll_t *target, const char *to_db, const char *to_name,
            mf_error_t *err)
{
    char *old_ns = c->ns, *old_db = c->db, *old_name = c->name;
    char *new_ns, *new_db, *new_name;
    size_t nl = strlen(to_db) + strlen(to_name) + 2;

    if (mf_catalog_check_db_name(to_db, err) != 0 || mf_catalog_check_coll_name(to_db, to_name, err) != 0)
        return -1;
    pthread_mutex_lock(&cat->ddl_mu);
    pthread_rwlock_rdlock(&cat->lock);
    mf_coll_t *there = lookup(cat, to_db, to_name);
    pthread_rwlock_unlock(&cat->lock);
    if (there != target || target == c) {
        pthread_mutex_unlock(&cat->ddl_mu);
        if (target == NULL && there != NULL && T.timed_out)
            return mf_err_set(err, MF_E_LockTimeout, "rename to %s.%s: the target stayed in use for %d ms", to_db,
                              to_name, LOCK_TIMEOUT_MS);
        return mf_err_set(err, MF_E_NamespaceExists, "target namespace exists");
    }
    new_ns = mf_malloc(nl);
    snprintf(new_ns, nl, "%s.%s", to_db, to_name);
    new_db = mf_strdup(to_db);
    new_name = mf_strdup(to_name);
    /* Names change under the map lock: a lookup sees the old or the new one, never half. */
    pthread_rwlock_wrlock(&cat->lock);
    c->ns = new_ns;
    c->db = new_db;
    c->name = new_name;
    pthread_rwlock_unlock(&cat->lock);
    /* The new entry and the old one's removal in one synced transaction: never two entries on one table. */
    bson_t entry;
    mf_sess_t *s;
    coll_to_bson(c, &entry);
    int rc = ddl_begin(cat, &s, err);
    if (rc == 0) {
        /* Overwriting the key also removes target's entry. */
        rc = entry_write(s, c->ns, &entry, err);
        if (rc == 0)
            rc = entry_write(s, old_ns, NULL, err);
        if (rc == 0 && target != NULL)
            rc = sizes_write(s, target->ident, -1, 0, err);
        rc = ddl_end(cat, s, rc, err);
    }
    bson_destroy(&entry);
    if (rc != 0) {
        pthread_rwlock_wrlock(&cat->lock);
        c->ns = old_ns;
        c->db = old_db;
        c->name = old_name;
        pthread_rwlock_unlock(&cat->lock);
        free(new_ns);
        free(new_db);
        free(new_name);
        pthread_mutex_unlock(&cat->ddl_mu);
        return -1;
    }
    if (target != NULL)
        coll_forget(cat, target);
    pthread_rwlock_wrlock(&cat->lock);
    qsort(cat->colls, (size_t)cat->ncolls, sizeof(*cat->colls), coll_cmp);
    atomic_fetch_add(&cat->version, 1);
    pthread_rwlock_unlock(&cat->lock);
    pthread_mutex_unlock(&cat->ddl_mu);
    mf_log(MF_LOG_INFO, "STORAGE", "renameCollection %s to %s", old_ns, c->ns);
    report_ddl(cat, MF_DDL_RENAME_COLL, c, old_ns, c->ns, NULL);
    free(old_ns);
    free(old_db);
    free(old_name);
    return 0;
}

int
mf_catalog_coll_rename(mf_catalog_t *cat, mf_coll_t *c, const char *to_db, const char *to_name, mf_error_t *err)
{
    return rename_impl(cat, c, NULL, to_db, to_name, err);
}

int
mf_catalog_coll_rename_replace(mf_catalog_t *cat, mf_coll_t *c, mf_coll_t *target, const char *to_db,
                               const char *to_name, mf_error_t *err)
{
    return rename_impl(cat, c, target, to_db, to_name, err);
}

/* Defined in coll_write.c: inserts every existing document's keys into ix. */
int mf_coll_index_build(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, mf_build_progress_fn fn, void *arg,
                        mf_error_t *err);

/* Drops the tables of ixs[0..n), index objects no collection holds any longer, and frees them. */
static void
indexes_discard(mf_catalog_t *cat, mf_index_t *const *ixs, int n)
{
    for (int k = 0; k < n; k++) {
        mf_storage_drop(cat->st, ixs[k]->uri);
        index_free(ixs[k]);
    }
}

int
mf_catalog_index_add(mf_catalog_t *cat, mf_coll_t *c, const bson_t *spec, mf_error_t *err)
{
    return mf_catalog_index_add_progress(cat, c, spec, NULL, NULL, err);
}

int
mf_catalog_index_add_progress(mf_catalog_t *cat, mf_coll_t *c, const bson_t *spec, mf_build_progress_fn fn,
                              void *arg, mf_error_t *err)
{
    return mf_catalog_index_add_many(cat, c, &spec, 1, fn, &arg, err);
}

int
mf_catalog_index_add_many(mf_catalog_t *cat, mf_coll_t *c, const bson_t *const *specs, int n,
                          mf_build_progress_fn fn, void *const *args, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);
    mf_index_t *built[MF_MAX_INDEXES];
    int nbuilt = 0, rc = 0;

    if (n <= 0 || c->nindexes + n > MF_MAX_INDEXES)
        return mf_err_set(err, MF_E_CannotCreateIndex, "add index fails, too many indexes for %s key:", c->ns);
    /* Build every index's table first (not yet in c, so writers, excluded anyway, never see them). */
    for (int k = 0; k < n && rc == 0; k++) {
        mf_index_t *ix = new_index(c, specs[k], err);
        if (ix == NULL) {
            rc = -1;
            break;
        }
        if (table_create(cat, s, c, ix, MF_TABLE_INDEX, err) != 0) {
            index_free(ix);
            rc = -1;
            break;
        }
        built[nbuilt++] = ix;
        if (mf_coll_index_build(cat, c, ix, fn, args ? args[k] : NULL, err) != 0)
            rc = -1;
    }
    if (rc == 0) {
        /* Then one entry rewrite names them all. */
        for (int k = 0; k < nbuilt; k++)
            c->indexes[c->nindexes++] = built[k];
        if (mf_catalog_coll_persist(cat, c, err) != 0) {
            c->nindexes -= nbuilt;
            rc = -1;
        }
    }
    if (rc != 0) {
        indexes_discard(cat, built, nbuilt);
        return -1;
    }
    for (int k = 0; k < nbuilt; k++) {
        mf_log(MF_LOG_INFO, "INDEX", "Index build: done building index %s on ns %s", built[k]->name, c->ns);
        report_ddl(cat, MF_DDL_CREATE_INDEX, c, NULL, NULL, built[k]->spec);
    }
    return 0;
}

int
mf_catalog_index_drop_many(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *const *ixs, int n, mf_error_t *err)
{
    mf_index_t *saved[MF_MAX_INDEXES];
    int nsaved = c->nindexes, keep = 0;

    for (int k = 0; k < n; k++) {
        bool found = false;
        for (int i = 0; i < c->nindexes; i++)
            found = found || c->indexes[i] == ixs[k];
        if (!found)
            return mf_err_set(err, MF_E_IndexNotFound, "index not found");
    }
    memcpy(saved, c->indexes, (size_t)nsaved * sizeof(*saved));
    for (int i = 0; i < nsaved; i++) {
        bool drop = false;
        for (int k = 0; k < n; k++)
            drop = drop || saved[i] == ixs[k];
        if (!drop)
            c->indexes[keep++] = saved[i];
    }
    c->nindexes = keep;
    /* One entry rewrite: every index goes, or none. */
    if (mf_catalog_coll_persist(cat, c, err) != 0) {
        memcpy(c->indexes, saved, (size_t)nsaved * sizeof(*saved));
        c->nindexes = nsaved;
        return -1;
    }
    for (int k = 0; k < n; k++) {
        mf_storage_drop(cat->st, ixs[k]->uri);
        bson_t detail = BSON_INITIALIZER;
        BSON_APPEND_UTF8(&detail, "index", ixs[k]->name);
        report_ddl(cat, MF_DDL_DROP_INDEX, c, NULL, NULL, &detail);
        bson_destroy(&detail);
        index_free(ixs[k]);
    }
    return 0;
}

#define RELAYOUT_TXN 10000

/* Copies entries of src (key -> record id) into dst as key + record id, RELAYOUT_TXN per transaction. */
static int
relayout_copy(mf_sess_t *s, const mf_index_t *src, const mf_index_t *dst, mf_error_t *err)
{
    uint8_t *k = NULL; /* the last entry copied: its key, then its record id */
    size_t klen_last = 0, kcap = 0;
    int64_t n = 0;
    int r = 0;
    bool more = true;

    while (more && r == 0) {
        mf_cur_t *in = NULL, *out = NULL;
        if (mf_txn_begin(s, err) != 0) {
            r = -1;
            break;
        }
        if (mf_cur_open(s, src->uri, &in, err) != 0 || mf_cur_open(s, dst->uri, &out, err) != 0) {
            r = -1;
        } else {
            /* Resume after the last key copied (k holds it and its record id). */
            int p = klen_last == 0 ? mf_cur_next(in) : mf_cur_seek_bytes_ge(in, k, klen_last - 8);
            if (p == 0 && klen_last > 0) {
                const uint8_t *key;
                size_t klen;
                mf_cur_key_bytes(in, &key, &klen);
                if (klen == klen_last - 8 && memcmp(key, k, klen) == 0)
                    p = mf_cur_next(in);
            }
            int64_t in_txn = 0;
            for (; p == 0 && in_txn < RELAYOUT_TXN; p = mf_cur_next(in), in_txn++) {
                const uint8_t *key, *val;
                size_t klen, vlen;
                mf_cur_key_bytes(in, &key, &klen);
                mf_cur_value(in, &val, &vlen);
                if (vlen < 8)
                    continue;
                if (klen + 8 > kcap) {
                    kcap = (klen + 8) * 2;
                    k = mf_realloc(k, kcap);
                }
                memcpy(k, key, klen);
                memcpy(k + klen, val, 8); /* the value is the record id, big-endian, as a key's suffix is */
                klen_last = klen + 8;
                if (mf_cur_insert_bytes(out, k, klen_last, val + 8, vlen - 8) != 0) { /* the type bits follow the record id */
                    r = mf_err_set(err, MF_E_InternalError, "copying index %s failed", src->name);
                    break;
                }
                if ((++n & 1023) == 0 && mf_curop_check_current(err) != 0) {
                    r = -1;
                    break;
                }
            }
            if (r == 0 && p != 0 && p != MF_NOTFOUND)
                r = mf_err_set(err, MF_E_InternalError, "reading index %s failed", src->name);
            more = p == 0;
        }
        if (in != NULL)
            mf_cur_close(in);
        if (out != NULL)
            mf_cur_close(out);
        if (r == 0)
            r = mf_txn_commit(s, false, err);
        else
            mf_txn_abort(s);
    }
    free(k);
    return r;
}

int
mf_catalog_index_relayout(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, const bson_t *spec, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);
    int at = -1;

    for (int i = 0; i < c->nindexes; i++)
        at = c->indexes[i] == ix ? i : at;
    if (at < 0 || ix->rid_in_key || ix->building)
        return mf_err_set(err, MF_E_InternalError, "index %s cannot be copied", ix->name);
    mf_index_t *nx = new_index(c, spec, err);
    if (nx == NULL)
        return -1;
    nx->rid_in_key = true;
    nx->kp.legacy_decimals = ix->kp.legacy_decimals; /* its keys are copied as they are */
    nx->key_types = ix->key_types;                   /* and their type bits with them */
    nx->unique = false;
    nx->unique_gen = ix->unique_gen + 1;
    atomic_store(&nx->multikey, atomic_load(&ix->multikey));
    atomic_store(&nx->multikey_durable, atomic_load(&ix->multikey_durable));
    for (int f = 0; f < ix->kp.nfields && f < nx->kp.nfields; f++) {
        atomic_store(&nx->mk_paths[f], atomic_load(&ix->mk_paths[f]));
        atomic_store(&nx->mk_durable[f], atomic_load(&ix->mk_durable[f]));
    }
    if (table_create(cat, s, c, nx, MF_TABLE_INDEX, err) != 0) {
        index_free(nx);
        return -1;
    }
    int rc = relayout_copy(s, ix, nx, err);
    if (rc == 0) {
        c->indexes[at] = nx;
        if ((rc = mf_catalog_coll_persist(cat, c, err)) != 0)
            c->indexes[at] = ix;
    }
    mf_storage_session_release(s);
    if (rc != 0) {
        mf_storage_drop(cat->st, nx->uri);
        index_free(nx);
        return -1;
    }
    mf_storage_drop(cat->st, ix->uri);
    index_free(ix);
    return 0;
}

/* reIndex's progress hook: false (the build stops) once the operation is killed, past maxTimeMS or shutting down. */
static bool
reindex_go_on(void *arg, int64_t done, int64_t total)
{
    (void)done;
    (void)total;
    return mf_curop_check_current((mf_error_t *)arg) == 0;
}

int
mf_catalog_reindex(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err)
{
    mf_error_t stop = {0}; /* why the build stopped, when the operation was interrupted */
    mf_sess_t *s = mf_storage_session(cat->st);
    mf_index_t *nx[MF_MAX_INDEXES], *old[MF_MAX_INDEXES];
    int n = c->nindexes, made = 0, rc = 0;

    /* Each index again from its spec, in a table of its own, keys in the current format; c is untouched until all are built. */
    for (int i = 0; i < n && rc == 0; i++) {
        mf_index_t *ix = new_index(c, c->indexes[i]->spec, err);
        if (ix == NULL) {
            rc = -1;
            break;
        }
        ix->unique_gen = c->indexes[i]->unique_gen + 1; /* a duplicate scan begun on the old table is redone */
        if (table_create(cat, s, c, ix, MF_TABLE_INDEX, err) != 0) {
            index_free(ix);
            rc = -1;
            break;
        }
        nx[made++] = ix;
        if (mf_coll_index_build(cat, c, ix, reindex_go_on, &stop, err) != 0) {
            if (err->code == MF_E_Interrupted && stop.code != 0)
                *err = stop; /* the hook stopped it: say why (killOp, maxTimeMS, shutdown) */
            rc = -1;
        } else if (mf_curop_check_current(err) != 0) {
            rc = -1; /* between indexes too: a small collection's build never calls the hook */
        }
    }
    if (rc == 0) {
        memcpy(old, c->indexes, (size_t)n * sizeof(*old));
        memcpy(c->indexes, nx, (size_t)n * sizeof(*nx));
        if (mf_catalog_coll_persist(cat, c, err) != 0) {
            memcpy(c->indexes, old, (size_t)n * sizeof(*old));
            rc = -1;
        }
    }
    mf_storage_session_release(s);
    if (rc != 0) {
        indexes_discard(cat, nx, made);
        return -1;
    }
    for (int i = 0; i < n; i++)
        index_flags_durable(nx[i]); /* the entry just written holds them */
    indexes_discard(cat, old, n);
    mf_log(MF_LOG_INFO, "INDEX", "reIndex: rebuilt %d indexes on ns %s", n, c->ns);
    report_ddl(cat, MF_DDL_REINDEX, c, NULL, NULL, NULL); /* a TTL index's table moved: its deadline is read again */
    return 0;
}

int
mf_catalog_index_drop(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, mf_error_t *err)
{
    return mf_catalog_index_drop_many(cat, c, &ix, 1, err);
}

/* ---------- background index builds ---------- */

int
mf_coll_ready_indexes(const mf_coll_t *c)
{
    int n = 0;
    for (int i = 0; i < c->nindexes; i++)
        n += !c->indexes[i]->building;
    return n;
}


int
mf_catalog_index_begin(mf_catalog_t *cat, mf_coll_t *c, const bson_t *spec, mf_index_t **out, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(cat->st);

    if (c->nindexes >= MF_MAX_INDEXES)
        return mf_err_set(err, MF_E_CannotCreateIndex, "add index fails, too many indexes for %s key:", c->ns);
    mf_index_t *ix = new_index(c, spec, err);
    if (ix == NULL)
        return -1;
    if (table_create(cat, s, c, ix, MF_TABLE_INDEX, err) != 0) {
        index_free(ix);
        return -1;
    }
    ix->building = true;
    c->indexes[c->nindexes++] = ix;
    *out = ix;
    return 0;
}

void
mf_catalog_index_abort(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix)
{
    for (int i = 0; i < c->nindexes; i++) {
        if (c->indexes[i] == ix) {
            memmove(&c->indexes[i], &c->indexes[i + 1], (size_t)(c->nindexes - i - 1) * sizeof(ix));
            c->nindexes--;
            mf_storage_drop(cat->st, ix->uri);
            index_free(ix);
            return;
        }
    }
}

int
mf_catalog_index_commit(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *const *ixs, int n, mf_error_t *err)
{
    for (int i = 0; i < n; i++)
        ixs[i]->building = false;
    if (mf_catalog_coll_persist(cat, c, err) != 0) {
        for (int i = 0; i < n; i++)
            ixs[i]->building = true;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        mf_log(MF_LOG_INFO, "INDEX", "Index build: done building index %s on ns %s", ixs[i]->name, c->ns);
        report_ddl(cat, MF_DDL_CREATE_INDEX, c, NULL, NULL, ixs[i]->spec);
    }
    return 0;
}

int
mf_catalog_coll_acquire(mf_catalog_t *cat, const char *db, const char *name, bool create, mf_coll_t **out,
                        mf_error_t *err)
{
    mf_catalog_rdlock(cat);
    *out = mf_catalog_coll_find(cat, db, name);
    if (*out != NULL || !create)
        return 0;
    if (T.held)
        return mf_err_set(err, MF_E_OperationNotSupportedInTransaction,
                          "Cannot create namespace %s.%s in multi-document transaction.", db, name);
    mf_catalog_unlock(cat);
    mf_catalog_wrlock(cat);
    /* Another writer may create it first (locks are per collection): then it exists, as wanted. */
    if (mf_catalog_coll_find(cat, db, name) == NULL) {
        if (mf_catalog_coll_create(cat, db, name, NULL, NULL, err) != 0 && err->code != MF_E_NamespaceExists) {
            mf_catalog_unlock(cat);
            mf_catalog_rdlock(cat);
            return -1;
        }
        mf_err_clear(err);
    }
    mf_catalog_unlock(cat);
    mf_catalog_rdlock(cat);
    *out = mf_catalog_coll_find(cat, db, name);
    if (*out == NULL)
        return mf_err_set(err, MF_E_NamespaceNotFound, "collection %s.%s was dropped concurrently", db, name);
    return 0;
}

typedef struct sweep_list {
    char **db, **name;
    size_t n, cap;
    bool (*candidate)(const mf_coll_t *c);
} sweep_list_t;

static void
note_candidate(void *arg, mf_coll_t *c)
{
    sweep_list_t *l = arg;
    if (!l->candidate(c))
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->db = mf_realloc(l->db, l->cap * sizeof *l->db);
        l->name = mf_realloc(l->name, l->cap * sizeof *l->name);
    }
    l->db[l->n] = mf_strdup(c->db);
    l->name[l->n++] = mf_strdup(c->name);
}

void
mf_catalog_drop_where(mf_catalog_t *cat, bool (*candidate)(const mf_coll_t *c),
                      bool (*doomed)(mf_catalog_t *cat, const mf_coll_t *c), const char *why)
{
    sweep_list_t l = {.candidate = candidate};

    mf_catalog_rdlock(cat);
    mf_catalog_coll_visit(cat, NULL, note_candidate, &l);
    mf_catalog_unlock(cat);
    for (size_t i = 0; i < l.n; i++) {
        mf_error_t e;
        mf_err_clear(&e);
        mf_catalog_wrlock(cat);
        mf_coll_t *c = mf_catalog_coll_find(cat, l.db[i], l.name[i]);
        if (c != NULL && (doomed == NULL || doomed(cat, c))) {
            if (mf_catalog_coll_drop(cat, c, &e) != 0)
                mf_log(MF_LOG_WARN, "STORAGE", "could not drop %s.%s (%s): %s", l.db[i], l.name[i], why, e.msg);
            else
                mf_log(MF_LOG_INFO, "STORAGE", "dropped %s.%s: %s", l.db[i], l.name[i], why);
        }
        mf_catalog_unlock(cat);
        free(l.db[i]);
        free(l.name[i]);
    }
    free(l.db);
    free(l.name);
}

uint64_t
mf_catalog_tick_ts(void *arg)
{
    mf_catalog_t *cat = arg;
    uint64_t now = (uint64_t)(mf_now_ms() / 1000) << 32 | 1;
    uint64_t cur = atomic_load(&cat->ts_clock), next;
    do {
        next = cur + 1 > now ? cur + 1 : now;
    } while (!atomic_compare_exchange_weak(&cat->ts_clock, &cur, next));
    return next;
}
