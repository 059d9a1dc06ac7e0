/*
 * geo.c: GeoJSON / legacy geometry parsing and the spherical and flat
 * predicates of the geo operators (see geo.h).
 *
 * Representation. A parsed geometry is a flat set of parts over one vertex
 * array: points (vertex indices), lines (vertex ranges) and polygons (ring
 * ranges, the first ring the shell, the others holes). A GeometryCollection
 * or a Multi* is simply several parts, so every predicate is a loop over
 * parts.
 *
 * Spherical predicates (written from the formulas, on unit vectors):
 *   - distance: the angle atan2(|a x b|, a . b), times the earth radius for
 *     meters;
 *   - point in ring: the ring is projected gnomonically about the direction
 *     of its vertex centroid (great-circle arcs project to straight
 *     segments, so planar ray casting is exact for rings within a
 *     hemisphere); a point behind that hemisphere is outside. mongod's S2
 *     normalises every loop to the smaller of its two sides, which this
 *     matches for rings smaller than a hemisphere;
 *   - arcs AB and CD cross when C and D lie on opposite sides of the plane
 *     of AB, A and B on opposite sides of the plane of CD, and the common
 *     point of the two great circles lies within both arcs;
 *   - distance from a point to an arc: to the foot of the perpendicular on
 *     the great circle when it falls inside the arc, else to the nearer end.
 * $geoWithin a polygon: every vertex of the geometry inside the region (a
 * point, or a polygon's vertex and edge midpoint, may also lie on its
 * boundary, as S2 counts it) and no edge crossing the region's boundary; a
 * stored strict-winding polygon never matches; $geoIntersects: a vertex of
 * either inside the other's polygon, two edges crossing, or a point on the
 * other.
 * Flat predicates ($box, $polygon, $center) accept points only, as a 2d
 * index holds points only.
 *
 * A strict-winding ("big") polygon whose ring runs clockwise holds the
 * larger side: its containment is the complement of the small side's.
 *
 * Validation follows mongod's geoparser.cpp messages (closed rings, at least
 * 3 distinct vertices, no crossing edges, holes inside the shell, lng/lat in
 * range). The crossing check compares every pair of edges in rings of up
 * to 512 vertices and sweeps the edges' lng/lat boxes in larger ones (a
 * large hole is checked against a large shell the same way); both poll the
 * current operation for interruption, so a huge polygon is bounded by
 * maxTimeMS / killOp, never by a crash; values parsed only to be matched
 * skip it (indexed values were validated on write; unindexed ones are
 * matched as given).
 *
 * Index cells (end of file): 2dsphere keys are the cells of a geometry's
 * lng/lat bounding box on a 1-degree or a 30-degree grid, 2d keys the cells
 * of a 1024 x 1024 grid over the index's square; a query region's covering
 * is a superset of the cells any geometry touching it can have.
 */
#include "doc/geo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "doc/path.h"
#include "doc/value.h"

typedef struct pt {
    double x, y; /* lng/lat degrees, or flat x/y */
} pt_t;

typedef struct vec {
    double x, y, z;
} vec_t;

typedef struct range {
    size_t start, n;
} range_t;

struct mf_geo {
    bool flat;       /* a legacy coordinate pair */
    bool novalidate; /* parsing a value to match it: skip the O(n^2) ring checks (mongod's skipValidation) */
    /*
     * A strict-winding ("big") polygon whose counter-clockwise ring encloses
     * the larger side: containment is the complement of the small side's.
     */
    bool big_inverted;
    bool big; /* a strict-winding polygon (big_inverted or not): a stored one never matches $geoWithin / $geoIntersects */
    pt_t *verts;
    size_t nverts, capverts;
    size_t *points;
    size_t npoints, cappoints;
    range_t *lines;
    size_t nlines, caplines;
    range_t *rings;
    size_t nrings, caprings;
    range_t *polys; /* ranges into rings */
    size_t npolys, cappolys;
};

enum shape { SH_GEOMETRY, SH_BOX, SH_POLYGON, SH_CENTER, SH_CENTERSPHERE, SH_NEAR };

struct mf_geo_query {
    mf_geoq_op_t op;
    enum shape shape;
    mf_geo_t *geom;     /* SH_GEOMETRY */
    double box[4];      /* SH_BOX: min x, min y, max x, max y */
    pt_t *poly;         /* SH_POLYGON */
    size_t npoly;
    double cx, cy, r;   /* SH_CENTER, SH_CENTERSPHERE (r in radians) */
    mf_geo_near_t near; /* SH_NEAR */
};

#define GROW(arr, n, cap)                                                                                   \
    do {                                                                                                    \
        if ((n) == (cap)) {                                                                                 \
            size_t c_ = (cap) ? (cap) * 2 : 8;                                                              \
            void *p_ = mf_realloc((arr), c_ * sizeof(*(arr)));                                              \
            if (p_ == NULL)                                                                                 \
                abort();                                                                                    \
            (arr) = p_;                                                                                     \
            (cap) = c_;                                                                                     \
        }                                                                                                   \
    } while (0)

static const double kDeg = M_PI / 180.0;

/* ---- small vector helpers ---- */

static vec_t
to_vec(pt_t p)
{
    double lat = p.y * kDeg, lng = p.x * kDeg;
    vec_t v = {cos(lat) * cos(lng), cos(lat) * sin(lng), sin(lat)};
    return v;
}

static double
dot(vec_t a, vec_t b)
{
    return a.x * b.x + a.y * b.y + a.z * b.z;
}

static vec_t
cross(vec_t a, vec_t b)
{
    vec_t c = {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
    return c;
}

static double
norm(vec_t a)
{
    return sqrt(dot(a, a));
}

static vec_t
unit(vec_t a)
{
    double n = norm(a);
    vec_t u = {a.x / n, a.y / n, a.z / n};
    return n > 0 ? u : a;
}

static double
angle(vec_t a, vec_t b)
{
    return atan2(norm(cross(a, b)), dot(a, b));
}

/* ---- geometry storage ---- */

static mf_geo_t *
geo_new(void)
{
    mf_geo_t *g = mf_calloc(1, sizeof(*g));
    if (g == NULL)
        abort();
    return g;
}

void
mf_geo_free(mf_geo_t *g)
{
    if (g == NULL)
        return;
    free(g->verts);
    free(g->points);
    free(g->lines);
    free(g->rings);
    free(g->polys);
    free(g);
}

static size_t
add_vert(mf_geo_t *g, pt_t p)
{
    GROW(g->verts, g->nverts, g->capverts);
    g->verts[g->nverts] = p;
    return g->nverts++;
}

bool
mf_geo_is_legacy_point(const mf_geo_t *g, double *x, double *y)
{
    if (!g->flat)
        return false;
    *x = g->verts[0].x;
    *y = g->verts[0].y;
    return true;
}

/* ---- parsing ---- */

static const char *
tname(const bson_value_t *v)
{
    return v ? mf_type_name(v->value_type) : "missing";
}

static int
bad(mf_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
bad(mf_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mf_err_vset(err, MF_E_BadValue, fmt, ap);
    va_end(ap);
    return -1;
}

static bool
iter_value(const bson_value_t *v, bson_iter_t *it)
{
    return (v->value_type == BSON_TYPE_ARRAY || v->value_type == BSON_TYPE_DOCUMENT) &&
           bson_iter_init_from_data(it, v->value.v_doc.data, v->value.v_doc.data_len);
}

/* A flat point: an array or object whose first two elements are numbers (mongod's parseFlatPoint). */
static int
parse_flat_point(const bson_value_t *v, bool allow_extra, pt_t *out, mf_error_t *err)
{
    bson_iter_t it;
    const bson_value_t *e;

    if (v == NULL || !iter_value(v, &it))
        return bad(err, "Point must be an array or object, instead got type %s", tname(v));
    e = bson_iter_next(&it) ? bson_iter_value(&it) : NULL;
    if (e == NULL || !mf_value_is_number(e))
        return bad(err, "Point must only contain numeric elements, instead got type %s", tname(e));
    out->x = mf_value_as_double(e);
    e = bson_iter_next(&it) ? bson_iter_value(&it) : NULL;
    if (e == NULL || !mf_value_is_number(e))
        return bad(err, "Point must only contain numeric elements, instead got type %s", tname(e));
    out->y = mf_value_as_double(e);
    if (!allow_extra && bson_iter_next(&it))
        return bad(err, "Point must only contain two numeric elements");
    if (!isfinite(out->x) || !isfinite(out->y))
        return bad(err, "Point coordinates must be finite numbers");
    return 0;
}

static int
check_lnglat(pt_t p, mf_error_t *err)
{
    if (!(p.x >= -180 && p.x <= 180 && p.y >= -90 && p.y <= 90))
        return bad(err, "Longitude/latitude is out of bounds, lng: %g lat: %g", p.x, p.y);
    return 0;
}

/* One GeoJSON position: [lng, lat, ...]. */
static int
parse_coord(const bson_value_t *v, pt_t *out, mf_error_t *err)
{
    if (v->value_type != BSON_TYPE_ARRAY)
        return bad(err, "GeoJSON coordinates must be an array, instead got type %s", tname(v));
    if (parse_flat_point(v, true, out, err) != 0)
        return -1;
    return check_lnglat(*out, err);
}

/* An array of positions appended to g's vertices; *r gets their range. */
static int
parse_coords(mf_geo_t *g, const bson_value_t *v, range_t *r, mf_error_t *err)
{
    bson_iter_t it;

    if (v == NULL || v->value_type != BSON_TYPE_ARRAY || !iter_value(v, &it))
        return bad(err, "GeoJSON coordinates must be an array of coordinates, instead got type %s", tname(v));
    r->start = g->nverts;
    while (bson_iter_next(&it)) {
        pt_t p;
        if (parse_coord(bson_iter_value(&it), &p, err) != 0)
            return -1;
        add_vert(g, p);
    }
    r->n = g->nverts - r->start;
    return 0;
}

static bool
same_pt(pt_t a, pt_t b)
{
    return a.x == b.x && a.y == b.y;
}

/* Removes consecutive duplicate vertices of range r (the vertices are r's own, at the end of the array). */
static void
erase_dups(mf_geo_t *g, range_t *r)
{
    size_t w = 0;
    for (size_t i = 0; i < r->n; i++) {
        pt_t p = g->verts[r->start + i];
        if (w > 0 && same_pt(g->verts[r->start + w - 1], p))
            continue;
        g->verts[r->start + w++] = p;
    }
    r->n = w;
    g->nverts = r->start + w;
}

static bool arcs_cross(vec_t a, vec_t b, vec_t c, vec_t d);
static void arc_lat_range(pt_t pa, pt_t pb, double *lo, double *hi);

static int
crossing_error(const pt_t *v, size_t n, size_t i, size_t j, const char *shown, mf_error_t *err)
{
    pt_t c = v[j], d = v[(j + 1) % n], e = v[(i + 1) % n];
    return bad(err,
               "Loop is not valid: %s Edges %zu and %zu cross. Edge locations in degrees: "
               "[%.7f, %.7f]-[%.7f, %.7f] and [%.7f, %.7f]-[%.7f, %.7f]",
               shown, i, j, v[i].y, v[i].x, e.y, e.x, c.y, c.x, d.y, d.x);
}

/* A ring edge's conservative lng/lat box, for the sweep of check_big_ring. */
typedef struct edge_box {
    double lnglo, lnghi, latlo, lathi;
    size_t i; /* the edge from vertex i to vertex i + 1 */
} edge_box_t;

static int
edge_box_cmp(const void *a, const void *b)
{
    const edge_box_t *x = a, *y = b;
    if (x->lnglo != y->lnglo)
        return x->lnglo < y->lnglo ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

typedef struct vert_ix {
    pt_t p;
    size_t i;
} vert_ix_t;

static int
vert_ix_cmp(const void *a, const void *b)
{
    const vert_ix_t *x = a, *y = b;
    if (x->p.x != y->p.x)
        return x->p.x < y->p.x ? -1 : 1;
    if (x->p.y != y->p.y)
        return x->p.y < y->p.y ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * check_ring for rings of many vertices, in O(n log n) for ordinary shapes
 * (a coastline of tens of thousands of vertices): repeated vertices by
 * sorting (reported as S2Loop::IsValid does, the first vertex seen again and
 * where it was first seen), crossing edges by a sweep over the edges'
 * longitude intervals. Edges spanning the antimeridian or a pole take every
 * longitude and are tested against all edges.
 */
static int
check_big_ring(const pt_t *v, size_t n, const char *shown, mf_error_t *err)
{
    vert_ix_t *vs = mf_calloc(n, sizeof(*vs));
    edge_box_t *eb = mf_calloc(n, sizeof(*eb));
    size_t *wide = mf_calloc(n, sizeof(*wide));
    size_t nbox = 0, nwide = 0, dup_first = 0, dup_second = SIZE_MAX;
    uint64_t work = 0;
    int rc = 0;

    if (vs == NULL || eb == NULL || wide == NULL)
        abort();
    for (size_t i = 0; i < n; i++)
        vs[i] = (vert_ix_t){v[i], i};
    qsort(vs, n, sizeof(*vs), vert_ix_cmp);
    for (size_t k = 1; k < n; k++)
        if (same_pt(vs[k - 1].p, vs[k].p) && vs[k].i < dup_second) {
            /* Within a run of equal points the first is the earliest: vs[k] is a later occurrence. */
            size_t s = k;
            while (s > 0 && same_pt(vs[s - 1].p, vs[k].p))
                s--;
            dup_first = vs[s].i;
            dup_second = vs[k].i;
        }
    if (dup_second != SIZE_MAX) {
        rc = bad(err, "Loop is not valid: %s Duplicate vertices: %zu and %zu", shown, dup_first, dup_second);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        pt_t a = v[i], b = v[(i + 1) % n];
        double lo, hi;
        arc_lat_range(a, b, &lo, &hi);
        if (fabs(a.x - b.x) >= 180 || fabs(lo) >= 90 - 1e-9 || fabs(hi) >= 90 - 1e-9) {
            wide[nwide++] = i;
            continue;
        }
        eb[nbox++] = (edge_box_t){fmin(a.x, b.x) - 1e-9, fmax(a.x, b.x) + 1e-9, lo - 1e-9, hi + 1e-9, i};
    }
    qsort(eb, nbox, sizeof(*eb), edge_box_cmp);
    for (size_t x = 0; x < nbox; x++) {
        size_t i = eb[x].i;
        vec_t a = to_vec(v[i]), b = to_vec(v[(i + 1) % n]);
        for (size_t y = x + 1; y < nbox && eb[y].lnglo <= eb[x].lnghi; y++) {
            size_t j = eb[y].i;
            if (eb[y].latlo > eb[x].lathi || eb[y].lathi < eb[x].latlo)
                continue;
            size_t lo = i < j ? i : j, hi = i < j ? j : i;
            if (hi == lo + 1 || (lo == 0 && hi == n - 1))
                continue; /* adjacent edges share a vertex */
            if (arcs_cross(a, b, to_vec(v[j]), to_vec(v[(j + 1) % n]))) {
                rc = crossing_error(v, n, lo, hi, shown, err);
                goto out;
            }
            if (++work % (1u << 20) == 0 && (rc = mf_curop_check_current(err)) != 0)
                goto out;
        }
    }
    for (size_t w = 0; w < nwide; w++) {
        size_t i = wide[w];
        vec_t a = to_vec(v[i]), b = to_vec(v[(i + 1) % n]);
        for (size_t j = 0; j < n; j++) {
            size_t lo = i < j ? i : j, hi = i < j ? j : i;
            if (j == i || hi == lo + 1 || (lo == 0 && hi == n - 1))
                continue;
            if (arcs_cross(a, b, to_vec(v[j]), to_vec(v[(j + 1) % n]))) {
                rc = crossing_error(v, n, lo, hi, shown, err);
                goto out;
            }
            if (++work % (1u << 20) == 0 && (rc = mf_curop_check_current(err)) != 0)
                goto out;
        }
    }
out:
    free(vs);
    free(eb);
    free(wide);
    return rc;
}

/*
 * Whether an edge of ring a crosses an edge of ring b (proper crossings
 * only), by the same sweep as check_big_ring over both rings' edges: 1 yes,
 * 0 no, -1 with err when the operation is interrupted.
 */
static int
rings_cross(const mf_geo_t *g, range_t ra, range_t rb, mf_error_t *err)
{
    size_t n = ra.n + rb.n, nbox = 0, nwide = 0;
    edge_box_t *eb = mf_calloc(n, sizeof(*eb));
    size_t *wide = mf_calloc(n, sizeof(*wide));
    uint64_t work = 0;
    int rc = 0;

    if (eb == NULL || wide == NULL)
        abort();
    /* Edge k < ra.n is ring a's edge k, else ring b's edge k - ra.n. */
#define RING_EDGE(k, pa, pb)                                                                              \
    do {                                                                                                  \
        range_t r_ = (k) < ra.n ? ra : rb;                                                                \
        size_t e_ = (k) < ra.n ? (k) : (k) - ra.n;                                                        \
        (pa) = g->verts[r_.start + e_];                                                                   \
        (pb) = g->verts[r_.start + (e_ + 1) % r_.n];                                                      \
    } while (0)
    for (size_t k = 0; k < n; k++) {
        pt_t a, b;
        double lo, hi;
        RING_EDGE(k, a, b);
        arc_lat_range(a, b, &lo, &hi);
        if (fabs(a.x - b.x) >= 180 || fabs(lo) >= 90 - 1e-9 || fabs(hi) >= 90 - 1e-9)
            wide[nwide++] = k;
        else
            eb[nbox++] = (edge_box_t){fmin(a.x, b.x) - 1e-9, fmax(a.x, b.x) + 1e-9, lo - 1e-9, hi + 1e-9, k};
    }
    qsort(eb, nbox, sizeof(*eb), edge_box_cmp);
    for (size_t x = 0; x < nbox && rc == 0; x++) {
        pt_t a, b, c, d;
        RING_EDGE(eb[x].i, a, b);
        for (size_t y = x + 1; y < nbox && eb[y].lnglo <= eb[x].lnghi; y++) {
            if ((eb[x].i < ra.n) == (eb[y].i < ra.n) || eb[y].latlo > eb[x].lathi || eb[y].lathi < eb[x].latlo)
                continue;
            RING_EDGE(eb[y].i, c, d);
            if (arcs_cross(to_vec(a), to_vec(b), to_vec(c), to_vec(d))) {
                rc = 1;
                break;
            }
            if (++work % (1u << 20) == 0 && mf_curop_check_current(err) != 0) {
                rc = -1;
                break;
            }
        }
    }
    for (size_t w = 0; w < nwide && rc == 0; w++) {
        pt_t a, b, c, d;
        RING_EDGE(wide[w], a, b);
        size_t from = wide[w] < ra.n ? ra.n : 0, to = wide[w] < ra.n ? n : ra.n;
        for (size_t k = from; k < to; k++) {
            RING_EDGE(k, c, d);
            if (arcs_cross(to_vec(a), to_vec(b), to_vec(c), to_vec(d))) {
                rc = 1;
                break;
            }
            if (++work % (1u << 20) == 0 && mf_curop_check_current(err) != 0) {
                rc = -1;
                break;
            }
        }
    }
#undef RING_EDGE
    free(eb);
    free(wide);
    return rc;
}

/*
 * Checks a ring (closing vertex already dropped) for repeated vertices and
 * crossing edges: every pair for small rings (reporting the first pair in
 * order), check_big_ring's sweep past MF_GEO_SWEEP_VERTICES.
 */
#define MF_GEO_SWEEP_VERTICES 512
static int
check_ring(const mf_geo_t *g, range_t r, const char *shown, mf_error_t *err)
{
    const pt_t *v = g->verts + r.start;
    size_t n = r.n;
    uint64_t work = 0;

    if (n > MF_GEO_SWEEP_VERTICES)
        return check_big_ring(v, n, shown, err);
    for (size_t i = 0; i < n; i++) {
        vec_t a = to_vec(v[i]), b = to_vec(v[(i + 1) % n]);
        for (size_t j = i + 1; j < n; j++) {
            if (same_pt(v[i], v[j]))
                return bad(err, "Loop is not valid: %s Duplicate vertices: %zu and %zu", shown, i, j);
            if (j == i + 1 || (i == 0 && j == n - 1))
                continue; /* adjacent edges share a vertex */
            if (arcs_cross(a, b, to_vec(v[j]), to_vec(v[(j + 1) % n])))
                return crossing_error(v, n, i, j, shown, err);
            if (++work % (1u << 20) == 0 && mf_curop_check_current(err) != 0)
                return -1;
        }
    }
    return 0;
}

static bool ring_contains(const mf_geo_t *g, range_t r, vec_t p);
static bool ring_clockwise(const mf_geo_t *g, range_t r);

/* Polygon coordinates: [[shell], [hole], ...], appended as one polygon of g. */
static int
parse_polygon_coords(mf_geo_t *g, const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    range_t pr;
    char shown[256], first[256];

    if (v == NULL || v->value_type != BSON_TYPE_ARRAY || !iter_value(v, &it))
        return bad(err, "Polygon coordinates must be an array, instead got type %s", tname(v));
    pr.start = g->nrings;
    first[0] = '\0';
    while (bson_iter_next(&it)) {
        const bson_value_t *lv = bson_iter_value(&it);
        range_t r;
        shown[0] = '\0';
        if (err != NULL)
            mf_fmt_value(lv, shown, sizeof(shown)); /* only messages use it */
        if (parse_coords(g, lv, &r, err) != 0)
            return -1;
        if (r.n == 0)
            return bad(err, "Loop has no vertices: %s", shown);
        if (!same_pt(g->verts[r.start], g->verts[r.start + r.n - 1]))
            return bad(err, "Loop is not closed, first vertex does not equal last vertex: %s", shown);
        erase_dups(g, &r);
        r.n--;
        g->nverts--;
        if (r.n < 3)
            return bad(err, "Loop must have at least 3 different vertices, %zu unique vertices were provided: %s",
                       r.n, shown);
        if (!g->novalidate && check_ring(g, r, shown, err) != 0)
            return -1;
        if (g->nrings > pr.start && !g->novalidate) {
            range_t shell = g->rings[pr.start];
            /*
             * Every vertex of the hole inside the shell; past
             * MF_GEO_SWEEP_VERTICES on both sides, as S2Loop::Contains does:
             * no crossing edges (the sweep) and one vertex inside.
             */
            bool big = r.n > MF_GEO_SWEEP_VERTICES && shell.n > MF_GEO_SWEEP_VERTICES;
            int crossing = big ? rings_cross(g, shell, r, err) : 0;
            if (crossing < 0)
                return -1;
            for (size_t i = 0; i < (big ? 1 : r.n); i++) {
                if (crossing > 0 || !ring_contains(g, shell, to_vec(g->verts[r.start + i])))
                    return bad(err,
                               "Secondary loops not contained by first exterior loop - secondary loops must be "
                               "holes: %s first loop: %s",
                               shown, first);
            }
        } else {
            snprintf(first, sizeof(first), "%s", shown);
        }
        GROW(g->rings, g->nrings, g->caprings);
        g->rings[g->nrings++] = r;
    }
    pr.n = g->nrings - pr.start;
    if (pr.n == 0)
        return bad(err, "Polygon has no loops.");
    GROW(g->polys, g->npolys, g->cappolys);
    g->polys[g->npolys++] = pr;
    return 0;
}

static int
parse_line_coords(mf_geo_t *g, const bson_value_t *v, mf_error_t *err)
{
    range_t r;
    char shown[256];

    if (parse_coords(g, v, &r, err) != 0)
        return -1;
    erase_dups(g, &r);
    if (r.n < 2) {
        mf_fmt_value(v, shown, sizeof(shown));
        return bad(err, "GeoJSON LineString must have at least 2 vertices, instead got %zu vertices: %s", r.n, shown);
    }
    GROW(g->lines, g->nlines, g->caplines);
    g->lines[g->nlines++] = r;
    return 0;
}

enum gtype { GT_UNKNOWN, GT_POINT, GT_LINE, GT_POLYGON, GT_MPOINT, GT_MLINE, GT_MPOLYGON, GT_COLLECTION };

static enum gtype
geojson_type(const bson_t *obj)
{
    static const struct {
        const char *name;
        enum gtype t;
    } types[] = {{"Point", GT_POINT},          {"LineString", GT_LINE},
                 {"Polygon", GT_POLYGON},      {"MultiPoint", GT_MPOINT},
                 {"MultiLineString", GT_MLINE}, {"MultiPolygon", GT_MPOLYGON},
                 {"GeometryCollection", GT_COLLECTION}};
    bson_iter_t it;
    if (!bson_iter_init_find(&it, obj, "type") || !BSON_ITER_HOLDS_UTF8(&it))
        return GT_UNKNOWN;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(bson_iter_utf8(&it, NULL), types[i].name) == 0)
            return types[i].t;
    return GT_UNKNOWN;
}

/* The "crs" member (mongod's parseGeoJSONCRS); strict winding only for polygons. 0, 1 for strict winding, -1. */
static int
parse_crs(const bson_t *obj, bool allow_strict, mf_error_t *err)
{
    bson_iter_t it, ct, pt;
    if (!bson_iter_init_find(&it, obj, "crs"))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return bad(err, "GeoJSON CRS must be an object, instead got type %s", tname(bson_iter_value(&it)));
    bson_iter_recurse(&it, &ct);
    if (!bson_iter_find(&ct, "type") || !BSON_ITER_HOLDS_UTF8(&ct) || strcmp(bson_iter_utf8(&ct, NULL), "name") != 0)
        return bad(err, "GeoJSON CRS must have field \"type\": \"name\"");
    bson_iter_recurse(&it, &ct);
    if (!bson_iter_find(&ct, "properties") || !BSON_ITER_HOLDS_DOCUMENT(&ct))
        return bad(err, "CRS must have field \"properties\" which is an object, instead got type %s",
                   bson_iter_key(&ct) && bson_iter_type(&ct) ? tname(bson_iter_value(&ct)) : "missing");
    bson_iter_recurse(&ct, &pt);
    if (!bson_iter_find(&pt, "name") || !BSON_ITER_HOLDS_UTF8(&pt))
        return bad(err, "In CRS, \"properties.name\" must be a string, instead got type %s",
                   bson_iter_type(&pt) ? tname(bson_iter_value(&pt)) : "missing");
    const char *name = bson_iter_utf8(&pt, NULL);
    if (strcmp(name, "urn:ogc:def:crs:OGC:1.3:CRS84") == 0 || strcmp(name, "EPSG:4326") == 0)
        return 0;
    if (strcmp(name, "urn:x-mongodb:crs:strictwinding:EPSG:4326") == 0) {
        if (!allow_strict)
            return bad(err, "Strict winding order CRS is only supported by polygon");
        return 1;
    }
    return bad(err, "Unknown CRS name: %s", name);
}

/* The value of obj's field key, copied (shallow) into *store; NULL when absent. */
static const bson_value_t *
find_value(const bson_t *obj, const char *key, bson_value_t *store)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, obj, key))
        return NULL;
    *store = *bson_iter_value(&it);
    return store;
}

static int parse_geojson(mf_geo_t *g, const bson_t *obj, bool in_collection, mf_error_t *err);

static int
parse_multi(mf_geo_t *g, const bson_t *obj, enum gtype t, mf_error_t *err)
{
    const bson_value_t *c;
    bson_value_t cstore;
    bson_iter_t it;
    const char *what = t == GT_MLINE ? "MultiLineString" : "MultiPolygon";
    size_t before = t == GT_MLINE ? g->nlines : g->npolys;

    c = find_value(obj, "coordinates", &cstore);
    if (c == NULL || c->value_type != BSON_TYPE_ARRAY || !iter_value(c, &it))
        return bad(err, "%s coordinates must be an array, instead got type %s", what, tname(c));
    while (bson_iter_next(&it)) {
        bson_value_t e = *bson_iter_value(&it);
        if ((t == GT_MLINE ? parse_line_coords(g, &e, err) : parse_polygon_coords(g, &e, err)) != 0)
            return -1;
    }
    if ((t == GT_MLINE ? g->nlines : g->npolys) == before)
        return bad(err, "%s coordinates must have at least 1 element", what);
    return 0;
}

static int
parse_geojson(mf_geo_t *g, const bson_t *obj, bool in_collection, mf_error_t *err)
{
    enum gtype t = geojson_type(obj);
    const bson_value_t *c;
    bson_value_t cstore;
    char shown[256];

    if (t == GT_UNKNOWN) {
        mf_fmt_doc(obj, shown, sizeof(shown));
        return bad(err, "%s GeoJSON type: %s", in_collection ? "Unknown" : "unknown", shown);
    }
    int crs = parse_crs(obj, t == GT_POLYGON, err);
    if (crs < 0)
        return -1;
    if (crs == 1) {
        /* A big polygon (mongod's BigSimplePolygon): one loop, its winding decides the inside. */
        size_t before = g->npolys;
        c = find_value(obj, "coordinates", &cstore);
        if (c == NULL || c->value_type != BSON_TYPE_ARRAY)
            return bad(err, "Coordinates of polygon must be an array, instead got type %s", tname(c));
        bson_iter_t lt;
        size_t nloops = 0;
        iter_value(c, &lt);
        while (bson_iter_next(&lt))
            nloops++;
        if (nloops != 1) {
            mf_fmt_value(c, shown, sizeof(shown));
            return bad(err, "Only one simple loop is allowed in a big polygon, instead provided %zu loops: %s", nloops,
                       shown);
        }
        if (parse_polygon_coords(g, c, err) != 0)
            return -1;
        g->big = true;
        g->big_inverted = ring_clockwise(g, g->rings[g->polys[before].start]);
        return 0;
    }
    switch (t) {
    case GT_POINT: {
        pt_t p;
        c = find_value(obj, "coordinates", &cstore);
        if (parse_flat_point(c, true, &p, err) != 0 || check_lnglat(p, err) != 0)
            return -1;
        GROW(g->points, g->npoints, g->cappoints);
        g->points[g->npoints++] = add_vert(g, p);
        return 0;
    }
    case GT_LINE:
        c = find_value(obj, "coordinates", &cstore);
        return parse_line_coords(g, c, err);
    case GT_POLYGON:
        c = find_value(obj, "coordinates", &cstore);
        return parse_polygon_coords(g, c, err);
    case GT_MPOINT: {
        range_t r;
        c = find_value(obj, "coordinates", &cstore);
        if (parse_coords(g, c, &r, err) != 0)
            return -1;
        if (r.n == 0)
            return bad(err, "MultiPoint coordinates must have at least 1 element");
        for (size_t i = 0; i < r.n; i++) {
            GROW(g->points, g->npoints, g->cappoints);
            g->points[g->npoints++] = r.start + i;
        }
        return 0;
    }
    case GT_MLINE:
    case GT_MPOLYGON:
        return parse_multi(g, obj, t, err);
    case GT_COLLECTION: {
        bson_iter_t it;
        int i = 0;
        c = find_value(obj, "geometries", &cstore);
        if (c == NULL || c->value_type != BSON_TYPE_ARRAY || !iter_value(c, &it))
            return bad(err, "GeometryCollection geometries must be an array, instead got type %s", tname(c));
        while (bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            bson_t sub;
            shown[0] = '\0';
            if (err != NULL)
                mf_fmt_value(e, shown, sizeof(shown));
            if (e->value_type != BSON_TYPE_DOCUMENT)
                return bad(err, "Element %d of \"geometries\" must be an object, instead got type %s: %s", i,
                           tname(e), shown);
            if (!bson_init_static(&sub, e->value.v_doc.data, e->value.v_doc.data_len))
                return bad(err, "invalid BSON");
            enum gtype st = geojson_type(&sub);
            if (st == GT_UNKNOWN)
                return bad(err, "Unknown GeoJSON type: %s", shown);
            if (st == GT_COLLECTION)
                return bad(err, "GeometryCollections cannot be nested: %s", shown);
            if (parse_geojson(g, &sub, true, err) != 0)
                return -1;
            i++;
        }
        if (i == 0)
            return bad(err, "GeometryCollection geometries must have at least 1 element");
        return 0;
    }
    default:
        return bad(err, "unknown GeoJSON type");
    }
}

/* Whether v is a legacy point shape (an array, or an object whose first element is a number). */
static bool
looks_legacy(const bson_value_t *v)
{
    bson_iter_t it;
    if (v->value_type == BSON_TYPE_ARRAY)
        return true;
    return v->value_type == BSON_TYPE_DOCUMENT && iter_value(v, &it) && bson_iter_next(&it) &&
           mf_value_is_number(bson_iter_value(&it));
}

static int
parse_stored(const bson_value_t *v, bool validate, mf_geo_t **out, mf_error_t *err)
{
    mf_geo_t *g;
    char shown[256];

    *out = NULL;
    if (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT) {
        if (err != NULL)
            mf_fmt_value(v, shown, sizeof(shown));
        return bad(err, "geo element must be an array or object: %s", err != NULL ? shown : "");
    }
    g = geo_new();
    g->novalidate = !validate;
    if (looks_legacy(v)) {
        pt_t p;
        if (parse_flat_point(v, true, &p, err) != 0)
            goto err_free;
        g->flat = true;
        GROW(g->points, g->npoints, g->cappoints);
        g->points[g->npoints++] = add_vert(g, p);
    } else {
        bson_t obj;
        if (!bson_init_static(&obj, v->value.v_doc.data, v->value.v_doc.data_len) ||
            parse_geojson(g, &obj, false, err) != 0)
            goto err_free;
    }
    *out = g;
    return 0;
err_free:
    mf_geo_free(g);
    return -1;
}

int
mf_geo_parse_stored(const bson_value_t *v, mf_geo_t **out, mf_error_t *err)
{
    return parse_stored(v, true, out, err);
}

/* ---- spherical predicates ---- */

static bool
arcs_cross(vec_t a, vec_t b, vec_t c, vec_t d)
{
    vec_t n1 = cross(a, b), n2 = cross(c, d);
    double s1 = dot(n1, c), s2 = dot(n1, d), s3 = dot(n2, a), s4 = dot(n2, b);

    if (!((s1 > 0 && s2 < 0) || (s1 < 0 && s2 > 0)) || !((s3 > 0 && s4 < 0) || (s3 < 0 && s4 > 0)))
        return false;
    vec_t x = unit(cross(n1, n2));
    vec_t mid = {a.x + b.x, a.y + b.y, a.z + b.z};
    if (dot(x, mid) < 0) {
        x.x = -x.x;
        x.y = -x.y;
        x.z = -x.z;
    }
    /* x within arc AB (it is, by the sign tests, on AB's side); also within CD. */
    vec_t mid2 = {c.x + d.x, c.y + d.y, c.z + d.z};
    return dot(x, mid2) > 0 && dot(cross(a, x), n1) >= 0 && dot(cross(x, b), n1) >= 0;
}

/* Point in ring by gnomonic projection about the ring's centroid direction (see the file comment). */
static bool
ring_contains(const mf_geo_t *g, range_t r, vec_t p)
{
    const pt_t *v = g->verts + r.start;
    vec_t o = {0, 0, 0};
    bool inside = false;

    for (size_t i = 0; i < r.n; i++) {
        vec_t w = to_vec(v[i]);
        o.x += w.x;
        o.y += w.y;
        o.z += w.z;
    }
    o = unit(o);
    if (norm(o) < 0.5 || dot(p, o) <= 0)
        return false;
    /* A basis of the tangent plane at o. */
    vec_t ref = fabs(o.z) < 0.9 ? (vec_t){0, 0, 1} : (vec_t){1, 0, 0};
    vec_t e1 = unit(cross(ref, o)), e2 = cross(o, e1);
    double po = dot(p, o), px = dot(p, e1) / po, py = dot(p, e2) / po;
    for (size_t i = 0, j = r.n - 1; i < r.n; j = i++) {
        vec_t a = to_vec(v[i]), b = to_vec(v[j]);
        double ao = dot(a, o), bo = dot(b, o);
        if (ao <= 0 || bo <= 0)
            return false; /* a ring larger than the hemisphere about its centroid: not handled */
        double ax = dot(a, e1) / ao, ay = dot(a, e2) / ao, bx = dot(b, e1) / bo, by = dot(b, e2) / bo;
        if ((ay > py) != (by > py) && px < (bx - ax) * (py - ay) / (by - ay) + ax)
            inside = !inside;
    }
    return inside;
}

/*
 * Whether a ring runs clockwise seen from outside the sphere, in the
 * gnomonic projection about its centroid (whose basis e1, e2 = o x e1 is
 * right-handed with the outward normal): then, under strict winding, its
 * inside is the larger side.
 */
static bool
ring_clockwise(const mf_geo_t *g, range_t r)
{
    const pt_t *v = g->verts + r.start;
    vec_t o = {0, 0, 0};
    double area = 0;
    for (size_t i = 0; i < r.n; i++) {
        vec_t w = to_vec(v[i]);
        o.x += w.x;
        o.y += w.y;
        o.z += w.z;
    }
    o = unit(o);
    vec_t ref = fabs(o.z) < 0.9 ? (vec_t){0, 0, 1} : (vec_t){1, 0, 0};
    vec_t e1 = unit(cross(ref, o)), e2 = cross(o, e1);
    for (size_t i = 0, j = r.n - 1; i < r.n; j = i++) {
        vec_t a = to_vec(v[j]), b = to_vec(v[i]);
        double ao = dot(a, o), bo = dot(b, o);
        if (ao <= 0 || bo <= 0)
            return false;
        area += (dot(a, e1) / ao) * (dot(b, e2) / bo) - (dot(b, e1) / bo) * (dot(a, e2) / ao);
    }
    return area < 0;
}

static bool
poly_contains(const mf_geo_t *g, range_t poly, vec_t p)
{
    if (g->big_inverted)
        return !ring_contains(g, g->rings[poly.start], p);
    if (!ring_contains(g, g->rings[poly.start], p))
        return false;
    for (size_t h = 1; h < poly.n; h++)
        if (ring_contains(g, g->rings[poly.start + h], p))
            return false;
    return true;
}

static bool
any_poly_contains(const mf_geo_t *g, vec_t p)
{
    for (size_t i = 0; i < g->npolys; i++)
        if (poly_contains(g, g->polys[i], p))
            return true;
    return false;
}

/* Distance (radians) from p to arc ab. */
static double
arc_distance(vec_t p, vec_t a, vec_t b)
{
    vec_t n = cross(a, b);
    double nn = norm(n);
    if (nn > 1e-15) {
        n.x /= nn;
        n.y /= nn;
        n.z /= nn;
        double pn = dot(p, n);
        vec_t c = {p.x - pn * n.x, p.y - pn * n.y, p.z - pn * n.z};
        if (norm(c) > 1e-15) {
            c = unit(c);
            if (dot(cross(a, c), n) >= 0 && dot(cross(c, b), n) >= 0)
                return angle(p, c);
        }
    }
    double da = angle(p, a), db = angle(p, b);
    return da < db ? da : db;
}

/* Calls fn for every edge of g (lines and rings); stops when fn returns true. */
typedef bool (*edge_fn)(void *arg, vec_t a, vec_t b);

static bool
each_edge(const mf_geo_t *g, edge_fn fn, void *arg)
{
    for (size_t i = 0; i < g->nlines; i++) {
        range_t r = g->lines[i];
        for (size_t k = 0; k + 1 < r.n; k++)
            if (fn(arg, to_vec(g->verts[r.start + k]), to_vec(g->verts[r.start + k + 1])))
                return true;
    }
    for (size_t i = 0; i < g->nrings; i++) {
        range_t r = g->rings[i];
        for (size_t k = 0; k < r.n; k++)
            if (fn(arg, to_vec(g->verts[r.start + k]), to_vec(g->verts[r.start + (k + 1) % r.n])))
                return true;
    }
    return false;
}

typedef struct cross_arg {
    const mf_geo_t *other;
    vec_t a, b;
} cross_arg_t;

static bool
edge_crosses_inner(void *arg, vec_t c, vec_t d)
{
    cross_arg_t *x = arg;
    return arcs_cross(x->a, x->b, c, d);
}

static bool
edge_crosses_other(void *arg, vec_t a, vec_t b)
{
    cross_arg_t x = {((cross_arg_t *)arg)->other, a, b};
    return each_edge(x.other, edge_crosses_inner, &x);
}

static bool
edges_cross(const mf_geo_t *g, const mf_geo_t *h)
{
    cross_arg_t x = {h, {0, 0, 0}, {0, 0, 0}};
    return each_edge(g, edge_crosses_other, &x);
}

typedef struct near_arg {
    vec_t p;
    double best;
} near_arg_t;

static bool
edge_near(void *arg, vec_t a, vec_t b)
{
    near_arg_t *x = arg;
    double d = arc_distance(x->p, a, b);
    if (d < x->best)
        x->best = d;
    return false;
}

/* Distance (radians) from p to geometry g: 0 inside one of its polygons. */
static double
geo_distance(const mf_geo_t *g, vec_t p)
{
    near_arg_t x = {p, INFINITY};
    for (size_t i = 0; i < g->npoints; i++) {
        double d = angle(p, to_vec(g->verts[g->points[i]]));
        if (d < x.best)
            x.best = d;
    }
    if (any_poly_contains(g, p))
        return 0;
    each_edge(g, edge_near, &x);
    return x.best;
}

/* Every vertex of the geometry, as a vector, to fn (stops when fn returns false). */
static bool
all_verts(const mf_geo_t *g, bool (*fn)(void *arg, vec_t v), void *arg)
{
    for (size_t i = 0; i < g->nverts; i++)
        if (!fn(arg, to_vec(g->verts[i])))
            return false;
    return true;
}

static bool
vert_outside_region(void *arg, vec_t v)
{
    return !any_poly_contains(arg, v);
}

/*
 * Whether a point part lies in a spherical region for $geoWithin: inside one
 * of its polygons or on its boundary (a vertex or an edge, a hole's too), as
 * mongod's containsPoint adds poly.MayIntersect(the point's leaf cell) to
 * poly.Contains(point) "so that it contains edges/vertices"
 * (src/mongo/db/geo/geometry_container.cpp). The tolerance is the one
 * $geoIntersects uses for a point touching an edge.
 */
static bool
point_within_region(const mf_geo_t *region, vec_t p)
{
    return any_poly_contains(region, p) || geo_distance(region, p) < 1e-12;
}

/* $geoWithin a spherical polygon region. */
static bool
within_polys(const mf_geo_t *region, const mf_geo_t *g)
{
    /*
     * Point parts may touch the boundary; the vertices of lines must be
     * strictly inside. A polygon may share the region's boundary (the same
     * polygon, a district along its city's border), as S2Loop::Contains
     * settles shared vertices and edges by their wedges: its vertices and
     * the midpoints of its edges must be inside or on the boundary (a chord
     * between two boundary vertices of a concave region that runs outside
     * it has its midpoint outside), with no edge crossing (below).
     */
    for (size_t i = 0; i < g->npoints; i++)
        if (!point_within_region(region, to_vec(g->verts[g->points[i]])))
            return false;
    for (size_t i = 0; i < g->nlines; i++)
        for (size_t k = 0; k < g->lines[i].n; k++)
            if (!any_poly_contains(region, to_vec(g->verts[g->lines[i].start + k])))
                return false;
    for (size_t i = 0; i < g->nrings; i++) {
        range_t r = g->rings[i];
        for (size_t k = 0; k < r.n; k++) {
            vec_t a = to_vec(g->verts[r.start + k]), b = to_vec(g->verts[r.start + (k + 1) % r.n]);
            vec_t mid = unit((vec_t){a.x + b.x, a.y + b.y, a.z + b.z});
            if (!point_within_region(region, a) || !point_within_region(region, mid))
                return false;
        }
    }
    if (edges_cross(g, region))
        return false;
    /* A hole of the region inside one of g's polygons makes g stick out of the region. */
    for (size_t i = 0; i < region->npolys; i++) {
        range_t p = region->polys[i];
        for (size_t h = 1; h < p.n; h++) {
            range_t r = region->rings[p.start + h];
            for (size_t k = 0; k < r.n; k++)
                if (any_poly_contains(g, to_vec(region->verts[r.start + k])))
                    return false;
        }
    }
    return true;
}

static bool
intersects(const mf_geo_t *a, const mf_geo_t *b)
{
    if (!all_verts(b, vert_outside_region, (void *)a) || !all_verts(a, vert_outside_region, (void *)b))
        return true;
    if (edges_cross(a, b))
        return true;
    /* Points touching the other geometry (another point, or an edge). */
    for (int pass = 0; pass < 2; pass++) {
        const mf_geo_t *x = pass ? b : a, *y = pass ? a : b;
        for (size_t i = 0; i < x->npoints; i++)
            if (geo_distance(y, to_vec(x->verts[x->points[i]])) < 1e-12)
                return true;
    }
    return false;
}

/* ---- flat predicates ---- */

static bool
flat_poly_contains(const pt_t *v, size_t n, pt_t p)
{
    bool inside = false;
    for (size_t i = 0, j = n - 1; i < n; j = i++) {
        /* On an edge counts as inside (a 2d $polygon includes its boundary). */
        double cr = (v[j].x - v[i].x) * (p.y - v[i].y) - (v[j].y - v[i].y) * (p.x - v[i].x);
        if (fabs(cr) < 1e-12 && p.x >= fmin(v[i].x, v[j].x) && p.x <= fmax(v[i].x, v[j].x) &&
            p.y >= fmin(v[i].y, v[j].y) && p.y <= fmax(v[i].y, v[j].y))
            return true;
        if ((v[i].y > p.y) != (v[j].y > p.y) && p.x < (v[j].x - v[i].x) * (p.y - v[i].y) / (v[j].y - v[i].y) + v[i].x)
            inside = !inside;
    }
    return inside;
}

/* The one point of g if g is a single point (legacy or GeoJSON). */
static bool
single_point(const mf_geo_t *g, pt_t *p)
{
    if (g->npoints != 1 || g->nlines || g->npolys)
        return false;
    *p = g->verts[g->points[0]];
    return true;
}

/* ---- queries ---- */

void
mf_geo_query_free(mf_geo_query_t *q)
{
    if (q == NULL)
        return;
    mf_geo_free(q->geom);
    free(q->poly);
    free(q);
}

/* A query's $geometry: GeoJSON, or (an array / numeric object) a legacy point. */
static int
parse_query_geometry(const bson_value_t *v, mf_geo_t **out, mf_error_t *err)
{
    bson_t obj;
    mf_geo_t *g;

    *out = NULL;
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return bad(err, "Point must be an array or object, instead got type %s", tname(v));
    g = geo_new();
    if (looks_legacy(v)) {
        pt_t p;
        if (parse_flat_point(v, false, &p, err) != 0)
            goto err_free;
        g->flat = true;
        GROW(g->points, g->npoints, g->cappoints);
        g->points[g->npoints++] = add_vert(g, p);
    } else if (!bson_init_static(&obj, v->value.v_doc.data, v->value.v_doc.data_len) ||
               parse_geojson(g, &obj, false, err) != 0) {
        goto err_free;
    }
    *out = g;
    return 0;
err_free:
    mf_geo_free(g);
    return -1;
}

/* [[x, y], r]: $center and $centerSphere. */
static int
parse_circle(const bson_value_t *v, mf_geo_query_t *q, bool sphere, mf_error_t *err)
{
    bson_iter_t it;
    pt_t c;
    char shown[128];

    if (!iter_value(v, &it))
        return bad(err, "Point must be an array or object, instead got type %s", tname(v));
    const bson_value_t *e = bson_iter_next(&it) ? bson_iter_value(&it) : NULL;
    if (parse_flat_point(e, false, &c, err) != 0)
        return -1;
    if (sphere && check_lnglat(c, err) != 0)
        return -1;
    e = bson_iter_next(&it) ? bson_iter_value(&it) : NULL;
    if (e == NULL || !mf_value_is_number(e) || !(mf_value_as_double(e) >= 0)) {
        if (e)
            mf_fmt_value(e, shown, sizeof(shown));
        return bad(err, "Radius must be a non-negative number: %s", e ? shown : "");
    }
    q->r = mf_value_as_double(e);
    if (bson_iter_next(&it))
        return bad(err, "Only 2 fields allowed for circular region, but more were provided");
    q->cx = c.x;
    q->cy = c.y;
    return 0;
}

int
mf_geo_near_point(const bson_value_t *v, mf_geo_near_t *n, mf_error_t *err)
{
    pt_t p;

    if (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT)
        return bad(err, "Point must be an array or object, instead got type %s", tname(v));
    if (looks_legacy(v)) {
        if (parse_flat_point(v, false, &p, err) != 0)
            return -1;
        n->geojson = false;
    } else {
        bson_t obj;
        const bson_value_t *c;
        bson_value_t cstore;
        if (!bson_init_static(&obj, v->value.v_doc.data, v->value.v_doc.data_len))
            return bad(err, "invalid BSON");
        enum gtype t = geojson_type(&obj);
        if (t != GT_POINT) {
            static const char *names[] = {"unknown", "Point", "LineString", "Polygon", "MultiPoint",
                                          "MultiLineString", "MultiPolygon", "GeometryCollection"};
            return bad(err, "Expected geojson geometry with type Point, but got type %s", names[t]);
        }
        if (parse_crs(&obj, false, err) != 0)
            return -1;
        c = find_value(&obj, "coordinates", &cstore);
        if (parse_flat_point(c, true, &p, err) != 0 || check_lnglat(p, err) != 0)
            return -1;
        n->geojson = true;
        n->spherical = true;
    }
    n->x = p.x;
    n->y = p.y;
    return 0;
}

/* [x, y, maxDistance]: the legacy point-with-distance form. */
static bool
point_with_max(const bson_value_t *v, pt_t *p, double *max)
{
    bson_iter_t it;
    double d[3];
    int n = 0;
    if (!iter_value(v, &it))
        return false;
    while (bson_iter_next(&it)) {
        if (n == 3 || !mf_value_is_number(bson_iter_value(&it)))
            return false;
        d[n++] = mf_value_as_double(bson_iter_value(&it));
    }
    if (n != 3 || !isfinite(d[0]) || !isfinite(d[1]))
        return false;
    p->x = d[0];
    p->y = d[1];
    *max = d[2];
    return true;
}

/* The legacy form's siblings ({$near: [x, y], $maxDistance: d}): mongod's parseLegacyQuery codes. */
static int
near_siblings(mf_geo_near_t *n, const bson_value_t *opdoc, mf_error_t *err)
{
    bson_iter_t it;
    if (opdoc == NULL || !iter_value(opdoc, &it))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(k, "$near") == 0 || strcmp(k, "$nearSphere") == 0 || strcmp(k, "$uniqueDocs") == 0)
            continue;
        if (strcmp(k, "$minDistance") == 0 || strcmp(k, "$maxDistance") == 0) {
            bool is_min = k[2] == 'i';
            if (!mf_value_is_number(v))
                return mf_err_set(err, is_min ? MF_E_Location16893 : MF_E_Location16895, "%s must be a number", k);
            double d = mf_value_as_double(v);
            if (!(d >= 0))
                return mf_err_set(err, is_min ? MF_E_Location16894 : MF_E_Location16896, "%s must be non-negative", k);
            if (is_min)
                n->min = d;
            else
                n->max = d;
            continue;
        }
        return mf_err_set(err, MF_E_Location34413, "invalid argument in geo near query: %s", k);
    }
    return 0;
}

static int
parse_near(mf_geo_query_t *q, const bson_value_t *operand, const bson_value_t *opdoc, mf_error_t *err)
{
    bson_iter_t it;
    mf_geo_near_t *n = &q->near;
    char shown[300];

    n->min = 0;
    n->max = -1;
    if (operand->value_type != BSON_TYPE_ARRAY && operand->value_type != BSON_TYPE_DOCUMENT)
        return bad(err, "geo near query argument is not an object");
    mf_fmt_value(operand, shown, sizeof(shown));
    iter_value(operand, &it);
    if (operand->value_type == BSON_TYPE_ARRAY || !bson_iter_find(&it, "$geometry")) {
        /* Legacy: [x, y], {x, y} or [x, y, maxDistance], distances beside the operator. */
        pt_t p;
        double max;
        if (parse_flat_point(operand, false, &p, NULL) == 0) {
            n->x = p.x;
            n->y = p.y;
        } else if (point_with_max(operand, &p, &max)) {
            if (!(max >= 0))
                return mf_err_set(err, MF_E_Location18522, "max distance must be non-negative");
            n->x = p.x;
            n->y = p.y;
            n->max = max;
        } else {
            return bad(err, "invalid point provided to geo near query: %s", shown);
        }
        n->geojson = false;
        if (near_siblings(n, opdoc, err) != 0)
            return -1;
        n->spherical = q->op == MF_GEOQ_NEARSPHERE;
        if (n->spherical && check_lnglat((pt_t){n->x, n->y}, NULL) != 0)
            return bad(err, "Legacy point is out of bounds for spherical query");
        if (n->spherical && n->max > M_PI)
            n->max = M_PI;
        return 0;
    }
    /* {$geometry: <GeoJSON point>, $maxDistance, $minDistance} alone in its operator document. */
    if (opdoc != NULL && iter_value(opdoc, &it)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "$near") != 0 && strcmp(k, "$nearSphere") != 0) {
                char extra[200];
                mf_fmt_value(bson_iter_value(&it), extra, sizeof(extra));
                return bad(err, "geo near accepts just one argument when querying for a GeoJSON point. Extra field "
                           "found: %s: %s", k, extra);
            }
        }
    }
    bool have_geom = false;
    iter_value(operand, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(k, "$geometry") == 0) {
            char gshown[300];
            mf_error_t why;
            if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
                continue;
            mf_fmt_value(v, gshown, sizeof(gshown));
            mf_err_clear(&why);
            if (mf_geo_near_point(v, n, &why) != 0)
                return bad(err, "invalid point in geo near query $geometry argument: %s  %s", gshown, why.msg);
            if (!n->geojson)
                return bad(err, "$near requires geojson point, given %s", gshown);
            have_geom = true;
        } else if (strcmp(k, "$maxDistance") == 0 || strcmp(k, "$minDistance") == 0) {
            double d;
            if (!mf_value_is_number(v))
                return bad(err, "%s must be a number", k);
            d = mf_value_as_double(v);
            if (!(d >= 0)) /* Infinity is a distance (no bound), as mongod's parseNewQuery; NaN is not */
                return bad(err, "%s must be non-negative", k);
            if (k[2] == 'i')
                n->min = d;
            else
                n->max = d;
        } else {
            return bad(err, "invalid argument in geo near query: %s", k);
        }
    }
    if (!have_geom)
        return bad(err, "$geometry is required for geo near query");
    n->spherical = true;
    return 0;
}

mf_geo_query_t *
mf_geo_query_parse(mf_geoq_op_t op, const bson_value_t *operand, const bson_value_t *opdoc, mf_error_t *err)
{
    mf_geo_query_t *q = mf_calloc(1, sizeof(*q));
    bson_iter_t it;
    char shown[300];

    if (q == NULL)
        abort();
    q->op = op;
    if (op == MF_GEOQ_NEAR || op == MF_GEOQ_NEARSPHERE) {
        q->shape = SH_NEAR;
        if (parse_near(q, operand, opdoc, err) != 0)
            goto err_free;
        return q;
    }
    /* $within (legacy) is $geoWithin without the one-shape rule. */
    bool one_shape = op == MF_GEOQ_WITHIN;
    if (op == MF_GEOQ_WITHIN_LEGACY)
        q->op = op = MF_GEOQ_WITHIN;
    const char *opname = op == MF_GEOQ_WITHIN ? "$geoWithin" : "$geoIntersects";
    if (operand->value_type != BSON_TYPE_DOCUMENT || !iter_value(operand, &it)) {
        bad(err, "%s must be an object", opname);
        goto err_free;
    }
    mf_fmt_value(operand, shown, sizeof(shown));
    /*
     * As mongod 8.0's GeoExpression::parseQuery: the deprecated $uniqueDocs
     * is ignored; $geoWithin refuses anything after its shape ("doesn't
     * accept multiple shapes", a $uniqueDocs after it too); $within and
     * $geoIntersects take the last shape. What the shape supports is
     * checked once it is known (parseFrom).
     */
    bool have_shape = false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_value_t v = *bson_iter_value(&it);
        bool geometry = strcmp(k, "$geometry") == 0;
        if (have_shape && one_shape) {
            bad(err, "$geoWithin doesn't accept multiple shapes $geoWithin: %s", shown);
            goto err_free;
        }
        if (strcmp(k, "$uniqueDocs") == 0)
            continue;
        if (!geometry && strcmp(k, "$box") != 0 && strcmp(k, "$polygon") != 0 && strcmp(k, "$center") != 0 &&
            strcmp(k, "$centerSphere") != 0) {
            char vs[200];
            mf_fmt_value(&v, vs, sizeof(vs));
            bad(err, "unknown geo specifier: %s: %s", k, vs);
            goto err_free;
        }
        /* A later shape replaces an earlier one ($within, $geoIntersects). */
        mf_geo_free(q->geom);
        q->geom = NULL;
        free(q->poly);
        q->poly = NULL;
        q->npoly = 0;
        have_shape = true;
        if (geometry) {
            q->shape = SH_GEOMETRY;
            if (parse_query_geometry(&v, &q->geom, err) != 0)
                goto err_free;
        } else if (strcmp(k, "$box") == 0) {
            bson_iter_t bt;
            pt_t a, b;
            q->shape = SH_BOX;
            if (!iter_value(&v, &bt)) {
                bad(err, "Point must be an array or object, instead got type %s", tname(&v));
                goto err_free;
            }
            const bson_value_t *e = bson_iter_next(&bt) ? bson_iter_value(&bt) : NULL;
            if (parse_flat_point(e, false, &a, err) != 0)
                goto err_free;
            e = bson_iter_next(&bt) ? bson_iter_value(&bt) : NULL;
            if (parse_flat_point(e, false, &b, err) != 0)
                goto err_free;
            q->box[0] = fmin(a.x, b.x);
            q->box[1] = fmin(a.y, b.y);
            q->box[2] = fmax(a.x, b.x);
            q->box[3] = fmax(a.y, b.y);
        } else if (strcmp(k, "$polygon") == 0) {
            bson_iter_t pt;
            size_t cap = 0;
            q->shape = SH_POLYGON;
            if (!iter_value(&v, &pt)) {
                bad(err, "Point must be an array or object, instead got type %s", tname(&v));
                goto err_free;
            }
            while (bson_iter_next(&pt)) {
                pt_t p;
                if (parse_flat_point(bson_iter_value(&pt), false, &p, err) != 0)
                    goto err_free;
                GROW(q->poly, q->npoly, cap);
                q->poly[q->npoly++] = p;
            }
            if (q->npoly < 3) {
                bad(err, "Polygon must have at least 3 points, instead got %zu vertices", q->npoly);
                goto err_free;
            }
        } else {
            bool sphere = strcmp(k, "$centerSphere") == 0;
            q->shape = sphere ? SH_CENTERSPHERE : SH_CENTER;
            if (parse_circle(&v, q, sphere, err) != 0)
                goto err_free;
        }
    }
    if (!have_shape) {
        bad(err, "geo query doesn't have any geometry");
        goto err_free;
    }
    if (op == MF_GEOQ_INTERSECTS && q->shape != SH_GEOMETRY) {
        bad(err, "$geoIntersect not supported with provided geometry: { $geoIntersects: %s }", shown);
        goto err_free;
    }
    if (op == MF_GEOQ_WITHIN && q->shape == SH_GEOMETRY &&
        (q->geom->flat || q->geom->npolys == 0 || q->geom->npoints || q->geom->nlines)) {
        bad(err, "$within not supported with provided geometry: { $geoWithin: %s }", shown);
        goto err_free;
    }
    return q;
err_free:
    mf_geo_query_free(q);
    return NULL;
}

const mf_geo_near_t *
mf_geo_query_near(const mf_geo_query_t *q)
{
    return q->shape == SH_NEAR ? &q->near : NULL;
}

static bool
geo_near_distance(const mf_geo_near_t *n, const mf_geo_t *g, double *dist)
{
    pt_t p;
    if (!n->spherical) {
        if (!single_point(g, &p))
            return false;
        *dist = hypot(p.x - n->x, p.y - n->y);
        return true;
    }
    if (g->flat && check_lnglat(g->verts[0], NULL) != 0)
        return false;
    double d = geo_distance(g, to_vec((pt_t){n->x, n->y}));
    *dist = n->geojson ? d * MF_GEO_EARTH_RADIUS_M : d;
    return true;
}

bool
mf_geo_near_distance(const mf_geo_near_t *n, const bson_value_t *v, double *dist)
{
    mf_geo_t *g;
    bool ok;
    if (parse_stored(v, false, &g, NULL) != 0)
        return false;
    ok = geo_near_distance(n, g, dist);
    mf_geo_free(g);
    return ok;
}

bool
mf_geo_query_match(const mf_geo_query_t *q, const bson_value_t *v)
{
    mf_geo_t *g;
    pt_t p;
    bool ok = false;

    if (v == NULL || parse_stored(v, false, &g, NULL) != 0)
        return false;
    /* mongod's GeoMatchExpression: "Never match big polygon" (a stored strict-winding one). */
    if (g->big && q->shape != SH_NEAR) {
        mf_geo_free(g);
        return false;
    }
    switch (q->shape) {
    case SH_GEOMETRY:
        if (q->op == MF_GEOQ_WITHIN) {
            ok = within_polys(q->geom, g);
        } else {
            /* A legacy point in the query or the document is read as lng/lat. */
            ok = intersects(q->geom, g);
        }
        break;
    case SH_BOX:
        ok = single_point(g, &p) && p.x >= q->box[0] && p.x <= q->box[2] && p.y >= q->box[1] && p.y <= q->box[3];
        break;
    case SH_POLYGON:
        ok = single_point(g, &p) && flat_poly_contains(q->poly, q->npoly, p);
        break;
    case SH_CENTER:
        ok = single_point(g, &p) && hypot(p.x - q->cx, p.y - q->cy) <= q->r;
        break;
    case SH_CENTERSPHERE: {
        vec_t c = to_vec((pt_t){q->cx, q->cy});
        ok = g->nverts > 0;
        for (size_t i = 0; ok && i < g->nverts; i++)
            ok = check_lnglat(g->verts[i], NULL) == 0 && angle(c, to_vec(g->verts[i])) <= q->r;
        break;
    }
    case SH_NEAR: {
        double d;
        ok = geo_near_distance(&q->near, g, &d) && d >= q->near.min && (q->near.max < 0 || d <= q->near.max);
        break;
    }
    }
    mf_geo_free(g);
    return ok;
}

/* ---- index key checks ---- */

/* An array whose first element is a number: one legacy pair, not a list of locations. */
static bool
looks_legacy_pair(const bson_value_t *v)
{
    bson_iter_t it;
    return iter_value(v, &it) && bson_iter_next(&it) && mf_value_is_number(bson_iter_value(&it));
}

typedef struct ix_arg {
    mf_geo_ix_t kind;
    double min, max;
    const bson_t *doc;
    bool present;
    int rc;
    mf_error_t *err;
} ix_arg_t;

static bool
ix_visit(void *arg, const bson_value_t *v, int32_t pos)
{
    ix_arg_t *x = arg;
    char shown[200];
    (void)pos;
    if (v == NULL || v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_UNDEFINED)
        return false;
    /* An empty array holds no location: a 2dsphere index leaves the document out, as a missing field (mongod). */
    if (x->kind == MF_GEO_IX_2DSPHERE && v->value_type == BSON_TYPE_ARRAY && v->value.v_doc.data_len <= 5)
        return false;
    if (v->value_type == BSON_TYPE_ARRAY && !looks_legacy_pair(v) && v->value.v_doc.data_len > 5) {
        /* An array of locations: each element is one (mongod indexes them all). */
        bson_iter_t it;
        iter_value(v, &it);
        while (bson_iter_next(&it))
            if (ix_visit(arg, bson_iter_value(&it), pos))
                return true;
        return false;
    }
    x->present = true;
    if (x->kind == MF_GEO_IX_2DSPHERE) {
        mf_geo_t *g;
        mf_error_t why;
        mf_err_clear(&why);
        if (mf_geo_parse_stored(v, &g, &why) != 0) {
            mf_fmt_doc(x->doc, shown, sizeof(shown));
            x->rc = mf_err_set(x->err, MF_E_Location16755, "Can't extract geo keys: %s  %s", shown, why.msg);
            return true;
        }
        if (g->flat && check_lnglat(g->verts[0], NULL) != 0) {
            /*
             * A legacy pair is parsed flat, with no range check; mongod's
             * S2GetKeysForElement then cannot project it (a lat/lng swap,
             * {latitude, longitude} in that order ...).
             */
            char val[128];
            mf_geo_free(g);
            mf_fmt_value(v, val, sizeof(val));
            mf_fmt_doc(x->doc, shown, sizeof(shown));
            x->rc = mf_err_set(x->err, MF_E_Location16755,
                               "Can't extract geo keys: %s  can't project geometry into spherical CRS: %s", shown, val);
            return true;
        }
        mf_geo_free(g);
        return false;
    }
    /* 2d: a legacy pair (an array or object of two numbers). */
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT) {
        x->rc = mf_err_set(x->err, MF_E_Location16804, "location object expected, location array not in correct format");
        return true;
    }
    iter_value(v, &it);
    if (!bson_iter_next(&it)) {
        mf_fmt_doc(x->doc, shown, sizeof(shown));
        x->rc = mf_err_set(x->err, MF_E_Location13067, "geo field is empty :: caused by :: %s", shown);
        return true;
    }
    const bson_value_t *a = bson_iter_value(&it);
    bson_value_t xa = *a;
    if (!bson_iter_next(&it)) {
        mf_fmt_doc(x->doc, shown, sizeof(shown));
        x->rc = mf_err_set(x->err, MF_E_Location13068, "geo field only has 1 element :: caused by :: %s", shown);
        return true;
    }
    const bson_value_t *b = bson_iter_value(&it);
    if (!mf_value_is_number(&xa) || !mf_value_is_number(b)) {
        mf_fmt_doc(x->doc, shown, sizeof(shown));
        x->rc = mf_err_set(x->err, MF_E_Location13026,
                           "geo values must be 'legacy coordinate pairs' for 2d indexes :: caused by :: %s", shown);
        return true;
    }
    double px = mf_value_as_double(&xa), py = mf_value_as_double(b);
    if (!(px <= x->max && px >= x->min && py <= x->max && py >= x->min)) {
        mf_fmt_doc(x->doc, shown, sizeof(shown));
        x->rc = mf_err_set(x->err, MF_E_Location13027, "point not in interval of [ %g, %g ] :: caused by :: %s",
                           x->min, x->max, shown);
        return true;
    }
    return false;
}

int
mf_geo_index_check(mf_geo_ix_t kind, const bson_t *doc, const char *path, double min, double max, bool *present,
                   mf_error_t *err)
{
    ix_arg_t x = {kind, min, max, doc, false, 0, err};
    mf_path_walk(doc, path, ix_visit, &x);
    *present = x.present;
    return x.rc;
}

/* ---- near over a document ---- */

typedef struct near_doc_arg {
    const mf_geo_near_t *n;
    bool found;
    double best;
    bson_value_t loc;
} near_doc_arg_t;

static bool
near_visit(void *arg, const bson_value_t *v, int32_t pos)
{
    near_doc_arg_t *x = arg;
    double d;
    if (v == NULL)
        return false;
    if (mf_geo_near_distance(x->n, v, &d)) {
        if (!x->found || d < x->best) {
            x->found = true;
            x->best = d;
            x->loc = *v;
        }
        return false;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        iter_value(v, &it);
        while (bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            if (e->value_type == BSON_TYPE_ARRAY || e->value_type == BSON_TYPE_DOCUMENT)
                near_visit(arg, e, pos);
        }
    }
    return false;
}

bool
mf_geo_near_doc(const mf_geo_near_t *n, const bson_t *doc, const char *path, double *dist, bson_value_t *loc)
{
    near_doc_arg_t x = {n, false, 0, {0}};
    mf_path_walk(doc, path, near_visit, &x);
    if (x.found) {
        *dist = x.best;
        if (loc)
            *loc = x.loc;
    }
    return x.found;
}

/* ---- filters ---- */

static bool
has_near(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    if (depth > 200 || !bson_iter_init_from_data(&it, data, len))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$near") == 0 || strcmp(k, "$nearSphere") == 0 || strcmp(k, "$geoNear") == 0)
            return true;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            const bson_value_t *v = bson_iter_value(&it);
            if (has_near(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1))
                return true;
        }
    }
    return false;
}

bool
mf_geo_filter_has_near(const bson_t *filter)
{
    return filter != NULL && has_near(bson_get_data(filter), filter->len, 0);
}

/* ---- cell coverings (2dsphere index keys and bounds) ----
 *
 * Two grids over longitude/latitude: fine cells of 1 x 1 degree (ids
 * MF_GEO_FINE_BASE + row * 360 + col) and coarse cells of 30 x 30 degrees
 * (ids row * 12 + col). A stored geometry is keyed by the fine cells of its
 * bounding box when there are at most MF_GEO_MAX_FINE of them, else by the
 * coarse cells of its box. A query region is covered by the fine cells of
 * its box (one id range per row) plus the coarse cells of its box, so any
 * geometry sharing a point with the region shares a cell with the
 * covering, whichever grid keyed it. Boxes are conservative: arcs' latitude
 * extremes are included, a geometry crossing the antimeridian, touching
 * longitude +-180 or holding a pole takes every longitude.
 */
#define MF_GEO_FINE_BASE 100000
#define MF_GEO_MAX_FINE 64

typedef struct box {
    double latlo, lathi, lnglo, lnghi;
    bool full_lng;
} box_t;

static void
box_init(box_t *b)
{
    b->latlo = INFINITY;
    b->lathi = -INFINITY;
    b->lnglo = INFINITY;
    b->lnghi = -INFINITY;
    b->full_lng = false;
}

static void
box_pt(box_t *b, pt_t p)
{
    b->latlo = fmin(b->latlo, p.y);
    b->lathi = fmax(b->lathi, p.y);
    b->lnglo = fmin(b->lnglo, p.x);
    b->lnghi = fmax(b->lnghi, p.x);
    if (fabs(p.y) >= 90 - 1e-9)
        b->full_lng = true;
}

static double
vec_lat(vec_t v)
{
    return asin(fmax(-1.0, fmin(1.0, v.z))) / kDeg;
}

/* The latitude extremes of arc ab (the points of its great circle nearest the poles, when on the arc). */
static void
box_arc(box_t *b, pt_t pa, pt_t pb)
{
    vec_t a = to_vec(pa), bb = to_vec(pb), n = cross(a, bb);
    if (fabs(pa.x - pb.x) > 180)
        b->full_lng = true;
    if (norm(n) < 1e-15)
        return;
    n = unit(n);
    for (int s = -1; s <= 1; s += 2) {
        vec_t z = {0, 0, s};
        double zn = dot(z, n);
        vec_t m = {z.x - zn * n.x, z.y - zn * n.y, z.z - zn * n.z};
        if (norm(m) < 1e-15)
            continue;
        m = unit(m);
        if (dot(cross(a, m), n) >= 0 && dot(cross(m, bb), n) >= 0) {
            double lat = vec_lat(m);
            b->latlo = fmin(b->latlo, lat);
            b->lathi = fmax(b->lathi, lat);
        }
    }
}

/* The latitude range of arc ab (its ends and the extremes box_arc finds), for check_big_ring. */
static void
arc_lat_range(pt_t pa, pt_t pb, double *lo, double *hi)
{
    box_t b;
    box_init(&b);
    box_pt(&b, pa);
    box_pt(&b, pb);
    box_arc(&b, pa, pb);
    *lo = b.latlo;
    *hi = b.lathi;
}

static void
box_geo(const mf_geo_t *g, box_t *b)
{
    static const vec_t north = {0, 0, 1}, south = {0, 0, -1};
    if (g->big_inverted) {
        b->latlo = -90;
        b->lathi = 90;
        b->full_lng = true;
        return;
    }
    for (size_t i = 0; i < g->nverts; i++)
        box_pt(b, g->verts[i]);
    for (size_t i = 0; i < g->nlines; i++)
        for (size_t k = 0; k + 1 < g->lines[i].n; k++)
            box_arc(b, g->verts[g->lines[i].start + k], g->verts[g->lines[i].start + k + 1]);
    for (size_t i = 0; i < g->nrings; i++) {
        range_t r = g->rings[i];
        for (size_t k = 0; k < r.n; k++)
            box_arc(b, g->verts[r.start + k], g->verts[r.start + (k + 1) % r.n]);
    }
    if (any_poly_contains(g, north)) {
        b->lathi = 90;
        b->full_lng = true;
    }
    if (any_poly_contains(g, south)) {
        b->latlo = -90;
        b->full_lng = true;
    }
}

/* A cap of radius r (radians) about c. */
static void
box_cap(box_t *b, pt_t c, double r)
{
    double rd = r / kDeg;
    b->latlo = c.y - rd;
    b->lathi = c.y + rd;
    if (b->latlo <= -90 || b->lathi >= 90 || rd >= 90) {
        b->full_lng = true;
        b->latlo = fmax(b->latlo, -90);
        b->lathi = fmin(b->lathi, 90);
        return;
    }
    double s = sin(r) / cos(c.y * kDeg);
    if (s >= 1) {
        b->full_lng = true;
        return;
    }
    double dl = asin(s) / kDeg;
    b->lnglo = c.x - dl;
    b->lnghi = c.x + dl;
}

/* Row / column ranges of box b in a grid of `size`-degree cells. */
static void
box_grid(const box_t *b, double size, int *r0, int *r1, int *c0, int *c1)
{
    const double eps = 1e-7;
    int rows = (int)(180 / size), cols = (int)(360 / size);
    bool full = b->full_lng || b->lnglo <= -180 + eps || b->lnghi >= 180 - eps;
    *r0 = (int)floor((b->latlo - eps + 90) / size);
    *r1 = (int)floor((b->lathi + eps + 90) / size);
    *c0 = full ? 0 : (int)floor((b->lnglo - eps + 180) / size);
    *c1 = full ? cols - 1 : (int)floor((b->lnghi + eps + 180) / size);
    *r0 = *r0 < 0 ? 0 : *r0 > rows - 1 ? rows - 1 : *r0;
    *r1 = *r1 < 0 ? 0 : *r1 > rows - 1 ? rows - 1 : *r1;
    *c0 = *c0 < 0 ? 0 : *c0 > cols - 1 ? cols - 1 : *c0;
    *c1 = *c1 < 0 ? 0 : *c1 > cols - 1 ? cols - 1 : *c1;
}

static void
cells_push(int64_t **cells, size_t *n, size_t *cap, int64_t id)
{
    GROW(*cells, *n, *cap);
    (*cells)[(*n)++] = id;
}

/* The cells keying one stored geometry (appended). */
static void
geo_cells(const mf_geo_t *g, int64_t **cells, size_t *n, size_t *cap)
{
    box_t b;
    int r0, r1, c0, c1;
    box_init(&b);
    box_geo(g, &b);
    box_grid(&b, 1.0, &r0, &r1, &c0, &c1);
    if ((int64_t)(r1 - r0 + 1) * (c1 - c0 + 1) <= MF_GEO_MAX_FINE) {
        for (int r = r0; r <= r1; r++)
            for (int c = c0; c <= c1; c++)
                cells_push(cells, n, cap, MF_GEO_FINE_BASE + r * 360 + c);
        return;
    }
    box_grid(&b, 30.0, &r0, &r1, &c0, &c1);
    for (int r = r0; r <= r1; r++)
        for (int c = c0; c <= c1; c++)
            cells_push(cells, n, cap, r * 12 + c);
}

typedef struct cells_arg {
    int64_t *cells;
    size_t n, cap;
} cells_arg_t;

static bool
cells_visit(void *arg, const bson_value_t *v, int32_t pos)
{
    cells_arg_t *x = arg;
    mf_geo_t *g;
    if (v == NULL)
        return false;
    if (v->value_type == BSON_TYPE_ARRAY && !looks_legacy_pair(v)) {
        bson_iter_t it;
        iter_value(v, &it);
        while (bson_iter_next(&it))
            cells_visit(arg, bson_iter_value(&it), pos);
        return false;
    }
    if (parse_stored(v, false, &g, NULL) == 0) {
        geo_cells(g, &x->cells, &x->n, &x->cap);
        mf_geo_free(g);
    }
    return false;
}

static int
i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

size_t
mf_geo_doc_cells(const bson_t *doc, const char *path, int64_t **cells)
{
    cells_arg_t x = {NULL, 0, 0};
    size_t w = 0;
    mf_path_walk(doc, path, cells_visit, &x);
    if (x.n > 1)
        qsort(x.cells, x.n, sizeof(*x.cells), i64_cmp);
    for (size_t i = 0; i < x.n; i++)
        if (w == 0 || x.cells[w - 1] != x.cells[i])
            x.cells[w++] = x.cells[i];
    *cells = x.cells;
    return w;
}

int
mf_geo_cover(const bson_value_t *opdoc, mf_geo_cell_range_t **out, size_t *nout)
{
    bson_iter_t it;
    mf_geo_query_t *q = NULL;
    box_t b;
    size_t n = 0, cap = 0;
    mf_geo_cell_range_t *r = NULL;
    int r0, r1, c0, c1;

    *out = NULL;
    *nout = 0;
    if (opdoc->value_type != BSON_TYPE_DOCUMENT || !iter_value(opdoc, &it))
        return -1;
    while (q == NULL && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$geoWithin") == 0 || strcmp(k, "$within") == 0)
            q = mf_geo_query_parse(k[1] == 'w' ? MF_GEOQ_WITHIN_LEGACY : MF_GEOQ_WITHIN, bson_iter_value(&it), NULL,
                                   NULL);
        else if (strcmp(k, "$geoIntersects") == 0)
            q = mf_geo_query_parse(MF_GEOQ_INTERSECTS, bson_iter_value(&it), NULL, NULL);
    }
    if (q == NULL)
        return -1;
    box_init(&b);
    if (q->shape == SH_GEOMETRY) {
        box_geo(q->geom, &b);
    } else if (q->shape == SH_CENTERSPHERE) {
        box_cap(&b, (pt_t){q->cx, q->cy}, q->r);
    } else {
        mf_geo_query_free(q);
        return -1; /* flat shapes: no spherical covering */
    }
    mf_geo_query_free(q);
    if (!(b.latlo <= b.lathi))
        return -1;
    /* Coarse cells first (smaller ids), then one fine range per row: sorted and disjoint. */
    box_grid(&b, 30.0, &r0, &r1, &c0, &c1);
    for (int row = r0; row <= r1; row++) {
        for (int c = c0; c <= c1; c++) {
            GROW(r, n, cap);
            r[n].lo = r[n].hi = row * 12 + c;
            n++;
        }
    }
    box_grid(&b, 1.0, &r0, &r1, &c0, &c1);
    for (int row = r0; row <= r1; row++) {
        GROW(r, n, cap);
        r[n].lo = MF_GEO_FINE_BASE + row * 360 + c0;
        r[n].hi = MF_GEO_FINE_BASE + row * 360 + c1;
        n++;
    }
    *out = r;
    *nout = n;
    return 0;
}

/* ---- 2d cells ----
 *
 * A 2d index's points are keyed by a 1024 x 1024 grid over its [min, max]
 * square (id row * 1024 + col). A query region's covering is the rows of
 * its bounding box, one id range each; the same floor-and-clamp maps both,
 * so a point inside the box always falls in a covered cell.
 */
#define MF_GEO_2D_GRID 1024

static int
grid2d(double v, double min, double max)
{
    double f = floor((v - min) / (max - min) * MF_GEO_2D_GRID);
    return f < 0 ? 0 : f > MF_GEO_2D_GRID - 1 ? MF_GEO_2D_GRID - 1 : (int)f;
}

typedef struct cells2d_arg {
    double min, max;
    cells_arg_t c;
} cells2d_arg_t;

static bool
cells2d_visit(void *arg, const bson_value_t *v, int32_t pos)
{
    cells2d_arg_t *x = arg;
    pt_t p;
    if (v == NULL || (v->value_type != BSON_TYPE_ARRAY && v->value_type != BSON_TYPE_DOCUMENT))
        return false;
    if (v->value_type == BSON_TYPE_ARRAY && !looks_legacy_pair(v)) {
        bson_iter_t it;
        iter_value(v, &it);
        while (bson_iter_next(&it))
            cells2d_visit(arg, bson_iter_value(&it), pos);
        return false;
    }
    if (parse_flat_point(v, true, &p, NULL) == 0)
        cells_push(&x->c.cells, &x->c.n, &x->c.cap,
                   (int64_t)grid2d(p.y, x->min, x->max) * MF_GEO_2D_GRID + grid2d(p.x, x->min, x->max));
    return false;
}

size_t
mf_geo_doc_cells_2d(const bson_t *doc, const char *path, double min, double max, int64_t **cells)
{
    cells2d_arg_t x = {min, max, {NULL, 0, 0}};
    size_t w = 0;
    mf_path_walk(doc, path, cells2d_visit, &x);
    if (x.c.n > 1)
        qsort(x.c.cells, x.c.n, sizeof(*x.c.cells), i64_cmp);
    for (size_t i = 0; i < x.c.n; i++)
        if (w == 0 || x.c.cells[w - 1] != x.c.cells[i])
            x.c.cells[w++] = x.c.cells[i];
    *cells = x.c.cells;
    return w;
}

int
mf_geo_cover_2d(const bson_value_t *opdoc, double min, double max, mf_geo_cell_range_t **out, size_t *nout)
{
    bson_iter_t it;
    mf_geo_query_t *q = NULL;
    double x0, x1, y0, y1;

    *out = NULL;
    *nout = 0;
    if (!(max > min) || opdoc->value_type != BSON_TYPE_DOCUMENT || !iter_value(opdoc, &it))
        return -1;
    while (q == NULL && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$geoWithin") == 0 || strcmp(k, "$within") == 0)
            q = mf_geo_query_parse(k[1] == 'w' ? MF_GEOQ_WITHIN_LEGACY : MF_GEOQ_WITHIN, bson_iter_value(&it), NULL,
                                   NULL);
        else if (strcmp(k, "$geoIntersects") == 0)
            q = mf_geo_query_parse(MF_GEOQ_INTERSECTS, bson_iter_value(&it), NULL, NULL);
    }
    if (q == NULL)
        return -1;
    switch (q->shape) {
    case SH_BOX:
        x0 = q->box[0], y0 = q->box[1], x1 = q->box[2], y1 = q->box[3];
        break;
    case SH_CENTER:
        x0 = q->cx - q->r, x1 = q->cx + q->r, y0 = q->cy - q->r, y1 = q->cy + q->r;
        break;
    case SH_POLYGON:
        x0 = y0 = INFINITY;
        x1 = y1 = -INFINITY;
        for (size_t i = 0; i < q->npoly; i++) {
            x0 = fmin(x0, q->poly[i].x), x1 = fmax(x1, q->poly[i].x);
            y0 = fmin(y0, q->poly[i].y), y1 = fmax(y1, q->poly[i].y);
        }
        break;
    case SH_GEOMETRY:
    case SH_CENTERSPHERE: {
        /* Spherical regions over legacy points read as lng/lat. */
        box_t b;
        box_init(&b);
        if (q->shape == SH_GEOMETRY)
            box_geo(q->geom, &b);
        else
            box_cap(&b, (pt_t){q->cx, q->cy}, q->r);
        bool full = b.full_lng || b.lnglo <= -180 + 1e-7 || b.lnghi >= 180 - 1e-7;
        x0 = full ? -INFINITY : b.lnglo, x1 = full ? INFINITY : b.lnghi;
        y0 = b.latlo, y1 = b.lathi;
        break;
    }
    default:
        mf_geo_query_free(q);
        return -1;
    }
    mf_geo_query_free(q);
    if (!(x0 <= x1) || !(y0 <= y1))
        return -1;
    double eps = (max - min) * 1e-9;
    int c0 = grid2d(x0 - eps, min, max), c1 = grid2d(x1 + eps, min, max);
    int r0 = grid2d(y0 - eps, min, max), r1 = grid2d(y1 + eps, min, max);
    mf_geo_cell_range_t *r = mf_malloc((size_t)(r1 - r0 + 1) * sizeof(*r));
    if (r == NULL)
        abort();
    for (int row = r0; row <= r1; row++) {
        r[row - r0].lo = (int64_t)row * MF_GEO_2D_GRID + c0;
        r[row - r0].hi = (int64_t)row * MF_GEO_2D_GRID + c1;
    }
    *out = r;
    *nout = (size_t)(r1 - r0 + 1);
    return 0;
}
