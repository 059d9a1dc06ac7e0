/*
 * project.c: find projections (see project.h).
 *
 * Design. The spec is parsed, following MongoDB's projection_parser, into a
 * tree of path nodes: inner nodes (one per path component shared by several
 * projected paths) and leaves: include, exclude, expression (including
 * literals), find-$slice, $elemMatch, and positional "a.$". Adding a path
 * that ends at or passes through an existing leaf is a path collision
 * (31250 / 31249). The projection type (inclusion or exclusion) is decided by
 * the first non-_id inclusion/exclusion/expression; ambiguous specs ({_id: 0},
 * only $slice, only $elemMatch) fall back to MongoDB's compatibility rules.
 * An inclusion projection gets an implicit _id leaf unless _id is mentioned.
 *
 * Applying an inclusion projection walks the input document in its own field
 * order, emitting included fields, recursing into inner nodes (through
 * arrays: documents are projected, scalars dropped), slicing and resolving
 * positional leaves in place; computed fields (expressions and $elemMatch)
 * are appended afterwards in spec order, as MongoDB does since 4.4. An
 * exclusion projection copies everything except excluded leaves, recursing
 * the same way but keeping scalars inside arrays.
 *
 * A find projection's {$meta: "textScore" | "recordId" | "sortKey"} (or a
 * name whose metadata a find never has, always left out) is a
 * leaf of its own (P_META) that fits either type and is appended like a
 * computed field; a text score comes from the $text plan's match details or
 * the hidden score field of a pipeline document (doc/match.h), which a find
 * projection never outputs; a record id and a sort key from the match
 * details the command layer fills in (mf_projection_metas says which);
 * "geoNearDistance" / "geoNearPoint" from the hidden fields a $near find's
 * $geoNear adds (query/agg_geo.h), never output either.
 * In aggregation, $meta is an expression (expr.c).
 *
 * One engine for find and aggregation: $project and $unset are parsed by
 * mf_projection_new_agg (a sub-document with one $-operator is an
 * aggregation expression, e.g. $slice, instead of find's projection
 * operator; positional paths are refused, 31324; errors read "Invalid
 * $project :: caused by :: ...") and applied by the same code.
 *
 * Invariants: the tree owns its names, matchers and expressions; applying
 * never modifies the projection, so one projection may serve many documents.
 */
#include "common/alloc.h"
#include "doc/project.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/expr.h"
#include "doc/path.h"
#include "common/limits.h"
#include "doc/text.h"
#include "doc/value.h"

typedef enum { P_INNER, P_INCLUDE, P_EXCLUDE, P_EXPR, P_SLICE, P_ELEMMATCH, P_POSITIONAL, P_META } pkind_t;

typedef struct pnode pnode_t;
struct pnode {
    pkind_t kind;
    char *name;
    pnode_t **kids; /* P_INNER */
    size_t n;
    mf_expr_t *expr;       /* P_EXPR */
    mf_matcher_t *matcher; /* P_ELEMMATCH */
    bool has_skip;         /* P_SLICE: [skip, limit] form */
    int64_t skip, limit;
    bool computed; /* P_INNER: the subtree holds expressions or $elemMatch */
    bool pos_below; /* P_INNER: the subtree holds the positional leaf ("a.b.$" marks a) */
    int meta;       /* P_META: MF_PROJ_META_TEXT_SCORE, _RECORD_ID, _SORT_KEY or META_ABSENT */
};

/* P_META of metadata a find never has (randVal, searchScore ...): the field is always left out. */
#define META_ABSENT (-2)

struct mf_projection {
    pnode_t *root;
    bool agg; /* a pipeline stage: the hidden text score field (doc/match.h) stays on the output */
    bool inclusion;
    bool add_fields; /* $addFields / $set: every leaf is an expression; all other fields are kept */
    bool positional; /* has an "a.$" leaf: applying it needs the query's match details */
    unsigned metas;  /* the $meta kinds it names (1 << MF_PROJ_META_*) */
    bool expr_score; /* find: an expression reads {$meta: "textScore"} (evaluated on the document plus its score) */
    const mf_sort_t *sort_key; /* a pipeline stage after a $sort: its {$meta: "sortKey"} source (borrowed) */
};

typedef struct {
    bool has_type, inclusion;
    bool id_specified, id_included, id_excluded;
    bool has_positional, has_elem_match, has_slice;
    bool agg;        /* an aggregation $project / $unset: operators are expressions, no positional */
    bool add_fields; /* $addFields / $set: every value is an expression (or a sub-document of them) */
    unsigned metas;  /* the $meta kinds named so far (1 << MF_PROJ_META_*) */
    bool expr_score; /* a find expression reads {$meta: "textScore"} */
    int depth;       /* path components above the object being parsed (its parents' dotted keys) */
    mf_error_t *err;
} pctx_t;

/*
 * mongod's FieldPath: at most MF_MAX_FIELD_PATH_COMPONENTS (200,
 * BSONDepth::getMaxAllowableDepth), else 15 Overflow "FieldPath is too
 * long". Counted from the projection's root through nested sub-projections,
 * it also bounds the tree this parser builds (one node a component) and the
 * recursion that applies it: a key of 200,000 components overflowed the
 * worker's stack.
 */

/* parse_sub: parses a sub-projection under key, one level deeper by key's components. */
static int parse_obj(pctx_t *c, const bson_t *spec, pnode_t *parent, bool is_root);

static int
parse_sub(pctx_t *c, const char *key, const bson_t *sub, pnode_t *inner)
{
    int saved = c->depth;
    c->depth += (int)mf_path_components(key);
    int rc = parse_obj(c, sub, inner, false);
    c->depth = saved;
    return rc;
}

static void
pnode_free(pnode_t *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->n; i++)
        pnode_free(n->kids[i]);
    free(n->kids);
    free(n->name);
    mf_expr_free(n->expr);
    mf_matcher_free(n->matcher);
    free(n);
}

void
mf_projection_free(mf_projection_t *p)
{
    if (p == NULL)
        return;
    pnode_free(p->root);
    free(p);
}

static pnode_t *
pnode_new(pkind_t kind)
{
    pnode_t *n = mf_calloc(1, sizeof(*n));
    n->kind = kind;
    return n;
}

static pnode_t *
pnode_child(const pnode_t *n, const char *name)
{
    for (size_t i = 0; i < n->n; i++)
        if (strcmp(n->kids[i]->name, name) == 0)
            return n->kids[i];
    return NULL;
}

static void
pnode_add(pnode_t *parent, pnode_t *kid)
{
    parent->kids = mf_realloc(parent->kids, (parent->n + 1) * sizeof(pnode_t *));
    parent->kids[parent->n++] = kid;
}

/* add_at_path: places leaf (taking ownership) at the dotted path under parent. */
static int
add_at_path(pnode_t *parent, const char *path, pnode_t *leaf, mf_error_t *err)
{
    const char *p = path;
    pnode_t *cur = parent;
    const char *first_dot = strchr(path, '.');

    if (mf_field_path_check(path, err) < 0) {
        pnode_free(leaf);
        return -1;
    }
    for (;;) {
        const char *dot = strchr(p, '.');
        char *comp = dot ? mf_strndup(p, (size_t)(dot - p)) : mf_strdup(p);
        pnode_t *child = pnode_child(cur, comp);

        if (!dot) {
            if (child) {
                free(comp);
                pnode_free(leaf);
                return mf_err_set(err, MF_E_Location31250, "Path collision at %s", path);
            }
            leaf->name = comp;
            pnode_add(cur, leaf);
            return 0;
        }
        if (child == NULL) {
            child = pnode_new(P_INNER);
            child->name = comp;
            pnode_add(cur, child);
        } else {
            free(comp);
            if (child->kind != P_INNER) {
                pnode_free(leaf);
                return mf_err_set(err, MF_E_Location31249, "Path collision at %s remaining portion %s", path,
                                  first_dot ? first_dot + 1 : path);
            }
        }
        cur = child;
        p = dot + 1;
    }
}

static bool
is_flag_type(bson_type_t t)
{
    return t == BSON_TYPE_BOOL || t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE ||
           t == BSON_TYPE_DECIMAL128;
}

static int parse_obj(pctx_t *c, const bson_t *spec, pnode_t *parent, bool is_root);

static int
parse_slice(pctx_t *c, const char *key, const bson_value_t *sv, pnode_t *parent)
{
    pnode_t *leaf = pnode_new(P_SLICE);

    if (mf_value_is_number(sv)) {
        double d = mf_value_as_double(sv);
        leaf->limit = d > 2147483647.0 ? 2147483647 : d < -2147483648.0 ? -2147483648LL : (int64_t)d;
    } else if (sv->value_type == BSON_TYPE_ARRAY) {
        bson_t arr;
        bson_iter_t it;
        bson_value_t skip, limit;
        int n = 0;

        bson_init_static(&arr, sv->value.v_doc.data, sv->value.v_doc.data_len);
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it)) {
            if (n == 0)
                skip = *bson_iter_value(&it);
            else if (n == 1)
                limit = *bson_iter_value(&it);
            n++;
        }
        if (n != 2) {
            pnode_free(leaf);
            return mf_err_set(c->err, MF_E_BadValue, "$slice array argument should be of form [skip, limit]");
        }
        if (!mf_value_is_number(&skip) || !mf_value_is_number(&limit)) {
            pnode_free(leaf);
            return mf_err_set(c->err, MF_E_BadValue, "$slice expects the skip and limit arguments to be numbers");
        }
        leaf->has_skip = true;
        leaf->skip = (int64_t)mf_value_as_double(&skip);
        leaf->limit = (int64_t)mf_value_as_double(&limit);
        if (leaf->limit <= 0) {
            int64_t l = leaf->limit;
            pnode_free(leaf);
            return mf_err_set(c->err, MF_E_Location31259, "$slice limit must be positive, got %lld", (long long)l);
        }
    } else {
        pnode_free(leaf);
        return mf_err_set(c->err, MF_E_Location31273, "$slice only supports numbers and [skip, limit] arrays");
    }
    c->has_slice = true;
    return add_at_path(parent, key, leaf, c->err);
}

/*
 * names_text_score: whether the expression v holds a {$meta: "textScore"}
 * anywhere. A find projection's expressions are evaluated on the stored
 * document, which has no score field: mf_projection_apply gives them one.
 */
static bool
names_text_score(const bson_value_t *v, int depth)
{
    bson_t d;
    bson_iter_t it;

    if ((v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) || depth > 100 ||
        !bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_init(&it, &d))
        return false;
    while (bson_iter_next(&it)) {
        if (v->value_type == BSON_TYPE_DOCUMENT && strcmp(bson_iter_key(&it), "$meta") == 0 &&
            BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "textScore") == 0)
            return true;
        if (v->value_type == BSON_TYPE_DOCUMENT && strcmp(bson_iter_key(&it), "$literal") == 0)
            continue; /* a constant: it reads no metadata */
        if (names_text_score(bson_iter_value(&it), depth + 1))
            return true;
    }
    return false;
}

static int
parse_expression(pctx_t *c, const char *key, const bson_value_t *v, pnode_t *parent, bool literal)
{
    pnode_t *leaf;
    mf_expr_t *e;

    if (c->has_type && !c->inclusion) {
        if (literal)
            return mf_err_set(c->err, MF_E_Location31310, "Cannot use an expression %s in an exclusion projection",
                              key);
        return mf_err_set(c->err, MF_E_Location31252, "Cannot use expression other than $meta in exclusion projection");
    }
    e = mf_expr_parse(v, c->err);
    if (e == NULL)
        return -1;
    if (!c->agg && names_text_score(v, 0)) {
        /* Its {$meta: "textScore"} needs a $text query (40218) and reads the plan's score. */
        c->metas |= 1u << MF_PROJ_META_TEXT_SCORE;
        c->expr_score = true;
    }
    leaf = pnode_new(P_EXPR);
    leaf->expr = e;
    c->has_type = true;
    c->inclusion = true;
    return add_at_path(parent, key, leaf, c->err);
}

/* Sets pos_below on n and the inner nodes above the positional leaf; whether n's subtree holds it. */
static bool
mark_pos_below(pnode_t *n)
{
    if (n->kind == P_POSITIONAL)
        return true;
    if (n->kind != P_INNER)
        return false;
    for (size_t i = 0; i < n->n; i++)
        n->pos_below |= mark_pos_below(n->kids[i]);
    return n->pos_below;
}

/* positional_at: the length of key without a trailing ".$", or -1 when key has no positional part. */
static ssize_t
positional_at(const char *key)
{
    size_t len = strlen(key);

    if (strstr(key, ".$.") != NULL)
        return (ssize_t)(strstr(key, ".$.") - key);
    if (len >= 2 && strcmp(key + len - 2, ".$") == 0)
        return (ssize_t)(len - 2);
    if (strcmp(key, "$") == 0)
        return 0;
    return -1;
}

static int
parse_element(pctx_t *c, const char *key, const bson_value_t *v, pnode_t *parent, bool is_root)
{
    ssize_t pos = positional_at(key);
    bool is_id = is_root && strcmp(key, "_id") == 0;

    if ((size_t)c->depth + mf_path_components(key) > MF_MAX_FIELD_PATH_COMPONENTS)
        return mf_err_set(c->err, MF_E_Overflow, "FieldPath is too long");

    if (c->agg && pos >= 0)
        return mf_err_set(c->err, MF_E_Location31324, "Cannot use positional projection in aggregation projection");
    if (c->add_fields) {
        /* A sub-document of fields nests; anything else (1, true, {}, {$op: ...}) is an expression. */
        bson_t sub;
        bson_iter_t it;
        if (v->value_type == BSON_TYPE_DOCUMENT) {
            bson_init_static(&sub, v->value.v_doc.data, v->value.v_doc.data_len);
            if (!bson_empty(&sub) && bson_iter_init(&it, &sub) && bson_iter_next(&it) && bson_iter_key(&it)[0] != '$') {
                pnode_t *inner = pnode_new(P_INNER);
                if (add_at_path(parent, key, inner, c->err) < 0)
                    return -1;
                return parse_sub(c, key, &sub, inner);
            }
        }
        mf_expr_t *e = mf_expr_parse(v, c->err);
        if (e == NULL)
            return -1;
        pnode_t *leaf = pnode_new(P_EXPR);
        leaf->expr = e;
        return add_at_path(parent, key, leaf, c->err);
    }

    if (v->value_type == BSON_TYPE_DOCUMENT) {
        bson_t sub;
        bson_iter_t it;

        if (pos >= 0)
            return mf_err_set(c->err, MF_E_BadValue,
                              "positional projection cannot be used with an expression or sub object");
        bson_init_static(&sub, v->value.v_doc.data, v->value.v_doc.data_len);
        /*
         * Only a one-field object whose field starts with '$' may be an
         * expression (projection_parser.cpp's parseSubObject checks nFields()
         * == 1 first): {$meta: "textScore", x: 1} or {$add: [1, 2], x: 1} is
         * a sub-projection, and its "$meta" / "$add" field name fails
         * FieldPath's check (16410) below, in find and $project alike.
         */
        if (c->agg && bson_count_keys(&sub) == 1 && bson_iter_init(&it, &sub) && bson_iter_next(&it) &&
            bson_iter_key(&it)[0] == '$')
            return parse_expression(c, key, v, parent, false); /* $slice, $filter ...: aggregation expressions */
        if (bson_count_keys(&sub) == 1 && bson_iter_init(&it, &sub) && bson_iter_next(&it) &&
            bson_iter_key(&it)[0] == '$') {
            const char *op = bson_iter_key(&it);
            const bson_value_t *ov = bson_iter_value(&it);
            if (strcmp(op, "$slice") == 0)
                return parse_slice(c, key, ov, parent);
            if (strcmp(op, "$elemMatch") == 0) {
                pnode_t *leaf;
                if (ov->value_type != BSON_TYPE_DOCUMENT)
                    return mf_err_set(c->err, MF_E_Location31274,
                                      "elemMatch: Invalid argument, object required, but got %s",
                                      mf_type_name(ov->value_type));
                if (c->has_positional)
                    return mf_err_set(c->err, MF_E_BadValue, "Cannot specify positional operator and $elemMatch.");
                if (!is_root || strchr(key, '.') != NULL)
                    return mf_err_set(c->err, MF_E_Location31275, "Cannot use $elemMatch projection on a nested field.");
                leaf = pnode_new(P_ELEMMATCH);
                leaf->matcher = mf_matcher_new_value(ov, c->err);
                if (leaf->matcher == NULL) {
                    pnode_free(leaf);
                    return -1;
                }
                c->has_elem_match = true;
                return add_at_path(parent, key, leaf, c->err);
            }
            if (strcmp(op, "$meta") == 0) {
                /*
                 * {$meta: "textScore" | "recordId" | "sortKey" | ...} fits
                 * either projection type (as mongod): it adds the field.
                 */
                static const char *const names[] = {"textScore", "recordId", "sortKey", "geoNearDistance",
                                                    "geoNearPoint"};
                /*
                 * Names mongod 8.0's ExpressionMeta::parse knows whose
                 * metadata mayfly never sets (mf_meta_never_set: a
                 * $sample's random value, $search / $vectorSearch results,
                 * a time-series bucket's bounds). find validates only the text score and
                 * $geoNear data (CanonicalQuery::isValid's unavailable
                 * set), so these parse, evaluate to missing, and the field
                 * is left out. geoNearDistance / geoNearPoint read the
                 * hidden fields a $geoNear (or a $near find) adds when they
                 * are named (query/agg_geo.h; 40218 without one). indexKey
                 * (the plan's index key) needs what mayfly's find does not
                 * give the projection: it stays refused below, like
                 * unknown names.
                 */
                int meta = -1;
                /* ExpressionMeta::parse checks the argument's type before its name. */
                if (ov->value_type != BSON_TYPE_UTF8)
                    return mf_err_set(c->err, MF_E_Location17307, "$meta only supports string arguments");
                for (int i = 0; i < 5; i++)
                    if (strcmp(ov->value.v_utf8.str, names[i]) == 0)
                        meta = i;
                if (meta < 0 && mf_meta_never_set(ov->value.v_utf8.str))
                    meta = META_ABSENT;
                if (meta == -1)
                    return mf_err_set(c->err, MF_E_Location17308, "Unsupported argument to $meta: %s",
                                      ov->value.v_utf8.str);
                pnode_t *leaf = pnode_new(P_META);
                leaf->meta = meta;
                if (meta != META_ABSENT)
                    c->metas |= 1u << meta;
                return add_at_path(parent, key, leaf, c->err);
            }
            return parse_expression(c, key, v, parent, false);
        }
        if (bson_count_keys(&sub) == 0)
            return mf_err_set(c->err, MF_E_Location51270,
                              "An empty sub-projection is not a valid value. Found empty object at path");
        {
            /* A sub-projection: a new inner node for key, then the sub-spec under it. */
            pnode_t *inner = pnode_new(P_INNER);
            pnode_t *node;
            if (add_at_path(parent, key, inner, c->err) < 0)
                return -1;
            node = inner;
            return parse_sub(c, key, &sub, node);
        }
    }
    if (is_flag_type(v->value_type)) {
        if (mf_value_truthy(v)) {
            if (pos < 0) {
                if (add_at_path(parent, key, pnode_new(P_INCLUDE), c->err) < 0)
                    return -1;
                if (is_id)
                    c->id_included = true;
            } else {
                char *prefix;
                int rc;
                if (c->has_positional)
                    return mf_err_set(c->err, MF_E_Location31276,
                                      "Cannot specify more than one positional projection per query.");
                if (c->has_elem_match)
                    return mf_err_set(c->err, MF_E_BadValue, "Cannot specify positional operator and $elemMatch.");
                if (strstr(key + pos + 2, ".$") != NULL || strcmp(key + pos + 1, "$.$") == 0)
                    return mf_err_set(c->err, MF_E_BadValue, "Cannot use positional operator twice: %s", key);
                if (pos == 0)
                    return mf_err_set(c->err, MF_E_BadValue, "Positional projection '%s' does not match the query "
                                                             "document.",
                                      key);
                prefix = mf_strndup(key, (size_t)pos);
                rc = add_at_path(parent, prefix, pnode_new(P_POSITIONAL), c->err);
                free(prefix);
                if (rc < 0)
                    return -1;
                c->has_positional = true;
            }
            if (!is_id) {
                if (c->has_type && !c->inclusion)
                    return mf_err_set(c->err, MF_E_Location31253, "Cannot do inclusion on field %s in exclusion "
                                                                  "projection",
                                      key);
                c->has_type = true;
                c->inclusion = true;
            }
        } else {
            if (pos >= 0)
                return mf_err_set(c->err, MF_E_BadValue, "Cannot exclude array elements with the positional operator.");
            if (add_at_path(parent, key, pnode_new(P_EXCLUDE), c->err) < 0)
                return -1;
            if (!is_id) {
                if (c->has_type && c->inclusion)
                    return mf_err_set(c->err, MF_E_Location31254, "Cannot do exclusion on field %s in inclusion "
                                                                  "projection",
                                      key);
                c->has_type = true;
                c->inclusion = false;
            } else {
                c->id_excluded = true;
            }
        }
        return 0;
    }
    if (pos >= 0)
        return mf_err_set(c->err, MF_E_BadValue, "positional projection cannot be used with a literal");
    return parse_expression(c, key, v, parent, true);
}

static int
parse_obj(pctx_t *c, const bson_t *spec, pnode_t *parent, bool is_root)
{
    bson_iter_t it;

    if (!bson_iter_init(&it, spec))
        return mf_err_set(c->err, MF_E_BadValue, "Invalid projection document");
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (is_root && (strcmp(key, "_id") == 0 || strncmp(key, "_id.", 4) == 0))
            c->id_specified = true;
        if (parse_element(c, key, bson_iter_value(&it), parent, is_root) < 0)
            return -1;
    }
    return 0;
}

/* mark_computed: flags inner nodes whose subtree appends computed fields. */
static bool
mark_computed(pnode_t *n)
{
    bool any = false;

    if (n->kind == P_EXPR || n->kind == P_ELEMMATCH || n->kind == P_META)
        return true;
    if (n->kind != P_INNER)
        return false;
    for (size_t i = 0; i < n->n; i++)
        if (mark_computed(n->kids[i]))
            any = true;
    n->computed = any;
    return any;
}

static mf_projection_t *
projection_new(const bson_t *spec, bool agg, mf_error_t *err)
{
    mf_projection_t *p = mf_calloc(1, sizeof(*p));
    pctx_t c;

    memset(&c, 0, sizeof(c));
    c.err = err;
    c.agg = agg;
    p->agg = agg;
    p->root = pnode_new(P_INNER);
    if (spec != NULL && parse_obj(&c, spec, p->root, true) < 0) {
        mf_projection_free(p);
        return NULL;
    }
    if (!c.has_type) {
        if (c.has_slice)
            c.inclusion = c.id_included;
        else if (c.has_elem_match)
            c.inclusion = true;
        else
            c.inclusion = c.id_included;
    }
    p->inclusion = c.inclusion;
    p->positional = c.has_positional;
    p->metas = c.metas;
    p->expr_score = c.expr_score;
    if (p->positional)
        (void)mark_pos_below(p->root);
    if (!c.id_specified && p->inclusion) {
        pnode_t *id = pnode_new(P_INCLUDE);
        id->name = mf_strdup("_id");
        pnode_add(p->root, id);
    }
    if (!p->inclusion && c.id_included) {
        for (size_t i = 0; i < p->root->n; i++) {
            if (strcmp(p->root->kids[i]->name, "_id") == 0 && p->root->kids[i]->kind == P_INCLUDE) {
                pnode_free(p->root->kids[i]);
                memmove(&p->root->kids[i], &p->root->kids[i + 1], (p->root->n - i - 1) * sizeof(pnode_t *));
                p->root->n--;
                break;
            }
        }
    }
    mark_computed(p->root);
    return p;
}

mf_projection_t *
mf_projection_new(const bson_t *spec, mf_error_t *err)
{
    return projection_new(spec, false, err);
}

/* reads_node: mf_projection_reads over node n, whose path from the root is prefix (plen bytes of buf). */
static bool
reads_node(const pnode_t *n, char *buf, size_t plen, size_t cap, bool root, bool (*fn)(void *arg, const char *path),
           void *arg)
{
    size_t len = plen;
    if (n->name != NULL) {
        int w = snprintf(buf + plen, cap - plen, "%s%s", plen > 0 ? "." : "", n->name);
        if (w < 0 || (size_t)w >= cap - plen)
            return false;
        len += (size_t)w;
    }
    bool ok;
    switch (n->kind) {
    case P_INNER:
        ok = true;
        for (size_t i = 0; i < n->n && ok; i++)
            ok = reads_node(n->kids[i], buf, len, cap, root && n->name == NULL, fn, arg);
        break;
    case P_INCLUDE:
        ok = fn(arg, buf);
        break;
    case P_EXCLUDE:
        ok = root && strcmp(buf, "_id") == 0; /* {_id: 0} in an inclusion projection */
        break;
    case P_EXPR: {
        /* A value set at "x.y" depends on x too, which may be an array (mongod's DepsAnalysisVisitor). */
        char *dot = strchr(buf, '.');
        ok = mf_expr_doc_paths(n->expr, fn, arg);
        if (ok && dot != NULL) {
            *dot = '\0';
            ok = fn(arg, buf);
            *dot = '.';
        }
        break;
    }
    default:
        ok = false; /* $slice, $elemMatch, positional, $meta: they need the document */
        break;
    }
    buf[plen] = '\0';
    return ok;
}

bool
mf_projection_reads(const mf_projection_t *p, bool (*fn)(void *arg, const char *path), void *arg)
{
    char buf[1024] = "";
    if (p == NULL || !p->inclusion || p->add_fields || p->positional || p->metas != 0 || p->expr_score)
        return false;
    return reads_node(p->root, buf, 0, sizeof buf, true, fn, arg);
}

bool
mf_projection_is_positional(const mf_projection_t *p)
{
    return p != NULL && p->positional;
}

unsigned
mf_projection_metas(const mf_projection_t *p)
{
    return p != NULL ? p->metas : 0;
}

mf_projection_t *
mf_projection_new_add_fields(const bson_t *spec, const char *stage, mf_error_t *err)
{
    mf_projection_t *p = mf_calloc(1, sizeof(*p));
    pctx_t c;

    memset(&c, 0, sizeof(c));
    c.err = err;
    c.agg = true;
    c.add_fields = true;
    p->agg = true; /* a pipeline stage: the hidden text score passes through, as mongod's metadata does */
    p->add_fields = true;
    p->root = pnode_new(P_INNER);
    if (parse_obj(&c, spec, p->root, true) < 0) {
        char reason[sizeof err->msg];
        mf_projection_free(p);
        if (!err->optimizing) { /* mongod's parse error, not its optimization's */
            snprintf(reason, sizeof reason, "%s", err->msg);
            snprintf(err->msg, sizeof err->msg, "Invalid %s :: caused by :: %.440s", stage, reason);
        }
        return NULL;
    }
    return p;
}

mf_projection_t *
mf_projection_new_agg(const bson_t *spec, const char *stage, mf_error_t *err)
{
    mf_projection_t *p;

    if (bson_empty(spec))
        return mf_err_set(err, MF_E_Location51272, "Invalid %s :: caused by :: projection specification must have at least one field",
                          stage),
               NULL;
    p = projection_new(spec, true, err);
    if (p == NULL && !err->optimizing) {
        /* MongoDB reports a stage's projection errors as "Invalid <stage> :: caused by :: <reason>". */
        char reason[sizeof err->msg];
        snprintf(reason, sizeof reason, "%s", err->msg);
        snprintf(err->msg, sizeof err->msg, "Invalid %s :: caused by :: %.440s", stage, reason);
    }
    return p;
}

/* ------------------------------------------------------------------------ */
/* Applying. */

typedef struct {
    const bson_t *root;
    const mf_match_details_t *details;
    mf_error_t *err;
    bool keep_score; /* a pipeline stage: the hidden text score field passes through (doc/match.h) */
    /*
     * The positional projection took its element from an array above its
     * leaf (mongod applies "a.b.$" to the first array on the path): below
     * that element the leaf includes its field whole.
     */
    bool pos_spent;
} actx_t;

/*
 * The text score of the document being projected: from the match details of
 * a $text plan, else from the hidden field of a pipeline document; 40218
 * when the query has no $text.
 */
static int
meta_score(const actx_t *c, bson_value_t *r)
{
    r->value_type = BSON_TYPE_DOUBLE;
    if (c->details != NULL && c->details->has_text_score) {
        r->value.v_double = c->details->text_score;
        return 0;
    }
    bson_iter_t it;
    if (c->root != NULL && bson_iter_init_find(&it, c->root, MF_TEXT_SCORE_FIELD) && BSON_ITER_HOLDS_DOUBLE(&it)) {
        r->value.v_double = bson_iter_double(&it);
        return 0;
    }
    return mf_err_set(c->err, MF_E_Location40218, "query requires text score metadata, but it is not available");
}

/*
 * The value of a {$meta: ...} leaf for the document being projected into
 * *r (views into the details' data); 1 when the plan has no such metadata
 * (the field is left out), 0, or -1 with err (a text score without $text).
 */
static int
meta_value(const actx_t *c, const pnode_t *leaf, bson_value_t *r)
{
    const mf_match_details_t *d = c->details;

    switch (leaf->meta) {
    case META_ABSENT:
        return 1;
    case MF_PROJ_META_RECORD_ID:
        if (d == NULL || !d->has_record_id)
            return 1;
        r->value_type = BSON_TYPE_INT64;
        r->value.v_int64 = d->record_id;
        return 0;
    case MF_PROJ_META_SORT_KEY:
        if (d == NULL || d->sort_key == NULL)
            return 1;
        r->value_type = BSON_TYPE_ARRAY;
        r->value.v_doc.data = (uint8_t *)bson_get_data(d->sort_key);
        r->value.v_doc.data_len = d->sort_key->len;
        return 0;
    case MF_PROJ_META_GEO_DIST:
    case MF_PROJ_META_GEO_POINT: {
        /*
         * The $geoNear metadata: hidden last fields of the document
         * (query/agg_geo.h), a view into c->root. A document that lost it
         * (the output of a $facet or $group after the $geoNear) has none:
         * the field is left out, as mongod 8.0's ExpressionMeta answers
         * missing (its parse-time check passed: the pipeline starts with $geoNear).
         */
        bool dist = leaf->meta == MF_PROJ_META_GEO_DIST;
        bson_iter_t it;
        if (c->root != NULL && bson_iter_init_find(&it, c->root, dist ? MF_GEO_DIST_FIELD : MF_GEO_POINT_FIELD)) {
            *r = *bson_iter_value(&it);
            return 0;
        }
        return 1;
    }
    default:
        return meta_score(c, r);
    }
}

static void
view(const bson_value_t *v, bson_t *b)
{
    if (!bson_init_static(b, v->value.v_doc.data, v->value.v_doc.data_len))
        bson_init(b);
}

static void
append_slice(bson_t *out, const char *key, const pnode_t *leaf, const bson_value_t *v)
{
    bson_t arr, dst;
    bson_iter_t it;
    int64_t len, start, count, i = 0, k = 0;

    if (v->value_type != BSON_TYPE_ARRAY) {
        mf_bson_append_value(out, key, -1, v);
        return;
    }
    view(v, &arr);
    len = (int64_t)bson_count_keys(&arr);
    if (leaf->has_skip) {
        start = leaf->skip < 0 ? (len + leaf->skip < 0 ? 0 : len + leaf->skip) : (leaf->skip > len ? len : leaf->skip);
        count = leaf->limit;
    } else if (leaf->limit >= 0) {
        start = 0;
        count = leaf->limit;
    } else {
        start = len + leaf->limit < 0 ? 0 : len + leaf->limit;
        count = len;
    }
    bson_append_array_begin(out, key, -1, &dst);
    if (bson_iter_init(&it, &arr)) {
        while (bson_iter_next(&it)) {
            if (i >= start && k < count) {
                char buf[16];
                const char *ik;
                bson_uint32_to_string((uint32_t)k, &ik, buf, sizeof(buf));
                mf_bson_append_value(&dst, ik, -1, bson_iter_value(&it));
                k++;
            }
            i++;
        }
    }
    bson_append_array_end(out, &dst);
}

/* Element pos of array value v into *e (a view valid while v's data is); false when pos is out of range. */
static bool
array_at(const bson_value_t *v, int32_t pos, bson_value_t *e)
{
    bson_t arr;
    bson_iter_t it;
    int32_t i = 0;
    if (pos < 0)
        return false;
    view(v, &arr);
    if (bson_iter_init(&it, &arr))
        while (bson_iter_next(&it))
            if (i++ == pos) {
                *e = *bson_iter_value(&it);
                return true;
            }
    return false;
}

/*
 * The positional projection's match position is not in the array: 51246 as
 * mongod (the command adds its executor's context: find's, getMore's,
 * findAndModify's).
 */
static int
positional_miss(actx_t *c)
{
    return mf_err_set(c->err, MF_E_Location51246, "positional operator '.$' couldn't find a matching element in the array");
}

static int
append_positional(actx_t *c, bson_t *out, const char *key, const bson_value_t *v)
{
    bson_t dst;

    if (v->value_type != BSON_TYPE_ARRAY) {
        mf_bson_append_value(out, key, -1, v);
        return 0;
    }
    bson_value_t e;
    if (!array_at(v, c->details ? c->details->array_pos : -1, &e))
        return positional_miss(c);
    bson_append_array_begin(out, key, -1, &dst);
    mf_bson_append_value(&dst, "0", 1, &e);
    bson_append_array_end(out, &dst);
    return 0;
}

static void
append_elem_match(bson_t *out, const pnode_t *leaf, const bson_value_t *v)
{
    bson_t arr, dst;
    bson_iter_t it;

    if (v == NULL || v->value_type != BSON_TYPE_ARRAY)
        return;
    view(v, &arr);
    if (!bson_iter_init(&it, &arr))
        return;
    while (bson_iter_next(&it)) {
        if (mf_matcher_match_value(leaf->matcher, bson_iter_value(&it))) {
            bson_append_array_begin(out, leaf->name, -1, &dst);
            mf_bson_append_value(&dst, "0", 1, bson_iter_value(&it));
            bson_append_array_end(out, &dst);
            return;
        }
    }
}

static int apply_incl(actx_t *c, const pnode_t *node, const bson_t *in, bson_t *out);
static int apply_excl(actx_t *c, const pnode_t *node, const bson_t *in, bson_t *out);

/* project_array: applies inner node to each element of arr (documents projected, nested arrays recursed). */
static int
project_array(actx_t *c, const pnode_t *node, bool inclusion, const bson_value_t *arrv, bson_t *out)
{
    bson_t arr;
    bson_iter_t it;
    uint32_t k = 0;

    view(arrv, &arr);
    if (!bson_iter_init(&it, &arr))
        return 0;
    while (bson_iter_next(&it)) {
        const bson_value_t *e = bson_iter_value(&it);
        char buf[16];
        const char *ik;
        bson_t child, sub;

        bson_uint32_to_string(k, &ik, buf, sizeof(buf));
        if (e->value_type == BSON_TYPE_DOCUMENT) {
            view(e, &sub);
            bson_append_document_begin(out, ik, -1, &child);
            if ((inclusion ? apply_incl(c, node, &sub, &child) : apply_excl(c, node, &sub, &child)) < 0) {
                bson_append_document_end(out, &child);
                return -1;
            }
            bson_append_document_end(out, &child);
        } else if (e->value_type == BSON_TYPE_ARRAY) {
            bson_append_array_begin(out, ik, -1, &child);
            if (project_array(c, node, inclusion, e, &child) < 0) {
                bson_append_array_end(out, &child);
                return -1;
            }
            bson_append_array_end(out, &child);
        } else if (!inclusion && !node->computed) {
            mf_bson_append_value(out, ik, -1, e);
        } else if (node->computed) {
            bson_append_document_begin(out, ik, -1, &child);
            if ((inclusion ? apply_incl(c, node, NULL, &child) : apply_excl(c, node, NULL, &child)) < 0) {
                bson_append_document_end(out, &child);
                return -1;
            }
            bson_append_document_end(out, &child);
        } else {
            continue;
        }
        k++;
    }
    return 0;
}

/* project_inner: emits key for an inner node over value v; *emitted says whether anything was written. */
static int
project_inner(actx_t *c, const pnode_t *node, bool inclusion, const char *key, const bson_value_t *v, bson_t *out,
              bool *emitted)
{
    bson_t child, sub;
    int rc;

    *emitted = true;
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        view(v, &sub);
        bson_append_document_begin(out, key, -1, &child);
        rc = inclusion ? apply_incl(c, node, &sub, &child) : apply_excl(c, node, &sub, &child);
        bson_append_document_end(out, &child);
        return rc;
    }
    if (v->value_type == BSON_TYPE_ARRAY && inclusion && node->pos_below && !c->pos_spent) {
        /* The first array on the positional path: its matched element alone, projected by the rest of the path. */
        bson_value_t e;
        if (!array_at(v, c->details ? c->details->array_pos : -1, &e))
            return positional_miss(c);
        bson_t one = BSON_INITIALIZER;
        bson_value_t onev;
        bson_append_value(&one, "0", 1, &e);
        onev.value_type = BSON_TYPE_ARRAY;
        onev.value.v_doc.data = (uint8_t *)bson_get_data(&one);
        onev.value.v_doc.data_len = one.len;
        c->pos_spent = true;
        bson_append_array_begin(out, key, -1, &child);
        rc = project_array(c, node, true, &onev, &child);
        bson_append_array_end(out, &child);
        c->pos_spent = false;
        bson_destroy(&one);
        return rc;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_append_array_begin(out, key, -1, &child);
        rc = project_array(c, node, inclusion, v, &child);
        bson_append_array_end(out, &child);
        return rc;
    }
    if (!inclusion && node->computed) {
        /* mongod's ProjectionNode::applyExpressionsToValue: a scalar under computed fields becomes a document of them. */
        bson_append_document_begin(out, key, -1, &child);
        rc = apply_excl(c, node, NULL, &child);
        bson_append_document_end(out, &child);
        return rc;
    }
    if (!inclusion) {
        mf_bson_append_value(out, key, -1, v);
        return 0;
    }
    *emitted = false;
    return 0;
}

static int
apply_incl(actx_t *c, const pnode_t *node, const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    bool *done = mf_calloc(node->n ? node->n : 1, sizeof(bool));
    int rc = 0;

    if (in && bson_iter_init(&it, in)) {
        while (rc == 0 && bson_iter_next(&it)) {
            const char *key = bson_iter_key(&it);
            const bson_value_t *v = bson_iter_value(&it);
            size_t ci;
            const pnode_t *ch = NULL;

            for (ci = 0; ci < node->n; ci++) {
                if (strcmp(node->kids[ci]->name, key) == 0) {
                    ch = node->kids[ci];
                    break;
                }
            }
            if (ch == NULL && c->keep_score && in == c->root && mf_hidden_meta_field(key))
                mf_bson_append_value(out, key, -1, v); /* the score, $geoNear's data: metadata survives $project */
            if (ch == NULL || done[ci])
                continue;
            switch (ch->kind) {
            case P_INCLUDE:
                mf_bson_append_value(out, key, -1, v);
                done[ci] = true;
                break;
            case P_INNER:
                rc = project_inner(c, ch, true, key, v, out, &done[ci]);
                break;
            case P_SLICE:
                append_slice(out, key, ch, v);
                done[ci] = true;
                break;
            case P_POSITIONAL:
                if (c->pos_spent)
                    mf_bson_append_value(out, key, -1, v); /* the element was chosen above (project_inner) */
                else
                    rc = append_positional(c, out, key, v);
                done[ci] = true;
                break;
            default:
                break;
            }
        }
    }
    for (size_t ci = 0; rc == 0 && ci < node->n; ci++) {
        const pnode_t *ch = node->kids[ci];
        if (done[ci])
            continue;
        if (ch->kind == P_META) {
            bson_value_t r;
            if ((rc = meta_value(c, ch, &r)) == 0)
                bson_append_value(out, ch->name, -1, &r);
            rc = rc > 0 ? 0 : rc;
        } else if (ch->kind == P_EXPR) {
            bson_value_t r;
            if (mf_expr_eval(ch->expr, c->root, &r, c->err) < 0) {
                rc = -1;
                break;
            }
            if (r.value_type != BSON_TYPE_EOD) {
                mf_bson_append_value(out, ch->name, -1, &r);
                bson_value_destroy(&r);
            }
        } else if (ch->kind == P_ELEMMATCH) {
            bson_iter_t fi;
            if (in && bson_iter_init_find(&fi, in, ch->name))
                append_elem_match(out, ch, bson_iter_value(&fi));
        } else if (ch->kind == P_INNER && ch->computed) {
            bson_t child;
            bson_append_document_begin(out, ch->name, -1, &child);
            rc = apply_incl(c, ch, NULL, &child);
            bson_append_document_end(out, &child);
        }
    }
    free(done);
    return rc;
}

static int
apply_excl(actx_t *c, const pnode_t *node, const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    int rc = 0;

    bool more = in != NULL && bson_iter_init(&it, in); /* in: NULL for a missing or scalar parent */

    while (rc == 0 && more && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        const pnode_t *ch = pnode_child(node, key);
        bool emitted;
        bson_value_t r;

        if (ch == NULL) {
            mf_bson_append_value(out, key, -1, v);
            continue;
        }
        switch (ch->kind) {
        case P_EXCLUDE:
            break;
        case P_INNER:
            rc = project_inner(c, ch, false, key, v, out, &emitted);
            break;
        case P_SLICE:
            append_slice(out, key, ch, v);
            break;
        case P_ELEMMATCH:
            append_elem_match(out, ch, v);
            break;
        case P_META:
            /* Set in place, as mongod's MutableDocument::setField over the copied field (left out without the metadata). */
            if ((rc = meta_value(c, ch, &r)) == 0)
                bson_append_value(out, key, -1, &r);
            rc = rc > 0 ? 0 : rc;
            break;
        default:
            mf_bson_append_value(out, key, -1, v);
            break;
        }
    }
    /* The computed fields the input lacks, appended in spec order; a missing parent becomes a document of them. */
    for (size_t k = 0; rc == 0 && k < node->n; k++) {
        const pnode_t *ch = node->kids[k];
        bson_value_t r;
        if (ch->kind != P_META && !(ch->kind == P_INNER && ch->computed))
            continue; /* looked up only for computed fields: an exclusion's cost stays its document's */
        if (in != NULL && bson_has_field(in, ch->name))
            continue;
        if (ch->kind == P_META) {
            if ((rc = meta_value(c, ch, &r)) == 0)
                bson_append_value(out, ch->name, -1, &r);
            rc = rc > 0 ? 0 : rc;
        } else if (ch->kind == P_INNER && ch->computed) {
            bson_t child;
            bson_append_document_begin(out, ch->name, -1, &child);
            rc = apply_excl(c, ch, NULL, &child);
            bson_append_document_end(out, &child);
        }
    }
    return rc;
}

/*
 * $addFields. Fields of in are kept in order; a field named by a node is
 * replaced in place (an expression's value, or for an inner node the
 * sub-document with its fields added: through arrays element by element, a
 * non-document becoming a document of just the added fields); named fields
 * in doesn't have are appended in spec order. An expression that evaluates
 * to missing ($$REMOVE, a missing path) removes the field.
 */
static int add_value(actx_t *c, const pnode_t *node, const bson_value_t *cur, bson_t *out, const char *key);

static int
apply_add(actx_t *c, const pnode_t *node, const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    bool *done = node->n ? mf_calloc(node->n, sizeof *done) : NULL;
    int rc = 0;

    if (in != NULL && bson_iter_init(&it, in)) {
        while (rc == 0 && bson_iter_next(&it)) {
            const char *key = bson_iter_key(&it);
            size_t k;
            for (k = 0; k < node->n && strcmp(node->kids[k]->name, key) != 0; k++)
                ;
            if (k == node->n) {
                bson_append_value(out, key, -1, bson_iter_value(&it));
                continue;
            }
            if (done[k])
                continue; /* a duplicate field name in the input: the first one was replaced */
            done[k] = true;
            rc = add_value(c, node->kids[k], bson_iter_value(&it), out, key);
        }
    }
    for (size_t k = 0; rc == 0 && k < node->n; k++)
        if (!done[k])
            rc = add_value(c, node->kids[k], NULL, out, node->kids[k]->name);
    free(done);
    return rc;
}

/* add_value: appends key: the value node gives to cur (NULL = missing). */
static int
add_value(actx_t *c, const pnode_t *node, const bson_value_t *cur, bson_t *out, const char *key)
{
    if (node->kind == P_EXPR) {
        bson_value_t r;
        if (mf_expr_eval(node->expr, c->root, &r, c->err) < 0)
            return -1;
        if (r.value_type != BSON_TYPE_EOD)
            bson_append_value(out, key, -1, &r);
        bson_value_destroy(&r);
        return 0;
    }
    if (cur != NULL && cur->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        bson_t arr;
        uint32_t i = 0;
        int rc = 0;
        bson_append_array_begin(out, key, -1, &arr);
        bson_iter_init_from_data(&it, cur->value.v_doc.data, cur->value.v_doc.data_len);
        while (rc == 0 && bson_iter_next(&it)) {
            char buf[16];
            const char *k;
            bson_uint32_to_string(i++, &k, buf, sizeof buf);
            rc = add_value(c, node, bson_iter_value(&it), &arr, k);
        }
        bson_append_array_end(out, &arr);
        return rc;
    }
    bson_t sub, in;
    int rc;
    bool is_doc = cur != NULL && cur->value_type == BSON_TYPE_DOCUMENT &&
                  bson_init_static(&in, cur->value.v_doc.data, cur->value.v_doc.data_len);
    bson_append_document_begin(out, key, -1, &sub);
    rc = apply_add(c, node, is_doc ? &in : NULL, &sub);
    bson_append_document_end(out, &sub);
    return rc;
}

void
mf_projection_set_sort_key_source(mf_projection_t *p, const mf_sort_t *s)
{
    p->sort_key = s;
}

int
mf_projection_apply(const mf_projection_t *p, const bson_t *doc, const mf_match_details_t *details, bson_t *out,
                    mf_error_t *err)
{
    actx_t c = {doc, details, err, p->agg};
    bson_t tmp = BSON_INITIALIZER, scored = BSON_INITIALIZER;
    /* Expressions' {$meta: "sortKey"} read the key of doc, the document the $sort before this stage ordered. */
    const mf_sort_t *prev_sort_key = mf_expr_sort_key_source_set(p->sort_key);

    if (p->expr_score && !p->agg && details != NULL && details->has_text_score &&
        !bson_has_field(doc, MF_TEXT_SCORE_FIELD)) {
        /*
         * An expression reading {$meta: "textScore"} evaluates on the stored
         * document, which carries no score: give it the hidden field, as a
         * pipeline document has (expr.c reads it there). The output is
         * built from doc itself; only "$$ROOT" could carry the field out,
         * and is stripped below.
         */
        bson_copy_to(doc, &scored);
        BSON_APPEND_DOUBLE(&scored, MF_TEXT_SCORE_FIELD, details->text_score);
        c.root = &scored;
    }
    int rc = p->add_fields ? apply_add(&c, p->root, doc, &tmp)
             : p->inclusion ? apply_incl(&c, p->root, doc, &tmp)
                            : apply_excl(&c, p->root, doc, &tmp);

    if (rc == 0 && !p->agg &&
        (bson_has_field(&tmp, MF_TEXT_SCORE_FIELD) || bson_has_field(&tmp, MF_GEO_DIST_FIELD) ||
         bson_has_field(&tmp, MF_GEO_POINT_FIELD))) {
        bson_t clean = BSON_INITIALIZER;
        bson_copy_to_excluding_noinit(&tmp, &clean, MF_TEXT_SCORE_FIELD, MF_GEO_DIST_FIELD, MF_GEO_POINT_FIELD, NULL);
        bson_destroy(&tmp);
        bson_steal(&tmp, &clean);
    }
    if (rc == 0 && c.root == &scored) {
        bson_t *h = bson_copy(&tmp);
        mf_text_strip_score(&h);
        bson_concat(out, h);
        bson_destroy(h);
    } else if (rc == 0) {
        bson_concat(out, &tmp);
    }
    bson_destroy(&tmp);
    bson_destroy(&scored);
    (void)mf_expr_sort_key_source_set(prev_sort_key);
    return rc;
}
