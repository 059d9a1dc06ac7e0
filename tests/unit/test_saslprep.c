/*
 * test_saslprep.c: SASLprep (src/auth/saslprep.h) against RFC 4013's
 * section 3 examples and mongod's icuSaslPrep errors, and SCRAM-SHA-256
 * credentials built from a prepared password (src/auth/users.h): a client
 * that SASLpreps its password logs in with any spelling that prepares to
 * the same string, as MongoDB's auth spec's SCRAM-SHA-256 prose test
 * (step 4) expects.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "auth/saslprep.h"
#include "auth/scram.h"
#include "auth/users.h"

static mf_saslprep_t *sp;

static void
open_profile(void)
{
    mf_error_t err = {0};
    cr_assert_eq(mf_saslprep_open(&sp, &err), 0, "%s", err.msg);
}

static void
close_profile(void)
{
    mf_saslprep_close(sp);
}

/* Asserts that in (len bytes) prepares to want. */
static void
prepares_to(const char *in, size_t len, const char *want)
{
    mf_error_t err = {0};
    char *out = NULL;
    cr_assert_eq(mf_saslprep_prepare(sp, in, len, &out, &err), 0, "SASLprep of \"%s\" failed: %d %s", in, err.code,
                 err.msg);
    cr_assert_str_eq(out, want, "SASLprep of \"%s\": got \"%s\", expected \"%s\"", in, out, want);
    free(out);
}

/* Asserts that in (len bytes) is refused with code and message msg. */
static void
refused(const char *in, size_t len, int code, const char *msg)
{
    mf_error_t err = {0};
    char *out = NULL;
    cr_assert_eq(mf_saslprep_prepare(sp, in, len, &out, &err), -1, "SASLprep of \"%s\" should fail, got \"%s\"", in,
                 out != NULL ? out : "");
    cr_assert_null(out);
    cr_assert_eq(err.code, code, "SASLprep of \"%s\": code %d (%s), expected %d", in, err.code, err.msg, code);
    cr_assert_str_eq(err.msg, msg, "SASLprep of \"%s\": message \"%s\", expected \"%s\"", in, err.msg, msg);
}

#define S(lit) lit, sizeof(lit) - 1

TestSuite(saslprep, .init = open_profile, .fini = close_profile);

Test(saslprep, rfc4013_section3_examples)
{
    prepares_to(S("I\xC2\xADX"), "IX");      /* 1: SOFT HYPHEN mapped to nothing */
    prepares_to(S("user"), "user");          /* 2: no transformation */
    prepares_to(S("USER"), "USER");          /* 3: case preserved */
    prepares_to(S("\xC2\xAA"), "a");         /* 4: NFKC */
    prepares_to(S("\xE2\x85\xA8"), "IX");    /* 5: NFKC, ROMAN NUMERAL NINE */
    refused(S("\x07"), MF_E_Location50692, "Error preflighting normalization: U_STRINGPREP_PROHIBITED_ERROR"); /* 6 */
    refused(S("\xD8\xA7" "1"), MF_E_Location50692,
            "Error preflighting normalization: U_STRINGPREP_CHECK_BIDI_ERROR"); /* 7: bidi */
}

Test(saslprep, mapping_and_normalisation)
{
    prepares_to(S("\xE2\x85\xA3"), "IV");             /* ROMAN NUMERAL FOUR */
    prepares_to(S("I\xC2\xADV"), "IV");               /* the spec's "I\u00ADV" */
    prepares_to(S("a\xC2\xA0" "b"), "a b");           /* non-ASCII space to SPACE */
    prepares_to(S("\x65\xCC\x81"), "\xC3\xA9");       /* e + COMBINING ACUTE to e-acute (NFKC) */
    prepares_to(S("r00t-Secret!pw"), "r00t-Secret!pw"); /* printable ASCII unchanged */
}

Test(saslprep, refusals_as_mongod)
{
    /* A NUL inside the string (a BSON string may hold one) is prohibited, not a terminator. */
    refused(S("pass\0word"), MF_E_Location50692, "Error preflighting normalization: U_STRINGPREP_PROHIBITED_ERROR");
    /* U+0221 is unassigned in Unicode 3.2: refused for stored strings. */
    refused(S("a\xC8\xA1"), MF_E_Location50692, "Error preflighting normalization: U_STRINGPREP_UNASSIGNED_ERROR");
    /* Nothing left after mapping: mongod's preflight ends without an overflow. */
    refused(S("\xC2\xAD"), MF_E_Location50692, "Error preflighting normalization: U_STRING_NOT_TERMINATED_WARNING");
    refused(S("ab\xFF"), MF_E_BadValue, "Non UTF-8 data encountered");
}

/* A whole SCRAM-SHA-256 conversation: client (password as given) against the credential. */
static int
sha256_login(const mf_scram_cred_t *cred, const char *user, const char *client_password)
{
    mf_error_t err = {0};
    mf_scram_t *c = mf_scram_new(MF_SCRAM_SHA256), *s = mf_scram_new(MF_SCRAM_SHA256);
    char *first = NULL, *sfirst = NULL, *final = NULL, *sfinal = NULL;
    int rc = -1;
    cr_assert_eq(mf_scram_client_begin(c, user, &first, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_scram_client_first(s, first, strlen(first), &err), 0, "%s", err.msg);
    cr_assert_str_eq(mf_scram_user(s), user, "the server must see the user name as sent (never SASLprep'd)");
    cr_assert_eq(mf_scram_server_first(s, cred, NULL, &sfirst, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_scram_client_respond(c, client_password, sfirst, strlen(sfirst), &final, &err), 0, "%s", err.msg);
    if (mf_scram_client_final(s, final, strlen(final), &sfinal, &err) == 0 &&
        mf_scram_client_check(c, sfinal, strlen(sfinal), &err) == 0)
        rc = 0;
    free(first);
    free(sfirst);
    free(final);
    free(sfinal);
    mf_scram_free(c);
    mf_scram_free(s);
    return rc;
}

Test(saslprep, sha256_credential_from_prepared_password)
{
    mf_error_t err = {0};
    mf_scram_cred_t cred;
    bson_t doc = BSON_INITIALIZER;
    /* createUser "\u2168" with pwd "\u2163", SCRAM-SHA-256 only. */
    cr_assert_eq(mf_users_credentials(&doc, sp, "\xE2\x85\xA8", S("\xE2\x85\xA3"), MF_MECH_SHA256, false, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(mf_users_cred(&doc, MF_SCRAM_SHA256, &cred), 0);
    /* A SASLprep-ing client sends the prepared password "IV" for "\u2163", "IV" and "I\u00ADV" alike. */
    cr_assert_eq(sha256_login(&cred, "\xE2\x85\xA8", "IV"), 0, "\\u2168 / IV should log in");
    cr_assert_neq(sha256_login(&cred, "\xE2\x85\xA8", "\xE2\x85\xA3"), 0,
                  "the unprepared password must not match the prepared credential");
    cr_assert_neq(sha256_login(&cred, "\xE2\x85\xA8", "IX"), 0, "a wrong password must not log in");
    bson_destroy(&doc);
}

Test(saslprep, refused_password_builds_no_credential)
{
    mf_error_t err = {0};
    bson_t doc = BSON_INITIALIZER;
    cr_assert_eq(mf_users_credentials(&doc, sp, "u", S("pass\0word"), MF_MECH_SHA1 | MF_MECH_SHA256, false, &err), -1);
    cr_assert_eq(err.code, MF_E_Location50692, "code %d (%s)", err.code, err.msg);
    bson_iter_t it;
    cr_assert(!bson_iter_init_find(&it, &doc, "credentials"), "nothing appended on failure");
    bson_destroy(&doc);
    /* SCRAM-SHA-1 alone does not SASLprep (mongod hashes the raw password). */
    mf_error_t err2 = {0};
    bson_t doc2 = BSON_INITIALIZER;
    cr_assert_eq(mf_users_credentials(&doc2, sp, "u", S("\x07pw"), MF_MECH_SHA1, false, &err2), 0, "%s", err2.msg);
    bson_destroy(&doc2);
}
