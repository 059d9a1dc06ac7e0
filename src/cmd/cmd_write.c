/*
 * cmd_write.c: insert, update, delete and findAndModify (see cmd_crud.c for
 * how writes run: record ids first, then chunked transactions with
 * per-document writeErrors).
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
#include "cmd/crud.h"

/* ---------- statement checks (update, delete) ---------- */

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
    if (mf_doc_id_is_first(doc)) {
        if (ctx->validate && mf_coll_validate(ctx->c, doc, NULL, err) != 0)
            return -1;
        return mf_coll_insert(ctx->s, ctx->c, doc, NULL, err);
    }
    mf_doc_with_id_first(doc, &fixed);
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

int
mf_cmd_insert(mf_op_t *op)
{
    const char *name;
    bson_t *docs;
    size_t ndocs;
    bool ordered;
    mf_coll_t *c;

    if (mf_op_coll_name(op, &name) != 0 || mf_crud_get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "documents", false, &docs, &ndocs) != 0)
        return -1;
    if (mf_crud_check_batch_size(op, ndocs) != 0) {
        free(docs);
        return -1;
    }
    if (mf_crud_coll_acquire(op, name, true, &c) != 0) {
        mf_catalog_unlock(op->eng->cat);
        free(docs);
        return -1;
    }
    if (c->is_view) {
        mf_crud_view_write_error(&op->err, c);
        mf_catalog_unlock(op->eng->cat);
        free(docs);
        return -1;
    }
    insert_ctx_t ctx = {op->sess, c, docs, ndocs, 0, !mf_crud_bypass_validation(op)};
    bson_t errs;
    int nerr = 0, rc = 0;
    bool durable = mf_crud_want_durable(op);
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
        mf_crud_append_write_error(&errs, &nerr, i, &e);
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
    mf_doc_with_id_first(&out, &fixed);
    bson_destroy(&out);
    if (mf_check_doc_for_storage(&fixed, &op->err) != 0 ||
        (!mf_crud_bypass_validation(op) && mf_coll_validate(c, &fixed, NULL, &op->err) != 0)) {
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
    if (mf_crud_coll_acquire(op, name, upsert, &c) != 0) {
        *e = op->err;
        op->err = saved;
        goto out_unlock;
    }
    if (c != NULL && c->is_view) {
        mf_crud_view_write_error(e, c);
        goto out_unlock;
    }
    if (c != NULL) {
        mf_plan_request_t req = {.filter = &q, .hint = hint, .root = MF_PLAN_ROOT_UPDATE};
        rv.max = multi ? 0 : 1;
        if (mf_exec_query(op->sess, c, &req, m, rid_visit, &rv, NULL, e) != 0)
            goto out_unlock;
        upd_ctx_t x = {op->sess, c, m, u, rv.v, mf_calloc(rv.n + 1, 1), 0, 0, !mf_crud_bypass_validation(op)};
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

int
mf_cmd_update(mf_op_t *op)
{
    const char *name;
    bson_t *stmts, errs, ups;
    size_t nstmts;
    bool ordered, durable = mf_crud_want_durable(op);
    int64_t n_total = 0, nmod_total = 0;
    int nerr = 0, nups = 0;

    if (mf_op_coll_name(op, &name) != 0 || mf_crud_get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "updates", false, &stmts, &nstmts) != 0)
        return -1;
    if (mf_crud_check_batch_size(op, nstmts) != 0 || check_statements(op, "updates", stmts, nstmts, update_stmt_fields) != 0) {
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
            mf_crud_append_write_error(&errs, &nerr, i, &e);
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
        mf_crud_view_write_error(e, c);
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

int
mf_cmd_delete(mf_op_t *op)
{
    const char *name;
    bson_t *stmts, errs;
    size_t nstmts;
    bool ordered, durable = mf_crud_want_durable(op);
    int64_t total = 0;
    int nerr = 0;

    if (mf_op_coll_name(op, &name) != 0 || mf_crud_get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "deletes", false, &stmts, &nstmts) != 0)
        return -1;
    if (mf_crud_check_batch_size(op, nstmts) != 0 || check_statements(op, "deletes", stmts, nstmts, delete_stmt_fields) != 0) {
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
            mf_crud_append_write_error(&errs, &nerr, i, &e);
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

int
mf_cmd_find_and_modify(mf_op_t *op)
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
    bool durable = mf_crud_want_durable(op);
    int rc = -1;
    bool locked = false;

    if (mf_op_coll_name(op, &name) != 0)
        return -1;
    if (mf_op_get_doc(op, "query", &query, &has_query) != 0 || mf_op_get_doc(op, "sort", &sort, &has_sort) != 0 ||
        mf_op_get_doc(op, "fields", &fields, &has_fields) != 0 || mf_op_get_bool(op, "remove", &remove, &present) != 0 ||
        mf_op_get_bool(op, "new", &want_new, &present) != 0 || mf_op_get_bool(op, "upsert", &upsert, &present) != 0)
        return -1;
    if (mf_crud_get_hint(op, op->cmd, &hint, &hint_store) != 0)
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
    if (mf_crud_coll_acquire(op, name, upsert, &c) != 0) {
        locked = true;
        goto out;
    }
    locked = true;
    if (c != NULL && c->is_view) {
        mf_crud_view_write_error(&op->err, c);
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
                if (r == 0 && !mf_crud_bypass_validation(op))
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
