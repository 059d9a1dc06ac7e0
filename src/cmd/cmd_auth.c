/*
 * cmd_auth.c: authentication and authorization (issue 10).
 *
 * Authentication. saslStart / saslContinue run a SCRAM-SHA-1 or -256
 * conversation (auth/scram.h) against the user's stored credential
 * (auth/users.h); hello's speculativeAuthenticate runs the same saslStart
 * inside the handshake, and hello's saslSupportedMechs names the mechanisms
 * a user has, as mongod's. A connection's state (mf_client_auth_t) holds
 * the conversation in progress and, once it succeeds, the user; one user
 * per connection, as MongoDB 6.0+ (a new authentication replaces the old).
 * A login completes only if the user's authenticationRestrictions and those
 * of every role it holds are met by the connection's addresses
 * (auth/restrictions.h; checked in load_privs, also whenever the user's
 * privileges are reloaded).
 *
 * Authorization. With access control on (--auth), mf_cmd_authorize runs
 * before every command of a network client (replication's internal client
 * and the embedding API are trusted): a few commands need no
 * authentication (hello, ping, buildInfo, the SASL commands, logout,
 * connectionStatus, ...); every other one needs an authenticated user
 * whose roles (auth/roles.h) grant the command's actions on its database
 * and collection, or on the cluster, else 13 Unauthorized. The actions a
 * command needs are in one table below (rules[]); a command missing from
 * it needs cluster administration, so a new command is closed until it is
 * classified. Privileges are computed once per connection and recomputed
 * when admin.system.users changes (the engine's users_gen).
 *
 * The localhost exception: with no user at all, a loopback client may run
 * createUser on admin, so the first user can be made, and replSetInitiate
 * (a keyFile replica set takes users only once it has a primary: mongod's
 * "deploy a replica set with keyfile authentication" does the same), and
 * nothing else.
 *
 * User management: createUser, updateUser, dropUser,
 * dropAllUsersFromDatabase, usersInfo, grantRolesToUser,
 * revokeRolesFromUser. Role management (user-defined roles in
 * admin.system.roles, auth/users.h): createRole, updateRole, dropRole,
 * dropAllRolesFromDatabase, grantRolesToRole, revokeRolesFromRole,
 * grantPrivilegesToRole, revokePrivilegesFromRole, rolesInfo; their
 * checks, codes and messages are mongod 8.0's (user_management_commands,
 * privilege parsing), and a user's privileges take its user-defined roles
 * transitively (add_role).
 */
#include "common/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/restrictions.h"
#include "auth/roles.h"
#include "auth/scram.h"
#include "auth/users.h"
#include "cmd/cmd.h"
#include "engine/cursor.h"
#include "common/failpoint.h"
#include "common/log.h"
#include "doc/match.h"
#include "doc/value.h"
#include "engine/sessions.h"

struct mf_client_auth {
    bool authed;
    char user[256];
    char db[128];
    mf_privs_t privs;
    int64_t gen;     /* eng->users_gen when privs were computed */
    bson_t roles;    /* the user's roles array (connectionStatus) */
    /*
     * $$USER_ROLES (mf_cmd_user_roles) for these privileges, built at its
     * first use after each load_privs, which frees it: NULL until then.
     * Every command binds it, and walking user-defined roles reads storage.
     */
    bson_t *roles_var;
    /* The SASL conversation in progress, NULL for none. */
    mf_scram_t *conv;
    mf_scram_mech_t conv_mech;
    int32_t conv_id;
    int conv_step;   /* 1: server-first sent; 2: server-final sent, waiting for the empty exchange */
    bool conv_skip_empty;
    char conv_db[128];
    char conv_user[256];
    /*
     * The userId (UUID) of the user document the conversation checked the
     * password against, and then of the logged-in user: a user dropped and
     * created again under the same name is another user (mongod's
     * reacquireUser compares them). No id: the members' internal user.
     */
    bool conv_has_uid, has_uid;
    uint8_t conv_uid[16], uid[16];
    /*
     * authenticationRestrictions: whether they apply (a network client;
     * replication's and the embedding API's are trusted, as mongod's clients
     * without a transport session), the connection's IPs ("" not an IP
     * connection), and why the last check failed (load_privs).
     */
    bool restricted;
    char client_ip[64];
    char server_ip[64];
    char why[1024];
};

static mf_client_auth_t *
client_auth(mf_client_t *c)
{
    if (c->auth == NULL) {
        c->auth = mf_calloc(1, sizeof(*c->auth));
        bson_init(&c->auth->roles);
        c->auth->gen = -1;
        /* A connection's addresses do not change: taken once. */
        c->auth->restricted = c->net && !c->internal;
        mf_restrictions_ip_of(c->remote, c->auth->client_ip, sizeof(c->auth->client_ip));
        mf_restrictions_ip_of(c->local, c->auth->server_ip, sizeof(c->auth->server_ip));
    }
    return c->auth;
}

static void
conv_end(mf_client_auth_t *a)
{
    if (a->conv != NULL)
        mf_scram_free(a->conv);
    a->conv = NULL;
    a->conv_step = 0;
}

void
mf_client_release(mf_client_t *c)
{
    mf_curop_conn_close(c->conn); /* first: the entry borrows the metadata */
    c->conn = NULL;
    if (c->metadata != NULL) {
        bson_destroy(c->metadata);
        c->metadata = NULL;
    }
    if (c->auth == NULL)
        return;
    conv_end(c->auth);
    bson_destroy(&c->auth->roles);
    if (c->auth->roles_var != NULL)
        bson_destroy(c->auth->roles_var);
    free(c->auth);
    c->auth = NULL;
}

/* __system@local: the members' internal user (--keyFile). */
static bool
is_system_user(const char *db, const char *user)
{
    return strcmp(db, "local") == 0 && strcmp(user, "__system") == 0;
}

/* Whether access control applies to this command's caller. */
static bool
checked(const mf_op_t *op)
{
    return op->eng->auth_enabled && op->client != NULL && op->client->net && !op->client->internal;
}

/*
 * name_of: the user or role it names: a string (on dflt_db), or a document
 * {<key>: name, db: name} whose missing db is dflt_db. False if it is
 * neither or the document has no string <key>; *other (may be NULL) tells
 * whether the document has fields besides those two.
 */
static bool
name_of(const bson_iter_t *it, const char *key, const char *dflt_db, const char **name, const char **db, bool *other)
{
    bson_iter_t f;
    *name = NULL;
    *db = dflt_db;
    if (other != NULL)
        *other = false;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        *name = bson_iter_utf8(it, NULL);
        return true;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f))
        return false;
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), key) == 0 && BSON_ITER_HOLDS_UTF8(&f))
            *name = bson_iter_utf8(&f, NULL);
        else if (strcmp(bson_iter_key(&f), "db") == 0 && BSON_ITER_HOLDS_UTF8(&f))
            *db = bson_iter_utf8(&f, NULL);
        else if (other != NULL)
            *other = true;
    }
    return *name != NULL;
}

static bool role_in(const bson_t *arr, const char *role, const char *db);

/* ---------- privileges ---------- */

/*
 * The user-defined roles a privilege computation has visited (a role granted
 * twice, or a cycle, is read once). The list grows with the graph, up to
 * ROLE_GRAPH_MAX roles; past that nothing more is read and over is set, so
 * privileges fail closed (not granted) and so do authenticationRestrictions
 * (load_privs: unmet). Allocated with mf_calloc, freed by seen_free.
 */
#define ROLE_GRAPH_MAX 4096
typedef struct role_seen {
    int n, cap;
    bool over;
    char (*ids)[400]; /* "db.role" (a db is under 64 bytes, a role under 256) */
} role_seen_t;

static bool
seen_once(role_seen_t *seen, const char *role, const char *db)
{
    char id[400];
    snprintf(id, sizeof(id), "%s.%s", db, role);
    for (int i = 0; i < seen->n; i++)
        if (strcmp(seen->ids[i], id) == 0)
            return true;
    if (seen->n == ROLE_GRAPH_MAX) {
        seen->over = true;
        return true; /* past the bound: read no more */
    }
    if (seen->n == seen->cap) {
        seen->cap = seen->cap ? seen->cap * 2 : 16;
        seen->ids = mf_realloc(seen->ids, (size_t)seen->cap * sizeof(*seen->ids));
    }
    memcpy(seen->ids[seen->n++], id, sizeof(id));
    return false;
}

static void
seen_free(role_seen_t *seen)
{
    if (seen != NULL)
        free(seen->ids);
    free(seen);
}

/*
 * mf_privilege_t of one stored privilege {resource, actions}; false (left
 * out: it grants nothing) when it is malformed or names a database or
 * collection longer than mf_privilege_t holds, so a cut name never matches
 * another. Unknown actions are skipped.
 */
static bool
privilege_of(const bson_iter_t *pit, mf_privilege_t *pv)
{
    bson_iter_t f, res, act;
    bool has_res = false, valid = false;
    memset(pv, 0, sizeof(*pv));
    if (!BSON_ITER_HOLDS_DOCUMENT(pit) || !bson_iter_recurse(pit, &f))
        return false;
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "resource") == 0 && bson_iter_recurse(&f, &res)) {
            bool has_db = false, has_coll = false;
            has_res = true;
            while (bson_iter_next(&res)) {
                const char *rk = bson_iter_key(&res);
                if (strcmp(rk, "cluster") == 0)
                    valid = (pv->kind = MF_RES_CLUSTER) == MF_RES_CLUSTER;
                else if (strcmp(rk, "anyResource") == 0)
                    valid = (pv->kind = MF_RES_ANY) == MF_RES_ANY;
                else if (strcmp(rk, "db") == 0 && BSON_ITER_HOLDS_UTF8(&res))
                    has_db = (size_t)snprintf(pv->db, sizeof(pv->db), "%s", bson_iter_utf8(&res, NULL)) < sizeof(pv->db);
                else if (strcmp(rk, "collection") == 0 && BSON_ITER_HOLDS_UTF8(&res))
                    has_coll = (size_t)snprintf(pv->coll, sizeof(pv->coll), "%s", bson_iter_utf8(&res, NULL)) < sizeof(pv->coll);
            }
            if (has_db && has_coll && !valid) {
                pv->kind = pv->db[0] ? (pv->coll[0] ? MF_RES_COLL : MF_RES_DB) : (pv->coll[0] ? MF_RES_COLL_ANY_DB : MF_RES_ANY_DB);
                valid = true;
            }
        } else if (strcmp(k, "actions") == 0 && bson_iter_recurse(&f, &act)) {
            while (bson_iter_next(&act)) {
                uint32_t a = 0, c = 0;
                if (BSON_ITER_HOLDS_UTF8(&act) && mf_action_lookup(bson_iter_utf8(&act, NULL), &a, &c) >= 0) {
                    pv->acts |= a;
                    pv->cacts |= c;
                }
            }
        }
    }
    if (pv->kind != MF_RES_CLUSTER && pv->kind != MF_RES_ANY)
        pv->cacts = 0; /* cluster actions only on the cluster */
    if (pv->kind == MF_RES_CLUSTER)
        pv->acts = 0;
    return has_res && valid;
}

/*
 * The authenticationRestrictions check a privilege computation makes on the
 * way (load_privs): the connection's addresses, and the first unmet list's
 * reason. Off (on false) for trusted clients.
 */
typedef struct restr_check {
    bool on;
    const char *client_ip, *server_ip;
    bool met;
    char *why;
    size_t cap;
} restr_check_t;

/*
 * Whether a user or role document's authenticationRestrictions (absent or
 * empty: none) are met by the connection; on false rc->why says why,
 * prefixed with whose list it was (mongod's "direct" for the user's own,
 * "indirect" for a role's).
 */
static bool
doc_restrictions_met(restr_check_t *rc, const bson_t *doc, const char *whose)
{
    bson_iter_t it;
    bson_t list;
    const uint8_t *data;
    uint32_t len;
    char reason[768];
    if (rc == NULL || !rc->on || !rc->met || !bson_iter_init_find(&it, doc, "authenticationRestrictions"))
        return true;
    if (!BSON_ITER_HOLDS_ARRAY(&it)) {
        snprintf(reason, sizeof(reason), "malformed authenticationRestrictions"); /* fail closed */
    } else {
        bson_iter_array(&it, &len, &data);
        if (bson_init_static(&list, data, len) &&
            mf_restrictions_met(&list, rc->client_ip, rc->server_ip, reason, sizeof(reason)))
            return true;
    }
    rc->met = false;
    snprintf(rc->why, rc->cap, "Evaluation of %s authentication restrictions failed: %s", whose, reason);
    return false;
}

/*
 * Adds role@db's privileges to p: a built-in role's, or a user-defined
 * role's and those of the roles it inherits; rc (NULL: none) checks each
 * user-defined role's authenticationRestrictions on the way.
 */
static void
add_role(mf_engine_t *eng, mf_privs_t *p, const char *role, const char *db, role_seen_t *seen, restr_check_t *rc)
{
    bson_t doc;
    bson_iter_t it, e;
    mf_error_t err;
    if (mf_role_exists(role, db)) {
        mf_privs_add_role(p, role, db); /* built-in roles have no restrictions */
        return;
    }
    if (seen_once(seen, role, db) || mf_roles_get(eng->cat, db, role, &doc, &err) != 0)
        return;
    if (rc != NULL && rc->on && rc->met) {
        char whose[420];
        snprintf(whose, sizeof(whose), "indirect (role %s@%s)", role, db);
        (void)doc_restrictions_met(rc, &doc, whose);
    }
    if (bson_iter_init_find(&it, &doc, "privileges") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &e)) {
        while (bson_iter_next(&e)) {
            mf_privilege_t pv;
            if (privilege_of(&e, &pv))
                mf_privs_add_privilege(p, &pv);
        }
    }
    if (bson_iter_init_find(&it, &doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &e)) {
        while (bson_iter_next(&e)) {
            const char *r, *d;
            if (BSON_ITER_HOLDS_DOCUMENT(&e) && name_of(&e, "role", NULL, &r, &d, NULL) && d != NULL)
                add_role(eng, p, r, d, seen, rc);
        }
    }
    bson_destroy(&doc);
}

/* The userId UUID of a user document into uid; false if it has none. */
static bool
user_uuid(const bson_t *user, uint8_t uid[16])
{
    bson_iter_t it;
    bson_subtype_t st;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, user, "userId") || !BSON_ITER_HOLDS_BINARY(&it))
        return false;
    bson_iter_binary(&it, &st, &len, &data);
    if (len != 16)
        return false;
    memcpy(uid, data, 16);
    return true;
}

/*
 * (Re)computes the connection's privileges from its user's roles, checking
 * on the way that the user's authenticationRestrictions and those of every
 * user-defined role it holds, directly or inherited, are met by the
 * connection (mongod's User::validateRestrictions, at authentication and
 * whenever its user cache reloads the user). False when one is not, or the
 * user was dropped (or dropped and created again: another userId): the
 * user is taken off the connection (no user, no privileges) and a->why
 * says why; true otherwise.
 */
static bool
load_privs(mf_engine_t *eng, mf_client_auth_t *a)
{
    bson_t user;
    bson_iter_t it, r;
    mf_error_t err;
    int64_t gen = atomic_load(&eng->users_gen);
    restr_check_t rc = {a->restricted, a->client_ip, a->server_ip, true, a->why, sizeof(a->why)};

    memset(&a->privs, 0, sizeof(a->privs));
    bson_reinit(&a->roles);
    if (a->roles_var != NULL) {
        bson_destroy(a->roles_var);
        a->roles_var = NULL;
    }
    a->gen = gen;
    a->why[0] = '\0';
    if (!a->authed)
        return true;
    if (is_system_user(a->db, a->user)) {
        mf_privs_add_role(&a->privs, "__system", "admin");
        return true;
    }
    int ur = mf_users_get(eng->cat, a->db, a->user, &user, &err);
    if (ur != 0 && ur != MF_NOTFOUND)
        return true; /* not readable now: no privileges until the next reload */
    if (ur != 0) {
        /* Dropped: removed from the connection, as mongod removes a deleted user from its session. */
        snprintf(a->why, sizeof(a->why), "the user was dropped");
        goto removed;
    }
    uint8_t uid[16];
    if (a->has_uid && (!user_uuid(&user, uid) || memcmp(uid, a->uid, sizeof(uid)) != 0)) {
        /* Dropped and created again: another user, whose password this connection never gave. */
        bson_destroy(&user);
        snprintf(a->why, sizeof(a->why), "User id from privilege document '%s@%s' does not match user id in session",
                 a->user, a->db);
        goto removed;
    }
    (void)doc_restrictions_met(&rc, &user, "direct");
    if (bson_iter_init_find(&it, &user, "roles") && BSON_ITER_HOLDS_ARRAY(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_array(&it, &len, &data);
        bson_t arr;
        if (bson_init_static(&arr, data, len))
            bson_copy_to_excluding_noinit(&arr, &a->roles, "", NULL);
        bson_iter_recurse(&it, &r);
        role_seen_t *seen = mf_calloc(1, sizeof(*seen));
        while (bson_iter_next(&r)) {
            const char *role, *db;
            if (rc.met && BSON_ITER_HOLDS_DOCUMENT(&r) && name_of(&r, "role", NULL, &role, &db, NULL) && db != NULL)
                add_role(eng, &a->privs, role, db, seen, &rc);
        }
        if (rc.on && rc.met && seen->over) {
            /* Roles left unread may carry restrictions: not met (fail closed). */
            rc.met = false;
            snprintf(a->why, sizeof(a->why), "Evaluation of indirect authentication restrictions failed: the user "
                     "holds more than %d user-defined roles", ROLE_GRAPH_MAX);
        }
        seen_free(seen);
    }
    bson_destroy(&user);
    if (rc.met)
        return true;
removed:
    memset(&a->privs, 0, sizeof(a->privs));
    bson_reinit(&a->roles);
    a->authed = false;
    a->user[0] = a->db[0] = '\0';
    return false;
}

/*
 * load_privs for a logged-in connection whose users or roles changed: a
 * user whose restrictions are no longer met is logged out (its next
 * commands answer 13), as mongod drops it from the session when it
 * reloads it.
 */
static void
reload_privs(mf_engine_t *eng, mf_client_t *client)
{
    mf_client_auth_t *a = client->auth;
    char who[400];
    snprintf(who, sizeof(who), "%s@%s", a->user, a->db);
    if (!load_privs(eng, a))
        mf_log(MF_LOG_INFO, "ACCESS", "conn%lld: removed user %s from the connection (from %s): %s",
               (long long)client->id, who, client->remote, a->why);
}

/*
 * The caller's privileges, refreshed if users or roles changed since they
 * were computed. NULL: not authenticated. Inside a multi-document
 * transaction reads see its snapshot, which may predate a revoke: there the
 * privileges mf_cmd_auth_refresh computed just before (on the connection's
 * thread) are used as they are, and the generation is left for the next
 * command to reload.
 */
static const mf_privs_t *
privs_of(mf_op_t *op)
{
    mf_client_auth_t *a = op->client->auth;
    if (a == NULL || !a->authed)
        return NULL;
    if (a->gen != atomic_load(&op->eng->users_gen) && !mf_txn_user(mf_storage_session(op->eng->st)))
        reload_privs(op->eng, op->client);
    return &a->privs;
}

void
mf_cmd_auth_refresh(mf_engine_t *eng, mf_client_t *client)
{
    mf_client_auth_t *a = client != NULL ? client->auth : NULL;
    if (a != NULL && a->authed && a->gen != atomic_load(&eng->users_gen))
        reload_privs(eng, client);
}

/*
 * listDatabases' authorizedDatabases, as mongod's list_databases_common.h:
 * true lists only the databases the caller holds privileges on, even with
 * the listDatabases privilege; false (refused without that privilege, see
 * special()) or absent lists every one to a caller who has it.
 */
bool
mf_cmd_may_see_db(mf_op_t *op, const char *db)
{
    bson_iter_t it;
    if (!checked(op))
        return true;
    const mf_privs_t *p = privs_of(op);
    bool only_authorized = mf_op_find(op, "authorizedDatabases", &it) && bson_iter_as_bool(&it);
    return p != NULL && ((!only_authorized && mf_privs_cluster(p, MF_CACT_LIST_DATABASES)) || mf_privs_any_on(p, db));
}

bool
mf_cmd_may_see_coll(mf_op_t *op, const char *db, const char *coll)
{
    if (!checked(op))
        return true;
    /* The privileges mf_cmd_authorize refreshed: no reload here, which may run under the catalog's lock. */
    const mf_client_auth_t *a = op->client->auth;
    if (a == NULL || !a->authed)
        return false;
    /*
     * mongod's list_collections.cpp: any action on the exact namespace. A database-wide privilege (listCollections
     * among them) covers its ordinary collections, not system.buckets.* (mf_privs_any_on_coll).
     */
    return mf_privs_any_on_coll(&a->privs, db, coll);
}

bool
mf_cmd_auth_cluster(mf_op_t *op, uint32_t cacts)
{
    if (!checked(op))
        return true;
    const mf_privs_t *p = privs_of(op);
    return p != NULL && mf_privs_cluster(p, cacts);
}

void
mf_cmd_auth_owner(mf_op_t *op, char *out, size_t cap)
{
    mf_client_auth_t *a = op->client != NULL ? op->client->auth : NULL;
    if (!checked(op) || a == NULL || !a->authed)
        snprintf(out, cap, "%s", "");
    else
        snprintf(out, cap, "%s@%s", a->user, a->db);
}

bool
mf_cmd_curop_own_only(mf_op_t *op, bool own_only, mf_curop_owner_t *owner)
{
    mf_cmd_auth_owner(op, owner->name, sizeof(owner->name));
    bool own = own_only && checked(op);
    if (own)
        mf_session_uid(owner->name, owner->uid);
    return own;
}

bool
mf_cmd_curop_owned_by(const bson_t *doc, const mf_curop_owner_t *who)
{
    const char *owner = who->name;
    bson_iter_t it, f;
    /* An operation or a connection: its effectiveUsers' first {user, db}. */
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "effectiveUsers.0.user", &f) &&
        BSON_ITER_HOLDS_UTF8(&f)) {
        const char *u = bson_iter_utf8(&f, NULL);
        return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "effectiveUsers.0.db", &f) &&
               BSON_ITER_HOLDS_UTF8(&f) && mf_curop_owner_is(owner, u, bson_iter_utf8(&f, NULL));
    }
    /* An idle session or cursor: its lsid's uid, the digest of its owner's "user@db". */
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "lsid.uid", &f) && BSON_ITER_HOLDS_BINARY(&f)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_binary(&f, NULL, &len, &data);
        return len == MF_SESSION_UID_LEN && memcmp(data, who->uid, len) == 0;
    }
    return false;
}

bool
mf_cmd_auth_user(const mf_client_t *client, const char **user, const char **db)
{
    const mf_client_auth_t *a = client != NULL ? client->auth : NULL;
    if (a == NULL || !a->authed)
        return false;
    *user = a->user;
    *db = a->db;
    return true;
}

/* ---------- what each command needs ---------- */

typedef enum {
    R_OPEN,    /* no authentication needed */
    R_AUTHED,  /* any authenticated user */
    R_DATA,    /* acts on the command's database and collection (first field, when a string) */
    R_DB,      /* acts on the command's database as a whole (its first field names no collection) */
    R_CLUSTER, /* cluster acts */
    R_SPECIAL, /* decided by special() */
} rule_kind_t;

typedef struct rule {
    const char *name;
    rule_kind_t kind;
    uint32_t acts;
} rule_t;

static const rule_t rules[] = {
    {"hello", R_OPEN, 0},
    {"isMaster", R_OPEN, 0},
    {"ismaster", R_OPEN, 0},
    {"ping", R_OPEN, 0},
    {"buildInfo", R_OPEN, 0},
    {"buildinfo", R_OPEN, 0},
    {"saslStart", R_OPEN, 0},
    {"saslContinue", R_OPEN, 0},
    {"authenticate", R_OPEN, 0},
    {"logout", R_OPEN, 0},
    {"connectionStatus", R_OPEN, 0},
    {"endSessions", R_OPEN, 0},
    {"commitTransaction", R_AUTHED, 0},
    {"abortTransaction", R_AUTHED, 0},
    {"whatsmyuri", R_OPEN, 0},
    {"listCommands", R_OPEN, 0},
    {"startSession", R_AUTHED, 0},
    {"refreshSessions", R_AUTHED, 0},
    {"killSessions", R_AUTHED, 0},
    {"usersInfo", R_SPECIAL, MF_ACT_VIEW_USER},
    {"rolesInfo", R_AUTHED, 0},
    {"listDatabases", R_SPECIAL, 0}, /* answers only the databases the user may see (mf_cmd_may_see_db) */
    {"_mergeAuthzCollections", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"invalidateUserCache", R_SPECIAL, 0},
    {"find", R_DATA, MF_ACT_FIND},
    {"count", R_DATA, MF_ACT_FIND},
    {"distinct", R_DATA, MF_ACT_FIND},
    {"getMore", R_SPECIAL, MF_ACT_FIND},
    {"killCursors", R_AUTHED, 0}, /* one's own cursors, whatever opened them (mongod's checkAuthForKillCursors); others': 13 in the command */
    {"insert", R_DATA, MF_ACT_INSERT},
    {"update", R_SPECIAL, MF_ACT_UPDATE},
    {"delete", R_DATA, MF_ACT_REMOVE},
    {"bulkWrite", R_SPECIAL, 0},
    {"findAndModify", R_SPECIAL, MF_ACT_FIND},
    {"findandmodify", R_SPECIAL, MF_ACT_FIND},
    {"aggregate", R_SPECIAL, MF_ACT_FIND},
    {"explain", R_SPECIAL, 0},
    {"create", R_SPECIAL, MF_ACT_CREATE_COLLECTION}, /* a view: find on what it reads too */
    {"drop", R_DATA, MF_ACT_DROP_COLLECTION},
    {"dropDatabase", R_DB, MF_ACT_DROP_DATABASE},
    {"listCollections", R_SPECIAL, MF_ACT_LIST_COLLECTIONS},
    {"listIndexes", R_DATA, MF_ACT_LIST_INDEXES},
    {"collStats", R_DATA, MF_ACT_STATS},
    {"collstats", R_DATA, MF_ACT_STATS},
    {"dbStats", R_DB, MF_ACT_STATS},
    {"dbstats", R_DB, MF_ACT_STATS},
    {"validate", R_DATA, MF_ACT_VALIDATE},
    {"createIndexes", R_DATA, MF_ACT_CREATE_INDEX},
    {"createSearchIndexes", R_DATA, MF_ACT_CREATE_INDEX}, /* 31082 SearchNotEnabled for anyone allowed */
    {"updateSearchIndex", R_DATA, MF_ACT_CREATE_INDEX},
    {"dropSearchIndex", R_DATA, MF_ACT_DROP_INDEX},
    {"dropIndexes", R_DATA, MF_ACT_DROP_INDEX},
    {"reIndex", R_DATA, MF_ACT_REINDEX},
    {"deleteIndexes", R_DATA, MF_ACT_DROP_INDEX},
    {"collMod", R_SPECIAL, MF_ACT_COLLMOD},
    {"compact", R_DATA, MF_ACT_COMPACT},
    {"profile", R_DB, MF_ACT_PROFILE},
    {"renameCollection", R_SPECIAL, 0},
    {"createUser", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"updateUser", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"grantRolesToUser", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"revokeRolesFromUser", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"dropUser", R_DB, MF_ACT_USER_ADMIN},
    {"dropAllUsersFromDatabase", R_DB, MF_ACT_USER_ADMIN},
    /*
     * Role management: user administration on the role's database, and on each database whose roles it
     * grants. R_DB where the first field names a user, a role or nothing: a collection privilege never
     * matches it (a role named like a collection would otherwise pass).
     */
    {"createRole", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"updateRole", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"grantRolesToRole", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"revokeRolesFromRole", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"grantPrivilegesToRole", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"revokePrivilegesFromRole", R_SPECIAL, MF_ACT_USER_ADMIN},
    {"dropRole", R_DB, MF_ACT_USER_ADMIN},
    {"dropAllRolesFromDatabase", R_DB, MF_ACT_USER_ADMIN},
    {"serverStatus", R_CLUSTER, MF_CACT_SERVER_STATUS}, /* backup holds it without the rest of the group */
    /* mongod asks for serverStatus, replSetGetStatus and collStats on local.oplog.rs: all clusterMonitor's. */
    {"getDiagnosticData", R_CLUSTER, MF_CACT_MONITOR},
    {"logRotate", R_CLUSTER, MF_CACT_ADMIN},
    {"hostInfo", R_CLUSTER, MF_CACT_MONITOR},
    {"getLog", R_CLUSTER, MF_CACT_MONITOR},
    {"getCmdLineOpts", R_CLUSTER, MF_CACT_MONITOR},
    {"getParameter", R_CLUSTER, MF_CACT_GET_PARAMETER}, /* backup's and restore's too */
    {"currentOp", R_SPECIAL, MF_CACT_MONITOR},
    {"replSetGetStatus", R_CLUSTER, MF_CACT_REPL_STATUS},
    {"replSetGetConfig", R_CLUSTER, MF_CACT_REPL_STATUS},
    {"getDefaultRWConcern", R_CLUSTER, MF_CACT_REPL_STATUS},
    {"setDefaultRWConcern", R_CLUSTER, MF_CACT_ADMIN},
    {"setParameter", R_CLUSTER, MF_CACT_ADMIN},
    {"killOp", R_AUTHED, 0}, /* its own operations; anyone's with the killop privilege (cmd_admin.c) */
    {"killAllSessions", R_CLUSTER, MF_CACT_ADMIN},
    {"autoCompact", R_CLUSTER, MF_CACT_ADMIN}, /* mongod: compact on the cluster (hostManager) */
    {"fsync", R_CLUSTER, MF_CACT_ADMIN},
    {"fsyncUnlock", R_CLUSTER, MF_CACT_ADMIN},
    {"shutdown", R_CLUSTER, MF_CACT_ADMIN},
    {"replSetInitiate", R_CLUSTER, MF_CACT_ADMIN},
    {"replSetReconfig", R_CLUSTER, MF_CACT_ADMIN},
    {"replSetStepDown", R_CLUSTER, MF_CACT_ADMIN},
    {"replSetFreeze", R_CLUSTER, MF_CACT_ADMIN},
    {"replSetSyncFrom", R_CLUSTER, MF_CACT_ADMIN},
    {"replSetMaintenance", R_CLUSTER, MF_CACT_ADMIN},
    /* cmd_misc.c; validateDBMetadata, which may look at every database, needs cluster admin. */
    {"dataSize", R_SPECIAL, MF_ACT_FIND},
    {"datasize", R_SPECIAL, MF_ACT_FIND},
    {"convertToCapped", R_DATA, MF_ACT_CREATE_COLLECTION | MF_ACT_DROP_COLLECTION},
    {"cloneCollectionAsCapped", R_DATA, MF_ACT_FIND | MF_ACT_INSERT | MF_ACT_CREATE_COLLECTION},
    {"filemd5", R_SPECIAL, MF_ACT_FIND}, /* find on <root>.chunks, as mongod's CmdFileMD5 */
    {"convertShardKeyToHashed", R_AUTHED, 0}, /* cmd_hash.c: a pure function of its argument */
    {"_hashBSONElement", R_AUTHED, 0},
    {"dbHash", R_DB, MF_ACT_FIND},
    {"dbhash", R_DB, MF_ACT_FIND},
    {"planCacheClear", R_DATA, MF_ACT_COLLMOD},
    {"planCacheClearFilters", R_DATA, MF_ACT_COLLMOD},
    {"planCacheListFilters", R_DATA, MF_ACT_COLLMOD},
    {"planCacheSetFilter", R_DATA, MF_ACT_COLLMOD},
    {"top", R_CLUSTER, MF_CACT_MONITOR},
    {"lockInfo", R_CLUSTER, MF_CACT_SERVER_STATUS}, /* mongod's lock_info.cpp: the serverStatus action (backup's too) */
    {"connPoolStats", R_CLUSTER, MF_CACT_MONITOR},
    {"_mfReplInfo", R_CLUSTER, MF_CACT_INTERNAL},
    {"_mfReplJoin", R_CLUSTER, MF_CACT_INTERNAL},
};

static const rule_t *
rule_of(const char *name)
{
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        if (strcmp(rules[i].name, name) == 0)
            return &rules[i];
    }
    return NULL;
}

/* The collection a command's first field names (a string), else NULL. */
static const char *
first_coll(const bson_t *cmd)
{
    bson_iter_t it;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

/* Whether any value under it (recursively) is a document with key `key`. */
static bool
has_key_deep(bson_iter_t *it, const char *const *keys, int depth)
{
    while (bson_iter_next(it)) {
        for (int i = 0; keys[i] != NULL; i++) {
            if (strcmp(bson_iter_key(it), keys[i]) == 0)
                return true;
        }
        bson_iter_t sub;
        if ((BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) && depth < 64 && bson_iter_recurse(it, &sub) &&
            has_key_deep(&sub, keys, depth + 1))
            return true;
    }
    return false;
}

static bool
cmd_has_key(const bson_t *cmd, const char *field, const char *const *keys)
{
    bson_iter_t it, sub;
    if (!bson_iter_init_find(&it, cmd, field) || !(BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) ||
        !bson_iter_recurse(&it, &sub))
        return false;
    return has_key_deep(&sub, keys, 0);
}

/* Whether any statement of an update (in the command or its kind-1 "updates" sequence) upserts. */
static bool
upserts(const mf_op_t *op, const bson_t *cmd)
{
    static const char *const k[] = {"upsert", NULL};
    bson_iter_t it;
    if (cmd_has_key(cmd, "updates", k))
        return true;
    if (bson_iter_init_find(&it, cmd, "upsert") && bson_iter_as_bool(&it))
        return true;
    for (size_t i = 0; op->seqs != NULL && i < op->nseqs; i++) {
        if (strcmp(op->seqs[i].identifier, "updates") != 0)
            continue;
        for (size_t j = 0; j < op->seqs[i].ndocs; j++) {
            if (bson_iter_init_find(&it, &op->seqs[i].docs[j], "upsert") && bson_iter_as_bool(&it))
                return true;
        }
    }
    return false;
}

/* The first stage of the command's pipeline: *f on its one field (the stage's name and spec); false if none. */
static bool
first_stage(const bson_t *cmd, bson_iter_t *f)
{
    bson_iter_t it, st;
    return bson_iter_init_find(&it, cmd, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &st) &&
           bson_iter_next(&st) && BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, f) && bson_iter_next(f);
}

/* Whether the command's pipeline starts with $listLocalSessions or $listSessions. */
static bool
first_stage_lists_sessions(const bson_t *cmd)
{
    bson_iter_t f;
    return first_stage(cmd, &f) &&
           (strcmp(bson_iter_key(&f), "$listLocalSessions") == 0 || strcmp(bson_iter_key(&f), "$listSessions") == 0);
}

/*
 * Whether the command's pipeline starts with {<stage>: {<option>: true, ...}}:
 * $currentOp's allUsers (another user's operations), $changeStream's
 * allChangesForCluster (every database).
 */
static bool
first_stage_flag(const bson_t *cmd, const char *stage, const char *option)
{
    bson_iter_t f, o;
    if (!first_stage(cmd, &f) || strcmp(bson_iter_key(&f), stage) != 0 || !BSON_ITER_HOLDS_DOCUMENT(&f) ||
        !bson_iter_recurse(&f, &o))
        return false;
    /* Any occurrence of a repeated option counts: the stage's parser may keep the last. */
    while (bson_iter_next(&o))
        if (strcmp(bson_iter_key(&o), option) == 0 && bson_iter_as_bool(&o))
            return true;
    return false;
}

/*
 * The bypassDocumentValidation action a write asks for with
 * bypassDocumentValidation: true (a safeBool), as mongod's
 * checkAuthForInsert / checkAuthForUpdate, findAndModify's privileges,
 * bulkWrite's getPrivileges and $out / $merge's requiredPrivileges; 0 when
 * it does not (delete never asks).
 */
static uint32_t
bypass_acts(const bson_t *cmd)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, cmd, "bypassDocumentValidation") && bson_iter_as_bool(&it) ? MF_ACT_BYPASS_VALIDATION
                                                                                                : 0;
}

static int
denied(mf_op_t *op, const char *db, const char *name)
{
    return mf_err_set(&op->err, MF_E_Unauthorized, "not authorized on %s to execute command { %s: ... }", db, name);
}

/* Roles named by a user command: each needs user administration on its database (MongoDB's grantRole). */
static bool
may_grant_roles(const mf_privs_t *p, const bson_t *cmd, const char *db)
{
    /* Every occurrence of a repeated field: whichever copy the command's parser keeps is checked. */
    bson_iter_t it, r, f;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "roles") != 0 || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &r))
            continue;
        while (bson_iter_next(&r)) {
            if (!mf_privs_allow(p, db, NULL, MF_ACT_USER_ADMIN))
                return false;
            if (!BSON_ITER_HOLDS_DOCUMENT(&r) || !bson_iter_recurse(&r, &f))
                continue;
            while (bson_iter_next(&f)) {
                if (strcmp(bson_iter_key(&f), "db") == 0 &&
                    (!BSON_ITER_HOLDS_UTF8(&f) || !mf_privs_allow(p, bson_iter_utf8(&f, NULL), NULL, MF_ACT_USER_ADMIN)))
                    return false;
            }
        }
    }
    return true;
}

/*
 * Privileges named by a role command (createRole, updateRole,
 * grant/revokePrivilegesToRole): as mongod's checkAuthorizedToGrantPrivilege,
 * one on a database or a collection needs user administration on that
 * database, any other resource (every database, a collection in every
 * database, the cluster, anyResource) on admin. Every copy of a repeated
 * field counts: a resource with a db "" or no db at all asks for admin, and
 * each non-empty db for itself. *what names what was missing (13's message).
 */
static bool
may_grant_privileges(const mf_privs_t *p, const bson_t *cmd, const char **what)
{
    bson_iter_t it, arr, pv, res;
    bson_iter_init(&it, cmd);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "privileges") != 0 || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &arr))
            continue;
        while (bson_iter_next(&arr)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &pv))
                continue; /* the command refuses it (14) */
            while (bson_iter_next(&pv)) {
                if (strcmp(bson_iter_key(&pv), "resource") != 0 || !BSON_ITER_HOLDS_DOCUMENT(&pv) ||
                    !bson_iter_recurse(&pv, &res))
                    continue;
                bool named_db = false, wide = false;
                while (bson_iter_next(&res)) {
                    const char *k = bson_iter_key(&res);
                    if (strcmp(k, "db") == 0 && BSON_ITER_HOLDS_UTF8(&res) && bson_iter_utf8(&res, NULL)[0] != '\0') {
                        named_db = true;
                        *what = bson_iter_utf8(&res, NULL);
                        if (!mf_privs_allow(p, *what, NULL, MF_ACT_USER_ADMIN))
                            return false;
                    } else if (strcmp(k, "db") == 0 || strcmp(k, "cluster") == 0 || strcmp(k, "anyResource") == 0) {
                        wide = true;
                    }
                }
                if ((wide || !named_db) && !mf_privs_allow(p, "admin", NULL, MF_ACT_USER_ADMIN)) {
                    *what = NULL;
                    return false;
                }
            }
        }
    }
    return true;
}

/* Whether p holds acts on every database but local and config (mongod's anyNormalResource). */
static bool
allow_any_normal(const mf_privs_t *p, uint32_t acts)
{
    return ((p->any | p->all) & acts) == acts;
}

/*
 * Whether usersInfo (run on db) may be answered, as mongod's
 * UsersInfoCommand doCheckAuthorization: every user of db (a number, or
 * forAllDBs, which the command checks further) takes viewUser on db; named
 * users take viewUser on each one's own database, the caller itself
 * excepted. A name the command cannot parse is left to it (2). *bad_db: the
 * database refused.
 */
static bool
users_info_allowed(mf_op_t *op, const mf_privs_t *p, const bson_t *cmd, const char *db, const char **bad_db)
{
    mf_client_auth_t *a = op->client->auth;
    bson_iter_t it, arr, f;
    bool many;
    *bad_db = db;
    if (!bson_iter_init_find(&it, cmd, "usersInfo"))
        return false;
    many = BSON_ITER_HOLDS_ARRAY(&it);
    if (!many && !BSON_ITER_HOLDS_UTF8(&it) &&
        (!BSON_ITER_HOLDS_DOCUMENT(&it) || (bson_iter_recurse(&it, &f) && bson_iter_find(&f, "forAllDBs"))))
        return mf_privs_allow(p, db, NULL, MF_ACT_VIEW_USER);
    if (many)
        bson_iter_recurse(&it, &arr);
    while (many ? bson_iter_next(&arr) : true) {
        const char *u, *d;
        if (name_of(many ? &arr : &it, "user", db, &u, &d, NULL) &&
            !(a != NULL && a->authed && strcmp(u, a->user) == 0 && strcmp(d, a->db) == 0) &&
            !mf_privs_allow(p, d, NULL, MF_ACT_VIEW_USER)) {
            *bad_db = d;
            return false;
        }
        if (!many)
            break;
    }
    return true;
}

/*
 * The collection a pipeline stage names (v: a string, or a document with
 * coll_key and an optional db), on dflt_db: *db points into dbbuf (cap
 * bytes) or at dflt_db, *coll into the command. False if it names none.
 */
static bool
stage_target(const bson_iter_t *v, const char *coll_key, const char *dflt_db, char *dbbuf, size_t cap,
             const char **db, const char **coll)
{
    bson_iter_t in;
    *db = dflt_db;
    *coll = NULL;
    if (BSON_ITER_HOLDS_UTF8(v)) {
        *coll = bson_iter_utf8(v, NULL);
        return true;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(v) || !bson_iter_recurse(v, &in))
        return false;
    while (bson_iter_next(&in)) {
        const char *k = bson_iter_key(&in);
        if (strcmp(k, coll_key) == 0 && BSON_ITER_HOLDS_UTF8(&in)) {
            *coll = bson_iter_utf8(&in, NULL);
        } else if (strcmp(k, "db") == 0 && BSON_ITER_HOLDS_UTF8(&in)) {
            snprintf(dbbuf, cap, "%s", bson_iter_utf8(&in, NULL));
            *db = dbbuf;
        }
    }
    return *coll != NULL;
}

/*
 * Whether p allows everything a pipeline (arr, run on db) reaches besides
 * its source, as mongod's involved-namespace checks: find on what
 * $lookup, $graphLookup and $unionWith read (their sub-pipelines and
 * $facet's too), insert and remove on an $out target, insert and update
 * on a $merge target, in whatever database they name.
 */
static bool
pipeline_allowed(const mf_privs_t *p, const char *db, const bson_iter_t *arr, int depth, uint32_t bypass)
{
    bson_iter_t st, s, f;
    if (depth > 32)
        return false;
    if (!BSON_ITER_HOLDS_ARRAY(arr) || !bson_iter_recurse(arr, &st))
        return true;
    while (bson_iter_next(&st)) {
        char dbbuf[128];
        const char *tdb, *tc;
        if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &s) || !bson_iter_next(&s))
            continue;
        const char *name = bson_iter_key(&s);
        if (strcmp(name, "$facet") == 0) {
            if (BSON_ITER_HOLDS_DOCUMENT(&s) && bson_iter_recurse(&s, &f))
                while (bson_iter_next(&f))
                    if (!pipeline_allowed(p, db, &f, depth + 1, bypass))
                        return false;
        } else if (strcmp(name, "$out") == 0) {
            if (stage_target(&s, "coll", db, dbbuf, sizeof(dbbuf), &tdb, &tc) &&
                !mf_privs_allow(p, tdb, tc, MF_ACT_INSERT | MF_ACT_REMOVE | bypass))
                return false;
        } else if (strcmp(name, "$merge") == 0) {
            /* The string form, or every "into" of the document (a repeated one: whichever the parser keeps). */
            if (!BSON_ITER_HOLDS_DOCUMENT(&s)) {
                if (stage_target(&s, "coll", db, dbbuf, sizeof(dbbuf), &tdb, &tc) &&
                    !mf_privs_allow(p, tdb, tc, MF_ACT_INSERT | MF_ACT_UPDATE | bypass))
                    return false;
            } else if (bson_iter_recurse(&s, &f)) {
                while (bson_iter_next(&f))
                    if (strcmp(bson_iter_key(&f), "into") == 0 &&
                        stage_target(&f, "coll", db, dbbuf, sizeof(dbbuf), &tdb, &tc) &&
                        !mf_privs_allow(p, tdb, tc, MF_ACT_INSERT | MF_ACT_UPDATE | bypass))
                        return false;
            }
        } else if (strcmp(name, "$unionWith") == 0 || strcmp(name, "$lookup") == 0 ||
                   strcmp(name, "$graphLookup") == 0) {
            bool union_with = name[1] == 'u';
            const char *rdb = db;
            if (union_with && stage_target(&s, "coll", db, dbbuf, sizeof(dbbuf), &tdb, &tc)) {
                if (!mf_privs_allow(p, tdb, tc, MF_ACT_FIND))
                    return false;
                rdb = tdb;
            }
            if (!BSON_ITER_HOLDS_DOCUMENT(&s) || !bson_iter_recurse(&s, &f))
                continue;
            while (bson_iter_next(&f)) {
                const char *k = bson_iter_key(&f);
                if (!union_with && strcmp(k, "from") == 0 &&
                    stage_target(&f, "coll", db, dbbuf, sizeof(dbbuf), &tdb, &tc)) {
                    if (!mf_privs_allow(p, tdb, tc, MF_ACT_FIND))
                        return false;
                    rdb = tdb;
                }
            }
            /* The sub-pipeline runs in the database it reads; every copy of a repeated one is checked. */
            if (bson_iter_recurse(&s, &f))
                while (bson_iter_next(&f))
                    if (strcmp(bson_iter_key(&f), "pipeline") == 0 && !pipeline_allowed(p, rdb, &f, depth + 1, bypass))
                        return false;
        }
    }
    return true;
}

static int check_command(mf_op_t *op, const mf_privs_t *p, const char *db, const char *name, const bson_t *cmd,
                         int depth);

static bool split_ns(const char *ns, char *buf, size_t cap, const char **coll);

/*
 * bulkWrite (on admin) writes to the namespaces of its nsInfo: each needs
 * the actions of the ops aimed at it (insert; update, plus insert for an
 * upsert; remove), as mongod's bulk_write_common getPrivileges. A request
 * too malformed to read is let through: the command itself refuses it.
 */
static bool
bulkwrite_allowed(mf_op_t *op, const mf_privs_t *p, uint32_t bypass)
{
    bson_t *ops = NULL, *nsinfo = NULL;
    size_t nops = 0, nns = 0;
    uint32_t *acts = NULL;
    bool ok = true;
    mf_error_t saved = op->err;
    if (mf_op_docs(op, "ops", true, &ops, &nops) != 0 || mf_op_docs(op, "nsInfo", true, &nsinfo, &nns) != 0)
        goto out;
    acts = mf_calloc(nns + 1, sizeof(*acts));
    for (size_t i = 0; i < nops; i++) {
        bson_iter_t it, f;
        if (!bson_iter_init(&it, &ops[i]) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_NUMBER(&it))
            continue;
        int64_t ix = bson_iter_as_int64(&it);
        if (ix < 0 || (size_t)ix >= nns)
            continue;
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "insert") == 0)
            acts[ix] |= MF_ACT_INSERT;
        else if (strcmp(k, "delete") == 0)
            acts[ix] |= MF_ACT_REMOVE;
        else if (strcmp(k, "update") == 0)
            acts[ix] |= MF_ACT_UPDATE | (bson_iter_init_find(&f, &ops[i], "upsert") && bson_iter_as_bool(&f) ? MF_ACT_INSERT : 0);
    }
    for (size_t i = 0; i < nns && ok; i++) {
        bson_iter_t it;
        char dbbuf[128];
        const char *coll;
        if (acts[i] == 0 || !bson_iter_init_find(&it, &nsinfo[i], "ns") || !BSON_ITER_HOLDS_UTF8(&it))
            continue;
        if (split_ns(bson_iter_utf8(&it, NULL), dbbuf, sizeof(dbbuf), &coll))
            ok = mf_privs_allow(p, dbbuf, coll, acts[i] | bypass);
    }
out:
    op->err = saved;
    free(ops);
    free(nsinfo);
    free(acts);
    return ok;
}

/* Splits "db.coll" into db (copied into buf) and *coll. False if there is no dot. */
static bool
split_ns(const char *ns, char *buf, size_t cap, const char **coll)
{
    const char *dot = strchr(ns, '.');
    if (dot == NULL || (size_t)(dot - ns) >= cap)
        return false;
    memcpy(buf, ns, (size_t)(dot - ns));
    buf[dot - ns] = '\0';
    *coll = dot + 1;
    return true;
}

static int
special(mf_op_t *op, const mf_privs_t *p, const rule_t *r, const char *db, const char *name, const bson_t *cmd,
        int depth)
{
    const char *coll = first_coll(cmd);
    bson_iter_t it;
    static const char *const curop[] = {"$currentOp", NULL};

    if (strcmp(name, "update") == 0)
        return mf_privs_allow(p, db, coll, MF_ACT_UPDATE | (upserts(op, cmd) ? MF_ACT_INSERT : 0) | bypass_acts(cmd))
                   ? 0
                   : denied(op, db, name);
    if (strcmp(name, "bulkWrite") == 0)
        return bulkwrite_allowed(op, p, bypass_acts(cmd)) ? 0 : denied(op, db, name);
    if (strcmp(name, "findAndModify") == 0 || strcmp(name, "findandmodify") == 0) {
        bool remove = bson_iter_init_find(&it, cmd, "remove") && bson_iter_as_bool(&it);
        uint32_t acts = MF_ACT_FIND | (remove ? MF_ACT_REMOVE : MF_ACT_UPDATE) | (upserts(op, cmd) ? MF_ACT_INSERT : 0) |
                        bypass_acts(cmd);
        return mf_privs_allow(p, db, coll, acts) ? 0 : denied(op, db, name);
    }
    if (strcmp(name, "_mergeAuthzCollections") == 0) {
        /* mongod's checkAuthForTypedCommand(MergeAuthzCollectionsCommand): user administration on every
         * ordinary database, and find on the staging collections it reads. */
        static const char *const temps[] = {"tempUsersCollection", "tempRolesCollection", NULL};
        if (!allow_any_normal(p, MF_ACT_USER_ADMIN))
            return denied(op, db, name);
        for (int i = 0; temps[i] != NULL; i++) {
            char tdb[128];
            const char *tcoll;
            /* Every copy of a repeated field, so the check and the command cannot see different ones. */
            bson_iter_init(&it, cmd);
            while (bson_iter_find(&it, temps[i])) {
                if (!BSON_ITER_HOLDS_UTF8(&it) || bson_iter_utf8(&it, NULL)[0] == '\0')
                    continue;
                if (!split_ns(bson_iter_utf8(&it, NULL), tdb, sizeof(tdb), &tcoll) ||
                    !mf_privs_allow(p, tdb, tcoll, MF_ACT_FIND))
                    return denied(op, db, name);
            }
        }
        return 0;
    }
    if (strcmp(name, "invalidateUserCache") == 0) {
        /*
         * The cluster action invalidateUserCache (builtin_roles.yml): hostManager's (cluster administration
         * here) and userAdminAnyDatabase's; not restore's, whose user administration on every ordinary
         * database is for mongorestore's user and role commands.
         */
        return mf_privs_cluster(p, MF_CACT_ADMIN) || mf_privs_cluster(p, MF_CACT_INVALIDATE_USER_CACHE) ? 0 : denied(op, db, name);
    }
    if (strcmp(name, "listDatabases") == 0) {
        /* mongod's list_databases_common.h: without the listDatabases privilege, authorizedDatabases: false is refused. */
        if (!mf_privs_cluster(p, MF_CACT_LIST_DATABASES) && bson_iter_init_find(&it, cmd, "authorizedDatabases") &&
            !BSON_ITER_HOLDS_NULL(&it) && !bson_iter_as_bool(&it))
            return mf_err_set(&op->err, MF_E_Unauthorized, "Insufficient permissions to list all databases");
        return 0;
    }
    if (strcmp(name, "currentOp") == 0) {
        /* {$ownOps: true} lists the caller's own operations, which needs no privilege (mongod's inprog otherwise). */
        bool own = bson_iter_init_find(&it, cmd, "$ownOps") && bson_iter_as_bool(&it);
        return own || mf_privs_cluster(p, r->acts) ? 0 : denied(op, db, name);
    }
    if (strcmp(name, "getMore") == 0) {
        const char *c = bson_iter_init_find(&it, cmd, "collection") && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
        /* The cursors of listIndexes and listCollections need what opened them (mongod's checkAuthForGetMore). */
        static const char li[] = "$cmd.listIndexes.";
        if (c != NULL && strncmp(c, li, sizeof(li) - 1) == 0)
            return mf_privs_allow(p, db, c + sizeof(li) - 1, MF_ACT_LIST_INDEXES) ? 0 : denied(op, db, name);
        if (c != NULL && strcmp(c, "$cmd.listCollections") == 0)
            return mf_privs_allow(p, db, NULL, MF_ACT_LIST_COLLECTIONS) || mf_privs_any_on(p, db) ? 0 : denied(op, db, name);
        /* listIndexes' cursors are named after their collection (mongod 8.0): the cursor says what opened it. */
        if (c != NULL && !mf_privs_allow(p, db, c, MF_ACT_FIND) && mf_privs_allow(p, db, c, MF_ACT_LIST_INDEXES) &&
            bson_iter_init_find(&it, cmd, "getMore") && BSON_ITER_HOLDS_INT64(&it) &&
            mf_cursors_lists_indexes(op->eng->cursors, bson_iter_int64(&it)))
            return 0;
        return mf_privs_allow(p, db, c, MF_ACT_FIND) ? 0 : denied(op, db, name);
    }
    if (strcmp(name, "aggregate") == 0) {
        static const char *const reads_other[] = {"$lookup", "$unionWith", "$graphLookup", "$out", "$merge", NULL};
        /*
         * A pipeline that starts with $listLocalSessions / $listSessions reads
         * the session cache, not a collection: listing one's own sessions
         * needs no privilege, and the stage itself asks mf_cmd_auth_cluster
         * for anyone else's (as mongod). Only while no later stage reads or
         * writes a collection.
         */
        if (first_stage_lists_sessions(cmd) && !cmd_has_key(cmd, "pipeline", reads_other))
            return 0;
        /* A change stream on the whole cluster reads every database: find on all of them (mongod's {db: "", collection: ""}). */
        if (first_stage_flag(cmd, "$changeStream", "allChangesForCluster") && (p->any & MF_ACT_FIND) != MF_ACT_FIND && (p->all & MF_ACT_FIND) != MF_ACT_FIND)
            return denied(op, db, name);
        /* One's own operations need no privilege; everyone's (allUsers: true) need inprog, as mongod's. */
        bool current_op = cmd_has_key(cmd, "pipeline", curop);
        if (current_op && first_stage_flag(cmd, "$currentOp", "allUsers") && !mf_privs_cluster(p, MF_CACT_MONITOR))
            return denied(op, db, name);
        /* Every collection it reads or writes besides its source: $lookup, $unionWith, $out, $merge ... */
        if (bson_iter_init_find(&it, cmd, "pipeline") && !pipeline_allowed(p, db, &it, 0, bypass_acts(cmd)))
            return denied(op, db, name);
        /* {aggregate: 1} starting with $currentOp reads no collection: the cluster privilege checked above is enough. */
        bson_iter_t fs;
        bool starts_current_op = current_op && first_stage(cmd, &fs) && strcmp(bson_iter_key(&fs), "$currentOp") == 0;
        if (mf_privs_allow(p, db, coll, MF_ACT_FIND) || (starts_current_op && coll == NULL))
            return 0;
        /*
         * $collStats and $indexStats are initial sources: mongod's getPrivilegesForAggregate (authorization_checks.cpp)
         * then asks no find, only the stage's own collStats / indexStats action on the collection (dbAdmin's
         * db.coll.stats(), clusterMonitor's exporters).
         */
        if (coll != NULL && first_stage(cmd, &fs) &&
            (strcmp(bson_iter_key(&fs), "$collStats") == 0 || strcmp(bson_iter_key(&fs), "$indexStats") == 0) &&
            mf_privs_allow(p, db, coll, MF_ACT_STATS))
            return 0;
        return denied(op, db, name);
    }
    if (strcmp(name, "explain") == 0) {
        if (!bson_iter_init_find(&it, cmd, "explain") || !BSON_ITER_HOLDS_DOCUMENT(&it) || depth > 2)
            return 0; /* the command reports its own shape error */
        const uint8_t *data;
        uint32_t len;
        bson_t inner;
        bson_iter_t in;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&inner, data, len) || !bson_iter_init(&in, &inner) || !bson_iter_next(&in))
            return 0;
        return check_command(op, p, db, bson_iter_key(&in), &inner, depth + 1);
    }
    if (strcmp(name, "listCollections") == 0) {
        /*
         * authorizedCollections + nameOnly: any privilege on the database is enough, as in MongoDB; the
         * command then lists only the collections the caller holds a privilege on (mf_cmd_may_see_coll).
         */
        bool authorized = bson_iter_init_find(&it, cmd, "authorizedCollections") && bson_iter_as_bool(&it);
        bool name_only = bson_iter_init_find(&it, cmd, "nameOnly") && bson_iter_as_bool(&it);
        if (mf_privs_allow(p, db, NULL, MF_ACT_LIST_COLLECTIONS) || (authorized && name_only && mf_privs_any_on(p, db)))
            return 0;
        return denied(op, db, name);
    }
    if (strcmp(name, "dataSize") == 0 || strcmp(name, "datasize") == 0) {
        /* Its first field is a full namespace, possibly of another database: find on that. */
        char ndb[128];
        const char *nc;
        if (coll == NULL || !split_ns(coll, ndb, sizeof(ndb), &nc))
            return mf_privs_cluster(p, MF_CACT_ADMIN) ? 0 : denied(op, db, name);
        return mf_privs_allow(p, ndb, nc, MF_ACT_FIND) ? 0 : denied(op, db, name);
    }
    if (strcmp(name, "filemd5") == 0) {
        /* find on <root>.chunks ("fs" without root); a root that is not a string: the command's own 73. */
        char chunks[512];
        const char *root = "fs";
        if (bson_iter_init_find(&it, cmd, "root")) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return 0;
            if (bson_iter_utf8(&it, NULL)[0] != '\0')
                root = bson_iter_utf8(&it, NULL);
        }
        snprintf(chunks, sizeof(chunks), "%s.chunks", root);
        return mf_privs_allow(p, db, chunks, MF_ACT_FIND) ? 0 : denied(op, db, name);
    }
    if (strcmp(name, "create") == 0 || strcmp(name, "collMod") == 0) {
        /* A view reads its viewOn and what its pipeline names: creating or changing one needs find on them. */
        if (!mf_privs_allow(p, db, coll, r->acts))
            return denied(op, db, name);
        if (bson_iter_init_find(&it, cmd, "viewOn") && BSON_ITER_HOLDS_UTF8(&it) &&
            !mf_privs_allow(p, db, bson_iter_utf8(&it, NULL), MF_ACT_FIND))
            return denied(op, db, name);
        if (bson_iter_init_find(&it, cmd, "pipeline") && !pipeline_allowed(p, db, &it, 0, 0))
            return denied(op, db, name);
        return 0;
    }
    if (strcmp(name, "renameCollection") == 0) {
        const char *from = coll, *to = NULL, *fc, *tc;
        char fdb[128], tdb[128];
        bool drop_target = bson_iter_init_find(&it, cmd, "dropTarget") && bson_iter_as_bool(&it);
        if (bson_iter_init_find(&it, cmd, "to") && BSON_ITER_HOLDS_UTF8(&it))
            to = bson_iter_utf8(&it, NULL);
        if (from == NULL || to == NULL || !split_ns(from, fdb, sizeof(fdb), &fc) || !split_ns(to, tdb, sizeof(tdb), &tc))
            return mf_privs_cluster(p, MF_CACT_ADMIN) ? 0 : denied(op, db, name);
        bool ok;
        /*
         * As mongod's checkAuthForRenameCollectionCommand: within a database, on the database, and no reading
         * through it; a system collection on either side (admin.system.users, system.js ...) is checked as
         * across databases, on the collections themselves (renameCollectionSameDB must not make one).
         */
        if (strcmp(fdb, tdb) == 0 && strncmp(fc, "system.", 7) != 0 && strncmp(tc, "system.", 7) != 0)
            ok = mf_privs_allow(p, fdb, NULL, MF_ACT_RENAME_SAME_DB) &&
                 (mf_privs_allow(p, fdb, fc, MF_ACT_FIND) || !mf_privs_allow(p, tdb, tc, MF_ACT_FIND)) &&
                 (!drop_target || mf_privs_allow(p, tdb, tc, MF_ACT_DROP_COLLECTION));
        else
            ok = mf_privs_allow(p, fdb, fc, MF_ACT_FIND | MF_ACT_REMOVE | MF_ACT_DROP_COLLECTION) &&
                 mf_privs_allow(p, tdb, tc, MF_ACT_INSERT | MF_ACT_CREATE_COLLECTION | MF_ACT_CREATE_INDEX |
                                                (drop_target ? MF_ACT_DROP_COLLECTION : 0));
        return ok ? 0 : denied(op, fdb, name);
    }
    if (strcmp(name, "usersInfo") == 0) {
        const char *bad_db;
        return users_info_allowed(op, p, cmd, db, &bad_db) ? 0 : denied(op, bad_db, name);
    }
    /* createUser, updateUser, grantRolesToUser, revokeRolesFromUser and the role commands */
    if (!mf_privs_allow(p, db, NULL, r->acts) || !may_grant_roles(p, cmd, db))
        return denied(op, db, name);
    /* Replacing a role's privileges or roles, or a user's roles, may revoke anything: as mongod, revokeRole everywhere. */
    if (strcmp(name, "updateRole") == 0 && !allow_any_normal(p, MF_ACT_USER_ADMIN))
        return mf_err_set(&op->err, MF_E_Unauthorized, "updateRole command required the ability to revoke any role in the system");
    if (strcmp(name, "updateUser") == 0 && bson_has_field(cmd, "roles") && !allow_any_normal(p, MF_ACT_USER_ADMIN))
        return mf_err_set(&op->err, MF_E_Unauthorized,
                          "In order to use updateUser to set roles array, must be authorized to revoke any role in the system");
    const char *what = NULL;
    if (!may_grant_privileges(p, cmd, &what)) {
        bool grant = strncmp(name, "revoke", 6) != 0;
        if (what != NULL)
            return mf_err_set(&op->err, MF_E_Unauthorized, "Not authorized to %s privileges on the %s database",
                              grant ? "grant" : "revoke", what);
        return mf_err_set(&op->err, MF_E_Unauthorized,
                          "To %s privileges affecting multiple databases or the cluster, must be authorized to %s "
                          "roles from the admin database",
                          grant ? "grant" : "revoke", grant ? "grant" : "revoke");
    }
    return 0;
}

static int
check_command(mf_op_t *op, const mf_privs_t *p, const char *db, const char *name, const bson_t *cmd, int depth)
{
    const rule_t *r = rule_of(name);
    if (r == NULL)
        return mf_privs_cluster(p, MF_CACT_ADMIN) ? 0 : denied(op, db, name);
    switch (r->kind) {
    case R_OPEN:
    case R_AUTHED:
        return 0;
    case R_DATA:
        return mf_privs_allow(p, db, first_coll(cmd), r->acts | (strcmp(name, "insert") == 0 ? bypass_acts(cmd) : 0))
                   ? 0
                   : denied(op, db, name);
    case R_DB:
        return mf_privs_allow(p, db, NULL, r->acts) ? 0 : denied(op, db, name);
    case R_CLUSTER:
        return mf_privs_cluster(p, r->acts) ? 0 : denied(op, db, name);
    case R_SPECIAL:
        return special(op, p, r, db, name, cmd, depth);
    }
    return denied(op, db, name);
}

/* Whether a user or role exists or ever existed while this engine ran (the localhost exception's end, latched). */
static bool
auth_docs_exist(mf_engine_t *eng)
{
    if (atomic_load(&eng->auth_docs_seen))
        return true;
    if (!mf_users_exist(eng->cat))
        return false;
    atomic_store(&eng->auth_docs_seen, true);
    return true;
}

bool
mf_cmd_requires_auth(const char *name)
{
    const rule_t *r = rule_of(name);
    return r == NULL || r->kind != R_OPEN;
}

int
mf_cmd_authorize(mf_op_t *op, const char *name)
{
    if (!checked(op))
        return 0;
    const rule_t *r = rule_of(name);
    if (r != NULL && r->kind == R_OPEN)
        return 0;
    const mf_privs_t *p = privs_of(op);
    if (p == NULL) {
        /* The localhost exception: the first user, on admin, from this machine. */
        if (((strcmp(name, "createUser") == 0 && strcmp(op->db, "admin") == 0) || strcmp(name, "replSetInitiate") == 0) &&
            op->client->loopback && !auth_docs_exist(op->eng)) {
            /*
             * mongod's default privileges then are createUser and grantRole on admin only: the
             * first user may hold admin's roles (root, userAdminAnyDatabase ...), not another
             * database's (13, as checkAuthorizedToGrantRoles). Every copy of a repeated field.
             */
            bson_iter_t it, e;
            bson_iter_init(&it, op->cmd);
            while (strcmp(name, "createUser") == 0 && bson_iter_find(&it, "roles")) {
                if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &e))
                    continue; /* the command refuses it */
                while (bson_iter_next(&e)) {
                    const char *role, *rdb;
                    if (name_of(&e, "role", "admin", &role, &rdb, NULL) && rdb != NULL && strcmp(rdb, "admin") != 0)
                        return denied(op, op->db, name);
                }
            }
            return 0;
        }
        return mf_err_set(&op->err, MF_E_Unauthorized, "Command %s requires authentication", name);
    }
    return check_command(op, p, op->db, name, op->cmd, 0);
}

/* ---------- SASL ---------- */

/* The SASL payload (BinData, or a string as some clients send) of cmd. */
static bool
payload_of(const bson_t *cmd, const char **data, uint32_t *len)
{
    bson_iter_t it;
    bson_subtype_t st;
    if (!bson_iter_init_find(&it, cmd, "payload"))
        return false;
    if (BSON_ITER_HOLDS_BINARY(&it)) {
        bson_iter_binary(&it, &st, len, (const uint8_t **)data);
        return true;
    }
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        *data = bson_iter_utf8(&it, len);
        return true;
    }
    return false;
}

static void
append_payload(bson_t *out, const char *p, size_t len)
{
    bson_append_binary(out, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)p, (uint32_t)len);
}

static int
auth_failed(mf_op_t *op, mf_client_auth_t *a, const char *why)
{
    mf_log(MF_LOG_INFO, "ACCESS", "conn%lld: authentication failed for %s@%s from %s: %s", (long long)op->client->id,
           a->conv_user[0] ? a->conv_user : "?", a->conv_db, op->client->remote, why);
    conv_end(a);
    return mf_err_set(&op->err, MF_E_AuthenticationFailed, "Authentication failed.");
}

/*
 * sasl_start: begins a conversation for db with cmd's mechanism and payload
 * and appends {conversationId, done, payload} to out. saslStart and hello's
 * speculativeAuthenticate. 0, or -1 with op->err.
 */
static int
sasl_start(mf_op_t *op, const char *db, const bson_t *cmd, bson_t *out)
{
    mf_client_auth_t *a = client_auth(op->client);
    bson_iter_t it, o;
    const char *mech_name, *payload;
    uint32_t plen;
    char *server_first = NULL;
    bson_t user;
    mf_scram_cred_t cred;

    conv_end(a);
    snprintf(a->conv_db, sizeof(a->conv_db), "%s", db);
    a->conv_user[0] = '\0';
    if (!bson_iter_init_find(&it, cmd, "mechanism") || !BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'saslStart.mechanism' is missing but a required field");
    mech_name = bson_iter_utf8(&it, NULL);
    mf_scram_mech_t mech = mf_scram_mech_of(mech_name);
    if (mech == 0)
        return mf_err_set(&op->err, MF_E_MechanismUnavailable,
                          "Received authentication for mechanism %s which is unknown or not enabled", mech_name);
    if (!payload_of(cmd, &payload, &plen))
        return mf_err_set(&op->err, MF_E_BadValue, "BSON field 'saslStart.payload' is missing but a required field");
    a->conv_skip_empty = bson_iter_init_find(&it, cmd, "options") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
                         bson_iter_recurse(&it, &o) && bson_iter_find(&o, "skipEmptyExchange") && bson_iter_as_bool(&o);
    a->conv = mf_scram_new(mech);
    a->conv_mech = mech;
    if (mf_scram_client_first(a->conv, payload, plen, &op->err) != 0)
        return auth_failed(op, a, op->err.msg);
    snprintf(a->conv_user, sizeof(a->conv_user), "%s", mf_scram_user(a->conv));
    if (is_system_user(db, a->conv_user)) {
        /* The members' internal user: its credential comes from the keyFile, never from system.users. */
        if (op->eng->cluster_cred == NULL || mech != MF_SCRAM_SHA256)
            return auth_failed(op, a, "no keyFile: the members' internal user cannot authenticate");
        cred = *op->eng->cluster_cred;
        goto server_first;
    }
    int r = mf_users_get(op->eng->cat, db, a->conv_user, &user, &op->err);
    if (r != 0)
        return auth_failed(op, a, r == MF_NOTFOUND ? "UserNotFound: no such user" : op->err.msg);
    a->conv_has_uid = user_uuid(&user, a->conv_uid);
    r = mf_users_cred(&user, mech, &cred);
    bson_destroy(&user);
    if (r != 0)
        return auth_failed(op, a, "the user has no credentials for this mechanism");
server_first:
    if (mf_scram_server_first(a->conv, &cred, NULL, &server_first, &op->err) != 0)
        return auth_failed(op, a, op->err.msg);
    a->conv_id = 1;
    a->conv_step = 1;
    BSON_APPEND_INT32(out, "conversationId", a->conv_id);
    BSON_APPEND_BOOL(out, "done", false);
    append_payload(out, server_first, strlen(server_first));
    free(server_first);
    return 0;
}

static int
cmd_sasl_start(mf_op_t *op)
{
    return sasl_start(op, op->db, op->cmd, op->reply);
}

static int
cmd_sasl_continue(mf_op_t *op)
{
    mf_client_auth_t *a = client_auth(op->client);
    bson_iter_t it;
    const char *payload;
    uint32_t plen;
    char *server_final = NULL;

    if (a->conv == NULL)
        return mf_err_set(&op->err, MF_E_ProtocolError, "No SASL session state found");
    if (!mf_op_find(op, "conversationId", &it) || !BSON_ITER_HOLDS_NUMBER(&it) ||
        bson_iter_as_int64(&it) != a->conv_id) {
        conv_end(a);
        return mf_err_set(&op->err, MF_E_ProtocolError, "sasl: Mismatched conversation id");
    }
    if (strcmp(op->db, a->conv_db) != 0)
        return auth_failed(op, a, "saslContinue on another database than saslStart");
    if (!payload_of(op->cmd, &payload, &plen))
        return mf_err_set(&op->err, MF_E_BadValue, "BSON field 'saslContinue.payload' is missing but a required field");
    if (a->conv_step == 2) {
        /* The empty exchange after the server's final message (clients that do not skip it). */
        conv_end(a);
        BSON_APPEND_INT32(op->reply, "conversationId", a->conv_id);
        BSON_APPEND_BOOL(op->reply, "done", true);
        append_payload(op->reply, "", 0);
        return 0;
    }
    if (mf_scram_client_final(a->conv, payload, plen, &server_final, &op->err) != 0)
        return auth_failed(op, a, "SCRAM proof mismatch (wrong password)");
    if (a->authed && (strcmp(a->user, a->conv_user) != 0 || strcmp(a->db, a->conv_db) != 0)) {
        /*
         * One user per connection, as mongod's addAndAuthorizeUser: the right password of another
         * user leaves the connection as it was (the same user logging in again is fine).
         */
        bool same_db = strcmp(a->db, a->conv_db) == 0;
        conv_end(a);
        free(server_final);
        if (same_db)
            return mf_err_set(&op->err, MF_E_Location5626701,
                              "Each client connection may only be authenticated once. Previously authenticated as: %s@%s",
                              a->user, a->db);
        return mf_err_set(&op->err, MF_E_Location5626702,
                          "Client has attempted to authenticate on multiple databases.Already authenticated as: %s@%s",
                          a->user, a->db);
    }
    a->authed = true;
    snprintf(a->user, sizeof(a->user), "%s", a->conv_user);
    snprintf(a->db, sizeof(a->db), "%s", a->conv_db);
    a->has_uid = a->conv_has_uid && !is_system_user(a->db, a->user);
    memcpy(a->uid, a->conv_uid, sizeof(a->uid));
    /* A user document exists (a member's __system@local comes from the key file, not from one). */
    if (!(strcmp(a->user, "__system") == 0 && strcmp(a->db, "local") == 0))
        atomic_store(&op->eng->auth_docs_seen, true);
    /*
     * The password was right; the user's and its roles' authenticationRestrictions
     * decide now (load_privs): unmet, the client gets mongod's plain 18 and
     * the log the reason. The check is here, where every SASL login ends
     * (hello's speculativeAuthenticate only starts a conversation).
     */
    if (!load_privs(op->eng, a)) {
        free(server_final);
        return auth_failed(op, a, a->why);
    }
    mf_log(MF_LOG_INFO, "ACCESS", "conn%lld: successfully authenticated as %s@%s (%s) from %s",
           (long long)op->client->id, a->user, a->db, a->conv_mech == MF_SCRAM_SHA1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256",
           op->client->remote);
    BSON_APPEND_INT32(op->reply, "conversationId", a->conv_id);
    BSON_APPEND_BOOL(op->reply, "done", a->conv_skip_empty);
    append_payload(op->reply, server_final, strlen(server_final));
    free(server_final);
    if (a->conv_skip_empty)
        conv_end(a);
    else
        a->conv_step = 2;
    return 0;
}

/*
 * mf_cmd_auth_hello: hello's authentication fields. saslSupportedMechs
 * "<db>.<user>" answers the user's mechanisms; speculativeAuthenticate runs
 * saslStart and answers its reply (a failure leaves the field out, and the
 * driver authenticates the long way, as with mongod).
 */
void
mf_cmd_auth_hello(mf_op_t *op)
{
    bson_iter_t it;
    if (op->client == NULL || !op->client->net)
        return;
    if (mf_op_find(op, "saslSupportedMechs", &it) && BSON_ITER_HOLDS_UTF8(&it)) {
        const char *v = bson_iter_utf8(&it, NULL), *dot = strchr(v, '.');
        char db[128];
        bson_t user, arr;
        mf_error_t err;
        if (dot != NULL && (size_t)(dot - v) < sizeof(db)) {
            memcpy(db, v, (size_t)(dot - v));
            db[dot - v] = '\0';
            if (mf_users_get(op->eng->cat, db, dot + 1, &user, &err) == 0) {
                mf_scram_cred_t c;
                bool sha1 = mf_users_cred(&user, MF_SCRAM_SHA1, &c) == 0;
                BSON_APPEND_ARRAY_BEGIN(op->reply, "saslSupportedMechs", &arr);
                if (sha1)
                    BSON_APPEND_UTF8(&arr, "0", "SCRAM-SHA-1");
                if (mf_users_cred(&user, MF_SCRAM_SHA256, &c) == 0)
                    BSON_APPEND_UTF8(&arr, sha1 ? "1" : "0", "SCRAM-SHA-256");
                bson_append_array_end(op->reply, &arr);
                bson_destroy(&user);
            }
        }
    }
    if (mf_op_find(op, "speculativeAuthenticate", &it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_t spec, out;
        bson_iter_t d;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&spec, data, len))
            return;
        const char *db = bson_iter_init_find(&d, &spec, "db") && BSON_ITER_HOLDS_UTF8(&d) ? bson_iter_utf8(&d, NULL) : "admin";
        if (!bson_iter_init_find(&d, &spec, "saslStart"))
            return; /* MONGODB-X509 and others: not offered */
        bson_init(&out);
        mf_error_t saved = op->err;
        if (sasl_start(op, db, &spec, &out) == 0)
            BSON_APPEND_DOCUMENT(op->reply, "speculativeAuthenticate", &out);
        op->err = saved;
        bson_destroy(&out);
    }
}

static int
cmd_logout(mf_op_t *op)
{
    mf_client_auth_t *a = op->client != NULL ? op->client->auth : NULL;
    if (a != NULL && a->authed && strcmp(a->db, op->db) == 0) {
        mf_log(MF_LOG_INFO, "ACCESS", "conn%lld: %s@%s logged out", (long long)op->client->id, a->user, a->db);
        a->authed = false;
        a->user[0] = a->db[0] = '\0';
        (void)load_privs(op->eng, a); /* no user: nothing to check */
    }
    return 0;
}

static void inherit_walk(mf_op_t *op, const bson_t *role_doc, bson_t *names, uint32_t *n, bson_t *privs,
                         role_seen_t *seen, bson_t *restr, uint32_t *nr);
static void seen_free(role_seen_t *s);

/*
 * connectionStatus: the authenticated user and its roles; with
 * showPrivileges, the privileges those roles grant (merged per resource, as
 * usersInfo's inheritedPrivileges), an empty array when no one is logged in.
 */
/*
 * append_held_roles: appends to names ("0", "1", ... from 0) a {role, db}
 * for every role a's user holds, directly or through user-defined roles
 * (mongod's getIndirectRoles): its own first, then the inherited ones
 * level by level. connectionStatus' authenticatedUserRoles and
 * $$USER_ROLES both list these.
 */
static void
append_held_roles(mf_op_t *op, const mf_client_auth_t *a, bson_t *names)
{
    bson_t holder = BSON_INITIALIZER;
    uint32_t nn = 0, nr = 0;
    role_seen_t *seen = mf_calloc(1, sizeof(*seen));
    BSON_APPEND_ARRAY(&holder, "roles", &a->roles);
    inherit_walk(op, &holder, names, &nn, NULL, seen, NULL, &nr);
    seen_free(seen);
    bson_destroy(&holder);
}

static int
cmd_connection_status(mf_op_t *op)
{
    bson_t ai, arr, u;
    bson_iter_t sp;
    bool show_privs = mf_op_find(op, "showPrivileges", &sp) && bson_iter_as_bool(&sp);
    mf_client_auth_t *a = op->client != NULL ? op->client->auth : NULL;
    if (a != NULL && a->authed && a->gen != atomic_load(&op->eng->users_gen))
        reload_privs(op->eng, op->client);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "authInfo", &ai);
    BSON_APPEND_ARRAY_BEGIN(&ai, "authenticatedUsers", &arr);
    if (a != NULL && a->authed) {
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &u);
        BSON_APPEND_UTF8(&u, "user", a->user);
        BSON_APPEND_UTF8(&u, "db", a->db);
        bson_append_document_end(&arr, &u);
    }
    bson_append_array_end(&ai, &arr);
    /*
     * Every role the user holds, directly or through user-defined roles (mongod's
     * getIndirectRoles): its own first, then the inherited ones level by level.
     */
    BSON_APPEND_ARRAY_BEGIN(&ai, "authenticatedUserRoles", &arr);
    if (a != NULL && a->authed)
        append_held_roles(op, a, &arr);
    bson_append_array_end(&ai, &arr);
    if (show_privs) {
        bson_t privs = BSON_INITIALIZER, user;
        mf_error_t uerr;
        if (a != NULL && a->authed && mf_users_get(op->eng->cat, a->db, a->user, &user, &uerr) == 0) {
            bson_t names = BSON_INITIALIZER, restr = BSON_INITIALIZER;
            uint32_t nn = 0, nr = 0;
            role_seen_t *seen = mf_calloc(1, sizeof(*seen));
            inherit_walk(op, &user, &names, &nn, &privs, seen, &restr, &nr);
            seen_free(seen);
            bson_destroy(&names);
            bson_destroy(&restr);
            bson_destroy(&user);
        }
        BSON_APPEND_ARRAY(&ai, "authenticatedUserPrivileges", &privs);
        bson_destroy(&privs);
    }
    bson_append_document_end(op->reply, &ai);
    return 0;
}

static void build_user_roles(mf_op_t *op, mf_client_auth_t *a, bson_t *out);

void
mf_cmd_user_roles(mf_op_t *op, bson_t *out)
{
    mf_client_auth_t *a = op->client != NULL ? op->client->auth : NULL;
    if (a != NULL && a->authed && a->gen != atomic_load(&op->eng->users_gen) &&
        !mf_txn_user(mf_storage_session(op->eng->st)))
        reload_privs(op->eng, op->client);
    if (a == NULL || !a->authed) {
        bson_init(out);
        return;
    }
    if (a->roles_var == NULL) {
        a->roles_var = bson_new();
        build_user_roles(op, a, a->roles_var);
    }
    bson_copy_to(a->roles_var, out); /* a copy: a reload later in the command frees the cached one */
}

/* The value of $$USER_ROLES for a's user (authenticated) into *out (initialised by the caller). */
static void
build_user_roles(mf_op_t *op, mf_client_auth_t *a, bson_t *out)
{
    bson_t names = BSON_INITIALIZER;
    append_held_roles(op, a, &names);
    bson_iter_t it;
    uint32_t n = 0;
    bson_iter_init(&it, &names);
    while (bson_iter_next(&it)) {
        bson_iter_t f;
        const char *role = NULL, *db = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f))
            continue;
        while (bson_iter_next(&f)) {
            if (BSON_ITER_HOLDS_UTF8(&f) && strcmp(bson_iter_key(&f), "role") == 0)
                role = bson_iter_utf8(&f, NULL);
            else if (BSON_ITER_HOLDS_UTF8(&f) && strcmp(bson_iter_key(&f), "db") == 0)
                db = bson_iter_utf8(&f, NULL);
        }
        if (role == NULL || db == NULL)
            continue;
        char key[16], *id = bson_strdup_printf("%s.%s", db, role);
        const char *kp;
        bson_t d;
        bson_uint32_to_string(n++, &kp, key, sizeof(key));
        BSON_APPEND_DOCUMENT_BEGIN(out, kp, &d);
        BSON_APPEND_UTF8(&d, "_id", id);
        BSON_APPEND_UTF8(&d, "role", role);
        BSON_APPEND_UTF8(&d, "db", db);
        bson_append_document_end(out, &d);
        bson_free(id);
    }
    bson_destroy(&names);
}

/* ---------- user management ---------- */

/* Whether role@db may be granted: a built-in role (not __system) or a user-defined one. */
static bool
role_exists(mf_op_t *op, const char *role, const char *db)
{
    bson_t doc;
    mf_error_t err;
    if (strcmp(role, "__system") == 0)
        return false;
    if (mf_role_exists(role, db))
        return true;
    if (mf_roles_get(op->eng->cat, db, role, &doc, &err) != 0)
        return false;
    bson_destroy(&doc);
    return true;
}

/* A user or role a command names: name and db borrowed from the command. */
typedef struct user_ref {
    const char *user, *db;
} user_ref_t;

static int parse_auth_name(mf_op_t *op, const bson_iter_t *it, const char *kind, const char *key, bool strict,
                           user_ref_t *out);

/*
 * A roles field into out as {role, db} documents, each once, as mongod's
 * array<RoleNameOrString>: a name (a role of op->db) or a {role, db}
 * document, both fields required (RoleName::parseFromBSON's 2 and
 * messages), anything else 2 "Role name must be either a document or
 * string"; every element is parsed before any is looked up. With
 * must_exist, a role that is neither built-in nor user-defined is then 31.
 */
static int
parse_roles_as(mf_op_t *op, const bson_iter_t *field, bool must_exist, bson_t *out)
{
    bson_iter_t r;
    uint32_t n = 0;
    if (!BSON_ITER_HOLDS_ARRAY(field))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.roles' is the wrong type '%s', expected type 'array'",
                          op->name, mf_type_name(bson_iter_type(field)));
    bson_iter_recurse(field, &r);
    while (bson_iter_next(&r)) {
        user_ref_t ref;
        if (!BSON_ITER_HOLDS_UTF8(&r) && !BSON_ITER_HOLDS_DOCUMENT(&r))
            return mf_err_set(&op->err, MF_E_BadValue, "Role name must be either a document or string");
        if (parse_auth_name(op, &r, "RoleName", "role", false, &ref) != 0)
            return -1;
    }
    bson_iter_recurse(field, &r);
    while (bson_iter_next(&r)) {
        user_ref_t ref;
        const char *role, *db;
        if (parse_auth_name(op, &r, "RoleName", "role", false, &ref) != 0)
            return -1;
        role = ref.user;
        db = ref.db;
        if (must_exist && !role_exists(op, role, db))
            return mf_err_set(&op->err, MF_E_RoleNotFound, "Could not find role: %s@%s", role, db);
        if (role_in(out, role, db))
            continue; /* the same role twice is kept once */
        char key[16];
        const char *kp;
        bson_t one;
        bson_uint32_to_string(n++, &kp, key, sizeof(key));
        BSON_APPEND_DOCUMENT_BEGIN(out, kp, &one);
        BSON_APPEND_UTF8(&one, "role", role);
        BSON_APPEND_UTF8(&one, "db", db);
        bson_append_document_end(out, &one);
    }
    return 0;
}

/* A roles field naming roles that exist (built-in, not __system, or user-defined), once each, as {role, db}. */
static int
parse_roles(mf_op_t *op, const bson_iter_t *field, bson_t *out)
{
    return parse_roles_as(op, field, true, out);
}

/* The mechanisms field of createUser/updateUser (MF_MECH_*). */
static int
parse_mechs(mf_op_t *op, unsigned *mechs)
{
    bson_iter_t it, m;
    *mechs = MF_MECH_SHA1 | MF_MECH_SHA256;
    if (!mf_op_find(op, "mechanisms", &it))
        return 0;
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.mechanisms' is the wrong type '%s', expected type 'array'",
                          op->name, mf_type_name(bson_iter_type(&it)));
    *mechs = 0;
    bson_iter_recurse(&it, &m);
    while (bson_iter_next(&m)) {
        const char *s = BSON_ITER_HOLDS_UTF8(&m) ? bson_iter_utf8(&m, NULL) : "";
        if (strcmp(s, "SCRAM-SHA-1") == 0)
            *mechs |= MF_MECH_SHA1;
        else if (strcmp(s, "SCRAM-SHA-256") == 0)
            *mechs |= MF_MECH_SHA256;
        else
            return mf_err_set(&op->err, MF_E_BadValue, "Unknown auth mechanism '%s'", s);
    }
    if (*mechs == 0)
        return mf_err_set(&op->err, MF_E_BadValue, "mechanisms field must not be empty");
    return 0;
}

/* The command's first field, a string (the user or role it names), into *name (valid while op->cmd lives). */
static int
name_arg(mf_op_t *op, const char **name)
{
    bson_iter_t it;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'string'",
                          op->name, mf_type_name(bson_iter_type(&it)));
    *name = bson_iter_utf8(&it, NULL);
    return 0;
}

static int
user_name_arg(mf_op_t *op, const char **name)
{
    if (name_arg(op, name) != 0)
        return -1;
    if ((*name)[0] == '\0')
        return mf_err_set(&op->err, MF_E_BadValue, "User document needs 'user' field to be non-empty");
    if (strcmp(op->db, "local") == 0)
        return mf_err_set(&op->err, MF_E_BadValue, "Cannot create users in the local database");
    return 0;
}

/* The pwd field: *pwd (valid while op->cmd lives) and its length in bytes (a BSON string may hold NULs). */
static int
password_arg(mf_op_t *op, const char **pwd, size_t *pwd_len, bool *present)
{
    bson_iter_t it;
    uint32_t len = 0;
    *present = mf_op_find(op, "pwd", &it);
    if (!*present)
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.pwd' is the wrong type '%s', expected type 'string'",
                          op->name, mf_type_name(bson_iter_type(&it)));
    *pwd = bson_iter_utf8(&it, &len);
    *pwd_len = len;
    if ((*pwd)[0] == '\0')
        return mf_err_set(&op->err, MF_E_BadValue, "Password cannot be empty");
    return 0;
}

/*
 * Builds a user document from parts: _id, userId, user, db, credentials,
 * customData, roles, authenticationRestrictions (only when there are some,
 * as mongod's createUser).
 */
static void
build_user(bson_t *doc, const char *db, const char *name, const uint8_t uuid[16], const bson_t *creds,
           const bson_t *custom, const bson_t *roles, const bson_t *restrictions)
{
    char id[512];
    snprintf(id, sizeof(id), "%s.%s", db, name);
    BSON_APPEND_UTF8(doc, "_id", id);
    bson_append_binary(doc, "userId", -1, BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_UTF8(doc, "user", name);
    BSON_APPEND_UTF8(doc, "db", db);
    if (creds != NULL)
        BSON_APPEND_DOCUMENT(doc, "credentials", creds);
    if (custom != NULL)
        BSON_APPEND_DOCUMENT(doc, "customData", custom);
    BSON_APPEND_ARRAY(doc, "roles", roles);
    if (restrictions != NULL && !bson_empty(restrictions))
        BSON_APPEND_ARRAY(doc, "authenticationRestrictions", restrictions);
}

static int restrictions_arg(mf_op_t *op, bson_t *out, bool *present);

/*
 * createUser's / updateUser's digestPassword (true by default): false says
 * pwd is already SCRAM-SHA-1's hex MD5 (*predigested), which SCRAM-SHA-256
 * cannot use (2 BadValue, as mongod). 0, or -1 with op->err.
 */
static int
digest_arg(mf_op_t *op, unsigned mechs, bool *predigested)
{
    bool digest = true, present = false;
    *predigested = false;
    if (mf_op_get_bool(op, "digestPassword", &digest, &present) != 0)
        return -1;
    if (!present || digest)
        return 0;
    if (mechs & MF_MECH_SHA256)
        return mf_err_set(&op->err, MF_E_BadValue, "Use of SCRAM-SHA-256 requires undigested passwords");
    *predigested = true;
    return 0;
}

static int
cmd_create_user(mf_op_t *op)
{
    const char *name, *pwd = NULL;
    size_t pwd_len = 0;
    bool has_pwd, has_custom;
    bson_iter_t it;
    bson_t roles = BSON_INITIALIZER, doc = BSON_INITIALIZER, creds_holder = BSON_INITIALIZER, custom, creds;
    bson_t restr = BSON_INITIALIZER;
    bool has_restr;
    unsigned mechs;
    uint8_t uuid[16];
    int rc = -1;

    if (user_name_arg(op, &name) != 0 || restrictions_arg(op, &restr, &has_restr) != 0 ||
        password_arg(op, &pwd, &pwd_len, &has_pwd) != 0 ||
        parse_mechs(op, &mechs) != 0 || mf_op_get_doc(op, "customData", &custom, &has_custom) != 0)
        goto done;
    if (!has_pwd && strcmp(op->db, "$external") != 0) {
        mf_err_set(&op->err, MF_E_BadValue,
                   "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db");
        goto done;
    }
    if (!mf_op_find(op, "roles", &it)) {
        mf_err_set(&op->err, MF_E_Location40414, "BSON field 'createUser.roles' is missing but a required field");
        goto done;
    }
    if (parse_roles(op, &it, &roles) != 0)
        goto done;
    bool predigested;
    if (digest_arg(op, mechs, &predigested) != 0 ||
        (has_pwd && mf_users_credentials(&creds_holder, op->eng->saslprep, name, pwd, pwd_len, mechs, predigested,
                                         &op->err) != 0))
        goto done;
    if (mf_scram_random(uuid, sizeof(uuid)) != 0) {
        mf_err_set(&op->err, MF_E_InternalError, "no random bytes for a user id");
        goto done;
    }
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
    bool have_creds = has_pwd && bson_iter_init_find(&it, &creds_holder, "credentials");
    if (have_creds) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&creds, data, len);
    }
    build_user(&doc, op->db, name, uuid, have_creds ? &creds : NULL, has_custom ? &custom : NULL, &roles, &restr);
    if (mf_users_insert(op->eng->cat, &doc, &op->err) != 0)
        goto done;
    mf_log(MF_LOG_INFO, "ACCESS", "created user %s@%s", name, op->db);
    rc = 0;
done:
    bson_destroy(&roles);
    bson_destroy(&doc);
    bson_destroy(&creds_holder);
    bson_destroy(&restr);
    return rc;
}

/* rewrite_user's callback state. */
typedef struct user_rewrite {
    mf_op_t *op;
    int (*change)(mf_op_t *op, const bson_t *old, bson_t *out, void *arg);
    void *arg;
} user_rewrite_t;

static int
user_rewrite_fn(void *arg, const bson_t *old, bson_t *out, mf_error_t *err)
{
    user_rewrite_t *u = arg;
    bson_iter_t it;
    (void)err; /* change reports through u->op->err, which is err */
    bson_iter_init(&it, old);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0 || strcmp(k, "userId") == 0 || strcmp(k, "user") == 0 || strcmp(k, "db") == 0)
            bson_append_value(out, k, -1, bson_iter_value(&it));
    }
    return u->change(u->op, old, out, u->arg);
}

/*
 * Rewrites user name@op->db in one transaction (mf_users_rewrite, so a
 * concurrent change is never lost): change(op, old, new, arg) appends every
 * field of the new document but _id, userId, user, db (which are kept).
 */
static int
rewrite_user(mf_op_t *op, const char *name, int (*change)(mf_op_t *op, const bson_t *old, bson_t *out, void *arg),
             void *arg)
{
    user_rewrite_t u = {op, change, arg};
    return mf_users_rewrite(op->eng->cat, op->db, name, user_rewrite_fn, &u, &op->err);
}

/* Copies field k of old into out unless the command replaces it. */
static void
keep_field(const bson_t *old, bson_t *out, const char *k)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, old, k))
        bson_append_value(out, k, -1, bson_iter_value(&it));
}

/*
 * updateUser's change: the user's name, and its new roles and
 * authenticationRestrictions parsed before the rewrite (NULL: kept; an
 * empty restrictions list removes the field, as mongod's $unset).
 */
typedef struct update_args {
    const char *name;
    const bson_t *roles;
    const bson_t *restrictions;
} update_args_t;

/* Whether user has the credential at path ("credentials.SCRAM-SHA-1" ...). */
static bool
has_credential(const bson_t *user, const char *path)
{
    bson_iter_t it, d;
    return bson_iter_init(&it, user) && bson_iter_find_descendant(&it, path, &d);
}

static int
update_change(mf_op_t *op, const bson_t *old, bson_t *out, void *arg)
{
    const update_args_t *ua = arg;
    const char *name = ua->name;
    const char *pwd = NULL;
    size_t pwd_len = 0;
    bool has_pwd, has_custom, mechs_given;
    unsigned mechs;
    bson_t custom;
    bson_iter_t it;
    int rc = -1;

    mechs_given = mf_op_has(op, "mechanisms");
    if (password_arg(op, &pwd, &pwd_len, &has_pwd) != 0 || parse_mechs(op, &mechs) != 0 ||
        mf_op_get_doc(op, "customData", &custom, &has_custom) != 0)
        goto done;
    if (mechs_given && !has_pwd) {
        /*
         * Restricting mechanisms without a new password: keep only those credentials, each of
         * which the user must have (mongod's trimCredentials), so no user is left without any.
         */
        bson_t creds;
        bson_iter_t c;
        if (!bson_iter_init_find(&it, old, "credentials") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mf_err_set(&op->err, MF_E_UnsupportedFormat, "Unable to trim credentials from a user document with no credentials");
            goto done;
        }
        if (((mechs & MF_MECH_SHA1) && !has_credential(old, "credentials.SCRAM-SHA-1")) ||
            ((mechs & MF_MECH_SHA256) && !has_credential(old, "credentials.SCRAM-SHA-256"))) {
            mf_err_set(&op->err, MF_E_BadValue, "mechanisms field must be a subset of previously set mechanisms");
            goto done;
        }
        BSON_APPEND_DOCUMENT_BEGIN(out, "credentials", &creds);
        if (bson_iter_init_find(&it, old, "credentials") && bson_iter_recurse(&it, &c)) {
            while (bson_iter_next(&c)) {
                const char *k = bson_iter_key(&c);
                if ((strcmp(k, "SCRAM-SHA-1") == 0 && (mechs & MF_MECH_SHA1)) ||
                    (strcmp(k, "SCRAM-SHA-256") == 0 && (mechs & MF_MECH_SHA256)))
                    bson_append_value(&creds, k, -1, bson_iter_value(&c));
            }
        }
        bson_append_document_end(out, &creds);
    } else if (has_pwd) {
        bool predigested;
        if (digest_arg(op, mechs, &predigested) != 0 ||
            mf_users_credentials(out, op->eng->saslprep, name, pwd, pwd_len, mechs, predigested, &op->err) != 0)
            goto done;
    } else {
        keep_field(old, out, "credentials");
    }
    if (has_custom)
        BSON_APPEND_DOCUMENT(out, "customData", &custom);
    else
        keep_field(old, out, "customData");
    if (ua->roles != NULL)
        BSON_APPEND_ARRAY(out, "roles", ua->roles);
    else
        keep_field(old, out, "roles");
    if (ua->restrictions == NULL)
        keep_field(old, out, "authenticationRestrictions");
    else if (!bson_empty(ua->restrictions))
        BSON_APPEND_ARRAY(out, "authenticationRestrictions", ua->restrictions);
    rc = 0;
done:
    return rc;
}

static int
cmd_update_user(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    bson_t roles = BSON_INITIALIZER, restr = BSON_INITIALIZER;
    bool has_restr;
    update_args_t ua = {NULL, NULL, NULL};
    int rc = -1;
    if (user_name_arg(op, &name) != 0 || restrictions_arg(op, &restr, &has_restr) != 0)
        goto done;
    if (has_restr)
        ua.restrictions = &restr;
    if (!mf_op_has(op, "pwd") && !mf_op_has(op, "roles") && !mf_op_has(op, "customData") &&
        !mf_op_has(op, "mechanisms") && !has_restr) {
        mf_err_set(&op->err, MF_E_BadValue, "Must specify at least one field to update in updateUser");
        goto done;
    }
    /* Before the rewrite: the roles' existence is read outside its transaction (no storage reads inside). */
    if (mf_op_find(op, "roles", &it)) {
        if (parse_roles(op, &it, &roles) != 0)
            goto done;
        ua.roles = &roles;
    }
    ua.name = name;
    rc = rewrite_user(op, name, update_change, &ua);
done:
    bson_destroy(&roles);
    bson_destroy(&restr);
    return rc;
}

typedef struct grant_args {
    bson_t *roles; /* parsed {role, db} array */
    bool revoke;
} grant_args_t;

static bool
role_in(const bson_t *arr, const char *role, const char *db)
{
    bson_iter_t it;
    bson_iter_init(&it, arr);
    while (bson_iter_next(&it)) {
        const char *r, *d;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && name_of(&it, "role", NULL, &r, &d, NULL) && d != NULL &&
            strcmp(r, role) == 0 && strcmp(d, db) == 0)
            return true;
    }
    return false;
}

/* Appends to roles (at *n) old's roles array, minus those revoked, then those granted that it does not hold. */
static void
grant_roles(const grant_args_t *ga, const bson_iter_t *old_roles, bson_t *roles, uint32_t *n)
{
    bson_iter_t r;
    bson_t oldarr;
    bool have_old = false;
    char key[16];
    const char *kp;
    if (old_roles != NULL && BSON_ITER_HOLDS_ARRAY(old_roles)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_array(old_roles, &len, &data);
        have_old = bson_init_static(&oldarr, data, len);
    }
    /* The old roles, minus the revoked ones. */
    if (have_old && bson_iter_init(&r, &oldarr)) {
        while (bson_iter_next(&r)) {
            const char *role, *db;
            if (!BSON_ITER_HOLDS_DOCUMENT(&r) || !name_of(&r, "role", NULL, &role, &db, NULL) || db == NULL ||
                (ga->revoke && role_in(ga->roles, role, db)))
                continue;
            bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
            bson_append_value(roles, kp, -1, bson_iter_value(&r));
        }
    }
    /* The granted ones not held yet. */
    if (!ga->revoke && bson_iter_init(&r, ga->roles)) {
        while (bson_iter_next(&r)) {
            const char *role, *db;
            if (!name_of(&r, "role", NULL, &role, &db, NULL) || db == NULL || (have_old && role_in(&oldarr, role, db)))
                continue;
            bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
            bson_append_value(roles, kp, -1, bson_iter_value(&r));
        }
    }
}

/*
 * grantRolesToUser / revokeRolesFromUser's change: mongod's {$set: {roles}}
 * on the user document, so every other field (credentials, customData,
 * authenticationRestrictions, anything else) stays as it was, where it was.
 */
static int
grant_change(mf_op_t *op, const bson_t *old, bson_t *out, void *arg)
{
    grant_args_t *ga = arg;
    bson_iter_t it;
    bson_t roles;
    uint32_t n = 0;
    bool had_roles = false;
    (void)op;
    bson_iter_init(&it, old);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0 || strcmp(k, "userId") == 0 || strcmp(k, "user") == 0 || strcmp(k, "db") == 0)
            continue; /* user_rewrite_fn's */
        if (strcmp(k, "roles") != 0) {
            bson_append_value(out, k, -1, bson_iter_value(&it));
            continue;
        }
        had_roles = true;
        BSON_APPEND_ARRAY_BEGIN(out, "roles", &roles);
        grant_roles(ga, &it, &roles, &n);
        bson_append_array_end(out, &roles);
    }
    if (!had_roles) {
        BSON_APPEND_ARRAY_BEGIN(out, "roles", &roles);
        grant_roles(ga, NULL, &roles, &n);
        bson_append_array_end(out, &roles);
    }
    return 0;
}

static int
cmd_grant_revoke(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    bson_t roles = BSON_INITIALIZER;
    grant_args_t ga = {&roles, strcmp(op->name, "revokeRolesFromUser") == 0};
    int rc = -1;
    if (user_name_arg(op, &name) != 0)
        goto done;
    if (!mf_op_find(op, "roles", &it)) {
        mf_err_set(&op->err, MF_E_Location40414, "BSON field '%s.roles' is missing but a required field", op->name);
        goto done;
    }
    if (parse_roles(op, &it, &roles) != 0)
        goto done;
    if (bson_empty(&roles)) {
        mf_err_set(&op->err, MF_E_BadValue, "%s command requires a non-empty \"roles\" array", op->name);
        goto done;
    }
    rc = rewrite_user(op, name, grant_change, &ga);
done:
    bson_destroy(&roles);
    return rc;
}

static int
cmd_drop_user(mf_op_t *op)
{
    const char *name;
    if (user_name_arg(op, &name) != 0)
        return -1;
    if (mf_users_remove(op->eng->cat, op->db, name, &op->err) != 0)
        return -1;
    mf_log(MF_LOG_INFO, "ACCESS", "dropped user %s@%s", name, op->db);
    return 0;
}

/* The names (field key: "user", "role") of the documents an mf_users_each / mf_roles_each walk meets. */
typedef struct name_list {
    const char *key;
    char **v;
    size_t n, cap;
} name_list_t;

static int
collect_name(void *arg, const bson_t *doc)
{
    name_list_t *l = arg;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, l->key) || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = mf_realloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = mf_strdup(bson_iter_utf8(&it, NULL));
    return 0;
}

static int
cmd_drop_all_users(mf_op_t *op)
{
    name_list_t l = {"user", NULL, 0, 0};
    int rc = mf_users_each(op->eng->cat, op->db, collect_name, &l, &op->err);
    int32_t n = 0;
    for (size_t i = 0; i < l.n; i++) {
        mf_error_t err;
        if (rc == 0 && mf_users_remove(op->eng->cat, op->db, l.v[i], &err) == 0)
            n++;
        free(l.v[i]);
    }
    free(l.v);
    if (rc != 0)
        return -1;
    BSON_APPEND_INT32(op->reply, "n", n);
    return 0;
}

/*
 * usersInfo's view of a user document. Without detail, mongod's pipeline
 * over system.users: the document without authenticationRestrictions,
 * without credentials unless showCredentials, without customData when
 * showCustomData is false, then mechanisms (its credentials' names) last;
 * the filter matches that view, and the users come sorted by user, then db.
 * With showPrivileges or showAuthenticationRestrictions (detail), mongod's
 * getUserDescription shape, one per name asked for, in the order asked: the
 * mechanisms where the credentials were, the user's own
 * authenticationRestrictions (as stored, [] without; only when asked for),
 * then inheritedRoles, inheritedPrivileges and
 * inheritedAuthenticationRestrictions (its roles' lists, resolved).
 */
typedef struct users_out {
    bool show_credentials, show_custom;
    bool detail, show_restrictions;
    mf_op_t *op;
    const mf_matcher_t *filter; /* NULL: every user */
    bson_t **docs;              /* without detail: the views listed, each owned */
    size_t n, cap;
} users_out_t;

static void inherit_walk(mf_op_t *op, const bson_t *role_doc, bson_t *names, uint32_t *n, bson_t *privs,
                         role_seen_t *seen, bson_t *restr, uint32_t *nr);

static void
append_mechanisms(bson_t *one, const bson_t *user)
{
    bson_t mechs;
    bson_iter_t it, c;
    char key[16];
    const char *kp;
    uint32_t m = 0;
    BSON_APPEND_ARRAY_BEGIN(one, "mechanisms", &mechs);
    if (bson_iter_init_find(&it, user, "credentials") && bson_iter_recurse(&it, &c)) {
        while (bson_iter_next(&c)) {
            bson_uint32_to_string(m++, &kp, key, sizeof(key));
            BSON_APPEND_UTF8(&mechs, kp, bson_iter_key(&c));
        }
    }
    bson_append_array_end(one, &mechs);
}

/* Appends user's detailed description (showPrivileges / showAuthenticationRestrictions) as the (*n)++-th element of arr. */
static void
append_user_detail(users_out_t *uo, const bson_t *user, bson_t *arr, uint32_t *n)
{
    bson_t one, names, privs = BSON_INITIALIZER, restr = BSON_INITIALIZER, empty;
    bson_iter_t it;
    char key[16];
    const char *kp;
    bool had_restr = false;
    uint32_t nn = 0, nr = 0;
    role_seen_t *seen = mf_calloc(1, sizeof(*seen));
    bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(arr, kp, &one);
    bson_iter_init(&it, user);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "credentials") == 0)
            append_mechanisms(&one, user);
        if (strcmp(k, "authenticationRestrictions") == 0) {
            had_restr = true;
            if (!uo->show_restrictions)
                continue;
        }
        if ((strcmp(k, "credentials") == 0 && !uo->show_credentials) || (strcmp(k, "customData") == 0 && !uo->show_custom))
            continue;
        bson_append_value(&one, k, -1, bson_iter_value(&it));
    }
    if (uo->show_restrictions && !had_restr) {
        BSON_APPEND_ARRAY_BEGIN(&one, "authenticationRestrictions", &empty);
        bson_append_array_end(&one, &empty);
    }
    BSON_APPEND_ARRAY_BEGIN(&one, "inheritedRoles", &names);
    inherit_walk(uo->op, user, &names, &nn, &privs, seen, &restr, &nr);
    bson_append_array_end(&one, &names);
    BSON_APPEND_ARRAY(&one, "inheritedPrivileges", &privs);
    BSON_APPEND_ARRAY(&one, "inheritedAuthenticationRestrictions", &restr);
    bson_append_document_end(arr, &one);
    bson_destroy(&privs);
    bson_destroy(&restr);
    seen_free(seen);
}

/* mf_users_each's callback without detail: lists user's view when the filter matches it. */
static int
each_user_view(void *arg, const bson_t *user)
{
    users_out_t *uo = arg;
    bson_t *view = bson_new();
    bson_iter_t it;
    bson_iter_init(&it, user);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "authenticationRestrictions") == 0 || (strcmp(k, "credentials") == 0 && !uo->show_credentials) ||
            (strcmp(k, "customData") == 0 && !uo->show_custom))
            continue;
        bson_append_value(view, k, -1, bson_iter_value(&it));
    }
    append_mechanisms(view, user);
    if (uo->filter != NULL && !mf_matcher_match(uo->filter, view, NULL)) {
        bson_destroy(view);
        return 0;
    }
    if (uo->n == uo->cap) {
        uo->cap = uo->cap ? uo->cap * 2 : 16;
        uo->docs = mf_realloc(uo->docs, uo->cap * sizeof(*uo->docs));
    }
    uo->docs[uo->n++] = view;
    return 0;
}

/* A string field of a user view ("" when it has none). */
static const char *
view_str(const bson_t *view, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, view, key) && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
}

/* mongod's {$sort: {user: 1, db: 1}}: a user name's order, then its database's. */
static int
view_cmp(const void *a, const void *b)
{
    const bson_t *x = *(const bson_t *const *)a, *y = *(const bson_t *const *)b;
    int c = strcmp(view_str(x, "user"), view_str(y, "user"));
    return c != 0 ? c : strcmp(view_str(x, "db"), view_str(y, "db"));
}

/*
 * One name of usersInfo's or rolesInfo's argument: a string (a user or role
 * of op->db) or a document parsed as mongod's
 * AuthName<T>::parseFromBSONObj: key ("user" or "role") and db strings, both
 * required, an optional tenant ObjectId, and for a UserName (strict) nothing
 * else; kind is "UserName" or "RoleName" for the messages. 0, or -1 with
 * op->err: 2 BadValue and mongod's messages.
 */
static int
parse_auth_name(mf_op_t *op, const bson_iter_t *it, const char *kind, const char *key, bool strict, user_ref_t *out)
{
    bson_iter_t f;
    bool seen_name = false, seen_db = false, seen_tenant = false;
    out->user = NULL;
    out->db = op->db;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        out->user = bson_iter_utf8(it, NULL);
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f))
        return mf_err_set(&op->err, MF_E_BadValue, "%s must be either a string or an object", kind);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        bool *seen;
        bson_type_t want = BSON_TYPE_UTF8;
        if (strcmp(k, key) == 0) {
            seen = &seen_name;
        } else if (strcmp(k, "db") == 0) {
            seen = &seen_db;
        } else if (strcmp(k, "tenant") == 0) {
            seen = &seen_tenant;
            want = BSON_TYPE_OID;
        } else if (strict) {
            /* mongod's message, its unclosed quote included. */
            return mf_err_set(&op->err, MF_E_BadValue, "%s contains an unknown field named: '%s", kind, k);
        } else {
            continue;
        }
        if (bson_iter_type(&f) != want)
            return mf_err_set(&op->err, MF_E_BadValue, "%s must contain a %s field named: %s. But, has type %s", kind,
                              mf_type_name(want), k, mf_type_name(bson_iter_type(&f)));
        if (*seen)
            return mf_err_set(&op->err, MF_E_BadValue, "%s has more than one field named: %s", kind, k);
        *seen = true;
        if (seen == &seen_name)
            out->user = bson_iter_utf8(&f, NULL);
        else if (seen == &seen_db)
            out->db = bson_iter_utf8(&f, NULL);
    }
    if (!seen_name)
        return mf_err_set(&op->err, MF_E_BadValue, "%s must contain a field named: %s", kind, key);
    if (!seen_db)
        return mf_err_set(&op->err, MF_E_BadValue, "%s must contain a field named: db", kind);
    return 0;
}

/* usersInfo's names: mongod's strict UserName. */
static int
parse_user_ref(mf_op_t *op, const bson_iter_t *it, user_ref_t *out)
{
    return parse_auth_name(op, it, "UserName", "user", true, out);
}

/* Whether it is a number whose safeNumberLong (truncated toward zero) is 1, as mongod's UMCInfoCommandArg asks. */
static bool
safe_long_is_one(const bson_iter_t *it)
{
    if (BSON_ITER_HOLDS_DOUBLE(it)) {
        double d = bson_iter_double(it);
        return d >= 1.0 && d < 2.0;
    }
    if (BSON_ITER_HOLDS_DECIMAL128(it)) {
        double d = mf_value_as_double(bson_iter_value((bson_iter_t *)it));
        return d >= 1.0 && d < 2.0;
    }
    return (BSON_ITER_HOLDS_INT32(it) || BSON_ITER_HOLDS_INT64(it)) && bson_iter_as_int64(it) == 1;
}

/*
 * usersInfo's argument, as mongod's UMCInfoCommandArg: a number equal to 1
 * (after truncation, safeNumberLong) is every user of op->db, a document
 * whose forAllDBs is true every user; anything else names users exactly
 * (*refs, *nrefs; an array of names, or one). *all_db / *all_dbs tell the
 * two wildcard forms. *refs is malloc'ed (free() it), views into the
 * command. 0, or -1 with op->err.
 */
static int
parse_users_arg(mf_op_t *op, bool *all_db, bool *all_dbs, user_ref_t **refs, size_t *nrefs)
{
    bson_iter_t it, a;
    *all_db = *all_dbs = false;
    *refs = NULL;
    *nrefs = 0;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (safe_long_is_one(&it)) {
        *all_db = true;
        return 0;
    }
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &a) && bson_iter_find(&a, "forAllDBs") &&
        bson_iter_as_bool(&a)) {
        *all_dbs = true;
        return 0;
    }
    if (!BSON_ITER_HOLDS_ARRAY(&it)) {
        *refs = mf_calloc(1, sizeof(**refs));
        *nrefs = 1;
        return parse_user_ref(op, &it, &(*refs)[0]);
    }
    bson_iter_recurse(&it, &a);
    while (bson_iter_next(&a)) {
        *refs = mf_realloc(*refs, (*nrefs + 1) * sizeof(**refs));
        if (parse_user_ref(op, &a, &(*refs)[(*nrefs)++]) != 0)
            return -1;
    }
    return 0;
}

static int
cmd_users_info(mf_op_t *op)
{
    bson_t arr, filter_doc;
    users_out_t uo = {false, true, false, false, op, NULL, NULL, 0, 0}; /* showCustomData defaults to true */
    bool present, custom_given, show_privs = false, has_filter = false, all_db, all_dbs;
    user_ref_t *refs = NULL;
    size_t nrefs = 0;
    mf_matcher_t *filter = NULL;
    uint32_t n = 0;
    int rc = -1;

    bson_init(&arr);
    if (mf_op_get_bool(op, "showCredentials", &uo.show_credentials, &present) != 0 ||
        mf_op_get_bool(op, "showCustomData", &uo.show_custom, &custom_given) != 0 ||
        mf_op_get_bool(op, "showPrivileges", &show_privs, &present) != 0 ||
        mf_op_get_bool(op, "showAuthenticationRestrictions", &uo.show_restrictions, &present) != 0 ||
        mf_op_get_doc(op, "filter", &filter_doc, &has_filter) != 0 ||
        parse_users_arg(op, &all_db, &all_dbs, &refs, &nrefs) != 0)
        goto done;
    uo.detail = show_privs || uo.show_restrictions;
    /* Details are resolved per user: mongod takes them only for users named exactly. */
    if (uo.detail && (has_filter || all_db || all_dbs)) {
        mf_err_set(&op->err, MF_E_IllegalOperation, "Privilege or restriction details require exact-match usersInfo queries");
        goto done;
    }
    if (all_dbs && checked(op)) {
        /* Every database's users: user administration on every database. */
        const mf_privs_t *p = privs_of(op);
        if (p == NULL || !((p->all | p->any) & MF_ACT_VIEW_USER)) {
            rc = denied(op, op->db, op->name);
            goto done;
        }
    }
    if (uo.detail) {
        for (size_t i = 0; i < nrefs; i++) {
            bson_t user;
            int got = mf_users_get(op->eng->cat, refs[i].db, refs[i].user, &user, &op->err);
            if (got == -1)
                goto done;
            if (got == 0) {
                append_user_detail(&uo, &user, &arr, &n);
                bson_destroy(&user);
            }
        }
    } else {
        if (has_filter && (filter = mf_matcher_new(&filter_doc, &op->err)) == NULL)
            goto done;
        uo.filter = filter;
        if (all_db || all_dbs) {
            if (mf_users_each(op->eng->cat, all_db ? op->db : NULL, each_user_view, &uo, &op->err) != 0)
                goto done;
        }
        for (size_t i = 0; i < nrefs; i++) {
            bool again = false; /* mongod's $or matches a user once, however often it is named */
            bson_t user;
            int got;
            for (size_t j = 0; j < i && !again; j++)
                again = strcmp(refs[j].user, refs[i].user) == 0 && strcmp(refs[j].db, refs[i].db) == 0;
            if (again)
                continue;
            if ((got = mf_users_get(op->eng->cat, refs[i].db, refs[i].user, &user, &op->err)) == -1)
                goto done;
            if (got == 0) {
                each_user_view(&uo, &user);
                bson_destroy(&user);
            }
        }
        if (mf_matcher_take_failure(&op->err))
            goto done;
        if (uo.n > 1) /* docs is NULL when nothing was listed, which qsort may not take */
            qsort(uo.docs, uo.n, sizeof(*uo.docs), view_cmp);
        for (size_t i = 0; i < uo.n; i++) {
            char key[16];
            const char *kp;
            bson_uint32_to_string(n++, &kp, key, sizeof(key));
            BSON_APPEND_DOCUMENT(&arr, kp, uo.docs[i]);
        }
    }
    BSON_APPEND_ARRAY(op->reply, "users", &arr);
    rc = 0;
done:
    for (size_t i = 0; i < uo.n; i++)
        bson_destroy(uo.docs[i]);
    free(uo.docs);
    free(refs);
    if (filter != NULL)
        mf_matcher_free(filter);
    if (has_filter)
        bson_destroy(&filter_doc);
    bson_destroy(&arr);
    return rc;
}

/* ---------- user-defined roles ---------- */

/*
 * authenticationRestrictions of createUser, updateUser, createRole and
 * updateRole: *present tells whether the command has the field; when it
 * does, out (an empty bson_t) receives its sanitized array
 * (mf_restrictions_parse: mongod's checks, codes and messages). They are
 * enforced at authentication (load_privs). 0, or -1 with op->err.
 */
static int
restrictions_arg(mf_op_t *op, bson_t *out, bool *present)
{
    bson_iter_t it;
    *present = mf_op_find(op, "authenticationRestrictions", &it);
    if (!*present)
        return 0;
    return mf_restrictions_parse(&it, op->name, out, &op->err);
}

/* The role named by the command's first field (createRole: "name" ...), on op->db. */
static int
role_name_arg(mf_op_t *op, const char **name)
{
    if (name_arg(op, name) != 0)
        return -1;
    if ((*name)[0] == '\0')
        return mf_err_set(&op->err, MF_E_BadValue, "Role name must be non-empty");
    if (strlen(*name) >= 256)
        return mf_err_set(&op->err, MF_E_BadValue, "Role name must be shorter than 256 bytes");
    if (strcmp(op->name, "createRole") == 0 && (strcmp(op->db, "local") == 0 || strcmp(op->db, "$external") == 0))
        return mf_err_set(&op->err, MF_E_BadValue, "Cannot create roles in the %s database", op->db);
    return 0;
}

/* Action names in MongoDB's order (its ActionSet's: action_type.idl's); unknown names last, alphabetically. */
static int
action_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int ix = mf_action_lookup(x, NULL, NULL), iy = mf_action_lookup(y, NULL, NULL);
    if (ix < 0 && iy < 0)
        return strcmp(x, y);
    if (ix < 0 || iy < 0)
        return ix < 0 ? 1 : -1;
    return ix - iy;
}

/* As mongod's ActionSet: a set holding anyAction is anyAction alone. */
static void
collapse_any(const char **names, size_t *n)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(names[i], "anyAction") == 0) {
            names[0] = names[i];
            *n = 1;
            return;
        }
    }
}

#define ACTIONS_MAX 256 /* more than MongoDB's ~175 action types */

/* Adds action a to names (*n of them, at most ACTIONS_MAX) unless it is there already. */
static void
add_action(const char **names, size_t *n, const char *a)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(names[i], a) == 0)
            return;
    if (*n < ACTIONS_MAX)
        names[(*n)++] = a;
}

/* Appends names (n of them) as the "actions" array of p. */
static void
append_actions(bson_t *p, const char *const *names, size_t n)
{
    bson_t a;
    BSON_APPEND_ARRAY_BEGIN(p, "actions", &a);
    for (size_t i = 0; i < n; i++) {
        char key[16];
        const char *kp;
        bson_uint32_to_string((uint32_t)i, &kp, key, sizeof(key));
        bson_append_utf8(&a, kp, -1, names[i], -1);
    }
    bson_append_array_end(p, &a);
}

/* Appends {resource: res, actions: names as mongod stores them} to the array out, as its (*n)++-th element. */
static void
append_privilege(bson_t *out, uint32_t *n, const bson_t *res, const char **names, size_t nn)
{
    char key[16];
    const char *kp;
    bson_t p;
    collapse_any(names, &nn);
    qsort(names, nn, sizeof(names[0]), action_cmp);
    bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(out, kp, &p);
    BSON_APPEND_DOCUMENT(&p, "resource", res);
    append_actions(&p, names, nn);
    bson_append_document_end(out, &p);
}

/*
 * Parses one privilege {resource, actions} of a role on role_db into out as
 * mongod stores it ({resource: {db, collection} | {cluster: true} |
 * {anyResource: true}, actions: [sorted, once each]}). Errors as mongod's
 * ParsedPrivilege.
 */
static int
parse_privilege(mf_op_t *op, const bson_iter_t *pit, const char *role_db, bson_t *out)
{
    bson_iter_t f, res, act;
    bool has_res = false, has_actions = false, cluster = false, any = false, has_db = false, has_coll = false;
    const char *db = NULL, *coll = NULL, *names[ACTIONS_MAX];
    size_t n = 0;

    if (!BSON_ITER_HOLDS_DOCUMENT(pit) || !bson_iter_recurse(pit, &f))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.privileges' is the wrong type '%s', expected type 'object'",
                          op->name, mf_type_name(bson_iter_type(pit)));
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "resource") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f) || !bson_iter_recurse(&f, &res))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field 'resource' is the wrong type '%s', expected type 'object'",
                                  mf_type_name(bson_iter_type(&f)));
            has_res = true;
            /* Privilege::resolvePrivilegeWithTenant's checks, in its order: cluster, anyResource, db, collection. */
            while (bson_iter_next(&res)) {
                const char *rk = bson_iter_key(&res);
                if (strcmp(rk, "cluster") == 0 || strcmp(rk, "anyResource") == 0) {
                    if (!BSON_ITER_HOLDS_BOOL(&res))
                        return mf_err_set(&op->err, MF_E_TypeMismatch,
                                          "BSON field 'resource.%s' is the wrong type '%s', expected type 'bool'", rk,
                                          mf_type_name(bson_iter_type(&res)));
                    if (!bson_iter_bool(&res))
                        return mf_err_set(&op->err, MF_E_BadValue, "resource: {%s: false} must be true", rk);
                    *(rk[0] == 'c' ? &cluster : &any) = true;
                } else if (strcmp(rk, "db") == 0 || strcmp(rk, "collection") == 0) {
                    if (!BSON_ITER_HOLDS_UTF8(&res))
                        return mf_err_set(&op->err, MF_E_TypeMismatch,
                                          "BSON field 'resource.%s' is the wrong type '%s', expected type 'string'", rk,
                                          mf_type_name(bson_iter_type(&res)));
                    if (rk[0] == 'd') {
                        db = bson_iter_utf8(&res, NULL);
                        has_db = true;
                    } else {
                        coll = bson_iter_utf8(&res, NULL);
                        has_coll = true;
                    }
                }
                /* Other fields are ignored, as the non-strict IDL struct's. */
            }
        } else if (strcmp(k, "actions") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&f) || !bson_iter_recurse(&f, &act))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field 'actions' is the wrong type '%s', expected type 'array'",
                                  mf_type_name(bson_iter_type(&f)));
            has_actions = true;
            while (bson_iter_next(&act)) {
                if (!BSON_ITER_HOLDS_UTF8(&act))
                    return mf_err_set(&op->err, MF_E_TypeMismatch,
                                      "BSON field 'actions' is the wrong type '%s', expected type 'string'",
                                      mf_type_name(bson_iter_type(&act)));
                add_action(names, &n, bson_iter_utf8(&act, NULL));
            }
        }
        /* Other fields are ignored, as the non-strict IDL struct's. */
    }
    if (!has_res)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'privileges.resource' is missing but a required field");
    if (!has_actions)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'privileges.actions' is missing but a required field");
    if (cluster || any) {
        const char *other = cluster && any ? "anyResource" : has_db ? "db" : has_coll ? "collection" : NULL;
        if (other != NULL)
            return mf_err_set(&op->err, MF_E_BadValue, "resource: {%s: true} conflicts with resource type '%s'",
                              cluster ? "cluster" : "anyResource", other);
    } else if (has_coll && !has_db) {
        return mf_err_set(&op->err, MF_E_BadValue, "resource {collection: '%s'} must include 'db' field as well", coll);
    } else if (!has_coll) {
        return mf_err_set(&op->err, MF_E_BadValue, "resource pattern must contain 'collection' or 'systemBuckets' specifier");
    }
    if (n == 0)
        return mf_err_set(&op->err, MF_E_BadValue, "'actions' field of privilege resource must not be empty");
    /* Unknown actions, named once each and sorted, as mongod's ActionSet::parseFromStringVector. */
    qsort(names, n, sizeof(names[0]), action_cmp);
    size_t first_unknown = n;
    for (size_t i = 0; i < n && first_unknown == n; i++)
        if (mf_action_lookup(names[i], NULL, NULL) < 0)
            first_unknown = i;
    if (first_unknown < n) {
        char list[400];
        size_t len = 0;
        list[0] = '\0';
        for (size_t i = first_unknown; i < n && len < sizeof(list); i++)
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s'%s'", i > first_unknown ? ", " : "", names[i]);
        return mf_err_set(&op->err, MF_E_BadValue, "Unknown action type%s in privilege set: %s",
                          n - first_unknown > 1 ? "s" : "", list);
    }
    collapse_any(names, &n);
    /* A role outside admin acts on its own database only. */
    if (!cluster && !any && (strlen(db) >= sizeof(((mf_privilege_t *)0)->db) || strchr(db, '.') != NULL))
        return mf_err_set(&op->err, MF_E_BadValue, "'%s' is not a valid database name", db);
    if (!cluster && !any && strlen(coll) >= sizeof(((mf_privilege_t *)0)->coll))
        return mf_err_set(&op->err, MF_E_BadValue, "'%s' is not a valid collection name", coll);
    if (strcmp(role_db, "admin") != 0 && (cluster || any || strcmp(db, role_db) != 0))
        return mf_err_set(&op->err, MF_E_InvalidRoleModification,
                          "Roles on the '%s' database cannot be granted privileges that target other databases or the cluster",
                          role_db);
    bson_t r;
    BSON_APPEND_DOCUMENT_BEGIN(out, "resource", &r);
    if (cluster) {
        BSON_APPEND_BOOL(&r, "cluster", true);
    } else if (any) {
        BSON_APPEND_BOOL(&r, "anyResource", true);
    } else {
        BSON_APPEND_UTF8(&r, "db", db);
        BSON_APPEND_UTF8(&r, "collection", coll);
    }
    bson_append_document_end(out, &r);
    append_actions(out, names, n);
    return 0;
}

/* Whether two stored resource documents name the same resource. */
static bool
same_resource(const bson_t *a, const bson_t *b)
{
    return a->len == b->len && memcmp(bson_get_data(a), bson_get_data(b), a->len) == 0;
}

/* The resource document and actions array of a stored privilege (views into it). */
static bool
privilege_parts(const bson_iter_t *pit, bson_t *res, bson_t *acts)
{
    bson_iter_t f;
    const uint8_t *d;
    uint32_t len;
    bool r = false, a = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(pit) || !bson_iter_recurse(pit, &f))
        return false;
    while (bson_iter_next(&f)) {
        if (strcmp(bson_iter_key(&f), "resource") == 0 && BSON_ITER_HOLDS_DOCUMENT(&f)) {
            bson_iter_document(&f, &len, &d);
            r = bson_init_static(res, d, len);
        } else if (strcmp(bson_iter_key(&f), "actions") == 0 && BSON_ITER_HOLDS_ARRAY(&f)) {
            bson_iter_array(&f, &len, &d);
            a = bson_init_static(acts, d, len);
        }
    }
    return r && a;
}

/*
 * Merges the privileges of array arr (stored form) into the list *privs
 * (an array being rebuilt): with revoke, the actions of arr are taken out of
 * the same resource's privilege (one left with none is dropped); else they
 * are added to it (a new resource appended). out: the resulting array.
 */
static void
merge_privileges(const bson_t *old, const bson_t *arr, bool revoke, bson_t *out)
{
    bson_iter_t oi, ai;
    uint32_t n = 0;
    bson_t ores, oacts, ares, aacts;

    /* Each old privilege, with arr's actions on its resource added or removed. */
    bson_iter_init(&oi, old);
    while (bson_iter_next(&oi)) {
        if (!privilege_parts(&oi, &ores, &oacts))
            continue;
        const char *names[ACTIONS_MAX];
        size_t nn = 0;
        bson_iter_t x;
        bson_iter_init(&x, &oacts);
        while (bson_iter_next(&x))
            if (BSON_ITER_HOLDS_UTF8(&x))
                add_action(names, &nn, bson_iter_utf8(&x, NULL));
        bson_iter_init(&ai, arr);
        while (bson_iter_next(&ai)) {
            if (!privilege_parts(&ai, &ares, &aacts) || !same_resource(&ores, &ares))
                continue;
            bson_iter_init(&x, &aacts);
            while (bson_iter_next(&x)) {
                const char *a = bson_iter_utf8(&x, NULL);
                if (revoke) {
                    /* As mongod's ActionSet::removeAction: taking one action from anyAction leaves every other. */
                    if (nn == 1 && strcmp(names[0], "anyAction") == 0 && strcmp(a, "anyAction") != 0) {
                        nn = 0;
                        for (int k = 0; mf_action_name(k) != NULL && nn < ACTIONS_MAX; k++)
                            if (strcmp(mf_action_name(k), "anyAction") != 0)
                                names[nn++] = mf_action_name(k);
                    }
                    size_t i = 0;
                    while (i < nn) {
                        if (strcmp(names[i], a) == 0)
                            names[i] = names[--nn]; /* the last one moves here; look at it again */
                        else
                            i++;
                    }
                } else {
                    add_action(names, &nn, a);
                }
            }
        }
        if (nn > 0)
            append_privilege(out, &n, &ores, names, nn);
    }
    if (revoke)
        return;
    /* Granted privileges on resources the role had none on, in the order given (one per resource). */
    bson_iter_init(&ai, arr);
    int idx = 0;
    while (bson_iter_next(&ai)) {
        int my = idx++;
        if (!privilege_parts(&ai, &ares, &aacts))
            continue;
        bool known = false;
        bson_iter_init(&oi, old);
        while (!known && bson_iter_next(&oi))
            known = privilege_parts(&oi, &ores, &oacts) && same_resource(&ores, &ares);
        /* An earlier privilege of arr on the same resource already took this one's actions in below. */
        bson_iter_t bi;
        bson_iter_init(&bi, arr);
        for (int j = 0; !known && j < my && bson_iter_next(&bi);) {
            bson_t bres, bacts;
            known = privilege_parts(&bi, &bres, &bacts) && same_resource(&bres, &ares);
            j++;
        }
        if (known)
            continue;
        const char *names[ACTIONS_MAX];
        size_t nn = 0;
        bson_iter_init(&bi, arr);
        while (bson_iter_next(&bi)) {
            bson_t bres, bacts;
            if (!privilege_parts(&bi, &bres, &bacts) || !same_resource(&bres, &ares))
                continue;
            bson_iter_t x;
            bson_iter_init(&x, &bacts);
            while (bson_iter_next(&x))
                add_action(names, &nn, bson_iter_utf8(&x, NULL));
        }
        append_privilege(out, &n, &ares, names, nn);
    }
}

/* The command's privileges array, parsed for a role on op->db into out (stored form, merged per resource). */
static int
parse_privileges(mf_op_t *op, const bson_iter_t *field, bson_t *out)
{
    bson_iter_t p;
    bson_t parsed = BSON_INITIALIZER, empty = BSON_INITIALIZER;
    uint32_t n = 0;
    int rc = 0;
    if (!BSON_ITER_HOLDS_ARRAY(field)) {
        bson_destroy(&parsed);
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.privileges' is the wrong type '%s', expected type 'array'",
                          op->name, mf_type_name(bson_iter_type(field)));
    }
    bson_iter_recurse(field, &p);
    while (rc == 0 && bson_iter_next(&p)) {
        char key[16];
        const char *kp;
        bson_t one;
        bson_uint32_to_string(n++, &kp, key, sizeof(key));
        BSON_APPEND_DOCUMENT_BEGIN(&parsed, kp, &one);
        rc = parse_privilege(op, &p, op->db, &one);
        bson_append_document_end(&parsed, &one);
    }
    if (rc == 0)
        merge_privileges(&empty, &parsed, false, out);
    bson_destroy(&parsed);
    bson_destroy(&empty);
    return rc;
}

/*
 * Whether granting roles (a parsed {role, db} array) to role@db would make
 * a cycle: role@db itself is one of them or is inherited by one of them.
 */
static bool
role_reaches(mf_op_t *op, const char *role, const char *db, const char *target, const char *target_db,
             role_seen_t *seen)
{
    bson_t doc;
    bson_iter_t it, e;
    mf_error_t err;
    bool found = false;
    if (strcmp(role, target) == 0 && strcmp(db, target_db) == 0)
        return true;
    if (mf_role_exists(role, db) || seen_once(seen, role, db) || mf_roles_get(op->eng->cat, db, role, &doc, &err) != 0)
        return false;
    if (bson_iter_init_find(&it, &doc, "roles") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &e)) {
        while (!found && bson_iter_next(&e)) {
            const char *r, *d;
            if (BSON_ITER_HOLDS_DOCUMENT(&e) && name_of(&e, "role", NULL, &r, &d, NULL) && d != NULL)
                found = role_reaches(op, r, d, target, target_db, seen);
        }
    }
    bson_destroy(&doc);
    return found;
}

static int
check_no_cycle_self(mf_op_t *op, const char *role, const bson_t *roles)
{
    if (role_in(roles, role, op->db))
        return mf_err_set(&op->err, MF_E_InvalidRoleModification, "Cannot grant role %s@%s to itself.", role, op->db);
    return 0;
}

static int
check_no_cycle(mf_op_t *op, const char *role, const bson_t *roles)
{
    bson_iter_t it;
    bson_iter_init(&it, roles);
    while (bson_iter_next(&it)) {
        const char *r, *d;
        if (!name_of(&it, "role", NULL, &r, &d, NULL) || d == NULL)
            continue;
        role_seen_t *seen = mf_calloc(1, sizeof(*seen));
        bool cycle = role_reaches(op, r, d, role, op->db, seen);
        seen_free(seen);
        if (cycle)
            return mf_err_set(&op->err, MF_E_InvalidRoleModification,
                              "Granting roles to %s@%s would introduce a cycle in the role graph", role, op->db);
    }
    return 0;
}

/*
 * The roles granted to role name@op->db (createRole, updateRole,
 * grantRolesToRole), checked in mongod's order: none is the role itself, a
 * role outside admin inherits only its own database's roles, each exists
 * (31 "Cannot grant roles to ..."), and no cycle forms.
 */
static int check_role_dbs(mf_op_t *op, const bson_t *roles);

static int
parse_granted_roles(mf_op_t *op, const char *name, const bson_iter_t *field, bson_t *out)
{
    if (parse_roles_as(op, field, false, out) != 0 || check_no_cycle_self(op, name, out) != 0 ||
        check_role_dbs(op, out) != 0)
        return -1;
    bson_iter_t it;
    bson_iter_init(&it, out);
    while (bson_iter_next(&it)) {
        const char *r, *d;
        if (name_of(&it, "role", NULL, &r, &d, NULL) && d != NULL && !role_exists(op, r, d))
            return mf_err_set(&op->err, MF_E_RoleNotFound, "Cannot grant roles to '%s@%s': Could not find role: %s@%s",
                              name, op->db, r, d);
    }
    return check_no_cycle(op, name, out);
}

/* A role's roles must be on its own database, unless it is on admin (mongod's restriction). */
static int
check_role_dbs(mf_op_t *op, const bson_t *roles)
{
    bson_iter_t it;
    if (strcmp(op->db, "admin") == 0)
        return 0;
    bson_iter_init(&it, roles);
    while (bson_iter_next(&it)) {
        const char *r, *d;
        if (name_of(&it, "role", NULL, &r, &d, NULL) && d != NULL && strcmp(d, op->db) != 0)
            return mf_err_set(&op->err, MF_E_InvalidRoleModification,
                              "Roles on the '%s' database cannot be granted roles from other databases", op->db);
    }
    return 0;
}

static void
build_role(bson_t *doc, const char *db, const char *name, const bson_t *privileges, const bson_t *roles,
           const bson_t *restrictions)
{
    char id[512];
    snprintf(id, sizeof(id), "%s.%s", db, name);
    BSON_APPEND_UTF8(doc, "_id", id);
    BSON_APPEND_UTF8(doc, "role", name);
    BSON_APPEND_UTF8(doc, "db", db);
    BSON_APPEND_ARRAY(doc, "privileges", privileges);
    BSON_APPEND_ARRAY(doc, "roles", roles);
    if (restrictions != NULL && !bson_empty(restrictions))
        BSON_APPEND_ARRAY(doc, "authenticationRestrictions", restrictions); /* as mongod: only when there are some */
}

/* A field of doc (stored role) as a static view, or an empty array. */
static void
array_field(const bson_t *doc, const char *k, bson_t *out)
{
    bson_iter_t it;
    const uint8_t *d;
    uint32_t len;
    if (bson_iter_init_find(&it, doc, k) && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_array(&it, &len, &d);
        if (bson_init_static(out, d, len))
            return;
    }
    bson_init(out);
}

static int
cmd_create_role(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    bson_t privileges = BSON_INITIALIZER, roles = BSON_INITIALIZER, doc = BSON_INITIALIZER, restr = BSON_INITIALIZER;
    bool has_restr;
    int rc = -1;

    if (role_name_arg(op, &name) != 0 || restrictions_arg(op, &restr, &has_restr) != 0)
        goto done;
    if (mf_role_exists(name, op->db) || mf_builtin_role_name(name, op->db)) {
        mf_err_set(&op->err, MF_E_BadValue, "Cannot create roles with the same name as a built-in role");
        goto done;
    }
    if (!mf_op_find(op, "privileges", &it)) {
        mf_err_set(&op->err, MF_E_Location40414, "BSON field 'createRole.privileges' is missing but a required field");
        goto done;
    }
    if (parse_privileges(op, &it, &privileges) != 0)
        goto done;
    if (!mf_op_find(op, "roles", &it)) {
        mf_err_set(&op->err, MF_E_Location40414, "BSON field 'createRole.roles' is missing but a required field");
        goto done;
    }
    if (parse_granted_roles(op, name, &it, &roles) != 0)
        goto done;
    build_role(&doc, op->db, name, &privileges, &roles, &restr);
    if (mf_roles_insert(op->eng->cat, &doc, &op->err) != 0)
        goto done;
    mf_log(MF_LOG_INFO, "ACCESS", "created role %s@%s", name, op->db);
    rc = 0;
done:
    bson_destroy(&privileges);
    bson_destroy(&roles);
    bson_destroy(&doc);
    bson_destroy(&restr);
    return rc;
}

/* What a role command changes: NULL fields are kept from the stored role. */
typedef struct role_change {
    const bson_t *privileges, *roles; /* replace */
    const bson_t *restrictions;       /* replace (empty: the field goes, as mongod's $unset) */
    const bson_t *grant_privs, *revoke_privs, *grant_roles, *revoke_roles;
} role_change_t;

/* rewrite_role's callback state. */
typedef struct role_rewrite {
    mf_op_t *op;
    const char *name;
    const role_change_t *ch;
} role_rewrite_t;

/* The stored role old with the change applied, into out. */
static int
role_rewrite_fn(void *arg, const bson_t *old, bson_t *out, mf_error_t *err)
{
    role_rewrite_t *rw = arg;
    const role_change_t *ch = rw->ch;
    bson_t oprivs, oroles, restr, privs = BSON_INITIALIZER, roles = BSON_INITIALIZER;
    (void)err;
    array_field(old, "privileges", &oprivs);
    array_field(old, "roles", &oroles);
    array_field(old, "authenticationRestrictions", &restr);
    if (ch->privileges != NULL)
        bson_copy_to_excluding_noinit(ch->privileges, &privs, "", NULL);
    else if (ch->grant_privs != NULL || ch->revoke_privs != NULL)
        merge_privileges(&oprivs, ch->grant_privs ? ch->grant_privs : ch->revoke_privs, ch->revoke_privs != NULL, &privs);
    else
        bson_copy_to_excluding_noinit(&oprivs, &privs, "", NULL);
    if (ch->roles != NULL) {
        bson_copy_to_excluding_noinit(ch->roles, &roles, "", NULL);
    } else {
        /* The old roles, minus the revoked ones, then the granted ones not held yet. */
        bson_iter_t it;
        uint32_t n = 0;
        char key[16];
        const char *kp;
        bson_iter_init(&it, &oroles);
        while (bson_iter_next(&it)) {
            const char *rr, *d;
            if (!name_of(&it, "role", NULL, &rr, &d, NULL) || d == NULL ||
                (ch->revoke_roles != NULL && role_in(ch->revoke_roles, rr, d)))
                continue;
            bson_uint32_to_string(n++, &kp, key, sizeof(key));
            bson_append_value(&roles, kp, -1, bson_iter_value(&it));
        }
        if (ch->grant_roles != NULL) {
            bson_iter_init(&it, ch->grant_roles);
            while (bson_iter_next(&it)) {
                const char *rr, *d;
                if (!name_of(&it, "role", NULL, &rr, &d, NULL) || d == NULL || role_in(&oroles, rr, d))
                    continue;
                bson_uint32_to_string(n++, &kp, key, sizeof(key));
                bson_append_value(&roles, kp, -1, bson_iter_value(&it));
            }
        }
    }
    build_role(out, rw->op->db, rw->name, &privs, &roles, ch->restrictions != NULL ? ch->restrictions : &restr);
    bson_destroy(&oprivs);
    bson_destroy(&oroles);
    bson_destroy(&restr);
    bson_destroy(&privs);
    bson_destroy(&roles);
    return 0;
}

/*
 * Rewrites role name@op->db with ch applied, in one transaction
 * (mf_roles_rewrite: a concurrent change is never lost); a missing role is
 * 31 with missing_fmt ("%s@%s": name, db), the wording of the command's
 * step that finds it missing.
 */
static int
rewrite_role(mf_op_t *op, const char *name, const role_change_t *ch, const char *missing_fmt)
{
    role_rewrite_t rw = {op, name, ch};
    if (mf_roles_rewrite(op->eng->cat, op->db, name, role_rewrite_fn, &rw, &op->err) == 0)
        return 0;
    if (op->err.code == MF_E_RoleNotFound)
        mf_err_set(&op->err, MF_E_RoleNotFound, missing_fmt, name, op->db);
    return -1;
}

static int
cmd_update_role(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    bson_t privileges = BSON_INITIALIZER, roles = BSON_INITIALIZER, restr = BSON_INITIALIZER;
    bool has_restr;
    role_change_t ch = {0};
    int rc = -1;
    if (role_name_arg(op, &name) != 0 || restrictions_arg(op, &restr, &has_restr) != 0)
        goto done;
    if (has_restr)
        ch.restrictions = &restr;
    if (!mf_op_has(op, "privileges") && !mf_op_has(op, "roles") && !has_restr) {
        mf_err_set(&op->err, MF_E_BadValue, "Must specify at least one field to update in updateRole");
        goto done;
    }
    if (mf_op_find(op, "privileges", &it)) {
        if (parse_privileges(op, &it, &privileges) != 0)
            goto done;
        ch.privileges = &privileges;
    }
    if (mf_op_find(op, "roles", &it)) {
        if (parse_granted_roles(op, name, &it, &roles) != 0)
            goto done;
        ch.roles = &roles;
    }
    rc = rewrite_role(op, name, &ch, "Could not find role: %s@%s");
done:
    bson_destroy(&privileges);
    bson_destroy(&roles);
    bson_destroy(&restr);
    return rc;
}

/* grantRolesToRole, revokeRolesFromRole, grantPrivilegesToRole, revokePrivilegesFromRole. */
static int
cmd_role_grant_revoke(mf_op_t *op)
{
    const char *name;
    bson_iter_t it;
    bson_t parsed = BSON_INITIALIZER;
    bool privs = strstr(op->name, "Privileges") != NULL, revoke = strncmp(op->name, "revoke", 6) == 0;
    const char *field = privs ? "privileges" : "roles";
    role_change_t ch = {0};
    int rc = -1;
    if (role_name_arg(op, &name) != 0)
        goto done;
    if (mf_role_exists(name, op->db)) {
        mf_err_set(&op->err, MF_E_BadValue, "%s@%s is a built-in role and cannot be modified", name, op->db);
        goto done;
    }
    if (!mf_op_find(op, field, &it)) {
        mf_err_set(&op->err, MF_E_Location40414, "BSON field '%s.%s' is missing but a required field", op->name, field);
        goto done;
    }
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t probe;
        if (bson_iter_recurse(&it, &probe) && !bson_iter_next(&probe)) {
            mf_err_set(&op->err, MF_E_BadValue, "%s command requires a non-empty \"%s\" array", op->name, field);
            goto done;
        }
    }
    if (privs ? parse_privileges(op, &it, &parsed) != 0
              : revoke ? parse_roles_as(op, &it, false, &parsed) != 0 : parse_granted_roles(op, name, &it, &parsed) != 0)
        goto done;
    if (privs)
        *(revoke ? &ch.revoke_privs : &ch.grant_privs) = &parsed;
    else
        *(revoke ? &ch.revoke_roles : &ch.grant_roles) = &parsed;
    rc = rewrite_role(op, name, &ch, "Role %s@%s not found");
done:
    bson_destroy(&parsed);
    return rc;
}

static int
cmd_drop_role(mf_op_t *op)
{
    const char *name;
    if (role_name_arg(op, &name) != 0)
        return -1;
    if (mf_role_exists(name, op->db))
        return mf_err_set(&op->err, MF_E_BadValue, "%s@%s is a built-in role and cannot be modified", name, op->db);
    if (mf_roles_drop(op->eng->cat, op->db, name, &op->err) != 0)
        return -1;
    mf_log(MF_LOG_INFO, "ACCESS", "dropped role %s@%s", name, op->db);
    return 0;
}

static int
cmd_drop_all_roles(mf_op_t *op)
{
    name_list_t l = {"role", NULL, 0, 0};
    int rc = mf_roles_each(op->eng->cat, op->db, collect_name, &l, &op->err);
    int32_t n = 0;
    for (size_t i = 0; i < l.n; i++) {
        mf_error_t err;
        /* Each as dropRole; one dropped meanwhile (31) is no failure. */
        if (rc == 0 && mf_roles_drop(op->eng->cat, op->db, l.v[i], &err) == 0) {
            n++;
        } else if (rc == 0 && err.code != MF_E_RoleNotFound) {
            op->err = err;
            rc = -1;
        }
        free(l.v[i]);
    }
    free(l.v);
    if (rc != 0)
        return -1;
    BSON_APPEND_INT32(op->reply, "n", n);
    return 0;
}

/* rolesInfo's output under construction. */
typedef struct roles_out {
    bson_t arr;
    uint32_t n;
    bool show_privileges;
    bool show_restrictions; /* showAuthenticationRestrictions */
} roles_out_t;

static const char *const builtin_names[] = {"read", "readWrite", "dbAdmin", "userAdmin", "dbOwner", "clusterMonitor",
                                            "clusterManager", "hostManager", "clusterAdmin", "readAnyDatabase",
                                            "readWriteAnyDatabase", "userAdminAnyDatabase", "dbAdminAnyDatabase",
                                            "backup", "restore", "root", NULL};

static void
append_name(bson_t *arr, uint32_t *n, const char *role, const char *db)
{
    char key[16];
    const char *kp;
    bson_t one;
    bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(arr, kp, &one);
    BSON_APPEND_UTF8(&one, "role", role);
    BSON_APPEND_UTF8(&one, "db", db);
    bson_append_document_end(arr, &one);
}

/* Merges the privileges of array add (stored form, possibly several per resource) into *privs, per resource. */
static void
merge_into(bson_t *privs, const bson_t *add)
{
    bson_t merged = BSON_INITIALIZER;
    merge_privileges(privs, add, false, &merged);
    bson_destroy(privs);
    bson_steal(privs, &merged);
}

/* Merges built-in role@db's privileges (mongod's builtin_roles.yml) into *privs; false if it is not built-in. */
static bool
merge_builtin(bson_t *privs, const char *role, const char *db)
{
    bson_t raw = BSON_INITIALIZER;
    bool ok = mf_builtin_role_privileges(role, db, &raw);
    if (ok)
        merge_into(privs, &raw);
    bson_destroy(&raw);
    return ok;
}

/* Names role_doc's roles not seen yet into *names and queues them in seen (their ids, in order). */
static void
queue_roles(const bson_t *role_doc, bson_t *names, uint32_t *n, role_seen_t *seen)
{
    bson_t roles;
    bson_iter_t it;
    array_field(role_doc, "roles", &roles);
    bson_iter_init(&it, &roles);
    while (bson_iter_next(&it)) {
        const char *r, *d;
        if (name_of(&it, "role", NULL, &r, &d, NULL) && d != NULL && !seen_once(seen, r, d))
            append_name(names, n, r, d);
    }
    bson_destroy(&roles);
}

/*
 * Walks the roles a role (or user) document inherits level by level, as
 * mongod's resolveRoles: each named once into *names (a {role, db} array),
 * and, when privs is not NULL, every one's privileges (a built-in role's
 * from its definition) merged into *privs per resource in the order they
 * are met; when restr is not NULL, every user-defined role's non-empty
 * authenticationRestrictions appended to the array being built at *restr
 * (*nr its count) as mongod serializes parsed ones (ranges as
 * "address/length"). seen holds the described role already (nothing for a
 * user); its ids past that are the queue.
 */
static void
inherit_walk(mf_op_t *op, const bson_t *role_doc, bson_t *names, uint32_t *n, bson_t *privs, role_seen_t *seen,
             bson_t *restr, uint32_t *nr)
{
    int head = seen->n;
    queue_roles(role_doc, names, n, seen);
    while (head < seen->n) {
        char role[400];
        const char *id = seen->ids[head++], *dot = strchr(id, '.'); /* "db.role": a db has no dot */
        char db[64];
        bson_t doc, mine;
        mf_error_t err;
        if (dot == NULL || (size_t)(dot - id) >= sizeof(db))
            continue;
        memcpy(db, id, (size_t)(dot - id));
        db[dot - id] = '\0';
        snprintf(role, sizeof(role), "%s", dot + 1);
        if (mf_role_exists(role, db)) {
            if (privs != NULL)
                (void)merge_builtin(privs, role, db);
            continue;
        }
        if (mf_roles_get(op->eng->cat, db, role, &doc, &err) != 0)
            continue;
        if (privs != NULL) {
            array_field(&doc, "privileges", &mine);
            merge_into(privs, &mine);
            bson_destroy(&mine);
        }
        if (restr != NULL) {
            array_field(&doc, "authenticationRestrictions", &mine);
            if (!bson_empty(&mine)) {
                char key[16];
                const char *kp;
                bson_uint32_to_string((*nr)++, &kp, key, sizeof(key));
                mf_restrictions_append_resolved(restr, kp, &mine);
            }
            bson_destroy(&mine);
        }
        queue_roles(&doc, names, n, seen);
        bson_destroy(&doc);
    }
}

/* Appends the elements of arrays a, then b, to the array being built at out (mongod's inheritedPrivileges: own, then inherited). */
static void
append_concat(bson_t *out, const bson_t *a, const bson_t *b)
{
    uint32_t n = 0;
    const bson_t *parts[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        bson_iter_t it;
        bson_iter_init(&it, parts[i]);
        while (bson_iter_next(&it)) {
            char key[16];
            const char *kp;
            bson_uint32_to_string(n++, &kp, key, sizeof(key));
            bson_append_value(out, kp, -1, bson_iter_value(&it));
        }
    }
}

/*
 * One user-defined role's rolesInfo entry, as mongod's: the stored fields
 * (_id, role, db, privileges with showPrivileges, roles), inheritedRoles,
 * inheritedPrivileges (its own privileges, then its inherited roles' merged),
 * and isBuiltin: false last, or right after the stored fields in a
 * {rolesInfo: 1} listing.
 */
static int
append_role_info(roles_out_t *ro, mf_op_t *op, const bson_t *doc, bool listing)
{
    bson_iter_t it;
    bson_t one, roles, inherited, privs, own_restr, from_roles = BSON_INITIALIZER, from_restr = BSON_INITIALIZER;
    uint32_t ni = 0, nr = 0;
    char key[16];
    const char *kp;
    role_seen_t *seen = mf_calloc(1, sizeof(*seen));
    const char *role = bson_iter_init_find(&it, doc, "role") && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
    const char *db = bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
    (void)seen_once(seen, role, db);
    array_field(doc, "roles", &roles);
    array_field(doc, "privileges", &privs);
    bson_uint32_to_string(ro->n++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(&ro->arr, kp, &one);
    if (bson_iter_init_find(&it, doc, "_id"))
        bson_append_value(&one, "_id", -1, bson_iter_value(&it));
    BSON_APPEND_UTF8(&one, "role", role);
    BSON_APPEND_UTF8(&one, "db", db);
    if (ro->show_privileges)
        BSON_APPEND_ARRAY(&one, "privileges", &privs);
    BSON_APPEND_ARRAY(&one, "roles", &roles);
    array_field(doc, "authenticationRestrictions", &own_restr);
    if (ro->show_restrictions) {
        /* mongod's filterAndMapRole lifts a role's list into an array of lists: [[...]], or [] without one. */
        bson_t lifted;
        BSON_APPEND_ARRAY_BEGIN(&one, "authenticationRestrictions", &lifted);
        if (!bson_empty(&own_restr))
            BSON_APPEND_ARRAY(&lifted, "0", &own_restr);
        bson_append_array_end(&one, &lifted);
    }
    if (listing)
        BSON_APPEND_BOOL(&one, "isBuiltin", false);
    /* inheritedAuthenticationRestrictions: its own list as stored, then its inherited roles' resolved. */
    if (!bson_empty(&own_restr)) {
        bson_uint32_to_string(nr++, &kp, key, sizeof(key));
        BSON_APPEND_ARRAY(&from_restr, kp, &own_restr);
    }
    BSON_APPEND_ARRAY_BEGIN(&one, "inheritedRoles", &inherited);
    inherit_walk(op, doc, &inherited, &ni, ro->show_privileges ? &from_roles : NULL, seen,
                 ro->show_restrictions ? &from_restr : NULL, &nr);
    bson_append_array_end(&one, &inherited);
    if (ro->show_privileges) {
        /* Its own privileges as stored, then its inherited roles' merged per resource (mongod's serializeResolvedRoles). */
        bson_t all;
        BSON_APPEND_ARRAY_BEGIN(&one, "inheritedPrivileges", &all);
        append_concat(&all, &privs, &from_roles);
        bson_append_array_end(&one, &all);
    }
    if (ro->show_restrictions)
        BSON_APPEND_ARRAY(&one, "inheritedAuthenticationRestrictions", &from_restr);
    if (!listing)
        BSON_APPEND_BOOL(&one, "isBuiltin", false);
    bson_append_document_end(&ro->arr, &one);
    bson_destroy(&roles);
    bson_destroy(&privs);
    bson_destroy(&from_roles);
    bson_destroy(&own_restr);
    bson_destroy(&from_restr);
    seen_free(seen);
    return 0;
}

/*
 * A built-in role's entry, as mongod's two builders: in a listing {role, db,
 * isBuiltin, roles, inheritedRoles, privileges?, inheritedPrivileges?}; by
 * name {db, role, roles, privileges?, inheritedRoles, inheritedPrivileges?,
 * isBuiltin}. Its roles are always empty (a built-in role is flattened), its
 * privileges those of its definition with its built-in roles', merged per
 * resource, and the same as its inheritedPrivileges.
 */
static void
append_builtin_info(roles_out_t *ro, const char *role, const char *db, bool listing)
{
    char key[16];
    const char *kp;
    bson_t one, empty, privs = BSON_INITIALIZER;
    if (ro->show_privileges)
        (void)merge_builtin(&privs, role, db);
    bson_uint32_to_string(ro->n++, &kp, key, sizeof(key));
    BSON_APPEND_DOCUMENT_BEGIN(&ro->arr, kp, &one);
    if (listing) {
        BSON_APPEND_UTF8(&one, "role", role);
        BSON_APPEND_UTF8(&one, "db", db);
        BSON_APPEND_BOOL(&one, "isBuiltin", true);
    } else {
        BSON_APPEND_UTF8(&one, "db", db);
        BSON_APPEND_UTF8(&one, "role", role);
    }
    BSON_APPEND_ARRAY_BEGIN(&one, "roles", &empty);
    bson_append_array_end(&one, &empty);
    if (!listing && ro->show_privileges)
        BSON_APPEND_ARRAY(&one, "privileges", &privs);
    if (!listing && ro->show_restrictions) {
        BSON_APPEND_ARRAY_BEGIN(&one, "authenticationRestrictions", &empty);
        bson_append_array_end(&one, &empty);
    }
    BSON_APPEND_ARRAY_BEGIN(&one, "inheritedRoles", &empty);
    bson_append_array_end(&one, &empty);
    if (listing && ro->show_privileges)
        BSON_APPEND_ARRAY(&one, "privileges", &privs);
    if (ro->show_privileges)
        BSON_APPEND_ARRAY(&one, "inheritedPrivileges", &privs);
    /* A built-in role has no restrictions: both lists empty (after privileges, in either builder). */
    if (listing && ro->show_restrictions) {
        BSON_APPEND_ARRAY_BEGIN(&one, "authenticationRestrictions", &empty);
        bson_append_array_end(&one, &empty);
    }
    if (ro->show_restrictions) {
        BSON_APPEND_ARRAY_BEGIN(&one, "inheritedAuthenticationRestrictions", &empty);
        bson_append_array_end(&one, &empty);
    }
    if (!listing)
        BSON_APPEND_BOOL(&one, "isBuiltin", true);
    bson_append_document_end(&ro->arr, &one);
    bson_destroy(&privs);
}

typedef struct roles_each_arg {
    roles_out_t *ro;
    mf_op_t *op;
} roles_each_arg_t;

static int
each_role_info(void *arg, const bson_t *doc)
{
    roles_each_arg_t *a = arg;
    return append_role_info(a->ro, a->op, doc, true);
}

/* role@db's entry when it exists (built-in or user-defined); a missing role adds nothing, as mongod. */
static int
role_info_one(roles_out_t *ro, mf_op_t *op, const char *role, const char *db)
{
    bson_t doc;
    if (strcmp(role, "__system") != 0 && mf_role_exists(role, db)) {
        append_builtin_info(ro, role, db, false);
        return 0;
    }
    int r = mf_roles_get(op->eng->cat, db, role, &doc, &op->err);
    if (r == MF_NOTFOUND)
        return 0;
    if (r != 0)
        return -1;
    append_role_info(ro, op, &doc, false);
    bson_destroy(&doc);
    return 0;
}

/* Whether the caller holds role@db itself (a user may always read its own roles, as mongod). */
static bool
holds_role(mf_op_t *op, const char *role, const char *db)
{
    mf_client_auth_t *a = op->client->auth;
    return a != NULL && role_in(&a->roles, role, db);
}

/*
 * rolesInfo: {rolesInfo: 1} every user-defined role of the database (and
 * its built-in roles with showBuiltinRoles), or the roles named (a name, a
 * {role, db}, or an array of them); showPrivileges adds a user-defined
 * role's privileges and inheritedPrivileges. Reading roles one does not hold
 * needs viewRole on their database.
 */
static int
cmd_roles_info(mf_op_t *op)
{
    bson_iter_t it, a;
    roles_out_t ro = {BSON_INITIALIZER, 0, false};
    bool show_builtin = mf_op_find(op, "showBuiltinRoles", &it) && bson_iter_as_bool(&it);
    const mf_privs_t *p = checked(op) ? privs_of(op) : NULL;
    int rc = 0;
    bson_t fragment_roles = BSON_INITIALIZER; /* asUserFragment: the names asked for, as {role, db} */
    uint32_t nfrag = 0;
    ro.show_privileges = mf_op_find(op, "showPrivileges", &it) && bson_iter_as_bool(&it);
    bool as_fragment = ro.show_privileges && BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "asUserFragment") == 0;
    ro.show_restrictions = mf_op_find(op, "showAuthenticationRestrictions", &it) && bson_iter_as_bool(&it);

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (as_fragment && safe_long_is_one(&it)) {
        bson_destroy(&ro.arr);
        return mf_err_set(&op->err, MF_E_IllegalOperation, "Cannot get user fragment for all roles in a database");
    }
    /* mongod's UMCInfoCommandArg: 1 (after safeNumberLong) is every role of the database; else names. */
    if (safe_long_is_one(&it)) {
        if (checked(op) && (p == NULL || !mf_privs_allow(p, op->db, NULL, MF_ACT_VIEW_USER))) {
            bson_destroy(&ro.arr);
            return denied(op, op->db, op->name);
        }
        roles_each_arg_t ea = {&ro, op};
        /* The built-in roles first, as mongod's listing ($external has none). */
        for (int i = 0; show_builtin && strcmp(op->db, "$external") != 0 && builtin_names[i] != NULL; i++)
            if (mf_role_exists(builtin_names[i], op->db))
                append_builtin_info(&ro, builtin_names[i], op->db, true);
        rc = mf_roles_each(op->eng->cat, op->db, each_role_info, &ea, &op->err);
    } else {
        bson_iter_t one = it;
        bool arr = BSON_ITER_HOLDS_ARRAY(&it);
        if (arr)
            bson_iter_recurse(&it, &a);
        while (rc == 0 && (arr ? bson_iter_next(&a) : true)) {
            const bson_iter_t *cur = arr ? &a : &one;
            user_ref_t ref;
            const char *r, *d;
            /* RoleName is not strict: other fields are ignored. */
            if ((rc = parse_auth_name(op, cur, "RoleName", "role", false, &ref)) != 0)
                break;
            r = ref.user;
            d = ref.db;
            if (checked(op) && !mf_role_exists(r, d) && !holds_role(op, r, d) &&
                (p == NULL || !mf_privs_allow(p, d, NULL, MF_ACT_VIEW_USER))) {
                bson_destroy(&ro.arr);
                bson_destroy(&fragment_roles);
                return denied(op, d, op->name);
            }
            if (as_fragment) {
                if (!role_exists(op, r, d))
                    rc = mf_err_set(&op->err, MF_E_RoleNotFound, "Could not find role: %s@%s", r, d);
                else
                    append_name(&fragment_roles, &nfrag, r, d);
            } else {
                rc = role_info_one(&ro, op, r, d);
            }
            if (!arr)
                break;
        }
    }
    if (rc == 0 && as_fragment) {
        /*
         * mongod's getRolesAsUserFragment: {userFragment: {roles, inheritedRoles,
         * inheritedPrivileges[, inheritedAuthenticationRestrictions]}}, what a user holding
         * those roles would be described with (the roles themselves among the inherited).
         */
        bson_t holder = BSON_INITIALIZER, frag, names, privs = BSON_INITIALIZER, restr = BSON_INITIALIZER;
        uint32_t nn = 0, nr = 0;
        role_seen_t *seen = mf_calloc(1, sizeof(*seen));
        BSON_APPEND_ARRAY(&holder, "roles", &fragment_roles);
        BSON_APPEND_DOCUMENT_BEGIN(op->reply, "userFragment", &frag);
        BSON_APPEND_ARRAY(&frag, "roles", &fragment_roles);
        BSON_APPEND_ARRAY_BEGIN(&frag, "inheritedRoles", &names);
        inherit_walk(op, &holder, &names, &nn, &privs, seen, &restr, &nr);
        bson_append_array_end(&frag, &names);
        BSON_APPEND_ARRAY(&frag, "inheritedPrivileges", &privs);
        if (ro.show_restrictions)
            BSON_APPEND_ARRAY(&frag, "inheritedAuthenticationRestrictions", &restr);
        bson_append_document_end(op->reply, &frag);
        bson_destroy(&holder);
        bson_destroy(&privs);
        bson_destroy(&restr);
        seen_free(seen);
    } else if (rc == 0) {
        BSON_APPEND_ARRAY(op->reply, "roles", &ro.arr);
    }
    bson_destroy(&fragment_roles);
    bson_destroy(&ro.arr);
    return rc;
}

/*
 * invalidateUserCache, as mongod's: every connection reloads its user's
 * privileges from admin.system.users / .roles at its next command (the
 * generation they compare moves), as after any change to them.
 */
static int
cmd_invalidate_user_cache(mf_op_t *op)
{
    atomic_fetch_add(&op->eng->users_gen, 1);
    return 0;
}

/* _mergeAuthzCollections' collected documents: copies, each owned. */
typedef struct doc_list {
    bson_t **v;
    size_t n, cap;
    const char *key; /* "user" or "role": the name field */
} doc_list_t;

static int
collect_doc(void *arg, const bson_t *doc)
{
    doc_list_t *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = mf_realloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = bson_copy(doc);
    return 0;
}

static void
doc_list_free(doc_list_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] != NULL)
            bson_destroy(l->v[i]);
    free(l->v);
}

/* The position in l of the document naming name@db (its key and db fields), or -1. */
static long
doc_list_find(const doc_list_t *l, const char *name, const char *db)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i] != NULL && strcmp(view_str(l->v[i], l->key), name) == 0 && strcmp(view_str(l->v[i], "db"), db) == 0)
            return (long)i;
    }
    return -1;
}

/*
 * Moves the user (roles false) or role documents of the staging collection
 * ns (whose db field is db, every one for "") into admin.system.users
 * (.roles), as mongod's _processUsers / _processRoles: one that exists is
 * replaced when drop is set, else inserted (a failure is logged and
 * skipped, as mongorestore continues); with drop, the existing ones (of db)
 * the staging collection does not name are removed. 0, or -1 with op->err.
 */
static int
merge_authz(mf_op_t *op, const char *ns, const char *db, bool drop, bool roles)
{
    char sdb[128];
    const char *scoll;
    const char *key = roles ? "role" : "user";
    doc_list_t staged = {NULL, 0, 0, key}, existing = {NULL, 0, 0, key};
    const char *only = db[0] != '\0' ? db : NULL;
    int rc = -1;
    if (!split_ns(ns, sdb, sizeof(sdb), &scoll)) {
        mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace: %s", ns);
        goto done;
    }
    if (drop && (roles ? mf_roles_each(op->eng->cat, only, collect_doc, &existing, &op->err)
                       : mf_users_each(op->eng->cat, only, collect_doc, &existing, &op->err)) != 0)
        goto done;
    if (mf_auth_coll_each(op->eng->cat, sdb, scoll, only, collect_doc, &staged, &op->err) != 0)
        goto done;
    for (size_t i = 0; i < staged.n; i++) {
        const char *name = view_str(staged.v[i], key), *ddb = view_str(staged.v[i], "db");
        long at = doc_list_find(&existing, name, ddb);
        mf_error_t err;
        bson_t doc = BSON_INITIALIZER;
        char id[600];
        bson_iter_t it;
        int w;
        if (name[0] == '\0' || ddb[0] == '\0') {
            mf_err_set(&op->err, MF_E_NoSuchKey, "Missing expected field \"%s\"", name[0] == '\0' ? key : "db");
            bson_destroy(&doc);
            goto done;
        }
        /* Its _id is "<db>.<name>", as every user and role document's. */
        snprintf(id, sizeof(id), "%s.%s", ddb, name);
        BSON_APPEND_UTF8(&doc, "_id", id);
        bson_iter_init(&it, staged.v[i]);
        while (bson_iter_next(&it))
            if (strcmp(bson_iter_key(&it), "_id") != 0)
                bson_append_value(&doc, bson_iter_key(&it), -1, bson_iter_value(&it));
        if (at >= 0)
            w = roles ? mf_roles_replace(op->eng->cat, &doc, &err) : mf_users_replace(op->eng->cat, &doc, &err);
        else
            w = roles ? mf_roles_insert(op->eng->cat, &doc, &err) : mf_users_insert(op->eng->cat, &doc, &err);
        if (w != 0)
            mf_log(MF_LOG_WARN, "ACCESS", "_mergeAuthzCollections could not %s %s %s@%s: %s", at >= 0 ? "update" : "insert",
                   key, name, ddb, err.msg);
        bson_destroy(&doc);
        if (at >= 0) {
            bson_destroy(existing.v[at]);
            existing.v[at] = NULL;
        }
    }
    for (size_t i = 0; i < existing.n; i++) {
        mf_error_t err;
        if (existing.v[i] == NULL)
            continue;
        const char *name = view_str(existing.v[i], key), *ddb = view_str(existing.v[i], "db");
        if ((roles ? mf_roles_remove(op->eng->cat, ddb, name, &err) : mf_users_remove(op->eng->cat, ddb, name, &err)) != 0)
            mf_log(MF_LOG_WARN, "ACCESS", "_mergeAuthzCollections could not drop %s %s@%s: %s", key, name, ddb, err.msg);
    }
    rc = 0;
done:
    doc_list_free(&staged);
    doc_list_free(&existing);
    return rc;
}

/*
 * _mergeAuthzCollections, mongorestore's way of restoring users and roles
 * (mongod's CmdMergeAuthzCollections): {tempUsersCollection: "<db>.<coll>",
 * tempRolesCollection, db, drop}, on admin only. Runs under the user
 * management lock as the other user and role commands.
 */
static int
cmd_merge_authz(mf_op_t *op)
{
    const char *users = "", *roles = "", *db = "";
    bool present, drop = false;
    if (strcmp(op->db, "admin") != 0)
        return mf_err_set(&op->err, MF_E_Unauthorized, "_mergeAuthzCollections may only be run against the admin database.");
    if (mf_op_get_string(op, "tempUsersCollection", &users, &present) != 0 ||
        mf_op_get_string(op, "tempRolesCollection", &roles, &present) != 0 ||
        mf_op_get_string(op, "db", &db, &present) != 0 || mf_op_get_bool(op, "drop", &drop, &present) != 0)
        return -1;
    if (users[0] == '\0' && roles[0] == '\0')
        return mf_err_set(&op->err, MF_E_BadValue,
                          "Must provide at least one of \"tempUsersCollection\" and \"tempRolescollection\"");
    if (users[0] != '\0' && merge_authz(op, users, db, drop, false) != 0)
        return -1;
    if (roles[0] != '\0' && merge_authz(op, roles, db, drop, true) != 0)
        return -1;
    return 0;
}

/*
 * The user and role management commands run one at a time (the engine's
 * auth_mgmt_mu, as mongod's user management lock): what one checks (a
 * role exists, no cycle) still holds when it writes. The wait ends with
 * killOp, maxTimeMS or shutdown (mf_curop_lock), as mongod's lock waits.
 */
static int
mgmt_lock(mf_op_t *op)
{
    if (mf_curop_lock(&op->eng->auth_mgmt_mu, &op->err) != 0)
        return -1;
    /* Tests: the holder waits here while the fail point is on (common/failpoint.h). */
    mf_failpoint_t *fp = mf_failpoint_find(op->eng->failpoints, "hangWhileHoldingUserManagementLock");
    if (mf_failpoint_eval(fp, NULL, NULL, NULL)) {
        struct timespec ts = {0, 20 * 1000000L};
        for (int i = 0; i < 3000 && mf_failpoint_on(fp); i++) {
            if (mf_curop_check_current(&op->err) != 0) {
                pthread_mutex_unlock(&op->eng->auth_mgmt_mu);
                return -1;
            }
            nanosleep(&ts, NULL);
        }
    }
    return 0;
}

#define MGMT(fn)                                                               \
    static int fn##_locked(mf_op_t *op)                                        \
    {                                                                          \
        if (mgmt_lock(op) != 0)                                                \
            return -1;                                                         \
        int rc = fn(op);                                                       \
        if (rc == 0) /* a user or role exists (or did): see auth_docs_exist */  \
            atomic_store(&op->eng->auth_docs_seen, true);                      \
        pthread_mutex_unlock(&op->eng->auth_mgmt_mu);                          \
        return rc;                                                             \
    }
MGMT(cmd_create_user)
MGMT(cmd_merge_authz)
MGMT(cmd_update_user)
MGMT(cmd_drop_user)
MGMT(cmd_drop_all_users)
MGMT(cmd_grant_revoke)
MGMT(cmd_create_role)
MGMT(cmd_update_role)
MGMT(cmd_drop_role)
MGMT(cmd_drop_all_roles)
MGMT(cmd_role_grant_revoke)
#undef MGMT

/* The user and role commands' own fields (user_management_commands.idl): others are 40415. */
static const char *const create_user_fields[] = {"pwd", "customData", "roles", "digestPassword",
                                                 "authenticationRestrictions", "mechanisms", NULL};
static const char *const update_user_fields[] = {"pwd", "customData", "roles", "digestPassword",
                                                 "authenticationRestrictions", "mechanisms", NULL};
static const char *const no_fields[] = {NULL};
static const char *const merge_authz_fields[] = {"tempUsersCollection", "tempRolesCollection", "db", "drop", NULL};
static const char *const roles_fields[] = {"roles", NULL};
static const char *const privileges_fields[] = {"privileges", NULL};
static const char *const role_fields[] = {"privileges", "roles", "authenticationRestrictions", NULL};
static const char *const users_info_fields[] = {"showCredentials", "showCustomData", "showPrivileges",
                                                "showAuthenticationRestrictions", "filter", NULL};
static const char *const roles_info_fields[] = {"showPrivileges", "showBuiltinRoles", "showAuthenticationRestrictions",
                                                NULL};

const mf_cmd_def_t mf_cmds_auth[] = {
    {"_mergeAuthzCollections", cmd_merge_authz_locked, 0, merge_authz_fields},
    {"invalidateUserCache", cmd_invalidate_user_cache, 0, no_fields},
    {"saslStart", cmd_sasl_start, MF_CMD_NO_DB, NULL},
    {"saslContinue", cmd_sasl_continue, MF_CMD_NO_DB, NULL},
    {"logout", cmd_logout, 0, NULL},
    {"connectionStatus", cmd_connection_status, 0, NULL},
    {"createUser", cmd_create_user_locked, 0, create_user_fields},
    {"updateUser", cmd_update_user_locked, 0, update_user_fields},
    {"dropUser", cmd_drop_user_locked, 0, no_fields},
    {"dropAllUsersFromDatabase", cmd_drop_all_users_locked, 0, no_fields},
    {"usersInfo", cmd_users_info, 0, users_info_fields},
    {"grantRolesToUser", cmd_grant_revoke_locked, 0, roles_fields},
    {"revokeRolesFromUser", cmd_grant_revoke_locked, 0, roles_fields},
    {"rolesInfo", cmd_roles_info, 0, roles_info_fields},
    {"createRole", cmd_create_role_locked, 0, role_fields},
    {"updateRole", cmd_update_role_locked, 0, role_fields},
    {"dropRole", cmd_drop_role_locked, 0, no_fields},
    {"dropAllRolesFromDatabase", cmd_drop_all_roles_locked, 0, no_fields},
    {"grantRolesToRole", cmd_role_grant_revoke_locked, 0, roles_fields},
    {"revokeRolesFromRole", cmd_role_grant_revoke_locked, 0, roles_fields},
    {"grantPrivilegesToRole", cmd_role_grant_revoke_locked, 0, privileges_fields},
    {"revokePrivilegesFromRole", cmd_role_grant_revoke_locked, 0, privileges_fields},
    {NULL, NULL, 0, NULL},
};
