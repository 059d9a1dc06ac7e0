/*
 * test_keystring.c: the order-preserving index key encoding. A long list of
 * values in MongoDB's order (with equal values grouped) is encoded in both
 * directions and every pair's memcmp order is checked, then decoding,
 * type bits, bounds and record ids.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "index/keystring.h"
#include "doc/value.h"

#define MAXV 128

static bson_t g_vals;     /* fields "0", "1", ... hold the values in order */
static int g_group[MAXV]; /* equal values share a group; groups ascend */
static int g_n;
static int g_cur_group;

static void
next_group(void)
{
    g_cur_group++;
}

static const char *
k(void)
{
    static char buf[16];
    snprintf(buf, sizeof buf, "%d", g_n);
    g_group[g_n++] = g_cur_group;
    return buf;
}

static void
add_dec(const char *s)
{
    bson_decimal128_t d;
    cr_assert(bson_decimal128_from_string(s, &d));
    bson_append_decimal128(&g_vals, k(), -1, &d);
}

static void
build_values(void)
{
    bson_t sub;
    bson_oid_t oid;
    const uint8_t bin1[] = {0xFF}, bin0[] = {0x00}, bin2[] = {0x00, 0x00};

    bson_init(&g_vals);
    g_n = 0;
    g_cur_group = 0;

    bson_append_minkey(&g_vals, k(), -1);
    next_group();
    bson_append_null(&g_vals, k(), -1);
    next_group();
    bson_append_double(&g_vals, k(), -1, NAN);
    add_dec("NaN");
    next_group();
    bson_append_double(&g_vals, k(), -1, -INFINITY);
    add_dec("-Infinity");
    next_group();
    add_dec("-2E+400");
    next_group();
    add_dec("-1E+400");
    next_group();
    bson_append_double(&g_vals, k(), -1, -1.7976931348623157e308);
    next_group();
    bson_append_int64(&g_vals, k(), -1, INT64_MIN);
    bson_append_double(&g_vals, k(), -1, -9223372036854775808.0);
    next_group();
    bson_append_int64(&g_vals, k(), -1, -9007199254740993LL); /* -2^53 - 1 */
    next_group();
    bson_append_int64(&g_vals, k(), -1, -9007199254740992LL);
    bson_append_double(&g_vals, k(), -1, -9007199254740992.0);
    next_group();
    bson_append_double(&g_vals, k(), -1, -1.5);
    next_group();
    /* Decimals that round to the same double (and long double) as -1 still order exactly. */
    add_dec("-1.0000000000000000000002");
    next_group();
    add_dec("-1.0000000000000000000001");
    add_dec("-1.00000000000000000000010");
    next_group();
    bson_append_int32(&g_vals, k(), -1, -1);
    bson_append_int64(&g_vals, k(), -1, -1);
    bson_append_double(&g_vals, k(), -1, -1.0);
    next_group();
    add_dec("-1E-6000"); /* below every double's reach: rounds to -0 */
    next_group();
    bson_append_double(&g_vals, k(), -1, -0.0);
    bson_append_int32(&g_vals, k(), -1, 0);
    bson_append_int64(&g_vals, k(), -1, 0);
    bson_append_double(&g_vals, k(), -1, 0.0);
    add_dec("0");
    next_group();
    add_dec("1E-6001");
    next_group();
    add_dec("1E-6000");
    next_group();
    bson_append_double(&g_vals, k(), -1, 5e-324);
    next_group();
    /*
     * Around the double nearest 0.1 (0.1000000000000000055511151231257827021181583404541015625):
     * as MongoDB's compareDecimalToDouble, the double equals its 34-digit decimal.
     */
    add_dec("0.1");
    add_dec("0.100");
    next_group();
    add_dec("0.10000000000000000001");
    next_group();
    add_dec("0.10000000000000000002");
    next_group();
    add_dec("0.1000000000000000055511151231257826");
    next_group();
    add_dec("0.1000000000000000055511151231257827");
    bson_append_double(&g_vals, k(), -1, 0.1);
    next_group();
    add_dec("0.1000000000000000055511151231257828");
    next_group();
    bson_append_double(&g_vals, k(), -1, 0.5);
    add_dec("0.5");
    next_group();
    bson_append_int32(&g_vals, k(), -1, 1);
    bson_append_int64(&g_vals, k(), -1, 1);
    bson_append_double(&g_vals, k(), -1, 1.0);
    add_dec("1");
    add_dec("1.000");
    next_group();
    add_dec("1.000000000000000000000000000000001"); /* 34 digits */
    next_group();
    add_dec("1.0000000000000000000001");
    add_dec("1.00000000000000000000010");
    next_group();
    add_dec("1.0000000000000000000002");
    next_group();
    add_dec("1.1"); /* exactly 1.1, below the double nearest 1.1 */
    next_group();
    bson_append_double(&g_vals, k(), -1, 1.1);
    next_group();
    bson_append_int64(&g_vals, k(), -1, 2147483648LL);
    bson_append_double(&g_vals, k(), -1, 2147483648.0);
    next_group();
    bson_append_int64(&g_vals, k(), -1, 9007199254740992LL); /* 2^53 */
    bson_append_double(&g_vals, k(), -1, 9007199254740992.0);
    next_group();
    bson_append_int64(&g_vals, k(), -1, 9007199254740993LL); /* 2^53 + 1 */
    add_dec("9007199254740993");
    next_group();
    bson_append_int64(&g_vals, k(), -1, 9007199254740994LL);
    bson_append_double(&g_vals, k(), -1, 9007199254740994.0);
    next_group();
    bson_append_int64(&g_vals, k(), -1, INT64_MAX - 1);
    next_group();
    bson_append_int64(&g_vals, k(), -1, INT64_MAX);
    next_group();
    bson_append_double(&g_vals, k(), -1, 9223372036854775808.0); /* 2^63 */
    next_group();
    /* Past 2^53: the residual from D, exactly, in decimal arithmetic. */
    add_dec("12345678901234567890.122");
    next_group();
    add_dec("12345678901234567890.123");
    next_group();
    /* Past 2^112: decimals that share D and an estimated floor, ordered by their exact value. */
    add_dec("1E+40");
    next_group();
    add_dec("1.000000000000000000000000000000001E+40");
    next_group();
    bson_append_double(&g_vals, k(), -1, 1e40);
    next_group();
    bson_append_double(&g_vals, k(), -1, 1e300);
    next_group();
    add_dec("1E+400");
    next_group();
    add_dec("2E+400");
    next_group();
    bson_append_double(&g_vals, k(), -1, INFINITY);
    add_dec("Infinity");
    next_group();

    bson_append_utf8(&g_vals, k(), -1, "", 0);
    bson_append_symbol(&g_vals, k(), -1, "", 0);
    next_group();
    bson_append_utf8(&g_vals, k(), -1, "a", 1);
    next_group();
    bson_append_utf8(&g_vals, k(), -1, "a\0b", 3);
    next_group();
    bson_append_utf8(&g_vals, k(), -1, "ab", 2);
    next_group();
    bson_append_utf8(&g_vals, k(), -1, "b", 1);
    next_group();

    bson_append_document_begin(&g_vals, k(), -1, &sub);
    bson_append_document_end(&g_vals, &sub);
    next_group();
    bson_append_document_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "a", 1);
    bson_append_document_end(&g_vals, &sub);
    bson_append_document_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_DOUBLE(&sub, "a", 1.0);
    bson_append_document_end(&g_vals, &sub);
    next_group();
    bson_append_document_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "a", 1);
    BSON_APPEND_INT32(&sub, "b", 1);
    bson_append_document_end(&g_vals, &sub);
    next_group();
    bson_append_document_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "aa", 0);
    bson_append_document_end(&g_vals, &sub);
    next_group();
    bson_append_document_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "b", 0);
    bson_append_document_end(&g_vals, &sub);
    next_group();
    /* Element type is compared before field name: {b: 0} < {a: "x"}. */
    bson_append_document_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_UTF8(&sub, "a", "x");
    bson_append_document_end(&g_vals, &sub);
    next_group();

    bson_append_array_begin(&g_vals, k(), -1, &sub);
    bson_append_array_end(&g_vals, &sub);
    next_group();
    bson_append_array_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "0", 1);
    bson_append_array_end(&g_vals, &sub);
    next_group();
    bson_append_array_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "0", 1);
    BSON_APPEND_INT32(&sub, "1", 2);
    bson_append_array_end(&g_vals, &sub);
    next_group();
    bson_append_array_begin(&g_vals, k(), -1, &sub);
    BSON_APPEND_INT32(&sub, "0", 2);
    bson_append_array_end(&g_vals, &sub);
    next_group();

    bson_append_binary(&g_vals, k(), -1, BSON_SUBTYPE_BINARY, NULL, 0);
    next_group();
    bson_append_binary(&g_vals, k(), -1, BSON_SUBTYPE_BINARY, bin1, 1);
    next_group();
    bson_append_binary(&g_vals, k(), -1, BSON_SUBTYPE_USER, bin0, 1);
    next_group();
    bson_append_binary(&g_vals, k(), -1, BSON_SUBTYPE_BINARY, bin2, 2);
    next_group();

    bson_oid_init_from_string(&oid, "000000000000000000000001");
    bson_append_oid(&g_vals, k(), -1, &oid);
    next_group();
    bson_oid_init_from_string(&oid, "ffffffffffffffffffffffff");
    bson_append_oid(&g_vals, k(), -1, &oid);
    next_group();

    bson_append_bool(&g_vals, k(), -1, false);
    next_group();
    bson_append_bool(&g_vals, k(), -1, true);
    next_group();

    bson_append_date_time(&g_vals, k(), -1, -1000000);
    next_group();
    bson_append_date_time(&g_vals, k(), -1, -1);
    next_group();
    bson_append_date_time(&g_vals, k(), -1, 0);
    next_group();
    bson_append_date_time(&g_vals, k(), -1, 1700000000000LL);
    next_group();

    bson_append_timestamp(&g_vals, k(), -1, 1, 5);
    next_group();
    bson_append_timestamp(&g_vals, k(), -1, 2, 0);
    next_group();
    bson_append_timestamp(&g_vals, k(), -1, 0xFFFFFFFFu, 1);
    next_group();

    bson_append_regex(&g_vals, k(), -1, "a", "");
    next_group();
    bson_append_regex(&g_vals, k(), -1, "a", "i");
    next_group();
    bson_append_regex(&g_vals, k(), -1, "ab", "");
    next_group();
    bson_append_regex(&g_vals, k(), -1, "b", "");
    next_group();

    bson_append_maxkey(&g_vals, k(), -1);
    cr_assert(g_n < MAXV);
}

static bson_value_t g_v[MAXV];
static mf_keystring_t g_asc[MAXV], g_desc[MAXV];

static void
setup(void)
{
    bson_iter_t it;
    mf_error_t err = {0};
    int i = 0;

    build_values();
    cr_assert(bson_iter_init(&it, &g_vals));
    while (bson_iter_next(&it)) {
        g_v[i] = *bson_iter_value(&it);
        mf_ks_init(&g_asc[i]);
        mf_ks_init(&g_desc[i]);
        cr_assert_eq(mf_ks_append_value(&g_asc[i], &g_v[i], false, &err), 0, "value %d: %s", i, err.msg);
        cr_assert_eq(mf_ks_append_value(&g_desc[i], &g_v[i], true, &err), 0, "value %d: %s", i, err.msg);
        i++;
    }
    cr_assert_eq(i, g_n);
}

static void
teardown(void)
{
    for (int i = 0; i < g_n; i++) {
        mf_ks_destroy(&g_asc[i]);
        mf_ks_destroy(&g_desc[i]);
    }
    bson_destroy(&g_vals);
}

static int
sign(int x)
{
    return (x > 0) - (x < 0);
}

static int
ks_cmp(const mf_keystring_t *a, const mf_keystring_t *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    if (c != 0)
        return sign(c);
    return (a->len > b->len) - (a->len < b->len);
}

TestSuite(keystring, .init = setup, .fini = teardown);

Test(keystring, ascending_encodings_order_every_pair_like_mongodb)
{
    for (int i = 0; i < g_n; i++)
        for (int j = 0; j < g_n; j++) {
            int want = sign(g_group[i] - g_group[j]);
            int got = ks_cmp(&g_asc[i], &g_asc[j]);
            cr_assert_eq(got, want, "values %d and %d (groups %d, %d): memcmp %d, expected %d", i, j, g_group[i],
                         g_group[j], got, want);
        }
}

Test(keystring, descending_encodings_reverse_every_pair)
{
    for (int i = 0; i < g_n; i++)
        for (int j = 0; j < g_n; j++) {
            int want = -sign(g_group[i] - g_group[j]);
            int got = ks_cmp(&g_desc[i], &g_desc[j]);
            cr_assert_eq(got, want, "values %d and %d: memcmp %d, expected %d", i, j, got, want);
        }
}

Test(keystring, equal_numbers_encode_to_identical_bytes)
{
    for (int i = 0; i < g_n; i++)
        for (int j = 0; j < g_n; j++)
            if (g_group[i] == g_group[j]) {
                cr_assert_eq(g_asc[i].len, g_asc[j].len, "values %d and %d", i, j);
                cr_assert(memcmp(g_asc[i].data, g_asc[j].data, g_asc[i].len) == 0, "values %d and %d", i, j);
            }
}

Test(keystring, order_agrees_with_mf_value_cmp)
{
    for (int i = 0; i < g_n; i++)
        for (int j = 0; j < g_n; j++) {
            int want = sign(mf_value_cmp(&g_v[i], &g_v[j]));
            int got = ks_cmp(&g_asc[i], &g_asc[j]);
            cr_assert_eq(got, want, "values %d and %d: keystring %d, mf_value_cmp %d", i, j, got, want);
        }
}

/* Same value? Like bson_equal on one-field documents, but NaN equals NaN. */
static bool
same_value(const bson_value_t *a, const bson_value_t *b)
{
    bson_t da = BSON_INITIALIZER, db = BSON_INITIALIZER;
    bool eq;

    if (a->value_type == BSON_TYPE_DOUBLE && b->value_type == BSON_TYPE_DOUBLE && isnan(a->value.v_double))
        return isnan(b->value.v_double);
    bson_append_value(&da, "v", 1, a);
    bson_append_value(&db, "v", 1, b);
    eq = bson_equal(&da, &db);
    bson_destroy(&da);
    bson_destroy(&db);
    return eq;
}

Test(keystring, typed_decode_round_trips_every_value_both_directions)
{
    for (int i = 0; i < g_n; i++) {
        for (int d = 0; d < 2; d++) {
            mf_keystring_t *ks = d ? &g_desc[i] : &g_asc[i];
            bool dir = d;
            bson_t out = BSON_INITIALIZER;
            bson_iter_t it;
            mf_error_t err = {0};
            size_t tblen;
            const uint8_t *tb = mf_ks_typebits(ks, &tblen);
            bson_value_t want = g_v[i];

            cr_assert_eq(mf_ks_decode_typed(ks->data, ks->len, tb, tblen, &dir, 1, &out, &err), 0, "value %d: %s", i,
                         err.msg);
            cr_assert(bson_iter_init_find(&it, &out, "0"));
            if (want.value_type == BSON_TYPE_SYMBOL) {
                cr_assert_eq(bson_iter_type(&it), BSON_TYPE_UTF8);
            } else {
                char *js = bson_as_canonical_extended_json(&out, NULL);
                cr_assert(same_value(bson_iter_value(&it), &want), "value %d decoded as %s", i, js);
                bson_free(js);
            }
            bson_destroy(&out);
        }
    }
}

Test(keystring, untyped_decode_returns_canonical_numeric_types)
{
    struct {
        bson_value_t in;
        bson_type_t type;
    } cases[] = {
        {{.value_type = BSON_TYPE_INT32, .value.v_int32 = 5}, BSON_TYPE_INT32},
        {{.value_type = BSON_TYPE_DOUBLE, .value.v_double = 5.0}, BSON_TYPE_INT32},
        {{.value_type = BSON_TYPE_INT64, .value.v_int64 = 5}, BSON_TYPE_INT32},
        {{.value_type = BSON_TYPE_INT64, .value.v_int64 = 9007199254740993LL}, BSON_TYPE_INT64},
        {{.value_type = BSON_TYPE_INT64, .value.v_int64 = INT64_MIN}, BSON_TYPE_INT64},
        {{.value_type = BSON_TYPE_INT64, .value.v_int64 = INT64_MAX}, BSON_TYPE_INT64},
        {{.value_type = BSON_TYPE_DOUBLE, .value.v_double = 1.5}, BSON_TYPE_DOUBLE},
        {{.value_type = BSON_TYPE_DOUBLE, .value.v_double = 1e300}, BSON_TYPE_DOUBLE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mf_keystring_t ks;
        bson_t out = BSON_INITIALIZER;
        bson_iter_t it;
        mf_error_t err = {0};
        mf_ks_init(&ks);
        cr_assert_eq(mf_ks_append_value(&ks, &cases[i].in, false, &err), 0);
        cr_assert_eq(mf_ks_decode(ks.data, ks.len, NULL, 1, &out, &err), 0, "%s", err.msg);
        cr_assert(bson_iter_init_find(&it, &out, "0"));
        cr_assert_eq(bson_iter_type(&it), cases[i].type, "case %zu: type %d, expected %d", i, bson_iter_type(&it),
                     cases[i].type);
        cr_assert(mf_value_equal(bson_iter_value(&it), &cases[i].in), "case %zu changed value", i);
        mf_ks_destroy(&ks);
        bson_destroy(&out);
    }
}

Test(keystring, compound_key_with_mixed_directions_decodes_and_carries_record_id)
{
    mf_keystring_t ks;
    mf_error_t err = {0};
    bool dirs[3] = {false, true, false};
    bson_t out = BSON_INITIALIZER;
    bson_t *want = BCON_NEW("0", "hello", "1", BCON_INT64(9007199254740993LL), "2", "[", BCON_INT32(1), "{",
                            "x", BCON_BOOL(true), "}", "]");
    bson_iter_t it;
    int idx = 0;
    size_t tblen;
    const uint8_t *tb;

    mf_ks_init(&ks);
    cr_assert(bson_iter_init(&it, want));
    while (bson_iter_next(&it)) {
        cr_assert_eq(mf_ks_append_value(&ks, bson_iter_value(&it), dirs[idx], &err), 0, "%s", err.msg);
        idx++;
    }
    tb = mf_ks_typebits(&ks, &tblen);
    cr_assert_eq(mf_ks_decode_typed(ks.data, ks.len, tb, tblen, dirs, 3, &out, &err), 0, "%s", err.msg);
    cr_assert(bson_equal(&out, want));
    bson_reinit(&out);
    cr_assert_eq(mf_ks_decode(ks.data, ks.len, dirs, 3, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_doc_cmp(&out, want), 0);

    size_t keylen = ks.len;
    mf_ks_append_recordid(&ks, 123456789012LL);
    cr_assert_eq(ks.len, keylen + 8);
    cr_assert_eq(mf_ks_read_recordid(ks.data, ks.len), 123456789012LL);
    /* Decoding the key part alone still works once the record id is stripped. */
    bson_reinit(&out);
    cr_assert_eq(mf_ks_decode(ks.data, keylen, dirs, 3, &out, &err), 0, "%s", err.msg);
    mf_ks_destroy(&ks);
    bson_destroy(&out);
    bson_destroy(want);
}

Test(keystring, equal_keys_sort_by_record_id)
{
    mf_keystring_t a, b;
    mf_error_t err = {0};
    bson_value_t v = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 7};
    bson_value_t w = {.value_type = BSON_TYPE_DOUBLE, .value.v_double = 7.0};

    mf_ks_init(&a);
    mf_ks_init(&b);
    cr_assert_eq(mf_ks_append_value(&a, &v, true, &err), 0);
    cr_assert_eq(mf_ks_append_value(&b, &w, true, &err), 0);
    mf_ks_append_recordid(&a, 2);
    mf_ks_append_recordid(&b, 256);
    cr_assert_lt(ks_cmp(&a, &b), 0);
    cr_assert_eq(mf_ks_read_recordid(b.data, b.len), 256);
    mf_ks_reset(&a);
    cr_assert_eq(a.len, 0u);
    mf_ks_destroy(&a);
    mf_ks_destroy(&b);
}

Test(keystring, bounds_sort_outside_every_value_in_both_directions)
{
    for (int d = 0; d < 2; d++) {
        mf_keystring_t lo, hi;
        mf_ks_init(&lo);
        mf_ks_init(&hi);
        mf_ks_append_minkey(&lo, d);
        mf_ks_append_maxkey(&hi, d);
        for (int i = 0; i < g_n; i++) {
            mf_keystring_t *v = d ? &g_desc[i] : &g_asc[i];
            cr_assert_lt(ks_cmp(&lo, v), 0, "value %d dir %d", i, d);
            cr_assert_gt(ks_cmp(&hi, v), 0, "value %d dir %d", i, d);
        }
        /* Bounds decode as MinKey / MaxKey. */
        bool dir = d;
        bson_t out = BSON_INITIALIZER;
        mf_error_t err = {0};
        bson_iter_t it;
        cr_assert_eq(mf_ks_decode(lo.data, lo.len, &dir, 1, &out, &err), 0);
        cr_assert(bson_iter_init_find(&it, &out, "0"));
        cr_assert_eq(bson_iter_type(&it), BSON_TYPE_MINKEY);
        bson_destroy(&out);
        mf_ks_destroy(&lo);
        mf_ks_destroy(&hi);
    }
}

Test(keystring, prefix_range_bounds_bracket_keys_with_record_ids)
{
    /* Index {a: 1, b: -1}; the range a == 5 is [5 minkey, 5 maxkey]. */
    bson_value_t five = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 5};
    bson_value_t six = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 6};
    bson_value_t bv = {.value_type = BSON_TYPE_UTF8, .value.v_utf8 = {.str = "zz", .len = 2}};
    mf_keystring_t lo, hi, key, other;
    mf_error_t err = {0};

    mf_ks_init(&lo);
    mf_ks_init(&hi);
    mf_ks_init(&key);
    mf_ks_init(&other);
    cr_assert_eq(mf_ks_append_value(&lo, &five, false, &err), 0);
    mf_ks_append_minkey(&lo, true);
    cr_assert_eq(mf_ks_append_value(&hi, &five, false, &err), 0);
    mf_ks_append_maxkey(&hi, true);
    cr_assert_eq(mf_ks_append_value(&key, &five, false, &err), 0);
    cr_assert_eq(mf_ks_append_value(&key, &bv, true, &err), 0);
    mf_ks_append_recordid(&key, INT64_MAX);
    cr_assert_eq(mf_ks_append_value(&other, &six, false, &err), 0);
    mf_ks_append_minkey(&other, true);
    cr_assert_lt(ks_cmp(&lo, &key), 0);
    cr_assert_gt(ks_cmp(&hi, &key), 0);
    cr_assert_lt(ks_cmp(&hi, &other), 0);
    mf_ks_destroy(&lo);
    mf_ks_destroy(&hi);
    mf_ks_destroy(&key);
    mf_ks_destroy(&other);
}

Test(keystring, a_fractional_decimal_carries_its_exact_value_and_keys_written_before_that_still_decode)
{
    /* {a: 1.0000000000000000000001 (decimal), b: "x"}: the decimal's extension ends before b's component. */
    bson_decimal128_t dec;
    cr_assert(bson_decimal128_from_string("1.0000000000000000000001", &dec));
    bson_value_t a = {.value_type = BSON_TYPE_DECIMAL128, .value.v_decimal128 = dec};
    bson_value_t b = {.value_type = BSON_TYPE_UTF8, .value.v_utf8 = {.str = "x", .len = 1}};
    bool dirs[2] = {false, true};
    mf_keystring_t ks;
    mf_error_t err = {0};
    bson_t out = BSON_INITIALIZER;
    bson_iter_t it;
    mf_ks_init(&ks);
    cr_assert_eq(mf_ks_append_value(&ks, &a, false, &err), 0);
    cr_assert_eq(mf_ks_append_value(&ks, &b, true, &err), 0);
    cr_assert_gt(ks.len, 11 + 3, "the decimal's key is longer than a double's");
    size_t tblen;
    const uint8_t *tb = mf_ks_typebits(&ks, &tblen);
    cr_assert_eq(mf_ks_decode_typed(ks.data, ks.len, tb, tblen, dirs, 2, &out, &err), 0, "%s", err.msg);
    cr_assert(bson_iter_init(&it, &out) && bson_iter_next(&it) && BSON_ITER_HOLDS_DECIMAL128(&it));
    bson_decimal128_t back;
    bson_iter_decimal128(&it, &back);
    cr_assert(back.high == dec.high && back.low == dec.low);
    cr_assert(bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "x");
    bson_destroy(&out);
    mf_ks_destroy(&ks);

    /* Written before the extension: 1.0 + a fraction as suffix 0x8004, then "x" (no extension). */
    const uint8_t old[] = {0x1E, 0xBF, 0xF0, 0, 0, 0, 0, 0, 0, 0x80, 0x04, 0x3C, 'x', 0x00, 0x00};
    bool asc[2] = {false, false};
    bson_init(&out);
    cr_assert_eq(mf_ks_decode(old, sizeof(old), asc, 2, &out, &err), 0, "%s", err.msg);
    cr_assert(bson_iter_init(&it, &out) && bson_iter_next(&it) && BSON_ITER_HOLDS_DOUBLE(&it));
    cr_assert(bson_iter_double(&it) == 1.0);
    cr_assert(bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "x");
    bson_destroy(&out);
}

/* Encodes the decimal text with the given key format into ks (initialised here). */
static void
dec_key(const char *text, bool legacy, mf_keystring_t *ks)
{
    bson_value_t v = {.value_type = BSON_TYPE_DECIMAL128};
    mf_error_t err = {0};
    cr_assert(bson_decimal128_from_string(text, &v.value.v_decimal128));
    mf_ks_init(ks);
    ks->legacy_decimals = legacy;
    cr_assert_eq(mf_ks_append_value(ks, &v, false, &err), 0);
    mf_ks_reset(ks);
    cr_assert(ks->legacy_decimals == legacy, "mf_ks_reset keeps the key format");
    cr_assert_eq(mf_ks_append_value(ks, &v, false, &err), 0);
}

Test(keystring, key_format_1_encodes_decimals_as_indexes_written_before_format_2_hold_them)
{
    mf_keystring_t a, b, one;
    bson_value_t v1 = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};
    mf_error_t err = {0};
    mf_ks_init(&one);
    cr_assert_eq(mf_ks_append_value(&one, &v1, false, &err), 0);
    /* Format 1: tag, D, a 2-byte suffix, nothing more; past a long double's 19 digits a decimal ties with 1. */
    dec_key("1.0000000000000000000001", true, &a);
    cr_assert(a.len == one.len && memcmp(a.data, one.data, a.len) == 0, "format 1's tie with 1");
    dec_key("1.0000000000000000000002", true, &b);
    cr_assert(b.len == a.len && memcmp(a.data, b.data, a.len) == 0, "format 1: decimals sharing D and floor tie");
    mf_ks_destroy(&a);
    mf_ks_destroy(&b);
    /* 19.99 is not a double: format 1 marks the fraction with 4 in the suffix's low bits, no extension. */
    dec_key("19.99", true, &a);
    cr_assert_eq(a.len, 11);
    cr_assert_eq(a.data[10] & 7, 4);
    dec_key("19.99", false, &b);
    cr_assert_eq(b.len, 11 + 16, "format 2 adds the extension");
    cr_assert_eq(b.data[10] & 7, 2);
    cr_assert_eq(memcmp(a.data, b.data, 9), 0, "the same D");
    mf_ks_destroy(&a);
    mf_ks_destroy(&b);
    /* Format 2 resolves the ties. */
    dec_key("1.0000000000000000000001", false, &a);
    dec_key("1.0000000000000000000002", false, &b);
    cr_assert(a.len != one.len || memcmp(a.data, one.data, a.len) != 0);
    cr_assert_lt(memcmp(one.data, a.data, one.len), 0, "above 1");
    cr_assert_lt(memcmp(a.data, b.data, a.len), 0, "format 2 orders them");
    mf_ks_destroy(&a);
    mf_ks_destroy(&b);
    mf_ks_destroy(&one);
}

Test(keystring, truncated_keys_fail_to_decode_cleanly)
{
    for (int i = 0; i < g_n; i++) {
        for (int d = 0; d < 2; d++) {
            mf_keystring_t *ks = d ? &g_desc[i] : &g_asc[i];
            bool dir = d;
            for (size_t n = 0; n < ks->len; n++) {
                uint8_t *copy = malloc(n ? n : 1);
                bson_t out = BSON_INITIALIZER;
                mf_error_t err = {0};
                memcpy(copy, ks->data, n);
                cr_assert_eq(mf_ks_decode(copy, n, &dir, 1, &out, &err), -1, "value %d prefix %zu decoded", i, n);
                bson_destroy(&out);
                free(copy);
            }
        }
    }
}

Test(keystring, nesting_too_deep_is_refused)
{
    bson_t *docs[260];
    bson_value_t v;
    mf_keystring_t ks;
    mf_error_t err = {0};
    int depth = 250;

    docs[0] = bson_new();
    BSON_APPEND_INT32(docs[0], "x", 1);
    for (int i = 1; i < depth; i++) {
        docs[i] = bson_new();
        BSON_APPEND_DOCUMENT(docs[i], "a", docs[i - 1]);
    }
    v.value_type = BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = (uint8_t *)bson_get_data(docs[depth - 1]);
    v.value.v_doc.data_len = docs[depth - 1]->len;
    mf_ks_init(&ks);
    cr_assert_eq(mf_ks_append_value(&ks, &v, false, &err), -1);
    cr_assert_eq(err.code, MF_E_Overflow, "code %d", err.code);
    cr_assert_eq(ks.len, 0u, "a failed append leaves the key unchanged");
    mf_ks_destroy(&ks);
    for (int i = 0; i < depth; i++)
        bson_destroy(docs[i]);
}

Test(keystring, rarer_types_round_trip)
{
    bson_oid_t oid;
    bson_t *scope = BCON_NEW("x", BCON_INT32(1));
    bson_t in = BSON_INITIALIZER, out = BSON_INITIALIZER;
    bson_iter_t it;
    mf_keystring_t ks;
    mf_error_t err = {0};
    bool dirs[5] = {false, true, false, true, false};
    size_t tblen;
    const uint8_t *tb;

    bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
    bson_append_undefined(&in, "0", -1);
    bson_append_code(&in, "1", -1, "function() { return 1; }");
    bson_append_code_with_scope(&in, "2", -1, "f()", scope);
    bson_append_dbpointer(&in, "3", -1, "db.coll", &oid);
    bson_append_utf8(&in, "4", -1, "nul\0inside\xff", 11);
    mf_ks_init(&ks);
    cr_assert(bson_iter_init(&it, &in));
    for (int i = 0; bson_iter_next(&it); i++)
        cr_assert_eq(mf_ks_append_value(&ks, bson_iter_value(&it), dirs[i], &err), 0, "%s", err.msg);
    tb = mf_ks_typebits(&ks, &tblen);
    cr_assert_eq(mf_ks_decode_typed(ks.data, ks.len, tb, tblen, dirs, 5, &out, &err), 0, "%s", err.msg);
    char *a = bson_as_canonical_extended_json(&in, NULL), *b = bson_as_canonical_extended_json(&out, NULL);
    cr_assert(bson_equal(&in, &out), "in %s\nout %s", a, b);
    bson_free(a);
    bson_free(b);
    mf_ks_destroy(&ks);
    bson_destroy(&in);
    bson_destroy(&out);
    bson_destroy(scope);
}

Test(keystring, decoding_random_bytes_never_crashes)
{
    uint32_t seed = 12345;
    bool dirs[3] = {false, true, false};

    for (int iter = 0; iter < 20000; iter++) {
        uint8_t buf[48];
        size_t n = (size_t)(iter % 48);
        bson_t out = BSON_INITIALIZER;
        mf_error_t err = {0};
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            buf[i] = (uint8_t)(seed >> 16);
            /* Bias towards valid tags so decoding goes deep. */
            if ((seed >> 8) % 4 == 0)
                buf[i] = (uint8_t[]){0x46, 0x50, 0x1E, 0x3C, 0x00, 0x5A}[(seed >> 4) % 6];
        }
        int rc = mf_ks_decode(buf, n, dirs, 1 + iter % 3, &out, &err);
        cr_assert(rc == 0 || err.code != 0);
        bson_destroy(&out);
    }
}
