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
 * $minute $second $millisecond $dayOfWeek $dayOfYear $week $isoWeek
 * $isoWeekYear $isoDayOfWeek (a date, [date] or {date, timezone}) $dateToString
 * $dateFromString $dateFromParts $dateToParts $dateTrunc $dateAdd
 * $dateSubtract $dateDiff (time zones: Olson names from the system tz
 * database or "+HH", "+HHMM", "+HH:MM" offsets, doc/tz.h)
 * $mergeObjects $objectToArray $arrayToObject $setUnion $setIntersection
 * $setDifference $setIsSubset $anyElementTrue $allElementsTrue $getField
 * $setField $unsetField $sortArray $zip $bitAnd $bitOr $bitXor $bitNot
 * $tsSecond $tsIncrement $toUUID $sigmoid $rand $median $percentile
 * (expression forms, method 'approximate')
 * $regexMatch $regexFind $regexFindAll $replaceOne $replaceAll $stdDevPop
 * $stdDevSamp (array forms). Unknown "$op" → 168
 * InvalidPipelineOperator
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

/*
 * mf_expr_parsing_validator: whether the calling thread's following parses
 * are of a collection validator (expCtx->isParsingCollectionValidator),
 * where $function (4660800) and $_internalJsEmit (4660801) "cannot be used
 * inside a validator". Returns the previous setting (initially false).
 */
bool mf_expr_parsing_validator(bool on);

/* mf_expr_in_validator: mf_expr_parsing_validator's current setting for the calling thread. */
bool mf_expr_in_validator(void);


/*
 * mf_expr_parse_path: mf_expr_parse of the field path "$<field>" (a sort
 * key's name, say). Returns NULL and fills err when invalid.
 */
mf_expr_t *mf_expr_parse_path(const char *field, mf_error_t *err);
void mf_expr_free(mf_expr_t *e);

/*
 * mf_expr_eval: evaluates e with $$ROOT = $$CURRENT = root. On success *out
 * holds an owned value (release with bson_value_destroy); a missing field
 * yields out->value_type == BSON_TYPE_EOD ("missing", distinct from null).
 * Returns 0, or -1 with err filled (e.g. $divide by zero: 2 BadValue).
 */
int mf_expr_eval(const mf_expr_t *e, const bson_t *root, bson_value_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_expr_percentile_p: $percentile's 'p' (v) as mongod's parseP reads it:
 * an expression folding to a constant (7750300 otherwise), a non-empty
 * array (7750301) of numbers (7750302) within [0, 1] (7750303). On success
 * *ps (the caller's, bson_free) holds the *nps values. For the $group
 * accumulator and the window function; the expression form reads it the
 * same way. Returns 0 or -1 with err.
 */
int mf_expr_percentile_p(const bson_value_t *v, double **ps, size_t *nps, mf_error_t *err);

/* mf_expr_is_constant: true if e references no field or variable. */
bool mf_expr_is_constant(const mf_expr_t *e);

/*
 * mf_expr_reads_document: true if e needs the document it runs on (a field
 * path, $$ROOT or $$CURRENT, $meta, a $getField of the current document):
 * mongod's getDependencies() not hasNoRequirements().
 */
bool mf_expr_reads_document(const mf_expr_t *e);

/*
 * mf_expr_doc_paths: calls fn with each field path e reads from the
 * document it runs on ("a.b" for "$a.b"; the string is valid during the
 * call), as mongod's dependency analysis lists them. False when fn returns
 * false, or when e reads the document some other way ($$ROOT, $$CURRENT,
 * $meta, a $getField of the current document): the caller needs it whole.
 * A $let that rebinds CURRENT reads its own variable, not the document.
 */
bool mf_expr_doc_paths(const mf_expr_t *e, bool (*fn)(void *arg, const char *path), void *arg);

/*
 * mf_expr_num_add: *acc = *acc + v with $add's numeric promotion (int32 →
 * int64 on overflow → double; decimal128 wins). A non-numeric or missing
 * *acc counts as 0; a non-numeric v is ignored. *acc is owned by the caller
 * and stays a plain numeric value. Used by $group's $sum/$avg.
 */
void mf_expr_num_add(bson_value_t *acc, const bson_value_t *v);

/*
 * Ambient user variables ($lookup's "let").
 *
 * An mf_expr_vars_t frame names user variables defined outside any
 * expression. The innermost frame of the calling thread is "ambient": while
 * it is installed, mf_expr_parse accepts "$$name" for its names (and those of
 * the frames it chains to through up), and mf_expr_eval resolves them to
 * vals[i] (a variable bound inside the expression, e.g. by $let, shadows an
 * ambient one). This lets code that parses and evaluates expressions without
 * knowing about variables (the matcher's $expr, projections) see them.
 *
 * Usage (frames are borrowed: names and vals must outlive the installation):
 *     mf_expr_vars_t f = {names, vals, n, mf_expr_vars_current()};
 *     mf_expr_vars_set(&f);  ... parse or evaluate ...  mf_expr_vars_set(f.up);
 * vals may be NULL while only parsing; evaluating a variable of a frame
 * without vals fails with 17276. The state is thread-local.
 */
typedef struct mf_expr_vars {
    const char *const *names;
    const bson_value_t *vals; /* n values, or NULL (names only, for parsing) */
    size_t n;
    const struct mf_expr_vars *up;
} mf_expr_vars_t;

/* mf_expr_vars_current: this thread's innermost ambient frame, or NULL. */
const mf_expr_vars_t *mf_expr_vars_current(void);

/* mf_expr_vars_set: installs frame (may be NULL) as this thread's innermost ambient frame. */
void mf_expr_vars_set(const mf_expr_vars_t *frame);

/*
 * mf_expr_check_var_name: 0 if name is a valid user variable name (starts
 * with a lowercase ASCII letter or a non-ASCII byte, then letters, digits,
 * '_' or non-ASCII); -1 with err otherwise (16866 empty, 16867 bad first
 * character, 16868 bad character).
 */
int mf_expr_check_var_name(const char *name, mf_error_t *err);

/*
 * mf_expr_check_var_name_read: mf_expr_check_var_name as mongod's
 * validateNameForUserRead: an uppercase ASCII first letter is allowed too
 * (an update statement's constants).
 */
int mf_expr_check_var_name_read(const char *name, mf_error_t *err);

/*
 * True if name is a $meta argument mongod 8.0 knows whose metadata mayfly
 * never sets on a document (a $sample's random value, $search and
 * $vectorSearch results, a time-series bucket's bounds): such a $meta
 * parses and evaluates to missing, in find projections and expressions.
 */
bool mf_meta_never_set(const char *name);

/*
 * mf_expr_sort_key_source_set: makes this thread's {$meta: "sortKey"} show
 * the sort key of the document being evaluated ($$ROOT) under s, as mongod's
 * $sort leaves it in the document's metadata, or missing when s is NULL (no
 * $sort set it). s is borrowed and must outlive the setting. Returns the
 * previous setting, for the caller to restore.
 */
typedef struct mf_sort mf_sort_t;
const mf_sort_t *mf_expr_sort_key_source_set(const mf_sort_t *s);

#endif /* MF_EXPR_H */
