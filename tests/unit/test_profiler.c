/*
 * test_profiler.c: unit tests for the profiler's settings
 * (src/engine/profiler.c), called directly: per-database levels and the
 * profile filter's lifetime (a filter taken by a finishing operation stays
 * valid while the profile command replaces or unsets it).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/profiler.h"
#include "unit_util.h"

#define J unit_json

Test(profiler, levels_are_per_database_and_forgotten_on_drop)
{
    mf_profiler_t *p = mf_profiler_new();
    cr_assert_eq(mf_profile_level(p, "a"), 0);
    cr_assert_not(mf_profile_any(p));
    mf_profile_set_level(p, "a", 2);
    cr_assert_eq(mf_profile_level(p, "a"), 2);
    cr_assert_eq(mf_profile_level(p, "b"), 0);
    cr_assert(mf_profile_any(p));
    mf_profile_forget(p, "a");
    cr_assert_eq(mf_profile_level(p, "a"), 0);
    cr_assert_not(mf_profile_any(p));
    mf_profiler_free(p);
}

Test(profiler, a_filter_matches_profile_entries_and_outlives_its_replacement)
{
    mf_profiler_t *p = mf_profiler_new();
    mf_error_t err = {0};
    bson_t *scan = J("{\"op\": \"query\", \"planSummary\": \"COLLSCAN\", \"millis\": 3}");
    bson_t *idhack = J("{\"op\": \"query\", \"planSummary\": \"IDHACK\", \"millis\": 0}");
    bson_t *f1 = J("{\"planSummary\": \"COLLSCAN\"}");
    bson_t *f2 = J("{\"millis\": {\"$gte\": 100}}");

    cr_assert_null(mf_profile_filter_get(p, "db"), "no filter until one is set");
    cr_assert_eq(mf_profile_set_filter(p, "db", f1, &err), 0, "%s", err.msg);
    mf_profile_filter_t *held = mf_profile_filter_get(p, "db");
    cr_assert_not_null(held);
    cr_assert_null(mf_profile_filter_get(p, "other"), "a filter is per database");
    cr_assert(mf_profile_filter_match(held, scan));
    cr_assert_not(mf_profile_filter_match(held, idhack));
    cr_assert_eq(mf_profile_level(p, "db"), 0, "setting a filter keeps the level");

    /* Replaced while held: the held one still answers as it did; a new get sees the new one. */
    cr_assert_eq(mf_profile_set_filter(p, "db", f2, &err), 0, "%s", err.msg);
    cr_assert(mf_profile_filter_match(held, scan));
    mf_profile_filter_t *now = mf_profile_filter_get(p, "db");
    cr_assert_not(mf_profile_filter_match(now, scan));
    bson_t *spec = J("{\"millis\": {\"$gte\": 100}}");
    cr_assert(bson_equal(mf_profile_filter_spec(now), spec));
    mf_profile_filter_release(now);
    mf_profile_filter_release(held);

    /* A filter that does not parse changes nothing. */
    bson_t *bad = J("{\"$bogus\": 1}");
    cr_assert_eq(mf_profile_set_filter(p, "db", bad, &err), -1);
    cr_assert_neq(err.code, 0);
    now = mf_profile_filter_get(p, "db");
    cr_assert(bson_equal(mf_profile_filter_spec(now), spec));
    mf_profile_filter_release(now);

    /* One lookup gives the filter and the level together. */
    int level = -1;
    mf_profile_set_level(p, "db", 1);
    now = mf_profile_filter_and_level(p, "db", &level);
    cr_assert(bson_equal(mf_profile_filter_spec(now), spec));
    cr_assert_eq(level, 1, "the level read with the filter");
    mf_profile_filter_release(now);

    /* Turning the level off keeps the filter; "unset" removes it; a dropped database forgets it. */
    mf_profile_set_level(p, "db", 0);
    now = mf_profile_filter_get(p, "db");
    cr_assert_not_null(now);
    mf_profile_filter_release(now);
    cr_assert_eq(mf_profile_set_filter(p, "db", NULL, &err), 0);
    cr_assert_null(mf_profile_filter_get(p, "db"));
    cr_assert_eq(mf_profile_set_filter(p, "db2", f1, &err), 0);
    mf_profile_forget(p, "db2");
    cr_assert_null(mf_profile_filter_get(p, "db2"));

    /* A filter still set when the profiler is freed is freed with it. */
    cr_assert_eq(mf_profile_set_filter(p, "db3", f1, &err), 0);
    mf_profiler_free(p);
    bson_destroy(scan);
    bson_destroy(idhack);
    bson_destroy(f1);
    bson_destroy(f2);
    bson_destroy(spec);
    bson_destroy(bad);
}

Test(profiler, a_filter_that_needs_metadata_is_refused_with_4910201)
{
    mf_profiler_t *p = mf_profiler_new();
    mf_error_t err = {0};
    bson_t *meta = J("{\"$and\": [{\"op\": \"query\"}, {\"$expr\": {\"$gt\": [{\"$meta\": \"textScore\"}, 1]}}]}");
    cr_assert_eq(mf_profile_set_filter(p, "db", meta, &err), -1);
    cr_assert_eq(err.code, 4910201);
    cr_assert_str_eq(err.msg, "Profile filter is not allowed to depend on metadata");
    cr_assert_null(mf_profile_filter_get(p, "db"), "nothing set");
    bson_t *plain = J("{\"$expr\": {\"$gt\": [\"$millis\", 1]}}");
    cr_assert_eq(mf_profile_set_filter(p, "db", plain, &err), 0, "%s", err.msg);
    bson_destroy(meta);
    bson_destroy(plain);
    mf_profiler_free(p);
}
