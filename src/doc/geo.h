/*
 * geo.h: geometry for the geospatial query operators and geo indexes.
 *
 * Two coordinate systems, as in MongoDB: SPHERE (GeoJSON, and legacy pairs
 * read as [longitude, latitude] by the spherical operators), where edges are
 * great-circle arcs and distances are angles on a sphere of radius
 * MF_GEO_EARTH_RADIUS_M (mongod's kRadiusOfEarthInMeters), and FLAT (legacy
 * coordinate pairs with the 2d operators $box, $polygon, $center and a 2d
 * index), where distances are Euclidean.
 *
 * A stored value (a document's field) is parsed into an mf_geo_t: a GeoJSON
 * object (Point, LineString, Polygon, MultiPoint, MultiLineString,
 * MultiPolygon, GeometryCollection, with mongod's validation and messages) or
 * a legacy point ([x, y] or {a: x, b: y}). A query operand ($geoWithin,
 * $geoIntersects, $near, $nearSphere) is parsed into an mf_geo_query_t.
 * Everything here is pure: no allocation survives a failed parse, nothing is
 * shared, and long loops (vertex-pair checks of big polygons) poll the
 * current operation for interruption.
 */
#ifndef MF_GEO_H
#define MF_GEO_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/error.h"

#define MF_GEO_EARTH_RADIUS_M 6378100.0

typedef struct mf_geo mf_geo_t;
typedef struct mf_geo_query mf_geo_query_t;

/* The index kinds a key pattern value can name. */
typedef enum { MF_GEO_IX_NONE = 0, MF_GEO_IX_2DSPHERE, MF_GEO_IX_2D } mf_geo_ix_t;

/*
 * mf_geo_parse_stored: parses a stored value: a GeoJSON object or a legacy
 * point (array or object whose first two fields are numbers; extra fields
 * allowed). *out is owned by the caller (mf_geo_free). Returns 0, or -1 with
 * err (2 BadValue, mongod's GeoJSON messages) when v is not a geometry.
 */
int mf_geo_parse_stored(const bson_value_t *v, mf_geo_t **out, mf_error_t *err) MF_WUR;
void mf_geo_free(mf_geo_t *g);

/* mf_geo_is_legacy_point: whether g is a legacy coordinate pair (FLAT); *x and *y get its coordinates. */
bool mf_geo_is_legacy_point(const mf_geo_t *g, double *x, double *y);

/*
 * mf_geo_index_check: the geo index key generation check for the value(s)
 * at path in doc: for a 2dsphere index every value reached must be a valid
 * geometry (else 16755 "Can't extract geo keys: <doc>  <why>"); for a 2d
 * index a legacy pair within [min, max] (13026, 13027, 13067, 13068).
 * *present is false when the path reaches nothing (the document is then not
 * in the index). Returns 0 or -1 with err.
 */
int mf_geo_index_check(mf_geo_ix_t kind, const bson_t *doc, const char *path, double min, double max, bool *present,
                       mf_error_t *err) MF_WUR;

/* Query operators. */
/* MF_GEOQ_WITHIN_LEGACY: $within, parsed as $geoWithin (the query keeps MF_GEOQ_WITHIN) minus its one-shape rule. */
typedef enum { MF_GEOQ_WITHIN, MF_GEOQ_INTERSECTS, MF_GEOQ_NEAR, MF_GEOQ_NEARSPHERE, MF_GEOQ_WITHIN_LEGACY } mf_geoq_op_t;

/*
 * mf_geo_query_parse: parses the operand of $geoWithin / $within,
 * $geoIntersects, or of $near / $nearSphere. For the near operators opdoc is
 * the whole operator document ({$near: [x, y], $maxDistance: d}) since the
 * legacy form carries its distances beside the operator. Returns the query,
 * or NULL with err (2 BadValue).
 */
mf_geo_query_t *mf_geo_query_parse(mf_geoq_op_t op, const bson_value_t *operand, const bson_value_t *opdoc,
                                   mf_error_t *err);
void mf_geo_query_free(mf_geo_query_t *q);

/* mf_geo_query_match: whether the one value v (no array traversal here) satisfies q. */
bool mf_geo_query_match(const mf_geo_query_t *q, const bson_value_t *v);

/*
 * A near search: a centre, distance bounds, and how distances are measured.
 * Units: meters for a GeoJSON centre; radians for a legacy centre measured
 * on the sphere; coordinate units for a flat (2d) search.
 */
typedef struct mf_geo_near {
    double x, y;     /* centre: lng/lat or flat x/y */
    bool geojson;    /* centre given as a GeoJSON point (distances in meters) */
    bool spherical;  /* measured on the sphere */
    double min, max; /* bounds in the search's units; max < 0 for none */
} mf_geo_near_t;

/* mf_geo_query_near: the near search of a $near / $nearSphere query (NULL for other operators). */
const mf_geo_near_t *mf_geo_query_near(const mf_geo_query_t *q);

/*
 * mf_geo_near_point: parses a near centre (a GeoJSON Point object or a legacy
 * pair) into n->x/y/geojson. Returns 0 or -1 with err.
 */
int mf_geo_near_point(const bson_value_t *v, mf_geo_near_t *n, mf_error_t *err) MF_WUR;

/*
 * mf_geo_near_distance: the distance from n's centre to the geometry v in
 * n's units (0 inside a polygon); false when v is not a geometry usable by
 * this search (a flat search only measures legacy points and GeoJSON points).
 */
bool mf_geo_near_distance(const mf_geo_near_t *n, const bson_value_t *v, double *dist);

/*
 * mf_geo_near_doc: the smallest distance from n's centre to a location at
 * path in doc (a path may reach several: an array of points or of GeoJSON
 * objects). *loc (may be NULL) gets that location, pointing into doc.
 * False when doc has no usable location there.
 */
bool mf_geo_near_doc(const mf_geo_near_t *n, const bson_t *doc, const char *path, double *dist, bson_value_t *loc);

/*
 * Cell coverings for 2dsphere index keys and bounds (see geo.c). A stored
 * geometry is keyed by the cells of its bounding box on one of two grids;
 * a query region's covering holds every cell (of either grid) a geometry
 * sharing a point with the region can be keyed by.
 *
 * mf_geo_doc_cells: the sorted, distinct cells of the geometries at path in
 * doc (validated beforehand by mf_geo_index_check); *cells is owned by the
 * caller (free()). Returns their number.
 * mf_geo_cover: the covering of an operator document ({$geoWithin: ...} or
 * {$geoIntersects: ...}) as sorted, disjoint inclusive id ranges (*out owned
 * by the caller); -1 when it has none (flat shapes, bad operands: scan).
 */
typedef struct mf_geo_cell_range {
    int64_t lo, hi;
} mf_geo_cell_range_t;
size_t mf_geo_doc_cells(const bson_t *doc, const char *path, int64_t **cells);
int mf_geo_cover(const bson_value_t *opdoc, mf_geo_cell_range_t **out, size_t *nout);
/* The same for a 2d index over [min, max] (a 1024 x 1024 grid of its points). */
size_t mf_geo_doc_cells_2d(const bson_t *doc, const char *path, double min, double max, int64_t **cells);
int mf_geo_cover_2d(const bson_value_t *opdoc, double min, double max, mf_geo_cell_range_t **out, size_t *nout);

/*
 * mf_geo_filter_has_near: whether a filter uses $near, $nearSphere or
 * $geoNear anywhere (what a $match stage refuses: 5626500).
 */
bool mf_geo_filter_has_near(const bson_t *filter);
#define MF_GEO_NEAR_CONTEXT_MSG                                                                                    \
    "$geoNear, $near, and $nearSphere are not allowed in this context, as these operators require sorting "     \
    "geospatial data. If you do not need sort, consider using $geoWithin instead. Check out "                   \
    "https://dochub.mongodb.org/core/near-sort-operation and "                                                  \
    "https://dochub.mongodb.org/core/nearSphere-sort-operationfor more details."

#endif /* MF_GEO_H */
