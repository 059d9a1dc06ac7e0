/*
 * cmd_dispatch.c: command lookup and the error-to-reply boundary.
 *
 * The command table is the concatenation of the per-file tables; lookup is a
 * linear scan over a few dozen names, cheaper than the BSON parsing around
 * it. Only this file builds {ok: 0, errmsg, code, codeName} (SPEC H2).
 *
 * Around every handler this file also does what is the same for all
 * commands: registers the operation for currentOp / killOp (curop.h);
 * refuses transactions, which a standalone server cannot run (20
 * IllegalOperation), and on a standalone any txnNumber (as mongod; a
 * replica set answers retried writes from its session records, repl.c);
 * validates the
 * writeConcern shape before the command runs, and, since a standalone has
 * one data-bearing node, answers w > 1 with a writeConcernError after the
 * write is applied (as mongod does); and records the logical session a
 * command names in its lsid in the engine's session cache (cmd_sessions.c).
 */
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "cmd/profile.h"
#include "engine/profiler.h"
#include "common/params.h"
#include "doc/collation.h"
#include "doc/match.h"
#include "doc/expr.h"
#include "common/curop.h"
#include "common/log.h"
#include "doc/value.h"
#include "ttl/ttl.h"

static const mf_cmd_def_t *tables[] = {mf_cmds_admin,   mf_cmds_crud, mf_cmds_coll, mf_cmds_collmod, mf_cmds_compact,
                                         mf_cmds_profile, mf_cmds_auth, mf_cmds_misc, mf_cmds_gridfs, mf_cmds_sessions,
                                         mf_cmds_hash, mf_cmds_txn, mf_cmds_test};

/* Whether table t exists on this engine: the test commands only with enableTestCommands=1, as in mongod. */
static bool
table_enabled(mf_engine_t *eng, const mf_cmd_def_t *t)
{
    return t != mf_cmds_test || mf_param_get(eng->params, "enableTestCommands") != 0;
}

/*
 * The command called name, or NULL; *index is its place counting every
 * entry of the tables before it (the test table, the only one that can be
 * disabled, comes last, so the others' places never move): its counters'
 * place in eng->cmd_counts.
 */
static const mf_cmd_def_t *
lookup(mf_engine_t *eng, const char *name, int *index)
{
    int i = 0;
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        if (!table_enabled(eng, tables[t]))
            continue;
        for (const mf_cmd_def_t *d = tables[t]; d->name != NULL; d++, i++) {
            if (d->name[0] == name[0] && strcmp(d->name, name) == 0) {
                *index = i;
                return d;
            }
        }
    }
    return NULL;
}

/* The entries of every table, enabled or not. */
static size_t
table_entry_count(void)
{
    size_t n = 0;
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
        for (const mf_cmd_def_t *d = tables[t]; d->name != NULL; d++)
            n++;
    return n;
}

/* eng->cmd_counts, allocated on first use (two counters per table entry, all tables). */
static _Atomic int64_t *
cmd_counts(mf_engine_t *eng)
{
    _Atomic int64_t *c = atomic_load(&eng->cmd_counts);
    if (c != NULL)
        return c;
    _Atomic int64_t *fresh = mf_calloc(2 * table_entry_count(), sizeof(*fresh)), *none = NULL;
    if (atomic_compare_exchange_strong(&eng->cmd_counts, &none, fresh))
        return fresh;
    free((void *)fresh); /* another thread's won */
    return none;
}

/* A command and its counters' place, for mf_cmd_append_command_metrics' sort. */
typedef struct {
    const mf_cmd_def_t *def;
    int index;
} metric_entry_t;

static int
metric_entry_cmp(const void *a, const void *b)
{
    return strcmp(((const metric_entry_t *)a)->def->name, ((const metric_entry_t *)b)->def->name);
}

/*
 * serverStatus metrics.commands: {<name>: {failed, total}} for every
 * command this engine runs, by name (as mongod's metrics tree lists them),
 * and "<UNKNOWN>": the commands of no known name, as mongod's command metrics.
 */
void
mf_cmd_append_command_metrics(mf_engine_t *eng, bson_t *out)
{
    _Atomic int64_t *c = cmd_counts(eng);
    size_t n = 0, cap = table_entry_count();
    int i = 0;
    metric_entry_t *e = mf_calloc(cap ? cap : 1, sizeof(*e));
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        if (!table_enabled(eng, tables[t]))
            continue;
        for (const mf_cmd_def_t *d = tables[t]; d->name != NULL; d++, i++)
            e[n++] = (metric_entry_t){d, i};
    }
    qsort(e, n, sizeof(*e), metric_entry_cmp);
    BSON_APPEND_INT64(out, "<UNKNOWN>", atomic_load(&eng->cmd_unknown));
    for (size_t k = 0; k < n; k++) {
        bson_t one;
        BSON_APPEND_DOCUMENT_BEGIN(out, e[k].def->name, &one);
        BSON_APPEND_INT64(&one, "failed", atomic_load_explicit(&c[2 * e[k].index + 1], memory_order_relaxed));
        BSON_APPEND_INT64(&one, "total", atomic_load_explicit(&c[2 * e[k].index], memory_order_relaxed));
        int vc = strcmp(e[k].def->name, "create") == 0 ? 0 : strcmp(e[k].def->name, "collMod") == 0 ? 1 : -1;
        if (vc >= 0) {
            /* mongod's ValidatorCounters, under the command's own counters (the metrics tree is sorted). */
            bson_t v;
            BSON_APPEND_DOCUMENT_BEGIN(&one, "validator", &v);
            BSON_APPEND_INT64(&v, "failed", atomic_load_explicit(&eng->validator_counts[vc][1], memory_order_relaxed));
            BSON_APPEND_INT64(&v, "jsonSchema", atomic_load_explicit(&eng->validator_counts[vc][2], memory_order_relaxed));
            BSON_APPEND_INT64(&v, "total", atomic_load_explicit(&eng->validator_counts[vc][0], memory_order_relaxed));
            bson_append_document_end(&one, &v);
        }
        bson_append_document_end(out, &one);
    }
    free(e);
}

void
mf_cmd_legacy_op_error(bson_t *reply, const char *op_name)
{
    char msg[256];

    /* mongod's makeErrorResponseToUnsupportedOpQuery: these three fields, no errmsg or codeName. */
    snprintf(msg, sizeof(msg),
             "%s is no longer supported. The client driver may require an upgrade. For more details see "
             "https://dochub.mongodb.org/core/legacy-opcode-removal", op_name);
    bson_reinit(reply);
    BSON_APPEND_UTF8(reply, "$err", msg);
    BSON_APPEND_INT32(reply, "code", MF_E_Location5739101);
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
}

/* Client reads and writes of documents (the CRUD family): what the TTL pacer yields to. */
static bool
is_data_command(const mf_cmd_def_t *def)
{
    for (const mf_cmd_def_t *d = mf_cmds_crud; d->name != NULL; d++) {
        if (d == def)
            return strcmp(d->name, "killCursors") != 0;
    }
    return false;
}

/*
 * Commands that write documents or change the catalog, which an fsync lock
 * holds before they start (mf_engine_write_gate): waiting there, they hold
 * no collection lock and no storage transaction. Anything else that writes
 * (an aggregation's $out or $merge, the TTL monitor, the profiler) waits at
 * its commit or its catalog change instead.
 */
static bool
gated_by_fsync_lock(const mf_cmd_def_t *def)
{
    static const char *const names[] = {"findAndModify", "findandmodify", "bulkWrite", "create", "drop",
                                        "dropDatabase", "createIndexes", "dropIndexes", "deleteIndexes", "collMod",
                                        "renameCollection", "compact", "reIndex", "convertToCapped",
                                        "cloneCollectionAsCapped", NULL};
    if (def->flags & MF_CMD_WRITE)
        return true;
    for (int i = 0; names[i] != NULL; i++)
        if (strcmp(names[i], def->name) == 0)
            return true;
    return false;
}

/* listCommands: every command in the table, with MongoDB's per-command fields. */
int
mf_cmd_list_commands(mf_op_t *op)
{
    bson_t all, one;
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "commands", &all);
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        if (!table_enabled(op->eng, tables[t]))
            continue;
        for (const mf_cmd_def_t *d = tables[t]; d->name != NULL; d++) {
            BSON_APPEND_DOCUMENT_BEGIN(&all, d->name, &one);
            BSON_APPEND_UTF8(&one, "help", "");
            BSON_APPEND_BOOL(&one, "requiresAuth", mf_cmd_requires_auth(d->name));
            BSON_APPEND_BOOL(&one, "secondaryOk", true);
            BSON_APPEND_BOOL(&one, "adminOnly", (d->flags & MF_CMD_ADMIN_ONLY) != 0);
            bson_append_document_end(&all, &one);
        }
    }
    bson_append_document_end(op->reply, &all);
    return 0;
}

/* Arguments every command accepts (MongoDB's IDL "generic arguments"). */
static const char *const generic_args[] = {
    "$db", "lsid", "txnNumber", "autocommit", "startTransaction", "$clusterTime", "$readPreference",
    "readPreference", "writeConcern", "readConcern", "maxTimeMS", "comment", "apiVersion", "apiStrict",
    "apiDeprecationErrors", "$audit", "$client", "$configServerState", "allowImplicitCollectionCreation",
    "clientOperationKey", "$queryOptions", "maxTimeMSOpOnly", "databaseVersion", "shardVersion",
    "mayBypassWriteBlocking", "$configTime", "$topologyTime", "usesDefaultMaxTimeMS", "readOnce", "term",
    "$query", "$maxTimeMS", "$comment", "$explain", "$snapshot", "$options",
    /* the rest of mongod's generic_argument.idl */
    "stmtId", "txnRetryCounter", "$oplogQueryData", "$replData", "tracking_info", "coordinator", "$tenant",
    "expectPrefix", NULL};

static bool
in_list(const char *const *list, const char *k)
{
    for (; *list; list++) {
        if ((*list)[0] == k[0] && strcmp(*list, k) == 0)
            return true;
    }
    return false;
}

/* The fields after the command name in cmd are def's own or generic: 0, or 40415 for the first that is not. */
static int
fields_known(const mf_cmd_def_t *def, const bson_t *cmd, mf_error_t *err)
{
    bson_iter_t it;
    if (def->fields == NULL || !bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!in_list(def->fields, k) && !in_list(generic_args, k))
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", def->name, k);
    }
    return 0;
}

int
mf_cmd_check_inner_fields(mf_op_t *op, const bson_t *cmd)
{
    bson_iter_t it;
    const mf_cmd_def_t *def;
    int index;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || (def = lookup(op->eng, bson_iter_key(&it), &index)) == NULL)
        return 0;
    return fields_known(def, cmd, &op->err);
}

bool
mf_cmd_is_generic_arg(const char *k)
{
    return in_list(generic_args, k);
}

static int
check_fields(const mf_cmd_def_t *def, mf_op_t *op)
{
    return fields_known(def, op->cmd, &op->err);
}

bool
mf_cmd_is_retryable_write(const char *name)
{
    return strcmp(name, "insert") == 0 || strcmp(name, "update") == 0 || strcmp(name, "delete") == 0 ||
           strcmp(name, "findAndModify") == 0 || strcmp(name, "findandmodify") == 0 || strcmp(name, "bulkWrite") == 0;
}

/*
 * A transaction's command on its own thread is checked by cmd_txn.c. Other
 * transaction fields mean: on a replica-set member, a transaction's command
 * that mf_cmd_txn_route left here (no usable lsid); on a standalone, where
 * any transaction number is refused, as mongod (its retryable writes need a
 * replica set's session records; drivers send none to a standalone, and a
 * raw client's retry would run twice), 20.
 */
static int
check_txn_fields(mf_op_t *op)
{
    if (mf_cmd_in_txn())
        return mf_cmd_txn_check(op);
    bool has_txn = mf_op_has(op, "txnNumber");
    /* As mongod's initializeOperationSessionInfo, before it asks whether this server takes transaction numbers. */
    if (has_txn && !mf_op_has(op, "lsid"))
        return mf_err_set(&op->err, MF_E_InvalidOptions, "Transaction number requires a session ID to also be specified");
    bool txn_cmd = mf_op_has(op, "startTransaction") || mf_op_has(op, "autocommit") ||
                   strcmp(op->name, "commitTransaction") == 0 || strcmp(op->name, "abortTransaction") == 0;
    if (txn_cmd && op->eng->repl != NULL)
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "Transaction number requires a session ID to also be specified");
    if (has_txn && !txn_cmd && op->eng->repl != NULL && !mf_cmd_is_retryable_write(op->name))
        return mf_err_set(&op->err, MF_E_Location50768, /* mongod's initializeOperationSessionInfo */
                          "txnNumber may only be provided for multi-document transactions and retryable write "
                          "commands. autocommit:false was not provided, and %s is not a retryable write command.",
                          op->name);
    if (txn_cmd || (has_txn && (op->eng->repl == NULL || !mf_cmd_is_retryable_write(op->name))))
        return mf_err_set(&op->err, MF_E_IllegalOperation,
                          "Transaction numbers are only allowed on a replica set member or mongos");
    bson_iter_t tn;
    if (has_txn && mf_op_find(op, "txnNumber", &tn) && BSON_ITER_HOLDS_NUMBER(&tn) && bson_iter_as_int64(&tn) < 0)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "Transaction number cannot be negative");
    if (has_txn && op->eng->repl != NULL)
        return mf_cmd_txn_retryable(op);
    return 0;
}

/*
 * A write concern a replica-set member cannot give, reported after the
 * write as mongod reports it (writeConcernError, with errInfo.writeConcern):
 * code 0 when none.
 */
typedef struct {
    int code;
    char msg[200];
    bson_value_t w; /* the w asked for (a view into the command) */
    int wnum;       /* a numeric w the set can give (0 none): waited for after the command (wait_members) */
    bson_value_t wv; /* that w as read (an int32, as mongod echoes the concern it used) */
} wc_unmet_t;

/*
 * Validates the writeConcern document's shape (MongoDB's WriteConcernOptions
 * parser), then what this server can give, as mongod's
 * validateWriteConcern and checkIfWriteConcernCanBeSatisfied: a standalone
 * refuses before running a numeric w above 1, a w mode other than
 * "majority" (2 BadValue) and j with no journal (--inMemory); a
 * replica-set member runs the write and then reports, in *unmet, a numeric
 * w above its data-bearing members (100) or a mode its config does not
 * define (79: mayfly's configs define none).
 */
static int
check_write_concern(mf_op_t *op, wc_unmet_t *unmet)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    bson_t wc;
    mf_wc_shape_t shape;
    const bson_value_t *v = &shape.w;
    unmet->code = 0;
    unmet->wnum = 0;
    if (!mf_op_find(op, "writeConcern", &it))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field '%s.writeConcern' is the wrong type '%s', expected type 'object'", op->name,
                          mf_type_name(bson_iter_type(&it)));
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&wc, data, len))
        return mf_err_set(&op->err, MF_E_InvalidBSON, "invalid writeConcern");
    if (mf_write_concern_shape(&op->err, &wc, &shape) != 0)
        return -1;
    if (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "majority") != 0) {
        const char *mode = v->value.v_utf8.str;
        if (op->eng->repl == NULL)
            return mf_err_set(&op->err, MF_E_BadValue, "cannot use non-majority 'w' mode \"%s\" when a host "
                              "is not a member of a replica set", mode);
        unmet->code = MF_E_UnknownReplWriteConcern;
        snprintf(unmet->msg, sizeof(unmet->msg), "No write concern mode named '%.100s' found in replica set configuration",
                 mode);
        unmet->w = *v;
    } else if (mf_value_is_number(v)) {
        int64_t w = shape.wnum; /* 0..50: 1.5 is 1, as mongod reads it */
        if (w > 1 && op->eng->repl == NULL)
            return mf_err_set(&op->err, MF_E_BadValue, "cannot use 'w' > 1 when a host is not replicated");
        if (op->eng->repl != NULL && op->eng->repl->data_members != NULL &&
            w > op->eng->repl->data_members(op->eng->repl_arg)) {
            unmet->code = MF_E_UnsatisfiableWriteConcern;
            snprintf(unmet->msg, sizeof(unmet->msg), "Not enough data-bearing nodes");
            unmet->w.value_type = BSON_TYPE_INT32; /* the concern as read, as mongod echoes it */
            unmet->w.value.v_int32 = (int32_t)w;
        } else if (op->eng->repl != NULL) {
            unmet->wnum = (int)w;
            unmet->wv.value_type = BSON_TYPE_INT32;
            unmet->wv.value.v_int32 = (int32_t)w;
        }
    }
    if (shape.journal && op->eng->in_memory)
        return mf_err_set(&op->err, MF_E_BadValue, "cannot use 'j' option when a host does not have journaling enabled");
    return 0;
}

/*
 * Causal consistency on a replica-set member: waits for readConcern
 * afterClusterTime (a Timestamp) to be applied here, as mongod's
 * waitForReadConcern; the command's $clusterTime gossip bounds what may be
 * asked. Returns 0, or -1 with op->err.
 */
static int
wait_after_cluster_time(mf_op_t *op)
{
    bson_iter_t it, rc, ct;
    uint32_t secs, inc, gsecs = 0, ginc = 0;
    if (op->eng->repl == NULL || op->eng->repl->after_cluster_time == NULL || !mf_op_find(op, "readConcern", &it) ||
        !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &rc))
        return 0;
    bson_iter_t at = rc;
    if (bson_iter_find(&at, "atClusterTime") && BSON_ITER_HOLDS_TIMESTAMP(&at)) {
        /*
         * mayfly keeps no history to read at a past time (as mongod with
         * minSnapshotHistoryWindowInSeconds 0): a time older than what this
         * member has applied is SnapshotTooOld; a later one is waited for
         * and read then, as afterClusterTime.
         */
        uint32_t asecs, ainc, nsecs = 0, ninc = 0;
        bson_iter_timestamp(&at, &asecs, &ainc);
        op->eng->repl->op_time(op->eng->repl_arg, &nsecs, &ninc);
        if (asecs < nsecs || (asecs == nsecs && ainc < ninc))
            return mf_err_set(&op->err, MF_E_SnapshotTooOld, "Read timestamp Timestamp(%u, %u) is older than the "
                              "oldest available timestamp.", asecs, ainc);
        return op->eng->repl->after_cluster_time(op->eng->repl_arg, "atClusterTime", asecs, ainc, 0, 0, &op->err);
    }
    if (!bson_iter_find(&rc, "afterClusterTime"))
        return 0;
    if (!BSON_ITER_HOLDS_TIMESTAMP(&rc))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'readConcern.afterClusterTime' is the wrong type '%s', expected type 'timestamp'",
                          mf_type_name(bson_iter_type(&rc)));
    bson_iter_timestamp(&rc, &secs, &inc);
    if (mf_op_find(op, "$clusterTime", &it) && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &ct) &&
        bson_iter_find(&ct, "clusterTime") && BSON_ITER_HOLDS_TIMESTAMP(&ct))
        bson_iter_timestamp(&ct, &gsecs, &ginc);
    return op->eng->repl->after_cluster_time(op->eng->repl_arg, "afterClusterTime", secs, inc, gsecs, ginc, &op->err);
}

/*
 * A replica-set member's reply ends with $clusterTime and operationTime, as
 * mongod's (appendClusterAndOperationTime): the time this command's reads
 * saw or its writes made, which a driver's causally consistent session
 * sends back as afterClusterTime. The signature is mongod's unsigned one
 * (zero hash, key 0); drivers only echo it back.
 */
static void
append_cluster_time(mf_engine_t *eng, bson_t *reply)
{
    static const uint8_t zero_hash[20] = {0};
    bson_t ct, sig;
    uint32_t secs, inc;
    if (eng->repl == NULL || eng->repl->op_time == NULL)
        return;
    eng->repl->op_time(eng->repl_arg, &secs, &inc);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "$clusterTime", &ct);
    BSON_APPEND_TIMESTAMP(&ct, "clusterTime", secs, inc);
    BSON_APPEND_DOCUMENT_BEGIN(&ct, "signature", &sig);
    BSON_APPEND_BINARY(&sig, "hash", BSON_SUBTYPE_BINARY, zero_hash, sizeof(zero_hash));
    BSON_APPEND_INT64(&sig, "keyId", 0);
    bson_append_document_end(&ct, &sig);
    bson_append_document_end(reply, &ct);
    BSON_APPEND_TIMESTAMP(reply, "operationTime", secs, inc);
}

/* True if the pipeline array in cmd's "pipeline" ends in $out or $merge. */
static bool
pipeline_writes(const bson_t *cmd)
{
    bson_iter_t it, st, f;
    bool writes = false;
    if (!bson_iter_init_find(&it, cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &st))
        return false;
    while (bson_iter_next(&st)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &f) && bson_iter_next(&f))
            writes = strcmp(bson_iter_key(&f), "$out") == 0 || strcmp(bson_iter_key(&f), "$merge") == 0;
    }
    return writes;
}

/* What a command does, for a replica-set member's admission check (MongoDB's secondaryOk rules). */
static mf_repl_kind_t
repl_kind(const mf_cmd_def_t *def, const bson_t *cmd)
{
    static const char *const writes[] = {"findAndModify", "findandmodify", "create", "drop", "dropDatabase",
                                         "createIndexes", "dropIndexes", "deleteIndexes", "collMod",
                                         "renameCollection", "convertToCapped", "cloneCollectionAsCapped",
                                         "bulkWrite", "createUser", "updateUser", "dropUser",
                                         "dropAllUsersFromDatabase", "grantRolesToUser", "revokeRolesFromUser", NULL};
    static const char *const reads[] = {"find",     "count",   "distinct", "listCollections", "listIndexes",
                                        "collStats", "collstats", "dbStats", "dbstats", "dataSize", "dbHash",
                                        "dbhash",    "validate",  "explain", NULL};
    if (def->flags & MF_CMD_WRITE)
        return MF_REPL_WRITE;
    if (strcmp(def->name, "aggregate") == 0)
        return pipeline_writes(cmd) ? MF_REPL_WRITE : MF_REPL_READ;
    for (int i = 0; writes[i]; i++)
        if (strcmp(def->name, writes[i]) == 0)
            return MF_REPL_WRITE;
    for (int i = 0; reads[i]; i++)
        if (strcmp(def->name, reads[i]) == 0)
            return MF_REPL_READ;
    return MF_REPL_OTHER;
}

/* True if the request allows a secondary to answer: a $readPreference whose mode is not primary. */
static bool
secondary_ok(const bson_t *cmd)
{
    bson_iter_t it, m;
    if (!bson_iter_init_find(&it, cmd, "$readPreference") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &m) || !bson_iter_find(&m, "mode") || !BSON_ITER_HOLDS_UTF8(&m))
        return false;
    return strcmp(bson_iter_utf8(&m, NULL), "primary") != 0;
}

/* The write concern's wtimeout in ms (0: none). */
static int64_t
wtimeout_of(const bson_t *cmd)
{
    bson_iter_t it, w;
    if (!bson_iter_init_find(&it, cmd, "writeConcern") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &w))
        return 0;
    while (bson_iter_next(&w)) {
        if ((strcmp(bson_iter_key(&w), "wtimeout") == 0 || strcmp(bson_iter_key(&w), "wtimeoutMS") == 0) &&
            BSON_ITER_HOLDS_NUMBER(&w))
            return bson_iter_as_int64(&w) > 0 ? bson_iter_as_int64(&w) : 0;
    }
    return 0;
}

/* Codes that mean "this member is not (or no longer) primary" or "interrupted by a role change". */
static bool
not_primary_code(int code)
{
    return code == MF_E_NotWritablePrimary || code == MF_E_InterruptedDueToReplStateChange ||
           code == MF_E_PrimarySteppedDown || code == MF_E_NotPrimaryNoSecondaryOk ||
           code == MF_E_NotPrimaryOrSecondary || code == MF_E_InterruptedAtShutdown ||
           code == MF_E_ShutdownInProgress;
}

/* If reply's writeErrors hold a not-primary error, sets err to it and returns true. */
static bool
not_primary_write_error(const bson_t *reply, mf_error_t *err)
{
    bson_iter_t it, a, f;
    if (!bson_iter_init_find(&it, reply, "writeErrors") || !bson_iter_recurse(&it, &a))
        return false;
    while (bson_iter_next(&a)) {
        int code = 0;
        const char *msg = "not primary";
        if (!bson_iter_recurse(&a, &f))
            continue;
        while (bson_iter_next(&f)) {
            if (strcmp(bson_iter_key(&f), "code") == 0)
                code = (int)bson_iter_as_int64(&f);
            else if (strcmp(bson_iter_key(&f), "errmsg") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                msg = bson_iter_utf8(&f, NULL);
        }
        if (not_primary_code(code)) {
            mf_err_set(err, code, "%s", msg);
            return true;
        }
    }
    return false;
}

/* The writeConcernError of a write whose replication outlived its wtimeout, appended to parent. */
static void
append_wtimeout_error(bson_t *parent)
{
    bson_t wce, info;
    BSON_APPEND_DOCUMENT_BEGIN(parent, "writeConcernError", &wce);
    BSON_APPEND_INT32(&wce, "code", MF_E_WriteConcernFailed);
    BSON_APPEND_UTF8(&wce, "codeName", mf_err_codename(MF_E_WriteConcernFailed));
    BSON_APPEND_UTF8(&wce, "errmsg", "waiting for replication timed out");
    BSON_APPEND_DOCUMENT_BEGIN(&wce, "errInfo", &info);
    BSON_APPEND_BOOL(&info, "wtimeout", true);
    bson_append_document_end(&wce, &info);
    bson_append_document_end(parent, &wce);
}

/*
 * A numeric w above a majority that was not reached (wait_members): the
 * write stands, and the reply says so as mongod's does, writeConcernError
 * with the code (64 on wtimeout, with errInfo.wtimeout) and the write
 * concern asked for.
 */
static void
append_members_error(bson_t *reply, const mf_error_t *err, const bson_value_t *w, int64_t wtimeout)
{
    bson_t wce, info, wc;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "writeConcernError", &wce);
    BSON_APPEND_INT32(&wce, "code", err->code);
    BSON_APPEND_UTF8(&wce, "codeName", mf_err_codename(err->code));
    BSON_APPEND_UTF8(&wce, "errmsg", err->msg);
    BSON_APPEND_DOCUMENT_BEGIN(&wce, "errInfo", &info);
    if (err->code == MF_E_WriteConcernFailed)
        BSON_APPEND_BOOL(&info, "wtimeout", true);
    BSON_APPEND_DOCUMENT_BEGIN(&info, "writeConcern", &wc);
    bson_append_value(&wc, "w", 1, w);
    BSON_APPEND_INT64(&wc, "wtimeout", wtimeout);
    BSON_APPEND_UTF8(&wc, "provenance", "clientSupplied");
    bson_append_document_end(&info, &wc);
    bson_append_document_end(&wce, &info);
    bson_append_document_end(reply, &wce);
}

/*
 * An insert, update or delete that failed only because its replication
 * outlived the write concern's wtimeout answers as mongod does: ok, the
 * statements it wrote counted (raft may still commit them, and then every
 * member applies them), and writeConcernError 64. Returns true if reply now
 * holds that answer.
 */
static bool
wtimeout_reply(mf_engine_t *eng, const char *name, bson_t *reply)
{
    int64_t c[3] = {0, 0, 0};
    if ((strcmp(name, "insert") != 0 && strcmp(name, "update") != 0 && strcmp(name, "delete") != 0) ||
        !eng->repl->wtimeout_counts(eng->repl_arg, c))
        return false;
    bson_reinit(reply);
    if (strcmp(name, "insert") == 0) {
        BSON_APPEND_INT32(reply, "n", (int32_t)c[0]);
    } else if (strcmp(name, "delete") == 0) {
        BSON_APPEND_INT32(reply, "n", (int32_t)c[2]);
    } else {
        BSON_APPEND_INT32(reply, "n", (int32_t)(c[1] + c[0]));
        BSON_APPEND_INT32(reply, "nModified", (int32_t)c[1]);
    }
    append_wtimeout_error(reply);
    return true;
}

/*
 * A write whose replication timed out (64 WriteConcernFailed, the write
 * concern's wtimeout) is reported as MongoDB does: not a writeError but the
 * reply's writeConcernError {code: 64, errInfo: {wtimeout: true}}.
 */
/* Whether the write error at e has code code. */
static bool
write_error_is(const bson_iter_t *e, int code)
{
    bson_iter_t f;
    return bson_iter_recurse(e, &f) && bson_iter_find(&f, "code") && bson_iter_as_int64(&f) == code;
}

/* Whether reply's writeErrors hold one with code code. */
static bool
write_errors_have(const bson_t *reply, int code)
{
    bson_iter_t it, a;
    if (!bson_iter_init_find(&it, reply, "writeErrors") || !bson_iter_recurse(&it, &a))
        return false;
    while (bson_iter_next(&a)) {
        if (write_error_is(&a, code))
            return true;
    }
    return false;
}

static void
wtimeout_to_write_concern_error(bson_t *reply)
{
    bson_iter_t it, a;
    if (!write_errors_have(reply, MF_E_WriteConcernFailed))
        return;
    bson_t out, errs;
    uint32_t n = 0;
    bson_init(&out);
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "writeErrors") != 0) {
            bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
            continue;
        }
        bson_init(&errs);
        bson_iter_recurse(&it, &a);
        while (bson_iter_next(&a)) {
            if (write_error_is(&a, MF_E_WriteConcernFailed))
                continue;
            char key[16];
            const char *kp;
            bson_uint32_to_string(n++, &kp, key, sizeof(key));
            bson_append_value(&errs, kp, -1, bson_iter_value(&a));
        }
        if (n > 0)
            BSON_APPEND_ARRAY(&out, "writeErrors", &errs);
        bson_destroy(&errs);
    }
    append_wtimeout_error(&out);
    bson_reinit(reply);
    bson_concat(reply, &out);
    bson_destroy(&out);
}

/* A write error's document e, its errmsg rewritten by mf_catalog_name_tables when its code is 264. */
static void
append_named_write_error(mf_engine_t *eng, bson_t *errs, const char *key, bson_iter_t *e)
{
    bson_iter_t f;
    bson_t doc;
    if (!write_error_is(e, MF_E_TooManyFilesOpen)) {
        bson_append_value(errs, key, -1, bson_iter_value(e));
        return;
    }
    BSON_APPEND_DOCUMENT_BEGIN(errs, key, &doc);
    bson_iter_recurse(e, &f);
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), "errmsg") == 0 && BSON_ITER_HOLDS_UTF8(&f)) {
            char msg[sizeof(((mf_error_t *)0)->msg)];
            mf_strlcpy(msg, bson_iter_utf8(&f, NULL), sizeof(msg));
            mf_catalog_name_tables(eng->cat, msg, sizeof(msg));
            BSON_APPEND_UTF8(&doc, "errmsg", msg);
        } else {
            bson_append_value(&doc, bson_iter_key(&f), -1, bson_iter_value(&f));
        }
    }
    bson_append_document_end(errs, &doc);
}

/*
 * The errmsg of a write error TooManyFilesOpen (264) names the table it
 * could not open (storage knows no namespaces): each becomes the collection
 * or index a user knows (mf_catalog_name_tables), as the command's own
 * error does. Called with no collection held.
 */
static void
name_tables_in_write_errors(mf_engine_t *eng, bson_t *reply)
{
    bson_iter_t it, a;
    if (eng->cat == NULL || !write_errors_have(reply, MF_E_TooManyFilesOpen))
        return;
    bson_t out, errs;
    bson_init(&out);
    bson_iter_init(&it, reply);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "writeErrors") != 0 || !bson_iter_recurse(&it, &a)) {
            bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
            continue;
        }
        BSON_APPEND_ARRAY_BEGIN(&out, "writeErrors", &errs);
        while (bson_iter_next(&a))
            append_named_write_error(eng, &errs, bson_iter_key(&a), &a);
        bson_append_array_end(&out, &errs);
    }
    bson_reinit(reply);
    bson_concat(reply, &out);
    bson_destroy(&out);
}

/*
 * A not-primary error on a replica-set member carries the member's
 * topologyVersion (drivers compare it with what they know before marking
 * the server unknown), as mongod's. Its errorLabels (RetryableWriteError
 * for a retryable write) come from mf_failcommand_labels, like every error's.
 */
static void
add_not_primary_fields(mf_engine_t *eng, bson_t *reply, int code)
{
    bson_t tv;
    if (!not_primary_code(code) || bson_has_field(reply, "topologyVersion"))
        return;
    BSON_APPEND_DOCUMENT_BEGIN(reply, "topologyVersion", &tv);
    BSON_APPEND_OID(&tv, "processId", &eng->process_id);
    BSON_APPEND_INT64(&tv, "counter", atomic_load(&eng->topology_version));
    bson_append_document_end(reply, &tv);
}

/* MongoDB's currentOp "op" for a command. */
static const char *
curop_type(const char *name)
{
    if (strcmp(name, "insert") == 0)
        return "insert";
    if (strcmp(name, "update") == 0)
        return "update";
    if (strcmp(name, "delete") == 0)
        return "remove";
    if (strcmp(name, "find") == 0)
        return "query";
    if (strcmp(name, "getMore") == 0)
        return "getmore";
    return "command";
}

/*
 * The opLatencies kind of a command, as mongod's read/write/command split:
 * reads find, getMore, count, distinct and aggregate; writes insert,
 * update, delete, findAndModify and bulkWrite; everything else a command.
 * (An awaitable hello waits in the network layer after its command has
 * ended, so its wait is never counted.)
 */
static int
latency_kind(const char *name)
{
    /* By first letter: most commands (ping, serverStatus ...) take one comparison (bench/request_instr_bench.js). */
    switch (name[0]) {
    case 'f':
        if (strcmp(name, "find") == 0)
            return MF_LAT_READS;
        if (strcmp(name, "findAndModify") == 0 || strcmp(name, "findandmodify") == 0)
            return MF_LAT_WRITES;
        break;
    case 'g':
        if (strcmp(name, "getMore") == 0)
            return MF_LAT_READS;
        break;
    case 'c':
        if (strcmp(name, "count") == 0)
            return MF_LAT_READS;
        break;
    case 'd':
        if (strcmp(name, "distinct") == 0)
            return MF_LAT_READS;
        if (strcmp(name, "delete") == 0)
            return MF_LAT_WRITES;
        break;
    case 'a':
        if (strcmp(name, "aggregate") == 0)
            return MF_LAT_READS;
        break;
    case 'i':
        if (strcmp(name, "insert") == 0)
            return MF_LAT_WRITES;
        break;
    case 'u':
        if (strcmp(name, "update") == 0)
            return MF_LAT_WRITES;
        break;
    case 'b':
        if (strcmp(name, "bulkWrite") == 0)
            return MF_LAT_WRITES;
        break;
    }
    return MF_LAT_COMMANDS;
}

/*
 * The namespace a command is reported under (currentOp, the slow-query log,
 * the profiler), written to ns (cut to size, between UTF-8 characters):
 * db.coll when the first field names a collection (getMore: its
 * "collection" field), else db.$cmd ({aggregate: 1}: db.$cmd.aggregate).
 * Returns the collection's name within cmd (valid while cmd is), or NULL
 * for db.$cmd.
 */
static const char *
command_ns(char *ns, size_t size, const char *db, const char *name, const bson_t *cmd)
{
    bson_iter_t it;
    const char *coll = NULL;
    if (strcmp(name, "getMore") == 0) {
        if (bson_iter_init_find(&it, cmd, "collection") && BSON_ITER_HOLDS_UTF8(&it))
            coll = bson_iter_utf8(&it, NULL);
    } else if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it)) {
        coll = bson_iter_utf8(&it, NULL);
    }
    /* A collectionless aggregate ({aggregate: 1}) is mongod's db.$cmd.aggregate. */
    const char *none = strcmp(name, "aggregate") == 0 ? ".$cmd.aggregate" : ".$cmd";
    mf_strjoin(ns, size, db, coll ? "." : none, coll ? coll : ""); /* a cut falls between UTF-8 characters */
    return coll;
}

/* Registers the command (op's, with its session when it has one) for currentOp, under command_ns's namespace. */
static mf_curop_t *
curop_register(mf_engine_t *eng, mf_client_t *client, const mf_op_t *op, const char *db, const char *name,
               const bson_t *cmd)
{
    char ns[512], desc[32];
    command_ns(ns, sizeof(ns), db, name, cmd);
    mf_i64_str(desc + 4, sizeof(desc) - 4, client ? client->id : 0);
    memcpy(desc, "conn", 4);
    mf_curop_t *cop = mf_curop_begin(eng->curops, curop_type(name), ns, desc, cmd, client ? client->id : 0);
    if (client) {
        mf_curop_client_t who = {.remote = client->remote, .app = client->app_name, .metadata = client->metadata,
                                 .conn = client->conn};
        if (!mf_cmd_auth_user(client, &who.user, &who.user_db))
            who.user = who.user_db = NULL;
        if (op->has_lsid) {
            who.lsid_id = op->lsid_id;
            who.lsid_uid = op->lsid_uid;
        }
        mf_curop_set_client(cop, &who);
    }
    return cop;
}

/*
 * Logs a slow command (mf_profile_slow: slowms or more, 100 ms unless set,
 * drawn at sampleRate) as
 * mongod does at any profiling level: COMMAND id 51803 "Slow query" with
 * the namespace, the client's appName, the command (over 10 KB as
 * {$truncated: ...}; secrets blanked), ok or the error, the reply's size,
 * the protocol and durationMillis (time spent waiting, as a tailable
 * getMore's for documents, left out). Replication's own writes (an
 * internal client) are not logged.
 */
#define SLOW_LOG_MAX_JSON (16 * 1024) /* a longer line is written again with less of the command */

/* The documents a reply's cursor batch holds (mongod's nreturned), or -1 when it has no cursor. */
static int64_t
returned_of(const bson_t *reply)
{
    bson_iter_t it, b;
    if (!bson_iter_init_find(&it, reply, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &b))
        return -1;
    while (bson_iter_next(&b)) {
        const char *k = bson_iter_key(&b);
        if ((strcmp(k, "firstBatch") == 0 || strcmp(k, "nextBatch") == 0) && BSON_ITER_HOLDS_ARRAY(&b)) {
            bson_t arr;
            const uint8_t *d;
            uint32_t l;
            bson_iter_array(&b, &l, &d);
            return bson_init_static(&arr, d, l) ? (int64_t)bson_count_keys(&arr) : -1;
        }
    }
    return -1;
}

/* The id of a reply's cursor (0: exhausted), or -1 when it has none. */
static int64_t
cursor_id_of(const bson_t *reply)
{
    bson_iter_t it, b;
    if (!bson_iter_init_find(&it, reply, "cursor") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &b) ||
        !bson_iter_find(&b, "id") || !BSON_ITER_HOLDS_NUMBER(&b))
        return -1;
    return bson_iter_as_int64(&b);
}

/* The cursor a getMore command reads (its first field), or 0 for another command. */
static int64_t
getmore_id_of(const bson_t *cmd)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || strcmp(bson_iter_key(&it), "getMore") != 0 ||
        !BSON_ITER_HOLDS_INT64(&it))
        return 0;
    return bson_iter_int64(&it);
}

/*
 * The write counters of a profile entry (mongod's OpDebug additive
 * metrics), read from the reply: an insert's ninserted, a delete's
 * ndeleted, an update's nMatched, nModified and nUpserted; findAndModify's
 * from its lastErrorObject.
 */
static void
profile_write_counts(const char *name, const bson_t *reply, bson_t *e)
{
    bson_iter_t it, le;
    if (strcmp(name, "findAndModify") == 0 || strcmp(name, "findandmodify") == 0) {
        if (!bson_iter_init_find(&it, reply, "lastErrorObject") || !BSON_ITER_HOLDS_DOCUMENT(&it))
            return;
        bson_iter_recurse(&it, &le);
        int64_t n = 0;
        bool updated = false, upserted = false, has_updated = false;
        while (bson_iter_next(&le)) {
            const char *k = bson_iter_key(&le);
            if (strcmp(k, "n") == 0)
                n = bson_iter_as_int64(&le);
            else if (strcmp(k, "updatedExisting") == 0)
                has_updated = true, updated = bson_iter_as_bool(&le);
            else if (strcmp(k, "upserted") == 0)
                upserted = true;
        }
        if (!has_updated && !upserted) { /* a remove */
            mf_append_number(e, "ndeleted", n);
            return;
        }
        mf_append_number(e, "nMatched", updated ? n : 0);
        mf_append_number(e, "nModified", updated ? n : 0); /* a match it left as it was counts too: not told apart */
        mf_append_number(e, "nUpserted", upserted ? 1 : 0);
        return;
    }
    if (!bson_iter_init_find(&it, reply, "n") || !BSON_ITER_HOLDS_INT32(&it))
        return;
    int32_t n = bson_iter_int32(&it);
    if (strcmp(name, "insert") == 0) {
        mf_append_number(e, "ninserted", n);
    } else if (strcmp(name, "delete") == 0) {
        mf_append_number(e, "ndeleted", n);
    } else {
        int64_t nup = 0, nmod = 0;
        if (bson_iter_init_find(&it, reply, "upserted") && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_recurse(&it, &le);
            while (bson_iter_next(&le))
                nup++;
        }
        if (bson_iter_init_find(&it, reply, "nModified") && BSON_ITER_HOLDS_NUMBER(&it))
            nmod = bson_iter_as_int64(&it);
        mf_append_number(e, "nMatched", n - nup); /* the reply's n counts upserts too */
        mf_append_number(e, "nModified", nmod);
        mf_append_number(e, "nUpserted", nup);
    }
}

/*
 * The counts a slow-query line and a profile entry share, in mongod's
 * OpDebug::append order: cursorid (a getMore's own, also when it exhausts
 * the cursor), examined counts, hasSortStage, cursorExhausted, the write
 * counts of command name, writeConflicts; numbers as its appendNumber
 * writes them (ints while they fit).
 */
static void
op_debug_counts(const char *name, const bson_t *cmd, const bson_t *reply, const mf_curop_scan_t *scan, bson_t *out)
{
    int64_t cid = cursor_id_of(reply), req_cid = getmore_id_of(cmd);
    if (req_cid > 0 || cid > 0)
        mf_append_number(out, "cursorid", req_cid > 0 ? req_cid : cid);
    if (scan->plan[0] || scan->keys_examined || scan->docs_examined) {
        mf_append_number(out, "keysExamined", scan->keys_examined);
        mf_append_number(out, "docsExamined", scan->docs_examined);
    }
    if (scan->has_sort_stage)
        BSON_APPEND_BOOL(out, "hasSortStage", true);
    if (cid == 0)
        BSON_APPEND_BOOL(out, "cursorExhausted", true);
    profile_write_counts(name, reply, out);
    if (scan->write_conflicts > 0)
        mf_append_number(out, "writeConflicts", scan->write_conflicts);
}

static void
slow_log_limited(const mf_client_t *client, const char *ns, const bson_t *cmd, const bson_t *origin, const bson_t *reply,
                 int64_t millis, bool legacy, const mf_curop_scan_t *scan, const mf_error_t *err, size_t shown_limit)
{
    if (client != NULL && client->internal)
        return;
    char ctx[32];
    snprintf(ctx, sizeof(ctx), "conn%lld", (long long)(client ? client->id : 0));
    bson_t attr;
    bson_t *shown = mf_command_shown(cmd, shown_limit);
    bson_init(&attr);
    BSON_APPEND_UTF8(&attr, "type", "command");
    BSON_APPEND_BOOL(&attr, "isFromUserConnection", client != NULL && client->net);
    BSON_APPEND_UTF8(&attr, "ns", ns);
    if (client != NULL && client->app_name[0])
        BSON_APPEND_UTF8(&attr, "appName", client->app_name);
    BSON_APPEND_DOCUMENT(&attr, "command", shown);
    bson_t *shown_origin = origin != NULL ? mf_command_shown(origin, shown_limit) : NULL;
    if (shown_origin != NULL) {
        BSON_APPEND_DOCUMENT(&attr, "originatingCommand", shown_origin);
        bson_destroy(shown_origin);
    }
    if (scan->plan[0])
        BSON_APPEND_UTF8(&attr, "planSummary", scan->plan);
    bson_iter_t first;
    op_debug_counts(bson_iter_init(&first, cmd) && bson_iter_next(&first) ? bson_iter_key(&first) : "", cmd, reply,
                    scan, &attr);
    BSON_APPEND_INT32(&attr, "numYields", 0); /* the log's name for the profiler's numYield, as mongod */
    int64_t nret = returned_of(reply);
    if (nret >= 0)
        mf_append_number(&attr, "nreturned", nret);
    if (err != NULL) {
        BSON_APPEND_INT32(&attr, "ok", 0);
        BSON_APPEND_UTF8(&attr, "errMsg", err->msg);
        BSON_APPEND_UTF8(&attr, "errName", mf_err_codename(err->code));
        BSON_APPEND_INT32(&attr, "errCode", err->code);
    } else {
        BSON_APPEND_INT32(&attr, "ok", 1);
    }
    BSON_APPEND_INT32(&attr, "reslen", (int32_t)reply->len);
    BSON_APPEND_UTF8(&attr, "protocol", legacy ? "op_query" : "op_msg");
    mf_append_number(&attr, "durationMillis", millis);
    size_t len = 0;
    char *json = bson_as_relaxed_extended_json(&attr, &len);
    bson_destroy(&attr);
    bson_destroy(shown);
    if (json != NULL && len > SLOW_LOG_MAX_JSON && shown_limit > 1024) {
        /* Escaped bytes can render 10 KB of command as 60 KB of JSON: once more, with 1 KB of it. */
        bson_free(json);
        slow_log_limited(client, ns, cmd, origin, reply, millis, legacy, scan, err, 1024);
        return;
    }
    if (json != NULL)
        mf_log_attr(MF_LOG_INFO, "COMMAND", 51803, ctx, "Slow query", json);
    bson_free(json);
}

/*
 * write_statement_shown: what mongod's profiler and slow-query log show as
 * the command of an update or delete with one statement, which it records
 * as its own operation: the statement as its IDL writes it ({q, u,
 * arrayFilters, hint, multi, upsert, collation}; {q, limit, hint,
 * collation}), and the command's comment. Built for the profile entry
 * only: the slow-query line shows the whole command. A new document the
 * caller destroys, or NULL for any other command (and for several
 * statements, shown as the command).
 */
static bson_t *
write_statement_shown(const char *name, const bson_t *cmd, const mf_docseq_t *seqs, size_t nseqs)
{
    bool upd = strcmp(name, "update") == 0;
    if (!upd && strcmp(name, "delete") != 0)
        return NULL;
    const char *field = upd ? "updates" : "deletes";
    bson_t stmt;
    bool found = false;
    bson_iter_t it, el;
    if (bson_iter_init_find(&it, cmd, field) && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &el)) {
        const uint8_t *data;
        uint32_t len;
        if (bson_iter_next(&el) && BSON_ITER_HOLDS_DOCUMENT(&el)) {
            bson_iter_document(&el, &len, &data);
            found = bson_init_static(&stmt, data, len) && !bson_iter_next(&el);
        }
    } else {
        for (size_t i = 0; i < nseqs && !found; i++) {
            if (strcmp(seqs[i].identifier, field) == 0 && seqs[i].ndocs == 1) {
                bson_init_static(&stmt, bson_get_data(&seqs[i].docs[0]), seqs[i].docs[0].len);
                found = true;
            }
        }
    }
    if (!found)
        return NULL;
    static const char *const upd_order[] = {"q",      "u",         "c",    "arrayFilters", "hint", "multi",
                                            "upsert", "collation", "sort", NULL};
    static const char *const del_order[] = {"q", "limit", "hint", "collation", NULL};
    const char *const *order = upd ? upd_order : del_order;
    bson_t *out = bson_new();
    for (int k = 0; order[k] != NULL; k++) {
        if (bson_iter_init_find(&it, &stmt, order[k]))
            bson_append_iter(out, order[k], -1, &it);
        else if (upd && (strcmp(order[k], "multi") == 0 || strcmp(order[k], "upsert") == 0))
            bson_append_bool(out, order[k], -1, false); /* the IDL's defaults, always written */
    }
    /* The command's comment goes with each statement's description, as mongod's setCurOpInfoAndEnsureStarted. */
    if (bson_iter_init_find(&it, cmd, "comment"))
        bson_append_iter(out, "comment", -1, &it);
    return out;
}

/*
 * A finished command's <db>.system.profile entry into e (initialised here;
 * the caller destroys it), under ns (command_ns's): what the profiler
 * writes and what a profile filter matches.
 */
static void
profile_entry(const mf_client_t *client, const char *ns, const char *name, const bson_t *cmd, const bson_t *shown,
              const bson_t *origin, const bson_t *reply, int64_t millis, bool legacy, const mf_curop_scan_t *scan,
              const mf_error_t *err, bson_t *out)
{
    bson_t e;
    bson_init(&e);
    BSON_APPEND_UTF8(&e, "op", curop_type(name));
    BSON_APPEND_UTF8(&e, "ns", ns);
    bson_t *redacted = shown != NULL ? NULL : mf_command_redacted(cmd); /* pwd, payload: "xxx" */
    if (shown != NULL && shown->len < 64 * 1024) {
        BSON_APPEND_DOCUMENT(&e, "command", shown); /* one write statement: the statement */
    } else if (cmd->len < 64 * 1024) {
        BSON_APPEND_DOCUMENT(&e, "command", redacted ? redacted : cmd);
    } else {
        bson_t t;
        BSON_APPEND_DOCUMENT_BEGIN(&e, "command", &t);
        BSON_APPEND_UTF8(&t, "$truncated", name);
        bson_append_document_end(&e, &t);
    }
    if (origin != NULL) {
        bson_t *shown_origin = mf_command_shown(origin, 64 * 1024);
        BSON_APPEND_DOCUMENT(&e, "originatingCommand", shown_origin);
        bson_destroy(shown_origin);
    }
    op_debug_counts(name, cmd, reply, scan, &e);
    BSON_APPEND_INT32(&e, "numYield", 0); /* mayfly's reads never yield their snapshot mid-batch */
    int64_t nret = returned_of(reply);
    if (nret >= 0)
        mf_append_number(&e, "nreturned", nret);
    if (err != NULL) {
        BSON_APPEND_UTF8(&e, "errMsg", err->msg);
        BSON_APPEND_INT32(&e, "errCode", err->code);
        BSON_APPEND_UTF8(&e, "errName", mf_err_codename(err->code));
    }
    BSON_APPEND_INT32(&e, "responseLength", (int32_t)reply->len);
    BSON_APPEND_UTF8(&e, "protocol", legacy ? "op_query" : "op_msg");
    mf_append_number(&e, "millis", millis);
    if (scan->plan[0])
        BSON_APPEND_UTF8(&e, "planSummary", scan->plan);
    BSON_APPEND_DATE_TIME(&e, "ts", mf_now_ms());
    /* As mongod's profiler: the client's address without its port, then who ran it ("user@db", "" for nobody). */
    const char *remote = client ? client->remote : "";
    const char *colon = strrchr(remote, ':');
    bson_append_utf8(&e, "client", -1, remote, colon != NULL ? (int)(colon - remote) : -1);
    if (client != NULL && client->app_name[0])
        BSON_APPEND_UTF8(&e, "appName", client->app_name);
    const char *user = NULL, *udb = NULL;
    bson_t users, u;
    BSON_APPEND_ARRAY_BEGIN(&e, "allUsers", &users);
    if (client != NULL && mf_cmd_auth_user(client, &user, &udb)) {
        BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
        BSON_APPEND_UTF8(&u, "user", user);
        BSON_APPEND_UTF8(&u, "db", udb);
        bson_append_document_end(&users, &u);
    }
    bson_append_array_end(&e, &users);
    if (user != NULL) {
        char full[400];
        snprintf(full, sizeof(full), "%s@%s", user, udb);
        BSON_APPEND_UTF8(&e, "user", full);
    } else {
        BSON_APPEND_UTF8(&e, "user", "");
    }
    if (redacted != NULL)
        bson_destroy(redacted);
    bson_steal(out, &e);
}

/*
 * getmore_with_comment: a getMore without a comment of its own as the
 * profiler and the slow-query log show it: with its cursor's opening
 * command's comment appended, as mongod's appendCommentField (curop.cpp;
 * the getMore's operation takes that comment, getmore_cmd.cpp). NULL when
 * there is nothing to add; otherwise the caller's (bson_destroy).
 */
static bson_t *
getmore_with_comment(const char *name, const bson_t *cmd, const bson_t *origin)
{
    bson_iter_t it;
    if (origin == NULL || name == NULL || strcmp(name, "getMore") != 0 || bson_has_field(cmd, "comment") ||
        !bson_iter_init_find(&it, origin, "comment"))
        return NULL;
    bson_t *out = bson_copy(cmd);
    bson_append_iter(out, "comment", -1, &it);
    return out;
}

/*
 * What a finished command leaves besides its reply, as mongod's
 * CurOp::completeAndLogOperation: one draw decides whether it is slow
 * (mf_profile_slow: slowms or more, sampled at sampleRate); a slow one is
 * logged, and profiled at level 1; level 2 profiles every command.
 */
static void
op_finished(mf_engine_t *eng, const mf_client_t *client, const char *db, const char *name, const bson_t *cmd,
            const mf_docseq_t *seqs, size_t nseqs, const bson_t *origin, const bson_t *reply, int64_t millis,
            bool legacy, const mf_curop_scan_t *scan, const mf_error_t *err)
{
    /* serverStatus metrics.queryExecutor / metrics.operation: only operations that read or conflicted pay for it. */
    if (scan->keys_examined > 0)
        atomic_fetch_add_explicit(&eng->qe_scanned, scan->keys_examined, memory_order_relaxed);
    if (scan->docs_examined > 0)
        atomic_fetch_add_explicit(&eng->qe_scanned_objects, scan->docs_examined, memory_order_relaxed);
    if (scan->write_conflicts > 0)
        atomic_fetch_add_explicit(&eng->write_conflicts, scan->write_conflicts, memory_order_relaxed);
    if (scan->has_sort_stage)
        atomic_fetch_add_explicit(&eng->scan_and_order, 1, memory_order_relaxed);
    if (scan->collscan && strcmp(name, "getMore") != 0) { /* a query counts once, when it starts */
        bson_iter_t t;
        atomic_fetch_add_explicit(&eng->qe_collscans, 1, memory_order_relaxed);
        if (!(bson_iter_init_find(&t, cmd, "tailable") && bson_iter_as_bool(&t)))
            atomic_fetch_add_explicit(&eng->qe_collscans_nontailable, 1, memory_order_relaxed);
    }
    char ns[512];
    const char *coll = NULL;
    bson_t entry, *shown = NULL;
    bool have_entry = false, slow, profiled;
    int level = 0;
    bson_t *commented = getmore_with_comment(name, cmd, origin);
    if (commented != NULL)
        cmd = commented;
    mf_profile_filter_t *filter = mf_profile_filter_and_level(eng->profiler, db, &level);
    if (filter != NULL) {
        /* The database's filter decides, over the operation's profile entry, in place of slowms and sampleRate. */
        coll = command_ns(ns, sizeof(ns), db, name, cmd);
        shown = write_statement_shown(name, cmd, seqs, nseqs);
        profile_entry(client, ns, name, cmd, shown, origin, reply, millis, legacy, scan, err, &entry);
        have_entry = true;
        slow = mf_profile_filter_match(filter, &entry);
        mf_profile_filter_release(filter);
        profiled = level == 2 || (level == 1 && slow);
    } else {
        slow = mf_profile_slow(eng->profiler, millis);
        profiled = mf_profile_wants(eng->profiler, db, slow);
        if (!slow && !profiled)
            goto done;
        coll = command_ns(ns, sizeof(ns), db, name, cmd);
    }
    /*
     * Written after the command released its locks. Not a transaction's
     * statement (its entry would be written inside the transaction), nor a
     * command on system.profile itself.
     */
    if (profiled && !mf_cmd_in_txn() && !(coll != NULL && strcmp(coll, "system.profile") == 0)) {
        if (!have_entry) {
            shown = write_statement_shown(name, cmd, seqs, nseqs);
            profile_entry(client, ns, name, cmd, shown, origin, reply, millis, legacy, scan, err, &entry);
        }
        have_entry = true;
        mf_profile_write(eng, db, &entry);
    }
    if (have_entry)
        bson_destroy(&entry);
    if (slow)
        slow_log_limited(client, ns, cmd, origin, reply, millis, legacy, scan, err, 10 * 1024);
    if (shown != NULL)
        bson_destroy(shown);
done:
    if (commented != NULL)
        bson_destroy(commented);
}

/*
 * A command's `let` document: its variables are visible as $$name to every
 * expression the command evaluates ($expr in filters, pipelines, updates).
 * Each value is an expression evaluated once, before the command runs.
 */
typedef struct let_frame {
    const char **names;  /* owned array (names point into the command) */
    bson_value_t *vals;  /* owned array, each value owned */
    mf_expr_vars_t frame;
    bool installed;
    bool inline_arrays;        /* names/vals are one_name/one_val below (USER_ROLES alone) */
    bool roles_borrowed;       /* vals[0] ($$USER_ROLES) is the static empty array */
    const char *one_name[1];
    bson_value_t one_val[1];
} let_frame_t;

/* The bytes of an empty BSON document: $$USER_ROLES when no one is authenticated (borrowed, never freed). */
static const uint8_t empty_array_bytes[5] = {5, 0, 0, 0, 0};

/*
 * user_roles_value: *v becomes $$USER_ROLES for op (mf_cmd_user_roles),
 * owned by *v, or the static empty array (not to be destroyed, *borrowed
 * set) when no one is authenticated on the connection.
 */
static void
user_roles_value(mf_op_t *op, bson_value_t *v, bool *borrowed)
{
    const char *user, *udb;
    *borrowed = op->client == NULL || !mf_cmd_auth_user(op->client, &user, &udb);
    v->value_type = BSON_TYPE_ARRAY;
    if (*borrowed) {
        v->value.v_doc.data = (uint8_t *)empty_array_bytes;
        v->value.v_doc.data_len = sizeof(empty_array_bytes);
        return;
    }
    bson_t arr;
    uint32_t len = 0;
    mf_cmd_user_roles(op, &arr);
    v->value.v_doc.data = bson_destroy_with_steal(&arr, true, &len); /* the buffer, not another copy */
    v->value.v_doc.data_len = len;
}

/*
 * let_begin: evaluates the command's let variables and installs them as the
 * thread's ambient frame. MongoDB sets no limit on their number, so the
 * arrays grow with the document (counted first). On failure nothing is left
 * allocated; on success let_end frees everything.
 */
static int
let_begin(mf_op_t *op, let_frame_t *lf)
{
    bson_iter_t it, li;
    size_t n = 0, cap = 0;
    memset(lf, 0, sizeof(*lf));
    bool has_let = mf_op_find(op, "let", &it);
    bson_iter_t ei;
    const char *owner = op->name; /* the command whose field let is, for messages */
    /* explain: the explained command's let, as that command would take it. */
    if (!has_let && strcmp(op->name, "explain") == 0 && mf_op_find(op, "explain", &ei) &&
        BSON_ITER_HOLDS_DOCUMENT(&ei) && bson_iter_recurse(&ei, &it) && bson_iter_next(&it)) {
        owner = bson_iter_key(&it);
        has_let = strcmp(owner, "let") == 0 || bson_iter_find(&it, "let");
    }
    /* $$CLUSTER_TIME exists on a replica-set member (mongod: only there), bound when the command names it. */
    bool cluster = op->eng->repl != NULL && op->eng->repl->op_time != NULL &&
                   memmem(bson_get_data(op->cmd), op->cmd->len, "$$CLUSTER_TIME", 14) != NULL;
    if (has_let && !BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.let' is the wrong type '%s', expected type 'object'",
                          owner, mf_type_name(bson_iter_type(&it)));
    if (has_let) {
        bson_iter_recurse(&it, &li);
        while (bson_iter_next(&li))
            cap++;
    }
    cap += cluster ? 1 : 0;
    /*
     * $$USER_ROLES is bound for every command: a view's stored pipeline or a
     * $lookup'd view may name it where the command does not (mongod binds it
     * wherever a query references it, expression_context.cpp
     * initializeReferencedSystemVariables). Alone it needs no allocation.
     * With enableAccessToUserRoles off it is not bound (51144 where used).
     */
    bool roles = mf_param_value(op->eng->prm_user_roles) != 0;
    cap += roles ? 1 : 0;
    if (cap == 0)
        return 0;
    lf->inline_arrays = cap == 1;
    lf->names = lf->inline_arrays ? lf->one_name : mf_calloc(cap, sizeof(*lf->names));
    lf->vals = lf->inline_arrays ? lf->one_val : mf_calloc(cap, sizeof(*lf->vals));
    if (roles) {
        bool roles_borrowed;
        user_roles_value(op, &lf->vals[n], &roles_borrowed);
        lf->names[n++] = "USER_ROLES";
        lf->roles_borrowed = roles_borrowed;
    }
    if (cluster) {
        uint32_t secs, inc;
        op->eng->repl->op_time(op->eng->repl_arg, &secs, &inc);
        lf->vals[n].value_type = BSON_TYPE_TIMESTAMP;
        lf->vals[n].value.v_timestamp.timestamp = secs;
        lf->vals[n].value.v_timestamp.increment = inc;
        lf->names[n++] = "CLUSTER_TIME";
    }
    if (has_let)
        bson_iter_recurse(&it, &li);
    bson_t empty = BSON_INITIALIZER;
    /* The builtins bound so far are visible to the let values themselves (let: {r: "$$USER_ROLES"}). */
    lf->frame.names = lf->names;
    lf->frame.vals = lf->vals;
    lf->frame.n = n;
    lf->frame.up = mf_expr_vars_current();
    mf_expr_vars_set(&lf->frame);
    while (has_let && bson_iter_next(&li) && n < cap) {
        const char *name = bson_iter_key(&li);
        /*
         * A system variable that carries a value (variables.cpp
         * kSystemVarValidators: NOW, CLUSTER_TIME, JS_SCOPE, IS_MR,
         * USER_ROLES) is an internal constant only an internal client may
         * set (validateVariable, 4738901); other reserved names fail the
         * user-variable name check below.
         */
        if (!(op->client != NULL && op->client->internal) &&
            (strcmp(name, "NOW") == 0 || strcmp(name, "CLUSTER_TIME") == 0 || strcmp(name, "JS_SCOPE") == 0 ||
             strcmp(name, "IS_MR") == 0 || strcmp(name, "USER_ROLES") == 0)) {
            mf_err_set(&op->err, MF_E_Location4738901, "Attempt to set internal constant: %s", name);
            goto fail;
        }
        if (mf_expr_check_var_name(name, &op->err) != 0)
            goto fail;
        mf_expr_t *e = mf_expr_parse(bson_iter_value(&li), &op->err);
        if (e == NULL)
            goto fail;
        /* seedVariablesWithLetParameters: a let value runs before any document is read (its message as mongod's). */
        if (mf_expr_reads_document(e)) {
            mf_expr_free(e);
            mf_err_set(&op->err, MF_E_Location4890500, "Command let Expression tried to access a field, but this is "
                       "not allowed becauseCommand let Expressions run before the query examines any documents.");
            goto fail;
        }
        int r = mf_expr_eval(e, &empty, &lf->vals[n], &op->err);
        mf_expr_free(e);
        if (r != 0)
            goto fail;
        lf->names[n++] = name;
        lf->frame.n = n; /* defined before the next is parsed: let: {a: 1, b: "$$a"} (mongod's defineVariable order) */
    }
    lf->frame.n = n;
    lf->installed = true;
    return 0;
fail:
    mf_expr_vars_set(lf->frame.up);
    for (size_t i = lf->roles_borrowed ? 1 : 0; i < n; i++)
        bson_value_destroy(&lf->vals[i]);
    if (!lf->inline_arrays) {
        free(lf->names);
        free(lf->vals);
    }
    lf->names = NULL;
    lf->vals = NULL;
    return -1;
}

static void
let_end(let_frame_t *lf)
{
    if (!lf->installed)
        return;
    mf_expr_vars_set(lf->frame.up);
    for (size_t i = lf->roles_borrowed ? 1 : 0; i < lf->frame.n; i++)
        bson_value_destroy(&lf->vals[i]);
    if (!lf->inline_arrays) {
        free(lf->names);
        free(lf->vals);
    }
    lf->names = NULL;
    lf->vals = NULL;
    lf->installed = false;
}

/*
 * maxTimeMS, a generic argument: a non-negative integer that fits in 32 bits
 * (else 2 BadValue). It becomes the operation's deadline (common/curop.h),
 * which every yield point checks, failing with 50 MaxTimeMSExpired; 0 means
 * no limit.
 */
static int
time_limit(mf_op_t *op, int64_t *ms)
{
    bson_iter_t it;
    *ms = 0;
    if (!mf_op_find(op, "maxTimeMS", &it))
        return 0;
    const bson_value_t *v = bson_iter_value(&it);
    bool agg = strcmp(op->name, "aggregate") == 0;
    /* getMore's own field and aggregate's IDL one (null aside) are safeInt64s: a wrong type is 14. */
    if (!mf_value_is_number(v) && (strcmp(op->name, "getMore") == 0 || (agg && v->value_type != BSON_TYPE_NULL)))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field '%s.maxTimeMS' is the wrong type '%s', expected types '[long, int, decimal, double']",
                          op->name, mf_type_name(v->value_type));
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_BadValue, "maxTimeMS must be a number");
    /* parseMaxTimeMS: the value as safeNumberLong gives it (NaN 0, saturated past the long range, truncated). */
    double d = mf_value_as_double(v);
    int64_t n = isnan(d) ? 0 : d >= 9223372036854775807.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN
              : v->value_type == BSON_TYPE_INT64 ? v->value.v_int64 : (int64_t)d;
    if (agg && (n < 0 || d < 0)) /* its IDL validator, gte: 0, on the value rounded down */
        return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'maxTimeMS' value must be >= 0, actual value '%" PRId64 "'",
                          v->value_type == BSON_TYPE_DOUBLE && d > -9223372036854775808.0 ? (int64_t)floor(d) : n);
    if (n < 0 || n > INT32_MAX)
        return mf_err_set(&op->err, MF_E_BadValue, "%" PRId64 " value for maxTimeMS is out of range [0, 2147483647]", n);
    if (d != floor(d))
        return mf_err_set(&op->err, MF_E_BadValue, "maxTimeMS has non-integral value");
    *ms = n;
    return 0;
}

/*
 * The collation a CRUD command runs under (doc/collation.h): its
 * "collation" argument (explain: the explained command's), else the default
 * of the collection or view it names; NULL for the simple one. Installed as
 * the thread's collation for the handler, so every comparison follows it.
 */
/*
 * A command naming a view may give a collation only if it is the view's own
 * (mongod: 167 OptionNotSupportedOnView "Cannot override a view's default
 * collation"); c is the command's, parsed.
 */
static int
view_collation_check(mf_op_t *op, const bson_t *cmd, const mf_collation_t *c)
{
    bson_iter_t it;
    int rc = 0;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *v = mf_catalog_coll_find(op->eng->cat, op->db, bson_iter_utf8(&it, NULL));
    if (v != NULL && v->is_view && !mf_cmd_view_collation_is(v, c))
        rc = mf_err_set(&op->err, MF_E_OptionNotSupportedOnView, "Cannot override a view's default collation");
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

static int
collation_begin(mf_op_t *op, const mf_cmd_def_t *def, mf_collation_t **out)
{
    bson_iter_t it, in;
    const bson_t *cmd = op->cmd;
    bson_t inner, spec;
    bool have = false;
    *out = NULL;
    if (!is_data_command(def) && strcmp(def->name, "explain") != 0)
        return 0;
    if (strcmp(def->name, "explain") == 0) {
        const uint8_t *d;
        uint32_t l;
        if (!bson_iter_init_find(&it, cmd, "explain") || !BSON_ITER_HOLDS_DOCUMENT(&it))
            return 0;
        bson_iter_document(&it, &l, &d);
        if (!bson_init_static(&inner, d, l))
            return 0;
        cmd = &inner;
    }
    if (bson_iter_init_find(&it, cmd, "collation")) {
        if (mf_collation_from_value(bson_iter_value(&it), out, &op->err) != 0)
            return -1;
        if (view_collation_check(op, cmd, *out) == 0)
            return 0;
        mf_collation_free(*out);
        *out = NULL;
        return -1;
    }
    if (!mf_catalog_has_collations(op->eng->cat) || !bson_iter_init(&it, cmd) || !bson_iter_next(&it) ||
        !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, bson_iter_utf8(&it, NULL));
    if (c != NULL && c->options != NULL && bson_iter_init_find(&in, c->options, "collation") &&
        BSON_ITER_HOLDS_DOCUMENT(&in)) {
        const uint8_t *d;
        uint32_t l;
        bson_iter_document(&in, &l, &d);
        bson_init(&spec);
        bson_t tmp;
        if (bson_init_static(&tmp, d, l))
            bson_concat(&spec, &tmp);
        have = true;
    }
    mf_catalog_unlock(op->eng->cat);
    if (!have)
        return 0;
    int rc = mf_collation_new(&spec, out, &op->err);
    bson_destroy(&spec);
    return rc;
}

void
mf_cmd_error_reply(bson_t *reply, const mf_error_t *err)
{
    bson_reinit(reply);
    BSON_APPEND_DOUBLE(reply, "ok", 0.0);
    BSON_APPEND_UTF8(reply, "errmsg", err->msg);
    int code = err->code ? err->code : MF_E_InternalError;
    const char *name = mf_err_codename(code);
    char located[32];
    if (strcmp(name, "UnknownError") == 0 && code != MF_E_UnknownError) {
        /* A code outside the table (failCommand's errorCode): mongod names it Location<code>. */
        snprintf(located, sizeof(located), "Location%d", code);
        name = located;
    }
    BSON_APPEND_INT32(reply, "code", code);
    BSON_APPEND_UTF8(reply, "codeName", name);
    if (err->info_len > 0) {
        bson_t info;
        if (bson_init_static(&info, err->info, err->info_len))
            bson_concat(reply, &info);
    }
}

/*
 * serverStatus asserts.user counts a write command's write errors (each one
 * a uassert in mongod, caught into writeErrors) as well as failed commands.
 */
static void
count_write_errors(mf_engine_t *eng, const bson_t *reply)
{
    bson_iter_t it, a;
    int64_t n = 0;
    if (!bson_iter_init_find(&it, reply, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &a))
        return;
    while (bson_iter_next(&a))
        n++;
    atomic_fetch_add_explicit(&eng->asserts_user, n, memory_order_relaxed);
}

/*
 * An insert's, update's, delete's or bulkWrite's statements: its documents,
 * updates, deletes or ops, in its body or a document sequence (0 when it has none or they
 * are not an array: the handler refuses it); 1 for any other command.
 */
static int64_t
stmt_count(mf_op_t *op, const char *name)
{
    const char *field = strcmp(name, "insert") == 0   ? "documents"
                        : strcmp(name, "update") == 0 ? "updates"
                        : strcmp(name, "delete") == 0 ? "deletes"
                        : strcmp(name, "bulkWrite") == 0 ? "ops"
                                                      : NULL;
    bson_iter_t it, a;
    int64_t n = 0;
    if (field == NULL)
        return 1;
    if (mf_op_find(op, field, &it)) {
        if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &a))
            while (bson_iter_next(&a))
                n++;
        return n;
    }
    for (size_t i = 0; i < op->nseqs; i++)
        if (strcmp(op->seqs[i].identifier, field) == 0)
            return (int64_t)op->seqs[i].ndocs;
    return 0;
}

void
mf_cmd_run(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd, const mf_docseq_t *seqs,
           size_t nseqs, bool legacy, bson_t *reply)
{
    mf_op_t op;
    bson_iter_t it;
    const mf_cmd_def_t *def = NULL;
    int def_index = -1; /* def's counters in eng->cmd_counts */
    mf_curop_scan_t scan = {0}; /* what its queries read (the profiler's and slow log's figures) */
    bson_t *origin = NULL;      /* a getMore's cursor's opening command (mf_curop_take_origin), owned */
    mf_curop_t *cop = NULL;
    wc_unmet_t unmet = {.code = 0};
    int64_t started_ms = -1, paused_ms = 0; /* paused: waited, not worked (mf_curop_add_paused) */
    let_frame_t lf;
    bson_t fp_labels; /* failCommand's errorLabels, if it gave any (an array) */
    mf_stmt_resume_t resume; /* filled by command_begin when it returns 2 */
    mf_collation_t *coll = NULL; /* the command's collation, installed while the handler runs */

    (void)mf_matcher_take_failure(NULL); /* an $expr failure a validator left on this thread is not this command's */
    mf_ttl_group_poll(eng->ttl); /* SPEC D9: the clients' look at a lowered scheduling group */

    /* A multi-document transaction's command runs on the transaction's thread (cmd_txn.c). */
    if (mf_cmd_txn_route(eng, client, db, cmd, seqs, nseqs, legacy, reply))
        return;
    bool in_txn = mf_cmd_in_txn();
    bool txn_ran = false; /* in a transaction: its handler ran (a failure then aborts the transaction) */
    bson_init(&fp_labels);
    memset(&lf, 0, sizeof(lf));
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
    def = lookup(eng, op.name, &def_index);
    if (def != NULL)
        atomic_fetch_add_explicit(&cmd_counts(eng)[2 * def_index], 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&eng->cmd_unknown, 1, memory_order_relaxed);
    if (def == NULL) {
        /* commitTransaction / abortTransaction exist in mongod: answer as a transaction's first command is. */
        if (strcmp(op.name, "commitTransaction") != 0 && strcmp(op.name, "abortTransaction") != 0)
            mf_err_set(&op.err, MF_E_CommandNotFound, "no such command: '%s'", op.name);
        else
            (void)check_txn_fields(&op);
        goto fail;
    }
    if (!(def->flags & MF_CMD_NO_DB) && mf_catalog_check_db_name(db, &op.err) != 0)
        goto fail;
    if ((def->flags & MF_CMD_ADMIN_ONLY) && strcmp(db, "admin") != 0) {
        mf_err_set(&op.err, MF_E_Unauthorized, "%s may only be run against the admin database.", op.name);
        goto fail;
    }
    if (mf_cmd_authorize(&op, def->name) != 0)
        goto fail;
    if (!(def->flags & MF_CMD_WRITE) && strcmp(def->name, "find") != 0 && strcmp(def->name, "getMore") != 0)
        atomic_fetch_add(&eng->op_command, 1);
    if (check_fields(def, &op) != 0 || check_txn_fields(&op) != 0 || check_write_concern(&op, &unmet) != 0 ||
        mf_cmd_generic_check(&op, def->name) != 0 || mf_cmd_check_names(&op) != 0)
        goto fail;
    /* Logical sessions: the lsid a command carries is validated and its session's lastUse refreshed (cmd_sessions.c). */
    if (mf_cmd_session_use(&op) != 0)
        goto fail;
    if (eng->repl != NULL && !(client != NULL && client->internal) &&
        eng->repl->admit(eng->repl_arg, db, in_txn ? MF_REPL_WRITE : repl_kind(def, cmd), secondary_ok(cmd),
                         &op.err) != 0)
        goto fail;
    cop = curop_register(eng, client, &op, db, def->name, cmd);
    /* Client commands only: replication's applier (an internal client) is the server's own work. */
    mf_curop_set_latency_kind(cop, client != NULL && client->internal ? MF_LAT_NONE : latency_kind(def->name));
    mf_curop_set_no_table_scan(cop, !(client != NULL && client->internal) && mf_param_value(eng->prm_notablescan) != 0);
    mf_curop_set_current(cop);
    op.sess = mf_storage_session(eng->st);
    started_ms = mf_mono_ms();
    int64_t limit_ms;
    if (time_limit(&op, &limit_ms) != 0 || let_begin(&op, &lf) != 0)
        goto fail;
    if (limit_ms > 0)
        mf_curop_set_deadline(cop, mf_mono_ms() + limit_ms);
    if (limit_ms > 0 && mf_failpoint_max_time(&op)) {
        mf_err_set(&op.err, MF_E_MaxTimeMSExpired, "operation exceeded time limit");
        goto fail_let;
    }
    if (mf_failcommand_before(&op, &fp_labels) != 0)
        goto fail_let;
    if (collation_begin(&op, def, &coll) != 0)
        goto fail_let;
    mf_collation_set_current(coll);
    /* serverStatus globalLock.activeClients: the document readers and writers running now. */
    _Atomic int64_t *active = NULL;
    if (is_data_command(def)) {
        atomic_fetch_add(&eng->fg_ops, 1);
        bool writes = (def->flags & MF_CMD_WRITE) || strcmp(def->name, "findAndModify") == 0 ||
                      strcmp(def->name, "findandmodify") == 0;
        active = writes ? &eng->active_writers : &eng->active_readers;
        atomic_fetch_add_explicit(active, 1, memory_order_relaxed);
    }
    int brc = wait_after_cluster_time(&op) != 0 ? -1
              : atomic_load_explicit(&eng->fsync_locked, memory_order_relaxed) && gated_by_fsync_lock(def) &&
                        mf_engine_write_gate(eng, &op.err) != 0 ? -1
              : eng->repl != NULL ? eng->repl->command_begin(eng->repl_arg, def->name, cmd, stmt_count(&op, def->name),
                                                             wtimeout_of(cmd), reply, &resume, &op.err)
                                  : 0;
    if (brc == 2) {
        op.resume = &resume; /* a retry that runs the statements its first attempt did not */
        brc = 0;
    }
    bool txn_done = false; /* a transaction's create, run outside it */
    txn_ran = brc == 0; /* a refusal of the preparation is the command's own failure: it aborts the transaction */
    if (brc == 0 && in_txn && mf_cmd_txn_prepare(&op, &txn_done) != 0)
        brc = -1;
    int hrc = brc == 0 ? (txn_done ? 0 : def->fn(&op)) : brc < 0 ? -1 : 0;
    if (hrc == 0 && in_txn && mf_cmd_txn_write_error(&op))
        hrc = -1;
    if (active != NULL)
        atomic_fetch_sub_explicit(active, 1, memory_order_relaxed);
    mf_collation_set_current(NULL);
    mf_collation_free(coll);
    coll = NULL;
    if (!in_txn && mf_catalog_session_end_all())
        mf_log(MF_LOG_ERROR, "COMMAND", "%s returned with collections still locked; released", def->name);
    if (hrc == 0)
        name_tables_in_write_errors(eng, reply);
    if (eng->repl != NULL) {
        eng->repl->command_end(eng->repl_arg); /* no lock held: a DDL waits here for its entry */
        if (hrc == 0 && not_primary_write_error(reply, &op.err))
            hrc = -1; /* as mongod: the command fails as a whole, so drivers find the new primary and retry */
        else if (hrc == 0)
            wtimeout_to_write_concern_error(reply);
        if (hrc == 0 && unmet.wnum > 1 && eng->repl->wait_members != NULL &&
            !bson_has_field(reply, "writeConcernError")) {
            mf_error_t werr;
            int64_t w0 = mf_mono_ms();
            int wrc = eng->repl->wait_members(eng->repl_arg, unmet.wnum, wtimeout_of(cmd), &werr);
            atomic_fetch_add(&eng->wc_waits, 1);
            atomic_fetch_add(&eng->wc_wait_ms, mf_mono_ms() - w0);
            if (wrc != 0) {
                if (werr.code == MF_E_WriteConcernFailed)
                    atomic_fetch_add(&eng->wc_timeouts, 1);
                append_members_error(reply, &werr, &unmet.wv, wtimeout_of(cmd));
            }
        }
    }
    let_end(&lf);
    if (hrc == 0)
        mf_failcommand_after(&op, reply);
    if (hrc != 0 && eng->repl != NULL && op.err.code == MF_E_WriteConcernFailed && wtimeout_reply(eng, def->name, reply))
        hrc = 0;
    if (hrc != 0) {
        if (mf_txn_active(op.sess))
            mf_txn_abort(op.sess);
        goto fail;
    }
    if (mf_txn_active(op.sess))
        mf_txn_abort(op.sess); /* a handler that forgot its transaction gets nothing committed */
    mf_storage_session_release(op.sess);
    paused_ms = mf_curop_paused_us(cop) / 1000;
    mf_curop_scan_of(cop, &scan);
    origin = mf_curop_take_origin(cop);
    mf_curop_end(cop);
    mf_curop_set_current(NULL);
    if (unmet.code != 0 && !bson_has_field(reply, "writeConcernError")) {
        bson_t wce, info, wc;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "writeConcernError", &wce);
        BSON_APPEND_INT32(&wce, "code", unmet.code);
        BSON_APPEND_UTF8(&wce, "codeName", mf_err_codename(unmet.code));
        BSON_APPEND_UTF8(&wce, "errmsg", unmet.msg);
        BSON_APPEND_DOCUMENT_BEGIN(&wce, "errInfo", &info);
        BSON_APPEND_DOCUMENT_BEGIN(&info, "writeConcern", &wc);
        bson_append_value(&wc, "w", 1, &unmet.w);
        int64_t wt = wtimeout_of(cmd); /* the concern as given, as mongod echoes it (an int) */
        BSON_APPEND_INT32(&wc, "wtimeout", wt > INT32_MAX ? INT32_MAX : (int32_t)wt);
        BSON_APPEND_UTF8(&wc, "provenance", "clientSupplied");
        bson_append_document_end(&info, &wc);
        bson_append_document_end(&wce, &info);
        bson_append_document_end(reply, &wce);
    }
    if (def->flags & MF_CMD_WRITE)
        count_write_errors(eng, reply);
    BSON_APPEND_DOUBLE(reply, "ok", 1.0);
    append_cluster_time(eng, reply);
    bson_destroy(&fp_labels);
    if (op.err_extra != NULL)
        bson_destroy(op.err_extra);
    int64_t took_ms = mf_mono_ms() - started_ms - paused_ms;
    op_finished(eng, client, db, def->name, cmd, seqs, nseqs, origin, reply, took_ms, legacy, &scan, NULL);
    if (origin != NULL)
        bson_destroy(origin);
    if (mf_cmd_log_commands(eng))
        mf_log(MF_LOG_DEBUG, "COMMAND", "conn%lld: %s on %s ok, %lld ms", (long long)(client ? client->id : 0),
               def->name, db, (long long)(mf_mono_ms() - started_ms));
    return;

fail_let:
    let_end(&lf);
fail:
    if (def != NULL)
        atomic_fetch_add_explicit(&cmd_counts(eng)[2 * def_index + 1], 1, memory_order_relaxed);
    mf_collation_set_current(NULL);
    mf_collation_free(coll);
    if (op.sess)
        mf_storage_session_release(op.sess);
    if (cop) {
        paused_ms = mf_curop_paused_us(cop) / 1000;
        mf_curop_scan_of(cop, &scan);
        origin = mf_curop_take_origin(cop);
        mf_curop_end(cop);
        mf_curop_set_current(NULL);
    }
    if (op.err.code == 0)
        mf_err_set(&op.err, MF_E_InternalError, "command failed without an error message");
    atomic_fetch_add_explicit(&eng->asserts_user, 1, memory_order_relaxed); /* mongod's uassert: asserts.user */
    if (op.err.code == MF_E_TooManyFilesOpen && eng->cat != NULL)
        mf_catalog_name_tables(eng->cat, op.err.msg, sizeof(op.err.msg)); /* storage names tables, users namespaces */
    mf_cmd_error_reply(reply, &op.err);
    if (op.err_extra != NULL) {
        bson_concat(reply, op.err_extra);
        bson_destroy(op.err_extra);
    }
    if (eng->repl != NULL)
        add_not_primary_fields(eng, reply, op.err.code);
    if (in_txn)
        mf_cmd_txn_failed(&op, reply, txn_ran);
    append_cluster_time(eng, reply);
    if (op.name != NULL)
        mf_failcommand_labels(&op, &fp_labels, reply);
    bson_destroy(&fp_labels);
    if (started_ms >= 0) {
        int64_t took = mf_mono_ms() - started_ms - paused_ms;
        op_finished(eng, client, db, op.name, cmd, seqs, nseqs, origin, reply, took, legacy, &scan, &op.err);
    }
    if (origin != NULL)
        bson_destroy(origin);
    if (mf_cmd_log_commands(eng))
        mf_log(MF_LOG_DEBUG, "COMMAND", "conn%lld: %s on %s failed: %d %s", (long long)(client ? client->id : 0),
               op.name ? op.name : "?", db, op.err.code, op.err.msg);
}
