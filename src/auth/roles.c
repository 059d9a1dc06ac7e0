/*
 * roles.c: the built-in roles (see roles.h), as MongoDB 8.0's manual
 * defines them ("Built-In Roles"), in mayfly's grouped actions; MongoDB's
 * action names for user-defined roles' privileges; and the privilege
 * checks.
 */
#include "auth/roles.h"

#include <stdio.h>
#include <string.h>

#define READ (MF_ACT_FIND | MF_ACT_LIST_COLLECTIONS | MF_ACT_LIST_INDEXES | MF_ACT_STATS | MF_ACT_KILL_CURSORS)
#define READ_WRITE                                                                                        \
    (READ | MF_ACT_INSERT | MF_ACT_UPDATE | MF_ACT_REMOVE | MF_ACT_CREATE_COLLECTION | MF_ACT_CREATE_INDEX | \
     MF_ACT_DROP_COLLECTION | MF_ACT_DROP_INDEX | MF_ACT_RENAME_SAME_DB)
#define DB_ADMIN                                                                                           \
    (MF_ACT_LIST_COLLECTIONS | MF_ACT_LIST_INDEXES | MF_ACT_STATS | MF_ACT_CREATE_COLLECTION |               \
     MF_ACT_CREATE_INDEX | MF_ACT_DROP_COLLECTION | MF_ACT_DROP_INDEX | MF_ACT_RENAME_SAME_DB | MF_ACT_COLLMOD | \
     MF_ACT_COMPACT | MF_ACT_VALIDATE | MF_ACT_PROFILE | MF_ACT_DROP_DATABASE | MF_ACT_BYPASS_VALIDATION | \
     MF_ACT_REINDEX | MF_ACT_READ_PROFILE)
#define USER_ADMIN (MF_ACT_USER_ADMIN | MF_ACT_VIEW_USER)
#define EVERYTHING 0xffffffffu

/* A role's actions on one named database (coll NULL) or collection (db "": that collection in every database). */
typedef struct role_res {
    const char *db, *coll;
    uint32_t acts;
} role_res_t;

typedef struct role_def {
    const char *name;
    bool admin_only; /* exists only on the admin database */
    uint32_t db;     /* on the role's database */
    uint32_t any;    /* on every database but local and config */
    uint32_t all;    /* on every database */
    uint32_t cluster;
    const role_res_t *named; /* NULL, or named resources up to an entry with acts 0 */
    uint32_t buckets;        /* on every database's system.buckets.* collections */
    uint32_t js;             /* on system.js: the role's database's (admin_only false), else every database's */
} role_def_t;

/*
 * backup: mongod 8.0's builtin_roles.yml backup and the __queryableBackup
 * it inherits: collStats, listCollections and listIndexes everywhere, find
 * on every ordinary database, on config and local, and on system.users
 * (admin's included, as mongodump dumps users), system.profile, and
 * admin.system.roles, system.version and system.backup_users; insert and
 * update on config.settings; listDatabases, serverStatus and getParameter
 * (not the rest of the monitoring group). appendOplogNote, setUserWriteBlockMode and
 * useUUID have no mayfly group and grant nothing.
 */
static const role_res_t backup_named[] = {
    {"config", NULL, MF_ACT_FIND},
    {"local", NULL, MF_ACT_FIND},
    {"", "system.users", MF_ACT_FIND},
    {"", "system.profile", MF_ACT_FIND},
    {"admin", "system.roles", MF_ACT_FIND},
    {"admin", "system.version", MF_ACT_FIND},
    {"admin", "system.backup_users", MF_ACT_FIND},
    {"", "system.js", MF_ACT_FIND},
    {"config", "settings", MF_ACT_FIND | MF_ACT_INSERT | MF_ACT_UPDATE},
    {NULL, NULL, 0},
};

/* builtin_roles.yml's restoreWrite actions, in mayfly's groups (convertToCapped and the search indexes have none). */
#define RESTORE_WRITE                                                                                       \
    (MF_ACT_BYPASS_VALIDATION | MF_ACT_COLLMOD | MF_ACT_CREATE_COLLECTION | MF_ACT_CREATE_INDEX |           \
     MF_ACT_DROP_COLLECTION | MF_ACT_INSERT)

/*
 * restore: mongod 8.0's builtin_roles.yml restore: restoreWrite and user
 * administration on every ordinary database (mongorestore creates users and
 * roles), restoreWrite on config and local, listCollections everywhere;
 * system.users anywhere also find, update and remove; admin.system.version
 * find; admin.system.roles createIndex; find on admin.tempusers and
 * admin.temproles (mongorestore's staging collections); getParameter (no
 * other monitoring action, no invalidateUserCache).
 * forceUUID, useUUID, applyOps and the write blocking actions have no mayfly
 * group and grant nothing.
 */
static const role_res_t restore_named[] = {
    {"config", NULL, RESTORE_WRITE},
    {"local", NULL, RESTORE_WRITE},
    {"", "system.users", RESTORE_WRITE | MF_ACT_FIND | MF_ACT_UPDATE | MF_ACT_REMOVE},
    {"", "system.js", RESTORE_WRITE},
    {"admin", "system.version", RESTORE_WRITE | MF_ACT_FIND},
    {"admin", "system.backup_users", RESTORE_WRITE},
    {"admin", "system.roles", MF_ACT_CREATE_INDEX},
    {"admin", "tempusers", MF_ACT_FIND},
    {"admin", "temproles", MF_ACT_FIND},
    {NULL, NULL, 0},
};

/* The monitoring group with the single monitoring actions it includes (see roles.h). */
#define MONITOR (MF_CACT_MONITOR | MF_CACT_SERVER_STATUS | MF_CACT_GET_PARAMETER | MF_CACT_REPL_STATUS)

/*
 * clusterMonitor's read@config and read@local (builtin_roles.yml's roles:
 * monitoring agents read local.oplog.rs and config), clusterManager's
 * read@config and its writes on config and local.
 */
static const role_res_t cluster_monitor_named[] = {
    {"config", NULL, READ},
    {"local", NULL, READ},
    {"config", "system.sessions", MF_ACT_STATS},
    {"local", "system.replset", MF_ACT_FIND},
    {NULL, NULL, 0},
};
/* clusterAdmin's: clusterMonitor's and clusterManager's together. */
static const role_res_t cluster_admin_named[] = {
    {"config", NULL, READ | MF_ACT_INSERT | MF_ACT_UPDATE | MF_ACT_REMOVE},
    {"local", NULL, READ | MF_ACT_INSERT | MF_ACT_UPDATE | MF_ACT_REMOVE},
    {"config", "system.sessions", MF_ACT_STATS},
    {"local", "system.replset", READ},
    {"local", "system.healthlog", READ},
    {NULL, NULL, 0},
};
static const role_res_t cluster_manager_named[] = {
    {"config", NULL, READ | MF_ACT_INSERT | MF_ACT_UPDATE | MF_ACT_REMOVE},
    {"local", NULL, MF_ACT_INSERT | MF_ACT_UPDATE | MF_ACT_REMOVE},
    {"local", "system.replset", READ},
    {"local", "system.healthlog", READ},
    {NULL, NULL, 0},
};

/*
 * userAdminAnyDatabase's privileges on named collections (builtin_roles.yml):
 * read and index admin.system.users and admin.system.roles, read every
 * database's system.users and admin.system.version / system.backup_users.
 * No direct writes: users and roles change through the user management
 * commands (user administration on every ordinary database).
 */
static const role_res_t user_admin_any_named[] = {
    {"admin", "system.users", READ | MF_ACT_CREATE_INDEX | MF_ACT_DROP_INDEX},
    {"admin", "system.roles", READ | MF_ACT_CREATE_INDEX | MF_ACT_DROP_INDEX},
    {"", "system.users", READ},
    {"admin", "system.version", MF_ACT_FIND},
    {"admin", "system.backup_users", MF_ACT_FIND},
    {NULL, NULL, 0},
};

/*
 * The cluster actions follow builtin_roles.yml: backup holds serverStatus,
 * getParameter and listDatabases (__queryableBackup's and its own), restore
 * only getParameter, not the monitoring group (currentOp, getLog, top ...);
 * invalidateUserCache is hostManager's (cluster administration here) and
 * userAdminAnyDatabase's, not restore's. hostManager holds no monitoring
 * action, clusterManager only the replication status ones (MF_CACT_REPL_STATUS)
 * and neither listDatabases nor statistics. buckets: the roles that name
 * {system_buckets: ""} (readAnyDatabase, readWriteAnyDatabase,
 * dbAdminAnyDatabase, __queryableBackup's find, restore's restoreWrite).
 */
static const role_def_t roles[] = {
    {"read", false, READ, 0, 0, 0, NULL, 0, READ},
    {"readWrite", false, READ_WRITE, 0, 0, 0, NULL, 0, READ_WRITE},
    {"dbAdmin", false, DB_ADMIN, 0, 0, 0, NULL, 0},
    {"userAdmin", false, USER_ADMIN, 0, 0, 0, NULL, 0},
    {"dbOwner", false, READ_WRITE | DB_ADMIN | USER_ADMIN, 0, 0, 0, NULL, 0, READ_WRITE},
    {"clusterMonitor", true, 0, MF_ACT_STATS | MF_ACT_READ_PROFILE, 0, MONITOR | MF_CACT_LIST_DATABASES,
     cluster_monitor_named, 0},
    {"clusterManager", true, 0, 0, 0, MF_CACT_REPL_STATUS, cluster_manager_named, 0},
    {"hostManager", true, 0, MF_ACT_KILL_CURSORS, 0, MF_CACT_ADMIN, NULL, 0},
    {"clusterAdmin", true, 0, MF_ACT_STATS | MF_ACT_DROP_DATABASE | MF_ACT_READ_PROFILE | MF_ACT_KILL_CURSORS, 0,
     MONITOR | MF_CACT_ADMIN | MF_CACT_LIST_DATABASES, cluster_admin_named, 0},
    {"readAnyDatabase", true, 0, READ, 0, MF_CACT_LIST_DATABASES, NULL, READ, READ},
    {"readWriteAnyDatabase", true, 0, READ_WRITE, 0, MF_CACT_LIST_DATABASES, NULL, READ_WRITE, READ_WRITE},
    {"userAdminAnyDatabase", true, 0, USER_ADMIN, 0, MF_CACT_LIST_DATABASES | MF_CACT_INVALIDATE_USER_CACHE,
     user_admin_any_named, 0},
    {"dbAdminAnyDatabase", true, 0, DB_ADMIN, 0, MF_CACT_LIST_DATABASES, NULL, DB_ADMIN},
    {"backup", true, 0, MF_ACT_FIND, MF_ACT_LIST_COLLECTIONS | MF_ACT_LIST_INDEXES | MF_ACT_STATS,
     MF_CACT_SERVER_STATUS | MF_CACT_GET_PARAMETER | MF_CACT_LIST_DATABASES, backup_named, MF_ACT_FIND},
    {"restore", true, 0, RESTORE_WRITE | USER_ADMIN, MF_ACT_LIST_COLLECTIONS, MF_CACT_GET_PARAMETER, restore_named,
     RESTORE_WRITE},
    {"root", true, 0, 0, EVERYTHING, MONITOR | MF_CACT_ADMIN | MF_CACT_LIST_DATABASES, NULL, 0},
    {"__system", true, 0, 0, EVERYTHING, EVERYTHING, NULL, 0},
};

static const role_def_t *
find_role(const char *role, const char *db)
{
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        if (strcmp(roles[i].name, role) == 0)
            return (!roles[i].admin_only || strcmp(db, "admin") == 0) ? &roles[i] : NULL;
    }
    return NULL;
}

static void add_db_acts(mf_privs_t *p, const char *db, uint32_t acts);

bool
mf_role_exists(const char *role, const char *db)
{
    return find_role(role, db) != NULL;
}

void
mf_privs_add_role(mf_privs_t *p, const char *role, const char *db)
{
    const role_def_t *r = find_role(role, db);
    if (r == NULL)
        return;
    p->any |= r->any;
    p->all |= r->all;
    p->cluster |= r->cluster;
    p->buckets |= r->buckets;
    if (r->js != 0) {
        /* builtin_roles.yml names system.js for read, readWrite and their *AnyDatabase forms (not a normal collection). */
        mf_privilege_t js = {.kind = r->admin_only ? MF_RES_COLL_ANY_DB : MF_RES_COLL, .acts = r->js};
        snprintf(js.db, sizeof(js.db), "%s", r->admin_only ? "" : db);
        snprintf(js.coll, sizeof(js.coll), "system.js");
        mf_privs_add_privilege(p, &js);
    }
    if (r->db != 0)
        add_db_acts(p, db, r->db);
    for (const role_res_t *n = r->named; n != NULL && n->acts != 0; n++) {
        mf_privilege_t pv = {.acts = n->acts};
        if (n->coll == NULL) {
            add_db_acts(p, n->db, n->acts);
            continue;
        }
        pv.kind = n->db[0] == '\0' ? MF_RES_COLL_ANY_DB : MF_RES_COLL;
        snprintf(pv.db, sizeof(pv.db), "%s", n->db);
        snprintf(pv.coll, sizeof(pv.coll), "%s", n->coll);
        mf_privs_add_privilege(p, &pv);
    }
}

/*
 * MongoDB 8.0's action types (src/mongo/db/auth/action_type.idl), each with
 * the groups it grants. An action no mayfly command checks by itself grants
 * nothing more (0, 0) but is accepted, as mongod accepts it.
 */
typedef struct action_def {
    const char *name;
    uint32_t acts, cacts;
} action_def_t;

/*
 * In action_type.idl's order, which is MongoDB's order of a privilege's
 * actions. An action maps to a group only when the group grants nothing it
 * does not name, or only read-only statistics (collStats, dbStats and
 * indexStats share MF_ACT_STATS; the monitoring actions share
 * MF_CACT_MONITOR); the others grant nothing (fail closed): user and role
 * administration (one group, which on admin reaches every credential),
 * cluster administration (one group from setParameter to shutdown),
 * changeStream, dbHash, plan cache filters and search indexes. The
 * built-in roles still grant those.
 */
static const action_def_t actions[] = {
    {"addShard", 0, 0},
    {"advanceClusterTime", 0, 0},
    {"allCollectionStats", 0, 0},
    {"analyze", 0, 0},
    {"analyzeShardKey", 0, 0},
    {"anyAction", EVERYTHING, EVERYTHING},
    {"appendOplogNote", 0, 0},
    {"applicationMessage", 0, 0},
    {"auditConfigure", 0, 0},
    {"auditLogRotate", 0, 0},
    {"authCheck", 0, 0},
    {"authenticate", 0, 0},
    {"authSchemaUpgrade", 0, 0},
    {"bypassDocumentValidation", MF_ACT_BYPASS_VALIDATION, 0},
    {"bypassWriteBlockingMode", 0, 0},
    {"changeCustomData", 0, 0},
    {"changePassword", 0, 0},
    {"changeOwnPassword", 0, 0},
    {"changeOwnCustomData", 0, 0},
    {"changeStream", 0, 0},
    {"checkFreeMonitoringStatus", 0, 0},
    {"checkMetadataConsistency", 0, 0},
    {"cleanupOrphaned", 0, 0},
    {"clearJumboFlag", 0, 0},
    {"cleanupStructuredEncryptionData", 0, 0},
    {"closeAllDatabases", 0, 0},
    {"collMod", MF_ACT_COLLMOD, 0},
    {"collStats", MF_ACT_STATS, 0},
    {"compact", MF_ACT_COMPACT, 0},
    {"compactStructuredEncryptionData", 0, 0},
    {"configureQueryAnalyzer", 0, 0},
    {"connPoolStats", 0, MF_CACT_MONITOR},
    {"connPoolSync", 0, 0},
    {"convertToCapped", 0, 0},
    {"cpuProfiler", 0, 0},
    {"createCollection", MF_ACT_CREATE_COLLECTION, 0},
    {"createDatabase", 0, 0},
    {"createIndex", MF_ACT_CREATE_INDEX, 0},
    {"createRole", 0, 0},
    {"createSearchIndexes", 0, 0},
    {"createUser", 0, 0},
    {"dbCheck", 0, 0},
    {"dbHash", 0, 0},
    {"dbStats", MF_ACT_STATS, 0},
    {"dropAllRolesFromDatabase", 0, 0},
    {"dropAllUsersFromDatabase", 0, 0},
    {"dropCollection", MF_ACT_DROP_COLLECTION, 0},
    {"dropConnections", 0, 0},
    {"dropDatabase", MF_ACT_DROP_DATABASE, 0},
    {"dropIndex", MF_ACT_DROP_INDEX, 0},
    {"dropRole", 0, 0},
    {"dropSearchIndex", 0, 0},
    {"dropUser", 0, 0},
    {"emptycapped", 0, 0},
    {"enableProfiler", MF_ACT_PROFILE, 0},
    {"enableSharding", 0, 0},
    {"exportCollection", 0, 0},
    {"find", MF_ACT_FIND, 0},
    {"flushRouterConfig", 0, 0},
    {"forceUUID", 0, 0},
    {"fsync", 0, 0},
    {"fsyncUnlock", 0, 0},
    {"getClusterParameter", 0, 0},
    {"getDatabaseVersion", 0, 0},
    {"getDefaultRWConcern", 0, MF_CACT_REPL_STATUS},
    {"getCmdLineOpts", 0, MF_CACT_MONITOR},
    {"getLog", 0, MF_CACT_MONITOR},
    {"getParameter", 0, MF_CACT_GET_PARAMETER},
    {"getShardMap", 0, 0},
    {"getShardVersion", 0, 0},
    {"grantRole", 0, 0},
    {"grantPrivilegesToRole", 0, 0},
    {"grantRolesToRole", 0, 0},
    {"grantRolesToUser", 0, 0},
    {"hostInfo", 0, MF_CACT_MONITOR},
    {"impersonate", 0, 0},
    {"importCollection", 0, 0},
    {"indexStats", MF_ACT_STATS, 0},
    {"inprog", 0, MF_CACT_MONITOR},
    {"insert", MF_ACT_INSERT, 0},
    {"internal", 0, 0},
    {"invalidateUserCache", 0, MF_CACT_INVALIDATE_USER_CACHE},
    {"issueDirectShardOperations", 0, 0},
    {"killAnyCursor", MF_ACT_KILL_CURSORS, 0},
    {"killAnySession", 0, 0},
    {"killCursors", MF_ACT_KILL_CURSORS, 0},
    {"killop", 0, 0},
    {"listCachedAndActiveUsers", 0, 0},
    {"listCollections", MF_ACT_LIST_COLLECTIONS, 0},
    {"listCursors", 0, 0},
    {"listDatabases", 0, MF_CACT_LIST_DATABASES},
    {"listIndexes", MF_ACT_LIST_INDEXES, 0},
    {"listSampledQueries", 0, 0},
    {"listSearchIndexes", 0, 0},
    {"listSessions", 0, MF_CACT_REPL_STATUS},
    {"listShards", 0, 0},
    {"logRotate", 0, 0},
    {"updateSearchIndex", 0, 0},
    {"moveChunk", 0, 0},
    {"moveCollection", 0, 0},
    {"netstat", 0, MF_CACT_MONITOR},
    {"oidcListKeys", 0, 0},
    {"oidcRefreshKeys", 0, 0},
    {"oidReset", 0, 0},
    {"operationMetrics", 0, 0},
    {"planCacheIndexFilter", 0, 0},
    {"planCacheRead", 0, 0},
    {"planCacheWrite", 0, 0},
    {"querySettings", 0, 0},
    {"queryStatsRead", 0, 0},
    {"queryStatsReadTransformed", 0, 0},
    {"refineCollectionShardKey", 0, 0},
    {"reIndex", MF_ACT_REINDEX, 0},
    {"remove", MF_ACT_REMOVE, 0},
    {"removeShard", 0, 0},
    {"renameCollection", 0, 0},
    {"renameCollectionSameDB", MF_ACT_RENAME_SAME_DB, 0},
    {"repairDatabase", 0, 0},
    {"replSetConfigure", 0, 0},
    {"replSetGetConfig", 0, MF_CACT_REPL_STATUS},
    {"replSetGetStatus", 0, MF_CACT_REPL_STATUS},
    {"replSetHeartbeat", 0, 0},
    {"replSetReconfig", 0, 0},
    {"replSetResizeOplog", 0, 0},
    {"replSetStateChange", 0, 0},
    {"reshardCollection", 0, 0},
    {"resync", 0, 0},
    {"revokeRole", 0, 0},
    {"revokePrivilegesFromRole", 0, 0},
    {"revokeRolesFromRole", 0, 0},
    {"revokeRolesFromUser", 0, 0},
    {"rotateCertificates", 0, 0},
    {"runAsLessPrivilegedUser", 0, 0},
    {"runTenantMigration", 0, 0},
    {"serverStatus", 0, MF_CACT_SERVER_STATUS},
    {"setAuthenticationRestriction", 0, 0},
    {"setClusterParameter", 0, 0},
    {"setDefaultRWConcern", 0, 0},
    {"setFeatureCompatibilityVersion", 0, 0},
    {"setFreeMonitoring", 0, 0},
    {"setParameter", 0, 0},
    {"setUserWriteBlockMode", 0, 0},
    {"shardCollection", 0, 0},
    {"shardedDataDistribution", 0, 0},
    {"shardingState", 0, 0},
    {"shutdown", 0, 0},
    {"splitChunk", 0, 0},
    {"splitVector", 0, 0},
    {"storageDetails", 0, 0},
    {"top", 0, MF_CACT_MONITOR},
    {"touch", 0, 0},
    {"trafficRecord", 0, 0},
    {"transitionFromDedicatedConfigServer", 0, 0},
    {"transitionToDedicatedConfigServer", 0, 0},
    {"unlock", 0, 0},
    {"useTenant", 0, 0},
    {"useUUID", 0, 0},
    {"update", MF_ACT_UPDATE, 0},
    {"updateRole", 0, 0},
    {"updateUser", 0, 0},
    {"validate", MF_ACT_VALIDATE, 0},
    {"viewRole", MF_ACT_VIEW_USER, 0},
    {"viewUser", MF_ACT_VIEW_USER, 0},
    {"applyOps", 0, 0},
    {"setChangeStreamState", 0, 0},
    {"getChangeStreamState", 0, 0},
    /* 8.0's, past that list. */
    {"bypassDefaultMaxTimeMS", 0, 0},
    {"listClusterCatalog", 0, 0},
    {"unshardCollection", 0, 0},
};

int
mf_action_lookup(const char *name, uint32_t *acts, uint32_t *cacts)
{
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++) {
        if (strcmp(actions[i].name, name) == 0) {
            if (acts != NULL)
                *acts = actions[i].acts;
            if (cacts != NULL)
                *cacts = actions[i].cacts;
            return (int)i;
        }
    }
    return -1;
}

const char *
mf_action_name(int i)
{
    return i >= 0 && (size_t)i < sizeof(actions) / sizeof(actions[0]) ? actions[i].name : NULL;
}

/* Adds acts on db (its collections) to p. */
static void
add_db_acts(mf_privs_t *p, const char *db, uint32_t acts)
{
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->dbs[i].db, db) == 0) {
            p->dbs[i].acts |= acts;
            return;
        }
    }
    if (p->n < MF_PRIVS_MAX_DBS && strlen(db) < sizeof(p->dbs[0].db)) {
        snprintf(p->dbs[p->n].db, sizeof(p->dbs[0].db), "%s", db);
        p->dbs[p->n++].acts = acts;
    }
}

void
mf_privs_add_privilege(mf_privs_t *p, const mf_privilege_t *pv)
{
    switch (pv->kind) {
    case MF_RES_DB:
        if (pv->acts != 0)
            add_db_acts(p, pv->db, pv->acts);
        break;
    case MF_RES_ANY_DB:
        p->any |= pv->acts;
        break;
    case MF_RES_COLL:
    case MF_RES_COLL_ANY_DB: {
        const char *db = pv->kind == MF_RES_COLL ? pv->db : "";
        if (pv->acts == 0)
            break;
        for (size_t i = 0; i < p->ncolls; i++) {
            if (strcmp(p->colls[i].db, db) == 0 && strcmp(p->colls[i].coll, pv->coll) == 0) {
                p->colls[i].acts |= pv->acts;
                return;
            }
        }
        /* Past the table, or a name it cannot hold whole: left out, which grants less, never more. */
        if (p->ncolls < MF_PRIVS_MAX_COLLS && strlen(db) < sizeof(p->colls[0].db) &&
            strlen(pv->coll) < sizeof(p->colls[0].coll)) {
            snprintf(p->colls[p->ncolls].db, sizeof(p->colls[0].db), "%s", db);
            snprintf(p->colls[p->ncolls].coll, sizeof(p->colls[0].coll), "%s", pv->coll);
            p->colls[p->ncolls++].acts = pv->acts;
        }
        break;
    }
    case MF_RES_CLUSTER:
        p->cluster |= pv->cacts;
        break;
    case MF_RES_ANY:
        p->all |= pv->acts;
        p->cluster |= pv->cacts;
        break;
    }
}

/* Every action p holds on db's ordinary collections. */
static uint32_t
held_on(const mf_privs_t *p, const char *db)
{
    uint32_t h = p->all;
    if (strcmp(db, "local") != 0 && strcmp(db, "config") != 0)
        h |= p->any;
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->dbs[i].db, db) == 0)
            h |= p->dbs[i].acts;
    }
    return h;
}

/* Every action p holds on db.coll through collection resources. */
static uint32_t
held_on_coll(const mf_privs_t *p, const char *db, const char *coll)
{
    uint32_t h = 0;
    for (size_t i = 0; i < p->ncolls; i++) {
        if (strcmp(p->colls[i].coll, coll) == 0 && (p->colls[i].db[0] == '\0' || strcmp(p->colls[i].db, db) == 0))
            h |= p->colls[i].acts;
    }
    return h;
}

/* Every action p holds on db's collections through privileges naming db itself (not the any-database ones). */
static uint32_t
held_on_named_db(const mf_privs_t *p, const char *db)
{
    uint32_t h = p->all;
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->dbs[i].db, db) == 0)
            h |= p->dbs[i].acts;
    }
    return h;
}

/* Whether coll is a time-series collection's buckets: "system.buckets." and more (mongod's kSystemBucketsPrefix test). */
static bool
is_buckets(const char *coll)
{
    static const char prefix[] = "system.buckets.";
    return coll != NULL && strncmp(coll, prefix, sizeof(prefix) - 1) == 0 && coll[sizeof(prefix) - 1] != '\0';
}

/* Whether coll is a system collection ("system." and more): not a normal collection to mongod. */
static bool
is_system(const char *coll)
{
    return coll != NULL && strncmp(coll, "system.", 7) == 0 && coll[7] != '\0';
}

bool
mf_privs_allow(const mf_privs_t *p, const char *db, const char *coll, uint32_t acts)
{
    if (is_buckets(coll)) {
        /*
         * mongod's resource search list (resource_pattern_search_list.h): a
         * system.buckets.* namespace is not a normal collection, so neither its
         * database's privileges nor the any-database ones match it; only the
         * system_buckets patterns, a collection resource and anyResource do.
         */
        uint32_t b = p->all | p->buckets | held_on_coll(p, db, coll);
        return (b & acts) == acts;
    }
    uint32_t h = held_on(p, db);
    if (coll != NULL && coll[0] != '\0')
        h |= held_on_coll(p, db, coll);
    if (coll != NULL && strcmp(db, "admin") == 0 && (strcmp(coll, "system.users") == 0 || strcmp(coll, "system.roles") == 0)) {
        /*
         * Credentials and roles: user administrators on admin read and write them (viewUser alone does
         * not), and a privilege naming the collection grants what it names, as mongod's (backup's find,
         * restore's writes; granting one takes user administration on admin). A database-wide data
         * privilege never reaches them, nor does user administration on every ordinary database
         * (restore's, userAdminAnyDatabase's: mongod's forAnyNormalResource matches no system.*
         * collection).
         */
        return (held_on_named_db(p, db) & MF_ACT_USER_ADMIN) != 0 || (held_on_coll(p, db, coll) & acts) == acts;
    }
    if (coll != NULL && strcmp(coll, "system.profile") == 0) {
        /* As mongod's: not a database-wide find (read's), only READ_PROFILE or a privilege naming it. */
        /* dbAdmin's on system.profile: find, collStats, listIndexes, killCursors, create and drop. */
        if ((h & MF_ACT_READ_PROFILE) &&
            (acts & ~(MF_ACT_FIND | MF_ACT_LIST_INDEXES | MF_ACT_KILL_CURSORS | MF_ACT_STATS | MF_ACT_CREATE_COLLECTION |
                      MF_ACT_DROP_COLLECTION)) == 0)
            return true;
        uint32_t named = held_on_coll(p, db, coll) | (p->all & acts);
        return (named & acts) == acts;
    }
    if (is_system(coll)) {
        /*
         * Any other system collection (system.views, system.js, admin.system.version,
         * admin.system.backup_users, config.system.sessions ...): mongod's isNormalCollection is false,
         * so only a privilege naming it (read's and readWrite's system.js, backup's and restore's
         * named ones) or anyResource reaches it, as resource_pattern_search_list.h.
         */
        uint32_t named = held_on_coll(p, db, coll) | p->all;
        return (named & acts) == acts;
    }
    return (h & acts) == acts;
}

bool
mf_privs_cluster(const mf_privs_t *p, uint32_t cacts)
{
    return (p->cluster & cacts) == cacts;
}

bool
mf_privs_any_on(const mf_privs_t *p, const char *db)
{
    if (held_on(p, db) != 0 || p->buckets != 0)
        return true;
    for (size_t i = 0; i < p->ncolls; i++) {
        if (p->colls[i].acts != 0 && (p->colls[i].db[0] == '\0' || strcmp(p->colls[i].db, db) == 0))
            return true;
    }
    return false;
}

bool
mf_privs_any_on_coll(const mf_privs_t *p, const char *db, const char *coll)
{
    if (is_buckets(coll))
        return (p->all | p->buckets | held_on_coll(p, db, coll)) != 0;
    if (is_system(coll)) {
        /* As mf_privs_allow: a database-wide privilege does not reach a system collection. */
        if ((p->all | held_on_coll(p, db, coll)) != 0)
            return true;
        if (strcmp(coll, "system.profile") == 0)
            return (held_on(p, db) & MF_ACT_READ_PROFILE) != 0;
        if (strcmp(db, "admin") == 0 && (strcmp(coll, "system.users") == 0 || strcmp(coll, "system.roles") == 0))
            return (held_on_named_db(p, db) & MF_ACT_USER_ADMIN) != 0;
        return false;
    }
    return held_on(p, db) != 0 || held_on_coll(p, db, coll) != 0;
}
