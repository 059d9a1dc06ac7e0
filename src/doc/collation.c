/*
 * collation.c: MongoDB collation documents on ICU collators (see collation.h).
 *
 * Parsing follows mongod's IDL for the collation document: each field has a
 * type, enumerations are checked by name, strength by range. The collator
 * is opened for the locale, then the fields given are set as ICU
 * attributes; the ones not given keep the locale's defaults (so "fr_CA"
 * compares accents backwards unless told otherwise), and the normalised
 * spec reads every attribute back from ICU. A locale ICU has no data for
 * (ICU falls back to its root collation: ULOC_VALID_LOCALE is "root") is
 * refused, as mongod refuses it.
 */
#include "doc/collation.h"

#include <stdlib.h>
#include <string.h>
#include <unicode/ucol.h>
#include <unicode/uiter.h>
#include <unicode/uloc.h>

#include "common/alloc.h"
#include "common/fmt.h"
#include "doc/value.h"

struct mf_collation {
    UCollator *coll;
    char locale[96];
};

static _Thread_local const mf_collation_t *tls_current;

const mf_collation_t *
mf_collation_current(void)
{
    return tls_current;
}

void
mf_collation_set_current(const mf_collation_t *c)
{
    tls_current = c;
}

void
mf_collation_free(mf_collation_t *c)
{
    if (c == NULL)
        return;
    if (c->coll)
        ucol_close(c->coll);
    free(c);
}

/* spec as mongod prints it in messages: { locale: "xx" }. */
static void
spec_text(const bson_t *spec, char *buf, size_t cap)
{
    mf_fmt_doc(spec, buf, cap);
}

static int
want_type(const bson_iter_t *it, bson_type_t t, const char *name, mf_error_t *err)
{
    if (bson_iter_type(it) == t)
        return 0;
    return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'collation.%s' is the wrong type '%s', expected type '%s'", name,
                      mf_type_name(bson_iter_type(it)), mf_type_name(t));
}

static int
enum_value(const char *field, const char *v, const char *const *names, const int *vals, int *out, mf_error_t *err)
{
    for (int i = 0; names[i]; i++) {
        if (strcmp(names[i], v) == 0) {
            *out = vals[i];
            return 0;
        }
    }
    return mf_err_set(err, MF_E_BadValue, "Enumeration value '%s' for field 'collation.%s' is not a valid value.", v, field);
}

int
mf_collation_new(const bson_t *spec, mf_collation_t **out, mf_error_t *err)
{
    bson_iter_t it;
    const char *locale = NULL;
    int strength = -1, case_first = -1, alternate = -1, max_var = -1;
    int case_level = -1, numeric = -1, normalization = -1, backwards = -1;
    static const char *const cf_names[] = {"upper", "lower", "off", NULL};
    static const int cf_vals[] = {UCOL_UPPER_FIRST, UCOL_LOWER_FIRST, UCOL_OFF};
    static const char *const alt_names[] = {"non-ignorable", "shifted", NULL};
    static const int alt_vals[] = {UCOL_NON_IGNORABLE, UCOL_SHIFTED};
    static const char *const mv_names[] = {"punct", "space", NULL};
    static const int mv_vals[] = {UCOL_REORDER_CODE_PUNCTUATION, UCOL_REORDER_CODE_SPACE};
    char text[256];

    *out = NULL;
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "locale") == 0) {
            if (want_type(&it, BSON_TYPE_UTF8, k, err) != 0)
                return -1;
            locale = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "strength") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it))
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'collation.strength' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                                  mf_type_name(bson_iter_type(&it)));
            double d = bson_iter_as_double(&it);
            if (d < 1)
                return mf_err_set(err, MF_E_Location51024, "BSON field 'strength' value must be >= 1, actual value '%lld'", (long long)d);
            if (d > 5)
                return mf_err_set(err, MF_E_Location51024, "BSON field 'strength' value must be <= 5, actual value '%lld'", (long long)d);
            strength = (int)d;
        } else if (strcmp(k, "caseLevel") == 0 || strcmp(k, "numericOrdering") == 0 ||
                   strcmp(k, "normalization") == 0 || strcmp(k, "backwards") == 0) {
            if (want_type(&it, BSON_TYPE_BOOL, k, err) != 0)
                return -1;
            int b = bson_iter_bool(&it) ? 1 : 0;
            if (k[0] == 'c')
                case_level = b;
            else if (k[0] == 'n' && k[1] == 'u')
                numeric = b;
            else if (k[0] == 'n')
                normalization = b;
            else
                backwards = b;
        } else if (strcmp(k, "caseFirst") == 0 || strcmp(k, "alternate") == 0 || strcmp(k, "maxVariable") == 0) {
            if (want_type(&it, BSON_TYPE_UTF8, k, err) != 0)
                return -1;
            const char *v = bson_iter_utf8(&it, NULL);
            int r = k[0] == 'c'   ? enum_value(k, v, cf_names, cf_vals, &case_first, err)
                    : k[0] == 'a' ? enum_value(k, v, alt_names, alt_vals, &alternate, err)
                                  : enum_value(k, v, mv_names, mv_vals, &max_var, err);
            if (r != 0)
                return -1;
        } else if (strcmp(k, "version") == 0) {
            if (want_type(&it, BSON_TYPE_UTF8, k, err) != 0)
                return -1;
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field 'collation.%s' is an unknown field.", k);
        }
    }
    if (locale == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'collation.locale' is missing but a required field");
    if (strcmp(locale, "simple") == 0) {
        bson_iter_init(&it, spec);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "locale") != 0 && strcmp(bson_iter_key(&it), "version") != 0) {
                spec_text(spec, text, sizeof(text));
                return mf_err_set(err, MF_E_BadValue, "Field '%s' is invalid with 'locale: \"simple\"' in: %s",
                                  bson_iter_key(&it), text);
            }
        }
        return 0; /* simple: binary comparison */
    }
    UErrorCode st = U_ZERO_ERROR;
    UCollator *coll = strlen(locale) < 90 && strlen(locale) > 0 ? ucol_open(locale, &st) : NULL;
    const char *valid = coll ? ucol_getLocaleByType(coll, ULOC_VALID_LOCALE, &st) : NULL;
    if (coll == NULL || U_FAILURE(st) || valid == NULL || (strcmp(valid, "root") == 0 && strcmp(locale, "root") != 0)) {
        if (coll)
            ucol_close(coll);
        spec_text(spec, text, sizeof(text));
        return mf_err_set(err, MF_E_BadValue, "Field 'locale' is invalid in: %s", text);
    }
    static const UColAttributeValue strengths[] = {UCOL_PRIMARY, UCOL_SECONDARY, UCOL_TERTIARY, UCOL_QUATERNARY,
                                                   UCOL_IDENTICAL};
    if (strength > 0)
        ucol_setAttribute(coll, UCOL_STRENGTH, strengths[strength - 1], &st);
    if (case_level >= 0)
        ucol_setAttribute(coll, UCOL_CASE_LEVEL, case_level ? UCOL_ON : UCOL_OFF, &st);
    if (case_first >= 0)
        ucol_setAttribute(coll, UCOL_CASE_FIRST, (UColAttributeValue)case_first, &st);
    if (numeric >= 0)
        ucol_setAttribute(coll, UCOL_NUMERIC_COLLATION, numeric ? UCOL_ON : UCOL_OFF, &st);
    if (alternate >= 0)
        ucol_setAttribute(coll, UCOL_ALTERNATE_HANDLING, (UColAttributeValue)alternate, &st);
    if (max_var >= 0)
        ucol_setMaxVariable(coll, (UColReorderCode)max_var, &st);
    if (normalization >= 0)
        ucol_setAttribute(coll, UCOL_NORMALIZATION_MODE, normalization ? UCOL_ON : UCOL_OFF, &st);
    if (backwards >= 0)
        ucol_setAttribute(coll, UCOL_FRENCH_COLLATION, backwards ? UCOL_ON : UCOL_OFF, &st);
    if (U_FAILURE(st)) {
        ucol_close(coll);
        return mf_err_set(err, MF_E_BadValue, "could not apply the collation's options: %s", u_errorName(st));
    }
    mf_collation_t *c = mf_calloc(1, sizeof(*c));
    c->coll = coll;
    snprintf(c->locale, sizeof(c->locale), "%s", locale);
    *out = c;
    return 0;
}

int
mf_collation_from_value(const bson_value_t *v, mf_collation_t **out, mf_error_t *err)
{
    bson_t spec;
    *out = NULL;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'collation' is the wrong type '%s', expected type 'object'",
                          mf_type_name(v->value_type));
    if (!bson_init_static(&spec, v->value.v_doc.data, v->value.v_doc.data_len))
        return mf_err_set(err, MF_E_InvalidBSON, "invalid collation document");
    return mf_collation_new(&spec, out, err);
}

static bool
attr_on(const mf_collation_t *c, UColAttribute a)
{
    UErrorCode st = U_ZERO_ERROR;
    return ucol_getAttribute(c->coll, a, &st) == UCOL_ON;
}

void
mf_collation_append_spec(const mf_collation_t *c, bson_t *doc)
{
    UErrorCode st = U_ZERO_ERROR;
    if (c == NULL) {
        BSON_APPEND_UTF8(doc, "locale", "simple");
        return;
    }
    BSON_APPEND_UTF8(doc, "locale", c->locale);
    BSON_APPEND_BOOL(doc, "caseLevel", attr_on(c, UCOL_CASE_LEVEL));
    UColAttributeValue cf = ucol_getAttribute(c->coll, UCOL_CASE_FIRST, &st);
    BSON_APPEND_UTF8(doc, "caseFirst", cf == UCOL_UPPER_FIRST ? "upper" : cf == UCOL_LOWER_FIRST ? "lower" : "off");
    UColAttributeValue s = ucol_getAttribute(c->coll, UCOL_STRENGTH, &st);
    BSON_APPEND_INT32(doc, "strength", s == UCOL_PRIMARY ? 1 : s == UCOL_SECONDARY ? 2 : s == UCOL_TERTIARY ? 3
                                       : s == UCOL_QUATERNARY ? 4 : 5);
    BSON_APPEND_BOOL(doc, "numericOrdering", attr_on(c, UCOL_NUMERIC_COLLATION));
    BSON_APPEND_UTF8(doc, "alternate",
                     ucol_getAttribute(c->coll, UCOL_ALTERNATE_HANDLING, &st) == UCOL_SHIFTED ? "shifted" : "non-ignorable");
    BSON_APPEND_UTF8(doc, "maxVariable", ucol_getMaxVariable(c->coll) == UCOL_REORDER_CODE_SPACE ? "space" : "punct");
    BSON_APPEND_BOOL(doc, "normalization", attr_on(c, UCOL_NORMALIZATION_MODE));
    BSON_APPEND_BOOL(doc, "backwards", attr_on(c, UCOL_FRENCH_COLLATION));
    /* The collation version mongod 8.0 reports (its ICU data); the rules are ICU's, the same for these options. */
    BSON_APPEND_UTF8(doc, "version", "57.1");
}

bool
mf_collation_equal(const mf_collation_t *a, const mf_collation_t *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    if (a == b)
        return true;
    bson_t sa = BSON_INITIALIZER, sb = BSON_INITIALIZER;
    mf_collation_append_spec(a, &sa);
    mf_collation_append_spec(b, &sb);
    bool eq = bson_equal(&sa, &sb);
    bson_destroy(&sa);
    bson_destroy(&sb);
    return eq;
}

int
mf_collation_cmp(const mf_collation_t *c, const char *a, size_t alen, const char *b, size_t blen)
{
    UErrorCode st = U_ZERO_ERROR;
    if (alen > INT32_MAX || blen > INT32_MAX)
        return 0;
    UCollationResult r = ucol_strcollUTF8(c->coll, a, (int32_t)alen, b, (int32_t)blen, &st);
    if (U_FAILURE(st)) {
        /* Not valid UTF-8: fall back to the bytes, so the order stays total. */
        int m = memcmp(a, b, alen < blen ? alen : blen);
        return m != 0 ? (m < 0 ? -1 : 1) : (alen < blen ? -1 : alen > blen);
    }
    return r == UCOL_LESS ? -1 : r == UCOL_GREATER ? 1 : 0;
}

size_t
mf_collation_key(const mf_collation_t *c, const char *s, size_t len, uint8_t **buf, size_t *cap)
{
    UCharIterator it;
    uint32_t state[2] = {0, 0};
    UErrorCode st = U_ZERO_ERROR;
    size_t n = 0;
    if (len > INT32_MAX)
        len = INT32_MAX;
    uiter_setUTF8(&it, s, (int32_t)len);
    /* Sort key parts in chunks (ucol_nextSortKeyPart), without converting to UTF-16 first. */
    for (;;) {
        if (*cap < n + 256) {
            *cap = (n + 256) * 2;
            *buf = mf_realloc(*buf, *cap);
        }
        int32_t got = ucol_nextSortKeyPart(c->coll, &it, state, *buf + n, 256, &st);
        if (U_FAILURE(st))
            break;
        n += (size_t)got;
        if (got < 256)
            break;
    }
    /* ucol_nextSortKeyPart leaves out the final zero byte: the key has none inside. */
    return n;
}

char *
mf_collation_key_hex(const mf_collation_t *c, const char *s, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    uint8_t *buf = NULL;
    size_t bcap = 0, o = 2;
    size_t n = mf_collation_key(c, s, len, &buf, &bcap);
    char *out = mf_malloc(2 * n + 3);
    out[0] = '0';
    out[1] = 'x';
    for (size_t i = 0; i < n; i++) {
        out[o++] = digits[buf[i] >> 4];
        out[o++] = digits[buf[i] & 15];
    }
    out[o] = '\0';
    free(buf);
    return out;
}
