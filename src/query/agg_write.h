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

/* Collections named so are $out's work in progress: dropped at start-up (a crash left them). */
#define MF_AGG_OUT_TMP_PREFIX "tmp.agg_out."

/*
 * A writer puts a pipeline's output into db.coll: $out when merge_spec is
 * NULL (the target's contents replaced atomically at commit), else $merge
 * with merge_spec ({on, whenMatched, whenNotMatched}). Commits with sync
 * when durable. With validate (the command's bypassDocumentValidation
 * unset), every document written must pass the target's validator ($out:
 * the one it keeps), as mongod: 121 DocumentValidationFailure fails the
 * stage ($out writes nothing). begin checks the target (mongod's parse-time
 * checks: a view, a missing unique index for $merge's on fields).
 *
 * It lets a pipeline stream its output: begin, append batches, commit,
 * free (free without commit undoes an $out: the target is untouched). Each
 * call takes catalog lock sessions itself: call with none held. append
 * checks every document for storage first (a failure writes nothing of that
 * batch) and does not take ownership of docs. begin returns the writer
 * (owned by the caller), or NULL with err; the others 0 or -1 with err.
 */
typedef struct mf_agg_writer mf_agg_writer_t;

mf_agg_writer_t *mf_agg_writer_begin(mf_catalog_t *cat, mf_sess_t *s, bool durable, bool validate, const char *db,
                                     const char *coll, const bson_t *merge_spec, mf_error_t *err);

/*
 * mf_agg_writer_begin_out_ts: as mf_agg_writer_begin for an $out whose
 * stage has the 'timeseries' option (ts, the option's value): the target
 * is, or becomes, a time-series collection with those options.
 * (agg.c refuses the option at parse time for now: 238.)
 */
mf_agg_writer_t *mf_agg_writer_begin_out_ts(mf_catalog_t *cat, mf_sess_t *s, bool durable, bool validate,
                                            const char *db, const char *coll, const bson_value_t *ts,
                                            mf_error_t *err);

int mf_agg_writer_append(mf_agg_writer_t *wr, mf_docvec_t *docs, mf_error_t *err) MF_WUR;
int mf_agg_writer_commit(mf_agg_writer_t *wr, mf_error_t *err) MF_WUR;
void mf_agg_writer_free(mf_agg_writer_t *wr);

#endif /* MF_AGG_WRITE_H */
