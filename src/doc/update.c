/*
 * update.c: replacement and operator updates (see update.h).
 *
 * Design. mf_update_new parses the update once into either a replacement
 * document or a list of modifiers ("mods"), one per (operator, path). Each
 * mod owns a copy of its operand, its path split into components (plain
 * field, positional "$", "$[]", "$[name]"), and whatever its operator needs
 * pre-parsed ($push modifiers, the $pull matcher, ...). Path conflicts are
 * rejected with 40 ConflictingUpdateOperators where MongoDB's update tree
 * rejects them: at parse time when one path is equal to or a prefix of
 * another or needs an array node where another needs an object node
 * (conflict_depth), and when applying when "$" or array filters make two
 * paths meet on one element (check_apply_conflicts).
 *
 * The mods are sorted component-wise by path (for $rename, by its
 * destination). Because no path is a prefix of another, this is the order in
 * which MongoDB's update tree visits them (its children at every level are
 * kept in a map ordered by cmpPathsAndArrayIndexes: numeric components as
 * numbers, others as strings), so new fields come out appended in MongoDB's
 * order and "a.9" is applied before "a.10".
 *
 * mf_update_apply turns the document into a small mutable tree of nodes.
 * Expansion is lazy: a node holds a bson_value_t (borrowed from the input
 * document or from the update, or owned) and is expanded into children only
 * when a mod descends into it, so untouched sub-documents are copied as raw
 * bytes at serialisation time. Invariant: an expanded node keeps the value it
 * was expanded from alive, because its unexpanded children borrow from it.
 *
 * Whether the update changed anything is decided by comparing the bytes of
 * the result with the input, which matches MongoDB's binary no-op rules ($set
 * of 1.0 over 1 is a change).
 */
#include "common/alloc.h"
#include "doc/update.h"
#include "doc/check.h"
#include "doc/dec128.h"
#include "common/fmt.h"
#include "common/limits.h"
#include "doc/path.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "doc/value.h"

/* ------------------------------------------------------------------------ */
/* Debug formatting of values, in the style of MongoDB's BSONElement::toString. */

static void fmt_value(bson_string_t *s, const bson_value_t *v);

static void
fmt_raw(bson_string_t *s, const uint8_t *data, uint32_t len, bool array)
{
    bson_t b;
    bson_iter_t it;
    bool first = true;

    if (!bson_init_static(&b, data, len) || !bson_iter_init(&it, &b)) {
        bson_string_append(s, array ? "[]" : "{}");
        return;
    }
    bson_string_append(s, array ? "[" : "{");
    while (bson_iter_next(&it)) {
        bson_string_append(s, first ? " " : ", ");
        first = false;
        if (!array) {
            bson_string_append(s, bson_iter_key(&it));
            bson_string_append(s, ": ");
        }
        fmt_value(s, bson_iter_value(&it));
    }
    bson_string_append(s, first ? (array ? "]" : "}") : (array ? " ]" : " }"));
}

static void
fmt_value(bson_string_t *s, const bson_value_t *v)
{
    char buf[64];

    switch (v->value_type) {
    case BSON_TYPE_DOCUMENT:
        fmt_raw(s, v->value.v_doc.data, v->value.v_doc.data_len, false);
        break;
    case BSON_TYPE_ARRAY:
        fmt_raw(s, v->value.v_doc.data, v->value.v_doc.data_len, true);
        break;
    case BSON_TYPE_UTF8:
        bson_string_append_c(s, '"');
        bson_string_append(s, v->value.v_utf8.str);
        bson_string_append_c(s, '"');
        break;
    case BSON_TYPE_INT32:
        bson_string_append_printf(s, "%d", v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        bson_string_append_printf(s, "%lld", (long long)v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        mf_fmt_double(v->value.v_double, buf, sizeof(buf));
        bson_string_append(s, buf);
        break;
    case BSON_TYPE_DECIMAL128: {
        char dec[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, dec);
        bson_string_append_printf(s, "NumberDecimal(\"%s\")", dec);
        break;
    }
    case BSON_TYPE_BOOL:
        bson_string_append(s, v->value.v_bool ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
        bson_string_append(s, "null");
        break;
    case BSON_TYPE_UNDEFINED:
        bson_string_append(s, "undefined");
        break;
    case BSON_TYPE_OID:
        bson_oid_to_string(&v->value.v_oid, buf);
        bson_string_append_printf(s, "ObjectId('%s')", buf);
        break;
    case BSON_TYPE_DATE_TIME:
        bson_string_append_printf(s, "new Date(%lld)", (long long)v->value.v_datetime);
        break;
    case BSON_TYPE_TIMESTAMP:
        bson_string_append_printf(s, "Timestamp(%u, %u)", v->value.v_timestamp.timestamp,
                                  v->value.v_timestamp.increment);
        break;
    case BSON_TYPE_REGEX:
        bson_string_append_printf(s, "/%s/%s", v->value.v_regex.regex,
                                  v->value.v_regex.options ? v->value.v_regex.options : "");
        break;
    case BSON_TYPE_MINKEY:
        bson_string_append(s, "MinKey");
        break;
    case BSON_TYPE_MAXKEY:
        bson_string_append(s, "MaxKey");
        break;
    default:
        bson_string_append(s, mf_type_name(v->value_type));
        break;
    }
}

/* ------------------------------------------------------------------------ */
/* Parsed form. */

typedef enum { C_FIELD, C_POS, C_ALL, C_FILTER } comp_kind_t;

typedef struct {
    comp_kind_t kind;
    char *name;  /* the component as written (owned) */
    int filter;  /* C_FILTER: index into the update's array filters */
} comp_t;

typedef struct {
    char *path;
    comp_t *comps;
    size_t n;
} path_t;

typedef enum {
    OP_SET,
    OP_UNSET,
    OP_INC,
    OP_MUL,
    OP_MIN,
    OP_MAX,
    OP_RENAME,
    OP_PUSH,
    OP_ADDTOSET,
    OP_PULL,
    OP_PULLALL,
    OP_POP,
    OP_CURRENTDATE,
    OP_SETONINSERT,
    OP_BIT,
} op_t;

typedef struct {
    op_t op;
    const char *opname;
    path_t path;         /* target path ($rename: the destination) */
    path_t from;         /* $rename: the source */
    bson_value_t val;    /* owned copy of the operand */
    bson_value_t *each;  /* $push/$addToSet/$pullAll: values (borrowed from val) */
    size_t neach;
    bool has_slice, has_position;
    int64_t slice, position;
    int sort_kind;       /* 0 none, 1/-1 whole element, 2 pattern */
    bson_value_t sort_spec; /* sort_kind 2: the $sort pattern document (borrowed from val) */
    mf_matcher_t *matcher; /* $pull with a condition */
    int pop;             /* $pop: 1 last, -1 first */
    bool timestamp;      /* $currentDate: timestamp rather than date */
    bool copy_val;       /* internal $set (from $rename): nodes copy val rather than borrow it */
} mod_t;

typedef struct {
    char *name;
    mf_matcher_t *m;
    bool used;
} afilter_t;

struct mf_update {
    bool replacement;
    bson_t *repl; /* owned (heap: bson_t needs an alignment calloc does not give) */
    mod_t *mods;
    size_t nmods;
    afilter_t *filters;
    size_t nfilters;
    mf_ts_tick_fn tick; /* the server's clock (mf_update_set_clock), or NULL */
    void *tick_arg;
};

static void
path_free(path_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->comps[i].name);
    free(p->comps);
    free(p->path);
    memset(p, 0, sizeof(*p));
}

static void
mod_free(mod_t *m)
{
    path_free(&m->path);
    path_free(&m->from);
    if (m->val.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&m->val);
    free(m->each);
    mf_matcher_free(m->matcher);
}

void
mf_update_free(mf_update_t *u)
{
    if (u == NULL)
        return;
    if (u->replacement)
        bson_destroy(u->repl);
    for (size_t i = 0; i < u->nmods; i++)
        mod_free(&u->mods[i]);
    free(u->mods);
    for (size_t i = 0; i < u->nfilters; i++) {
        free(u->filters[i].name);
        mf_matcher_free(u->filters[i].m);
    }
    free(u->filters);
    free(u);
}

bool
mf_update_is_replacement(const mf_update_t *u)
{
    return u->replacement;
}

/* is_index: true if s is a non-empty run of decimal digits fitting a size_t index. */
static bool
is_index(const char *s, size_t *out)
{
    size_t v = 0;

    if (*s == '\0')
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        if (v > 100000000)
            return false;
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return true;
}

/*
 * parse_path: splits path into components and classifies positional parts,
 * checking in mongod's order (UpdateObjectNode::parseAndMerge): empty
 * components first, then the count and place of "$" over the whole path,
 * then each array component ("$[]" / "$[id]" may not come first; an
 * identifier needs a filter). Filter identifiers are resolved against u's
 * filters (marking them used).
 */
static int
parse_path(mf_update_t *u, const char *path, path_t *out, mf_error_t *err)
{
    size_t npos = 0;
    const char *p = path;

    memset(out, 0, sizeof(*out));
    if (*path == '\0')
        return mf_err_set(err, MF_E_EmptyFieldName, "An empty update path is not valid.");
    out->path = mf_strdup(path);
    out->comps = mf_malloc(mf_path_components(path) * sizeof(comp_t)); /* once: growing it a component at a time was quadratic */
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        comp_t c = {C_FIELD, NULL, -1};

        if (len == 0) {
            path_free(out);
            return mf_err_set(err, MF_E_EmptyFieldName,
                              "The update path '%s' contains an empty field name, which is not allowed.", path);
        }
        c.name = mf_strndup(p, len);
        if (strcmp(c.name, "$") == 0) {
            c.kind = C_POS;
            npos++;
        } else if (strcmp(c.name, "$[]") == 0) {
            c.kind = C_ALL;
        } else if (len > 3 && c.name[0] == '$' && c.name[1] == '[' && c.name[len - 1] == ']') {
            c.kind = C_FILTER;
        }
        out->comps[out->n++] = c;
        if (!dot)
            break;
        p = dot + 1;
    }
    if (npos > 1) {
        path_free(out);
        return mf_err_set(err, MF_E_BadValue, "Too many positional (i.e. '$') elements found in path '%s'", path);
    }
    if (out->comps[0].kind == C_POS) {
        path_free(out);
        return mf_err_set(err, MF_E_BadValue,
                          "Cannot have positional (i.e. '$') element in the first position in path '%s'", path);
    }
    for (size_t i = 0; i < out->n; i++) {
        comp_t *c = &out->comps[i];

        if ((c->kind == C_ALL || c->kind == C_FILTER) && i == 0) {
            path_free(out);
            return mf_err_set(err, MF_E_BadValue,
                              "Cannot have array filter identifier (i.e. '$[<id>]') element in the first position "
                              "in path '%s'",
                              path);
        }
        if (c->kind == C_FILTER) {
            size_t idlen = strlen(c->name) - 3;
            for (size_t j = 0; j < u->nfilters; j++) {
                if (strlen(u->filters[j].name) == idlen && strncmp(u->filters[j].name, c->name + 2, idlen) == 0) {
                    c->filter = (int)j;
                    u->filters[j].used = true;
                }
            }
            if (c->filter < 0) {
                mf_err_set(err, MF_E_BadValue, "No array filter found for identifier '%.*s' in path '%s'", (int)idlen,
                           c->name + 2, path);
                path_free(out);
                return -1;
            }
        } else if (c->kind == C_FIELD && c->name[0] == '$') {
            mf_err_set(err, MF_E_DollarPrefixedFieldName,
                       "The dollar ($) prefixed field '%s' in '%s' is not valid for storage.", c->name, path);
            path_free(out);
            return -1;
        }
    }
    return 0;
}

static bool
path_is_dynamic(const path_t *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->comps[i].kind != C_FIELD)
            return true;
    return false;
}

/* path_prefix: true if a's components are a prefix of (or equal to) b's. */
static bool
path_prefix(const path_t *a, const path_t *b)
{
    if (a->n > b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->comps[i].name, b->comps[i].name) != 0)
            return false;
    return true;
}

/*
 * field_cmp: mongod's pathsupport::cmpPathsAndArrayIndexes, the order of its
 * update tree's children: two components that both start with a digit (and
 * are not zero-padded) compare as numbers (shorter first, then digit by
 * digit), so "a.9" is applied before "a.10"; anything else compares as
 * strings.
 */
static int
field_cmp(const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);

    if (al == 0 || bl == 0 || !(a[0] >= '0' && a[0] <= '9') || !(b[0] >= '0' && b[0] <= '9') ||
        (a[0] == '0' && al > 1) || (b[0] == '0' && bl > 1))
        return strcmp(a, b);
    if (al != bl)
        return al < bl ? -1 : 1;
    return strcmp(a, b); /* same length: digit by digit, then as strings, is strcmp's order */
}

static int
path_cmp(const path_t *a, const path_t *b)
{
    size_t n = a->n < b->n ? a->n : b->n;

    for (size_t i = 0; i < n; i++) {
        int c = field_cmp(a->comps[i].name, b->comps[i].name);
        if (c != 0)
            return c;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

static bool
comp_is_array(const comp_t *c)
{
    return c->kind == C_ALL || c->kind == C_FILTER;
}

/*
 * conflict_depth: whether adding path p to an update that already holds path
 * q conflicts in mongod's update tree (UpdateObjectNode::parseAndMerge), and
 * where. The tree has a node per distinct prefix; an inner node is an array
 * node when the component under it is "$[]" / "$[id]" and an object node
 * otherwise, and a path ends in a leaf. p conflicts with q when, following
 * their common prefix, it needs a node of the other kind (a.$[] then a.0:
 * "a" is an array node for one, an object node for the other), passes
 * through q's leaf, or ends on a node q made. Returns the number of p's
 * components naming the conflict ("would create a conflict at ..."), or 0.
 */
static size_t
conflict_depth(const path_t *p, const path_t *q)
{
    size_t n = p->n < q->n ? p->n : q->n;

    for (size_t i = 0; i < n; i++) {
        if (i > 0 && comp_is_array(&p->comps[i]) != comp_is_array(&q->comps[i]))
            return i;
        if (strcmp(p->comps[i].name, q->comps[i].name) != 0)
            return 0;
    }
    return n;
}

/*
 * check_conflict: p (being added) against the paths of the first nprev mods
 * of u ($rename contributes its source as well as its destination, as
 * mongod's ConflictPlaceholderNode does). mongod meets the conflict nearest
 * the root while walking p down its tree, so the shallowest one is reported.
 */
static int
check_conflict(const mf_update_t *u, size_t nprev, const path_t *p, mf_error_t *err)
{
    size_t best = 0;
    bson_string_t *s;

    for (size_t i = 0; i < nprev; i++) {
        const mod_t *m = &u->mods[i];
        size_t d = conflict_depth(p, &m->path);
        if (d > 0 && (best == 0 || d < best))
            best = d;
        if (m->op == OP_RENAME) {
            d = conflict_depth(p, &m->from);
            if (d > 0 && (best == 0 || d < best))
                best = d;
        }
    }
    if (best == 0)
        return 0;
    s = bson_string_new("");
    for (size_t i = 0; i < best; i++) {
        if (i)
            bson_string_append_c(s, '.');
        bson_string_append(s, p->comps[i].name);
    }
    mf_err_set(err, MF_E_ConflictingUpdateOperators, "Updating the path '%s' would create a conflict at '%s'", p->path,
               s->str);
    bson_string_free(s, true);
    return -1;
}

static bool
is_integral_number(const bson_value_t *v, int64_t *out)
{
    return mf_value_is_number(v) && mf_value_as_int64(v, out);
}

/* collect_array: fills m->each with the elements of the array value a (borrowed from a). */
static void
collect_array(mod_t *m, const bson_value_t *a)
{
    bson_t arr;
    bson_iter_t it;

    if (!bson_init_static(&arr, a->value.v_doc.data, a->value.v_doc.data_len) || !bson_iter_init(&it, &arr))
        return;
    while (bson_iter_next(&it)) {
        m->each = mf_realloc(m->each, (m->neach + 1) * sizeof(bson_value_t));
        m->each[m->neach++] = *bson_iter_value(&it);
    }
}

static int
parse_push(mod_t *m, mf_error_t *err)
{
    bson_t d;
    bson_iter_t it;
    bool has_each = false;

    if (m->val.value_type == BSON_TYPE_DOCUMENT) {
        if (!bson_init_static(&d, m->val.value.v_doc.data, m->val.value.v_doc.data_len))
            return mf_err_set(err, MF_E_BadValue, "Invalid BSON in $push");
        if (bson_iter_init_find(&it, &d, "$each"))
            has_each = true;
    }
    if (!has_each) {
        m->each = mf_malloc(sizeof(bson_value_t));
        m->each[0] = m->val;
        m->neach = 1;
        return 0;
    }
    bson_iter_init(&it, &d);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        int64_t n;

        if (strcmp(k, "$each") == 0) {
            if (v->value_type != BSON_TYPE_ARRAY)
                return mf_err_set(err, MF_E_BadValue,
                                  "The argument to $each in $push must be an array but it was of type: %s",
                                  mf_type_name(v->value_type));
            collect_array(m, v);
        } else if (strcmp(k, "$slice") == 0) {
            if (!is_integral_number(v, &n))
                return mf_err_set(err, MF_E_BadValue,
                                  "The value for $slice must be an integer value but was given type: %s",
                                  mf_type_name(v->value_type));
            m->has_slice = true;
            m->slice = n;
        } else if (strcmp(k, "$position") == 0) {
            if (!is_integral_number(v, &n))
                return mf_err_set(err, MF_E_BadValue,
                                  "The value for $position must be an integer value, not of type: %s",
                                  mf_type_name(v->value_type));
            m->has_position = true;
            m->position = n;
        } else if (strcmp(k, "$sort") == 0) {
            if (mf_value_is_number(v)) {
                double dv = mf_value_as_double(v);
                if (dv != 1 && dv != -1)
                    return mf_err_set(err, MF_E_BadValue,
                                      "The $sort element value must be either 1 or -1");
                m->sort_kind = dv > 0 ? 1 : -1;
            } else if (v->value_type == BSON_TYPE_DOCUMENT) {
                bson_t spec;
                bson_iter_t si;

                bson_init_static(&spec, v->value.v_doc.data, v->value.v_doc.data_len);
                if (bson_count_keys(&spec) == 0)
                    return mf_err_set(err, MF_E_BadValue,
                                      "The $sort pattern is empty when it should be a set of fields.");
                bson_iter_init(&si, &spec);
                while (bson_iter_next(&si)) {
                    const char *sk = bson_iter_key(&si);
                    const bson_value_t *sv = bson_iter_value(&si);
                    double dv = mf_value_as_double(sv);
                    /* mongod's checkSortClause: the value, then the field's parts ($ names are fine). */
                    if (!mf_value_is_number(sv) || (dv != 1 && dv != -1))
                        return mf_err_set(err, MF_E_BadValue, "The $sort element value must be either 1 or -1");
                    if (sk[0] == '\0')
                        return mf_err_set(err, MF_E_BadValue, "The $sort field cannot be empty");
                    if (sk[0] == '.' || strstr(sk, "..") || sk[strlen(sk) - 1] == '.')
                        return mf_err_set(err, MF_E_BadValue,
                                          "The $sort field is a dotted field but has an empty part: %s", sk);
                }
                m->sort_spec = *v;
                m->sort_kind = 2;
            } else {
                return mf_err_set(err, MF_E_BadValue,
                                  "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to "
                                  "sort embedded fields");
            }
        } else {
            return mf_err_set(err, MF_E_BadValue, "Unrecognized clause in $push: %s", k);
        }
    }
    return 0;
}

static int
parse_add_to_set(mod_t *m, mf_error_t *err)
{
    bson_t d;
    bson_iter_t it;

    if (m->val.value_type == BSON_TYPE_DOCUMENT &&
        bson_init_static(&d, m->val.value.v_doc.data, m->val.value.v_doc.data_len) && bson_iter_init(&it, &d) &&
        bson_iter_next(&it) && strcmp(bson_iter_key(&it), "$each") == 0) {
        const bson_value_t *v = bson_iter_value(&it);
        if (v->value_type != BSON_TYPE_ARRAY)
            return mf_err_set(err, MF_E_TypeMismatch,
                              "The argument to $each in $addToSet must be an array but it was of type %s",
                              mf_type_name(v->value_type));
        if (bson_iter_next(&it)) {
            bson_string_t *s = bson_string_new("");
            fmt_value(s, &m->val); /* mongod shows the whole operand */
            mf_err_set(err, MF_E_BadValue, "Found unexpected fields after $each in $addToSet: %s", s->str);
            bson_string_free(s, true);
            return -1;
        }
        collect_array(m, v);
        return 0;
    }
    m->each = mf_malloc(sizeof(bson_value_t));
    m->each[0] = m->val;
    m->neach = 1;
    return 0;
}

static int
parse_pull(mod_t *m, mf_error_t *err)
{
    if (m->val.value_type == BSON_TYPE_DOCUMENT) {
        m->matcher = mf_matcher_new_pull(&m->val, err);
        return m->matcher ? 0 : -1;
    }
    if (m->val.value_type == BSON_TYPE_REGEX) {
        bson_t f = BSON_INITIALIZER;
        bson_value_t fv;

        BSON_APPEND_REGEX(&f, "$regex", m->val.value.v_regex.regex, "");
        if (m->val.value.v_regex.options && *m->val.value.v_regex.options)
            BSON_APPEND_UTF8(&f, "$options", m->val.value.v_regex.options);
        fv.value_type = BSON_TYPE_DOCUMENT;
        fv.value.v_doc.data = (uint8_t *)bson_get_data(&f);
        fv.value.v_doc.data_len = f.len;
        m->matcher = mf_matcher_new_pull(&fv, err);
        bson_destroy(&f);
        return m->matcher ? 0 : -1;
    }
    return 0;
}

/*
 * parse_bit: checks a $bit operand as mongod's BitNode::init does: a document
 * of "and" / "or" / "xor" operations (at least one, repeats allowed, applied
 * in order), each with an int32 or int64 operand; anything else is 2
 * BadValue with mongod's message. The operations are read from the mod's
 * copy of the operand when applied.
 */
static int
parse_bit(const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    int nops = 0;

    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_BadValue,
                          "The $bit modifier is not compatible with a %s. You must pass in an embedded document: "
                          "{$bit: {field: {and/or/xor: #}}",
                          mf_type_name(v->value_type));
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return mf_err_set(err, MF_E_BadValue, "invalid $bit operand");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *ov = bson_iter_value(&it);
        bson_string_t *s;

        if (strcmp(k, "and") != 0 && strcmp(k, "or") != 0 && strcmp(k, "xor") != 0) {
            s = bson_string_new("");
            fmt_value(s, ov);
            mf_err_set(err, MF_E_BadValue,
                       "The $bit modifier only supports 'and', 'or', and 'xor', not '%s' which is an unknown "
                       "operator: {%s: %s}",
                       k, k, s->str);
            bson_string_free(s, true);
            return -1;
        }
        if (ov->value_type != BSON_TYPE_INT32 && ov->value_type != BSON_TYPE_INT64) {
            s = bson_string_new("");
            fmt_value(s, ov);
            mf_err_set(err, MF_E_BadValue,
                       "The $bit modifier field must be an Integer(32/64 bit); a '%s' is not supported here: "
                       "{%s: %s}",
                       mf_type_name(ov->value_type), k, s->str);
            bson_string_free(s, true);
            return -1;
        }
        nops++;
    }
    if (nops == 0)
        return mf_err_set(err, MF_E_BadValue,
                          "You must pass in at least one bitwise operation. The format is: "
                          "{$bit: {field: {and/or/xor: #}}");
    return 0;
}

/*
 * bit_apply: m's $bit operations applied in order to x (an int32 or int64),
 * into out. As with mongod's SafeNum, two int32 give an int32 and an int64 on
 * either side gives an int64.
 */
static void
bit_apply(const mod_t *m, const bson_value_t *x, bson_value_t *out)
{
    bson_iter_t it;
    bool wide = x->value_type == BSON_TYPE_INT64;
    int64_t acc = wide ? x->value.v_int64 : x->value.v_int32;

    bson_iter_init_from_data(&it, m->val.value.v_doc.data, m->val.value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int64_t operand;

        if (BSON_ITER_HOLDS_INT64(&it)) {
            operand = bson_iter_int64(&it);
            wide = true;
        } else {
            operand = bson_iter_int32(&it);
        }
        if (k[0] == 'a')
            acc &= operand;
        else if (k[0] == 'o')
            acc |= operand;
        else
            acc ^= operand;
    }
    memset(out, 0, sizeof(*out));
    if (wide) {
        out->value_type = BSON_TYPE_INT64;
        out->value.v_int64 = acc;
    } else {
        /* Both sides were int32 throughout: the result fits. */
        out->value_type = BSON_TYPE_INT32;
        out->value.v_int32 = (int32_t)acc;
    }
}

static int
parse_mod(mf_update_t *u, mod_t *m, const char *opname, const char *field, const bson_value_t *v,
          mf_error_t *err)
{
    int64_t n;

    if (parse_path(u, field, &m->path, err) < 0)
        return -1;
    bson_value_copy(v, &m->val);
    switch (m->op) {
    case OP_INC:
    case OP_MUL:
        if (!mf_value_is_number(v)) {
            bson_string_t *s = bson_string_new("");
            fmt_value(s, v);
            mf_err_set(err, MF_E_TypeMismatch, "Cannot %s with non-numeric argument: {%s: %s}",
                       m->op == OP_INC ? "increment" : "multiply", field, s->str);
            bson_string_free(s, true);
            return -1;
        }
        return 0;
    case OP_POP:
        if (!mf_value_is_number(v)) {
            bson_string_t *s = bson_string_new("");
            fmt_value(s, v);
            mf_err_set(err, MF_E_FailedToParse, "Expected a number in: %s: %s", field, s->str);
            bson_string_free(s, true);
            return -1;
        }
        if (!mf_value_as_int64(v, &n) || (n != 1 && n != -1)) {
            bson_string_t *s = bson_string_new("");
            fmt_value(s, v);
            mf_err_set(err, MF_E_FailedToParse, "$pop expects 1 or -1, found: %s", s->str);
            bson_string_free(s, true);
            return -1;
        }
        m->pop = (int)n;
        return 0;
    case OP_CURRENTDATE:
        if (v->value_type == BSON_TYPE_BOOL)
            return 0;
        if (v->value_type == BSON_TYPE_DOCUMENT) {
            bson_t d;
            bson_iter_t it;
            bool ok = false;
            bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len);
            bson_iter_init(&it, &d);
            while (bson_iter_next(&it)) {
                if (strcmp(bson_iter_key(&it), "$type") != 0)
                    return mf_err_set(err, MF_E_BadValue, "Unrecognized $currentDate option: %s",
                                      bson_iter_key(&it));
                /* mongod's CurrentDateNode: a $type that is not "date" or "timestamp" is passed over. */
                if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "date") == 0) {
                    ok = true;
                    m->timestamp = false;
                } else if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "timestamp") == 0) {
                    ok = true;
                    m->timestamp = true;
                }
            }
            if (!ok)
                return mf_err_set(err, MF_E_BadValue,
                                  "The '$type' string field is required to be 'date' or 'timestamp': "
                                  "{$currentDate: {field : {$type: 'date'}}}");
            return 0;
        }
        return mf_err_set(err, MF_E_BadValue,
                          "%s is not valid type for $currentDate. Please use a boolean ('true') or a $type "
                          "expression ({$type: 'timestamp/date'}).",
                          mf_type_name(v->value_type));
    case OP_RENAME:
        if (v->value_type != BSON_TYPE_UTF8) {
            bson_string_t *s = bson_string_new("");
            fmt_value(s, v);
            mf_err_set(err, MF_E_BadValue, "The 'to' field for $rename must be a string: %s: %s", field, s->str);
            bson_string_free(s, true);
            return -1;
        }
        /* The parsed field is the source; the mod is keyed by its destination. */
        m->from = m->path;
        memset(&m->path, 0, sizeof(m->path));
        if (parse_path(u, v->value.v_utf8.str, &m->path, err) < 0)
            return -1;
        if (path_is_dynamic(&m->from))
            return mf_err_set(err, MF_E_BadValue, "The source field for $rename may not be dynamic: %s",
                              m->from.path);
        if (path_is_dynamic(&m->path))
            return mf_err_set(err, MF_E_BadValue, "The destination field for $rename may not be dynamic: %s",
                              m->path.path);
        if (strcmp(m->from.path, m->path.path) == 0)
            return mf_err_set(err, MF_E_BadValue, "The source and target field for $rename must differ: %s: \"%s\"",
                              field, m->path.path);
        if (path_prefix(&m->from, &m->path) || path_prefix(&m->path, &m->from))
            return mf_err_set(err, MF_E_BadValue,
                              "The source and target field for $rename must not be on the same path: %s: \"%s\"",
                              field, m->path.path);
        return 0;
    case OP_PUSH:
        return parse_push(m, err);
    case OP_ADDTOSET:
        return parse_add_to_set(m, err);
    case OP_PULL:
        return parse_pull(m, err);
    case OP_PULLALL:
        if (v->value_type != BSON_TYPE_ARRAY)
            return mf_err_set(err, MF_E_BadValue, "$pullAll requires an array argument but was given a %s",
                              mf_type_name(v->value_type));
        collect_array(m, &m->val);
        return 0;
    case OP_BIT:
        return parse_bit(v, err);
    default:
        return 0;
    }
}

static const struct {
    const char *name;
    op_t op;
} OPS[] = {
    {"$set", OP_SET},         {"$unset", OP_UNSET},       {"$inc", OP_INC},
    {"$mul", OP_MUL},         {"$min", OP_MIN},           {"$max", OP_MAX},
    {"$rename", OP_RENAME},   {"$push", OP_PUSH},         {"$addToSet", OP_ADDTOSET},
    {"$pull", OP_PULL},       {"$pullAll", OP_PULLALL},   {"$pop", OP_POP},
    {"$currentDate", OP_CURRENTDATE}, {"$setOnInsert", OP_SETONINSERT},
    {"$bit", OP_BIT},
};

static int
mod_sort_cmp(const void *a, const void *b)
{
    return path_cmp(&((const mod_t *)a)->path, &((const mod_t *)b)->path);
}

static int filter_placeholder(const uint8_t *data, uint32_t len, char **out, mf_error_t *err);

/*
 * placeholder_combine: folds one clause's identifier (owned, may be NULL)
 * into *acc as mongod's parseTopLevelFieldName does for a logical node: the
 * first clause with a name sets it, clauses without one do not count, and a
 * different name is 9 FailedToParse.
 */
static int
placeholder_combine(char **acc, char *name, mf_error_t *err)
{
    int rc = 0;

    if (name == NULL)
        return 0;
    if (*acc == NULL) {
        *acc = name;
        return 0;
    }
    if (strcmp(*acc, name) != 0)
        rc = mf_err_set(err, MF_E_FailedToParse,
                        "Error parsing array filter :: caused by :: Expected a single top-level field name, found "
                        "'%s' and '%s'",
                        *acc, name);
    free(name);
    return rc;
}

/*
 * filter_placeholder: the identifier an array filter (a filter document, an
 * implicit $and of its fields) is over: a field condition names the part of
 * its path before the first dot, $and / $or / $nor the name their clauses
 * agree on, and other operators ($alwaysTrue, ...) nothing. *out is set to
 * an owned string or NULL. Returns 0, or -1 with err.
 */
static int
filter_placeholder(const uint8_t *data, uint32_t len, char **out, mf_error_t *err)
{
    bson_iter_t it, ai;
    char *acc = NULL;
    int rc = 0;

    *out = NULL;
    if (!bson_iter_init_from_data(&it, data, len))
        return 0;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        char *name = NULL;

        if (k[0] != '$') {
            const char *dot = strchr(k, '.');
            name = mf_strndup(k, dot ? (size_t)(dot - k) : strlen(k));
        } else if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                   BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai)) {
            while (rc == 0 && bson_iter_next(&ai)) {
                const uint8_t *dd;
                uint32_t dl;
                char *sub;

                if (!BSON_ITER_HOLDS_DOCUMENT(&ai))
                    continue;
                bson_iter_document(&ai, &dl, &dd);
                rc = filter_placeholder(dd, dl, &sub, err);
                if (rc == 0)
                    rc = placeholder_combine(&name, sub, err);
            }
        }
        if (rc == 0)
            rc = placeholder_combine(&acc, name, err);
        else
            free(name);
    }
    if (rc < 0)
        free(acc);
    else
        *out = acc;
    return rc;
}

/*
 * parse_filters: the arrayFilters option, checked in mongod's order
 * (parsed_update.cpp parseArrayFilters): each filter parses as a match
 * expression without special features ($expr / $jsonSchema / $text are 224
 * QueryFeatureNotAllowed), errors carrying "Error parsing array filter"
 * context; then its identifier is found through $and / $or / $nor and must
 * be a lowercase-led alphanumeric name, present, and not repeated.
 */
static int
parse_filters(mf_update_t *u, const bson_value_t *af, mf_error_t *err)
{
    bson_t arr;
    bson_iter_t it;
    mf_matcher_t *m = NULL;
    char *name = NULL;
    mf_error_t perr;

    if (af->value_type != BSON_TYPE_ARRAY)
        return mf_err_set(err, MF_E_TypeMismatch, "arrayFilters must be an array");
    bson_init_static(&arr, af->value.v_doc.data, af->value.v_doc.data_len);
    bson_iter_init(&it, &arr);
    while (bson_iter_next(&it)) {
        const bson_value_t *fv = bson_iter_value(&it);
        bool good = true;

        if (fv->value_type != BSON_TYPE_DOCUMENT) {
            mf_err_set(err, MF_E_TypeMismatch, "Each array filter must be an object, but found type %s",
                       mf_type_name(fv->value_type));
            goto fail;
        }
        mf_err_clear(&perr);
        m = mf_matcher_new_pull(fv, &perr);
        if (m == NULL) {
            mf_err_set(err, perr.code, "Error parsing array filter :: caused by :: %s", perr.msg);
            goto fail;
        }
        if (filter_placeholder(fv->value.v_doc.data, fv->value.v_doc.data_len, &name, err) < 0)
            goto fail;
        if (name != NULL) {
            good = name[0] >= 'a' && name[0] <= 'z';
            for (const char *p = name; *p && good; p++)
                good = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        }
        if (!good) {
            mf_err_set(err, MF_E_BadValue,
                       "Error parsing array filter :: caused by :: The top-level field name must be an "
                       "alphanumeric string beginning with a lowercase letter, found '%s'",
                       name);
            goto fail;
        }
        if (name == NULL) {
            mf_err_set(err, MF_E_FailedToParse,
                       "Cannot use an expression without a top-level field name in arrayFilters");
            goto fail;
        }
        for (size_t i = 0; i < u->nfilters; i++) {
            if (strcmp(u->filters[i].name, name) == 0) {
                mf_err_set(err, MF_E_FailedToParse,
                           "Found multiple array filters with the same top-level field name %s", name);
                goto fail;
            }
        }
        u->filters = mf_realloc(u->filters, (u->nfilters + 1) * sizeof(afilter_t));
        u->filters[u->nfilters].name = name;
        u->filters[u->nfilters].used = false;
        u->filters[u->nfilters].m = m;
        u->nfilters++;
        name = NULL;
        m = NULL;
    }
    return 0;

fail:
    mf_matcher_free(m);
    free(name);
    return -1;
}

static int
parse_replacement(mf_update_t *u, const bson_t *update, mf_error_t *err)
{
    bson_iter_t it;

    bson_iter_init(&it, update);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k[0] == '$')
            return mf_err_set(err, MF_E_DollarPrefixedFieldName,
                              "The dollar ($) prefixed field '%s' in '%s' is not allowed in the context of an "
                              "update's replacement document. Consider using an aggregation pipeline with "
                              "$replaceWith.",
                              k, k);
        /*
         * An array _id fails when the replacement applies (apply_replacement),
         * as mongod's ObjectReplaceExecutor checks it: before the fields after it.
         */
        if (strcmp(k, "_id") == 0 && BSON_ITER_HOLDS_ARRAY(&it))
            break;
    }
    u->replacement = true;
    u->repl = bson_copy(update);
    return 0;
}

void
mf_update_set_clock(mf_update_t *u, mf_ts_tick_fn tick, void *arg, bool fill_empty)
{
    if (u == NULL)
        return;
    u->tick = tick;
    u->tick_arg = arg;
    if (!fill_empty || !u->replacement || !mf_doc_has_empty_ts(u->repl))
        return;
    /* Done once, when the statement is parsed (as mongod's ObjectReplaceExecutor): every document it replaces gets the same. */
    bson_t *fixed = bson_new();
    bson_iter_t it;
    bson_iter_init(&it, u->repl);
    while (bson_iter_next(&it))
        mf_doc_append_filled(fixed, &it, strcmp(bson_iter_key(&it), "_id") != 0 ? tick : NULL, arg);
    bson_destroy(u->repl);
    u->repl = fixed;
}

mf_update_t *
mf_update_new(const bson_t *update, const bson_value_t *array_filters, mf_error_t *err)
{
    mf_update_t *u = mf_calloc(1, sizeof(*u));
    bson_iter_t it;

    if (!bson_iter_init(&it, update)) {
        mf_err_set(err, MF_E_FailedToParse, "Invalid update document");
        goto fail;
    }
    if (!bson_iter_next(&it) || bson_iter_key(&it)[0] != '$') {
        if (parse_replacement(u, update, err) < 0)
            goto fail;
        return u;
    }
    if (array_filters != NULL && parse_filters(u, array_filters, err) < 0)
        goto fail;

    bson_iter_init(&it, update);
    while (bson_iter_next(&it)) {
        const char *opname = bson_iter_key(&it);
        const bson_value_t *ov = bson_iter_value(&it);
        int op = -1;
        bson_t opdoc;
        bson_iter_t fi;

        for (size_t i = 0; i < sizeof(OPS) / sizeof(OPS[0]); i++)
            if (strcmp(OPS[i].name, opname) == 0)
                op = (int)i;
        if (op < 0) {
            mf_err_set(err, MF_E_FailedToParse,
                       "Unknown modifier: %s. Expected a valid update modifier or pipeline-style update specified "
                       "as an array",
                       opname);
            goto fail;
        }
        if (ov->value_type != BSON_TYPE_DOCUMENT) {
            bson_string_t *s = bson_string_new("");
            fmt_value(s, ov);
            mf_err_set(err, MF_E_FailedToParse,
                       "Modifiers operate on fields but we found type %s instead. For example: {$mod: {<field>: "
                       "...}} not {%s: %s}",
                       mf_type_name(ov->value_type), opname, s->str);
            bson_string_free(s, true);
            goto fail;
        }
        /* An empty operand ({$set: {}}) is a no-op since MongoDB 5.0. */
        bson_init_static(&opdoc, ov->value.v_doc.data, ov->value.v_doc.data_len);
        bson_iter_init(&fi, &opdoc);
        while (bson_iter_next(&fi)) {
            mod_t *m;
            u->mods = mf_realloc(u->mods, (u->nmods + 1) * sizeof(mod_t));
            m = &u->mods[u->nmods++];
            memset(m, 0, sizeof(*m));
            m->op = OPS[op].op;
            m->opname = OPS[op].name;
            if (parse_mod(u, m, opname, bson_iter_key(&fi), bson_iter_value(&fi), err) < 0)
                goto fail;
            if (m->op == OP_RENAME) {
                if (check_conflict(u, u->nmods - 1, &m->from, err) < 0)
                    goto fail;
                if (path_prefix(&m->from, &m->path) || path_prefix(&m->path, &m->from)) {
                    mf_err_set(err, MF_E_ConflictingUpdateOperators,
                               "Updating the path '%s' would create a conflict at '%s'", m->path.path, m->from.path);
                    goto fail;
                }
            }
            if (check_conflict(u, u->nmods - 1, &m->path, err) < 0)
                goto fail;
        }
    }
    for (size_t i = 0; i < u->nfilters; i++) {
        if (!u->filters[i].used) {
            bson_string_t *s = bson_string_new("");
            bson_value_t uv;
            uv.value_type = BSON_TYPE_DOCUMENT;
            uv.value.v_doc.data = (uint8_t *)bson_get_data(update);
            uv.value.v_doc.data_len = update->len;
            fmt_value(s, &uv);
            mf_err_set(err, MF_E_FailedToParse, "The array filter for identifier '%s' was not used in the update %s",
                       u->filters[i].name, s->str);
            bson_string_free(s, true);
            goto fail;
        }
    }
    if (u->nmods > 0)
        qsort(u->mods, u->nmods, sizeof(mod_t), mod_sort_cmp);
    return u;

fail:
    mf_update_free(u);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The mutable document tree. */

typedef struct node node_t;
struct node {
    bson_value_t v; /* the value when not expanded; the source of borrowed children when expanded */
    /*
     * The value the node had when its parent was expanded (borrowed from the
     * parent's v, which outlives it), kept when mods change v; EOD for nodes
     * the update created. arrayFilters are matched against it: mongod
     * evaluates every filter of an array before applying any of them.
     */
    bson_value_t orig;
    bool owned;     /* v holds heap memory of its own */
    bool expanded;
    bool is_array; /* meaningful when expanded */
    size_t n, cap;
    char **keys; /* documents only; owned strings */
    node_t **kids;
};

static node_t *
node_new_value(const bson_value_t *v, bool copy)
{
    node_t *n = mf_calloc(1, sizeof(*n));
    if (copy) {
        bson_value_copy(v, &n->v);
        n->owned = true;
    } else {
        n->v = *v;
    }
    return n;
}

static node_t *
node_new_container(bool array)
{
    node_t *n = mf_calloc(1, sizeof(*n));
    n->v.value_type = array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT;
    n->expanded = true;
    n->is_array = array;
    return n;
}

static node_t *
node_new_null(void)
{
    bson_value_t nv;
    nv.value_type = BSON_TYPE_NULL;
    return node_new_value(&nv, false);
}

static void node_free(node_t *n);

static void
node_clear(node_t *n)
{
    for (size_t i = 0; i < n->n; i++) {
        node_free(n->kids[i]);
        if (n->keys)
            free(n->keys[i]);
    }
    free(n->kids);
    free(n->keys);
    n->kids = NULL;
    n->keys = NULL;
    n->n = n->cap = 0;
    if (n->owned)
        bson_value_destroy(&n->v);
    n->owned = false;
    n->expanded = false;
    n->is_array = false;
    memset(&n->v, 0, sizeof(n->v));
}

static void
node_free(node_t *n)
{
    if (n == NULL)
        return;
    node_clear(n);
    free(n);
}

static void
node_set(node_t *n, const bson_value_t *v, bool copy)
{
    node_clear(n);
    if (copy) {
        bson_value_copy(v, &n->v);
        n->owned = true;
    } else {
        n->v = *v;
    }
}

static bool
node_is_container(const node_t *n)
{
    return n->expanded || n->v.value_type == BSON_TYPE_DOCUMENT || n->v.value_type == BSON_TYPE_ARRAY;
}

static bool
node_is_array(const node_t *n)
{
    return n->expanded ? n->is_array : n->v.value_type == BSON_TYPE_ARRAY;
}

static bson_type_t
node_type(const node_t *n)
{
    return n->expanded ? (n->is_array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT) : n->v.value_type;
}

static void
node_push(node_t *n, char *key, node_t *kid)
{
    if (n->n == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 8;
        n->kids = mf_realloc(n->kids, n->cap * sizeof(node_t *));
        if (!n->is_array)
            n->keys = mf_realloc(n->keys, n->cap * sizeof(char *));
    }
    if (!n->is_array)
        n->keys[n->n] = key;
    n->kids[n->n++] = kid;
}

static void
node_insert(node_t *n, size_t pos, node_t *kid)
{
    node_push(n, NULL, kid);
    memmove(&n->kids[pos + 1], &n->kids[pos], (n->n - 1 - pos) * sizeof(node_t *));
    n->kids[pos] = kid;
}

static void
node_remove(node_t *n, size_t idx)
{
    node_free(n->kids[idx]);
    if (n->keys) {
        free(n->keys[idx]);
        memmove(&n->keys[idx], &n->keys[idx + 1], (n->n - idx - 1) * sizeof(char *));
    }
    memmove(&n->kids[idx], &n->kids[idx + 1], (n->n - idx - 1) * sizeof(node_t *));
    n->n--;
}

/* node_expand: turns a document/array value into children borrowing from it. */
static void
node_expand(node_t *n)
{
    bson_t b;
    bson_iter_t it;

    if (n->expanded)
        return;
    n->is_array = n->v.value_type == BSON_TYPE_ARRAY;
    n->expanded = true;
    if (!bson_init_static(&b, n->v.value.v_doc.data, n->v.value.v_doc.data_len) || !bson_iter_init(&it, &b))
        return;
    while (bson_iter_next(&it)) {
        node_t *kid = node_new_value(bson_iter_value(&it), false);
        kid->orig = kid->v;
        node_push(n, n->is_array ? NULL : mf_strdup(bson_iter_key(&it)), kid);
    }
}

static void node_append_to(bson_t *b, const char *key, int keylen, const node_t *n);

static void
node_write_kids(bson_t *b, const node_t *n)
{
    for (size_t i = 0; i < n->n; i++) {
        if (n->is_array) {
            char buf[16];
            const char *key;
            size_t kl = bson_uint32_to_string((uint32_t)i, &key, buf, sizeof(buf));
            node_append_to(b, key, (int)kl, n->kids[i]);
        } else {
            node_append_to(b, n->keys[i], -1, n->kids[i]);
        }
    }
}

static void
node_append_to(bson_t *b, const char *key, int keylen, const node_t *n)
{
    bson_t child;

    if (!n->expanded) {
        mf_bson_append_value(b, key, keylen, &n->v);
        return;
    }
    if (n->is_array)
        bson_append_array_begin(b, key, keylen, &child);
    else
        bson_append_document_begin(b, key, keylen, &child);
    node_write_kids(&child, n);
    if (n->is_array)
        bson_append_array_end(b, &child);
    else
        bson_append_document_end(b, &child);
}

/*
 * node_value: the node's value. When the node is expanded the value is built
 * and *owned set true (release with bson_value_destroy); otherwise it is
 * borrowed.
 */
static void
node_value(const node_t *n, bson_value_t *out, bool *owned)
{
    bson_t tmp = BSON_INITIALIZER;
    bson_value_t bv;

    if (!n->expanded) {
        *out = n->v;
        *owned = false;
        return;
    }
    node_write_kids(&tmp, n);
    bv.value_type = n->is_array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT;
    bv.value.v_doc.data = (uint8_t *)bson_get_data(&tmp);
    bv.value.v_doc.data_len = tmp.len;
    bson_value_copy(&bv, out);
    bson_destroy(&tmp);
    *owned = true;
}

static char *
node_fmt(const node_t *n)
{
    bson_string_t *s = bson_string_new("");
    bson_value_t v;
    bool owned;

    node_value(n, &v, &owned);
    fmt_value(s, &v);
    if (owned)
        bson_value_destroy(&v);
    return bson_string_free(s, false);
}

/* ------------------------------------------------------------------------ */
/* Applying mods. */

typedef struct {
    const mf_update_t *u;
    const bson_t *doc;
    int32_t array_pos;
    bool is_insert;
    mf_error_t *err;
    char *idstr; /* "_id: 1" for messages, built lazily */
} actx_t;

/*
 * The document's _id as mongod's update nodes name it in messages: "_id: 1",
 * or "no id" when it has none (an upsert's new document, whose _id mongod
 * adds only after applying the update: (idElem.ok() ? idElem.toString() :
 * "no id")). Owned by c.
 */
static const char *
ctx_id(actx_t *c)
{
    bson_iter_t it;

    if (c->idstr == NULL) {
        bson_string_t *s = bson_string_new("");
        if (bson_iter_init_find(&it, c->doc, "_id")) {
            bson_string_append(s, "_id: ");
            fmt_value(s, bson_iter_value(&it));
        } else {
            bson_string_append(s, "no id");
        }
        c->idstr = bson_string_free(s, false);
    }
    return c->idstr;
}

/* The same for $bit's message, which prints the _id element with no "no id" fallback (bit_node.cpp). */
static const char *
ctx_id_bit(actx_t *c)
{
    const char *id = ctx_id(c);
    return strcmp(id, "no id") == 0 ? "" : id;
}

static bool
op_creates(op_t op)
{
    switch (op) {
    case OP_UNSET:
    case OP_PULL:
    case OP_PULLALL:
    case OP_POP:
        return false;
    default:
        return true;
    }
}

/* slot_find: the child of container cur at key, or NULL. */
static node_t **
slot_find(node_t *cur, const char *key)
{
    size_t idx;

    if (cur->is_array) {
        if (!is_index(key, &idx) || idx >= cur->n)
            return NULL;
        return &cur->kids[idx];
    }
    for (size_t i = 0; i < cur->n; i++)
        if (strcmp(cur->keys[i], key) == 0)
            return &cur->kids[i];
    return NULL;
}

/*
 * slot_create: adds kid (taking ownership) at key in cur, padding arrays
 * with nulls; fails with 28 when key cannot name an array element.
 */
static int
slot_create(actx_t *c, node_t *cur, const char *curname, const char *key, node_t *kid)
{
    size_t idx;

    if (cur->is_array) {
        if (!is_index(key, &idx)) {
            char *s = node_fmt(cur);
            mf_err_set(c->err, MF_E_PathNotViable, "Cannot create field '%s' in element {%s: %s}", key,
                       curname ? curname : "", s);
            bson_free(s);
            node_free(kid);
            return -1;
        }
        /* As MongoDB: at most 1,500,000 nulls of padding (a huge index must not build a huge array). */
        if (idx > cur->n && idx - cur->n > MF_MAX_ARRAY_PADDING) {
            mf_err_set(c->err, MF_E_CannotBackfillArray, "can't backfill more than %d elements",
                       MF_MAX_ARRAY_PADDING);
            node_free(kid);
            return -1;
        }
        while (cur->n < idx)
            node_push(cur, NULL, node_new_null());
        node_push(cur, NULL, kid);
        return 0;
    }
    node_push(cur, mf_strdup(key), kid);
    return 0;
}

static int
num_arith(bool mul, const bson_value_t *a, const bson_value_t *b, bson_value_t *out)
{
    bson_type_t ta = a->value_type, tb = b->value_type;

    if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128) {
        /* Decimal arithmetic, a double operand rounded to 15 digits first (MongoDB's SafeNum). */
        bson_decimal128_t x, y;
        out->value_type = BSON_TYPE_DECIMAL128;
        (void)mf_dec_from_value(a, 15, &x);
        (void)mf_dec_from_value(b, 15, &y);
        mf_dec_arith(mul ? MF_DEC_MUL : MF_DEC_ADD, &x, &y, &out->value.v_decimal128);
        return 0;
    }
    if (ta == BSON_TYPE_DOUBLE || tb == BSON_TYPE_DOUBLE) {
        out->value_type = BSON_TYPE_DOUBLE;
        out->value.v_double =
            mul ? mf_value_as_double(a) * mf_value_as_double(b) : mf_value_as_double(a) + mf_value_as_double(b);
        return 0;
    }
    if (ta == BSON_TYPE_INT32 && tb == BSON_TYPE_INT32) {
        int32_t r;
        bool ovf = mul ? __builtin_mul_overflow(a->value.v_int32, b->value.v_int32, &r)
                       : __builtin_add_overflow(a->value.v_int32, b->value.v_int32, &r);
        if (!ovf) {
            out->value_type = BSON_TYPE_INT32;
            out->value.v_int32 = r;
            return 0;
        }
    }
    {
        int64_t x = ta == BSON_TYPE_INT32 ? a->value.v_int32 : a->value.v_int64;
        int64_t y = tb == BSON_TYPE_INT32 ? b->value.v_int32 : b->value.v_int64;
        int64_t r;
        bool ovf = mul ? __builtin_mul_overflow(x, y, &r) : __builtin_add_overflow(x, y, &r);
        if (ovf)
            return -1;
        out->value_type = BSON_TYPE_INT64;
        out->value.v_int64 = r;
        return 0;
    }
}

/*
 * pattern_key: the value a $push $sort pattern field reads from an array
 * element, as mongod's PatternElementCmp does with
 * extractElementsBasedOnTemplate: a field named by the whole (dotted) path
 * first, else the first part's document or array and the rest of the path
 * within it (an array is entered only by index: "b.c" over b: [{c: 1}] finds
 * nothing). The value is taken whole, so an array compares as an array.
 * Anything other than a document has no fields; a missing field is null.
 */
static void
pattern_key(const bson_value_t *el, const char *path, bson_value_t *out)
{
    const uint8_t *data;
    uint32_t len;
    bson_iter_t it;

    out->value_type = BSON_TYPE_NULL;
    if (el->value_type != BSON_TYPE_DOCUMENT)
        return;
    data = el->value.v_doc.data;
    len = el->value.v_doc.data_len;
    for (;;) {
        const char *dot;

        if (bson_iter_init_from_data(&it, data, len) && bson_iter_find(&it, path)) {
            *out = *bson_iter_value(&it);
            return;
        }
        dot = strchr(path, '.');
        if (dot == NULL || !bson_iter_init_from_data(&it, data, len) ||
            !bson_iter_find_w_len(&it, path, (int)(dot - path)) ||
            !(BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)))
            return;
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &len, &data);
        else
            bson_iter_array(&it, &len, &data);
        path = dot + 1;
    }
}

typedef struct {
    bson_value_t v;
    bool owned;
    bson_value_t *keys; /* pattern sorts: one value per pattern field (borrowed from v) */
    size_t idx;
    const mod_t *m;
} sortel_t;

static int
sortel_cmp(const void *pa, const void *pb)
{
    const sortel_t *a = pa, *b = pb;
    int c = 0;

    if (a->m->sort_kind == 2) {
        bson_iter_t it;
        size_t f = 0;

        bson_iter_init_from_data(&it, a->m->sort_spec.value.v_doc.data, a->m->sort_spec.value.v_doc.data_len);
        while (c == 0 && bson_iter_next(&it)) {
            c = mf_value_cmp(&a->keys[f], &b->keys[f]);
            if (mf_value_as_double(bson_iter_value(&it)) < 0)
                c = -c;
            f++;
        }
    } else
        c = mf_value_cmp(&a->v, &b->v) * a->m->sort_kind;
    if (c == 0)
        c = a->idx < b->idx ? -1 : a->idx > b->idx;
    return c;
}

static void
push_sort(node_t *arr, const mod_t *m)
{
    if (arr->n == 0)
        return; /* nothing to order (and kids may be NULL) */
    sortel_t *els = mf_calloc(arr->n, sizeof(sortel_t));
    node_t **kids = mf_malloc(arr->n * sizeof(node_t *));
    size_t nfields = 0;
    bson_iter_t it;

    if (m->sort_kind == 2) {
        bson_iter_init_from_data(&it, m->sort_spec.value.v_doc.data, m->sort_spec.value.v_doc.data_len);
        while (bson_iter_next(&it))
            nfields++;
    }
    for (size_t i = 0; i < arr->n; i++) {
        node_value(arr->kids[i], &els[i].v, &els[i].owned);
        els[i].idx = i;
        els[i].m = m;
        if (nfields > 0) {
            size_t f = 0;
            els[i].keys = mf_calloc(nfields, sizeof(bson_value_t));
            bson_iter_init_from_data(&it, m->sort_spec.value.v_doc.data, m->sort_spec.value.v_doc.data_len);
            while (bson_iter_next(&it))
                pattern_key(&els[i].v, bson_iter_key(&it), &els[i].keys[f++]);
        }
    }
    qsort(els, arr->n, sizeof(sortel_t), sortel_cmp);
    for (size_t i = 0; i < arr->n; i++) {
        kids[i] = arr->kids[els[i].idx];
        free(els[i].keys);
        if (els[i].owned)
            bson_value_destroy(&els[i].v);
    }
    memcpy(arr->kids, kids, arr->n * sizeof(node_t *));
    free(kids);
    free(els);
}

static bool
array_contains(const node_t *arr, const bson_value_t *v)
{
    for (size_t i = 0; i < arr->n; i++) {
        bson_value_t kv;
        bool owned, eq;
        node_value(arr->kids[i], &kv, &owned);
        eq = mf_value_equal(&kv, v);
        if (owned)
            bson_value_destroy(&kv);
        if (eq)
            return true;
    }
    return false;
}

static bool
pull_matches(const mod_t *m, const bson_value_t *v)
{
    if (m->op == OP_PULLALL) {
        for (size_t i = 0; i < m->neach; i++)
            if (mf_value_equal(&m->each[i], v))
                return true;
        return false;
    }
    if (m->matcher)
        return mf_matcher_match_value(m->matcher, v);
    return mf_value_equal(&m->val, v);
}

static int
leaf(actx_t *c, const mod_t *m, node_t *cur, const char *curname, const char *key)
{
    node_t **slot = slot_find(cur, key);
    node_t *t = slot ? *slot : NULL;
    size_t idx;

    if (t == NULL && cur->is_array && !is_index(key, &idx) && !op_creates(m->op))
        return 0;

    switch (m->op) {
    case OP_SETONINSERT:
        if (!c->is_insert)
            return 0;
        /* fall through */
    case OP_SET:
        if (t)
            node_set(t, &m->val, m->copy_val);
        else
            return slot_create(c, cur, curname, key, node_new_value(&m->val, m->copy_val));
        return 0;
    case OP_UNSET:
        if (t == NULL)
            return 0;
        if (cur->is_array) {
            bson_value_t nv;
            nv.value_type = BSON_TYPE_NULL;
            node_set(t, &nv, false);
        } else {
            node_remove(cur, (size_t)(slot - cur->kids));
        }
        return 0;
    case OP_INC:
    case OP_MUL: {
        bson_value_t res;
        if (t == NULL) {
            if (m->op == OP_INC) {
                res = m->val;
            } else {
                memset(&res, 0, sizeof(res));
                res.value_type = m->val.value_type;
                if (res.value_type == BSON_TYPE_DECIMAL128) {
                    /* 0 times the operand, so its exponent carries: $mul 1.50 makes 0.00, as in mongod. */
                    bson_decimal128_t zero;
                    mf_dec_from_int64(0, &zero);
                    mf_dec_arith(MF_DEC_MUL, &zero, &m->val.value.v_decimal128, &res.value.v_decimal128);
                }
            }
            return slot_create(c, cur, curname, key, node_new_value(&res, false));
        }
        if (t->expanded || !mf_value_is_number(&t->v))
            return mf_err_set(c->err, MF_E_TypeMismatch,
                              "Cannot apply %s to a value of non-numeric type. {%s} has the field '%s' of "
                              "non-numeric type %s",
                              m->opname, ctx_id(c), key, mf_type_name(node_type(t)));
        if (num_arith(m->op == OP_MUL, &t->v, &m->val, &res) < 0) {
            /*
             * Only integer arithmetic overflows; mongod shows the current
             * value as SafeNum::debugString does ("(NumberLong)9223372036854775807").
             */
            if (t->v.value_type == BSON_TYPE_INT32)
                return mf_err_set(c->err, MF_E_BadValue,
                                  "Failed to apply %s operations to current value ((NumberInt)%d) for document {%s}",
                                  m->opname, t->v.value.v_int32, ctx_id(c));
            return mf_err_set(c->err, MF_E_BadValue,
                              "Failed to apply %s operations to current value ((NumberLong)%lld) for document {%s}",
                              m->opname, (long long)t->v.value.v_int64, ctx_id(c));
        }
        node_set(t, &res, false);
        return 0;
    }
    case OP_BIT: {
        bson_value_t res;
        if (t == NULL) {
            bson_value_t zero;
            memset(&zero, 0, sizeof(zero));
            zero.value_type = BSON_TYPE_INT32; /* mongod starts a missing field from int32 0 */
            bit_apply(m, &zero, &res);
            return slot_create(c, cur, curname, key, node_new_value(&res, false));
        }
        if (t->expanded || (t->v.value_type != BSON_TYPE_INT32 && t->v.value_type != BSON_TYPE_INT64))
            return mf_err_set(c->err, MF_E_BadValue,
                              "Cannot apply $bit to a value of non-integral type.%s has the field %s of "
                              "non-integer type %s",
                              ctx_id_bit(c), key, mf_type_name(node_type(t)));
        bit_apply(m, &t->v, &res);
        node_set(t, &res, false);
        return 0;
    }
    case OP_MIN:
    case OP_MAX: {
        bson_value_t cv;
        bool owned;
        int cmp;
        if (t == NULL)
            return slot_create(c, cur, curname, key, node_new_value(&m->val, false));
        node_value(t, &cv, &owned);
        cmp = mf_value_cmp(&m->val, &cv);
        if (owned)
            bson_value_destroy(&cv);
        if ((m->op == OP_MIN && cmp < 0) || (m->op == OP_MAX && cmp > 0))
            node_set(t, &m->val, false);
        return 0;
    }
    case OP_CURRENTDATE: {
        bson_value_t dv;
        struct timeval tv;
        gettimeofday(&tv, NULL);
        if (m->timestamp) {
            /* The server's clock; without one (a caller that set none), the second and increment 1. */
            uint64_t ts = c->u->tick != NULL ? c->u->tick(c->u->tick_arg) : (uint64_t)tv.tv_sec << 32 | 1;
            dv.value_type = BSON_TYPE_TIMESTAMP;
            dv.value.v_timestamp.timestamp = (uint32_t)(ts >> 32);
            dv.value.v_timestamp.increment = (uint32_t)ts;
        } else {
            dv.value_type = BSON_TYPE_DATE_TIME;
            dv.value.v_datetime = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
        }
        if (t)
            node_set(t, &dv, false);
        else
            return slot_create(c, cur, curname, key, node_new_value(&dv, false));
        return 0;
    }
    case OP_PUSH:
    case OP_ADDTOSET: {
        if (t == NULL) {
            t = node_new_container(true);
            if (slot_create(c, cur, curname, key, t) < 0)
                return -1;
        } else if (!node_is_array(t)) {
            if (m->op == OP_ADDTOSET)
                return mf_err_set(c->err, MF_E_BadValue,
                                  "Cannot apply $addToSet to non-array field. Field named '%s' has non-array type %s",
                                  key, mf_type_name(node_type(t)));
            return mf_err_set(c->err, MF_E_BadValue,
                              "The field '%s' must be an array but is of type %s in document {%s}", key,
                              mf_type_name(node_type(t)), ctx_id(c));
        }
        node_expand(t);
        if (m->op == OP_ADDTOSET) {
            for (size_t i = 0; i < m->neach; i++)
                if (!array_contains(t, &m->each[i]))
                    node_push(t, NULL, node_new_value(&m->each[i], false));
            return 0;
        }
        {
            size_t pos = t->n;
            if (m->has_position) {
                uint64_t back = (uint64_t)0 - (uint64_t)m->position; /* |position|, INT64_MIN included */
                if (m->position < 0)
                    pos = back >= t->n ? 0 : t->n - (size_t)back;
                else if ((uint64_t)m->position < t->n)
                    pos = (size_t)m->position;
            }
            for (size_t i = 0; i < m->neach; i++)
                node_insert(t, pos + i, node_new_value(&m->each[i], false));
        }
        if (m->sort_kind != 0)
            push_sort(t, m);
        if (m->has_slice) {
            if (m->slice >= 0) {
                while ((int64_t)t->n > m->slice)
                    node_remove(t, t->n - 1);
            } else {
                uint64_t keep = (uint64_t)0 - (uint64_t)m->slice; /* |slice|, INT64_MIN included */
                while ((uint64_t)t->n > keep)
                    node_remove(t, 0);
            }
        }
        return 0;
    }
    case OP_PULL:
    case OP_PULLALL:
        if (t == NULL)
            return 0;
        if (!node_is_array(t))
            return mf_err_set(c->err, MF_E_BadValue, "Cannot apply %s to a non-array value", m->opname);
        node_expand(t);
        for (size_t i = t->n; i-- > 0;) {
            bson_value_t kv;
            bool owned, hit;
            node_value(t->kids[i], &kv, &owned);
            hit = pull_matches(m, &kv);
            if (owned)
                bson_value_destroy(&kv);
            if (hit)
                node_remove(t, i);
        }
        return 0;
    case OP_POP:
        if (t == NULL)
            return 0;
        if (!node_is_array(t))
            return mf_err_set(c->err, MF_E_TypeMismatch, "Path '%s' contains an element of non-array type '%s'",
                              m->path.path, mf_type_name(node_type(t)));
        node_expand(t);
        if (t->n > 0)
            node_remove(t, m->pop > 0 ? t->n - 1 : 0);
        return 0;
    case OP_RENAME:
        return 0; /* handled by apply_rename */
    }
    return 0;
}

static int walk(actx_t *c, const mod_t *m, const path_t *p, size_t i, node_t *cur, const char *curname);

static bool
has_array_comp(const path_t *p, size_t from)
{
    for (size_t i = from; i < p->n; i++)
        if (p->comps[i].kind == C_ALL || p->comps[i].kind == C_FILTER)
            return true;
    return false;
}

static char *
path_prefix_str(const path_t *p, size_t upto)
{
    bson_string_t *s = bson_string_new("");
    for (size_t i = 0; i <= upto && i < p->n; i++) {
        if (i)
            bson_string_append_c(s, '.');
        bson_string_append(s, p->comps[i].name);
    }
    return bson_string_free(s, false);
}

/* descend: moves from container cur into its child at key and continues the walk at component i + 1. */
static int
descend(actx_t *c, const mod_t *m, const path_t *p, size_t i, node_t *cur, const char *curname, const char *key)
{
    node_t **slot = slot_find(cur, key);
    const comp_t *next = &p->comps[i + 1];

    /*
     * mongod checks for the query's match when it applies the object node
     * holding "$", before it looks at what the document has there (so an
     * upsert's {a: 2} fails this way rather than with 28).
     */
    if (next->kind == C_POS && c->array_pos < 0)
        return mf_err_set(c->err, MF_E_BadValue,
                          "The positional operator did not find the match needed from the query.");
    if (slot == NULL) {
        node_t *child;
        if (has_array_comp(p, i + 1)) {
            char *pre = path_prefix_str(p, i);
            mf_err_set(c->err, MF_E_BadValue,
                       "The path '%s' must exist in the document in order to apply array updates.", pre);
            bson_free(pre);
            return -1;
        }
        if (!op_creates(m->op))
            return 0;
        if (m->op == OP_SETONINSERT && !c->is_insert)
            return 0;
        child = node_new_container(false);
        if (slot_create(c, cur, curname, key, child) < 0)
            return -1;
        return walk(c, m, p, i + 1, child, key);
    }
    if (!node_is_container(*slot)) {
        if (next->kind == C_ALL || next->kind == C_FILTER) {
            char *s = node_fmt(*slot);
            mf_err_set(c->err, MF_E_BadValue, "Cannot apply array updates to non-array element %s: %s", key, s);
            bson_free(s);
            return -1;
        }
        if (!op_creates(m->op) || (m->op == OP_SETONINSERT && !c->is_insert))
            return 0;
        {
            char *s = node_fmt(*slot);
            mf_err_set(c->err, MF_E_PathNotViable, "Cannot create field '%s' in element {%s: %s}",
                       next->kind == C_POS ? "$" : next->name, key, s);
            bson_free(s);
            return -1;
        }
    }
    node_expand(*slot);
    return walk(c, m, p, i + 1, *slot, key);
}

/* filter_match_value: whether array element value v passes filter f (v as the filter's identifier field). */
static bool
filter_match_value(const afilter_t *f, const bson_value_t *v)
{
    bson_t w = BSON_INITIALIZER;
    bson_value_t wv;
    bool r;

    mf_bson_append_value(&w, f->name, -1, v);
    wv.value_type = BSON_TYPE_DOCUMENT;
    wv.value.v_doc.data = (uint8_t *)bson_get_data(&w);
    wv.value.v_doc.data_len = w.len;
    r = mf_matcher_match_value(f->m, &wv);
    bson_destroy(&w);
    return r;
}

/*
 * filter_match: whether array element el passes f, judged on the element's
 * value before this update (see node_t.orig) so that one mod's change
 * cannot make another's filter match.
 */
static bool
filter_match(const afilter_t *f, const node_t *el)
{
    bson_value_t v;
    bool owned, r;

    if (el->orig.value_type != BSON_TYPE_EOD)
        return filter_match_value(f, &el->orig);
    node_value(el, &v, &owned);
    r = filter_match_value(f, &v);
    if (owned)
        bson_value_destroy(&v);
    return r;
}

/* ------------------------------------------------------------------------ */
/*
 * Conflicts found when applying. mongod keeps the update as a tree whose
 * inner nodes are object nodes (children by field name, plus one for "$")
 * and array nodes (children by arrayFilters identifier, "" for "$[]"). Two
 * children that reach the same place in the document are merged when
 * applied: "$" with the field the query matched (a.$ and a.1 when $ is 1),
 * and the identifiers whose filters an array element passes (a.$[x] and
 * a.$[y], or a.$[] and anything). Merging two leaves, a leaf with an inner
 * node, or an object node with an array node fails with 40
 * ConflictingUpdateOperators "Update created a conflict at '<path>'"; merging
 * two inner nodes merges their same-named children the same way, the path
 * naming them as written ("a.0.b.$[k].c").
 *
 * The mods here are applied one after another, so these merges are checked
 * first, over the document as it was: dyn_visit walks the tree's levels with
 * the mods (their paths) that share a node, and merge_check checks a merge.
 * Filters are judged on the unchanged document, as mongod does.
 */

/* where_join: "where.part" (or part alone at the root), newly allocated. */
static char *
where_join(const char *where, const char *part, size_t partlen)
{
    size_t wl = strlen(where);
    char *s = mf_malloc(wl + partlen + 2);

    memcpy(s, where, wl);
    if (wl)
        s[wl++] = '.';
    memcpy(s + wl, part, partlen);
    s[wl + partlen] = '\0';
    return s;
}

/* group_of: the paths of ps whose component i is named name, into out (capacity np); returns how many. */
static size_t
group_of(const path_t **ps, size_t np, size_t i, const char *name, const path_t **out)
{
    size_t k = 0;

    for (size_t j = 0; j < np; j++)
        if (strcmp(ps[j]->comps[i].name, name) == 0)
            out[k++] = ps[j];
    return k;
}

/*
 * first_of: true if ps[j] is the first of ps with its component i's name,
 * so iterating j over first_of visits each distinct child once.
 */
static bool
first_of(const path_t **ps, size_t j, size_t i)
{
    for (size_t k = 0; k < j; k++)
        if (strcmp(ps[k]->comps[i].name, ps[j]->comps[i].name) == 0)
            return false;
    return true;
}

/*
 * merge_check: merging the nodes for component i of the paths in a and of
 * those in b, at where (see above). Returns 0, or -1 with err.
 */
static int
merge_check(const path_t **a, size_t na, const path_t **b, size_t nb, size_t i, const char *where, mf_error_t *err)
{
    const path_t **ga = NULL, **gb = NULL;
    char *sub = NULL;
    int rc = 0;

    for (size_t j = 0; j < na + nb; j++) {
        const path_t *p = j < na ? a[j] : b[j - na];
        if (p->n == i + 1)
            return mf_err_set(err, MF_E_ConflictingUpdateOperators, "Update created a conflict at '%s'", where);
    }
    if (comp_is_array(&a[0]->comps[i + 1]) != comp_is_array(&b[0]->comps[i + 1]))
        return mf_err_set(err, MF_E_ConflictingUpdateOperators, "Update created a conflict at '%s'", where);
    ga = mf_malloc(na * sizeof(*ga));
    gb = mf_malloc(nb * sizeof(*gb));
    for (size_t j = 0; j < na && rc == 0; j++) {
        const char *name = a[j]->comps[i + 1].name;
        size_t ka, kb;

        if (!first_of(a, j, i + 1))
            continue;
        kb = group_of(b, nb, i + 1, name, gb);
        if (kb == 0)
            continue;
        ka = group_of(a, na, i + 1, name, ga);
        sub = where_join(where, name, strlen(name));
        rc = merge_check(ga, ka, gb, kb, i + 1, sub, err);
        free(sub);
    }
    free(ga);
    free(gb);
    return rc;
}

/* child_value: the field (or array element) key of container v, or NULL. */
static const bson_value_t *
child_value(const bson_value_t *v, const char *key, bson_iter_t *it)
{
    if (v == NULL || (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY))
        return NULL;
    if (!bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_find(it, key))
        return NULL;
    return bson_iter_value(it);
}

/* ident_cmp: mongod's order of an array node's children: by identifier, "" ("$[]") first. */
static int
ident_cmp(const comp_t *a, const comp_t *b)
{
    size_t al = strlen(a->name) - 3, bl = strlen(b->name) - 3;
    int c = memcmp(a->name + 2, b->name + 2, al < bl ? al : bl);

    return c != 0 ? c : al < bl ? -1 : al > bl;
}

/*
 * dyn_visit: the node at where (v the document's value there, NULL when
 * missing) shared by the paths ps, all longer than i; component i names its
 * children. Returns 0, or -1 with err.
 */
static int
dyn_visit(actx_t *c, const path_t **ps, size_t np, size_t i, const bson_value_t *v, const char *where)
{
    const path_t **grp, **sub;
    char *next = NULL;
    char buf[24];
    bson_iter_t it;
    int rc = 0;

    /* Past the deepest nesting a stored document has, nothing is there to conflict: walk reports the path. */
    if (i >= MF_MAX_STORED_DEPTH)
        return 0;
    grp = mf_malloc(np * sizeof(*grp));
    sub = mf_malloc(np * sizeof(*sub));
    if (!comp_is_array(&ps[0]->comps[i])) {
        /* An object node: each child once; "$" merged into the field the query matched. */
        size_t npos = group_of(ps, np, i, "$", sub);

        if (npos > 0 && c->array_pos < 0)
            goto done; /* applying reports mongod's error */
        snprintf(buf, sizeof(buf), "%d", c->array_pos);
        for (size_t j = 0; j < np && rc == 0; j++) {
            const char *name = ps[j]->comps[i].name;
            const char *key = name;
            size_t k, ns = 0;

            if (!first_of(ps, j, i))
                continue;
            if (ps[j]->comps[i].kind == C_POS) {
                if (group_of(ps, np, i, buf, grp) > 0)
                    continue; /* taken with the field it names */
                key = buf;
            }
            k = group_of(ps, np, i, name, grp);
            next = where_join(where, key, strlen(key));
            if (npos > 0 && ps[j]->comps[i].kind != C_POS && strcmp(name, buf) == 0) {
                const path_t **pos = mf_malloc(np * sizeof(*pos));
                size_t kp = group_of(ps, np, i, "$", pos);
                rc = merge_check(pos, kp, grp, k, i, next, c->err);
                memcpy(grp + k, pos, kp * sizeof(*pos));
                k += kp;
                free(pos);
            }
            for (size_t g = 0; g < k; g++)
                if (grp[g]->n > i + 1)
                    sub[ns++] = grp[g];
            if (rc == 0 && ns > 0)
                rc = dyn_visit(c, sub, ns, i + 1, child_value(v, key, &it), next);
            free(next);
            next = NULL;
        }
        goto done;
    }

    /* An array node: per element, the children whose filters it passes, merged in identifier order. */
    if (v == NULL || v->value_type != BSON_TYPE_ARRAY ||
        !bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        goto done; /* applying reports mongod's error */
    while (rc == 0 && bson_iter_next(&it)) {
        const bson_value_t *el = bson_iter_value(&it);
        const comp_t *prev = NULL;
        size_t nacc = 0, ns = 0;

        next = where_join(where, bson_iter_key(&it), strlen(bson_iter_key(&it)));
        for (;;) {
            /* The next identifier after prev, in order, that el passes. */
            const comp_t *best = NULL;
            size_t k;

            for (size_t j = 0; j < np; j++) {
                const comp_t *cp = &ps[j]->comps[i];
                if ((prev && ident_cmp(cp, prev) <= 0) || (best && ident_cmp(cp, best) >= 0))
                    continue;
                if (cp->kind == C_FILTER && !filter_match_value(&c->u->filters[cp->filter], el))
                    continue;
                best = cp;
            }
            if (best == NULL)
                break;
            k = group_of(ps, np, i, best->name, grp + nacc);
            if (nacc > 0 && (rc = merge_check(grp, nacc, grp + nacc, k, i, next, c->err)) < 0)
                break;
            nacc += k;
            prev = best;
        }
        for (size_t g = 0; g < nacc; g++)
            if (grp[g]->n > i + 1)
                sub[ns++] = grp[g];
        if (rc == 0 && ns > 0)
            rc = dyn_visit(c, sub, ns, i + 1, el, next);
        free(next);
        next = NULL;
    }

done:
    free(next);
    free(grp);
    free(sub);
    return rc;
}

/*
 * shares_root_with_dynamic: whether some dynamic mod path of u starts with
 * p's first field (only such paths can meet a dynamic one).
 */
static bool
shares_root_with_dynamic(const mf_update_t *u, const path_t *p)
{
    for (size_t i = 0; i < u->nmods; i++)
        if (path_is_dynamic(&u->mods[i].path) && strcmp(u->mods[i].path.comps[0].name, p->comps[0].name) == 0)
            return true;
    return false;
}

/*
 * check_apply_conflicts: the merges above for u over doc. Static paths were
 * checked when parsed, so only the subtrees holding a "$", "$[]" or "$[id]"
 * path are visited.
 */
static int
check_apply_conflicts(actx_t *c, const bson_t *doc)
{
    const mf_update_t *u = c->u;
    const path_t **ps = mf_malloc((2 * u->nmods + 1) * sizeof(*ps));
    bson_value_t dv;
    size_t np = 0;
    int rc = 0;

    for (size_t i = 0; i < u->nmods; i++) {
        const mod_t *m = &u->mods[i];
        if (shares_root_with_dynamic(u, &m->path))
            ps[np++] = &m->path;
        if (m->op == OP_RENAME && shares_root_with_dynamic(u, &m->from))
            ps[np++] = &m->from;
    }
    if (np > 0) {
        dv.value_type = BSON_TYPE_DOCUMENT;
        dv.value.v_doc.data = (uint8_t *)bson_get_data(doc);
        dv.value.v_doc.data_len = doc->len;
        rc = dyn_visit(c, ps, np, 0, &dv, "");
    }
    free(ps);
    return rc;
}

/* walk: applies m's path component i within the (expanded) container cur. */
static int
walk(actx_t *c, const mod_t *m, const path_t *p, size_t i, node_t *cur, const char *curname)
{
    const comp_t *cp = &p->comps[i];
    bool last = i + 1 == p->n;
    char buf[24];
    const char *key = cp->name;

    /*
     * No document nests deeper than a stored one may (MF_MAX_STORED_DEPTH):
     * a path going further can only create what the write refuses, or find
     * nothing. Stopped here, so that a path of 200,000 components does not
     * recurse 200,000 levels (it overflowed the worker's stack).
     */
    if (i >= MF_MAX_STORED_DEPTH) {
        if (!op_creates(m->op) || (m->op == OP_SETONINSERT && !c->is_insert))
            return 0;
        return mf_err_set(c->err, MF_E_Overflow, "Document exceeds maximum nesting depth of %d", MF_MAX_STORED_DEPTH);
    }

    if (cp->kind == C_ALL || cp->kind == C_FILTER) {
        if (!cur->is_array) {
            char *s = node_fmt(cur);
            mf_err_set(c->err, MF_E_BadValue, "Cannot apply array updates to non-array element %s: %s",
                       curname ? curname : "", s);
            bson_free(s);
            return -1;
        }
        for (size_t j = 0; j < cur->n; j++) {
            if (cp->kind == C_FILTER && !filter_match(&c->u->filters[cp->filter], cur->kids[j]))
                continue;
            snprintf(buf, sizeof(buf), "%zu", j);
            if ((last ? leaf(c, m, cur, curname, buf) : descend(c, m, p, i, cur, curname, buf)) < 0)
                return -1;
        }
        return 0;
    }
    if (cp->kind == C_POS) {
        if (c->array_pos < 0)
            return mf_err_set(c->err, MF_E_BadValue,
                              "The positional operator did not find the match needed from the query.");
        snprintf(buf, sizeof(buf), "%d", c->array_pos);
        key = buf;
    }
    if (last)
        return leaf(c, m, cur, curname, key);
    if (cur->is_array && slot_find(cur, key) == NULL && !is_index(key, &(size_t){0})) {
        /* A named field inside an array: creating ops fail, the others do nothing. */
        if (!op_creates(m->op) || (m->op == OP_SETONINSERT && !c->is_insert))
            return 0;
        {
            char *s = node_fmt(cur);
            mf_err_set(c->err, MF_E_PathNotViable, "Cannot create field '%s' in element {%s: %s}", key,
                       curname ? curname : "", s);
            bson_free(s);
            return -1;
        }
    }
    return descend(c, m, p, i, cur, curname, key);
}

/*
 * find_plain: finds the $rename source (or destination) p in root; parent
 * and idx locate it. Returns 1 when found, 0 when missing, -1 with err set.
 * The source is looked up as mongod's findLongestPrefix: a scalar met with
 * parts left, or an array met with a part that is not an index, is 28
 * PathNotViable ("cannot use the part (a of a.b) to traverse the element
 * ({a: 5})": mongod names the part that cannot be traversed); an array passed by its index is followed, and if the source
 * is found under it, that is 2 BadValue (a source inside an array). The
 * destination may not pass an array at all (2 BadValue).
 */
static int
find_plain(actx_t *c, node_t *root, const path_t *p, bool source, node_t **parent, size_t *idx)
{
    node_t *cur = root;
    const char *array_name = NULL; /* the innermost array the source path passed */
    size_t ai;

    for (size_t i = 0; i < p->n; i++) {
        node_t **slot;
        if (cur->is_array && !(source && is_index(p->comps[i].name, &ai))) {
            if (source) {
                char *v = node_fmt(cur);
                mf_err_set(c->err, MF_E_PathNotViable, "cannot use the part (%s of %s) to traverse the element ({%s: %s})",
                           p->comps[i - 1].name, p->path, p->comps[i - 1].name, v);
                bson_free(v);
                return -1;
            }
            char *pre = path_prefix_str(p, i);
            char *arr = path_prefix_str(p, i - 1);
            mf_err_set(c->err, MF_E_BadValue,
                       "The destination field cannot be an array element, '%s' in doc with %s has an array field called '%s'",
                       pre, ctx_id(c), arr);
            bson_free(pre);
            bson_free(arr);
            return -1;
        }
        if (cur->is_array)
            array_name = p->comps[i - 1].name;
        slot = slot_find(cur, p->comps[i].name);
        if (slot == NULL)
            return 0;
        if (i + 1 == p->n) {
            if (array_name != NULL)
                return mf_err_set(c->err, MF_E_BadValue,
                                  "The source field cannot be an array element, '%s' in doc with %s has an array field "
                                  "called '%s'",
                                  p->path, ctx_id(c), array_name);
            *parent = cur;
            *idx = (size_t)(slot - cur->kids);
            return 1;
        }
        if (!node_is_container(*slot)) {
            if (!source)
                return 0;
            char *v = node_fmt(*slot);
            mf_err_set(c->err, MF_E_PathNotViable, "cannot use the part (%s of %s) to traverse the element ({%s: %s})",
                       p->comps[i].name, p->path, p->comps[i].name, v);
            bson_free(v);
            return -1;
        }
        node_expand(*slot);
        cur = *slot;
    }
    return 0;
}

/*
 * _id is immutable. mongod checks it in each modifier node as the node
 * applies (ModifierNode::applyToExistingElement / applyToNonexistentElement,
 * RenameNode::apply), against the document as the earlier nodes left it, so
 * the checks here run per mod, before and after it:
 *  - a mod that changes an element at or under an existing _id (by bytes:
 *    $set of 1.0 over 1 changes it) fails with "Performing an update on the
 *    path '<path>' would modify the immutable field '_id'";
 *  - a mod that creates a path under an existing _id fails with "Updating the
 *    path '<the part that existed>' to <that element after the mod> would
 *    modify the immutable field '_id'";
 *  - $rename's $set to a destination under an existing _id fails as above
 *    even when it writes the same value (SetElementNode has no no-op check),
 *    and its $unset of a source under _id fails with "Performing an update on
 *    the path '<source>'".
 * A document without _id (an upsert's seed without one) may get one; once
 * a mod has created it, later mods see it as existing.
 */
typedef struct {
    bool has;           /* _id existed before the mod */
    bson_value_t v;     /* its value then (owned) */
    size_t depth;       /* how many leading components of the path existed */
    bool dynamic;       /* the path meets "$[]" / "$[name]" (or "$" without a match) before depth stops */
} id_guard_t;

/*
 * id_comp_key: component i of p as a key, "$" resolved to the query's array
 * position (written into buf); NULL for "$[]", "$[name]" or an unmatched "$".
 */
static const char *
id_comp_key(const actx_t *c, const path_t *p, size_t i, char *buf, size_t cap)
{
    if (p->comps[i].kind == C_POS && c->array_pos >= 0) {
        snprintf(buf, cap, "%d", c->array_pos);
        return buf;
    }
    return p->comps[i].kind == C_FIELD ? p->comps[i].name : NULL;
}

/* id_lookup: the node at the first depth components of p (counted into *depth as far as they exist). */
static node_t *
id_lookup(actx_t *c, node_t *root, const path_t *p, size_t *depth, bool *dynamic)
{
    node_t *cur = root;
    char buf[24];

    *depth = 0;
    *dynamic = false;
    for (size_t i = 0; i < p->n; i++) {
        const char *key = id_comp_key(c, p, i, buf, sizeof(buf));
        node_t **slot;
        if (key == NULL) {
            *dynamic = true;
            break;
        }
        if (!node_is_container(cur))
            break;
        node_expand(cur);
        slot = slot_find(cur, key);
        if (slot == NULL)
            break;
        cur = *slot;
        (*depth)++;
    }
    return cur;
}

static void
id_guard_begin(actx_t *c, node_t *root, const path_t *p, id_guard_t *g)
{
    node_t **slot = slot_find(root, "_id");
    bson_value_t v;
    bool owned;

    memset(g, 0, sizeof(*g));
    g->has = slot != NULL;
    if (!g->has)
        return;
    node_value(*slot, &v, &owned);
    if (owned)
        g->v = v;
    else
        bson_value_copy(&v, &g->v);
    id_lookup(c, root, p, &g->depth, &g->dynamic);
}

static void
id_guard_end(id_guard_t *g)
{
    if (g->has)
        bson_value_destroy(&g->v);
    memset(g, 0, sizeof(*g));
}

/* same_bytes: a and b have one type and one encoding (mongod's binaryEqualValues). */
static bool
same_bytes(const bson_value_t *a, const bson_value_t *b)
{
    bson_t x = BSON_INITIALIZER, y = BSON_INITIALIZER;
    bool same;

    mf_bson_append_value(&x, "", 0, a);
    mf_bson_append_value(&y, "", 0, b);
    same = x.len == y.len && memcmp(bson_get_data(&x), bson_get_data(&y), x.len) == 0;
    bson_destroy(&x);
    bson_destroy(&y);
    return same;
}

/*
 * id_guard_fail: the error for a mod on p that modified _id, g taken before
 * it. The path existed whole: "Performing an update on the path"; else the
 * part that existed is named with its element as it is now.
 */
static int
id_guard_fail(actx_t *c, node_t *root, const path_t *p, const id_guard_t *g)
{
    path_t existed = *p;
    size_t depth;
    bool dynamic;
    const char *name;
    char *s, buf[24];

    if (g->dynamic)
        return mf_err_set(c->err, MF_E_ImmutableField,
                          "Performing an update on the path '%s' would modify the immutable field '_id'", p->path);
    /* The components that existed before the mod, "$" resolved: built only here, for the message. */
    bson_string_t *taken = bson_string_new("");
    for (size_t i = 0; i < g->depth; i++) {
        if (i)
            bson_string_append_c(taken, '.');
        bson_string_append(taken, id_comp_key(c, p, i, buf, sizeof(buf))); /* resolvable: id_lookup counted it */
    }
    if (g->depth == p->n) {
        mf_err_set(c->err, MF_E_ImmutableField,
                   "Performing an update on the path '%s' would modify the immutable field '_id'", taken->str);
        bson_string_free(taken, true);
        return -1;
    }
    existed.n = g->depth;
    s = node_fmt(id_lookup(c, root, &existed, &depth, &dynamic));
    name = strrchr(taken->str, '.');
    mf_err_set(c->err, MF_E_ImmutableField, "Updating the path '%s' to %s: %s would modify the immutable field '_id'",
               taken->str, name != NULL ? name + 1 : taken->str, s);
    bson_free(s);
    bson_string_free(taken, true);
    return -1;
}

/* id_guard_check: after a mod on p (other than $rename): fails when it changed _id (see id_guard_t). */
static int
id_guard_check(actx_t *c, node_t *root, const path_t *p, const id_guard_t *g)
{
    node_t **slot;
    bson_value_t v;
    bool owned, same;

    if (!g->has)
        return 0;
    slot = slot_find(root, "_id");
    if (slot != NULL) {
        node_value(*slot, &v, &owned);
        same = same_bytes(&g->v, &v);
        if (owned)
            bson_value_destroy(&v);
        if (same)
            return 0;
    }
    return id_guard_fail(c, root, p, g);
}

/*
 * apply_rename: mongod's RenameNode: a $set of the source's value at the
 * destination, then an $unset of the source, each checked against _id as
 * it applies (see id_guard_t).
 */
static int
apply_rename(actx_t *c, const mod_t *m, node_t *root)
{
    node_t *parent, *dparent;
    size_t idx, didx;
    int r = find_plain(c, root, &m->from, true, &parent, &idx);
    mod_t setm;
    bson_value_t v;
    bool owned;
    bool dest_id = strcmp(m->path.comps[0].name, "_id") == 0;
    id_guard_t g = {0};

    if (r <= 0)
        return r;
    if (find_plain(c, root, &m->path, false, &dparent, &didx) < 0)
        return -1;
    node_value(parent->kids[idx], &v, &owned);
    if (!owned) {
        bson_value_t copy;
        bson_value_copy(&v, &copy);
        v = copy;
    }
    memset(&setm, 0, sizeof(setm));
    setm.op = OP_SET;
    setm.opname = "$rename";
    setm.path = m->path;
    setm.val = v;
    setm.copy_val = true;
    if (dest_id)
        id_guard_begin(c, root, &m->path, &g);
    r = walk(c, &setm, &m->path, 0, root, NULL);
    bson_value_destroy(&v);
    /* The $set's check: no no-op exemption, the value may be the same. */
    if (r == 0 && g.has)
        r = id_guard_fail(c, root, &m->path, &g);
    id_guard_end(&g);
    if (r < 0)
        return r;
    /* Found again: the $set may have reallocated the children of the source's parent (its index stays). */
    r = find_plain(c, root, &m->from, true, &parent, &idx);
    if (r < 0)
        return -1;
    if (r > 0)
        node_remove(parent, idx);
    if (strcmp(m->from.comps[0].name, "_id") == 0)
        return mf_err_set(c->err, MF_E_ImmutableField,
                          "Performing an update on the path '%s' would modify the immutable field '_id'", m->from.path);
    return 0;
}

static bool
id_value(const bson_t *doc, bson_value_t *out)
{
    bson_iter_t it;

    if (!bson_iter_init_find(&it, doc, "_id"))
        return false;
    *out = *bson_iter_value(&it);
    return true;
}

/* copy_id_first: writes src into dst with its _id (if any) first. */
static void
copy_id_first(const bson_t *src, bson_t *dst)
{
    bson_iter_t it;
    bson_value_t id;

    if (id_value(src, &id))
        mf_bson_append_value(dst, "_id", 3, &id);
    bson_iter_init(&it, src);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            mf_bson_append_value(dst, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
}

/*
 * apply_replacement: mongod's ObjectReplaceExecutor::applyReplacementUpdate
 * for _id. An update (not an upsert's insert) validates the result for
 * storage first: an array, regex or undefined _id is 53. Then the immutable
 * _id: an array is 54 (an upsert's insert gets here with it), a value that
 * compares unequal to the old one is 66 (1.0 for 1 passes, and is stored).
 */
static int
apply_replacement(const mf_update_t *u, const bson_t *doc, bool is_insert, bson_t *out, mf_error_t *err)
{
    bson_value_t oid, nid;
    bool has_old = id_value(doc, &oid), has_new = id_value(u->repl, &nid);
    bson_iter_t it;

    if (has_new && !is_insert && mf_check_id_storable(&nid, err) != 0)
        return -1;
    if (has_new && nid.value_type == BSON_TYPE_ARRAY)
        return mf_err_set(err, MF_E_NotSingleValueField,
                          "After applying the update to the document, the (immutable) field '_id' was found to be an "
                          "array or array descendant.");
    if (has_old && has_new && !mf_value_equal(&oid, &nid)) {
        bson_string_t *s = bson_string_new("");
        fmt_value(s, &nid);
        mf_err_set(err, MF_E_ImmutableField,
                   "After applying the update, the (immutable) field '_id' was found to have been altered to _id: %s",
                   s->str);
        bson_string_free(s, true);
        return -1;
    }
    /* The replacement's own _id when it has one (equal, perhaps of another type: 5.0 for 5), as mongod stores it. */
    if (has_new)
        mf_bson_append_value(out, "_id", 3, &nid);
    else if (has_old)
        mf_bson_append_value(out, "_id", 3, &oid);
    bson_iter_init(&it, u->repl);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            mf_bson_append_value(out, bson_iter_key(&it), (int)bson_iter_key_len(&it), bson_iter_value(&it));
    return 0;
}

int
mf_update_apply(const mf_update_t *u, const bson_t *doc, const mf_match_details_t *details, bool is_insert,
                bson_t *out, bool *changed, mf_error_t *err)
{
    actx_t c;
    node_t *root;
    bson_t tmp = BSON_INITIALIZER;
    bson_value_t nid, dv;
    bool has_new;
    int rc = 0;

    if (changed)
        *changed = false;
    if (u->replacement) {
        if (apply_replacement(u, doc, is_insert, &tmp, err) < 0) {
            bson_destroy(&tmp);
            return -1;
        }
        goto done;
    }

    memset(&c, 0, sizeof(c));
    c.u = u;
    c.doc = doc;
    c.array_pos = details ? details->array_pos : -1;
    c.is_insert = is_insert;
    c.err = err;

    dv.value_type = BSON_TYPE_DOCUMENT;
    dv.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    dv.value.v_doc.data_len = doc->len;
    root = node_new_value(&dv, false);
    node_expand(root);

    rc = check_apply_conflicts(&c, doc);
    for (size_t i = 0; i < u->nmods && rc == 0; i++) {
        const mod_t *m = &u->mods[i];
        if (m->op == OP_SETONINSERT && !is_insert)
            continue;
        if (m->op == OP_RENAME) {
            rc = apply_rename(&c, m, root);
        } else if (strcmp(m->path.comps[0].name, "_id") == 0) {
            id_guard_t g;
            id_guard_begin(&c, root, &m->path, &g);
            rc = walk(&c, m, &m->path, 0, root, NULL);
            if (rc == 0)
                rc = id_guard_check(&c, root, &m->path, &g);
            id_guard_end(&g);
        } else {
            rc = walk(&c, m, &m->path, 0, root, NULL);
        }
    }
    if (rc == 0)
        node_write_kids(&tmp, root);
    node_free(root);
    if (rc < 0) {
        bson_free(c.idstr);
        bson_destroy(&tmp);
        return -1;
    }

    has_new = id_value(&tmp, &nid);
    bson_free(c.idstr);
    if (has_new && nid.value_type == BSON_TYPE_ARRAY) {
        bson_destroy(&tmp);
        return mf_err_set(err, MF_E_InvalidIdField, "The '_id' value cannot be of type array");
    }
    if (is_insert && has_new) {
        bson_iter_t it;
        if (bson_iter_init(&it, &tmp) && bson_iter_next(&it) && strcmp(bson_iter_key(&it), "_id") != 0) {
            bson_t re = BSON_INITIALIZER;
            copy_id_first(&tmp, &re);
            bson_destroy(&tmp);
            tmp = re;
        }
    }

done:
    if (changed)
        *changed = !(tmp.len == doc->len && memcmp(bson_get_data(&tmp), bson_get_data(doc), tmp.len) == 0);
    bson_concat(out, &tmp);
    bson_destroy(&tmp);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Upsert seed. */

typedef struct {
    node_t *root;
    char **paths;
    size_t n;
    bool id_only; /* a replacement's seed: _id alone */
} seed_t;

static int
seed_add(seed_t *s, const char *path, const bson_value_t *v, mf_error_t *err)
{
    node_t *cur = s->root;
    const char *p = path;

    for (size_t i = 0; i < s->n; i++) {
        size_t a = strlen(s->paths[i]), b = strlen(path);
        if (strcmp(s->paths[i], path) == 0)
            return mf_err_set(err, MF_E_NotSingleValueField,
                              "cannot infer query fields to set, path '%s' is matched twice", path);
        if ((a < b && strncmp(s->paths[i], path, a) == 0 && path[a] == '.') ||
            (b < a && strncmp(s->paths[i], path, b) == 0 && s->paths[i][b] == '.'))
            return mf_err_set(err, MF_E_NotSingleValueField,
                              "cannot infer query fields to set, both paths '%s' and '%s' are matched", path,
                              s->paths[i]);
    }
    /*
     * A path of more components than a stored document may nest could only
     * build a seed the write refuses (mf_check_doc_for_storage); refused
     * here, before one node per component (and the recursion that writes
     * them out) is made for a path of a million dots.
     */
    if (mf_path_components(path) > MF_MAX_STORED_DEPTH)
        return mf_err_set(err, MF_E_Overflow, "Document exceeds maximum nesting depth of %d", MF_MAX_STORED_DEPTH);
    s->paths = mf_realloc(s->paths, (s->n + 1) * sizeof(char *));
    s->paths[s->n++] = mf_strdup(path);

    for (;;) {
        const char *dot = strchr(p, '.');
        char *comp = dot ? mf_strndup(p, (size_t)(dot - p)) : mf_strdup(p);
        node_t **slot = slot_find(cur, comp);
        if (!dot) {
            if (slot) {
                node_set(*slot, v, true);
                free(comp);
            } else {
                node_push(cur, comp, node_new_value(v, true));
            }
            return 0;
        }
        if (slot == NULL) {
            node_t *child = node_new_container(false);
            node_push(cur, comp, child);
            cur = child;
        } else {
            free(comp);
            if (!node_is_container(*slot) || node_is_array(*slot))
                return mf_err_set(err, MF_E_NotSingleValueField,
                                  "cannot infer query fields to set, path '%s' is matched twice", path);
            node_expand(*slot);
            cur = *slot;
        }
        p = dot + 1;
    }
}

/*
 * seed_take: one equality of the query, into the seed. A replacement's seed
 * takes _id alone (mongod's UpdateDriver extracts only the immutable path
 * for a replacement), and an equality under _id ("_id.a") cannot build it:
 * 111, as mongod's pathsupport words it.
 */
static int
seed_take(seed_t *s, const char *path, const bson_value_t *v, mf_error_t *err)
{
    if (s->id_only && strncmp(path, "_id.", 4) == 0)
        return mf_err_set(err, MF_E_NotExactValueField,
                          "field at '_id' must be exactly specified, field at sub-path '%s'found", path);
    if (s->id_only && strcmp(path, "_id") != 0)
        return 0;
    return seed_add(s, path, v, err);
}

static int
seed_query(seed_t *s, const bson_t *q, mf_error_t *err)
{
    bson_iter_t it;

    if (!bson_iter_init(&it, q))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);

        if (k[0] == '$') {
            if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0) && v->value_type == BSON_TYPE_ARRAY) {
                bson_t arr, sub;
                bson_iter_t ai;
                bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len);
                if (strcmp(k, "$or") == 0 && bson_count_keys(&arr) != 1)
                    continue;
                bson_iter_init(&ai, &arr);
                while (bson_iter_next(&ai)) {
                    const bson_value_t *e = bson_iter_value(&ai);
                    if (e->value_type != BSON_TYPE_DOCUMENT)
                        continue;
                    bson_init_static(&sub, e->value.v_doc.data, e->value.v_doc.data_len);
                    if (seed_query(s, &sub, err) < 0)
                        return -1;
                }
            }
            continue;
        }
        if (v->value_type == BSON_TYPE_REGEX)
            continue;
        if (v->value_type == BSON_TYPE_DOCUMENT) {
            bson_t d;
            bson_iter_t di;
            bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len);
            if (bson_iter_init(&di, &d) && bson_iter_next(&di) && bson_iter_key(&di)[0] == '$') {
                bson_iter_init(&di, &d);
                while (bson_iter_next(&di)) {
                    const char *op = bson_iter_key(&di);
                    const bson_value_t *ov = bson_iter_value(&di);
                    if (strcmp(op, "$eq") == 0 && ov->value_type != BSON_TYPE_REGEX) {
                        if (seed_take(s, k, ov, err) < 0)
                            return -1;
                    } else if (strcmp(op, "$in") == 0 && ov->value_type == BSON_TYPE_ARRAY) {
                        bson_t arr;
                        bson_iter_t ai;
                        bson_init_static(&arr, ov->value.v_doc.data, ov->value.v_doc.data_len);
                        if (bson_count_keys(&arr) == 1 && bson_iter_init(&ai, &arr) && bson_iter_next(&ai) &&
                            !BSON_ITER_HOLDS_REGEX(&ai) && !BSON_ITER_HOLDS_ARRAY(&ai)) {
                            if (seed_take(s, k, bson_iter_value(&ai), err) < 0)
                                return -1;
                        }
                    } else if (strcmp(op, "$all") == 0 && ov->value_type == BSON_TYPE_ARRAY) {
                        /* mongod parses $all as an AND of equalities: each one seeds (a second is 54). */
                        bson_t arr;
                        bson_iter_t ai, ei;
                        bson_init_static(&arr, ov->value.v_doc.data, ov->value.v_doc.data_len);
                        bson_iter_init(&ai, &arr);
                        while (bson_iter_next(&ai)) {
                            if (BSON_ITER_HOLDS_REGEX(&ai) ||
                                (BSON_ITER_HOLDS_DOCUMENT(&ai) && bson_iter_recurse(&ai, &ei) && bson_iter_next(&ei) &&
                                 strcmp(bson_iter_key(&ei), "$elemMatch") == 0))
                                continue;
                            if (seed_take(s, k, bson_iter_value(&ai), err) < 0)
                                return -1;
                        }
                    }
                }
                continue;
            }
        }
        if (seed_take(s, k, v, err) < 0)
            return -1;
    }
    return 0;
}

int
mf_update_upsert_seed(const bson_t *query, bool id_only, bson_t *out, mf_error_t *err)
{
    seed_t s = {node_new_container(false), NULL, 0, id_only};
    int rc = query ? seed_query(&s, query, err) : 0;

    if (rc == 0) {
        bson_t tmp = BSON_INITIALIZER;
        node_write_kids(&tmp, s.root);
        copy_id_first(&tmp, out);
        bson_destroy(&tmp);
    }
    node_free(s.root);
    for (size_t i = 0; i < s.n; i++)
        free(s.paths[i]);
    free(s.paths);
    return rc;
}
