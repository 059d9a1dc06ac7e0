/*
 * agg_write.c: the writes of $out and $merge (see agg_write.h).
 *
 * $out builds the new contents beside the target: a temporary collection
 * with the target's options and secondary indexes, filled in chunked
 * transactions, then renamed over the target with the target's drop in the
 * same catalog transaction, so a failure leaves the old target whole.
 * $out into a time-series collection (the target is one, or the stage's
 * 'timeseries' option names one to create) does as mongod 8.0's
 * DocumentSourceOut: the temporary collection is a time-series collection
 * (tmp.agg_out.<oid> and its system.buckets.tmp.agg_out.<oid>) with the
 * target's options, expiry and buckets indexes, filled through the
 * time-series insert path (query/ts_write.c, so measurements land in
 * buckets); commit renames its buckets over the target's in one catalog
 * transaction, then drops the temporary view and, for a new target, creates
 * the view. Options given with the stage must match an existing
 * time-series target (7406103), and a plain collection or view there is
 * 7268700.
 * $merge creates the target if needed, then applies each document by its
 * 'on' fields (whenMatched: merge, replace, keepExisting, fail, or a
 * pipeline-style update of the matching document with $$new and the let
 * variables from the incoming one; whenNotMatched: insert, discard, fail)
 * in chunked transactions.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "catalog/coll_write.h"
#include "catalog/timeseries.h"
#include "common/alloc.h"
#include "common/fmt.h"
#include "common/limits.h"
#include "common/log.h"
#include "doc/check.h"
#include "doc/collation.h"
#include "doc/match.h"
#include "doc/path.h"
#include "doc/value.h"
#include "query/agg.h"
#include "query/agg_write.h"
#include "query/batch.h"
#include "query/exec.h"
#include "query/ts_write.h"

#define OUT_CHUNK 500 /* documents per transaction */
#define OUT_COMMIT_ATTEMPTS 100 /* runs of $out's drop + rename that met a write conflict */

typedef struct out_ctx {
    mf_sess_t *s;
    mf_coll_t *c;
    const char *on[32];  /* $merge: the 'on' fields */
    int non;
    const char *when_matched, *when_not_matched;
    const mf_merge_update_t *upd; /* whenMatched "pipeline": the update (the writer owns it) */
    /* the write to perform */
    mf_docvec_t *docs;
    const char *db, *coll;
    bool durable;
    bool validate; /* documents must pass the collection's validator (no bypassDocumentValidation) */
    mf_catalog_t *cat; /* its clock fills a top-level Timestamp(0, 0) (mf_catalog_tick_ts) */
} out_ctx_t;

/*
 * insert_doc_item: inserts document i (with _id first, generated when
 * absent); fill: a top-level Timestamp(0, 0) is filled with the server's
 * time, as an insert command's or a replacement's would be.
 */
static int
insert_doc_item(out_ctx_t *x, size_t i, bool fill, mf_error_t *err)
{
    const bson_t *doc = x->docs->docs[i];
    bson_t fixed;
    int ret;

    if (mf_doc_id_is_first(doc) && !(fill && mf_doc_has_empty_ts(doc))) {
        if (x->validate && mf_coll_validate(x->c, doc, NULL, err) != 0)
            return -1;
        return mf_coll_insert(x->s, x->c, doc, NULL, err);
    }
    mf_doc_for_insert(doc, fill ? mf_catalog_tick_ts : NULL, x->cat, &fixed);
    if (x->validate && mf_coll_validate(x->c, &fixed, NULL, err) != 0)
        ret = -1;
    else
        ret = mf_coll_insert(x->s, x->c, &fixed, NULL, err);
    bson_destroy(&fixed);
    return ret;
}

/* out_insert_item: $out's insert of document i: mongod's runs an insert command, which fills Timestamp(0, 0). */
static int
out_insert_item(void *arg, size_t i, mf_error_t *err)
{
    return insert_doc_item(arg, i, true, err);
}

static mf_index_t *on_index(const mf_coll_t *c, const char *const *on, int n);

/* merge_find: the record of x->c matching doc on the 'on' fields; 0 found, MF_NOTFOUND, or -1 / MF_CONFLICT. */
static int
merge_find(out_ctx_t *x, const bson_t *doc, int64_t *rid, mf_error_t *err)
{
    bson_t filter = BSON_INITIALIZER;
    bson_value_t v;
    int ret;

    for (int k = 0; k < x->non; k++) {
        bool found = mf_path_get(doc, x->on[k], &v);
        if (found && v.value_type == BSON_TYPE_ARRAY) {
            /* merge_processor.cpp's extractMergeOnFieldsFromDoc: an array is 51185, before the nullish check. */
            bson_destroy(&filter);
            return mf_err_set(err, MF_E_Location51185, "$merge write error: 'on' field '%s' is an array", x->on[k]);
        }
        if (!found || v.value_type == BSON_TYPE_NULL || v.value_type == BSON_TYPE_UNDEFINED) {
            bson_destroy(&filter);
            return mf_err_set(err, MF_E_Location51132,
                              "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array",
                              x->on[k]);
        }
        bson_append_value(&filter, x->on[k], -1, &v);
    }
    /* The _id index finds it when its collation is the aggregation's (else two strings may match under one, not the other). */
    if (x->non == 1 && strcmp(x->on[0], "_id") == 0 && x->c->nindexes > 0 && x->c->indexes[0]->is_id &&
        mf_collation_equal(x->c->indexes[0]->kp.collation, mf_collation_current())) {
        bson_iter_t it;
        bson_iter_init_find(&it, &filter, "_id");
        ret = mf_coll_find_id(x->s, x->c, bson_iter_value(&it), rid, err);
        bson_destroy(&filter);
        return ret;
    }
    mf_matcher_t *m = mf_matcher_new(&filter, err);
    if (m == NULL) {
        bson_destroy(&filter);
        return -1;
    }
    mf_exec_first_t f = {0, false};
    ret = mf_exec_scan(x->s, x->c, &filter, m, 0, mf_exec_first_visit, &f, NULL, err);
    mf_matcher_free(m);
    bson_destroy(&filter);
    if (ret != 0)
        return ret;
    if (!f.found)
        return MF_NOTFOUND;
    *rid = f.rid;
    return 0;
}

/* merge_item: applies document i to the target as whenMatched / whenNotMatched say. */
static int
merge_item(void *arg, size_t i, mf_error_t *err)
{
    out_ctx_t *x = arg;
    const bson_t *doc = x->docs->docs[i];
    bson_iter_t it;
    int64_t rid;
    int ret;

    if (x->non == 1 && strcmp(x->on[0], "_id") == 0 && !bson_iter_init_find(&it, doc, "_id"))
        ret = MF_NOTFOUND; /* a generated _id matches nothing */
    else
        ret = merge_find(x, doc, &rid, err);
    if (ret == MF_NOTFOUND) {
        if (strcmp(x->when_not_matched, "discard") == 0)
            return 0;
        if (strcmp(x->when_not_matched, "fail") == 0)
            return mf_err_set(err, MF_E_MergeStageNoMatchingDocument,
                              "$merge could not find a matching document in the target collection for at least one "
                              "document in the source collection");
        /*
         * As mongod's: whenMatched replace upserts the document as a
         * replacement and fail inserts it, both filling a Timestamp(0, 0);
         * merge ($set), keepExisting ($setOnInsert) and a pipeline upsert
         * keep it.
         */
        bool fill = strcmp(x->when_matched, "replace") == 0 || strcmp(x->when_matched, "fail") == 0;
        return insert_doc_item(x, i, fill, err);
    }
    if (ret != 0)
        return ret;
    if (strcmp(x->when_matched, "keepExisting") == 0)
        return 0;
    if (strcmp(x->when_matched, "fail") == 0) {
        /* As mongod: the insert's duplicate key on the `on` fields' unique index, with $merge's context. */
        mf_index_t *ix = on_index(x->c, x->on, x->non);
        if (ix != NULL)
            mf_coll_dup_key_error(x->c, ix, doc, NULL, err);
        else
            mf_err_set(err, MF_E_DuplicateKey, "E11000 duplicate key error collection: %s.%s", x->c->db, x->c->name);
        return mf_err_context(err, "$merge failed due to a DuplicateKey error");
    }
    bson_t old, neu = BSON_INITIALIZER;
    bson_value_t oid, nid;
    if ((ret = mf_coll_fetch(x->s, x->c, rid, &old, err)) != 0)
        return ret == MF_NOTFOUND ? MF_CONFLICT : ret;
    bool has_oid = bson_iter_init_find(&it, &old, "_id");
    if (has_oid)
        oid = *bson_iter_value(&it);
    bson_iter_t ni;
    if (has_oid && bson_iter_init_find(&ni, doc, "_id")) {
        nid = *bson_iter_value(&ni);
        if (!mf_value_equal(&oid, &nid)) {
            bson_destroy(&old);
            return mf_err_set(err, MF_E_ImmutableField,
                              "$merge failed to update the matching document, did you attempt to modify the _id or "
                              "the shard key? :: caused by :: Performing an update on the path '_id' would modify the "
                              "immutable field '_id'");
        }
    }
    if (has_oid)
        bson_append_value(&neu, "_id", 3, &oid);
    if (x->upd != NULL) {
        /* The matching document through the pipeline, $$new (and the let variables) from the incoming one. */
        bson_t *res;
        if (mf_merge_update_apply(x->upd, doc, &old, &res, err) != 0) {
            bson_destroy(&old);
            bson_destroy(&neu);
            return -1;
        }
        bool moved = false;
        if (bson_iter_init_find(&ni, res, "_id"))
            moved = !has_oid || !(mf_value_equal(&oid, bson_iter_value(&ni)) && oid.value_type == bson_iter_type(&ni));
        if (moved) {
            bson_destroy(res);
            bson_destroy(&old);
            bson_destroy(&neu);
            return mf_err_set(err, MF_E_ImmutableField,
                              "$merge failed to update the matching document, did you attempt to modify the _id or "
                              "the shard key? :: caused by :: Performing an update on the path '_id' would modify the "
                              "immutable field '_id'");
        }
        bson_iter_init(&it, res);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_value(&neu, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
        bson_destroy(res);
    } else if (strcmp(x->when_matched, "replace") == 0) {
        /* A replacement: a top-level Timestamp(0, 0) is filled, as mongod's ObjectReplaceExecutor. */
        bson_iter_init(&it, doc);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                mf_doc_append_filled(&neu, &it, mf_catalog_tick_ts, x->cat);
    } else {
        /* merge: existing fields keep their place (with the new value), new fields are appended. */
        bson_iter_init(&it, &old);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "_id") == 0)
                continue;
            if (bson_iter_init_find(&ni, doc, k))
                bson_append_value(&neu, k, (int)bson_iter_key_len(&it), bson_iter_value(&ni));
            else
                bson_append_value(&neu, k, (int)bson_iter_key_len(&it), bson_iter_value(&it));
        }
        bson_iter_init(&ni, doc);
        while (bson_iter_next(&ni)) {
            const char *k = bson_iter_key(&ni);
            if (strcmp(k, "_id") != 0 && !bson_iter_init_find(&it, &old, k))
                bson_append_value(&neu, k, (int)bson_iter_key_len(&ni), bson_iter_value(&ni));
        }
    }
    if (neu.len > MF_MAX_BSON_SIZE)
        ret = mf_err_set(err, MF_E_BSONObjectTooLarge, "$merge: the resulting document is too large (%u bytes)",
                         neu.len);
    else if (mf_check_doc_for_storage(&neu, err) != 0)
        ret = -1;
    else if (x->validate && mf_coll_validate(x->c, &neu, &old, err) != 0)
        ret = -1;
    else if (!(neu.len == old.len && memcmp(bson_get_data(&neu), bson_get_data(&old), neu.len) == 0))
        ret = mf_coll_replace(x->s, x->c, rid, &old, &neu, err);
    else
        ret = 0;
    bson_destroy(&old);
    bson_destroy(&neu);
    return ret;
}

/*
 * check_docs: every document of docs as the pipeline hands it on (over
 * 16 MiB + 16 KiB is mongod's "BSONObj size: ... is invalid", raised when
 * the stage before $out / $merge serialises it), then as it is stored.
 * 0, or -1 with err.
 */
static int
check_docs(const mf_docvec_t *docs, mf_error_t *err)
{
    for (size_t i = 0; i < docs->len; i++)
        if (mf_check_doc_built_size(docs->docs[i], err) != 0 || mf_check_doc_for_storage(docs->docs[i], err) != 0)
            return -1;
    return 0;
}

/* run_out_batches: runs fn over every document of x->docs; 0, or -1 with err. */
static int
run_out_batches(out_ctx_t *x, mf_batch_item_fn fn, mf_error_t *err)
{
    size_t i = 0;
    int r = mf_batch_run(x->s, &i, x->docs->len, OUT_CHUNK, x->durable, fn, NULL, x, err);
    return r == 0 ? 0 : -1;
}

/*
 * The writer. $out: begin creates the temporary collection (tmp.agg_out.<oid>,
 * with the target's options and secondary indexes) under the write lock;
 * each append inserts a batch under the read lock; commit drops the target
 * and renames the temporary collection over it in one catalog transaction;
 * free without commit drops the temporary collection. $merge: begin creates
 * the target if needed; each append merges a batch. No catalog lock is held
 * between calls, so a pipeline can stream into its writer batch by batch.
 */
struct mf_agg_writer {
    mf_catalog_t *cat;
    out_ctx_t w;          /* db, coll point at the owned copies below */
    char *db, *coll;      /* owned */
    char tmp[64];         /* $out: the temporary collection ("" when none) */
    bson_t *merge_spec;   /* owned, NULL for $out */
    bson_t *ts;           /* owned: $out into a time-series collection, its timeseries options; else NULL */
    mf_merge_update_t *upd; /* owned: a whenMatched pipeline, or NULL */
    bool committed;
};

/* drop_tmp: drops $out's temporary collection, if it exists (logs a failure). */
static void
drop_tmp(mf_agg_writer_t *wr)
{
    mf_error_t e2;
    mf_err_clear(&e2);
    mf_catalog_wrlock(wr->cat);
    mf_coll_t *t = mf_catalog_coll_find(wr->cat, wr->db, wr->tmp);
    if (t != NULL && mf_catalog_coll_drop(wr->cat, t, &e2) != 0)
        mf_log(MF_LOG_WARN, "COMMAND", "$out: could not drop %s.%s: %s", wr->db, wr->tmp, e2.msg);
    if (wr->ts != NULL) {
        /* A time-series temporary collection has its buckets beside the view. */
        char bname[256];
        mf_ts_buckets_name(wr->tmp, bname, sizeof bname);
        mf_err_clear(&e2);
        t = mf_catalog_coll_find(wr->cat, wr->db, bname);
        if (t != NULL && mf_catalog_coll_drop(wr->cat, t, &e2) != 0)
            mf_log(MF_LOG_WARN, "COMMAND", "$out: could not drop %s.%s: %s", wr->db, bname, e2.msg);
    }
    mf_catalog_unlock(wr->cat);
    wr->tmp[0] = '\0';
}

/*
 * ts_check_target: settles whether this $out writes a time-series
 * collection (wr->ts), as mongod 8.0's validateTimeseries: the stage's
 * options (user_ts, may be NULL) normalized as create does them; none given
 * and the target is time-series, the target's. Options given: a plain
 * collection or view at the target is 7268700, a time-series target with
 * other options 7406103. Catalog lock held. Returns 0 or -1 with err.
 */
static int
ts_check_target(mf_agg_writer_t *wr, const mf_coll_t *target, const bson_value_t *user_ts, mf_error_t *err)
{
    char ns[512];
    bson_t have, want;

    bool target_ts = mf_ts_options_of(target, &have);
    if (user_ts == NULL) {
        if (target_ts)
            wr->ts = bson_copy(&have);
        return 0;
    }
    snprintf(ns, sizeof ns, "%s.%s", wr->db, wr->coll);
    if (mf_ts_options_normalize(ns, user_ts, &want, err) != 0)
        return -1;
    if (target != NULL && !target_ts) {
        bson_destroy(&want);
        return mf_err_set(err, MF_E_Location7268700,
                          "Cannot create a time-series collection from a non time-series collection or view.");
    }
    /* Both sides are in create's normal form (defaults filled in), so equal options are equal bytes. */
    if (target_ts && !bson_equal(&have, &want)) {
        /* BSONObj::toString / BSONElement::toString: "{ timeField: \"t\", ... }", as mongod prints them. */
        char a[512], b[512];
        mf_fmt_doc(&want, a, sizeof a);
        mf_fmt_doc(&have, b, sizeof b);
        mf_err_set(err, MF_E_Location7406103,
                   "Time-series options inputted must match the existing time-series collection. Received: %s"
                   "Found: timeseries: %s",
                   a, b);
        bson_destroy(&want);
        return -1;
    }
    wr->ts = bson_copy(&want);
    bson_destroy(&want);
    return 0;
}

/*
 * ts_out_begin: creates $out's time-series temporary collection: wr->ts,
 * the target's expireAfterSeconds, and the target buckets' indexes that
 * creating it did not make already (as mongod copies the buckets
 * collection's index specs). Catalog write lock held.
 */
static int
ts_out_begin(mf_agg_writer_t *wr, mf_coll_t *target, mf_error_t *err)
{
    mf_coll_t *tb = mf_ts_buckets_of(wr->cat, target);
    bson_iter_t it;
    int64_t expire = -1;
    char bname[256];

    if (tb != NULL && bson_iter_init_find(&it, tb->options, "expireAfterSeconds") && BSON_ITER_HOLDS_NUMBER(&it))
        expire = bson_iter_as_int64(&it);
    if (mf_ts_create(wr->cat, wr->db, wr->tmp, wr->ts, expire, err) != 0)
        return -1;
    mf_ts_buckets_name(wr->tmp, bname, sizeof bname);
    mf_coll_t *t = mf_catalog_coll_find(wr->cat, wr->db, bname);
    for (int k = 0; tb && t && k < tb->nindexes; k++) {
        const mf_index_t *ix = tb->indexes[k];
        bool have = false;
        for (int j = 0; j < t->nindexes && !have; j++)
            have = strcmp(t->indexes[j]->name, ix->name) == 0;
        if (ix->building || ix->is_id || have)
            continue;
        if (mf_catalog_index_add(wr->cat, t, ix->spec, err) != 0)
            return -1;
    }
    return 0;
}

/*
 * out_begin: creates the temporary collection, with the target's options
 * and secondary indexes; a time-series one when the target is time-series
 * or user_ts (the stage's 'timeseries' option, may be NULL) asks for one.
 */
/*
 * tmp_uuid: the suffix of $out's temporary collection, a random (version 4)
 * UUID as mongod names it: "tmp.agg_out." << UUID::gen()
 * (document_source_out.cpp), e.g. tmp.agg_out.9c79fa0c-4512-42ae-97bf-50d958271143.
 * Without getrandom the bytes come from an ObjectId (unique per process).
 */
static void
tmp_uuid(char out[37])
{
    uint8_t u[16];
    if (getrandom(u, sizeof u, 0) != (ssize_t)sizeof u) {
        bson_oid_t oid;
        static _Atomic uint32_t seq;
        uint32_t n = atomic_fetch_add(&seq, 1);
        bson_oid_init(&oid, NULL);
        memcpy(u, oid.bytes, 12);
        memcpy(u + 12, &n, 4);
    }
    u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
    u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
    mf_fmt_uuid(u, out);
}

static int
out_begin(mf_agg_writer_t *wr, const bson_value_t *user_ts, mf_error_t *err)
{
    char hex[37];
    mf_coll_t *target, *t = NULL;
    int rc = -1;

    tmp_uuid(hex);
    mf_catalog_wrlock(wr->cat);
    target = mf_catalog_coll_find(wr->cat, wr->db, wr->coll);
    if (target != NULL && target->capped) {
        /* As mongod's DocumentSourceOut: replacing a capped collection's contents would lose its bounds. */
        mf_err_set(err, MF_E_Location17152, "namespace '%s.%s' is capped so it can't be used for $out", wr->db,
                   wr->coll);
        mf_catalog_unlock(wr->cat);
        return -1;
    }
    if (ts_check_target(wr, target, user_ts, err) != 0) {
        mf_catalog_unlock(wr->cat);
        return -1;
    }
    if (target != NULL && target->is_view && wr->ts == NULL) {
        mf_err_set(err, MF_E_CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", wr->db,
                   wr->coll);
        mf_catalog_unlock(wr->cat);
        return -1;
    }
    snprintf(wr->tmp, sizeof wr->tmp, "%s%s", MF_AGG_OUT_TMP_PREFIX, hex);
    if (wr->ts != NULL) {
        /* Its documents live in buckets: the temporary collection is a time-series collection too. */
        if (ts_out_begin(wr, target, err) != 0) {
            if (err->code == MF_E_NamespaceExists) /* nothing of ours was made */
                wr->tmp[0] = '\0';
            goto out;
        }
        rc = 0;
        goto out;
    }
    if (mf_catalog_coll_create(wr->cat, wr->db, wr->tmp, target ? target->options : NULL, &t, err) != 0) {
        wr->tmp[0] = '\0';
        goto out;
    }
    for (int k = 0; target && k < target->nindexes; k++) {
        if (target->indexes[k]->building || target->indexes[k]->is_id)
            continue;
        if (mf_catalog_index_add(wr->cat, t, target->indexes[k]->spec, err) != 0)
            goto out;
    }
    rc = 0;
out:
    mf_catalog_unlock(wr->cat);
    if (rc != 0 && wr->tmp[0])
        drop_tmp(wr);
    return rc;
}

/*
 * on_index: c's (NULL: none yet) ready unique index, not partial, whose key
 * fields are exactly the n fields of on, in any order, each with a numeric
 * direction, and whose collation is the aggregation's (the calling thread's
 * current one) (mongod's $merge supportsUniqueKey and
 * keyPatternNamesExactPaths; the _id index for on: ["_id"]); NULL when none.
 * Catalog lock held; valid while it is.
 */
static mf_index_t *
on_index(const mf_coll_t *c, const char *const *on, int n)
{
    for (int k = 0; c != NULL && k < c->nindexes; k++) {
        const mf_index_t *ix = c->indexes[k];
        bson_iter_t it, key;
        if (ix->building || !(ix->unique || ix->is_id) || bson_iter_init_find(&it, ix->spec, "partialFilterExpression") ||
            !bson_iter_init_find(&it, ix->spec, "key") || !bson_iter_recurse(&it, &key) ||
            !mf_collation_equal(ix->kp.collation, mf_collation_current()))
            continue;
        int nkeys = 0;
        bool all = true;
        while (bson_iter_next(&key) && all) {
            bool found = false;
            for (int i = 0; i < n && !found; i++)
                found = strcmp(on[i], bson_iter_key(&key)) == 0;
            all = found && mf_value_is_number(bson_iter_value(&key));
            nkeys++;
        }
        if (all && nkeys == n)
            return c->indexes[k];
    }
    return NULL;
}

/* merge_begin: parses the $merge spec; checks the target and its `on` index; creates the target if needed. */
static int
merge_begin(mf_agg_writer_t *wr, mf_error_t *err)
{
    out_ctx_t *x = &wr->w;
    bson_iter_t it, ai;

    x->when_matched = "merge";
    x->when_not_matched = "insert";
    if (bson_iter_init_find(&it, wr->merge_spec, "on") && bson_iter_recurse(&it, &ai))
        while (bson_iter_next(&ai) && x->non < 32)
            x->on[x->non++] = bson_iter_utf8(&ai, NULL);
    if (bson_iter_init_find(&it, wr->merge_spec, "whenMatched"))
        x->when_matched = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, wr->merge_spec, "whenNotMatched"))
        x->when_not_matched = bson_iter_utf8(&it, NULL);
    if (strcmp(x->when_matched, "pipeline") == 0) {
        bson_iter_t li;
        bool has_let = bson_iter_init_find(&li, wr->merge_spec, "let");
        if (!bson_iter_init_find(&it, wr->merge_spec, "whenMatchedPipeline"))
            return mf_err_set(err, MF_E_InternalError, "$merge: whenMatched pipeline missing");
        if ((wr->upd = mf_merge_update_new(bson_iter_value(&it), has_let ? bson_iter_value(&li) : NULL, err)) == NULL)
            return -1;
        x->upd = wr->upd;
    }
    if (x->non == 0) {
        x->on[0] = "_id";
        x->non = 1;
    }
    mf_catalog_wrlock(wr->cat);
    mf_coll_t *target = mf_catalog_coll_find(wr->cat, wr->db, wr->coll);
    /* A time-series collection too: $merge cannot add to one (mongod 8.0, where it is a view on its buckets). */
    if (target != NULL && target->is_view) {
        mf_err_set(err, MF_E_CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", wr->db,
                   wr->coll);
        mf_catalog_unlock(wr->cat);
        return -1;
    }
    if (!(x->non == 1 && strcmp(x->on[0], "_id") == 0) && on_index(target, x->on, x->non) == NULL) {
        /* As mongod: `on` other than _id needs a unique index on exactly those fields, to match one document. */
        mf_err_set(err, MF_E_Location51183, "Cannot find index to verify that join fields will be unique");
        mf_catalog_unlock(wr->cat);
        return -1;
    }
    if (target == NULL && mf_catalog_coll_create(wr->cat, wr->db, wr->coll, NULL, NULL, err) != 0 &&
        err->code != MF_E_NamespaceExists) {
        mf_catalog_unlock(wr->cat);
        return -1;
    }
    mf_err_clear(err); /* NamespaceExists: another request created it first */
    mf_catalog_unlock(wr->cat);
    return 0;
}

/* writer_begin: mf_agg_writer_begin with the $out stage's 'timeseries' option (NULL: none). */
static mf_agg_writer_t *
writer_begin(mf_catalog_t *cat, mf_sess_t *s, bool durable, bool validate, const char *db, const char *coll,
             const bson_t *merge_spec, const bson_value_t *user_ts, mf_error_t *err)
{
    mf_agg_writer_t *wr = mf_calloc(1, sizeof *wr);
    wr->cat = cat;
    wr->db = mf_strdup(db);
    wr->coll = mf_strdup(coll);
    wr->merge_spec = merge_spec ? bson_copy(merge_spec) : NULL;
    wr->w.s = s;
    wr->w.cat = cat;
    wr->w.durable = durable;
    wr->w.validate = validate;
    wr->w.db = wr->db;
    wr->w.coll = wr->coll;
    if ((merge_spec ? merge_begin(wr, err) : out_begin(wr, user_ts, err)) != 0) {
        mf_agg_writer_free(wr);
        return NULL;
    }
    return wr;
}

mf_agg_writer_t *
mf_agg_writer_begin(mf_catalog_t *cat, mf_sess_t *s, bool durable, bool validate, const char *db, const char *coll,
                    const bson_t *merge_spec, mf_error_t *err)
{
    return writer_begin(cat, s, durable, validate, db, coll, merge_spec, NULL, err);
}

mf_agg_writer_t *
mf_agg_writer_begin_out_ts(mf_catalog_t *cat, mf_sess_t *s, bool durable, bool validate, const char *db,
                           const char *coll, const bson_value_t *ts, mf_error_t *err)
{
    return writer_begin(cat, s, durable, validate, db, coll, NULL, ts, err);
}

/* ts_first_error: keeps the first measurement error of a time-series insert (arg: an mf_error_t). */
static void
ts_first_error(void *arg, size_t index, const mf_error_t *e)
{
    mf_error_t *first = arg;
    (void)index;
    if (first->code == 0)
        *first = *e;
}

/*
 * ts_append: inserts a batch into the time-series temporary collection
 * through the time-series insert path, ordered: the first measurement that
 * fails (no Date in the timeField: 2 BadValue) fails the stage, as mongod's
 * insertTimeseries does.
 */
static int
ts_append(mf_agg_writer_t *wr, mf_docvec_t *docs, mf_error_t *err)
{
    /* bson_t needs 128-byte alignment: an array of them comes from bson_aligned_alloc0 (never NULL). */
    bson_t *arr = bson_aligned_alloc0(BSON_ALIGNOF(bson_t), (docs->len ? docs->len : 1) * sizeof *arr);
    mf_error_t first;
    int64_t inserted = 0;
    int rc;

    for (size_t i = 0; i < docs->len; i++)
        bson_init_static(&arr[i], bson_get_data(docs->docs[i]), docs->docs[i]->len);
    mf_err_clear(&first);
    rc = mf_ts_insert(wr->cat, wr->w.s, wr->w.durable, wr->db, wr->tmp, arr, docs->len, true, ts_first_error, &first,
                      &inserted, err);
    if (rc == 0 && first.code != 0) {
        *err = first;
        rc = -1;
    }
    bson_free(arr);
    return rc;
}

/* view_options_for: the time-series view options of tv (the temporary view) for buckets bname: viewOn replaced. */
static void
view_options_for(const mf_coll_t *tv, const char *bname, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    BSON_APPEND_UTF8(out, "viewOn", bname);
    if (bson_iter_init(&it, tv->options))
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "viewOn") != 0)
                bson_append_iter(out, bson_iter_key(&it), -1, &it);
}

/*
 * ts_commit_once: the time-series $out's replacement, under the catalog
 * write lock: the temporary buckets renamed over the target's (the target's
 * drop in the same transaction), the temporary view dropped, and the view
 * created when the target did not exist. A target changed meanwhile into
 * something else than a time-series collection with these options fails
 * (125, as mongod's renameIfOptionsAndIndexesHaveNotChanged). A view that
 * cannot be created after the rename leaves no buckets without a view: they
 * are dropped, as mongod's $out cleans up.
 */
static int
ts_commit_once(mf_agg_writer_t *wr, mf_error_t *err)
{
    char tbname[256], bname[256];
    bson_t have, vopts;
    mf_error_t e2;

    mf_ts_buckets_name(wr->tmp, tbname, sizeof tbname);
    mf_ts_buckets_name(wr->coll, bname, sizeof bname);
    mf_coll_t *tv = mf_catalog_coll_find(wr->cat, wr->db, wr->tmp);
    mf_coll_t *tb = mf_catalog_coll_find(wr->cat, wr->db, tbname);
    mf_coll_t *v = mf_catalog_coll_find(wr->cat, wr->db, wr->coll);
    if (tv == NULL || tb == NULL)
        return mf_err_set(err, MF_E_NamespaceNotFound, "collection %s.%s was dropped during $out", wr->db, wr->tmp);
    if (v != NULL && !(mf_ts_options_of(v, &have) && bson_equal(&have, wr->ts)))
        return mf_err_set(err, MF_E_CommandFailed,
                          "collection options of target collection %s.%s changed during processing", wr->db,
                          wr->coll);
    mf_coll_t *b = mf_catalog_coll_find(wr->cat, wr->db, bname); /* without a view: a crash's leftover, replaced */
    if (mf_catalog_coll_rename_replace(wr->cat, tb, b, wr->db, bname, err) != 0)
        return -1;
    view_options_for(tv, bname, &vopts);
    mf_err_clear(&e2);
    if (mf_catalog_coll_drop(wr->cat, tv, &e2) != 0) /* start-up drops it if this fails (a tmp.agg_out name) */
        mf_log(MF_LOG_WARN, "COMMAND", "$out: could not drop %s.%s: %s", wr->db, wr->tmp, e2.msg);
    int rc = 0;
    if (v == NULL && (rc = mf_catalog_coll_create(wr->cat, wr->db, wr->coll, &vopts, NULL, err)) != 0) {
        mf_err_clear(&e2);
        if ((b = mf_catalog_coll_find(wr->cat, wr->db, bname)) != NULL && mf_catalog_coll_drop(wr->cat, b, &e2) != 0)
            mf_log(MF_LOG_WARN, "COMMAND", "$out: could not drop %s.%s: %s", wr->db, bname, e2.msg);
    }
    bson_destroy(&vopts);
    return rc;
}

int
mf_agg_writer_append(mf_agg_writer_t *wr, mf_docvec_t *docs, mf_error_t *err)
{
    const char *name = wr->merge_spec ? wr->coll : wr->tmp;
    out_ctx_t x = wr->w;
    int rc;

    if (check_docs(docs, err) != 0)
        return -1;
    if (wr->ts != NULL)
        return ts_append(wr, docs, err);
    mf_catalog_rdlock(wr->cat);
    x.c = mf_catalog_coll_find(wr->cat, wr->db, name);
    x.docs = docs;
    if (x.c == NULL)
        rc = mf_err_set(err, MF_E_NamespaceNotFound, "collection %s.%s was dropped during %s", wr->db, name,
                        wr->merge_spec ? "$merge" : "$out");
    else
        rc = run_out_batches(&x, wr->merge_spec ? merge_item : out_insert_item, err);
    mf_catalog_unlock(wr->cat);
    return rc;
}

int
mf_agg_writer_commit(mf_agg_writer_t *wr, mf_error_t *err)
{
    int rc = 0;

    if (wr->merge_spec == NULL) {
        /*
         * The target's drop and the rename are one catalog transaction: a
         * failure keeps the old target. One that met a write conflict (a
         * catalog or sizes row another thread was writing) runs again, as
         * mongod's writeConflictRetry would, after the lock is let go.
         */
        for (int attempt = 0;; attempt++) {
            mf_catalog_wrlock(wr->cat);
            mf_coll_t *target;
            mf_coll_t *t = wr->ts != NULL
                               ? NULL
                               : mf_catalog_coll_find_pair(wr->cat, wr->db, wr->tmp, wr->db, wr->coll, &target);
            if (wr->ts != NULL)
                rc = ts_commit_once(wr, err);
            else if (t == NULL)
                rc = mf_err_set(err, MF_E_NamespaceNotFound, "collection %s.%s was dropped during $out", wr->db,
                                wr->tmp);
            else
                rc = mf_catalog_coll_rename_replace(wr->cat, t, target, wr->db, wr->coll, err);
            mf_catalog_unlock(wr->cat);
            if (rc == 0 || err->code != MF_E_WriteConflict || attempt >= OUT_COMMIT_ATTEMPTS)
                break;
            mf_err_clear(err);
            mf_batch_backoff(attempt);
        }
        if (rc != 0)
            return -1;
        wr->tmp[0] = '\0';
    }
    wr->committed = true;
    return 0;
}

void
mf_agg_writer_free(mf_agg_writer_t *wr)
{
    if (wr == NULL)
        return;
    if (!wr->committed && wr->tmp[0])
        drop_tmp(wr);
    if (wr->merge_spec)
        bson_destroy(wr->merge_spec);
    if (wr->ts)
        bson_destroy(wr->ts);
    mf_merge_update_free(wr->upd);
    free(wr->db);
    free(wr->coll);
    free(wr);
}

