/*
 * index_filter.h: index filters (planCacheSetFilter), the set of indexes the
 * planner may consider for one query shape of one collection.
 *
 * A filter belongs to its collection object (so a dropped and re-created
 * collection starts with none) and is identified by its query shape:
 * the query's field names and operators with values ignored, plus the sort,
 * projection and collation as given (MongoDB's plan cache key, simplified).
 * Filters live in memory only, as mongod's do (lost at restart). A mutex per
 * collection guards its list; every function may be called from any thread.
 *
 * The planner (plan.c) asks mf_index_filter_allowed for the request's shape:
 * with a filter, only the indexes it names (by key pattern or name) are
 * candidates, and a query none of them can serve is a collection scan; a
 * hint overrides the filter, as in mongod.
 */
#ifndef MF_INDEX_FILTER_H
#define MF_INDEX_FILTER_H

#include <bson/bson.h>
#include <stdbool.h>

#include "catalog/catalog.h"

/*
 * mf_index_filter_set: sets (replaces) the filter of c for the shape of
 * query/sort/projection/collation (sort, projection, collation may be NULL)
 * to indexes (an array of key patterns or index names). Copies everything.
 */
void mf_index_filter_set(mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                         const bson_t *collation, const bson_t *indexes);

/* mf_index_filter_clear: removes c's filter for that shape, or all of c's filters when query is NULL. */
void mf_index_filter_clear(mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                           const bson_t *collation);

/* mf_index_filter_list: appends c's filters to arr ({query, sort, projection, [collation], indexes} each). */
void mf_index_filter_list(const mf_coll_t *c, bson_t *arr);

/*
 * mf_index_filter_allowed: whether c has a filter for the shape of
 * query/sort/projection (each may be NULL); if so, allowed[i] (room for
 * c->nindexes) tells whether c->indexes[i] is one it names. Caller holds
 * the catalog lock on c.
 */
bool mf_index_filter_allowed(const mf_coll_t *c, const bson_t *query, const bson_t *sort, const bson_t *projection,
                             bool *allowed);

#endif /* MF_INDEX_FILTER_H */
