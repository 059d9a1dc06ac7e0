/*
 * index_filter.c: the index filters of planCacheSetFilter (see
 * index_filter.h). Each collection keeps its own list of entries, newest
 * first, under its own mutex, hung on the collection (mf_coll_t.index_filters,
 * installed on the first planCacheSetFilter) and freed with it, so a dropped
 * and re-created collection starts with none and nothing is process-wide. A
 * lookup builds the request's shape key and compares strings; a collection
 * that never had a filter costs one atomic load.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "doc/value.h"
#include "index/index.h"
#include "query/index_filter.h"

typedef struct filter_entry {
    char *shape;
    bson_t *query, *sort, *projection, *collation; /* owned copies; collation may be NULL */
    bson_t *indexes;                               /* owned array */
    struct filter_entry *next;
} filter_entry_t;

/* One collection's filters (mf_coll_t.index_filters): freed with the collection. */
typedef struct coll_filters {
    pthread_mutex_t mu;
    filter_entry_t *head;
} coll_filters_t;

static void
entry_free(filter_entry_t *f)
{
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

static void
coll_filters_free(void *arg)
{
    coll_filters_t *cf = arg;
    while (cf->head != NULL) {
        filter_entry_t *f = cf->head;
        cf->head = f->next;
        entry_free(f);
    }
    pthread_mutex_destroy(&cf->mu);
    free(cf);
}

/*
 * c's filters, installed on first use when create (else NULL if c never had
 * one). index_filters is mutable state of a collection a reader may only
 * hold as const: the cast is for that field alone.
 */
static coll_filters_t *
filters_of(const mf_coll_t *cc, bool create)
{
    mf_coll_t *c = (mf_coll_t *)cc;
    coll_filters_t *cf = atomic_load(&c->index_filters);
    if (cf != NULL || !create)
        return cf;
    pthread_mutex_lock(&c->ts_mu);
    cf = atomic_load(&c->index_filters);
    if (cf == NULL) {
        cf = mf_calloc(1, sizeof(*cf));
        pthread_mutex_init(&cf->mu, NULL);
        c->index_filters_free = coll_filters_free;
        atomic_store(&c->index_filters, cf);
    }
    pthread_mutex_unlock(&c->ts_mu);
    return cf;
}

/* Removes the entries with shape (all when NULL). cf->mu held. */
static void
remove_where(coll_filters_t *cf, const char *shape)
{
    for (filter_entry_t **p = &cf->head; *p != NULL;) {
        filter_entry_t *f = *p;
        if (shape == NULL || strcmp(f->shape, shape) == 0) {
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
mf_index_filter_set(mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                    const bson_t *collation, const bson_t *indexes)
{
    coll_filters_t *cf = filters_of(c, true);
    filter_entry_t *f = mf_calloc(1, sizeof(*f));
    f->shape = shape_key(query, sort, projection, collation);
    f->query = copy_or_empty(query);
    f->sort = copy_or_empty(sort);
    f->projection = copy_or_empty(projection);
    f->collation = collation != NULL ? bson_copy(collation) : NULL;
    f->indexes = bson_copy(indexes);
    pthread_mutex_lock(&cf->mu);
    remove_where(cf, f->shape);
    f->next = cf->head;
    cf->head = f;
    pthread_mutex_unlock(&cf->mu);
}

void
mf_index_filter_clear(mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                      const bson_t *collation)
{
    coll_filters_t *cf = filters_of(c, false);
    if (cf == NULL)
        return;
    char *shape = query != NULL ? shape_key(query, sort, projection, collation) : NULL;
    pthread_mutex_lock(&cf->mu);
    remove_where(cf, shape);
    pthread_mutex_unlock(&cf->mu);
    free(shape);
}

void
mf_index_filter_list(const mf_coll_t *c, bson_t *arr)
{
    bson_t e;
    char key[16];
    int n = 0;
    coll_filters_t *cf = filters_of(c, false);
    if (cf == NULL)
        return;
    pthread_mutex_lock(&cf->mu);
    for (filter_entry_t *f = cf->head; f != NULL; f = f->next) {
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
    pthread_mutex_unlock(&cf->mu);
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
    coll_filters_t *cf = c != NULL ? filters_of(c, false) : NULL;
    if (cf == NULL)
        return false; /* the common case: this collection never had a filter, no lock taken, no shape built */
    pthread_mutex_lock(&cf->mu);
    if (cf->head != NULL) {
        char *shape = shape_key(query, sort, projection, NULL);
        for (filter_entry_t *f = cf->head; f != NULL && !found; f = f->next) {
            if (strcmp(f->shape, shape) != 0)
                continue;
            found = true;
            for (int i = 0; i < c->nindexes; i++)
                allowed[i] = names_index(f->indexes, c->indexes[i]);
        }
        free(shape);
    }
    pthread_mutex_unlock(&cf->mu);
    return found;
}
