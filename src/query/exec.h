/*
 * exec.h: running a filter against a collection.
 *
 * Today's plans: IDHACK (the filter is an equality on _id: one lookup in the
 * _id index) or COLLSCAN (every record in record-id order, filtered by the
 * matcher). The index planner (issue 3) adds IXSCAN here, behind the same
 * entry point, so every command that reads through mf_exec_scan gains it.
 */
#ifndef MF_EXEC_H
#define MF_EXEC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "query/match.h"
#include "storage/storage.h"

/*
 * Visitor: doc is valid only during the call. Return 0 to continue, 1 to
 * stop, -1 on error (with err set by the visitor through its own means).
 */
typedef int (*mf_exec_visit_fn)(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *details);

typedef struct mf_exec_stats {
    int64_t docs_examined;
    int64_t keys_examined;
    const char *plan; /* "IDHACK" or "COLLSCAN" */
} mf_exec_stats_t;

/*
 * mf_exec_scan: calls visit for each document of c matching m, in record-id
 * order, starting after record id after_rid (0 = from the start). filter is
 * the raw filter m was built from (for plan choice; may be NULL). Runs on s
 * inside whatever transaction the caller has (none = autocommit reads).
 * Returns 0, or -1 with err (MF_CONFLICT is reported as 112 WriteConflict).
 */
int mf_exec_scan(mf_sess_t *s, mf_coll_t *c, const bson_t *filter, const mf_matcher_t *m, int64_t after_rid,
                 mf_exec_visit_fn visit, void *arg, mf_exec_stats_t *stats, mf_error_t *err) MF_WUR;

/* mf_exec_id_equality: if filter is an equality on _id, points *v at the value and returns true. */
bool mf_exec_id_equality(const bson_t *filter, bson_value_t *v);

#endif /* MF_EXEC_H */
