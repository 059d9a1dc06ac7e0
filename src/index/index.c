/*
 * index.c: key patterns and key generation (see index.h).
 *
 * Generation follows MongoDB's BtreeKeyGenerator: each field's path is
 * walked through nested documents until it ends or meets an array. Fields
 * whose paths meet the same array (same bytes in the document) are expanded
 * together, element by element, recursing into each element for the rest
 * of their paths; so {"a.b": 1, "a.c": 1} over a: [{b: 1, c: 2}, {b: 3,
 * c: 4}] gives (1, 2) and (3, 4), not the cross product. Two fields meeting
 * two different arrays are refused with 171 CannotIndexParallelArrays. A
 * missing path gives null, an empty array undefined (its subpaths null), a
 * non-document array element null for any subpath. A sparse index skips a
 * key whose fields are all missing. Once generated, the keys are sorted by
 * their bytes and duplicates dropped (O(N log N) for N keys), so a document
 * never holds a key twice and callers can search the set (mf_keyset_contains)
 * in O(log N). A hashed index (index.h) has its own generator, mongod's
 * getHashKeys: one key per document, arrays refused (16766); so has a
 * wildcard index (index_wild.c), one [path, value] key per leaf path.
 */
#include "common/alloc.h"
#include "doc/hash.h"
#include "index/index.h"

#include <stdlib.h>
#include <string.h>

#include "doc/collation.h"
#include "common/fmt.h"
#include "doc/geo.h"
#include "doc/value.h"
#include "doc/text.h"

#define MAX_KEYS_PER_DOC 1000000
#define MAX_RAW_KEYS_PER_DOC (4 * MAX_KEYS_PER_DOC) /* before duplicates are removed */

int
mf_keypattern_parse(const bson_t *key, mf_keypattern_t *kp, mf_error_t *err)
{
    bson_iter_t it;
    memset(kp, 0, sizeof(*kp));
    kp->geo_min = -180;
    kp->geo_max = 180;
    if (!bson_iter_init(&it, key))
        return mf_err_set(err, MF_E_CannotCreateIndex, "bad key pattern");
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (kp->nfields >= MF_KP_MAX_FIELDS) {
            mf_keypattern_destroy(kp);
            return mf_err_set(err, MF_E_CannotCreateIndex, "Index key pattern has too many fields (max %d)",
                              MF_KP_MAX_FIELDS);
        }
        if (v->value_type == BSON_TYPE_UTF8 && (strcmp(v->value.v_utf8.str, "2dsphere") == 0 ||
                                                strcmp(v->value.v_utf8.str, "2d") == 0)) {
            kp->geo[kp->nfields] = v->value.v_utf8.str[2] == 's' ? MF_GEO_IX_2DSPHERE : MF_GEO_IX_2D;
            kp->has_geo = true;
            kp->fields[kp->nfields++] = mf_strdup(bson_iter_key(&it));
            continue;
        }
        if (mf_value_is_number(v) && mf_wildcard_field_name(bson_iter_key(&it))) {
            /* A wildcard field (index.h): alone, [path, value] keys; in a compound pattern, left out. */
            if (bson_count_keys(key) > 1) {
                kp->wildcard_compound = true;
                continue;
            }
            kp->is_wildcard = true;
            kp->fields[kp->nfields++] = mf_strdup("$_path");
            kp->fields[kp->nfields] = mf_strdup(bson_iter_key(&it));
            kp->desc[kp->nfields++] = mf_value_as_double(v) < 0;
            if (mf_keypattern_set_wildcard_projection(kp, NULL, err) != 0) {
                mf_keypattern_destroy(kp);
                return -1;
            }
            continue;
        }
        if (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "text") == 0) {
            kp->is_text = true;
        } else if (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "hashed") == 0) {
            /* Ascending: its keys are NumberLongs (index.h); a second hashed field is refused by index_spec.c. */
            kp->has_hashed = true;
            kp->hashed_field = kp->nfields;
            kp->fields[kp->nfields++] = mf_strdup(bson_iter_key(&it));
            continue;
        } else if (!mf_value_is_number(v)) {
            mf_keypattern_destroy(kp);
            return mf_err_set(err, MF_E_CannotCreateIndex, "Unknown index plugin '%s'",
                              v->value_type == BSON_TYPE_UTF8 ? v->value.v_utf8.str : "?");
        }
        kp->fields[kp->nfields] = mf_strdup(bson_iter_key(&it));
        kp->desc[kp->nfields] = mf_value_as_double(v) < 0;
        kp->nfields++;
    }
    for (int i = 0; i < kp->nfields; i++)
        kp->mk_all[i] = mf_path_mk_all(kp->fields[i]);
    return 0;
}

uint32_t
mf_path_mk_all(const char *path)
{
    int n = 1;
    for (const char *d = path; (d = strchr(d, '.')) != NULL; d++)
        n++;
    return n >= 32 ? UINT32_MAX : (UINT32_C(1) << n) - 1;
}

void
mf_keypattern_destroy(mf_keypattern_t *kp)
{
    for (int i = 0; i < kp->nfields; i++)
        free(kp->fields[i]);
    kp->nfields = 0;
    mf_collation_free(kp->collation);
    kp->collation = NULL;
    mf_text_spec_free(kp->text);
    kp->text = NULL;
    mf_wildcard_free(kp->wild);
    kp->wild = NULL;
}

void
mf_keyset_init(mf_keyset_t *ks)
{
    memset(ks, 0, sizeof(*ks));
}

static void
keyset_clear(mf_keyset_t *ks)
{
    for (int i = 0; i < ks->n; i++)
        mf_ks_reset(&ks->keys[i]);
    ks->n = 0;
}

void
mf_keyset_destroy(mf_keyset_t *ks)
{
    for (int i = 0; i < ks->cap; i++)
        mf_ks_destroy(&ks->keys[i]);
    free(ks->keys);
    memset(ks, 0, sizeof(*ks));
}

static mf_keystring_t *keyset_add(mf_keyset_t *ks);

mf_keystring_t *
mf_keyset_push(mf_keyset_t *ks)
{
    return keyset_add(ks);
}

static mf_keystring_t *
keyset_add(mf_keyset_t *ks)
{
    if (ks->n == ks->cap) {
        int ncap = ks->cap ? ks->cap * 2 : 4;
        ks->keys = mf_realloc(ks->keys, (size_t)ncap * sizeof(*ks->keys));
        for (int i = ks->cap; i < ncap; i++)
            mf_ks_init(&ks->keys[i]);
        ks->cap = ncap;
    }
    mf_keystring_t *k = &ks->keys[ks->n++];
    mf_ks_reset(k);
    k->legacy_decimals = ks->legacy_decimals;
    return k;
}

/* Generation state shared by the recursion. */
typedef struct gen_ctx {
    const mf_keypattern_t *kp;
    bool sparse;
    mf_keyset_t *out;
    bool multikey;
    mf_error_t *err;
} gen_ctx_t;

static const bson_value_t null_value = {.value_type = BSON_TYPE_NULL};
/* The one key component of a geo field (see index.h). */
static const bson_value_t geo_value = {.value_type = BSON_TYPE_MINKEY};
static const bson_value_t undefined_value = {.value_type = BSON_TYPE_UNDEFINED};
static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};

/* Is the path component s[0..len) a canonical non-negative array index? */
static bool
is_index_component(const char *s, size_t len, uint32_t *idx)
{
    uint32_t v = 0;
    if (len == 0 || len > 9 || (len > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *idx = v;
    return true;
}

/* Finds the element named key[0..klen) of data (or position idx when by_pos). */
static bool
find_child(const uint8_t *data, uint32_t len, const char *key, size_t klen, bool by_pos, uint32_t idx,
           bson_iter_t *it)
{
    bson_t obj;
    uint32_t k = 0;
    if (!bson_init_static(&obj, data, len) || !bson_iter_init(it, &obj))
        return false;
    while (bson_iter_next(it)) {
        if (by_pos ? k++ == idx : (bson_iter_key_len(it) == klen && memcmp(bson_iter_key(it), key, klen) == 0))
            return true;
    }
    return false;
}

/* Ors into *mk the components (from depth d on) of path p where data holds an array (mf_index_multikey_paths). */
static void
mk_walk(const uint8_t *data, uint32_t len, const char *p, int d, uint32_t *mk)
{
    const char *dot = strchr(p, '.');
    size_t clen = dot ? (size_t)(dot - p) : strlen(p);
    bson_iter_t it;
    if (!find_child(data, len, p, clen, false, 0, &it))
        return;
    const bson_value_t *v = bson_iter_value(&it);
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        if (dot != NULL)
            mk_walk(v->value.v_doc.data, v->value.v_doc.data_len, dot + 1, d + 1, mk);
        return;
    }
    if (v->value_type != BSON_TYPE_ARRAY)
        return;
    *mk |= UINT32_C(1) << (d < 31 ? d : 31);
    if (dot == NULL)
        return;
    /* The rest of the path in each element, and as the element's own name (a numeric component). */
    bson_t a;
    bson_iter_t e;
    if (!bson_init_static(&a, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_init(&e, &a))
        return;
    mk_walk(v->value.v_doc.data, v->value.v_doc.data_len, dot + 1, d + 1, mk);
    while (bson_iter_next(&e)) {
        const bson_value_t *ev = bson_iter_value(&e);
        if (ev->value_type == BSON_TYPE_DOCUMENT)
            mk_walk(ev->value.v_doc.data, ev->value.v_doc.data_len, dot + 1, d + 1, mk);
    }
}

void
mf_index_multikey_paths(const mf_keypattern_t *kp, const bson_t *doc, uint32_t *mk)
{
    for (int i = 0; i < kp->nfields; i++) {
        mk[i] = 0;
        if (kp->is_wildcard || kp->geo[i] != MF_GEO_IX_NONE || strstr(kp->fields[i], "$**") != NULL) {
            mk[i] = UINT32_MAX; /* many keys for other reasons than an array: counted as one everywhere */
            continue;
        }
        mk_walk(bson_get_data(doc), doc->len, kp->fields[i], 0, &mk[i]);
    }
}

/*
 * MongoDB's getFieldDottedOrArray: walks *path from the document data
 * through nested documents and stops at the first array met before the
 * path's end, leaving *path at the rest ("" when the value is the path's
 * leaf). A numeric component applied to an array that has that position
 * indexes it (positional patterns such as "a.0.b"). *name gets the field
 * name of the element returned (for the parallel-arrays message). Returns
 * false when the path is missing.
 * *by_pos is set when a position in an array was taken on the way while
 * a document in that array also has a field of that name: the value is one
 * reading of the path and the document's field another, which the keys do
 * not hold (the caller counts the index multikey, so the planner takes no
 * bounds there: plan.c's path_positional).
 */
static bool
dotted_or_array(const uint8_t *data, uint32_t len, const char **path, bson_value_t *out, const char **name,
                bool *by_pos)
{
    const char *p = *path;
    bool in_array = false;

    for (;;) {
        const char *dot = strchr(p, '.');
        size_t clen = dot ? (size_t)(dot - p) : strlen(p);
        uint32_t idx = 0;
        bson_iter_t it;

        if (in_array && !is_index_component(p, clen, &idx))
            break;
        if (!find_child(data, len, p, clen, in_array, idx, &it))
            break;
        const bson_value_t *v = bson_iter_value(&it);
        *name = bson_iter_key(&it);
        if (dot == NULL) {
            *out = *v;
            *path = "";
            return true;
        }
        p = dot + 1;
        if (v->value_type == BSON_TYPE_ARRAY) {
            const char *d2 = strchr(p, '.');
            size_t l2 = d2 ? (size_t)(d2 - p) : strlen(p);
            bson_iter_t probe;
            if (is_index_component(p, l2, &idx) &&
                find_child(v->value.v_doc.data, v->value.v_doc.data_len, NULL, 0, true, idx, &probe)) {
                /* Ambiguous when one of the array's documents also has a field of that name. */
                bson_iter_t e, f;
                if (!*by_pos && bson_iter_init_from_data(&e, v->value.v_doc.data, v->value.v_doc.data_len))
                    while (!*by_pos && bson_iter_next(&e))
                        *by_pos = BSON_ITER_HOLDS_DOCUMENT(&e) &&
                                  find_child(bson_iter_value(&e)->value.v_doc.data,
                                             bson_iter_value(&e)->value.v_doc.data_len, p, l2, false, 0, &f);
                data = v->value.v_doc.data;
                len = v->value.v_doc.data_len;
                in_array = true;
                continue;
            }
            *out = *v;
            *path = p;
            return true;
        }
        if (v->value_type != BSON_TYPE_DOCUMENT)
            break;
        data = v->value.v_doc.data;
        len = v->value.v_doc.data_len;
        in_array = false;
    }
    *path = "";
    return false;
}

/*
 * The value v with every string (at any depth in a document or array)
 * replaced by its sort key under coll, appended to b as key: what a
 * collation index stores. Sort keys hold no zero byte, so they travel as
 * strings; their byte order is the collation's order.
 */
static void
append_collated(bson_t *b, const char *key, const bson_value_t *v, const mf_collation_t *coll, uint8_t **buf,
                size_t *cap)
{
    bson_iter_t it;
    bson_t child;
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: {
        const char *s = v->value_type == BSON_TYPE_UTF8 ? v->value.v_utf8.str : v->value.v_symbol.symbol;
        size_t len = v->value_type == BSON_TYPE_UTF8 ? v->value.v_utf8.len : v->value.v_symbol.len;
        size_t n = mf_collation_key(coll, s, len, buf, cap);
        bson_append_utf8(b, key, -1, (const char *)*buf, (int)n);
        return;
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        if (v->value_type == BSON_TYPE_DOCUMENT)
            bson_append_document_begin(b, key, -1, &child);
        else
            bson_append_array_begin(b, key, -1, &child);
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            while (bson_iter_next(&it))
                append_collated(&child, bson_iter_key(&it), bson_iter_value(&it), coll, buf, cap);
        if (v->value_type == BSON_TYPE_DOCUMENT)
            bson_append_document_end(b, &child);
        else
            bson_append_array_end(b, &child);
        return;
    default:
        bson_append_value(b, key, -1, v);
    }
}

int
mf_index_append_component(mf_keystring_t *ks, const bson_value_t *v, bool desc, const mf_collation_t *coll,
                          mf_error_t *err)
{
    if (coll == NULL || (v->value_type != BSON_TYPE_UTF8 && v->value_type != BSON_TYPE_SYMBOL &&
                         v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY))
        return mf_ks_append_value(ks, v, desc, err);
    bson_t tmp = BSON_INITIALIZER;
    uint8_t *buf = NULL;
    size_t cap = 0;
    bson_iter_t it;
    int rc = -1;
    append_collated(&tmp, "k", v, coll, &buf, &cap);
    if (bson_iter_init_find(&it, &tmp, "k"))
        rc = mf_ks_append_value(ks, bson_iter_value(&it), desc, err);
    free(buf);
    bson_destroy(&tmp);
    return rc;
}

/*
 * Appends the key made of the fixed values. Duplicates are removed once all
 * keys are out (keyset_sort_unique): a search per key made a document with an
 * N-element array cost O(N^2). The raw count is capped too, so a document of
 * many equal elements cannot grow the set without bound.
 */
static int
emit_key(gen_ctx_t *g, const bson_value_t *fixed)
{
    mf_keystring_t *key = keyset_add(g->out);
    for (int i = 0; i < g->kp->nfields; i++) {
        if (mf_index_append_component(key, &fixed[i], g->kp->desc[i], g->kp->collation, g->err) != 0)
            return -1;
    }
    if (g->out->n > MAX_RAW_KEYS_PER_DOC)
        return mf_err_set(g->err, MF_E_CannotCreateIndex, "too many index keys for one document (over %d)",
                          MAX_KEYS_PER_DOC);
    return 0;
}

/* Key bytes order, then generation order (the pointers are into one array), so the first of equal keys sorts first. */
static int
ks_ptr_cmp(const void *a, const void *b)
{
    const mf_keystring_t *x = *(const mf_keystring_t *const *)a, *y = *(const mf_keystring_t *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int r = n ? memcmp(x->data, y->data, n) : 0;
    if (r != 0)
        return r;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x < y ? -1 : (x > y ? 1 : 0);
}

static bool
ks_same(const mf_keystring_t *x, const mf_keystring_t *y)
{
    return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

/*
 * Sorts ks by key bytes and drops duplicates, keeping the first generated of
 * equal keys (its type bits: for [1, 1.0] the int32). O(N log N). Dropped
 * keys move past ks->n with their buffers, which the set still owns and
 * reuses. Sets of up to kStack keys use stack scratch space.
 */
static void
keyset_sort_unique(mf_keyset_t *ks)
{
    enum { kStack = 32 };
    mf_keystring_t *pstack[kStack];
    mf_keystring_t sstack[kStack];
    mf_keystring_t **ptr;
    mf_keystring_t *sorted;
    int n = ks->n, k = 0, d = ks->n;

    if (n < 2)
        return;
    ptr = n <= kStack ? pstack : mf_malloc((size_t)n * sizeof(*ptr));
    sorted = n <= kStack ? sstack : mf_malloc((size_t)n * sizeof(*sorted));
    for (int i = 0; i < n; i++)
        ptr[i] = &ks->keys[i];
    qsort(ptr, (size_t)n, sizeof(*ptr), ks_ptr_cmp);
    for (int i = 0; i < n; i++) {
        if (k > 0 && ks_same(&sorted[k - 1], ptr[i]))
            sorted[--d] = *ptr[i];
        else
            sorted[k++] = *ptr[i];
    }
    memcpy(ks->keys, sorted, (size_t)n * sizeof(*sorted));
    ks->n = k;
    if (ptr != pstack)
        free(ptr);
    if (sorted != sstack)
        free(sorted);
}

bool
mf_keyset_contains(const mf_keyset_t *ks, const mf_keystring_t *key)
{
    return mf_keyset_find(ks, key) != NULL;
}

const mf_keystring_t *
mf_keyset_find(const mf_keyset_t *ks, const mf_keystring_t *key)
{
    int lo = 0, hi = ks->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const mf_keystring_t *m = &ks->keys[mid];
        size_t n = m->len < key->len ? m->len : key->len;
        int r = n ? memcmp(m->data, key->data, n) : 0;
        if (r == 0 && m->len != key->len)
            r = m->len < key->len ? -1 : 1;
        if (r == 0)
            return m;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/*
 * One step of MongoDB's BtreeKeyGenerator: resolves every field not yet
 * fixed against the (sub)document data; fields that reach the same array
 * are expanded together, element by element; two different arrays are
 * refused (171). paths and fixed are copied, so each branch of the
 * recursion has its own.
 */
static int
gen_keys(gen_ctx_t *g, const char *const *paths_in, const bson_value_t *fixed_in, const uint8_t *data, uint32_t len,
         int not_found)
{
    const char *paths[MF_KP_MAX_FIELDS];
    bson_value_t fixed[MF_KP_MAX_FIELDS];
    bool in_arr[MF_KP_MAX_FIELDS];
    bson_value_t arr = {0};
    const char *arr_name = NULL;
    bool have_arr = false;
    int n = g->kp->nfields;

    memcpy(paths, paths_in, (size_t)n * sizeof(*paths));
    memcpy(fixed, fixed_in, (size_t)n * sizeof(*fixed));
    memset(in_arr, 0, sizeof(in_arr));
    for (int i = 0; i < n; i++) {
        bson_value_t v;
        const char *name = NULL;
        if (paths[i][0] == '\0')
            continue;
        bool by_pos = false;
        bool found = dotted_or_array(data, len, &paths[i], &v, &name, &by_pos);
        if (by_pos)
            g->multikey = true;
        if (!found) {
            fixed[i] = null_value;
            not_found++;
            continue;
        }
        if (v.value_type != BSON_TYPE_ARRAY) {
            fixed[i] = v;
            continue;
        }
        in_arr[i] = true;
        if (!have_arr) {
            arr = v;
            arr_name = name;
            have_arr = true;
        } else if (arr.value.v_doc.data != v.value.v_doc.data) {
            return mf_err_set(g->err, MF_E_CannotIndexParallelArrays, "cannot index parallel arrays [%s] [%s]", name,
                              arr_name);
        }
    }
    if (!have_arr) {
        if (g->sparse && not_found == n)
            return 0;
        return emit_key(g, fixed);
    }
    g->multikey = true;

    bson_t a;
    bson_iter_t it;
    bool any = false;
    if (bson_init_static(&a, arr.value.v_doc.data, arr.value.v_doc.data_len) && bson_iter_init(&it, &a)) {
        while (bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            bson_value_t f2[MF_KP_MAX_FIELDS];
            any = true;
            memcpy(f2, fixed, (size_t)n * sizeof(*f2));
            for (int i = 0; i < n; i++) {
                if (in_arr[i] && paths[i][0] == '\0')
                    f2[i] = *e;
            }
            int rc = e->value_type == BSON_TYPE_DOCUMENT
                         ? gen_keys(g, paths, f2, e->value.v_doc.data, e->value.v_doc.data_len, not_found)
                         : gen_keys(g, paths, f2, empty_doc, sizeof(empty_doc), not_found);
            if (rc != 0)
                return rc;
        }
    }
    if (!any) {
        /* An empty array indexes as undefined (its subfields as null). */
        for (int i = 0; i < n; i++) {
            if (in_arr[i] && paths[i][0] == '\0')
                fixed[i] = undefined_value;
        }
        return gen_keys(g, paths, fixed, empty_doc, sizeof(empty_doc), not_found);
    }
    return 0;
}

/*
 * The value at path in doc, walking documents only (no array expansion):
 * *found false and null when missing or a non-document is on the way.
 * Returns the length of the path prefix that reached an array (the array
 * included), or 0 when none did (*out then holds the value).
 */
static size_t
walk_no_arrays(const bson_t *doc, const char *path, bson_value_t *out, bool *found)
{
    const uint8_t *data = bson_get_data(doc);
    uint32_t len = doc->len;
    const char *p = path;
    *out = null_value;
    *found = false;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t clen = dot ? (size_t)(dot - p) : strlen(p);
        bson_iter_t it;
        if (!find_child(data, len, p, clen, false, 0, &it))
            return 0;
        const bson_value_t *v = bson_iter_value(&it);
        if (v->value_type == BSON_TYPE_ARRAY)
            return (size_t)(p + clen - path);
        if (dot == NULL) {
            *out = *v;
            *found = true;
            return 0;
        }
        if (v->value_type != BSON_TYPE_DOCUMENT)
            return 0;
        data = v->value.v_doc.data;
        len = v->value.v_doc.data_len;
        p = dot + 1;
    }
}

/*
 * The value at path in doc for a non-text field of a compound text index:
 * null when missing; an array anywhere on the path is 133
 * CannotBuildIndexKeys, as mongod (a text index is never multikey on them).
 */
static int
text_extra_value(const bson_t *doc, const char *path, bson_value_t *out, mf_error_t *err)
{
    bool found;
    if (walk_no_arrays(doc, path, out, &found) != 0) {
        char shown[300];
        mf_fmt_doc(doc, shown, sizeof(shown));
        return mf_err_set(err, MF_E_CannotBuildIndexKeys, "Field '%s' of text index contains an array in document: %s",
                          path, shown);
    }
    return 0;
}

/*
 * A text index's keys: [prefix values..., term, score, suffix values...]
 * for each distinct term of doc (doc/text.h); the prefix and suffix are
 * the non-text fields before _fts and after _ftsx in the key pattern. A
 * document without terms has no key (as mongod: it is not in the index).
 */
static int
text_keys(const mf_keypattern_t *kp, const bson_t *doc, mf_keyset_t *out, mf_error_t *err)
{
    mf_text_terms_t t;
    bson_value_t extra[MF_KP_MAX_FIELDS];
    int fts = 0, rc = 0;
    if (kp->text == NULL)
        return mf_err_set(err, MF_E_InternalError, "text index without its spec");
    while (fts < kp->nfields && strcmp(kp->fields[fts], "_fts") != 0)
        fts++;
    for (int i = 0; i < kp->nfields; i++) {
        extra[i] = null_value;
        if ((i < fts || i > fts + 1) && text_extra_value(doc, kp->fields[i], &extra[i], err) != 0)
            return -1;
    }
    mf_text_terms_init(&t);
    if (mf_text_doc_terms(kp->text, doc, &t, err) != 0) {
        mf_text_terms_destroy(&t);
        return -1;
    }
    for (size_t i = 0; i < t.n && rc == 0; i++) {
        mf_keystring_t *key = keyset_add(out);
        bson_value_t term = {.value_type = BSON_TYPE_UTF8}, score = {.value_type = BSON_TYPE_DOUBLE};
        term.value.v_utf8.str = t.term[i];
        term.value.v_utf8.len = (uint32_t)strlen(t.term[i]);
        score.value.v_double = t.score[i];
        for (int f = 0; f < kp->nfields && rc == 0; f++) {
            if (f == fts)
                rc = mf_ks_append_value(key, &term, false, err);
            else if (f == fts + 1)
                rc = mf_ks_append_value(key, &score, false, err);
            else
                rc = mf_index_append_component(key, &extra[f], kp->desc[f], kp->collation, err);
        }
    }
    mf_text_terms_destroy(&t);
    if (rc == 0 && out->n > MAX_KEYS_PER_DOC)
        rc = mf_err_set(err, MF_E_CannotCreateIndex, "too many index keys for one document (over %d)", MAX_KEYS_PER_DOC);
    return rc;
}

bool
mf_keypattern_one_plain_field(const mf_keypattern_t *kp)
{
    const char *name = kp->fields[0];
    return kp->nfields == 1 && !kp->is_text && !kp->has_hashed && !kp->is_wildcard && kp->geo[0] == MF_GEO_IX_NONE &&
           name[0] != '\0' && strchr(name, '.') == NULL;
}

int
mf_index_hashed_component(const bson_value_t *v, const mf_collation_t *coll, bson_value_t *out, mf_error_t *err)
{
    int64_t h;
    int rc;
    out->value_type = BSON_TYPE_INT64;
    if (coll == NULL || (v->value_type != BSON_TYPE_UTF8 && v->value_type != BSON_TYPE_SYMBOL &&
                         v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)) {
        rc = mf_hash64(v, 0, &h, err);
    } else {
        /* CollationIndexKey::collationAwareIndexKeyAppend, then the hash. */
        bson_t tmp = BSON_INITIALIZER;
        uint8_t *buf = NULL;
        size_t cap = 0;
        bson_iter_t it;
        append_collated(&tmp, "k", v, coll, &buf, &cap);
        rc = bson_iter_init_find(&it, &tmp, "k") ? mf_hash64(bson_iter_value(&it), 0, &h, err)
                                                 : mf_err_set(err, MF_E_InternalError, "collated value lost");
        free(buf);
        bson_destroy(&tmp);
    }
    if (rc == 0)
        out->value.v_int64 = h;
    return rc;
}

/*
 * The value at path in doc for a hashed index's field (mongod's
 * getHashKeys): *found false and null when missing (or a non-document on
 * the way); an array anywhere on the path is 16766, naming the path up to
 * that array.
 */
static int
hashed_field_value(const bson_t *doc, const char *path, bson_value_t *out, bool *found, mf_error_t *err)
{
    size_t at = walk_no_arrays(doc, path, out, found);
    if (at != 0)
        return mf_err_set(err, MF_E_Location16766,
                          "Error: hashed indexes do not currently support array values. Found array at path: %.*s",
                          (int)at, path);
    return 0;
}

/*
 * A hashed index's one key for doc (expression_keys_private.cpp's
 * getHashKeys): each field's value, the hashed one as its hash. None for a
 * sparse index when every field is missing.
 */
static int
hashed_keys(const mf_keypattern_t *kp, bool sparse, const bson_t *doc, mf_keyset_t *out, mf_error_t *err)
{
    bson_value_t vals[MF_KP_MAX_FIELDS];
    bool any = false;
    for (int i = 0; i < kp->nfields; i++) {
        bool found;
        if (hashed_field_value(doc, kp->fields[i], &vals[i], &found, err) != 0)
            return -1;
        any = any || found;
    }
    if (sparse && !any)
        return 0;
    mf_keystring_t *key = keyset_add(out);
    for (int i = 0; i < kp->nfields; i++) {
        int rc;
        if (i == kp->hashed_field) {
            bson_value_t h;
            rc = mf_index_hashed_component(&vals[i], kp->collation, &h, err);
            if (rc == 0)
                rc = mf_ks_append_value(key, &h, false, err);
        } else {
            rc = mf_index_append_component(key, &vals[i], kp->desc[i], kp->collation, err);
        }
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* The one key of a one-plain-field pattern for a value that is not an array. */
static int
plain_value_key(const mf_keypattern_t *kp, const bson_value_t *v, mf_keyset_t *out, mf_error_t *err)
{
    return mf_index_append_component(keyset_add(out), v, kp->desc[0], kp->collation, err) != 0 ? -1 : 0;
}

int
mf_index_keys_of_value(const mf_keypattern_t *kp, const bson_value_t *v, mf_keyset_t *out, mf_error_t *err)
{
    keyset_clear(out);
    out->legacy_decimals = kp->legacy_decimals;
    if (!mf_keypattern_one_plain_field(kp) || v->value_type == BSON_TYPE_ARRAY)
        return 1;
    if (plain_value_key(kp, v, out, err) != 0) {
        keyset_clear(out);
        return -1;
    }
    return 0;
}

/*
 * The common index, one ordinary field at the top level ({at: 1}, {_id: 1}),
 * in one pass over the document's top-level names: the key gen_keys would
 * make, without its path walk. Returns 0 (out has the key, or none for a
 * sparse index and a missing field), -1 with err, or 1 when the pattern or
 * the value needs the general walk (a dotted path, geo, text, an array).
 */
static int
one_plain_field_key(const mf_keypattern_t *kp, bool sparse, const bson_t *doc, mf_keyset_t *out, mf_error_t *err)
{
    const char *name = kp->fields[0];
    bson_iter_t it;
    bson_value_t v = null_value;
    bool found = false;

    if (!mf_keypattern_one_plain_field(kp))
        return 1;
    size_t nlen = strlen(name);
    if (!bson_iter_init(&it, doc))
        return 1;
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) == nlen && memcmp(bson_iter_key(&it), name, nlen) == 0) {
            if (bson_iter_type(&it) == BSON_TYPE_ARRAY)
                return 1; /* multikey: the general walk expands it */
            v = *bson_iter_value(&it);
            found = true;
            break;
        }
    }
    if (!found && sparse)
        return 0;
    return plain_value_key(kp, &v, out, err);
}

int
mf_index_keys(const mf_keypattern_t *kp, bool sparse, const bson_t *doc, mf_keyset_t *out, bool *skip,
              bool *multikey, mf_error_t *err)
{
    const char *paths[MF_KP_MAX_FIELDS];
    bson_value_t fixed[MF_KP_MAX_FIELDS];
    gen_ctx_t g = {.kp = kp, .sparse = sparse, .out = out, .err = err};
    int cell_field = -1; /* the first geo field: keyed by its cells (doc/geo.h) */
    int64_t *cells = NULL;
    size_t ncells = 1;
    int rc = -1;

    keyset_clear(out);
    out->legacy_decimals = kp->legacy_decimals;
    *skip = false;
    *multikey = false;
    switch (one_plain_field_key(kp, sparse, doc, out, err)) {
    case 0:
        *skip = out->n == 0;
        return 0;
    case -1:
        keyset_clear(out);
        return -1;
    default:
        break; /* not that simple: the general walk below */
    }
    if (kp->has_hashed) {
        if (hashed_keys(kp, sparse, doc, out, err) != 0) {
            keyset_clear(out);
            return -1;
        }
        *skip = out->n == 0;
        return 0;
    }
    if (kp->is_wildcard) {
        if (mf_wildcard_keys(kp, doc, out, multikey, err) != 0) {
            keyset_clear(out);
            return -1;
        }
        keyset_sort_unique(out);
        if (out->n > MAX_KEYS_PER_DOC) {
            keyset_clear(out);
            return mf_err_set(err, MF_E_CannotCreateIndex, "too many index keys for one document (over %d)",
                              MAX_KEYS_PER_DOC);
        }
        *skip = out->n == 0;
        return 0;
    }
    if (kp->is_text) {
        if (text_keys(kp, doc, out, err) != 0) {
            keyset_clear(out);
            return -1;
        }
        keyset_sort_unique(out);
        *skip = out->n == 0;
        return 0;
    }
    for (int i = 0; i < kp->nfields; i++) {
        paths[i] = kp->fields[i];
        fixed[i] = null_value;
        if (kp->geo[i] != MF_GEO_IX_NONE) {
            /* A geo field: validated here; its cells, or one constant component (see index.h). */
            bool present;
            if (mf_geo_index_check((mf_geo_ix_t)kp->geo[i], doc, kp->fields[i], kp->geo_min, kp->geo_max, &present,
                                   err) != 0)
                goto out;
            if (!present) {
                *skip = true;
                rc = 0;
                goto out;
            }
            paths[i] = "";
            fixed[i] = geo_value;
            if (cell_field < 0) {
                cell_field = i;
                ncells = kp->geo[i] == MF_GEO_IX_2DSPHERE
                             ? mf_geo_doc_cells(doc, kp->fields[i], &cells)
                             : mf_geo_doc_cells_2d(doc, kp->fields[i], kp->geo_min, kp->geo_max, &cells);
            }
        }
    }
    for (size_t c = 0; c < ncells; c++) {
        if (cell_field >= 0) {
            fixed[cell_field].value_type = BSON_TYPE_INT64;
            fixed[cell_field].value.v_int64 = cells[c];
        }
        if (gen_keys(&g, paths, fixed, bson_get_data(doc), doc->len, 0) != 0) {
            keyset_clear(out);
            goto out;
        }
    }
    keyset_sort_unique(out);
    if (out->n > MAX_KEYS_PER_DOC) {
        keyset_clear(out);
        mf_err_set(err, MF_E_CannotCreateIndex, "too many index keys for one document (over %d)", MAX_KEYS_PER_DOC);
        goto out;
    }
    *multikey = g.multikey || (cell_field >= 0 && ncells > 1);
    if (out->n == 0)
        *skip = true;
    rc = 0;
out:
    free(cells);
    return rc;
}

int
mf_index_key_of_value(const mf_keypattern_t *kp, const bson_value_t *v, mf_keystring_t *out, mf_error_t *err)
{
    mf_ks_reset(out);
    out->legacy_decimals = kp->legacy_decimals;
    return mf_index_append_component(out, v, kp->desc[0], kp->collation, err);
}

bool
mf_index_spec_key(const bson_t *spec, bson_t *key)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&it, spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(key, data, len);
}
