/*
 * test_cmd_noclient.c: every command is safe with no client (client == NULL),
 * the way an embedding application calls mf_cmd_run without a connection.
 *
 * Runs each row of every command table against a real engine in a temporary
 * directory, in the admin and a user database, with a few argument shapes;
 * the reply must always carry ok (a crash or sanitizer report fails the
 * test). hello and whatsmyuri, which read connection state, are checked
 * field by field.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"

static mf_engine_t *eng;
static char dir[] = "/tmp/mf-noclient-XXXXXX";

static void
setup(void)
{
    mf_error_t err;
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(mf_engine_open(&(mf_engine_opts_t){.dbpath = dir}, &eng, &err), 0, "mf_engine_open: %s", err.msg);
}

static void
teardown(void)
{
    char cmd[256];
    mf_engine_close(eng);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Runs json as a command on db with no client; returns the reply (caller destroys). */
static bson_t *
run(const char *db, const char *json)
{
    bson_error_t berr;
    bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(cmd, "bad test JSON %s: %s", json, berr.message);
    bson_t *reply = bson_new();
    mf_cmd_run(eng, NULL, db, cmd, NULL, 0, false, reply);
    bson_destroy(cmd);
    return reply;
}

TestSuite(noclient, .init = setup, .fini = teardown, .timeout = 120);

Test(noclient, hello_without_client)
{
    bson_iter_t it;
    bson_t *r = run("admin", "{\"hello\": 1, \"helloOk\": true}");
    cr_assert(bson_iter_init_find(&it, r, "ok") && bson_iter_as_double(&it) == 1.0, "hello ok: %s",
              bson_as_relaxed_extended_json(r, NULL));
    cr_assert(bson_iter_init_find(&it, r, "isWritablePrimary") && bson_iter_as_bool(&it));
    cr_assert(bson_iter_init_find(&it, r, "helloOk") && bson_iter_as_bool(&it), "helloOk echoed");
    cr_assert(!bson_has_field(r, "connectionId"), "no connection, no connectionId");
    bson_destroy(r);
    r = run("test", "{\"isMaster\": 1}");
    cr_assert(bson_iter_init_find(&it, r, "ismaster") && bson_iter_as_bool(&it));
    cr_assert(!bson_has_field(r, "helloOk"));
    bson_destroy(r);
}

Test(noclient, whatsmyuri_without_client)
{
    bson_iter_t it;
    bson_t *r = run("admin", "{\"whatsmyuri\": 1}");
    cr_assert(bson_iter_init_find(&it, r, "ok") && bson_iter_as_double(&it) == 1.0);
    cr_assert(bson_iter_init_find(&it, r, "you") && BSON_ITER_HOLDS_UTF8(&it));
    cr_assert_str_eq(bson_iter_utf8(&it, NULL), "");
    bson_destroy(r);
}

/* Every command, with argument shapes that reach past argument checks where they can. */
Test(noclient, every_command)
{
    const mf_cmd_def_t *tables[] = {mf_cmds_admin, mf_cmds_crud, mf_cmds_coll, mf_cmds_collmod, mf_cmds_misc};
    const char *shapes[] = {
        "{\"%s\": 1}",
        "{\"%s\": \"c\"}",
        "{\"%s\": \"c\", \"documents\": [{\"_id\": 1}], \"filter\": {}, \"pipeline\": [], \"cursor\": {}, "
        "\"query\": {}, \"key\": \"_id\", \"deletes\": [{\"q\": {}, \"limit\": 0}], "
        "\"updates\": [{\"q\": {}, \"u\": {\"$set\": {\"a\": 1}}}], \"indexes\": [{\"key\": {\"a\": 1}, \"name\": \"a_1\"}], "
        "\"index\": \"a_1\", \"update\": {\"$set\": {\"b\": 1}}, \"remove\": false}",
    };
    const char *dbs[] = {"test", "admin"};
    int ran = 0;

    /* Some data so reads and cursors have something to return. */
    bson_destroy(run("test", "{\"insert\": \"c\", \"documents\": [{\"_id\": 0, \"a\": 0}, {\"_id\": 2, \"a\": 2}]}"));
    for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (const mf_cmd_def_t *d = tables[t]; d->name != NULL; d++) {
            /* Tearing databases down mid-loop is covered elsewhere; keep the data. */
            if (strcmp(d->name, "dropDatabase") == 0)
                continue;
            for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
                for (size_t b = 0; b < sizeof(dbs) / sizeof(dbs[0]); b++) {
                    char json[1024];
                    bson_iter_t it;
                    snprintf(json, sizeof(json), shapes[s], d->name);
                    bson_t *r = run(dbs[b], json);
                    cr_assert(bson_iter_init_find(&it, r, "ok"), "%s on %s: reply without ok: %s", json, dbs[b],
                              bson_as_relaxed_extended_json(r, NULL));
                    bson_destroy(r);
                    ran++;
                }
            }
        }
    }
    cr_assert_gt(ran, 100, "ran %d commands", ran);
}
