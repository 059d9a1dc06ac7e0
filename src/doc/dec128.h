/*
 * dec128.h: Decimal128 arithmetic, comparison and conversion, exact as
 * MongoDB's.
 *
 * MongoDB computes with IEEE 754-2008 decimal128 values (34 digits, round
 * half to even, exponents kept as the standard prefers, so 0.10 + 0.20 is
 * 0.30), using Intel's decimal library. So does this module: it uses C's
 * _Decimal128, whose arithmetic on x86-64 is libgcc's copy of that library,
 * in the same BID encoding as BSON's Decimal128. A bson_decimal128_t is
 * therefore the operand itself; nothing goes through a string or a binary
 * double except where MongoDB does the same.
 *
 * Mixed operands follow MongoDB: an int32 or int64 converts exactly; a
 * double converts rounded to 15 significant digits for arithmetic
 * (Decimal128(double), kRoundTo15Digits: 0.1 -> 0.100000000000000) and to
 * 34 digits for comparison (compareDecimalToDouble).
 *
 * Only gcc has _Decimal128, so the Makefile compiles dec128.c with gcc in
 * every build tree (clang builds the rest of the fuzz tree). Pure functions;
 * no allocation, no state.
 */
#ifndef MF_DEC128_H
#define MF_DEC128_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum mf_dec_op { MF_DEC_ADD, MF_DEC_SUB, MF_DEC_MUL, MF_DEC_DIV } mf_dec_op_t;

/* mf_dec_arith: *out = a op b (out may be a or b). Division by zero gives an infinity or NaN, as IEEE does. */
void mf_dec_arith(mf_dec_op_t op, const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *out);
/* mf_dec_cmp: -1, 0 or 1, with NaN equal to NaN and below every other number (MongoDB's order). */
int mf_dec_cmp(const bson_decimal128_t *a, const bson_decimal128_t *b);
/* mf_dec_from_int64: x exactly. */
void mf_dec_from_int64(int64_t x, bson_decimal128_t *out);
/* mf_dec_from_double: x rounded to 15 significant digits (digits 15) or to 34 (digits 34); 0, NaN and infinities as they are. */
void mf_dec_from_double(double x, int digits, bson_decimal128_t *out);
/*
 * mf_dec_from_value: number v as a decimal (a double rounded to
 * double_digits, 15 or 34, as mf_dec_from_double). False for a non-number.
 */
bool mf_dec_from_value(const bson_value_t *v, int double_digits, bson_decimal128_t *out);
/* How mf_dec_quantize rounds. */
typedef enum mf_dec_round {
    MF_DEC_HALF_EVEN, /* $round */
    MF_DEC_TRUNC,     /* $trunc: toward zero */
    MF_DEC_FLOOR,     /* $floor */
    MF_DEC_CEIL,      /* $ceil */
} mf_dec_round_t;

/*
 * mf_dec_quantize: d rounded to a multiple of 10^-place, with exponent
 * -place (so $round(1.5, 2) is 1.50, as Intel's quantize gives mongod).
 * NaN and infinities are returned as they are; so is a d whose digits
 * already stop above 10^-place's (34 digits leave no room for more).
 */
void mf_dec_quantize(const bson_decimal128_t *d, int place, mf_dec_round_t mode, bson_decimal128_t *out);
/*
 * mf_dec_order_bytes: 16 bytes that compare with memcmp as the finite
 * non-zero decimals of one sign they encode compare by value: the
 * exponent and the coefficient scaled to 34 digits, all bits inverted for a
 * negative value. Equal values (1.10 and 1.1) give equal bytes.
 */
void mf_dec_order_bytes(const bson_decimal128_t *d, uint8_t out[16]);
/* mf_dec_to_double: the nearest double. */
double mf_dec_to_double(const bson_decimal128_t *d);
/* mf_dec_to_int64: true with *out set when d is an integer within int64's range. */
bool mf_dec_to_int64(const bson_decimal128_t *d, int64_t *out);
bool mf_dec_is_nan(const bson_decimal128_t *d);
bool mf_dec_is_zero(const bson_decimal128_t *d);

/*
 * Functions MongoDB computes in decimal (Decimal128::exponential, logarithm,
 * squareRoot, power, sin ...), to 34 digits (see dec128.c: in binary128,
 * rounded once). NaN and infinities follow IEEE; a domain error (the
 * logarithm of a negative) gives NaN: callers check domains first, as
 * mongod does.
 */
typedef enum mf_dec_fn {
    MF_DEC_SQRT, MF_DEC_EXP, MF_DEC_LN, MF_DEC_LOG10, MF_DEC_LOG2,
    MF_DEC_SIN, MF_DEC_COS, MF_DEC_TAN, MF_DEC_ASIN, MF_DEC_ACOS, MF_DEC_ATAN,
    MF_DEC_SINH, MF_DEC_COSH, MF_DEC_TANH, MF_DEC_ASINH, MF_DEC_ACOSH, MF_DEC_ATANH,
} mf_dec_fn_t;
/* mf_dec_math: *out = fn(a). */
void mf_dec_math(mf_dec_fn_t fn, const bson_decimal128_t *a, bson_decimal128_t *out);
/* mf_dec_atan2: *out = atan2(y, x). */
void mf_dec_atan2(const bson_decimal128_t *y, const bson_decimal128_t *x, bson_decimal128_t *out);
/* mf_dec_log: *out = the logarithm of a in base (log2 and log10 for 2 and 10, else ln a / ln base). */
void mf_dec_log(const bson_decimal128_t *a, const bson_decimal128_t *base, bson_decimal128_t *out);
/* mf_dec_pow: *out = base^ex, exact for an integral ex while it fits, with every digit the coefficient has room for (as Decimal128::power). */
void mf_dec_pow(const bson_decimal128_t *base, const bson_decimal128_t *ex, bson_decimal128_t *out);
/* mf_dec_angle: a times pi/180 (to_radians) or 180/pi, MongoDB's decimal factors. */
void mf_dec_angle(bool to_radians, const bson_decimal128_t *a, bson_decimal128_t *out);

/* mf_dec_fmod: *out = a mod b exactly (the remainder of the truncated quotient, a's sign), as Decimal128::modulo; NaN for b zero. */
void mf_dec_fmod(const bson_decimal128_t *a, const bson_decimal128_t *b, bson_decimal128_t *out);

#endif
