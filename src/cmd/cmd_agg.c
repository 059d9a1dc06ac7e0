/*
 * cmd_agg.c: the aggregate command. The pipeline runs in query/agg.c; this
 * file gives it its environment (scans of collections and views, $currentOp,
 * $out/$merge writes), pushes a leading $match/$sort/$skip/$limit/$project
 * down into the query planner, streams the rest through the stage iterators
 * and keeps what is left in a cursor for getMore. Leading source stages that
 * need the catalog are taken off here and become the pipeline's source:
 * $collStats, $archived, $indexStats (one document per index, with the
 * queries that used it since it was loaded or created) and $planCacheStats (no entries:
 * mayfly caches no plans). A streaming $unionWith reads its collection (or
 * view) through a stream of its own (env->sub_open: view_stream), kept with
 * the outer stream in the cursor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "archive/archive.h"
#include "catalog/timeseries.h"
#include "common/alloc.h"
#include "catalog/coll_write.h"
#include "cmd/cmd.h"
#include "common/curop.h"
#include "engine/cursor.h"
#include "common/docvec.h"
#include "common/log.h"
#include "common/params.h"
#include "doc/text.h"
#include "query/agg.h"
#include "query/agg_geo.h"
#include "query/batch.h"
#include "query/exec.h"
#include "doc/match.h"
#include "doc/path.h"
#include "doc/project.h"
#include "doc/sort.h"
#include "doc/update.h"
#include "doc/value.h"
#include "cmd/crud.h"
#include "query/agg_write.h"

/* ---------- aggregate ---------- */

/*
 * plan_cache_stats_check: validates a leading {$planCacheStats: {allHosts:
 * bool}} on collection name (9 not an object, 40415 an unknown field, 14
 * allHosts not a bool, 166 on a view, 50933 no such collection).
 */
static int
plan_cache_stats_check(mf_op_t *op, const bson_iter_t *spec, const char *name)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return mf_err_set(&op->err, MF_E_FailedToParse, "$planCacheStats value must be an object. Found: %s",
                          mf_type_name(bson_iter_type(spec)));
    bson_iter_recurse(spec, &it);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "allHosts") != 0)
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field '$planCacheStats.%s' is an unknown field.",
                              bson_iter_key(&it));
        if (!BSON_ITER_HOLDS_BOOL(&it))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field '$planCacheStats.allHosts' is the wrong type '%s', expected type 'bool'",
                              mf_type_name(bson_iter_type(&it)));
    }
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    bool view = c != NULL && c->is_view, missing = c == NULL;
    mf_catalog_unlock(op->eng->cat);
    if (view)
        return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection",
                          op->db, name);
    if (missing)
        return mf_err_set(&op->err, MF_E_Location50933, "collection '%s.%s' does not exist", op->db, name);
    return 0;
}

/*
 * index_stats_docs: $indexStats' documents for collection name, one per
 * ready index: {name, key, host, accesses: {ops, since}, spec}: ops counts
 * the client queries whose plan used it (query/exec.c), since when this
 * process loaded or created it. A missing collection has none; a view
 * answers 166, but for a time-series collection, which answers for its
 * buckets' indexes as users defined them (mf_ts_index_from_buckets: no _id
 * or time index, the user's key in key and spec), as mongod's
 * timeseries_index_stats.js expects.
 */
static int
index_stats_docs(mf_op_t *op, const char *name, mf_docvec_t *out)
{
    mf_ts_spec_t spec;
    bool ts = false;

    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && c->is_view && c->is_timeseries && mf_ts_spec_of(c, &spec)) {
        c = mf_ts_buckets_of(op->eng->cat, c); /* NULL (no indexes) if its buckets are missing */
        ts = true;
    } else if (c != NULL && c->is_view) {
        mf_catalog_unlock(op->eng->cat);
        return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection",
                          op->db, name);
    }
    for (int i = 0; c != NULL && i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        bson_iter_t it;
        bson_t *d, acc, user;
        const bson_t *shown = ix->spec;
        if (ix->building)
            continue;
        if (ts) {
            if (!mf_ts_index_from_buckets(&spec, ix->spec, &user))
                continue;
            shown = &user;
        }
        d = bson_new();
        BSON_APPEND_UTF8(d, "name", ix->name);
        if (bson_iter_init_find(&it, shown, "key"))
            bson_append_value(d, "key", 3, bson_iter_value(&it));
        BSON_APPEND_UTF8(d, "host", op->eng->host);
        BSON_APPEND_DOCUMENT_BEGIN(d, "accesses", &acc);
        BSON_APPEND_INT64(&acc, "ops", atomic_load_explicit(&ix->accesses, memory_order_relaxed));
        BSON_APPEND_DATE_TIME(&acc, "since", ix->since_ms);
        bson_append_document_end(d, &acc);
        BSON_APPEND_DOCUMENT(d, "spec", shown);
        if (ts)
            bson_destroy(&user);
        mf_docvec_push_steal(out, d);
    }
    mf_catalog_unlock(op->eng->cat);
    return 0;
}

/*
 * A $out / $merge recorded by env->write_out while the pipeline runs under
 * the catalog read lock, and performed by agg_write_perform after that lock
 * is released (a write needs the write lock to create or replace the target,
 * and the read lock must never be upgraded in place).
 */
typedef struct agg_write {
    bool pending;
    char *db, *coll;     /* owned */
    mf_docvec_t docs;    /* owned */
    bson_t *merge_spec;  /* owned; NULL for $out */
    bson_value_t out_ts; /* owned: $out's 'timeseries' option, or BSON_TYPE_EOD */
} agg_write_t;

typedef struct agg_scan_ctx {
    mf_op_t *op;
    const bson_t *only_doc;   /* $collStats: the pipeline's source is this one document */
    const bson_value_t *hint; /* the command's hint, or NULL */
    agg_write_t *write;       /* where env->write_out records its work */
    int view_depth;           /* views being expanded (views on views) */
    struct agg_stream *stream; /* streaming source (env->pull), or NULL */
    /* $archived (SPEC I2): the first scan reads this collection's archive instead (archive_pending). */
    bool archive_pending;
    uint8_t archive_uuid[16];
    bool archive_none; /* the collection does not exist (or is a view): its archive is empty */
    /* $indexStats: the first scan (the pipeline's source) visits these documents instead. */
    const mf_docvec_t *source_docs;
    bool source_pending;
    /* explain: what the scans of other collections examine goes here (env->set_scan_stats), or NULL */
    mf_agg_scan_stats_t *scan_stats;
    /* explain of a pipeline with no collection source (agg_pull_alone): the one document pulled, or NULL */
    const bson_t *pull_doc;
} agg_scan_ctx_t;

typedef struct agg_visit_adapter {
    mf_agg_visit_fn visit;
    void *arg;
} agg_visit_adapter_t;

static int
agg_adapter_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    agg_visit_adapter_t *a = arg;
    (void)rid;
    if (d != NULL && d->has_text_score) {
        /* A $text filter (a sub-pipeline's leading $match): the score rides along as the hidden last field. */
        bson_t *scored = bson_copy(doc);
        BSON_APPEND_DOUBLE(scored, MF_TEXT_SCORE_FIELD, d->text_score);
        int r = a->visit(a->arg, scored);
        bson_destroy(scored);
        return r;
    }
    return a->visit(a->arg, doc);
}

/* Views nest at most this deep (165 ViewDepthLimitExceeded beyond), as in MongoDB. */
#define MF_VIEW_DEPTH_MAX 20

int
mf_crud_optimize_context(mf_error_t *err)
{
    if (err->optimizing)
        mf_err_context(err, "Failed to optimize pipeline");
    return -1;
}

/* What mongod's aggregate adds to an error its plan executor throws (run_aggregate.cpp), not to parsing's or planning's. */
#define EXEC_ERROR_AGG "PlanExecutor error during aggregation"

static void env_set_streams(mf_agg_env_t *env);
static void env_init_streaming(mf_agg_env_t *env, mf_op_t *op, agg_scan_ctx_t *sc);

/* env_set_limits: the server parameters stages read while they run ($densify's generation caps). */
static void
env_set_limits(mf_agg_env_t *env, mf_op_t *op)
{
    env->densify_max_docs = mf_param_get(op->eng->params, "internalQueryMaxAllowedDensifyDocs");
    env->densify_max_bytes = mf_param_get(op->eng->params, "internalDocumentSourceDensifyMaxMemoryBytes");
    env->lookup_max_bytes = mf_param_get(op->eng->params, "internalLookupStageIntermediateDocumentMaxSizeBytes");
}
static int agg_list_sessions(void *ctx, const char *stage, const bson_t *spec, mf_docvec_t *out, mf_error_t *err);
static int agg_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg,
                    mf_error_t *err);
static int view_scan(agg_scan_ctx_t *x, const char *name, const bson_t *filter, mf_agg_visit_fn visit, void *arg,
                     mf_error_t *err);

/* plan_stats_add: what plan p's run examined, added to s (mongod's PlanSummaryStats of a sub-pipeline). */
static void
plan_stats_add(const mf_plan_t *p, mf_agg_scan_stats_t *s)
{
    const mf_stage_t *leaf = p != NULL ? p->leaf : NULL;
    if (leaf == NULL)
        return;
    s->docs_examined += p->fetch ? p->fetch->docs_examined : leaf->docs_examined;
    s->keys_examined += leaf->keys_examined;
    if (leaf->kind == MF_ST_COLLSCAN)
        s->collection_scans++;
    if (leaf->index_name != NULL)
        mf_agg_scan_stats_add_index(s, leaf->index_name);
    else if (leaf->kind == MF_ST_IDHACK)
        mf_agg_scan_stats_add_index(s, "_id_"); /* an _id lookup reads the _id index */
    for (size_t i = 0; i < leaf->ninputs; i++)
        if (leaf->inputs[i]->index_name != NULL)
            mf_agg_scan_stats_add_index(s, leaf->inputs[i]->index_name);
}

/* env->set_scan_stats: where agg_scan adds what its reads examine (explain of a $lookup). */
static mf_agg_scan_stats_t *
agg_set_scan_stats(void *ctx, mf_agg_scan_stats_t *sink)
{
    agg_scan_ctx_t *x = ctx;
    mf_agg_scan_stats_t *prev = x->scan_stats;
    x->scan_stats = sink;
    return prev;
}

/* env->scan: the catalog lock is already held (shared) by mf_cmd_aggregate. */
/*
 * $archived's source: the collection's archived documents, oldest first
 * (every stage after it runs on them as usual). Checks for interruption
 * (killOp, maxTimeMS, shutdown) every 256 documents.
 */
static int
archive_scan(agg_scan_ctx_t *x, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    mf_archive_reader_t *r;
    const bson_t *doc;
    int rc, n = 0;

    if (mf_archive_reader_open(x->op->eng->archive, x->archive_uuid, &r, err) != 0)
        return -1;
    while ((rc = mf_archive_reader_next(r, &doc, err)) == 1) {
        if ((++n & 255) == 0 && mf_curop_check_current(err) != 0) {
            rc = -1;
            break;
        }
        if (visit(arg, doc) < 0) {
            rc = -1;
            break;
        }
    }
    mf_archive_reader_close(r);
    return rc < 0 ? -1 : 0;
}

static int
agg_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    if (x->only_doc != NULL) {
        int r = visit(arg, x->only_doc);
        return r < 0 ? -1 : 0;
    }
    if (x->source_pending) {
        x->source_pending = false;
        for (size_t i = 0; i < x->source_docs->len; i++)
            if (visit(arg, x->source_docs->docs[i]) < 0)
                return -1;
        return 0;
    }
    if (x->archive_pending) {
        x->archive_pending = false;
        return x->archive_none ? 0 : archive_scan(x, visit, arg, err);
    }
    mf_coll_t *c = mf_catalog_coll_find(x->op->eng->cat, x->op->db, coll);
    if (c == NULL)
        return 0;
    if (c->is_view)
        return view_scan(x, coll, filter, visit, arg, err);
    mf_matcher_t *m = mf_matcher_new(filter, err);
    if (m == NULL)
        return -1;
    agg_visit_adapter_t a = {visit, arg};
    mf_plan_request_t req = {.filter = filter, .hint = x->hint};
    mf_plan_t *ran = NULL;
    int rc = mf_exec_query(x->op->sess, c, &req, m, agg_adapter_visit, &a, x->scan_stats ? &ran : NULL, err);
    if (x->scan_stats != NULL)
        plan_stats_add(ran, x->scan_stats);
    mf_plan_free(ran);
    mf_matcher_free(m);
    return rc;
}

/*
 * Streaming aggregation. A pipeline over a collection runs its pushed-down
 * prefix (mf_pipeline_pushdown: $match, an index-provided $sort, $skip,
 * $limit, $project) as the plan find would build, and pulls the rest through
 * mf_agg_stream. The state lives in the cursor (MF_CURSOR_EXT) between
 * getMores: the plan keeps its scan position (a WiredTiger cursor cannot
 * outlive the command), so each batch re-seeks where the last stopped.
 * op is rebound on every call; the catalog lock is held by the caller.
 */
typedef struct agg_stream {
    agg_scan_ctx_t sc;        /* env->ctx for pull and for $lookup scans (sc.stream points back here) */
    mf_pipeline_t *pl;        /* owned */
    mf_agg_stream_t *stream;  /* owned */
    mf_plan_t *plan;          /* owned: the pushed-down plan, with its position */
    mf_matcher_t *m;          /* owned: the pushed-down filter */
    int64_t skip_left, limit_left; /* pushed-down $skip / $limit still to apply (limit < 0: none) */
    const mf_projection_t *proj;   /* pushed-down $project (owned by pl), or NULL */
    bool group_distinct;           /* the plan runs pl's $group as $groupByDistinctScan (stage group_stage) */
    size_t group_stage;
    char *db, *coll;          /* owned */
    /* A find's own projection, applied to each result (find semantics: positional, $slice, $elemMatch). */
    mf_projection_t *out_proj; /* owned, or NULL */
    mf_matcher_t *out_m;       /* owned: the find's filter, for the positional operator's match details */
    /* A $near find's returnKey (mf_crud_cursor_set_return_key): its index's key pattern, parsed and as a document. */
    mf_keypattern_t *rk_kp; /* owned, or NULL */
    bson_t *rk_key;         /* owned, or NULL */
    /* $archived (SPEC I2): the source is this archive reader instead of a plan (plan is NULL). Owned. */
    mf_archive_reader_t *archive;
    /* A view led by $collStats: the source is this one statistics document (plan is NULL). Owned. */
    bson_t *one_doc;
    bool one_pending; /* not yet pulled */
} agg_stream_t;

static void
agg_stream_free(void *arg)
{
    agg_stream_t *x = arg;
    if (x == NULL)
        return;
    mf_agg_stream_free(x->stream);
    mf_pipeline_free(x->pl);
    mf_plan_free(x->plan);
    mf_matcher_free(x->m);
    if (x->out_proj)
        mf_projection_free(x->out_proj);
    mf_matcher_free(x->out_m);
    if (x->rk_kp != NULL) {
        mf_keypattern_destroy(x->rk_kp);
        free(x->rk_kp);
    }
    if (x->rk_key != NULL)
        bson_destroy(x->rk_key);
    mf_archive_reader_close(x->archive);
    if (x->one_doc != NULL)
        bson_destroy(x->one_doc);
    free(x->db);
    free(x->coll);
    free(x);
}

typedef struct agg_pull_ctx {
    agg_stream_t *x;
    mf_docvec_t *out; /* NULL: only count (env->pull_count) */
    size_t max; /* documents to take this time */
    mf_error_t *err;
    size_t n; /* documents taken (pushed, or counted) */
} agg_pull_ctx_t;

/* Appends the visited document (doc NULL: a key of a keys-only plan) to pc->out as the next stage reads it. 0 or -1. */
static int
agg_pull_push(agg_pull_ctx_t *pc, const bson_t *doc, const mf_match_details_t *d)
{
    bson_t *scored = NULL;
    if (doc != NULL && d != NULL && d->has_text_score) {
        /* A $text plan: the score rides along as the hidden last field (doc/text.h). */
        scored = bson_copy(doc);
        BSON_APPEND_DOUBLE(scored, MF_TEXT_SCORE_FIELD, d->text_score);
        doc = scored;
    }
    if (doc == NULL) {
        /* A plan over keys only (mf_plan_t.keys_only): the next stage counts and reads no field. */
        mf_docvec_push_steal(pc->out, bson_new());
    } else if (pc->x->group_distinct) {
        /* The first document of its group, as the group's output ($groupByDistinctScan). */
        bson_t o;
        int rc = mf_pipeline_group_distinct_apply(pc->x->pl, pc->x->group_stage, doc, &o, pc->err);
        if (rc == 0)
            mf_docvec_push_steal(pc->out, bson_copy(&o));
        bson_destroy(&o);
        if (scored)
            bson_destroy(scored);
        if (rc != 0)
            return -1;
    } else if (pc->x->proj != NULL) {
        bson_t *o = bson_new();
        if (mf_projection_apply(pc->x->proj, doc, NULL, o, pc->err) != 0) {
            bson_destroy(o);
            if (scored)
                bson_destroy(scored);
            return -1;
        }
        mf_docvec_push_steal(pc->out, o);
        if (scored)
            bson_destroy(scored);
    } else if (scored != NULL) {
        mf_docvec_push_steal(pc->out, scored);
    } else {
        mf_docvec_push(pc->out, doc);
    }
    return 0;
}

/* The pushed-down plan's visit: past the $skip, each document is pushed (or, with no out, only counted). */
static int
agg_pull_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    agg_pull_ctx_t *pc = arg;
    (void)rid;
    if (pc->x->skip_left > 0) {
        pc->x->skip_left--;
        return 0;
    }
    if (pc->out != NULL && agg_pull_push(pc, doc, d) != 0)
        return -1;
    pc->n++;
    if (pc->x->limit_left > 0)
        pc->x->limit_left--;
    return pc->x->limit_left == 0 || pc->n >= pc->max ? 1 : 0;
}

/* env->source_indexes: the index specs of a pipeline's source (or a $lookup's) collection ($geoNear). Catalog lock held. */
static int
agg_source_indexes(void *ctx, const char *coll, bson_t *specs, char *ns, size_t nscap, mf_error_t *err)
{
    agg_scan_ctx_t *sc = ctx;
    agg_stream_t *x = sc->stream;
    mf_coll_t *c;
    char key[16];
    if (coll == NULL && x == NULL)
        return 0;
    c = mf_catalog_coll_find(sc->op->eng->cat, coll ? sc->op->db : x->db, coll ? coll : x->coll);
    /* mongod's PipelineD::buildInnerQueryExecutorGeoNear refuses a missing collection before it looks for an index. */
    if (c == NULL)
        return mf_err_set(err, MF_E_NamespaceNotFound, "$geoNear requires a geo index to run, but %s.%s does not exist",
                          coll ? sc->op->db : x->db, coll ? coll : x->coll);
    if (c->is_view)
        return 0;
    snprintf(ns, nscap, "%s", c->ns);
    for (int i = 0, n = 0; i < c->nindexes; i++) {
        if (c->indexes[i]->building)
            continue;
        snprintf(key, sizeof(key), "%d", n++);
        BSON_APPEND_DOCUMENT(specs, key, c->indexes[i]->spec);
    }
    return 0;
}

/*
 * The next documents of the pushed-down plan (resuming its scan), or of the
 * archive for $archived (the reader keeps its place between getMores), up
 * to max: appended to out, or with out NULL only counted. *n gets how many.
 */
static int
agg_source_read(agg_stream_t *x, size_t max, mf_docvec_t *out, size_t *n, bool *eof, mf_error_t *err)
{
    *n = 0;
    *eof = false;
    if (x->one_doc != NULL) {
        if (x->one_pending && max > 0) {
            if (out != NULL)
                mf_docvec_push(out, x->one_doc);
            x->one_pending = false;
            *n = 1;
        }
        *eof = !x->one_pending;
        return 0;
    }
    if (x->archive != NULL) {
        const bson_t *doc;
        int r = 0;
        while (*n < max && (r = mf_archive_reader_next(x->archive, &doc, err)) == 1) {
            if (out != NULL)
                mf_docvec_push(out, doc);
            (*n)++;
        }
        if (r < 0)
            return -1;
        *eof = r == 0;
        return mf_curop_check_current(err) != 0 ? -1 : 0;
    }
    mf_coll_t *c = mf_catalog_coll_find(x->sc.op->eng->cat, x->db, x->coll);
    if (c == NULL || x->plan->done || x->limit_left == 0) {
        *eof = true;
        return 0;
    }
    agg_pull_ctx_t pc = {x, out, max, err, 0};
    if (mf_exec_run(x->sc.op->sess, c, x->plan, x->m, agg_pull_visit, &pc, err) != 0)
        return -1;
    *n = pc.n;
    *eof = x->plan->done || x->limit_left == 0;
    return 0;
}

/* env->pull: the next documents of the source until out holds max (agg_source_read). */
static int
agg_pull(void *ctx, size_t max, mf_docvec_t *out, bool *eof, mf_error_t *err)
{
    size_t n;
    return agg_source_read(((agg_scan_ctx_t *)ctx)->stream, max > out->len ? max - out->len : 0, out, &n, eof, err);
}

/* env->pull_count: counts the next documents of the source, building none (agg_source_read). */
static int
agg_pull_count(void *ctx, int64_t max, int64_t *n, bool *eof, mf_error_t *err)
{
    size_t got;
    int rc = agg_source_read(((agg_scan_ctx_t *)ctx)->stream, (size_t)max, NULL, &got, eof, err);
    *n = (int64_t)got;
    return rc;
}

/* mf_crud_agg_cover_tail: see crud.h. */
void
mf_crud_agg_cover_tail(const mf_pipeline_t *pl, const mf_agg_pushdown_t *pd, const bson_t *out_proj,
                       const mf_projection_t *out_parsed, mf_plan_request_t *req)
{
    const bson_t *sort, *proj;
    const mf_projection_t *parsed;
    if (pd->sort == NULL && pd->project_spec == NULL &&
        mf_pipeline_sort_tail(pl, pd->nstages, &sort, &proj, &parsed) && (proj != NULL || out_proj != NULL)) {
        req->cover_sort = sort;
        req->cover_projection = proj != NULL ? proj : out_proj;
        req->cover_parsed = proj != NULL ? parsed : out_parsed;
    }
}

/*
 * mf_crud_agg_plan_prefix: plans pl's pushed-down prefix over c (may be NULL) as
 * find would: the leading $sort is pushed down only when the chosen plan
 * provides its order (else the pipeline's own spilling $sort runs it, over
 * the decoded keys of a covered scan when mf_crud_agg_cover_tail allows:
 * out_proj, may be NULL, is the find projection applied to the results).
 * A $group mongod runs as $groupByDistinctScan (pd->group_key) is planned
 * first as a strict DISTINCT_SCAN, kept only when that is the plan
 * (pd->group_distinct). Sets *pd and *plan (owned by the caller). Catalog
 * lock held. 0 or -1.
 */
int
mf_crud_agg_plan_prefix(mf_op_t *op, const mf_coll_t *c, const mf_pipeline_t *pl, const bson_value_t *hint,
                        const bson_t *out_proj, const mf_projection_t *out_parsed, mf_agg_pushdown_t *pd,
                        mf_plan_t **plan)
{
    mf_pipeline_pushdown(pl, true, pd);
    if (c != NULL && pd->group_key != NULL) {
        /* $groupByDistinctScan (prepareExecutor): a strict DISTINCT_SCAN, or the pipeline as it is. */
        mf_plan_request_t req = {.filter = pd->filter, .sort = pd->group_sort, .hint = hint,
                                 .distinct_key = pd->group_key, .distinct_group = true,
                                 .distinct_last = pd->group_last, .shown = {.projection = pd->group_proj},
                                 /* the query shape index filters match: the projection of the group's fields */
                                 .shape_projection = pd->group_proj};
        if (mf_plan_build(c, &req, plan, &op->err) != 0)
            return -1;
        if ((*plan)->leaf->kind == MF_ST_DISTINCT_SCAN) {
            pd->sort = pd->group_sort;
            pd->skip = pd->limit = 0;
            pd->project_spec = NULL;
            pd->project = NULL;
            pd->count_only = false;
            pd->nstages = pd->group_stage + 1;
            pd->group_distinct = true;
            return 0;
        }
        mf_plan_free(*plan);
        *plan = NULL;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        mf_plan_request_t req = {.filter = pd->filter, .sort = pd->sort, .hint = hint, .skip = pd->skip,
                                 .limit = pd->limit, .projection = pd->project_spec, .count_only = pd->count_only,
                                 /* a $project of key fields only may be covered, as find's projection (mf_plan_t.covered) */
                                 .cover_projection = pd->project_spec, .cover_parsed = pd->project};
        /* A $sort left to the pipeline, then a projection of key fields: it may sort the decoded keys. */
        if (attempt > 0)
            mf_crud_agg_cover_tail(pl, pd, out_proj, out_parsed, &req);
        if (mf_plan_build(c, &req, plan, &op->err) != 0)
            return -1;
        if (pd->sort == NULL || (*plan)->sort == NULL)
            return 0;
        mf_plan_free(*plan);
        *plan = NULL;
        mf_pipeline_pushdown(pl, false, pd);
    }
    return 0;
}

/* mf_crud_agg_stream_fill: see crud.h. */
int
mf_crud_agg_stream_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, int64_t count, bson_t *arr, bool *exhausted)
{
    agg_stream_t *x = cur->ext;
    mf_agg_env_t env;

    x->sc.op = op;
    env_init_streaming(&env, op, &x->sc);
    *exhausted = false;
    while (count < max) {
        bson_t *d;
        if (mf_agg_stream_next(x->stream, &env, &d, &op->err) != 0)
            return -1;
        if (d == NULL) {
            *exhausted = true;
            break;
        }
        if (x->rk_kp != NULL) {
            /* returnKey: the document's first key in the index (mf_crud_cursor_set_return_key). */
            mf_keyset_t ks;
            bool skip = false, multikey = false;
            bson_t *o = bson_new();
            mf_keyset_init(&ks);
            int kr = mf_index_keys(x->rk_kp, false, d, &ks, &skip, &multikey, &op->err);
            if (kr == 0 && !skip && ks.n > 0)
                mf_crud_return_key_doc(x->rk_key, ks.keys[0].data, ks.keys[0].len, d, o);
            mf_keyset_destroy(&ks);
            bson_destroy(d);
            d = o;
            if (kr != 0) {
                bson_destroy(d);
                return -1;
            }
        }
        if (x->out_proj != NULL) {
            bson_t *o = bson_new();
            mf_match_details_t md = {.array_pos = -1};
            if (x->out_m != NULL)
                mf_matcher_match(x->out_m, d, &md);
            int pr = mf_projection_apply(x->out_proj, d, &md, o, &op->err);
            bson_destroy(d);
            if (pr != 0) {
                bson_destroy(o);
                return -1;
            }
            d = o;
        }
        if ((x->plan != NULL && x->plan->text != NULL) || mf_pipeline_geo_meta(x->pl))
            mf_text_strip_score(&d);
        int r = mf_crud_batch_add(arr, &count, d, &op->err);
        if (r > 0) {
            cur->stash = d; /* no room: it starts the next batch */
            break;
        }
        bson_destroy(d);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* mf_crud_stages_start_with (crud.h): whether the array value stages' first stage is named stage. */
bool
mf_crud_stages_start_with(const bson_value_t *stages, const char *stage)
{
    bson_iter_t si, first;
    return stages != NULL && stages->value_type == BSON_TYPE_ARRAY &&
           bson_iter_init_from_data(&si, stages->value.v_doc.data, stages->value.v_doc.data_len) &&
           bson_iter_next(&si) && BSON_ITER_HOLDS_DOCUMENT(&si) && bson_iter_recurse(&si, &first) &&
           bson_iter_next(&first) && strcmp(bson_iter_key(&first), stage) == 0;
}

/*
 * mf_crud_view_resolve: the collection under view `name` and the pipeline
 * that reads it, as MongoDB resolves views: the definitions from the
 * innermost view out to `name`'s, then `stages` (an array value, or NULL),
 * appended to *all (an initialised array document). A name that is not a
 * view resolves to itself. *depth counts views already being expanded
 * around this one (a $lookup from a view inside a view) and grows by the
 * views resolved; more than 20 in all answer 165. Catalog lock held. Sets
 * *base (owned by the caller). 0, or -1 with err.
 */
int
mf_crud_view_resolve(mf_op_t *op, const char *name, const bson_value_t *stages, int *depth, char **base, bson_t *all,
                     mf_error_t *err)
{
    bson_value_t defs[MF_VIEW_DEPTH_MAX]; /* shallow: the data stays in the views' options */
    const char *cur = name;
    size_t n = 0;
    bson_iter_t it, si;
    uint32_t k = 0;

    *base = NULL;
    for (;;) {
        mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, cur);
        if (c == NULL || !c->is_view)
            break;
        if (*depth + (int)n >= MF_VIEW_DEPTH_MAX)
            return mf_err_set(err, MF_E_ViewDepthLimitExceeded,
                              "View depth too deep or view cycle detected; maximum depth is %d", MF_VIEW_DEPTH_MAX);
        memset(&defs[n], 0, sizeof defs[n]);
        if (bson_iter_init_find(&it, c->options, "pipeline") && BSON_ITER_HOLDS_ARRAY(&it))
            defs[n] = *bson_iter_value(&it);
        n++;
        if (!bson_iter_init_find(&it, c->options, "viewOn") || !BSON_ITER_HOLDS_UTF8(&it))
            break;
        cur = bson_iter_utf8(&it, NULL);
        /* view_catalog_helpers.cpp resolveView: a definition that starts with $collStats ends the resolution there. */
        if (mf_crud_stages_start_with(&defs[n - 1], "$collStats"))
            break;
    }
    for (size_t v = n + 1; v-- > 0;) {
        const bson_value_t *pv = v == 0 ? stages : &defs[v - 1];
        if (pv == NULL || pv->value_type != BSON_TYPE_ARRAY)
            continue;
        bson_iter_init_from_data(&si, pv->value.v_doc.data, pv->value.v_doc.data_len);
        while (bson_iter_next(&si)) {
            char key[16];
            const char *kp;
            bson_uint32_to_string(k++, &kp, key, sizeof key);
            bson_append_value(all, kp, -1, bson_iter_value(&si));
        }
    }
    *base = mf_strdup(cur);
    *depth += (int)n;
    return 0;
}

/* A bson_t array document as an array value (valid while stages is). */
static bson_value_t
array_value(const bson_t *stages)
{
    bson_value_t v = {.value_type = BSON_TYPE_ARRAY};
    v.value.v_doc.data = (uint8_t *)bson_get_data(stages);
    v.value.v_doc.data_len = stages->len;
    return v;
}

/*
 * view_resolve: mf_crud_view_resolve, parsed. The pipeline is owned by the
 * caller; NULL with err. A resolution led by $collStats (a view's
 * definition, mf_crud_view_resolve) gives the stage's document for *base
 * in *stats (initialised here, the caller destroys it; *has_stats set) and
 * the stages after it as the pipeline.
 */
static mf_pipeline_t *
view_resolve(mf_op_t *op, const char *name, const bson_value_t *stages, int *depth, char **base, bson_t *stats,
             bool *has_stats, mf_error_t *err)
{
    bson_t all = BSON_INITIALIZER, rest = BSON_INITIALIZER;
    mf_pipeline_t *pl = NULL;

    *has_stats = false;
    if (mf_crud_view_resolve(op, name, stages, depth, base, &all, err) == 0) {
        bson_value_t av = array_value(&all);
        bson_iter_t si, first;
        if (mf_crud_stages_start_with(&av, "$collStats") && bson_iter_init(&si, &all) && bson_iter_next(&si) &&
            bson_iter_recurse(&si, &first) && bson_iter_next(&first)) {
            if (mf_cmd_coll_stats_doc(op, *base, &first, stats) != 0) {
                if (err != &op->err)
                    *err = op->err;
                free(*base);
                *base = NULL;
                bson_destroy(&all);
                return NULL;
            }
            *has_stats = true;
            for (uint32_t k = 0; bson_iter_next(&si); k++) {
                char key[16];
                const char *kp;
                bson_uint32_to_string(k, &kp, key, sizeof key);
                bson_append_value(&rest, kp, -1, bson_iter_value(&si));
            }
            av = array_value(&rest);
        }
        pl = mf_pipeline_new(&av, err);
        if (pl == NULL && *has_stats) {
            bson_destroy(stats);
            *has_stats = false;
        }
        if (pl == NULL) {
            mf_crud_optimize_context(err);
            free(*base);
            *base = NULL;
        }
    }
    bson_destroy(&rest);
    bson_destroy(&all);
    return pl;
}

/*
 * agg_stream_new: a streaming run of pl (stolen) over collection coll (a
 * collection, not a view, possibly missing): the pushed-down prefix is
 * planned as find would plan it, the rest goes through mf_agg_stream.
 * view_depth: views already expanded around it. Catalog lock held. Returns
 * the state (owned by the caller, free with agg_stream_free), or NULL with
 * op->err (pl freed).
 */
/* The memory budgets of blocking stages (server parameters) and where they spill. */
static mf_agg_limits_t
agg_limits(mf_op_t *op, bool allow_disk)
{
    mf_agg_limits_t lim = {.allow_disk = allow_disk,
                           .sort_bytes = mf_param_get(op->eng->params, "internalQueryMaxBlockingSortMemoryUsageBytes"),
                           .group_bytes = mf_param_get(op->eng->params, "internalDocumentSourceGroupMaxMemoryBytes"),
                           .window_bytes =
                               mf_param_get(op->eng->params, "internalDocumentSourceSetWindowFieldsMaxMemoryBytes"),
                           .tmp_dir = op->eng->tmp_dir};
    return lim;
}

static agg_stream_t *
agg_stream_new(mf_op_t *op, const char *coll, mf_pipeline_t *pl, const bson_value_t *hint, bool allow_disk,
               int view_depth, const bson_t *out_proj, const mf_projection_t *out_parsed)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    mf_agg_pushdown_t pd;
    mf_plan_t *plan = NULL;
    mf_matcher_t *m = NULL;

    if (mf_crud_agg_plan_prefix(op, c, pl, hint, out_proj, out_parsed, &pd, &plan) != 0 ||
        (m = mf_matcher_new(pd.filter, &op->err)) == NULL) {
        mf_plan_free(plan);
        mf_pipeline_free(pl);
        return NULL;
    }
    agg_stream_t *x = mf_calloc(1, sizeof *x);
    x->sc.op = op;
    x->sc.stream = x;
    x->sc.view_depth = view_depth;
    x->pl = pl;
    x->plan = plan;
    x->m = m;
    x->skip_left = pd.skip;
    x->limit_left = pd.limit > 0 ? pd.limit : -1;
    x->proj = pd.project;
    x->group_distinct = pd.group_distinct;
    x->group_stage = pd.group_stage;
    x->db = mf_strdup(op->db);
    x->coll = mf_strdup(coll);
    mf_agg_limits_t lim = agg_limits(op, allow_disk);
    x->stream = mf_agg_stream_new(pl, pd.nstages, &lim);
    return x;
}

/* mf_crud_agg_explain_run: see crud.h. */
int
mf_crud_agg_explain_run(mf_op_t *op, const char *coll, mf_pipeline_t *pl, const bson_value_t *hint,
                        const bson_t *cmd, mf_agg_pushdown_t *pd, mf_plan_t **plan, mf_agg_stream_t **stream)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    mf_matcher_t *m = NULL;
    mf_agg_env_t env;
    bool allow_disk = mf_crud_allow_disk(op, cmd);
    int rc = 0;

    *plan = NULL;
    *stream = NULL;
    if (mf_crud_agg_plan_prefix(op, c, pl, hint, NULL, NULL, pd, plan) != 0 ||
        (m = mf_matcher_new(pd->filter, &op->err)) == NULL) {
        mf_plan_free(*plan);
        *plan = NULL;
        return -1;
    }
    /* The state a streaming aggregate keeps (agg_stream_new), with pl borrowed: it is not freed with it. */
    agg_stream_t *x = mf_calloc(1, sizeof *x);
    x->sc.op = op;
    x->sc.stream = x;
    x->pl = pl;
    x->plan = *plan;
    x->m = m;
    x->skip_left = pd->skip;
    x->limit_left = pd->limit > 0 ? pd->limit : -1;
    x->proj = pd->project;
    x->group_distinct = pd->group_distinct;
    x->group_stage = pd->group_stage;
    x->db = mf_strdup(op->db);
    x->coll = mf_strdup(coll);
    mf_agg_limits_t lim = agg_limits(op, allow_disk);
    x->stream = mf_agg_stream_new(pl, pd->nstages, &lim);
    mf_agg_stream_collect_stats(x->stream);
    env_init_streaming(&env, op, &x->sc);
    /* Run to the end, the results discarded (explain.cpp's executePlan); a writing stage writes nothing. */
    for (int64_t n = 1;; n++) {
        bson_t *d;
        if ((rc = mf_agg_stream_next(x->stream, &env, &d, &op->err)) != 0 || d == NULL)
            break;
        bson_destroy(d);
        if (n % 1024 == 0 && (rc = mf_exec_check_deadline(&op->err)) != 0)
            break;
    }
    *stream = x->stream;
    x->stream = NULL;
    x->plan = NULL;
    x->pl = NULL;
    agg_stream_free(x);
    if (rc != 0) {
        mf_agg_stream_free(*stream);
        mf_plan_free(*plan);
        *stream = NULL;
        *plan = NULL;
        return -1;
    }
    return 0;
}

static int agg_current_op(void *ctx, const bson_t *spec, mf_docvec_t *out, mf_error_t *err);

/*
 * agg_pull_alone (env->pull of a pipeline that reads no collection): its
 * one source document (a $collStats's) if it has one, then the end.
 */
static int
agg_pull_alone(void *ctx, size_t max, mf_docvec_t *out, bool *eof, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    (void)max;
    (void)err;
    if (x->pull_doc != NULL)
        mf_docvec_push(out, x->pull_doc);
    x->pull_doc = NULL;
    *eof = true;
    return 0;
}

/* mf_crud_agg_explain_run_alone: see crud.h. */
int
mf_crud_agg_explain_run_alone(mf_op_t *op, mf_pipeline_t *pl, const bson_t *cmd, const bson_t *source,
                              mf_agg_stream_t **stream)
{
    bool allow_disk = mf_crud_allow_disk(op, cmd);
    agg_scan_ctx_t sc = {.op = op, .pull_doc = source};
    mf_agg_env_t env;
    int rc = 0;

    mf_agg_limits_t lim = agg_limits(op, allow_disk);
    *stream = mf_agg_stream_new(pl, 0, &lim);
    mf_agg_stream_collect_stats(*stream);
    env_init_streaming(&env, op, &sc);
    env.pull = agg_pull_alone;
    env.pull_count = NULL;
    if (strcmp(op->db, "admin") == 0)
        env.current_op = agg_current_op;
    mf_catalog_rdlock(op->eng->cat);
    /* Run to the end, the results discarded (explain.cpp's executePlan); a writing stage writes nothing. */
    for (int64_t n = 1;; n++) {
        bson_t *d;
        if ((rc = mf_agg_stream_next(*stream, &env, &d, &op->err)) != 0 || d == NULL)
            break;
        bson_destroy(d);
        if (n % 1024 == 0 && (rc = mf_exec_check_deadline(&op->err)) != 0)
            break;
    }
    mf_catalog_unlock(op->eng->cat);
    if (rc != 0) {
        mf_agg_stream_free(*stream);
        *stream = NULL;
        return -1;
    }
    return 0;
}

/* archive_stream_new: a streaming run of pl (taken) over collection coll's archive (uuid). NULL with op->err. */
static agg_stream_t *
archive_stream_new(mf_op_t *op, const char *coll, mf_pipeline_t *pl, const uint8_t uuid[16], bool allow_disk)
{
    mf_archive_reader_t *r;
    if (mf_archive_reader_open(op->eng->archive, uuid, &r, &op->err) != 0) {
        mf_pipeline_free(pl);
        return NULL;
    }
    agg_stream_t *x = mf_calloc(1, sizeof *x);
    x->sc.op = op;
    x->sc.stream = x;
    x->pl = pl;
    x->archive = r;
    x->limit_left = -1;
    x->db = mf_strdup(op->db);
    x->coll = mf_strdup(coll);
    mf_agg_limits_t lim = agg_limits(op, allow_disk);
    x->stream = mf_agg_stream_new(pl, 0, &lim); /* nothing pushed down: every stage runs on the stream */
    return x;
}

static bool
allow_disk_default(mf_op_t *op)
{
    return mf_param_get(op->eng->params, "allowDiskUseByDefault") != 0;
}

/* mf_crud_allow_disk: see crud.h. */
bool
mf_crud_allow_disk(mf_op_t *op, const bson_t *cmd)
{
    bson_iter_t it;
    if (cmd != NULL && bson_iter_init_find(&it, cmd, "allowDiskUse") && BSON_ITER_HOLDS_BOOL(&it))
        return bson_iter_bool(&it);
    return allow_disk_default(op);
}

/*
 * view_stream: a streaming run of `stages` (array value or NULL) over
 * `name`, a view resolved to its collection, or a collection. hint (may
 * be NULL) plans the resolved pipeline over the underlying collection, as
 * mongod keeps a view read's hint (a bad one is 2 there too). Catalog
 * lock held. The state is owned by the caller; NULL with err.
 */
/*
 * ts_hint_to_buckets: a key-pattern hint given on a time-series collection
 * (whose reads resolved to buckets collection base), in the buckets' form
 * (into out, initialised here), as mongod translates it with
 * createBucketsIndexSpecFromTimeseriesIndexSpec: {m: 1, t: 1} is the
 * buckets' {meta: 1, control.min.t: 1, control.max.t: 1}. False (out
 * untouched) for a name, {}, {$natural: d}, or a base that is not
 * time-series; a hint matching no index stays 2 BadValue when planned.
 */
static bool
ts_hint_to_buckets(mf_op_t *op, const char *base, const bson_value_t *hint, bson_t *out)
{
    bson_t h;
    mf_ts_spec_t spec;
    mf_coll_t *b;

    if (hint == NULL || hint->value_type != BSON_TYPE_DOCUMENT || hint->value.v_doc.data_len <= 5 ||
        !bson_init_static(&h, hint->value.v_doc.data, hint->value.v_doc.data_len) || bson_has_field(&h, "$natural"))
        return false;
    b = mf_catalog_coll_find(op->eng->cat, op->db, base);
    if (b == NULL || b->is_view || !mf_ts_spec_of(b, &spec))
        return false;
    mf_ts_key_to_buckets(&spec, &h, false, out);
    return true;
}

static agg_stream_t *
view_stream(mf_op_t *op, const char *name, const bson_value_t *stages, int depth, const bson_value_t *hint,
            bool allow_disk, const bson_t *out_proj, const mf_projection_t *out_parsed, mf_error_t *err)
{
    char *base = NULL;
    bson_t stats;
    bool has_stats;
    mf_pipeline_t *pl = view_resolve(op, name, stages, &depth, &base, &stats, &has_stats, err);
    agg_stream_t *x = NULL;
    bson_t bhint;
    bson_value_t bhint_v;
    bool translated = false;

    if (pl != NULL && has_stats) {
        /* Led by $collStats: its one document is the source; nothing is pushed down. */
        x = mf_calloc(1, sizeof *x);
        x->sc.op = op;
        x->sc.stream = x;
        x->sc.view_depth = depth;
        x->pl = pl;
        x->one_doc = bson_copy(&stats);
        x->one_pending = true;
        x->limit_left = -1;
        x->db = mf_strdup(op->db);
        x->coll = mf_strdup(base);
        mf_agg_limits_t lim = agg_limits(op, allow_disk);
        x->stream = mf_agg_stream_new(pl, 0, &lim);
        bson_destroy(&stats);
        free(base);
        return x;
    }
    if (pl != NULL) {
        /* Only through a view: a hint given on the buckets collection itself is already in their form. */
        if (strcmp(name, base) != 0 && ts_hint_to_buckets(op, base, hint, &bhint)) {
            bhint_v.value_type = BSON_TYPE_DOCUMENT;
            bhint_v.value.v_doc.data = (uint8_t *)bson_get_data(&bhint);
            bhint_v.value.v_doc.data_len = bhint.len;
            hint = &bhint_v;
            translated = true;
        }
        /* plans now: the hint and out_proj are not kept */
        x = agg_stream_new(op, base, pl, hint, allow_disk, depth, out_proj, out_parsed);
        if (x == NULL && err != &op->err)
            *err = op->err;
    }
    if (translated)
        bson_destroy(&bhint);
    free(base);
    return x;
}

/* view_each: calls visit for every result of stages over view name (0 or -1 with err; visit > 0 stops). */
static int
view_each(mf_op_t *op, const char *name, const bson_value_t *stages, int depth, const bson_value_t *hint,
          mf_agg_scan_stats_t *sink, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    agg_stream_t *x = view_stream(op, name, stages, depth, hint, allow_disk_default(op), NULL, NULL, err);
    mf_agg_env_t env;
    int rc = 0;

    if (x == NULL)
        return -1;
    env_init_streaming(&env, op, &x->sc);
    x->sc.scan_stats = sink; /* the view's own stages' reads of other collections count too */
    for (;;) {
        bson_t *d;
        if (mf_agg_stream_next(x->stream, &env, &d, err) != 0) {
            rc = -1;
            break;
        }
        if (d == NULL)
            break;
        int r = visit(arg, d);
        bson_destroy(d);
        if (r != 0) {
            rc = r < 0 ? -1 : 0;
            break;
        }
    }
    if (sink != NULL)
        plan_stats_add(x->plan, sink);
    agg_stream_free(x);
    return rc;
}

/*
 * env->sub_open / sub_next / sub_free: a streaming $unionWith's other
 * collection (or view) with its sub-pipeline, as a stream of its own kept
 * with the outer one between getMores (its op is refreshed at every pull).
 */
static void *
agg_sub_open(void *ctx, const char *coll, const bson_value_t *pipeline, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    return view_stream(x->op, coll, pipeline, x->view_depth, NULL, allow_disk_default(x->op), NULL, NULL, err);
}

static int
agg_sub_next(void *ctx, void *sub, bson_t **out, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    agg_stream_t *s = sub;
    mf_agg_env_t env;

    s->sc.op = x->op;
    env_init_streaming(&env, x->op, &s->sc);
    if (mf_agg_stream_next(s->stream, &env, out, err) != 0)
        return -1;
    if (*out != NULL && ((s->plan != NULL && s->plan->text != NULL) || mf_pipeline_geo_meta(s->pl)))
        mf_text_strip_score(out); /* a leading $text or $geoNear: its metadata stays inside the sub-pipeline */
    return 0;
}

/* env_set_streams: the sub-stream callbacks of a streaming environment. */
static void
env_set_streams(mf_agg_env_t *env)
{
    env->sub_open = agg_sub_open;
    env->sub_next = agg_sub_next;
    env->sub_free = agg_stream_free;
    env->set_scan_stats = agg_set_scan_stats;
}

/*
 * env_init_streaming: *env cleared and set up to pull a pipeline's stream
 * for op: the scan, session-list, pull and index callbacks, the limits and
 * the sub-stream callbacks, with sc as their context (not owned).
 */
static void
env_init_streaming(mf_agg_env_t *env, mf_op_t *op, agg_scan_ctx_t *sc)
{
    memset(env, 0, sizeof(*env));
    env->scan = agg_scan;
    env->list_sessions = agg_list_sessions; /* $lookup sub-pipelines may list sessions too */
    env_set_limits(env, op);
    env->pull = agg_pull;
    env->pull_count = agg_pull_count;
    env_set_streams(env);
    env->source_indexes = agg_source_indexes; /* a $geoNear heading it reads the other collection's indexes */
    env->ctx = sc;
}

/*
 * view_scan (env->scan of a view): the documents of view `name` that match
 * filter, streamed through the view's resolved pipeline with the filter as
 * a last $match (so it is pushed down when the view allows).
 */
static int
view_scan(agg_scan_ctx_t *x, const char *name, const bson_t *filter, mf_agg_visit_fn visit, void *arg,
          mf_error_t *err)
{
    bson_t stages = BSON_INITIALIZER;
    int k = 0;

    if (filter != NULL && !bson_empty(filter))
        mf_crud_stage_doc(&stages, &k, "$match", filter);
    bson_value_t sv = array_value(&stages);
    int rc = view_each(x->op, name, &sv, x->view_depth, NULL, x->scan_stats, visit, arg, err);
    bson_destroy(&stages);
    return rc;
}

/* cursor_take: cur becomes the streaming cursor owning x. */
static void
cursor_take(mf_cursor_t *cur, agg_stream_t *x)
{
    cur->kind = MF_CURSOR_EXT;
    cur->ext = x;
    cur->ext_free = agg_stream_free;
}

/*
 * agg_stream_start: if *plp can stream over `name` (a collection or a
 * view; ending in $out/$merge only for_write, when the caller writes what
 * it pulls), makes cur an MF_CURSOR_EXT cursor owning the
 * pipeline (a view's resolved one replaces *plp, which is freed) and the
 * plan, sets *plp NULL and *started, and returns 0. Otherwise leaves
 * everything to the materialising path. pv: the command's pipeline array.
 * Catalog lock held. 0 or -1 with op->err.
 */
static int
agg_stream_start(mf_op_t *op, const char *name, mf_pipeline_t **plp, const bson_value_t *pv,
                 const bson_value_t *hint, bool allow_disk, bool for_write, mf_cursor_t *cur, bool *started)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    agg_stream_t *x;

    *started = false;
    if ((mf_pipeline_writes(*plp) && !for_write) || mf_pipeline_is_collectionless(*plp))
        return 0;
    if (c != NULL && c->is_view) {
        x = view_stream(op, name, pv, 0, hint, allow_disk, NULL, NULL, &op->err);
    } else {
        x = agg_stream_new(op, name, *plp, hint, allow_disk, 0, NULL, NULL);
        *plp = NULL;
    }
    if (x == NULL)
        return -1;
    mf_pipeline_free(*plp);
    *plp = NULL;
    cursor_take(cur, x);
    *started = true;
    return 0;
}

/*
 * check_write_target: the checks MongoDB makes of an $out / $merge target
 * namespace, in their order (document_source_out.cpp's and
 * document_source_merge.cpp's create): a valid namespace (73), not a
 * system.* collection ($out 17385, $merge 31319), not on the admin, config
 * or local database ($out 31321, $merge 31320).
 */
static int
check_write_target(const char *db, const char *coll, bool merge, mf_error_t *err)
{
    if (mf_catalog_check_db_name(db, err) != 0)
        return -1;
    /* NamespaceString::isValid: no empty collection name, none starting with '.', no '$'. */
    if (coll[0] == '.' || strchr(coll, '$') != NULL) {
        if (merge)
            return mf_err_set(err, MF_E_InvalidNamespace, "Invalid $merge target namespace: '%s.%s'", db, coll);
        return mf_err_set(err, MF_E_InvalidNamespace, "Invalid $out target namespace, %s.%s", db, coll);
    }
    if (mf_catalog_check_coll_name(db, coll, err) != 0)
        return -1;
    if (strncmp(coll, "system.", 7) == 0) {
        if (merge)
            return mf_err_set(err, MF_E_Location31319, "Cannot $merge to special collection: %s", coll);
        return mf_err_set(err, MF_E_Location17385, "Can't $out to special collection: %s", coll);
    }
    if (strcmp(db, "admin") == 0 || strcmp(db, "config") == 0 || strcmp(db, "local") == 0) {
        if (merge)
            return mf_err_set(err, MF_E_Location31320, "Cannot $merge to internal database: %s", db);
        return mf_err_set(err, MF_E_Location31321, "Can't $out to internal database: %s", db);
    }
    return 0;
}

#define WRITE_BATCH_DOCS 1000
#define WRITE_BATCH_BYTES (16 * 1024 * 1024)

/*
 * agg_write_stream: runs a pipeline ending in $out / $merge as a stream
 * into an mf_agg_writer, a batch at a time: each batch is read under the
 * catalog read lock (the stream keeps its position between batches, as a
 * cursor does between getMores) and written with no lock held, so memory is
 * one batch, not the whole output. A $merge into the collection it reads
 * falls back to the materialising path (*wrote stays false): reading what it
 * writes could see its own output. Called with no catalog lock held. On
 * success *plp is consumed (NULL) and *wrote set. 0 or -1 with op->err.
 */
static int
agg_write_stream(mf_op_t *op, const char *name, mf_pipeline_t **plp, const bson_value_t *pv,
                 const bson_value_t *hint, bool allow_disk, bool *wrote)
{
    const char *tdb, *tcoll;
    const bson_t *mspec;
    mf_agg_writer_t *wr = NULL;
    agg_stream_t *x = NULL;
    mf_cursor_t *holder = NULL;
    char *base = NULL;
    int rc = -1;

    *wrote = false;
    if (mf_pipeline_is_collectionless(*plp) || !mf_pipeline_write_target(*plp, &tdb, &tcoll, &mspec))
        return 0;
    if (tdb == NULL)
        tdb = op->db;
    if (check_write_target(tdb, tcoll, mspec != NULL, &op->err) != 0)
        return -1;
    if (mspec != NULL) {
        bson_t scratch = BSON_INITIALIZER;
        int depth = 0;
        mf_catalog_rdlock(op->eng->cat);
        int r = mf_crud_view_resolve(op, name, NULL, &depth, &base, &scratch, &op->err);
        mf_catalog_unlock(op->eng->cat);
        bson_destroy(&scratch);
        if (r != 0)
            return -1;
        bool same = strcmp(tdb, op->db) == 0 && strcmp(tcoll, base) == 0;
        free(base);
        if (same)
            return 0;
    }
    /* The writer first ($out's temporary collection), copying the target names out of the pipeline. */
    bson_value_t out_ts;
    if (mf_pipeline_out_timeseries(*plp, &out_ts))
        wr = mf_agg_writer_begin_out_ts(op->eng->cat, op->sess, mf_crud_want_durable(op),
                                        !mf_crud_bypass_validation(op), tdb, tcoll, &out_ts, &op->err);
    else
        wr = mf_agg_writer_begin(op->eng->cat, op->sess, mf_crud_want_durable(op), !mf_crud_bypass_validation(op), tdb,
                                 tcoll, mspec, &op->err);
    if (wr == NULL)
        return -1;
    holder = mf_cursor_new(MF_CURSOR_DOCS, op->db, name);
    mf_catalog_rdlock(op->eng->cat);
    bool started = false;
    rc = agg_stream_start(op, name, plp, pv, hint, allow_disk, true, holder, &started);
    mf_catalog_unlock(op->eng->cat);
    if (rc != 0 || !started) {
        rc = started ? rc : mf_err_set(&op->err, MF_E_InternalError, "$out / $merge pipeline did not stream");
        goto out;
    }
    x = holder->ext;
    for (bool eof = false; !eof;) {
        mf_docvec_t batch;
        int64_t bytes = 0;
        mf_agg_env_t env;
        env_init_streaming(&env, op, &x->sc);
        x->sc.op = op;
        mf_docvec_init(&batch);
        mf_catalog_rdlock(op->eng->cat);
        while (batch.len < WRITE_BATCH_DOCS && bytes < WRITE_BATCH_BYTES) {
            bson_t *d;
            if ((rc = mf_agg_stream_next(x->stream, &env, &d, &op->err)) != 0)
                break;
            if (d == NULL) {
                eof = true;
                break;
            }
            if ((x->plan != NULL && x->plan->text != NULL) || mf_pipeline_geo_meta(x->pl))
                mf_text_strip_score(&d);
            bytes += d->len;
            mf_docvec_push_steal(&batch, d);
        }
        mf_catalog_unlock(op->eng->cat);
        if (rc == 0 && batch.len > 0)
            rc = mf_agg_writer_append(wr, &batch, &op->err);
        mf_docvec_destroy(&batch);
        if (rc != 0)
            goto out_exec;
    }
    rc = mf_agg_writer_commit(wr, &op->err);
    if (rc == 0)
        *wrote = true;
out_exec:
    if (rc != 0)
        mf_err_context(&op->err, EXEC_ERROR_AGG);
out:
    mf_agg_writer_free(wr);
    mf_cursor_free(holder);
    return rc;
}

/* Where $currentOp's rows go: out, only owner's when own_only (allUsers: false under access control). */
typedef struct curop_rows {
    mf_docvec_t *out;
    bool own_only;
    mf_curop_owner_t owner;
} curop_rows_t;

static void
push_curop_row(void *arg, const bson_t *doc)
{
    curop_rows_t *r = arg;
    if (!r->own_only || mf_cmd_curop_owned_by(doc, &r->owner))
        mf_docvec_push(r->out, doc);
}

/*
 * env->current_op: the rows of $currentOp (the registry of operations in
 * flight), the open transactions no command is running in (unless
 * idleSessions: false), then with idleCursors: true the cursors no
 * operation is using.
 */
static int
agg_current_op(void *ctx, const bson_t *spec, mf_docvec_t *out, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    bson_iter_t it;
    curop_rows_t rows = {.out = out};
    (void)err;
    /* allUsers is false unless set: under access control the caller's own operations only, as mongod's. */
    bool all = bson_iter_init_find(&it, spec, "allUsers") && bson_iter_as_bool(&it);
    rows.own_only = mf_cmd_curop_own_only(x->op, !all, &rows.owner);
    mf_cmd_txn_report_ops(x->op->eng, push_curop_row, &rows);
    if (bson_iter_init_find(&it, spec, "idleConnections") && bson_iter_as_bool(&it))
        mf_curops_report_idle_conns(x->op->eng->curops, x->op->eng->host, push_curop_row, &rows);
    /* idleSessions is true unless set false, as mongod's. */
    if (!bson_iter_init_find(&it, spec, "idleSessions") || bson_iter_as_bool(&it))
        mf_cmd_txn_report_idle(x->op->eng, push_curop_row, &rows);
    if (bson_iter_init_find(&it, spec, "idleCursors") && bson_iter_as_bool(&it))
        mf_cursors_report_idle(x->op->eng->cursors, push_curop_row, &rows);
    return 0;
}

/* env->list_sessions: the rows of $listLocalSessions / $listSessions (cmd_sessions.c). */
static int
agg_list_sessions(void *ctx, const char *stage, const bson_t *spec, mf_docvec_t *out, mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    return mf_cmd_sessions_list(x->op, stage, spec, out, err);
}

/* env->write_out: validates the target and records the write (stealing the documents). */
static int
agg_write_out(void *ctx, const char *db, const char *coll, mf_docvec_t *docs, const bson_t *merge_spec,
              mf_error_t *err)
{
    agg_scan_ctx_t *x = ctx;
    agg_write_t *w = x->write;
    const char *tdb = db ? db : x->op->db;

    if (check_write_target(tdb, coll, merge_spec != NULL, err) != 0)
        return -1;
    w->pending = true;
    w->db = bson_strdup(tdb);
    w->coll = bson_strdup(coll);
    w->docs = *docs;
    mf_docvec_init(docs);
    w->merge_spec = merge_spec ? bson_copy(merge_spec) : NULL;
    return 0;
}

static void
agg_write_destroy(agg_write_t *w)
{
    bson_free(w->db);
    bson_free(w->coll);
    mf_docvec_destroy(&w->docs);
    if (w->merge_spec)
        bson_destroy(w->merge_spec);
    if (w->out_ts.value_type != BSON_TYPE_EOD)
        bson_value_destroy(&w->out_ts);
}

/*
 * agg_write_perform: performs a recorded $out / $merge. No catalog lock is
 * held on entry. What fails once the writer has begun (the target checked)
 * is an error of the running pipeline, as mongod's DocumentSourceOut /
 * DocumentSourceMerge report it from the plan executor.
 */
static int
agg_write_perform(mf_op_t *op, agg_write_t *w)
{
    if (!w->pending)
        return 0;
    mf_agg_writer_t *wr =
        w->out_ts.value_type != BSON_TYPE_EOD
            ? mf_agg_writer_begin_out_ts(op->eng->cat, op->sess, mf_crud_want_durable(op), !mf_crud_bypass_validation(op),
                                         w->db, w->coll, &w->out_ts, &op->err)
            : mf_agg_writer_begin(op->eng->cat, op->sess, mf_crud_want_durable(op), !mf_crud_bypass_validation(op), w->db,
                                  w->coll, w->merge_spec, &op->err);
    if (wr == NULL)
        return -1;
    int rc = mf_agg_writer_append(wr, &w->docs, &op->err);
    if (rc == 0)
        rc = mf_agg_writer_commit(wr, &op->err);
    mf_agg_writer_free(wr);
    if (rc != 0)
        mf_err_context(&op->err, EXEC_ERROR_AGG);
    return rc;
}


int
mf_crud_view_each(mf_op_t *op, const char *name, const bson_t *stages, const bson_value_t *hint, mf_agg_visit_fn visit,
                  void *arg)
{
    bson_value_t sv = array_value(stages);
    return view_each(op, name, &sv, 0, hint, NULL, visit, arg, &op->err);
}

int
mf_crud_view_cursor(mf_op_t *op, const char *name, const bson_t *stages, const bson_value_t *hint, bool allow_disk,
                    mf_projection_t *proj, const bson_t *cover_proj, mf_matcher_t *m, mf_cursor_t *cur)
{
    bson_value_t sv = array_value(stages);
    agg_stream_t *x = view_stream(op, name, &sv, 0, hint, allow_disk, cover_proj, cover_proj != NULL ? proj : NULL, &op->err);

    if (x == NULL) {
        if (proj)
            mf_projection_free(proj);
        mf_matcher_free(m);
        return -1;
    }
    x->out_proj = proj;
    x->out_m = m;
    cursor_take(cur, x);
    return 0;
}

/* mf_crud_cursor_set_geo_meta: see crud.h. */
void
mf_crud_cursor_set_geo_meta(mf_cursor_t *cur)
{
    agg_stream_t *x = cur->ext;
    if (x != NULL && x->pl != NULL)
        mf_pipeline_set_geo_meta(x->pl);
}

/* mf_crud_cursor_set_return_key: see crud.h. */
int
mf_crud_cursor_set_return_key(mf_cursor_t *cur, const mf_index_t *ix, mf_error_t *err)
{
    agg_stream_t *x = cur->ext;
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    bson_t key;

    if (x == NULL || !bson_iter_init_find(&it, ix->spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return 0;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&key, data, len))
        return 0;
    x->rk_kp = mf_calloc(1, sizeof *x->rk_kp);
    if (x->rk_kp == NULL)
        return mf_err_set(err, MF_E_InternalError, "out of memory");
    if (mf_keypattern_parse(&key, x->rk_kp, err) != 0) {
        free(x->rk_kp);
        x->rk_kp = NULL;
        return -1;
    }
    /* What the catalog sets beside the pattern: a 2d index's range, the key format. */
    x->rk_kp->geo_min = ix->kp.geo_min;
    x->rk_kp->geo_max = ix->kp.geo_max;
    x->rk_kp->legacy_decimals = ix->kp.legacy_decimals;
    x->rk_key = bson_copy(&key);
    return 0;
}

/* Appends {<stage>: doc} as the next element of the stages array. */
void
mf_crud_stage_doc(bson_t *stages, int *n, const char *stage, const bson_t *doc)
{
    char key[16];
    bson_t st;
    snprintf(key, sizeof(key), "%d", (*n)++);
    BSON_APPEND_DOCUMENT_BEGIN(stages, key, &st);
    BSON_APPEND_DOCUMENT(&st, stage, doc);
    bson_append_document_end(stages, &st);
}

void
mf_crud_stage_int(bson_t *stages, int *n, const char *stage, int64_t v)
{
    char key[16];
    bson_t st;
    snprintf(key, sizeof(key), "%d", (*n)++);
    BSON_APPEND_DOCUMENT_BEGIN(stages, key, &st);
    BSON_APPEND_INT64(&st, stage, v);
    bson_append_document_end(stages, &st);
}

/*
 * Every view the pipeline reads ($lookup, $graphLookup, $unionWith, in
 * sub-pipelines and $facet too) must have the operation's collation as its
 * default: the command's, else its collection's or view's (installed by the
 * dispatcher). mongod's collatorCompatibleWithPipeline: 167
 * OptionNotSupportedOnView, its message run on into the namespace.
 */
typedef struct views_coll_arg {
    mf_op_t *op;
    const mf_collation_t *want;
} views_coll_arg_t;

static int
views_collation_visit(void *arg, const char *coll)
{
    views_coll_arg_t *a = arg;
    mf_coll_t *v = mf_catalog_coll_find(a->op->eng->cat, a->op->db, coll);
    if (v == NULL || !v->is_view || mf_cmd_view_collation_is(v, a->want))
        return 0;
    return mf_err_set(&a->op->err, MF_E_OptionNotSupportedOnView, "Cannot override a view's default collation%s.%s",
                      a->op->db, coll);
}

int
mf_crud_agg_views_collation(mf_op_t *op, const mf_pipeline_t *pl)
{
    views_coll_arg_t a = {op, mf_collation_current()};
    mf_catalog_rdlock(op->eng->cat);
    int rc = mf_pipeline_foreign_colls(pl, views_collation_visit, &a);
    mf_catalog_unlock(op->eng->cat);
    return rc;
}

int
mf_cmd_aggregate(mf_op_t *op)
{
    bson_iter_t it, ci;
    const char *name = NULL;
    int64_t batch = FIRST_BATCH_DEFAULT;
    mf_pipeline_t *pl;
    bool has_cursor = false, explain = false, present;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        if (mf_op_coll_name(op, &name) != 0)
            return -1;
    } else if (!mf_value_is_number(bson_iter_value(&it)) || mf_value_as_double(bson_iter_value(&it)) != 1) {
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "Invalid command format: the 'aggregate' field must specify a collection name or 1");
    }
    if (!mf_op_find(op, "pipeline", &it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'aggregate.pipeline' is missing but a required field");
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.pipeline' is the wrong type '%s', expected type 'array'",
                          mf_type_name(bson_iter_type(&it)));
    bool change_stream = false;
    if (op->eng->repl != NULL) {
        /*
         * A member serves change streams (cmd_changestream.c); a standalone
         * answers 40573 from the stage's parser, as mongod. Elsewhere than
         * first, the stage is 40602 on a member.
         */
        bson_iter_t st, f;
        int pos = 0;
        if (bson_iter_recurse(&it, &st)) {
            while (bson_iter_next(&st)) {
                if (BSON_ITER_HOLDS_DOCUMENT(&st) && bson_iter_recurse(&st, &f) && bson_iter_next(&f) &&
                    strcmp(bson_iter_key(&f), "$changeStream") == 0) {
                    if (pos > 0)
                        return mf_err_set(&op->err, MF_E_Location40602,
                                          "$changeStream is only valid as the first stage in a pipeline");
                    change_stream = true;
                }
                pos++;
            }
        }
    }
    static const mf_field_spec_t agg_types[] = {{"bypassDocumentValidation", MF_FT_BOOL}, {"collation", MF_FT_OBJ},
                                                {"let", MF_FT_OBJ}, {NULL, MF_FT_ANY}};
    if (mf_op_get_bool(op, "explain", &explain, &present) != 0 ||
        mf_op_check_types(op, op->name, op->cmd, agg_types, false, true) != 0)
        return -1;
    if (mf_op_find(op, "cursor", &ci)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&ci))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.cursor' is the wrong type '%s', expected type 'object'",
                              mf_type_name(bson_iter_type(&ci)));
        has_cursor = true;
        /* The cursor document is strict: only batchSize (SimpleCursorOptions). */
        static const mf_field_spec_t cursor_types[] = {{"batchSize", MF_FT_ANY}, {NULL, MF_FT_ANY}};
        bson_t cdoc;
        const uint8_t *cd;
        uint32_t cl;
        bson_iter_document(&ci, &cl, &cd);
        if (bson_init_static(&cdoc, cd, cl) && mf_op_check_types(op, "aggregate.cursor", &cdoc, cursor_types, true, false) != 0)
            return -1;
        bson_iter_t bi;
        if (bson_iter_recurse(&ci, &bi) && bson_iter_find(&bi, "batchSize")) {
            const bson_value_t *bv = bson_iter_value(&bi);
            if (!mf_value_is_number(bv))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field 'aggregate.cursor.batchSize' is the wrong type '%s', expected types '[long, "
                                  "int, decimal, double']", mf_type_name(bv->value_type));
            /* safeInt64 (BSONElement::safeNumberLong): truncated, NaN 0, clamped to the int64 range. */
            if (!mf_value_as_int64(bv, &batch)) {
                double d = mf_value_as_double(bv);
                batch = d != d ? 0 : d >= 9223372036854775807.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
            }
            if (batch < 0)
                return mf_err_set(&op->err, MF_E_Location51024, "BSON field 'batchSize' value must be >= 0, actual value '%lld'",
                                  (long long)batch);
        }
    }
    bool allow_disk = allow_disk_default(op);
    if (mf_op_find(op, "allowDiskUse", &ci)) {
        if (!BSON_ITER_HOLDS_BOOL(&ci))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'aggregate.allowDiskUse' is the wrong type '%s', expected type 'bool'",
                              mf_type_name(bson_iter_type(&ci)));
        allow_disk = bson_iter_bool(&ci);
    }
    if (!has_cursor && !explain)
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "The 'cursor' option is required, except for aggregate with the explain argument");
    if (change_stream && explain)
        return mf_err_set(&op->err, MF_E_CommandNotSupported, "mayfly does not explain $changeStream pipelines");
    if (change_stream)
        return mf_cmd_changestream_open(op, name, bson_iter_value(&it), batch);
    if (explain)
        return mf_crud_explain_aggregate(op, op->cmd, "queryPlanner");
    const bson_value_t *hint = NULL;
    bson_value_t hint_store;
    if (mf_crud_get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    /*
     * A leading $collStats stage makes the collection's statistics document
     * the pipeline's only input (mongosh's db.c.stats() sends it).
     */
    bson_t rest, stats_doc;
    bool collstats = false, archived = false, archive_none = false, indexstats = false;
    mf_docvec_t index_stats;
    uint8_t archive_uuid[16] = {0};
    const bson_value_t *pv = bson_iter_value(&it);
    bson_value_t rest_v;
    /*
     * A view whose definition starts with $collStats (view_catalog_helpers.cpp
     * resolveView stops there): the stage reports on the namespace the
     * resolution stopped at, and the rest of the resolved pipeline runs over
     * its document. A reader's own leading stage is run on the view itself
     * (latencyStats of a view), as mongod's.
     */
    bson_t vres = BSON_INITIALIZER;
    bson_value_t vres_v;
    char *vbase = NULL;
    const char *stats_name = name;
    if (name != NULL && !mf_crud_stages_start_with(pv, "$collStats") && !mf_crud_stages_start_with(pv, "$archived") &&
        !mf_crud_stages_start_with(pv, "$indexStats") && !mf_crud_stages_start_with(pv, "$planCacheStats")) {
        mf_catalog_rdlock(op->eng->cat);
        mf_coll_t *vc = mf_catalog_coll_find(op->eng->cat, op->db, name);
        int depth = 0;
        if (vc != NULL && vc->is_view && mf_crud_view_resolve(op, name, pv, &depth, &vbase, &vres, &op->err) != 0)
            mf_err_clear(&op->err); /* the resolution's error is the ordinary path's to report */
        mf_catalog_unlock(op->eng->cat);
        vres_v = array_value(&vres);
        if (vbase != NULL && mf_crud_stages_start_with(&vres_v, "$collStats")) {
            pv = &vres_v;
            stats_name = vbase;
        } else {
            bson_reinit(&vres);
            free(vbase);
            vbase = NULL;
        }
    }
    if (name != NULL) {
        bson_t arr;
        bson_iter_t si, first;
        bson_init_static(&arr, pv->value.v_doc.data, pv->value.v_doc.data_len);
        if (bson_iter_init(&si, &arr) && bson_iter_next(&si) && BSON_ITER_HOLDS_DOCUMENT(&si) &&
            bson_iter_recurse(&si, &first) && bson_iter_next(&first) &&
            (strcmp(bson_iter_key(&first), "$collStats") == 0 || strcmp(bson_iter_key(&first), "$archived") == 0 ||
             strcmp(bson_iter_key(&first), "$indexStats") == 0 ||
             strcmp(bson_iter_key(&first), "$planCacheStats") == 0)) {
            int k = 0;
            char key[16];
            if (bson_iter_key(&first)[1] == 'p') {
                /* $planCacheStats: mayfly's planner caches no plans, so there are no entries. */
                if (plan_cache_stats_check(op, &first, name) != 0)
                    return -1;
                mf_docvec_init(&index_stats);
                indexstats = true;
            } else if (bson_iter_key(&first)[1] == 'i') {
                /* $indexStats: {} : one document per index is the pipeline's source. */
                if (!BSON_ITER_HOLDS_DOCUMENT(&first) || bson_iter_value(&first)->value.v_doc.data_len != 5)
                    return mf_err_set(&op->err, MF_E_Location28803,
                                      "The $indexStats stage specification must be an empty object");
                mf_docvec_init(&index_stats);
                if (index_stats_docs(op, name, &index_stats) != 0) {
                    mf_docvec_destroy(&index_stats);
                    return -1;
                }
                indexstats = true;
            } else if (bson_iter_key(&first)[1] == 'a') {
                /* $archived: {} (SPEC I2): the source is the collection's archive. */
                if (!BSON_ITER_HOLDS_DOCUMENT(&first) || bson_iter_value(&first)->value.v_doc.data_len != 5)
                    return mf_err_set(&op->err, MF_E_FailedToParse,
                                      "the $archived stage takes an empty document: {$archived: {}}");
                archived = true;
                mf_catalog_rdlock(op->eng->cat);
                mf_coll_t *ac = mf_catalog_coll_find(op->eng->cat, op->db, name);
                archive_none = ac == NULL || ac->is_view;
                if (!archive_none)
                    memcpy(archive_uuid, ac->uuid, 16);
                mf_catalog_unlock(op->eng->cat);
            } else if (mf_cmd_coll_stats_doc(op, stats_name, &first, &stats_doc) != 0) {
                bson_destroy(&vres);
                free(vbase);
                return -1;
            }
            collstats = !archived && !indexstats;
            bson_init(&rest);
            while (bson_iter_next(&si)) {
                snprintf(key, sizeof(key), "%d", k++);
                bson_append_value(&rest, key, -1, bson_iter_value(&si));
            }
            rest_v.value_type = BSON_TYPE_ARRAY;
            rest_v.value.v_doc.data = (uint8_t *)bson_get_data(&rest);
            rest_v.value.v_doc.data_len = rest.len;
            pv = &rest_v;
        }
    }
    bson_destroy(&vres); /* pv no longer points into it: the rest was copied */
    free(vbase);
    pl = mf_pipeline_new(pv, &op->err);
    if (pl == NULL)
        mf_crud_optimize_context(&op->err);
    if (collstats || archived || indexstats)
        bson_destroy(&rest);
    if (pl != NULL && mf_pipeline_lookup_from_check(pl, op->db, &op->err) != 0) {
        mf_pipeline_free(pl);
        pl = NULL;
    }
    if (pl != NULL && mf_crud_agg_views_collation(op, pl) != 0) {
        mf_pipeline_free(pl);
        pl = NULL;
    }
    if (pl != NULL && mf_pipeline_sorts_by_text_score(pl)) {
        /* The text score exists only after a leading $match with $text (doc/text.h). */
        bson_value_t tv;
        if (mf_text_find(mf_pipeline_first_match(pl), &tv, &op->err) != 1) {
            mf_err_set(&op->err, MF_E_Location40218, "query requires text score metadata, but it is not available");
            mf_pipeline_free(pl);
            pl = NULL;
        }
    }
    unsigned geo_bits = pl != NULL ? mf_geo_meta_mentioned(pv) : 0;
    if (geo_bits != 0 && !mf_pipeline_geo_meta(pl)) {
        /* $geoNear's metadata exists only after a leading $geoNear (DepsTracker's unavailable metadata). */
        mf_err_set(&op->err, MF_E_Location40218, "query requires $geoNear %s metadata, but it is not available",
                   (geo_bits & MF_GEO_META_DIST) ? "distance" : "point");
        mf_pipeline_free(pl);
        pl = NULL;
    }
    if (pl == NULL) {
        if (collstats)
            bson_destroy(&stats_doc);
        if (indexstats)
            mf_docvec_destroy(&index_stats);
        return -1;
    }
    if (name == NULL && !mf_pipeline_is_collectionless(pl)) {
        mf_pipeline_free(pl);
        return mf_err_set(&op->err, MF_E_InvalidNamespace,
                          "{aggregate: 1} is not valid for this pipeline; a collection is required.");
    }
    if (name != NULL && mf_pipeline_starts_with_documents(pl)) {
        /* mongod's Pipeline::validateTopLevelPipeline: a stage independent of any collection, on one. */
        mf_pipeline_free(pl);
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "'$documents' can only be run with {aggregate: 1}");
    }
    /* $listLocalSessions runs on {aggregate: 1}, $listSessions on config.system.sessions (as mongod). */
    const char *ls = mf_pipeline_lists_sessions(pl);
    if (ls != NULL && ls[5] == 'L' && name != NULL) {
        mf_err_set(&op->err, MF_E_InvalidNamespace,
                   "$listLocalSessions must be run against the database with {aggregate: 1}, not a collection");
        mf_pipeline_free(pl);
        return -1;
    }
    if (ls != NULL && ls[5] == 'S' && (name == NULL || strcmp(op->db, "config") != 0 || strcmp(name, "system.sessions") != 0)) {
        mf_err_set(&op->err, MF_E_InvalidNamespace,
                   "$listSessions must be run against the 'system.sessions' collection in the 'config' database.");
        mf_pipeline_free(pl);
        return -1;
    }
    agg_write_t aw;
    bson_value_t ots;
    memset(&aw, 0, sizeof aw);
    mf_docvec_init(&aw.docs);
    if (mf_pipeline_out_timeseries(pl, &ots)) /* the materialising path's $out keeps its option past the pipeline */
        bson_value_copy(&ots, &aw.out_ts);
    agg_scan_ctx_t sc = {op, collstats ? &stats_doc : NULL, hint, &aw, 0};
    sc.archive_pending = archived;
    sc.source_docs = indexstats ? &index_stats : NULL;
    sc.source_pending = indexstats;
    sc.archive_none = archive_none;
    memcpy(sc.archive_uuid, archive_uuid, 16);
    mf_agg_env_t env;
    memset(&env, 0, sizeof(env));
    env.scan = agg_scan;
    env.list_sessions = agg_list_sessions; /* $lookup sub-pipelines may list sessions too */
    env_set_limits(&env, op);
    env.ctx = &sc;
    env.write_out = agg_write_out;
    if (name == NULL && strcmp(op->db, "admin") == 0)
        env.current_op = agg_current_op;
    if (name == NULL)
        name = "$cmd.aggregate";
    mf_cursor_t *cur = mf_cursor_new(MF_CURSOR_DOCS, op->db, name);
    bson_t arr;
    bool exhausted, streaming = false;
    int64_t id = 0;
    int rc = 0;
    bson_init(&arr);
    bool wrote = false;
    /* $collStats and $archived pipelines run over their own source, not streamed from the collection. */
    bool own_source = collstats || archived || indexstats;
    if (!own_source && strcmp(name, "$cmd.aggregate") != 0 && mf_pipeline_writes(pl))
        rc = agg_write_stream(op, name, &pl, pv, hint, allow_disk, &wrote);
    mf_catalog_rdlock(op->eng->cat);
    if (rc == 0 && archived && !archive_none && !mf_pipeline_writes(pl)) {
        /* $archived streams from the archive, so a large one is never held in memory whole. */
        agg_stream_t *x = archive_stream_new(op, name, pl, archive_uuid, allow_disk);
        pl = NULL;
        if (x == NULL) {
            rc = -1;
        } else {
            cursor_take(cur, x);
            streaming = true;
        }
    }
    if (rc != 0 || wrote)
        ; /* streamed into $out / $merge: no documents to return */
    else if (!own_source && strcmp(name, "$cmd.aggregate") != 0)
        rc = agg_stream_start(op, name, &pl, pv, hint, allow_disk, false, cur, &streaming);
    if (rc == 0 && (streaming || wrote)) {
        rc = mf_crud_cursor_fill(op, cur, batch, &arr, &exhausted); /* the first batch, under the same lock */
        if (rc != 0)
            mf_err_context(&op->err, EXEC_ERROR_AGG);
    } else if (rc == 0) {
        /* A pipeline over its own source or none ($documents, $collStats ...) runs whole here: its executor too. */
        if ((rc = mf_pipeline_run(pl, &env, name, &cur->docs, &op->err)) != 0)
            mf_err_context(&op->err, EXEC_ERROR_AGG);
    }
    mf_catalog_unlock(op->eng->cat);
    mf_pipeline_free(pl);
    if (collstats)
        bson_destroy(&stats_doc);
    if (indexstats)
        mf_docvec_destroy(&index_stats);
    if (rc == 0)
        rc = agg_write_perform(op, &aw); /* $out / $merge, outside the read lock */
    agg_write_destroy(&aw);
    if (rc != 0) {
        bson_destroy(&arr);
        mf_cursor_free(cur);
        return -1;
    }
    if (!streaming && (rc = mf_crud_cursor_fill(op, cur, batch, &arr, &exhausted)) != 0)
        mf_err_context(&op->err, EXEC_ERROR_AGG);
    if (rc == 0 && !exhausted) {
        id = mf_cmd_cursor_register(op, cur);
        if (id < 0) {
            bson_destroy(&arr);
            mf_cursor_free(cur);
            return -1;
        }
        mf_cursors_checkin(op->eng->cursors, cur);
    } else {
        mf_cursor_free(cur);
    }
    mf_crud_append_cursor_reply(op, "firstBatch", &arr, id, name);
    bson_destroy(&arr);
    return rc;
}
