/*
 * test_sort.c: unit tests for sort specifications (src/query/sort.c).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "doc/sort.h"

static bson_t *
J(const char *json)
{
    char *buf = strdup(json);
    bson_error_t e;
    bson_t *b;

    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    b = bson_new_from_json((const uint8_t *)buf, -1, &e);
    free(buf);
    cr_assert_not_null(b, "bad JSON %s: %s", json, e.message);
    return b;
}

static mf_sort_t *
S(const char *spec)
{
    bson_t *b = J(spec);
    mf_error_t err = {0};
    mf_sort_t *s = mf_sort_new(b, &err);
    cr_assert_not_null(s, "spec %s: %s", spec, err.msg);
    bson_destroy(b);
    return s;
}

/* order: sorts the docs by spec and returns their "_id" ints joined by commas. */
static void
order(const char *spec, const char **docs, size_t n, char *out)
{
    mf_sort_t *s = S(spec);
    bson_t *d[16];
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        d[i] = J(docs[i]);
    mf_sort_docs(s, d, n);
    for (size_t i = 0; i < n; i++) {
        bson_iter_t it;
        char buf[16];
        cr_assert(bson_iter_init_find(&it, d[i], "_id"));
        snprintf(buf, sizeof(buf), "%s%d", i ? "," : "", bson_iter_int32(&it));
        strcat(out, buf);
        bson_destroy(d[i]);
    }
    mf_sort_free(s);
}

#define ORDER(spec, expect, ...)                                                              \
    do {                                                                                    \
        const char *docs_[] = {__VA_ARGS__};                                                \
        char out_[256];                                                                     \
        order(spec, docs_, sizeof(docs_) / sizeof(docs_[0]), out_);                         \
        cr_assert_str_eq(out_, expect, "sort %s gave %s, expected %s", spec, out_, expect); \
    } while (0)

Test(sort, ascending_and_descending_across_numeric_types)
{
    ORDER("{'a': 1}", "2,3,1", "{'_id': 1, 'a': 3}", "{'_id': 2, 'a': 1.5}",
          "{'_id': 3, 'a': {'$numberLong': '2'}}");
    ORDER("{'a': -1}", "1,3,2", "{'_id': 1, 'a': 3}", "{'_id': 2, 'a': 1.5}",
          "{'_id': 3, 'a': {'$numberLong': '2'}}");
}

Test(sort, missing_sorts_as_null_before_numbers_and_strings_after)
{
    ORDER("{'a': 1}", "2,3,4,1", "{'_id': 1, 'a': 'x'}", "{'_id': 2}", "{'_id': 3, 'a': null}",
          "{'_id': 4, 'a': 5}");
}

Test(sort, arrays_use_min_ascending_and_max_descending)
{
    ORDER("{'a': 1}", "1,2", "{'_id': 1, 'a': [5, 0]}", "{'_id': 2, 'a': 3}");
    ORDER("{'a': -1}", "1,2", "{'_id': 1, 'a': [5, 0]}", "{'_id': 2, 'a': 3}");
    ORDER("{'a': 1}", "3,2,1", "{'_id': 1, 'a': 1}", "{'_id': 2, 'a': null}",
          "{'_id': 3, 'a': []}");
    ORDER("{'a.b': 1}", "2,1", "{'_id': 1, 'a': [{'b': 4}, {'b': 2}]}",
          "{'_id': 2, 'a': [{'b': 3}, {'c': 1}]}");
}

Test(sort, sort_is_stable_and_compound)
{
    ORDER("{'a': 1}", "1,2,3,4", "{'_id': 1, 'a': 1}", "{'_id': 2, 'a': 1}", "{'_id': 3, 'a': 1}",
          "{'_id': 4, 'a': 2}");
    ORDER("{'a': 1, 'b': -1}", "2,1,3", "{'_id': 1, 'a': 1, 'b': 1}",
          "{'_id': 2, 'a': 1, 'b': 2}", "{'_id': 3, 'a': 2, 'b': 9}");
    ORDER("{}", "3,1,2", "{'_id': 3}", "{'_id': 1}", "{'_id': 2}");
}

Test(sort, cmp_compares_two_documents)
{
    mf_sort_t *s = S("{'a': -1}");
    bson_t *x = J("{'a': 1}"), *y = J("{'a': 2}");
    cr_assert_gt(mf_sort_cmp(s, x, y), 0);
    cr_assert_lt(mf_sort_cmp(s, y, x), 0);
    cr_assert_eq(mf_sort_cmp(s, x, x), 0);
    mf_sort_free(s);
    bson_destroy(x);
    bson_destroy(y);
}

Test(sort, bad_specs_are_refused)
{
    /* {$meta: "textScore"} is a sort key since text search (doc/text.h). */
    /* mongod's sort_pattern.cpp codes. */
    const char *bad[] = {"{'a': 2}", "{'a': 0}", "{'a': 'asc'}", "{'a': 1.5}", "{'a': {'x': 1}}",
                         "{'a': {'$meta': 'foo'}}", "{'a': {'$meta': 'textScore', 'b': 1}}"};
    const int codes[] = {MF_E_Location15975, MF_E_Location15975, MF_E_Location15974, MF_E_Location15975,
                         MF_E_Location17312, MF_E_Location31138, MF_E_FailedToParse};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bson_t *b = J(bad[i]);
        mf_error_t err = {0};
        mf_sort_t *s = mf_sort_new(b, &err);
        cr_assert_null(s, "spec %s should be refused", bad[i]);
        cr_assert_eq(err.code, codes[i], "spec %s: code %d", bad[i], err.code);
        bson_destroy(b);
    }
    mf_sort_t *s = S("{'a': -1.0, 'b': {'$numberLong': '1'}}");
    mf_sort_free(s);
}
