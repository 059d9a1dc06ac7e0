/*
 * docvec.c: growable vector of owned BSON documents (see docvec.h).
 */
#include "common/alloc.h"
#include "common/docvec.h"

#include <stdlib.h>

void
mf_docvec_init(mf_docvec_t *v)
{
    v->docs = NULL;
    v->len = 0;
    v->cap = 0;
}

void
mf_docvec_destroy(mf_docvec_t *v)
{
    for (size_t i = 0; i < v->len; i++)
        bson_destroy(v->docs[i]);
    free(v->docs);
    mf_docvec_init(v);
}

void
mf_docvec_push_steal(mf_docvec_t *v, bson_t *doc)
{
    if (v->len == v->cap) {
        size_t ncap = v->cap ? v->cap * 2 : 16;
        bson_t **n = mf_realloc(v->docs, ncap * sizeof(*n));
        if (n == NULL)
            abort();
        v->docs = n;
        v->cap = ncap;
    }
    v->docs[v->len++] = doc;
}

void
mf_docvec_push(mf_docvec_t *v, const bson_t *doc)
{
    mf_docvec_push_steal(v, bson_copy(doc));
}
