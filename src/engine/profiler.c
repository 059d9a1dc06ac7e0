/*
 * profiler.c: the database profiler's settings and <db>.system.profile (the
 * `profile` command itself is in cmd/profile.c).
 *
 * Levels follow mongod: 0 off, 1 operations slower than slowms, 2 all. The
 * level is per database and in memory (as mongod's is, unless set in its
 * config). An entry is written after the operation has finished and released
 * its locks, in its own transaction, into <db>.system.profile, created on
 * first use as a capped collection of 1 MiB; the oldest entries are removed
 * when it grows past that (capped semantics, kept here for this one
 * collection). TTL deletes are profiled too (SPEC D4): the monitor reports
 * each batch with op "remove" and the TTL index it came from.
 *
 * A database may also have a filter (profile's `filter`, mongod 4.4.2+): a
 * query over the operation's profile entry that then decides, instead of
 * slowms and sampleRate, which operations level 1 profiles and the slow
 * query log shows. A filter is compiled once and shared, reference counted:
 * an operation finishing matches against the filter it took, even if the
 * profile command replaces it meanwhile.
 */
#include <pthread.h>
#include "common/alloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "catalog/coll_write.h"
#include "doc/match.h"
#include "engine/engine.h"
#include "engine/profiler.h"
#include "common/log.h"

#define PROFILE_CAP_BYTES (1024 * 1024)

/* A profile filter: its spec and that spec compiled (the matcher points into spec). */
struct mf_profile_filter {
    _Atomic int refs;
    bson_t *spec;      /* owned */
    mf_matcher_t *m;   /* owned */
};

/* A database's own level and filter (the profile command). */
typedef struct db_level {
    char db[64]; /* database names are under 64 bytes (mf_catalog_check_db_name) */
    int level;
    mf_profile_filter_t *filter; /* a reference, or NULL */
} db_level_t;

/* An engine's profiler settings (mf_engine_t.profiler). */
struct mf_profiler {
    pthread_mutex_t mu;
    db_level_t *dbs; /* owned, n of cap used; under mu */
    int n, cap;
    int default_level; /* a database without its own level (mongod --profile, operationProfiling.mode); under mu */
    _Atomic int64_t slowms;
    _Atomic uint64_t sample_rate; /* sampleRate, a double's bits */
    _Atomic uint64_t draws;       /* sampling's sequence (mf_profile_slow) */
    _Atomic int any_on; /* fast path: no database profiles */
    _Atomic int any_filter; /* fast path: no database has a filter */
};

static uint64_t
double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static double
bits_double(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

mf_profiler_t *
mf_profiler_new(void)
{
    mf_profiler_t *p = mf_calloc(1, sizeof(*p));
    pthread_mutex_init(&p->mu, NULL);
    atomic_store(&p->slowms, 100);
    atomic_store(&p->sample_rate, double_bits(1.0));
    /* Each engine's sampling starts at its own point of the sequence, so a
     * restart does not sample the same operations again (mongod draws from
     * a randomly seeded generator too); with no random bytes, from 0. */
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = 0;
    atomic_store(&p->draws, seed);
    return p;
}

void
mf_profiler_free(mf_profiler_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_destroy(&p->mu);
    for (int i = 0; i < p->n; i++)
        mf_profile_filter_release(p->dbs[i].filter);
    free(p->dbs);
    free(p);
}

/* The position of db's own level in P->dbs, or -1. mu held. */
static int
level_index(const mf_profiler_t *P, const char *db)
{
    for (int i = 0; i < P->n; i++) {
        if (strcmp(P->dbs[i].db, db) == 0)
            return i; /* names are unique in the table */
    }
    return -1;
}

int
mf_profile_level(mf_profiler_t *P, const char *db)
{
    if (atomic_load(&P->any_on) == 0)
        return 0;
    pthread_mutex_lock(&P->mu);
    int i = level_index(P, db);
    int level = i >= 0 ? P->dbs[i].level : P->default_level;
    pthread_mutex_unlock(&P->mu);
    return level;
}

/* Whether any database profiles or has a filter: the fast paths of mf_profile_level and _filter_get. mu held. */
static void
update_any_on(mf_profiler_t *P)
{
    int on = P->default_level != 0, filters = 0;
    for (int k = 0; k < P->n; k++) {
        on |= P->dbs[k].level != 0;
        filters |= P->dbs[k].filter != NULL;
    }
    atomic_store(&P->any_on, on);
    atomic_store(&P->any_filter, filters);
}

/* db's entry in P->dbs, added with the default level when it has none. mu held. */
static int
own_entry(mf_profiler_t *P, const char *db)
{
    int i = level_index(P, db);
    if (i >= 0)
        return i;
    i = P->n;
    if (P->n == P->cap) {
        P->cap = P->cap ? P->cap * 2 : 8;
        P->dbs = mf_realloc(P->dbs, (size_t)P->cap * sizeof(*P->dbs));
    }
    memset(&P->dbs[i], 0, sizeof(P->dbs[i]));
    mf_strlcpy(P->dbs[i].db, db, sizeof(P->dbs[i].db));
    P->dbs[i].level = P->default_level;
    P->n++;
    return i;
}

/* Removes entry i (its filter reference released). mu held. */
static void
drop_entry(mf_profiler_t *P, int i)
{
    mf_profile_filter_release(P->dbs[i].filter);
    P->dbs[i] = P->dbs[--P->n];
}

/* Whether spec uses $meta anywhere (in an $expr): what a profile entry, having no metadata, cannot give. */
static bool
uses_metadata(const uint8_t *data, uint32_t len, int depth)
{
    bson_t doc;
    bson_iter_t it;
    if (depth > 200 || !bson_init_static(&doc, data, len) || !bson_iter_init(&it, &doc))
        return false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$meta") == 0)
            return true;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            const uint8_t *sub;
            uint32_t sublen;
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                bson_iter_document(&it, &sublen, &sub);
            else
                bson_iter_array(&it, &sublen, &sub);
            if (uses_metadata(sub, sublen, depth + 1))
                return true;
        }
    }
    return false;
}

int
mf_profile_set_filter(mf_profiler_t *P, const char *db, const bson_t *spec, mf_error_t *err)
{
    mf_profile_filter_t *f = NULL;
    if (spec != NULL && uses_metadata(bson_get_data(spec), spec->len, 0))
        return mf_err_set(err, MF_E_Location4910201, "Profile filter is not allowed to depend on metadata");
    if (spec != NULL) {
        f = mf_calloc(1, sizeof(*f));
        f->spec = bson_copy(spec);
        if ((f->m = mf_matcher_new(f->spec, err)) == NULL) {
            bson_destroy(f->spec);
            free(f);
            return -1;
        }
        atomic_store(&f->refs, 1);
    }
    pthread_mutex_lock(&P->mu);
    int i = own_entry(P, db);
    mf_profile_filter_release(P->dbs[i].filter);
    P->dbs[i].filter = f;
    if (f == NULL && P->dbs[i].level == 0 && P->default_level == 0)
        drop_entry(P, i); /* nothing left to keep */
    update_any_on(P);
    pthread_mutex_unlock(&P->mu);
    return 0;
}

mf_profile_filter_t *
mf_profile_filter_get(mf_profiler_t *P, const char *db)
{
    return mf_profile_filter_and_level(P, db, NULL);
}

mf_profile_filter_t *
mf_profile_filter_and_level(mf_profiler_t *P, const char *db, int *level)
{
    if (atomic_load(&P->any_filter) == 0)
        return NULL;
    pthread_mutex_lock(&P->mu);
    int i = level_index(P, db);
    mf_profile_filter_t *f = i >= 0 ? P->dbs[i].filter : NULL;
    if (f != NULL)
        atomic_fetch_add(&f->refs, 1);
    if (level != NULL)
        *level = i >= 0 ? P->dbs[i].level : P->default_level;
    pthread_mutex_unlock(&P->mu);
    return f;
}

void
mf_profile_filter_release(mf_profile_filter_t *f)
{
    if (f == NULL || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    mf_matcher_free(f->m);
    bson_destroy(f->spec);
    free(f);
}

const bson_t *
mf_profile_filter_spec(const mf_profile_filter_t *f)
{
    return f->spec;
}

bool
mf_profile_filter_match(const mf_profile_filter_t *f, const bson_t *entry)
{
    return mf_matcher_match(f->m, entry, NULL);
}

bool
mf_profile_any(mf_profiler_t *P)
{
    return atomic_load(&P->any_on) != 0;
}

/* Whether db was given a level of its own (the profile command), rather than the default. */
static bool
has_own_level(mf_profiler_t *P, const char *db)
{
    pthread_mutex_lock(&P->mu);
    bool own = level_index(P, db) >= 0;
    pthread_mutex_unlock(&P->mu);
    return own;
}

static void
count_coll(void *arg, mf_coll_t *c)
{
    (void)c;
    (*(int *)arg)++;
}

void
mf_profile_set_default_level(mf_profiler_t *P, int level)
{
    pthread_mutex_lock(&P->mu);
    P->default_level = level;
    update_any_on(P);
    pthread_mutex_unlock(&P->mu);
}

int64_t
mf_profile_slowms(mf_profiler_t *P)
{
    return atomic_load(&P->slowms);
}

void
mf_profile_set_level(mf_profiler_t *P, const char *db, int level)
{
    pthread_mutex_lock(&P->mu);
    int i = level_index(P, db);
    if (level == 0 && P->default_level == 0 && (i < 0 || P->dbs[i].filter == NULL)) {
        /* Off where off is the default: nothing to keep (so turning many databases off holds no memory). */
        if (i >= 0)
            drop_entry(P, i);
    } else {
        i = own_entry(P, db);
        P->dbs[i].level = level;
    }
    update_any_on(P);
    pthread_mutex_unlock(&P->mu);
}

void
mf_profile_forget(mf_profiler_t *P, const char *db)
{
    pthread_mutex_lock(&P->mu);
    int i = level_index(P, db);
    if (i >= 0)
        drop_entry(P, i);
    update_any_on(P);
    pthread_mutex_unlock(&P->mu);
}

double
mf_profile_sample_rate(mf_profiler_t *P)
{
    return bits_double(atomic_load(&P->sample_rate));
}

double
mf_profile_set_sample_rate(mf_profiler_t *P, double rate)
{
    return bits_double(atomic_exchange(&P->sample_rate, double_bits(rate)));
}

/*
 * A uniform draw in [0, 1) per call: the next number of an atomic sequence,
 * mixed (splitmix64's finaliser) so that consecutive operations draw
 * independently enough for sampling; no lock, no per-thread state. The
 * sequence starts at a random point per engine (mf_profiler_new).
 */
static double
draw(mf_profiler_t *P)
{
    uint64_t z = atomic_fetch_add(&P->draws, 1) * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0; /* 2^53 */
}

bool
mf_profile_slow(mf_profiler_t *P, int64_t millis)
{
    if (millis < mf_profile_slowms(P))
        return false;
    double rate = mf_profile_sample_rate(P);
    return rate >= 1.0 || (rate > 0.0 && draw(P) < rate);
}

bool
mf_profile_wants(mf_profiler_t *P, const char *db, bool slow)
{
    int level = mf_profile_level(P, db);
    return level == 2 || (level == 1 && slow);
}

/* Removes the oldest entries while the collection is over its cap. Catalog lock held shared. */
static void
trim(mf_sess_t *s, mf_coll_t *c)
{
    mf_cur_t *cur;
    mf_error_t err;
    while (atomic_load(&c->approx_size) > PROFILE_CAP_BYTES) {
        if (mf_txn_begin(s, &err) != 0)
            return;
        if (mf_cur_open(s, c->uri, &cur, &err) != 0) {
            mf_txn_abort(s);
            return;
        }
        int r = mf_cur_next(cur);
        int64_t rid = r == 0 ? mf_cur_rid(cur) : 0;
        bson_t doc;
        bool have = false;
        if (r == 0) {
            const uint8_t *v;
            size_t len;
            bson_t view;
            mf_cur_value(cur, &v, &len);
            if (bson_init_static(&view, v, len)) {
                bson_copy_to(&view, &doc);
                have = true;
            }
        }
        mf_cur_close(cur);
        if (!have || mf_coll_remove(s, c, rid, &doc, &err) != 0 || mf_txn_commit(s, false, &err) != 0) {
            if (have)
                bson_destroy(&doc);
            mf_txn_abort(s);
            return;
        }
        bson_destroy(&doc);
    }
}

void
mf_profile_write(mf_engine_t *eng, const char *db, const bson_t *entry)
{
    mf_catalog_t *cat = eng->cat;
    mf_sess_t *s = mf_storage_session(eng->st);
    mf_error_t err;
    mf_coll_t *c;

    mf_catalog_rdlock(cat);
    c = mf_catalog_coll_find(cat, db, "system.profile");
    if (c == NULL && !has_own_level(eng->profiler, db)) {
        /*
         * Profiled by the default level (--profile) only: a database that
         * does not exist is not created for its profile (mongod: "not
         * profiling because db went away"), so a command sent to any name
         * creates nothing, and a dropped database stays dropped.
         */
        int n = 0;
        mf_catalog_coll_list(cat, db, count_coll, &n);
        if (n == 0)
            goto out;
    }
    if (c == NULL) {
        bson_t opts;
        mf_catalog_unlock(cat);
        bson_init(&opts);
        BSON_APPEND_BOOL(&opts, "capped", true);
        BSON_APPEND_INT64(&opts, "size", PROFILE_CAP_BYTES);
        mf_catalog_wrlock(cat);
        if (mf_catalog_coll_find(cat, db, "system.profile") == NULL &&
            mf_catalog_coll_create(cat, db, "system.profile", &opts, NULL, &err) != 0)
            mf_log(MF_LOG_WARN, "COMMAND", "cannot create %s.system.profile: %s", db, err.msg);
        mf_catalog_unlock(cat);
        bson_destroy(&opts);
        mf_catalog_rdlock(cat);
        c = mf_catalog_coll_find(cat, db, "system.profile");
    }
    if (c != NULL) {
        bson_t doc;
        bson_oid_t oid;
        bson_iter_t it;
        bson_init(&doc);
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(&doc, "_id", &oid);
        bson_iter_init(&it, entry);
        while (bson_iter_next(&it))
            bson_append_value(&doc, bson_iter_key(&it), -1, bson_iter_value(&it));
        for (int attempt = 0; attempt < 10; attempt++) {
            if (mf_txn_begin(s, &err) != 0)
                break;
            int r = mf_coll_insert(s, c, &doc, NULL, &err);
            if (r == 0 && mf_txn_commit(s, false, &err) == 0)
                break;
            mf_txn_abort(s);
            if (r != MF_CONFLICT)
                break;
        }
        bson_destroy(&doc);
        trim(s, c);
    }
out:
    mf_catalog_unlock(cat);
    mf_storage_session_release(s);
}


int64_t
mf_profile_set_slowms(mf_profiler_t *P, int64_t ms)
{
    return atomic_exchange(&P->slowms, ms);
}
