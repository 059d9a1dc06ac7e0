/*
 * check.h: documents as they are stored (doc/check.c).
 */
#ifndef MF_DOC_CHECK_H
#define MF_DOC_CHECK_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/error.h"

/* mf_check_doc_for_storage: depth, size and field-name checks before a document is written. */
int mf_check_doc_for_storage(const bson_t *doc, mf_error_t *err) MF_WUR;

/* mf_doc_with_id_first: copies doc into out (initialised here) with _id first, generating an ObjectId if absent. */
void mf_doc_with_id_first(const bson_t *doc, bson_t *out);

/* mf_doc_id_is_first: whether doc's first field is _id. */
bool mf_doc_id_is_first(const bson_t *doc);

#endif /* MF_DOC_CHECK_H */
