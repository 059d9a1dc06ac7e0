/*
 * roles.h: MongoDB's built-in roles as privilege sets (issue 10's
 * authorization).
 *
 * MongoDB grants privileges as (resource, actions) pairs; a role is a named
 * set of them. mayfly has the built-in roles here and user-defined roles
 * (createRole, stored in admin.system.roles by auth/users.h), and groups
 * MongoDB's ~150 actions into the few dozen that its commands check
 * (MF_ACT_*: on a database's collections; MF_CACT_*: on the cluster;
 * mf_action_lookup maps MongoDB's action names onto them). A user's
 * privileges (mf_privs_t) are the union of its roles':
 *
 *   - per database: actions on that database's collections;
 *   - per collection: actions on one collection of one database, or of
 *     every database (a user-defined role's {db, collection} resources);
 *   - any: actions on every database except local and config (the
 *     *AnyDatabase roles, clusterMonitor's statistics);
 *   - all: actions on every database including local and config (root and
 *     the members' internal __system user);
 *   - cluster: server-wide actions (serverStatus, setParameter, replSet*).
 *
 * No system collection (system.*) is covered by per-database or
 * any-database privileges, as mongod's isNormalCollection: only a privilege
 * naming it (read's and readWrite's system.js, backup's and restore's named
 * ones) or anyResource reaches system.views, admin.system.version ...
 * A time-series collection's buckets (<db>.system.buckets.<ts>) are also
 * reached by the buckets privileges, as mongod's
 * resource search list (resource_pattern_search_list.h) matches them only
 * with the system_buckets patterns, a collection resource or anyResource:
 * the *AnyDatabase roles, backup and restore grant them (buckets); reading
 * the time-series collection itself is an ordinary privilege on <ts>.
 *
 * Two collections are not covered by data privileges, as in MongoDB:
 * admin.system.users and admin.system.roles need user administration on admin (so readWrite on
 * admin, or readWriteAnyDatabase, cannot write credentials and escalate),
 * and <db>.system.profile may also be read with MF_ACT_READ_PROFILE
 * (dbAdmin's and the cluster monitoring roles', as mongod's; a custom role
 * reads it through a privilege naming the collection). Everything here is plain data: no locks, no I/O.
 */
#ifndef MF_ROLES_H
#define MF_ROLES_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Actions on a database's collections. */
#define MF_ACT_FIND (1u << 0)
#define MF_ACT_INSERT (1u << 1)
#define MF_ACT_UPDATE (1u << 2)
#define MF_ACT_REMOVE (1u << 3)
#define MF_ACT_LIST_COLLECTIONS (1u << 4)
#define MF_ACT_LIST_INDEXES (1u << 5)
#define MF_ACT_STATS (1u << 6) /* collStats, dbStats, indexStats */
#define MF_ACT_KILL_CURSORS (1u << 7)
#define MF_ACT_CREATE_COLLECTION (1u << 8)
#define MF_ACT_CREATE_INDEX (1u << 9)
#define MF_ACT_DROP_COLLECTION (1u << 10)
#define MF_ACT_DROP_INDEX (1u << 11)
#define MF_ACT_RENAME_SAME_DB (1u << 12)
#define MF_ACT_COLLMOD (1u << 13)
#define MF_ACT_COMPACT (1u << 14)
#define MF_ACT_VALIDATE (1u << 15)
#define MF_ACT_PROFILE (1u << 16) /* enableProfiler */
#define MF_ACT_DROP_DATABASE (1u << 17)
#define MF_ACT_BYPASS_VALIDATION (1u << 18)
#define MF_ACT_USER_ADMIN (1u << 19) /* createUser, dropUser, grantRole, revokeRole, changePassword */
#define MF_ACT_VIEW_USER (1u << 20)
#define MF_ACT_REINDEX (1u << 21)
#define MF_ACT_READ_PROFILE (1u << 22) /* read <db>.system.profile (dbAdmin's, the cluster roles'; no custom action) */

/* Cluster actions. */
#define MF_CACT_LIST_DATABASES (1u << 0)
#define MF_CACT_MONITOR (1u << 1)  /* serverStatus, currentOp, getLog, getCmdLineOpts, replSetGetStatus ... */
#define MF_CACT_ADMIN (1u << 2)    /* setParameter, killOp, fsync, replSetReconfig, shutdown ... */
#define MF_CACT_INTERNAL (1u << 3) /* the members' own commands (__system only) */
/*
 * Single monitoring actions that roles without the whole monitoring group
 * hold (builtin_roles.yml: backup's serverStatus, backup's and restore's
 * getParameter); every role with MF_CACT_MONITOR holds them too.
 */
#define MF_CACT_SERVER_STATUS (1u << 4)
#define MF_CACT_GET_PARAMETER (1u << 5)
#define MF_CACT_INVALIDATE_USER_CACHE (1u << 6) /* hostManager's and userAdminAnyDatabase's, not restore's */
/* replSetGetStatus, replSetGetConfig, getDefaultRWConcern, listSessions: clusterManager's and clusterMonitor's. */
#define MF_CACT_REPL_STATUS (1u << 7)

#define MF_PRIVS_MAX_DBS 32
#define MF_PRIVS_MAX_COLLS 64 /* a user's collection privileges; more are left out (denied) */

typedef struct mf_privs {
    uint32_t any;     /* every database but local and config */
    uint32_t all;     /* every database */
    uint32_t cluster; /* MF_CACT_* */
    uint32_t buckets; /* on every database's system.buckets.* (mongod's forAnySystemBuckets) */
    size_t n, ncolls;
    struct {
        char db[64];
        uint32_t acts;
    } dbs[MF_PRIVS_MAX_DBS];
    struct {
        char db[64]; /* "": that collection in every database */
        char coll[256];
        uint32_t acts;
    } colls[MF_PRIVS_MAX_COLLS];
} mf_privs_t;

/* A privilege's resource, as createRole's {resource: ...} names it. */
typedef enum {
    MF_RES_DB,          /* {db: "x", collection: ""}: every collection of x */
    MF_RES_COLL,        /* {db: "x", collection: "c"} */
    MF_RES_ANY_DB,      /* {db: "", collection: ""}: every database's collections */
    MF_RES_COLL_ANY_DB, /* {db: "", collection: "c"}: c in every database */
    MF_RES_CLUSTER,     /* {cluster: true} */
    MF_RES_ANY,         /* {anyResource: true} */
} mf_res_kind_t;

typedef struct mf_privilege {
    mf_res_kind_t kind;
    char db[64], coll[256];
    uint32_t acts;  /* MF_ACT_* its actions grant on the resource */
    uint32_t cacts; /* MF_CACT_* (cluster and anyResource) */
} mf_privilege_t;

/*
 * mf_action_lookup: name's place among MongoDB 8.0's action types (the
 * order mongod lists a privilege's actions in), or -1 if it is none; *acts
 * and *cacts (either may be NULL) get the groups it grants: both 0 for an
 * action no group matches without granting more than it names (user and
 * role administration, cluster administration, planCacheRead, ...):
 * accepted and kept, granting nothing (see roles.c).
 */
int mf_action_lookup(const char *name, uint32_t *acts, uint32_t *cacts);

/* mf_action_name: the i-th action type's name (mf_action_lookup's order), NULL past the last. */
const char *mf_action_name(int i);

/* mf_privs_add_privilege: adds one parsed privilege of a user-defined role to p. */
void mf_privs_add_privilege(mf_privs_t *p, const mf_privilege_t *pv);

/*
 * mf_role_exists: whether role is a built-in role on db (the *AnyDatabase
 * roles, the cluster roles, backup, restore and root exist only on admin, as
 * in MongoDB; __system only on admin and only for members).
 */
bool mf_role_exists(const char *role, const char *db);

/*
 * mf_builtin_role_name: whether role@db is one of mongod 8.0's built-in
 * roles, those mayfly grants (mf_role_exists) and those it does not
 * (enableSharding, __queryableBackup, directShardOperations, __system): no
 * user-defined role may take the name.
 */
bool mf_builtin_role_name(const char *role, const char *db);

/*
 * mf_builtin_role_privileges: appends built-in role@db's privileges, as
 * mongod describes them (builtin_roles.yml: its built-in roles' first, then
 * its own, in order, several per resource possible, stored form {resource,
 * actions}), to the array being built at arr. False (arr untouched) if
 * role@db is not a built-in role. Description only: what mayfly enforces is
 * mf_privs_add_role's.
 */
bool mf_builtin_role_privileges(const char *role, const char *db, bson_t *arr);

/* mf_privs_add_role: adds role@db's privileges to p (an unknown role adds nothing). */
void mf_privs_add_role(mf_privs_t *p, const char *role, const char *db);

/*
 * mf_privs_allow: whether p holds every action in acts on db.coll (coll may
 * be NULL or "" for the database itself).
 */
bool mf_privs_allow(const mf_privs_t *p, const char *db, const char *coll, uint32_t acts);

/* mf_privs_cluster: whether p holds every cluster action in cacts. */
bool mf_privs_cluster(const mf_privs_t *p, uint32_t cacts);

/* mf_privs_any_on: whether p holds any action at all on db (listDatabases' authorizedDatabases). */
bool mf_privs_any_on(const mf_privs_t *p, const char *db);

/* mf_privs_any_on_coll: whether p holds any action at all on db.coll (listCollections' authorizedCollections). */
bool mf_privs_any_on_coll(const mf_privs_t *p, const char *db, const char *coll);

#endif /* MF_ROLES_H */
