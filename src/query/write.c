/*
 * write.c: insert, update, delete and findAndModify against a collection
 * (see write.h).
 *
 * Every multi-document write runs in two phases. First the statement's
 * filter is planned (the plan's root is UPDATE, DELETE or BATCHED_DELETE,
 * as explain shows it) and the matching record ids are collected, up to one
 * when the statement touches a single document. Then the records are
 * written in chunked transactions (mf_batch_run, mf_delete_rids): each is
 * re-fetched and re-matched inside its transaction, so a document changed
 * or deleted since the scan is judged on what it is now, and a write
 * conflict retries the chunk. Per-record outcomes go into a slot array that
 * is folded into the counters only when a chunk commits, so the counters
 * never include rolled-back work.
 *
 * An update is an update document (doc/update.h: operators or a
 * replacement) or a pipeline (pipeline-style update: $set/$addFields/
 * $unset/$project/$replaceRoot/$replaceWith stages), run over a source that
 * yields just the document being updated. An upsert that matched nothing
 * builds its document from the filter's equalities (a replacement takes
 * only _id from them) and the update, and inserts it in its own
 * transaction.
 *
 * findAndModify finds one record (the first in sort order; a sort that no
 * index provides is a scan keeping the best document), then re-reads,
 * re-matches and writes it in one transaction, starting over when the
 * record went away or the transaction conflicted. The document it returns
 * is projected before that transaction commits, so a failing projection
 * never leaves a write behind an error reply.
 *
 * The catalog lock is held shared for the whole of one call (taken
 * exclusive briefly when an insert or upsert creates the collection).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/coll_write.h"
#include "catalog/observer.h"
#include "common/alloc.h"
#include "common/docvec.h"
#include "common/fmt.h"
#include "common/limits.h"
#include "doc/check.h"
#include "doc/match.h"
#include "doc/project.h"
#include "doc/sort.h"
#include "doc/collation.h"
#include "doc/expr.h"
#include "doc/update.h"
#include "doc/value.h"
#include "query/agg.h"
#include "query/batch.h"
#include "query/exec.h"
#include "query/write.h"
#include "query/ts_write.h"

#define INSERT_CHUNK 500 /* inserted documents per transaction */
/*
 * ... and about this many bytes at most (fewer documents when they are
 * large): on a replica set a transaction is one raft entry, and an entry
 * of tens of megabytes keeps followers busy past an election timeout (a
 * 40 MB insertMany of 100 KB documents cost three primary changes).
 */
#define INSERT_TXN_BYTES ((size_t)8 << 20)
#define UPDATE_CHUNK 100 /* updated documents per transaction */
/* Times an upsert that lost the race to insert its document runs again as an update (upsert_dup_retryable). */
#define UPSERT_DUP_RETRIES 100
/*
 * Times an upsert with any other filter runs again after a duplicate key
 * (upsert_dup_rerun): enough for a writer that inserted the document
 * since this statement's scan; a duplicate that stays is the statement's
 * own (a document the filter leaves out holds the key), reported as E11000.
 */
#define UPSERT_RACE_RETRIES 3

/*
 * coll_acquire: opens a shared lock session and finds db.name for a write
 * (*out NULL when missing); with create, a missing collection is created
 * first (under a short exclusive session). A view fails with 166
 * CommandNotSupportedOnView. On return the thread holds a shared lock
 * session, whether it failed or not: the caller ends it. Returns 0, or -1
 * with err.
 */
static int
coll_acquire(mf_catalog_t *cat, const char *db, const char *name, bool create, mf_coll_t **out, mf_error_t *err)
{
    if (mf_catalog_coll_acquire(cat, db, name, create, out, err) != 0)
        return -1;
    if (*out != NULL && (*out)->is_view)
        return mf_err_set(err, MF_E_CommandNotSupportedOnView, "Namespace %s is a view, not a collection",
                          (*out)->ns);
    return 0;
}

/* ---------- insert ---------- */

/*
 * Bulk inserts: an insert of at least BULK_MIN_DOCS documents writes each
 * transaction's records first, then the keys of one index for all of them,
 * then the next index's (mf_coll_insert_record, mf_coll_insert_prepared_keys),
 * with the keys made before the transaction begins (mf_coll_keys_prepare,
 * with the documents' checks; a transaction with a document whose checks
 * fail, whose _id is not first or whose keys cannot be made takes the
 * ordinary path, mf_coll_insert_rid, for all its documents, which reports
 * the errors in order). Two threads inserting into one collection
 * at once then write to the same table's pages less often at the same
 * moment: WiredTiger 3.2's inserts into one page take its lock and share
 * its insert lists' cache lines, and bench/storage_floor.c's three inserts
 * per document, one document at a time, cost 2.5 µs of CPU a document on
 * one thread and 3.7-5 on two. A failure among the keys (a duplicate) is
 * reported at its document, the documents before it committed on their own
 * (mf_batch_run_hooked), as on the ordinary path.
 */
#define BULK_MIN_DOCS 64
_Static_assert(INSERT_CHUNK <= MF_PREP_SLOTS, "a bulk transaction's documents each need a prepared slot");

typedef struct insert_ctx {
    mf_sess_t *s;
    mf_catalog_t *cat; /* its clock fills a Timestamp(0, 0) (mf_catalog_tick_ts); NULL: kept (MF_WRITE_KEEP_EMPTY_TS) */
    mf_coll_t *c;
    const bson_t *docs;
    int64_t inserted;
    bool validate; /* check the collection's validator (no bypassDocumentValidation) */
    size_t n;      /* documents of the command */
    bool oplog;    /* local.oplog.rs: entries may reach mongod's internal limit (16 MB + 16 KB), as an op's own document is up to 16 MB */
    mf_rids_t rids; /* record ids reserved for them, a chunk's at a time (mf_rids_take) */
    /* Bulk inserts (above): documents [pfrom, pto) were looked at; if prepared, document j's keys are in slot j - pfrom. */
    bool bulk, prepared;
    size_t pfrom, pto;
    /*
     * The open transaction's records written by insert_item whose keys wait
     * for insert_finish_items, in order: the first ndone. Last, and left
     * uninitialized (12 KB that zeroing cost every insert command).
     */
    int ndone;
    mf_prepared_t done[INSERT_CHUNK];
} insert_ctx_t;

/* The next of the command's reserved record ids, for document i. */
static int64_t
insert_rid(insert_ctx_t *ctx, size_t i)
{
    size_t left = ctx->n - i;
    return mf_rids_take(&ctx->rids, ctx->c, (int64_t)(left < INSERT_CHUNK ? left : INSERT_CHUNK));
}

/* Inserts doc, which has its _id first, with the next of the command's reserved record ids. */
static int
insert_doc(insert_ctx_t *ctx, size_t i, const bson_t *doc, mf_error_t *err)
{
    return mf_coll_insert_rid(ctx->s, ctx->c, doc, insert_rid(ctx, i), err);
}

/*
 * before_items of a bulk insert: prepares documents [from, to) unless they
 * already are (a retry, or the part before a failed document).
 */
static int
insert_before_items(void *arg, size_t from, size_t to, mf_error_t *err)
{
    insert_ctx_t *ctx = arg;
    mf_error_t e;

    (void)err;
    ctx->ndone = 0;
    if (from >= ctx->pfrom && to <= ctx->pto && ctx->pto > ctx->pfrom)
        return 0;
    ctx->pfrom = from;
    ctx->pto = to;
    /* All or none: keys written after the records must not pass an ordinary insert's (duplicates, in order). */
    ctx->prepared = true;
    for (size_t j = from; j < to && ctx->prepared; j++) {
        const bson_t *doc = &ctx->docs[j];
        ctx->prepared = mf_check_doc_for_storage(doc, &e) == 0 && mf_doc_id_is_first(doc) &&
                        (ctx->cat == NULL || !mf_doc_has_empty_ts(doc)) &&
                        mf_coll_keys_prepare(ctx->c, doc, (int)(j - from)) == 0;
    }
    return 0;
}

/* finish_items of a bulk insert: the index keys of the records insert_item wrote. */
static int
insert_finish_items(void *arg, size_t from, size_t to, size_t *failed, mf_error_t *err)
{
    insert_ctx_t *ctx = arg;
    int k = 0;

    (void)from;
    (void)to;
    int ret = mf_coll_insert_prepared_keys(ctx->s, ctx->c, ctx->done, ctx->ndone, &k, err);
    if (ret != 0)
        *failed = ctx->pfrom + (size_t)ctx->done[k].slot;
    return ret;
}

static void
insert_after_items(void *arg)
{
    (void)arg;
    mf_coll_prepared_release();
}

static const mf_batch_hooks_t insert_hooks = {insert_before_items, insert_finish_items, insert_after_items};

static int
insert_item(void *arg, size_t i, mf_error_t *err)
{
    insert_ctx_t *ctx = arg;
    const bson_t *doc = &ctx->docs[i];
    bson_t fixed;
    int ret;

    if (ctx->bulk && ctx->prepared && i >= ctx->pfrom && i < ctx->pto) {
        int64_t rid = insert_rid(ctx, i);
        ret = mf_coll_insert_record(ctx->s, ctx->c, doc, rid, err);
        if (ret == 0)
            ctx->done[ctx->ndone++] = (mf_prepared_t){doc, rid, (int)(i - ctx->pfrom)};
        return ret;
    }
    if (ctx->oplog && doc->len > MF_MAX_BSON_SIZE) {
        if (doc->len > MF_MAX_BSON_INTERNAL_SIZE || !mf_doc_id_is_first(doc))
            return mf_err_set(err, MF_E_BSONObjectTooLarge, "oplog entry too large. size in bytes: %u, max size: %d",
                              doc->len, MF_MAX_BSON_INTERNAL_SIZE);
        return insert_doc(ctx, i, doc, err); /* written by the server itself: no field-name or depth check needed */
    }
    if (mf_check_doc_size(doc, MF_DOC_INSERTED, err) != 0 || mf_check_doc_for_storage(doc, err) != 0)
        return -1;
    if (mf_doc_id_is_first(doc) && (ctx->cat == NULL || !mf_doc_has_empty_ts(doc))) {
        if (ctx->validate && mf_coll_validate(ctx->c, doc, NULL, err) != 0)
            return -1;
        return insert_doc(ctx, i, doc, err);
    }
    /* _id first, and a top-level Timestamp(0, 0) filled with the server's time, as mongod's fixDocumentForInsert. */
    mf_doc_for_insert(doc, ctx->cat != NULL ? mf_catalog_tick_ts : NULL, ctx->cat, &fixed);
    if (mf_check_doc_size(&fixed, MF_DOC_INSERTED, err) != 0)
        ret = -1;
    else if (ctx->validate && mf_coll_validate(ctx->c, &fixed, NULL, err) != 0)
        ret = -1;
    else
        ret = insert_doc(ctx, i, &fixed, err);
    bson_destroy(&fixed);
    return ret;
}

static void
insert_commit(void *arg, size_t from, size_t to)
{
    ((insert_ctx_t *)arg)->inserted += (int64_t)(to - from);
}

int
mf_write_insert(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db, const char *coll,
                const bson_t *docs, size_t n, bool ordered, mf_write_error_fn on_error, void *arg, int64_t *inserted,
                mf_error_t *err)
{
    bool validate = (wflags & MF_WRITE_VALIDATE) != 0;
    insert_ctx_t x;
    size_t i = 0;
    int rc = -1;

    if (mf_ts_is_timeseries(cat, db, coll))
        return mf_ts_insert(cat, s, durable, db, coll, docs, n, ordered, on_error, arg, inserted, err);

    memset(&x, 0, offsetof(insert_ctx_t, done));
    x.s = s;
    x.cat = (wflags & MF_WRITE_KEEP_EMPTY_TS) ? NULL : cat;
    x.docs = docs;
    x.validate = validate;
    x.n = n;
    x.oplog = strcmp(db, "local") == 0 && strcmp(coll, "oplog.rs") == 0;
    if (coll_acquire(cat, db, coll, true, &x.c, err) != 0)
        goto out;
    /* With a validator to check, the ordinary path (it logs a failing document's warning once). */
    x.bulk = n >= BULK_MIN_DOCS && !x.c->capped && x.c->nindexes <= MF_PREP_MAX_INDEXES &&
             !(validate && (x.c->validator != NULL || (x.c->is_timeseries && !x.c->is_view)));
    while (i < n) {
        mf_error_t e;
        mf_err_clear(&e);
        /* The next transaction: up to INSERT_CHUNK documents and INSERT_TXN_BYTES (at least one document). */
        size_t end = i, bytes = 0;
        while (end < n && end - i < INSERT_CHUNK && (end == i || bytes + docs[end].len <= INSERT_TXN_BYTES))
            bytes += docs[end++].len;
        int r = mf_batch_run_hooked(s, &i, end, INSERT_CHUNK, durable, insert_item, insert_commit,
                                    x.bulk ? &insert_hooks : NULL, &x, &e);
        if (r == 0)
            continue; /* i is end now */
        if (r < 0) {
            *err = e;
            goto out;
        }
        on_error(arg, i, &e);
        i++;
        if (ordered || mf_txn_user(s))
            break; /* in a multi-document transaction the first error ends the batch, ordered or not (as mongod) */
    }
    rc = 0;
out:
    mf_catalog_unlock(cat);
    *inserted = x.inserted;
    return rc;
}

/* ---------- update specs: an update document or a pipeline ---------- */

struct mf_update_spec {
    mf_update_t *u;
    mf_pipeline_t *pl;
};

void
mf_update_spec_free(mf_update_spec_t *x)
{
    if (x == NULL)
        return;
    if (x->u)
        mf_update_free(x->u);
    if (x->pl)
        mf_pipeline_free(x->pl);
    free(x);
}

/*
 * mf_update_spec_new: from an update document ud, or a pipeline (an array value)
 * when pipeline is not NULL; af is arrayFilters (or NULL). Returns the spec,
 * which the caller frees with mf_update_spec_free, or NULL with err.
 */
mf_update_spec_t *
mf_update_spec_new(const bson_t *ud, const bson_value_t *pipeline, const bson_value_t *af, mf_error_t *err)
{
    mf_update_spec_t *x = mf_calloc(1, sizeof(*x));
    if (pipeline == NULL) {
        if ((x->u = mf_update_new(ud, af, err)) == NULL) {
            free(x);
            return NULL;
        }
        return x;
    }
    if (af != NULL) {
        mf_err_set(err, MF_E_FailedToParse, "arrayFilters may not be specified for pipeline-style updates");
        free(x);
        return NULL;
    }
    if (mf_pipeline_check_update_stages(pipeline, err) != 0 || (x->pl = mf_pipeline_new(pipeline, err)) == NULL) {
        free(x);
        return NULL;
    }
    return x;
}

static bool
upd_spec_is_replacement(const mf_update_spec_t *x)
{
    return x->u != NULL && mf_update_is_replacement(x->u);
}

/*
 * pipeline_id_check: the pipeline's result replaces the document as mongod's
 * ObjectReplaceExecutor::applyReplacementUpdate does, and the same checks of
 * _id apply (as mf_update_apply's replacement): an update validates r for
 * storage first (an array, regex or undefined _id is 53), then the immutable
 * _id: an array is 54 (an upsert's insert gets here with it), a value that
 * compares unequal to the old one is 66 (1.0 for 1 passes). 0, or -1 with err.
 */
static int
pipeline_id_check(const bson_value_t *oldv, const bson_value_t *newv, bool is_insert, mf_error_t *err)
{
    char buf[400];

    if (newv == NULL)
        return 0;
    if (!is_insert && mf_check_id_storable(newv, err) != 0)
        return -1;
    if (newv->value_type == BSON_TYPE_ARRAY)
        return mf_err_set(err, MF_E_NotSingleValueField,
                          "After applying the update to the document, the (immutable) field '_id' was found to be an "
                          "array or array descendant.");
    if (oldv != NULL && !mf_value_equal(oldv, newv)) {
        mf_fmt_value(newv, buf, sizeof(buf));
        return mf_err_set(err, MF_E_ImmutableField,
                          "After applying the update, the (immutable) field '_id' was found to have been altered to "
                          "_id: %s",
                          buf);
    }
    return 0;
}

/* mf_update_spec_apply: as mf_update_apply (out initialised by the caller). */
int
mf_update_spec_apply(const mf_update_spec_t *x, const bson_t *doc, const mf_match_details_t *d, bool is_insert, bson_t *out,
               bool *changed, mf_error_t *err)
{
    if (x->u)
        return mf_update_apply(x->u, doc, d, is_insert, out, changed, err);
    bson_iter_t oi, ni;
    bson_t *r;
    int rc = 0;
    if (mf_pipeline_apply_one(x->pl, doc, &r, err) != 0)
        return -1;
    bool old_id = bson_iter_init_find(&oi, doc, "_id");
    bool new_id = bson_iter_init_find(&ni, r, "_id");
    if (pipeline_id_check(old_id ? bson_iter_value(&oi) : NULL, new_id ? bson_iter_value(&ni) : NULL, is_insert,
                          err) != 0) {
        rc = -1;
    } else {
        bson_iter_t it;
        /* The result's own _id when it has one (equal, perhaps of another type), as the replacement's. */
        if (new_id)
            bson_append_value(out, "_id", 3, bson_iter_value(&ni));
        else if (old_id)
            bson_append_value(out, "_id", 3, bson_iter_value(&oi));
        bson_iter_init(&it, r);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_value(out, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
        }
        *changed = is_insert || out->len != doc->len || memcmp(bson_get_data(out), bson_get_data(doc), doc->len) != 0;
    }
    bson_destroy(r);
    return rc;
}

/* ---------- statements ---------- */

/* The fields update and delete statements share: the filter and the hint, views into the statement. */
typedef struct stmt_common {
    bson_t q;
    bool have_q;
    const bson_value_t *hint; /* NULL when absent, else &hint_store */
    bson_value_t hint_store;
} stmt_common_t;

/*
 * stmt_common_parse: parses the field at it into sc when it is q or hint
 * (*taken true), else leaves it to the caller (*taken false). what names the
 * statement in messages ("update.updates"). Returns 0, or -1 with err.
 */
static int
stmt_common_parse(bson_iter_t *it, const char *what, stmt_common_t *sc, bool *taken, mf_error_t *err)
{
    const char *k = bson_iter_key(it);
    const uint8_t *data;
    uint32_t len;

    *taken = true;
    if (strcmp(k, "q") == 0) {
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.q' is the wrong type '%s', expected type 'object'",
                              what, mf_type_name(bson_iter_type(it)));
        bson_iter_document(it, &len, &data);
        sc->have_q = bson_init_static(&sc->q, data, len);
    } else if (strcmp(k, "hint") == 0) {
        if (!BSON_ITER_HOLDS_UTF8(it) && !BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_err_set(err, MF_E_FailedToParse, "Hint must be a string or an object");
        sc->hint_store = *bson_iter_value(it);
        sc->hint = &sc->hint_store;
    } else {
        *taken = false;
    }
    return 0;
}

/* ---------- update ---------- */

/* The equalities of an upsert's filter, as mongod's extractEqualityMatches collects them. */
typedef struct {
    const char *path[32];
    bson_value_t v[32];
    int n;
} eq_set_t;

/*
 * Adds filter q's equalities to eq: false when q holds anything else (an
 * operator other than $eq, a regular expression, $or, ...), when one path is
 * constrained twice, or past 32 of them. $and nests.
 */
static bool
eq_collect(const bson_t *q, eq_set_t *eq)
{
    bson_iter_t it, sub;
    if (!bson_iter_init(&it, q))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &sub))
                return false;
            while (bson_iter_next(&sub)) {
                bson_t d;
                const uint8_t *data;
                uint32_t len;
                if (!BSON_ITER_HOLDS_DOCUMENT(&sub))
                    return false;
                bson_iter_document(&sub, &len, &data);
                if (!bson_init_static(&d, data, len) || !eq_collect(&d, eq))
                    return false;
            }
            continue;
        }
        if (k[0] == '$' || eq->n == 32 || BSON_ITER_HOLDS_REGEX(&it))
            return false;
        bson_value_t v = *bson_iter_value(&it);
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) && bson_iter_next(&sub) &&
            bson_iter_key(&sub)[0] == '$') {
            /* {path: {$eq: v}} and nothing else beside it. */
            if (strcmp(bson_iter_key(&sub), "$eq") != 0)
                return false;
            v = *bson_iter_value(&sub);
            if (bson_iter_next(&sub))
                return false;
        }
        for (int i = 0; i < eq->n; i++) {
            if (strcmp(eq->path[i], k) == 0)
                return false;
        }
        eq->path[eq->n] = k;
        eq->v[eq->n++] = v;
    }
    return true;
}

/*
 * upsert_dup_rerun: whether an upsert whose insert failed with err runs
 * again whatever its filter, its attempt-th time (counted from 0), as
 * mongod's does: there, a unique index's insert conflicts with any writer
 * that inserted the same key after the statement's snapshot began
 * (WiredTigerIndex::_checkDups writes and removes a prefix key), and the
 * WriteConflict reruns the whole statement, which now finds the new
 * document and updates it if it matches. Rate limiters (rate-limiter-
 * flexible: {key, $or: [{expire: {$gt: now}}, ...]} with $inc and
 * $setOnInsert) send such upserts for one new key from many connections at
 * once; each must count. Here the rerun is bounded: a duplicate that
 * survives UPSERT_RACE_RETRIES reruns was there before the statement (the
 * filter leaves its document out: an expired entry), and is the
 * statement's E11000, as in mongod.
 */
static bool
upsert_dup_rerun(mf_sess_t *s, const mf_error_t *err, int attempt)
{
    /* A multi-document transaction reads one snapshot: a rerun would see what the first attempt saw. */
    return err->code == MF_E_DuplicateKey && attempt < UPSERT_RACE_RETRIES && !mf_txn_user(s);
}

/*
 * upsert_dup_retryable: whether an upsert whose insert failed with err (a
 * duplicate key: another writer inserted the document first) may run again,
 * now finding and updating that document, as mongod retries it
 * (write_ops_exec.cpp, shouldRetryDuplicateKeyException): the filter holds
 * only equalities (implicit or $eq, under $and too), on exactly the unique
 * index's key fields, with the values the duplicated key holds. Session
 * stores and caches (connect-mongo, keyv) send such upserts concurrently
 * for one new key; each must succeed.
 */
static bool
upsert_dup_retryable(const bson_t *q, const mf_error_t *err)
{
    bson_t info, kp, kv;
    bson_iter_t it, pi, vi;
    const uint8_t *data;
    uint32_t len;
    eq_set_t eq = {.n = 0};
    if (err->code != MF_E_DuplicateKey || err->info_len == 0 || !bson_init_static(&info, err->info, err->info_len))
        return false;
    if (!bson_iter_init_find(&it, &info, "keyPattern") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&kp, data, len))
        return false;
    if (!bson_iter_init_find(&it, &info, "keyValue") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&kv, data, len))
        return false;
    /*
     * A collated index's strings are its collation's keys (in hex, dup_key_error): the query must use that
     * collation, and its strings are compared by their keys, as mongod's check does.
     */
    const mf_collation_t *coll = NULL;
    if (bson_iter_init_find(&it, &info, "collation") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_t want, have = BSON_INITIALIZER;
        bson_iter_document(&it, &len, &data);
        coll = mf_collation_current();
        if (coll != NULL)
            mf_collation_append_spec(coll, &have);
        bool same = coll != NULL && bson_init_static(&want, data, len) && bson_equal(&want, &have);
        bson_destroy(&have);
        if (!same)
            return false;
    }
    if (!eq_collect(q, &eq) || eq.n != (int)bson_count_keys(&kp) || !bson_iter_init(&pi, &kp) ||
        !bson_iter_init(&vi, &kv))
        return false;
    while (bson_iter_next(&pi)) {
        int i;
        if (!bson_iter_next(&vi))
            return false;
        for (i = 0; i < eq.n && strcmp(eq.path[i], bson_iter_key(&pi)) != 0; i++)
            ;
        if (i == eq.n)
            return false;
        if (coll != NULL && eq.v[i].value_type == BSON_TYPE_UTF8) {
            char *hex = mf_collation_key_hex(coll, eq.v[i].value.v_utf8.str, eq.v[i].value.v_utf8.len);
            bool same = BSON_ITER_HOLDS_UTF8(&vi) && strcmp(hex, bson_iter_utf8(&vi, NULL)) == 0;
            free(hex);
            if (!same)
                return false;
        } else if (!mf_value_equal(&eq.v[i], bson_iter_value(&vi))) {
            return false;
        }
    }
    return true;
}

/* The target record ids of a statement, collected by rid_visit. */
typedef struct rid_vec {
    int64_t *v;
    size_t n, cap;
    size_t max; /* 0 = unlimited */
} rid_vec_t;

static int
rid_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    rid_vec_t *rv = arg;
    (void)doc;
    (void)d;
    if (rv->n == rv->cap) {
        rv->cap = rv->cap ? rv->cap * 2 : 64;
        rv->v = mf_realloc(rv->v, rv->cap * sizeof(*rv->v));
    }
    rv->v[rv->n++] = rid;
    return rv->max && rv->n >= rv->max ? 1 : 0;
}

typedef struct upd_ctx {
    mf_sess_t *s;
    mf_coll_t *c;
    const mf_matcher_t *m;
    const mf_update_spec_t *u;
    const int64_t *rids;
    uint8_t *slot; /* per rid: bit0 matched, bit1 modified */
    int64_t matched, modified;
    bool validate; /* check the collection's validator */
} upd_ctx_t;

/* upd_item: re-fetches and re-matches record i, then updates it (inside the chunk's transaction). */
static int
upd_item(void *arg, size_t i, mf_error_t *err)
{
    upd_ctx_t *x = arg;
    bson_t doc, out;
    bool changed = false;
    mf_match_details_t d = {.array_pos = -1};
    int ret;

    x->slot[i] = 0;
    ret = mf_coll_fetch(x->s, x->c, x->rids[i], &doc, err);
    if (ret == MF_NOTFOUND)
        return 0;
    if (ret != 0)
        return ret;
    if (!mf_matcher_match(x->m, &doc, &d)) {
        bson_destroy(&doc);
        return 0;
    }
    bson_init(&out);
    ret = mf_update_spec_apply(x->u, &doc, &d, false, &out, &changed, err);
    if (ret == 0 && changed) {
        ret = mf_check_doc_size(&out, MF_DOC_UPDATED, err);
        if (ret == 0)
            ret = mf_check_doc_for_storage(&out, err);
        if (ret == 0 && x->validate)
            ret = mf_coll_validate(x->c, &out, &doc, err);
        if (ret == 0) {
            mf_observers_set_replacing(upd_spec_is_replacement(x->u));
            ret = mf_coll_replace(x->s, x->c, x->rids[i], &doc, &out, err);
            mf_observers_set_replacing(false);
        }
    }
    if (ret == 0)
        x->slot[i] = (uint8_t)(1 | (changed ? 2 : 0));
    bson_destroy(&out);
    bson_destroy(&doc);
    return ret;
}

static void
upd_commit(void *arg, size_t from, size_t to)
{
    upd_ctx_t *x = arg;
    for (size_t i = from; i < to; i++) {
        if (x->slot[i] & 1)
            x->matched++;
        if (x->slot[i] & 2)
            x->modified++;
    }
}

/*
 * project_into: out (initialised here, the caller destroys it; left
 * uninitialised on error) gets doc projected by p (NULL: all of doc).
 * details are the query's match details against doc, for a positional
 * projection (NULL when there are none). Returns 0, or -1 with err.
 */
static int
project_into(const mf_projection_t *p, const bson_t *doc, const mf_match_details_t *details, bson_t *out,
             mf_error_t *err)
{
    if (p == NULL) {
        bson_copy_to(doc, out);
        return 0;
    }
    bson_init(out);
    if (mf_projection_apply(p, doc, details, out, err) != 0) {
        bson_destroy(out);
        return -1;
    }
    return 0;
}

/*
 * do_upsert: builds the upsert document from filter q and update u and
 * inserts it into c (catalog lock held) in its own transaction. *idv gets a
 * copy of its _id (the caller destroys it). When value is not NULL it gets
 * (initialised here, the caller destroys it) the document projected by proj
 * (NULL: the whole document); the projection runs before the insert, so a
 * projection that fails leaves nothing written. Returns 0, or -1 with err
 * (value then destroyed again).
 */
static int
do_upsert(mf_sess_t *s, mf_coll_t *c, bool durable, bool validate, const bson_t *q, const mf_update_spec_t *u,
          bool id_seed, const mf_projection_t *proj, bson_value_t *idv, bson_t *value, mf_error_t *err)
{
    bson_t seed, out, fixed;
    bool changed;
    bson_iter_t it;
    int ret;

    bson_init(&seed);
    /* A replacement upsert (id_seed) takes only _id from the query (when the replacement has none). */
    if (mf_update_upsert_seed(q, id_seed, &seed, err) != 0) {
        bson_destroy(&seed);
        return -1;
    }
    bson_init(&out);
    if (mf_update_spec_apply(u, &seed, NULL, true, &out, &changed, err) != 0) {
        bson_destroy(&seed);
        bson_destroy(&out);
        return -1;
    }
    bson_destroy(&seed);
    mf_doc_with_id_first(&out, &fixed);
    bson_destroy(&out);
    if (mf_check_upsert_id(&fixed, err) != 0 || mf_check_doc_size(&fixed, MF_DOC_UPSERTED, err) != 0 ||
        mf_check_doc_for_storage(&fixed, err) != 0 ||
        (validate && mf_coll_validate(c, &fixed, NULL, err) != 0)) {
        bson_destroy(&fixed);
        return -1;
    }
    if (value != NULL && project_into(proj, &fixed, NULL, value, err) != 0) {
        bson_destroy(&fixed);
        return -1;
    }
    for (int attempt = 0;; attempt++) {
        if (mf_txn_begin(s, err) != 0)
            break;
        ret = mf_coll_insert(s, c, &fixed, NULL, err);
        if (ret == 0)
            ret = mf_txn_commit(s, durable, err);
        else
            mf_txn_abort(s);
        if ((ret == MF_CONFLICT || (ret != 0 && err->code == MF_E_WriteConflict)) &&
            (ret = mf_batch_conflict_retry(attempt, err)) == 0)
            continue;
        if (ret == 0) {
            bson_iter_init_find(&it, &fixed, "_id");
            bson_value_copy(bson_iter_value(&it), idv);
        } else if (value != NULL) {
            bson_destroy(value);
        }
        bson_destroy(&fixed);
        return ret == 0 ? 0 : -1;
    }
    if (value != NULL)
        bson_destroy(value);
    bson_destroy(&fixed);
    return -1;
}

/*
 * A statement's upsertSupplied, checked first as mongod's
 * ParsedUpdate::parseRequest does (9 FailedToParse without upsert, or
 * without a document c.new). *supplied tells whether it is set; doc then
 * points into stmt at that document. 0, or -1 with err.
 */
static int
supplied_check(const bson_t *stmt, bson_t *doc, bool *supplied, mf_error_t *err)
{
    bson_iter_t it, ci;
    *supplied = false;
    if (!bson_iter_init_find(&it, stmt, "upsertSupplied") || !bson_iter_as_bool(&it))
        return 0;
    if (!bson_iter_init_find(&it, stmt, "upsert") || !bson_iter_as_bool(&it))
        return mf_err_set(err, MF_E_FailedToParse, "cannot specify 'upsertSupplied: true' for a non-upsert operation");
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&ci, stmt, "c") || !BSON_ITER_HOLDS_DOCUMENT(&ci) || !bson_iter_recurse(&ci, &ci) ||
        !bson_iter_find(&ci, "new") || !BSON_ITER_HOLDS_DOCUMENT(&ci) ||
        (bson_iter_document(&ci, &len, &data), !bson_init_static(doc, data, len)))
        return mf_err_set(err, MF_E_FailedToParse,
                          "the parameter 'upsertSupplied' is set to 'true', but no document was supplied");
    *supplied = true;
    return 0;
}

/* One update statement; supplied_doc: its upsertSupplied document (supplied_check), NULL without one. */
static int
write_update(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db, const char *coll,
             const bson_t *stmt, const bson_t *supplied_doc, mf_write_update_result_t *res, mf_error_t *err)
{
    bool validate = (wflags & MF_WRITE_VALIDATE) != 0;
    bson_iter_t it;
    bson_t ud;
    stmt_common_t sc = {.have_q = false, .hint = NULL};
    const bson_value_t *af = NULL, *upl = NULL;
    bson_value_t af_store, upl_store;
    bool upsert = false, multi = false, have_u = false, have_sort = false, taken;
    bson_t sort;
    mf_matcher_t *m = NULL;
    mf_update_spec_t *u = NULL, *ins = NULL;
    mf_coll_t *c = NULL;
    rid_vec_t rv = {0};
    int rc = -1;

    memset(res, 0, sizeof *res);
    if (mf_ts_is_timeseries(cat, db, coll))
        return mf_ts_update(cat, s, durable, db, coll, stmt, res, err);
    bson_iter_init(&it, stmt);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (stmt_common_parse(&it, "update.updates", &sc, &taken, err) != 0)
            return -1;
        if (taken)
            continue;
        if (strcmp(k, "u") == 0) {
            const uint8_t *data;
            uint32_t len;
            if (BSON_ITER_HOLDS_ARRAY(&it)) {
                upl_store = *bson_iter_value(&it);
                upl = &upl_store;
                have_u = true;
                continue;
            }
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(err, MF_E_FailedToParse, "Update argument must be either an object or an array");
            bson_iter_document(&it, &len, &data);
            have_u = bson_init_static(&ud, data, len);
        } else if (strcmp(k, "upsert") == 0) {
            upsert = bson_iter_as_bool(&it);
        } else if (strcmp(k, "multi") == 0) {
            multi = bson_iter_as_bool(&it);
        } else if (strcmp(k, "sort") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_iter_document(&it, &len, &data);
            have_sort = bson_init_static(&sort, data, len) && !bson_empty(&sort);
        } else if (strcmp(k, "arrayFilters") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field 'update.updates.arrayFilters' is the wrong type '%s', expected type "
                                  "'array'",
                                  mf_type_name(bson_iter_type(&it)));
            af_store = *bson_iter_value(&it);
            af = &af_store;
        }
    }
    if (!sc.have_q)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'update.updates.q' is missing but a required field");
    if (!have_u)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'update.updates.u' is missing but a required field");
    if (have_sort && multi)
        return mf_err_set(err, MF_E_FailedToParse, "Cannot specify sort with multi=true");
    if (have_sort) {
        /* 8.0's updateOne/replaceOne sort: the first document in sort order, as findAndModify picks it. */
        mf_write_fam_t f = {.query = &sc.q, .sort = &sort, .update = upl ? NULL : &ud, .pipeline = upl,
                            .array_filters = af, .hint = sc.hint, .upsert_supplied = supplied_doc, .upsert = upsert};
        mf_write_fam_result_t fr;
        if (mf_write_find_and_modify(cat, s, durable, wflags, db, coll, &f, &fr, err) != 0)
            return -1;
        res->matched = fr.n;
        res->modified = fr.modified ? 1 : 0;
        res->upserted = fr.upserted;
        if (fr.upserted)
            res->upserted_id = fr.upserted_id;
        if (fr.has_value)
            bson_destroy(&fr.value);
        return 0;
    }
    if ((m = mf_matcher_new(&sc.q, err)) == NULL)
        return -1;
    if ((u = mf_update_spec_new(upl ? NULL : &ud, upl, af, err)) == NULL)
        goto out;
    if (u->u != NULL)
        mf_update_set_clock(u->u, mf_catalog_tick_ts, cat, !(wflags & MF_WRITE_KEEP_EMPTY_TS));
    if (multi && upd_spec_is_replacement(u)) {
        mf_err_set(err, MF_E_FailedToParse, "multi update is not supported for replacement-style update");
        goto out;
    }
    if (coll_acquire(cat, db, coll, upsert, &c, err) != 0)
        goto out_unlock;
    for (int dup_retries = 0;; dup_retries++) {
        if (c != NULL) {
            mf_plan_request_t req = {.filter = &sc.q, .hint = sc.hint, .root = MF_PLAN_ROOT_UPDATE};
            rv.n = 0;
            rv.max = multi ? 0 : 1;
            if (mf_exec_query(s, c, &req, m, rid_visit, &rv, NULL, err) != 0)
                goto out_unlock;
            upd_ctx_t x = {s, c, m, u, rv.v, mf_calloc(rv.n + 1, 1), 0, 0, validate};
            size_t start = 0;
            int r = mf_batch_run(s, &start, rv.n, UPDATE_CHUNK, durable, upd_item, upd_commit, &x, err);
            free(x.slot);
            res->matched = x.matched;
            res->modified = x.modified;
            if (r != 0)
                goto out_unlock;
        }
        if (res->matched == 0 && upsert && c != NULL) {
            /*
             * upsertSupplied ($merge's): the query's seed as the statement's
             * update takes it, then the constants' new document over it as a
             * replacement (mongod's UpsertStage::_generateNewDocumentFromSuppliedDoc),
             * parsed only then.
             */
            if (supplied_doc != NULL && ins == NULL && (ins = mf_update_spec_new(supplied_doc, NULL, NULL, err)) == NULL)
                goto out_unlock;
            if (do_upsert(s, c, durable, validate, &sc.q, ins != NULL ? ins : u, upd_spec_is_replacement(u), NULL,
                          &res->upserted_id, NULL, err) != 0) {
                /* Another writer inserted the document first: update it instead (multi upserts are not retried). */
                if ((!multi && dup_retries < UPSERT_DUP_RETRIES && upsert_dup_retryable(&sc.q, err)) ||
                    upsert_dup_rerun(s, err, dup_retries)) {
                    mf_err_clear(err);
                    continue;
                }
                goto out_unlock;
            }
            res->upserted = true;
            res->matched = 1;
        }
        break;
    }
    rc = 0;
out_unlock:
    mf_catalog_unlock(cat);
out:
    free(rv.v);
    mf_matcher_free(m);
    mf_update_spec_free(u);
    mf_update_spec_free(ins);
    return rc;
}

/* ---------- delete ---------- */

/* del_check: whether a record's current document still matches the statement's filter (arg). */
static bool
del_check(void *arg, int64_t rid, const bson_t *doc, mf_known_value_t *known)
{
    (void)rid;
    (void)known;
    return mf_matcher_match((const mf_matcher_t *)arg, doc, NULL);
}

static int
write_delete(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *stmt,
             int64_t batch_docs, mf_write_delete_result_t *res, mf_error_t *err)
{
    bson_iter_t it;
    stmt_common_t sc = {.have_q = false, .hint = NULL};
    bool have_limit = false, taken;
    int64_t limit = 0;
    mf_matcher_t *m;
    mf_coll_t *c;
    rid_vec_t rv = {0};
    int rc = -1;

    memset(res, 0, sizeof *res);
    if (mf_ts_is_timeseries(cat, db, coll))
        return mf_ts_delete(cat, s, durable, db, coll, stmt, res, err);
    bson_iter_init(&it, stmt);
    while (bson_iter_next(&it)) {
        if (stmt_common_parse(&it, "delete.deletes", &sc, &taken, err) != 0)
            return -1;
        if (!taken && strcmp(bson_iter_key(&it), "limit") == 0) {
            /* readMultiDeleteProperty's numberDouble(): a non-number is 0, every match. */
            limit = mf_value_is_number(bson_iter_value(&it)) ? (int64_t)mf_value_as_double(bson_iter_value(&it)) : 0;
            have_limit = true;
        }
    }
    if (!sc.have_q)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'delete.deletes.q' is missing but a required field");
    if (!have_limit)
        return mf_err_set(err, MF_E_Location40414,
                          "BSON field 'delete.deletes.limit' is missing but a required field");
    if (limit != 0 && limit != 1)
        return mf_err_set(err, MF_E_FailedToParse, "The limit field in delete objects must be 0 or 1. Got %lld",
                          (long long)limit);
    if ((m = mf_matcher_new(&sc.q, err)) == NULL)
        return -1;
    if (coll_acquire(cat, db, coll, false, &c, err) != 0)
        goto out;
    if (c != NULL) {
        mf_plan_request_t req = {.filter = &sc.q, .hint = sc.hint,
                                 .root = limit == 0 ? MF_PLAN_ROOT_BATCHED_DELETE : MF_PLAN_ROOT_DELETE};
        rv.max = (size_t)limit;
        if (mf_exec_query(s, c, &req, m, rid_visit, &rv, NULL, err) != 0)
            goto out;
        size_t chunk = 1;
        bool batched = limit == 0;
        if (batched)
            chunk = batch_docs > 0 ? (size_t)batch_docs : 0;
        mf_delete_stats_t st = {0, 0, 0, 0};
        int r = mf_delete_rids(s, c, rv.v, rv.n, chunk, durable, del_check, m, 0, &st, err);
        res->deleted = st.deleted;
        res->batches = st.batches;
        res->batched = batched && rv.n > 0;
        if (r != 0)
            goto out;
    }
    rc = 0;
out:
    mf_catalog_unlock(cat);
    free(rv.v);
    mf_matcher_free(m);
    return rc;
}

/* ---------- findAndModify ---------- */

typedef struct sorted_first_ctx {
    const mf_sort_t *s;
    bson_t *best; /* a copy of the best document so far, or NULL */
    int64_t rid;
} sorted_first_ctx_t;

/* sorted_first_visit: keeps the record that sorts first (for a sort no index provides). */
static int
sorted_first_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    sorted_first_ctx_t *f = arg;
    (void)d;
    if (f->best == NULL || mf_sort_cmp(f->s, doc, f->best) < 0) {
        if (f->best)
            bson_destroy(f->best);
        f->best = bson_copy(doc);
        f->rid = rid;
    }
    return 0;
}

int
mf_write_find_and_modify(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db,
                         const char *coll, const mf_write_fam_t *f, mf_write_fam_result_t *res, mf_error_t *err)
{
    bool validate = (wflags & MF_WRITE_VALIDATE) != 0;
    mf_matcher_t *m = NULL;
    mf_sort_t *srt = NULL;
    mf_projection_t *p = NULL;
    mf_update_spec_t *u = NULL, *ins = NULL;
    mf_coll_t *c = NULL;
    mf_plan_t *plan = NULL;
    int rc = -1;
    bool running = false; /* the plan runs: what fails now is an executor error (see exec_failed) */

    memset(res, 0, sizeof *res);
    if ((m = mf_matcher_new(f->query, err)) == NULL)
        return -1;
    if (f->sort && !bson_empty(f->sort) && (srt = mf_sort_new(f->sort, err)) == NULL)
        goto out;
    if (f->fields && !bson_empty(f->fields) && (p = mf_projection_new(f->fields, err)) == NULL)
        goto out;
    /*
     * A positional projection needs the query's match against the document
     * it projects, and the new document may no longer match: mongod refuses
     * it with new: true before anything runs (get_executor.cpp,
     * allowPositional). remove: true and new: false project the pre-image.
     */
    if (mf_projection_is_positional(p) && f->want_new && !f->remove) {
        mf_err_set(err, MF_E_BadValue, "cannot use a positional projection and return the new document");
        goto out;
    }
    if ((f->update || f->pipeline) && (u = mf_update_spec_new(f->update, f->pipeline, f->array_filters, err)) == NULL)
        goto out;
    if (u != NULL && u->u != NULL)
        mf_update_set_clock(u->u, mf_catalog_tick_ts, cat, !(wflags & MF_WRITE_KEEP_EMPTY_TS));
    if (coll_acquire(cat, db, coll, f->upsert, &c, err) != 0)
        goto out_unlock;

    for (int attempt = 0, dup_retries = 0;; attempt++) {
        int64_t rid = 0;
        bool found = false;
        bson_t doc, out_doc, value;
        bool changed = false;
        int r = 0;

        if (c != NULL) {
            /* mongod's parsed update / delete: limit 1 with a sort, the fields as the projection. */
            mf_plan_request_t req = {.filter = f->query, .sort = srt ? f->sort : NULL, .hint = f->hint,
                                     .root = f->remove ? MF_PLAN_ROOT_DELETE : MF_PLAN_ROOT_UPDATE,
                                     .shown = {.limit = srt ? 1 : 0, .projection = f->fields}};
            mf_plan_free(plan);
            if (mf_plan_build(c, &req, &plan, err) != 0)
                goto out_unlock;
            running = true;
            if (srt && !plan->sort_provided) {
                sorted_first_ctx_t sf = {srt, NULL, 0};
                if (mf_exec_run(s, c, plan, m, sorted_first_visit, &sf, err) != 0)
                    goto out_unlock;
                if (sf.best) {
                    found = true;
                    rid = sf.rid;
                    bson_destroy(sf.best);
                }
            } else {
                mf_exec_first_t ff = {0, false};
                if (mf_exec_run(s, c, plan, m, mf_exec_first_visit, &ff, err) != 0)
                    goto out_unlock;
                found = ff.found;
                rid = ff.rid;
            }
        }
        if (!found) {
            if (f->upsert && c != NULL) {
                /* upsertSupplied: its document over the seed, parsed only now (see write_update). */
                if (f->upsert_supplied != NULL && ins == NULL &&
                    (ins = mf_update_spec_new(f->upsert_supplied, NULL, NULL, err)) == NULL)
                    goto out_unlock;
                if (do_upsert(s, c, durable, validate, f->query ? f->query : &(bson_t)BSON_INITIALIZER,
                              ins != NULL ? ins : u, upd_spec_is_replacement(u), p, &res->upserted_id,
                              f->want_new ? &res->value : NULL, err) != 0) {
                    /* Another writer inserted the document first: find and modify it instead. */
                    if ((f->query != NULL && dup_retries < UPSERT_DUP_RETRIES && upsert_dup_retryable(f->query, err)) ||
                        upsert_dup_rerun(s, err, dup_retries)) {
                        dup_retries++;
                        mf_err_clear(err);
                        continue;
                    }
                    goto out_unlock;
                }
                res->n = 1;
                res->upserted = true;
                res->has_value = f->want_new;
                rc = 0;
                goto out_unlock;
            }
            rc = 0; /* nothing matched: n 0, value null */
            goto out_unlock;
        }
        if (mf_txn_begin(s, err) != 0)
            goto out_unlock;
        r = mf_coll_fetch(s, c, rid, &doc, err);
        if (r == MF_NOTFOUND) {
            mf_txn_abort(s);
            continue; /* deleted since the scan: look again */
        }
        if (r != 0) {
            mf_txn_abort(s);
            if (r == MF_CONFLICT && mf_batch_conflict_retry(attempt, err) == 0)
                continue;
            goto out_unlock;
        }
        mf_match_details_t d = {.array_pos = -1};
        if (!mf_matcher_match(m, &doc, &d)) {
            bson_destroy(&doc);
            mf_txn_abort(s);
            continue;
        }
        /*
         * The returned document is projected inside the transaction, before
         * the commit: a projection that fails (a positional "a.$" whose array
         * the query did not match, an expression that errors) aborts the
         * write, so the command never reports an error for a write it made.
         * The pre-image is projected with the query's match details on it.
         */
        bson_init(&out_doc);
        bool have_value = false;
        if (f->remove || !f->want_new) {
            r = project_into(p, &doc, &d, &value, err);
            have_value = r == 0;
        }
        if (r == 0 && f->remove) {
            r = mf_coll_remove(s, c, rid, &doc, err);
        } else if (r == 0) {
            r = mf_update_spec_apply(u, &doc, &d, false, &out_doc, &changed, err);
            if (r == 0 && changed) {
                r = mf_check_doc_size(&out_doc, MF_DOC_UPDATED, err);
                if (r == 0)
                    r = mf_check_doc_for_storage(&out_doc, err);
                if (r == 0 && validate)
                    r = mf_coll_validate(c, &out_doc, &doc, err);
                if (r == 0) {
                    mf_observers_set_replacing(upd_spec_is_replacement(u));
                    r = mf_coll_replace(s, c, rid, &doc, &out_doc, err);
                    mf_observers_set_replacing(false);
                }
            }
            if (r == 0 && f->want_new) {
                r = project_into(p, changed ? &out_doc : &doc, NULL, &value, err);
                have_value = r == 0;
            }
        }
        if (r == 0)
            r = mf_txn_commit(s, durable, err);
        else
            mf_txn_abort(s);
        bson_destroy(&doc);
        bson_destroy(&out_doc);
        if (r != 0) {
            if (have_value)
                bson_destroy(&value);
            if ((r == MF_CONFLICT || err->code == MF_E_WriteConflict) && mf_batch_conflict_retry(attempt, err) == 0)
                continue;
            goto out_unlock;
        }
        res->n = 1;
        res->updated_existing = !f->remove;
        res->modified = changed;
        bson_steal(&res->value, &value);
        res->has_value = true;
        rc = 0;
        goto out_unlock;
    }
out_unlock:
    mf_catalog_unlock(cat);
out:
    if (rc != 0 && res->upserted) {
        bson_value_destroy(&res->upserted_id);
        res->upserted = false;
    }
    res->exec_failed = rc != 0 && running;
    mf_matcher_free(m);
    if (srt)
        mf_sort_free(srt);
    if (p)
        mf_projection_free(p);
    mf_update_spec_free(u);
    mf_update_spec_free(ins);
    mf_plan_free(plan);
    return rc;
}

/*
 * A statement's own collation replaces the command's (and the collection's
 * default) while it runs: installed as the thread's collation
 * (doc/collation.h), the previous one put back after.
 */
static int
stmt_collation_begin(const bson_t *stmt, mf_collation_t **coll, const mf_collation_t **saved, bool *set,
                     mf_error_t *err)
{
    bson_iter_t it;
    *coll = NULL;
    *set = false;
    *saved = mf_collation_current();
    if (!bson_iter_init_find(&it, stmt, "collation"))
        return 0;
    if (mf_collation_from_value(bson_iter_value(&it), coll, err) != 0)
        return -1;
    mf_collation_set_current(*coll);
    *set = true;
    return 0;
}

static void
stmt_collation_end(mf_collation_t *coll, const mf_collation_t *saved, bool set)
{
    if (set)
        mf_collation_set_current(saved);
    mf_collation_free(coll);
}

int
mf_write_consts_begin(const bson_t *stmt, mf_write_consts_t *k, mf_error_t *err)
{
    bson_iter_t it, u, ci;
    size_t n = 0;
    memset(k, 0, sizeof(*k));
    if (!bson_iter_init_find(&it, stmt, "c") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return 0;
    if (!bson_iter_init_find(&u, stmt, "u"))
        return 0; /* 40414 from the statement's parse */
    if (!BSON_ITER_HOLDS_ARRAY(&u))
        return mf_err_set(err, MF_E_Location51198, "Constant values may only be specified for pipeline updates");
    bson_iter_recurse(&it, &ci);
    while (bson_iter_next(&ci))
        n++;
    k->names = mf_calloc(n ? n : 1, sizeof(*k->names));
    k->vals = mf_calloc(n ? n : 1, sizeof(*k->vals));
    n = 0;
    bson_iter_recurse(&it, &ci);
    while (bson_iter_next(&ci)) {
        if (mf_expr_check_var_name_read(bson_iter_key(&ci), err) != 0) {
            free(k->names);
            free(k->vals);
            return -1;
        }
        k->names[n] = bson_iter_key(&ci);
        k->vals[n++] = *bson_iter_value(&ci);
    }
    k->frame = (mf_expr_vars_t){k->names, k->vals, n, mf_expr_vars_current()};
    mf_expr_vars_set(&k->frame);
    k->set = true;
    return 0;
}

void
mf_write_consts_end(mf_write_consts_t *k)
{
    if (!k->set)
        return;
    mf_expr_vars_set(k->frame.up);
    free(k->names);
    free(k->vals);
    k->set = false;
}

int
mf_write_update(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db, const char *coll,
                const bson_t *stmt, mf_write_update_result_t *res, mf_error_t *err)
{
    mf_collation_t *c;
    const mf_collation_t *saved;
    bool set;
    mf_write_consts_t k;
    bson_t sdoc;
    bool supplied;
    memset(res, 0, sizeof *res);
    if (supplied_check(stmt, &sdoc, &supplied, err) != 0 || mf_write_consts_begin(stmt, &k, err) != 0)
        return -1;
    if (stmt_collation_begin(stmt, &c, &saved, &set, err) != 0) {
        mf_write_consts_end(&k);
        return -1;
    }
    int rc = write_update(cat, s, durable, wflags, db, coll, stmt, supplied ? &sdoc : NULL, res, err);
    stmt_collation_end(c, saved, set);
    mf_write_consts_end(&k);
    return rc;
}

int
mf_write_delete(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *stmt,
                int64_t batch_docs, mf_write_delete_result_t *res, mf_error_t *err)
{
    mf_collation_t *c;
    const mf_collation_t *saved;
    bool set;
    memset(res, 0, sizeof *res);
    if (stmt_collation_begin(stmt, &c, &saved, &set, err) != 0)
        return -1;
    int rc = write_delete(cat, s, durable, db, coll, stmt, batch_docs, res, err);
    stmt_collation_end(c, saved, set);
    return rc;
}
