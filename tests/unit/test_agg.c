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
#include "doc/match.h"

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

/* A fake $currentOp source: two operations; records the options it was given. */
static bool with_current_op;
static char last_current_op_spec[256];

static int
fake_current_op(void *ctx, const bson_t *spec, mf_docvec_t *out, mf_error_t *err)
{
    (void)ctx;
    (void)err;
    char *j = bson_as_relaxed_extended_json(spec, NULL);
    snprintf(last_current_op_spec, sizeof last_current_op_spec, "%s", j);
    bson_free(j);
    bson_t *a = BCON_NEW("opid", BCON_INT32(1), "op", BCON_UTF8("query"), "active", BCON_BOOL(true));
    bson_t *b = BCON_NEW("opid", BCON_INT32(2), "op", BCON_UTF8("none"), "active", BCON_BOOL(false));
    mf_docvec_push_steal(out, a);
    mf_docvec_push_steal(out, b);
    return 0;
}

/* A fake write_out: records the target, the merge options and the documents it received. */
static bool with_write_out;
static char last_write[1024];

static int
fake_write_out(void *ctx, const char *db, const char *coll, mf_docvec_t *docs, const bson_t *merge_spec,
               mf_error_t *err)
{
    (void)ctx;
    (void)err;
    char *spec = merge_spec ? bson_as_relaxed_extended_json(merge_spec, NULL) : NULL;
    int n = snprintf(last_write, sizeof last_write, "%s.%s %s n=%zu", db ? db : "-", coll, spec ? spec : "out",
                     docs->len);
    for (size_t i = 0; i < docs->len && n > 0 && (size_t)n < sizeof last_write; i++) {
        char *j = bson_as_relaxed_extended_json(docs->docs[i], NULL);
        n += snprintf(last_write + n, sizeof last_write - (size_t)n, " %s", j);
        bson_free(j);
    }
    bson_free(spec);
    return 0;
}

/* run: runs pipeline JSON (an array inside {"p": [...]}) on coll; returns the results as JSON. */
static char *
run(const char *coll, const char *pipeline_json, int *rc_out, mf_error_t *err)
{
    bson_error_t berr;
    bson_t *w = bson_new_from_json((const uint8_t *)pipeline_json, -1, &berr);
    bson_iter_t it;
    mf_agg_env_t env = {fake_scan, NULL, with_current_op ? fake_current_op : NULL,
                        with_write_out ? fake_write_out : NULL};
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
    /* MongoDB 8.0: 5107200 for any bad $skip argument (15956 was 4.x's). */
    expect_err("{\"p\": [{\"$skip\": -1}]}", MF_E_Location5107200, "invalid argument to $skip stage");
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

Test(agg, group_std_dev_pop_and_samp)
{
    /* Non-numeric values are ignored; qty = 5, 1, 3, 7, 2 (mean 3.6, squared deviations sum to 23.2). */
    expect("items", "{\"p\": [{\"$group\": {\"_id\": null, \"p\": {\"$stdDevPop\": \"$qty\"}, \"s\": {\"$stdDevSamp\": \"$qty\"},"
                    " \"x\": {\"$stdDevPop\": \"$cat\"}}}, {\"$project\": {\"_id\": 0, \"x\": 1,"
                    " \"p\": {\"$lt\": [{\"$abs\": {\"$subtract\": [\"$p\", 2.1540659]}}, 1e-6]},"
                    " \"s\": {\"$lt\": [{\"$abs\": {\"$subtract\": [\"$s\", 2.4083189]}}, 1e-6]}}}]}",
           "[{ \"x\" : null, \"p\" : true, \"s\" : true }]");
    /* One value per group: population deviation 0, sample deviation null. */
    expect("items", "{\"p\": [{\"$match\": {\"_id\": {\"$lte\": 2}}}, {\"$group\": {\"_id\": \"$cat\", \"p\": {\"$stdDevPop\": \"$qty\"},"
                    " \"s\": {\"$stdDevSamp\": \"$qty\"}}}]}",
           "[{ \"_id\" : \"a\", \"p\" : 0.0, \"s\" : null }, { \"_id\" : \"b\", \"p\" : 0.0, \"s\" : null }]");
    expect_err("{\"p\": [{\"$group\": {\"_id\": null, \"s\": {\"$stdDevSamp\": [1, 2]}}}]}", MF_E_Location40237, NULL);
}

Test(agg, std_dev_as_project_expressions)
{
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$project\": {\"_id\": 0, \"a\": {\"$stdDevPop\": [2, 4, 4, 4, 5, 5, 7, 9]},"
                    " \"b\": {\"$stdDevSamp\": [\"$qty\"]}, \"c\": {\"$stdDevPop\": [[1, 3], \"x\"]}}}]}",
           "[{ \"a\" : 2.0, \"b\" : null, \"c\" : null }]");
}

Test(agg, lookup_let_pipeline_correlated)
{
    /* $$c is the local cat; $expr in the sub-pipeline's $match compares it with the foreign _id. */
    expect("items", "{\"p\": [{\"$match\": {\"_id\": {\"$lte\": 3}}}, {\"$lookup\": {\"from\": \"cats\", \"let\": {\"c\": \"$cat\", \"q\": \"$qty\"},"
                    " \"pipeline\": [{\"$match\": {\"$expr\": {\"$eq\": [\"$_id\", \"$$c\"]}}},"
                    " {\"$project\": {\"_id\": 0, \"label\": 1, \"q2\": {\"$multiply\": [\"$$q\", 2]}}}], \"as\": \"c\"}},"
                    " {\"$project\": {\"c\": 1}}]}",
           "[{ \"_id\" : 1, \"c\" : [ { \"label\" : \"Alpha\", \"q2\" : 10 } ] },"
           " { \"_id\" : 2, \"c\" : [ { \"label\" : \"Beta\", \"q2\" : 2 } ] },"
           " { \"_id\" : 3, \"c\" : [ { \"label\" : \"Alpha\", \"q2\" : 6 } ] }]");
    /* An uncorrelated pipeline runs over the whole foreign collection. */
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$lookup\": {\"from\": \"cats\", \"pipeline\": [{\"$count\": \"n\"}], \"as\": \"k\"}},"
                    " {\"$project\": {\"k\": 1}}]}",
           "[{ \"_id\" : 1, \"k\" : [ { \"n\" : 4 } ] }]");
    /* A $let inside the sub-pipeline shadows the lookup variable. */
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 2}}, {\"$lookup\": {\"from\": \"cats\", \"let\": {\"c\": \"$cat\"},"
                    " \"pipeline\": [{\"$match\": {\"_id\": \"a\"}}, {\"$project\": {\"_id\": 0, \"o\": \"$$c\", \"i\": {\"$let\": {\"vars\": {\"c\": 1}, \"in\": \"$$c\"}}}}], \"as\": \"c\"}},"
                    " {\"$project\": {\"c\": 1}}]}",
           "[{ \"_id\" : 2, \"c\" : [ { \"o\" : \"b\", \"i\" : 1 } ] }]");
}

Test(agg, lookup_let_with_local_and_foreign_fields)
{
    expect("cats", "{\"p\": [{\"$match\": {\"_id\": \"a\"}}, {\"$lookup\": {\"from\": \"items\", \"localField\": \"_id\", \"foreignField\": \"cat\","
                   " \"let\": {\"min\": 4}, \"pipeline\": [{\"$match\": {\"$expr\": {\"$gte\": [\"$qty\", \"$$min\"]}}}], \"as\": \"big\"}},"
                   " {\"$project\": {\"ids\": \"$big._id\"}}]}",
           "[{ \"_id\" : \"a\", \"ids\" : [ 1 ] }]");
}

Test(agg, nested_lookup_sees_outer_variables)
{
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$lookup\": {\"from\": \"cats\", \"let\": {\"c\": \"$cat\"}, \"pipeline\": ["
                    " {\"$match\": {\"$expr\": {\"$eq\": [\"$_id\", \"$$c\"]}}},"
                    " {\"$lookup\": {\"from\": \"items\", \"let\": {\"id\": \"$_id\"}, \"pipeline\": ["
                    "   {\"$match\": {\"$expr\": {\"$and\": [{\"$eq\": [\"$cat\", \"$$id\"]}, {\"$eq\": [\"$cat\", \"$$c\"]}]}}},"
                    "   {\"$project\": {\"_id\": 1}}], \"as\": \"same\"}},"
                    " {\"$project\": {\"_id\": 0, \"same\": 1}}], \"as\": \"r\"}}, {\"$project\": {\"r\": 1}}]}",
           "[{ \"_id\" : 1, \"r\" : [ { \"same\" : [ { \"_id\" : 1 }, { \"_id\" : 3 } ] } ] }]");
}

Test(agg, lookup_let_validation)
{
    expect_err("{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"pipeline\": [{\"$match\": {\"$expr\": {\"$eq\": [\"$_id\", \"$$nope\"]}}}], \"as\": \"c\"}}]}",
               MF_E_Location17276, "Use of undefined variable: nope");
    expect_err("{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"let\": {\"Bad\": 1}, \"pipeline\": [], \"as\": \"c\"}}]}",
               MF_E_Location16867, "starts with an invalid character");
    expect_err("{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"let\": 5, \"pipeline\": [], \"as\": \"c\"}}]}", MF_E_FailedToParse, NULL);
    expect_err("{\"p\": [{\"$lookup\": {\"let\": {\"a\": 1}, \"pipeline\": [], \"as\": \"c\"}}]}", MF_E_FailedToParse,
               "must have a pipeline with $documents as first stage");
    /* The let variables do not leak out of the sub-pipeline. */
    expect_err("{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"let\": {\"v\": 1}, \"pipeline\": [], \"as\": \"c\"}},"
               " {\"$project\": {\"x\": \"$$v\"}}]}", MF_E_Location17276, NULL);
}

Test(agg, documents_stage_is_a_collectionless_source)
{
    mf_error_t err;
    bson_t *w = BCON_NEW("p", "[", "{", "$documents", "[", "{", "a", BCON_INT32(1), "}", "]", "}", "]");
    bson_iter_t it;
    bson_iter_init_find(&it, w, "p");
    mf_pipeline_t *p = mf_pipeline_new(bson_iter_value(&it), &err);
    cr_assert(p != NULL, "%s", err.msg);
    cr_assert(mf_pipeline_is_collectionless(p));
    cr_assert(!mf_pipeline_is_current_op(p));
    /* Runs without a scanner or collection name. */
    mf_agg_env_t env = {NULL, NULL, NULL};
    mf_docvec_t out;
    mf_docvec_init(&out);
    cr_assert_eq(mf_pipeline_run(p, &env, NULL, &out, &err), 0, "%s", err.msg);
    cr_assert_eq(out.len, 1, "got %zu docs", out.len);
    mf_docvec_destroy(&out);
    mf_pipeline_free(p);
    bson_destroy(w);

    expect("nosuch", "{\"p\": [{\"$documents\": [{\"x\": 1}, {\"x\": 2}, {\"x\": 3}]}, {\"$match\": {\"x\": {\"$gte\": 2}}},"
                     " {\"$group\": {\"_id\": null, \"s\": {\"$sum\": \"$x\"}}}]}",
           "[{ \"_id\" : null, \"s\" : 5 }]");
    expect("nosuch", "{\"p\": [{\"$documents\": {\"$map\": {\"input\": {\"$range\": [0, 2]}, \"in\": {\"i\": \"$$this\"}}}}]}",
           "[{ \"i\" : 0 }, { \"i\" : 1 }]");
    expect("nosuch", "{\"p\": [{\"$documents\": []}]}", "[]");
    expect_err("{\"p\": [{\"$documents\": 1}]}", MF_E_Location5858203, NULL);
    expect_err("{\"p\": [{\"$documents\": [1]}]}", MF_E_Location40228, NULL);
    expect_err("{\"p\": [{\"$match\": {}}, {\"$documents\": []}]}", MF_E_Location40602,
               "$documents is only valid as the first stage in a pipeline");
    /* A $lookup whose sub-pipeline starts with $documents needs no 'from' and may use let variables. */
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 1}}, {\"$lookup\": {\"let\": {\"q\": \"$qty\"}, \"pipeline\": [{\"$documents\": [{\"v\": \"$$q\"}]}], \"as\": \"d\"}},"
                    " {\"$project\": {\"d\": 1}}]}",
           "[{ \"_id\" : 1, \"d\" : [ { \"v\" : 5 } ] }]");
}

Test(agg, current_op_stage)
{
    /* Without the callback (not on admin) the stage fails as MongoDB does. */
    expect_err("{\"p\": [{\"$currentOp\": {}}]}", MF_E_InvalidNamespace, "admin");
    expect_err("{\"p\": [{\"$match\": {}}, {\"$currentOp\": {}}]}", MF_E_Location40602, NULL);
    expect_err("{\"p\": [{\"$currentOp\": {\"bogus\": true}}]}", MF_E_FailedToParse, NULL);
    expect_err("{\"p\": [{\"$currentOp\": {\"allUsers\": 1}}]}", MF_E_FailedToParse, NULL);
    expect_err("{\"p\": [{\"$currentOp\": 1}]}", MF_E_FailedToParse, NULL);
    with_current_op = true;
    expect("admin-ignored", "{\"p\": [{\"$currentOp\": {\"allUsers\": true, \"idleConnections\": false}}, {\"$match\": {\"active\": true}},"
                            " {\"$project\": {\"_id\": 0, \"opid\": 1}}]}",
           "[{ \"opid\" : 1 }]");
    cr_assert(strstr(last_current_op_spec, "\"allUsers\" : true") != NULL, "spec passed: %s", last_current_op_spec);

    mf_error_t err;
    bson_t *w = BCON_NEW("p", "[", "{", "$currentOp", "{", "}", "}", "]");
    bson_iter_t it;
    bson_iter_init_find(&it, w, "p");
    mf_pipeline_t *p = mf_pipeline_new(bson_iter_value(&it), &err);
    cr_assert(p != NULL);
    cr_assert(mf_pipeline_is_collectionless(p) && mf_pipeline_is_current_op(p));
    mf_pipeline_free(p);
    bson_destroy(w);
}

Test(agg, sample_stage)
{
    mf_error_t err;
    int rc;
    char *got = run("items", "{\"p\": [{\"$sample\": {\"size\": 3}}, {\"$project\": {\"_id\": 1}}]}", &rc, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    int n = 0;
    for (const char *q = got; (q = strstr(q, "_id")) != NULL; q++)
        n++;
    cr_assert_eq(n, 3, "three documents sampled: %s", got);
    bson_free(got);
    /* A size larger than the input returns everything (in some order). */
    expect("items", "{\"p\": [{\"$sample\": {\"size\": 100}}, {\"$sort\": {\"_id\": 1}}, {\"$project\": {\"_id\": 1}}]}",
           "[{ \"_id\" : 1 }, { \"_id\" : 2 }, { \"_id\" : 3 }, { \"_id\" : 4 }, { \"_id\" : 5 }]");
    expect("items", "{\"p\": [{\"$sample\": {\"size\": 0}}]}", "[]");
    expect_err("{\"p\": [{\"$sample\": 3}]}", MF_E_Location28745, NULL);
    expect_err("{\"p\": [{\"$sample\": {}}]}", MF_E_Location28749, NULL);
    expect_err("{\"p\": [{\"$sample\": {\"size\": \"x\"}}]}", MF_E_Location28746, NULL);
    expect_err("{\"p\": [{\"$sample\": {\"size\": -1}}]}", MF_E_Location28747, NULL);
    expect_err("{\"p\": [{\"$sample\": {\"size\": 1, \"x\": 1}}]}", MF_E_Location28748, NULL);
}

Test(agg, bucket_groups_by_boundaries_and_sorts_by_id)
{
    expect("items",
           "{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [0, 3, 6], \"default\": \"other\"}}]}",
           "[{ \"_id\" : 0, \"count\" : 2 }, { \"_id\" : 3, \"count\" : 2 }, { \"_id\" : \"other\", \"count\" : 1 }]");
    expect("items",
           "{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [0, 8], "
           "\"output\": {\"ids\": {\"$push\": \"$_id\"}, \"total\": {\"$sum\": \"$qty\"}}}}]}",
           "[{ \"_id\" : 0, \"ids\" : [ 1, 2, 3, 4, 5 ], \"total\" : 18 }]");
}

Test(agg, bucket_validation)
{
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [0, 3, 6]}}]}", MF_E_Location40066,
               NULL);
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [0]}}]}", MF_E_Location40192, NULL);
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [3, 1]}}]}", MF_E_Location40194, NULL);
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [1, \"a\"]}}]}", MF_E_Location40193,
               NULL);
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": [0, 5], \"default\": 2}}]}",
               MF_E_Location40199, NULL);
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"qty\", \"boundaries\": [0, 5]}}]}", MF_E_Location40202, NULL);
    expect_err("{\"p\": [{\"$bucket\": {\"groupBy\": \"$qty\", \"boundaries\": 5}}]}", MF_E_Location40200, NULL);
}

Test(agg, out_and_merge_hand_their_documents_to_write_out)
{
    with_write_out = true;
    expect("items", "{\"p\": [{\"$match\": {\"cat\": \"a\"}}, {\"$project\": {\"qty\": 1}}, {\"$out\": \"dest\"}]}",
           "[]");
    cr_assert_str_eq(last_write, "-.dest out n=2 { \"_id\" : 1, \"qty\" : 5 } { \"_id\" : 3, \"qty\" : 3 }");
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 2}}, {\"$out\": {\"db\": \"other\", \"coll\": \"x\"}}]}", "[]");
    cr_assert(strncmp(last_write, "other.x out n=1", 15) == 0, "got %s", last_write);
    expect("items", "{\"p\": [{\"$match\": {\"_id\": 2}}, {\"$project\": {\"_id\": 1}}, {\"$merge\": \"t\"}]}", "[]");
    cr_assert_str_eq(last_write,
                     "-.t { \"on\" : [ \"_id\" ], \"whenMatched\" : \"merge\", \"whenNotMatched\" : \"insert\" } "
                     "n=1 { \"_id\" : 2 }");
    expect("items",
           "{\"p\": [{\"$match\": {\"_id\": 2}}, {\"$project\": {\"_id\": 1}}, {\"$merge\": {\"into\": {\"db\": \"d\", "
           "\"coll\": \"t\"}, \"on\": [\"a\", \"b\"], \"whenMatched\": \"replace\", \"whenNotMatched\": "
           "\"discard\"}}]}",
           "[]");
    cr_assert_str_eq(last_write,
                     "d.t { \"on\" : [ \"a\", \"b\" ], \"whenMatched\" : \"replace\", \"whenNotMatched\" : "
                     "\"discard\" } n=1 { \"_id\" : 2 }");
    with_write_out = false;
}

Test(agg, out_and_merge_validation)
{
    with_write_out = true;
    expect_err("{\"p\": [{\"$out\": \"dest\"}, {\"$limit\": 1}]}", MF_E_Location40601,
               "$out can only be the final stage in the pipeline");
    expect_err("{\"p\": [{\"$merge\": \"dest\"}, {\"$merge\": \"d2\"}]}", MF_E_Location40601, NULL);
    expect_err("{\"p\": [{\"$facet\": {\"a\": [{\"$out\": \"x\"}]}}]}", MF_E_Location40600, NULL);
    expect_err("{\"p\": [{\"$lookup\": {\"from\": \"cats\", \"as\": \"c\", \"pipeline\": [{\"$merge\": \"x\"}]}}]}",
               MF_E_Location51047, NULL);
    expect_err("{\"p\": [{\"$merge\": {\"into\": \"t\", \"whenMatched\": \"upsert\"}}]}", MF_E_BadValue, NULL);
    expect_err("{\"p\": [{\"$merge\": {\"on\": \"_id\"}}]}", MF_E_Location40414, NULL);
    expect_err("{\"p\": [{\"$merge\": {\"into\": \"t\", \"bogus\": 1}}]}", MF_E_Location40415, NULL);
    expect_err("{\"p\": [{\"$out\": 5}]}", MF_E_Location16990, NULL);
    with_write_out = false;
    expect_err("{\"p\": [{\"$out\": \"dest\"}]}", MF_E_IllegalOperation, NULL);
}

Test(agg, change_stream_is_refused_on_a_standalone)
{
    expect_err("{\"p\": [{\"$changeStream\": {}}]}", MF_E_Location40573, "only supported on replica sets");
}
