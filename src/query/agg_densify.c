/*
 * agg_densify.c: the $densify and $fill stages.
 *
 * {$densify: {field, partitionByFields: [...], range: {step, unit, bounds}}}
 * {$fill: {sortBy, partitionBy | partitionByFields, output: {f: {method} | {value}}}}
 *
 * Design. Both stages are sugar, desugared when the pipeline is parsed
 * exactly as mongod desugars them, so explain-free behaviour (order, types,
 * errors) follows mongod's:
 *   - $densify becomes {$sort: {<partition fields>: 1, field: 1}} (the
 *     partition fields left out for bounds "full") and $_internalDensify.
 *     The sort is agg.c's own $sort, so it keeps the blocking-sort budget
 *     and spills like any other; missing / null values sort first and pass
 *     through unchanged.
 *   - $fill becomes a $setWindowFields (sortBy, partitionBy: the given
 *     expression or {f: "$f", ...} for partitionByFields, output {f:
 *     {$locf: "$f"}} / {f: {$linearFill: "$f"}}) for its method outputs,
 *     then an $addFields {f: {$ifNull: ["$f", <value>]}} for its value
 *     outputs; $locf and $linearFill are agg_window.c's.
 *
 * $_internalDensify is mongod's DocumentSourceInternalDensify state machine,
 * transcribed step for step (its quirks included: a partition's last value
 * is only remembered when it is on the step, explicit bounds start each new
 * partition from lower - step + step, and so on), as a pull iterator:
 * mf_densify_next returns one document per call, so a $limit downstream
 * stops generation, and a generator holds only its next value, never the
 * range. States: UNINIT (no value seen, or the last one was below explicit
 * bounds), NEED_GEN (pull the next input document), HAVE_GEN (a generator
 * is producing documents between the last value and the next input
 * document, which it returns last), FINISHING (after the input, each
 * partition is densified up to the global maximum or the upper bound) and
 * DONE. A generated document holds only the partition fields (the value
 * of {p: "$p", ...}: a missing one is left out) and the field.
 *
 * Partitions live in a hash table keyed by the partition document (equality
 * is mf_doc_cmp's, so 1 and 1.0 are one partition; the hash is coarse
 * enough to agree with it: numbers hash by their double value, strings only
 * without a collation, anything nested by its type alone), in insertion
 * order: the partitions finished after the input are finished in the order
 * they were first seen (mongod walks an unordered map; any order is
 * mongod's), which for "partition" and explicit bounds is the sorted order.
 *
 * Arithmetic: numbers step with $add's promotion (int32 to int64 to double;
 * decimal wins), so a generated value has the type of the value it was
 * stepped from plus the step; dates step in UTC as $dateAdd does (a month
 * added to Jan 31 is Feb 28/29, and the next one Mar 28/29: each step adds
 * to the previous value). "On the step" for numbers is (v - base) mod step
 * == 0 (doubles by fmod; decimals approximated as doubles), for months,
 * quarters and years a walk from the base.
 *
 * Limits: more than max_docs generated documents fail with 5897900 (checked
 * before each document is returned, as mongod, so a $limit that stops
 * pulling first never fails); the partition table past max_bytes with
 * 6007200. Every 1024 documents the run checks mf_curop_check_current
 * (maxTimeMS, killOp, shutdown).
 *
 * Errors (mongod's codes, in mongod's order): 9 a non-object stage; IDL
 * 40413 / 40414 / 40415 / 14; 5733401 step not positive, 6586400 a date
 * step not whole, 9 an unknown unit; bounds 5733403 (two elements), 5733402
 * (ascending), 5733409 / 5733406 / 5876900 numeric, 5733405 / 5733410
 * dates, 5946800 neither, 5946802 an unknown string, 5733404 another type;
 * FieldPath 40352 / 40353 / 15998 / 16410; 8993000 / 9554500 a partition
 * field overlapping the field; 5733408 "partition" bounds without
 * partitions. At run time 5733201 a value that is neither a number nor a
 * date, 6053600 a number with a unit or a date without. $fill: 9, IDL,
 * 6050203 empty output, 6050200 an output not an object, 6050201 method
 * and value, 6050202 an unknown method, 6050204 partitionBy and
 * partitionByFields; the rest are $setWindowFields' (605001 ...).
 */
#include "query/agg_densify.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/curop.h"
#include "doc/collation.h"
#include "doc/expr.h"
#include "doc/path.h"
#include "doc/tz.h"
#include "doc/value.h"

#define DEFAULT_MAX_DOCS 500000
#define DEFAULT_MAX_BYTES (100 * 1024 * 1024)

enum { B_FULL, B_PARTITION, B_EXPLICIT };
/* mongod's TimeUnit order. */
enum { U_NONE = -1, U_MS, U_SECOND, U_MINUTE, U_HOUR, U_DAY, U_WEEK, U_MONTH, U_QUARTER, U_YEAR };
static const char *const unit_names[] = {"millisecond", "second", "minute", "hour", "day",
                                         "week", "month", "quarter", "year"};
static const int64_t unit_ms[] = {1LL, 1000LL, 60000LL, 3600000LL, 86400000LL, 604800000LL};

struct mf_densify {
    char *field;
    char **parts;         /* partitionByFields */
    mf_expr_t **part_exprs; /* "$<part>" each */
    size_t nparts;
    bson_value_t step;    /* a number (plain value, nothing to free) */
    int64_t step_ll;      /* with a unit: the whole step */
    int unit;             /* U_NONE for numbers */
    int bounds;
    bson_value_t lo, hi;  /* explicit bounds (plain numbers or dates) */
};

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

/* path_prefix: true if a is b or a path prefix of b ("a" of "a.b"). */
static bool
path_prefix(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '.');
}

/* idl_seen: 40413 for a field given twice (bit i of *seen marks field i). */
static int
idl_seen(unsigned *seen, int i, const char *ctx, const char *k, mf_error_t *err)
{
    if (*seen & (1u << i))
        return mf_err_set(err, MF_E_Location40413, "BSON field '%s.%s' is a duplicate field", ctx, k);
    *seen |= 1u << i;
    return 0;
}

static int
wrong_type(const char *ctx, const char *k, const bson_value_t *v, const char *expected, mf_error_t *err)
{
    return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type '%s'", ctx, k,
                      mf_type_name(v->value_type), expected);
}

/* parse_range: RangeSpec's IDL, then mongod's RangeStatement::parse. ctx is "<stage>.range". */
static int
parse_range(mf_densify_t *d, const bson_value_t *rv, const char *ctx, mf_error_t *err)
{
    bson_iter_t it;
    /* Copies: bson_iter_value points into the iterator, which the next field overwrites. */
    bson_value_t vals[3];
    const bson_value_t *step = NULL, *unit = NULL, *bounds = NULL;
    unsigned seen = 0;

    bson_iter_init_from_data(&it, rv->value.v_doc.data, rv->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(k, "step") == 0) {
            if (idl_seen(&seen, 0, ctx, k, err) < 0)
                return -1;
            if (!mf_value_is_number(v))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '%s.step' is the wrong type '%s', expected types '[int, decimal, double, long]'",
                                  ctx, mf_type_name(v->value_type));
            vals[0] = *v;
            step = &vals[0];
        } else if (strcmp(k, "unit") == 0) {
            if (idl_seen(&seen, 1, ctx, k, err) < 0)
                return -1;
            if (v->value_type != BSON_TYPE_UTF8)
                return wrong_type(ctx, k, v, "string", err);
            vals[1] = *v;
            unit = &vals[1];
        } else if (strcmp(k, "bounds") == 0) {
            if (idl_seen(&seen, 2, ctx, k, err) < 0)
                return -1;
            vals[2] = *v;
            bounds = &vals[2];
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", ctx, k);
        }
    }
    if (step == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.step' is missing but a required field", ctx);
    if (bounds == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.bounds' is missing but a required field", ctx);

    bson_value_t zero;
    mf_value_set_int32(&zero, 0);
    if (mf_value_cmp(step, &zero) <= 0)
        return mf_err_set(err, MF_E_Location5733401,
                          "The step parameter in a range statement must be a strictly positive numeric value");
    d->step = *step;
    d->unit = U_NONE;
    if (unit != NULL) {
        if (!mf_value_as_int64(step, &d->step_ll))
            return mf_err_set(err, MF_E_Location6586400, "The step parameter in a range statement must be a whole "
                                                         "number when densifying a date range");
        for (int i = 0; i < (int)(sizeof unit_names / sizeof *unit_names); i++)
            if (strcmp(unit->value.v_utf8.str, unit_names[i]) == 0)
                d->unit = i;
        if (d->unit == U_NONE)
            return mf_err_set(err, MF_E_FailedToParse, "unknown time unit value: %s", unit->value.v_utf8.str);
    }

    if (bounds->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t ai;
        bson_value_t bv[3];
        const bson_value_t *b[3] = {&bv[0], &bv[1], &bv[2]};
        int n = 0;
        bson_iter_init_from_data(&ai, bounds->value.v_doc.data, bounds->value.v_doc.data_len);
        while (bson_iter_next(&ai) && n < 3)
            bv[n++] = *bson_iter_value(&ai);
        if (n != 2)
            return mf_err_set(err, MF_E_Location5733403,
                              "A bounding array in a range statement must have exactly two elements");
        if (mf_value_cmp(b[0], b[1]) > 0)
            return mf_err_set(err, MF_E_Location5733402,
                              "A bounding array must be an ascending array of either two dates or two numbers");
        if (mf_value_is_number(b[0])) {
            if (d->unit != U_NONE)
                return mf_err_set(err, MF_E_Location5733409, "Numeric bounds may not have unit parameter");
            if (!mf_value_is_number(b[1]))
                return mf_err_set(err, MF_E_Location5733406,
                                  "A bounding array must contain either both dates or both numeric types");
            if (b[0]->value_type != b[1]->value_type || b[0]->value_type != step->value_type)
                return mf_err_set(err, MF_E_Location5876900,
                                  "Upper bound, lower bound, and step must all have the same type");
        } else if (b[0]->value_type == BSON_TYPE_DATE_TIME) {
            if (b[1]->value_type != BSON_TYPE_DATE_TIME)
                return mf_err_set(err, MF_E_Location5733405,
                                  "A bounding array must contain either both dates or both numeric types");
            if (d->unit == U_NONE)
                return mf_err_set(err, MF_E_Location5733410, "A bounding array of dates must specify a unit");
        } else {
            return mf_err_set(err, MF_E_Location5946800, "Explicit bounds must be numeric or dates");
        }
        d->bounds = B_EXPLICIT;
        d->lo = *b[0];
        d->hi = *b[1];
    } else if (bounds->value_type == BSON_TYPE_UTF8) {
        if (strcmp(bounds->value.v_utf8.str, "full") == 0)
            d->bounds = B_FULL;
        else if (strcmp(bounds->value.v_utf8.str, "partition") == 0)
            d->bounds = B_PARTITION;
        else
            return mf_err_set(err, MF_E_Location5946802, "Bounds string must either be 'full' or 'partition'");
    } else {
        return mf_err_set(err, MF_E_Location5733404, "The bounds in a range statement must be the string 'full', "
                                                     "'partition', or an ascending array of two numbers or two dates");
    }
    return 0;
}

void
mf_densify_free(mf_densify_t *d)
{
    if (d == NULL)
        return;
    free(d->field);
    for (size_t i = 0; i < d->nparts; i++) {
        free(d->parts[i]);
        mf_expr_free(d->part_exprs[i]);
    }
    free(d->parts);
    free(d->part_exprs);
    free(d);
}

/* densify_parse: DensifySpec's IDL for stage (its name, for messages), then mongod's checks. */
static mf_densify_t *
densify_parse(const char *stage, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    bson_value_t vals[3]; /* copies, as in parse_range */
    const bson_value_t *field = NULL, *parts = NULL, *range = NULL;
    unsigned seen = 0;
    char ctx[64];
    mf_densify_t *d = mf_calloc(1, sizeof *d);

    if (v->value_type != BSON_TYPE_DOCUMENT) {
        mf_err_set(err, MF_E_FailedToParse, "The %s stage specification must be an object, found %s", stage,
                   mf_type_name(v->value_type));
        goto err_free;
    }
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        int i = strcmp(k, "field") == 0 ? 0 : strcmp(k, "partitionByFields") == 0 ? 1 : strcmp(k, "range") == 0 ? 2 : -1;
        if (i < 0) {
            mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", stage, k);
            goto err_free;
        }
        if (idl_seen(&seen, i, stage, k, err) < 0)
            goto err_free;
        if (i == 0 && fv->value_type != BSON_TYPE_UTF8) {
            wrong_type(stage, k, fv, "string", err);
            goto err_free;
        }
        if (i == 1 && fv->value_type != BSON_TYPE_ARRAY) {
            wrong_type(stage, k, fv, "array", err);
            goto err_free;
        }
        if (i == 2 && fv->value_type != BSON_TYPE_DOCUMENT) {
            wrong_type(stage, k, fv, "object", err);
            goto err_free;
        }
        if (i == 1) {
            bson_iter_t ai;
            bson_iter_init_from_data(&ai, fv->value.v_doc.data, fv->value.v_doc.data_len);
            while (bson_iter_next(&ai)) {
                if (!BSON_ITER_HOLDS_UTF8(&ai)) {
                    char k2[96];
                    snprintf(k2, sizeof k2, "partitionByFields.%s", bson_iter_key(&ai));
                    wrong_type(stage, k2, bson_iter_value(&ai), "string", err);
                    goto err_free;
                }
            }
        }
        vals[i] = *fv;
        *(i == 0 ? &field : i == 1 ? &parts : &range) = &vals[i];
    }
    if (field == NULL) {
        mf_err_set(err, MF_E_Location40414, "BSON field '%s.field' is missing but a required field", stage);
        goto err_free;
    }
    if (range == NULL) {
        mf_err_set(err, MF_E_Location40414, "BSON field '%s.range' is missing but a required field", stage);
        goto err_free;
    }
    snprintf(ctx, sizeof ctx, "%s.range", stage);
    if (parse_range(d, range, ctx, err) < 0)
        goto err_free;

    if (parts != NULL) {
        bson_iter_t ai;
        bson_iter_init_from_data(&ai, parts->value.v_doc.data, parts->value.v_doc.data_len);
        while (bson_iter_next(&ai)) {
            const char *p = bson_iter_utf8(&ai, NULL);
            if (mf_field_path_check(p, err) < 0)
                goto err_free;
            d->parts = mf_realloc(d->parts, (d->nparts + 1) * sizeof *d->parts);
            d->part_exprs = mf_realloc(d->part_exprs, (d->nparts + 1) * sizeof *d->part_exprs);
            d->parts[d->nparts] = mf_strdup(p);
            d->part_exprs[d->nparts] = NULL;
            d->nparts++;
            if ((d->part_exprs[d->nparts - 1] = mf_expr_parse_path(p, err)) == NULL)
                goto err_free;
        }
    }
    if (mf_field_path_check(field->value.v_utf8.str, err) < 0)
        goto err_free;
    d->field = mf_strdup(field->value.v_utf8.str);
    for (size_t i = 0; i < d->nparts; i++) {
        if (path_prefix(d->field, d->parts[i])) {
            mf_err_set(err, MF_E_Location8993000,
                       "BSON field '%s.partitionByFields' contains the field that is being densified", stage);
            goto err_free;
        }
        if (path_prefix(d->parts[i], d->field)) {
            mf_err_set(err, MF_E_Location9554500,
                       "The field that is being densified contains the BSON field '%s.partitionByFields'", stage);
            goto err_free;
        }
    }
    if (d->bounds == B_PARTITION && d->nparts == 0) {
        mf_err_set(err, MF_E_Location5733408,
                   "One cannot specify the bounds as 'partition' without specifying a non-empty array of "
                   "partitionByFields. You may have meant to specify 'full' bounds.");
        goto err_free;
    }
    return d;
err_free:
    mf_densify_free(d);
    return NULL;
}

mf_densify_t *
mf_densify_new(const bson_value_t *v, mf_error_t *err)
{
    return densify_parse("$_internalDensify", v, err);
}

/* ------------------------------------------------------------------------ */
/* Desugaring                                                               */
/* ------------------------------------------------------------------------ */

/* desugar_densify: [{$sort: {parts..., field: 1}}, {$_internalDensify: v}] (no partitions in the sort for "full"). */
static int
desugar_densify(const bson_value_t *v, bson_t *stages, mf_error_t *err)
{
    mf_densify_t *d = densify_parse("$densify", v, err);
    bson_t st, sort, keys;

    if (d == NULL)
        return -1;
    bson_init(stages);
    BSON_APPEND_DOCUMENT_BEGIN(stages, "0", &st);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "$sort", &sort);
    bson_init(&keys);
    for (size_t i = 0; d->bounds != B_FULL && i < d->nparts; i++) {
        bson_iter_t ki;
        if (!bson_iter_init_find(&ki, &keys, d->parts[i])) { /* a field named twice sorts once */
            BSON_APPEND_INT32(&keys, d->parts[i], 1);
            BSON_APPEND_INT32(&sort, d->parts[i], 1);
        }
    }
    BSON_APPEND_INT32(&sort, d->field, 1);
    bson_destroy(&keys);
    bson_append_document_end(&st, &sort);
    bson_append_document_end(stages, &st);
    BSON_APPEND_DOCUMENT_BEGIN(stages, "1", &st);
    bson_append_value(&st, "$_internalDensify", -1, v);
    bson_append_document_end(stages, &st);
    mf_densify_free(d);
    return 1;
}

/*
 * desugar_fill: FillSpec's IDL and mongod's checks, then [{$setWindowFields}]
 * for the method outputs and [{$addFields}] for the value outputs (either
 * may be absent; neither: a no-op $match).
 */
static int
desugar_fill(const bson_value_t *v, bson_t *stages, mf_error_t *err)
{
    bson_iter_t it;
    bson_value_t vals[4]; /* copies, as in parse_range */
    const bson_value_t *sort_by = NULL, *part_by = NULL, *part_fields = NULL, *output = NULL;
    unsigned seen = 0;
    bson_t wout, add;
    bool need_window = false;
    int rc = -1;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "The $fill stage specification must be an object, found %s",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        int i = strcmp(k, "sortBy") == 0              ? 0
                : strcmp(k, "partitionBy") == 0       ? 1
                : strcmp(k, "partitionByFields") == 0 ? 2
                : strcmp(k, "output") == 0            ? 3
                                                      : -1;
        if (i < 0)
            return mf_err_set(err, MF_E_Location40415, "BSON field '$fill.%s' is an unknown field.", k);
        if (idl_seen(&seen, i, "$fill", k, err) < 0)
            return -1;
        if ((i == 0 || i == 3) && fv->value_type != BSON_TYPE_DOCUMENT)
            return wrong_type("$fill", k, fv, "object", err);
        if (i == 1 && fv->value_type != BSON_TYPE_UTF8 && fv->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_TypeMismatch,
                              "BSON field '$fill.partitionBy' is the wrong type '%s', expected types '[string, object]'",
                              mf_type_name(fv->value_type));
        if (i == 2) {
            bson_iter_t ai;
            if (fv->value_type != BSON_TYPE_ARRAY)
                return wrong_type("$fill", k, fv, "array", err);
            bson_iter_init_from_data(&ai, fv->value.v_doc.data, fv->value.v_doc.data_len);
            while (bson_iter_next(&ai)) {
                if (!BSON_ITER_HOLDS_UTF8(&ai)) {
                    char k2[96];
                    snprintf(k2, sizeof k2, "partitionByFields.%s", bson_iter_key(&ai));
                    return wrong_type("$fill", k2, bson_iter_value(&ai), "string", err);
                }
            }
        }
        vals[i] = *fv;
        *(i == 0 ? &sort_by : i == 1 ? &part_by : i == 2 ? &part_fields : &output) = &vals[i];
    }
    if (output == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '$fill.output' is missing but a required field");
    if (bson_iter_init_from_data(&it, output->value.v_doc.data, output->value.v_doc.data_len) && !bson_iter_next(&it))
        return mf_err_set(err, MF_E_Location6050203,
                          "The output field in '$fill' must contain an object with at least one element");

    bson_init(&wout);
    bson_init(&add);
    bson_iter_init_from_data(&it, output->value.v_doc.data, output->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        bson_value_t mv[2];
        const bson_value_t *method = NULL, *value = NULL;
        bson_iter_t oi;
        unsigned oseen = 0;
        char *path = NULL;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mf_err_set(err, MF_E_Location6050200, "Each fill output specification must be an object with exactly one field");
            goto err_destroy;
        }
        bson_iter_recurse(&it, &oi);
        while (bson_iter_next(&oi)) {
            const char *k = bson_iter_key(&oi);
            int i = strcmp(k, "method") == 0 ? 0 : strcmp(k, "value") == 0 ? 1 : -1;
            if (i < 0) {
                mf_err_set(err, MF_E_Location40415, "BSON field '$fill.%s' is an unknown field.", k);
                goto err_destroy;
            }
            if (idl_seen(&oseen, i, "$fill", k, err) < 0)
                goto err_destroy;
            if (i == 0 && !BSON_ITER_HOLDS_UTF8(&oi)) {
                wrong_type("$fill", k, bson_iter_value(&oi), "string", err);
                goto err_destroy;
            }
            mv[i] = *bson_iter_value(&oi);
            *(i == 0 ? &method : &value) = &mv[i];
        }
        path = bson_strdup_printf("$%s", f); /* the whole name: a fixed buffer cut a long one (and lost its data) */
        if (method != NULL) {
            const char *m = method->value.v_utf8.str;
            bson_t fn;
            if (value != NULL) {
                bson_free(path);
                mf_err_set(err, MF_E_Location6050201,
                           "Each fill output specification must have exactly one of 'method' or 'value' fields, not both");
                goto err_destroy;
            }
            if (strcmp(m, "locf") != 0 && strcmp(m, "linear") != 0) {
                bson_free(path);
                mf_err_set(err, MF_E_Location6050202, "Method must be either locf or linear");
                goto err_destroy;
            }
            BSON_APPEND_DOCUMENT_BEGIN(&wout, f, &fn);
            BSON_APPEND_UTF8(&fn, m[0] == 'l' && m[1] == 'o' ? "$locf" : "$linearFill", path);
            bson_append_document_end(&wout, &fn);
            need_window = true;
        }
        if (value != NULL) {
            bson_t e, args;
            BSON_APPEND_DOCUMENT_BEGIN(&add, f, &e);
            BSON_APPEND_ARRAY_BEGIN(&e, "$ifNull", &args);
            BSON_APPEND_UTF8(&args, "0", path);
            bson_append_value(&args, "1", -1, value);
            bson_append_array_end(&e, &args);
            bson_append_document_end(&add, &e);
        }
        bson_free(path);
    }
    if (part_by != NULL && part_fields != NULL) {
        mf_err_set(err, MF_E_Location6050204,
                   "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'");
        goto err_destroy;
    }

    int n = 0;
    bson_t st, w;
    bson_init(stages);
    if (need_window) {
        BSON_APPEND_DOCUMENT_BEGIN(stages, "0", &st);
        BSON_APPEND_DOCUMENT_BEGIN(&st, "$setWindowFields", &w);
        BSON_APPEND_DOCUMENT(&w, "output", &wout);
        if (sort_by != NULL)
            bson_append_value(&w, "sortBy", -1, sort_by);
        if (part_by != NULL)
            bson_append_value(&w, "partitionBy", -1, part_by);
        if (part_fields != NULL) {
            bson_iter_t ai;
            bson_t pb;
            BSON_APPEND_DOCUMENT_BEGIN(&w, "partitionBy", &pb);
            bson_iter_init_from_data(&ai, part_fields->value.v_doc.data, part_fields->value.v_doc.data_len);
            while (bson_iter_next(&ai)) {
                char *path = bson_strdup_printf("$%s", bson_iter_utf8(&ai, NULL));
                BSON_APPEND_UTF8(&pb, bson_iter_utf8(&ai, NULL), path);
                bson_free(path);
            }
            bson_append_document_end(&w, &pb);
        }
        bson_append_document_end(&st, &w);
        bson_append_document_end(stages, &st);
        n++;
    }
    if (!bson_empty(&add)) {
        BSON_APPEND_DOCUMENT_BEGIN(stages, n ? "1" : "0", &st);
        BSON_APPEND_DOCUMENT(&st, "$addFields", &add);
        bson_append_document_end(stages, &st);
        n++;
    }
    if (n == 0) {
        /* Outputs with neither a method nor a value: mongod's $fill then stands for no stage at all. */
        bson_t m;
        BSON_APPEND_DOCUMENT_BEGIN(stages, "0", &st);
        BSON_APPEND_DOCUMENT_BEGIN(&st, "$match", &m);
        bson_append_document_end(&st, &m);
        bson_append_document_end(stages, &st);
    }
    rc = 1;
err_destroy:
    bson_destroy(&wout);
    bson_destroy(&add);
    return rc;
}

int
mf_densify_desugar(const char *name, const bson_value_t *v, bson_t *stages, mf_error_t *err)
{
    if (strcmp(name, "$densify") == 0)
        return desugar_densify(v, stages, err);
    if (strcmp(name, "$fill") == 0)
        return desugar_fill(v, stages, err);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Values: stepping, comparing, reading and writing the field               */
/* ------------------------------------------------------------------------ */

/* date_add: ms + amount units in UTC, as $dateAdd (months clamp the day to the month's end); saturating. */
static int64_t
date_add(int64_t ms, int unit, int64_t amount)
{
    if (unit <= U_WEEK)
        return mf_sat_add(ms, mf_sat_mul(amount, unit_ms[unit]));
    return mf_utc_add_months(ms, mf_sat_mul(amount, unit == U_YEAR ? 12 : unit == U_QUARTER ? 3 : 1));
}

/* num_neg: -v for a number, as $subtract would negate it (int32 and int64 minimums widen). */
static void
num_neg(const bson_value_t *v, bson_value_t *out)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        if (v->value.v_int32 == INT32_MIN)
            mf_value_set_int64(out, -(int64_t)INT32_MIN);
        else
            mf_value_set_int32(out, -v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        if (v->value.v_int64 == INT64_MIN)
            mf_value_set_double(out, -(double)INT64_MIN);
        else
            mf_value_set_int64(out, -v->value.v_int64);
        break;
    case BSON_TYPE_DECIMAL128:
        *out = *v;
        out->value.v_decimal128.high ^= 0x8000000000000000ULL;
        break;
    default:
        mf_value_set_double(out, -mf_value_as_double(v));
        break;
    }
}

/* num_sum: a + b with $add's promotion; out is a plain number. */
static void
num_sum(const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
    *out = *a;
    mf_expr_num_add(out, b);
}

/* dv_step: v + dir * step (dir 1 or -1): a number by $add, a date by $dateAdd in UTC. */
static void
dv_step(const mf_densify_t *d, const bson_value_t *v, int dir, bson_value_t *out)
{
    if (v->value_type == BSON_TYPE_DATE_TIME) {
        mf_value_set_date(out, date_add(v->value.v_datetime, d->unit, dir * d->step_ll));
        return;
    }
    if (dir > 0) {
        num_sum(v, &d->step, out);
    } else {
        bson_value_t neg;
        num_neg(&d->step, &neg);
        num_sum(v, &neg, out);
    }
}

static bool
is_int_type(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64;
}

/* on_step: mongod's DensifyValue::isOnStepRelativeTo: v is base plus a whole number of steps. */
static bool
on_step(const mf_densify_t *d, const bson_value_t *v, const bson_value_t *base)
{
    if (v->value_type == BSON_TYPE_DATE_TIME) {
        int64_t t = v->value.v_datetime, b = base->value.v_datetime;
        if (d->unit >= U_MONTH) {
            /* Months have no fixed length: walk from the base (a few steps: the base is the last value). */
            while (b < t) {
                int64_t nb = date_add(b, d->unit, d->step_ll);
                if (nb <= b)
                    return false;
                b = nb;
            }
            return b == t;
        }
        int64_t len = mf_sat_mul(d->step_ll, unit_ms[d->unit]);
        return len != 0 && ((__int128)t - b) % len == 0;
    }
    bson_value_t neg, diff;
    num_neg(base, &neg);
    num_sum(v, &neg, &diff);
    if (is_int_type(&diff) && is_int_type(&d->step)) {
        int64_t a = diff.value_type == BSON_TYPE_INT32 ? diff.value.v_int32 : diff.value.v_int64;
        int64_t s = d->step.value_type == BSON_TYPE_INT32 ? d->step.value.v_int32 : d->step.value.v_int64;
        return s != 0 && (__int128)a % s == 0;
    }
    return fmod(mf_value_as_double(&diff), mf_value_as_double(&d->step)) == 0.0;
}

/*
 * path_value: Document::getNestedField: the value at the dotted path through
 * embedded documents only (an array on the way: missing). A view into doc.
 */
static bool
path_value(const bson_t *doc, const char *path, bson_value_t *out)
{
    bson_iter_t it, child;
    const char *p = path;

    if (!bson_iter_init(&it, doc))
        return false;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        bool found = false;
        while (!found && bson_iter_next(&it))
            found = bson_iter_key_len(&it) == len && memcmp(bson_iter_key(&it), p, len) == 0;
        if (!found)
            return false;
        if (dot == NULL) {
            *out = *bson_iter_value(&it);
            return true;
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &child))
            return false;
        it = child;
        p = dot + 1;
    }
}

/*
 * append_set: appends to o the fields of base (may be NULL) with path set to
 * v (v NULL: only the embedded documents on the way are made), in place when
 * present, else last; a non-document on the way is replaced by one.
 */
static void
append_set(bson_t *o, const bson_t *base, const char *path, const bson_value_t *v)
{
    const char *dot = strchr(path, '.');
    size_t len = dot ? (size_t)(dot - path) : strlen(path);
    bool done = false;
    bson_iter_t it;
    bson_t child;

    if (base != NULL && bson_iter_init(&it, base)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (done || bson_iter_key_len(&it) != len || memcmp(k, path, len) != 0) {
                bson_append_iter(o, k, (int)bson_iter_key_len(&it), &it);
                continue;
            }
            done = true;
            if (dot != NULL) {
                bson_t sub;
                bool is_doc = false;
                if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
                    uint32_t l;
                    const uint8_t *data;
                    bson_iter_document(&it, &l, &data);
                    is_doc = bson_init_static(&sub, data, l);
                }
                bson_append_document_begin(o, k, (int)len, &child);
                append_set(&child, is_doc ? &sub : NULL, dot + 1, v);
                bson_append_document_end(o, &child);
            } else if (v != NULL) {
                mf_bson_append_value(o, k, (int)len, v);
            } else {
                bson_append_iter(o, k, (int)len, &it);
            }
        }
    }
    if (done)
        return;
    if (dot != NULL) {
        bson_append_document_begin(o, path, (int)len, &child);
        append_set(&child, NULL, dot + 1, v);
        bson_append_document_end(o, &child);
    } else if (v != NULL) {
        mf_bson_append_value(o, path, (int)len, v);
    }
}

/* doc_set: a new document: base (may be NULL) with path set to v (v NULL: only its parents). */
static bson_t *
doc_set(const bson_t *base, const char *path, const bson_value_t *v)
{
    bson_t *o = bson_new();
    append_set(o, base, path, v);
    return o;
}

/* ------------------------------------------------------------------------ */
/* The partition table                                                      */
/* ------------------------------------------------------------------------ */

typedef struct pent {
    bson_t *key;           /* the partition document (owned) */
    uint64_t h;
    bson_value_t val;      /* its last value on the step (a plain number or date) */
    struct pent *hnext;    /* hash chain */
    struct pent *prev, *next; /* insertion order */
} pent_t;

typedef struct ptable {
    pent_t **slots;
    size_t nslots, n;
    pent_t *head, *tail;
} ptable_t;

static uint64_t
mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* key_hash: a hash that agrees with mf_doc_cmp equality (coarse: see the file comment). */
static uint64_t
key_hash(const bson_t *key)
{
    uint64_t h = 1469598103934665603ULL;
    bson_iter_t it;

    if (!bson_iter_init(&it, key))
        return h;
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        int rank = mf_value_type_rank(v->value_type);
        h = mix(h, bson_iter_key(&it), bson_iter_key_len(&it));
        h = mix(h, &rank, sizeof rank);
        if (mf_value_is_number(v)) {
            double x = mf_value_as_double(v);
            if (x == 0 || isnan(x))
                x = isnan(x) ? NAN : 0.0;
            h = mix(h, &x, sizeof x);
        } else if (v->value_type == BSON_TYPE_UTF8 && mf_collation_current() == NULL) {
            h = mix(h, v->value.v_utf8.str, v->value.v_utf8.len);
        } else if (v->value_type == BSON_TYPE_DATE_TIME) {
            h = mix(h, &v->value.v_datetime, sizeof v->value.v_datetime);
        } else if (v->value_type == BSON_TYPE_BOOL) {
            h = mix(h, &v->value.v_bool, sizeof v->value.v_bool);
        }
    }
    return h;
}

static pent_t *
pt_find(const ptable_t *t, const bson_t *key, uint64_t h)
{
    if (t->nslots == 0)
        return NULL;
    for (pent_t *e = t->slots[h & (t->nslots - 1)]; e != NULL; e = e->hnext)
        if (e->h == h && mf_doc_cmp(e->key, key) == 0)
            return e;
    return NULL;
}

/* pt_insert: a new entry for key (taken over), last in insertion order. */
static pent_t *
pt_insert(ptable_t *t, bson_t *key, uint64_t h, const bson_value_t *val)
{
    if (t->n + 1 > t->nslots) {
        size_t ns = t->nslots ? t->nslots * 2 : 64;
        pent_t **slots = mf_calloc(ns, sizeof *slots);
        for (pent_t *e = t->head; e != NULL; e = e->next) {
            e->hnext = slots[e->h & (ns - 1)];
            slots[e->h & (ns - 1)] = e;
        }
        free(t->slots);
        t->slots = slots;
        t->nslots = ns;
    }
    pent_t *e = mf_calloc(1, sizeof *e);
    e->key = key;
    e->h = h;
    e->val = *val;
    e->hnext = t->slots[h & (t->nslots - 1)];
    t->slots[h & (t->nslots - 1)] = e;
    e->prev = t->tail;
    if (t->tail)
        t->tail->next = e;
    else
        t->head = e;
    t->tail = e;
    t->n++;
    return e;
}

/* pt_erase: removes e (freed). */
static void
pt_erase(ptable_t *t, pent_t *e)
{
    pent_t **pp = &t->slots[e->h & (t->nslots - 1)];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->prev)
        e->prev->next = e->next;
    else
        t->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        t->tail = e->prev;
    t->n--;
    bson_destroy(e->key);
    free(e);
}

static void
pt_destroy(ptable_t *t)
{
    while (t->head != NULL)
        pt_erase(t, t->head);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------ */
/* The run: mongod's DocumentSourceInternalDensify                          */
/* ------------------------------------------------------------------------ */

enum { ST_UNINIT, ST_NEED_GEN, ST_HAVE_GEN, ST_FINISHING, ST_DONE };
enum { G_GENERATING, G_FINAL, G_DONE };
enum { R_BELOW, R_MIN, R_INSIDE, R_ABOVE };

/* A generator: documents from min (included) while below hi, then final (if any). */
typedef struct gen {
    bool live;
    int state;
    bson_value_t min, hi;
    bson_t *include; /* the partition document, or NULL */
    bson_t *final;   /* the input document returned last, or NULL */
} gen_t;

struct mf_densify_run {
    const mf_densify_t *d;
    int state;
    gen_t gen;
    bool has_cur, has_gmin, has_gmax;
    bson_value_t cur, gmin, gmax;
    bool part_init; /* partitioned and a value seen: mongod's _partitionExpr */
    ptable_t table;
    bool eof;
    int64_t generated, max_docs, max_bytes, mem, calls;
};

mf_densify_run_t *
mf_densify_run_new(const mf_densify_t *d, int64_t max_docs, int64_t max_bytes)
{
    mf_densify_run_t *r = mf_calloc(1, sizeof *r);
    r->d = d;
    r->state = ST_UNINIT;
    r->max_docs = max_docs > 0 ? max_docs : DEFAULT_MAX_DOCS;
    r->max_bytes = max_bytes > 0 ? max_bytes : DEFAULT_MAX_BYTES;
    return r;
}

static void
gen_clear(gen_t *g)
{
    if (g->include)
        bson_destroy(g->include);
    if (g->final)
        bson_destroy(g->final);
    memset(g, 0, sizeof *g);
}

void
mf_densify_run_free(mf_densify_run_t *r)
{
    if (r == NULL)
        return;
    gen_clear(&r->gen);
    pt_destroy(&r->table);
    free(r);
}

static int
cmpv(const bson_value_t *a, const bson_value_t *b)
{
    return mf_value_cmp(a, b);
}

/* field_nullish: the field is missing, null or undefined. */
static bool
field_nullish(const mf_densify_run_t *r, const bson_t *doc)
{
    bson_value_t v;
    return !path_value(doc, r->d->field, &v) || v.value_type == BSON_TYPE_NULL ||
           v.value_type == BSON_TYPE_UNDEFINED;
}

/* densify_value: the field's value (5733201 neither number nor date; 6053600 against the unit). */
static int
densify_value(const mf_densify_run_t *r, const bson_t *doc, bson_value_t *out, mf_error_t *err)
{
    bson_value_t v;
    if (!path_value(doc, r->d->field, &v))
        mf_value_set_missing(&v);
    if (!mf_value_is_number(&v) && v.value_type != BSON_TYPE_DATE_TIME)
        return mf_err_set(err, MF_E_Location5733201, "Densify field type must be numeric or a date");
    bool num = mf_value_is_number(&v);
    if (num && r->d->unit != U_NONE)
        return mf_err_set(err, MF_E_Location6053600,
                          "Encountered numeric densify value in collection when step has a date unit.");
    if (!num && r->d->unit == U_NONE)
        return mf_err_set(err, MF_E_Location6053600,
                          "Encountered date densify value in collection when step does not have a date unit.");
    *out = v;
    return 0;
}

/* part_key: the partition document {p: "$p", ...} of doc (a missing value left out). Owned by the caller. */
static int
part_key(const mf_densify_run_t *r, const bson_t *doc, bson_t **key, mf_error_t *err)
{
    bson_t *k = bson_new();
    for (size_t i = 0; i < r->d->nparts; i++) {
        bson_value_t v;
        if (mf_expr_eval(r->d->part_exprs[i], doc, &v, err) < 0) {
            bson_destroy(k);
            return -1;
        }
        bson_t *nk = doc_set(k, r->d->parts[i], v.value_type == BSON_TYPE_EOD ? NULL : &v);
        mf_value_free(&v);
        bson_destroy(k);
        k = nk;
    }
    *key = k;
    return 0;
}

/* lookup: the table's entry for doc's partition (NULL if none); *key gets the key (owned) when asked. */
static int
lookup(mf_densify_run_t *r, const bson_t *doc, pent_t **e, mf_error_t *err)
{
    bson_t *key;
    if (part_key(r, doc, &key, err) < 0)
        return -1;
    *e = pt_find(&r->table, key, key_hash(key));
    bson_destroy(key);
    return 0;
}

/* set_partition_value: mongod's setPartitionValue: the partition of doc now ends at its value. */
static int
set_partition_value(mf_densify_run_t *r, const bson_t *doc, mf_error_t *err)
{
    bson_t *key;
    bson_value_t v;
    if (!r->part_init)
        return 0;
    if (part_key(r, doc, &key, err) < 0)
        return -1;
    if (densify_value(r, doc, &v, err) < 0) {
        bson_destroy(key);
        return -1;
    }
    uint64_t h = key_hash(key);
    pent_t *e = pt_find(&r->table, key, h);
    if (e != NULL) {
        e->val = v;
        bson_destroy(key);
        return 0;
    }
    r->mem += (int64_t)key->len + 2 * (int64_t)sizeof(pent_t);
    if (r->mem > r->max_bytes) {
        bson_destroy(key);
        return mf_err_set(err, MF_E_Location6007200, "$densify exceeded memory limit of %lld",
                          (long long)r->max_bytes);
    }
    pt_insert(&r->table, key, h, &v);
    return 0;
}

/* gen_start: a generator from min below hi, producing include + field, then final (both taken over). */
static void
gen_start(mf_densify_run_t *r, const bson_value_t *min, const bson_value_t *hi, bson_t *include, bson_t *final)
{
    gen_clear(&r->gen);
    r->gen.live = true;
    r->gen.state = G_GENERATING;
    r->gen.min = *min;
    r->gen.hi = *hi;
    r->gen.include = include;
    r->gen.final = final;
}

/* gen_next: the generator's next document (owned). */
static bson_t *
gen_next(mf_densify_run_t *r)
{
    gen_t *g = &r->gen;
    bson_value_t next;

    if (g->state == G_FINAL) {
        bson_t *f = g->final;
        g->final = NULL;
        g->state = G_DONE;
        return f;
    }
    bson_value_t add = g->min;
    dv_step(r->d, &g->min, 1, &next);
    if (cmpv(&g->hi, &next) <= 0)
        g->state = g->final ? G_FINAL : G_DONE;
    g->min = next;
    r->generated++;
    return doc_set(g->include, r->d->field, &add);
}

static bool
gen_done(const mf_densify_run_t *r)
{
    return r->gen.state == G_DONE;
}

static int
position(const mf_densify_run_t *r, const bson_value_t *v)
{
    int c = cmpv(v, &r->d->lo);
    if (c < 0)
        return R_BELOW;
    if (c == 0)
        return R_MIN;
    return cmpv(v, &r->d->hi) < 0 ? R_INSIDE : R_ABOVE;
}

/* include_of: the partition document of doc for a generator (NULL unpartitioned). */
static int
include_of(mf_densify_run_t *r, const bson_t *doc, bson_t **inc, mf_error_t *err)
{
    *inc = NULL;
    return r->part_init ? part_key(r, doc, inc, err) : 0;
}

/* emit_generated: the generated document d as the step's output, after mongod's bookkeeping of _current. */
static int
emit_first_generated(mf_densify_run_t *r, bson_t *g, bson_t **out, mf_error_t *err)
{
    if (densify_value(r, g, &r->cur, err) < 0 || set_partition_value(r, g, err) < 0) {
        bson_destroy(g);
        return -1;
    }
    r->has_cur = true;
    *out = g;
    return 0;
}

/* reset_doc_gen: mongod's resetDocGen (explicit bounds). */
static void
reset_doc_gen(mf_densify_run_t *r)
{
    if (!gen_done(r))
        return;
    if (cmpv(&r->cur, &r->d->hi) >= 0 && !r->part_init)
        r->state = ST_DONE;
    else if (r->part_init && r->eof)
        r->state = ST_FINISHING;
    else
        r->state = ST_NEED_GEN;
    gen_clear(&r->gen);
}

/* handle_need_gen: mongod's handleNeedGen ('full' and 'partition'): takes over doc. */
static int
handle_need_gen(mf_densify_run_t *r, bson_t *doc, bson_t **out, mf_error_t *err)
{
    bson_value_t val, next;
    bson_t *inc;

    if (densify_value(r, doc, &val, err) < 0)
        goto err_doc;
    dv_step(r->d, &r->cur, 1, &next);
    if (cmpv(&val, &next) == 0) {
        if (set_partition_value(r, doc, err) < 0)
            goto err_doc;
        r->cur = val;
    }
    if (cmpv(&val, &next) <= 0) {
        *out = doc;
        return 0;
    }
    if (include_of(r, doc, &inc, err) < 0)
        goto err_doc;
    gen_start(r, &next, &val, inc, doc);
    r->state = ST_HAVE_GEN;
    bson_t *g = gen_next(r);
    if (gen_done(r)) {
        gen_clear(&r->gen);
        r->state = ST_NEED_GEN;
    }
    return emit_first_generated(r, g, out, err);
err_doc:
    bson_destroy(doc);
    return -1;
}

/* above_min: mongod's processDocAboveExplicitMinBound: takes over doc. */
static int
above_min(mf_densify_run_t *r, bson_t *doc, bson_t **out, mf_error_t *err)
{
    bson_value_t val, lower;
    bson_t *inc;

    if (densify_value(r, doc, &val, err) < 0)
        goto err_doc;
    dv_step(r->d, &r->cur, 1, &lower);
    if (cmpv(&val, &lower) == 0) {
        if (set_partition_value(r, doc, err) < 0)
            goto err_doc;
        r->cur = lower;
        *out = doc;
        return 0;
    }
    const bson_value_t *upper = cmpv(&val, &r->d->hi) < 0 ? &val : &r->d->hi;
    if (include_of(r, doc, &inc, err) < 0)
        goto err_doc;
    gen_start(r, &lower, upper, inc, doc);
    bson_t *g = gen_next(r);
    if (densify_value(r, g, &r->cur, err) < 0) {
        bson_destroy(g);
        return -1;
    }
    r->state = ST_HAVE_GEN;
    reset_doc_gen(r);
    if (set_partition_value(r, g, err) < 0) {
        bson_destroy(g);
        return -1;
    }
    *out = g;
    return 0;
err_doc:
    bson_destroy(doc);
    return -1;
}

/* first_doc_explicit: mongod's processFirstDocForExplicitRange: takes over doc. */
static int
first_doc_explicit(mf_densify_run_t *r, bson_t *doc, bson_t **out, mf_error_t *err)
{
    bson_value_t val;
    if (densify_value(r, doc, &val, err) < 0) {
        bson_destroy(doc);
        return -1;
    }
    if (!r->has_cur) {
        dv_step(r->d, &r->d->lo, -1, &r->cur);
        r->has_cur = true;
    }
    switch (position(r, &val)) {
    case R_INSIDE:
    case R_ABOVE:
        return above_min(r, doc, out, err);
    case R_MIN:
        r->state = ST_NEED_GEN;
        r->cur = val;
        break;
    default:
        r->state = ST_UNINIT;
        break;
    }
    *out = doc;
    return 0;
}

/* need_gen_explicit: mongod's handleNeedGenExplicit: takes over doc. */
static int
need_gen_explicit(mf_densify_run_t *r, bson_t *doc, bson_t **out, mf_error_t *err)
{
    bson_value_t val, next;
    if (densify_value(r, doc, &val, err) < 0)
        goto err_doc;
    dv_step(r->d, &r->cur, 1, &next);
    switch (position(r, &val)) {
    case R_INSIDE:
        if (cmpv(&val, &next) == 0) {
            r->cur = val;
            if (set_partition_value(r, doc, err) < 0)
                goto err_doc;
        } else if (cmpv(&val, &next) > 0) {
            return above_min(r, doc, out, err);
        }
        break;
    case R_ABOVE:
        if (cmpv(&next, &r->d->hi) < 0)
            return above_min(r, doc, out, err);
        r->cur = next;
        if (set_partition_value(r, doc, err) < 0)
            goto err_doc;
        if (!r->part_init)
            r->state = ST_DONE;
        break;
    case R_MIN:
        if (set_partition_value(r, doc, err) < 0)
            goto err_doc;
        r->cur = val;
        break;
    default:
        if (set_partition_value(r, doc, err) < 0)
            goto err_doc;
        r->state = ST_UNINIT;
        break;
    }
    *out = doc;
    return 0;
err_doc:
    bson_destroy(doc);
    return -1;
}

/* finish_helper: mongod's finishDensifyingPartitionedInputHelper: the next partition densified up to max. */
static int
finish_helper(mf_densify_run_t *r, const bson_value_t *max, const bson_value_t *min_override, bson_t **out)
{
    while (r->table.head != NULL) {
        pent_t *e = r->table.head;
        bson_value_t v;
        dv_step(r->d, &e->val, 1, &v);
        if (cmpv(&v, max) >= 0) {
            pt_erase(&r->table, e);
            continue;
        }
        if (min_override != NULL && cmpv(&v, min_override) < 0)
            v = *min_override;
        bson_t *inc = bson_copy(e->key);
        pt_erase(&r->table, e);
        gen_start(r, &v, max, inc, NULL);
        r->state = ST_HAVE_GEN;
        *out = gen_next(r);
        if (gen_done(r)) {
            gen_clear(&r->gen);
            r->state = ST_FINISHING;
        }
        return 0;
    }
    r->state = ST_DONE;
    *out = NULL;
    return 0;
}

/* finish_partitioned: mongod's finishDensifyingPartitionedInput. */
static int
finish_partitioned(mf_densify_run_t *r, bson_t **out)
{
    if (r->table.n == 0) {
        r->state = ST_DONE;
        *out = NULL;
        return 0;
    }
    if (r->d->bounds == B_FULL) {
        bson_value_t max = r->gmax;
        if (on_step(r->d, &r->gmax, &r->cur))
            dv_step(r->d, &r->gmax, 1, &max);
        return finish_helper(r, &max, NULL, out);
    }
    if (r->d->bounds == B_EXPLICIT)
        return finish_helper(r, &r->d->hi, &r->d->lo, out);
    *out = NULL;
    return 0;
}

/* explicit_after_eof: mongod's densifyExplicitRangeAfterEOF (unpartitioned). */
static int
explicit_after_eof(mf_densify_run_t *r, bson_t **out)
{
    bson_value_t lower;
    if (!r->has_cur) {
        r->cur = r->d->lo;
        r->has_cur = true;
        lower = r->d->lo;
    } else {
        dv_step(r->d, &r->cur, 1, &lower);
        if (cmpv(&lower, &r->d->hi) >= 0) {
            r->state = ST_DONE;
            *out = NULL;
            return 0;
        }
    }
    gen_start(r, &lower, &r->d->hi, NULL, NULL);
    r->state = ST_HAVE_GEN;
    *out = gen_next(r);
    if (gen_done(r)) {
        r->state = ST_DONE;
        gen_clear(&r->gen);
    }
    return 0;
}

/* source_exhausted: mongod's handleSourceExhausted. */
static int
source_exhausted(mf_densify_run_t *r, bson_t **out)
{
    r->eof = true;
    *out = NULL;
    if (r->d->bounds == B_EXPLICIT)
        return r->part_init ? finish_partitioned(r, out) : explicit_after_eof(r, out);
    if (r->d->bounds == B_FULL && r->part_init)
        return finish_partitioned(r, out);
    r->state = ST_DONE;
    return 0;
}

/* pull_valued: the next input document; *pass when it is to pass through as it is (field nullish). */
static int
pull_valued(mf_densify_pull_fn pull, void *arg, const mf_densify_run_t *r, bson_t **doc, bool *pass,
            mf_error_t *err)
{
    if (pull(arg, doc, err) < 0)
        return -1;
    *pass = *doc != NULL && field_nullish(r, *doc);
    return 0;
}

/* step_uninit: the kUninitializedOrBelowRange state. */
static int
step_uninit(mf_densify_run_t *r, mf_densify_pull_fn pull, void *arg, bson_t **out, mf_error_t *err)
{
    bson_t *doc;
    bool pass;
    bson_value_t val;

    if (pull_valued(pull, arg, r, &doc, &pass, err) < 0)
        return -1;
    if (doc == NULL)
        return source_exhausted(r, out);
    if (pass) {
        *out = doc;
        return 0;
    }
    if (densify_value(r, doc, &val, err) < 0)
        goto err_doc;
    if (r->d->nparts > 0 && !r->part_init) {
        r->part_init = true;
        if (set_partition_value(r, doc, err) < 0)
            goto err_doc;
    }
    switch (r->d->bounds) {
    case B_FULL:
        r->cur = r->gmin = r->gmax = val;
        r->has_cur = r->has_gmin = r->has_gmax = true;
        r->state = ST_NEED_GEN;
        break;
    case B_PARTITION:
        r->state = ST_NEED_GEN;
        break;
    default:
        return first_doc_explicit(r, doc, out, err);
    }
    *out = doc;
    return 0;
err_doc:
    bson_destroy(doc);
    return -1;
}

/* step_need_gen: the kNeedGen state. */
static int
step_need_gen(mf_densify_run_t *r, mf_densify_pull_fn pull, void *arg, bson_t **out, mf_error_t *err)
{
    bson_t *doc;
    bool pass;
    bson_value_t val;
    pent_t *e = NULL;

    if (pull_valued(pull, arg, r, &doc, &pass, err) < 0)
        return -1;
    if (doc == NULL)
        return source_exhausted(r, out);
    if (pass) {
        *out = doc;
        return 0;
    }
    if (densify_value(r, doc, &val, err) < 0)
        goto err_doc;
    switch (r->d->bounds) {
    case B_FULL:
        if (r->part_init) {
            r->gmax = val;
            if (lookup(r, doc, &e, err) < 0)
                goto err_doc;
            if (e == NULL) {
                /* A new partition starts at the global minimum: pretend its value before that was seen. */
                dv_step(r->d, &r->gmin, -1, &r->cur);
                if (set_partition_value(r, doc, err) < 0)
                    goto err_doc;
                return handle_need_gen(r, doc, out, err);
            }
            r->cur = e->val;
        }
        return handle_need_gen(r, doc, out, err);
    case B_PARTITION:
        if (lookup(r, doc, &e, err) < 0)
            goto err_doc;
        if (e == NULL) {
            if (set_partition_value(r, doc, err) < 0)
                goto err_doc;
            *out = doc;
            return 0;
        }
        r->cur = e->val;
        return handle_need_gen(r, doc, out, err);
    default:
        if (r->part_init) {
            if (lookup(r, doc, &e, err) < 0)
                goto err_doc;
            if (e == NULL) {
                if (set_partition_value(r, doc, err) < 0)
                    goto err_doc;
                r->has_cur = false;
                return first_doc_explicit(r, doc, out, err);
            }
            r->cur = e->val;
        }
        return need_gen_explicit(r, doc, out, err);
    }
err_doc:
    bson_destroy(doc);
    return -1;
}

/* step_have_gen: the kHaveGenerator state. */
static int
step_have_gen(mf_densify_run_t *r, bson_t **out, mf_error_t *err)
{
    bson_t *g = gen_next(r);
    bson_value_t gval, next;

    if (densify_value(r, g, &gval, err) < 0)
        goto err_doc;
    if (r->d->bounds == B_EXPLICIT) {
        if (on_step(r->d, &gval, &r->cur)) {
            r->cur = gval;
            if (set_partition_value(r, g, err) < 0)
                goto err_doc;
        }
        reset_doc_gen(r);
        *out = g;
        return 0;
    }
    if (gen_done(r)) {
        gen_clear(&r->gen);
        r->state = r->d->bounds == B_FULL && r->eof && r->part_init ? ST_FINISHING : ST_NEED_GEN;
    }
    /* The generator's last document (the input one) may be off the step. */
    dv_step(r->d, &r->cur, 1, &next);
    if (cmpv(&gval, &next) == 0) {
        r->cur = gval;
        if (set_partition_value(r, g, err) < 0)
            goto err_doc;
    }
    *out = g;
    return 0;
err_doc:
    bson_destroy(g);
    return -1;
}

int
mf_densify_next(mf_densify_run_t *r, mf_densify_pull_fn pull, void *arg, bson_t **out, mf_error_t *err)
{
    *out = NULL;
    /* Checked before each document, as mongod checks the count the last one reached. */
    if (r->generated > r->max_docs)
        return mf_err_set(err, MF_E_Location5897900,
                          "Generated %lld documents in $densify, which is over the limit of %lld. Increase the "
                          "'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents",
                          (long long)r->generated, (long long)r->max_docs);
    if ((++r->calls & 1023) == 0 && mf_curop_check_current(err) != 0)
        return -1;
    switch (r->state) {
    case ST_UNINIT:
        return step_uninit(r, pull, arg, out, err);
    case ST_NEED_GEN:
        return step_need_gen(r, pull, arg, out, err);
    case ST_HAVE_GEN:
        return step_have_gen(r, out, err);
    case ST_FINISHING:
        return finish_partitioned(r, out);
    default:
        /* Done densifying: whatever input is left passes through (for "full", none is). */
        return pull(arg, out, err);
    }
}

/* The materialising run's input: the next document of a vector. */
typedef struct vec_src {
    mf_docvec_t *in;
    size_t pos;
} vec_src_t;

static int
vec_pull(void *arg, bson_t **doc, mf_error_t *err)
{
    vec_src_t *s = arg;
    (void)err;
    *doc = NULL;
    if (s->pos < s->in->len) {
        *doc = s->in->docs[s->pos];
        s->in->docs[s->pos++] = NULL;
    }
    return 0;
}

int
mf_densify_run(const mf_densify_t *d, int64_t max_docs, int64_t max_bytes, mf_docvec_t *in, mf_docvec_t *out,
               mf_error_t *err)
{
    mf_densify_run_t *r = mf_densify_run_new(d, max_docs, max_bytes);
    vec_src_t src = {in, 0};
    int rc = 0;

    for (;;) {
        bson_t *doc;
        if ((rc = mf_densify_next(r, vec_pull, &src, &doc, err)) < 0 || doc == NULL)
            break;
        mf_docvec_push_steal(out, doc);
    }
    /* Documents not pulled (an error stopped the run) are still the vector's. */
    for (size_t i = src.pos; i < in->len; i++)
        if (in->docs[i] != NULL)
            bson_destroy(in->docs[i]);
    in->len = 0;
    mf_docvec_destroy(in);
    mf_densify_run_free(r);
    return rc;
}
