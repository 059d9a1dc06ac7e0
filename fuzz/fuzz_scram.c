/*
 * fuzz_scram.c: SCRAM message parsing (src/auth/scram.h), the server side of
 * SCRAM-SHA-1 / SCRAM-SHA-256 as saslStart / saslContinue will drive it.
 *
 * Feeds: byte 0 picks the mechanism (bit 0: SHA-1, else SHA-256) and how
 * the client-final is made (bit 1); the rest, split at its first newline, is
 * the client-first message and the client-final material. Each message is
 * handed over in a buffer of exactly its length with no NUL after it, as a
 * saslStart / saslContinue BinData payload arrives. The conversation runs as
 * the server runs it: mf_scram_client_first, mf_scram_server_first with a
 * fixed credential (password "pencil", 4096 iterations, computed once) and a
 * fixed server nonce, then mf_scram_client_final. With bit 1 clear the
 * second part is the client-final as sent; with bit 1 set the harness plays
 * an honest client: it sends "c=biws,r=<nonce>" + the second part + ",p=" +
 * the proof computed from the password (OpenSSL HMAC / SHA), so the fuzzer
 * also reaches the proof check and the server signature.
 *
 * Checks: no crash, leak, out-of-bounds read (the messages are not
 * NUL-terminated) or undefined behaviour; every failure is 18
 * AuthenticationFailed; the user named by an accepted client-first is a
 * NUL-terminated string; the server-first starts with "r=" followed by the
 * client's nonce; an honest client's proof is accepted (when its extension
 * part is well formed: empty or starting with ',', no NUL, no ",p=" of its
 * own, the whole message within the 4096-byte limit)
 * and answered with "v=..."; a conversation accepts at most one
 * client-final.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/scram.h"
#include "fuzz_common.h"

#define SERVER_NONCE "c2VydmVyLW5vbmNlLWZ1eno"

static const uint8_t salt[16] = "fuzz-salt-16byte";

typedef struct mech_state {
    mf_scram_cred_t cred;
    uint8_t client_key[MF_SCRAM_MAX_KEY]; /* HMAC(SaltedPassword, "Client Key"): what an honest client knows */
    bool ready;
} mech_state_t;

static mech_state_t states[2];

static const EVP_MD *
md(mf_scram_mech_t m)
{
    return m == MF_SCRAM_SHA1 ? EVP_sha1() : EVP_sha256();
}

static mech_state_t *
state_of(mf_scram_mech_t m)
{
    mech_state_t *st = &states[m == MF_SCRAM_SHA1 ? 0 : 1];
    if (!st->ready) {
        size_t kl = mf_scram_key_len(m);
        uint8_t salted[MF_SCRAM_MAX_KEY];
        unsigned ol = 0;
        mf_error_t err;
        FUZZ_CHECK(mf_scram_make_cred(m, "pencil", salt, sizeof salt, 4096, &st->cred, &err) == 0, "make_cred: %s",
                   err.msg);
        FUZZ_CHECK(PKCS5_PBKDF2_HMAC("pencil", 6, salt, sizeof salt, 4096, md(m), (int)kl, salted) == 1, "PBKDF2");
        FUZZ_CHECK(HMAC(md(m), salted, (int)kl, (const uint8_t *)"Client Key", 10, st->client_key, &ol) != NULL,
                   "HMAC");
        st->ready = true;
    }
    return st;
}

/* exact: a malloc'd copy of p/n with nothing after it (ASan flags any read past n). */
static char *
exact(const uint8_t *p, size_t n)
{
    char *c = malloc(n ? n : 1);
    if (n)
        memcpy(c, p, n);
    return c;
}

static char *
b64(const uint8_t *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

/* honest_final: the client-final an honest client sends after server_first, with ext spliced in. */
static char *
honest_final(mf_scram_mech_t m, const char *client_first, size_t cf_len, const char *server_first, const uint8_t *ext,
             size_t ext_len, size_t *out_len)
{
    mech_state_t *st = state_of(m);
    size_t kl = mf_scram_key_len(m);
    const char *nonce = server_first + 2, *nonce_end = strchr(nonce, ',');
    const char *p, *bare;
    char *without, *auth, *proof64, *final;
    uint8_t sig[EVP_MAX_MD_SIZE], proof[MF_SCRAM_MAX_KEY];
    unsigned ol = 0;
    size_t wl, al;

    /* client-first-bare: after the gs2 header "n,<authzid>," (as the server cuts it). */
    p = memchr(client_first + 2, ',', cf_len - 2);
    bare = p + 1;
    wl = 9 + (size_t)(nonce_end - nonce) + ext_len;
    without = malloc(wl + 1);
    memcpy(without, "c=biws,r=", 9);
    memcpy(without + 9, nonce, (size_t)(nonce_end - nonce));
    if (ext_len)
        memcpy(without + 9 + (nonce_end - nonce), ext, ext_len);
    without[wl] = '\0';
    al = (size_t)(client_first + cf_len - bare) + 1 + strlen(server_first) + 1 + wl;
    auth = malloc(al + 1);
    snprintf(auth, al + 1, "%.*s,%s,", (int)(client_first + cf_len - bare), bare, server_first);
    memcpy(auth + (al - wl), without, wl);
    HMAC(md(m), st->cred.stored_key, (int)kl, (const uint8_t *)auth, al, sig, &ol);
    for (size_t i = 0; i < kl; i++)
        proof[i] = st->client_key[i] ^ sig[i];
    proof64 = b64(proof, kl);
    *out_len = wl + 3 + strlen(proof64);
    final = malloc(*out_len + 1);
    memcpy(final, without, wl);
    memcpy(final + wl, ",p=", 3);
    memcpy(final + wl + 3, proof64, strlen(proof64) + 1);
    free(without);
    free(auth);
    free(proof64);
    return final;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mf_scram_mech_t m;
    bool honest;
    const uint8_t *rest, *nl;
    size_t rl, l1, l2;
    char *first, *final = NULL, *sfirst = NULL, *sfinal = NULL;
    mf_scram_t *s;
    mf_error_t err;
    mech_state_t *st;

    if (size < 1)
        return 0;
    m = (data[0] & 1) ? MF_SCRAM_SHA1 : MF_SCRAM_SHA256;
    honest = (data[0] & 2) != 0;
    st = state_of(m);
    rest = data + 1;
    rl = size - 1;
    nl = memchr(rest, '\n', rl);
    l1 = nl ? (size_t)(nl - rest) : rl;
    l2 = nl ? rl - l1 - 1 : 0;

    s = mf_scram_new(m);
    first = exact(rest, l1);
    mf_err_clear(&err);
    if (mf_scram_client_first(s, first, l1, &err) != 0) {
        FUZZ_CHECK(err.code == MF_E_AuthenticationFailed, "client-first refused with code %d", err.code);
        goto done;
    }
    FUZZ_CHECK(mf_scram_user(s) != NULL && strlen(mf_scram_user(s)) <= l1, "accepted client-first without a user");
    mf_err_clear(&err);
    FUZZ_CHECK(mf_scram_server_first(s, &st->cred, SERVER_NONCE, &sfirst, &err) == 0, "server-first failed: %s",
               err.msg);
    FUZZ_CHECK(strncmp(sfirst, "r=", 2) == 0 && strstr(sfirst, SERVER_NONCE ",s=") != NULL,
               "server-first '%s' lacks the nonce", sfirst);
    {
        size_t flen;
        const uint8_t *ext = nl ? nl + 1 : rest + rl;
        bool well_formed;
        if (honest) {
            final = honest_final(m, first, l1, sfirst, ext, l2, &flen);
            /* The extension part must not carry its own p= or r= (the server takes the last p=, the first r=). */
            well_formed = flen <= 4096 && memchr(ext, '\0', l2) == NULL && (l2 == 0 || ext[0] == ',');
            for (size_t i = 0; well_formed && i + 3 <= l2; i++)
                if (memcmp(ext + i, ",p=", 3) == 0)
                    well_formed = false;
        } else {
            final = exact(ext, l2);
            flen = l2;
            well_formed = false;
        }
        char *copy = exact((const uint8_t *)final, flen);
        mf_err_clear(&err);
        if (mf_scram_client_final(s, copy, flen, &sfinal, &err) == 0) {
            FUZZ_CHECK(strncmp(sfinal, "v=", 2) == 0, "server-final '%s' does not start with v=", sfinal);
        } else {
            FUZZ_CHECK(err.code == MF_E_AuthenticationFailed, "client-final refused with code %d", err.code);
            FUZZ_CHECK(!well_formed, "an honest client's proof was refused: %s", err.msg);
        }
        /* One client-final per conversation. */
        {
            char *again = NULL;
            mf_err_clear(&err);
            FUZZ_CHECK(mf_scram_client_final(s, copy, flen, &again, &err) != 0, "a second client-final was accepted");
            free(again);
        }
        free(copy);
    }
done:
    free(first);
    free(final);
    free(sfirst);
    free(sfinal);
    mf_scram_free(s);
    return 0;
}
