/*
 * cmd_crud.c: insert, find, getMore, killCursors, update, delete,
 * findAndModify, count, distinct, aggregate.
 *
 * Reads run under the catalog's shared lock through mf_exec_scan (query/exec).
 * Writes first collect the record ids a statement targets (so a multi-update
 * never revisits a document it moved or changed: no Halloween problem), then
 * apply them in chunks, each chunk one WiredTiger transaction
 * (mf_batch_run in query/batch.c). Each document is re-fetched and re-matched inside its
 * transaction, so a document changed since the scan is judged on its current
 * content. A write conflict aborts the chunk and retries it; a failing
 * document aborts the chunk, the documents before it are committed again on
 * their own, and the failure is reported at its index: MongoDB's per-document
 * writeErrors, with ordered batches stopping there and unordered going on.
 * Multi-document deletes use chunks of batchedDeletesTargetBatchDocs and
 * count serverStatus().batchedDeletes (the path the TTL monitor will reuse).
 *
 * Schema validation: every document an insert, update, replacement, upsert
 * or findAndModify writes passes mf_coll_validate inside its transaction
 * (unless bypassDocumentValidation), so a failure is an ordinary per-document
 * writeError (121 with errInfo). Views: writes answer 166; find, count and
 * distinct on a view become the view's pipeline plus their own stages, and
 * env->scan expands a view wherever a pipeline reads one (aggregate,
 * $lookup, views on views). maxTimeMS: every command runs with the calling
 * thread's scan deadline set by the dispatcher (cmd_dispatch.c, query/exec.h).
 * Tailable finds (capped collections only) keep their COLLSCAN plan open at
 * the end of the collection and resume after the last record on getMore.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "catalog/coll_write.h"
#include "cmd/cmd.h"
#include "common/curop.h"
#include "engine/cursor.h"
#include "common/docvec.h"
#include "common/log.h"
#include "common/params.h"
#include "query/agg.h"
#include "query/batch.h"
#include "query/exec.h"
#include "doc/match.h"
#include "doc/path.h"
#include "doc/project.h"
#include "doc/sort.h"
#include "doc/update.h"
#include "doc/value.h"

/* cmd_coll.c: the document $collStats yields for db.name. */
int mf_cmd_coll_stats_doc(mf_op_t *op, const char *name, bson_t *out);

#ifndef MF_VERSION
#define MF_VERSION "8.0.0" /* as cmd_admin.c reports it */
#endif
#define FIRST_BATCH_DEFAULT 101
#define BATCH_BYTES_MAX (16 * 1024 * 1024 - 64 * 1024)
#define INSERT_CHUNK 500
#define UPDATE_CHUNK 100

/* ---------- shared helpers ---------- */

/* Views (defined with aggregate below). */
static int view_run(mf_op_t *op, const char *name, const bson_t *stages, mf_docvec_t *out);
static void stage_doc(bson_t *stages, int *n, const char *stage, const bson_t *doc);
static void stage_int(bson_t *stages, int *n, const char *stage, int64_t v);

/* Takes the catalog lock shared and finds db.name; with create, creates it first. */
static int
coll_acquire(mf_op_t *op, const char *name, bool create, mf_coll_t **out)
{
    mf_catalog_t *cat = op->eng->cat;
    mf_catalog_rdlock(cat);
    *out = mf_catalog_coll_find(cat, op->db, name);
    if (*out != NULL || !create)
        return 0;
    mf_catalog_unlock(cat);
    mf_catalog_wrlock(cat);
    if (mf_catalog_coll_find(cat, op->db, name) == NULL) {
        if (mf_catalog_coll_create(cat, op->db, name, NULL, NULL, &op->err) != 0) {
            mf_catalog_unlock(cat);
            mf_catalog_rdlock(cat);
            return -1;
        }
    }
    mf_catalog_unlock(cat);
    mf_catalog_rdlock(cat);
    *out = mf_catalog_coll_find(cat, op->db, name);
    if (*out == NULL)
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "collection %s.%s was dropped concurrently", op->db, name);
    return 0;
}

static bool
want_durable(mf_op_t *op)
{
    bson_iter_t it, wc;
    if (!bson_iter_init_find(&it, op->cmd, "writeConcern") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_recurse(&it, &wc);
    while (bson_iter_next(&wc)) {
        const char *k = bson_iter_key(&wc);
        if ((strcmp(k, "j") == 0 || strcmp(k, "fsync") == 0) && bson_iter_as_bool(&wc))
            return true;
        if (strcmp(k, "w") == 0 && BSON_ITER_HOLDS_UTF8(&wc) && strcmp(bson_iter_utf8(&wc, NULL), "majority") == 0)
            return true;
    }
    return false;
}

static void
append_write_error(bson_t *arr, int *nerr, size_t index, const mf_error_t *err)
{
    char key[16];
    bson_t e;
    snprintf(key, sizeof(key), "%d", *nerr);
    BSON_APPEND_DOCUMENT_BEGIN(arr, key, &e);
    BSON_APPEND_INT32(&e, "index", (int32_t)index);
    BSON_APPEND_INT32(&e, "code", err->code);
    BSON_APPEND_UTF8(&e, "errmsg", err->msg);
    if (err->info_len > 0) {
        bson_t info;
        if (bson_init_static(&info, err->info, err->info_len))
            bson_concat(&e, &info);
    }
    bson_append_document_end(arr, &e);
    (*nerr)++;
}

static int
check_batch_size(mf_op_t *op, size_t n)
{
    if (n < 1 || n > MF_MAX_WRITE_BATCH)
        return mf_err_set(&op->err, MF_E_InvalidLength,
                          "Write batch sizes must be between 1 and %d. Got %zu operations.", MF_MAX_WRITE_BATCH, n);
    return 0;
}

static int
get_ordered(mf_op_t *op, bool *ordered)
{
    bool present;
    *ordered = true;
    return mf_op_get_bool(op, "ordered", ordered, &present);
}

/* Copies doc into out with _id first (generating an ObjectId if absent). */
static void
doc_with_id_first(const bson_t *doc, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    if (bson_iter_init_find(&it, doc, "_id")) {
        bson_append_value(out, "_id", 3, bson_iter_value(&it));
    } else {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(out, "_id", &oid);
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            bson_append_value(out, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
    }
}

static bool
id_is_first(const bson_t *doc)
{
    bson_iter_t it;
    return bson_iter_init(&it, doc) && bson_iter_next(&it) && strcmp(bson_iter_key(&it), "_id") == 0;
}

/* bypassDocumentValidation: true skips the collection's validator for this command. */
static bool
bypass_validation(mf_op_t *op)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, op->cmd, "bypassDocumentValidation") && bson_iter_as_bool(&it);
}

/* 166 CommandNotSupportedOnView for a write (or index DDL) aimed at view c. */
static int
view_write_error(mf_error_t *err, const mf_coll_t *c)
{
    return mf_err_set(err, MF_E_CommandNotSupportedOnView, "Namespace %s is a view, not a collection", c->ns);
}

/* ---------- insert ---------- */

typedef struct insert_ctx {
    mf_sess_t *s;
    mf_coll_t *c;
    bson_t *docs;
    size_t ndocs;
    int64_t inserted;
    bool validate; /* check the collection's validator (no bypassDocumentValidation) */
} insert_ctx_t;

static int
insert_item(void *arg, size_t i, mf_error_t *err)
{
    insert_ctx_t *ctx = arg;
    const bson_t *doc = &ctx->docs[i];
    bson_t fixed;
    int ret;

    if (mf_check_doc_for_storage(doc, err) != 0)
        return -1;
    if (id_is_first(doc)) {
        if (ctx->validate && mf_coll_validate(ctx->c, doc, NULL, err) != 0)
            return -1;
        return mf_coll_insert(ctx->s, ctx->c, doc, NULL, err);
    }
    doc_with_id_first(doc, &fixed);
    if (fixed.len > MF_MAX_BSON_SIZE)
        ret = mf_err_set(err, MF_E_BSONObjectTooLarge, "object to insert too large. size in bytes: %u, max size: %d",
                         fixed.len, MF_MAX_BSON_SIZE);
    else if (ctx->validate && mf_coll_validate(ctx->c, &fixed, NULL, err) != 0)
        ret = -1;
    else
        ret = mf_coll_insert(ctx->s, ctx->c, &fixed, NULL, err);
    bson_destroy(&fixed);
    return ret;
}

static void
insert_commit(void *arg, size_t from, size_t to)
{
    ((insert_ctx_t *)arg)->inserted += (int64_t)(to - from);
}

static int
cmd_insert(mf_op_t *op)
{
    const char *name;
    bson_t *docs;
    size_t ndocs;
    bool ordered;
    mf_coll_t *c;

    if (mf_op_coll_name(op, &name) != 0 || get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "documents", false, &docs, &ndocs) != 0)
        return -1;
    if (check_batch_size(op, ndocs) != 0) {
        free(docs);
        return -1;
    }
    if (coll_acquire(op, name, true, &c) != 0) {
        mf_catalog_unlock(op->eng->cat);
        free(docs);
        return -1;
    }
    if (c->is_view) {
        view_write_error(&op->err, c);
        mf_catalog_unlock(op->eng->cat);
        free(docs);
        return -1;
    }
    insert_ctx_t ctx = {op->sess, c, docs, ndocs, 0, !bypass_validation(op)};
    bson_t errs;
    int nerr = 0, rc = 0;
    bool durable = want_durable(op);
    size_t i = 0;
    bson_init(&errs);
    while (i < ndocs) {
        mf_error_t e;
        mf_err_clear(&e);
        int r = mf_batch_run(op->sess, &i, ndocs, INSERT_CHUNK, durable, (mf_batch_item_fn)insert_item, insert_commit, &ctx, &e);
        if (r == 0)
            break;
        if (r < 0) {
            op->err = e;
            rc = -1;
            break;
        }
        append_write_error(&errs, &nerr, i, &e);
        i++;
        if (ordered)
            break;
    }
    mf_catalog_unlock(op->eng->cat);
    free(docs);
    if (rc == 0) {
        BSON_APPEND_INT32(op->reply, "n", (int32_t)ctx.inserted);
        if (nerr > 0)
            BSON_APPEND_ARRAY(op->reply, "writeErrors", &errs);
    }
    bson_destroy(&errs);
    return rc;
}

/* ---------- find / getMore ---------- */

typedef struct fill_ctx {
    mf_cursor_t *cur;
    bson_t *arr;
    int count;
    int64_t max;
    size_t bytes;
    bool full;
    mf_error_t *err;
} fill_ctx_t;

static int
append_projected(fill_ctx_t *f, const bson_t *doc, const mf_match_details_t *d)
{
    char key[16];
    bson_t out;
    const bson_t *emit = doc;

    if (f->cur->proj) {
        bson_init(&out);
        if (mf_projection_apply(f->cur->proj, doc, d, &out, f->err) != 0) {
            bson_destroy(&out);
            return -1;
        }
        emit = &out;
    }
    snprintf(key, sizeof(key), "%d", f->count);
    BSON_APPEND_DOCUMENT(f->arr, key, emit);
    f->bytes += emit->len;
    f->count++;
    if (emit == &out)
        bson_destroy(&out);
    return 0;
}

static int
fill_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    fill_ctx_t *f = arg;
    mf_cursor_t *cur = f->cur;

    cur->last_rid = rid;
    if (cur->skip_left > 0) {
        cur->skip_left--;
        return 0;
    }
    if (cur->limit_left == 0)
        return 1;
    if (append_projected(f, doc, d) != 0)
        return -1;
    if (cur->limit_left > 0)
        cur->limit_left--;
    if (cur->limit_left == 0)
        return 1;
    if (f->count >= f->max || f->bytes >= BATCH_BYTES_MAX) {
        f->full = true; /* this document is consumed; the plan resumes after it */
        return 1;
    }
    return 0;
}

/*
 * Fills arr with up to max documents from cur. *exhausted tells whether the
 * cursor has nothing more. The catalog lock is held by the caller.
 */
static int agg_stream_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted);

static int
cursor_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted)
{
    fill_ctx_t f = {cur, arr, 0, max, 0, false, &op->err};

    *exhausted = false;
    if (cur->kind == MF_CURSOR_EXT)
        return agg_stream_fill(op, cur, max, arr, exhausted);
    if (cur->kind == MF_CURSOR_DOCS) {
        while (cur->pos < cur->docs.len && f.count < max && f.bytes < BATCH_BYTES_MAX) {
            char key[16];
            const bson_t *d = cur->docs.docs[cur->pos++];
            snprintf(key, sizeof(key), "%d", f.count++);
            BSON_APPEND_DOCUMENT(arr, key, d);
            f.bytes += d->len;
        }
        *exhausted = cur->pos >= cur->docs.len;
        return 0;
    }
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, cur->db, cur->coll);
    if (c == NULL) {
        *exhausted = true;
        return 0;
    }
    if (cur->plan != NULL && cur->plan->tailable && cur->limit_left != 0)
        cur->plan->done = false; /* a tailable cursor looks again for documents inserted since */
    if (cur->limit_left == 0 || cur->plan == NULL || cur->plan->done) {
        *exhausted = true;
        return 0;
    }
    if (max <= 0)
        return 0;
    if (mf_exec_run(op->sess, c, cur->plan, cur->matcher, fill_visit, &f, &op->err) != 0)
        return -1;
    *exhausted = (cur->plan->done && !cur->plan->tailable) || cur->limit_left == 0;
    return 0;
}

/* Appends {cursor: {<batch>: arr, id, ns}} to the reply. */
static void
append_cursor_reply(mf_op_t *op, const char *batch_name, bson_t *arr, int64_t id, const char *coll)
{
    bson_t cd;
    char ns[512];
    snprintf(ns, sizeof(ns), "%s.%s", op->db, coll);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "cursor", &cd);
    BSON_APPEND_ARRAY(&cd, batch_name, arr);
    BSON_APPEND_INT64(&cd, "id", id);
    BSON_APPEND_UTF8(&cd, "ns", ns);
    bson_append_document_end(op->reply, &cd);
}

typedef struct collect_ctx {
    mf_docvec_t *out;
} collect_ctx_t;

static int
collect_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    mf_docvec_push(((collect_ctx_t *)arg)->out, doc);
    (void)rid;
    (void)d;
    return 0;
}

static int
get_nonneg(mf_op_t *op, const char *field, int64_t *out, bool *present, int64_t dflt)
{
    *out = dflt;
    if (mf_op_get_int64(op, field, out, present) != 0)
        return -1;
    if (!*present)
        *out = dflt;
    if (*out < 0)
        return mf_err_set(&op->err, MF_E_Location51024, "BSON field '%s' value must be >= 0, actual value '%lld'",
                          field, (long long)*out);
    return 0;
}

/*
 * get_hint: the "hint" field of doc (a command or a statement): an index
 * name or a key pattern ({$natural: 1} included). *hint is a view into doc,
 * NULL when absent. A hint of another type is 2 BadValue.
 */
static int
get_hint(mf_op_t *op, const bson_t *doc, const bson_value_t **hint, bson_value_t *store)
{
    bson_iter_t it;
    *hint = NULL;
    if (!bson_iter_init_find(&it, doc, "hint"))
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(&op->err, MF_E_BadValue, "hint must be a string or an object, not %s",
                          mf_type_name(bson_iter_type(&it)));
    *store = *bson_iter_value(&it); /* the iterator's value slot does not outlive it */
    *hint = store;
    return 0;
}

static int
cmd_find(mf_op_t *op)
{
    const char *name;
    bson_t filter, projection, sort;
    bool has_filter, has_proj, has_sort, present, single = false, tailable = false, await_data = false;
    int64_t skip, limit = 0, batch;
    mf_coll_t *c;
    mf_cursor_t *cur = NULL;
    mf_plan_t *plan = NULL;
    const bson_value_t *hint = NULL;
    bson_value_t hint_store;
    mf_matcher_t *m = NULL;
    mf_projection_t *p = NULL;
    mf_sort_t *srt = NULL;
    int rc = -1;

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    if (mf_op_get_doc(op, "filter", &filter, &has_filter) != 0 ||
        mf_op_get_doc(op, "projection", &projection, &has_proj) != 0 ||
        mf_op_get_doc(op, "sort", &sort, &has_sort) != 0 || get_nonneg(op, "skip", &skip, &present, 0) != 0 ||
        get_nonneg(op, "batchSize", &batch, &present, FIRST_BATCH_DEFAULT) != 0 ||
        mf_op_get_bool(op, "singleBatch", &single, &present) != 0 ||
        mf_op_get_bool(op, "tailable", &tailable, &present) != 0 ||
        mf_op_get_bool(op, "awaitData", &await_data, &present) != 0)
        return -1;
    if (await_data && !tailable)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Cannot set 'awaitData' without also setting 'tailable'");
    if (tailable && has_sort && !bson_empty(&sort)) {
        bson_iter_t si;
        if (!(bson_iter_init(&si, &sort) && bson_iter_next(&si) && strcmp(bson_iter_key(&si), "$natural") == 0 &&
              mf_value_as_double(bson_iter_value(&si)) > 0 && !bson_iter_next(&si)))
            return mf_err_set(&op->err, MF_E_BadValue, "cannot use tailable option with a sort other than {$natural: 1}");
        has_sort = false;
    }
    if (mf_op_get_int64(op, "limit", &limit, &present) != 0)
        return -1;
    if (limit < 0) {
        if (mf_err_set(&op->err, MF_E_Location51024, "BSON field 'limit' value must be >= 0, actual value '%lld'",
                       (long long)limit))
            return -1;
    }
    if (get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    atomic_fetch_add(&op->eng->op_query, 1);

    if ((m = mf_matcher_new(has_filter ? &filter : NULL, &op->err)) == NULL)
        return -1;
    if (has_proj && !bson_empty(&projection) && (p = mf_projection_new(&projection, &op->err)) == NULL)
        goto out;
    if (has_sort && !bson_empty(&sort) && (srt = mf_sort_new(&sort, &op->err)) == NULL)
        goto out;

    if (coll_acquire(op, name, false, &c) != 0)
        goto out_unlock;
    if (tailable && c != NULL) {
        /* Tailable cursors need a capped collection (and are not resumable here beyond a normal cursor). */
        bson_iter_t ci;
        if (!(c->options && bson_iter_init_find(&ci, c->options, "capped") && bson_iter_as_bool(&ci))) {
            mf_err_set(&op->err, MF_E_BadValue, "error processing query: ns=%s.%s: tailable cursor requested on non capped collection",
                       op->db, name);
            goto out_unlock;
        }
    }
    if (c != NULL && c->is_view) {
        /* A find on a view is the view's pipeline followed by the find's own stages. */
        bson_t stages;
        int k = 0;
        bson_init(&stages);
        if (has_filter && !bson_empty(&filter))
            stage_doc(&stages, &k, "$match", &filter);
        if (srt)
            stage_doc(&stages, &k, "$sort", &sort);
        if (skip > 0)
            stage_int(&stages, &k, "$skip", skip);
        if (limit > 0)
            stage_int(&stages, &k, "$limit", limit);
        if (has_proj && !bson_empty(&projection))
            stage_doc(&stages, &k, "$project", &projection);
        cur = mf_cursor_new(MF_CURSOR_DOCS, op->db, name);
        int vr = view_run(op, name, &stages, &cur->docs);
        bson_destroy(&stages);
        if (vr != 0)
            goto out_unlock;
        goto fill;
    }
    {
        mf_plan_request_t req = {.filter = has_filter ? &filter : NULL, .sort = srt ? &sort : NULL, .hint = hint,
                                 .force_collscan = tailable};
        if (mf_plan_build(c, &req, &plan, &op->err) != 0)
            goto out_unlock;
        plan->tailable = tailable;
    }
    cur = mf_cursor_new(srt && !plan->sort_provided ? MF_CURSOR_DOCS : MF_CURSOR_SCAN, op->db, name);
    if (c == NULL) {
        cur->kind = MF_CURSOR_DOCS; /* empty */
    } else if (cur->kind == MF_CURSOR_DOCS) {
        mf_docvec_t all;
        collect_ctx_t cc = {&all};
        mf_docvec_init(&all);
        if (mf_exec_run(op->sess, c, plan, m, collect_visit, &cc, &op->err) != 0) {
            mf_docvec_destroy(&all);
            goto out_unlock;
        }
        mf_sort_docs(srt, all.docs, all.len);
        size_t from = (size_t)(skip < (int64_t)all.len ? skip : (int64_t)all.len);
        size_t to = limit > 0 && (int64_t)(all.len - from) > limit ? from + (size_t)limit : all.len;
        for (size_t i = from; i < to; i++) {
            if (p) {
                bson_t *out = bson_new();
                mf_match_details_t d = {.array_pos = -1};
                mf_matcher_match(m, all.docs[i], &d);
                if (mf_projection_apply(p, all.docs[i], &d, out, &op->err) != 0) {
                    bson_destroy(out);
                    mf_docvec_destroy(&all);
                    goto out_unlock;
                }
                mf_docvec_push_steal(&cur->docs, out);
            } else {
                mf_docvec_push_steal(&cur->docs, all.docs[i]);
                all.docs[i] = bson_new();
            }
        }
        mf_docvec_destroy(&all);
    } else {
        cur->matcher = m;
        m = NULL;
        cur->proj = p;
        p = NULL;
        cur->skip_left = skip;
        cur->limit_left = limit > 0 ? limit : -1;
        if (has_filter)
            cur->filter = bson_copy(&filter);
        cur->plan = plan;
        plan = NULL;
    }
fill:
    if (limit > 0 && batch > limit)
        batch = limit;
    {
        bson_t arr;
        bool exhausted;
        int64_t id = 0;
        bson_init(&arr);
        if (cursor_fill(op, cur, batch, &arr, &exhausted) != 0) {
            bson_destroy(&arr);
            goto out_unlock;
        }
        /* A tailable cursor stays open at the end unless the collection is empty (as mongod does). */
        bool keep = !exhausted || (tailable && c != NULL && atomic_load(&c->approx_count) > 0);
        if (keep && !single) {
            cur->client_id = op->client ? op->client->id : 0;
            id = mf_cursors_register(op->eng->cursors, cur);
            mf_cursors_checkin(op->eng->cursors, cur);
            cur = NULL;
        }
        append_cursor_reply(op, "firstBatch", &arr, id, name);
        bson_destroy(&arr);
    }
    rc = 0;
out_unlock:
    mf_catalog_unlock(op->eng->cat);
out:
    if (cur)
        mf_cursor_free(cur);
    mf_plan_free(plan);
    if (m)
        mf_matcher_free(m);
    if (p)
        mf_projection_free(p);
    if (srt)
        mf_sort_free(srt);
    return rc;
}

static int
cmd_get_more(mf_op_t *op)
{
    bson_iter_t it;
    int64_t id, batch;
    bool present, busy, exhausted;
    const char *coll = NULL;
    mf_cursor_t *cur;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_INT64(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'",
                          mf_type_name(bson_iter_type(&it)));
    id = bson_iter_as_int64(&it);
    if (mf_op_get_string(op, "collection", &coll, &present) != 0)
        return -1;
    if (!present)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'getMore.collection' is missing but a required field");
    if (get_nonneg(op, "batchSize", &batch, &present, INT32_MAX) != 0)
        return -1;
    if (batch == 0)
        batch = INT32_MAX;
    atomic_fetch_add(&op->eng->op_getmore, 1);
    cur = mf_cursors_checkout(op->eng->cursors, id, &busy);
    if (cur == NULL) {
        if (busy)
            return mf_err_set(&op->err, MF_E_CursorInUse, "cursor id %lld is already in use", (long long)id);
        return mf_err_set(&op->err, MF_E_CursorNotFound, "cursor id %lld not found", (long long)id);
    }
    if (strcmp(cur->coll, coll) != 0 || strcmp(cur->db, op->db) != 0) {
        mf_cursors_checkin(op->eng->cursors, cur);
        return mf_err_set(&op->err, MF_E_Unauthorized, "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s.%s",
                          op->db, coll, cur->db, cur->coll);
    }
    bson_t arr;
    bson_init(&arr);
    mf_catalog_rdlock(op->eng->cat);
    int r = cursor_fill(op, cur, batch, &arr, &exhausted);
    mf_catalog_unlock(op->eng->cat);
    if (r != 0) {
        bson_destroy(&arr);
        mf_cursors_release(op->eng->cursors, cur);
        return -1;
    }
    char name[256];
    snprintf(name, sizeof(name), "%s", cur->coll);
    if (exhausted) {
        mf_cursors_release(op->eng->cursors, cur);
        id = 0;
    } else {
        mf_cursors_checkin(op->eng->cursors, cur);
    }
    append_cursor_reply(op, "nextBatch", &arr, id, name);
    bson_destroy(&arr);
    return 0;
}

static int
cmd_kill_cursors(mf_op_t *op)
{
    bson_iter_t it, ai;
    bson_t killed, notfound, empty;
    int nk = 0, nn = 0;
    char key[16];

    if (!bson_iter_init_find(&it, op->cmd, "cursors") || !BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'killCursors.cursors' is missing but a required field");
    bson_init(&killed);
    bson_init(&notfound);
    bson_init(&empty);
    bson_iter_recurse(&it, &ai);
    while (bson_iter_next(&ai)) {
        int64_t id = bson_iter_as_int64(&ai);
        if (mf_cursors_kill(op->eng->cursors, id)) {
            snprintf(key, sizeof(key), "%d", nk++);
            BSON_APPEND_INT64(&killed, key, id);
        } else {
            snprintf(key, sizeof(key), "%d", nn++);
            BSON_APPEND_INT64(&notfound, key, id);
        }
    }
    BSON_APPEND_ARRAY(op->reply, "cursorsKilled", &killed);
    BSON_APPEND_ARRAY(op->reply, "cursorsNotFound", &notfound);
    BSON_APPEND_ARRAY(op->reply, "cursorsAlive", &empty);
    BSON_APPEND_ARRAY(op->reply, "cursorsUnknown", &empty);
    bson_destroy(&killed);
    bson_destroy(&notfound);
    bson_destroy(&empty);
    return 0;
}

/*
 * Statement checks done before any statement runs: MongoDB parses the whole
 * command first, so a missing or mistyped statement field fails the command
 * (40414 / 14 / 40415), while errors met while executing (a bad operator in
 * a filter or an update) become writeErrors.
 */
typedef struct stmt_field {
    const char *name;
    bool required;
    int kind; /* 0 any, 1 document, 2 number, 3 document or array, 4 bool-ish, 5 array */
} stmt_field_t;

static int
check_statements(mf_op_t *op, const char *arr, const bson_t *stmts, size_t n, const stmt_field_t *fields)
{
    static const char *kind_name[] = {"any", "object", "number", "object", "bool", "array"};
    for (size_t i = 0; i < n; i++) {
        bson_iter_t it;
        bson_iter_init(&it, &stmts[i]);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            const stmt_field_t *f = fields;
            while (f->name && strcmp(f->name, k) != 0)
                f++;
            if (f->name == NULL)
                return mf_err_set(&op->err, MF_E_Location40415, "BSON field '%s.%s.%s' is an unknown field.", op->name,
                                  arr, k);
            bson_type_t t = bson_iter_type(&it);
            bool ok = true;
            switch (f->kind) {
            case 1:
                ok = t == BSON_TYPE_DOCUMENT;
                break;
            case 2:
                ok = mf_value_is_number(bson_iter_value(&it));
                break;
            case 3:
                ok = t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY;
                break;
            case 4:
                ok = t == BSON_TYPE_BOOL || mf_value_is_number(bson_iter_value(&it)) || t == BSON_TYPE_NULL;
                break;
            case 5:
                ok = t == BSON_TYPE_ARRAY;
                break;
            }
            if (!ok)
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s.%s' is the wrong type '%s', expected type '%s'",
                                  op->name, arr, k, mf_type_name(t), kind_name[f->kind]);
        }
        for (const stmt_field_t *f = fields; f->name; f++) {
            if (f->required && !bson_has_field(&stmts[i], f->name))
                return mf_err_set(&op->err, MF_E_Location40414, "BSON field '%s.%s.%s' is missing but a required field",
                                  op->name, arr, f->name);
        }
    }
    return 0;
}

static const stmt_field_t update_stmt_fields[] = {
    {"q", true, 1}, {"u", true, 3}, {"upsert", false, 4}, {"multi", false, 4}, {"arrayFilters", false, 5},
    {"hint", false, 0}, {"collation", false, 1}, {"c", false, 1}, {"upsertSupplied", false, 4},
    {"sort", false, 1}, {NULL, false, 0}};
static const stmt_field_t delete_stmt_fields[] = {
    {"q", true, 1}, {"limit", true, 2}, {"hint", false, 0}, {"collation", false, 1}, {NULL, false, 0}};

/* ---------- update ---------- */

/*
 * An update statement is either an update document (mf_update_t: operators
 * or a replacement) or a pipeline (pipeline-style update: $set/$addFields/
 * $unset/$project/$replaceRoot/$replaceWith stages), which is run over a
 * source that yields just the document being updated.
 */
typedef struct upd_spec {
    mf_update_t *u;
    mf_pipeline_t *pl;
} upd_spec_t;

static void
upd_spec_free(upd_spec_t *x)
{
    if (x == NULL)
        return;
    if (x->u)
        mf_update_free(x->u);
    if (x->pl)
        mf_pipeline_free(x->pl);
    free(x);
}

/* upd_spec_new: from an update document ud, or a pipeline (array value). Caller frees with upd_spec_free. */
static upd_spec_t *
upd_spec_new(const bson_t *ud, const bson_value_t *pipeline, const bson_value_t *af, mf_error_t *err)
{
    static const char *const allowed[] = {"$addFields", "$set", "$project", "$unset", "$replaceRoot", "$replaceWith",
                                          NULL};
    upd_spec_t *x = mf_calloc(1, sizeof(*x));
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
    bson_t arr;
    bson_iter_t it, st;
    if (bson_init_static(&arr, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len) && bson_iter_init(&it, &arr)) {
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
                continue; /* mf_pipeline_new reports malformed stages */
            const char *name = bson_iter_key(&st);
            bool ok = false;
            for (const char *const *a = allowed; *a; a++)
                ok = ok || strcmp(*a, name) == 0;
            if (!ok && name[0] == '$') {
                mf_err_set(err, MF_E_InvalidOptions, "%s is not allowed to be used within an update", name);
                free(x);
                return NULL;
            }
        }
    }
    if ((x->pl = mf_pipeline_new(pipeline, err)) == NULL) {
        free(x);
        return NULL;
    }
    return x;
}

static bool
upd_spec_is_replacement(const upd_spec_t *x)
{
    return x->u != NULL && mf_update_is_replacement(x->u);
}

static int
one_doc_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    (void)coll;
    (void)filter;
    (void)err;
    return visit(arg, (const bson_t *)ctx) < 0 ? -1 : 0;
}

/* upd_spec_apply: as mf_update_apply (out initialised by the caller). */
static int
upd_spec_apply(const upd_spec_t *x, const bson_t *doc, const mf_match_details_t *d, bool is_insert, bson_t *out,
               bool *changed, mf_error_t *err)
{
    if (x->u)
        return mf_update_apply(x->u, doc, d, is_insert, out, changed, err);
    mf_agg_env_t env;
    mf_docvec_t res;
    bson_iter_t oi, ni;
    int rc = 0;
    memset(&env, 0, sizeof(env));
    env.scan = one_doc_scan;
    env.ctx = (void *)doc;
    mf_docvec_init(&res);
    if (mf_pipeline_run(x->pl, &env, "", &res, err) != 0) {
        mf_docvec_destroy(&res);
        return -1;
    }
    if (res.len != 1) {
        mf_docvec_destroy(&res);
        return mf_err_set(err, MF_E_FailedToParse, "pipeline-style update must produce exactly one document");
    }
    const bson_t *r = res.docs[0];
    bool old_id = bson_iter_init_find(&oi, doc, "_id");
    bool new_id = bson_iter_init_find(&ni, r, "_id");
    if (old_id && new_id && !(mf_value_equal(bson_iter_value(&oi), bson_iter_value(&ni)) &&
                              bson_iter_type(&oi) == bson_iter_type(&ni))) {
        rc = mf_err_set(err, MF_E_ImmutableField,
                        "Performing an update on the path '_id' would modify the immutable field '_id'");
    } else {
        bson_iter_t it;
        if (old_id)
            bson_append_value(out, "_id", 3, bson_iter_value(&oi));
        else if (new_id)
            bson_append_value(out, "_id", 3, bson_iter_value(&ni));
        bson_iter_init(&it, r);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_value(out, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
        }
        *changed = is_insert || out->len != doc->len || memcmp(bson_get_data(out), bson_get_data(doc), doc->len) != 0;
    }
    mf_docvec_destroy(&res);
    return rc;
}

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
    const upd_spec_t *u;
    const int64_t *rids;
    uint8_t *slot; /* per rid: bit0 matched, bit1 modified */
    int64_t matched, modified;
    bool validate; /* check the collection's validator */
} upd_ctx_t;

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
    ret = upd_spec_apply(x->u, &doc, &d, false, &out, &changed, err);
    if (ret == 0 && changed) {
        ret = mf_check_doc_for_storage(&out, err);
        if (ret == 0 && x->validate)
            ret = mf_coll_validate(x->c, &out, &doc, err);
        if (ret == 0)
            ret = mf_coll_replace(x->s, x->c, x->rids[i], &doc, &out, err);
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

/* Builds and inserts the upsert document. *idv receives a copy of its _id (caller destroys). */
static int
do_upsert(mf_op_t *op, mf_coll_t *c, const bson_t *q, const upd_spec_t *u, bool durable, bson_value_t *idv,
          bson_t *inserted)
{
    bson_t seed, out, fixed;
    bool changed;
    bson_iter_t it;
    int ret;

    bson_init(&seed);
    if (upd_spec_is_replacement(u)) {
        /* A replacement upsert takes _id from the query when the replacement has none. */
        bson_value_t qid;
        if (mf_exec_id_equality(q, &qid))
            bson_append_value(&seed, "_id", 3, &qid);
    } else if (mf_update_upsert_seed(q, &seed, &op->err) != 0) {
        bson_destroy(&seed);
        return -1;
    }
    bson_init(&out);
    if (upd_spec_apply(u, &seed, NULL, true, &out, &changed, &op->err) != 0) {
        bson_destroy(&seed);
        bson_destroy(&out);
        return -1;
    }
    bson_destroy(&seed);
    doc_with_id_first(&out, &fixed);
    bson_destroy(&out);
    if (mf_check_doc_for_storage(&fixed, &op->err) != 0 ||
        (!bypass_validation(op) && mf_coll_validate(c, &fixed, NULL, &op->err) != 0)) {
        bson_destroy(&fixed);
        return -1;
    }
    for (int attempt = 0;; attempt++) {
        if (mf_txn_begin(op->sess, &op->err) != 0)
            break;
        ret = mf_coll_insert(op->sess, c, &fixed, NULL, &op->err);
        if (ret == 0)
            ret = mf_txn_commit(op->sess, durable, &op->err);
        else
            mf_txn_abort(op->sess);
        if (ret == MF_CONFLICT || (ret != 0 && op->err.code == MF_E_WriteConflict && attempt < 1000)) {
            mf_batch_backoff(attempt);
            continue;
        }
        if (ret == 0) {
            bson_iter_init_find(&it, &fixed, "_id");
            bson_value_copy(bson_iter_value(&it), idv);
            if (inserted)
                bson_copy_to(&fixed, inserted);
        }
        bson_destroy(&fixed);
        return ret == 0 ? 0 : -1;
    }
    bson_destroy(&fixed);
    return -1;
}

/* Runs one update statement; fills counters. Returns 0 or -1 with e. */
static int
update_one_stmt(mf_op_t *op, const char *name, const bson_t *stmt, bool durable, int64_t *n, int64_t *nmod,
                bson_value_t *upserted_id, bool *did_upsert, mf_error_t *e)
{
    bson_iter_t it;
    bson_t q, ud;
    const bson_value_t *af = NULL, *hint = NULL, *upl = NULL;
    bson_value_t af_store, hint_store, upl_store;
    bool upsert = false, multi = false, have_q = false, have_u = false;
    mf_matcher_t *m = NULL;
    upd_spec_t *u = NULL;
    mf_coll_t *c = NULL;
    rid_vec_t rv = {0};
    int rc = -1;

    *did_upsert = false;
    bson_iter_init(&it, stmt);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const uint8_t *data;
        uint32_t len;
        if (strcmp(k, "q") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(e, MF_E_TypeMismatch, "BSON field 'update.updates.q' is the wrong type '%s', expected type 'object'",
                                  mf_type_name(bson_iter_type(&it)));
            bson_iter_document(&it, &len, &data);
            have_q = bson_init_static(&q, data, len);
        } else if (strcmp(k, "u") == 0) {
            if (BSON_ITER_HOLDS_ARRAY(&it)) {
                upl_store = *bson_iter_value(&it);
                upl = &upl_store;
                have_u = true;
                continue;
            }
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(e, MF_E_FailedToParse, "Update argument must be either an object or an array");
            bson_iter_document(&it, &len, &data);
            have_u = bson_init_static(&ud, data, len);
        } else if (strcmp(k, "hint") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(e, MF_E_BadValue, "hint must be a string or an object");
            hint_store = *bson_iter_value(&it);
            hint = &hint_store;
        } else if (strcmp(k, "upsert") == 0) {
            upsert = bson_iter_as_bool(&it);
        } else if (strcmp(k, "multi") == 0) {
            multi = bson_iter_as_bool(&it);
        } else if (strcmp(k, "arrayFilters") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mf_err_set(e, MF_E_TypeMismatch, "BSON field 'update.updates.arrayFilters' is the wrong type '%s', expected type 'array'",
                                  mf_type_name(bson_iter_type(&it)));
            af_store = *bson_iter_value(&it);
            af = &af_store;
        }
    }
    if (!have_q)
        return mf_err_set(e, MF_E_Location40414, "BSON field 'update.updates.q' is missing but a required field");
    if (!have_u)
        return mf_err_set(e, MF_E_Location40414, "BSON field 'update.updates.u' is missing but a required field");
    if ((m = mf_matcher_new(&q, e)) == NULL)
        return -1;
    if ((u = upd_spec_new(upl ? NULL : &ud, upl, af, e)) == NULL)
        goto out;
    if (multi && upd_spec_is_replacement(u)) {
        mf_err_set(e, MF_E_FailedToParse, "multi update is not supported for replacement-style update");
        goto out;
    }
    mf_error_t saved = op->err;
    if (coll_acquire(op, name, upsert, &c) != 0) {
        *e = op->err;
        op->err = saved;
        goto out_unlock;
    }
    if (c != NULL && c->is_view) {
        view_write_error(e, c);
        goto out_unlock;
    }
    if (c != NULL) {
        mf_plan_request_t req = {.filter = &q, .hint = hint, .root = MF_PLAN_ROOT_UPDATE};
        rv.max = multi ? 0 : 1;
        if (mf_exec_query(op->sess, c, &req, m, rid_visit, &rv, NULL, e) != 0)
            goto out_unlock;
        upd_ctx_t x = {op->sess, c, m, u, rv.v, mf_calloc(rv.n + 1, 1), 0, 0, !bypass_validation(op)};
        size_t start = 0;
        int r = mf_batch_run(op->sess, &start, rv.n, UPDATE_CHUNK, durable, upd_item, upd_commit, &x, e);
        free(x.slot);
        *n = x.matched;
        *nmod = x.modified;
        if (r != 0)
            goto out_unlock;
    }
    if (*n == 0 && upsert && c != NULL) {
        if (do_upsert(op, c, &q, u, durable, upserted_id, NULL) != 0) {
            *e = op->err;
            op->err = saved;
            goto out_unlock;
        }
        *did_upsert = true;
        *n = 1;
    }
    rc = 0;
out_unlock:
    mf_catalog_unlock(op->eng->cat);
out:
    free(rv.v);
    mf_matcher_free(m);
    upd_spec_free(u);
    return rc;
}

static int
cmd_update(mf_op_t *op)
{
    const char *name;
    bson_t *stmts, errs, ups;
    size_t nstmts;
    bool ordered, durable = want_durable(op);
    int64_t n_total = 0, nmod_total = 0;
    int nerr = 0, nups = 0;

    if (mf_op_coll_name(op, &name) != 0 || get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "updates", false, &stmts, &nstmts) != 0)
        return -1;
    if (check_batch_size(op, nstmts) != 0 || check_statements(op, "updates", stmts, nstmts, update_stmt_fields) != 0) {
        free(stmts);
        return -1;
    }
    bson_init(&errs);
    bson_init(&ups);
    for (size_t i = 0; i < nstmts; i++) {
        int64_t n = 0, nmod = 0;
        bson_value_t id;
        bool upserted = false;
        mf_error_t e;
        mf_err_clear(&e);
        if (update_one_stmt(op, name, &stmts[i], durable, &n, &nmod, &id, &upserted, &e) != 0) {
            append_write_error(&errs, &nerr, i, &e);
            n_total += n;
            nmod_total += nmod;
            if (ordered)
                break;
            continue;
        }
        n_total += n;
        nmod_total += nmod;
        if (upserted) {
            char key[16];
            bson_t u;
            snprintf(key, sizeof(key), "%d", nups++);
            BSON_APPEND_DOCUMENT_BEGIN(&ups, key, &u);
            BSON_APPEND_INT32(&u, "index", (int32_t)i);
            bson_append_value(&u, "_id", 3, &id);
            bson_append_document_end(&ups, &u);
            bson_value_destroy(&id);
        }
    }
    free(stmts);
    BSON_APPEND_INT32(op->reply, "n", (int32_t)n_total);
    BSON_APPEND_INT32(op->reply, "nModified", (int32_t)nmod_total);
    if (nups > 0)
        BSON_APPEND_ARRAY(op->reply, "upserted", &ups);
    if (nerr > 0)
        BSON_APPEND_ARRAY(op->reply, "writeErrors", &errs);
    bson_destroy(&errs);
    bson_destroy(&ups);
    return 0;
}

/* ---------- delete ---------- */

static bool
del_check(void *arg, int64_t rid, const bson_t *doc)
{
    (void)rid;
    return mf_matcher_match((const mf_matcher_t *)arg, doc, NULL);
}

static int
delete_one_stmt(mf_op_t *op, const char *name, const bson_t *stmt, bool durable, int64_t *n, mf_error_t *e)
{
    bson_iter_t it;
    bson_t q;
    bool have_q = false, have_limit = false;
    int64_t limit = 0;
    mf_matcher_t *m;
    mf_coll_t *c;
    rid_vec_t rv = {0};
    const bson_value_t *hint = NULL;
    bson_value_t hint_store;
    int rc = -1;

    bson_iter_init(&it, stmt);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "q") == 0) {
            const uint8_t *data;
            uint32_t len;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(e, MF_E_TypeMismatch, "BSON field 'delete.deletes.q' is the wrong type '%s', expected type 'object'",
                                  mf_type_name(bson_iter_type(&it)));
            bson_iter_document(&it, &len, &data);
            have_q = bson_init_static(&q, data, len);
        } else if (strcmp(k, "limit") == 0) {
            if (!mf_value_is_number(bson_iter_value(&it)))
                return mf_err_set(e, MF_E_TypeMismatch, "BSON field 'delete.deletes.limit' is the wrong type '%s', expected type 'number'",
                                  mf_type_name(bson_iter_type(&it)));
            limit = (int64_t)mf_value_as_double(bson_iter_value(&it));
            have_limit = true;
        } else if (strcmp(k, "hint") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(e, MF_E_BadValue, "hint must be a string or an object");
            hint_store = *bson_iter_value(&it);
            hint = &hint_store;
        }
    }
    if (!have_q)
        return mf_err_set(e, MF_E_Location40414, "BSON field 'delete.deletes.q' is missing but a required field");
    if (!have_limit)
        return mf_err_set(e, MF_E_Location40414, "BSON field 'delete.deletes.limit' is missing but a required field");
    if (limit != 0 && limit != 1)
        return mf_err_set(e, MF_E_FailedToParse, "The limit field in delete objects must be 0 or 1. Got %lld",
                          (long long)limit);
    if ((m = mf_matcher_new(&q, e)) == NULL)
        return -1;
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && c->is_view) {
        view_write_error(e, c);
        goto out;
    }
    if (c != NULL) {
        mf_plan_request_t req = {.filter = &q, .hint = hint,
                                 .root = limit == 0 ? MF_PLAN_ROOT_BATCHED_DELETE : MF_PLAN_ROOT_DELETE};
        rv.max = (size_t)limit;
        if (mf_exec_query(op->sess, c, &req, m, rid_visit, &rv, NULL, e) != 0)
            goto out;
        size_t chunk = 1;
        bool batched = limit == 0;
        if (batched) {
            int64_t target = mf_param_get(op->eng->params, "batchedDeletesTargetBatchDocs");
            chunk = target > 0 ? (size_t)target : 0;
        }
        mf_delete_stats_t st = {0, 0};
        int r = mf_delete_rids(op->sess, c, rv.v, rv.n, chunk, durable, del_check, m, &st, e);
        *n = st.deleted;
        if (batched && rv.n > 0) {
            atomic_fetch_add(&op->eng->batched_deletes_docs, st.deleted);
            atomic_fetch_add(&op->eng->batched_deletes_batches, st.batches);
        }
        if (r != 0)
            goto out;
    }
    rc = 0;
out:
    mf_catalog_unlock(op->eng->cat);
    free(rv.v);
    mf_matcher_free(m);
    return rc;
}

static int
cmd_delete(mf_op_t *op)
{
    const char *name;
    bson_t *stmts, errs;
    size_t nstmts;
    bool ordered, durable = want_durable(op);
    int64_t total = 0;
    int nerr = 0;

    if (mf_op_coll_name(op, &name) != 0 || get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "deletes", false, &stmts, &nstmts) != 0)
        return -1;
    if (check_batch_size(op, nstmts) != 0 || check_statements(op, "deletes", stmts, nstmts, delete_stmt_fields) != 0) {
        free(stmts);
        return -1;
    }
    bson_init(&errs);
    for (size_t i = 0; i < nstmts; i++) {
        int64_t n = 0;
        mf_error_t e;
        mf_err_clear(&e);
        int r = delete_one_stmt(op, name, &stmts[i], durable, &n, &e);
        total += n;
        if (r != 0) {
            append_write_error(&errs, &nerr, i, &e);
            if (ordered)
                break;
        }
    }
    free(stmts);
    BSON_APPEND_INT32(op->reply, "n", (int32_t)total);
    if (nerr > 0)
        BSON_APPEND_ARRAY(op->reply, "writeErrors", &errs);
    bson_destroy(&errs);
    return 0;
}

/* ---------- findAndModify ---------- */

typedef struct first_ctx {
    int64_t rid;
    bool found;
} first_ctx_t;

static int
first_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    first_ctx_t *f = arg;
    f->rid = rid;
    f->found = true;
    (void)doc;
    (void)d;
    return 1;
}

typedef struct sorted_first_ctx {
    const mf_sort_t *s;
    bson_t *best;
    int64_t rid;
} sorted_first_ctx_t;

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

static int
project_into(mf_op_t *op, const mf_projection_t *p, const bson_t *doc, bson_t *out)
{
    if (p == NULL) {
        bson_copy_to(doc, out);
        return 0;
    }
    bson_init(out);
    if (mf_projection_apply(p, doc, NULL, out, &op->err) != 0) {
        bson_destroy(out);
        return -1;
    }
    return 0;
}

static int
cmd_find_and_modify(mf_op_t *op)
{
    const char *name;
    bson_t query, sort, fields, upd;
    bool has_query, has_sort, has_fields, has_upd = false, remove = false, want_new = false, upsert = false, present;
    bson_iter_t it;
    const bson_value_t *af = NULL;
    mf_matcher_t *m = NULL;
    mf_sort_t *srt = NULL;
    mf_projection_t *p = NULL;
    upd_spec_t *u = NULL;
    mf_coll_t *c = NULL;
    const bson_value_t *upl = NULL, *hint = NULL;
    bson_value_t hint_store, upl_store, af_store;
    mf_plan_t *plan = NULL;
    bool durable = want_durable(op);
    int rc = -1;
    bool locked = false;

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    if (mf_op_get_doc(op, "query", &query, &has_query) != 0 || mf_op_get_doc(op, "sort", &sort, &has_sort) != 0 ||
        mf_op_get_doc(op, "fields", &fields, &has_fields) != 0 || mf_op_get_bool(op, "remove", &remove, &present) != 0 ||
        mf_op_get_bool(op, "new", &want_new, &present) != 0 || mf_op_get_bool(op, "upsert", &upsert, &present) != 0)
        return -1;
    if (get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    if (bson_iter_init_find(&it, op->cmd, "update")) {
        if (BSON_ITER_HOLDS_ARRAY(&it)) {
            upl_store = *bson_iter_value(&it);
            upl = &upl_store;
            has_upd = true;
        } else if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            return mf_err_set(&op->err, MF_E_FailedToParse, "Update argument must be either an object or an array");
        } else {
            const uint8_t *data;
            uint32_t len;
            bson_iter_document(&it, &len, &data);
            has_upd = bson_init_static(&upd, data, len);
        }
    }
    if (bson_iter_init_find(&it, op->cmd, "arrayFilters") && BSON_ITER_HOLDS_ARRAY(&it)) {
        af_store = *bson_iter_value(&it);
        af = &af_store;
    }
    if (remove && has_upd)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Cannot specify both an update and remove=true");
    if (!remove && !has_upd)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Either an update or remove=true must be specified");
    if (remove && upsert)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Cannot specify both upsert=true and remove=true ");
    if (remove && want_new)
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document");

    if ((m = mf_matcher_new(has_query ? &query : NULL, &op->err)) == NULL)
        return -1;
    if (has_sort && !bson_empty(&sort) && (srt = mf_sort_new(&sort, &op->err)) == NULL)
        goto out;
    if (has_fields && !bson_empty(&fields) && (p = mf_projection_new(&fields, &op->err)) == NULL)
        goto out;
    if (has_upd && (u = upd_spec_new(upl ? NULL : &upd, upl, af, &op->err)) == NULL)
        goto out;
    if (coll_acquire(op, name, upsert, &c) != 0) {
        locked = true;
        goto out;
    }
    locked = true;
    if (c != NULL && c->is_view) {
        view_write_error(&op->err, c);
        goto out;
    }

    bson_t le;
    for (int attempt = 0;; attempt++) {
        int64_t rid = 0;
        bool found = false;
        bson_t doc, out_doc, value;
        bool changed = false;
        int r = 0;

        if (c != NULL) {
            mf_plan_request_t req = {.filter = has_query ? &query : NULL, .sort = srt ? &sort : NULL, .hint = hint,
                                     .root = remove ? MF_PLAN_ROOT_DELETE : MF_PLAN_ROOT_UPDATE};
            mf_plan_free(plan);
            if (mf_plan_build(c, &req, &plan, &op->err) != 0)
                goto out;
            if (srt && !plan->sort_provided) {
                sorted_first_ctx_t sf = {srt, NULL, 0};
                if (mf_exec_run(op->sess, c, plan, m, sorted_first_visit, &sf, &op->err) != 0)
                    goto out;
                if (sf.best) {
                    found = true;
                    rid = sf.rid;
                    bson_destroy(sf.best);
                }
            } else {
                first_ctx_t ff = {0, false};
                if (mf_exec_run(op->sess, c, plan, m, first_visit, &ff, &op->err) != 0)
                    goto out;
                found = ff.found;
                rid = ff.rid;
            }
        }
        if (!found) {
            if (upsert && c != NULL) {
                bson_value_t idv;
                bson_t inserted;
                if (do_upsert(op, c, has_query ? &query : &(bson_t)BSON_INITIALIZER, u, durable, &idv, &inserted) != 0)
                    goto out;
                BSON_APPEND_DOCUMENT_BEGIN(op->reply, "lastErrorObject", &le);
                BSON_APPEND_INT32(&le, "n", 1);
                BSON_APPEND_BOOL(&le, "updatedExisting", false);
                bson_append_value(&le, "upserted", -1, &idv);
                bson_append_document_end(op->reply, &le);
                bson_value_destroy(&idv);
                if (want_new) {
                    if (project_into(op, p, &inserted, &value) != 0) {
                        bson_destroy(&inserted);
                        goto out;
                    }
                    BSON_APPEND_DOCUMENT(op->reply, "value", &value);
                    bson_destroy(&value);
                } else {
                    BSON_APPEND_NULL(op->reply, "value");
                }
                bson_destroy(&inserted);
                rc = 0;
                goto out;
            }
            BSON_APPEND_DOCUMENT_BEGIN(op->reply, "lastErrorObject", &le);
            BSON_APPEND_INT32(&le, "n", 0);
            if (!remove)
                BSON_APPEND_BOOL(&le, "updatedExisting", false);
            bson_append_document_end(op->reply, &le);
            BSON_APPEND_NULL(op->reply, "value");
            rc = 0;
            goto out;
        }
        if (mf_txn_begin(op->sess, &op->err) != 0)
            goto out;
        r = mf_coll_fetch(op->sess, c, rid, &doc, &op->err);
        if (r == MF_NOTFOUND) {
            mf_txn_abort(op->sess);
            continue; /* deleted since the scan: look again */
        }
        if (r != 0) {
            mf_txn_abort(op->sess);
            if (r == MF_CONFLICT && attempt < 1000) {
                mf_batch_backoff(attempt);
                continue;
            }
            goto out;
        }
        mf_match_details_t d = {.array_pos = -1};
        if (!mf_matcher_match(m, &doc, &d)) {
            bson_destroy(&doc);
            mf_txn_abort(op->sess);
            continue;
        }
        bson_init(&out_doc);
        if (remove) {
            r = mf_coll_remove(op->sess, c, rid, &doc, &op->err);
        } else {
            r = upd_spec_apply(u, &doc, &d, false, &out_doc, &changed, &op->err);
            if (r == 0 && changed) {
                r = mf_check_doc_for_storage(&out_doc, &op->err);
                if (r == 0 && !bypass_validation(op))
                    r = mf_coll_validate(c, &out_doc, &doc, &op->err);
                if (r == 0)
                    r = mf_coll_replace(op->sess, c, rid, &doc, &out_doc, &op->err);
            }
        }
        if (r == 0)
            r = mf_txn_commit(op->sess, durable, &op->err);
        else
            mf_txn_abort(op->sess);
        if (r != 0) {
            bson_destroy(&doc);
            bson_destroy(&out_doc);
            if ((r == MF_CONFLICT || op->err.code == MF_E_WriteConflict) && attempt < 1000) {
                mf_err_clear(&op->err);
                mf_batch_backoff(attempt);
                continue;
            }
            goto out;
        }
        BSON_APPEND_DOCUMENT_BEGIN(op->reply, "lastErrorObject", &le);
        BSON_APPEND_INT32(&le, "n", 1);
        if (!remove)
            BSON_APPEND_BOOL(&le, "updatedExisting", true);
        bson_append_document_end(op->reply, &le);
        const bson_t *img = (!remove && want_new) ? (changed ? &out_doc : &doc) : &doc;
        r = project_into(op, p, img, &value);
        bson_destroy(&doc);
        bson_destroy(&out_doc);
        if (r != 0)
            goto out;
        BSON_APPEND_DOCUMENT(op->reply, "value", &value);
        bson_destroy(&value);
        rc = 0;
        goto out;
    }
out:
    if (locked)
        mf_catalog_unlock(op->eng->cat);
    if (m)
        mf_matcher_free(m);
    if (srt)
        mf_sort_free(srt);
    if (p)
        mf_projection_free(p);
    upd_spec_free(u);
    mf_plan_free(plan);
    return rc;
}

/* ---------- count / distinct ---------- */

typedef struct count_ctx {
    int64_t n, skip, limit;
} count_ctx_t;

static int
count_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    count_ctx_t *x = arg;
    (void)rid;
    (void)doc;
    (void)d;
    if (x->skip > 0) {
        x->skip--;
        return 0;
    }
    x->n++;
    return x->limit > 0 && x->n >= x->limit ? 1 : 0;
}

static int
cmd_count(mf_op_t *op)
{
    const char *name;
    bson_t query;
    bool has_query, present;
    count_ctx_t x = {0, 0, 0};
    mf_coll_t *c;
    mf_matcher_t *m;
    const bson_value_t *hint;
    bson_value_t hint_store;
    int rc = 0;

    if (get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    if (mf_op_coll_name(op, &name) != 0 || mf_op_get_doc(op, "query", &query, &has_query) != 0 ||
        mf_op_get_int64(op, "skip", &x.skip, &present) != 0 || mf_op_get_int64(op, "limit", &x.limit, &present) != 0)
        return -1;
    if (x.skip < 0)
        return mf_err_set(&op->err, MF_E_BadValue, "skip value is negative in count query");
    if (x.limit < 0)
        x.limit = -x.limit;
    if ((m = mf_matcher_new(has_query ? &query : NULL, &op->err)) == NULL)
        return -1;
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && c->is_view) {
        bson_t stages;
        mf_docvec_t res;
        int k = 0;
        bson_init(&stages);
        if (has_query)
            stage_doc(&stages, &k, "$match", &query);
        if (x.skip > 0)
            stage_int(&stages, &k, "$skip", x.skip);
        if (x.limit > 0)
            stage_int(&stages, &k, "$limit", x.limit);
        mf_docvec_init(&res);
        rc = view_run(op, name, &stages, &res);
        x.n = (int64_t)res.len;
        mf_docvec_destroy(&res);
        bson_destroy(&stages);
    } else if (c != NULL) {
        if ((!has_query || bson_empty(&query)) && hint == NULL) {
            int64_t total = atomic_load(&c->approx_count);
            total -= x.skip;
            if (total < 0)
                total = 0;
            if (x.limit > 0 && total > x.limit)
                total = x.limit;
            x.n = total;
        } else {
            mf_plan_request_t req = {.filter = has_query ? &query : NULL, .hint = hint, .root = MF_PLAN_ROOT_COUNT};
            rc = mf_exec_query(op->sess, c, &req, m, count_visit, &x, NULL, &op->err);
        }
    }
    mf_catalog_unlock(op->eng->cat);
    mf_matcher_free(m);
    if (rc != 0)
        return -1;
    BSON_APPEND_INT32(op->reply, "n", (int32_t)x.n);
    return 0;
}

typedef struct distinct_ctx {
    const char *key;
    bson_t *vals; /* holder document keeping values alive */
    int n;
} distinct_ctx_t;

static bool
distinct_path(void *arg, const bson_value_t *v)
{
    distinct_ctx_t *x = arg;
    char key[16];
    snprintf(key, sizeof(key), "%d", x->n++);
    bson_append_value(x->vals, key, -1, v);
    return false;
}

static int
distinct_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    distinct_ctx_t *x = arg;
    (void)rid;
    (void)d;
    mf_path_walk_leaves(doc, x->key, distinct_path, x);
    return 0;
}

static int
value_ptr_cmp(const void *a, const void *b)
{
    return mf_value_cmp(*(const bson_value_t *const *)a, *(const bson_value_t *const *)b);
}

static int
cmd_distinct(mf_op_t *op)
{
    const char *name, *key;
    bson_t query, vals, out;
    bool has_query, present;
    mf_coll_t *c;
    mf_matcher_t *m;
    const bson_value_t *hint;
    bson_value_t hint_store;
    int rc = 0;

    if (get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    if (mf_op_coll_name(op, &name) != 0 || mf_op_get_string(op, "key", &key, &present) != 0 ||
        mf_op_get_doc(op, "query", &query, &has_query) != 0)
        return -1;
    if (!present)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'distinct.key' is missing but a required field");
    if ((m = mf_matcher_new(has_query ? &query : NULL, &op->err)) == NULL)
        return -1;
    bson_init(&vals);
    distinct_ctx_t x = {key, &vals, 0};
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && c->is_view) {
        bson_t stages;
        mf_docvec_t res;
        int k = 0;
        bson_init(&stages);
        if (has_query)
            stage_doc(&stages, &k, "$match", &query);
        mf_docvec_init(&res);
        rc = view_run(op, name, &stages, &res);
        for (size_t i = 0; rc == 0 && i < res.len; i++)
            distinct_visit(&x, 0, res.docs[i], NULL);
        mf_docvec_destroy(&res);
        bson_destroy(&stages);
    } else if (c != NULL) {
        mf_plan_request_t req = {.filter = has_query ? &query : NULL, .hint = hint};
        rc = mf_exec_query(op->sess, c, &req, m, distinct_visit, &x, NULL, &op->err);
    }
    mf_catalog_unlock(op->eng->cat);
    mf_matcher_free(m);
    if (rc != 0) {
        bson_destroy(&vals);
        return -1;
    }
    /* Sort, then keep the first of each run of equal values. */
    bson_value_t *store = mf_calloc((size_t)x.n + 1, sizeof(*store));
    const bson_value_t **ptrs = mf_calloc((size_t)x.n + 1, sizeof(*ptrs));
    bson_iter_t it;
    int k = 0;
    bson_iter_init(&it, &vals);
    while (bson_iter_next(&it) && k < x.n) {
        store[k] = *bson_iter_value(&it);
        ptrs[k] = &store[k];
        k++;
    }
    qsort(ptrs, (size_t)k, sizeof(*ptrs), value_ptr_cmp);
    bson_init(&out);
    int outn = 0;
    for (int i = 0; i < k; i++) {
        if (i > 0 && mf_value_cmp(ptrs[i], ptrs[i - 1]) == 0)
            continue;
        char kb[16];
        snprintf(kb, sizeof(kb), "%d", outn++);
        bson_append_value(&out, kb, -1, ptrs[i]);
    }
    if (out.len > MF_MAX_BSON_SIZE) {
        rc = mf_err_set(&op->err, MF_E_Location17217, "distinct too big, 16mb cap");
    } else {
        BSON_APPEND_ARRAY(op->reply, "values", &out);
    }
    bson_destroy(&out);
    free(store);
    free(ptrs);
    bson_destroy(&vals);
    return rc;
}

/* ---------- aggregate ---------- */

/*
 * A $out / $merge recorded by env->write_out while the pipeline runs under
 * the catalog read lock, and performed by agg_write_perform after that lock
 * is released (a write needs the write lock to create or replace the target,
 * and the read lock must never be upgraded in place).
 */
typedef struct agg_write {
    bool pending;
    char *db, *coll;     /* owned */
    mf_docvec_t docs;    /* owned */
    bson_t *merge_spec;  /* owned; NULL for $out */
} agg_write_t;

typedef struct agg_scan_ctx {
    mf_op_t *op;
    const bson_t *only_doc;   /* $collStats: the pipeline's source is this one document */
    const bson_value_t *hint; /* the command's hint, or NULL */
    agg_write_t *write;       /* where env->write_out records its work */
    int view_depth;           /* views being expanded (views on views) */
    struct agg_stream *stream; /* streaming source (env->pull), or NULL */
} agg_scan_ctx_t;

typedef struct agg_visit_adapter {
    mf_agg_visit_fn visit;
    void *arg;
} agg_visit_adapter_t;

static int
agg_adapter_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    agg_visit_adapter_t *a = arg;
    (void)rid;
    (void)d;
    return a->visit(a->arg, doc);
}

static int agg_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg,
                    mf_error_t *err);

/*
 * view_scan: the documents of view v: its pipeline run over its viewOn
 * source (itself possibly a view), then filtered by filter. Views are
 * expanded at most 20 deep (165 ViewDepthLimitExceeded), as in MongoDB.
 */
static int
view_scan(agg_scan_ctx_t *x, const mf_coll_t *v, const bson_t *filter, mf_agg_visit_fn visit, void *arg,
          mf_error_t *err)
{
    bson_iter_t it;
    const char *on = NULL;
    bson_value_t empty_arr;
    const bson_value_t *pv = NULL;
    bson_t empty;
    int rc = 0;

    if (x->view_depth >= 20)
        return mf_err_set(err, MF_E_ViewDepthLimitExceeded, "View depth too deep or view cycle detected; maximum depth is 20");
    if (bson_iter_init_find(&it, v->options, "viewOn") && BSON_ITER_HOLDS_UTF8(&it))
        on = bson_iter_utf8(&it, NULL);
    if (on == NULL)
        return 0;
    bson_init(&empty);
    if (bson_iter_init_find(&it, v->options, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it)) {
        pv = bson_iter_value(&it);
    } else {
        empty_arr.value_type = BSON_TYPE_ARRAY;
        empty_arr.value.v_doc.data = (uint8_t *)bson_get_data(&empty);
        empty_arr.value.v_doc.data_len = empty.len;
        pv = &empty_arr;
    }
    mf_pipeline_t *pl = mf_pipeline_new(pv, err);
    bson_destroy(&empty);
    if (pl == NULL)
        return -1;
    mf_matcher_t *m = mf_matcher_new(filter, err);
    if (m == NULL) {
        mf_pipeline_free(pl);
        return -1;
    }
    mf_agg_env_t env;
    memset(&env, 0, sizeof(env));
    env.scan = agg_scan;
    env.ctx = x;
    mf_docvec_t docs;
    mf_docvec_init(&docs);
    const bson_value_t *saved_hint = x->hint;
    x->hint = NULL;
    x->view_depth++;
    rc = mf_pipeline_run(pl, &env, on, &docs, err);
    x->view_depth--;
    x->hint = saved_hint;
    for (size_t i = 0; rc == 0 && i < docs.len; i++) {
        if (!mf_matcher_match(m, docs.docs[i], NULL))
            continue;
        int r = visit(arg, docs.docs[i]);
        if (r < 0)
            rc = -1;
        else if (r > 0)
            break;
    }
    mf_docvec_destroy(&docs);
    mf_matcher_free(m);
    mf_pipeline_free(pl);
    return rc;
}

/* env->scan: the catalog lock is already held (shared) by cmd_aggregate. */
static int
agg_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    if (x->only_doc != NULL) {
        int r = visit(arg, x->only_doc);
        return r < 0 ? -1 : 0;
    }
    mf_coll_t *c = mf_catalog_coll_find(x->op->eng->cat, x->op->db, coll);
    if (c == NULL)
        return 0;
    if (c->is_view)
        return view_scan(x, c, filter, visit, arg, err);
    mf_matcher_t *m = mf_matcher_new(filter, err);
    if (m == NULL)
        return -1;
    agg_visit_adapter_t a = {visit, arg};
    mf_plan_request_t req = {.filter = filter, .hint = x->hint};
    int rc = mf_exec_query(x->op->sess, c, &req, m, agg_adapter_visit, &a, NULL, err);
    mf_matcher_free(m);
    return rc;
}

/*
 * Streaming aggregation. A pipeline over a collection runs its pushed-down
 * prefix (mf_pipeline_pushdown: $match, an index-provided $sort, $skip,
 * $limit, $project) as the plan find would build, and pulls the rest through
 * mf_agg_stream. The state lives in the cursor (MF_CURSOR_EXT) between
 * getMores: the plan keeps its scan position (a WiredTiger cursor cannot
 * outlive the command), so each batch re-seeks where the last stopped.
 * op is rebound on every call; the catalog lock is held by the caller.
 */
typedef struct agg_stream {
    agg_scan_ctx_t sc;        /* env->ctx for pull and for $lookup scans (sc.stream points back here) */
    mf_pipeline_t *pl;        /* owned */
    mf_agg_stream_t *stream;  /* owned */
    mf_plan_t *plan;          /* owned: the pushed-down plan, with its position */
    mf_matcher_t *m;          /* owned: the pushed-down filter */
    int64_t skip_left, limit_left; /* pushed-down $skip / $limit still to apply (limit < 0: none) */
    const mf_projection_t *proj;   /* pushed-down $project (owned by pl), or NULL */
    char *db, *coll;          /* owned */
} agg_stream_t;

static void
agg_stream_free(void *arg)
{
    agg_stream_t *x = arg;
    if (x == NULL)
        return;
    mf_agg_stream_free(x->stream);
    mf_pipeline_free(x->pl);
    mf_plan_free(x->plan);
    mf_matcher_free(x->m);
    free(x->db);
    free(x->coll);
    free(x);
}

typedef struct agg_pull_ctx {
    agg_stream_t *x;
    mf_docvec_t *out;
    size_t max;
    mf_error_t *err;
} agg_pull_ctx_t;

static int
agg_pull_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    agg_pull_ctx_t *pc = arg;
    (void)rid;
    (void)d;
    if (pc->x->skip_left > 0) {
        pc->x->skip_left--;
        return 0;
    }
    if (pc->x->proj != NULL) {
        bson_t *o = bson_new();
        if (mf_projection_apply(pc->x->proj, doc, NULL, o, pc->err) != 0) {
            bson_destroy(o);
            return -1;
        }
        mf_docvec_push_steal(pc->out, o);
    } else {
        mf_docvec_push(pc->out, doc);
    }
    if (pc->x->limit_left > 0)
        pc->x->limit_left--;
    return pc->x->limit_left == 0 || pc->out->len >= pc->max ? 1 : 0;
}

/* env->pull: the next documents of the pushed-down plan (resumes its scan). */
static int
agg_pull(void *ctx, size_t max, mf_docvec_t *out, bool *eof, mf_error_t *err)
{
    agg_stream_t *x = ((agg_scan_ctx_t *)ctx)->stream;
    mf_coll_t *c = mf_catalog_coll_find(x->sc.op->eng->cat, x->db, x->coll);
    *eof = false;
    if (c == NULL || x->plan->done || x->limit_left == 0) {
        *eof = true;
        return 0;
    }
    agg_pull_ctx_t pc = {x, out, max, err};
    if (mf_exec_run(x->sc.op->sess, c, x->plan, x->m, agg_pull_visit, &pc, err) != 0)
        return -1;
    *eof = x->plan->done || x->limit_left == 0;
    return 0;
}

/*
 * agg_plan_prefix: plans pl's pushed-down prefix over c (may be NULL) as
 * find would: the leading $sort is pushed down only when the chosen plan
 * provides its order (else the pipeline's own spilling $sort runs it).
 * Sets *pd and *plan (owned by the caller). Catalog lock held. 0 or -1.
 */
static int
agg_plan_prefix(mf_op_t *op, const mf_coll_t *c, const mf_pipeline_t *pl, const bson_value_t *hint,
                mf_agg_pushdown_t *pd, mf_plan_t **plan)
{
    mf_pipeline_pushdown(pl, true, pd);
    for (int attempt = 0; attempt < 2; attempt++) {
        mf_plan_request_t req = {.filter = pd->filter, .sort = pd->sort, .hint = hint, .skip = pd->skip,
                                 .limit = pd->limit, .projection = pd->project_spec};
        if (mf_plan_build(c, &req, plan, &op->err) != 0)
            return -1;
        if (pd->sort == NULL || (*plan)->sort == NULL)
            return 0;
        mf_plan_free(*plan);
        *plan = NULL;
        mf_pipeline_pushdown(pl, false, pd);
    }
    return 0;
}

/* agg_stream_fill: the next batch of a streaming aggregation cursor (catalog lock held). */
static int
agg_stream_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted)
{
    agg_stream_t *x = cur->ext;
    mf_agg_env_t env;
    int64_t count = 0, bytes = 0;

    memset(&env, 0, sizeof env);
    x->sc.op = op;
    env.scan = agg_scan;
    env.pull = agg_pull;
    env.ctx = &x->sc;
    *exhausted = false;
    while (count < max && bytes < BATCH_BYTES_MAX) {
        bson_t *d;
        char key[16];
        if (mf_agg_stream_next(x->stream, &env, &d, &op->err) != 0)
            return -1;
        if (d == NULL) {
            *exhausted = true;
            break;
        }
        snprintf(key, sizeof(key), "%d", (int)count++);
        BSON_APPEND_DOCUMENT(arr, key, d);
        bytes += d->len;
        bson_destroy(d);
    }
    return 0;
}

/*
 * agg_stream_start: if pl can stream over collection name (a collection,
 * not a view; no $out/$merge), makes cur an MF_CURSOR_EXT cursor owning pl
 * and the plan, sets *started and returns 0. Otherwise leaves everything to
 * the materialising path. Catalog lock held. 0 or -1 with op->err.
 */
static int
agg_stream_start(mf_op_t *op, const char *name, mf_pipeline_t *pl, const bson_value_t *hint, bool allow_disk,
                 mf_cursor_t *cur, bool *started)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    mf_agg_pushdown_t pd;
    mf_plan_t *plan = NULL;

    *started = false;
    if ((c != NULL && c->is_view) || mf_pipeline_writes(pl) || mf_pipeline_is_collectionless(pl))
        return 0;
    if (agg_plan_prefix(op, c, pl, hint, &pd, &plan) != 0)
        return -1;
    mf_matcher_t *m = mf_matcher_new(pd.filter, &op->err);
    if (m == NULL) {
        mf_plan_free(plan);
        return -1;
    }
    agg_stream_t *x = mf_calloc(1, sizeof *x);
    x->sc.op = op;
    x->sc.stream = x;
    x->pl = pl;
    x->plan = plan;
    x->m = m;
    x->skip_left = pd.skip;
    x->limit_left = pd.limit > 0 ? pd.limit : -1;
    x->proj = pd.project;
    x->db = mf_strdup(op->db);
    x->coll = mf_strdup(name);
    mf_agg_limits_t lim = {.allow_disk = allow_disk,
                           .sort_bytes = mf_param_get(op->eng->params, "internalQueryMaxBlockingSortMemoryUsageBytes"),
                           .group_bytes = mf_param_get(op->eng->params, "internalDocumentSourceGroupMaxMemoryBytes"),
                           .tmp_dir = op->eng->tmp_dir};
    x->stream = mf_agg_stream_new(pl, pd.nstages, &lim);
    cur->kind = MF_CURSOR_EXT;
    cur->ext = x;
    cur->ext_free = agg_stream_free;
    *started = true;
    return 0;
}

static void
push_curop_row(void *arg, const bson_t *doc)
{
    mf_docvec_push((mf_docvec_t *)arg, doc);
}

/* env->current_op: the rows of $currentOp (the registry of operations in flight). */
static int
agg_current_op(void *ctx, const bson_t *spec, mf_docvec_t *out, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    (void)spec;
    (void)err;
    mf_curops_report_each(x->op->eng->curops, push_curop_row, out);
    return 0;
}

/* env->write_out: validates the target and records the write (stealing the documents). */
static int
agg_write_out(void *ctx, const char *db, const char *coll, mf_docvec_t *docs, const bson_t *merge_spec,
              mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    agg_write_t *w = x->write;
    const char *tdb = db ? db : x->op->db;

    if (mf_catalog_check_db_name(tdb, err) != 0 || mf_catalog_check_coll_name(tdb, coll, err) != 0)
        return -1;
    if (strncmp(coll, "system.", 7) == 0)
        return mf_err_set(err, MF_E_InvalidNamespace, "Invalid %s target namespace, %s.%s is not allowed",
                          merge_spec ? "$merge" : "$out", tdb, coll);
    w->pending = true;
    w->db = bson_strdup(tdb);
    w->coll = bson_strdup(coll);
    w->docs = *docs;
    mf_docvec_init(docs);
    w->merge_spec = merge_spec ? bson_copy(merge_spec) : NULL;
    return 0;
}

static void
agg_write_destroy(agg_write_t *w)
{
    bson_free(w->db);
    bson_free(w->coll);
    mf_docvec_destroy(&w->docs);
    if (w->merge_spec)
        bson_destroy(w->merge_spec);
}

typedef struct out_ctx {
    mf_sess_t *s;
    mf_coll_t *c;
    agg_write_t *w;
    const char *on[32];  /* $merge: the 'on' fields */
    int non;
    const char *when_matched, *when_not_matched;
    mf_op_t *op;
} out_ctx_t;

/* out_insert_item: inserts document i (with _id first, generated when absent). */
static int
out_insert_item(void *arg, size_t i, mf_error_t *err)
{
    out_ctx_t *x = arg;
    const bson_t *doc = x->w->docs.docs[i];
    bson_t fixed;
    int ret;

    if (id_is_first(doc))
        return mf_coll_insert(x->s, x->c, doc, NULL, err);
    doc_with_id_first(doc, &fixed);
    ret = mf_coll_insert(x->s, x->c, &fixed, NULL, err);
    bson_destroy(&fixed);
    return ret;
}

/* merge_find: the record of x->c matching doc on the 'on' fields; 0 found, MF_NOTFOUND, or -1 / MF_CONFLICT. */
typedef struct merge_find_ctx {
    int64_t rid;
    bool found;
} merge_find_ctx_t;

static int
merge_find_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    merge_find_ctx_t *f = arg;
    (void)doc;
    (void)d;
    f->rid = rid;
    f->found = true;
    return 1;
}

static int
merge_find(out_ctx_t *x, const bson_t *doc, int64_t *rid, mf_error_t *err)
{
    bson_t filter = BSON_INITIALIZER;
    bson_value_t v;
    int ret;

    for (int k = 0; k < x->non; k++) {
        if (!mf_path_get(doc, x->on[k], &v) || v.value_type == BSON_TYPE_NULL || v.value_type == BSON_TYPE_ARRAY ||
            v.value_type == BSON_TYPE_UNDEFINED) {
            bson_destroy(&filter);
            return mf_err_set(err, MF_E_Location51132,
                              "$merge write error: 'on' field '%s' cannot be missing, null, undefined or an array",
                              x->on[k]);
        }
        bson_append_value(&filter, x->on[k], -1, &v);
    }
    if (x->non == 1 && strcmp(x->on[0], "_id") == 0) {
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
    merge_find_ctx_t f = {0, false};
    ret = mf_exec_scan(x->s, x->c, &filter, m, 0, merge_find_visit, &f, NULL, err);
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
    const bson_t *doc = x->w->docs.docs[i];
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
        return out_insert_item(arg, i, err);
    }
    if (ret != 0)
        return ret;
    if (strcmp(x->when_matched, "keepExisting") == 0)
        return 0;
    if (strcmp(x->when_matched, "fail") == 0) {
        char *js = bson_as_relaxed_extended_json(doc, NULL);
        mf_err_set(err, MF_E_DuplicateKey, "E11000 duplicate key error collection: %s.%s: $merge found a matching "
                   "document for %s", x->c->db, x->c->name, js ? js : "");
        bson_free(js);
        return -1;
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
    if (strcmp(x->when_matched, "replace") == 0) {
        bson_iter_init(&it, doc);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_value(&neu, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
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
    else if (!(neu.len == old.len && memcmp(bson_get_data(&neu), bson_get_data(&old), neu.len) == 0))
        ret = mf_coll_replace(x->s, x->c, rid, &old, &neu, err);
    else
        ret = 0;
    bson_destroy(&old);
    bson_destroy(&neu);
    return ret;
}

/* run_out_batches: runs fn over every recorded document; 0, or -1 with err. */
static int
run_out_batches(mf_op_t *op, out_ctx_t *x, mf_batch_item_fn fn, mf_error_t *err)
{
    size_t i = 0;
    int r = mf_batch_run(op->sess, &i, x->w->docs.len, INSERT_CHUNK, want_durable(op), fn, NULL, x, err);
    return r == 0 ? 0 : -1;
}

/*
 * agg_do_out: $out. Under the catalog write lock (never taken while the read
 * lock is held): creates a temporary collection with the target's options
 * and secondary indexes, inserts the documents, then drops the target and
 * renames the temporary collection over it. On failure the temporary
 * collection is dropped and the target is left as it was.
 */
static int
agg_do_out(mf_op_t *op, agg_write_t *w, mf_error_t *err)
{
    mf_catalog_t *cat = op->eng->cat;
    char tmp[64], hex[25];
    bson_oid_t oid;
    mf_coll_t *target, *t = NULL;
    int rc = -1;

    for (size_t i = 0; i < w->docs.len; i++)
        if (mf_check_doc_for_storage(w->docs.docs[i], err) != 0)
            return -1;
    bson_oid_init(&oid, NULL);
    bson_oid_to_string(&oid, hex);
    snprintf(tmp, sizeof tmp, "tmp.agg_out.%s", hex);
    mf_catalog_wrlock(cat);
    target = mf_catalog_coll_find(cat, w->db, w->coll);
    if (mf_catalog_coll_create(cat, w->db, tmp, target ? target->options : NULL, &t, err) != 0)
        goto out;
    for (int k = 0; target && k < target->nindexes; k++) {
        if (target->indexes[k]->building)
            continue;
        if (target->indexes[k]->is_id)
            continue;
        if (mf_catalog_index_add(cat, t, target->indexes[k]->spec, err) != 0)
            goto drop_tmp;
    }
    {
        out_ctx_t x;
        memset(&x, 0, sizeof x);
        x.s = op->sess;
        x.c = t;
        x.w = w;
        x.op = op;
        if (run_out_batches(op, &x, out_insert_item, err) != 0)
            goto drop_tmp;
    }
    /* The target's drop and the rename are one catalog transaction: a failure keeps the old target. */
    if (mf_catalog_coll_rename_replace(cat, t, target, w->db, w->coll, err) != 0)
        goto drop_tmp;
    rc = 0;
    goto out;
drop_tmp: {
    mf_error_t e2;
    mf_err_clear(&e2);
    if (mf_catalog_coll_drop(cat, t, &e2) != 0)
        mf_log(MF_LOG_WARN, "COMMAND", "$out: could not drop %s.%s: %s", w->db, tmp, e2.msg);
}
out:
    mf_catalog_unlock(cat);
    return rc;
}

/* agg_do_merge: $merge. Creates the target if needed (write lock), then writes under the read lock. */
static int
agg_do_merge(mf_op_t *op, agg_write_t *w, mf_error_t *err)
{
    mf_catalog_t *cat = op->eng->cat;
    out_ctx_t x;
    bson_iter_t it, ai;
    mf_coll_t *c;
    int rc;

    memset(&x, 0, sizeof x);
    x.s = op->sess;
    x.w = w;
    x.op = op;
    x.when_matched = "merge";
    x.when_not_matched = "insert";
    if (bson_iter_init_find(&it, w->merge_spec, "on") && bson_iter_recurse(&it, &ai))
        while (bson_iter_next(&ai) && x.non < 32)
            x.on[x.non++] = bson_iter_utf8(&ai, NULL);
    if (bson_iter_init_find(&it, w->merge_spec, "whenMatched"))
        x.when_matched = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, w->merge_spec, "whenNotMatched"))
        x.when_not_matched = bson_iter_utf8(&it, NULL);
    if (x.non == 0) {
        x.on[0] = "_id";
        x.non = 1;
    }
    for (size_t i = 0; i < w->docs.len; i++)
        if (mf_check_doc_for_storage(w->docs.docs[i], err) != 0)
            return -1;

    mf_catalog_wrlock(cat);
    if (mf_catalog_coll_find(cat, w->db, w->coll) == NULL &&
        mf_catalog_coll_create(cat, w->db, w->coll, NULL, NULL, err) != 0) {
        mf_catalog_unlock(cat);
        return -1;
    }
    mf_catalog_unlock(cat);

    mf_catalog_rdlock(cat);
    c = mf_catalog_coll_find(cat, w->db, w->coll);
    if (c == NULL) {
        mf_catalog_unlock(cat);
        return mf_err_set(err, MF_E_NamespaceNotFound, "collection %s.%s was dropped during $merge", w->db, w->coll);
    }
    x.c = c;
    rc = run_out_batches(op, &x, merge_item, err);
    mf_catalog_unlock(cat);
    return rc;
}

/* agg_write_perform: performs a recorded $out / $merge. No catalog lock is held on entry. */
static int
agg_write_perform(mf_op_t *op, agg_write_t *w)
{
    if (!w->pending)
        return 0;
    return w->merge_spec ? agg_do_merge(op, w, &op->err) : agg_do_out(op, w, &op->err);
}

static int explain_aggregate(mf_op_t *op, const bson_t *cmd, const char *verbosity);

/*
 * view_run: runs stages (an array document; the stages a find, count or
 * distinct becomes) over view `name`, appending the results to out. The
 * caller holds the catalog lock shared. Returns 0 or -1 with op->err.
 */
static int
view_run(mf_op_t *op, const char *name, const bson_t *stages, mf_docvec_t *out)
{
    bson_value_t pv;
    pv.value_type = BSON_TYPE_ARRAY;
    pv.value.v_doc.data = (uint8_t *)bson_get_data(stages);
    pv.value.v_doc.data_len = stages->len;
    mf_pipeline_t *pl = mf_pipeline_new(&pv, &op->err);
    if (pl == NULL)
        return -1;
    agg_scan_ctx_t sc = {op, NULL, NULL, NULL, 0};
    mf_agg_env_t env;
    memset(&env, 0, sizeof(env));
    env.scan = agg_scan;
    env.ctx = &sc;
    int rc = mf_pipeline_run(pl, &env, name, out, &op->err);
    mf_pipeline_free(pl);
    return rc;
}

/* Appends {<stage>: doc} as the next element of the stages array. */
static void
stage_doc(bson_t *stages, int *n, const char *stage, const bson_t *doc)
{
    char key[16];
    bson_t st;
    snprintf(key, sizeof(key), "%d", (*n)++);
    BSON_APPEND_DOCUMENT_BEGIN(stages, key, &st);
    BSON_APPEND_DOCUMENT(&st, stage, doc);
    bson_append_document_end(stages, &st);
}

static void
stage_int(bson_t *stages, int *n, const char *stage, int64_t v)
{
    char key[16];
    bson_t st;
    snprintf(key, sizeof(key), "%d", (*n)++);
    BSON_APPEND_DOCUMENT_BEGIN(stages, key, &st);
    BSON_APPEND_INT64(&st, stage, v);
    bson_append_document_end(stages, &st);
}

static int
cmd_aggregate(mf_op_t *op)
{
    bson_iter_t it, ci;
    const char *name = NULL;
    int64_t batch = FIRST_BATCH_DEFAULT;
    mf_pipeline_t *pl;
    bool has_cursor = false, explain = false, present;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        if (mf_op_coll_name(op, &name) != 0)
            return -1;
    } else if (!mf_value_is_number(bson_iter_value(&it)) || mf_value_as_double(bson_iter_value(&it)) != 1) {
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "Invalid command format: the 'aggregate' field must specify a collection name or 1");
    }
    if (!bson_iter_init_find(&it, op->cmd, "pipeline"))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'aggregate.pipeline' is missing but a required field");
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'",
                          mf_type_name(bson_iter_type(&it)));
    if (mf_op_get_bool(op, "explain", &explain, &present) != 0)
        return -1;
    if (bson_iter_init_find(&ci, op->cmd, "cursor")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&ci))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.cursor' is the wrong type '%s', expected type 'object'",
                              mf_type_name(bson_iter_type(&ci)));
        has_cursor = true;
        bson_iter_t bi;
        if (bson_iter_recurse(&ci, &bi) && bson_iter_find(&bi, "batchSize")) {
            if (!mf_value_is_number(bson_iter_value(&bi)))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.cursor.batchSize' is the wrong type");
            batch = (int64_t)mf_value_as_double(bson_iter_value(&bi));
            if (batch < 0)
                return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'batchSize' value must be >= 0, actual value '%lld'",
                                  (long long)batch);
        }
    }
    bool allow_disk = mf_param_get(op->eng->params, "allowDiskUseByDefault") != 0;
    if (bson_iter_init_find(&ci, op->cmd, "allowDiskUse")) {
        if (!BSON_ITER_HOLDS_BOOL(&ci))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.allowDiskUse' is the wrong type '%s', expected type 'bool'",
                              mf_type_name(bson_iter_type(&ci)));
        allow_disk = bson_iter_bool(&ci);
    }
    if (!has_cursor && !explain)
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "The 'cursor' option is required, except for aggregate with the explain argument");
    if (explain && name != NULL)
        return explain_aggregate(op, op->cmd, "queryPlanner");
    const bson_value_t *hint = NULL;
    bson_value_t hint_store;
    if (get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    /*
     * A leading $collStats stage makes the collection's statistics document
     * the pipeline's only input (mongosh's db.c.stats() sends it).
     */
    bson_t rest, stats_doc;
    bool collstats = false;
    const bson_value_t *pv = bson_iter_value(&it);
    bson_value_t rest_v;
    if (name != NULL) {
        bson_t arr;
        bson_iter_t si, first;
        bson_init_static(&arr, pv->value.v_doc.data, pv->value.v_doc.data_len);
        if (bson_iter_init(&si, &arr) && bson_iter_next(&si) && BSON_ITER_HOLDS_DOCUMENT(&si) &&
            bson_iter_recurse(&si, &first) && bson_iter_next(&first) &&
            strcmp(bson_iter_key(&first), "$collStats") == 0) {
            int k = 0;
            char key[16];
            if (mf_cmd_coll_stats_doc(op, name, &stats_doc) != 0)
                return -1;
            collstats = true;
            bson_init(&rest);
            while (bson_iter_next(&si)) {
                snprintf(key, sizeof(key), "%d", k++);
                bson_append_value(&rest, key, -1, bson_iter_value(&si));
            }
            rest_v.value_type = BSON_TYPE_ARRAY;
            rest_v.value.v_doc.data = (uint8_t *)bson_get_data(&rest);
            rest_v.value.v_doc.data_len = rest.len;
            pv = &rest_v;
        }
    }
    pl = mf_pipeline_new(pv, &op->err);
    if (collstats)
        bson_destroy(&rest);
    if (pl == NULL) {
        if (collstats)
            bson_destroy(&stats_doc);
        return -1;
    }
    if (name == NULL && !mf_pipeline_is_collectionless(pl)) {
        mf_pipeline_free(pl);
        return mf_err_set(&op->err, MF_E_InvalidNamespace,
                          "{aggregate: 1} is not valid for this pipeline; a collection is required.");
    }
    agg_write_t aw;
    memset(&aw, 0, sizeof aw);
    mf_docvec_init(&aw.docs);
    agg_scan_ctx_t sc = {op, collstats ? &stats_doc : NULL, hint, &aw, 0};
    mf_agg_env_t env;
    memset(&env, 0, sizeof(env));
    env.scan = agg_scan;
    env.ctx = &sc;
    env.write_out = agg_write_out;
    if (name == NULL && strcmp(op->db, "admin") == 0)
        env.current_op = agg_current_op;
    if (name == NULL)
        name = "$cmd.aggregate";
    mf_cursor_t *cur = mf_cursor_new(MF_CURSOR_DOCS, op->db, name);
    bson_t arr;
    bool exhausted, streaming = false;
    int64_t id = 0;
    int rc = 0;
    bson_init(&arr);
    mf_catalog_rdlock(op->eng->cat);
    if (!collstats && strcmp(name, "$cmd.aggregate") != 0)
        rc = agg_stream_start(op, name, pl, hint, allow_disk, cur, &streaming);
    if (rc == 0 && streaming) {
        pl = NULL; /* owned by the cursor now */
        rc = cursor_fill(op, cur, batch, &arr, &exhausted); /* the first batch, under the same lock */
    } else if (rc == 0) {
        rc = mf_pipeline_run(pl, &env, name, &cur->docs, &op->err);
    }
    mf_catalog_unlock(op->eng->cat);
    mf_pipeline_free(pl);
    if (collstats)
        bson_destroy(&stats_doc);
    if (rc == 0)
        rc = agg_write_perform(op, &aw); /* $out / $merge, outside the read lock */
    agg_write_destroy(&aw);
    if (rc != 0) {
        bson_destroy(&arr);
        mf_cursor_free(cur);
        return -1;
    }
    if (!streaming)
        rc = cursor_fill(op, cur, batch, &arr, &exhausted);
    if (!exhausted) {
        id = mf_cursors_register(op->eng->cursors, cur);
        mf_cursors_checkin(op->eng->cursors, cur);
    } else {
        mf_cursor_free(cur);
    }
    append_cursor_reply(op, "firstBatch", &arr, id, name);
    bson_destroy(&arr);
    return rc;
}

/* ---------- explain ---------- */

/*
 * explain builds the same plan the command would run (mf_plan_build) and,
 * for executionStats / allPlansExecution, runs its access path with a
 * counting visitor that plays the stages above it (SKIP, LIMIT, SORT's
 * limit), then fills their counters. Nothing is written: explain of a
 * delete or update only selects the documents it would change.
 */
typedef struct explain_ctx {
    int64_t skip_left, limit, n;
    bool sorted;
} explain_ctx_t;

static int
explain_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    explain_ctx_t *x = arg;
    (void)rid;
    (void)doc;
    (void)d;
    if (x->sorted)
        return 0;
    if (x->skip_left > 0) {
        x->skip_left--;
        return 0;
    }
    x->n++;
    return x->limit > 0 && x->n >= x->limit ? 1 : 0;
}

/* Fills the counters of the stages above the access path from what it returned. */
static void
explain_propagate(mf_plan_t *p, int64_t limit_one)
{
    mf_stage_t *chain[32];
    int n = 0;
    for (mf_stage_t *s = p->root; s && n < 32; s = s->child)
        chain[n++] = s;
    int64_t cnt = p->fetch ? p->fetch->n_returned : p->leaf->n_returned;
    for (int i = n - 1; i >= 0; i--) {
        mf_stage_t *s = chain[i];
        if (s == p->leaf || s == p->fetch)
            continue;
        switch (s->kind) {
        case MF_ST_SORT:
            s->works = cnt + 1;
            if (s->amount > 0 && cnt > s->amount)
                cnt = s->amount;
            break;
        case MF_ST_SKIP:
            s->works = cnt + 1;
            cnt = cnt > s->amount ? cnt - s->amount : 0;
            break;
        case MF_ST_LIMIT:
            if (cnt > s->amount)
                cnt = s->amount;
            break;
        case MF_ST_COUNT:
        case MF_ST_DELETE:
        case MF_ST_BATCHED_DELETE:
        case MF_ST_UPDATE:
            if (limit_one && cnt > 1)
                cnt = 1;
            s->n_returned = 0;
            s->works = cnt + 1;
            continue;
        default:
            break;
        }
        s->n_returned = cnt;
    }
}

static bool
sub_doc(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

static int64_t
sub_int(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !mf_value_is_number(bson_iter_value(&it)))
        return 0;
    return (int64_t)mf_value_as_double(bson_iter_value(&it));
}

static const bson_value_t *
sub_hint(const bson_t *doc, bson_value_t *store)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "hint") || (!BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it)))
        return NULL;
    *store = *bson_iter_value(&it);
    return store;
}

/*
 * run_explain: plans req over op->db.coll, executes it when verbosity asks,
 * and appends the explain reply. stages (array, may be NULL) are the
 * aggregation stages after the leading $match.
 */
static int
run_explain(mf_op_t *op, const char *coll, const mf_plan_request_t *req, int64_t limit_one, const char *verbosity,
            const bson_t *inner, const bson_t *stages)
{
    bool exec = strcmp(verbosity, "queryPlanner") != 0;
    if (exec && strcmp(verbosity, "executionStats") != 0 && strcmp(verbosity, "allPlansExecution") != 0)
        return mf_err_set(&op->err, MF_E_BadValue,
                          "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}");
    mf_matcher_t *m = mf_matcher_new(req->filter, &op->err);
    if (m == NULL)
        return -1;
    mf_plan_t *p = NULL;
    int64_t t0 = mf_mono_ms();
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    int rc = mf_plan_build(c, req, &p, &op->err);
    if (rc == 0 && exec) {
        explain_ctx_t x = {req->skip, req->limit > 0 ? req->limit : limit_one, 0, p->sort != NULL};
        rc = mf_exec_run(op->sess, c, p, m, explain_visit, &x, &op->err);
        explain_propagate(p, limit_one);
    }
    mf_catalog_unlock(op->eng->cat);
    mf_matcher_free(m);
    if (rc != 0) {
        mf_plan_free(p);
        return -1;
    }
    int64_t elapsed = mf_mono_ms() - t0;
    char ns[512];
    bson_t qp, wp, es, st, si, cmdcopy, empty;
    snprintf(ns, sizeof(ns), "%s.%s", op->db, coll);
    bson_init(&empty);

    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "queryPlanner", &qp);
    BSON_APPEND_UTF8(&qp, "namespace", ns);
    BSON_APPEND_DOCUMENT(&qp, "parsedQuery", req->filter ? req->filter : &empty);
    BSON_APPEND_BOOL(&qp, "indexFilterSet", false);
    BSON_APPEND_BOOL(&qp, "maxIndexedOrSolutionsReached", false);
    BSON_APPEND_BOOL(&qp, "maxIndexedAndSolutionsReached", false);
    BSON_APPEND_BOOL(&qp, "maxScansToExplodeReached", false);
    BSON_APPEND_BOOL(&qp, "prunedSimilarIndexes", false);
    BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
    BSON_APPEND_BOOL(&wp, "isCached", false);
    mf_plan_explain(p, false, &wp);
    bson_append_document_end(&qp, &wp);
    BSON_APPEND_ARRAY(&qp, "rejectedPlans", &empty);
    bson_append_document_end(op->reply, &qp);
    /* An aggregation with stages left shows the plan's statistics under its $cursor stage, as MongoDB does. */
    bool es_in_cursor = stages != NULL && !bson_empty(stages);
    bson_t es_holder;
    bson_init(&es_holder);
    if (exec) {
        int64_t nret = p->root->n_returned;
        if (p->root->kind == MF_ST_COUNT || p->root->kind == MF_ST_DELETE || p->root->kind == MF_ST_BATCHED_DELETE ||
            p->root->kind == MF_ST_UPDATE)
            nret = 0;
        BSON_APPEND_DOCUMENT_BEGIN(es_in_cursor ? &es_holder : op->reply, "executionStats", &es);
        BSON_APPEND_BOOL(&es, "executionSuccess", true);
        BSON_APPEND_INT32(&es, "nReturned", (int32_t)nret);
        BSON_APPEND_INT32(&es, "executionTimeMillis", (int32_t)elapsed);
        BSON_APPEND_INT32(&es, "totalKeysExamined", (int32_t)p->leaf->keys_examined);
        BSON_APPEND_INT32(&es, "totalDocsExamined",
                          (int32_t)(p->fetch ? p->fetch->docs_examined : p->leaf->docs_examined));
        BSON_APPEND_DOCUMENT_BEGIN(&es, "executionStages", &st);
        mf_plan_explain(p, true, &st);
        bson_append_document_end(&es, &st);
        if (strcmp(verbosity, "allPlansExecution") == 0)
            BSON_APPEND_ARRAY(&es, "allPlansExecution", &empty);
        bson_append_document_end(es_in_cursor ? &es_holder : op->reply, &es);
    }
    if (stages != NULL && !bson_empty(stages)) {
        bson_t arr, first, cd;
        bson_iter_t it;
        int k = 1;
        BSON_APPEND_ARRAY_BEGIN(op->reply, "stages", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &first);
        BSON_APPEND_DOCUMENT_BEGIN(&first, "$cursor", &cd);
        BSON_APPEND_DOCUMENT_BEGIN(&cd, "queryPlanner", &qp);
        BSON_APPEND_UTF8(&qp, "namespace", ns);
        BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
        mf_plan_explain(p, false, &wp);
        bson_append_document_end(&qp, &wp);
        BSON_APPEND_ARRAY(&qp, "rejectedPlans", &empty);
        bson_append_document_end(&cd, &qp);
        bson_iter_t esi;
        if (bson_iter_init_find(&esi, &es_holder, "executionStats"))
            bson_append_value(&cd, "executionStats", -1, bson_iter_value(&esi));
        bson_append_document_end(&first, &cd);
        bson_append_document_end(&arr, &first);
        bson_iter_init(&it, stages);
        while (bson_iter_next(&it)) {
            char key[16];
            snprintf(key, sizeof(key), "%d", k++);
            bson_append_value(&arr, key, -1, bson_iter_value(&it));
        }
        bson_append_array_end(op->reply, &arr);
    }
    bson_destroy(&es_holder);
    bson_init(&cmdcopy);
    {
        bson_iter_t it;
        bson_iter_init(&it, inner);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "explain") != 0 && strcmp(bson_iter_key(&it), "$db") != 0)
                bson_append_value(&cmdcopy, bson_iter_key(&it), -1, bson_iter_value(&it));
        }
        BSON_APPEND_UTF8(&cmdcopy, "$db", op->db);
    }
    BSON_APPEND_DOCUMENT(op->reply, "command", &cmdcopy);
    bson_destroy(&cmdcopy);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "serverInfo", &si);
    {
        char host[256];
        snprintf(host, sizeof(host), "%s", op->eng->host);
        char *colon = strrchr(host, ':');
        if (colon)
            *colon = '\0';
        BSON_APPEND_UTF8(&si, "host", host);
    }
    BSON_APPEND_INT32(&si, "port", op->eng->port);
    BSON_APPEND_UTF8(&si, "version", MF_VERSION);
    BSON_APPEND_UTF8(&si, "gitVersion", "mayfly");
    bson_append_document_end(op->reply, &si);
    BSON_APPEND_UTF8(op->reply, "explainVersion", "1");
    bson_destroy(&empty);
    mf_plan_free(p);
    return 0;
}

static int
explain_aggregate(mf_op_t *op, const bson_t *cmd, const char *verbosity)
{
    bson_iter_t it, pi;
    bson_t filter, rest;
    bson_value_t hint_store;
    bool has_filter = false;
    int k = 0;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "explain of {aggregate: 1} is not supported");
    const char *coll = bson_iter_utf8(&it, NULL);
    if (!bson_iter_init_find(&it, cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'aggregate.pipeline' is missing but a required field");
    /*
     * Validate the whole pipeline as aggregate would, and push down the
     * same prefix the streaming run pushes down (agg_plan_prefix): the
     * planner's tree goes under $cursor, the remaining stages follow it.
     */
    mf_pipeline_t *pl = mf_pipeline_new(bson_iter_value(&it), &op->err);
    if (pl == NULL)
        return -1;
    mf_agg_pushdown_t pd;
    mf_plan_t *probe = NULL;
    bool streams = !mf_pipeline_writes(pl);
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    streams = streams && (c == NULL || !c->is_view);
    int prc = streams ? agg_plan_prefix(op, c, pl, sub_hint(cmd, &hint_store), &pd, &probe) : 0;
    mf_catalog_unlock(op->eng->cat);
    mf_plan_free(probe);
    if (prc != 0) {
        mf_pipeline_free(pl);
        return -1;
    }
    if (!streams) {
        /* Materialised ($out / $merge, views): the leading $match is still the scan's filter. */
        memset(&pd, 0, sizeof pd);
        pd.filter = mf_pipeline_first_match(pl);
        pd.nstages = pd.filter != NULL ? 1 : 0;
    }
    if (pd.filter != NULL) {
        bson_init_static(&filter, bson_get_data(pd.filter), pd.filter->len);
        has_filter = true;
    }
    bson_t sort;
    if (pd.sort != NULL)
        bson_init_static(&sort, bson_get_data(pd.sort), pd.sort->len);
    bson_init(&rest);
    bson_iter_recurse(&it, &pi);
    for (size_t i = 0; bson_iter_next(&pi); i++) {
        char key[16];
        if (i < pd.nstages)
            continue;
        snprintf(key, sizeof(key), "%d", k++);
        bson_append_value(&rest, key, -1, bson_iter_value(&pi));
    }
    bson_t proj;
    if (pd.project_spec != NULL)
        bson_init_static(&proj, bson_get_data(pd.project_spec), pd.project_spec->len);
    mf_plan_request_t req = {.filter = has_filter ? &filter : NULL, .sort = pd.sort ? &sort : NULL,
                             .skip = pd.skip, .limit = pd.limit, .hint = sub_hint(cmd, &hint_store),
                             .projection = pd.project_spec ? &proj : NULL};
    int rc = run_explain(op, coll, &req, 0, verbosity, cmd, &rest);
    bson_destroy(&rest);
    mf_pipeline_free(pl);
    return rc;
}

static int
cmd_explain(mf_op_t *op)
{
    bson_t inner, filter, sort, proj, stmt;
    bson_value_t hint_store;
    bson_iter_t it;
    const char *verbosity = "allPlansExecution";
    bool present;

    if (!sub_doc(op->cmd, "explain", &inner))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'explain.explain' is the wrong type, expected type 'object'");
    if (mf_op_get_string(op, "verbosity", &verbosity, &present) != 0)
        return -1;
    if (!present)
        verbosity = "allPlansExecution";
    if (!bson_iter_init(&it, &inner) || !bson_iter_next(&it))
        return mf_err_set(&op->err, MF_E_FailedToParse, "explain command requires a nested object");
    const char *kind = bson_iter_key(&it);
    if (strcmp(kind, "aggregate") == 0)
        return explain_aggregate(op, &inner, verbosity);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "collection name has invalid type %s",
                          mf_type_name(bson_iter_type(&it)));
    const char *coll = bson_iter_utf8(&it, NULL);
    mf_plan_request_t req = {0};
    int64_t limit_one = 0;
    if (strcmp(kind, "find") == 0) {
        req.filter = sub_doc(&inner, "filter", &filter) ? &filter : NULL;
        req.sort = sub_doc(&inner, "sort", &sort) ? &sort : NULL;
        req.projection = sub_doc(&inner, "projection", &proj) ? &proj : NULL;
        req.skip = sub_int(&inner, "skip");
        req.limit = sub_int(&inner, "limit");
        if (req.limit < 0)
            req.limit = -req.limit;
        req.hint = sub_hint(&inner, &hint_store);
    } else if (strcmp(kind, "count") == 0) {
        req.filter = sub_doc(&inner, "query", &filter) ? &filter : NULL;
        req.skip = sub_int(&inner, "skip");
        req.limit = sub_int(&inner, "limit");
        if (req.limit < 0)
            req.limit = -req.limit;
        req.hint = sub_hint(&inner, &hint_store);
        req.root = MF_PLAN_ROOT_COUNT;
    } else if (strcmp(kind, "distinct") == 0) {
        req.filter = sub_doc(&inner, "query", &filter) ? &filter : NULL;
        req.hint = sub_hint(&inner, &hint_store);
    } else if (strcmp(kind, "delete") == 0 || strcmp(kind, "update") == 0) {
        bool del = kind[0] == 'd';
        bson_t arr;
        bson_iter_t ai;
        const uint8_t *adata;
        uint32_t alen;
        bool ok = bson_iter_init_find(&ai, &inner, del ? "deletes" : "updates") && BSON_ITER_HOLDS_ARRAY(&ai);
        if (ok) {
            bson_iter_array(&ai, &alen, &adata);
            ok = bson_init_static(&arr, adata, alen);
        }
        if (!ok || !bson_iter_init(&it, &arr) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_err_set(&op->err, MF_E_Location40414, "BSON field '%s.%s' is missing but a required field", kind,
                              del ? "deletes" : "updates");
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&stmt, data, len))
            return mf_err_set(&op->err, MF_E_InvalidBSON, "invalid statement");
        req.filter = sub_doc(&stmt, "q", &filter) ? &filter : NULL;
        req.hint = sub_hint(&stmt, &hint_store);
        if (del) {
            bool one = sub_int(&stmt, "limit") != 0;
            req.root = one ? MF_PLAN_ROOT_DELETE : MF_PLAN_ROOT_BATCHED_DELETE;
            limit_one = one ? 1 : 0;
        } else {
            bson_iter_t mi;
            bool multi = bson_iter_init_find(&mi, &stmt, "multi") && bson_iter_as_bool(&mi);
            req.root = MF_PLAN_ROOT_UPDATE;
            limit_one = multi ? 0 : 1;
        }
    } else if (strcmp(kind, "findAndModify") == 0 || strcmp(kind, "findandmodify") == 0) {
        bson_iter_t ri;
        bool remove = bson_iter_init_find(&ri, &inner, "remove") && bson_iter_as_bool(&ri);
        req.filter = sub_doc(&inner, "query", &filter) ? &filter : NULL;
        req.sort = sub_doc(&inner, "sort", &sort) ? &sort : NULL;
        req.hint = sub_hint(&inner, &hint_store);
        req.root = remove ? MF_PLAN_ROOT_DELETE : MF_PLAN_ROOT_UPDATE;
        limit_one = 1;
    } else {
        return mf_err_set(&op->err, MF_E_CommandNotFound, "Explain failed due to unknown command: %s", kind);
    }
    return run_explain(op, coll, &req, limit_one, verbosity, &inner, NULL);
}

/* Each command's own fields, as MongoDB 8.0's IDL lists them. */
static const char *const insert_fields[] = {"documents", "ordered", "bypassDocumentValidation", NULL};
static const char *const find_fields[] = {"filter", "projection", "sort", "hint", "skip", "limit", "batchSize",
                                          "singleBatch", "max", "min", "returnKey", "showRecordId", "tailable",
                                          "oplogReplay", "noCursorTimeout", "awaitData", "allowPartialResults",
                                          "collation", "allowDiskUse", "let", "ntoreturn", NULL};
static const char *const getmore_fields[] = {"collection", "batchSize", "lastKnownCommittedOpTime", NULL};
static const char *const killcursors_fields[] = {"cursors", NULL};
static const char *const update_fields[] = {"updates", "ordered", "bypassDocumentValidation", "let", NULL};
static const char *const delete_fields[] = {"deletes", "ordered", "let", NULL};
static const char *const fam_fields[] = {"query", "sort", "remove", "update", "new", "fields", "upsert",
                                         "bypassDocumentValidation", "collation", "arrayFilters", "hint", "let",
                                         NULL};
static const char *const count_fields[] = {"query", "limit", "skip", "hint", "collation", "fields", NULL};
static const char *const distinct_fields[] = {"key", "query", "collation", "hint", NULL};
static const char *const aggregate_fields[] = {"pipeline", "explain", "allowDiskUse", "cursor",
                                               "bypassDocumentValidation", "collation", "hint", "let",
                                               "exchange", "fromMongos", "needsMerge", "collectionUUID", NULL};

const mf_cmd_def_t mf_cmds_crud[] = {
    {"insert", cmd_insert, MF_CMD_WRITE, insert_fields},
    {"find", cmd_find, 0, find_fields},
    {"getMore", cmd_get_more, 0, getmore_fields},
    {"killCursors", cmd_kill_cursors, 0, killcursors_fields},
    {"update", cmd_update, MF_CMD_WRITE, update_fields},
    {"delete", cmd_delete, MF_CMD_WRITE, delete_fields},
    {"findAndModify", cmd_find_and_modify, 0, fam_fields},
    {"findandmodify", cmd_find_and_modify, 0, fam_fields},
    {"count", cmd_count, 0, count_fields},
    {"distinct", cmd_distinct, 0, distinct_fields},
    {"aggregate", cmd_aggregate, 0, aggregate_fields},
    {"explain", cmd_explain, 0, NULL},
    {NULL, NULL, 0, NULL},
};
