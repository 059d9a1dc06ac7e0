/*
 * test_agg.c: aggregation pipelines over an in-memory collection.
 *
 * The fake env->scan serves documents from static JSON arrays keyed by
 * collection name, applying the filter it is given with the matcher, and
 * records the filter it was passed so the $match push-down can be checked.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "query/agg.h"
#include "query/match.h"

typedef struct fake {
    const char *name;
    const char *json; /* {"d": [docs...]} */
} fake_t;

static const fake_t COLLS[] = {
    {"items", "{\"d\": ["
              "{\"_id\": 1, \"cat\": \"a\", \"qty\": 5, \"price\": 2.5, \"tags\": [\"x\", \"y\"], \"sub\": {\"k\": 1, \"j\": 2}},"
              "{\"_id\": 2, \"cat\": \"b\", \"qty\": 1, \"price\": 10, \"tags\": [], \"sub\": {\"k\": 2, \"j\": 3}},"
              "{\"_id\": 3, \"cat\": \"a\", \"qty\": 3, \"price\": 1, \"tags\": [\"y\"]},"
              "{\"_id\": 4, \"cat\": null, \"qty\": 7, \"tags\": null},"
              "{\"_id\": 5, \"qty\": 2}"
              "]}"},
    {"cats", "{\"d\": ["
             "{\"_id\": \"a\", \"label\": \"Alpha\"},"
             "{\"_id\": \"b\", \"label\": \"Beta\"},"
             "{\"_id\": \"n\", \"label\": \"None\", \"code\": null},"
             "{\"_id\": \"m\", \"label\": \"Missing\"}"
             "]}"},
    {NULL, NULL},
};

static char last_filter[512];

static int
fake_scan(void *ctx, const char *coll, const bson_t *filter, mf_agg_visit_fn visit, void *arg, mf_error_t *err)
{
    (void)ctx;
    last_filter[0] = '\0';
    if (filter) {
        char *s = bson_as_relaxed_extended_json(filter, NULL);
        snprintf(last_filter, sizeof last_filter, "%s", s);
        bson_free(s);
    }
    for (const fake_t *f = COLLS; f->name; f++) {
        if (strcmp(f->name, coll) != 0)
            continue;
        bson_t *all = bson_new_from_json((const uint8_t *)f->json, -1, NULL);
        mf_matcher_t *m = mf_matcher_new(filter, err);
        bson_iter_t it, d;
        int rc = 0;
        if (m == NULL) {
            bson_destroy(all);
            return -1;
        }
        bson_iter_init_find(&it, all, "d");
        bson_iter_recurse(&it, &d);
        while (bson_iter_next(&d)) {
            const uint8_t *data;
            uint32_t len;
            bson_t doc;
            bson_iter_document(&d, &len, &data);
            bson_init_static(&doc, data, len);
            if (!mf_matcher_match(m, &doc, NULL))
                continue;
            int r = visit(arg, &doc);
            if (r != 0) {
                rc = r < 0 ? -1 : 0;
                break;
            }
        }
        mf_matcher_free(m);
        bson_destroy(all);
        return rc;
    }
    return 0;
}

/* run: runs pipeline JSON (an array inside {"p": [...]}) on coll; returns the results as JSON. */
static char *
run(const char *coll, const char *pipeline_json, int *rc_out, mf_error_t *err)
{
    bson_error_t berr;
    bson_t *w = bson_new_from_json((const uint8_t *)pipeline_json, -1, &berr);
    bson_iter_t it;
    mf_agg_env_t env = {fake_scan, NULL};
    mf_docvec_t out;
    bson_string_t *s = bson_string_new("[");

    cr_assert(w != NULL, "bad JSON %s: %s", pipeline_json, berr.message);
    cr_assert(bson_iter_init_find(&it, w, "p"));
    mf_err_clear(err);
    mf_docvec_init(&out);
    *rc_out = -1;
    mf_pipeline_t *p = mf_pipeline_new(bson_iter_value(&it), err);
    if (p) {
        *rc_out = mf_pipeline_run(p, &env, coll, &out, err);
        mf_pipeline_free(p);
    }
    for (size_t i = 0; i < out.len; i++) {
        char *j = bson_as_relaxed_extended_json(out.docs[i], NULL);
        bson_string_append_printf(s, "%s%s", i ? ", " : "", j);
        bson_free(j);
    }
    bson_string_append(s, "]");
    mf_docvec_destroy(&out);
    bson_destroy(w);
    return bson_string_free(s, false);
}

static void
expect(const char *coll, const char *pipeline_json, const char *expected)
{
    mf_error_t err;
    int rc;
    char *got = run(coll, pipeline_json, &rc, &err);
    cr_assert_eq(rc, 0, "%s failed: %d %s", pipeline_json, err.code, err.msg);
    cr_assert_str_eq(got, expected, "%s:\n got      %s\n expected %s", pipeline_json, got, expected);
    bson_free(got);
}

static void
expect_err(const char *pipeline_json, int code, const char *msg_part)
{
    mf_error_t err;
    int rc;
    char *got = run("items", pipeline_json, &rc, &err);
    cr_assert_eq(rc, -1, "%s should fail, got %s", pipeline_json, got);
    cr_assert_eq(err.code, code, "%s: code %d, expected %d (%s)", pipeline_json, err.code, code, err.msg);
    if (msg_part)
        cr_assert(strstr(err.msg, msg_part) != NULL, "%s: message '%s' lacks '%s'", pipeline_json, err.msg, msg_part);
    bson_free(got);
}

Test(agg, stage_validation)
{
    expect_err("{\"p\": [{\"$match\": {}, \"$limit\": 1}]}", MF_E_Location40323,
               "A pipeline stage specification object must contain exactly one field.");
    expect_err("{\"p\": [{}]}", MF_E_Location40323, NULL);
    expect_err("{\"p\": [{\"$foo\": 1}]}", MF_E_Location40324, "Unrecognized pipeline stage name: '$foo'");
    expect_err("{\"p\": [{\"$limit\": 0}]}", MF_E_Location15958, NULL);
    expect_err("{\"p\": [{\"$skip\": -1}]}", MF_E_Location15956, NULL);
    expect_err("{\"p\": [{\"$group\": {\"n\": {\"$sum\": 1}}}]}", MF_E_Location15955, NULL);
    expect_err("{\"p\": [{\"$group\": {\"_id\": null, \"n\": {\"$bogus\": 1}}}]}", MF_E_Location15952, NULL);
    expect_err("{\"p\": [{\"$project\": {\"a\": 1, \"b\": 0}}]}", MF_E_Location31254, NULL);
    expect_err("{\"p\": [{\"$project\": {}}]}", MF_E_Location51272, NULL);
    expect_err("{\"p\": [{\"$project\": {\"a\": {\"$foo\": 1}}}]}", MF_E_InvalidPipelineOperator, NULL);
    expect_err("{\"p\": [{\"$project\": {\"a\": {\"$divide\": [1, 0]}}}]}", MF_E_BadValue, "divide by zero");
}

Test(agg, match_is_pushed_down_and_applied)
{
    expect("items", "{\"p\": [{\"$match\": {\"cat\": \"a\"}}, {\"$project\": {\"_id\": 1}}]}",
           "[{ \"_id\" : 1 }, { \"_id\" : 3 }]");
    cr_assert(strstr(last_filter, "\"cat\" : \"a\"") != NULL, "filter pushed down: %s", last_filter);
}

Test(agg, project_inclusion_exclusion_and_expressions)
{
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$project\": {\"qty\": 1, \"total\": {\"$multiply\": [\"$qty\", \"$price\"]}}}]}",
           "[{ \"_id\" : 1, \"qty\" : 5, \"total\" : 12.5 }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$project\": {\"_id\": 0, \"sub.k\": 1}}]}",
           "[{ \"sub\" : { \"k\" : 1 } }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$project\": {\"tags\": 0, \"sub\": {\"j\": 0}, \"price\": 0}}]}",
           "[{ \"_id\" : 1, \"cat\" : \"a\", \"qty\" : 5, \"sub\" : { \"k\" : 1 } }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 5}}, {\"$project\": {\"c\": \"$cat\", \"lit\": \"x\"}}]}",
           "[{ \"_id\" : 5, \"lit\" : \"x\" }]");
}

Test(agg, add_fields_set_and_unset)
{
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 2}}, {\"$addFields\": {\"qty\": 100, \"sub.z\": \"$cat\"}}, {\"$unset\": [\"tags\", \"price\"]}]}",
           "[{ \"_id\" : 2, \"cat\" : \"b\", \"qty\" : 100, \"sub\" : { \"k\" : 2, \"j\" : 3, \"z\" : \"b\" } }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 5}}, {\"$set\": {\"n\": {\"$add\": [\"$qty\", 1]}}}, {\"$unset\": \"_id\"}]}",
           "[{ \"qty\" : 2, \"n\" : 3 }]");
}

Test(agg, sort_skip_limit)
{
    expect("items", "{\"p\": [{\"$sort\": {\"qty\": -1}}, {\"$skip\": 1}, {\"$limit\": 2}, {\"$project\": {\"qty\": 1}}]}",
           "[{ \"_id\" : 1, \"qty\" : 5 }, { \"_id\" : 3, \"qty\" : 3 }]");
}

Test(agg, group_with_accumulators)
{
    expect("items",
           "{\"p\": [{\"$group\": {\"_id\": \"$cat\", \"n\": {\"$sum\": 1}, \"q\": {\"$sum\": \"$qty\"}, \"avg\": {\"$avg\": \"$qty\"},"
           " \"mn\": {\"$min\": \"$qty\"}, \"mx\": {\"$max\": \"$qty\"}, \"f\": {\"$first\": \"$_id\"}, \"l\": {\"$last\": \"$_id\"},"
           " \"ids\": {\"$push\": \"$_id\"}, \"c\": {\"$count\": {}}}}, {\"$sort\": {\"_id\": 1}}]}",
           "[{ \"_id\" : null, \"n\" : 2, \"q\" : 9, \"avg\" : 4.5, \"mn\" : 2, \"mx\" : 7, \"f\" : 4, \"l\" : 5, \"ids\" : [ 4, 5 ], \"c\" : 2 }, "
           "{ \"_id\" : \"a\", \"n\" : 2, \"q\" : 8, \"avg\" : 4.0, \"mn\" : 3, \"mx\" : 5, \"f\" : 1, \"l\" : 3, \"ids\" : [ 1, 3 ], \"c\" : 2 }, "
           "{ \"_id\" : \"b\", \"n\" : 1, \"q\" : 1, \"avg\" : 1.0, \"mn\" : 1, \"mx\" : 1, \"f\" : 2, \"l\" : 2, \"ids\" : [ 2 ], \"c\" : 1 }]");
    expect("items", "{\"p\": [{\"$group\": {\"_id\": {\"c\": \"$cat\"}, \"t\": {\"$addToSet\": \"$qty\"}}}, {\"$match\": {\"_id.c\": \"b\"}}]}",
           "[{ \"_id\" : { \"c\" : \"b\" }, \"t\" : [ 1 ] }]");
    expect("items", "{\"p\": [{\"$group\": {\"_id\": null, \"total\": {\"$sum\": \"$price\"}}}]}",
           "[{ \"_id\" : null, \"total\" : 13.5 }]");
}

Test(agg, count_and_sort_by_count)
{
    expect("items", "{\"p\": [{\"$match\": {\"qty\": {\"$gt\": 2}}}, {\"$count\": \"n\"}]}", "[{ \"n\" : 3 }]");
    expect("items", "{\"p\": [{\"$match\": {\"qty\": {\"$gt\": 100}}}, {\"$count\": \"n\"}]}", "[]");
    expect("items", "{\"p\": [{\"$match\": {\"cat\": {\"$in\": [\"a\", \"b\"]}}}, {\"$sortByCount\": \"$cat\"}]}",
           "[{ \"_id\" : \"a\", \"count\" : 2 }, { \"_id\" : \"b\", \"count\" : 1 }]");
}

Test(agg, unwind_forms)
{
    expect("items", "{\"p\": [{\"$unwind\": \"$tags\"}, {\"$project\": {\"tags\": 1}}]}",
           "[{ \"_id\" : 1, \"tags\" : \"x\" }, { \"_id\" : 1, \"tags\" : \"y\" }, { \"_id\" : 3, \"tags\" : \"y\" }]");
    expect("items", "{\"p\": [{\"$unwind\": {\"path\": \"$tags\", \"includeArrayIndex\": \"i\", \"preserveNullAndEmptyArrays\": true}},"
                    " {\"$project\": {\"tags\": 1, \"i\": 1}}]}",
           "[{ \"_id\" : 1, \"tags\" : \"x\", \"i\" : 0 }, { \"_id\" : 1, \"tags\" : \"y\", \"i\" : 1 }, { \"_id\" : 2, \"i\" : null }, "
           "{ \"_id\" : 3, \"tags\" : \"y\", \"i\" : 0 }, { \"_id\" : 4, \"tags\" : null, \"i\" : null }, { \"_id\" : 5, \"i\" : null }]");
    expect_err("{\"p\": [{\"$unwind\": \"tags\"}]}", MF_E_Location28818, NULL);
}

Test(agg, replace_root_and_with)
{
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$replaceRoot\": {\"newRoot\": \"$sub\"}}]}", "[{ \"k\" : 1, \"j\" : 2 }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 2}}, {\"$replaceWith\": {\"x\": \"$qty\"}}]}", "[{ \"x\" : 1 }]");
    expect_err("{\"p\": [{\"$match\": {\"_id\": 5}}, {\"$replaceRoot\": {\"newRoot\": \"$sub\"}}]}", MF_E_Location40228, NULL);
}

Test(agg, lookup_equality)
{
    expect("items", "{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"localField\": \"cat\", \"foreignField\": \"_id\", \"as\": \"c\"}},"
                    " {\"$project\": {\"n\": {\"$size\": \"$c\"}}}]}",
           "[{ \"_id\" : 1, \"n\" : 1 }, { \"_id\" : 2, \"n\" : 1 }, { \"_id\" : 3, \"n\" : 1 }, { \"_id\" : 4, \"n\" : 0 }, { \"_id\" : 5, \"n\" : 0 }]");
    /* A null or missing local value matches foreign documents whose field is null or missing. */
    expect("items", "{\"p\": [{\"$match\": {\"_id\": {\"$in\": [4, 5]}}}, {\"$lookup\": {\"from\": \"cats\", \"localField\": \"cat\", \"foreignField\": \"code\", \"as\": \"c\"}},"
                    " {\"$project\": {\"l\": \"$c.label\"}}]}",
           "[{ \"_id\" : 4, \"l\" : [ \"Alpha\", \"Beta\", \"None\", \"Missing\" ] }, { \"_id\" : 5, \"l\" : [ \"Alpha\", \"Beta\", \"None\", \"Missing\" ] }]");
    /* An array local value matches any element. */
    expect("cats", "{\"p\": [{\"$match\": {\"_id\": \"a\"}}, {\"$lookup\": {\"from\": \"items\", \"localField\": \"_id\", \"foreignField\": \"cat\", \"as\": \"items\"}},"
                   " {\"$project\": {\"ids\": \"$items._id\"}}]}",
           "[{ \"_id\" : \"a\", \"ids\" : [ 1, 3 ] }]");
}

Test(agg, facet)
{
    expect("items", "{\"p\": [{\"$facet\": {\"n\": [{\"$count\": \"c\"}], \"top\": [{\"$sort\": {\"qty\": -1}}, {\"$limit\": 1}, {\"$project\": {\"_id\": 1}}]}}]}",
           "[{ \"n\" : [ { \"c\" : 5 } ], \"top\" : [ { \"_id\" : 4 } ] }]");
}

Test(agg, first_match_accessor)
{
    mf_error_t err;
    bson_t *w = bson_new_from_json((const uint8_t *)"{\"p\": [{\"$match\": {\"a\": 1}}, {\"$limit\": 1}]}", -1, NULL);
    bson_iter_t it;
    bson_iter_init_find(&it, w, "p");
    mf_pipeline_t *p = mf_pipeline_new(bson_iter_value(&it), &err);
    cr_assert(p != NULL);
    const bson_t *f = mf_pipeline_first_match(p);
    cr_assert(f != NULL);
    cr_assert(bson_has_field(f, "a"));
    mf_pipeline_free(p);
    bson_destroy(w);
}

Test(agg, nested_projection_and_add_fields_on_arrays)
{
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 5}}, {\"$project\": {\"x.y\": {\"$literal\": 1}}}]}",
           "[{ \"_id\" : 5, \"x\" : { \"y\" : 1 } }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$project\": {\"_id\": 0, \"o\": {\"a\": \"$qty\", \"b\": \"$cat\"}}}]}",
           "[{ \"o\" : { \"a\" : 5, \"b\" : \"a\" } }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$project\": {\"_id\": 0, \"t\": [\"$qty\", \"$nope\"]}}]}",
           "[{ \"t\" : [ 5, null ] }]");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$set\": {\"arr\": [{\"a\": 1}, {\"a\": 2}]}}, {\"$set\": {\"arr.b\": 0}}, {\"$project\": {\"arr\": 1, \"_id\": 0}}]}",
           "[{ \"arr\" : [ { \"a\" : 1, \"b\" : 0 }, { \"a\" : 2, \"b\" : 0 } ] }]");
    expect_err("{\"p\": [{\"$group\": {\"_id\": null, \"s\": {\"$push\": {\"$divide\": [1, 0]}}}}]}", MF_E_BadValue, NULL);
    expect_err("{\"p\": [{\"$facet\": {\"x\": [{\"$foo\": 1}]}}]}", MF_E_Location40324, NULL);
    expect_err("{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"as\": \"c\"}}]}", MF_E_FailedToParse, NULL);
}
