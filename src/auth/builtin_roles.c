/*
 * builtin_roles.c: the privileges MongoDB 8.0's built-in roles grant, in
 * MongoDB's own terms (resources and action names), for rolesInfo's
 * showPrivileges and for the inheritedPrivileges of a user-defined role
 * that inherits a built-in one.
 *
 * What mayfly enforces for a built-in role is roles.c's grouped actions;
 * this table only describes, so it follows mongod's builtin_roles.yml entry
 * for entry: each role's inherited built-in roles first, then its own
 * privileges in their order (mongod's generated addPrivileges_<role>), each
 * written as one stored privilege {resource, actions} to be merged per
 * resource by the caller (mongod's addPrivilegeToPrivilegeVector). A
 * privilege's db of NULL means the role's own database.
 *
 * Thread safety: read-only static data; any thread.
 */
#include "auth/roles.h"

#include <string.h>

/* Action lists, space-separated (the yml's anchors). */
#define A_READ                                                                                             \
    "changeStream collStats dbHash dbStats find killCursors listCollections listIndexes listSearchIndexes " \
    "planCacheRead"
#define A_READ_WRITE                                                                                       \
    A_READ " cleanupStructuredEncryptionData compactStructuredEncryptionData convertToCapped createCollection " \
           "createIndex createSearchIndexes dropCollection dropIndex dropSearchIndex insert remove "              \
           "renameCollectionSameDB update updateSearchIndex"
#define A_USER_ADMIN                                                                                          \
    "changeCustomData changePassword createUser createRole dropUser dropRole grantRole revokeRole "             \
    "setAuthenticationRestriction viewUser viewRole"
#define A_DB_ADMIN                                                                                         \
    "analyze bypassDocumentValidation collMod collStats compact convertToCapped createCollection dbStats "  \
    "dropCollection dropDatabase dropIndex dropSearchIndex createIndex createSearchIndexes enableProfiler "  \
    "listCollections listIndexes listSearchIndexes updateSearchIndex planCacheIndexFilter planCacheRead "   \
    "planCacheWrite reIndex renameCollectionSameDB storageDetails validate"
#define A_PROFILE A_READ " convertToCapped createCollection dropCollection"
#define A_READ_AND_INDEX A_READ " createIndex createSearchIndexes dropIndex dropSearchIndex"
#define A_CM_CLUSTER                                                                                          \
    "connPoolStats getCmdLineOpts getDefaultRWConcern getLog getParameter getShardMap hostInfo listDatabases " \
    "listSampledQueries listSessions listShards netstat operationMetrics replSetGetConfig replSetGetStatus "   \
    "serverStatus top useUUID inprog shardingState allCollectionStats shardedDataDistribution"
#define A_CM_DB "collStats dbStats getDatabaseVersion getShardVersion indexStats"
#define A_HM_CLUSTER                                                                                            \
    "applicationMessage auditConfigure compact connPoolSync dropConnections logRotate oidReset setParameter "   \
    "shutdown "                                                                                                 \
    "touch unlock flushRouterConfig fsync invalidateUserCache killAnyCursor killAnySession killop "            \
    "replSetResizeOplog resync trafficRecord rotateCertificates oidcListKeys oidcRefreshKeys"
#define A_CMG_CLUSTER                                                                                          \
    "appendOplogNote applicationMessage replSetConfigure replSetGetConfig replSetGetStatus replSetStateChange " \
    "resync addShard removeShard listSessions listShards flushRouterConfig cleanupOrphaned "                    \
    "getDefaultRWConcern runTenantMigration setDefaultRWConcern setFeatureCompatibilityVersion "               \
    "setClusterParameter getClusterParameter setChangeStreamState getChangeStreamState querySettings "         \
    "queryStatsRead queryStatsReadTransformed checkMetadataConsistency transitionFromDedicatedConfigServer "   \
    "transitionToDedicatedConfigServer"
#define A_CMG_DB                                                                                     \
    "analyzeShardKey configureQueryAnalyzer clearJumboFlag splitChunk moveChunk moveCollection " \
    "enableSharding splitVector refineCollectionShardKey reshardCollection"
#define A_CMG_WRITE "insert update remove"
#define A_RESTORE_WRITE                                                                                      \
    "bypassDocumentValidation collMod convertToCapped createCollection createIndex createSearchIndexes " \
    "dropCollection insert updateSearchIndex"

/* A resource kind, as the yml's matchType. */
typedef enum {
    K_DB,       /* database: {db, collection: ""} */
    K_EXACT,    /* exact_namespace: {db, collection} */
    K_COLL,     /* collection: {db: "", collection} */
    K_NORMAL,   /* any_normal: {db: "", collection: ""} */
    K_CLUSTER,  /* cluster: {cluster: true} */
    K_ANY,      /* any: {anyResource: true} */
    K_BUCKETS,  /* any_system_buckets: {system_buckets: ""} */
} kind_t;

typedef struct bpriv {
    kind_t kind;
    const char *db; /* NULL: the role's database */
    const char *coll;
    const char *actions;
} bpriv_t;

#define MAX_SUB 7
#define MAX_PRIVS 24

typedef struct brole {
    const char *name;
    const char *sub[MAX_SUB];  /* inherited built-in roles: "role" on the same database, or "role@db" */
    bpriv_t privs[MAX_PRIVS];  /* kind K_DB with actions NULL ends the list */
} brole_t;

static const brole_t broles[] = {
    {"read", {NULL}, {{K_DB, NULL, NULL, A_READ}, {K_EXACT, NULL, "system.js", A_READ}}},
    {"readWrite", {NULL}, {{K_DB, NULL, NULL, A_READ_WRITE}, {K_EXACT, NULL, "system.js", A_READ_WRITE}}},
    {"userAdmin", {NULL}, {{K_DB, NULL, NULL, A_USER_ADMIN}}},
    {"dbAdmin",
     {NULL},
     {{K_DB, NULL, NULL, A_DB_ADMIN}, {K_DB, NULL, NULL, "configureQueryAnalyzer"},
      {K_EXACT, NULL, "system.profile", A_PROFILE}}},
    {"dbOwner", {"readWrite", "dbAdmin", "userAdmin", NULL}, {{K_DB, NULL, NULL, NULL}}},
    {"readAnyDatabase",
     {NULL},
     {{K_NORMAL, NULL, NULL, A_READ}, {K_CLUSTER, NULL, NULL, "listDatabases"}, {K_COLL, NULL, "system.js", A_READ},
      {K_BUCKETS, NULL, NULL, A_READ}}},
    {"readWriteAnyDatabase",
     {"readAnyDatabase", NULL},
     {{K_NORMAL, NULL, NULL, A_READ_WRITE}, {K_COLL, NULL, "system.js", A_READ_WRITE},
      {K_BUCKETS, NULL, NULL, A_READ_WRITE}}},
    {"userAdminAnyDatabase",
     {NULL},
     {{K_NORMAL, NULL, NULL, A_USER_ADMIN " listCachedAndActiveUsers"}, {K_DB, "local", NULL, A_USER_ADMIN},
      {K_DB, "config", NULL, A_USER_ADMIN},
      {K_CLUSTER, NULL, NULL, "listDatabases authSchemaUpgrade invalidateUserCache viewUser"},
      {K_EXACT, "admin", "system.users", A_READ_AND_INDEX}, {K_EXACT, "admin", "system.roles", A_READ_AND_INDEX},
      {K_COLL, NULL, "system.users", A_READ}, {K_EXACT, "admin", "system.version", A_READ},
      {K_EXACT, "admin", "system.backup_users", A_READ}}},
    {"dbAdminAnyDatabase",
     {NULL},
     {{K_CLUSTER, NULL, NULL, "listDatabases applyOps"}, {K_NORMAL, NULL, NULL, A_DB_ADMIN},
      {K_NORMAL, NULL, NULL, "configureQueryAnalyzer"}, {K_COLL, NULL, "system.profile", A_PROFILE},
      {K_BUCKETS, NULL, NULL, A_DB_ADMIN}}},
    {"clusterMonitor",
     {"read@config", "read@local", NULL},
     {{K_CLUSTER, NULL, NULL, A_CM_CLUSTER}, {K_NORMAL, NULL, NULL, A_CM_DB}, {K_DB, "config", NULL, A_CM_DB},
      {K_EXACT, "config", "system.sessions", A_CM_DB}, {K_DB, "local", NULL, A_CM_DB},
      {K_EXACT, "local", "system.replset", "find"}, {K_EXACT, "local", "replset.election", "find"},
      {K_EXACT, "local", "replset.minvalid", "find"}, {K_COLL, NULL, "system.profile", "find"}}},
    {"hostManager", {NULL}, {{K_CLUSTER, NULL, NULL, A_HM_CLUSTER}, {K_NORMAL, NULL, NULL, "killCursors"}}},
    {"clusterManager",
     {"read@config", NULL},
     {{K_CLUSTER, NULL, NULL, A_CMG_CLUSTER}, {K_NORMAL, NULL, NULL, A_CMG_DB}, {K_BUCKETS, NULL, NULL, A_CMG_DB},
      {K_DB, "config", NULL, A_CMG_DB}, {K_DB, "local", NULL, A_CMG_DB},
      {K_EXACT, "local", "system.replset", A_READ}, {K_ANY, NULL, NULL, "dbCheck"},
      {K_EXACT, "local", "system.healthlog", A_READ}, {K_DB, "config", NULL, A_CMG_WRITE},
      {K_DB, "local", NULL, A_CMG_WRITE}, {K_EXACT, "local", "replset.election", A_CMG_WRITE},
      {K_EXACT, "local", "replset.minvalid", A_CMG_WRITE}}},
    {"clusterAdmin",
     {"clusterMonitor", "hostManager", "clusterManager", NULL},
     {{K_NORMAL, NULL, NULL, "dropDatabase"}, {K_ANY, NULL, NULL, "importCollection exportCollection"}}},
    {"__queryableBackup",
     {NULL},
     {{K_ANY, NULL, NULL, "collStats listCollections listIndexes listSearchIndexes"}, {K_NORMAL, NULL, NULL, "find"},
      {K_BUCKETS, NULL, NULL, "find"}, {K_CLUSTER, NULL, NULL, "getParameter listDatabases useUUID"},
      {K_DB, "config", NULL, "find"}, {K_DB, "local", NULL, "find"}, {K_EXACT, "local", "replset.election", "find"},
      {K_EXACT, "local", "replset.minvalid", "find"}, {K_COLL, NULL, "system.js", "find"},
      {K_COLL, NULL, "system.users", "find"}, {K_COLL, NULL, "system.profile", "find"},
      {K_EXACT, "admin", "system.backup_users", "find"}, {K_EXACT, "admin", "system.roles", "find"},
      {K_EXACT, "admin", "system.version", "find"}, {K_EXACT, "config", "settings", "find"}}},
    {"backup",
     {"__queryableBackup", NULL},
     {{K_CLUSTER, NULL, NULL, "appendOplogNote serverStatus setUserWriteBlockMode"},
      {K_EXACT, "config", "settings", "insert update"}}},
    {"restore",
     {NULL},
     {{K_CLUSTER, NULL, NULL, "getParameter forceUUID useUUID bypassWriteBlockingMode setUserWriteBlockMode applyOps"},
      {K_DB, "local", NULL, A_RESTORE_WRITE}, {K_DB, "config", NULL, A_RESTORE_WRITE},
      {K_BUCKETS, NULL, NULL, A_RESTORE_WRITE}, {K_EXACT, "local", "system.replset", A_RESTORE_WRITE},
      {K_EXACT, "local", "replset.election", A_RESTORE_WRITE}, {K_EXACT, "local", "replset.minvalid", A_RESTORE_WRITE},
      {K_ANY, NULL, NULL, "listCollections"}, {K_NORMAL, NULL, NULL, A_RESTORE_WRITE " " A_USER_ADMIN},
      {K_COLL, NULL, "system.js", A_RESTORE_WRITE}, {K_EXACT, "admin", "tempusers", "find"},
      {K_EXACT, "admin", "temproles", "find"}, {K_EXACT, "admin", "system.backup_users", A_RESTORE_WRITE},
      {K_EXACT, "admin", "system.version", A_RESTORE_WRITE " find"},
      {K_COLL, NULL, "system.users", A_RESTORE_WRITE " find update remove"},
      {K_EXACT, "admin", "system.roles", "createIndex"}}},
    {"directShardOperations", {NULL}, {{K_CLUSTER, NULL, NULL, "issueDirectShardOperations"}}},
    {"root",
     {"clusterAdmin", "userAdminAnyDatabase", "dbAdminAnyDatabase", "readWriteAnyDatabase", "backup", "restore",
      "directShardOperations"},
     {{K_ANY, NULL, NULL, "validate"}, {K_CLUSTER, NULL, NULL, "useTenant"},
      {K_EXACT, "config", "system.preimages", "find remove"},
      {K_EXACT, "config", "system.change_collection", "find insert remove update"}}},
};

static const brole_t *
find_brole(const char *name)
{
    for (size_t i = 0; i < sizeof(broles) / sizeof(broles[0]); i++)
        if (strcmp(broles[i].name, name) == 0)
            return &broles[i];
    return NULL;
}

/* Appends one stored privilege {resource, actions} for p on a role of db to arr, as its (*n)++-th element. */
static void
append_one(bson_t *arr, uint32_t *n, const bpriv_t *p, const char *db)
{
    char key[16], word[64];
    const char *kp;
    bson_t one, res, acts;
    bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(arr, kp, &one);
    BSON_APPEND_DOCUMENT_BEGIN(&one, "resource", &res);
    switch (p->kind) {
    case K_DB: BSON_APPEND_UTF8(&res, "db", p->db ? p->db : db); BSON_APPEND_UTF8(&res, "collection", ""); break;
    case K_EXACT: BSON_APPEND_UTF8(&res, "db", p->db ? p->db : db); BSON_APPEND_UTF8(&res, "collection", p->coll); break;
    case K_COLL: BSON_APPEND_UTF8(&res, "db", ""); BSON_APPEND_UTF8(&res, "collection", p->coll); break;
    case K_NORMAL: BSON_APPEND_UTF8(&res, "db", ""); BSON_APPEND_UTF8(&res, "collection", ""); break;
    case K_CLUSTER: BSON_APPEND_BOOL(&res, "cluster", true); break;
    case K_ANY: BSON_APPEND_BOOL(&res, "anyResource", true); break;
    case K_BUCKETS: BSON_APPEND_UTF8(&res, "system_buckets", ""); break;
    }
    bson_append_document_end(&one, &res);
    BSON_APPEND_ARRAY_BEGIN(&one, "actions", &acts);
    uint32_t na = 0;
    for (const char *s = p->actions; *s != '\0';) {
        size_t len = strcspn(s, " ");
        if (len > 0 && len < sizeof(word)) {
            memcpy(word, s, len);
            word[len] = '\0';
            bson_uint32_to_string(na++, &kp, key, sizeof(key));
            bson_append_utf8(&acts, kp, -1, word, (int)len);
        }
        s += len;
        s += strspn(s, " ");
    }
    bson_append_array_end(&one, &acts);
    bson_append_document_end(arr, &one);
}

static void
add_role(const brole_t *r, const char *db, bson_t *arr, uint32_t *n, int depth)
{
    if (depth > 4) /* the table's deepest chain is root > clusterAdmin > clusterMonitor > read */
        return;
    for (int i = 0; i < MAX_SUB && r->sub[i] != NULL; i++) {
        char name[64];
        const char *at = strchr(r->sub[i], '@');
        size_t len = at ? (size_t)(at - r->sub[i]) : strlen(r->sub[i]);
        memcpy(name, r->sub[i], len);
        name[len] = '\0';
        const brole_t *s = find_brole(name);
        if (s != NULL)
            add_role(s, at ? at + 1 : db, arr, n, depth + 1);
    }
    for (int i = 0; i < MAX_PRIVS && r->privs[i].actions != NULL; i++)
        append_one(arr, n, &r->privs[i], db);
}

bool
mf_builtin_role_name(const char *role, const char *db)
{
    /* builtin_roles.yml's roles that are not adminOnly; every other one of the table lives on admin only. */
    static const char *const any_db[] = {"read", "readWrite", "userAdmin", "dbAdmin", "dbOwner", "enableSharding", NULL};
    if (strcmp(role, "enableSharding") == 0 || strcmp(role, "__system") == 0)
        return strcmp(role, "enableSharding") == 0 || strcmp(db, "admin") == 0;
    if (find_brole(role) == NULL)
        return false;
    for (int i = 0; any_db[i] != NULL; i++)
        if (strcmp(any_db[i], role) == 0)
            return true;
    return strcmp(db, "admin") == 0;
}

bool
mf_builtin_role_privileges(const char *role, const char *db, bson_t *arr)
{
    const brole_t *r = find_brole(role);
    if (r == NULL || !mf_role_exists(role, db) || strcmp(role, "__system") == 0)
        return false;
    uint32_t n = 0;
    add_role(r, db, arr, &n, 0);
    return true;
}
