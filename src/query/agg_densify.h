/*
 * agg_densify.h: the $densify and $fill stages (internal to query/agg.c).
 *
 * Both are desugared at parse time, as mongod desugars them
 * (mf_densify_desugar): $densify into a $sort on (partition fields, field)
 * followed by $_internalDensify, the stage that generates the missing
 * documents from sorted input; $fill into a $setWindowFields with $locf /
 * $linearFill outputs and an $addFields of {$ifNull: ["$f", value]}. Only
 * $_internalDensify is a stage of its own: agg.c parses it with
 * mf_densify_new and runs it as a pull iterator (mf_densify_next) over its
 * input, streaming or over a materialised vector (mf_densify_run). See
 * agg_densify.c for the design.
 */
#ifndef MF_AGG_DENSIFY_H
#define MF_AGG_DENSIFY_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/docvec.h"
#include "common/error.h"

typedef struct mf_densify mf_densify_t;
typedef struct mf_densify_run mf_densify_run_t;

/*
 * mf_densify_desugar: for a stage named "$densify" or "$fill" with argument
 * v, validates it (MongoDB's codes) and initialises *stages with the array
 * of stage documents it stands for ({"0": {$sort: ...}, "1": {...}}; the
 * caller destroys it); returns 1. Returns 0 (stages untouched) for any other
 * name, -1 with err when invalid. A $fill whose outputs name no method nor
 * value stands for a no-op {$match: {}}.
 */
int mf_densify_desugar(const char *name, const bson_value_t *v, bson_t *stages, mf_error_t *err) MF_WUR;

/* mf_densify_new: parses a $_internalDensify argument. NULL with err when invalid. */
mf_densify_t *mf_densify_new(const bson_value_t *v, mf_error_t *err);
void mf_densify_free(mf_densify_t *d);

/*
 * A run's input: *doc is the next document (owned by the caller of
 * pull from then on) or NULL at the end of input, which pull must keep
 * answering. 0, or -1 with err.
 */
typedef int (*mf_densify_pull_fn)(void *arg, bson_t **doc, mf_error_t *err);

/*
 * mf_densify_run_new: one run of d (d must outlive it). max_docs is
 * internalQueryMaxAllowedDensifyDocs (5897900 once more documents are
 * generated; <= 0: 500,000), max_bytes internalDocumentSourceDensifyMaxMemoryBytes
 * for the table of partitions (6007200; <= 0: 100 MB).
 */
mf_densify_run_t *mf_densify_run_new(const mf_densify_t *d, int64_t max_docs, int64_t max_bytes);
void mf_densify_run_free(mf_densify_run_t *r);

/*
 * mf_densify_next: the run's next output document (owned by the caller;
 * NULL at the end), pulling input through pull as needed. 0, or -1 with err
 * (the run is then unusable).
 */
int mf_densify_next(mf_densify_run_t *r, mf_densify_pull_fn pull, void *arg, bson_t **out, mf_error_t *err) MF_WUR;

/* mf_densify_run: runs d over every document of in (consumed: in is destroyed) and appends the results to out. */
int mf_densify_run(const mf_densify_t *d, int64_t max_docs, int64_t max_bytes, mf_docvec_t *in, mf_docvec_t *out,
                   mf_error_t *err) MF_WUR;

#endif /* MF_AGG_DENSIFY_H */
