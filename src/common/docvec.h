/*
 * docvec.h: a growable vector of owned BSON documents.
 *
 * Used wherever a stage materialises documents (sorts, aggregation results,
 * cursors that outlive a command). The vector owns every bson_t it holds:
 * mf_docvec_push copies, mf_docvec_push_steal takes ownership.
 */
#ifndef MF_DOCVEC_H
#define MF_DOCVEC_H

#include <bson/bson.h>
#include <stddef.h>

typedef struct mf_docvec {
    bson_t **docs; /* owned; each from bson_copy / bson_new */
    size_t len;
    size_t cap;
} mf_docvec_t;

void mf_docvec_init(mf_docvec_t *v);
/* Frees every document and the array; v is left empty and reusable. */
void mf_docvec_destroy(mf_docvec_t *v);
/* Appends a copy of doc. */
void mf_docvec_push(mf_docvec_t *v, const bson_t *doc);
/* Appends doc itself; takes ownership of doc (a heap bson_t from bson_new/bson_copy). */
void mf_docvec_push_steal(mf_docvec_t *v, bson_t *doc);

#endif /* MF_DOCVEC_H */
