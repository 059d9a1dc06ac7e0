/*
 * agg_window.c: the $setWindowFields stage.
 *
 * {$setWindowFields: {partitionBy: <expr>, sortBy: {f: 1|-1, ...},
 *                     output: {path: {<function>: <args>, window: {...}}}}}
 *
 * Design. MongoDB desugars the stage into a $sort on (partition key,
 * sortBy) followed by a pass that walks each partition; so do we. Every
 * input document is wrapped as {k: <partition key>, d: <document>} (the key
 * evaluated once; missing counts as null, an array fails with 14
 * TypeMismatch), the wrappers are sorted stably by k then by sortBy applied
 * to d (materialising: a merge sort in memory; streaming: agg_spill.c's
 * external sorter, which fails with 292 or spills like $sort), and runs of
 * equal k are partitions. A partition is held in memory (streaming: past
 * part_bytes without allowDiskUse it fails with 5643011, as mongod does)
 * and every output field is computed for all of its documents before the
 * documents are rewritten (output paths set as $addFields would).
 *
 * Windows. For document i of a partition of n, a window is an index
 * interval [lo_i, hi_i] (empty when lo_i > hi_i). Document bounds are
 * offsets from i; range bounds are thresholds on the (single, ascending)
 * sortBy value ('current' is the document itself, 0 takes its ties), found
 * with two pointers since the values ascend. Both lo_i and hi_i never
 * decrease with i, which is what makes sliding evaluation work:
 *   - removable functions ($sum $avg $count $min $max) add the documents
 *     entering the window and remove those leaving it: sums keep exact
 *     integer (128-bit) and compensated double parts plus per-type counts
 *     (the result type follows the values in the window), $min/$max a
 *     monotonic deque, so each partition costs O(n);
 *   - $stdDev* and $covariance* extend a Welford state while lo_i stays put
 *     and recompute otherwise; the ordered functions ($minN $maxN $topN
 *     $bottomN $top $bottom $addToSet $median $percentile) keep their window
 *     sorted, inserting in place while the window only grows, so
 *     [unbounded, current] never sorts per document; $push $firstN $lastN
 *     read the window; an unchanged window reuses its result; $integral
 *     sums trapezoids computed once each, extending the sum while lo_i stays;
 *   - positional functions ($first $last $derivative $shift $rank
 *     $denseRank $documentNumber $locf $linearFill $expMovingAvg) read the
 *     documents they need directly, with mongod's arithmetic order where
 *     results are compared exactly (dates in milliseconds scaled last;
 *     $linearFill's y1 + (x - x1) * ((y2 - y1) / (x2 - x1))).
 * Arithmetic follows mongod's types: $derivative and $integral compute
 * through the $subtract/$add/$multiply/$divide expressions (so a decimal
 * input gives a decimal, and $subtract's errors surface), $expMovingAvg in
 * Decimal128 (a decimal result once a decimal input has been seen).
 * The default window is the whole partition (MongoDB's default for every
 * function that takes one); rank functions and $expMovingAvg/$locf use
 * [unbounded, current] by construction. A missing value leaves its output
 * field unset ($first/$last), or gives the default ($shift: null).
 *
 * Errors carry MongoDB's codes, checked in mongod's order (outputs first,
 * then a constant array partitionBy): 9 FailedToParse for most shapes,
 * 40414/40415/14 for the stage's own fields, 15974/15975 sortBy values,
 * 15998/16410 output paths, 6307900 conflicting output paths, 5339900
 * bounds out of order, 5339901 document bounds without sortBy, 5339902
 * range bounds without a single sortBy field, 8947401 descending sortBy
 * with range bounds, 5371601/5371602/5371603 rank functions, 605001
 * $linearFill's sortBy, 5490710 a unit above 'week', 57879xx/57880xx the N
 * functions, 7429703/7436100/77503xx $percentile/$median. Run-time:
 * 5429413/5429414/5429513 range sortBy types, 5624900-5624903 $derivative,
 * 5423900-5423902 $integral, 6050106 and 14 $linearFill, 14 an array
 * partition key, 292 / 5643011 memory without allowDiskUse, 5414201 a
 * function holding more of its window's values than the limit (allowDiskUse
 * or not; the partition itself stays in memory rather than spilling), 10334
 * an output document past 16 MB.
 */
#include "query/agg_window.h"
#include "doc/dec128.h"
#include "doc/tz.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fmt.h"
#include "common/limits.h"
#include "doc/path.h"
#include "doc/check.h"
#include "doc/expr.h"
#include "doc/sort.h"
#include "doc/sum.h"
#include "doc/value.h"
#include "query/agg_spill.h"
#include "query/exec.h"

enum wf_kind {
    WF_SUM, WF_AVG, WF_COUNT, WF_MIN, WF_MAX, /* removable */
    WF_PUSH, WF_ADDTOSET, WF_STDDEVPOP, WF_STDDEVSAMP, WF_COVPOP, WF_COVSAMP, WF_INTEGRAL,
    WF_FIRSTN, WF_LASTN, WF_MINN, WF_MAXN, WF_TOPN, WF_BOTTOMN, WF_TOP, WF_BOTTOM, WF_MEDIAN,
    WF_PERCENTILE, /* accumulating */
    WF_FIRST, WF_LAST, WF_DERIVATIVE, WF_SHIFT, WF_RANK, WF_DENSERANK, WF_DOCNUM, WF_LOCF,
    WF_LINEARFILL, WF_EMA /* positional */
};

static const struct {
    const char *name;
    int kind;
} wf_names[] = {
    {"$sum", WF_SUM}, {"$avg", WF_AVG}, {"$count", WF_COUNT}, {"$min", WF_MIN}, {"$max", WF_MAX},
    {"$push", WF_PUSH}, {"$addToSet", WF_ADDTOSET}, {"$stdDevPop", WF_STDDEVPOP},
    {"$stdDevSamp", WF_STDDEVSAMP}, {"$covariancePop", WF_COVPOP}, {"$covarianceSamp", WF_COVSAMP},
    {"$integral", WF_INTEGRAL}, {"$firstN", WF_FIRSTN}, {"$lastN", WF_LASTN}, {"$minN", WF_MINN},
    {"$maxN", WF_MAXN}, {"$topN", WF_TOPN}, {"$bottomN", WF_BOTTOMN}, {"$top", WF_TOP},
    {"$bottom", WF_BOTTOM}, {"$median", WF_MEDIAN}, {"$percentile", WF_PERCENTILE}, {"$first", WF_FIRST},
    {"$last", WF_LAST}, {"$derivative", WF_DERIVATIVE}, {"$shift", WF_SHIFT}, {"$rank", WF_RANK},
    {"$denseRank", WF_DENSERANK}, {"$documentNumber", WF_DOCNUM}, {"$locf", WF_LOCF},
    {"$linearFill", WF_LINEARFILL}, {"$expMovingAvg", WF_EMA},
};

enum { B_UNBOUNDED, B_CURRENT, B_NUM };
enum { U_NONE = -1, U_YEAR, U_QUARTER, U_MONTH, U_WEEK, U_DAY, U_HOUR, U_MINUTE, U_SECOND, U_MS };
static const char *unit_names[] = {"year", "quarter", "month", "week", "day", "hour", "minute", "second",
                                   "millisecond"};
static const int64_t unit_ms[] = {0, 0, 0, 604800000LL, 86400000LL, 3600000LL, 60000LL, 1000LL, 1LL};

typedef struct bound {
    int kind;
    int64_t n; /* documents offset; range with unit: count of units */
    double d;  /* range offset */
} bound_t;

typedef struct wfield {
    char *path;
    int kind;
    const char *name;
    mf_expr_t *input;     /* the function's argument (or $shift output, N functions' input/output) */
    bool range;           /* range window (else documents) */
    bound_t lo, hi;
    int unit;             /* range window unit, U_NONE */
    int fn_unit;          /* $derivative / $integral unit, U_NONE */
    int64_t by;           /* $shift */
    bson_value_t dflt;    /* $shift default (EOD: null) */
    bson_decimal128_t alpha; /* $expMovingAvg: as mongod keeps it, a Decimal128 */
    /*
     * $derivative / $integral: {$subtract|$add|$multiply|$divide: ["$a", "$b"]},
     * through which they compute (see binop) so that their results have
     * mongod's types and values: decimal once an operand is, integer
     * differences of integers and dates, and $subtract's own errors.
     */
    mf_expr_t *op_sub, *op_add, *op_mul, *op_div;
    int64_t n;            /* N functions */
    mf_sort_t *inner;     /* $topN ... sortBy */
    double *ps;           /* $percentile p values, $median: {0.5} */
    size_t nps;
} wfield_t;

struct mf_window {
    mf_expr_t *partition;  /* NULL: one partition */
    mf_sort_t *sort;       /* NULL without sortBy */
    size_t nsort;
    mf_expr_t *sort_expr;  /* "$<first sortBy field>" */
    bool sort_desc;
    wfield_t *f;
    size_t nf;
};

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */
/* ------------------------------------------------------------------------ */

static void
wfield_free(wfield_t *f)
{
    bson_free(f->path);
    mf_expr_free(f->input);
    mf_value_free(&f->dflt);
    mf_sort_free(f->inner);
    bson_free(f->ps);
    mf_expr_free(f->op_sub);
    mf_expr_free(f->op_add);
    mf_expr_free(f->op_mul);
    mf_expr_free(f->op_div);
}

void
mf_window_free(mf_window_t *w)
{
    if (w == NULL)
        return;
    mf_expr_free(w->partition);
    mf_sort_free(w->sort);
    mf_expr_free(w->sort_expr);
    for (size_t i = 0; i < w->nf; i++)
        wfield_free(&w->f[i]);
    bson_free(w->f);
    bson_free(w);
}

/* keep: copies the iterator's current value into slot (bson_iter_value's storage is reused by the next step). */
static const bson_value_t *
keep(bson_value_t *slot, const bson_iter_t *it)
{
    *slot = *bson_iter_value((bson_iter_t *)it);
    return slot;
}

/*
 * pick3: walks the document v keeping the values of its fields names[0..2]
 * (the last of a repeated one) in slots, got[i] pointing at slots[i] or NULL
 * when v has no such field; returns how many fields v has in all.
 */
static int
pick3(const bson_value_t *v, const char *const names[3], bson_value_t slots[3], const bson_value_t *got[3])
{
    bson_iter_t it;
    int nfields = 0;

    got[0] = got[1] = got[2] = NULL;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        nfields++;
        for (int i = 0; i < 3; i++) {
            if (strcmp(k, names[i]) == 0) {
                got[i] = keep(&slots[i], &it);
                break;
            }
        }
    }
    return nfields;
}

/* const_number: evaluates a constant expression in v (a literal number usually); false if not constant. */
static bool
const_value(const bson_value_t *v, bson_value_t *out)
{
    mf_error_t e;
    mf_expr_t *x = mf_expr_parse(v, &e);
    bool ok = false;
    out->value_type = BSON_TYPE_EOD;
    if (x != NULL && mf_expr_is_constant(x) && mf_expr_eval(x, NULL, out, &e) == 0)
        ok = true;
    mf_expr_free(x);
    return ok;
}

static int
parse_unit(const bson_value_t *v, int *unit, mf_error_t *err)
{
    if (v->value_type != BSON_TYPE_UTF8)
        return mf_err_set(err, MF_E_FailedToParse, "'unit' must be a string");
    for (int i = 0; i < (int)(sizeof unit_names / sizeof *unit_names); i++) {
        if (strcmp(v->value.v_utf8.str, unit_names[i]) == 0) {
            *unit = i;
            return 0;
        }
    }
    return mf_err_set(err, MF_E_FailedToParse, "unknown time unit value: %s", v->value.v_utf8.str);
}

static int
parse_bound(const bson_value_t *v, bool docs, bool with_unit, bound_t *b, mf_error_t *err)
{
    bson_value_t c;

    memset(b, 0, sizeof *b);
    if (v->value_type == BSON_TYPE_UTF8) {
        if (strcmp(v->value.v_utf8.str, "unbounded") == 0)
            b->kind = B_UNBOUNDED;
        else if (strcmp(v->value.v_utf8.str, "current") == 0)
            b->kind = B_CURRENT;
        else
            return mf_err_set(err, MF_E_FailedToParse, "Window bounds must be 'unbounded', 'current', or a number.");
        return 0;
    }
    if (!const_value(v, &c))
        return mf_err_set(err, MF_E_FailedToParse, "Window bounds expression must be a constant.");
    b->kind = B_NUM;
    int64_t n;
    if (docs || with_unit) {
        bool integral = mf_value_is_number(&c) && mf_value_as_int64(&c, &n) && n >= INT32_MIN && n <= INT32_MAX;
        mf_value_free(&c);
        if (!integral)
            return mf_err_set(err, MF_E_FailedToParse, docs ? "Numeric document-based bounds must be an integer"
                                                            : "With 'unit', range-based bounds must be an integer");
        b->n = n;
        b->d = (double)n;
        return 0;
    }
    if (!mf_value_is_number(&c)) {
        mf_value_free(&c);
        return mf_err_set(err, MF_E_FailedToParse, "Range-based bounds expression must be a number");
    }
    b->d = mf_value_as_double(&c);
    mf_value_free(&c);
    return 0;
}

/* parse_window: the 'window' argument into f (window_bounds.cpp's WindowBounds::parse). */
static int
parse_window(const mf_window_t *w, const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    static const char *const names[] = {"documents", "range", "unit"};
    bson_iter_t ai;
    const bson_value_t *got[3];
    bson_value_t slots[3];

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "'window' field must be an object");
    int nfields = pick3(v, names, slots, got);
    const bson_value_t *docs = got[0], *range = got[1], *unit = got[2];
    if (docs && range)
        return mf_err_set(err, MF_E_FailedToParse, "Window bounds can specify either 'documents' or 'unit', not both.");
    if (!range && unit)
        return mf_err_set(err, MF_E_FailedToParse, "Window bounds can only specify 'unit' with range-based bounds.");
    if (!range && !docs) {
        if (nfields != 0)
            return mf_err_set(err, MF_E_FailedToParse, "'window' field can only contain 'documents' as the only "
                                                       "argument or 'range' with an optional 'unit' field");
        return 0;
    }
    const bson_value_t *arr = docs ? docs : range;
    const bson_value_t *lo = NULL, *hi = NULL;
    bson_value_t slot_lo, slot_hi;
    int na = 0;
    if (arr->value_type == BSON_TYPE_ARRAY) {
        bson_iter_init_from_data(&ai, arr->value.v_doc.data, arr->value.v_doc.data_len);
        while (bson_iter_next(&ai)) {
            if (na == 0)
                lo = keep(&slot_lo, &ai);
            else if (na == 1)
                hi = keep(&slot_hi, &ai);
            na++;
        }
    }
    if (na != 2)
        return mf_err_set(err, MF_E_FailedToParse, "Window bounds must be a 2-element array");
    if (docs && nfields != 1)
        return mf_err_set(err, MF_E_FailedToParse, "'window' field that specifies documents cannot have other fields");
    if (range && unit && nfields != 2)
        return mf_err_set(err, MF_E_FailedToParse,
                          "'window' field that specifies unit cannot have other fields besides 'range'");
    if (range && !unit && nfields != 1)
        return mf_err_set(err, MF_E_FailedToParse,
                          "'window' field that specifies range cannot have other fields besides 'unit'");
    f->unit = U_NONE;
    if (unit && parse_unit(unit, &f->unit, err) < 0)
        return -1;
    if (parse_bound(lo, docs != NULL, unit != NULL, &f->lo, err) < 0 ||
        parse_bound(hi, docs != NULL, unit != NULL, &f->hi, err) < 0)
        return -1;
    /* Bounds in order, 'current' counting as 0. */
    if (f->lo.kind != B_UNBOUNDED && f->hi.kind != B_UNBOUNDED) {
        double l = f->lo.kind == B_CURRENT ? 0 : f->lo.d, h = f->hi.kind == B_CURRENT ? 0 : f->hi.d;
        if (l > h)
            return mf_err_set(err, MF_E_Location5339900, "Lower bound must not exceed upper bound: [%g, %g]", l, h);
    }
    f->range = range != NULL;
    if (docs) {
        bool unbounded = f->lo.kind == B_UNBOUNDED && f->hi.kind == B_UNBOUNDED;
        if (!unbounded && w->sort == NULL)
            return mf_err_set(err, MF_E_Location5339901, "Document-based bounds require a sortBy");
        return 0;
    }
    if (w->sort == NULL || w->nsort != 1)
        return mf_err_set(err, MF_E_Location5339902, "Range-based bounds require sortBy a single field");
    if (w->sort_desc)
        return mf_err_set(err, MF_E_Location8947401, "Range-based bounds require an ascending sortBy");
    return 0;
}

/* parse_n_args: {input|output, n, sortBy} of the N functions. */
static int
parse_n_args(const mf_window_t *w, const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *in = NULL, *n = NULL, *sort = NULL;
    bson_value_t slot_in, slot_n, slot_sort;
    bool sorted = f->kind == WF_TOPN || f->kind == WF_BOTTOMN || f->kind == WF_TOP || f->kind == WF_BOTTOM;
    bool single = f->kind == WF_TOP || f->kind == WF_BOTTOM;
    const char *in_name = sorted ? "output" : "input";
    (void)w;

    /* The codes differ by family, as mongod's parsers do (n_accumulators.js). */
    if (v->value_type != BSON_TYPE_DOCUMENT) {
        int code = sorted ? MF_E_Location5788001
                          : (f->kind == WF_MINN || f->kind == WF_MAXN) ? MF_E_Location5787900 : MF_E_Location5787801;
        return mf_err_set(err, code, "specification must be an object; found %s", mf_type_name(v->value_type));
    }
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, in_name) == 0)
            in = keep(&slot_in, &it);
        else if (strcmp(k, "n") == 0 && !single)
            n = keep(&slot_n, &it);
        else if (sorted && strcmp(k, "sortBy") == 0)
            sort = keep(&slot_sort, &it);
        else if (sorted)
            return mf_err_set(err, MF_E_Location5788002, "Unknown argument to %s '%s'", f->name, k);
        else
            return mf_err_set(err, MF_E_Location5787901, "Unknown argument for 'n' operator: %s", k);
    }
    if (sorted) {
        if (!single && n == NULL)
            return mf_err_set(err, MF_E_Location5788003, "Missing value for 'n'");
        if (in == NULL)
            return mf_err_set(err, MF_E_Location5788004, "Missing value for 'output'");
        if (sort == NULL)
            return mf_err_set(err, MF_E_Location5788005, "Missing value for 'sortBy'");
        if (sort->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location5788005, "expected 'sortBy' to be an object, but found %s",
                              mf_type_name(sort->value_type));
        bson_t spec;
        bson_init_static(&spec, sort->value.v_doc.data, sort->value.v_doc.data_len);
        f->inner = mf_sort_new(&spec, err);
        if (f->inner == NULL)
            return -1;
    } else {
        if (in == NULL)
            return mf_err_set(err, MF_E_Location5787907, "Missing value for 'input'");
        if (n == NULL)
            return mf_err_set(err, MF_E_Location5787906, "Missing value for 'n'");
    }
    f->input = mf_expr_parse(in, err);
    if (f->input == NULL)
        return -1;
    if (single) {
        f->n = 1;
        return 0;
    }
    bson_value_t c;
    if (!const_value(n, &c)) {
        mf_value_free(&c);
        return mf_err_set(err, MF_E_Location5787902, "Value for 'n' must be of integral type, but found a non-constant");
    }
    int64_t nv;
    int rc = mf_value_check_n(&c, &nv, err);
    mf_value_free(&c);
    if (rc < 0)
        return -1;
    f->n = nv;
    return 0;
}

/*
 * parse_quantile: {$median|$percentile: {input, p, method}}, checked in the
 * order of mongod's IDL parser and validators: 7429703 / 7436100 not an
 * object, 40415 unknown field, 14 method not a string, 40414 missing field,
 * 7750300-7750303 bad 'p', 2 a method other than 'approximate' (8.0 has no other).
 */
static int
parse_quantile(const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *in = NULL, *p = NULL, *method = NULL;
    bson_value_t slot_in, slot_p, slot_method;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, f->kind == WF_MEDIAN ? MF_E_Location7436100 : MF_E_Location7429703,
                          "specification must be an object; found %s", mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "input") == 0) {
            in = keep(&slot_in, &it);
        } else if (strcmp(k, "p") == 0 && f->kind == WF_PERCENTILE) {
            p = keep(&slot_p, &it);
        } else if (strcmp(k, "method") == 0) {
            method = keep(&slot_method, &it);
            if (method->value_type != BSON_TYPE_UTF8)
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '%s.method' is the wrong type '%s', expected type 'string'", f->name,
                                  mf_type_name(method->value_type));
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", f->name, k);
        }
    }
    if (in == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.input' is missing but a required field", f->name);
    if (f->kind == WF_PERCENTILE && p == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '$percentile.p' is missing but a required field");
    if (method == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.method' is missing but a required field", f->name);
    if (f->kind == WF_MEDIAN) {
        f->ps = bson_malloc(sizeof *f->ps);
        f->ps[0] = 0.5;
        f->nps = 1;
    } else {
        if (mf_expr_percentile_p(p, &f->ps, &f->nps, err) < 0)
            return -1;
    }
    if (strcmp(method->value.v_utf8.str, "approximate") != 0)
        return mf_err_set(err, MF_E_BadValue, "Currently only 'approximate' can be used as a percentile 'method'.");
    f->input = mf_expr_parse(in, err);
    return f->input ? 0 : -1;
}

/* parse_binop: *out = {<op>: ["$a", "$b"]}. Returns 0, or -1 with err set. */
static int
parse_binop(const char *op, mf_expr_t **out, mf_error_t *err)
{
    bson_t doc = BSON_INITIALIZER, args;
    bson_value_t v;

    bson_append_array_begin(&doc, op, -1, &args);
    BSON_APPEND_UTF8(&args, "0", "$a");
    BSON_APPEND_UTF8(&args, "1", "$b");
    bson_append_array_end(&doc, &args);
    v.value_type = BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = (uint8_t *)bson_get_data(&doc);
    v.value.v_doc.data_len = doc.len;
    *out = mf_expr_parse(&v, err);
    bson_destroy(&doc);
    return *out ? 0 : -1;
}

/* parse_binops: the four operators $derivative and $integral compute with (wfield_t.op_sub ...). */
static int
parse_binops(wfield_t *f, mf_error_t *err)
{
    if (parse_binop("$subtract", &f->op_sub, err) < 0 || parse_binop("$add", &f->op_add, err) < 0 ||
        parse_binop("$multiply", &f->op_mul, err) < 0 || parse_binop("$divide", &f->op_div, err) < 0)
        return -1;
    return 0;
}

/*
 * binop: *out = op(a, b) for an operator of parse_binops, evaluated over
 * {a, b} (a missing operand left out, so it stays missing). This is how
 * mongod's $derivative and $integral compute (evaluateSubtract, evaluateAdd,
 * evaluateMultiply, evaluateDivide), so reusing the expressions gives their
 * numeric promotion and their errors word for word. *out is owned by the
 * caller. Returns 0, or -1 with err set.
 */
static int
binop(const mf_expr_t *op, const bson_value_t *a, const bson_value_t *b, bson_value_t *out, mf_error_t *err)
{
    bson_t doc = BSON_INITIALIZER;
    int rc;

    if (a->value_type != BSON_TYPE_EOD)
        BSON_APPEND_VALUE(&doc, "a", a);
    if (b->value_type != BSON_TYPE_EOD)
        BSON_APPEND_VALUE(&doc, "b", b);
    rc = mf_expr_eval(op, &doc, out, err);
    bson_destroy(&doc);
    return rc;
}

/* parse_with_unit: {$derivative|$integral: {input, unit}}. */
static int
parse_with_unit(const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *in = NULL;
    bson_value_t slot_in;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "%s expects an object, but got a %s", f->name,
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "input") == 0) {
            in = keep(&slot_in, &it);
        } else if (strcmp(k, "unit") == 0) {
            if (parse_unit(bson_iter_value(&it), &f->fn_unit, err) < 0)
                return -1;
            if (f->fn_unit < U_WEEK)
                return mf_err_set(err, MF_E_Location5490710, "unit must be 'week' or smaller");
        } else {
            return mf_err_set(err, MF_E_FailedToParse, "%s got unexpected argument: %s", f->name, k);
        }
    }
    if (in == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "%s requires an 'input' expression", f->name);
    f->input = mf_expr_parse(in, err);
    if (f->input == NULL)
        return -1;
    return parse_binops(f, err);
}

static int
parse_shift(const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    bson_iter_t it;
    bool have_by = false;
    const bson_value_t *out = NULL;
    bson_value_t slot_out;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "Argument to $shift must be an object");
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *a = bson_iter_value(&it);
        if (strcmp(k, "output") == 0) {
            slot_out = *a;
            out = &slot_out;
        } else if (strcmp(k, "default") == 0) {
            mf_value_free(&f->dflt);
            if (!const_value(a, &f->dflt))
                return mf_err_set(err, MF_E_FailedToParse, "'$shift:default' expression must yield a constant value.");
        } else if (strcmp(k, "by") == 0) {
            int64_t n;
            if (!mf_value_is_number(a) || !mf_value_as_int64(a, &n) || n < INT32_MIN || n > INT32_MAX)
                return mf_err_set(err, MF_E_FailedToParse, "'$shift:by' field must be an integer, but found a %s",
                                  mf_type_name(a->value_type));
            f->by = n;
            have_by = true;
        } else {
            return mf_err_set(err, MF_E_FailedToParse, "Unknown argument in $shift");
        }
    }
    if (out == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "$shift requires an 'output' expression.");
    if (!have_by)
        return mf_err_set(err, MF_E_FailedToParse, "$shift requires 'by' as an integer value.");
    f->input = mf_expr_parse(out, err);
    return f->input ? 0 : -1;
}

static int
parse_ema(const mf_window_t *w, const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    static const char *const names[] = {"input", "N", "alpha"};
    const bson_value_t *got[3];
    bson_value_t slots[3];

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "$expMovingAvg must have exactly one argument that is an object");
    int nf = pick3(v, names, slots, got);
    const bson_value_t *in = got[0], *n = got[1], *alpha = got[2];
    if (nf != 2 || in == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "$expMovingAvg sub object must have exactly two fields: An 'input' "
                                                   "field, and either an 'N' field or an 'alpha' field");
    if (w->sort == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "$expMovingAvg requires an explicit 'sortBy'");
    if (n != NULL) {
        int64_t nv;
        if (!mf_value_is_number(n))
            return mf_err_set(err, MF_E_FailedToParse, "'N' field must be an integer, but found type %s",
                              mf_type_name(n->value_type));
        if (!mf_value_as_int64(n, &nv))
            return mf_err_set(err, MF_E_FailedToParse, "'N' field must be an integer, but found  %g. To use a "
                                                       "non-integer, use the 'alpha' argument instead",
                              mf_value_as_double(n));
        if (nv <= 0)
            return mf_err_set(err, MF_E_FailedToParse, "'N' must be greater than zero. Got %lld", (long long)nv);
        /* mongod: Decimal128(2).divide(Decimal128(N).add(Decimal128(1))). */
        bson_decimal128_t two, one, np1;
        mf_dec_from_int64(2, &two);
        mf_dec_from_int64(1, &one);
        mf_dec_from_int64(nv, &np1);
        mf_dec_arith(MF_DEC_ADD, &np1, &one, &np1);
        mf_dec_arith(MF_DEC_DIV, &two, &np1, &f->alpha);
    } else if (alpha != NULL) {
        if (!mf_value_is_number(alpha))
            return mf_err_set(err, MF_E_FailedToParse, "'alpha' must be a number");
        /* mongod: BSONElement::numberDecimal (a double rounded to 15 digits), compared as a decimal. */
        bson_decimal128_t zero, one;
        mf_dec_from_int64(0, &zero);
        mf_dec_from_int64(1, &one);
        (void)mf_dec_from_value(alpha, 15, &f->alpha);
        if (!(mf_dec_cmp(&f->alpha, &zero) > 0 && mf_dec_cmp(&f->alpha, &one) < 0))
            return mf_err_set(err, MF_E_FailedToParse, "'alpha' must be between 0 and 1 (exclusive), found %g",
                              mf_value_as_double(alpha));
    } else {
        return mf_err_set(err, MF_E_FailedToParse,
                          "Got unrecognized field in $expMovingAvg$expMovingAvg sub object must have exactly two "
                          "fields: An 'input' field, and either an 'N' field or an 'alpha' field");
    }
    f->input = mf_expr_parse(in, err);
    return f->input ? 0 : -1;
}

static int
lookup_kind(const char *name)
{
    for (size_t i = 0; i < sizeof wf_names / sizeof *wf_names; i++)
        if (strcmp(wf_names[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* parse_function: one output field's {<function>: <args>, window: {...}}. */
static int
parse_function(const mf_window_t *w, const bson_value_t *v, wfield_t *f, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *arg = NULL, *window = NULL;
    bson_value_t slot_arg, slot_window;
    const char *first_key = NULL;
    int nfields = 0;

    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (nfields++ == 0)
            first_key = k;
        if (k[0] == '$' && arg == NULL) {
            int idx = lookup_kind(k);
            if (idx < 0)
                return mf_err_set(err, MF_E_FailedToParse, "Unrecognized window function, %s", k);
            f->kind = wf_names[idx].kind;
            f->name = wf_names[idx].name;
            arg = keep(&slot_arg, &it);
        }
    }
    if (arg == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "Expected a $-prefixed window function%s%s",
                          first_key ? ", " : "", first_key ? first_key : "");
    /* The other arguments: 'window', where allowed. */
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, f->name) == 0)
            continue;
        if (f->kind == WF_RANK || f->kind == WF_DENSERANK || f->kind == WF_DOCNUM)
            return mf_err_set(err, MF_E_Location5371601, "Rank style window functions take no other arguments");
        if (strcmp(k, "window") == 0) {
            if (window != NULL)
                return mf_err_set(err, MF_E_FailedToParse, "saw multiple 'window' fields in '%s' expression", f->name);
            window = keep(&slot_window, &it);
            continue;
        }
        if (k[0] == '$' && lookup_kind(k) >= 0)
            return mf_err_set(err, MF_E_FailedToParse, "Cannot specify two functions in window function spec");
        if (f->kind == WF_FIRST || f->kind == WF_LAST || f->kind == WF_DERIVATIVE || f->kind == WF_INTEGRAL ||
            (f->kind >= WF_FIRSTN && f->kind <= WF_BOTTOM))
            return mf_err_set(err, MF_E_FailedToParse, "%s got unexpected argument: %s", f->name, k);
        return mf_err_set(err, MF_E_FailedToParse, "Window function found an unknown argument: %s", k);
    }
    f->unit = U_NONE;
    f->fn_unit = U_NONE;
    f->lo.kind = f->hi.kind = B_UNBOUNDED;
    f->dflt.value_type = BSON_TYPE_EOD;

    switch (f->kind) {
    case WF_RANK:
    case WF_DENSERANK:
    case WF_DOCNUM:
        if (!mf_value_is_empty_doc(arg))
            return mf_err_set(err, MF_E_Location5371603, "%s must be specified with '{}' as the value", f->name);
        if (w->sort == NULL || w->nsort != 1)
            return mf_err_set(err, MF_E_Location5371602,
                              "%s must be specified with a top level sortBy expression with exactly one element",
                              f->name);
        return 0;
    case WF_SHIFT:
        if (window != NULL)
            return mf_err_set(err, MF_E_FailedToParse, "$shift does not accept a 'window' field");
        if (parse_shift(arg, f, err) < 0)
            return -1;
        if (w->sort == NULL)
            return mf_err_set(err, MF_E_FailedToParse, "'$shift' requires a sortBy");
        return 0;
    case WF_LOCF:
    case WF_LINEARFILL:
        if (window != NULL)
            return mf_err_set(err, MF_E_FailedToParse, "'window' field is not allowed in %s", f->name);
        if (f->kind == WF_LINEARFILL && (w->sort == NULL || w->nsort != 1))
            return mf_err_set(err, MF_E_Location605001,
                              "$linearFill must be specified with a top level sortBy expression with exactly one "
                              "element");
        f->input = mf_expr_parse(arg, err);
        return f->input ? 0 : -1;
    case WF_EMA:
        if (window != NULL)
            return mf_err_set(err, MF_E_FailedToParse,
                              "$expMovingAvg must have exactly one argument that is an object");
        return parse_ema(w, arg, f, err);
    case WF_DERIVATIVE:
    case WF_INTEGRAL:
        if (w->sort == NULL)
            return mf_err_set(err, MF_E_FailedToParse, "%s requires a sortBy", f->name);
        if (w->nsort != 1)
            return mf_err_set(err, MF_E_FailedToParse, "%s requires a non-compound sortBy", f->name);
        if (window != NULL && parse_window(w, window, f, err) < 0)
            return -1;
        if (parse_with_unit(arg, f, err) < 0)
            return -1;
        if (f->kind == WF_DERIVATIVE && window == NULL)
            return mf_err_set(err, MF_E_FailedToParse, "$derivative requires explicit window bounds");
        return 0;
    case WF_FIRSTN: case WF_LASTN: case WF_MINN: case WF_MAXN:
    case WF_TOPN: case WF_BOTTOMN: case WF_TOP: case WF_BOTTOM:
        if (parse_n_args(w, arg, f, err) < 0)
            return -1;
        return window ? parse_window(w, window, f, err) : 0;
    case WF_MEDIAN:
    case WF_PERCENTILE:
        if (parse_quantile(arg, f, err) < 0)
            return -1;
        return window ? parse_window(w, window, f, err) : 0;
    case WF_COUNT:
        if (!mf_value_is_empty_doc(arg))
            return mf_err_set(err, MF_E_FailedToParse, "$count only accepts an empty object as input");
        return window ? parse_window(w, window, f, err) : 0;
    default:
        f->input = mf_expr_parse(arg, err);
        if (f->input == NULL)
            return -1;
        return window ? parse_window(w, window, f, err) : 0;
    }
}

/* paths_conflict: one output path equal to, or a prefix of, the other. */
static bool
paths_conflict(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), m = la < lb ? la : lb;
    if (strncmp(a, b, m) != 0)
        return false;
    return la == lb || (la < lb ? b[la] == '.' : a[lb] == '.');
}

mf_window_t *
mf_window_new(const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *part = NULL, *sort = NULL, *output = NULL;
    bson_value_t slot_part, slot_sort, slot_output;
    mf_window_t *w;

    if (v->value_type != BSON_TYPE_DOCUMENT) {
        mf_err_set(err, MF_E_FailedToParse, "the $setWindowFields stage specification must be an object, found %s",
                   mf_type_name(v->value_type));
        return NULL;
    }
    w = bson_malloc0(sizeof *w);
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "partitionBy") == 0) {
            part = keep(&slot_part, &it);
        } else if (strcmp(k, "sortBy") == 0) {
            sort = keep(&slot_sort, &it);
            if (sort->value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_TypeMismatch,
                           "BSON field '$setWindowFields.sortBy' is the wrong type '%s', expected type 'object'",
                           mf_type_name(sort->value_type));
                goto err_free;
            }
        } else if (strcmp(k, "output") == 0) {
            output = keep(&slot_output, &it);
            if (output->value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_TypeMismatch,
                           "BSON field '$setWindowFields.output' is the wrong type '%s', expected type 'object'",
                           mf_type_name(output->value_type));
                goto err_free;
            }
        } else {
            mf_err_set(err, MF_E_Location40415, "BSON field '$setWindowFields.%s' is an unknown field.", k);
            goto err_free;
        }
    }
    if (output == NULL) {
        mf_err_set(err, MF_E_Location40414, "BSON field '$setWindowFields.output' is missing but a required field");
        goto err_free;
    }
    if (part != NULL) {
        w->partition = mf_expr_parse(part, err);
        if (w->partition == NULL)
            goto err_free;
    }
    if (sort != NULL) {
        bson_t spec;
        bson_iter_t si;
        bson_init_static(&spec, sort->value.v_doc.data, sort->value.v_doc.data_len);
        /* SortPattern's codes (the shared sort parser answers 2 for both). */
        if (bson_iter_init(&si, &spec)) {
            while (bson_iter_next(&si)) {
                const bson_value_t *sv = bson_iter_value(&si);
                int64_t d;
                if (sv->value_type == BSON_TYPE_DOCUMENT)
                    continue;
                if (!mf_value_is_number(sv)) {
                    mf_err_set(err, MF_E_Location15974, "Illegal key in $sort specification: %s", bson_iter_key(&si));
                    goto err_free;
                }
                if (!mf_value_as_int64(sv, &d) || (d != 1 && d != -1)) {
                    mf_err_set(err, MF_E_Location15975,
                               "$sort key ordering must be 1 (for ascending) or -1 (for descending)");
                    goto err_free;
                }
            }
        }
        w->sort = mf_sort_new(&spec, err);
        if (w->sort == NULL)
            goto err_free;
        if (bson_iter_init(&si, &spec)) {
            while (bson_iter_next(&si)) {
                if (w->nsort++ == 0) {
                    w->sort_expr = mf_expr_parse_path(bson_iter_key(&si), err);
                    w->sort_desc = mf_value_as_double(bson_iter_value(&si)) < 0;
                    if (w->sort_expr == NULL)
                        goto err_free;
                }
            }
        }
        /* An empty sortBy still counts as present (mongod's optional<SortPattern> is engaged). */
    }
    bson_iter_init_from_data(&it, output->value.v_doc.data, output->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '\0') {
            mf_err_set(err, MF_E_Location40352, "FieldPath cannot be constructed with empty string");
            goto err_free;
        }
        if (mf_path_components(k) > MF_MAX_FIELD_PATH_COMPONENTS) {
            /* mongod's FieldPath limit (BSONDepth::getMaxAllowableDepth); the output is set one level a component. */
            mf_err_set(err, MF_E_Overflow, "FieldPath is too long");
            goto err_free;
        }
        /* FieldPath rules for each component of the output path. */
        for (const char *c = k; c != NULL; c = strchr(c, '.') ? strchr(c, '.') + 1 : NULL) {
            if (*c == '.' || *c == '\0') {
                mf_err_set(err, MF_E_Location15998, "FieldPath field names may not be empty strings.");
                goto err_free;
            }
            if (*c == '$') {
                mf_err_set(err, MF_E_Location16410,
                           "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
                goto err_free;
            }
        }
        for (size_t i = 0; i < w->nf; i++) {
            if (paths_conflict(w->f[i].path, k)) {
                mf_err_set(err, MF_E_Location6307900, "$setWindowFields 'output' specification contains two conflicting paths");
                goto err_free;
            }
        }
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mf_err_set(err, MF_E_FailedToParse, "The field '%s' must be an object", k);
            goto err_free;
        }
        w->f = bson_realloc(w->f, (w->nf + 1) * sizeof *w->f);
        wfield_t *f = &w->f[w->nf++];
        memset(f, 0, sizeof *f);
        f->dflt.value_type = BSON_TYPE_EOD;
        f->path = bson_strdup(k);
        if (parse_function(w, bson_iter_value(&it), f, err) < 0)
            goto err_free;
    }
    /* A constant partition key is one partition; a constant array is refused after the outputs parsed, as mongod. */
    if (w->partition != NULL && mf_expr_is_constant(w->partition)) {
        bson_value_t c;
        if (mf_expr_eval(w->partition, NULL, &c, err) < 0)
            goto err_free;
        bool arr = c.value_type == BSON_TYPE_ARRAY;
        mf_value_free(&c);
        if (arr) {
            mf_err_set(err, MF_E_TypeMismatch, "An expression used to partition cannot evaluate to value of type array");
            goto err_free;
        }
        mf_expr_free(w->partition);
        w->partition = NULL;
    }
    return w;

err_free:
    mf_window_free(w);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Values and small helpers                                                 */
/* ------------------------------------------------------------------------ */

/* array_of: an owned array value holding vals[idx[0..n)] (missing ones skipped). */
static void
array_of(bson_value_t *out, const bson_value_t *vals, const size_t *idx, size_t n)
{
    mf_value_array_t arr;

    mf_value_array_init(&arr);
    for (size_t j = 0; j < n; j++)
        if (vals[idx[j]].value_type != BSON_TYPE_EOD)
            mf_value_array_push(&arr, &vals[idx[j]]);
    mf_value_array_finish(&arr, out);
}

/* ---- removable sum (for $sum, $avg, $count) ---- */

typedef struct csum {
    double s, c; /* Neumaier-compensated sum, standing in for mongod's double-double sums */
} csum_t;

static void
csum_add(csum_t *cs, double x)
{
    double t = cs->s + x;
    if (fabs(cs->s) >= fabs(x))
        cs->c += (cs->s - t) + x;
    else
        cs->c += (x - t) + cs->s;
    cs->s = t;
}

static double
csum_val(const csum_t *cs)
{
    return cs->s + cs->c;
}


typedef struct sumst {
    int64_t ndocs;              /* documents in the window ($count) */
    int64_t nnum, nlong, ndouble, ndec, nnan, npinf, nninf;
    __int128 isum;              /* exact sum of the integers */
    csum_t dsum;                /* compensated sum of the finite doubles */
    bson_value_t dec;           /* decimal part (mf_expr_num_add), EOD when none yet */
} sumst_t;

/* sum_update: adds (sign 1) or removes (sign -1) v. */
static void
sum_update(sumst_t *s, const bson_value_t *v, int sign)
{
    s->ndocs += sign;
    if (!mf_value_is_number(v))
        return;
    s->nnum += sign;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        s->isum += sign * (__int128)v->value.v_int32;
        break;
    case BSON_TYPE_INT64:
        s->nlong += sign;
        s->isum += sign * (__int128)v->value.v_int64;
        break;
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        s->ndouble += sign;
        if (isnan(d))
            s->nnan += sign;
        else if (isinf(d))
            *(d > 0 ? &s->npinf : &s->nninf) += sign;
        else
            csum_add(&s->dsum, sign * d);
        break;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_value_t t = *v;
        s->ndec += sign;
        if (sign < 0)
            t.value.v_decimal128.high ^= 0x8000000000000000ULL;
        mf_expr_num_add(&s->dec, &t);
        break;
    }
    default:
        break;
    }
}

static void
sum_reset(sumst_t *s)
{
    mf_value_free(&s->dec);
    memset(s, 0, sizeof *s);
    s->dec.value_type = BSON_TYPE_EOD;
}

/* sum_value: the window's $sum (avg: divided by the count of numbers, null when none). */
static void
sum_value(const sumst_t *s, bool avg, bool removable, bson_value_t *out)
{
    if (avg && s->nnum == 0) {
        mf_value_set_null(out);
        return;
    }
    double nonfinite = 0;
    bool has_nf = s->nnan > 0 || s->npinf > 0 || s->nninf > 0;
    if (s->nnan > 0 || (s->npinf > 0 && s->nninf > 0))
        nonfinite = NAN;
    else if (s->npinf > 0)
        nonfinite = INFINITY;
    else if (s->nninf > 0)
        nonfinite = -INFINITY;
    if (s->ndec > 0) {
        bson_value_t acc, t;
        mf_value_copy(&acc, &s->dec);
        if (acc.value_type == BSON_TYPE_EOD)
            mf_value_set_int(&acc, 0);
        if (s->isum >= INT64_MIN && s->isum <= INT64_MAX) {
            mf_value_set_int(&t, (int64_t)s->isum);
        } else {
            mf_value_set_double(&t, (double)s->isum);
        }
        mf_expr_num_add(&acc, &t);
        mf_value_set_double(&t, has_nf ? nonfinite : csum_val(&s->dsum));
        mf_expr_num_add(&acc, &t);
        if (avg) {
            bson_decimal128_t sum, n;
            (void)mf_dec_from_value(&acc, 34, &sum);
            mf_dec_from_int64(s->nnum, &n);
            mf_value_free(&acc);
            mf_value_set_type(out, BSON_TYPE_DECIMAL128);
            mf_dec_arith(MF_DEC_DIV, &sum, &n, &out->value.v_decimal128);
            return;
        }
        *out = acc;
        return;
    }
    if (s->ndouble > 0 || avg || s->isum > INT64_MAX || s->isum < INT64_MIN) {
        double d = has_nf ? nonfinite : (double)s->isum + csum_val(&s->dsum);
        if (avg)
            d /= (double)s->nnum;
        mf_value_set_double(out, d);
        return;
    }
    /* mongod's removable sum narrows an integral result to int when it fits; $group's keeps long. */
    if (s->nlong > 0 && !(removable && s->isum >= INT32_MIN && s->isum <= INT32_MAX)) {
        mf_value_set_int64(out, (int64_t)s->isum);
        return;
    }
    mf_value_set_int(out, (int64_t)s->isum);
}

/* ------------------------------------------------------------------------ */
/* Evaluating one partition                                                 */
/* ------------------------------------------------------------------------ */

typedef struct part {
    size_t n;
    bson_t *docs;     /* views of the wrapped documents' "d" */
    int64_t fn_limit; /* streaming: bytes a function may hold for one window (0: no limit) */
} part_t;

/* value_mem: what holding v costs, as mongod's Value::getApproximateSize (16 bytes plus out-of-line data). */
static int64_t
value_mem(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        return 16 + v->value.v_utf8.len;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return 16 + v->value.v_doc.data_len;
    case BSON_TYPE_BINARY:
        return 16 + v->value.v_binary.data_len;
    default:
        return 16;
    }
}

/*
 * check_fn_memory: the functions that hold their window's values ($push
 * $addToSet, the N functions, $median $percentile, and a sliding $min/$max)
 * fail with 5414201 when one window's values would pass the limit, as
 * mongod's do even when the partition itself spilled. mongod holds each
 * value twice (the function and the executor's queue).
 */
static int
check_fn_memory(const wfield_t *f, const part_t *p, const bson_value_t *vals, const int64_t *lo, const int64_t *hi,
                mf_error_t *err)
{
    bool holds = f->kind == WF_PUSH || f->kind == WF_ADDTOSET || (f->kind >= WF_FIRSTN && f->kind <= WF_PERCENTILE) ||
                 ((f->kind == WF_MIN || f->kind == WF_MAX) && f->lo.kind != B_UNBOUNDED);
    if (p->fn_limit <= 0 || !holds || p->n == 0)
        return 0;
    int64_t *pre = bson_malloc((p->n + 1) * sizeof *pre);
    int rc = 0;
    pre[0] = 0;
    for (size_t i = 0; i < p->n; i++)
        pre[i + 1] = pre[i] + (vals[i].value_type == BSON_TYPE_EOD ? 0 : value_mem(&vals[i]));
    for (size_t i = 0; i < p->n && rc == 0; i++) {
        if (lo[i] > hi[i])
            continue;
        int64_t used = 2 * (pre[hi[i] + 1] - pre[lo[i]]) + 128;
        if (used > p->fn_limit)
            rc = mf_err_set(err, MF_E_Location5414201,
                            "Exceeded memory limit in DocumentSourceSetWindowFields, used %lld bytes but max allowed "
                            "is %lld",
                            (long long)used, (long long)p->fn_limit);
    }
    bson_free(pre);
    return rc;
}

/* eval_all: vals[i] = e evaluated on document i (owned). */
static int
eval_all(const mf_expr_t *e, const part_t *p, bson_value_t *vals, mf_error_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        vals[i].value_type = BSON_TYPE_EOD;
        if (mf_expr_eval(e, &p->docs[i], &vals[i], err) < 0)
            return -1;
        if ((i & 1023) == 1023 && mf_exec_check_deadline(err) != 0)
            return -1;
    }
    return 0;
}

/* date_add: ms + amount units ($dateAdd in UTC: months clamp the day to the month's end), saturating. */
static int64_t
date_add(int64_t ms, int unit, int64_t amount)
{
    if (unit >= U_WEEK)
        return mf_sat_add(ms, mf_sat_mul(amount, unit_ms[unit]));
    return mf_utc_add_months(ms, unit == U_YEAR ? amount * 12 : unit == U_QUARTER ? amount * 3 : amount); /* |amount| < 2^31 */
}

/*
 * window_bounds: lo[i], hi[i] for every document (lo > hi: empty). sv holds
 * the sortBy values (range windows only; validated here).
 */
static int
window_bounds(const wfield_t *f, const part_t *p, const bson_value_t *sv, int64_t *lo, int64_t *hi, mf_error_t *err)
{
    int64_t n = (int64_t)p->n;

    if (!f->range) {
        for (int64_t i = 0; i < n; i++) {
            int64_t l = f->lo.kind == B_UNBOUNDED ? 0 : f->lo.kind == B_CURRENT ? i : i + f->lo.n;
            int64_t h = f->hi.kind == B_UNBOUNDED ? n - 1 : f->hi.kind == B_CURRENT ? i : i + f->hi.n;
            lo[i] = l < 0 ? 0 : l;
            hi[i] = h > n - 1 ? n - 1 : h;
        }
        return 0;
    }
    /* Range: every document's sortBy value must have the expected type. */
    double *x = bson_malloc((p->n ? p->n : 1) * sizeof *x);
    int rc = 0;
    for (int64_t i = 0; i < n; i++) {
        const bson_value_t *v = &sv[i];
        if (f->unit != U_NONE) {
            if (v->value_type != BSON_TYPE_DATE_TIME) {
                rc = mf_err_set(err, MF_E_Location5429513,
                                "Invalid range: Expected the sortBy field to be a Date, but it was %s",
                                mf_type_name(v->value_type == BSON_TYPE_EOD ? BSON_TYPE_EOD : v->value_type));
                goto done;
            }
            x[i] = (double)v->value.v_datetime;
        } else {
            if (v->value_type == BSON_TYPE_DATE_TIME) {
                rc = mf_err_set(err, MF_E_Location5429413,
                                "Invalid range: For windows that involve date or time ranges, a unit must be provided.");
                goto done;
            }
            if (!mf_value_is_number(v)) {
                rc = mf_err_set(err, MF_E_Location5429414,
                                "Invalid range: Expected the sortBy field to be a number, but it was %s",
                                mf_type_name(v->value_type));
                goto done;
            }
            x[i] = mf_value_as_double(v);
        }
    }
    int64_t l = 0, h = 0;
    for (int64_t i = 0; i < n; i++) {
        double tl = 0, th = 0;
        if (f->unit != U_NONE) {
            tl = f->lo.kind == B_NUM ? (double)date_add(sv[i].value.v_datetime, f->unit, f->lo.n) : 0;
            th = f->hi.kind == B_NUM ? (double)date_add(sv[i].value.v_datetime, f->unit, f->hi.n) : 0;
        } else {
            tl = x[i] + f->lo.d;
            th = x[i] + f->hi.d;
        }
        if (f->lo.kind == B_UNBOUNDED) {
            lo[i] = 0;
        } else if (f->lo.kind == B_CURRENT) {
            lo[i] = i;
        } else {
            while (l < n && x[l] < tl)
                l++;
            lo[i] = l;
        }
        if (f->hi.kind == B_UNBOUNDED) {
            hi[i] = n - 1;
        } else if (f->hi.kind == B_CURRENT) {
            hi[i] = i;
        } else {
            while (h < n && x[h] <= th)
                h++;
            hi[i] = h - 1;
        }
    }
done:
    bson_free(x);
    return rc;
}

/* x_value: a sortBy value as a number for $derivative / $integral / $linearFill (dates in units). */
static bool
x_value(const bson_value_t *v, int unit, double *x)
{
    if (v->value_type == BSON_TYPE_DATE_TIME) {
        *x = (double)v->value.v_datetime / (double)(unit == U_NONE ? 1 : unit_ms[unit]);
        return true;
    }
    if (mf_value_is_number(v)) {
        *x = mf_value_as_double(v);
        return true;
    }
    return false;
}

/*
 * derivative_of: $derivative between the window's endpoints (sortBy values
 * x0, x1, inputs y0, y1, already checked for their types), as mongod's
 * WindowFunctionExecDerivative: run = x1 - x0 (dates: milliseconds), rise =
 * y1 - y0 ($subtract's error for a non-numeric input: 16556 TypeMismatch),
 * 5624903 when the rise is null, rise / run (null when run is 0: a window
 * of one document), times the unit's milliseconds. Decimal in, decimal out.
 * *out is owned by the caller. Returns 0, or -1 with err set.
 */
static int
derivative_of(const wfield_t *f, const bson_value_t *x0, const bson_value_t *x1, const bson_value_t *y0,
              const bson_value_t *y1, bson_value_t *out, mf_error_t *err)
{
    bson_value_t run, rise, q, ms;
    int rc = -1;

    run.value_type = rise.value_type = q.value_type = BSON_TYPE_EOD;
    if (binop(f->op_sub, x1, x0, &run, err) < 0 || binop(f->op_sub, y1, y0, &rise, err) < 0)
        goto free_parts;
    if (mf_value_is_nullish(&rise)) {
        mf_err_set(err, MF_E_Location5624903, "$derivative input must not be null or missing");
        goto free_parts;
    }
    if (binop(f->op_div, &rise, &run, &q, err) < 0) {
        if (err->code != MF_E_BadValue)
            goto free_parts;
        /* Divide by zero is no error here (mongod returns the default, null). */
        mf_err_clear(err);
        mf_value_set_null(out);
        rc = 0;
        goto free_parts;
    }
    if (f->fn_unit == U_NONE) {
        *out = q;
        q.value_type = BSON_TYPE_EOD;
    } else {
        /* 1/millisecond scaled to 1/unit, last, as mongod. */
        mf_value_set_int64(&ms, unit_ms[f->fn_unit]);
        if (binop(f->op_mul, &q, &ms, out, err) < 0)
            goto free_parts;
    }
    rc = 0;
free_parts:
    mf_value_free(&run);
    mf_value_free(&rise);
    mf_value_free(&q);
    return rc;
}

typedef struct cmpctx {
    const bson_value_t *vals;
    const part_t *p;
    const mf_sort_t *sort;
    int dir;
} cmpctx_t;

static _Thread_local const cmpctx_t *g_cmp;

static int
cmp_vals(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = mf_value_cmp(&g_cmp->vals[i], &g_cmp->vals[j]) * g_cmp->dir;
    return c ? c : (i < j ? -1 : i > j);
}

/*
 * acc_result: the value of an accumulating function over window [l, h]
 * (not empty). idx is scratch space of at least h-l+1 entries.
 */
static int
acc_result(const wfield_t *f, const part_t *p, const bson_value_t *vals, const bson_value_t *sv, int64_t l,
           int64_t h, size_t *idx, bson_value_t *out, mf_error_t *err)
{
    size_t m = 0;

    (void)p;
    switch (f->kind) {
    case WF_PUSH:
        for (int64_t j = l; j <= h; j++)
            idx[m++] = (size_t)j;
        array_of(out, vals, idx, m);
        return 0;
    case WF_FIRSTN:
    case WF_LASTN: {
        int64_t cnt = h - l + 1 < f->n ? h - l + 1 : f->n;
        int64_t start = f->kind == WF_FIRSTN ? l : h - cnt + 1;
        mf_value_array_t arr;
        mf_value_array_init(&arr);
        for (int64_t j = 0; j < cnt; j++)
            mf_value_array_push(&arr, &vals[start + j]); /* missing as null */
        mf_value_array_finish(&arr, out);
        return 0;
    }
    default:
        mf_value_set_null(out);
        return 0;
    }
}

/* value_is_nan: a double or decimal NaN (mongod's Value::isNaN). */
static bool
value_is_nan(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_DOUBLE)
        return isnan(v->value.v_double);
    return v->value_type == BSON_TYPE_DECIMAL128 && mf_dec_is_nan(&v->value.v_decimal128);
}

/* integral_check: mongod's WindowFunctionIntegral::assertValueType for the point (x = sortBy value, y = input). */
static int
integral_check(const wfield_t *f, const bson_value_t *x, const bson_value_t *y, mf_error_t *err)
{
    bool date = x->value_type == BSON_TYPE_DATE_TIME;

    if (!mf_value_is_number(y) || !(date || mf_value_is_number(x)))
        return mf_err_set(err, MF_E_Location5423900,
                          "The input value of $integral window function must be a vector of 2 value, the first "
                          "value must be numeric or date type and the second must be numeric.");
    if (f->fn_unit != U_NONE && !date)
        return mf_err_set(err, MF_E_Location5423901, "$integral with 'outputUnit' expects the sortBy field to be a Date");
    if (f->fn_unit == U_NONE && date)
        return mf_err_set(err, MF_E_Location5423902,
                          "$integral (with no 'outputUnit') expects the sortBy field to be numeric");
    return 0;
}

/*
 * trapezoid: the area between points (x0, y0) and (x1, y1), checked and not
 * NaN, as mongod's integralOfTwoPointsByTrapezoidalRule: (y1 + y0) *
 * (x1 - x0) / 2.0 with $add/$subtract/$multiply/$divide's promotion (dates
 * subtract to milliseconds; a decimal operand makes it a decimal, else it is
 * a double). *out is owned by the caller. Returns 0, or -1 with err set.
 */
static int
trapezoid(const wfield_t *f, const bson_value_t *x0, const bson_value_t *y0, const bson_value_t *x1,
          const bson_value_t *y1, bson_value_t *out, mf_error_t *err)
{
    bson_value_t delta, sum_y, prod, two;
    int rc = -1;

    delta.value_type = sum_y.value_type = prod.value_type = BSON_TYPE_EOD;
    mf_value_set_double(&two, 2.0);
    if (binop(f->op_sub, x1, x0, &delta, err) < 0 || binop(f->op_add, y1, y0, &sum_y, err) < 0 ||
        binop(f->op_mul, &sum_y, &delta, &prod, err) < 0 || binop(f->op_div, &prod, &two, out, err) < 0)
        goto free_parts;
    rc = 0;
free_parts:
    mf_value_free(&delta);
    mf_value_free(&sum_y);
    mf_value_free(&prod);
    return rc;
}

/*
 * integral_all: $integral for every document of a partition of n (inputs
 * vals, sortBy values sv, windows [lo, hi]) into res, as mongod's
 * WindowFunctionIntegral: every point of a window is checked (5423900-2);
 * the trapezoids between neighbours are summed as $sum sums (RemovableSum:
 * a double unless one is a decimal; int 0 for a window of one point); a NaN
 * point makes the result a double NaN; with a unit the sum (in
 * milliseconds) is divided by the unit's milliseconds last.
 *
 * Each trapezoid is computed once. Windows never move left, so the points
 * checked so far [cl, ch] and the summed window [sl, sh] only extend to the
 * right while the left bound stays; a window that moves starts its sum again.
 * Returns 0, or -1 with err set.
 */
static int
integral_all(const wfield_t *f, size_t n, const bson_value_t *vals, const bson_value_t *sv, const int64_t *lo,
             const int64_t *hi, bson_value_t *res, mf_error_t *err)
{
    bson_value_t *trap = bson_malloc(n * sizeof *trap); /* trap[j]: between points j-1 and j; EOD until computed */
    mf_sum_t s;
    int64_t cl = 0, ch = -1, sl = 0, sh = -1, nnan = 0;
    int rc = -1;

    for (size_t j = 0; j < n; j++)
        trap[j].value_type = BSON_TYPE_EOD;
    mf_sum_init(&s);
    for (size_t i = 0; i < n; i++) {
        int64_t l = lo[i], h = hi[i];
        if (l > h) {
            mf_value_set_null(&res[i]);
            continue;
        }
        if (l < cl || l > ch + 1) {
            cl = l;
            ch = l - 1;
        }
        while (ch < h) {
            ch++;
            if (integral_check(f, &sv[ch], &vals[ch], err) < 0)
                goto err_free_trap;
        }
        if (l != sl || h < sh) {
            mf_sum_init(&s);
            nnan = 0;
            sl = l;
            sh = l - 1;
        }
        while (sh < h) {
            int64_t j = ++sh;
            if (value_is_nan(&sv[j]) || value_is_nan(&vals[j])) {
                nnan++;
                continue;
            }
            /* A trapezoid with a NaN end adds 0 in mongod; the result is NaN then anyway. */
            if (j == sl || value_is_nan(&sv[j - 1]) || value_is_nan(&vals[j - 1]))
                continue;
            if (trap[j].value_type == BSON_TYPE_EOD &&
                trapezoid(f, &sv[j - 1], &vals[j - 1], &sv[j], &vals[j], &trap[j], err) < 0)
                goto err_free_trap;
            mf_sum_add(&s, &trap[j]);
        }
        if (nnan > 0) {
            mf_value_set_double(&res[i], NAN);
        } else if (f->fn_unit == U_NONE) {
            mf_sum_result(&s, &res[i]);
        } else {
            bson_value_t total, ms;
            int brc;
            mf_sum_result(&s, &total);
            mf_value_set_int64(&ms, unit_ms[f->fn_unit]);
            brc = binop(f->op_div, &total, &ms, &res[i], err);
            mf_value_free(&total);
            if (brc < 0)
                goto err_free_trap;
        }
        if ((i & 255) == 255 && mf_exec_check_deadline(err) != 0)
            goto err_free_trap;
    }
    rc = 0;
err_free_trap:
    for (size_t j = 0; j < n; j++)
        mf_value_free(&trap[j]);
    bson_free(trap);
    return rc;
}

/*
 * Statistics, in mongod's arithmetic so results agree to the last bit:
 * $stdDev* over a left-unbounded window is $group's Welford update; over a
 * left-bounded (removable) window it is WindowFunctionStdDev's add/remove
 * of (count * x - sum)^2 / (count * (count - 1)) terms; $covariance* keeps
 * compensated sums of x, y and dx * dy with means taken as sum / count.
 */
typedef struct wstat {
    int64_t n;
    double mx, m2;              /* Welford ($stdDev*, left-unbounded) */
    int64_t rcount;             /* removable $stdDev*: documents with a number, non-finite ones included */
    csum_t rsum, rm2;
    csum_t sx, sy, cxy;         /* $covariance* */
    int64_t nan, pinf, ninf;    /* non-finite values: kept out of the moments as mongod does */
} wstat_t;

/* stat_update_removable: mongod's WindowFunctionStdDev::update (q = 1 adds, -1 removes). */
static void
stat_update_removable(wstat_t *s, const bson_value_t *v, int q)
{
    if (!mf_value_is_number(v))
        return;
    double x = mf_value_as_double(v);
    if (!isfinite(x)) {
        s->nan += q;
        s->rcount += q;
        return;
    }
    if (s->rcount == 0) {
        s->rcount++;
        csum_add(&s->rsum, x);
        return;
    }
    if (s->rcount + q == 0) {
        memset(s, 0, sizeof *s);
        return;
    }
    double d = (double)s->rcount * x - csum_val(&s->rsum);
    s->rcount += q;
    csum_add(&s->rsum, x * q);
    csum_add(&s->rm2, d * d * q / ((double)s->rcount * (double)(s->rcount - q)));
}

static void stat_cov(wstat_t *s, const bson_value_t *v, int q);

static void
stat_add(wstat_t *s, const wfield_t *f, const bson_value_t *v)
{
    if (f->kind == WF_STDDEVPOP || f->kind == WF_STDDEVSAMP) {
        if (!mf_value_is_number(v))
            return;
        double x = mf_value_as_double(v);
        if (!isfinite(x)) {
            s->nan++; /* counted, and the answer is NaN */
            return;
        }
        s->n++;
        double d = x - s->mx;
        if (d != 0.0) {
            s->mx += d / (double)s->n;
            s->m2 += d * (x - s->mx);
        }
        return;
    }
    stat_cov(s, v, 1);
}

/* stat_cov: mongod's WindowFunctionCovariance add (q = 1) / remove (q = -1) of the point v = [x, y]. */
static void
stat_cov(wstat_t *s, const bson_value_t *v, int q)
{
    bson_iter_t it;
    bson_value_t xy[2];
    int k = 0;
    if (v->value_type != BSON_TYPE_ARRAY)
        return;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it) && k < 3) {
        if (k < 2)
            xy[k] = *bson_iter_value(&it);
        k++;
    }
    if (k != 2 || !mf_value_is_number(&xy[0]) || !mf_value_is_number(&xy[1]))
        return;
    double x = mf_value_as_double(&xy[0]), y = mf_value_as_double(&xy[1]);
    if (!isfinite(x) || !isfinite(y)) {
        if (isnan(x) || isnan(y) || (isinf(x) && isinf(y) && (x > 0) != (y > 0)))
            s->nan += q;
        else
            *((isinf(x) ? x : y) > 0 ? &s->pinf : &s->ninf) += q;
        return;
    }
    if (q < 0) {
        if (--s->n == 0) {
            int64_t nan = s->nan, pinf = s->pinf, ninf = s->ninf;
            memset(&s->sx, 0, sizeof s->sx);
            memset(&s->sy, 0, sizeof s->sy);
            memset(&s->cxy, 0, sizeof s->cxy);
            s->nan = nan, s->pinf = pinf, s->ninf = ninf;
            return;
        }
        csum_add(&s->sx, -x);
        double dx = x - csum_val(&s->sx) / (double)s->n;
        double dy = y - csum_val(&s->sy) / (double)(s->n + 1);
        csum_add(&s->cxy, -(dx * dy));
        csum_add(&s->sy, -y);
        return;
    }
    /* The first point has no mean before it: it adds nothing to the co-moment. */
    bool first = s->n == 0;
    double dx = first ? 0 : x - csum_val(&s->sx) / (double)s->n;
    s->n++;
    csum_add(&s->sx, x);
    csum_add(&s->sy, y);
    if (!first)
        csum_add(&s->cxy, dx * (y - csum_val(&s->sy) / (double)s->n));
}

static void
stat_value(const wstat_t *s, const wfield_t *f, bool removable, bson_value_t *out)
{
    switch (f->kind) {
    case WF_STDDEVPOP:
    case WF_STDDEVSAMP: {
        int64_t cnt = removable ? s->rcount : s->n + s->nan, adj = f->kind == WF_STDDEVSAMP ? cnt - 1 : cnt;
        double m2 = removable ? csum_val(&s->rm2) : s->m2;
        if (s->nan > 0)
            mf_value_set_double(out, NAN);
        else if (adj <= 0)
            mf_value_set_null(out);
        else if (m2 < 0 || (f->kind == WF_STDDEVPOP && cnt == 1))
            mf_value_set_double(out, 0.0);
        else
            mf_value_set_double(out, sqrt(m2 / (double)adj));
        return;
    }
    default: { /* $covariancePop / $covarianceSamp, as mongod's WindowFunctionCovariance */
        bool samp = f->kind == WF_COVSAMP;
        if (s->n == 1 && !samp) {
            mf_value_set_double(out, 0.0);
            return;
        }
        double adj = (double)(samp ? s->n - 1 : s->n);
        if (adj <= 0)
            mf_value_set_null(out);
        else if (s->nan > 0 || (s->pinf > 0 && s->ninf > 0))
            mf_value_set_double(out, NAN);
        else if (s->pinf > 0 || s->ninf > 0)
            mf_value_set_double(out, s->pinf > 0 ? INFINITY : -INFINITY);
        else
            mf_value_set_double(out, csum_val(&s->cxy) / adj);
        return;
    }
    }
}

/*
 * Ordered state for the accumulating functions whose answer comes from a
 * sorted view of the window ($minN $maxN $topN $bottomN $top $bottom
 * $addToSet $median $percentile). While a window only grows at its right
 * end (lo_i unchanged), each new document is inserted in place (binary
 * search; the N functions keep only their n best), so [unbounded, current]
 * costs O(n * k) rather than a sort per document. Other windows rebuild.
 */
typedef struct ostate {
    size_t *ix;  /* document indices in order */
    double *xs;  /* $median / $percentile: the numeric values in order */
    size_t n;
} ostate_t;

static bool
ordered_kind(int kind)
{
    return kind == WF_MINN || kind == WF_MAXN || kind == WF_TOPN || kind == WF_BOTTOMN || kind == WF_TOP ||
           kind == WF_BOTTOM || kind == WF_ADDTOSET || kind == WF_MEDIAN || kind == WF_PERCENTILE;
}

/* ocmp: <0, 0, >0 as document a orders before, with, after document b for f. */
static int
ocmp(const wfield_t *f, const part_t *p, const bson_value_t *vals, size_t a, size_t b)
{
    if (f->kind == WF_TOPN || f->kind == WF_BOTTOMN || f->kind == WF_TOP || f->kind == WF_BOTTOM)
        return mf_sort_cmp(f->inner, &p->docs[a], &p->docs[b]);
    int c = mf_value_cmp(&vals[a], &vals[b]);
    return f->kind == WF_MAXN ? -c : c;
}

static void
ostate_insert(const wfield_t *f, const part_t *p, const bson_value_t *vals, ostate_t *os, size_t j)
{
    size_t lo = 0, hi = os->n;

    if (f->kind == WF_MEDIAN || f->kind == WF_PERCENTILE) {
        if (!mf_value_is_number(&vals[j]))
            return;
        double x = mf_value_as_double(&vals[j]);
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (os->xs[mid] <= x)
                lo = mid + 1;
            else
                hi = mid;
        }
        memmove(&os->xs[lo + 1], &os->xs[lo], (os->n - lo) * sizeof *os->xs);
        os->xs[lo] = x;
        os->n++;
        return;
    }
    if ((f->kind == WF_MINN || f->kind == WF_MAXN) && mf_value_is_nullish(&vals[j]))
        return;
    if (f->kind == WF_ADDTOSET && vals[j].value_type == BSON_TYPE_EOD)
        return;
    /* Upper bound: after every equal element, so ties keep document order. */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ocmp(f, p, vals, os->ix[mid], j) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (f->kind == WF_ADDTOSET && lo > 0 && mf_value_cmp(&vals[os->ix[lo - 1]], &vals[j]) == 0)
        return;
    bool keep_last = f->kind == WF_BOTTOMN || f->kind == WF_BOTTOM;
    size_t cap = f->kind == WF_ADDTOSET ? SIZE_MAX : (size_t)f->n;
    if (!keep_last && os->n == cap && lo == cap)
        return;
    if (keep_last && os->n == cap && lo == 0)
        return;
    memmove(&os->ix[lo + 1], &os->ix[lo], (os->n - lo) * sizeof *os->ix);
    os->ix[lo] = j;
    os->n++;
    if (os->n > cap) {
        if (keep_last)
            memmove(&os->ix[0], &os->ix[1], (os->n - 1) * sizeof *os->ix);
        os->n--;
    }
}

/*
 * ostate_rebuild: the state for window [l, h] from scratch: by insertion for
 * the N functions (at most n kept), by one sort for the unbounded ones.
 */
static void
ostate_rebuild(const wfield_t *f, const part_t *p, const bson_value_t *vals, ostate_t *os, int64_t l, int64_t h)
{
    os->n = 0;
    if (f->kind == WF_MEDIAN || f->kind == WF_PERCENTILE) {
        for (int64_t j = l; j <= h; j++)
            if (mf_value_is_number(&vals[j]))
                os->xs[os->n++] = mf_value_as_double(&vals[j]);
        qsort(os->xs, os->n, sizeof *os->xs, mf_value_double_cmp);
        return;
    }
    if (f->kind == WF_ADDTOSET) {
        cmpctx_t c = {vals, p, NULL, 1};
        size_t u = 0;
        for (int64_t j = l; j <= h; j++)
            if (vals[j].value_type != BSON_TYPE_EOD)
                os->ix[os->n++] = (size_t)j;
        g_cmp = &c;
        qsort(os->ix, os->n, sizeof *os->ix, cmp_vals);
        for (size_t k = 0; k < os->n; k++)
            if (u == 0 || mf_value_cmp(&vals[os->ix[u - 1]], &vals[os->ix[k]]) != 0)
                os->ix[u++] = os->ix[k];
        os->n = u;
        return;
    }
    for (int64_t j = l; j <= h; j++)
        ostate_insert(f, p, vals, os, (size_t)j);
}

/* ostate_result: the function's value from the ordered state (not empty window). */
static void
ostate_result(const wfield_t *f, const ostate_t *os, const bson_value_t *vals, bson_value_t *out)
{
    mf_value_array_t arr;

    mf_value_array_init(&arr);
    switch (f->kind) {
    case WF_MEDIAN:
    case WF_PERCENTILE:
        for (size_t q = 0; q < f->nps; q++) {
            bson_value_t r;
            if (os->n == 0) {
                mf_value_set_null(&r);
            } else {
                /* 'approximate' is exact at these sizes: the value of rank ceil(p * n). */
                mf_value_set_double(&r, os->xs[mf_value_percentile_index(f->ps[q], os->n)]);
            }
            if (f->kind == WF_MEDIAN) {
                *out = r;
                bson_destroy(&arr.b);
                return;
            }
            mf_value_array_push(&arr, &r);
        }
        break;
    case WF_TOP:
    case WF_BOTTOM:
        bson_destroy(&arr.b);
        if (os->n == 0 || vals[os->ix[f->kind == WF_TOP ? 0 : os->n - 1]].value_type == BSON_TYPE_EOD)
            mf_value_set_null(out);
        else
            mf_value_copy(out, &vals[os->ix[f->kind == WF_TOP ? 0 : os->n - 1]]);
        return;
    default:
        for (size_t k = 0; k < os->n; k++)
            mf_value_array_push(&arr, &vals[os->ix[k]]); /* missing as null */
        break;
    }
    mf_value_array_finish(&arr, out);
}

/*
 * compute_field: res[i] for every document of the partition (owned values;
 * EOD leaves the field unset).
 */
static int
compute_field(const mf_window_t *w, const wfield_t *f, const part_t *p, bson_value_t *res, mf_error_t *err)
{
    size_t n = p->n;
    bson_value_t *vals = NULL, *sv = NULL;
    int64_t *lo = NULL, *hi = NULL;
    size_t *idx = NULL;
    int rc = -1;

    for (size_t i = 0; i < n; i++)
        res[i].value_type = BSON_TYPE_EOD;
    if (n == 0)
        return 0;
    vals = bson_malloc0(n * sizeof *vals);
    for (size_t i = 0; i < n; i++)
        vals[i].value_type = BSON_TYPE_EOD;
    if (f->input != NULL && f->kind != WF_SHIFT && eval_all(f->input, p, vals, err) < 0)
        goto done;
    bool need_sv = f->range || f->kind == WF_DERIVATIVE || f->kind == WF_INTEGRAL || f->kind == WF_LINEARFILL;
    if (need_sv) {
        sv = bson_malloc0(n * sizeof *sv);
        if (eval_all(w->sort_expr, p, sv, err) < 0)
            goto done;
    }
    lo = bson_malloc(n * sizeof *lo);
    hi = bson_malloc(n * sizeof *hi);
    if (window_bounds(f, p, sv, lo, hi, err) < 0 || check_fn_memory(f, p, vals, lo, hi, err) < 0)
        goto done;

    switch (f->kind) {
    case WF_SUM:
    case WF_AVG:
    case WF_COUNT: {
        sumst_t s;
        int64_t cl = 0, ch = -1; /* the window's current content [cl, ch] */
        memset(&s, 0, sizeof s);
        s.dec.value_type = BSON_TYPE_EOD;
        bson_value_t one;
        mf_value_set_int(&one, 1);
        for (size_t i = 0; i < n; i++) {
            int64_t l = lo[i], h = hi[i];
            if (l > h) {
                if (f->kind == WF_AVG)
                    mf_value_set_null(&res[i]);
                else
                    mf_value_set_int(&res[i], 0);
                continue;
            }
            if (l > ch || h < cl) {
                sum_reset(&s);
                cl = l;
                ch = l - 1;
            }
            while (ch < h) {
                ch++;
                sum_update(&s, f->kind == WF_COUNT ? &one : &vals[ch], 1);
            }
            while (cl < l) {
                sum_update(&s, f->kind == WF_COUNT ? &one : &vals[cl], -1);
                cl++;
            }
            if (f->kind == WF_COUNT)
                mf_value_set_int(&res[i], s.ndocs);
            else
                sum_value(&s, f->kind == WF_AVG, f->lo.kind != B_UNBOUNDED, &res[i]);
        }
        sum_reset(&s);
        break;
    }
    case WF_MIN:
    case WF_MAX: {
        /* Monotonic deque of indices: values strictly improving from the back. */
        size_t *dq = bson_malloc(n * sizeof *dq), qh = 0, qt = 0;
        int64_t cl = 0, ch = -1;
        int dir = f->kind == WF_MIN ? 1 : -1;
        for (size_t i = 0; i < n; i++) {
            int64_t l = lo[i], h = hi[i];
            if (l > h) {
                mf_value_set_null(&res[i]);
                continue;
            }
            if (l > ch || h < cl) {
                qh = qt = 0;
                cl = l;
                ch = l - 1;
            }
            while (ch < h) {
                ch++;
                if (mf_value_is_nullish(&vals[ch]))
                    continue;
                while (qt > qh && mf_value_cmp(&vals[dq[qt - 1]], &vals[ch]) * dir > 0)
                    qt--;
                dq[qt++] = (size_t)ch;
            }
            cl = l;
            while (qt > qh && (int64_t)dq[qh] < cl)
                qh++;
            if (qt > qh)
                mf_value_copy(&res[i], &vals[dq[qh]]);
            else
                mf_value_set_null(&res[i]);
        }
        bson_free(dq);
        break;
    }
    case WF_STDDEVPOP:
    case WF_STDDEVSAMP:
    case WF_COVPOP:
    case WF_COVSAMP: {
        wstat_t s;
        int64_t cl = -1, ch = -1;
        bool removable = f->lo.kind != B_UNBOUNDED;
        bool sd = f->kind == WF_STDDEVPOP || f->kind == WF_STDDEVSAMP;
        memset(&s, 0, sizeof s);
        for (size_t i = 0; i < n; i++) {
            int64_t l = lo[i], h = hi[i];
            if (l > h) {
                mf_value_set_null(&res[i]);
                continue;
            }
            if (removable) {
                /* Slide: add what enters, then remove what leaves, as mongod's removable executor. */
                if (cl < 0 || l > ch || h < cl) {
                    memset(&s, 0, sizeof s);
                    cl = l;
                    ch = l - 1;
                }
                for (; ch < h; ch++) {
                    if (sd)
                        stat_update_removable(&s, &vals[ch + 1], 1);
                    else
                        stat_cov(&s, &vals[ch + 1], 1);
                }
                for (; cl < l; cl++) {
                    if (sd)
                        stat_update_removable(&s, &vals[cl], -1);
                    else
                        stat_cov(&s, &vals[cl], -1);
                }
            } else {
                if (l != cl || h < ch) {
                    memset(&s, 0, sizeof s);
                    cl = l;
                    ch = l - 1;
                }
                while (ch < h)
                    stat_add(&s, f, &vals[++ch]);
            }
            stat_value(&s, f, removable && sd, &res[i]);
        }
        break;
    }
    case WF_INTEGRAL:
        if (integral_all(f, n, vals, sv, lo, hi, res, err) < 0)
            goto done;
        break;
    case WF_PUSH: case WF_ADDTOSET: case WF_FIRSTN: case WF_LASTN: case WF_MINN:
    case WF_MAXN: case WF_TOPN: case WF_BOTTOMN: case WF_TOP: case WF_BOTTOM: case WF_MEDIAN:
    case WF_PERCENTILE: {
        ostate_t os = {bson_malloc(n * sizeof *os.ix), bson_malloc(n * sizeof *os.xs), 0};
        int64_t ol = -1, oh = -1; /* the ordered state holds window [ol, oh]; ol -1: none */
        idx = bson_malloc(n * sizeof *idx);
        for (size_t i = 0; i < n; i++) {
            int64_t l = lo[i], h = hi[i];
            if (l > h) {
                if (f->kind == WF_PUSH || f->kind == WF_ADDTOSET || f->kind == WF_FIRSTN || f->kind == WF_LASTN ||
                    f->kind == WF_MINN || f->kind == WF_MAXN || f->kind == WF_TOPN || f->kind == WF_BOTTOMN)
                    array_of(&res[i], vals, idx, 0);
                else
                    mf_value_set_null(&res[i]);
                continue;
            }
            if (i > 0 && lo[i - 1] == l && hi[i - 1] == h && res[i - 1].value_type != BSON_TYPE_EOD) {
                bson_value_copy(&res[i - 1], &res[i]);
                continue;
            }
            if (ordered_kind(f->kind)) {
                /* Grow the state while the window only grows to the right; rebuild it otherwise. */
                if (ol != l || h < oh) {
                    ostate_rebuild(f, p, vals, &os, l, h);
                    ol = l;
                    oh = h;
                }
                while (oh < h)
                    ostate_insert(f, p, vals, &os, (size_t)++oh);
                ostate_result(f, &os, vals, &res[i]);
            } else if (acc_result(f, p, vals, sv, l, h, idx, &res[i], err) < 0) {
                bson_free(os.ix);
                bson_free(os.xs);
                goto done;
            }
            if ((i & 255) == 255 && mf_exec_check_deadline(err) != 0) {
                bson_free(os.ix);
                bson_free(os.xs);
                goto done;
            }
        }
        bson_free(os.ix);
        bson_free(os.xs);
        break;
    }
    case WF_FIRST:
    case WF_LAST:
        for (size_t i = 0; i < n; i++) {
            if (lo[i] > hi[i]) {
                mf_value_set_null(&res[i]);
                continue;
            }
            /* A missing value stays missing (the field is not set), as mongod's endpoint executor does. */
            mf_value_copy(&res[i], &vals[f->kind == WF_FIRST ? lo[i] : hi[i]]);
        }
        break;
    case WF_DERIVATIVE:
        for (size_t i = 0; i < n; i++) {
            int64_t l = lo[i], h = hi[i];
            if (l > h) {
                mf_value_set_null(&res[i]);
                continue;
            }
            bool dl = sv[l].value_type == BSON_TYPE_DATE_TIME, dh = sv[h].value_type == BSON_TYPE_DATE_TIME;
            if (f->fn_unit != U_NONE && !(dl && dh)) {
                mf_err_set(err, MF_E_Location5624900, "$derivative with 'unit' expects the sortBy field to be a Date");
                goto done;
            }
            if (f->fn_unit == U_NONE && (dl || dh)) {
                mf_err_set(err, MF_E_Location5624901, "$derivative where the sortBy is a Date requires an 'unit'");
                goto done;
            }
            if (f->fn_unit == U_NONE && !(mf_value_is_number(&sv[l]) && mf_value_is_number(&sv[h]))) {
                mf_err_set(err, MF_E_Location5624902,
                           "$derivative (with no 'unit') expects the sortBy field to be numeric");
                goto done;
            }
            if (derivative_of(f, &sv[l], &sv[h], &vals[l], &vals[h], &res[i], err) < 0)
                goto done;
        }
        break;
    case WF_SHIFT:
        /* Outside the partition, or a missing value there, gives the default (null without one). */
        for (size_t i = 0; i < n; i++) {
            int64_t j = (int64_t)i + f->by;
            if (j >= 0 && j < (int64_t)n) {
                if (mf_expr_eval(f->input, &p->docs[j], &res[i], err) < 0)
                    goto done;
                if (res[i].value_type != BSON_TYPE_EOD)
                    continue;
            }
            if (f->dflt.value_type == BSON_TYPE_EOD)
                mf_value_set_null(&res[i]);
            else
                mf_value_copy(&res[i], &f->dflt);
        }
        break;
    case WF_RANK:
    case WF_DENSERANK:
    case WF_DOCNUM: {
        int64_t rank = 0, dense = 0;
        for (size_t i = 0; i < n; i++) {
            bool same = i > 0 && mf_sort_cmp(w->sort, &p->docs[i - 1], &p->docs[i]) == 0;
            if (!same) {
                rank = (int64_t)i + 1;
                dense++;
            }
            mf_value_set_int(&res[i], f->kind == WF_RANK ? rank : f->kind == WF_DENSERANK ? dense : (int64_t)i + 1);
        }
        break;
    }
    case WF_LOCF: {
        const bson_value_t *last = NULL;
        for (size_t i = 0; i < n; i++) {
            if (!mf_value_is_nullish(&vals[i]))
                last = &vals[i];
            if (last)
                mf_value_copy(&res[i], last);
            else
                mf_value_set_null(&res[i]);
        }
        break;
    }
    case WF_LINEARFILL: {
        /*
         * As mongod's linear-fill executor: values numeric or nullish, sortBy values numeric or
         * dates (not mixed, never repeated), nulls between two known points interpolated as
         * y1 + (x - x1) * ((y2 - y1) / (x2 - x1)), the others left null.
         */
        int64_t prev = -1, next = -1;
        for (size_t i = 0; i < n; i++) {
            const bson_value_t *v = &vals[i], *x = &sv[i];
            if (!mf_value_is_number(v) && !mf_value_is_nullish(v)) {
                mf_err_set(err, MF_E_TypeMismatch, "Value to be filled must be numeric or nullish, but found %s",
                           mf_type_name(v->value_type));
                goto done;
            }
            bool xdate = x->value_type == BSON_TYPE_DATE_TIME;
            if (!mf_value_is_number(x) && !xdate) {
                mf_err_set(err, MF_E_TypeMismatch, "Value of the sortBy field must be numeric or a date, but found %s",
                           mf_type_name(x->value_type));
                goto done;
            }
            if (i > 0) {
                if (mf_value_cmp(x, &sv[i - 1]) == 0) {
                    mf_err_set(err, MF_E_Location6050106, "There can be no repeated values in the sort field");
                    goto done;
                }
                if (xdate != (sv[i - 1].value_type == BSON_TYPE_DATE_TIME)) {
                    mf_err_set(err, MF_E_TypeMismatch,
                               "Conflicting sort value types, previously received type %s, but found %s",
                               mf_type_name(sv[i - 1].value_type), mf_type_name(x->value_type));
                    goto done;
                }
            }
            if (!mf_value_is_nullish(v)) {
                mf_value_copy(&res[i], v);
                prev = (int64_t)i;
                continue;
            }
            if (next <= (int64_t)i) {
                next = -1;
                for (size_t j = i + 1; j < n; j++) {
                    if (!mf_value_is_nullish(&vals[j]) && !mf_value_is_nullish(&sv[j])) {
                        next = (int64_t)j;
                        break;
                    }
                }
            }
            double x0, x1, xi;
            if (prev < 0 || next < 0 || !mf_value_is_number(&vals[next]) || !x_value(&sv[prev], U_NONE, &x0) ||
                !x_value(&sv[next], U_NONE, &x1) || !x_value(x, U_NONE, &xi)) {
                mf_value_set_null(&res[i]);
                continue;
            }
            double y0 = mf_value_as_double(&vals[prev]), y1 = mf_value_as_double(&vals[next]);
            mf_value_set_double(&res[i], y0 + (xi - x0) * ((y1 - y0) / (x1 - x0)));
        }
        break;
    }
    case WF_EMA: {
        /*
         * As mongod's AccumulatorExpMovingAvg: in Decimal128 throughout (a double
         * input rounded to 15 digits, as Value::coerceToDecimal), x * alpha +
         * avg * (1 - alpha); the average comes back as a double until a decimal
         * input has been seen in the partition, as a decimal from then on.
         */
        bool have = false, dec = false;
        bson_decimal128_t cur, one, keep_w, x, t;
        mf_dec_from_int64(1, &one);
        mf_dec_arith(MF_DEC_SUB, &one, &f->alpha, &keep_w);
        for (size_t i = 0; i < n; i++) {
            if (mf_dec_from_value(&vals[i], 15, &x)) {
                dec = dec || vals[i].value_type == BSON_TYPE_DECIMAL128;
                if (have) {
                    mf_dec_arith(MF_DEC_MUL, &x, &f->alpha, &x);
                    mf_dec_arith(MF_DEC_MUL, &cur, &keep_w, &t);
                    mf_dec_arith(MF_DEC_ADD, &x, &t, &cur);
                } else {
                    cur = x;
                }
                have = true;
            }
            if (!have) {
                mf_value_set_null(&res[i]);
            } else if (dec) {
                mf_value_set_type(&res[i], BSON_TYPE_DECIMAL128);
                res[i].value.v_decimal128 = cur;
            } else {
                mf_value_set_double(&res[i], mf_dec_to_double(&cur));
            }
        }
        break;
    }
    default:
        break;
    }
    rc = 0;
done:
    if (rc < 0)
        for (size_t i = 0; i < n; i++)
            mf_value_free(&res[i]);
    for (size_t i = 0; i < n; i++)
        mf_value_free(&vals[i]);
    bson_free(vals);
    if (sv) {
        for (size_t i = 0; i < n; i++)
            mf_value_free(&sv[i]);
        bson_free(sv);
    }
    bson_free(lo);
    bson_free(hi);
    bson_free(idx);
    return rc;
}

/* ---- writing the output paths ($addFields semantics) ---- */

typedef struct setp {
    const char *path; /* relative to the current level */
    const bson_value_t *v;
} setp_t;

static size_t
first_len(const char *path)
{
    const char *dot = strchr(path, '.');
    return dot ? (size_t)(dot - path) : strlen(path);
}

static void set_level(bson_t *dst, const bson_t *src, setp_t *ps, size_t n);

/*
 * append_under: appends under key the value sv (may be NULL: none) with the
 * relative paths sub set inside it, as $addFields does: a document gets the
 * fields, an array gets them in each element (recursively), anything else is
 * replaced by a new document.
 */
static void
append_under(bson_t *dst, const char *key, int kl, const bson_value_t *sv, setp_t *sub, size_t n)
{
    bson_t child, base;

    if (sv && sv->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t ai;
        bson_append_array_begin(dst, key, kl, &child);
        bson_iter_init_from_data(&ai, sv->value.v_doc.data, sv->value.v_doc.data_len);
        while (bson_iter_next(&ai))
            append_under(&child, bson_iter_key(&ai), -1, bson_iter_value(&ai), sub, n);
        bson_append_array_end(dst, &child);
        return;
    }
    bool have_base = sv && sv->value_type == BSON_TYPE_DOCUMENT &&
                     bson_init_static(&base, sv->value.v_doc.data, sv->value.v_doc.data_len);
    bson_append_document_begin(dst, key, kl, &child);
    set_level(&child, have_base ? &base : NULL, sub, n);
    bson_append_document_end(dst, &child);
}

/* append_group: sets the paths ps (sharing first component key of length kl) under key, from src value sv. */
static void
append_group(bson_t *dst, const char *key, size_t kl, const bson_value_t *sv, setp_t *ps, size_t n)
{
    /* An exact path (no dot) replaces the value; conflicts were refused at parse time. */
    if (n == 1 && ps[0].path[kl] == '\0') {
        if (ps[0].v->value_type != BSON_TYPE_EOD)
            mf_bson_append_value(dst, key, (int)kl, ps[0].v);
        return;
    }
    setp_t *sub = bson_malloc(n * sizeof *sub);
    for (size_t j = 0; j < n; j++) {
        sub[j].path = ps[j].path + kl + 1;
        sub[j].v = ps[j].v;
    }
    append_under(dst, key, (int)kl, sv, sub, n);
    bson_free(sub);
}

static void
set_level(bson_t *dst, const bson_t *src, setp_t *ps, size_t n)
{
    bool *used = bson_malloc0(n ? n : 1);
    setp_t *grp = bson_malloc((n ? n : 1) * sizeof *grp);
    bson_iter_t it;

    if (src && bson_iter_init(&it, src)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            size_t kl = strlen(k), g = 0;
            for (size_t j = 0; j < n; j++) {
                if (!used[j] && first_len(ps[j].path) == kl && strncmp(ps[j].path, k, kl) == 0) {
                    grp[g++] = ps[j];
                    used[j] = true;
                }
            }
            if (g == 0)
                bson_append_value(dst, k, (int)kl, bson_iter_value(&it));
            else
                append_group(dst, k, kl, bson_iter_value(&it), grp, g);
        }
    }
    for (size_t j = 0; j < n; j++) {
        if (used[j])
            continue;
        size_t kl = first_len(ps[j].path), g = 0;
        for (size_t m = j; m < n; m++) {
            if (!used[m] && first_len(ps[m].path) == kl && strncmp(ps[m].path, ps[j].path, kl) == 0) {
                grp[g++] = ps[m];
                used[m] = true;
            }
        }
        char *key = bson_strndup(ps[j].path, kl);
        append_group(dst, key, kl, NULL, grp, g);
        bson_free(key);
    }
    bson_free(used);
    bson_free(grp);
}

/*
 * run_partition: computes the outputs for the wrapped documents wr[0..n)
 * (one partition, sorted) and appends the rewritten documents to out. The
 * wrappers stay owned by the caller.
 */
static int
run_partition(const mf_window_t *w, bson_t **wr, size_t n, int64_t fn_limit, mf_docvec_t *out, mf_error_t *err)
{
    part_t p;
    bson_value_t *res = NULL;
    setp_t *ps = NULL;
    int rc = -1;

    p.n = n;
    p.fn_limit = fn_limit;
    /* bson_t wants 128-byte alignment, which bson_malloc does not give. */
    p.docs = bson_aligned_alloc0(_Alignof(bson_t), (n ? n : 1) * sizeof *p.docs);
    for (size_t i = 0; i < n; i++) {
        bson_iter_t it;
        const uint8_t *data = NULL;
        uint32_t len = 0;
        if (bson_iter_init_find(&it, wr[i], "d") && BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &len, &data);
        if (data == NULL || !bson_init_static(&p.docs[i], data, len))
            bson_init(&p.docs[i]);
    }
    res = bson_malloc0((w->nf * n > 0 ? w->nf * n : 1) * sizeof *res);
    size_t done_fields = 0;
    for (size_t k = 0; k < w->nf; k++) {
        if (compute_field(w, &w->f[k], &p, res + k * n, err) < 0)
            goto done;
        done_fields++;
    }
    ps = bson_malloc((w->nf ? w->nf : 1) * sizeof *ps);
    for (size_t i = 0; i < n; i++) {
        bson_t *d = bson_new();
        for (size_t k = 0; k < w->nf; k++) {
            ps[k].path = w->f[k].path;
            ps[k].v = &res[k * n + i];
        }
        set_level(d, &p.docs[i], ps, w->nf);
        if (mf_check_doc_built_size(d, err) != 0) {
            /* mongod's BSONObjMaxInternalSize, e.g. a $push over a partition of large documents. */
            bson_destroy(d);
            goto done;
        }
        mf_docvec_push_steal(out, d);
    }
    rc = 0;
done:
    for (size_t k = 0; k < done_fields; k++)
        for (size_t i = 0; i < n; i++)
            mf_value_free(&res[k * n + i]);
    bson_free(res);
    bson_free(ps);
    bson_free(p.docs);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Wrapping, sorting, partitioning                                          */
/* ------------------------------------------------------------------------ */

/* wrap: {k: partition key (null when missing), d: doc}; takes ownership of doc. */
static int
wrap(const mf_window_t *w, bson_t *doc, bson_t **out, mf_error_t *err)
{
    bson_value_t k;
    *out = NULL;
    mf_value_set_null(&k);
    if (w->partition != NULL) {
        if (mf_expr_eval(w->partition, doc, &k, err) < 0) {
            bson_destroy(doc);
            return -1;
        }
        if (k.value_type == BSON_TYPE_ARRAY) {
            mf_value_free(&k);
            bson_destroy(doc);
            return mf_err_set(err, MF_E_TypeMismatch, "Cannot 'partitionBy' an expression of type array");
        }
        if (k.value_type == BSON_TYPE_EOD)
            mf_value_set_null(&k);
    }
    bson_t *r = bson_sized_new(doc->len + 32);
    mf_bson_append_value(r, "k", 1, &k);
    bson_append_document(r, "d", 1, doc);
    mf_value_free(&k);
    bson_destroy(doc);
    *out = r;
    return 0;
}

static void
unwrap_key(const bson_t *b, bson_value_t *k)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, b, "k"))
        *k = *bson_iter_value(&it);
    else
        mf_value_set_null(k);
}

static int
wrapped_cmp(void *arg, const bson_t *a, const bson_t *b)
{
    const mf_window_t *w = arg;
    bson_value_t ka, kb;
    unwrap_key(a, &ka);
    unwrap_key(b, &kb);
    int c = mf_value_cmp(&ka, &kb);
    if (c != 0 || w->sort == NULL)
        return c;
    bson_iter_t ia, ib;
    const uint8_t *da = NULL, *db = NULL;
    uint32_t la = 0, lb = 0;
    bson_t va, vb;
    if (bson_iter_init_find(&ia, a, "d"))
        bson_iter_document(&ia, &la, &da);
    if (bson_iter_init_find(&ib, b, "d"))
        bson_iter_document(&ib, &lb, &db);
    if (da == NULL || db == NULL || !bson_init_static(&va, da, la) || !bson_init_static(&vb, db, lb))
        return 0;
    return mf_sort_cmp(w->sort, &va, &vb);
}

static bool
same_partition(const bson_t *a, const bson_t *b)
{
    bson_value_t ka, kb;
    unwrap_key(a, &ka);
    unwrap_key(b, &kb);
    return mf_value_cmp(&ka, &kb) == 0;
}

/* merge_sort: stable sort of v[0..n) by wrapped_cmp (tmp: n scratch slots). */
static void
merge_sort(const mf_window_t *w, bson_t **v, bson_t **tmp, size_t n)
{
    if (n < 2)
        return;
    size_t m = n / 2;
    merge_sort(w, v, tmp, m);
    merge_sort(w, v + m, tmp, n - m);
    size_t i = 0, j = m, k = 0;
    while (i < m && j < n)
        tmp[k++] = wrapped_cmp((void *)w, v[j], v[i]) < 0 ? v[j++] : v[i++];
    while (i < m)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

int
mf_window_run(const mf_window_t *w, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    size_t n = in->len;
    bson_t **wr = bson_malloc0((n ? n : 1) * sizeof *wr);
    bson_t **tmp = NULL;
    int rc = -1;

    for (size_t i = 0; i < n; i++) {
        bson_t *d = in->docs[i];
        in->docs[i] = NULL;
        if (wrap(w, d, &wr[i], err) < 0) {
            for (size_t j = i + 1; j < n; j++)
                bson_destroy(in->docs[j]);
            goto done;
        }
    }
    tmp = bson_malloc((n ? n : 1) * sizeof *tmp);
    merge_sort(w, wr, tmp, n);
    for (size_t s = 0; s < n;) {
        size_t e = s + 1;
        while (e < n && same_partition(wr[s], wr[e]))
            e++;
        if (run_partition(w, wr + s, e - s, 0, out, err) < 0)
            goto done;
        s = e;
    }
    rc = 0;
done:
    for (size_t i = 0; i < n; i++)
        if (wr[i])
            bson_destroy(wr[i]);
    bson_free(wr);
    bson_free(tmp);
    in->len = 0;
    mf_docvec_destroy(in);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Streaming                                                                */
/* ------------------------------------------------------------------------ */

struct mf_window_stream {
    const mf_window_t *w;
    mf_sorter_t *sorter;
    int64_t part_bytes;
    bool allow_disk;
    bson_t *pending; /* first document of the next partition, already read */
    bool eof;
};

mf_window_stream_t *
mf_window_stream_new(const mf_window_t *w, int64_t sort_bytes, int64_t part_bytes, bool allow_disk,
                     const char *tmp_dir)
{
    mf_window_stream_t *ws = bson_malloc0(sizeof *ws);
    ws->w = w;
    ws->part_bytes = part_bytes;
    ws->allow_disk = allow_disk;
    ws->sorter = mf_sorter_new_sort(wrapped_cmp, (void *)w, sort_bytes, allow_disk, tmp_dir);
    return ws;
}

void
mf_window_stream_free(mf_window_stream_t *ws)
{
    if (ws == NULL)
        return;
    mf_sorter_free(ws->sorter);
    if (ws->pending)
        bson_destroy(ws->pending);
    bson_free(ws);
}

int
mf_window_stream_add(mf_window_stream_t *ws, bson_t *doc, mf_error_t *err)
{
    bson_t *wd;
    if (wrap(ws->w, doc, &wd, err) < 0)
        return -1;
    return mf_sorter_add(ws->sorter, wd, err);
}

int
mf_window_stream_finish(mf_window_stream_t *ws, mf_error_t *err)
{
    if (mf_sorter_finish(ws->sorter, err) < 0)
        return -1;
    return mf_sorter_next(ws->sorter, &ws->pending, err);
}

int
mf_window_stream_next(mf_window_stream_t *ws, mf_docvec_t *out, bool *eof, mf_error_t *err)
{
    bson_t **v = NULL;
    size_t n = 0, cap = 0;
    int64_t bytes = 0;
    int rc = -1;

    *eof = false;
    if (ws->pending == NULL) {
        *eof = true;
        return 0;
    }
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = bson_realloc(v, cap * sizeof *v);
        }
        /* Each document is held twice while its partition is computed (input and output), as mongod counts its cache. */
        bytes += 2 * (int64_t)ws->pending->len + (int64_t)sizeof(bson_t);
        v[n++] = ws->pending;
        ws->pending = NULL;
        if (bytes > ws->part_bytes && !ws->allow_disk) {
            mf_err_set(err, MF_E_Location5643011,
                       "Exceeded memory limit in DocumentSourceSetWindowFields, used %lld bytes but max allowed is "
                       "%lld. Pass allowDiskUse:true to opt in.",
                       (long long)bytes, (long long)ws->part_bytes);
            goto done;
        }
        if (mf_sorter_next(ws->sorter, &ws->pending, err) < 0)
            goto done;
        if (ws->pending == NULL || !same_partition(v[0], ws->pending))
            break;
        if ((n & 1023) == 0 && mf_exec_check_deadline(err) != 0)
            goto done;
    }
    rc = run_partition(ws->w, v, n, ws->part_bytes, out, err);
done:
    for (size_t i = 0; i < n; i++)
        bson_destroy(v[i]);
    bson_free(v);
    return rc;
}

int64_t
mf_window_stream_spills(const mf_window_stream_t *ws)
{
    return ws ? mf_sorter_spilled(ws->sorter) : 0;
}
