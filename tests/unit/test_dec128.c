/*
 * test_dec128.c: unit tests for src/doc/dec128.c's functions that MongoDB
 * computes in decimal ($mod, $pow, $sqrt, $exp, $ln, $log, the
 * trigonometric family, $degreesToRadians): results to 34 digits, exact where
 * the answer is, in the representation mongod's Decimal128 gives.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/dec128.h"

static bson_decimal128_t
dec(const char *s)
{
    bson_decimal128_t d;
    cr_assert(bson_decimal128_from_string(s, &d), "%s", s);
    return d;
}

static void
expect_str(const bson_decimal128_t *d, const char *want, const char *what)
{
    char got[BSON_DECIMAL128_STRING];
    bson_decimal128_to_string(d, got);
    cr_assert_str_eq(got, want, "%s: %s, want %s", what, got, want);
}

static void
math1(mf_dec_fn_t fn, const char *a, const char *want)
{
    bson_decimal128_t x = dec(a), r;
    mf_dec_math(fn, &x, &r);
    expect_str(&r, want, a);
}

/* The two-operand functions (mf_dec_pow, mf_dec_fmod, mf_dec_log, mf_dec_atan2) share a signature. */
static void
math2(void (*fn)(const bson_decimal128_t *, const bson_decimal128_t *, bson_decimal128_t *), const char *a,
      const char *b, const char *want)
{
    bson_decimal128_t x = dec(a), y = dec(b), r;
    fn(&x, &y, &r);
    expect_str(&r, want, a);
}

/* Reference values: the exact constants rounded half to even to 34 digits. */
Test(dec128, functions_have_34_digits)
{
    math1(MF_DEC_SQRT, "2", "1.414213562373095048801688724209698");
    math1(MF_DEC_EXP, "1", "2.718281828459045235360287471352662");
    math1(MF_DEC_LN, "2", "0.6931471805599453094172321214581766");
    math1(MF_DEC_LOG10, "2", "0.3010299956639811952137388947244930");
    math1(MF_DEC_SIN, "1", "0.8414709848078965066525023216302990");
    math1(MF_DEC_ATAN, "1", "0.7853981633974483096156608458198757");
}

Test(dec128, exact_results_come_back_short)
{
    math1(MF_DEC_SQRT, "4", "2");
    math1(MF_DEC_SQRT, "0.25", "0.5");
    math1(MF_DEC_EXP, "0", "1");
    math1(MF_DEC_LN, "1", "0");
    math1(MF_DEC_LOG10, "1000", "3");
    math1(MF_DEC_COS, "0", "1");
}

/* sqrt's exact results take the exponent IEEE 754 prefers, half the argument's. */
Test(dec128, exact_square_roots_take_the_preferred_exponent)
{
    math1(MF_DEC_SQRT, "100", "10");
    math1(MF_DEC_SQRT, "4.00", "2.0");
    math1(MF_DEC_SQRT, "2.25", "1.5");
    math1(MF_DEC_SQRT, "1E+4", "1E+2");
    math1(MF_DEC_LOG10, "1E+10", "10");
}

/* Past binary128's range (1E+-4932) and within decimal128's (1E+-6144). */
Test(dec128, the_whole_decimal_range)
{
    math1(MF_DEC_SQRT, "1E+6000", "1E+3000");
    math1(MF_DEC_SQRT, "1E-6000", "1E-3000");
    math1(MF_DEC_LN, "1E+5000", "11512.92546497022842008995727342182");
    math1(MF_DEC_LOG10, "1E-6000", "-6000");
    math1(MF_DEC_SIN, "1E-5000", "1E-5000");
    bson_decimal128_t x = dec("12000"), r;
    mf_dec_math(MF_DEC_EXP, &x, &r);
    char s[BSON_DECIMAL128_STRING];
    bson_decimal128_to_string(&r, s);
    /* exp(12000) = 3.4180848472105536146824695515473740986...E+5211: past binary128's range a few last digits go. */
    cr_assert(strncmp(s, "3.4180848472105536146824695515", 30) == 0 && strstr(s, "E+5211") != NULL, "exp(12000) = %s", s);
    math2(mf_dec_log, "1E+5000", "1E+100", "50");
    math2(mf_dec_atan2, "1E+5000", "2E+5000", "0.4636476090008061162142562314612144");
}

Test(dec128, special_values_follow_ieee)
{
    math1(MF_DEC_SQRT, "NaN", "NaN");
    math1(MF_DEC_EXP, "Infinity", "Infinity");
    math1(MF_DEC_EXP, "-Infinity", "0");
    math1(MF_DEC_LN, "-1", "NaN");
}


/* Decimal128::power adds a zero of the smallest exponent: every digit the coefficient has room for. */
Test(dec128, pow_is_exact_while_it_fits_and_widened)
{
    math2(mf_dec_pow, "3", "40", "12157665459056928801.00000000000000");
    math2(mf_dec_pow, "1.05", "10", "1.628894626777441406250000000000000");
    math2(mf_dec_pow, "2", "-2", "0.2500000000000000000000000000000000");
    math2(mf_dec_pow, "-2", "3", "-8.000000000000000000000000000000000");
    math2(mf_dec_pow, "2", "0.5", "1.414213562373095048801688724209698");
    math2(mf_dec_pow, "7", "0", "1.000000000000000000000000000000000");
    /* Past 34 digits: rounded once, from binary128 (3^80 = 147808829414345923316083210206383297601). */
    math2(mf_dec_pow, "3", "80", "1.478088294143459233160832102063833E+38");
    /* Exact products of 34 digits and more (powers of ten) are exact still. */
    math2(mf_dec_pow, "10", "4000", "1.000000000000000000000000000000000E+4000");
    math2(mf_dec_pow, "10", "4933", "1.000000000000000000000000000000000E+4933");
    math2(mf_dec_pow, "1E+3000", "2", "1.000000000000000000000000000000000E+6000");
    /* A negative base to an integral exponent past 2^63: IEEE's signs (helper-104: they gave NaN). */
    math2(mf_dec_pow, "-2", "1E+20", "Infinity");
    math2(mf_dec_pow, "-2", "10000000000000000001", "-Infinity");
    math2(mf_dec_pow, "-0.5", "1E+20", "0E-6176");
    math2(mf_dec_pow, "-2", "0.5", "NaN");
    /* Past binary128's range with a fractional exponent: from the logarithm. */
    bson_decimal128_t b = dec("1E+3000"), e = dec("1.5"), r;
    mf_dec_pow(&b, &e, &r);
    char s[BSON_DECIMAL128_STRING];
    bson_decimal128_to_string(&r, s);
    cr_assert(strncmp(s, "1.0000000000000000000000000", 27) == 0 || strncmp(s, "9.9999999999999999999999999", 27) == 0, "%s", s);
    cr_assert(strstr(s, "E+4500") != NULL || strstr(s, "E+4499") != NULL, "%s", s);
}

Test(dec128, fmod_is_exact)
{
    math2(mf_dec_fmod, "12345678901234567.89", "1", "0.89");
    math2(mf_dec_fmod, "10.5", "3", "1.5");
    math2(mf_dec_fmod, "-10.5", "3", "-1.5");
    math2(mf_dec_fmod, "10", "0.3", "0.1");
    math2(mf_dec_fmod, "7", "1E+30", "7");
    math2(mf_dec_fmod, "1E-30", "7", "1E-30");
    math2(mf_dec_fmod, "1E+6000", "97", "96"); /* 10^6000 mod 97: 10 has order 96 mod 97, 6000 mod 96 = 48, 10^48 = -1 */
    math2(mf_dec_fmod, "5", "0", "NaN");
    math2(mf_dec_fmod, "Infinity", "2", "NaN");
    math2(mf_dec_fmod, "5", "Infinity", "5");
}

/* Random operands with small exponents, against the remainder in 128-bit integers. */
Test(dec128, fmod_matches_integer_arithmetic)
{
    srand(58);
    for (int i = 0; i < 20000; i++) {
        long long ca = ((long long)rand() << 20) ^ rand(), cb = (rand() % 100000) + 1;
        int ea = rand() % 7 - 3, eb = rand() % 7 - 3, e = ea < eb ? ea : eb;
        bool neg = rand() & 1;
        char sa[64], sb[64];
        snprintf(sa, sizeof sa, "%s%lldE%d", neg ? "-" : "", ca, ea);
        snprintf(sb, sizeof sb, "%lldE%d", cb, eb);
        __int128 a = ca, b = cb;
        for (int k = e; k < ea; k++)
            a *= 10;
        for (int k = e; k < eb; k++)
            b *= 10;
        long long r = (long long)(a % b);
        char want[64];
        snprintf(want, sizeof want, "%s%lldE%d", neg ? "-" : "", r, e);
        bson_decimal128_t w = dec(want), x = dec(sa), y = dec(sb), got;
        mf_dec_fmod(&x, &y, &got);
        char ws[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&w, ws);
        expect_str(&got, ws, sa);
    }
}

Test(dec128, log_in_a_base)
{
    math2(mf_dec_log, "8", "2", "3");
    math2(mf_dec_log, "100", "10", "2");
    math2(mf_dec_log, "81", "3", "4");
}

Test(dec128, angles_use_mongods_pi)
{
    bson_decimal128_t r, a = dec("180");
    mf_dec_angle(true, &a, &r);
    expect_str(&r, "3.141592653589793238462643383279503", "180 degrees");
}
