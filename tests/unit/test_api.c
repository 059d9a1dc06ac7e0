/*
 * test_api.c: the embedding API (include/mayfly.h), socket-free.
 *
 * Each test opens engines on fresh directories under /tmp, sends commands as
 * BSON and reads the replies, as an application embedding mayfly would:
 * open, command, close, reopen. Covered: the catalog across a reopen,
 * writes and cursors, the multikey flag after a reopen (issue 7's wrong
 * results), in-memory databases, two engines in one process with their own
 * parameters and TTL monitors (SPEC C1 per engine), killOp and maxTimeMS
 * interruption (11601, 50), and configuration errors.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "mayfly.h"

static void
fresh_dir(char *out, size_t n)
{
    snprintf(out, n, "/tmp/mf-api-XXXXXX");
    cr_assert_not_null(mkdtemp(out));
}

static void
rm_dir(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static int64_t
now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Runs a command given as JSON (canonical extended JSON allowed); returns its code, reply in *reply. */
static int
run_json(mf_db *db, const char *dbname, const char *json, bson_t *reply)
{
    bson_error_t berr;
    bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(cmd, "bad test JSON %s: %s", json, berr.message);
    int code = mf_db_command(db, dbname, cmd, reply);
    bson_destroy(cmd);
    return code;
}

/* Runs a command that must succeed. */
static void
ok_json(mf_db *db, const char *dbname, const char *json)
{
    bson_t reply;
    int code = run_json(db, dbname, json, &reply);
    char *s = bson_as_relaxed_extended_json(&reply, NULL);
    cr_assert_eq(code, 0, "%s failed: %s", json, s);
    bson_free(s);
    bson_destroy(&reply);
}

/* count command's n. */
static int64_t
count_docs(mf_db *db, const char *dbname, const char *coll, const char *query)
{
    char json[512];
    bson_t reply;
    bson_iter_t it;
    snprintf(json, sizeof(json), "{\"count\": \"%s\", \"query\": %s}", coll, query ? query : "{}");
    cr_assert_eq(run_json(db, dbname, json, &reply), 0);
    cr_assert(bson_iter_init_find(&it, &reply, "n"));
    int64_t n = bson_iter_as_int64(&it);
    bson_destroy(&reply);
    return n;
}

/* Documents a find returns in its first batch (the batch is large enough here). */
static int
find_count(mf_db *db, const char *dbname, const char *json)
{
    bson_t reply;
    bson_iter_t it, arr;
    int n = 0;
    cr_assert_eq(run_json(db, dbname, json, &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.firstBatch", &arr));
    cr_assert(BSON_ITER_HOLDS_ARRAY(&arr));
    bson_iter_t el;
    bson_iter_recurse(&arr, &el);
    while (bson_iter_next(&el))
        n++;
    bson_destroy(&reply);
    return n;
}

static mf_db *
open_db(const char *dir, const char *config_json)
{
    mf_db *db = NULL;
    mf_db_error err = {0};
    bson_t *cfg = NULL;
    if (config_json) {
        bson_error_t berr;
        cfg = bson_new_from_json((const uint8_t *)config_json, -1, &berr);
        cr_assert_not_null(cfg);
    }
    int rc = mf_db_open(dir, cfg, &db, &err);
    if (cfg)
        bson_destroy(cfg);
    cr_assert_eq(rc, 0, "mf_db_open(%s): %d %s", dir ? dir : "(memory)", err.code, err.message);
    cr_assert_not_null(db);
    return db;
}

Test(api, open_command_close_reopen_keeps_documents_and_catalog)
{
    char dir[64];
    fresh_dir(dir, sizeof(dir));
    mf_db *db = open_db(dir, NULL);
    ok_json(db, "app", "{\"create\": \"events\", \"validator\": {\"n\": {\"$type\": \"int\"}}}");
    ok_json(db, "app", "{\"insert\": \"events\", \"documents\": [{\"_id\": 1, \"n\": 1}, {\"_id\": 2, \"n\": 2}]}");
    ok_json(db, "app", "{\"createIndexes\": \"events\", \"indexes\": [{\"key\": {\"n\": 1}, \"name\": \"n_1\"}]}");
    cr_assert_eq(count_docs(db, "app", "events", NULL), 2);
    mf_db_close(db);

    db = open_db(dir, NULL);
    cr_assert_eq(count_docs(db, "app", "events", NULL), 2, "documents survive a reopen");
    bson_t reply;
    bson_iter_t it;
    cr_assert_eq(run_json(db, "app", "{\"listIndexes\": \"events\"}", &reply), 0);
    char *s = bson_as_relaxed_extended_json(&reply, NULL);
    cr_assert(strstr(s, "\"n_1\"") != NULL, "index n_1 listed after reopen: %s", s);
    bson_free(s);
    bson_destroy(&reply);
    /* The validator (a collection option in the catalog) still applies. */
    cr_assert_eq(run_json(db, "app", "{\"insert\": \"events\", \"documents\": [{\"_id\": 3, \"n\": \"x\"}]}", &reply), 0);
    cr_assert(bson_iter_init_find(&it, &reply, "writeErrors"), "validator enforced after reopen");
    bson_destroy(&reply);
    mf_db_close(db);
    rm_dir(dir);
}

Test(api, errors_come_back_as_mongodb_replies)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    bson_t reply;
    bson_iter_t it;
    cr_assert_eq(run_json(db, "app", "{\"noSuchCommand\": 1}", &reply), 59);
    cr_assert(bson_iter_init_find(&it, &reply, "codeName"));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "CommandNotFound");
    bson_destroy(&reply);
    cr_assert_eq(run_json(db, "app", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a\", "
                                     "\"expireAfterSeconds\": -1}]}",
                          &reply),
                 67);
    bson_destroy(&reply);
    /* Commands that look at the connection work without a network client. */
    ok_json(db, "admin", "{\"hello\": 1}");
    ok_json(db, "admin", "{\"whatsmyuri\": 1}");
    ok_json(db, "admin", "{\"serverStatus\": 1}");
    mf_db_close(db);
}

Test(api, bad_configuration_is_refused)
{
    mf_db *db = (mf_db *)1;
    mf_db_error err = {0};
    bson_error_t berr;
    bson_t *cfg = bson_new_from_json((const uint8_t *)"{\"setParameter\": {\"noSuchParameter\": 1}}", -1, &berr);
    cr_assert_neq(mf_db_open(NULL, cfg, &db, &err), 0);
    cr_assert_null(db);
    bson_destroy(cfg);
    cfg = bson_new_from_json((const uint8_t *)"{\"inMemory\": true, \"setParameter\": {\"ttlMonitorSleepSecs\": 0}}", -1,
                             &berr);
    cr_assert_eq(mf_db_open(NULL, cfg, &db, &err), 2, "ttlMonitorSleepSecs must be > 0: %d %s", err.code,
                 err.message);
    bson_destroy(cfg);
    cr_assert_neq(mf_db_open(NULL, NULL, &db, &err), 0, "a path is needed unless in memory");
}

Test(api, in_memory_database_is_gone_after_close)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    ok_json(db, "t", "{\"insert\": \"c\", \"documents\": [{\"a\": 1}, {\"a\": 2}, {\"a\": 3}]}");
    cr_assert_eq(count_docs(db, "t", "c", NULL), 3);
    bson_t reply;
    bson_iter_t it;
    cr_assert_eq(run_json(db, "admin", "{\"serverStatus\": 1}", &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "storageEngine.persistent", &it));
    cr_assert_eq(bson_iter_bool(&it), false);
    bson_destroy(&reply);
    mf_db_close(db);
    db = open_db(NULL, "{\"inMemory\": true}");
    cr_assert_eq(count_docs(db, "t", "c", NULL), 0);
    mf_db_close(db);
}

/* cacheSizeGB sizes WiredTiger's cache (serverStatus shows it); out of range it is refused. */
Test(api, cache_size_gb_sizes_the_cache)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true, \"cacheSizeGB\": 0.3}");
    bson_t reply;
    bson_iter_t it;
    cr_assert_eq(run_json(db, "admin", "{\"serverStatus\": 1}", &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) &&
              bson_iter_find_descendant(&it, "wiredTiger.cache.maximum bytes configured", &it));
    cr_assert_eq(bson_iter_as_int64(&it), (int64_t)307 * 1024 * 1024, "%lld", (long long)bson_iter_as_int64(&it));
    bson_destroy(&reply);
    mf_db_close(db);
    mf_db_error err = {0};
    bson_error_t berr;
    bson_t *cfg = bson_new_from_json((const uint8_t *)"{\"inMemory\": true, \"cacheSizeGB\": 0.1}", -1, &berr);
    db = (mf_db *)1;
    cr_assert_eq(mf_db_open(NULL, cfg, &db, &err), 2, "0.1 GB is below mongod's 0.25: %d %s", err.code, err.message);
    cr_assert_null(db);
    bson_destroy(cfg);
}

/* A hello with client metadata through the embedded API: answered, and nothing it attached outlives the call (LeakSanitizer). */
Test(api, hello_with_client_metadata_leaves_nothing_behind)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    for (int i = 0; i < 3; i++)
        ok_json(db, "admin", "{\"hello\": 1, \"client\": {\"application\": {\"name\": \"embedded-app\"}, "
                             "\"driver\": {\"name\": \"c\", \"version\": \"1\"}, \"os\": {\"type\": \"Linux\"}}}");
    mf_db_close(db);
}

/* Issue 7: a multikey index must be known as multikey after a clean restart. */
Test(api, multikey_index_after_reopen_returns_each_document_once)
{
    char dir[64];
    fresh_dir(dir, sizeof(dir));
    mf_db *db = open_db(dir, NULL);
    ok_json(db, "t", "{\"createIndexes\": \"c\", \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"}]}");
    ok_json(db, "t", "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": [1, 2, 3]}]}");
    mf_db_close(db);
    db = open_db(dir, NULL);
    cr_assert_eq(find_count(db, "t", "{\"find\": \"c\", \"filter\": {\"a\": {\"$gte\": 0}}}"), 1);
    cr_assert_eq(count_docs(db, "t", "c", "{\"a\": {\"$gte\": 0}}"), 1);
    mf_db_close(db);
    rm_dir(dir);
}

/* A cursor opened by find continues with getMore through the API. */
Test(api, cursors_continue_with_get_more)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    bson_t *ins = bson_new(), docs, d;
    BSON_APPEND_UTF8(ins, "insert", "c");
    BSON_APPEND_ARRAY_BEGIN(ins, "documents", &docs);
    for (int i = 0; i < 250; i++) {
        char k[16];
        snprintf(k, sizeof(k), "%d", i);
        BSON_APPEND_DOCUMENT_BEGIN(&docs, k, &d);
        BSON_APPEND_INT32(&d, "_id", i);
        bson_append_document_end(&docs, &d);
    }
    bson_append_array_end(ins, &docs);
    bson_t reply;
    cr_assert_eq(mf_db_command(db, "t", ins, &reply), 0);
    bson_destroy(&reply);
    bson_destroy(ins);

    bson_iter_t it;
    cr_assert_eq(run_json(db, "t", "{\"find\": \"c\", \"batchSize\": 100}", &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.id", &it));
    int64_t id = bson_iter_as_int64(&it);
    cr_assert_neq(id, 0);
    bson_destroy(&reply);
    int seen = 100;
    while (id != 0) {
        bson_t *gm = BCON_NEW("getMore", BCON_INT64(id), "collection", "c", "batchSize", BCON_INT32(100));
        cr_assert_eq(mf_db_command(db, "t", gm, &reply), 0);
        bson_destroy(gm);
        bson_iter_t b, el;
        cr_assert(bson_iter_init(&b, &reply) && bson_iter_find_descendant(&b, "cursor.nextBatch", &b));
        bson_iter_recurse(&b, &el);
        while (bson_iter_next(&el))
            seen++;
        cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.id", &it));
        id = bson_iter_as_int64(&it);
        bson_destroy(&reply);
    }
    cr_assert_eq(seen, 250);
    mf_db_close(db);
}

/*
 * Two engines in one process, each with its own TTL monitor and parameters
 * (no process globals): A expires its due documents, B (its monitor
 * disabled by its own setParameter) keeps them, and A's setting never
 * reaches B.
 */
Test(api, two_engines_expire_their_own_data)
{
    char da[64], dbb[64];
    fresh_dir(da, sizeof(da));
    fresh_dir(dbb, sizeof(dbb));
    mf_db *a = open_db(da, NULL);
    mf_db *b = open_db(dbb, "{\"setParameter\": {\"ttlMonitorEnabled\": false}}");
    char json[512];
    int64_t past = now_ms() - 60000;
    for (int i = 0; i < 2; i++) {
        mf_db *db = i == 0 ? a : b;
        ok_json(db, "t", "{\"createIndexes\": \"s\", \"indexes\": [{\"key\": {\"at\": 1}, \"name\": \"at_1\", "
                         "\"expireAfterSeconds\": 0}]}");
        snprintf(json, sizeof(json),
                 "{\"insert\": \"s\", \"documents\": [{\"at\": {\"$date\": {\"$numberLong\": \"%lld\"}}}, "
                 "{\"at\": {\"$date\": {\"$numberLong\": \"%lld\"}}}, {\"at\": \"not a date\"}]}",
                 (long long)past, (long long)past);
        ok_json(db, "t", json);
    }
    /* A's monitor wakes at the deadline (precise expiry); poll for at most 10 s. */
    int64_t until = now_ms() + 10000;
    while (count_docs(a, "t", "s", NULL) != 1 && now_ms() < until)
        usleep(20000);
    cr_assert_eq(count_docs(a, "t", "s", NULL), 1, "A expired its two due documents");
    cr_assert_eq(count_docs(b, "t", "s", NULL), 3, "B, monitor disabled, kept its documents");

    bson_t reply;
    bson_iter_t it;
    cr_assert_eq(run_json(a, "admin", "{\"getParameter\": 1, \"ttlMonitorEnabled\": 1}", &reply), 0);
    cr_assert(bson_iter_init_find(&it, &reply, "ttlMonitorEnabled") && bson_iter_bool(&it));
    bson_destroy(&reply);
    cr_assert_eq(run_json(a, "admin", "{\"serverStatus\": 1}", &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "metrics.ttl.deletedDocuments", &it));
    cr_assert_eq(bson_iter_as_int64(&it), 2, "A counted its own deletions");
    bson_destroy(&reply);
    cr_assert_eq(run_json(b, "admin", "{\"serverStatus\": 1}", &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "metrics.ttl.deletedDocuments", &it));
    cr_assert_eq(bson_iter_as_int64(&it), 0, "B deleted nothing");
    bson_destroy(&reply);

    /* Turning B's monitor on expires B's documents too. */
    ok_json(b, "admin", "{\"setParameter\": 1, \"ttlMonitorEnabled\": true}");
    until = now_ms() + 10000;
    while (count_docs(b, "t", "s", NULL) != 1 && now_ms() < until)
        usleep(20000);
    cr_assert_eq(count_docs(b, "t", "s", NULL), 1);
    mf_db_close(a);
    mf_db_close(b);
    rm_dir(da);
    rm_dir(dbb);
}

/* ---------- interruption: killOp and maxTimeMS stop a running query ---------- */

typedef struct slow_query {
    mf_db *db;
    int code;
} slow_query_t;

/* A collection scan whose filter never matches: long enough to be killed. */
static void *
run_slow_query(void *arg)
{
    slow_query_t *q = arg;
    bson_t reply;
    q->code = run_json(q->db, "t", "{\"find\": \"big\", \"filter\": {\"$expr\": {\"$eq\": [{\"$strLenCP\": "
                                   "{\"$concat\": [\"$s\", \"$s\", \"$s\", \"$s\"]}}, -1]}}}",
                       &reply);
    bson_destroy(&reply);
    return NULL;
}

static void
fill_big(mf_db *db, int ndocs)
{
    for (int base = 0; base < ndocs; base += 1000) {
        bson_t *ins = bson_new(), docs, d;
        BSON_APPEND_UTF8(ins, "insert", "big");
        BSON_APPEND_ARRAY_BEGIN(ins, "documents", &docs);
        for (int i = 0; i < 1000; i++) {
            char k[16];
            snprintf(k, sizeof(k), "%d", i);
            BSON_APPEND_DOCUMENT_BEGIN(&docs, k, &d);
            BSON_APPEND_INT32(&d, "_id", base + i);
            BSON_APPEND_UTF8(&d, "s", "some text to concatenate a few times over");
            bson_append_document_end(&docs, &d);
        }
        bson_append_array_end(ins, &docs);
        bson_t reply;
        cr_assert_eq(mf_db_command(db, "t", ins, &reply), 0);
        bson_destroy(&reply);
        bson_destroy(ins);
    }
}

/* The opid of the running find on t.big, or 0. */
static int64_t
find_opid(mf_db *db)
{
    bson_t reply;
    bson_iter_t it, arr, op;
    int64_t opid = 0;
    cr_assert_eq(run_json(db, "admin", "{\"currentOp\": 1, \"ns\": \"t.big\"}", &reply), 0);
    if (bson_iter_init_find(&it, &reply, "inprog") && bson_iter_recurse(&it, &arr)) {
        while (bson_iter_next(&arr)) {
            bson_iter_recurse(&arr, &op);
            if (bson_iter_find(&op, "opid"))
                opid = bson_iter_as_int64(&op);
        }
    }
    bson_destroy(&reply);
    return opid;
}

Test(api, killop_interrupts_a_running_find, .timeout = 120)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    fill_big(db, 200000);
    slow_query_t q = {db, -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, run_slow_query, &q), 0);
    int64_t opid = 0, until = now_ms() + 20000;
    while ((opid = find_opid(db)) == 0 && now_ms() < until)
        usleep(1000);
    cr_assert_neq(opid, 0, "the find shows in currentOp");
    char json[128];
    snprintf(json, sizeof(json), "{\"killOp\": 1, \"op\": %lld}", (long long)opid);
    ok_json(db, "admin", json);
    pthread_join(th, NULL);
    cr_assert_eq(q.code, 11601, "a killed find fails with 11601 Interrupted, got %d", q.code);
    mf_db_close(db);
}

Test(api, max_time_ms_stops_a_long_find)
{
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    fill_big(db, 50000);
    bson_t reply;
    int code = run_json(db, "t", "{\"find\": \"big\", \"maxTimeMS\": 1, \"filter\": {\"$expr\": {\"$eq\": "
                                  "[{\"$strLenCP\": {\"$concat\": [\"$s\", \"$s\", \"$s\"]}}, -1]}}}",
                        &reply);
    bson_destroy(&reply);
    cr_assert_eq(code, 50, "MaxTimeMSExpired, got %d", code);
    mf_db_close(db);
}

/*
 * Found in review: a thread that opened and closed more databases than it
 * has session slots must reuse a slot, not open a new WiredTiger session for
 * every call (which ran out of sessions and aborted).
 */
Test(api, reopening_many_databases_on_one_thread_reuses_sessions, .timeout = 120)
{
    for (int round = 0; round < 12; round++) {
        mf_db *db = open_db(NULL, "{\"inMemory\": true}");
        ok_json(db, "t", "{\"insert\": \"c\", \"documents\": [{\"a\": 1}]}");
        mf_db_close(db);
    }
    mf_db *db = open_db(NULL, "{\"inMemory\": true}");
    for (int i = 0; i < 3000; i++)
        ok_json(db, "t", "{\"insert\": \"c\", \"documents\": [{\"a\": 1}]}");
    cr_assert_eq(count_docs(db, "t", "c", NULL), 3000);
    mf_db_close(db);
}
