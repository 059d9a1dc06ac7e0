/*
 * index_wild.c: wildcard indexes ({"$**": 1}, {"a.b.$**": 1}, with an
 * optional wildcardProjection), as MongoDB 8.0's WildcardKeyGenerator.
 *
 * Key format. A wildcard index stores, per document, one key per leaf path
 * of the document after its projection: the keystring of [path, value],
 * the path a string (never collated, ascending) and the value encoded as
 * any index component (the index's collation, the pattern's direction),
 * followed by the record id like every non-unique index. Paths are dotted
 * field names only: an array adds no component (its elements' keys carry
 * the array's path, no positions), so {a: [{b: 1}, {b: 2}]} gives
 * ["a.b", 1] and ["a.b", 2]. Objects are descended into; an empty object
 * is a leaf ({}), an empty array too (undefined, as a regular index stores
 * it); an array directly inside an array is a leaf, the whole nested array
 * as the value (not descended). A field whose name holds a '.' is skipped
 * (no query path can reach it); an object holding only such fields is a
 * leaf {} here (mongod keys nothing for it), so that every path a document
 * has is the path, or the prefix, of one of its keys: what $exists: true
 * needs. mongod's extra multikey-metadata keys are not stored: the index's
 * multikey flag says whether any array was met.
 *
 * Projection. The index's projection decides which paths are indexed: the
 * subtree of "a.b.$**" is the inclusion {"a.b": 1}; "$**" takes its spec's
 * wildcardProjection (inclusion or exclusion, _id either way), or none.
 * _id (and its subpaths) is excluded unless the projection names it true.
 * Walking the document, each path is classified as INCLUDE (at or under an
 * included path, not excluded: all its leaves are keys), DESCEND (a strict
 * prefix of an included path: only objects and arrays are followed, as an
 * inclusion projection keeps only them there) or SKIP. What the projection
 * itself would leave behind is keyed as mongod keys the projected document:
 * an object all of whose fields are projected away becomes {} and an array
 * on a DESCEND path without documents becomes an empty array (undefined).
 *
 * Planner contract (mf_wildcard_covers): for a path P classified INCLUDE
 * with no positional ("0") or '$' component, every scalar a document holds
 * at P, directly or as an element of an array at P, is a key [P, value],
 * and a document that has P at all has a key whose path is P or starts
 * with "P.".
 * The planner (query/plan.c) bounds only such paths and only with scalar
 * operands, then re-checks every fetched document with the whole filter.
 *
 * Invariants: a mf_wildcard_t is immutable once built (it hangs off an
 * index's key pattern, which readers share under the catalog lock).
 */
#include "common/alloc.h"
#include "index/index.h"

#include <stdlib.h>
#include <string.h>

#include "doc/value.h"

struct mf_wildcard {
    char **inc; /* included paths (owned) */
    int ninc;
    char **exc; /* excluded paths (owned), "_id" unless projected */
    int nexc;
    bool inclusion; /* an inclusion projection: paths outside inc are skipped */
};

typedef enum { W_SKIP = 0, W_DESCEND, W_INCLUDE } wstate_t;

bool
mf_wildcard_field_name(const char *name)
{
    size_t n = strlen(name);
    return strcmp(name, "$**") == 0 || (n > 4 && strcmp(name + n - 4, ".$**") == 0);
}

void
mf_wildcard_free(struct mf_wildcard *w)
{
    if (w == NULL)
        return;
    for (int i = 0; i < w->ninc; i++)
        free(w->inc[i]);
    for (int i = 0; i < w->nexc; i++)
        free(w->exc[i]);
    free(w->inc);
    free(w->exc);
    free(w);
}

static void
list_add(char ***list, int *n, const char *path, size_t len)
{
    *list = mf_realloc(*list, (size_t)(*n + 1) * sizeof(**list));
    (*list)[*n] = mf_strndup(path, len);
    (*n)++;
}

/* Whether a is P or a prefix of P ending at a component boundary. */
static bool
prefix_or_equal(const char *a, const char *p, size_t plen)
{
    size_t alen = strlen(a);
    return alen <= plen && memcmp(a, p, alen) == 0 && (alen == plen || p[alen] == '.');
}

/* Whether P (plen bytes) is a strict prefix of a, ending at a component boundary. */
static bool
strict_prefix(const char *p, size_t plen, const char *a)
{
    return strlen(a) > plen && memcmp(a, p, plen) == 0 && a[plen] == '.';
}

static wstate_t
classify(const struct mf_wildcard *w, const char *p, size_t plen)
{
    for (int i = 0; i < w->nexc; i++)
        if (prefix_or_equal(w->exc[i], p, plen))
            return W_SKIP;
    if (!w->inclusion)
        return W_INCLUDE;
    for (int i = 0; i < w->ninc; i++)
        if (prefix_or_equal(w->inc[i], p, plen))
            return W_INCLUDE;
    for (int i = 0; i < w->ninc; i++)
        if (strict_prefix(p, plen, w->inc[i]))
            return W_DESCEND;
    return W_SKIP;
}

/* Adds proj's paths (nested documents flattened under prefix) to w; *id_given when _id is named. */
static void
add_projection(struct mf_wildcard *w, const uint8_t *data, uint32_t len, const char *prefix, bool *id_given)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        size_t plen = strlen(prefix), klen = strlen(k);
        char *path = mf_malloc(plen + klen + 2);
        memcpy(path, prefix, plen);
        if (plen)
            path[plen++] = '.';
        memcpy(path + plen, k, klen + 1);
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&it, &l, &d);
            add_projection(w, d, l, path, id_given);
        } else {
            bool in = bson_iter_as_bool(&it);
            if (strcmp(path, "_id") == 0 || strncmp(path, "_id.", 4) == 0)
                *id_given = true;
            if (in)
                list_add(&w->inc, &w->ninc, path, strlen(path));
            else
                list_add(&w->exc, &w->nexc, path, strlen(path));
        }
        free(path);
    }
}

int
mf_keypattern_set_wildcard_projection(mf_keypattern_t *kp, const bson_t *proj, mf_error_t *err)
{
    if (!kp->is_wildcard || kp->nfields != 2)
        return mf_err_set(err, MF_E_InternalError, "not a wildcard key pattern");
    struct mf_wildcard *w = mf_calloc(1, sizeof(*w));
    const char *field = kp->fields[1];
    bool id_given = false;
    if (strcmp(field, "$**") != 0) {
        /* "a.b.$**": the inclusion {"a.b": 1}. */
        size_t rlen = strlen(field) - 4;
        list_add(&w->inc, &w->ninc, field, rlen);
        id_given = prefix_or_equal("_id", field, rlen);
    } else if (proj != NULL) {
        add_projection(w, bson_get_data(proj), proj->len, "", &id_given);
    }
    /* An inclusion projection: any included path but _id, or _id alone with nothing excluded. */
    bool other_inc = false, other_exc = false;
    for (int i = 0; i < w->ninc; i++)
        other_inc = other_inc || !prefix_or_equal("_id", w->inc[i], strlen(w->inc[i]));
    for (int i = 0; i < w->nexc; i++)
        other_exc = other_exc || !prefix_or_equal("_id", w->exc[i], strlen(w->exc[i]));
    w->inclusion = other_inc || (w->ninc > 0 && !other_exc);
    if (!id_given)
        list_add(&w->exc, &w->nexc, "_id", 3); /* mongod's kExcludeId default */
    mf_wildcard_free(kp->wild);
    kp->wild = w;
    return 0;
}

bool
mf_wildcard_covers(const mf_keypattern_t *kp, const char *path)
{
    const char *p = path;
    if (!kp->is_wildcard || kp->wild == NULL || path[0] == '\0')
        return false;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t clen = dot ? (size_t)(dot - p) : strlen(p);
        bool digits = clen > 0;
        for (size_t i = 0; i < clen; i++)
            digits = digits && p[i] >= '0' && p[i] <= '9';
        if (clen == 0 || p[0] == '$' || digits)
            return false; /* empty, operator-like or positional components: never keyed as such */
        if (dot == NULL)
            break;
        p = dot + 1;
    }
    return classify(kp->wild, path, strlen(path)) == W_INCLUDE;
}

int
mf_wildcard_append_path(mf_keystring_t *ks, const char *path, mf_error_t *err)
{
    bson_value_t v = {.value_type = BSON_TYPE_UTF8};
    v.value.v_utf8.str = (char *)path;
    v.value.v_utf8.len = (uint32_t)strlen(path);
    return mf_ks_append_value(ks, &v, false, err);
}

/* The walk's state: the document path so far in a growing buffer. */
typedef struct wctx {
    const mf_keypattern_t *kp;
    mf_keyset_t *out;
    bool multikey;
    mf_error_t *err;
    char *path;
    size_t len, cap;
} wctx_t;

static void
path_push(wctx_t *w, const char *name, size_t nlen)
{
    size_t need = w->len + nlen + 2;
    if (need > w->cap) {
        w->cap = need * 2;
        w->path = mf_realloc(w->path, w->cap);
    }
    if (w->len > 0)
        w->path[w->len++] = '.';
    memcpy(w->path + w->len, name, nlen);
    w->len += nlen;
    w->path[w->len] = '\0';
}

static const bson_value_t undefined_value = {.value_type = BSON_TYPE_UNDEFINED};
static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

/* One key [current path, v]. */
static int
emit(wctx_t *w, const bson_value_t *v)
{
    mf_keystring_t *key = mf_keyset_push(w->out);
    if (mf_wildcard_append_path(key, w->path, w->err) != 0)
        return -1;
    return mf_index_append_component(key, v, w->kp->desc[1], w->kp->collation, w->err);
}

/* Whether array data holds a document element (what an inclusion projection keeps of it on a DESCEND path). */
static bool
array_has_doc(const uint8_t *data, uint32_t len)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len))
        return false;
    while (bson_iter_next(&it))
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            return true;
    return false;
}

/*
 * Whether the projection leaves nothing of the non-empty object data at
 * the current path (state st): every field skipped, or on a DESCEND path
 * neither included nor an object / array there.
 */
static bool
projects_empty(wctx_t *w, const uint8_t *data, uint32_t len, wstate_t st)
{
    bson_iter_t it;
    size_t save = w->len;
    bool empty = true;
    if (!bson_iter_init_from_data(&it, data, len))
        return false;
    while (empty && bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        if (strchr(name, '.') != NULL)
            continue; /* never keyed: an object of such fields only is keyed as {} (see the header) */
        path_push(w, name, bson_iter_key_len(&it));
        wstate_t cs = classify(w->kp->wild, w->path, w->len);
        w->len = save;
        w->path[w->len] = '\0';
        if (cs == W_INCLUDE || (cs == W_DESCEND && (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it))))
            empty = false;
    }
    return empty;
}

/*
 * Keys of the object or array data at the current path (WildcardKeyGenerator's
 * _traverseWildcard). An array's elements take its path and its state st.
 */
static int
walk(wctx_t *w, const uint8_t *data, uint32_t len, bool is_array, wstate_t st, int depth)
{
    bson_iter_t it;
    int rc = 0;
    if (depth > 200)
        return mf_err_set(w->err, MF_E_CannotBuildIndexKeys, "document nested too deeply to index");
    if (!bson_iter_init_from_data(&it, data, len))
        return mf_err_set(w->err, MF_E_CannotBuildIndexKeys, "malformed document");
    while (rc == 0 && bson_iter_next(&it)) {
        const char *name = bson_iter_key(&it);
        size_t save = w->len;
        wstate_t cs = st;
        if (!is_array) {
            if (strchr(name, '.') != NULL)
                continue; /* not queryable: mongod skips it */
            path_push(w, name, bson_iter_key_len(&it));
            cs = classify(w->kp->wild, w->path, w->len);
        }
        const bson_value_t *v = bson_iter_value(&it);
        if (cs == W_SKIP) {
            /* nothing under this path is indexed */
        } else if (v->value_type == BSON_TYPE_ARRAY) {
            if (is_array) {
                if (cs == W_INCLUDE)
                    rc = emit(w, v); /* a nested array is a value, not descended */
            } else {
                w->multikey = true;
                if (v->value.v_doc.data_len <= 5 ||
                    (cs == W_DESCEND && !array_has_doc(v->value.v_doc.data, v->value.v_doc.data_len)))
                    rc = emit(w, &undefined_value);
                else
                    rc = walk(w, v->value.v_doc.data, v->value.v_doc.data_len, true, cs, depth + 1);
            }
        } else if (v->value_type == BSON_TYPE_DOCUMENT) {
            if (v->value.v_doc.data_len <= 5 || projects_empty(w, v->value.v_doc.data, v->value.v_doc.data_len, cs)) {
                bson_value_t e = {.value_type = BSON_TYPE_DOCUMENT};
                e.value.v_doc.data = (uint8_t *)empty_doc;
                e.value.v_doc.data_len = sizeof(empty_doc);
                rc = emit(w, &e);
            } else {
                rc = walk(w, v->value.v_doc.data, v->value.v_doc.data_len, false, cs, depth + 1);
            }
        } else if (cs == W_INCLUDE) {
            rc = emit(w, v);
        }
        w->len = save;
        if (w->path != NULL)
            w->path[w->len] = '\0';
    }
    return rc;
}

int
mf_wildcard_keys(const mf_keypattern_t *kp, const bson_t *doc, mf_keyset_t *out, bool *multikey, mf_error_t *err)
{
    wctx_t w = {.kp = kp, .out = out, .err = err};
    int rc;
    if (!kp->is_wildcard || kp->wild == NULL)
        return mf_err_set(err, MF_E_InternalError, "not a wildcard index");
    w.cap = 64;
    w.path = mf_malloc(w.cap);
    w.path[0] = '\0';
    rc = walk(&w, bson_get_data(doc), doc->len, false, W_SKIP, 0);
    free(w.path);
    *multikey = w.multikey;
    return rc;
}
