/*
 * cmd_bulkwrite.c: MongoDB 8.0's client-level bulkWrite (run on admin).
 *
 *   {bulkWrite: 1, ops: [{insert: i, document} | {update: i, filter,
 *    updateMods, arrayFilters, multi, hint, upsert, collation, sort} |
 *    {delete: i, filter, multi, hint, collation}], nsInfo: [{ns: "db.c"}],
 *    ordered, errorsOnly, bypassDocumentValidation, let, comment, cursor}
 *
 * ops and nsInfo may come in the body or as OP_MSG document sequences (the
 * drivers send sequences). The whole request is checked before anything is
 * written, as mongod's IDL parser does: every op's shape (40414 missing,
 * 40415 unknown field, 14 wrong type), every nsInfo namespace (73) and
 * every op's nsInfo index (2). Then the ops run in order, each through the
 * same write algorithms as insert/update/delete (query/write.c):
 * consecutive inserts into one namespace go in one mf_write_insert call,
 * updates and deletes one statement at a time, translated to the
 * update/delete commands' statement form. An op that fails becomes an
 * {ok: 0, idx, code, errmsg, n: 0} item (nModified: 0 too for an update;
 * no codeName, as mongod's BulkWriteReplyItem), adds nothing to the totals
 * and, when ordered, ends the request. The per-op results form a cursor (ns "admin.$cmd.bulkWrite",
 * read with getMore) beside the totals nErrors, nInserted, nMatched,
 * nModified, nUpserted, nDeleted; errorsOnly keeps only the failed items.
 * The command's let variables are installed for every op by cmd_dispatch.c.
 * In a transaction (mongod 8.0 allows bulkWrite in one, on admin) the
 * request is ordered whatever it asks, its first error aborts the
 * transaction, and a WriteConflict fails the whole command. An interrupted
 * op (maxTimeMS, killOp) fails the whole command, as mongod. As a
 * retryable write it reports its ops to replication (mf_crud_stmt_note), so
 * a retry skips the ops its first attempt did (op->resume, resume_begin)
 * and starts its totals from theirs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "cmd/crud.h"
#include "common/params.h"
#include "doc/value.h"
#include "engine/cursor.h"
#include "query/write.h"

enum { OP_INSERT, OP_UPDATE, OP_DELETE };

typedef struct bw_op {
    int kind;
    uint32_t ns;      /* index into nsInfo */
    const bson_t *op; /* the op document (a view into the command) */
} bw_op_t;

typedef struct bw_ns {
    char db[128];
    const char *coll; /* points into the nsInfo document */
} bw_ns_t;

typedef struct bw_field {
    const char *name;
    bool required;
    int kind; /* 0 any, 1 document, 2 document or array, 3 bool, 4 array of documents */
} bw_field_t;

static const bw_field_t insert_fields[] = {{"document", true, 1}, {NULL, false, 0}};
static const bw_field_t update_fields[] = {
    {"filter", true, 1},    {"updateMods", true, 2}, {"arrayFilters", false, 4}, {"multi", false, 3},
    {"hint", false, 0},     {"upsert", false, 3},    {"upsertSupplied", false, 3}, {"collation", false, 1},
    {"sort", false, 1},     {"constants", false, 1}, {NULL, false, 0}};
static const bw_field_t delete_fields[] = {
    {"filter", true, 1}, {"multi", false, 3}, {"hint", false, 0}, {"collation", false, 1}, {NULL, false, 0}};

/* Checks one op's shape and fills *out. */
static int
check_op(mf_op_t *op, const bson_t *doc, size_t nns, bw_op_t *out)
{
    bson_iter_t it;
    const bw_field_t *fields;
    if (!bson_iter_init(&it, doc) || !bson_iter_next(&it))
        return mf_err_set(&op->err, MF_E_FailedToParse, "BulkWrite ops entry {} does not contain a supported operation type");
    const char *k = bson_iter_key(&it);
    if (strcmp(k, "insert") == 0) {
        out->kind = OP_INSERT;
        fields = insert_fields;
    } else if (strcmp(k, "update") == 0) {
        out->kind = OP_UPDATE;
        fields = update_fields;
    } else if (strcmp(k, "delete") == 0) {
        out->kind = OP_DELETE;
        fields = delete_fields;
    } else {
        return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'bulkWrite.%s' is an unknown field.", k);
    }
    if (!BSON_ITER_HOLDS_NUMBER(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'bulkWrite.ops.%s' is the wrong type '%s', expected type 'int'", k,
                          mf_type_name(bson_iter_type(&it)));
    double d = bson_iter_as_double(&it);
    if (d < 0)
        return mf_err_set(&op->err, MF_E_BadValue, "BSON field '%s' value must be >= 0, actual value '%lld'", k,
                          (long long)d);
    if (d != (double)(int64_t)d || d >= (double)nns) {
        char shown[400]; /* the op as mongod's BSONObj::toString prints it */
        mf_fmt_doc(doc, shown, sizeof(shown));
        return mf_err_set(&op->err, MF_E_BadValue, "BulkWrite ops entry %s has an invalid nsInfo index.", shown);
    }
    out->ns = (uint32_t)d;
    out->op = doc;
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        const bw_field_t *fd = fields;
        while (fd->name && strcmp(fd->name, f) != 0)
            fd++;
        if (fd->name == NULL)
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'bulkWrite.ops.%s' is an unknown field.", f);
        bson_type_t t = bson_iter_type(&it);
        if ((fd->kind == 1 && t != BSON_TYPE_DOCUMENT) || (fd->kind == 3 && t != BSON_TYPE_BOOL))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'bulkWrite.ops.%s' is the wrong type '%s', expected type '%s'",
                              f, mf_type_name(t), fd->kind == 1 ? "object" : "bool");
        if (fd->kind == 2 && t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_ARRAY)
            return mf_err_set(&op->err, MF_E_FailedToParse, "Update argument must be either an object or an array");
        if (fd->kind == 4) {
            /* bulk_write.idl's array<object>: the whole command fails. */
            char path[128];
            if (t != BSON_TYPE_ARRAY)
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field 'bulkWrite.ops.%s' is the wrong type '%s', expected type 'array'", f,
                                  mf_type_name(t));
            snprintf(path, sizeof(path), "bulkWrite.ops.%s", f);
            if (mf_op_doc_array(op, path, &it) != 0)
                return -1;
        }
    }
    for (const bw_field_t *fd = fields; fd->name; fd++)
        if (fd->required && !bson_has_field(doc, fd->name))
            return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'bulkWrite.ops.%s' is missing but a required field",
                              fd->name);
    return 0;
}

static int
check_ns(mf_op_t *op, const bson_t *info, bw_ns_t *out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, info, "ns"))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'bulkWrite.nsInfo.ns' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'bulkWrite.nsInfo.ns' is the wrong type '%s', expected type 'string'",
                          mf_type_name(bson_iter_type(&it)));
    uint32_t len;
    const char *ns = bson_iter_utf8(&it, &len);
    const char *dot = strchr(ns, '.');
    if (dot == NULL || dot == ns || dot[1] == '\0' || strlen(ns) != len || (size_t)(dot - ns) >= sizeof(out->db))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace specified for bulkWrite: '%s'", ns);
    memcpy(out->db, ns, (size_t)(dot - ns));
    out->db[dot - ns] = '\0';
    out->coll = dot + 1;
    if (mf_catalog_check_db_name(out->db, &op->err) != 0)
        return -1;
    bson_iter_init(&it, info);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "ns") != 0 && strcmp(k, "collectionUUID") != 0 && strcmp(k, "encryptionInformation") != 0 &&
            strcmp(k, "isTimeseriesNamespace") != 0 && strcmp(k, "shardVersion") != 0 && strcmp(k, "databaseVersion") != 0)
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'bulkWrite.nsInfo.%s' is an unknown field.", k);
    }
    return 0;
}

/* The request's running totals and the cursor's documents. */
typedef struct bw_state {
    mf_op_t *op;
    mf_cursor_t *cur;
    bool errors_only;
    int64_t n_err, n_ins, n_match, n_mod, n_ups, n_del;
    mf_error_t first_err; /* the first failed op's error */
    bool interrupted;     /* an op was interrupted (maxTimeMS, killOp, ...): the command fails with op->err */
} bw_state_t;

static void push_err(bw_state_t *st, size_t idx, const mf_error_t *e, bool is_update);

/*
 * An op's failure: an interruption fails the whole command (op->err), as
 * mongod's handleError rethrows one; any other becomes the op's error item.
 * Returns whether the request goes on.
 */
static bool
op_failed(bw_state_t *st, size_t idx, const mf_error_t *e, bool ordered, bool is_update)
{
    if (mf_err_is_interruption(e->code)) {
        st->op->err = *e;
        st->interrupted = true;
        return false;
    }
    push_err(st, idx, e, is_update);
    return !ordered;
}

static void
push_ok(bw_state_t *st, size_t idx, int64_t n, int64_t nmod, bool is_update, const bson_value_t *upserted)
{
    if (st->errors_only)
        return;
    bson_t d, u;
    bson_init(&d);
    BSON_APPEND_DOUBLE(&d, "ok", 1.0); /* BulkWriteReplyItem's ok is a double */
    BSON_APPEND_INT32(&d, "idx", (int32_t)idx);
    BSON_APPEND_INT32(&d, "n", (int32_t)n);
    if (is_update) {
        BSON_APPEND_INT32(&d, "nModified", (int32_t)nmod);
        if (upserted != NULL) {
            BSON_APPEND_DOCUMENT_BEGIN(&d, "upserted", &u);
            BSON_APPEND_VALUE(&u, "_id", upserted);
            bson_append_document_end(&d, &u);
        }
    }
    mf_docvec_push(&st->cur->docs, &d);
    bson_destroy(&d);
}

/*
 * An op's error item, shaped as mongod 8.0's BulkWriteReplyItem::serialize:
 * ok (0.0), idx, code, errmsg, the error's extra fields (keyPattern /
 * keyValue, errInfo), n: 0, and nModified: 0 for an update only
 * (addUpdateErrorReply); no codeName.
 */
static void
push_err(bw_state_t *st, size_t idx, const mf_error_t *e, bool is_update)
{
    bson_t d;
    bson_init(&d);
    BSON_APPEND_DOUBLE(&d, "ok", 0.0);
    BSON_APPEND_INT32(&d, "idx", (int32_t)idx);
    BSON_APPEND_INT32(&d, "code", e->code);
    BSON_APPEND_UTF8(&d, "errmsg", e->msg);
    if (e->info_len > 0) {
        bson_t info;
        if (bson_init_static(&info, e->info, e->info_len))
            bson_concat(&d, &info);
    }
    BSON_APPEND_INT32(&d, "n", 0);
    if (is_update)
        BSON_APPEND_INT32(&d, "nModified", 0);
    mf_docvec_push(&st->cur->docs, &d);
    bson_destroy(&d);
    if (st->n_err++ == 0)
        st->first_err = *e;
}

/* An insert group's failures: which group members failed, and their errors in order. */
typedef struct ins_errs {
    mf_error_t **errs; /* by group member: its error (owned), NULL when it did not fail; 5 KB only for a failure */
    mf_op_t *op;
    size_t from; /* the group's first op */
} ins_errs_t;

static void
note_insert_error(void *arg, size_t index, const mf_error_t *err)
{
    ins_errs_t *ie = arg;
    if (ie->errs[index] == NULL)
        ie->errs[index] = mf_malloc(sizeof(mf_error_t));
    *ie->errs[index] = *err;
    /* Told now, before the group's next commit, so its session row places that commit after this op. */
    mf_crud_stmt_failed(ie->op, ie->from + index, err);
}

/*
 * Runs the inserts ops[from..to) (one namespace). Returns false when an
 * ordered request must stop.
 */
static bool
run_inserts(bw_state_t *st, const bw_op_t *ops, size_t from, size_t to, const bw_ns_t *ns, bool ordered, bool durable,
            unsigned wflags)
{
    mf_op_t *op = st->op;
    size_t n = to - from;
    bson_t *docs = aligned_alloc(128, n * sizeof(*docs)); /* bson_t is 128-byte aligned */
    ins_errs_t ie = {mf_calloc(n, sizeof(mf_error_t *)), op, from};
    int64_t inserted = 0;
    bool go_on = true;
    mf_error_t e;

    if (docs == NULL)
        abort(); /* as mf_malloc does on exhaustion */
    for (size_t i = 0; i < n; i++) {
        bson_iter_t it;
        const uint8_t *d;
        uint32_t l;
        bson_iter_init_find(&it, ops[from + i].op, "document");
        bson_iter_document(&it, &l, &d);
        if (!bson_init_static(&docs[i], d, l))
            bson_init(&docs[i]);
    }
    mf_err_clear(&e);
    mf_crud_stmt_note(op, from, MF_STMT_BEGIN_INSERTS);
    int rc = mf_write_insert(op->eng->cat, op->sess, durable, wflags, ns->db, ns->coll, docs, n, ordered,
                             note_insert_error, &ie, &inserted, &e);
    st->n_ins += inserted;
    for (size_t i = 0; i < n && go_on; i++) {
        if (rc != 0 && i >= (size_t)inserted) {
            /* The whole insert failed (a view, a failed creation): what did not commit carries its error. */
            mf_crud_stmt_failed(op, from + i, &e);
            go_on = op_failed(st, from + i, &e, ordered, false);
        } else if (ie.errs[i] != NULL) {
            go_on = op_failed(st, from + i, ie.errs[i], ordered, false);
        } else {
            push_ok(st, from + i, 1, 0, false, NULL);
        }
    }
    free(docs);
    for (size_t i = 0; i < n; i++)
        free(ie.errs[i]);
    free(ie.errs);
    return go_on;
}

/* Appends the value of key in src (if present) to dst under name. */
static void
copy_field(bson_t *dst, const char *name, const bson_t *src, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, src, key))
        bson_append_value(dst, name, -1, bson_iter_value(&it));
}

static bool
run_update(bw_state_t *st, size_t idx, const bw_op_t *o, const bw_ns_t *ns, bool ordered, bool durable, unsigned wflags)
{
    mf_op_t *op = st->op;
    bson_t stmt;
    mf_write_update_result_t res;
    mf_error_t e;
    bson_init(&stmt);
    copy_field(&stmt, "q", o->op, "filter");
    copy_field(&stmt, "u", o->op, "updateMods");
    copy_field(&stmt, "upsert", o->op, "upsert");
    copy_field(&stmt, "multi", o->op, "multi");
    copy_field(&stmt, "arrayFilters", o->op, "arrayFilters");
    copy_field(&stmt, "hint", o->op, "hint");
    copy_field(&stmt, "collation", o->op, "collation");
    copy_field(&stmt, "sort", o->op, "sort");
    copy_field(&stmt, "c", o->op, "constants");
    copy_field(&stmt, "upsertSupplied", o->op, "upsertSupplied");
    mf_err_clear(&e);
    mf_crud_stmt_note(op, idx, MF_STMT_BEGIN);
    int r = mf_write_update(op->eng->cat, op->sess, durable, wflags, ns->db, ns->coll, &stmt, &res, &e);
    bson_destroy(&stmt);
    if (r != 0) {
        /* As mongod's addUpdateErrorReply: a failed op adds nothing to the totals, whatever it changed first. */
        if (res.upserted)
            bson_value_destroy(&res.upserted_id);
        mf_crud_stmt_failed(op, idx, &e);
        return op_failed(st, idx, &e, ordered, true);
    }
    st->n_match += res.upserted ? 0 : res.matched;
    st->n_mod += res.modified;
    if (res.upserted)
        st->n_ups++;
    push_ok(st, idx, res.matched, res.modified, true, res.upserted ? &res.upserted_id : NULL);
    if (res.upserted)
        bson_value_destroy(&res.upserted_id);
    return true;
}

static bool
run_delete(bw_state_t *st, size_t idx, const bw_op_t *o, const bw_ns_t *ns, bool ordered, bool durable)
{
    mf_op_t *op = st->op;
    bson_t stmt;
    bson_iter_t it;
    mf_write_delete_result_t res;
    mf_error_t e;
    bool multi = bson_iter_init_find(&it, o->op, "multi") && bson_iter_as_bool(&it);
    bson_init(&stmt);
    copy_field(&stmt, "q", o->op, "filter");
    BSON_APPEND_INT32(&stmt, "limit", multi ? 0 : 1);
    copy_field(&stmt, "hint", o->op, "hint");
    copy_field(&stmt, "collation", o->op, "collation");
    mf_err_clear(&e);
    int64_t batch_docs = mf_param_get(op->eng->params, "batchedDeletesTargetBatchDocs");
    mf_crud_stmt_note(op, idx, MF_STMT_BEGIN);
    int r = mf_write_delete(op->eng->cat, op->sess, durable, ns->db, ns->coll, &stmt, batch_docs, &res, &e);
    bson_destroy(&stmt);
    if (r == 0)
        st->n_del += res.deleted; /* a failed op counts nothing (addErrorReply) */
    if (res.batched) {
        atomic_fetch_add(&op->eng->batched_deletes_docs, res.deleted);
        atomic_fetch_add(&op->eng->batched_deletes_batches, res.batches);
    }
    if (r != 0) {
        mf_crud_stmt_failed(op, idx, &e);
        return op_failed(st, idx, &e, ordered, false);
    }
    push_ok(st, idx, res.deleted, 0, false, NULL);
    return true;
}

/*
 * A retry whose first attempt did some ops (op->resume): the totals start
 * from what those did (their inserts, the updates' modified documents,
 * upserts and deletes). Their per-op results are rebuilt only for inserts
 * ({n: 1}); with errorsOnly false and an update or delete among them the
 * retry answers 217, as the row keeps no per-op result. 0, or -1 with
 * op->err.
 */
static int
resume_begin(bw_state_t *st, const bw_op_t *ops, size_t nops)
{
    const mf_stmt_resume_t *r = st->op->resume;
    for (size_t i = 0; i < nops && !st->errors_only; i++)
        if (ops[i].kind != OP_INSERT && mf_crud_stmt_done(st->op, i))
            return mf_err_set(&st->op->err, MF_E_IncompleteTransactionHistory,
                              "Incomplete history detected for this retried bulkWrite: op %zu was applied already, "
                              "and its result cannot be rebuilt (errorsOnly: false)", i);
    st->n_ins = r->counts[0] - r->upserts;
    st->n_ups = r->upserts;
    st->n_match = r->counts[1];
    st->n_mod = r->counts[1];
    st->n_del = r->counts[2];
    return 0;
}

int
mf_cmd_bulk_write(mf_op_t *op)
{
    bson_t *opdocs = NULL, *nsdocs = NULL, cursor_opt, arr;
    size_t nops = 0, nns = 0;
    bw_op_t *ops = NULL;
    bw_ns_t *nss = NULL;
    bool ordered, errors_only = false, present, has_cursor, exhausted;
    int64_t batch = INT64_MAX;
    bw_state_t st;
    int rc = -1;

    memset(&st, 0, sizeof(st));
    if (mf_crud_get_ordered(op, &ordered) != 0 || mf_op_get_bool(op, "errorsOnly", &errors_only, &present) != 0 ||
        mf_op_get_doc(op, "cursor", &cursor_opt, &has_cursor) != 0)
        return -1;
    if (has_cursor) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &cursor_opt, "batchSize")) {
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'bulkWrite.cursor.batchSize' is the wrong type '%s', expected types '[long, int, decimal, double']",
                                  mf_type_name(bson_iter_type(&it)));
            batch = bson_iter_as_int64(&it);
            if (batch < 0)
                return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'batchSize' value must be >= 0, actual value '%lld'",
                                  (long long)batch);
        }
    }
    if (mf_op_docs(op, "ops", false, &opdocs, &nops) != 0)
        return -1;
    if (mf_op_docs(op, "nsInfo", false, &nsdocs, &nns) != 0)
        goto out;
    if (mf_crud_check_batch_size(op, nops) != 0)
        goto out;
    if (nns == 0) {
        mf_err_set(&op->err, MF_E_BadValue, "nsInfo must not be empty");
        goto out;
    }
    nss = mf_calloc(nns, sizeof(*nss));
    for (size_t i = 0; i < nns; i++)
        if (check_ns(op, &nsdocs[i], &nss[i]) != 0)
            goto out;
    ops = mf_calloc(nops, sizeof(*ops));
    for (size_t i = 0; i < nops; i++)
        if (check_op(op, &opdocs[i], nns, &ops[i]) != 0)
            goto out;

    /*
     * In a transaction, as mongod's write_ops_exec handleError: the first
     * failed op ends the request and aborts the transaction
     * (mf_cmd_txn_write_error), and a WriteConflict fails the command as a
     * whole, so its TransientTransactionError label reaches the driver.
     */
    bool txn = mf_cmd_in_txn();
    if (txn)
        ordered = true;
    bool durable = mf_crud_want_durable(op);
    unsigned wflags = mf_crud_write_flags(op);
    st.op = op;
    st.errors_only = errors_only;
    if (op->resume != NULL && resume_begin(&st, ops, nops) != 0)
        goto out;
    st.cur = mf_cursor_new(MF_CURSOR_DOCS, "admin", "$cmd.bulkWrite");
    bool go_on = true;
    for (size_t i = 0; i < nops && go_on;) {
        const bw_op_t *o = &ops[i];
        if (mf_curop_check_current(&op->err) != 0) {
            mf_cursor_free(st.cur);
            goto out;
        }
        if (mf_crud_stmt_done(op, i)) {
            push_ok(&st, i, 1, 0, false, NULL); /* a retry: an insert its first attempt made (resume_begin) */
            i++;
            continue;
        }
        mf_error_t nse;
        if (o->kind == OP_INSERT) {
            size_t j = i + 1;
            while (j < nops && ops[j].kind == OP_INSERT && ops[j].ns == o->ns && j - i < 1000 &&
                   !mf_crud_stmt_done(op, j))
                j++;
            /*
             * mongod's handleInsertOp checks an insert's namespace (userAllowedWriteNS) outside its
             * error handling, before flushing the inserts grouped ahead of it: a namespace no client
             * may write fails the whole command, and an insert right after this group naming such
             * a namespace keeps this group from being written.
             */
            mf_err_clear(&nse);
            if (mf_crud_check_ns(op, nss[o->ns].db, nss[o->ns].coll, false, &nse) != 0 ||
                (j < nops && ops[j].kind == OP_INSERT && ops[j].ns != o->ns &&
                 mf_crud_check_ns(op, nss[ops[j].ns].db, nss[ops[j].ns].coll, false, &nse) != 0)) {
                op->err = nse;
                mf_cursor_free(st.cur);
                goto out;
            }
            go_on = run_inserts(&st, ops, i, j, &nss[o->ns], ordered, durable, wflags);
            i = j;
        } else {
            /* An update's or a delete's namespace check fails that op only (handleUpdateOp, handleDeleteOp). */
            mf_err_clear(&nse);
            if (mf_crud_check_ns(op, nss[o->ns].db, nss[o->ns].coll, false, &nse) != 0)
                go_on = op_failed(&st, i, &nse, ordered, o->kind == OP_UPDATE);
            else if (o->kind == OP_UPDATE)
                go_on = run_update(&st, i, o, &nss[o->ns], ordered, durable, wflags);
            else
                go_on = run_delete(&st, i, o, &nss[o->ns], ordered, durable);
            i++;
        }
    }
    if (st.interrupted) {
        mf_cursor_free(st.cur);
        goto out;
    }
    if (txn && st.n_err > 0 && st.first_err.code == MF_E_WriteConflict) {
        op->err = st.first_err;
        mf_cursor_free(st.cur);
        goto out;
    }
    /* In BulkWriteCommandReply's order (bulk_write.idl): the cursor, then these. */
    BSON_APPEND_INT32(op->reply, "nErrors", (int32_t)st.n_err);
    BSON_APPEND_INT32(op->reply, "nInserted", (int32_t)st.n_ins);
    BSON_APPEND_INT32(op->reply, "nMatched", (int32_t)st.n_match);
    BSON_APPEND_INT32(op->reply, "nModified", (int32_t)st.n_mod);
    BSON_APPEND_INT32(op->reply, "nUpserted", (int32_t)st.n_ups);
    BSON_APPEND_INT32(op->reply, "nDeleted", (int32_t)st.n_del);
    /* The cursor: its first batch now, the rest through getMore. */
    bson_t tmp;
    bson_init(&tmp);
    bson_concat(&tmp, op->reply);
    bson_reinit(op->reply);
    bson_init(&arr);
    int64_t id = 0;
    if (mf_crud_cursor_fill(op, st.cur, batch, &arr, &exhausted) != 0) {
        bson_destroy(&arr);
        bson_destroy(&tmp);
        mf_cursor_free(st.cur);
        goto out;
    }
    if (!exhausted) {
        id = mf_cmd_cursor_register(op, st.cur);
        if (id < 0) {
            bson_destroy(&arr);
            bson_destroy(&tmp);
            mf_cursor_free(st.cur);
            goto out;
        }
        mf_cursors_checkin(op->eng->cursors, st.cur);
    } else {
        mf_cursor_free(st.cur);
    }
    mf_crud_append_cursor_reply(op, "firstBatch", &arr, id, "$cmd.bulkWrite");
    bson_concat(op->reply, &tmp);
    bson_destroy(&tmp);
    bson_destroy(&arr);
    rc = 0;
out:
    free(opdocs);
    free(nsdocs);
    free(ops);
    free(nss);
    return rc;
}
