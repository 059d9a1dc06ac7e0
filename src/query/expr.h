/*
 * expr.h: aggregation expressions ($expr, $project/$addFields values, $group keys).
 *
 * An expression is parsed once into a tree and evaluated against a root
 * document. Supported at least: field paths ("$a.b"), system variables
 * ($$ROOT, $$CURRENT, $$NOW, $$REMOVE), user variables ($let, $map/$filter
 * "as"), literals and $literal, documents and arrays of expressions, and the
 * operators $eq $ne $gt $gte $lt $lte $cmp $and $or $not $cond $ifNull
 * $switch $add $subtract $multiply $divide $mod $abs $ceil $floor $round
 * $trunc $sqrt $pow $exp $ln $log10 $concat $toLower $toUpper $substr
 * $substrBytes $substrCP $strLenCP $strLenBytes $split $trim $ltrim $rtrim
 * $indexOfCP $size $arrayElemAt $first $last $in $concatArrays $slice
 * $isArray $reverseArray $range $filter $map $reduce $sum $avg $min $max
 * (array forms) $type $toString $toInt $toLong $toDouble $toDecimal $toBool
 * $toDate $toObjectId $convert $isNumber $year $month $dayOfMonth $hour
 * $minute $second $millisecond $dayOfWeek $dayOfYear $dateToString
 * $mergeObjects $objectToArray $arrayToObject $setUnion $setIntersection
 * $setDifference $setIsSubset $anyElementTrue $allElementsTrue $getField
 * $regexMatch. Unknown "$op" → 168 InvalidPipelineOperator
 * ("Unrecognized expression '$foo'").
 */
#ifndef MF_EXPR_H
#define MF_EXPR_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/error.h"

typedef struct mf_expr mf_expr_t;

/*
 * mf_expr_parse: parses the expression held in v (a field path string, a
 * literal, an operator document or a plain document/array of expressions).
 * Returns NULL and fills err when invalid. Does not keep references into v.
 */
mf_expr_t *mf_expr_parse(const bson_value_t *v, mf_error_t *err);
void mf_expr_free(mf_expr_t *e);

/*
 * mf_expr_eval: evaluates e with $$ROOT = $$CURRENT = root. On success *out
 * holds an owned value (release with bson_value_destroy); a missing field
 * yields out->value_type == BSON_TYPE_EOD ("missing", distinct from null).
 * Returns 0, or -1 with err filled (e.g. $divide by zero: 2 BadValue).
 */
int mf_expr_eval(const mf_expr_t *e, const bson_t *root, bson_value_t *out, mf_error_t *err) MF_WUR;

/* mf_expr_is_constant: true if e references no field or variable. */
bool mf_expr_is_constant(const mf_expr_t *e);

/*
 * mf_expr_num_add: *acc = *acc + v with $add's numeric promotion (int32 →
 * int64 on overflow → double; decimal128 wins). A non-numeric or missing
 * *acc counts as 0; a non-numeric v is ignored. *acc is owned by the caller
 * and stays a plain numeric value. Used by $group's $sum/$avg.
 */
void mf_expr_num_add(bson_value_t *acc, const bson_value_t *v);

#endif /* MF_EXPR_H */
