/*
 * agg.h: aggregation pipelines.
 *
 * A pipeline is parsed once (every stage validated up front) and run over a
 * source of documents supplied by the caller through mf_agg_env_t, so this
 * module never touches storage. Stages: $match $project $addFields $set
 * $unset $sort $limit $skip $group (accumulators $sum $avg $min $max $first
 * $last $push $addToSet $count) $count $unwind (string and document forms,
 * includeArrayIndex, preserveNullAndEmptyArrays) $replaceRoot $replaceWith
 * $sortByCount $lookup (localField/foreignField equality form) $facet is
 * optional. Unknown stage → 40324 ("Unrecognized pipeline stage name: '$foo'").
 */
#ifndef MF_AGG_H
#define MF_AGG_H

#include <bson/bson.h>

#include "common/docvec.h"
#include "common/error.h"

/* Visitor for mf_agg_env_t.scan: return 0 to continue, 1 to stop early, -1 on error. */
typedef int (*mf_agg_visit_fn)(void *arg, const bson_t *doc);

typedef struct mf_agg_env {
    /*
     * scan: calls visit for every document of collection coll in the
     * pipeline's database that matches filter (filter may be NULL = all). The
     * document passed to visit is valid only during the call. Returns 0, or
     * -1 with err. A missing collection scans as empty.
     */
    int (*scan)(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg,
                mf_error_t *err);
    void *ctx;
} mf_agg_env_t;

typedef struct mf_pipeline mf_pipeline_t;

/* mf_pipeline_new: parses an array of stages (pipeline is the array value). NULL with err on error. */
mf_pipeline_t *mf_pipeline_new(const bson_value_t *pipeline, mf_error_t *err);
void mf_pipeline_free(mf_pipeline_t *p);

/*
 * mf_pipeline_run: runs p with collection coll as its source (read through
 * env->scan, passing a leading $match's filter down), appending the results to
 * out. Returns 0, or -1 with err.
 */
int mf_pipeline_run(const mf_pipeline_t *p, const mf_agg_env_t *env, const char *coll, mf_docvec_t *out,
                    mf_error_t *err) MF_WUR;

/* mf_pipeline_first_match: the filter of a leading $match stage, or NULL (valid while p lives). */
const bson_t *mf_pipeline_first_match(const mf_pipeline_t *p);

#endif /* MF_AGG_H */
