/*
 * users.c: admin.system.users (see users.h).
 *
 * Each write is one transaction on the thread's storage session, retried on
 * a write conflict (another connection changing the same user), committed
 * durably: an acknowledged createUser survives kill -9.
 */
#include "auth/users.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/coll_write.h"
#include "common/alloc.h"
#include "storage/storage.h"

#define WRITE_ATTEMPTS 20

typedef enum { W_INSERT, W_REPLACE, W_REMOVE } wkind_t;

/* What a document of admin.system.users or admin.system.roles is called, and the errors naming it. */
typedef struct auth_kind {
    const char *coll; /* MF_USERS_COLL, MF_ROLES_COLL */
    const char *key;  /* the name's field: "user", "role" */
    int exists_code, missing_code;
    const char *exists_fmt, *missing_fmt; /* "%s@%s": name, db */
} auth_kind_t;

static const auth_kind_t users_kind = {MF_USERS_COLL, "user", MF_E_Location51003, MF_E_UserNotFound,
                                       "User \"%s@%s\" already exists", "User '%s@%s' not found"};
static const auth_kind_t roles_kind = {MF_ROLES_COLL, "role", MF_E_Location51002, MF_E_RoleNotFound,
                                       "Role \"%s@%s\" already exists", "Role '%s@%s' not found"};

/* The user's _id "<db>.<user>" in buf (cap bytes) and *idv (pointing into buf); false if it does not fit. */
static bool
user_id(const char *db, const char *user, char *buf, size_t cap, bson_value_t *idv)
{
    size_t dl = strlen(db), ul = strlen(user);
    if (dl + ul + 2 > cap)
        return false;
    memcpy(buf, db, dl);
    buf[dl] = '.';
    memcpy(buf + dl + 1, user, ul);
    buf[dl + 1 + ul] = '\0';
    idv->value_type = BSON_TYPE_UTF8;
    idv->value.v_utf8.str = buf;
    idv->value.v_utf8.len = (uint32_t)(dl + 1 + ul);
    return true;
}

/*
 * Runs body(s, arg, err) in a transaction on s, committed durably when it
 * returns 0 and rolled back otherwise, and again, up to WRITE_ATTEMPTS
 * times, while it or the commit meets a write conflict. Returns 0, or -1
 * with err (body's error; 112 WriteConflict "<what> kept conflicting" when
 * the attempts run out).
 */
static int
durable_txn(mf_sess_t *s, int (*body)(mf_sess_t *s, void *arg, mf_error_t *err), void *arg, const char *what,
            mf_error_t *err)
{
    for (int attempt = 0;; attempt++) {
        if (mf_txn_begin(s, err) != 0)
            return -1;
        int rc = body(s, arg, err);
        if (rc == 0)
            rc = mf_txn_commit(s, true, err);
        else
            mf_txn_abort(s);
        if (rc != MF_CONFLICT)
            return rc == 0 ? 0 : -1;
        if (attempt == WRITE_ATTEMPTS)
            return mf_err_set(err, MF_E_WriteConflict, "%s kept conflicting", what);
    }
}

static int
doc_get(mf_catalog_t *cat, const auth_kind_t *k, const char *db, const char *user, bson_t *out, mf_error_t *err)
{
    mf_coll_t *c = NULL;
    char id[512];
    bson_value_t idv;
    int64_t rid;
    int rc;

    if (!user_id(db, user, id, sizeof(id), &idv))
        return MF_NOTFOUND;
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    if (mf_catalog_coll_acquire(cat, MF_USERS_DB, k->coll, false, &c, err) != 0) {
        rc = -1;
        goto done;
    }
    if (c == NULL) {
        rc = MF_NOTFOUND;
        goto done;
    }
    for (int attempt = 0;; attempt++) {
        if (mf_txn_begin(s, err) != 0) {
            rc = -1;
            break;
        }
        rc = mf_coll_find_id(s, c, &idv, &rid, err);
        if (rc == 0)
            rc = mf_coll_fetch(s, c, rid, out, err);
        mf_txn_abort(s);
        if (rc != MF_CONFLICT || attempt == WRITE_ATTEMPTS)
            break;
    }
    if (rc == MF_CONFLICT)
        rc = mf_err_set(err, MF_E_WriteConflict, "reading %s %s@%s conflicted", k->key, user, db);
done:
    mf_catalog_unlock(cat);
    mf_storage_session_release(s);
    return rc;
}

int
mf_users_get(mf_catalog_t *cat, const char *db, const char *user, bson_t *out, mf_error_t *err)
{
    return doc_get(cat, &users_kind, db, user, out, err);
}

int
mf_roles_get(mf_catalog_t *cat, const char *db, const char *role, bson_t *out, mf_error_t *err)
{
    return doc_get(cat, &roles_kind, db, role, out, err);
}

/* What write_doc and rewrite_doc do inside their transaction. */
typedef struct doc_write {
    const auth_kind_t *k;
    mf_coll_t *c;
    const bson_value_t *idv;
    const char *db, *name;
    wkind_t kind;
    const bson_t *doc;    /* write_doc: the new document (insert, replace) */
    mf_rewrite_fn fn;     /* rewrite_doc: makes the new document from the old */
    void *fn_arg;
} doc_write_t;

static int
write_body(mf_sess_t *s, void *arg, mf_error_t *err)
{
    doc_write_t *w = arg;
    int64_t rid = 0;
    bson_t old;
    int rc = mf_coll_find_id(s, w->c, w->idv, &rid, err);
    if (rc == 0 && w->kind == W_INSERT)
        return mf_err_set(err, w->k->exists_code, w->k->exists_fmt, w->name, w->db);
    if (rc == MF_NOTFOUND && w->kind != W_INSERT)
        return mf_err_set(err, w->k->missing_code, w->k->missing_fmt, w->name, w->db);
    if (rc == MF_NOTFOUND)
        return mf_coll_insert(s, w->c, w->doc, NULL, err);
    if (rc != 0 || (rc = mf_coll_fetch(s, w->c, rid, &old, err)) != 0)
        return rc;
    rc = w->kind == W_REPLACE ? mf_coll_replace(s, w->c, rid, &old, w->doc, err) : mf_coll_remove(s, w->c, rid, &old, err);
    bson_destroy(&old);
    return rc;
}

/* One write of a user or role document in its own durable transaction. doc: the new document (insert, replace). */
static int
write_doc(mf_catalog_t *cat, const auth_kind_t *k, wkind_t kind, const char *db, const char *user, const bson_t *doc,
          mf_error_t *err)
{
    mf_coll_t *c = NULL;
    char id[512], what[600];
    bson_value_t idv;
    int rc = -1;

    if (!user_id(db, user, id, sizeof(id), &idv))
        return mf_err_set(err, MF_E_BadValue, "%s name too long", k->key);
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    if (mf_catalog_coll_acquire(cat, MF_USERS_DB, k->coll, kind == W_INSERT, &c, err) != 0)
        goto done;
    if (c == NULL) {
        mf_err_set(err, k->missing_code, k->missing_fmt, user, db);
        goto done;
    }
    doc_write_t w = {.k = k, .c = c, .idv = &idv, .db = db, .name = user, .kind = kind, .doc = doc};
    snprintf(what, sizeof(what), "writing %s %s@%s", k->key, user, db);
    rc = durable_txn(s, write_body, &w, what, err);
done:
    mf_catalog_unlock(cat);
    mf_storage_session_release(s);
    return rc == 0 ? 0 : -1;
}

/* The name (user or role) and db fields of a user or role document. */
static int
doc_names(const auth_kind_t *k, const bson_t *doc, const char **db, const char **user, mf_error_t *err)
{
    bson_iter_t it;
    *db = *user = NULL;
    if (bson_iter_init_find(&it, doc, k->key) && BSON_ITER_HOLDS_UTF8(&it))
        *user = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, doc, "db") && BSON_ITER_HOLDS_UTF8(&it))
        *db = bson_iter_utf8(&it, NULL);
    if (*db == NULL || *user == NULL)
        return mf_err_set(err, MF_E_BadValue, "a %s document needs %s and db strings", k->key, k->key);
    return 0;
}

static int
rewrite_body(mf_sess_t *s, void *arg, mf_error_t *err)
{
    doc_write_t *w = arg;
    int64_t rid = 0;
    bson_t old, doc;
    int rc = mf_coll_find_id(s, w->c, w->idv, &rid, err);
    if (rc == MF_NOTFOUND)
        return mf_err_set(err, w->k->missing_code, w->k->missing_fmt, w->name, w->db);
    if (rc != 0 || (rc = mf_coll_fetch(s, w->c, rid, &old, err)) != 0)
        return rc;
    bson_init(&doc);
    rc = w->fn(w->fn_arg, &old, &doc, err);
    if (rc == 0)
        rc = mf_coll_replace(s, w->c, rid, &old, &doc, err);
    bson_destroy(&doc);
    bson_destroy(&old);
    return rc;
}

/* Reads, changes (fn) and replaces name@db's document in one durable transaction, retried on a write conflict. */
static int
rewrite_doc(mf_catalog_t *cat, const auth_kind_t *k, const char *db, const char *name, mf_rewrite_fn fn, void *arg,
            mf_error_t *err)
{
    mf_coll_t *c = NULL;
    char id[512], what[600];
    bson_value_t idv;
    int rc = -1;

    if (!user_id(db, name, id, sizeof(id), &idv))
        return mf_err_set(err, k->missing_code, k->missing_fmt, name, db);
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    if (mf_catalog_coll_acquire(cat, MF_USERS_DB, k->coll, false, &c, err) != 0)
        goto done;
    if (c == NULL) {
        mf_err_set(err, k->missing_code, k->missing_fmt, name, db);
        goto done;
    }
    doc_write_t w = {.k = k, .c = c, .idv = &idv, .db = db, .name = name, .fn = fn, .fn_arg = arg};
    snprintf(what, sizeof(what), "writing %s %s@%s", k->key, name, db);
    rc = durable_txn(s, rewrite_body, &w, what, err);
done:
    mf_catalog_unlock(cat);
    mf_storage_session_release(s);
    return rc == 0 ? 0 : -1;
}

int
mf_users_rewrite(mf_catalog_t *cat, const char *db, const char *user, mf_rewrite_fn fn, void *arg, mf_error_t *err)
{
    return rewrite_doc(cat, &users_kind, db, user, fn, arg, err);
}

int
mf_roles_rewrite(mf_catalog_t *cat, const char *db, const char *role, mf_rewrite_fn fn, void *arg, mf_error_t *err)
{
    return rewrite_doc(cat, &roles_kind, db, role, fn, arg, err);
}

static int
put_doc(mf_catalog_t *cat, const auth_kind_t *k, wkind_t kind, const bson_t *doc, mf_error_t *err)
{
    const char *db, *name;
    if (doc_names(k, doc, &db, &name, err) != 0)
        return -1;
    return write_doc(cat, k, kind, db, name, doc, err);
}

int
mf_users_insert(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err)
{
    return put_doc(cat, &users_kind, W_INSERT, doc, err);
}

int
mf_users_replace(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err)
{
    return put_doc(cat, &users_kind, W_REPLACE, doc, err);
}

int
mf_users_remove(mf_catalog_t *cat, const char *db, const char *user, mf_error_t *err)
{
    return write_doc(cat, &users_kind, W_REMOVE, db, user, NULL, err);
}

int
mf_roles_insert(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err)
{
    return put_doc(cat, &roles_kind, W_INSERT, doc, err);
}

int
mf_roles_replace(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err)
{
    return put_doc(cat, &roles_kind, W_REPLACE, doc, err);
}

int
mf_roles_remove(mf_catalog_t *cat, const char *db, const char *role, mf_error_t *err)
{
    return write_doc(cat, &roles_kind, W_REMOVE, db, role, NULL, err);
}

/* Calls fn for each document of cdb.coll whose db field is db (every one with db NULL); see mf_auth_coll_each. */
static int
each_in(mf_catalog_t *cat, const char *cdb, const char *coll, const char *db, int (*fn)(void *arg, const bson_t *doc),
        void *arg, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    mf_coll_t *c = NULL;
    mf_cur_t *cur = NULL;
    int rc = -1;

    if (mf_catalog_coll_acquire(cat, cdb, coll, false, &c, err) != 0)
        goto done;
    rc = 0;
    if (c == NULL)
        goto done;
    if (mf_txn_begin(s, err) != 0) {
        rc = -1;
        goto done;
    }
    if (mf_cur_open(s, c->uri, &cur, err) != 0) {
        rc = -1;
        goto abort;
    }
    int r;
    while ((r = mf_cur_next(cur)) == 0) {
        const uint8_t *v;
        size_t len;
        bson_t view;
        bson_iter_t it;
        mf_cur_value(cur, &v, &len);
        if (!bson_init_static(&view, v, len))
            continue;
        if (db != NULL && !(bson_iter_init_find(&it, &view, "db") && BSON_ITER_HOLDS_UTF8(&it) &&
                            strcmp(bson_iter_utf8(&it, NULL), db) == 0))
            continue;
        if (fn(arg, &view) != 0)
            break;
    }
    if (r != 0 && r != MF_NOTFOUND)
        rc = mf_err_set(err, MF_E_WriteConflict, "reading %s.%s was interrupted by a conflict", cdb, coll);
    mf_cur_close(cur);
abort:
    mf_txn_abort(s);
done:
    mf_catalog_unlock(cat);
    mf_storage_session_release(s);
    return rc;
}

static int
each_doc(mf_catalog_t *cat, const auth_kind_t *k, const char *db, int (*fn)(void *arg, const bson_t *doc), void *arg,
         mf_error_t *err)
{
    return each_in(cat, MF_USERS_DB, k->coll, db, fn, arg, err);
}

int
mf_auth_coll_each(mf_catalog_t *cat, const char *cdb, const char *coll, const char *db,
                  int (*fn)(void *arg, const bson_t *doc), void *arg, mf_error_t *err)
{
    return each_in(cat, cdb, coll, db, fn, arg, err);
}

int
mf_users_each(mf_catalog_t *cat, const char *db, int (*fn)(void *arg, const bson_t *user), void *arg,
              mf_error_t *err)
{
    return each_doc(cat, &users_kind, db, fn, arg, err);
}

int
mf_roles_each(mf_catalog_t *cat, const char *db, int (*fn)(void *arg, const bson_t *role), void *arg,
              mf_error_t *err)
{
    return each_doc(cat, &roles_kind, db, fn, arg, err);
}

/* Whether the roles array element at r is {role, db} naming role@db. */
static bool
elem_is_role(const bson_iter_t *r, const char *role, const char *db)
{
    bson_iter_t f;
    bool rm = false, dm = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(r) || !bson_iter_recurse(r, &f))
        return false;
    while (bson_iter_next(&f)) {
        if (!BSON_ITER_HOLDS_UTF8(&f))
            continue;
        if (strcmp(bson_iter_key(&f), "role") == 0)
            rm = strcmp(bson_iter_utf8(&f, NULL), role) == 0;
        else if (strcmp(bson_iter_key(&f), "db") == 0)
            dm = strcmp(bson_iter_utf8(&f, NULL), db) == 0;
    }
    return rm && dm;
}

/* Whether doc's roles array names role@db. */
static bool
holds_role(const bson_t *doc, const char *role, const char *db)
{
    bson_iter_t it, r;
    if (!bson_iter_init_find(&it, doc, "roles") || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &r))
        return false;
    while (bson_iter_next(&r))
        if (elem_is_role(&r, role, db))
            return true;
    return false;
}

/* doc without role@db in its roles array, into out (initialised here). */
static void
pull_role(const bson_t *doc, const char *role, const char *db, bson_t *out)
{
    bson_iter_t it, r;
    bson_init(out);
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "roles") != 0 || !BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
            continue;
        }
        bson_t arr;
        uint32_t n = 0;
        BSON_APPEND_ARRAY_BEGIN(out, "roles", &arr);
        bson_iter_recurse(&it, &r);
        while (bson_iter_next(&r)) {
            char key[16];
            const char *kp;
            if (elem_is_role(&r, role, db))
                continue;
            bson_uint32_to_string(n++, &kp, key, sizeof(key));
            bson_append_value(&arr, kp, -1, bson_iter_value(&r));
        }
        bson_append_array_end(out, &arr);
    }
}

/*
 * In transaction s: every document of c (NULL: none) holding role@db is
 * rewritten without it (but skip_id's, the role being dropped). The
 * documents are read first, then rewritten, so the scan never meets its
 * own writes. 0, MF_CONFLICT, or -1 with err.
 */
static int
pull_everywhere(mf_sess_t *s, mf_coll_t *c, const char *role, const char *db, const char *skip_id, mf_error_t *err)
{
    mf_cur_t *cur;
    int64_t *rids = NULL;
    size_t n = 0, cap = 0;
    int r, rc = 0;
    if (c == NULL)
        return 0;
    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    while ((r = mf_cur_next(cur)) == 0) {
        const uint8_t *v;
        size_t len;
        bson_t view;
        bson_iter_t it;
        mf_cur_value(cur, &v, &len);
        if (!bson_init_static(&view, v, len) || !holds_role(&view, role, db))
            continue;
        if (skip_id != NULL && bson_iter_init_find(&it, &view, "_id") && BSON_ITER_HOLDS_UTF8(&it) &&
            strcmp(bson_iter_utf8(&it, NULL), skip_id) == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            rids = mf_realloc(rids, cap * sizeof(*rids));
        }
        rids[n++] = mf_cur_rid(cur);
    }
    mf_cur_close(cur);
    if (r != MF_NOTFOUND)
        rc = r == MF_CONFLICT ? MF_CONFLICT : mf_err_set(err, MF_E_InternalError, "scanning %s failed", c->ns);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        bson_t old, doc;
        rc = mf_coll_fetch(s, c, rids[i], &old, err);
        if (rc != 0)
            break;
        pull_role(&old, role, db, &doc);
        rc = mf_coll_replace(s, c, rids[i], &old, &doc, err);
        bson_destroy(&old);
        bson_destroy(&doc);
    }
    free(rids);
    return rc;
}

typedef struct role_drop {
    mf_coll_t *roles, *users;
    const bson_value_t *idv;
    const char *id, *db, *role;
} role_drop_t;

/* As mongod's one transaction: the holders lose the role, then it goes. */
static int
drop_body(mf_sess_t *s, void *arg, mf_error_t *err)
{
    role_drop_t *d = arg;
    int64_t rid = 0;
    bson_t old;
    int rc = mf_coll_find_id(s, d->roles, d->idv, &rid, err);
    if (rc == MF_NOTFOUND)
        return mf_err_set(err, MF_E_RoleNotFound, "Could not find role: %s@%s", d->role, d->db);
    if (rc == 0)
        rc = pull_everywhere(s, d->users, d->role, d->db, NULL, err);
    if (rc == 0)
        rc = pull_everywhere(s, d->roles, d->role, d->db, d->id, err);
    if (rc == 0 && (rc = mf_coll_fetch(s, d->roles, rid, &old, err)) == 0) {
        rc = mf_coll_remove(s, d->roles, rid, &old, err);
        bson_destroy(&old);
    }
    return rc;
}

int
mf_roles_drop(mf_catalog_t *cat, const char *db, const char *role, mf_error_t *err)
{
    mf_coll_t *c = NULL;
    char id[512], what[600];
    bson_value_t idv;
    int rc = -1;

    if (!user_id(db, role, id, sizeof(id), &idv))
        return mf_err_set(err, MF_E_RoleNotFound, "Could not find role: %s@%s", role, db);
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    if (mf_catalog_coll_acquire(cat, MF_USERS_DB, MF_ROLES_COLL, false, &c, err) != 0)
        goto done;
    if (c == NULL) {
        mf_err_set(err, MF_E_RoleNotFound, "Could not find role: %s@%s", role, db);
        goto done;
    }
    role_drop_t d = {.roles = c, .users = mf_catalog_coll_find(cat, MF_USERS_DB, MF_USERS_COLL), .idv = &idv,
                     .id = id, .db = db, .role = role};
    snprintf(what, sizeof(what), "dropping role %s@%s", role, db);
    rc = durable_txn(s, drop_body, &d, what, err);
done:
    mf_catalog_unlock(cat);
    mf_storage_session_release(s);
    return rc == 0 ? 0 : -1;
}

static int
stop_at_first(void *arg, const bson_t *user)
{
    (void)user;
    *(bool *)arg = true;
    return 1;
}

bool
mf_users_exist(mf_catalog_t *cat)
{
    bool any = false;
    mf_error_t err;
    /* As mongod's hasAnyPrivilegeDocuments: a user or a role. Cannot tell: the localhost exception stays closed. */
    if (mf_users_each(cat, NULL, stop_at_first, &any, &err) != 0 ||
        (!any && mf_roles_each(cat, NULL, stop_at_first, &any, &err) != 0))
        return true;
    return any;
}

int
mf_users_credentials(bson_t *doc, const mf_saslprep_t *prep, const char *user, const char *password,
                     size_t password_len, unsigned mechs, bool predigested, mf_error_t *err)
{
    bson_t creds;
    mf_scram_cred_t c1, c256;
    char *prepped = NULL;
    int rc = -1;
    /* SASLprep first: a refused password fails before any key derivation. */
    if ((mechs & MF_MECH_SHA256) != 0 && mf_saslprep_prepare(prep, password, password_len, &prepped, err) != 0)
        goto done;
    if ((mechs & MF_MECH_SHA1) != 0) {
        char hashed[33] = "";
        if (!predigested)
            mf_scram_sha1_password(user, password, hashed);
        int r = mf_scram_make_cred(MF_SCRAM_SHA1, predigested ? password : hashed, NULL, 0, 10000, &c1, err);
        OPENSSL_cleanse(hashed, sizeof(hashed));
        if (r != 0)
            goto done;
    }
    if ((mechs & MF_MECH_SHA256) != 0 && mf_scram_make_cred(MF_SCRAM_SHA256, prepped, NULL, 0, 15000, &c256, err) != 0)
        goto done;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "credentials", &creds);
    if ((mechs & MF_MECH_SHA1) != 0)
        mf_scram_cred_append(&creds, "SCRAM-SHA-1", &c1);
    if ((mechs & MF_MECH_SHA256) != 0)
        mf_scram_cred_append(&creds, "SCRAM-SHA-256", &c256);
    bson_append_document_end(doc, &creds);
    rc = 0;
done:
    if (prepped != NULL)
        OPENSSL_cleanse(prepped, strlen(prepped));
    free(prepped);
    return rc;
}

int
mf_users_cred(const bson_t *user, mf_scram_mech_t mech, mf_scram_cred_t *out)
{
    bson_iter_t it, c;
    const uint8_t *data;
    uint32_t len;
    bson_t d;
    if (!bson_iter_init_find(&it, user, "credentials") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &c) || !bson_iter_find(&c, mech == MF_SCRAM_SHA1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256") ||
        !BSON_ITER_HOLDS_DOCUMENT(&c))
        return -1;
    bson_iter_document(&c, &len, &data);
    if (!bson_init_static(&d, data, len))
        return -1;
    return mf_scram_cred_read(mech, &d, out);
}

/* Observer callbacks: any change to admin.system.users or admin.system.roles bumps the generation. */
static bool
is_users(const struct mf_coll *c)
{
    return strcmp(c->db, MF_USERS_DB) == 0 &&
           (strcmp(c->name, MF_USERS_COLL) == 0 || strcmp(c->name, MF_ROLES_COLL) == 0);
}

static bool
is_auth_ns(const char *ns)
{
    return ns != NULL && (strcmp(ns, MF_USERS_DB "." MF_USERS_COLL) == 0 || strcmp(ns, MF_USERS_DB "." MF_ROLES_COLL) == 0);
}

static _Thread_local bool tls_users_written;

static void
bump(void *arg)
{
    atomic_fetch_add((_Atomic int64_t *)arg, 1);
}

static void
on_insert(void *arg, struct mf_coll *c, const bson_t *doc)
{
    (void)doc;
    if (is_users(c)) {
        tls_users_written = true;
        bump(arg);
    }
}

static void
on_update(void *arg, struct mf_coll *c, const bson_t *olddoc, const bson_t *newdoc)
{
    (void)olddoc;
    on_insert(arg, c, newdoc);
}

static void
on_delete(void *arg, struct mf_coll *c, const bson_t *olddoc)
{
    on_insert(arg, c, olddoc);
}

/* After the commit too: a reader that refreshed between the write and its commit saw the old users. */
static void
on_txn_end(void *arg, bool committed)
{
    (void)committed;
    if (tls_users_written) {
        tls_users_written = false;
        bump(arg);
    }
}

static void
on_ddl(void *arg, const mf_ddl_event_t *ev)
{
    if (is_auth_ns(ev->ns) || is_auth_ns(ev->to_ns) || (ev->kind == MF_DDL_DROP_DB && strcmp(ev->ns, MF_USERS_DB) == 0))
        bump(arg);
}

mf_observer_t
mf_users_watch(_Atomic int64_t *gen)
{
    mf_observer_t o;
    memset(&o, 0, sizeof(o));
    o.on_insert = on_insert;
    o.on_update = on_update;
    o.on_delete = on_delete;
    o.on_txn_end = on_txn_end;
    o.on_ddl = on_ddl;
    o.arg = (void *)gen;
    return o;
}
