/*
 * index_filter.c: the index filters of planCacheSetFilter (see
 * index_filter.h): a list of entries, newest first, under one mutex. A
 * lookup builds the request's shape key and compares strings; entries of a
 * collection that was dropped (UUID no longer the namespace's) are never
 * matched and are pruned when that namespace is next touched.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "doc/value.h"
#include "index/index.h"
#include "query/index_filter.h"

typedef struct filter_entry {
    char *ns;
    uint8_t uuid[16];
    char *shape;
    bson_t *query, *sort, *projection, *collation; /* owned copies; collation may be NULL */
    bson_t *indexes;                               /* owned array */
    struct filter_entry *next;
} filter_entry_t;

static pthread_mutex_t filters_mu = PTHREAD_MUTEX_INITIALIZER;
static filter_entry_t *filters;

static void
entry_free(filter_entry_t *f)
{
    free(f->ns);
    free(f->shape);
    bson_destroy(f->query);
    bson_destroy(f->sort);
    bson_destroy(f->projection);
    if (f->collation)
        bson_destroy(f->collation);
    bson_destroy(f->indexes);
    free(f);
}

/* Appends the shape of doc to s: field names and operators; leaf values by value, or only as a type class. */
static void
shape_append(bson_string_t *s, const bson_t *doc, bool values)
{
    bson_iter_t it;
    bson_string_append(s, "{");
    if (doc != NULL && bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            bson_string_append_printf(s, "%s:", bson_iter_key(&it));
            if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
                const uint8_t *data;
                uint32_t len;
                bson_t sub;
                if (BSON_ITER_HOLDS_DOCUMENT(&it))
                    bson_iter_document(&it, &len, &data);
                else
                    bson_iter_array(&it, &len, &data);
                if (bson_init_static(&sub, data, len))
                    shape_append(s, &sub, values);
            } else if (values) {
                bson_t one = BSON_INITIALIZER;
                bson_append_value(&one, "v", 1, bson_iter_value(&it));
                char *j = bson_as_canonical_extended_json(&one, NULL);
                bson_string_append(s, j ? j : "?");
                bson_free(j);
                bson_destroy(&one);
            } else {
                bson_string_append_printf(s, "%d", mf_value_is_number(bson_iter_value(&it)) ? 1 : (int)bson_iter_type(&it));
            }
            bson_string_append(s, ",");
        }
    }
    bson_string_append(s, "}");
}

/* The shape key (owned) of a query with its sort, projection and collation (each may be NULL). */
static char *
shape_key(const bson_t *q, const bson_t *sort, const bson_t *proj, const bson_t *coll)
{
    bson_string_t *s = bson_string_new("q");
    shape_append(s, q, false);
    bson_string_append(s, "s");
    shape_append(s, sort, true);
    bson_string_append(s, "p");
    shape_append(s, proj, true);
    if (coll != NULL && !bson_empty(coll)) {
        bson_string_append(s, "c");
        shape_append(s, coll, true);
    }
    char *out = mf_strdup(s->str);
    bson_string_free(s, true);
    return out;
}

static bool
entry_of(const filter_entry_t *f, const mf_coll_t *c)
{
    return strcmp(f->ns, c->ns) == 0 && memcmp(f->uuid, c->uuid, 16) == 0;
}

/* Removes c's entries with shape (all when NULL) and entries of an older collection of c's name. filters_mu held. */
static void
remove_where(const mf_coll_t *c, const char *shape)
{
    for (filter_entry_t **p = &filters; *p != NULL;) {
        filter_entry_t *f = *p;
        bool stale = strcmp(f->ns, c->ns) == 0 && memcmp(f->uuid, c->uuid, 16) != 0;
        if (stale || (entry_of(f, c) && (shape == NULL || strcmp(f->shape, shape) == 0))) {
            *p = f->next;
            entry_free(f);
        } else {
            p = &f->next;
        }
    }
}

static bson_t *
copy_or_empty(const bson_t *b)
{
    return b != NULL ? bson_copy(b) : bson_new();
}

void
mf_index_filter_set(const mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                    const bson_t *collation, const bson_t *indexes)
{
    filter_entry_t *f = mf_calloc(1, sizeof(*f));
    f->ns = mf_strdup(c->ns);
    memcpy(f->uuid, c->uuid, 16);
    f->shape = shape_key(query, sort, projection, collation);
    f->query = copy_or_empty(query);
    f->sort = copy_or_empty(sort);
    f->projection = copy_or_empty(projection);
    f->collation = collation != NULL ? bson_copy(collation) : NULL;
    f->indexes = bson_copy(indexes);
    pthread_mutex_lock(&filters_mu);
    remove_where(c, f->shape);
    f->next = filters;
    filters = f;
    pthread_mutex_unlock(&filters_mu);
}

void
mf_index_filter_clear(const mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                      const bson_t *collation)
{
    char *shape = query != NULL ? shape_key(query, sort, projection, collation) : NULL;
    pthread_mutex_lock(&filters_mu);
    remove_where(c, shape);
    pthread_mutex_unlock(&filters_mu);
    free(shape);
}

void
mf_index_filter_list(const mf_coll_t *c, bson_t *arr)
{
    bson_t e;
    char key[16];
    int n = 0;
    pthread_mutex_lock(&filters_mu);
    for (filter_entry_t *f = filters; f != NULL; f = f->next) {
        if (!entry_of(f, c))
            continue;
        snprintf(key, sizeof(key), "%d", n++);
        BSON_APPEND_DOCUMENT_BEGIN(arr, key, &e);
        BSON_APPEND_DOCUMENT(&e, "query", f->query);
        BSON_APPEND_DOCUMENT(&e, "sort", f->sort);
        BSON_APPEND_DOCUMENT(&e, "projection", f->projection);
        if (f->collation)
            BSON_APPEND_DOCUMENT(&e, "collation", f->collation);
        BSON_APPEND_ARRAY(&e, "indexes", f->indexes);
        bson_append_document_end(arr, &e);
    }
    pthread_mutex_unlock(&filters_mu);
}

/* Whether ix is named by the filter's indexes array: by key pattern (exactly) or by name. */
static bool
names_index(const bson_t *indexes, const mf_index_t *ix)
{
    bson_iter_t it;
    bson_t key;
    bool have_key = mf_index_spec_key(ix->spec, &key);
    if (!bson_iter_init(&it, indexes))
        return false;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), ix->name) == 0)
            return true;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) && have_key) {
            const uint8_t *data;
            uint32_t len;
            bson_t kp;
            bson_iter_document(&it, &len, &data);
            if (bson_init_static(&kp, data, len) && bson_equal(&kp, &key))
                return true;
        }
    }
    return false;
}

bool
mf_index_filter_allowed(const mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                        bool *allowed)
{
    bool found = false;
    if (c == NULL)
        return false;
    pthread_mutex_lock(&filters_mu);
    if (filters == NULL) {
        pthread_mutex_unlock(&filters_mu);
        return false; /* the common case: no filter anywhere, no shape built */
    }
    char *shape = shape_key(query, sort, projection, NULL);
    for (filter_entry_t *f = filters; f != NULL && !found; f = f->next) {
        if (!entry_of(f, c) || strcmp(f->shape, shape) != 0)
            continue;
        found = true;
        for (int i = 0; i < c->nindexes; i++)
            allowed[i] = names_index(f->indexes, c->indexes[i]);
    }
    pthread_mutex_unlock(&filters_mu);
    free(shape);
    return found;
}
