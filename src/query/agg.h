/*
 * agg.h: aggregation pipelines.
 *
 * A pipeline is parsed once (every stage validated up front) and run over a
 * source of documents supplied by the caller through mf_agg_env_t, so this
 * module never touches storage. Stages: $match $project $addFields $set
 * $unset $sort $limit $skip $group (accumulators $sum $avg $min $max $first
 * $last $push $addToSet $count) $count $unwind (string and document forms,
 * includeArrayIndex, preserveNullAndEmptyArrays) $replaceRoot $replaceWith
 * $sortByCount $lookup $facet $sample $bucket, the source stages $documents
 * and $currentOp, and the final write stages $out and $merge. $group (and
 * $bucket's output) also has $mergeObjects $stdDevPop $stdDevSamp, the
 * array accumulators $setUnion $concatArrays, the "n" accumulators $firstN
 * $lastN $minN $maxN $top $bottom $topN $bottomN, and $median / $percentile
 * (method 'approximate', answered with the discrete percentile). Also
 * $redact, $bucketAuto (granularity series R5..R80, 1-2-5, E6..E192,
 * POWERSOF2), $unionWith ("coll", {coll, pipeline}, or {pipeline} starting
 * with $documents; the other collection, or view, is read through
 * env->scan) and $graphLookup (a breadth-first search of 'from' through
 * env->scan, one scan per depth) and $geoNear (query/agg_geo.h; first
 * stage only, reads the source's index specs through env->source_indexes;
 * a $near / $nearSphere in a $match is 5626500). $setWindowFields lives in
 * query/agg_window.c, $densify and $fill (desugared) in query/agg_densify.c. Unknown stage → 40324
 * ("Unrecognized pipeline stage name: '$foo'").
 *
 * $lookup forms: equality (localField/foreignField), correlated subquery
 * (let + pipeline: the let variables, evaluated against each local document,
 * are visible as $$name everywhere in the sub-pipeline, e.g. in
 * {$match: {$expr: {$eq: ["$x", "$$v"]}}}), and both combined (the equality
 * match selects the foreign documents, then the pipeline runs over them).
 * 'from' may be omitted when the sub-pipeline starts with $documents. The
 * foreign collection is read through env->scan.
 *
 * $out ("coll" or {db, coll}) and $merge ("coll" or {into, on, let,
 * whenMatched, whenNotMatched}; whenMatched pipelines are not supported,
 * 238 NotImplemented) must be last (40601) and may not appear inside $lookup
 * (51047) or $facet (40600). Their documents go to env->write_out; the
 * pipeline itself then returns no documents.
 *
 * Collectionless pipelines (aggregate: 1). A pipeline whose first stage is
 * $documents, $currentOp, $listLocalSessions or $listSessions (the last two
 * through env->list_sessions) does not read a collection: mf_pipeline_run never
 * calls env->scan for it and ignores coll (which may be NULL). These stages
 * must be first (else 40602 "<stage> is only valid as the first stage in a
 * pipeline"). The command layer should:
 *   - call mf_pipeline_is_collectionless(p) for {aggregate: 1}; if false,
 *     answer 73 InvalidNamespace itself ({aggregate: 1} needs such a stage);
 *   - for $currentOp (mf_pipeline_is_current_op(p)) set env->current_op only
 *     when the command runs on the admin database; with current_op NULL the
 *     stage fails with 73 InvalidNamespace ("$currentOp must be run against
 *     the 'admin' database with {aggregate: 1}"), as MongoDB answers. A
 *     $currentOp on a named collection should also be refused by the command
 *     layer with that error (pass current_op NULL and the stage does it).
 */
#ifndef MF_AGG_H
#define MF_AGG_H

/*
 * mongod 8.0's messages without a search server (mongot): the $search,
 * $searchMeta and $vectorSearch stages, and the search index commands with
 * $listSearchIndexes; both are 31082 SearchNotEnabled.
 */
#define MF_SEARCH_NOT_ENABLED                                                                                  \
    "Using $search and $vectorSearch aggregation stages requires additional configuration. Please connect to " \
    "Atlas or an AtlasCLI local deployment to enable. For more information on how to connect, see "           \
    "https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs."
#define MF_SEARCH_INDEX_NOT_ENABLED                                                                             \
    "Using Atlas Search Database Commands and the $listSearchIndexes aggregation stage requires additional "   \
    "configuration. Please connect to Atlas or an AtlasCLI local deployment to enable. For more information "  \
    "on how to connect, see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs."

#include <bson/bson.h>
#include <stdbool.h>

#include "common/docvec.h"
#include "common/error.h"

struct mf_projection; /* doc/project.h */

/* Visitor for mf_agg_env_t.scan: return 0 to continue, 1 to stop early, -1 on error. */
typedef int (*mf_agg_visit_fn)(void *arg, const bson_t *doc);

/*
 * What the reads of another collection (a $lookup's) examined, for explain
 * (mongod's PlanSummaryStats of the sub-pipelines: totalDocsExamined,
 * totalKeysExamined, collectionScans, indexesUsed). indexes: owned,
 * distinct names in first-use order.
 */
typedef struct mf_agg_scan_stats {
    int64_t docs_examined, keys_examined, collection_scans;
    char **indexes;
    size_t nindexes;
} mf_agg_scan_stats_t;

/* mf_agg_scan_stats_add_index: records that index name was used (once). */
void mf_agg_scan_stats_add_index(mf_agg_scan_stats_t *s, const char *name);
/* mf_agg_scan_stats_destroy: frees what s holds (s itself is the caller's). */
void mf_agg_scan_stats_destroy(mf_agg_scan_stats_t *s);

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
    /*
     * current_op (optional, may be NULL): the rows of a $currentOp stage.
     * spec is the stage's validated options document ({allUsers: bool,
     * idleConnections: bool, idleCursors: bool, idleSessions: bool,
     * localOps: bool, backtrace: bool, truncateOps: bool, targetAllNodes:
     * bool}, any subset, possibly empty). Appends one document per operation
     * to out (the callee pushes owned copies), returns 0, or -1 with err.
     * NULL means "not on admin": the stage fails with 73 InvalidNamespace.
     * Later stages ($match, $project...) run over the rows as usual.
     */
    int (*current_op)(void *ctx, const bson_t *spec, mf_docvec_t *out, mf_error_t *err);
    /*
     * write_out (optional, may be NULL: then $out / $merge fail with 20
     * IllegalOperation): receives the documents reaching a final $out or
     * $merge stage. db is the target database, or NULL for the pipeline's
     * own; coll the target collection. merge_spec is NULL for $out, and for
     * $merge the normalised options {on: [field, ...], whenMatched:
     * "replace"|"keepExisting"|"merge"|"fail", whenNotMatched:
     * "insert"|"discard"|"fail"} (valid during the call). The callee may
     * take ownership of documents in docs (leaving the vector empty); the
     * pipeline destroys whatever is left. It may perform the writes at once
     * or record them to perform after the pipeline returns (the command
     * layer does the latter, outside the catalog read lock). Returns 0, or
     * -1 with err.
     */
    int (*write_out)(void *ctx, const char *db, const char *coll, mf_docvec_t *docs, const bson_t *merge_spec,
                     mf_error_t *err);
    /*
     * pull (streaming only, see mf_agg_stream_next): appends up to max
     * documents (owned copies) of the pipeline's source, i.e. the
     * pushed-down plan's output, to out, and sets *eof once the source has
     * nothing more. Returns 0, or -1 with err.
     */
    int (*pull)(void *ctx, size_t max, mf_docvec_t *out, bool *eof, mf_error_t *err);
    /*
     * pull_count (streaming only, optional): as pull, but only counts the
     * next documents, up to max, into *n, building none: a $count or a
     * $group that reads no field heading the unpushed stages (countDocuments'
     * pipeline) takes its input so. Returns 0, or -1 with err.
     */
    int (*pull_count)(void *ctx, int64_t max, int64_t *n, bool *eof, mf_error_t *err);
    /*
     * sub_open / sub_next / sub_free (streaming only, optional): a stream of
     * the documents of pipeline (an array value, or NULL for none) run over
     * collection or view coll, for a streaming $unionWith, so the other
     * collection is never held in memory whole. sub_open returns the
     * stream, or NULL with err; sub_next gives its next document (owned,
     * NULL at the end), 0 or -1 with err; sub_free frees it (it may outlive
     * the call: a cursor keeps it between getMores). Without them a
     * $unionWith collects the other collection's documents through scan.
     */
    void *(*sub_open)(void *ctx, const char *coll, const bson_value_t *pipeline, mf_error_t *err);
    int (*sub_next)(void *ctx, void *sub, bson_t **out, mf_error_t *err);
    void (*sub_free)(void *sub);
    /*
     * source_indexes (optional, may be NULL: then $geoNear finds no index):
     * appends the index specs of collection coll of the pipeline's database
     * (NULL: the pipeline's source collection) to specs (an initialised
     * array document) and its namespace to ns. Returns 0, or -1 with err.
     */
    int (*source_indexes)(void *ctx, const char *coll, bson_t *specs, char *ns, size_t nscap, mf_error_t *err);
    /*
     * (Last, so positional initialisers of the fields above stay valid.)
     * list_sessions (optional, may be NULL: the stage then fails with 31111):
     * the rows of a $listLocalSessions or $listSessions stage (stage is its
     * name), spec its validated options ({allUsers, users: [{user, db}]}).
     * Appends one document per session to out; 0 or -1 with err.
     */
    int (*list_sessions)(void *ctx, const char *stage, const bson_t *spec, mf_docvec_t *out, mf_error_t *err);
    /*
     * $densify's limits (query/agg_densify.h): internalQueryMaxAllowedDensifyDocs,
     * the documents it may generate (5897900 past it), and
     * internalDocumentSourceDensifyMaxMemoryBytes, its table of partitions
     * (6007200); 0 for mongod's defaults (500,000 and 100 MB).
     */
    int64_t densify_max_docs;
    int64_t densify_max_bytes;
    /*
     * internalLookupStageIntermediateDocumentMaxSizeBytes: the documents one
     * $lookup joins to one input document (its 'as' array) may total this
     * much (4568 past it); 0 for mongod's default, 100 MB. A $lookup inside
     * another's sub-pipeline also counts everything it produces for one outer
     * document against the outer one's limit, since the sub-pipeline's
     * results are held in memory (run_lookup in agg.c).
     */
    int64_t lookup_max_bytes;
    /*
     * set_scan_stats (optional, may be NULL): from now on env->scan adds
     * what its reads examine to sink (NULL: to nothing); returns the
     * previous sink. A stream collecting statistics
     * (mf_agg_stream_collect_stats) points it at a $lookup node's counters
     * while that node reads, and puts the previous one back after.
     */
    mf_agg_scan_stats_t *(*set_scan_stats)(void *ctx, mf_agg_scan_stats_t *sink);
} mf_agg_env_t;

typedef struct mf_pipeline mf_pipeline_t;

/*
 * mf_pipeline_foreign_colls: calls fn for every collection of p's database
 * that its stages read besides the pipeline's own source: each $lookup's
 * and $graphLookup's from, each $unionWith's coll, in their sub-pipelines
 * and in $facet's too (mongod's involved namespaces). coll is valid during
 * the call. Stops at fn's first non-zero result and returns it; 0 else.
 */
int mf_pipeline_foreign_colls(const mf_pipeline_t *p, int (*fn)(void *arg, const char *coll), void *arg);

/*
 * mf_pipeline_lookup_from_check: 73 InvalidNamespace "invalid $lookup
 * namespace: <db>." for a $lookup (in p, its sub-pipelines or $facet) whose
 * from is "" (mongod 8.0's lite parse: the database alone is no namespace).
 * 0, or -1 with err.
 */
int mf_pipeline_lookup_from_check(const mf_pipeline_t *p, const char *db, mf_error_t *err);

/* mf_pipeline_new: parses an array of stages (pipeline is the array value). NULL with err on error. */
mf_pipeline_t *mf_pipeline_new(const bson_value_t *pipeline, mf_error_t *err);
void mf_pipeline_free(mf_pipeline_t *p);

/*
 * mf_pipeline_run: runs p with collection coll as its source (read through
 * env->scan, passing a leading $match's filter down), appending the results to
 * out. For a collectionless pipeline coll is ignored (may be NULL) and
 * env->scan is only needed by $lookup stages. Returns 0, or -1 with err.
 */
int mf_pipeline_run(const mf_pipeline_t *p, const mf_agg_env_t *env, const char *coll, mf_docvec_t *out,
                    mf_error_t *err) MF_WUR;

/*
 * mf_pipeline_check_update_stages: 0 if every stage of pipeline (an array
 * value) may run in a pipeline-style update ($addFields/$set,
 * $project/$unset, $replaceRoot/$replaceWith), else -1 with err (72 "<stage>
 * is not allowed to be used within an update"). Malformed stages are left
 * for mf_pipeline_new to report.
 */
int mf_pipeline_check_update_stages(const bson_value_t *pipeline, mf_error_t *err) MF_WUR;

/*
 * mf_pipeline_apply_one: runs p over doc alone (a pipeline-style update's
 * $set, $project, $replaceWith ... over the document it updates, with the
 * calling thread's ambient variables) and returns its one result in *out
 * (owned by the caller, bson_destroy). -1 with err if it fails or does not
 * produce exactly one document ("pipeline-style update must produce exactly
 * one document", 9).
 */
int mf_pipeline_apply_one(const mf_pipeline_t *p, const bson_t *doc, bson_t **out, mf_error_t *err) MF_WUR;

/*
 * A $merge stage's whenMatched pipeline with its let variables. new: parses
 * pipeline (an array value of pipeline-style update stages) and let (a
 * document value, or NULL): each let variable, and "new" bound to the
 * incoming document ($$ROOT) unless let names it, is accepted as "$$name"
 * in the pipeline. NULL with err (the pipeline's or the variables'
 * errors). apply: the let variables evaluated against the incoming
 * document src, the pipeline run over the target's matching document old;
 * *out is its one result (owned, bson_destroy). 0, or -1 with err.
 */
typedef struct mf_merge_update mf_merge_update_t;
mf_merge_update_t *mf_merge_update_new(const bson_value_t *pipeline, const bson_value_t *let, mf_error_t *err);
int mf_merge_update_apply(const mf_merge_update_t *u, const bson_t *src, const bson_t *old, bson_t **out,
                          mf_error_t *err) MF_WUR;
void mf_merge_update_free(mf_merge_update_t *u);

/*
 * mf_pipeline_is_collectionless: true if p's first stage is $documents,
 * $currentOp, $listLocalSessions or $listSessions, i.e. p produces its own documents and needs no collection
 * source (the only pipelines {aggregate: 1} accepts).
 */
bool mf_pipeline_is_collectionless(const mf_pipeline_t *p);

/* mf_pipeline_is_current_op: true if p's first stage is $currentOp (which needs the admin database). */
bool mf_pipeline_is_current_op(const mf_pipeline_t *p);

/*
 * mf_pipeline_lists_sessions: "$listLocalSessions" or "$listSessions" when
 * that is p's first stage (valid while p lives), else NULL. Such a pipeline
 * is collectionless; the command layer checks its namespace (mongod: 73
 * InvalidNamespace unless {aggregate: 1}, resp. config.system.sessions).
 */
const char *mf_pipeline_lists_sessions(const mf_pipeline_t *p);

/* mf_pipeline_writes: true if p ends with $out or $merge (its results go to env->write_out, none to out). */
bool mf_pipeline_writes(const mf_pipeline_t *p);

/*
 * mf_pipeline_write_target: for a pipeline ending with $out or $merge, its
 * target (db NULL = the pipeline's own database) and merge_spec (NULL for
 * $out), valid while p lives; false otherwise. A stream (mf_agg_stream)
 * passes the documents reaching that stage through to its caller, which
 * writes them (the materialising mf_pipeline_run hands them to
 * env->write_out instead).
 */
bool mf_pipeline_write_target(const mf_pipeline_t *p, const char **db, const char **coll, const bson_t **merge_spec);

/*
 * mf_pipeline_out_timeseries: true, with *ts the 'timeseries' option of a
 * pipeline's final $out ({$out: {db, coll, timeseries: {...}}}), whose
 * bytes stay valid while p lives (not owned: never destroy *ts); false
 * when there is none.
 */
bool mf_pipeline_out_timeseries(const mf_pipeline_t *p, bson_value_t *ts);

/* mf_pipeline_starts_with_documents: whether p's first stage is $documents (only {aggregate: 1} runs it at the top). */
bool mf_pipeline_starts_with_documents(const mf_pipeline_t *p);

/* mf_pipeline_sorts_by_text_score: whether a $sort of p (not of its sub-pipelines) has a {$meta: "textScore"} key. */
bool mf_pipeline_sorts_by_text_score(const mf_pipeline_t *p);

/*
 * $geoNear metadata (query/agg_geo.h): mf_pipeline_geo_meta tells whether
 * p's leading $geoNear adds the hidden metadata fields to its output (set
 * by mf_pipeline_new when the pipeline reads them, or by
 * mf_pipeline_set_geo_meta for a $near find whose projection does); the
 * caller strips them from results (mf_text_strip_score).
 */
void mf_pipeline_set_geo_meta(mf_pipeline_t *p);
bool mf_pipeline_geo_meta(const mf_pipeline_t *p);

/* mf_pipeline_len: how many stages p runs (after parsing's desugaring and reordering). */
size_t mf_pipeline_len(const mf_pipeline_t *p);

/*
 * mf_pipeline_sort_tail: whether p's stages from i on are a $sort, then
 * only $skip and $limit, then either the end or a $project (*project its
 * spec, *parsed its parsed form, else both NULL): what reads the documents
 * stage i gets is the sort and that projection (or the caller's, at the
 * end). *sort gets the $sort's spec. All valid while p lives.
 */
bool mf_pipeline_sort_tail(const mf_pipeline_t *p, size_t i, const bson_t **sort, const bson_t **project,
                           const struct mf_projection **parsed);

/* mf_pipeline_first_match: the filter of a leading $match stage, or NULL (valid while p lives). */
const bson_t *mf_pipeline_first_match(const mf_pipeline_t *p);

/*
 * Push-down. The leading stages the query planner can run as a find would:
 * a $match (filter), then, only when sort_ok, a $sort (the caller passes
 * sort_ok = false when the chosen plan cannot provide that order, so the
 * pipeline's spilling $sort runs it instead), then any $skip / $limit
 * (combined), then a $project (applied to each document the plan returns,
 * and shown as the plan's PROJECTION stage). nstages counts the stages absorbed; the pipeline from
 * stage nstages on runs over the plan's output. Pointers are valid while p
 * lives. Collectionless pipelines absorb nothing.
 */
typedef struct mf_agg_pushdown {
    const bson_t *filter; /* or NULL */
    const bson_t *sort;   /* or NULL */
    int64_t skip, limit;  /* 0 = none */
    const bson_t *project_spec;           /* a $project right after them (the plan's PROJECTION), or NULL */
    const struct mf_projection *project;  /* its parsed form (mf_projection_apply), NULL with it */
    /*
     * The stage after the prefix reads no field of its input: a $count, or
     * a $group by a constant whose accumulators are $count or $sum of a
     * constant (the drivers' countDocuments), with no $sort or $project
     * pushed down. The source may then hand it empty documents, one per
     * match (mf_plan_request_t.count_only).
     */
    bool count_only;
    size_t nstages;
    /*
     * mongod 8.0's $groupByDistinctScan (pipeline_d.cpp tryDistinctGroupRewrite):
     * a $group after the $match and a $sort (no $limit between), by a field
     * path with only $first or only $last accumulators. mf_pipeline_pushdown
     * names the candidate (group_key, NULL: none; group_sort the $sort
     * before it or NULL; group_proj the fields it reads, NULL: the whole
     * document; group_stage its position); the caller plans it as a strict
     * DISTINCT_SCAN (mf_plan_request_t.distinct_group) and, when that is the
     * plan, sets group_distinct: the stages up to the $group are absorbed
     * (nstages), and each document the plan returns becomes the group's
     * output (mf_pipeline_group_distinct_apply).
     */
    const char *group_key;
    bool group_last;
    const bson_t *group_proj;
    const bson_t *group_sort;
    size_t group_stage;
    bool group_distinct;
} mf_agg_pushdown_t;

void mf_pipeline_pushdown(const mf_pipeline_t *p, bool sort_ok, mf_agg_pushdown_t *pd);

/*
 * mf_pipeline_group_distinct_apply: the $groupByDistinctScan output of doc,
 * the first document of its group (GroupFromFirstDocumentTransformation):
 * {_id: the group key, each accumulator's field: its expression on doc}, a
 * missing value as null. stage is pd->group_stage. out is initialised here
 * (the caller destroys it, on error too). 0, or -1 with err.
 */
int mf_pipeline_group_distinct_apply(const mf_pipeline_t *p, size_t stage, const bson_t *doc, bson_t *out,
                                     mf_error_t *err) MF_WUR;

/* mf_pipeline_group_distinct_explain: appends {$groupByDistinctScan: {newRoot: {_id, fields...}}} to out. */
void mf_pipeline_group_distinct_explain(const mf_pipeline_t *p, size_t stage, bson_t *out);

/*
 * Streaming execution: stages first.. of p pull documents one at a time
 * from env->pull through one iterator per stage, so a pipeline returns its
 * first documents without reading its whole source, and a cursor can keep
 * the stream between getMores (env may differ between calls: it is only
 * used during the call). Blocking stages ($sort, $group, $bucket,
 * $sortByCount, $setWindowFields' sort) keep internalQueryMaxBlockingSortMemoryUsageBytes /
 * internalDocumentSourceGroupMaxMemoryBytes in memory and spill sorted runs
 * beyond (allow_disk), or fail with 292 QueryExceededMemoryLimitNoDiskUseAllowed.
 * The stream does not own p, which must outlive it. Long loops check
 * mf_exec_check_deadline.
 */
typedef struct mf_agg_stream mf_agg_stream_t;

/* What a streaming run may use: the budgets (bytes) and whether and where it may spill. */
typedef struct mf_agg_limits {
    bool allow_disk;
    int64_t sort_bytes;  /* internalQueryMaxBlockingSortMemoryUsageBytes */
    int64_t group_bytes; /* internalDocumentSourceGroupMaxMemoryBytes */
    int64_t window_bytes; /* internalDocumentSourceSetWindowFieldsMaxMemoryBytes (one partition); 0: sort_bytes */
    const char *tmp_dir; /* spill files; NULL: $TMPDIR or /tmp */
} mf_agg_limits_t;

/* mf_agg_stream_new: a stream over stages first.. of p (lim is copied). */
mf_agg_stream_t *mf_agg_stream_new(const mf_pipeline_t *p, size_t first, const mf_agg_limits_t *lim);
/* mf_agg_stream_free: frees st and removes its temporary files. NULL is a no-op. */
void mf_agg_stream_free(mf_agg_stream_t *st);
/* mf_agg_stream_next: the next result, owned by the caller (*out NULL at the end). 0 or -1 with err. */
int mf_agg_stream_next(mf_agg_stream_t *st, const mf_agg_env_t *env, bson_t **out, mf_error_t *err) MF_WUR;
/* mf_agg_stream_spills: sorted runs written to disk so far by st's stages. */
int64_t mf_agg_stream_spills(const mf_agg_stream_t *st);

/*
 * Execution statistics (explain executionStats / allPlansExecution).
 * mf_agg_stream_collect_stats, before the first mf_agg_stream_next, makes
 * st count what each of its stages returns and time it, as mongod's
 * DocumentSource::getNext does under explain: a stage's time includes the
 * stages before it, whose documents it pulls. The source (the $cursor
 * stage) counts the documents the first stage took from env->pull /
 * env->pull_count, and the time spent in them.
 */
void mf_agg_stream_collect_stats(mf_agg_stream_t *st);
/* mf_agg_stream_source_stats: the source's documents taken and microseconds spent (0 without statistics). */
void mf_agg_stream_source_stats(const mf_agg_stream_t *st, int64_t *n, int64_t *us);

/*
 * What explain needs from the command layer to explain a sub-pipeline
 * that reads another collection (a $unionWith's).
 * sub_explain: appends to stages (an empty array being built) the stages
 * of the explain, at the verbosity being answered, of pipeline (an array
 * value, or NULL: none) run as its own aggregate over coll ({$cursor}
 * first) or, coll NULL, as {aggregate: 1}, as mongod's
 * preparePipelineAndExplain writes it (executionStats: the sub-pipeline
 * runs again, on its own). 0, or -1 with stages
 * untouched (the caller then shows the stage as written).
 */
typedef struct mf_agg_explain_hooks {
    int (*sub_explain)(void *ctx, const char *coll, const bson_value_t *pipeline, bson_t *stages);
    void *ctx;
} mf_agg_explain_hooks_t;

/*
 * mf_pipeline_explain: appends stages first.. of p to arr (an array being
 * built; *k is its next index) as mongod 8.0's explain shows them
 * (Pipeline::writeExplainOps): each as it runs ({name: spec}; a $sort as
 * {sortKey, limit}, absorbing a $limit that follows it, as
 * DocumentSourceSort::doOptimizeAt does). With st (a stream over the same
 * stages, run with statistics) each also gets its stage's statistics
 * (DocumentSourceGroupBase, DocumentSourceSort, DocumentSourceLookUp
 * serialize at kExecStats), then nReturned and executionTimeMillisEstimate;
 * with st NULL (queryPlanner) none. $documents shows as the four stages
 * it desugars to, $currentOp with its options in mongod's order. A $facet shows each facet's pipeline
 * explained the same way, after its $internalFacetTeeConsumer
 * (DocumentSourceFacet::serialize); a $unionWith, with hooks (may be
 * NULL), its sub-pipeline explained by hooks->sub_explain
 * when the run read it or st is NULL (DocumentSourceUnionWith::serialize).
 */
void mf_pipeline_explain(const mf_pipeline_t *p, size_t first, const mf_agg_stream_t *st,
                         const mf_agg_explain_hooks_t *hooks, bson_t *arr, int *k);

#endif /* MF_AGG_H */
