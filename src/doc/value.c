/*
 * value.c: BSON values in MongoDB's canonical comparison order (see value.h).
 *
 * Design: mf_value_cmp first compares canonical type ranks (the numbers
 * MongoDB's canonicalizeBSONType uses, so gaps are preserved and undefined
 * sorts just below null), then compares same-rank values by content.
 *
 * Numbers: int32/int64 compare exactly as integers; double vs double uses
 * MongoDB's rule that NaN equals NaN and is below every other number; int64 vs
 * double is exact (integers beyond 2^53 are not rounded through double);
 * a decimal128 compares exactly with another and with an integer, and with a
 * double rounded to 34 digits, as MongoDB's compareDecimalToDouble (doc/dec128.h).
 * Documents compare element by element: type rank, then field name,
 * then value; the shorter document is smaller. Arrays are documents with
 * index keys, so they compare the same way.
 *
 * Invariants: the module is pure; nothing here allocates except transient
 * stack buffers and the values the string and document setters build (which
 * the caller then owns; value.h's array builder likewise), and no function
 * keeps a reference to its arguments.
 */
#include "doc/value.h"
#include "doc/collation.h"
#include "doc/dec128.h"
#include "common/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
mf_value_type_rank(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY:
        return -1;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED:
        return 0;
    case BSON_TYPE_NULL:
        return 5;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        return 10;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        return 15;
    case BSON_TYPE_DOCUMENT:
        return 20;
    case BSON_TYPE_ARRAY:
        return 25;
    case BSON_TYPE_BINARY:
        return 30;
    case BSON_TYPE_OID:
        return 35;
    case BSON_TYPE_BOOL:
        return 40;
    case BSON_TYPE_DATE_TIME:
        return 45;
    case BSON_TYPE_TIMESTAMP:
        return 47;
    case BSON_TYPE_REGEX:
        return 50;
    case BSON_TYPE_DBPOINTER:
        return 55;
    case BSON_TYPE_CODE:
        return 60;
    case BSON_TYPE_CODEWSCOPE:
        return 65;
    case BSON_TYPE_MAXKEY:
        return 127;
    default:
        return 126;
    }
}

double
mf_value_as_double(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE:
        return v->value.v_double;
    case BSON_TYPE_INT32:
        return (double)v->value.v_int32;
    case BSON_TYPE_INT64:
        return (double)v->value.v_int64;
    case BSON_TYPE_DECIMAL128:
        return mf_dec_to_double(&v->value.v_decimal128);
    default:
        return 0.0;
    }
}

int32_t
mf_value_number_int(const bson_value_t *v)
{
    double d = mf_value_as_double(v);
    if (d != d)
        return 0;
    if (d >= 2147483647.0)
        return INT32_MAX;
    if (d <= -2147483648.0)
        return INT32_MIN;
    return (int32_t)d;
}

/* ld_to_int64: true and *out set if x is integral and within int64's range. */
static bool
ld_to_int64(long double x, int64_t *out)
{
    if (isnan(x) || isinf(x))
        return false;
    if (x != truncl(x))
        return false;
    /* 2^63 is exactly representable; the valid range is [-2^63, 2^63). */
    if (x < -9223372036854775808.0L || x >= 9223372036854775808.0L)
        return false;
    *out = (int64_t)x;
    return true;
}

bool
mf_value_as_int64(const bson_value_t *v, int64_t *out)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        *out = v->value.v_int32;
        return true;
    case BSON_TYPE_INT64:
        *out = v->value.v_int64;
        return true;
    case BSON_TYPE_DOUBLE:
        return ld_to_int64((long double)v->value.v_double, out);
    case BSON_TYPE_DECIMAL128:
        return mf_dec_to_int64(&v->value.v_decimal128, out);
    default:
        return false;
    }
}

/* cmp_doubles: MongoDB's double comparison, NaN equal to NaN and lowest. */
static int
cmp_doubles(double a, double b)
{
    if (a < b)
        return -1;
    if (a > b)
        return 1;
    if (a == b)
        return 0;
    if (isnan(a))
        return isnan(b) ? 0 : -1;
    return 1;
}

static int
cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : (a > b ? 1 : 0);
}

/* cmp_long_double: exact comparison of an int64 with a double (MongoDB's compareLongToDouble). */
static int
cmp_long_double(int64_t l, double d)
{
    if (isnan(d))
        return 1;
    if (l >= -(INT64_C(1) << 53) && l <= (INT64_C(1) << 53))
        return cmp_doubles((double)l, d);
    /* Doubles at or beyond 2^63 in magnitude (including infinities) bound every int64. */
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    /* |l| > 2^53: if d is that large it is integral, so truncation is exact;
     * otherwise d is far from l and truncation cannot change the order. */
    {
        int64_t di = (int64_t)d;
        int c = cmp_i64(l, di);
        if (c != 0)
            return c;
        /* Equal integer parts: a fractional remainder of d decides. */
        double frac = d - (double)di;
        return frac > 0 ? -1 : (frac < 0 ? 1 : 0);
    }
}

static int
cmp_numbers(const bson_value_t *a, const bson_value_t *b)
{
    bson_type_t ta = a->value_type, tb = b->value_type;

    if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128) {
        bson_decimal128_t x, y;
        (void)mf_dec_from_value(a, 34, &x);
        (void)mf_dec_from_value(b, 34, &y);
        return mf_dec_cmp(&x, &y);
    }
    if (ta == BSON_TYPE_DOUBLE && tb == BSON_TYPE_DOUBLE)
        return cmp_doubles(a->value.v_double, b->value.v_double);
    if (ta == BSON_TYPE_DOUBLE) {
        int64_t l = tb == BSON_TYPE_INT64 ? b->value.v_int64 : b->value.v_int32;
        return -cmp_long_double(l, a->value.v_double);
    }
    if (tb == BSON_TYPE_DOUBLE) {
        int64_t l = ta == BSON_TYPE_INT64 ? a->value.v_int64 : a->value.v_int32;
        return cmp_long_double(l, b->value.v_double);
    }
    {
        int64_t x = ta == BSON_TYPE_INT64 ? a->value.v_int64 : a->value.v_int32;
        int64_t y = tb == BSON_TYPE_INT64 ? b->value.v_int64 : b->value.v_int32;
        return cmp_i64(x, y);
    }
}

/* cmp_bytes: bytewise comparison, shorter prefix first (MongoDB's string order). */
static int
cmp_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;

    if (c != 0)
        return c < 0 ? -1 : 1;
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

static void
value_string(const bson_value_t *v, const char **s, size_t *len)
{
    if (v->value_type == BSON_TYPE_SYMBOL) {
        *s = v->value.v_symbol.symbol;
        *len = v->value.v_symbol.len;
    } else {
        *s = v->value.v_utf8.str;
        *len = v->value.v_utf8.len;
    }
}

/* cmp_raw_docs: compares two raw BSON documents (or arrays) element by element. */
static int
cmp_raw_docs(const uint8_t *da, uint32_t la, const uint8_t *db, uint32_t lb)
{
    bson_iter_t ia, ib;
    bool ha, hb;

    if (!bson_iter_init_from_data(&ia, da, la) || !bson_iter_init_from_data(&ib, db, lb))
        return cmp_bytes((const char *)da, la, (const char *)db, lb);
    for (;;) {
        ha = bson_iter_next(&ia);
        hb = bson_iter_next(&ib);
        if (!ha || !hb)
            return ha ? 1 : (hb ? -1 : 0);
        {
            int ra = mf_value_type_rank(bson_iter_type(&ia));
            int rb = mf_value_type_rank(bson_iter_type(&ib));
            if (ra != rb)
                return ra < rb ? -1 : 1;
        }
        {
            const char *ka = bson_iter_key(&ia), *kb = bson_iter_key(&ib);
            int c = strcmp(ka, kb);
            if (c != 0)
                return c < 0 ? -1 : 1;
        }
        {
            const bson_value_t *va = bson_iter_value(&ia);
            const bson_value_t *vb = bson_iter_value(&ib);
            int c = mf_value_cmp(va, vb);
            if (c != 0)
                return c;
        }
    }
}

int
mf_value_cmp(const bson_value_t *a, const bson_value_t *b)
{
    int ra = mf_value_type_rank(a->value_type);
    int rb = mf_value_type_rank(b->value_type);

    if (ra != rb)
        return ra < rb ? -1 : 1;
    switch (a->value_type) {
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
        return 0;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        return cmp_numbers(a, b);
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: {
        const char *sa, *sb;
        size_t la, lb;
        value_string(a, &sa, &la);
        value_string(b, &sb, &lb);
        const mf_collation_t *coll = mf_collation_current();
        if (coll != NULL)
            return mf_collation_cmp(coll, sa, la, sb, lb); /* the command's collation (collation.h) */
        return cmp_bytes(sa, la, sb, lb);
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return cmp_raw_docs(a->value.v_doc.data, a->value.v_doc.data_len, b->value.v_doc.data,
                            b->value.v_doc.data_len);
    case BSON_TYPE_BINARY: {
        uint32_t la = a->value.v_binary.data_len, lb = b->value.v_binary.data_len;
        if (la != lb)
            return la < lb ? -1 : 1;
        if (a->value.v_binary.subtype != b->value.v_binary.subtype)
            return a->value.v_binary.subtype < b->value.v_binary.subtype ? -1 : 1;
        return cmp_bytes((const char *)a->value.v_binary.data, la,
                         (const char *)b->value.v_binary.data, lb);
    }
    case BSON_TYPE_OID:
        return cmp_bytes((const char *)a->value.v_oid.bytes, 12, (const char *)b->value.v_oid.bytes,
                         12);
    case BSON_TYPE_BOOL:
        return (int)a->value.v_bool - (int)b->value.v_bool;
    case BSON_TYPE_DATE_TIME:
        return cmp_i64(a->value.v_datetime, b->value.v_datetime);
    case BSON_TYPE_TIMESTAMP: {
        uint64_t x = ((uint64_t)a->value.v_timestamp.timestamp << 32) | a->value.v_timestamp.increment;
        uint64_t y = ((uint64_t)b->value.v_timestamp.timestamp << 32) | b->value.v_timestamp.increment;
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    case BSON_TYPE_REGEX: {
        int c = strcmp(a->value.v_regex.regex, b->value.v_regex.regex);
        if (c == 0)
            c = strcmp(a->value.v_regex.options ? a->value.v_regex.options : "",
                       b->value.v_regex.options ? b->value.v_regex.options : "");
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    case BSON_TYPE_DBPOINTER: {
        /*
         * MongoDB compares DBPointers by value size first, then bytes (its
         * compareElementValues), i.e. the shorter namespace first: the order
         * the index keys (keystring.c) already have.
         */
        uint32_t la = a->value.v_dbpointer.collection_len, lb = b->value.v_dbpointer.collection_len;
        if (la != lb)
            return la < lb ? -1 : 1;
        int c = cmp_bytes(a->value.v_dbpointer.collection, la, b->value.v_dbpointer.collection, lb);
        if (c != 0)
            return c;
        return cmp_bytes((const char *)a->value.v_dbpointer.oid.bytes, 12,
                         (const char *)b->value.v_dbpointer.oid.bytes, 12);
    }
    case BSON_TYPE_CODE:
        return cmp_bytes(a->value.v_code.code, a->value.v_code.code_len, b->value.v_code.code,
                         b->value.v_code.code_len);
    case BSON_TYPE_CODEWSCOPE: {
        int c = cmp_bytes(a->value.v_codewscope.code, a->value.v_codewscope.code_len,
                          b->value.v_codewscope.code, b->value.v_codewscope.code_len);
        if (c != 0)
            return c;
        return cmp_raw_docs(a->value.v_codewscope.scope_data, a->value.v_codewscope.scope_len,
                            b->value.v_codewscope.scope_data, b->value.v_codewscope.scope_len);
    }
    default:
        return 0;
    }
}

bool
mf_value_equal(const bson_value_t *a, const bson_value_t *b)
{
    return mf_value_cmp(a, b) == 0;
}

int
mf_doc_cmp(const bson_t *a, const bson_t *b)
{
    return cmp_raw_docs(bson_get_data(a), a->len, bson_get_data(b), b->len);
}

bool
mf_value_truthy(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_EOD:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
        return false;
    case BSON_TYPE_BOOL:
        return v->value.v_bool;
    case BSON_TYPE_INT32:
        return v->value.v_int32 != 0;
    case BSON_TYPE_INT64:
        return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE:
        return v->value.v_double != 0.0; /* NaN is truthy, as in MongoDB. */
    case BSON_TYPE_DECIMAL128:
        return !mf_dec_is_zero(&v->value.v_decimal128); /* NaN is truthy */
    default:
        return true;
    }
}

static const struct {
    const char *name;
    int type;
} type_aliases[] = {
    {"double", BSON_TYPE_DOUBLE},
    {"string", BSON_TYPE_UTF8},
    {"object", BSON_TYPE_DOCUMENT},
    {"array", BSON_TYPE_ARRAY},
    {"binData", BSON_TYPE_BINARY},
    {"undefined", BSON_TYPE_UNDEFINED},
    {"objectId", BSON_TYPE_OID},
    {"bool", BSON_TYPE_BOOL},
    {"date", BSON_TYPE_DATE_TIME},
    {"null", BSON_TYPE_NULL},
    {"regex", BSON_TYPE_REGEX},
    {"dbPointer", BSON_TYPE_DBPOINTER},
    {"javascript", BSON_TYPE_CODE},
    {"symbol", BSON_TYPE_SYMBOL},
    {"javascriptWithScope", BSON_TYPE_CODEWSCOPE},
    {"int", BSON_TYPE_INT32},
    {"timestamp", BSON_TYPE_TIMESTAMP},
    {"long", BSON_TYPE_INT64},
    {"decimal", BSON_TYPE_DECIMAL128},
    {"minKey", BSON_TYPE_MINKEY},
    {"maxKey", BSON_TYPE_MAXKEY},
};

int
mf_type_alias(const char *alias)
{
    if (alias == NULL)
        return -1;
    if (strcmp(alias, "number") == 0)
        return -2;
    for (size_t i = 0; i < sizeof(type_aliases) / sizeof(type_aliases[0]); i++)
        if (strcmp(alias, type_aliases[i].name) == 0)
            return type_aliases[i].type;
    return -1;
}

int
mf_value_double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

size_t
mf_value_percentile_index(double p, size_t n)
{
    double rank = ceil(p * (double)n);

    if (rank < 1)
        return 0;
    if (rank > (double)n)
        return n - 1;
    return (size_t)rank - 1;
}

const char *
mf_type_name(bson_type_t t)
{
    if (t == BSON_TYPE_EOD)
        return "missing";
    for (size_t i = 0; i < sizeof(type_aliases) / sizeof(type_aliases[0]); i++)
        if ((int)t == type_aliases[i].type)
            return type_aliases[i].name;
    return "unknown";
}

bool
mf_bson_append_value(bson_t *b, const char *key, int keylen, const bson_value_t *v)
{
    return bson_append_value(b, key, keylen, v);
}

int
mf_value_check_n(const bson_value_t *v, int64_t *n, mf_error_t *err)
{
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_Location5787902, "Value for 'n' must be of integral type, but found %s",
                          mf_type_name(v->value_type));
    if (!mf_value_as_int64(v, n))
        return mf_err_set(err, MF_E_Location5787903, "Value for 'n' must be of integral type, but found %g",
                          mf_value_as_double(v));
    if (*n <= 0)
        return mf_err_set(err, MF_E_Location5787908, "'n' must be greater than 0, found %lld", (long long)*n);
    return 0;
}

void
mf_value_set_decimal_from_double(bson_value_t *o, double x)
{
    mf_value_set_type(o, BSON_TYPE_DECIMAL128);
    mf_dec_from_double(x, 15, &o->value.v_decimal128);
}

void
mf_value_set_strn(bson_value_t *o, const char *s, size_t len)
{
    mf_value_set_type(o, BSON_TYPE_UTF8);
    o->value.v_utf8.str = bson_malloc(len + 1);
    if (len)
        memcpy(o->value.v_utf8.str, s, len);
    o->value.v_utf8.str[len] = '\0';
    o->value.v_utf8.len = (uint32_t)len;
}

void
mf_value_set_str(bson_value_t *o, const char *s)
{
    mf_value_set_strn(o, s, strlen(s));
}

void
mf_value_take_bson(bson_value_t *o, bson_t *b, bool is_array)
{
    mf_value_set_type(o, is_array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT);
    o->value.v_doc.data_len = b->len;
    o->value.v_doc.data = bson_malloc(b->len);
    memcpy(o->value.v_doc.data, bson_get_data(b), b->len);
    bson_destroy(b);
}
