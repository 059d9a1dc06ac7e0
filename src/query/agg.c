/*
 * agg.c: aggregation pipelines (parse once, run over documents from mf_agg_env_t).
 *
 * Design. mf_pipeline_new validates every stage up front and turns it into a
 * stage_t holding its parsed form (matcher, sort, expression trees,
 * projection trees, sub-pipelines). mf_pipeline_run materialises the source
 * collection into an mf_docvec_t through env->scan (passing a leading
 * $match's filter down; the stage still runs, which is harmless) and then
 * runs the stages one by one, each consuming its input vector and producing
 * a new one. Documents in the vectors are always owned by the vector holding
 * them; a stage that keeps a document moves the pointer and zeroes the
 * source vector's length before destroying it.
 *
 * Projections ($project, $unset, $addFields/$set) are query/project.c's,
 * the engine find uses (mf_projection_new_agg, mf_projection_new_add_fields):
 * one implementation, MongoDB's error codes for both.
 *
 * $group hashes group keys with a hash consistent with mf_value_cmp equality
 * (numbers hash by their double value) and keeps groups in first-seen order.
 * $lookup scans the foreign collection once per run and matches with an
 * mf_matcher built from {foreignField: {$in: [local values]}}, which gives
 * MongoDB's query semantics (array traversal; null matches missing). A
 * sub-pipeline then runs, per local document, over the matched (or, without
 * localField, all) foreign documents. Its "let" variables are handled through
 * expr.c's thread-local ambient frames: the sub-pipeline is parsed with the
 * names installed (so "$$name" is accepted by the matcher's $expr and by
 * projections) and run with the values evaluated against the local document
 * installed; frames chain, so nested $lookups see outer variables. Frames
 * are always removed before returning, on error paths too.
 *
 * Source stages. $documents, $currentOp, $listLocalSessions and
 * $listSessions must come first; a pipeline that starts with one is
 * "collectionless": mf_pipeline_run skips env->scan and the stage replaces
 * its (empty) input with its own documents ($documents evaluates its
 * expression at run time, so it may use let variables inside a $lookup;
 * $currentOp asks env->current_op, the session stages env->list_sessions). $sample shuffles with a
 * per-run xorshift generator (partial Fisher-Yates) and keeps size documents.
 * $group's $stdDevPop/$stdDevSamp use Welford's running mean. The "multi"
 * accumulators ($firstN ... $bottomN, $median, $percentile: accx_*) keep a
 * bounded sorted list per group; their partial states spill like the others.
 *
 * $redact evaluates its expression per (sub)document with $$DESCEND,
 * $$PRUNE and $$KEEP installed as an ambient variable frame (the strings
 * "descend", "prune", "keep", as mongod binds them), so expr.c needs no
 * change; the (sub)document is the expression's root, so $$ROOT there is
 * the current subdocument, not the top-level one. $bucketAuto sorts its
 * (materialised) input by groupBy and cuts buckets as mongod's
 * populateBuckets does, rounding with mongod's granularity rounders.
 * $unionWith appends, after its input, its collection's documents run
 * through its sub-pipeline (streaming: the input passes through first).
 * $graphLookup runs a breadth-first search per input document, one
 * env->scan of 'from' per depth with {connectToField: {$in: frontier}},
 * de-duplicating by _id.
 *
 * $densify and $fill are desugared at parse time too (agg_densify.c,
 * through mf_densify_desugar in mf_pipeline_new): into $sort +
 * $_internalDensify (S_DENSIFY, a pull iterator), resp. $setWindowFields +
 * $addFields.
 *
 * $bucket is desugared at parse time, as MongoDB does, into a $group whose
 * _id is a $switch over the boundaries, followed by a sort on _id. The
 * write stages $out and $merge must be last; they hand their input to
 * env->write_out (the command layer writes it, outside the catalog read
 * lock) and produce no documents.
 *
 * Rewrites (optimize_pipeline, after parsing): mongod's optimizer rules
 * that cannot change results, repeated until none applies: consecutive
 * $match stages joined, $skip / $limit ahead of one-for-one reshaping and
 * joined in runs, and a $match (or the part of it independent of what the
 * stage before changes: agg_optimize.c) moved ahead of $sort, $project,
 * $addFields / $set, $unset, $unwind, $lookup and $group, so it reaches
 * the front and the query plan as in mongod; a $lookup takes in an $unwind
 * of its `as` and a $match on `as` after it (stage_t.unwind, lu_filter).
 *
 * Streaming (mf_agg_stream_*, at the end of this file). The command layer
 * asks mf_pipeline_pushdown which leading stages ($match, an index-provided
 * $sort, $skip, $limit) the query planner can run, plans them as find
 * would, and pulls the rest through a chain of per-stage iterators whose
 * source is the plan (env->pull). A $group by a field path with only $first
 * or only $last accumulators, after them, may be run by a DISTINCT_SCAN
 * (mongod's $groupByDistinctScan: group_distinct_prepare, pd->group_key),
 * each document it returns becoming the group's output. Blocking stages
 * hold a memory budget and spill to disk through agg_spill.c.
 * mf_pipeline_run (materialising) is still used for views, $lookup/$facet
 * sub-pipelines, collectionless pipelines and $out/$merge.
 */
#include "query/agg.h"
#include "doc/dec128.h"
#include "doc/sum.h"
#include "doc/collation.h"
#include "common/limits.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "doc/bucket.h"
#include "doc/expr.h"
#include "doc/geo.h"
#include "doc/match.h"
#include "doc/path.h"
#include "doc/project.h"
#include "doc/sort.h"
#include "doc/value.h"
#include "query/agg_densify.h"
#include "query/agg_geo.h"
#include "query/agg_optimize.h"
#include "query/agg_spill.h"
#include "query/agg_window.h"
#include "query/exec.h"
#include "doc/text.h"

static int sub_text_check(const struct mf_pipeline *sub, mf_error_t *err);

enum stage_kind { S_MATCH, S_PROJECT, S_ADDFIELDS, S_UNSET, S_SORT, S_LIMIT, S_SKIP, S_GROUP, S_COUNT,
                  S_UNWIND, S_REPLACEROOT, S_SORTBYCOUNT, S_LOOKUP, S_FACET, S_SAMPLE, S_CURRENTOP, S_LISTSESSIONS,
                  S_DOCUMENTS, S_BUCKET, S_OUT, S_MERGE, S_UNPACK, S_REDACT, S_BUCKETAUTO, S_UNIONWITH,
                  S_GRAPHLOOKUP, S_WINDOW, S_GEONEAR, S_DENSIFY };

/* ---- accumulators ---- */

enum acc_kind { AC_SUM, AC_AVG, AC_MIN, AC_MAX, AC_FIRST, AC_LAST, AC_PUSH, AC_ADDTOSET, AC_COUNT, AC_MERGEOBJECTS,
                AC_STDDEVPOP, AC_STDDEVSAMP, AC_SETUNION, AC_CONCATARRAYS,
                /* the "multi" accumulators (accx_*): a bounded list of values per group */
                AC_FIRSTN, AC_LASTN, AC_MINN, AC_MAXN, AC_TOP, AC_BOTTOM, AC_TOPN, AC_BOTTOMN, AC_MEDIAN,
                AC_PERCENTILE };

typedef struct acc_def {
    char *field;
    int kind;
    mf_expr_t *expr;      /* NULL for $count; the input / output expression */
    const char *op;       /* the operator's name, for messages (static) */
    mf_expr_t *n_expr;    /* $firstN...$bottomN: n, evaluated with the group key as root */
    mf_expr_t **sort_exprs; /* $top...$bottomN: "$<field>" of each sortBy key */
    size_t nsort;
    mf_sort_t *sort;      /* ... ordering the key documents {"0": v0, "1": v1, ...} */
    double *ps;           /* $percentile: p ($median: {0.5}) */
    size_t nps;
} acc_def_t;

static bool
acc_is_multi(int kind)
{
    return kind >= AC_FIRSTN;
}

/*
 * User variables bound outside any expression ($lookup's and $merge's let):
 * their names and expressions, installed as an expr.c ambient frame to
 * parse the pipeline that uses them, and evaluated against one document
 * (the local one, the incoming one) to run it.
 */
typedef struct let_vars {
    char **names;      /* owned */
    mf_expr_t **exprs; /* owned; an entry NULL only after a failed let_vars_add */
    size_t n;
} let_vars_t;

/* let_vars_add: adds variable name = v (checked, parsed) to lv; 0, or -1 with err. */
static int
let_vars_add(let_vars_t *lv, const char *name, const bson_value_t *v, mf_error_t *err)
{
    if (mf_expr_check_var_name(name, err) < 0)
        return -1;
    lv->names = bson_realloc(lv->names, (lv->n + 1) * sizeof *lv->names);
    lv->exprs = bson_realloc(lv->exprs, (lv->n + 1) * sizeof *lv->exprs);
    lv->names[lv->n] = bson_strdup(name);
    lv->exprs[lv->n] = mf_expr_parse(v, err);
    lv->n++;
    return lv->exprs[lv->n - 1] == NULL ? -1 : 0;
}

/* let_vars_free: frees lv's contents (lv itself is the caller's). */
static void
let_vars_free(let_vars_t *lv)
{
    for (size_t i = 0; i < lv->n; i++) {
        bson_free(lv->names[i]);
        mf_expr_free(lv->exprs[i]);
    }
    bson_free(lv->names);
    bson_free(lv->exprs);
}

/*
 * let_vars_eval: lv's values against doc into *vals (NULL when lv has none;
 * else owned, released with let_vals_free(*vals, lv->n), errors included).
 * 0, or -1 with err.
 */
static int
let_vars_eval(const let_vars_t *lv, const bson_t *doc, bson_value_t **vals, mf_error_t *err)
{
    int rc = 0;
    *vals = NULL;
    if (lv->n == 0)
        return 0;
    *vals = bson_malloc0(lv->n * sizeof **vals);
    for (size_t i = 0; i < lv->n; i++)
        (*vals)[i].value_type = BSON_TYPE_EOD;
    for (size_t i = 0; i < lv->n && rc == 0; i++)
        rc = mf_expr_eval(lv->exprs[i], doc, &(*vals)[i], err);
    return rc == 0 ? 0 : -1;
}

static void
let_vals_free(bson_value_t *vals, size_t n)
{
    for (size_t i = 0; vals != NULL && i < n; i++)
        mf_value_free(&vals[i]);
    bson_free(vals);
}

typedef struct stage {
    int kind;
    bson_t *spec;           /* $match filter, $currentOp options, $listLocalSessions / $listSessions options */
    mf_matcher_t *matcher;  /* $match */
    mf_sort_t *sort;        /* $sort, $sortByCount */
    int64_t n;              /* $limit, $skip, $sample size, $bucketAuto buckets, $graphLookup maxDepth (-1: none) */
    int gran;               /* $bucketAuto granularity: 0 none, else index + 1 in granularities[] */
    mf_projection_t *projection; /* $project, $unset, $addFields (query/project.c, shared with find) */
    mf_expr_t *expr;        /* $group _id, $replaceRoot, $sortByCount, $documents */
    acc_def_t *accs;        /* $group */
    size_t naccs;
    char *field;            /* $count name, $unwind path, $lookup as */
    char *index_field;      /* $unwind includeArrayIndex */
    bool preserve;          /* $unwind; $replaceRoot: spelled $replaceWith */
    char *from, *local, *foreign; /* $lookup; $out/$merge: from = target collection, local = its db (or NULL) */
    struct mf_pipeline *sub;       /* $lookup pipeline */
    struct stage *unwind;          /* $lookup: the $unwind of `as` it absorbed (DocumentSourceLookUp's unwindSrc); owned */
    bson_t *lu_spec;               /* $lookup with an absorbed stage: the user's argument, for explain */
    bson_t *lu_filter;             /* ... the absorbed $match on `as`, descended (additionalFilter) */
    mf_matcher_t *lu_matcher;      /* ... and its matcher */
    let_vars_t let;                /* $lookup let */
    bson_t *redact_for;            /* $redact: the $match after it whose redact-safe part it last put before it */
    char **facet_names;     /* $facet */
    struct mf_pipeline **facets;
    size_t nfacets;
    mf_window_t *window;    /* $setWindowFields (agg_window.c) */
    mf_geonear_t *geonear;  /* $geoNear (agg_geo.c) */
    bool geo_meta;          /* $geoNear: add the hidden metadata fields (MF_GEO_DIST_FIELD ...) to its output */
    mf_densify_t *densify;  /* $_internalDensify, what $densify desugars to (agg_densify.c) */
    bson_t *raw;            /* the stage as it runs, {name: argument} (explain: mf_pipeline_explain) */
    /*
     * $group that mongod 8.0 may run as $groupByDistinctScan (group_distinct_prepare):
     * gd_key its field path (owned, NULL: not eligible), gd_last for $last accumulators,
     * gd_proj the fields it reads as mongod's dependency projection (owned; NULL: the
     * whole document).
     */
    char *gd_key;
    bool gd_last;
    bson_t *gd_proj;
    char *id_field; /* $group: _id's one field when it is {f: expr} (a missing value groups as {f: null}) */
} stage_t;

struct mf_pipeline {
    stage_t *stages;
    size_t n;
    bool collectionless; /* first stage is $documents, $currentOp, $listLocalSessions or $listSessions */
    bool writes;         /* last stage is $out or $merge */
    int text_first;      /* first stage is a $match with $text (2: under $or): its source scan is a text search */
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

/* doc_value: v becomes a view of b as a document (or, with is_array, an array) value, valid while b is. */
static void
doc_value(const bson_t *b, bool is_array, bson_value_t *v)
{
    mf_value_set_type(v, is_array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT);
    v->value.v_doc.data = (uint8_t *)bson_get_data(b);
    v->value.v_doc.data_len = b->len;
}

/* take_vec: moves every document of in to the end of out; in is left empty. */
static void
take_vec(mf_docvec_t *out, mf_docvec_t *in)
{
    for (size_t i = 0; i < in->len; i++)
        mf_docvec_push_steal(out, in->docs[i]);
    in->len = 0;
    mf_docvec_destroy(in);
}

/* An ordered list of owned fields, for in-place edits of a document. */
typedef struct fl {
    char **k;
    bson_value_t *v;
    size_t n, cap;
} fl_t;

static void
fl_push(fl_t *f, const char *k, bson_value_t *v /* stolen */)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 8;
        f->k = bson_realloc(f->k, f->cap * sizeof *f->k);
        f->v = bson_realloc(f->v, f->cap * sizeof *f->v);
    }
    f->k[f->n] = bson_strdup(k);
    f->v[f->n] = *v;
    f->n++;
}

static void
fl_from(fl_t *f, const bson_value_t *doc)
{
    bson_iter_t it;

    memset(f, 0, sizeof *f);
    if (doc == NULL || doc->value_type != BSON_TYPE_DOCUMENT)
        return;
    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        bson_value_t c;
        mf_value_copy(&c, bson_iter_value(&it));
        fl_push(f, bson_iter_key(&it), &c);
    }
}

static bson_value_t *
fl_get(fl_t *f, const char *k)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->k[i], k) == 0)
            return &f->v[i];
    return NULL;
}

/* fl_set: replaces k in place or appends it; a missing v removes k. v is stolen. */
static void
fl_set(fl_t *f, const char *k, bson_value_t *v)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->k[i], k) == 0) {
            mf_value_free(&f->v[i]);
            if (v->value_type == BSON_TYPE_EOD) {
                bson_free(f->k[i]);
                memmove(&f->k[i], &f->k[i + 1], (f->n - i - 1) * sizeof *f->k);
                memmove(&f->v[i], &f->v[i + 1], (f->n - i - 1) * sizeof *f->v);
                f->n--;
            } else {
                f->v[i] = *v;
            }
            return;
        }
    }
    if (v->value_type != BSON_TYPE_EOD)
        fl_push(f, k, v);
}

static void
fl_free(fl_t *f)
{
    for (size_t i = 0; i < f->n; i++) {
        bson_free(f->k[i]);
        mf_value_free(&f->v[i]);
    }
    bson_free(f->k);
    bson_free(f->v);
    memset(f, 0, sizeof *f);
}

/* fl_to_value: f becomes an owned document value; f is freed. */
static void
fl_to_value(fl_t *f, bson_value_t *out)
{
    bson_t b = BSON_INITIALIZER;

    for (size_t i = 0; i < f->n; i++)
        bson_append_value(&b, f->k[i], -1, &f->v[i]);
    fl_free(f);
    mf_value_take_bson(out, &b, false);
}

static bson_t *
value_to_doc(const bson_value_t *v)
{
    return bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
}

/*
 * set_path: *res = cur with dotted path set to v (missing v removes it).
 * Non-document intermediates are replaced by documents. All owned.
 */
static void
set_path(const bson_value_t *cur, const char *path, const bson_value_t *v, bson_value_t *res)
{
    const char *dot = strchr(path, '.');
    fl_t f;
    bson_value_t child;
    char *head = dot ? bson_strndup(path, (size_t)(dot - path)) : bson_strdup(path);

    fl_from(&f, cur);
    if (dot) {
        set_path(fl_get(&f, head), dot + 1, v, &child);
    } else {
        mf_value_copy(&child, v);
    }
    fl_set(&f, head, &child);
    bson_free(head);
    fl_to_value(&f, res);
}

/* doc_set_path: a new heap document: doc with path set to v. */
static bson_t *
doc_set_path(const bson_t *doc, const char *path, const bson_value_t *v)
{
    bson_value_t cur, res;
    bson_t *out;

    doc_value(doc, false, &cur);
    set_path(&cur, path, v, &res);
    out = value_to_doc(&res);
    mf_value_free(&res);
    return out;
}

/* get_path_nt: value at a dotted path descending documents only (no array traversal). */
static bool
get_path_nt(const bson_t *doc, const char *path, bson_value_t *out)
{
    bson_iter_t it, child;

    if (!bson_iter_init(&it, doc))
        return false;
    if (!bson_iter_find_descendant(&it, path, &child))
        return false;
    /* bson_iter_find_descendant indexes arrays by number; refuse array traversal. */
    {
        const char *p = path;
        bson_iter_t walk;
        bson_iter_init(&walk, doc);
        while (true) {
            const char *dot = strchr(p, '.');
            size_t l = dot ? (size_t)(dot - p) : strlen(p);
            if (!bson_iter_find_w_len(&walk, p, (int)l))
                return false;
            if (!dot)
                break;
            if (!BSON_ITER_HOLDS_DOCUMENT(&walk))
                return false;
            bson_iter_t sub;
            bson_iter_recurse(&walk, &sub);
            walk = sub;
            p = dot + 1;
        }
        *out = *bson_iter_value(&walk);
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Projection application                                                   */
/* ------------------------------------------------------------------------ */



/* ------------------------------------------------------------------------ */
/* $group                                                                   */
/* ------------------------------------------------------------------------ */

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

/* vhash: a hash consistent with mf_value_cmp equality. */
static uint64_t
vhash(const bson_value_t *v, uint64_t h)
{
    int rank = v->value_type == BSON_TYPE_EOD ? -1 : mf_value_type_rank(v->value_type);
    bson_iter_t it;

    h = mix(h, &rank, sizeof rank);
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: {
        double d = mf_value_as_double(v);
        if (d == 0 || isnan(d))
            d = isnan(d) ? NAN : 0.0;
        return mix(h, &d, sizeof d);
    }
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: {
        const char *s = v->value_type == BSON_TYPE_UTF8 ? v->value.v_utf8.str : v->value.v_symbol.symbol;
        size_t len = v->value_type == BSON_TYPE_UTF8 ? v->value.v_utf8.len : v->value.v_symbol.len;
        const mf_collation_t *coll = mf_collation_current();
        if (coll != NULL) {
            /* Strings equal under the collation must hash alike: hash the sort key. */
            uint8_t *kb = NULL;
            size_t cap = 0, n = mf_collation_key(coll, s, len, &kb, &cap);
            h = mix(h, kb, n);
            free(kb);
            return h;
        }
        return mix(h, s, len);
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            if (v->value_type == BSON_TYPE_DOCUMENT)
                h = mix(h, bson_iter_key(&it), bson_iter_key_len(&it));
            h = vhash(bson_iter_value(&it), h);
        }
        return h;
    case BSON_TYPE_OID:
        return mix(h, v->value.v_oid.bytes, 12);
    case BSON_TYPE_BOOL:
        return mix(h, &v->value.v_bool, sizeof v->value.v_bool);
    case BSON_TYPE_DATE_TIME:
        return mix(h, &v->value.v_datetime, sizeof v->value.v_datetime);
    case BSON_TYPE_TIMESTAMP:
        h = mix(h, &v->value.v_timestamp.timestamp, 4);
        return mix(h, &v->value.v_timestamp.increment, 4);
    case BSON_TYPE_BINARY:
        return mix(h, v->value.v_binary.data, v->value.v_binary.data_len);
    case BSON_TYPE_REGEX:
        h = mix(h, v->value.v_regex.regex, strlen(v->value.v_regex.regex));
        return mix(h, v->value.v_regex.options, strlen(v->value.v_regex.options));
    default:
        return h;
    }
}

typedef struct accst {
    bson_value_t v;    /* min / max / first / last / merged document */
    mf_sum_t sum;      /* sum, avg (doc/sum.h) */
    int64_t count;     /* avg, count */
    bool set;          /* first: already set */
    bson_t *arr;       /* push / addToSet (heap: bson_t needs 128-byte alignment) */
    uint32_t arrn;
    bson_value_t *seen; /* addToSet: the distinct values so far (owned copies) */
    size_t nseen, capseen;
    uint32_t *hseen;    /* addToSet: open-addressing index into seen (slot = index + 1, 0 empty) */
    size_t hcap;        /* its size, a power of two, at least twice nseen */
    double mean, m2;    /* stdDevPop/stdDevSamp: Welford's running mean and sum of squares */
    /* multi accumulators (accx_*) */
    int64_t n;          /* this group's n (0 until its first value) */
    bson_value_t *items; /* the values kept, in output order (minN/maxN/top/bottom: ascending) */
    bson_t **keys;      /* top/bottom: each item's sort key document */
    int64_t *seqs;      /* each item's arrival number */
    int64_t seq;        /* the next arrival number */
    size_t nitems, capitems;
    size_t head;        /* $lastN, once full: the oldest item */
    int64_t bytes;      /* approximate memory held by items / nums */
    double *nums;       /* $median / $percentile: the numeric inputs */
    size_t nnums, capnums;
} accst_t;

/* Places seen[i] in the hash index (which has room). */
static void
seen_index(accst_t *a, size_t i)
{
    size_t mask = a->hcap - 1, h = (size_t)vhash(&a->seen[i], 1469598103934665603ULL) & mask;
    while (a->hseen[h] != 0)
        h = (h + 1) & mask;
    a->hseen[h] = (uint32_t)(i + 1);
}

/*
 * $addToSet: true if v is in the set already; else adds a copy of v and
 * returns false. A hash index keeps this O(1) (a scan per value made 1 M
 * distinct values cost 10^12 comparisons).
 */
static bool
seen_add(accst_t *a, const bson_value_t *v)
{
    if (a->hcap > 0) {
        size_t mask = a->hcap - 1, h = (size_t)vhash(v, 1469598103934665603ULL) & mask;
        for (; a->hseen[h] != 0; h = (h + 1) & mask)
            if (mf_value_cmp(&a->seen[a->hseen[h] - 1], v) == 0)
                return true;
    }
    if (a->nseen == a->capseen) {
        a->capseen = a->capseen ? a->capseen * 2 : 8;
        a->seen = bson_realloc(a->seen, a->capseen * sizeof *a->seen);
    }
    mf_value_copy(&a->seen[a->nseen++], v);
    if (a->nseen * 2 > a->hcap) {
        a->hcap = a->hcap ? a->hcap * 2 : 16;
        while (a->nseen * 2 > a->hcap)
            a->hcap *= 2;
        bson_free(a->hseen);
        a->hseen = bson_malloc0(a->hcap * sizeof *a->hseen);
        for (size_t i = 0; i < a->nseen; i++)
            seen_index(a, i);
    } else {
        seen_index(a, a->nseen - 1);
    }
    return false;
}

typedef struct group {
    bson_value_t key;
    accst_t *acc;
    struct group *next_bucket;
} group_t;

static void
acc_init(accst_t *a, int kind)
{
    memset(a, 0, sizeof *a);
    a->v.value_type = BSON_TYPE_EOD;
    if (kind == AC_PUSH || kind == AC_ADDTOSET || kind == AC_SETUNION || kind == AC_CONCATARRAYS)
        a->arr = bson_new();
    if (kind == AC_SUM || kind == AC_AVG)
        mf_sum_init(&a->sum);
}

static void
acc_free(accst_t *a, int kind)
{
    mf_value_free(&a->v);
    if (a->arr)
        bson_destroy(a->arr);
    for (size_t i = 0; i < a->nseen; i++)
        mf_value_free(&a->seen[i]);
    bson_free(a->seen);
    bson_free(a->hseen);
    for (size_t i = 0; i < a->nitems; i++) {
        mf_value_free(&a->items[i]);
        if (a->keys)
            bson_destroy(a->keys[i]);
    }
    bson_free(a->items);
    bson_free(a->keys);
    bson_free(a->seqs);
    bson_free(a->nums);
    (void)kind;
}

static int
acc_update(accst_t *a, int kind, const bson_value_t *v, mf_error_t *err)
{
    char buf[16];
    const char *key;

    switch (kind) {
    case AC_SUM:
        mf_sum_add(&a->sum, v);
        break;
    case AC_AVG:
        if (mf_value_is_number(v)) {
            mf_sum_add(&a->sum, v);
            a->count++;
        }
        break;
    case AC_COUNT:
        a->count++;
        break;
    case AC_STDDEVPOP:
    case AC_STDDEVSAMP:
        if (mf_value_is_number(v)) {
            double x = mf_value_as_double(v), d;
            a->count++;
            d = x - a->mean;
            a->mean += d / (double)a->count;
            a->m2 += d * (x - a->mean);
        }
        break;
    case AC_MIN:
    case AC_MAX:
        if (mf_value_is_nullish(v))
            break;
        if (a->v.value_type == BSON_TYPE_EOD ||
            (kind == AC_MIN ? mf_value_cmp(v, &a->v) < 0 : mf_value_cmp(v, &a->v) > 0)) {
            mf_value_free(&a->v);
            mf_value_copy(&a->v, v);
        }
        break;
    case AC_FIRST:
        if (!a->set) {
            a->set = true;
            mf_value_copy(&a->v, v);
        }
        break;
    case AC_LAST:
        mf_value_free(&a->v);
        mf_value_copy(&a->v, v);
        a->set = true;
        break;
    case AC_PUSH:
        if (v->value_type == BSON_TYPE_EOD)
            break;
        bson_uint32_to_string(a->arrn++, &key, buf, sizeof buf);
        bson_append_value(a->arr, key, -1, v);
        if (a->arr->len > MF_MAX_ACCUMULATOR_BYTES) /* one group's array cannot spill: MongoDB's 100 MB cap */
            return mf_err_set(err, MF_E_ExceededMemoryLimit, "$push used too much memory and cannot spill to disk. "
                              "Memory limit: %d bytes", MF_MAX_ACCUMULATOR_BYTES);
        break;
    case AC_ADDTOSET:
        if (v->value_type == BSON_TYPE_EOD)
            break;
        if (seen_add(a, v))
            return 0; /* already in the set */
        bson_uint32_to_string(a->arrn++, &key, buf, sizeof buf);
        bson_append_value(a->arr, key, -1, v);
        if (a->arr->len > MF_MAX_ACCUMULATOR_BYTES)
            return mf_err_set(err, MF_E_ExceededMemoryLimit, "$addToSet used too much memory and cannot spill to "
                              "disk. Memory limit: %d bytes", MF_MAX_ACCUMULATOR_BYTES);
        break;
    case AC_SETUNION:
    case AC_CONCATARRAYS: {
        /* 8.0: both take arrays and collect their elements (a null is a type error, missing is skipped). */
        bson_iter_t it;
        const char *op = kind == AC_SETUNION ? "$setUnion" : "$concatArrays";
        if (v->value_type == BSON_TYPE_EOD)
            break;
        if (v->value_type != BSON_TYPE_ARRAY)
            return mf_err_set(err, MF_E_TypeMismatch, "%s requires array inputs, but input is of type %s", op,
                              mf_type_name(v->value_type));
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            if (kind == AC_SETUNION && seen_add(a, bson_iter_value(&it)))
                continue;
            bson_uint32_to_string(a->arrn++, &key, buf, sizeof buf);
            bson_append_value(a->arr, key, -1, bson_iter_value(&it));
        }
        if (a->arr->len > MF_MAX_ACCUMULATOR_BYTES)
            return mf_err_set(err, MF_E_ExceededMemoryLimit, "%s used too much memory and cannot spill to disk. "
                              "Memory limit: %d bytes", op, MF_MAX_ACCUMULATOR_BYTES);
        break;
    }
    case AC_MERGEOBJECTS: {
        fl_t f;
        bson_iter_t it;
        if (v->value_type == BSON_TYPE_EOD || v->value_type == BSON_TYPE_NULL)
            break;
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40400, "$mergeObjects requires object inputs, but input is of type %s",
                              mf_type_name(v->value_type));
        fl_from(&f, &a->v);
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            bson_value_t c;
            mf_value_copy(&c, bson_iter_value(&it));
            fl_set(&f, bson_iter_key(&it), &c);
        }
        mf_value_free(&a->v);
        fl_to_value(&f, &a->v);
        break;
    }
    default:
        break;
    }
    return 0;
}

static void
acc_result(accst_t *a, int kind, bson_t *out, const char *field)
{
    bson_value_t r;

    switch (kind) {
    case AC_SUM:
    case AC_AVG:
        if (kind == AC_SUM)
            mf_sum_result(&a->sum, &r);
        else
            mf_sum_avg(&a->sum, a->count, &r);
        bson_append_value(out, field, -1, &r);
        return;
    case AC_STDDEVPOP:
    case AC_STDDEVSAMP:
        if (a->count == 0 || (kind == AC_STDDEVSAMP && a->count < 2))
            bson_append_null(out, field, -1);
        else
            bson_append_double(out, field, -1,
                               sqrt(a->m2 / (double)(kind == AC_STDDEVPOP ? a->count : a->count - 1)));
        return;
    case AC_COUNT:
        if (a->count <= INT32_MAX)
            bson_append_int32(out, field, -1, (int32_t)a->count);
        else
            bson_append_int64(out, field, -1, a->count);
        return;
    case AC_MIN:
    case AC_MAX:
    case AC_FIRST:
    case AC_LAST:
        if (a->v.value_type == BSON_TYPE_EOD)
            bson_append_null(out, field, -1);
        else
            bson_append_value(out, field, -1, &a->v);
        return;
    case AC_MERGEOBJECTS:
        if (a->v.value_type == BSON_TYPE_EOD)
            bson_append_document(out, field, -1, &(bson_t)BSON_INITIALIZER);
        else
            bson_append_value(out, field, -1, &a->v);
        return;
    case AC_PUSH:
    case AC_ADDTOSET:
    case AC_SETUNION:
    case AC_CONCATARRAYS:
        bson_append_array(out, field, -1, a->arr);
        return;
    default:
        (void)r;
        return;
    }
}

/*
 * A group table: groups in first-seen order plus a hash index. mem is an
 * estimate of the bytes it holds (keys, accumulated arrays and documents),
 * checked against internalDocumentSourceGroupMaxMemoryBytes by the
 * streaming $group (see the stream section below).
 */
typedef struct gtable {
    size_t nb, ng, ocap;
    group_t **buckets, **order;
    group_t *last; /* the group gt_find returned last (NULL after gt_clear): runs of one key skip the hash */
    int64_t mem;
    int64_t *acc_mem; /* NULL, or each accumulator's share of mem (explain's maxAccumulatorMemoryUsageBytes) */
} gtable_t;

static void
gt_init(gtable_t *t)
{
    memset(t, 0, sizeof *t);
    t->nb = 64;
    t->buckets = bson_malloc0(t->nb * sizeof *t->buckets);
}

/* Approximate memory of a value (for the group budget). */
static int64_t
vsize(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return 16 + (int64_t)v->value.v_doc.data_len;
    case BSON_TYPE_UTF8:
        return 16 + (int64_t)v->value.v_utf8.len;
    case BSON_TYPE_BINARY:
        return 16 + (int64_t)v->value.v_binary.data_len;
    default:
        return 16;
    }
}

/*
 * Multi accumulators: $firstN $lastN $minN $maxN $top $bottom $topN
 * $bottomN keep at most n values per group (see accx_fold for the
 * structures), with MongoDB's accumulator_multi semantics: $minN/$maxN skip null and
 * missing, $firstN/$lastN keep them (missing as null), $top/$bottom output
 * null for a missing output and keep the first value seen on a tie. n is
 * evaluated once per group with the group key as its root document (an
 * empty one when the key is not a document), as mongod does (5787902 not a
 * number, 5787903 not integral, 5787908 not positive). $median and
 * $percentile keep the numeric inputs and answer the discrete percentile
 * (rank max(0, ceil(n * p) - 1)), which is what mongod's 'approximate'
 * method answers for small inputs. Each accumulator holds at most
 * MF_MAX_ACCUMULATOR_BYTES (146 beyond, as $push).
 */
static int
accx_set_n(accst_t *a, const acc_def_t *d, const bson_value_t *key, mf_error_t *err)
{
    bson_value_t nv;
    bson_t *root;
    int64_t n;

    if (d->n_expr == NULL) {
        a->n = (d->kind == AC_TOP || d->kind == AC_BOTTOM) ? 1 : INT64_MAX;
        return 0;
    }
    /* As mongod: the root is the group key when it is a document, else an empty document. */
    root = key->value_type == BSON_TYPE_DOCUMENT ? value_to_doc(key) : bson_new();
    int rc = mf_expr_eval(d->n_expr, root, &nv, err);
    bson_destroy(root);
    if (rc < 0)
        return -1;
    rc = mf_value_check_n(&nv, &n, err);
    mf_value_free(&nv);
    if (rc < 0)
        return -1;
    a->n = n;
    return 0;
}

/*
 * The kept items. $firstN appends until it has n; $lastN keeps a ring of
 * the last n (a->head: the oldest once full). $minN/$maxN/$top.../$bottomN
 * keep a binary heap ordered by (value or sort key, arrival number) whose
 * root is the item the next better value replaces: the greatest for $minN,
 * $top, $topN, the least for $maxN, $bottom, $bottomN; so a full
 * accumulator costs O(log n) per value, and ties keep the value seen first,
 * as mongod's multimap does.
 */
static bool
accx_is_heap(int kind)
{
    return kind == AC_MINN || kind == AC_MAXN || kind == AC_TOP || kind == AC_BOTTOM || kind == AC_TOPN ||
           kind == AC_BOTTOMN;
}

static bool
accx_max_heap(int kind)
{
    return kind == AC_MINN || kind == AC_TOP || kind == AC_TOPN;
}

/* accx_order: items i and j by (sort key or value, arrival). */
static int
accx_order(const acc_def_t *d, const accst_t *a, size_t i, size_t j)
{
    int c = d->sort ? mf_sort_cmp(d->sort, a->keys[i], a->keys[j]) : mf_value_cmp(&a->items[i], &a->items[j]);
    if (c == 0)
        c = a->seqs[i] < a->seqs[j] ? -1 : a->seqs[i] > a->seqs[j];
    return c;
}

static bool
heap_above(const acc_def_t *d, const accst_t *a, size_t i, size_t j)
{
    int c = accx_order(d, a, i, j);
    return accx_max_heap(d->kind) ? c > 0 : c < 0;
}

static void
heap_swap(accst_t *a, size_t i, size_t j)
{
    bson_value_t v = a->items[i];
    int64_t q = a->seqs[i];
    a->items[i] = a->items[j];
    a->items[j] = v;
    a->seqs[i] = a->seqs[j];
    a->seqs[j] = q;
    if (a->keys) {
        bson_t *k = a->keys[i];
        a->keys[i] = a->keys[j];
        a->keys[j] = k;
    }
}

static void
heap_up(const acc_def_t *d, accst_t *a, size_t i)
{
    while (i > 0 && heap_above(d, a, i, (i - 1) / 2)) {
        heap_swap(a, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void
heap_down(const acc_def_t *d, accst_t *a, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < a->nitems && heap_above(d, a, l, m))
            m = l;
        if (r < a->nitems && heap_above(d, a, r, m))
            m = r;
        if (m == i)
            return;
        heap_swap(a, i, m);
        i = m;
    }
}

/* accx_put: sets slot i (== nitems to append) to a copy of v and key (stolen), with the next arrival number. */
static void
accx_put(accst_t *a, size_t i, const bson_value_t *v, bson_t *key)
{
    if (i == a->nitems) {
        if (a->nitems == a->capitems) {
            a->capitems = a->capitems ? a->capitems * 2 : 8;
            a->items = bson_realloc(a->items, a->capitems * sizeof *a->items);
            a->seqs = bson_realloc(a->seqs, a->capitems * sizeof *a->seqs);
            if (key != NULL || a->keys != NULL)
                a->keys = bson_realloc(a->keys, a->capitems * sizeof *a->keys);
        }
        a->nitems++;
    } else {
        a->bytes -= vsize(&a->items[i]);
        mf_value_free(&a->items[i]);
        if (a->keys) {
            a->bytes -= (int64_t)a->keys[i]->len;
            bson_destroy(a->keys[i]);
        }
    }
    mf_value_copy(&a->items[i], v);
    a->seqs[i] = a->seq++;
    a->bytes += vsize(v);
    if (key) {
        a->keys[i] = key;
        a->bytes += (int64_t)key->len;
    }
}

/*
 * accx_fold: adds one value (and, for top/bottom, its key document, stolen)
 * to a multi accumulator whose n is set. Returns 0 or -1 with err (146).
 */
static int
accx_fold(accst_t *a, const acc_def_t *d, const bson_value_t *v, bson_t *key, mf_error_t *err)
{
    bson_value_t null_v;
    mf_value_set_null(&null_v);

    switch (d->kind) {
    case AC_FIRSTN:
        if ((int64_t)a->nitems >= a->n)
            return 0;
        accx_put(a, a->nitems, v->value_type == BSON_TYPE_EOD ? &null_v : v, NULL);
        break;
    case AC_LASTN:
        if (v->value_type == BSON_TYPE_EOD)
            v = &null_v;
        if ((int64_t)a->nitems < a->n) {
            accx_put(a, a->nitems, v, NULL);
        } else {
            accx_put(a, a->head, v, NULL); /* over the oldest */
            a->head = (a->head + 1) % a->nitems;
        }
        break;
    case AC_MINN:
    case AC_MAXN:
    case AC_TOP:
    case AC_BOTTOM:
    case AC_TOPN:
    case AC_BOTTOMN: {
        if (d->kind == AC_MINN || d->kind == AC_MAXN) {
            if (mf_value_is_nullish(v))
                return 0;
        } else if (v->value_type == BSON_TYPE_EOD) {
            v = &null_v;
        }
        if ((int64_t)a->nitems >= a->n) {
            /* Replace the root only when the new value is strictly better (a tie keeps the first seen). */
            int c = d->sort ? mf_sort_cmp(d->sort, key, a->keys[0]) : mf_value_cmp(v, &a->items[0]);
            if (accx_max_heap(d->kind) ? c >= 0 : c <= 0) {
                if (key)
                    bson_destroy(key);
                return 0;
            }
            accx_put(a, 0, v, key);
            heap_down(d, a, 0);
        } else {
            accx_put(a, a->nitems, v, key);
            heap_up(d, a, a->nitems - 1);
        }
        break;
    }
    case AC_MEDIAN:
    case AC_PERCENTILE:
        if (!mf_value_is_number(v))
            return 0;
        if (a->nnums == a->capnums) {
            a->capnums = a->capnums ? a->capnums * 2 : 16;
            a->nums = bson_realloc(a->nums, a->capnums * sizeof *a->nums);
        }
        a->nums[a->nnums++] = mf_value_as_double(v);
        a->bytes += (int64_t)sizeof(double);
        break;
    default:
        break;
    }
    if (a->bytes > MF_MAX_ACCUMULATOR_BYTES)
        return mf_err_set(err, MF_E_ExceededMemoryLimit,
                          "%s used too much memory and cannot spill to disk. Memory limit: %d bytes", d->op,
                          MF_MAX_ACCUMULATOR_BYTES);
    return 0;
}

typedef struct accx_sort_ctx {
    const acc_def_t *d;
    const accst_t *a;
    bool by_seq;
} accx_sort_ctx_t;

static int
accx_idx_cmp(const void *x, const void *y, void *arg)
{
    const accx_sort_ctx_t *c = arg;
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    if (c->by_seq)
        return c->a->seqs[i] < c->a->seqs[j] ? -1 : c->a->seqs[i] > c->a->seqs[j];
    return accx_order(c->d, c->a, i, j);
}

/*
 * accx_order_idx: the indexes of a's items in output order (by_seq: arrival
 * order, for partial states). Owned by the caller.
 */
static size_t *
accx_order_idx(const accst_t *a, const acc_def_t *d, bool by_seq)
{
    size_t *idx = bson_malloc((a->nitems ? a->nitems : 1) * sizeof *idx);
    for (size_t i = 0; i < a->nitems; i++)
        idx[i] = d->kind == AC_LASTN ? (a->head + i) % a->nitems : i;
    if (accx_is_heap(d->kind) && a->nitems > 1) {
        accx_sort_ctx_t c = {d, a, by_seq};
        qsort_r(idx, a->nitems, sizeof *idx, accx_idx_cmp, &c);
    }
    return idx;
}

/* accx_key: the sort key document {"0": <sortBy field 0>, ...} of doc for top/bottom. */
static int
accx_key(const acc_def_t *d, const bson_t *doc, bson_t **out, mf_error_t *err)
{
    bson_t *k = bson_new();
    for (size_t i = 0; i < d->nsort; i++) {
        bson_value_t v;
        char buf[16];
        const char *key;
        if (mf_expr_eval(d->sort_exprs[i], doc, &v, err) < 0) {
            bson_destroy(k);
            return -1;
        }
        bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        if (v.value_type != BSON_TYPE_EOD)
            bson_append_value(k, key, -1, &v);
        mf_value_free(&v);
    }
    *out = k;
    return 0;
}

/* accx_add: folds doc into a multi accumulator of the group keyed by key; *mem grows by the bytes it now holds more. */
static int
accx_add(accst_t *a, const acc_def_t *d, const bson_value_t *gkey, const bson_t *doc, int64_t *mem, mf_error_t *err)
{
    bson_value_t v;
    bson_t *key = NULL;
    int64_t before = a->bytes;
    int rc;

    if (a->n == 0 && accx_set_n(a, d, gkey, err) < 0)
        return -1;
    if (mf_expr_eval(d->expr, doc, &v, err) < 0)
        return -1;
    if (d->sort && accx_key(d, doc, &key, err) < 0) {
        mf_value_free(&v);
        return -1;
    }
    rc = accx_fold(a, d, &v, key, err);
    mf_value_free(&v);
    *mem += a->bytes - before;
    return rc;
}

/* accx_result: appends the final value of a multi accumulator as field of out. */
static void
accx_result(accst_t *a, const acc_def_t *d, bson_t *out, const char *field)
{
    bson_t arr;

    if (d->kind == AC_MEDIAN || d->kind == AC_PERCENTILE) {
        if (a->nnums > 1)
            qsort(a->nums, a->nnums, sizeof *a->nums, mf_value_double_cmp);
        if (d->kind == AC_PERCENTILE)
            bson_append_array_begin(out, field, -1, &arr);
        for (size_t i = 0; i < d->nps; i++) {
            char buf[16];
            const char *key;
            bson_t *dst = d->kind == AC_PERCENTILE ? &arr : out;
            if (d->kind == AC_PERCENTILE)
                bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
            else
                key = field;
            if (a->nnums == 0) {
                bson_append_null(dst, key, -1);
                continue;
            }
            bson_append_double(dst, key, -1, a->nums[mf_value_percentile_index(d->ps[i], a->nnums)]);
        }
        if (d->kind == AC_PERCENTILE)
            bson_append_array_end(out, &arr);
        return;
    }
    if (d->kind == AC_TOP || d->kind == AC_BOTTOM) {
        if (a->nitems == 0)
            bson_append_null(out, field, -1);
        else
            bson_append_value(out, field, -1, &a->items[0]);
        return;
    }
    size_t *idx = accx_order_idx(a, d, false);
    bson_append_array_begin(out, field, -1, &arr);
    for (size_t j = 0; j < a->nitems; j++) {
        char buf[16];
        const char *key;
        size_t i = idx[d->kind == AC_MAXN ? a->nitems - 1 - j : j]; /* $maxN: descending */
        bson_uint32_to_string((uint32_t)j, &key, buf, sizeof buf);
        bson_append_value(&arr, key, -1, &a->items[i]);
    }
    bson_append_array_end(out, &arr);
    bson_free(idx);
}

/* accx_state: a multi accumulator's partial state {n, items: [{k, o}...], nums: [...]} (a spilling $group). */
static void
accx_state(const accst_t *a, const acc_def_t *d, bson_t *out, const char *key)
{
    bson_t st, arr;
    char buf[16];
    const char *ik;
    size_t *idx = accx_order_idx(a, d, true); /* arrival order, so a merge keeps first-seen ties */

    bson_append_document_begin(out, key, -1, &st);
    bson_append_int64(&st, "n", 1, a->n);
    bson_append_array_begin(&st, "items", 5, &arr);
    for (size_t j = 0; j < a->nitems; j++) {
        bson_t it;
        size_t i = idx[j];
        bson_uint32_to_string((uint32_t)j, &ik, buf, sizeof buf);
        bson_append_document_begin(&arr, ik, -1, &it);
        if (a->keys)
            bson_append_document(&it, "k", 1, a->keys[i]);
        bson_append_value(&it, "o", 1, &a->items[i]);
        bson_append_document_end(&arr, &it);
    }
    bson_free(idx);
    bson_append_array_end(&st, &arr);
    bson_append_array_begin(&st, "nums", 4, &arr);
    for (size_t i = 0; i < a->nnums; i++) {
        bson_uint32_to_string((uint32_t)i, &ik, buf, sizeof buf);
        bson_append_double(&arr, ik, -1, a->nums[i]);
    }
    bson_append_array_end(&st, &arr);
    bson_append_document_end(out, &st);
}

/* accx_merge: folds a partial state (accx_state) into a live multi accumulator, in input order. */
static int
accx_merge(accst_t *a, const acc_def_t *d, const bson_t *st, mf_error_t *err)
{
    bson_iter_t it, ai;

    if (a->n == 0 && bson_iter_init_find(&it, st, "n"))
        a->n = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, st, "items") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_recurse(&it, &ai);
        while (bson_iter_next(&ai)) {
            bson_iter_t f;
            bson_t *key = NULL;
            bson_value_t o;
            mf_value_set_null(&o);
            if (bson_iter_recurse(&ai, &f) && bson_iter_find(&f, "k") && BSON_ITER_HOLDS_DOCUMENT(&f)) {
                const uint8_t *data;
                uint32_t len;
                bson_iter_document(&f, &len, &data);
                key = bson_new_from_data(data, len);
            }
            if (bson_iter_recurse(&ai, &f) && bson_iter_find(&f, "o"))
                o = *bson_iter_value(&f);
            if (d->sort && key == NULL)
                key = bson_new();
            if (accx_fold(a, d, &o, key, err) < 0)
                return -1;
        }
    }
    if (bson_iter_init_find(&it, st, "nums") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_recurse(&it, &ai);
        while (bson_iter_next(&ai))
            if (accx_fold(a, d, bson_iter_value(&ai), NULL, err) < 0)
                return -1;
    }
    return 0;
}

/* gt_find: the group for key (takes ownership of *key's contents when it creates one). */
static group_t *
gt_find(gtable_t *t, const stage_t *s, bson_value_t *key)
{
    if (t->last != NULL && mf_value_cmp(&t->last->key, key) == 0)
        return t->last;
    uint64_t h = vhash(key, 1469598103934665603ULL);
    group_t *g;
    for (g = t->buckets[h % t->nb]; g; g = g->next_bucket)
        if (mf_value_cmp(&g->key, key) == 0)
            return t->last = g;
    g = bson_malloc0(sizeof *g);
    t->last = g;
    g->key = *key;
    key->value_type = BSON_TYPE_EOD;
    g->acc = bson_malloc0((s->naccs ? s->naccs : 1) * sizeof *g->acc);
    for (size_t a = 0; a < s->naccs; a++)
        acc_init(&g->acc[a], s->accs[a].kind);
    g->next_bucket = t->buckets[h % t->nb];
    t->buckets[h % t->nb] = g;
    t->mem += 96 + vsize(&g->key) + 64 * (int64_t)s->naccs;
    if (t->ng == t->ocap) {
        t->ocap = t->ocap ? t->ocap * 2 : 64;
        t->order = bson_realloc(t->order, t->ocap * sizeof *t->order);
    }
    t->order[t->ng++] = g;
    if (t->ng > t->nb * 2) {
        /* Grow the table and rehash. */
        size_t nnb = t->nb * 4;
        group_t **nbk = bson_malloc0(nnb * sizeof *nbk);
        for (size_t j = 0; j < t->ng; j++) {
            uint64_t hh = vhash(&t->order[j]->key, 1469598103934665603ULL);
            t->order[j]->next_bucket = nbk[hh % nnb];
            nbk[hh % nnb] = t->order[j];
        }
        bson_free(t->buckets);
        t->buckets = nbk;
        t->nb = nnb;
    }
    return g;
}

/*
 * group_fold: folds doc into every accumulator of group g; *mem grows by
 * the bytes they now hold more, and acc_mem[a] (when not NULL) by
 * accumulator a's part of them.
 */
static int
group_fold(int64_t *mem, int64_t *acc_mem, const stage_t *s, group_t *g, const bson_t *doc, mf_error_t *err)
{
    for (size_t a = 0; a < s->naccs; a++) {
        bson_value_t v;
        int kind = s->accs[a].kind;
        int64_t before = *mem;
        if (acc_is_multi(kind)) {
            if (accx_add(&g->acc[a], &s->accs[a], &g->key, doc, mem, err) < 0)
                return -1;
            if (acc_mem != NULL)
                acc_mem[a] += *mem - before;
            continue;
        }
        v.value_type = BSON_TYPE_EOD;
        if (s->accs[a].expr && mf_expr_eval(s->accs[a].expr, doc, &v, err) < 0)
            return -1;
        if (kind == AC_PUSH || kind == AC_ADDTOSET || kind == AC_MERGEOBJECTS || kind == AC_SETUNION ||
            kind == AC_CONCATARRAYS)
            *mem += vsize(&v);
        int rc = acc_update(&g->acc[a], kind, &v, err);
        mf_value_free(&v);
        if (rc < 0)
            return -1;
        if (acc_mem != NULL)
            acc_mem[a] += *mem - before;
    }
    return 0;
}

/* gt_group_of: the group of doc (its _id expression's value, missing as null), made if new; NULL with err. */
static group_t *
gt_group_of(gtable_t *t, const stage_t *s, const bson_t *doc, mf_error_t *err)
{
    bson_value_t key;
    if (mf_expr_eval(s->expr, doc, &key, err) < 0)
        return NULL;
    if (key.value_type == BSON_TYPE_EOD)
        key.value_type = BSON_TYPE_NULL;
    if (s->id_field != NULL && key.value_type == BSON_TYPE_DOCUMENT && key.value.v_doc.data_len <= 5) {
        /*
         * {_id: {f: "$x"}}: one key expression whose missing value is null
         * (DocumentSourceGroup::computeId, then expandId), not an empty object.
         */
        bson_t one = BSON_INITIALIZER;
        BSON_APPEND_NULL(&one, s->id_field);
        mf_value_free(&key);
        key.value_type = BSON_TYPE_DOCUMENT;
        key.value.v_doc.data_len = one.len;
        key.value.v_doc.data = bson_malloc(one.len);
        memcpy(key.value.v_doc.data, bson_get_data(&one), one.len);
        bson_destroy(&one);
    }
    group_t *g = gt_find(t, s, &key);
    mf_value_free(&key);
    return g;
}

/* gt_add: folds doc into its group. Returns 0 or -1 with err. */
static int
gt_add(gtable_t *t, const stage_t *s, const bson_t *doc, mf_error_t *err)
{
    size_t ng = t->ng;
    group_t *g = gt_group_of(t, s, doc, err);
    if (g == NULL)
        return -1;
    if (t->acc_mem != NULL && t->ng > ng) {
        /* A new group: each accumulator's state, as mongod counts an accumulator's own size. */
        for (size_t a = 0; a < s->naccs; a++)
            t->acc_mem[a] += (int64_t)sizeof(accst_t);
    }
    return group_fold(&t->mem, t->acc_mem, s, g, doc, err);
}

static void
group_free(const stage_t *s, group_t *g)
{
    mf_value_free(&g->key);
    for (size_t a = 0; a < s->naccs; a++)
        acc_free(&g->acc[a], s->accs[a].kind);
    bson_free(g->acc);
    bson_free(g);
}

/* gt_result: the output document of g. */
static bson_t *
gt_result(const stage_t *s, group_t *g)
{
    bson_t *d = bson_new();
    bson_append_value(d, "_id", 3, &g->key);
    for (size_t a = 0; a < s->naccs; a++)
        if (acc_is_multi(s->accs[a].kind))
            accx_result(&g->acc[a], &s->accs[a], d, s->accs[a].field);
        else
            acc_result(&g->acc[a], s->accs[a].kind, d, s->accs[a].field);
    return d;
}

/* gt_clear: frees every group (emitting their results to out first when out is not NULL); t stays usable. */
static void
gt_clear(gtable_t *t, const stage_t *s, mf_docvec_t *out)
{
    for (size_t j = 0; j < t->ng; j++) {
        if (out)
            mf_docvec_push_steal(out, gt_result(s, t->order[j]));
        group_free(s, t->order[j]);
    }
    t->ng = 0;
    t->mem = 0;
    t->last = NULL;
    memset(t->buckets, 0, t->nb * sizeof *t->buckets);
}

static void
gt_destroy(gtable_t *t, const stage_t *s)
{
    gt_clear(t, s, NULL);
    bson_free(t->order);
    bson_free(t->buckets);
    memset(t, 0, sizeof *t);
}

/*
 * Partial group states (a spilling $group). acc_state appends one
 * accumulator's state as a document {v, c, set, arr, mean, m2};
 * acc_merge folds such a state into a live accumulator. States of one key
 * are merged in input order, so $first keeps the earliest and $last the
 * latest value.
 */
static void
acc_state(const accst_t *a, int kind, bson_t *out, const char *key)
{
    bson_t st;
    bson_append_document_begin(out, key, -1, &st);
    if (a->v.value_type != BSON_TYPE_EOD)
        bson_append_value(&st, "v", 1, &a->v);
    bson_append_int64(&st, "c", 1, a->count);
    bson_append_bool(&st, "set", 3, a->set);
    if (a->arr)
        bson_append_array(&st, "arr", 3, a->arr);
    bson_append_double(&st, "mean", 4, a->mean);
    bson_append_double(&st, "m2", 2, a->m2);
    if (kind == AC_SUM || kind == AC_AVG)
        mf_sum_state(&a->sum, &st);
    bson_append_document_end(out, &st);
}

static int
acc_merge(accst_t *a, int kind, const bson_t *st, mf_error_t *err)
{
    bson_iter_t it;
    bson_value_t v;
    int64_t c = 0;
    bool set = false;
    double mean = 0, m2 = 0;

    mf_value_set_missing(&v);
    if (bson_iter_init_find(&it, st, "v"))
        v = *bson_iter_value(&it);
    if (bson_iter_init_find(&it, st, "c"))
        c = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, st, "set"))
        set = bson_iter_as_bool(&it);
    if (bson_iter_init_find(&it, st, "mean"))
        mean = bson_iter_double(&it);
    if (bson_iter_init_find(&it, st, "m2"))
        m2 = bson_iter_double(&it);
    switch (kind) {
    case AC_SUM:
    case AC_AVG: {
        mf_sum_t part;
        mf_sum_from_state(&part, st);
        mf_sum_merge(&a->sum, &part);
        if (kind == AC_AVG)
            a->count += c;
        return 0;
    }
    case AC_COUNT:
        a->count += c;
        return 0;
    case AC_STDDEVPOP:
    case AC_STDDEVSAMP: {
        /* Chan et al.'s pairwise combination of Welford states. */
        int64_t n = a->count + c;
        if (c == 0)
            return 0;
        double d = mean - a->mean;
        a->m2 += m2 + d * d * (double)a->count * (double)c / (double)n;
        a->mean += d * (double)c / (double)n;
        a->count = n;
        return 0;
    }
    case AC_FIRST:
        if (!a->set && set) {
            a->set = true;
            mf_value_free(&a->v);
            mf_value_copy(&a->v, &v);
        }
        return 0;
    case AC_LAST:
        if (set) {
            a->set = true;
            mf_value_free(&a->v);
            mf_value_copy(&a->v, &v);
        }
        return 0;
    case AC_MIN:
    case AC_MAX:
    case AC_MERGEOBJECTS:
        return v.value_type == BSON_TYPE_EOD ? 0 : acc_update(a, kind, &v, err);
    case AC_PUSH:
    case AC_ADDTOSET:
    case AC_SETUNION:
    case AC_CONCATARRAYS:
        if (bson_iter_init_find(&it, st, "arr") && BSON_ITER_HOLDS_ARRAY(&it)) {
            /* $setUnion / $concatArrays states hold the elements collected so far. */
            int ek = kind == AC_SETUNION ? AC_ADDTOSET : kind == AC_CONCATARRAYS ? AC_PUSH : kind;
            bson_iter_t ai;
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai))
                if (acc_update(a, ek, bson_iter_value(&ai), err) < 0)
                    return -1;
        }
        return 0;
    default:
        return 0;
    }
}

/* gt_partial: g as a partial-state document {_id: key, s: [state, ...]}. */
static bson_t *
gt_partial(const stage_t *s, group_t *g)
{
    bson_t *d = bson_new(), arr;
    bson_append_value(d, "_id", 3, &g->key);
    bson_append_array_begin(d, "s", 1, &arr);
    for (size_t a = 0; a < s->naccs; a++) {
        char buf[16];
        const char *key;
        bson_uint32_to_string((uint32_t)a, &key, buf, sizeof buf);
        if (acc_is_multi(s->accs[a].kind))
            accx_state(&g->acc[a], &s->accs[a], &arr, key);
        else
            acc_state(&g->acc[a], s->accs[a].kind, &arr, key);
    }
    bson_append_array_end(d, &arr);
    return d;
}

/* partial_merge: folds partial-state document d into g. */
static int
partial_merge(const stage_t *s, group_t *g, const bson_t *d, mf_error_t *err)
{
    bson_iter_t it, ai;
    if (!bson_iter_init_find(&it, d, "s") || !BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(err, MF_E_InternalError, "corrupt spilled $group state");
    bson_iter_recurse(&it, &ai);
    for (size_t a = 0; a < s->naccs && bson_iter_next(&ai); a++) {
        const uint8_t *data;
        uint32_t len;
        bson_t st;
        bson_iter_document(&ai, &len, &data);
        if (!bson_init_static(&st, data, len))
            return mf_err_set(err, MF_E_InternalError, "corrupt spilled $group state");
        if (acc_is_multi(s->accs[a].kind) ? accx_merge(&g->acc[a], &s->accs[a], &st, err) < 0
                                          : acc_merge(&g->acc[a], s->accs[a].kind, &st, err) < 0)
            return -1;
    }
    return 0;
}

static int
run_group(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    gtable_t t;
    int rc = 0;

    gt_init(&t);
    for (size_t i = 0; i < in->len && rc == 0; i++)
        rc = gt_add(&t, s, in->docs[i], err);
    gt_clear(&t, s, rc == 0 ? out : NULL);
    gt_destroy(&t, s);
    mf_docvec_destroy(in);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Parsing stages                                                           */
/* ------------------------------------------------------------------------ */

static void
stage_free(stage_t *s)
{
    if (s->spec)
        bson_destroy(s->spec);
    if (s->raw)
        bson_destroy(s->raw);
    mf_matcher_free(s->matcher);
    mf_sort_free(s->sort);
    mf_projection_free(s->projection);
    mf_expr_free(s->expr);
    for (size_t i = 0; i < s->naccs; i++) {
        bson_free(s->accs[i].field);
        mf_expr_free(s->accs[i].expr);
        mf_expr_free(s->accs[i].n_expr);
        for (size_t j = 0; j < s->accs[i].nsort; j++)
            mf_expr_free(s->accs[i].sort_exprs[j]);
        bson_free(s->accs[i].sort_exprs);
        mf_sort_free(s->accs[i].sort);
        bson_free(s->accs[i].ps);
    }
    bson_free(s->accs);
    bson_free(s->gd_key);
    bson_free(s->id_field);
    if (s->gd_proj != NULL)
        bson_destroy(s->gd_proj);
    bson_free(s->field);
    bson_free(s->index_field);
    bson_free(s->from);
    bson_free(s->local);
    bson_free(s->foreign);
    mf_pipeline_free(s->sub);
    let_vars_free(&s->let);
    for (size_t i = 0; i < s->nfacets; i++) {
        bson_free(s->facet_names[i]);
        mf_pipeline_free(s->facets[i]);
    }
    bson_free(s->facet_names);
    bson_free(s->facets);
    mf_window_free(s->window);
    mf_geonear_free(s->geonear);
    mf_densify_free(s->densify);
    if (s->unwind != NULL) {
        stage_free(s->unwind);
        bson_free(s->unwind);
    }
    if (s->lu_spec != NULL)
        bson_destroy(s->lu_spec);
    if (s->lu_filter != NULL)
        bson_destroy(s->lu_filter);
    if (s->redact_for != NULL)
        bson_destroy(s->redact_for);
    mf_matcher_free(s->lu_matcher);
}

void
mf_pipeline_free(mf_pipeline_t *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++)
        stage_free(&p->stages[i]);
    bson_free(p->stages);
    bson_free(p);
}

/*
 * parse_acc_multi: the object argument of $firstN $lastN $minN $maxN
 * ({input, n}), $top $bottom ({sortBy, output}), $topN $bottomN ({n,
 * sortBy, output}), $median ({input, method}) and $percentile ({input, p,
 * method}), with MongoDB's codes for each mistake.
 */
static int
parse_acc_multi(acc_def_t *a, const char *op, const bson_value_t *arg, mf_error_t *err)
{
    bson_iter_t it;
    bson_value_t in_v, n_v, sort_v, p_v, method_v;
    const bson_value_t *in = NULL, *n = NULL, *sort = NULL, *p = NULL, *method = NULL;
    int k = a->kind;
    bool topbottom = k == AC_TOP || k == AC_BOTTOM || k == AC_TOPN || k == AC_BOTTOMN;
    bool quantile = k == AC_MEDIAN || k == AC_PERCENTILE;

    if (arg->value_type != BSON_TYPE_DOCUMENT) {
        int code = topbottom ? MF_E_Location5788001 : quantile ? MF_E_Location7429703
                   : (k == AC_MINN || k == AC_MAXN) ? MF_E_Location5787900 : MF_E_Location5787801;
        return mf_err_set(err, code, "specification must be an object; found %s", mf_type_name(arg->value_type));
    }
    bson_iter_init_from_data(&it, arg->value.v_doc.data, arg->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        if (topbottom) {
            if (strcmp(f, "n") == 0 && (k == AC_TOPN || k == AC_BOTTOMN))
                n = (n_v = *fv, &n_v);
            else if (strcmp(f, "output") == 0)
                in = (in_v = *fv, &in_v);
            else if (strcmp(f, "sortBy") == 0)
                sort = (sort_v = *fv, &sort_v);
            else
                return mf_err_set(err, MF_E_Location5788002, "Unknown argument to %s '%s'", op, f);
        } else if (quantile) {
            if (strcmp(f, "input") == 0)
                in = (in_v = *fv, &in_v);
            else if (strcmp(f, "p") == 0 && k == AC_PERCENTILE)
                p = (p_v = *fv, &p_v);
            else if (strcmp(f, "method") == 0)
                method = (method_v = *fv, &method_v);
            else
                return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", op, f);
        } else {
            if (strcmp(f, "input") == 0)
                in = (in_v = *fv, &in_v);
            else if (strcmp(f, "n") == 0)
                n = (n_v = *fv, &n_v);
            else
                return mf_err_set(err, MF_E_Location5787901, "Unknown argument for 'n' operator: %s", f);
        }
    }
    if (topbottom) {
        if (n == NULL && (k == AC_TOPN || k == AC_BOTTOMN))
            return mf_err_set(err, MF_E_Location5788003, "Missing value for 'n'");
        if (in == NULL)
            return mf_err_set(err, MF_E_Location5788004, "Missing value for 'output'");
        if (sort == NULL)
            return mf_err_set(err, MF_E_Location5788005, "Missing value for 'sortBy'");
        if (sort->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location10065, "invalid parameter: expected an object (sortBy)");
        bson_t spec, ks = BSON_INITIALIZER;
        bson_iter_t si;
        bson_init_static(&spec, sort->value.v_doc.data, sort->value.v_doc.data_len);
        if (bson_empty(&spec))
            return mf_err_set(err, MF_E_Location15976, "$sort stage must have at least one sort key");
        bson_iter_init(&si, &spec);
        while (bson_iter_next(&si)) {
            char buf[16];
            const char *key;
            bson_uint32_to_string((uint32_t)a->nsort, &key, buf, sizeof buf);
            bson_append_value(&ks, key, -1, bson_iter_value(&si));
            a->sort_exprs = bson_realloc(a->sort_exprs, (a->nsort + 1) * sizeof *a->sort_exprs);
            a->sort_exprs[a->nsort] = mf_expr_parse_path(bson_iter_key(&si), err);
            if (a->sort_exprs[a->nsort] == NULL) {
                bson_destroy(&ks);
                return -1;
            }
            a->nsort++;
        }
        /* The sort's own checks (1 / -1 only) apply to the original spec's values. */
        a->sort = mf_sort_new(&ks, err);
        bson_destroy(&ks);
        if (a->sort == NULL)
            return -1;
    } else if (quantile) {
        if (in == NULL)
            return mf_err_set(err, MF_E_Location40414, "BSON field '%s.input' is missing but a required field", op);
        if (p == NULL && k == AC_PERCENTILE)
            return mf_err_set(err, MF_E_Location40414, "BSON field '%s.p' is missing but a required field", op);
        if (method == NULL)
            return mf_err_set(err, MF_E_Location40414, "BSON field '%s.method' is missing but a required field", op);
        if (method->value_type != BSON_TYPE_UTF8)
            return mf_err_set(err, MF_E_TypeMismatch,
                              "BSON field '%s.method' is the wrong type '%s', expected type 'string'", op,
                              mf_type_name(method->value_type));
        if (strcmp(method->value.v_utf8.str, "approximate") != 0)
            return mf_err_set(err, MF_E_BadValue, "Currently only 'approximate' can be used as percentile 'method'.");
        if (k == AC_MEDIAN) {
            a->ps = bson_malloc(sizeof *a->ps);
            a->ps[0] = 0.5;
            a->nps = 1;
        } else {
            /* p: as mongod's parseP, in the code the window function uses, so both fail alike. */
            if (mf_expr_percentile_p(p, &a->ps, &a->nps, err) < 0)
                return -1;
        }
    } else {
        if (n == NULL)
            return mf_err_set(err, MF_E_Location5787906, "Missing value for 'n'");
        if (in == NULL)
            return mf_err_set(err, MF_E_Location5787907, "Missing value for 'input'");
    }
    if (n != NULL && (a->n_expr = mf_expr_parse(n, err)) == NULL)
        return -1;
    a->expr = mf_expr_parse(in, err);
    return a->expr ? 0 : -1;
}

/* ---- $groupByDistinctScan ---- */

/* The field paths an expression reads (gd_deps): a sorted set of strings. */
typedef struct gd_paths {
    char **v;
    size_t n;
    bool whole;  /* reads the whole document ($$ROOT, $$CURRENT, $getField ...) */
    bool refuse; /* reads metadata ($meta): not rewritten here */
} gd_paths_t;

static void
gd_paths_add(gd_paths_t *d, const char *path, size_t len)
{
    d->v = bson_realloc(d->v, (d->n + 1) * sizeof *d->v);
    d->v[d->n++] = bson_strndup(path, len);
}

/*
 * gd_deps: adds the document paths expression v (as written) reads to d, as
 * mongod's Expression::addDependencies would: "$a.b" reads a.b, "$$ROOT.a"
 * and "$$CURRENT.a" read a, "$$ROOT" / "$$CURRENT" the whole document; other
 * variables ($$NOW, a $let's or $map's) read none themselves; $literal
 * nothing. $getField / $setField / $unsetField name fields by value, so
 * they count as the whole document; $meta is refused.
 */
static void
gd_deps(const bson_value_t *v, gd_paths_t *d)
{
    bson_iter_t it;
    if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') {
        const char *str = v->value.v_utf8.str;
        if (str[1] != '$') {
            gd_paths_add(d, str + 1, strlen(str + 1));
            return;
        }
        const char *var = str + 2, *dot = strchr(var, '.');
        size_t vl = dot != NULL ? (size_t)(dot - var) : strlen(var);
        if ((vl == 4 && strncmp(var, "ROOT", 4) == 0) || (vl == 7 && strncmp(var, "CURRENT", 7) == 0)) {
            if (dot == NULL)
                d->whole = true;
            else
                gd_paths_add(d, dot + 1, strlen(dot + 1));
        }
        return;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (v->value_type == BSON_TYPE_DOCUMENT && strcmp(k, "$literal") == 0)
            continue;
        if (v->value_type == BSON_TYPE_DOCUMENT && strcmp(k, "$meta") == 0)
            d->refuse = true;
        if (v->value_type == BSON_TYPE_DOCUMENT &&
            (strcmp(k, "$getField") == 0 || strcmp(k, "$setField") == 0 || strcmp(k, "$unsetField") == 0))
            d->whole = true;
        gd_deps(bson_iter_value(&it), d);
    }
}

static int
gd_str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * group_distinct_prepare: whether $group s (argument spec) is one mongod
 * 8.0 may run over a DISTINCT_SCAN (DocumentSourceGroupBase::
 * rewriteGroupAsTransformOnFirstDocument): _id a field path "$x" or a
 * one-field document {f: "$x"}, and every accumulator $first, or every one
 * $last, or none (accsNeedSameDoc). Sets s->gd_key (x), gd_last and
 * gd_proj, the projection mongod pushes down for the fields the group
 * reads (DepsTracker::toProjectionWithoutMetadata: the paths in order, one
 * under another left out, then _id: 0 unless a path is _id or under it).
 */
static void
group_distinct_prepare(stage_t *s, const bson_value_t *spec)
{
    bson_iter_t it, sub;
    const char *key = NULL;
    int first = 0, last = 0;
    gd_paths_t d = {0};

    for (size_t a = 0; a < s->naccs; a++) {
        first += s->accs[a].kind == AC_FIRST;
        last += s->accs[a].kind == AC_LAST;
    }
    if ((size_t)first != s->naccs && (size_t)last != s->naccs)
        return;
    if (!bson_iter_init_from_data(&it, spec->value.v_doc.data, spec->value.v_doc.data_len))
        return;
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(bson_iter_key(&it), "_id") == 0) {
            const bson_value_t *kv = v;
            if (v->value_type == BSON_TYPE_DOCUMENT) {
                /* {f: "$x"}: one field, not an operator. */
                if (!bson_iter_init_from_data(&sub, v->value.v_doc.data, v->value.v_doc.data_len) ||
                    !bson_iter_next(&sub) || bson_iter_key(&sub)[0] == '$')
                    goto out;
                kv = bson_iter_value(&sub);
                if (bson_iter_next(&sub))
                    goto out;
            }
            if (kv->value_type != BSON_TYPE_UTF8 || kv->value.v_utf8.str[0] != '$')
                goto out;
            /* "$x", or "$$ROOT.x" / "$$CURRENT.x" (a path under the document, not a user variable's) */
            key = kv->value.v_utf8.str + 1;
            if (strncmp(key, "$ROOT.", 6) == 0)
                key += 6;
            else if (strncmp(key, "$CURRENT.", 9) == 0)
                key += 9;
            if (key[0] == '\0' || key[0] == '$')
                goto out;
            gd_deps(kv, &d);
            continue;
        }
        /* {acc: {$first: expr}} */
        if (v->value_type == BSON_TYPE_DOCUMENT && bson_iter_init_from_data(&sub, v->value.v_doc.data, v->value.v_doc.data_len) &&
            bson_iter_next(&sub))
            gd_deps(bson_iter_value(&sub), &d);
    }
    if (key == NULL || d.refuse)
        goto out;
    s->gd_key = bson_strdup(key);
    s->gd_last = last > 0;
    if (d.whole)
        goto out;
    qsort(d.v, d.n, sizeof *d.v, gd_str_cmp);
    s->gd_proj = bson_new();
    bool id = false;
    const char *prev = NULL;
    for (size_t i = 0; i < d.n; i++) {
        const char *f = d.v[i];
        if (strncmp(f, "_id", 3) == 0 && (f[3] == '\0' || f[3] == '.'))
            id = true;
        if (prev != NULL && strncmp(f, prev, strlen(prev)) == 0 && (f[strlen(prev)] == '.' || f[strlen(prev)] == '\0'))
            continue; /* under (or the same as) the path before it */
        BSON_APPEND_INT32(s->gd_proj, f, 1);
        prev = f;
    }
    if (!id)
        BSON_APPEND_INT32(s->gd_proj, "_id", 0);
out:
    for (size_t i = 0; i < d.n; i++)
        bson_free(d.v[i]);
    bson_free(d.v);
}

static int
parse_group(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    bool have_id = false;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location15947, "a group's fields must be specified in an object");
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        if (strcmp(k, "_id") == 0) {
            if (have_id)
                return mf_err_set(err, MF_E_Location16410, "a group's _id may only be specified once");
            have_id = true;
            s->expr = mf_expr_parse(fv, err);
            if (s->expr == NULL)
                return -1;
            bson_iter_t fi, fi2;
            if (fv->value_type == BSON_TYPE_DOCUMENT &&
                bson_iter_init_from_data(&fi, fv->value.v_doc.data, fv->value.v_doc.data_len) &&
                bson_iter_next(&fi) && bson_iter_key(&fi)[0] != '$' && (fi2 = fi, !bson_iter_next(&fi2)))
                s->id_field = bson_strdup(bson_iter_key(&fi));
            continue;
        }
        if (k[0] == '$')
            return mf_err_set(err, MF_E_Location16410, "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
        if (strchr(k, '.'))
            return mf_err_set(err, MF_E_Location16412, "The field name '%s' cannot contain '.'", k);
        if (fv->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40234, "The field '%s' must be an accumulator object", k);
        bson_iter_t ai;
        bson_iter_init_from_data(&ai, fv->value.v_doc.data, fv->value.v_doc.data_len);
        if (!bson_iter_next(&ai))
            return mf_err_set(err, MF_E_Location40238, "The field '%s' must specify one accumulator", k);
        const char *op = bson_iter_key(&ai);
        const bson_value_t *arg = bson_iter_value(&ai);
        bson_iter_t ai2 = ai;
        if (bson_iter_next(&ai2))
            return mf_err_set(err, MF_E_Location40238, "The field '%s' must specify one accumulator", k);
        static const struct {
            const char *name;
            int kind;
        } accs[] = {{"$sum", AC_SUM}, {"$avg", AC_AVG}, {"$min", AC_MIN}, {"$max", AC_MAX}, {"$first", AC_FIRST},
                    {"$last", AC_LAST}, {"$push", AC_PUSH}, {"$addToSet", AC_ADDTOSET}, {"$count", AC_COUNT},
                    {"$mergeObjects", AC_MERGEOBJECTS}, {"$stdDevPop", AC_STDDEVPOP},
                    {"$stdDevSamp", AC_STDDEVSAMP}, {"$setUnion", AC_SETUNION},
                    {"$concatArrays", AC_CONCATARRAYS}, {"$firstN", AC_FIRSTN}, {"$lastN", AC_LASTN},
                    {"$minN", AC_MINN}, {"$maxN", AC_MAXN}, {"$top", AC_TOP}, {"$bottom", AC_BOTTOM},
                    {"$topN", AC_TOPN}, {"$bottomN", AC_BOTTOMN}, {"$median", AC_MEDIAN},
                    {"$percentile", AC_PERCENTILE}, {NULL, 0}};
        const char *opname = NULL;
        int kind = -1;
        for (int i = 0; accs[i].name; i++)
            if (strcmp(accs[i].name, op) == 0) {
                kind = accs[i].kind;
                opname = accs[i].name;
            }
        if (kind < 0)
            return mf_err_set(err, MF_E_Location15952, "unknown group operator '%s'", op);
        s->accs = bson_realloc(s->accs, (s->naccs + 1) * sizeof *s->accs);
        acc_def_t *a = &s->accs[s->naccs++];
        memset(a, 0, sizeof *a);
        a->field = bson_strdup(k);
        a->kind = kind;
        a->op = opname;
        if (acc_is_multi(kind)) {
            if (parse_acc_multi(a, opname, arg, err) < 0)
                return -1;
            continue;
        }
        if (kind == AC_COUNT) {
            if (!mf_value_is_empty_doc(arg))
                return mf_err_set(err, MF_E_TypeMismatch, "$count only accepts an empty object as input");
            continue;
        }
        if (arg->value_type == BSON_TYPE_ARRAY)
            return mf_err_set(err, MF_E_Location40237, "The %s accumulator is a unary operator", op);
        a->expr = mf_expr_parse(arg, err);
        if (a->expr == NULL)
            return -1;
    }
    if (!have_id)
        return mf_err_set(err, MF_E_Location15955, "a group specification must include an _id");
    group_distinct_prepare(s, v);
    return 0;
}

static int
parse_unwind(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    const char *path = NULL;
    bson_iter_t it;

    if (v->value_type == BSON_TYPE_UTF8) {
        path = v->value.v_utf8.str;
    } else if (v->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "path") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&it))
                    return mf_err_set(err, MF_E_Location28808, "expected a string as the path for $unwind stage, got %s",
                                      mf_type_name(bson_iter_type(&it)));
                path = bson_iter_utf8(&it, NULL);
            } else if (strcmp(k, "preserveNullAndEmptyArrays") == 0) {
                if (!BSON_ITER_HOLDS_BOOL(&it))
                    return mf_err_set(err, MF_E_Location28809,
                                      "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage, got %s",
                                      mf_type_name(bson_iter_type(&it)));
                s->preserve = bson_iter_bool(&it);
            } else if (strcmp(k, "includeArrayIndex") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&it))
                    return mf_err_set(err, MF_E_Location28810,
                                      "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got %s",
                                      mf_type_name(bson_iter_type(&it)));
                const char *ix = bson_iter_utf8(&it, NULL);
                if (ix[0] == '\0')
                    return mf_err_set(err, MF_E_Location28810,
                                      "expected a non-empty string for the includeArrayIndex  option to $unwind stage, got string");
                if (ix[0] == '$')
                    return mf_err_set(err, MF_E_Location28822,
                                      "includeArrayIndex option to $unwind stage should not be prefixed with a '$': %s", ix);
                bson_free(s->index_field);
                s->index_field = bson_strdup(ix);
            } else {
                return mf_err_set(err, MF_E_Location28811, "unrecognized option to $unwind stage: %s", k);
            }
        }
        if (path == NULL)
            return mf_err_set(err, MF_E_Location28812, "no path specified to $unwind stage");
    } else {
        return mf_err_set(err, MF_E_Location15981,
                          "expected either a string or an object as specification for $unwind stage, got %s",
                          mf_type_name(v->value_type));
    }
    if (path[0] != '$')
        return mf_err_set(err, MF_E_Location28818, "path option to $unwind stage should be prefixed with a '$': %s", path);
    if (path[1] == '\0' || path[1] == '$')
        return mf_err_set(err, MF_E_Location28818, "path option to $unwind stage should be prefixed with a '$': %s", path);
    s->field = bson_strdup(path + 1);
    return 0;
}

/*
 * A $changeStream among a $lookup's or $facet's sub-pipeline stages (the
 * array pipeline): mongod's 51047 / 40600 for that stage (where, "$lookup"
 * or "$facet"), which the stage's own parser would answer 40573 as if this
 * were not a replica set. True with err when there is one.
 */
static bool
sub_has_change_stream(const bson_value_t *pipeline, const char *where, mf_error_t *err)
{
    bson_iter_t it, st;
    if (pipeline == NULL || pipeline->value_type != BSON_TYPE_ARRAY ||
        !bson_iter_init_from_data(&it, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len))
        return false;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &st) && bson_iter_next(&st) &&
            strcmp(bson_iter_key(&st), "$changeStream") == 0) {
            mf_err_set(err, strcmp(where, "$lookup") == 0 ? MF_E_Location51047 : MF_E_Location40600,
                       "$changeStream is not allowed to be used within a %s stage", where);
            return true;
        }
    }
    return false;
}

/*
 * facet_name_check: a $facet output name is one field name (mongod's
 * FieldPath::uassertValidFieldName): 15998 empty, 16410 '$'-prefixed,
 * 16412 holding a '.'.
 */
static int
facet_name_check(const char *k, mf_error_t *err)
{
    if (k[0] == '\0')
        return mf_err_set(err, MF_E_Location15998, "FieldPath field names may not be empty strings.");
    const char *dot = strchr(k, '.');
    if (k[0] == '$') {
        char first[64];
        size_t n = dot ? (size_t)(dot - k) : strlen(k);
        /* mf_field_path_check knows the few '$' names mongod allows; a longer name is not one of them. */
        if (n >= sizeof first)
            n = sizeof first - 1;
        memcpy(first, k, n);
        first[n] = '\0';
        if (mf_field_path_check(first, err) != 0)
            return -1;
    }
    if (dot != NULL)
        return mf_err_set(err, MF_E_Location16412,
                          "FieldPath field names may not contain '.'. Consider using $getField or $setField.");
    return 0;
}

/*
 * sub_pipeline_new: mf_pipeline_new for a $lookup's or $unionWith's
 * sub-pipeline. They nest at most MAX_SUB_PIPELINE_DEPTH deep, as mongod's
 * internalMaxSubPipelineViewDepth default (232 past it); the depth being
 * parsed is per thread, as a pipeline is parsed on one.
 */
#define MAX_SUB_PIPELINE_DEPTH 20
static __thread int tls_sub_depth;

static mf_pipeline_t *
sub_pipeline_new(const bson_value_t *pipeline, mf_error_t *err)
{
    if (tls_sub_depth >= MAX_SUB_PIPELINE_DEPTH) {
        mf_err_set(err, MF_E_MaxSubPipelineDepthExceeded, "Maximum number of nested sub-pipelines exceeded. Limit is %d",
                   MAX_SUB_PIPELINE_DEPTH);
        return NULL;
    }
    tls_sub_depth++;
    mf_pipeline_t *p = mf_pipeline_new(pipeline, err);
    tls_sub_depth--;
    return p;
}

/*
 * lookup_lite_parse: the checks document_source_lookup.cpp's
 * LiteParsed::parse makes before the stage itself is parsed: the spec is an
 * object; without 'from' the pipeline must start with $documents; 'from' is
 * a string (its {db, coll} form is only for config.cache.chunks.* and
 * local.oplog.rs, which mayfly does not join across databases) naming a
 * valid namespace; the pipeline is an array of objects
 * (parsePipelineFromBSON's 14).
 */
static int
lookup_lite_parse(const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *from = NULL, *pipeline = NULL;
    bson_value_t from_v, pipeline_v;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "the $lookup stage specification must be an object, but found %s",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        /* BSONObj::operator[] takes the first field of the name. */
        if (from == NULL && strcmp(bson_iter_key(&it), "from") == 0) {
            from_v = *bson_iter_value(&it);
            from = &from_v;
        } else if (pipeline == NULL && strcmp(bson_iter_key(&it), "pipeline") == 0) {
            pipeline_v = *bson_iter_value(&it);
            pipeline = &pipeline_v;
        }
    }
    if (pipeline != NULL) {
        if (pipeline->value_type != BSON_TYPE_ARRAY)
            return mf_err_set(err, MF_E_TypeMismatch, "'pipeline' option must be specified as an array");
        bson_iter_init_from_data(&it, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len);
        while (bson_iter_next(&it))
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(err, MF_E_TypeMismatch, "Each element of the 'pipeline' array must be an object");
    }
    if (from == NULL) {
        bson_iter_t st;
        if (pipeline == NULL)
            return mf_err_set(err, MF_E_FailedToParse, "must specify 'pipeline' when 'from' is empty");
        bson_iter_init_from_data(&it, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len);
        if (!bson_iter_next(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_find(&st, "$documents"))
            return mf_err_set(err, MF_E_FailedToParse,
                              "$lookup stage without explicit collection must have a pipeline with $documents as "
                              "first stage");
        return 0;
    }
    if (from->value_type == BSON_TYPE_DOCUMENT) {
        const char *db = "", *coll = "";
        bson_iter_init_from_data(&it, from->value.v_doc.data, from->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_key(&it), "db") == 0)
                db = bson_iter_utf8(&it, NULL);
            else if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_key(&it), "coll") == 0)
                coll = bson_iter_utf8(&it, NULL);
        }
        return mf_err_set(err, MF_E_FailedToParse,
                          "$lookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: %s and coll: %s", db,
                          coll);
    }
    if (from->value_type != BSON_TYPE_UTF8)
        return mf_err_set(err, MF_E_FailedToParse, "$lookup 'from' field must be a string, but found %s",
                          mf_type_name(from->value_type));
    return 0;
}

static int
parse_lookup(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    /* Shallow copies: bson_iter_value's result is overwritten by the next bson_iter_next. */
    bson_value_t pipeline_v, let_v;
    const bson_value_t *pipeline = NULL, *let = NULL;

    if (lookup_lite_parse(v, err) != 0)
        return -1;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        char **dst = NULL;
        if (strcmp(k, "from") == 0)
            dst = &s->from;
        else if (strcmp(k, "localField") == 0)
            dst = &s->local;
        else if (strcmp(k, "foreignField") == 0)
            dst = &s->foreign;
        else if (strcmp(k, "as") == 0)
            dst = &s->field;
        else if (strcmp(k, "pipeline") == 0) {
            pipeline_v = *bson_iter_value(&it);
            pipeline = &pipeline_v;
            continue;
        } else if (strcmp(k, "let") == 0) {
            let_v = *bson_iter_value(&it);
            let = &let_v;
            if (let->value_type != BSON_TYPE_DOCUMENT) {
                char shown[256];
                mf_fmt_value(let, shown, sizeof shown);
                return mf_err_set(err, MF_E_FailedToParse, "$lookup argument 'let: %s' must be an object, is type %s",
                                  shown, mf_type_name(let->value_type));
            }
            continue;
        } else if (BSON_ITER_HOLDS_UTF8(&it)) {
            return mf_err_set(err, MF_E_FailedToParse, "unknown argument to $lookup: %s", k);
        }
        if (!BSON_ITER_HOLDS_UTF8(&it)) {
            /* createFromBson: the argument's name, then the element as BSONElement::toString prints it. */
            char shown[256];
            mf_fmt_value(bson_iter_value(&it), shown, sizeof shown);
            return mf_err_set(err, MF_E_FailedToParse, "$lookup argument '%s' must be a string, found %s: %s: %s", k, k,
                              shown, mf_type_name(bson_iter_type(&it)));
        }
        bson_free(*dst);
        *dst = bson_strdup(bson_iter_utf8(&it, NULL));
    }
    if (s->field == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "must specify 'as' field for a $lookup");
    if ((s->local == NULL) != (s->foreign == NULL))
        return mf_err_set(err, MF_E_FailedToParse,
                          "$lookup requires both or neither of 'localField' and 'foreignField' to be specified");
    if (s->local == NULL && pipeline == NULL)
        return mf_err_set(err, MF_E_FailedToParse,
                          "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified");
    if (let != NULL && pipeline == NULL)
        return mf_err_set(err, MF_E_FailedToParse, "$lookup with a 'let' argument must also specify 'pipeline'");
    /* as, localField and foreignField are field paths (mongod's FieldPath: 40352, 40353, 15998, 16410). */
    if (mf_field_path_check(s->field, err) != 0 || (s->local != NULL && mf_field_path_check(s->local, err) != 0) ||
        (s->foreign != NULL && mf_field_path_check(s->foreign, err) != 0))
        return -1;
    if (let != NULL) {
        /* The let expressions see the enclosing scope (an outer $lookup's variables). */
        bson_iter_init_from_data(&it, let->value.v_doc.data, let->value.v_doc.data_len);
        while (bson_iter_next(&it))
            if (let_vars_add(&s->let, bson_iter_key(&it), bson_iter_value(&it), err) != 0)
                return -1;
    }
    if (pipeline) {
        /* The sub-pipeline is parsed with the let names ambient, so "$$name" is accepted everywhere in it. */
        if (sub_has_change_stream(pipeline, "$lookup", err))
            return -1;
        mf_expr_vars_t frame = {(const char *const *)s->let.names, NULL, s->let.n, mf_expr_vars_current()};
        mf_expr_vars_set(&frame);
        s->sub = sub_pipeline_new(pipeline, err);
        mf_expr_vars_set(frame.up);
        if (s->sub == NULL)
            return -1;
    }
    if (s->from == NULL && !(s->sub != NULL && s->sub->collectionless))
        return mf_err_set(err, MF_E_FailedToParse, "must specify 'from' field for a $lookup");
    return 0;
}

static int
parse_count_field(const bson_value_t *v, const char *stage, char **out, mf_error_t *err)
{
    if (v->value_type != BSON_TYPE_UTF8 || v->value.v_utf8.len == 0)
        return mf_err_set(err, MF_E_Location40156, "the count field must be a non-empty string");
    if (v->value.v_utf8.str[0] == '$')
        return mf_err_set(err, MF_E_Location40158, "the count field cannot be a $-prefixed path");
    if (strchr(v->value.v_utf8.str, '.'))
        return mf_err_set(err, MF_E_Location40160, "the count field cannot contain '.'");
    *out = bson_strdup(v->value.v_utf8.str);
    return 0;
}

static int
parse_sample(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    bool have_size = false;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location28745, "the $sample stage specification must be an object");
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "size") != 0)
            return mf_err_set(err, MF_E_Location28748, "unrecognized option to $sample: %s", k);
        const bson_value_t *sz = bson_iter_value(&it);
        if (!mf_value_is_number(sz))
            return mf_err_set(err, MF_E_Location28746, "size argument to $sample must be a number");
        double d = mf_value_as_double(sz);
        if (isnan(d) || d < 0)
            return mf_err_set(err, MF_E_Location28747, "size argument to $sample must not be negative");
        if (!mf_value_as_int64(sz, &s->n))
            s->n = d >= 9.2e18 ? INT64_MAX : (int64_t)d;
        if (s->n < 0)
            return mf_err_set(err, MF_E_Location28747, "size argument to $sample must not be negative");
        have_size = true;
    }
    if (!have_size)
        return mf_err_set(err, MF_E_Location28749, "$sample stage must specify a size");
    return 0;
}

static int
parse_current_op(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    static const char *const bool_opts[] = {"allUsers", "idleConnections", "idleCursors", "idleSessions",
                                            "localOps", "backtrace", "truncateOps", "targetAllNodes", NULL};
    bson_iter_t it;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "$currentOp options must be specified in an object, but found: %s",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int i;
        for (i = 0; bool_opts[i]; i++)
            if (strcmp(bool_opts[i], k) == 0)
                break;
        if (bool_opts[i] == NULL)
            return mf_err_set(err, MF_E_FailedToParse, "Unrecognized option '%s' in $currentOp stage.", k);
        if (!BSON_ITER_HOLDS_BOOL(&it))
            return mf_err_set(err, MF_E_FailedToParse,
                              "The '%s' parameter of the $currentOp stage must be a boolean value, but found: %s", k,
                              mf_type_name(bson_iter_type(&it)));
    }
    s->spec = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
    return 0;
}

/*
 * parse_list_sessions: the options of $listLocalSessions / $listSessions
 * (MongoDB's ListSessionsSpec, a strict IDL struct): {allUsers: bool,
 * users: [{user: string, db: string}], $_internalPredicate: object}, each
 * optional; allUsers true with a non-empty users is 12 UnsupportedFormat.
 * The validated document is kept as s->spec for env->list_sessions.
 */
static int
parse_list_sessions(stage_t *s, const char *name, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it, ui, uf;
    bool all_users = false, some_users = false;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_TypeMismatch, "%s options must be specified in an object, but found: %s", name,
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "allUsers") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.allUsers' is the wrong type '%s', expected type 'bool'",
                                  name, mf_type_name(bson_iter_type(&it)));
            all_users = bson_iter_bool(&it);
        } else if (strcmp(k, "users") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.users' is the wrong type '%s', expected type 'array'",
                                  name, mf_type_name(bson_iter_type(&it)));
            bson_iter_recurse(&it, &ui);
            while (bson_iter_next(&ui)) {
                bool have_user = false, have_db = false;
                some_users = true;
                if (!BSON_ITER_HOLDS_DOCUMENT(&ui))
                    return mf_err_set(err, MF_E_TypeMismatch,
                                      "BSON field '%s.users.%s' is the wrong type '%s', expected type 'object'", name,
                                      bson_iter_key(&ui), mf_type_name(bson_iter_type(&ui)));
                bson_iter_recurse(&ui, &uf);
                while (bson_iter_next(&uf)) {
                    const char *f = bson_iter_key(&uf);
                    if (strcmp(f, "user") != 0 && strcmp(f, "db") != 0)
                        return mf_err_set(err, MF_E_Location40415, "BSON field '%s.users.%s' is an unknown field.", name, f);
                    if (!BSON_ITER_HOLDS_UTF8(&uf))
                        return mf_err_set(err, MF_E_TypeMismatch,
                                          "BSON field '%s.users.%s' is the wrong type '%s', expected type 'string'", name, f,
                                          mf_type_name(bson_iter_type(&uf)));
                    if (f[0] == 'u')
                        have_user = true;
                    else
                        have_db = true;
                }
                if (!have_user || !have_db)
                    return mf_err_set(err, MF_E_Location40414, "BSON field '%s.users.%s' is missing but a required field",
                                      name, have_user ? "db" : "user");
            }
        } else if (strcmp(k, "$_internalPredicate") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '%s.$_internalPredicate' is the wrong type '%s', expected type 'object'", name,
                                  mf_type_name(bson_iter_type(&it)));
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", name, k);
        }
    }
    if (all_users && some_users)
        return mf_err_set(err, MF_E_UnsupportedFormat,
                          "%s may not specify {allUsers:true} and {users:[...]} at the same time", name);
    s->spec = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
    s->field = bson_strdup(name);
    return 0;
}

/*
 * parse_bucket_group: the $group behind $bucket and $bucketAuto. g (its _id
 * so far) gets output's fields, or {count: {$sum: 1}} when output is absent
 * (or, with empty_counts, has no fields), and is parsed into s; g is destroyed.
 */
static int
parse_bucket_group(stage_t *s, bson_t *g, const bson_value_t *output, bool empty_counts, mf_error_t *err)
{
    bson_iter_t it;
    bson_value_t gv;
    int rc;

    if (output != NULL) {
        bson_iter_init_from_data(&it, output->value.v_doc.data, output->value.v_doc.data_len);
        while (bson_iter_next(&it))
            bson_append_value(g, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    if (output == NULL || (empty_counts && mf_value_is_empty_doc(output))) {
        bson_t cnt;
        bson_append_document_begin(g, "count", 5, &cnt);
        BSON_APPEND_INT32(&cnt, "$sum", 1);
        bson_append_document_end(g, &cnt);
    }
    doc_value(g, false, &gv);
    rc = parse_group(s, &gv, err);
    bson_destroy(g);
    return rc;
}

/* append_bound_cmp: appends {<op>: [group_by, {$literal: bound}]} to the array a as its element key. */
static void
append_bound_cmp(bson_t *a, const char *key, const char *op, const bson_value_t *group_by, const bson_value_t *bound)
{
    bson_t cmp, args, lit;

    bson_append_document_begin(a, key, -1, &cmp);
    bson_append_array_begin(&cmp, op, -1, &args);
    bson_append_value(&args, "0", 1, group_by);
    bson_append_document_begin(&args, "1", 1, &lit);
    bson_append_value(&lit, "$literal", 8, bound);
    bson_append_document_end(&args, &lit);
    bson_append_array_end(&cmp, &args);
    bson_append_document_end(a, &cmp);
}

/*
 * parse_bucket: $bucket is desugared as MongoDB does: a $group whose _id is
 * {$switch: {branches: [{case: {$and: [{$gte: [groupBy, b_i]}, {$lt:
 * [groupBy, b_i+1]}]}, then: b_i}...], default: default}} (40066 when a value
 * falls outside every bucket and there is no default), followed by a sort on
 * _id. output defaults to {count: {$sum: 1}}.
 */
static int
parse_bucket(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    /* bson_iter_value points into the iterator, so each option is copied (shallowly) out of it. */
    bson_value_t gb_v, bounds_v, dflt_v, output_v;
    const bson_value_t *group_by = NULL, *bounds = NULL, *dflt = NULL, *output = NULL;
    bson_iter_t it, bi;
    bson_value_t prev;
    size_t nb = 0;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location40201, "Argument to $bucket stage must be an object, but found type: %s.",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "groupBy") == 0)
            group_by = (gb_v = *bson_iter_value(&it), &gb_v);
        else if (strcmp(k, "boundaries") == 0)
            bounds = (bounds_v = *bson_iter_value(&it), &bounds_v);
        else if (strcmp(k, "default") == 0)
            dflt = (dflt_v = *bson_iter_value(&it), &dflt_v);
        else if (strcmp(k, "output") == 0)
            output = (output_v = *bson_iter_value(&it), &output_v);
        else
            return mf_err_set(err, MF_E_Location40197, "Unrecognized option to $bucket: %s.", k);
    }
    if (group_by == NULL || bounds == NULL)
        return mf_err_set(err, MF_E_Location40198,
                          "$bucket requires 'groupBy' and 'boundaries' to be specified.");
    if (!(group_by->value_type == BSON_TYPE_UTF8 && group_by->value.v_utf8.str[0] == '$') &&
        !mf_agg_is_operator_doc(group_by))
        return mf_err_set(err, MF_E_Location40202,
                          "The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression, but "
                          "found: %s.",
                          mf_type_name(group_by->value_type));
    if (bounds->value_type != BSON_TYPE_ARRAY)
        return mf_err_set(err, MF_E_Location40200,
                          "The $bucket 'boundaries' field must be an array, but found type: %s.",
                          mf_type_name(bounds->value_type));
    if (output != NULL && output->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location40196, "The $bucket 'output' field must be an object, but found type: %s.",
                          mf_type_name(output->value_type));
    bson_iter_init_from_data(&bi, bounds->value.v_doc.data, bounds->value.v_doc.data_len);
    while (bson_iter_next(&bi)) {
        const bson_value_t *b = bson_iter_value(&bi);
        if (nb > 0) {
            if (mf_value_type_rank(b->value_type) != mf_value_type_rank(prev.value_type))
                return mf_err_set(err, MF_E_Location40193,
                                  "All values in the the 'boundaries' option to $bucket must have the same type. "
                                  "Found conflicting types %s and %s.",
                                  mf_type_name(prev.value_type), mf_type_name(b->value_type));
            if (mf_value_cmp(&prev, b) >= 0)
                return mf_err_set(err, MF_E_Location40194,
                                  "The 'boundaries' option to $bucket must be sorted in ascending order");
        }
        prev = *b;
        nb++;
    }
    if (nb < 2)
        return mf_err_set(err, MF_E_Location40192,
                          "The $bucket 'boundaries' field must have at least 2 values, but found %zu value(s).", nb);

    /* Build {_id: {$switch: ...}, <output>} and parse it as a $group. */
    bson_t g, id, sw, br, dsw;
    bson_t *lo_doc = NULL;
    bson_value_t lo, hi;
    size_t i = 0;
    bson_init(&g);
    bson_append_document_begin(&g, "_id", 3, &id);
    bson_append_document_begin(&id, "$switch", 7, &sw);
    bson_append_array_begin(&sw, "branches", 8, &br);
    bson_iter_init_from_data(&bi, bounds->value.v_doc.data, bounds->value.v_doc.data_len);
    while (bson_iter_next(&bi)) {
        hi = *bson_iter_value(&bi);
        if (i > 0) {
            char key[24];
            bson_t c, cs, an, th;
            snprintf(key, sizeof key, "%zu", i - 1);
            bson_append_document_begin(&br, key, -1, &c);
            bson_append_document_begin(&c, "case", 4, &cs);
            bson_append_array_begin(&cs, "$and", 4, &an);
            append_bound_cmp(&an, "0", "$gte", group_by, &lo);
            append_bound_cmp(&an, "1", "$lt", group_by, &hi);
            bson_append_array_end(&cs, &an);
            bson_append_document_end(&c, &cs);
            bson_append_document_begin(&c, "then", 4, &th);
            bson_append_value(&th, "$literal", 8, &lo);
            bson_append_document_end(&c, &th);
            bson_append_document_end(&br, &c);
        } else {
            lo_doc = bson_new();
            bson_append_value(lo_doc, "v", 1, &hi);
        }
        lo = hi;
        i++;
    }
    bson_append_array_end(&sw, &br);
    if (dflt != NULL) {
        /* The default must lie outside [first boundary, last boundary). */
        bson_iter_t fi;
        bson_iter_init_find(&fi, lo_doc, "v");
        if (mf_value_type_rank(dflt->value_type) == mf_value_type_rank(lo.value_type) &&
            mf_value_cmp(dflt, bson_iter_value(&fi)) >= 0 && mf_value_cmp(dflt, &lo) < 0) {
            bson_destroy(lo_doc);
            bson_destroy(&g);
            return mf_err_set(err, MF_E_Location40199,
                              "The $bucket 'default' field must be less than the lowest boundary or greater than "
                              "or equal to the highest boundary.");
        }
        bson_append_document_begin(&sw, "default", 7, &dsw);
        bson_append_value(&dsw, "$literal", 8, dflt);
        bson_append_document_end(&sw, &dsw);
    }
    bson_destroy(lo_doc);
    bson_append_document_end(&id, &sw);
    bson_append_document_end(&g, &id);
    if (parse_bucket_group(s, &g, output, false, err) < 0)
        return -1;
    bson_t *spec = BCON_NEW("_id", BCON_INT32(1));
    s->sort = mf_sort_new(spec, err);
    bson_destroy(spec);
    return s->sort ? 0 : -1;
}

/* parse_target: a $out / $merge target: a collection name or {db, coll}. */
static int
parse_target(stage_t *s, const char *stage, const bson_value_t *v, mf_error_t *err)
{
    if (v->value_type == BSON_TYPE_UTF8) {
        if (v->value.v_utf8.len == 0)
            return mf_err_set(err, MF_E_InvalidNamespace, "Invalid %s target namespace: ''", stage);
        if (strlen(v->value.v_utf8.str) != v->value.v_utf8.len) /* "victim\0x" must not write "victim" */
            return mf_err_set(err, MF_E_InvalidNamespace, "Invalid %s target namespace: contains a NUL byte", stage);
        bson_free(s->from); /* a repeated "into" replaces the earlier one */
        s->from = bson_strdup(v->value.v_utf8.str);
        return 0;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location16990, "%s only supports a string or object argument, but found %s",
                          stage, mf_type_name(v->value_type));
    bson_iter_t it;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "db") != 0 && strcmp(k, "coll") != 0 && !(strcmp(k, "timeseries") == 0 && stage[1] == 'o'))
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.",
                              stage[1] == 'o' ? "$out" : "$merge.into", k);
        if (strcmp(k, "timeseries") == 0) {
            /* $out's time-series options, checked by the writer against the target (mf_agg_writer_begin_out_ts). */
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '$out.timeseries' is the wrong type '%s', expected type 'object'",
                                  mf_type_name(bson_iter_type(&it)));
            if (s->spec != NULL)
                bson_destroy(s->spec);
            s->spec = bson_new();
            bson_append_iter(s->spec, "timeseries", -1, &it);
            continue;
        }
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'",
                              stage[1] == 'o' ? "$out" : "$merge.into", k, mf_type_name(bson_iter_type(&it)));
        uint32_t len;
        const char *name = bson_iter_utf8(&it, &len);
        if (strlen(name) != len)
            return mf_err_set(err, MF_E_InvalidNamespace, "Invalid %s target namespace: contains a NUL byte", stage);
        char **dst = k[0] == 'd' ? &s->local : &s->from;
        bson_free(*dst);
        *dst = bson_strdup(name);
    }
    if (s->from == NULL || s->from[0] == '\0')
        return mf_err_set(err, MF_E_Location40414, "BSON field '%s.coll' is missing but a required field",
                          stage[1] == 'o' ? "$out" : "$merge.into");
    if (stage[1] == 'o' && s->local == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field '$out.db' is missing but a required field");
    return 0;
}

/*
 * parse_merge: $merge: "coll" or {into, on, let, whenMatched, whenNotMatched}.
 * s->spec receives the normalised options {on: [fields], whenMatched: string,
 * whenNotMatched: string} handed to env->write_out; a whenMatched pipeline
 * is whenMatched "pipeline" with whenMatchedPipeline (the array) and let
 * (when given) beside it.
 */
/*
 * merge_on_fields_check: $merge's 'on' fields (spec's "on" array) as
 * document_source_merge.cpp's convertToFieldPaths takes them: each a field
 * path (FieldPath's errors), none twice (31465).
 */
static int
merge_on_fields_check(const bson_t *spec, mf_error_t *err)
{
    bson_iter_t it, a, b;
    if (!bson_iter_init_find(&it, spec, "on") || !bson_iter_recurse(&it, &a))
        return 0;
    while (bson_iter_next(&a)) {
        const char *f = bson_iter_utf8(&a, NULL);
        if (mf_field_path_check(f, err) != 0)
            return -1;
        bson_iter_recurse(&it, &b);
        while (bson_iter_next(&b) && strcmp(bson_iter_key(&b), bson_iter_key(&a)) != 0)
            if (strcmp(bson_iter_utf8(&b, NULL), f) == 0)
                return mf_err_set(err, MF_E_Location31465, "Found a duplicate field '%s'", f);
    }
    return 0;
}

static int
parse_merge(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    const char *when_matched = "merge", *when_not_matched = "insert";
    const bson_value_t *on = NULL, *let = NULL, *wm_pipeline = NULL;
    bson_value_t on_v, let_v, wm_v; /* copies: bson_iter_value points into the iterator */
    bson_iter_t it;

    if (v->value_type == BSON_TYPE_UTF8) {
        if (parse_target(s, "$merge", v, err) < 0)
            return -1;
    } else if (v->value_type != BSON_TYPE_DOCUMENT) {
        /* LiteParsed::parse answers before createFromBson's 51182 (document_source_merge.cpp). */
        return mf_err_set(err, MF_E_TypeMismatch, "$merge requires a string or object argument, but found %s",
                          mf_type_name(v->value_type));
    } else {
        bool have_into = false;
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            const bson_value_t *fv = bson_iter_value(&it);
            if (strcmp(k, "into") == 0) {
                if (fv->value_type != BSON_TYPE_UTF8 && fv->value_type != BSON_TYPE_DOCUMENT)
                    return mf_err_set(err, MF_E_TypeMismatch,
                                      "BSON field '$merge.into' is the wrong type '%s', expected types '[string, object]'",
                                      mf_type_name(fv->value_type));
                if (parse_target(s, "$merge", fv, err) < 0)
                    return -1;
                have_into = true;
            } else if (strcmp(k, "on") == 0) {
                on_v = *fv;
                on = &on_v;
            } else if (strcmp(k, "let") == 0) {
                if (fv->value_type != BSON_TYPE_DOCUMENT)
                    return mf_err_set(err, MF_E_TypeMismatch,
                                      "BSON field '$merge.let' is the wrong type '%s', expected type 'object'",
                                      mf_type_name(fv->value_type));
                let_v = *fv;
                let = &let_v;
            } else if (strcmp(k, "whenMatched") == 0 || strcmp(k, "whenNotMatched") == 0) {
                bool matched = k[4] == 'M';
                if (fv->value_type == BSON_TYPE_ARRAY && matched) {
                    /* A pipeline-style update of the matching document (mf_merge_update_t, run by agg_write.c). */
                    wm_v = *fv;
                    wm_pipeline = &wm_v;
                    when_matched = "pipeline";
                    continue;
                }
                if (fv->value_type != BSON_TYPE_UTF8 && matched)
                    return mf_err_set(err, MF_E_Location51191,
                                      "$merge 'whenMatched' field  must be either a string or an array, but found %s",
                                      mf_type_name(fv->value_type));
                if (fv->value_type != BSON_TYPE_UTF8)
                    return mf_err_set(err, MF_E_TypeMismatch,
                                      "BSON field '$merge.%s' is the wrong type '%s', expected type 'string'", k,
                                      mf_type_name(fv->value_type));
                const char *val = fv->value.v_utf8.str;
                bool ok = matched ? (strcmp(val, "replace") == 0 || strcmp(val, "keepExisting") == 0 ||
                                     strcmp(val, "merge") == 0 || strcmp(val, "fail") == 0)
                                  : (strcmp(val, "insert") == 0 || strcmp(val, "discard") == 0 ||
                                     strcmp(val, "fail") == 0);
                /* whenMatched is parsed with an IDLParserContext of its own (mergeWhenMatchedParseFromBSON). */
                if (!ok)
                    return mf_err_set(err, MF_E_BadValue, "Enumeration value '%s' for field '%s%s' is not a valid value.",
                                      val, matched ? "" : "$merge.", k);
                if (matched) {
                    when_matched = val;
                    wm_pipeline = NULL;
                } else {
                    when_not_matched = val;
                }
            } else {
                return mf_err_set(err, MF_E_Location40415, "BSON field '$merge.%s' is an unknown field.", k);
            }
        }
        if (!have_into)
            return mf_err_set(err, MF_E_Location40414, "BSON field '$merge.into' is missing but a required field");
        /*
         * merge_processor.cpp's strategy table has no keepExisting or fail
         * with whenNotMatched fail / discard (LiteParsed::parse's 51181);
         * document_source_merge.cpp's create then takes 'let' only with a
         * whenMatched pipeline (51199), where 'new' is $$ROOT or unset (51273).
         */
        if ((strcmp(when_matched, "keepExisting") == 0 || strcmp(when_matched, "fail") == 0) &&
            strcmp(when_not_matched, "insert") != 0)
            return mf_err_set(err, MF_E_Location51181,
                              "Combination of $merge modes 'whenMatched: %s' and 'whenNotMatched: %s' is not supported",
                              when_matched, when_not_matched);
    }

    s->spec = bson_new();
    bson_t arr;
    bson_append_array_begin(s->spec, "on", 2, &arr);
    if (on == NULL) {
        BSON_APPEND_UTF8(&arr, "0", "_id");
    } else if (on->value_type == BSON_TYPE_UTF8) {
        BSON_APPEND_UTF8(&arr, "0", on->value.v_utf8.str);
    } else if (on->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t oi;
        int n = 0;
        bson_iter_init_from_data(&oi, on->value.v_doc.data, on->value.v_doc.data_len);
        while (bson_iter_next(&oi)) {
            char key[16];
            if (!BSON_ITER_HOLDS_UTF8(&oi)) {
                bson_append_array_end(s->spec, &arr);
                return mf_err_set(err, MF_E_Location51134, "$merge 'on' array elements must be strings, but found %s",
                                  mf_type_name(bson_iter_type(&oi)));
            }
            snprintf(key, sizeof key, "%d", n++);
            BSON_APPEND_UTF8(&arr, key, bson_iter_utf8(&oi, NULL));
        }
        if (n == 0) {
            bson_append_array_end(s->spec, &arr);
            return mf_err_set(err, MF_E_Location51187, "If explicitly specifying $merge 'on', must include at least one field");
        }
    } else {
        bson_append_array_end(s->spec, &arr);
        return mf_err_set(err, MF_E_Location51186,
                          "$merge 'on' field  must be either a string or an array of strings, but found %s",
                          mf_type_name(on->value_type));
    }
    bson_append_array_end(s->spec, &arr);
    if (on != NULL && merge_on_fields_check(s->spec, err) != 0)
        return -1;
    /* document_source_merge.cpp's create, after the 'on' fields: 'let' only with a pipeline, 'new' only $$ROOT. */
    if (let != NULL && wm_pipeline == NULL)
        return mf_err_set(err, MF_E_Location51199, "Cannot use 'let' variables with 'whenMatched: %s' mode",
                          when_matched);
    if (let != NULL) {
        bson_iter_t li;
        bson_iter_init_from_data(&li, let->value.v_doc.data, let->value.v_doc.data_len);
        if (bson_iter_find(&li, "new") && !(BSON_ITER_HOLDS_UTF8(&li) && strcmp(bson_iter_utf8(&li, NULL), "$$ROOT") == 0))
            return mf_err_set(err, MF_E_Location51273,
                              "'let' may not define a value for the reserved 'new' variable other than '$$ROOT'");
    }
    if (wm_pipeline != NULL) {
        /* Checked here, so a bad pipeline or variable fails the aggregate before anything is written. */
        mf_merge_update_t *u = mf_merge_update_new(wm_pipeline, let, err);
        if (u == NULL)
            return -1;
        mf_merge_update_free(u);
    }
    BSON_APPEND_UTF8(s->spec, "whenMatched", when_matched);
    BSON_APPEND_UTF8(s->spec, "whenNotMatched", when_not_matched);
    if (wm_pipeline != NULL) {
        bson_append_value(s->spec, "whenMatchedPipeline", -1, wm_pipeline);
        if (let != NULL)
            bson_append_value(s->spec, "let", -1, let);
    }
    return 0;
}

/*
 * $_internalUnpackBucket {timeField, metaField?, bucketMaxSpanSeconds}: the
 * measurements of each bucket document (doc/bucket.h), as a time-series
 * view's pipeline reads them. s->field: timeField, s->local: metaField,
 * s->n: bucketMaxSpanSeconds.
 */
static int
parse_unpack(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    s->kind = S_UNPACK;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location5346500, "$_internalUnpackBucket specification must be an object, got %s",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "timeField") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            s->field = bson_strdup(bson_iter_utf8(&it, NULL));
        else if (strcmp(k, "metaField") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            s->local = bson_strdup(bson_iter_utf8(&it, NULL));
        else if (strcmp(k, "bucketMaxSpanSeconds") == 0 && mf_value_is_number(bson_iter_value(&it)))
            s->n = bson_iter_as_int64(&it);
    }
    if (s->field == NULL)
        return mf_err_set(err, MF_E_Location5346500, "$_internalUnpackBucket specification must include a 'timeField'");
    if (s->n <= 0)
        s->n = 3600;
    return 0;
}

static mf_ts_spec_t
unpack_spec(const stage_t *s)
{
    mf_ts_spec_t spec = {.time_field = s->field, .meta_field = s->local, .max_span_s = s->n, .rounding_s = s->n};
    return spec;
}

/* run_unpack: the measurements of every bucket of in (a malformed bucket fails with 2). */
static int
run_unpack(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    mf_ts_spec_t spec = unpack_spec(s);
    int rc = 0;
    for (size_t i = 0; i < in->len && rc == 0; i++) {
        mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(&spec, in->docs[i], err);
        if (u == NULL) {
            rc = -1;
            break;
        }
        bson_t m; /* initialised by the unpacker */
        while (mf_bucket_unpacker_next(u, &m) == 1) {
            mf_docvec_push_steal(out, bson_copy(&m));
            bson_destroy(&m);
        }
        mf_bucket_unpacker_free(u);
    }
    mf_docvec_destroy(in);
    return rc;
}

/*
 * push_bucket_filters: a $match right after $_internalUnpackBucket also
 * gets a bucket-level $match before it (mf_bucket_filter_from_match: the
 * metaField and time bounds on meta and control.min/max), so buckets that
 * cannot match are skipped, through an index when one fits. The exact
 * $match stays after the unpacking.
 */
static int
push_bucket_filters(mf_pipeline_t *p, mf_error_t *err)
{
    for (size_t i = 0; i + 1 < p->n; i++) {
        if (p->stages[i].kind != S_UNPACK || p->stages[i + 1].kind != S_MATCH)
            continue;
        mf_ts_spec_t spec = unpack_spec(&p->stages[i]);
        bson_t bf;
        mf_bucket_filter_from_match(&spec, p->stages[i + 1].spec, &bf);
        if (bson_empty(&bf)) {
            bson_destroy(&bf);
            continue;
        }
        p->stages = bson_realloc(p->stages, (p->n + 1) * sizeof *p->stages);
        memmove(&p->stages[i + 1], &p->stages[i], (p->n - i) * sizeof *p->stages);
        p->n++;
        stage_t *m = &p->stages[i];
        memset(m, 0, sizeof *m);
        m->kind = S_MATCH;
        m->spec = bson_copy(&bf);
        m->raw = bson_new();
        BSON_APPEND_DOCUMENT(m->raw, "$match", &bf);
        bson_destroy(&bf);
        if ((m->matcher = mf_matcher_new(m->spec, err)) == NULL)
            return -1;
        i++; /* past the unpack */
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* $redact, $bucketAuto, $unionWith, $graphLookup: parsing                  */
/* ------------------------------------------------------------------------ */

/* $redact's three system variables, installed as an ambient frame while its expression is parsed and run. */
static const char *const redact_names[] = {"DESCEND", "PRUNE", "KEEP"};

static int
parse_redact(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    mf_expr_vars_t frame = {redact_names, NULL, 3, mf_expr_vars_current()};
    mf_expr_vars_set(&frame);
    s->expr = mf_expr_parse(v, err);
    mf_expr_vars_set(frame.up);
    return s->expr ? 0 : -1;
}

/*
 * $bucketAuto's granularities: the preferred-number series (scaled by powers
 * of ten) and POWERSOF2, as mongod's granularity rounders define them.
 */
static const double r5[] = {10, 16, 25, 40, 63};
static const double r10[] = {100, 125, 160, 200, 250, 315, 400, 500, 630, 800};
static const double r20[] = {100, 112, 125, 140, 160, 180, 200, 224, 250, 280,
                             315, 355, 400, 450, 500, 560, 630, 710, 800, 900};
static const double r40[] = {100, 106, 112, 118, 125, 132, 140, 150, 160, 170, 180, 190, 200,
                             212, 224, 236, 250, 265, 280, 300, 315, 355, 375, 400, 425, 450,
                             475, 500, 530, 560, 600, 630, 670, 710, 750, 800, 850, 900, 950};
static const double r80[] = {103, 109, 115, 122, 128, 136, 145, 155, 165, 175, 185, 195, 206, 218,
                             230, 243, 258, 272, 290, 307, 325, 345, 365, 387, 412, 437, 462, 487,
                             515, 545, 575, 615, 650, 690, 730, 775, 825, 875, 925, 975};
static const double s125[] = {10, 20, 50};
static const double e6[] = {10, 15, 22, 33, 47, 68};
static const double e12[] = {10, 12, 15, 18, 22, 27, 33, 39, 47, 56, 68, 82};
static const double e24[] = {10, 11, 12, 13, 15, 16, 18, 20, 22, 24, 27, 30,
                             33, 36, 39, 43, 47, 51, 56, 62, 68, 75, 82, 91};
static const double e48[] = {100, 105, 110, 115, 121, 127, 133, 140, 147, 154, 162, 169,
                             178, 187, 196, 205, 215, 226, 237, 249, 261, 274, 287, 301,
                             316, 332, 348, 365, 383, 402, 422, 442, 464, 487, 511, 536,
                             562, 590, 619, 649, 681, 715, 750, 787, 825, 866, 909, 953};
static const double e96[] = {100, 102, 105, 107, 110, 113, 115, 118, 121, 124, 127, 130, 133, 137,
                             140, 143, 147, 150, 154, 158, 162, 165, 169, 174, 178, 182, 187, 191,
                             196, 200, 205, 210, 215, 221, 226, 232, 237, 243, 249, 255, 261, 267,
                             274, 280, 287, 294, 301, 309, 316, 324, 332, 340, 348, 357, 365, 374,
                             383, 392, 402, 412, 422, 432, 442, 453, 464, 475, 487, 499, 511, 523,
                             536, 549, 562, 576, 590, 604, 619, 634, 649, 665, 681, 698, 715, 732,
                             750, 768, 787, 806, 825, 845, 866, 887, 909, 931, 953, 976};
static const double e192[] = {
    100, 101, 102, 104, 105, 106, 107, 109, 110, 111, 113, 114, 115, 117, 118, 120, 121, 123,
    124, 126, 127, 129, 130, 132, 133, 135, 137, 138, 140, 142, 143, 145, 147, 149, 150, 152,
    154, 156, 158, 160, 162, 164, 165, 167, 169, 172, 174, 176, 178, 180, 182, 184, 187, 189,
    191, 193, 196, 198, 200, 203, 205, 208, 210, 213, 215, 218, 221, 223, 226, 229, 232, 234,
    237, 240, 243, 246, 249, 252, 255, 258, 261, 264, 267, 271, 274, 277, 280, 284, 287, 291,
    294, 298, 301, 305, 309, 312, 316, 320, 324, 328, 332, 336, 340, 344, 348, 352, 357, 361,
    365, 370, 374, 379, 383, 388, 392, 397, 402, 407, 412, 417, 422, 427, 432, 437, 442, 448,
    453, 459, 464, 470, 475, 481, 487, 493, 499, 505, 511, 517, 523, 530, 536, 542, 549, 556,
    562, 569, 576, 583, 590, 597, 604, 612, 619, 626, 634, 642, 649, 657, 665, 673, 681, 690,
    698, 706, 715, 723, 732, 741, 750, 759, 768, 777, 787, 796, 806, 816, 825, 835, 845, 856,
    866, 876, 887, 898, 909, 920, 931, 942, 953, 965, 976, 988};

#define SERIES(name, a) {name, a, sizeof a / sizeof a[0]}
static const struct granularity {
    const char *name;
    const double *series; /* NULL: POWERSOF2 */
    size_t n;
} granularities[] = {SERIES("R5", r5),   SERIES("R10", r10), SERIES("R20", r20),   SERIES("R40", r40),
                     SERIES("R80", r80), SERIES("1-2-5", s125), SERIES("E6", e6),  SERIES("E12", e12),
                     SERIES("E24", e24), SERIES("E48", e48), SERIES("E96", e96), SERIES("E192", e192),
                     {"POWERSOF2", NULL, 0}};
#undef SERIES

/*
 * parse_bucket_auto: {groupBy, buckets, output, granularity}. The output
 * accumulators are parsed as a $group's (s->accs); s->expr is groupBy.
 */
static int
parse_bucket_auto(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_value_t gb_v, out_v;
    const bson_value_t *group_by = NULL, *output = NULL;
    bool have_buckets = false;
    bson_iter_t it;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_Location40240, "The argument to $bucketAuto must be an object, but found type: %s",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        if (strcmp(k, "groupBy") == 0) {
            if (!(fv->value_type == BSON_TYPE_UTF8 && fv->value.v_utf8.str[0] == '$') && !mf_agg_is_operator_doc(fv))
                return mf_err_set(err, MF_E_Location40239,
                                  "The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an "
                                  "expression object, but found: %s", mf_type_name(fv->value_type));
            group_by = (gb_v = *fv, &gb_v);
        } else if (strcmp(k, "buckets") == 0) {
            int64_t n;
            if (!mf_value_is_number(fv))
                return mf_err_set(err, MF_E_Location40241,
                                  "The $bucketAuto 'buckets' field must be a numeric value, but found type: %s",
                                  mf_type_name(fv->value_type));
            if (!mf_value_as_int64(fv, &n) || (double)n != mf_value_as_double(fv) || n > INT32_MAX || n < INT32_MIN)
                return mf_err_set(err, MF_E_Location40242,
                                  "The $bucketAuto 'buckets' field must be representable as a 32-bit integer, but "
                                  "found %g", mf_value_as_double(fv));
            s->n = n;
            have_buckets = true;
        } else if (strcmp(k, "output") == 0) {
            if (fv->value_type != BSON_TYPE_DOCUMENT)
                return mf_err_set(err, MF_E_Location40244,
                                  "The $bucketAuto 'output' field must be an object, but found type: %s",
                                  mf_type_name(fv->value_type));
            output = (out_v = *fv, &out_v);
        } else if (strcmp(k, "granularity") == 0) {
            if (fv->value_type != BSON_TYPE_UTF8)
                return mf_err_set(err, MF_E_Location40261,
                                  "The $bucketAuto 'granularity' field must be a string, but found type: %s",
                                  mf_type_name(fv->value_type));
            s->gran = 0;
            for (size_t g = 0; g < sizeof granularities / sizeof granularities[0]; g++)
                if (strcmp(granularities[g].name, fv->value.v_utf8.str) == 0)
                    s->gran = (int)g + 1;
            if (s->gran == 0)
                return mf_err_set(err, MF_E_Location40257, "Unknown rounding granularity '%s'", fv->value.v_utf8.str);
        } else {
            return mf_err_set(err, MF_E_Location40245, "Unrecognized option to $bucketAuto: %s", k);
        }
    }
    if (group_by == NULL || !have_buckets)
        return mf_err_set(err, MF_E_Location40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified");
    if (s->n <= 0)
        return mf_err_set(err, MF_E_Location40243,
                          "The $bucketAuto 'buckets' field must be greater than 0, but found: %lld", (long long)s->n);
    /* The accumulators: {_id: null, <output>} parsed as a $group (output defaults to {count: {$sum: 1}}). */
    bson_t g = BSON_INITIALIZER;
    bson_append_null(&g, "_id", 3);
    if (parse_bucket_group(s, &g, output, true, err) < 0)
        return -1;
    for (size_t a = 0; a < s->naccs; a++)
        if (s->accs[a].n_expr != NULL && !mf_expr_is_constant(s->accs[a].n_expr))
            return mf_err_set(err, MF_E_Location4544714, "Can't refer to the group key in $bucketAuto");
    mf_expr_free(s->expr);
    s->expr = mf_expr_parse(group_by, err);
    return s->expr ? 0 : -1;
}

/* parse_union_with: "coll" or {coll, pipeline}; without coll the pipeline must start with $documents. */
static int
parse_union_with(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_value_t pl_v;
    const bson_value_t *pipeline = NULL;
    bson_iter_t it;

    if (v->value_type == BSON_TYPE_UTF8) {
        if (v->value.v_utf8.len == 0)
            return mf_err_set(err, MF_E_InvalidNamespace, "Invalid $unionWith namespace: the collection name is empty");
        s->from = bson_strdup(v->value.v_utf8.str);
        return 0;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse,
                          "the $unionWith stage specification must be an object or string, but found %s",
                          mf_type_name(v->value_type));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "coll") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '$unionWith.coll' is the wrong type '%s', expected type 'string'",
                                  mf_type_name(bson_iter_type(&it)));
            if (bson_iter_utf8(&it, NULL)[0] == '\0')
                return mf_err_set(err, MF_E_InvalidNamespace,
                                  "Invalid $unionWith namespace: the collection name is empty");
            bson_free(s->from);
            s->from = bson_strdup(bson_iter_utf8(&it, NULL));
        } else if (strcmp(k, "pipeline") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field '$unionWith.pipeline' is the wrong type '%s', expected type 'array'",
                                  mf_type_name(bson_iter_type(&it)));
            pipeline = (pl_v = *bson_iter_value(&it), &pl_v);
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field '$unionWith.%s' is an unknown field.", k);
        }
    }
    if (pipeline != NULL && (s->sub = sub_pipeline_new(pipeline, err)) == NULL)
        return -1;
    if (pipeline != NULL) {
        /* Kept as given: a streaming run opens it through env->sub_open. */
        s->spec = bson_new();
        bson_append_value(s->spec, "pipeline", 8, pipeline);
    }
    if (s->from == NULL && (s->sub == NULL || s->sub->n == 0 || s->sub->stages[0].kind != S_DOCUMENTS))
        return mf_err_set(err, MF_E_FailedToParse,
                          "$unionWith stage without explicit collection must have a pipeline with $documents as "
                          "first stage");
    if (s->sub != NULL && s->sub->writes)
        return mf_err_set(err, MF_E_Location31441, "%s is not allowed within a $unionWith's sub-pipeline",
                          s->sub->stages[s->sub->n - 1].kind == S_OUT ? "$out" : "$merge");
    if (s->sub != NULL && s->sub->n > 0 && s->sub->stages[0].kind == S_LISTSESSIONS)
        return mf_err_set(err, MF_E_Location31441, "%s is not allowed within a $unionWith's sub-pipeline",
                          s->sub->stages[0].field);
    return 0;
}

/*
 * parse_graph_lookup: {from, startWith, connectFromField, connectToField,
 * as, maxDepth, depthField, restrictSearchWithMatch}. s->from, s->local
 * (connectFromField), s->foreign (connectToField), s->field (as),
 * s->index_field (depthField), s->expr (startWith), s->n (maxDepth, -1
 * none), s->spec / s->matcher (restrictSearchWithMatch).
 */
static int
parse_graph_lookup(stage_t *s, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;

    s->n = -1;
    /*
     * document_source_graph_lookup.cpp's LiteParsed::parse first: the spec
     * is an object with a 'from' that is a string ({db, coll} only for an
     * internal namespace mayfly does not have).
     */
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_FailedToParse, "the $graphLookup stage specification must be an object, but found %s",
                          mf_type_name(v->value_type));
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_find(&it, "from")) {
        bson_t spec;
        char shown[512];
        if (bson_init_static(&spec, v->value.v_doc.data, v->value.v_doc.data_len))
            mf_fmt_doc(&spec, shown, sizeof shown);
        else
            snprintf(shown, sizeof shown, "{}");
        return mf_err_set(err, MF_E_FailedToParse, "missing 'from' option to $graphLookup stage specification: %s",
                          shown);
    }
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t fi;
        const char *db = "", *coll = "";
        bson_iter_recurse(&it, &fi);
        while (bson_iter_next(&fi)) {
            if (BSON_ITER_HOLDS_UTF8(&fi) && strcmp(bson_iter_key(&fi), "db") == 0)
                db = bson_iter_utf8(&fi, NULL);
            else if (BSON_ITER_HOLDS_UTF8(&fi) && strcmp(bson_iter_key(&fi), "coll") == 0)
                coll = bson_iter_utf8(&fi, NULL);
        }
        return mf_err_set(err, MF_E_FailedToParse,
                          "$graphLookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: %s and coll: %s",
                          db, coll);
    }
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(err, MF_E_FailedToParse, "$graphLookup 'from' field must be a string, but found %s",
                          mf_type_name(bson_iter_type(&it)));
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        char **dst = NULL;
        if (strcmp(k, "startWith") == 0) {
            mf_expr_free(s->expr);
            if ((s->expr = mf_expr_parse(fv, err)) == NULL)
                return -1;
            continue;
        }
        if (strcmp(k, "maxDepth") == 0) {
            int64_t d;
            if (!mf_value_is_number(fv))
                return mf_err_set(err, MF_E_Location40100, "maxDepth must be numeric, found type: %s",
                                  mf_type_name(fv->value_type));
            /*
             * BSONElement::safeNumberLong: NaN is 0, out of range clamps, a
             * double truncates and a decimal rounds half to even; then 40101
             * for a negative result and 40102 when it is not the number given.
             */
            double dd = mf_value_as_double(fv);
            if (fv->value_type == BSON_TYPE_INT32 || fv->value_type == BSON_TYPE_INT64) {
                d = fv->value_type == BSON_TYPE_INT32 ? fv->value.v_int32 : fv->value.v_int64;
            } else {
                double t = fv->value_type == BSON_TYPE_DOUBLE ? trunc(dd) : nearbyint(dd);
                d = isnan(dd) ? 0 : !(t < 9223372036854775808.0) ? INT64_MAX : t < -9223372036854775808.0 ? INT64_MIN
                                                                                                         : (int64_t)t;
            }
            if (d < 0)
                return mf_err_set(err, MF_E_Location40101, "maxDepth requires a nonnegative argument, found: %lld",
                                  (long long)d);
            if ((double)d != dd)
                return mf_err_set(err, MF_E_Location40102, "maxDepth could not be represented as a long long: %lld",
                                  (long long)d);
            s->n = d;
            continue;
        }
        if (strcmp(k, "restrictSearchWithMatch") == 0) {
            if (fv->value_type != BSON_TYPE_DOCUMENT)
                return mf_err_set(err, MF_E_Location40185, "restrictSearchWithMatch must be an object, found %s",
                                  mf_type_name(fv->value_type));
            if (s->spec)
                bson_destroy(s->spec);
            mf_matcher_free(s->matcher);
            s->spec = bson_new_from_data(fv->value.v_doc.data, fv->value.v_doc.data_len);
            /* Parsed with mongod's default features: no $text, no $near (2 and 5626500, with its context). */
            bson_value_t tv;
            mf_error_t te = {0};
            const char *ctx = "Failed to parse 'restrictSearchWithMatch' option to $graphLookup :: caused by :: ";
            if (mf_text_find(s->spec, &tv, &te) != 0)
                return mf_err_set(err, MF_E_BadValue, "%s$text is not allowed in this context", ctx);
            if (mf_geo_filter_has_near(s->spec))
                return mf_err_set(err, MF_E_Location5626500, "%s%s", ctx, MF_GEO_NEAR_CONTEXT_MSG);
            if ((s->matcher = mf_matcher_new(s->spec, err)) == NULL)
                return mf_err_context(err, "Failed to parse 'restrictSearchWithMatch' option to $graphLookup");
            continue;
        }
        if (strcmp(k, "from") == 0)
            dst = &s->from;
        else if (strcmp(k, "as") == 0)
            dst = &s->field;
        else if (strcmp(k, "connectFromField") == 0)
            dst = &s->local;
        else if (strcmp(k, "connectToField") == 0)
            dst = &s->foreign;
        else if (strcmp(k, "depthField") == 0)
            dst = &s->index_field;
        else
            return mf_err_set(err, MF_E_Location40104, "Unknown argument to $graphLookup: %s", k);
        if (fv->value_type != BSON_TYPE_UTF8)
            return mf_err_set(err, MF_E_Location40103, "expected string as argument for %s, found: %s", k,
                              mf_type_name(fv->value_type));
        if (dst != &s->from && fv->value.v_utf8.str[0] == '$')
            return mf_err_set(err, MF_E_Location16410, "FieldPath field names may not start with '$'. Consider "
                              "using $getField or $setField.");
        bson_free(*dst);
        *dst = bson_strdup(fv->value.v_utf8.str);
    }
    if (s->from == NULL || s->from[0] == '\0' || s->field == NULL || s->field[0] == '\0' || s->expr == NULL ||
        s->local == NULL || s->local[0] == '\0' || s->foreign == NULL || s->foreign[0] == '\0')
        return mf_err_set(err, MF_E_Location40105,
                          "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', and "
                          "'connectToField' to be specified.");
    return 0;
}

/*
 * A $match with $text must head the top-level pipeline, whose source is a
 * text plan; a $lookup's or $unionWith's sub-pipeline may start with one
 * too (its foreign collection is scanned with it), a $facet's may not
 * (its documents come from no scan): 17313 there.
 */
static int
sub_text_check(const mf_pipeline_t *sub, mf_error_t *err)
{
    bson_value_t tv;
    mf_error_t te; /* written only on failure: not zeroed (5 KB) */
    if (mf_text_find(mf_pipeline_first_match(sub), &tv, &te) != 0)
        return mf_err_set(err, MF_E_Location17313, "$match with $text is only allowed as the first pipeline stage");
    return 0;
}

/* The stages whose parse is only their kind and their parse_<stage>(s, v, err). */
static const struct {
    const char *name;
    int kind;
    int (*parse)(stage_t *s, const bson_value_t *v, mf_error_t *err);
} plain_stages[] = {
    {"$group", S_GROUP, parse_group},
    {"$unwind", S_UNWIND, parse_unwind},
    {"$lookup", S_LOOKUP, parse_lookup},
    {"$sample", S_SAMPLE, parse_sample},
    {"$bucket", S_BUCKET, parse_bucket},
    {"$merge", S_MERGE, parse_merge},
    {"$redact", S_REDACT, parse_redact},
    {"$bucketAuto", S_BUCKETAUTO, parse_bucket_auto},
    {"$unionWith", S_UNIONWITH, parse_union_with},
    {"$graphLookup", S_GRAPHLOOKUP, parse_graph_lookup},
};

static int
parse_stage(stage_t *s, const char *name, const bson_value_t *v, bool first, mf_error_t *err)
{
    int64_t n;

    if (strcmp(name, "$_internalUnpackBucket") == 0)
        return parse_unpack(s, v, err);
    for (size_t i = 0; i < sizeof plain_stages / sizeof plain_stages[0]; i++) {
        if (strcmp(name, plain_stages[i].name) == 0) {
            s->kind = plain_stages[i].kind;
            return plain_stages[i].parse(s, v, err);
        }
    }

    if (strcmp(name, "$match") == 0) {
        s->kind = S_MATCH;
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location15959, "the match filter must be an expression in an object");
        s->spec = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
        bson_value_t tv;
        mf_error_t te; /* written only on failure: not zeroed (5 KB) */
        if (!first && mf_text_find(s->spec, &tv, &te) != 0) /* only a leading $match runs through a text plan */
            return mf_err_set(err, MF_E_Location17313, "$match with $text is only allowed as the first pipeline stage");
        if (mf_geo_filter_has_near(s->spec))
            return mf_err_set(err, MF_E_Location5626500, MF_GEO_NEAR_CONTEXT_MSG);
        s->matcher = mf_matcher_new(s->spec, err);
        return s->matcher ? 0 : -1;
    }
    if (strcmp(name, "$project") == 0) {
        s->kind = S_PROJECT;
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location15969, "$project specification must be an object");
        s->spec = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
        s->projection = mf_projection_new_agg(s->spec, "$project", err);
        return s->projection ? 0 : -1;
    }
    if (strcmp(name, "$addFields") == 0 || strcmp(name, "$set") == 0) {
        s->kind = S_ADDFIELDS;
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location40272, "%s specification stage must be an object, got %s", name,
                              mf_type_name(v->value_type));
        bson_t spec;
        bson_init_static(&spec, v->value.v_doc.data, v->value.v_doc.data_len);
        s->projection = mf_projection_new_add_fields(&spec, name, err);
        return s->projection ? 0 : -1;
    }
    if (strcmp(name, "$unset") == 0) {
        /* $unset is the exclusion projection of its fields. */
        bson_t excl = BSON_INITIALIZER;
        s->kind = S_UNSET;
        if (v->value_type == BSON_TYPE_UTF8) {
            bson_append_int32(&excl, v->value.v_utf8.str, -1, 0);
        } else if (v->value_type != BSON_TYPE_ARRAY) {
            bson_destroy(&excl);
            return mf_err_set(err, MF_E_Location31002, "$unset specification must be a string or an array");
        } else {
            bson_iter_t it;
            bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
            while (bson_iter_next(&it)) {
                if (!BSON_ITER_HOLDS_UTF8(&it)) {
                    bson_destroy(&excl);
                    return mf_err_set(err, MF_E_Location31120,
                                      "$unset specification must be a string or an array containing only string values");
                }
                bson_append_int32(&excl, bson_iter_utf8(&it, NULL), -1, 0);
            }
            if (bson_empty(&excl)) {
                bson_destroy(&excl);
                return mf_err_set(err, MF_E_Location31119, "$unset specification must be a string or an array with at least one field");
            }
        }
        s->projection = mf_projection_new_agg(&excl, "$unset", err);
        bson_destroy(&excl);
        return s->projection ? 0 : -1;
    }
    if (strcmp(name, "$sort") == 0) {
        s->kind = S_SORT;
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location15973, "the $sort key specification must be an object");
        if (mf_value_is_empty_doc(v))
            return mf_err_set(err, MF_E_Location15976, "$sort stage must have at least one sort key");
        s->spec = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
        s->sort = mf_sort_new(s->spec, err);
        return s->sort ? 0 : -1;
    }
    if (strcmp(name, "$limit") == 0 || strcmp(name, "$skip") == 0) {
        /* DocumentSourceLimit/Skip::createFromBson: parseIntegerElementToNonNegativeLong's reason under 5107201/5107200, then $limit: 0 is 15958. */
        bool limit = name[1] == 'l';
        char prefix[48];
        s->kind = limit ? S_LIMIT : S_SKIP;
        snprintf(prefix, sizeof prefix, "invalid argument to %s stage: ", name);
        if (mf_match_parse_long(prefix, name, v, true, &n, err) < 0) {
            if (err != NULL)
                err->code = limit ? MF_E_Location5107201 : MF_E_Location5107200;
            return -1;
        }
        if (limit && n == 0)
            return mf_err_set(err, MF_E_Location15958, "the limit must be positive");
        s->n = n;
        return 0;
    }
    if (strcmp(name, "$count") == 0) {
        s->kind = S_COUNT;
        return parse_count_field(v, name, &s->field, err);
    }
    if (strcmp(name, "$replaceRoot") == 0 || strcmp(name, "$replaceWith") == 0) {
        s->kind = S_REPLACEROOT;
        s->preserve = strcmp(name, "$replaceWith") == 0; /* its error names the 'replacement document' */
        const bson_value_t *root = v;
        bson_iter_t it;
        if (!s->preserve) {
            if (v->value_type != BSON_TYPE_DOCUMENT)
                return mf_err_set(err, MF_E_Location40229, "expected an object as specification for $replaceRoot stage, got %s",
                                  mf_type_name(v->value_type));
            root = NULL;
            bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
            while (bson_iter_next(&it)) {
                if (strcmp(bson_iter_key(&it), "newRoot") == 0)
                    root = bson_iter_value(&it);
                else
                    return mf_err_set(err, MF_E_Location40415, "BSON field '$replaceRoot.%s' is an unknown field.",
                                      bson_iter_key(&it));
            }
            if (root == NULL)
                return mf_err_set(err, MF_E_Location40414,
                                  "BSON field '$replaceRoot.newRoot' is missing but a required field");
        }
        s->expr = mf_expr_parse(root, err);
        return s->expr ? 0 : -1;
    }
    if (strcmp(name, "$sortByCount") == 0) {
        s->kind = S_SORTBYCOUNT;
        if (!(v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') && !mf_agg_is_operator_doc(v))
            return mf_err_set(err, MF_E_Location40148,
                              "the sortByCount field must be defined as a $-prefixed path or an expression");
        s->expr = mf_expr_parse(v, err);
        if (s->expr == NULL)
            return -1;
        bson_t *spec = BCON_NEW("count", BCON_INT32(-1));
        s->sort = mf_sort_new(spec, err);
        bson_destroy(spec);
        return s->sort ? 0 : -1;
    }
    if (strcmp(name, "$facet") == 0) {
        bson_iter_t it;
        s->kind = S_FACET;
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return mf_err_set(err, MF_E_Location15947, "argument to $facet stage must be an object, but found type: %s",
                              mf_type_name(v->value_type));
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            if (facet_name_check(bson_iter_key(&it), err) != 0)
                return -1;
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mf_err_set(err, MF_E_Location40170,
                                  "arguments to $facet must be arrays, %s is type %s", bson_iter_key(&it),
                                  mf_type_name(bson_iter_type(&it)));
            if (sub_has_change_stream(bson_iter_value(&it), "$facet", err))
                return -1;
            mf_pipeline_t *sub = mf_pipeline_new(bson_iter_value(&it), err);
            if (sub == NULL)
                return -1;
            if (sub_text_check(sub, err) != 0) {
                mf_pipeline_free(sub);
                return -1;
            }
            for (size_t i = 0; i < sub->n; i++) {
                if (sub->stages[i].kind == S_FACET) {
                    mf_pipeline_free(sub);
                    return mf_err_set(err, MF_E_Location40600, "$facet is not allowed to be used within a $facet stage");
                }
            }
            s->facets = bson_realloc(s->facets, (s->nfacets + 1) * sizeof *s->facets);
            s->facet_names = bson_realloc(s->facet_names, (s->nfacets + 1) * sizeof *s->facet_names);
            s->facets[s->nfacets] = sub;
            s->facet_names[s->nfacets++] = bson_strdup(bson_iter_key(&it));
        }
        if (s->nfacets == 0)
            return mf_err_set(err, MF_E_Location40169, "the $facet specification must be a non-empty object");
        return 0;
    }
    if (strcmp(name, "$changeStream") == 0)
        return mf_err_set(err, MF_E_Location40573, "The $changeStream stage is only supported on replica sets");
    if (strcmp(name, "$setWindowFields") == 0) {
        s->kind = S_WINDOW;
        s->window = mf_window_new(v, err);
        return s->window ? 0 : -1;
    }
    if (strcmp(name, "$_internalDensify") == 0) {
        s->kind = S_DENSIFY;
        s->densify = mf_densify_new(v, err);
        return s->densify ? 0 : -1;
    }
    if (strcmp(name, "$out") == 0) {
        s->kind = S_OUT;
        return parse_target(s, name, v, err);
    }
    if (strcmp(name, "$geoNear") == 0) {
        if (!first)
            return mf_err_set(err, MF_E_Location40602, "$geoNear is only valid as the first stage in a pipeline");
        s->kind = S_GEONEAR;
        s->geonear = mf_geonear_parse(v, false, err);
        return s->geonear ? 0 : -1;
    }
    if (strcmp(name, "$indexStats") == 0 || strcmp(name, "$planCacheStats") == 0 || strcmp(name, "$collStats") == 0) {
        /* An aggregate command takes a leading $indexStats / $planCacheStats / $collStats itself (cmd_agg.c). */
        return mf_err_set(err, MF_E_Location40602, "%s is only valid as the first stage in a pipeline", name);
    }
    if (strcmp(name, "$archived") == 0) {
        /* SPEC I2: an aggregate command takes it as its first stage (cmd_agg.c) before the pipeline is built. */
        return mf_err_set(err, MF_E_Location40602, "$archived is only valid as the first stage in a pipeline");
    }
    if (strcmp(name, "$listLocalSessions") == 0 || strcmp(name, "$listSessions") == 0) {
        /* The options are checked before the position, as mongod's lite parse does. */
        s->kind = S_LISTSESSIONS;
        if (parse_list_sessions(s, name, v, err) != 0)
            return -1;
        if (!first)
            return mf_err_set(err, MF_E_Location40602, "%s is only valid as the first stage in a pipeline", name);
        return 0;
    }
    if (strcmp(name, "$currentOp") == 0 || strcmp(name, "$documents") == 0) {
        if (!first)
            return mf_err_set(err, MF_E_Location40602, "%s is only valid as the first stage in a pipeline", name);
        if (name[1] == 'c') {
            s->kind = S_CURRENTOP;
            return parse_current_op(s, v, err);
        }
        /* $documents: an expression evaluated once per run (it may use $lookup let variables). */
        s->kind = S_DOCUMENTS;
        s->expr = mf_expr_parse(v, err);
        return s->expr ? 0 : -1;
    }
    if (strcmp(name, "$search") == 0 || strcmp(name, "$searchMeta") == 0 || strcmp(name, "$vectorSearch") == 0)
        return mf_err_set(err, MF_E_SearchNotEnabled, "%s", MF_SEARCH_NOT_ENABLED);
    if (strcmp(name, "$listSearchIndexes") == 0)
        return mf_err_set(err, MF_E_SearchNotEnabled, "%s", MF_SEARCH_INDEX_NOT_ENABLED);
    if (strcmp(name, "$changeStreamSplitLargeEvent") == 0) {
        /* A change stream's stage (cmd_changestream.c): parsed, then refused by the pipeline's validation, as mongod. */
        if (v->value_type != BSON_TYPE_DOCUMENT || v->value.v_doc.data_len > 5)
            return mf_err_set(err, MF_E_Location7182800, "$changeStreamSplitLargeEvent spec should be an empty object");
        return mf_err_set(err, MF_E_IllegalOperation, "$changeStreamSplitLargeEvent can only be used in a $changeStream pipeline");
    }
    return mf_err_set(err, MF_E_Location40324, "Unrecognized pipeline stage name: '%s'", name);
}

/* sub_pipeline_writes: true (with err) if a $lookup or $facet sub-pipeline of s ends in $out / $merge. */
static bool
sub_pipeline_writes(const stage_t *s, mf_error_t *err)
{
    const mf_pipeline_t *w = NULL;
    if (s->kind == S_LOOKUP && s->sub && s->sub->writes)
        w = s->sub;
    for (size_t i = 0; w == NULL && s->kind == S_FACET && i < s->nfacets; i++) {
        if (s->facets[i]->writes)
            w = s->facets[i];
        if (s->facets[i]->n > 0 && s->facets[i]->stages[0].kind == S_GEONEAR) {
            mf_err_set(err, MF_E_Location40600, "$geoNear is not allowed to be used within a $facet stage");
            return true;
        }
        if (s->facets[i]->n > 0 && s->facets[i]->stages[0].kind == S_LISTSESSIONS) {
            mf_err_set(err, MF_E_Location40600, "%s is not allowed to be used within a $facet stage",
                       s->facets[i]->stages[0].field);
            return true;
        }
    }
    if (w == NULL)
        return false;
    const char *name = w->stages[w->n - 1].kind == S_OUT ? "$out" : "$merge";
    if (s->kind == S_LOOKUP) /* document_source_lookup.cpp's lookupPipeValidator */
        mf_err_set(err, MF_E_Location51047, "%s is not allowed within a $lookup's sub-pipeline", name);
    else
        mf_err_set(err, MF_E_Location40600, "%s is not allowed to be used within a $facet stage", name);
    return true;
}

static void optimize_pipeline(mf_pipeline_t *p);
static void sort_key_sources(mf_pipeline_t *p);

/* pipeline_add: parses stage name (argument v) as p's next stage. 0, or -1 with err (p keeps what it holds). */
static int
pipeline_add(mf_pipeline_t *p, const char *name, const bson_value_t *v, mf_error_t *err)
{
    if (p->n == MF_MAX_PIPELINE_STAGES)
        return mf_err_set(err, MF_E_Location7749501, "Pipeline length must be no longer than %d stages.",
                          MF_MAX_PIPELINE_STAGES);
    p->stages = bson_realloc(p->stages, (p->n + 1) * sizeof *p->stages);
    stage_t *s = &p->stages[p->n++];
    memset(s, 0, sizeof *s);
    s->raw = bson_new();
    bson_append_value(s->raw, name, -1, v);
    if (parse_stage(s, name, v, p->n == 1, err) < 0)
        return -1;
    if (p->n == 1 && (s->kind == S_DOCUMENTS || s->kind == S_CURRENTOP || s->kind == S_LISTSESSIONS))
        p->collectionless = true;
    if (p->writes) {
        /* A write stage parsed earlier is followed by this one. */
        const stage_t *w = &p->stages[p->n - 2];
        return mf_err_set(err, MF_E_Location40601, "%s can only be the final stage in the pipeline",
                          w->kind == S_OUT ? "$out" : "$merge");
    }
    if (s->kind == S_OUT || s->kind == S_MERGE)
        p->writes = true;
    return sub_pipeline_writes(s, err) ? -1 : 0;
}

mf_pipeline_t *
mf_pipeline_new(const bson_value_t *pipeline, mf_error_t *err)
{
    bson_iter_t it;
    mf_pipeline_t *p;

    if (pipeline == NULL || pipeline->value_type != BSON_TYPE_ARRAY) {
        mf_err_set(err, MF_E_TypeMismatch, "'pipeline' option must be specified as an array");
        return NULL;
    }
    p = bson_malloc0(sizeof *p);
    bson_iter_init_from_data(&it, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        bson_iter_t si;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mf_err_set(err, MF_E_TypeMismatch, "Each element of the 'pipeline' array must be an object");
            mf_pipeline_free(p);
            return NULL;
        }
        bson_iter_recurse(&it, &si);
        int nf = 0;
        bson_iter_t first;
        while (bson_iter_next(&si)) {
            if (nf == 0)
                first = si;
            nf++;
        }
        if (nf != 1) {
            mf_err_set(err, MF_E_Location40323, "A pipeline stage specification object must contain exactly one field.");
            mf_pipeline_free(p);
            return NULL;
        }
        /* $densify and $fill stand for the stages mongod desugars them to (agg_densify.c). */
        bson_t sugar;
        int ds = mf_densify_desugar(bson_iter_key(&first), bson_iter_value(&first), &sugar, err);
        int rc = ds < 0 ? -1 : ds == 0 ? pipeline_add(p, bson_iter_key(&first), bson_iter_value(&first), err) : 0;
        if (ds > 0) {
            bson_iter_t di, dsi;
            bson_iter_init(&di, &sugar);
            while (rc == 0 && bson_iter_next(&di) && bson_iter_recurse(&di, &dsi) && bson_iter_next(&dsi))
                rc = pipeline_add(p, bson_iter_key(&dsi), bson_iter_value(&dsi), err);
            bson_destroy(&sugar);
        }
        if (rc != 0) {
            mf_pipeline_free(p);
            return NULL;
        }
    }
    /* Reordered first, so that a $match moved up to an unpacking stage gets its bucket filter too. */
    optimize_pipeline(p);
    if (push_bucket_filters(p, err) != 0) {
        mf_pipeline_free(p);
        return NULL;
    }
    sort_key_sources(p);
    bson_value_t tv;
    mf_error_t te; /* written only on failure: not zeroed (5 KB) */
    p->text_first = mf_text_find(mf_pipeline_first_match(p), &tv, &te);
    if (p->text_first < 0)
        p->text_first = 0;
    if (p->n > 0 && p->stages[0].kind == S_GEONEAR && mf_geo_meta_mentioned(pipeline) != 0)
        p->stages[0].geo_meta = true;
    return p;
}

void
mf_pipeline_set_geo_meta(mf_pipeline_t *p)
{
    if (p->n > 0 && p->stages[0].kind == S_GEONEAR)
        p->stages[0].geo_meta = true;
}

bool
mf_pipeline_geo_meta(const mf_pipeline_t *p)
{
    return p != NULL && p->n > 0 && p->stages[0].kind == S_GEONEAR && p->stages[0].geo_meta;
}

/*
 * sort_key_sources: mongod's $sort leaves each document's sort key in its
 * metadata for a later {$meta: "sortKey"} (DocumentSourceSort, ExpressionMeta).
 * mayfly carries no metadata between stages, so the key is recomputed where it
 * is still exact: in the first $project / $addFields / $set after a $sort with
 * only $match, $limit, $skip between, whose input is the sorted documents
 * unchanged. Further on (past a reshaping stage) it evaluates to missing.
 */
static void
sort_key_sources(mf_pipeline_t *p)
{
    const mf_sort_t *sort = NULL;

    for (size_t i = 0; i < p->n; i++) {
        stage_t *s = &p->stages[i];
        if (s->kind == S_SORT) {
            sort = s->sort;
        } else if (s->kind == S_MATCH || s->kind == S_LIMIT || s->kind == S_SKIP) {
            continue;
        } else {
            if (sort != NULL && (s->kind == S_PROJECT || s->kind == S_ADDFIELDS))
                mf_projection_set_sort_key_source(s->projection, sort);
            sort = NULL;
        }
    }
}

/* remove_stage: frees stage i of p and closes the gap. */
static void
remove_stage(mf_pipeline_t *p, size_t i)
{
    stage_free(&p->stages[i]);
    memmove(&p->stages[i], &p->stages[i + 1], (p->n - i - 1) * sizeof *p->stages);
    p->n--;
}

/*
 * merge_matches: mongod's DocumentSourceMatch::doOptimizeAt joins a $match
 * with the $match right after it into one, {$and: [first, second]}, so a
 * view's $match and the reader's, or two a client sent, filter as one: the
 * leading one is then the whole filter the plan gets (its index bounds) and
 * not only its first part. Runs after every stage was parsed, so a $text
 * in a second $match has been refused already (17313). Two whose join a
 * matcher refuses (one level deeper than either: past the nesting limit)
 * stay two, as they were.
 */
static bool
merge_matches(mf_pipeline_t *p)
{
    bool merged = false;
    for (size_t i = 0; i + 1 < p->n;) {
        stage_t *a = &p->stages[i], *b = &p->stages[i + 1];
        if (a->kind != S_MATCH || b->kind != S_MATCH) {
            i++;
            continue;
        }
        bson_t *spec = bson_new(), arr, *raw;
        BSON_APPEND_ARRAY_BEGIN(spec, "$and", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", a->spec);
        BSON_APPEND_DOCUMENT(&arr, "1", b->spec);
        bson_append_array_end(spec, &arr);
        mf_error_t te; /* written only on failure: not zeroed (5 KB) */
        mf_matcher_t *m = mf_matcher_new(spec, &te);
        if (m == NULL) {
            bson_destroy(spec);
            i++;
            continue;
        }
        raw = bson_new();
        BSON_APPEND_DOCUMENT(raw, "$match", spec);
        mf_matcher_free(a->matcher);
        bson_destroy(a->spec);
        bson_destroy(a->raw);
        a->matcher = m;
        a->spec = spec;
        a->raw = raw;
        remove_stage(p, i + 1);
        merged = true;
    }
    return merged;
}

/*
 * MongoDB's "$project + $skip/$limit" optimisation: a $skip or $limit right
 * after stages that reshape each document one for one ($project, $addFields /
 * $set, $unset) moves in front of them, so expressions are never evaluated
 * (nor fail) for documents the $limit drops. The results are the same.
 * True if a stage moved.
 */
static bool
limit_before_projections(mf_pipeline_t *p)
{
    bool moved = false;
    for (size_t i = 1; i < p->n; i++) {
        for (size_t j = i; j > 0 && (p->stages[j].kind == S_LIMIT || p->stages[j].kind == S_SKIP); j--) {
            enum stage_kind prev = p->stages[j - 1].kind;
            if (prev != S_PROJECT && prev != S_ADDFIELDS && prev != S_UNSET)
                break;
            stage_t t = p->stages[j - 1];
            p->stages[j - 1] = p->stages[j];
            p->stages[j] = t;
            moved = true;
        }
    }
    return moved;
}

/*
 * coalesce_skip_limit: $limit then $limit is one $limit of the smaller
 * (DocumentSourceLimit::doOptimizeAt), $skip then $skip one $skip of the sum
 * unless it would overflow (DocumentSourceSkip::doOptimizeAt), and a
 * $skip: 0 goes (DocumentSourceSkip::optimize). The merged stage shows its
 * count as a long, as mongod serialises it. True if anything changed.
 */
static bool
coalesce_skip_limit(mf_pipeline_t *p)
{
    bool merged = false;
    for (size_t i = 0; i < p->n;) {
        if (p->stages[i].kind == S_SKIP && p->stages[i].n == 0) {
            remove_stage(p, i); /* DocumentSourceSkip::optimize: skipping nothing is no stage */
            merged = true;
            continue;
        }
        if (i + 1 == p->n)
            break;
        stage_t *a = &p->stages[i], *b = &p->stages[i + 1];
        bool lim = a->kind == S_LIMIT && b->kind == S_LIMIT;
        if (!lim && !(a->kind == S_SKIP && b->kind == S_SKIP && a->n <= INT64_MAX - b->n)) {
            i++;
            continue;
        }
        a->n = lim ? (a->n < b->n ? a->n : b->n) : a->n + b->n;
        bson_reinit(a->raw);
        bson_append_int64(a->raw, lim ? "$limit" : "$skip", -1, a->n);
        remove_stage(p, i + 1);
        merged = true;
    }
    return merged;
}

/*
 * stage_modpaths: what s changes, as its getModifiedPaths tells mongod's
 * pushMatchBefore: nothing for $sort (DocumentSourceSort, canSwapWithMatch
 * while no $limit is absorbed: mayfly keeps the $limit a stage of its own,
 * which no $match passes), the projection's paths for $project / $addFields
 * / $set / $unset (ProjectionExecutor), the path and index field for
 * $unwind (DocumentSourceUnwind), `as` (and an absorbed $unwind's index
 * field) for $lookup and $graphLookup (DocumentSourceLookUp / GraphLookUp),
 * everything but the "$x" parts of its key for $group (DocumentSourceGroupBase,
 * unless filter fails groupMatchSwapVerified). Every other stage changes
 * everything here: no $match passes it.
 */
static void
stage_modpaths(const stage_t *s, const bson_t *filter, mf_modpaths_t *m)
{
    bson_iter_t it, gi;
    bson_t spec;

    if (s->kind == S_GROUP && bson_iter_init(&it, s->raw) && bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &gi) && bson_iter_find(&gi, "_id")) {
        mf_modpaths_from_group(m, bson_iter_value(&gi), filter);
        return;
    }
    bool joins = s->kind == S_LOOKUP || s->kind == S_GRAPHLOOKUP;
    mf_modpaths_init(m, s->kind == S_SORT || s->kind == S_UNSET || s->kind == S_UNWIND || joins ? MF_MODS_FINITE
                                                                                              : MF_MODS_ALL);
    if (s->kind == S_UNWIND || joins)
        mf_modpaths_add(m, s->field);
    if (s->kind == S_UNWIND && s->index_field != NULL)
        mf_modpaths_add(m, s->index_field);
    if (joins && s->unwind != NULL && s->unwind->index_field != NULL)
        mf_modpaths_add(m, s->unwind->index_field);
    if ((s->kind != S_PROJECT && s->kind != S_ADDFIELDS && s->kind != S_UNSET) || !bson_iter_init(&it, s->raw) ||
        !bson_iter_next(&it))
        return;
    if (s->kind == S_UNSET && BSON_ITER_HOLDS_UTF8(&it)) {
        mf_modpaths_add(m, bson_iter_utf8(&it, NULL));
    } else if (s->kind == S_UNSET) {
        bson_iter_t ai;
        for (bson_iter_recurse(&it, &ai); bson_iter_next(&ai);)
            mf_modpaths_add(m, bson_iter_utf8(&ai, NULL));
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        bson_init_static(&spec, v->value.v_doc.data, v->value.v_doc.data_len);
        mf_modpaths_free(m);
        mf_modpaths_from_projection(m, &spec, s->kind == S_ADDFIELDS);
    }
}

/* match_stage_set: s becomes the $match of filter (taken over). 0, or -1 (s unchanged, filter destroyed). */
static int
match_stage_set(stage_t *s, bson_t *filter)
{
    mf_error_t te; /* written only on failure: not zeroed (5 KB) */
    mf_matcher_t *m = mf_matcher_new(filter, &te);
    if (m == NULL) {
        bson_destroy(filter);
        return -1;
    }
    stage_free(s);
    memset(s, 0, sizeof *s);
    s->kind = S_MATCH;
    s->spec = filter;
    s->matcher = m;
    s->raw = bson_new();
    BSON_APPEND_DOCUMENT(s->raw, "$match", filter);
    return 0;
}

/*
 * push_match_at: moves the $match at i (i > 0), or its part independent of
 * what stage i - 1 changes, ahead of that stage (DocumentSource::pushMatchBefore,
 * DocumentSourceMatch::splitMatchByModifiedFields). True if anything moved.
 */
static bool
push_match_at(mf_pipeline_t *p, size_t i)
{
    mf_modpaths_t m;
    bson_t *moved, *kept;
    stage_t t, fresh;

    stage_modpaths(&p->stages[i - 1], p->stages[i].spec, &m);
    enum mf_split r = mf_match_split(p->stages[i].spec, &m, &moved, &kept);
    mf_modpaths_free(&m);
    if (r == MF_SPLIT_NONE)
        return false;
    if (r == MF_SPLIT_PARTS && kept == NULL && match_stage_set(&p->stages[i], moved) != 0)
        return false;
    if (r == MF_SPLIT_PARTS && kept != NULL) {
        memset(&fresh, 0, sizeof fresh);
        if (match_stage_set(&fresh, moved) != 0) {
            bson_destroy(kept);
            return false;
        }
        if (match_stage_set(&p->stages[i], kept) != 0) {
            stage_free(&fresh);
            return false;
        }
        p->stages = bson_realloc(p->stages, (p->n + 1) * sizeof *p->stages);
        memmove(&p->stages[i], &p->stages[i - 1], (p->n - i + 1) * sizeof *p->stages);
        p->n++;
        p->stages[i - 1] = fresh;
        return true;
    }
    t = p->stages[i - 1];
    p->stages[i - 1] = p->stages[i];
    p->stages[i] = t;
    return true;
}

/*
 * redact_matches: a $match right after a $redact puts the part of it that
 * no redaction can make true (mf_match_redact_safe) in a $match of its own
 * ahead of the $redact, and stays where it is (DocumentSourceRedact::
 * doOptimizeAt), so that part reaches the plan and its index. The $redact
 * remembers the filter it did this for: mongod's one pass does it each
 * time it visits the $redact, and the $match after it only changes when
 * another joins it. True if a $match was inserted.
 */
static bool
redact_matches(mf_pipeline_t *p)
{
    bool inserted = false;

    for (size_t i = 0; i + 1 < p->n; i++) {
        stage_t *r = &p->stages[i], *m = &p->stages[i + 1], fresh;
        if (r->kind != S_REDACT || m->kind != S_MATCH || (r->redact_for != NULL && bson_equal(r->redact_for, m->spec)))
            continue;
        bson_t *safe = mf_match_redact_safe(m->spec);
        if (r->redact_for != NULL)
            bson_destroy(r->redact_for);
        r->redact_for = bson_copy(m->spec);
        memset(&fresh, 0, sizeof fresh);
        if (safe == NULL || match_stage_set(&fresh, safe) != 0)
            continue;
        p->stages = bson_realloc(p->stages, (p->n + 1) * sizeof *p->stages);
        memmove(&p->stages[i + 1], &p->stages[i], (p->n - i) * sizeof *p->stages);
        p->n++;
        p->stages[i++] = fresh; /* i: the $redact again */
        inserted = true;
    }
    return inserted;
}

/*
 * union_append: u ($unionWith) gets stage (its {name: argument}) at the end
 * of its sub-pipeline: its parsed sub-pipeline, the `pipeline` a streaming
 * run opens (u->spec) and its explain form, {coll, pipeline} as
 * DocumentSourceUnionWith::serialize writes it. 0, or -1 with u unchanged.
 */
static int
union_append(stage_t *u, const bson_t *stage)
{
    bson_t *spec = bson_new(), *raw, arr, in;
    bson_iter_t it, ai;
    bson_value_t pv;
    unsigned n = 0;
    char idx[16];
    mf_error_t te; /* written only on failure: not zeroed (5 KB) */

    BSON_APPEND_ARRAY_BEGIN(spec, "pipeline", &arr);
    if (u->spec != NULL && bson_iter_init_find(&it, u->spec, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it))
        for (bson_iter_recurse(&it, &ai); bson_iter_next(&ai); n++) {
            bson_snprintf(idx, sizeof idx, "%u", n);
            bson_append_value(&arr, idx, -1, bson_iter_value(&ai));
        }
    bson_snprintf(idx, sizeof idx, "%u", n);
    BSON_APPEND_DOCUMENT(&arr, idx, stage);
    bson_append_array_end(spec, &arr);
    bson_iter_init_find(&it, spec, "pipeline");
    pv = *bson_iter_value(&it);
    mf_pipeline_t *sub = sub_pipeline_new(&pv, &te);
    if (sub == NULL) {
        bson_destroy(spec);
        return -1;
    }
    raw = bson_new();
    BSON_APPEND_DOCUMENT_BEGIN(raw, "$unionWith", &in);
    if (u->from != NULL)
        BSON_APPEND_UTF8(&in, "coll", u->from);
    bson_append_value(&in, "pipeline", -1, &pv);
    bson_append_document_end(raw, &in);
    mf_pipeline_free(u->sub);
    if (u->spec != NULL)
        bson_destroy(u->spec);
    bson_destroy(u->raw);
    u->sub = sub;
    u->spec = spec;
    u->raw = raw;
    return 0;
}

/*
 * union_pushdown: a $match, $project, $addFields / $set, $unset or
 * $replaceRoot / $replaceWith right after a $unionWith goes ahead of it and
 * a copy of it ends the $unionWith's sub-pipeline
 * (DocumentSourceUnionWith::doOptimizeAt), so each side filters (and plans)
 * or reshapes its own documents. True if a stage moved.
 */
static bool
union_pushdown(mf_pipeline_t *p)
{
    bool moved = false;

    for (size_t i = 0; i + 1 < p->n; i++) {
        stage_t *u = &p->stages[i], *x = &p->stages[i + 1];
        if (u->kind != S_UNIONWITH || (x->kind != S_MATCH && x->kind != S_PROJECT && x->kind != S_ADDFIELDS &&
                                       x->kind != S_UNSET && x->kind != S_REPLACEROOT))
            continue;
        if (union_append(u, x->raw) != 0)
            continue;
        stage_t t = *u;
        *u = *x;
        *x = t;
        moved = true;
    }
    return moved;
}

/*
 * lookup_raw: l's explain form after it absorbed stages, as
 * DocumentSourceLookUp::serializeToArray writes it: the user's fields, a
 * `let` and a `pipeline` ending in the absorbed $match when there is one,
 * and `unwinding` (a $graphLookup's: its fields and `unwinding`, as
 * DocumentSourceGraphLookUp::serializeToArray).
 */
static void
lookup_raw(stage_t *l)
{
    bson_t *raw = bson_new(), in, sub, arr;
    bson_iter_t it, ai;
    bool has_let = false, has_pipeline = false;
    char idx[16];

    BSON_APPEND_DOCUMENT_BEGIN(raw, l->kind == S_LOOKUP ? "$lookup" : "$graphLookup", &in);
    for (bson_iter_init(&it, l->lu_spec); bson_iter_next(&it);) {
        const char *k = bson_iter_key(&it);
        has_let |= strcmp(k, "let") == 0;
        if (strcmp(k, "pipeline") != 0 || l->lu_filter == NULL || !BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_append_value(&in, k, -1, bson_iter_value(&it));
            continue;
        }
        has_pipeline = true;
        unsigned n = 0;
        BSON_APPEND_ARRAY_BEGIN(&in, "pipeline", &arr);
        for (bson_iter_recurse(&it, &ai); bson_iter_next(&ai); n++) {
            bson_snprintf(idx, sizeof idx, "%u", n);
            bson_append_value(&arr, idx, -1, bson_iter_value(&ai));
        }
        bson_snprintf(idx, sizeof idx, "%u", n);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, idx, &sub);
        BSON_APPEND_DOCUMENT(&sub, "$match", l->lu_filter);
        bson_append_document_end(&arr, &sub);
        bson_append_array_end(&in, &arr);
    }
    if (l->lu_filter != NULL && !has_let) {
        BSON_APPEND_DOCUMENT_BEGIN(&in, "let", &sub);
        bson_append_document_end(&in, &sub);
    }
    if (l->lu_filter != NULL && !has_pipeline) {
        BSON_APPEND_ARRAY_BEGIN(&in, "pipeline", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &sub);
        BSON_APPEND_DOCUMENT(&sub, "$match", l->lu_filter);
        bson_append_document_end(&arr, &sub);
        bson_append_array_end(&in, &arr);
    }
    BSON_APPEND_DOCUMENT_BEGIN(&in, "unwinding", &sub);
    BSON_APPEND_BOOL(&sub, "preserveNullAndEmptyArrays", l->unwind->preserve);
    if (l->unwind->index_field != NULL)
        BSON_APPEND_UTF8(&sub, "includeArrayIndex", l->unwind->index_field);
    bson_append_document_end(&in, &sub);
    bson_append_document_end(raw, &in);
    bson_destroy(l->raw);
    l->raw = raw;
}

/*
 * absorb_unwinds: a $lookup or $graphLookup followed by an $unwind of its
 * `as` path takes that $unwind in (DocumentSourceLookUp / GraphLookUp
 * ::doOptimizeAt): it runs on each joined document, and explain shows it as
 * the stage's `unwinding`.
 * True if one was absorbed.
 */
static bool
absorb_unwinds(mf_pipeline_t *p)
{
    bool absorbed = false;
    bson_iter_t it;

    for (size_t i = 0; i + 1 < p->n; i++) {
        stage_t *l = &p->stages[i], *u = &p->stages[i + 1];
        if ((l->kind != S_LOOKUP && l->kind != S_GRAPHLOOKUP) || l->unwind != NULL || u->kind != S_UNWIND ||
            strcmp(u->field, l->field) != 0 ||
            !bson_iter_init(&it, l->raw) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        const bson_value_t *v = bson_iter_value(&it);
        l->lu_spec = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
        l->unwind = bson_malloc(sizeof *l->unwind);
        *l->unwind = *u;
        memset(u, 0, sizeof *u); /* now the $lookup's */
        remove_stage(p, i + 1);
        lookup_raw(l);
        absorbed = true;
    }
    return absorbed;
}

/*
 * absorb_lookup_matches: a $match right after a $lookup that unwinds its
 * `as` (neither preserving empty arrays nor numbering them), all of whose
 * predicates are on paths under `as`, becomes a filter of the joined
 * documents (DocumentSourceLookUp::doOptimizeAt's matchSrc /
 * additionalFilter, descendMatchOnPath): {"as.x": 1} filters the other
 * collection by {x: 1}, through its index when there is no sub-pipeline.
 * Earlier ones are joined with {$and: [...]}. True if one was absorbed.
 */
static bool
absorb_lookup_matches(mf_pipeline_t *p)
{
    bool absorbed = false;

    for (size_t i = 0; i + 1 < p->n; i++) {
        stage_t *l = &p->stages[i], *m = &p->stages[i + 1];
        if (l->kind != S_LOOKUP || l->unwind == NULL || l->unwind->preserve || l->unwind->index_field != NULL ||
            m->kind != S_MATCH)
            continue;
        bson_t *d = mf_match_descend(m->spec, l->field), arr;
        if (d == NULL)
            continue;
        if (l->lu_filter != NULL) {
            bson_t *both = bson_new();
            BSON_APPEND_ARRAY_BEGIN(both, "$and", &arr);
            BSON_APPEND_DOCUMENT(&arr, "0", l->lu_filter);
            BSON_APPEND_DOCUMENT(&arr, "1", d);
            bson_append_array_end(both, &arr);
            bson_destroy(d);
            d = both;
        }
        mf_error_t te; /* written only on failure: not zeroed (5 KB) */
        mf_matcher_t *mm = mf_matcher_new(d, &te);
        if (mm == NULL) {
            bson_destroy(d);
            continue;
        }
        if (l->lu_filter != NULL)
            bson_destroy(l->lu_filter);
        mf_matcher_free(l->lu_matcher);
        l->lu_filter = d;
        l->lu_matcher = mm;
        remove_stage(p, i + 1);
        lookup_raw(l);
        absorbed = true;
    }
    return absorbed;
}

/*
 * optimize_pipeline: the rewrites of mongod's Pipeline::optimizeContainer
 * that cannot change results, repeated until none applies (each moves a
 * stage earlier or removes one, or inserts a $redact's $match once per
 * filter after it, so this ends; the bound is a safeguard): stages after a
 * $unionWith into it, joining consecutive $match stages, $skip / $limit
 * ahead of one-for-one reshaping, joining $skip / $limit runs (and dropping
 * $skip: 0), stages taken into a $lookup / $graphLookup, a $match's
 * redact-safe part ahead of a $redact, and moving each $match (or its
 * independent part) ahead of a stage it does not depend on, so that it
 * reaches the front of the pipeline and the query plan (an index) where
 * mongod's would.
 */
static void
optimize_pipeline(mf_pipeline_t *p)
{
    for (int round = 0; round < 1000; round++) {
        bool changed = union_pushdown(p); /* first: mongod's pass reaches the $unionWith before what follows it */
        changed |= merge_matches(p);
        changed |= limit_before_projections(p);
        changed |= coalesce_skip_limit(p);
        changed |= absorb_unwinds(p);
        changed |= absorb_lookup_matches(p);
        changed |= redact_matches(p);
        for (size_t i = 1; i < p->n; i++)
            if (p->stages[i].kind == S_MATCH && push_match_at(p, i))
                changed = true;
        if (!changed)
            break;
    }
}

bool
mf_pipeline_writes(const mf_pipeline_t *p)
{
    return p != NULL && p->writes;
}

bool
mf_pipeline_write_target(const mf_pipeline_t *p, const char **db, const char **coll, const bson_t **merge_spec)
{
    if (p == NULL || !p->writes || p->n == 0)
        return false;
    const stage_t *s = &p->stages[p->n - 1];
    *db = s->local;
    *coll = s->from;
    *merge_spec = s->kind == S_MERGE ? s->spec : NULL;
    return true;
}

bool
mf_pipeline_out_timeseries(const mf_pipeline_t *p, bson_value_t *ts)
{
    bson_iter_t it;
    if (p == NULL || !p->writes || p->n == 0)
        return false;
    const stage_t *s = &p->stages[p->n - 1];
    if (s->kind != S_OUT || s->spec == NULL || !bson_iter_init_find(&it, s->spec, "timeseries"))
        return false;
    *ts = *bson_iter_value(&it); /* its document's bytes are the stage's */
    return true;
}

int
mf_pipeline_foreign_colls(const mf_pipeline_t *p, int (*fn)(void *arg, const char *coll), void *arg)
{
    for (size_t i = 0; p != NULL && i < p->n; i++) {
        const stage_t *s = &p->stages[i];
        int rc = 0;
        if ((s->kind == S_LOOKUP || s->kind == S_UNIONWITH || s->kind == S_GRAPHLOOKUP) && s->from != NULL)
            rc = fn(arg, s->from);
        if (rc == 0 && (s->kind == S_LOOKUP || s->kind == S_UNIONWITH))
            rc = mf_pipeline_foreign_colls(s->sub, fn, arg);
        for (size_t j = 0; rc == 0 && s->kind == S_FACET && j < s->nfacets; j++)
            rc = mf_pipeline_foreign_colls(s->facets[j], fn, arg);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int
mf_pipeline_lookup_from_check(const mf_pipeline_t *p, const char *db, mf_error_t *err)
{
    for (size_t i = 0; p != NULL && i < p->n; i++) {
        const stage_t *s = &p->stages[i];
        /* document_source_lookup.cpp LiteParsed: from "" names the database alone, which is no namespace. */
        if (s->kind == S_LOOKUP && s->from != NULL && s->from[0] == '\0')
            return mf_err_set(err, MF_E_InvalidNamespace, "invalid $lookup namespace: %s.", db);
        if ((s->kind == S_LOOKUP || s->kind == S_UNIONWITH) && mf_pipeline_lookup_from_check(s->sub, db, err) != 0)
            return -1;
        for (size_t j = 0; s->kind == S_FACET && j < s->nfacets; j++)
            if (mf_pipeline_lookup_from_check(s->facets[j], db, err) != 0)
                return -1;
    }
    return 0;
}

bool
mf_pipeline_is_collectionless(const mf_pipeline_t *p)
{
    return p != NULL && p->collectionless;
}

bool
mf_pipeline_is_current_op(const mf_pipeline_t *p)
{
    return p != NULL && p->n > 0 && p->stages[0].kind == S_CURRENTOP;
}

const char *
mf_pipeline_lists_sessions(const mf_pipeline_t *p)
{
    return p != NULL && p->n > 0 && p->stages[0].kind == S_LISTSESSIONS ? p->stages[0].field : NULL;
}

bool
mf_pipeline_starts_with_documents(const mf_pipeline_t *p)
{
    return p != NULL && p->n > 0 && p->stages[0].kind == S_DOCUMENTS;
}

bool
mf_pipeline_sorts_by_text_score(const mf_pipeline_t *p)
{
    for (size_t i = 0; p != NULL && i < p->n; i++)
        if (p->stages[i].kind == S_SORT && mf_sort_uses_text_score(p->stages[i].sort))
            return true;
    return false;
}

const bson_t *
mf_pipeline_first_match(const mf_pipeline_t *p)
{
    if (p == NULL || p->n == 0 || p->stages[0].kind != S_MATCH)
        return NULL;
    return p->stages[0].spec;
}

/* ------------------------------------------------------------------------ */
/* Execution                                                                */
/* ------------------------------------------------------------------------ */

static int run_stages(const mf_pipeline_t *p, const mf_agg_env_t *env, mf_docvec_t *docs, mf_error_t *err);
static int run_stage(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err);

static int
collect_visit(void *arg, const bson_t *doc)
{
    mf_docvec_push((mf_docvec_t *)arg, doc);
    return 0;
}

/* Values of a path with query-style array traversal, for $lookup. */
typedef struct lvals {
    bson_t arr;
    uint32_t n;
    bool saw_missing;
    bool saw_regex;
} lvals_t;

static bool
lookup_visit(void *arg, const bson_value_t *v, int32_t pos)
{
    lvals_t *l = arg;
    char buf[16];
    const char *key;

    (void)pos;
    if (v == NULL || v->value_type == BSON_TYPE_EOD) {
        l->saw_missing = true;
        return false;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            l->saw_regex = l->saw_regex || BSON_ITER_HOLDS_REGEX(&it);
            bson_uint32_to_string(l->n++, &key, buf, sizeof buf);
            bson_append_value(&l->arr, key, -1, bson_iter_value(&it));
        }
        return false;
    }
    l->saw_regex = l->saw_regex || v->value_type == BSON_TYPE_REGEX;
    bson_uint32_to_string(l->n++, &key, buf, sizeof buf);
    bson_append_value(&l->arr, key, -1, v);
    return false;
}

/*
 * lookup_join_filter: the foreign-side filter for the local values in l, as
 * document_source_lookup.cpp's makeMatchStageFromInput builds it: no value
 * at all is null (a path whose array elements lack the field adds
 * nothing: document_path_support's visitAllValuesAtPath skips missing
 * values); one value is {foreign: {$eq: v}}; several are {foreign: {$in:
 * [...]}}, or with a regular expression among them {$or: [{foreign: {$eq:
 * v}}, ...]} so that a regex joins only an equal regex, never by pattern.
 * Consumes l->arr.
 */
static void
lookup_join_filter(lvals_t *l, const char *foreign, bson_t *filter)
{
    bson_t cond;
    bson_iter_t it;
    if (l->n == 0) {
        bson_append_null(&l->arr, "0", 1);
        l->n = 1;
    }
    if (l->n == 1 || !l->saw_regex) {
        bson_append_document_begin(filter, foreign, -1, &cond);
        if (l->n == 1 && bson_iter_init(&it, &l->arr) && bson_iter_next(&it))
            bson_append_value(&cond, "$eq", 3, bson_iter_value(&it));
        else
            bson_append_array(&cond, "$in", 3, &l->arr);
        bson_append_document_end(filter, &cond);
    } else {
        bson_t or, one;
        uint32_t k = 0;
        bson_append_array_begin(filter, "$or", 3, &or);
        bson_iter_init(&it, &l->arr);
        while (bson_iter_next(&it)) {
            char buf[16];
            const char *key;
            bson_uint32_to_string(k++, &key, buf, sizeof buf);
            bson_append_document_begin(&or, key, -1, &one);
            bson_append_document_begin(&one, foreign, -1, &cond);
            bson_append_value(&cond, "$eq", 3, bson_iter_value(&it));
            bson_append_document_end(&one, &cond);
            bson_append_document_end(&or, &one);
        }
        bson_append_array_end(filter, &or);
    }
    bson_destroy(&l->arr);
}

/*
 * run_sub: runs a $lookup's sub-pipeline over *docs for the local document
 * local: the let expressions are evaluated against local (in the enclosing
 * ambient scope) and installed as an ambient frame for the run, then removed.
 */
/*
 * The collection a $geoNear reads: NULL for the pipeline's own source, a
 * $lookup's 'from' while its sub-pipeline runs (per thread: a pipeline runs
 * on one thread).
 */
static __thread const char *tls_geo_source;

/*
 * What the $lookup whose sub-pipeline is running on this thread has let its
 * inner $lookups produce for its current document (run_lookup).
 */
typedef struct lookup_budget {
    int64_t used, max;
    const char *from; /* the outer $lookup's collection, for the message */
} lookup_budget_t;
static __thread lookup_budget_t *tls_lookup_budget;

/*
 * run_joined: a collectionless sub-pipeline with a localField / foreignField
 * join: its source stage ($documents), then the join filter, then the rest,
 * as document_source_lookup.cpp places the join's $match after a leading
 * $documents. Consumes *docs as run_stages does.
 */
static int
run_joined(const mf_pipeline_t *p, const bson_t *join, const mf_agg_env_t *env, mf_docvec_t *docs, mf_error_t *err)
{
    mf_docvec_t out, kept;
    mf_matcher_t *m = mf_matcher_new(join, err);
    int rc = -1;

    mf_docvec_init(&out);
    mf_docvec_init(&kept);
    if (m == NULL) {
        mf_docvec_destroy(docs);
        return -1;
    }
    int r0 = run_stage(&p->stages[0], env, docs, &out, err);
    mf_docvec_init(docs); /* consumed by the stage, as in run_stages */
    if (r0 < 0)
        goto done;
    for (size_t i = 0; i < out.len; i++) {
        if (mf_matcher_match(m, out.docs[i], NULL)) {
            mf_docvec_push_steal(&kept, out.docs[i]);
            out.docs[i] = NULL;
        }
    }
    for (size_t i = 1; i < p->n; i++) {
        mf_docvec_t next;
        mf_docvec_init(&next);
        if (run_stage(&p->stages[i], env, &kept, &next, err) < 0) {
            mf_docvec_destroy(&next);
            mf_docvec_init(&kept);
            goto done;
        }
        kept = next;
    }
    *docs = kept;
    mf_docvec_init(&kept);
    rc = 0;
done:
    mf_docvec_destroy(&out);
    mf_docvec_destroy(&kept);
    mf_matcher_free(m);
    return rc;
}

static int
run_sub(const stage_t *s, const mf_agg_env_t *env, const bson_t *local, const bson_t *join, mf_docvec_t *docs,
        lookup_budget_t *budget, mf_error_t *err)
{
    bson_value_t *vals;
    int rc = let_vars_eval(&s->let, local, &vals, err);

    if (rc == 0) {
        mf_expr_vars_t frame = {(const char *const *)s->let.names, vals, s->let.n, mf_expr_vars_current()};
        mf_expr_vars_set(&frame);
        const char *outer = tls_geo_source;
        lookup_budget_t *outer_budget = tls_lookup_budget;
        tls_geo_source = s->from; /* a $geoNear in the sub-pipeline reads the foreign collection's indexes */
        tls_lookup_budget = budget;
        rc = join != NULL && s->sub->n > 0 ? run_joined(s->sub, join, env, docs, err)
                                           : run_stages(s->sub, env, docs, err);
        tls_lookup_budget = outer_budget;
        tls_geo_source = outer;
        mf_expr_vars_set(frame.up);
    } else {
        mf_docvec_destroy(docs);
    }
    let_vals_free(vals, s->let.n);
    return rc;
}

/* strip_scores: a text search's hidden score fields leave the sub-pipeline that made them (doc/text.h). */
static void
strip_scores(mf_docvec_t *v)
{
    for (size_t i = 0; i < v->len; i++)
        mf_text_strip_score(&v->docs[i]);
}

/* lookup_too_big: 4568, mongod's message for a $lookup of 'from' past max bytes. */
static int
lookup_too_big(const char *from, int64_t max, mf_error_t *err)
{
    return mf_err_set(err, MF_E_Location4568,
                      "Total size of documents in %s matching pipeline's $lookup stage exceeds %lld bytes",
                      from ? from : "$cmd.aggregate", (long long)max);
}

/*
 * run_lookup: for each local document, the foreign documents it joins:
 * env->scan of 'from' with {<foreignField>: {$in: <local values>}} (the
 * planner uses an index on foreignField when there is one), or all of
 * 'from' for a pure sub-pipeline; the sub-pipeline, if any, then runs over
 * them. One scan per local document, as MongoDB's classic $lookup does, so
 * the input streams and memory is bounded by one document's matches.
 *
 * Bounds: one document's 'as' array may total env->lookup_max_bytes (4568
 * past it, as mongod). A sub-pipeline runs over vectors held in memory
 * (mongod streams it), so a $lookup nested in another's sub-pipeline also
 * charges every document it outputs to the outer one's budget for its
 * current document: nesting cannot multiply memory beyond the limit. Each
 * local document is a yield point (killOp, maxTimeMS, shutdown), so nesting
 * that multiplies work ends on those too.
 */
/* lookup_filter_joined: keeps the documents of v the absorbed $match of s matches. 0, or -1 with err. */
static int
lookup_filter_joined(const stage_t *s, mf_docvec_t *v, mf_error_t *err)
{
    size_t k = 0;
    int rc = 0;
    for (size_t j = 0; j < v->len; j++) {
        if (rc == 0 && mf_matcher_match(s->lu_matcher, v->docs[j], NULL))
            v->docs[k++] = v->docs[j];
        else
            bson_destroy(v->docs[j]);
        if (rc == 0 && mf_matcher_take_failure(err))
            rc = -1;
    }
    v->len = k;
    return rc;
}

static int
run_lookup(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    bool scans = s->from != NULL && (s->sub == NULL || !s->sub->collectionless);
    int rc = 0;

    if (scans && (env == NULL || env->scan == NULL)) {
        mf_docvec_destroy(in);
        return mf_err_set(err, MF_E_InternalError, "$lookup needs a collection scanner");
    }
    int64_t max = env != NULL && env->lookup_max_bytes > 0 ? env->lookup_max_bytes : 104857600;
    lookup_budget_t *outer = tls_lookup_budget;
    for (size_t i = 0; i < in->len && rc == 0; i++) {
        bson_t *doc = in->docs[i];
        bson_t filter = BSON_INITIALIZER;
        mf_docvec_t matched;
        lookup_budget_t budget = {0, max, s->from};
        if ((rc = mf_curop_check_current(err)) != 0)
            break;
        mf_docvec_init(&matched);
        if (s->local) {
            lvals_t l = {.n = 0, .saw_missing = false, .saw_regex = false};
            bson_init(&l.arr);
            mf_path_walk(doc, s->local, lookup_visit, &l);
            lookup_join_filter(&l, s->foreign, &filter);
        }
        if (scans && s->sub != NULL && s->sub->text_first) {
            /*
             * A leading $text: the scan is the text search (with the equality, if any), scores attached;
             * the $match stage then applies the rest of its filter (its $text matches every scanned
             * document), with the let variables set. Under $or the whole filter must plan the search.
             */
            bson_t both = BSON_INITIALIZER, and, tonly = BSON_INITIALIZER;
            const bson_t *m = mf_pipeline_first_match(s->sub);
            bson_value_t tv;
            if (s->sub->text_first == 1 && mf_text_find(m, &tv, err) == 1) {
                bson_append_value(&tonly, "$text", 5, &tv);
                m = &tonly;
            }
            if (s->local) {
                bson_append_array_begin(&both, "$and", 4, &and);
                bson_append_document(&and, "0", 1, &filter);
                bson_append_document(&and, "1", 1, m);
                bson_append_array_end(&both, &and);
            }
            rc = env->scan(env->ctx, s->from, s->local ? &both : m, collect_visit, &matched, err);
            bson_destroy(&both);
            bson_destroy(&tonly);
        } else if (scans && s->lu_filter != NULL && s->local != NULL && s->sub == NULL) {
            /* The absorbed $match joins the foreign query (makeMatchStageFromInput's additionalFilter). */
            bson_t both = BSON_INITIALIZER, and;
            bson_append_array_begin(&both, "$and", 4, &and);
            bson_append_document(&and, "0", 1, &filter);
            bson_append_document(&and, "1", 1, s->lu_filter);
            bson_append_array_end(&both, &and);
            rc = env->scan(env->ctx, s->from, &both, collect_visit, &matched, err);
            bson_destroy(&both);
        } else if (scans) {
            rc = env->scan(env->ctx, s->from, s->local ? &filter : NULL, collect_visit, &matched, err);
        }
        if (rc == 0 && s->sub)
            rc = run_sub(s, env, doc, s->local != NULL && !scans ? &filter : NULL, &matched, &budget, err);
        if (rc == 0 && s->sub != NULL && s->lu_matcher != NULL)
            rc = lookup_filter_joined(s, &matched, err); /* the $match ends the sub-pipeline */
        bson_destroy(&filter);
        if (rc == 0 && s->sub != NULL && (s->sub->text_first || mf_pipeline_geo_meta(s->sub)))
            strip_scores(&matched);
        bson_t arr = BSON_INITIALIZER;
        int64_t size = 0;
        for (size_t j = 0; j < matched.len && rc == 0; j++) {
            char buf[16];
            const char *key;
            /* Unwinding, mongod's $lookup builds no array (DocumentSourceLookUp::unwindResult): no 4568. */
            if ((size += matched.docs[j]->len) > max && s->unwind == NULL) {
                rc = lookup_too_big(s->from, max, err);
                break;
            }
            bson_uint32_to_string((uint32_t)j, &key, buf, sizeof buf);
            bson_append_document(&arr, key, -1, matched.docs[j]);
        }
        mf_docvec_destroy(&matched);
        if (rc != 0) {
            bson_destroy(&arr);
            break;
        }
        bson_value_t av;
        doc_value(&arr, true, &av);
        bson_t *o = doc_set_path(doc, s->field, &av);
        bson_destroy(&arr);
        if (outer != NULL && (outer->used += o->len) > outer->max) {
            bson_destroy(o);
            rc = lookup_too_big(outer->from, outer->max, err);
            break;
        }
        mf_docvec_push_steal(out, o);
    }
    mf_docvec_destroy(in);
    return rc;
}

static void
run_unwind(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out)
{
    for (size_t i = 0; i < in->len; i++) {
        bson_t *doc = in->docs[i];
        bson_value_t v, idx;
        bool found = get_path_nt(doc, s->field, &v);

        mf_value_set_null(&idx);
        if (found && v.value_type == BSON_TYPE_ARRAY) {
            bson_iter_t it;
            int64_t k = 0;
            bson_value_t arr;
            bool any = false;
            mf_value_copy(&arr, &v); /* v points into doc, which each output rebuilds from */
            bson_iter_init_from_data(&it, arr.value.v_doc.data, arr.value.v_doc.data_len);
            while (bson_iter_next(&it)) {
                bson_t *o = doc_set_path(doc, s->field, bson_iter_value(&it));
                any = true;
                if (s->index_field) {
                    bson_value_t iv;
                    mf_value_set_int64(&iv, k);
                    bson_t *o2 = doc_set_path(o, s->index_field, &iv);
                    bson_destroy(o);
                    o = o2;
                }
                k++;
                mf_docvec_push_steal(out, o);
            }
            mf_value_free(&arr);
            if (!any && s->preserve) {
                bson_value_t missing;
                missing.value_type = BSON_TYPE_EOD;
                bson_t *o = doc_set_path(doc, s->field, &missing);
                if (s->index_field) {
                    bson_t *o2 = doc_set_path(o, s->index_field, &idx);
                    bson_destroy(o);
                    o = o2;
                }
                mf_docvec_push_steal(out, o);
            }
            continue;
        }
        if (!found || v.value_type == BSON_TYPE_NULL || v.value_type == BSON_TYPE_UNDEFINED) {
            if (!s->preserve)
                continue;
        }
        /* A non-array value (or a preserved null/missing) passes through as one document. */
        if (s->index_field)
            mf_docvec_push_steal(out, doc_set_path(doc, s->index_field, &idx));
        else
            mf_docvec_push(out, doc);
    }
    mf_docvec_destroy(in);
}

/* A small xorshift generator for $sample, seeded per run (thread-safe, no global state). */
static uint64_t
xorshift(uint64_t *st)
{
    uint64_t x = *st;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *st = x;
}

/* xorshift_seed: a fresh non-zero state from the clock and salt (an address unique to the run). */
static uint64_t
xorshift_seed(const void *salt)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t st = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)salt;
    return st != 0 ? st : 0x9e3779b97f4a7c15ULL;
}

static void
run_sample(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out)
{
    uint64_t st = xorshift_seed(in->docs);
    size_t k = (uint64_t)s->n < in->len ? (size_t)s->n : in->len;

    /* Partial Fisher-Yates: the first k slots become a uniform random sample in random order. */
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)(xorshift(&st) % (in->len - i));
        bson_t *t = in->docs[i];
        in->docs[i] = in->docs[j];
        in->docs[j] = t;
        mf_docvec_push_steal(out, in->docs[i]);
        in->docs[i] = NULL;
    }
    for (size_t i = k; i < in->len; i++)
        bson_destroy(in->docs[i]);
    in->len = 0;
    mf_docvec_destroy(in);
}

/* run_documents: $documents' source: the expression's array of documents (the input is discarded). */
static int
run_documents(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    bson_value_t r;
    bson_iter_t it;

    mf_docvec_destroy(in);
    if (mf_expr_eval(s->expr, NULL, &r, err) < 0)
        return -1;
    if (r.value_type != BSON_TYPE_ARRAY) {
        mf_value_free(&r);
        return mf_err_set(err, MF_E_Location5858203, "error during $documents stage :: caused by :: an array is expected");
    }
    bson_iter_init_from_data(&it, r.value.v_doc.data, r.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mf_err_set(err, MF_E_Location40228,
                       "'newRoot' expression must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'.",
                       "...", mf_type_name(bson_iter_type(&it)));
            mf_value_free(&r);
            return -1;
        }
        mf_docvec_push_steal(out, value_to_doc(bson_iter_value(&it)));
    }
    mf_value_free(&r);
    return 0;
}

static int
run_current_op(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    mf_docvec_destroy(in);
    if (env == NULL || env->current_op == NULL) {
        /* mongod refuses it while parsing the pipeline: no executor context. */
        mf_err_set(err, MF_E_InvalidNamespace, "$currentOp must be run against the 'admin' database with {aggregate: 1}");
        return mf_err_planning(err);
    }
    return env->current_op(env->ctx, s->spec, out, err);
}

/* ------------------------------------------------------------------------ */
/* $redact, $bucketAuto, $unionWith, $graphLookup: execution                */
/* ------------------------------------------------------------------------ */

/*
 * $redact. The expression runs with the current (sub)document as its root
 * ($$CURRENT and field paths; $$ROOT is the same document here) and must
 * answer $$KEEP (the document as it is), $$PRUNE (dropped) or $$DESCEND
 * (kept, its embedded documents, also inside arrays, redacted in turn);
 * anything else is 17053.
 */
static int redact_value(const stage_t *s, const bson_value_t *in, bson_value_t *out, mf_error_t *err);

/* redact_doc: *out = the redacted copy of doc (owned), or EOD when pruned. */
static int
redact_doc(const stage_t *s, const bson_value_t *doc, bson_value_t *out, mf_error_t *err)
{
    bson_t *root = value_to_doc(doc);
    bson_value_t r;
    int rc = mf_expr_eval(s->expr, root, &r, err);
    bson_destroy(root);
    mf_value_set_missing(out);
    if (rc < 0)
        return -1;
    const char *res = r.value_type == BSON_TYPE_UTF8 ? r.value.v_utf8.str : "";
    if (strcmp(res, "keep") == 0) {
        mf_value_copy(out, doc);
    } else if (strcmp(res, "prune") == 0) {
        /* nothing */
    } else if (strcmp(res, "descend") == 0) {
        bson_t b = BSON_INITIALIZER;
        bson_iter_t it;
        bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
        while (rc == 0 && bson_iter_next(&it)) {
            bson_value_t fv;
            rc = redact_value(s, bson_iter_value(&it), &fv, err);
            if (rc == 0 && fv.value_type != BSON_TYPE_EOD)
                bson_append_value(&b, bson_iter_key(&it), -1, &fv);
            mf_value_free(&fv);
        }
        if (rc == 0) {
            bson_value_t bv;
            doc_value(&b, false, &bv);
            mf_value_copy(out, &bv);
        }
        bson_destroy(&b);
    } else {
        rc = mf_err_set(err, MF_E_Location17053,
                        "$redact's expression should not return anything aside from the variables $$KEEP, "
                        "$$DESCEND, and $$PRUNE, but returned %s",
                        r.value_type == BSON_TYPE_UTF8 ? r.value.v_utf8.str
                        : r.value_type == BSON_TYPE_EOD ? "MISSING" : mf_type_name(r.value_type));
    }
    mf_value_free(&r);
    return rc;
}

/* redact_value: a field's value under $$DESCEND (EOD: drop it). */
static int
redact_value(const stage_t *s, const bson_value_t *in, bson_value_t *out, mf_error_t *err)
{
    if (in->value_type == BSON_TYPE_DOCUMENT)
        return redact_doc(s, in, out, err);
    if (in->value_type != BSON_TYPE_ARRAY) {
        mf_value_copy(out, in);
        return 0;
    }
    bson_t b = BSON_INITIALIZER;
    bson_iter_t it;
    uint32_t n = 0;
    int rc = 0;
    bson_iter_init_from_data(&it, in->value.v_doc.data, in->value.v_doc.data_len);
    while (rc == 0 && bson_iter_next(&it)) {
        bson_value_t ev;
        char buf[16];
        const char *key;
        rc = redact_value(s, bson_iter_value(&it), &ev, err);
        if (rc == 0 && ev.value_type != BSON_TYPE_EOD) {
            bson_uint32_to_string(n++, &key, buf, sizeof buf);
            bson_append_value(&b, key, -1, &ev);
        }
        mf_value_free(&ev);
    }
    if (rc == 0) {
        bson_value_t bv;
        doc_value(&b, true, &bv);
        mf_value_copy(out, &bv);
    }
    bson_destroy(&b);
    return rc;
}

static int
run_redact(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    bson_value_t vals[3];
    int rc = 0;

    memset(vals, 0, sizeof vals);
    for (int i = 0; i < 3; i++) {
        static const char *const strs[] = {"descend", "prune", "keep"};
        vals[i].value_type = BSON_TYPE_UTF8;
        vals[i].value.v_utf8.str = (char *)strs[i];
        vals[i].value.v_utf8.len = (uint32_t)strlen(strs[i]);
    }
    mf_expr_vars_t frame = {redact_names, vals, 3, mf_expr_vars_current()};
    mf_expr_vars_set(&frame);
    for (size_t i = 0; i < in->len && rc == 0; i++) {
        bson_value_t dv, r;
        doc_value(in->docs[i], false, &dv);
        rc = redact_doc(s, &dv, &r, err);
        if (rc == 0 && r.value_type == BSON_TYPE_DOCUMENT)
            mf_docvec_push_steal(out, value_to_doc(&r));
        mf_value_free(&r);
    }
    mf_expr_vars_set(frame.up);
    mf_docvec_destroy(in);
    return rc;
}

/* Granularity rounding (mongod's rounders): round_up is the next series value strictly above v, round_down strictly below. */
static int
gran_check(const bson_value_t *v, mf_error_t *err)
{
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_Location40262, "A granularity rounder can only round numeric values, but found type: %s",
                          mf_type_name(v->value_type));
    double d = mf_value_as_double(v);
    if (isnan(d))
        return mf_err_set(err, MF_E_Location40263, "A granularity rounder cannot round NaN");
    if (d < 0)
        return mf_err_set(err, MF_E_Location40268, "A granularity rounder can only round non-negative numbers");
    return 0;
}

/* pow2: 2^e as $pow answers it for an integer base and exponent (int, long, or a double for e < 0). */
static void
pow2_value(int e, bool integral, bson_value_t *o)
{
    if (!integral || e < 0)
        mf_value_set_double(o, ldexp(1.0, e));
    else if (e < 31)
        mf_value_set_int32(o, (int32_t)1 << e);
    else if (e < 63)
        mf_value_set_int64(o, (int64_t)1 << e);
    else
        mf_value_set_double(o, ldexp(1.0, e));
}

static int
gran_round(int gran, const bson_value_t *v, bool up, bson_value_t *o, mf_error_t *err)
{
    const struct granularity *g = &granularities[gran - 1];
    if (gran_check(v, err) < 0)
        return -1;
    double x = mf_value_as_double(v);
    if (x == 0) {
        mf_value_copy(o, v);
        return 0;
    }
    if (g->series == NULL) {
        bool integral = v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64;
        int e;
        if (integral) {
            int64_t n = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
            int lg = 63 - __builtin_clzll((unsigned long long)n);
            bool exact = (n & (n - 1)) == 0;
            e = up ? lg + 1 : (exact ? lg - 1 : lg);
        } else {
            double lg = log2(x);
            e = up ? (int)floor(lg) + 1 : (floor(lg) == lg ? (int)lg - 1 : (int)floor(lg));
        }
        pow2_value(e, integral, o);
        return 0;
    }
    const double *s = g->series;
    size_t n = g->n;
    double m = 1.0;
    if (up) {
        while (x >= s[n - 1] * m)
            m *= 10.0;
        while (x < s[0] * m) {
            double prev_min = s[0] * m;
            m /= 10.0;
            if (x >= s[n - 1] * m) {
                mf_value_set_double(o, prev_min);
                return 0;
            }
        }
        size_t i = 0;
        while (i < n && !(x < s[i] * m))
            i++;
        mf_value_set_double(o, s[i] * m);
    } else {
        while (x <= s[0] * m)
            m /= 10.0;
        while (x > s[n - 1] * m) {
            double prev_max = s[n - 1] * m;
            m *= 10.0;
            if (x <= s[0] * m) {
                mf_value_set_double(o, prev_max);
                return 0;
            }
        }
        size_t i = 0;
        while (i < n && s[i] * m < x)
            i++;
        mf_value_set_double(o, s[i - 1] * m);
    }
    return 0;
}

/*
 * $bucketAuto, as mongod's populateBuckets: the input, sorted by groupBy
 * (missing as null) in an external sorter, is cut into buckets of about
 * round(n / buckets) documents; equal values never split (with a
 * granularity: every value below the rounded-up boundary joins); each
 * bucket's max becomes the next one's min; the last bucket takes what is
 * left; with a granularity the first min is rounded down and the last max
 * up. The sorter holds {k: <groupBy value>, d: <document>}.
 */
static int
ba_cmp(void *arg, const bson_t *a, const bson_t *b)
{
    bson_iter_t ia, ib;
    (void)arg;
    bson_iter_init(&ia, a);
    bson_iter_init(&ib, b);
    bson_iter_next(&ia);
    bson_iter_next(&ib);
    return mf_value_cmp(bson_iter_value(&ia), bson_iter_value(&ib));
}

/* ba_wrap: doc's sorter entry {k, d} (NULL with err: groupBy failed, or a granularity's key is not a non-negative number). */
static bson_t *
ba_wrap(const stage_t *s, const bson_t *doc, mf_error_t *err)
{
    bson_value_t k;
    bson_t *w;

    if (mf_expr_eval(s->expr, doc, &k, err) < 0)
        return NULL;
    if (k.value_type == BSON_TYPE_EOD)
        k.value_type = BSON_TYPE_NULL;
    if (s->gran) {
        int rc = 0;
        if (!mf_value_is_number(&k))
            rc = mf_err_set(err, MF_E_Location40258,
                            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value "
                            "with type: %s", mf_type_name(k.value_type));
        else if (isnan(mf_value_as_double(&k)))
            rc = mf_err_set(err, MF_E_Location40259,
                            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value "
                            "that is NaN");
        else if (mf_value_as_double(&k) < 0)
            rc = mf_err_set(err, MF_E_Location40260,
                            "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a "
                            "negative value");
        if (rc < 0) {
            mf_value_free(&k);
            return NULL;
        }
    }
    w = bson_new();
    bson_append_value(w, "k", 1, &k);
    bson_append_document(w, "d", 1, doc);
    mf_value_free(&k);
    return w;
}

/* An entry pulled from the sorter: key and document point into raw (owned). */
typedef struct ba_item {
    bson_t *raw;
    bson_value_t key;
    bson_t doc;
} ba_item_t;

/* ba_pull: the next sorted entry (it->raw NULL at the end). */
static int
ba_pull(mf_sorter_t *so, ba_item_t *it, mf_error_t *err)
{
    bson_iter_t i;
    const uint8_t *data;
    uint32_t len;

    memset(it, 0, sizeof *it);
    if (mf_sorter_next(so, &it->raw, err) < 0)
        return -1;
    if (it->raw == NULL)
        return 0;
    bson_iter_init(&i, it->raw);
    bson_iter_next(&i);
    it->key = *bson_iter_value(&i);
    bson_iter_next(&i);
    bson_iter_document(&i, &len, &data);
    if (!bson_init_static(&it->doc, data, len))
        return mf_err_set(err, MF_E_InternalError, "corrupt $bucketAuto sorter entry");
    return 0;
}

typedef struct ba_bucket {
    bson_value_t min, max; /* owned */
    group_t g;
} ba_bucket_t;

/* ba_add: folds it into bucket b (whose max becomes its key) and releases it. */
static int
ba_add(const stage_t *s, ba_bucket_t *b, ba_item_t *it, int64_t *mem, mf_error_t *err)
{
    int rc;
    mf_value_free(&b->max);
    mf_value_copy(&b->max, &it->key);
    rc = group_fold(mem, NULL, s, &b->g, &it->doc, err);
    bson_destroy(it->raw);
    it->raw = NULL;
    if (rc == 0 && *mem > MF_MAX_ACCUMULATOR_BYTES)
        rc = mf_err_set(err, MF_E_ExceededMemoryLimit,
                        "$bucketAuto used too much memory and cannot spill to disk. Memory limit: %d bytes",
                        MF_MAX_ACCUMULATOR_BYTES);
    return rc;
}

/* bucket_auto_emit: the buckets of the n documents in the finished sorter so, appended to out. */
static int
bucket_auto_emit(const stage_t *s, mf_sorter_t *so, int64_t n, mf_docvec_t *out, mf_error_t *err)
{
    ba_bucket_t *b = NULL;
    size_t nb = 0;
    ba_item_t next;
    int64_t mem = 0, approx = (int64_t)llround((double)n / (double)s->n);
    int rc = 0;

    memset(&next, 0, sizeof next);
    if (approx < 1)
        approx = 1;
    for (int64_t bi = 0; rc == 0 && bi < s->n; bi++) {
        bool last = bi == s->n - 1;
        ba_item_t cur;
        if (next.raw != NULL) {
            cur = next;
            next.raw = NULL;
        } else if ((rc = ba_pull(so, &cur, err)) < 0 || cur.raw == NULL) {
            break;
        }
        b = bson_realloc(b, (nb + 1) * sizeof *b);
        ba_bucket_t *bk = &b[nb++];
        memset(bk, 0, sizeof *bk);
        mf_value_copy(&bk->min, &cur.key);
        bk->g.key.value_type = BSON_TYPE_NULL;
        bk->g.acc = bson_malloc0((s->naccs ? s->naccs : 1) * sizeof *bk->g.acc);
        for (size_t a = 0; a < s->naccs; a++)
            acc_init(&bk->g.acc[a], s->accs[a].kind);
        rc = ba_add(s, bk, &cur, &mem, err);
        if (last) {
            while (rc == 0 && (rc = ba_pull(so, &next, err)) == 0 && next.raw != NULL)
                rc = ba_add(s, bk, &next, &mem, err);
        } else {
            for (int64_t j = 0; rc == 0 && j < approx - 1; j++) {
                if ((rc = ba_pull(so, &next, err)) < 0 || next.raw == NULL)
                    break;
                rc = ba_add(s, bk, &next, &mem, err);
            }
            if (rc == 0)
                rc = ba_pull(so, &next, err);
            if (rc == 0 && s->gran) {
                bson_value_t bound;
                if ((rc = gran_round(s->gran, &bk->max, true, &bound, err)) == 0) {
                    while (rc == 0 && next.raw != NULL && mf_value_cmp(&bound, &next.key) > 0) {
                        rc = ba_add(s, bk, &next, &mem, err);
                        if (rc == 0)
                            rc = ba_pull(so, &next, err);
                    }
                    if (next.raw != NULL) {
                        mf_value_free(&bk->max);
                        mf_value_copy(&bk->max, &bound);
                    }
                    mf_value_free(&bound);
                }
            } else {
                while (rc == 0 && next.raw != NULL && mf_value_cmp(&bk->max, &next.key) == 0) {
                    rc = ba_add(s, bk, &next, &mem, err);
                    if (rc == 0)
                        rc = ba_pull(so, &next, err);
                }
            }
        }
        if (rc == 0 && nb > 1) {
            ba_bucket_t *prev = &b[nb - 2];
            if (s->gran) {
                if (mf_value_as_double(&prev->max) == 0.0) {
                    mf_value_free(&prev->max);
                    rc = gran_round(s->gran, &bk->min, false, &prev->max, err);
                }
                mf_value_free(&bk->min);
                mf_value_copy(&bk->min, &prev->max);
            } else {
                mf_value_free(&prev->max);
                mf_value_copy(&prev->max, &bk->min);
            }
        }
        if (rc == 0 && (bi & 255) == 255)
            rc = mf_exec_check_deadline(err);
    }
    if (next.raw != NULL)
        bson_destroy(next.raw);
    if (rc == 0 && nb > 0 && s->gran) {
        bson_value_t r;
        if ((rc = gran_round(s->gran, &b[0].min, false, &r, err)) == 0) {
            mf_value_free(&b[0].min);
            b[0].min = r;
        }
        if (rc == 0 && (rc = gran_round(s->gran, &b[nb - 1].max, true, &r, err)) == 0) {
            mf_value_free(&b[nb - 1].max);
            b[nb - 1].max = r;
        }
    }
    for (size_t i = 0; i < nb; i++) {
        if (rc == 0) {
            bson_t id = BSON_INITIALIZER;
            bson_value_t idv;
            bson_append_value(&id, "min", 3, &b[i].min);
            bson_append_value(&id, "max", 3, &b[i].max);
            doc_value(&id, false, &idv);
            b[i].g.key = idv; /* borrowed for gt_result */
            mf_docvec_push_steal(out, gt_result(s, &b[i].g));
            bson_destroy(&id);
        }
        for (size_t a = 0; a < s->naccs; a++)
            acc_free(&b[i].g.acc[a], s->accs[a].kind);
        bson_free(b[i].g.acc);
        mf_value_free(&b[i].min);
        mf_value_free(&b[i].max);
    }
    bson_free(b);
    return rc;
}

/* run_bucket_auto: the materialising $bucketAuto (no memory budget: the input is in memory already). */
static int
run_bucket_auto(const stage_t *s, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    mf_sorter_t *so = mf_sorter_new(ba_cmp, NULL, INT64_MAX, false, NULL, NULL);
    int rc = 0;

    for (size_t i = 0; i < in->len && rc == 0; i++) {
        bson_t *w = ba_wrap(s, in->docs[i], err);
        rc = w ? mf_sorter_add(so, w, err) : -1;
    }
    if (rc == 0)
        rc = mf_sorter_finish(so, err);
    if (rc == 0)
        rc = bucket_auto_emit(s, so, (int64_t)in->len, out, err);
    mf_sorter_free(so);
    mf_docvec_destroy(in);
    return rc;
}

/* union_other: the documents $unionWith adds: its collection (or $documents) through its sub-pipeline. */
static int
union_other(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *out, mf_error_t *err)
{
    mf_docvec_t other;
    mf_docvec_init(&other);
    if (s->sub == NULL || !s->sub->collectionless) {
        if (env == NULL || env->scan == NULL)
            return mf_err_set(err, MF_E_InternalError, "$unionWith needs a collection scanner");
        if (env->scan(env->ctx, s->from, s->sub ? mf_pipeline_first_match(s->sub) : NULL, collect_visit, &other,
                      err) < 0) {
            mf_docvec_destroy(&other);
            return -1;
        }
    }
    if (s->sub != NULL) {
        /* A $geoNear heading the sub-pipeline reads the other collection's indexes, as in a $lookup's. */
        const char *outer = tls_geo_source;
        tls_geo_source = s->from;
        int rc = run_stages(s->sub, env, &other, err);
        tls_geo_source = outer;
        if (rc < 0)
            return -1;
        if (s->sub->text_first || mf_pipeline_geo_meta(s->sub))
            strip_scores(&other); /* scanned with its leading $text above, or its $geoNear's metadata */
    }
    take_vec(out, &other);
    return 0;
}

/* gl_values: appends every value of path in doc (arrays expanded one level) to the set (an accst_t's seen). */
static void
gl_values(accst_t *set, const bson_t *doc, const char *path, int64_t *bytes)
{
    lvals_t l = {.n = 0, .saw_missing = false, .saw_regex = false};
    bson_iter_t it;
    bson_init(&l.arr);
    mf_path_walk(doc, path, lookup_visit, &l);
    bson_iter_init(&it, &l.arr);
    while (bson_iter_next(&it))
        if (!seen_add(set, bson_iter_value(&it)))
            *bytes += vsize(bson_iter_value(&it));
    bson_destroy(&l.arr);
}

#define GRAPHLOOKUP_MAX_BYTES (100 * 1024 * 1024) /* internalDocumentSourceGraphLookupMaxMemoryBytes */

/*
 * graph_search: the breadth-first search of $graphLookup for one input
 * document: each round scans 'from' for {$and: [restrictSearchWithMatch,
 * {connectToField: {$in: frontier}}]}, keeps documents not seen yet (by _id,
 * 40271 without one) with their depth, and takes their connectFromField
 * values as the next frontier, until nothing new is found or maxDepth.
 * visited + frontier past 100 MB is 40099. *found receives the documents.
 */
static int
graph_search(const stage_t *s, const mf_agg_env_t *env, const bson_t *doc, mf_docvec_t *found, mf_error_t *err)
{
    accst_t visited, frontier;
    bson_value_t start;
    int64_t bytes = 0, fbytes = 0;
    int rc = 0;

    memset(&visited, 0, sizeof visited);
    memset(&frontier, 0, sizeof frontier);
    if (mf_expr_eval(s->expr, doc, &start, err) < 0)
        return -1;
    if (start.value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        bson_iter_init_from_data(&it, start.value.v_doc.data, start.value.v_doc.data_len);
        while (bson_iter_next(&it))
            if (!seen_add(&frontier, bson_iter_value(&it)))
                fbytes += vsize(bson_iter_value(&it));
    } else if (start.value_type != BSON_TYPE_EOD) {
        /* A missing startWith finds nothing (mongod leaves it out of the $in); an explicit null finds nulls. */
        seen_add(&frontier, &start);
    }
    mf_value_free(&start);
    for (int64_t depth = 0; rc == 0 && frontier.nseen > 0 && (s->n < 0 || depth <= s->n); depth++) {
        bson_t filter = BSON_INITIALIZER, and, c, in, ex;
        bool null_seen = false;
        mf_docvec_t got;
        accst_t next;
        bson_append_array_begin(&filter, "$and", 4, &and);
        if (s->spec)
            bson_append_document(&and, "0", 1, s->spec);
        bson_append_document_begin(&and, s->spec ? "1" : "0", 1, &c);
        bson_append_document_begin(&c, s->foreign, -1, &in);
        bson_t arr;
        bson_append_array_begin(&in, "$in", 3, &arr);
        for (size_t i = 0; i < frontier.nseen; i++) {
            char buf[16];
            const char *key;
            bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
            bson_append_value(&arr, key, -1, &frontier.seen[i]);
            if (frontier.seen[i].value_type == BSON_TYPE_NULL || frontier.seen[i].value_type == BSON_TYPE_UNDEFINED)
                null_seen = true;
        }
        bson_append_array_end(&in, &arr);
        bson_append_document_end(&c, &in);
        bson_append_document_end(&and, &c);
        if (null_seen) {
            /* null in the frontier must not match documents without connectToField. */
            bson_append_document_begin(&and, s->spec ? "2" : "1", 1, &c);
            bson_append_document_begin(&c, s->foreign, -1, &ex);
            bson_append_bool(&ex, "$exists", 7, true);
            bson_append_document_end(&c, &ex);
            bson_append_document_end(&and, &c);
        }
        bson_append_array_end(&filter, &and);
        mf_docvec_init(&got);
        rc = env->scan(env->ctx, s->from, &filter, collect_visit, &got, err);
        bson_destroy(&filter);
        memset(&next, 0, sizeof next);
        int64_t nbytes = 0;
        for (size_t i = 0; i < got.len && rc == 0; i++) {
            bson_iter_t it;
            if (!bson_iter_init_find(&it, got.docs[i], "_id")) {
                rc = mf_err_set(err, MF_E_Location40271,
                                "Documents in the '%s' namespace must contain an _id for de-duplication in "
                                "$graphLookup", s->from);
                break;
            }
            if (seen_add(&visited, bson_iter_value(&it)))
                continue; /* already found, at a smaller or equal depth */
            bson_t *d = got.docs[i];
            if (s->index_field) {
                bson_value_t dv;
                mf_value_set_int64(&dv, depth);
                d = doc_set_path(got.docs[i], s->index_field, &dv);
            } else {
                got.docs[i] = NULL;
            }
            bytes += 16 + (int64_t)d->len;
            gl_values(&next, d, s->local, &nbytes);
            mf_docvec_push_steal(found, d);
            if (bytes + nbytes + fbytes >= GRAPHLOOKUP_MAX_BYTES)
                rc = mf_err_set(err, MF_E_Location40099, "$graphLookup reached maximum memory consumption");
        }
        for (size_t i = 0; i < got.len; i++)
            if (got.docs[i])
                bson_destroy(got.docs[i]);
        got.len = 0;
        mf_docvec_destroy(&got);
        acc_free(&frontier, AC_ADDTOSET);
        frontier = next;
        fbytes = nbytes;
        if (rc == 0 && (rc = mf_exec_check_deadline(err)) != 0)
            break;
    }
    acc_free(&frontier, AC_ADDTOSET);
    acc_free(&visited, AC_ADDTOSET);
    return rc;
}

static int
run_graph_lookup(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    int rc = 0;
    if (env == NULL || env->scan == NULL) {
        mf_docvec_destroy(in);
        return mf_err_set(err, MF_E_InternalError, "$graphLookup needs a collection scanner");
    }
    for (size_t i = 0; i < in->len && rc == 0; i++) {
        mf_docvec_t found;
        mf_docvec_init(&found);
        rc = graph_search(s, env, in->docs[i], &found, err);
        if (rc == 0) {
            bson_t arr = BSON_INITIALIZER;
            bson_value_t av;
            for (size_t j = 0; j < found.len; j++) {
                char buf[16];
                const char *key;
                bson_uint32_to_string((uint32_t)j, &key, buf, sizeof buf);
                bson_append_document(&arr, key, -1, found.docs[j]);
            }
            doc_value(&arr, true, &av);
            mf_docvec_push_steal(out, doc_set_path(in->docs[i], s->field, &av));
            bson_destroy(&arr);
        }
        mf_docvec_destroy(&found);
    }
    mf_docvec_destroy(in);
    return rc;
}

/* A selected $geoNear document: a copy of d with the distance and location fields set (loc points into d). */
static bson_t *
geonear_output(const stage_t *s, const bson_t *d, double dist, const bson_value_t *loc)
{
    const char *df = mf_geonear_distance_field(s->geonear), *lf = mf_geonear_locs_field(s->geonear);
    bson_t *cur = bson_copy(d), *t;
    if (df != NULL) {
        bson_value_t dv;
        mf_value_set_double(&dv, dist);
        t = doc_set_path(cur, df, &dv);
        bson_destroy(cur);
        cur = t;
    }
    if (lf != NULL) {
        t = doc_set_path(cur, lf, loc);
        bson_destroy(cur);
        cur = t;
    }
    if (s->geo_meta) {
        /* The metadata a later {$meta: "geoNearDistance" | "geoNearPoint"} reads, as hidden last fields. */
        BSON_APPEND_DOUBLE(cur, MF_GEO_DIST_FIELD, dist);
        bson_append_value(cur, MF_GEO_POINT_FIELD, -1, loc);
    }
    return cur;
}

/*
 * run_join_unwind: a $lookup or $graphLookup (run, its materialising run) over
 * in into out; with an absorbed $unwind of its `as` (s->unwind), each
 * joined document is then unwound as that $unwind would.
 */
static int
run_join_unwind(int (*run)(const stage_t *, const mf_agg_env_t *, mf_docvec_t *, mf_docvec_t *, mf_error_t *),
                const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    if (s->unwind == NULL)
        return run(s, env, in, out, err);
    mf_docvec_t joined;
    mf_docvec_init(&joined);
    if (run(s, env, in, &joined, err) < 0) {
        mf_docvec_destroy(&joined);
        return -1;
    }
    run_unwind(s->unwind, &joined, out);
    return 0;
}

/* $geoNear: the selected documents, nearest first, with the distance and location fields set. */
static int
run_geonear(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    bson_t specs;
    char ns[256] = "";
    mf_geonear_hit_t *hits = NULL;
    size_t nhits = 0;
    int rc = -1;

    bson_init(&specs);
    if (env != NULL && env->source_indexes != NULL &&
        env->source_indexes(env->ctx, tls_geo_source, &specs, ns, sizeof ns, err) != 0) {
        mf_err_planning(err); /* a missing collection: mongod refuses it while it builds the pipeline's executor */
        goto out;
    }
    if (mf_geonear_select(s->geonear, &specs, ns, in, &hits, &nhits, err) != 0)
        goto out;
    for (size_t i = 0; i < nhits; i++)
        mf_docvec_push_steal(out, geonear_output(s, in->docs[hits[i].idx], hits[i].dist, &hits[i].loc));
    rc = 0;
out:
    free(hits);
    bson_destroy(&specs);
    mf_docvec_destroy(in);
    return rc;
}

static int
run_stage(const stage_t *s, const mf_agg_env_t *env, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err)
{
    switch (s->kind) {
    case S_SAMPLE:
        run_sample(s, in, out);
        return 0;
    case S_DOCUMENTS:
        return run_documents(s, in, out, err);
    case S_CURRENTOP:
        return run_current_op(s, env, in, out, err);
    case S_LISTSESSIONS:
        mf_docvec_destroy(in);
        if (env == NULL || env->list_sessions == NULL)
            return mf_err_set(err, MF_E_Location31111,
                              "The %s stage is not allowed in this context :: missing a LogicalSessionCache", s->field);
        return env->list_sessions(env->ctx, s->field, s->spec, out, err);
    case S_WINDOW:
        return mf_window_run(s->window, in, out, err);
    case S_DENSIFY:
        return mf_densify_run(s->densify, env ? env->densify_max_docs : 0, env ? env->densify_max_bytes : 0, in, out,
                              err);
    case S_GEONEAR:
        return run_geonear(s, env, in, out, err);
    case S_MATCH:
    case S_LIMIT:
    case S_SKIP:
        /* The filtering stages: each document moves to out or is destroyed. */
        {
            bool failed = false;
            for (size_t i = 0; i < in->len; i++) {
                bool keep = failed                ? false
                            : s->kind == S_MATCH ? mf_matcher_match(s->matcher, in->docs[i], NULL)
                            : s->kind == S_LIMIT ? (int64_t)i < s->n
                                                 : (int64_t)i >= s->n;
                if (!keep && s->kind == S_MATCH && !failed && mf_matcher_take_failure(err))
                    failed = true; /* an $expr that cannot be evaluated fails the pipeline */
                if (keep)
                    mf_docvec_push_steal(out, in->docs[i]);
                else
                    bson_destroy(in->docs[i]);
            }
            in->len = 0;
            mf_docvec_destroy(in);
            return failed ? -1 : 0;
        }
    case S_PROJECT:
    case S_UNSET:
    case S_ADDFIELDS:
        for (size_t i = 0; i < in->len; i++) {
            bson_t *o = bson_new();
            if (mf_projection_apply(s->projection, in->docs[i], NULL, o, err) < 0) {
                bson_destroy(o);
                mf_docvec_destroy(in);
                return -1;
            }
            mf_docvec_push_steal(out, o);
        }
        mf_docvec_destroy(in);
        return 0;
    case S_SORT:
        mf_curop_note_sort(mf_curop_current());
        mf_sort_docs(s->sort, in->docs, in->len);
        take_vec(out, in);
        return 0;
    case S_GROUP:
        return run_group(s, in, out, err);
    case S_COUNT:
        if (in->len > 0) {
            bson_t *d = bson_new();
            if (in->len <= INT32_MAX)
                bson_append_int32(d, s->field, -1, (int32_t)in->len);
            else
                bson_append_int64(d, s->field, -1, (int64_t)in->len);
            mf_docvec_push_steal(out, d);
        }
        mf_docvec_destroy(in);
        return 0;
    case S_UNWIND:
        run_unwind(s, in, out);
        return 0;
    case S_REPLACEROOT:
        for (size_t i = 0; i < in->len; i++) {
            bson_value_t r;
            if (mf_expr_eval(s->expr, in->docs[i], &r, err) < 0) {
                mf_docvec_destroy(in);
                return -1;
            }
            if (r.value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_Location40228,
                           "%s must evaluate to an object, but resulting value was: %s. Type of resulting value: '%s'.",
                           s->preserve ? "'replacement document'" : "'newRoot' expression",
                           r.value_type == BSON_TYPE_EOD ? "MISSING" : "...", mf_type_name(r.value_type));
                mf_value_free(&r);
                mf_docvec_destroy(in);
                return -1;
            }
            bson_t *nr = value_to_doc(&r);
            bson_iter_t si;
            /* The input's metadata passes to the new root, as mongod's copyMetaDataFrom: its text score. */
            if (bson_iter_init_find(&si, in->docs[i], MF_TEXT_SCORE_FIELD) && BSON_ITER_HOLDS_DOUBLE(&si) &&
                !bson_has_field(nr, MF_TEXT_SCORE_FIELD))
                BSON_APPEND_DOUBLE(nr, MF_TEXT_SCORE_FIELD, bson_iter_double(&si));
            /* And $geoNear's distance and point (query/agg_geo.h). */
            static const char *const geo_meta[] = {MF_GEO_DIST_FIELD, MF_GEO_POINT_FIELD};
            for (int g = 0; g < 2; g++)
                if (bson_iter_init_find(&si, in->docs[i], geo_meta[g]) && !bson_has_field(nr, geo_meta[g]))
                    bson_append_value(nr, geo_meta[g], -1, bson_iter_value(&si));
            mf_docvec_push_steal(out, nr);
            mf_value_free(&r);
        }
        mf_docvec_destroy(in);
        return 0;
    case S_SORTBYCOUNT: {
        stage_t g;
        acc_def_t acc = {"count", AC_SUM, NULL};
        bson_value_t one;
        mf_docvec_t grouped;
        memset(&g, 0, sizeof g);
        g.kind = S_GROUP;
        g.expr = s->expr;
        mf_value_set_int32(&one, 1);
        acc.expr = mf_expr_parse(&one, err);
        g.accs = &acc;
        g.naccs = 1;
        mf_docvec_init(&grouped);
        int rc = run_group(&g, in, &grouped, err);
        mf_expr_free(acc.expr);
        if (rc < 0) {
            mf_docvec_destroy(&grouped);
            return -1;
        }
        mf_curop_note_sort(mf_curop_current()); /* $sortByCount and $bucket are a $group and a $sort */
        mf_sort_docs(s->sort, grouped.docs, grouped.len);
        take_vec(out, &grouped);
        return 0;
    }
    case S_BUCKET: {
        mf_docvec_t grouped;
        mf_docvec_init(&grouped);
        if (run_group(s, in, &grouped, err) < 0) {
            mf_docvec_destroy(&grouped);
            return -1;
        }
        mf_curop_note_sort(mf_curop_current()); /* $sortByCount and $bucket are a $group and a $sort */
        mf_sort_docs(s->sort, grouped.docs, grouped.len);
        take_vec(out, &grouped);
        return 0;
    }
    case S_OUT:
    case S_MERGE: {
        int rc;
        if (env == NULL || env->write_out == NULL)
            rc = mf_err_set(err, MF_E_IllegalOperation, "%s is not supported in this context",
                            s->kind == S_OUT ? "$out" : "$merge");
        else
            rc = env->write_out(env->ctx, s->local, s->from, in, s->kind == S_MERGE ? s->spec : NULL, err);
        mf_docvec_destroy(in);
        return rc < 0 ? -1 : 0;
    }
    case S_LOOKUP:
        return run_join_unwind(run_lookup, s, env, in, out, err);
    case S_UNPACK:
        return run_unpack(s, in, out, err);
    case S_REDACT:
        return run_redact(s, in, out, err);
    case S_BUCKETAUTO:
        return run_bucket_auto(s, in, out, err);
    case S_GRAPHLOOKUP:
        return run_join_unwind(run_graph_lookup, s, env, in, out, err);
    case S_UNIONWITH:
        take_vec(out, in);
        return union_other(s, env, out, err);
    case S_FACET: {
        bson_t *d = bson_new();
        for (size_t f = 0; f < s->nfacets; f++) {
            mf_docvec_t copy;
            mf_docvec_init(&copy);
            for (size_t i = 0; i < in->len; i++)
                mf_docvec_push(&copy, in->docs[i]);
            if (run_stages(s->facets[f], env, &copy, err) < 0) {
                mf_docvec_destroy(&copy);
                bson_destroy(d);
                mf_docvec_destroy(in);
                return -1;
            }
            bson_t arr;
            bson_append_array_begin(d, s->facet_names[f], -1, &arr);
            for (size_t i = 0; i < copy.len; i++) {
                char buf[16];
                const char *key;
                bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
                bson_append_document(&arr, key, -1, copy.docs[i]);
            }
            bson_append_array_end(d, &arr);
            mf_docvec_destroy(&copy);
        }
        mf_docvec_push_steal(out, d);
        mf_docvec_destroy(in);
        return 0;
    }
    default:
        mf_docvec_destroy(in);
        return mf_err_set(err, MF_E_InternalError, "unknown stage kind");
    }
}

/* run_stages: runs every stage of p over *docs in place (docs holds the result). */
static int
run_stages(const mf_pipeline_t *p, const mf_agg_env_t *env, mf_docvec_t *docs, mf_error_t *err)
{
    for (size_t i = 0; i < p->n; i++) {
        mf_docvec_t out;
        mf_docvec_init(&out);
        if (run_stage(&p->stages[i], env, docs, &out, err) < 0) {
            mf_docvec_destroy(&out);
            mf_docvec_init(docs);
            return -1;
        }
        *docs = out;
    }
    return 0;
}

int
mf_pipeline_run(const mf_pipeline_t *p, const mf_agg_env_t *env, const char *coll, mf_docvec_t *out, mf_error_t *err)
{
    mf_docvec_t docs;

    mf_docvec_init(&docs);
    if (!p->collectionless) {
        if (env == NULL || env->scan == NULL || coll == NULL)
            return mf_err_set(err, MF_E_InternalError, "aggregation needs a collection scanner");
        if (env->scan(env->ctx, coll, mf_pipeline_first_match(p), collect_visit, &docs, err) < 0) {
            mf_docvec_destroy(&docs);
            return -1;
        }
    }
    if (run_stages(p, env, &docs, err) < 0)
        return -1;
    if (p->text_first || mf_pipeline_geo_meta(p))
        strip_scores(&docs);
    take_vec(out, &docs);
    return 0;
}

int
mf_pipeline_check_update_stages(const bson_value_t *pipeline, mf_error_t *err)
{
    static const char *const allowed[] = {"$addFields", "$set", "$project", "$unset", "$replaceRoot", "$replaceWith",
                                          NULL};
    bson_t arr;
    bson_iter_t it, st;
    if (pipeline->value_type != BSON_TYPE_ARRAY ||
        !bson_init_static(&arr, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len) || !bson_iter_init(&it, &arr))
        return 0;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
            continue;
        const char *name = bson_iter_key(&st);
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok = ok || strcmp(*a, name) == 0;
        if (!ok && name[0] == '$')
            return mf_err_set(err, MF_E_InvalidOptions, "%s is not allowed to be used within an update", name);
    }
    return 0;
}

struct mf_merge_update {
    let_vars_t let; /* "new" among them, evaluated against the incoming document */
    mf_pipeline_t *pl;
};

void
mf_merge_update_free(mf_merge_update_t *u)
{
    if (u == NULL)
        return;
    let_vars_free(&u->let);
    mf_pipeline_free(u->pl);
    bson_free(u);
}

mf_merge_update_t *
mf_merge_update_new(const bson_value_t *pipeline, const bson_value_t *let, mf_error_t *err)
{
    mf_merge_update_t *u = bson_malloc0(sizeof *u);
    bool has_new = false;
    bson_iter_t it;
    if (let != NULL) {
        bson_iter_init_from_data(&it, let->value.v_doc.data, let->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            const char *name = bson_iter_key(&it);
            if (let_vars_add(&u->let, name, bson_iter_value(&it), err) != 0)
                goto fail;
            has_new = has_new || strcmp(name, "new") == 0;
        }
    }
    if (!has_new) {
        bson_value_t root = {.value_type = BSON_TYPE_UTF8};
        root.value.v_utf8.str = (char *)"$$ROOT";
        root.value.v_utf8.len = 6;
        if (let_vars_add(&u->let, "new", &root, err) != 0)
            goto fail;
    }
    if (mf_pipeline_check_update_stages(pipeline, err) != 0)
        goto fail;
    /* Parsed with the variables' names ambient, so "$$new" and the let names are accepted everywhere in it. */
    mf_expr_vars_t frame = {(const char *const *)u->let.names, NULL, u->let.n, mf_expr_vars_current()};
    mf_expr_vars_set(&frame);
    u->pl = mf_pipeline_new(pipeline, err);
    mf_expr_vars_set(frame.up);
    if (u->pl == NULL)
        goto fail;
    return u;
fail:
    mf_merge_update_free(u);
    return NULL;
}

int
mf_merge_update_apply(const mf_merge_update_t *u, const bson_t *src, const bson_t *old, bson_t **out, mf_error_t *err)
{
    bson_value_t *vals;
    *out = NULL;
    int rc = let_vars_eval(&u->let, src, &vals, err);
    if (rc == 0) {
        mf_expr_vars_t frame = {(const char *const *)u->let.names, vals, u->let.n, mf_expr_vars_current()};
        mf_expr_vars_set(&frame);
        rc = mf_pipeline_apply_one(u->pl, old, out, err);
        mf_expr_vars_set(frame.up);
    }
    let_vals_free(vals, u->let.n);
    return rc == 0 ? 0 : -1;
}

/* The source of mf_pipeline_apply_one: the one document in ctx. */
static int
one_doc_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    (void)coll;
    (void)filter;
    (void)err;
    return visit(arg, (const bson_t *)ctx) < 0 ? -1 : 0;
}

int
mf_pipeline_apply_one(const mf_pipeline_t *p, const bson_t *doc, bson_t **out, mf_error_t *err)
{
    mf_agg_env_t env;
    mf_docvec_t res;
    memset(&env, 0, sizeof(env));
    env.scan = one_doc_scan;
    env.ctx = (void *)doc;
    mf_docvec_init(&res);
    *out = NULL;
    if (mf_pipeline_run(p, &env, "", &res, err) != 0) {
        mf_docvec_destroy(&res);
        return -1;
    }
    if (res.len != 1) {
        mf_docvec_destroy(&res);
        return mf_err_set(err, MF_E_FailedToParse, "pipeline-style update must produce exactly one document");
    }
    *out = bson_copy(res.docs[0]);
    mf_docvec_destroy(&res);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Push-down and streaming execution                                        */
/* ------------------------------------------------------------------------ */

/* Whether stage s reads no field of its input documents, only how many there are (mf_agg_pushdown_t.count_only). */
static bool
counts_only(const stage_t *s)
{
    if (s->kind == S_COUNT)
        return true;
    if (s->kind != S_GROUP || s->expr == NULL || !mf_expr_is_constant(s->expr))
        return false;
    for (size_t a = 0; a < s->naccs; a++) {
        const acc_def_t *d = &s->accs[a];
        if (!(d->kind == AC_COUNT || (d->kind == AC_SUM && d->expr != NULL && mf_expr_is_constant(d->expr))))
            return false;
    }
    return true;
}

void
mf_pipeline_pushdown(const mf_pipeline_t *p, bool sort_ok, mf_agg_pushdown_t *pd)
{
    size_t i = 0;

    memset(pd, 0, sizeof *pd);
    if (p->collectionless)
        return;
    if (i < p->n && p->stages[i].kind == S_GEONEAR) {
        /* The stage runs in full; its query only narrows the scan. */
        pd->filter = mf_geonear_query(p->stages[i].geonear);
        return;
    }
    if (i < p->n && p->stages[i].kind == S_MATCH)
        pd->filter = p->stages[i++].spec;
    /* (Not the $sort a $densify desugars to: explain maps absorbed stages to the written ones.) */
    if (sort_ok && i < p->n && p->stages[i].kind == S_SORT && !(i + 1 < p->n && p->stages[i + 1].kind == S_DENSIFY))
        pd->sort = p->stages[i++].spec;
    for (; i < p->n; i++) {
        const stage_t *s = &p->stages[i];
        if (s->kind == S_LIMIT) {
            pd->limit = pd->limit > 0 && pd->limit < s->n ? pd->limit : s->n;
        } else if (s->kind == S_SKIP) {
            if (pd->limit > 0 && pd->limit <= s->n)
                break; /* an empty result: leave it to the stages */
            if (pd->limit > 0)
                pd->limit -= s->n;
            pd->skip += s->n;
        } else {
            break;
        }
    }
    if (i < p->n && p->stages[i].kind == S_PROJECT) {
        pd->project_spec = p->stages[i].spec;
        pd->project = p->stages[i++].projection;
    }
    pd->nstages = i;
    pd->count_only = pd->sort == NULL && pd->project_spec == NULL && i < p->n && counts_only(&p->stages[i]);
    /* tryDistinctGroupRewrite: [$match] [$sort] $group, the $sort with no $limit after it. */
    size_t g = pd->filter != NULL ? 1 : 0;
    const bson_t *gsort = NULL;
    if (sort_ok && g + 1 < p->n && p->stages[g].kind == S_SORT)
        gsort = p->stages[g++].spec;
    if (sort_ok && g < p->n && p->stages[g].kind == S_GROUP && p->stages[g].gd_key != NULL) {
        pd->group_key = p->stages[g].gd_key;
        pd->group_last = p->stages[g].gd_last;
        pd->group_proj = p->stages[g].gd_proj;
        pd->group_sort = gsort;
        pd->group_stage = g;
    }
}

int
mf_pipeline_group_distinct_apply(const mf_pipeline_t *p, size_t stage, const bson_t *doc, bson_t *out,
                                 mf_error_t *err)
{
    const stage_t *s = &p->stages[stage];
    bson_value_t v;
    bson_init(out);
    for (size_t a = 0; a <= s->naccs; a++) {
        const mf_expr_t *e = a == 0 ? s->expr : s->accs[a - 1].expr;
        if (mf_expr_eval(e, doc, &v, err) < 0)
            return -1;
        if (v.value_type == BSON_TYPE_EOD)
            v.value_type = BSON_TYPE_NULL;
        bson_append_value(out, a == 0 ? "_id" : s->accs[a - 1].field, -1, &v);
        mf_value_free(&v);
    }
    return 0;
}

void
mf_pipeline_group_distinct_explain(const mf_pipeline_t *p, size_t stage, bson_t *out)
{
    const stage_t *s = &p->stages[stage];
    bson_iter_t it, gi, ai;
    bson_t d, nr;
    BSON_APPEND_DOCUMENT_BEGIN(out, "$groupByDistinctScan", &d);
    BSON_APPEND_DOCUMENT_BEGIN(&d, "newRoot", &nr);
    /* The $group as written: _id, then each accumulator's expression (the raw spec keeps their order). */
    for (int pass = 0; pass < 2; pass++) {
        if (!bson_iter_init(&it, s->raw) || !bson_iter_next(&it) || !bson_iter_recurse(&it, &gi))
            break;
        while (bson_iter_next(&gi)) {
            const char *k = bson_iter_key(&gi);
            bool id = strcmp(k, "_id") == 0;
            if (pass == 0 && id && BSON_ITER_HOLDS_UTF8(&gi)) {
                /* the key as the path it names (ExpressionFieldPath::deprecatedCreate(groupId)) */
                char *path = bson_strdup_printf("$%s", s->gd_key);
                BSON_APPEND_UTF8(&nr, "_id", path);
                bson_free(path);
            } else if (pass == 0 && id)
                bson_append_value(&nr, k, -1, bson_iter_value(&gi));
            else if (pass == 1 && !id && BSON_ITER_HOLDS_DOCUMENT(&gi) && bson_iter_recurse(&gi, &ai) &&
                     bson_iter_next(&ai))
                bson_append_value(&nr, k, -1, bson_iter_value(&ai));
        }
    }
    bson_append_document_end(&d, &nr);
    bson_append_document_end(out, &d);
}

/*
 * Streaming. Each stage of the pipeline past the pushed-down prefix is a
 * node with next(): it pulls documents from the node before it (node -1 is
 * the source, env->pull, which reads the planner's plan a few documents at
 * a time). Per-document stages ($match, $project, $addFields, $unset,
 * $unwind, $replaceRoot, $redact, $graphLookup, and $lookup with one scan
 * of the foreign collection per document) run run_stage over a one-document
 * vector; $unionWith passes its input through, then streams the other
 * collection's documents through env->sub_open (a stream of its own, kept
 * between getMores); $bucketAuto feeds an external sorter (the sort
 * budget), then cuts its buckets; $limit/$skip/$count count; $sample keeps a reservoir of its size; $sort
 * feeds an external sorter; $group, $bucket and $sortByCount fold into a
 * group table that spills partial groups to a sorter ordered by _id past
 * internalDocumentSourceGroupMaxMemoryBytes. Only $facet materialises its
 * input (every facet reads all of it). A node's buf holds documents
 * produced but not yet pulled (owned from pos to len).
 */
typedef struct snode {
    const stage_t *s;
    mf_docvec_t buf;
    size_t pos;
    bool done;
    int64_t count;         /* $limit / $skip */
    mf_sorter_t *sorter;   /* $sort; $bucket / $sortByCount output order */
    mf_sorter_t *gspill;   /* $group partial groups, by _id */
    bool gdrained;
    bson_t *gpending;      /* spilled $group: next partial state already read */
    mf_window_stream_t *window; /* $setWindowFields */
    mf_densify_run_t *densify;  /* $_internalDensify */
    void *sub;             /* $unionWith: the other collection's stream (env->sub_open) */
    void (*sub_free)(void *);
    stage_t sbc;           /* $sortByCount: its $group */
    acc_def_t sbc_acc;
    /* Statistics (mf_agg_stream_collect_stats) */
    int64_t n_out, time_us; /* documents returned; microseconds in next(), the stages before it included */
    int64_t data_bytes;     /* $sort: bytes of the documents sorted; $group: of its results */
    int64_t *acc_max;       /* $group: each accumulator's largest memory (naccs entries, owned) */
    mf_agg_scan_stats_t scan; /* $lookup: what its reads of the other collection examined */
    struct mf_agg_stream **facet_st; /* $facet under statistics: each facet's stream, kept for explain (owned) */
} snode_t;

struct mf_agg_stream {
    const mf_pipeline_t *p;
    snode_t *nodes;
    size_t n;
    mf_docvec_t src;
    size_t src_pos;
    bool src_eof;
    /* The pushed-down prefix reshapes the source's documents ($project), which may fail: never counted unbuilt. */
    bool src_shaped;
    bool allow_disk;
    int64_t sort_bytes, group_bytes, window_bytes;
    char *tmp_dir; /* owned, may be NULL */
    int64_t spills;
    bool stats;             /* collect statistics (explain) */
    /* The source's documents node 0 took (or pull_count counted), and the time in env->pull / pull_count. */
    int64_t src_n, src_us;
};

mf_agg_stream_t *
mf_agg_stream_new(const mf_pipeline_t *p, size_t first, const mf_agg_limits_t *lim)
{
    mf_agg_stream_t *st = mf_calloc(1, sizeof *st);
    st->p = p;
    st->allow_disk = lim->allow_disk;
    st->sort_bytes = lim->sort_bytes;
    st->group_bytes = lim->group_bytes;
    st->window_bytes = lim->window_bytes > 0 ? lim->window_bytes : lim->sort_bytes;
    st->tmp_dir = lim->tmp_dir ? mf_strdup(lim->tmp_dir) : NULL;
    st->n = first < p->n ? p->n - first : 0;
    for (size_t i = 0; i < first && i < p->n; i++)
        st->src_shaped = st->src_shaped || p->stages[i].kind == S_PROJECT;
    st->nodes = mf_calloc(st->n ? st->n : 1, sizeof *st->nodes);
    for (size_t i = 0; i < st->n; i++) {
        snode_t *nd = &st->nodes[i];
        nd->s = &p->stages[first + i];
        mf_docvec_init(&nd->buf);
        if (nd->s->kind == S_SORTBYCOUNT) {
            bson_value_t one;
            mf_error_t e;
            mf_value_set_int32(&one, 1);
            nd->sbc.kind = S_GROUP;
            nd->sbc.expr = nd->s->expr;
            nd->sbc_acc.field = "count";
            nd->sbc_acc.kind = AC_SUM;
            nd->sbc_acc.expr = mf_expr_parse(&one, &e);
            nd->sbc.accs = &nd->sbc_acc;
            nd->sbc.naccs = 1;
        }
    }
    mf_docvec_init(&st->src);
    return st;
}

static void
buf_reset(snode_t *nd)
{
    for (size_t i = nd->pos; i < nd->buf.len; i++)
        bson_destroy(nd->buf.docs[i]);
    nd->buf.len = 0;
    nd->pos = 0;
}

void
mf_agg_stream_free(mf_agg_stream_t *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->n; i++) {
        snode_t *nd = &st->nodes[i];
        buf_reset(nd);
        mf_docvec_destroy(&nd->buf);
        mf_sorter_free(nd->sorter);
        mf_sorter_free(nd->gspill);
        mf_window_stream_free(nd->window);
        mf_densify_run_free(nd->densify);
        if (nd->gpending)
            bson_destroy(nd->gpending);
        if (nd->sub != NULL && nd->sub_free != NULL)
            nd->sub_free(nd->sub);
        mf_expr_free(nd->sbc_acc.expr);
        free(nd->acc_max);
        mf_agg_scan_stats_destroy(&nd->scan);
        for (size_t f = 0; nd->facet_st != NULL && f < nd->s->nfacets; f++)
            mf_agg_stream_free(nd->facet_st[f]);
        free(nd->facet_st);
    }
    free(st->nodes);
    free(st->tmp_dir);
    for (size_t i = st->src_pos; i < st->src.len; i++)
        bson_destroy(st->src.docs[i]);
    st->src.len = 0;
    mf_docvec_destroy(&st->src);
    free(st);
}

int64_t
mf_agg_stream_spills(const mf_agg_stream_t *st)
{
    int64_t n = st->spills;
    for (size_t i = 0; i < st->n; i++) {
        if (st->nodes[i].sorter)
            n += mf_sorter_spilled(st->nodes[i].sorter);
        if (st->nodes[i].gspill)
            n += mf_sorter_spilled(st->nodes[i].gspill);
        n += mf_window_stream_spills(st->nodes[i].window);
    }
    return n;
}

static int
sort_stage_cmp(void *arg, const bson_t *a, const bson_t *b)
{
    return mf_sort_cmp((const mf_sort_t *)arg, a, b);
}

static int
id_cmp(void *arg, const bson_t *a, const bson_t *b)
{
    bson_iter_t ia, ib;
    bson_value_t na;
    (void)arg;
    mf_value_set_null(&na);
    bool ha = bson_iter_init_find(&ia, a, "_id"), hb = bson_iter_init_find(&ib, b, "_id");
    return mf_value_cmp(ha ? bson_iter_value(&ia) : &na, hb ? bson_iter_value(&ib) : &na);
}

static int node_next(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, bson_t **out, mf_error_t *err);
static int node_step(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, bson_t **out, mf_error_t *err);

/* upstream: the next document for node i (from node i-1, or the source for node 0). */
static int
upstream(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, bson_t **out, mf_error_t *err)
{
    if (i > 0)
        return node_next(st, i - 1, env, out, err);
    *out = NULL;
    for (;;) {
        if (st->src_pos < st->src.len) {
            *out = st->src.docs[st->src_pos++];
            st->src_n += st->stats; /* taken, not merely pulled: a $limit downstream stops it */
            return 0;
        }
        st->src.len = 0;
        st->src_pos = 0;
        if (st->src_eof)
            return 0;
        if (env == NULL || env->pull == NULL)
            return mf_err_set(err, MF_E_InternalError, "streaming aggregation needs a source");
        int64_t t0 = st->stats ? mf_mono_us() : 0;
        int pr = env->pull(env->ctx, 128, &st->src, &st->src_eof, err);
        if (st->stats)
            st->src_us += mf_mono_us() - t0;
        if (pr < 0)
            return -1;
        if (st->src.len == 0 && !st->src_eof)
            st->src_eof = true; /* a source that returns nothing has nothing more */
    }
}

/* drain: every remaining upstream document of node i into v. */
static int
drain(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, mf_docvec_t *v, mf_error_t *err)
{
    for (int64_t k = 1;; k++) {
        bson_t *d;
        if (upstream(st, i, env, &d, err) < 0)
            return -1;
        if (d == NULL)
            return 0;
        mf_docvec_push_steal(v, d);
        if (k % 1024 == 0 && mf_exec_check_deadline(err) != 0)
            return -1;
    }
}

/*
 * source_count: how many documents node 0's source has left, counted by
 * env->pull_count without building any (the node reads no field of them:
 * counts_only). Returns 0 with *total, 1 when the source cannot count
 * (no pull_count, or documents already pulled, which the caller takes the
 * usual way), or -1 with err.
 */
static int
source_count(mf_agg_stream_t *st, const mf_agg_env_t *env, int64_t *total, mf_error_t *err)
{
    *total = 0;
    if (env == NULL || env->pull_count == NULL || st->src_pos < st->src.len || st->src_shaped)
        return 1;
    while (!st->src_eof) {
        int64_t n = 0, t0 = st->stats ? mf_mono_us() : 0;
        bool eof = false;
        int pr = env->pull_count(env->ctx, 4096, &n, &eof, err);
        if (st->stats) {
            st->src_us += mf_mono_us() - t0;
            st->src_n += n; /* the source's empty documents, counted instead of built */
        }
        if (pr < 0)
            return -1;
        *total += n;
        if (eof || n == 0)
            st->src_eof = true;
        if (mf_exec_check_deadline(err) != 0)
            return -1;
    }
    return 0;
}

/*
 * group_count: a $group that reads no field (counts_only) over n documents
 * at once: its one group (the constant _id) takes n at each accumulator
 * ($count adds n, $sum of a constant adds it n times), as n gt_add calls of
 * documents would. None when n is 0, as $group over nothing. 0 or -1.
 */
static int
group_count(gtable_t *t, const stage_t *s, int64_t n, mf_error_t *err)
{
    bson_t empty = BSON_INITIALIZER;
    if (n == 0)
        return 0;
    group_t *g = gt_group_of(t, s, &empty, err);
    if (g == NULL)
        return -1;
    for (size_t a = 0; a < s->naccs; a++) {
        if (s->accs[a].kind == AC_COUNT) {
            g->acc[a].count += n;
            continue;
        }
        bson_value_t v = {.value_type = BSON_TYPE_EOD};
        if (mf_expr_eval(s->accs[a].expr, &empty, &v, err) < 0)
            return -1;
        mf_sum_add_times(&g->acc[a].sum, &v, n); /* AC_SUM: counts_only admits nothing else */
        mf_value_free(&v);
    }
    return 0;
}

/*
 * group_fill: runs a $group node to its end: folds all input into a group
 * table; past the budget, partial groups go to a sorter by _id (292 without
 * disk use). Unspilled, the results (first-seen order) go to nd->buf;
 * spilled, group_next_spilled merges them in _id order.
 */
static int
group_fill(mf_agg_stream_t *st, size_t i, const stage_t *gs, const mf_agg_env_t *env, mf_error_t *err)
{
    snode_t *nd = &st->nodes[i];
    int64_t budget = st->group_bytes;
    gtable_t t;
    int rc = 0;

    gt_init(&t);
    if (st->stats && gs->naccs > 0) {
        t.acc_mem = mf_calloc(gs->naccs, sizeof *t.acc_mem);
        if (nd->acc_max == NULL)
            nd->acc_max = mf_calloc(gs->naccs, sizeof *nd->acc_max);
    }
    if (i == 0 && counts_only(gs)) {
        /* countDocuments' $group: counted at the source, no document built (mf_agg_env_t.pull_count). */
        int64_t n;
        int r = source_count(st, env, &n, err);
        rc = r < 0 ? -1 : r == 0 ? group_count(&t, gs, n, err) : 0;
        for (size_t a = 0; t.acc_mem != NULL && t.ng > 0 && a < gs->naccs; a++)
            nd->acc_max[a] = (int64_t)sizeof(accst_t); /* the one group's accumulators */
    }
    for (int64_t k = 1; rc == 0; k++) {
        bson_t *d;
        if (upstream(st, i, env, &d, err) < 0) {
            rc = -1;
            break;
        }
        if (d == NULL)
            break;
        rc = gt_add(&t, gs, d, err);
        bson_destroy(d);
        for (size_t a = 0; t.acc_mem != NULL && a < gs->naccs; a++)
            if (t.acc_mem[a] > nd->acc_max[a])
                nd->acc_max[a] = t.acc_mem[a];
        if (rc == 0 && k % 1024 == 0)
            rc = mf_exec_check_deadline(err);
        if (rc == 0 && t.mem > budget) {
            if (!st->allow_disk) {
                rc = mf_err_set(err, MF_E_QueryExceededMemoryLimitNoDiskUseAllowed,
                                "Exceeded memory limit for $group, but didn't allow external sort. Pass allowDiskUse:true to opt in.");
                break;
            }
            /* The table's partial groups become one sorted run on disk. */
            if (nd->gspill == NULL)
                nd->gspill = mf_sorter_new(id_cmp, NULL, INT64_MAX, true, NULL, st->tmp_dir);
            for (size_t j = 0; j < t.ng && rc == 0; j++)
                rc = mf_sorter_add(nd->gspill, gt_partial(gs, t.order[j]), err);
            gt_clear(&t, gs, NULL);
            if (t.acc_mem != NULL)
                memset(t.acc_mem, 0, gs->naccs * sizeof *t.acc_mem);
            if (rc == 0)
                rc = mf_sorter_spill_now(nd->gspill, err);
        }
    }
    if (rc == 0 && nd->gspill != NULL) {
        for (size_t j = 0; j < t.ng && rc == 0; j++)
            rc = mf_sorter_add(nd->gspill, gt_partial(gs, t.order[j]), err);
        gt_clear(&t, gs, NULL);
        if (rc == 0)
            rc = mf_sorter_finish(nd->gspill, err);
    }
    int64_t *acc_mem = t.acc_mem;
    gt_clear(&t, gs, rc == 0 ? &nd->buf : NULL);
    gt_destroy(&t, gs);
    free(acc_mem);
    nd->gdrained = true;
    return rc;
}

/* group_next_spilled: the next final group of a spilled $group (NULL at the end). */
static int
group_next_spilled(snode_t *nd, const stage_t *gs, bson_t **out, mf_error_t *err)
{
    bson_t *d = nd->gpending;
    int rc = 0;

    *out = NULL;
    nd->gpending = NULL;
    if (d == NULL && mf_sorter_next(nd->gspill, &d, err) < 0)
        return -1;
    if (d == NULL)
        return 0;
    /* Partial states of one key are adjacent, in input order. */
    group_t g;
    bson_iter_t it;
    memset(&g, 0, sizeof g);
    if (bson_iter_init_find(&it, d, "_id"))
        mf_value_copy(&g.key, bson_iter_value(&it));
    else
        g.key.value_type = BSON_TYPE_NULL;
    g.acc = bson_malloc0((gs->naccs ? gs->naccs : 1) * sizeof *g.acc);
    for (size_t a = 0; a < gs->naccs; a++)
        acc_init(&g.acc[a], gs->accs[a].kind);
    while (d != NULL && rc == 0) {
        bson_value_t k;
        bson_iter_init_find(&it, d, "_id");
        k = *bson_iter_value(&it);
        if (mf_value_cmp(&k, &g.key) != 0)
            break;
        rc = partial_merge(gs, &g, d, err);
        bson_destroy(d);
        d = NULL;
        if (rc == 0)
            rc = mf_sorter_next(nd->gspill, &d, err);
    }
    nd->gpending = d;
    if (rc == 0)
        *out = gt_result(gs, &g);
    mf_value_free(&g.key);
    for (size_t a = 0; a < gs->naccs; a++)
        acc_free(&g.acc[a], gs->accs[a].kind);
    bson_free(g.acc);
    return rc;
}

/*
 * sample_fill: a $sample node reads all its input keeping a uniform random
 * sample of at most size documents (reservoir sampling, so memory is the
 * sample's, not the input's), then shuffles it into nd->buf.
 */
static int
sample_fill(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, mf_error_t *err)
{
    snode_t *nd = &st->nodes[i];
    uint64_t rs = xorshift_seed(nd);

    for (;;) {
        bson_t *d;
        if (upstream(st, i, env, &d, err) < 0)
            return -1;
        if (d == NULL)
            break;
        nd->count++;
        if ((int64_t)nd->buf.len < nd->s->n) {
            mf_docvec_push_steal(&nd->buf, d);
        } else {
            uint64_t j = xorshift(&rs) % (uint64_t)nd->count;
            if (j < nd->buf.len) {
                bson_destroy(nd->buf.docs[j]);
                nd->buf.docs[j] = d;
            } else {
                bson_destroy(d);
            }
        }
        if (nd->count % 1024 == 0 && mf_exec_check_deadline(err) != 0)
            return -1;
    }
    for (size_t k = nd->buf.len; k > 1; k--) {
        size_t j = (size_t)(xorshift(&rs) % k);
        bson_t *t = nd->buf.docs[k - 1];
        nd->buf.docs[k - 1] = nd->buf.docs[j];
        nd->buf.docs[j] = t;
    }
    nd->pos = 0;
    nd->done = true;
    return 0;
}

/* One kept $geoNear result of the streaming run: its output document, distance and arrival order. */
typedef struct gnkeep {
    double dist;
    uint64_t seq;
    bson_t *doc;
} gnkeep_t;

static int
gnkeep_cmp(const void *a, const void *b)
{
    const gnkeep_t *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts kept[0..*n) and frees all but the first k (k 0: keep all). */
static void
gnkeep_trim(gnkeep_t *kept, size_t *n, int64_t k)
{
    if (*n > 1)
        qsort(kept, *n, sizeof(*kept), gnkeep_cmp);
    while (k > 0 && *n > (size_t)k)
        bson_destroy(kept[--*n].doc);
}

/*
 * geonear_fill: the streaming $geoNear: each upstream document is measured
 * as it arrives and only the selected ones are kept (just the nearest
 * skip + limit of them when a $limit follows, as a $sort does), then
 * they go to the node's buffer nearest first.
 */
static int
geonear_fill(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, mf_error_t *err)
{
    snode_t *nd = &st->nodes[i];
    const stage_t *s = nd->s;
    bson_t specs;
    char ns[256] = "";
    mf_geonear_run_t run;
    gnkeep_t *kept = NULL;
    size_t n = 0, cap = 0;
    uint64_t seq = 0;
    int64_t k = 0, skip = 0;
    int rc = -1;

    bson_init(&specs);
    if (env != NULL && env->source_indexes != NULL &&
        env->source_indexes(env->ctx, tls_geo_source, &specs, ns, sizeof ns, err) != 0) {
        mf_err_planning(err); /* a missing collection: mongod refuses it while it builds the pipeline's executor */
        goto out;
    }
    if (mf_geonear_prepare(s->geonear, &specs, ns, &run, err) != 0) {
        mf_err_planning(err); /* mongod chooses $geoNear's index when it plans the pipeline */
        goto out;
    }
    for (size_t j = i + 1; j < st->n; j++) {
        if (st->nodes[j].s->kind == S_SKIP) {
            skip += st->nodes[j].s->n;
        } else if (st->nodes[j].s->kind == S_LIMIT) {
            k = skip + st->nodes[j].s->n;
            break;
        } else {
            break;
        }
    }
    for (;;) {
        bson_t *d;
        double dist;
        bson_value_t loc;
        if (upstream(st, i, env, &d, err) < 0)
            goto out;
        if (d == NULL)
            break;
        if (++seq % 1024 == 0 && mf_exec_check_deadline(err) != 0) {
            bson_destroy(d);
            goto out;
        }
        if (!mf_geonear_measure(s->geonear, &run, d, &dist, &loc)) {
            bson_destroy(d);
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            kept = bson_realloc(kept, cap * sizeof(*kept));
        }
        kept[n].dist = dist;
        kept[n].seq = seq;
        kept[n].doc = geonear_output(s, d, dist, &loc);
        n++;
        bson_destroy(d);
        if (k > 0 && n >= 2 * (size_t)k)
            gnkeep_trim(kept, &n, k);
    }
    gnkeep_trim(kept, &n, k);
    for (size_t j = 0; j < n; j++)
        mf_docvec_push_steal(&nd->buf, kept[j].doc);
    n = 0;
    rc = 0;
out:
    for (size_t j = 0; j < n; j++)
        bson_destroy(kept[j].doc);
    bson_free(kept);
    bson_destroy(&specs);
    return rc;
}

/*
 * stepped: how a node's step ends once a call returning rc has put its next
 * document (NULL: none left) in *out: -1 when the call failed, else 0, with
 * the node done after its last document.
 */
static int
stepped(snode_t *nd, int rc, bson_t **out)
{
    if (rc < 0)
        return -1;
    if (*out == NULL)
        nd->done = true;
    return 0;
}

/* A $_internalDensify node's input: its upstream. */
typedef struct densify_src {
    mf_agg_stream_t *st;
    size_t i;
    const mf_agg_env_t *env;
} densify_src_t;

static int
densify_pull(void *arg, bson_t **doc, mf_error_t *err)
{
    densify_src_t *src = arg;
    return upstream(src->st, src->i, src->env, doc, err);
}

/*
 * facet_run_streams: nd's $facet over in (destroyed here), each facet's
 * pipeline run as its own stream with statistics over a copy of in; the
 * streams stay in nd->facet_st for explain and the one result document
 * goes to nd->buf. 0, or -1 with err.
 */
static int
facet_run_streams(mf_agg_stream_t *st, snode_t *nd, const mf_agg_env_t *env, mf_docvec_t *in, mf_error_t *err)
{
    const stage_t *s = nd->s;
    mf_agg_limits_t lim = {.allow_disk = st->allow_disk, .sort_bytes = st->sort_bytes,
                           .group_bytes = st->group_bytes, .window_bytes = st->window_bytes,
                           .tmp_dir = st->tmp_dir};
    bson_t *d = bson_new();
    int rc = 0;

    nd->facet_st = mf_calloc(s->nfacets ? s->nfacets : 1, sizeof *nd->facet_st);
    for (size_t f = 0; rc == 0 && f < s->nfacets; f++) {
        mf_agg_stream_t *fs = mf_agg_stream_new(s->facets[f], 0, &lim);
        bson_t arr;
        nd->facet_st[f] = fs;
        fs->stats = true;
        fs->src_eof = true; /* its documents are in: it never pulls */
        for (size_t j = 0; j < in->len; j++)
            mf_docvec_push(&fs->src, in->docs[j]);
        bson_append_array_begin(d, s->facet_names[f], -1, &arr);
        for (uint32_t n = 0;; n++) {
            bson_t *o;
            char buf[16];
            const char *key;
            if ((rc = mf_agg_stream_next(fs, env, &o, err)) < 0 || o == NULL)
                break;
            bson_uint32_to_string(n, &key, buf, sizeof buf);
            bson_append_document(&arr, key, -1, o);
            bson_destroy(o);
        }
        bson_append_array_end(d, &arr);
    }
    mf_docvec_destroy(in);
    if (rc == 0)
        mf_docvec_push_steal(&nd->buf, d);
    else
        bson_destroy(d);
    return rc;
}

/*
 * node_next: node i's next document (node_step), counted and timed when
 * the stream collects statistics: the time includes the stages before it,
 * as mongod's ScopedTimer around doGetNext() does.
 */
static int
node_next(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, bson_t **out, mf_error_t *err)
{
    snode_t *nd = &st->nodes[i];
    if (!st->stats)
        return node_step(st, i, env, out, err);
    int64_t t0 = mf_mono_us();
    int rc = node_step(st, i, env, out, err);
    nd->time_us += mf_mono_us() - t0;
    if (rc == 0 && *out != NULL) {
        nd->n_out++;
        if (nd->s->kind == S_GROUP)
            nd->data_bytes += (*out)->len; /* totalOutputDataSizeBytes */
    }
    return rc;
}

static int
node_step(mf_agg_stream_t *st, size_t i, const mf_agg_env_t *env, bson_t **out, mf_error_t *err)
{
    snode_t *nd = &st->nodes[i];
    const stage_t *s = nd->s;

    *out = NULL;
    for (;;) {
        bson_t *d;
        if (nd->pos < nd->buf.len) {
            *out = nd->buf.docs[nd->pos++];
            return 0;
        }
        nd->buf.len = 0;
        nd->pos = 0;
        if (nd->done)
            return 0;
        switch (s->kind) {
        case S_LIMIT:
            if (nd->count >= s->n) {
                nd->done = true;
                continue;
            }
            if (upstream(st, i, env, out, err) < 0)
                return -1;
            if (*out == NULL)
                nd->done = true;
            nd->count++;
            return 0;
        case S_SKIP:
            while (nd->count < s->n) {
                if (upstream(st, i, env, &d, err) < 0)
                    return -1;
                if (d == NULL) {
                    nd->done = true;
                    return 0;
                }
                bson_destroy(d);
                nd->count++;
                if (nd->count % 1024 == 0 && mf_exec_check_deadline(err) != 0)
                    return -1;
            }
            return stepped(nd, upstream(st, i, env, out, err), out);
        case S_MATCH:
            if (upstream(st, i, env, &d, err) < 0)
                return -1;
            if (d == NULL) {
                nd->done = true;
                continue;
            }
            if (mf_matcher_match(s->matcher, d, NULL)) {
                *out = d;
                return 0;
            }
            bson_destroy(d);
            if (mf_matcher_take_failure(err))
                return -1;
            if (++nd->count % 1024 == 0 && mf_exec_check_deadline(err) != 0)
                return -1;
            continue;
        case S_PROJECT:
        case S_UNSET:
        case S_ADDFIELDS:
        case S_UNWIND:
        case S_LOOKUP:
        case S_UNPACK:
        case S_REDACT:
        case S_GRAPHLOOKUP:
        case S_REPLACEROOT: {
            mf_docvec_t in;
            if (upstream(st, i, env, &d, err) < 0)
                return -1;
            if (d == NULL) {
                nd->done = true;
                continue;
            }
            mf_docvec_init(&in);
            mf_docvec_push_steal(&in, d);
            if (s->kind == S_LOOKUP && st->stats && env->set_scan_stats != NULL) {
                /* What this $lookup's reads examine is its own (explain's totalDocsExamined ...). */
                mf_agg_scan_stats_t *prev = env->set_scan_stats(env->ctx, &nd->scan);
                int rr = run_stage(s, env, &in, &nd->buf, err);
                env->set_scan_stats(env->ctx, prev);
                if (rr < 0)
                    return -1;
                continue;
            }
            if (run_stage(s, env, &in, &nd->buf, err) < 0)
                return -1;
            continue;
        }
        case S_SORT:
            if (nd->sorter == NULL) {
                nd->sorter = mf_sorter_new_sort(sort_stage_cmp, s->sort, st->sort_bytes, st->allow_disk, st->tmp_dir);
                mf_curop_note_sort(mf_curop_current());
                /* $sort then [$skip...] $limit: a top-k sort (what MongoDB calls $sort with limit). */
                int64_t k = 0;
                for (size_t j = i + 1; j < st->n; j++) {
                    if (st->nodes[j].s->kind == S_SKIP) {
                        k += st->nodes[j].s->n;
                    } else if (st->nodes[j].s->kind == S_LIMIT) {
                        mf_sorter_set_limit(nd->sorter, k + st->nodes[j].s->n);
                        break;
                    } else {
                        break;
                    }
                }
                for (;;) {
                    if (upstream(st, i, env, &d, err) < 0)
                        return -1;
                    if (d == NULL)
                        break;
                    if (st->stats)
                        nd->data_bytes += d->len;
                    if (mf_sorter_add(nd->sorter, d, err) < 0)
                        return -1;
                }
                if (mf_sorter_finish(nd->sorter, err) < 0)
                    return -1;
            }
            return stepped(nd, mf_sorter_next(nd->sorter, out, err), out);
        case S_GROUP:
            if (!nd->gdrained && group_fill(st, i, s, env, err) < 0)
                return -1;
            if (nd->gspill == NULL) {
                nd->done = true;
                continue;
            }
            return stepped(nd, group_next_spilled(nd, s, out, err), out);
        case S_BUCKET:
        case S_SORTBYCOUNT: {
            /* A $group, then its output sorted ($bucket: by _id; $sortByCount: by count). */
            const stage_t *gs = s->kind == S_BUCKET ? s : &nd->sbc;
            if (nd->sorter == NULL) {
                int64_t budget = st->sort_bytes;
                if (group_fill(st, i, gs, env, err) < 0)
                    return -1;
                nd->sorter = mf_sorter_new(sort_stage_cmp, s->sort, budget, st->allow_disk,
                                           "Sort exceeded memory limit, but did not opt in to external sorting.",
                                           st->tmp_dir);
                mf_curop_note_sort(mf_curop_current());
                for (;;) {
                    if (nd->gspill != NULL) {
                        if (group_next_spilled(nd, gs, &d, err) < 0)
                            return -1;
                    } else {
                        d = nd->pos < nd->buf.len ? nd->buf.docs[nd->pos++] : NULL;
                    }
                    if (d == NULL)
                        break;
                    if (st->stats)
                        nd->data_bytes += d->len; /* the $group's output, the $sort's input (explain) */
                    if (mf_sorter_add(nd->sorter, d, err) < 0)
                        return -1;
                }
                nd->buf.len = 0;
                nd->pos = 0;
                if (mf_sorter_finish(nd->sorter, err) < 0)
                    return -1;
            }
            return stepped(nd, mf_sorter_next(nd->sorter, out, err), out);
        }
        case S_BUCKETAUTO: {
            /* Its input goes to an external sorter (sort budget, spilling with allowDiskUse), then is cut. */
            int64_t n = 0;
            nd->sorter = mf_sorter_new(ba_cmp, NULL, st->sort_bytes, st->allow_disk,
                                       "Exceeded memory limit for $bucketAuto, but didn't allow external sort. "
                                       "Pass allowDiskUse:true to opt in.", st->tmp_dir);
            for (;;) {
                if (upstream(st, i, env, &d, err) < 0)
                    return -1;
                if (d == NULL)
                    break;
                bson_t *w = ba_wrap(s, d, err);
                bson_destroy(d);
                if (w == NULL || mf_sorter_add(nd->sorter, w, err) < 0)
                    return -1;
                if (++n % 1024 == 0 && mf_exec_check_deadline(err) != 0)
                    return -1;
            }
            nd->done = true;
            if (mf_sorter_finish(nd->sorter, err) < 0 || bucket_auto_emit(s, nd->sorter, n, &nd->buf, err) < 0)
                return -1;
            continue;
        }
        case S_UNIONWITH:
            /*
             * The input passes through; at its end, the other collection's
             * documents follow, streamed through env->sub_open when the
             * environment has it (collected through env->scan otherwise).
             */
            if (nd->sub == NULL) {
                if (upstream(st, i, env, out, err) < 0)
                    return -1;
                if (*out != NULL)
                    return 0;
                if (env == NULL || env->sub_open == NULL || s->from == NULL || (s->sub && s->sub->collectionless)) {
                    nd->done = true;
                    if (union_other(s, env, &nd->buf, err) < 0)
                        return -1;
                    continue;
                }
                bson_iter_t pit;
                const bson_value_t *pv = s->spec && bson_iter_init_find(&pit, s->spec, "pipeline")
                                             ? bson_iter_value(&pit) : NULL;
                if ((nd->sub = env->sub_open(env->ctx, s->from, pv, err)) == NULL)
                    return -1;
                nd->sub_free = env->sub_free;
            }
            return stepped(nd, env->sub_next(env->ctx, nd->sub, out, err), out);
        case S_OUT:
        case S_MERGE:
            /* A streaming writer (the caller) takes the documents: pass them through. */
            return stepped(nd, upstream(st, i, env, out, err), out);
        case S_COUNT:
            if (i == 0 && !nd->done) {
                int64_t n;
                int r = source_count(st, env, &n, err);
                if (r < 0)
                    return -1;
                nd->count += n; /* r == 1: nothing counted, the loop pulls the documents */
            }
            while (!nd->done) {
                if (upstream(st, i, env, &d, err) < 0)
                    return -1;
                if (d == NULL) {
                    nd->done = true;
                    break;
                }
                bson_destroy(d);
                if (++nd->count % 1024 == 0 && mf_exec_check_deadline(err) != 0)
                    return -1;
            }
            if (nd->count > 0) {
                bson_t *c = bson_new();
                if (nd->count <= INT32_MAX)
                    bson_append_int32(c, s->field, -1, (int32_t)nd->count);
                else
                    bson_append_int64(c, s->field, -1, nd->count);
                mf_docvec_push_steal(&nd->buf, c);
            }
            continue;
        case S_SAMPLE:
            if (sample_fill(st, i, env, err) < 0)
                return -1;
            continue;
        case S_GEONEAR:
            nd->done = true;
            if (geonear_fill(st, i, env, err) < 0)
                return -1;
            continue;
        case S_DENSIFY: {
            /* One document per step: a generator holds its next value, never the range. */
            densify_src_t src = {st, i, env};
            if (nd->densify == NULL)
                nd->densify = mf_densify_run_new(s->densify, env ? env->densify_max_docs : 0,
                                                 env ? env->densify_max_bytes : 0);
            return stepped(nd, mf_densify_next(nd->densify, densify_pull, &src, out, err), out);
        }
        case S_WINDOW:
            /* Sorted by (partition, sortBy) through a sorter, then one partition at a time. */
            if (nd->window == NULL) {
                nd->window = mf_window_stream_new(s->window, st->sort_bytes, st->window_bytes, st->allow_disk,
                                                  st->tmp_dir);
                for (;;) {
                    if (upstream(st, i, env, &d, err) < 0)
                        return -1;
                    if (d == NULL)
                        break;
                    if (mf_window_stream_add(nd->window, d, err) < 0)
                        return -1;
                }
                if (mf_window_stream_finish(nd->window, err) < 0)
                    return -1;
            }
            if (mf_window_stream_next(nd->window, &nd->buf, &nd->done, err) < 0)
                return -1;
            continue;
        case S_FACET:
            if (st->stats) {
                /* Under explain each facet runs as a stream of its own, whose statistics explain shows. */
                mf_docvec_t in;
                mf_docvec_init(&in);
                nd->done = true;
                if (drain(st, i, env, &in, err) < 0 || facet_run_streams(st, nd, env, &in, err) < 0)
                    return -1;
                continue;
            }
            /* FALLTHROUGH */
        default: {
            /* Materialising stages: all input, then run as before. */
            mf_docvec_t in;
            mf_docvec_init(&in);
            if (drain(st, i, env, &in, err) < 0) {
                mf_docvec_destroy(&in);
                return -1;
            }
            nd->done = true;
            if (run_stage(s, env, &in, &nd->buf, err) < 0)
                return -1;
            continue;
        }
        }
    }
}

int
mf_agg_stream_next(mf_agg_stream_t *st, const mf_agg_env_t *env, bson_t **out, mf_error_t *err)
{
    if (st->n == 0)
        return upstream(st, 0, env, out, err);
    return node_next(st, st->n - 1, env, out, err);
}

/* ------------------------------------------------------------------------ */
/* Execution statistics and explain                                         */
/* ------------------------------------------------------------------------ */

void
mf_agg_scan_stats_add_index(mf_agg_scan_stats_t *s, const char *name)
{
    size_t at = 0;
    /* Kept sorted and distinct, as mongod's std::set of names prints them. */
    while (at < s->nindexes) {
        int c = strcmp(s->indexes[at], name);
        if (c == 0)
            return;
        if (c > 0)
            break;
        at++;
    }
    s->indexes = mf_realloc(s->indexes, (s->nindexes + 1) * sizeof *s->indexes);
    memmove(&s->indexes[at + 1], &s->indexes[at], (s->nindexes - at) * sizeof *s->indexes);
    s->indexes[at] = mf_strdup(name);
    s->nindexes++;
}

void
mf_agg_scan_stats_destroy(mf_agg_scan_stats_t *s)
{
    for (size_t i = 0; i < s->nindexes; i++)
        free(s->indexes[i]);
    free(s->indexes);
    memset(s, 0, sizeof *s);
}

size_t
mf_pipeline_len(const mf_pipeline_t *p)
{
    return p->n;
}

bool
mf_pipeline_sort_tail(const mf_pipeline_t *p, size_t i, const bson_t **sort, const bson_t **project,
                      const struct mf_projection **parsed)
{
    *sort = NULL;
    *project = NULL;
    *parsed = NULL;
    if (i >= p->n || p->stages[i].kind != S_SORT || (i + 1 < p->n && p->stages[i + 1].kind == S_DENSIFY))
        return false;
    *sort = p->stages[i++].spec;
    while (i < p->n && (p->stages[i].kind == S_SKIP || p->stages[i].kind == S_LIMIT))
        i++;
    if (i < p->n && p->stages[i].kind == S_PROJECT) {
        *project = p->stages[i].spec;
        *parsed = p->stages[i].projection;
    }
    return i == p->n || *project != NULL;
}

void
mf_agg_stream_collect_stats(mf_agg_stream_t *st)
{
    st->stats = true;
}

void
mf_agg_stream_source_stats(const mf_agg_stream_t *st, int64_t *n, int64_t *us)
{
    *n = st->src_n;
    *us = st->src_us;
}

/* explain_sort_key: a $sort's pattern as explain prints it (SortPattern kForExplain): directions 1 / -1, $meta kept. */
static void
explain_sort_key(const bson_t *spec, bson_t *out)
{
    bson_iter_t it;
    if (spec == NULL || !bson_iter_init(&it, spec))
        return;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
        else
            bson_append_int32(out, bson_iter_key(&it), -1, bson_iter_as_double(&it) < 0 ? -1 : 1);
    }
}

/* explain_spills: a sorter's spill counters (usedDisk, spills, spilledDataStorageSize ...), zero without one. */
static void
explain_spills(const mf_sorter_t *so, int64_t *spills, int64_t *docs, int64_t *bytes)
{
    *spills = so != NULL ? mf_sorter_spilled(so) : 0;
    mf_sorter_spill_totals(so, docs, bytes);
}

/*
 * explain_facet: s's explain form into d, {$facet: {name: stages}}, each
 * facet's pipeline after its $internalFacetTeeConsumer (which, with
 * statistics, returned what its pipeline took), with the statistics of
 * nd's facet streams when it ran them (nd may be NULL).
 */
static void
explain_facet(const stage_t *s, const snode_t *nd, const mf_agg_explain_hooks_t *hooks, bson_t *d)
{
    bson_t in, arr, tee, empty = BSON_INITIALIZER;

    BSON_APPEND_DOCUMENT_BEGIN(d, "$facet", &in);
    for (size_t f = 0; f < s->nfacets; f++) {
        const mf_agg_stream_t *fs = nd != NULL && nd->facet_st != NULL ? nd->facet_st[f] : NULL;
        int fk = 1;
        bson_append_array_begin(&in, s->facet_names[f], -1, &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &tee);
        BSON_APPEND_DOCUMENT(&tee, "$internalFacetTeeConsumer", &empty);
        if (fs != NULL) {
            BSON_APPEND_INT64(&tee, "nReturned", fs->src_n);
            BSON_APPEND_INT64(&tee, "executionTimeMillisEstimate", 0); /* its documents were in hand */
        }
        bson_append_document_end(&arr, &tee);
        mf_pipeline_explain(s->facets[f], 0, fs, hooks, &arr, &fk);
        bson_append_array_end(&in, &arr);
    }
    bson_append_document_end(d, &in);
    bson_destroy(&empty);
}

/*
 * explain_union: s's explain form into d, {$unionWith: {coll, pipeline}}
 * (no coll for a $documents sub-pipeline), as DocumentSourceUnionWith::
 * serialize writes it: with run (at queryPlanner, or once the run read
 * the sub-pipeline) the sub-pipeline explained by hooks ([{$cursor ...},
 * ...], or the desugared $documents first), else (or when the hook fails)
 * its stages as explain shows them, with no $cursor.
 */
static void
explain_union(const stage_t *s, const mf_agg_explain_hooks_t *hooks, bool run, bson_t *d)
{
    bson_t stages = BSON_INITIALIZER, in, empty = BSON_INITIALIZER;
    bson_iter_t it;
    const bson_value_t *pv = s->spec != NULL && bson_iter_init_find(&it, s->spec, "pipeline") ? bson_iter_value(&it)
                                                                                                : NULL;
    run = run && hooks != NULL && hooks->sub_explain != NULL && (s->from != NULL || s->sub != NULL);
    bool ok = run && hooks->sub_explain(hooks->ctx, s->from, pv, &stages) == 0;
    BSON_APPEND_DOCUMENT_BEGIN(d, "$unionWith", &in);
    if (s->from != NULL)
        BSON_APPEND_UTF8(&in, "coll", s->from);
    if (ok) {
        BSON_APPEND_ARRAY(&in, "pipeline", &stages);
    } else if (s->sub != NULL) {
        /* _pipeline->serialize(explain): each stage as explain shows it, with no $cursor and no counters. */
        bson_t arr;
        int k = 0;
        BSON_APPEND_ARRAY_BEGIN(&in, "pipeline", &arr);
        mf_pipeline_explain(s->sub, 0, NULL, NULL, &arr, &k);
        bson_append_array_end(&in, &arr);
    } else {
        BSON_APPEND_ARRAY(&in, "pipeline", &empty);
    }
    bson_append_document_end(d, &in);
    bson_destroy(&stages);
    bson_destroy(&empty);
}

/*
 * explain_documents: the stages $documents desugars to
 * (DocumentSourceDocuments::createFromBson), appended to arr: a $queue of
 * one empty document, a $project of the array (a constant, as optimize
 * folds it) into _tempDocumentsField, its $unwind and a $replaceRoot by it.
 * With nd (statistics): 1, 1, then the documents made, for each.
 */
static void
explain_documents(const stage_t *s, const snode_t *nd, bson_t *arr, int *k)
{
    static const char *const names[] = {"$queue", "$project", "$unwind", "$replaceRoot"};
    bson_iter_t it;
    bson_t d, in, sub;
    char key[16];

    bson_iter_init(&it, s->raw);
    bson_iter_next(&it);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%d", (*k)++);
        BSON_APPEND_DOCUMENT_BEGIN(arr, key, &d);
        if (i == 0) {
            BSON_APPEND_ARRAY_BEGIN(&d, names[i], &in);
            BSON_APPEND_DOCUMENT_BEGIN(&in, "0", &sub);
            bson_append_document_end(&in, &sub);
            bson_append_array_end(&d, &in);
        } else {
            BSON_APPEND_DOCUMENT_BEGIN(&d, names[i], &in);
            if (i == 1) {
                BSON_APPEND_BOOL(&in, "_id", true);
                if (BSON_ITER_HOLDS_ARRAY(&it)) {
                    BSON_APPEND_DOCUMENT_BEGIN(&in, "_tempDocumentsField", &sub);
                    bson_append_value(&sub, "$const", -1, bson_iter_value(&it));
                    bson_append_document_end(&in, &sub);
                } else {
                    bson_append_value(&in, "_tempDocumentsField", -1, bson_iter_value(&it));
                }
            } else {
                BSON_APPEND_UTF8(&in, i == 2 ? "path" : "newRoot", "$_tempDocumentsField");
            }
            bson_append_document_end(&d, &in);
        }
        if (nd != NULL) {
            BSON_APPEND_INT64(&d, "nReturned", i < 2 ? 1 : nd->n_out);
            BSON_APPEND_INT64(&d, "executionTimeMillisEstimate", nd->time_us / 1000);
        }
        bson_append_document_end(arr, &d);
    }
}

/* explain_operand: v as an explained expression operand: a field path as is, a literal as {$const: v}. */
static void
explain_operand(bson_t *d, const char *key, const bson_value_t *v)
{
    bson_t c;
    if ((v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') || v->value_type == BSON_TYPE_DOCUMENT ||
        v->value_type == BSON_TYPE_ARRAY) {
        bson_append_value(d, key, -1, v);
        return;
    }
    BSON_APPEND_DOCUMENT_BEGIN(d, key, &c);
    bson_append_value(&c, "$const", -1, v);
    bson_append_document_end(d, &c);
}

/* explain_accs: a $group's accumulators {op: arg} from spec (a $bucket's output), arguments explained. */
static void
explain_accs(bson_t *d, const bson_t *spec)
{
    bson_iter_t it, ai;
    bson_t a;
    for (bson_iter_init(&it, spec); bson_iter_next(&it);) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &ai))
            continue;
        BSON_APPEND_DOCUMENT_BEGIN(d, bson_iter_key(&it), &a);
        while (bson_iter_next(&ai))
            explain_operand(&a, bson_iter_key(&ai), bson_iter_value(&ai));
        bson_append_document_end(d, &a);
    }
}

/* explain_count_one: {name: {$sum: {$const: 1}}}, the count a desugared stage's $group keeps. */
static void
explain_count_one(bson_t *d, const char *name)
{
    bson_t a, c;
    BSON_APPEND_DOCUMENT_BEGIN(d, name, &a);
    BSON_APPEND_DOCUMENT_BEGIN(&a, "$sum", &c);
    BSON_APPEND_INT32(&c, "$const", 1);
    bson_append_document_end(&a, &c);
    bson_append_document_end(d, &a);
}

/*
 * explain_bucket_id: a $bucket's group key as DocumentSourceBucket::
 * createFromBson builds it: {$switch: {branches: [{case: {$and: [{$gte:
 * [groupBy, lower]}, {$lt: [groupBy, upper]}]}, then: lower} ...],
 * default}}, constants as {$const}.
 */
static void
explain_bucket_id(bson_t *d, const bson_t *spec)
{
    bson_iter_t gi, di, bi, lo, hi;
    bson_t sw, in, br, b, cs, and, cmp, ops;
    int k = 0;
    char key[16];

    bool has_by = bson_iter_init_find(&gi, spec, "groupBy");
    bool has_dflt = bson_iter_init_find(&di, spec, "default");
    BSON_APPEND_DOCUMENT_BEGIN(d, "_id", &sw);
    BSON_APPEND_DOCUMENT_BEGIN(&sw, "$switch", &in);
    BSON_APPEND_ARRAY_BEGIN(&in, "branches", &br);
    if (has_by && bson_iter_init_find(&bi, spec, "boundaries") && BSON_ITER_HOLDS_ARRAY(&bi) &&
        bson_iter_recurse(&bi, &lo) && bson_iter_next(&lo)) {
        for (hi = lo; bson_iter_next(&hi); lo = hi) {
            snprintf(key, sizeof key, "%d", k++);
            BSON_APPEND_DOCUMENT_BEGIN(&br, key, &b);
            BSON_APPEND_DOCUMENT_BEGIN(&b, "case", &cs);
            BSON_APPEND_ARRAY_BEGIN(&cs, "$and", &and);
            for (int j = 0; j < 2; j++) {
                BSON_APPEND_DOCUMENT_BEGIN(&and, j == 0 ? "0" : "1", &cmp);
                BSON_APPEND_ARRAY_BEGIN(&cmp, j == 0 ? "$gte" : "$lt", &ops);
                bson_append_value(&ops, "0", -1, bson_iter_value(&gi));
                explain_operand(&ops, "1", bson_iter_value(j == 0 ? &lo : &hi));
                bson_append_array_end(&cmp, &ops);
                bson_append_document_end(&and, &cmp);
            }
            bson_append_array_end(&cs, &and);
            bson_append_document_end(&b, &cs);
            explain_operand(&b, "then", bson_iter_value(&lo));
            bson_append_document_end(&br, &b);
        }
    }
    bson_append_array_end(&in, &br);
    if (has_dflt)
        explain_operand(&in, "default", bson_iter_value(&di));
    bson_append_document_end(&sw, &in);
    bson_append_document_end(d, &sw);
}

/*
 * explain_desugared: a $sortByCount, $bucket or $count as the two stages
 * it desugars to (DocumentSourceSortByCount / DocumentSourceBucket /
 * DocumentSourceCount::createFromBson), appended to arr: a $group ({$sum:
 * 1} counts, constants as {$const}; no $willBeMerged, which mongod writes
 * only under featureFlagShardFilteringDistinctScan), then a $sort
 * ({count: -1}; {_id: 1}) or, for $count, a $project of the count. With
 * nd (statistics) each carries the counters a $group / $sort has, from the
 * one node that runs both.
 */
static void
explain_desugared(const stage_t *s, const snode_t *nd, bson_t *arr, int *k)
{
    bson_iter_t it, si;
    bson_t d, in, sub;
    char key[16];
    int64_t spills, sdocs, sbytes;
    bson_t spec = BSON_INITIALIZER;

    bson_iter_init(&it, s->raw);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &si)) {
        bson_destroy(&spec);
        bson_init_static(&spec, bson_iter_value(&it)->value.v_doc.data, bson_iter_value(&it)->value.v_doc.data_len);
    }
    /* The $group. */
    snprintf(key, sizeof key, "%d", (*k)++);
    BSON_APPEND_DOCUMENT_BEGIN(arr, key, &d);
    BSON_APPEND_DOCUMENT_BEGIN(&d, "$group", &in);
    if (s->kind == S_SORTBYCOUNT) {
        explain_operand(&in, "_id", bson_iter_value(&it));
        explain_count_one(&in, "count");
    } else if (s->kind == S_BUCKET) {
        explain_bucket_id(&in, &spec);
        if (bson_iter_init_find(&si, &spec, "output") && BSON_ITER_HOLDS_DOCUMENT(&si)) {
            bson_t out;
            bson_init_static(&out, bson_iter_value(&si)->value.v_doc.data, bson_iter_value(&si)->value.v_doc.data_len);
            explain_accs(&in, &out);
        } else {
            explain_count_one(&in, "count");
        }
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(&in, "_id", &sub);
        BSON_APPEND_NULL(&sub, "$const");
        bson_append_document_end(&in, &sub);
        explain_count_one(&in, s->field);
    }
    bson_append_document_end(&d, &in);
    if (nd != NULL) {
        BSON_APPEND_DOCUMENT_BEGIN(&d, "maxAccumulatorMemoryUsageBytes", &sub);
        if (s->kind == S_COUNT) {
            BSON_APPEND_INT64(&sub, s->field, nd->n_out > 0 ? (int64_t)sizeof(accst_t) : 0);
        } else {
            const stage_t *g = s->kind == S_SORTBYCOUNT ? &nd->sbc : s;
            for (size_t a = 0; a < g->naccs; a++)
                BSON_APPEND_INT64(&sub, g->accs[a].field, nd->acc_max != NULL ? nd->acc_max[a] : 0);
        }
        bson_append_document_end(&d, &sub);
        explain_spills(nd->gspill, &spills, &sdocs, &sbytes);
        BSON_APPEND_INT64(&d, "totalOutputDataSizeBytes", s->kind == S_COUNT ? 0 : nd->data_bytes);
        BSON_APPEND_BOOL(&d, "usedDisk", spills > 0);
        BSON_APPEND_INT64(&d, "spills", spills);
        BSON_APPEND_INT64(&d, "spilledDataStorageSize", sbytes);
        BSON_APPEND_INT64(&d, "numBytesSpilledEstimate", sbytes);
        BSON_APPEND_INT64(&d, "spilledRecords", sdocs);
        BSON_APPEND_INT64(&d, "nReturned", nd->n_out);
        BSON_APPEND_INT64(&d, "executionTimeMillisEstimate", nd->time_us / 1000);
    }
    bson_append_document_end(arr, &d);
    /* The $sort, or $count's $project. */
    snprintf(key, sizeof key, "%d", (*k)++);
    BSON_APPEND_DOCUMENT_BEGIN(arr, key, &d);
    if (s->kind == S_COUNT) {
        BSON_APPEND_DOCUMENT_BEGIN(&d, "$project", &in);
        BSON_APPEND_BOOL(&in, s->field, true);
        BSON_APPEND_BOOL(&in, "_id", false);
        bson_append_document_end(&d, &in);
    } else {
        BSON_APPEND_DOCUMENT_BEGIN(&d, "$sort", &in);
        BSON_APPEND_DOCUMENT_BEGIN(&in, "sortKey", &sub);
        BSON_APPEND_INT32(&sub, s->kind == S_SORTBYCOUNT ? "count" : "_id", s->kind == S_SORTBYCOUNT ? -1 : 1);
        bson_append_document_end(&in, &sub);
        bson_append_document_end(&d, &in);
        if (nd != NULL) {
            explain_spills(nd->sorter, &spills, &sdocs, &sbytes);
            BSON_APPEND_INT64(&d, "totalDataSizeSortedBytesEstimate", nd->data_bytes);
            BSON_APPEND_BOOL(&d, "usedDisk", spills > 0);
            BSON_APPEND_INT64(&d, "spills", spills);
            BSON_APPEND_INT64(&d, "spilledDataStorageSize", sbytes);
        }
    }
    if (nd != NULL) {
        BSON_APPEND_INT64(&d, "nReturned", nd->n_out);
        BSON_APPEND_INT64(&d, "executionTimeMillisEstimate", nd->time_us / 1000);
    }
    bson_append_document_end(arr, &d);
}

/* explain_current_op: a $currentOp's options in DocumentSourceCurrentOp::serialize's order, those given only. */
static void
explain_current_op(const stage_t *s, bson_t *d)
{
    static const char *const order[] = {"idleConnections", "idleSessions", "allUsers", "localOps", "truncateOps",
                                        "idleCursors", "targetAllNodes", "backtrace", NULL};
    bson_iter_t it;
    bson_t in;

    BSON_APPEND_DOCUMENT_BEGIN(d, "$currentOp", &in);
    for (int i = 0; order[i] != NULL; i++)
        if (s->spec != NULL && bson_iter_init_find(&it, s->spec, order[i]))
            bson_append_value(&in, order[i], -1, bson_iter_value(&it));
    bson_append_document_end(d, &in);
}

void
mf_pipeline_explain(const mf_pipeline_t *p, size_t first, const mf_agg_stream_t *st,
                    const mf_agg_explain_hooks_t *hooks, bson_t *arr, int *k)
{
    size_t absorbed = SIZE_MAX; /* a $limit shown inside the $sort before it */

    for (size_t i = first; i < p->n; i++) {
        const stage_t *s = &p->stages[i];
        const snode_t *nd = st != NULL && i - first < st->n ? &st->nodes[i - first] : NULL;
        int64_t spills, sdocs, sbytes;
        char key[16];
        bson_t d, in, sub;

        if (i == absorbed)
            continue;
        if (s->kind == S_DOCUMENTS) {
            explain_documents(s, nd, arr, k);
            continue;
        }
        if (s->kind == S_SORTBYCOUNT || s->kind == S_BUCKET || s->kind == S_COUNT) {
            explain_desugared(s, nd, arr, k);
            continue;
        }
        snprintf(key, sizeof key, "%d", (*k)++);
        BSON_APPEND_DOCUMENT_BEGIN(arr, key, &d);
        if (s->kind == S_SORT) {
            /*
             * $sort + $limit coalesce, and a $skip between them first lets
             * the $limit (grown by the skip) move before it (the $skip stays).
             */
            int64_t skips = 0, limit = 0;
            size_t j = i + 1;
            while (j < p->n && p->stages[j].kind == S_SKIP)
                skips += p->stages[j++].n;
            if (j < p->n && p->stages[j].kind == S_LIMIT) {
                limit = skips + p->stages[j].n;
                absorbed = j;
            }
            BSON_APPEND_DOCUMENT_BEGIN(&d, "$sort", &in);
            BSON_APPEND_DOCUMENT_BEGIN(&in, "sortKey", &sub);
            explain_sort_key(s->spec, &sub);
            bson_append_document_end(&in, &sub);
            if (limit > 0)
                BSON_APPEND_INT64(&in, "limit", limit);
            bson_append_document_end(&d, &in);
            if (nd != NULL) {
                explain_spills(nd->sorter, &spills, &sdocs, &sbytes);
                BSON_APPEND_INT64(&d, "totalDataSizeSortedBytesEstimate", nd->data_bytes);
                BSON_APPEND_BOOL(&d, "usedDisk", spills > 0);
                BSON_APPEND_INT64(&d, "spills", spills);
                BSON_APPEND_INT64(&d, "spilledDataStorageSize", sbytes);
            }
        } else if (s->kind == S_FACET) {
            explain_facet(s, nd, hooks, &d);
        } else if (s->kind == S_CURRENTOP) {
            explain_current_op(s, &d);
        } else if (s->kind == S_UNIONWITH) {
            /* The sub-pipeline explained as its own aggregate: only once the run read it (or at queryPlanner). */
            explain_union(s, hooks, st == NULL || (nd != NULL && (nd->sub != NULL || nd->done)), &d);
        } else {
            bson_concat(&d, s->raw);
        }
        if (nd == NULL) {
            bson_append_document_end(arr, &d);
            continue;
        }
        if (s->kind == S_GROUP) {
            BSON_APPEND_DOCUMENT_BEGIN(&d, "maxAccumulatorMemoryUsageBytes", &sub);
            for (size_t a = 0; a < s->naccs; a++)
                BSON_APPEND_INT64(&sub, s->accs[a].field, nd->acc_max != NULL ? nd->acc_max[a] : 0);
            bson_append_document_end(&d, &sub);
            explain_spills(nd->gspill, &spills, &sdocs, &sbytes);
            BSON_APPEND_INT64(&d, "totalOutputDataSizeBytes", nd->data_bytes);
            BSON_APPEND_BOOL(&d, "usedDisk", spills > 0);
            BSON_APPEND_INT64(&d, "spills", spills);
            BSON_APPEND_INT64(&d, "spilledDataStorageSize", sbytes);
            BSON_APPEND_INT64(&d, "numBytesSpilledEstimate", sbytes);
            BSON_APPEND_INT64(&d, "spilledRecords", sdocs);
        } else if (s->kind == S_LOOKUP) {
            BSON_APPEND_INT64(&d, "totalDocsExamined", nd->scan.docs_examined);
            BSON_APPEND_INT64(&d, "totalKeysExamined", nd->scan.keys_examined);
            BSON_APPEND_INT64(&d, "collectionScans", nd->scan.collection_scans);
            BSON_APPEND_ARRAY_BEGIN(&d, "indexesUsed", &sub);
            for (size_t x = 0; x < nd->scan.nindexes; x++) {
                char ik[24];
                snprintf(ik, sizeof ik, "%zu", x);
                BSON_APPEND_UTF8(&sub, ik, nd->scan.indexes[x]);
            }
            bson_append_array_end(&d, &sub);
        }
        /* Under explain a writing stage writes nothing and returns nothing (DocumentSourceWriter::doGetNext). */
        BSON_APPEND_INT64(&d, "nReturned", s->kind == S_OUT || s->kind == S_MERGE ? 0 : nd->n_out);
        BSON_APPEND_INT64(&d, "executionTimeMillisEstimate", nd->time_us / 1000);
        bson_append_document_end(arr, &d);
    }
}
