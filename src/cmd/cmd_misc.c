/*
 * cmd_misc.c: smaller MongoDB 8.0 commands that fit no other command file:
 * convertToCapped, cloneCollectionAsCapped, dataSize, dbHash,
 * validateDBMetadata, top, lockInfo, connPoolStats and the index filter /
 * plan cache commands (planCacheClear, planCacheClearFilters,
 * planCacheListFilters, planCacheSetFilter).
 *
 * Capped copies (mongod's capped_utils): cloneCollectionAsCapped creates the
 * target with the source's options plus {capped: true, size} and copies the
 * source's documents in record-id (natural) order, in chunked transactions,
 * under the exclusive lock of both collections; the capped insert path
 * removes the oldest documents once the target is over its size, so what is
 * left is the newest documents that fit. Only the _id index is created on
 * the copy, as mongod does. convertToCapped clones into a temporary
 * collection "tmp<5 hex>.convertToCapped.<name>" and renames it over the
 * source (the source's drop is in the rename's catalog transaction), all in
 * one exclusive lock session, so readers see either the old collection or
 * the new one. A failure drops the temporary collection and leaves the
 * source as it was. The copy loop checks for interruption every chunk.
 *
 * dbHash hashes each collection's documents in _id-index order with MD5
 * (OpenSSL EVP), like mongod: collections {name: hex}, md5 = MD5 of the
 * per-collection hex strings in name order. Views, the "local" database
 * and system collections other than the replicated ones (system.users,
 * system.roles, system.js, system.version ... and time-series buckets) are
 * left out: mongod hashes only replicated collections.
 *
 * top reports every collection with mongod's counters (time in
 * microseconds and count of total, readLock, writeLock, queries, getmore,
 * insert, update, remove, commands), which the operation registry
 * (common/curop.c) adds up as each client operation ends.
 *
 * Index filters (planCacheSetFilter) are kept by query/index_filter.c, in
 * memory per collection and query shape, as mongod keeps them; the planner
 * restricts its choice of index to them. mayfly has no plan cache (every
 * query is planned afresh), so planCacheClear only checks its arguments.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "catalog/coll_write.h"
#include "catalog/timeseries.h"
#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "doc/value.h"
#include "index/keystring.h"
#include "query/index_filter.h"
#include "query/agg.h"

#define COPY_CHUNK 256 /* documents per transaction of a capped copy */

/* ---------- convertToCapped / cloneCollectionAsCapped ---------- */

/*
 * capped_size_arg: the command's "size": a number that fits in 64 bits
 * (else 2 BadValue). *present is false when it is absent.
 */
static int
capped_size_arg(mf_op_t *op, int64_t *size, bool *present)
{
    bson_iter_t it;
    *present = false;
    *size = 0;
    if (!mf_op_find(op, "size", &it))
        return 0;
    const bson_value_t *v = bson_iter_value(&it);
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.size' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                          op->name, mf_type_name(v->value_type));
    double d = mf_value_as_double(v);
    if (!(d == d) || d >= 9.2233720368547758e18 || d <= -9.2233720368547758e18)
        return mf_err_set(&op->err, MF_E_BadValue, "BSON field '%s.size' value %g cannot be represented as a 64-bit integer",
                          op->name, d);
    if (!mf_value_as_int64(v, size))
        *size = (int64_t)d;
    *present = true;
    return 0;
}

/*
 * The options of a capped copy of src: src's own, with capped and size
 * replaced (mongod keeps max), shown as CollectionOptions::appendBSON
 * writes them: capped, size and max first, numbers by appendNumber (an
 * int below 2^30), then the others.
 */
static void
capped_options(const mf_coll_t *src, int64_t size, bool has_size, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    BSON_APPEND_BOOL(out, "capped", true);
    if (has_size)
        mf_append_number(out, "size", size);
    if (src->options != NULL && bson_iter_init_find(&it, src->options, "max") && mf_value_is_number(bson_iter_value(&it))) {
        int64_t max;
        if (!mf_value_as_int64(bson_iter_value(&it), &max))
            max = (int64_t)bson_iter_as_double(&it); /* a stored max is below 2^31 */
        mf_append_number(out, "max", max);
    }
    if (src->options != NULL && bson_iter_init(&it, src->options)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "capped") == 0 || strcmp(k, "size") == 0 || strcmp(k, "max") == 0)
                continue;
            bson_append_value(out, k, -1, bson_iter_value(&it));
        }
    }
}

/*
 * copy_chunk: copies up to COPY_CHUNK documents of src with record ids above
 * *after into dst in one transaction. While *excess is positive, documents
 * are skipped instead (each takes 4 times its size off it, mongod's
 * allowance for padding): they would only be removed again by the cap.
 * *eof when src has no more. Returns 0, MF_CONFLICT (nothing committed, and
 * *excess as it was), or -1 with err.
 */
static int
copy_chunk(mf_sess_t *s, mf_coll_t *src, mf_coll_t *dst, int64_t *after, int64_t *excess, bool *eof, mf_error_t *err)
{
    int64_t skip_left = *excess;
    mf_cur_t *cur = NULL;
    int64_t last = *after;
    int n = 0, r, rc = -1;

    *eof = false;
    if (mf_txn_begin(s, err) != 0)
        return -1;
    if (mf_cur_open(s, src->uri, &cur, err) != 0)
        goto err_abort;
    r = mf_cur_seek_rid_ge(cur, *after + 1);
    while (r == 0 && n < COPY_CHUNK) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        int64_t rid = mf_cur_rid(cur);
        mf_cur_value(cur, &v, &len);
        if (!bson_init_static(&doc, v, len)) {
            mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in record %lld of %s", (long long)rid, src->ns);
            goto err_close;
        }
        if (skip_left > 0) {
            skip_left -= 4 * (int64_t)len;
            last = rid;
            n++;
            r = mf_cur_next(cur);
            continue;
        }
        /* The value stays valid: the insert works through dst's own cursors. */
        int ir = mf_coll_insert(s, dst, &doc, NULL, err);
        if (ir != 0) {
            rc = ir; /* MF_CONFLICT: the chunk is retried */
            goto err_close;
        }
        last = rid;
        n++;
        r = mf_cur_next(cur);
    }
    if (r != 0 && r != MF_NOTFOUND) {
        rc = r == MF_CONFLICT ? MF_CONFLICT : mf_err_set(err, MF_E_InternalError, "storage error while copying %s", src->ns);
        goto err_close;
    }
    *eof = r == MF_NOTFOUND;
    mf_cur_close(cur);
    if (mf_txn_commit(s, false, err) != 0)
        return -1; /* the commit rolled the transaction back */
    *after = last;
    *excess = skip_left;
    return 0;
err_close:
    mf_cur_close(cur);
err_abort:
    mf_txn_abort(s);
    return rc;
}

/*
 * copy_all: copies every document of src into dst (capped at size bytes),
 * retrying a chunk on a write conflict. As mongod, the oldest documents
 * beyond twice the cap are not copied at all.
 */
static int
copy_all(mf_op_t *op, mf_coll_t *src, mf_coll_t *dst, int64_t size)
{
    int64_t after = 0, excess = atomic_load(&src->approx_size) - 2 * size;
    bool eof = false;
    int conflicts = 0;
    while (!eof) {
        if (mf_curop_check_current(&op->err) != 0)
            return -1;
        int r = copy_chunk(op->sess, src, dst, &after, &excess, &eof, &op->err);
        if (r == MF_CONFLICT) {
            if (++conflicts > 1000)
                return mf_err_set(&op->err, MF_E_WriteConflict, "too many write conflicts copying %s", src->ns);
            continue;
        }
        if (r != 0)
            return -1;
    }
    return 0;
}

/*
 * clone_capped: creates db.to as a capped copy of src (write lock session
 * held; to must not exist) and fills it. On failure the new collection is
 * dropped. *out gets the new collection.
 */
static int
clone_capped(mf_op_t *op, mf_coll_t *src, const char *to, int64_t size, bool has_size, mf_coll_t **out)
{
    bson_t opts;
    mf_coll_t *dst = NULL;
    int rc = -1;

    capped_options(src, size, has_size, &opts);
    if (mf_coll_options_check(&opts, false, &op->err) != 0)
        goto out;
    if (mf_catalog_coll_create(op->eng->cat, op->db, to, &opts, &dst, &op->err) != 0)
        goto out;
    if (dst == NULL)
        dst = mf_catalog_coll_find(op->eng->cat, op->db, to);
    if (dst == NULL) {
        mf_err_set(&op->err, MF_E_InternalError, "capped copy %s.%s vanished", op->db, to);
        goto out;
    }
    if (copy_all(op, src, dst, dst->capped_size) != 0) {
        mf_error_t ignored;
        if (mf_catalog_coll_drop(op->eng->cat, dst, &ignored) != 0)
            mf_err_set(&op->err, op->err.code, "%s (and the partial copy could not be dropped: %s)", op->err.msg,
                       ignored.msg);
        goto out;
    }
    *out = dst;
    rc = 0;
out:
    bson_destroy(&opts);
    return rc;
}

/* The source checks shared by both commands: exists, is a collection. */
static int
capped_source(mf_op_t *op, const char *name, mf_coll_t **out)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    *out = c;
    if (c == NULL)
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "source collection %s.%s does not exist", op->db, name);
    if (c->is_view)
        return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "%s not supported for views: %s",
                          strcmp(op->name, "convertToCapped") == 0 ? "convertToCapped" : "cloneCollectionAsCapped",
                          c->ns);
    if (strncmp(c->name, MF_TS_BUCKETS_PREFIX, strlen(MF_TS_BUCKETS_PREFIX)) == 0)
        return mf_err_set(&op->err, MF_E_IllegalOperation, "Cannot convert a time-series buckets collection to capped: %s",
                          c->ns);
    return 0;
}

static const char *const clone_fields[] = {"cloneCollectionAsCapped", "toCollection", "size", "temp", NULL};

static int
cmd_clone_collection_as_capped(mf_op_t *op)
{
    const char *from, *to = NULL;
    bool present, has_size;
    int64_t size;
    mf_coll_t *src, *dst;
    int rc;

    if (mf_op_coll_name(op, &from) != 0 || mf_op_get_string(op, "toCollection", &to, &present) != 0 ||
        capped_size_arg(op, &size, &has_size) != 0)
        return -1;
    if (!present)
        return mf_err_set(&op->err, MF_E_Location40414,
                          "BSON field 'cloneCollectionAsCapped.toCollection' is missing but a required field");
    if (from[0] == '\0' || to[0] == '\0')
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace specified '%s.%s'", op->db,
                          from[0] == '\0' ? from : to);
    if (mf_catalog_check_coll_name(op->db, to, &op->err) != 0)
        return -1;
    mf_catalog_wrlock(op->eng->cat);
    rc = capped_source(op, from, &src);
    if (rc == 0 && mf_catalog_coll_find(op->eng->cat, op->db, to) != NULL)
        rc = mf_err_set(&op->err, MF_E_NamespaceExists,
                        "cloneCollectionAsCapped failed - destination collection %s.%s already exists. source collection: %s.%s",
                        op->db, to, op->db, from);
    if (rc == 0)
        rc = clone_capped(op, src, to, size, has_size, &dst);
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

static const char *const convert_fields[] = {"convertToCapped", "size", NULL};

static int
cmd_convert_to_capped(mf_op_t *op)
{
    const char *name;
    bool has_size;
    int64_t size;
    mf_coll_t *src, *tmp;
    char tmpname[300];
    int rc;

    if (mf_op_coll_name(op, &name) != 0 || capped_size_arg(op, &size, &has_size) != 0)
        return -1;
    if (name[0] == '\0')
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace specified '%s.'", op->db);
    mf_catalog_wrlock(op->eng->cat);
    rc = capped_source(op, name, &src);
    if (rc == 0) {
        /* A name no collection has (mongod's makeUniqueCollectionName pattern). */
        for (int tries = 0;; tries++) {
            snprintf(tmpname, sizeof(tmpname), "tmp%05x.convertToCapped.%s", (unsigned)(random() & 0xfffff), name);
            if (mf_catalog_coll_find(op->eng->cat, op->db, tmpname) == NULL)
                break;
            if (tries > 100) {
                rc = mf_err_set(&op->err, MF_E_NamespaceExists,
                                "Cannot generate temporary collection namespace to convert %s to a capped collection",
                                src->ns);
                break;
            }
        }
    }
    if (rc == 0)
        rc = clone_capped(op, src, tmpname, size, has_size, &tmp);
    if (rc == 0) {
        rc = mf_catalog_coll_rename_replace(op->eng->cat, tmp, src, op->db, name, &op->err);
        if (rc == 0)
            mf_curops_top_forget(op->eng->curops, op->db, name); /* a new collection under the old name */
        if (rc != 0) {
            mf_error_t ignored;
            if (mf_catalog_coll_drop(op->eng->cat, tmp, &ignored) != 0) {
                /* logged by the catalog; the temporary collection stays (as mongod's would) */
            }
        }
    }
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

/* ---------- dataSize ---------- */

typedef struct size_acc {
    int64_t size, n, max_size, max_objs;
    bool max_reached;
} size_acc_t;

/* Adds one document; false once a maxSize / maxObjects limit is reached. */
static bool
size_add(size_acc_t *a, size_t len)
{
    a->size += (int64_t)len;
    a->n++;
    if ((a->max_size > 0 && a->size > a->max_size) || (a->max_objs > 0 && a->n > a->max_objs)) {
        a->max_reached = true;
        return false;
    }
    return true;
}

/* Scans every record of c into a. */
static int
size_scan_records(mf_op_t *op, mf_coll_t *c, size_acc_t *a)
{
    mf_cur_t *cur;
    int r, rc = 0;
    if (mf_txn_begin(op->sess, &op->err) != 0)
        return -1;
    if (mf_cur_open(op->sess, c->uri, &cur, &op->err) != 0) {
        mf_txn_abort(op->sess);
        return -1;
    }
    while ((r = mf_cur_next(cur)) == 0) {
        const uint8_t *v;
        size_t len;
        if ((a->n & 1023) == 1023 && mf_curop_check_current(&op->err) != 0) {
            rc = -1;
            break;
        }
        mf_cur_value(cur, &v, &len);
        if (!size_add(a, len))
            break;
    }
    if (rc == 0 && r != 0 && r != MF_NOTFOUND)
        rc = mf_err_set(&op->err, MF_E_InternalError, "storage error scanning %s", c->ns);
    mf_cur_close(cur);
    mf_txn_abort(op->sess);
    return rc;
}

/* The index of c whose key pattern starts with kp's fields (any direction for the check, as mongod). */
static mf_index_t *
prefixed_index(mf_coll_t *c, const bson_t *kp)
{
    for (int i = 0; i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        bson_t key;
        bson_iter_t a, b;
        bool ok = true;
        /* mongod's findShardKeyPrefixedIndex(requireSingleKey): not multikey, and every document has keys. */
        if (ix->building || ix->partial != NULL || ix->sparse || atomic_load(&ix->multikey) || ix->kp.collation != NULL ||
            !mf_index_spec_key(ix->spec, &key))
            continue;
        if (!bson_iter_init(&a, kp) || !bson_iter_init(&b, &key))
            continue;
        while (ok && bson_iter_next(&a)) {
            ok = bson_iter_next(&b) && strcmp(bson_iter_key(&a), bson_iter_key(&b)) == 0 &&
                 mf_value_is_number(bson_iter_value(&b));
        }
        if (ok)
            return ix;
    }
    return NULL;
}

/* The keystring of bound (values in key-pattern order) for index ix's first fields. */
static int
bound_key(mf_index_t *ix, const bson_t *kp, const bson_t *bound, mf_keystring_t *ks, mf_error_t *err)
{
    bson_iter_t k, b;
    bson_t key;
    if (!mf_index_spec_key(ix->spec, &key))
        return mf_err_set(err, MF_E_InternalError, "index %s has no key", ix->name);
    (void)kp; /* prefixed_index checked that kp names ix's first fields */
    bson_iter_init(&k, &key);
    bson_iter_init(&b, bound);
    while (bson_iter_next(&b)) {
        if (!bson_iter_next(&k))
            break;
        bool desc = mf_value_as_double(bson_iter_value(&k)) < 0;
        if (mf_ks_append_value(ks, bson_iter_value(&b), desc, err) != 0)
            return -1;
    }
    return 0;
}

/* Scans index ix from min (inclusive) to max (exclusive) and fetches each record into a. */
static int
size_scan_index(mf_op_t *op, mf_coll_t *c, mf_index_t *ix, const bson_t *kp, const bson_t *min, const bson_t *max,
                size_acc_t *a)
{
    mf_keystring_t lo, hi;
    mf_cur_t *icur = NULL, *rcur = NULL;
    int r, rc = -1;

    mf_index_ks_init(&lo, &ix->kp);
    mf_index_ks_init(&hi, &ix->kp);
    if (bound_key(ix, kp, min, &lo, &op->err) != 0 || bound_key(ix, kp, max, &hi, &op->err) != 0)
        goto out;
    if (mf_txn_begin(op->sess, &op->err) != 0)
        goto out;
    if (mf_cur_open(op->sess, ix->uri, &icur, &op->err) != 0 || mf_cur_open(op->sess, c->uri, &rcur, &op->err) != 0)
        goto out_abort;
    rc = 0;
    for (r = mf_cur_seek_bytes_ge(icur, lo.data, lo.len); r == 0; r = mf_cur_next(icur)) {
        const uint8_t *key, *val;
        size_t klen, vlen;
        int64_t rid;
        mf_cur_key_bytes(icur, &key, &klen);
        size_t cmp_len = klen < hi.len ? klen : hi.len;
        int cmp = memcmp(key, hi.data, cmp_len);
        if (cmp > 0 || (cmp == 0 && klen >= hi.len))
            break;
        if ((a->n & 1023) == 1023 && mf_curop_check_current(&op->err) != 0) {
            rc = -1;
            break;
        }
        if (!ix->rid_in_key) {
            mf_cur_value(icur, &val, &vlen);
            if (vlen < 8)
                continue;
            rid = 0;
            for (int i = 0; i < 8; i++)
                rid = (int64_t)(((uint64_t)rid << 8) | val[i]);
        } else {
            rid = mf_ks_read_recordid(key, klen);
        }
        if (mf_cur_search_rid(rcur, rid) != 0)
            continue;
        mf_cur_value(rcur, &val, &vlen);
        if (!size_add(a, vlen))
            break;
    }
    if (rc == 0 && r != 0 && r != MF_NOTFOUND)
        rc = mf_err_set(&op->err, MF_E_InternalError, "storage error scanning index %s of %s", ix->name, c->ns);
out_abort:
    if (icur)
        mf_cur_close(icur);
    if (rcur)
        mf_cur_close(rcur);
    mf_txn_abort(op->sess);
out:
    mf_ks_destroy(&lo);
    mf_ks_destroy(&hi);
    return rc;
}

static const char *const data_size_fields[] = {"dataSize", "keyPattern", "min", "max", "estimate", "maxSize",
                                                "maxObjects", NULL};

static int
cmd_data_size(mf_op_t *op)
{
    bson_iter_t it;
    bson_t kp, min, max, inferred;
    bool has_kp, has_min, has_max, estimate = false, present;
    size_acc_t a = {0};
    const char *ns, *dot;
    char db[128];
    int64_t started = mf_mono_ms();
    mf_coll_t *c;
    int rc = 0;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'dataSize.dataSize' is the wrong type '%s', expected type 'string'",
                          mf_type_name(bson_iter_type(&it)));
    ns = bson_iter_utf8(&it, NULL);
    dot = strchr(ns, '.');
    if (dot == NULL || dot == ns || dot[1] == '\0' || (size_t)(dot - ns) >= sizeof(db))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace specified '%s'", ns);
    memcpy(db, ns, (size_t)(dot - ns));
    db[dot - ns] = '\0';
    if (mf_op_get_doc(op, "keyPattern", &kp, &has_kp) != 0 || mf_op_get_doc(op, "min", &min, &has_min) != 0 ||
        mf_op_get_doc(op, "max", &max, &has_max) != 0 || mf_op_get_bool(op, "estimate", &estimate, &present) != 0 ||
        mf_op_get_int64(op, "maxSize", &a.max_size, &present) != 0 ||
        mf_op_get_int64(op, "maxObjects", &a.max_objs, &present) != 0)
        return -1;
    if (has_min != has_max)
        return mf_err_set(&op->err, MF_E_BadValue, "Max must %sbe set if min is %sset.", has_min ? "" : "not ",
                          has_min ? "" : "not ");
    bool ranged = has_min && (!bson_empty(&min) || !bson_empty(&max));
    bson_init(&inferred);
    if (ranged && (!has_kp || bson_empty(&kp))) {
        /* mongod infers {field: 1, ...} from min's fields. */
        bson_iter_init(&it, &min);
        while (bson_iter_next(&it))
            BSON_APPEND_INT32(&inferred, bson_iter_key(&it), 1);
        kp = inferred;
    }
    bool has_estimate = false;
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, db, dot + 1);
    if (c != NULL && c->is_view) {
        rc = mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s is a view, not a collection", c->ns);
    } else if (c == NULL || atomic_load(&c->approx_count) == 0) {
        /* mongod: an unknown namespace, or an empty collection, has size 0 (no range checks). */
    } else if (ranged && (bson_empty(&min) || bson_empty(&max))) {
        rc = mf_err_set(&op->err, MF_E_BadValue, "Only one of min or max specified");
    } else if (!ranged) {
        has_estimate = true;
        if (estimate) {
            a.n = atomic_load(&c->approx_count);
            a.size = atomic_load(&c->approx_size);
        } else {
            rc = size_scan_records(op, c, &a);
        }
    } else {
        mf_index_t *ix = prefixed_index(c, &kp);
        has_estimate = true;
        if (ix == NULL)
            rc = mf_err_set(&op->err, MF_E_OperationFailed, "Couldn't find valid index containing key pattern");
        else
            rc = size_scan_index(op, c, ix, &kp, &min, &max, &a);
        if (rc == 0 && estimate && a.n > 0) {
            int64_t cnt = atomic_load(&c->approx_count);
            int64_t avg = cnt > 0 ? atomic_load(&c->approx_size) / cnt : 0;
            a.size = avg * a.n;
        }
    }
    mf_catalog_unlock(op->eng->cat);
    bson_destroy(&inferred);
    if (rc != 0)
        return -1;
    if (a.size <= INT32_MAX)
        BSON_APPEND_INT32(op->reply, "size", (int32_t)a.size);
    else
        BSON_APPEND_INT64(op->reply, "size", a.size);
    if (a.n <= INT32_MAX)
        BSON_APPEND_INT32(op->reply, "numObjects", (int32_t)a.n);
    else
        BSON_APPEND_INT64(op->reply, "numObjects", a.n);
    BSON_APPEND_INT64(op->reply, "millis", mf_mono_ms() - started);
    if (has_estimate)
        BSON_APPEND_BOOL(op->reply, "estimate", estimate);
    if (a.max_reached)
        BSON_APPEND_BOOL(op->reply, "maxReached", true);
    return 0;
}

/* ---------- dbHash ---------- */

typedef struct hash_list {
    mf_coll_t **v;
    int n, cap;
} hash_list_t;

/* The system collections mongod replicates, and so hashes (the time-series buckets hold user data). */
static bool
hashed_system_coll(const char *name)
{
    static const char *const replicated[] = {"system.backup_users", "system.js", "system.new_users", "system.roles",
                                             "system.users", "system.version", "system.keys", "system.views", NULL};
    if (strncmp(name, MF_TS_BUCKETS_PREFIX, strlen(MF_TS_BUCKETS_PREFIX)) == 0)
        return true;
    for (int i = 0; replicated[i]; i++)
        if (strcmp(name, replicated[i]) == 0)
            return true;
    return false;
}

static void
hash_collect(void *arg, mf_coll_t *c)
{
    hash_list_t *l = arg;
    if (c->is_view || strncmp(c->name, "tmp.mr.", 7) == 0 ||
        (strncmp(c->name, "system.", 7) == 0 && !hashed_system_coll(c->name)))
        return;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = mf_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = c;
}

static void
hex_digest(const unsigned char *d, unsigned n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[2 * n] = '\0';
}

/* hash_coll: MD5 of c's documents in _id order (record order without an _id index) into hex (33 bytes). */
static int
hash_coll(mf_op_t *op, mf_coll_t *c, char *hex)
{
    mf_index_t *id = NULL;
    mf_cur_t *icur = NULL, *rcur = NULL;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    int64_t n = 0;
    int r, rc = -1;

    for (int i = 0; i < c->nindexes; i++)
        if (c->indexes[i]->is_id && !c->indexes[i]->building)
            id = c->indexes[i];
    if (md == NULL || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1) {
        mf_err_set(&op->err, MF_E_InternalError, "MD5 is not available");
        goto out;
    }
    if (mf_txn_begin(op->sess, &op->err) != 0)
        goto out;
    if (mf_cur_open(op->sess, c->uri, &rcur, &op->err) != 0 ||
        (id != NULL && mf_cur_open(op->sess, id->uri, &icur, &op->err) != 0))
        goto out_abort;
    rc = 0;
    while ((r = mf_cur_next(icur != NULL ? icur : rcur)) == 0) {
        const uint8_t *val;
        size_t vlen;
        if ((++n & 1023) == 0 && mf_curop_check_current(&op->err) != 0) {
            rc = -1;
            break;
        }
        if (icur != NULL) {
            mf_cur_value(icur, &val, &vlen);
            if (vlen < 8)
                continue;
            int64_t rid = 0;
            for (int i = 0; i < 8; i++)
                rid = (int64_t)(((uint64_t)rid << 8) | val[i]);
            if (mf_cur_search_rid(rcur, rid) != 0)
                continue;
        }
        mf_cur_value(rcur, &val, &vlen);
        EVP_DigestUpdate(md, val, vlen);
    }
    if (rc == 0 && r != 0 && r != MF_NOTFOUND)
        rc = mf_err_set(&op->err, MF_E_InternalError, "storage error hashing %s", c->ns);
    if (rc == 0 && EVP_DigestFinal_ex(md, d, &dlen) == 1)
        hex_digest(d, dlen, hex);
out_abort:
    if (icur)
        mf_cur_close(icur);
    if (rcur)
        mf_cur_close(rcur);
    mf_txn_abort(op->sess);
out:
    EVP_MD_CTX_free(md);
    return rc;
}

static const char *const db_hash_fields[] = {"dbHash", "dbhash", "collections", "$_internalReadAtClusterTime", NULL};

static bool
wanted(const bson_t *only, const char *name)
{
    bson_iter_t it;
    if (only == NULL)
        return true;
    bson_iter_init(&it, only);
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), name) == 0)
            return true;
    return false;
}

static int
cmd_db_hash(mf_op_t *op)
{
    bson_iter_t it;
    bson_t only_arr, colls, capped, uuids;
    const bson_t *only = NULL;
    hash_list_t l = {0};
    int64_t started = mf_mono_ms();
    EVP_MD_CTX *all = NULL;
    int rc = -1, ncapped = 0;

    if (mf_op_find(op, "collections", &it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_t ai;
        if (!BSON_ITER_HOLDS_ARRAY(&it))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'dbHash.collections' is the wrong type '%s', expected type 'array'",
                              mf_type_name(bson_iter_type(&it)));
        bson_iter_array(&it, &len, &data);
        if (!bson_init_static(&only_arr, data, len))
            return mf_err_set(&op->err, MF_E_BadValue, "invalid collections array");
        bson_iter_init(&ai, &only_arr);
        while (bson_iter_next(&ai))
            if (!BSON_ITER_HOLDS_UTF8(&ai))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'dbHash.collections.%s' is the wrong type '%s', expected type 'string'",
                                  bson_iter_key(&ai), mf_type_name(bson_iter_type(&ai)));
        only = &only_arr;
    }
    if (strcmp(op->db, "local") == 0) {
        /* mongod hashes replicated collections only: none in local. */
    }
    all = EVP_MD_CTX_new();
    if (all == NULL || EVP_DigestInit_ex(all, EVP_md5(), NULL) != 1) {
        EVP_MD_CTX_free(all);
        return mf_err_set(&op->err, MF_E_InternalError, "MD5 is not available");
    }
    BSON_APPEND_UTF8(op->reply, "host", op->eng->host);
    bson_init(&colls);
    bson_init(&capped);
    bson_init(&uuids);
    mf_catalog_rdlock(op->eng->cat);
    if (strcmp(op->db, "local") != 0)
        mf_catalog_coll_list(op->eng->cat, op->db, hash_collect, &l);
    rc = 0;
    /* mf_catalog_coll_list visits in namespace order, which within one database is name order. */
    for (int i = 0; i < l.n && rc == 0; i++) {
        mf_coll_t *c = l.v[i];
        char hex[2 * EVP_MAX_MD_SIZE + 1];
        if (!wanted(only, c->name))
            continue;
        if (hash_coll(op, c, hex) != 0) {
            rc = -1;
            break;
        }
        BSON_APPEND_UTF8(&colls, c->name, hex);
        EVP_DigestUpdate(all, hex, strlen(hex));
        if (c->capped) {
            char key[16];
            snprintf(key, sizeof(key), "%d", ncapped++);
            BSON_APPEND_UTF8(&capped, key, c->name);
        }
        bson_append_binary(&uuids, c->name, -1, BSON_SUBTYPE_UUID, c->uuid, 16);
    }
    mf_catalog_unlock(op->eng->cat);
    if (rc == 0) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned dlen = 0;
        char hex[2 * EVP_MAX_MD_SIZE + 1];
        EVP_DigestFinal_ex(all, d, &dlen);
        hex_digest(d, dlen, hex);
        BSON_APPEND_DOCUMENT(op->reply, "collections", &colls);
        BSON_APPEND_ARRAY(op->reply, "capped", &capped);
        BSON_APPEND_DOCUMENT(op->reply, "uuids", &uuids);
        BSON_APPEND_UTF8(op->reply, "md5", hex);
        BSON_APPEND_INT64(op->reply, "timeMillis", mf_mono_ms() - started);
    }
    free(l.v);
    bson_destroy(&colls);
    bson_destroy(&capped);
    bson_destroy(&uuids);
    EVP_MD_CTX_free(all);
    return rc;
}

/* ---------- top / lockInfo / connPoolStats ---------- */

typedef struct top_ctx {
    mf_curops_t *reg;
    bson_t *totals;
} top_ctx_t;

static void
top_ns(void *arg, const char *db, const char *name, const uint8_t uuid[16])
{
    static const char *const counters[MF_TOP_N] = {"total", "readLock", "writeLock", "queries", "getmore",
                                                   "insert", "update", "remove", "commands"};
    top_ctx_t *x = arg;
    int64_t t[MF_TOP_N], n[MF_TOP_N];
    bson_t e, d;
    char ns[512];
    (void)uuid;
    snprintf(ns, sizeof(ns), "%s.%s", db, name);
    mf_curops_top_get(x->reg, ns, t, n);
    BSON_APPEND_DOCUMENT_BEGIN(x->totals, ns, &e);
    for (int i = 0; i < MF_TOP_N; i++) {
        BSON_APPEND_DOCUMENT_BEGIN(&e, counters[i], &d);
        BSON_APPEND_INT64(&d, "time", t[i]);
        BSON_APPEND_INT64(&d, "count", n[i]);
        bson_append_document_end(&e, &d);
    }
    bson_append_document_end(x->totals, &e);
}

static int
cmd_top(mf_op_t *op)
{
    bson_t totals;
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "totals", &totals);
    BSON_APPEND_UTF8(&totals, "note", "all times in microseconds");
    top_ctx_t x = {op->eng->curops, &totals};
    mf_catalog_names(op->eng->cat, top_ns, &x);
    bson_append_document_end(op->reply, &totals);
    return 0;
}

static const char *const lock_info_fields[] = {"lockInfo", "includeStorageEngineDump", NULL};

/* lockInfo: mayfly's locks are per-collection rwlocks without a lock manager to report, so the list is empty. */
static int
cmd_lock_info(mf_op_t *op)
{
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(op->reply, "lockInfo", &arr);
    bson_append_array_end(op->reply, &arr);
    return 0;
}

static int
cmd_conn_pool_stats(mf_op_t *op)
{
    bson_t d;
    BSON_APPEND_INT32(op->reply, "numClientConnections", 0);
    BSON_APPEND_INT32(op->reply, "numAScopedConnections", 0);
    BSON_APPEND_INT32(op->reply, "totalInUse", 0);
    BSON_APPEND_INT32(op->reply, "totalAvailable", 0);
    BSON_APPEND_INT32(op->reply, "totalLeased", 0);
    BSON_APPEND_INT32(op->reply, "totalCreated", 0);
    BSON_APPEND_INT32(op->reply, "totalRefreshing", 0);
    BSON_APPEND_INT32(op->reply, "totalRefreshed", 0);
    BSON_APPEND_INT32(op->reply, "totalWasNeverUsed", 0);
    BSON_APPEND_INT32(op->reply, "totalWasUsedOnce", 0);
    BSON_APPEND_INT32(op->reply, "totalConnUsageTimeMillis", 0);
    BSON_APPEND_UTF8(op->reply, "replicaSetMatchingStrategy", "disabled");
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "pools", &d);
    bson_append_document_end(op->reply, &d);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "hosts", &d);
    bson_append_document_end(op->reply, &d);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "replicaSets", &d);
    bson_append_document_end(op->reply, &d);
    return 0;
}

/* ---------- index filters and the plan cache ---------- */

/*
 * The query shape arguments of a plan cache command: query (required when
 * required is set), sort, projection and collation, each an object (2
 * BadValue otherwise, as mongod's canonicalize). Views into op->cmd.
 */
static int
shape_args(mf_op_t *op, bool required, bool *has_query, bson_t *q, bson_t *sort, bson_t *proj, bson_t *coll,
           bool *has_coll)
{
    static const char *const names[] = {"query", "sort", "projection", "collation"};
    bson_t *outs[] = {q, sort, proj, coll};
    bool present[4] = {false, false, false, false};
    for (int i = 0; i < 4; i++) {
        bson_iter_t it;
        const uint8_t *data;
        uint32_t len;
        bson_init(outs[i]);
        if (!mf_op_find(op, names[i], &it))
            continue;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_err_set(&op->err, MF_E_BadValue, "%s field %s must be an object", i == 0 ? "required" : "optional",
                              names[i]);
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(outs[i], data, len))
            return mf_err_set(&op->err, MF_E_BadValue, "invalid %s document", names[i]);
        present[i] = true;
    }
    if (required && !present[0])
        return mf_err_set(&op->err, MF_E_BadValue, "required field query missing");
    *has_query = present[0];
    *has_coll = present[3];
    return 0;
}

static const char *const plan_cache_fields[] = {"planCacheClear", "planCacheClearFilters", "planCacheListFilters",
                                                "planCacheSetFilter", "query", "sort", "projection", "collation",
                                                "indexes", NULL};

/* A plan cache command's collection: its first field must be a string. */
static int
plan_cache_coll(mf_op_t *op, const char **name)
{
    bson_iter_t it;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "collection name has invalid type %s",
                          mf_type_name(bson_iter_type(&it)));
    *name = bson_iter_utf8(&it, NULL);
    return mf_catalog_check_coll_name(op->db, *name, &op->err);
}

static int
cmd_plan_cache_clear(mf_op_t *op)
{
    const char *name;
    bson_t q, sort, proj, coll;
    bool has_query, has_coll;
    if (plan_cache_coll(op, &name) != 0 || shape_args(op, false, &has_query, &q, &sort, &proj, &coll, &has_coll) != 0)
        return -1;
    /* mayfly plans every query afresh (no plan cache): nothing to clear. */
    return 0;
}

static int
cmd_plan_cache_list_filters(mf_op_t *op)
{
    const char *name;
    bson_t arr;
    if (plan_cache_coll(op, &name) != 0)
        return -1;
    BSON_APPEND_ARRAY_BEGIN(op->reply, "filters", &arr);
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && !c->is_view)
        mf_index_filter_list(c, &arr);
    mf_catalog_unlock(op->eng->cat);
    bson_append_array_end(op->reply, &arr);
    return 0;
}

static int
cmd_plan_cache_clear_filters(mf_op_t *op)
{
    const char *name;
    bson_t q, sort, proj, coll;
    bool has_query, has_coll;
    if (plan_cache_coll(op, &name) != 0 || shape_args(op, false, &has_query, &q, &sort, &proj, &coll, &has_coll) != 0)
        return -1;
    if (!has_query && (mf_op_has(op, "sort") || mf_op_has(op, "projection")))
        return mf_err_set(&op->err, MF_E_BadValue, "sort or projection provided without query");
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && !c->is_view)
        mf_index_filter_clear(c, has_query ? &q : NULL, &sort, &proj, has_coll ? &coll : NULL);
    mf_catalog_unlock(op->eng->cat);
    return 0;
}

static int
cmd_plan_cache_set_filter(mf_op_t *op)
{
    const char *name;
    bson_t q, sort, proj, coll, idx;
    bson_iter_t it, ai;
    bool has_query, has_coll;
    const uint8_t *data;
    uint32_t len;

    if (plan_cache_coll(op, &name) != 0)
        return -1;
    if (!mf_op_find(op, "indexes", &it))
        return mf_err_set(&op->err, MF_E_BadValue, "required field indexes missing");
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_BadValue, "required field indexes must be an array");
    bson_iter_array(&it, &len, &data);
    if (!bson_init_static(&idx, data, len))
        return mf_err_set(&op->err, MF_E_BadValue, "invalid indexes array");
    if (bson_empty(&idx))
        return mf_err_set(&op->err, MF_E_BadValue, "required field indexes must contain at least one index");
    bson_iter_init(&ai, &idx);
    while (bson_iter_next(&ai)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&ai)) {
            bson_t sub;
            bson_iter_document(&ai, &len, &data);
            if (bson_init_static(&sub, data, len) && bson_empty(&sub))
                return mf_err_set(&op->err, MF_E_BadValue, "index specification cannot be empty");
        } else if (!BSON_ITER_HOLDS_UTF8(&ai)) {
            return mf_err_set(&op->err, MF_E_BadValue, "each item in indexes must be an object or string");
        }
    }
    if (shape_args(op, true, &has_query, &q, &sort, &proj, &coll, &has_coll) != 0)
        return -1;
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c == NULL || c->is_view) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_BadValue, "no such collection");
    }
    mf_index_filter_set(c, &q, &sort, &proj, has_coll ? &coll : NULL, &idx);
    mf_catalog_unlock(op->eng->cat);
    return 0;
}

/* ---------- validateDBMetadata ---------- */

/*
 * The aggregation stages of API version 1 (as a MongoDB 8 mongod accepts
 * them under apiStrict: true); any other stage is refused with 323.
 */
static const char *const stages_in_v1[] = {
    "$addFields", "$bucket", "$bucketAuto", "$changeStream", "$collStats", "$count", "$densify", "$documents",
    "$facet", "$fill", "$geoNear", "$graphLookup", "$group", "$indexStats", "$limit", "$lookup", "$match",
    "$merge", "$out", "$project", "$redact", "$replaceRoot", "$replaceWith", "$sample", "$set",
    "$setWindowFields", "$skip", "$sort", "$sortByCount", "$unionWith", "$unset", "$unwind", NULL};

/* The first stage of pipeline (an array iterator's value) outside API version 1, or NULL. */
static const char *
stage_outside_v1(bson_iter_t *pipeline)
{
    bson_iter_t st, f;
    if (!BSON_ITER_HOLDS_ARRAY(pipeline) || !bson_iter_recurse(pipeline, &st))
        return NULL;
    while (bson_iter_next(&st)) {
        bool in = false;
        if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &f) || !bson_iter_next(&f))
            continue;
        for (int i = 0; stages_in_v1[i] && !in; i++)
            in = strcmp(bson_iter_key(&f), stages_in_v1[i]) == 0;
        if (!in)
            return bson_iter_key(&f);
    }
    return NULL;
}

typedef struct meta_ctx {
    mf_op_t *op;
    const char *version;
    bool strict;
    const char *only_coll; /* NULL: every collection */
    bson_t *errors;        /* the apiVersionErrors array being built */
    int n;
} meta_ctx_t;

static void
meta_error(meta_ctx_t *x, const char *ns, const char *fmt, const char *arg)
{
    bson_t e;
    char key[16], msg[512];
    snprintf(key, sizeof(key), "%d", x->n++);
    snprintf(msg, sizeof(msg), fmt, arg);
    BSON_APPEND_DOCUMENT_BEGIN(x->errors, key, &e);
    BSON_APPEND_UTF8(&e, "ns", ns);
    BSON_APPEND_INT32(&e, "code", MF_E_APIStrictError);
    BSON_APPEND_UTF8(&e, "codeName", mf_err_codename(MF_E_APIStrictError));
    BSON_APPEND_UTF8(&e, "errmsg", msg);
    bson_append_document_end(x->errors, &e);
}

/* A view's pipeline: every stage must be one API version 1 allows (with strict). */
static void
meta_view(meta_ctx_t *x, const mf_coll_t *c)
{
    bson_iter_t it;
    const char *bad;
    if (!x->strict || c->options == NULL || !bson_iter_init_find(&it, c->options, "pipeline"))
        return;
    if ((bad = stage_outside_v1(&it)) != NULL)
        meta_error(x, c->ns, "%s is not allowed with 'apiStrict: true' in API Version 1", bad);
}

/* An index mongod's isIndexAllowedInAPIVersion1 refuses: text, geoHaystack or sparse. */
static bool
index_in_v1(const mf_index_t *ix)
{
    bson_t key;
    bson_iter_t it;
    if (ix->sparse)
        return false;
    if (!mf_index_spec_key(ix->spec, &key) || !bson_iter_init(&it, &key))
        return true;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it) && (strcmp(bson_iter_utf8(&it, NULL), "text") == 0 ||
                                          strcmp(bson_iter_utf8(&it, NULL), "geoHaystack") == 0))
            return false;
    }
    return true;
}

static void
meta_coll(void *arg, mf_coll_t *c)
{
    meta_ctx_t *x = arg;
    if (x->only_coll != NULL && strcmp(c->name, x->only_coll) != 0)
        return;
    if (c->is_view) {
        meta_view(x, c);
        return;
    }
    if (!x->strict || strcmp(x->version, "1") != 0)
        return;
    for (int i = 0; i < c->nindexes; i++) {
        if (!index_in_v1(c->indexes[i]))
            meta_error(x, c->ns, "The index with name %s is not allowed in API version 1.", c->indexes[i]->name);
    }
}

static const char *const meta_fields[] = {"validateDBMetadata", "db", "collection", "apiParameters", NULL};

static int
cmd_validate_db_metadata(mf_op_t *op)
{
    bson_t params, errors;
    bson_iter_t it;
    bool present, has_db, has_coll;
    const char *db = NULL, *coll = NULL;
    meta_ctx_t x = {op, NULL, false, NULL, &errors, 0};

    if (mf_op_get_doc(op, "apiParameters", &params, &present) != 0 || mf_op_get_string(op, "db", &db, &has_db) != 0 ||
        mf_op_get_string(op, "collection", &coll, &has_coll) != 0)
        return -1;
    if (!present)
        return mf_err_set(&op->err, MF_E_Location40414,
                          "BSON field 'validateDBMetadata.apiParameters' is missing but a required field");
    if (!bson_iter_init_find(&it, &params, "version"))
        return mf_err_set(&op->err, MF_E_Location40414,
                          "BSON field 'validateDBMetadata.apiParameters.version' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'validateDBMetadata.apiParameters.version' is the wrong type '%s', expected type 'string'",
                          mf_type_name(bson_iter_type(&it)));
    x.version = bson_iter_utf8(&it, NULL);
    bson_iter_init(&it, &params);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "version") == 0)
            continue;
        if (strcmp(k, "strict") != 0 && strcmp(k, "deprecationErrors") != 0)
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'validateDBMetadata.apiParameters.%s' is an unknown field.", k);
        if (!BSON_ITER_HOLDS_BOOL(&it) && !mf_value_is_number(bson_iter_value(&it)) && !BSON_ITER_HOLDS_NULL(&it))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field 'validateDBMetadata.apiParameters.%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'",
                              k, mf_type_name(bson_iter_type(&it)));
        if (strcmp(k, "strict") == 0)
            x.strict = bson_iter_as_bool(&it);
    }
    x.only_coll = has_coll ? coll : NULL;
    BSON_APPEND_ARRAY_BEGIN(op->reply, "apiVersionErrors", &errors);
    mf_catalog_rdlock(op->eng->cat);
    mf_catalog_coll_list(op->eng->cat, has_db ? db : NULL, meta_coll, &x);
    mf_catalog_unlock(op->eng->cat);
    bson_append_array_end(op->reply, &errors);
    return 0;
}

/* ---------- generic arguments: the Stable API and readConcern ---------- */

/*
 * The commands of API version 1 (the manual's Stable API changelog for 8.0;
 * an alias shares its command's versions; isMaster, unlike hello, is
 * outside). Those mayfly does not implement answer 59 first.
 */
static const char *const api_v1_commands[] = {
    "abortTransaction", "aggregate", "authenticate", "bulkWrite", "collMod", "commitTransaction", "count",
    "create", "createIndexes", "delete", "drop", "dropDatabase", "dropIndexes", "deleteIndexes", "endSessions",
    "explain", "find", "findAndModify", "findandmodify", "getMore", "hello", "insert", "killCursors",
    "listCollections", "listDatabases", "listIndexes", "ping", "refreshSessions", "saslContinue", "saslStart",
    "update", NULL};

static bool
in_api_v1(const char *name)
{
    for (int i = 0; api_v1_commands[i]; i++)
        if (strcmp(api_v1_commands[i], name) == 0)
            return true;
    return false;
}

/* An aggregate (or a view's create) under apiStrict: its stages must all be in API version 1 (parse-time check). */
static int
check_strict_pipeline(mf_op_t *op)
{
    bson_iter_t it;
    const char *bad;
    if (!mf_op_find(op, "pipeline", &it) || (bad = stage_outside_v1(&it)) == NULL)
        return 0;
    return mf_err_set(&op->err, MF_E_APIStrictError, "%s is not allowed with 'apiStrict: true' in API Version 1", bad);
}

/* The generic arguments this file checks, found in one pass over the command. */
typedef struct generic_args {
    bson_iter_t version, strict, dep, rc;
    bool has_version, has_strict, has_dep, has_rc;
} generic_args_t;

/* A Stable API flag: a bool (IDL type bool). */
static int
api_flag(mf_op_t *op, const char *field, const bson_iter_t *it, bool *set)
{
    if (!BSON_ITER_HOLDS_BOOL(it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'APIParametersFromClient.%s' is the wrong type '%s', expected type 'bool'", field,
                          mf_type_name(bson_iter_type(it)));
    *set = bson_iter_bool(it);
    return 0;
}

/*
 * Stable API (mongod's initializeAPIParameters): apiVersion must be the
 * string "1" (322); apiStrict / apiDeprecationErrors need an apiVersion
 * (4886600); with apiStrict: true a command outside API version 1 fails
 * with 323. No command of version 1 is deprecated, so apiDeprecationErrors
 * never refuses one.
 */
static int
check_api(mf_op_t *op, const char *name, const generic_args_t *g)
{
    const char *version = NULL;
    bool strict = false, dep = false;

    if (g->has_version) {
        if (!BSON_ITER_HOLDS_UTF8(&g->version))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field 'APIParametersFromClient.apiVersion' is the wrong type '%s', expected type 'string'",
                              mf_type_name(bson_iter_type(&g->version)));
        version = bson_iter_utf8(&g->version, NULL);
    }
    if ((g->has_strict && api_flag(op, "apiStrict", &g->strict, &strict) != 0) ||
        (g->has_dep && api_flag(op, "apiDeprecationErrors", &g->dep, &dep) != 0))
        return -1;
    if ((g->has_strict || g->has_dep) && version == NULL)
        return mf_err_set(&op->err, MF_E_Location4886600,
                          "Provided apiStrict and/or apiDeprecationErrors without passing apiVersion");
    if (version != NULL && strcmp(version, "1") != 0) {
        if (strcmp(version, "2") == 0)
            return mf_err_set(&op->err, MF_E_APIVersionError, "Cannot accept API version 2");
        return mf_err_set(&op->err, MF_E_APIVersionError, "API version must be \"1\"");
    }
    if (strict && !in_api_v1(name))
        return mf_err_set(&op->err, MF_E_APIStrictError,
                          "Provided apiStrict:true, but the command %s is not in API Version 1. Information on supported commands and migrations in API Version 1 can be found at https://dochub.mongodb.org/core/manual-versioned-api",
                          name);
    if (strict && (strcmp(name, "aggregate") == 0 || strcmp(name, "create") == 0))
        return check_strict_pipeline(op);
    return 0;
}

/*
 * readConcern on a standalone, as mongod's waitForReadConcern: levels
 * "snapshot" and "linearizable", atClusterTime and afterOpTime need a
 * replica set (123 NotAReplicaSet); afterClusterTime needs replication (20
 * IllegalOperation). "local", "available" and "majority" run as they are. A
 * replica-set member leaves readConcern to replication.
 */
static int
check_read_concern(mf_op_t *op, const char *name, const generic_args_t *g)
{
    bson_iter_t rc;
    if (g->has_rc && mf_read_concern_shape(&op->err, &g->rc) != 0)
        return -1;
    if (op->eng->repl != NULL && g->has_rc && strcmp(name, "count") == 0 && !mf_cmd_in_txn() &&
        bson_iter_recurse(&g->rc, &rc) && bson_iter_find(&rc, "level") && BSON_ITER_HOLDS_UTF8(&rc) &&
        strcmp(bson_iter_utf8(&rc, NULL), "snapshot") == 0)
        /* Outside a transaction snapshot reads are find's, aggregate's and distinct's (count_cmd.cpp). */
        return mf_err_set(&op->err, MF_E_InvalidOptions, "Command count does not support { level: \"snapshot\" } :: "
                          "caused by :: read concern snapshot not supported");
    if (op->eng->repl != NULL || !g->has_rc || !BSON_ITER_HOLDS_DOCUMENT(&g->rc) || !bson_iter_recurse(&g->rc, &rc))
        return 0;
    while (bson_iter_next(&rc)) {
        const char *k = bson_iter_key(&rc);
        const char *level = strcmp(k, "level") == 0 && BSON_ITER_HOLDS_UTF8(&rc) ? bson_iter_utf8(&rc, NULL) : "";
        if (strcmp(level, "snapshot") == 0 || strcmp(k, "atClusterTime") == 0)
            return mf_err_set(&op->err, MF_E_NotAReplicaSet,
                              "node needs to be a replica set member to use readConcern: snapshot");
        if (strcmp(level, "linearizable") == 0 || strcmp(k, "afterOpTime") == 0)
            return mf_err_set(&op->err, MF_E_NotAReplicaSet, "node needs to be a replica set member to use read concern");
        if (strcmp(k, "afterClusterTime") == 0)
            return mf_err_set(&op->err, MF_E_IllegalOperation,
                              "Cannot specify afterClusterTime readConcern without replication enabled");
    }
    return 0;
}

int
mf_cmd_generic_check(mf_op_t *op, const char *name)
{
    generic_args_t g;
    bson_iter_t it;
    memset(&g, 0, sizeof(g));
    if (!bson_iter_init(&it, op->cmd))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] != 'a' && k[0] != 'r')
            continue; /* most fields: one comparison */
        if (strcmp(k, "apiVersion") == 0) {
            g.version = it;
            g.has_version = true;
        } else if (strcmp(k, "apiStrict") == 0) {
            g.strict = it;
            g.has_strict = true;
        } else if (strcmp(k, "apiDeprecationErrors") == 0) {
            g.dep = it;
            g.has_dep = true;
        } else if (strcmp(k, "readConcern") == 0) {
            g.rc = it;
            g.has_rc = true;
        }
    }
    if (!g.has_version && !g.has_strict && !g.has_dep && !g.has_rc)
        return 0;
    if (check_api(op, name, &g) != 0 || check_read_concern(op, name, &g) != 0)
        return -1;
    return 0;
}

/*
 * Atlas Search's index commands (createSearchIndexes, updateSearchIndex,
 * dropSearchIndex): mayfly has no search server (mongot), so they answer as
 * mongod 8.0 without one, 31082 SearchNotEnabled, which applications test
 * for to fall back to $text or $regex.
 */
static int
cmd_search_index(mf_op_t *op)
{
    return mf_err_set(&op->err, MF_E_SearchNotEnabled, "%s", MF_SEARCH_INDEX_NOT_ENABLED);
}

/*
 * logRotate (admin): the log file is reopened, as SIGUSR1 does (mongod's
 * systemLog.logRotate: reopen); with the log on stderr there is nothing to
 * do. {logRotate: 1} or "server"; "audit" is 2 (no audit log here).
 */
static int
cmd_log_rotate(mf_op_t *op)
{
    bson_iter_t it;
    if (bson_iter_init(&it, op->cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it) &&
        strcmp(bson_iter_utf8(&it, NULL), "server") != 0)
        return mf_err_set(&op->err, MF_E_BadValue, "Unknown log type for rotate: %s", bson_iter_utf8(&it, NULL));
    if (mf_engine_rotate_log(op->eng) != 0)
        return mf_err_set(&op->err, MF_E_InternalError, "Log rotation failed: %s", strerror(errno));
    return 0;
}

const mf_cmd_def_t mf_cmds_misc[] = {
    {"logRotate", cmd_log_rotate, MF_CMD_ADMIN_ONLY, NULL},
    {"createSearchIndexes", cmd_search_index, 0, NULL},
    {"updateSearchIndex", cmd_search_index, 0, NULL},
    {"dropSearchIndex", cmd_search_index, 0, NULL},
    {"convertToCapped", cmd_convert_to_capped, 0, convert_fields},
    {"cloneCollectionAsCapped", cmd_clone_collection_as_capped, 0, clone_fields},
    {"dataSize", cmd_data_size, MF_CMD_NO_DB, data_size_fields},
    {"datasize", cmd_data_size, MF_CMD_NO_DB, data_size_fields},
    {"dbHash", cmd_db_hash, 0, db_hash_fields},
    {"dbhash", cmd_db_hash, 0, db_hash_fields},
    {"validateDBMetadata", cmd_validate_db_metadata, 0, meta_fields},
    {"top", cmd_top, MF_CMD_ADMIN_ONLY, NULL},
    {"lockInfo", cmd_lock_info, MF_CMD_ADMIN_ONLY, lock_info_fields},
    {"connPoolStats", cmd_conn_pool_stats, 0, NULL},
    {"planCacheClear", cmd_plan_cache_clear, 0, plan_cache_fields},
    {"planCacheClearFilters", cmd_plan_cache_clear_filters, 0, plan_cache_fields},
    {"planCacheListFilters", cmd_plan_cache_list_filters, 0, plan_cache_fields},
    {"planCacheSetFilter", cmd_plan_cache_set_filter, 0, plan_cache_fields},
    {NULL, NULL, 0, NULL},
};
