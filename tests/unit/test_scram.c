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

/* The client side (members' keyFile authentication) against the server side, both mechanisms. */
static void
client_server_round(mf_scram_mech_t mech, const char *stored_pw, const char *client_pw, bool expect_ok)
{
    mf_scram_cred_t cred;
    mf_error_t err;
    char *cf = NULL, *sf = NULL, *cfin = NULL, *sfin = NULL;
    cr_assert_eq(mf_scram_make_cred(mech, stored_pw, NULL, 0, 4096, &cred, &err), 0);
    mf_scram_t *cli = mf_scram_new(mech), *srv = mf_scram_new(mech);
    cr_assert_eq(mf_scram_client_begin(cli, "__sys,tem=", &cf, &err), 0);
    cr_assert_eq(mf_scram_client_first(srv, cf, strlen(cf), &err), 0);
    cr_assert_str_eq(mf_scram_user(srv), "__sys,tem=", "the server decodes the client's escapes");
    cr_assert_eq(mf_scram_server_first(srv, &cred, NULL, &sf, &err), 0);
    cr_assert_eq(mf_scram_client_respond(cli, client_pw, sf, strlen(sf), &cfin, &err), 0);
    int r = mf_scram_client_final(srv, cfin, strlen(cfin), &sfin, &err);
    if (expect_ok) {
        cr_assert_eq(r, 0, "the right key is accepted: %s", err.msg);
        cr_assert_eq(mf_scram_client_check(cli, sfin, strlen(sfin), &err), 0, "the server proves it knows the key");
        /* A server-final with another signature is refused. */
        mf_scram_t *cli2 = mf_scram_new(mech);
        char *cf2 = NULL;
        cr_assert_eq(mf_scram_client_check(cli2, sfin, strlen(sfin), &err), -1, "out of order");
        cr_assert_eq(mf_scram_client_begin(cli2, "x", &cf2, &err), 0);
        free(cf2);
        mf_scram_free(cli2);
    } else {
        cr_assert_eq(r, -1, "a wrong key is refused");
        cr_assert_eq(err.code, MF_E_AuthenticationFailed);
    }
    free(cf);
    free(sf);
    free(cfin);
    free(sfin);
    mf_scram_free(cli);
    mf_scram_free(srv);
}

Test(scram, the_client_side_authenticates_against_the_server_side)
{
    client_server_round(MF_SCRAM_SHA256, "c2VjcmV0a2V5", "c2VjcmV0a2V5", true);
    client_server_round(MF_SCRAM_SHA1, "pencil", "pencil", true);
    client_server_round(MF_SCRAM_SHA256, "c2VjcmV0a2V5", "b3RoZXJrZXk=", false);
}

Test(scram, the_client_refuses_a_bad_server_first)
{
    mf_error_t err;
    char *cf = NULL, *out = NULL;
    mf_scram_t *cli = mf_scram_new(MF_SCRAM_SHA256);
    cr_assert_eq(mf_scram_client_begin(cli, "u", &cf, &err), 0);
    const char *bad = "r=notmynonce,s=QSXCR+Q6sek8bf92,i=4096";
    cr_assert_eq(mf_scram_client_respond(cli, "pw", bad, strlen(bad), &out, &err), -1, "a nonce that does not extend ours");
    free(cf);
    mf_scram_free(cli);
    cli = mf_scram_new(MF_SCRAM_SHA256);
    cr_assert_eq(mf_scram_client_begin(cli, "u", &cf, &err), 0);
    /* Our nonce is after "r=" in cf ("n,,n=u,r=<nonce>"): an iteration count below 4096 is refused. */
    char msg[256];
    snprintf(msg, sizeof(msg), "r=%sXYZ,s=QSXCR+Q6sek8bf92,i=100", strstr(cf, "r=") + 2);
    cr_assert_eq(mf_scram_client_respond(cli, "pw", msg, strlen(msg), &out, &err), -1, "too few iterations");
    free(cf);
    mf_scram_free(cli);
}
