/*
 * test_value.c: unit tests for src/query/value.c (canonical BSON ordering,
 * numeric cross-type comparison, type aliases, truthiness).
 */
#include <criterion/criterion.h>
#include <math.h>

#include "common/fmt.h"
#include "doc/value.h"
#include "unit_util.h"

static bson_value_t
dec(const char *s)
{
    bson_value_t v = {.value_type = BSON_TYPE_DECIMAL128};
    bson_decimal128_from_string(s, &v.value.v_decimal128);
    return v;
}

static bson_value_t
str(const char *s)
{
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = (char *)s;
    v.value.v_utf8.len = (uint32_t)strlen(s);
    return v;
}

static bson_value_t
of_type(bson_type_t t)
{
    bson_value_t v;
    memset(&v, 0, sizeof(v));
    v.value_type = t;
    return v;
}

/* field_of: the value of "v" in a JSON document (borrowed from doc). */
static bson_value_t
field_of(bson_t *doc)
{
    bson_iter_t it;
    cr_assert(bson_iter_init_find(&it, doc, "v"));
    return *bson_iter_value(&it);
}

#define CMP(a, b) mf_value_cmp(&(a), &(b))

Test(value, type_order_follows_mongodb_canonical_ranks)
{
    bson_value_t minkey = of_type(BSON_TYPE_MINKEY), null = of_type(BSON_TYPE_NULL);
    bson_value_t num = i32(1000000), s = str("a"), maxkey = of_type(BSON_TYPE_MAXKEY);
    bson_value_t b = of_type(BSON_TYPE_BOOL), date = of_type(BSON_TYPE_DATE_TIME);
    bson_value_t oid = of_type(BSON_TYPE_OID);
    bson_t *d = bson_new_from_json((const uint8_t *)"{\"v\": {}}", -1, NULL);
    bson_t *a = bson_new_from_json((const uint8_t *)"{\"v\": []}", -1, NULL);
    bson_value_t obj = field_of(d), arr = field_of(a);

    cr_assert_lt(CMP(minkey, null), 0);
    cr_assert_lt(CMP(null, num), 0);
    cr_assert_lt(CMP(num, s), 0, "numbers sort before strings");
    cr_assert_lt(CMP(s, obj), 0);
    cr_assert_lt(CMP(obj, arr), 0);
    cr_assert_lt(CMP(arr, oid), 0);
    cr_assert_lt(CMP(oid, b), 0);
    cr_assert_lt(CMP(b, date), 0);
    cr_assert_lt(CMP(date, maxkey), 0);
    cr_assert_gt(CMP(maxkey, minkey), 0);
    bson_destroy(d);
    bson_destroy(a);
}

Test(value, numbers_compare_across_types_by_value)
{
    bson_value_t a = i32(1), b = i64(1), c = dbl(1.0), d = dec("1.0");
    cr_assert(mf_value_equal(&a, &b));
    cr_assert(mf_value_equal(&a, &c));
    cr_assert(mf_value_equal(&b, &c));
    cr_assert(mf_value_equal(&c, &d));
    cr_assert(mf_value_equal(&a, &d));
    bson_value_t e = dbl(1.5), f = i64(2);
    cr_assert_lt(CMP(a, e), 0);
    cr_assert_lt(CMP(e, f), 0);
    cr_assert_gt(CMP(f, e), 0);
    bson_value_t z = dbl(-0.0), z2 = i32(0);
    cr_assert_eq(CMP(z, z2), 0, "-0.0 equals 0");
}

Test(value, int64_vs_double_is_exact_beyond_2_pow_53)
{
    int64_t big = (INT64_C(1) << 53) + 1;
    bson_value_t l = i64(big), d = dbl((double)(INT64_C(1) << 53));
    cr_assert_gt(CMP(l, d), 0, "2^53+1 > 2^53 as double");
    cr_assert_lt(CMP(d, l), 0);
    bson_value_t mx = i64(INT64_MAX), two63 = dbl(9223372036854775808.0);
    cr_assert_lt(CMP(mx, two63), 0, "INT64_MAX < 2^63");
    bson_value_t mn = i64(INT64_MIN), m63 = dbl(-9223372036854775808.0);
    cr_assert_eq(CMP(mn, m63), 0, "INT64_MIN == -2^63");
    bson_value_t inf = dbl(INFINITY), ninf = dbl(-INFINITY);
    cr_assert_lt(CMP(mx, inf), 0);
    cr_assert_gt(CMP(mn, ninf), 0);
    bson_value_t half = dbl(0.5), zero = i64(0), one = i64(1);
    cr_assert_lt(CMP(zero, half), 0);
    cr_assert_gt(CMP(one, half), 0);
}

Test(value, nan_is_lowest_number_and_equals_itself)
{
    bson_value_t n1 = dbl(NAN), n2 = dbl(NAN), ninf = dbl(-INFINITY), l = i64(INT64_MIN);
    bson_value_t dn = dec("NaN"), null = of_type(BSON_TYPE_NULL);
    cr_assert_eq(CMP(n1, n2), 0);
    cr_assert_lt(CMP(n1, ninf), 0);
    cr_assert_lt(CMP(n1, l), 0);
    cr_assert_gt(CMP(l, n1), 0);
    cr_assert_eq(CMP(n1, dn), 0, "double NaN equals decimal NaN");
    cr_assert_gt(CMP(n1, null), 0, "NaN is still a number, above null");
}

Test(value, decimal128_compares_via_conversion)
{
    bson_value_t a = dec("2.5"), b = dbl(2.5), c = dec("3"), d = i32(3), e = dec("-Infinity");
    cr_assert_eq(CMP(a, b), 0);
    cr_assert_lt(CMP(a, c), 0);
    cr_assert_eq(CMP(c, d), 0);
    cr_assert_lt(CMP(e, d), 0);
}

Test(value, strings_compare_bytewise_and_symbols_equal_strings)
{
    bson_value_t a = str("abc"), b = str("abd"), c = str("ab"), B = str("B");
    bson_value_t sym = {.value_type = BSON_TYPE_SYMBOL};
    sym.value.v_symbol.symbol = "abc";
    sym.value.v_symbol.len = 3;
    cr_assert_lt(CMP(a, b), 0);
    cr_assert_lt(CMP(c, a), 0, "prefix sorts first");
    cr_assert_lt(CMP(B, a), 0, "uppercase before lowercase");
    cr_assert_eq(CMP(a, sym), 0);
}

Test(value, documents_and_arrays_compare_recursively)
{
    bson_t *x = bson_new_from_json((const uint8_t *)"{\"a\": 1, \"b\": [1, 2]}", -1, NULL);
    bson_t *y = bson_new_from_json((const uint8_t *)"{\"a\": 1.0, \"b\": [1, {\"$numberLong\": \"2\"}]}", -1, NULL);
    bson_t *z = bson_new_from_json((const uint8_t *)"{\"a\": 1, \"b\": [1, 3]}", -1, NULL);
    bson_t *w = bson_new_from_json((const uint8_t *)"{\"a\": 1}", -1, NULL);
    bson_t *s = bson_new_from_json((const uint8_t *)"{\"a\": \"x\"}", -1, NULL);
    bson_t *k = bson_new_from_json((const uint8_t *)"{\"b\": 1}", -1, NULL);
    cr_assert_eq(mf_doc_cmp(x, y), 0);
    cr_assert_lt(mf_doc_cmp(x, z), 0);
    cr_assert_lt(mf_doc_cmp(w, x), 0, "shorter document first");
    cr_assert_lt(mf_doc_cmp(w, s), 0, "type rank before value");
    cr_assert_lt(mf_doc_cmp(w, k), 0, "field name decides");
    bson_destroy(x);
    bson_destroy(y);
    bson_destroy(z);
    bson_destroy(w);
    bson_destroy(s);
    bson_destroy(k);
}

Test(value, type_aliases_and_names_round_trip)
{
    const char *names[] = {"double", "string", "object", "array", "binData", "undefined",
                           "objectId", "bool", "date", "null", "regex", "dbPointer",
                           "javascript", "symbol", "javascriptWithScope", "int", "timestamp",
                           "long", "decimal", "minKey", "maxKey"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int t = mf_type_alias(names[i]);
        cr_assert_geq(t, 0, "alias %s", names[i]);
        cr_assert_str_eq(mf_type_name((bson_type_t)t), names[i]);
    }
    cr_assert_eq(mf_type_alias("number"), -2);
    cr_assert_eq(mf_type_alias("nope"), -1);
    cr_assert_eq(mf_type_alias("int"), BSON_TYPE_INT32);
    cr_assert_eq(mf_type_alias("minKey"), BSON_TYPE_MINKEY);
}

Test(value, truthiness_matches_mongodb)
{
    bson_value_t f = of_type(BSON_TYPE_BOOL), n = of_type(BSON_TYPE_NULL);
    bson_value_t u = of_type(BSON_TYPE_UNDEFINED), z = i32(0), zd = dbl(0.0), zdec = dec("0");
    bson_value_t one = i64(1), s = str(""), nan = dbl(NAN), miss = of_type(BSON_TYPE_EOD);
    cr_assert_not(mf_value_truthy(&f));
    cr_assert_not(mf_value_truthy(&n));
    cr_assert_not(mf_value_truthy(&u));
    cr_assert_not(mf_value_truthy(&z));
    cr_assert_not(mf_value_truthy(&zd));
    cr_assert_not(mf_value_truthy(&zdec));
    cr_assert_not(mf_value_truthy(&miss));
    cr_assert(mf_value_truthy(&one));
    cr_assert(mf_value_truthy(&s), "empty string is truthy");
    cr_assert(mf_value_truthy(&nan));
}

Test(value, as_int64_only_for_exact_integers)
{
    int64_t out = 0;
    bson_value_t a = dbl(3.0), b = dbl(3.5), c = dbl(9223372036854775808.0), d = dec("42");
    bson_value_t s = str("1");
    cr_assert(mf_value_as_int64(&a, &out));
    cr_assert_eq(out, 3);
    cr_assert_not(mf_value_as_int64(&b, &out));
    cr_assert_not(mf_value_as_int64(&c, &out));
    cr_assert(mf_value_as_int64(&d, &out));
    cr_assert_eq(out, 42);
    cr_assert_not(mf_value_as_int64(&s, &out));
    cr_assert(mf_value_is_number(&d));
    cr_assert_not(mf_value_is_number(&s));
    cr_assert_float_eq(mf_value_as_double(&d), 42.0, 1e-9);
}

Test(value, append_value_with_key_length)
{
    bson_t b = BSON_INITIALIZER;
    bson_value_t v = i32(7);
    bson_iter_t it;
    cr_assert(mf_bson_append_value(&b, "abc", 2, &v));
    cr_assert(bson_iter_init_find(&it, &b, "ab"));
    cr_assert_eq(bson_iter_int32(&it), 7);
    bson_destroy(&b);
}

/* Values in messages: doubles as mongod's StringBuilder::appendDoubleNice prints them (%.16g, ".0" if no '.', 'E', 'N'). */
Test(value, fmt_double_is_mongods_append_double_nice)
{
    static const struct {
        double d;
        const char *want;
    } cases[] = {{1, "1.0"},       {-2, "-2.0"},           {0.1, "0.1"},         {1.5, "1.5"},
                 {2.5e-7, "2.5e-07"}, {1e20, "1e+20.0"},     {1e15, "1000000000000000.0"}, {1e16, "1e+16.0"},    {123456789012345.0, "123456789012345.0"},
                 {1.0 / 3, "0.3333333333333333"}, {NAN, "nan.0"}, {INFINITY, "inf.0"}, {-INFINITY, "-inf.0"}};
    char buf[40];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mf_fmt_double(cases[i].d, buf, sizeof buf);
        cr_expect_str_eq(buf, cases[i].want, "%.17g", cases[i].d);
        bson_value_t v = dbl(cases[i].d);
        char vb[40];
        mf_fmt_value(&v, vb, sizeof vb);
        cr_expect_str_eq(vb, cases[i].want, "mf_fmt_value of %.17g", cases[i].d);
    }
}

/* Strings in messages: as mongod's BSONElement::toString (not full), 160 bytes or more show the first 150 and "...". */
Test(value, fmt_string_shortens_long_strings_as_mongods_to_string)
{
    char s[200], want[200], buf[400];
    memset(s, 'x', sizeof s);
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = s;
    v.value.v_utf8.len = 159; /* whole */
    mf_fmt_value(&v, buf, sizeof buf);
    cr_expect_eq(strlen(buf), 161);
    v.value.v_utf8.len = 160; /* shortened */
    mf_fmt_value(&v, buf, sizeof buf);
    snprintf(want, sizeof want, "\"%.150s...\"", s);
    cr_expect_str_eq(buf, want);
    /* Never half a character: a 2-byte one across byte 150 is left out whole. */
    memcpy(s + 149, "\xc3\xa9", 2);
    v.value.v_utf8.len = 180;
    mf_fmt_value(&v, buf, sizeof buf);
    snprintf(want, sizeof want, "\"%.149s...\"", s);
    cr_expect_str_eq(buf, want);
}
