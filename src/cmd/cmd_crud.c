/*
 * cmd_crud.c: the CRUD command family's table and shared helpers.
 *
 * The family is split by command: cmd_find.c (find, getMore, killCursors,
 * count, distinct), cmd_write.c (insert, update, delete, findAndModify),
 * cmd_agg.c (aggregate) and cmd_explain.c (explain); crud.h is what they
 * share. How reads and writes run:
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
 * count serverStatus().batchedDeletes (the path the TTL monitor reuses).
 *
 * Schema validation: every document an insert, update, replacement, upsert
 * or findAndModify writes passes mf_coll_validate inside its transaction
 * (unless bypassDocumentValidation), so a failure is an ordinary per-document
 * writeError (121 with errInfo). Views: writes answer 166; find, count and
 * distinct on a view become the view's pipeline plus their own stages, and
 * env->scan expands a view wherever a pipeline reads one (aggregate,
 * $lookup, views on views). maxTimeMS, killOp and shutdown: every scan and
 * write batch checks the calling thread's operation (common/curop.h).
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
#include "cmd/crud.h"
#include "query/write.h"

/* ---------- shared helpers ---------- */

/* Takes the catalog lock shared and finds db.name; with create, creates it first. */
int
mf_crud_coll_acquire(mf_op_t *op, const char *name, bool create, mf_coll_t **out)
{
    return mf_catalog_coll_acquire(op->eng->cat, op->db, name, create, out, &op->err);
}

bool
mf_crud_want_durable(mf_op_t *op)
{
    bson_iter_t it, wc;
    if (!mf_op_find(op, "writeConcern", &it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
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

void
mf_crud_append_write_error(bson_t *arr, int *nerr, size_t index, const mf_error_t *err)
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

int
mf_crud_check_batch_size(mf_op_t *op, size_t n)
{
    if (n < 1 || n > MF_MAX_WRITE_BATCH)
        return mf_err_set(&op->err, MF_E_InvalidLength,
                          "Write batch sizes must be between 1 and %d. Got %zu operations.", MF_MAX_WRITE_BATCH, n);
    return 0;
}

/* mongod's NamespaceString::isLegalClientSystemNS: the system.* collections clients may create and write. */
static bool
legal_client_system_ns(const char *db, const char *coll)
{
    static const char *const any_db[] = {"system.users", "system.js", "system.views", NULL};
    static const char *const admin[] = {"system.roles", "system.version", "system.keys", "system.backup_users",
                                        "system.new_users", NULL};
    static const char *const config[] = {"system.sessions", "system.indexBuilds", NULL};
    static const char *const local[] = {"system.replset", "system.healthlog", NULL};
    const char *const *lists[] = {any_db, strcmp(db, "admin") == 0 ? admin : strcmp(db, "config") == 0 ? config
                                          : strcmp(db, "local") == 0 ? local : NULL};
    if (strncmp(coll, "system.buckets.", 15) == 0)
        return true; /* a time-series collection's buckets */
    for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
        for (const char *const *n = lists[l]; n != NULL && *n != NULL; n++) {
            if (strcmp(*n, coll) == 0)
                return true;
        }
    }
    return false;
}

int
mf_crud_check_ns(mf_op_t *op, const char *db, const char *coll, bool create, mf_error_t *err)
{
    if (op->client != NULL && op->client->internal)
        return 0; /* replication's own writes: mongod's !isEnforcingConstraints() */
    /* userAllowedWriteNS: the profiler's and the view catalog's collections, and a replica set's oplog. */
    if (!create && (strcmp(coll, "system.profile") == 0 || strcmp(coll, "system.views") == 0 ||
                    (op->eng->repl != NULL && strcmp(db, "local") == 0 && strcmp(coll, "oplog.rs") == 0)))
        return mf_err_set(err, MF_E_InvalidNamespace, "cannot write to %s.%s", db, coll);
    /* userAllowedCreateNS: the collection name, then the system namespaces. */
    if (mf_catalog_check_coll_name(db, coll, err) != 0)
        return -1;
    if (strncmp(coll, "system.", 7) == 0 && strcmp(coll, "system.profile") != 0 && !legal_client_system_ns(db, coll))
        return mf_err_set(err, MF_E_InvalidNamespace, "Invalid system namespace: %s.%s", db, coll);
    if (strstr(coll, ".system.") != NULL && strncmp(coll, "system.", 7) != 0 &&
        !(strcmp(db, "config") == 0 && strncmp(coll, "cache.chunks.", 13) == 0))
        return mf_err_set(err, MF_E_BadValue, "Invalid namespace: %s.%s", db, coll);
    return 0;
}

int
mf_crud_check_write_ns(mf_op_t *op, const char *coll, bool create)
{
    return mf_crud_check_ns(op, op->db, coll, create, &op->err);
}

int
mf_crud_get_ordered(mf_op_t *op, bool *ordered)
{
    /* The write commands' typed top-level fields (write_ops.idl), bypassDocumentValidation a safeBool. */
    static const mf_field_spec_t write_types[] = {{"bypassDocumentValidation", MF_FT_BOOL},
                                                  {"bypassEmptyTsReplacement", MF_FT_BOOL}, {"let", MF_FT_OBJ},
                                                  {NULL, MF_FT_ANY}};
    bson_iter_t it;
    *ordered = true;
    if (mf_op_check_types(op, op->name, op->cmd, write_types, false, true) != 0)
        return -1;
    /* ordered is an IDL bool (write_ops.idl, bulk_write.idl): a number is 14, null and undefined the default
     * (IDLParserContext::checkAndAssertType). */
    if (mf_op_find(op, "ordered", &it)) {
        bson_type_t t = bson_iter_type(&it);
        if (t == BSON_TYPE_BOOL)
            *ordered = bson_iter_bool(&it);
        else if (t != BSON_TYPE_NULL && t != BSON_TYPE_UNDEFINED)
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field '%s.ordered' is the wrong type '%s', expected type 'bool'", op->name,
                              mf_type_name(t));
    }
    if (mf_cmd_in_txn())
        *ordered = true; /* in a transaction the first write error ends the batch, ordered or not (as mongod) */
    return 0;
}

void
mf_crud_stmt_note(mf_op_t *op, size_t i, mf_stmt_event_t what)
{
    mf_engine_t *eng = op->eng;
    if (eng->repl != NULL && eng->repl->stmt != NULL)
        eng->repl->stmt(eng->repl_arg, (int64_t)i, what);
}

void
mf_crud_stmt_failed(mf_op_t *op, size_t i, const mf_error_t *err)
{
    if (!mf_err_is_interruption(err->code))
        mf_crud_stmt_note(op, i, MF_STMT_FAILED);
}

bool
mf_crud_stmt_done(const mf_op_t *op, size_t i)
{
    const mf_stmt_resume_t *r = op->resume;
    if (r == NULL || (int64_t)i >= r->s)
        return false;
    for (int k = 0; k < r->ne; k++)
        if (r->e[k] == (int64_t)i)
            return false;
    return true;
}

/* bypassDocumentValidation: true skips the collection's validator for this command. */
bool
mf_crud_bypass_validation(mf_op_t *op)
{
    bson_iter_t it;
    return mf_op_find(op, "bypassDocumentValidation", &it) && bson_iter_as_bool(&it);
}

unsigned
mf_crud_write_flags(mf_op_t *op)
{
    bson_iter_t it;
    unsigned f = mf_crud_bypass_validation(op) ? 0 : MF_WRITE_VALIDATE;
    if ((op->client != NULL && op->client->internal) ||
        (mf_op_find(op, "bypassEmptyTsReplacement", &it) && bson_iter_as_bool(&it)))
        f |= MF_WRITE_KEEP_EMPTY_TS;
    return f;
}

/* 166 CommandNotSupportedOnView for a write (or index DDL) aimed at view c. */
int
mf_crud_view_write_error(mf_error_t *err, const mf_coll_t *c)
{
    return mf_err_set(err, MF_E_CommandNotSupportedOnView, "Namespace %s is a view, not a collection", c->ns);
}


/* Each command's own fields, as MongoDB 8.0's IDL lists them. */
static const char *const insert_fields[] = {"documents", "ordered", "bypassDocumentValidation", "bypassEmptyTsReplacement",
                                            NULL};
static const char *const find_fields[] = {"filter", "projection", "sort", "hint", "skip", "limit", "batchSize",
                                          "singleBatch", "max", "min", "returnKey", "showRecordId", "tailable",
                                          "oplogReplay", "noCursorTimeout", "awaitData", "allowPartialResults",
                                          "collation", "allowDiskUse", "let", "includeQueryStatsMetrics",
                                          NULL};
static const char *const getmore_fields[] = {"collection", "batchSize", "lastKnownCommittedOpTime",
                                             "includeQueryStatsMetrics", NULL};
static const char *const killcursors_fields[] = {"cursors", NULL};
static const char *const update_fields[] = {"updates", "ordered", "bypassDocumentValidation", "bypassEmptyTsReplacement",
                                            "let", NULL};
static const char *const delete_fields[] = {"deletes", "ordered", "bypassDocumentValidation", "let", NULL};
static const char *const fam_fields[] = {"query", "sort", "remove", "update", "new", "fields", "upsert",
                                         "bypassDocumentValidation", "bypassEmptyTsReplacement", "collation",
                                         "arrayFilters", "hint", "let", NULL};
static const char *const count_fields[] = {"query", "limit", "skip", "hint", "collation", "fields", NULL};
static const char *const distinct_fields[] = {"key", "query", "collation", "hint", NULL};
static const char *const aggregate_fields[] = {"pipeline", "explain", "allowDiskUse", "cursor",
                                               "bypassDocumentValidation", "collation", "hint", "let",
                                               "exchange", "fromMongos", "needsMerge", "collectionUUID",
                                               "includeQueryStatsMetrics", NULL};

static const char *const bulkwrite_fields[] = {"ops", "nsInfo", "ordered", "errorsOnly", "bypassDocumentValidation",
                                               "bypassEmptyTsReplacement", "let", "cursor", "stmtId", "stmtIds", NULL};

const mf_cmd_def_t mf_cmds_crud[] = {
    {"insert", mf_cmd_insert, MF_CMD_WRITE, insert_fields},
    {"find", mf_cmd_find, 0, find_fields},
    {"getMore", mf_cmd_get_more, 0, getmore_fields},
    {"killCursors", mf_cmd_kill_cursors, 0, killcursors_fields},
    {"update", mf_cmd_update, MF_CMD_WRITE, update_fields},
    {"delete", mf_cmd_delete, MF_CMD_WRITE, delete_fields},
    {"findAndModify", mf_cmd_find_and_modify, 0, fam_fields},
    {"findandmodify", mf_cmd_find_and_modify, 0, fam_fields},
    {"count", mf_cmd_count, 0, count_fields},
    {"distinct", mf_cmd_distinct, 0, distinct_fields},
    {"aggregate", mf_cmd_aggregate, 0, aggregate_fields},
    {"explain", mf_cmd_explain, 0, NULL},
    {"bulkWrite", mf_cmd_bulk_write, MF_CMD_ADMIN_ONLY, bulkwrite_fields},
    {NULL, NULL, 0, NULL},
};
