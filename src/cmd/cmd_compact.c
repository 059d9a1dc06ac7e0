/*
 * cmd_compact.c: compact (SPEC G3), fsync and fsyncUnlock, as mongod 8.0
 * answers them.
 *
 * Deleting documents frees blocks inside a table's file but does not shrink
 * the file: WiredTiger reuses the space for later writes. {compact: "c"}
 * gives it back to the file system: a checkpoint (so the blocks the
 * deletions freed are known to be free), then WT_SESSION::compact on the
 * collection's table and each of its index tables (storage.h:
 * mf_storage_compact), which moves the blocks at the end of each file into
 * the free space and truncates the file. The reply is {bytesFreed}, the
 * reduction of the files' sizes (never below 0), which collStats'
 * storageSize / totalIndexSize / totalSize show, as they read the file
 * sizes.
 *
 * Which tables: as in mongod 8.0, only files with at least freeSpaceTargetMB
 * (default 20) MB free are compacted. {dryRun: true} compacts nothing and
 * answers {estimatedBytesFreed}: the free bytes of those files.
 *
 * Locking: the collection is held exclusively (a DDL lock session,
 * catalog.c "Locking") while it is compacted, because writes to a file
 * during compaction keep it from shrinking; other collections' reads,
 * writes and DDL never wait for it. (mongod 8.0 lets the collection's own
 * reads and writes run; here they wait for the compaction.) A dry run takes
 * the shared lock. Compaction checks killOp, maxTimeMS and shutdown about
 * once a second.
 *
 * Names: like mongod, compact looks for the collection, then for a
 * time-series collection's buckets (system.buckets.<name>; the time-series
 * collection itself is a view over them), then refuses a view (166) or
 * answers 26.
 *
 * autoCompact: the same compaction in the background, over every table
 * (catalog/autocompact.c), without the exclusive lock; see cmd_auto_compact.
 *
 * fsync: {fsync: 1} on admin writes a checkpoint and answers {numFiles: 1}
 * (a dummy value mongod keeps for old clients). {fsync: 1, lock: true}
 * (db.fsyncLock(), for filesystem-snapshot backups) first stops writes,
 * then writes the checkpoint: from the moment the lock count rises, every
 * writer waits in mf_engine_write_gate (engine.c) before it starts, before
 * a document-write transaction commits and before a DDL transaction
 * begins, so once the reply is sent nothing commits until fsyncUnlock
 * brings the count back to 0 (locks nest, lockCount as mongod's). Reads go
 * on. The lock lives in memory: a restart ends it, as mongod's. Under
 * --inMemory there are no files to hold still: 115 CommandNotSupported.
 * fsyncUnlock when not locked answers mongod's 20 IllegalOperation.
 */
#include <stdio.h>
#include <string.h>

#include "catalog/autocompact.h"
#include "cmd/cmd.h"
#include "common/curop.h"
#include "common/log.h"
#include "doc/value.h"

#define MB (1024 * 1024)
#define DEFAULT_FREE_SPACE_TARGET_MB 20

/*
 * An IDL `bool` field: only true or false (null is as if absent), else 14
 * TypeMismatch. (mf_op_get_bool also takes numbers, as `safeBool` fields do.)
 */
static int
get_idl_bool(mf_op_t *op, const char *field, bool *out)
{
    bson_iter_t it;
    if (!mf_op_find(op, field, &it) || BSON_ITER_HOLDS_NULL(&it) || BSON_ITER_HOLDS_UNDEFINED(&it))
        return 0;
    if (!BSON_ITER_HOLDS_BOOL(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'bool'",
                          op->name, field, mf_type_name(bson_iter_type(&it)));
    *out = bson_iter_bool(&it);
    return 0;
}

/* freeSpaceTargetMB: an IDL safeInt64 (any number, truncated) that must be >= 1 (51024). */
static int
get_free_space_target(mf_op_t *op, int64_t *mb)
{
    bson_iter_t it;
    *mb = DEFAULT_FREE_SPACE_TARGET_MB;
    if (!mf_op_find(op, "freeSpaceTargetMB", &it) || BSON_ITER_HOLDS_NULL(&it) ||
        BSON_ITER_HOLDS_UNDEFINED(&it))
        return 0;
    const bson_value_t *v = bson_iter_value(&it);
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field '%s.freeSpaceTargetMB' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                          op->name, mf_type_name(v->value_type));
    if (!mf_value_as_int64(v, mb)) { /* a fraction is truncated, NaN is 0 (BSONElement::safeNumberLong) */
        double d = mf_value_as_double(v);
        *mb = d != d ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    }
    if (*mb < 1)
        return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'freeSpaceTargetMB' value must be >= 1, actual value '%lld'",
                          (long long)*mb);
    return 0;
}

/*
 * resolve_target: the name of the collection compact works on, written to
 * out: name itself when it is a collection, else the buckets of a
 * time-series collection name (system.buckets.<name>) when they exist; else
 * 166 for a view, 26 for nothing. Takes and ends its own shared lock
 * session; the caller finds the target again under its own lock.
 */
static int
resolve_target(mf_op_t *op, const char *name, char *out, size_t cap)
{
    mf_catalog_t *cat = op->eng->cat;
    char buckets[512];
    int rc = 0;

    snprintf(buckets, sizeof(buckets), "system.buckets.%s", name);
    mf_catalog_rdlock(cat);
    mf_coll_t *c = mf_catalog_coll_find(cat, op->db, name);
    mf_coll_t *b = c != NULL && !c->is_view ? NULL : mf_catalog_coll_find(cat, op->db, buckets);
    if (c != NULL && !c->is_view)
        snprintf(out, cap, "%s", name);
    else if (b != NULL && !b->is_view)
        snprintf(out, cap, "%s", buckets);
    else if (c != NULL)
        rc = mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "can't compact a view");
    else
        rc = mf_err_set(&op->err, MF_E_NamespaceNotFound, "collection does not exist");
    mf_catalog_unlock(cat);
    return rc;
}

/* The tables of collection c: its record table, then its index tables. Valid while c is locked. */
typedef struct {
    const char *uris[1 + MF_MAX_INDEXES];
    int n;
} tables_t;

static void
coll_tables(const mf_coll_t *c, tables_t *t)
{
    t->n = 0;
    t->uris[t->n++] = c->uri;
    for (int i = 0; i < c->nindexes; i++)
        t->uris[t->n++] = c->indexes[i]->uri;
}

static int64_t
tables_size(mf_sess_t *s, const tables_t *t)
{
    int64_t total = 0;
    for (int i = 0; i < t->n; i++)
        total += mf_storage_table_size(s, t->uris[i]);
    return total;
}

/*
 * compact_tables: compacts every table of t whose file has at least
 * target_bytes free (after a checkpoint), or with dry_run only adds up their
 * free bytes into *estimate. Reports progress on the current operation.
 */
static int
compact_tables(mf_op_t *op, const tables_t *t, int64_t target_bytes, bool dry_run, int64_t *estimate)
{
    *estimate = 0;
    if (mf_storage_checkpoint(op->sess, &op->err) != 0)
        return -1;
    for (int i = 0; i < t->n; i++) {
        int64_t file_bytes, free_bytes;
        if (mf_storage_table_space(op->sess, t->uris[i], &file_bytes, &free_bytes, &op->err) != 0)
            return -1;
        if (free_bytes < target_bytes)
            continue;
        *estimate += free_bytes;
        if (dry_run)
            continue;
        mf_curop_set_progress(mf_curop_current(), "compact: compacting tables", i, t->n);
        if (mf_storage_compact(op->sess, t->uris[i], &op->err) != 0)
            return -1;
    }
    return 0;
}

static int
cmd_compact(mf_op_t *op)
{
    const char *name;
    char target[512];
    bool force = false, dry_run = false;
    int64_t target_mb, estimate, before, after;
    tables_t tables;
    mf_catalog_t *cat = op->eng->cat;

    if (mf_op_coll_name(op, &name) != 0 || get_idl_bool(op, "force", &force) != 0 ||
        get_idl_bool(op, "dryRun", &dry_run) != 0 || get_free_space_target(op, &target_mb) != 0)
        return -1;
    (void)force; /* allows compact on a replica set primary; a standalone needs no permission */
    if (resolve_target(op, name, target, sizeof(target)) != 0)
        return -1;
    if (dry_run)
        mf_catalog_rdlock(cat);
    else
        mf_catalog_wrlock(cat);
    mf_coll_t *c = mf_catalog_coll_find(cat, op->db, target);
    if (c == NULL || c->is_view) { /* dropped or replaced since resolve_target */
        mf_catalog_unlock(cat);
        return mf_err_set(&op->err, MF_E_NamespaceNotFound, "collection does not exist");
    }
    coll_tables(c, &tables);
    int64_t started = mf_mono_ms();
    before = tables_size(op->sess, &tables);
    int rc = compact_tables(op, &tables, target_mb * MB, dry_run, &estimate);
    after = tables_size(op->sess, &tables);
    if (!dry_run)
        mf_log(MF_LOG_INFO, "COMMAND", "compact %s.%s: %d tables, %lld bytes before, %lld after, %lld ms%s", op->db,
               target, tables.n, (long long)before, (long long)after, (long long)(mf_mono_ms() - started),
               rc != 0 ? " (stopped)" : "");
    mf_catalog_unlock(cat);
    if (rc != 0)
        return -1;
    if (dry_run) {
        mf_append_number(op->reply, "estimatedBytesFreed", estimate);
    } else {
        /* Writes just before the command may grow a file more than compaction shrinks it: never below 0. */
        mf_append_number(op->reply, "bytesFreed", before > after ? before - after : 0);
    }
    return 0;
}

static int
cmd_fsync(mf_op_t *op)
{
    bson_iter_t it;
    bool lock = mf_op_find(op, "lock", &it) && bson_iter_as_bool(&it);
    if (!lock) {
        if (mf_storage_checkpoint(op->sess, &op->err) != 0)
            return -1;
        BSON_APPEND_INT32(op->reply, "numFiles", 1);
        return 0;
    }
    if (op->eng->in_memory)
        return mf_err_set(&op->err, MF_E_CommandNotSupported,
                          "The current storage engine doesn't support backup mode: fsync with lock is not supported");
    /* Writes stop (those in flight finish) first, then the checkpoint holds everything committed. */
    int64_t n = mf_engine_fsync_lock(op->eng, &op->err);
    if (n < 0)
        return -1;
    if (mf_storage_checkpoint(op->sess, &op->err) != 0) {
        (void)mf_engine_fsync_unlock(op->eng);
        return -1;
    }
    mf_log(MF_LOG_INFO, "COMMAND", "fsync lock taken (lock count %lld): writes wait until fsyncUnlock", (long long)n);
    BSON_APPEND_UTF8(op->reply, "info", "now locked against writes, use db.fsyncUnlock() to unlock");
    BSON_APPEND_INT64(op->reply, "lockCount", n);
    BSON_APPEND_UTF8(op->reply, "seeAlso", "http://dochub.mongodb.org/core/fsynccommand");
    return 0;
}

static int
cmd_fsync_unlock(mf_op_t *op)
{
    int64_t n = mf_engine_fsync_unlock(op->eng);
    if (n < 0)
        return mf_err_set(&op->err, MF_E_IllegalOperation, "fsyncUnlock called when not locked");
    mf_log(MF_LOG_INFO, "COMMAND", "fsyncUnlock: lock count %lld%s", (long long)n, n == 0 ? ", writes go on" : "");
    BSON_APPEND_UTF8(op->reply, "info", "fsyncUnlock completed");
    BSON_APPEND_INT64(op->reply, "lockCount", n);
    return 0;
}

/*
 * {autoCompact: <bool>, freeSpaceTargetMB, runOnce} on admin: background
 * compaction on or off (catalog/autocompact.h), as mongod 8.0's
 * autoCompact: the command's value is an IDL bool (14 otherwise), runOnce
 * a bool, freeSpaceTargetMB a safeInt64 >= 1 (51024). Refused under
 * --inMemory (IllegalOperation, canRunAutoCompact's message); turning it
 * on when on, or off when off, fails with 2 (stop it first to change its
 * options). Not replicated: each member compacts its own files. Logged as
 * mongod's 8012100 "AutoCompact".
 */
static int
cmd_auto_compact(mf_op_t *op)
{
    bson_iter_t it;
    bool enable, run_once = false;
    int64_t target_mb;
    if (!bson_iter_init(&it, op->cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_BOOL(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'autoCompact.autoCompact' is the wrong type '%s', expected type 'bool'",
                          mf_type_name(bson_iter_type(&it)));
    enable = bson_iter_bool(&it);
    if (get_idl_bool(op, "runOnce", &run_once) != 0 || get_free_space_target(op, &target_mb) != 0)
        return -1;
    if (op->eng->in_memory)
        return mf_err_set(&op->err, MF_E_IllegalOperation, "autoCompact() cannot be executed for in-memory configurations");
    if (mf_autocompact_set(op->eng->autocompact, enable, run_once, target_mb, &op->err) != 0)
        return -1;
    char attr[32], ctx[32];
    snprintf(attr, sizeof(attr), "{\"enabled\":%s}", enable ? "true" : "false");
    snprintf(ctx, sizeof(ctx), "conn%lld", (long long)(op->client != NULL ? op->client->id : 0));
    mf_log_attr(MF_LOG_INFO, "COMMAND", 8012100, ctx, "AutoCompact", attr);
    return 0;
}

static const char *const compact_fields[] = {"force", "dryRun", "freeSpaceTargetMB", NULL};
static const char *const auto_compact_fields[] = {"freeSpaceTargetMB", "runOnce", NULL};

const mf_cmd_def_t mf_cmds_compact[] = {
    {"compact", cmd_compact, 0, compact_fields},
    {"autoCompact", cmd_auto_compact, MF_CMD_ADMIN_ONLY, auto_compact_fields},
    {"fsync", cmd_fsync, MF_CMD_ADMIN_ONLY, NULL},
    {"fsyncUnlock", cmd_fsync_unlock, MF_CMD_ADMIN_ONLY, NULL},
    {NULL, NULL, 0, NULL},
};
