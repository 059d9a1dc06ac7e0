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

/*
 * Transcendental functions. MongoDB's Decimal128 calls Intel's bid128_exp,
 * bid128_log, bid128_sqrt, bid128_sin ... which libgcc's copy of the library
 * leaves out. They are computed here in IEEE binary128 (__float128, 113 bits,
 * libquadmath, accurate to about 1e-34 relative) and rounded once to 34
 * digits by libgcc's correctly rounded conversions, so a result agrees with
 * the exact one in its 33 leading digits and nearly always in all 34 (a
 * double, 53 bits, kept 15). Integral powers are computed exactly in decimal
 * while they fit 34 digits (below). An exact result of the other functions
 * (sqrt(4), exp(0)) comes back in its shortest form, as Intel's.
 */
#include <quadmath.h>

/* The decimal's digits: coefficient and unbiased exponent; false for NaN, infinity or a non-canonical encoding. */
static bool
dec_parts(const bson_decimal128_t *d, unsigned __int128 *coef, int *exp)
{
    const unsigned __int128 ten34 = (unsigned __int128)10000000000000000ULL * 1000000000000000000ULL;
    if (((d->high >> 61) & 3) == 3)
        return false;
    *coef = ((unsigned __int128)(d->high & 0x1FFFFFFFFFFFFULL) << 64) | d->low;
    *exp = (int)((d->high >> 49) & 0x3FFF) - DEC_BIAS;
    return *coef < ten34;
}

static int
coef_digits(unsigned __int128 c)
{
    int n = 1;
    for (; c >= 10; c /= 10)
        n++;
    return n;
}

/*
 * shortest_if_exact: d with its trailing zeros dropped when at most 25
 * significant digits remain: a result that short was exact (a rounded
 * one has 34 digits, ending in nine or more zeros once in 10^9).
 */
static void
shortest_if_exact(bson_decimal128_t *d)
{
    unsigned __int128 coef;
    int exp;
    if (!dec_parts(d, &coef, &exp))
        return;
    bool neg = (d->high >> 63) != 0;
    if (coef == 0) {
        exp = 0;
    } else {
        unsigned __int128 c = coef;
        int e = exp;
        while (c % 10 == 0 && e < DEC_MAX_EXP) {
            c /= 10;
            e++;
        }
        if (coef_digits(c) > 25)
            return;
        coef = c;
        exp = e;
    }
    d->low = (uint64_t)coef;
    d->high = (neg ? 1ULL << 63 : 0) | ((uint64_t)(exp + DEC_BIAS) << 49) | (uint64_t)(coef >> 64);
}

static __float128
to_q(const bson_decimal128_t *d)
{
    return (__float128)load(d);
}

void
mf_dec_math(mf_dec_fn_t fn, const bson_decimal128_t *a, bson_decimal128_t *out)
{
    __float128 x = to_q(a), r;
    switch (fn) {
    case MF_DEC_SQRT: r = sqrtq(x); break;
    case MF_DEC_EXP: r = expq(x); break;
    case MF_DEC_LN: r = logq(x); break;
    case MF_DEC_LOG10: r = log10q(x); break;
    case MF_DEC_LOG2: r = log2q(x); break;
    case MF_DEC_SIN: r = sinq(x); break;
    case MF_DEC_COS: r = cosq(x); break;
    case MF_DEC_TAN: r = tanq(x); break;
    case MF_DEC_ASIN: r = asinq(x); break;
    case MF_DEC_ACOS: r = acosq(x); break;
    case MF_DEC_ATAN: r = atanq(x); break;
    case MF_DEC_SINH: r = sinhq(x); break;
    case MF_DEC_COSH: r = coshq(x); break;
    case MF_DEC_TANH: r = tanhq(x); break;
    case MF_DEC_ASINH: r = asinhq(x); break;
    case MF_DEC_ACOSH: r = acoshq(x); break;
    default: r = atanhq(x); break;
    }
    store((_Decimal128)r, out);
    shortest_if_exact(out);
}

void
mf_dec_atan2(const bson_decimal128_t *y, const bson_decimal128_t *x, bson_decimal128_t *out)
{
    store((_Decimal128)atan2q(to_q(y), to_q(x)), out);
    shortest_if_exact(out);
}

void
mf_dec_log(const bson_decimal128_t *a, const bson_decimal128_t *base, bson_decimal128_t *out)
{
    _Decimal128 b = load(base);
    if (b == 2.DL) {
        mf_dec_math(MF_DEC_LOG2, a, out);
    } else if (b == 10.DL) {
        mf_dec_math(MF_DEC_LOG10, a, out);
    } else {
        store((_Decimal128)(logq(to_q(a)) / logq(to_q(base))), out);
        shortest_if_exact(out);
    }
}

/*
 * pow_exact: base^n by squaring in decimal, true when every product was
 * exact (fewer than 34 digits: a rounded product has 34), so the result is
 * the exact power, as Intel's pow gives it.
 */
static bool
pow_exact(_Decimal128 base, uint64_t n, _Decimal128 *res)
{
    _Decimal128 r = 1.DL, b = base;
    bson_decimal128_t t;
    unsigned __int128 coef;
    int exp;

    for (;;) {
        if (n & 1) {
            r *= b;
            store(r, &t);
            if (!dec_parts(&t, &coef, &exp) || coef_digits(coef) >= 34)
                return false;
        }
        n >>= 1;
        if (n == 0)
            break;
        b *= b;
        store(b, &t);
        if (!dec_parts(&t, &coef, &exp) || coef_digits(coef) >= 34)
            return false;
    }
    *res = r;
    return true;
}

void
mf_dec_pow(const bson_decimal128_t *base, const bson_decimal128_t *ex, bson_decimal128_t *out)
{
    _Decimal128 b = load(base), e = load(ex), r;
    bool done = false;
    /* An integral exponent up to 2^16 with a finite base: exact while the power fits. */
    if (b == b && b - b == 0.DL && e == e && e - e == 0.DL && e >= -65536.DL && e <= 65536.DL &&
        (_Decimal128)(long long)e == e) {
        long long n = (long long)e;
        if (pow_exact(b, (uint64_t)(n < 0 ? -n : n), &r)) {
            if (n < 0)
                r = 1.DL / r;
            done = true;
        }
    }
    if (!done)
        r = (_Decimal128)powq(to_q(base), to_q(ex));
    /*
     * MongoDB's Decimal128::power adds zero at the smallest exponent to the
     * result, which gives it every digit the coefficient has room for (3^40
     * is 12157665459056928801.00000000000000). The zero is read through a
     * volatile so that the compiler cannot drop the addition.
     */
    static const bson_decimal128_t zero_bits = {0, 0};
    volatile uint64_t lo = zero_bits.low, hi = zero_bits.high;
    bson_decimal128_t z = {lo, hi};
    store(r + load(&z), out);
}

void
mf_dec_angle(bool to_radians, const bson_decimal128_t *a, bson_decimal128_t *out)
{
    /* MongoDB's Decimal128::kPi, its 50 digits rounded to 34, and the factors as it derives them. */
    const _Decimal128 pi = 3.14159265358979323846264338327950288419716939937510DL;
    store(load(a) * (to_radians ? pi / 180.DL : 180.DL / pi), out);
}

/* mulmod: a * b mod m, for a, b < m < 2^126, by doubling (no product wider than 128 bits). */
static unsigned __int128
mulmod(unsigned __int128 a, unsigned __int128 b, unsigned __int128 m)
{
    unsigned __int128 r = 0;
    for (int i = 127; i >= 0; i--) {
        r = (r << 1) % m;
        if ((b >> i) & 1)
            r = (r + a) % m;
    }
    return r;
}

/* pow10mod: 10^k mod m. */
static unsigned __int128
pow10mod(int k, unsigned __int128 m)
{
    unsigned __int128 r = 1 % m, b = 10 % m;
    for (; k > 0; k >>= 1) {
        if (k & 1)
            r = mulmod(r, b, m);
        b = mulmod(b, b, m);
    }
    return r;
}

void
mf_dec_fmod(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *out)
{
    unsigned __int128 ca, cb, r;
    int ea, eb;
    _Decimal128 x = load(a), y = load(b);

    /*
     * Exact, as Intel's bid128_fmod: the remainder of a / b truncated, with
     * a's sign and the smaller exponent. With e the smaller exponent, it is
     * (ca 10^(ea-e) mod cb 10^(eb-e)) 10^e, one of the two scalings being
     * 1: the scaled dividend is reduced modulo cb, or the dividend modulo a
     * scaled divisor that is larger than it or fits 128 bits.
     */
    if (x != x || y != y || y == 0.DL || x - x != 0.DL) {
        store((x - x) / 0.DL, out); /* NaN: a NaN operand, a zero divisor or an infinite dividend */
        return;
    }
    if (y - y != 0.DL || !dec_parts(a, &ca, &ea) || !dec_parts(b, &cb, &eb)) {
        *out = *a; /* a finite dividend and an infinite divisor */
        return;
    }
    int e = ea < eb ? ea : eb;
    if (ea > eb) {
        r = mulmod(ca % cb, pow10mod(ea - eb, cb), cb);
    } else {
        unsigned __int128 m = cb;
        bool larger = false;
        for (int i = 0; i < eb - ea && !larger; i++) {
            if (m > ca / 10)
                larger = true; /* m * 10 > ca: the divisor passes the dividend */
            else
                m *= 10;
        }
        r = larger ? ca : ca % m;
    }
    out->low = (uint64_t)r;
    out->high = (a->high & (1ULL << 63)) | ((uint64_t)(e + DEC_BIAS) << 49) | (uint64_t)(r >> 64);
}
