/*
 * value.h: BSON values in MongoDB's comparison order.
 *
 * MongoDB compares values of different types by a canonical type rank:
 *   MinKey < Undefined/Null < numbers (int32, int64, double, decimal128, all by
 *   value) < Symbol/String < Object < Array < BinData < ObjectId < Boolean <
 *   Date < Timestamp < Regex < DBPointer < JavaScript < JavaScriptWithScope <
 *   MaxKey
 * and values of the same rank by content (strings bytewise, documents field by
 * field: type rank, then field name, then value; arrays element by element).
 * NaN sorts below every other number and equals itself. This module is pure:
 * no storage, no allocation except where a function says so (the string,
 * document and array builders, whose values the caller then owns).
 */
#ifndef MF_VALUE_H
#define MF_VALUE_H

#include <bson/bson.h>
#include <string.h>
#include <stdbool.h>
#include <stdint.h>

/* mf_value_type_rank: the canonical rank of a BSON type (MinKey lowest). */
int mf_value_type_rank(bson_type_t t);

/* mf_value_cmp: <0, 0, >0 as a orders before, equal to, after b. */
int mf_value_cmp(const bson_value_t *a, const bson_value_t *b);

/* mf_value_equal: mf_value_cmp(a, b) == 0 (so 1 == 1.0 == NumberLong(1)). */
bool mf_value_equal(const bson_value_t *a, const bson_value_t *b);

/* mf_value_free: destroys v (if it holds a value) and leaves it missing (EOD). */
static inline void
mf_value_free(bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_EOD)
        bson_value_destroy(v);
    v->value_type = BSON_TYPE_EOD;
}

/*
 * Setters: each overwrites o whole (zeroed, then typed) without freeing what
 * it held, so o must hold nothing owned. The scalar ones are inline because
 * expression evaluation calls them for nearly every result; the ones that
 * allocate live in value.c and say what o then owns.
 */

/* mf_value_set_type: o becomes a zeroed value of type t, for the caller to fill in (every setter's first step). */
static inline void
mf_value_set_type(bson_value_t *o, bson_type_t t)
{
    memset(o, 0, sizeof *o);
    o->value_type = t;
}

/* mf_value_set_missing: o becomes missing (EOD). */
static inline void
mf_value_set_missing(bson_value_t *o)
{
    mf_value_set_type(o, BSON_TYPE_EOD);
}

/* mf_value_copy: dst becomes a deep copy of src, or missing (EOD) when src is NULL or missing. */
static inline void
mf_value_copy(bson_value_t *dst, const bson_value_t *src)
{
    if (src == NULL || src->value_type == BSON_TYPE_EOD) {
        mf_value_set_missing(dst);
        return;
    }
    bson_value_copy(src, dst);
}

/* mf_value_set_null: o becomes null. */
static inline void
mf_value_set_null(bson_value_t *o)
{
    mf_value_set_type(o, BSON_TYPE_NULL);
}

/* mf_value_set_bool: o becomes the boolean b. */
static inline void
mf_value_set_bool(bson_value_t *o, bool b)
{
    mf_value_set_type(o, BSON_TYPE_BOOL);
    o->value.v_bool = b;
}

/* mf_value_set_int32: o becomes the int32 x. */
static inline void
mf_value_set_int32(bson_value_t *o, int32_t x)
{
    mf_value_set_type(o, BSON_TYPE_INT32);
    o->value.v_int32 = x;
}

/* mf_value_set_int64: o becomes the int64 x. */
static inline void
mf_value_set_int64(bson_value_t *o, int64_t x)
{
    mf_value_set_type(o, BSON_TYPE_INT64);
    o->value.v_int64 = x;
}

/* mf_value_set_int: o becomes x as an int32 when it fits one, else as an int64. */
static inline void
mf_value_set_int(bson_value_t *o, int64_t x)
{
    if (x >= INT32_MIN && x <= INT32_MAX)
        mf_value_set_int32(o, (int32_t)x);
    else
        mf_value_set_int64(o, x);
}

/* mf_value_set_double: o becomes the double x. */
static inline void
mf_value_set_double(bson_value_t *o, double x)
{
    mf_value_set_type(o, BSON_TYPE_DOUBLE);
    o->value.v_double = x;
}

/* mf_value_set_date: o becomes the date ms milliseconds after the epoch. */
static inline void
mf_value_set_date(bson_value_t *o, int64_t ms)
{
    mf_value_set_type(o, BSON_TYPE_DATE_TIME);
    o->value.v_datetime = ms;
}

/*
 * mf_value_set_decimal_from_double: o becomes the decimal128 of x through its
 * 15 significant digits (NaN and the infinities kept), as mongod's
 * Decimal128(double) rounds a double's result for a decimal argument.
 */
void mf_value_set_decimal_from_double(bson_value_t *o, double x);

/* mf_value_set_strn: o becomes a string owning a NUL-terminated copy of the len bytes at s. */
void mf_value_set_strn(bson_value_t *o, const char *s, size_t len);

/* mf_value_set_str: mf_value_set_strn of the NUL-terminated s. */
void mf_value_set_str(bson_value_t *o, const char *s);

/*
 * mf_value_take_bson: o becomes a document (or, with is_array, an array)
 * owning a copy of b's bytes; takes ownership of b and destroys it.
 */
void mf_value_take_bson(bson_value_t *o, bson_t *b, bool is_array);

/*
 * mf_value_array_t: an array value under construction, its elements keyed
 * "0", "1", ...: mf_value_array_init, a push per element, then
 * mf_value_array_finish (or bson_destroy(&a->b) to drop it). Inline, as
 * operators like $map push every element through it.
 */
typedef struct mf_value_array {
    bson_t b;
    uint32_t n; /* elements so far */
} mf_value_array_t;

static inline void
mf_value_array_init(mf_value_array_t *a)
{
    bson_init(&a->b);
    a->n = 0;
}

/* mf_value_array_push: appends a copy of v (missing is appended as null). */
static inline void
mf_value_array_push(mf_value_array_t *a, const bson_value_t *v)
{
    char buf[16];
    const char *key;
    bson_value_t null_v;

    bson_uint32_to_string(a->n++, &key, buf, sizeof buf);
    if (v->value_type == BSON_TYPE_EOD) {
        mf_value_set_null(&null_v);
        v = &null_v;
    }
    bson_append_value(&a->b, key, -1, v);
}

/* mf_value_array_finish: o becomes the array, which it owns; a is consumed. */
static inline void
mf_value_array_finish(mf_value_array_t *a, bson_value_t *o)
{
    mf_value_take_bson(o, &a->b, true);
}

/* mf_doc_cmp: compares two documents as mf_value_cmp compares embedded documents. */
int mf_doc_cmp(const bson_t *a, const bson_t *b);

/* mf_value_is_number: int32, int64, double or decimal128 (inline: expression evaluation asks it of most operands). */
static inline bool
mf_value_is_number(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
           v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128;
}

/* mf_value_as_double: numeric value as a double (decimal128 approximated); 0 for non-numbers. */
double mf_value_as_double(const bson_value_t *v);

/* mf_value_number_int: mongod's numberInt(): a number truncated to an int32 (saturating; NaN and non-numbers 0). */
int32_t mf_value_number_int(const bson_value_t *v);

/*
 * mf_value_as_int64: numeric value as an int64 if it is a number with an exact
 * integral value in range; returns false otherwise.
 */
bool mf_value_as_int64(const bson_value_t *v, int64_t *out);

/* mf_value_is_nullish: missing, null or undefined (what most operators answer null for). */
static inline bool
mf_value_is_nullish(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_UNDEFINED;
}

/* mf_value_is_empty_doc: an embedded document with no fields. */
static inline bool
mf_value_is_empty_doc(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_DOCUMENT && v->value.v_doc.data_len <= 5;
}

/* mf_value_truthy: MongoDB's truthiness for $expr / $cond (false, null, undefined, 0 are false). */
bool mf_value_truthy(const bson_value_t *v);

/*
 * mf_type_alias: maps a $type alias ("double", "string", "object", "array",
 * "binData", "undefined", "objectId", "bool", "date", "null", "regex",
 * "dbPointer", "javascript", "symbol", "javascriptWithScope", "int",
 * "timestamp", "long", "decimal", "minKey", "maxKey") to its BSON type
 * number; "number" maps to -2. Returns -1 for an unknown alias.
 */
int mf_type_alias(const char *alias);

struct mf_error;

/*
 * mf_value_check_n: the 'n' of the $firstN/$lastN/$minN/$maxN/$topN/
 * $bottomN accumulators and window functions, checked as mongod checks it:
 * 5787902 not a number, 5787903 not integral, 5787908 not positive.
 * 0 with *n, or -1 with err.
 */
int mf_value_check_n(const bson_value_t *v, int64_t *n, struct mf_error *err);

/* mf_value_double_cmp: a qsort comparator of doubles, ascending (NaN compares equal to every value). */
int mf_value_double_cmp(const void *a, const void *b);

/*
 * mf_value_percentile_index: the index, among n > 0 ascending values, of the
 * discrete percentile p (0 <= p <= 1): rank ceil(p * n), kept within 1..n.
 * $median and $percentile answer it, as mongod's 'approximate' method does
 * for small inputs.
 */
size_t mf_value_percentile_index(double p, size_t n);

/* mf_type_name: MongoDB's alias for a BSON type ("double", "string", ...; "missing" for EOD). */
const char *mf_type_name(bson_type_t t);

/* mf_bson_append_value: bson_append_value, but with a key of given length (-1 for NUL-terminated). */
bool mf_bson_append_value(bson_t *b, const char *key, int keylen, const bson_value_t *v);

#endif /* MF_VALUE_H */
