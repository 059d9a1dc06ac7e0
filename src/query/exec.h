/*
 * exec.h: running a query plan (query/plan.h) against a collection.
 *
 * The executor runs a plan's access path: IDHACK (one _id-index lookup),
 * COLLSCAN (records in record-id order, forward or backward), IXSCAN +
 * FETCH (index intervals in key order, each record fetched and re-checked by
 * the matcher), or DISTINCT_SCAN (one index entry per distinct key value,
 * seeking past the rest; its keys decoded, or its documents fetched).
 * Stages above the access path (SORT, SKIP, LIMIT, PROJECTION,
 * COUNT, DELETE, UPDATE) are run by the command, which records their counters
 * in the same plan so explain shows what ran.
 *
 * A plan remembers its position (last key and record id), so running it
 * again resumes after the last document handed to the visitor: a find cursor
 * keeps its plan across getMore. Multikey scans de-duplicate record ids.
 */
#ifndef MF_EXEC_H
#define MF_EXEC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "doc/match.h"
#include "query/plan.h"
#include "storage/storage.h"

/*
 * Visitor: doc is valid only during the call. Return 0 to continue, 1 to
 * stop (the document counts as consumed: a resumed plan continues after it),
 * -1 on error (with err set by the visitor through its own means).
 */
typedef int (*mf_exec_visit_fn)(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *details);

typedef struct mf_exec_stats {
    int64_t docs_examined;
    int64_t keys_examined;
    const char *plan; /* "IDHACK", "COLLSCAN", "IXSCAN" or "EOF" */
} mf_exec_stats_t;

/*
 * mf_exec_run: runs (or resumes) p's access path over c, calling visit for
 * each document matching m (NULL = all). c must be the collection p was
 * built for; the caller holds the catalog lock. Sets p->done once the scan
 * reached its end. Returns 0, or -1 with err (MF_CONFLICT is reported as 112
 * WriteConflict; an index dropped since the plan was built is 175
 * QueryPlanKilled).
 */
/*
 * mf_exec_first_visit: a visitor keeping the first record it is given and
 * stopping the scan; arg is an mf_exec_first_t initialised to {0, false}.
 */
typedef struct mf_exec_first {
    int64_t rid;
    bool found;
} mf_exec_first_t;
int mf_exec_first_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *details);

int mf_exec_run(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
                mf_error_t *err) MF_WUR;

/*
 * mf_exec_query: plans req over c, runs the plan, and frees it (or hands it
 * to the caller through *plan_out when not NULL, for explain counters).
 * Returns 0, or -1 with err (including planning errors such as a bad hint).
 */
int mf_exec_query(mf_sess_t *s, mf_coll_t *c, const mf_plan_request_t *req, const mf_matcher_t *m,
                  mf_exec_visit_fn visit, void *arg, mf_plan_t **plan_out, mf_error_t *err) MF_WUR;

/*
 * mf_exec_scan: the original entry point: plans filter (no sort, no hint)
 * and runs it. With after_rid > 0 it is a COLLSCAN resuming after that
 * record id (record-id order). stats may be NULL.
 */
int mf_exec_scan(mf_sess_t *s, mf_coll_t *c, const bson_t *filter, const mf_matcher_t *m, int64_t after_rid,
                 mf_exec_visit_fn visit, void *arg, mf_exec_stats_t *stats, mf_error_t *err) MF_WUR;

/*
 * mf_exec_check_deadline: the yield-point check of scans (every few hundred
 * documents) and of any other long loop: the calling thread's operation
 * (common/curop.h), whose deadline the command layer sets from maxTimeMS.
 * Fails with 50 MaxTimeMSExpired "operation exceeded time limit", 11601
 * Interrupted after killOp, or 11600 InterruptedAtShutdown.
 */
int mf_exec_check_deadline(mf_error_t *err) MF_WUR;


#endif /* MF_EXEC_H */
