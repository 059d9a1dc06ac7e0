/*
 * test_plan.c: the planner's choices and index bounds, without storage (an
 * in-memory mf_coll_t whose indexes are built from specs).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "query/plan.h"

static mf_coll_t coll;

static void
add_index(const char *json, bool multikey)
{
    bson_error_t be;
    mf_error_t err;
    mf_index_t *ix = calloc(1, sizeof(*ix));
    bson_iter_t it;
    ix->spec = bson_new_from_json((const uint8_t *)json, -1, &be);
    cr_assert(ix->spec != NULL, "bad spec %s", json);
    cr_assert(bson_iter_init_find(&it, ix->spec, "name"));
    ix->name = strdup(bson_iter_utf8(&it, NULL));
    cr_assert(bson_iter_init_find(&it, ix->spec, "key"));
    const uint8_t *data;
    uint32_t len;
    bson_t key;
    bson_iter_document(&it, &len, &data);
    bson_init_static(&key, data, len);
    cr_assert_eq(mf_keypattern_parse(&key, &ix->kp, &err), 0);
    ix->is_id = strcmp(ix->name, "_id_") == 0;
    ix->unique = ix->is_id || (bson_iter_init_find(&it, ix->spec, "unique") && bson_iter_as_bool(&it));
    ix->sparse = bson_iter_init_find(&it, ix->spec, "sparse") && bson_iter_as_bool(&it);
    ix->multikey = multikey;
    coll.indexes[coll.nindexes++] = ix;
}

static void
setup(void)
{
    memset(&coll, 0, sizeof(coll));
    coll.ns = "t.c";
    add_index("{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}", false);
    add_index("{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}", false);
    add_index("{\"v\": 2, \"key\": {\"b\": -1, \"c\": 1}, \"name\": \"b_-1_c_1\"}", false);
    add_index("{\"v\": 2, \"key\": {\"t\": 1}, \"name\": \"t_1\"}", true);
    add_index("{\"v\": 2, \"key\": {\"s\": 1}, \"name\": \"s_1\", \"sparse\": true}", false);
    add_index("{\"v\": 2, \"key\": {\"h\": 1}, \"name\": \"h_1\", \"hidden\": true}", false);
}

static void
teardown(void)
{
    for (int i = 0; i < coll.nindexes; i++) {
        mf_index_t *ix = coll.indexes[i];
        bson_destroy(ix->spec);
        free(ix->name);
        mf_keypattern_destroy(&ix->kp);
        free(ix);
    }
}

/* Plans filter (JSON) with optional sort and hint; returns the plan. */
static mf_plan_t *
plan_of(const char *filter, const char *sort, const char *hint_json)
{
    bson_error_t be;
    mf_error_t err;
    bson_t *f = bson_new_from_json((const uint8_t *)filter, -1, &be);
    bson_t *s = sort ? bson_new_from_json((const uint8_t *)sort, -1, &be) : NULL;
    bson_t *h = hint_json ? bson_new_from_json((const uint8_t *)hint_json, -1, &be) : NULL;
    bson_iter_t it;
    bson_value_t hv;
    mf_plan_request_t req = {.filter = f, .sort = s};
    if (h && bson_iter_init(&it, h) && bson_iter_next(&it)) {
        hv = *bson_iter_value(&it);
        req.hint = &hv;
    }
    mf_plan_t *p = NULL;
    int rc = mf_plan_build(&coll, &req, &p, &err);
    bson_destroy(f);
    if (s)
        bson_destroy(s);
    if (h)
        bson_destroy(h);
    return rc == 0 ? p : NULL;
}

/* The JSON of the leaf's indexBounds. */
static char *
bounds_json(const mf_plan_t *p)
{
    return bson_as_relaxed_extended_json(p->leaf->bounds, NULL);
}

TestSuite(plan, .init = setup, .fini = teardown);

Test(plan, id_equality_is_idhack)
{
    mf_plan_t *p = plan_of("{\"_id\": 5}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IDHACK);
    mf_plan_free(p);
}

Test(plan, equality_on_indexed_field_uses_point_bounds)
{
    mf_plan_t *p = plan_of("{\"a\": 5}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_str_eq(p->leaf->index_name, "a_1");
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[5, 5]\" ] }", "got %s", j);
    cr_assert_eq(p->leaf->niv, 1u);
    /* KEY FORMAT 2 keys equal numbers alike and unequal ones apart (plan.c dec_key_ties): exact. */
    cr_assert_null(p->fetch->filter, "a numeric equality is answered exactly by the bounds");
    bson_free(j);
    mf_plan_free(p);
    /* In KEY FORMAT 1 a Decimal128 a hair away from 5 has 5's key: the matcher checks. */
    coll.indexes[1]->kp.legacy_decimals = true;
    p = plan_of("{\"a\": 5}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "a_1");
    cr_assert_not_null(p->fetch->filter, "a format 1 index's numeric equality is checked by the matcher");
    mf_plan_free(p);
    p = plan_of("{\"a\": {\"$gt\": 5}}", NULL, NULL);
    cr_assert(p->leaf->iv[0].lo_incl, "a format 1 index reads the key of an exclusive numeric bound");
    mf_plan_free(p);
    coll.indexes[1]->kp.legacy_decimals = false;
    p = plan_of("{\"a\": {\"$gt\": 5}}", NULL, NULL);
    cr_assert(!p->leaf->iv[0].lo_incl, "a format 2 index skips the key of an exclusive numeric bound");
    cr_assert_null(p->fetch->filter);
    mf_plan_free(p);
    p = plan_of("{\"a\": \"x\"}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_null(p->fetch->filter, "a string equality is answered exactly by the bounds");
    mf_plan_free(p);
}

Test(plan, range_is_type_bracketed)
{
    mf_plan_t *p = plan_of("{\"a\": {\"$gt\": 5}}", NULL, NULL);
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"(5, inf.0]\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
    p = plan_of("{\"a\": {\"$lt\": \"m\"}}", NULL, NULL);
    j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[\\\"\\\", \\\"m\\\")\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
}

Test(plan, in_gives_sorted_point_intervals)
{
    mf_plan_t *p = plan_of("{\"a\": {\"$in\": [3, 1, 2, 1]}}", NULL, NULL);
    cr_assert_eq(p->leaf->niv, 3u, "niv %zu", p->leaf->niv);
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[1, 1]\", \"[2, 2]\", \"[3, 3]\" ] }", "got %s", j);
    bson_free(j);
    for (size_t i = 1; i < p->leaf->niv; i++)
        cr_assert(memcmp(p->leaf->iv[i - 1].lo, p->leaf->iv[i].lo, p->leaf->iv[i].lolen) < 0);
    mf_plan_free(p);
}

Test(plan, descending_field_reverses_interval_ends)
{
    mf_plan_t *p = plan_of("{\"b\": {\"$gte\": 1, \"$lt\": 9}}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "b_-1_c_1");
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"b\" : [ \"(9, 1]\" ], \"c\" : [ \"[MinKey, MaxKey]\" ] }", "got %s", j);
    bson_free(j);
    /* Explain shows (9, 1], and the scan reads the same: 9's key holds only values equal to 9 (dec_key_ties). */
    cr_assert(p->leaf->iv[0].lo_incl == false && p->leaf->iv[0].hi_incl == true);
    mf_plan_free(p);
    p = plan_of("{\"b\": {\"$gte\": \"a\", \"$lt\": \"m\"}}", NULL, NULL);
    cr_assert(p->leaf->iv[0].lo_incl == false && p->leaf->iv[0].hi_incl == true, "a string's exclusive end stays exclusive");
    mf_plan_free(p);
}

Test(plan, multikey_range_uses_one_predicate)
{
    mf_plan_t *p = plan_of("{\"t\": {\"$gt\": 1, \"$lt\": 3}}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "t_1");
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"t\" : [ \"(1, inf.0]\" ] }", "got %s", j);
    bson_free(j);
    cr_assert_not_null(p->fetch->filter, "the multikey predicate stays in FETCH");
    mf_plan_free(p);
}

/* Multikey paths: {m: 1, n: 1, "p.q": 1, "p.r": 1}, arrays seen at m and at p (the prefix of p.q and p.r). */
static void
add_mk_paths_index(void)
{
    add_index("{\"v\": 2, \"key\": {\"m\": 1, \"n\": 1}, \"name\": \"m_1_n_1\"}", true);
    add_index("{\"v\": 2, \"key\": {\"p.q\": 1, \"p.r\": 1}, \"name\": \"pq_pr\"}", true);
    coll.indexes[coll.nindexes - 2]->mk_paths[0] = 1; /* m */
    coll.indexes[coll.nindexes - 1]->mk_paths[0] = 1; /* p, in p.q */
    coll.indexes[coll.nindexes - 1]->mk_paths[1] = 1; /* p, in p.r */
}

Test(plan, multikey_paths_bound_intersect_and_sort_by_fields_without_arrays)
{
    add_mk_paths_index();
    mf_plan_t *p = plan_of("{\"m\": 5, \"n\": {\"$gt\": 1, \"$lt\": 3}}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "m_1_n_1");
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"m\" : [ \"[5, 5]\" ], \"n\" : [ \"(1, 3)\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
    /* The field with arrays takes one range predicate. */
    p = plan_of("{\"m\": {\"$gt\": 1, \"$lt\": 3}}", NULL, NULL);
    j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"m\" : [ \"(1, inf.0]\" ], \"n\" : [ \"[MinKey, MaxKey]\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
    /* A sort on n after a point on m comes from the index; one on m does not. */
    p = plan_of("{\"m\": 5}", "{\"n\": -1}", NULL);
    cr_assert_str_eq(p->leaf->index_name, "m_1_n_1");
    cr_assert(p->sort_provided);
    cr_assert_null(mf_plan_find_stage(p, MF_ST_SORT));
    mf_plan_free(p);
    p = plan_of("{\"n\": 5}", "{\"m\": 1}", NULL);
    cr_assert_not_null(mf_plan_find_stage(p, MF_ST_SORT), "m held arrays: no sort from the index");
    mf_plan_free(p);
    /* p.q and p.r pair through the array p: only p.q is bounded. */
    p = plan_of("{\"p.q\": 1, \"p.r\": 2}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "pq_pr");
    j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"p.q\" : [ \"[1, 1]\" ], \"p.r\" : [ \"[MinKey, MaxKey]\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
}

Test(plan, sort_by_index_avoids_sort_stage)
{
    mf_plan_t *p = plan_of("{}", "{\"a\": -1}", NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_eq(p->leaf->direction, -1);
    cr_assert(p->sort_provided);
    cr_assert_null(mf_plan_find_stage(p, MF_ST_SORT));
    mf_plan_free(p);
    p = plan_of("{}", "{\"t\": 1}", NULL);
    cr_assert_not_null(mf_plan_find_stage(p, MF_ST_SORT), "multikey indexes cannot sort");
    mf_plan_free(p);
}

Test(plan, hints)
{
    mf_plan_t *p = plan_of("{\"a\": 1}", NULL, "{\"h\": {\"$natural\": 1}}");
    cr_assert_eq(p->leaf->kind, MF_ST_COLLSCAN);
    mf_plan_free(p);
    p = plan_of("{\"a\": 1}", NULL, "{\"h\": \"b_-1_c_1\"}");
    cr_assert_str_eq(p->leaf->index_name, "b_-1_c_1");
    mf_plan_free(p);
    p = plan_of("{\"a\": 1}", NULL, "{\"h\": {\"b\": -1, \"c\": 1}}");
    cr_assert_str_eq(p->leaf->index_name, "b_-1_c_1");
    mf_plan_free(p);
    cr_assert_null(plan_of("{\"a\": 1}", NULL, "{\"h\": \"nosuch\"}"));
    cr_assert_null(plan_of("{\"h\": 1}", NULL, "{\"h\": \"h_1\"}"), "hidden indexes cannot be hinted");
}

Test(plan, hidden_and_sparse_rules)
{
    mf_plan_t *p = plan_of("{\"h\": 1}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_COLLSCAN);
    mf_plan_free(p);
    p = plan_of("{\"s\": null}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_COLLSCAN, "a sparse index cannot answer null");
    mf_plan_free(p);
    p = plan_of("{\"s\": 4}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "s_1");
    mf_plan_free(p);
}

Test(plan, contradictory_range_scans_nothing)
{
    mf_plan_t *p = plan_of("{\"a\": {\"$gt\": 10, \"$lt\": 5}}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_eq(p->leaf->niv, 0u);
    mf_plan_free(p);
}

/* Builds {field: {$in: [n ints, shuffled, with duplicates]}} as JSON. */
static char *
big_in_json(const char *field, int n)
{
    size_t cap = (size_t)n * 16 + 64, used = 0;
    char *buf = malloc(cap);
    used += (size_t)snprintf(buf, cap, "{\"%s\": {\"$in\": [", field);
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%d", i ? ", " : "", (i * 7919) % n);
    used += (size_t)snprintf(buf + used, cap - used, ", 0, 1]}}");
    return buf;
}

/* A $in of 10,000 values is an IXSCAN with one sorted point interval per distinct value, on _id and elsewhere. */
Test(plan, a_huge_in_is_an_ixscan_of_sorted_points)
{
    const char *fields[] = {"_id", "a"};
    const char *names[] = {"_id_", "a_1"};
    for (int f = 0; f < 2; f++) {
        char *q = big_in_json(fields[f], 10000);
        mf_plan_t *p = plan_of(q, NULL, NULL);
        free(q);
        cr_assert_not_null(p);
        cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN, "%s: leaf %s", fields[f], mf_plan_stage_name(p->leaf->kind));
        cr_assert_str_eq(p->leaf->index_name, names[f]);
        cr_assert_eq(p->leaf->niv, 10000u, "niv %zu", p->leaf->niv);
        for (size_t i = 1; i < p->leaf->niv; i++) {
            const mf_interval_t *x = &p->leaf->iv[i - 1], *y = &p->leaf->iv[i];
            cr_assert(mf_interval_key_cmp(x->hi, x->hilen, y->lo, y->lolen) < 0, "intervals %zu, %zu overlap", i - 1, i);
        }
        /* Explain prints every interval, in order. */
        bson_iter_t it, ai;
        cr_assert(bson_iter_init_find(&it, p->leaf->bounds, fields[f]) && bson_iter_recurse(&it, &ai));
        int n = 0;
        while (bson_iter_next(&ai)) {
            char want[32];
            snprintf(want, sizeof(want), "[%d, %d]", n, n);
            cr_assert_str_eq(bson_iter_utf8(&ai, NULL), want);
            n++;
        }
        cr_assert_eq(n, 10000);
        mf_plan_free(p);
    }
}

/* Regexes in $in: a prefix regex gives a string range, another all strings; the regex value is a point too. */
Test(plan, regex_in_in_gives_prefix_ranges_and_is_never_exact)
{
    mf_plan_t *p = plan_of("{\"a\": {\"$in\": [5, {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"\"}}]}}",
                           NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[5, 5]\", \"[\\\"ab\\\", \\\"ac\\\")\", \"[/^ab/, /^ab/]\" ] }", "got %s", j);
    bson_free(j);
    cr_assert_not_null(p->fetch->filter, "a regex bound is not exact: the filter stays");
    mf_plan_free(p);
    /* Not a prefix (unanchored, case-insensitive, alternation, optional last char). */
    const char *loose[] = {"b", "^ab|c", "^a.*"};
    const char *opts[] = {"", "", ""};
    for (int i = 0; i < 3; i++) {
        char q[256];
        snprintf(q, sizeof(q), "{\"a\": {\"$in\": [{\"$regularExpression\": {\"pattern\": \"%s\", \"options\": \"%s\"}}]}}",
                 loose[i], opts[i]);
        p = plan_of(q, NULL, NULL);
        j = bounds_json(p);
        cr_assert(strstr(j, "[\\\"\\\", {})") != NULL || (i == 2 && strstr(j, "[\\\"a\\\", \\\"b\\\")") != NULL),
                  "%s: got %s", loose[i], j);
        bson_free(j);
        mf_plan_free(p);
    }
    p = plan_of("{\"a\": {\"$regularExpression\": {\"pattern\": \"^ab?\", \"options\": \"i\"}}}", NULL, NULL);
    j = bounds_json(p);
    cr_assert(strstr(j, "[\\\"\\\", {})") != NULL, "case-insensitive: got %s", j);
    bson_free(j);
    mf_plan_free(p);
    p = plan_of("{\"a\": {\"$regularExpression\": {\"pattern\": \"^x\\\\.y*\", \"options\": \"\"}}}", NULL, NULL);
    j = bounds_json(p);
    cr_assert(strstr(j, "[\\\"x.\\\", \\\"x/\\\")") != NULL, "escaped dot, optional y: got %s", j);
    bson_free(j);
    mf_plan_free(p);
}

/* $or with every branch indexed is an OR of IXSCANs under one FETCH. */
Test(plan, or_of_indexed_branches_is_an_index_union)
{
    mf_plan_t *p = plan_of("{\"$or\": [{\"a\": 1}, {\"b\": {\"$gt\": 3}}, {\"_id\": 7}]}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_OR, "leaf %s", mf_plan_stage_name(p->leaf->kind));
    cr_assert_eq(p->fetch->kind, MF_ST_FETCH);
    cr_assert_eq(p->fetch->child, p->leaf);
    cr_assert_eq(p->leaf->ninputs, 3u);
    cr_assert_str_eq(p->leaf->inputs[0]->index_name, "a_1");
    cr_assert_str_eq(p->leaf->inputs[1]->index_name, "b_-1_c_1");
    cr_assert_str_eq(p->leaf->inputs[2]->index_name, "_id_");
    bson_t ex = BSON_INITIALIZER;
    mf_plan_explain(p, false, &ex);
    char *j = bson_as_relaxed_extended_json(&ex, NULL);
    cr_assert(strstr(j, "\"stage\" : \"FETCH\", \"filter\"") != NULL && strstr(j, "\"stage\" : \"OR\", \"inputStages\" : [ { \"stage\" : \"IXSCAN\"") != NULL,
              "got %s", j);
    bson_free(j);
    bson_destroy(&ex);
    mf_plan_free(p);
    /* A branch without an index: no union, a collection scan. */
    p = plan_of("{\"$or\": [{\"a\": 1}, {\"zz\": 2}]}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_COLLSCAN);
    mf_plan_free(p);
    /* An indexed predicate beside the $or wins over a union. */
    p = plan_of("{\"a\": 4, \"$or\": [{\"b\": 1}, {\"_id\": 2}]}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_str_eq(p->leaf->index_name, "a_1");
    mf_plan_free(p);
    /* With a sort, a SORT stage above the union. */
    p = plan_of("{\"$or\": [{\"a\": 1}, {\"_id\": 2}]}", "{\"a\": 1}", NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_OR);
    cr_assert_not_null(p->sort);
    mf_plan_free(p);
    /* A hint disables the union. */
    p = plan_of("{\"$or\": [{\"a\": 1}, {\"_id\": 2}]}", NULL, "{\"h\": \"a_1\"}");
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    mf_plan_free(p);
}

/* $or of equalities on one path is read as $in: one IXSCAN with point intervals. */
Test(plan, or_of_equalities_on_one_path_is_one_ixscan)
{
    mf_plan_t *p = plan_of("{\"$or\": [{\"a\": 3}, {\"a\": {\"$eq\": 1}}, {\"a\": {\"$in\": [2, 3]}}]}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN, "leaf %s", mf_plan_stage_name(p->leaf->kind));
    cr_assert_str_eq(p->leaf->index_name, "a_1");
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[1, 1]\", \"[2, 2]\", \"[3, 3]\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
}

/* In a union, equality branches on one path are one IXSCAN ($in), at the place of the path's first branch. */
Test(plan, or_groups_equality_branches_per_path)
{
    mf_plan_t *p = plan_of("{\"$or\": [{\"a\": 3}, {\"_id\": 2}, {\"b\": {\"$gt\": 1}}, {\"a\": 1}, "
                           "{\"_id\": {\"$in\": [5, 4]}}, {\"a\": {\"$eq\": 3}}]}",
                           NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_OR, "leaf %s", mf_plan_stage_name(p->leaf->kind));
    cr_assert_eq(p->leaf->ninputs, 3u, "inputs %zu", p->leaf->ninputs);
    cr_assert_str_eq(p->leaf->inputs[0]->index_name, "a_1");
    cr_assert_str_eq(p->leaf->inputs[1]->index_name, "_id_");
    cr_assert_str_eq(p->leaf->inputs[2]->index_name, "b_-1_c_1");
    char *j = bson_as_relaxed_extended_json(p->leaf->inputs[0]->bounds, NULL);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[1, 1]\", \"[3, 3]\" ] }", "got %s", j);
    bson_free(j);
    j = bson_as_relaxed_extended_json(p->leaf->inputs[1]->bounds, NULL);
    cr_assert_str_eq(j, "{ \"_id\" : [ \"[2, 2]\", \"[4, 4]\", \"[5, 5]\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
}

/* Plans {} with min / max (JSON, NULL: absent) and a hint; returns the plan, or NULL with *code. */
static mf_plan_t *
plan_minmax(const char *min, const char *max, const char *hint_json, const char *sort, int *code)
{
    bson_error_t be;
    mf_error_t err = {0};
    bson_t *lo = min ? bson_new_from_json((const uint8_t *)min, -1, &be) : NULL;
    bson_t *hi = max ? bson_new_from_json((const uint8_t *)max, -1, &be) : NULL;
    bson_t *s = sort ? bson_new_from_json((const uint8_t *)sort, -1, &be) : NULL;
    bson_t *h = hint_json ? bson_new_from_json((const uint8_t *)hint_json, -1, &be) : NULL;
    bson_iter_t it;
    bson_value_t hv;
    mf_plan_request_t req = {.min = lo, .max = hi, .sort = s};
    if (h && bson_iter_init(&it, h) && bson_iter_next(&it)) {
        hv = *bson_iter_value(&it);
        req.hint = &hv;
    }
    mf_plan_t *p = NULL;
    int rc = mf_plan_build(&coll, &req, &p, &err);
    *code = rc == 0 ? 0 : err.code;
    if (lo)
        bson_destroy(lo);
    if (hi)
        bson_destroy(hi);
    if (s)
        bson_destroy(s);
    if (h)
        bson_destroy(h);
    return rc == 0 ? p : NULL;
}

Test(plan, min_max_is_one_key_range_on_the_hinted_index)
{
    int code;
    mf_plan_t *p = plan_minmax("{\"a\": 2}", "{\"a\": 3}", "{\"h\": {\"a\": 1}}", NULL, &code);
    cr_assert_not_null(p, "code %d", code);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_str_eq(p->leaf->index_name, "a_1");
    cr_assert_eq(p->leaf->niv, 1u);
    cr_assert(p->leaf->iv[0].lo_incl && !p->leaf->iv[0].hi_incl, "min inclusive, max exclusive");
    const mf_interval_t *iv = &p->leaf->iv[0];
    cr_assert_lt(mf_interval_key_cmp(iv->lo, iv->lolen, iv->hi, iv->hilen), 0);
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"a\" : [ \"[2, 3)\" ] }", "got %s", j);
    bson_free(j);
    cr_assert(p->sort_provided);
    mf_plan_free(p);
    /* A descending first field: min is the larger value; the index's reverse order scans backward. */
    p = plan_minmax("{\"b\": 9, \"c\": 1}", "{\"b\": 2, \"c\": 1}", "{\"h\": \"b_-1_c_1\"}",
                    "{\"b\": 1, \"c\": -1}", &code);
    cr_assert_not_null(p, "code %d", code);
    cr_assert_eq(p->leaf->direction, -1);
    cr_assert(p->sort_provided);
    mf_plan_free(p);
}

Test(plan, min_max_errors_are_mongods)
{
    int code;
    cr_assert_null(plan_minmax("{\"a\": 2}", NULL, NULL, NULL, &code));
    cr_assert_eq(code, 51173);
    cr_assert_null(plan_minmax("{\"a\": 2}", NULL, "{\"h\": {\"$natural\": 1}}", NULL, &code));
    cr_assert_eq(code, 291);
    cr_assert_null(plan_minmax("{\"b\": 2}", NULL, "{\"h\": \"b_-1_c_1\"}", NULL, &code));
    cr_assert_eq(code, 51174, "a prefix of the key pattern is not enough");
    cr_assert_null(plan_minmax("{\"c\": 1, \"b\": 2}", NULL, "{\"h\": \"b_-1_c_1\"}", NULL, &code));
    cr_assert_eq(code, 51174, "nor the fields in another order");
    cr_assert_null(plan_minmax("{\"b\": 2, \"c\": 1}", "{\"b\": 9, \"c\": 1}", "{\"h\": \"b_-1_c_1\"}", NULL, &code));
    cr_assert_eq(code, 51175, "descending b: 2 comes after 9");
    cr_assert_null(plan_minmax("{\"a\": 3}", "{\"a\": 3}", "{\"h\": \"a_1\"}", NULL, &code));
    cr_assert_eq(code, 51175);
    bson_t *x = bson_new_from_json((const uint8_t *)"{\"a\": 1}", -1, NULL);
    bson_t *y = bson_new_from_json((const uint8_t *)"{\"b\": 1}", -1, NULL);
    mf_error_t err = {0};
    cr_assert_eq(mf_plan_minmax_check(x, y, &err), -1);
    cr_assert_eq(err.code, 51176);
    cr_assert_eq(mf_plan_minmax_check(x, x, &err), 0);
    cr_assert_eq(mf_plan_minmax_check(x, NULL, &err), 0);
    bson_destroy(x);
    bson_destroy(y);
}

/* Wildcard indexes (index/index_wild.c): a collection with {a: 1} and {"$**": 1}. */
static void
setup_wild(void)
{
    memset(&coll, 0, sizeof(coll));
    coll.ns = "t.w";
    add_index("{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}", false);
    add_index("{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}", false);
    add_index("{\"v\": 2, \"key\": {\"$**\": 1}, \"name\": \"$**_1\"}", true);
}

TestSuite(plan_wild, .init = setup_wild, .fini = teardown);

Test(plan_wild, a_nested_equality_scans_its_path_under_a_fetch_of_the_whole_filter)
{
    mf_plan_t *p = plan_of("{\"x.y\": 5, \"z\": {\"$ne\": 1}}", NULL, NULL);
    cr_assert_eq(p->leaf->kind, MF_ST_IXSCAN);
    cr_assert_str_eq(p->leaf->index_name, "$**_1");
    cr_assert(p->leaf->multikey, "one path may hold an array: record ids are de-duplicated");
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"$_path\" : [ \"[\\\"x.y\\\", \\\"x.y\\\"]\" ], \"x.y\" : [ \"[5, 5]\" ] }", "got %s", j);
    bson_free(j);
    j = bson_as_relaxed_extended_json(p->leaf->key_pattern, NULL);
    cr_assert_str_eq(j, "{ \"$_path\" : 1, \"x.y\" : 1 }", "got %s", j);
    bson_free(j);
    j = bson_as_relaxed_extended_json(p->fetch->filter, NULL);
    cr_assert_str_eq(j, "{ \"x.y\" : 5, \"z\" : { \"$ne\" : 1 } }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
}

Test(plan_wild, points_beat_ranges_beat_exists_and_a_regular_index_beats_them_all)
{
    mf_plan_t *p = plan_of("{\"r\": {\"$gt\": 1}, \"q\": {\"$in\": [2, 1]}, \"e\": {\"$exists\": true}}", NULL, NULL);
    char *j = bounds_json(p);
    cr_assert_str_eq(j, "{ \"$_path\" : [ \"[\\\"q\\\", \\\"q\\\"]\" ], \"q\" : [ \"[1, 1]\", \"[2, 2]\" ] }", "got %s", j);
    bson_free(j);
    mf_plan_free(p);
    p = plan_of("{\"e\": {\"$exists\": true}}", NULL, NULL);
    j = bounds_json(p);
    cr_assert_str_eq(j,
                     "{ \"$_path\" : [ \"[\\\"e\\\", \\\"e\\\"]\", \"[\\\"e.\\\", \\\"e/\\\")\" ], \"e\" : [ \"[MinKey, MaxKey]\" ] }",
                     "got %s", j);
    bson_free(j);
    mf_plan_free(p);
    p = plan_of("{\"a\": 5, \"x\": 1}", NULL, NULL);
    cr_assert_str_eq(p->leaf->index_name, "a_1");
    mf_plan_free(p);
}

Test(plan_wild, what_it_never_answers)
{
    const char *filters[] = {"{\"x\": null}", "{\"x\": {\"$ne\": 1}}", "{\"x\": {\"$nin\": [1]}}",
                             "{\"x\": {\"$exists\": false}}", "{\"x\": {\"$not\": {\"$gt\": 1}}}", "{\"x\": {\"y\": 1}}",
                             "{\"x\": [1, 2]}", "{\"x\": {\"$regex\": \"^a\"}}", "{\"x.0\": 1}", "{\"x\": {\"$in\": [1, null]}}",
                             "{\"x\": {\"$gt\": {\"$minKey\": 1}}}", "{\"_id\": {\"$gt\": 1}}", "{\"_id.k\": 1}", "{}"};
    for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
        mf_plan_t *p = plan_of(filters[i], NULL, NULL);
        cr_assert_not_null(p, "%s", filters[i]);
        cr_assert(p->leaf->kind != MF_ST_IXSCAN || strcmp(p->leaf->index_name, "$**_1") != 0, "%s used the wildcard index",
                  filters[i]);
        mf_plan_free(p);
    }
}

Test(plan_wild, a_hint_it_cannot_serve_is_291)
{
    mf_plan_t *p = plan_of("{\"x\": 1}", NULL, "{\"h\": \"$**_1\"}");
    cr_assert_not_null(p);
    cr_assert_str_eq(p->leaf->index_name, "$**_1");
    mf_plan_free(p);
    p = plan_of("{\"a\": 1}", NULL, "{\"h\": {\"$**\": 1}}");
    cr_assert_not_null(p);
    cr_assert_str_eq(p->leaf->index_name, "$**_1", "hinted, it serves a path a regular index has too");
    mf_plan_free(p);
    p = plan_of("{\"x\": null}", NULL, "{\"h\": {\"$**\": 1}}");
    cr_assert_null(p, "no predicate it can bound: mongod refuses a whole scan of it");
}
