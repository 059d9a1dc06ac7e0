/*
 * scram.h: the server side of SCRAM-SHA-1 and SCRAM-SHA-256 (RFC 5802,
 * RFC 7677) as MongoDB speaks them through saslStart / saslContinue (issue
 * 10's authentication; not wired into the command layer yet).
 *
 * Everything cryptographic is OpenSSL's (PBKDF2, HMAC, SHA-1/256, base64,
 * random bytes): no home-made primitives. A user's stored credential is
 * what MongoDB keeps in admin.system.users: the salt, the iteration count,
 * StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
 * HMAC(SaltedPassword, "Server Key"); never the password or anything it can
 * be recovered from.
 *
 * MongoDB's SCRAM-SHA-1 salts hex(MD5(user ":mongo:" password)) instead of
 * the password (mf_scram_sha1_password); SCRAM-SHA-256 uses the password
 * SASLprep'd (RFC 4013, auth/saslprep.h), which whoever builds a credential
 * or a client proof does before calling here: these functions take the
 * mechanism's input as given. The server side never sees a password (only
 * the stored credential), and the user name of the client-first message is
 * looked up as sent, never SASLprep'd, as mongod's.
 *
 * A conversation (mf_scram_t) belongs to one connection's authentication
 * attempt: parse the client-first message (which names the user), build the
 * server-first with that user's credential, then check the client-final's
 * proof and answer with the server signature. No locks, no globals.
 */
#ifndef MF_SCRAM_H
#define MF_SCRAM_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef enum { MF_SCRAM_SHA1 = 1, MF_SCRAM_SHA256 = 256 } mf_scram_mech_t;

#define MF_SCRAM_MAX_KEY 32
#define MF_SCRAM_MAX_SALT 64

typedef struct mf_scram_cred {
    mf_scram_mech_t mech;
    int iterations;
    uint8_t salt[MF_SCRAM_MAX_SALT];
    size_t salt_len;
    uint8_t stored_key[MF_SCRAM_MAX_KEY];
    uint8_t server_key[MF_SCRAM_MAX_KEY];
} mf_scram_cred_t;

/* The hash's output size: 20 (SHA-1) or 32 (SHA-256). */
size_t mf_scram_key_len(mf_scram_mech_t mech);

/* mf_scram_mech_of: "SCRAM-SHA-1" / "SCRAM-SHA-256" to a mechanism; 0 if neither. */
mf_scram_mech_t mf_scram_mech_of(const char *name);

/*
 * mf_scram_sha1_password: MongoDB's SCRAM-SHA-1 password input,
 * hex(MD5(user ":mongo:" password)), into out (33 bytes, NUL-terminated).
 */
void mf_scram_sha1_password(const char *user, const char *password, char out[33]);

/*
 * mf_scram_make_cred: the stored credential for password (already the
 * mechanism's input: see above) with salt (NULL: 16 random bytes for SHA-256,
 * 16 for SHA-1) and iterations (>= 4096). Returns 0, or -1 with err.
 */
int mf_scram_make_cred(mf_scram_mech_t mech, const char *password, const uint8_t *salt, size_t salt_len,
                       int iterations, mf_scram_cred_t *out, mf_error_t *err) MF_WUR;

typedef struct mf_scram mf_scram_t;

/* mf_scram_new: a conversation for mech. Never NULL. */
mf_scram_t *mf_scram_new(mf_scram_mech_t mech);
void mf_scram_free(mf_scram_t *s);

/*
 * mf_scram_client_first: parses "n,,n=<user>,r=<nonce>" (channel binding
 * refused, an authzid allowed). Returns 0 and the user through
 * mf_scram_user, or -1 with err (17 ProtocolError... as MongoDB: 18
 * AuthenticationFailed for anything malformed).
 */
int mf_scram_client_first(mf_scram_t *s, const char *msg, size_t len, mf_error_t *err) MF_WUR;

/* mf_scram_user: the user the client-first named (valid while s lives), or NULL. */
const char *mf_scram_user(const mf_scram_t *s);

/*
 * mf_scram_server_first: the server-first message for the user's credential
 * (its mechanism must be s's): "r=<client nonce><server nonce>,s=<salt>,i=<n>".
 * server_nonce NULL: 24 random bytes, base64. *out is malloc'd (NUL-terminated;
 * the caller frees it). Returns 0, or -1 with err.
 */
int mf_scram_server_first(mf_scram_t *s, const mf_scram_cred_t *cred, const char *server_nonce, char **out,
                          mf_error_t *err) MF_WUR;

/*
 * mf_scram_client_final: checks "c=biws,r=<nonce>,p=<proof>" against the
 * credential: 0 with *out the server-final "v=<signature>" (malloc'd) when
 * the proof is right, else -1 with err 18 AuthenticationFailed.
 */
int mf_scram_client_final(mf_scram_t *s, const char *msg, size_t len, char **out, mf_error_t *err) MF_WUR;

/*
 * mf_scram_cred_append: appends the credential as admin.system.users keeps
 * it, {iterationCount, salt, storedKey, serverKey} (base64 strings), to
 * parent under key. mf_scram_cred_read: the reverse for mech from such a
 * document; 0, or -1 if it is missing or malformed.
 */
void mf_scram_cred_append(bson_t *parent, const char *key, const mf_scram_cred_t *cred);
int mf_scram_cred_read(mf_scram_mech_t mech, const bson_t *doc, mf_scram_cred_t *out);

/*
 * The client side (a replica-set member authenticating to another with the
 * keyFile). mf_scram_client_begin: the client-first message for user into
 * *out (malloc'd). mf_scram_client_respond: given the server-first message,
 * the client-final (with the proof for password, already the mechanism's
 * input) into *out (malloc'd). mf_scram_client_check: the server-final's
 * signature must be the one the password implies. Each returns 0, or -1
 * with err (18 for anything malformed or wrong).
 */
int mf_scram_client_begin(mf_scram_t *s, const char *user, char **out, mf_error_t *err) MF_WUR;
int mf_scram_client_respond(mf_scram_t *s, const char *password, const char *msg, size_t len, char **out,
                            mf_error_t *err) MF_WUR;
int mf_scram_client_check(mf_scram_t *s, const char *msg, size_t len, mf_error_t *err) MF_WUR;

/* mf_scram_random: n cryptographically random bytes (OpenSSL's RAND_bytes). 0, or -1 if none are available. */
int mf_scram_random(uint8_t *out, size_t n);

#endif /* MF_SCRAM_H */
