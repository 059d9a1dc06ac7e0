/*
 * test_bucket.c: unit tests for time-series bucket documents
 * (src/doc/bucket.c): the bucket shape, control.min/max, rounding and the
 * _id, reopening, size limits, unpacking, malformed buckets and predicate
 * push-down (SPEC F1). Documents are written as relaxed extended JSON with
 * single quotes; DATE is a Date literal taking a long long.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "doc/bucket.h"
#include "doc/match.h"
#include "doc/value.h"

#define DATE "{'$date': {'$numberLong': '%lld'}}"

static const mf_ts_spec_t HOURS = {"t", "m", 2592000, 86400};
static const mf_ts_spec_t MINUTES = {"t", "m", 86400, 3600};
static const mf_ts_spec_t SECONDS_NO_META = {"t", NULL, 3600, 60};

/* J: a new document from printf-style JSON with single quotes; the caller destroys it. */
static bson_t *
J(const char *fmt, ...)
{
    char buf[8192];
    bson_error_t e;
    bson_t *b;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    b = bson_new_from_json((const uint8_t *)buf, -1, &e);
    cr_assert_not_null(b, "bad JSON %s: %s", buf, e.message);
    return b;
}

/* assert_doc_eq: got and want are the same bytes (field order and types included). */
static void
assert_doc_eq(const bson_t *got, const bson_t *want)
{
    char *g = bson_as_canonical_extended_json(got, NULL);
    char *w = bson_as_canonical_extended_json(want, NULL);

    cr_assert(bson_equal(got, want), "got  %s\nwant %s", g, w);
    bson_free(g);
    bson_free(w);
}

/* assert_doc_json: got equals the JSON want; destroys nothing of got. */
static void
assert_doc_json(const bson_t *got, bson_t *want)
{
    assert_doc_eq(got, want);
    bson_destroy(want);
}

/* sub_doc: the document at top-level field key of doc, copied into out (initialised). */
static void
sub_doc(const bson_t *doc, const char *path, bson_t *out)
{
    bson_iter_t it, f;
    const uint8_t *data;
    uint32_t len;
    bson_t view;

    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f), "no %s", path);
    cr_assert(BSON_ITER_HOLDS_DOCUMENT(&f), "%s is not a document", path);
    bson_iter_document(&f, &len, &data);
    bson_init_static(&view, data, len);
    bson_copy_to(&view, out);
}

/* control_without_time: control.<which> of bucket doc without the time field. */
static void
control_without_time(const bson_t *doc, const char *which, bson_t *out)
{
    char path[32];
    bson_t all;

    snprintf(path, sizeof path, "control.%s", which);
    sub_doc(doc, path, &all);
    bson_init(out);
    bson_copy_to_excluding_noinit(&all, out, "t", NULL);
    bson_destroy(&all);
}

/* add_ok: adds the measurement {t: t_ms, <fields of json>} to b. */
static void
add_ok(mf_bucket_t *b, long long t_ms, const char *json)
{
    bson_t *rest = J(json), m = BSON_INITIALIZER;
    mf_error_t err = {0};

    BSON_APPEND_DATE_TIME(&m, "t", t_ms);
    bson_concat(&m, rest);
    cr_assert_eq(mf_bucket_add(b, &m, &err), 0, "add %s: %s", json, err.msg);
    bson_destroy(&m);
    bson_destroy(rest);
}

static int64_t
get_date(const bson_t *doc, const char *path)
{
    bson_iter_t it, f;

    cr_assert(bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f) && BSON_ITER_HOLDS_DATE_TIME(&f),
              "no Date at %s", path);
    return bson_iter_date_time(&f);
}

static uint32_t
oid_seconds(const bson_oid_t *oid)
{
    return (uint32_t)oid->bytes[0] << 24 | (uint32_t)oid->bytes[1] << 16 | (uint32_t)oid->bytes[2] << 8 |
           oid->bytes[3];
}

/* unpack_all: the measurements of bucket doc; returns their count, fills out[] (caller destroys). */
static size_t
unpack_all(const mf_ts_spec_t *spec, const bson_t *doc, bson_t *out, size_t max)
{
    mf_error_t err = {0};
    mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(spec, doc, &err);
    size_t n = 0;

    cr_assert_not_null(u, "unpacker refused the bucket: %s", err.msg);
    while (n < max && mf_bucket_unpacker_next(u, &out[n]) == 1)
        n++;
    cr_assert_eq(mf_bucket_unpacker_count(u), n);
    mf_bucket_unpacker_free(u);
    return n;
}

Test(bucket, granularity_and_rounding, .description = "F1 granularity spans and rounding down, negative and >2038 times")
{
    int64_t span = 0, round = 0;
    mf_ts_spec_t s = SECONDS_NO_META;

    cr_assert_eq(mf_ts_granularity_spans("seconds", &span, &round), 0);
    cr_assert(span == 3600 && round == 60);
    cr_assert_eq(mf_ts_granularity_spans("minutes", &span, &round), 0);
    cr_assert(span == 86400 && round == 3600);
    cr_assert_eq(mf_ts_granularity_spans("hours", &span, &round), 0);
    cr_assert(span == 2592000 && round == 86400);
    cr_assert_eq(mf_ts_granularity_spans("days", &span, &round), -1);

    cr_assert_eq(mf_bucket_round_down(&s, 0), 0);
    cr_assert_eq(mf_bucket_round_down(&s, 59999), 0);
    cr_assert_eq(mf_bucket_round_down(&s, 60000), 60000);
    cr_assert_eq(mf_bucket_round_down(&s, -1), -60000, "floor, not truncation");
    cr_assert_eq(mf_bucket_round_down(&s, -60000), -60000);
    /* 1960-01-01T00:00:30Z and 2100-01-01T00:00:42Z. */
    cr_assert_eq(mf_bucket_round_down(&HOURS, -315619170000LL), -315619200000LL);
    cr_assert_eq(mf_bucket_round_down(&s, 4102444842000LL), 4102444800000LL);
    cr_assert_eq(mf_bucket_round_down(&HOURS, INT64_MIN + 1), INT64_MIN, "clamped, never wraps");
    cr_assert_eq(mf_bucket_round_down(&HOURS, INT64_MAX), INT64_MAX - INT64_MAX % 86400000LL);
}

Test(bucket, shape, .description = "F1 bucket shape: _id, control {version, min, max}, meta, data columns")
{
    int64_t t0 = 1679941799123LL; /* 2023-03-27T18:29:59.123Z */
    bson_value_t meta = {.value_type = BSON_TYPE_UTF8};
    mf_bucket_t *b;
    bson_t doc;
    char oid[25];

    meta.value.v_utf8.str = "s1";
    meta.value.v_utf8.len = 2;
    b = mf_bucket_new(&MINUTES, &meta, t0);
    add_ok(b, t0, "{'m': 's1', '_id': 1, 'temp': 10}");
    add_ok(b, t0 + 1000, "{'m': 's1', '_id': 2}");
    add_ok(b, t0 - 5000, "{'_id': 3, 'temp': 5.5, 'extra': 'x', 'm': 's1'}");
    cr_assert_eq(mf_bucket_count(b), 3);
    mf_bucket_to_doc(b, &doc);
    bson_oid_to_string(mf_bucket_id(b), oid);
    assert_doc_json(&doc, J("{'_id': {'$oid': '%s'},"
                            " 'control': {'version': 1,"
                            "   'min': {'t': " DATE ", '_id': 1, 'temp': 5.5, 'extra': 'x'},"
                            "   'max': {'t': " DATE ", '_id': 3, 'temp': 10, 'extra': 'x'}},"
                            " 'meta': 's1',"
                            " 'data': {'t': {'0': " DATE ", '1': " DATE ", '2': " DATE "},"
                            "   '_id': {'0': 1, '1': 2, '2': 3},"
                            "   'temp': {'0': 10, '2': 5.5},"
                            "   'extra': {'2': 'x'}}}",
                            oid, 1679940000000LL, (long long)t0 + 1000, (long long)t0, (long long)t0 + 1000,
                            (long long)t0 - 5000));
    bson_destroy(&doc);
    mf_bucket_free(b);
}

Test(bucket, shape_without_meta, .description = "F1 no meta field in the bucket without a meta value or a metaField")
{
    mf_bucket_t *b = mf_bucket_new(&HOURS, NULL, 0);
    bson_t doc, data;

    add_ok(b, 0, "{'x': 1}");
    mf_bucket_to_doc(b, &doc);
    cr_assert(!bson_has_field(&doc, "meta"));
    cr_assert_null(mf_bucket_meta(b));
    bson_destroy(&doc);
    mf_bucket_free(b);

    /* Without a metaField, a field called "m" is an ordinary column. */
    b = mf_bucket_new(&SECONDS_NO_META, NULL, 0);
    add_ok(b, 0, "{'m': 'a'}");
    mf_bucket_to_doc(b, &doc);
    sub_doc(&doc, "data", &data);
    assert_doc_json(&data, J("{'t': {'0': " DATE "}, 'm': {'0': 'a'}}", 0LL));
    bson_destroy(&data);
    bson_destroy(&doc);
    mf_bucket_free(b);
}

Test(bucket, unpack_field_order, .description = "F1 unpacked measurement: timeField, metaField, then columns")
{
    bson_value_t meta = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 7};
    mf_bucket_t *b = mf_bucket_new(&HOURS, &meta, 5000);
    bson_t doc, got[2];

    add_ok(b, 5000, "{'temp': 12, 'm': 7, '_id': 1}");
    add_ok(b, 6000, "{'_id': 2, 'm': 7, 'other': true}");
    mf_bucket_to_doc(b, &doc);
    cr_assert_eq(unpack_all(&HOURS, &doc, got, 2), 2);
    assert_doc_json(&got[0], J("{'t': " DATE ", 'm': 7, 'temp': 12, '_id': 1}", 5000LL));
    assert_doc_json(&got[1], J("{'t': " DATE ", 'm': 7, '_id': 2, 'other': true}", 6000LL));
    bson_destroy(&got[0]);
    bson_destroy(&got[1]);
    bson_destroy(&doc);
    mf_bucket_free(b);
}

/* same_fields: every field of want is in got with the same type and value, and nothing else. */
static void
assert_same_fields(const bson_t *got, const bson_t *want)
{
    bson_iter_t it, g;
    char *gj = bson_as_canonical_extended_json(got, NULL);

    cr_assert_eq(bson_count_keys(got), bson_count_keys(want), "fields differ: %s", gj);
    bson_iter_init(&it, want);
    while (bson_iter_next(&it)) {
        cr_assert(bson_iter_init_find(&g, got, bson_iter_key(&it)), "%s lacks %s", gj, bson_iter_key(&it));
        cr_assert_eq(bson_iter_type(&g), bson_iter_type(&it), "%s: type of %s", gj, bson_iter_key(&it));
        cr_assert(mf_value_equal(bson_iter_value(&g), bson_iter_value(&it)), "%s: value of %s", gj,
                  bson_iter_key(&it));
    }
    bson_free(gj);
}

static const char *const ROUND_TRIP[] = {
    "{'m': {'site': 'a', 'n': 1}, '_id': {'$oid': '650000000000000000000001'}, 'temp': 1.5}",
    "{'m': {'site': 'a', 'n': 1}, '_id': 2, 'nested': {'x': 1, 'y': [1, 2, {'z': null}]}}",
    "{'_id': 3, 'arr': [], 'temp': {'$numberDecimal': '2.25'}, 's': 'str', 'm': {'site': 'a', 'n': 1}, "
    "'b': {'$binary': {'base64': 'AQI=', 'subType': '00'}}}",
    "{'_id': 4, 'm': {'site': 'a', 'n': 1}}",
    "{'_id': 5, 'temp': {'$numberLong': '9'}, 'nested': 'scalar now', 'arr': [[1], {'a': {}}], "
    "'mx': {'$maxKey': 1}, 'm': {'site': 'a', 'n': 1}}",
};

Test(bucket, round_trip, .description = "F1 round trip: field sets, missing fields, nested documents, arrays")
{
    bson_t *meta_doc = J("{'v': {'site': 'a', 'n': 1}}");
    size_t n = sizeof ROUND_TRIP / sizeof ROUND_TRIP[0];
    bson_t doc, got[8], *want[8];
    bson_iter_t mi;
    mf_bucket_t *b;

    bson_iter_init_find(&mi, meta_doc, "v");
    b = mf_bucket_new(&HOURS, bson_iter_value(&mi), 1000);
    for (size_t i = 0; i < n; i++) {
        bson_t *rest = J(ROUND_TRIP[i]);
        mf_error_t err = {0};

        /* Times out of order within the bucket. */
        want[i] = bson_new();
        BSON_APPEND_DATE_TIME(want[i], "t", 1000 + 7 * (int64_t)((i * 3) % n));
        bson_concat(want[i], rest);
        bson_destroy(rest);
        cr_assert_eq(mf_bucket_add(b, want[i], &err), 0, "%s", err.msg);
    }
    mf_bucket_to_doc(b, &doc);
    cr_assert_eq(unpack_all(&HOURS, &doc, got, 8), n);
    for (size_t i = 0; i < n; i++) {
        assert_same_fields(&got[i], want[i]);
        bson_destroy(&got[i]);
        bson_destroy(want[i]);
    }
    bson_destroy(&doc);
    bson_destroy(meta_doc);
    mf_bucket_free(b);
}

/* min_max_case: a fresh bucket fed the measurements of jsons[] has control.min/max (time left out) min and max. */
static void
min_max_case(const char *const *jsons, size_t n, const char *min, const char *max)
{
    mf_bucket_t *b = mf_bucket_new(&HOURS, NULL, 0);
    bson_t doc, got;

    for (size_t i = 0; i < n; i++)
        add_ok(b, (long long)i, jsons[i]);
    mf_bucket_to_doc(b, &doc);
    control_without_time(&doc, "min", &got);
    assert_doc_json(&got, J("%s", min));
    bson_destroy(&got);
    control_without_time(&doc, "max", &got);
    assert_doc_json(&got, J("%s", max));
    bson_destroy(&got);
    bson_destroy(&doc);
    mf_bucket_free(b);
}

#define MIN_MAX(min, max, ...)                                                                                         \
    do {                                                                                                               \
        const char *const ms_[] = {__VA_ARGS__};                                                                       \
        min_max_case(ms_, sizeof ms_ / sizeof ms_[0], min, max);                                                      \
    } while (0)

Test(bucket, control_min_max, .description = "F1 control.min/max: per field, recursive in documents and arrays")
{
    /* The cases of MongoDB's jstests/core/timeseries/timeseries_min_max.js. */
    MIN_MAX("{'a': {}}", "{'a': {}}", "{'a': {}}");
    MIN_MAX("{'a': {'x': {'y': 1}}}", "{'a': {'x': {'y': 1}}}", "{'a': {}}", "{'a': {'x': {}}}", "{'a': {'x': {'y': 1}}}",
            "{'a': {'x': {}}}");
    MIN_MAX("{'a': {'x': 1, 'y': 1}, 'b': [1, 1]}", "{'a': {'x': 2, 'y': 2}, 'b': [2, 2]}",
            "{'a': {'x': 1, 'y': 2}, 'b': [1, 2]}", "{'a': {'x': 2, 'y': 1}, 'b': [2, 1]}");
    MIN_MAX("{'a': {'x': {'z': [3, 3]}}, 'b': [{'x': 3, 'y': 3}, 3, 1]}",
            "{'a': {'x': {'z': [4, 4]}}, 'b': [{'x': 4, 'y': 4}, 3, 1]}", "{'a': {'x': {'z': [3, 4]}}, 'b': [{'x': 3, 'y': 4}]}",
            "{'a': {'x': {'z': [4, 3]}}, 'b': [{'x': 4, 'y': 3}, 3, 1]}");
    MIN_MAX("{'a': 1, 'c': 1, 'b': 2, 'd': 3}", "{'a': 1, 'c': 3, 'b': 2, 'd': 3}", "{'a': 1, 'c': 1}", "{'b': 2}",
            "{'c': 3, 'd': 3}");
    MIN_MAX("{'a': 0.5}", "{'a': {'$numberDecimal': '2.5'}}", "{'a': 1.5}", "{'a': {'$numberLong': '2'}}", "{'a': 1}",
            "{'a': {'$numberDecimal': '2.5'}}", "{'a': 0.5}");
    /* Mixed shapes: a document or array replaces a summary only by type order. */
    MIN_MAX("{'a': 1}", "{'a': [5]}", "{'a': 1}", "{'a': {'b': 1}}", "{'a': 'str'}", "{'a': []}", "{'a': [5]}");
    MIN_MAX("{'a': {'b': 0, 'c': 'x'}}", "{'a': true}", "{'a': true}", "{'a': {'b': 1}}", "{'a': {'b': 0, 'c': 'x'}}");
    MIN_MAX("{'a': null}", "{'a': {'$maxKey': 1}}", "{'a': {'x': 1}}", "{'a': {'$maxKey': 1}}", "{'a': null}");
}

Test(bucket, time_bounds_and_id, .description = "F1 control.min.<time> is the rounded start, max the latest; _id seconds")
{
    int64_t start = 1679940000000LL; /* 2023-03-27T18:00:00Z */
    mf_bucket_t *b = mf_bucket_new(&MINUTES, NULL, start + 50 * 60000);
    bson_t doc;

    cr_assert_eq(mf_bucket_start_ms(b), start);
    cr_assert_eq(oid_seconds(mf_bucket_id(b)), (uint32_t)(start / 1000));
    add_ok(b, start + 50 * 60000, "{}");
    add_ok(b, start + 10 * 60000, "{}"); /* out of order, still in the bucket */
    add_ok(b, start + 30 * 60000, "{}");
    mf_bucket_to_doc(b, &doc);
    cr_assert_eq(get_date(&doc, "control.min.t"), start);
    cr_assert_eq(get_date(&doc, "control.max.t"), start + 50 * 60000);
    bson_destroy(&doc);

    /* A time before the start (a caller that skipped mf_bucket_fits) lowers control.min. */
    add_ok(b, start - 1, "{}");
    mf_bucket_to_doc(b, &doc);
    cr_assert_eq(get_date(&doc, "control.min.t"), start - 1);
    bson_destroy(&doc);
    mf_bucket_free(b);
}

Test(bucket, time_bounds_before_1970_and_after_2038, .description = "F1/F4 buckets before 1970 and after 2038")
{
    int64_t t1960 = -315619170000LL, t2200 = 7258118442000LL; /* 1960-01-01T00:00:30Z, 2200-01-01T00:00:42Z */
    mf_bucket_t *b = mf_bucket_new(&MINUTES, NULL, t1960);
    bson_t doc;

    cr_assert_eq(mf_bucket_start_ms(b), -315619200000LL);
    cr_assert_eq(oid_seconds(mf_bucket_id(b)), 0, "clamped to 0");
    add_ok(b, t1960, "{}");
    add_ok(b, t1960 + 3000000, "{}");
    mf_bucket_to_doc(b, &doc);
    cr_assert_eq(get_date(&doc, "control.min.t"), -315619200000LL);
    cr_assert_eq(get_date(&doc, "control.max.t"), t1960 + 3000000);
    bson_destroy(&doc);
    mf_bucket_free(b);

    b = mf_bucket_new(&MINUTES, NULL, t2200);
    cr_assert_eq(mf_bucket_start_ms(b), 7258118400000LL);
    cr_assert_eq(oid_seconds(mf_bucket_id(b)), UINT32_MAX, "clamped to 2^32-1");
    add_ok(b, t2200, "{}");
    mf_bucket_to_doc(b, &doc);
    cr_assert_eq(get_date(&doc, "control.min.t"), 7258118400000LL);
    cr_assert_eq(get_date(&doc, "control.max.t"), t2200);
    bson_destroy(&doc);
    mf_bucket_free(b);

    /* Two buckets get different _ids even when both clamp. */
    b = mf_bucket_new(&MINUTES, NULL, t2200);
    {
        mf_bucket_t *b2 = mf_bucket_new(&MINUTES, NULL, t2200);
        cr_assert_neq(bson_oid_compare(mf_bucket_id(b), mf_bucket_id(b2)), 0);
        mf_bucket_free(b2);
    }
    mf_bucket_free(b);
}

Test(bucket, fits_limits, .description = "F1 fits: time span, measurement count and byte limits")
{
    mf_ts_spec_t s = SECONDS_NO_META; /* span 3600 s, rounding 60 s */
    mf_bucket_t *b = mf_bucket_new(&s, NULL, -90000); /* start -120000 */

    cr_assert_eq(mf_bucket_start_ms(b), -120000);
    cr_assert(mf_bucket_fits(b, -120000, 10, 3, 100));
    cr_assert(!mf_bucket_fits(b, -120001, 10, 3, 100), "before the start");
    cr_assert(mf_bucket_fits(b, -120000 + 3600000 - 1, 10, 3, 100));
    cr_assert(!mf_bucket_fits(b, -120000 + 3600000, 10, 3, 100), "span is half-open");
    cr_assert(!mf_bucket_fits(b, INT64_MAX, 10, 3, 100));
    cr_assert(mf_bucket_fits(b, -100000, 1000, 3, 100), "an empty bucket takes any size");

    add_ok(b, -100000, "{'x': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'}");
    cr_assert_gt(mf_bucket_bytes(b), 50);
    cr_assert(mf_bucket_fits(b, -100000, 100 - mf_bucket_bytes(b), 3, 100));
    cr_assert(!mf_bucket_fits(b, -100000, 100 - mf_bucket_bytes(b) + 1, 3, 100));
    cr_assert(!mf_bucket_fits(b, -100000, 0, 3, mf_bucket_bytes(b) - 1), "already over");
    add_ok(b, -100000, "{}");
    add_ok(b, -100000, "{}");
    cr_assert_eq(mf_bucket_count(b), 3);
    cr_assert(!mf_bucket_fits(b, -100000, 1, 3, 1000), "count limit");
    cr_assert(mf_bucket_fits(b, -100000, 1, 4, 1000));
    mf_bucket_free(b);
}

Test(bucket, add_refuses, .description = "F1 add refuses a measurement without a Date time or with a repeated field")
{
    mf_bucket_t *b = mf_bucket_new(&HOURS, NULL, 0);
    const char *bad[] = {"{'x': 1}", "{'t': 5, 'x': 1}", "{'t': " DATE ", 'y': 1, 'y': 2}",
                         "{'t': " DATE ", 't': " DATE "}"};
    bson_t before, after;

    add_ok(b, 0, "{'x': 1}");
    mf_bucket_to_doc(b, &before);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bson_t *m = J(bad[i], 1LL, 2LL);
        mf_error_t err = {0};

        cr_assert_eq(mf_bucket_add(b, m, &err), -1, "accepted %s", bad[i]);
        cr_assert_eq(err.code, MF_E_BadValue);
        bson_destroy(m);
    }
    cr_assert_eq(mf_bucket_count(b), 1);
    mf_bucket_to_doc(b, &after);
    assert_doc_eq(&after, &before);
    bson_destroy(&after);
    /* And it still takes good measurements, new fields included. */
    add_ok(b, 1, "{'y': 3, 'x': 2}");
    mf_bucket_to_doc(b, &after);
    cr_assert_eq(mf_bucket_count(b), 2);
    bson_destroy(&after);
    bson_destroy(&before);
    mf_bucket_free(b);
}

Test(bucket, from_doc_then_append, .description = "F1 a reopened bucket continues as if it had never been closed")
{
    bson_value_t meta = {.value_type = BSON_TYPE_INT64, .value.v_int64 = 42};
    mf_bucket_t *whole = mf_bucket_new(&MINUTES, &meta, 7200000 + 5000);
    mf_bucket_t *first = mf_bucket_new(&MINUTES, &meta, 7200000 + 5000), *reopened;
    const char *ms[] = {"{'_id': 1, 'a': {'x': 5}, 'm': {'$numberLong': '42'}}", "{'_id': 2, 'b': [1, 2], 'm': {'$numberLong': '42'}}",
                        "{'m': {'$numberLong': '42'}, '_id': 3, 'a': {'x': 1, 'y': 'q'}}",
                        "{'_id': 4, 'c': null, 'b': [0], 'm': {'$numberLong': '42'}}"};
    mf_error_t err = {0};
    bson_t d1, d2, d3;

    for (size_t i = 0; i < 4; i++) {
        add_ok(whole, 7200000 + 5000 + 1000 * (long long)(3 - i), ms[i]);
        if (i < 2)
            add_ok(first, 7200000 + 5000 + 1000 * (long long)(3 - i), ms[i]);
    }
    mf_bucket_to_doc(first, &d1);
    reopened = mf_bucket_from_doc(&MINUTES, &d1, &err);
    cr_assert_not_null(reopened, "%s", err.msg);
    cr_assert_eq(mf_bucket_count(reopened), 2);
    cr_assert_eq(mf_bucket_bytes(reopened), mf_bucket_bytes(first));
    cr_assert_eq(mf_bucket_start_ms(reopened), 7200000);
    cr_assert_eq(bson_oid_compare(mf_bucket_id(reopened), mf_bucket_id(first)), 0);
    cr_assert(mf_value_equal(mf_bucket_meta(reopened), &meta));
    add_ok(reopened, 7200000 + 5000 + 1000, ms[2]);
    add_ok(reopened, 7200000 + 5000, ms[3]);
    cr_assert_eq(mf_bucket_bytes(reopened), mf_bucket_bytes(whole));

    /* Same document as the bucket filled in one go (with the reopened one's _id). */
    mf_bucket_to_doc(reopened, &d2);
    bson_oid_copy(mf_bucket_id(reopened), (bson_oid_t *)mf_bucket_id(whole));
    mf_bucket_to_doc(whole, &d3);
    assert_doc_eq(&d2, &d3);
    bson_destroy(&d1);
    bson_destroy(&d2);
    bson_destroy(&d3);
    mf_bucket_free(reopened);
    mf_bucket_free(first);
    mf_bucket_free(whole);
}

/* bad_bucket: the unpacker and from_doc refuse json (printf args: a Date) with code. */
static void
bad_bucket(const mf_ts_spec_t *spec, int code, const char *json)
{
    bson_t *doc = J(json, 60000LL, 60000LL);
    mf_error_t err = {0};
    mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(spec, doc, &err);

    cr_assert_null(u, "unpacker accepted %s", json);
    cr_assert_eq(err.code, code, "%s: code %d (%s)", json, err.code, err.msg);
    mf_err_clear(&err);
    cr_assert_null(mf_bucket_from_doc(spec, doc, &err), "from_doc accepted %s", json);
    cr_assert_eq(err.code, code, "%s: code %d (%s)", json, err.code, err.msg);
    bson_destroy(doc);
}

#define GOOD_CONTROL "'_id': {'$oid': '650000000000000000000001'}, 'control': {'version': 1, 'min': {'t': " DATE "}, 'max': {'t': " DATE "}}"

Test(bucket, malformed_buckets, .description = "F1 malformed bucket documents are refused, not crashed on")
{
    bson_t *ok = J("{" GOOD_CONTROL ", 'meta': 1, 'data': {'t': {'0': " DATE "}, 'x': {'0': 1}}}", 60000LL, 60000LL,
                   60000LL);
    mf_error_t err = {0};
    mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(&HOURS, ok, &err);
    mf_bucket_t *b;

    cr_assert_not_null(u, "%s", err.msg);
    mf_bucket_unpacker_free(u);
    b = mf_bucket_from_doc(&HOURS, ok, &err);
    cr_assert_not_null(b, "%s", err.msg);
    mf_bucket_free(b);
    bson_destroy(ok);

    bad_bucket(&HOURS, MF_E_BadValue, "{'_id': 1, 'data': {'t': {'0': " DATE "}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL "}");
    bad_bucket(&HOURS, MF_E_BadValue, "{'control': {'version': 2}, 'data': {'t': {'0': " DATE "}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{'control': {'version': 'one'}, 'data': {}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{'control': 1, 'data': {}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': []}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'x': {'0': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': [1]}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'x': 5}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'1': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1, '2': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1, '1': 1}, 'x': {'1': 1, '0': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'x': {'00': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'x': {'-1': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'x': {'a': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'x': {'99999999999': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'x': {'1': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 't': {'0': 1}}}");
    bad_bucket(&HOURS, MF_E_BadValue, "{" GOOD_CONTROL ", 'data': {'t': {'0': 1}, 'm': {'0': 1}}}");
    bad_bucket(&SECONDS_NO_META, MF_E_BadValue, "{" GOOD_CONTROL ", 'meta': 1, 'data': {'t': {'0': 1}}}");
    /* What only from_doc needs: an ObjectId _id, a Date control.min.<time>, Date times. */
    {
        bson_t *doc = J("{'_id': 1, 'control': {'version': 1, 'min': {'t': " DATE "}}, 'data': {'t': {'0': " DATE "}}}",
                        1LL, 1LL);
        mf_err_clear(&err);
        cr_assert_null(mf_bucket_from_doc(&HOURS, doc, &err));
        cr_assert_eq(err.code, MF_E_BadValue);
        bson_destroy(doc);
        doc = J("{'_id': {'$oid': '650000000000000000000001'}, 'control': {'version': 1, 'min': {'t': 1}}, "
                        "'data': {'t': {'0': " DATE "}}}", 1LL);
        mf_err_clear(&err);
        cr_assert_null(mf_bucket_from_doc(&HOURS, doc, &err));
        cr_assert_eq(err.code, MF_E_BadValue);
        bson_destroy(doc);
        doc = J("{" GOOD_CONTROL ", 'data': {'t': {'0': 'not a date'}}}", 1LL, 1LL);
        mf_err_clear(&err);
        cr_assert_null(mf_bucket_from_doc(&HOURS, doc, &err));
        cr_assert_eq(err.code, MF_E_BadValue);
        bson_destroy(doc);
    }
}

Test(bucket, corrupt_bytes, .description = "F1 every single-byte corruption of a bucket is refused or read safely")
{
    bson_value_t meta = {.value_type = BSON_TYPE_INT32, .value.v_int32 = 1};
    mf_bucket_t *b = mf_bucket_new(&HOURS, &meta, 0);
    static const uint8_t values[] = {0x00, 0x01, 0x03, 0x04, 0x7f, 0xff};
    bson_t doc;
    uint8_t *buf;

    add_ok(b, 0, "{'_id': 1, 'a': {'x': [1, 'two']}, 'm': 1}");
    add_ok(b, 1, "{'_id': 2, 'b': 's', 'a': {'x': [0]}}");
    mf_bucket_to_doc(b, &doc);
    buf = bson_malloc(doc.len);
    for (uint32_t pos = 4; pos + 1 < doc.len; pos++) {
        for (size_t v = 0; v < sizeof values; v++) {
            mf_error_t err = {0};
            mf_bucket_unpacker_t *u;
            mf_bucket_t *r;
            bson_t bad, m;

            memcpy(buf, bson_get_data(&doc), doc.len);
            buf[pos] = values[v];
            cr_assert(bson_init_static(&bad, buf, doc.len));
            u = mf_bucket_unpacker_new(&HOURS, &bad, &err);
            while (u != NULL && mf_bucket_unpacker_next(u, &m) == 1)
                bson_destroy(&m);
            mf_bucket_unpacker_free(u);
            r = mf_bucket_from_doc(&HOURS, &bad, &err);
            if (r != NULL) {
                mf_bucket_to_doc(r, &m);
                bson_destroy(&m);
            }
            mf_bucket_free(r);
        }
    }
    bson_free(buf);
    bson_destroy(&doc);
    mf_bucket_free(b);
}

Test(bucket, unpack_1000, .description = "F1 unpacking a bucket of 1000 measurements")
{
    enum { N = 1000 };
    mf_bucket_t *b = mf_bucket_new(&HOURS, NULL, 0);
    mf_bucket_unpacker_t *u;
    mf_error_t err = {0};
    bson_t doc, m;
    size_t i = 0;

    for (int k = 0; k < N; k++) {
        if (k % 3 == 0)
            add_ok(b, k, "{'_id': 1, 'v': 1.5, 'sparse': 'x'}");
        else
            add_ok(b, k, "{'_id': 2, 'v': [1, {'z': 2}]}");
    }
    cr_assert(!mf_bucket_fits(b, 0, 1, N, SIZE_MAX));
    mf_bucket_to_doc(b, &doc);
    u = mf_bucket_unpacker_new(&HOURS, &doc, &err);
    cr_assert_not_null(u, "%s", err.msg);
    cr_assert_eq(mf_bucket_unpacker_count(u), N);
    while (mf_bucket_unpacker_next(u, &m) == 1) {
        if (i % 3 == 0)
            assert_doc_json(&m, J("{'t': " DATE ", '_id': 1, 'v': 1.5, 'sparse': 'x'}", (long long)i));
        else
            assert_doc_json(&m, J("{'t': " DATE ", '_id': 2, 'v': [1, {'z': 2}]}", (long long)i));
        bson_destroy(&m);
        i++;
    }
    cr_assert_eq(i, N);
    cr_assert_eq(mf_bucket_unpacker_next(u, &m), 0, "stays at the end");
    mf_bucket_unpacker_free(u);
    bson_destroy(&doc);
    mf_bucket_free(b);
}

/* PUSH: the bucket filter of the measurement filter match is want (JSONs take Date args as given). */
#define PUSH(spec, match, want, ...)                                                                                   \
    do {                                                                                                               \
        bson_t *m_ = J(match, __VA_ARGS__), out_;                                                                      \
        mf_bucket_filter_from_match(spec, m_, &out_);                                                                  \
        assert_doc_json(&out_, J(want, __VA_ARGS__));                                                                  \
        bson_destroy(&out_);                                                                                           \
        bson_destroy(m_);                                                                                              \
    } while (0)

Test(bucket, filter_push_down, .description = "F1 push-down: meta and time conditions to bucket filters")
{
    const mf_ts_spec_t *s = &HOURS;

    PUSH(s, "{'m': 's1'}", "{'meta': 's1'}", 0);
    PUSH(s, "{'m.site': {'$in': ['a', 'b']}}", "{'meta.site': {'$in': ['a', 'b']}}", 0);
    PUSH(s, "{'m': {'$exists': false}}", "{'meta': {'$exists': false}}", 0);
    PUSH(s, "{'mx': 1, 'temp': {'$gt': 3}, '_id': 5}", "{}", 0);
    PUSH(s, "{'t': {'$gte': " DATE "}}", "{'control.max.t': {'$gte': " DATE "}}", -5LL);
    PUSH(s, "{'t': {'$gt': " DATE "}}", "{'control.max.t': {'$gt': " DATE "}}", 5LL);
    PUSH(s, "{'t': {'$lt': " DATE "}}", "{'control.min.t': {'$lt': " DATE "}}", 5LL);
    PUSH(s, "{'t': {'$lte': " DATE "}}", "{'control.min.t': {'$lte': " DATE "}}", 5LL);
    PUSH(s, "{'t': " DATE "}", "{'$and': [{'control.min.t': {'$lte': " DATE "}}, {'control.max.t': {'$gte': " DATE "}}]}",
         7LL, 7LL, 7LL);
    PUSH(s, "{'t': {'$eq': " DATE "}}",
         "{'$and': [{'control.min.t': {'$lte': " DATE "}}, {'control.max.t': {'$gte': " DATE "}}]}", 7LL, 7LL, 7LL);
    PUSH(s, "{'t': {'$gte': " DATE ", '$lt': " DATE "}, 'm': 1}",
         "{'$and': [{'control.max.t': {'$gte': " DATE "}}, {'control.min.t': {'$lt': " DATE "}}, {'meta': 1}]}", 1LL,
         9LL);
    /* Non-Date time bounds and other operators are left to the exact filter. */
    PUSH(s, "{'t': {'$gt': 5, '$lt': 'x', '$ne': " DATE ", '$in': [" DATE "]}}", "{}", 1LL, 1LL);
    PUSH(s, "{'t': {'$gt': 5, '$lte': " DATE "}}", "{'control.min.t': {'$lte': " DATE "}}", 3LL);
    PUSH(s, "{'t': 5}", "{}", 0);
    PUSH(s, "{'t.x': " DATE "}", "{}", 1LL);
    PUSH(s, "{'$and': [{'m': 1}, {'t': {'$lt': " DATE "}}, {'temp': 3}], 'x': 1}",
         "{'$and': [{'meta': 1}, {'control.min.t': {'$lt': " DATE "}}]}", 2LL);
    PUSH(s, "{'$and': [{'$and': [{'m.a': 1}]}]}", "{'meta.a': 1}", 0);
    PUSH(s, "{'$or': [{'m': 1}, {'t': {'$gt': " DATE "}, 'x': 1}]}",
         "{'$or': [{'meta': 1}, {'control.max.t': {'$gt': " DATE "}}]}", 4LL);
    PUSH(s, "{'$or': [{'m': 1}, {'temp': 2}]}", "{}", 0);
    PUSH(s, "{'$nor': [{'m': 1}], '$expr': {'$eq': ['$m', 1]}, '$comment': 'c'}", "{}", 0);
    PUSH(&SECONDS_NO_META, "{'m': 1, 't': {'$gt': " DATE "}}", "{'control.max.t': {'$gt': " DATE "}}", 8LL);
}

/* META_ONLY: mf_bucket_filter_meta_only gives is and want. */
#define META_ONLY(spec, filter, is, want)                                                                              \
    do {                                                                                                               \
        bson_t *f_ = J(filter), out_;                                                                                  \
        cr_assert_eq(mf_bucket_filter_meta_only(spec, f_, &out_), is, "%s", filter);                                   \
        assert_doc_json(&out_, J(want));                                                                               \
        bson_destroy(&out_);                                                                                           \
        bson_destroy(f_);                                                                                              \
    } while (0)

Test(bucket, filter_meta_only, .description = "F1 meta-only filters act on whole buckets")
{
    META_ONLY(&HOURS, "{}", true, "{}");
    META_ONLY(&HOURS, "{'m': 1}", true, "{'meta': 1}");
    META_ONLY(&HOURS, "{'m.a': {'$gt': 1}, '$and': [{'m.b': 2}], '$comment': 'x'}", true,
              "{'meta.a': {'$gt': 1}, '$and': [{'meta.b': 2}], '$comment': 'x'}");
    META_ONLY(&HOURS, "{'$or': [{'m': 1}, {'m': {'$exists': false}}], '$nor': [{'m.z': 3}]}", true,
              "{'$or': [{'meta': 1}, {'meta': {'$exists': false}}], '$nor': [{'meta.z': 3}]}");
    META_ONLY(&HOURS, "{'m': 1, 'temp': 2}", false, "{}");
    META_ONLY(&HOURS, "{'m': 1, 't': {'$gt': 2}}", false, "{}");
    META_ONLY(&HOURS, "{'$or': [{'m': 1}, {'x': 1}]}", false, "{}");
    META_ONLY(&HOURS, "{'$and': {'m': 1}}", false, "{}");
    META_ONLY(&HOURS, "{'$expr': {'$eq': ['$m', 1]}}", false, "{}");
    META_ONLY(&HOURS, "{'mx': 1}", false, "{}");
    META_ONLY(&SECONDS_NO_META, "{'m': 1}", false, "{}");
}

/*
 * The push-down is conservative: for filters over buckets holding
 * out-of-order, pre-1970 and sparse measurements, every bucket with a
 * matching measurement matches the bucket filter.
 */
Test(bucket, filter_push_down_is_conservative, .description = "F1 push-down never loses a matching measurement")
{
    enum { NB = 6 };
    mf_bucket_t *bs[NB];
    bson_t docs[NB];
    const char *filters[] = {
        "{'t': {'$lt': " DATE "}}", "{'t': {'$lte': " DATE "}}", "{'t': {'$gt': " DATE "}}",
        "{'t': {'$gte': " DATE "}}", "{'t': " DATE "}", "{'t': {'$eq': " DATE "}, 'm.k': {'$gte': 1}}",
        "{'$or': [{'t': {'$lt': " DATE "}}, {'m': {'k': 0}}]}",
    };
    long long times[] = {-315619200000LL, -315619170000LL, -60001, -1, 0, 59999, 60000, 3600000, 3600001, 7258118442000LL};
    size_t kept = 0, skipped = 0;

    for (int i = 0; i < NB; i++) {
        bson_t *meta = J("{'v': {'k': %d}}", i % 3);
        bson_iter_t it;
        long long t0 = times[(i * 3) % 10];

        bson_iter_init_find(&it, meta, "v");
        bs[i] = mf_bucket_new(&MINUTES, bson_iter_value(&it), t0);
        for (int k = 5; k >= 0; k--) {
            char m[64];

            snprintf(m, sizeof m, "{'m': {'k': %d}, 'x': %d}", i % 3, k);
            add_ok(bs[i], t0 + 600000LL * k + i, m);
        }
        mf_bucket_to_doc(bs[i], &docs[i]);
        bson_destroy(meta);
    }
    for (size_t f = 0; f < sizeof filters / sizeof filters[0]; f++) {
        for (size_t ti = 0; ti < 10; ti++) {
            for (long long delta = -1; delta <= 1; delta++) {
                long long t = times[ti] + delta + 600000LL * (long long)(f % 4);
                bson_t *filter = J(filters[f], t), bf;
                mf_error_t err = {0};
                mf_matcher_t *mm = mf_matcher_new(filter, &err), *bm;

                cr_assert_not_null(mm, "%s", err.msg);
                mf_bucket_filter_from_match(&MINUTES, filter, &bf);
                bm = mf_matcher_new(&bf, &err);
                cr_assert_not_null(bm, "%s", err.msg);
                for (int i = 0; i < NB; i++) {
                    bson_t ms[8];
                    size_t n = unpack_all(&MINUTES, &docs[i], ms, 8);
                    bool any = false;

                    for (size_t k = 0; k < n; k++) {
                        any = any || mf_matcher_match(mm, &ms[k], NULL);
                        bson_destroy(&ms[k]);
                    }
                    if (mf_matcher_match(bm, &docs[i], NULL))
                        kept++;
                    else
                        skipped++;
                    if (any) {
                        char *fj = bson_as_canonical_extended_json(filter, NULL);
                        char *bj = bson_as_canonical_extended_json(&docs[i], NULL);
                        cr_assert(mf_matcher_match(bm, &docs[i], NULL), "filter %s loses bucket %s", fj, bj);
                        bson_free(fj);
                        bson_free(bj);
                    }
                }
                mf_matcher_free(bm);
                mf_matcher_free(mm);
                bson_destroy(&bf);
                bson_destroy(filter);
            }
        }
    }
    cr_assert(kept > 0 && skipped > 0, "the bucket filters kept %zu and skipped %zu buckets", kept, skipped);
    for (int i = 0; i < NB; i++) {
        bson_destroy(&docs[i]);
        mf_bucket_free(bs[i]);
    }
}
