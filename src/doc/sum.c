/*
 * sum.c: $sum / $avg accumulation as MongoDB's (see sum.h).
 */
#include "doc/sum.h"
#include "doc/dec128.h"
#include "doc/value.h"

#include <math.h>
#include <string.h>

void
mf_sum_init(mf_sum_t *s)
{
    memset(s, 0, sizeof(*s));
}

/* Neumaier: hi + lo gains x, lo keeping what the rounding of hi + x lost. */
static void
add_double(mf_sum_t *s, double x)
{
    if (!isfinite(x)) {
        s->special += x;
        s->has_special = true;
        return;
    }
    double t = s->hi + x;
    if (fabs(s->hi) >= fabs(x))
        s->lo += (s->hi - t) + x;
    else
        s->lo += (x - t) + s->hi;
    s->hi = t;
}

/* An int64 as two doubles that hold it exactly (high: a multiple of 2^32), as DoubleDoubleSummation::addLong. */
static void
add_long(mf_sum_t *s, int64_t x)
{
    int64_t high = x / ((int64_t)1 << 32) * ((int64_t)1 << 32);
    add_double(s, (double)(x - high));
    add_double(s, (double)high);
}

void
mf_sum_add(mf_sum_t *s, const bson_value_t *v)
{
    int rank;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        rank = 0;
        add_long(s, v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        rank = 1;
        add_long(s, v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        rank = 2;
        add_double(s, v->value.v_double);
        break;
    case BSON_TYPE_DECIMAL128:
        rank = 3;
        if (s->has_dec)
            mf_dec_arith(MF_DEC_ADD, &s->dec, &v->value.v_decimal128, &s->dec);
        else
            s->dec = v->value.v_decimal128;
        s->has_dec = true;
        break;
    default:
        return;
    }
    if (rank > s->widest)
        s->widest = rank;
}

void
mf_sum_add_times(mf_sum_t *s, const bson_value_t *v, int64_t n)
{
    int64_t x, prod;
    if (n <= 0)
        return;
    if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) {
        /* Integers sum exactly (sum.h): n additions of x are one of x * n, the widest type the same. */
        x = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
        if (!__builtin_mul_overflow(x, n, &prod)) {
            add_long(s, prod);
            int rank = v->value_type == BSON_TYPE_INT32 ? 0 : 1;
            if (rank > s->widest)
                s->widest = rank;
            return;
        }
    }
    for (int64_t i = 0; i < n; i++)
        mf_sum_add(s, v);
}

void
mf_sum_merge(mf_sum_t *s, const mf_sum_t *o)
{
    add_double(s, o->hi);
    add_double(s, o->lo);
    if (o->has_special) {
        s->special += o->special;
        s->has_special = true;
    }
    if (o->has_dec) {
        bson_value_t d = {.value_type = BSON_TYPE_DECIMAL128};
        d.value.v_decimal128 = o->dec;
        mf_sum_add(s, &d);
    }
    if (o->widest > s->widest)
        s->widest = o->widest;
}

/* The non-decimal total as a double (the specials, if any, decide). */
static double
total_double(const mf_sum_t *s)
{
    return s->has_special ? s->special : s->hi + s->lo;
}

/* Whether hi + lo, rounded to an integer, fits int64 (DoubleDoubleSummation::fitsLong); *out gets it. */
static bool
total_long(const mf_sum_t *s, int64_t *out)
{
    const double max = 9223372036854775808.0; /* 2^63 */
    if (s->has_special)
        return false;
    if (s->hi > -max && s->hi < max) {
        int64_t v = llround(s->hi);
        *out = v + llround((s->hi - (double)v) + s->lo);
        return true;
    }
    if (s->hi == max && s->lo < -0.5) {
        *out = (int64_t)(llround(s->lo) - INT64_MIN); /* 2^63 + lo, lo < 0 */
        return true;
    }
    if (s->hi == -max && s->lo >= -0.5) {
        *out = INT64_MIN + llround(s->lo);
        return true;
    }
    return false;
}

/* The whole total as a decimal: the double-double part at 34 digits, plus the decimals. */
static void
total_decimal(const mf_sum_t *s, bson_decimal128_t *out)
{
    bson_decimal128_t a, b;
    if (s->has_special) {
        mf_dec_from_double(s->special, 34, out);
    } else {
        mf_dec_from_double(s->hi, 34, &a);
        mf_dec_from_double(s->lo, 34, &b);
        mf_dec_arith(MF_DEC_ADD, &a, &b, out);
    }
    if (s->has_dec)
        mf_dec_arith(MF_DEC_ADD, out, &s->dec, out);
}

void
mf_sum_result(const mf_sum_t *s, bson_value_t *out)
{
    int64_t l;
    if (s->widest == 3) {
        mf_value_set_type(out, BSON_TYPE_DECIMAL128);
        total_decimal(s, &out->value.v_decimal128);
    } else if (s->widest <= 1 && total_long(s, &l)) {
        if (s->widest == 0 && l >= INT32_MIN && l <= INT32_MAX)
            mf_value_set_int32(out, (int32_t)l);
        else
            mf_value_set_int64(out, l);
    } else {
        mf_value_set_double(out, total_double(s));
    }
}

void
mf_sum_avg(const mf_sum_t *s, int64_t n, bson_value_t *out)
{
    if (n == 0) {
        mf_value_set_null(out);
    } else if (s->widest == 3) {
        bson_decimal128_t total, count;
        total_decimal(s, &total);
        mf_dec_from_int64(n, &count);
        mf_value_set_type(out, BSON_TYPE_DECIMAL128);
        mf_dec_arith(MF_DEC_DIV, &total, &count, &out->value.v_decimal128);
    } else {
        mf_value_set_double(out, total_double(s) / (double)n);
    }
}

void
mf_sum_state(const mf_sum_t *s, bson_t *out)
{
    BSON_APPEND_INT32(out, "sw", s->widest);
    BSON_APPEND_DOUBLE(out, "shi", s->hi);
    BSON_APPEND_DOUBLE(out, "slo", s->lo);
    if (s->has_special)
        BSON_APPEND_DOUBLE(out, "ssp", s->special);
    if (s->has_dec)
        BSON_APPEND_DECIMAL128(out, "sdec", &s->dec);
}

void
mf_sum_from_state(mf_sum_t *s, const bson_t *st)
{
    bson_iter_t it;
    mf_sum_init(s);
    if (bson_iter_init_find(&it, st, "sw"))
        s->widest = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, st, "shi") && BSON_ITER_HOLDS_DOUBLE(&it))
        s->hi = bson_iter_double(&it);
    if (bson_iter_init_find(&it, st, "slo") && BSON_ITER_HOLDS_DOUBLE(&it))
        s->lo = bson_iter_double(&it);
    if (bson_iter_init_find(&it, st, "ssp") && BSON_ITER_HOLDS_DOUBLE(&it)) {
        s->special = bson_iter_double(&it);
        s->has_special = true;
    }
    if (bson_iter_init_find(&it, st, "sdec") && BSON_ITER_HOLDS_DECIMAL128(&it)) {
        bson_iter_decimal128(&it, &s->dec);
        s->has_dec = true;
    }
}
