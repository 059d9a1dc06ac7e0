/*
 * dec128.c: Decimal128 by C's _Decimal128 (see dec128.h). Compiled by gcc.
 *
 * Values move between bson_decimal128_t and _Decimal128 with memcpy: both
 * are the 16 bytes of the BID encoding, low 64 bits first on little-endian
 * x86-64 (libbson stores {low, high}; the static assertion below checks the
 * size). The rounding mode is the default, round half to even, as MongoDB's.
 */
#include "doc/dec128.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

_Static_assert(sizeof(_Decimal128) == sizeof(bson_decimal128_t), "BID decimal128 is 16 bytes");

static _Decimal128
load(const bson_decimal128_t *d)
{
    _Decimal128 x;
    memcpy(&x, d, sizeof x);
    return x;
}

static void
store(_Decimal128 x, bson_decimal128_t *out)
{
    memcpy(out, &x, sizeof x);
}

void
mf_dec_arith(mf_dec_op_t op, const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *out)
{
    _Decimal128 x = load(a), y = load(b), r;
    switch (op) {
    case MF_DEC_ADD:
        r = x + y;
        break;
    case MF_DEC_SUB:
        r = x - y;
        break;
    case MF_DEC_MUL:
        r = x * y;
        break;
    default:
        r = x / y;
        break;
    }
    store(r, out);
}

bool
mf_dec_is_nan(const bson_decimal128_t *d)
{
    _Decimal128 x = load(d);
    return x != x;
}

bool
mf_dec_is_zero(const bson_decimal128_t *d)
{
    return load(d) == 0.DL;
}

int
mf_dec_cmp(const bson_decimal128_t *a, const bson_decimal128_t *b)
{
    _Decimal128 x = load(a), y = load(b);
    bool xn = x != x, yn = y != y;
    if (xn || yn)
        return xn && yn ? 0 : xn ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}

void
mf_dec_from_int64(int64_t x, bson_decimal128_t *out)
{
    store((_Decimal128)x, out);
}

void
mf_dec_from_double(double x, int digits, bson_decimal128_t *out)
{
    if (x == 0 || isnan(x) || isinf(x) || digits >= 34) {
        /* libgcc's conversion rounds the double's exact value to 34 digits. */
        store((_Decimal128)x, out);
        return;
    }
    /*
     * Exactly 15 significant digits, as MongoDB's quantize to 15 digits:
     * printf rounds the exact binary value to nearest, and the string keeps
     * the trailing zeros (2.5 -> 2.50000000000000).
     */
    char buf[40];
    snprintf(buf, sizeof buf, "%.14e", x);
    if (!bson_decimal128_from_string(buf, out))
        store((_Decimal128)x, out);
}

bool
mf_dec_from_value(const bson_value_t *v, int double_digits, bson_decimal128_t *out)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        mf_dec_from_int64(v->value.v_int32, out);
        return true;
    case BSON_TYPE_INT64:
        mf_dec_from_int64(v->value.v_int64, out);
        return true;
    case BSON_TYPE_DOUBLE:
        mf_dec_from_double(v->value.v_double, double_digits, out);
        return true;
    case BSON_TYPE_DECIMAL128:
        *out = v->value.v_decimal128;
        return true;
    default:
        return false;
    }
}

/*
 * mf_dec_quantize works on the encoding itself: a finite decimal128 is
 * (-1)^sign * coefficient * 10^(exponent), the coefficient below 10^34 in
 * 113 bits and the exponent biased by 6176. Changing the exponent to -place
 * multiplies or divides the coefficient by a power of ten, in __int128.
 */
#define DEC_BIAS 6176
#define DEC_MAX_EXP 6111

void
mf_dec_quantize(const bson_decimal128_t *d, int place, mf_dec_round_t mode, bson_decimal128_t *out)
{
    const unsigned __int128 ten34 = (unsigned __int128)10000000000000000ULL * 1000000000000000000ULL;
    uint64_t hi = d->high, lo = d->low;
    int q = -place;

    *out = *d;
    if (((hi >> 61) & 3) == 3 || q < -DEC_BIAS || q > DEC_MAX_EXP)
        return; /* NaN, infinity (or the large-coefficient form, never canonical for decimal128) */
    bool neg = (hi >> 63) != 0;
    int exp = (int)((hi >> 49) & 0x3FFF) - DEC_BIAS;
    unsigned __int128 coef = ((unsigned __int128)(hi & 0x1FFFFFFFFFFFFULL) << 64) | lo;
    if (coef >= ten34)
        coef = 0; /* non-canonical: its value is zero */
    if (exp >= q) {
        /* More digits at the new exponent: exact unless they pass 34 (then as it is, as 34 digits allow no more). */
        for (; exp > q; exp--) {
            if (coef * 10 >= ten34)
                return;
            coef *= 10;
        }
    } else {
        unsigned __int128 div = 1, rem, half;
        int shift = q - exp;
        bool big = false;
        for (int i = 0; i < shift && !big; i++) {
            if (div > ten34)
                big = true; /* past every coefficient: the quotient is 0 */
            else
                div *= 10;
        }
        unsigned __int128 quo = big ? 0 : coef / div;
        rem = big ? coef : coef % div;
        bool up = false;
        switch (mode) {
        case MF_DEC_HALF_EVEN:
            if (!big) {
                half = div / 2; /* div is a power of ten, even */
                up = rem > half || (rem == half && (quo & 1) != 0);
            }
            break;
        case MF_DEC_FLOOR:
            up = neg && rem != 0;
            break;
        case MF_DEC_CEIL:
            up = !neg && rem != 0;
            break;
        default:
            break;
        }
        coef = quo + (up ? 1 : 0);
        if (coef >= ten34)
            return;
        exp = q;
    }
    out->low = (uint64_t)coef;
    out->high = (neg ? 1ULL << 63 : 0) | ((uint64_t)(exp + DEC_BIAS) << 49) | (uint64_t)(coef >> 64);
}

void
mf_dec_order_bytes(const bson_decimal128_t *d, uint8_t out[16])
{
    const unsigned __int128 ten33 = (unsigned __int128)1000000000000000ULL * 1000000000000000000ULL;
    uint64_t hi = d->high;
    bool neg = (hi >> 63) != 0;
    int exp = (int)((hi >> 49) & 0x3FFF) - DEC_BIAS;
    unsigned __int128 coef = ((unsigned __int128)(hi & 0x1FFFFFFFFFFFFULL) << 64) | d->low, v = 0;

    if (((hi >> 61) & 3) != 3 && coef != 0 && coef < ten33 * 10) {
        while (coef < ten33) {
            coef *= 10;
            exp--;
        }
        /* exp now in [-6176 - 33, 6111]: biased by 6209 it fits the 14 bits above the 113 of the coefficient. */
        v = ((unsigned __int128)(unsigned)(exp + DEC_BIAS + 33) << 113) | coef;
    }
    if (neg)
        v = ~v;
    for (int i = 15; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

double
mf_dec_to_double(const bson_decimal128_t *d)
{
    return (double)load(d);
}

bool
mf_dec_to_int64(const bson_decimal128_t *d, int64_t *out)
{
    _Decimal128 x = load(d);
    if (x != x || x - x != 0.DL)
        return false;
    if (x < -9223372036854775808.DL || x >= 9223372036854775808.DL)
        return false;
    long long v = (long long)x; /* truncates */
    if ((_Decimal128)v != x)
        return false;
    *out = v;
    return true;
}
