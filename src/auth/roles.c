/*
 * roles.c: the built-in roles (see roles.h), as MongoDB 8.0's manual
 * defines them ("Built-In Roles"), in mayfly's grouped actions.
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
     MF_ACT_REINDEX)
#define USER_ADMIN (MF_ACT_USER_ADMIN | MF_ACT_VIEW_USER)
#define EVERYTHING 0xffffffffu

typedef struct role_def {
    const char *name;
    bool admin_only; /* exists only on the admin database */
    uint32_t db;     /* on the role's database */
    uint32_t any;    /* on every database but local and config */
    uint32_t all;    /* on every database */
    uint32_t cluster;
} role_def_t;

static const role_def_t roles[] = {
    {"read", false, READ, 0, 0, 0},
    {"readWrite", false, READ_WRITE, 0, 0, 0},
    {"dbAdmin", false, DB_ADMIN, 0, 0, 0},
    {"userAdmin", false, USER_ADMIN, 0, 0, 0},
    {"dbOwner", false, READ_WRITE | DB_ADMIN | USER_ADMIN, 0, 0, 0},
    {"clusterMonitor", true, 0, MF_ACT_STATS, 0, MF_CACT_MONITOR | MF_CACT_LIST_DATABASES},
    {"clusterManager", true, 0, MF_ACT_STATS, 0, MF_CACT_MONITOR | MF_CACT_LIST_DATABASES},
    {"hostManager", true, 0, 0, 0, MF_CACT_MONITOR | MF_CACT_ADMIN},
    {"clusterAdmin", true, 0, MF_ACT_STATS | MF_ACT_DROP_DATABASE, 0,
     MF_CACT_MONITOR | MF_CACT_ADMIN | MF_CACT_LIST_DATABASES},
    {"readAnyDatabase", true, 0, READ, 0, MF_CACT_LIST_DATABASES},
    {"readWriteAnyDatabase", true, 0, READ_WRITE, 0, MF_CACT_LIST_DATABASES},
    {"userAdminAnyDatabase", true, 0, USER_ADMIN, 0, MF_CACT_LIST_DATABASES},
    {"dbAdminAnyDatabase", true, 0, DB_ADMIN, 0, MF_CACT_LIST_DATABASES},
    {"root", true, 0, 0, EVERYTHING, MF_CACT_MONITOR | MF_CACT_ADMIN | MF_CACT_LIST_DATABASES},
    {"__system", true, 0, 0, EVERYTHING, EVERYTHING},
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
    if (r->db == 0)
        return;
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->dbs[i].db, db) == 0) {
            p->dbs[i].acts |= r->db;
            return;
        }
    }
    if (p->n < MF_PRIVS_MAX_DBS && strlen(db) < sizeof(p->dbs[0].db)) {
        snprintf(p->dbs[p->n].db, sizeof(p->dbs[0].db), "%s", db);
        p->dbs[p->n++].acts = r->db;
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

bool
mf_privs_allow(const mf_privs_t *p, const char *db, const char *coll, uint32_t acts)
{
    uint32_t h = held_on(p, db);
    if (coll != NULL && strcmp(db, "admin") == 0 && strcmp(coll, "system.users") == 0) {
        /* Credentials: only user administrators on admin read or write them. */
        if (!(h & MF_ACT_USER_ADMIN) && !((h & MF_ACT_VIEW_USER) && acts == MF_ACT_FIND))
            return false;
        return true;
    }
    if (coll != NULL && strcmp(coll, "system.profile") == 0 && (h & (MF_ACT_PROFILE | MF_ACT_STATS)) &&
        (acts & ~(MF_ACT_FIND | MF_ACT_LIST_INDEXES | MF_ACT_KILL_CURSORS)) == 0)
        return true;
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
    return held_on(p, db) != 0;
}
