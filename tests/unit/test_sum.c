/*
 * test_sum.c: unit tests for src/doc/sum.c ($sum / $avg accumulation):
 * mf_sum_add_times, which a count at the source uses for $sum of a constant
 * (count_pull.test.js), must leave the same total and type as n calls of
 * mf_sum_add.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "doc/sum.h"
#include "doc/value.h"
#include "unit_util.h"

/* The results of adding v n times one by one and at once, after a first operand, are the same value of the same type. */
static void
same_as_loop(const bson_value_t *first, const bson_value_t *v, int64_t n)
{
    mf_sum_t a, b;
    bson_value_t ra, rb;
    mf_sum_init(&a);
    mf_sum_init(&b);
    if (first != NULL) {
        mf_sum_add(&a, first);
        mf_sum_add(&b, first);
    }
    for (int64_t i = 0; i < n; i++)
        mf_sum_add(&a, v);
    mf_sum_add_times(&b, v, n);
    mf_sum_result(&a, &ra);
    mf_sum_result(&b, &rb);
    cr_assert_eq(ra.value_type, rb.value_type, "type %d vs %d (n %lld)", ra.value_type, rb.value_type, (long long)n);
    cr_assert_eq(mf_value_cmp(&ra, &rb), 0, "n %lld", (long long)n);
    if (ra.value_type == BSON_TYPE_DOUBLE)
        cr_assert(ra.value.v_double == rb.value.v_double || (isnan(ra.value.v_double) && isnan(rb.value.v_double)));
}

Test(sum, add_times_integers_as_a_loop)
{
    int64_t ns[] = {0, 1, 2, 7, 1000, 70000};
    bson_value_t vs[] = {i32(1), i32(-3), i32(INT32_MAX), i32(INT32_MIN), i64(5), i64(INT64_MAX / 100000)};
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
        for (size_t j = 0; j < sizeof ns / sizeof *ns; j++) {
            same_as_loop(NULL, &vs[i], ns[j]);
            bson_value_t f = i64(3), g = dbl(0.5);
            same_as_loop(&f, &vs[i], ns[j]);
            same_as_loop(&g, &vs[i], ns[j]);
        }
}

Test(sum, add_times_types)
{
    mf_sum_t s;
    bson_value_t r, one = i32(1), big = i32(1 << 30), huge = i64(INT64_C(1) << 62);
    mf_sum_init(&s);
    mf_sum_add_times(&s, &one, 3000);
    mf_sum_result(&s, &r);
    cr_assert_eq(r.value_type, BSON_TYPE_INT32);
    cr_assert_eq(r.value.v_int32, 3000);
    mf_sum_init(&s);
    mf_sum_add_times(&s, &big, 3000);
    mf_sum_result(&s, &r);
    cr_assert_eq(r.value_type, BSON_TYPE_INT64, "an int32 total past int32 is an int64");
    cr_assert_eq(r.value.v_int64, INT64_C(3000) << 30);
    /* The product overflows int64: added one by one, the total is a double. */
    same_as_loop(NULL, &huge, 4);
    mf_sum_init(&s);
    mf_sum_add_times(&s, &huge, 4);
    mf_sum_result(&s, &r);
    cr_assert_eq(r.value_type, BSON_TYPE_DOUBLE);
    cr_assert(r.value.v_double == 0x1p64);
}

Test(sum, add_times_doubles_and_others_as_a_loop)
{
    bson_value_t vs[] = {dbl(0.1), dbl(-2.5), dbl(INFINITY), dbl(NAN), dbl(1e308)};
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
        for (int64_t n = 0; n < 40; n += 13)
            same_as_loop(NULL, &vs[i], n);
    bson_value_t d = {.value_type = BSON_TYPE_DECIMAL128};
    bson_decimal128_from_string("0.1", &d.value.v_decimal128);
    same_as_loop(NULL, &d, 10);
    bson_value_t s = {.value_type = BSON_TYPE_UTF8};
    s.value.v_utf8.str = (char *)"x";
    s.value.v_utf8.len = 1;
    same_as_loop(NULL, &s, 5); /* not a number: ignored */
}
