/*
 * agg_geo.h: the $geoNear aggregation stage (and a find's $near /
 * $nearSphere, which the command layer runs as this stage).
 *
 * The stage is parsed with mongod's checks (document_source_geo_near.cpp):
 * near required (5860400) and a GeoJSON point or legacy pair (5860401),
 * distanceField / includeLocs strings (16606 / 16607), maxDistance,
 * minDistance and distanceMultiplier non-negative numbers (14 / 2), query
 * an object (14), key a non-empty string (14 / 2), the removed collation,
 * limit, num and start options (40227, 50858, 50857, 50856), anything else
 * 2 "Unknown argument to $geoNear: <name>". It must be the first stage
 * (40602, checked by agg.c).
 *
 * Running it needs the source collection's index specs: the geo field is
 * the 'key' option's, else the only 2d index's, else the only 2dsphere
 * index's (27 IndexNotFound when there is none or several, as mongod); the
 * field's usable (not hidden) index answering the query is the 2dsphere one
 * for a GeoJSON centre, the 2d one for a legacy pair; none is 291
 * NoQueryExecutionPlans "unable to find index for $geoNear query". Distances: meters for a GeoJSON near
 * point; radians for a legacy pair with spherical: true or a 2dsphere
 * index; coordinate units with a 2d index otherwise. The documents matching
 * 'query' that have a location within [minDistance, maxDistance] come out
 * nearest first (ties in input order); distances are computed exactly for
 * each candidate. With a key, a spherical measure and a maxDistance the
 * stage's pushed-down filter adds a $geoIntersects of a polygon around the
 * distance cap, which a 2dsphere index can bound (agg_geo.c).
 */
#ifndef MF_AGG_GEO_H
#define MF_AGG_GEO_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/docvec.h"
#include "common/error.h"
#include "doc/geo.h"

typedef struct mf_geonear mf_geonear_t;

/*
 * mf_geonear_parse: parses a $geoNear specification. find_mode marks the
 * stage a find's $near becomes: distanceField may be absent and a missing
 * index is always 291. NULL with err on a bad spec.
 */
mf_geonear_t *mf_geonear_parse(const bson_value_t *spec, bool find_mode, mf_error_t *err);
void mf_geonear_free(mf_geonear_t *g);

/* mf_geonear_query: the 'query' filter (NULL when none), valid while g lives; a scan may use it as a pre-filter. */
const bson_t *mf_geonear_query(const mf_geonear_t *g);

/* The output field names (NULL when not wanted), valid while g lives. */
const char *mf_geonear_distance_field(const mf_geonear_t *g);
const char *mf_geonear_locs_field(const mf_geonear_t *g);

/* One selected document: its position in the input, its (multiplied) distance and location. */
typedef struct mf_geonear_hit {
    size_t idx;
    double dist;
    bson_value_t loc; /* points into the input document */
} mf_geonear_hit_t;

/*
 * mf_geonear_select: picks and orders the documents of in (see above).
 * specs is an array of the source collection's index specs, ns its
 * namespace (for messages). *hits (owned by the caller, free()) gets *nhits
 * entries, nearest first. Polls for interruption. Returns 0, or -1 with err.
 */
int mf_geonear_select(const mf_geonear_t *g, const bson_t *specs, const char *ns, const mf_docvec_t *in,
                      mf_geonear_hit_t **hits, size_t *nhits, mf_error_t *err) MF_WUR;

/*
 * A resolved search, for measuring documents one at a time (the streaming
 * run): mf_geonear_prepare picks the index and units as mf_geonear_select
 * does (field points into specs or g: valid while both live; kind is the
 * kind of field's index that answers the search, the one a plan or
 * returnKey names); mf_geonear_measure tells whether doc is selected (query, a location,
 * distance bounds) and gives its multiplied distance and its location
 * (pointing into doc).
 */
typedef struct mf_geonear_run {
    double x, y, min, max;
    bool geojson, spherical;
    const char *field;
    mf_geo_ix_t kind;
} mf_geonear_run_t;
int mf_geonear_prepare(const mf_geonear_t *g, const bson_t *specs, const char *ns, mf_geonear_run_t *run,
                       mf_error_t *err) MF_WUR;
bool mf_geonear_measure(const mf_geonear_t *g, const mf_geonear_run_t *run, const bson_t *doc, double *dist,
                        bson_value_t *loc);

/* mf_geo_near_count: how many $near / $nearSphere operators filter (NULL: none) holds, at any depth. */
int mf_geo_near_count(const bson_t *filter);

/*
 * mf_geo_near_normalize: mongod 8.0's isValidNormalized for a find filter's
 * $near: one that normalising (nested $and flattened, a one-element $or
 * unwrapped) makes top-level is accepted, and the filter rewritten into *out
 * (the caller destroys it) as {<path>: <near>, $and: [<the rest>]}, returning
 * 1; 0 when there is nothing to rewrite (no $near, or already top-level; *out
 * NULL); -1 with err (2) for a $near that stays nested.
 */
int mf_geo_near_normalize(const bson_t *filter, bson_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_geonear_from_find: builds, into out (initialised here), the $geoNear
 * spec that runs a find filter holding a top-level $near / $nearSphere (or
 * one inside a top-level $and): near, key, spherical, distances, and the
 * rest of the filter as query. Returns 1 when the filter has such a clause,
 * 0 when it has none (out left uninitialised), -1 with err when the clause is
 * malformed.
 */
int mf_geonear_from_find(const bson_t *filter, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * $geoNear metadata. A $geoNear stage sets each output document's distance
 * (multiplied by distanceMultiplier) and location as metadata, which
 * {$meta: "geoNearDistance"} and {$meta: "geoNearPoint"} read in later
 * stages and in a $near find's projection (mongod's DocumentSourceGeoNear,
 * ExpressionMeta). mayfly carries them as hidden fields (MF_GEO_DIST_FIELD,
 * MF_GEO_POINT_FIELD in doc/match.h), added only when something reads them.
 *
 * mf_geo_meta_mentioned: the metadata that v (a pipeline array, a stage or
 * a projection) reads, as MF_GEO_META_* bits; sub-pipelines (a "pipeline"
 * field: $lookup, $unionWith) are not looked into, they have their own
 * first stage.
 */
enum { MF_GEO_META_DIST = 1, MF_GEO_META_POINT = 2 };
unsigned mf_geo_meta_mentioned(const bson_value_t *v);

#endif /* MF_AGG_GEO_H */
