/*
 * users.h: the user documents in admin.system.users (issue 10).
 *
 * A user is one document, in MongoDB's own shape, so that a root user can
 * read it and replication copies it like any other:
 *
 *   {_id: "<db>.<user>", userId: UUID, user, db,
 *    credentials: {"SCRAM-SHA-1": {iterationCount, salt, storedKey, serverKey},
 *                  "SCRAM-SHA-256": {...}},
 *    roles: [{role, db}], customData?}
 *
 * Only SCRAM credentials are kept (scram.h): never the password or anything
 * it can be recovered from. Writes go through the collection layer in their
 * own transaction, committed durably, so the oplog (repl/) and the write
 * observers see them as any other write; the collection is created on the
 * first user.
 *
 * Readers do not cache: each lookup is one _id index probe. Whoever caches
 * privileges (cmd/cmd_auth.c, per connection) compares the generation
 * mf_users_gen returns, which mf_users_watch's observer bumps on every
 * change to admin.system.users (a command's, an oplog entry's, a drop's).
 *
 * Every function opens and ends its own catalog lock session on the
 * calling thread's storage session: call with no lock session open.
 */
#ifndef MF_USERS_H
#define MF_USERS_H

#include <bson/bson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "auth/saslprep.h"
#include "auth/scram.h"
#include "catalog/catalog.h"
#include "catalog/observer.h"
#include "common/error.h"

#define MF_USERS_DB "admin"
#define MF_USERS_COLL "system.users"
#define MF_ROLES_COLL "system.roles"

/* The credential kinds a user may have (createUser's mechanisms). */
#define MF_MECH_SHA1 0x1
#define MF_MECH_SHA256 0x2

/*
 * mf_users_get: the user user@db into out (initialised here with a copy;
 * the caller destroys it). Returns 0, MF_NOTFOUND (out not initialised), or
 * -1 with err.
 */
int mf_users_get(mf_catalog_t *cat, const char *db, const char *user, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_users_insert: stores a new user document (its _id "<db>.<user>" set);
 * 51003 (mongod's unnamed Error(51003)) if there is one. mf_users_replace: replaces the
 * document with doc's _id; 11 UserNotFound if there is none. Both commit
 * durably. 0, or -1 with err.
 */
int mf_users_insert(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err) MF_WUR;
int mf_users_replace(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err) MF_WUR;

/*
 * mf_users_rewrite / mf_roles_rewrite: a read-modify-write of user@db's
 * (role@db's) document in one durable transaction: fn(arg, old, out, err)
 * appends the new document to out (initialised; old is valid during the
 * call) and returns 0, or -1 with err to change nothing. On a write
 * conflict (a concurrent change of the same document) the transaction is
 * retried, calling fn again with the newer document, so no change is lost.
 * 11 / 31 when there is no such document. 0, or -1 with err.
 */
typedef int (*mf_rewrite_fn)(void *arg, const bson_t *old, bson_t *out, mf_error_t *err);
int mf_users_rewrite(mf_catalog_t *cat, const char *db, const char *user, mf_rewrite_fn fn, void *arg,
                     mf_error_t *err) MF_WUR;
int mf_roles_rewrite(mf_catalog_t *cat, const char *db, const char *role, mf_rewrite_fn fn, void *arg,
                     mf_error_t *err) MF_WUR;

/* mf_users_remove: removes user@db (11 UserNotFound if missing). 0, or -1 with err. */
int mf_users_remove(mf_catalog_t *cat, const char *db, const char *user, mf_error_t *err) MF_WUR;

/*
 * mf_users_each: calls fn for each user document of db (every database's
 * with db NULL) in _id order, each valid only during its call; fn returns
 * non-zero to stop. 0, or -1 with err.
 */
int mf_users_each(mf_catalog_t *cat, const char *db, int (*fn)(void *arg, const bson_t *user), void *arg,
                  mf_error_t *err) MF_WUR;

/*
 * mf_auth_coll_each: as mf_users_each over any collection cdb.coll (the
 * staging collections _mergeAuthzCollections reads user and role documents
 * from): fn sees each document whose db field is db (every one with db
 * NULL), nothing when the collection does not exist. fn must not write
 * (the read holds a transaction and the catalog lock). 0, or -1 with err.
 */
int mf_auth_coll_each(mf_catalog_t *cat, const char *cdb, const char *coll, const char *db,
                      int (*fn)(void *arg, const bson_t *doc), void *arg, mf_error_t *err) MF_WUR;

/*
 * User-defined roles, in admin.system.roles, in MongoDB's shape:
 *
 *   {_id: "<db>.<role>", role, db, privileges: [{resource, actions}],
 *    roles: [{role, db}]}
 *
 * mf_roles_get, mf_roles_insert (51002 if the role exists), mf_roles_replace,
 * mf_roles_remove (31 RoleNotFound if it does not) and mf_roles_each work as
 * their mf_users_ twins, on the role document's "role" and "db".
 */
int mf_roles_get(mf_catalog_t *cat, const char *db, const char *role, bson_t *out, mf_error_t *err) MF_WUR;
int mf_roles_insert(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err) MF_WUR;
int mf_roles_replace(mf_catalog_t *cat, const bson_t *doc, mf_error_t *err) MF_WUR;
int mf_roles_remove(mf_catalog_t *cat, const char *db, const char *role, mf_error_t *err) MF_WUR;
int mf_roles_each(mf_catalog_t *cat, const char *db, int (*fn)(void *arg, const bson_t *role), void *arg,
                  mf_error_t *err) MF_WUR;
/*
 * mf_roles_drop: drops role@db as mongod's dropRole, in one durable
 * transaction (retried on a write conflict): every user and role holding
 * it loses it, then the role's document goes. 31 "Could not find role:
 * role@db" if there is none. 0, or -1 with err.
 */
int mf_roles_drop(mf_catalog_t *cat, const char *db, const char *role, mf_error_t *err) MF_WUR;

/*
 * mf_users_exist: whether at least one user or user-defined role exists
 * (mongod's privilege documents: the localhost exception ends with the
 * first; the caller latches it, as mongod does, so renaming or dropping
 * them later does not reopen it).
 */
bool mf_users_exist(mf_catalog_t *cat);

/*
 * mf_users_credentials: appends {"SCRAM-SHA-1": ..., "SCRAM-SHA-256": ...}
 * for the mechanisms in mechs (MF_MECH_*) as field "credentials" of doc,
 * derived from password (password_len bytes of UTF-8) with fresh random
 * salts (MongoDB's iteration counts: 10,000 for SHA-1, 15,000 for SHA-256).
 * As mongod's buildCredentials: SHA-1 from hex(MD5(user ":mongo:"
 * password)), SHA-256 from the password SASLprep'd with prep (saslprep.h);
 * a password SASLprep refuses fails with its error (50692) when mechs has
 * SHA-256, and nothing is appended. predigested (createUser's
 * digestPassword: false; SHA-1 only): password is already that hex MD5.
 * 0, or -1 with err.
 */
int mf_users_credentials(bson_t *doc, const mf_saslprep_t *prep, const char *user, const char *password,
                         size_t password_len, unsigned mechs, bool predigested, mf_error_t *err) MF_WUR;

/* mf_users_cred: user doc's credential for mech. 0, or -1 if it has none. */
int mf_users_cred(const bson_t *user, mf_scram_mech_t mech, mf_scram_cred_t *out);

/*
 * mf_users_watch: an observer that bumps *gen on every change to
 * admin.system.users or admin.system.roles (register it before serving). mf_users_gen: the
 * current generation.
 */
mf_observer_t mf_users_watch(_Atomic int64_t *gen);

#endif /* MF_USERS_H */
