/*
 * cmd_admin.c: handshake, diagnostics and server-wide commands: hello /
 * isMaster, ping, buildInfo, getParameter / setParameter, serverStatus,
 * getDiagnosticData, hostInfo, whatsmyuri, connectionStatus, getLog,
 * getCmdLineOpts, and currentOp / killOp over the operation registry
 * (curop.h). The session commands live in cmd_sessions.c.
 *
 * serverStatus has mongod 8.0's default sections, each one measured or,
 * where mayfly has no such thing, documented at the field as 0 (see
 * cmd_server_status). getDiagnosticData answers mongod's FTDC sample
 * shape, {data: {start, serverStatus: {start, ..., end}, replSetGetStatus
 * (members), end}}, collected when asked rather than from a periodic
 * sample: mayfly keeps no diagnostic.data directory.
 *
 * Wire limits advertised here are enforced elsewhere: message length in
 * net.c, document size in wire.c / cmd_util.c, batch size in the write
 * commands.
 */
#include <gnu/libc-version.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/opensslv.h>
#include <openssl/crypto.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "archive/archive.h"
#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "auth/roles.h"
#include "catalog/autocompact.h"
#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "engine/cursor.h"
#include "engine/sessions.h"
#include "common/log.h"
#include "common/params.h"
#include "common/sysres.h"
#include "doc/match.h"
#include "doc/value.h"
#include "query/write.h"
#include "storage/storage.h"
#include "ttl/ttl.h"

#define MF_VERSION "8.0.0"
#define MF_MAX_WIRE_VERSION 25 /* MongoDB 8.0 */

/*
 * hello's compression negotiation, as mongod's
 * MessageCompressorManager::serverNegotiate, which every hello / isMaster
 * runs (not only a connection's first): with a `compression` list (IDL
 * array<string>: 14 otherwise) the connection's compressors become those
 * of the list the server offers (eng->net_compressors), in the client's
 * order, replacing what was negotiated before; without one the reply
 * repeats what was negotiated. The reply has `compression` only when the
 * connection has compressors. An embedded caller (no client) negotiates
 * nothing. Returns 0, or -1 with op->err.
 */
static int
hello_compression(mf_op_t *op)
{
    bson_iter_t it, el;
    bson_t arr;
    mf_client_t *c = op->client;

    if (mf_op_find(op, "compression", &it)) {
        if (!BSON_ITER_HOLDS_ARRAY(&it))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field '%s.compression' is the wrong type '%s', expected type 'array'", op->name,
                              mf_type_name(bson_iter_type(&it)));
        mf_compressor_list_t want = {.n = 0};
        if (!bson_iter_recurse(&it, &el))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.compression' is not an array", op->name);
        while (bson_iter_next(&el)) {
            if (!BSON_ITER_HOLDS_UTF8(&el))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field '%s.compression.%s' is the wrong type '%s', expected type 'string'",
                                  op->name, bson_iter_key(&el), mf_type_name(bson_iter_type(&el)));
            uint32_t len;
            const char *name = bson_iter_utf8(&el, &len);
            int id = mf_compressor_id(name, len);
            if (id >= 0 && mf_compressor_list_has(&op->eng->net_compressors, id) && !mf_compressor_list_has(&want, id))
                want.ids[want.n++] = (uint8_t)id;
        }
        if (c != NULL)
            c->compressors = want;
    }
    if (c == NULL || c->compressors.n == 0)
        return 0;
    BSON_APPEND_ARRAY_BEGIN(op->reply, "compression", &arr);
    for (uint8_t i = 0; i < c->compressors.n; i++) {
        char key[4];
        snprintf(key, sizeof(key), "%u", (unsigned)i);
        BSON_APPEND_UTF8(&arr, key, mf_compressor_name(c->compressors.ids[i]));
    }
    bson_append_array_end(op->reply, &arr);
    return 0;
}

/* The sub-document `name` of a client metadata document, checked to be one (14), in *sub. */
static int
metadata_sub(const bson_iter_t *it, const char *name, bson_iter_t *sub, mf_error_t *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, sub))
        return mf_err_set(err, MF_E_TypeMismatch,
                          "The '%s' field is required to be a BSON document in the client metadata document", name);
    return 0;
}

/*
 * Whether sub (a metadata sub-document `parent`) has the string field
 * `field`: 1 yes, 0 absent, -1 with 14 when it is not a string. *s gets
 * the string (borrowed from the command) when s is not NULL.
 */
static int
metadata_string(const bson_iter_t *sub, const char *parent, const char *field, const char **s, uint32_t *len,
                mf_error_t *err)
{
    bson_iter_t f = *sub;
    if (!bson_iter_find(&f, field))
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&f))
        return mf_err_set(err, MF_E_TypeMismatch,
                          "The '%s.%s' field must be a string in the client metadata document", parent, field);
    if (s != NULL)
        *s = bson_iter_utf8(&f, len);
    return 1;
}

/*
 * A hello's `client` document, checked as mongod's ClientMetadata does
 * before the command runs: a document (14) of at most 1024 bytes (185);
 * application, when present, a document whose name is a string of at most
 * 128 bytes (184); driver with string name and version and os with a
 * string type, both required (183). *app gets application.name (borrowed;
 * "" when there is none).
 */
static int
check_client_metadata(const bson_iter_t *it, const char **app, mf_error_t *err)
{
    bson_iter_t f, sub;
    bool driver = false, os = false;
    int r;
    uint32_t len = 0;
    *app = "";
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_err_set(err, MF_E_TypeMismatch, "The client metadata document must be a document");
    const uint8_t *data;
    bson_iter_document(it, &len, &data);
    if (len > 1024)
        return mf_err_set(err, MF_E_ClientMetadataDocumentTooLarge,
                          "The client metadata document must be less then or equal to 1024 bytes");
    if (!bson_iter_recurse(it, &f))
        return mf_err_set(err, MF_E_TypeMismatch, "The client metadata document must be a document");
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "application") == 0) {
            if (metadata_sub(&f, k, &sub, err) != 0 || metadata_string(&sub, k, "name", app, &len, err) < 0)
                return -1;
            if (len > 128)
                return mf_err_set(err, MF_E_ClientMetadataAppNameTooLarge,
                                  "The 'application.name' field must be less then or equal to 128 bytes in the "
                                  "client metadata document");
        } else if (strcmp(k, "driver") == 0) {
            if (metadata_sub(&f, k, &sub, err) != 0)
                return -1;
            const char *missing = NULL;
            if ((r = metadata_string(&sub, k, "name", NULL, NULL, err)) < 0)
                return -1;
            if (r == 0)
                missing = "name";
            if ((r = metadata_string(&sub, k, "version", NULL, NULL, err)) < 0)
                return -1;
            if (missing == NULL && r == 0)
                missing = "version";
            if (missing != NULL)
                return mf_err_set(err, MF_E_ClientMetadataMissingField,
                                  "Missing required field 'driver.%s' in the client metadata document", missing);
            driver = true;
        } else if (strcmp(k, "os") == 0) {
            if (metadata_sub(&f, k, &sub, err) != 0 || (r = metadata_string(&sub, k, "type", NULL, NULL, err)) < 0)
                return -1;
            if (r == 0)
                return mf_err_set(err, MF_E_ClientMetadataMissingField,
                                  "Missing required field 'os.type' in the client metadata document");
            os = true;
        }
    }
    if (!driver || !os)
        return mf_err_set(err, MF_E_ClientMetadataMissingField,
                          "Missing required sub-document '%s' in the client metadata document", driver ? "os" : "driver");
    return 0;
}

/*
 * Keeps the first handshake's client metadata (checked) on the connection
 * (currentOp's clientMetadata) and logs it with the compressors just
 * negotiated, as mongod's "client metadata" line (id 51800).
 */
static void
keep_client_metadata(mf_op_t *op, const bson_iter_t *it)
{
    const uint8_t *data;
    uint32_t len;
    bson_t doc;
    bson_iter_document(it, &len, &data);
    if (!bson_init_static(&doc, data, len))
        return;
    op->client->metadata = bson_copy(&doc);
    mf_curop_conn_hello(op->client->conn, op->client->app_name, op->client->metadata);
    bson_t attr, comp;
    bson_init(&attr);
    BSON_APPEND_UTF8(&attr, "remote", op->client->remote);
    char ctx[32];
    snprintf(ctx, sizeof(ctx), "conn%lld", (long long)op->client->id);
    BSON_APPEND_UTF8(&attr, "client", ctx);
    BSON_APPEND_ARRAY_BEGIN(&attr, "negotiatedCompressors", &comp);
    for (uint8_t i = 0; i < op->client->compressors.n; i++) {
        char key[4];
        snprintf(key, sizeof(key), "%u", (unsigned)i);
        BSON_APPEND_UTF8(&comp, key, mf_compressor_name(op->client->compressors.ids[i]));
    }
    bson_append_array_end(&attr, &comp);
    BSON_APPEND_DOCUMENT(&attr, "doc", &doc);
    char *json = bson_as_relaxed_extended_json(&attr, NULL);
    if (json != NULL)
        mf_log_attr(MF_LOG_INFO, "NETWORK", 51800, ctx, "client metadata", json);
    bson_free(json);
    bson_destroy(&attr);
}

static int
cmd_hello(mf_op_t *op)
{
    bson_t *r = op->reply, tv;
    bson_iter_t it, meta;
    bool legacy_name = strcmp(op->name, "hello") != 0;

    /*
     * The client metadata: sent by the connection's first hello only (a
     * later one is 186, as mongod finalizes it after the first hello), and
     * checked before anything else. op->client may be NULL (an internal caller).
     */
    bool has_meta = mf_op_find(op, "client", &meta);
    const char *app = "";
    if (has_meta && op->client != NULL && op->client->metadata_final)
        return mf_err_set(&op->err, MF_E_ClientMetadataCannotBeMutated,
                          "The client metadata document may only be sent in the first hello");
    if (has_meta && check_client_metadata(&meta, &app, &op->err) != 0)
        return -1;
    /*
     * As mongod's hello: a request naming helloOk sets the client's
     * supportsHello to its value and is answered helloOk: true; one that
     * does not (mongosh's db.hello(), a driver's monitoring) is answered
     * without the field.
     */
    bool has_hello_ok = mf_op_find(op, "helloOk", &it);
    if (op->client != NULL && has_hello_ok)
        op->client->helloed = bson_iter_as_bool(&it);
    if (op->client != NULL && has_meta)
        snprintf(op->client->app_name, sizeof(op->client->app_name), "%s", app);
    if (has_hello_ok)
        BSON_APPEND_BOOL(r, "helloOk", true);
    if (op->eng->repl != NULL)
        op->eng->repl->hello(op->eng->repl_arg, op->cmd, legacy_name, r);
    else
        BSON_APPEND_BOOL(r, legacy_name ? "ismaster" : "isWritablePrimary", true);
    BSON_APPEND_DOCUMENT_BEGIN(r, "topologyVersion", &tv);
    BSON_APPEND_OID(&tv, "processId", &op->eng->process_id);
    BSON_APPEND_INT64(&tv, "counter", atomic_load(&op->eng->topology_version));
    bson_append_document_end(r, &tv);
    BSON_APPEND_INT32(r, "maxBsonObjectSize", MF_MAX_BSON_SIZE);
    BSON_APPEND_INT32(r, "maxMessageSizeBytes", MF_MAX_MESSAGE_SIZE);
    BSON_APPEND_INT32(r, "maxWriteBatchSize", MF_MAX_WRITE_BATCH);
    BSON_APPEND_DATE_TIME(r, "localTime", mf_now_ms());
    BSON_APPEND_INT32(r, "logicalSessionTimeoutMinutes", 30);
    if (op->client != NULL)
        mf_append_number(r, "connectionId", op->client->id); /* an int, as mongod's appendNumber */
    BSON_APPEND_INT32(r, "minWireVersion", 0);
    BSON_APPEND_INT32(r, "maxWireVersion", MF_MAX_WIRE_VERSION);
    BSON_APPEND_BOOL(r, "readOnly", false);
    if (hello_compression(op) != 0)
        return -1;
    if (op->client != NULL && has_meta && op->client->metadata == NULL)
        keep_client_metadata(op, &meta);
    if (op->client != NULL)
        op->client->metadata_final = true;
    mf_cmd_auth_hello(op);
    return 0;
}

static int
cmd_ping(mf_op_t *op)
{
    (void)op;
    return 0;
}

/*
 * {shutdown: 1, force?, timeoutSecs?}: a clean stop, as SIGTERM's (the
 * network layer stops accepting, in-flight commands finish, WiredTiger
 * checkpoints at close). As mongod: admin only, and without access control
 * only from a loopback address (13). This reply is written before the
 * connection closes (mongod's process exits without one; drivers and
 * mongosh's db.shutdownServer() take either). force and timeoutSecs only
 * matter to a replica set's primary, which waits for a secondary to catch
 * up; mayfly's Raft replica sets hand over leadership on their own.
 */
static const char *const shutdown_fields[] = {"force", "timeoutSecs", NULL};

static int
cmd_shutdown(mf_op_t *op)
{
    bson_iter_t it;
    if (mf_op_find(op, "force", &it) && !BSON_ITER_HOLDS_BOOL(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'shutdown.force' is the wrong type '%s', expected type 'bool'",
                          mf_type_name(bson_iter_type(&it)));
    if (mf_op_find(op, "timeoutSecs", &it) && !mf_value_is_number(bson_iter_value(&it)))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'shutdown.timeoutSecs' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                          mf_type_name(bson_iter_type(&it)));
    if (!op->eng->auth_enabled && op->client != NULL && !op->client->loopback)
        return mf_err_set(&op->err, MF_E_Unauthorized, "shutdown must run from localhost when running db without auth");
    if (!mf_engine_request_stop(op->eng))
        return mf_err_set(&op->err, MF_E_IllegalOperation, "shutdown: no server is running this engine");
    mf_log(MF_LOG_INFO, "COMMAND", "Terminating via shutdown command (conn%lld)",
           (long long)(op->client ? op->client->id : 0));
    return 0;
}

static int
cmd_build_info(mf_op_t *op)
{
    bson_t *r = op->reply, arr, se;
    BSON_APPEND_UTF8(r, "version", MF_VERSION);
    BSON_APPEND_UTF8(r, "gitVersion", "mayfly");
    BSON_APPEND_ARRAY_BEGIN(r, "modules", &arr);
    bson_append_array_end(r, &arr);
    BSON_APPEND_UTF8(r, "allocator", mf_alloc_name());
    BSON_APPEND_UTF8(r, "javascriptEngine", "none");
    BSON_APPEND_UTF8(r, "sysInfo", "deprecated");
    BSON_APPEND_ARRAY_BEGIN(r, "versionArray", &arr);
    BSON_APPEND_INT32(&arr, "0", 8);
    BSON_APPEND_INT32(&arr, "1", 0);
    BSON_APPEND_INT32(&arr, "2", 0);
    BSON_APPEND_INT32(&arr, "3", 0);
    bson_append_array_end(r, &arr);
    /* The OpenSSL in use and the one built against, as mongod's (scripts check openssl.running for TLS). */
    bson_t ossl, env;
    BSON_APPEND_DOCUMENT_BEGIN(r, "openssl", &ossl);
    BSON_APPEND_UTF8(&ossl, "running", OpenSSL_version(OPENSSL_VERSION));
    BSON_APPEND_UTF8(&ossl, "compiled", OPENSSL_VERSION_TEXT);
    bson_append_document_end(r, &ossl);
    /* Where it runs, as mongod's buildEnvironment (mongosh reads target_arch and target_os). */
    struct utsname un;
    const char *arch = uname(&un) == 0 ? un.machine : "unknown";
    BSON_APPEND_DOCUMENT_BEGIN(r, "buildEnvironment", &env);
    BSON_APPEND_UTF8(&env, "distmod", "debian12");
    BSON_APPEND_UTF8(&env, "distarch", arch);
    BSON_APPEND_UTF8(&env, "cc", "gcc");
    BSON_APPEND_UTF8(&env, "target_arch", arch);
    BSON_APPEND_UTF8(&env, "target_os", "linux");
    bson_append_document_end(r, &env);
    BSON_APPEND_INT32(r, "bits", 64);
    BSON_APPEND_BOOL(r, "debug", false);
    BSON_APPEND_INT32(r, "maxBsonObjectSize", MF_MAX_BSON_SIZE);
    BSON_APPEND_ARRAY_BEGIN(r, "storageEngines", &se);
    BSON_APPEND_UTF8(&se, "0", "wiredTiger");
    bson_append_array_end(r, &se);
    BSON_APPEND_UTF8(r, "server", "mayfly");
    return 0;
}

struct param_ctx {
    bson_t *reply;
    bool details;
};

/* One parameter into the reply: its value, or with showDetails {value, settableAtRuntime, settableAtStartup}. */
static void
param_out(bson_t *reply, mf_param_t *p, bool details)
{
    if (!details) {
        mf_param_append(reply, p);
        return;
    }
    bson_t one, d;
    bson_iter_t it;
    bson_init(&one);
    mf_param_append(&one, p);
    if (bson_iter_init(&it, &one) && bson_iter_next(&it)) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, p->name, &d);
        bson_append_value(&d, "value", -1, bson_iter_value(&it));
        BSON_APPEND_BOOL(&d, "settableAtRuntime", p->runtime);
        BSON_APPEND_BOOL(&d, "settableAtStartup", p->startup);
        bson_append_document_end(reply, &d);
    }
    bson_destroy(&one);
}

static void
append_param(void *arg, mf_param_t *p)
{
    struct param_ctx *ctx = arg;
    param_out(ctx->reply, p, ctx->details);
}

/*
 * logComponentVerbosity, as mongod's (mongosh's db.setLogLevel and
 * db.getLogComponents): {verbosity: logLevel, <component>: {verbosity:
 * -1..5, <sub-component>: {...}}} for mongod's log components and their
 * sub-components (replication.election, storage.wt.wtCheckpoint ...), -1
 * meaning "its parent's level" (logLevel's at the top). The values live in
 * eng->log_verbosity, by the index of these names; "command" at 1 or more
 * logs every command as logLevel 1 does (mf_cmd_log_commands).
 */
typedef struct log_component {
    const char *name;
    int parent; /* index of its parent, -1 for a top-level component */
} log_component_t;

enum { LOGC_NETWORK = 8, LOGC_REPLICATION = 12, LOGC_SHARDING = 13, LOGC_STORAGE = 14, LOGC_WT = 38 };

static const log_component_t log_components[] = {
    /* 0 */ {"accessControl", -1}, {"assert", -1}, {"command", -1}, {"control", -1}, {"executor", -1},
    /* 5 */ {"geo", -1}, {"globalIndex", -1}, {"index", -1}, {"network", -1}, {"processHealth", -1},
    /* 10 */ {"query", -1}, {"queryStats", -1}, {"replication", -1}, {"sharding", -1}, {"storage", -1},
    /* 15 */ {"write", -1}, {"ftdc", -1}, {"tracking", -1}, {"transaction", -1}, {"tenantMigration", -1},
    /* 20 */ {"test", -1}, {"resourceConsumption", -1}, {"streams", -1}, {"sbe", -1},
    /* 24 */ {"asio", LOGC_NETWORK}, {"bridge", LOGC_NETWORK}, {"connectionPool", LOGC_NETWORK},
    /* 27 */ {"election", LOGC_REPLICATION}, {"heartbeats", LOGC_REPLICATION}, {"initialSync", LOGC_REPLICATION},
    /* 30 */ {"rollback", LOGC_REPLICATION},
    /* 31 */ {"rangeDeleter", LOGC_SHARDING}, {"shardingCatalogRefresh", LOGC_SHARDING},
    /* 33 */ {"migration", LOGC_SHARDING}, {"reshard", LOGC_SHARDING}, {"migrationPerf", LOGC_SHARDING},
    /* 36 */ {"recovery", LOGC_STORAGE}, {"journal", LOGC_STORAGE}, {"wt", LOGC_STORAGE},
    /* 39 */ {"wtBackup", LOGC_WT}, {"wtCheckpoint", LOGC_WT}, {"wtCompact", LOGC_WT}, {"wtEviction", LOGC_WT},
    /* 43 */ {"wtHS", LOGC_WT}, {"wtRecovery", LOGC_WT}, {"wtRTS", LOGC_WT}, {"wtSalvage", LOGC_WT},
    /* 47 */ {"wtTiered", LOGC_WT}, {"wtTimestamp", LOGC_WT}, {"wtTransaction", LOGC_WT}, {"wtVerify", LOGC_WT},
    /* 51 */ {"wtWriteLog", LOGC_WT}};
_Static_assert(sizeof(log_components) / sizeof(log_components[0]) == MF_LOG_COMPONENTS,
               "log_components and MF_LOG_COMPONENTS disagree");
#define LOGC_COMMAND 2

bool
mf_cmd_log_commands(mf_engine_t *eng)
{
    return mf_param_get(eng->params, "logLevel") >= 1 ||
           atomic_load_explicit(&eng->log_verbosity[LOGC_COMMAND], memory_order_relaxed) - 1 >= 1;
}

/* Appends the components whose parent is parent (-1: the top level) to d, each with its own below it. */
static void
append_log_children(mf_engine_t *eng, bson_t *d, int parent)
{
    bson_t c;
    for (int i = 0; i < MF_LOG_COMPONENTS; i++) {
        if (log_components[i].parent != parent)
            continue;
        BSON_APPEND_DOCUMENT_BEGIN(d, log_components[i].name, &c);
        BSON_APPEND_INT32(&c, "verbosity", atomic_load(&eng->log_verbosity[i]) - 1);
        append_log_children(eng, &c, i);
        bson_append_document_end(d, &c);
    }
}

static void
append_log_verbosity(mf_engine_t *eng, bson_t *out, const char *key)
{
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &d);
    BSON_APPEND_INT32(&d, "verbosity", (int32_t)mf_param_get(eng->params, "logLevel"));
    append_log_children(eng, &d, -1);
    bson_append_document_end(out, &d);
}

/* A verbosity: a number within lo..5. */
static int
verbosity_of(mf_op_t *op, const bson_iter_t *it, const char *path, int lo, int *out)
{
    if (!BSON_ITER_HOLDS_NUMBER(it))
        return mf_err_set(&op->err, MF_E_BadValue, "Invalid verbosity value for component %s", path);
    int64_t n = bson_iter_as_int64(it);
    if (n < lo || n > 5)
        return mf_err_set(&op->err, MF_E_BadValue, "Invalid verbosity value for component %s: %lld", path, (long long)n);
    *out = (int)n;
    return 0;
}

/*
 * The settings of doc (the component parent's, -1: the top level, at path)
 * into *top (logLevel) and comp[] (INT32_MIN: not given): its verbosity and
 * its sub-components', each a number or a document of the same shape.
 */
static int
parse_log_components(mf_op_t *op, const bson_iter_t *doc, int parent, const char *path, int *top, int *comp)
{
    bson_iter_t it;
    bson_iter_recurse(doc, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        char sub[256];
        if (strcmp(k, "verbosity") == 0) {
            if (verbosity_of(op, &it, path, parent < 0 ? 0 : -1, parent < 0 ? top : &comp[parent]) != 0)
                return -1;
            continue;
        }
        snprintf(sub, sizeof(sub), "%s.%s", path, k);
        int i = 0;
        while (i < MF_LOG_COMPONENTS && (log_components[i].parent != parent || strcmp(log_components[i].name, k) != 0))
            i++;
        if (i == MF_LOG_COMPONENTS)
            return mf_err_set(&op->err, MF_E_BadValue, "Invalid component name %s", sub);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            if (parse_log_components(op, &it, i, sub, top, comp) != 0)
                return -1;
        } else if (verbosity_of(op, &it, sub, -1, &comp[i]) != 0) {
            return -1;
        }
    }
    return 0;
}

/* setParameter logComponentVerbosity: checks the whole document, then applies it (nothing changes on an error). */
static int
set_log_verbosity(mf_op_t *op, const bson_iter_t *val)
{
    int top = INT32_MIN, comp[MF_LOG_COMPONENTS];
    if (!BSON_ITER_HOLDS_DOCUMENT(val))
        return mf_err_set(&op->err, MF_E_BadValue, "log component verbosity is not a BSON object");
    for (int i = 0; i < MF_LOG_COMPONENTS; i++)
        comp[i] = INT32_MIN;
    if (parse_log_components(op, val, -1, "logComponentVerbosity", &top, comp) != 0)
        return -1;
    if (top != INT32_MIN) {
        bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = top};
        if (mf_param_set_value(mf_param_find(op->eng->params, "logLevel"), &v, false, &op->err) != 0)
            return -1;
    }
    for (int i = 0; i < MF_LOG_COMPONENTS; i++)
        if (comp[i] != INT32_MIN)
            atomic_store(&op->eng->log_verbosity[i], (int8_t)(comp[i] + 1));
    return 0;
}

/*
 * {getParameter: 1, name: 1, ...}, {getParameter: "*"} (all), or
 * {getParameter: {allParameters: bool, showDetails: bool}, name: 1, ...}
 * as mongod 8.0 (showDetails: each value as {value, settableAtRuntime,
 * settableAtStartup}).
 */
static int
cmd_get_parameter(mf_op_t *op)
{
    bson_iter_t it, opt;
    int found = 0;
    bool all = false, details = false;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "*") == 0)
        all = true;
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &opt)) {
        while (bson_iter_next(&opt)) {
            const char *k = bson_iter_key(&opt);
            bool *dst = strcmp(k, "allParameters") == 0 ? &all : strcmp(k, "showDetails") == 0 ? &details : NULL;
            if (dst == NULL)
                return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'getParameter.%s' is an unknown field.", k);
            char path[64];
            snprintf(path, sizeof(path), "getParameter.%s", k);
            if (mf_op_safe_bool(op, path, &opt, dst) != 0)
                return -1;
        }
    }
    if (all) {
        struct param_ctx ctx = {op->reply, details};
        mf_param_each(op->eng->params, append_param, &ctx);
        append_log_verbosity(op->eng, op->reply, "logComponentVerbosity");
        return 0;
    }
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' || strcmp(k, "lsid") == 0 || strcmp(k, "comment") == 0)
            continue;
        if (strcmp(k, "logComponentVerbosity") == 0) {
            append_log_verbosity(op->eng, op->reply, k);
            found++;
            continue;
        }
        mf_param_t *p = mf_param_find(op->eng->params, k);
        if (p == NULL)
            continue;
        param_out(op->reply, p, details);
        found++;
    }
    if (found == 0)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "no option found to get");
    return 0;
}

static int
cmd_set_parameter(mf_op_t *op)
{
    bson_iter_t it;
    int found = 0;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$' || strcmp(k, "lsid") == 0 || strcmp(k, "comment") == 0)
            continue;
        if (strcmp(k, "logComponentVerbosity") == 0) {
            if (found == 0)
                append_log_verbosity(op->eng, op->reply, "was");
            if (set_log_verbosity(op, &it) != 0)
                return -1;
            mf_log(MF_LOG_INFO, "COMMAND", "setParameter %s", k);
            found++;
            continue;
        }
        mf_param_t *p = mf_param_find(op->eng->params, k);
        if (p == NULL)
            return mf_err_set(&op->err, MF_E_InvalidOptions,
                              "attempted to set unrecognized parameter [%s], use help:true to see options ", k);
        if (found == 0) {
            bson_t was;
            bson_init(&was);
            mf_param_append(&was, p);
            bson_iter_t w;
            if (bson_iter_init(&w, &was) && bson_iter_next(&w))
                bson_append_value(op->reply, "was", -1, bson_iter_value(&w));
            bson_destroy(&was);
        }
        if (mf_param_set_value(p, bson_iter_value(&it), false, &op->err) != 0)
            return -1;
        mf_log(MF_LOG_INFO, "COMMAND", "setParameter %s", k);
        found++;
    }
    if (found == 0)
        return mf_err_set(&op->err, MF_E_InvalidOptions, "no option found to set, use help:true to see options ");
    return 0;
}

static void
read_mem(int64_t *rss_mb, int64_t *virt_mb)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    *rss_mb = *virt_mb = 0;
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f)) {
        long kb;
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            *rss_mb = kb / 1024;
        else if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            *virt_mb = kb / 1024;
    }
    fclose(f);
}

typedef struct archive_list {
    mf_engine_t *eng;
    bson_t *arr;
    int n;
    mf_archive_stats_t total;
} archive_list_t;

static void
archive_coll(void *arg, const char *db, const char *name, const uint8_t uuid[16])
{
    archive_list_t *l = arg;
    mf_archive_stats_t st;
    char key[16];
    const char *kp;
    bson_t e;

    mf_archive_stats(l->eng->archive, uuid, &st);
    if (st.segments == 0 && st.docs == 0)
        return;
    bson_uint32_to_string((uint32_t)l->n++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(l->arr, kp, &e);
    BSON_APPEND_UTF8(&e, "db", db);
    BSON_APPEND_UTF8(&e, "collection", name);
    BSON_APPEND_INT64(&e, "bytes", st.bytes);
    BSON_APPEND_INT64(&e, "documents", st.docs);
    BSON_APPEND_INT64(&e, "segments", st.segments);
    bson_append_document_end(l->arr, &e);
}

/* serverStatus().archive (mayfly, SPEC I2): archive totals and each collection's share. */
static void
append_archive_status(mf_engine_t *e, bson_t *r)
{
    bson_t sub, arr;
    archive_list_t l = {e, &arr, 0, {0}};

    if (e->archive == NULL)
        return;
    mf_archive_stats(e->archive, NULL, &l.total);
    BSON_APPEND_DOCUMENT_BEGIN(r, "archive", &sub);
    BSON_APPEND_INT64(&sub, "bytes", l.total.bytes);
    BSON_APPEND_INT64(&sub, "documents", l.total.docs);
    BSON_APPEND_INT64(&sub, "segments", l.total.segments);
    BSON_APPEND_ARRAY_BEGIN(&sub, "collections", &arr);
    mf_catalog_names(e->cat, archive_coll, &l); /* locks no collection: serverStatus never waits for DDL */
    bson_append_array_end(&sub, &arr);
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus's section toggles, as mongod's: a section named in the
 * command with a false value ({serverStatus: 1, locks: 0}) is left out;
 * every section here is one mongod 8.0 includes by default.
 */
static bool
section_on(const mf_op_t *op, const char *name)
{
    bson_iter_t it;
    return !bson_iter_init_find(&it, op->cmd, name) || bson_iter_as_bool(&it);
}

/*
 * serverStatus().asserts. user counts mongod's uasserts as mayfly meets
 * them: commands answered with an error and write errors (engine.h
 * asserts_user). mayfly has no assertion classes for the others: an
 * internal invariant failure (mongod's regular / tripwire) stops the
 * process, and it raises no warning or msg asserts, so they are 0. As
 * mongod's, the counters are 32-bit and roll over to 0 at 2^30, counted
 * in rollovers; with the others 0 that is user's count of 2^30s.
 */
static void
append_asserts(mf_engine_t *e, bson_t *r)
{
    bson_t sub;
    int64_t user = atomic_load_explicit(&e->asserts_user, memory_order_relaxed);
    BSON_APPEND_DOCUMENT_BEGIN(r, "asserts", &sub);
    BSON_APPEND_INT32(&sub, "regular", 0);
    BSON_APPEND_INT32(&sub, "warning", 0);
    BSON_APPEND_INT32(&sub, "msg", 0);
    BSON_APPEND_INT32(&sub, "user", (int32_t)(user % (1 << 30)));
    BSON_APPEND_INT32(&sub, "tripwire", 0);
    BSON_APPEND_INT32(&sub, "rollovers", (int32_t)(user >> 30));
    bson_append_document_end(r, &sub);
}

/* serverStatus().extra_info: the process's getrusage, under mongod's Linux names. */
static void
append_extra_info(bson_t *r)
{
    bson_t sub;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        memset(&ru, 0, sizeof(ru));
    BSON_APPEND_DOCUMENT_BEGIN(r, "extra_info", &sub);
    BSON_APPEND_UTF8(&sub, "note", "fields vary by platform");
    BSON_APPEND_INT64(&sub, "user_time_us", (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec);
    BSON_APPEND_INT64(&sub, "system_time_us", (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec);
    BSON_APPEND_INT64(&sub, "maximum_resident_set_kb", ru.ru_maxrss); /* Linux reports kilobytes */
    BSON_APPEND_INT64(&sub, "input_blocks", ru.ru_inblock);
    BSON_APPEND_INT64(&sub, "output_blocks", ru.ru_oublock);
    BSON_APPEND_INT64(&sub, "page_reclaims", ru.ru_minflt);
    BSON_APPEND_INT64(&sub, "page_faults", ru.ru_majflt);
    BSON_APPEND_INT64(&sub, "voluntary_context_switches", ru.ru_nvcsw);
    BSON_APPEND_INT64(&sub, "involuntary_context_switches", ru.ru_nivcsw);
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus().globalLock. mayfly has no global lock; its collection
 * locks (catalog.h) are what commands queue on, so currentQueue counts the
 * threads waiting for one now (readers: the shared lock reads and
 * document writes take; writers: DDL's exclusive one) and activeClients
 * the commands reading (readers) or writing (writers) documents now.
 * totalTime is the microseconds since start-up, as mongod's.
 */
static void
append_global_lock(mf_engine_t *e, const mf_lock_stats_t *ls, bson_t *r)
{
    bson_t sub, q;
    int64_t readers = atomic_load_explicit(&e->active_readers, memory_order_relaxed);
    int64_t writers = atomic_load_explicit(&e->active_writers, memory_order_relaxed);
    BSON_APPEND_DOCUMENT_BEGIN(r, "globalLock", &sub);
    BSON_APPEND_INT64(&sub, "totalTime", mf_mono_us() - e->start_mono_ms * 1000);
    /* Ints, as mongod's (only totalTime is a long). */
    BSON_APPEND_DOCUMENT_BEGIN(&sub, "currentQueue", &q);
    BSON_APPEND_INT32(&q, "total", (int32_t)(ls->waiting[0] + ls->waiting[1]));
    BSON_APPEND_INT32(&q, "readers", (int32_t)ls->waiting[0]);
    BSON_APPEND_INT32(&q, "writers", (int32_t)ls->waiting[1]);
    bson_append_document_end(&sub, &q);
    BSON_APPEND_DOCUMENT_BEGIN(&sub, "activeClients", &q);
    BSON_APPEND_INT32(&q, "total", (int32_t)(readers + writers));
    BSON_APPEND_INT32(&q, "readers", (int32_t)readers);
    BSON_APPEND_INT32(&q, "writers", (int32_t)writers);
    bson_append_document_end(&sub, &q);
    bson_append_document_end(r, &sub);
}

/* One of locks' per-mode documents, with mongod's rule: only modes with a non-zero figure, none if all are 0. */
static void
append_lock_modes(bson_t *b, const char *key, const int64_t v[2])
{
    bson_t m;
    if (v[0] == 0 && v[1] == 0)
        return;
    BSON_APPEND_DOCUMENT_BEGIN(b, key, &m);
    if (v[0] != 0)
        BSON_APPEND_INT64(&m, "R", v[0]);
    if (v[1] != 0)
        BSON_APPEND_INT64(&m, "W", v[1]);
    bson_append_document_end(b, &m);
}

/*
 * serverStatus().locks: mongod's shape (LockStats::report: a resource type
 * appears only once it has a non-zero figure). mayfly's only locks are its
 * collection locks, reported under Collection with the shared one as mode
 * S ("R") and the exclusive one as mode X ("W"); there is no Global,
 * Database or Mutex resource to report.
 */
static void
append_locks(const mf_lock_stats_t *ls, bson_t *r)
{
    bson_t sub, coll;
    BSON_APPEND_DOCUMENT_BEGIN(r, "locks", &sub);
    if (ls->acquired[0] != 0 || ls->acquired[1] != 0) {
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "Collection", &coll);
        append_lock_modes(&coll, "acquireCount", ls->acquired);
        append_lock_modes(&coll, "acquireWaitCount", ls->waits);
        append_lock_modes(&coll, "timeAcquiringMicros", ls->wait_us);
        bson_append_document_end(&sub, &coll);
    }
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus().network.compression, as mongod's
 * appendMessageCompressionStats: one document per compressor the server
 * offers, in its configured order, {compressor: {bytesIn, bytesOut},
 * decompressor: {bytesIn, bytesOut}}; no section when compression is
 * disabled.
 */
static void
append_compression_stats(mf_engine_t *e, bson_t *network)
{
    static const char *const sides[2] = {"compressor", "decompressor"};
    bson_t sec, one, side;

    if (e->net_compressors.n == 0)
        return;
    BSON_APPEND_DOCUMENT_BEGIN(network, "compression", &sec);
    for (uint8_t i = 0; i < e->net_compressors.n; i++) {
        int id = e->net_compressors.ids[i];
        BSON_APPEND_DOCUMENT_BEGIN(&sec, mf_compressor_name(id), &one);
        for (int k = 0; k < 2; k++) {
            BSON_APPEND_DOCUMENT_BEGIN(&one, sides[k], &side);
            BSON_APPEND_INT64(&side, "bytesIn", atomic_load(&e->net_compression[id][2 * k]));
            BSON_APPEND_INT64(&side, "bytesOut", atomic_load(&e->net_compression[id][2 * k + 1]));
            bson_append_document_end(&one, &side);
        }
        bson_append_document_end(&sec, &one);
    }
    bson_append_document_end(network, &sec);
}

/*
 * serverStatus().logicalSessionRecordCache: activeSessionsCount is the
 * logical session cache's size (engine/sessions.h). mayfly keeps no
 * config.system.sessions collection and no transaction table to reap:
 * sessions live in the cache alone and expire there as they are touched,
 * so the refresh and reaper jobs never run (their counts and durations 0,
 * their timestamps the epoch, as mongod's before a first run), and
 * sessionCatalogSize (sessions with transaction state checked out) is 0.
 */
static void
append_session_cache(mf_engine_t *e, bson_t *r)
{
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(r, "logicalSessionRecordCache", &sub);
    BSON_APPEND_INT32(&sub, "activeSessionsCount", (int32_t)mf_sessions_count(e->sessions));
    BSON_APPEND_INT32(&sub, "sessionsCollectionJobCount", 0);
    BSON_APPEND_INT32(&sub, "lastSessionsCollectionJobDurationMillis", 0);
    BSON_APPEND_DATE_TIME(&sub, "lastSessionsCollectionJobTimestamp", 0);
    BSON_APPEND_INT32(&sub, "lastSessionsCollectionJobEntriesRefreshed", 0);
    BSON_APPEND_INT32(&sub, "lastSessionsCollectionJobEntriesEnded", 0);
    BSON_APPEND_INT32(&sub, "lastSessionsCollectionJobCursorsClosed", 0);
    BSON_APPEND_INT32(&sub, "transactionReaperJobCount", 0);
    BSON_APPEND_INT32(&sub, "lastTransactionReaperJobDurationMillis", 0);
    BSON_APPEND_DATE_TIME(&sub, "lastTransactionReaperJobTimestamp", 0);
    BSON_APPEND_INT32(&sub, "lastTransactionReaperJobEntriesCleanedUp", 0);
    BSON_APPEND_INT32(&sub, "sessionCatalogSize", 0);
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus().opcountersRepl: the operations this member's applier
 * applied from other members' entries (a secondary's replication; 0 on a
 * standalone and for a primary's own writes). Oplog entries carry no
 * queries or getMores, so those two are 0, as on mongod.
 */
static void
append_opcounters_repl(const mf_repl_stats_t *rs, bson_t *r)
{
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(r, "opcountersRepl", &sub);
    BSON_APPEND_INT64(&sub, "insert", rs->applied[0]);
    BSON_APPEND_INT64(&sub, "query", 0);
    BSON_APPEND_INT64(&sub, "update", rs->applied[1]);
    BSON_APPEND_INT64(&sub, "delete", rs->applied[2]);
    BSON_APPEND_INT64(&sub, "getmore", 0);
    BSON_APPEND_INT64(&sub, "command", rs->applied[3]);
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus().transactions: retryable writes from replication's session
 * rows (a standalone has none: retryable writes need a replica set, as on
 * mongod), and multi-document transactions' counts (cmd_txn.c; mayfly
 * prepares none: it has no sharding, so the prepared counts are 0).
 */
static void
append_transactions(mf_engine_t *eng, const mf_repl_stats_t *rs, bson_t *r)
{
    static const char *const none[] = {"totalPrepared", "totalPreparedThenCommitted", "totalPreparedThenAborted",
                                       "currentPrepared", NULL};
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(r, "transactions", &sub);
    BSON_APPEND_INT64(&sub, "retriedCommandsCount", rs->retried_commands);
    BSON_APPEND_INT64(&sub, "retriedStatementsCount", rs->retried_statements);
    BSON_APPEND_INT64(&sub, "transactionsCollectionWriteCount", rs->session_writes);
    mf_cmd_txn_stats(eng, &sub);
    for (int i = 0; none[i] != NULL; i++)
        BSON_APPEND_INT64(&sub, none[i], 0);
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus().repl on a replica-set member: hello's replica-set fields
 * (topologyVersion, hosts, setName, setVersion, isWritablePrimary,
 * secondary, primary, me, electionId, lastWrite), as mongod's
 * appendReplicationInfo (isWritablePrimary since 4.9, SERVER-50420).
 * mongod's rbid counts rollbacks; raft never rolls back a committed
 * entry, so mayfly has no rollback id and leaves it out, as mongod does
 * before it has one.
 */
static void
append_repl(mf_op_t *op, bson_t *r)
{
    mf_engine_t *e = op->eng;
    bson_t sub, tv;
    BSON_APPEND_DOCUMENT_BEGIN(r, "repl", &sub);
    BSON_APPEND_DOCUMENT_BEGIN(&sub, "topologyVersion", &tv);
    BSON_APPEND_OID(&tv, "processId", &e->process_id);
    BSON_APPEND_INT64(&tv, "counter", atomic_load(&e->topology_version));
    bson_append_document_end(&sub, &tv);
    e->repl->hello(e->repl_arg, op->cmd, false, &sub);
    bson_append_document_end(r, &sub);
}

/*
 * serverStatus: mongod 8.0's default sections (each can be left out with
 * {<section>: 0}) plus mayfly's own (archive, metrics.ttl, heldRequests).
 * Takes no collection lock: it runs on the fast lane.
 */

/* Counts for serverStatus' catalogStats, as mongod 8.0 keeps them. */
typedef struct catalog_counts {
    int32_t collections, capped, clustered, timeseries, views, internal_colls, internal_views;
} catalog_counts_t;

static void
count_coll(void *arg, mf_coll_t *c)
{
    catalog_counts_t *n = arg;
    /* Internal: the admin, local and config databases, and system.* collections (buckets, system.views, profile...). */
    bool internal = strcmp(c->db, "admin") == 0 || strcmp(c->db, "local") == 0 || strcmp(c->db, "config") == 0 ||
                    strncmp(c->name, "system.", 7) == 0;
    if (c->is_view && c->is_timeseries)
        n->timeseries++;
    else if (c->is_view)
        internal ? n->internal_views++ : n->views++;
    else if (internal)
        n->internal_colls++;
    else {
        n->collections++;
        n->capped += c->capped;
        n->clustered += c->clustered;
    }
}

/* catalogStats: the catalog's collections by kind (one pass under the catalog's shared lock). */
static void
append_catalog_stats(mf_engine_t *e, bson_t *r)
{
    catalog_counts_t n = {0};
    bson_t sub;
    mf_catalog_rdlock(e->cat);
    mf_catalog_coll_list(e->cat, NULL, count_coll, &n);
    mf_catalog_unlock(e->cat);
    BSON_APPEND_DOCUMENT_BEGIN(r, "catalogStats", &sub);
    BSON_APPEND_INT32(&sub, "collections", n.collections);
    BSON_APPEND_INT32(&sub, "capped", n.capped);
    BSON_APPEND_INT32(&sub, "clustered", n.clustered);
    BSON_APPEND_INT32(&sub, "timeseries", n.timeseries);
    BSON_APPEND_INT32(&sub, "views", n.views);
    BSON_APPEND_INT32(&sub, "internalCollections", n.internal_colls);
    BSON_APPEND_INT32(&sub, "internalViews", n.internal_views);
    BSON_APPEND_INT32(&sub, "csfle", 0);
    BSON_APPEND_INT32(&sub, "queryableEncryption", 0);
    bson_append_document_end(r, &sub);
}

static int
cmd_server_status(mf_op_t *op)
{
    mf_engine_t *e = op->eng;
    bson_t *r = op->reply, sub, sub2, sub3;
    int64_t up = mf_mono_ms() - e->start_mono_ms;
    int64_t rss, virt;
    mf_lock_stats_t ls;
    mf_repl_stats_t rs = {0};

    mf_catalog_lock_stats(e->cat, &ls);
    if (e->repl != NULL && e->repl->stats != NULL)
        e->repl->stats(e->repl_arg, &rs);
    BSON_APPEND_UTF8(r, "host", e->host);
    BSON_APPEND_UTF8(r, "version", MF_VERSION);
    BSON_APPEND_UTF8(r, "process", "mayflyd");
    BSON_APPEND_INT64(r, "pid", (int64_t)getpid());
    BSON_APPEND_DOUBLE(r, "uptime", (double)(up / 1000));
    BSON_APPEND_INT64(r, "uptimeMillis", up);
    BSON_APPEND_INT64(r, "uptimeEstimate", up / 1000);
    BSON_APPEND_DATE_TIME(r, "localTime", mf_now_ms());

    if (section_on(op, "asserts"))
        append_asserts(e, r);
    if (section_on(op, "connections")) {
        BSON_APPEND_DOCUMENT_BEGIN(r, "connections", &sub);
        int64_t conn_max = atomic_load(&e->conn_max), conn_cur = atomic_load(&e->conn_current);
        if (conn_max <= 0)
            conn_max = 1000000; /* not serving (an engine opened by a test) */
        BSON_APPEND_INT32(&sub, "current", (int32_t)conn_cur);
        BSON_APPEND_INT32(&sub, "available", (int32_t)(conn_max > conn_cur ? conn_max - conn_cur : 0));
        BSON_APPEND_INT32(&sub, "totalCreated", (int32_t)atomic_load(&e->conn_total));
        /* Refused at accept (over --maxConns, or too few file descriptors left), as mongod counts them. */
        BSON_APPEND_INT32(&sub, "rejected", (int32_t)atomic_load(&e->conn_rejected));
        /* Connections with a command in progress, this one included (kept by src/net/net.c). */
        BSON_APPEND_INT32(&sub, "active", (int32_t)atomic_load(&e->conn_active));
        BSON_APPEND_INT32(&sub, "threaded", (int32_t)conn_cur); /* every connection is served by the workers */
        bson_append_document_end(r, &sub);
    }
    if (section_on(op, "extra_info"))
        append_extra_info(r);
    if (section_on(op, "globalLock"))
        append_global_lock(e, &ls, r);
    if (section_on(op, "locks"))
        append_locks(&ls, r);
    if (section_on(op, "logicalSessionRecordCache"))
        append_session_cache(e, r);

    /*
     * mongod's names; heldRequests is mayfly's: requests run with no thread
     * hand-off (src/net/net.c). bytesIn / bytesOut count messages as they
     * are uncompressed, the physical ones as they crossed the socket.
     */
    if (section_on(op, "network")) {
        BSON_APPEND_DOCUMENT_BEGIN(r, "network", &sub);
        int64_t in = atomic_load(&e->net_bytes_in), out = atomic_load(&e->net_bytes_out);
        BSON_APPEND_INT64(&sub, "bytesIn", in + atomic_load(&e->net_logical_in_extra));
        BSON_APPEND_INT64(&sub, "bytesOut", out + atomic_load(&e->net_logical_out_extra));
        BSON_APPEND_INT64(&sub, "physicalBytesIn", in);
        BSON_APPEND_INT64(&sub, "physicalBytesOut", out);
        BSON_APPEND_INT64(&sub, "numRequests", atomic_load(&e->net_requests));
        BSON_APPEND_INT64(&sub, "heldRequests", atomic_load(&e->net_held_requests));
        mf_engine_net_status_append(e, &sub); /* workers: mayfly's thread pools (src/net/net.c) */
        append_compression_stats(e, &sub);
        bson_append_document_end(r, &sub);
    }

    if (section_on(op, "opcounters")) {
        BSON_APPEND_DOCUMENT_BEGIN(r, "opcounters", &sub);
        BSON_APPEND_INT64(&sub, "insert", atomic_load(&e->op_insert));
        BSON_APPEND_INT64(&sub, "query", atomic_load(&e->op_query));
        BSON_APPEND_INT64(&sub, "update", atomic_load(&e->op_update));
        BSON_APPEND_INT64(&sub, "delete", atomic_load(&e->op_delete));
        BSON_APPEND_INT64(&sub, "getmore", atomic_load(&e->op_getmore));
        BSON_APPEND_INT64(&sub, "command", atomic_load(&e->op_command));
        bson_append_document_end(r, &sub);
    }
    if (section_on(op, "opcountersRepl"))
        append_opcounters_repl(&rs, r);

    /* opLatencies (common/curop.h): {opLatencies: {histograms: true}} adds the buckets, {opLatencies: 0} leaves it out. */
    bson_iter_t oit, hit;
    bool lat_want = true, lat_hist = false;
    if (bson_iter_init_find(&oit, op->cmd, "opLatencies")) {
        if (BSON_ITER_HOLDS_DOCUMENT(&oit))
            lat_hist = bson_iter_recurse(&oit, &hit) && bson_iter_find(&hit, "histograms") && bson_iter_as_bool(&hit);
        else
            lat_want = bson_iter_as_bool(&oit);
    }
    if (lat_want) {
        mf_latency_t lat[MF_LAT_N];
        mf_curops_latency_get(e->curops, NULL, lat);
        mf_latency_append(r, "opLatencies", lat, lat_hist);
    }

    if (section_on(op, "mem")) {
        read_mem(&rss, &virt);
        BSON_APPEND_DOCUMENT_BEGIN(r, "mem", &sub);
        BSON_APPEND_INT32(&sub, "bits", 64);
        BSON_APPEND_INT64(&sub, "resident", rss);
        BSON_APPEND_INT64(&sub, "virtual", virt);
        BSON_APPEND_BOOL(&sub, "supported", true);
        bson_append_document_end(r, &sub);
    }
    if (e->repl != NULL && section_on(op, "repl"))
        append_repl(op, r);

    if (section_on(op, "catalogStats"))
        append_catalog_stats(e, r);
    if (section_on(op, "storageEngine")) {
        /* mongod 8.0's fields and order; mayfly drops tables at once (no pending idents) and has no backup cursor. */
        BSON_APPEND_DOCUMENT_BEGIN(r, "storageEngine", &sub);
        BSON_APPEND_UTF8(&sub, "name", e->in_memory ? "inMemory" : "wiredTiger");
        BSON_APPEND_BOOL(&sub, "supportsCommittedReads", true);
        BSON_APPEND_TIMESTAMP(&sub, "oldestRequiredTimestampForCrashRecovery", 0, 0);
        BSON_APPEND_BOOL(&sub, "supportsPendingDrops", true);
        BSON_APPEND_INT64(&sub, "dropPendingIdents", 0);
        BSON_APPEND_BOOL(&sub, "supportsSnapshotReadConcern", true);
        BSON_APPEND_BOOL(&sub, "readOnly", false);
        BSON_APPEND_BOOL(&sub, "persistent", !e->in_memory);
        BSON_APPEND_BOOL(&sub, "backupCursorOpen", false);
        bson_append_document_end(r, &sub);
    }
    if (section_on(op, "transactions"))
        append_transactions(e, &rs, r);

    if (section_on(op, "wiredTiger")) {
        /* All the connection's statistics, as mongod's WiredTigerServerStatusSection (exporters read many). */
        mf_error_t werr;
        BSON_APPEND_DOCUMENT_BEGIN(r, "wiredTiger", &sub);
        bson_t wt_all = BSON_INITIALIZER, comp = BSON_INITIALIZER;
        bson_iter_t wi, ci;
        bool placed = false;
        if (mf_storage_conn_stats_bson(op->sess, &wt_all, &werr) != 0)
            BSON_APPEND_UTF8(&wt_all, "error", werr.msg);
        /* "compact": background compaction as WiredTiger 11 counts it, among the groups in byte order. */
        mf_autocompact_stats_bson(e->autocompact, &comp);
        if (bson_iter_init(&wi, &wt_all) && bson_iter_init(&ci, &comp) && bson_iter_next(&ci)) {
            while (bson_iter_next(&wi)) {
                if (!placed && strcmp(bson_iter_key(&wi), "uri") != 0 && strcmp(bson_iter_key(&wi), "compact") > 0) {
                    bson_append_iter(&sub, NULL, 0, &ci);
                    placed = true;
                }
                bson_append_iter(&sub, NULL, 0, &wi);
            }
            if (!placed)
                bson_append_iter(&sub, NULL, 0, &ci);
        }
        bson_destroy(&wt_all);
        bson_destroy(&comp);
        bson_append_document_end(r, &sub);
    }

    if (section_on(op, "archive"))
        append_archive_status(e, r);

    if (section_on(op, "batchedDeletes")) {
        BSON_APPEND_DOCUMENT_BEGIN(r, "batchedDeletes", &sub);
        BSON_APPEND_INT64(&sub, "batches", atomic_load(&e->batched_deletes_batches));
        BSON_APPEND_INT64(&sub, "docs", atomic_load(&e->batched_deletes_docs));
        bson_append_document_end(r, &sub);
    }

    if (section_on(op, "metrics")) {
        BSON_APPEND_DOCUMENT_BEGIN(r, "metrics", &sub);
        /* As mongod's: commands run and failed by name; documents written by clients and returned to them. */
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "commands", &sub2);
        mf_cmd_append_command_metrics(e, &sub2);
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "document", &sub2);
        BSON_APPEND_INT64(&sub2, "deleted", atomic_load(&e->op_delete));
        BSON_APPEND_INT64(&sub2, "inserted", atomic_load(&e->op_insert));
        BSON_APPEND_INT64(&sub2, "returned", atomic_load(&e->docs_returned));
        BSON_APPEND_INT64(&sub2, "updated", atomic_load(&e->op_update));
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "operation", &sub2);
        BSON_APPEND_INT64(&sub2, "scanAndOrder", atomic_load(&e->scan_and_order));
        BSON_APPEND_INT64(&sub2, "writeConflicts", atomic_load(&e->write_conflicts));
        bson_append_document_end(&sub, &sub2);
        /* Keys and documents examined by finished operations; the queries that read a whole collection. */
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "queryExecutor", &sub2);
        BSON_APPEND_INT64(&sub2, "scanned", atomic_load(&e->qe_scanned));
        BSON_APPEND_INT64(&sub2, "scannedObjects", atomic_load(&e->qe_scanned_objects));
        BSON_APPEND_DOCUMENT_BEGIN(&sub2, "collectionScans", &sub3);
        BSON_APPEND_INT64(&sub3, "nonTailable", atomic_load(&e->qe_collscans_nontailable));
        BSON_APPEND_INT64(&sub3, "total", atomic_load(&e->qe_collscans));
        bson_append_document_end(&sub2, &sub3);
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "ttl", &sub2);
        mf_ttl_status_append(e->ttl, &sub2);
        bson_append_document_end(&sub, &sub2);
        /* Write-concern waits for w > 1 (a write is majority-committed by raft before it is acknowledged). */
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "getLastError", &sub2);
        BSON_APPEND_DOCUMENT_BEGIN(&sub2, "wtime", &sub3);
        BSON_APPEND_INT64(&sub3, "num", atomic_load(&e->wc_waits));
        BSON_APPEND_INT64(&sub3, "totalMillis", atomic_load(&e->wc_wait_ms));
        bson_append_document_end(&sub2, &sub3);
        BSON_APPEND_INT64(&sub2, "wtimeouts", atomic_load(&e->wc_timeouts));
        bson_append_document_end(&sub, &sub2);
        /*
         * mongod 8.0's metric tree (server_status_metric.cpp) lists a
         * level's leaves and subtrees together in name order; the counters
         * are clientcursor.cpp's.
         */
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "cursor", &sub2);
        mf_cursors_metrics_t cm;
        mf_cursors_metrics(e->cursors, &cm);
        static const char *const spans[MF_CURSOR_LIFESPANS] = {
            "lessThan1Second", "lessThan5Seconds", "lessThan15Seconds", "lessThan30Seconds",
            "lessThan1Minute", "lessThan10Minutes", "greaterThanOrEqual10Minutes"};
        static const int span_order[MF_CURSOR_LIFESPANS] = {6, 5, 2, 4, 0, 3, 1}; /* by name */
        BSON_APPEND_DOCUMENT_BEGIN(&sub2, "lifespan", &sub3);
        for (int k = 0; k < MF_CURSOR_LIFESPANS; k++)
            BSON_APPEND_INT64(&sub3, spans[span_order[k]], cm.lifespan[span_order[k]]);
        bson_append_document_end(&sub2, &sub3);
        BSON_APPEND_INT64(&sub2, "moreThanOneBatch", cm.more_than_one_batch);
        int64_t ctotal, cnotimeout, cpinned;
        mf_cursors_open_stats(e->cursors, &ctotal, &cnotimeout, &cpinned);
        BSON_APPEND_DOCUMENT_BEGIN(&sub2, "open", &sub3); /* mongod's order and counters (exporters read all three) */
        BSON_APPEND_INT64(&sub3, "noTimeout", cnotimeout);
        BSON_APPEND_INT64(&sub3, "pinned", cpinned);
        BSON_APPEND_INT64(&sub3, "total", ctotal);
        bson_append_document_end(&sub2, &sub3);
        BSON_APPEND_INT64(&sub2, "timedOut", mf_cursors_timed_out(e->cursors));
        BSON_APPEND_INT64(&sub2, "totalOpened", cm.total_opened);
        bson_append_document_end(&sub, &sub2);
        bson_append_document_end(r, &sub);
    }
    return 0;
}

/*
 * getDiagnosticData: mongod's latest FTDC sample, {data: {start,
 * serverStatus: {start, <serverStatus>, ok, end}, replSetGetStatus: {start,
 * <replSetGetStatus or its error>, ok, end} (replica-set members), end}}
 * (ftdc/collector.cpp frames each collector's reply with start and end
 * dates). mayfly collects the sample when asked instead of every second,
 * and leaves out what it has no counterpart for (systemMetrics,
 * local.oplog.rs.stats). Admin only; access control asks for
 * clusterMonitor's serverStatus and replSetGetStatus actions, as mongod.
 */
static int
cmd_get_diagnostic_data(mf_op_t *op)
{
    bson_t data, sub, status_cmd = BSON_INITIALIZER;
    mf_op_t inner = *op;
    int rc = 0;

    /* serverStatus as FTDC runs it: every default section (the caller's own fields play no part). */
    BSON_APPEND_INT32(&status_cmd, "serverStatus", 1);
    inner.cmd = &status_cmd;
    inner.reply = &sub;
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "data", &data);
    BSON_APPEND_DATE_TIME(&data, "start", mf_now_ms());
    BSON_APPEND_DOCUMENT_BEGIN(&data, "serverStatus", &sub);
    BSON_APPEND_DATE_TIME(&sub, "start", mf_now_ms());
    rc = cmd_server_status(&inner);
    BSON_APPEND_DOUBLE(&sub, "ok", 1.0);
    BSON_APPEND_DATE_TIME(&sub, "end", mf_now_ms());
    bson_append_document_end(&data, &sub);
    if (op->eng->repl != NULL) {
        /* mongod's collector records a failing command's status in its place ({ok: 0, errmsg, code, codeName}). */
        bson_t rs = BSON_INITIALIZER, rs_cmd = BSON_INITIALIZER;
        mf_error_t err = {0};
        BSON_APPEND_INT32(&rs_cmd, "replSetGetStatus", 1);
        BSON_APPEND_DOCUMENT_BEGIN(&data, "replSetGetStatus", &sub);
        BSON_APPEND_DATE_TIME(&sub, "start", mf_now_ms());
        if (op->eng->repl->command(op->eng->repl_arg, "replSetGetStatus", &rs_cmd, &rs, &err) == 0) {
            bson_concat(&sub, &rs);
            BSON_APPEND_DOUBLE(&sub, "ok", 1.0);
        } else {
            bson_t e;
            bson_init(&e);
            mf_cmd_error_reply(&e, &err);
            bson_concat(&sub, &e);
            bson_destroy(&e);
        }
        BSON_APPEND_DATE_TIME(&sub, "end", mf_now_ms());
        bson_append_document_end(&data, &sub);
        bson_destroy(&rs);
        bson_destroy(&rs_cmd);
    }
    BSON_APPEND_DATE_TIME(&data, "end", mf_now_ms());
    bson_append_document_end(op->reply, &data);
    bson_destroy(&status_cmd);
    return rc;
}

/*
 * hostInfo.extra on Linux, as mongod's: /proc/version, the C library's and
 * the kernel's versions, the first CPU's frequency and feature flags from
 * /proc/cpuinfo, the page size and count, and the open-files limit.
 */
static void
append_host_extra(bson_t *sub, const struct utsname *u)
{
    char line[8192], version[512] = "", mhz[64] = "", flags[4096] = "", model[256] = "";
    /* (physical id, core id) pairs seen: mongod's physicalCores and cpuSockets (numbers beyond 255 not told apart) */
    unsigned char cores[256][256 / 8];
    unsigned char sockets[256 / 8];
    int phys = 0, ncores = 0, nsockets = 0;
    memset(cores, 0, sizeof(cores));
    memset(sockets, 0, sizeof(sockets));
    FILE *f = fopen("/proc/version", "r");
    if (f != NULL) {
        if (fgets(version, sizeof(version), f) != NULL)
            version[strcspn(version, "\n")] = '\0';
        fclose(f);
    }
    BSON_APPEND_UTF8(sub, "versionString", version[0] ? version : u->version);
    BSON_APPEND_UTF8(sub, "libcVersion", gnu_get_libc_version());
    BSON_APPEND_UTF8(sub, "kernelVersion", u->release);
    if ((f = fopen("/proc/cpuinfo", "r")) != NULL) {
        while (fgets(line, sizeof(line), f) != NULL) {
            char *colon = strchr(line, ':');
            if (colon == NULL)
                continue;
            const char *val = colon + 1 + strspn(colon + 1, " \t");
            size_t n = strcspn(val, "\n");
            if (mhz[0] == '\0' && strncmp(line, "cpu MHz", 7) == 0)
                snprintf(mhz, sizeof(mhz), "%.*s", (int)n, val);
            else if (flags[0] == '\0' && strncmp(line, "flags", 5) == 0)
                snprintf(flags, sizeof(flags), "%.*s", (int)n, val);
            else if (model[0] == '\0' && strncmp(line, "model name", 10) == 0)
                snprintf(model, sizeof(model), "%.*s", (int)n, val);
            else if (strncmp(line, "physical id", 11) == 0) {
                phys = atoi(val) & 255;
                if (!(sockets[phys / 8] & (1u << (phys % 8)))) {
                    sockets[phys / 8] |= (unsigned char)(1u << (phys % 8));
                    nsockets++;
                }
            } else if (strncmp(line, "core id", 7) == 0) {
                int core = atoi(val) & 255;
                if (!(cores[phys][core / 8] & (1u << (core % 8)))) {
                    cores[phys][core / 8] |= (unsigned char)(1u << (core % 8));
                    ncores++;
                }
            }
        }
        fclose(f);
    }
    BSON_APPEND_UTF8(sub, "cpuString", model);
    BSON_APPEND_UTF8(sub, "cpuFrequencyMHz", mhz);
    BSON_APPEND_UTF8(sub, "cpuFeatures", flags);
    BSON_APPEND_INT64(sub, "pageSize", (int64_t)sysconf(_SC_PAGESIZE));
    BSON_APPEND_INT32(sub, "numPages", (int32_t)sysconf(_SC_PHYS_PAGES));
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        BSON_APPEND_INT32(sub, "maxOpenFiles", rl.rlim_cur > INT32_MAX ? INT32_MAX : (int32_t)rl.rlim_cur);
    if (ncores > 0)
        BSON_APPEND_INT32(sub, "physicalCores", ncores);
    if (nsockets > 0)
        BSON_APPEND_INT32(sub, "cpuSockets", nsockets);
}

/* The distribution's name, as mongod's hostInfo os.name: /etc/os-release's PRETTY_NAME, else the kernel's name. */
static void
os_pretty_name(char *out, size_t cap, const char *fallback)
{
    char line[512];
    snprintf(out, cap, "%s", fallback);
    FILE *f = fopen("/etc/os-release", "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "PRETTY_NAME=", 12) != 0)
            continue;
        char *v = line + 12;
        v[strcspn(v, "\n")] = '\0';
        size_t n = strlen(v);
        if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
            v[n - 1] = '\0';
            v++;
        }
        if (v[0] != '\0')
            mf_strlcpy(out, v, cap);
        break;
    }
    fclose(f);
}

static int
cmd_host_info(mf_op_t *op)
{
    bson_t *r = op->reply, sub;
    struct utsname u;
    char hn[256] = "localhost";
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

    uname(&u);
    gethostname(hn, sizeof(hn) - 1);
    BSON_APPEND_DOCUMENT_BEGIN(r, "system", &sub);
    BSON_APPEND_DATE_TIME(&sub, "currentTime", mf_now_ms());
    /* mongod's prettyHostNameAndPort: the port too when it is not the default. */
    char hostport[300];
    if (op->eng->port != 0 && op->eng->port != 27017)
        snprintf(hostport, sizeof(hostport), "%s:%d", hn, op->eng->port);
    else
        snprintf(hostport, sizeof(hostport), "%s", hn);
    BSON_APPEND_UTF8(&sub, "hostname", hostport);
    BSON_APPEND_INT32(&sub, "cpuAddrSize", 64);
    mf_sysres_t res;
    mf_sysres_read("", &res);
    int64_t mem_mb = res.mem_total > 0 ? res.mem_total >> 20 : (int64_t)pages * psize / (1024 * 1024);
    BSON_APPEND_INT64(&sub, "memSizeMB", mem_mb);
    /* The memory granted (a container's limit), the base the cache is sized from, as mongod's. */
    BSON_APPEND_INT64(&sub, "memLimitMB", res.mem_limit > 0 ? res.mem_limit >> 20 : mem_mb);
    BSON_APPEND_INT32(&sub, "numCores", (int32_t)res.cpus_online);
    /* mongod's: the affinity mask's CPUs (the count the server sizes itself by also heeds a cgroup quota). */
    BSON_APPEND_INT32(&sub, "numCoresAvailableToProcess", (int32_t)res.cpus_affinity);
    BSON_APPEND_UTF8(&sub, "cpuArch", u.machine);
    BSON_APPEND_BOOL(&sub, "numaEnabled", false);
    bson_append_document_end(r, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(r, "os", &sub);
    char osname[256], osversion[300];
    os_pretty_name(osname, sizeof(osname), u.sysname);
    snprintf(osversion, sizeof(osversion), "Kernel %s", u.release); /* as mongod's ProcessInfo on Linux */
    BSON_APPEND_UTF8(&sub, "type", u.sysname);
    BSON_APPEND_UTF8(&sub, "name", osname);
    BSON_APPEND_UTF8(&sub, "version", osversion);
    bson_append_document_end(r, &sub);
    BSON_APPEND_DOCUMENT_BEGIN(r, "extra", &sub);
    append_host_extra(&sub, &u);
    bson_append_document_end(r, &sub);
    return 0;
}

static int
cmd_whatsmyuri(mf_op_t *op)
{
    /* An embedded caller (no client) has no address: answer an empty string. */
    BSON_APPEND_UTF8(op->reply, "you", op->client != NULL ? op->client->remote : "");
    return 0;
}

/*
 * Authentication: mayfly has no users, so every attempt fails the way it
 * does on a mongod where the user does not exist.
 */
static int
cmd_auth_failed(mf_op_t *op)
{
    return mf_err_set(&op->err, MF_E_AuthenticationFailed, "Authentication failed.");
}

static int
cmd_get_log(mf_op_t *op)
{
    bson_iter_t it;
    bson_t arr;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "Argument to getLog must be of type String; found %s",
                          "another type");
    const char *which = bson_iter_utf8(&it, NULL);
    if (strcmp(which, "*") == 0) {
        BSON_APPEND_ARRAY_BEGIN(op->reply, "names", &arr);
        BSON_APPEND_UTF8(&arr, "0", "global");
        BSON_APPEND_UTF8(&arr, "1", "startupWarnings");
        bson_append_array_end(op->reply, &arr);
        return 0;
    }
    if (strcmp(which, "startupWarnings") == 0) {
        bson_t empty = BSON_INITIALIZER;
        const bson_t *w = op->eng->startup_warnings ? op->eng->startup_warnings : &empty;
        BSON_APPEND_INT32(op->reply, "totalLinesWritten", (int32_t)bson_count_keys(w));
        BSON_APPEND_ARRAY(op->reply, "log", w);
        return 0;
    }
    if (strcmp(which, "global") != 0)
        return mf_err_set(&op->err, MF_E_OperationFailed, "No log named '%s'", which);
    char *lines[1024];
    long total = 0;
    int n = mf_log_recent(lines, 1024, &total);
    BSON_APPEND_INT64(op->reply, "totalLinesWritten", total);
    BSON_APPEND_ARRAY_BEGIN(op->reply, "log", &arr);
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "%d", i);
        bson_append_utf8(&arr, key, -1, lines[i], -1);
        free(lines[i]);
    }
    bson_append_array_end(op->reply, &arr);
    return 0;
}

static int
cmd_get_cmd_line_opts(mf_op_t *op)
{
    bson_t empty = BSON_INITIALIZER;
    BSON_APPEND_ARRAY(op->reply, "argv", op->eng->cmdline_argv ? op->eng->cmdline_argv : &empty);
    BSON_APPEND_DOCUMENT(op->reply, "parsed", op->eng->cmdline_parsed ? op->eng->cmdline_parsed : &empty);
    return 0;
}

/*
 * Replica-set commands: replication's (eng->repl->command) on a member; on
 * a standalone 76 NoReplicationEnabled, with mongod's messages.
 */
static int
cmd_repl(mf_op_t *op)
{
    if (op->eng->repl != NULL)
        return op->eng->repl->command(op->eng->repl_arg, op->name, op->cmd, op->reply, &op->err);
    if (strcmp(op->name, "replSetInitiate") == 0)
        return mf_err_set(&op->err, MF_E_NoReplicationEnabled,
                          "This node was not started with replication enabled.");
    return mf_err_set(&op->err, MF_E_NoReplicationEnabled, "not running with --replSet");
}

/*
 * The cluster-wide read and write concern defaults (getDefaultRWConcern,
 * setDefaultRWConcern): mongod's document {_id: "ReadWriteConcernDefaults",
 * defaultReadConcern, defaultWriteConcern, updateOpTime,
 * updateWallClockTime} in config.settings, written like any replicated
 * document (so it survives restarts and fail-overs) and read back on each
 * get. Without one the defaults are mongod 8.0's implicit ones on a replica
 * set: "local" reads and w: "majority" writes. Every mayfly write already
 * waits for a majority's raft logs and a read sees only what they hold, so
 * a stored default with a smaller w or a "local" / "available" level is
 * met by what mayfly does anyway; the values are kept and reported, not
 * applied to each command.
 */
#define RWC_DEFAULTS_ID "ReadWriteConcernDefaults"

/* The stored defaults document into out (initialised here on success): 0, MF_NOTFOUND, or -1 with op->err. */
static int
rwc_defaults_load(mf_op_t *op, bson_t *out)
{
    mf_coll_t *c = NULL;
    bson_value_t idv = {.value_type = BSON_TYPE_UTF8};
    int64_t rid = 0;
    int rc = MF_NOTFOUND;

    idv.value.v_utf8.str = (char *)RWC_DEFAULTS_ID;
    idv.value.v_utf8.len = (uint32_t)strlen(RWC_DEFAULTS_ID);
    if (mf_catalog_coll_acquire(op->eng->cat, "config", "settings", false, &c, &op->err) != 0) {
        rc = -1;
    } else if (c != NULL) {
        if (mf_txn_begin(op->sess, &op->err) != 0) {
            rc = -1;
        } else {
            rc = mf_coll_find_id(op->sess, c, &idv, &rid, &op->err);
            if (rc == 0)
                rc = mf_coll_fetch(op->sess, c, rid, out, &op->err);
            mf_txn_abort(op->sess);
            if (rc != 0 && rc != MF_NOTFOUND) {
                if (op->err.code == 0)
                    mf_err_set(&op->err, MF_E_WriteConflict, "reading the read/write concern defaults conflicted");
                rc = -1;
            }
        }
    }
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

/* A get or set reply from the stored document (NULL: none), in mongod's field order. */
static void
rwc_defaults_reply(mf_op_t *op, const bson_t *doc)
{
    bson_iter_t it;
    bson_t sub;
    bool rc_set = doc != NULL && bson_iter_init_find(&it, doc, "defaultReadConcern") && BSON_ITER_HOLDS_DOCUMENT(&it);
    bool wc_set = doc != NULL && bson_iter_init_find(&it, doc, "defaultWriteConcern") && BSON_ITER_HOLDS_DOCUMENT(&it);

    if (rc_set && bson_iter_init_find(&it, doc, "defaultReadConcern")) {
        bson_append_value(op->reply, "defaultReadConcern", -1, bson_iter_value(&it));
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(op->reply, "defaultReadConcern", &sub);
        BSON_APPEND_UTF8(&sub, "level", "local");
        bson_append_document_end(op->reply, &sub);
    }
    if (wc_set && bson_iter_init_find(&it, doc, "defaultWriteConcern")) {
        bson_append_value(op->reply, "defaultWriteConcern", -1, bson_iter_value(&it));
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(op->reply, "defaultWriteConcern", &sub);
        BSON_APPEND_UTF8(&sub, "w", "majority");
        BSON_APPEND_INT32(&sub, "wtimeout", 0);
        bson_append_document_end(op->reply, &sub);
    }
    if (doc != NULL && bson_iter_init_find(&it, doc, "updateOpTime"))
        bson_append_value(op->reply, "updateOpTime", -1, bson_iter_value(&it));
    if (doc != NULL && bson_iter_init_find(&it, doc, "updateWallClockTime"))
        bson_append_value(op->reply, "updateWallClockTime", -1, bson_iter_value(&it));
    BSON_APPEND_UTF8(op->reply, "defaultWriteConcernSource", wc_set ? "global" : "implicit");
    BSON_APPEND_UTF8(op->reply, "defaultReadConcernSource", rc_set ? "global" : "implicit");
    BSON_APPEND_DATE_TIME(op->reply, "localUpdateWallClockTime", mf_now_ms());
}

static int
cmd_get_default_rw_concern(mf_op_t *op)
{
    bson_t doc;
    /* mongod's assertNotStandaloneOrShardServer. */
    if (op->eng->repl == NULL)
        return mf_err_set(&op->err, MF_E_Location51300, "'getDefaultRWConcern' is not supported on standalone nodes.");
    int rc = rwc_defaults_load(op, &doc);
    if (rc < 0)
        return -1;
    rwc_defaults_reply(op, rc == 0 ? &doc : NULL);
    if (rc == 0)
        bson_destroy(&doc);
    return 0;
}

/*
 * The defaultReadConcern a setDefaultRWConcern gives (an object, not
 * empty): the fields of mongod's ReadConcernIdl (40415 for another), a
 * readConcern's shape (mf_read_concern_shape), a level mongod takes as a
 * default (local, available, majority; snapshot and linearizable are not
 * suitable) and nothing that names a point in time. 0, or -1 with op->err.
 */
static int
rwc_check_read_concern(mf_op_t *op)
{
    bson_iter_t field, it;
    static const char *const known[] = {"level", "afterOpTime", "afterClusterTime", "atClusterTime", "provenance", NULL};
    if (!mf_op_find(op, "defaultReadConcern", &field) || !bson_iter_recurse(&field, &it))
        return 0;
    while (bson_iter_next(&it)) {
        int i = 0;
        while (known[i] != NULL && strcmp(known[i], bson_iter_key(&it)) != 0)
            i++;
        if (known[i] == NULL)
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'readConcern.%s' is an unknown field.",
                              bson_iter_key(&it));
    }
    if (mf_read_concern_shape(&op->err, &field) != 0)
        return -1;
    bson_iter_recurse(&field, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "level") == 0) {
            const char *l = bson_iter_utf8(&it, NULL); /* a string: mf_read_concern_shape */
            if (strcmp(l, "snapshot") == 0 || strcmp(l, "linearizable") == 0)
                return mf_err_set(&op->err, MF_E_BadValue, "level: '%s' is not suitable for the default read concern", l);
        } else if (strcmp(k, "provenance") == 0) {
            return mf_err_set(&op->err, MF_E_BadValue, "'provenance' must be unset in default read concern");
        } else {
            return mf_err_set(&op->err, MF_E_BadValue, "'%s' is not suitable for the default read concern", k);
        }
    }
    return 0;
}

/*
 * The defaultWriteConcern a setDefaultRWConcern gives (an object, not
 * empty): a write concern's shape, acknowledged, no provenance. 0, or -1
 * with op->err.
 */
static int
rwc_check_write_concern(mf_op_t *op, const bson_t *wc)
{
    mf_wc_shape_t shape;
    if (mf_write_concern_shape(&op->err, wc, &shape) != 0)
        return -1;
    if (mf_value_is_number(&shape.w) && shape.wnum < 1)
        return mf_err_set(&op->err, MF_E_BadValue, "Unacknowledged write concern is not suitable for the default write concern");
    if (shape.provenance)
        return mf_err_set(&op->err, MF_E_BadValue, "'provenance' must be unset in default write concern");
    return 0;
}

/*
 * setDefaultRWConcern: mongod's generateNewCWRWCToBeSavedOnDisk. At least
 * one of defaultReadConcern / defaultWriteConcern (objects); an empty one
 * clears the read default, and the write default once set cannot be
 * cleared (20). The one not given keeps its stored value. The document is
 * upserted in config.settings with w: majority durability and the reply is
 * getDefaultRWConcern's of the new document.
 */
static int
cmd_set_default_rw_concern(mf_op_t *op)
{
    bson_t rc_doc, wc_doc, cur, doc = BSON_INITIALIZER, stmt = BSON_INITIALIZER, q;
    bool has_rc = false, has_wc = false;
    int loaded, rc = -1;
    bson_iter_t it;

    if (op->eng->repl == NULL)
        return mf_err_set(&op->err, MF_E_Location51300, "'setDefaultRWConcern' is not supported on standalone nodes.");
    if (mf_op_get_doc(op, "defaultReadConcern", &rc_doc, &has_rc) != 0 ||
        mf_op_get_doc(op, "defaultWriteConcern", &wc_doc, &has_wc) != 0)
        return -1;
    if (!has_rc && !has_wc)
        return mf_err_set(&op->err, MF_E_BadValue,
                          "At least one of the \"defaultReadConcern\" or \"defaultWriteConcern\" fields must be present");
    if ((has_rc && rwc_check_read_concern(op) != 0) || (has_wc && rwc_check_write_concern(op, &wc_doc) != 0))
        return -1;
    if ((loaded = rwc_defaults_load(op, &cur)) < 0)
        return -1;
    bool cur_wc = loaded == 0 && bson_iter_init_find(&it, &cur, "defaultWriteConcern") && BSON_ITER_HOLDS_DOCUMENT(&it);
    if (has_wc && bson_empty(&wc_doc) && cur_wc) {
        mf_err_set(&op->err, MF_E_IllegalOperation, "The global default write concern cannot be unset once it is set.");
        goto done;
    }
    BSON_APPEND_UTF8(&doc, "_id", RWC_DEFAULTS_ID);
    if (has_rc ? !bson_empty(&rc_doc) : (loaded == 0 && bson_iter_init_find(&it, &cur, "defaultReadConcern"))) {
        if (has_rc)
            BSON_APPEND_DOCUMENT(&doc, "defaultReadConcern", &rc_doc);
        else
            bson_append_value(&doc, "defaultReadConcern", -1, bson_iter_value(&it));
    }
    if (has_wc ? !bson_empty(&wc_doc) : cur_wc) {
        if (has_wc) {
            BSON_APPEND_DOCUMENT(&doc, "defaultWriteConcern", &wc_doc);
        } else {
            bson_iter_init_find(&it, &cur, "defaultWriteConcern");
            bson_append_value(&doc, "defaultWriteConcern", -1, bson_iter_value(&it));
        }
    }
    uint32_t secs = (uint32_t)(mf_now_ms() / 1000), inc = 1;
    if (op->eng->repl->op_time != NULL)
        op->eng->repl->op_time(op->eng->repl_arg, &secs, &inc);
    BSON_APPEND_TIMESTAMP(&doc, "updateOpTime", secs, inc);
    BSON_APPEND_DATE_TIME(&doc, "updateWallClockTime", mf_now_ms());
    BSON_APPEND_DOCUMENT_BEGIN(&stmt, "q", &q);
    BSON_APPEND_UTF8(&q, "_id", RWC_DEFAULTS_ID);
    bson_append_document_end(&stmt, &q);
    BSON_APPEND_DOCUMENT(&stmt, "u", &doc);
    BSON_APPEND_BOOL(&stmt, "upsert", true);
    mf_write_update_result_t res;
    memset(&res, 0, sizeof(res));
    if (mf_write_update(op->eng->cat, op->sess, true, 0 /* no MF_WRITE_* flags */, "config", "settings", &stmt, &res,
                        &op->err) != 0)
        goto done;
    if (res.upserted)
        bson_value_destroy(&res.upserted_id);
    rwc_defaults_reply(op, &doc);
    rc = 0;
done:
    if (loaded == 0)
        bson_destroy(&cur);
    bson_destroy(&doc);
    bson_destroy(&stmt);
    return rc;
}

/*
 * setFeatureCompatibilityVersion: mayfly has one feature compatibility
 * version, 8.0. Asking for it succeeds and changes nothing, with confirm:
 * true as mongod 8.0 requires (requireConfirmInSetFcv, 7369100 without);
 * the versions mongod 8.0 could go back to are refused (mayfly cannot
 * downgrade its data), anything else is mongod's BadValue.
 */
static int
cmd_set_fcv(mf_op_t *op)
{
    bson_iter_t it;
    bool confirm = false, present;
    if (!bson_iter_init(&it, op->cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'setFeatureCompatibilityVersion.setFeatureCompatibilityVersion' is the wrong type "
                          "'%s', expected type 'string'",
                          mf_type_name(bson_iter_type(&it)));
    const char *v = bson_iter_utf8(&it, NULL);
    if (mf_op_get_bool(op, "confirm", &confirm, &present) != 0)
        return -1;
    if (strcmp(v, "8.0") != 0 && strcmp(v, "7.0") != 0 && strcmp(v, "7.3") != 0)
        return mf_err_set(&op->err, MF_E_BadValue,
                          "Invalid feature compatibility version value '%s'; expected '7.0' or '7.3' or '8.0'. See "
                          "https://docs.mongodb.com/master/release-notes/8.0-compatibility/#feature-compatibility.",
                          v);
    bool upgrade = strcmp(v, "8.0") == 0;
    if (!confirm)
        return mf_err_set(&op->err, MF_E_Location7369100,
                          upgrade ? "Once you have upgraded to 8.0, you will not be able to downgrade FCV and binary "
                                    "version without support assistance. Please re-run this command with 'confirm: "
                                    "true' to acknowledge this and continue with the FCV upgrade."
                                  : "Once you have downgraded the FCV, if you choose to downgrade the binary version, "
                                    "it will require support assistance. Please re-run this command with 'confirm: "
                                    "true' to acknowledge this and continue with the FCV downgrade.");
    if (!upgrade)
        return mf_err_set(&op->err, MF_E_IllegalOperation,
                          "mayfly keeps featureCompatibilityVersion 8.0: it cannot downgrade its data to %s", v);
    return 0;
}

/* Fields of a currentOp command that are not filter conditions. */
static bool
is_currentop_option(const char *k)
{
    static const char *opts[] = {"currentOp", "$all", "$ownOps", "$truncateOps", "$db", "lsid", "$clusterTime",
                                 "$readPreference", "comment", "apiVersion", "apiStrict", "apiDeprecationErrors",
                                 "maxTimeMS", "readConcern", "$client", NULL};
    for (int i = 0; opts[i]; i++) {
        if (strcmp(opts[i], k) == 0)
            return true;
    }
    return false;
}

typedef struct currentop_ctx {
    mf_matcher_t *m;
    bson_t *arr;
    int n;
    bool own_only;          /* $ownOps under access control: only owner's */
    mf_curop_owner_t owner; /* the caller */
} currentop_ctx_t;

static void
currentop_add(void *arg, const bson_t *doc)
{
    currentop_ctx_t *c = arg;
    char key[16];
    if (c->own_only && !mf_cmd_curop_owned_by(doc, &c->owner))
        return;
    if (!mf_matcher_match(c->m, doc, NULL))
        return;
    snprintf(key, sizeof(key), "%d", c->n++);
    BSON_APPEND_DOCUMENT(c->arr, key, doc);
}

/*
 * currentOp: {currentOp: 1, $all?, $ownOps?, <filter fields>} → {inprog: [...]}.
 * Never takes the catalog lock, so it answers while an index build holds it.
 */
static int
cmd_current_op(mf_op_t *op)
{
    bson_t filter, inprog;
    bson_iter_t it;
    currentop_ctx_t ctx = {0};

    bson_init(&filter);
    bson_iter_init(&it, op->cmd);
    while (bson_iter_next(&it)) {
        if (!is_currentop_option(bson_iter_key(&it)))
            bson_append_value(&filter, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    ctx.m = mf_matcher_new(&filter, &op->err);
    if (ctx.m == NULL) {
        bson_destroy(&filter);
        return -1;
    }
    bson_init(&inprog);
    ctx.arr = &inprog;
    ctx.own_only = mf_cmd_curop_own_only(op, mf_op_find(op, "$ownOps", &it) && bson_iter_as_bool(&it), &ctx.owner);
    mf_cmd_txn_report_ops(op->eng, currentop_add, &ctx);
    /* As mongod's command, which runs $currentOp with idleConnections: $all and idleSessions at its default (true). */
    if (mf_op_find(op, "$all", &it) && bson_iter_as_bool(&it))
        mf_curops_report_idle_conns(op->eng->curops, op->eng->host, currentop_add, &ctx);
    mf_cmd_txn_report_idle(op->eng, currentop_add, &ctx);
    BSON_APPEND_ARRAY(op->reply, "inprog", &inprog);
    if (atomic_load(&op->eng->fsync_locked)) {
        /* As mongod's currentOp while fsync-locked. */
        BSON_APPEND_BOOL(op->reply, "fsyncLock", true);
        BSON_APPEND_UTF8(op->reply, "info", "use db.fsyncUnlock() to terminate the fsync write/snapshot lock");
    }
    bson_destroy(&inprog);
    mf_matcher_free(ctx.m);
    bson_destroy(&filter);
    return 0;
}

/*
 * killOp: {killOp: 1, op: <opid>}; like mongod, an unknown opid is not an
 * error for a holder of the killop privilege (hostManager, root).
 */
static int
cmd_kill_op(mf_op_t *op)
{
    /* Parsed as mongod's parseOpId (bsonExtractIntegerField, then 32 bits), with its codes and messages. */
    bson_iter_t it;
    if (!mf_op_find(op, "op", &it))
        return mf_err_set(&op->err, MF_E_NoSuchKey, "Missing expected field \"op\"");
    const bson_value_t *v = bson_iter_value(&it);
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "Expected field \"op\" to have numeric type, but found %s",
                          mf_type_name(v->value_type));
    int64_t opid;
    if (!mf_value_as_int64(v, &opid)) {
        char shown[64];
        mf_fmt_value(v, shown, sizeof(shown));
        return mf_err_set(&op->err, MF_E_BadValue,
                          "Expected field \"op\" to have a value exactly representable as a 64-bit integer, but found op: %s",
                          shown);
    }
    if (opid < INT32_MIN || opid > INT32_MAX)
        return mf_err_set(&op->err, MF_E_Location26823, "invalid op : %" PRId64 ". Op ID cannot be represented with 32 bits",
                          opid);
    /* As mongod's: without the killop privilege a user may kill only operations run under its own login. */
    char owner[400]; /* the caller's "user@db", as a cursor's owner */
    bool any = mf_cmd_auth_cluster(op, MF_CACT_ADMIN);
    if (!any)
        mf_cmd_auth_owner(op, owner, sizeof(owner));
    int killed = mf_curops_kill_as(op->eng->curops, opid, any ? NULL : owner);
    if (killed < 0 || (!any && killed == 0))
        return mf_err_set(&op->err, MF_E_Unauthorized, "Unauthorized");
    mf_log(MF_LOG_INFO, "COMMAND", "going to kill op: %lld%s", (long long)opid, killed ? "" : " (not found)");
    BSON_APPEND_UTF8(op->reply, "info", "attempting to kill op");
    return 0;
}

/* Defined in cmd_dispatch.c, which owns the command table. */
int mf_cmd_list_commands(mf_op_t *op);

static const char *const set_rwc_fields[] = {"defaultReadConcern", "defaultWriteConcern", NULL};
static const char *const fcv_fields[] = {"confirm", "fromConfigServer", "writeConcern", NULL};

const mf_cmd_def_t mf_cmds_admin[] = {
    {"listCommands", mf_cmd_list_commands, MF_CMD_NO_DB},
    {"currentOp", cmd_current_op, MF_CMD_ADMIN_ONLY},
    {"killOp", cmd_kill_op, MF_CMD_ADMIN_ONLY},
    {"hello", cmd_hello, MF_CMD_NO_DB},
    {"isMaster", cmd_hello, MF_CMD_NO_DB},
    {"ismaster", cmd_hello, MF_CMD_NO_DB},
    {"ping", cmd_ping, MF_CMD_NO_DB},
    {"shutdown", cmd_shutdown, MF_CMD_ADMIN_ONLY, shutdown_fields},
    {"buildInfo", cmd_build_info, MF_CMD_NO_DB},
    {"buildinfo", cmd_build_info, MF_CMD_NO_DB},
    {"getParameter", cmd_get_parameter, MF_CMD_ADMIN_ONLY},
    {"setParameter", cmd_set_parameter, MF_CMD_ADMIN_ONLY},
    {"serverStatus", cmd_server_status, 0},
    {"getDiagnosticData", cmd_get_diagnostic_data, MF_CMD_ADMIN_ONLY},
    {"hostInfo", cmd_host_info, 0},
    {"whatsmyuri", cmd_whatsmyuri, 0},
    {"authenticate", cmd_auth_failed, 0},
    {"getLog", cmd_get_log, MF_CMD_ADMIN_ONLY},
    {"getCmdLineOpts", cmd_get_cmd_line_opts, MF_CMD_ADMIN_ONLY},
    {"replSetGetStatus", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetInitiate", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetGetConfig", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetReconfig", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetStepDown", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetFreeze", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetSyncFrom", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"replSetMaintenance", cmd_repl, MF_CMD_ADMIN_ONLY},
    /* Members' own: a member's raft address and state (replSetInitiate, heartbeats), joining a set. */
    {"_mfReplInfo", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"_mfReplJoin", cmd_repl, MF_CMD_ADMIN_ONLY},
    {"getDefaultRWConcern", cmd_get_default_rw_concern, MF_CMD_ADMIN_ONLY},
    {"setDefaultRWConcern", cmd_set_default_rw_concern, MF_CMD_ADMIN_ONLY | MF_CMD_WRITE, set_rwc_fields},
    {"setFeatureCompatibilityVersion", cmd_set_fcv, MF_CMD_ADMIN_ONLY, fcv_fields},
    {NULL, NULL, 0},
};
