/*
 * cmd_sessions.c: logical sessions, over the engine's session cache
 * (engine/sessions.h).
 *
 * A session is named by its lsid {id: UUID} and owned by the user who uses
 * it: the cache key is (id, uid), uid being SHA-256 of "user@db" under
 * access control and of "" without, as mongod computes it. The dispatcher
 * calls mf_cmd_session_use for every command: a command carrying an lsid
 * records (or refreshes) its session there, after validating the lsid as
 * mongod's OperationSessionInfo parser does (14, 40414, 40415, 201).
 *
 * Commands: startSession (a new id, recorded, {id: {id}, timeoutMinutes}),
 * refreshSessions (records each), endSessions and killSessions (remove the
 * caller's sessions named; killSessions: [] removes all of the caller's),
 * killAllSessions ([{user, db}] removes theirs; [] removes every session)
 * and killAllSessionsByPattern ([{lsid}, {uid}, {users}], [] or [{}]: all).
 * Killing sessions (killSessions, killAllSessions, killAllSessionsByPattern)
 * also kills the cursors opened in them (a cursor remembers its session,
 * and a getMore from another session is 50736-50738, as mongod's
 * validateLSID); endSessions only removes the session (mongod leaves its
 * cursors to the next cache refresh).
 *
 * mf_cmd_sessions_list answers the aggregation stages $listLocalSessions
 * and $listSessions. mongod's $listSessions reads config.system.sessions,
 * which its cache refreshes into every 5 minutes; mayfly keeps no such
 * collection and answers it from the same cache (so a new session shows at
 * once rather than after the next refresh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

#include <openssl/evp.h>

#include "auth/roles.h"
#include "cmd/cmd.h"
#include "common/fmt.h"
#include "common/params.h"
#include "doc/value.h"
#include "engine/cursor.h"
#include "engine/sessions.h"

#define UID_LEN MF_SESSION_UID_LEN

/* mongod's names of BSON binary subtypes (typeName(BinDataType)). */
static const char *
bin_subtype_name(bson_subtype_t t)
{
    switch ((int)t) {
    case BSON_SUBTYPE_BINARY:
        return "general";
    case BSON_SUBTYPE_FUNCTION:
        return "function";
    case BSON_SUBTYPE_BINARY_DEPRECATED:
        return "binary";
    case BSON_SUBTYPE_UUID_DEPRECATED:
        return "uuid(old)";
    case BSON_SUBTYPE_UUID:
        return "uuid";
    case BSON_SUBTYPE_MD5:
        return "md5";
    case 6:
        return "encrypt";
    case 7:
        return "column";
    case 8:
        return "sensitive";
    case 9:
        return "vector";
    default:
        return "user";
    }
}

/* A UUID field (IDL type uuid) at path: 0 with id filled, or -1 with err. */
static int
parse_uuid(const bson_iter_t *it, const char *path, uint8_t id[16], mf_error_t *err)
{
    bson_subtype_t sub;
    uint32_t len;
    const uint8_t *data;
    if (!BSON_ITER_HOLDS_BINARY(it))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'binData'", path,
                          mf_type_name(bson_iter_type(it)));
    bson_iter_binary(it, &sub, &len, &data);
    if (sub != BSON_SUBTYPE_UUID)
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s' is the wrong binData type '%s', expected type 'UUID'",
                          path, bin_subtype_name(sub));
    if (len != 16)
        return mf_err_set(err, MF_E_InvalidUUID, "uuid must be a 16-byte binary field with UUID (4) subtype");
    memcpy(id, data, 16);
    return 0;
}

/*
 * A LogicalSessionFromClient document ({id: UUID, uid?: BinData, txnNumber?,
 * txnUUID?}, strict) at path: 0 with id, or -1 with err. The uid a client
 * may send is checked for its type only: the session belongs to the caller.
 */
static int
parse_lsid(const bson_iter_t *it, const char *path, uint8_t id[16], mf_error_t *err)
{
    bson_iter_t f;
    char sub[160];
    bool have_id = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'object'", path,
                          mf_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        snprintf(sub, sizeof(sub), "%s.%s", path, k);
        if (strcmp(k, "id") == 0) {
            if (parse_uuid(&f, sub, id, err) != 0)
                return -1;
            have_id = true;
        } else if (strcmp(k, "txnUUID") == 0) {
            uint8_t ignored[16];
            if (parse_uuid(&f, sub, ignored, err) != 0)
                return -1;
        } else if (strcmp(k, "uid") == 0) {
            if (!BSON_ITER_HOLDS_BINARY(&f))
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'binData'",
                                  sub, mf_type_name(bson_iter_type(&f)));
        } else if (strcmp(k, "txnNumber") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&f))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '%s' is the wrong type '%s', expected types '[long, int, decimal, double']",
                                  sub, mf_type_name(bson_iter_type(&f)));
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s' is an unknown field.", sub);
        }
    }
    if (!have_id)
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.id' is missing but a required field", path);
    return 0;
}

static int64_t
timeout_ms(mf_engine_t *eng)
{
    return mf_param_get(eng->params, "localLogicalSessionTimeoutMinutes") * 60000;
}

/* The caller's "user@db" ("" without access control) into user. */
static void
caller(mf_op_t *op, char *user, size_t cap)
{
    mf_cmd_auth_owner(op, user, cap);
}

int
mf_cmd_session_use(mf_op_t *op)
{
    bson_iter_t it;
    uint8_t id[16];
    char user[300];
    if ((op->client != NULL && op->client->internal) || !mf_op_find(op, "lsid", &it))
        return 0;
    if (parse_lsid(&it, "OperationSessionInfo.lsid", id, &op->err) != 0)
        return -1;
    caller(op, user, sizeof(user));
    if (mf_sessions_touch_uid(op->eng->sessions, id, user, mf_now_ms(), timeout_ms(op->eng), op->lsid_uid, &op->err) != 0)
        return -1;
    memcpy(op->lsid_id, id, 16);
    op->has_lsid = true;
    return 0;
}

bool
mf_cmd_session_id(const mf_op_t *op, uint8_t id[16])
{
    bson_iter_t it, f;
    bson_subtype_t sub;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, op->cmd, "lsid") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &f) ||
        !bson_iter_find(&f, "id") || !BSON_ITER_HOLDS_BINARY(&f))
        return false;
    bson_iter_binary(&f, &sub, &len, &data);
    if (len != 16)
        return false;
    memcpy(id, data, 16);
    return true;
}

/* A session as mongod's LogicalSessionId::toString writes it: "<uuid> - <uid, base64> -  - ". */
static void
describe_session(const uint8_t id[16], const char *user, char *out, size_t cap)
{
    uint8_t uid[UID_LEN];
    unsigned char b64[64];
    mf_session_uid(user, uid);
    char text[37];
    EVP_EncodeBlock(b64, uid, UID_LEN);
    mf_fmt_uuid(id, text);
    snprintf(out, cap, "%s - %s -  - ", text, (const char *)b64);
}

int
mf_cmd_session_check_cursor(mf_op_t *op, int64_t cursor_id, bool has_lsid, const uint8_t lsid[16], const char *owner)
{
    uint8_t mine[16];
    char a[160], b[160], user[300];
    bool in_session = mf_cmd_session_id(op, mine);
    if (in_session && !has_lsid) {
        caller(op, user, sizeof(user));
        describe_session(mine, user, b, sizeof(b));
        return mf_err_set(&op->err, MF_E_Location50736,
                          "Cannot run getMore on cursor %lld, which was not created in a session, in session %s",
                          (long long)cursor_id, b);
    }
    if (!in_session && has_lsid) {
        describe_session(lsid, owner, a, sizeof(a));
        return mf_err_set(&op->err, MF_E_Location50737,
                          "Cannot run getMore on cursor %lld, which was created in session %s, without an lsid",
                          (long long)cursor_id, a);
    }
    if (in_session && memcmp(mine, lsid, 16) != 0) {
        caller(op, user, sizeof(user));
        describe_session(lsid, owner, a, sizeof(a));
        describe_session(mine, user, b, sizeof(b));
        return mf_err_set(&op->err, MF_E_Location50738,
                          "Cannot run getMore on cursor %lld, which was created in session %s, in session %s",
                          (long long)cursor_id, a, b);
    }
    return 0;
}

/* ---------- killing a session's cursors ---------- */

/* Which sessions' cursors to kill: one session (id), every session of a user (uid), or every session. */
typedef struct kill_match {
    const uint8_t *id;  /* NULL: any session id */
    const uint8_t *uid; /* NULL: any user */
} kill_match_t;

static bool
cursor_in_sessions(void *arg, const mf_cursor_t *c)
{
    const kill_match_t *m = arg;
    uint8_t uid[UID_LEN];
    if (!c->has_lsid || (m->id != NULL && memcmp(c->lsid, m->id, 16) != 0))
        return false;
    if (m->uid == NULL)
        return true;
    mf_session_uid(c->owner, uid);
    return memcmp(uid, m->uid, UID_LEN) == 0;
}

/*
 * kill_sessions: removes the sessions from the cache, kills their cursors
 * and aborts their open transactions, as mongod's killSessions. Of their
 * operations, a getMore using one of those cursors (an awaitData wait) is
 * interrupted; the others are not: mayfly's commands do not outlive their
 * request by much.
 */
static void
kill_sessions(mf_op_t *op, const uint8_t *id, const uint8_t *uid)
{
    kill_match_t m = {id, uid};
    if (id != NULL)
        mf_sessions_end(op->eng->sessions, id, uid);
    else
        mf_sessions_end_all(op->eng->sessions, uid);
    mf_cursors_kill_where(op->eng->cursors, cursor_in_sessions, &m);
    mf_cmd_txn_end_sessions(op->eng, id, uid);
}

/* The command's array argument (its first field): 0 with *arr positioned on it, or -1 with 14. */
static int
array_arg(mf_op_t *op, bson_iter_t *arr)
{
    bson_iter_t it;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'array'",
                          op->name, op->name, mf_type_name(bson_iter_type(&it)));
    bson_iter_recurse(&it, arr);
    return 0;
}

/* startSession: a fresh session id, recorded for the caller. */
static int
cmd_start_session(mf_op_t *op)
{
    bson_t id;
    uint8_t uuid[16];
    char user[300];
    bson_oid_t a, b;
    bson_oid_init(&a, NULL);
    bson_oid_init(&b, NULL);
    memcpy(uuid, a.bytes, 8);
    memcpy(uuid + 8, b.bytes + 4, 8);
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40);
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
    caller(op, user, sizeof(user));
    if (mf_sessions_touch(op->eng->sessions, uuid, user, mf_now_ms(), timeout_ms(op->eng), &op->err) != 0)
        return -1;
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "id", &id);
    bson_append_binary(&id, "id", -1, BSON_SUBTYPE_UUID, uuid, 16);
    bson_append_document_end(op->reply, &id);
    BSON_APPEND_INT32(op->reply, "timeoutMinutes",
                      (int32_t)mf_param_get(op->eng->params, "localLogicalSessionTimeoutMinutes"));
    return 0;
}

/*
 * endSessions, killSessions, refreshSessions: [{id: UUID}, ...], each a
 * session of the caller's. All are validated before any takes effect.
 * killSessions: [] kills all of the caller's sessions.
 */
static int
cmd_session_list_op(mf_op_t *op)
{
    bson_iter_t arr;
    char path[200], user[300];
    uint8_t id[16], uid[UID_LEN];
    size_t n = 0;
    bool refresh = strcmp(op->name, "refreshSessions") == 0;
    snprintf(path, sizeof(path), "%s.%s", op->name, op->name);
    if (array_arg(op, &arr) != 0)
        return -1;
    bson_iter_t check = arr;
    while (bson_iter_next(&check)) {
        if (parse_lsid(&check, path, id, &op->err) != 0)
            return -1;
        n++;
    }
    caller(op, user, sizeof(user));
    mf_session_uid(user, uid);
    bool kill = strcmp(op->name, "killSessions") == 0;
    if (n == 0 && kill) {
        kill_sessions(op, NULL, uid);
        return 0;
    }
    int64_t now = mf_now_ms();
    while (bson_iter_next(&arr)) {
        if (parse_lsid(&arr, path, id, &op->err) != 0)
            return -1;
        if (kill)
            kill_sessions(op, id, uid);
        else if (!refresh) {
            /* mongod leaves an ended session's cursors to its refresh; its transaction aborts. */
            mf_sessions_end(op->eng->sessions, id, uid);
            mf_cmd_txn_end_sessions(op->eng, id, uid);
        }
        else if (mf_sessions_touch(op->eng->sessions, id, user, now, timeout_ms(op->eng), &op->err) != 0)
            return -1;
    }
    return 0;
}

/*
 * A {user: string, db: string} document at path into "user@db" ("" for
 * {user: "", db: ""}, mongod's name for "no user"): 0, or -1 with err.
 */
static int
parse_user(const bson_iter_t *it, const char *path, char *out, size_t cap, mf_error_t *err)
{
    bson_iter_t f;
    const char *user = NULL, *db = NULL;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s' is the wrong type '%s', expected type 'object'", path,
                          mf_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "user") != 0 && strcmp(k, "db") != 0)
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", path, k);
        if (!BSON_ITER_HOLDS_UTF8(&f))
            return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'",
                              path, k, mf_type_name(bson_iter_type(&f)));
        if (k[0] == 'u')
            user = bson_iter_utf8(&f, NULL);
        else
            db = bson_iter_utf8(&f, NULL);
    }
    if (user == NULL || db == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.%s' is missing but a required field", path,
                          user == NULL ? "user" : "db");
    if (user[0] == '\0' && db[0] == '\0')
        snprintf(out, cap, "%s", "");
    else
        snprintf(out, cap, "%s@%s", user, db);
    return 0;
}

/* killAllSessions: [{user, db}, ...] kills those users' sessions; [] kills every session. */
static int
cmd_kill_all_sessions(mf_op_t *op)
{
    bson_iter_t arr;
    char path[64], user[300];
    uint8_t uid[UID_LEN];
    size_t n = 0;
    snprintf(path, sizeof(path), "killAllSessions.killAllSessions");
    if (array_arg(op, &arr) != 0)
        return -1;
    bson_iter_t check = arr;
    while (bson_iter_next(&check)) {
        if (parse_user(&check, path, user, sizeof(user), &op->err) != 0)
            return -1;
        n++;
    }
    if (n == 0) {
        kill_sessions(op, NULL, NULL);
        return 0;
    }
    while (bson_iter_next(&arr)) {
        if (parse_user(&arr, path, user, sizeof(user), &op->err) != 0)
            return -1;
        mf_session_uid(user, uid);
        kill_sessions(op, NULL, uid);
    }
    return 0;
}

/*
 * killAllSessionsByPattern: [{lsid?: {id, uid}, uid?: BinData, users?:
 * [{user, db}], roles?: [...]}, ...]; an empty list or an empty pattern
 * kills every session. A pattern with roles only matches nothing here
 * (mayfly does not track the roles of a session's user).
 */
static int
cmd_kill_all_sessions_by_pattern(mf_op_t *op)
{
    bson_iter_t arr, f, u;
    char path[160], user[300];
    uint8_t uid[UID_LEN], id[16];
    if (array_arg(op, &arr) != 0)
        return -1;
    bson_iter_t check = arr;
    if (!bson_iter_next(&check)) {
        kill_sessions(op, NULL, NULL);
        return 0;
    }
    while (bson_iter_next(&arr)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field 'killAllSessionsByPattern.killAllSessionsByPattern.%s' is the wrong type '%s', expected type 'object'",
                              bson_iter_key(&arr), mf_type_name(bson_iter_type(&arr)));
        bool any = false;
        bson_iter_recurse(&arr, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            any = true;
            if (strcmp(k, "lsid") == 0) {
                bson_iter_t l;
                bool have_uid = false;
                if (parse_lsid(&f, "KillAllSessionsByPattern.lsid", id, &op->err) != 0)
                    return -1;
                bson_iter_recurse(&f, &l);
                if (bson_iter_find(&l, "uid") && BSON_ITER_HOLDS_BINARY(&l)) {
                    bson_subtype_t st;
                    uint32_t len;
                    const uint8_t *d;
                    bson_iter_binary(&l, &st, &len, &d);
                    if (len == UID_LEN) {
                        memcpy(uid, d, UID_LEN);
                        have_uid = true;
                    }
                }
                if (!have_uid) {
                    mf_cmd_auth_owner(op, user, sizeof(user));
                    mf_session_uid(user, uid);
                }
                kill_sessions(op, id, uid);
            } else if (strcmp(k, "uid") == 0) {
                bson_subtype_t st;
                uint32_t len;
                const uint8_t *d;
                if (!BSON_ITER_HOLDS_BINARY(&f))
                    return mf_err_set(&op->err, MF_E_TypeMismatch,
                                      "BSON field 'KillAllSessionsByPattern.uid' is the wrong type '%s', expected type 'binData'",
                                      mf_type_name(bson_iter_type(&f)));
                bson_iter_binary(&f, &st, &len, &d);
                if (len == UID_LEN)
                    kill_sessions(op, NULL, d);
            } else if (strcmp(k, "users") == 0) {
                if (!BSON_ITER_HOLDS_ARRAY(&f))
                    return mf_err_set(&op->err, MF_E_TypeMismatch,
                                      "BSON field 'KillAllSessionsByPattern.users' is the wrong type '%s', expected type 'array'",
                                      mf_type_name(bson_iter_type(&f)));
                bson_iter_recurse(&f, &u);
                while (bson_iter_next(&u)) {
                    snprintf(path, sizeof(path), "KillAllSessionsByPattern.users.%s", bson_iter_key(&u));
                    if (parse_user(&u, path, user, sizeof(user), &op->err) != 0)
                        return -1;
                    mf_session_uid(user, uid);
                    kill_sessions(op, NULL, uid);
                }
            } else if (strcmp(k, "roles") != 0) {
                return mf_err_set(&op->err, MF_E_Location40415, "BSON field 'KillAllSessionsByPattern.%s' is an unknown field.", k);
            }
        }
        if (!any)
            kill_sessions(op, NULL, NULL);
    }
    return 0;
}

/* ---------- $listLocalSessions / $listSessions ---------- */

static void
push_session(void *arg, const mf_session_info_t *s)
{
    bson_t doc, id;
    bson_init(&doc);
    BSON_APPEND_DOCUMENT_BEGIN(&doc, "_id", &id);
    bson_append_binary(&id, "id", -1, BSON_SUBTYPE_UUID, s->id, 16);
    bson_append_binary(&id, "uid", -1, BSON_SUBTYPE_BINARY, s->uid, UID_LEN);
    bson_append_document_end(&doc, &id);
    BSON_APPEND_DATE_TIME(&doc, "lastUse", s->last_use_ms);
    if (s->user[0] != '\0')
        BSON_APPEND_UTF8(&doc, "user", s->user);
    mf_docvec_push((mf_docvec_t *)arg, &doc);
    bson_destroy(&doc);
}

int
mf_cmd_sessions_list(mf_op_t *op, const char *stage, const bson_t *spec, mf_docvec_t *out, mf_error_t *err)
{
    bson_iter_t it, u;
    char self[300], user[300];
    bool all = false, others = false;
    size_t n = 0;
    uint8_t(*uids)[UID_LEN] = NULL;
    int rc = 0;

    caller(op, self, sizeof(self));
    if (bson_iter_init_find(&it, spec, "allUsers") && BSON_ITER_HOLDS_BOOL(&it))
        all = bson_iter_bool(&it);
    if (!all && bson_iter_init_find(&it, spec, "users") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_recurse(&it, &u);
        while (bson_iter_next(&u))
            n++;
        uids = mf_calloc(n > 0 ? n : 1, sizeof(*uids));
        n = 0;
        bson_iter_recurse(&it, &u);
        while (bson_iter_next(&u)) {
            char path[64];
            snprintf(path, sizeof(path), "%s.users", stage);
            if (parse_user(&u, path, user, sizeof(user), err) != 0) {
                rc = -1;
                goto done;
            }
            others = others || strcmp(user, self) != 0;
            mf_session_uid(user, uids[n++]);
        }
    }
    if (!all && n == 0) {
        /* The implicit request: the caller's own sessions. */
        free(uids);
        uids = mf_calloc(1, sizeof(*uids));
        mf_session_uid(self, uids[0]);
        n = 1;
    }
    /* The cluster action listSessions: clusterMonitor's and clusterManager's (not backup's). */
    if ((all || others) && !mf_cmd_auth_cluster(op, MF_CACT_REPL_STATUS)) {
        rc = mf_err_set(err, MF_E_Unauthorized, "not authorized on %s to execute command { aggregate: ... }", op->db);
        goto done;
    }
    mf_sessions_each(op->eng->sessions, mf_now_ms(), timeout_ms(op->eng), all ? NULL : (const uint8_t(*)[UID_LEN])uids,
                     n, push_session, out);
done:
    free(uids);
    return rc;
}

const mf_cmd_def_t mf_cmds_sessions[] = {
    {"startSession", cmd_start_session, 0},
    {"endSessions", cmd_session_list_op, 0},
    {"killSessions", cmd_session_list_op, 0},
    {"refreshSessions", cmd_session_list_op, 0},
    {"killAllSessions", cmd_kill_all_sessions, 0},
    {"killAllSessionsByPattern", cmd_kill_all_sessions_by_pattern, 0},
    {NULL, NULL, 0},
};
