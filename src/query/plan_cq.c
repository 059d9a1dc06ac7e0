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
 * one-child $and / $or replaced by its child, trivially true children of an
 * $and and trivially false ones of an $or / $nor dropped, an empty $and
 * kept ("$and"), an empty $or "$alwaysFalse", a one-child $nor a $not;
 * equalities and regexes on one path under a $or joined into a $in (a $in
 * that is all that is left of its $or optimised once more); a one-value $in
 * an equality, a one-regex $in a regex, an empty $in $alwaysFalse; an $expr
 * folded (Expression::optimize) with the $_internalExpr* predicates
 * RewriteExpr derives from it beside it; the children of $and / $or / $nor
 * and of an $elemMatch value form ordered by (MatchType, path, children,
 * number of children), MatchType in the enum order of expression.h.
 *
 * The filter is not read here: the matcher (doc/match.h, the one parser of
 * the query language) parsed it, and this file walks the matcher's tree
 * through its read-only view (mf_match_node_view), copying it into a small
 * tree of its own that the optimisation above rewrites. A request may carry
 * the caller's matcher; else the error path parses the filter with
 * mf_matcher_new. Each node is rendered as mongod's debugString renders it
 * (expression_leaf.cpp, expression_tree.cpp, expression_array.cpp,
 * expression_type.h, expression_geo.cpp, expression_text_base.cpp,
 * expression_expr.cpp, rewrite_expr.cpp). Approximate still: $jsonSchema,
 * shown as "$jsonSchema <schema>" (mongod shows the tree of internal schema
 * expressions it compiles to); constant folding of $expr is this server's
 * (whatever reads no field or variable, except $rand, is a constant, where
 * mongod folds operator by operator), and operators with named arguments
 * are serialized as written; a $text's language is as given or "english"
 * (mongod: the text index's default). The reason always follows whole (the
 * rendering is cut to leave it room), so clients matching the reason as a
 * suffix still do.
 */
#include "common/alloc.h"
#include "common/fmt.h"
#include "doc/expr.h"
#include "doc/match.h"
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
    MT_INTERNAL_2D_POINT_IN_ANNULUS,
    MT_INTERNAL_BUCKET_GEO_WITHIN,
    MT_INTERNAL_EXPR_EQ, /* RewriteExpr's match expressions beside an $expr */
    MT_INTERNAL_EXPR_GT,
    MT_INTERNAL_EXPR_GTE,
    MT_INTERNAL_EXPR_LT,
    MT_INTERNAL_EXPR_LTE,
    MT_OTHER, /* $jsonSchema (mongod: a tree of internal schema expressions) */
};

/* A regex of a $in: pattern and flags, borrowed from the matcher. */
typedef struct rx_ref {
    const char *re, *opts;
} rx_ref_t;

typedef struct node {
    int type;
    const char *path;   /* borrowed from the matcher ("" for none) */
    mf_match_view_t view; /* leaves: the matcher's view of the node (borrowed pointers) */
    bson_value_t v;     /* comparisons: the operand (a shallow copy, or owned when owned_v) */
    bool owned_v;
    char *owned_path;   /* a path this file made (RewriteExpr's), else NULL */
    const char *re, *re_opts; /* MT_REGEX */
    /* MT_IN: its equalities (owned array of shallow copies) and regexes (owned array) */
    bson_value_t *vals;
    size_t nvals;
    rx_ref_t *rxs;
    size_t nrxs;
    int expr_const;     /* MT_EXPRESSION: its expression folds to a constant true (1) / false (-1), else 0 */
    bool or_merged;     /* MT_IN: the equalities of $or branches (joined by the matcher, as mongod's optimize does) */
    struct node **kids; /* owned */
    size_t n, cap;
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
    free(nd->vals);
    free(nd->rxs);
    if (nd->owned_v)
        bson_value_destroy(&nd->v);
    bson_free(nd->owned_path);
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

static node_t *
wrap_not(node_t *kid)
{
    node_t *nd = node_new(MT_NOT, NULL);
    node_add(nd, kid);
    return nd;
}

/* The MatchType a matcher node is in mongod's tree. */
static int
match_type(const mf_match_view_t *w)
{
    switch (w->kind) {
    case MF_MATCH_AND: return MT_AND;
    case MF_MATCH_OR: return MT_OR;
    case MF_MATCH_NOR: return MT_NOR;
    case MF_MATCH_NOT: return MT_NOT;
    case MF_MATCH_ALWAYS_TRUE: return w->text ? MT_TEXT : w->sample ? MT_EXPRESSION : MT_ALWAYS_TRUE;
    case MF_MATCH_ALWAYS_FALSE: return w->text ? MT_TEXT : w->sample ? MT_EXPRESSION : MT_ALWAYS_FALSE;
    case MF_MATCH_EXPR: return MT_EXPRESSION;
    case MF_MATCH_SAMPLE_RATE: return MT_EXPRESSION;
    case MF_MATCH_JSON_SCHEMA: return MT_OTHER;
    case MF_MATCH_EQ: return MT_EQ;
    case MF_MATCH_LT: return MT_LT;
    case MF_MATCH_LTE: return MT_LTE;
    case MF_MATCH_GT: return MT_GT;
    case MF_MATCH_GTE: return MT_GTE;
    case MF_MATCH_IN: return MT_IN;
    case MF_MATCH_REGEX: return MT_REGEX;
    case MF_MATCH_TYPE: return MT_TYPE;
    case MF_MATCH_MOD: return MT_MOD;
    case MF_MATCH_BITS_ALL_SET: return MT_BITS_ALL_SET;
    case MF_MATCH_BITS_ALL_CLEAR: return MT_BITS_ALL_CLEAR;
    case MF_MATCH_BITS_ANY_SET: return MT_BITS_ANY_SET;
    case MF_MATCH_BITS_ANY_CLEAR: return MT_BITS_ANY_CLEAR;
    case MF_MATCH_GEO: return MT_GEO;
    case MF_MATCH_GEO_NEAR: return MT_GEO_NEAR;
    case MF_MATCH_EXISTS: return MT_EXISTS;
    case MF_MATCH_SIZE: return MT_SIZE;
    case MF_MATCH_ELEM_MATCH_OBJECT: return MT_ELEM_MATCH_OBJECT;
    case MF_MATCH_ELEM_MATCH_VALUE: return MT_ELEM_MATCH_VALUE;
    }
    return MT_OTHER;
}

/* --- $expr: Expression::optimize's constant folding and RewriteExpr --- */

/* Whether v holds a {$rand: ...} anywhere (not constant, though it reads no field). */
static bool
has_rand(const bson_value_t *v, int depth)
{
    bson_iter_t it;
    if ((v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) || depth > 50 ||
        !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return false;
    while (bson_iter_next(&it))
        if ((v->value_type == BSON_TYPE_DOCUMENT && strcmp(bson_iter_key(&it), "$rand") == 0) ||
            has_rand(bson_iter_value(&it), depth + 1))
            return true;
    return false;
}

/*
 * expr_constant: whether the expression v folds to a constant under
 * Expression::optimize (it reads no field or variable), and if so its
 * value into *out (owned by the caller; bson_value_destroy).
 */
static bool
expr_constant(const bson_value_t *v, bson_value_t *out)
{
    mf_error_t err;
    bson_t empty = BSON_INITIALIZER;
    bool ok = false;
    if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$')
        return false;
    if (has_rand(v, 0))
        return false;
    mf_expr_t *e = mf_expr_parse(v, &err);
    if (e == NULL)
        return false;
    if (mf_expr_is_constant(e) && mf_expr_eval(e, &empty, out, &err) == 0) {
        ok = out->value_type != BSON_TYPE_EOD;
        if (!ok)
            bson_value_destroy(out);
    }
    mf_expr_free(e);
    return ok;
}

/* A local field path of the current document ("$a.b", not "$$var"): its path ("a.b"). */
static const char *
expr_field_path(const bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_UTF8 || v->value.v_utf8.str[0] != '$' || v->value.v_utf8.str[1] == '$' ||
        v->value.v_utf8.str[1] == '\0')
        return NULL;
    return v->value.v_utf8.str + 1;
}

/*
 * expr_rewrite: RewriteExpr::rewrite of the $expr operand v: $and of the
 * children that rewrite (NULL if none), $or only when all do, and a
 * comparison ($eq $gt $gte $lt $lte) of one field path with a constant
 * (not an array, undefined or missing) as $_internalExpr<Op> on that path,
 * the path on the left (the operator mirrored when it was on the right).
 */
static node_t *
expr_rewrite(const bson_value_t *v, int depth)
{
    bson_iter_t it, ai;
    const char *op;
    if (depth > 50 || v->value_type != BSON_TYPE_DOCUMENT ||
        !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_next(&it))
        return NULL;
    op = bson_iter_key(&it);
    const bson_value_t *arg = bson_iter_value(&it);
    if (strcmp(op, "$and") == 0 || strcmp(op, "$or") == 0) {
        bool is_and = op[1] == 'a';
        node_t *list = node_new(is_and ? MT_AND : MT_OR, NULL);
        if (arg->value_type != BSON_TYPE_ARRAY) {
            node_t *one = expr_rewrite(arg, depth + 1);
            if (one != NULL)
                node_add(list, one);
            else if (!is_and)
                goto none;
        } else if (bson_iter_init_from_data(&ai, arg->value.v_doc.data, arg->value.v_doc.data_len)) {
            while (bson_iter_next(&ai)) {
                node_t *one = expr_rewrite(bson_iter_value(&ai), depth + 1);
                if (one != NULL)
                    node_add(list, one);
                else if (!is_and)
                    goto none;
            }
        }
        if (list->n > 0)
            return list;
    none:
        node_free(list);
        return NULL;
    }
    int type = strcmp(op, "$eq") == 0    ? MT_INTERNAL_EXPR_EQ
               : strcmp(op, "$gt") == 0  ? MT_INTERNAL_EXPR_GT
               : strcmp(op, "$gte") == 0 ? MT_INTERNAL_EXPR_GTE
               : strcmp(op, "$lt") == 0  ? MT_INTERNAL_EXPR_LT
               : strcmp(op, "$lte") == 0 ? MT_INTERNAL_EXPR_LTE
                                         : -1;
    bson_value_t operands[2];
    int n = 0;
    if (type < 0 || arg->value_type != BSON_TYPE_ARRAY ||
        !bson_iter_init_from_data(&ai, arg->value.v_doc.data, arg->value.v_doc.data_len))
        return NULL;
    while (bson_iter_next(&ai)) {
        if (n == 2)
            return NULL;
        operands[n++] = *bson_iter_value(&ai);
    }
    if (n != 2)
        return NULL;
    int fp = expr_field_path(&operands[0]) != NULL ? 0 : 1;
    const char *path = expr_field_path(&operands[fp]);
    bson_value_t c;
    if (path == NULL || expr_field_path(&operands[1 - fp]) != NULL || !expr_constant(&operands[1 - fp], &c))
        return NULL;
    if (c.value_type == BSON_TYPE_ARRAY || c.value_type == BSON_TYPE_UNDEFINED) {
        bson_value_destroy(&c);
        return NULL;
    }
    if (fp == 1) /* {$gt: [1, "$x"]} is x < 1 */
        type = type == MT_INTERNAL_EXPR_GT    ? MT_INTERNAL_EXPR_LT
               : type == MT_INTERNAL_EXPR_GTE ? MT_INTERNAL_EXPR_LTE
               : type == MT_INTERNAL_EXPR_LT  ? MT_INTERNAL_EXPR_GT
               : type == MT_INTERNAL_EXPR_LTE ? MT_INTERNAL_EXPR_GTE
                                              : type;
    node_t *leaf = node_new(type, NULL);
    leaf->owned_path = bson_strdup(path);
    leaf->path = leaf->owned_path;
    leaf->v = c;
    leaf->owned_v = true;
    return leaf;
}

/*
 * from_matcher: this file's copy of the matcher's node m, as mongod's
 * parser would have built it. An $in the matcher made of $or branches one
 * of which was an $in becomes those branches again (an $or, which the
 * optimisation absorbs into the enclosing one).
 */
static node_t *
from_matcher(const mf_match_node_t *m, int parent_type, int depth)
{
    mf_match_view_t w;
    node_t *nd;

    mf_match_node_view(m, &w);
    if (w.kind == MF_MATCH_IN && w.n_orig > 0) {
        nd = node_new(MT_OR, NULL);
        for (size_t i = 0; i < w.n_orig; i++)
            node_add(nd, from_matcher(mf_match_node_orig(m, i), MT_OR, depth + 1));
        return nd;
    }
    nd = node_new(match_type(&w), w.path);
    nd->view = w;
    if (w.value != NULL)
        nd->v = *w.value;
    switch (w.kind) {
    case MF_MATCH_REGEX:
        nd->re = w.regex;
        nd->re_opts = w.flags ? w.flags : "";
        break;
    case MF_MATCH_IN:
        /*
         * Joined by the matcher from an $or's equalities: as mongod's
         * rewrite made it. When it took the whole $or's place, mongod
         * optimises it once more (a one-value $in is then an equality).
         */
        nd->or_merged = w.or_merged && parent_type == MT_OR;
        nd->nvals = w.n_in_values;
        nd->vals = mf_calloc(w.n_in_values ? w.n_in_values : 1, sizeof(*nd->vals));
        if (w.n_in_values > 0)
            memcpy(nd->vals, w.in_values, w.n_in_values * sizeof(*nd->vals));
        nd->nrxs = w.n_in_regexes;
        nd->rxs = mf_calloc(w.n_in_regexes ? w.n_in_regexes : 1, sizeof(*nd->rxs));
        for (size_t i = 0; i < w.n_in_regexes; i++)
            mf_match_node_in_regex(m, i, &nd->rxs[i].re, &nd->rxs[i].opts);
        break;
    default:
        break;
    }
    if (depth < 200)
        for (size_t i = 0; i < w.nkids; i++)
            node_add(nd, from_matcher(mf_match_node_kid(m, i), nd->type, depth + 1));
    if (w.sample && (w.rate == 0.0 || w.rate == 1.0))
        nd->expr_const = w.rate == 1.0 ? 1 : -1;
    if (w.kind == MF_MATCH_EXPR && w.value != NULL) {
        bson_value_t c;
        if (expr_constant(w.value, &c)) {
            nd->expr_const = mf_value_truthy(&c) ? 1 : -1;
            bson_value_destroy(&c);
        }
        /* ExprMatchExpression's optimizer: {$and: [<its RewriteExpr match expression>, <the $expr>]} */
        node_t *rewritten = expr_rewrite(w.value, 0);
        if (rewritten != NULL) {
            node_t *and = node_new(MT_AND, NULL);
            node_add(and, rewritten);
            node_add(and, nd);
            return and;
        }
    }
    return nd;
}

/* --- MatchExpression::optimize --- */

static int
value_qcmp(const void *a, const void *b)
{
    return mf_value_cmp(a, b);
}

static node_t *optimize(node_t *nd);

/* MatchExpression::isTriviallyTrue / isTriviallyFalse. */
static bool
trivially_true(const node_t *nd)
{
    return nd->type == MT_ALWAYS_TRUE || (nd->type == MT_AND && nd->n == 0) ||
           (nd->type == MT_EXPRESSION && nd->expr_const > 0);
}

static bool
trivially_false(const node_t *nd)
{
    return nd->type == MT_ALWAYS_FALSE || (nd->type == MT_OR && nd->n == 0) ||
           (nd->type == MT_EXPRESSION && nd->expr_const < 0);
}

static node_t *
replace(node_t *old, node_t *by)
{
    node_free(old);
    return by;
}

/*
 * What an $or may join into a $in on its path: an equality (not to a
 * regex), a regex, or a $in the matcher already joined from such
 * equalities.
 */
static bool
in_eligible(const node_t *nd)
{
    return (nd->type == MT_EQ && nd->v.value_type != BSON_TYPE_REGEX) || nd->type == MT_REGEX ||
           (nd->type == MT_IN && nd->or_merged);
}

/* Appends x's values and regexes (an eligible node) to the $in in. */
static void
in_take(node_t *in, const node_t *x, size_t *capv, size_t *capr)
{
    size_t addv = x->type == MT_EQ ? 1 : x->type == MT_IN ? x->nvals : 0;
    size_t addr = x->type == MT_REGEX ? 1 : x->type == MT_IN ? x->nrxs : 0;
    if (in->nvals + addv > *capv) {
        *capv = (in->nvals + addv) * 2;
        in->vals = mf_realloc(in->vals, *capv * sizeof(*in->vals));
    }
    if (in->nrxs + addr > *capr) {
        *capr = (in->nrxs + addr) * 2;
        in->rxs = mf_realloc(in->rxs, *capr * sizeof(*in->rxs));
    }
    if (x->type == MT_EQ) {
        in->vals[in->nvals++] = x->v;
    } else if (x->type == MT_REGEX) {
        in->rxs[in->nrxs].re = x->re;
        in->rxs[in->nrxs++].opts = x->re_opts;
    } else {
        if (x->nvals > 0)
            memcpy(in->vals + in->nvals, x->vals, x->nvals * sizeof(*x->vals));
        in->nvals += x->nvals;
        if (x->nrxs > 0)
            memcpy(in->rxs + in->nrxs, x->rxs, x->nrxs * sizeof(*x->rxs));
        in->nrxs += x->nrxs;
    }
}

/*
 * The $or rewrite of 8.0's ListOfMatchExpression optimizer: the equalities
 * and regexes on one path, when there are two or more, become one $in
 * (not optimised again, unless it is all that is left of the $or).
 */
static void
or_to_in(node_t *nd)
{
    for (size_t i = 0; i < nd->n; i++) {
        node_t *first = nd->kids[i];
        size_t same = 0, capv = 0, capr = 0;
        if (!in_eligible(first))
            continue;
        for (size_t j = i; j < nd->n; j++)
            same += in_eligible(nd->kids[j]) && strcmp(nd->kids[j]->path, first->path) == 0;
        if (same < 2)
            continue;
        node_t *in = node_new(MT_IN, first->path);
        in->or_merged = true;
        size_t w = i + 1; /* kids[i] becomes the $in */
        for (size_t j = i; j < nd->n; j++) {
            node_t *x = nd->kids[j];
            if (j > i && (!in_eligible(x) || strcmp(x->path, first->path) != 0)) {
                nd->kids[w++] = x;
                continue;
            }
            in_take(in, x, &capv, &capr);
            if (x != first)
                node_free(x);
        }
        nd->n = w;
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
        if ((nd->type == MT_AND && trivially_true(k)) || (nd->type != MT_AND && trivially_false(k)))
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
        if (nd->type == MT_AND && trivially_false(nd->kids[i]))
            return replace(nd, node_new(MT_ALWAYS_FALSE, NULL));
        if (nd->type == MT_OR && trivially_true(nd->kids[i]))
            return replace(nd, node_new(MT_AND, NULL));
        if (nd->type == MT_NOR && trivially_true(nd->kids[i]))
            return replace(nd, node_new(MT_ALWAYS_FALSE, NULL));
    }
    if (nd->type == MT_OR) {
        or_to_in(nd);
        if (nd->n == 1) {
            /* The $or became one $in: optimised once more (a one-value $in is an equality). */
            node_t *only = nd->kids[0];
            nd->n = 0;
            node_free(nd);
            only->or_merged = false;
            return optimize(only);
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
        /* A $in the $or rewrite made is not optimised again (one pass). */
        node_t *out = nd;
        if (nd->or_merged)
            return nd;
        if (nd->nvals == 1 && nd->nrxs == 0) {
            out = node_new(MT_EQ, nd->path);
            out->v = nd->vals[0];
            node_free(nd);
        } else if (nd->nvals == 0 && nd->nrxs == 1) {
            out = node_new(MT_REGEX, nd->path);
            out->re = nd->rxs[0].re;
            out->re_opts = nd->rxs[0].opts;
            node_free(nd);
        } else if (nd->nvals == 0 && nd->nrxs == 0) {
            out = replace(nd, node_new(MT_ALWAYS_FALSE, NULL)); /* an empty $in is always false */
        }
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
    /* The nodes with a child vector: the lists and ElemMatchValueMatchExpression. */
    if (nd->type != MT_AND && nd->type != MT_OR && nd->type != MT_NOR && nd->type != MT_ELEM_MATCH_VALUE)
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

/* A type code as mongod's BSONType: MinKey -1, the others as libbson numbers them. */
static int
bson_type_code(int t)
{
    return t == BSON_TYPE_MINKEY ? -1 : t;
}

/*
 * MatcherTypeSet::toBSONArray printed as a BSONObj: "{ 0: "number", 1: 2 }"
 * ("number" first when given, then the type codes in order, once each).
 */
static void
put_type_set(out_t *o, const mf_match_view_t *w)
{
    bool set[129] = {false};
    int k = 0;
    for (int i = 0; i < w->ntypes; i++) {
        int code = bson_type_code(w->types[i]);
        if (code >= -1 && code <= 127)
            set[code + 1] = true;
    }
    put(o, "{");
    if (w->type_number)
        put(o, " %d: \"number\"", k++);
    for (int i = 0; i < 129; i++)
        if (set[i])
            put(o, "%s %d: %d", k > 0 ? "," : "", k, i - 1), k++;
    put(o, k > 0 ? " }" : "}");
}

/* BitTestMatchExpression's bit positions: as given, a number's set bits, or a BinData mask's set bits. */
static void
put_bit_positions(out_t *o, const mf_match_view_t *w)
{
    bool first = true;
    put(o, "[");
    if (w->value != NULL && w->value->value_type == BSON_TYPE_BINARY) {
        const uint8_t *d = w->value->value.v_binary.data;
        for (uint32_t i = 0; i < w->value->value.v_binary.data_len; i++)
            for (int b = 0; b < 8; b++)
                if (d[i] & (1u << b)) {
                    put(o, "%s%u", first ? "" : ", ", i * 8 + (unsigned)b);
                    first = false;
                }
    } else {
        for (size_t i = 0; i < w->n_bit_positions; i++)
            put(o, "%s%u", i > 0 ? ", " : "", w->bit_positions[i]);
    }
    put(o, "]");
}

/* A double as a C++ ostream prints it by default (6 significant digits). */
static void
put_ostream_double(out_t *o, double d)
{
    put(o, "%g", d);
}

/*
 * An $expr operand as mongod's Expression::serialize prints through Value's
 * ostream ("{$eq: ["$a", {$const: 5}]}"): field paths and variables as
 * strings, other literals as {$const: v}, an operator's operand as an
 * array, $literal as $const, documents of fields as documents.
 */
static void put_expr(out_t *o, const bson_value_t *v, int depth);

static void
put_value_plain(out_t *o, const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
        put(o, "\"%s\"", v->value.v_utf8.str);
        break;
    case BSON_TYPE_DOUBLE:
        put_ostream_double(o, v->value.v_double);
        break;
    case BSON_TYPE_INT32:
        put(o, "%d", v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        put(o, "%lld", (long long)v->value.v_int64);
        break;
    case BSON_TYPE_BOOL:
        put(o, "%s", v->value.v_bool ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
        put(o, "null");
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        bool arr = v->value_type == BSON_TYPE_ARRAY, first = true;
        bson_iter_t it;
        put(o, arr ? "[" : "{");
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            while (bson_iter_next(&it)) {
                put(o, "%s", first ? "" : ", ");
                if (!arr)
                    put(o, "%s: ", bson_iter_key(&it));
                put_value_plain(o, bson_iter_value(&it));
                first = false;
            }
        put(o, arr ? "]" : "}");
        break;
    }
    default:
        put_value(o, v);
        break;
    }
}

static void
put_expr(out_t *o, const bson_value_t *v, int depth)
{
    bson_iter_t it;
    bson_value_t c;
    bool first = true;
    if (o->len + 1 >= o->cap)
        return; /* the buffer is full: nothing more to fold or print */
    if (depth > 50) {
        put(o, "...");
        return;
    }
    if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') {
        put(o, "\"%s\"", v->value.v_utf8.str); /* a field path or a variable */
        return;
    }
    if (expr_constant(v, &c)) {
        /* Expression::optimize folds what reads no field into an ExpressionConstant */
        put(o, "{$const: ");
        put_value_plain(o, &c);
        put(o, "}");
        bson_value_destroy(&c);
        return;
    }
    if ((v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) ||
        !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        put(o, "{$const: ");
        put_value_plain(o, v);
        put(o, "}");
        return;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        put(o, "[");
        while (bson_iter_next(&it)) {
            put(o, "%s", first ? "" : ", ");
            put_expr(o, bson_iter_value(&it), depth + 1);
            first = false;
        }
        put(o, "]");
        return;
    }
    if (bson_iter_next(&it) && bson_iter_key(&it)[0] == '$') {
        /* An operator: its operands as a list, or its named arguments. */
        const char *op = bson_iter_key(&it);
        const bson_value_t *arg = bson_iter_value(&it);
        bson_iter_t ai;
        put(o, "{%s: ", op);
        if (arg->value_type == BSON_TYPE_ARRAY || arg->value_type == BSON_TYPE_DOCUMENT) {
            bool arr = arg->value_type == BSON_TYPE_ARRAY;
            put(o, arr ? "[" : "{");
            if (bson_iter_init_from_data(&ai, arg->value.v_doc.data, arg->value.v_doc.data_len))
                while (bson_iter_next(&ai)) {
                    put(o, "%s", first ? "" : ", ");
                    if (!arr)
                        put(o, "%s: ", bson_iter_key(&ai));
                    put_expr(o, bson_iter_value(&ai), depth + 1);
                    first = false;
                }
            put(o, arr ? "]" : "}");
        } else {
            put(o, "[");
            put_expr(o, arg, depth + 1);
            put(o, "]");
        }
        put(o, "}");
        return;
    }
    /* ExpressionObject: each field an expression. */
    put(o, "{");
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        put(o, "%s%s: ", first ? "" : ", ", bson_iter_key(&it));
        put_expr(o, bson_iter_value(&it), depth + 1);
        first = false;
    }
    put(o, "}");
}

/* TextMatchExpressionBase: "TEXT : query=..., language=..., caseSensitive=0, diacriticSensitive=0". */
static void
put_text(out_t *o, const bson_value_t *v)
{
    const char *query = "", *language = "english";
    bool cs = false, ds = false;
    bson_iter_t it;
    if (v != NULL && v->value_type == BSON_TYPE_DOCUMENT &&
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "$search") == 0 && BSON_ITER_HOLDS_UTF8(&it))
                query = bson_iter_utf8(&it, NULL);
            else if (strcmp(k, "$language") == 0 && BSON_ITER_HOLDS_UTF8(&it))
                language = bson_iter_utf8(&it, NULL);
            else if (strcmp(k, "$caseSensitive") == 0)
                cs = bson_iter_as_bool(&it);
            else if (strcmp(k, "$diacriticSensitive") == 0)
                ds = bson_iter_as_bool(&it);
        }
    put(o, "TEXT : query=%s, language=%s, caseSensitive=%d, diacriticSensitive=%d", query, language, cs, ds);
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

static const char *
bits_name(int type)
{
    switch (type) {
    case MT_BITS_ALL_SET:
        return "$bitsAllSet";
    case MT_BITS_ALL_CLEAR:
        return "$bitsAllClear";
    case MT_BITS_ANY_SET:
        return "$bitsAnySet";
    default:
        return "$bitsAnyClear";
    }
}

static void
debug_string(out_t *o, const node_t *nd, int level)
{
    if (o->len + 1 >= o->cap)
        return;
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
    case MT_SIZE:
        put(o, "%s $size : %lld", nd->path, (long long)nd->view.size);
        break;
    case MT_MOD:
        put(o, "%s mod %lld %% x == %lld", nd->path, (long long)nd->view.divisor, (long long)nd->view.remainder);
        break;
    case MT_IN: {
        /* InListData: sorted, duplicates dropped; then the regexes in their order. */
        bson_value_t *vals = mf_calloc(nd->nvals ? nd->nvals : 1, sizeof(*vals));
        if (nd->nvals > 0)
            memcpy(vals, nd->vals, nd->nvals * sizeof(*vals));
        if (nd->nvals > 1)
            qsort(vals, nd->nvals, sizeof(*vals), value_qcmp);
        put(o, "%s $in [ ", nd->path);
        for (size_t i = 0; i < nd->nvals; i++) {
            if (i > 0 && mf_value_cmp(&vals[i - 1], &vals[i]) == 0)
                continue;
            put_value(o, &vals[i]);
            put(o, " ");
        }
        free(vals);
        for (size_t i = 0; i < nd->nrxs; i++)
            put(o, "/%s/%s ", nd->rxs[i].re, nd->rxs[i].opts ? nd->rxs[i].opts : "");
        put(o, "]");
        break;
    }
    case MT_TYPE:
        put(o, "%s $type: ", nd->path);
        put_type_set(o, &nd->view);
        break;
    case MT_BITS_ALL_SET:
    case MT_BITS_ALL_CLEAR:
    case MT_BITS_ANY_SET:
    case MT_BITS_ANY_CLEAR:
        put(o, "%s %s: ", nd->path, bits_name(nd->type));
        put_bit_positions(o, &nd->view);
        break;
    case MT_GEO: {
        /* GeoMatchExpression: its serialization, { <path>: <operator document> }. */
        bson_t raw = BSON_INITIALIZER;
        char b[1024];
        if (nd->view.value != NULL)
            bson_append_value(&raw, nd->path, -1, nd->view.value);
        mf_fmt_doc(&raw, b, sizeof(b));
        bson_destroy(&raw);
        put(o, "GEO raw = %s", b);
        break;
    }
    case MT_GEO_NEAR:
        /* GeoNearMatchExpression: "GEONEAR " and GeoNearExpression::toString (maxDistance unset: DBL_MAX). */
        put(o, "GEONEAR  field=%s maxdist=", nd->path);
        put_ostream_double(o, nd->view.max_distance >= 0 ? nd->view.max_distance : 1.7976931348623157e308);
        put(o, " isNearSphere=%d", nd->view.near_sphere ? 1 : 0);
        break;
    case MT_TEXT:
        put_text(o, nd->view.value);
        break;
    case MT_EXPRESSION:
        put(o, "$expr ");
        if (nd->view.sample && (nd->view.rate == 0.0 || nd->view.rate == 1.0)) {
            /* $sampleRate 0 and 1 are parsed as an $expr of the constant false / true */
            put(o, "{$const: %s}", nd->view.rate == 1.0 ? "true" : "false");
        } else if (nd->view.sample) {
            /* other rates as {$expr: {$lt: [{$rand: {}}, x]}} */
            put(o, "{$lt: [{$rand: {}}, {$const: ");
            put_ostream_double(o, nd->view.rate);
            put(o, "}]}");
        } else if (nd->view.value != NULL) {
            put_expr(o, nd->view.value, 0);
        }
        break;
    case MT_INTERNAL_EXPR_EQ:
    case MT_INTERNAL_EXPR_GT:
    case MT_INTERNAL_EXPR_GTE:
    case MT_INTERNAL_EXPR_LT:
    case MT_INTERNAL_EXPR_LTE: {
        static const char *const names[] = {"$_internalExprEq", "$_internalExprGt", "$_internalExprGte",
                                            "$_internalExprLt", "$_internalExprLte"};
        put(o, "%s %s ", nd->path, names[nd->type - MT_INTERNAL_EXPR_EQ]);
        put_value(o, &nd->v);
        break;
    }
    case MT_ALWAYS_FALSE:
        put(o, "$alwaysFalse");
        break;
    case MT_ALWAYS_TRUE:
        put(o, "$alwaysTrue");
        break;
    default:
        put(o, "$jsonSchema ");
        if (nd->view.value != NULL)
            put_value(o, nd->view.value);
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
    /* The filter as the matcher parses it (the one parser of the query language), walked through its view. */
    mf_error_t perr;
    mf_matcher_t *owned = NULL;
    const mf_matcher_t *m = req->matcher;
    if (m == NULL)
        m = owned = mf_matcher_new(req->filter ? req->filter : &empty, &perr);
    node_t *root = m != NULL ? from_matcher(mf_matcher_root(m), MT_AND, 0) : node_new(MT_AND, NULL);
    root = optimize(root);
    sort_tree(root);
    debug_string(&o, root, 0);
    node_free(root);
    mf_matcher_free(owned);
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
