/*
 * test_project.c: find projections: inclusion, exclusion, _id rules, dotted
 * paths through arrays, $slice, $elemMatch, positional "a.$", expression
 * values, and MongoDB's error codes for bad specs. Documents are written as
 * JSON with single quotes for readability.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "doc/project.h"

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

static void
expect_pos(const char *spec, const char *doc, int pos, const char *want)
{
    bson_t *s = J(spec), *d = J(doc), *w = J(want), out;
    mf_error_t err;
    mf_projection_t *p = mf_projection_new(s, &err);
    mf_match_details_t det = {pos};
    char *got, *exp;

    cr_assert(p != NULL, "projection %s failed to parse: %d %s", spec, err.code, err.msg);
    bson_init(&out);
    cr_assert_eq(mf_projection_apply(p, d, &det, &out, &err), 0, "projection %s failed: %s", spec, err.msg);
    got = bson_as_canonical_extended_json(&out, NULL);
    exp = bson_as_canonical_extended_json(w, NULL);
    cr_assert(bson_equal(&out, w), "projection %s of %s: got %s, want %s", spec, doc, got, exp);
    bson_free(got);
    bson_free(exp);
    bson_destroy(&out);
    mf_projection_free(p);
    bson_destroy(s);
    bson_destroy(d);
    bson_destroy(w);
}

static void
expect(const char *spec, const char *doc, const char *want)
{
    expect_pos(spec, doc, -1, want);
}

static void
expect_parse_err(const char *spec, int code, const char *msg)
{
    bson_t *s = J(spec);
    mf_error_t err;
    mf_projection_t *p = mf_projection_new(s, &err);

    cr_assert(p == NULL, "projection %s should fail with %d", spec, code);
    cr_assert_eq(err.code, code, "projection %s: code %d (%s), want %d", spec, err.code, err.msg, code);
    if (msg)
        cr_assert(strstr(err.msg, msg) != NULL, "projection %s: message '%s' lacks '%s'", spec, err.msg, msg);
    bson_destroy(s);
}

static const char *DOC = "{'_id': 1, 'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2, 3, 4, 5]}";

Test(project, empty_projection_returns_whole_document)
{
    expect("{}", DOC, DOC);
}

Test(project, inclusion_keeps_listed_fields_and_id)
{
    expect("{'a': 1}", DOC, "{'_id': 1, 'a': 1}");
    expect("{'a': true, 'zz': 1}", DOC, "{'_id': 1, 'a': 1}");
}

Test(project, inclusion_follows_document_order)
{
    expect("{'e': 1, 'a': 1}", DOC, "{'_id': 1, 'a': 1, 'e': [1, 2, 3, 4, 5]}");
}

Test(project, inclusion_without_id)
{
    expect("{'_id': 0, 'a': 1}", DOC, "{'a': 1}");
}

Test(project, id_only_inclusion)
{
    expect("{'_id': 1}", DOC, "{'_id': 1}");
}

Test(project, exclusion_removes_fields)
{
    expect("{'a': 0, 'e': 0}", DOC, "{'_id': 1, 'b': {'c': 2, 'd': 3}}");
}

Test(project, id_exclusion_alone_is_exclusion)
{
    expect("{'_id': 0}", DOC, "{'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2, 3, 4, 5]}");
}

Test(project, exclusion_with_explicit_id_inclusion)
{
    expect("{'_id': 1, 'a': 0}", "{'_id': 1, 'a': 1, 'x': 2}", "{'_id': 1, 'x': 2}");
}

Test(project, dotted_inclusion)
{
    expect("{'b.c': 1}", DOC, "{'_id': 1, 'b': {'c': 2}}");
}

Test(project, nested_document_spec_equals_dotted)
{
    expect("{'b': {'d': 1}}", DOC, "{'_id': 1, 'b': {'d': 3}}");
}

Test(project, dotted_exclusion)
{
    expect("{'b.c': 0}", DOC, "{'_id': 1, 'a': 1, 'b': {'d': 3}, 'e': [1, 2, 3, 4, 5]}");
}

Test(project, dotted_inclusion_through_array_of_documents)
{
    expect("{'a.b': 1, '_id': 0}", "{'a': [{'b': 1, 'c': 2}, 5, {'c': 3}, [{'b': 4}]]}",
           "{'a': [{'b': 1}, {}, [{'b': 4}]]}");
}

Test(project, dotted_exclusion_through_array_keeps_scalars)
{
    expect("{'a.b': 0, '_id': 0}", "{'a': [{'b': 1, 'c': 2}, 5]}", "{'a': [{'c': 2}, 5]}");
}

Test(project, dotted_inclusion_of_scalar_parent_drops_field)
{
    expect("{'a.b': 1}", "{'_id': 1, 'a': 5}", "{'_id': 1}");
}

Test(project, slice_first_n)
{
    expect("{'e': {'$slice': 2}}", DOC, "{'_id': 1, 'a': 1, 'b': {'c': 2, 'd': 3}, 'e': [1, 2]}");
}

Test(project, slice_last_n)
{
    expect("{'e': {'$slice': -2}, '_id': 0, 'a': 0, 'b': 0}", DOC, "{'e': [4, 5]}");
}

Test(project, slice_skip_limit)
{
    expect("{'e': {'$slice': [1, 2]}, 'a': 1}", DOC, "{'_id': 1, 'a': 1, 'e': [2, 3]}");
    expect("{'e': {'$slice': [-2, 5]}, '_id': 0, 'a': 1}", DOC, "{'a': 1, 'e': [4, 5]}");
    expect("{'e': {'$slice': [10, 2]}, '_id': 0, 'a': 1}", DOC, "{'a': 1, 'e': []}");
}

Test(project, slice_of_non_array_is_unchanged)
{
    expect("{'a': {'$slice': 1}, '_id': 0, 'b': 0, 'e': 0}", DOC, "{'a': 1}");
}

Test(project, slice_errors)
{
    expect_parse_err("{'e': {'$slice': [1, 0]}}", 31259, "$slice limit must be positive");
    expect_parse_err("{'e': {'$slice': 'x'}}", 31273, NULL);
}

Test(project, elem_match_returns_first_match)
{
    expect("{'s': {'$elemMatch': {'x': {'$gt': 1}}}}", "{'_id': 1, 'n': 0, 's': [{'x': 1}, {'x': 2}, {'x': 3}]}",
           "{'_id': 1, 's': [{'x': 2}]}");
}

Test(project, elem_match_without_match_omits_field)
{
    expect("{'s': {'$elemMatch': {'x': 9}}}", "{'_id': 1, 's': [{'x': 1}]}", "{'_id': 1}");
}

Test(project, elem_match_is_appended_after_included_fields)
{
    expect("{'s': {'$elemMatch': {'$gte': 2}}, 'z': 1}", "{'_id': 1, 's': [1, 2, 3], 'z': 0}",
           "{'_id': 1, 'z': 0, 's': [2]}");
}

Test(project, elem_match_on_nested_field_fails)
{
    expect_parse_err("{'a.b': {'$elemMatch': {'x': 1}}}", 31275, NULL);
}

Test(project, positional_projects_matched_element)
{
    expect_pos("{'e.$': 1}", DOC, 2, "{'_id': 1, 'e': [3]}");
}

Test(project, positional_without_match_fails)
{
    bson_t *s = J("{'e.$': 1}"), *d = J(DOC), out;
    mf_error_t err;
    mf_projection_t *p = mf_projection_new(s, &err);

    cr_assert(p != NULL);
    bson_init(&out);
    cr_assert_eq(mf_projection_apply(p, d, NULL, &out, &err), -1);
    cr_assert_eq(err.code, 51246, "code %d", err.code);
    bson_destroy(&out);
    mf_projection_free(p);
    bson_destroy(s);
    bson_destroy(d);
}

Test(project, two_positionals_fail)
{
    expect_parse_err("{'e.$': 1, 'b.$': 1}", 31276, NULL);
}

Test(project, exclusion_in_inclusion_fails)
{
    expect_parse_err("{'a': 1, 'b': 0}", 31254, "Cannot do exclusion on field b in inclusion projection");
}

Test(project, inclusion_in_exclusion_fails)
{
    expect_parse_err("{'a': 0, 'b': 1}", 31253, "Cannot do inclusion on field b in exclusion projection");
}

Test(project, path_collisions)
{
    expect_parse_err("{'a.b': 1, 'a': 1}", 31250, "Path collision at a");
    expect_parse_err("{'a': 1, 'a.b': 1}", 31249, "Path collision at a.b remaining portion b");
}

Test(project, bad_field_names)
{
    expect_parse_err("{'a..b': 1}", 15998, NULL);
    expect_parse_err("{'$x': 1}", 16410, NULL);
}

Test(project, empty_subprojection_fails)
{
    expect_parse_err("{'a': {}}", 51270, NULL);
}

/* Expression values (need expr.c). */

Test(project, expression_field_path_is_computed_and_appended)
{
    expect("{'x': '$b.c', 'a': 1}", DOC, "{'_id': 1, 'a': 1, 'x': 2}");
}

Test(project, expression_literal_string)
{
    expect("{'_id': 0, 'k': 'hello'}", DOC, "{'k': 'hello'}");
}

Test(project, expression_operator)
{
    expect("{'_id': 0, 's': {'$add': ['$a', 10]}}", DOC, "{'s': 11}");
}

Test(project, expression_missing_field_is_omitted)
{
    expect("{'_id': 0, 'm': '$nope'}", DOC, "{}");
}

Test(project, nested_expression_creates_subdocument)
{
    expect("{'_id': 0, 'n.v': '$a'}", DOC, "{'n': {'v': 1}}");
    expect("{'_id': 0, 'b.z': '$a'}", DOC, "{'b': {'z': 1}}");
}

Test(project, expression_in_exclusion_fails)
{
    expect_parse_err("{'a': 0, 'x': {'$add': [1, 2]}}", 31252, NULL);
    expect_parse_err("{'a': 0, 'x': 'lit'}", 31310, NULL);
}
