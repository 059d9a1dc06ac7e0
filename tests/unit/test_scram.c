/*
 * test_scram.c: the SCRAM server (src/auth/scram.h) against the published
 * conversations: RFC 5802 (SCRAM-SHA-1), RFC 7677 (SCRAM-SHA-256), and
 * MongoDB's SCRAM-SHA-1 password hashing; and the refusals (a wrong
 * password, a replayed or altered nonce, channel binding, malformed input).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "auth/scram.h"

/* Decodes base64 into buf (its length returned), for the published salts. */
static size_t
salt_of(const char *b64, uint8_t *buf)
{
    static const char *tab = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (const char *p = b64; *p && *p != '='; p++) {
        acc = acc << 6 | (uint32_t)(strchr(tab, *p) - tab);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
}

/* Runs a whole conversation; returns the server-final message (malloc'd) or NULL with err. */
static char *
converse(mf_scram_mech_t mech, const char *password, const char *salt_b64, int iters, const char *client_first,
         const char *snonce, const char *want_server_first, const char *client_final, mf_error_t *err)
{
    uint8_t salt[64];
    size_t sl = salt_of(salt_b64, salt);
    mf_scram_cred_t cred;
    cr_assert_eq(mf_scram_make_cred(mech, password, salt, sl, iters, &cred, err), 0, "%s", err->msg);
    mf_scram_t *s = mf_scram_new(mech);
    char *sf = NULL, *fin = NULL;
    cr_assert_eq(mf_scram_client_first(s, client_first, strlen(client_first), err), 0, "%s", err->msg);
    cr_assert_str_eq(mf_scram_user(s), "user");
    cr_assert_eq(mf_scram_server_first(s, &cred, snonce, &sf, err), 0, "%s", err->msg);
    if (want_server_first)
        cr_assert_str_eq(sf, want_server_first);
    if (mf_scram_client_final(s, client_final, strlen(client_final), &fin, err) != 0)
        fin = NULL;
    free(sf);
    mf_scram_free(s);
    return fin;
}

Test(scram, rfc7677_sha256_conversation)
{
    mf_error_t err = {0};
    char *fin = converse(MF_SCRAM_SHA256, "pencil", "W22ZaJ0SNY7soEsUEjb6gQ==", 4096,
                         "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                         "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
                         "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                         &err);
    cr_assert_not_null(fin, "%d %s", err.code, err.msg);
    cr_assert_str_eq(fin, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    free(fin);
}

Test(scram, rfc5802_sha1_conversation)
{
    mf_error_t err = {0};
    char *fin = converse(MF_SCRAM_SHA1, "pencil", "QSXCR+Q6sek8bf92", 4096, "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
                         "3rfcNHYJY1ZVvWVs7j", "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
                         "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=", &err);
    cr_assert_not_null(fin, "%d %s", err.code, err.msg);
    cr_assert_str_eq(fin, "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=");
    free(fin);
}

Test(scram, mongodb_sha1_password_is_the_md5_of_user_mongo_password)
{
    char hex[33];
    mf_scram_sha1_password("user", "pencil", hex);
    /* md5("user:mongo:pencil") */
    cr_assert_str_eq(hex, "1c33006ec1ffd90f9cadcbcc0e118200");
}

Test(scram, a_wrong_password_fails_with_18)
{
    mf_error_t err = {0};
    char *fin = converse(MF_SCRAM_SHA256, "pencils", "W22ZaJ0SNY7soEsUEjb6gQ==", 4096,
                         "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", NULL,
                         "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                         "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                         &err);
    cr_assert_null(fin);
    cr_assert_eq(err.code, MF_E_AuthenticationFailed);
}

Test(scram, an_altered_nonce_or_channel_binding_fails)
{
    const char *finals[] = {
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "c=eSws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "c=cD10bHMtdW5pcXVlLCw=,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=notbase64!!",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "garbage",
    };
    for (size_t i = 0; i < sizeof(finals) / sizeof(finals[0]); i++) {
        mf_error_t err = {0};
        char *fin = converse(MF_SCRAM_SHA256, "pencil", "W22ZaJ0SNY7soEsUEjb6gQ==", 4096,
                             "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", NULL, finals[i], &err);
        cr_assert_null(fin, "accepted %s", finals[i]);
        cr_assert_eq(err.code, MF_E_AuthenticationFailed, "%s: %d", finals[i], err.code);
    }
}

Test(scram, malformed_client_first_messages_are_refused)
{
    const char *firsts[] = {"", "p=tls-unique,,n=user,r=abc", "n,,r=abc", "n,,n=user", "n,,n=,r=abc", "n,,n=user,r=",
                            "x,,n=user,r=abc"};
    for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
        mf_error_t err = {0};
        mf_scram_t *s = mf_scram_new(MF_SCRAM_SHA256);
        cr_assert_neq(mf_scram_client_first(s, firsts[i], strlen(firsts[i]), &err), 0, "accepted '%s'", firsts[i]);
        cr_assert_eq(err.code, MF_E_AuthenticationFailed);
        mf_scram_free(s);
    }
}

Test(scram, user_names_decode_escapes_and_a_conversation_is_one_try)
{
    mf_error_t err = {0};
    mf_scram_t *s = mf_scram_new(MF_SCRAM_SHA256);
    const char *cf = "n,a=ad=2Cmin,n=we=2Cird=3Dname,r=nonce";
    cr_assert_eq(mf_scram_client_first(s, cf, strlen(cf), &err), 0, "%s", err.msg);
    cr_assert_str_eq(mf_scram_user(s), "we,ird=name");
    mf_scram_cred_t cred;
    cr_assert_eq(mf_scram_make_cred(MF_SCRAM_SHA256, "pw", NULL, 0, 4096, &cred, &err), 0);
    cr_assert_eq(cred.salt_len, 28);
    char *sf = NULL, *fin = NULL;
    cr_assert_eq(mf_scram_server_first(s, &cred, NULL, &sf, &err), 0);
    cr_assert(strncmp(sf, "r=nonce", 7) == 0 && strlen(sf) > 40, "%s", sf);
    const char *bad = "c=biws,r=nonceX,p=AAAA";
    cr_assert_neq(mf_scram_client_final(s, bad, strlen(bad), &fin, &err), 0);
    /* The conversation is spent: a second final is refused too. */
    cr_assert_neq(mf_scram_client_final(s, bad, strlen(bad), &fin, &err), 0);
    free(sf);
    mf_scram_free(s);
}

Test(scram, credentials_need_4096_iterations_and_never_hold_the_password)
{
    mf_error_t err = {0};
    mf_scram_cred_t cred;
    cr_assert_neq(mf_scram_make_cred(MF_SCRAM_SHA256, "pw", NULL, 0, 1000, &cred, &err), 0);
    cr_assert_eq(mf_scram_make_cred(MF_SCRAM_SHA1, "pw-secret-text", NULL, 0, 10000, &cred, &err), 0);
    cr_assert_eq(cred.salt_len, 16);
    cr_assert_null(memmem(&cred, sizeof(cred), "pw-secret-text", 14));
    cr_assert_eq(mf_scram_mech_of("SCRAM-SHA-1"), MF_SCRAM_SHA1);
    cr_assert_eq(mf_scram_mech_of("SCRAM-SHA-256"), MF_SCRAM_SHA256);
    cr_assert_eq(mf_scram_mech_of("PLAIN"), 0);
}
