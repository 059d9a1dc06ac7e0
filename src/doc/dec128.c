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

/* dec_make: the decimal (-1)^neg coef 10^exp, coef below 10^34 and exp within the encoding's range. */
static void
dec_make(bool neg, unsigned __int128 coef, int exp, bson_decimal128_t *out)
{
    out->low = (uint64_t)coef;
    out->high = (neg ? 1ULL << 63 : 0) | ((uint64_t)(exp + DEC_BIAS) << 49) | (uint64_t)(coef >> 64);
}

static int
coef_digits(unsigned __int128 c)
{
    int n = 1;
    for (; c >= 10; c /= 10)
        n++;
    return n;
}

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
    dec_make(neg, coef, exp, out);
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
 * double, 53 bits, kept 15).
 *
 * binary128 spans 1E-4965 to 1E+4932, decimal128 1E-6176 to 1E+6144, so
 * the power of ten is taken out first where it matters (dec_split): a
 * square root or logarithm works on the coefficient's leading digits and
 * adds the exponent back (sqrt(m 10^2k) = sqrt(m) 10^k, ln(m 10^k) = ln m +
 * k ln 10), and an exponential or power whose result leaves binary128's
 * range is formed as 10^f times 10^n from its base-10 logarithm (a few of
 * its last digits are lost then, as n takes them from the logarithm).
 *
 * Exactness: an integral power is computed by squaring in decimal, kept when
 * no product was rounded (the inexact flag, which libgcc's decimal routines
 * raise through fenv); a square root that is exact takes the exponent IEEE
 * 754 prefers, half the argument's (sqrt(100) is 10, sqrt(4.00) is 2.0);
 * another exact result drops its fraction's trailing zeros (log10(1000) is
 * 3).
 */
#include <fenv.h>
#include <quadmath.h>

/*
 * drop_fraction_zeros: an exact result's fraction zeros dropped (never past
 * exponent 0: 2.000 becomes 2, 10 stays 10). A result is taken as exact when
 * at most 25 significant digits remain: a rounded one has 34, ending in nine
 * or more zeros once in 10^9, and keeps them.
 */
static void
drop_fraction_zeros(bson_decimal128_t *d)
{
    unsigned __int128 coef, c;
    int exp, e;
    if (!dec_parts(d, &coef, &exp))
        return;
    bool neg = (d->high >> 63) != 0;
    if (coef == 0) {
        dec_make(neg, 0, exp < 0 ? 0 : exp, d);
        return;
    }
    for (c = coef, e = exp; c % 10 == 0; e++)
        c /= 10;
    if (coef_digits(c) > 25)
        return;
    while (exp < 0 && coef % 10 == 0) {
        coef /= 10;
        exp++;
    }
    dec_make(neg, coef, exp, d);
}

/*
 * dec_split: a finite non-zero |d| as m 10^k with m in [1, 10) (even_k: k
 * even, m in [1, 100)); m is exact in binary128's range. False for zero,
 * NaN or infinity.
 */
static bool
dec_split(const bson_decimal128_t *d, bool even_k, __float128 *m, int *k)
{
    unsigned __int128 coef;
    int exp;
    if (!dec_parts(d, &coef, &exp) || coef == 0)
        return false;
    int digits = coef_digits(coef);
    *k = exp + digits - 1;
    if (even_k && (*k % 2) != 0)
        (*k)--;
    bson_decimal128_t scaled;
    dec_make(false, coef, exp - *k, &scaled); /* exp - k is within [-digits - 1, 0]: no overflow */
    *m = (__float128)load(&scaled);
    return true;
}

/* times_pow10: d 10^n in decimal, exact unless it leaves the range (then an infinity, or zero when tiny). */
static void
times_pow10(bson_decimal128_t *d, int n)
{
    _Decimal128 x = load(d);
    while (n != 0) {
        int step = n > 6000 ? 6000 : n < -6000 ? -6000 : n;
        bson_decimal128_t p;
        dec_make(false, 1, step, &p);
        x *= load(&p);
        n -= step;
    }
    store(x, d);
}

static __float128
to_q(const bson_decimal128_t *d)
{
    return (__float128)load(d);
}

static void
from_q(__float128 q, bson_decimal128_t *out)
{
    store((_Decimal128)q, out);
}

/* exp10_q: 10^e for an exponent beyond binary128's range: 10^frac(e) in binary128, times 10^floor(e) in decimal. */
static void
exp10_q(__float128 e, bool neg, bson_decimal128_t *out)
{
    if (isnanq(e)) {
        from_q(e, out);
        return;
    }
    __float128 n = floorq(e);
    if (n > 7000)
        n = 7000; /* past the decimal range either way */
    else if (n < -7000)
        n = -7000;
    from_q(expq((e - n) * M_LN10q), out);
    if (neg)
        out->high |= 1ULL << 63;
    times_pow10(out, (int)n);
}

/*
 * near_one: d - 1 when d is within a half of 1, exact in decimal (so that
 * ln(1.0000000000000000000000001) keeps its digits: in binary128, 1 + 1e-25
 * keeps only 9 of the 1e-25), for log1p; false otherwise.
 */
static bool
near_one(const bson_decimal128_t *d, __float128 *dm1)
{
    _Decimal128 x = load(d), t = x - 1.DL;
    if (!(t > -0.5DL && t < 0.5DL))
        return false;
    *dm1 = (__float128)t;
    return true;
}

/* ln_q: ln |d| for a finite non-zero d, in binary128, whatever its exponent. */
static __float128
ln_q(const bson_decimal128_t *d)
{
    __float128 m, t;
    int k;
    if ((d->high >> 63) == 0 && near_one(d, &t))
        return log1pq(t);
    if (!dec_split(d, false, &m, &k))
        return logq(fabsq(to_q(d)));
    return logq(m) + (__float128)k * M_LN10q;
}

/* mul_exact: a * b, true when the product was not rounded. */
static bool
mul_exact(_Decimal128 a, _Decimal128 b, _Decimal128 *r)
{
    volatile _Decimal128 va = a, vb = b, vr;
    feclearexcept(FE_INEXACT | FE_OVERFLOW | FE_UNDERFLOW);
    vr = va * vb;
    *r = vr;
    return !fetestexcept(FE_INEXACT | FE_OVERFLOW | FE_UNDERFLOW);
}

/* sqrt_exact: a square root r of x that squares back to x exactly, put at the exponent IEEE prefers (floor(e/2)). */
static void
sqrt_exact(const bson_decimal128_t *x, bson_decimal128_t *r)
{
    unsigned __int128 cx, cr;
    int ex, er;
    _Decimal128 sq;
    drop_fraction_zeros(r);
    if (!dec_parts(x, &cx, &ex) || !dec_parts(r, &cr, &er) || !mul_exact(load(r), load(r), &sq) || sq != load(x))
        return;
    /* The shortest form first, then as many zeros as reach the preferred exponent. */
    while (cr != 0 && cr % 10 == 0) {
        cr /= 10;
        er++;
    }
    int want = ex >= 0 ? ex / 2 : -((-ex + 1) / 2);
    const unsigned __int128 ten33 = (unsigned __int128)1000000000000000ULL * 1000000000000000000ULL;
    while (er > want && cr < ten33) {
        cr *= 10;
        er--;
    }
    dec_make(false, cr, er, r);
}

void
mf_dec_math(mf_dec_fn_t fn, const bson_decimal128_t *a, bson_decimal128_t *out)
{
    __float128 x = to_q(a), m, r;
    int k, ea;
    unsigned __int128 ca;
    bool odd_at_zero = fn == MF_DEC_SIN || fn == MF_DEC_TAN || fn == MF_DEC_ASIN || fn == MF_DEC_ATAN ||
                       fn == MF_DEC_SINH || fn == MF_DEC_TANH || fn == MF_DEC_ASINH || fn == MF_DEC_ATANH;
    if (odd_at_zero && dec_parts(a, &ca, &ea) && ca != 0 && ea + coef_digits(ca) - 1 < -20) {
        /* Below 1E-20 (to 1E-6176, past binary128's range) sin x = x to 34 digits, and so on: the argument itself. */
        *out = *a;
        return;
    }
    switch (fn) {
    case MF_DEC_SQRT:
        if (dec_split(a, true, &m, &k) && (a->high >> 63) == 0) {
            from_q(sqrtq(m), out);
            times_pow10(out, k / 2);
            sqrt_exact(a, out);
            return;
        }
        r = sqrtq(x);
        break;
    case MF_DEC_LN:
        r = (a->high >> 63) == 0 ? ln_q(a) : logq(x);
        break;
    case MF_DEC_LOG10:
    case MF_DEC_LOG2:
        /* As ln_q, but on the split coefficient in the base itself, so that log10(1000) comes out 3 exactly. */
        if ((a->high >> 63) == 0 && near_one(a, &m))
            r = log1pq(m) / (fn == MF_DEC_LOG10 ? M_LN10q : M_LN2q);
        else if (dec_split(a, false, &m, &k) && (a->high >> 63) == 0)
            r = fn == MF_DEC_LOG10 ? log10q(m) + (__float128)k : log2q(m) + (__float128)k * (M_LN10q / M_LN2q);
        else
            r = fn == MF_DEC_LOG10 ? log10q(x) : log2q(x);
        break;
    case MF_DEC_EXP:
        r = expq(x);
        if (isinfq(r) || (r < FLT128_MIN && !isinfq(x))) {
            exp10_q(x / M_LN10q, false, out); /* beyond binary128's range, within decimal128's */
            return;
        }
        break;
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
    from_q(r, out);
    drop_fraction_zeros(out);
}

void
mf_dec_atan2(const bson_decimal128_t *y, const bson_decimal128_t *x, bson_decimal128_t *out)
{
    /* The same power of ten out of both, so that neither leaves binary128's range. */
    bson_decimal128_t sy = *y, sx = *x;
    unsigned __int128 c;
    int ey, ex, k = 0;
    if (dec_parts(y, &c, &ey) && c != 0 && dec_parts(x, &c, &ex) && c != 0) {
        k = ey > ex ? ey : ex;
        times_pow10(&sy, -k);
        times_pow10(&sx, -k);
    }
    from_q(atan2q(to_q(&sy), to_q(&sx)), out);
    drop_fraction_zeros(out);
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
        from_q(ln_q(a) / ln_q(base), out);
        drop_fraction_zeros(out);
    }
}

/*
 * dec_integral: whether d is a finite integer, and *odd whether it is odd,
 * read from its digits (a decimal past 2^63 has no long to cast to: from
 * 10^34 on every decimal is an even integer).
 */
static bool
dec_integral(const bson_decimal128_t *d, bool *odd)
{
    unsigned __int128 coef;
    int exp;
    bson_decimal128_t q;
    *odd = false;
    if (!dec_parts(d, &coef, &exp))
        return false;
    if (exp > 0 || coef == 0)
        return true; /* a multiple of 10 */
    mf_dec_quantize(d, 0, MF_DEC_TRUNC, &q);
    if (load(&q) != load(d))
        return false;
    unsigned __int128 qc;
    int qe;
    if (dec_parts(&q, &qc, &qe) && qe == 0)
        *odd = (qc & 1) != 0;
    return true;
}

/* pow_exact: base^n by squaring in decimal, true when no product was rounded (so it is the exact power). */
static bool
pow_exact(_Decimal128 base, uint64_t n, _Decimal128 *res)
{
    _Decimal128 r = 1.DL, b = base;
    for (;;) {
        if ((n & 1) && !mul_exact(r, b, &r))
            return false;
        n >>= 1;
        if (n == 0)
            break;
        if (!mul_exact(b, b, &b))
            return false;
    }
    *res = r;
    return true;
}

void
mf_dec_pow(const bson_decimal128_t *base, const bson_decimal128_t *ex, bson_decimal128_t *out)
{
    _Decimal128 b = load(base), e = load(ex), r;
    bool done = false, odd = false, integral = dec_integral(ex, &odd);
    /* An integral exponent up to 2^16 with a finite base: exact while the power fits. */
    if (b == b && b - b == 0.DL && integral && e >= -65536.DL && e <= 65536.DL) {
        long long n = (long long)e;
        if (pow_exact(b, (uint64_t)(n < 0 ? -n : n), &r)) {
            if (n < 0)
                r = 1.DL / r;
            done = true;
        }
    }
    if (!done) {
        __float128 qb = to_q(base), qe = to_q(ex), q = powq(qb, qe);
        unsigned __int128 c;
        int eb;
        bool in_range = qb != 0 && !isinfq(qb) && fabsq(qb) >= FLT128_MIN;
        bool zero_base = dec_parts(base, &c, &eb) && c == 0;
        if (!zero_base && b == b && b - b == 0.DL && e == e && e - e == 0.DL &&
            (!in_range || isinfq(q) || (q != 0 && fabsq(q) < FLT128_MIN) || q == 0)) {
            /* The power leaves binary128's range (or its base does): from its base-10 logarithm. */
            bool neg = (base->high >> 63) != 0;
            if (neg && !integral) {
                r = (b - b) / 0.DL; /* NaN, as a negative base to a fraction */
            } else {
                bson_decimal128_t t;
                __float128 l10 = ln_q(base) / M_LN10q;
                exp10_q(qe * l10, neg && odd, &t);
                r = load(&t);
            }
        } else {
            r = (_Decimal128)q;
        }
    }
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
    dec_make((a->high >> 63) != 0, r, e, out);
}
