/*
 * test_index.c: index key generation (index.c): single and compound keys,
 * multikey expansion, arrays shared by several fields, parallel arrays,
 * missing fields as null, empty arrays as undefined, sparse skipping,
 * positional paths and de-duplication, and a value already found giving
 * the key its document would (mf_index_keys_of_value), and hashed indexes
 * (mongod's known hash64 values, their keys, arrays refused). Keys are decoded
 * back to JSON-ish text with mf_ks_decode so expectations read like
 * MongoDB's key lists.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "doc/hash.h"
#include "index/index.h"

/* Generates doc_json's keys for pattern_json and renders them as "[v0, v1] ..." sorted by key bytes. */
static int
keys_text(const char *pattern_json, bool sparse, const char *doc_json, char *out, size_t cap, bool *multikey,
          bool *skip, int *code)
{
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)pattern_json, -1, &berr);
    bson_t *doc = bson_new_from_json((const uint8_t *)doc_json, -1, &berr);
    mf_keypattern_t kp;
    mf_keyset_t ks;
    mf_error_t err = {0};
    int rc;

    cr_assert(pat != NULL && doc != NULL, "bad test JSON: %s / %s", pattern_json, doc_json);
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "pattern %s: %s", pattern_json, err.msg);
    mf_keyset_init(&ks);
    rc = mf_index_keys(&kp, sparse, doc, &ks, skip, multikey, &err);
    *code = rc == 0 ? 0 : err.code;
    out[0] = '\0';
    if (rc == 0) {
        /* Sort keys by bytes (index order) with a simple insertion sort over indices. */
        int order[64];
        int n = ks.n < 64 ? ks.n : 64;
        for (int i = 0; i < n; i++) {
            int j = i;
            order[i] = i;
            while (j > 0) {
                mf_keystring_t *a = &ks.keys[order[j - 1]], *b = &ks.keys[order[j]];
                size_t m = a->len < b->len ? a->len : b->len;
                int c = memcmp(a->data, b->data, m);
                if (c < 0 || (c == 0 && a->len <= b->len))
                    break;
                int t = order[j - 1];
                order[j - 1] = order[j];
                order[j] = t;
                j--;
            }
        }
        size_t used = 0;
        for (int i = 0; i < n; i++) {
            bson_t dec = BSON_INITIALIZER;
            cr_assert_eq(mf_ks_decode(ks.keys[order[i]].data, ks.keys[order[i]].len, kp.desc, kp.nfields, &dec, &err),
                         0, "decode: %s", err.msg);
            char *j = bson_as_relaxed_extended_json(&dec, NULL);
            used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s%s", i ? " " : "", j);
            bson_free(j);
            bson_destroy(&dec);
        }
    }
    mf_keyset_destroy(&ks);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
    bson_destroy(doc);
    return rc;
}

#define EXPECT_KEYS(pattern, sparse, doc, want, want_multikey)                                                     \
    do {                                                                                                           \
        char got_[2048];                                                                                           \
        bool mk_, skip_;                                                                                           \
        int code_;                                                                                                 \
        int rc_ = keys_text(pattern, sparse, doc, got_, sizeof(got_), &mk_, &skip_, &code_);                       \
        cr_assert_eq(rc_, 0, "%s over %s failed with %d", pattern, doc, code_);                                    \
        cr_assert_str_eq(got_, want, "%s over %s: got %s, want %s", pattern, doc, got_, want);                     \
        cr_assert_eq(mk_, want_multikey, "%s over %s: multikey %d, want %d", pattern, doc, mk_, want_multikey);    \
    } while (0)

Test(index_keys, a_scalar_field_gives_one_key)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": 5}", "{ \"0\" : 5 }", false);
}

Test(index_keys, a_missing_field_indexes_as_null)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"b\": 5}", "{ \"0\" : null }", false);
    EXPECT_KEYS("{\"a.b\": 1}", false, "{\"a\": 5}", "{ \"0\" : null }", false);
}

Test(index_keys, a_compound_key_keeps_field_order)
{
    EXPECT_KEYS("{\"a\": 1, \"b\": -1}", false, "{\"b\": \"x\", \"a\": 2}", "{ \"0\" : 2, \"1\" : \"x\" }", false);
}

Test(index_keys, an_array_gives_one_key_per_element_and_is_multikey)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": [3, 1, 2]}", "{ \"0\" : 1 } { \"0\" : 2 } { \"0\" : 3 }", true);
}

Test(index_keys, duplicate_elements_give_one_key)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": [1, 1, 2, 1]}", "{ \"0\" : 1 } { \"0\" : 2 }", true);
}

Test(index_keys, a_single_element_array_is_still_multikey)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": [7]}", "{ \"0\" : 7 }", true);
}

Test(index_keys, an_empty_array_indexes_as_undefined)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": []}", "{ \"0\" : { \"$undefined\" : true } }", true);
    EXPECT_KEYS("{\"a.b\": 1}", false, "{\"a\": []}", "{ \"0\" : null }", true);
}

Test(index_keys, a_compound_key_with_one_array_fixes_the_other_fields)
{
    EXPECT_KEYS("{\"a\": 1, \"b\": 1}", false, "{\"a\": [1, 2], \"b\": \"x\"}",
                "{ \"0\" : 1, \"1\" : \"x\" } { \"0\" : 2, \"1\" : \"x\" }", true);
}

Test(index_keys, fields_under_the_same_array_expand_together)
{
    EXPECT_KEYS("{\"a.b\": 1, \"a.c\": 1}", false, "{\"a\": [{\"b\": 1, \"c\": 2}, {\"b\": 3, \"c\": 4}]}",
                "{ \"0\" : 1, \"1\" : 2 } { \"0\" : 3, \"1\" : 4 }", true);
}

Test(index_keys, array_elements_that_are_not_documents_give_null_for_subpaths)
{
    EXPECT_KEYS("{\"a.b\": 1}", false, "{\"a\": [1, {\"b\": 2}]}", "{ \"0\" : null } { \"0\" : 2 }", true);
}

Test(index_keys, nested_arrays_in_a_path_expand_each_level)
{
    EXPECT_KEYS("{\"a.b.c\": 1}", false, "{\"a\": [{\"b\": [{\"c\": 1}, {\"c\": 2}]}, {\"b\": {\"c\": 3}}]}",
                "{ \"0\" : 1 } { \"0\" : 2 } { \"0\" : 3 }", true);
}

Test(index_keys, an_array_inside_an_array_leaf_is_indexed_whole)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": [[1, 2], 3]}", "{ \"0\" : 3 } { \"0\" : [ 1, 2 ] }", true);
}

Test(index_keys, a_positional_path_indexes_one_element)
{
    EXPECT_KEYS("{\"a.1\": 1}", false, "{\"a\": [5, 6, 7]}", "{ \"0\" : 6 }", false);
    EXPECT_KEYS("{\"a.0.b\": 1}", false, "{\"a\": [{\"b\": 9}, {\"b\": 8}]}", "{ \"0\" : 9 }", false);
}

/*
 * "a.0" over {a: [{"0": 42}]}: the key is the position's value, and the
 * matcher also reads the document's field "0" (42), which no key holds: the
 * index counts as multikey, so the planner takes no bounds from the path.
 */
Test(index_keys, a_positional_path_beside_a_field_of_that_name_is_multikey)
{
    EXPECT_KEYS("{\"a.0\": 1}", false, "{\"a\": [{\"0\": 42}]}", "{ \"0\" : { \"0\" : 42 } }", true);
    EXPECT_KEYS("{\"a.0\": 1}", false, "{\"a\": [{\"1\": 42}, {\"b\": 1}]}", "{ \"0\" : { \"1\" : 42 } }", false);
}

Test(index_keys, parallel_arrays_are_refused_with_171)
{
    char got[256];
    bool mk, skip;
    int code;
    int rc = keys_text("{\"a\": 1, \"b\": 1}", false, "{\"a\": [1, 2], \"b\": [3, 4]}", got, sizeof(got), &mk, &skip,
                       &code);
    cr_assert_eq(rc, -1, "parallel arrays accepted: %s", got);
    cr_assert_eq(code, 171, "code %d, want 171", code);
}

Test(index_keys, two_arrays_in_different_documents_of_a_compound_key_are_parallel)
{
    char got[256];
    bool mk, skip;
    int code;
    int rc = keys_text("{\"x.a\": 1, \"y.b\": 1}", false, "{\"x\": {\"a\": [1]}, \"y\": {\"b\": [2]}}", got,
                       sizeof(got), &mk, &skip, &code);
    cr_assert_eq(rc, -1, "parallel arrays accepted: %s", got);
    cr_assert_eq(code, 171, "code %d, want 171", code);
}

Test(index_keys, sparse_skips_documents_missing_every_field)
{
    char got[256];
    bool mk, skip;
    int code;
    cr_assert_eq(keys_text("{\"a\": 1, \"b\": 1}", true, "{\"c\": 1}", got, sizeof(got), &mk, &skip, &code), 0);
    cr_assert(skip, "sparse index did not skip a document without its fields (keys %s)", got);
    cr_assert_eq(keys_text("{\"a\": 1, \"b\": 1}", true, "{\"b\": 1}", got, sizeof(got), &mk, &skip, &code), 0);
    cr_assert(!skip, "sparse compound index skipped a document with one of its fields");
    cr_assert_str_eq(got, "{ \"0\" : null, \"1\" : 1 }", "got %s", got);
}

Test(index_keys, sparse_still_indexes_explicit_null)
{
    EXPECT_KEYS("{\"a\": 1}", true, "{\"a\": null}", "{ \"0\" : null }", false);
}

Test(index_keys, a_descending_field_decodes_back_to_its_value)
{
    EXPECT_KEYS("{\"a\": -1}", false, "{\"a\": [\"x\", \"y\"]}", "{ \"0\" : \"y\" } { \"0\" : \"x\" }", true);
}

Test(keypattern, string_and_non_numeric_directions_are_refused)
{
    /* "text", "hashed" (and the geo types) are index types now; "wildcard" is not one mayfly has. */
    bson_t *pat = bson_new_from_json((const uint8_t *)"{\"a\": \"wildcard\"}", -1, NULL);
    mf_keypattern_t kp;
    mf_error_t err = {0};
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), -1, "wildcard pattern accepted");
    cr_assert_eq(err.code, 67, "code %d, want 67", err.code);
    bson_destroy(pat);
}

/* Builds {a: [elements...]} with n elements: i % distinct (int32), every third one as a double. */
static bson_t *
big_array_doc(int n, int distinct)
{
    bson_t *doc = bson_new(), arr;
    char key[16];
    BSON_APPEND_ARRAY_BEGIN(doc, "a", &arr);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "%d", i);
        int v = (n - 1 - i) % distinct;
        if (i % 3 == 0)
            BSON_APPEND_DOUBLE(&arr, key, v);
        else
            BSON_APPEND_INT32(&arr, key, v);
    }
    bson_append_array_end(doc, &arr);
    return doc;
}

static int
key_cmp(const mf_keystring_t *x, const mf_keystring_t *y)
{
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->data, y->data, m);
    return c != 0 ? c : (x->len < y->len ? -1 : (x->len > y->len ? 1 : 0));
}

/* Keys come out sorted by bytes, each once; equal numbers of different types (5 and 5.0) are one key. */
Test(index_keys, big_arrays_give_sorted_unique_keys)
{
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)"{\"a\": 1}", -1, &berr);
    mf_keypattern_t kp;
    mf_keyset_t ks;
    mf_error_t err = {0};
    bool skip, mk;
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0);
    mf_keyset_init(&ks);
    /* 40,000 elements, 1,000 distinct values: 1,000 keys. */
    bson_t *doc = big_array_doc(40000, 1000);
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, &mk, &err), 0, "%s", err.msg);
    cr_assert_eq(ks.n, 1000, "got %d keys, want 1000", ks.n);
    cr_assert(mk);
    for (int i = 1; i < ks.n; i++)
        cr_assert_lt(key_cmp(&ks.keys[i - 1], &ks.keys[i]), 0, "keys %d and %d out of order or equal", i - 1, i);
    /* Every value is found by mf_keyset_contains; values not in the array are not. */
    mf_keystring_t probe;
    mf_ks_init(&probe);
    for (int v = -5; v < 1005; v++) {
        bson_value_t bv = {.value_type = BSON_TYPE_INT64};
        bv.value.v_int64 = v;
        cr_assert_eq(mf_index_key_of_value(&kp, &bv, &probe, &err), 0);
        cr_assert_eq(mf_keyset_contains(&ks, &probe), v >= 0 && v < 1000, "value %d", v);
    }
    bson_destroy(doc);
    /* The set is reused: all 40,000 distinct, then a small array again. */
    doc = big_array_doc(40000, 40000);
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, &mk, &err), 0, "%s", err.msg);
    cr_assert_eq(ks.n, 40000, "got %d keys, want 40000", ks.n);
    for (int i = 1; i < ks.n; i++)
        cr_assert_lt(key_cmp(&ks.keys[i - 1], &ks.keys[i]), 0, "keys %d and %d out of order or equal", i - 1, i);
    bson_destroy(doc);
    doc = big_array_doc(3, 2);
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, &mk, &err), 0, "%s", err.msg);
    cr_assert_eq(ks.n, 2, "got %d keys, want 2", ks.n);
    bson_destroy(doc);
    mf_ks_destroy(&probe);
    mf_keyset_destroy(&ks);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
}

/* Of equal keys the first generated is kept, with its type bits: [1, 1.0] keeps the int32. */
Test(index_keys, duplicates_keep_the_first_generated_type)
{
    EXPECT_KEYS("{\"a\": 1}", false, "{\"a\": [2, 1, 1.5, 1.0, {\"$numberLong\": \"2\"}]}",
                "{ \"0\" : 1 } { \"0\" : 1.5 } { \"0\" : 2 }", true);
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)"{\"a\": 1}", -1, &berr);
    bson_t *doc = bson_new_from_json((const uint8_t *)"{\"a\": [1, 1.0]}", -1, &berr);
    mf_keypattern_t kp;
    mf_keyset_t ks;
    mf_error_t err = {0};
    bool skip, mk;
    bson_t dec = BSON_INITIALIZER;
    bson_iter_t it;
    size_t tblen;
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0);
    mf_keyset_init(&ks);
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, &mk, &err), 0);
    cr_assert_eq(ks.n, 1);
    const uint8_t *tb = mf_ks_typebits(&ks.keys[0], &tblen);
    cr_assert_eq(mf_ks_decode_typed(ks.keys[0].data, ks.keys[0].len, tb, tblen, kp.desc, kp.nfields, &dec, &err), 0);
    cr_assert(bson_iter_init_find(&it, &dec, "0"));
    cr_assert_eq(bson_iter_type(&it), BSON_TYPE_INT32, "kept type %d, want int32", bson_iter_type(&it));
    bson_destroy(&dec);
    mf_keyset_destroy(&ks);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
    bson_destroy(doc);
}

/* A compound multikey index over a big array: one key per distinct element, the scalar field fixed. */
Test(index_keys, compound_multikey_over_a_big_array_and_parallel_arrays_still_refused)
{
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)"{\"b\": 1, \"a\": -1}", -1, &berr);
    mf_keypattern_t kp;
    mf_keyset_t ks;
    mf_error_t err = {0};
    bool skip, mk;
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0);
    mf_keyset_init(&ks);
    bson_t *doc = big_array_doc(5000, 2500);
    BSON_APPEND_UTF8(doc, "b", "x");
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, &mk, &err), 0, "%s", err.msg);
    cr_assert_eq(ks.n, 2500, "got %d keys", ks.n);
    for (int i = 1; i < ks.n; i++)
        cr_assert_lt(key_cmp(&ks.keys[i - 1], &ks.keys[i]), 0);
    bson_destroy(doc);
    doc = big_array_doc(5000, 2500);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(doc, "b", &arr);
    BSON_APPEND_INT32(&arr, "0", 1);
    BSON_APPEND_INT32(&arr, "1", 2);
    bson_append_array_end(doc, &arr);
    cr_assert_eq(mf_index_keys(&kp, false, doc, &ks, &skip, &mk, &err), -1);
    cr_assert_eq(err.code, 171, "code %d, want 171", err.code);
    cr_assert_eq(ks.n, 0);
    bson_destroy(doc);
    mf_keyset_destroy(&ks);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
}

/*
 * A single top-level field ({f: 1}) takes a shortcut past the general path
 * walk. It must give exactly the keys the walk gives: checked against the
 * dotted pattern {"w.f": 1} over the same document nested under w, which
 * the general walk serves, for scalars, sub-documents, null, a missing
 * field, arrays, a later field, repeated names (the first one counts), both
 * directions and sparse.
 */
Test(index_keys, a_top_level_field_gives_the_keys_of_the_general_walk)
{
    static const char *const docs[] = {
        "{\"f\": 5}", "{\"a\": 1, \"b\": 2, \"f\": \"x\"}", "{\"f\": {\"g\": [1, 2]}}", "{\"f\": null}",
        "{\"g\": 1}", "{\"f\": [3, 1, 3]}", "{\"f\": []}", "{\"f\": 1.5, \"f\": 7}", "{\"f\": {\"$date\": 86400000}}",
        "{}",
    };
    static const char *const dirs[] = {"1", "-1"};
    for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
        for (int dir = 0; dir < 2; dir++) {
            for (int sparse = 0; sparse < 2; sparse++) {
                char pat_top[64], pat_dot[64], wrapped[256], got[2048], want[2048];
                bool mk1, mk2, sk1, sk2;
                int c1, c2;
                snprintf(pat_top, sizeof(pat_top), "{\"f\": %s}", dirs[dir]);
                snprintf(pat_dot, sizeof(pat_dot), "{\"w.f\": %s}", dirs[dir]);
                snprintf(wrapped, sizeof(wrapped), "{\"w\": %s}", docs[d]);
                cr_assert_eq(keys_text(pat_top, sparse, docs[d], got, sizeof(got), &mk1, &sk1, &c1), 0);
                cr_assert_eq(keys_text(pat_dot, sparse, wrapped, want, sizeof(want), &mk2, &sk2, &c2), 0);
                cr_assert_str_eq(got, want, "%s over %s (sparse %d): %s, the walk gives %s", pat_top, docs[d], sparse,
                                 got, want);
                cr_assert_eq(mk1, mk2, "%s over %s: multikey differs", pat_top, docs[d]);
                cr_assert_eq(sk1, sk2, "%s over %s: skip differs", pat_top, docs[d]);
            }
        }
    }
}

/*
 * mf_index_keys_of_value (a removal that already found the field's value,
 * such as the TTL monitor's check of a top-level Date): the same key bytes
 * as mf_index_keys over the document, both directions, for a Date and other
 * scalars; 1 (walk it instead) for a dotted or compound pattern and for an
 * array.
 */
Test(index_keys, a_known_value_gives_the_key_of_its_document)
{
    static const char *const docs[] = {
        "{\"_id\": 1, \"f\": {\"$date\": 86400000}}", "{\"f\": {\"$date\": -5}}", "{\"a\": 1, \"f\": 5}",
        "{\"f\": \"text\"}", "{\"f\": {\"g\": 1}}", "{\"f\": null}",
    };
    static const char *const pats[] = {"{\"f\": 1}", "{\"f\": -1}"};
    for (size_t p = 0; p < 2; p++) {
        for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
            mf_keypattern_t kp;
            mf_keyset_t walked, known;
            mf_error_t err = {0};
            bson_error_t berr;
            bson_t *pat = bson_new_from_json((const uint8_t *)pats[p], -1, &berr);
            bson_t *doc = bson_new_from_json((const uint8_t *)docs[d], -1, &berr);
            bson_iter_t it;
            bool skip, mk;
            cr_assert(pat != NULL && doc != NULL);
            cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "%s", err.msg);
            mf_keyset_init(&walked);
            mf_keyset_init(&known);
            cr_assert_eq(mf_index_keys(&kp, false, doc, &walked, &skip, &mk, &err), 0, "%s", err.msg);
            cr_assert(bson_iter_init_find(&it, doc, "f"));
            cr_assert_eq(mf_index_keys_of_value(&kp, bson_iter_value(&it), &known, &err), 0, "%s", err.msg);
            cr_assert_eq(walked.n, 1);
            cr_assert_eq(known.n, 1, "%s over %s: one key", pats[p], docs[d]);
            cr_assert(walked.keys[0].len == known.keys[0].len &&
                          memcmp(walked.keys[0].data, known.keys[0].data, known.keys[0].len) == 0,
                      "%s over %s: the key differs from the walk's", pats[p], docs[d]);
            mf_keyset_destroy(&walked);
            mf_keyset_destroy(&known);
            mf_keypattern_destroy(&kp);
            bson_destroy(pat);
            bson_destroy(doc);
        }
    }
    /* Not the plain case: the caller walks the document. */
    static const char *const others[] = {"{\"w.f\": 1}", "{\"f\": 1, \"g\": 1}"};
    bson_value_t date = {.value_type = BSON_TYPE_DATE_TIME, .value.v_datetime = 1000};
    for (size_t p = 0; p < 2; p++) {
        mf_keypattern_t kp;
        mf_keyset_t ks;
        mf_error_t err = {0};
        bson_error_t berr;
        bson_t *pat = bson_new_from_json((const uint8_t *)others[p], -1, &berr);
        cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "%s", err.msg);
        mf_keyset_init(&ks);
        cr_assert_eq(mf_index_keys_of_value(&kp, &date, &ks, &err), 1, "%s is not one plain field", others[p]);
        cr_assert_eq(ks.n, 0);
        mf_keyset_destroy(&ks);
        mf_keypattern_destroy(&kp);
        bson_destroy(pat);
    }
    mf_keypattern_t kp;
    mf_keyset_t ks;
    mf_error_t err = {0};
    bson_error_t berr;
    bson_t *pat = bson_new_from_json((const uint8_t *)"{\"f\": 1}", -1, &berr);
    bson_t *arr = bson_new_from_json((const uint8_t *)"{\"f\": [1, 2]}", -1, &berr);
    bson_iter_t it;
    cr_assert_eq(mf_keypattern_parse(pat, &kp, &err), 0, "%s", err.msg);
    mf_keyset_init(&ks);
    cr_assert(bson_iter_init_find(&it, arr, "f"));
    cr_assert_eq(mf_index_keys_of_value(&kp, bson_iter_value(&it), &ks, &err), 1, "an array is walked");
    mf_keyset_destroy(&ks);
    mf_keypattern_destroy(&kp);
    bson_destroy(pat);
    bson_destroy(arr);
}

/* ---------- hashed indexes (index_hash.c) ---------- */

/* mf_hash64 of the value of doc_json's field "v" with seed. */
static int64_t
hash_of(const char *doc_json, int32_t seed)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)doc_json, -1, &berr);
    bson_iter_t it;
    mf_error_t err = {0};
    int64_t h = 0;
    cr_assert(doc != NULL && bson_iter_init_find(&it, doc, "v"), "bad test JSON %s", doc_json);
    cr_assert_eq(mf_hash64(bson_iter_value(&it), seed, &h, &err), 0, "hash: %s", err.msg);
    bson_destroy(doc);
    return h;
}

#define EXPECT_HASH(doc, seed, want)                                                                              \
    do {                                                                                                           \
        int64_t got_ = hash_of(doc, seed);                                                                         \
        cr_assert_eq(got_, (int64_t)(want), "hash of %s seed %d: got %lld, want %lld", doc, seed, (long long)got_, \
                     (long long)(want));                                                                           \
    } while (0)

/* mongod's own values: hasher.cpp's startup test, jstests/core/hash_function_invariance, the $toHashedIndexKey docs. */
Test(index_hash, matches_mongod_known_values)
{
    EXPECT_HASH("{\"v\": 42}", 0, -944302157085130861LL);
    EXPECT_HASH("{\"v\": \"string to hash\"}", 0, 763543691661428748LL);
    EXPECT_HASH("{\"v\": \"hashthis\"}", 1, 6271151123721111923LL);
    EXPECT_HASH("{\"v\": {\"a\": 1, \"b\": 2}}", 1, -7076810813311352857LL);
    EXPECT_HASH("{\"v\": {\"$numberDouble\": \"9223372036854775808\"}}", 1, 5744114172487291558LL);
    EXPECT_HASH("{\"v\": {\"$numberDouble\": \"Infinity\"}}", 1, 1136124329541638701LL);
    EXPECT_HASH("{\"v\": {\"$numberDouble\": \"-Infinity\"}}", 1, 5744114172487291558LL);
    EXPECT_HASH("{\"v\": {\"$numberDouble\": \"9223372036854774784\"}}", 1, -3954856262017896439LL);
    EXPECT_HASH("{\"v\": {\"$numberDouble\": \"-9223372036854774784\"}}", 1, -1762411739488908479LL);
    EXPECT_HASH("{\"v\": {\"$numberDouble\": \"NaN\"}}", 1, 5574369198691456941LL);
    EXPECT_HASH("{\"v\": {\"$numberLong\": \"0\"}}", 1, 5574369198691456941LL);
    EXPECT_HASH("{\"v\": {\"a\": {\"$numberDouble\": \"9223372036854775808\"}, \"b\": {\"$numberDouble\": \"NaN\"}}}", 1,
                1223292051903137684LL);
}

Test(index_hash, equal_numbers_of_every_type_hash_alike)
{
    int64_t one = hash_of("{\"v\": 1}", 0);
    cr_assert_eq(hash_of("{\"v\": {\"$numberLong\": \"1\"}}", 0), one);
    cr_assert_eq(hash_of("{\"v\": {\"$numberDouble\": \"1.0\"}}", 0), one);
    cr_assert_eq(hash_of("{\"v\": {\"$numberDecimal\": \"1.00\"}}", 0), one);
    cr_assert_eq(hash_of("{\"v\": {\"$numberDouble\": \"1.9\"}}", 0), one, "a double is truncated");
    cr_assert_neq(hash_of("{\"v\": \"1\"}", 0), one);
    cr_assert_neq(hash_of("{\"v\": null}", 0), hash_of("{\"v\": 0}", 0));
}

Test(index_keys, a_hashed_field_keys_its_hash_and_refuses_arrays)
{
    char want[128];
    snprintf(want, sizeof(want), "{ \"0\" : %lld, \"1\" : 3 }", (long long)hash_of("{\"v\": \"x\"}", 0));
    EXPECT_KEYS("{\"a\": \"hashed\", \"b\": 1}", false, "{\"a\": \"x\", \"b\": 3}", want, false);
    snprintf(want, sizeof(want), "{ \"0\" : %lld }", (long long)hash_of("{\"v\": null}", 0));
    EXPECT_KEYS("{\"a.b\": \"hashed\"}", false, "{\"a\": 5}", want, false);

    char got[256];
    bool mk, skip;
    int code;
    cr_assert_neq(keys_text("{\"a\": \"hashed\"}", false, "{\"a\": [1]}", got, sizeof(got), &mk, &skip, &code), 0);
    cr_assert_eq(code, 16766);
    cr_assert_neq(keys_text("{\"x\": 1, \"a.b\": \"hashed\"}", false, "{\"x\": [1], \"a\": {\"b\": 1}}", got, sizeof(got),
                            &mk, &skip, &code), 0);
    cr_assert_eq(code, 16766, "every field of a hashed index refuses arrays, as getHashKeys");
    cr_assert_eq(keys_text("{\"a\": \"hashed\"}", true, "{\"b\": 1}", got, sizeof(got), &mk, &skip, &code), 0);
    cr_assert(skip, "a sparse hashed index skips a document without the field");
}
