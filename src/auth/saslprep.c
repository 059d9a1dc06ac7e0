/*
 * saslprep.c: RFC 4013 SASLprep over ICU's StringPrep (see saslprep.h).
 *
 * UTF-8 in, UTF-16 for ICU (u_strFromUTF8), usprep_prepare, UTF-8 out
 * (u_strToUTF8). The steps and their errors follow mongod's icuSaslPrep
 * (src/mongo/util/icu.cpp): a preflight of usprep_prepare that must end in
 * U_BUFFER_OVERFLOW_ERROR, anything else failing with 50692 and ICU's error
 * name, so a client sees mongod's code and message. The intermediate
 * buffers hold the password: they are wiped before they are freed.
 */
#include "auth/saslprep.h"

#include <openssl/crypto.h>
#include <stdint.h>
#include <stdlib.h>
#include <unicode/usprep.h>
#include <unicode/ustring.h>
#include <unicode/utypes.h>

#include "common/alloc.h"

struct mf_saslprep {
    UStringPrepProfile *profile; /* ICU's, read-only once open */
};

int
mf_saslprep_open(mf_saslprep_t **out, mf_error_t *err)
{
    UErrorCode e = U_ZERO_ERROR;
    UStringPrepProfile *p = usprep_openByType(USPREP_RFC4013_SASLPREP, &e);
    if (U_FAILURE(e))
        return mf_err_set(err, MF_E_InternalError, "Unable to open unicode string prep profile: %s", u_errorName(e));
    *out = mf_malloc(sizeof(**out));
    (*out)->profile = p;
    return 0;
}

void
mf_saslprep_close(mf_saslprep_t *sp)
{
    if (sp == NULL)
        return;
    usprep_close(sp->profile);
    free(sp);
}

/* Wipes and frees n UChars at p (p may be NULL). */
static void
wipe_free(UChar *p, int32_t n)
{
    if (p != NULL)
        OPENSSL_cleanse(p, (size_t)n * sizeof(UChar));
    free(p);
}

int
mf_saslprep_prepare(const mf_saslprep_t *sp, const char *in, size_t len, char **out, mf_error_t *err)
{
    UErrorCode e = U_ZERO_ERROR;
    UChar *src = NULL, *dst = NULL;
    int32_t src_cap = 0, src_len = 0, dst_cap = 0, dst_len = 0, utf8_len = 0, res_cap = 0;
    char *res = NULL;
    int rc = -1;

    if (len > INT32_MAX - 1) {
        mf_err_set(err, MF_E_BadValue, "Non UTF-8 data encountered");
        goto done;
    }
    /* UTF-16 never needs more code units than UTF-8 has bytes. */
    src_cap = (int32_t)len + 1;
    src = mf_malloc((size_t)src_cap * sizeof(UChar));
    u_strFromUTF8(src, src_cap, &src_len, in, (int32_t)len, &e);
    if (e == U_INVALID_CHAR_FOUND) {
        mf_err_set(err, MF_E_BadValue, "Non UTF-8 data encountered");
        goto done;
    }
    if (U_FAILURE(e)) {
        mf_err_set(err, MF_E_InternalError, "Error converting UTF-8 string: %s", u_errorName(e));
        goto done;
    }
    /* The preflight reports a prohibited character, an unassigned one or a bidi violation (as mongod: 50692). */
    e = U_ZERO_ERROR;
    dst_len = usprep_prepare(sp->profile, src, src_len, NULL, 0, USPREP_DEFAULT, NULL, &e);
    if (e == U_INVALID_CHAR_FOUND) {
        mf_err_set(err, MF_E_BadValue, "Unable to normalize input string");
        goto done;
    }
    if (e != U_BUFFER_OVERFLOW_ERROR) {
        mf_err_set(err, MF_E_Location50692, "Error preflighting normalization: %s", u_errorName(e));
        goto done;
    }
    dst_cap = dst_len + 1;
    dst = mf_malloc((size_t)dst_cap * sizeof(UChar));
    e = U_ZERO_ERROR;
    dst_len = usprep_prepare(sp->profile, src, src_len, dst, dst_cap, USPREP_DEFAULT, NULL, &e);
    if (U_FAILURE(e)) {
        mf_err_set(err, MF_E_InternalError, "Failed normalizing string: %s", u_errorName(e));
        goto done;
    }
    e = U_ZERO_ERROR;
    u_strToUTF8(NULL, 0, &utf8_len, dst, dst_len, &e);
    if (e != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(e)) {
        mf_err_set(err, MF_E_InternalError, "Error converting string to UTF-8: %s", u_errorName(e));
        goto done;
    }
    res_cap = utf8_len + 1;
    res = mf_malloc((size_t)res_cap);
    e = U_ZERO_ERROR;
    u_strToUTF8(res, res_cap, &utf8_len, dst, dst_len, &e);
    if (U_FAILURE(e)) {
        mf_err_set(err, MF_E_InternalError, "Error converting string to UTF-8: %s", u_errorName(e));
        goto done;
    }
    *out = res;
    res = NULL;
    rc = 0;
done:
    if (res != NULL)
        OPENSSL_cleanse(res, (size_t)res_cap);
    free(res);
    wipe_free(src, src_cap);
    wipe_free(dst, dst_cap);
    return rc;
}
