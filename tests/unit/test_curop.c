/*
 * test_curop.c: the registry's client connections (common/curop.h), behind
 * currentOp's idle connections (db.currentOp(true), $currentOp
 * {idleConnections: true}). A connection is listed while no operation
 * runs for it, with what its handshake and its last command's user left;
 * an operation given the connection makes it active until it ends; a
 * closed connection is gone. Leak detection checks the copies it keeps.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/curop.h"

#define MAX_DOCS 8

typedef struct seen {
    bson_t docs[MAX_DOCS];
    int n;
} seen_t;

static void
keep(void *arg, const bson_t *doc)
{
    seen_t *s = arg;
    cr_assert_lt(s->n, MAX_DOCS);
    bson_copy_to(doc, &s->docs[s->n++]);
}

static void
seen_free(seen_t *s)
{
    for (int i = 0; i < s->n; i++)
        bson_destroy(&s->docs[i]);
    s->n = 0;
}

static const char *
str_of(const bson_t *doc, const char *path)
{
    bson_iter_t it, f;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &f) || !BSON_ITER_HOLDS_UTF8(&f))
        return NULL;
    return bson_iter_utf8(&f, NULL);
}

Test(curop_conns, an_idle_connection_is_listed_with_its_handshake_until_it_closes)
{
    mf_curops_t *reg = mf_curops_new();
    seen_t s = {0};
    bson_t *meta = BCON_NEW("driver", "{", "name", "nodejs", "version", "7.0", "}", "application", "{", "name",
                            "billing", "}");

    mf_curop_conn_t *c = mf_curops_conn_open(reg, 7, "127.0.0.1:5000");
    mf_curops_report_idle_conns(reg, "h:1", keep, &s);
    cr_assert_eq(s.n, 1, "a new connection is idle");
    cr_assert_str_eq(str_of(&s.docs[0], "desc"), "conn7");
    cr_assert_str_eq(str_of(&s.docs[0], "client"), "127.0.0.1:5000");
    cr_assert_str_eq(str_of(&s.docs[0], "host"), "h:1");
    cr_assert_null(str_of(&s.docs[0], "appName"), "no handshake yet");
    seen_free(&s);

    mf_curop_conn_hello(c, "billing", meta);
    mf_curops_report_idle_conns(reg, NULL, keep, &s);
    cr_assert_eq(s.n, 1);
    cr_assert_str_eq(str_of(&s.docs[0], "appName"), "billing");
    cr_assert_str_eq(str_of(&s.docs[0], "clientMetadata.application.name"), "billing");
    cr_assert_null(str_of(&s.docs[0], "host"), "no host given, none shown");
    seen_free(&s);

    mf_curop_conn_close(c);
    mf_curops_report_idle_conns(reg, NULL, keep, &s);
    cr_assert_eq(s.n, 0, "a closed connection is gone");
    bson_destroy(meta);
    mf_curops_free(reg);
}

Test(curop_conns, an_operation_makes_its_connection_active_and_records_its_user)
{
    mf_curops_t *reg = mf_curops_new();
    seen_t s = {0};
    mf_curop_conn_t *a = mf_curops_conn_open(reg, 1, "127.0.0.1:1");
    mf_curop_conn_t *b = mf_curops_conn_open(reg, 2, "127.0.0.1:2");
    char user[16];
    strcpy(user, "alice");

    mf_curop_t *op = mf_curop_begin(reg, "query", "db.c", "conn1", NULL, 1);
    mf_curop_client_t who = {.remote = "127.0.0.1:1", .user = user, .user_db = "admin", .conn = a};
    mf_curop_set_client(op, &who);
    mf_curops_report_idle_conns(reg, NULL, keep, &s);
    cr_assert_eq(s.n, 1, "only the connection without an operation is idle");
    cr_assert_str_eq(str_of(&s.docs[0], "desc"), "conn2");
    seen_free(&s);

    mf_curop_end(op);
    strcpy(user, "mallory"); /* the connection's auth state changes after its command: the listing kept a copy */
    mf_curops_report_idle_conns(reg, NULL, keep, &s);
    cr_assert_eq(s.n, 2, "both idle once the operation ended");
    int ia = strcmp(str_of(&s.docs[0], "desc"), "conn1") == 0 ? 0 : 1;
    cr_assert_str_eq(str_of(&s.docs[ia], "effectiveUsers.0.user"), "alice");
    cr_assert_str_eq(str_of(&s.docs[ia], "effectiveUsers.0.db"), "admin");
    cr_assert_null(str_of(&s.docs[1 - ia], "effectiveUsers.0.user"), "never authenticated");
    seen_free(&s);

    /* A later command without a user (a logout) drops it. */
    op = mf_curop_begin(reg, "command", "admin.$cmd", "conn1", NULL, 1);
    mf_curop_client_t anon = {.remote = "127.0.0.1:1", .conn = a};
    mf_curop_set_client(op, &anon);
    mf_curop_end(op);
    mf_curops_report_idle_conns(reg, NULL, keep, &s);
    cr_assert_eq(s.n, 2);
    cr_assert_null(str_of(&s.docs[0], "effectiveUsers.0.user"));
    cr_assert_null(str_of(&s.docs[1], "effectiveUsers.0.user"));
    seen_free(&s);

    mf_curop_conn_close(a);
    mf_curop_conn_close(b);
    mf_curops_free(reg);
}

/* An active operation keeps its own copy of its user: a logout or SASL step rewriting the connection's changes neither its listing nor killOp's ownership check. */
Test(curop_kill, an_active_operation_keeps_its_user_when_the_connection_changes_its_own)
{
    mf_curops_t *reg = mf_curops_new();
    seen_t s = {0};
    char user[16], db[16];
    strcpy(user, "alice");
    strcpy(db, "admin");
    mf_curop_t *op = mf_curop_begin(reg, "query", "db.c", "conn1", NULL, 1);
    mf_curop_client_t who = {.remote = "127.0.0.1:1", .user = user, .user_db = db};
    mf_curop_set_client(op, &who);
    strcpy(user, "mallory");
    strcpy(db, "other");
    mf_curops_report_each(reg, NULL, keep, &s);
    cr_assert_eq(s.n, 1);
    cr_assert_str_eq(str_of(&s.docs[0], "effectiveUsers.0.user"), "alice");
    cr_assert_str_eq(str_of(&s.docs[0], "effectiveUsers.0.db"), "admin");
    seen_free(&s);
    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(op), "mallory@other"), -1);
    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(op), "alice@admin"), 1);
    mf_curop_end(op);
    mf_curops_free(reg);
}

/* killOp without the killop privilege: only the operations its own login runs. */
Test(curop_kill, a_caller_kills_only_operations_of_its_own_user)
{
    mf_curops_t *reg = mf_curops_new();
    mf_error_t err = {0};
    mf_curop_t *mine = mf_curop_begin(reg, "query", "db.c", "conn1", NULL, 1);
    mf_curop_t *theirs = mf_curop_begin(reg, "query", "db.c", "conn2", NULL, 2);
    mf_curop_t *bg = mf_curop_begin(reg, "remove", "db.c", "TTLMonitor", NULL, 0);
    mf_curop_t *anon = mf_curop_begin(reg, "query", "db.c", "conn3", NULL, 3);
    mf_curop_client_t me = {.remote = "127.0.0.1:1", .user = "alice", .user_db = "admin"};
    mf_curop_client_t other = {.remote = "127.0.0.1:2", .user = "alice", .user_db = "appdb"}; /* same name, other db */
    mf_curop_client_t nobody = {.remote = "127.0.0.1:3"};
    mf_curop_set_client(mine, &me);
    mf_curop_set_client(theirs, &other);
    mf_curop_set_client(anon, &nobody);

    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(theirs), "alice@admin"), -1, "another user's");
    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(bg), "alice@admin"), -1, "a background operation");
    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(anon), "alice@admin"), -1, "an unauthenticated connection's");
    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(mine), "alice@adminx"), -1, "a longer db is not a match");
    cr_assert_eq(mf_curops_kill_as(reg, 999999, "alice@admin"), 0, "no such operation");
    cr_assert_not(mf_curop_killed(theirs) || mf_curop_killed(bg) || mf_curop_killed(anon) || mf_curop_killed(mine));

    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(mine), "alice@admin"), 1);
    cr_assert(mf_curop_killed(mine));
    cr_assert_eq(mf_curop_check(mine, &err), -1);
    cr_assert_eq(err.code, MF_E_Interrupted);
    /* Without an owner (the killop privilege), anyone's. */
    cr_assert_eq(mf_curops_kill_as(reg, mf_curop_opid(bg), NULL), 1);
    cr_assert(mf_curop_killed(bg));
    cr_assert(mf_curops_kill(reg, mf_curop_opid(theirs)));

    mf_curop_end(mine);
    mf_curop_end(theirs);
    mf_curop_end(bg);
    mf_curop_end(anon);
    mf_curops_free(reg);
}

/* Opids are mongod's 32-bit ones: after 2^31-1 they start again at 1, so killOp (an int32) reaches each. */
Test(curop_kill, opids_wrap_within_31_bits_and_stay_killable)
{
    mf_curops_t *reg = mf_curops_new();
    mf_curops_seed_opid(reg, INT32_MAX);
    mf_curop_t *last = mf_curop_begin(reg, "query", "db.c", "conn1", NULL, 1);
    mf_curop_t *first = mf_curop_begin(reg, "query", "db.c", "conn1", NULL, 1);
    cr_assert_eq(mf_curop_opid(last), INT32_MAX);
    cr_assert_eq(mf_curop_opid(first), 1);
    cr_assert(mf_curops_kill(reg, 1));
    cr_assert(mf_curop_killed(first) && !mf_curop_killed(last));
    mf_curop_end(last);
    mf_curop_end(first);
    mf_curops_free(reg);
}

/*
 * A command past the limit is shown as {$truncated: <its JSON's first max
 * characters>}, built from a bounded copy of its start (a 16 MB insert is
 * not turned whole into JSON): the text is the same as the whole command's
 * JSON cut there, for strings and binaries larger than the limit, nested
 * documents and arrays, and many small fields.
 */
static void
check_shown(const bson_t *cmd, size_t max)
{
    char *full = bson_as_relaxed_extended_json(cmd, NULL);
    bson_t *shown = mf_command_shown(cmd, max);
    const char *t = str_of(shown, "$truncated");
    cr_assert_not_null(t);
    size_t n = strlen(full) < max ? strlen(full) : max;
    while (n > 0 && ((unsigned char)full[n] & 0xC0) == 0x80)
        n--;
    cr_assert_eq(strlen(t), n, "shown %zu characters, want %zu", strlen(t), n);
    cr_assert(strncmp(t, full, n) == 0, "shown %s\nwant the start of %.*s", t, (int)n, full);
    bson_destroy(shown);
    bson_free(full);
}

Test(curop_shown, a_large_command_shows_the_start_of_its_json_from_a_bounded_copy)
{
    static const size_t maxes[] = {10, 1024, 4000};
    size_t big = 3 * 1024 * 1024;
    char *s = malloc(big + 1);
    uint8_t *b = malloc(big);
    for (size_t i = 0; i < big; i++) {
        s[i] = (char)('a' + i % 26);
        b[i] = (uint8_t)(i * 7);
    }
    s[big] = '\0';
    for (size_t i = 100; i < 3000; i += 97)
        s[i] = '"'; /* escaped in JSON: the shown text runs past the cut of the raw bytes */
    memcpy(s + 1020, "\xc3\xa9\xc3\xa9\xc3\xa9", 6); /* two-byte characters across the cut */

    /* A large binary, then a large string, in a document of an array. */
    bson_t cmd = BSON_INITIALIZER, docs, d;
    BSON_APPEND_UTF8(&cmd, "insert", "c");
    bson_append_array_begin(&cmd, "documents", -1, &docs);
    bson_append_document_begin(&docs, "0", -1, &d);
    BSON_APPEND_INT32(&d, "_id", 1);
    bson_append_binary(&d, "b", -1, BSON_SUBTYPE_BINARY, b, (uint32_t)big);
    BSON_APPEND_UTF8(&d, "s", s);
    bson_append_document_end(&docs, &d);
    bson_append_array_end(&cmd, &docs);
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++)
        check_shown(&cmd, maxes[m]);
    bson_destroy(&cmd);

    /* The string first, then the binary. */
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "insert", "c");
    BSON_APPEND_UTF8(&cmd, "s", s);
    bson_append_binary(&cmd, "b", -1, BSON_SUBTYPE_UUID, b, (uint32_t)big);
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++)
        check_shown(&cmd, maxes[m]);
    bson_destroy(&cmd);

    /* Long arrays of small numbers, whose JSON is a fifth of their BSON ("0, " for 17 bytes). */
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "find", "c");
    bson_t f, in, arr;
    bson_append_document_begin(&cmd, "filter", -1, &f);
    bson_append_document_begin(&f, "_id", -1, &in);
    bson_append_array_begin(&in, "$in", -1, &arr);
    for (int i = 0; i < 200000; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", i);
        if (i % 3 == 0)
            BSON_APPEND_INT32(&arr, k, 0);
        else if (i % 3 == 1)
            BSON_APPEND_INT64(&arr, k, 0);
        else
            BSON_APPEND_DOUBLE(&arr, k, 0.0);
    }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(&f, &in);
    bson_append_document_end(&cmd, &f);
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++)
        check_shown(&cmd, maxes[m]);
    check_shown(&cmd, 10 * 1024);
    bson_destroy(&cmd);

    /* Many small fields, nested: each is whole in the copy until it is long enough. */
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "update", "c");
    bson_append_array_begin(&cmd, "updates", -1, &docs);
    for (int i = 0; i < 2000; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", i);
        bson_append_document_begin(&docs, k, -1, &d);
        BSON_APPEND_DOUBLE(&d, "q", 1.0);
        BSON_APPEND_BOOL(&d, "multi", i % 2);
        BSON_APPEND_INT64(&d, "n", i);
        bson_append_document_end(&docs, &d);
    }
    bson_append_array_end(&cmd, &docs);
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++)
        check_shown(&cmd, maxes[m]);
    bson_destroy(&cmd);
    free(s);
    free(b);
}
