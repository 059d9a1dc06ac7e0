/*
 * cmd_collmod.c: the collMod command.
 *
 * Index changes (SPEC B1-B4): {collMod: c, index: {keyPattern | name,
 * expireAfterSeconds?, hidden?}} changes a TTL index's N, converts a
 * single-field non-TTL index into a TTL index (MongoDB 5.1+), or hides /
 * unhides an index. Nothing is rebuilt: the spec in the catalog changes and
 * the TTL monitor is told (SPEC B4; a lowered N can make many documents due
 * at once, which the monitor paces, SPEC D9). Collection options
 * (validator, validationLevel, validationAction, changeStreamPreAndPostImages:
 * {enabled: true}, which false removes) are stored.
 *
 * Error codes follow SPEC B3 and MongoDB 8.0's coll_mod.idl: a non-numeric
 * N is 14 TypeMismatch; any other invalid N, both or neither of
 * name/keyPattern, or a compound or _id index is 72 InvalidOptions; a field
 * inside `index` that collMod does not know is 40415 (the IDL struct is
 * strict, as 8.0's; SPEC B3's 72 predates it); no such index is 27
 * IndexNotFound; no such collection 26 NamespaceNotFound. Nothing is
 * changed when any check fails. A capped collection takes TTL changes as
 * any other (SPEC A5: MongoDB 7.1+ allows TTL on capped collections).
 *
 * Capped limits, as MongoDB 6.0+ (SERVER-1864): cappedSize (1 byte to
 * 1 PB, kept as given) and cappedMax (below 2^31; <= 0 is no limit,
 * stored as 2147483647) are bounded as 8.0's IDL bounds them (51024),
 * then refused on a collection that is not capped (72 "Collection must be
 * capped.") before the index change is checked, and written last
 * (mf_catalog_coll_resize_capped); the next insert trims to them.
 *
 * Uniqueness, as MongoDB 6.0+: `prepareUnique: true` makes writers refuse a
 * value another document already has (11000; documents that already share
 * one keep it); `unique: true` then converts the index, after a scan finds
 * no value held twice (else 359 CannotConvertIndexToUnique with
 * `violations: [{ids: [...]}]`); `forceNonUnique: true` converts back.
 * `dryRun: true` only runs the scan of a `unique: true` conversion, and is
 * refused (72) for anything else. A converted index keeps its key + record
 * id table (catalog.h rid_in_key), so the conversion writes nothing but the
 * catalog entry; the scan runs before the exclusive lock, a chunk at a time
 * under the shared one (dup_scan_shared), so other operations do not wait
 * behind it. forceNonUnique on an index created unique copies its table
 * into that layout under the exclusive lock (mf_catalog_index_relayout:
 * reads the index only, no documents).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "catalog/coll_write.h"
#include "catalog/timeseries.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "common/log.h"
#include "index/index.h"
#include "doc/value.h"
#include "ttl/ttl.h"

/* Copies spec into out, replacing field `name` with v (appending it if absent); v NULL removes it. */
static void
spec_with(const bson_t *spec, const char *name, const bson_value_t *v, bson_t *out)
{
    bson_iter_t it;
    bool done = false;
    bson_init(out);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), name) == 0) {
            if (v != NULL && !done)
                bson_append_value(out, name, -1, v);
            done = true;
            continue;
        }
        bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    if (!done && v != NULL)
        bson_append_value(out, name, -1, v);
}

typedef struct index_mod {
    bool has_name, has_key, has_secs, has_hidden, has_archive, has_unique, has_prepare_unique, has_force_non_unique;
    bool unique, prepare_unique, force_non_unique;
    int nfields; /* modifications asked for (every field but name and keyPattern) */
    const char *name;
    bson_t key;
    bson_value_t secs_v; /* a copy: checked once it is a number, which owns nothing (strings are refused first) */
    int32_t secs;
    bool hidden;
    bool archive; /* mayfly: archive-on-expire (SPEC I2) */
} index_mod_t;

/* Parses the `index` sub-document's fields and their types (mongod's IDL pass: nothing else yet). */
static int
parse_index_mod(mf_op_t *op, bson_iter_t *idx, index_mod_t *m)
{
    bson_iter_t it;
    memset(m, 0, sizeof(*m));
    if (!BSON_ITER_HOLDS_DOCUMENT(idx))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'collMod.index' is the wrong type '%s', expected type 'object'",
                          mf_type_name(bson_iter_type(idx)));
    bson_iter_recurse(idx, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "name") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'collMod.index.name' is the wrong type '%s', expected type 'string'",
                                  mf_type_name(bson_iter_type(&it)));
            m->name = bson_iter_utf8(&it, NULL);
            m->has_name = true;
        } else if (strcmp(k, "keyPattern") == 0) {
            const uint8_t *data;
            uint32_t len;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'collMod.index.keyPattern' is the wrong type '%s', expected type 'object'",
                                  mf_type_name(bson_iter_type(&it)));
            bson_iter_document(&it, &len, &data);
            bson_init_static(&m->key, data, len);
            m->has_key = true;
        } else if (strcmp(k, "expireAfterSeconds") == 0) {
            m->secs_v = *bson_iter_value(&it); /* the iterator's value is only valid while it is */
            m->has_secs = true;
        } else if (strcmp(k, "hidden") == 0) {
            if (mf_op_safe_bool(op, "collMod.index.hidden", &it, &m->hidden) != 0)
                return -1;
            m->has_hidden = true;
        } else if (strcmp(k, "unique") == 0) {
            if (mf_op_safe_bool(op, "collMod.index.unique", &it, &m->unique) != 0)
                return -1;
            m->has_unique = true;
        } else if (strcmp(k, "prepareUnique") == 0) {
            if (mf_op_safe_bool(op, "collMod.index.prepareUnique", &it, &m->prepare_unique) != 0)
                return -1;
            m->has_prepare_unique = true;
        } else if (strcmp(k, "forceNonUnique") == 0) {
            if (mf_op_safe_bool(op, "collMod.index.forceNonUnique", &it, &m->force_non_unique) != 0)
                return -1;
            m->has_force_non_unique = true;
        } else if (strcmp(k, "archive") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'collMod.index.archive' is the wrong type '%s', expected type 'bool'",
                                  mf_type_name(bson_iter_type(&it)));
            m->archive = bson_iter_bool(&it);
            m->has_archive = true;
        } else {
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'collMod.index.%s' is an unknown field.", k);
        }
    }
    m->nfields = m->has_secs + m->has_hidden + m->has_archive + m->has_unique + m->has_prepare_unique +
                 m->has_force_non_unique;
    if (m->has_secs && !mf_value_is_number(&m->secs_v))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'collMod.index.expireAfterSeconds' is the wrong type '%s', expected types '[long, int, decimal, double']",
                          mf_type_name(m->secs_v.value_type));
    return 0;
}

/*
 * Checks the parsed `index` change against itself and the kind of
 * collection, in mongod's order (parseCollModRequest: everything that needs
 * no index).
 */
static int
check_index_mod(mf_op_t *op, index_mod_t *m, bool timeseries)
{
    if (m->has_name && m->has_key)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "Cannot specify both key pattern and name.");
    if (!m->has_name && !m->has_key)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "Must specify either index name or key pattern.");
    if (!m->has_secs && !m->has_hidden && !m->has_archive && !m->has_unique && !m->has_prepare_unique &&
        !m->has_force_non_unique)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "no expireAfterSeconds, hidden, unique, or prepareUnique field");
    if (m->has_unique && m->has_force_non_unique)
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "collMod does not support 'unique' and 'forceNonUnique' options at the same time");
    if (m->has_secs) {
        if (timeseries)
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "TTL indexes are not supported for time-series collections. Please refer to the "
                              "documentation and use the top-level 'expireAfterSeconds' option instead");
        if (mf_ttl_collmod_seconds(&m->secs_v, &m->secs, &op->err) != 0)
            return -1;
    }
    return 0;
}

static mf_index_t *
find_index(mf_coll_t *c, const index_mod_t *m)
{
    if (m->has_name) {
        mf_index_t *ix = mf_coll_index_by_name(c, m->name);
        return ix != NULL && !ix->building ? ix : NULL;
    }
    mf_index_t *first, *second;
    (void)mf_coll_indexes_by_key(c, &m->key, true, &first, &second);
    return first;
}

/* ---------- duplicates, for a conversion to unique ---------- */

#define DUP_SCAN_CHUNK 10000
#define DUP_VIOLATIONS_MAX (8 * 1024 * 1024) /* mongod's: half the largest document */

/*
 * A scan of a key + record id index for values more than one document has,
 * as mongod's scanIndexForDuplicates: entries come in key order, so equal
 * values are neighbours. Each group of documents sharing a value becomes
 * {ids: [their _ids]} in violations, up to DUP_VIOLATIONS_MAX bytes of
 * _ids (then too_many). The scan can stop after a chunk of entries and
 * resume after the last entry seen (prev, prev_rid).
 */
typedef struct dup_scan {
    char *ident;     /* the index scanned (owned), NULL before the scan starts */
    uint32_t gen;    /* its unique_gen when the scan began */
    bool done;       /* reached the last entry (or too_many) */
    uint8_t *prev;   /* the last entry's key without its record id (owned) */
    size_t prev_len, prev_cap;
    int64_t prev_rid;
    bool have_prev;
    bson_t violations; /* [{ids: [...]}, ...] */
    bson_t ids;        /* the current group's _ids, an array document */
    uint32_t ngroups, nids;
    size_t size;
    bool too_many;
} dup_scan_t;

static void
dup_scan_init(dup_scan_t *d)
{
    memset(d, 0, sizeof(*d));
    bson_init(&d->violations);
    bson_init(&d->ids);
}

static void
dup_scan_free(dup_scan_t *d)
{
    free(d->ident);
    free(d->prev);
    bson_destroy(&d->violations);
    bson_destroy(&d->ids);
    memset(d, 0, sizeof(*d));
}

/* Starts d over on ix (whose lock the caller holds). */
static void
dup_scan_start(dup_scan_t *d, const mf_index_t *ix)
{
    dup_scan_free(d);
    dup_scan_init(d);
    d->ident = mf_strdup(ix->ident);
    d->gen = ix->unique_gen;
}

/* Ends the current group: a value with two documents or more is a violation. */
static void
dup_group_end(dup_scan_t *d)
{
    if (d->nids >= 2 || (d->nids > 0 && d->too_many)) {
        char key[16];
        bson_t g;
        snprintf(key, sizeof(key), "%u", d->ngroups++);
        BSON_APPEND_DOCUMENT_BEGIN(&d->violations, key, &g);
        BSON_APPEND_ARRAY(&g, "ids", &d->ids);
        bson_append_document_end(&d->violations, &g);
    }
    bson_reinit(&d->ids);
    d->nids = 0;
}

/* Adds record rid's _id to the current group (a document gone since it was indexed is left out). */
static int
dup_add(mf_op_t *op, mf_coll_t *c, dup_scan_t *d, int64_t rid)
{
    bson_t doc;
    bson_iter_t it;
    int r = mf_coll_fetch(op->sess, c, rid, &doc, &op->err);
    if (r == MF_NOTFOUND)
        return 0;
    if (r != 0)
        return -1;
    if (bson_iter_init_find(&it, &doc, "_id")) {
        const bson_value_t *v = bson_iter_value(&it);
        bson_t one = BSON_INITIALIZER;
        bson_append_value(&one, "_id", 3, v);
        d->size += one.len - 5;
        bson_destroy(&one);
        if (d->size > DUP_VIOLATIONS_MAX) {
            /* As mongod: stop here, returning at least one _id. */
            d->too_many = true;
            if (d->ngroups > 0 || d->nids > 0) {
                bson_destroy(&doc);
                return 0;
            }
        }
        char key[16];
        snprintf(key, sizeof(key), "%u", d->nids++);
        bson_append_value(&d->ids, key, -1, v);
    }
    bson_destroy(&doc);
    return 0;
}

/*
 * Scans up to limit entries of ix (of collection c) after the last one d
 * saw, or to the end when limit is 0. The caller holds the catalog lock.
 * Checks for killOp and maxTimeMS every 1024 entries. Returns 0 (d->done
 * once the end is reached) or -1 with op->err.
 */
static int
dup_scan_run(mf_op_t *op, mf_coll_t *c, const mf_index_t *ix, dup_scan_t *d, size_t limit)
{
    mf_cur_t *icur = NULL;
    size_t n = 0;
    int r, rc = -1;

    if (mf_txn_begin(op->sess, &op->err) != 0)
        return -1;
    if (mf_cur_open(op->sess, ix->uri, &icur, &op->err) != 0)
        goto out;
    if (d->have_prev) {
        /* Resume just past the last entry seen: its key is prev then its record id. */
        uint8_t *resume = mf_malloc(d->prev_len + 8);
        memcpy(resume, d->prev, d->prev_len);
        for (int i = 7; i >= 0; i--)
            resume[d->prev_len + (size_t)(7 - i)] = (uint8_t)((uint64_t)d->prev_rid >> (i * 8));
        r = mf_cur_seek_bytes_ge(icur, resume, d->prev_len + 8);
        if (r == 0) {
            const uint8_t *k;
            size_t klen;
            mf_cur_key_bytes(icur, &k, &klen);
            if (klen == d->prev_len + 8 && memcmp(k, resume, klen) == 0)
                r = mf_cur_next(icur);
        }
        free(resume);
    } else {
        r = mf_cur_next(icur);
    }
    rc = 0;
    for (; r == 0; r = mf_cur_next(icur)) {
        const uint8_t *k;
        size_t klen;
        if (limit > 0 && n >= limit)
            break;
        if ((++n & 1023) == 0 && mf_curop_check_current(&op->err) != 0) {
            rc = -1;
            break;
        }
        mf_cur_key_bytes(icur, &k, &klen);
        if (klen < 8)
            continue;
        size_t vlen = klen - 8;
        int64_t rid = mf_ks_read_recordid(k, klen);
        if (d->have_prev && vlen == d->prev_len && memcmp(k, d->prev, vlen) == 0) {
            if ((d->nids == 0 && dup_add(op, c, d, d->prev_rid) != 0) || dup_add(op, c, d, rid) != 0) {
                rc = -1;
                break;
            }
            if (d->too_many)
                break;
        } else {
            dup_group_end(d);
            if (vlen > d->prev_cap) {
                d->prev_cap = vlen * 2;
                d->prev = mf_realloc(d->prev, d->prev_cap);
            }
            memcpy(d->prev, k, vlen);
            d->prev_len = vlen;
        }
        d->prev_rid = rid;
        d->have_prev = true;
    }
    if (rc == 0 && (r == MF_NOTFOUND || d->too_many)) {
        dup_group_end(d);
        d->done = true;
    } else if (rc == 0 && r != 0) {
        rc = mf_err_set(&op->err, MF_E_InternalError, "storage error scanning index %s of %s", ix->name, c->ns);
    }
out:
    if (icur != NULL)
        mf_cur_close(icur);
    mf_txn_abort(op->sess);
    return rc;
}

/* Whether converting ix to unique needs a scan: a key + record id index with prepareUnique set. */
static bool
dup_scan_wanted(const mf_index_t *ix)
{
    return ix != NULL && ix->rid_in_key && !ix->unique && ix->prepare_unique && !ix->building;
}

/*
 * The scan for a conversion to unique, run before collMod takes the
 * exclusive lock: a chunk at a time under the shared lock, released
 * between chunks, so that no other operation waits behind it (mongod too
 * scans without exclusive access). prepareUnique keeps new duplicates out
 * meanwhile. If the index changes between chunks (dropped, or its unique
 * or prepareUnique changed: unique_gen), d is emptied and collMod scans
 * under its exclusive lock instead. Returns 0 or -1 with op->err.
 */
static int
dup_scan_shared(mf_op_t *op, const char *name, const index_mod_t *m, dup_scan_t *d)
{
    while (!d->done) {
        mf_catalog_rdlock(op->eng->cat);
        mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
        mf_index_t *ix = c != NULL && !c->is_view ? find_index(c, m) : NULL;
        bool go = d->ident == NULL ? dup_scan_wanted(ix)
                                   : ix != NULL && strcmp(d->ident, ix->ident) == 0 && d->gen == ix->unique_gen;
        if (!go) {
            mf_catalog_unlock(op->eng->cat);
            dup_scan_free(d);
            dup_scan_init(d);
            return 0;
        }
        if (d->ident == NULL)
            dup_scan_start(d, ix);
        int rc = dup_scan_run(op, c, ix, d, DUP_SCAN_CHUNK);
        mf_catalog_unlock(op->eng->cat);
        mf_storage_session_release(op->sess);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* Replaces field name of *spec by v (removes it when v is NULL). */
static void
spec_set(bson_t *spec, const char *name, const bson_value_t *v)
{
    bson_t next;
    spec_with(spec, name, v, &next);
    bson_destroy(spec);
    bson_steal(spec, &next);
}

/*
 * Applies the index change m to collection c (exclusive catalog lock held),
 * checking everything first in mongod's order, so that a failure changes
 * nothing. d: a scan for duplicates already made (dup_scan_shared), used
 * when it covered this index as it still is. nmods: the modifications the
 * whole command asks for. dry_run: check a conversion to unique only.
 */
static int
apply_index_mod(mf_op_t *op, mf_coll_t *c, const index_mod_t *m, dup_scan_t *d, int nmods, bool dry_run)
{
    mf_index_t *ix = find_index(c, m);
    bool do_unique = false, do_prepare = false, do_force = false;
    bson_value_t yes = {.value_type = BSON_TYPE_BOOL};
    bson_t cur;
    bson_iter_t it;

    yes.value.v_bool = true;
    if (!m->has_name) {
        /* Indexes share a key pattern when their collation, filter, sparse or unique differ. */
        mf_index_t *first, *second;
        int n = mf_coll_indexes_by_key(c, &m->key, true, &first, &second);
        if (n > 1) {
            char kp[200], a[400], b[400];
            mf_fmt_doc(&m->key, kp, sizeof(kp));
            mf_fmt_doc(first->spec, a, sizeof(a));
            mf_fmt_doc(second->spec, b, sizeof(b));
            return mf_err_set(&op->err, MF_E_AmbiguousIndexKeyPattern,
                              "index keyPattern %s matches %d indexes, must use index name. Conflicting indexes:%s, %s",
                              kp, n, a, b);
        }
    }
    if (ix == NULL) {
        char shown[300];
        if (m->has_name)
            snprintf(shown, sizeof(shown), "%s", m->name);
        else
            mf_fmt_doc(&m->key, shown, sizeof(shown));
        return mf_err_set(&op->err, MF_E_IndexNotFound, "cannot find index %s for ns %s", shown, c->ns);
    }
    if (m->has_secs) {
        if (ix->is_id)
            return mf_err_set(&op->err, MF_E_InvalidOptions, "the _id field does not support TTL indexes");
        if (ix->kp.nfields != 1 || ix->kp.wildcard_compound) /* a compound wildcard's kp holds its regular fields only */
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "TTL indexes are single-field indexes, compound indexes do not support TTL");
    }
    if (m->has_unique) {
        if (!m->unique)
            return mf_err_set(&op->err, MF_E_BadValue, "Cannot make index non-unique");
        if (!ix->unique) {
            /* As mongod: a conversion takes two steps, prepareUnique first. */
            if (!ix->prepare_unique)
                return mf_err_set(&op->err, MF_E_InvalidOptions,
                                  "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.");
            do_unique = true;
        }
    }
    if (m->has_hidden && strncmp(c->name, "system.", 7) == 0 && strncmp(c->name, MF_TS_BUCKETS_PREFIX, strlen(MF_TS_BUCKETS_PREFIX)) != 0)
        return mf_err_set(&op->err, MF_E_BadValue, "Can't hide index on system collection");
    if (m->has_hidden && ix->is_id)
        return mf_err_set(&op->err, MF_E_BadValue, "can't hide _id index");
    do_prepare = m->has_prepare_unique && !ix->unique && ix->prepare_unique != m->prepare_unique;
    if (m->has_force_non_unique) {
        if (!m->force_non_unique)
            return mf_err_set(&op->err, MF_E_BadValue, "'forceNonUnique: false' is not supported");
        if (ix->unique && ix->is_id)
            return mf_err_set(&op->err, MF_E_InvalidOptions, "The _id index cannot be made non-unique");
        do_force = ix->unique;
    }
    if (do_prepare && nmods > 1)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "prepareUnique cannot be combined with any other modification.");
    if (dry_run && nmods > 1)
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "unique: true cannot be combined with any other modification in dry run mode.");
    if (m->has_archive && !m->has_secs && !mf_ttl_index_seconds(ix->spec, &(int64_t){0}))
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "the archive option is only valid on a TTL index (one with expireAfterSeconds)");
    if (do_unique) {
        if (d->ident == NULL || !d->done || strcmp(d->ident, ix->ident) != 0 || d->gen != ix->unique_gen) {
            dup_scan_start(d, ix); /* the shared scan did not cover the index as it is: scan it here */
            if (dup_scan_run(op, c, ix, d, 0) != 0)
                return -1;
        }
        if (d->ngroups > 0) {
            op->err_extra = bson_new();
            BSON_APPEND_ARRAY(op->err_extra, "violations", &d->violations);
            return mf_err_set(&op->err, MF_E_CannotConvertIndexToUnique, "%s",
                              d->too_many ? "Cannot convert the index to unique. Too many conflicting documents "
                                            "were detected. Please resolve them and rerun collMod."
                                          : "Cannot convert the index to unique. Please resolve conflicting "
                                            "documents before running collMod again.");
        }
    }
    if (dry_run)
        return 0;
    bool forced = false;
    if (do_force && !ix->rid_in_key) {
        /* Its table holds one entry per value: a copy laid out key + record id replaces it (ix is freed). */
        bson_t spec;
        bson_copy_to(ix->spec, &spec);
        spec_set(&spec, "unique", NULL);
        int rc = mf_catalog_index_relayout(op->eng->cat, c, ix, &spec, &op->err);
        bson_destroy(&spec);
        if (rc != 0)
            return -1;
        ix = find_index(c, m);
        forced = true;
        do_force = false;
    }

    bson_copy_to(ix->spec, &cur);
    if (m->has_secs) {
        int64_t old;
        bson_value_t nv = {.value_type = BSON_TYPE_INT32};
        nv.value.v_int32 = m->secs;
        if (mf_ttl_index_seconds(&cur, &old))
            BSON_APPEND_INT64(op->reply, "expireAfterSeconds_old", old);
        BSON_APPEND_INT64(op->reply, "expireAfterSeconds_new", m->secs);
        spec_set(&cur, "expireAfterSeconds", &nv);
    }
    if (m->has_hidden) {
        bool old = bson_iter_init_find(&it, &cur, "hidden") && bson_iter_as_bool(&it);
        BSON_APPEND_BOOL(op->reply, "hidden_old", old);
        BSON_APPEND_BOOL(op->reply, "hidden_new", m->hidden);
        spec_set(&cur, "hidden", m->hidden ? &yes : NULL);
    }
    if (do_unique) {
        /* The table keeps its key + record id layout; writers now refuse a second document per value. */
        BSON_APPEND_BOOL(op->reply, "unique_new", true);
        spec_set(&cur, "unique", &yes);
        spec_set(&cur, "prepareUnique", NULL);
    }
    if (do_prepare) {
        BSON_APPEND_BOOL(op->reply, "prepareUnique_old", ix->prepare_unique);
        BSON_APPEND_BOOL(op->reply, "prepareUnique_new", m->prepare_unique);
        spec_set(&cur, "prepareUnique", m->prepare_unique ? &yes : NULL);
    }
    if (do_force || forced) {
        BSON_APPEND_BOOL(op->reply, "forceNonUnique_new", true);
        spec_set(&cur, "unique", NULL);
    }
    if (m->has_archive) {
        bool old = bson_iter_init_find(&it, &cur, "archive") && bson_iter_as_bool(&it);
        BSON_APPEND_BOOL(op->reply, "archive_old", old);
        BSON_APPEND_BOOL(op->reply, "archive_new", m->archive);
        spec_set(&cur, "archive", m->archive ? &yes : NULL);
    }
    bool was_unique = ix->unique, was_prepare = ix->prepare_unique;
    bson_t *old_spec = mf_index_set_spec(ix, bson_copy(&cur));
    bson_destroy(&cur);
    if (do_unique || do_prepare || do_force) {
        /* Set before the entry is written: it records ridInKey for a unique key + record id index. */
        ix->unique = do_unique || (was_unique && !do_force);
        ix->prepare_unique = do_prepare ? m->prepare_unique : was_prepare && !do_unique;
        ix->unique_gen++;
    }
    if (mf_catalog_coll_persist(op->eng->cat, c, &op->err) != 0) {
        bson_destroy(mf_index_set_spec(ix, old_spec));
        ix->unique = was_unique;
        ix->prepare_unique = was_prepare;
        return -1;
    }
    bson_destroy(old_spec);
    mf_log(MF_LOG_INFO, "COMMAND", "collMod %s index %s", c->ns, ix->name);
    return 0;
}

/*
 * Time-series collMod (SPEC F5): expireAfterSeconds (a number >= 0, or
 * "off" to remove it), timeseries.granularity (only growing) or
 * bucketMaxSpanSeconds + bucketRoundingSeconds (equal, never smaller), and
 * an index change made on the buckets (ts_index_mod), as MongoDB 8.0
 * allows. The buckets collection holds the options; the view's copy of
 * timeseries follows. collMod aimed at a buckets collection is 73, as
 * mongod's. Exclusive session held.
 */
typedef struct ts_mod {
    bool has_expire, expire_off;
    int64_t expire;
    bson_t ts;       /* the new timeseries options (valid when has_ts) */
    bool has_ts;
} ts_mod_t;

static int
parse_ts_expire(mf_op_t *op, const bson_value_t *v, ts_mod_t *tm)
{
    tm->has_expire = true;
    if (v->value_type == BSON_TYPE_UTF8) {
        if (strcmp(v->value.v_utf8.str, "off") != 0)
            return mf_err_set(&op->err, MF_E_InvalidOptions, "Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '%s'. Accepted value is 'off'",
                              v->value.v_utf8.str);
        tm->expire_off = true;
        return 0;
    }
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'collMod.expireAfterSeconds' is the wrong type '%s', expected types '[string, long, int, decimal, double]'",
                          mf_type_name(v->value_type));
    double d = mf_value_as_double(v);
    if (d < 0)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0");
    if (mf_op_coll_expire_range(op, d) != 0)
        return -1;
    tm->expire = mf_double_clamp_ll(d); /* safeInt64: truncated, NaN as 0 */
    return 0;
}

/*
 * ts_mod_options: the new timeseries options for change mod of current
 * options cur (into tm->ts; tm->has_ts stays false when nothing changes),
 * as MongoDB 8.0's isTimeseriesGranularityValidAndUnchanged and
 * applyTimeseriesOptionsModifications: a granularity may only grow
 * (seconds -> minutes / hours, minutes -> hours); from custom bucketing
 * (no granularity) it is allowed when its span and rounding are both at
 * least the current ones. bucketMaxSpanSeconds + bucketRoundingSeconds
 * (equal) must not be below the current values, which a granularity
 * implies when they are not stored. Setting what is already set is a
 * no-op. Failures are 72 InvalidOptions (2 for an unknown granularity).
 */
static int
ts_mod_options(mf_op_t *op, const bson_t *cur, const bson_value_t *mod, ts_mod_t *tm)
{
    static const char *order[] = {"seconds", "minutes", "hours"};
    static const int32_t spans[] = {3600, 86400, 2592000};
    static const int32_t roundings[] = {60, 3600, 86400};
    bson_iter_t it;
    const char *gran = NULL;
    bool has_span = false, has_rounding = false;
    int64_t span = 0, rounding = 0, cur_span = 0, cur_rounding = 0;
    int from = -1, to = -1;

    if (mod->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'collMod.timeseries' is the wrong type '%s', expected type 'object'",
                          mf_type_name(mod->value_type));
    bson_iter_init_from_data(&it, mod->value.v_doc.data, mod->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "granularity") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
            gran = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "bucketMaxSpanSeconds") == 0 && mf_value_is_number(bson_iter_value(&it))) {
            span = bson_iter_as_int64(&it);
            has_span = true;
        } else if (strcmp(k, "bucketRoundingSeconds") == 0 && mf_value_is_number(bson_iter_value(&it))) {
            rounding = bson_iter_as_int64(&it);
            has_rounding = true;
        } else {
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'collMod.timeseries.%s' is an unknown field.", k);
        }
    }
    bson_iter_init(&it, cur);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "granularity") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
            for (int i = 0; i < 3; i++)
                if (strcmp(bson_iter_utf8(&it, NULL), order[i]) == 0)
                    from = i;
        } else if (strcmp(k, "bucketMaxSpanSeconds") == 0) {
            cur_span = bson_iter_as_int64(&it);
        } else if (strcmp(k, "bucketRoundingSeconds") == 0) {
            cur_rounding = bson_iter_as_int64(&it);
        }
    }
    if (gran == NULL && !has_span && !has_rounding)
        return 0; /* {timeseries: {}} changes nothing */
    if (gran != NULL) {
        for (int i = 0; i < 3; i++)
            if (strcmp(gran, order[i]) == 0)
                to = i;
        if (to < 0)
            return mf_err_set(&op->err, MF_E_BadValue, "Enumeration value '%s' for field 'collMod.timeseries.granularity' is not a valid value.",
                              gran);
        if (has_span && span != spans[to])
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the default for the provided granularity");
        if (has_rounding)
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Timeseries 'bucketRoundingSeconds' is not configurable alongside the granularity parameter");
        if (from == to)
            return 0;
        if (from > to || (from == 1 && to != 2))
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Invalid transition for timeseries.granularity. Can only transition from 'seconds' to 'minutes' or 'minutes' to 'hours'.");
        span = spans[to];
        rounding = roundings[to];
    } else {
        if (!has_span || !has_rounding)
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other");
        if (span != rounding)
            return mf_err_set(&op->err, MF_E_InvalidOptions, "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'");
    }
    /* What is not stored comes from the granularity (custom bucketing: the default one's), as in mongod. */
    cur_span = cur_span > 0 ? cur_span : spans[from < 0 ? 0 : from];
    cur_rounding = cur_rounding > 0 ? cur_rounding : roundings[from < 0 ? 0 : from];
    if (from < 0 || gran == NULL) {
        /* A granularity that grows needs no more; anything else must not shrink either span. */
        if (cur_span == span && cur_rounding == rounding)
            return 0;
        if (cur_span > span)
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition");
        if (cur_rounding > rounding)
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "Timeseries 'bucketRoundingSeconds' needs to be equal or greater to transition");
    }
    /* As mongod's applyTimeseriesOptionsModifications: a granularity, or a custom rounding, with its span. */
    bson_init(&tm->ts);
    bson_iter_init(&it, cur);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "timeField") == 0 || strcmp(k, "metaField") == 0)
            bson_append_value(&tm->ts, k, -1, bson_iter_value(&it));
    }
    if (gran != NULL)
        BSON_APPEND_UTF8(&tm->ts, "granularity", order[to]);
    else
        BSON_APPEND_INT32(&tm->ts, "bucketRoundingSeconds", (int32_t)rounding);
    BSON_APPEND_INT32(&tm->ts, "bucketMaxSpanSeconds", (int32_t)span);
    tm->has_ts = true;
    return 0;
}

/* options_with: c's options with timeseries replaced (when ts) and expireAfterSeconds set or removed. */
static bson_t *
options_with(const bson_t *opts, const bson_t *ts, const ts_mod_t *tm)
{
    bson_t *out = bson_new();
    bson_iter_t it;
    bson_iter_init(&it, opts);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "timeseries") == 0 && ts != NULL)
            BSON_APPEND_DOCUMENT(out, k, ts);
        else if (strcmp(k, "expireAfterSeconds") != 0 || !tm->has_expire)
            bson_append_value(out, k, -1, bson_iter_value(&it));
    }
    if (tm->has_expire && !tm->expire_off)
        BSON_APPEND_INT64(out, "expireAfterSeconds", tm->expire);
    return out;
}

/* set_options: replaces c's options and persists them (restored on failure). */
static int
set_options(mf_op_t *op, mf_coll_t *c, bson_t *opts)
{
    bson_t *old = c->options;
    c->options = opts;
    if (mf_catalog_coll_persist(op->eng->cat, c, &op->err) != 0) {
        c->options = old;
        bson_destroy(opts);
        return -1;
    }
    bson_destroy(old);
    return 0;
}

static int
coll_mod_timeseries(mf_op_t *op, mf_coll_t *v, const ts_mod_t *tm)
{
    mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, v);
    if (b == NULL)
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "ns does not exist: %s.%s%s", op->db, MF_TS_BUCKETS_PREFIX, v->name);
    if (tm->has_expire && b->ts_expire >= 0)
        BSON_APPEND_INT64(op->reply, "expireAfterSeconds_old", b->ts_expire);
    if (set_options(op, b, options_with(b->options, tm->has_ts ? &tm->ts : NULL, tm)) != 0)
        return -1;
    if (tm->has_ts) {
        ts_mod_t none = {0};
        if (set_options(op, v, options_with(v->options, &tm->ts, &none)) != 0)
            return -1;
    }
    if (tm->has_expire && !tm->expire_off)
        BSON_APPEND_INT64(op->reply, "expireAfterSeconds_new", tm->expire);
    mf_log(MF_LOG_INFO, "COMMAND", "collMod %s (time-series)", v->ns);
    return 0;
}

/*
 * ts_index_mod: the index change m on time-series view v, made on its
 * buckets collection as mongod's makeTimeseriesBucketsCollModCommand does:
 * a key pattern is translated to the buckets' (mf_ts_key_to_buckets: the
 * user sees {<meta>: 1, <time>: 1}, the buckets hold {meta: 1,
 * control.min.<time>: 1, control.max.<time>: 1}); a name is the same in
 * both. So hidden (and the unique conversions) work as on any collection;
 * TTL was refused before (check_index_mod). Exclusive session held.
 */
static int
ts_index_mod(mf_op_t *op, mf_coll_t *v, const index_mod_t *m, dup_scan_t *d, int nmods, bool dry_run)
{
    mf_coll_t *b = mf_ts_buckets_of(op->eng->cat, v);
    mf_ts_spec_t spec;
    index_mod_t bm = *m;
    bson_t bkey;
    int rc;

    if (b == NULL || !mf_ts_spec_of(v, &spec))
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "ns does not exist: %s.%s%s", op->db, MF_TS_BUCKETS_PREFIX, v->name);
    bson_init(&bkey);
    if (m->has_key) {
        bson_destroy(&bkey);
        mf_ts_key_to_buckets(&spec, &m->key, false, &bkey);
        bson_init_static(&bm.key, bson_get_data(&bkey), bkey.len);
    }
    rc = apply_index_mod(op, b, &bm, d, nmods, dry_run);
    bson_destroy(&bkey);
    return rc;
}

/* collMod's cappedSize / cappedMax (MongoDB 6.0+), as checked while parsing. */
typedef struct capped_mod {
    bool has_size, has_max;
    int64_t size; /* bytes, 1 .. 1 PB, kept as given (8.0 does not round it) */
    int64_t max;  /* documents; <= 0 asks for no limit: 0x7fffffff, as mongod's adjustCappedMaxDocs */
} capped_mod_t;

#define CAPPED_SIZE_LIMIT (1LL << 50) /* 1 PB */
#define CAPPED_MAX_DOCS_NONE 0x7fffffff

/*
 * Parses cappedSize or cappedMax (its IDL type safeInt64: any number,
 * truncated; else 14) and checks its IDL bounds (51024): cappedSize in
 * [1, 1 PB], cappedMax below 2^31. Returns 0 or -1 with op->err.
 */
static int
parse_capped_mod(mf_op_t *op, bson_iter_t *it, capped_mod_t *cap)
{
    const char *k = bson_iter_key(it);
    const bson_value_t *v = bson_iter_value(it);
    int64_t n;

    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'collMod.%s' is the wrong type '%s', expected types '[long, int, decimal, double']",
                          k, mf_type_name(v->value_type));
    if (!mf_value_as_int64(v, &n)) {
        double d = mf_value_as_double(v);
        n = d != d ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    }
    if (strcmp(k, "cappedSize") == 0) {
        if (n < 1)
            return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'cappedSize' value must be >= 1, actual value '%lld'",
                              (long long)n);
        if (n > CAPPED_SIZE_LIMIT)
            return mf_err_set(&op->err, MF_E_Location51024,
                              "BSON field 'cappedSize' value must be <= %lld, actual value '%lld'", CAPPED_SIZE_LIMIT,
                              (long long)n);
        cap->has_size = true;
        cap->size = n;
        return 0;
    }
    if (n >= (1LL << 31))
        return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'cappedMax' value must be < 2147483648, actual value '%lld'",
                          (long long)n);
    cap->has_max = true;
    cap->max = n <= 0 ? CAPPED_MAX_DOCS_NONE : n;
    return 0;
}

/*
 * The state a collMod changes, before it, as mongod's OpObserverImpl::onCollMod
 * logs it in the entry's o2 (out initialised by the caller):
 * collectionOptions_old, the collection's options (CollectionOptions::toBSON:
 * its uuid first, then what is set), and when the command changes an index
 * (m != NULL), indexOptions_old with the old value of each index option it
 * names (expireAfterSeconds only when the index had one; hidden and
 * prepareUnique false when unset).
 */
static void
old_state_of(const mf_coll_t *c, const index_mod_t *m, bson_t *out)
{
    bson_t co, io;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT_BEGIN(out, "collectionOptions_old", &co);
    bson_append_binary(&co, "uuid", -1, BSON_SUBTYPE_UUID, c->uuid, 16);
    if (c->options != NULL && bson_iter_init(&it, c->options))
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "uuid") != 0)
                bson_append_value(&co, bson_iter_key(&it), -1, bson_iter_value(&it));
    bson_append_document_end(out, &co);
    if (m == NULL)
        return;
    mf_index_t *ix = find_index((mf_coll_t *)c, m);
    BSON_APPEND_DOCUMENT_BEGIN(out, "indexOptions_old", &io);
    if (ix != NULL) {
        /* mongod appends it as durationCount<Seconds>, a long long. */
        if (m->has_secs && bson_iter_init_find(&it, ix->spec, "expireAfterSeconds") && BSON_ITER_HOLDS_NUMBER(&it))
            BSON_APPEND_INT64(&io, "expireAfterSeconds", bson_iter_as_int64(&it));
        if (m->has_hidden)
            BSON_APPEND_BOOL(&io, "hidden", bson_iter_init_find(&it, ix->spec, "hidden") && bson_iter_as_bool(&it));
        if (m->has_prepare_unique)
            BSON_APPEND_BOOL(&io, "prepareUnique",
                             bson_iter_init_find(&it, ix->spec, "prepareUnique") && bson_iter_as_bool(&it));
    }
    bson_append_document_end(out, &io);
}

static int
cmd_coll_mod(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    index_mod_t m;
    bool has_index = false, has_ts_val = false, dry_run = false, pre_on = false;
    bson_t opts;
    bson_value_t ts_val;
    ts_mod_t tm;
    capped_mod_t cap = {0};
    dup_scan_t d;
    bson_t old_state; /* {collectionOptions_old, indexOptions_old?}: mongod's o2 of a collMod entry */
    int rc = 0;

    memset(&tm, 0, sizeof tm);
    memset(&ts_val, 0, sizeof ts_val);

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    /* Parse everything first: a failing command changes nothing. */
    bson_init(&opts);
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "index") == 0) {
            if (parse_index_mod(op, &it, &m) != 0) {
                bson_destroy(&opts);
                return -1;
            }
            has_index = true;
        } else if (strcmp(k, "validator") == 0 || strcmp(k, "validationLevel") == 0 ||
                   strcmp(k, "validationAction") == 0) {
            if (mf_cmd_validation_option(op, "collMod", &it) != 0) {
                bson_destroy(&opts);
                return -1;
            }
            bson_append_value(&opts, k, -1, bson_iter_value(&it));
        } else if (strcmp(k, "viewOn") == 0 || strcmp(k, "pipeline") == 0) {
            /* A view's definition (collmod.idl: viewOn a string, pipeline an array). */
            bool is_on = k[0] == 'v';
            if (is_on ? !BSON_ITER_HOLDS_UTF8(&it) : !BSON_ITER_HOLDS_ARRAY(&it)) {
                bson_destroy(&opts);
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'collMod.%s' is the wrong type '%s', "
                                  "expected type '%s'", k, mf_type_name(bson_iter_type(&it)), is_on ? "string" : "array");
            }
            if (is_on && bson_iter_utf8(&it, NULL)[0] == '\0') {
                bson_destroy(&opts);
                return mf_err_set(&op->err, MF_E_BadValue, "'viewOn' cannot be empty");
            }
            bson_append_value(&opts, k, -1, bson_iter_value(&it));
        } else if (strcmp(k, "changeStreamPreAndPostImages") == 0) {
            if (mf_cmd_pre_images_option(op, "collMod", &it, &pre_on) != 0) {
                bson_destroy(&opts);
                return -1;
            }
            /* Kept as {enabled: true}; false removes the option (mongod stores it only when enabled). */
            bson_t pi;
            BSON_APPEND_DOCUMENT_BEGIN(&opts, "changeStreamPreAndPostImages", &pi);
            BSON_APPEND_BOOL(&pi, "enabled", pre_on);
            bson_append_document_end(&opts, &pi);
        } else if (strcmp(k, "expireAfterSeconds") == 0) {
            if (parse_ts_expire(op, bson_iter_value(&it), &tm) != 0) {
                bson_destroy(&opts);
                return -1;
            }
        } else if (strcmp(k, "timeseries") == 0) {
            ts_val = *bson_iter_value(&it);
            has_ts_val = true;
        } else if (strcmp(k, "cappedSize") == 0 || strcmp(k, "cappedMax") == 0) {
            if (parse_capped_mod(op, &it, &cap) != 0) {
                bson_destroy(&opts);
                return -1;
            }
        } else if (k[0] == '$' || strcmp(k, "lsid") == 0 || strcmp(k, "writeConcern") == 0 ||
                   strcmp(k, "comment") == 0 || strcmp(k, "maxTimeMS") == 0 || strcmp(k, "txnNumber") == 0 ||
                   strcmp(k, "apiVersion") == 0 || strcmp(k, "apiStrict") == 0 ||
                   strcmp(k, "apiDeprecationErrors") == 0) {
            continue;
        } else if (strcmp(k, "dryRun") == 0) {
            if (mf_op_safe_bool(op, "collMod.dryRun", &it, &dry_run) != 0) {
                bson_destroy(&opts);
                return -1;
            }
        } else if (!mf_cmd_is_generic_arg(k)) {
            /* collmod.idl is strict; its fields mayfly does not implement (viewOn, pipeline ...) stay 72. */
            static const char *const idl_fields[] = {
                "recordPreImages",
                "timeseriesBucketsMayHaveMixedSchemaData", "collectionUUID", "isTimeseriesNamespace", NULL};
            bool known = false;
            for (int i = 0; idl_fields[i] != NULL && !known; i++)
                known = strcmp(idl_fields[i], k) == 0;
            bson_destroy(&opts);
            if (!known)
                return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'collMod.%s' is an unknown field.", k);
            return mf_err_set(&op->err, MF_E_InvalidOptions, "unknown option to collMod: %s", k);
        }
    }

    if (strncmp(name, MF_TS_BUCKETS_PREFIX, strlen(MF_TS_BUCKETS_PREFIX)) == 0) {
        /*
         * As mongod's CmdCollMod, before anything else: changing the buckets
         * directly would leave the time-series view out of step with them.
         */
        bson_destroy(&opts);
        return mf_err_set(&op->err, MF_E_InvalidNamespace,
                          "collMod on a time-series collection's underlying buckets collection is not supported.");
    }
    if (dry_run) {
        /* mongod's dry run checks a conversion to unique for duplicates and changes nothing; nothing else may ask for it. */
        const char *why = !has_index                 ? "dry run mode requires an valid index modification."
                          : !m.has_unique || !m.unique ? "dry run mode requires an index modification with unique: true."
                                                       : NULL;
        if (why != NULL) {
            bson_destroy(&opts);
            return mf_err_set(&op->err, MF_E_InvalidOptions, "%s", why);
        }
    }
    int nmods = (has_index ? m.nfields : 0) + (int)bson_count_keys(&opts) + tm.has_expire + has_ts_val;
    dup_scan_init(&d);
    if (has_index && m.has_unique && m.unique && m.has_name != m.has_key && (!dry_run || nmods == 1) &&
        dup_scan_shared(op, name, &m, &d) != 0) {
        dup_scan_free(&d);
        bson_destroy(&opts);
        return -1;
    }

    bson_init(&old_state);
    mf_catalog_wrlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL) {
        rc = mf_err_set(&op->err, MF_E_NamespaceNotFound, "ns does not exist: %s.%s", op->db, name);
        goto out;
    }
    old_state_of(c, has_index ? &m : NULL, &old_state);
    if (c->is_view && c->is_timeseries) {
        bson_t cur;
        if (cap.has_size || cap.has_max) {
            /* mongod runs it on the buckets collection, which is not capped. */
            rc = mf_err_set(&op->err, MF_E_InvalidOptions, "Collection must be capped.");
            goto out;
        }
        if (has_index && (rc = check_index_mod(op, &m, true)) != 0)
            goto out;
        if (!bson_empty(&opts)) {
            /* mongod passes them to the buckets collection, whose parseCollModRequest refuses them. */
            bson_iter_t oi;
            bson_iter_init(&oi, &opts);
            bson_iter_next(&oi);
            rc = mf_err_set(&op->err, MF_E_InvalidOptions, "option not supported on a time-series collection: %s",
                            bson_iter_key(&oi));
            goto out;
        }
        if (has_ts_val && mf_ts_options_of(c, &cur) && (rc = ts_mod_options(op, &cur, &ts_val, &tm)) != 0)
            goto out;
        if (has_index && (rc = ts_index_mod(op, c, &m, &d, nmods, dry_run)) != 0)
            goto out;
        if (dry_run) {
            c = NULL; /* nothing changed: no event */
            goto out;
        }
        if (!has_index || tm.has_expire || has_ts_val)
            rc = coll_mod_timeseries(op, c, &tm);
        goto out;
    }
    bool has_on = bson_has_field(&opts, "viewOn"), has_pl = bson_has_field(&opts, "pipeline");
    if ((has_on || has_pl) && !c->is_view) {
        rc = mf_err_set(&op->err, MF_E_InvalidOptions, "option only supported on a view: %s", has_on ? "viewOn" : "pipeline");
        goto out;
    }
    if (has_on != has_pl) {
        rc = mf_err_set(&op->err, MF_E_InvalidOptions,
                        "must specify both 'viewOn' and 'pipeline' when applying collMod to a view");
        goto out;
    }
    if (has_on) {
        /* The new definition is checked as create checks one: its pipeline, and no cycle of views. */
        bson_iter_t vo, pl;
        bson_value_t pv;
        bson_iter_init_find(&vo, &opts, "viewOn");
        bson_iter_init_find(&pl, &opts, "pipeline");
        pv = *bson_iter_value(&pl);
        if ((rc = mf_cmd_check_view_options(op, &opts)) != 0 ||
            (rc = mf_cmd_view_graph_check(op, op->db, name, bson_iter_utf8(&vo, NULL), &pv, c->options)) != 0)
            goto out;
    }
    if (c->is_view) {
        /* As mongod: the first option a view cannot take, in mongod's order of checks. */
        const char *what = cap.has_size ? "cappedSize" : cap.has_max ? "cappedMax"
                           : has_index ? "index" : bson_has_field(&opts, "validator") ? "validator"
                           : bson_has_field(&opts, "validationLevel")             ? "validationLevel"
                           : bson_has_field(&opts, "validationAction")            ? "validationAction"
                           : tm.has_expire                                        ? "expireAfterSeconds"
                           : has_ts_val                                           ? "timeseries"
                           : bson_has_field(&opts, "changeStreamPreAndPostImages") ? "changeStreamPreAndPostImages"
                                                                                  : NULL;
        if (what != NULL) {
            rc = mf_err_set(&op->err, MF_E_InvalidOptions, "option not supported on a view: %s", what);
            goto out;
        }
    }
    if (cap.has_size || cap.has_max) {
        /* mongod checks the capped limits before the index change (parseCollModRequest). */
        if (!c->capped) {
            rc = mf_err_set(&op->err, MF_E_InvalidOptions, "Collection must be capped.");
            goto out;
        }
        if (strcmp(c->ns, "local.oplog.rs") == 0) {
            rc = mf_err_set(&op->err, MF_E_InvalidOptions,
                            "Cannot resize the oplog using this command. Use the 'replSetResizeOplog' command instead.");
            goto out;
        }
    }
    if (has_index && (rc = check_index_mod(op, &m, false)) != 0)
        goto out;
    if (dry_run) {
        rc = apply_index_mod(op, c, &m, &d, nmods, true);
        c = NULL; /* nothing changed: no event */
        goto out;
    }
    if (tm.has_expire && c->clustered && !has_ts_val) {
        /* A clustered collection's TTL (SPEC: TTL on a clustered collection): its expireAfterSeconds option. */
        if (c->clustered_expire >= 0)
            BSON_APPEND_INT64(op->reply, "expireAfterSeconds_old", c->clustered_expire);
        ts_mod_t only = tm;
        if (set_options(op, c, options_with(c->options, NULL, &only)) != 0) {
            rc = -1;
            goto out;
        }
        if (!tm.expire_off)
            BSON_APPEND_INT64(op->reply, "expireAfterSeconds_new", tm.expire);
        tm.has_expire = false;
        if (!has_index && bson_empty(&opts))
            goto out;
    }
    if (tm.has_expire) {
        rc = mf_err_set(&op->err, MF_E_InvalidOptions,
                        "'expireAfterSeconds' option is only supported on collections clustered by _id");
        goto out;
    }
    if (has_ts_val) {
        rc = mf_err_set(&op->err, MF_E_InvalidOptions, "option only supported on a time-series collection: timeseries");
        goto out;
    }
    /* Check the new collection options before changing anything (a failed collMod changes nothing). */
    bson_t merged;
    bson_init(&merged);
    if (!bson_empty(&opts)) {
        bson_iter_t oi;
        bson_iter_init(&oi, c->options);
        while (bson_iter_next(&oi)) {
            if (!bson_has_field(&opts, bson_iter_key(&oi)))
                bson_append_value(&merged, bson_iter_key(&oi), -1, bson_iter_value(&oi));
        }
        bson_iter_init(&oi, &opts);
        while (bson_iter_next(&oi)) {
            if (strcmp(bson_iter_key(&oi), "changeStreamPreAndPostImages") == 0 && !pre_on)
                continue; /* disabled: the option goes */
            if (strcmp(bson_iter_key(&oi), "validator") == 0 && BSON_ITER_HOLDS_DOCUMENT(&oi) &&
                bson_iter_value(&oi)->value.v_doc.data_len <= 5)
                continue; /* validator: {} removes it (CollectionOptions::toBSON shows no empty validator) */
            bson_append_value(&merged, bson_iter_key(&oi), -1, bson_iter_value(&oi));
        }
        bson_iter_t vi;
        if (bson_iter_init_find(&vi, &opts, "validator"))
            mf_cmd_count_validator(op, true, bson_iter_value(&vi), mf_cmd_validator_parses(&merged));
        /* A new validator where mongod's parseValidator refuses one (checkValidatorCanBeUsedOnNs). */
        if ((rc = mf_coll_validator_allowed(c->db, c->name, c->uuid, &opts, &op->err)) != 0 ||
            (rc = mf_coll_options_check(&merged, true, &op->err)) != 0) {
            bson_destroy(&merged);
            goto out;
        }
    }
    if (has_index && (rc = apply_index_mod(op, c, &m, &d, nmods, false)) != 0) {
        bson_destroy(&merged);
        goto out;
    }
    if (!bson_empty(&opts)) {
        bson_t *old = c->options;
        mf_cmd_options_canonical(&merged);
        c->options = bson_copy(&merged);
        bson_destroy(&merged);
        if ((rc = mf_catalog_coll_persist(op->eng->cat, c, &op->err)) != 0) {
            bson_destroy(c->options);
            c->options = old;
        } else {
            bson_destroy(old);
        }
    } else {
        bson_destroy(&merged);
    }
    if (rc == 0 && (cap.has_size || cap.has_max)) {
        /* The new limits hold from the next insert on, which removes the oldest documents beyond them (as mongod). */
        rc = mf_catalog_coll_resize_capped(op->eng->cat, c, cap.has_size ? cap.size : -1, cap.has_max ? cap.max : -1,
                                           &op->err);
        if (rc == 0)
            mf_log(MF_LOG_INFO, "COMMAND", "collMod %s capped size %lld max %lld", c->ns, (long long)c->capped_size,
                   (long long)c->capped_max);
    }
out:
    if (rc == 0 && c != NULL) {
        /*
         * Reported while the catalog's exclusive lock is held, like every DDL
         * change (catalog/observer.h): the command, and as "$o2" the state
         * before it, which the oplog logs as the entry's o2 (mongod's
         * onCollMod; a change stream's stateBeforeChange).
         */
        bson_t detail;
        bson_init(&detail);
        bson_concat(&detail, op->cmd);
        BSON_APPEND_DOCUMENT(&detail, "$o2", &old_state);
        mf_ddl_event_t ev = {MF_DDL_COLLMOD, c->ns, NULL, c->uuid, &detail};
        mf_observers_ddl(mf_catalog_observers(op->eng->cat), &ev);
        bson_destroy(&detail);
    }
    mf_catalog_unlock(op->eng->cat);
    bson_destroy(&old_state);
    dup_scan_free(&d);
    bson_destroy(&opts);
    if (tm.has_ts)
        bson_destroy(&tm.ts);
    return rc;
}

const mf_cmd_def_t mf_cmds_collmod[] = {
    {"collMod", cmd_coll_mod, 0, NULL},
    {NULL, NULL, 0, NULL},
};
