/*
 * agg_window.h: the $setWindowFields stage (internal to query/agg.c).
 *
 * agg.c parses the stage with mf_window_new and runs it either over a whole
 * vector of documents (mf_window_run, the materialising path) or as a
 * stream (mf_window_stream_*: documents go in one by one through an external
 * sorter ordered by partition key then sortBy, and come out one partition
 * at a time). See agg_window.c for the design.
 */
#ifndef MF_AGG_WINDOW_H
#define MF_AGG_WINDOW_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/docvec.h"
#include "common/error.h"

typedef struct mf_window mf_window_t;
typedef struct mf_window_stream mf_window_stream_t;

/* mf_window_new: parses the stage's argument v. NULL with err (MongoDB's codes) when invalid. */
mf_window_t *mf_window_new(const bson_value_t *v, mf_error_t *err);
void mf_window_free(mf_window_t *w);

/*
 * mf_window_run: runs w over every document of in (consumed: in is
 * destroyed, its documents freed or moved) and appends the results to out,
 * partition by partition in (partitionBy, sortBy) order. 0, or -1 with err.
 */
int mf_window_run(const mf_window_t *w, mf_docvec_t *in, mf_docvec_t *out, mf_error_t *err) MF_WUR;

/*
 * Streaming. sort_bytes is the sorter's budget (292 past it without
 * allow_disk, else sorted runs under tmp_dir); part_bytes bounds one
 * partition held in memory (5643011 past it without allow_disk). w must
 * outlive the stream.
 */
mf_window_stream_t *mf_window_stream_new(const mf_window_t *w, int64_t sort_bytes, int64_t part_bytes,
                                         bool allow_disk, const char *tmp_dir);
void mf_window_stream_free(mf_window_stream_t *ws);
/* mf_window_stream_add: takes ownership of doc. 0 or -1 with err. */
int mf_window_stream_add(mf_window_stream_t *ws, bson_t *doc, mf_error_t *err) MF_WUR;
/* mf_window_stream_finish: end of input. 0 or -1 with err. */
int mf_window_stream_finish(mf_window_stream_t *ws, mf_error_t *err) MF_WUR;
/* mf_window_stream_next: appends the next partition's results to out; *eof once none is left. */
int mf_window_stream_next(mf_window_stream_t *ws, mf_docvec_t *out, bool *eof, mf_error_t *err) MF_WUR;
/* mf_window_stream_spills: sorted runs written by the stream's sorter. */
int64_t mf_window_stream_spills(const mf_window_stream_t *ws);

#endif /* MF_AGG_WINDOW_H */
