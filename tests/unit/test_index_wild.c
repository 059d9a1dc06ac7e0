/*
 * test_index_wild.c: wildcard index keys (index_wild.c), as mongod's
 * WildcardKeyGenerator makes them: one [path, value] key per leaf path;
 * objects descended, arrays giving their elements' keys under the same
 * path (no positions), an empty object ({}) and an empty array (undefined)
 * as leaves, a nested array as a value, fields with a '.' in their name
 * skipped, _id left out unless projected; a subtree ("a.b.$**") and
 * wildcardProjection inclusions and exclusions; and which query paths the
 * planner may bound (mf_wildcard_covers). Keys are decoded back to
 * "path=value" text in index order.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "index/index.h"
#include "index/index_spec.h"
#include <stdio.h>

/* doc_json's keys under pattern_json (and projection proj_json, or NULL), as "path=value ..." in key order. */
static void
wild_keys(const char *pattern_json, const char *proj_json, const char *doc_json, char *out, size_t cap,
          bool *multikey)
{
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)pattern_json, -1, &berr);
    bson_t *doc = bson_new_from_json((const uint8_t *)doc_json, -1, &berr);
    bson_t *proj = proj_json ? bson_new_from_json((const uint8_t *)proj_json, -1, &berr) : NULL;
    mf_keypattern_t kp;
    mf_keyset_t ks;
    mf_error_t err = {0};
    bool skip;

    cr_assert(pat != NULL && doc != NULL && (proj_json == NULL || proj != NULL), "bad test JSON");
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "pattern %s: %s", pattern_json, err.msg);
    cr_assert(kp.is_wildcard, "%s is not a wildcard pattern", pattern_json);
    if (proj != NULL)
        cr_assert_eq(mf_keypattern_set_wildcard_projection(&kp, proj, &err), 0, "projection: %s", err.msg);
    mf_keyset_init(&ks);
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, multikey, &err), 0, "keys: %s", err.msg);
    cr_assert_eq(skip, ks.n == 0, "skip %d with %d keys", skip, ks.n);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < ks.n; i++) {
        bson_t dec = BSON_INITIALIZER;
        bson_iter_t it;
        cr_assert_eq(mf_ks_decode(ks.keys[i].data, ks.keys[i].len, kp.desc, kp.nfields, &dec, &err), 0, "decode: %s",
                     err.msg);
        cr_assert(bson_iter_init(&it, &dec) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it));
        const char *path = bson_iter_utf8(&it, NULL);
        cr_assert(bson_iter_next(&it));
        bson_t one = BSON_INITIALIZER;
        bson_append_value(&one, "v", 1, bson_iter_value(&it));
        char *j = bson_as_relaxed_extended_json(&one, NULL);
        /* j is '{ "v" : <value> }': keep <value>. */
        size_t jl = strlen(j);
        used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s=%.*s", i ? " " : "", path,
                                 (int)(jl - 10), j + 8);
        bson_free(j);
        bson_destroy(&one);
        bson_destroy(&dec);
    }
    mf_keyset_destroy(&ks);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
    bson_destroy(doc);
    if (proj)
        bson_destroy(proj);
}

#define EXPECT_WILD(pattern, proj, doc, want, want_multikey)                                                       \
    do {                                                                                                           \
        char got_[2048];                                                                                           \
        bool mk_;                                                                                                  \
        wild_keys(pattern, proj, doc, got_, sizeof(got_), &mk_);                                                   \
        cr_assert_str_eq(got_, want, "%s over %s: got [%s], want [%s]", pattern, doc, got_, want);                 \
        cr_assert_eq(mk_, want_multikey, "%s over %s: multikey %d, want %d", pattern, doc, mk_, want_multikey);    \
    } while (0)

#define ALL "{\"$**\": 1}"

Test(wildcard_keys, one_key_per_leaf_path_and_id_left_out)
{
    EXPECT_WILD(ALL, NULL, "{\"_id\": 1, \"b\": \"x\", \"a\": 5}", "a=5 b=\"x\"", false);
}

Test(wildcard_keys, objects_are_descended_into)
{
    EXPECT_WILD(ALL, NULL, "{\"a\": {\"b\": {\"c\": 1}, \"d\": true}}", "a.b.c=1 a.d=true", false);
}

Test(wildcard_keys, array_elements_take_the_arrays_path_without_positions)
{
    EXPECT_WILD(ALL, NULL, "{\"a\": [3, 1, {\"b\": 2}, {\"b\": [4, 5]}]}", "a=1 a=3 a.b=2 a.b=4 a.b=5", true);
}

Test(wildcard_keys, empty_object_and_empty_array_are_leaves)
{
    EXPECT_WILD(ALL, NULL, "{\"a\": {}, \"b\": []}", "a={  } b={ \"$undefined\" : true }", true);
}

Test(wildcard_keys, a_nested_array_is_a_value_not_descended)
{
    EXPECT_WILD(ALL, NULL, "{\"a\": [[1, 2], 3]}", "a=3 a=[ 1, 2 ]", true);
}

Test(wildcard_keys, dotted_field_names_are_skipped)
{
    EXPECT_WILD(ALL, NULL, "{\"a.b\": 1, \"c\": {\"d.e\": 2, \"f\": 3}}", "c.f=3", false);
    /* An object of such fields only is a leaf {}, so $exists finds its path (mongod keys nothing). */
    EXPECT_WILD(ALL, NULL, "{\"c\": {\"d.e\": 2}}", "c={  }", false);
}

Test(wildcard_keys, duplicate_values_on_one_path_give_one_key)
{
    EXPECT_WILD(ALL, NULL, "{\"a\": [1, 1, {\"b\": 1}, 1]}", "a=1 a.b=1", true);
}

Test(wildcard_keys, a_document_without_fields_has_no_key)
{
    EXPECT_WILD(ALL, NULL, "{\"_id\": 7}", "", false);
}

Test(wildcard_keys, a_subtree_indexes_only_its_paths_and_its_root_leaf)
{
    EXPECT_WILD("{\"a.b.$**\": 1}", NULL, "{\"a\": {\"b\": {\"c\": 1}, \"x\": 2}, \"z\": 3}", "a.b.c=1", false);
    EXPECT_WILD("{\"a.b.$**\": 1}", NULL, "{\"a\": {\"b\": 4}}", "a.b=4", false);
    /* Through an array on the way to the root, as the projection {"a.b": 1} keeps it. */
    EXPECT_WILD("{\"a.b.$**\": 1}", NULL, "{\"a\": [{\"b\": 1}, {\"b\": 2}, 7]}", "a.b=1 a.b=2", true);
}

Test(wildcard_keys, inclusion_projection)
{
    EXPECT_WILD(ALL, "{\"a\": 1, \"c.d\": 1}", "{\"_id\": 0, \"a\": {\"x\": 1}, \"b\": 2, \"c\": {\"d\": 3, \"e\": 4}}",
                "a.x=1 c.d=3", false);
}

Test(wildcard_keys, exclusion_projection)
{
    EXPECT_WILD(ALL, "{\"a\": 0, \"c.d\": 0}", "{\"_id\": 0, \"a\": 1, \"b\": 2, \"c\": {\"d\": 3, \"e\": 4}}",
                "b=2 c.e=4", false);
}

Test(wildcard_keys, an_object_projected_empty_is_an_empty_object)
{
    EXPECT_WILD(ALL, "{\"c.d\": 0}", "{\"c\": {\"d\": 3}}", "c={  }", false);
}

Test(wildcard_keys, id_indexed_only_when_projected)
{
    EXPECT_WILD(ALL, "{\"_id\": 1, \"a\": 1}", "{\"_id\": 5, \"a\": 1, \"b\": 2}", "_id=5 a=1", false);
    EXPECT_WILD(ALL, "{\"_id\": 1, \"a\": 0}", "{\"_id\": {\"x\": 5}, \"a\": 1, \"b\": 2}", "_id.x=5 b=2", false);
    EXPECT_WILD(ALL, "{\"_id\": 0, \"a\": 0}", "{\"_id\": 5, \"a\": 1, \"b\": 2}", "b=2", false);
}

Test(wildcard_keys, descending_pattern_keeps_the_path_ascending)
{
    EXPECT_WILD("{\"$**\": -1}", NULL, "{\"a\": [1, 2], \"b\": 0}", "a=2 a=1 b=0", true);
}

/* Whether the planner may bound path with pattern (and projection). */
static bool
covers(const char *pattern_json, const char *proj_json, const char *path)
{
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)pattern_json, -1, &berr);
    bson_t *proj = proj_json ? bson_new_from_json((const uint8_t *)proj_json, -1, &berr) : NULL;
    mf_keypattern_t kp;
    mf_error_t err = {0};
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "%s", err.msg);
    if (proj)
        cr_assert_eq(mf_keypattern_set_wildcard_projection(&kp, proj, &err), 0, "%s", err.msg);
    bool r = mf_wildcard_covers(&kp, path);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
    if (proj)
        bson_destroy(proj);
    return r;
}

Test(wildcard_covers, paths_the_planner_may_bound)
{
    cr_assert(covers(ALL, NULL, "a"));
    cr_assert(covers(ALL, NULL, "a.b.c"));
    cr_assert(!covers(ALL, NULL, "_id"));
    cr_assert(!covers(ALL, NULL, "_id.x"));
    cr_assert(!covers(ALL, NULL, "a.0.b"), "positional components are never keyed");
    cr_assert(!covers(ALL, NULL, "a.$id"));
    cr_assert(covers("{\"a.b.$**\": 1}", NULL, "a.b"));
    cr_assert(covers("{\"a.b.$**\": 1}", NULL, "a.b.c"));
    cr_assert(!covers("{\"a.b.$**\": 1}", NULL, "a"));
    cr_assert(!covers("{\"a.b.$**\": 1}", NULL, "a.bc"));
    cr_assert(covers(ALL, "{\"a\": 0}", "b"));
    cr_assert(!covers(ALL, "{\"a\": 0}", "a.x"));
    cr_assert(covers(ALL, "{\"a.b\": 1}", "a.b.c"));
    cr_assert(!covers(ALL, "{\"a.b\": 1}", "a"));
    cr_assert(covers(ALL, "{\"_id\": 1, \"a\": 0}", "_id"));
}

Test(wildcard_keys, a_compound_wildcard_pattern_keys_its_regular_fields)
{
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)"{\"a\": 1, \"$**\": 1}", -1, &berr);
    mf_keypattern_t kp;
    mf_error_t err = {0};
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "%s", err.msg);
    cr_assert(!kp.is_wildcard && kp.wildcard_compound);
    cr_assert_eq(kp.nfields, 1);
    cr_assert_str_eq(kp.fields[0], "a");
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
}

/* The code mf_index_spec_normalise gives spec_json (0 when accepted); *name gets the stored name. */
static int
spec_code(const char *spec_json, char *name, size_t cap)
{
    bson_error_t berr;
    bson_t *req = bson_new_from_json((const uint8_t *)spec_json, -1, &berr);
    bson_t out;
    bson_iter_t it;
    mf_error_t err = {0};
    cr_assert(req != NULL, "bad test JSON %s", spec_json);
    int rc = mf_index_spec_normalise(req, &out, &err);
    bson_destroy(req);
    if (rc != 0)
        return err.code;
    if (name != NULL && bson_iter_init_find(&it, &out, "name"))
        snprintf(name, cap, "%s", bson_iter_utf8(&it, NULL));
    bson_destroy(&out);
    return 0;
}

Test(wildcard_spec, names_and_refusals)
{
    char name[64];
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}}", name, sizeof(name)), 0);
    cr_assert_str_eq(name, "$**_1");
    cr_assert_eq(spec_code("{\"key\": {\"a.b.$**\": -1}}", name, sizeof(name)), 0);
    cr_assert_str_eq(name, "a.b.$**_-1");
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"wildcardProjection\": {\"a\": 0, \"_id\": 1}}", NULL, 0), 0);
    cr_assert_eq(spec_code("{\"key\": {\"x\": 1, \"$**\": 1}, \"wildcardProjection\": {\"x\": 0}}", NULL, 0), 0);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"partialFilterExpression\": {\"a\": 1}}", NULL, 0), 0);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"unique\": true}", NULL, 0), 67);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"sparse\": true}", NULL, 0), 67);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"expireAfterSeconds\": 5}", NULL, 0), 67);
    cr_assert_eq(spec_code("{\"key\": {\"a\": 1}, \"wildcardProjection\": {\"a\": 1}}", NULL, 0), 2);
    cr_assert_eq(spec_code("{\"key\": {\"a.$**\": 1}, \"wildcardProjection\": {\"a\": 1}}", NULL, 0), 9);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"wildcardProjection\": {}}", NULL, 0), 9);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1}, \"wildcardProjection\": 1}", NULL, 0), 14);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1, \"b.$**\": 1}}", NULL, 0), 7246201);
    cr_assert_eq(spec_code("{\"key\": {\"a.$**\": 1, \"a.b\": 1}}", NULL, 0), 7246204);
    cr_assert_eq(spec_code("{\"key\": {\"x\": 1, \"$**\": 1}}", NULL, 0), 67);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": 1, \"h\": \"hashed\"}}", NULL, 0), 67);
    cr_assert_eq(spec_code("{\"key\": {\"a.$**.b\": 1}}", NULL, 0), 67);
    cr_assert_eq(spec_code("{\"key\": {\"$**\": \"text\"}}", NULL, 0), 0, "a text index over every field stays one");
}
