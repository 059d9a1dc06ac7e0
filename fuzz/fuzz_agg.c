/*
 * fuzz_agg.c: the aggregation pipeline parser (src/query/agg.h) and, for a
 * pipeline that parses, its execution over a few in-memory documents (the
 * stages, accumulators and expressions of src/doc/expr.c behind them).
 *
 * Feeds (see fuzz_common.h for the two encodings): the first document is the
 * pipeline, an array of stages (in the binary encoding any document, read
 * as an array); the following ones are the collection's documents, served
 * to the pipeline by in-memory callbacks instead of storage (env->pull for
 * the source, env->scan for $lookup and $unionWith-like reads, a one-row
 * $currentOp, a $out / $merge sink that counts). A pipeline that parses
 * runs three ways, as the server can run it: (1) the aggregate command's
 * streaming path, its pushed-down prefix (mf_pipeline_pushdown: $match,
 * $skip, $limit, $project) applied here as the plan would, the rest through
 * mf_agg_stream; (2) mf_agg_stream over all stages; (3) the materialising
 * mf_pipeline_run ($facet, collectionless pipelines). Blocking stages get a
 * 16 MiB budget without disk, so an input cannot make a run use unbounded
 * memory; at most 20,000 results are read.
 *
 * Checks: no crash, leak or undefined behaviour; a failure carries an error
 * code; every result is well-formed BSON; runs that succeed give the same number
 * of results (unless the pipeline draws random numbers, $sample or $rand, or
 * a run hit the result cap; whether they all succeed is not compared, see
 * the known divergence at the end). FUZZ_VERBOSE=1 in the environment
 * prints each run's error, to study a finding.
 */
#include "fuzz_common.h"

#include <stdio.h>

#include "common/docvec.h"
#include "doc/match.h"
#include "doc/project.h"
#include "query/agg.h"

#define MAX_RESULTS 20000

typedef struct src {
    const fuzz_docs_t *d;
    size_t next;            /* env->pull position (first collection document is d->docs[1]) */
    /* The pushed-down prefix, applied in pull as the server's plan does. */
    mf_matcher_t *m;
    int64_t skip_left, limit_left;
    const mf_projection_t *proj;
    size_t written;         /* documents handed to $out / $merge */
} src_t;

static int
scan_cb(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    src_t *s = ctx;
    mf_matcher_t *m = NULL;
    int rc = 0;

    (void)coll;
    if (filter != NULL && (m = mf_matcher_new(filter, err)) == NULL)
        return -1;
    for (size_t i = 1; i < s->d->n && rc == 0; i++) {
        if (m && !mf_matcher_match(m, s->d->docs[i], NULL))
            continue;
        rc = visit(arg, s->d->docs[i]);
    }
    if (m)
        mf_matcher_free(m);
    return rc < 0 ? -1 : 0;
}

static int
pull_cb(void *ctx, size_t max, mf_docvec_t *out, bool *eof, mf_error_t *err)
{
    src_t *s = ctx;
    size_t got = 0;

    while (got < max && s->next < s->d->n && s->limit_left != 0) {
        const bson_t *doc = s->d->docs[s->next++];
        if (s->m && !mf_matcher_match(s->m, doc, NULL))
            continue;
        if (s->skip_left > 0) {
            s->skip_left--;
            continue;
        }
        if (s->proj) {
            bson_t *o = bson_new();
            if (mf_projection_apply(s->proj, doc, NULL, o, err) != 0) {
                bson_destroy(o);
                return -1;
            }
            mf_docvec_push_steal(out, o);
        } else {
            mf_docvec_push(out, doc);
        }
        got++;
        if (s->limit_left > 0)
            s->limit_left--;
    }
    *eof = s->next >= s->d->n || s->limit_left == 0;
    return 0;
}

static int
current_op_cb(void *ctx, const bson_t *spec, mf_docvec_t *out, mf_error_t *err)
{
    bson_t *row = BCON_NEW("type", "op", "active", BCON_BOOL(true), "opid", BCON_INT64(1), "op", "command", "ns",
                           "fuzz.c", "command", "{", "aggregate", BCON_INT32(1), "}");
    (void)ctx;
    (void)spec;
    (void)err;
    mf_docvec_push_steal(out, row);
    return 0;
}

static int
write_out_cb(void *ctx, const char *db, const char *coll, mf_docvec_t *docs, const bson_t *merge_spec, mf_error_t *err)
{
    src_t *s = ctx;
    (void)db;
    (void)err;
    FUZZ_CHECK(coll != NULL, "$out / $merge without a target collection");
    if (merge_spec)
        FUZZ_CHECK(FUZZ_DOC_OK(merge_spec), "merge spec is not well-formed BSON");
    s->written += docs->len;
    return 0; /* the pipeline destroys what is left in docs */
}

static void
env_init(mf_agg_env_t *env, src_t *s)
{
    memset(env, 0, sizeof(*env));
    env->scan = scan_cb;
    env->pull = pull_cb;
    env->current_op = current_op_cb;
    env->write_out = write_out_cb;
    env->ctx = s;
}

/*
 * A streaming run of stages first.. over s; the number of results (capped),
 * or -1 on error. With hash non-NULL, *hash receives the sum of the results'
 * FNV-1a hashes: equal for two runs that give the same documents in any order.
 */
static long
run_stream(const mf_pipeline_t *p, size_t first, src_t *s, uint64_t *hash)
{
    mf_agg_limits_t lim = {.allow_disk = false, .sort_bytes = 16 << 20, .group_bytes = 16 << 20, .tmp_dir = NULL};
    mf_agg_stream_t *st = mf_agg_stream_new(p, first, &lim);
    mf_agg_env_t env;
    mf_error_t err;
    long n = 0;

    env_init(&env, s);
    mf_err_clear(&err);
    for (;;) {
        bson_t *out = NULL;
        if (mf_agg_stream_next(st, &env, &out, &err) != 0) {
            FUZZ_CHECK(err.code != 0, "stream failed without an error code");
            if (getenv("FUZZ_VERBOSE"))
                fprintf(stderr, "stream from stage %zu: error %d: %s\n", first, err.code, err.msg);
            n = -1;
            break;
        }
        if (out == NULL)
            break;
        FUZZ_CHECK(FUZZ_DOC_OK(out), "stream result is not well-formed BSON");
        if (hash != NULL) {
            const uint8_t *b = bson_get_data(out);
            uint64_t h = 14695981039346656037ULL;
            for (uint32_t i = 0; i < out->len; i++)
                h = (h ^ b[i]) * 1099511628211ULL;
            *hash += h;
        }
        bson_destroy(out);
        if (++n >= MAX_RESULTS)
            break;
    }
    mf_agg_stream_free(st);
    return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    bson_value_t pv;
    mf_pipeline_t *p;
    mf_error_t err;
    mf_agg_pushdown_t pd;
    const char *tdb, *tcoll;
    const bson_t *mspec;
    long n_push = -2, n_all, n_run, n_bar = -2;
    uint64_t h_all = 0, h_bar = 0;
    bool random = memmem(data, size, "$sample", 7) || memmem(data, size, "$rand", 5);
    /* $$NOW and $$CLUSTER_TIME differ between runs: their results are counted, not compared. */
    bool clock = memmem(data, size, "NOW", 3) || memmem(data, size, "CLUSTER_TIME", 12);

    if (fuzz_docs_read(data, size, &d) == 0)
        return 0;
    pv = fuzz_value_of_doc(d.docs[0], true);
    mf_err_clear(&err);
    p = mf_pipeline_new(&pv, &err);
    if (p == NULL) {
        FUZZ_CHECK(err.code != 0, "pipeline refused without an error code");
        fuzz_docs_free(&d);
        return 0;
    }
    /* What the command layer asks of a parsed pipeline. */
    (void)mf_pipeline_is_current_op(p);
    if (mf_pipeline_write_target(p, &tdb, &tcoll, &mspec))
        FUZZ_CHECK(tcoll != NULL && mf_pipeline_writes(p), "write target without a collection");
    if (mf_pipeline_first_match(p))
        fuzz_walk(bson_get_data(mf_pipeline_first_match(p)), mf_pipeline_first_match(p)->len, 0);
    mf_pipeline_pushdown(p, true, &pd);

    /* (1) the aggregate command's path: pushed-down prefix, then the stream. */
    if (!mf_pipeline_is_collectionless(p)) {
        src_t s = {.d = &d, .next = 1, .limit_left = -1};
        mf_pipeline_pushdown(p, false, &pd);
        FUZZ_CHECK(pd.sort == NULL, "a $sort pushed down although the plan cannot provide it");
        mf_err_clear(&err);
        if (pd.filter == NULL || (s.m = mf_matcher_new(pd.filter, &err)) != NULL) {
            s.skip_left = pd.skip;
            s.limit_left = pd.limit > 0 ? pd.limit : -1;
            s.proj = pd.project;
            n_push = run_stream(p, pd.nstages, &s, NULL);
            if (s.m)
                mf_matcher_free(s.m);
        } else {
            n_push = -1;
        }
    }
    /* (2) every stage through the stream. */
    {
        src_t s = {.d = &d, .next = 1, .limit_left = -1};
        n_all = run_stream(p, 0, &s, &h_all);
    }
    /* (3) materialised. */
    {
        src_t s = {.d = &d, .next = 1, .limit_left = -1};
        mf_agg_env_t env;
        mf_docvec_t out;
        env_init(&env, &s);
        env.pull = NULL;
        mf_docvec_init(&out);
        mf_err_clear(&err);
        if (mf_pipeline_run(p, &env, "c", &out, &err) == 0) {
            for (size_t i = 0; i < out.len; i++)
                FUZZ_CHECK(FUZZ_DOC_OK(out.docs[i]), "result is not well-formed BSON");
            n_run = (long)(out.len + s.written);
            if (n_run > MAX_RESULTS)
                n_run = MAX_RESULTS;
        } else {
            FUZZ_CHECK(err.code != 0, "pipeline run failed without an error code");
            if (getenv("FUZZ_VERBOSE"))
                fprintf(stderr, "materialised run: error %d: %s\n", err.code, err.msg);
            n_run = -1;
        }
        mf_docvec_destroy(&out);
    }
    /*
     * (4) the same stages with a barrier after each one ([{$facet: {d:
     * [{$match: {}}]}}, {$unwind: "$d"}, {$replaceWith: "$d"}], which passes
     * every document unchanged, in order, and which no stage moves past; a
     * $redact no longer is one): the pipeline's rewrites (agg_optimize.c
     * and optimize_pipeline: $match moved ahead and split, $skip / $limit
     * joined, $lookup / $graphLookup absorbing $unwind, stages copied into
     * $unionWith) may not change what it returns.
     * A pipeline that needs a stage first or last may not parse this way;
     * it is then not compared.
     */
    if (!random && (pv.value_type == BSON_TYPE_ARRAY || pv.value_type == BSON_TYPE_DOCUMENT)) {
        bson_t arr, orig;
        bson_iter_t it;
        uint32_t k = 0;
        bson_init(&arr);
        if (bson_init_static(&orig, pv.value.v_doc.data, pv.value.v_doc.data_len) && bson_iter_init(&it, &orig)) {
            while (bson_iter_next(&it)) {
                char buf[16];
                const char *key;
                bson_uint32_to_string(k++, &key, buf, sizeof buf);
                bson_append_value(&arr, key, -1, bson_iter_value(&it));
                for (int b = 0; b < 3; b++) {
                    bson_t *bar = b == 0   ? BCON_NEW("$facet", "{", "d", "[", "{", "$match", "{", "}", "}", "]", "}")
                                  : b == 1 ? BCON_NEW("$unwind", BCON_UTF8("$d"))
                                           : BCON_NEW("$replaceWith", BCON_UTF8("$d"));
                    bson_uint32_to_string(k++, &key, buf, sizeof buf);
                    bson_append_document(&arr, key, -1, bar);
                    bson_destroy(bar);
                }
            }
        }
        bson_value_t bv = {.value_type = BSON_TYPE_ARRAY};
        bv.value.v_doc.data = (uint8_t *)bson_get_data(&arr);
        bv.value.v_doc.data_len = arr.len;
        mf_err_clear(&err);
        mf_pipeline_t *pb = mf_pipeline_new(&bv, &err);
        if (pb != NULL) {
            src_t s = {.d = &d, .next = 1, .limit_left = -1};
            n_bar = run_stream(pb, 0, &s, &h_bar);
            mf_pipeline_free(pb);
        }
        bson_destroy(&arr);
    }
    if (!random) {
        /*
         * Compared only when both runs succeed. Known divergence (fuzz/README.md,
         * "Open findings"): the materialising run evaluates each stage over
         * every document before the next stage, and the pushed-down $project
         * is applied to a whole batch pulled from the plan, while the full
         * stream pulls one document at a time; so with a $limit after a
         * stage that fails on a later document, [{$project: {y: {$multiply:
         * ["$a", 2]}}}, {$limit: 1}] over {a: 1}, {a: "x"}, the full stream
         * gives one result (as MongoDB, which moves $limit before $project)
         * and the other two fail.
         */
        if (n_all >= 0 && n_run >= 0)
            FUZZ_CHECK(n_all == n_run, "stream gave %ld results, materialised run %ld", n_all, n_run);
        if (n_push >= 0 && n_all >= 0)
            FUZZ_CHECK(n_push == n_all, "pushed-down stream gave %ld results, full stream %ld", n_push, n_all);
        if (n_bar >= 0 && n_all >= 0) {
            FUZZ_CHECK(n_bar == n_all, "with a barrier after each stage %ld results, without %ld", n_bar, n_all);
            FUZZ_CHECK(clock || n_all == MAX_RESULTS || h_bar == h_all,
                       "with a barrier after each stage other documents than without (same count %ld)", n_all);
        }
    }
    mf_pipeline_free(p);
    fuzz_docs_free(&d);
    return 0;
}
