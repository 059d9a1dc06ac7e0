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

#endif
