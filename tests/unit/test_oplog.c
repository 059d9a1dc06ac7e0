/*
 * test_oplog.c: the oplog observer and applier (src/repl/oplog.h), socket-free.
 *
 * Two in-memory engines in one process: engine A has an oplog whose sink
 * keeps every entry; a workload on A (create with options, indexes built and
 * dropped, insertMany, an update, a delete, an implicit create, a drop,
 * collMod, a rename) is applied to engine B, which must then hold the same
 * collections, options, documents and indexes; applying every entry a second
 * time changes nothing (idempotent). A write that fails (a duplicate key)
 * hands no entry.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "mayfly.h"
#include "repl/oplog.h"

/* The sink's store: every entry A committed, in order. */
typedef struct {
    pthread_mutex_t mu;
    bson_t **entries;
    size_t n;
} store_t;

static void
keep_entry(void *arg, const bson_t *entry)
{
    store_t *s = arg;
    pthread_mutex_lock(&s->mu);
    s->entries = realloc(s->entries, (s->n + 1) * sizeof(*s->entries));
    s->entries[s->n++] = bson_copy(entry);
    pthread_mutex_unlock(&s->mu);
}

static mf_db *
open_mem(void)
{
    mf_db *db = NULL;
    mf_db_error err = {0};
    bson_t *cfg = BCON_NEW("inMemory", BCON_BOOL(true));
    int rc = mf_db_open(NULL, cfg, &db, &err);
    bson_destroy(cfg);
    cr_assert_eq(rc, 0, "mf_db_open: %d %s", err.code, err.message);
    return db;
}

/* Runs a command given as JSON; returns its code, the reply in *reply. */
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

static void
ok_json(mf_db *db, const char *json)
{
    bson_t reply;
    bson_iter_t it;
    int code = run_json(db, "app", json, &reply);
    char *s = bson_as_relaxed_extended_json(&reply, NULL);
    cr_assert_eq(code, 0, "%s failed: %s", json, s);
    cr_assert_not(bson_iter_init_find(&it, &reply, "writeErrors"), "%s: %s", json, s);
    bson_free(s);
    bson_destroy(&reply);
}

/* Appends reply's cursor.firstBatch to out under key (the batches here are small). */
static void
append_batch(mf_db *db, const char *json, bson_t *out, const char *key)
{
    bson_t reply;
    bson_iter_t it;
    cr_assert_eq(run_json(db, "app", json, &reply), 0, "%s failed", json);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.firstBatch", &it));
    bson_append_value(out, key, -1, bson_iter_value(&it));
    bson_destroy(&reply);
}

/*
 * Everything of database app that must match between members, as JSON:
 * per collection (by name) its type, options, documents by _id and indexes.
 * Collection UUIDs are left out (each member has its own).
 */
static char *
snapshot(mf_db *db)
{
    bson_t reply, out, colls;
    bson_iter_t it, el;
    char json[256];

    cr_assert_eq(run_json(db, "app", "{\"listCollections\": 1, \"nameOnly\": false}", &reply), 0);
    cr_assert(bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.firstBatch", &it));
    /* Names sorted, so the order of listCollections does not matter. */
    char *names[32];
    int n = 0;
    bson_iter_recurse(&it, &el);
    while (bson_iter_next(&el)) {
        bson_iter_t f;
        cr_assert(n < 32);
        bson_iter_recurse(&el, &f);
        cr_assert(bson_iter_find(&f, "name"));
        names[n++] = strdup(bson_iter_utf8(&f, NULL));
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    bson_init(&out);
    BSON_APPEND_DOCUMENT_BEGIN(&out, "collections", &colls);
    for (int i = 0; i < n; i++) {
        bson_t c;
        BSON_APPEND_DOCUMENT_BEGIN(&colls, names[i], &c);
        bson_iter_recurse(&it, &el);
        while (bson_iter_next(&el)) {
            bson_iter_t f;
            bson_iter_recurse(&el, &f);
            bson_iter_find(&f, "name");
            if (strcmp(bson_iter_utf8(&f, NULL), names[i]) != 0)
                continue;
            bson_iter_recurse(&el, &f);
            while (bson_iter_next(&f)) {
                if (strcmp(bson_iter_key(&f), "type") == 0 || strcmp(bson_iter_key(&f), "options") == 0)
                    bson_append_value(&c, bson_iter_key(&f), -1, bson_iter_value(&f));
            }
        }
        snprintf(json, sizeof(json), "{\"find\": \"%s\", \"sort\": {\"_id\": 1}, \"batchSize\": 1000}", names[i]);
        append_batch(db, json, &c, "docs");
        snprintf(json, sizeof(json), "{\"listIndexes\": \"%s\"}", names[i]);
        append_batch(db, json, &c, "indexes");
        bson_append_document_end(&colls, &c);
        free(names[i]);
    }
    bson_append_document_end(&out, &colls);
    bson_destroy(&reply);
    char *s = bson_as_canonical_extended_json(&out, NULL);
    bson_destroy(&out);
    return s;
}

static void
apply_all(mf_db *b, store_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        mf_error_t err = {0};
        char *j = bson_as_relaxed_extended_json(s->entries[i], NULL);
        cr_assert_eq(mf_oplog_apply(mf_db_engine(b), s->entries[i], &err), 0, "apply %s: %d %s", j, err.code,
                     err.msg);
        bson_free(j);
    }
}

/* The number of ops of entry, and the op letter of its first in *first. */
static int
count_ops(const bson_t *entry, const char **first)
{
    bson_iter_t it, el;
    int n = 0;
    cr_assert(bson_iter_init_find(&it, entry, "ops") && bson_iter_recurse(&it, &el));
    while (bson_iter_next(&el)) {
        if (n++ == 0) {
            bson_iter_t f;
            bson_iter_recurse(&el, &f);
            cr_assert(bson_iter_find(&f, "op"));
            *first = bson_iter_utf8(&f, NULL);
        }
    }
    return n;
}

Test(oplog, replays_a_workload_on_another_engine_idempotently)
{
    store_t store = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mf_db *a = open_mem(), *b = open_mem();
    mf_oplog_t *log = NULL;
    mf_error_t err = {0};
    cr_assert_eq(mf_oplog_attach(mf_db_engine(a), keep_entry, &store, &log, &err), 0, "%s", err.msg);

    ok_json(a, "{\"create\": \"people\", \"validator\": {\"age\": {\"$type\": \"number\"}}}");
    ok_json(a, "{\"createIndexes\": \"people\", \"indexes\": [{\"key\": {\"name\": 1}, \"name\": \"name_1\", "
               "\"unique\": true}, {\"key\": {\"age\": -1}, \"name\": \"age_-1\"}]}");
    size_t before_many = store.n;
    ok_json(a, "{\"insert\": \"people\", \"documents\": [{\"_id\": 1, \"name\": \"ann\", \"age\": 40}, "
               "{\"_id\": 2, \"name\": \"bob\", \"age\": 30}, {\"_id\": 3, \"name\": \"cy\", \"age\": 20}]}");
    /* insertMany: one transaction, one entry of three inserts. */
    cr_assert_eq(store.n, before_many + 1, "insertMany gave %zu entries", store.n - before_many);
    const char *op = NULL;
    cr_assert_eq(count_ops(store.entries[before_many], &op), 3);
    cr_assert_str_eq(op, "i");

    ok_json(a, "{\"update\": \"people\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$set\": {\"age\": 41}}}]}");
    ok_json(a, "{\"delete\": \"people\", \"deletes\": [{\"q\": {\"_id\": 2}, \"limit\": 1}]}");
    ok_json(a, "{\"dropIndexes\": \"people\", \"index\": \"age_-1\"}");
    ok_json(a, "{\"insert\": \"logs\", \"documents\": [{\"_id\": \"x\", \"msg\": \"implicit create\"}]}");
    ok_json(a, "{\"create\": \"scratch\"}");
    ok_json(a, "{\"insert\": \"scratch\", \"documents\": [{\"_id\": 1}]}");
    ok_json(a, "{\"drop\": \"scratch\"}");
    ok_json(a, "{\"collMod\": \"people\", \"validationLevel\": \"moderate\", \"comment\": \"not replicated\"}");
    bson_t reply;
    cr_assert_eq(run_json(a, "admin", "{\"renameCollection\": \"app.people\", \"to\": \"app.folks\"}", &reply), 0);
    bson_destroy(&reply);
    ok_json(a, "{\"update\": \"folks\", \"updates\": [{\"q\": {\"_id\": 3}, \"u\": {\"_id\": 3, \"name\": \"cyd\", "
               "\"age\": 21}}]}");

    /* A write that fails (duplicate _id, then duplicate unique name) commits nothing and hands no entry. */
    size_t before_abort = store.n;
    cr_assert_eq(run_json(a, "app", "{\"insert\": \"folks\", \"documents\": [{\"_id\": 1, \"name\": \"dup\"}]}",
                          &reply), 0);
    bson_destroy(&reply);
    cr_assert_eq(run_json(a, "app", "{\"insert\": \"folks\", \"documents\": [{\"_id\": 9, \"name\": \"ann\"}]}",
                          &reply), 0);
    bson_destroy(&reply);
    cr_assert_eq(store.n, before_abort, "a failed write handed %zu entries", store.n - before_abort);

    char *want = snapshot(a);
    cr_assert(strstr(want, "\"folks\"") != NULL && strstr(want, "\"logs\"") != NULL, "%s", want);
    cr_assert(strstr(want, "moderate") != NULL && strstr(want, "cyd") != NULL, "%s", want);

    apply_all(b, &store);
    char *got = snapshot(b);
    cr_assert_str_eq(got, want);
    bson_free(got);

    /* Again, from the start: nothing changes. */
    apply_all(b, &store);
    got = snapshot(b);
    cr_assert_str_eq(got, want);
    bson_free(got);
    bson_free(want);

    mf_db_close(a);
    mf_db_close(b);
    mf_oplog_free(log);
    for (size_t i = 0; i < store.n; i++)
        bson_destroy(store.entries[i]);
    free(store.entries);
}

Test(oplog, entries_use_mongodb_field_names)
{
    store_t store = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mf_db *a = open_mem();
    mf_oplog_t *log = NULL;
    mf_error_t err = {0};
    cr_assert_eq(mf_oplog_attach(mf_db_engine(a), keep_entry, &store, &log, &err), 0, "%s", err.msg);

    ok_json(a, "{\"insert\": \"c\", \"documents\": [{\"_id\": 7, \"v\": 1}]}");
    ok_json(a, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 7}, \"u\": {\"$inc\": {\"v\": 1}}}]}");
    ok_json(a, "{\"delete\": \"c\", \"deletes\": [{\"q\": {\"_id\": 7}, \"limit\": 1}]}");
    cr_assert_eq(store.n, 4, "entries: %zu", store.n); /* create (implicit), insert, update, delete */

    const char *want[] = {
        "{ \"ops\" : [ { \"op\" : \"c\", \"ns\" : \"app.$cmd\", \"o\" : { \"create\" : \"c\" } } ] }",
        "{ \"ops\" : [ { \"op\" : \"i\", \"ns\" : \"app.c\", \"o\" : { \"_id\" : 7, \"v\" : 1 } } ] }",
        "{ \"ops\" : [ { \"op\" : \"u\", \"ns\" : \"app.c\", \"o\" : { \"_id\" : 7, \"v\" : 2 }, \"o2\" : { \"_id\" : 7 }, \"diff\" : { \"u\" : { \"v\" : 2 }, \"r\" : [  ] } } ] }",
        "{ \"ops\" : [ { \"op\" : \"d\", \"ns\" : \"app.c\", \"o\" : { \"_id\" : 7 } } ] }",
    };
    for (size_t i = 0; i < 4; i++) {
        bson_iter_t it;
        cr_assert(bson_iter_init(&it, store.entries[i]) && bson_iter_find_descendant(&it, "ops.0.ui", &it));
        cr_assert(BSON_ITER_HOLDS_BINARY(&it));
        /* Compare without ui (random). */
        bson_t ops, copy;
        bson_iter_t el;
        bson_init(&copy);
        BSON_APPEND_ARRAY_BEGIN(&copy, "ops", &ops);
        cr_assert(bson_iter_init(&it, store.entries[i]) && bson_iter_find_descendant(&it, "ops.0", &el));
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&el, &len, &data);
        bson_t one, stripped;
        bson_init_static(&one, data, len);
        bson_init(&stripped);
        bson_copy_to_excluding_noinit(&one, &stripped, "ui", NULL);
        BSON_APPEND_DOCUMENT(&ops, "0", &stripped);
        bson_append_array_end(&copy, &ops);
        char *s = bson_as_relaxed_extended_json(&copy, NULL);
        cr_assert_str_eq(s, want[i]);
        bson_free(s);
        bson_destroy(&stripped);
        bson_destroy(&copy);
    }

    mf_db_close(a);
    mf_oplog_free(log);
    for (size_t i = 0; i < store.n; i++)
        bson_destroy(store.entries[i]);
    free(store.entries);
}

/* The "diff" field of the update at store.entries[i] as relaxed JSON, or "none" (caller frees). */
static char *
diff_json(const store_t *store, size_t i)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, store->entries[i]) || !bson_iter_find_descendant(&it, "ops.0.diff", &it))
        return bson_strdup("none");
    const uint8_t *data;
    uint32_t len;
    bson_t d;
    bson_iter_document(&it, &len, &data);
    bson_init_static(&d, data, len);
    return bson_as_relaxed_extended_json(&d, NULL);
}

Test(oplog, updates_carry_a_diff_and_replacements_none)
{
    store_t store = {.mu = PTHREAD_MUTEX_INITIALIZER};
    mf_db *a = open_mem();
    mf_oplog_t *log = NULL;
    mf_error_t err = {0};
    cr_assert_eq(mf_oplog_attach(mf_db_engine(a), keep_entry, &store, &log, &err), 0, "%s", err.msg);

    ok_json(a, "{\"insert\": \"c\", \"documents\": [{\"_id\": 1, \"a\": 1, \"s\": {\"x\": 1, \"y\": \"k\"}, \"arr\": [1, 2], \"gone\": true}]}");
    ok_json(a, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"$set\": {\"s.x\": 2, \"a\": 1.0, \"arr.1\": 3}, \"$unset\": {\"gone\": 1, \"s.y\": 1}}}]}");
    ok_json(a, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": {\"b\": 1}}]}");
    ok_json(a, "{\"update\": \"c\", \"updates\": [{\"q\": {\"_id\": 1}, \"u\": [{\"$set\": {\"c\": \"$b\"}}]}]}");
    cr_assert_eq(store.n, 5, "entries: %zu", store.n); /* create, insert, three updates */

    const char *want[] = {
        /* a: 1 to 1.0 is a change of type; s compared field by field; the array element by index. */
        "{ \"u\" : { \"a\" : 1.0, \"s.x\" : 2, \"arr.1\" : 3 }, \"r\" : [ \"s.y\", \"gone\" ] }",
        "none",
        "{ \"u\" : { \"c\" : 1 }, \"r\" : [  ] }",
    };
    for (size_t i = 0; i < 3; i++) {
        char *s = diff_json(&store, 2 + i);
        cr_assert_str_eq(s, want[i], "update %zu", i);
        bson_free(s);
    }

    mf_db_close(a);
    mf_oplog_free(log);
    for (size_t i = 0; i < store.n; i++)
        bson_destroy(store.entries[i]);
    free(store.entries);
}
