/*
 * cmd_explain.c: explain for find, count, distinct, update, delete,
 * findAndModify and aggregate: the plan that runs (query/plan.c), printed
 * as MongoDB prints it, with executionStats when asked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "common/alloc.h"
#include "common/fmt.h"
#include "catalog/coll_write.h"
#include "cmd/cmd.h"
#include "common/curop.h"
#include "engine/cursor.h"
#include "common/docvec.h"
#include "common/log.h"
#include "common/params.h"
#include "query/agg.h"
#include "query/agg_spill.h"
#include "query/batch.h"
#include "query/exec.h"
#include "query/write.h"
#include "doc/collation.h"
#include "doc/match.h"
#include "doc/path.h"
#include "doc/project.h"
#include "doc/sort.h"
#include "doc/update.h"
#include "doc/value.h"
#include "cmd/crud.h"
#include "query/agg_geo.h"

/* ---------- explain ---------- */

/*
 * explain builds the same plan the command would run (mf_plan_build) and,
 * for executionStats / allPlansExecution, runs its access path with a
 * counting visitor that plays the stages above it (SKIP, LIMIT, SORT's
 * limit), then fills their counters. Nothing is written: explain of a
 * delete or update only selects the documents it would change.
 */
typedef struct explain_ctx {
    int64_t skip_left, limit, n;
    bool sorted;
    /*
     * An update's or delete's would-be effect (its stage's nMatched,
     * nWouldModify, nWouldDelete): upd (NULL for a delete) applied in
     * memory to each document it selects. Sorted with a limit of one (a
     * findAndModify or an updateOne with a sort), only the first in sort
     * order counts: best (owned) keeps it, with its match details.
     */
    bool counts;
    const mf_update_spec_t *upd;
    const mf_sort_t *order;
    bson_t *best;
    mf_match_details_t best_d;
    int64_t matched, would_modify;
    /*
     * A read's blocking SORT, run as the find runs it (its memory budget,
     * allowDiskUse, spills) for its executionStats: sorter (owned, NULL
     * when not run) takes a copy of each document; sort_bytes counts their
     * bytes; err is the op's (set when the sort fails).
     */
    mf_sorter_t *sorter;
    int64_t sort_bytes;
    mf_error_t *err;
} explain_ctx_t;

/* Counts doc as matched by the explained update or delete, and whether the update would change it. */
static void
explain_count(explain_ctx_t *x, const bson_t *doc, const mf_match_details_t *d)
{
    x->matched++;
    if (x->upd == NULL)
        return;
    bson_t out = BSON_INITIALIZER;
    bool changed = false;
    mf_error_t e = {0};
    if (mf_update_spec_apply(x->upd, doc, d, false, &out, &changed, &e) == 0 && changed)
        x->would_modify++;
    bson_destroy(&out);
}

static int
explain_sort_cmp(void *arg, const bson_t *a, const bson_t *b)
{
    return mf_sort_cmp((const mf_sort_t *)arg, a, b);
}

static int
explain_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    explain_ctx_t *x = arg;
    (void)rid;
    if (x->sorted) {
        if (x->sorter != NULL) {
            x->sort_bytes += doc->len;
            if (mf_sorter_add(x->sorter, bson_copy(doc), x->err) != 0)
                return -1;
        }
        if (!x->counts)
            return 0;
        if (x->order == NULL || x->limit != 1) {
            explain_count(x, doc, d);
        } else if (x->best == NULL || mf_sort_cmp(x->order, doc, x->best) < 0) {
            if (x->best != NULL)
                bson_destroy(x->best);
            x->best = bson_copy(doc);
            x->best_d = *d;
            x->best_d.index_key = NULL; /* views into the scan: not kept */
            x->best_d.index_key_len = 0;
            x->best_d.index_key_pattern = NULL;
        }
        return 0;
    }
    if (x->skip_left > 0) {
        x->skip_left--;
        return 0;
    }
    x->n++;
    if (x->counts)
        explain_count(x, doc, d);
    return x->limit > 0 && x->n >= x->limit ? 1 : 0;
}

/* Fills the counters of the stages above the access path from what it returned. */
static void
explain_propagate(mf_plan_t *p, int64_t limit_one)
{
    mf_stage_t *chain[32];
    int n = 0;
    for (mf_stage_t *s = p->root; s && n < 32; s = s->child)
        chain[n++] = s;
    int64_t cnt = p->fetch ? p->fetch->n_returned : p->leaf->n_returned;
    for (int i = n - 1; i >= 0; i--) {
        mf_stage_t *s = chain[i];
        if (s == p->leaf || s == p->fetch)
            continue;
        switch (s->kind) {
        case MF_ST_SORT:
            s->works = cnt + 1;
            if (s->amount > 0 && cnt > s->amount)
                cnt = s->amount;
            break;
        case MF_ST_SKIP:
            s->works = cnt + 1;
            cnt = cnt > s->amount ? cnt - s->amount : 0;
            break;
        case MF_ST_LIMIT:
            if (cnt > s->amount)
                cnt = s->amount;
            break;
        case MF_ST_COUNT:
        case MF_ST_DELETE:
        case MF_ST_BATCHED_DELETE:
        case MF_ST_UPDATE:
            if (limit_one && cnt > 1)
                cnt = 1;
            s->n_returned = 0;
            s->works = cnt + 1;
            continue;
        default:
            break;
        }
        s->n_returned = cnt;
    }
}

static bool
sub_doc(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

static int64_t
sub_int(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !mf_value_is_number(bson_iter_value(&it)))
        return 0;
    return (int64_t)mf_value_as_double(bson_iter_value(&it));
}

static const bson_value_t *
sub_hint(const bson_t *doc, bson_value_t *store)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "hint") || (!BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it)))
        return NULL;
    *store = *bson_iter_value(&it);
    return store;
}

/* An explained update or delete: what its UPDATE / DELETE stage's counters need. */
typedef struct explain_write {
    const mf_update_spec_t *upd; /* NULL for a delete */
    bool upsert;
} explain_write_t;

/*
 * serverParameters, as mongod 8.0's explain lists them: the query limits
 * that shape a plan, mayfly's values where it has the parameter, mongod's
 * defaults for the ones it does not (its own engine is neither SBE nor
 * mongos, so those two show their defaults).
 */
static void
append_server_parameters(mf_op_t *op)
{
    /* In mongod's order; "ours" marks a parameter mayfly keeps, whose value it shows. */
    static const struct {
        const char *name;
        int32_t fixed;
        bool ours;
    } params[] = {
        {"internalQueryFacetBufferSizeBytes", 104857600, false},
        {"internalQueryFacetMaxOutputDocSizeBytes", 104857600, false},
        {"internalLookupStageIntermediateDocumentMaxSizeBytes", 0, true},
        {"internalDocumentSourceGroupMaxMemoryBytes", 0, true},
        {"internalQueryMaxBlockingSortMemoryUsageBytes", 0, true},
        {"internalQueryProhibitBlockingMergeOnMongoS", 0, false},
        {"internalQueryMaxAddToSetBytes", 104857600, false},
        {"internalDocumentSourceSetWindowFieldsMaxMemoryBytes", 0, true},
    };
    bson_t sp;
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "serverParameters", &sp);
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        int64_t v = params[i].ours ? mf_param_get(op->eng->params, params[i].name) : params[i].fixed;
        if (v >= INT32_MIN && v <= INT32_MAX)
            BSON_APPEND_INT32(&sp, params[i].name, (int32_t)v);
        else
            BSON_APPEND_INT64(&sp, params[i].name, v);
    }
    BSON_APPEND_UTF8(&sp, "internalQueryFrameworkControl", "trySbeRestricted");
    BSON_APPEND_INT32(&sp, "internalQueryPlannerIgnoreIndexWithCollationForRegex", 1);
    bson_append_document_end(op->reply, &sp);
}

/*
 * express_leaf: whether plan p is what mongod 8.0 runs on its express path
 * rather than as a plan tree (isExpressEligible): an _id lookup (IDHACK,
 * which already means a plain _id equality, no hint, a matching collation)
 * under at most a LIMIT and a simple projection, for a find (find_ok: the
 * command has no skip, min, max, showRecordId, returnKey, batchSize or
 * tailable).
 */
static bool
express_leaf(const mf_plan_t *p, const bson_t *filter, bool find_ok)
{
    bson_iter_t it, in;
    if (!find_ok || p == NULL || p->leaf == NULL || p->leaf->kind != MF_ST_IDHACK)
        return false;
    /* 8.0's simple _id query is {_id: <value>}: {_id: {$eq: v}} takes the express path only from 8.1. */
    if (filter == NULL || !bson_iter_init_find(&it, filter, "_id") ||
        (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &in) && bson_iter_next(&in) &&
         bson_iter_key(&in)[0] == '$'))
        return false;
    for (const mf_stage_t *s = p->root; s != NULL && s != p->leaf; s = s->child) {
        if (s->kind != MF_ST_LIMIT && s->kind != MF_ST_PROJECTION_SIMPLE)
            return false;
    }
    return true;
}

/*
 * The winning plan (or, with_stats, the execution stages) of an express
 * find, as mongod 8.0's PlanExplainerExpress writes it: no stage tree, one
 * node naming the access (EXPRESS_IXSCAN on the _id index, or
 * EXPRESS_CLUSTERED_IXSCAN on a clustered collection, which has no index
 * entry to examine).
 */
static void
express_explain(const mf_plan_t *p, bool clustered, bool with_stats, bson_t *out)
{
    BSON_APPEND_BOOL(out, "isCached", false);
    BSON_APPEND_UTF8(out, "stage", clustered ? "EXPRESS_CLUSTERED_IXSCAN" : "EXPRESS_IXSCAN");
    if (!clustered) {
        bson_t kp;
        BSON_APPEND_DOCUMENT_BEGIN(out, "keyPattern", &kp);
        BSON_APPEND_INT32(&kp, "_id", 1);
        bson_append_document_end(out, &kp);
        BSON_APPEND_UTF8(out, "indexName", "_id_");
    }
    if (with_stats) {
        mf_append_number(out, "nReturned", p->root->n_returned);
        mf_append_number(out, "executionTimeMillisEstimate", p->exec_ms);
        mf_append_number(out, "keysExamined", clustered ? 0 : p->leaf->keys_examined);
        mf_append_number(out, "docsExamined", p->leaf->docs_examined);
    }
}

/*
 * append_collation: queryPlanner's "collation", the full spec of the
 * collation the query runs under, when it is not the simple one
 * (plan_explainer's generatePlannerInfo: query->getCollator()).
 */
static void
append_collation(bson_t *qp)
{
    const mf_collation_t *c = mf_collation_current();
    bson_t cs;
    if (c == NULL)
        return;
    BSON_APPEND_DOCUMENT_BEGIN(qp, "collation", &cs);
    mf_collation_append_spec(c, &cs);
    bson_append_document_end(qp, &cs);
}

/* serverInfo: this server's host (no port), port and version. */
static void
append_server_info(mf_op_t *op)
{
    bson_t si;
    char host[256];
    snprintf(host, sizeof(host), "%s", op->eng->host);
    char *colon = strrchr(host, ':');
    if (colon)
        *colon = '\0';
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "serverInfo", &si);
    BSON_APPEND_UTF8(&si, "host", host);
    BSON_APPEND_INT32(&si, "port", op->eng->port);
    BSON_APPEND_UTF8(&si, "version", MF_VERSION);
    BSON_APPEND_UTF8(&si, "gitVersion", "mayfly");
    bson_append_document_end(op->reply, &si);
}

/* command: the explained command as it was given, without explain, with $db. */
static void
append_command(mf_op_t *op, const bson_t *inner)
{
    bson_t cmdcopy = BSON_INITIALIZER;
    bson_iter_t it;
    bson_iter_init(&it, inner);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "explain") != 0 && strcmp(bson_iter_key(&it), "$db") != 0)
            bson_append_value(&cmdcopy, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    BSON_APPEND_UTF8(&cmdcopy, "$db", op->db);
    BSON_APPEND_DOCUMENT(op->reply, "command", &cmdcopy);
    bson_destroy(&cmdcopy);
}

/*
 * An aggregation explained with stages left after its pushed-down prefix:
 * its pipeline pl, whose stages from first on run after the plan, and at
 * executionStats the run that measured them (mf_crud_agg_explain_run).
 */
typedef struct explain_agg {
    const mf_pipeline_t *pl;
    size_t first;
    mf_plan_t *plan;           /* the run's plan (taken by run_explain), or NULL: plan (and run) it here */
    const mf_agg_stream_t *st; /* the run's stages, or NULL */
    bool sub;                  /* a $unionWith's sub-pipeline: {$cursor} first even when nothing follows it */
    bool group_distinct;       /* the plan runs stage first - 1, a $group, as $groupByDistinctScan */
} explain_agg_t;

static int explain_aggregate(mf_op_t *op, const bson_t *cmd, const char *verbosity, bool sub);

/* A $unionWith sub-pipeline's explain (explain_sub): the operation and the verbosity being answered. */
typedef struct explain_sub_ctx {
    mf_op_t *op;
    const char *verbosity;
} explain_sub_ctx_t;

/*
 * explain_sub: mf_agg_explain_hooks_t.sub_explain. The sub-pipeline is
 * explained as the aggregate {aggregate: coll, pipeline} (views resolved,
 * its prefix pushed down, run again at executionStats), as mongod's
 * NonShardServerProcessInterface::preparePipelineAndExplain does, into a
 * reply of its own whose stages are copied to stages. On failure the
 * error is dropped and the caller shows the stage as written.
 */
static int
explain_sub(void *ctx, const char *coll, const bson_value_t *pipeline, bson_t *stages)
{
    explain_sub_ctx_t *x = ctx;
    mf_op_t *op = x->op;
    bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER, empty = BSON_INITIALIZER;
    bson_t *saved = op->reply;
    bson_iter_t it, si;

    if (coll != NULL)
        BSON_APPEND_UTF8(&cmd, "aggregate", coll);
    else
        BSON_APPEND_INT32(&cmd, "aggregate", 1);
    if (pipeline != NULL)
        bson_append_value(&cmd, "pipeline", -1, pipeline);
    else
        BSON_APPEND_ARRAY(&cmd, "pipeline", &empty);
    op->reply = &reply;
    int rc = explain_aggregate(op, &cmd, x->verbosity, true);
    op->reply = saved;
    if (rc == 0 && bson_iter_init_find(&it, &reply, "stages") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &si)) {
        while (bson_iter_next(&si))
            bson_append_value(stages, bson_iter_key(&si), -1, bson_iter_value(&si));
    } else {
        rc = -1;
        mf_err_clear(&op->err);
    }
    bson_destroy(&cmd);
    bson_destroy(&reply);
    bson_destroy(&empty);
    return rc;
}

/*
 * explain_sorter: the sorter a blocking SORT (p->sort; a find's, or an
 * update's or delete's with a sort) runs in, as the command would run it:
 * the internalQueryMaxBlockingSortMemoryUsageBytes budget, allowDiskUse
 * from inner (the explained command) or allowDiskUseByDefault. Sets
 * x->sorter (owned by the caller, freed with mf_sorter_free) and *order
 * (the comparator's state, freed with mf_sort_free after the sorter);
 * leaves both NULL when mf_sort_new refuses the pattern: the stage then
 * shows no sorter statistics.
 */
static void
explain_sorter(mf_op_t *op, mf_plan_t *p, const bson_t *inner, explain_ctx_t *x, mf_sort_t **order)
{
    mf_error_t e = {0};
    int64_t budget = mf_param_get(op->eng->params, "internalQueryMaxBlockingSortMemoryUsageBytes");

    *order = NULL;
    /* e holds nothing to free. */
    if ((*order = mf_sort_new(p->sort->spec, &e)) == NULL)
        return;
    x->sorter = mf_sorter_new_sort(explain_sort_cmp, *order, budget, mf_crud_allow_disk(op, inner), op->eng->tmp_dir);
    if (p->sort->amount > 0)
        mf_sorter_set_limit(x->sorter, p->sort->amount);
    x->err = &op->err;
}

/*
 * run_explain: plans req over op->db.coll, executes it when verbosity asks,
 * and appends the explain reply. agg (may be NULL) is an aggregation's
 * rest after the pushed-down prefix; w (NULL for a read) the update or
 * delete explained.
 */
static int
run_explain(mf_op_t *op, const char *coll, const mf_plan_request_t *req, int64_t limit_one, const char *verbosity,
            const bson_t *inner, explain_agg_t *agg, const explain_write_t *w, bool express_ok)
{
    bool clustered = false;
    bool exec = strcmp(verbosity, "queryPlanner") != 0;
    /* Stages after $cursor: the reply is mongod's pipeline explain (Explain::explainPipeline). */
    bool staged = agg != NULL && (agg->first < mf_pipeline_len(agg->pl) || agg->sub || agg->group_distinct);
    mf_plan_t *p = staged ? agg->plan : NULL; /* taken: freed here */
    if (staged)
        agg->plan = NULL;
    if (exec && strcmp(verbosity, "executionStats") != 0 && strcmp(verbosity, "allPlansExecution") != 0) {
        mf_plan_free(p);
        return mf_err_set(&op->err, MF_E_BadValue,
                          "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}");
    }
    int64_t t0 = mf_mono_ms();
    int64_t elapsed;
    int rc = 0;
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    clustered = c != NULL && c->clustered;
    if (p != NULL) {
        /* Run by the pipeline already: its counters are what the stages after it pulled. */
        explain_propagate(p, 0);
        elapsed = p->exec_ms;
        mf_catalog_unlock(op->eng->cat);
    } else {
        mf_matcher_t *m = mf_matcher_new(req->filter, &op->err);
        if (m == NULL) {
            mf_catalog_unlock(op->eng->cat);
            return -1;
        }
        rc = mf_plan_build(c, req, &p, &op->err);
        if (rc == 0 && exec) {
            explain_ctx_t x = {req->skip, req->limit > 0 ? req->limit : limit_one, 0, p->sort != NULL};
            mf_sort_t *order = NULL;
            if (w != NULL) {
                x.counts = true;
                x.upd = w->upd;
                if (x.sorted && x.limit == 1 && (order = mf_sort_new(req->sort, &op->err)) == NULL)
                    rc = -1;
                x.order = order;
            }
            mf_sort_t *sort_order = NULL;
            if (rc == 0 && p->sort != NULL)
                explain_sorter(op, p, inner, &x, &sort_order);
            if (rc == 0)
                rc = mf_exec_run(op->sess, c, p, m, explain_visit, &x, &op->err);
            if (x.sorter != NULL) {
                int64_t sdocs;
                p->sort->sort_ran = rc == 0;
                p->sort->sort_bytes = x.sort_bytes;
                p->sort->sort_spills = mf_sorter_spilled(x.sorter);
                mf_sorter_spill_totals(x.sorter, &sdocs, &p->sort->sort_spilled_bytes);
                mf_sorter_free(x.sorter);
            }
            mf_sort_free(sort_order);
            if (x.best != NULL) {
                explain_count(&x, x.best, &x.best_d);
                bson_destroy(x.best);
            }
            mf_sort_free(order);
            if (rc == 0 && w != NULL) {
                p->root->n_matched = x.matched;
                p->root->n_would_modify = x.would_modify;
                p->root->n_would_upsert = w->upsert && x.matched == 0 ? 1 : 0;
            }
            explain_propagate(p, limit_one);
        }
        mf_catalog_unlock(op->eng->cat);
        mf_matcher_free(m);
        if (rc != 0) {
            mf_plan_free(p);
            return -1;
        }
        elapsed = mf_mono_ms() - t0;
    }
    /* SortStats' memLimit: the budget the sort runs with, at every verbosity. */
    if (p->sort != NULL)
        p->sort->mem_limit = mf_param_get(op->eng->params, "internalQueryMaxBlockingSortMemoryUsageBytes");
    char ns[512];
    bson_t qp, wp, es, st, empty, arr, first, cd;
    bson_t *qp_parent = op->reply, *es_parent = op->reply;
    snprintf(ns, sizeof(ns), "%s.%s", op->db, coll);
    bson_init(&empty);

    BSON_APPEND_UTF8(op->reply, "explainVersion", "1"); /* first, as mongod 8.0 writes it */
    if (staged) {
        /* stages[0] is {$cursor: {queryPlanner, executionStats}}: the plan's explain (DocumentSourceCursor::serialize). */
        BSON_APPEND_ARRAY_BEGIN(op->reply, "stages", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &first);
        BSON_APPEND_DOCUMENT_BEGIN(&first, "$cursor", &cd);
        qp_parent = es_parent = &cd;
    }
    BSON_APPEND_DOCUMENT_BEGIN(qp_parent, "queryPlanner", &qp);
    BSON_APPEND_UTF8(&qp, "namespace", ns);
    BSON_APPEND_DOCUMENT(&qp, "parsedQuery", req->filter ? req->filter : &empty);
    append_collation(&qp);
    BSON_APPEND_BOOL(&qp, "indexFilterSet", p->index_filter_set);
    if (agg != NULL && !staged)
        BSON_APPEND_BOOL(&qp, "optimizedPipeline", true); /* the whole pipeline became the plan (run_aggregate.cpp) */
    BSON_APPEND_BOOL(&qp, "maxIndexedOrSolutionsReached", false);
    BSON_APPEND_BOOL(&qp, "maxIndexedAndSolutionsReached", false);
    BSON_APPEND_BOOL(&qp, "maxScansToExplodeReached", false);
    BSON_APPEND_BOOL(&qp, "prunedSimilarIndexes", false);
    bool express = !staged && express_leaf(p, req->filter, express_ok);
    BSON_APPEND_DOCUMENT_BEGIN(&qp, "winningPlan", &wp);
    if (express) {
        express_explain(p, clustered, false, &wp);
    } else {
        BSON_APPEND_BOOL(&wp, "isCached", false);
        mf_plan_explain(p, false, &wp);
    }
    bson_append_document_end(&qp, &wp);
    BSON_APPEND_ARRAY(&qp, "rejectedPlans", &empty);
    bson_append_document_end(qp_parent, &qp);
    if (exec) {
        int64_t nret = p->root->n_returned;
        if (p->root->kind == MF_ST_COUNT || p->root->kind == MF_ST_DELETE || p->root->kind == MF_ST_BATCHED_DELETE ||
            p->root->kind == MF_ST_UPDATE)
            nret = 0;
        BSON_APPEND_DOCUMENT_BEGIN(es_parent, "executionStats", &es);
        BSON_APPEND_BOOL(&es, "executionSuccess", true);
        BSON_APPEND_INT32(&es, "nReturned", (int32_t)nret);
        BSON_APPEND_INT32(&es, "executionTimeMillis", (int32_t)elapsed);
        BSON_APPEND_INT32(&es, "totalKeysExamined", express && clustered ? 0 : (int32_t)p->leaf->keys_examined);
        BSON_APPEND_INT32(&es, "totalDocsExamined",
                          (int32_t)(p->fetch ? p->fetch->docs_examined : p->leaf->docs_examined));
        BSON_APPEND_DOCUMENT_BEGIN(&es, "executionStages", &st);
        if (express)
            express_explain(p, clustered, true, &st);
        else
            mf_plan_explain(p, true, &st);
        bson_append_document_end(&es, &st);
        if (strcmp(verbosity, "allPlansExecution") == 0)
            BSON_APPEND_ARRAY(&es, "allPlansExecution", &empty);
        bson_append_document_end(es_parent, &es);
    }
    if (staged) {
        int k = 1;
        bson_append_document_end(&first, &cd);
        if (agg->st != NULL) {
            /* The $cursor stage's own counters: the documents the pipeline took from it (writeExplainOps). */
            int64_t n, us;
            mf_agg_stream_source_stats(agg->st, &n, &us);
            BSON_APPEND_INT64(&first, "nReturned", n);
            BSON_APPEND_INT64(&first, "executionTimeMillisEstimate", us / 1000);
        } else if (exec) {
            /* A sub-pipeline's $cursor with nothing after it: what its plan returned. */
            BSON_APPEND_INT64(&first, "nReturned", p->root->n_returned);
            BSON_APPEND_INT64(&first, "executionTimeMillisEstimate", elapsed);
        }
        bson_append_document_end(&arr, &first);
        if (agg->group_distinct) {
            /* The $group the plan runs (pipeline_d.cpp's DocumentSourceSingleDocumentTransformation). */
            bson_t gd;
            BSON_APPEND_DOCUMENT_BEGIN(&arr, "1", &gd);
            mf_pipeline_group_distinct_explain(agg->pl, agg->first - 1, &gd);
            if (exec) {
                int64_t n = p->root->n_returned, us = p->exec_ms * 1000;
                if (agg->st != NULL)
                    mf_agg_stream_source_stats(agg->st, &n, &us);
                BSON_APPEND_INT64(&gd, "nReturned", n);
                BSON_APPEND_INT64(&gd, "executionTimeMillisEstimate", us / 1000);
            }
            bson_append_document_end(&arr, &gd);
            k++;
        }
        explain_sub_ctx_t sx = {op, verbosity};
        mf_agg_explain_hooks_t hooks = {explain_sub, &sx};
        mf_pipeline_explain(agg->pl, agg->first, agg->st, &hooks, &arr, &k);
        bson_append_array_end(op->reply, &arr);
        /* Explain::explainPipeline: serverInfo, serverParameters, then the command. */
        append_server_info(op);
        append_server_parameters(op);
        append_command(op, inner);
    } else {
        append_command(op, inner);
        append_server_info(op);
        append_server_parameters(op);
    }
    bson_destroy(&empty);
    mf_plan_free(p);
    return 0;
}

/*
 * find_express_ok: whether a find's options leave it eligible for mongod
 * 8.0's express path (see express_leaf): no skip, min, max, showRecordId,
 * returnKey, batchSize, or tailable.
 */
static bool
find_express_ok(const char *kind, const bson_t *find)
{
    static const char *const flags[] = {"showRecordId", "returnKey", "tailable", NULL};
    bson_iter_t it;
    bson_t d;
    if (strcmp(kind, "find") != 0 || sub_int(find, "skip") != 0 || bson_has_field(find, "batchSize"))
        return false;
    if ((sub_doc(find, "min", &d) && !bson_empty(&d)) || (sub_doc(find, "max", &d) && !bson_empty(&d)))
        return false;
    for (int i = 0; flags[i] != NULL; i++) {
        if (bson_iter_init_find(&it, find, flags[i]) && bson_iter_as_bool(&it))
            return false;
    }
    return true;
}

/* is_view: whether db.coll is a view; *plain (may be NULL): a view that is not a time-series collection. */
static bool
is_view_of(mf_op_t *op, const char *coll, bool *plain)
{
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    bool v = c != NULL && c->is_view;
    if (plain != NULL)
        *plain = v && !c->is_timeseries;
    mf_catalog_unlock(op->eng->cat);
    return v;
}

static bool
is_view(mf_op_t *op, const char *coll)
{
    return is_view_of(op, coll, NULL);
}

/*
 * aggregate_begin: starts in *agg the aggregate over coll that a count or a
 * distinct on a view becomes: the "aggregate" field and the pipeline *pl
 * opened, holding {$match: query} when inner's query is not empty. Returns
 * the number of stages appended (the next stage's index key).
 */
static int
aggregate_begin(bson_t *agg, const char *coll, const bson_t *inner, bson_t *pl)
{
    bson_t st, q;
    BSON_APPEND_UTF8(agg, "aggregate", coll);
    BSON_APPEND_ARRAY_BEGIN(agg, "pipeline", pl);
    if (!sub_doc(inner, "query", &q) || bson_empty(&q))
        return 0;
    BSON_APPEND_DOCUMENT_BEGIN(pl, "0", &st);
    BSON_APPEND_DOCUMENT(&st, "$match", &q);
    bson_append_document_end(pl, &st);
    return 1;
}

/*
 * explain_built_aggregate: explains the aggregate command *agg (being
 * built, its pipeline closed) after copying into it the fields of the
 * original command inner named in carried (NULL-terminated) and an empty
 * cursor; destroys *agg. Returns what mf_crud_explain_aggregate returns.
 */
static int
explain_built_aggregate(mf_op_t *op, bson_t *agg, const bson_t *inner, const char *const *carried,
                        const char *verbosity)
{
    bson_iter_t it;
    bson_t st;
    for (int i = 0; carried[i] != NULL; i++)
        if (bson_iter_init_find(&it, inner, carried[i]))
            bson_append_value(agg, carried[i], -1, bson_iter_value(&it));
    BSON_APPEND_DOCUMENT_BEGIN(agg, "cursor", &st);
    bson_append_document_end(agg, &st);
    int rc = mf_crud_explain_aggregate(op, agg, verbosity);
    bson_destroy(agg);
    return rc;
}

/*
 * explain_count_as_aggregate: a count on a view runs, and explains, as the
 * aggregate count_command_as_aggregation_command.cpp makes of it: {$match:
 * query} (when not empty), $skip, $limit, {$count: "count"}, with the
 * count's collation, hint, comment, maxTimeMS and readConcern; the view
 * then resolves over its collection as any aggregate on it does.
 */
static int
explain_count_as_aggregate(mf_op_t *op, const char *coll, const bson_t *inner, const char *verbosity)
{
    bson_t agg = BSON_INITIALIZER, pl, st;
    int k = 0;
    char key[16];
    int64_t skip = sub_int(inner, "skip"), limit = sub_int(inner, "limit");

    if (limit < 0)
        limit = -limit; /* a count's limit -n is n */
    k = aggregate_begin(&agg, coll, inner, &pl);
    if (skip > 0) {
        snprintf(key, sizeof key, "%d", k++);
        BSON_APPEND_DOCUMENT_BEGIN(&pl, key, &st);
        BSON_APPEND_INT64(&st, "$skip", skip);
        bson_append_document_end(&pl, &st);
    }
    if (limit > 0) {
        snprintf(key, sizeof key, "%d", k++);
        BSON_APPEND_DOCUMENT_BEGIN(&pl, key, &st);
        BSON_APPEND_INT64(&st, "$limit", limit);
        bson_append_document_end(&pl, &st);
    }
    snprintf(key, sizeof key, "%d", k++);
    BSON_APPEND_DOCUMENT_BEGIN(&pl, key, &st);
    BSON_APPEND_UTF8(&st, "$count", "count");
    bson_append_document_end(&pl, &st);
    bson_append_array_end(&agg, &pl);
    static const char *const carried[] = {"collation", "hint", "comment", "maxTimeMS", "readConcern", NULL};
    return explain_built_aggregate(op, &agg, inner, carried, verbosity);
}

/*
 * explain_distinct_as_aggregate: a distinct on a view runs, and explains,
 * as the aggregate ParsedDistinct::asAggregationCommand makes of it:
 * {$match: query} (when not empty), {$replaceRoot: {newRoot:
 * {_internalUnwoundField: {$_internalFindAllValuesAtPath: key}}}},
 * {$unwind: {path: "$_internalUnwoundField", preserveNullAndEmptyArrays:
 * true}}, {$group: {_id: null, distinct: {$addToSet:
 * "$_internalUnwoundField"}}}, with the distinct's collation ({} when it
 * has none), maxTimeMS and readConcern; the view then resolves over its
 * collection as any aggregate on it does.
 */
static int
explain_distinct_as_aggregate(mf_op_t *op, const char *coll, const bson_t *inner, const char *verbosity)
{
    bson_t agg = BSON_INITIALIZER, pl, st, a, b, q;
    bson_iter_t it;
    int k = 0;
    char key[16];

    if (!bson_iter_init_find(&it, inner, "key") || !BSON_ITER_HOLDS_UTF8(&it)) {
        bson_destroy(&agg);
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'distinct.key' is missing but a required field");
    }
    const char *dkey = bson_iter_utf8(&it, NULL);
    k = aggregate_begin(&agg, coll, inner, &pl);
    snprintf(key, sizeof key, "%d", k++);
    BSON_APPEND_DOCUMENT_BEGIN(&pl, key, &st);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "$replaceRoot", &a);
    BSON_APPEND_DOCUMENT_BEGIN(&a, "newRoot", &b);
    {
        bson_t f;
        BSON_APPEND_DOCUMENT_BEGIN(&b, "_internalUnwoundField", &f);
        BSON_APPEND_UTF8(&f, "$_internalFindAllValuesAtPath", dkey);
        bson_append_document_end(&b, &f);
    }
    bson_append_document_end(&a, &b);
    bson_append_document_end(&st, &a);
    bson_append_document_end(&pl, &st);
    snprintf(key, sizeof key, "%d", k++);
    BSON_APPEND_DOCUMENT_BEGIN(&pl, key, &st);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "$unwind", &a);
    BSON_APPEND_UTF8(&a, "path", "$_internalUnwoundField");
    BSON_APPEND_BOOL(&a, "preserveNullAndEmptyArrays", true);
    bson_append_document_end(&st, &a);
    bson_append_document_end(&pl, &st);
    snprintf(key, sizeof key, "%d", k++);
    BSON_APPEND_DOCUMENT_BEGIN(&pl, key, &st);
    BSON_APPEND_DOCUMENT_BEGIN(&st, "$group", &a);
    BSON_APPEND_NULL(&a, "_id");
    BSON_APPEND_DOCUMENT_BEGIN(&a, "distinct", &b);
    BSON_APPEND_UTF8(&b, "$addToSet", "$_internalUnwoundField");
    bson_append_document_end(&a, &b);
    bson_append_document_end(&st, &a);
    bson_append_document_end(&pl, &st);
    bson_append_array_end(&agg, &pl);
    if (sub_doc(inner, "collation", &q))
        BSON_APPEND_DOCUMENT(&agg, "collation", &q);
    else {
        BSON_APPEND_DOCUMENT_BEGIN(&agg, "collation", &st);
        bson_append_document_end(&agg, &st);
    }
    static const char *const carried[] = {"maxTimeMS", "readConcern", NULL};
    return explain_built_aggregate(op, &agg, inner, carried, verbosity);
}

/*
 * A find that runs as an aggregate explains as that aggregate: lead (a
 * find with $near: its $geoNear stage, owned and destroyed here) or else the
 * filter as $match, then $sort $skip $limit $project. On a view the view's
 * pipeline comes first (the aggregate command adds it).
 */
static int
explain_find_as_aggregate(mf_op_t *op, const char *coll, const bson_t *inner, bson_t *lead, const char *verbosity)
{
    bson_t filter, sort, proj, stages, cmd;
    int k = 0;
    int64_t n;

    bson_init(&stages);
    if (lead != NULL) {
        mf_crud_stage_doc(&stages, &k, "$geoNear", lead);
        bson_destroy(lead);
    } else if (sub_doc(inner, "filter", &filter) && !bson_empty(&filter)) {
        mf_crud_stage_doc(&stages, &k, "$match", &filter);
    }
    if (sub_doc(inner, "sort", &sort) && !bson_empty(&sort))
        mf_crud_stage_doc(&stages, &k, "$sort", &sort);
    if ((n = sub_int(inner, "skip")) > 0)
        mf_crud_stage_int(&stages, &k, "$skip", n);
    if ((n = sub_int(inner, "limit")) != 0)
        mf_crud_stage_int(&stages, &k, "$limit", n < 0 ? -n : n);
    if (sub_doc(inner, "projection", &proj) && !bson_empty(&proj))
        mf_crud_stage_doc(&stages, &k, "$project", &proj);
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "aggregate", coll);
    BSON_APPEND_ARRAY(&cmd, "pipeline", &stages);
    int rc = mf_crud_explain_aggregate(op, &cmd, verbosity);
    bson_destroy(&cmd);
    bson_destroy(&stages);
    return rc;
}

/* mf_crud_near_index: see crud.h. */
const mf_index_t *
mf_crud_near_index(const mf_coll_t *c, const bson_t *gn)
{
    bson_t specs = BSON_INITIALIZER;
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    mf_geonear_t *g = NULL;
    mf_geonear_run_t run;
    mf_error_t err = {0};
    const mf_index_t *found = NULL;
    char key[16];

    if (c == NULL || c->is_view)
        goto out;
    v.value.v_doc.data = (uint8_t *)bson_get_data(gn);
    v.value.v_doc.data_len = gn->len;
    if ((g = mf_geonear_parse(&v, true, &err)) == NULL)
        goto out;
    /* The specs the run reads (cmd_agg.c's agg_source_indexes): every index but those building. */
    for (int i = 0, n = 0; i < c->nindexes; i++) {
        if (c->indexes[i]->building)
            continue;
        snprintf(key, sizeof(key), "%d", n++);
        BSON_APPEND_DOCUMENT(&specs, key, c->indexes[i]->spec);
    }
    if (mf_geonear_prepare(g, &specs, c->ns, &run, &err) != 0)
        goto out;
    const char *want = run.kind == MF_GEO_IX_2D ? "2d" : "2dsphere";
    for (int i = 0; found == NULL && i < c->nindexes; i++) {
        const bson_t *s = c->indexes[i]->spec;
        bson_iter_t ht, kp, kt;
        if (c->indexes[i]->building || (bson_iter_init_find(&ht, s, "hidden") && bson_iter_as_bool(&ht)))
            continue;
        if (bson_iter_init_find(&kp, s, "key") && BSON_ITER_HOLDS_DOCUMENT(&kp) && bson_iter_recurse(&kp, &kt) &&
            bson_iter_find(&kt, run.field) && BSON_ITER_HOLDS_UTF8(&kt) &&
            strcmp(bson_iter_utf8(&kt, NULL), want) == 0)
            found = c->indexes[i];
    }
out:
    mf_geonear_free(g);
    bson_destroy(&specs);
    return found;
}

/*
 * The spec of the geo index a $near find's $geoNear stage (gn) searches
 * (mf_crud_near_index), copied into *spec (initialised here): true, or
 * false when there is none (the run itself then fails, 291).
 */
static bool
near_index_spec(mf_op_t *op, const char *coll, const bson_t *gn, bson_t *spec)
{
    mf_catalog_rdlock(op->eng->cat);
    const mf_index_t *ix = mf_crud_near_index(mf_catalog_coll_find(op->eng->cat, op->db, coll), gn);
    if (ix != NULL)
        bson_copy_to(ix->spec, spec);
    mf_catalog_unlock(op->eng->cat);
    return ix != NULL;
}

/*
 * near_explain_plan: rewrites the queryPlanner of a $near find's explain
 * (made as its $geoNear pipeline's) into mongod's shape: the find's filter
 * as parsedQuery, and a winningPlan whose GEO_NEAR_2DSPHERE / GEO_NEAR_2D
 * stage (keyPattern, indexName, indexVersion; mongod's explain.cpp for
 * NearStats; its inputStages hold the scan that feeds it) sits under what
 * the planner's analyzeDataAccess puts above any fetched input, as
 * mf_plan_build does for other finds: a SORT (the find's sort, limitAmount
 * skip + limit, type "default" for a $meta key), a SKIP, a LIMIT when
 * nothing sorts, the projection. The pipeline's stages stay listed after it.
 */
static void
near_explain_plan(mf_op_t *op, const bson_t *find, const bson_t *filter, const bson_t *spec)
{
    bson_t out = BSON_INITIALIZER, sort, proj;
    bson_iter_t it, kp, kt, st;
    bool sphere = false, meta_sort = false;
    bool has_sort = sub_doc(find, "sort", &sort) && !bson_empty(&sort);
    bool has_proj = sub_doc(find, "projection", &proj) && !bson_empty(&proj);
    int64_t skip = sub_int(find, "skip"), limit = sub_int(find, "limit");

    if (limit < 0)
        limit = -limit;
    if (has_sort && bson_iter_init(&it, &sort))
        while (bson_iter_next(&it))
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                meta_sort = true;
    if (bson_iter_init_find(&kp, spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&kp) && bson_iter_recurse(&kp, &kt))
        while (bson_iter_next(&kt))
            if (BSON_ITER_HOLDS_UTF8(&kt) && strcmp(bson_iter_utf8(&kt, NULL), "2dsphere") == 0)
                sphere = true;
    /*
     * The pipeline's plan is under its $cursor stage (or at the top when
     * nothing follows it); the find's queryPlanner goes at the top, after
     * explainVersion, as a find's explain has it.
     */
    bson_iter_t src, root;
    bool top = bson_iter_init_find(&src, op->reply, "queryPlanner") && BSON_ITER_HOLDS_DOCUMENT(&src);
    if (!top && (!bson_iter_init(&root, op->reply) ||
                 !bson_iter_find_descendant(&root, "stages.0.$cursor.queryPlanner", &src) ||
                 !BSON_ITER_HOLDS_DOCUMENT(&src))) {
        bson_destroy(&out);
        return;
    }
    bson_iter_init(&it, op->reply);
    while (bson_iter_next(&it)) {
        bool is_qp = strcmp(bson_iter_key(&it), "queryPlanner") == 0;
        if (!is_qp)
            bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
        if (top ? !is_qp : strcmp(bson_iter_key(&it), "explainVersion") != 0)
            continue;
        bson_t qp, wp, arr, in;
        bson_iter_t qi;
        bson_iter_recurse(&src, &qi);
        BSON_APPEND_DOCUMENT_BEGIN(&out, "queryPlanner", &qp);
        while (bson_iter_next(&qi)) {
            const char *k = bson_iter_key(&qi);
            if (strcmp(k, "parsedQuery") == 0) {
                BSON_APPEND_DOCUMENT(&qp, k, filter);
            } else if (strcmp(k, "winningPlan") == 0 && BSON_ITER_HOLDS_DOCUMENT(&qi)) {
                /* Built inside out: the GEO_NEAR stage, then each stage above it wrapping the one below. */
                bson_t *cur = bson_new(), *up;
                BSON_APPEND_UTF8(cur, "stage", sphere ? "GEO_NEAR_2DSPHERE" : "GEO_NEAR_2D");
                if (bson_iter_init_find(&st, spec, "key"))
                    bson_append_value(cur, "keyPattern", -1, bson_iter_value(&st));
                if (bson_iter_init_find(&st, spec, "name"))
                    bson_append_value(cur, "indexName", -1, bson_iter_value(&st));
                BSON_APPEND_INT32(cur, "indexVersion",
                                  bson_iter_init_find(&st, spec, "v") ? (int32_t)bson_iter_as_int64(&st) : 2);
                BSON_APPEND_ARRAY_BEGIN(cur, "inputStages", &arr);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &in);
                bson_iter_recurse(&qi, &st);
                while (bson_iter_next(&st))
                    if (strcmp(bson_iter_key(&st), "isCached") != 0)
                        bson_append_value(&in, bson_iter_key(&st), -1, bson_iter_value(&st));
                bson_append_document_end(&arr, &in);
                bson_append_array_end(cur, &arr);
                for (int layer = 0; layer < 4; layer++) {
                    up = bson_new();
                    if (layer == 0 && has_sort) {
                        BSON_APPEND_UTF8(up, "stage", "SORT");
                        BSON_APPEND_DOCUMENT(up, "sortPattern", &sort);
                        BSON_APPEND_INT64(up, "memLimit",
                                          mf_param_get(op->eng->params, "internalQueryMaxBlockingSortMemoryUsageBytes"));
                        if (limit > 0)
                            BSON_APPEND_INT64(up, "limitAmount", limit + skip);
                        BSON_APPEND_UTF8(up, "type", meta_sort ? "default" : "simple");
                    } else if (layer == 1 && skip > 0) {
                        BSON_APPEND_UTF8(up, "stage", "SKIP");
                        BSON_APPEND_INT64(up, "skipAmount", skip);
                    } else if (layer == 2 && limit > 0 && !has_sort) {
                        BSON_APPEND_UTF8(up, "stage", "LIMIT");
                        BSON_APPEND_INT64(up, "limitAmount", limit);
                    } else if (layer == 3 && has_proj) {
                        BSON_APPEND_UTF8(up, "stage",
                                         mf_plan_projection_simple(&proj) ? "PROJECTION_SIMPLE" : "PROJECTION_DEFAULT");
                        BSON_APPEND_DOCUMENT(up, "transformBy", &proj);
                    } else {
                        bson_destroy(up);
                        continue;
                    }
                    BSON_APPEND_DOCUMENT(up, "inputStage", cur);
                    bson_destroy(cur);
                    cur = up;
                }
                BSON_APPEND_DOCUMENT_BEGIN(&qp, k, &wp);
                BSON_APPEND_BOOL(&wp, "isCached", false);
                bson_concat(&wp, cur);
                bson_append_document_end(&qp, &wp);
                bson_destroy(cur);
            } else {
                bson_append_value(&qp, k, -1, bson_iter_value(&qi));
            }
        }
        bson_append_document_end(&out, &qp);
    }
    bson_reinit(op->reply);
    bson_concat(op->reply, &out);
    bson_destroy(&out);
}

/*
 * explain_alone: the explain of an aggregate whose pipeline reads no
 * collection through a plan: {aggregate: 1} ($documents, $currentOp ...),
 * or coll's pipeline led by $collStats. As mongod's Explain::explainPipeline
 * with no $cursor: {explainVersion, stages: [the pipeline's stages, from
 * its source stage on], serverInfo, serverParameters, command}; at
 * executionStats the pipeline runs to its end and each stage carries its
 * counters. cmd: the aggregate command; pv its pipeline.
 */
static int
explain_alone(mf_op_t *op, const bson_t *cmd, const char *coll, const bson_value_t *pv, const char *verbosity)
{
    bool exec = strcmp(verbosity, "queryPlanner") != 0;
    bson_t all, rest = BSON_INITIALIZER, lead, stats_doc, arr;
    bson_iter_t it, first;
    bson_value_t rv = *pv;
    bool has_lead = false, has_stats = false;
    mf_pipeline_t *pl = NULL;
    mf_agg_stream_t *st = NULL;
    int rc = -1, k = 0;

    if (exec && strcmp(verbosity, "executionStats") != 0 && strcmp(verbosity, "allPlansExecution") != 0)
        return mf_err_set(&op->err, MF_E_BadValue,
                          "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}");
    bson_init_static(&all, pv->value.v_doc.data, pv->value.v_doc.data_len);
    if (coll != NULL && bson_iter_init(&it, &all) && bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &first) && bson_iter_next(&first) && strcmp(bson_iter_key(&first), "$collStats") == 0) {
        /* $collStats (DocumentSourceCollStats::serialize: the stage as given); its document is the rest's input. */
        bson_init_static(&lead, bson_iter_value(&it)->value.v_doc.data, bson_iter_value(&it)->value.v_doc.data_len);
        has_lead = true;
        if (mf_cmd_coll_stats_doc(op, coll, &first, &stats_doc) == 0) {
            has_stats = true;
        } else if (exec || op->err.code != MF_E_NamespaceNotFound) {
            goto done;
        } else {
            mf_err_clear(&op->err); /* a valid stage over a missing collection: only running it fails */
        }
        for (int n = 0; bson_iter_next(&it); n++) {
            char key[16];
            snprintf(key, sizeof key, "%d", n);
            bson_append_value(&rest, key, -1, bson_iter_value(&it));
        }
        rv.value.v_doc.data = (uint8_t *)bson_get_data(&rest);
        rv.value.v_doc.data_len = rest.len;
    }
    if ((pl = mf_pipeline_new(&rv, &op->err)) == NULL) {
        mf_crud_optimize_context(&op->err);
        goto done;
    }
    if (coll == NULL && !mf_pipeline_is_collectionless(pl)) {
        mf_err_set(&op->err, MF_E_InvalidNamespace,
                   "{aggregate: 1} is not valid for this pipeline; a collection is required.");
        goto done;
    }
    if (mf_crud_agg_views_collation(op, pl) != 0 || mf_pipeline_lookup_from_check(pl, op->db, &op->err) != 0)
        goto done;
    if (exec && mf_crud_agg_explain_run_alone(op, pl, cmd, has_stats ? &stats_doc : NULL, &st) != 0)
        goto done;
    BSON_APPEND_UTF8(op->reply, "explainVersion", "1");
    BSON_APPEND_ARRAY_BEGIN(op->reply, "stages", &arr);
    if (has_lead) {
        bson_t d;
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &d);
        bson_concat(&d, &lead);
        if (st != NULL) {
            /* The stage's counters: the one document it made. */
            int64_t n, us;
            mf_agg_stream_source_stats(st, &n, &us);
            BSON_APPEND_INT64(&d, "nReturned", n);
            BSON_APPEND_INT64(&d, "executionTimeMillisEstimate", us / 1000);
        }
        bson_append_document_end(&arr, &d);
        k = 1;
    }
    explain_sub_ctx_t sx = {op, verbosity};
    mf_agg_explain_hooks_t hooks = {explain_sub, &sx};
    mf_pipeline_explain(pl, 0, st, &hooks, &arr, &k);
    bson_append_array_end(op->reply, &arr);
    append_server_info(op);
    append_server_parameters(op);
    append_command(op, cmd);
    rc = 0;
done:
    mf_agg_stream_free(st);
    mf_pipeline_free(pl);
    if (has_stats)
        bson_destroy(&stats_doc);
    bson_destroy(&rest);
    return rc;
}

int
mf_crud_explain_aggregate(mf_op_t *op, const bson_t *cmd, const char *verbosity)
{
    return explain_aggregate(op, cmd, verbosity, false);
}

/* explain_aggregate: mf_crud_explain_aggregate; sub: a $unionWith's sub-pipeline (explain_agg_t.sub). */
static int
explain_aggregate(mf_op_t *op, const bson_t *cmd, const char *verbosity, bool sub)
{
    bson_iter_t it;
    bson_t filter;
    bson_value_t hint_store;
    bool has_filter = false;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) ||
        (!BSON_ITER_HOLDS_UTF8(&it) && !(BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_double(&it) == 1)))
        return mf_err_set(&op->err, MF_E_FailedToParse,
                          "Invalid command format: the 'aggregate' field must specify a collection name or 1");
    const char *coll = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
    if (!bson_iter_init_find(&it, cmd, "pipeline") || !BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'aggregate.pipeline' is missing but a required field");
    if (coll == NULL || mf_crud_stages_start_with(bson_iter_value(&it), "$collStats"))
        return explain_alone(op, cmd, coll, bson_iter_value(&it), verbosity);
    /*
     * Validate the whole pipeline as aggregate would, and push down the
     * same prefix the streaming run pushes down (mf_crud_agg_plan_prefix): the
     * planner's tree goes under $cursor, the remaining stages follow it.
     */
    bson_value_t pv = *bson_iter_value(&it);
    bson_iter_t st, f;
    if (op->eng->repl != NULL && bson_iter_recurse(&it, &st) && bson_iter_next(&st) && BSON_ITER_HOLDS_DOCUMENT(&st) &&
        bson_iter_recurse(&st, &f) && bson_iter_next(&f) && strcmp(bson_iter_key(&f), "$changeStream") == 0)
        return mf_err_set(&op->err, MF_E_CommandNotSupported, "mayfly does not explain $changeStream pipelines");
    mf_pipeline_t *pl = mf_pipeline_new(&pv, &op->err);
    if (pl == NULL)
        return mf_crud_optimize_context(&op->err);
    if (mf_crud_agg_views_collation(op, pl) != 0) {
        mf_pipeline_free(pl);
        return -1;
    }
    /* A view explains as the pipeline that runs: its resolved pipeline over its collection (as in MongoDB). */
    bson_t resolved = BSON_INITIALIZER;
    char *base = NULL;
    mf_agg_pushdown_t pd;
    mf_plan_t *probe = NULL;
    bool streams = !mf_pipeline_is_collectionless(pl); /* $out / $merge pipelines stream too */
    int prc = 0;
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
    if (c != NULL && c->is_view && streams) {
        int depth = 0;
        prc = mf_crud_view_resolve(op, coll, &pv, &depth, &base, &resolved, &op->err);
        if (prc == 0) {
            mf_pipeline_free(pl);
            pv.value.v_doc.data = (uint8_t *)bson_get_data(&resolved);
            pv.value.v_doc.data_len = resolved.len;
            pl = mf_pipeline_new(&pv, &op->err);
            prc = pl == NULL ? mf_crud_optimize_context(&op->err) : 0;
            coll = base;
            c = mf_catalog_coll_find(op->eng->cat, op->db, coll);
        }
    }
    const bson_value_t *hint = c != NULL && base == NULL ? sub_hint(cmd, &hint_store) : NULL;
    if (prc == 0 && streams)
        prc = mf_crud_agg_plan_prefix(op, c, pl, hint, NULL, NULL, &pd, &probe);
    mf_plan_free(probe);
    /*
     * executionStats / allPlansExecution with stages after the plan: the
     * pipeline runs to its end as aggregate runs it (Explain::explainPipeline's
     * executePlan), results discarded, every stage counted.
     */
    explain_agg_t agg = {.pl = pl, .sub = sub};
    mf_agg_stream_t *ran = NULL;
    bool exec = strcmp(verbosity, "executionStats") == 0 || strcmp(verbosity, "allPlansExecution") == 0;
    if (prc == 0 && streams && exec && pd.nstages < mf_pipeline_len(pl))
        prc = mf_crud_agg_explain_run(op, coll, pl, hint, cmd, &pd, &agg.plan, &ran);
    mf_catalog_unlock(op->eng->cat);
    if (prc != 0) {
        mf_pipeline_free(pl);
        bson_destroy(&resolved);
        free(base);
        return -1;
    }
    if (!streams) {
        /* Materialised ($out / $merge, views): the leading $match is still the scan's filter. */
        memset(&pd, 0, sizeof pd);
        pd.filter = mf_pipeline_first_match(pl);
        pd.nstages = pd.filter != NULL ? 1 : 0;
    }
    if (pd.filter != NULL) {
        bson_init_static(&filter, bson_get_data(pd.filter), pd.filter->len);
        has_filter = true;
    }
    bson_t sort;
    if (pd.sort != NULL)
        bson_init_static(&sort, bson_get_data(pd.sort), pd.sort->len);
    agg.first = pd.nstages;
    agg.st = ran;
    agg.group_distinct = prc == 0 && streams && pd.group_distinct;
    bson_t proj;
    if (pd.project_spec != NULL)
        bson_init_static(&proj, bson_get_data(pd.project_spec), pd.project_spec->len);
    mf_plan_request_t req = {.filter = has_filter ? &filter : NULL, .sort = pd.sort ? &sort : NULL,
                             .skip = pd.skip, .limit = pd.limit, .hint = base ? NULL : sub_hint(cmd, &hint_store),
                             .projection = pd.project_spec ? &proj : NULL, .count_only = pd.count_only,
                             .cover_projection = pd.project_spec ? &proj : NULL, /* as the aggregate runs it */
                             .cover_parsed = pd.project_spec ? pd.project : NULL};
    if (agg.group_distinct) {
        /* $groupByDistinctScan: planned as mf_crud_agg_plan_prefix planned it. */
        req.distinct_key = pd.group_key;
        req.distinct_group = true;
        req.distinct_last = pd.group_last;
        req.shown.projection = pd.group_proj;
        req.shape_projection = pd.group_proj;
    } else if (streams && pd.sort == NULL && pd.project_spec == NULL) { /* a $sort then a $project over decoded keys */
        mf_crud_agg_cover_tail(pl, &pd, NULL, NULL, &req);
    }
    int rc = run_explain(op, coll, &req, 0, verbosity, cmd, &agg, NULL, false);
    mf_plan_free(agg.plan); /* when run_explain did not take it */
    mf_agg_stream_free(ran);
    mf_pipeline_free(pl);
    bson_destroy(&resolved);
    free(base);
    return rc;
}

int
mf_cmd_explain(mf_op_t *op)
{
    bson_t inner, filter, sort, proj, stmt, min, max;
    bson_value_t hint_store;
    bson_iter_t it;
    const char *verbosity = "allPlansExecution";
    bool present;

    /* explain.idl is strict (explain, verbosity), and the explained command is parsed as itself (40415). */
    static const mf_field_spec_t explain_types[] = {{"verbosity", MF_FT_ANY}, {NULL, MF_FT_ANY}};
    if (!sub_doc(op->cmd, "explain", &inner))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'explain.explain' is the wrong type, expected type 'object'");
    if (mf_op_check_types(op, op->name, op->cmd, explain_types, true, true) != 0 ||
        mf_cmd_check_inner_fields(op, &inner) != 0)
        return -1;
    if (mf_op_get_string(op, "verbosity", &verbosity, &present) != 0)
        return -1;
    if (!present)
        verbosity = "allPlansExecution";
    if (!bson_iter_init(&it, &inner) || !bson_iter_next(&it))
        return mf_err_set(&op->err, MF_E_FailedToParse, "explain command requires a nested object");
    const char *kind = bson_iter_key(&it);
    if (strcmp(kind, "aggregate") == 0)
        return mf_crud_explain_aggregate(op, &inner, verbosity);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "collection name has invalid type %s",
                          mf_type_name(bson_iter_type(&it)));
    const char *coll = bson_iter_utf8(&it, NULL);
    mf_plan_request_t req = {0};
    mf_projection_t *cover_parsed = NULL; /* a find's projection with expressions, parsed (owned) */
    bson_t dproj = BSON_INITIALIZER; /* a distinct's projection (req.shown.projection) */
    int64_t limit_one = 0;
    const bson_t *write_stmt = NULL; /* an update or delete: its statement (findAndModify: the command) */
    const char *update_key = NULL;   /* where its change is ("u", "update"), NULL for a delete */
    if (strcmp(kind, "find") == 0 && is_view(op, coll))
        return explain_find_as_aggregate(op, coll, &inner, NULL, verbosity);
    if (strcmp(kind, "count") == 0) {
        bool plain = false;
        if (is_view_of(op, coll, &plain) && plain)
            return explain_count_as_aggregate(op, coll, &inner, verbosity);
    }
    if (strcmp(kind, "distinct") == 0) {
        bool plain = false;
        if (is_view_of(op, coll, &plain) && plain)
            return explain_distinct_as_aggregate(op, coll, &inner, verbosity);
    }
    if (strcmp(kind, "update") == 0 || strcmp(kind, "delete") == 0 || strcasecmp(kind, "findAndModify") == 0) {
        /* Writes never run on a view, and neither does their explain (166, as the write itself). */
        bool plain = false;
        if (is_view_of(op, coll, &plain) && plain)
            return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection",
                              op->db, coll);
    }
    if (strcmp(kind, "find") == 0 && sub_doc(&inner, "filter", &filter)) {
        /* A $near find explains as what it runs: a $geoNear stage, from the normalised filter (cmd_find.c). */
        bson_t gn, *normal = NULL;
        if (mf_geo_near_normalize(&filter, &normal, &op->err) < 0)
            return -1;
        int near = mf_geonear_from_find(normal != NULL ? normal : &filter, &gn, &op->err);
        if (normal != NULL)
            bson_destroy(normal);
        if (near < 0)
            return -1;
        if (near > 0) {
            bson_t spec;
            bool have = near_index_spec(op, coll, &gn, &spec);
            int rc = explain_find_as_aggregate(op, coll, &inner, &gn, verbosity);
            if (rc == 0 && have)
                near_explain_plan(op, &inner, &filter, &spec);
            if (have)
                bson_destroy(&spec);
            return rc;
        }
    }
    if (strcmp(kind, "find") == 0) {
        req.filter = sub_doc(&inner, "filter", &filter) ? &filter : NULL;
        req.sort = sub_doc(&inner, "sort", &sort) ? &sort : NULL;
        req.projection = sub_doc(&inner, "projection", &proj) ? &proj : NULL;
        req.skip = sub_int(&inner, "skip");
        req.limit = sub_int(&inner, "limit");
        if (req.limit < 0)
            req.limit = -req.limit;
        req.hint = sub_hint(&inner, &hint_store);
        req.min = sub_doc(&inner, "min", &min) ? &min : NULL;
        req.max = sub_doc(&inner, "max", &max) ? &max : NULL;
        if (mf_plan_minmax_check(req.min, req.max, &op->err) != 0)
            return -1;
        /* As the find would run it: a projection of key fields only may be covered (mf_plan_t.covered). */
        bson_iter_t fi;
        bool whole = (bson_iter_init_find(&fi, &inner, "returnKey") && bson_iter_as_bool(&fi)) ||
                     (bson_iter_init_find(&fi, &inner, "showRecordId") && bson_iter_as_bool(&fi)) ||
                     (req.min != NULL && !bson_empty(req.min)) || (req.max != NULL && !bson_empty(req.max));
        req.cover_projection = whole ? NULL : req.projection;
        req.preserve_record_id = bson_iter_init_find(&fi, &inner, "showRecordId") && bson_iter_as_bool(&fi);
        if (req.cover_projection != NULL && !bson_empty(req.cover_projection) &&
            !mf_plan_projection_inclusions(req.cover_projection)) {
            /* Expressions over key fields are covered too (mf_plan_request_t.cover_parsed); a bad one is not. */
            mf_error_t perr = {0};
            cover_parsed = mf_projection_new(req.cover_projection, &perr);
            req.cover_parsed = cover_parsed;
        }
    } else if (strcmp(kind, "count") == 0) {
        req.filter = sub_doc(&inner, "query", &filter) ? &filter : NULL;
        req.skip = sub_int(&inner, "skip");
        req.limit = sub_int(&inner, "limit");
        if (req.limit < 0)
            req.limit = -req.limit;
        req.hint = sub_hint(&inner, &hint_store);
        req.root = MF_PLAN_ROOT_COUNT;
    } else if (strcmp(kind, "distinct") == 0) {
        req.filter = sub_doc(&inner, "query", &filter) ? &filter : NULL;
        req.hint = sub_hint(&inner, &hint_store);
        /* As the distinct runs it: a DISTINCT_SCAN under its projection when an index holds the key. */
        bson_iter_t ki;
        if (bson_iter_init_find(&ki, &inner, "key") && BSON_ITER_HOLDS_UTF8(&ki)) {
            req.distinct_key = bson_iter_utf8(&ki, NULL);
            mf_crud_distinct_projection(req.distinct_key, &dproj);
            req.shown.projection = &dproj;
        }
    } else if (strcmp(kind, "delete") == 0 || strcmp(kind, "update") == 0) {
        bool del = kind[0] == 'd';
        bson_t arr;
        bson_iter_t ai;
        const uint8_t *adata;
        uint32_t alen;
        bool ok = bson_iter_init_find(&ai, &inner, del ? "deletes" : "updates") && BSON_ITER_HOLDS_ARRAY(&ai);
        if (ok) {
            bson_iter_array(&ai, &alen, &adata);
            ok = bson_init_static(&arr, adata, alen);
        }
        if (!ok || !bson_iter_init(&it, &arr) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_err_set(&op->err, MF_E_Location40414, "BSON field '%s.%s' is missing but a required field", kind,
                              del ? "deletes" : "updates");
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&stmt, data, len))
            return mf_err_set(&op->err, MF_E_InvalidBSON, "invalid statement");
        req.filter = sub_doc(&stmt, "q", &filter) ? &filter : NULL;
        req.hint = sub_hint(&stmt, &hint_store);
        if (del) {
            bool one = sub_int(&stmt, "limit") != 0;
            req.root = one ? MF_PLAN_ROOT_DELETE : MF_PLAN_ROOT_BATCHED_DELETE;
            limit_one = one ? 1 : 0;
            write_stmt = &stmt;
        } else {
            bson_iter_t mi;
            bool multi = bson_iter_init_find(&mi, &stmt, "multi") && bson_iter_as_bool(&mi);
            req.root = MF_PLAN_ROOT_UPDATE;
            limit_one = multi ? 0 : 1;
            if (!multi)
                req.sort = sub_doc(&stmt, "sort", &sort) ? &sort : NULL; /* 8.0's updateOne sort */
            write_stmt = &stmt;
            update_key = "u";
        }
    } else if (strcmp(kind, "findAndModify") == 0 || strcmp(kind, "findandmodify") == 0) {
        bson_iter_t ri;
        bool remove = bson_iter_init_find(&ri, &inner, "remove") && bson_iter_as_bool(&ri);
        req.filter = sub_doc(&inner, "query", &filter) ? &filter : NULL;
        req.sort = sub_doc(&inner, "sort", &sort) ? &sort : NULL;
        req.hint = sub_hint(&inner, &hint_store);
        req.root = remove ? MF_PLAN_ROOT_DELETE : MF_PLAN_ROOT_UPDATE;
        limit_one = 1;
        write_stmt = &inner;
        update_key = remove ? NULL : "update";
    } else {
        return mf_err_set(&op->err, MF_E_CommandNotFound, "Explain failed due to unknown command: %s", kind);
    }
    if (write_stmt == NULL) {
        int rc = run_explain(op, coll, &req, limit_one, verbosity, &inner, NULL, NULL, find_express_ok(kind, &inner));
        mf_projection_free(cover_parsed);
        bson_destroy(&dproj);
        return rc;
    }
    /* An update's change, parsed as the command parses it, for its would-be counters. */
    explain_write_t w = {0};
    mf_update_spec_t *upd = NULL;
    bson_iter_t ui, ai, up;
    mf_write_consts_t consts = {0};
    /* An update statement's constants (c), defined for its pipeline as when it runs. */
    if (update_key != NULL && strcmp(update_key, "u") == 0 && mf_write_consts_begin(write_stmt, &consts, &op->err) != 0)
        return -1;
    w.upsert = bson_iter_init_find(&up, write_stmt, "upsert") && bson_iter_as_bool(&up);
    if (update_key != NULL && bson_iter_init_find(&ui, write_stmt, update_key) &&
        (BSON_ITER_HOLDS_DOCUMENT(&ui) || BSON_ITER_HOLDS_ARRAY(&ui))) {
        bson_t ud;
        const bson_value_t *af = bson_iter_init_find(&ai, write_stmt, "arrayFilters") && BSON_ITER_HOLDS_ARRAY(&ai)
                                     ? bson_iter_value(&ai) : NULL;
        if (BSON_ITER_HOLDS_DOCUMENT(&ui)) {
            const uint8_t *data;
            uint32_t len;
            bson_iter_document(&ui, &len, &data);
            if (!bson_init_static(&ud, data, len)) {
                mf_write_consts_end(&consts);
                return mf_err_set(&op->err, MF_E_InvalidBSON, "invalid update");
            }
            upd = mf_update_spec_new(&ud, NULL, af, &op->err);
        } else {
            upd = mf_update_spec_new(NULL, bson_iter_value(&ui), af, &op->err);
        }
        if (upd == NULL) {
            mf_write_consts_end(&consts);
            return -1;
        }
    }
    w.upd = upd;
    int rc = run_explain(op, coll, &req, limit_one, verbosity, &inner, NULL, &w, false);
    mf_update_spec_free(upd);
    mf_write_consts_end(&consts);
    return rc;
}
