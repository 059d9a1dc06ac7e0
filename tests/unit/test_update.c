/*
 * test_update.c: update operators, replacement updates, positional and
 * array-filter paths, MongoDB's error codes, and the upsert seed document.
 * Documents are written as JSON with single quotes for readability.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "doc/update.h"

/* J: parses relaxed extended JSON written with single quotes. Caller destroys. */
static bson_t *
J(const char *json)
{
    char *s = strdup(json);
    bson_error_t e;
    bson_t *b;

    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    b = bson_new_from_json((const uint8_t *)s, -1, &e);
    cr_assert(b != NULL, "bad test JSON %s: %s", json, e.message);
    free(s);
    return b;
}

static char *
S(const bson_t *b)
{
    return bson_as_canonical_extended_json(b, NULL);
}

/* run: applies upd to doc; returns the rc, fills out (initialised here) and err. */
static int
run(const char *upd, const char *filters, const char *doc, int pos, bool insert, bson_t *out, bool *changed,
    mf_error_t *err)
{
    bson_t *u = J(upd), *d = J(doc);
    bson_value_t fv;
    bson_t *fdoc = NULL;
    mf_update_t *up;
    mf_match_details_t det = {pos};
    int rc = -1;

    mf_err_clear(err);
    bson_init(out);
    if (filters) {
        char buf[4096];
        bson_iter_t it;
        snprintf(buf, sizeof(buf), "{'f': %s}", filters);
        fdoc = J(buf);
        bson_iter_init_find(&it, fdoc, "f");
        fv = *bson_iter_value(&it);
    }
    up = mf_update_new(u, filters ? &fv : NULL, err);
    if (up) {
        rc = mf_update_apply(up, d, &det, insert, out, changed, err);
        mf_update_free(up);
    }
    bson_destroy(u);
    bson_destroy(d);
    if (fdoc)
        bson_destroy(fdoc);
    return rc;
}

static void
expect_full(const char *upd, const char *filters, const char *doc, int pos, bool insert, const char *want)
{
    bson_t out;
    bool changed;
    mf_error_t err;
    int rc = run(upd, filters, doc, pos, insert, &out, &changed, &err);
    bson_t *w;
    char *got, *exp;

    cr_assert_eq(rc, 0, "update %s on %s failed: %d %s", upd, doc, err.code, err.msg);
    w = J(want);
    got = S(&out);
    exp = S(w);
    cr_assert(bson_equal(&out, w), "update %s on %s: got %s, want %s", upd, doc, got, exp);
    bson_free(got);
    bson_free(exp);
    bson_destroy(w);
    bson_destroy(&out);
}

static void
expect(const char *upd, const char *doc, const char *want)
{
    expect_full(upd, NULL, doc, -1, false, want);
}

static void
expect_err_full(const char *upd, const char *filters, const char *doc, int pos, int code, const char *msg_part)
{
    bson_t out;
    bool changed;
    mf_error_t err;
    int rc = run(upd, filters, doc, pos, false, &out, &changed, &err);

    cr_assert_eq(rc, -1, "update %s on %s should fail with %d", upd, doc, code);
    cr_assert_eq(err.code, code, "update %s: code %d (%s), want %d", upd, err.code, err.msg, code);
    if (msg_part)
        cr_assert(strstr(err.msg, msg_part) != NULL, "update %s: message '%s' lacks '%s'", upd, err.msg, msg_part);
    bson_destroy(&out);
}

static void
expect_err(const char *upd, const char *doc, int code, const char *msg_part)
{
    expect_err_full(upd, NULL, doc, -1, code, msg_part);
}

/* ---- $set / $unset ---- */

Test(update, set_replaces_existing_field_in_place)
{
    expect("{'$set': {'a': 5}}", "{'_id': 1, 'a': 1, 'b': 2}", "{'_id': 1, 'a': 5, 'b': 2}");
}

Test(update, set_appends_new_fields_in_lexicographic_order)
{
    expect("{'$set': {'z': 1, 'c': 2, 'm': 3}}", "{'_id': 1}", "{'_id': 1, 'c': 2, 'm': 3, 'z': 1}");
}

Test(update, set_dotted_path_creates_intermediate_documents)
{
    expect("{'$set': {'a.b.c': 1}}", "{'_id': 1}", "{'_id': 1, 'a': {'b': {'c': 1}}}");
}

Test(update, set_dotted_path_into_existing_subdocument)
{
    expect("{'$set': {'a.y': 2, 'a.b': 1}}", "{'_id': 1, 'a': {'x': 0}}", "{'_id': 1, 'a': {'x': 0, 'b': 1, 'y': 2}}");
}

Test(update, set_numeric_component_indexes_array)
{
    expect("{'$set': {'a.1': 9}}", "{'_id': 1, 'a': [1, 2, 3]}", "{'_id': 1, 'a': [1, 9, 3]}");
}

Test(update, set_past_end_of_array_pads_with_nulls)
{
    expect("{'$set': {'a.4': 9}}", "{'_id': 1, 'a': [1]}", "{'_id': 1, 'a': [1, null, null, null, 9]}");
}

Test(update, set_numeric_component_on_missing_field_creates_document)
{
    expect("{'$set': {'a.0': 1}}", "{'_id': 1}", "{'_id': 1, 'a': {'0': 1}}");
}

Test(update, set_into_array_element_document)
{
    expect("{'$set': {'a.0.b': 2}}", "{'_id': 1, 'a': [{'b': 1}, {'b': 5}]}", "{'_id': 1, 'a': [{'b': 2}, {'b': 5}]}");
}

Test(update, set_same_value_reports_unchanged)
{
    bson_t out;
    bool changed = true;
    mf_error_t err;

    cr_assert_eq(run("{'$set': {'a': 1}}", NULL, "{'_id': 1, 'a': 1}", -1, false, &out, &changed, &err), 0);
    cr_assert_eq(changed, false, "setting the same value should not count as a change");
    bson_destroy(&out);
    cr_assert_eq(run("{'$set': {'a': 2}}", NULL, "{'_id': 1, 'a': 1}", -1, false, &out, &changed, &err), 0);
    cr_assert_eq(changed, true, "setting a new value is a change");
    bson_destroy(&out);
}

Test(update, set_through_scalar_is_path_not_viable)
{
    expect_err("{'$set': {'a.b': 1}}", "{'_id': 1, 'a': 5}", 28, "Cannot create field 'b' in element {a: 5}");
}

Test(update, set_named_field_in_array_is_path_not_viable)
{
    expect_err("{'$set': {'a.b': 1}}", "{'_id': 1, 'a': [1]}", 28, "Cannot create field 'b'");
}

Test(update, unset_removes_field)
{
    expect("{'$unset': {'a': ''}}", "{'_id': 1, 'a': 1, 'b': 2}", "{'_id': 1, 'b': 2}");
}

Test(update, unset_missing_field_is_noop)
{
    bson_t out;
    bool changed = true;
    mf_error_t err;

    cr_assert_eq(run("{'$unset': {'x.y': 1}}", NULL, "{'_id': 1, 'x': 3}", -1, false, &out, &changed, &err), 0);
    cr_assert_eq(changed, false, "unset of a missing path changes nothing");
    bson_destroy(&out);
}

Test(update, unset_array_element_sets_null)
{
    expect("{'$unset': {'a.1': 1}}", "{'_id': 1, 'a': [1, 2, 3]}", "{'_id': 1, 'a': [1, null, 3]}");
}

Test(update, unset_nested_field)
{
    expect("{'$unset': {'a.b': 1}}", "{'_id': 1, 'a': {'b': 1, 'c': 2}}", "{'_id': 1, 'a': {'c': 2}}");
}

/* ---- arithmetic ---- */

Test(update, inc_adds_and_creates)
{
    expect("{'$inc': {'a': 2, 'b': 5}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 3, 'b': 5}");
}

Test(update, inc_mixed_types_promote)
{
    expect("{'$inc': {'a': 1.5}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 2.5}");
    expect("{'$inc': {'a': {'$numberLong': '1'}}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': {'$numberLong': '2'}}");
}

Test(update, inc_int32_overflow_promotes_to_int64)
{
    expect("{'$inc': {'a': 1}}", "{'_id': 1, 'a': 2147483647}", "{'_id': 1, 'a': {'$numberLong': '2147483648'}}");
}

Test(update, inc_int64_overflow_fails)
{
    expect_err("{'$inc': {'a': 1}}", "{'_id': 1, 'a': {'$numberLong': '9223372036854775807'}}", 2,
               "Failed to apply $inc operations");
}

Test(update, inc_non_numeric_field_is_type_mismatch)
{
    expect_err("{'$inc': {'a': 1}}", "{'_id': 1, 'a': 'x'}", 14,
               "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type "
               "string");
}

Test(update, inc_non_numeric_argument_is_type_mismatch)
{
    expect_err("{'$inc': {'a': 'x'}}", "{'_id': 1}", 14, "Cannot increment with non-numeric argument");
}

Test(update, mul_multiplies_and_missing_becomes_zero)
{
    expect("{'$mul': {'a': 3, 'b': 2}}", "{'_id': 1, 'a': 2}", "{'_id': 1, 'a': 6, 'b': 0}");
    expect("{'$mul': {'b': 2.5}}", "{'_id': 1}", "{'_id': 1, 'b': 0.0}");
}

Test(update, mul_non_numeric_field_is_type_mismatch)
{
    expect_err("{'$mul': {'a': 2}}", "{'_id': 1, 'a': [1]}", 14, "Cannot apply $mul to a value of non-numeric type");
}

Test(update, min_and_max)
{
    expect("{'$min': {'a': 1, 'b': 10}}", "{'_id': 1, 'a': 5, 'b': 5}", "{'_id': 1, 'a': 1, 'b': 5}");
    expect("{'$max': {'a': 1, 'b': 10}}", "{'_id': 1, 'a': 5, 'b': 5}", "{'_id': 1, 'a': 5, 'b': 10}");
    expect("{'$max': {'c': 3}}", "{'_id': 1}", "{'_id': 1, 'c': 3}");
}

Test(update, min_compares_across_types_by_canonical_order)
{
    expect("{'$min': {'a': 'str'}}", "{'_id': 1, 'a': 5}", "{'_id': 1, 'a': 5}");
    expect("{'$max': {'a': 'str'}}", "{'_id': 1, 'a': 5}", "{'_id': 1, 'a': 'str'}");
}

/* ---- $rename ---- */

Test(update, rename_moves_value)
{
    expect("{'$rename': {'a': 'z'}}", "{'_id': 1, 'a': 1, 'b': 2}", "{'_id': 1, 'b': 2, 'z': 1}");
}

Test(update, rename_overwrites_existing_target_in_place)
{
    expect("{'$rename': {'a': 'b'}}", "{'_id': 1, 'b': 2, 'a': 1}", "{'_id': 1, 'b': 1}");
}

Test(update, rename_nested_paths)
{
    expect("{'$rename': {'a.b': 'c.d'}}", "{'_id': 1, 'a': {'b': {'x': 1}}}", "{'_id': 1, 'a': {}, 'c': {'d': {'x': 1}}}");
}

Test(update, rename_missing_source_is_noop)
{
    expect("{'$rename': {'q': 'r'}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 1}");
}

Test(update, rename_errors)
{
    expect_err("{'$rename': {'a': 1}}", "{'_id': 1}", 2, "The 'to' field for $rename must be a string");
    expect_err("{'$rename': {'a': 'a'}}", "{'_id': 1}", 2, "must differ");
    expect_err("{'$rename': {'a': 'a.b'}}", "{'_id': 1}", 2, "must not be on the same path");
    expect_err("{'$rename': {'a.$': 'b'}}", "{'_id': 1}", 2, "may not be dynamic");
    expect_err("{'$rename': {'a.0': 'b'}}", "{'_id': 1, 'a': [1]}", 2, "The source field cannot be an array element");
    expect_err("{'$rename': {'b': 'a.0'}}", "{'_id': 1, 'b': 1, 'a': [1]}", 2,
               "The destination field cannot be an array element");
}

/* ---- $push ---- */

Test(update, push_appends_and_creates)
{
    expect("{'$push': {'a': 3}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [1, 2, 3]}");
    expect("{'$push': {'a': 3}}", "{'_id': 1}", "{'_id': 1, 'a': [3]}");
}

Test(update, push_document_without_each_is_pushed_whole)
{
    expect("{'$push': {'a': {'x': 1}}}", "{'_id': 1, 'a': []}", "{'_id': 1, 'a': [{'x': 1}]}");
}

Test(update, push_each)
{
    expect("{'$push': {'a': {'$each': [3, 4]}}}", "{'_id': 1, 'a': [1]}", "{'_id': 1, 'a': [1, 3, 4]}");
}

Test(update, push_position)
{
    expect("{'$push': {'a': {'$each': [8, 9], '$position': 1}}}", "{'_id': 1, 'a': [1, 2]}",
           "{'_id': 1, 'a': [1, 8, 9, 2]}");
    expect("{'$push': {'a': {'$each': [9], '$position': -1}}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [1, 9, 2]}");
}

Test(update, push_slice)
{
    expect("{'$push': {'a': {'$each': [3, 4], '$slice': 3}}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [1, 2, 3]}");
    expect("{'$push': {'a': {'$each': [3, 4], '$slice': -2}}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [3, 4]}");
    expect("{'$push': {'a': {'$each': [], '$slice': 0}}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': []}");
}

Test(update, push_sort_whole_elements)
{
    expect("{'$push': {'a': {'$each': [5, 0], '$sort': -1}}}", "{'_id': 1, 'a': [3, 1]}",
           "{'_id': 1, 'a': [5, 3, 1, 0]}");
}

Test(update, push_sort_by_document_spec_then_slice)
{
    expect("{'$push': {'a': {'$each': [{'s': 2}], '$sort': {'s': 1}, '$slice': 2}}}",
           "{'_id': 1, 'a': [{'s': 3}, {'s': 1}]}", "{'_id': 1, 'a': [{'s': 1}, {'s': 2}]}");
}

Test(update, push_to_non_array_is_bad_value)
{
    expect_err("{'$push': {'a': 1}}", "{'_id': 1, 'a': 1}", 2,
               "The field 'a' must be an array but is of type int in document {_id: 1}");
}

Test(update, push_modifier_errors)
{
    expect_err("{'$push': {'a': {'$each': 1}}}", "{'_id': 1}", 2, "$each in $push must be an array");
    expect_err("{'$push': {'a': {'$each': [1], '$slice': 1.5}}}", "{'_id': 1}", 2, "$slice must be an integer");
    expect_err("{'$push': {'a': {'$each': [1], '$sort': 2}}}", "{'_id': 1}", 2, NULL);
    expect_err("{'$push': {'a': {'$each': [1], '$sort': {}}}}", "{'_id': 1}", 2, "$sort pattern is empty");
    expect_err("{'$push': {'a': {'$each': [1], '$bogus': 1}}}", "{'_id': 1}", 2, "Unrecognized clause in $push");
}

/* ---- $addToSet ---- */

Test(update, add_to_set_skips_existing)
{
    expect("{'$addToSet': {'a': 2}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [1, 2]}");
    expect("{'$addToSet': {'a': 3}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [1, 2, 3]}");
    expect("{'$addToSet': {'a': 3}}", "{'_id': 1}", "{'_id': 1, 'a': [3]}");
}

Test(update, add_to_set_each_dedups)
{
    expect("{'$addToSet': {'a': {'$each': [2, 3, 3, 4]}}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [1, 2, 3, 4]}");
}

Test(update, add_to_set_non_array_is_bad_value)
{
    expect_err("{'$addToSet': {'a': 1}}", "{'_id': 1, 'a': 'x'}", 2, "Cannot apply $addToSet to non-array field");
}

/* ---- $pull / $pullAll / $pop ---- */

Test(update, pull_value)
{
    expect("{'$pull': {'a': 2}}", "{'_id': 1, 'a': [1, 2, 3, 2]}", "{'_id': 1, 'a': [1, 3]}");
}

Test(update, pull_condition)
{
    expect("{'$pull': {'a': {'$gte': 2}}}", "{'_id': 1, 'a': [1, 2, 3]}", "{'_id': 1, 'a': [1]}");
}

Test(update, pull_document_condition)
{
    expect("{'$pull': {'a': {'x': 1}}}", "{'_id': 1, 'a': [{'x': 1, 'y': 1}, {'x': 2}, 5]}",
           "{'_id': 1, 'a': [{'x': 2}, 5]}");
}

Test(update, pull_missing_is_noop_and_non_array_fails)
{
    expect("{'$pull': {'q': 1}}", "{'_id': 1}", "{'_id': 1}");
    expect_err("{'$pull': {'a': 1}}", "{'_id': 1, 'a': 1}", 2, "Cannot apply $pull to a non-array value");
}

Test(update, pull_all)
{
    expect("{'$pullAll': {'a': [1, 3]}}", "{'_id': 1, 'a': [1, 2, 3, 1]}", "{'_id': 1, 'a': [2]}");
    expect_err("{'$pullAll': {'a': 1}}", "{'_id': 1}", 2, "$pullAll requires an array argument");
}

Test(update, pop_first_and_last)
{
    expect("{'$pop': {'a': 1}}", "{'_id': 1, 'a': [1, 2, 3]}", "{'_id': 1, 'a': [1, 2]}");
    expect("{'$pop': {'a': -1}}", "{'_id': 1, 'a': [1, 2, 3]}", "{'_id': 1, 'a': [2, 3]}");
    expect("{'$pop': {'a': 1}}", "{'_id': 1, 'a': []}", "{'_id': 1, 'a': []}");
}

Test(update, pop_errors)
{
    expect_err("{'$pop': {'a': 2}}", "{'_id': 1}", 9, "$pop expects 1 or -1, found: 2");
    expect_err("{'$pop': {'a': 1}}", "{'_id': 1, 'a': 1}", 14, "Path 'a' contains an element of non-array type 'int'");
}

/* ---- $currentDate / $setOnInsert ---- */

/* libbson's JSON reader takes {$type: ...} for binary data, so these updates are built with BCON. */
static int
run_bson(bson_t *u, bson_t *out, mf_error_t *err)
{
    bson_t *d = J("{'_id': 1}");
    bool changed;
    mf_update_t *up = mf_update_new(u, NULL, err);
    int rc = -1;

    bson_init(out);
    if (up) {
        rc = mf_update_apply(up, d, NULL, false, out, &changed, err);
        mf_update_free(up);
    }
    bson_destroy(d);
    bson_destroy(u);
    return rc;
}

Test(update, current_date_sets_date_and_timestamp)
{
    bson_t out;
    mf_error_t err;
    bson_iter_t it;
    bson_t *u = BCON_NEW("$currentDate", "{", "d", BCON_BOOL(true), "t", "{", "$type", BCON_UTF8("timestamp"), "}",
                         "e", "{", "$type", BCON_UTF8("date"), "}", "}");

    cr_assert_eq(run_bson(u, &out, &err), 0, "%s", err.msg);
    cr_assert(bson_iter_init_find(&it, &out, "d") && BSON_ITER_HOLDS_DATE_TIME(&it));
    cr_assert(bson_iter_init_find(&it, &out, "e") && BSON_ITER_HOLDS_DATE_TIME(&it));
    cr_assert(bson_iter_init_find(&it, &out, "t") && BSON_ITER_HOLDS_TIMESTAMP(&it));
    bson_destroy(&out);
}

Test(update, current_date_bad_type)
{
    bson_t out;
    mf_error_t err;

    cr_assert_eq(run_bson(BCON_NEW("$currentDate", "{", "d", "{", "$type", BCON_UTF8("x"), "}", "}"), &out, &err), -1);
    cr_assert_eq(err.code, 2, "code %d", err.code);
    cr_assert(strstr(err.msg, "'date' or 'timestamp'"), "%s", err.msg);
    bson_destroy(&out);
    expect_err("{'$currentDate': {'d': 1}}", "{'_id': 1}", 2, "is not valid type for $currentDate");
}

Test(update, set_on_insert_only_applies_on_insert)
{
    expect_full("{'$setOnInsert': {'a': 1}, '$set': {'b': 2}}", NULL, "{'_id': 1}", -1, false, "{'_id': 1, 'b': 2}");
    expect_full("{'$setOnInsert': {'a': 1}, '$set': {'b': 2}}", NULL, "{'_id': 1}", -1, true,
                "{'_id': 1, 'a': 1, 'b': 2}");
}

/* ---- positional paths ---- */

Test(update, positional_uses_matched_position)
{
    expect_full("{'$set': {'a.$': 9}}", NULL, "{'_id': 1, 'a': [1, 2, 3]}", 1, false, "{'_id': 1, 'a': [1, 9, 3]}");
    expect_full("{'$inc': {'a.$.n': 1}}", NULL, "{'_id': 1, 'a': [{'n': 1}, {'n': 5}]}", 1, false,
                "{'_id': 1, 'a': [{'n': 1}, {'n': 6}]}");
}

Test(update, positional_without_match_is_bad_value)
{
    expect_err_full("{'$set': {'a.$': 9}}", NULL, "{'_id': 1, 'a': [1]}", -1, 2,
                    "The positional operator did not find the match needed from the query.");
}

Test(update, all_positional_updates_every_element)
{
    expect("{'$inc': {'a.$[]': 1}}", "{'_id': 1, 'a': [1, 2]}", "{'_id': 1, 'a': [2, 3]}");
    expect("{'$set': {'a.$[].x': 0}}", "{'_id': 1, 'a': [{'x': 1}, {}]}", "{'_id': 1, 'a': [{'x': 0}, {'x': 0}]}");
}

Test(update, all_positional_on_missing_or_scalar_fails)
{
    expect_err("{'$set': {'a.$[]': 1}}", "{'_id': 1}", 2, "must exist in the document in order to apply array updates");
    expect_err("{'$set': {'a.$[]': 1}}", "{'_id': 1, 'a': 5}", 2, "Cannot apply array updates to non-array element");
}

Test(update, array_filters_select_elements)
{
    expect_full("{'$set': {'a.$[e]': 0}}", "[{'e': {'$gt': 1}}]", "{'_id': 1, 'a': [1, 2, 3]}", -1, false,
                "{'_id': 1, 'a': [1, 0, 0]}");
}

Test(update, array_filters_with_dotted_identifier)
{
    expect_full("{'$inc': {'a.$[elem].n': 10}}", "[{'elem.k': 'b'}]",
                "{'_id': 1, 'a': [{'k': 'a', 'n': 1}, {'k': 'b', 'n': 2}]}", -1, false,
                "{'_id': 1, 'a': [{'k': 'a', 'n': 1}, {'k': 'b', 'n': 12}]}");
}

Test(update, array_filter_unused_is_failed_to_parse)
{
    expect_err_full("{'$set': {'a': 1}}", "[{'x': 1}]", "{'_id': 1}", -1, 9,
                    "The array filter for identifier 'x' was not used in the update");
}

Test(update, array_filter_missing_is_bad_value)
{
    expect_err_full("{'$set': {'a.$[x]': 1}}", "[]", "{'_id': 1}", -1, 2,
                    "No array filter found for identifier 'x' in path 'a.$[x]'");
}

/* ---- parse errors ---- */

Test(update, conflicting_paths)
{
    expect_err("{'$set': {'a': 1}, '$inc': {'a.b': 1}}", "{'_id': 1}", 40,
               "Updating the path 'a.b' would create a conflict at 'a'");
    expect_err("{'$set': {'a': 1}, '$inc': {'a': 1}}", "{'_id': 1}", 40,
               "Updating the path 'a' would create a conflict at 'a'");
}

Test(update, unknown_modifier)
{
    expect_err("{'$foo': {'a': 1}}", "{'_id': 1}", 9, "Unknown modifier: $foo");
}

Test(update, empty_operator_document_is_a_no_op)
{
    bson_t out;
    bool changed = true;
    mf_error_t err;

    cr_assert_eq(run("{'$set': {}}", NULL, "{'_id': 1, 'a': 1}", -1, false, &out, &changed, &err), 0, "rc: %s",
                 err.msg);
    cr_assert(!changed, "an empty $set must not change the document");
    bson_destroy(&out);
    expect("{'$set': {}, '$inc': {'a': 1}}", "{'_id': 1, 'a': 1}", "{'_id': 1, 'a': 2}");
}

Test(update, inc_and_mul_with_decimal128_are_exact)
{
    expect("{'$inc': {'d': {'$numberDecimal': '2.2'}}}", "{'_id': 1, 'd': {'$numberDecimal': '1.1'}}",
           "{'_id': 1, 'd': {'$numberDecimal': '3.3'}}");
    expect("{'$inc': {'d': {'$numberDecimal': '-5.25'}}}", "{'_id': 1, 'd': 2}",
           "{'_id': 1, 'd': {'$numberDecimal': '-3.25'}}");
    expect("{'$mul': {'d': {'$numberDecimal': '1.5'}}}", "{'_id': 1, 'd': {'$numberDecimal': '2.0'}}",
           "{'_id': 1, 'd': {'$numberDecimal': '3.00'}}");
    /* A double operand becomes a decimal of 15 significant digits first (mongod's SafeNum: Decimal128(double)). */
    expect("{'$inc': {'d': 0.1}}", "{'_id': 1, 'd': {'$numberDecimal': '0.2'}}",
           "{'_id': 1, 'd': {'$numberDecimal': '0.300000000000000'}}");
}

Test(update, mul_of_int_by_double_is_double)
{
    expect("{'$mul': {'m': 1.5}}", "{'_id': 1, 'm': 3}", "{'_id': 1, 'm': 4.5}");
}

Test(update, operator_argument_must_be_document)
{
    expect_err("{'$set': 1}", "{'_id': 1}", 9, "Modifiers operate on fields");
}

Test(update, empty_path_component)
{
    expect_err("{'$set': {'a..b': 1}}", "{'_id': 1}", 56, NULL);
    expect_err("{'$set': {'': 1}}", "{'_id': 1}", 56, NULL);
}

Test(update, changing_id_is_immutable_field)
{
    expect_err("{'$set': {'_id': 2}}", "{'_id': 1}", 66,
               "Performing an update on the path '_id' would modify the immutable field '_id'");
    expect_err("{'$unset': {'_id': 1}}", "{'_id': 1}", 66, NULL);
    expect("{'$set': {'_id': 1}}", "{'_id': 1}", "{'_id': 1}");
}

/* ---- replacement ---- */

Test(update, replacement_keeps_id_first)
{
    expect("{'b': 1, 'a': 2}", "{'x': 0, '_id': 7}", "{'_id': 7, 'b': 1, 'a': 2}");
    expect("{'b': 1, '_id': 7}", "{'_id': 7, 'x': 0}", "{'_id': 7, 'b': 1}");
}

Test(update, replacement_is_replacement)
{
    bson_t *u = J("{'a': 1}");
    mf_error_t err;
    mf_update_t *up = mf_update_new(u, NULL, &err);

    cr_assert(up && mf_update_is_replacement(up));
    mf_update_free(up);
    bson_destroy(u);
    u = J("{'$set': {'a': 1}}");
    up = mf_update_new(u, NULL, &err);
    cr_assert(up && !mf_update_is_replacement(up));
    mf_update_free(up);
    bson_destroy(u);
}

Test(update, replacement_changing_id_fails)
{
    expect_err("{'_id': 2, 'a': 1}", "{'_id': 1}", 66, "After applying the update, the (immutable) field '_id'");
}

Test(update, replacement_with_operator_fails)
{
    expect_err("{'a': 1, '$set': {'b': 1}}", "{'_id': 1}", 52, "$set");
}

Test(update, operator_update_with_plain_field_fails)
{
    expect_err("{'$set': {'b': 1}, 'a': 1}", "{'_id': 1}", 9, "Unknown modifier: a");
}

/* ---- upsert seed ---- */

static void
expect_seed(const char *query, const char *want)
{
    bson_t *q = J(query), *w = J(want), out;
    mf_error_t err;
    char *got, *exp;

    bson_init(&out);
    cr_assert_eq(mf_update_upsert_seed(q, false, &out, &err), 0, "seed of %s failed: %s", query, err.msg);
    got = S(&out);
    exp = S(w);
    cr_assert(bson_equal(&out, w), "seed of %s: got %s, want %s", query, got, exp);
    bson_free(got);
    bson_free(exp);
    bson_destroy(q);
    bson_destroy(w);
    bson_destroy(&out);
}

Test(update, upsert_seed_from_equalities)
{
    expect_seed("{'a': 1, 'b.c': 2, '$and': [{'d': 3}], 'e': {'$gt': 1}}", "{'a': 1, 'b': {'c': 2}, 'd': 3}");
}

Test(update, upsert_seed_eq_operator_and_id_first)
{
    expect_seed("{'a': {'$eq': {'x': 1}}, '_id': 5}", "{'_id': 5, 'a': {'x': 1}}");
}

Test(update, upsert_seed_conflict)
{
    bson_t *q = J("{'a': 1, '$and': [{'a.b': 2}]}"), out;
    mf_error_t err;

    bson_init(&out);
    cr_assert_eq(mf_update_upsert_seed(q, false, &out, &err), -1);
    cr_assert_eq(err.code, 54, "code %d", err.code);
    bson_destroy(q);
    bson_destroy(&out);
}

Test(update, upsert_insert_moves_id_first)
{
    expect_full("{'$set': {'_id': 3, 'a': 1}}", NULL, "{}", -1, true, "{'_id': 3, 'a': 1}");
}

Test(update, upsert_changing_the_query_id_is_immutable_field)
{
    bson_t out;
    bool changed;
    mf_error_t err;

    cr_assert_eq(run("{'$set': {'_id': 2}}", NULL, "{'_id': 1}", -1, true, &out, &changed, &err), -1);
    cr_assert_eq(err.code, 66, "code %d (%s)", err.code, err.msg);
    bson_destroy(&out);
    expect_full("{'$set': {'_id': 1, 'a': 1}}", NULL, "{'_id': 1}", -1, true, "{'_id': 1, 'a': 1}");
}

/* ---- $bit ---- */

Test(update, bit_and_or_xor_as_in_the_manual)
{
    expect("{'$bit': {'e': {'and': 10}}}", "{'_id': 1, 'e': 13}", "{'_id': 1, 'e': 8}");
    expect("{'$bit': {'e': {'or': 5}}}", "{'_id': 2, 'e': 3}", "{'_id': 2, 'e': 7}");
    expect("{'$bit': {'e': {'xor': 5}}}", "{'_id': 3, 'e': 1}", "{'_id': 3, 'e': 4}");
    /* Operations apply in order; int32 with int64 gives int64. */
    expect("{'$bit': {'e': {'or': 8, 'and': 12}}}", "{'_id': 1, 'e': 5}", "{'_id': 1, 'e': 12}");
    expect("{'$bit': {'e': {'or': {'$numberLong': '2'}}}}", "{'_id': 1, 'e': 1}",
           "{'_id': 1, 'e': {'$numberLong': '3'}}");
    expect("{'$bit': {'e': {'and': 3}}}", "{'_id': 1, 'e': {'$numberLong': '7'}}",
           "{'_id': 1, 'e': {'$numberLong': '3'}}");
}

Test(update, bit_missing_field_starts_from_int32_zero)
{
    expect("{'$bit': {'m': {'or': 6}, 'n.o': {'xor': {'$numberLong': '1'}}}}", "{'_id': 1}",
           "{'_id': 1, 'm': 6, 'n': {'o': {'$numberLong': '1'}}}");
    expect_full("{'$bit': {'a.$[x]': {'or': 1}}}", "[{'x': {'$gte': 2}}]", "{'_id': 1, 'a': [1, 2, 4]}", -1, false,
                "{'_id': 1, 'a': [1, 3, 5]}");
}

Test(update, bit_errors_as_mongod)
{
    expect_err("{'$bit': {'a': 5}}", "{'_id': 1}", 2,
               "The $bit modifier is not compatible with a int. You must pass in an embedded document");
    expect_err("{'$bit': {'a': {'nand': 5}}}", "{'_id': 1}", 2,
               "The $bit modifier only supports 'and', 'or', and 'xor', not 'nand' which is an unknown operator: "
               "{nand: 5}");
    expect_err("{'$bit': {'a': {'and': 5.0}}}", "{'_id': 1}", 2,
               "The $bit modifier field must be an Integer(32/64 bit); a 'double' is not supported here: {and: 5.0}");
    expect_err("{'$bit': {'a': {}}}", "{'_id': 1}", 2, "You must pass in at least one bitwise operation");
    expect_err("{'$bit': {'a': {'or': 1}}}", "{'_id': 1, 'a': 1.0}", 2,
               "Cannot apply $bit to a value of non-integral type._id: 1 has the field a of non-integer type double");
    expect_err("{'$bit': {'a': {'or': 1}}}", "{'_id': 1, 'a': [1]}", 2, "non-integer type array");
}

Test(update, numeric_components_apply_in_numeric_order)
{
    /* mongod's cmpPathsAndArrayIndexes: "9" before "10", so new fields come out 9, 10. */
    expect("{'$set': {'b.10': 1, 'b.9': 2}}", "{'_id': 1, 'b': {}}", "{'_id': 1, 'b': {'9': 2, '10': 1}}");
    expect("{'$inc': {'a.10': 1, 'a.9': 1}}", "{'_id': 1, 'a': [0]}",
           "{'_id': 1, 'a': [0, null, null, null, null, null, null, null, null, 1, 1]}");
    /* Zero-padded and non-numeric components compare as strings. */
    expect("{'$set': {'b.x': 1, 'b.10': 2, 'b.09': 3}}", "{'_id': 1, 'b': {}}",
           "{'_id': 1, 'b': {'09': 3, '10': 2, 'x': 1}}");
}
