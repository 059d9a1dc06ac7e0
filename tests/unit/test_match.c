/*
 * test_match.c: unit tests for the query matcher (src/query/match.c) and
 * dotted-path traversal (src/query/path.c). Filters and documents are
 * written as relaxed extended JSON with single quotes for readability.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "doc/match.h"
#include "doc/path.h"

/* fix_keys: copies src into dst renaming keys that start with '%' to start with '$'. */
static void
fix_keys(bson_t *dst, const bson_t *src)
{
    bson_iter_t it;

    bson_iter_init(&it, src);
    while (bson_iter_next(&it)) {
        char key[256];
        snprintf(key, sizeof(key), "%s", bson_iter_key(&it));
        if (key[0] == '%')
            key[0] = '$';
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t sub, child;
            bool arr = BSON_ITER_HOLDS_ARRAY(&it);
            if (arr)
                bson_iter_array(&it, &len, &data);
            else
                bson_iter_document(&it, &len, &data);
            bson_init_static(&sub, data, len);
            if (arr)
                bson_append_array_begin(dst, key, -1, &child);
            else
                bson_append_document_begin(dst, key, -1, &child);
            fix_keys(&child, &sub);
            if (arr)
                bson_append_array_end(dst, &child);
            else
                bson_append_document_end(dst, &child);
        } else {
            bson_append_value(dst, key, -1, bson_iter_value(&it));
        }
    }
}

/*
 * J: parses JSON into a new document; caller frees. Single quotes stand for
 * double quotes, and keys written '%op' become '$op' (libbson's JSON reader
 * would take "$type" / "$regex" as legacy extended JSON).
 */
static bson_t *
J(const char *json)
{
    char *buf = strdup(json);
    bson_error_t e;
    bson_t *b, *out;

    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    b = bson_new_from_json((const uint8_t *)buf, -1, &e);
    free(buf);
    cr_assert_not_null(b, "bad JSON %s: %s", json, e.message);
    out = bson_new();
    fix_keys(out, b);
    bson_destroy(b);
    return out;
}

/* M: does filter match doc? Fails the test if the filter does not parse. */
static bool
M(const char *filter, const char *doc)
{
    bson_t *f = J(filter), *d = J(doc);
    mf_error_t err = {0};
    mf_matcher_t *m = mf_matcher_new(f, &err);
    bool r;

    cr_assert_not_null(m, "filter %s failed to parse: %d %s", filter, err.code, err.msg);
    r = mf_matcher_match(m, d, NULL);
    mf_matcher_free(m);
    bson_destroy(f);
    bson_destroy(d);
    return r;
}

/* POS: the array_pos reported for a matching doc (-2 if no match). */
static int
POS(const char *filter, const char *doc)
{
    bson_t *f = J(filter), *d = J(doc);
    mf_error_t err = {0};
    mf_matcher_t *m = mf_matcher_new(f, &err);
    mf_match_details_t det = {-5};
    int r;

    cr_assert_not_null(m, "filter %s failed to parse: %s", filter, err.msg);
    r = mf_matcher_match(m, d, &det) ? det.array_pos : -2;
    mf_matcher_free(m);
    bson_destroy(f);
    bson_destroy(d);
    return r;
}

/* ERR: parses filter expecting failure; returns the code and copies the message. */
static int
ERR(const char *filter, char *msg)
{
    bson_t *f = J(filter);
    mf_error_t err = {0};
    mf_matcher_t *m = mf_matcher_new(f, &err);

    bson_destroy(f);
    if (m != NULL) {
        mf_matcher_free(m);
        cr_assert_fail("filter %s unexpectedly parsed", filter);
    }
    if (msg)
        strcpy(msg, err.msg);
    return err.code;
}

#define YES(f, d) cr_assert(M(f, d), "expected %s to match %s", f, d)
#define NO(f, d) cr_assert_not(M(f, d), "expected %s NOT to match %s", f, d)
#define BAD(f, code_, text)                                                                      \
    do {                                                                                       \
        char msg_[600];                                                                        \
        int c_ = ERR(f, msg_);                                                                 \
        cr_assert_eq(c_, code_, "filter %s: code %d, expected %d (%s)", f, c_, code_, msg_);  \
        if (text)                                                                              \
            cr_assert(strstr(msg_, text ? text : "") != NULL, "filter %s: message '%s' lacks '%s'", \
                      f, msg_, text ? text : "");                                              \
    } while (0)

Test(match, empty_and_null_filters_match_everything)
{
    mf_error_t err = {0};
    mf_matcher_t *m = mf_matcher_new(NULL, &err);
    bson_t *d = J("{'a': 1}");
    cr_assert(mf_matcher_match(m, d, NULL));
    mf_matcher_free(m);
    bson_destroy(d);
    YES("{}", "{'a': 1}");
}

Test(match, implicit_equality_across_numeric_types)
{
    YES("{'a': 1}", "{'a': 1.0}");
    YES("{'a': 1}", "{'a': {'$numberLong': '1'}}");
    YES("{'a': {'$numberDecimal': '1.00'}}", "{'a': 1}");
    NO("{'a': 1}", "{'a': 2}");
    NO("{'a': 1}", "{'a': '1'}");
    NO("{'a': 1}", "{'b': 1}");
    YES("{'a': 'x', 'b': 2}", "{'a': 'x', 'b': 2}");
    NO("{'a': 'x', 'b': 2}", "{'a': 'x', 'b': 3}");
}

Test(match, equality_with_arrays)
{
    YES("{'a': 2}", "{'a': [1, 2, 3]}");
    YES("{'a': [1, 2]}", "{'a': [1, 2]}");
    YES("{'a': [1, 2]}", "{'a': [[1, 2], 3]}");
    NO("{'a': [1, 2]}", "{'a': [2, 1]}");
    NO("{'a': [1, 2]}", "{'a': [1, 2, 3]}");
    YES("{'a': []}", "{'a': []}");
    NO("{'a': []}", "{'a': [1]}");
    YES("{'a': {'b': 1}}", "{'a': {'b': 1}}");
    NO("{'a': {'b': 1}}", "{'a': {'b': 1, 'c': 2}}");
    NO("{'a': {'b': 1, 'c': 2}}", "{'a': {'c': 2, 'b': 1}}");
}

Test(match, dotted_paths_traverse_arrays)
{
    YES("{'a.b': 1}", "{'a': {'b': 1}}");
    YES("{'a.b': 1}", "{'a': [{'b': 2}, {'b': 1}]}");
    YES("{'a.b': 1}", "{'a': [{'b': [0, 1]}]}");
    YES("{'a.b.c': 1}", "{'a': [{'b': [{'c': 1}]}]}");
    NO("{'a.b': 1}", "{'a': [[{'b': 1}]]}");
    YES("{'a.0': 5}", "{'a': [5, 6]}");
    NO("{'a.1': 5}", "{'a': [5, 6]}");
    YES("{'a.0.b': 1}", "{'a': [{'b': 1}]}");
    YES("{'a.1': 9}", "{'a': [{'1': 9}]}");
    NO("{'a.b': 1}", "{'a': 1}");
}

Test(match, null_matches_missing_null_and_arrays_containing_null)
{
    YES("{'a': null}", "{}");
    YES("{'a': null}", "{'a': null}");
    YES("{'a': null}", "{'a': [1, null]}");
    NO("{'a': null}", "{'a': 0}");
    NO("{'a': null}", "{'a': []}");
    NO("{'a': null}", "{'a': false}");
    YES("{'a.b': null}", "{'a': {}}");
    YES("{'a.b': null}", "{'a': 4}");
    YES("{'a.b': null}", "{'a': [{'b': 1}, {'c': 1}]}");
    NO("{'a.b': null}", "{'a': [{'b': 1}]}");
    NO("{'a.b': null}", "{'a': [1, 2]}");
    YES("{'a': {'$eq': null}}", "{}");
    YES("{'a': {'$gte': null}}", "{}");
    YES("{'a': {'$lte': null}}", "{'a': null}");
    NO("{'a': {'$gt': null}}", "{}");
    NO("{'a': {'$lt': null}}", "{'a': null}");
    YES("{'a': {'$ne': null}}", "{'a': 1}");
    NO("{'a': {'$ne': null}}", "{}");
    NO("{'a': {'$ne': null}}", "{'a': [1, null]}");
    NO("{'a': null}", "{'a': {'$undefined': true}}");
    YES("{'a.b': null}", "{'a': {'$undefined': true}}");
    NO("{'a.b': null}", "{'a': [[]]}");
    NO("{'a': {'$nin': [null, []]}}", "{'a': [[]]}");
    YES("{'a': {'$nin': [null, []]}}", "{'a': [{'b': 1}]}");
    YES("{'a': {'$elemMatch': {'$ne': null}}}", "{'a': [[]]}");
    NO("{'a': {'$elemMatch': {'$eq': null}}}", "{'a': null}");
}

Test(match, comparisons_are_type_bracketed)
{
    YES("{'a': {'$gt': 1}}", "{'a': 2}");
    NO("{'a': {'$gt': 1}}", "{'a': 1}");
    YES("{'a': {'$gte': 1}}", "{'a': 1.0}");
    YES("{'a': {'$lt': 1}}", "{'a': 0.5}");
    YES("{'a': {'$lte': 1}}", "{'a': {'$numberLong': '1'}}");
    NO("{'a': {'$gt': 1}}", "{'a': 'x'}");
    NO("{'a': {'$lt': 'a'}}", "{'a': 1}");
    YES("{'a': {'$gt': 'a'}}", "{'a': 'b'}");
    YES("{'a': {'$gt': 5}}", "{'a': [1, 10]}");
    NO("{'a': {'$gt': 5}}", "{'a': [1, 2]}");
    YES("{'a': {'$gt': 1, '$lt': 3}}", "{'a': 2}");
    YES("{'a': {'$gt': 1, '$lt': 3}}", "{'a': [0, 5]}");
    YES("{'a': {'$lt': {'$maxKey': 1}}}", "{'a': 'anything'}");
    YES("{'a': {'$gt': {'$minKey': 1}}}", "{'a': null}");
    NO("{'a': {'$gt': {'$maxKey': 1}}}", "{'a': 1}");
    YES("{'a': {'$gt': {'$date': '2020-01-01T00:00:00Z'}}}", "{'a': {'$date': '2021-01-01T00:00:00Z'}}");
    NO("{'a': {'$gt': 1}}", "{}");
    YES("{'a': {'$gte': [1, 2]}}", "{'a': [[1, 3]]}");
}

Test(match, nan_only_equals_nan)
{
    YES("{'a': {'$numberDouble': 'NaN'}}", "{'a': {'$numberDouble': 'NaN'}}");
    YES("{'a': {'$gte': {'$numberDouble': 'NaN'}}}", "{'a': {'$numberDouble': 'NaN'}}");
    NO("{'a': {'$lt': 1}}", "{'a': {'$numberDouble': 'NaN'}}");
    NO("{'a': {'$gt': {'$numberDouble': 'NaN'}}}", "{'a': 1}");
    NO("{'a': {'$lte': {'$numberDouble': 'NaN'}}}", "{'a': 1}");
}

Test(match, ne_and_nin_negate_eq_and_in)
{
    YES("{'a': {'$ne': 1}}", "{'a': 2}");
    YES("{'a': {'$ne': 1}}", "{}");
    NO("{'a': {'$ne': 1}}", "{'a': [1, 2]}");
    YES("{'a': {'$ne': [1, 2]}}", "{'a': [2, 1]}");
    NO("{'a.b': {'$ne': 1}}", "{'a': [{'b': 2}, {'b': 1}]}");
    YES("{'a': {'$nin': [1, 2]}}", "{'a': 3}");
    YES("{'a': {'$nin': [1, 2]}}", "{}");
    NO("{'a': {'$nin': [1, 2]}}", "{'a': [3, 2]}");
    NO("{'a': {'$nin': [null]}}", "{}");
    BAD("{'a': {'$ne': {'$regularExpression': {'pattern': 'x', 'options': ''}}}}", MF_E_BadValue, NULL);
}

Test(match, in_with_values_arrays_null_and_regexes)
{
    YES("{'a': {'$in': [1, 2]}}", "{'a': 2.0}");
    NO("{'a': {'$in': [1, 2]}}", "{'a': 3}");
    NO("{'a': {'$in': []}}", "{'a': 3}");
    YES("{'a': {'$in': [5, 3]}}", "{'a': [1, 3]}");
    YES("{'a': {'$in': [[1, 3]]}}", "{'a': [1, 3]}");
    YES("{'a': {'$in': [null]}}", "{}");
    YES("{'a': {'$in': [{'$regularExpression': {'pattern': '^ab', 'options': ''}}]}}", "{'a': 'abc'}");
    YES("{'a': {'$in': [{'$regularExpression': {'pattern': '^AB', 'options': 'i'}}, 7]}}", "{'a': ['x', 'abc']}");
    NO("{'a': {'$in': [{'$regularExpression': {'pattern': '^ab', 'options': ''}}]}}", "{'a': 'cab'}");
    BAD("{'a': {'$in': 1}}", MF_E_BadValue, "$in needs an array");
    BAD("{'a': {'$nin': 1}}", MF_E_BadValue, "$nin needs an array");
    BAD("{'a': {'$in': [{'$gt': 1}]}}", MF_E_BadValue, "cannot nest $ under $in");
}

/* A $in list is sorted and de-duplicated once at parse time and searched per value. */
Test(match, in_lookup_uses_bson_order_with_mixed_numeric_types)
{
    /* 1, 1.0 and NumberLong(1) are one value; the document's type does not matter. */
    YES("{'a': {'$in': [3, {'$numberLong': '1'}, 1.0, 1, 'x']}}", "{'a': 1}");
    YES("{'a': {'$in': [3, {'$numberLong': '1'}, 'x']}}", "{'a': 1.0}");
    YES("{'a': {'$in': [3, 1.0, 'x']}}", "{'a': {'$numberLong': '1'}}");
    YES("{'a': {'$in': [3, {'$numberDecimal': '2.5'}, 'x']}}", "{'a': 2.5}");
    NO("{'a': {'$in': [3, 1.0, 'x']}}", "{'a': 2}");
    /* Values of other types never equal a number, even where they sort next to it. */
    NO("{'a': {'$in': [1, 2, 3]}}", "{'a': '1'}");
    NO("{'a': {'$in': [null]}}", "{'a': false}");
    YES("{'a': {'$in': [{'$numberDouble': 'NaN'}]}}", "{'a': {'$numberDouble': 'NaN'}}");
    NO("{'a': {'$in': [{'$numberDouble': 'NaN'}, 0]}}", "{'a': 1}");
    /* Arrays: any element, or the whole array, in the list. */
    YES("{'a': {'$in': [9, 8, 7]}}", "{'a': [1, 2, 8]}");
    YES("{'a': {'$in': [9, [1, 2]]}}", "{'a': [1, 2]}");
    YES("{'a': {'$in': [9, [1, 2]]}}", "{'a': [[1, 2], 5]}");
    NO("{'a': {'$in': [9, [2, 1]]}}", "{'a': [1, 2]}");
    /* null matches missing and null, not undefined-free other values. */
    YES("{'a': {'$in': [5, null, 4]}}", "{'b': 1}");
    YES("{'a': {'$in': [5, null, 4]}}", "{'a': null}");
    YES("{'a.b': {'$in': [5, null]}}", "{'a': [{'b': 1}, {'c': 1}]}");
    NO("{'a': {'$in': [5, 4]}}", "{'b': 1}");
    /* Regex elements are still tested as patterns, beside the sorted values. */
    YES("{'a': {'$in': [5, {'$regularExpression': {'pattern': 'b.d', 'options': ''}}, 4]}}", "{'a': 'abcd'}");
    YES("{'a': {'$in': [5, {'$regularExpression': {'pattern': 'b.d', 'options': ''}}, 4]}}", "{'a': 4.0}");
    NO("{'a': {'$in': [5, {'$regularExpression': {'pattern': 'b.d', 'options': ''}}, 4]}}", "{'a': 'bd'}");
    /* $nin is the negation. */
    NO("{'a': {'$nin': [3, {'$numberLong': '1'}]}}", "{'a': 1.0}");
    YES("{'a': {'$nin': [3, {'$numberLong': '1'}]}}", "{'a': [2, 4]}");
    NO("{'a': {'$nin': [3, null]}}", "{}");
}

/* A large list: every member is found, non-members are not (the lookup is a binary search). */
Test(match, in_with_ten_thousand_values)
{
    bson_t *f = bson_new(), inner, arr;
    mf_error_t err = {0};
    char key[16];

    BSON_APPEND_DOCUMENT_BEGIN(f, "a", &inner);
    BSON_APPEND_ARRAY_BEGIN(&inner, "$in", &arr);
    for (int i = 0; i < 10000; i++) {
        snprintf(key, sizeof(key), "%d", i);
        if (i % 3 == 0)
            BSON_APPEND_INT64(&arr, key, (int64_t)(9999 - i) * 2);
        else if (i % 3 == 1)
            BSON_APPEND_DOUBLE(&arr, key, (double)(9999 - i) * 2);
        else
            BSON_APPEND_INT32(&arr, key, (9999 - i) * 2);
    }
    bson_append_array_end(&inner, &arr);
    bson_append_document_end(f, &inner);
    mf_matcher_t *m = mf_matcher_new(f, &err);
    cr_assert_not_null(m, "%s", err.msg);
    for (int v = -3; v < 20003; v++) {
        bson_t *d = bson_new();
        if (v % 2)
            BSON_APPEND_DOUBLE(d, "a", v);
        else
            BSON_APPEND_INT32(d, "a", v);
        bool want = v >= 0 && v <= 19998 && v % 2 == 0;
        cr_assert_eq(mf_matcher_match(m, d, NULL), want, "value %d: expected %d", v, want);
        bson_destroy(d);
    }
    mf_matcher_free(m);
    bson_destroy(f);
}

/* $or of equalities on one path behaves as $in (MongoDB rewrites it so). */
Test(match, or_of_equalities_on_one_path_is_an_in)
{
    YES("{'%or': [{'a': 1}, {'a': 2}, {'a': {'%eq': 3}}]}", "{'a': 3.0}");
    NO("{'%or': [{'a': 1}, {'a': 2}, {'a': {'%eq': 3}}]}", "{'a': 4}");
    YES("{'%or': [{'a': 1}, {'a': {'%in': [7, 8]}}]}", "{'a': [0, 8]}");
    YES("{'%or': [{'a': 1}, {'a': null}]}", "{}");
    NO("{'%or': [{'a': 1}, {'a': 2}]}", "{}");
    YES("{'%or': [{'a': 1}, {'a': {'%in': [{'$regularExpression': {'pattern': '^q', 'options': ''}}]}}]}",
        "{'a': 'qq'}");
    /* {$eq: /re/} matches the regex value only, so it is not rewritten into a pattern. */
    NO("{'%or': [{'a': 1}, {'a': {'%eq': {'$regularExpression': {'pattern': '^q', 'options': ''}}}}]}",
       "{'a': 'qq'}");
    YES("{'%or': [{'a': 1}, {'a': {'%eq': {'$regularExpression': {'pattern': '^q', 'options': ''}}}}]}",
        "{'a': {'$regularExpression': {'pattern': '^q', 'options': ''}}}");
    /* Different paths stay a $or; equalities are grouped per path. */
    YES("{'%or': [{'a': 1}, {'b': 2}]}", "{'b': 2}");
    NO("{'%or': [{'a': 1}, {'b': 2}]}", "{'a': 2}");
    YES("{'%or': [{'a': 1}, {'b': 2}, {'a': 3}, {'c': {'%gt': 5}}, {'b': 4}]}", "{'a': 3}");
    YES("{'%or': [{'a': 1}, {'b': 2}, {'a': 3}, {'c': {'%gt': 5}}, {'b': 4}]}", "{'b': [0, 4]}");
    YES("{'%or': [{'a': 1}, {'b': 2}, {'a': 3}, {'c': {'%gt': 5}}, {'b': 4}]}", "{'c': 6}");
    NO("{'%or': [{'a': 1}, {'b': 2}, {'a': 3}, {'c': {'%gt': 5}}, {'b': 4}]}", "{'a': 2, 'b': 3, 'c': 5}");
    YES("{'%or': [{'a': 1}, {'b': 2}, {'a': 3}, {'c': {'%gt': 5}}, {'b': null}]}", "{'a': 2}");
    NO("{'%or': [{'a': 1}, {'b': 2}, {'a': 3}, {'c': {'%gt': 5}}, {'b': null}]}", "{'a': 2, 'b': 1}");
    /* $nor of the same shape is not rewritten. */
    NO("{'%nor': [{'a': 1}, {'a': 2}]}", "{'a': 2}");
    YES("{'%nor': [{'a': 1}, {'a': 2}]}", "{'a': 3}");
    /* The positional detail is the matching element. */
    cr_assert_eq(POS("{'%or': [{'a': 5}, {'a': 6}]}", "{'a': [1, 6]}"), 1);
}

Test(match, exists)
{
    YES("{'a': {'$exists': true}}", "{'a': null}");
    NO("{'a': {'$exists': true}}", "{'b': 1}");
    YES("{'a': {'$exists': false}}", "{'b': 1}");
    NO("{'a': {'$exists': false}}", "{'a': 1}");
    YES("{'a': {'$exists': 1}}", "{'a': 1}");
    YES("{'a': {'$exists': 0}}", "{}");
    YES("{'a.b': {'$exists': true}}", "{'a': [{'c': 1}, {'b': 1}]}");
    NO("{'a.b': {'$exists': true}}", "{'a': [1, 2]}");
    NO("{'a.b': {'$exists': false}}", "{'a': [{'c': 1}, {'b': 1}]}");
    YES("{'a.b': {'$exists': false}}", "{'a': [{'c': 1}]}");
}

Test(match, type_with_codes_aliases_arrays_and_number)
{
    YES("{'a': {'%type': 'string'}}", "{'a': 'x'}");
    YES("{'a': {'%type': 2}}", "{'a': 'x'}");
    YES("{'a': {'%type': 2.0}}", "{'a': 'x'}");
    NO("{'a': {'%type': 'string'}}", "{'a': 1}");
    YES("{'a': {'%type': 'number'}}", "{'a': {'$numberLong': '5'}}");
    YES("{'a': {'%type': 'number'}}", "{'a': 1.5}");
    NO("{'a': {'%type': 'number'}}", "{'a': '1'}");
    YES("{'a': {'%type': ['string', 'int']}}", "{'a': 1}");
    YES("{'a': {'%type': 'array'}}", "{'a': []}");
    YES("{'a': {'%type': 'int'}}", "{'a': ['x', 1]}");
    NO("{'a': {'%type': 'int'}}", "{'a': []}");
    YES("{'a': {'%type': 'null'}}", "{'a': null}");
    NO("{'a': {'%type': 'null'}}", "{}");
    YES("{'a': {'%type': -1}}", "{'a': {'$minKey': 1}}");
    YES("{'a': {'%type': 'maxKey'}}", "{'a': {'$maxKey': 1}}");
    YES("{'a': {'%type': 'object'}}", "{'a': {'b': 1}}");
    BAD("{'a': {'%type': 'nope'}}", MF_E_BadValue, "Unknown type name alias: nope");
    BAD("{'a': {'%type': 99}}", MF_E_BadValue, "Invalid numerical type code");
    BAD("{'a': {'%type': []}}", MF_E_FailedToParse, "must match at least one type");
    BAD("{'a': {'%type': {}}}", MF_E_TypeMismatch, NULL);
}

Test(match, all_operator)
{
    YES("{'a': {'$all': [1, 2]}}", "{'a': [2, 3, 1]}");
    NO("{'a': {'$all': [1, 2]}}", "{'a': [2, 3]}");
    YES("{'a': {'$all': [1]}}", "{'a': 1}");
    NO("{'a': {'$all': []}}", "{'a': [1]}");
    YES("{'a': {'$all': [[1, 2]]}}", "{'a': [[1, 2], 3]}");
    YES("{'a': {'$all': [[1, 2]]}}", "{'a': [1, 2]}");
    YES("{'a': {'$all': [{'$regularExpression': {'pattern': '^x', 'options': ''}}]}}", "{'a': ['y', 'xa']}");
    YES("{'a': {'$all': [{'$elemMatch': {'b': 1}}, {'$elemMatch': {'c': 2}}]}}",
        "{'a': [{'b': 1}, {'c': 2}]}");
    NO("{'a': {'$all': [{'$elemMatch': {'b': 1}}, {'$elemMatch': {'c': 2}}]}}",
       "{'a': [{'b': 1}, {'c': 3}]}");
    BAD("{'a': {'$all': 1}}", MF_E_BadValue, "$all needs an array");
    BAD("{'a': {'$all': [{'$elemMatch': {'b': 1}}, 2]}}", MF_E_BadValue, NULL);
    BAD("{'a': {'$all': [{'$gt': 1}]}}", MF_E_BadValue, NULL);
}

Test(match, elem_match_document_and_value_forms)
{
    YES("{'a': {'$elemMatch': {'b': 1, 'c': 2}}}", "{'a': [{'b': 1, 'c': 2}]}");
    NO("{'a': {'$elemMatch': {'b': 1, 'c': 2}}}", "{'a': [{'b': 1}, {'c': 2}]}");
    YES("{'a': {'$elemMatch': {'b': {'$gt': 1}}}}", "{'a': [{'b': 0}, {'b': 5}]}");
    YES("{'a': {'$elemMatch': {'$gt': 1, '$lt': 3}}}", "{'a': [0, 2, 5]}");
    NO("{'a': {'$elemMatch': {'$gt': 1, '$lt': 3}}}", "{'a': [0, 5]}");
    NO("{'a': {'$elemMatch': {'$gt': 1}}}", "{'a': 5}");
    NO("{'a': {'$elemMatch': {'$eq': 1}}}", "{'a': [[1]]}");
    YES("{'a': {'$elemMatch': {'$ne': 1}}}", "{'a': [1, 2]}");
    NO("{'a': {'$elemMatch': {'$ne': 1}}}", "{'a': [1, 1]}");
    YES("{'a': {'$elemMatch': {'$or': [{'b': 1}, {'c': 1}]}}}", "{'a': [{'c': 1}]}");
    YES("{'a.b': {'$elemMatch': {'$gte': 5}}}", "{'a': [{'b': [1]}, {'b': [6]}]}");
    YES("{'a': {'$elemMatch': {'$elemMatch': {'$eq': 1}}}}", "{'a': [[0, 1]]}");
    BAD("{'a': {'$elemMatch': 1}}", MF_E_BadValue, "$elemMatch needs an Object");
    BAD("{'a': {'$elemMatch': {'$foo': 1}}}", MF_E_BadValue, "unknown operator: $foo");
}

Test(match, size)
{
    YES("{'a': {'$size': 2}}", "{'a': [1, [2, 3]]}");
    NO("{'a': {'$size': 2}}", "{'a': [1]}");
    YES("{'a': {'$size': 0}}", "{'a': []}");
    NO("{'a': {'$size': 1}}", "{'a': 1}");
    NO("{'a': {'$size': 1}}", "{}");
    YES("{'a': {'$size': 1.0}}", "{'a': [1]}");
    BAD("{'a': {'$size': 1.5}}", MF_E_BadValue, "Failed to parse $size. Expected an integer: $size: 1.5");
    BAD("{'a': {'$size': 3000000000}}", MF_E_BadValue, "Cannot represent $size: 3000000000 in an int");
    BAD("{'a': {'$size': {'$numberDouble': 'NaN'}}}", MF_E_BadValue, "Expected an integer, but found NaN");
    YES("{'a.b': {'$size': 1}}", "{'a': [{'b': [1]}]}");
    BAD("{'a': {'$size': 'x'}}", MF_E_BadValue, "Failed to parse $size. Expected a number in: $size: \"x\"");
    BAD("{'a': {'$size': -1}}", MF_E_BadValue, "Failed to parse $size. Expected a non-negative number in: $size: -1");
}

Test(match, regex_with_options_and_regex_values)
{
    YES("{'a': {'%regex': '^ab'}}", "{'a': 'abc'}");
    NO("{'a': {'%regex': '^ab'}}", "{'a': 'ABC'}");
    YES("{'a': {'%regex': '^ab', '%options': 'i'}}", "{'a': 'ABC'}");
    YES("{'a': {'%options': 'i', '%regex': '^ab'}}", "{'a': 'ABC'}");
    YES("{'a': {'%regex': '^b', '%options': 'm'}}", "{'a': 'a\\nb'}");
    NO("{'a': {'%regex': '^b'}}", "{'a': 'a\\nb'}");
    YES("{'a': {'%regex': 'a.b', '%options': 's'}}", "{'a': 'a\\nb'}");
    NO("{'a': {'%regex': 'a.b'}}", "{'a': 'a\\nb'}");
    YES("{'a': {'%regex': 'a b # comment', '%options': 'x'}}", "{'a': 'ab'}");
    YES("{'a': {'$regularExpression': {'pattern': 'B', 'options': 'i'}}}", "{'a': 'abc'}");
    YES("{'a': {'%regex': {'$regularExpression': {'pattern': 'B', 'options': 'i'}}}}", "{'a': 'abc'}");
    YES("{'a': {'$regularExpression': {'pattern': 'x', 'options': ''}}}", "{'a': ['y', 'zx']}");
    NO("{'a': {'$regularExpression': {'pattern': 'x', 'options': ''}}}", "{'a': 1}");
    YES("{'a': {'$regularExpression': {'pattern': 'x', 'options': 'i'}}}",
        "{'a': {'$regularExpression': {'pattern': 'x', 'options': 'i'}}}");
    YES("{'a': {'%regex': 'é'}}", "{'a': 'café'}");
    BAD("{'a': {'%regex': '('}}", MF_E_Location51091, "Regular expression is invalid");
    BAD("{'a': {'%regex': 'a', '%options': 'z'}}", MF_E_Location51108, "invalid flag in regex options");
    BAD("{'a': {'%options': 'i'}}", MF_E_BadValue, "$options needs a $regex");
    BAD("{'a': {'%regex': 1}}", MF_E_BadValue, "$regex has to be a string");
    BAD("{'a': {'%regex': {'$regularExpression': {'pattern': 'B', 'options': 'i'}}, '%options': 'm'}}",
        MF_E_Location51075, "options set in both $regex and $options");
    BAD("{'a': {'%regex': {'$regularExpression': {'pattern': 'B', 'options': 'i'}}, '%options': ''}}",
        MF_E_Location51075, "options set in both $regex and $options");
    BAD("{'a': {'%options': 'm', '%regex': {'$regularExpression': {'pattern': 'B', 'options': 'i'}}}}",
        MF_E_Location51074, "options set in both $regex and $options");
    YES("{'a': {'%options': '', '%regex': {'$regularExpression': {'pattern': 'b', 'options': 'i'}}}}", "{'a': 'B'}");
    YES("{'a': {'%options': 'i', '%regex': {'$regularExpression': {'pattern': 'b', 'options': ''}}}}", "{'a': 'B'}");
}

Test(match, mod)
{
    YES("{'a': {'$mod': [4, 1]}}", "{'a': 5}");
    NO("{'a': {'$mod': [4, 1]}}", "{'a': 6}");
    YES("{'a': {'$mod': [4, 1]}}", "{'a': 5.9}");
    YES("{'a': {'$mod': [4, -1]}}", "{'a': -5}");
    YES("{'a': {'$mod': [4.5, 1]}}", "{'a': 9}");
    YES("{'a': {'$mod': [-1, 0]}}", "{'a': {'$numberLong': '-9223372036854775808'}}");
    YES("{'a': {'$mod': [2, 0]}}", "{'a': [1, 4]}");
    NO("{'a': {'$mod': [2, 0]}}", "{'a': 'x'}");
    NO("{'a': {'$mod': [2, 0]}}", "{'a': {'$numberDouble': 'NaN'}}");
    BAD("{'a': {'$mod': 4}}", MF_E_BadValue, "malformed mod, needs to be an array");
    BAD("{'a': {'$mod': [4]}}", MF_E_BadValue, "malformed mod, not enough elements");
    BAD("{'a': {'$mod': [4, 1, 2]}}", MF_E_BadValue, "malformed mod, too many elements");
    BAD("{'a': {'$mod': ['x', 1]}}", MF_E_BadValue, "malformed mod, divisor not a number");
    BAD("{'a': {'$mod': [4, 'x']}}", MF_E_BadValue, "malformed mod, remainder not a number");
    BAD("{'a': {'$mod': [0, 1]}}", MF_E_BadValue, "divisor cannot be 0");
    BAD("{'a': {'$mod': [{'$numberDouble': 'NaN'}, 1]}}", MF_E_BadValue, "divisor value is invalid");
}

Test(match, not_operator)
{
    YES("{'a': {'$not': {'$gt': 5}}}", "{'a': 3}");
    YES("{'a': {'$not': {'$gt': 5}}}", "{}");
    YES("{'a': {'$not': {'$gt': 5}}}", "{'a': 'x'}");
    NO("{'a': {'$not': {'$gt': 5}}}", "{'a': [1, 9]}");
    YES("{'a': {'$not': {'$regularExpression': {'pattern': '^x', 'options': ''}}}}", "{'a': 'yx'}");
    NO("{'a': {'$not': {'$regularExpression': {'pattern': '^x', 'options': ''}}}}", "{'a': 'xy'}");
    YES("{'a': {'$not': {'%regex': '^x'}}}", "{'a': 'yx'}");
    BAD("{'a': {'$not': 5}}", MF_E_BadValue, "$not needs a regex or a document");
    BAD("{'a': {'$not': {}}}", MF_E_BadValue, "$not cannot be empty");
    BAD("{'a': {'$not': {'b': 1}}}", MF_E_BadValue, NULL);
}

Test(match, logical_operators)
{
    YES("{'$and': [{'a': 1}, {'b': 2}]}", "{'a': 1, 'b': 2}");
    NO("{'$and': [{'a': 1}, {'b': 2}]}", "{'a': 1, 'b': 3}");
    YES("{'$or': [{'a': 1}, {'b': 2}]}", "{'a': 0, 'b': 2}");
    NO("{'$or': [{'a': 1}, {'b': 2}]}", "{'a': 0, 'b': 0}");
    YES("{'$nor': [{'a': 1}, {'b': 2}]}", "{'a': 0, 'b': 0}");
    NO("{'$nor': [{'a': 1}, {'b': 2}]}", "{'a': 1}");
    YES("{'$or': [{'$and': [{'a': 1}, {'b': 1}]}, {'c': 1}]}", "{'c': 1}");
    YES("{'a': 1, '$or': [{'b': 1}, {'c': 1}]}", "{'a': 1, 'c': 1}");
    BAD("{'$and': []}", MF_E_BadValue, "$and/$or/$nor must be a nonempty array");
    BAD("{'$or': []}", MF_E_BadValue, "$and/$or/$nor must be a nonempty array");
    BAD("{'$nor': 1}", MF_E_BadValue, "must be an array");
    BAD("{'$or': [1]}", MF_E_BadValue, "$or/$and/$nor entries need to be full objects");
}

Test(match, operator_errors_and_top_level_keywords)
{
    BAD("{'a': {'$foo': 1}}", MF_E_BadValue, "unknown operator: $foo");
    BAD("{'a': {'$gt': 1, 'b': 1}}", MF_E_BadValue, "unknown operator: b");
    BAD("{'$foo': 1}", MF_E_BadValue, "unknown top level operator: $foo");
    BAD("{'$foo': 1}", MF_E_BadValue, "consider using $getField or $setField.");
    BAD("{'$not': {'a': 1}}", MF_E_BadValue, "If you are trying to negate an entire expression, use $nor.");
    BAD("{'$where': 'this.a == 1'}", MF_E_BadValue, NULL);
    BAD("{'a': {'$where': 'x'}}", MF_E_BadValue, "$where cannot be applied to a field");
    BAD("{'a': {'$gt': {'$regularExpression': {'pattern': 'x', 'options': ''}}}}", MF_E_BadValue,
        "Can't have RegEx as arg to predicate over field 'a'.");
    BAD("{'a': {'$lte': {'$regularExpression': {'pattern': 'x', 'options': ''}}}}", MF_E_BadValue, NULL);
    BAD("{'a': {'$elemMatch': {'b': 1, '$expr': true}}}", MF_E_BadValue,
        "$expr can only be applied to the top-level document");
    BAD("{'a': {'$elemMatch': {'$or': [{'$expr': true}]}}}", MF_E_BadValue, NULL);
    YES("{'$or': [{'$expr': true}]}", "{}");
    BAD("{'a': {'%type': 0}}", MF_E_BadValue, "Instead use {$exists:false}.");
    BAD("{'$alwaysTrue': 0}", MF_E_FailedToParse, "$alwaysTrue must be an integer value of 1");
    BAD("{'$alwaysFalse': 'x'}", MF_E_FailedToParse, "Expected a number in: $alwaysFalse");
    YES("{'$alwaysTrue': 1.0}", "{}");
    YES("{'$comment': 'hello', 'a': 1}", "{'a': 1}");
    YES("{'a': {'$ref': 'c', '$id': 1}}", "{'a': {'$ref': 'c', '$id': 1}}");
    YES("{'a': {'$eq': {'$gt': 1}}}", "{'a': {'$gt': 1}}");
    YES("{'$alwaysTrue': 1}", "{}");
    NO("{'$alwaysFalse': 1}", "{}");
}

/* nested: a filter of depth levels of $and around {a: 1}. */
static bson_t *
nested(int levels)
{
    bson_t *cur = J("{'a': 1}");
    for (int i = 0; i < levels; i++) {
        bson_t *next = bson_new(), arr;
        BSON_APPEND_ARRAY_BEGIN(next, "$and", &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", cur);
        bson_append_array_end(next, &arr);
        bson_destroy(cur);
        cur = next;
    }
    return cur;
}

Test(match, deep_nesting_is_refused_not_recursed)
{
    mf_error_t err = {0};
    bson_t *ok = nested(50), *deep = nested(150), *doc = J("{'a': 1}");
    mf_matcher_t *m = mf_matcher_new(ok, &err);
    cr_assert_not_null(m, "50 levels should parse: %s", err.msg);
    cr_assert(mf_matcher_match(m, doc, NULL));
    mf_matcher_free(m);
    m = mf_matcher_new(deep, &err);
    cr_assert_null(m);
    cr_assert_eq(err.code, MF_E_BadValue, "code %d", err.code);
    bson_destroy(ok);
    bson_destroy(deep);
    bson_destroy(doc);

    /* $elemMatch nesting is bounded as well. */
    bson_t *cur = J("{'$gt': 1}");
    for (int i = 0; i < 120; i++) {
        bson_t *next = bson_new();
        BSON_APPEND_DOCUMENT(next, "$elemMatch", cur);
        bson_destroy(cur);
        cur = next;
    }
    bson_t *f = bson_new();
    BSON_APPEND_DOCUMENT(f, "a", cur);
    m = mf_matcher_new(f, &err);
    cr_assert_null(m);
    cr_assert_eq(err.code, MF_E_BadValue, "code %d", err.code);
    bson_destroy(cur);
    bson_destroy(f);
}

Test(match, positional_array_pos_details)
{
    cr_assert_eq(POS("{'a': 3}", "{'a': [1, 2, 3]}"), 2);
    cr_assert_eq(POS("{'a.b': 2}", "{'a': [{'b': 1}, {'b': 2}]}"), 1);
    cr_assert_eq(POS("{'a': {'$elemMatch': {'$gt': 1}}}", "{'a': [0, 2]}"), 1);
    cr_assert_eq(POS("{'a': {'$gt': 5}}", "{'a': [1, 10]}"), 1);
    cr_assert_eq(POS("{'a': 1}", "{'a': 1}"), -1);
    cr_assert_eq(POS("{'x': 1, 'a.b': {'$gte': 2}}", "{'x': 1, 'a': [{'b': 1}, {'b': 1}, {'b': 5}]}"), 2);
    cr_assert_eq(POS("{'a': 9}", "{'a': [1]}"), -2);
}

static bool
MV(const char *filter_json_field, const char *value_json_field)
{
    bson_t *f = J(filter_json_field), *v = J(value_json_field);
    bson_iter_t fi, vi;
    mf_error_t err = {0};
    mf_matcher_t *m;
    bool r;

    cr_assert(bson_iter_init_find(&fi, f, "f"));
    cr_assert(bson_iter_init_find(&vi, v, "v"));
    m = mf_matcher_new_value(bson_iter_value(&fi), &err);
    cr_assert_not_null(m, "value filter %s: %s", filter_json_field, err.msg);
    r = mf_matcher_match_value(m, bson_iter_value(&vi));
    mf_matcher_free(m);
    bson_destroy(f);
    bson_destroy(v);
    return r;
}

Test(match, value_matchers_for_pull_and_array_filters)
{
    cr_assert(MV("{'f': {'$gte': 5}}", "{'v': 6}"));
    cr_assert_not(MV("{'f': {'$gte': 5}}", "{'v': 4}"));
    cr_assert(MV("{'f': {'$gte': 5, '$lt': 7}}", "{'v': 6.5}"));
    cr_assert(MV("{'f': {'b': 1}}", "{'v': {'b': 1, 'c': 2}}"));
    cr_assert_not(MV("{'f': {'b': 1}}", "{'v': 1}"));
    cr_assert(MV("{'f': {'b': {'$gt': 1}, 'c': 2}}", "{'v': {'b': 3, 'c': 2}}"));
    cr_assert(MV("{'f': 5}", "{'v': 5.0}"));
    cr_assert_not(MV("{'f': 5}", "{'v': 6}"));
    cr_assert(MV("{'f': {'$in': ['a', 'b']}}", "{'v': 'b'}"));
    cr_assert(MV("{'f': {'$regularExpression': {'pattern': '^a', 'options': ''}}}", "{'v': 'abc'}"));
    cr_assert(MV("{'f': {'$or': [{'b': 1}, {'b': 2}]}}", "{'v': {'b': 2}}"));

    /* A document-form matcher also matches whole documents through mf_matcher_match. */
    mf_error_t err = {0};
    bson_t *f = J("{'f': {'$gt': 1}}"), *d = J("{'a': 1}");
    bson_iter_t fi;
    cr_assert(bson_iter_init_find(&fi, f, "f"));
    mf_matcher_t *m = mf_matcher_new_value(bson_iter_value(&fi), &err);
    cr_assert_not(mf_matcher_match(m, d, NULL), "a document is not > 1");
    mf_matcher_free(m);
    bson_destroy(f);
    bson_destroy(d);
}

/* ---- path.c ---- */

typedef struct seen {
    int n;
    int nulls;
    int32_t pos[16];
} seen_t;

static bool
collect(void *arg, const bson_value_t *v, int32_t pos)
{
    seen_t *s = arg;
    if (v == NULL)
        s->nulls++;
    if (s->n < 16)
        s->pos[s->n] = pos;
    s->n++;
    return false;
}

Test(path, walk_reports_values_missing_and_array_positions)
{
    bson_t *d = J("{'a': [{'b': 1}, {'c': 1}, 5, {'b': [2, 3]}]}");
    seen_t s = {0};
    mf_path_walk(d, "a.b", collect, &s);
    cr_assert_eq(s.n, 3, "values: %d", s.n);
    cr_assert_eq(s.nulls, 1);
    cr_assert_eq(s.pos[0], 0);
    cr_assert_eq(s.pos[1], 1);
    cr_assert_eq(s.pos[2], 3);
    memset(&s, 0, sizeof(s));
    mf_path_walk(d, "z", collect, &s);
    cr_assert_eq(s.n, 1);
    cr_assert_eq(s.nulls, 1);
    bson_destroy(d);
}

Test(path, get_descends_documents_and_array_indexes_only)
{
    bson_t *d = J("{'a': {'b': [10, {'c': 'x'}]}}");
    bson_value_t v;
    cr_assert(mf_path_get(d, "a.b.0", &v));
    cr_assert_eq(v.value_type, BSON_TYPE_INT32);
    cr_assert_eq(v.value.v_int32, 10);
    cr_assert(mf_path_get(d, "a.b.1.c", &v));
    cr_assert_str_eq(v.value.v_utf8.str, "x");
    cr_assert_not(mf_path_get(d, "a.b.c", &v), "no implicit traversal in mf_path_get");
    cr_assert_not(mf_path_get(d, "a.x", &v));
    cr_assert(mf_path_get(d, "a", &v));
    cr_assert_eq(v.value_type, BSON_TYPE_DOCUMENT);
    bson_destroy(d);
}

/* ---- $expr (uses src/query/expr.c) ---- */

Test(match, expr_uses_aggregation_expressions)
{
    YES("{'$expr': {'$gt': ['$a', '$b']}}", "{'a': 5, 'b': 2}");
    NO("{'$expr': {'$gt': ['$a', '$b']}}", "{'a': 1, 'b': 2}");
    YES("{'x': 1, '$expr': {'$eq': ['$a', 1]}}", "{'x': 1, 'a': 1}");
    NO("{'$expr': 0}", "{'a': 1}");
    BAD("{'$expr': {'$foo': 1}}", MF_E_InvalidPipelineOperator, NULL);
}

/* ---- $jsonSchema (uses src/query/jsonschema.c) ---- */

Test(match, json_schema_is_a_top_level_operator)
{
    const char *f = "{'%jsonSchema': {'bsonType': 'object', 'required': ['name'],"
                    " 'properties': {'name': {'bsonType': 'string'}, 'age': {'bsonType': 'int', 'minimum': 0}}}}";
    YES(f, "{'name': 'a', 'age': 3}");
    YES(f, "{'name': 'a'}");
    NO(f, "{'age': 3}");
    NO(f, "{'name': 'a', 'age': -1}");
    NO(f, "{'name': 5}");
    YES("{'x': 1, '%jsonSchema': {'required': ['x']}}", "{'x': 1}");
    NO("{'%or': [{'%jsonSchema': {'required': ['y']}}, {'x': 2}]}", "{'x': 1}");
}

Test(match, json_schema_unknown_keyword_is_refused)
{
    BAD("{'%jsonSchema': {'foo': 1}}", MF_E_FailedToParse, "Unknown $jsonSchema keyword: foo");
    BAD("{'%jsonSchema': {'format': 'x'}}", MF_E_FailedToParse, "is not currently supported");
    BAD("{'%jsonSchema': 5}", MF_E_TypeMismatch, NULL);
}

/* D: the failure details of filter on doc, as relaxed JSON (caller frees). */
static char *
D(const char *filter, const char *doc)
{
    bson_t *f = J(filter), *d = J(doc), out;
    mf_matcher_failure_details(f, d, &out, 800);
    char *s = bson_as_relaxed_extended_json(&out, NULL);
    bson_destroy(&out);
    bson_destroy(f);
    bson_destroy(d);
    return s;
}

Test(match, failure_details_name_the_failing_rules)
{
    char *s = D("{'%jsonSchema': {'required': ['a', 'b']}}", "{'a': 1}");
    cr_assert(strstr(s, "\"operatorName\" : \"$jsonSchema\"") != NULL, "%s", s);
    cr_assert(strstr(s, "\"missingProperties\" : [ \"b\" ]") != NULL, "%s", s);
    bson_free(s);
    s = D("{'a': {'%type': 'number'}}", "{'a': 'x'}");
    cr_assert(strstr(s, "\"operatorName\" : \"$type\"") != NULL, "%s", s);
    cr_assert(strstr(s, "\"consideredType\" : \"string\"") != NULL, "%s", s);
    bson_free(s);
    s = D("{'a': 1, 'b': {'%exists': true}}", "{'a': 1}");
    cr_assert(strstr(s, "\"clausesNotSatisfied\"") != NULL, "%s", s);
    cr_assert(strstr(s, "\"index\" : 1") != NULL, "%s", s);
    cr_assert(strstr(s, "\"reason\" : \"path does not exist\"") != NULL, "%s", s);
    bson_free(s);
    s = D("{'a': {'%bitsAllSet': 3}}", "{'a': 4}");
    cr_assert(strstr(s, "\"operatorName\" : \"$bitsAllSet\"") != NULL, "%s", s);
    cr_assert(strstr(s, "\"reason\" : \"bitwise operator failed to match\"") != NULL, "%s", s);
    cr_assert(strstr(s, "\"consideredValue\" : 4") != NULL, "%s", s);
    bson_free(s);
    s = D("{'a': {'%gt': 5}}", "{'b': 4}");
    cr_assert(strstr(s, "\"reason\" : \"field was missing\"") != NULL, "%s", s);
    bson_free(s);
    s = D("{'a': {'%size': 2}}", "{'a': [1]}");
    cr_assert(strstr(s, "\"reason\" : \"array length was not equal to given size\"") != NULL, "%s", s);
    bson_free(s);
}

Test(match, bit_tests)
{
    /* The manual's collection: 54, 20, 20.0 and BinData 0x66. */
    YES("{'a': {'$bitsAllSet': [1, 5]}}", "{'a': 54}");
    NO("{'a': {'$bitsAllSet': [1, 5]}}", "{'a': 20}");
    YES("{'a': {'$bitsAllSet': [1, 5]}}", "{'a': {'$binary': {'base64': 'Zg==', 'subType': '00'}}}");
    YES("{'a': {'$bitsAllSet': 50}}", "{'a': 54}");
    YES("{'a': {'$bitsAllClear': 35}}", "{'a': 20.0}");
    NO("{'a': {'$bitsAllClear': 35}}", "{'a': 20.5}");
    YES("{'a': {'$bitsAnySet': {'$binary': {'base64': 'MA==', 'subType': '00'}}}}", "{'a': 20}");
    YES("{'a': {'$bitsAnyClear': [0]}}", "{'a': {'$binary': {'base64': 'Zg==', 'subType': '00'}}}");
    /* Sign extension of numbers, zero extension of BinData. */
    YES("{'a': {'$bitsAllSet': [200]}}", "{'a': -5}");
    NO("{'a': {'$bitsAllSet': [200]}}", "{'a': 5}");
    YES("{'a': {'$bitsAllClear': [200]}}", "{'a': {'$binary': {'base64': 'ww==', 'subType': '00'}}}");
    /* Array elements, other types, missing fields. */
    YES("{'a': {'$bitsAllSet': 4}}", "{'a': ['x', 6]}");
    NO("{'a': {'$bitsAllClear': []}}", "{'a': 'x'}");
    NO("{'a': {'$bitsAllClear': []}}", "{}");
    YES("{'a': {'$not': {'$bitsAnySet': 1}}}", "{}");
    YES("{'a': {'$elemMatch': {'$bitsAllSet': 3, '$lt': 10}}}", "{'a': [1, 7, 11]}");
    NO("{'a': {'$elemMatch': {'$bitsAllSet': 3, '$lt': 10}}}", "{'a': [1, 8, 11]}");
    YES("{'a': {'$bitsAllSet': {'$numberLong': '4'}}}", "{'a': {'$numberDecimal': '4'}}");
    /* Errors, as mongod reports them. */
    BAD("{'a': {'$bitsAllSet': -1}}", MF_E_FailedToParse, "Expected a non-negative number in: $bitsAllSet: -1");
    BAD("{'a': {'$bitsAnySet': 1.5}}", MF_E_FailedToParse, "Expected an integer: $bitsAnySet: 1.5");
    BAD("{'a': {'$bitsAnySet': 1e20}}", MF_E_FailedToParse, "Cannot represent as a 64-bit integer: $bitsAnySet: 1e+20.0");
    BAD("{'a': {'$bitsAllClear': [-1]}}", MF_E_BadValue, "Failed to parse bit position. Expected a non-negative number in: 0: -1");
    BAD("{'a': {'$bitsAllClear': [0, 'x']}}", MF_E_BadValue, "Failed to parse bit position. Expected a number in: 1: \"x\"");
    BAD("{'a': {'$bitsAnyClear': 'x'}}", MF_E_BadValue, "a takes an Array, a number, or a BinData but received: $bitsAnyClear: \"x\"");
}
