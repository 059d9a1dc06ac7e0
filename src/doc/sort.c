/*
 * sort.c: sort specifications (see sort.h).
 *
 * Design: a spec is parsed into an array of (path, direction). A document's
 * key for one path is found with mf_path_walk: every value reached is a
 * candidate, arrays contribute their elements (an empty array contributes
 * undefined, which MongoDB sorts just below null), a missing field
 * contributes null; the key is the smallest candidate when ascending and the
 * largest when descending. mf_sort_docs extracts every key once, then sorts an
 * index array with qsort using the original position as the final tie-breaker,
 * which makes the sort stable.
 *
 * Invariants: the sort object owns its path strings; extracted keys are
 * shallow bson_value_t copies that point into the documents being sorted and
 * never outlive the call that made them.
 */
#include "common/alloc.h"
#include "common/fmt.h"
#include "doc/sort.h"

#include <stdlib.h>
#include <string.h>

#include "doc/match.h"
#include "doc/path.h"
#include "doc/value.h"

typedef struct sort_field {
    char *path; /* owned */
    int dir;    /* 1 or -1 */
} sort_field_t;

struct mf_sort {
    sort_field_t *fields;
    size_t n;
    bool text_score; /* some key is {$meta: "textScore"} */
    bool geo_dist;   /* some key is {$meta: "geoNearDistance"} */
};

bool
mf_sort_uses_text_score(const mf_sort_t *s)
{
    return s != NULL && s->text_score;
}

bool
mf_sort_uses_geo_distance(const mf_sort_t *s)
{
    return s != NULL && s->geo_dist;
}

static const char kBadOrder[] = "$sort key ordering must be 1 (for ascending) or -1 (for descending)";

static int
path_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * duplicate_path: true (with mongod's 7472500) when two fields of s name the
 * same path. A short spec is checked in order (the first repeat is the one
 * named, as mongod's); a long one by sorting its paths, so a hostile spec of
 * many keys costs n log n.
 */
static bool
duplicate_path(const mf_sort_t *s, mf_error_t *err)
{
    const char *dup = NULL;
    const char **v;

    if (s->n <= 32) {
        for (size_t i = 1; i < s->n && dup == NULL; i++)
            for (size_t j = 0; j < i && dup == NULL; j++)
                if (strcmp(s->fields[i].path, MF_TEXT_SCORE_FIELD) != 0 && strcmp(s->fields[i].path, s->fields[j].path) == 0)
                    dup = s->fields[i].path;
    } else if ((v = mf_calloc(s->n, sizeof(*v))) != NULL) {
        for (size_t i = 0; i < s->n; i++)
            v[i] = s->fields[i].path;
        qsort(v, s->n, sizeof(*v), path_cmp);
        for (size_t i = 1; i < s->n && dup == NULL; i++)
            if (strcmp(v[i], v[i - 1]) == 0 && strcmp(v[i], MF_TEXT_SCORE_FIELD) != 0)
                dup = v[i];
        free(v);
    }
    if (dup != NULL)
        mf_err_set(err, MF_E_Location7472500, "$sort key must not contain duplicate keys (duplicate: '%s')", dup);
    return dup != NULL;
}

mf_sort_t *
mf_sort_new(const bson_t *spec, mf_error_t *err)
{
    mf_sort_t *s = mf_calloc(1, sizeof(*s));
    bson_iter_t it;
    uint32_t count;

    if (s == NULL) {
        mf_err_set(err, MF_E_InternalError, "out of memory");
        return NULL;
    }
    if (spec == NULL)
        return s;
    count = bson_count_keys(spec);
    if (count == 0)
        return s;
    s->fields = mf_calloc(count, sizeof(*s->fields));
    if (s->fields == NULL || !bson_iter_init(&it, spec)) {
        mf_sort_free(s);
        mf_err_set(err, MF_E_InternalError, "out of memory");
        return NULL;
    }
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        int64_t d;

        if (v->value_type == BSON_TYPE_DOCUMENT) {
            /*
             * {$meta: "textScore"}: the hidden score field of a $text query's
             * documents (doc/match.h), highest first; {$meta:
             * "geoNearDistance"}: the hidden distance field after a $geoNear
             * or in a $near find, also descending (farthest first), as
             * mongod 8.0's sort_pattern.cpp sorts every $meta key. Other objects are
             * refused as mongod's sort_pattern.cpp refuses them: 17312 not a
             * $meta, 9 more keys, 31138 another $meta name.
             */
            bson_iter_t mi;
            char shown[256];
            bool first = bson_iter_init_from_data(&mi, v->value.v_doc.data, v->value.v_doc.data_len) &&
                         bson_iter_next(&mi);
            if (!first || strcmp(bson_iter_key(&mi), "$meta") != 0) {
                mf_sort_free(s);
                mf_err_set(err, MF_E_Location17312, "$meta is the only expression supported by $sort right now");
                return NULL;
            }
            mf_fmt_value(bson_iter_value(&mi), shown, sizeof(shown));
            bool text = BSON_ITER_HOLDS_UTF8(&mi) && strcmp(bson_iter_utf8(&mi, NULL), "textScore") == 0;
            bool geo = BSON_ITER_HOLDS_UTF8(&mi) && strcmp(bson_iter_utf8(&mi, NULL), "geoNearDistance") == 0;
            if (bson_iter_next(&mi)) {
                mf_sort_free(s);
                mf_err_set(err, MF_E_FailedToParse, "Cannot have additional keys in a $meta sort specification");
                return NULL;
            }
            if (!text && !geo) {
                mf_sort_free(s);
                mf_err_set(err, MF_E_Location31138, "Illegal $meta sort: $meta: %s", shown);
                return NULL;
            }
            s->fields[s->n].path = bson_strdup(text ? MF_TEXT_SCORE_FIELD : MF_GEO_DIST_FIELD);
            s->fields[s->n].dir = -1;
            s->n++;
            if (text)
                s->text_score = true;
            else
                s->geo_dist = true;
            continue;
        }
        if (!mf_value_is_number(v)) {
            char shown[256];
            mf_fmt_value(v, shown, sizeof(shown));
            mf_sort_free(s);
            mf_err_set(err, MF_E_Location15974, "Illegal key in $sort specification: %s: %s", bson_iter_key(&it), shown);
            return NULL;
        }
        if (!mf_value_as_int64(v, &d) || (d != 1 && d != -1) || mf_value_as_double(v) != (double)d) {
            mf_sort_free(s);
            mf_err_set(err, MF_E_Location15975, "%s", kBadOrder);
            return NULL;
        }
        /* {$natural: ±1} is find's record order, which its caller takes out of the sort. */
        if (strcmp(bson_iter_key(&it), "$natural") != 0 && mf_field_path_check(bson_iter_key(&it), err) < 0) {
            mf_sort_free(s);
            return NULL;
        }
        s->fields[s->n].path = bson_strdup(bson_iter_key(&it));
        s->fields[s->n].dir = (int)d;
        s->n++;
    }
    if (duplicate_path(s, err)) {
        mf_sort_free(s);
        return NULL;
    }
    return s;
}

void
mf_sort_free(mf_sort_t *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        bson_free(s->fields[i].path);
    free(s->fields);
    free(s);
}

typedef struct key_acc {
    bson_value_t best; /* shallow copy pointing into the document */
    bool have;
    int dir;
} key_acc_t;

static void
consider(key_acc_t *acc, const bson_value_t *v)
{
    if (!acc->have || (acc->dir > 0 ? mf_value_cmp(v, &acc->best) < 0
                                    : mf_value_cmp(v, &acc->best) > 0)) {
        acc->best = *v;
        acc->have = true;
    }
}

static bool
key_visit(void *arg, const bson_value_t *v, int32_t pos)
{
    key_acc_t *acc = arg;
    bson_value_t tmp;

    (void)pos;
    if (v == NULL) {
        tmp.value_type = BSON_TYPE_NULL;
        consider(acc, &tmp);
    } else if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        bool any = false;
        if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len)) {
            while (bson_iter_next(&it)) {
                consider(acc, bson_iter_value(&it));
                any = true;
            }
        }
        if (!any) {
            tmp.value_type = BSON_TYPE_UNDEFINED;
            consider(acc, &tmp);
        }
    } else {
        consider(acc, v);
    }
    return false;
}

/* extract_key: the sort key of doc for field f (shallow, points into doc). */
static bson_value_t
extract_key(const sort_field_t *f, const bson_t *doc)
{
    key_acc_t acc = {.have = false, .dir = f->dir};

    mf_path_walk(doc, f->path, key_visit, &acc);
    if (!acc.have)
        acc.best.value_type = BSON_TYPE_NULL;
    return acc.best;
}

void
mf_sort_key_append(const mf_sort_t *s, const bson_t *doc, bson_t *arr)
{
    for (size_t i = 0; s != NULL && i < s->n; i++) {
        char buf[16];
        const char *key;
        bson_value_t k = extract_key(&s->fields[i], doc);
        size_t kl = bson_uint32_to_string((uint32_t)i, &key, buf, sizeof(buf));
        bson_append_value(arr, key, (int)kl, &k);
    }
}

int
mf_sort_cmp(const mf_sort_t *s, const bson_t *a, const bson_t *b)
{
    for (size_t i = 0; i < s->n; i++) {
        bson_value_t ka = extract_key(&s->fields[i], a);
        bson_value_t kb = extract_key(&s->fields[i], b);
        int c = mf_value_cmp(&ka, &kb);
        if (c != 0)
            return c * s->fields[i].dir;
    }
    return 0;
}

typedef struct sort_ctx {
    const mf_sort_t *s;
    const bson_value_t *keys; /* n docs x s->n keys */
} sort_ctx_t;

/* qsort has no context argument in C11; the context travels in each item. */
typedef struct sort_item {
    const sort_ctx_t *ctx;
    size_t idx;
} sort_item_t;

static int
item_cmp(const void *pa, const void *pb)
{
    const sort_item_t *a = pa, *b = pb;
    const sort_ctx_t *ctx = a->ctx;
    size_t nk = ctx->s->n;

    for (size_t i = 0; i < nk; i++) {
        int c = mf_value_cmp(&ctx->keys[a->idx * nk + i], &ctx->keys[b->idx * nk + i]);
        if (c != 0)
            return c * ctx->s->fields[i].dir;
    }
    return a->idx < b->idx ? -1 : (a->idx > b->idx ? 1 : 0);
}

void
mf_sort_docs(const mf_sort_t *s, bson_t **docs, size_t n)
{
    bson_value_t *keys;
    sort_item_t *items;
    bson_t **tmp;
    sort_ctx_t ctx;

    if (s == NULL || s->n == 0 || n < 2)
        return;
    keys = mf_calloc(n * s->n, sizeof(*keys));
    items = mf_calloc(n, sizeof(*items));
    tmp = mf_calloc(n, sizeof(*tmp));
    if (keys == NULL || items == NULL || tmp == NULL) {
        free(keys);
        free(items);
        free(tmp);
        return;
    }
    for (size_t d = 0; d < n; d++)
        for (size_t i = 0; i < s->n; i++)
            keys[d * s->n + i] = extract_key(&s->fields[i], docs[d]);
    ctx.s = s;
    ctx.keys = keys;
    for (size_t d = 0; d < n; d++) {
        items[d].ctx = &ctx;
        items[d].idx = d;
    }
    qsort(items, n, sizeof(*items), item_cmp);
    for (size_t d = 0; d < n; d++)
        tmp[d] = docs[items[d].idx];
    memcpy(docs, tmp, n * sizeof(*docs));
    free(keys);
    free(items);
    free(tmp);
}
