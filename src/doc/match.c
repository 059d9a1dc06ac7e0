/*
 * match.c: the query matcher (see match.h).
 *
 * Design: mf_matcher_new parses the filter once into a tree of nodes.
 * Logical nodes ($and, $or, $nor, negation) hold children; leaf nodes hold a
 * path (or NULL, meaning "the value under test", used by $elemMatch value
 * form and by operator-only filters of mf_matcher_new_value) and an owned
 * copy of their operand. Negated operators are built from positive ones:
 * $ne = NOT $eq, $nin = NOT $in, $exists:false = NOT exists, $not = NOT of
 * the operator conjunction. Regexes are compiled with pcre2 at parse time and
 * only matched afterwards. A $in list is sorted in BSON order and
 * de-duplicated at parse time, so testing a value is a binary search
 * (O(log n) per value, whatever the list size); its regexes are kept apart
 * and tried as patterns. A $or whose branches are all equalities or $in on
 * one path is parsed as one $in, as MongoDB rewrites it.
 *
 * Matching a leaf with a path walks the document with mf_path_walk; each
 * value reached is tested as is, and, for the operators MongoDB applies to
 * array elements (comparisons, $in, $regex, $type, $mod, the $bits* tests), each element of a
 * reached array is tested too. A missing field is tested as "missing", which
 * only null equality ($eq/$lte/$gte/$in with null) and negations accept.
 * Comparisons are type-bracketed: values of different canonical types never
 * compare, except that MinKey/MaxKey operands bound everything, and NaN only
 * equals NaN.
 *
 * The positional "$" (updates, find projections) is the array position the
 * match records, as mongod's MatchDetails elemMatchKey over its normalized
 * tree (MatchExpression::normalize: nested $and / $or flattened, siblings
 * stably sorted by match type, then path): mf_matcher_new ranks each
 * $and's and $or's children so (prepare_order). An $and evaluates in the
 * filter's order and keeps the position of its array-matching child last
 * in that order (each child overwrites the key in mongod). An $or's
 * equalities and regexes on one path are one $in whose position is the
 * first element matching any (7.0's or-to-in); an $or that is one unit so
 * (or has one child) records that unit's position, any other none (mongod's
 * OrMatchExpression gives its children no MatchDetails).
 *
 * Invariants: the tree owns everything it points to (paths, values, compiled
 * regexes, child nodes, $expr trees; the prepared orders borrow child
 * pointers); parsing recursion is bounded by kMaxDepth so hostile filters
 * cannot exhaust the stack; matching never allocates except pcre2 match
 * data and static bson_t views.
 */
#include "common/alloc.h"
#include "doc/match.h"
#include "common/fmt.h"
#include "common/limits.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "doc/rx.h"
#include "doc/collation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doc/expr.h"
#include "doc/geo.h"
#include "doc/jsonschema.h"
#include "doc/value.h"
#include "doc/text.h"
#include "doc/path.h"

enum { kMaxDepth = 100 };

typedef enum kind {
    K_AND,
    K_OR,
    K_NOR,
    K_NOT,
    K_TRUE,
    K_FALSE,
    K_EXPR,
    K_SCHEMA,
    K_SAMPLE,
    /* Leaves below; the first group traverses array elements. */
    K_EQ,
    K_LT,
    K_LTE,
    K_GT,
    K_GTE,
    K_IN,
    K_REGEX,
    K_TYPE,
    K_MOD,
    K_BITS_ALL_SET,
    K_BITS_ALL_CLEAR,
    K_BITS_ANY_SET,
    K_BITS_ANY_CLEAR,
    K_GEO, /* $geoWithin $geoIntersects $near $nearSphere (doc/geo.h) */
    /* Leaves that look at the reached value only. */
    K_EXISTS,
    K_SIZE,
    K_ELEM_OBJ,
    K_ELEM_VAL,
} kind_t;

typedef struct rx {
    pcre2_code *code;
    pcre2_match_context *mc; /* the match budget (rx.h), made once: matches only read it */
    char *pattern; /* owned */
    char *flags;   /* owned, sorted as given */
} rx_t;

typedef struct node node_t;
struct node {
    kind_t kind;
    char *path;       /* owned; NULL means the value under test */
    bson_value_t val; /* owned operand of comparisons (EOD when unused) */
    rx_t *rx;         /* K_REGEX */
    /* K_IN: equality values and regexes. */
    bson_value_t *vals;
    size_t nvals;
    rx_t **rxs;
    size_t nrxs;
    bool has_null;
    /* K_TYPE */
    int types[32];
    int ntypes;
    bool type_number;
    /* K_SIZE: -1 never matches. */
    int64_t size;
    /* K_MOD */
    int64_t divisor, remainder;
    /* K_SAMPLE: the probability of matching, in (0, 1). */
    double rate;
    /* K_BITS_*: the mask numbers are tested with, the positions BinData is tested at. */
    uint64_t bitmask;
    uint32_t *bitpos;
    size_t nbitpos;
    /* Logical nodes, K_ELEM_OBJ (one child: the sub-filter), K_ELEM_VAL. */
    node_t **kids;
    size_t nkids;
    size_t capkids;
    mf_expr_t *expr; /* K_EXPR */
    mf_jsonschema_t *schema; /* K_SCHEMA */
    mf_geo_query_t *geo;     /* K_GEO */
    /*
     * K_AND / K_OR of a prepared matcher (prepare_order): the children with
     * nested nodes of the same kind spliced in, in the filter's order (flat,
     * borrowed pointers); a K_AND's each one's place in mongod's normalized
     * order (rank; sortTree's stable sort); a K_OR's children unit by unit in
     * that order (sorted, ulen, nunits), and or_in: one unit, an $in (mongod
     * 7.0+ rewrites equalities and regexes on one path to $in). NULL / 0 when
     * not prepared.
     */
    node_t **flat;
    size_t nflat;
    size_t *rank;
    node_t **sorted;
    size_t *ulen;  /* K_OR: the sizes of the units sorted holds one after another (an $in group, or 1) */
    size_t nunits;
    bool or_in;    /* K_OR: one unit, an $in */
    /*
     * Kept for the read-only view (mf_match_node_view) only, never read by
     * matching: what a node was written as (shown: a $text or $sampleRate
     * that became K_TRUE / K_FALSE / K_SAMPLE; val holds the operand of
     * $text, $expr and $jsonSchema and the operator document of a geo
     * leaf), and of a K_IN made by or_to_in, whether it was (or_merged) and
     * the $or branches it absorbed when one of them was an $in (orig).
     */
    unsigned char shown;
    bool or_merged;
    node_t **orig;
    size_t norig;
};

enum { SHOWN_AS_IS = 0, SHOWN_TEXT, SHOWN_SAMPLE };

struct mf_matcher {
    node_t *root;
    bool value_mode; /* root applies to a bare value (operator-only filter) */
    bool objects_only; /* a $pull condition of fields: only documents match, never arrays */
};

/*
 * The first $expr evaluation failure on this thread since the last
 * mf_matcher_take_failure: the match was false, and the query that asked
 * fails with this error (as mongod's matchers throw).
 */
static __thread bool expr_failed;
static __thread mf_error_t expr_failure;

bool
mf_matcher_take_failure(mf_error_t *err)
{
    if (!expr_failed)
        return false;
    expr_failed = false;
    if (err != NULL)
        *err = expr_failure;
    return true;
}


/* ---- node construction ---- */

static node_t *
node_new(kind_t kind, const char *path)
{
    node_t *n = mf_calloc(1, sizeof(*n));

    if (n == NULL)
        abort();
    n->kind = kind;
    n->path = path ? bson_strdup(path) : NULL;
    n->val.value_type = BSON_TYPE_EOD;
    return n;
}

static void
rx_free(rx_t *r)
{
    if (r == NULL)
        return;
    pcre2_code_free(r->code);
    pcre2_match_context_free(r->mc);
    bson_free(r->pattern);
    bson_free(r->flags);
    free(r);
}

static void
node_free(node_t *n)
{
    if (n == NULL)
        return;
    bson_free(n->path);
    if (n->val.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&n->val);
    rx_free(n->rx);
    for (size_t i = 0; i < n->nvals; i++)
        bson_value_destroy(&n->vals[i]);
    free(n->vals);
    for (size_t i = 0; i < n->nrxs; i++)
        rx_free(n->rxs[i]);
    free(n->rxs);
    free(n->bitpos);
    for (size_t i = 0; i < n->nkids; i++)
        node_free(n->kids[i]);
    free(n->kids);
    free(n->flat);
    free(n->rank);
    free(n->sorted);
    free(n->ulen);
    for (size_t i = 0; i < n->norig; i++)
        node_free(n->orig[i]);
    free(n->orig);
    if (n->expr)
        mf_expr_free(n->expr);
    mf_jsonschema_free(n->schema);
    mf_geo_query_free(n->geo);
    free(n);
}

static void
node_add(node_t *parent, node_t *kid)
{
    if (parent->nkids == parent->capkids) {
        size_t cap = parent->capkids ? parent->capkids * 2 : 4;
        node_t **k = mf_realloc(parent->kids, cap * sizeof(*k));
        if (k == NULL)
            abort();
        parent->kids = k;
        parent->capkids = cap;
    }
    parent->kids[parent->nkids++] = kid;
}

static node_t *
node_not(node_t *kid)
{
    node_t *n = node_new(K_NOT, NULL);
    node_add(n, kid);
    return n;
}

/* ---- regexes ---- */

/*
 * rx_compile: compiles pattern with MongoDB's flags (i, m, s, x, u). Returns
 * NULL and fills err on a bad flag (51108) or a bad pattern (51091).
 */
static rx_t *
rx_compile(const char *pattern, size_t plen, const char *flags, mf_error_t *err)
{
    uint32_t opts = PCRE2_UTF;
    int errcode;
    PCRE2_SIZE erroff;
    rx_t *r;

    for (const char *f = flags; *f; f++) {
        switch (*f) {
        case 'i':
            opts |= PCRE2_CASELESS;
            break;
        case 'm':
            opts |= PCRE2_MULTILINE;
            break;
        case 's':
            opts |= PCRE2_DOTALL;
            break;
        case 'x':
            opts |= PCRE2_EXTENDED;
            break;
        case 'u':
            break;
        default:
            /* mongod's pcre_util::flagsToOptions with an empty operator name: a leading space. */
            mf_err_set(err, MF_E_Location51108, " invalid flag in regex options: %c", *f);
            return NULL;
        }
    }
    if (memchr(pattern, '\0', plen) != NULL) {
        mf_err_set(err, MF_E_Location51091,
                   "Regular expression cannot contain an embedded null byte");
        return NULL;
    }
    if (plen > MF_MAX_REGEX_LENGTH) {
        mf_err_set(err, MF_E_Location51091, "Regular expression is invalid: pattern string is too long");
        return NULL;
    }
    r = mf_calloc(1, sizeof(*r));
    if (r == NULL)
        abort();
    r->code = pcre2_compile((PCRE2_SPTR)pattern, plen, opts, &errcode, &erroff, NULL);
    if (r->code == NULL) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(errcode, buf, sizeof(buf));
        mf_err_set(err, MF_E_Location51091, "Regular expression is invalid: %s", (char *)buf);
        free(r);
        return NULL;
    }
    r->mc = mf_rx_context();
    r->pattern = bson_strndup(pattern, plen);
    r->flags = bson_strdup(flags);
    return r;
}

static bool
rx_match_str(const rx_t *r, const char *s, size_t len)
{
    /* Past the backtracking budget (rx.h) a string does not match, as mongod treats a failed match. */
    return mf_rx_match(r->code, r->mc, s, len, NULL) == 1;
}

/* rx_match_value: a regex matches strings and symbols by content, and a regex value equal to itself. */
static bool
rx_match_value(const rx_t *r, const bson_value_t *v)
{
    if (v == NULL)
        return false;
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        return rx_match_str(r, v->value.v_utf8.str, v->value.v_utf8.len);
    case BSON_TYPE_SYMBOL:
        return rx_match_str(r, v->value.v_symbol.symbol, v->value.v_symbol.len);
    case BSON_TYPE_REGEX:
        return strcmp(v->value.v_regex.regex, r->pattern) == 0 &&
               strcmp(v->value.v_regex.options ? v->value.v_regex.options : "", r->flags) == 0;
    default:
        return false;
    }
}

/* ---- parsing ---- */

/* parse_filter flags: inside an $elemMatch (mongod's kUserSubDocument level); special features banned. */
enum { P_SUB = 1, P_BAN = 2, P_TEXT_FALSE = 4 };

static node_t *parse_filter(const uint8_t *data, uint32_t len, int depth, unsigned flags, mf_error_t *err);
static int parse_ops(node_t *out, const char *path, const bson_value_t *opdoc, int depth,
                     bool elem_value, mf_error_t *err);

static bool
is_dbref_key(const char *k)
{
    return strcmp(k, "$ref") == 0 || strcmp(k, "$id") == 0 || strcmp(k, "$db") == 0;
}

/* first_key: the first field name of a document value, or NULL if empty. */
static const char *
first_key(const bson_value_t *v, bson_iter_t *it)
{
    if (v->value_type != BSON_TYPE_DOCUMENT ||
        !bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len) ||
        !bson_iter_next(it))
        return NULL;
    return bson_iter_key(it);
}

/* is_operator_doc: a document whose first field is a $-operator (not a DBRef). */
static bool
is_operator_doc(const bson_value_t *v)
{
    bson_iter_t it;
    const char *k = first_key(v, &it);

    return k != NULL && k[0] == '$' && !is_dbref_key(k);
}

static bool
is_pathless_op(const char *k)
{
    static const char *const ops[] = {"$and", "$or", "$nor", "$where", "$expr", "$comment",
                                      "$alwaysTrue", "$alwaysFalse", "$jsonSchema", "$text",
                                      "$sampleRate"};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (strcmp(k, ops[i]) == 0)
            return true;
    return false;
}

static node_t *
leaf_value(kind_t kind, const char *path, const bson_value_t *v)
{
    node_t *n = node_new(kind, path);
    bson_value_copy(v, &n->val);
    return n;
}

/* regex_from_value: a K_REGEX leaf for a BSON regex value. */
static node_t *
regex_leaf(const char *path, const char *pattern, size_t plen, const char *flags, mf_error_t *err)
{
    rx_t *r = rx_compile(pattern, plen, flags ? flags : "", err);
    node_t *n;

    if (r == NULL)
        return NULL;
    n = node_new(K_REGEX, path);
    n->rx = r;
    return n;
}

static int
in_val_cmp(const void *a, const void *b)
{
    return mf_value_cmp(a, b);
}

/*
 * in_finish: sorts n's equality values in BSON order and drops duplicates, so
 * that in_has is a binary search. mf_value_cmp orders numbers by value across
 * int32/int64/double/decimal128 (1, 1.0 and NumberLong(1) are one entry), and
 * two values compare equal exactly when compare_ok(K_EQ) accepts them, so the
 * lookup keeps $in's equality semantics.
 */
static void
in_finish(node_t *n)
{
    size_t k = 0;

    if (n->nvals < 2)
        return;
    qsort(n->vals, n->nvals, sizeof(*n->vals), in_val_cmp);
    for (size_t i = 0; i < n->nvals; i++) {
        if (k > 0 && mf_value_cmp(&n->vals[k - 1], &n->vals[i]) == 0) {
            bson_value_destroy(&n->vals[i]);
            continue;
        }
        n->vals[k++] = n->vals[i];
    }
    n->nvals = k;
}

/* in_has: whether v equals one of n's (sorted) equality values; O(log n). */
static bool
in_has(const node_t *n, const bson_value_t *v)
{
    size_t lo = 0, hi = n->nvals;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = mf_value_cmp(&n->vals[mid], v);
        if (c == 0)
            return true;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* parse_in: fills a K_IN node from an array operand of $in / $nin. */
static node_t *
parse_in(const char *path, const bson_value_t *arr, mf_error_t *err)
{
    bson_iter_t it;
    node_t *n;
    uint32_t count = 0;

    if (arr->value_type != BSON_TYPE_ARRAY) {
        mf_err_set(err, MF_E_BadValue, "$in needs an array");
        return NULL;
    }
    if (!bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len)) {
        mf_err_set(err, MF_E_BadValue, "$in needs an array");
        return NULL;
    }
    while (bson_iter_next(&it))
        count++;
    n = node_new(K_IN, path);
    n->vals = mf_calloc(count ? count : 1, sizeof(*n->vals));
    n->rxs = mf_calloc(count ? count : 1, sizeof(*n->rxs));
    if (n->vals == NULL || n->rxs == NULL)
        abort();
    bson_iter_init_from_data(&it, arr->value.v_doc.data, arr->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const bson_value_t *e = bson_iter_value(&it);
        if (e->value_type == BSON_TYPE_REGEX) {
            rx_t *r = rx_compile(e->value.v_regex.regex, strlen(e->value.v_regex.regex),
                                 e->value.v_regex.options ? e->value.v_regex.options : "", err);
            if (r == NULL) {
                node_free(n);
                return NULL;
            }
            n->rxs[n->nrxs++] = r;
        } else {
            if (is_operator_doc(e)) {
                mf_err_set(err, MF_E_BadValue, "cannot nest $ under $in");
                node_free(n);
                return NULL;
            }
            if (e->value_type == BSON_TYPE_NULL)
                n->has_null = true;
            bson_value_copy(e, &n->vals[n->nvals++]);
        }
    }
    in_finish(n);
    return n;
}

static int
add_type(node_t *n, const bson_value_t *v, mf_error_t *err)
{
    if (v->value_type == BSON_TYPE_UTF8) {
        int t = mf_type_alias(v->value.v_utf8.str);
        if (t == -1)
            return mf_err_set(err, MF_E_BadValue, "Unknown type name alias: %s",
                              v->value.v_utf8.str);
        if (t == -2)
            n->type_number = true;
        else if (n->ntypes < 32)
            n->types[n->ntypes++] = t;
        return 0;
    }
    if (mf_value_is_number(v)) {
        int64_t code;
        double d = mf_value_as_double(v);
        if (!mf_value_as_int64(v, &code))
            return mf_err_set(err, MF_E_BadValue, "Invalid numerical type code: %g", d);
        if (code == 0)
            return mf_err_set(err, MF_E_BadValue,
                              "Invalid numerical type code: 0. Instead use {$exists:false}.");
        if (code == -1 || code == 127 || (code >= 1 && code <= 19)) {
            if (n->ntypes < 32)
                n->types[n->ntypes++] = code == -1 ? BSON_TYPE_MINKEY
                                        : code == 127 ? BSON_TYPE_MAXKEY
                                                      : (int)code;
            return 0;
        }
        return mf_err_set(err, MF_E_BadValue, "Invalid numerical type code: %lld",
                          (long long)code);
    }
    return mf_err_set(err, MF_E_TypeMismatch,
                      "type must be represented as a number or a string");
}

static node_t *
parse_type(const char *path, const bson_value_t *v, mf_error_t *err)
{
    node_t *n = node_new(K_TYPE, path);

    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
            while (bson_iter_next(&it)) {
                if (add_type(n, bson_iter_value(&it), err) < 0) {
                    node_free(n);
                    return NULL;
                }
            }
        }
        if (n->ntypes == 0 && !n->type_number) {
            node_free(n);
            mf_err_set(err, MF_E_FailedToParse, "%s must match at least one type", "$type");
            return NULL;
        }
        return n;
    }
    if (add_type(n, v, err) < 0) {
        node_free(n);
        return NULL;
    }
    return n;
}

/* ---- integer operands, shown in errors as mongod shows them ---- */

/*
 * fmt_elem: "name: value" as mongod's BSONElement::toString(true, true) writes
 * an element in parse errors: doubles as StringBuilder::appendDoubleNice
 * (%.16g, ".0" appended unless the text has '.', 'E' or 'N'), BinData as
 * BinData(subtype, HEX), everything else as common/fmt.h renders it.
 */
static void
fmt_elem(char *buf, size_t size, const char *name, const bson_value_t *v)
{
    char val[200];

    switch (v->value_type) {
    case BSON_TYPE_DOUBLE: {
        char num[40];
        snprintf(num, sizeof(num), "%.16g", v->value.v_double);
        snprintf(val, sizeof(val), "%s%s", num, strchr(num, '.') || strchr(num, 'E') || strchr(num, 'N') ? "" : ".0");
        break;
    }
    case BSON_TYPE_BINARY: {
        static const char hex[] = "0123456789ABCDEF";
        uint32_t len = v->value.v_binary.data_len, shown = len > 80 ? 70 : len;
        size_t k = (size_t)snprintf(val, sizeof(val), "BinData(%d, ", (int)v->value.v_binary.subtype);
        for (uint32_t i = 0; i < shown && k + 6 < sizeof(val); i++) {
            val[k++] = hex[v->value.v_binary.data[i] >> 4];
            val[k++] = hex[v->value.v_binary.data[i] & 15];
        }
        snprintf(val + k, sizeof(val) - k, "%s)", shown < len ? "..." : "");
        break;
    }
    default:
        mf_fmt_value(v, val, sizeof(val));
        break;
    }
    snprintf(buf, size, "%s: %s", name, val);
}

/*
 * int64_operand: mongod's BSONElement::parseIntegerElementToLong for an
 * operand shown as "name: value": a number holding an exact 64-bit integer.
 * Fails with 9 FailedToParse and mongod's message, prefixed by prefix.
 */
static int
int64_operand(const char *prefix, const char *name, const bson_value_t *v, int64_t *out, mf_error_t *err)
{
    char shown[256];

    fmt_elem(shown, sizeof(shown), name, v);
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_FailedToParse, "%sExpected a number in: %s", prefix, shown);
    if (v->value_type == BSON_TYPE_DOUBLE) {
        double d = v->value.v_double;
        if (isnan(d))
            return mf_err_set(err, MF_E_FailedToParse, "%sExpected an integer, but found NaN in: %s", prefix, shown);
        if (d >= 9223372036854775808.0 || d < -9223372036854775808.0)
            return mf_err_set(err, MF_E_FailedToParse, "%sCannot represent as a 64-bit integer: %s", prefix, shown);
        if (d != trunc(d))
            return mf_err_set(err, MF_E_FailedToParse, "%sExpected an integer: %s", prefix, shown);
        *out = (int64_t)d;
        return 0;
    }
    if (!mf_value_as_int64(v, out))
        return mf_err_set(err, MF_E_FailedToParse, "%sCannot represent as a 64-bit integer: %s", prefix, shown);
    return 0;
}

int
mf_match_parse_long(const char *prefix, const char *name, const bson_value_t *v, bool non_negative,
                    int64_t *out, mf_error_t *err)
{
    char shown[256];

    if (int64_operand(prefix, name, v, out, err) < 0)
        return -1;
    if (non_negative && *out < 0) {
        fmt_elem(shown, sizeof(shown), name, v);
        return mf_err_set(err, MF_E_FailedToParse, "%sExpected a non-negative number in: %s", prefix, shown);
    }
    return 0;
}

/*
 * parse_size: $size takes a non-negative 32-bit integer (a whole double or
 * decimal too); anything else is 2 BadValue "Failed to parse $size. ...",
 * as mongod's parseIntegerElementToNonNegativeInt reports it.
 */
static node_t *
parse_size(const char *path, const bson_value_t *v, mf_error_t *err)
{
    const char *prefix = "Failed to parse $size. ";
    char shown[256];
    node_t *n;
    int64_t sz;

    if (int64_operand(prefix, "$size", v, &sz, err) < 0) {
        if (err != NULL)
            err->code = MF_E_BadValue;
        return NULL;
    }
    fmt_elem(shown, sizeof(shown), "$size", v);
    if (sz < INT32_MIN || sz > INT32_MAX) {
        mf_err_set(err, MF_E_BadValue, "%sCannot represent %s in an int", prefix, shown);
        return NULL;
    }
    if (sz < 0) {
        mf_err_set(err, MF_E_BadValue, "%sExpected a non-negative number in: %s", prefix, shown);
        return NULL;
    }
    n = node_new(K_SIZE, path);
    n->size = sz;
    return n;
}

/* mod_operand: an int64 from a $mod operand, truncating doubles toward zero. */
static int
mod_operand(const bson_value_t *v, const char *what, int64_t *out, mf_error_t *err)
{
    double d;

    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_BadValue, "malformed mod, %s not a number", what);
    if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) {
        mf_value_as_int64(v, out);
        return 0;
    }
    d = mf_value_as_double(v);
    if (isnan(d) || isinf(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0)
        return mf_err_set(err, MF_E_BadValue,
                          "malformed mod, %s value is invalid :: caused by :: Out of bounds "
                          "coercing to integral value",
                          what);
    *out = (int64_t)trunc(d);
    return 0;
}

/*
 * parse_mod: {$mod: [divisor, remainder]}, checked in mongod's order (the
 * element count and each element's type as they are read), all 2 BadValue.
 */
static node_t *
parse_mod(const char *path, const bson_value_t *v, mf_error_t *err)
{
    static const char *const what[2] = {"divisor", "remainder"};
    bson_iter_t it;
    bson_value_t parts[2];
    node_t *n;
    int64_t d, r;

    if (v->value_type != BSON_TYPE_ARRAY ||
        !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        mf_err_set(err, MF_E_BadValue, "malformed mod, needs to be an array");
        return NULL;
    }
    for (int i = 0; i < 2; i++) {
        if (!bson_iter_next(&it)) {
            mf_err_set(err, MF_E_BadValue, "malformed mod, not enough elements");
            return NULL;
        }
        parts[i] = *bson_iter_value(&it);
        if (!mf_value_is_number(&parts[i])) {
            mf_err_set(err, MF_E_BadValue, "malformed mod, %s not a number", what[i]);
            return NULL;
        }
    }
    if (bson_iter_next(&it)) {
        mf_err_set(err, MF_E_BadValue, "malformed mod, too many elements");
        return NULL;
    }
    if (mod_operand(&parts[0], what[0], &d, err) < 0 || mod_operand(&parts[1], what[1], &r, err) < 0)
        return NULL;
    if (d == 0) {
        mf_err_set(err, MF_E_BadValue, "divisor cannot be 0");
        return NULL;
    }
    n = node_new(K_MOD, path);
    n->divisor = d;
    n->remainder = r;
    return n;
}

/* ---- bit tests ($bitsAllSet, $bitsAllClear, $bitsAnySet, $bitsAnyClear) ---- */

/* bits_push: appends a bit position; n->bitpos was sized by the caller. */
static void
bits_push(node_t *n, uint32_t pos)
{
    n->bitpos[n->nbitpos++] = pos;
}

/*
 * parse_bits: a bit test leaf. The operand is an array of bit positions
 * (non-negative 32-bit integers; else 2 BadValue "Failed to parse bit
 * position. ..."), a non-negative 64-bit integer mask (else 9 FailedToParse)
 * or a BinData mask (little-endian bytes); anything else is 2 BadValue. As in
 * mongod, a position past 63 tests a number's sign bit (numbers are
 * sign-extended), and a BinData mask's first eight bytes form the numeric
 * mask with each byte sign-extended as a C char (so a byte >= 0x80 also sets
 * every higher bit), a non-zero byte past the eighth setting the sign bit.
 * A BinData mask is kept as its bytes (in n->val), not expanded into bit
 * positions, so a large mask costs its own size and no more.
 */
static node_t *
parse_bits(kind_t kind, const char *op, const char *path, const bson_value_t *v, mf_error_t *err)
{
    node_t *n = node_new(kind, path);

    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        size_t count = 0;
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
            while (bson_iter_next(&it))
                count++;
        }
        n->bitpos = mf_calloc(count ? count : 1, sizeof(*n->bitpos));
        if (n->bitpos == NULL)
            abort();
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
            while (bson_iter_next(&it)) {
                const bson_value_t *e = bson_iter_value(&it);
                char shown[256];
                int64_t pos;
                if (int64_operand("Failed to parse bit position. ", bson_iter_key(&it), e, &pos, err) < 0) {
                    if (err != NULL)
                        err->code = MF_E_BadValue; /* mongod wraps the parse error in BadValue */
                    goto err_free_node;
                }
                fmt_elem(shown, sizeof(shown), bson_iter_key(&it), e);
                if (pos < INT32_MIN || pos > INT32_MAX) {
                    mf_err_set(err, MF_E_BadValue, "Failed to parse bit position. Cannot represent %s in an int",
                               shown);
                    goto err_free_node;
                }
                if (pos < 0) {
                    mf_err_set(err, MF_E_BadValue,
                               "Failed to parse bit position. Expected a non-negative number in: %s", shown);
                    goto err_free_node;
                }
                bits_push(n, (uint32_t)pos);
                n->bitmask |= 1ULL << (pos > 63 ? 63 : pos);
            }
        }
        return n;
    }
    if (mf_value_is_number(v)) {
        int64_t mask;
        if (int64_operand("", op, v, &mask, err) < 0)
            goto err_free_node;
        if (mask < 0) {
            char shown[256];
            fmt_elem(shown, sizeof(shown), op, v);
            mf_err_set(err, MF_E_FailedToParse, "Expected a non-negative number in: %s", shown);
            goto err_free_node;
        }
        n->bitmask = (uint64_t)mask;
        n->bitpos = mf_calloc(64, sizeof(*n->bitpos));
        if (n->bitpos == NULL)
            abort();
        for (uint32_t b = 0; b < 64; b++)
            if (n->bitmask & (1ULL << b))
                bits_push(n, b);
        return n;
    }
    if (v->value_type == BSON_TYPE_BINARY) {
        const uint8_t *data = v->value.v_binary.data;
        for (uint32_t i = 0; i < v->value.v_binary.data_len; i++) {
            if (data[i] == 0)
                continue;
            if (i < 8)
                n->bitmask |= (uint64_t)(int64_t)(int8_t)data[i] << (i * 8);
            else
                n->bitmask |= 1ULL << 63;
        }
        bson_value_copy(v, &n->val);
        return n;
    }
    {
        char shown[256];
        fmt_elem(shown, sizeof(shown), op, v);
        /* mongod names the path here ("" in an $elemMatch value form), and the operator in the value. */
        mf_err_set(err, MF_E_BadValue, "%s takes an Array, a number, or a BinData but received: %s",
                   path ? path : "", shown);
    }
err_free_node:
    node_free(n);
    return NULL;
}

/* parse_all: $all: AND of equalities/regexes, or AND of $elemMatch nodes. */
static node_t *
parse_all(const char *path, const bson_value_t *v, int depth, mf_error_t *err)
{
    bson_iter_t it;
    node_t *n;
    int elem = 0, other = 0;

    if (v->value_type != BSON_TYPE_ARRAY) {
        mf_err_set(err, MF_E_BadValue, "$all needs an array");
        return NULL;
    }
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        mf_err_set(err, MF_E_BadValue, "$all needs an array");
        return NULL;
    }
    while (bson_iter_next(&it)) {
        bson_iter_t sub;
        const char *k = first_key(bson_iter_value(&it), &sub);
        if (k && strcmp(k, "$elemMatch") == 0)
            elem++;
        else
            other++;
    }
    if (elem && other) {
        mf_err_set(err, MF_E_BadValue, "$all/$elemMatch has to be consistent");
        return NULL;
    }
    if (elem + other == 0)
        return node_new(K_FALSE, NULL);
    n = node_new(K_AND, NULL);
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const bson_value_t *e = bson_iter_value(&it);
        if (elem) {
            if (parse_ops(n, path, e, depth, false, err) < 0) {
                node_free(n);
                return NULL;
            }
        } else if (e->value_type == BSON_TYPE_REGEX) {
            node_t *r = regex_leaf(path, e->value.v_regex.regex, strlen(e->value.v_regex.regex),
                                   e->value.v_regex.options, err);
            if (r == NULL) {
                node_free(n);
                return NULL;
            }
            node_add(n, r);
        } else {
            if (is_operator_doc(e)) {
                mf_err_set(err, MF_E_BadValue, "no $ expressions in $all");
                node_free(n);
                return NULL;
            }
            node_add(n, leaf_value(K_EQ, path, e));
        }
    }
    return n;
}

static node_t *
parse_elem_match(const char *path, const bson_value_t *v, int depth, mf_error_t *err)
{
    bson_iter_t it;
    const char *k;
    node_t *n;

    if (v->value_type != BSON_TYPE_DOCUMENT) {
        mf_err_set(err, MF_E_BadValue, "$elemMatch needs an Object");
        return NULL;
    }
    if (depth + 1 > kMaxDepth) {
        mf_err_set(err, MF_E_BadValue, "exceeded maximum query tree depth of %d", kMaxDepth);
        return NULL;
    }
    k = first_key(v, &it);
    if (k != NULL && k[0] == '$' && !is_dbref_key(k) && !is_pathless_op(k)) {
        n = node_new(K_ELEM_VAL, path);
        if (parse_ops(n, NULL, v, depth + 1, true, err) < 0) {
            node_free(n);
            return NULL;
        }
        return n;
    }
    {
        node_t *sub = parse_filter(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1, P_SUB, err);
        if (sub == NULL)
            return NULL;
        n = node_new(K_ELEM_OBJ, path);
        node_add(n, sub);
        return n;
    }
}

/* parse_not: $not with a regex or an operator document, at path. */
static node_t *
parse_not(const char *path, const bson_value_t *v, int depth, mf_error_t *err)
{
    node_t *inner;

    if (v->value_type == BSON_TYPE_REGEX) {
        inner = regex_leaf(path, v->value.v_regex.regex, strlen(v->value.v_regex.regex),
                           v->value.v_regex.options, err);
        return inner ? node_not(inner) : NULL;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT) {
        mf_err_set(err, MF_E_BadValue, "$not needs a regex or a document");
        return NULL;
    }
    if (v->value.v_doc.data_len <= 5) {
        mf_err_set(err, MF_E_BadValue, "$not cannot be empty");
        return NULL;
    }
    if (depth + 1 > kMaxDepth) {
        mf_err_set(err, MF_E_BadValue, "exceeded maximum query tree depth of %d", kMaxDepth);
        return NULL;
    }
    {
        bson_iter_t it;
        const char *k = first_key(v, &it);
        if (k == NULL || k[0] != '$' || is_dbref_key(k)) {
            mf_err_set(err, MF_E_BadValue, "unknown operator: %s", k ? k : "");
            return NULL;
        }
    }
    inner = node_new(K_AND, NULL);
    if (parse_ops(inner, path, v, depth + 1, false, err) < 0) {
        node_free(inner);
        return NULL;
    }
    return node_not(inner);
}

bool
mf_match_opdoc_has_near(const bson_value_t *opdoc)
{
    bson_iter_t it;
    if (opdoc->value_type != BSON_TYPE_DOCUMENT ||
        !bson_iter_init_from_data(&it, opdoc->value.v_doc.data, opdoc->value.v_doc.data_len))
        return false;
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "$near") == 0 || strcmp(bson_iter_key(&it), "$nearSphere") == 0)
            return true;
    return false;
}

/*
 * parse_ops: parses an operator document ({$gt: 1, $lt: 5}) applying to path
 * and appends one node per operator to out. elem_value is true inside an
 * $elemMatch value form (where only operators are allowed). Returns 0 / -1.
 */
static int
parse_ops(node_t *out, const char *path, const bson_value_t *opdoc, int depth, bool elem_value,
          mf_error_t *err)
{
    bson_iter_t it;
    bson_value_t regex_copy; /* shallow: the iterator's value is overwritten on next() */
    const bson_value_t *regex_v = NULL;
    const char *options = ""; /* the regex flags read so far, from $regex or $options */
    bool have_options = false;

    if (!bson_iter_init_from_data(&it, opdoc->value.v_doc.data, opdoc->value.v_doc.data_len))
        return mf_err_set(err, MF_E_BadValue, "invalid operator document");
    while (bson_iter_next(&it)) {
        const char *op = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        node_t *n = NULL;

        if (op[0] != '$')
            return mf_err_set(err, MF_E_BadValue, "unknown operator: %s", op);
        if (strcmp(op, "$eq") == 0) {
            n = leaf_value(K_EQ, path, v);
        } else if (strcmp(op, "$ne") == 0) {
            if (v->value_type == BSON_TYPE_REGEX)
                return mf_err_set(err, MF_E_BadValue, "Can't have regex as arg to $ne.");
            n = node_not(leaf_value(K_EQ, path, v));
        } else if ((strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 || strcmp(op, "$lt") == 0 ||
                    strcmp(op, "$lte") == 0) &&
                   v->value_type == BSON_TYPE_REGEX) {
            return mf_err_set(err, MF_E_BadValue, "Can't have RegEx as arg to predicate over field '%s'.",
                              path ? path : "");
        } else if (strcmp(op, "$gt") == 0) {
            n = leaf_value(K_GT, path, v);
        } else if (strcmp(op, "$gte") == 0) {
            n = leaf_value(K_GTE, path, v);
        } else if (strcmp(op, "$lt") == 0) {
            n = leaf_value(K_LT, path, v);
        } else if (strcmp(op, "$lte") == 0) {
            n = leaf_value(K_LTE, path, v);
        } else if (strcmp(op, "$in") == 0) {
            n = parse_in(path, v, err);
        } else if (strcmp(op, "$nin") == 0) {
            n = parse_in(path, v, err);
            if (n)
                n = node_not(n);
            else if (err && strcmp(err->msg, "$in needs an array") == 0)
                snprintf(err->msg, sizeof(err->msg), "%s", "$nin needs an array");
        } else if (strcmp(op, "$exists") == 0) {
            n = node_new(K_EXISTS, path);
            if (!mf_value_truthy(v))
                n = node_not(n);
        } else if (strcmp(op, "$type") == 0) {
            n = parse_type(path, v, err);
        } else if (strcmp(op, "$size") == 0) {
            n = parse_size(path, v, err);
        } else if (strcmp(op, "$mod") == 0) {
            n = parse_mod(path, v, err);
        } else if (strcmp(op, "$all") == 0) {
            n = parse_all(path, v, depth, err);
        } else if (strcmp(op, "$bitsAllSet") == 0) {
            n = parse_bits(K_BITS_ALL_SET, op, path, v, err);
        } else if (strcmp(op, "$bitsAllClear") == 0) {
            n = parse_bits(K_BITS_ALL_CLEAR, op, path, v, err);
        } else if (strcmp(op, "$bitsAnySet") == 0) {
            n = parse_bits(K_BITS_ANY_SET, op, path, v, err);
        } else if (strcmp(op, "$bitsAnyClear") == 0) {
            n = parse_bits(K_BITS_ANY_CLEAR, op, path, v, err);
        } else if (strcmp(op, "$elemMatch") == 0) {
            n = parse_elem_match(path, v, depth, err);
        } else if (strcmp(op, "$not") == 0) {
            n = parse_not(path, v, depth, err);
        } else if (strcmp(op, "$regex") == 0) {
            if (v->value_type != BSON_TYPE_UTF8 && v->value_type != BSON_TYPE_REGEX)
                return mf_err_set(err, MF_E_BadValue, "$regex has to be a string");
            regex_copy = *v;
            regex_v = &regex_copy;
            /* mongod reads the options in order: flags on a regex after $options is 51074. */
            if (v->value_type == BSON_TYPE_REGEX && v->value.v_regex.options && *v->value.v_regex.options) {
                if (*options)
                    return mf_err_set(err, MF_E_Location51074, "options set in both $regex and $options");
                options = v->value.v_regex.options;
            }
            continue;
        } else if (strcmp(op, "$options") == 0) {
            if (v->value_type != BSON_TYPE_UTF8)
                return mf_err_set(err, MF_E_BadValue, "$options has to be a string");
            if (*options)
                return mf_err_set(err, MF_E_Location51075, "options set in both $regex and $options");
            options = v->value.v_utf8.str;
            have_options = true;
            continue;
        } else if (strcmp(op, "$geoWithin") == 0 || strcmp(op, "$within") == 0 ||
                   strcmp(op, "$geoIntersects") == 0 || strcmp(op, "$near") == 0 ||
                   strcmp(op, "$nearSphere") == 0) {
            mf_geoq_op_t gop = op[1] == 'n' ? (op[5] == 'S' ? MF_GEOQ_NEARSPHERE : MF_GEOQ_NEAR)
                               : strcmp(op, "$geoIntersects") == 0 ? MF_GEOQ_INTERSECTS
                               : strcmp(op, "$within") == 0        ? MF_GEOQ_WITHIN_LEGACY
                                                                   : MF_GEOQ_WITHIN;
            mf_geo_query_t *q = mf_geo_query_parse(gop, v, opdoc, err);
            if (q == NULL)
                return -1;
            n = node_new(K_GEO, path);
            n->geo = q;
            bson_value_copy(opdoc, &n->val); /* for the view only */
        } else if ((strcmp(op, "$maxDistance") == 0 || strcmp(op, "$minDistance") == 0 ||
                    strcmp(op, "$uniqueDocs") == 0) &&
                   mf_match_opdoc_has_near(opdoc)) {
            /* read by the $near / $nearSphere beside it; $uniqueDocs ignored (GeoNearExpression::parseLegacyQuery) */
            continue;
        } else if (strcmp(op, "$where") == 0) {
            return mf_err_set(err, MF_E_BadValue, "$where cannot be applied to a field");
        } else {
            return mf_err_set(err, MF_E_BadValue, "unknown operator: %s", op);
        }
        if (n == NULL)
            return -1;
        node_add(out, n);
    }
    if (have_options && regex_v == NULL)
        return mf_err_set(err, MF_E_BadValue, "$options needs a $regex");
    if (regex_v != NULL) {
        node_t *n;
        if (regex_v->value_type == BSON_TYPE_REGEX) {
            n = regex_leaf(path, regex_v->value.v_regex.regex, strlen(regex_v->value.v_regex.regex), options,
                           err);
        } else {
            n = regex_leaf(path, regex_v->value.v_utf8.str, regex_v->value.v_utf8.len, options,
                           err);
        }
        if (n == NULL)
            return -1;
        node_add(out, n);
    }
    return 0;
}

/* parse_field: one "path: condition" entry of a filter. */
static node_t *
parse_field(const char *path, const bson_value_t *v, int depth, mf_error_t *err)
{
    if (v->value_type == BSON_TYPE_REGEX)
        return regex_leaf(path, v->value.v_regex.regex, strlen(v->value.v_regex.regex),
                          v->value.v_regex.options, err);
    if (is_operator_doc(v)) {
        node_t *n = node_new(K_AND, NULL);
        if (parse_ops(n, path, v, depth, false, err) < 0) {
            node_free(n);
            return NULL;
        }
        return n;
    }
    return leaf_value(K_EQ, path, v);
}

/* or_branch_leaf: the single equality or $in leaf a $or branch reduces to, or NULL. */
static node_t *
or_branch_leaf(node_t *k)
{
    while (k->kind == K_AND && k->nkids == 1)
        k = k->kids[0];
    if (k->path == NULL)
        return NULL;
    if (k->kind == K_IN)
        return k;
    /* {$eq: /re/} matches only that regex value, while a regex in $in is a pattern. */
    if (k->kind == K_EQ && k->val.value_type != BSON_TYPE_REGEX)
        return k;
    return NULL;
}

/* Moves leaf l's values and regexes (an equality or $in) into the $in node in. */
static void
in_absorb(node_t *in, node_t *l)
{
    if (l->kind == K_EQ) {
        if (l->val.value_type == BSON_TYPE_NULL)
            in->has_null = true;
        in->vals[in->nvals++] = l->val; /* moved */
        l->val.value_type = BSON_TYPE_EOD;
        return;
    }
    in->has_null = in->has_null || l->has_null;
    for (size_t j = 0; j < l->nvals; j++)
        in->vals[in->nvals++] = l->vals[j];
    for (size_t j = 0; j < l->nrxs; j++)
        in->rxs[in->nrxs++] = l->rxs[j];
    l->nvals = l->nrxs = 0;
}

/*
 * in_copy: in_absorb, copying l's values and regexes (recompiled, as they
 * compiled before) so that l stays whole: the branches of an $or kept for
 * the view (node_t.orig).
 */
static void
in_copy(node_t *in, const node_t *l)
{
    if (l->kind == K_EQ) {
        if (l->val.value_type == BSON_TYPE_NULL)
            in->has_null = true;
        bson_value_copy(&l->val, &in->vals[in->nvals++]);
        return;
    }
    in->has_null = in->has_null || l->has_null;
    for (size_t j = 0; j < l->nvals; j++)
        bson_value_copy(&l->vals[j], &in->vals[in->nvals++]);
    for (size_t j = 0; j < l->nrxs; j++) {
        mf_error_t e;
        rx_t *r = rx_compile(l->rxs[j]->pattern, strlen(l->rxs[j]->pattern), l->rxs[j]->flags, &e);
        if (r != NULL)
            in->rxs[in->nrxs++] = r;
    }
}

/*
 * or_to_in: MongoDB's rewrite of the branches of a $or that are equalities
 * (or $in) on one path into one $in per path ({$or: [{a: 1}, {b: 2}, {a:
 * 3}]} is {$or: [{a: {$in: [1, 3]}}, {b: 2}]}); when one $in is all that is
 * left it replaces the $or. A $or of N equalities then costs O(log N) per
 * document instead of N branch evaluations. Each $in takes the place of its
 * path's first branch. Takes ownership of orn; returns the node to use.
 */
static node_t *
or_to_in(node_t *orn)
{
    size_t n = orn->nkids, k = 0;
    node_t **leaf = mf_calloc(n, sizeof(*leaf));
    bool merged = false;

    for (size_t i = 0; i < n; i++)
        leaf[i] = or_branch_leaf(orn->kids[i]);
    for (size_t i = 0; i < n; i++) {
        size_t nv = 0, nr = 0, same = 0;
        bool has_in = false;
        if (leaf[i] == NULL)
            continue;
        for (size_t j = i; j < n; j++) {
            if (leaf[j] == NULL || strcmp(leaf[j]->path, leaf[i]->path) != 0)
                continue;
            same++;
            has_in = has_in || leaf[j]->kind == K_IN;
            nv += leaf[j]->kind == K_IN ? leaf[j]->nvals : 1;
            nr += leaf[j]->kind == K_IN ? leaf[j]->nrxs : 0;
        }
        if (same < 2)
            continue;
        node_t *in = node_new(K_IN, leaf[i]->path);
        in->vals = mf_calloc(nv ? nv : 1, sizeof(*in->vals));
        in->rxs = mf_calloc(nr ? nr : 1, sizeof(*in->rxs));
        /*
         * mongod's rewrite joins equalities, not $in branches: when one is
         * absorbed, the branches are kept as parsed for the view (orig).
         */
        in->or_merged = !has_in;
        if (has_in) {
            in->orig = mf_calloc(same, sizeof(*in->orig));
            in->norig = same;
        }
        for (size_t j = n; j-- > i;) {
            if (leaf[j] == NULL || strcmp(leaf[j]->path, in->path) != 0)
                continue;
            if (has_in)
                in_copy(in, leaf[j]);
            else
                in_absorb(in, leaf[j]);
            leaf[j] = NULL;
            if (has_in)
                in->orig[--same] = orn->kids[j];
            else if (j != i)
                node_free(orn->kids[j]);
            if (j != i)
                orn->kids[j] = NULL;
        }
        in_finish(in);
        if (!has_in)
            node_free(orn->kids[i]);
        orn->kids[i] = in;
        merged = true;
    }
    free(leaf);
    if (!merged)
        return orn;
    for (size_t i = 0; i < n; i++) {
        if (orn->kids[i] != NULL)
            orn->kids[k++] = orn->kids[i];
    }
    orn->nkids = k;
    if (k == 1) {
        node_t *only = orn->kids[0];
        orn->nkids = 0;
        node_free(orn);
        return only;
    }
    return orn;
}

/*
 * parse_always: {$alwaysTrue: 1} / {$alwaysFalse: 1}; the operand must be the
 * integer 1 (9 FailedToParse otherwise, as mongod's parseAlwaysBoolean).
 */
static node_t *
parse_always(const char *k, const bson_value_t *v, mf_error_t *err)
{
    int64_t one;

    if (int64_operand("", k, v, &one, err) < 0)
        return NULL;
    if (one != 1) {
        mf_err_set(err, MF_E_FailedToParse, "%s must be an integer value of 1", k);
        return NULL;
    }
    return node_new(k[7] == 'T' ? K_TRUE : K_FALSE, NULL);
}

/*
 * parse_sample_rate: {$sampleRate: x}, x a number in [0, 1] (2 BadValue
 * otherwise); 0 and 1 match nothing / everything, anything between matches
 * each document with probability x (mongod's {$expr: {$lt: [{$rand: {}}, x]}}).
 */
static node_t *
parse_sample_rate(const bson_value_t *v, mf_error_t *err)
{
    double x;
    node_t *n;

    if (!mf_value_is_number(v)) {
        mf_err_set(err, MF_E_BadValue, "argument to $sampleRate must be a numeric type");
        return NULL;
    }
    x = mf_value_as_double(v);
    if (!(x >= 0.0 && x <= 1.0)) { /* written so that NaN is refused */
        mf_err_set(err, MF_E_BadValue, "numeric argument to $sampleRate must be in [0, 1]");
        return NULL;
    }
    n = node_new(x == 0.0 ? K_FALSE : x == 1.0 ? K_TRUE : K_SAMPLE, NULL);
    n->rate = x;
    n->shown = SHOWN_SAMPLE;
    return n;
}

/* sample_draw: a uniform double in [0, 1) from a per-thread xorshift64* generator. */
static double
sample_draw(void)
{
    static _Thread_local uint64_t state;
    uint64_t x = state;

    if (x == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&state;
        if (x == 0)
            x = 0x9E3779B97F4A7C15ULL;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

/* parse_logical: $and / $or / $nor operand. */
static node_t *
parse_logical(kind_t kind, const char *name, const bson_value_t *v, int depth, unsigned flags, mf_error_t *err)
{
    bson_iter_t it;
    node_t *n;

    if (v->value_type != BSON_TYPE_ARRAY) {
        mf_err_set(err, MF_E_BadValue, "%s must be an array", name);
        return NULL;
    }
    if (depth + 1 > kMaxDepth) {
        mf_err_set(err, MF_E_BadValue, "exceeded maximum query tree depth of %d", kMaxDepth);
        return NULL;
    }
    n = node_new(kind, NULL);
    if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        while (bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            node_t *kid;
            if (e->value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_BadValue, "$or/$and/$nor entries need to be full objects");
                node_free(n);
                return NULL;
            }
            kid = parse_filter(e->value.v_doc.data, e->value.v_doc.data_len, depth + 1, flags, err);
            if (kid == NULL) {
                node_free(n);
                return NULL;
            }
            node_add(n, kid);
        }
    }
    if (n->nkids == 0) {
        mf_err_set(err, MF_E_BadValue, "$and/$or/$nor must be a nonempty array");
        node_free(n);
        return NULL;
    }
    if (kind == K_OR)
        return or_to_in(n);
    return n;
}

/*
 * parse_filter: a full filter document into an AND node. With P_SUB (inside
 * an $elemMatch, mongod's kUserSubDocument level) $expr, $text and
 * $sampleRate are refused with 2; with P_BAN (a $pull condition, mongod's
 * kBanAllSpecialFeatures) $expr and $jsonSchema are 224 QueryFeatureNotAllowed
 * and $text 2 BadValue (expression_parser.cpp).
 */
static node_t *
parse_filter(const uint8_t *data, uint32_t len, int depth, unsigned flags, mf_error_t *err)
{
    bson_iter_t it;
    node_t *root;

    if (depth > kMaxDepth) {
        mf_err_set(err, MF_E_BadValue, "exceeded maximum query tree depth of %d", kMaxDepth);
        return NULL;
    }
    if (!bson_iter_init_from_data(&it, data, len)) {
        mf_err_set(err, MF_E_BadValue, "invalid filter document");
        return NULL;
    }
    root = node_new(K_AND, NULL);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        node_t *n = NULL;

        if (k[0] == '$') {
            if (strcmp(k, "$and") == 0)
                n = parse_logical(K_AND, k, v, depth, flags, err);
            else if (strcmp(k, "$or") == 0)
                n = parse_logical(K_OR, k, v, depth, flags, err);
            else if (strcmp(k, "$nor") == 0)
                n = parse_logical(K_NOR, k, v, depth, flags, err);
            else if (strcmp(k, "$comment") == 0)
                continue;
            else if (strcmp(k, "$alwaysTrue") == 0 || strcmp(k, "$alwaysFalse") == 0)
                n = parse_always(k, v, err);
            else if (strcmp(k, "$expr") == 0 && (flags & P_SUB))
                mf_err_set(err, MF_E_BadValue, "$expr can only be applied to the top-level document");
            else if ((strcmp(k, "$expr") == 0 || strcmp(k, "$jsonSchema") == 0) && (flags & P_BAN))
                mf_err_set(err, MF_E_QueryFeatureNotAllowed, "%s is not allowed in this context", k);
            else if (strcmp(k, "$sampleRate") == 0 && (flags & P_SUB))
                mf_err_set(err, MF_E_BadValue, "$sampleRate can only be applied to the top-level document");
            else if (strcmp(k, "$sampleRate") == 0)
                n = parse_sample_rate(v, err);
            else if (strcmp(k, "$expr") == 0) {
                mf_expr_t *e = mf_expr_parse(v, err);
                if (e == NULL) {
                    node_free(root);
                    return NULL;
                }
                n = node_new(K_EXPR, NULL);
                n->expr = e;
                bson_value_copy(v, &n->val); /* for the view only */
            } else if (strcmp(k, "$jsonSchema") == 0) {
                mf_jsonschema_t *js = mf_jsonschema_new(v, err);
                if (js == NULL) {
                    node_free(root);
                    return NULL;
                }
                n = node_new(K_SCHEMA, NULL);
                n->schema = js;
                bson_value_copy(v, &n->val); /* for the view only */
            } else if (strcmp(k, "$text") == 0 && (flags & P_SUB)) {
                /* expression_parser.cpp's parseText: the level first, then the allowed features; both 2. */
                mf_err_set(err, MF_E_BadValue, "$text can only be applied to the top-level document");
            } else if (strcmp(k, "$text") == 0 && (flags & P_BAN)) {
                mf_err_set(err, MF_E_BadValue, "$text is not allowed in this context");
            } else if (strcmp(k, "$text") == 0) {
                /*
                 * Matched by the text plan (doc/text.h, query/plan.c): true here, as mongod's TEXT node;
                 * false in mf_matcher_new_text_false's matcher (a document the text search does not match).
                 */
                if (mf_text_check(v, err) == 0) {
                    n = node_new((flags & P_TEXT_FALSE) ? K_FALSE : K_TRUE, NULL);
                    n->shown = SHOWN_TEXT;
                    bson_value_copy(v, &n->val); /* for the view only */
                }
            } else if (strcmp(k, "$where") == 0) {
                mf_err_set(err, MF_E_BadValue, "$where is not allowed in this context");
            } else if (strcmp(k, "$not") == 0) {
                mf_err_set(err, MF_E_BadValue,
                           "unknown top level operator: %s. If you are trying to negate an entire expression, "
                           "use $nor.",
                           k);
            } else {
                mf_err_set(err, MF_E_BadValue,
                           "unknown top level operator: %s. If you have a field name that starts with a '$' "
                           "symbol, consider using $getField or $setField.",
                           k);
            }
        } else {
            n = parse_field(k, v, depth, err);
        }
        if (n == NULL) {
            node_free(root);
            return NULL;
        }
        node_add(root, n);
    }
    return root;
}

/* ---- matching ---- */

typedef struct ctx {
    const bson_t *doc;        /* document under test (path leaves), may be NULL */
    const bson_value_t *value; /* value under test (NULL-path leaves); NULL = missing */
    bool traverse;            /* NULL-path leaves also test array elements */
} ctx_t;

static bool eval(const node_t *n, const ctx_t *c, int32_t *pos);

/* compare_ok: type-bracketed comparison of a present value with the operand. */
static bool
compare_ok(kind_t kind, const bson_value_t *v, const bson_value_t *rhs)
{
    int rv = mf_value_type_rank(v->value_type), rr = mf_value_type_rank(rhs->value_type);
    int c;

    if (rv != rr) {
        if (rhs->value_type == BSON_TYPE_MAXKEY)
            return kind == K_LT || kind == K_LTE;
        if (rhs->value_type == BSON_TYPE_MINKEY)
            return kind == K_GT || kind == K_GTE;
        return false;
    }
    if (rv == mf_value_type_rank(BSON_TYPE_DOUBLE)) {
        double a = mf_value_as_double(v), b = mf_value_as_double(rhs);
        if (isnan(a) || isnan(b)) {
            bool both = isnan(a) && isnan(b);
            return (kind == K_EQ || kind == K_LTE || kind == K_GTE) && both;
        }
    }
    c = mf_value_cmp(v, rhs);
    switch (kind) {
    case K_EQ:
        return c == 0;
    case K_LT:
        return c < 0;
    case K_LTE:
        return c <= 0;
    case K_GT:
        return c > 0;
    case K_GTE:
        return c >= 0;
    default:
        return false;
    }
}

static bool
type_ok(const node_t *n, const bson_value_t *v)
{
    if (n->type_number && mf_value_is_number(v))
        return true;
    for (int i = 0; i < n->ntypes; i++)
        if ((int)v->value_type == n->types[i])
            return true;
    return false;
}

static bool
mod_ok(const node_t *n, const bson_value_t *v)
{
    int64_t x;

    if (!mf_value_is_number(v))
        return false;
    if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) {
        mf_value_as_int64(v, &x);
    } else {
        double d = mf_value_as_double(v);
        if (isnan(d) || isinf(d))
            return false;
        if (d >= 9223372036854775808.0)
            x = INT64_MAX;
        else if (d < -9223372036854775808.0)
            x = INT64_MIN;
        else
            x = (int64_t)trunc(d);
    }
    if (n->divisor == -1)
        return n->remainder == 0;
    return x % n->divisor == n->remainder;
}

/*
 * bits_ok: a bit test on one value. BinData is tested at the bit positions
 * (bytes little-endian, missing bytes clear); a number only when it holds a
 * 64-bit integer exactly (NaN, infinities, fractions and out-of-range
 * doubles or decimals never match), with the numeric mask; every other type
 * never matches.
 */
static bool
bits_ok(const node_t *n, const bson_value_t *v)
{
    bool all = n->kind == K_BITS_ALL_SET || n->kind == K_BITS_ALL_CLEAR;
    bool want_set = n->kind == K_BITS_ALL_SET || n->kind == K_BITS_ANY_SET;
    uint64_t x;

    if (v->value_type == BSON_TYPE_BINARY && n->val.value_type == BSON_TYPE_BINARY) {
        /* A BinData mask against BinData: byte by byte, the value zero-extended. */
        const uint8_t *m = n->val.value.v_binary.data;
        for (uint32_t i = 0; i < n->val.value.v_binary.data_len; i++) {
            uint8_t b = i < v->value.v_binary.data_len ? v->value.v_binary.data[i] : 0;
            uint8_t hit = want_set ? (uint8_t)(b & m[i]) : (uint8_t)(~b & m[i]);
            if (all && hit != m[i])
                return false;
            if (!all && hit != 0)
                return true;
        }
        return all;
    }
    if (v->value_type == BSON_TYPE_BINARY) {
        for (size_t i = 0; i < n->nbitpos; i++) {
            uint32_t p = n->bitpos[i];
            bool set = p / 8 < v->value.v_binary.data_len && (v->value.v_binary.data[p / 8] & (1u << (p % 8)));
            if (set == want_set && !all)
                return true;
            if (set != want_set && all)
                return false;
        }
        return all;
    }
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        x = (uint64_t)(int64_t)v->value.v_int32;
        break;
    case BSON_TYPE_INT64:
        x = (uint64_t)v->value.v_int64;
        break;
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        if (isnan(d) || d >= 9223372036854775808.0 || d < -9223372036854775808.0 || d != trunc(d))
            return false;
        x = (uint64_t)(int64_t)d;
        break;
    }
    case BSON_TYPE_DECIMAL128: {
        /* Only a decimal holding a 64-bit integer exactly takes part (mongod's bittest.js). */
        int64_t i;
        if (!mf_value_as_int64(v, &i))
            return false;
        x = (uint64_t)i;
        break;
    }
    default:
        return false;
    }
    if (!want_set)
        x = ~x;
    return all ? (x & n->bitmask) == n->bitmask : (x & n->bitmask) != 0;
}

static bool
array_count_is(const bson_value_t *v, int64_t want)
{
    bson_iter_t it;
    int64_t count = 0;

    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return false;
    while (bson_iter_next(&it))
        count++;
    return count == want;
}

/* single: tests one value (NULL = missing) against a leaf, without element traversal. */
static bool
single(const node_t *n, const bson_value_t *v, int32_t *pos)
{
    switch (n->kind) {
    case K_EQ:
    case K_LT:
    case K_LTE:
    case K_GT:
    case K_GTE:
        if (v == NULL)
            return n->val.value_type == BSON_TYPE_NULL &&
                   (n->kind == K_EQ || n->kind == K_LTE || n->kind == K_GTE);
        return compare_ok(n->kind, v, &n->val);
    case K_IN:
        if (v == NULL)
            return n->has_null;
        if (in_has(n, v))
            return true;
        for (size_t i = 0; i < n->nrxs; i++)
            if (rx_match_value(n->rxs[i], v))
                return true;
        return false;
    case K_REGEX:
        return rx_match_value(n->rx, v);
    case K_TYPE:
        return v != NULL && type_ok(n, v);
    case K_MOD:
        return v != NULL && mod_ok(n, v);
    case K_BITS_ALL_SET:
    case K_BITS_ALL_CLEAR:
    case K_BITS_ANY_SET:
    case K_BITS_ANY_CLEAR:
        return v != NULL && bits_ok(n, v);
    case K_GEO:
        return v != NULL && mf_geo_query_match(n->geo, v);
    case K_EXISTS:
        return v != NULL;
    case K_SIZE:
        return v != NULL && v->value_type == BSON_TYPE_ARRAY && n->size >= 0 &&
               array_count_is(v, n->size);
    case K_ELEM_OBJ:
    case K_ELEM_VAL: {
        bson_iter_t it;
        int32_t i = 0;
        if (v == NULL || v->value_type != BSON_TYPE_ARRAY ||
            !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return false;
        while (bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            bool ok = false;
            int32_t ignored = -1;
            if (n->kind == K_ELEM_OBJ) {
                if (e->value_type == BSON_TYPE_DOCUMENT || e->value_type == BSON_TYPE_ARRAY) {
                    bson_t sub;
                    if (bson_init_static(&sub, e->value.v_doc.data, e->value.v_doc.data_len)) {
                        ctx_t c = {&sub, NULL, false};
                        ok = eval(n->kids[0], &c, &ignored);
                    }
                }
            } else {
                ctx_t c = {NULL, e, false};
                ok = true;
                for (size_t k = 0; k < n->nkids && ok; k++)
                    ok = eval(n->kids[k], &c, &ignored);
            }
            if (ok) {
                *pos = i;
                return true;
            }
            i++;
        }
        return false;
    }
    default:
        return false;
    }
}

/* traverses: leaves that MongoDB also applies to each element of a reached array. */
static bool
traverses(kind_t k)
{
    return k >= K_EQ && k <= K_GEO;
}

/*
 * leaf_at: tests a reached value; a reached array (where allowed) element by
 * element first and then as a whole, in mongod's order (BSONElementIterator
 * gives the array itself last), so that the position a positional
 * projection or update uses (*pos, the element's index) is the first
 * element that matched even when the whole array matches too.
 */
static bool
leaf_at(const node_t *n, const bson_value_t *v, bool traverse, int32_t *pos)
{
    int32_t p = -1;

    if (traverse && v != NULL && v->value_type == BSON_TYPE_ARRAY && traverses(n->kind)) {
        bson_iter_t it;
        int32_t i = 0;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return false;
        while (bson_iter_next(&it)) {
            if (single(n, bson_iter_value(&it), &p)) {
                *pos = i;
                return true;
            }
            i++;
        }
    }
    if (single(n, v, &p)) {
        *pos = p;
        return true;
    }
    return false;
}

typedef struct walk_arg {
    const node_t *n;
    bool matched;
    int32_t pos;
} walk_arg_t;

static bool
walk_visit(void *arg, const bson_value_t *v, int32_t array_pos, bool whole)
{
    walk_arg_t *w = arg;
    int32_t epos = -1;

    /* A value an array's position gave is taken whole (mf_path_walk_whole). */
    if (leaf_at(w->n, v, !whole, &epos)) {
        w->matched = true;
        w->pos = array_pos >= 0 ? array_pos : epos;
        return true;
    }
    return false;
}

/*
 * eval_expr: a $expr node over c's document (or value). Apart from eval,
 * and never inlined into it: its error (5 KB) would otherwise sit in every
 * frame of eval's recursion over $and / $or / $not.
 */
static __attribute__((noinline)) bool
eval_expr(const node_t *n, const ctx_t *c)
{
    bson_value_t out;
    mf_error_t err;
    bson_t tmp;
    const bson_t *root = c->doc;
    bool ok;

    if (root == NULL) {
        if (c->value == NULL || c->value->value_type != BSON_TYPE_DOCUMENT ||
            !bson_init_static(&tmp, c->value->value.v_doc.data, c->value->value.v_doc.data_len))
            return false;
        root = &tmp;
    }
    mf_err_clear(&err);
    if (mf_expr_eval(n->expr, root, &out, &err) != 0) {
        if (!expr_failed) { /* the first one fails the query (mf_matcher_take_failure) */
            expr_failed = true;
            expr_failure = err;
        }
        return false;
    }
    ok = mf_value_truthy(&out);
    bson_value_destroy(&out);
    return ok;
}

static bool
eval(const node_t *n, const ctx_t *c, int32_t *pos)
{
    switch (n->kind) {
    case K_AND:
        if (n->flat != NULL) {
            /*
             * As mongod's AndMatchExpression over its normalized (flattened, sorted)
             * children: each child that matched through an array element records its
             * position, so the position is the one of the last such child in sorted order.
             */
            size_t best = 0;
            bool have = false;
            for (size_t i = 0; i < n->nflat; i++) {
                int32_t p = -1;
                if (!eval(n->flat[i], c, &p))
                    return false;
                if (p >= 0 && (!have || n->rank[i] >= best)) {
                    best = n->rank[i];
                    have = true;
                    *pos = p;
                }
            }
            return true;
        }
        for (size_t i = 0; i < n->nkids; i++) {
            int32_t p = -1;
            if (!eval(n->kids[i], c, &p))
                return false;
            if (p >= 0 && *pos < 0)
                *pos = p;
        }
        return true;
    case K_OR:
        if (n->sorted != NULL) {
            /*
             * mongod's OrMatchExpression after normalization: equalities and regexes on one
             * path become one $in (7.0+), whose position is the first element matching any of
             * them. An $or left with one unit is that unit (optimize() unwraps it); one of two
             * or more records no position at all, as OrMatchExpression::matches passes its
             * children no MatchDetails (so a positional update then fails with 2, a
             * positional projection with 51246, as in mongod).
             */
            int32_t unit_pos = -1;
            int32_t *upos = n->nunits == 1 ? pos : &unit_pos;
            size_t at = 0;
            for (size_t u = 0; u < n->nunits; u++) {
                bool any = false;
                for (size_t i = 0; i < n->ulen[u]; i++) {
                    int32_t p = -1;
                    if (eval(n->sorted[at + i], c, &p)) {
                        if (p >= 0 && (*upos < 0 || p < *upos))
                            *upos = p;
                        any = true;
                        /* Only an element found further in could be improved on by another member. */
                        if (*upos <= 0)
                            break;
                    }
                }
                if (any)
                    return true;
                at += n->ulen[u];
            }
            return false;
        }
        for (size_t i = 0; i < n->nkids; i++) {
            int32_t p = -1;
            if (eval(n->kids[i], c, &p)) {
                if (p >= 0 && *pos < 0)
                    *pos = p;
                return true;
            }
        }
        return false;
    case K_NOR:
        for (size_t i = 0; i < n->nkids; i++) {
            int32_t p = -1;
            if (eval(n->kids[i], c, &p))
                return false;
        }
        return true;
    case K_NOT: {
        int32_t p = -1;
        return !eval(n->kids[0], c, &p);
    }
    case K_TRUE:
        return true;
    case K_FALSE:
        return false;
    case K_SAMPLE:
        return sample_draw() < n->rate;
    case K_EXPR:
        return eval_expr(n, c);
    case K_SCHEMA: {
        /* $jsonSchema ignores collation (enum, uniqueItems compare simply), as mongod's. */
        const mf_collation_t *saved = mf_collation_current();
        bool ok;
        mf_collation_set_current(NULL);
        if (c->doc != NULL)
            ok = mf_jsonschema_match(n->schema, c->doc);
        else
            ok = c->value != NULL && c->value->value_type == BSON_TYPE_DOCUMENT &&
                 mf_jsonschema_match_value(n->schema, c->value);
        mf_collation_set_current(saved);
        return ok;
    }
    default:
        break;
    }
    if (n->path == NULL)
        return leaf_at(n, c->value, c->traverse, pos);
    if (c->doc == NULL)
        return leaf_at(n, NULL, false, pos);
    {
        walk_arg_t w = {n, false, -1};
        mf_path_walk_whole(c->doc, n->path, walk_visit, &w);
        if (w.matched)
            *pos = w.pos;
        return w.matched;
    }
}

/* ---- mongod's normalized order of $and / $or children ---- */

/*
 * mongod's MatchExpression::MatchType order, which its sortTree sorts
 * siblings by first (expression.h: AND, OR, ELEM_MATCH_OBJECT,
 * ELEM_MATCH_VALUE, SIZE, EQ, LTE, LT, GT, GTE, REGEX, MOD, EXISTS,
 * MATCH_IN, BITS_*, NOT, NOR, TYPE_OPERATOR, GEO, WHERE, EXPRESSION,
 * ALWAYS_FALSE, ALWAYS_TRUE, then internal ones). A one-value $in is an
 * equality after optimization.
 */
static int
match_type_rank(const node_t *n)
{
    switch (n->kind) {
    case K_AND: return 0;
    case K_OR: return 1;
    case K_ELEM_OBJ: return 2;
    case K_ELEM_VAL: return 3;
    case K_SIZE: return 4;
    case K_EQ: return 5;
    case K_LTE: return 6;
    case K_LT: return 7;
    case K_GT: return 8;
    case K_GTE: return 9;
    case K_REGEX: return 10;
    case K_MOD: return 11;
    case K_EXISTS: return 12;
    case K_IN: return n->nvals == 1 && n->nrxs == 0 ? 5 : 13;
    case K_BITS_ALL_SET: return 14;
    case K_BITS_ALL_CLEAR: return 15;
    case K_BITS_ANY_SET: return 16;
    case K_BITS_ANY_CLEAR: return 17;
    case K_NOT: return 18;
    case K_NOR: return 19;
    case K_TYPE: return 20;
    case K_GEO: return 21;
    case K_EXPR: return 23;
    case K_SAMPLE: return 23; /* an $expr after parsing, in mongod */
    case K_FALSE: return 24;
    case K_TRUE: return 25;
    case K_SCHEMA: return 40;
    }
    return 50;
}

/* A one-child $and / $or is its child after mongod's optimization. */
static const node_t *
unwrap_single(const node_t *n)
{
    while ((n->kind == K_AND || n->kind == K_OR) && n->nkids == 1)
        n = n->kids[0];
    return n;
}

/* mongod's matchExpressionComparator: match type, then path, then children, then their number. */
static int
node_order_cmp(const node_t *a, const node_t *b)
{
    a = unwrap_single(a);
    b = unwrap_single(b);
    /* An $or wholly rewritten to $in sorts as that $in (MATCH_IN on its path, no children). */
    int ra = a->or_in ? 13 : match_type_rank(a), rb = b->or_in ? 13 : match_type_rank(b);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    const char *pa = a->or_in ? unwrap_single(a->flat[0])->path : a->path,
               *pb = b->or_in ? unwrap_single(b->flat[0])->path : b->path;
    int pc = strcmp(pa != NULL ? pa : "", pb != NULL ? pb : "");
    if (pc != 0)
        return pc < 0 ? -1 : 1;
    if (a->or_in || b->or_in)
        return a->or_in == b->or_in ? 0 : (a->or_in ? -1 : 1);
    size_t nk = a->nkids < b->nkids ? a->nkids : b->nkids;
    for (size_t i = 0; i < nk; i++) {
        int c = node_order_cmp(a->kids[i], b->kids[i]);
        if (c != 0)
            return c;
    }
    if (a->nkids != b->nkids)
        return a->nkids < b->nkids ? -1 : 1;
    return 0;
}

/* Compares two units of an $or: a group (ga / gb) compares as an $in on its member's path. */
static int
unit_cmp(const node_t *a, bool ga, const node_t *b, bool gb)
{
    if (!ga && !gb)
        return node_order_cmp(a, b);
    int ra = ga ? 13 : match_type_rank(unwrap_single(a)), rb = gb ? 13 : match_type_rank(unwrap_single(b));
    if (ra != rb)
        return ra < rb ? -1 : 1;
    const char *pa = unwrap_single(a)->path, *pb = unwrap_single(b)->path;
    int pc = strcmp(pa != NULL ? pa : "", pb != NULL ? pb : "");
    return pc < 0 ? -1 : pc > 0 ? 1 : 0;
}

/* Appends n's children to n->flat, splicing in those of children of n's own kind (mongod flattens them). */
static void
flatten_into(node_t *top, const node_t *n)
{
    for (size_t i = 0; i < n->nkids; i++) {
        node_t *k = n->kids[i];
        if (k->kind == top->kind && k->nkids > 0) {
            flatten_into(top, k);
        } else {
            top->flat = mf_realloc(top->flat, (top->nflat + 1) * sizeof(*top->flat));
            top->flat[top->nflat++] = k;
        }
    }
}

/* One sibling (or $or unit) being sorted: qsort with the pre-sort position breaking ties is a stable sort. */
typedef struct sort_item {
    const node_t *n;
    size_t pos;   /* the place before sorting */
    size_t flat;  /* the flat index it stands for (an $or unit: its first member) */
    bool group;   /* an $or unit that is an $in group */
} sort_item_t;

static int
sort_item_cmp(const void *pa, const void *pb)
{
    const sort_item_t *a = pa, *b = pb;
    int c = unit_cmp(a->n, a->group, b->n, b->group);
    if (c != 0)
        return c;
    return a->pos < b->pos ? -1 : a->pos > b->pos ? 1 : 0;
}

/* Orders an $or's groupable children by path, then by their place. */
static int
path_item_cmp(const void *pa, const void *pb)
{
    const sort_item_t *a = pa, *b = pb;
    int c = strcmp(a->n->path, b->n->path);
    if (c != 0)
        return c;
    return a->pos < b->pos ? -1 : a->pos > b->pos ? 1 : 0;
}

/*
 * prepare_order: for every $and / $or of the tree, the flattened children
 * and their place in mongod's normalized order (node fields flat, rank,
 * sorted, ulen, or_in), which decide the position a positional update or
 * projection uses, and the order an $or tries its children in. Sorting is
 * O(n log n), so a filter of thousands of $or branches stays cheap.
 */
static void
prepare_order(node_t *n)
{
    for (size_t i = 0; i < n->nkids; i++)
        prepare_order(n->kids[i]);
    if ((n->kind != K_AND && n->kind != K_OR) || n->nkids == 0)
        return;
    flatten_into(n, n);
    size_t nf = n->nflat;
    if (nf == 0)
        return;
    sort_item_t *it = mf_malloc(nf * sizeof(*it));
    if (n->kind == K_AND) {
        /* An $and evaluates in the filter's order: only each child's place in the sorted order matters. */
        n->rank = mf_malloc(nf * sizeof(*n->rank));
        for (size_t i = 0; i < nf; i++)
            it[i] = (sort_item_t){n->flat[i], i, i, false};
        qsort(it, nf, sizeof(*it), sort_item_cmp);
        for (size_t j = 0; j < nf; j++)
            n->rank[it[j].flat] = j;
        free(it);
        return;
    }
    /*
     * An $or: mongod 7.0+ turns two or more equalities (not to a regex) or
     * regexes on one path into one $in appended after the other children
     * (or_to_in.js), then sorts. Units: the single children in the filter's
     * order, then one group per such path (its first member standing for
     * it); sorted with the groups as $in.
     */
    long *group = mf_malloc(nf * sizeof(*group)); /* the child's group (its path's first member), or -1 */
    size_t ng = 0;
    for (size_t i = 0; i < nf; i++) {
        const node_t *k = unwrap_single(n->flat[i]);
        group[i] = -1;
        /* Equalities here may already be one K_IN (or_to_in, at parse time): it joins the group too. */
        if (k->path != NULL && (k->kind == K_REGEX || k->kind == K_IN ||
                                (k->kind == K_EQ && k->val.value_type != BSON_TYPE_REGEX)))
            it[ng++] = (sort_item_t){k, i, i, false};
    }
    qsort(it, ng, sizeof(*it), path_item_cmp);
    for (size_t i = 0; i < ng;) {
        size_t j = i + 1;
        while (j < ng && strcmp(it[j].n->path, it[i].n->path) == 0)
            j++;
        if (j - i >= 2)
            for (size_t m = i; m < j; m++)
                group[it[m].flat] = (long)it[i].flat;
        i = j;
    }
    size_t nu = 0;
    for (size_t i = 0; i < nf; i++)
        if (group[i] < 0) {
            it[nu] = (sort_item_t){n->flat[i], nu, i, false};
            nu++;
        }
    for (size_t i = 0; i < nf; i++)
        if (group[i] == (long)i) {
            it[nu] = (sort_item_t){n->flat[i], nu, i, true};
            nu++;
        }
    qsort(it, nu, sizeof(*it), sort_item_cmp);
    /* Each group's members, in the filter's order, as a chain through next. */
    size_t *next = mf_malloc(nf * sizeof(*next)), *last = mf_malloc(nf * sizeof(*last));
    for (size_t i = 0; i < nf; i++) {
        next[i] = SIZE_MAX;
        last[i] = i;
    }
    for (size_t i = 0; i < nf; i++)
        if (group[i] >= 0 && group[i] != (long)i) {
            size_t g = (size_t)group[i];
            next[last[g]] = i;
            last[g] = i;
        }
    n->sorted = mf_malloc(nf * sizeof(*n->sorted));
    n->ulen = mf_malloc(nu * sizeof(*n->ulen));
    n->nunits = nu;
    size_t at = 0;
    for (size_t u = 0; u < nu; u++) {
        size_t len = 0;
        for (size_t f = it[u].flat; f != SIZE_MAX; f = it[u].group ? next[f] : SIZE_MAX) {
            n->sorted[at++] = n->flat[f];
            len++;
        }
        n->ulen[u] = len;
    }
    n->or_in = nu == 1 && it[0].group;
    free(next);
    free(last);
    free(group);
    free(it);
}

/* ---- public API ---- */

mf_matcher_t *
mf_matcher_new(const bson_t *filter, mf_error_t *err)
{
    mf_matcher_t *m = mf_calloc(1, sizeof(*m));

    if (m == NULL)
        abort();
    if (filter == NULL) {
        m->root = node_new(K_AND, NULL);
        return m;
    }
    m->root = parse_filter(bson_get_data(filter), filter->len, 0, 0, err);
    if (m->root == NULL) {
        free(m);
        return NULL;
    }
    prepare_order(m->root);
    return m;
}

mf_matcher_t *
mf_matcher_new_banned(const bson_t *filter, mf_error_t *err)
{
    /* kBanAllSpecialFeatures bans kGeoNear too: a nearest-first search filters nothing. */
    if (mf_geo_filter_has_near(filter)) {
        mf_err_set(err, MF_E_Location5626500, MF_GEO_NEAR_CONTEXT_MSG);
        return NULL;
    }
    mf_matcher_t *m = mf_calloc(1, sizeof(*m));
    m->root = parse_filter(bson_get_data(filter), filter->len, 0, P_BAN, err);
    if (m->root == NULL) {
        free(m);
        return NULL;
    }
    prepare_order(m->root);
    return m;
}

mf_matcher_t *
mf_matcher_new_text_false(const bson_t *filter, mf_error_t *err)
{
    mf_matcher_t *m = mf_calloc(1, sizeof(*m));
    m->root = parse_filter(bson_get_data(filter), filter->len, 0, P_TEXT_FALSE, err);
    if (m->root == NULL) {
        free(m);
        return NULL;
    }
    prepare_order(m->root);
    return m;
}

static mf_matcher_t *
matcher_new_value(const bson_value_t *filter, unsigned flags, mf_error_t *err)
{
    mf_matcher_t *m = mf_calloc(1, sizeof(*m));
    bson_iter_t it;
    const char *k;

    if (m == NULL)
        abort();
    if (filter->value_type == BSON_TYPE_DOCUMENT) {
        k = first_key(filter, &it);
        if (k != NULL && k[0] == '$' && !is_dbref_key(k) && !is_pathless_op(k)) {
            m->value_mode = true;
            m->root = node_new(K_AND, NULL);
            if (parse_ops(m->root, NULL, filter, 0, false, err) < 0) {
                node_free(m->root);
                free(m);
                return NULL;
            }
            return m;
        }
        m->root = parse_filter(filter->value.v_doc.data, filter->value.v_doc.data_len, 0, flags, err);
    } else {
        m->value_mode = true;
        m->root = parse_field(NULL, filter, 0, err);
    }
    if (m->root == NULL) {
        free(m);
        return NULL;
    }
    return m;
}

mf_matcher_t *
mf_matcher_new_value(const bson_value_t *filter, mf_error_t *err)
{
    return matcher_new_value(filter, 0, err);
}

mf_matcher_t *
mf_matcher_new_pull(const bson_value_t *filter, mf_error_t *err)
{
    /* kBanAllSpecialFeatures bans kGeoNear too (mongod's PullNode): a nearest-first search means nothing here. */
    if (filter->value_type == BSON_TYPE_DOCUMENT) {
        bson_t f;
        if (bson_init_static(&f, filter->value.v_doc.data, filter->value.v_doc.data_len) && mf_geo_filter_has_near(&f)) {
            mf_err_set(err, MF_E_Location5626500, MF_GEO_NEAR_CONTEXT_MSG);
            return NULL;
        }
    }
    mf_matcher_t *m = matcher_new_value(filter, P_BAN, err);
    if (m != NULL && !m->value_mode)
        m->objects_only = true; /* mongod's PullNode ObjectMatcher: elements of type Object only */
    return m;
}

void
mf_matcher_free(mf_matcher_t *m)
{
    if (m == NULL)
        return;
    node_free(m->root);
    free(m);
}

bool
mf_matcher_match(const mf_matcher_t *m, const bson_t *doc, mf_match_details_t *details)
{
    int32_t pos = -1;
    bool ok;

    if (m->value_mode) {
        bson_value_t v;
        v.value_type = BSON_TYPE_DOCUMENT;
        v.value.v_doc.data = (uint8_t *)bson_get_data(doc);
        v.value.v_doc.data_len = doc->len;
        ok = mf_matcher_match_value(m, &v);
    } else {
        ctx_t c = {doc, NULL, true};
        ok = eval(m->root, &c, &pos);
    }
    if (details)
        details->array_pos = ok ? pos : -1;
    return ok;
}

bool
mf_matcher_match_value(const mf_matcher_t *m, const bson_value_t *v)
{
    int32_t pos = -1;

    if (m->value_mode) {
        ctx_t c = {NULL, v, true};
        return eval(m->root, &c, &pos);
    }
    if (v->value_type == BSON_TYPE_DOCUMENT || (v->value_type == BSON_TYPE_ARRAY && !m->objects_only)) {
        bson_t sub;
        if (!bson_init_static(&sub, v->value.v_doc.data, v->value.v_doc.data_len))
            return false;
        ctx_t c = {&sub, NULL, true};
        return eval(m->root, &c, &pos);
    }
    return false;
}

/* ---- validation failure details ---- */

static void filter_details(const bson_t *filter, const bson_t *doc, bson_t *out, uint32_t max_bytes, bool inverted);

/* Whether the one-clause filter {k: v} matches doc. */
static bool
clause_matches(const char *k, const bson_value_t *v, const bson_t *doc)
{
    bson_t one;
    mf_error_t err;
    bson_init(&one);
    bson_append_value(&one, k, -1, v);
    mf_matcher_t *m = mf_matcher_new(&one, &err);
    bson_destroy(&one);
    bool ok = m == NULL || mf_matcher_match(m, doc, NULL);
    mf_matcher_free(m);
    return ok;
}

/*
 * The rest of an $expr clause's details, as doc_validation_error.cpp's
 * ExprMatchExpression visit: the expression's value as expressionResult
 * (none when missing), or, if evaluating it fails, reason "failed to
 * evaluate aggregation expression" and the error as details {code,
 * codeName, errmsg} (the write is then still a 121, SERVER-51839).
 */
static void
expr_details(const bson_value_t *v, const bson_t *doc, bson_t *out, uint32_t max_bytes, bool inverted)
{
    mf_error_t err;
    bson_value_t res;
    bson_t det;
    mf_err_clear(&err);
    mf_expr_t *e = mf_expr_parse(v, &err);
    if (e != NULL && mf_expr_eval(e, doc, &res, &err) == 0) {
        BSON_APPEND_UTF8(out, "reason", inverted ? "expression did match" : "expression did not match");
        if (res.value_type != BSON_TYPE_EOD &&
            ((res.value_type != BSON_TYPE_DOCUMENT && res.value_type != BSON_TYPE_ARRAY) ||
             res.value.v_doc.data_len < max_bytes / 4))
            bson_append_value(out, "expressionResult", -1, &res);
        bson_value_destroy(&res);
    } else {
        BSON_APPEND_UTF8(out, "reason", "failed to evaluate aggregation expression");
        BSON_APPEND_DOCUMENT_BEGIN(out, "details", &det);
        BSON_APPEND_INT32(&det, "code", err.code);
        BSON_APPEND_UTF8(&det, "codeName", mf_err_codename(err.code));
        BSON_APPEND_UTF8(&det, "errmsg", err.msg);
        bson_append_document_end(out, &det);
    }
    mf_expr_free(e);
}

/*
 * $and, $or, $nor {k: [filters]}: the clauses that decided the outcome, as
 * mongod's doc_validation_error.cpp: failing (clausesNotSatisfied) or, for
 * $nor and under an inversion, matching (clausesSatisfied) ones, each
 * {index, details}.
 */
static void
logical_details(const char *k, const bson_value_t *v, const bson_t *doc, bson_t *out, uint32_t max_bytes, bool inverted)
{
    bool nor = strcmp(k, "$nor") == 0;
    bool want_matching = nor != inverted; /* which clauses explain the outcome */
    bson_iter_t it;
    bson_t arr;
    int idx = 0, n = 0;
    BSON_APPEND_UTF8(out, "operatorName", k);
    BSON_APPEND_ARRAY_BEGIN(out, want_matching ? "clausesSatisfied" : "clausesNotSatisfied", &arr);
    if (v->value_type == BSON_TYPE_ARRAY && bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        while (bson_iter_next(&it)) {
            bson_t sub, det;
            const uint8_t *d;
            uint32_t len;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                continue;
            bson_iter_document(&it, &len, &d);
            if (!bson_init_static(&sub, d, len))
                continue;
            mf_error_t err;
            mf_matcher_t *m = mf_matcher_new(&sub, &err);
            bool ok = m == NULL || mf_matcher_match(m, doc, NULL);
            mf_matcher_free(m);
            if (ok == want_matching && arr.len < max_bytes) {
                char key[16];
                bson_t e;
                snprintf(key, sizeof(key), "%d", n++);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &e);
                BSON_APPEND_INT32(&e, "index", idx);
                filter_details(&sub, doc, &det, max_bytes / 2, want_matching);
                BSON_APPEND_DOCUMENT(&e, "details", &det);
                bson_destroy(&det);
                bson_append_document_end(&arr, &e);
            }
            idx++;
        }
    }
    bson_append_array_end(out, &arr);
}

/* The values a leaf operator considers at a path, as doc_validation_error.cpp's createValuesArray. */
typedef struct considered {
    bson_t vals;     /* array "0", "1" ... of at most kMaxConsidered values */
    int n;
    bool present;    /* the path exists (pathExists: the leaf itself counts, an empty array too) */
    bool omit;       /* LeafArrayBehavior::kTraverseOmitArray: a leaf array's elements, not the array */
    bool truncated;  /* more than kMaxConsidered (consideredValuesTruncated) */
} considered_t;

/* internalQueryMaxDocValidationErrorConsideredValues' default. */
enum { kMaxConsidered = 10 };

static void
considered_add(considered_t *c, const bson_value_t *v)
{
    char key[16];
    if (c->n >= kMaxConsidered) {
        c->truncated = true;
        return;
    }
    snprintf(key, sizeof(key), "%d", c->n++);
    bson_append_value(&c->vals, key, -1, v);
}

static bool
considered_visit(void *arg, const bson_value_t *v, int32_t array_pos, bool whole)
{
    considered_t *c = arg;
    bson_iter_t it;
    (void)array_pos;
    if (v == NULL)
        return false;
    c->present = true;
    if (c->omit && !whole && v->value_type == BSON_TYPE_ARRAY &&
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        while (bson_iter_next(&it))
            considered_add(c, bson_iter_value(&it));
    } else {
        considered_add(c, v);
    }
    return c->truncated;
}

/* Appends name (consideredType / expectedType) for one distinct type name, else names+"s" as a sorted array. */
static void
append_type_names(bson_t *out, const char *one, const char *many, const char **names, int n)
{
    /* Sorted and distinct, as the std::set<std::string> mongod fills. */
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m == 0 || strcmp(names[m - 1], names[i]) != 0)
            names[m++] = names[i];
    }
    if (m == 1) {
        BSON_APPEND_UTF8(out, one, names[0]);
    } else if (m > 1) {
        bson_t arr;
        char key[16];
        BSON_APPEND_ARRAY_BEGIN(out, many, &arr);
        for (int i = 0; i < m; i++) {
            snprintf(key, sizeof(key), "%d", i);
            BSON_APPEND_UTF8(&arr, key, names[i]);
        }
        bson_append_array_end(out, &arr);
    }
}

/* The type names of the considered values (consideredType / consideredTypes); none when there are none. */
static void
append_considered_types(bson_t *out, const considered_t *c)
{
    const char *names[kMaxConsidered];
    bson_iter_t it;
    int n = 0;
    if (bson_iter_init(&it, &c->vals)) {
        while (bson_iter_next(&it) && n < kMaxConsidered)
            names[n++] = mf_type_name(bson_iter_type(&it));
    }
    append_type_names(out, "consideredType", "consideredTypes", names, n);
}

/*
 * The reason and considered values of a leaf clause {k: {opname: ...}} that
 * failed on doc (inverted: matched it), as doc_validation_error.cpp's
 * generatePathError and its kin: "field was missing"; "type did not match"
 * with consideredType(s) and expectedType(s) when no value has a type the
 * operator reads; else the operator's reason; then consideredValue (one
 * value) or consideredValues (the elements of leaf arrays for most
 * operators, at most 10, consideredValuesTruncated past that).
 */
static void
leaf_details(const char *opname, const char *k, const bson_t *doc, bson_t *out, uint32_t max_bytes, bool inverted)
{
    /* operator, reason, inverted reason, leaf arrays whole (kNoTraversal), expected types (sorted names) */
    static const struct {
        const char *op, *reason, *inv;
        bool whole;
        const char *types[6];
    } ops[] = {
        {"$eq", "comparison failed", "comparison succeeded", false, {NULL}},
        {"$gt", "comparison failed", "comparison succeeded", false, {NULL}},
        {"$gte", "comparison failed", "comparison succeeded", false, {NULL}},
        {"$lt", "comparison failed", "comparison succeeded", false, {NULL}},
        {"$lte", "comparison failed", "comparison succeeded", false, {NULL}},
        {"$ne", "comparison succeeded", "comparison failed", false, {NULL}},
        {"$type", "type did not match", "type did match", false, {NULL}},
        {"$regex", "regular expression did not match", "regular expression did match", false, {"regex", "string", "symbol", NULL}},
        {"$in", "no matching value found in array", "matching value found in array", false, {NULL}},
        {"$nin", "matching value found in array", "no matching value found in array", false, {NULL}},
        {"$size", "array length was not equal to given size", "array length was equal to given size", true, {"array", NULL}},
        {"$all", "array did not contain all specified values", "array did contain all specified values", true, {NULL}},
        {"$mod", "$mod did not evaluate to expected remainder", "$mod did evaluate to expected remainder", false,
         {"decimal", "double", "int", "long", NULL}},
        {"$elemMatch", "array did not satisfy the child predicate", "array did satisfy the child predicate", true, {"array", NULL}},
        {"$bitsAllSet", "bitwise operator failed to match", "bitwise operator matched successfully", false,
         {"binData", "decimal", "double", "int", "long", NULL}},
        {"$bitsAllClear", "bitwise operator failed to match", "bitwise operator matched successfully", false,
         {"binData", "decimal", "double", "int", "long", NULL}},
        {"$bitsAnySet", "bitwise operator failed to match", "bitwise operator matched successfully", false,
         {"binData", "decimal", "double", "int", "long", NULL}},
        {"$bitsAnyClear", "bitwise operator failed to match", "bitwise operator matched successfully", false,
         {"binData", "decimal", "double", "int", "long", NULL}},
        {"$geoWithin", "none of the considered geometries were contained within the expression\u2019s geometry",
         "at least one of considered geometries was contained within the expression\u2019s geometry", false, {NULL}},
        {"$within", "none of the considered geometries were contained within the expression\u2019s geometry",
         "at least one of considered geometries was contained within the expression\u2019s geometry", false, {NULL}},
        {"$geoIntersects", "none of the considered geometries intersected the expression\u2019s geometry",
         "at least one of considered geometries intersected the expression\u2019s geometry", false, {NULL}},
    };
    considered_t c;
    int o = -1;
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]) && o < 0; i++) {
        if (strcmp(opname, ops[i].op) == 0)
            o = (int)i;
    }
    memset(&c, 0, sizeof(c));
    bson_init(&c.vals);
    c.omit = o < 0 || !ops[o].whole;
    mf_path_walk_whole(doc, k, considered_visit, &c);
    if (strcmp(opname, "$exists") == 0) {
        BSON_APPEND_UTF8(out, "reason", c.present ? "path does exist" : "path does not exist");
        goto done;
    }
    if (!c.present) {
        BSON_APPEND_UTF8(out, "reason", "field was missing");
        goto done;
    }
    bool reasoned = false;
    if (o >= 0 && ops[o].types[0] != NULL) {
        bson_iter_t it;
        bool typed = false;
        if (bson_iter_init(&it, &c.vals)) {
            while (bson_iter_next(&it) && !typed) {
                const char *tn = mf_type_name(bson_iter_type(&it));
                for (int t = 0; ops[o].types[t] != NULL && !typed; t++)
                    typed = strcmp(tn, ops[o].types[t]) == 0;
            }
        }
        if (!typed) {
            const char *names[6];
            int n = 0;
            BSON_APPEND_UTF8(out, "reason", "type did not match");
            append_considered_types(out, &c);
            while (ops[o].types[n] != NULL) {
                names[n] = ops[o].types[n];
                n++;
            }
            append_type_names(out, "expectedType", "expectedTypes", names, n);
            reasoned = true;
        }
    }
    if (!reasoned && o >= 0 && (strcmp(opname, "$geoWithin") == 0 || strcmp(opname, "$within") == 0 ||
                                strcmp(opname, "$geoIntersects") == 0)) {
        /* appendGeoTypeError: none of the values (nor the top-level field of that name) is a geometry. */
        bool geometry = false;
        bson_iter_t it;
        if (bson_iter_init(&it, &c.vals)) {
            while (bson_iter_next(&it) && !geometry) {
                mf_geo_t *g = NULL;
                mf_error_t ge;
                geometry = mf_geo_parse_stored(bson_iter_value(&it), &g, &ge) == 0;
                mf_geo_free(g);
            }
        }
        if (!geometry && bson_iter_init_find(&it, doc, k)) {
            mf_geo_t *g = NULL;
            mf_error_t ge;
            geometry = mf_geo_parse_stored(bson_iter_value(&it), &g, &ge) == 0;
            mf_geo_free(g);
        }
        if (!geometry) {
            BSON_APPEND_UTF8(out, "reason", "could not find a valid geometry at the given path");
            reasoned = true;
        }
    }
    if (!reasoned)
        BSON_APPEND_UTF8(out, "reason",
                         o < 0 ? (inverted ? "clause did match" : "clause did not match")
                               : inverted ? ops[o].inv : ops[o].reason);
    if (c.vals.len < max_bytes / 4) {
        bson_iter_t it;
        if (c.n == 1 && bson_iter_init(&it, &c.vals) && bson_iter_next(&it))
            bson_append_value(out, "consideredValue", -1, bson_iter_value(&it));
        else
            BSON_APPEND_ARRAY(out, "consideredValues", &c.vals);
        if (c.truncated)
            BSON_APPEND_BOOL(out, "consideredValuesTruncated", true);
    }
    if (strcmp(opname, "$type") == 0)
        append_considered_types(out, &c);
done:
    bson_destroy(&c.vals);
}

/*
 * Fills out (initialised here) with the details of one clause {k: v} that
 * failed on doc, or, inverted (under $not or $nor), that matched it.
 */
static void
clause_details(const char *k, const bson_value_t *v, const bson_t *doc, bson_t *out, uint32_t max_bytes, bool inverted)
{
    bson_init(out);
    if (strcmp(k, "$jsonSchema") == 0) {
        mf_error_t err;
        mf_jsonschema_t *js = mf_jsonschema_new(v, &err);
        BSON_APPEND_UTF8(out, "operatorName", "$jsonSchema");
        if (js != NULL) {
            /* Without collation, as it matched (eval's K_SCHEMA). */
            const mf_collation_t *saved = mf_collation_current();
            mf_collation_set_current(NULL);
            mf_jsonschema_explain(js, doc, out, max_bytes);
            mf_collation_set_current(saved);
        }
        mf_jsonschema_free(js);
        return;
    }
    if (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) {
        logical_details(k, v, doc, out, max_bytes, inverted);
        return;
    }
    const char *opname = k;
    bson_iter_t it;
    if (k[0] != '$') {
        /* {a: /re/} is mongod's $regex (expression_parser.cpp's parseRegexElement annotation). */
        opname = v->value_type == BSON_TYPE_REGEX ? "$regex" : "$eq";
        if (v->value_type == BSON_TYPE_DOCUMENT && bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
            bson_iter_next(&it) && bson_iter_key(&it)[0] == '$')
            opname = bson_iter_key(&it);
        if (strcmp(opname, "$not") == 0) {
            /* {k: {$not: x}}: the child {k: x}, with its outcome the other way round. */
            bson_t child, det;
            bson_init(&child);
            bson_append_value(&child, k, -1, bson_iter_value(&it));
            BSON_APPEND_UTF8(out, "operatorName", "$not");
            filter_details(&child, doc, &det, max_bytes / 2, !inverted);
            BSON_APPEND_DOCUMENT(out, "details", &det);
            bson_destroy(&det);
            bson_destroy(&child);
            return;
        }
    }
    BSON_APPEND_UTF8(out, "operatorName", opname);
    bson_t spec;
    BSON_APPEND_DOCUMENT_BEGIN(out, "specifiedAs", &spec);
    if (v->value_type != BSON_TYPE_DOCUMENT || v->value.v_doc.data_len < max_bytes / 4)
        bson_append_value(&spec, k, -1, v);
    bson_append_document_end(out, &spec);
    if (strcmp(k, "$expr") == 0) {
        expr_details(v, doc, out, max_bytes, inverted);
        return;
    }
    if (k[0] == '$') {
        BSON_APPEND_UTF8(out, "reason", inverted ? "clause did match" : "clause did not match");
        return;
    }
    leaf_details(opname, k, doc, out, max_bytes, inverted);
}

/*
 * The details of a filter that failed on doc (inverted: that matched it):
 * its one clause's, or, for several, an implicit $and's failing
 * (inverted: matching) clauses as {index, details}.
 */
/*
 * Appends to flat (initialised by the caller) the clauses of filter as
 * mongod's MatchExpressionParser builds its top-level $and: one per
 * operator of a field's operator object ({a: {$gt: 1, $lt: 5}} is two
 * clauses, {a: {$gt: 1}} and {a: {$lt: 5}}), $regex with its $options as
 * one; $comment is left out. Keys repeat where a field has several
 * operators.
 */
static void
flatten_clauses(const bson_t *filter, bson_t *flat)
{
    bson_iter_t it, sub, opt;
    if (!bson_iter_init(&it, filter))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$comment") == 0)
            continue;
        bool split = false;
        if (k[0] != '$' && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) && bson_iter_next(&sub)) {
            const char *first = bson_iter_key(&sub);
            /* An operator object of more than one key; a DBRef ({$ref, $id}) is a value. */
            split = first[0] == '$' && strcmp(first, "$ref") != 0 && strcmp(first, "$id") != 0 &&
                    strcmp(first, "$db") != 0 && bson_iter_next(&sub);
        }
        if (!split) {
            bson_append_value(flat, k, -1, bson_iter_value(&it));
            continue;
        }
        bool has_regex = bson_iter_recurse(&it, &opt) && bson_iter_find(&opt, "$regex");
        bson_iter_recurse(&it, &sub);
        while (bson_iter_next(&sub)) {
            const char *op = bson_iter_key(&sub);
            bson_t one;
            if (has_regex && strcmp(op, "$options") == 0)
                continue;
            BSON_APPEND_DOCUMENT_BEGIN(flat, k, &one);
            bson_append_value(&one, op, -1, bson_iter_value(&sub));
            if (strcmp(op, "$regex") == 0 && bson_iter_recurse(&it, &opt) && bson_iter_find(&opt, "$options"))
                bson_append_value(&one, "$options", -1, bson_iter_value(&opt));
            bson_append_document_end(flat, &one);
        }
    }
}

static void
filter_details(const bson_t *filter_in, const bson_t *doc, bson_t *out, uint32_t max_bytes, bool inverted)
{
    bson_iter_t it;
    int nclauses = 0;
    bson_t flat;

    bson_init(&flat);
    flatten_clauses(filter_in, &flat);
    const bson_t *filter = &flat;
    if (bson_iter_init(&it, filter)) {
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "$comment") != 0)
                nclauses++;
        }
    }
    if (nclauses == 1 && bson_iter_init(&it, filter)) {
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "$comment") != 0) {
                clause_details(bson_iter_key(&it), bson_iter_value(&it), doc, out, max_bytes, inverted);
                bson_destroy(&flat);
                return;
            }
        }
    }
    bson_t arr;
    int idx = 0, n = 0;
    bson_init(out);
    BSON_APPEND_UTF8(out, "operatorName", "$and");
    BSON_APPEND_ARRAY_BEGIN(out, inverted ? "clausesSatisfied" : "clausesNotSatisfied", &arr);
    if (bson_iter_init(&it, filter)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "$comment") == 0)
                continue;
            bool ok = clause_matches(k, bson_iter_value(&it), doc);
            if (ok == inverted && arr.len < max_bytes) {
                char key[16];
                bson_t e, det;
                snprintf(key, sizeof(key), "%d", n++);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &e);
                BSON_APPEND_INT32(&e, "index", idx);
                clause_details(k, bson_iter_value(&it), doc, &det, max_bytes / 2, inverted);
                BSON_APPEND_DOCUMENT(&e, "details", &det);
                bson_destroy(&det);
                bson_append_document_end(&arr, &e);
            }
            idx++;
        }
    }
    bson_append_array_end(out, &arr);
    bson_destroy(&flat);
}

void
mf_matcher_failure_details(const bson_t *filter, const bson_t *doc, bson_t *out, uint32_t max_bytes)
{
    filter_details(filter, doc, out, max_bytes, false);
}

/* ---- the read-only view (match.h) ---- */

struct mf_match_node {
    node_t n; /* never instantiated: mf_match_node_t pointers are node_t pointers */
};

static const node_t *
as_node(const mf_match_node_t *p)
{
    return (const node_t *)(const void *)p;
}

static const mf_match_node_t *
as_view_node(const node_t *n)
{
    return (const mf_match_node_t *)(const void *)n;
}

const mf_match_node_t *
mf_matcher_root(const mf_matcher_t *m)
{
    return as_view_node(m->root);
}

const mf_match_node_t *
mf_match_node_kid(const mf_match_node_t *p, size_t i)
{
    return as_view_node(as_node(p)->kids[i]);
}

const mf_match_node_t *
mf_match_node_orig(const mf_match_node_t *p, size_t i)
{
    return as_view_node(as_node(p)->orig[i]);
}

void
mf_match_node_in_regex(const mf_match_node_t *p, size_t i, const char **pattern, const char **flags)
{
    const rx_t *r = as_node(p)->rxs[i];
    *pattern = r->pattern;
    *flags = r->flags;
}

/* The public kind of a node (the two enums differ in order and in what they tell apart). */
static mf_match_kind_t
view_kind(const node_t *n)
{
    switch (n->kind) {
    case K_AND: return MF_MATCH_AND;
    case K_OR: return MF_MATCH_OR;
    case K_NOR: return MF_MATCH_NOR;
    case K_NOT: return MF_MATCH_NOT;
    case K_TRUE: return MF_MATCH_ALWAYS_TRUE;
    case K_FALSE: return MF_MATCH_ALWAYS_FALSE;
    case K_EXPR: return MF_MATCH_EXPR;
    case K_SCHEMA: return MF_MATCH_JSON_SCHEMA;
    case K_SAMPLE: return MF_MATCH_SAMPLE_RATE;
    case K_EQ: return MF_MATCH_EQ;
    case K_LT: return MF_MATCH_LT;
    case K_LTE: return MF_MATCH_LTE;
    case K_GT: return MF_MATCH_GT;
    case K_GTE: return MF_MATCH_GTE;
    case K_IN: return MF_MATCH_IN;
    case K_REGEX: return MF_MATCH_REGEX;
    case K_TYPE: return MF_MATCH_TYPE;
    case K_MOD: return MF_MATCH_MOD;
    case K_BITS_ALL_SET: return MF_MATCH_BITS_ALL_SET;
    case K_BITS_ALL_CLEAR: return MF_MATCH_BITS_ALL_CLEAR;
    case K_BITS_ANY_SET: return MF_MATCH_BITS_ANY_SET;
    case K_BITS_ANY_CLEAR: return MF_MATCH_BITS_ANY_CLEAR;
    case K_GEO: return mf_geo_query_near(n->geo) != NULL ? MF_MATCH_GEO_NEAR : MF_MATCH_GEO;
    case K_EXISTS: return MF_MATCH_EXISTS;
    case K_SIZE: return MF_MATCH_SIZE;
    case K_ELEM_OBJ: return MF_MATCH_ELEM_MATCH_OBJECT;
    case K_ELEM_VAL: return MF_MATCH_ELEM_MATCH_VALUE;
    }
    return MF_MATCH_AND;
}

void
mf_match_node_view(const mf_match_node_t *p, mf_match_view_t *out)
{
    const node_t *n = as_node(p);

    memset(out, 0, sizeof(*out));
    out->kind = view_kind(n);
    out->path = n->path;
    out->nkids = n->nkids;
    out->max_distance = -1;
    if (n->val.value_type != BSON_TYPE_EOD)
        out->value = &n->val;
    switch (n->kind) {
    case K_IN:
        out->in_values = n->vals;
        out->n_in_values = n->nvals;
        out->n_in_regexes = n->nrxs;
        out->or_merged = n->or_merged;
        out->n_orig = n->norig;
        break;
    case K_REGEX:
        out->regex = n->rx->pattern;
        out->flags = n->rx->flags;
        break;
    case K_TYPE:
        out->types = n->types;
        out->ntypes = n->ntypes;
        out->type_number = n->type_number;
        break;
    case K_SIZE:
        out->size = n->size;
        break;
    case K_MOD:
        out->divisor = n->divisor;
        out->remainder = n->remainder;
        break;
    case K_BITS_ALL_SET:
    case K_BITS_ALL_CLEAR:
    case K_BITS_ANY_SET:
    case K_BITS_ANY_CLEAR:
        out->bit_positions = n->bitpos;
        out->n_bit_positions = n->nbitpos;
        break;
    case K_GEO: {
        const mf_geo_near_t *near = mf_geo_query_near(n->geo);
        bson_iter_t it;
        if (near == NULL)
            break;
        out->max_distance = near->max;
        if (n->val.value_type == BSON_TYPE_DOCUMENT &&
            bson_iter_init_from_data(&it, n->val.value.v_doc.data, n->val.value.v_doc.data_len))
            while (bson_iter_next(&it))
                if (strcmp(bson_iter_key(&it), "$nearSphere") == 0)
                    out->near_sphere = true;
        break;
    }
    default:
        break;
    }
    out->text = n->shown == SHOWN_TEXT;
    out->sample = n->shown == SHOWN_SAMPLE;
    out->rate = n->rate;
}
