/*
 * fuzz_cmd.c: whole commands through the engine (src/cmd, and everything
 * below it), as mf_db_command runs them for the embedding API and the
 * network layer's workers run them for clients.
 *
 * Feeds (see fuzz_common.h for the two encodings): each document is one
 * command, run in order against database "fz" of one in-memory engine that
 * lives as long as the fuzzing process; after each input the engine is put
 * back as far as commands can (reset_engine: databases, users, roles, and
 * what $out or $merge left in admin and config, the profiler's settings),
 * so inputs do not pile up
 * and a finding mostly reproduces from its input alone (counters, the TTL
 * monitor's state and open cursors stay). A few commands are not
 * run because they would change the process for the inputs after them
 * rather than answer: shutdown, fsync with lock (every later write would
 * wait for fsyncUnlock), setParameter, setDefaultRWConcern, logRotate,
 * and getMore with a maxTimeMS (a tailable awaitData cursor waits that
 * long); the TTL monitor's thread runs as in the server.
 *
 * Checks: no crash, leak or undefined behaviour; every reply is a document
 * with ok; a failure ({ok: 0}) carries errmsg (a string), code (a number
 * other than 0) and codeName (a string), MongoDB's error shape (SPEC H2),
 * and mf_db_command returns that code.
 */
#include "fuzz_common.h"

#include <stdio.h>

#include "mayfly.h"

static mf_db *db;

/* At the run's end (libFuzzer exits after -max_total_time): the engine's scratch home under /tmp goes with it. */
static void
close_db(void)
{
    mf_db_close(db);
    db = NULL;
}

static bool
skipped(const bson_t *cmd)
{
    static const char *const names[] = {"shutdown", "fsyncUnlock", "setParameter", "logRotate", "setDefaultRWConcern",
                                        NULL};
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it))
        return false;
    const char *k = bson_iter_key(&it);
    for (int i = 0; names[i]; i++)
        if (strcmp(k, names[i]) == 0)
            return true;
    if (strcmp(k, "fsync") == 0 && bson_iter_init_find(&it, cmd, "lock"))
        return true;
    /* A tailable awaitData getMore waits up to its maxTimeMS: not past libFuzzer's 10 s per input. */
    if (strcmp(k, "getMore") == 0 && bson_iter_init_find(&it, cmd, "maxTimeMS"))
        return true;
    return false;
}

/* Runs cmd on database dbname, ignoring the reply. */
static void
run_quiet(const char *dbname, bson_t *cmd)
{
    bson_t reply;
    (void)mf_db_command(db, dbname, cmd, &reply);
    bson_destroy(&reply);
    bson_destroy(cmd);
}

/*
 * Puts the engine back as it was, as far as commands can: drops every
 * database but admin, local and config ($out and $merge may have written
 * to others than "fz"), every user and role, and the collections $out or
 * $merge may have made in admin and config. Rounds of 64 until none is left.
 */
static void
reset_engine(void)
{
    for (int round = 0; round < 16; round++) {
        bson_t reply, *list = BCON_NEW("listDatabases", BCON_INT32(1), "nameOnly", BCON_BOOL(true));
        bson_iter_t it, arr, one;
        char names[64][128];
        int n = 0;
        if (mf_db_command(db, "admin", list, &reply) == 0 && bson_iter_init_find(&it, &reply, "databases") &&
            bson_iter_recurse(&it, &arr)) {
            while (bson_iter_next(&arr) && n < 64) {
                if (bson_iter_recurse(&arr, &one) && bson_iter_find(&one, "name") && BSON_ITER_HOLDS_UTF8(&one) &&
                    strcmp(bson_iter_utf8(&one, NULL), "admin") != 0 && strcmp(bson_iter_utf8(&one, NULL), "local") != 0 &&
                    strcmp(bson_iter_utf8(&one, NULL), "config") != 0)
                    snprintf(names[n++], sizeof(names[0]), "%s", bson_iter_utf8(&one, NULL));
            }
        }
        bson_destroy(&reply);
        bson_destroy(list);
        for (int i = 0; i < n; i++)
            run_quiet(names[i], BCON_NEW("dropDatabase", BCON_INT32(1)));
        if (n < 64)
            break;
    }
    /* A profiling level kept for later inputs would slow every one after it. */
    run_quiet("fz", BCON_NEW("profile", BCON_INT32(0), "slowms", BCON_INT32(100), "sampleRate", BCON_DOUBLE(1.0)));
    run_quiet("fz", BCON_NEW("dropAllUsersFromDatabase", BCON_INT32(1)));
    run_quiet("fz", BCON_NEW("dropAllRolesFromDatabase", BCON_INT32(1)));
    for (int i = 0; i < 2; i++) {
        const char *dbname = i == 0 ? "admin" : "config";
        bson_t reply, *list = BCON_NEW("listCollections", BCON_INT32(1), "nameOnly", BCON_BOOL(true));
        bson_iter_t it, batch, one;
        char names[64][128];
        int n = 0;
        if (mf_db_command(db, dbname, list, &reply) == 0 && bson_iter_init(&it, &reply) &&
            bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) && bson_iter_recurse(&batch, &one)) {
            while (bson_iter_next(&one) && n < 64) {
                bson_iter_t f;
                if (bson_iter_recurse(&one, &f) && bson_iter_find(&f, "name") && BSON_ITER_HOLDS_UTF8(&f) &&
                    strncmp(bson_iter_utf8(&f, NULL), "system.", 7) != 0)
                    snprintf(names[n++], sizeof(names[0]), "%s", bson_iter_utf8(&f, NULL));
            }
        }
        bson_destroy(&reply);
        bson_destroy(list);
        for (int k = 0; k < n; k++)
            run_quiet(dbname, BCON_NEW("drop", BCON_UTF8(names[k])));
    }
}

static void
check_reply(const bson_t *cmd, const bson_t *reply, int rc)
{
    bson_iter_t it;
    FUZZ_CHECK(bson_validate(reply, BSON_VALIDATE_NONE, NULL), "reply is not valid BSON");
    FUZZ_CHECK(bson_iter_init_find(&it, reply, "ok"), "reply without ok");
    bool ok = bson_iter_as_bool(&it);
    if (ok) {
        FUZZ_CHECK(rc == 0, "ok: 1 but rc %d", rc);
        return;
    }
    char *jj = bson_as_relaxed_extended_json(cmd, NULL), *j = jj ? jj : (char *)"(not shown)";
    FUZZ_CHECK(bson_iter_init_find(&it, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it), "no errmsg for %s", j);
    FUZZ_CHECK(bson_iter_init_find(&it, reply, "codeName") && BSON_ITER_HOLDS_UTF8(&it), "no codeName for %s", j);
    FUZZ_CHECK(bson_iter_init_find(&it, reply, "code") && BSON_ITER_HOLDS_INT32(&it) && bson_iter_int32(&it) != 0,
               "no code for %s", j);
    FUZZ_CHECK(rc == bson_iter_int32(&it), "rc %d, code %d for %s", rc, bson_iter_int32(&it), j);
    bson_free(jj);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    if (db == NULL) {
        mf_db_error err;
        bson_t *cfg = BCON_NEW("inMemory", BCON_BOOL(true));
        int rc = mf_db_open(NULL, cfg, &db, &err);
        bson_destroy(cfg);
        FUZZ_CHECK(rc == 0, "mf_db_open: %s", err.message);
        atexit(close_db);
    }
    fuzz_docs_read(data, size, &d);
    for (size_t i = 0; i < d.n; i++) {
        bson_t reply;
        if (skipped(d.docs[i]))
            continue;
        int rc = mf_db_command(db, "fz", d.docs[i], &reply);
        check_reply(d.docs[i], &reply, rc);
        bson_destroy(&reply);
    }
    if (d.n > 0)
        reset_engine();
    fuzz_docs_free(&d);
    return 0;
}
