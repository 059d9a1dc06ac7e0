/*
 * agg_geo.c: the $geoNear stage (see agg_geo.h).
 *
 * Design: parsing keeps the centre (doc/geo.h's mf_geo_near_t), the bounds,
 * the output fields and a matcher for 'query'. mf_geonear_prepare resolves
 * the index and units once; mf_geonear_measure then tells for each document
 * whether it passes 'query' and has a location (the nearest of those its
 * key path reaches, mf_geo_near_doc) within the bounds. The stage is
 * blocking, like $sort: agg.c's streaming run measures documents as they
 * arrive and keeps only the selected ones (top-k before a $limit), the
 * materialising run (mf_geonear_select) sorts an input vector; both order
 * by (distance, input position) and write the distance and location
 * fields into the output documents.
 */
#include "query/agg_geo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/curop.h"
#include "doc/path.h"
#include "doc/geo.h"
#include "doc/match.h"
#include "doc/value.h"

struct mf_geonear {
    mf_geo_near_t n;      /* centre and measurement (spherical decided at run time for legacy pairs) */
    bool spherical;       /* the 'spherical' option */
    bool has_max, has_min;
    double max, min;
    double mult;
    char *dist_field;     /* owned or NULL */
    char *locs_field;     /* owned or NULL */
    char *key;            /* owned or NULL */
    bson_t *query;        /* owned or NULL */
    bson_t *pushdown;     /* owned or NULL: query AND a region holding every location within maxDistance */
    mf_matcher_t *matcher;
    bool find_mode;
};

void
mf_geonear_free(mf_geonear_t *g)
{
    if (g == NULL)
        return;
    free(g->dist_field);
    free(g->locs_field);
    free(g->key);
    if (g->query)
        bson_destroy(g->query);
    if (g->pushdown)
        bson_destroy(g->pushdown);
    mf_matcher_free(g->matcher);
    free(g);
}

const bson_t *
mf_geonear_query(const mf_geonear_t *g)
{
    return g->pushdown ? g->pushdown : g->query;
}

/*
 * With a key, a spherical search and a maxDistance under a radian, the scan
 * can be narrowed (and a 2dsphere index used, query/plan.c) by
 * {key: {$geoIntersects: <16-gon circumscribing the cap of that radius>}}:
 * every location within the distance shares a point with the cap, so with
 * the polygon. Its vertices sit at atan(tan r / cos(pi / 16)) from the
 * centre (edges tangent to the cap), widened by 1% against rounding.
 */
static void
build_pushdown(mf_geonear_t *g)
{
    const int N = 16;
    double r = g->n.geojson ? g->max / MF_GEO_EARTH_RADIUS_M : g->max;
    if (g->key == NULL || !g->has_max)
        return;
    if (!g->n.geojson && !g->spherical) {
        /* A flat search (a 2d index) is exactly {key: {$geoWithin: {$center: [centre, max]}}}. */
        bson_t *b = bson_new(), arr, clause, op, w, c, pt;
        BSON_APPEND_ARRAY_BEGIN(b, "$and", &arr);
        if (g->query != NULL)
            BSON_APPEND_DOCUMENT(&arr, "0", g->query);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, g->query != NULL ? "1" : "0", &clause);
        BSON_APPEND_DOCUMENT_BEGIN(&clause, g->key, &op);
        BSON_APPEND_DOCUMENT_BEGIN(&op, "$geoWithin", &w);
        BSON_APPEND_ARRAY_BEGIN(&w, "$center", &c);
        BSON_APPEND_ARRAY_BEGIN(&c, "0", &pt);
        BSON_APPEND_DOUBLE(&pt, "0", g->n.x);
        BSON_APPEND_DOUBLE(&pt, "1", g->n.y);
        bson_append_array_end(&c, &pt);
        BSON_APPEND_DOUBLE(&c, "1", g->max);
        bson_append_array_end(&w, &c);
        bson_append_document_end(&op, &w);
        bson_append_document_end(&clause, &op);
        bson_append_document_end(&arr, &clause);
        bson_append_array_end(b, &arr);
        g->pushdown = b;
        return;
    }
    if (!(r < 1.0))
        return;
    double R = fmax(atan(tan(r) / cos(M_PI / N)) * 1.01, 1e-6); /* at least ~6 m: distinct vertices */
    double lat = g->n.y * M_PI / 180, lng = g->n.x * M_PI / 180;
    double c[3] = {cos(lat) * cos(lng), cos(lat) * sin(lng), sin(lat)};
    double e[3] = {-sin(lng), cos(lng), 0};                                        /* east */
    double nn[3] = {-sin(lat) * cos(lng), -sin(lat) * sin(lng), cos(lat)};          /* north */
    bson_t *b = bson_new(), arr, clause, op, geom, coords, ring, pt;
    char key[16];

    BSON_APPEND_ARRAY_BEGIN(b, "$and", &arr);
    if (g->query != NULL)
        BSON_APPEND_DOCUMENT(&arr, "0", g->query);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, g->query != NULL ? "1" : "0", &clause);
    BSON_APPEND_DOCUMENT_BEGIN(&clause, g->key, &op);
    BSON_APPEND_DOCUMENT_BEGIN(&op, "$geoIntersects", &geom);
    bson_t gj;
    BSON_APPEND_DOCUMENT_BEGIN(&geom, "$geometry", &gj);
    BSON_APPEND_UTF8(&gj, "type", "Polygon");
    BSON_APPEND_ARRAY_BEGIN(&gj, "coordinates", &coords);
    BSON_APPEND_ARRAY_BEGIN(&coords, "0", &ring);
    double first[2] = {0, 0};
    for (int k = 0; k <= N; k++) {
        double x, y;
        if (k < N) {
            double t = 2 * M_PI * k / N, d[3], p[3];
            for (int i = 0; i < 3; i++) {
                d[i] = cos(t) * e[i] + sin(t) * nn[i];
                p[i] = cos(R) * c[i] + sin(R) * d[i];
            }
            y = asin(fmax(-1.0, fmin(1.0, p[2]))) * 180 / M_PI;
            x = atan2(p[1], p[0]) * 180 / M_PI;
            if (k == 0) {
                first[0] = x;
                first[1] = y;
            }
        } else {
            x = first[0];
            y = first[1];
        }
        snprintf(key, sizeof(key), "%d", k);
        BSON_APPEND_ARRAY_BEGIN(&ring, key, &pt);
        BSON_APPEND_DOUBLE(&pt, "0", x);
        BSON_APPEND_DOUBLE(&pt, "1", y);
        bson_append_array_end(&ring, &pt);
    }
    bson_append_array_end(&coords, &ring);
    bson_append_array_end(&gj, &coords);
    bson_append_document_end(&geom, &gj);
    bson_append_document_end(&op, &geom);
    bson_append_document_end(&clause, &op);
    bson_append_document_end(&arr, &clause);
    bson_append_array_end(b, &arr);
    g->pushdown = b;
}

const char *
mf_geonear_distance_field(const mf_geonear_t *g)
{
    return g->dist_field;
}

const char *
mf_geonear_locs_field(const mf_geonear_t *g)
{
    return g->locs_field;
}

static int
distance_option(const bson_value_t *v, const char *name, double *out, mf_error_t *err)
{
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_TypeMismatch, "$geoNear requires $%s to evaluate to a number", name);
    *out = mf_value_as_double(v);
    if (!(*out >= 0))
        return mf_err_set(err, MF_E_BadValue, "%s must be nonnegative", name);
    return 0;
}

mf_geonear_t *
mf_geonear_parse(const bson_value_t *spec, bool find_mode, mf_error_t *err)
{
    mf_geonear_t *g;
    bson_iter_t it;
    bson_t obj;
    const bson_value_t *near = NULL;
    bson_value_t near_store;

    if (spec->value_type != BSON_TYPE_DOCUMENT ||
        !bson_init_static(&obj, spec->value.v_doc.data, spec->value.v_doc.data_len)) {
        mf_err_set(err, MF_E_Location10065, "invalid parameter: expected an object ($geoNear)");
        return NULL;
    }
    if (bson_has_field(&obj, "collation")) {
        mf_err_set(err, MF_E_Location40227,
                   "$geoNear does not accept the 'collation' parameter. Instead, specify a collation for the "
                   "entire aggregation command.");
        return NULL;
    }
    if (bson_has_field(&obj, "limit")) {
        mf_err_set(err, MF_E_Location50858, "$geoNear no longer supports the 'limit' parameter. Use a $limit stage instead.");
        return NULL;
    }
    if (bson_has_field(&obj, "num")) {
        mf_err_set(err, MF_E_Location50857, "$geoNear no longer supports the 'num' parameter. Use a $limit stage instead.");
        return NULL;
    }
    if (bson_has_field(&obj, "start")) {
        mf_err_set(err, MF_E_Location50856, "$geoNear no longer supports the 'start' argument.");
        return NULL;
    }
    if (!bson_has_field(&obj, "near")) {
        mf_err_set(err, MF_E_Location5860400, "$geoNear requires a 'near' argument");
        return NULL;
    }
    g = mf_calloc(1, sizeof(*g));
    if (g == NULL)
        abort();
    g->mult = 1.0;
    g->find_mode = find_mode;
    bson_iter_init(&it, &obj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(k, "near") == 0) {
            near_store = *v;
            near = &near_store;
        } else if (strcmp(k, "distanceField") == 0) {
            if (v->value_type != BSON_TYPE_UTF8) {
                mf_err_set(err, MF_E_Location16606, "$geoNear requires that the 'distanceField' option is a String");
                goto err_free;
            }
            if (mf_field_path_check(v->value.v_utf8.str, err) != 0) /* mongod's FieldPath */
                goto err_free;
            free(g->dist_field);
            g->dist_field = mf_strdup(v->value.v_utf8.str);
        } else if (strcmp(k, "maxDistance") == 0) {
            if (distance_option(v, "maxDistance", &g->max, err) != 0)
                goto err_free;
            g->has_max = true;
        } else if (strcmp(k, "minDistance") == 0) {
            if (distance_option(v, "minDistance", &g->min, err) != 0)
                goto err_free;
            g->has_min = true;
        } else if (strcmp(k, "distanceMultiplier") == 0) {
            if (!mf_value_is_number(v)) {
                mf_err_set(err, MF_E_TypeMismatch, "distanceMultiplier must be a number");
                goto err_free;
            }
            g->mult = mf_value_as_double(v);
            if (!(g->mult >= 0)) {
                mf_err_set(err, MF_E_BadValue, "distanceMultiplier must be nonnegative");
                goto err_free;
            }
        } else if (strcmp(k, "query") == 0) {
            if (v->value_type != BSON_TYPE_DOCUMENT) {
                mf_err_set(err, MF_E_TypeMismatch, "query must be an object");
                goto err_free;
            }
            if (g->query)
                bson_destroy(g->query);
            mf_matcher_free(g->matcher);
            g->query = bson_new_from_data(v->value.v_doc.data, v->value.v_doc.data_len);
            if (mf_geo_filter_has_near(g->query)) {
                mf_err_set(err, MF_E_Location5626500, MF_GEO_NEAR_CONTEXT_MSG);
                goto err_free;
            }
            g->matcher = mf_matcher_new(g->query, err);
            if (g->matcher == NULL)
                goto err_free;
        } else if (strcmp(k, "spherical") == 0) {
            g->spherical = mf_value_truthy(v);
        } else if (strcmp(k, "includeLocs") == 0) {
            if (v->value_type != BSON_TYPE_UTF8) {
                mf_err_set(err, MF_E_Location16607, "$geoNear requires that 'includeLocs' option is a String");
                goto err_free;
            }
            if (mf_field_path_check(v->value.v_utf8.str, err) != 0)
                goto err_free;
            free(g->locs_field);
            g->locs_field = mf_strdup(v->value.v_utf8.str);
        } else if (strcmp(k, "uniqueDocs") == 0) {
            /* deprecated, ignored (mongod logs a warning) */
        } else if (strcmp(k, "key") == 0) {
            if (v->value_type != BSON_TYPE_UTF8) {
                mf_err_set(err, MF_E_TypeMismatch, "$geoNear parameter 'key' must be of type string but found type: %s",
                           mf_type_name(v->value_type));
                goto err_free;
            }
            if (v->value.v_utf8.len == 0) {
                mf_err_set(err, MF_E_BadValue, "$geoNear parameter 'key' cannot be the empty string");
                goto err_free;
            }
            free(g->key);
            g->key = mf_strdup(v->value.v_utf8.str);
        } else {
            mf_err_set(err, MF_E_BadValue, "Unknown argument to $geoNear: %s", k);
            goto err_free;
        }
    }
    if (near->value_type != BSON_TYPE_DOCUMENT && near->value_type != BSON_TYPE_ARRAY) {
        mf_err_set(err, MF_E_Location5860401,
                   "$geoNear requires near argument to be a GeoJSON object or a legacy point(array)");
        goto err_free;
    }
    if (mf_geo_near_point(near, &g->n, err) != 0) {
        char msg[sizeof(err->msg)];
        snprintf(msg, sizeof(msg), "%s", err->msg);
        mf_err_set(err, MF_E_BadValue, "invalid argument in geo near query: %s", msg);
        goto err_free;
    }
    build_pushdown(g);
    return g;
err_free:
    mf_geonear_free(g);
    return NULL;
}

/*
 * Whether a usable (not hidden) 2d / 2dsphere index has field as its geo
 * field. A hidden index still names the field for $geoNear (mongod's
 * extractGeoNearFieldFromIndexes reads the catalog), but the planner, which
 * then answers the near query, leaves hidden indexes out.
 */
static void
field_kinds(const bson_t *specs, const char *field, bool *has2d, bool *has_sphere)
{
    bson_iter_t it;

    *has2d = *has_sphere = false;
    if (specs == NULL || !bson_iter_init(&it, specs))
        return;
    while (bson_iter_next(&it)) {
        bson_iter_t kt, ft, ht;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        bson_iter_recurse(&it, &ht);
        if (bson_iter_find(&ht, "hidden") && bson_iter_as_bool(&ht))
            continue;
        bson_iter_recurse(&it, &kt);
        if (!bson_iter_find(&kt, "key") || !BSON_ITER_HOLDS_DOCUMENT(&kt))
            continue;
        bson_iter_recurse(&kt, &ft);
        while (bson_iter_next(&ft)) {
            if (!BSON_ITER_HOLDS_UTF8(&ft) || strcmp(bson_iter_key(&ft), field) != 0)
                continue;
            const char *v = bson_iter_utf8(&ft, NULL);
            if (strcmp(v, "2d") == 0)
                *has2d = true;
            else if (strcmp(v, "2dsphere") == 0)
                *has_sphere = true;
        }
    }
}

/*
 * Finds the field to search (the key option's, else the only 2d index's,
 * else the only 2dsphere index's, as mongod's extractGeoNearFieldFromIndexes)
 * and the index kind that answers the near query there, as mongod's planner
 * picks among the field's usable indexes: a GeoJSON centre needs a
 * 2dsphere index, a flat legacy search a 2d one. *field is a pointer into
 * specs (or g->key).
 */
static int
choose_index(const mf_geonear_t *g, const bson_t *specs, const char *ns, const char **field, mf_geo_ix_t *kind,
             mf_error_t *err)
{
    bson_iter_t it;
    int n2d = 0, nsphere = 0;
    const char *f2d = NULL, *fsphere = NULL;
    bool has2d, has_sphere;

    *kind = MF_GEO_IX_NONE;
    if (g->key == NULL && specs != NULL && bson_iter_init(&it, specs)) {
        while (bson_iter_next(&it)) {
            bson_iter_t kt, ft;
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                continue;
            bson_iter_recurse(&it, &kt);
            if (!bson_iter_find(&kt, "key") || !BSON_ITER_HOLDS_DOCUMENT(&kt))
                continue;
            bson_iter_recurse(&kt, &ft);
            while (bson_iter_next(&ft)) {
                if (!BSON_ITER_HOLDS_UTF8(&ft))
                    continue;
                const char *v = bson_iter_utf8(&ft, NULL);
                if (strcmp(v, "2d") == 0) {
                    n2d++;
                    f2d = bson_iter_key(&ft);
                } else if (strcmp(v, "2dsphere") == 0) {
                    nsphere++;
                    fsphere = bson_iter_key(&ft);
                }
            }
        }
    }
    if (g->key != NULL) {
        *field = g->key;
    } else if (n2d > 1) {
        return mf_err_set(err, MF_E_IndexNotFound, "There is more than one 2d index on %s; unsure which to use for $geoNear",
                          ns);
    } else if (n2d == 1) {
        *field = f2d;
    } else if (nsphere == 0) {
        return mf_err_set(err, MF_E_IndexNotFound, "$geoNear requires a 2d or 2dsphere index, but none were found");
    } else if (nsphere > 1) {
        return mf_err_set(err, MF_E_IndexNotFound,
                          "There is more than one 2dsphere index on %s; unsure which to use for $geoNear", ns);
    } else {
        *field = fsphere;
    }
    field_kinds(specs, *field, &has2d, &has_sphere);
    if (g->n.geojson)
        *kind = has_sphere ? MF_GEO_IX_2DSPHERE : has2d ? MF_GEO_IX_2D : MF_GEO_IX_NONE;
    else
        *kind = has2d ? MF_GEO_IX_2D : has_sphere ? MF_GEO_IX_2DSPHERE : MF_GEO_IX_NONE;
    if (*kind == MF_GEO_IX_NONE)
        return mf_err_set(err, MF_E_NoQueryExecutionPlans, "error processing query: ns=%s planner returned error :: "
                          "caused by :: unable to find index for $geoNear query", ns);
    return 0;
}

static int
hit_cmp(const void *a, const void *b)
{
    const mf_geonear_hit_t *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void
run_near(const mf_geonear_run_t *run, mf_geo_near_t *n)
{
    n->x = run->x;
    n->y = run->y;
    n->geojson = run->geojson;
    n->spherical = run->spherical;
    n->min = run->min;
    n->max = run->max;
}

int
mf_geonear_prepare(const mf_geonear_t *g, const bson_t *specs, const char *ns, mf_geonear_run_t *run,
                   mf_error_t *err)
{
    mf_geo_ix_t kind;
    mf_geo_near_t n = g->n;

    if (choose_index(g, specs, ns, &run->field, &kind, err) != 0)
        return -1;
    /* A 2d index holds flat points: it cannot answer a GeoJSON (spherical) centre. */
    if (kind == MF_GEO_IX_2D && n.geojson)
        return mf_err_set(err, MF_E_NoQueryExecutionPlans, "error processing query: ns=%s planner returned error :: "
                          "caused by :: unable to find index for $geoNear query", ns);
    /*
     * A flat search from a legacy pair ($near, $geoNear without spherical)
     * cannot use a 2dsphere index (mongod's planner finds none for it).
     */
    if (kind == MF_GEO_IX_2DSPHERE && !n.geojson && !g->spherical)
        return mf_err_set(err, MF_E_NoQueryExecutionPlans, "error processing query: ns=%s planner returned error :: "
                          "caused by :: unable to find index for $geoNear query", ns);
    /* A legacy centre is measured on the sphere unless the search is flat (a 2d index, not spherical). */
    if (!n.geojson)
        n.spherical = g->spherical || kind == MF_GEO_IX_2DSPHERE;
    if (n.spherical && !n.geojson && !(n.x >= -180 && n.x <= 180 && n.y >= -90 && n.y <= 90))
        return mf_err_set(err, MF_E_BadValue, "Legacy point is out of bounds for spherical query");
    run->kind = kind;
    run->x = n.x;
    run->y = n.y;
    run->geojson = n.geojson;
    run->spherical = n.spherical;
    run->min = g->has_min ? g->min : 0;
    run->max = g->has_max ? g->max : -1;
    return 0;
}

bool
mf_geonear_measure(const mf_geonear_t *g, const mf_geonear_run_t *run, const bson_t *doc, double *dist,
                   bson_value_t *loc)
{
    mf_geo_near_t n;
    double d;
    run_near(run, &n);
    if (g->matcher != NULL && !mf_matcher_match(g->matcher, doc, NULL))
        return false;
    if (!mf_geo_near_doc(&n, doc, run->field, &d, loc))
        return false;
    if (d < n.min || (n.max >= 0 && d > n.max))
        return false;
    *dist = d * g->mult;
    return true;
}

int
mf_geonear_select(const mf_geonear_t *g, const bson_t *specs, const char *ns, const mf_docvec_t *in,
                  mf_geonear_hit_t **hits, size_t *nhits, mf_error_t *err)
{
    mf_geonear_run_t run;
    mf_geonear_hit_t *h = NULL;
    size_t nh = 0;

    *hits = NULL;
    *nhits = 0;
    if (mf_geonear_prepare(g, specs, ns, &run, err) != 0)
        return -1;
    if (in->len > 0) {
        h = mf_malloc(in->len * sizeof(*h));
        if (h == NULL)
            abort();
    }
    for (size_t i = 0; i < in->len; i++) {
        if ((i + 1) % 512 == 0 && mf_curop_check_current(err) != 0) {
            free(h);
            return -1;
        }
        if (!mf_geonear_measure(g, &run, in->docs[i], &h[nh].dist, &h[nh].loc))
            continue;
        h[nh].idx = i;
        nh++;
    }
    if (nh > 1)
        qsort(h, nh, sizeof(*h), hit_cmp);
    *hits = h;
    *nhits = nh;
    return 0;
}

/* ---- a find's $near as a $geoNear spec ---- */

/* Appends the $geoNear options of the near clause at path with operator document opdoc. */
static int
append_near(bson_t *out, const char *path, const bson_value_t *opdoc, mf_error_t *err)
{
    bson_iter_t it;
    mf_geo_query_t *q = NULL;
    bool sphere = false;

    bson_iter_init_from_data(&it, opdoc->value.v_doc.data, opdoc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$near") == 0 || strcmp(k, "$nearSphere") == 0) {
            sphere = k[5] == 'S';
            q = mf_geo_query_parse(sphere ? MF_GEOQ_NEARSPHERE : MF_GEOQ_NEAR, bson_iter_value(&it), opdoc, err);
            break;
        }
    }
    if (q == NULL)
        return -1;
    const mf_geo_near_t *n = mf_geo_query_near(q);
    if (n->geojson) {
        bson_t pt, co;
        BSON_APPEND_DOCUMENT_BEGIN(out, "near", &pt);
        BSON_APPEND_UTF8(&pt, "type", "Point");
        BSON_APPEND_ARRAY_BEGIN(&pt, "coordinates", &co);
        BSON_APPEND_DOUBLE(&co, "0", n->x);
        BSON_APPEND_DOUBLE(&co, "1", n->y);
        bson_append_array_end(&pt, &co);
        bson_append_document_end(out, &pt);
    } else {
        bson_t co;
        BSON_APPEND_ARRAY_BEGIN(out, "near", &co);
        BSON_APPEND_DOUBLE(&co, "0", n->x);
        BSON_APPEND_DOUBLE(&co, "1", n->y);
        bson_append_array_end(out, &co);
    }
    BSON_APPEND_UTF8(out, "key", path);
    BSON_APPEND_BOOL(out, "spherical", sphere);
    if (n->max >= 0)
        BSON_APPEND_DOUBLE(out, "maxDistance", n->max);
    if (n->min > 0)
        BSON_APPEND_DOUBLE(out, "minDistance", n->min);
    mf_geo_query_free(q);
    return 0;
}

/* How many $near / $nearSphere operators data (a document or an array) holds, anywhere (bounded depth). */
static int
count_near(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    int n = 0;
    if (depth > 200 || !bson_iter_init_from_data(&it, data, len))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$near") == 0 || strcmp(k, "$nearSphere") == 0)
            n++;
        else if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it))
            n += count_near(bson_iter_value(&it)->value.v_doc.data, bson_iter_value(&it)->value.v_doc.data_len,
                            depth + 1);
    }
    return n;
}

int
mf_geo_near_count(const bson_t *filter)
{
    /* The walk only for a filter that names $near or $nearSphere somewhere: most do not. */
    if (filter == NULL || memmem(bson_get_data(filter), filter->len, "$near", 5) == NULL)
        return 0;
    return count_near(bson_get_data(filter), filter->len, 0);
}

/*
 * The refusal of a $near below the top. mongod 8.0 words it "geo $near must
 * be top-level expr" (CanonicalQuery::isValidNormalized); mayfly keeps the
 * older wording, which tests/clients/geo.test.js asserts, until both change.
 */
#define NEAR_NOT_TOP_LEVEL "geoNear must be top-level expr"

/*
 * near_flatten: appends to arr (keys from *n on) the clauses of doc that
 * mongod's MatchExpression::normalize leaves directly under the root: the
 * elements of an $and, and the one element of a one-element $or or $and,
 * flattened in turn; any other field as a {field: value} clause.
 */
static void
near_flatten(const bson_t *doc, bson_t *arr, int *n, int depth)
{
    bson_iter_t it, ai;
    char key[16];

    if (!bson_iter_init(&it, doc))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool is_and = strcmp(k, "$and") == 0, is_or = strcmp(k, "$or") == 0;
        if ((is_and || is_or) && BSON_ITER_HOLDS_ARRAY(&it) && depth < 100) {
            const bson_value_t *av = bson_iter_value(&it);
            bson_t a;
            if (bson_init_static(&a, av->value.v_doc.data, av->value.v_doc.data_len) &&
                (is_and || bson_count_keys(&a) == 1) && bson_iter_init(&ai, &a)) {
                while (bson_iter_next(&ai)) {
                    bson_t el;
                    const bson_value_t *ev = bson_iter_value(&ai);
                    if (ev->value_type == BSON_TYPE_DOCUMENT &&
                        bson_init_static(&el, ev->value.v_doc.data, ev->value.v_doc.data_len))
                        near_flatten(&el, arr, n, depth + 1);
                }
                continue;
            }
        }
        bson_t one;
        snprintf(key, sizeof(key), "%d", (*n)++);
        BSON_APPEND_DOCUMENT_BEGIN(arr, key, &one);
        bson_append_value(&one, k, -1, bson_iter_value(&it));
        bson_append_document_end(arr, &one);
    }
}

/*
 * mf_geo_near_normalize (agg_geo.h): mongod 8.0's CanonicalQuery::isValidNormalized, which
 * runs after the projection and the sort parse: a filter's one $near must,
 * once normalised, be the root or a child of the root $and, else 2
 * BadValue NEAR_NOT_TOP_LEVEL ($or of several, $nor, $not, $elemMatch).
 * Normalising flattens nested $and and unwraps a one-element
 * $or, so {$or: [{loc: {$near: ..}}]} is valid; such a filter is rewritten
 * into *out as {<path>: <near>, $and: [<the other clauses>]}, the shape the
 * $geoNear rewrite (query/agg_geo.h) reads, and 1 returned. 0: nothing to
 * rewrite (no $near, or already where that rewrite finds it).
 */
int
mf_geo_near_normalize(const bson_t *filter, bson_t **out, mf_error_t *err)
{
    bson_iter_t it, ai, fi;
    bson_t flat, rest;
    int n = 0, k = 0, found = -1;
    char key[16];

    *out = NULL;
    if (filter == NULL || mf_geo_near_count(filter) == 0)
        return 0;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (f[0] != '$' && mf_match_opdoc_has_near(bson_iter_value(&it)))
            return 0;
        if (strcmp(f, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai))
            while (bson_iter_next(&ai))
                if (BSON_ITER_HOLDS_DOCUMENT(&ai) && bson_iter_recurse(&ai, &fi))
                    while (bson_iter_next(&fi))
                        if (bson_iter_key(&fi)[0] != '$' && mf_match_opdoc_has_near(bson_iter_value(&fi)))
                            return 0;
    }
    bson_init(&flat);
    near_flatten(filter, &flat, &n, 0);
    bson_iter_init(&it, &flat);
    for (int i = 0; found < 0 && bson_iter_next(&it); i++)
        if (bson_iter_recurse(&it, &fi) && bson_iter_next(&fi) && bson_iter_key(&fi)[0] != '$' &&
            mf_match_opdoc_has_near(bson_iter_value(&fi)))
            found = i;
    if (found < 0) {
        bson_destroy(&flat);
        return mf_err_set(err, MF_E_BadValue, NEAR_NOT_TOP_LEVEL);
    }
    *out = bson_new();
    bson_init(&rest);
    bson_iter_init(&it, &flat);
    for (int i = 0; bson_iter_next(&it); i++) {
        if (i == found) {
            bson_iter_recurse(&it, &fi);
            bson_iter_next(&fi);
            bson_append_value(*out, bson_iter_key(&fi), -1, bson_iter_value(&fi));
            continue;
        }
        snprintf(key, sizeof(key), "%d", k++);
        bson_append_value(&rest, key, -1, bson_iter_value(&it));
    }
    if (k > 0)
        bson_append_array(*out, "$and", -1, &rest);
    bson_destroy(&rest);
    bson_destroy(&flat);
    return 1;
}

int
mf_geonear_from_find(const bson_t *filter, bson_t *out, mf_error_t *err)
{
    bson_iter_t it;
    const char *path = NULL;
    bson_value_t opdoc;
    int and_pos = -1, pos = 0;

    if (filter == NULL || !bson_iter_init(&it, filter))
        return 0;
    while (bson_iter_next(&it) && path == NULL) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t at, ft;
            int i = 0;
            bson_iter_recurse(&it, &at);
            while (bson_iter_next(&at) && path == NULL) {
                if (BSON_ITER_HOLDS_DOCUMENT(&at)) {
                    bson_iter_recurse(&at, &ft);
                    while (bson_iter_next(&ft)) {
                        if (bson_iter_key(&ft)[0] != '$' && mf_match_opdoc_has_near(bson_iter_value(&ft))) {
                            path = bson_iter_key(&ft);
                            opdoc = *bson_iter_value(&ft);
                            and_pos = i;
                            break;
                        }
                    }
                }
                i++;
            }
        } else if (k[0] != '$' && mf_match_opdoc_has_near(bson_iter_value(&it))) {
            path = k;
            opdoc = *bson_iter_value(&it);
        }
        pos++;
    }
    /* mongod's CanonicalQuery::isValid: one near clause, at the top (or in the top-level $and). */
    int total = mf_geo_near_count(filter);
    if (total > 1)
        return mf_err_set(err, MF_E_BadValue, "Too many geoNear expressions");
    if (total == 1 && path == NULL)
        return mf_err_set(err, MF_E_BadValue, NEAR_NOT_TOP_LEVEL);
    if (path == NULL)
        return 0;
    bson_init(out);
    if (append_near(out, path, &opdoc, err) != 0) {
        bson_destroy(out);
        return -1;
    }
    /* The rest of the filter: every other clause (for $and, the other elements). */
    bson_t q;
    BSON_APPEND_DOCUMENT_BEGIN(out, "query", &q);
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (and_pos < 0 && strcmp(k, path) == 0)
            continue;
        if (and_pos >= 0 && strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t at, ft;
            bson_t arr, el;
            int i = 0, n = 0;
            char key[16];
            BSON_APPEND_ARRAY_BEGIN(&q, "$and", &arr);
            bson_iter_recurse(&it, &at);
            while (bson_iter_next(&at)) {
                if (i++ != and_pos) {
                    snprintf(key, sizeof(key), "%d", n++);
                    bson_append_value(&arr, key, -1, bson_iter_value(&at));
                    continue;
                }
                /* The element holding the near clause, without it. */
                bson_iter_recurse(&at, &ft);
                snprintf(key, sizeof(key), "%d", n++);
                BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &el);
                while (bson_iter_next(&ft))
                    if (strcmp(bson_iter_key(&ft), path) != 0)
                        bson_append_value(&el, bson_iter_key(&ft), -1, bson_iter_value(&ft));
                bson_append_document_end(&arr, &el);
            }
            bson_append_array_end(&q, &arr);
            continue;
        }
        bson_append_value(&q, k, -1, bson_iter_value(&it));
    }
    bson_append_document_end(out, &q);
    (void)pos;
    return 1;
}

/* ---- $geoNear metadata ---- */

static unsigned
meta_mentioned(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    unsigned m = 0;

    if (depth > 200 || !bson_iter_init_from_data(&it, data, len))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(k, "$meta") == 0 && v->value_type == BSON_TYPE_UTF8) {
            if (strcmp(v->value.v_utf8.str, "geoNearDistance") == 0)
                m |= MF_GEO_META_DIST;
            else if (strcmp(v->value.v_utf8.str, "geoNearPoint") == 0)
                m |= MF_GEO_META_POINT;
        } else if ((v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) &&
                   strcmp(k, "pipeline") != 0) {
            m |= meta_mentioned(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1);
        }
    }
    return m;
}

unsigned
mf_geo_meta_mentioned(const bson_value_t *v)
{
    if (v == NULL || (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY))
        return 0;
    return meta_mentioned(v->value.v_doc.data, v->value.v_doc.data_len, 0);
}
