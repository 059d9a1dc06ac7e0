/*
 * agg_write.h: performing $out and $merge (query/agg_write.c).
 */
#ifndef MF_AGG_WRITE_H
#define MF_AGG_WRITE_H

#include <bson/bson.h>
#include <stdbool.h>

#include "catalog/catalog.h"
#include "common/docvec.h"
#include "common/error.h"
#include "storage/storage.h"

/*
 * mf_agg_write: writes docs (a pipeline's output) to db.coll: $out when
 * merge_spec is NULL (the target's contents replaced atomically), else
 * $merge with merge_spec ({on, whenMatched, whenNotMatched}). Commits with
 * sync when durable. Takes catalog lock sessions itself: call with none
 * held. Returns 0, or -1 with err.
 */
int mf_agg_write(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, mf_docvec_t *docs,
                 const bson_t *merge_spec, mf_error_t *err) MF_WUR;

#endif /* MF_AGG_WRITE_H */
