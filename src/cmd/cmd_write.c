/*
 * cmd_write.c: the insert, update, delete and findAndModify commands. Each
 * handler parses its command, checks every statement before any runs, hands
 * the statements to the write algorithms of the query layer (query/write.c:
 * record ids first, then chunked transactions), and builds the reply:
 * counters, upserted ids and per-statement writeErrors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/crud.h"
#include "common/params.h"
#include "doc/value.h"
#include "common/alloc.h"
#include "query/ts_write.h"
#include "query/write.h"

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
    int kind; /* 0 any, 1 document, 2 delete's limit, 3 document or array, 4 bool or number, 5 array, 6 bool */
} stmt_field_t;

static int
check_statements(mf_op_t *op, const char *arr, const bson_t *stmts, size_t n, const stmt_field_t *fields)
{
    static const char *kind_name[] = {"any", "object", "any", "object", "bool", "array", "bool"};
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
                ok = true; /* multi_delete_bool: IDL type any, read by readMultiDeleteProperty below */
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
            case 6:
                /* IDL bool (IDLParserContext::checkAndAssertType): null and undefined mean the default. */
                ok = t == BSON_TYPE_BOOL || t == BSON_TYPE_NULL || t == BSON_TYPE_UNDEFINED;
                break;
            }
            if (!ok && f->kind == 3) /* u: write_ops.idl's update_modification, type any (UpdateModification(BSONElement)) */
                return mf_err_set(&op->err, MF_E_FailedToParse, "Update argument must be either an object or an array");
            if (!ok)
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s.%s' is the wrong type '%s', expected type '%s'",
                                  op->name, arr, k, mf_type_name(t), kind_name[f->kind]);
            if (f->kind == 5) {
                /* IDL array<object>: each element is a document, checked when the command is parsed. */
                char path[128];
                snprintf(path, sizeof(path), "%s.%s.%s", op->name, arr, k);
                if (mf_op_doc_array(op, path, &it) != 0)
                    return -1;
            }
            if (strcmp(k, "hint") == 0 && t != BSON_TYPE_UTF8 && t != BSON_TYPE_DOCUMENT)
                return mf_err_set(&op->err, MF_E_FailedToParse, "Hint must be a string or an object"); /* parse time */
            if (f->kind == 2 && strcmp(k, "limit") == 0) {
                /* mongod's readMultiDeleteProperty, a parse-time check: the command fails as a whole. It reads
                 * BSONElement::numberDouble(), 0 for any non-number: {limit: true} or {limit: 'x'} deletes every
                 * match, as mongod 8.0 (write_ops_parsers.cpp). */
                const bson_value_t *lv = bson_iter_value(&it);
                double limit = mf_value_is_number(lv) ? mf_value_as_double(lv) : 0;
                if (limit != 0 && limit != 1)
                    return mf_err_set(&op->err, MF_E_FailedToParse,
                                      "The limit field in delete objects must be 0 or 1. Got %g", limit);
            }
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
    {"q", true, 1}, {"u", true, 3}, {"upsert", false, 6}, {"multi", false, 6}, {"arrayFilters", false, 5},
    {"hint", false, 0}, {"collation", false, 1}, {"c", false, 1}, {"upsertSupplied", false, 4},
    {"sort", false, 1}, {NULL, false, 0}};
static const stmt_field_t delete_stmt_fields[] = {
    {"q", true, 1}, {"limit", true, 2}, {"hint", false, 0}, {"collation", false, 1}, {NULL, false, 0}};

/* ---------- insert ---------- */

/* The writeErrors array of a reply, and how many it holds. */
typedef struct write_errors {
    bson_t arr;
    int n;
} write_errors_t;

/* A writeError's context: the reply's array, and the statement numbering (a retry runs only some documents). */
typedef struct insert_errors {
    write_errors_t we;
    mf_op_t *op;
    const size_t *orig; /* the command's index of each document run; NULL: the same */
} insert_errors_t;

/* append_insert_error: an mf_write_error_fn adding a writeError to the insert_errors_t in arg. */
static void
append_insert_error(void *arg, size_t index, const mf_error_t *err)
{
    insert_errors_t *ie = arg;
    size_t i = ie->orig != NULL ? ie->orig[index] : index;
    mf_crud_stmt_failed(ie->op, i, err);
    mf_crud_append_write_error(&ie->we.arr, &ie->we.n, i, err);
}

/*
 * A retry's documents: those of docs its first attempt did not insert
 * (op->resume), into *run (pointing into docs' data; the caller frees the
 * array, not the documents) with each one's index in docs in *orig.
 */
static void
insert_remaining(const mf_op_t *op, const bson_t *docs, size_t ndocs, bson_t **run, size_t **orig, size_t *nrun)
{
    *run = aligned_alloc(128, (ndocs ? ndocs : 1) * sizeof(**run)); /* libbson declares bson_t 128-byte aligned */
    *orig = mf_malloc((ndocs ? ndocs : 1) * sizeof(**orig));
    *nrun = 0;
    for (size_t i = 0; i < ndocs; i++) {
        if (mf_crud_stmt_done(op, i))
            continue;
        bson_init_static(&(*run)[*nrun], bson_get_data(&docs[i]), docs[i].len);
        (*orig)[(*nrun)++] = i;
    }
}

int
mf_cmd_insert(mf_op_t *op)
{
    const char *name;
    bson_t *docs, *run = NULL;
    size_t ndocs, nrun, *orig = NULL;
    bool ordered;
    insert_errors_t ie; /* fields set below: zeroing its bson_t would cost every insert */
    int64_t inserted = 0;
    int rc;

    if (mf_op_coll_name(op, &name) != 0 || mf_crud_check_write_ns(op, name, false) != 0 ||
        mf_crud_get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "documents", false, &docs, &ndocs) != 0)
        return -1;
    if (mf_crud_check_batch_size(op, ndocs) != 0) {
        free(docs);
        return -1;
    }
    bson_init(&ie.we.arr);
    ie.we.n = 0;
    ie.op = op;
    /* A time-series insert writes buckets, not one op per document: its session row keeps counts only. */
    if (op->eng->repl != NULL && mf_ts_is_timeseries(op->eng->cat, op->db, name))
        mf_crud_stmt_note(op, 0, MF_STMT_UNTRACKED);
    else if (op->resume != NULL)
        insert_remaining(op, docs, ndocs, &run, &orig, &nrun);
    ie.orig = orig;
    rc = mf_write_insert(op->eng->cat, op->sess, mf_crud_want_durable(op), mf_crud_write_flags(op), op->db,
                         name, run != NULL ? run : docs, run != NULL ? nrun : ndocs, ordered, append_insert_error, &ie,
                         &inserted, &op->err);
    if (rc != 0 && op->err.code == MF_E_CommandNotSupportedOnView && inserted == 0 && ie.we.n == 0 &&
        !mf_cmd_in_txn()) {
        /*
         * As mongod's insertBatchAndHandleErrors: acquiring a view fails each document's insert,
         * a write error (166) for the first document, or for every one when unordered; in a
         * transaction handleError fails the command.
         */
        mf_error_t view_err = op->err;
        size_t nran = run != NULL ? nrun : ndocs;
        for (size_t i = 0; i < (ordered ? 1 : nran); i++)
            append_insert_error(&ie, i, &view_err);
        mf_err_clear(&op->err);
        rc = 0;
    }
    free(docs);
    if (run != NULL) {
        free(run);
        free(orig);
    }
    if (rc == 0) {
        BSON_APPEND_INT32(op->reply, "n", (int32_t)(inserted + (op->resume != NULL ? op->resume->counts[0] : 0)));
        if (ie.we.n > 0)
            BSON_APPEND_ARRAY(op->reply, "writeErrors", &ie.we.arr);
    }
    bson_destroy(&ie.we.arr);
    return rc;
}

/* ---------- update ---------- */

int
mf_cmd_update(mf_op_t *op)
{
    const char *name;
    bson_t *stmts, errs, ups;
    size_t nstmts;
    bool ordered, durable = mf_crud_want_durable(op);
    unsigned wflags = mf_crud_write_flags(op);
    int64_t n_total = 0, nmod_total = 0;
    int nerr = 0, nups = 0;

    if (mf_op_coll_name(op, &name) != 0 || mf_crud_check_write_ns(op, name, false) != 0 ||
        mf_crud_get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "updates", false, &stmts, &nstmts) != 0)
        return -1;
    if (mf_crud_check_batch_size(op, nstmts) != 0 || check_statements(op, "updates", stmts, nstmts, update_stmt_fields) != 0) {
        free(stmts);
        return -1;
    }
    bson_init(&errs);
    bson_init(&ups);
    if (op->resume != NULL) {
        /* A retry: what the statements its first attempt did wrote (matches without a change were not kept). */
        n_total = op->resume->counts[1] + op->resume->counts[0];
        nmod_total = op->resume->counts[1];
    }
    for (size_t i = 0; i < nstmts; i++) {
        mf_write_update_result_t res;
        mf_error_t e;
        bson_iter_t sit, mit;
        if (bson_iter_init_find(&sit, &stmts[i], "sort") && bson_iter_init_find(&mit, &stmts[i], "multi") &&
            BSON_ITER_HOLDS_BOOL(&mit) && bson_iter_bool(&mit)) {
            /*
             * mongod 8.0's performUpdates checks this before running the statement and outside its
             * per-statement error handling: the command fails (9), the statements before it stay done.
             */
            mf_err_set(&op->err, MF_E_FailedToParse, "Cannot specify sort with multi=true");
            free(stmts);
            bson_destroy(&errs);
            bson_destroy(&ups);
            return -1;
        }
        if (mf_crud_stmt_done(op, i))
            continue;
        mf_err_clear(&e);
        mf_crud_stmt_note(op, i, MF_STMT_BEGIN);
        int r = mf_write_update(op->eng->cat, op->sess, durable, wflags, op->db, name, &stmts[i], &res, &e);
        if (r == 0) {
            /*
             * As mongod's populateReply: a failed statement adds nothing to n / nModified, not even
             * the documents a multi-update changed before its error (they stay changed).
             */
            n_total += res.matched;
            nmod_total += res.modified;
        }
        if (r != 0 && mf_err_is_interruption(e.code)) {
            /* As mongod: an interruption (maxTimeMS, killOp, shutdown) fails the whole command, not one statement. */
            if (res.upserted)
                bson_value_destroy(&res.upserted_id);
            op->err = e;
            free(stmts);
            bson_destroy(&errs);
            bson_destroy(&ups);
            return -1;
        }
        if (r != 0) {
            mf_crud_stmt_failed(op, i, &e);
            mf_crud_append_write_error(&errs, &nerr, i, &e);
            if (ordered)
                break;
            continue;
        }
        if (res.upserted) {
            char key[16];
            bson_t u;
            snprintf(key, sizeof(key), "%d", nups++);
            BSON_APPEND_DOCUMENT_BEGIN(&ups, key, &u);
            BSON_APPEND_INT32(&u, "index", (int32_t)i);
            bson_append_value(&u, "_id", 3, &res.upserted_id);
            bson_append_document_end(&ups, &u);
            bson_value_destroy(&res.upserted_id);
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

int
mf_cmd_delete(mf_op_t *op)
{
    const char *name;
    bson_t *stmts, errs;
    size_t nstmts;
    bool ordered, durable = mf_crud_want_durable(op);
    int64_t total = 0;
    int nerr = 0;

    if (mf_op_coll_name(op, &name) != 0 || mf_crud_check_write_ns(op, name, false) != 0 ||
        mf_crud_get_ordered(op, &ordered) != 0)
        return -1;
    if (mf_op_docs(op, "deletes", false, &stmts, &nstmts) != 0)
        return -1;
    if (mf_crud_check_batch_size(op, nstmts) != 0 || check_statements(op, "deletes", stmts, nstmts, delete_stmt_fields) != 0) {
        free(stmts);
        return -1;
    }
    bson_init(&errs);
    if (op->resume != NULL)
        total = op->resume->counts[2]; /* a retry: what the statements its first attempt did deleted */
    for (size_t i = 0; i < nstmts; i++) {
        mf_write_delete_result_t res;
        mf_error_t e;
        if (mf_crud_stmt_done(op, i))
            continue;
        mf_err_clear(&e);
        mf_crud_stmt_note(op, i, MF_STMT_BEGIN);
        int64_t batch_docs = mf_param_get(op->eng->params, "batchedDeletesTargetBatchDocs");
        int r = mf_write_delete(op->eng->cat, op->sess, durable, op->db, name, &stmts[i], batch_docs, &res, &e);
        if (r == 0)
            total += res.deleted; /* a failed statement counts nothing, as for updates */
        if (res.batched) {
            atomic_fetch_add(&op->eng->batched_deletes_docs, res.deleted);
            atomic_fetch_add(&op->eng->batched_deletes_batches, res.batches);
        }
        if (r != 0 && mf_err_is_interruption(e.code)) {
            op->err = e; /* as mongod: the whole command fails (see mf_cmd_update) */
            free(stmts);
            bson_destroy(&errs);
            return -1;
        }
        if (r != 0) {
            mf_crud_stmt_failed(op, i, &e);
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

int
mf_cmd_find_and_modify(mf_op_t *op)
{
    const char *name;
    bson_t query, sort, fields, upd, le;
    bool has_query, has_sort, has_fields, has_upd = false, present;
    bson_iter_t it;
    bson_value_t hint_store, upl_store, af_store;
    mf_write_fam_t f = {0};
    mf_write_fam_result_t res;

    /* find_and_modify.idl's typed fields (update and hint have their own checks below). */
    static const mf_field_spec_t fam_types[] = {
        {"query", MF_FT_OBJ}, {"sort", MF_FT_OBJ}, {"fields", MF_FT_OBJ}, {"remove", MF_FT_BOOL},
        {"new", MF_FT_BOOL}, {"upsert", MF_FT_BOOL}, {"bypassDocumentValidation", MF_FT_BOOL},
        {"collation", MF_FT_OBJ}, {"arrayFilters", MF_FT_ARR}, {"let", MF_FT_OBJ}, {NULL, MF_FT_ANY}};
    if (mf_op_coll_name(op, &name) != 0 || mf_crud_check_write_ns(op, name, false) != 0 ||
        mf_op_check_types(op, op->name, op->cmd, fam_types, false, true) != 0)
        return -1;
    if (mf_op_get_doc(op, "query", &query, &has_query) != 0 || mf_op_get_doc(op, "sort", &sort, &has_sort) != 0 ||
        mf_op_get_doc(op, "fields", &fields, &has_fields) != 0 ||
        mf_op_get_bool(op, "remove", &f.remove, &present) != 0 || mf_op_get_bool(op, "new", &f.want_new, &present) != 0 ||
        mf_op_get_bool(op, "upsert", &f.upsert, &present) != 0)
        return -1;
    if (mf_crud_get_hint(op, op->cmd, &f.hint, &hint_store) != 0)
        return -1;
    if (mf_op_find(op, "update", &it)) {
        if (BSON_ITER_HOLDS_ARRAY(&it)) {
            upl_store = *bson_iter_value(&it);
            f.pipeline = &upl_store;
            has_upd = true;
        } else if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            return mf_err_set(&op->err, MF_E_FailedToParse, "Update argument must be either an object or an array");
        } else {
            const uint8_t *data;
            uint32_t len;
            bson_iter_document(&it, &len, &data);
            has_upd = bson_init_static(&upd, data, len);
            if (has_upd)
                f.update = &upd;
        }
    }
    if (mf_op_find(op, "arrayFilters", &it) && BSON_ITER_HOLDS_ARRAY(&it)) {
        char path[64];
        snprintf(path, sizeof(path), "%s.arrayFilters", op->name);
        if (mf_op_doc_array(op, path, &it) != 0)
            return -1;
        af_store = *bson_iter_value(&it);
        f.array_filters = &af_store;
    }
    if (f.remove && has_upd)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Cannot specify both an update and remove=true");
    if (!f.remove && !has_upd)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Either an update or remove=true must be specified");
    if (f.remove && f.upsert)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Cannot specify both upsert=true and remove=true ");
    if (f.remove && f.want_new)
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document");
    f.query = has_query ? &query : NULL;
    f.sort = has_sort ? &sort : NULL;
    f.fields = has_fields ? &fields : NULL;

    if (mf_write_find_and_modify(op->eng->cat, op->sess, mf_crud_want_durable(op), mf_crud_write_flags(op),
                                 op->db, name, &f, &res, &op->err) != 0) {
        /* As mongod's find_and_modify.cpp adds to what its plan executor throws (a duplicate key, a failed update). */
        if (res.exec_failed)
            mf_err_context(&op->err, "Plan executor error during findAndModify");
        return -1;
    }
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "lastErrorObject", &le);
    BSON_APPEND_INT32(&le, "n", res.n);
    if (!f.remove)
        BSON_APPEND_BOOL(&le, "updatedExisting", res.updated_existing);
    if (res.upserted) {
        bson_append_value(&le, "upserted", -1, &res.upserted_id);
        bson_value_destroy(&res.upserted_id);
    }
    bson_append_document_end(op->reply, &le);
    if (res.has_value) {
        BSON_APPEND_DOCUMENT(op->reply, "value", &res.value);
        bson_destroy(&res.value);
    } else {
        BSON_APPEND_NULL(op->reply, "value");
    }
    return 0;
}
