/*
 * test_catalog.c: the catalog's persistence, socket-free (mf_storage_open +
 * mf_catalog_open on a temporary directory under /tmp, reopened to play a
 * restart): the multikey flag commits with the first multikey document,
 * storage errors during the catalog load fail it instead of loading part of
 * the catalog, a rename is one transaction (an injected failure between its
 * two catalog writes leaves exactly the old entry), deferred table drops are
 * all kept (more than 256) and orphaned tables are dropped at open, and
 * collection counts and sizes are read back from table:_mf_sizes instead of
 * being recounted, mf_catalog_version moves with every catalog change
 * and with nothing else, and a batch's record ids give the same runs
 * (mf_rids_in_runs) in any order.
 *
 * Faults come from mf_storage_fault_set: after N more cursor operations on
 * one table, the next fails as a WiredTiger error would.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "query/batch.h"
#include "storage/storage.h"
#include "unit_catalog.h"

typedef struct env {
    char dir[64];
    mf_storage_t *st;
    mf_catalog_t *cat;
} env_t;

static void
env_open(env_t *e)
{
    mf_error_t err = {0};
    cr_assert_eq(mf_storage_open(e->dir, &e->st, &err), 0, "storage open: %s", err.msg);
    cr_assert_eq(mf_catalog_open(e->st, &e->cat, &err), 0, "catalog open: %s", err.msg);
}

static void
env_close(env_t *e)
{
    mf_catalog_close(e->cat);
    mf_storage_close(e->st);
    e->cat = NULL;
    e->st = NULL;
}

static void
env_init(env_t *e)
{
    snprintf(e->dir, sizeof(e->dir), "/tmp/mf-test-catalog-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
    env_open(e);
}

static void
env_destroy(env_t *e)
{
    char cmd[128];
    if (e->cat != NULL)
        env_close(e);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
    cr_assert_eq(system(cmd), 0);
}

static mf_coll_t *
create_coll(env_t *e, const char *db, const char *name)
{
    mf_coll_t *c = NULL;
    mf_error_t err = {0};
    mf_catalog_wrlock(e->cat);
    cr_assert_eq(mf_catalog_coll_create(e->cat, db, name, NULL, &c, &err), 0, "create %s.%s: %s", db, name, err.msg);
    mf_catalog_unlock(e->cat);
    return c;
}

/* Counts the entries of table uri by scanning it. */
static int64_t
scan_table(env_t *e, const char *uri)
{
    mf_sess_t *s = mf_storage_session(e->st);
    mf_cur_t *cur;
    mf_error_t err = {0};
    int64_t n = 0;
    int r;
    cr_assert_eq(mf_cur_open(s, uri, &cur, &err), 0);
    while ((r = mf_cur_next(cur)) == 0)
        n++;
    cr_assert_eq(r, MF_NOTFOUND, "scan ended with %d", r);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    return n;
}

/* Counts c's records by scanning its table (the truth the stored count must match). */
static int64_t
scan_count(env_t *e, mf_coll_t *c)
{
    return scan_table(e, c->uri);
}

Test(catalog, multikey_flag_survives_reopen)
{
    env_t e;
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "mk");
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}");
    mf_index_t *ix = mf_coll_index_by_name(c, "a_1");
    cr_assert_not_null(ix);
    cr_assert(!atomic_load(&ix->multikey));

    /* An aborted multikey write may leave the flag set in memory, but not durable. */
    unit_insert_json(e.st, e.cat, c, "{\"_id\": 0, \"a\": [7, 8]}", false);
    cr_assert(atomic_load(&ix->multikey), "the flag is set before commit");
    cr_assert(!atomic_load(&ix->multikey_durable), "an aborted write made the flag durable");

    unit_insert_json(e.st, e.cat, c, "{\"_id\": 1, \"a\": [1, 2, 3]}", true);
    cr_assert(atomic_load(&ix->multikey_durable), "the committed multikey write made the flag durable");
    env_close(&e);

    env_open(&e);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "mk");
    cr_assert_not_null(c);
    ix = mf_coll_index_by_name(c, "a_1");
    cr_assert_not_null(ix);
    cr_assert(atomic_load(&ix->multikey), "multikey flag lost across the restart");
    cr_assert_eq(atomic_load(&c->approx_count), 1);
    mf_catalog_unlock(e.cat);
    env_destroy(&e);
}

Test(catalog, load_error_fails_open)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    create_coll(&e, "db", "a");
    create_coll(&e, "db", "b");
    create_coll(&e, "db", "c");
    env_close(&e);

    cr_assert_eq(mf_storage_open(e.dir, &e.st, &err), 0, "%s", err.msg);
    /* The first catalog entry reads fine, the second read fails. */
    mf_storage_fault_set(e.st, "table:_mf_catalog", 1);
    memset(&err, 0, sizeof(err));
    cr_assert_neq(mf_catalog_open(e.st, &e.cat, &err), 0, "a storage error loaded a partial catalog");
    cr_assert_neq(err.code, 0);
    cr_assert(strstr(err.msg, "catalog") != NULL, "error message: %s", err.msg);
    e.cat = NULL;

    /* Without the fault everything loads. */
    cr_assert_eq(mf_catalog_open(e.st, &e.cat, &err), 0, "%s", err.msg);
    mf_catalog_rdlock(e.cat);
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "db", "a"));
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "db", "b"));
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "db", "c"));
    mf_catalog_unlock(e.cat);

    /* A record-table error while reading a collection's stats fails the open too. */
    env_close(&e);
    cr_assert_eq(mf_storage_open(e.dir, &e.st, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_catalog_open(e.st, &e.cat, &err), 0, "%s", err.msg);
    mf_catalog_rdlock(e.cat);
    char uri[128];
    snprintf(uri, sizeof(uri), "%s", mf_catalog_coll_find(e.cat, "db", "b")->uri);
    mf_catalog_unlock(e.cat);
    mf_catalog_close(e.cat);
    e.cat = NULL;
    mf_storage_fault_set(e.st, uri, 0);
    cr_assert_neq(mf_catalog_open(e.st, &e.cat, &err), 0, "a record-table error was read as an empty table");
    mf_storage_fault_set(e.st, NULL, 0);
    cr_assert_eq(mf_catalog_open(e.st, &e.cat, &err), 0, "%s", err.msg);
    env_destroy(&e);
}

Test(catalog, rename_is_atomic_under_injected_failure)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "src");
    for (int i = 0; i < 20; i++) {
        char json[64];
        snprintf(json, sizeof(json), "{\"_id\": %d, \"x\": %d}", i, i * 10);
        unit_insert_json(e.st, e.cat, c, json, true);
    }

    /* The new entry's put succeeds, the old entry's removal fails: the transaction must leave nothing. */
    mf_storage_fault_set(e.st, "table:_mf_catalog", 1);
    mf_catalog_wrlock(e.cat);
    cr_assert_neq(mf_catalog_coll_rename(e.cat, c, "db", "dst", &err), 0, "rename succeeded despite the fault");
    cr_assert_str_eq(c->ns, "db.src");
    cr_assert_null(mf_catalog_coll_find(e.cat, "db", "dst"));
    mf_catalog_unlock(e.cat);
    mf_storage_fault_set(e.st, NULL, 0);
    env_close(&e);

    env_open(&e);
    mf_catalog_rdlock(e.cat);
    int n = 0;
    for (const char *nm = "src"; nm; nm = strcmp(nm, "src") == 0 ? "dst" : NULL)
        n += mf_catalog_coll_find(e.cat, "db", nm) != NULL;
    cr_assert_eq(n, 1, "expected exactly one catalog entry after the failed rename, got %d", n);
    c = mf_catalog_coll_find(e.cat, "db", "src");
    cr_assert_not_null(c, "the old name is gone");
    mf_catalog_unlock(e.cat);
    cr_assert_eq(scan_count(&e, c), 20);
    cr_assert_eq(atomic_load(&c->approx_count), 20);

    /* And without a fault the rename works and survives a reopen. */
    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_coll_rename(e.cat, c, "db", "dst", &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    cr_assert_null(mf_catalog_coll_find(e.cat, "db", "src"));
    c = mf_catalog_coll_find(e.cat, "db", "dst");
    cr_assert_not_null(c);
    mf_catalog_unlock(e.cat);
    cr_assert_eq(scan_count(&e, c), 20);
    env_destroy(&e);
}

Test(catalog, drop_database_is_one_transaction)
{
    env_t e;
    mf_error_t err = {0};
    int n = -1;
    env_init(&e);
    create_coll(&e, "d1", "a");
    create_coll(&e, "d1", "b");
    create_coll(&e, "d1", "c");
    /* Two removals (entry + sizes) per collection; fail at the second collection's. */
    mf_storage_fault_set(e.st, "table:_mf_catalog", 1);
    mf_catalog_wrlock(e.cat);
    cr_assert_neq(mf_catalog_db_drop(e.cat, "d1", &n, &err), 0);
    mf_catalog_unlock(e.cat);
    mf_storage_fault_set(e.st, NULL, 0);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "d1", "a"), "a partial dropDatabase was committed");
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "d1", "b"));
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "d1", "c"));
    mf_catalog_unlock(e.cat);
    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_db_drop(e.cat, "d1", &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    mf_catalog_unlock(e.cat);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    cr_assert_null(mf_catalog_coll_find(e.cat, "d1", "a"));
    mf_catalog_unlock(e.cat);
    env_destroy(&e);
}

static void
count_uri(void *arg, const char *uri)
{
    (void)uri;
    (*(int *)arg)++;
}

Test(catalog, deferred_drops_beyond_256_are_kept)
{
    env_t e;
    mf_error_t err = {0};
    enum { N = 300 };
    mf_cur_t *curs[N];
    env_init(&e);
    mf_sess_t *s = mf_storage_session(e.st);
    for (int i = 0; i < N; i++) {
        char uri[64];
        snprintf(uri, sizeof(uri), "table:coll-busy%04d", i);
        cr_assert_eq(mf_storage_create(s, uri, "key_format=q,value_format=u", &err), 0, "%s", err.msg);
        cr_assert_eq(mf_cur_open(s, uri, &curs[i], &err), 0, "%s", err.msg);
        cr_assert_eq(mf_cur_insert_rid(curs[i], 1, "x", 1), 0);
    }
    /* Every table has an open cursor, so every drop is deferred. */
    for (int i = 0; i < N; i++) {
        char uri[64];
        snprintf(uri, sizeof(uri), "table:coll-busy%04d", i);
        mf_storage_drop(e.st, uri);
    }
    cr_assert_eq(mf_storage_pending_drops(e.st), N, "pending drops: %d", mf_storage_pending_drops(e.st));
    for (int i = 0; i < N; i++)
        mf_cur_close(curs[i]);
    mf_storage_session_release(s);
    mf_storage_retry_drops(e.st);
    cr_assert_eq(mf_storage_pending_drops(e.st), 0, "pending drops left: %d", mf_storage_pending_drops(e.st));
    int left = 0;
    cr_assert_eq(mf_storage_list_tables(e.st, "table:coll-busy", count_uri, &left, &err), 0);
    cr_assert_eq(left, 0, "%d tables were never dropped", left);
    env_destroy(&e);
}

Test(catalog, orphan_tables_dropped_at_open)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "kept");
    char kept_uri[128];
    snprintf(kept_uri, sizeof(kept_uri), "%s", c->uri);
    mf_sess_t *s = mf_storage_session(e.st);
    /* Tables a crash left behind: created, never named by a committed entry (or dropped only in memory). */
    cr_assert_eq(mf_storage_create(s, "table:coll-orphan1", "key_format=q,value_format=u", &err), 0);
    cr_assert_eq(mf_storage_create(s, "table:index-orphan2", "key_format=u,value_format=u", &err), 0);
    env_close(&e);
    env_open(&e);
    int n = 0;
    cr_assert_eq(mf_storage_list_tables(e.st, "table:coll-orphan", count_uri, &n, &err), 0);
    cr_assert_eq(mf_storage_list_tables(e.st, "table:index-orphan", count_uri, &n, &err), 0);
    cr_assert_eq(n, 0, "%d orphaned tables survived the open", n);
    n = 0;
    cr_assert_eq(mf_storage_list_tables(e.st, kept_uri, count_uri, &n, &err), 0);
    cr_assert_eq(n, 1, "the catalog's own table was dropped");
    env_destroy(&e);
}

Test(catalog, stored_counts_after_reopen)
{
    env_t e;
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "counted");
    mf_coll_t *empty = create_coll(&e, "db", "empty");
    (void)empty;
    int64_t size = 0;
    for (int i = 0; i < 500; i++) {
        char json[96];
        snprintf(json, sizeof(json), "{\"_id\": %d, \"pad\": \"%0*d\"}", i, 1 + i % 40, 0);
        unit_insert_json(e.st, e.cat, c, json, true);
    }
    size = atomic_load(&c->approx_size);
    cr_assert_gt(size, 0);
    int64_t next = atomic_load(&c->next_rid);
    char uri[128];
    snprintf(uri, sizeof(uri), "%s", c->uri);
    env_close(&e);

    /*
     * Reopen with a fault armed on the record table after one operation:
     * the open may step once (the next record id) but must not scan.
     */
    mf_error_t err = {0};
    cr_assert_eq(mf_storage_open(e.dir, &e.st, &err), 0, "%s", err.msg);
    mf_storage_fault_set(e.st, uri, 1);
    cr_assert_eq(mf_catalog_open(e.st, &e.cat, &err), 0, "the open scanned the records: %s", err.msg);
    mf_storage_fault_set(e.st, NULL, 0);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "counted");
    cr_assert_not_null(c);
    cr_assert_eq(atomic_load(&c->approx_count), 500, "count %lld", (long long)atomic_load(&c->approx_count));
    cr_assert_eq(atomic_load(&c->approx_size), size);
    cr_assert_eq(atomic_load(&c->next_rid), next);
    cr_assert_eq(atomic_load(&mf_catalog_coll_find(e.cat, "db", "empty")->approx_count), 0);
    mf_catalog_unlock(e.cat);
    cr_assert_eq(scan_count(&e, c), 500);

    /* A periodic-style flush persists changes made since (here: one more insert), read back after reopen. */
    unit_insert_json(e.st, e.cat, c, "{\"_id\": 1000}", true);
    cr_assert_eq(mf_catalog_flush_sizes(e.cat, true, &err), 0, "%s", err.msg);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    cr_assert_eq(atomic_load(&mf_catalog_coll_find(e.cat, "db", "counted")->approx_count), 501);
    mf_catalog_unlock(e.cat);
    env_destroy(&e);
}

Test(catalog, drop_many_indexes_is_one_transaction)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "ix");
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}");
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"b\": 1}, \"name\": \"b_1\"}");
    mf_index_t *ixs[2] = {mf_coll_index_by_name(c, "a_1"), mf_coll_index_by_name(c, "b_1")};
    /* The entry rewrite fails: both indexes stay, in memory and after a reopen. */
    mf_storage_fault_set(e.st, "table:_mf_catalog", 0);
    mf_catalog_wrlock(e.cat);
    cr_assert_neq(mf_catalog_index_drop_many(e.cat, c, ixs, 2, &err), 0);
    cr_assert_eq(c->nindexes, 3);
    mf_catalog_unlock(e.cat);
    env_close(&e);
    env_open(&e);
    mf_catalog_wrlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "ix");
    cr_assert_eq(c->nindexes, 3);
    ixs[0] = mf_coll_index_by_name(c, "a_1");
    ixs[1] = mf_coll_index_by_name(c, "b_1");
    cr_assert_eq(mf_catalog_index_drop_many(e.cat, c, ixs, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(c->nindexes, 1);
    mf_catalog_unlock(e.cat);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "ix");
    cr_assert_eq(c->nindexes, 1);
    cr_assert(c->indexes[0]->is_id);
    mf_catalog_unlock(e.cat);
    env_destroy(&e);
}

/* The stored count of ident in table:_mf_sizes, or -1 if it has no entry. */
static int64_t
stored_count(env_t *e, const char *ident)
{
    mf_sess_t *s = mf_storage_session(e->st);
    mf_cur_t *cur;
    mf_error_t err = {0};
    int64_t n = -1;
    cr_assert_eq(mf_cur_open(s, "table:_mf_sizes", &cur, &err), 0, "%s", err.msg);
    if (mf_cur_search_bytes(cur, ident, strlen(ident)) == 0) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        bson_iter_t it;
        mf_cur_value(cur, &v, &len);
        if (bson_init_static(&doc, v, len) && bson_iter_init_find(&it, &doc, "count"))
            n = bson_iter_as_int64(&it);
    }
    mf_cur_close(cur);
    mf_storage_session_release(s);
    return n;
}

Test(catalog, sizes_flushed_in_background)
{
    env_t e;
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "bg");
    char ident[64];
    snprintf(ident, sizeof(ident), "%s", c->ident);
    cr_assert_eq(stored_count(&e, ident), 0, "create stores a zero count in its transaction");
    for (int i = 0; i < 7; i++) {
        char json[32];
        snprintf(json, sizeof(json), "{\"_id\": %d}", i);
        unit_insert_json(e.st, e.cat, c, json, true);
    }
    /* The flusher writes about once a second; allow many times that. */
    int64_t n = -1;
    for (int waited = 0; waited < 15000 && n != 7; waited += 50) {
        usleep(50 * 1000);
        n = stored_count(&e, ident);
    }
    cr_assert_eq(n, 7, "stored count %lld after waiting for the background flush", (long long)n);
    /* A drop removes the stored sizes in its transaction. */
    mf_error_t err = {0};
    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_coll_drop(e.cat, c, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    cr_assert_eq(stored_count(&e, ident), -1);
    env_destroy(&e);
}

Test(catalog, add_many_indexes_is_all_or_nothing)
{
    env_t e;
    mf_error_t err = {0};
    bson_error_t berr;
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "many");
    unit_insert_json(e.st, e.cat, c, "{\"_id\": 1, \"a\": 1, \"b\": 5}", true);
    unit_insert_json(e.st, e.cat, c, "{\"_id\": 2, \"a\": 2, \"b\": 5}", true);
    bson_t *ok = bson_new_from_json((const uint8_t *)"{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}", -1, &berr);
    bson_t *dup = bson_new_from_json((const uint8_t *)"{\"v\": 2, \"key\": {\"b\": 1}, \"name\": \"b_1\", \"unique\": true}",
                                     -1, &berr);
    const bson_t *specs[2] = {ok, dup};
    /* The second build fails (duplicate key): the first, already built, must not be named either. */
    mf_catalog_wrlock(e.cat);
    cr_assert_neq(mf_catalog_index_add_many(e.cat, c, specs, 2, NULL, NULL, &err), 0);
    cr_assert_eq(err.code, 11000, "code %d: %s", err.code, err.msg);
    cr_assert_eq(c->nindexes, 1);
    mf_catalog_unlock(e.cat);
    env_close(&e);
    env_open(&e);
    mf_catalog_wrlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "many");
    cr_assert_eq(c->nindexes, 1);
    /* Without the bad one, both good specs land together. */
    bson_t *ok2 = bson_new_from_json((const uint8_t *)"{\"v\": 2, \"key\": {\"b\": 1}, \"name\": \"b_1\"}", -1, &berr);
    const bson_t *specs2[2] = {ok, ok2};
    memset(&err, 0, sizeof(err));
    cr_assert_eq(mf_catalog_index_add_many(e.cat, c, specs2, 2, NULL, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(c->nindexes, 3);
    mf_catalog_unlock(e.cat);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "many");
    cr_assert_eq(c->nindexes, 3);
    cr_assert_not_null(mf_coll_index_by_name(c, "a_1"));
    cr_assert_not_null(mf_coll_index_by_name(c, "b_1"));
    mf_catalog_unlock(e.cat);
    bson_destroy(ok);
    bson_destroy(ok2);
    bson_destroy(dup);
    env_destroy(&e);
}

Test(catalog, missing_stored_sizes_are_counted_once_then_stored)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "legacy");
    for (int i = 0; i < 12; i++) {
        char json[32];
        snprintf(json, sizeof(json), "{\"_id\": %d}", i);
        unit_insert_json(e.st, e.cat, c, json, true);
    }
    char ident[64];
    snprintf(ident, sizeof(ident), "%s", c->ident);
    env_close(&e);

    /* Data from before sizes were stored: no entry. */
    cr_assert_eq(mf_storage_open(e.dir, &e.st, &err), 0, "%s", err.msg);
    mf_sess_t *s = mf_storage_session(e.st);
    mf_cur_t *cur;
    cr_assert_eq(mf_cur_open(s, "table:_mf_sizes", &cur, &err), 0);
    cr_assert_eq(mf_cur_remove_bytes(cur, ident, strlen(ident)), 0);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    cr_assert_eq(mf_catalog_open(e.st, &e.cat, &err), 0, "%s", err.msg);
    mf_catalog_rdlock(e.cat);
    cr_assert_eq(atomic_load(&mf_catalog_coll_find(e.cat, "db", "legacy")->approx_count), 12);
    mf_catalog_unlock(e.cat);
    cr_assert_eq(mf_catalog_flush_sizes(e.cat, true, &err), 0, "%s", err.msg);
    cr_assert_eq(stored_count(&e, ident), 12, "the counted size was not stored");
    env_destroy(&e);
}

Test(catalog, unreadable_entry_keeps_unnamed_tables)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    create_coll(&e, "db", "good");
    mf_sess_t *s = mf_storage_session(e.st);
    mf_cur_t *cur;
    cr_assert_eq(mf_storage_create(s, "table:coll-maybe", "key_format=q,value_format=u", &err), 0);
    cr_assert_eq(mf_cur_open(s, "table:_mf_catalog", &cur, &err), 0);
    cr_assert_eq(mf_cur_put_bytes(cur, "db.bad", 6, "garbage", 7), 0);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "db", "good"));
    mf_catalog_unlock(e.cat);
    int n = 0;
    cr_assert_eq(mf_storage_list_tables(e.st, "table:coll-maybe", count_uri, &n, &err), 0);
    cr_assert_eq(n, 1, "a table was dropped although an unreadable entry might name it");
    env_destroy(&e);
}

/*
 * Background build race (index_build.c): a writer whose snapshot is older
 * than a build chunk's commit changes a document the chunk indexed. The
 * chunk's reservation of the record ended at its commit, so the record
 * write does not conflict; the writer must still not leave the old key the
 * chunk wrote behind (it did for unique indexes: a stale entry that validate
 * counted as one entry too many). Played deterministically with the build on
 * a second thread between the writer's read and its write.
 */
typedef struct build_arg {
    env_t *e;
    mf_coll_t *c;
    mf_index_t *ix;
    int ret;
    mf_error_t err;
} build_arg_t;

static void *
build_thread(void *p)
{
    build_arg_t *b = p;
    char *names[1] = {b->ix->name}, *idents[1] = {b->ix->ident};
    b->ret = mf_index_build_run(b->e->cat, b->c->uuid, names, idents, 1, NULL, NULL, &b->err);
    mf_storage_session_release(mf_storage_session(mf_catalog_storage(b->e->cat)));
    return NULL;
}

static void
build_under_old_snapshot_write(const char *spec_json, bool remove)
{
    env_t e;
    mf_error_t err = {0};
    bson_error_t berr;
    int64_t rids[10];
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "race");
    mf_sess_t *s = mf_storage_session(e.st);
    mf_catalog_rdlock(e.cat);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    for (int i = 0; i < 10; i++) {
        char json[64];
        snprintf(json, sizeof(json), "{\"_id\": %d, \"a\": %d}", i, i);
        bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
        cr_assert_eq(mf_coll_insert(s, c, doc, &rids[i], &err), 0, "%s", err.msg);
        bson_destroy(doc);
    }
    cr_assert_eq(mf_txn_commit(s, false, &err), 0);
    mf_catalog_unlock(e.cat);

    bson_t *spec = bson_new_from_json((const uint8_t *)spec_json, -1, &berr);
    mf_index_t *ix = NULL;
    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_index_begin(e.cat, c, spec, &ix, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    bson_destroy(spec);

    /* The writer reads document 3 (its snapshot starts here) ... */
    bson_t old, *newdoc = bson_new_from_json((const uint8_t *)"{\"_id\": 3, \"a\": 100}", -1, &berr);
    mf_catalog_rdlock(e.cat);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_coll_fetch(s, c, rids[3], &old, &err), 0);
    /* ... the whole build runs and commits its chunk meanwhile ... */
    build_arg_t b = {.e = &e, .c = c, .ix = ix};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, build_thread, &b), 0);
    pthread_join(t, NULL);
    cr_assert_eq(b.ret, 0, "build: %s", b.err.msg);
    /* ... then the writer writes; a conflict is retried as the server does, on a new snapshot. */
    int r = remove ? mf_coll_remove(s, c, rids[3], &old, &err) : mf_coll_replace(s, c, rids[3], &old, newdoc, &err);
    if (r == 0)
        r = mf_txn_commit(s, false, &err);
    else
        mf_txn_abort(s);
    bson_destroy(&old);
    if (r != 0) {
        cr_assert_eq(r, MF_CONFLICT, "write failed: %d %s", r, err.msg);
        cr_assert_eq(mf_txn_begin(s, &err), 0);
        cr_assert_eq(mf_coll_fetch(s, c, rids[3], &old, &err), 0);
        r = remove ? mf_coll_remove(s, c, rids[3], &old, &err) : mf_coll_replace(s, c, rids[3], &old, newdoc, &err);
        cr_assert_eq(r, 0, "retried write: %d %s", r, err.msg);
        cr_assert_eq(mf_txn_commit(s, false, &err), 0);
        bson_destroy(&old);
    }
    mf_storage_session_release(s);
    mf_catalog_unlock(e.cat);
    bson_destroy(newdoc);

    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_index_commit(e.cat, c, &ix, 1, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    cr_assert_eq(scan_table(&e, ix->uri), remove ? 9 : 10, "the index has a stale entry for the old value");
    env_destroy(&e);
}

Test(catalog, unique_build_old_snapshot_update_leaves_no_stale_key)
{
    build_under_old_snapshot_write("{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\", \"unique\": true}", false);
}

Test(catalog, unique_build_old_snapshot_delete_leaves_no_stale_key)
{
    build_under_old_snapshot_write("{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\", \"unique\": true}", true);
}

Test(catalog, build_old_snapshot_update_leaves_no_stale_key)
{
    build_under_old_snapshot_write("{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}", false);
}

/*
 * mf_catalog_version moves with every change a reader could have derived
 * something from (the TTL monitor keeps its list of TTL indexes until it
 * moves): a collection created, an index added or dropped, an entry
 * rewritten (collMod), a rename, a drop; and stays put across reads and
 * document writes.
 */
Test(catalog, version_moves_with_every_catalog_change)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e);
    uint64_t v = mf_catalog_version(e.cat);
#define MOVED(what)                                                                                                \
    do {                                                                                                           \
        uint64_t now_ = mf_catalog_version(e.cat);                                                                 \
        cr_assert_neq(now_, v, "the version did not move on %s", what);                                           \
        v = now_;                                                                                                  \
    } while (0)

    mf_coll_t *c = create_coll(&e, "db", "v");
    MOVED("create");
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"at\": 1}, \"name\": \"at_1\", \"expireAfterSeconds\": 60}");
    MOVED("index add");

    unit_insert_json(e.st, e.cat, c, "{\"_id\": 1, \"at\": {\"$date\": 0}}", true);
    mf_catalog_rdlock(e.cat);
    cr_assert_not_null(mf_catalog_coll_find(e.cat, "db", "v"));
    mf_catalog_unlock(e.cat);
    cr_assert_eq(mf_catalog_version(e.cat), v, "a document write or a lookup moved the version");

    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_coll_persist(e.cat, c, &err), 0, "%s", err.msg); /* what collMod ends with */
    mf_catalog_unlock(e.cat);
    MOVED("entry rewrite");

    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_coll_rename(e.cat, c, "db", "w", &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    MOVED("rename");

    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_index_drop(e.cat, c, mf_coll_index_by_name(c, "at_1"), &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    MOVED("index drop");

    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_coll_drop(e.cat, c, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    MOVED("drop");
#undef MOVED
    env_destroy(&e);
}

/*
 * Deletes records 1..16 of a fresh 20-document collection with an index on
 * a, as a TTL batch does (ranges allowed, one transaction), rids[16] = dup
 * (0: no 17th id). Returns the stats; *left: the records still there.
 */
static mf_delete_stats_t
delete_first16(env_t *e, const char *name, int64_t dup, int *left)
{
    mf_error_t err = {0};
    mf_coll_t *c = create_coll(e, "db", name);
    unit_index_add(e->cat, c, "{\"v\": 2, \"key\": {\"a\": 1}, \"name\": \"a_1\"}");
    for (int i = 0; i < 20; i++) {
        char json[64];
        snprintf(json, sizeof(json), "{\"_id\": %d, \"a\": %d}", i, i);
        unit_insert_json(e->st, e->cat, c, json, true);
    }
    int64_t rids[17];
    for (int i = 0; i < 16; i++)
        rids[i] = i + 1;
    rids[16] = dup;
    mf_sess_t *s = mf_storage_session(e->st);
    mf_delete_stats_t st = {0};
    mf_catalog_rdlock(e->cat);
    cr_assert_eq(mf_delete_rids(s, c, rids, dup ? 17 : 16, 0, false, NULL, NULL,
                                MF_DEL_RANGE_RECORDS | MF_DEL_RANGE_INDEXES, &st, &err),
                 0, "%s", err.msg);
    mf_catalog_unlock(e->cat);
    mf_storage_session_release(s);
    *left = scan_table(e, c->uri);
    cr_assert_eq(atomic_load(&c->approx_count), *left, "the count follows the records");
    for (int i = 0; i < c->nindexes; i++)
        cr_assert_eq(scan_table(e, c->indexes[i]->uri), *left, "index %s", c->indexes[i]->name);
    return st;
}

Test(catalog, a_batch_with_a_record_id_twice_deletes_it_once_and_does_not_collect_its_records)
{
    env_t e;
    int left;
    env_init(&e);
    mf_delete_stats_t st = delete_first16(&e, "runs", 0, &left);
    cr_assert_eq(left, 4);
    cr_assert_eq(st.deleted, 16);
    cr_assert_eq(st.ranges, 1, "16 consecutive records as a range");
    cr_assert_eq(st.range_records, 16);
    cr_assert_eq(st.ix_ranges, 2, "_id and a_1 as ranges");
    /* Record 5 twice: collected, it would still be there for its second visit and be deleted twice. */
    st = delete_first16(&e, "dup", 5, &left);
    cr_assert_eq(left, 4);
    cr_assert_eq(st.deleted, 16, "deleted once");
    cr_assert_eq(st.range_records, 0, "records one by one");
    env_destroy(&e);
}

/* mf_rids_in_runs: ids in order are read in place, others sorted first; either way the same runs and duplicates. */
Test(catalog, rids_in_runs_counts_runs_of_eight_in_any_order_and_refuses_duplicates)
{
    int64_t scratch[32];
    int64_t up[20], shuffled[20];
    for (int i = 0; i < 20; i++)
        up[i] = 100 + i; /* one run of 20 */
    cr_assert_eq(mf_rids_in_runs(up, 20, scratch), 20);
    for (int i = 0; i < 20; i++)
        shuffled[i] = up[(i * 7) % 20]; /* 7 is prime to 20: a permutation */
    cr_assert_eq(mf_rids_in_runs(shuffled, 20, scratch), 20);
    cr_assert_eq(memcmp(shuffled, (int64_t[]){100, 107, 114, 101, 108}, 5 * sizeof(int64_t)), 0, "ids left as they were");
    /* 1..8 (a run), 20..26 (7: too short), 40 alone. */
    int64_t mixed[] = {1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23, 24, 25, 26, 40};
    cr_assert_eq(mf_rids_in_runs(mixed, 16, scratch), 8);
    int64_t mixed_rev[16];
    for (int i = 0; i < 16; i++)
        mixed_rev[i] = mixed[15 - i];
    cr_assert_eq(mf_rids_in_runs(mixed_rev, 16, scratch), 8);
    /* An id twice: none counted, whether the two are side by side in order or apart. */
    int64_t dup_in_order[] = {1, 2, 3, 4, 5, 5, 6, 7, 8, 9};
    cr_assert_eq(mf_rids_in_runs(dup_in_order, 10, scratch), 0);
    int64_t dup_apart[] = {5, 1, 2, 3, 4, 6, 7, 8, 9, 5};
    cr_assert_eq(mf_rids_in_runs(dup_apart, 10, scratch), 0);
    cr_assert_eq(mf_rids_in_runs(up, 0, scratch), 0);
    cr_assert_eq(mf_rids_in_runs(up, 1, scratch), 0);
}

/*
 * Removes keyFormat from the index entries of ns's stored catalog entry, as
 * a mayfly before key format 2 wrote it (set_to 0), or sets it to set_to.
 */
static void
rewrite_key_format(env_t *e, const char *ns, int set_to)
{
    mf_error_t err = {0};
    const uint8_t *val;
    size_t vlen;
    mf_cur_t *cur;
    bson_t entry, out, arr, ix, oarr, oix;
    bson_iter_t it, ai, fi;
    cr_assert_eq(mf_storage_open(e->dir, &e->st, &err), 0, "%s", err.msg);
    mf_sess_t *s = mf_storage_session(e->st);
    cr_assert_eq(mf_cur_open(s, "table:_mf_catalog", &cur, &err), 0);
    cr_assert_eq(mf_cur_search_bytes(cur, ns, strlen(ns)), 0);
    mf_cur_value(cur, &val, &vlen);
    cr_assert(bson_init_static(&entry, val, vlen));
    bson_init(&out);
    int stripped = 0;
    for (bson_iter_init(&it, &entry); bson_iter_next(&it);) {
        if (strcmp(bson_iter_key(&it), "indexes") != 0) {
            bson_append_iter(&out, NULL, 0, &it);
            continue;
        }
        BSON_APPEND_ARRAY_BEGIN(&out, "indexes", &oarr);
        bson_iter_recurse(&it, &ai);
        while (bson_iter_next(&ai)) {
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&ai, &l, &d);
            cr_assert(bson_init_static(&ix, d, l));
            BSON_APPEND_DOCUMENT_BEGIN(&oarr, bson_iter_key(&ai), &oix);
            for (bson_iter_init(&fi, &ix); bson_iter_next(&fi);) {
                if (strcmp(bson_iter_key(&fi), "keyFormat") == 0) {
                    stripped++;
                    if (set_to != 0)
                        BSON_APPEND_INT32(&oix, "keyFormat", set_to);
                } else
                    bson_append_iter(&oix, NULL, 0, &fi);
            }
            bson_append_document_end(&oarr, &oix);
        }
        bson_append_array_end(&out, &oarr);
    }
    (void)arr;
    cr_assert_gt(stripped, 0, "the entry carried keyFormat");
    cr_assert_eq(mf_cur_put_bytes(cur, ns, strlen(ns), bson_get_data(&out), out.len), 0);
    bson_destroy(&out);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    mf_storage_close(e->st);
    e->st = NULL;
}

/* Inserts json into c in one transaction: 0, or the error's code (nothing committed). */
static int
try_insert_json(env_t *e, mf_coll_t *c, const char *json)
{
    bson_error_t berr;
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(doc);
    mf_catalog_rdlock(e->cat);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    int rc = mf_coll_insert(s, c, doc, NULL, &err);
    if (rc == 0)
        cr_assert_eq(mf_txn_commit(s, false, &err), 0, "%s", err.msg);
    else
        mf_txn_abort(s);
    mf_storage_session_release(s);
    mf_catalog_unlock(e->cat);
    bson_destroy(doc);
    return rc == 0 ? 0 : err.code;
}

/* validate's verdict on c (under the write lock, as a DDL command holds it). */
static bool
validate_ok(env_t *e, mf_coll_t *c, int64_t *nkeys_v)
{
    mf_error_t err = {0};
    bson_t report = BSON_INITIALIZER;
    bson_iter_t it;
    mf_sess_t *s = mf_storage_session(e->st);
    mf_catalog_wrlock(e->cat);
    cr_assert_eq(mf_catalog_validate(e->cat, s, c, &report, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e->cat);
    mf_storage_session_release(s);
    bool ok = bson_iter_init_find(&it, &report, "valid") && bson_iter_as_bool(&it);
    if (nkeys_v != NULL && bson_iter_init(&it, &report) && bson_iter_find_descendant(&it, "keysPerIndex.v_1", &it))
        *nkeys_v = bson_iter_as_int64(&it);
    if (!ok) {
        char *j = bson_as_relaxed_extended_json(&report, NULL);
        cr_log_error("validate: %s", j);
        bson_free(j);
    }
    bson_destroy(&report);
    return ok;
}

/* Replaces (newjson) or removes (newjson NULL) the document whose _id is the decimal id. */
static void
change_dec_doc(env_t *e, mf_coll_t *c, const char *id, const char *newjson)
{
    mf_error_t err = {0};
    bson_error_t berr;
    bson_value_t idv = {.value_type = BSON_TYPE_DECIMAL128};
    int64_t rid = 0;
    mf_cur_t *cur;
    const uint8_t *val;
    size_t vlen;
    bson_t old;
    cr_assert(bson_decimal128_from_string(id, &idv.value.v_decimal128));
    mf_sess_t *s = mf_storage_session(e->st);
    mf_catalog_rdlock(e->cat);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_coll_find_id(s, c, &idv, &rid, &err), 0, "the _id index finds %s: %s", id, err.msg);
    cr_assert_eq(mf_cur_open(s, c->uri, &cur, &err), 0);
    cr_assert_eq(mf_cur_search_rid(cur, rid), 0);
    mf_cur_value(cur, &val, &vlen);
    uint8_t *copy = malloc(vlen);
    memcpy(copy, val, vlen);
    mf_cur_close(cur);
    cr_assert(bson_init_static(&old, copy, vlen));
    if (newjson != NULL) {
        bson_t *doc = bson_new_from_json((const uint8_t *)newjson, -1, &berr);
        cr_assert_not_null(doc);
        cr_assert_eq(mf_coll_replace(s, c, rid, &old, doc, &err), 0, "%s", err.msg);
        bson_destroy(doc);
    } else {
        cr_assert_eq(mf_coll_remove(s, c, rid, &old, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(mf_txn_commit(s, false, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e->cat);
    mf_storage_session_release(s);
    free(copy);
}

/*
 * Key formats (index/keystring.c): an index whose catalog entry lacks
 * keyFormat: 2 was written before decimals were keyed exactly. It keeps
 * format 1 for good, so the keys its documents already have are found
 * again by lookups, replaced and removed; a new index gets format 2, and the
 * choice survives restarts.
 */
Test(catalog, an_index_from_before_key_format_2_keeps_its_format_and_stays_consistent)
{
    env_t e;
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "dec");
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"v\": 1}, \"name\": \"v_1\"}");
    cr_assert(!c->indexes[0]->kp.legacy_decimals && !mf_coll_index_by_name(c, "v_1")->kp.legacy_decimals,
              "a new index is format 2");
    env_close(&e);
    rewrite_key_format(&e, "db.dec", 0);
    env_open(&e);

    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "dec");
    mf_catalog_unlock(e.cat);
    cr_assert(c->indexes[0]->kp.legacy_decimals && mf_coll_index_by_name(c, "v_1")->kp.legacy_decimals,
              "an entry without keyFormat is format 1");
    cr_assert(!mf_coll_index_by_name(c, "v_1")->key_types, "a format 1 index's entries hold no type bits");
    /* The documents an older mayfly would have written: fractional decimals, two that tie in format 1. */
    unit_insert_json(e.st, e.cat, c, "{\"_id\": {\"$numberDecimal\": \"19.99\"}, \"v\": {\"$numberDecimal\": \"19.99\"}}", true);
    unit_insert_json(e.st, e.cat, c, "{\"_id\": {\"$numberDecimal\": \"1.0000000000000000000001\"}, \"v\": {\"$numberDecimal\": \"1.0000000000000000000001\"}}", true);
    unit_insert_json(e.st, e.cat, c, "{\"_id\": {\"$numberDecimal\": \"0.1\"}, \"v\": [{\"$numberDecimal\": \"0.1\"}, 0.1]}", true);
    env_close(&e);

    env_open(&e);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "dec");
    mf_catalog_unlock(e.cat);
    cr_assert(mf_coll_index_by_name(c, "v_1")->kp.legacy_decimals, "still format 1 after a restart (the multikey write rewrote the entry)");
    int64_t nkeys = -1;
    cr_assert(validate_ok(&e, c, &nkeys), "the format 1 keys match what this version generates for the index");
    cr_assert_eq(nkeys, 4, "0.1 (decimal) and 0.1 (double) are two format 1 keys");
    /* The stored keys are found again: by _id lookups, and removed or replaced without stale entries. */
    change_dec_doc(&e, c, "19.99", "{\"_id\": {\"$numberDecimal\": \"19.99\"}, \"v\": {\"$numberDecimal\": \"29.99\"}}");
    change_dec_doc(&e, c, "1.0000000000000000000001", NULL);
    cr_assert(validate_ok(&e, c, &nkeys));
    cr_assert_eq(nkeys, 3);
    cr_assert_eq(scan_table(&e, mf_coll_index_by_name(c, "v_1")->uri), 3, "no stale entry in the index table");

    /* An index created now is format 2, beside the older ones, and stays so. */
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"v\": -1}, \"name\": \"v_-1\"}");
    cr_assert(!mf_coll_index_by_name(c, "v_-1")->kp.legacy_decimals);
    cr_assert(mf_coll_index_by_name(c, "v_-1")->key_types, "an index created now is format 3: type bits in its entries");
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "dec");
    mf_catalog_unlock(e.cat);
    cr_assert(!mf_coll_index_by_name(c, "v_-1")->kp.legacy_decimals);
    cr_assert(mf_coll_index_by_name(c, "v_-1")->key_types, "an index created now is format 3: type bits in its entries");
    cr_assert(mf_coll_index_by_name(c, "v_1")->kp.legacy_decimals);
    cr_assert(validate_ok(&e, c, NULL));

    /* Format 1's tie in the _id index: two _ids past 19 digits are one key there. */
    const char *third = "{\"_id\": {\"$numberDecimal\": \"1.0000000000000000000003\"}}";
    const char *fourth = "{\"_id\": {\"$numberDecimal\": \"1.0000000000000000000004\"}}";
    unit_insert_json(e.st, e.cat, c, third, true);
    cr_assert_eq(try_insert_json(&e, c, fourth), MF_E_DuplicateKey, "format 1 ties them");

    /* reIndex moves every index to format 2, for good. */
    mf_error_t err = {0};
    mf_catalog_wrlock(e.cat);
    cr_assert_eq(mf_catalog_reindex(e.cat, c, &err), 0, "%s", err.msg);
    mf_catalog_unlock(e.cat);
    for (int i = 0; i < c->nindexes; i++)
        cr_assert(!c->indexes[i]->kp.legacy_decimals, "index %s is format 2 after reIndex", c->indexes[i]->name);
    cr_assert(validate_ok(&e, c, &nkeys));
    cr_assert_eq(nkeys, 4, "29.99, decimal 0.1, double 0.1 (not equal at 34 digits) and the third document's null");
    cr_assert_eq(try_insert_json(&e, c, fourth), 0, "format 2 tells them apart");
    env_close(&e);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    c = mf_catalog_coll_find(e.cat, "db", "dec");
    mf_catalog_unlock(e.cat);
    for (int i = 0; i < c->nindexes; i++)
        cr_assert(!c->indexes[i]->kp.legacy_decimals, "index %s stays format 2 across a restart", c->indexes[i]->name);
    cr_assert(validate_ok(&e, c, NULL));
    env_destroy(&e);
}

/*
 * A key format this version does not know (a newer mayfly's): the entry is
 * unreadable, so the collection is left out, as any unreadable entry is,
 * with its tables kept, never maintained with keys of the wrong format.
 */
Test(catalog, an_index_of_an_unknown_key_format_is_never_used)
{
    env_t e;
    env_init(&e);
    mf_coll_t *c = create_coll(&e, "db", "future");
    unit_index_add(e.cat, c, "{\"v\": 2, \"key\": {\"v\": 1}, \"name\": \"v_1\"}");
    unit_insert_json(e.st, e.cat, c, "{\"_id\": 1, \"v\": {\"$numberDecimal\": \"1.5\"}}", true);
    char uri[128];
    snprintf(uri, sizeof(uri), "%s", mf_coll_index_by_name(c, "v_1")->uri);
    env_close(&e);
    rewrite_key_format(&e, "db.future", 4);
    env_open(&e);
    mf_catalog_rdlock(e.cat);
    cr_assert_null(mf_catalog_coll_find(e.cat, "db", "future"), "an entry with key format 4 was loaded");
    mf_catalog_unlock(e.cat);
    cr_assert_eq(scan_table(&e, uri), 1, "its index table is kept as it was");
    env_destroy(&e);
}
