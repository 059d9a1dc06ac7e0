/*
 * plan_cq.c: a query as mongod's planner errors show it.
 *
 * mongod reports a failure of QueryPlanner::plan (a hint naming no index,
 * notablescan, min/max) as "error processing query: <CanonicalQuery::
 * toString(forErrMsg)> planner returned error :: caused by :: <reason>"
 * (get_executor.cpp, PrepareExecutionHelper::finishPrepare). The canonical
 * query's rendering (canonical_query.cpp) is
 *
 *     ns=<db.coll>[ batchSize=n][ limit=n][ skip=n]Tree: <tree>Sort: <sort>\n
 *     Proj: <projection>\n[Collation: <collation>\n]
 *
 * where <tree> is MatchExpression::debugString of the filter after
 * MatchExpression::optimize and sortTree: one line per node, four spaces of
 * indentation per level; nested $and / $or absorbed into their parent, a
 * one-child $and / $or replaced by its child, an empty $and kept ("$and"),
 * an empty $or "$alwaysFalse", a one-child $nor a $not; equalities on one
 * path under a $or joined into a $in; a one-value $in an equality; the
 * children of $and / $or / $nor ordered by (MatchType, path, children,
 * number of children), MatchType in the enum order of expression.h.
 *
 * The filter is read here from its BSON (it has already been parsed and
 * checked by the matcher): the common operators are rendered as mongod
 * renders them; others ($expr, $where, geo, $jsonSchema, $text, bit tests)
 * are shown as their operator and value, which mongod's text does not
 * match exactly. The reason always follows whole (the rendering is cut to
 * leave it room), so clients matching the reason as a suffix still do.
 */
#include "common/alloc.h"
#include "common/fmt.h"
#include "doc/value.h"
#include "query/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MatchExpression::MatchType, in expression.h's order (the sort key). */
enum {
    MT_AND,
    MT_OR,
    MT_ELEM_MATCH_OBJECT,
    MT_ELEM_MATCH_VALUE,
    MT_SIZE,
    MT_EQ,
    MT_LTE,
    MT_LT,
    MT_GT,
    MT_GTE,
    MT_REGEX,
    MT_MOD,
    MT_EXISTS,
    MT_IN,
    MT_BITS_ALL_SET,
    MT_BITS_ALL_CLEAR,
    MT_BITS_ANY_SET,
    MT_BITS_ANY_CLEAR,
    MT_ENCRYPTED_BETWEEN,
    MT_NOT,
    MT_NOR,
    MT_TYPE,
    MT_GEO,
    MT_WHERE,
    MT_EXPRESSION,
    MT_ALWAYS_FALSE,
    MT_ALWAYS_TRUE,
    MT_GEO_NEAR,
    MT_TEXT,
    MT_OTHER, /* $jsonSchema and anything this file does not model */
};

typedef struct node {
    int type;
    const char *path;   /* borrowed from the filter ("" for none) */
    const char *op;     /* MT_OTHER and the bit tests: the operator's name */
    bson_value_t v;     /* borrowed: comparison value, $size, $mod [d, r], $in / $type array, regex */
    const char *re, *re_opts; /* MT_REGEX */
    struct node **kids; /* owned */
    size_t n, cap;
    bson_t *owned;      /* the $in array an $or of equalities became (v points into it) */
} node_t;

static node_t *
node_new(int type, const char *path)
{
    node_t *nd = mf_calloc(1, sizeof(*nd));
    nd->type = type;
    nd->path = path ? path : "";
    return nd;
}

static void
node_free(node_t *nd)
{
    if (nd == NULL)
        return;
    for (size_t i = 0; i < nd->n; i++)
        node_free(nd->kids[i]);
    free(nd->kids);
    if (nd->owned != NULL)
        bson_destroy(nd->owned);
    free(nd);
}

static void
node_add(node_t *parent, node_t *kid)
{
    if (kid == NULL)
        return;
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 4;
        parent->kids = mf_realloc(parent->kids, parent->cap * sizeof(*parent->kids));
    }
    parent->kids[parent->n++] = kid;
}

static node_t *parse_doc(const bson_t *doc, int depth);

static node_t *
parse_doc_value(const bson_value_t *v, int depth)
{
    bson_t d;
    if ((v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) ||
        !bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len))
        return node_new(MT_AND, NULL);
    return parse_doc(&d, depth);
}

/* A document whose first field is an operator other than a top-level one ($and, ...): an expression of a path. */
static bool
is_operator_doc(const bson_value_t *v)
{
    bson_t d;
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_DOCUMENT || !bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len) ||
        !bson_iter_init(&it, &d) || !bson_iter_next(&it))
        return false;
    const char *k = bson_iter_key(&it);
    return k[0] == '$' && strcmp(k, "$and") != 0 && strcmp(k, "$or") != 0 && strcmp(k, "$nor") != 0 &&
           strcmp(k, "$where") != 0 && strcmp(k, "$expr") != 0 && strcmp(k, "$text") != 0 &&
           strcmp(k, "$comment") != 0 && strcmp(k, "$jsonSchema") != 0 && strcmp(k, "$ref") != 0 &&
           strcmp(k, "$id") != 0 && strcmp(k, "$db") != 0;
}

static node_t *
leaf(int type, const char *path, const bson_value_t *v)
{
    node_t *nd = node_new(type, path);
    if (v->value_type == BSON_TYPE_REGEX && (type == MT_REGEX)) {
        nd->re = v->value.v_regex.regex;
        nd->re_opts = v->value.v_regex.options ? v->value.v_regex.options : "";
    }
    nd->v = *v;
    return nd;
}

static node_t *parse_path_ops(const char *path, const bson_value_t *v, int depth);

/* One "path: value" of a filter. */
static node_t *
parse_path(const char *path, const bson_value_t *v, int depth)
{
    if (v->value_type == BSON_TYPE_REGEX)
        return leaf(MT_REGEX, path, v);
    if (is_operator_doc(v))
        return parse_path_ops(path, v, depth);
    return leaf(MT_EQ, path, v);
}

static node_t *
wrap_not(node_t *kid)
{
    node_t *nd = node_new(MT_NOT, NULL);
    node_add(nd, kid);
    return nd;
}

/* {$op: value, ...} on path: an $and of one node per operator. */
static node_t *
parse_path_ops(const char *path, const bson_value_t *v, int depth)
{
    node_t *and = node_new(MT_AND, NULL);
    bson_t d;
    bson_iter_t it;
    const bson_value_t *regex = NULL, *options = NULL;
    if (depth > 50 || !bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_init(&it, &d))
        return and;
    while (bson_iter_next(&it)) {
        const char *op = bson_iter_key(&it);
        const bson_value_t *x = bson_iter_value(&it);
        if (strcmp(op, "$eq") == 0)
            node_add(and, leaf(MT_EQ, path, x));
        else if (strcmp(op, "$lt") == 0)
            node_add(and, leaf(MT_LT, path, x));
        else if (strcmp(op, "$lte") == 0)
            node_add(and, leaf(MT_LTE, path, x));
        else if (strcmp(op, "$gt") == 0)
            node_add(and, leaf(MT_GT, path, x));
        else if (strcmp(op, "$gte") == 0)
            node_add(and, leaf(MT_GTE, path, x));
        else if (strcmp(op, "$ne") == 0)
            node_add(and, wrap_not(leaf(MT_EQ, path, x)));
        else if (strcmp(op, "$in") == 0)
            node_add(and, leaf(MT_IN, path, x));
        else if (strcmp(op, "$nin") == 0)
            node_add(and, wrap_not(leaf(MT_IN, path, x)));
        else if (strcmp(op, "$exists") == 0) {
            node_t *e = leaf(MT_EXISTS, path, x);
            node_add(and, mf_value_truthy(x) ? e : wrap_not(e));
        } else if (strcmp(op, "$regex") == 0)
            regex = x;
        else if (strcmp(op, "$options") == 0)
            options = x;
        else if (strcmp(op, "$mod") == 0)
            node_add(and, leaf(MT_MOD, path, x));
        else if (strcmp(op, "$size") == 0)
            node_add(and, leaf(MT_SIZE, path, x));
        else if (strcmp(op, "$type") == 0)
            node_add(and, leaf(MT_TYPE, path, x));
        else if (strcmp(op, "$not") == 0)
            node_add(and, wrap_not(x->value_type == BSON_TYPE_REGEX ? leaf(MT_REGEX, path, x)
                                                                     : parse_path_ops(path, x, depth + 1)));
        else if (strcmp(op, "$all") == 0) {
            bson_t arr;
            bson_iter_t ai;
            size_t k = 0;
            if (x->value_type == BSON_TYPE_ARRAY && bson_init_static(&arr, x->value.v_doc.data, x->value.v_doc.data_len) &&
                bson_iter_init(&ai, &arr)) {
                while (bson_iter_next(&ai)) {
                    const bson_value_t *e = bson_iter_value(&ai);
                    bson_iter_t ei;
                    k++;
                    if (e->value_type == BSON_TYPE_DOCUMENT && bson_iter_init_from_data(&ei, e->value.v_doc.data, e->value.v_doc.data_len) &&
                        bson_iter_next(&ei) && strcmp(bson_iter_key(&ei), "$elemMatch") == 0)
                        node_add(and, parse_path_ops(path, e, depth + 1));
                    else
                        node_add(and, leaf(e->value_type == BSON_TYPE_REGEX ? MT_REGEX : MT_EQ, path, e));
                }
            }
            if (k == 0)
                node_add(and, node_new(MT_ALWAYS_FALSE, NULL));
        } else if (strcmp(op, "$elemMatch") == 0) {
            if (is_operator_doc(x)) {
                node_t *em = node_new(MT_ELEM_MATCH_VALUE, path);
                node_t *subs = parse_path_ops("", x, depth + 1);
                /* ElemMatchValueMatchExpression keeps one child per operator. */
                for (size_t i = 0; i < subs->n; i++)
                    node_add(em, subs->kids[i]);
                subs->n = 0;
                node_free(subs);
                node_add(and, em);
            } else {
                node_t *em = node_new(MT_ELEM_MATCH_OBJECT, path);
                node_add(em, parse_doc_value(x, depth + 1));
                node_add(and, em);
            }
        } else if (strncmp(op, "$bits", 5) == 0) {
            int t = strcmp(op, "$bitsAllSet") == 0 ? MT_BITS_ALL_SET : strcmp(op, "$bitsAllClear") == 0 ? MT_BITS_ALL_CLEAR
                    : strcmp(op, "$bitsAnySet") == 0 ? MT_BITS_ANY_SET : MT_BITS_ANY_CLEAR;
            node_t *b = leaf(t, path, x);
            b->op = op;
            node_add(and, b);
        } else if (strcmp(op, "$near") == 0 || strcmp(op, "$nearSphere") == 0 || strcmp(op, "$geoNear") == 0) {
            node_t *g = leaf(MT_GEO_NEAR, path, x);
            g->op = op;
            node_add(and, g);
        } else if (strcmp(op, "$geoWithin") == 0 || strcmp(op, "$within") == 0 || strcmp(op, "$geoIntersects") == 0) {
            node_t *g = leaf(MT_GEO, path, x);
            g->op = op;
            node_add(and, g);
        } else if (strcmp(op, "$comment") != 0 && strcmp(op, "$maxDistance") != 0 && strcmp(op, "$minDistance") != 0) {
            node_t *o = leaf(MT_OTHER, path, x);
            o->op = op;
            node_add(and, o);
        }
    }
    if (regex != NULL) {
        node_t *r = node_new(MT_REGEX, path);
        if (regex->value_type == BSON_TYPE_REGEX) {
            r->re = regex->value.v_regex.regex;
            r->re_opts = regex->value.v_regex.options ? regex->value.v_regex.options : "";
        } else if (regex->value_type == BSON_TYPE_UTF8) {
            r->re = regex->value.v_utf8.str;
            r->re_opts = "";
        } else {
            r->re = r->re_opts = "";
        }
        if (options != NULL && options->value_type == BSON_TYPE_UTF8)
            r->re_opts = options->value.v_utf8.str;
        node_add(and, r);
    }
    return and;
}

static node_t *
parse_list(int type, const bson_value_t *v, int depth)
{
    node_t *nd = node_new(type, NULL);
    bson_t arr;
    bson_iter_t it;
    if (v->value_type == BSON_TYPE_ARRAY && bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len) &&
        bson_iter_init(&it, &arr)) {
        while (bson_iter_next(&it))
            node_add(nd, parse_doc_value(bson_iter_value(&it), depth + 1));
    }
    return nd;
}

/* A filter document: an $and of its fields. */
static node_t *
parse_doc(const bson_t *doc, int depth)
{
    node_t *and = node_new(MT_AND, NULL);
    bson_iter_t it;
    if (depth > 50 || !bson_iter_init(&it, doc))
        return and;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (k[0] != '$')
            node_add(and, parse_path(k, v, depth));
        else if (strcmp(k, "$and") == 0)
            node_add(and, parse_list(MT_AND, v, depth));
        else if (strcmp(k, "$or") == 0)
            node_add(and, parse_list(MT_OR, v, depth));
        else if (strcmp(k, "$nor") == 0)
            node_add(and, parse_list(MT_NOR, v, depth));
        else if (strcmp(k, "$alwaysTrue") == 0)
            node_add(and, node_new(MT_ALWAYS_TRUE, NULL));
        else if (strcmp(k, "$alwaysFalse") == 0)
            node_add(and, node_new(MT_ALWAYS_FALSE, NULL));
        else if (strcmp(k, "$comment") != 0) {
            int t = strcmp(k, "$expr") == 0    ? MT_EXPRESSION
                    : strcmp(k, "$where") == 0 ? MT_WHERE
                    : strcmp(k, "$text") == 0  ? MT_TEXT
                                               : MT_OTHER;
            node_t *o = leaf(t, NULL, v);
            o->op = k;
            node_add(and, o);
        }
    }
    return and;
}

/* --- MatchExpression::optimize --- */

static bool
in_values(const node_t *nd, bson_value_t **vals, size_t *n, size_t *nregex)
{
    bson_t arr;
    bson_iter_t it;
    *vals = NULL;
    *n = *nregex = 0;
    if (nd->v.value_type != BSON_TYPE_ARRAY || !bson_init_static(&arr, nd->v.value.v_doc.data, nd->v.value.v_doc.data_len) ||
        !bson_iter_init(&it, &arr))
        return false;
    size_t cap = 0;
    while (bson_iter_next(&it)) {
        const bson_value_t *e = bson_iter_value(&it);
        if (e->value_type == BSON_TYPE_REGEX) {
            (*nregex)++;
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            *vals = mf_realloc(*vals, cap * sizeof(**vals));
        }
        (*vals)[(*n)++] = *e;
    }
    return true;
}

static int
value_qcmp(const void *a, const void *b)
{
    return mf_value_cmp(a, b);
}

/* The first regex of a $in's array (for a $in of one regex, which becomes that regex). */
static const bson_value_t *
in_first_regex(const node_t *nd)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, nd->v.value.v_doc.data, nd->v.value.v_doc.data_len))
        return NULL;
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_REGEX(&it))
            return bson_iter_value(&it);
    return NULL;
}

static node_t *optimize(node_t *nd);

static bool
trivially_true(const node_t *nd)
{
    return nd->type == MT_ALWAYS_TRUE || (nd->type == MT_AND && nd->n == 0);
}

static node_t *
replace(node_t *old, node_t *by)
{
    node_free(old);
    return by;
}

/* An equality (not to a regex) or a regex: what an $or may join into a $in on its path. */
static bool
in_eligible(const node_t *nd)
{
    return (nd->type == MT_EQ && nd->v.value_type != BSON_TYPE_REGEX) || nd->type == MT_REGEX;
}

/*
 * The $or rewrite of 8.0's ListOfMatchExpression optimizer: the equalities
 * and regexes on one path, when there are two or more, become one $in.
 */
static void
or_to_in(node_t *nd)
{
    for (size_t i = 0; i < nd->n; i++) {
        node_t *first = nd->kids[i];
        size_t same = 0;
        if (!in_eligible(first))
            continue;
        for (size_t j = i; j < nd->n; j++)
            same += in_eligible(nd->kids[j]) && strcmp(nd->kids[j]->path, first->path) == 0;
        if (same < 2)
            continue;
        node_t *in = node_new(MT_IN, first->path);
        in->owned = bson_new();
        bson_t arr;
        int k = 0;
        size_t w = i + 1; /* kids[i] becomes the $in */
        bson_append_array_begin(in->owned, "v", 1, &arr);
        for (size_t j = i; j < nd->n; j++) {
            node_t *x = nd->kids[j];
            if (j > i && (!in_eligible(x) || strcmp(x->path, first->path) != 0)) {
                nd->kids[w++] = x;
                continue;
            }
            char key[16];
            snprintf(key, sizeof(key), "%d", k++);
            if (x->type == MT_REGEX)
                bson_append_regex(&arr, key, -1, x->re ? x->re : "", x->re_opts ? x->re_opts : "");
            else
                bson_append_value(&arr, key, -1, &x->v);
            if (x != first)
                node_free(x);
        }
        bson_append_array_end(in->owned, &arr);
        nd->n = w;
        bson_iter_t it;
        if (bson_iter_init_find(&it, in->owned, "v"))
            in->v = *bson_iter_value(&it);
        in->path = first->path; /* borrowed from the filter, as first's */
        node_free(first);
        nd->kids[i] = in;
    }
}

static node_t *
optimize_list(node_t *nd)
{
    for (size_t i = 0; i < nd->n; i++)
        nd->kids[i] = optimize(nd->kids[i]);
    if (nd->type == MT_AND || nd->type == MT_OR) {
        /* Absorb children of the same type, appended after the others. */
        node_t **kept = mf_calloc(nd->n ? nd->n : 1, sizeof(*kept));
        size_t nk = 0;
        node_t tmp = {.type = nd->type};
        for (size_t i = 0; i < nd->n; i++) {
            if (nd->kids[i]->type == nd->type) {
                for (size_t j = 0; j < nd->kids[i]->n; j++)
                    node_add(&tmp, nd->kids[i]->kids[j]);
                nd->kids[i]->n = 0;
                node_free(nd->kids[i]);
            } else {
                kept[nk++] = nd->kids[i];
            }
        }
        nd->n = 0;
        for (size_t i = 0; i < nk; i++)
            node_add(nd, kept[i]);
        for (size_t i = 0; i < tmp.n; i++)
            node_add(nd, tmp.kids[i]);
        free(tmp.kids);
        free(kept);
    }
    /* $alwaysTrue under $and, $alwaysFalse under $or / $nor drop out. */
    size_t w = 0;
    for (size_t i = 0; i < nd->n; i++) {
        node_t *k = nd->kids[i];
        if ((nd->type == MT_AND && k->type == MT_ALWAYS_TRUE) ||
            (nd->type != MT_AND && k->type == MT_ALWAYS_FALSE))
            node_free(k);
        else
            nd->kids[w++] = k;
    }
    nd->n = w;
    if (nd->n == 0)
        return replace(nd, node_new(nd->type == MT_OR ? MT_ALWAYS_FALSE : MT_AND, NULL));
    if (nd->n == 1) {
        node_t *only = nd->kids[0];
        nd->n = 0;
        if (nd->type == MT_NOR)
            return replace(nd, wrap_not(only));
        node_free(nd);
        return only;
    }
    for (size_t i = 0; i < nd->n; i++) {
        if (nd->type == MT_AND && nd->kids[i]->type == MT_ALWAYS_FALSE)
            return replace(nd, node_new(MT_ALWAYS_FALSE, NULL));
        if (nd->type == MT_OR && trivially_true(nd->kids[i]))
            return replace(nd, node_new(MT_AND, NULL));
        if (nd->type == MT_NOR && trivially_true(nd->kids[i]))
            return replace(nd, node_new(MT_ALWAYS_FALSE, NULL));
    }
    if (nd->type == MT_OR) {
        or_to_in(nd);
        if (nd->n == 1) {
            node_t *only = nd->kids[0];
            nd->n = 0;
            node_free(nd);
            return only;
        }
    }
    return nd;
}

static node_t *
optimize(node_t *nd)
{
    switch (nd->type) {
    case MT_AND:
    case MT_OR:
    case MT_NOR:
        return optimize_list(nd);
    case MT_NOT:
    case MT_ELEM_MATCH_OBJECT:
    case MT_ELEM_MATCH_VALUE:
        for (size_t i = 0; i < nd->n; i++)
            nd->kids[i] = optimize(nd->kids[i]);
        return nd;
    case MT_IN: {
        bson_value_t *vals;
        size_t n, nregex;
        if (!in_values(nd, &vals, &n, &nregex))
            return nd;
        node_t *out = nd;
        if (n == 1 && nregex == 0) {
            out = leaf(MT_EQ, nd->path, &vals[0]);
            node_free(nd);
        } else if (n == 0 && nregex == 1) {
            out = leaf(MT_REGEX, nd->path, in_first_regex(nd));
            node_free(nd);
        }
        free(vals);
        return out;
    }
    default:
        return nd;
    }
}

/* --- sortTree --- */

static int
node_cmp(const node_t *a, const node_t *b)
{
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    size_t la = strlen(a->path), lb = strlen(b->path);
    int c = memcmp(a->path, b->path, la < lb ? la : lb);
    if (c != 0)
        return c < 0 ? -1 : 1;
    if (la != lb)
        return la < lb ? -1 : 1;
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++)
        if ((c = node_cmp(a->kids[i], b->kids[i])) != 0)
            return c;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return 0;
}

static void
sort_tree(node_t *nd)
{
    for (size_t i = 0; i < nd->n; i++)
        sort_tree(nd->kids[i]);
    if (nd->type != MT_AND && nd->type != MT_OR && nd->type != MT_NOR)
        return;
    /* Stable insertion sort, as std::stable_sort (lists are short). */
    for (size_t i = 1; i < nd->n; i++) {
        node_t *k = nd->kids[i];
        size_t j = i;
        while (j > 0 && node_cmp(nd->kids[j - 1], k) > 0) {
            nd->kids[j] = nd->kids[j - 1];
            j--;
        }
        nd->kids[j] = k;
    }
}

/* --- debugString --- */

typedef struct {
    char *buf;
    size_t cap, len;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(out_t *o, const char *fmt, ...)
{
    if (o->len + 1 >= o->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len = o->len + (size_t)n < o->cap ? o->len + (size_t)n : o->cap - 1;
}

static void
put_value(out_t *o, const bson_value_t *v)
{
    char b[512];
    mf_fmt_value(v, b, sizeof(b));
    put(o, "%s", b);
}

/* One $type operand (a code or an alias) into the set: bit code + 1 (MinKey -1 as 0, MaxKey 127 as 128). */
static void
type_set_add(const bson_value_t *v, bool *all_numbers, bool set[129])
{
    int64_t code;
    if (v->value_type == BSON_TYPE_UTF8) {
        code = mf_type_alias(v->value.v_utf8.str);
        if (code == -2)
            *all_numbers = true;
        else if (code >= -1 && code <= 127)
            set[code + 1] = true;
    } else if (mf_value_as_int64(v, &code) && code >= -1 && code <= 127) {
        set[code + 1] = true;
    }
}

/* MatcherTypeSet::toBSONArray: "number" first when given, then the type codes in order. */
static void
put_type_set(out_t *o, const bson_value_t *v)
{
    bool all_numbers = false, set[129] = {false}, first = true;
    bson_iter_t it;
    if (v->value_type == BSON_TYPE_ARRAY && bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        while (bson_iter_next(&it))
            type_set_add(bson_iter_value(&it), &all_numbers, set);
    } else {
        type_set_add(v, &all_numbers, set);
    }
    put(o, "[");
    if (all_numbers) {
        put(o, " \"number\"");
        first = false;
    }
    for (int i = 0; i < 129; i++) {
        if (!set[i])
            continue;
        put(o, "%s %d", first ? "" : ",", i - 1);
        first = false;
    }
    put(o, first ? "]" : " ]");
}

static const char *
cmp_name(int type)
{
    switch (type) {
    case MT_EQ:
        return "$eq";
    case MT_LT:
        return "$lt";
    case MT_LTE:
        return "$lte";
    case MT_GT:
        return "$gt";
    default:
        return "$gte";
    }
}

static void
debug_string(out_t *o, const node_t *nd, int level)
{
    for (int i = 0; i < level; i++)
        put(o, "    ");
    switch (nd->type) {
    case MT_AND:
    case MT_OR:
    case MT_NOR:
        put(o, "%s\n", nd->type == MT_AND ? "$and" : nd->type == MT_OR ? "$or" : "$nor");
        for (size_t i = 0; i < nd->n; i++)
            debug_string(o, nd->kids[i], level + 1);
        return;
    case MT_NOT:
        put(o, "$not\n");
        for (size_t i = 0; i < nd->n; i++)
            debug_string(o, nd->kids[i], level + 1);
        return;
    case MT_ELEM_MATCH_OBJECT:
    case MT_ELEM_MATCH_VALUE:
        put(o, "%s $elemMatch (%s)\n", nd->path, nd->type == MT_ELEM_MATCH_OBJECT ? "obj" : "value");
        for (size_t i = 0; i < nd->n; i++)
            debug_string(o, nd->kids[i], level + 1);
        return;
    case MT_EQ:
    case MT_LT:
    case MT_LTE:
    case MT_GT:
    case MT_GTE:
        put(o, "%s %s ", nd->path, cmp_name(nd->type));
        put_value(o, &nd->v);
        break;
    case MT_REGEX:
        put(o, "%s regex /%s/%s", nd->path, nd->re ? nd->re : "", nd->re_opts ? nd->re_opts : "");
        break;
    case MT_EXISTS:
        put(o, "%s exists", nd->path);
        break;
    case MT_SIZE: {
        int64_t n = 0;
        mf_value_as_int64(&nd->v, &n);
        put(o, "%s $size : %lld", nd->path, (long long)n);
        break;
    }
    case MT_MOD: {
        bson_iter_t it;
        int64_t d = 0, r = 0;
        if (nd->v.value_type == BSON_TYPE_ARRAY &&
            bson_iter_init_from_data(&it, nd->v.value.v_doc.data, nd->v.value.v_doc.data_len)) {
            if (bson_iter_next(&it))
                mf_value_as_int64(bson_iter_value(&it), &d);
            if (bson_iter_next(&it))
                mf_value_as_int64(bson_iter_value(&it), &r);
        }
        put(o, "%s mod %lld %% x == %lld", nd->path, (long long)d, (long long)r);
        break;
    }
    case MT_IN: {
        bson_value_t *vals;
        size_t n, nregex;
        put(o, "%s $in [ ", nd->path);
        if (in_values(nd, &vals, &n, &nregex)) {
            /* InListData: sorted, duplicates dropped, then the regexes in their order. */
            if (n > 1)
                qsort(vals, n, sizeof(*vals), value_qcmp);
            for (size_t i = 0; i < n; i++) {
                if (i > 0 && mf_value_cmp(&vals[i - 1], &vals[i]) == 0)
                    continue;
                put_value(o, &vals[i]);
                put(o, " ");
            }
            free(vals);
            bson_iter_t it;
            if (nregex && bson_iter_init_from_data(&it, nd->v.value.v_doc.data, nd->v.value.v_doc.data_len)) {
                while (bson_iter_next(&it)) {
                    if (!BSON_ITER_HOLDS_REGEX(&it))
                        continue;
                    const bson_value_t *r = bson_iter_value(&it);
                    put(o, "/%s/%s ", r->value.v_regex.regex, r->value.v_regex.options ? r->value.v_regex.options : "");
                }
            }
        }
        put(o, "]");
        break;
    }
    case MT_TYPE:
        put(o, "%s $type: ", nd->path);
        put_type_set(o, &nd->v);
        break;
    case MT_ALWAYS_FALSE:
        put(o, "$alwaysFalse");
        break;
    case MT_ALWAYS_TRUE:
        put(o, "$alwaysTrue");
        break;
    default:
        put(o, "%s%s%s ", nd->path, nd->path[0] ? " " : "", nd->op ? nd->op : "?");
        put_value(o, &nd->v);
        break;
    }
    put(o, "\n");
}

void
mf_plan_cq_describe(const char *ns, const mf_plan_request_t *req, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0};
    const mf_plan_shown_t *sh = &req->shown;
    char doc[1024];
    if (cap == 0)
        return;
    buf[0] = '\0';
    put(&o, "ns=%s", ns);
    if (sh->has_batch_size)
        put(&o, " batchSize=%lld", (long long)sh->batch_size);
    if (sh->limit > 0)
        put(&o, " limit=%lld", (long long)sh->limit);
    if (sh->skip > 0)
        put(&o, " skip=%lld", (long long)sh->skip);
    put(&o, "Tree: ");
    bson_t empty = BSON_INITIALIZER;
    node_t *root = parse_doc(req->filter ? req->filter : &empty, 0);
    root = optimize(root);
    sort_tree(root);
    debug_string(&o, root, 0);
    node_free(root);
    const bson_t *sort = req->sort ? req->sort : &empty;
    mf_fmt_doc(sort, doc, sizeof(doc));
    put(&o, "Sort: %s\n", doc);
    mf_fmt_doc(sh->projection ? sh->projection : &empty, doc, sizeof(doc));
    put(&o, "Proj: %s\n", doc);
    if (sh->collation != NULL && !bson_empty(sh->collation)) {
        mf_fmt_doc(sh->collation, doc, sizeof(doc));
        put(&o, "Collation: %s\n", doc);
    }
}

int
mf_plan_error(mf_error_t *err, int code, const char *ns, const mf_plan_request_t *req, const char *fmt, ...)
{
    char reason[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    static const char head[] = "error processing query: ";
    static const char mid[] = " planner returned error :: caused by :: ";
    size_t fixed = sizeof(head) - 1 + sizeof(mid) - 1 + strlen(reason) + 1;
    if (ns == NULL || fixed >= sizeof(err->msg))
        return mf_err_set(err, code, "%s", reason);
    /* The query's rendering is cut to leave the reason whole. */
    char cq[sizeof(err->msg)];
    mf_plan_cq_describe(ns, req, cq, sizeof(err->msg) - fixed + 1);
    return mf_err_set(err, code, "%s%s%s%s", head, cq, mid, reason);
}
