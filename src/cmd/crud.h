/*
 * crud.h: what the CRUD command family (cmd_crud.c, cmd_find.c,
 * cmd_write.c, cmd_agg.c, cmd_explain.c) shares: the command handlers the
 * table in cmd_crud.c names, and helpers one file uses from another. Private
 * to src/cmd/.
 */
#ifndef MF_CRUD_H
#define MF_CRUD_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "common/docvec.h"
#include "doc/match.h"
#include "doc/project.h"
#include "engine/cursor.h"
#include "query/agg.h"
#include "query/plan.h"

/*
 * cmd_coll.c: the document $collStats yields for db.name: ns, host,
 * localTime and the sections spec (the stage's argument; NULL: {}) asks
 * for, as mongod: latencyStats (the namespace's operation latencies, with
 * the buckets when {histograms: true}), storageStats and count (both need
 * the collection: 26 NamespaceNotFound without it).
 */
int mf_cmd_coll_stats_doc(mf_op_t *op, const char *name, const bson_iter_t *spec, bson_t *out);

#ifndef MF_VERSION
#define MF_VERSION "8.0.0" /* as cmd_admin.c reports it */
#endif
#define FIRST_BATCH_DEFAULT 101

/* ---------- shared helpers (cmd_crud.c) ---------- */

/* Takes the catalog lock shared and finds db.name; with create, creates it first. */
int mf_crud_coll_acquire(mf_op_t *op, const char *name, bool create, mf_coll_t **out);

bool mf_crud_want_durable(mf_op_t *op);

void mf_crud_append_write_error(bson_t *arr, int *nerr, size_t index, const mf_error_t *err);

int mf_crud_check_batch_size(mf_op_t *op, size_t n);

int mf_crud_get_ordered(mf_op_t *op, bool *ordered);

/*
 * Statement tracking for retryable writes (engine.h's stmt hook):
 * mf_crud_stmt_note tells replication that statement i (an index into the
 * command's array) begins or failed, or that the command cannot say
 * (MF_STMT_UNTRACKED); nothing without replication. mf_crud_stmt_done: a
 * retried command's statement i was done by its first attempt (op->resume),
 * so the handler skips it.
 */
void mf_crud_stmt_note(mf_op_t *op, size_t i, mf_stmt_event_t what);
/*
 * mf_crud_stmt_failed: statement i failed with err without writing: noted
 * MF_STMT_FAILED, unless err is an interruption, which fails the whole
 * command (a retry runs it again from the row's s).
 */
void mf_crud_stmt_failed(mf_op_t *op, size_t i, const mf_error_t *err);
bool mf_crud_stmt_done(const mf_op_t *op, size_t i);
/*
 * mf_crud_check_ns: mongod's userAllowedWriteNS / userAllowedCreateNS
 * (create) for db.coll, the error into err: writes to system.profile,
 * system.views and, on a replica set, local.oplog.rs are 73 InvalidNamespace
 * "cannot write to db.coll" (creating system.profile or system.views is
 * allowed); another system.* collection is 73 "Invalid system namespace:
 * db.system.x" unless clients may use it (isLegalClientSystemNS:
 * system.users, system.js, system.views, buckets, admin's and config's own
 * ...); ".system." inside a name is 2 "Invalid namespace: db.coll" (but
 * config.cache.chunks.*). Replication's own writes pass.
 * mf_crud_check_write_ns: the same for a collection of op->db, into op->err.
 */
int mf_crud_check_ns(mf_op_t *op, const char *db, const char *coll, bool create, mf_error_t *err) MF_WUR;
int mf_crud_check_write_ns(mf_op_t *op, const char *coll, bool create) MF_WUR;

/* bypassDocumentValidation: true skips the collection's validator for this command. */
bool mf_crud_bypass_validation(mf_op_t *op);
/*
 * mf_crud_write_flags: a write command's MF_WRITE_* flags (query/write.h):
 * the validator unless bypassDocumentValidation; Timestamp(0, 0) kept for
 * bypassEmptyTsReplacement and for replication's own writes (an internal
 * client: the oplog applier, an initial sync).
 */
unsigned mf_crud_write_flags(mf_op_t *op);

/* 166 CommandNotSupportedOnView for a write (or index DDL) aimed at view c. */
int mf_crud_view_write_error(mf_error_t *err, const mf_coll_t *c);

/*
 * mf_crud_optimize_context: err failed a pipeline's optimization
 * (mf_error_t.optimizing: a constant that does not fold): gets mongod's
 * "Failed to optimize pipeline" context, as Pipeline::optimizePipeline adds
 * it, for the commands that optimize one (aggregate, a find on a view,
 * explain, a change stream). Returns -1.
 */
int mf_crud_optimize_context(mf_error_t *err);

/* ---------- find, getMore, count, distinct (cmd_find.c) ---------- */

int mf_crud_cursor_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted);

/*
 * mf_crud_batch_add: appends doc to the batch array arr as element *count
 * as mongod fills a cursor batch: 0 added; 1 no room (the batch holds 16
 * MiB: the caller keeps doc for the next batch); -1 with err (10334) for a
 * document over 16 MiB + 16 KiB. Does not take ownership of doc.
 */
int mf_crud_batch_add(bson_t *arr, int64_t *count, const bson_t *doc, mf_error_t *err) MF_WUR;

/* Appends {cursor: {<batch>: arr, id, ns}} to the reply. */
void mf_crud_append_cursor_reply(mf_op_t *op, const char *batch_name, bson_t *arr, int64_t id, const char *coll);
/* mf_crud_append_cursor_reply_token: the same with postBatchResumeToken (a change stream's; NULL: none). */
void mf_crud_append_cursor_reply_token(mf_op_t *op, const char *batch_name, bson_t *arr, int64_t id,
                                       const char *coll, const bson_t *token);

/*
 * mf_cmd_changestream_open: an aggregate whose first stage is
 * $changeStream, on a replica-set member (cmd_changestream.c). coll is the
 * collection, or NULL for {aggregate: 1}; pipeline the command's pipeline
 * array; batch the first batch's size. Fills op->reply; 0 or -1 with op->err.
 */
int mf_cmd_changestream_open(mf_op_t *op, const char *coll, const bson_value_t *pipeline, int64_t batch) MF_WUR;

/*
 * mf_crud_doc_field: doc's field key when it is a document, read into *store
 * (a view into doc); NULL when absent or of another type. For what a
 * planner error shows of a command (mf_plan_shown_t).
 */
const bson_t *mf_crud_doc_field(const bson_t *doc, const char *key, bson_t *store);

/*
 * mf_crud_get_hint: the "hint" field of doc (a command or a statement): an index
 * name or a key pattern ({$natural: 1} included). *hint is a view into doc,
 * NULL when absent. A hint of another type is 2 BadValue.
 */
int mf_crud_get_hint(mf_op_t *op, const bson_t *doc, const bson_value_t **hint, bson_value_t *store);

int mf_cmd_find(mf_op_t *op);

int mf_cmd_get_more(mf_op_t *op);

int mf_cmd_kill_cursors(mf_op_t *op);

int mf_cmd_count(mf_op_t *op);

int mf_cmd_distinct(mf_op_t *op);

/*
 * mf_crud_distinct_projection: the projection of mongod's distinct query
 * (getDistinctProjection): {_id: 0, key: 1}, the key cut before its first
 * numeric component (a.b.2 is 'a.b'), no _id: 0 when that is _id. Into
 * *out (bson_init'ed here; the caller destroys it).
 */
void mf_crud_distinct_projection(const char *key, bson_t *out);

/* ---------- insert, update, delete, findAndModify (cmd_write.c) ---------- */

int mf_cmd_insert(mf_op_t *op);

int mf_cmd_update(mf_op_t *op);

int mf_cmd_delete(mf_op_t *op);

/* bulkWrite (cmd_bulkwrite.c): 8.0's client-level bulk write on admin. */
int mf_cmd_bulk_write(mf_op_t *op);

int mf_cmd_find_and_modify(mf_op_t *op);

/* ---------- aggregate (cmd_agg.c) ---------- */

/*
 * mf_crud_agg_views_collation: 0 if every view pl reads ($lookup,
 * $graphLookup, $unionWith, nested) has the thread's current collation (the
 * operation's) as its default; else -1 with 167 OptionNotSupportedOnView in
 * op->err (mongod's collatorCompatibleWithPipeline). Takes the catalog's
 * shared lock itself.
 */
int mf_crud_agg_views_collation(mf_op_t *op, const mf_pipeline_t *pl);

/*
 * mf_crud_agg_plan_prefix: plans pl's pushed-down prefix over c (may be NULL) as
 * find would: the leading $sort is pushed down only when the chosen plan
 * provides its order (else the pipeline's own spilling $sort runs it, over
 * a covered scan's decoded keys when mf_crud_agg_cover_tail allows).
 * out_proj (may be NULL): the find projection applied to the pipeline's
 * results (a find's blocking sort), out_parsed its parsed form. Sets *pd
 * and *plan (owned by the caller). Catalog lock held. 0 or -1.
 */
int mf_crud_agg_plan_prefix(mf_op_t *op, const mf_coll_t *c, const mf_pipeline_t *pl, const bson_value_t *hint,
                            const bson_t *out_proj, const mf_projection_t *out_parsed, mf_agg_pushdown_t *pd,
                            mf_plan_t **plan);

/*
 * mf_crud_agg_cover_tail: when nothing but a $sort (then $skip / $limit)
 * and a projection read what pl's pushed-down prefix pd yields, that
 * projection (a $project after them, or out_proj at the end, may be NULL)
 * (out_parsed its parsed form) and the sort become req's cover_projection,
 * cover_parsed and cover_sort (a covered scan then hands the $sort decoded
 * keys, mongod's SORT over an IXSCAN with no FETCH); else req is left as
 * it is. Valid while pl and out_proj are.
 */
void mf_crud_agg_cover_tail(const mf_pipeline_t *pl, const mf_agg_pushdown_t *pd, const bson_t *out_proj,
                            const mf_projection_t *out_parsed, mf_plan_request_t *req);

/*
 * mf_crud_agg_explain_run: runs pl (borrowed: it must outlive *stream)
 * over collection coll as aggregate streams it (pushed-down prefix planned
 * by mf_crud_agg_plan_prefix, the rest through mf_agg_stream with
 * statistics), discarding the results and writing nothing, for explain at
 * executionStats. cmd: the aggregate command (its allowDiskUse). Sets *pd,
 * *plan (the run plan, its counters filled) and *stream (its stages'
 * statistics), both owned by the caller. Catalog lock held. 0, or -1 with
 * op->err (nothing set).
 */
int mf_crud_agg_explain_run(mf_op_t *op, const char *coll, mf_pipeline_t *pl, const bson_value_t *hint,
                            const bson_t *cmd, mf_agg_pushdown_t *pd, mf_plan_t **plan, mf_agg_stream_t **stream);

/*
 * mf_crud_agg_stream_fill: the rest of the next batch of a streaming
 * aggregation cursor, whose first count documents arr already holds, up to
 * max documents in all (mf_crud_batch_add's rules; a document with no room
 * goes to cur->stash). Catalog lock held. 0, or -1 with op->err.
 */
int mf_crud_agg_stream_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, int64_t count, bson_t *arr,
                            bool *exhausted);

/*
 * Views. A read of a view is the view's pipeline (resolved through views on
 * views down to a collection) followed by the reader's own stages, streamed
 * as aggregate streams a pipeline over a collection, with the leading
 * $match/$sort/$skip/$limit/$project pushed into the planner.
 *
 * mf_crud_view_each: calls visit for every result of stages (an array
 *   document: the stages a count or distinct becomes) over view name;
 *   visit returning > 0 stops early. 0 or -1 with op->err.
 *   hint (may be NULL) plans the resolved pipeline over the underlying
 *   collection, as mongod keeps a view read's hint (a bad one is 2).
 * mf_crud_view_cursor: makes cur a streaming (MF_CURSOR_EXT) cursor over
 *   the results of stages over name, a view or a collection (a find on a
 *   view, or a find whose sort no index provides: the $sort then keeps the
 *   sort memory budget and spills, or answers 292 without allow_disk).
 *   hint: as for mf_crud_view_each. proj (find semantics, may be NULL)
 *   is applied to each result, with m (the find's filter, may be NULL) for
 *   the positional operator; both are stolen, even on failure. cover_proj
 *   (may be NULL, borrowed for the call): proj's spec, when a covered scan
 *   may feed a trailing $sort (mf_crud_agg_cover_tail). 0 or -1 with
 *   op->err.
 * mf_crud_view_resolve: (cmd_agg.c) the resolved pipeline and collection.
 *   A view whose definition starts with $collStats ends the resolution
 *   (mongod's resolveView): *base is its viewOn, even when that is a view.
 * All: the caller holds the catalog lock shared.
 */
bool mf_crud_stages_start_with(const bson_value_t *stages, const char *stage);
int mf_crud_view_resolve(mf_op_t *op, const char *name, const bson_value_t *stages, int *depth, char **base, bson_t *all,
                         mf_error_t *err);
int mf_crud_view_each(mf_op_t *op, const char *name, const bson_t *stages, const bson_value_t *hint, mf_agg_visit_fn visit,
                      void *arg);
int mf_crud_view_cursor(mf_op_t *op, const char *name, const bson_t *stages, const bson_value_t *hint, bool allow_disk,
                        mf_projection_t *proj, const bson_t *cover_proj, mf_matcher_t *m, mf_cursor_t *cur);
/*
 * mf_crud_cursor_set_geo_meta: the leading $geoNear of a cursor made by
 * mf_crud_view_cursor (a $near find) adds the hidden metadata fields its
 * projection's {$meta: "geoNearDistance" | "geoNearPoint"} reads; results
 * are stripped of them.
 */
void mf_crud_cursor_set_geo_meta(mf_cursor_t *cur);

/*
 * mf_crud_cursor_set_return_key: a $near find's returnKey: each result of a
 * cursor made by mf_crud_view_cursor becomes the key of index ix (the one
 * its $geoNear searches) that the document has, named by the key pattern's
 * fields, as mongod's ReturnKeyStage reads the key the near scan found it
 * by (a document with several keys, a polygon's cells: its first key in
 * index order). Copies what it needs of ix. 0 or -1 with err.
 */
int mf_crud_cursor_set_return_key(mf_cursor_t *cur, const struct mf_index *ix, mf_error_t *err) MF_WUR;

/*
 * mf_crud_near_index: the geo index of c a $near find's $geoNear stage (gn,
 * from mf_geonear_from_find) searches: the field and kind
 * mf_geonear_prepare chooses for the run itself (query/agg_geo.c), and of
 * c's usable (not building, not hidden) indexes the first with that kind on
 * that field. NULL when the run would find none (it then fails, 291). A view
 * into c (catalog lock held).
 */
const struct mf_index *mf_crud_near_index(const struct mf_coll *c, const bson_t *gn);

/*
 * mf_crud_return_key_doc: appends to out returnKey's document for doc found
 * by the index key (key, len: an encoded key without record id) of an index
 * whose key pattern is key_pattern: {field: value} per key field, values
 * with doc's own numeric type where equal.
 */
void mf_crud_return_key_doc(const bson_t *key_pattern, const uint8_t *key, size_t len, const bson_t *doc, bson_t *out);

/* Appends {<stage>: doc} as the next element of the stages array. */
void mf_crud_stage_doc(bson_t *stages, int *n, const char *stage, const bson_t *doc);

void mf_crud_stage_int(bson_t *stages, int *n, const char *stage, int64_t v);

int mf_cmd_aggregate(mf_op_t *op);

/*
 * mf_crud_allow_disk: whether an explained or explaining command cmd (may
 * be NULL) may spill to disk: its boolean allowDiskUse, else the
 * allowDiskUseByDefault parameter. (Type errors are the command's own
 * parsing's to report.)
 */
bool mf_crud_allow_disk(mf_op_t *op, const bson_t *cmd);

/*
 * mf_crud_agg_explain_run_alone: runs pl (borrowed: it must outlive
 * *stream), a pipeline that reads no collection ({aggregate: 1}'s, or the
 * stages after a leading $collStats, whose document source (may be NULL)
 * is then their only input), to its end with statistics, discarding the
 * results, for explain at executionStats. 0 with *stream (the caller's to
 * free), or -1 with op->err.
 */
int mf_crud_agg_explain_run_alone(mf_op_t *op, mf_pipeline_t *pl, const bson_t *cmd, const bson_t *source,
                                  mf_agg_stream_t **stream);

/* ---------- explain (cmd_explain.c) ---------- */

int mf_crud_explain_aggregate(mf_op_t *op, const bson_t *cmd, const char *verbosity);

int mf_cmd_explain(mf_op_t *op);

#endif /* MF_CRUD_H */
