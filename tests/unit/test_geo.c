/*
 * test_geo.c: unit tests for the geometry module (src/doc/geo.c): GeoJSON
 * and legacy parsing with mongod's messages, the spherical predicates
 * ($geoWithin, $geoIntersects, $centerSphere), the flat ones ($box,
 * $polygon, $center) and near distances (meters, radians, flat units).
 * Values are written as JSON (bson_new_from_json), wrapped as {v: ...}.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "doc/geo.h"

/* The value of field v of a JSON document; the document is kept in *holder (caller destroys it). */
static bson_value_t
jv(const char *json, bson_t **holder)
{
    bson_error_t e;
    bson_iter_t it;
    *holder = bson_new_from_json((const uint8_t *)json, -1, &e);
    cr_assert_not_null(*holder, "bad JSON %s: %s", json, e.message);
    cr_assert(bson_iter_init_find(&it, *holder, "v"));
    return *bson_iter_value(&it);
}

static bool
matches(mf_geoq_op_t op, const char *operand, const char *stored)
{
    bson_t *ho, *hs;
    bson_value_t o = jv(operand, &ho), s = jv(stored, &hs);
    mf_error_t err;
    mf_err_clear(&err);
    mf_geo_query_t *q = mf_geo_query_parse(op, &o, NULL, &err);
    cr_assert_not_null(q, "query %s: %s", operand, err.msg);
    bool r = mf_geo_query_match(q, &s);
    mf_geo_query_free(q);
    bson_destroy(ho);
    bson_destroy(hs);
    return r;
}

static const char *
parse_error(const char *stored)
{
    static mf_error_t err;
    bson_t *h;
    bson_value_t v = jv(stored, &h);
    mf_geo_t *g = NULL;
    mf_err_clear(&err);
    int rc = mf_geo_parse_stored(&v, &g, &err);
    mf_geo_free(g);
    bson_destroy(h);
    return rc == 0 ? NULL : err.msg;
}

#define SQUARE "{\"$geometry\": {\"type\": \"Polygon\", \"coordinates\": [[[0,0],[10,0],[10,10],[0,10],[0,0]]]}}"

Test(geo, parse_accepts_every_type_and_refuses_with_mongods_messages)
{
    cr_assert_null(parse_error("{\"v\": {\"type\": \"Point\", \"coordinates\": [1, 2, 3]}}"));
    cr_assert_null(parse_error("{\"v\": [1, 2]}"));
    cr_assert_null(parse_error("{\"v\": {\"lng\": 1, \"lat\": 2}}"));
    cr_assert_null(parse_error("{\"v\": {\"type\": \"MultiPolygon\", \"coordinates\": [[[[0,0],[1,0],[1,1],[0,0]]]]}}"));
    cr_assert_null(parse_error("{\"v\": {\"type\": \"GeometryCollection\", \"geometries\": "
                               "[{\"type\": \"LineString\", \"coordinates\": [[0,0],[1,1]]}]}}"));
    cr_assert_str_eq(parse_error("{\"v\": {\"type\": \"Point\", \"coordinates\": [181, 0]}}"),
                     "Longitude/latitude is out of bounds, lng: 181 lat: 0");
    cr_assert(strstr(parse_error("{\"v\": {\"type\": \"Polygon\", \"coordinates\": [[[0,0],[1,1],[1,0]]]}}"),
                     "Loop is not closed, first vertex does not equal last vertex: ") != NULL);
    cr_assert(strstr(parse_error("{\"v\": {\"type\": \"Polygon\", \"coordinates\": [[[0,0],[1,1],[1,0],[0,1],[0,0]]]}}"),
                     "Edges 0 and 2 cross") != NULL);
    cr_assert_str_eq(parse_error("{\"v\": {\"type\": \"Polygon\", \"coordinates\": []}}"), "Polygon has no loops.");
    cr_assert_str_eq(parse_error("{\"v\": {\"type\": \"MultiPoint\", \"coordinates\": []}}"),
                     "MultiPoint coordinates must have at least 1 element");
    cr_assert_str_eq(parse_error("{\"v\": [\"a\", 1]}"), "Point must only contain numeric elements, instead got type string");
}

Test(geo, within_polygon_and_holes_on_the_sphere)
{
    cr_assert(matches(MF_GEOQ_WITHIN, "{\"v\": " SQUARE "}", "{\"v\": [5, 5]}"));
    cr_assert(!matches(MF_GEOQ_WITHIN, "{\"v\": " SQUARE "}", "{\"v\": [15, 5]}"));
    /* A line leaving the square is not within it, but intersects it. */
    const char *line = "{\"v\": {\"type\": \"LineString\", \"coordinates\": [[5,5],[15,5]]}}";
    cr_assert(!matches(MF_GEOQ_WITHIN, "{\"v\": " SQUARE "}", line));
    cr_assert(matches(MF_GEOQ_INTERSECTS, "{\"v\": " SQUARE "}", line));
    const char *holed = "{\"v\": {\"$geometry\": {\"type\": \"Polygon\", \"coordinates\": "
                        "[[[0,0],[10,0],[10,10],[0,10],[0,0]], [[4,4],[6,4],[6,6],[4,6],[4,4]]]}}}";
    cr_assert(!matches(MF_GEOQ_WITHIN, holed, "{\"v\": [5, 5]}"));
    cr_assert(matches(MF_GEOQ_WITHIN, holed, "{\"v\": [2, 2]}"));
    /* The edge from (10,10) to (0,10) is a great circle reaching latitude 10.037 at longitude 5. */
    cr_assert(matches(MF_GEOQ_WITHIN, "{\"v\": " SQUARE "}", "{\"v\": [5, 10.03]}"));
    cr_assert(!matches(MF_GEOQ_WITHIN, "{\"v\": " SQUARE "}", "{\"v\": [5, 10.05]}"));
}

Test(geo, caps_and_flat_shapes)
{
    /* 1 degree is 0.01745 radians: a cap of 0.02 holds (1, 0), not (2, 0). */
    cr_assert(matches(MF_GEOQ_WITHIN, "{\"v\": {\"$centerSphere\": [[0, 0], 0.02]}}", "{\"v\": [1, 0]}"));
    cr_assert(!matches(MF_GEOQ_WITHIN, "{\"v\": {\"$centerSphere\": [[0, 0], 0.02]}}", "{\"v\": [2, 0]}"));
    cr_assert(matches(MF_GEOQ_WITHIN, "{\"v\": {\"$box\": [[0, 0], [2, 2]]}}", "{\"v\": [2, 2]}"));
    cr_assert(!matches(MF_GEOQ_WITHIN, "{\"v\": {\"$box\": [[0, 0], [2, 2]]}}", "{\"v\": [2.1, 2]}"));
    cr_assert(matches(MF_GEOQ_WITHIN, "{\"v\": {\"$center\": [[0, 0], 5]}}", "{\"v\": [3, 4]}"));
    cr_assert(matches(MF_GEOQ_WITHIN, "{\"v\": {\"$polygon\": [[0, 0], [4, 0], [0, 4]]}}", "{\"v\": [1, 1]}"));
    cr_assert(!matches(MF_GEOQ_WITHIN, "{\"v\": {\"$polygon\": [[0, 0], [4, 0], [0, 4]]}}", "{\"v\": [3, 3]}"));
}

Test(geo, near_distances_in_meters_radians_and_flat_units)
{
    bson_t *h;
    bson_value_t c = jv("{\"v\": {\"type\": \"Point\", \"coordinates\": [0, 0]}}", &h);
    mf_geo_near_t n = {0};
    mf_error_t err;
    double d;
    cr_assert_eq(mf_geo_near_point(&c, &n, &err), 0);
    bson_destroy(h);
    cr_assert(n.geojson && n.spherical);
    bson_value_t p = jv("{\"v\": [0, 1]}", &h);
    cr_assert(mf_geo_near_distance(&n, &p, &d));
    cr_assert_float_eq(d, MF_GEO_EARTH_RADIUS_M * M_PI / 180, 1e-6, "one degree of latitude: %f", d);
    n.geojson = false; /* radians */
    cr_assert(mf_geo_near_distance(&n, &p, &d));
    cr_assert_float_eq(d, M_PI / 180, 1e-12);
    n.spherical = false; /* flat */
    bson_destroy(h);
    p = jv("{\"v\": [3, 4]}", &h);
    cr_assert(mf_geo_near_distance(&n, &p, &d));
    cr_assert_float_eq(d, 5.0, 1e-12);
    bson_destroy(h);
    /* Inside a polygon the distance is 0; to a line, the distance to its nearest point. */
    n.spherical = true;
    n.geojson = true;
    p = jv("{\"v\": {\"type\": \"Polygon\", \"coordinates\": [[[-1,-1],[1,-1],[1,1],[-1,1],[-1,-1]]]}}", &h);
    cr_assert(mf_geo_near_distance(&n, &p, &d));
    cr_assert_float_eq(d, 0.0, 1e-12);
    bson_destroy(h);
    p = jv("{\"v\": {\"type\": \"LineString\", \"coordinates\": [[-5, 1], [5, 1]]}}", &h);
    cr_assert(mf_geo_near_distance(&n, &p, &d));
    /* The arc bulges north: at longitude 0 it reaches latitude atan(tan 1 / cos 5). */
    double want = atan(tan(M_PI / 180) / cos(5 * M_PI / 180)) * MF_GEO_EARTH_RADIUS_M;
    cr_assert_float_eq(d, want, 1e-6, "distance to the line %f, want %f", d, want);
    bson_destroy(h);
}

/* Whether cell id is inside one of the ranges. */
static bool
covered(const mf_geo_cell_range_t *r, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (id >= r[i].lo && id <= r[i].hi)
            return true;
    return false;
}

Test(geo, cells_of_a_geometry_meet_the_covering_of_a_region_holding_it)
{
    bson_error_t e;
    bson_t *doc = bson_new_from_json((const uint8_t *)"{\"g\": {\"type\": \"Point\", \"coordinates\": [179.9, 10]}}", -1, &e);
    bson_t *op = bson_new_from_json(
        (const uint8_t *)"{\"v\": {\"$geoWithin\": {\"$centerSphere\": [[-179.9, 10], 0.01]}}}", -1, &e);
    bson_iter_t it;
    int64_t *cells;
    mf_geo_cell_range_t *r;
    size_t n, nr;

    cr_assert(doc && op);
    n = mf_geo_doc_cells(doc, "g", &cells);
    cr_assert(n >= 1 && n <= 2, "a point on a grid line may take the cells on both sides: %zu", n);
    cr_assert(bson_iter_init_find(&it, op, "v"));
    cr_assert_eq(mf_geo_cover(bson_iter_value(&it), &r, &nr), 0);
    for (size_t i = 0; i < n; i++)
        cr_assert(covered(r, nr, cells[i]), "the cap across the antimeridian covers the point's cells");
    free(r);
    free(cells);
    /* A polygon over the north pole is keyed by coarse cells of every longitude. */
    bson_destroy(doc);
    doc = bson_new_from_json((const uint8_t *)"{\"g\": {\"type\": \"Polygon\", \"coordinates\": "
                                              "[[[0, 80], [120, 80], [-120, 80], [0, 80]]]}}", -1, &e);
    n = mf_geo_doc_cells(doc, "g", &cells);
    cr_assert_eq(n, 12, "one row of 12 coarse cells, got %zu", n);
    free(cells);
    bson_destroy(doc);
    bson_destroy(op);
}
