/*
 * api.c: the embedding API (include/mayfly.h) over the engine handle.
 *
 * An mf_db is an mf_engine_t plus what the API itself owns: the scratch
 * directory of an in-memory database opened without a path, and the client
 * record commands run under (connection id 0, shown as "embedded"). The
 * command goes through mf_cmd_run, the same entry point mayflyd's network
 * layer uses, so an embedded command and a wire command behave alike.
 */
#include "mayfly.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_internal.h"
#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/scratch.h"

#define MF_VERSION_STRING "8.0.0"

struct mf_db {
    mf_engine_t *eng;
    char scratch[64]; /* in-memory home made here, removed at close ("" if none) */
};

static void
set_error(mf_db_error *err, int code, const char *msg)
{
    if (err == NULL)
        return;
    err->code = code;
    /* The public struct's buffer is smaller than an internal message: keep its start. */
    size_t n = strlen(msg);
    bool cut = n >= sizeof(err->message);
    if (cut)
        n = sizeof(err->message) - 1;
    memcpy(err->message, msg, n);
    err->message[n] = '\0';
    if (cut)
        (void)mf_utf8_cut_tail(err->message, n); /* not inside a character */
}

/* Renders one setParameter value as --setParameter text ("name=value"). Returns false for an unusable type. */
static bool
param_assignment(const char *name, const bson_value_t *v, char *out, size_t n)
{
    switch (v->value_type) {
    case BSON_TYPE_BOOL:
        snprintf(out, n, "%s=%s", name, v->value.v_bool ? "true" : "false");
        return true;
    case BSON_TYPE_INT32:
        snprintf(out, n, "%s=%d", name, v->value.v_int32);
        return true;
    case BSON_TYPE_INT64:
        snprintf(out, n, "%s=%lld", name, (long long)v->value.v_int64);
        return true;
    case BSON_TYPE_DOUBLE:
        if (v->value.v_double != (double)(long long)v->value.v_double)
            return false;
        snprintf(out, n, "%s=%lld", name, (long long)v->value.v_double);
        return true;
    default:
        return false;
    }
}

MAYFLY_API int
mf_db_open(const char *path, const bson_t *config, mf_db **out, mf_db_error *err)
{
    mf_engine_opts_t opts = {0};
    char **assign = NULL;
    size_t nassign = 0;
    bson_iter_t it, sp;
    mf_error_t e;
    int code = 0;
    mf_db *db = mf_calloc(1, sizeof(*db));

    *out = NULL;
    if (config != NULL && bson_iter_init(&it, config)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "inMemory") == 0 && BSON_ITER_HOLDS_BOOL(&it)) {
                opts.in_memory = bson_iter_bool(&it);
            } else if (strcmp(k, "cacheSizeGB") == 0 && BSON_ITER_HOLDS_NUMBER(&it)) {
                /* As mayflyd's --wiredTigerCacheSizeGB / --inMemorySizeGB (the engine opened either way). */
                double gb = bson_iter_as_double(&it);
                if (!(gb >= 0.25 && gb <= 10000)) {
                    set_error(err, MF_E_BadValue, "cacheSizeGB: expected 0.25 to 10000");
                    code = MF_E_BadValue;
                    goto err_free;
                }
                opts.cache_mb = (int64_t)(gb * 1024);
            } else if (strcmp(k, "setParameter") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
                bson_iter_recurse(&it, &sp);
                while (bson_iter_next(&sp)) {
                    char buf[256];
                    if (!param_assignment(bson_iter_key(&sp), bson_iter_value(&sp), buf, sizeof(buf))) {
                        snprintf(buf, sizeof(buf), "setParameter.%s: expected a boolean or an integer",
                                 bson_iter_key(&sp));
                        set_error(err, MF_E_BadValue, buf);
                        code = MF_E_BadValue;
                        goto err_free;
                    }
                    assign = mf_realloc(assign, (nassign + 1) * sizeof(*assign));
                    assign[nassign++] = mf_strdup(buf);
                }
            } else {
                char buf[160];
                snprintf(buf, sizeof(buf), "unknown or mistyped configuration field '%s'", k);
                set_error(err, MF_E_BadValue, buf);
                code = MF_E_BadValue;
                goto err_free;
            }
        }
    }
    if (path == NULL) {
        if (!opts.in_memory) {
            set_error(err, MF_E_BadValue, "a path is required unless inMemory is true");
            code = MF_E_BadValue;
            goto err_free;
        }
        if (mf_scratch_make(db->scratch, sizeof(db->scratch)) != 0) {
            set_error(err, MF_E_InternalError, "cannot create a scratch directory for an in-memory database");
            code = MF_E_InternalError;
            goto err_free;
        }
        path = db->scratch;
    }
    opts.dbpath = path;
    opts.set_params = (const char *const *)assign;
    opts.nset_params = nassign;
    if (mf_engine_open(&opts, &db->eng, &e) != 0) {
        code = e.code ? e.code : MF_E_InternalError;
        set_error(err, code, e.msg);
        goto err_free;
    }
    snprintf(db->eng->host, sizeof(db->eng->host), "embedded");
    for (size_t i = 0; i < nassign; i++)
        free(assign[i]);
    free(assign);
    *out = db;
    return 0;

err_free:
    for (size_t i = 0; i < nassign; i++)
        free(assign[i]);
    free(assign);
    mf_scratch_remove(db->scratch);
    free(db);
    return code;
}

MAYFLY_API int
mf_db_command(mf_db *db, const char *dbname, const bson_t *cmd, bson_t *reply)
{
    mf_client_t client = {.id = 0, .remote = "embedded", .helloed = true};
    bson_iter_t it;

    bson_init(reply);
    mf_cmd_run(db->eng, &client, dbname, cmd, NULL, 0, false, reply);
    mf_client_release(&client); /* what the command attached: a hello's metadata, a SASL conversation */
    if (bson_iter_init_find(&it, reply, "ok") && bson_iter_as_double(&it) == 1.0)
        return 0;
    if (bson_iter_init_find(&it, reply, "code") && BSON_ITER_HOLDS_INT32(&it))
        return bson_iter_int32(&it);
    return MF_E_InternalError;
}

MAYFLY_API void
mf_db_close(mf_db *db)
{
    if (db == NULL)
        return;
    mf_engine_close(db->eng);
    mf_scratch_remove(db->scratch);
    free(db);
}

mf_engine_t *
mf_db_engine(mf_db *db)
{
    return db->eng;
}

MAYFLY_API const char *
mf_db_version(void)
{
    return MF_VERSION_STRING;
}
