/*
 * scram.c: SCRAM server conversations over OpenSSL (see scram.h).
 *
 * The messages are short ASCII attribute lists; they are parsed by hand
 * because SCRAM's grammar is three comma-separated lines, not a standard
 * format a library here parses (the cryptography is all OpenSSL's).
 * Comparisons of keys use CRYPTO_memcmp (constant time).
 */
#include "auth/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

#define MAX_MSG 4096

struct mf_scram {
    mf_scram_mech_t mech;
    char *user;
    char *client_first_bare; /* "n=<user>,r=<cnonce>" */
    char *client_nonce;
    char *server_first;
    char *nonce; /* client nonce + server nonce */
    mf_scram_cred_t cred;
    int step; /* 0 new, 1 client-first parsed, 2 server-first sent, 3 done */
    uint8_t expect_sig[MF_SCRAM_MAX_KEY]; /* client side: the server signature the server-final must carry */
};

static const EVP_MD *
md_of(mf_scram_mech_t mech)
{
    return mech == MF_SCRAM_SHA1 ? EVP_sha1() : EVP_sha256();
}

size_t
mf_scram_key_len(mf_scram_mech_t mech)
{
    return mech == MF_SCRAM_SHA1 ? 20 : 32;
}

mf_scram_mech_t
mf_scram_mech_of(const char *name)
{
    if (strcmp(name, "SCRAM-SHA-1") == 0)
        return MF_SCRAM_SHA1;
    if (strcmp(name, "SCRAM-SHA-256") == 0)
        return MF_SCRAM_SHA256;
    return 0;
}

void
mf_scram_sha1_password(const char *user, const char *password, char out[33])
{
    uint8_t d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_md5(), NULL);
    EVP_DigestUpdate(ctx, user, strlen(user));
    EVP_DigestUpdate(ctx, ":mongo:", 7);
    EVP_DigestUpdate(ctx, password, strlen(password));
    EVP_DigestFinal_ex(ctx, d, &dl);
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; i < dl && i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
    out[32] = '\0';
}

/* base64 of n bytes into a malloc'd NUL-terminated string. */
static char *
b64(const uint8_t *p, size_t n)
{
    char *out = mf_malloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

/* Decodes base64 s (len bytes) into out (cap bytes). Returns the length, or -1 if malformed or too long. */
static int
unb64(const char *s, size_t len, uint8_t *out, size_t cap)
{
    if (len == 0 || len % 4 != 0 || len / 4 * 3 > cap + 2)
        return -1;
    uint8_t *tmp = mf_malloc(len / 4 * 3 + 1);
    int n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)len);
    if (n >= 0) {
        if (len >= 1 && s[len - 1] == '=')
            n--;
        if (len >= 2 && s[len - 2] == '=')
            n--;
    }
    if (n < 0 || (size_t)n > cap) {
        free(tmp);
        return -1;
    }
    memcpy(out, tmp, (size_t)n);
    free(tmp);
    return n;
}

static int
hmac(mf_scram_mech_t mech, const uint8_t *key, size_t klen, const void *msg, size_t mlen, uint8_t *out)
{
    unsigned ol = 0;
    return HMAC(md_of(mech), key, (int)klen, msg, mlen, out, &ol) != NULL ? 0 : -1;
}

static int
hash(mf_scram_mech_t mech, const uint8_t *p, size_t n, uint8_t *out)
{
    unsigned ol = 0;
    return EVP_Digest(p, n, out, &ol, md_of(mech), NULL) == 1 ? 0 : -1;
}

int
mf_scram_make_cred(mf_scram_mech_t mech, const char *password, const uint8_t *salt, size_t salt_len, int iterations,
                   mf_scram_cred_t *out, mf_error_t *err)
{
    size_t kl = mf_scram_key_len(mech);
    uint8_t salted[MF_SCRAM_MAX_KEY], client_key[MF_SCRAM_MAX_KEY];
    memset(out, 0, sizeof(*out));
    if (iterations < 4096)
        return mf_err_set(err, MF_E_BadValue, "SCRAM iteration count must be at least 4096");
    out->mech = mech;
    out->iterations = iterations;
    if (salt != NULL) {
        if (salt_len == 0 || salt_len > MF_SCRAM_MAX_SALT)
            return mf_err_set(err, MF_E_BadValue, "bad SCRAM salt length %zu", salt_len);
        memcpy(out->salt, salt, salt_len);
        out->salt_len = salt_len;
    } else {
        out->salt_len = mech == MF_SCRAM_SHA1 ? 16 : 28;
        if (RAND_bytes(out->salt, (int)out->salt_len) != 1)
            return mf_err_set(err, MF_E_InternalError, "no random bytes for a SCRAM salt");
    }
    if (PKCS5_PBKDF2_HMAC(password, (int)strlen(password), out->salt, (int)out->salt_len, iterations, md_of(mech),
                          (int)kl, salted) != 1 ||
        hmac(mech, salted, kl, "Client Key", 10, client_key) != 0 || hash(mech, client_key, kl, out->stored_key) != 0 ||
        hmac(mech, salted, kl, "Server Key", 10, out->server_key) != 0) {
        OPENSSL_cleanse(salted, sizeof(salted));
        return mf_err_set(err, MF_E_InternalError, "SCRAM key derivation failed");
    }
    OPENSSL_cleanse(salted, sizeof(salted));
    OPENSSL_cleanse(client_key, sizeof(client_key));
    return 0;
}

mf_scram_t *
mf_scram_new(mf_scram_mech_t mech)
{
    mf_scram_t *s = mf_calloc(1, sizeof(*s));
    s->mech = mech;
    return s;
}

void
mf_scram_free(mf_scram_t *s)
{
    if (s == NULL)
        return;
    free(s->user);
    free(s->client_first_bare);
    free(s->client_nonce);
    free(s->server_first);
    free(s->nonce);
    OPENSSL_cleanse(&s->cred, sizeof(s->cred));
    free(s);
}

const char *
mf_scram_user(const mf_scram_t *s)
{
    return s->user;
}

static int
auth_failed(mf_error_t *err, const char *why)
{
    return mf_err_set(err, MF_E_AuthenticationFailed, "Authentication failed: %s", why);
}

/* A copy of the value of attribute `a=` at p (up to the next ',' or end). Decodes =2C and =3D when name is set. */
static char *
attr_value(const char *p, const char *end, bool name)
{
    const char *e = memchr(p, ',', (size_t)(end - p));
    if (e == NULL)
        e = end;
    char *out = mf_malloc((size_t)(e - p) + 1), *o = out;
    for (const char *q = p; q < e; q++) {
        if (name && *q == '=' && e - q >= 3 && (strncmp(q, "=2C", 3) == 0 || strncmp(q, "=3D", 3) == 0)) {
            *o++ = q[2] == 'C' ? ',' : '=';
            q += 2;
        } else {
            *o++ = *q;
        }
    }
    *o = '\0';
    return out;
}

int
mf_scram_client_first(mf_scram_t *s, const char *msg, size_t len, mf_error_t *err)
{
    const char *end = msg + len, *p = msg;
    if (s->step != 0 || len == 0 || len > MAX_MSG || memchr(msg, '\0', len) != NULL)
        return auth_failed(err, "malformed SCRAM client-first message");
    /* gs2 header: "n," or "y," (no channel binding here), then an optional "a=authzid", then ",". */
    if (len < 3 || (p[0] != 'n' && p[0] != 'y') || p[1] != ',')
        return auth_failed(err, "SCRAM channel binding is not supported");
    p += 2;
    const char *comma = memchr(p, ',', (size_t)(end - p));
    if (comma == NULL)
        return auth_failed(err, "malformed SCRAM gs2 header");
    p = comma + 1;
    if (end - p < 3 || strncmp(p, "n=", 2) != 0)
        return auth_failed(err, "SCRAM client-first message must start with n=<user>");
    const char *bare = p;
    s->user = attr_value(p + 2, end, true);
    p = memchr(p, ',', (size_t)(end - p));
    if (p == NULL || end - p < 4 || strncmp(p + 1, "r=", 2) != 0 || s->user[0] == '\0') {
        free(s->user);
        s->user = NULL;
        return auth_failed(err, "SCRAM client-first message needs n=<user>,r=<nonce>");
    }
    s->client_nonce = attr_value(p + 3, end, false);
    if (s->client_nonce[0] == '\0')
        return auth_failed(err, "empty SCRAM client nonce");
    s->client_first_bare = mf_malloc((size_t)(end - bare) + 1);
    memcpy(s->client_first_bare, bare, (size_t)(end - bare));
    s->client_first_bare[end - bare] = '\0';
    s->step = 1;
    return 0;
}

int
mf_scram_server_first(mf_scram_t *s, const mf_scram_cred_t *cred, const char *server_nonce, char **out,
                      mf_error_t *err)
{
    char *snonce = NULL, *salt = NULL;
    if (s->step != 1 || cred->mech != s->mech)
        return auth_failed(err, "SCRAM conversation out of order");
    s->cred = *cred;
    if (server_nonce == NULL) {
        uint8_t r[24];
        if (RAND_bytes(r, sizeof(r)) != 1)
            return mf_err_set(err, MF_E_InternalError, "no random bytes for a SCRAM nonce");
        snonce = b64(r, sizeof(r));
    } else {
        snonce = mf_strdup(server_nonce);
    }
    size_t nl = strlen(s->client_nonce) + strlen(snonce) + 1;
    s->nonce = mf_malloc(nl);
    snprintf(s->nonce, nl, "%s%s", s->client_nonce, snonce);
    salt = b64(cred->salt, cred->salt_len);
    size_t ol = strlen(s->nonce) + strlen(salt) + 32;
    s->server_first = mf_malloc(ol);
    snprintf(s->server_first, ol, "r=%s,s=%s,i=%d", s->nonce, salt, cred->iterations);
    *out = mf_strdup(s->server_first);
    free(snonce);
    free(salt);
    s->step = 2;
    return 0;
}

int
mf_scram_client_final(mf_scram_t *s, const char *msg, size_t len, char **out, mf_error_t *err)
{
    const char *end = msg + len;
    size_t kl = mf_scram_key_len(s->mech);
    uint8_t proof[MF_SCRAM_MAX_KEY], sig[MF_SCRAM_MAX_KEY], client_key[MF_SCRAM_MAX_KEY], check[MF_SCRAM_MAX_KEY];
    int rc = -1;
    char *auth = NULL;
    if (s->step != 2 || len == 0 || len > MAX_MSG || memchr(msg, '\0', len) != NULL)
        return auth_failed(err, "SCRAM conversation out of order");
    s->step = 3; /* one try per conversation */
    /* "c=<b64 gs2 header>,r=<nonce>[,extensions],p=<proof>" */
    if (len < 2 || strncmp(msg, "c=", 2) != 0)
        return auth_failed(err, "SCRAM client-final message must start with c=");
    /* msg is len bytes, not NUL-terminated (a BinData payload): searches stay within it. */
    const char *r = NULL;
    const char *pp = NULL;
    for (const char *q = msg; q + 3 <= end; q++) {
        if (r == NULL && memcmp(q, ",r=", 3) == 0)
            r = q; /* the first one */
        if (memcmp(q, ",p=", 3) == 0)
            pp = q; /* the last one: the proof closes the message */
    }
    if (r == NULL || pp == NULL || r > pp)
        return auth_failed(err, "SCRAM client-final message needs r= and p=");
    /* The channel binding must be base64 of the gs2 header without binding ("n,," or "y,,": biws / eSws). */
    if (!((r - msg == 6 && (strncmp(msg + 2, "biws", 4) == 0 || strncmp(msg + 2, "eSws", 4) == 0))))
        return auth_failed(err, "SCRAM channel binding mismatch");
    size_t nlen = strlen(s->nonce);
    const char *rn = r + 3;
    const char *rend = memchr(rn, ',', (size_t)(end - rn));
    if (rend == NULL || (size_t)(rend - rn) != nlen || memcmp(rn, s->nonce, nlen) != 0)
        return auth_failed(err, "SCRAM nonce mismatch");
    if (unb64(pp + 3, (size_t)(end - pp - 3), proof, sizeof(proof)) != (int)kl)
        return auth_failed(err, "malformed SCRAM proof");
    /* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
    size_t al = strlen(s->client_first_bare) + strlen(s->server_first) + (size_t)(pp - msg) + 3;
    auth = mf_malloc(al);
    int an = snprintf(auth, al, "%s,%s,%.*s", s->client_first_bare, s->server_first, (int)(pp - msg), msg);
    if (hmac(s->mech, s->cred.stored_key, kl, auth, (size_t)an, sig) != 0)
        goto out;
    for (size_t i = 0; i < kl; i++)
        client_key[i] = proof[i] ^ sig[i];
    if (hash(s->mech, client_key, kl, check) != 0 || CRYPTO_memcmp(check, s->cred.stored_key, kl) != 0) {
        auth_failed(err, "SCRAM proof mismatch");
        goto out;
    }
    if (hmac(s->mech, s->cred.server_key, kl, auth, (size_t)an, sig) != 0)
        goto out;
    char *v = b64(sig, kl);
    size_t vl = strlen(v) + 3;
    *out = mf_malloc(vl);
    snprintf(*out, vl, "v=%s", v);
    free(v);
    rc = 0;
out:
    if (rc != 0 && err->code == 0)
        mf_err_set(err, MF_E_InternalError, "SCRAM computation failed");
    OPENSSL_cleanse(client_key, sizeof(client_key));
    free(auth);
    return rc;
}

void
mf_scram_cred_append(bson_t *parent, const char *key, const mf_scram_cred_t *cred)
{
    bson_t d;
    size_t kl = mf_scram_key_len(cred->mech);
    char *salt = b64(cred->salt, cred->salt_len), *sk = b64(cred->stored_key, kl), *vk = b64(cred->server_key, kl);
    BSON_APPEND_DOCUMENT_BEGIN(parent, key, &d);
    BSON_APPEND_INT32(&d, "iterationCount", cred->iterations);
    BSON_APPEND_UTF8(&d, "salt", salt);
    BSON_APPEND_UTF8(&d, "storedKey", sk);
    BSON_APPEND_UTF8(&d, "serverKey", vk);
    bson_append_document_end(parent, &d);
    free(salt);
    free(sk);
    free(vk);
}

int
mf_scram_cred_read(mf_scram_mech_t mech, const bson_t *doc, mf_scram_cred_t *out)
{
    bson_iter_t it;
    size_t kl = mf_scram_key_len(mech);
    bool have_salt = false, have_sk = false, have_vk = false;
    memset(out, 0, sizeof(*out));
    out->mech = mech;
    if (!bson_iter_init(&it, doc))
        return -1;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        uint32_t len = 0;
        if (strcmp(k, "iterationCount") == 0 && BSON_ITER_HOLDS_NUMBER(&it)) {
            int64_t n = bson_iter_as_int64(&it);
            out->iterations = n >= 4096 && n <= 100000000 ? (int)n : 0;
        } else if (BSON_ITER_HOLDS_UTF8(&it)) {
            const char *v = bson_iter_utf8(&it, &len);
            if (strcmp(k, "salt") == 0) {
                int n = unb64(v, len, out->salt, sizeof(out->salt));
                have_salt = n > 0;
                out->salt_len = n > 0 ? (size_t)n : 0;
            } else if (strcmp(k, "storedKey") == 0) {
                have_sk = unb64(v, len, out->stored_key, sizeof(out->stored_key)) == (int)kl;
            } else if (strcmp(k, "serverKey") == 0) {
                have_vk = unb64(v, len, out->server_key, sizeof(out->server_key)) == (int)kl;
            }
        }
    }
    return out->iterations > 0 && have_salt && have_sk && have_vk ? 0 : -1;
}

int
mf_scram_random(uint8_t *out, size_t n)
{
    return RAND_bytes(out, (int)n) == 1 ? 0 : -1;
}

/* ---------- the client side (members authenticating to each other with the keyFile) ---------- */

/* user with ',' and '=' escaped as SCRAM wants (=2C, =3D), malloc'd. */
static char *
escape_name(const char *user)
{
    char *out = mf_malloc(strlen(user) * 3 + 1), *o = out;
    for (const char *p = user; *p; p++) {
        if (*p == ',' || *p == '=') {
            memcpy(o, *p == ',' ? "=2C" : "=3D", 3);
            o += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

int
mf_scram_client_begin(mf_scram_t *s, const char *user, char **out, mf_error_t *err)
{
    uint8_t r[24];
    if (s->step != 0)
        return auth_failed(err, "SCRAM conversation out of order");
    if (RAND_bytes(r, sizeof(r)) != 1)
        return mf_err_set(err, MF_E_InternalError, "no random bytes for a SCRAM nonce");
    s->client_nonce = b64(r, sizeof(r));
    char *name = escape_name(user);
    size_t bl = strlen(name) + strlen(s->client_nonce) + 8;
    s->client_first_bare = mf_malloc(bl);
    snprintf(s->client_first_bare, bl, "n=%s,r=%s", name, s->client_nonce);
    free(name);
    size_t ol = strlen(s->client_first_bare) + 4;
    *out = mf_malloc(ol);
    snprintf(*out, ol, "n,,%s", s->client_first_bare);
    s->step = 1;
    return 0;
}

int
mf_scram_client_respond(mf_scram_t *s, const char *password, const char *msg, size_t len, char **out,
                        mf_error_t *err)
{
    size_t kl = mf_scram_key_len(s->mech);
    uint8_t salt[MF_SCRAM_MAX_SALT], salted[MF_SCRAM_MAX_KEY], client_key[MF_SCRAM_MAX_KEY],
        stored[MF_SCRAM_MAX_KEY], server_key[MF_SCRAM_MAX_KEY], sig[MF_SCRAM_MAX_KEY];
    char *nonce = NULL, *salt64 = NULL, *iters = NULL, *auth = NULL, *proof = NULL, *wo_proof = NULL;
    int rc = -1;

    if (s->step != 1 || len == 0 || len > MAX_MSG || memchr(msg, '\0', len) != NULL)
        return auth_failed(err, "SCRAM conversation out of order");
    s->step = 3;
    const char *end = msg + len, *p = msg;
    while (p < end) {
        if (end - p >= 2 && p[1] == '=') {
            char **dst = p[0] == 'r' ? &nonce : p[0] == 's' ? &salt64 : p[0] == 'i' ? &iters : NULL;
            if (dst != NULL && *dst == NULL)
                *dst = attr_value(p + 2, end, false);
        }
        const char *c = memchr(p, ',', (size_t)(end - p));
        p = c == NULL ? end : c + 1;
    }
    long n = iters != NULL ? strtol(iters, NULL, 10) : 0;
    int sl = salt64 != NULL ? unb64(salt64, strlen(salt64), salt, sizeof(salt)) : -1;
    if (nonce == NULL || strncmp(nonce, s->client_nonce, strlen(s->client_nonce)) != 0 ||
        strlen(nonce) == strlen(s->client_nonce) || sl <= 0 || n < 4096 || n > 10000000) {
        auth_failed(err, "malformed SCRAM server-first message");
        goto out;
    }
    s->server_first = mf_malloc(len + 1);
    memcpy(s->server_first, msg, len);
    s->server_first[len] = '\0';
    size_t wl = strlen(nonce) + 16;
    wo_proof = mf_malloc(wl);
    snprintf(wo_proof, wl, "c=biws,r=%s", nonce);
    size_t al = strlen(s->client_first_bare) + len + strlen(wo_proof) + 3;
    auth = mf_malloc(al);
    int an = snprintf(auth, al, "%s,%s,%s", s->client_first_bare, s->server_first, wo_proof);
    if (PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, sl, (int)n, md_of(s->mech), (int)kl, salted) != 1 ||
        hmac(s->mech, salted, kl, "Client Key", 10, client_key) != 0 || hash(s->mech, client_key, kl, stored) != 0 ||
        hmac(s->mech, stored, kl, auth, (size_t)an, sig) != 0 ||
        hmac(s->mech, salted, kl, "Server Key", 10, server_key) != 0 ||
        hmac(s->mech, server_key, kl, auth, (size_t)an, s->expect_sig) != 0) {
        mf_err_set(err, MF_E_InternalError, "SCRAM computation failed");
        goto out;
    }
    for (size_t i = 0; i < kl; i++)
        client_key[i] ^= sig[i];
    proof = b64(client_key, kl);
    size_t ol = strlen(wo_proof) + strlen(proof) + 4;
    *out = mf_malloc(ol);
    snprintf(*out, ol, "%s,p=%s", wo_proof, proof);
    s->step = 2;
    rc = 0;
out:
    OPENSSL_cleanse(salted, sizeof(salted));
    OPENSSL_cleanse(client_key, sizeof(client_key));
    free(nonce);
    free(salt64);
    free(iters);
    free(auth);
    free(proof);
    free(wo_proof);
    return rc;
}

int
mf_scram_client_check(mf_scram_t *s, const char *msg, size_t len, mf_error_t *err)
{
    size_t kl = mf_scram_key_len(s->mech);
    uint8_t v[MF_SCRAM_MAX_KEY];
    if (s->step != 2)
        return auth_failed(err, "SCRAM conversation out of order");
    s->step = 3;
    if (len < 3 || len > MAX_MSG || strncmp(msg, "v=", 2) != 0 || unb64(msg + 2, len - 2, v, sizeof(v)) != (int)kl ||
        CRYPTO_memcmp(v, s->expect_sig, kl) != 0)
        return auth_failed(err, "the server's SCRAM signature does not match");
    return 0;
}
