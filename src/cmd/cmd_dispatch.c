/*
 * cmd_dispatch.c: command lookup and the error-to-reply boundary.
 *
 * The command table is the concatenation of the per-file tables; lookup is a
 * linear scan over a few dozen names, cheaper than the BSON parsing around
 * it. Only this file builds {ok: 0, errmsg, code, codeName} (SPEC H2).
 */
#include <string.h>

#include "cmd/cmd.h"
#include "common/log.h"

static const mf_cmd_def_t *tables[] = {mf_cmds_admin, mf_cmds_crud, mf_cmds_coll};

static const mf_cmd_def_t *
lookup(const char *name)
{
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (const mf_cmd_def_t *d = tables[t]; d->name != NULL; d++) {
            if (strcmp(d->name, name) == 0)
                return d;
        }
    }
    return NULL;
}

/* Arguments every command accepts (MongoDB's IDL "generic arguments"). */
static const char *const generic_args[] = {
    "$db", "lsid", "txnNumber", "autocommit", "startTransaction", "$clusterTime", "$readPreference",
    "readPreference", "writeConcern", "readConcern", "maxTimeMS", "comment", "apiVersion", "apiStrict",
    "apiDeprecationErrors", "$audit", "$client", "$configServerState", "allowImplicitCollectionCreation",
    "clientOperationKey", "$queryOptions", "maxTimeMSOpOnly", "databaseVersion", "shardVersion",
    "mayBypassWriteBlocking", "$configTime", "$topologyTime", "usesDefaultMaxTimeMS", "readOnce", "term",
    "$query", "$maxTimeMS", "$comment", "$explain", "$snapshot", "$options", NULL};

static bool
in_list(const char *const *list, const char *k)
{
    for (; *list; list++) {
        if (strcmp(*list, k) == 0)
            return true;
    }
    return false;
}

static int
check_fields(const mf_cmd_def_t *def, mf_op_t *op)
{
    bson_iter_t it;
    if (def->fields == NULL)
        return 0;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it); /* the command name itself */
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!in_list(def->fields, k) && !in_list(generic_args, k))
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", def->name, k);
    }
    return 0;
}

static void
error_reply(bson_t *reply, const mf_error_t *err)
{
    bson_reinit(reply);
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
    BSON_APPEND_UTF8(reply, "errmsg", err->msg);
    BSON_APPEND_INT32(reply, "code", err->code ? err->code : MF_E_InternalError);
    BSON_APPEND_UTF8(reply, "codeName", mf_err_codename(err->code ? err->code : MF_E_InternalError));
    if (err->info_len > 0) {
        bson_t info;
        if (bson_init_static(&info, err->info, err->info_len))
            bson_concat(reply, &info);
    }
}

void
mf_cmd_run(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd, const mf_docseq_t *seqs,
           size_t nseqs, bool legacy, bson_t *reply)
{
    mf_op_t op;
    bson_iter_t it;
    const mf_cmd_def_t *def;

    memset(&op, 0, sizeof(op));
    op.eng = eng;
    op.client = client;
    op.db = db;
    op.cmd = cmd;
    op.seqs = seqs;
    op.nseqs = nseqs;
    op.legacy = legacy;
    op.reply = reply;

    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) {
        mf_err_set(&op.err, MF_E_FailedToParse, "Command document is empty");
        goto fail;
    }
    op.name = bson_iter_key(&it);
    def = lookup(op.name);
    if (def == NULL) {
        mf_err_set(&op.err, MF_E_CommandNotFound, "no such command: '%s'", op.name);
        goto fail;
    }
    if (!(def->flags & MF_CMD_NO_DB) && mf_catalog_check_db_name(db, &op.err) != 0)
        goto fail;
    if ((def->flags & MF_CMD_ADMIN_ONLY) && strcmp(db, "admin") != 0) {
        mf_err_set(&op.err, MF_E_Unauthorized, "%s may only be run against the admin database.", op.name);
        goto fail;
    }
    if (!(def->flags & MF_CMD_WRITE) && strcmp(def->name, "find") != 0 && strcmp(def->name, "getMore") != 0)
        atomic_fetch_add(&eng->op_command, 1);
    if (check_fields(def, &op) != 0)
        goto fail;
    op.sess = mf_storage_session(eng->st);
    if (def->fn(&op) != 0) {
        if (mf_txn_active(op.sess))
            mf_txn_abort(op.sess);
        goto fail;
    }
    if (mf_txn_active(op.sess))
        mf_txn_abort(op.sess); /* a handler that forgot its transaction gets nothing committed */
    mf_storage_session_release(op.sess);
    BSON_APPEND_DOUBLE(reply, "ok", 1.0);
    return;

fail:
    if (op.sess)
        mf_storage_session_release(op.sess);
    if (op.err.code == 0)
        mf_err_set(&op.err, MF_E_InternalError, "command failed without an error message");
    error_reply(reply, &op.err);
}
