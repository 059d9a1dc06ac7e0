/*
 * test_ttl_invalid.c: serverStatus metrics.ttl.invalidTTLIndexSkips, as
 * mongod's. createIndexes and collMod never make a compound index with
 * expireAfterSeconds, so this test writes one into a catalog directly (the
 * catalog layer takes any spec), then opens the engine on that directory:
 * the TTL monitor skips the index, counts it, and deletes nothing through
 * it, while a valid TTL index beside it still expires its documents.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "mayfly.h"
#include "storage/storage.h"
#include "unit_catalog.h"

/* The int64 at dotted path in doc, or -1. */
static int64_t
get_i64(const bson_t *doc, const char *path)
{
    bson_iter_t it, f;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f) && BSON_ITER_HOLDS_INT64(&f))
        return bson_iter_int64(&f);
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &f) && BSON_ITER_HOLDS_INT32(&f))
        return bson_iter_int32(&f);
    return -1;
}

static int64_t
count_of(mf_db *db, const char *coll)
{
    char json[128];
    bson_error_t berr;
    bson_t reply;
    snprintf(json, sizeof(json), "{\"count\": \"%s\"}", coll);
    bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_eq(mf_db_command(db, "db", cmd, &reply), 0);
    int64_t n = get_i64(&reply, "n");
    bson_destroy(&reply);
    bson_destroy(cmd);
    return n;
}

Test(ttl, an_index_with_expireAfterSeconds_that_is_no_TTL_index_is_skipped_and_counted, .timeout = 120)
{
    char dir[64];
    mf_error_t err = {0};
    mf_storage_t *st;
    mf_catalog_t *cat;
    mf_coll_t *bad = NULL, *good = NULL;

    snprintf(dir, sizeof(dir), "/tmp/mf-test-ttlinvalid-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(mf_storage_open(dir, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_catalog_open(st, &cat, &err), 0, "%s", err.msg);
    mf_catalog_wrlock(cat);
    cr_assert_eq(mf_catalog_coll_create(cat, "db", "bad", NULL, &bad, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_catalog_coll_create(cat, "db", "good", NULL, &good, &err), 0, "%s", err.msg);
    mf_catalog_unlock(cat);
    unit_index_add(cat, bad, "{\"v\": 2, \"key\": {\"at\": 1, \"k\": 1}, \"name\": \"at_1_k_1\", \"expireAfterSeconds\": 0}");
    unit_index_add(cat, good, "{\"v\": 2, \"key\": {\"at\": 1}, \"name\": \"at_1\", \"expireAfterSeconds\": 0}");
    unit_insert_json(st, cat, bad, "{\"_id\": 1, \"at\": {\"$date\": 0}, \"k\": 1}", true);
    unit_insert_json(st, cat, good, "{\"_id\": 1, \"at\": {\"$date\": 0}}", true);
    mf_catalog_close(cat);
    mf_storage_close(st);

    bson_error_t berr;
    bson_t *cfg = bson_new_from_json((const uint8_t *)"{\"setParameter\": {\"ttlMonitorSleepSecs\": 1}}", -1, &berr);
    mf_db *db = NULL;
    mf_db_error dberr;
    cr_assert_eq(mf_db_open(dir, cfg, &db, &dberr), 0, "open: %s", dberr.message);
    bson_destroy(cfg);
    /* The valid index expires its document in the first pass over every index, which skips the other one. */
    for (int i = 0; i < 400 && count_of(db, "good") != 0; i++)
        usleep(50 * 1000);
    cr_assert_eq(count_of(db, "good"), 0, "the valid TTL index expired its document");
    bson_t *ss = bson_new_from_json((const uint8_t *)"{\"serverStatus\": 1}", -1, &berr);
    bson_t reply;
    cr_assert_eq(mf_db_command(db, "admin", ss, &reply), 0);
    int64_t skips = get_i64(&reply, "metrics.ttl.invalidTTLIndexSkips");
    cr_assert_geq(skips, 1, "invalidTTLIndexSkips %lld", (long long)skips);
    bson_destroy(&reply);
    bson_destroy(ss);
    cr_assert_eq(count_of(db, "bad"), 1, "nothing was deleted through the compound index");
    mf_db_close(db);

    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
