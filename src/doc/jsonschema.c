/*
 * jsonschema.c: the $jsonSchema operator (see jsonschema.h).
 *
 * Design: a schema is a node holding a list of rules, one per keyword, each
 * with an owned copy of the keyword's value (for errInfo's specifiedAs) and
 * its parsed parameters. A value satisfies a node when it satisfies every
 * rule; a rule whose keyword only concerns another type passes. Keywords
 * that depend on each other (additionalProperties needs the node's
 * properties and patternProperties; additionalItems needs an array-form
 * items; exclusiveMinimum needs minimum) are resolved at parse time, so
 * matching never re-reads the schema BSON.
 *
 * Invariants: every node owns its rules, sub-nodes, value copies and
 * compiled regexes; parse recursion is bounded by kMaxDepth; matching does
 * not allocate except pcre2 match data.
 */
#include "common/alloc.h"
#include "common/curop.h"
#include "common/log.h"
#include "doc/expr.h"
#include "doc/jsonschema.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include "doc/rx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/match.h"
#include "doc/value.h"

enum { kMaxDepth = 100 };

typedef enum rkind {
    R_TYPE,
    R_REQUIRED,
    R_PROPERTIES,
    R_PATTERN_PROPS,
    R_ADDL_PROPS,
    R_DEPENDENCIES,
    R_MINIMUM,
    R_MAXIMUM,
    R_MULTIPLE_OF,
    R_MIN_LENGTH,
    R_MAX_LENGTH,
    R_PATTERN,
    R_ENUM,
    R_ITEMS,
    R_ADDL_ITEMS,
    R_MIN_ITEMS,
    R_MAX_ITEMS,
    R_UNIQUE_ITEMS,
    R_MIN_PROPS,
    R_MAX_PROPS,
    R_ALL_OF,
    R_ANY_OF,
    R_ONE_OF,
    R_NOT,
    R_ENCRYPT,
} rkind_t;

typedef struct jnode jnode_t;

typedef struct rule {
    rkind_t kind;
    char *keyword;      /* owned; as written */
    bson_value_t spec;  /* owned copy of the keyword's value */
    bool types[256];    /* R_TYPE, R_ENCRYPT: accepted BSON type bytes (MinKey 0xff, MaxKey 0x7f) */
    int64_t n;          /* lengths and counts */
    bool exclusive;     /* R_MINIMUM / R_MAXIMUM */
    bool flag;          /* R_UNIQUE_ITEMS: true; R_ADDL_*: the boolean form's value; R_TYPE: implied by
                           encrypt (never explained); R_ENCRYPT: encrypt.bsonType given (types) */
    pcre2_code *rx;     /* R_PATTERN */
    char **names;       /* R_REQUIRED, R_PROPERTIES, R_PATTERN_PROPS (patterns), R_DEPENDENCIES */
    pcre2_code **rxs;   /* R_PATTERN_PROPS */
    jnode_t **kids;     /* sub-schemas (one per name, per items entry, per allOf entry, ...) */
    char ***deps;       /* R_DEPENDENCIES: NULL-terminated name lists (NULL when schema form) */
    size_t count;       /* entries in names / kids */
    jnode_t *sub;       /* R_ADDL_PROPS / R_ADDL_ITEMS schema form, R_NOT, R_ITEMS single form */
    char *title;        /* R_DEPENDENCIES: a string 'title' / 'description' entry (owned; NULL if none) */
    char *description;
} rule_t;

struct jnode {
    rule_t *rules;
    size_t nrules, cap;
    char *title, *description; /* the schema's annotations (owned; NULL if absent), for errInfo */
    /* Resolved at parse time for additionalProperties / additionalItems. */
    const rule_t *props, *patprops, *items;
};

struct mf_jsonschema {
    jnode_t *root;
    bson_value_t schema; /* owned copy, for the specifiedAs of a root that can never match */
};

/* ---- freeing ---- */

static void node_free(jnode_t *n);

static void
rule_free(rule_t *r)
{
    free(r->keyword);
    bson_value_destroy(&r->spec);
    if (r->rx)
        pcre2_code_free(r->rx);
    for (size_t i = 0; i < r->count; i++) {
        if (r->names)
            free(r->names[i]);
        if (r->rxs && r->rxs[i])
            pcre2_code_free(r->rxs[i]);
        if (r->kids)
            node_free(r->kids[i]);
        if (r->deps && r->deps[i]) {
            for (char **p = r->deps[i]; *p; p++)
                free(*p);
            free(r->deps[i]);
        }
    }
    free(r->names);
    free(r->rxs);
    free(r->kids);
    free(r->deps);
    node_free(r->sub);
    free(r->title);
    free(r->description);
}

static void
node_free(jnode_t *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->nrules; i++)
        rule_free(&n->rules[i]);
    free(n->rules);
    free(n->title);
    free(n->description);
    free(n);
}

void
mf_jsonschema_free(mf_jsonschema_t *s)
{
    if (s == NULL)
        return;
    node_free(s->root);
    bson_value_destroy(&s->schema);
    free(s);
}

/* ---- equality ---- */

/*
 * Equality as mongod's UnorderedFieldsBSONElementComparator, which enum
 * (InternalSchemaEqMatchExpression, InternalSchemaRootDocEqMatchExpression)
 * and uniqueItems use: an object equals one with the same fields in any
 * order, at any depth; arrays compare position by position; numbers across
 * types; no collation (the caller's).
 */
static bool
unordered_equal(const bson_value_t *a, const bson_value_t *b, int depth)
{
    bson_iter_t ia, ib;
    if (a->value_type == BSON_TYPE_DOCUMENT && b->value_type == BSON_TYPE_DOCUMENT && depth < 200) {
        size_t na = 0, nb = 0;
        if (!bson_iter_init_from_data(&ia, a->value.v_doc.data, a->value.v_doc.data_len) ||
            !bson_iter_init_from_data(&ib, b->value.v_doc.data, b->value.v_doc.data_len))
            return false;
        while (bson_iter_next(&ib))
            nb++;
        while (bson_iter_next(&ia)) {
            na++;
            if (!bson_iter_init_from_data(&ib, b->value.v_doc.data, b->value.v_doc.data_len) ||
                !bson_iter_find(&ib, bson_iter_key(&ia)) ||
                !unordered_equal(bson_iter_value(&ia), bson_iter_value(&ib), depth + 1))
                return false;
        }
        return na == nb;
    }
    if (a->value_type == BSON_TYPE_ARRAY && b->value_type == BSON_TYPE_ARRAY && depth < 200) {
        if (!bson_iter_init_from_data(&ia, a->value.v_doc.data, a->value.v_doc.data_len) ||
            !bson_iter_init_from_data(&ib, b->value.v_doc.data, b->value.v_doc.data_len))
            return false;
        for (;;) {
            bool ha = bson_iter_next(&ia), hb = bson_iter_next(&ib);
            if (ha != hb)
                return false;
            if (!ha)
                return true;
            if (!unordered_equal(bson_iter_value(&ia), bson_iter_value(&ib), depth + 1))
                return false;
        }
    }
    return mf_value_equal(a, b);
}

/* A field of a document being put in canonical order (canon_append). */
typedef struct canon_field {
    const char *key;
    uint32_t klen;
    const bson_value_t *v;
    size_t pos;
} canon_field_t;

static int
canon_field_cmp(const void *a, const void *b)
{
    const canon_field_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/*
 * Appends v to out under key with every object's fields in name order, at
 * any depth (to 200 levels, as unordered_equal): the form in which two
 * values are unordered_equal exactly when mf_value_cmp finds their forms
 * equal, so that they can be sorted. The values are bson_iter_t's, valid
 * while v's bytes live; out owns what it appends.
 */
static void
canon_append(bson_t *out, const char *key, uint32_t klen, const bson_value_t *v, int depth)
{
    bson_iter_t it;
    bson_t child;

    if ((v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) || depth >= 200 ||
        !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        bson_append_value(out, key, (int)klen, v);
        return;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_append_array_begin(out, key, (int)klen, &child);
        while (bson_iter_next(&it))
            canon_append(&child, bson_iter_key(&it), bson_iter_key_len(&it), bson_iter_value(&it), depth + 1);
        bson_append_array_end(out, &child);
        return;
    }
    size_t n = 0, cap = 0;
    canon_field_t *f = NULL;
    bson_value_t *vals = NULL;
    while (bson_iter_next(&it)) {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            f = mf_realloc(f, cap * sizeof(*f));
            vals = mf_realloc(vals, cap * sizeof(*vals));
        }
        vals[n] = *bson_iter_value(&it);
        f[n] = (canon_field_t){bson_iter_key(&it), bson_iter_key_len(&it), NULL, n};
        n++;
    }
    for (size_t i = 0; i < n; i++)
        f[i].v = &vals[f[i].pos];
    qsort(f, n, sizeof(*f), canon_field_cmp);
    bson_append_document_begin(out, key, (int)klen, &child);
    for (size_t i = 0; i < n; i++)
        canon_append(&child, f[i].key, f[i].klen, f[i].v, depth + 1);
    bson_append_document_end(out, &child);
    free(f);
    free(vals);
}

/* An element of an array being checked for duplicates: its canonical form and its position. */
typedef struct uniq_item {
    bson_value_t v;
    size_t pos;
} uniq_item_t;

static int
uniq_item_cmp(const void *a, const void *b)
{
    const uniq_item_t *x = a, *y = b;
    int c = mf_value_cmp(&x->v, &y->v);
    return c != 0 ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/*
 * The first element of array v (in array order) equal (unordered_equal) to
 * an earlier one, into *dup (pointing into v) when dup is not NULL: true,
 * or false when every element is distinct. As mongod's
 * InternalSchemaUniqueItemsMatchExpression, with a set rather than a scan
 * per element: the elements' canonical forms (canon_append) are sorted, so
 * an array of n elements costs n log n comparisons, not n^2.
 */
static bool
first_duplicate(const bson_value_t *v, bson_value_t *dup)
{
    bson_iter_t it;
    bson_t canon = BSON_INITIALIZER;
    uniq_item_t *items = NULL;
    size_t n = 0, cap = 0, first = SIZE_MAX;

    if (v->value_type != BSON_TYPE_ARRAY || !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        goto out;
    while (bson_iter_next(&it))
        canon_append(&canon, bson_iter_key(&it), bson_iter_key_len(&it), bson_iter_value(&it), 0);
    if (!bson_iter_init(&it, &canon))
        goto out;
    while (bson_iter_next(&it)) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            items = mf_realloc(items, cap * sizeof(*items));
        }
        items[n] = (uniq_item_t){*bson_iter_value(&it), n};
        n++;
    }
    if (n > 1)
        qsort(items, n, sizeof(*items), uniq_item_cmp);
    /* In a run of equal forms (sorted by position) every element after the first repeats an earlier one. */
    for (size_t i = 1; i < n; i++)
        if (items[i].pos < first && mf_value_cmp(&items[i - 1].v, &items[i].v) == 0)
            first = items[i].pos;
    if (first != SIZE_MAX && dup != NULL && bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
        for (size_t i = 0; bson_iter_next(&it); i++) {
            if (i == first) {
                *dup = *bson_iter_value(&it);
                break;
            }
        }
    }
out:
    free(items);
    bson_destroy(&canon);
    return first != SIZE_MAX;
}

static bool
has_duplicate(const bson_value_t *v)
{
    return first_duplicate(v, NULL);
}

/* ---- parsing ---- */

/* The calling thread's mf_jsonschema_allow_encrypt setting (per thread: parses run on many). */
static _Thread_local bool encrypt_banned;

bool
mf_jsonschema_allow_encrypt(bool allow)
{
    bool was = !encrypt_banned;
    encrypt_banned = !allow;
    return was;
}

static jnode_t *parse_node(const bson_value_t *v, int depth, mf_error_t *err);

static rule_t *
rule_add(jnode_t *n, rkind_t kind, const char *kw, const bson_value_t *spec)
{
    if (n->nrules == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 8;
        n->rules = mf_realloc(n->rules, n->cap * sizeof(*n->rules));
        if (n->rules == NULL)
            abort();
    }
    rule_t *r = &n->rules[n->nrules++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->keyword = mf_strdup(kw);
    bson_value_copy(spec, &r->spec);
    return r;
}

static bool
iter_array(const bson_value_t *v, bson_iter_t *it)
{
    return v->value_type == BSON_TYPE_ARRAY && bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len);
}

static bool
iter_doc(const bson_value_t *v, bson_iter_t *it)
{
    return v->value_type == BSON_TYPE_DOCUMENT &&
           bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len);
}

static pcre2_code *
compile_rx(const char *pattern, size_t len, const char *kw, mf_error_t *err)
{
    int ec;
    PCRE2_SIZE off;
    pcre2_code *rx = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF, &ec, &off, NULL);
    if (rx == NULL) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(ec, buf, sizeof(buf));
        mf_err_set(err, MF_E_BadValue, "$jsonSchema keyword '%s' has an invalid regular expression: %s", kw,
                   (char *)buf);
    }
    return rx;
}

static void
mark_number_types(bool *types)
{
    types[BSON_TYPE_INT32] = types[BSON_TYPE_INT64] = types[BSON_TYPE_DOUBLE] = types[BSON_TYPE_DECIMAL128] = true;
}

static int
add_type_name(rule_t *r, const char *kw, const char *name, mf_error_t *err)
{
    /* JSONSchemaParser::parseTypeSet refuses 'integer' for type and bsonType alike. */
    if (strcmp(name, "integer") == 0)
        return mf_err_set(err, MF_E_FailedToParse, "$jsonSchema type 'integer' is not currently supported.");
    if (strcmp(kw, "type") == 0) {
        static const struct {
            const char *name;
            int type;
        } json[] = {{"object", BSON_TYPE_DOCUMENT}, {"array", BSON_TYPE_ARRAY}, {"boolean", BSON_TYPE_BOOL},
                    {"string", BSON_TYPE_UTF8},     {"null", BSON_TYPE_NULL},   {"number", -2}};
        if (strcmp(name, "integer") == 0)
            return mf_err_set(err, MF_E_FailedToParse, "$jsonSchema type 'integer' is not currently supported.");
        for (size_t i = 0; i < sizeof(json) / sizeof(json[0]); i++) {
            if (strcmp(json[i].name, name) == 0) {
                if (json[i].type == -2)
                    mark_number_types(r->types);
                else
                    r->types[json[i].type] = true;
                return 0;
            }
        }
        return mf_err_set(err, MF_E_BadValue, "Unknown type name alias: %s", name);
    }
    int t = mf_type_alias(name);
    if (t == -1)
        return mf_err_set(err, MF_E_BadValue, "Unknown type name alias: %s", name);
    if (t == -2)
        mark_number_types(r->types);
    else
        r->types[t & 0xff] = true;
    return 0;
}

static int
parse_type(rule_t *r, const char *kw, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    if (v->value_type == BSON_TYPE_UTF8)
        return add_type_name(r, kw, v->value.v_utf8.str, err);
    if (!iter_array(v, &it))
        return mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be either a string or an array of strings",
                          kw);
    int k = 0;
    while (bson_iter_next(&it)) {
        bson_iter_t prev;
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' array elements must be strings", kw);
        const char *name = bson_iter_utf8(&it, NULL);
        if (strcmp(name, "integer") != 0) { /* 'integer' is refused as such (add_type_name) */
            /* json_schema_parser.cpp's parseTypeSet: a name twice is 9. */
            iter_array(v, &prev);
            for (int j = 0; j < k && bson_iter_next(&prev); j++) {
                if (BSON_ITER_HOLDS_UTF8(&prev) && strcmp(bson_iter_utf8(&prev, NULL), name) == 0)
                    return mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword '%s' has duplicate value: %s", kw,
                                      name);
            }
        }
        if (add_type_name(r, kw, name, err) != 0)
            return -1;
        k++;
    }
    if (k == 0)
        return mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword '%s' must name at least one type", kw);
    return 0;
}

/* The length and count keywords: mongod's parseIntegerElementToNonNegativeLong (9 FailedToParse, its messages). */
static int
nonneg_int(const bson_value_t *v, const char *kw, int64_t *out, mf_error_t *err)
{
    return mf_match_parse_long("", kw, v, true, out, err);
}

/* Parses an array of schemas into r->kids. */
static int
parse_schema_array(rule_t *r, const bson_value_t *v, const char *kw, int depth, bool allow_empty, mf_error_t *err)
{
    bson_iter_t it;
    size_t cap = 0;
    if (!iter_array(v, &it))
        return mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be an array", kw);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return allow_empty /* items */
                       ? mf_err_set(err, MF_E_TypeMismatch,
                                    "$jsonSchema keyword 'items' requires that each element of the array is an object, "
                                    "but found a %s",
                                    mf_type_name(bson_iter_type(&it)))
                       : mf_err_set(err, MF_E_TypeMismatch,
                                    "$jsonSchema keyword '%s' must be an array of objects, but found an element of type %s",
                                    kw, mf_type_name(bson_iter_type(&it)));
        jnode_t *k = parse_node(bson_iter_value(&it), depth + 1, err);
        if (k == NULL)
            return -1;
        if (r->count == cap) {
            cap = cap ? cap * 2 : 4;
            r->kids = mf_realloc(r->kids, cap * sizeof(*r->kids));
        }
        r->kids[r->count++] = k;
    }
    if (r->count == 0 && !allow_empty)
        return mf_err_set(err, MF_E_BadValue, "$jsonSchema keyword '%s' must be a non-empty array", kw);
    return 0;
}

/* Parses a {name: schema} document into r->names / r->kids (names compiled as regexes when rx). */
static int
parse_schema_map(rule_t *r, const bson_value_t *v, const char *kw, bool rx, int depth, mf_error_t *err)
{
    bson_iter_t it;
    size_t cap = 0;
    if (!iter_doc(v, &it))
        return mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be an object", kw);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return rx ? mf_err_set(err, MF_E_TypeMismatch,
                                   "$jsonSchema keyword 'patternProperties' has property '%s' which is not an object",
                                   bson_iter_key(&it))
                      : mf_err_set(err, MF_E_TypeMismatch,
                                   "Nested schema for $jsonSchema property '%s' must be an object", bson_iter_key(&it));
        if (r->count == cap) {
            cap = cap ? cap * 2 : 4;
            r->names = mf_realloc(r->names, cap * sizeof(*r->names));
            r->kids = mf_realloc(r->kids, cap * sizeof(*r->kids));
            if (rx)
                r->rxs = mf_realloc(r->rxs, cap * sizeof(*r->rxs));
        }
        size_t i = r->count;
        r->names[i] = mf_strdup(bson_iter_key(&it));
        r->kids[i] = NULL;
        if (rx)
            r->rxs[i] = NULL;
        r->count++;
        if (rx && (r->rxs[i] = compile_rx(r->names[i], strlen(r->names[i]), kw, err)) == NULL)
            return -1;
        if ((r->kids[i] = parse_node(bson_iter_value(&it), depth + 1, err)) == NULL)
            return -1;
    }
    return 0;
}

static int
parse_required(rule_t *r, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    size_t cap = 0;
    if (!iter_array(v, &it))
        return mf_err_set(err, MF_E_TypeMismatch,
                          "$jsonSchema keyword 'required' must be an array, but found an element of type %s",
                          mf_type_name(v->value_type));
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(err, MF_E_TypeMismatch,
                              "$jsonSchema keyword 'required' must be an array of strings, but found an element of type: %s",
                              mf_type_name(bson_iter_type(&it)));
        const char *name = bson_iter_utf8(&it, NULL);
        for (size_t i = 0; i < r->count; i++) {
            if (strcmp(r->names[i], name) == 0)
                return mf_err_set(err, MF_E_FailedToParse,
                                  "$jsonSchema keyword 'required' array cannot contain duplicate values");
        }
        if (r->count == cap) {
            cap = cap ? cap * 2 : 4;
            r->names = mf_realloc(r->names, cap * sizeof(*r->names));
        }
        r->names[r->count++] = mf_strdup(name);
    }
    if (r->count == 0)
        return mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword 'required' cannot be an empty array");
    return 0;
}

static int
parse_dependencies(rule_t *r, const bson_value_t *v, int depth, mf_error_t *err)
{
    bson_iter_t it;
    size_t cap = 0;
    if (!iter_doc(v, &it))
        return mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword 'dependencies' must be an object");
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        /* As mongod's parseDependencies, string 'title' / 'description' entries annotate the keyword. */
        if (BSON_ITER_HOLDS_UTF8(&it) && (strcmp(key, "title") == 0 || strcmp(key, "description") == 0)) {
            char **slot = key[0] == 't' ? &r->title : &r->description;
            free(*slot);
            *slot = mf_strdup(bson_iter_utf8(&it, NULL));
            continue;
        }
        if (r->count == cap) {
            cap = cap ? cap * 2 : 4;
            r->names = mf_realloc(r->names, cap * sizeof(*r->names));
            r->kids = mf_realloc(r->kids, cap * sizeof(*r->kids));
            r->deps = mf_realloc(r->deps, cap * sizeof(*r->deps));
        }
        size_t i = r->count++;
        r->names[i] = mf_strdup(bson_iter_key(&it));
        r->kids[i] = NULL;
        r->deps[i] = NULL;
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            if ((r->kids[i] = parse_node(bson_iter_value(&it), depth + 1, err)) == NULL)
                return -1;
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t ai;
            size_t n = 0;
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai))
                n++;
            r->deps[i] = mf_calloc(n + 1, sizeof(char *));
            /* json_schema_parser.cpp's translatePropertyDependency: non-empty, distinct strings. */
            if (n == 0)
                return mf_err_set(err, MF_E_FailedToParse,
                                  "property '%s' in $jsonSchema keyword 'dependencies' cannot be an empty array",
                                  r->names[i]);
            bson_iter_recurse(&it, &ai);
            n = 0;
            while (bson_iter_next(&ai)) {
                if (!BSON_ITER_HOLDS_UTF8(&ai))
                    return mf_err_set(err, MF_E_TypeMismatch,
                                      "array '%s' in $jsonSchema keyword 'dependencies' can only contain strings, but "
                                      "found element of type: %s",
                                      r->names[i], mf_type_name(bson_iter_type(&ai)));
                const char *dep = bson_iter_utf8(&ai, NULL);
                for (size_t j = 0; j < n; j++) {
                    if (strcmp(r->deps[i][j], dep) == 0)
                        return mf_err_set(err, MF_E_FailedToParse,
                                          "array '%s' in $jsonSchema keyword 'dependencies' contains duplicate element: %s",
                                          r->names[i], dep);
                }
                r->deps[i][n++] = mf_strdup(dep);
            }
        } else {
            return mf_err_set(err, MF_E_TypeMismatch,
                              "property '%s' in $jsonSchema keyword 'dependencies' must be either an object or an array",
                              r->names[i]);
        }
    }
    return 0;
}

/*
 * The sub-document of encrypt (info: mongod's EncryptionInfo) or
 * encryptMetadata (EncryptionMetadata), strict IDL structs named ctx:
 * bsonType (encrypt only, into r->types, r->flag set), algorithm,
 * initializationVector, keyId. encrypt_schema.idl, encrypt_schema_types.cpp.
 */
static int
parse_encrypt_info(rule_t *r, const char *ctx, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it, ki;
    bool info = r != NULL;
    iter_doc(v, &it);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        const bson_value_t *fv = bson_iter_value(&it);
        if (info && strcmp(f, "bsonType") == 0) {
            if (parse_type(r, f, fv, err) != 0)
                return -1;
            r->flag = true;
        } else if (strcmp(f, "algorithm") == 0) {
            if (fv->value_type != BSON_TYPE_UTF8)
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'",
                                  ctx, f, mf_type_name(fv->value_type));
            if (strcmp(fv->value.v_utf8.str, "AEAD_AES_256_CBC_HMAC_SHA_512-Deterministic") != 0 &&
                strcmp(fv->value.v_utf8.str, "AEAD_AES_256_CBC_HMAC_SHA_512-Random") != 0)
                return mf_err_set(err, MF_E_BadValue, "Enumeration value '%s' for field '%s.%s' is not a valid value.",
                                  fv->value.v_utf8.str, ctx, f);
        } else if (strcmp(f, "initializationVector") == 0) {
            if (fv->value_type != BSON_TYPE_BINARY)
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'binData'",
                                  ctx, f, mf_type_name(fv->value_type));
        } else if (strcmp(f, "keyId") == 0) {
            /* EncryptSchemaKeyId: a JSON pointer string, or an array of UUIDs. */
            if (fv->value_type == BSON_TYPE_UTF8)
                continue;
            if (!iter_array(fv, &ki))
                return mf_err_set(err, MF_E_Location51085,
                                  "Expected either string or array of UUID for EncryptSchemaKeyId, found %s",
                                  mf_type_name(fv->value_type));
            while (bson_iter_next(&ki)) {
                const bson_value_t *e = bson_iter_value(&ki);
                if (e->value_type != BSON_TYPE_BINARY || e->value.v_binary.subtype != BSON_SUBTYPE_UUID)
                    return mf_err_set(err, MF_E_Location51084, "Array elements must have type UUID, found %d",
                                      e->value_type == BSON_TYPE_BINARY ? (int)e->value.v_binary.subtype : -1);
            }
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", ctx, f);
        }
    }
    return 0;
}

static bool
is_unsupported(const char *k)
{
    static const char *const kws[] = {"$ref", "$schema", "default", "definitions", "format", "id", NULL};
    for (int i = 0; kws[i]; i++) {
        if (strcmp(k, kws[i]) == 0)
            return true;
    }
    return false;
}

static jnode_t *
parse_node(const bson_value_t *v, int depth, mf_error_t *err)
{
    bson_iter_t it;
    /* bson_iter_value's result lives in the iterator: keep copies (their data stays in v's buffer). */
    bson_value_t excl_min_v, excl_max_v, addl_items_v;
    const bson_value_t *excl_min = NULL, *excl_max = NULL, *addl_items = NULL;
    bool has_type = false, has_bson_type = false, has_encrypt = false, has_meta = false;
    jnode_t *n;

    if (depth > kMaxDepth) {
        mf_err_set(err, MF_E_BadValue, "$jsonSchema exceeded maximum nesting depth of %d", kMaxDepth);
        return NULL;
    }
    if (!iter_doc(v, &it)) {
        mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema must be an object");
        return NULL;
    }
    n = mf_calloc(1, sizeof(*n));
    if (n == NULL)
        abort();
    for (int pos = 0; bson_iter_next(&it); pos++) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *kv = bson_iter_value(&it);
        rule_t *r;
        int rc = 0;
        bson_iter_t prev;

        /* json_schema_parser.cpp's _parse: a keyword twice is 9 (an unknown one was refused first). */
        iter_doc(v, &prev);
        for (int j = 0; j < pos && bson_iter_next(&prev); j++) {
            if (strcmp(bson_iter_key(&prev), k) == 0 && !is_unsupported(k)) {
                mf_err_set(err, MF_E_FailedToParse, "Duplicate $jsonSchema keyword: %s", k);
                goto fail;
            }
        }

        if (strcmp(k, "title") == 0 || strcmp(k, "description") == 0) {
            if (kv->value_type != BSON_TYPE_UTF8) {
                mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be of type string", k);
                goto fail;
            }
            char **slot = k[0] == 't' ? &n->title : &n->description;
            free(*slot);
            *slot = mf_strdup(kv->value.v_utf8.str);
            continue;
        }
        if (strcmp(k, "exclusiveMinimum") == 0 || strcmp(k, "exclusiveMaximum") == 0) {
            if (kv->value_type != BSON_TYPE_BOOL) {
                mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be a boolean", k);
                goto fail;
            }
            if (k[9] == 'M' && k[10] == 'i') {
                excl_min_v = *kv;
                excl_min = &excl_min_v;
            } else {
                excl_max_v = *kv;
                excl_max = &excl_max_v;
            }
            continue;
        }
        if (strcmp(k, "additionalItems") == 0) {
            addl_items_v = *kv;
            addl_items = &addl_items_v;
            continue;
        }
        if (strcmp(k, "bsonType") == 0 || strcmp(k, "type") == 0) {
            if (k[0] == 't')
                has_type = true;
            else
                has_bson_type = true;
            if (has_type && has_bson_type) {
                mf_err_set(err, MF_E_FailedToParse, "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'");
                goto fail;
            }
            if (has_encrypt)
                goto encrypt_with_type;
            r = rule_add(n, R_TYPE, k, kv);
            rc = parse_type(r, k, kv, err);
        } else if (strcmp(k, "required") == 0) {
            r = rule_add(n, R_REQUIRED, k, kv);
            rc = parse_required(r, kv, err);
        } else if (strcmp(k, "properties") == 0) {
            r = rule_add(n, R_PROPERTIES, k, kv);
            rc = parse_schema_map(r, kv, k, false, depth, err);
        } else if (strcmp(k, "patternProperties") == 0) {
            r = rule_add(n, R_PATTERN_PROPS, k, kv);
            rc = parse_schema_map(r, kv, k, true, depth, err);
        } else if (strcmp(k, "additionalProperties") == 0) {
            r = rule_add(n, R_ADDL_PROPS, k, kv);
            if (kv->value_type == BSON_TYPE_BOOL)
                r->flag = kv->value.v_bool;
            else if (kv->value_type == BSON_TYPE_DOCUMENT)
                rc = (r->sub = parse_node(kv, depth + 1, err)) == NULL ? -1 : 0;
            else
                rc = mf_err_set(err, MF_E_TypeMismatch,
                                "$jsonSchema keyword 'additionalProperties' must be an object or a boolean");
        } else if (strcmp(k, "dependencies") == 0) {
            r = rule_add(n, R_DEPENDENCIES, k, kv);
            rc = parse_dependencies(r, kv, depth, err);
        } else if (strcmp(k, "minimum") == 0 || strcmp(k, "maximum") == 0 || strcmp(k, "multipleOf") == 0) {
            if (!mf_value_is_number(kv)) {
                mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be a number", k);
                goto fail;
            }
            r = rule_add(n, k[1] == 'i' ? R_MINIMUM : k[1] == 'a' ? R_MAXIMUM : R_MULTIPLE_OF, k, kv);
            if (r->kind == R_MULTIPLE_OF && !(mf_value_as_double(kv) > 0))
                rc = mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword 'multipleOf' must have a positive value");
        } else if (strcmp(k, "minLength") == 0 || strcmp(k, "maxLength") == 0) {
            r = rule_add(n, k[1] == 'i' ? R_MIN_LENGTH : R_MAX_LENGTH, k, kv);
            rc = nonneg_int(kv, k, &r->n, err);
        } else if (strcmp(k, "minItems") == 0 || strcmp(k, "maxItems") == 0) {
            r = rule_add(n, k[1] == 'i' ? R_MIN_ITEMS : R_MAX_ITEMS, k, kv);
            rc = nonneg_int(kv, k, &r->n, err);
        } else if (strcmp(k, "minProperties") == 0 || strcmp(k, "maxProperties") == 0) {
            r = rule_add(n, k[1] == 'i' ? R_MIN_PROPS : R_MAX_PROPS, k, kv);
            rc = nonneg_int(kv, k, &r->n, err);
        } else if (strcmp(k, "pattern") == 0) {
            if (kv->value_type != BSON_TYPE_UTF8) {
                mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword 'pattern' must be a string");
                goto fail;
            }
            r = rule_add(n, R_PATTERN, k, kv);
            rc = (r->rx = compile_rx(kv->value.v_utf8.str, kv->value.v_utf8.len, k, err)) == NULL ? -1 : 0;
        } else if (strcmp(k, "enum") == 0) {
            bson_iter_t ei;
            if (!iter_array(kv, &ei)) {
                mf_err_set(err, MF_E_TypeMismatch,
                           "$jsonSchema keyword 'enum' must be an array, but found an element of type %s",
                           mf_type_name(kv->value_type));
                goto fail;
            }
            if (!bson_iter_next(&ei)) {
                mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword 'enum' cannot be an empty array");
                goto fail;
            }
            /* parseEnum: values equal under the field-order-blind comparison are 9. */
            if (has_duplicate(kv)) {
                mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword 'enum' array cannot contain duplicate values.");
                goto fail;
            }
            rule_add(n, R_ENUM, k, kv);
        } else if (strcmp(k, "items") == 0) {
            r = rule_add(n, R_ITEMS, k, kv);
            if (kv->value_type == BSON_TYPE_DOCUMENT)
                rc = (r->sub = parse_node(kv, depth + 1, err)) == NULL ? -1 : 0;
            else if (kv->value_type == BSON_TYPE_ARRAY)
                rc = parse_schema_array(r, kv, k, depth, true, err);
            else
                rc = mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword 'items' must be an array or an object, not %s",
                                mf_type_name(kv->value_type));
        } else if (strcmp(k, "uniqueItems") == 0) {
            if (kv->value_type != BSON_TYPE_BOOL) {
                mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword 'uniqueItems' must be a boolean");
                goto fail;
            }
            if (kv->value.v_bool)
                rule_add(n, R_UNIQUE_ITEMS, k, kv);
        } else if (strcmp(k, "allOf") == 0 || strcmp(k, "anyOf") == 0 || strcmp(k, "oneOf") == 0) {
            r = rule_add(n, k[0] == 'o' ? R_ONE_OF : k[1] == 'l' ? R_ALL_OF : R_ANY_OF, k, kv);
            rc = parse_schema_array(r, kv, k, depth, false, err);
        } else if (strcmp(k, "not") == 0) {
            if (kv->value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_TypeMismatch,
                           "$jsonSchema keyword 'not' must be an object, but found an element of type %s",
                           mf_type_name(kv->value_type));
                goto fail;
            }
            r = rule_add(n, R_NOT, k, kv);
            rc = (r->sub = parse_node(kv, depth + 1, err)) == NULL ? -1 : 0;
        } else if (strcmp(k, "encrypt") == 0 || strcmp(k, "encryptMetadata") == 0) {
            /* json_schema_parser.cpp's translateEncryptionKeywords; encrypt implies bsonType binData. */
            bool meta = k[7] == 'M';
            if (encrypt_banned) {
                mf_err_set(err, MF_E_QueryFeatureNotAllowed,
                           "Encryption-related validator keywords are not allowed in this context");
                goto fail;
            }
            if (meta)
                has_meta = true;
            else
                has_encrypt = true;
            if (has_encrypt && has_meta) {
                mf_err_set(err, MF_E_FailedToParse, "Cannot specify both $jsonSchema keywords 'encrypt' and 'encryptMetadata'");
                goto fail;
            }
            if (has_encrypt && (has_type || has_bson_type))
                goto encrypt_with_type;
            if (kv->value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema keyword '%s' must be an object ", k);
                goto fail;
            }
            if (meta) {
                if (kv->value.v_doc.data_len <= 5) {
                    mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword 'encryptMetadata' cannot be an empty object ");
                    goto fail;
                }
                rc = parse_encrypt_info(NULL, k, kv, err);
            } else {
                r = rule_add(n, R_TYPE, k, kv);
                r->types[BSON_TYPE_BINARY] = true;
                r->flag = true;
                r = rule_add(n, R_ENCRYPT, k, kv);
                rc = parse_encrypt_info(r, k, kv, err);
            }
        } else if (is_unsupported(k)) {
            mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword '%s' is not currently supported", k);
            goto fail;
        } else {
            mf_err_set(err, MF_E_FailedToParse, "Unknown $jsonSchema keyword: %s", k);
            goto fail;
        }
        if (rc != 0)
            goto fail;
    }
    /* Resolve the keywords that qualify others. */
    for (size_t i = 0; i < n->nrules; i++) {
        rule_t *r = &n->rules[i];
        if (r->kind == R_PROPERTIES)
            n->props = r;
        else if (r->kind == R_PATTERN_PROPS)
            n->patprops = r;
        else if (r->kind == R_ITEMS)
            n->items = r;
    }
    if (excl_min || excl_max) {
        for (int pass = 0; pass < 2; pass++) {
            const bson_value_t *ev = pass == 0 ? excl_min : excl_max;
            rkind_t want = pass == 0 ? R_MINIMUM : R_MAXIMUM;
            rule_t *found = NULL;
            if (ev == NULL)
                continue;
            for (size_t i = 0; i < n->nrules; i++) {
                if (n->rules[i].kind == want)
                    found = &n->rules[i];
            }
            if (found == NULL) {
                mf_err_set(err, MF_E_FailedToParse, "$jsonSchema keyword '%s' must be a present if %s is present",
                           pass == 0 ? "minimum" : "maximum", pass == 0 ? "exclusiveMinimum" : "exclusiveMaximum");
                goto fail;
            }
            found->exclusive = ev->value.v_bool;
        }
    }
    if (addl_items) {
        rule_t *r = rule_add(n, R_ADDL_ITEMS, "additionalItems", addl_items);
        if (addl_items->value_type == BSON_TYPE_BOOL)
            r->flag = addl_items->value.v_bool;
        else if (addl_items->value_type == BSON_TYPE_DOCUMENT) {
            if ((r->sub = parse_node(addl_items, depth + 1, err)) == NULL)
                goto fail;
        } else {
            mf_err_set(err, MF_E_TypeMismatch,
                       "$jsonSchema keyword 'additionalItems' must be either an object or a boolean, but got a %s",
                       mf_type_name(addl_items->value_type));
            goto fail;
        }
        /* rule_add may have moved the rules: re-resolve. */
        for (size_t i = 0; i < n->nrules; i++) {
            if (n->rules[i].kind == R_PROPERTIES)
                n->props = &n->rules[i];
            else if (n->rules[i].kind == R_PATTERN_PROPS)
                n->patprops = &n->rules[i];
            else if (n->rules[i].kind == R_ITEMS)
                n->items = &n->rules[i];
        }
    }
    return n;
encrypt_with_type:
    mf_err_set(err, MF_E_FailedToParse,
               "$jsonSchema keyword 'encrypt' cannot be used in conjunction with '%s', 'encrypt' implies type "
               "'bsonType::BinData'",
               has_type ? "type" : "bsonType");
fail:
    node_free(n);
    return NULL;
}

/*
 * json_schema_parser.cpp's warning 3216000: in a collection validator
 * (expCtx->isParsingCollectionValidator), a schema on the document itself
 * (the root, and the allOf / anyOf / oneOf / not / dependencies schemas
 * that keep its empty path) with additionalProperties: false, whose
 * 'required' does not name _id and no patternProperties pattern matches
 * "_id" whole, rejects every document; mongod logs it (warning, QUERY)
 * and goes on. Logged once per such schema, as mongod's parse does.
 */
static void
warn_id_not_allowed(const jnode_t *n, int depth)
{
    bool closed = false, id_required = false, id_pattern = false;
    if (n == NULL || depth > kMaxDepth)
        return;
    for (size_t i = 0; i < n->nrules; i++) {
        const rule_t *r = &n->rules[i];
        if (r->kind == R_ADDL_PROPS && r->sub == NULL && !r->flag)
            closed = true;
        for (size_t j = 0; r->kind == R_REQUIRED && j < r->count; j++)
            id_required = id_required || strcmp(r->names[j], "_id") == 0;
        for (size_t j = 0; r->kind == R_PATTERN_PROPS && j < r->count; j++) {
            /* mongod's matchView("_id", ANCHORED | ENDANCHORED): the whole name. */
            pcre2_match_data *md = r->rxs[j] ? pcre2_match_data_create_from_pattern(r->rxs[j], NULL) : NULL;
            pcre2_match_context *mc = md != NULL ? mf_rx_context() : NULL;
            if (mc != NULL && pcre2_match(r->rxs[j], (PCRE2_SPTR) "_id", 3, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED,
                                          md, mc) >= 0)
                id_pattern = true;
            pcre2_match_context_free(mc);
            pcre2_match_data_free(md);
        }
        if (r->kind == R_ALL_OF || r->kind == R_ANY_OF || r->kind == R_ONE_OF || r->kind == R_DEPENDENCIES) {
            for (size_t j = 0; j < r->count; j++)
                warn_id_not_allowed(r->kids[j], depth + 1);
        } else if (r->kind == R_NOT) {
            warn_id_not_allowed(r->sub, depth + 1);
        }
    }
    if (!closed || id_required || id_pattern)
        return;
    char ctx[32];
    int64_t conn = mf_curop_client_id(mf_curop_current());
    if (conn > 0)
        snprintf(ctx, sizeof(ctx), "conn%lld", (long long)conn);
    else
        snprintf(ctx, sizeof(ctx), "%s", "-");
    mf_log_attr(MF_LOG_WARN, "QUERY", 3216000, ctx,
                "$jsonSchema validator does not allow '_id' field. This validator will reject all documents, "
                "consider adding '_id' to the allowed fields.",
                NULL);
}

mf_jsonschema_t *
mf_jsonschema_new(const bson_value_t *schema, mf_error_t *err)
{
    if (schema->value_type != BSON_TYPE_DOCUMENT) {
        mf_err_set(err, MF_E_TypeMismatch, "$jsonSchema must be an object");
        return NULL;
    }
    jnode_t *root = parse_node(schema, 0, err);
    if (root == NULL)
        return NULL;
    if (mf_expr_in_validator())
        warn_id_not_allowed(root, 0);
    mf_jsonschema_t *s = mf_calloc(1, sizeof(*s));
    if (s == NULL)
        abort();
    s->root = root;
    bson_value_copy(schema, &s->schema);
    return s;
}

/* ---- matching ---- */

static bool node_ok(const jnode_t *n, const bson_value_t *v);

static bool
rx_ok(const pcre2_code *rx, const char *s, size_t len)
{
    return mf_rx_match(rx, NULL, s, len, NULL) == 1;
}

static int64_t
utf8_len(const char *s, size_t len)
{
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            n++;
    }
    return n;
}

static int64_t
count_elems(const bson_value_t *v)
{
    bson_iter_t it;
    int64_t n = 0;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return 0;
    while (bson_iter_next(&it))
        n++;
    return n;
}

static bool
is_obj(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_DOCUMENT;
}

static bool
is_arr(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_ARRAY;
}

/* Does field name k match one of the node's properties or patternProperties? */
static bool
named_by(const jnode_t *n, const char *k)
{
    if (n->props) {
        for (size_t i = 0; i < n->props->count; i++) {
            if (strcmp(n->props->names[i], k) == 0)
                return true;
        }
    }
    if (n->patprops) {
        for (size_t i = 0; i < n->patprops->count; i++) {
            if (rx_ok(n->patprops->rxs[i], k, strlen(k)))
                return true;
        }
    }
    return false;
}

static bool
has_field(const bson_value_t *v, const char *name)
{
    bson_iter_t it;
    return bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) && bson_iter_find(&it, name);
}

static bool
rule_ok(const jnode_t *n, const rule_t *r, const bson_value_t *v)
{
    bson_iter_t it;

    switch (r->kind) {
    case R_TYPE:
        return r->types[v->value_type & 0xff];
    case R_ENCRYPT:
        /* InternalSchemaBinDataSubTypeExpression (BinData 6) and, with bsonType, InternalSchemaBinDataEncryptedType. */
        if (v->value_type != BSON_TYPE_BINARY || v->value.v_binary.subtype != BSON_SUBTYPE_ENCRYPTED)
            return false;
        if (!r->flag)
            return true;
        /* An FLE blob header: subtype (1 deterministic, 2 random), key UUID, the original BSON type. */
        return v->value.v_binary.data_len >= 18 &&
               (v->value.v_binary.data[0] == 1 || v->value.v_binary.data[0] == 2) &&
               r->types[v->value.v_binary.data[17]];
    case R_REQUIRED:
        if (!is_obj(v))
            return true;
        for (size_t i = 0; i < r->count; i++) {
            if (!has_field(v, r->names[i]))
                return false;
        }
        return true;
    case R_PROPERTIES:
        if (!is_obj(v))
            return true;
        for (size_t i = 0; i < r->count; i++) {
            if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) &&
                bson_iter_find(&it, r->names[i]) && !node_ok(r->kids[i], bson_iter_value(&it)))
                return false;
        }
        return true;
    case R_PATTERN_PROPS:
        if (!is_obj(v) || !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return true;
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            for (size_t i = 0; i < r->count; i++) {
                if (rx_ok(r->rxs[i], k, strlen(k)) && !node_ok(r->kids[i], bson_iter_value(&it)))
                    return false;
            }
        }
        return true;
    case R_ADDL_PROPS:
        if (!is_obj(v) || !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return true;
        while (bson_iter_next(&it)) {
            if (named_by(n, bson_iter_key(&it)))
                continue;
            if (r->sub ? !node_ok(r->sub, bson_iter_value(&it)) : !r->flag)
                return false;
        }
        return true;
    case R_DEPENDENCIES:
        if (!is_obj(v))
            return true;
        for (size_t i = 0; i < r->count; i++) {
            if (!has_field(v, r->names[i]))
                continue;
            if (r->kids[i] && !node_ok(r->kids[i], v))
                return false;
            if (r->deps[i]) {
                for (char **p = r->deps[i]; *p; p++) {
                    if (!has_field(v, *p))
                        return false;
                }
            }
        }
        return true;
    case R_MINIMUM:
    case R_MAXIMUM: {
        if (!mf_value_is_number(v))
            return true;
        int c = mf_value_cmp(v, &r->spec);
        if (r->kind == R_MINIMUM)
            return r->exclusive ? c > 0 : c >= 0;
        return r->exclusive ? c < 0 : c <= 0;
    }
    case R_MULTIPLE_OF: {
        if (!mf_value_is_number(v))
            return true;
        double q = mf_value_as_double(v) / mf_value_as_double(&r->spec);
        return isfinite(q) && q == floor(q);
    }
    case R_MIN_LENGTH:
    case R_MAX_LENGTH: {
        if (v->value_type != BSON_TYPE_UTF8)
            return true;
        int64_t len = utf8_len(v->value.v_utf8.str, v->value.v_utf8.len);
        return r->kind == R_MIN_LENGTH ? len >= r->n : len <= r->n;
    }
    case R_PATTERN:
        if (v->value_type != BSON_TYPE_UTF8)
            return true;
        return rx_ok(r->rx, v->value.v_utf8.str, v->value.v_utf8.len);
    case R_ENUM:
        if (!iter_array(&r->spec, &it))
            return false;
        while (bson_iter_next(&it)) {
            if (unordered_equal(bson_iter_value(&it), v, 0))
                return true;
        }
        return false;
    case R_ITEMS:
        if (!is_arr(v) || !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return true;
        for (size_t i = 0; bson_iter_next(&it); i++) {
            if (r->sub) {
                if (!node_ok(r->sub, bson_iter_value(&it)))
                    return false;
            } else if (i < r->count) {
                if (!node_ok(r->kids[i], bson_iter_value(&it)))
                    return false;
            }
        }
        return true;
    case R_ADDL_ITEMS:
        /* Only meaningful with the array form of items. */
        if (!is_arr(v) || n->items == NULL || n->items->sub != NULL ||
            !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return true;
        for (size_t i = 0; bson_iter_next(&it); i++) {
            if (i < n->items->count)
                continue;
            if (r->sub ? !node_ok(r->sub, bson_iter_value(&it)) : !r->flag)
                return false;
        }
        return true;
    case R_MIN_ITEMS:
    case R_MAX_ITEMS:
        if (!is_arr(v))
            return true;
        return r->kind == R_MIN_ITEMS ? count_elems(v) >= r->n : count_elems(v) <= r->n;
    case R_UNIQUE_ITEMS:
        return !is_arr(v) || !has_duplicate(v);
    case R_MIN_PROPS:
    case R_MAX_PROPS:
        if (!is_obj(v))
            return true;
        return r->kind == R_MIN_PROPS ? count_elems(v) >= r->n : count_elems(v) <= r->n;
    case R_ALL_OF:
        for (size_t i = 0; i < r->count; i++) {
            if (!node_ok(r->kids[i], v))
                return false;
        }
        return true;
    case R_ANY_OF:
        for (size_t i = 0; i < r->count; i++) {
            if (node_ok(r->kids[i], v))
                return true;
        }
        return false;
    case R_ONE_OF: {
        int hits = 0;
        for (size_t i = 0; i < r->count && hits < 2; i++)
            hits += node_ok(r->kids[i], v);
        return hits == 1;
    }
    case R_NOT:
        return !node_ok(r->sub, v);
    }
    return false;
}

static bool
node_ok(const jnode_t *n, const bson_value_t *v)
{
    for (size_t i = 0; i < n->nrules; i++) {
        if (!rule_ok(n, &n->rules[i], v))
            return false;
    }
    return true;
}

bool
mf_jsonschema_match_value(const mf_jsonschema_t *s, const bson_value_t *v)
{
    if (v == NULL)
        return false;
    return node_ok(s->root, v);
}

bool
mf_jsonschema_match(const mf_jsonschema_t *s, const bson_t *doc)
{
    bson_value_t v;
    v.value_type = BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    v.value.v_doc.data_len = doc->len;
    return node_ok(s->root, &v);
}

/* ---- explaining a failure (errInfo.details, in mongod 8.0's shapes) ---- */

/*
 * The order mongod's JSON Schema parser translates a schema's keywords in (scalar, array, object,
 * logical keywords, then the type), which is the order doc_validation_error.cpp lists failing rules in.
 * additionalProperties and patternProperties are one expression there, reported in that order.
 */
static const rkind_t kExplainOrder[] = {
    R_PATTERN,    R_MAX_LENGTH, R_MIN_LENGTH,   R_MULTIPLE_OF, R_MAXIMUM,   R_MINIMUM,
    R_MIN_ITEMS,  R_MAX_ITEMS,  R_UNIQUE_ITEMS, R_ITEMS,       R_ADDL_ITEMS, R_ENCRYPT,     R_PROPERTIES,
    R_ADDL_PROPS, R_PATTERN_PROPS, R_REQUIRED,  R_MIN_PROPS,   R_MAX_PROPS, R_DEPENDENCIES,
    R_ALL_OF,     R_ANY_OF,     R_ONE_OF,       R_NOT,         R_ENUM,      R_TYPE,
};

/*
 * The budget of one explanation: detail stops once about max_bytes have been written. libbson
 * only sizes a nested document when it closes, so used counts finished entries exactly and open
 * ones by estimate (kEntryEstimate each, plus the values appended), bounding how far a deep
 * chain of open entries can run past the budget.
 */
typedef struct xctx {
    uint32_t max_bytes;
    uint32_t used;
} xctx_t;

enum { kEntryEstimate = 64 };

static void explain_node(const jnode_t *n, const bson_value_t *v, bson_t *arr, int *k, xctx_t *x);

/* Bytes v takes in BSON, roughly (exact for strings, documents and arrays). */
static uint32_t
value_size(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY)
        return v->value.v_doc.data_len;
    if (v->value_type == BSON_TYPE_UTF8)
        return v->value.v_utf8.len + 5;
    return 16;
}

/* Values of this size fit the budget x (a quarter of it at most): mongod, over its limit, leaves values out too. */
static bool
fits(uint32_t sz, const xctx_t *x)
{
    return sz < x->max_bytes / 4 && x->used + sz < x->max_bytes;
}

/* Appends key: v to b when v fits the budget. */
static void
append_small(bson_t *b, const char *key, const bson_value_t *v, xctx_t *x)
{
    uint32_t sz = value_size(v);
    if (fits(sz, x)) {
        bson_append_value(b, key, -1, v);
        x->used += sz;
    }
}

/*
 * Appends specifiedAs: {keyword: spec} for rule r (with exclusiveMinimum / exclusiveMaximum when
 * set), or nothing when the spec does not fit the budget, as mongod's truncated errors leave it out.
 */
static void
append_specified_as(bson_t *e, const rule_t *r, xctx_t *x)
{
    bson_t spec;
    uint32_t sz = value_size(&r->spec) + (uint32_t)strlen(r->keyword) + 8;
    if (!fits(sz, x))
        return;
    BSON_APPEND_DOCUMENT_BEGIN(e, "specifiedAs", &spec);
    bson_append_value(&spec, r->keyword, -1, &r->spec);
    if (r->exclusive)
        BSON_APPEND_BOOL(&spec, r->kind == R_MINIMUM ? "exclusiveMinimum" : "exclusiveMaximum", true);
    bson_append_document_end(e, &spec);
    x->used += sz;
}

/* Appends a schema's title and description, when it has them, as mongod's schema annotations. */
static void
append_annotations(bson_t *b, const char *title, const char *description)
{
    if (title)
        BSON_APPEND_UTF8(b, "title", title);
    if (description)
        BSON_APPEND_UTF8(b, "description", description);
}

/* Opens the next document of array arr (index *k) into e, counting it against the budget. */
static void
begin_entry(bson_t *arr, int *k, bson_t *e, xctx_t *x)
{
    char key[16];
    snprintf(key, sizeof(key), "%d", (*k)++);
    BSON_APPEND_DOCUMENT_BEGIN(arr, key, e);
    x->used += kEntryEstimate;
}

/* Appends key: [the entries of sub's rules that v fails] to b. */
static void
append_sub_details(bson_t *b, const char *key, const jnode_t *sub, const bson_value_t *v, xctx_t *x)
{
    bson_t det;
    int k = 0;
    BSON_APPEND_ARRAY_BEGIN(b, key, &det);
    explain_node(sub, v, &det, &k, x);
    bson_append_array_end(b, &det);
}

/* {propertyName, title?, description?, details} for each present property whose sub-schema fails. */
static void
explain_properties(const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_t sub;
    int m = 0;
    BSON_APPEND_ARRAY_BEGIN(e, "propertiesNotSatisfied", &sub);
    for (size_t i = 0; i < r->count && x->used < x->max_bytes; i++) {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) ||
            !bson_iter_find(&it, r->names[i]) || node_ok(r->kids[i], bson_iter_value(&it)))
            continue;
        bson_t p;
        begin_entry(&sub, &m, &p, x);
        BSON_APPEND_UTF8(&p, "propertyName", r->names[i]);
        append_annotations(&p, r->kids[i]->title, r->kids[i]->description);
        append_sub_details(&p, "details", r->kids[i], bson_iter_value(&it), x);
        bson_append_document_end(&sub, &p);
    }
    bson_append_array_end(e, &sub);
}

/*
 * additionalProperties: false lists the additional field names; the schema form explains the
 * first additional property that fails the schema (failingProperty, details).
 */
static void
explain_additional_properties(const jnode_t *n, const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return;
    if (r->sub == NULL) {
        bson_t names;
        int m = 0;
        append_specified_as(e, r, x);
        BSON_APPEND_ARRAY_BEGIN(e, "additionalProperties", &names);
        while (bson_iter_next(&it) && x->used + names.len < x->max_bytes) {
            char key[16];
            if (named_by(n, bson_iter_key(&it)))
                continue;
            snprintf(key, sizeof(key), "%d", m++);
            BSON_APPEND_UTF8(&names, key, bson_iter_key(&it));
        }
        bson_append_array_end(e, &names);
        return;
    }
    append_annotations(e, r->sub->title, r->sub->description);
    BSON_APPEND_UTF8(e, "reason", "at least one additional property did not match the subschema");
    while (bson_iter_next(&it)) {
        if (named_by(n, bson_iter_key(&it)) || node_ok(r->sub, bson_iter_value(&it)))
            continue;
        BSON_APPEND_UTF8(e, "failingProperty", bson_iter_key(&it));
        append_sub_details(e, "details", r->sub, bson_iter_value(&it), x);
        break;
    }
}

/* For each pattern, the first field it matches that fails its schema: {propertyName, ..., regexMatched, details}. */
static void
explain_pattern_properties(const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_t sub;
    int m = 0;
    BSON_APPEND_ARRAY_BEGIN(e, "details", &sub);
    for (size_t i = 0; i < r->count && x->used < x->max_bytes; i++) {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            break;
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (!rx_ok(r->rxs[i], k, strlen(k)) || node_ok(r->kids[i], bson_iter_value(&it)))
                continue;
            bson_t p;
            begin_entry(&sub, &m, &p, x);
            BSON_APPEND_UTF8(&p, "propertyName", k);
            append_annotations(&p, r->kids[i]->title, r->kids[i]->description);
            BSON_APPEND_UTF8(&p, "regexMatched", r->names[i]);
            append_sub_details(&p, "details", r->kids[i], bson_iter_value(&it), x);
            bson_append_document_end(&sub, &p);
            break;
        }
    }
    bson_append_array_end(e, &sub);
}

/* Does document v have every field of the NULL-terminated list names? */
static bool
has_all(const bson_value_t *v, char **names)
{
    for (char **d = names; *d; d++) {
        if (!has_field(v, *d))
            return false;
    }
    return true;
}

/* failingDependencies: {conditionalProperty, missingProperties} or {conditionalProperty, details} per failing one. */
static void
explain_dependencies(const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_t sub;
    int m = 0;
    append_annotations(e, r->title, r->description);
    BSON_APPEND_ARRAY_BEGIN(e, "failingDependencies", &sub);
    for (size_t i = 0; i < r->count && x->used < x->max_bytes; i++) {
        if (!has_field(v, r->names[i]))
            continue;
        if (r->kids[i] && !node_ok(r->kids[i], v)) {
            bson_t p;
            begin_entry(&sub, &m, &p, x);
            BSON_APPEND_UTF8(&p, "conditionalProperty", r->names[i]);
            append_sub_details(&p, "details", r->kids[i], v, x);
            bson_append_document_end(&sub, &p);
        } else if (r->deps[i] && !has_all(v, r->deps[i])) {
            bson_t p, miss;
            int mm = 0;
            begin_entry(&sub, &m, &p, x);
            BSON_APPEND_UTF8(&p, "conditionalProperty", r->names[i]);
            BSON_APPEND_ARRAY_BEGIN(&p, "missingProperties", &miss);
            for (char **d = r->deps[i]; *d; d++) {
                char key[16];
                if (has_field(v, *d))
                    continue;
                snprintf(key, sizeof(key), "%d", mm++);
                BSON_APPEND_UTF8(&miss, key, *d);
            }
            bson_append_array_end(&p, &miss);
            bson_append_document_end(&sub, &p);
        }
    }
    bson_append_array_end(e, &sub);
}

/* qsort order for required's names: mongod lists missingProperties sorted. */
static int
cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* missingProperties: the required names v lacks, sorted. */
static void
explain_required(const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_t sub;
    int m = 0;
    char **sorted = mf_calloc(r->count ? r->count : 1, sizeof(char *));
    if (sorted == NULL)
        abort();
    memcpy(sorted, r->names, r->count * sizeof(char *));
    qsort(sorted, r->count, sizeof(char *), cmp_names);
    append_specified_as(e, r, x);
    BSON_APPEND_ARRAY_BEGIN(e, "missingProperties", &sub);
    for (size_t i = 0; i < r->count; i++) {
        char key[16];
        if (has_field(v, sorted[i]))
            continue;
        snprintf(key, sizeof(key), "%d", m++);
        BSON_APPEND_UTF8(&sub, key, sorted[i]);
    }
    bson_append_array_end(e, &sub);
    free(sorted);
}

/*
 * items / additionalItems. A single schema reports the first failing item (reason, itemIndex,
 * details); items as an array of schemas reports each failing position ({itemIndex, details});
 * additionalItems: false lists the items past the array form.
 */
static void
explain_items(const jnode_t *n, const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_iter_t it;
    size_t from = r->kind == R_ADDL_ITEMS ? n->items->count : 0;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return;
    if (r->kind == R_ITEMS && r->sub == NULL) {
        bson_t sub;
        int m = 0;
        BSON_APPEND_ARRAY_BEGIN(e, "details", &sub);
        for (size_t i = 0; bson_iter_next(&it) && i < r->count && x->used < x->max_bytes; i++) {
            bson_t p;
            if (node_ok(r->kids[i], bson_iter_value(&it)))
                continue;
            begin_entry(&sub, &m, &p, x);
            BSON_APPEND_INT64(&p, "itemIndex", (int64_t)i);
            append_sub_details(&p, "details", r->kids[i], bson_iter_value(&it), x);
            bson_append_document_end(&sub, &p);
        }
        bson_append_array_end(e, &sub);
        return;
    }
    if (r->sub == NULL) {
        bson_t extra;
        int m = 0;
        append_specified_as(e, r, x);
        BSON_APPEND_UTF8(e, "reason", "found additional items");
        BSON_APPEND_ARRAY_BEGIN(e, "additionalItems", &extra);
        for (size_t i = 0; bson_iter_next(&it); i++) {
            char key[16];
            if (i < from)
                continue;
            if (!fits(value_size(bson_iter_value(&it)), x))
                break; /* the budget is spent: the list ends here, without gaps in its indexes */
            snprintf(key, sizeof(key), "%d", m++);
            append_small(&extra, key, bson_iter_value(&it), x);
        }
        bson_append_array_end(e, &extra);
        return;
    }
    append_annotations(e, r->sub->title, r->sub->description);
    BSON_APPEND_UTF8(e, "reason", r->kind == R_ITEMS ? "At least one item did not match the sub-schema"
                                                     : "At least one additional item did not match the sub-schema");
    for (size_t i = 0; bson_iter_next(&it); i++) {
        if (i < from || node_ok(r->sub, bson_iter_value(&it)))
            continue;
        BSON_APPEND_INT32(e, "itemIndex", (int32_t)i);
        append_sub_details(e, "details", r->sub, bson_iter_value(&it), x);
        break;
    }
}

/* uniqueItems: the array and the first item equal to an earlier one. */
static void
explain_unique_items(const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_value_t dup;
    append_small(e, "consideredValue", v, x);
    if (first_duplicate(v, &dup))
        append_small(e, "duplicatedValue", &dup, x);
}

/* allOf / anyOf / oneOf: {index, title?, description?, details} per failing sub-schema (oneOf: or those matching). */
static void
explain_combinator(const rule_t *r, const bson_value_t *v, bson_t *e, xctx_t *x)
{
    bson_t sub;
    int m = 0;
    if (r->kind == R_ONE_OF) {
        for (size_t i = 0; i < r->count; i++) {
            if (node_ok(r->kids[i], v)) {
                char key[16];
                if (m == 0) {
                    BSON_APPEND_UTF8(e, "reason", "more than one subschema matched");
                    BSON_APPEND_ARRAY_BEGIN(e, "matchingSchemaIndexes", &sub);
                }
                snprintf(key, sizeof(key), "%d", m++);
                BSON_APPEND_INT32(&sub, key, (int32_t)i);
            }
        }
        if (m > 0) {
            bson_append_array_end(e, &sub);
            return;
        }
    }
    BSON_APPEND_ARRAY_BEGIN(e, "schemasNotSatisfied", &sub);
    for (size_t i = 0; i < r->count && x->used < x->max_bytes; i++) {
        bson_t p;
        if (node_ok(r->kids[i], v))
            continue;
        begin_entry(&sub, &m, &p, x);
        BSON_APPEND_INT32(&p, "index", (int32_t)i);
        append_annotations(&p, r->kids[i]->title, r->kids[i]->description);
        append_sub_details(&p, "details", r->kids[i], v, x);
        bson_append_document_end(&sub, &p);
    }
    bson_append_array_end(e, &sub);
}

/* mongod's reason for a failing leaf keyword (a static string). */
static const char *
leaf_reason(rkind_t kind)
{
    switch (kind) {
    case R_TYPE:
        return "type did not match";
    case R_MINIMUM:
    case R_MAXIMUM:
        return "comparison failed";
    case R_MIN_LENGTH:
    case R_MAX_LENGTH:
        return "specified string length was not satisfied";
    case R_PATTERN:
        return "regular expression did not match";
    case R_ENUM:
        return "value was not found in enum";
    case R_MULTIPLE_OF:
        return "considered value is not a multiple of the specified value";
    default:
        return "did not match";
    }
}

/* Appends to arr (next index *k) mongod's entry for rule r of node n failing on v. */
static void
explain_rule(const jnode_t *n, const rule_t *r, const bson_value_t *v, bson_t *arr, int *k, xctx_t *x)
{
    uint32_t used = x->used;
    bson_t e;

    begin_entry(arr, k, &e, x);
    BSON_APPEND_UTF8(&e, "operatorName", r->keyword);
    switch (r->kind) {
    case R_PROPERTIES:
        explain_properties(r, v, &e, x);
        break;
    case R_ADDL_PROPS:
        explain_additional_properties(n, r, v, &e, x);
        break;
    case R_PATTERN_PROPS:
        explain_pattern_properties(r, v, &e, x);
        break;
    case R_DEPENDENCIES:
        explain_dependencies(r, v, &e, x);
        break;
    case R_REQUIRED:
        explain_required(r, v, &e, x);
        break;
    case R_ITEMS:
    case R_ADDL_ITEMS:
        explain_items(n, r, v, &e, x);
        break;
    case R_ALL_OF:
    case R_ANY_OF:
    case R_ONE_OF:
        explain_combinator(r, v, &e, x);
        break;
    case R_NOT:
        BSON_APPEND_UTF8(&e, "reason", "child expression matched");
        break;
    case R_ENCRYPT:
        /* doc_validation_error.cpp: the subtype check, or (BinData 6 already) the encrypted type's. */
        BSON_APPEND_UTF8(&e, "reason",
                         v->value_type == BSON_TYPE_BINARY && v->value.v_binary.subtype == BSON_SUBTYPE_ENCRYPTED
                             ? "encrypted value has wrong type"
                             : "value was not encrypted");
        break;
    case R_MIN_ITEMS:
    case R_MAX_ITEMS:
        append_specified_as(&e, r, x);
        BSON_APPEND_UTF8(&e, "reason", "array did not match specified length");
        append_small(&e, "consideredValue", v, x);
        BSON_APPEND_INT32(&e, "numberOfItems", (int32_t)count_elems(v));
        break;
    case R_UNIQUE_ITEMS:
        append_specified_as(&e, r, x);
        BSON_APPEND_UTF8(&e, "reason", "found a duplicate item");
        explain_unique_items(v, &e, x);
        break;
    case R_MIN_PROPS:
    case R_MAX_PROPS:
        append_specified_as(&e, r, x);
        BSON_APPEND_UTF8(&e, "reason", "specified number of properties was not satisfied");
        BSON_APPEND_INT32(&e, "numberOfProperties", (int32_t)count_elems(v));
        break;
    default:
        /* The leaf keywords: type / bsonType, minimum, maximum, multipleOf, minLength, maxLength, pattern, enum. */
        append_specified_as(&e, r, x);
        BSON_APPEND_UTF8(&e, "reason", leaf_reason(r->kind));
        append_small(&e, "consideredValue", v, x);
        if (r->kind == R_TYPE)
            BSON_APPEND_UTF8(&e, "consideredType", mf_type_name(v->value_type));
        break;
    }
    bson_append_document_end(arr, &e);
    x->used = used + e.len;
}

/*
 * Is rule r of node n one mongod drops at parse time? Its makeRestriction turns a type-specific
 * keyword into always-true when the node states a single type the keyword does not concern
 * (minimum under bsonType 'string'), so only the type keyword explains such a value.
 */
static bool
restriction_dropped(const jnode_t *n, const rule_t *r)
{
    int want;
    switch (r->kind) {
    case R_MINIMUM:
    case R_MAXIMUM:
    case R_MULTIPLE_OF:
        want = BSON_TYPE_INT32; /* any number */
        break;
    case R_MIN_LENGTH:
    case R_MAX_LENGTH:
    case R_PATTERN:
        want = BSON_TYPE_UTF8;
        break;
    case R_MIN_ITEMS:
    case R_MAX_ITEMS:
    case R_UNIQUE_ITEMS:
    case R_ITEMS:
    case R_ADDL_ITEMS:
        want = BSON_TYPE_ARRAY;
        break;
    case R_PROPERTIES:
    case R_ADDL_PROPS:
    case R_PATTERN_PROPS:
    case R_REQUIRED:
    case R_MIN_PROPS:
    case R_MAX_PROPS:
        want = BSON_TYPE_DOCUMENT;
        break;
    default:
        return false;
    }
    for (size_t i = 0; i < n->nrules; i++) {
        const rule_t *t = &n->rules[i];
        int ntypes = 0, single = -1;
        bool numbers;
        if (t->kind != R_TYPE)
            continue;
        for (int b = 0; b < 256; b++) {
            if (t->types[b]) {
                ntypes++;
                single = b;
            }
        }
        numbers = ntypes == 4 && t->types[BSON_TYPE_INT32] && t->types[BSON_TYPE_INT64] &&
                  t->types[BSON_TYPE_DOUBLE] && t->types[BSON_TYPE_DECIMAL128];
        if (numbers)
            single = BSON_TYPE_INT32;
        else if (ntypes != 1)
            return false;
        if (want == BSON_TYPE_INT32)
            return !(single == BSON_TYPE_INT32 || single == BSON_TYPE_INT64 || single == BSON_TYPE_DOUBLE ||
                     single == BSON_TYPE_DECIMAL128);
        return single != want;
    }
    return false;
}

/* Appends to arr (next index *k) an entry per rule of n that v fails, in mongod's order, within the budget. */
static void
explain_node(const jnode_t *n, const bson_value_t *v, bson_t *arr, int *k, xctx_t *x)
{
    for (size_t o = 0; o < sizeof(kExplainOrder) / sizeof(kExplainOrder[0]); o++) {
        for (size_t i = 0; i < n->nrules; i++) {
            const rule_t *r = &n->rules[i];
            if (r->kind == kExplainOrder[o] && x->used < x->max_bytes && !rule_ok(n, r, v) &&
                !restriction_dropped(n, r) && !(r->kind == R_TYPE && r->flag))
                explain_rule(n, r, v, arr, k, x);
        }
    }
}

void
mf_jsonschema_explain(const mf_jsonschema_t *s, const bson_t *doc, bson_t *out, uint32_t max_bytes)
{
    xctx_t x = {max_bytes, out->len};
    bson_value_t v;
    bson_t arr;
    int k = 0;

    /* A root whose type leaves out objects matches no document: mongod explains it as always false. */
    for (size_t i = 0; i < s->root->nrules; i++) {
        const rule_t *r = &s->root->rules[i];
        if (r->kind == R_TYPE && !r->types[BSON_TYPE_DOCUMENT]) {
            if (fits(value_size(&s->schema) + 20, &x)) {
                bson_t spec;
                BSON_APPEND_DOCUMENT_BEGIN(out, "specifiedAs", &spec);
                BSON_APPEND_VALUE(&spec, "$jsonSchema", &s->schema);
                bson_append_document_end(out, &spec);
            }
            BSON_APPEND_UTF8(out, "reason", "expression always evaluates to false");
            return;
        }
    }
    v.value_type = BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    v.value.v_doc.data_len = doc->len;
    append_annotations(out, s->root->title, s->root->description);
    BSON_APPEND_ARRAY_BEGIN(out, "schemaRulesNotSatisfied", &arr);
    explain_node(s->root, &v, &arr, &k, &x);
    bson_append_array_end(out, &arr);
}
