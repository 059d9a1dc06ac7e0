/*
 * sum.h: MongoDB's $sum / $avg accumulation (AccumulatorSum, AccumulatorAvg,
 * util/summation.h's DoubleDoubleSummation).
 *
 * Integers and doubles are summed as a double-double: the nearest double
 * and a compensation that holds what rounding lost (Neumaier's variant of
 * Kahan summation), an int64 split into two exact doubles first, so a sum of
 * integers is exact while it fits 106 bits and a sum of doubles is nearly
 * exact (0.1 ten times is 1, not 0.9999999999999999). Infinities and NaNs are
 * summed apart and win. Decimals are summed exactly in decimal and joined at
 * the end. The result's type is the widest seen: an int32 or int64 total
 * comes back as an integer while it fits int64 (a sum that overflowed on the
 * way and came back in range is still exact), else as a double.
 */
#ifndef MF_SUM_H
#define MF_SUM_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct mf_sum {
    int widest;           /* 0 int32, 1 int64, 2 double, 3 decimal */
    double hi, lo;        /* the non-decimal total: hi + lo */
    double special;       /* the infinities and NaNs, summed plainly */
    bool has_special;
    bson_decimal128_t dec; /* the decimal total */
    bool has_dec;
} mf_sum_t;

void mf_sum_init(mf_sum_t *s);
/* mf_sum_add: adds v; anything but a number is ignored. */
void mf_sum_add(mf_sum_t *s, const bson_value_t *v);
/* mf_sum_add_times: adds v n times (an integer's product at once when it fits int64), as n mf_sum_add calls. */
void mf_sum_add_times(mf_sum_t *s, const bson_value_t *v, int64_t n);
/* mf_sum_merge: adds the operands o has seen (a spilled partial total). */
void mf_sum_merge(mf_sum_t *s, const mf_sum_t *o);
/* mf_sum_result: the total, as $sum returns it (int32 0 when nothing was added). */
void mf_sum_result(const mf_sum_t *s, bson_value_t *out);
/* mf_sum_avg: the total over n values, as $avg returns it (null when n is 0). */
void mf_sum_avg(const mf_sum_t *s, int64_t n, bson_value_t *out);
/* mf_sum_state / mf_sum_from_state: s as fields of a spilled state document, and back. */
void mf_sum_state(const mf_sum_t *s, bson_t *out);
void mf_sum_from_state(mf_sum_t *s, const bson_t *st);

#endif
