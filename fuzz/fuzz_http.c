/*
 * fuzz_http.c: the HTTP port's request handling (src/http/http_api.c,
 * mf_http_route): routing, HTTP Basic over SCRAM when access control is on,
 * the /api/ttl JSON API (its body reader, the createIndexes / collMod
 * commands it builds and runs through the command layer, the JSON it writes
 * back), /metrics and the console's files.
 *
 * Feeds: the input is the bytes a client sends on one connection. It is
 * read by the server's own reader (mf_http_reader_t, src/http/http.c:
 * Debian's http_parser, the limits of a URL over 8 KB, headers over 64 KB
 * or a body over 1 MB refusing the request, only the Authorization and
 * Content-Type headers kept, the URL split into path and query), and each
 * request's strings are then copied to exact size, so ASan sees a read past
 * their end. Each complete request (up
 * to MAX_REQUESTS pipelined on the "connection", so a POST can be followed
 * by the PATCH or GET that reads what it made; MAX_AUTH_REQUESTS with
 * access control on, where every request logs in) goes to mf_http_route.
 * Inputs over 64 KB are skipped. Two bits come from the CR / LF bytes
 * before the first request line, which the parser skips (stray line ends
 * before a request are allowed), so they choose without disturbing the
 * request: a '\n' there makes the peer remote (else it is loopback), a
 * '\r' sends the input to the engine with access control on (else to the
 * one with it off). "\r\n" gives both.
 *
 * The engines: two, opened once (LLVMFuzzerInitialize) in memory, each with
 * a scratch dbpath from mkdtemp (removed at exit), kept for the process in
 * static variables (libFuzzer never tears down; LeakSanitizer counts what a
 * global points to as reachable). One has access control off; the other
 * has it on, with three SCRAM-SHA-256 users (auth_users: root, a reader with
 * serverStatus's privilege only, a user with no role). Each gets
 * fuzz_seed.docs (seed_data), whose deleted and archived documents give
 * /metrics and GET /api/ttl what no HTTP request can make.
 *
 * State must not carry from one input to the next: a finding has to
 * reproduce from its input alone, and millions of inputs must not grow the
 * catalog without bound. So after every input that sent a POST or PATCH to
 * /api/ttl (the only requests that reach createIndexes / collMod) the
 * harness puts that engine's catalog back as it was after start-up: it drops
 * every database that was not there then, every new collection of the ones
 * that were and every new index, and collMods a start-up index whose
 * options a PATCH changed back to its recorded expireAfterSeconds and
 * archive, all through mf_cmd_run with no client. Prefixing the client's
 * database names instead would have changed the very names the server
 * validates. The TTL monitors keep running (GET /api/ttl and /metrics read
 * their snapshots); nothing is inserted after start-up, so they delete
 * nothing more.
 *
 * Checks, besides "no crash, leak or undefined behaviour":
 *   - the status is one the API answers with (200, 400, 401, 403, 404, 405),
 *     the content type is set, the body is there and body_len bytes long;
 *     405 comes with Allow, 401 with WWW-Authenticate, and only they do;
 *   - a JSON answer parses with libbson as one object (the server's JSON
 *     writer escapes whatever came from the request or from stored names)
 *     and is valid UTF-8; an error answer is {error, code, codeName} with a
 *     non-zero code and the status that code maps to (13 → 403,
 *     18 → 401, 26/27 → 404, else 400; 405 for a method /api/ttl refuses);
 *   - access control off: no 401; writes from a remote peer answer 403, and
 *     only they do;
 *   - access control on (for a request that reaches the credential check):
 *     no Basic credentials → 401; root's → neither 401 nor 403; the
 *     reader's → reads not 401/403, writes neither 401 nor 200; the no-role
 *     user's → the console's files 200, GET /api/ttl and /metrics 403,
 *     writes neither 401 nor 200;
 *   - a 200 from /metrics is Prometheus text: valid UTF-8 ending in '\n',
 *     every line a "# HELP" / "# TYPE" comment or a sample: a metric name,
 *     optional {label="value",...} (escapes \\ \" \n only), one space, a
 *     number;
 *   - a console file comes back byte for byte.
 * Open findings (fuzz/README.md) are tolerated so that fuzzing goes on past
 * them (known_repaired, basic_underflows); FUZZ_HTTP_STRICT=1 in the
 * environment reports them too. FUZZ_VERBOSE=1 prints each request's status
 * and body.
 */
#include "fuzz_common.h"

#include <ftw.h>
#include <http_parser.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <unistd.h>

#include "auth/scram.h"
#include "auth/users.h"
#include "cmd/cmd.h"
#include "common/error.h"
#include "engine/engine.h"
#include "http/http.h"

#define FUZZ_HTTP_MAX_INPUT (64 * 1024)
#define MAX_REQUESTS 4
#define MAX_AUTH_REQUESTS 2    /* each may log in: a PBKDF2 (cheapen_credential) */

/* One engine, open for the whole process (see the file comment). */
typedef struct fz_engine {
    mf_engine_t *eng;
    char dir[32];    /* its scratch dbpath */
    bson_t baseline; /* {db: {coll: {index name: {expireAfterSeconds, archive}}}} after start-up */
} fz_engine_t;

static fz_engine_t g_open; /* access control off */
static fz_engine_t g_auth; /* access control on, with the users of auth_users */
static bool g_verbose;     /* FUZZ_VERBOSE: print every request's answer */
static bool g_strict;      /* FUZZ_HTTP_STRICT: no tolerance for the open findings (known_repaired) */

/* ---------- the engines and their baselines ---------- */

/* Runs cmd (JSON) on db with no client; returns the reply (caller destroys). */
static bson_t *
run_json(mf_engine_t *eng, const char *db, const char *json)
{
    bson_error_t berr;
    bson_t *cmd = bson_new_from_json((const uint8_t *)json, -1, &berr);
    bson_t *reply = bson_new();
    FUZZ_CHECK(cmd != NULL, "bad harness JSON %s: %s", json, berr.message);
    mf_cmd_run(eng, NULL, db, cmd, NULL, 0, false, reply);
    bson_destroy(cmd);
    return reply;
}

/* Runs cmd on db with no client and drops the reply. */
static void
run_quiet(mf_engine_t *eng, const char *db, const bson_t *cmd)
{
    bson_t reply = BSON_INITIALIZER;
    mf_cmd_run(eng, NULL, db, cmd, NULL, 0, false, &reply);
    bson_destroy(&reply);
}

/* The array at path in doc, as an iterator over its elements; false if none. */
static bool
array_at(const bson_t *doc, const char *path, bson_iter_t *elems)
{
    bson_iter_t it, d;
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &d) && BSON_ITER_HOLDS_ARRAY(&d) &&
           bson_iter_recurse(&d, elems);
}

/* A string field of the document it points at; NULL if none. */
static const char *
str_field(const bson_iter_t *doc_it, const char *f)
{
    bson_iter_t sub;
    if (!BSON_ITER_HOLDS_DOCUMENT(doc_it) || !bson_iter_recurse(doc_it, &sub) || !bson_iter_find(&sub, f) ||
        !BSON_ITER_HOLDS_UTF8(&sub))
        return NULL;
    return bson_iter_utf8(&sub, NULL);
}

/* The reply of a cursor command run with a batch large enough to hold everything (a few dozen entries). */
static bson_t *
run_listing(mf_engine_t *eng, const char *db, const char *cmd_name, const char *arg)
{
    bson_t cmd = BSON_INITIALIZER, cur, *reply = bson_new();
    BSON_APPEND_UTF8(&cmd, cmd_name, arg);
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "cursor", &cur);
    BSON_APPEND_INT32(&cur, "batchSize", 100000);
    bson_append_document_end(&cmd, &cur);
    mf_cmd_run(eng, NULL, db, &cmd, NULL, 0, false, reply);
    bson_destroy(&cmd);
    return reply;
}

/* The names of db's collections (listCollections), as an owned array of owned strings; *n their count. */
static char **
collections_of(mf_engine_t *eng, const char *db, size_t *n)
{
    bson_t cmd = BSON_INITIALIZER, cur, reply = BSON_INITIALIZER;
    bson_iter_t e;
    char **names = NULL;

    *n = 0;
    BSON_APPEND_INT32(&cmd, "listCollections", 1);
    BSON_APPEND_BOOL(&cmd, "nameOnly", true);
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "cursor", &cur);
    BSON_APPEND_INT32(&cur, "batchSize", 100000);
    bson_append_document_end(&cmd, &cur);
    mf_cmd_run(eng, NULL, db, &cmd, NULL, 0, false, &reply);
    if (array_at(&reply, "cursor.firstBatch", &e)) {
        while (bson_iter_next(&e)) {
            const char *name = str_field(&e, "name");
            if (name == NULL)
                continue;
            names = realloc(names, (*n + 1) * sizeof(*names));
            names[(*n)++] = strdup(name);
        }
    }
    bson_destroy(&cmd);
    bson_destroy(&reply);
    return names;
}

static void
free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/*
 * Appends {index name: {expireAfterSeconds, archive}} for db.coll's indexes
 * to out (expireAfterSeconds -1 for an index without it): what a PATCH can
 * change.
 */
static void
indexes_of(mf_engine_t *eng, const char *db, const char *coll, bson_t *out)
{
    bson_t *reply = run_listing(eng, db, "listIndexes", coll);
    bson_iter_t e, sub;
    if (array_at(reply, "cursor.firstBatch", &e)) {
        while (bson_iter_next(&e)) {
            const char *name = str_field(&e, "name");
            bson_t ix;
            if (name == NULL)
                continue;
            BSON_APPEND_DOCUMENT_BEGIN(out, name, &ix);
            BSON_APPEND_INT64(&ix, "expireAfterSeconds",
                              bson_iter_recurse(&e, &sub) && bson_iter_find(&sub, "expireAfterSeconds") &&
                                      BSON_ITER_HOLDS_NUMBER(&sub)
                                  ? bson_iter_as_int64(&sub)
                                  : -1);
            BSON_APPEND_BOOL(&ix, "archive",
                             bson_iter_recurse(&e, &sub) && bson_iter_find(&sub, "archive") && bson_iter_as_bool(&sub));
            bson_append_document_end(out, &ix);
        }
    }
    bson_destroy(reply);
}

/* The names of every database (listDatabases). */
static char **
databases(mf_engine_t *eng, size_t *n)
{
    bson_t *reply = run_json(eng, "admin", "{\"listDatabases\": 1, \"nameOnly\": true}");
    bson_iter_t e;
    char **names = NULL;

    *n = 0;
    if (array_at(reply, "databases", &e)) {
        while (bson_iter_next(&e)) {
            const char *name = str_field(&e, "name");
            if (name == NULL)
                continue;
            names = realloc(names, (*n + 1) * sizeof(*names));
            names[(*n)++] = strdup(name);
        }
    }
    bson_destroy(reply);
    return names;
}

/* Records e's catalog as it is now in e->baseline. */
static void
baseline_take(fz_engine_t *e)
{
    size_t ndb, nc;
    char **dbs = databases(e->eng, &ndb);
    bson_init(&e->baseline);
    for (size_t i = 0; i < ndb; i++) {
        bson_t d, c;
        char **colls = collections_of(e->eng, dbs[i], &nc);
        BSON_APPEND_DOCUMENT_BEGIN(&e->baseline, dbs[i], &d);
        for (size_t j = 0; j < nc; j++) {
            BSON_APPEND_DOCUMENT_BEGIN(&d, colls[j], &c);
            indexes_of(e->eng, dbs[i], colls[j], &c);
            bson_append_document_end(&d, &c);
        }
        bson_append_document_end(&e->baseline, &d);
        free_names(colls, nc);
    }
    free_names(dbs, ndb);
}

/* Puts e's indexes of db.coll back as the baseline has them (bcoll: the baseline's document for coll). */
static void
indexes_restore(mf_engine_t *eng, const char *db, const char *coll, const bson_iter_t *bcoll)
{
    bson_t now = BSON_INITIALIZER, cmd = BSON_INITIALIZER;
    bson_iter_t bix, cix, f;

    indexes_of(eng, db, coll, &now);
    bson_iter_init(&cix, &now);
    while (bson_iter_next(&cix)) {
        const char *ix = bson_iter_key(&cix);
        bson_t sub, was, is;
        uint32_t len;
        const uint8_t *data;
        bson_reinit(&cmd);
        if (!bson_iter_recurse(bcoll, &bix) || !bson_iter_find(&bix, ix) || !BSON_ITER_HOLDS_DOCUMENT(&bix)) {
            BSON_APPEND_UTF8(&cmd, "dropIndexes", coll);
            BSON_APPEND_UTF8(&cmd, "index", ix);
            run_quiet(eng, db, &cmd);
            continue;
        }
        bson_iter_document(&bix, &len, &data);
        bson_init_static(&was, data, len);
        bson_iter_document(&cix, &len, &data);
        bson_init_static(&is, data, len);
        if (bson_equal(&was, &is))
            continue;
        /* A PATCH changed a start-up index: collMod it back. */
        BSON_APPEND_UTF8(&cmd, "collMod", coll);
        BSON_APPEND_DOCUMENT_BEGIN(&cmd, "index", &sub);
        BSON_APPEND_UTF8(&sub, "name", ix);
        if (bson_iter_init_find(&f, &was, "expireAfterSeconds") && bson_iter_int64(&f) >= 0)
            BSON_APPEND_INT64(&sub, "expireAfterSeconds", bson_iter_int64(&f));
        BSON_APPEND_BOOL(&sub, "archive", bson_iter_init_find(&f, &was, "archive") && bson_iter_bool(&f));
        bson_append_document_end(&cmd, &sub);
        run_quiet(eng, db, &cmd);
    }
    bson_destroy(&now);
    bson_destroy(&cmd);
}

/* Puts e's catalog back as baseline_take found it (see the file comment). */
static void
baseline_restore(fz_engine_t *e)
{
    size_t ndb, nc;
    char **dbs = databases(e->eng, &ndb);

    for (size_t i = 0; i < ndb; i++) {
        bson_iter_t bdb, bcoll;
        bson_t cmd = BSON_INITIALIZER;
        if (!bson_iter_init_find(&bdb, &e->baseline, dbs[i])) {
            BSON_APPEND_INT32(&cmd, "dropDatabase", 1);
            run_quiet(e->eng, dbs[i], &cmd);
            bson_destroy(&cmd);
            continue;
        }
        char **colls = collections_of(e->eng, dbs[i], &nc);
        for (size_t j = 0; j < nc; j++) {
            if (bson_iter_recurse(&bdb, &bcoll) && bson_iter_find(&bcoll, colls[j])) {
                indexes_restore(e->eng, dbs[i], colls[j], &bcoll);
                continue;
            }
            bson_reinit(&cmd);
            BSON_APPEND_UTF8(&cmd, "drop", colls[j]);
            run_quiet(e->eng, dbs[i], &cmd);
        }
        bson_destroy(&cmd);
        free_names(colls, nc);
    }
    free_names(dbs, ndb);
}

/*
 * Gives /metrics and GET /api/ttl something to show that no HTTP request can
 * make (the API creates indexes, never documents): fuzz_seed.docs with an
 * archiving TTL index and two expired documents, which the monitor deletes
 * (lateness histogram, deletion counters, the archive's series), one due in
 * the year 3000 (nextDueAt) and one not a date. Waits up to 10 s for the
 * deletions, then puts the monitor's sleep back to its default.
 */
static void
seed_data(mf_engine_t *eng)
{
    bson_t *r;
    bson_iter_t it;

    r = run_json(eng, "admin", "{\"setParameter\": 1, \"ttlMonitorSleepSecs\": 1}");
    bson_destroy(r);
    r = run_json(eng, "fuzz_seed",
                 "{\"createIndexes\": \"docs\", \"indexes\": [{\"key\": {\"at\": 1}, \"name\": \"at_1\", "
                 "\"expireAfterSeconds\": 60, \"archive\": true}]}");
    bson_destroy(r);
    r = run_json(eng, "fuzz_seed",
                 "{\"insert\": \"docs\", \"documents\": [{\"_id\": 1, \"at\": {\"$date\": 0}}, "
                 "{\"_id\": 2, \"at\": {\"$date\": 1000000000000}, \"s\": \"caf\u00e9 \\\"x\\\"\"}, "
                 "{\"_id\": 3, \"at\": {\"$date\": 32503680000000}}, {\"_id\": 4, \"at\": \"soon\"}]}");
    bson_destroy(r);
    for (int i = 0; i < 500; i++) {
        double deleted;
        r = run_json(eng, "admin", "{\"serverStatus\": 1}");
        deleted = bson_iter_init(&it, r) && bson_iter_find_descendant(&it, "metrics.ttl.deletedDocuments", &it)
                      ? bson_iter_as_double(&it)
                      : 0;
        bson_destroy(r);
        if (deleted >= 2)
            break;
        usleep(20000);
    }
    r = run_json(eng, "admin", "{\"setParameter\": 1, \"ttlMonitorSleepSecs\": 60}");
    bson_destroy(r);
}

/*
 * The access-controlled engine's users (admin, SCRAM-SHA-256 only, so a
 * wrong password costs one PBKDF2, not two; see cheapen_credential): a
 * root, a reader with serverStatus's privilege and no write privilege, a
 * user with no role.
 * The credentials' Basic encodings are in the seeds and the dictionary.
 */
static const struct {
    const char *user, *role, *basic;
} auth_users[] = {
    {"fuzz", "root", "ZnV6ejpwdw=="},             /* fuzz:pw */
    {"reader", "clusterMonitor", "cmVhZGVyOnB3"}, /* reader:pw */
    {"nobody", NULL, "bm9ib2R5OnB3"},             /* nobody:pw */
};
#define AUTH_PASSWORD "pw"

/*
 * Replaces user's SCRAM-SHA-256 credential (15,000 iterations, as createUser
 * makes it) by one of 4,096, the least a SCRAM client accepts. Every login
 * runs PBKDF2 on the HTTP side (http_api.c's scram_login), and OpenSSL's
 * allocates on every iteration: with the fuzz runner's slow-unwinding
 * ASan options one 15,000-iteration login takes about 300 ms.
 */
static void
cheapen_credential(mf_engine_t *eng, const char *user)
{
    bson_t doc, out = BSON_INITIALIZER, creds;
    bson_iter_t it;
    mf_scram_cred_t c;
    mf_error_t err;

    mf_err_clear(&err);
    if (mf_users_get(eng->cat, "admin", user, &doc, &err) != 0 ||
        mf_scram_make_cred(MF_SCRAM_SHA256, AUTH_PASSWORD, NULL, 0, 4096, &c, &err) != 0) {
        fprintf(stderr, "fuzz_http: credential of %s: %s\n", user, err.msg);
        abort();
    }
    bson_iter_init(&it, &doc);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "credentials") != 0)
            bson_append_iter(&out, NULL, 0, &it);
    BSON_APPEND_DOCUMENT_BEGIN(&out, "credentials", &creds);
    mf_scram_cred_append(&creds, "SCRAM-SHA-256", &c);
    bson_append_document_end(&out, &creds);
    if (mf_users_replace(eng->cat, &out, &err) != 0) {
        fprintf(stderr, "fuzz_http: replacing %s: %s\n", user, err.msg);
        abort();
    }
    bson_destroy(&doc);
    bson_destroy(&out);
}

static void
create_users(mf_engine_t *eng)
{
    for (size_t i = 0; i < sizeof(auth_users) / sizeof(auth_users[0]); i++) {
        bson_t cmd = BSON_INITIALIZER, roles, mechs, reply = BSON_INITIALIZER;
        bson_iter_t it;
        BSON_APPEND_UTF8(&cmd, "createUser", auth_users[i].user);
        BSON_APPEND_UTF8(&cmd, "pwd", AUTH_PASSWORD);
        BSON_APPEND_ARRAY_BEGIN(&cmd, "roles", &roles);
        if (auth_users[i].role)
            BSON_APPEND_UTF8(&roles, "0", auth_users[i].role);
        bson_append_array_end(&cmd, &roles);
        BSON_APPEND_ARRAY_BEGIN(&cmd, "mechanisms", &mechs);
        BSON_APPEND_UTF8(&mechs, "0", "SCRAM-SHA-256");
        bson_append_array_end(&cmd, &mechs);
        mf_cmd_run(eng, NULL, "admin", &cmd, NULL, 0, false, &reply);
        if (!bson_iter_init_find(&it, &reply, "ok") || bson_iter_as_double(&it) != 1) {
            char *j = bson_as_relaxed_extended_json(&reply, NULL);
            fprintf(stderr, "fuzz_http: createUser %s: %s\n", auth_users[i].user, j);
            abort();
        }
        bson_destroy(&cmd);
        bson_destroy(&reply);
        cheapen_credential(eng, auth_users[i].user);
    }
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* At exit: the scratch directories go (the engines stay open; the process ends). */
static void
remove_dirs(void)
{
    if (g_open.dir[0])
        nftw(g_open.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (g_auth.dir[0])
        nftw(g_auth.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void
engine_open(fz_engine_t *e, bool auth)
{
    mf_error_t err;
    snprintf(e->dir, sizeof(e->dir), "/tmp/mf-fuzz-http-XXXXXX");
    if (mkdtemp(e->dir) == NULL) {
        perror("fuzz_http: mkdtemp");
        abort();
    }
    mf_err_clear(&err);
    if (mf_engine_open(&(mf_engine_opts_t){.dbpath = e->dir, .in_memory = true, .auth = auth}, &e->eng, &err) != 0) {
        fprintf(stderr, "fuzz_http: mf_engine_open: %d %s\n", err.code, err.msg);
        abort();
    }
    if (auth)
        create_users(e->eng);
    seed_data(e->eng);
    baseline_take(e);
}

/*
 * Adds -entropic_scale_per_exec_time=1 to libFuzzer's flags unless given
 * (libFuzzer parses them after LLVMFuzzerInitialize, which may change
 * argv): inputs for the access-controlled engine log in, and a login runs
 * PBKDF2, whose per-iteration allocations the fuzz runner's slow-unwinding
 * ASan options (fast_unwind_on_malloc=0) make take 50 to 100 ms, against
 * about 1 ms for the other inputs. Weighting inputs by their speed keeps the
 * fast ones explored: about 1,000 executions per second instead of 60 in
 * scripts/fuzz-run.sh, and more coverage in the same time.
 */
static void
prefer_fast_inputs(int *argc, char ***argv)
{
    static const char flag[] = "-entropic_scale_per_exec_time";
    static char added[] = "-entropic_scale_per_exec_time=1";
    static char **v; /* kept for the process: libFuzzer keeps pointers into it */

    for (int i = 1; i < *argc; i++)
        if (strncmp((*argv)[i], flag, sizeof(flag) - 1) == 0)
            return;
    v = calloc((size_t)*argc + 2, sizeof(*v));
    memcpy(v, *argv, (size_t)*argc * sizeof(*v));
    v[(*argc)++] = added;
    *argv = v;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    prefer_fast_inputs(argc, argv);
    g_verbose = getenv("FUZZ_VERBOSE") != NULL;
    g_strict = getenv("FUZZ_HTTP_STRICT") != NULL;
    atexit(remove_dirs);
    engine_open(&g_open, false);
    engine_open(&g_auth, true);
    return 0;
}

/* ---------- parsing a connection's bytes: src/http/http.c's reader (mf_http_reader_t) ---------- */

/* An exact-size copy of s[0..n) with a NUL after it (so ASan sees a read past the end). */
static char *
dup_exact(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* ---------- checking the answer ---------- */

static bool
is_name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':';
}

static bool
is_name_char(char ch)
{
    return is_name_start(ch) || (ch >= '0' && ch <= '9');
}

/*
 * Open findings (fuzz/README.md) the checks tolerate unless FUZZ_HTTP_STRICT
 * is set in the environment, so that fuzzing goes on past them:
 *   - a body that is not JSON is answered with libbson's parse error, which
 *     quotes the offending input bytes as they came, UTF-8 or not;
 *   - text is cut at a fixed size (mf_error_t's 512-byte message, the
 *     600-byte index name api_ttl_post makes from a key) without regard to
 *     UTF-8, so a string can end in the first bytes of a character;
 *   - "Authorization: Basic ====" makes client_for write before its buffer
 *     (basic_underflows): such a request is not sent at all.
 * known_repaired returns a copy of s with those bytes (any invalid ones in
 * the first case; only an incomplete sequence right before a closing '"' in
 * the second) replaced by '?', or NULL if nothing needed it; what is left
 * must still be UTF-8, and the quoting and escaping are still judged.
 */
#define BAD_BODY_PREFIX "{\"error\":\"the request body must be a JSON object: "


/* The length of the valid UTF-8 character at s[0..n), or 0. */
static size_t
utf8_char_len(const char *s, size_t n)
{
    for (size_t k = 1; k <= 4 && k <= n; k++)
        if (bson_utf8_validate(s, k, true))
            return k;
    return 0;
}

/* Whether s[0..n) is a character's first bytes, cut short, followed by '"'. */
static bool
utf8_cut_before_quote(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t need = u[0] >= 0xc2 && u[0] <= 0xdf   ? 2
                  : u[0] >= 0xe0 && u[0] <= 0xef ? 3
                  : u[0] >= 0xf0 && u[0] <= 0xf4 ? 4
                                                 : 0;
    size_t k = 1;
    if (need == 0)
        return false;
    while (k < need && k < n && (u[k] & 0xc0) == 0x80)
        k++;
    return k < need && k < n && u[k] == '"';
}

static char *
known_repaired(const char *s, size_t n, bool any_bytes)
{
    char *c = NULL;
    if (g_strict)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_char_len(s + i, n - i);
        if (len > 0) {
            i += len;
            continue;
        }
        if (!any_bytes && !utf8_cut_before_quote(s + i, n - i)) {
            i++;
            continue; /* not a known kind: left for the check to report */
        }
        if (c == NULL)
            c = dup_exact(s, n);
        do
            c[i++] = '?';
        while (!any_bytes && i < n && s[i] != '"');
    }
    return c;
}

/* Checks one line of the Prometheus text format (without its '\n'). */
static void
check_metrics_line(const char *s, size_t n, const char *all)
{
    size_t i = 0;

    if (n > 0 && s[0] == '#') {
        FUZZ_CHECK((n > 7 && (strncmp(s, "# HELP ", 7) == 0 || strncmp(s, "# TYPE ", 7) == 0)),
                   "metrics: a comment that is neither HELP nor TYPE: %.*s", (int)n, s);
        return;
    }
    FUZZ_CHECK(n > 0 && is_name_start(s[0]), "metrics: a line without a metric name: '%.*s' in\n%s", (int)n, s, all);
    while (i < n && is_name_char(s[i]))
        i++;
    if (i < n && s[i] == '{') {
        i++;
        while (i < n && s[i] != '}') {
            FUZZ_CHECK(is_name_start(s[i]) && s[i] != ':', "metrics: bad label name at %zu: %.*s", i, (int)n, s);
            while (i < n && is_name_char(s[i]) && s[i] != ':')
                i++;
            FUZZ_CHECK(i + 1 < n && s[i] == '=' && s[i + 1] == '"', "metrics: label without =\" at %zu: %.*s", i,
                       (int)n, s);
            i += 2;
            while (i < n && s[i] != '"') {
                if (s[i] == '\\') {
                    FUZZ_CHECK(i + 1 < n && (s[i + 1] == '\\' || s[i + 1] == '"' || s[i + 1] == 'n'),
                               "metrics: bad escape in a label value at %zu: %.*s", i, (int)n, s);
                    i++;
                }
                i++;
            }
            FUZZ_CHECK(i < n, "metrics: unterminated label value: %.*s", (int)n, s);
            i++; /* the closing quote */
            if (i < n && s[i] == ',')
                i++;
            else
                FUZZ_CHECK(i < n && s[i] == '}', "metrics: label not followed by , or }: %.*s", (int)n, s);
        }
        FUZZ_CHECK(i < n, "metrics: unterminated label set: %.*s", (int)n, s);
        i++; /* } */
    }
    FUZZ_CHECK(i < n && s[i] == ' ', "metrics: no space after the metric name at %zu: %.*s", i, (int)n, s);
    i++;
    char num[64];
    size_t vl = n - i;
    FUZZ_CHECK(vl > 0 && vl < sizeof(num), "metrics: bad value length %zu: %.*s", vl, (int)n, s);
    memcpy(num, s + i, vl);
    num[vl] = '\0';
    char *end;
    (void)strtod(num, &end);
    FUZZ_CHECK(end == num + vl && num[0] != ' ', "metrics: value is not a number: %.*s", (int)n, s);
}

static void
check_metrics(const char *body, size_t n)
{
    char *fixed = known_repaired(body, n, false);
    const char *b = fixed ? fixed : body;
    FUZZ_CHECK(n > 0 && b[n - 1] == '\n', "metrics: the body does not end with a line end");
    FUZZ_CHECK(memchr(b, '\0', n) == NULL, "metrics: a NUL in the body");
    FUZZ_CHECK(bson_utf8_validate(b, n, false), "metrics: the body is not UTF-8:\n%s", body);
    for (size_t off = 0; off < n;) {
        const char *nl = memchr(b + off, '\n', n - off);
        size_t end = (size_t)(nl - b);
        check_metrics_line(b + off, end - off, b);
        off = end + 1;
    }
    free(fixed);
}

/* The status http_api.c gives an error code (status_of_code). */
static int
expected_status(int code)
{
    switch (code) {
    case 13:
        return 403;
    case 18:
        return 401;
    case 26:
    case 27:
        return 404;
    default:
        return 400;
    }
}

static void
check_json(const mf_http_req_t *req, const mf_http_resp_t *r)
{
    bson_t doc;
    bson_error_t berr;
    bson_iter_t it;
    char *text = NULL;

    FUZZ_CHECK(r->body_len > 0 && r->body[0] == '{', "a JSON answer that is not an object: %.*s", (int)r->body_len,
               r->body);
    FUZZ_CHECK(memchr(r->body, '\0', r->body_len) == NULL, "a NUL in a JSON answer: %s", r->body);
    text = known_repaired(r->body, r->body_len,
                          r->status == 400 && strncmp(r->body, BAD_BODY_PREFIX, strlen(BAD_BODY_PREFIX)) == 0);
    FUZZ_CHECK(bson_utf8_validate(text ? text : r->body, r->body_len, false), "a JSON answer that is not UTF-8: %s",
               r->body);
    FUZZ_CHECK(bson_init_from_json(&doc, text ? text : r->body, (ssize_t)r->body_len, &berr),
               "a JSON answer libbson cannot read (%s):\n%s", berr.message, r->body);
    free(text);
    FUZZ_CHECK(FUZZ_DOC_OK(&doc), "libbson built a bad document from the answer");
    if (r->status == 200) {
        if (req->method == HTTP_GET)
            FUZZ_CHECK(bson_iter_init_find(&it, &doc, "indexes") && BSON_ITER_HOLDS_ARRAY(&it),
                       "GET /api/ttl without an indexes array: %s", r->body);
        else if (req->method == HTTP_POST)
            FUZZ_CHECK(bson_iter_init_find(&it, &doc, "name") && BSON_ITER_HOLDS_UTF8(&it),
                       "a created index without its name: %s", r->body);
    } else {
        FUZZ_CHECK(bson_iter_init_find(&it, &doc, "error") && BSON_ITER_HOLDS_UTF8(&it), "an error without error: %s",
                   r->body);
        FUZZ_CHECK(bson_iter_init_find(&it, &doc, "codeName") && BSON_ITER_HOLDS_UTF8(&it),
                   "an error without codeName: %s", r->body);
        FUZZ_CHECK(bson_iter_init_find(&it, &doc, "code") && BSON_ITER_HOLDS_INT32(&it) && bson_iter_int32(&it) != 0,
                   "an error without a non-zero code: %s", r->body);
        if (r->status == 405)
            FUZZ_CHECK(bson_iter_int32(&it) == MF_E_IllegalOperation, "405 with code %d", bson_iter_int32(&it));
        else if (r->status == 415) /* the browser guard: a write that is not JSON */
            FUZZ_CHECK(bson_iter_int32(&it) == MF_E_BadValue, "415 with code %d", bson_iter_int32(&it));
        else
            FUZZ_CHECK(r->status == expected_status(bson_iter_int32(&it)), "status %d for error code %d: %s",
                       r->status, bson_iter_int32(&it), r->body);
    }
    bson_destroy(&doc);
}

/* Whose credentials a request's Authorization header carries (for the access-controlled engine). */
typedef enum { CRED_NONE, CRED_OTHER, CRED_ROOT, CRED_READER, CRED_NOBODY } cred_t;

static cred_t
cred_of(const char *a)
{
    if (a == NULL || strncasecmp(a, "Basic ", 6) != 0)
        return CRED_NONE;
    a += 6;
    while (*a == ' ')
        a++;
    for (size_t i = 0; i < sizeof(auth_users) / sizeof(auth_users[0]); i++)
        if (strcmp(a, auth_users[i].basic) == 0)
            return (cred_t)(CRED_ROOT + i);
    return CRED_OTHER;
}

/*
 * Whether client_for (http_api.c) would write before its decoding buffer
 * for this Authorization header: it takes the '=' padding off the length
 * EVP_DecodeBlock reports, which for "====" is 3 - 4 = -1, then stores the
 * terminating NUL at dec[-1]. Computed here the way client_for does.
 */
static bool
basic_underflows(const char *a)
{
    unsigned char dec[4096];
    size_t n;
    int dl;

    if (a == NULL || strncasecmp(a, "Basic ", 6) != 0)
        return false;
    a += 6;
    while (*a == ' ')
        a++;
    n = strlen(a);
    if (n == 0 || n % 4 != 0 || n >= 4096)
        return false;
    dl = EVP_DecodeBlock(dec, (const unsigned char *)a, (int)n);
    if (dl < 0)
        return false;
    for (size_t i = n; i > 0 && a[i - 1] == '='; i--)
        dl--;
    return dl < 0;
}

static void
check_resp(const fz_engine_t *e, const mf_http_req_t *req, const mf_http_resp_t *r)
{
    const char *path = strcmp(req->path, "/") == 0 ? "/index.html" : req->path;
    const char *method = http_method_str((enum http_method)req->method);
    bool get = req->method == HTTP_GET;
    bool api = strcmp(path, "/api/ttl") == 0;
    bool write = api && (req->method == HTTP_POST || req->method == HTTP_PATCH);
    bool asset = false;
    size_t sum = 0;

    for (const mf_http_asset_t *a = mf_http_assets; a->path != NULL; a++)
        asset |= strcmp(a->path, path) == 0;
    FUZZ_CHECK(r->status >= 100 && r->status <= 599, "status %d", r->status);
    FUZZ_CHECK(r->status == 200 || r->status == 400 || r->status == 401 || r->status == 403 || r->status == 404 ||
                   r->status == 405 || r->status == 415,
               "status %d is not one the API answers with", r->status);
    /*
     * The browser guard (http_api.c browser_guard) answers before access
     * control: 415 for a write that is not JSON, 403 for a cross-origin
     * write or (access control off) a Host that names neither an address
     * nor this machine. Such an answer skips the access checks below.
     */
    bool guard = r->status == 415 ||
                 (r->status == 403 && r->body != NULL &&
                  (memmem(r->body, r->body_len, "cross-origin", 12) != NULL ||
                   memmem(r->body, r->body_len, "the Host header", 15) != NULL));
    FUZZ_CHECK(r->status != 415 || write, "415 for a %s %s", method, path);
    FUZZ_CHECK(r->content_type != NULL, "no content type (status %d)", r->status);
    FUZZ_CHECK(r->body != NULL, "no body (status %d)", r->status);
    for (size_t i = 0; i < r->body_len; i++) /* every byte the server says it wrote is readable */
        sum += (unsigned char)r->body[i];
    (void)sum;
    FUZZ_CHECK((r->status == 405) == (r->allow != NULL), "status %d with Allow %s", r->status,
               r->allow ? r->allow : "(none)");
    FUZZ_CHECK((r->status == 401) == r->www_authenticate, "status %d, WWW-Authenticate %d", r->status,
               r->www_authenticate);
    if (guard) {
        /* checked above */
    } else if (e == &g_open) {
        /* Access control off: no 401; reads are open; writes only from loopback. */
        FUZZ_CHECK(r->status != 401, "401 with access control off: %.*s", (int)r->body_len, r->body);
        if (write && !req->loopback)
            FUZZ_CHECK(r->status == 403, "a remote write answered %d: %.*s", r->status, (int)r->body_len, r->body);
        else
            FUZZ_CHECK(r->status != 403, "403 for a %s %s: %.*s", req->loopback ? "loopback" : "remote", method,
                       (int)r->body_len, r->body);
    } else if (api ? get || write : get && (asset || strcmp(path, "/metrics") == 0)) {
        /* Access control on: the request reaches the credential check (every path but 404 / 405 does). */
        bool read_path = !write;
        switch (cred_of(req->authorization)) {
        case CRED_NONE:
            FUZZ_CHECK(r->status == 401, "%s %s without Basic credentials answered %d", method, path, r->status);
            break;
        case CRED_ROOT:
            FUZZ_CHECK(r->status != 401 && r->status != 403, "%s %s as root answered %d: %.*s", method, path,
                       r->status, (int)r->body_len, r->body);
            break;
        case CRED_READER: /* serverStatus's privilege, no write */
            if (read_path)
                FUZZ_CHECK(r->status != 401 && r->status != 403, "%s %s as reader answered %d: %.*s", method, path,
                           r->status, (int)r->body_len, r->body);
            else
                FUZZ_CHECK(r->status != 401 && r->status != 200, "%s %s as reader answered %d: %.*s", method, path,
                           r->status, (int)r->body_len, r->body);
            break;
        case CRED_NOBODY: /* logged in, no privilege: the console's files only */
            if (asset)
                FUZZ_CHECK(r->status == 200, "GET %s as nobody answered %d", path, r->status);
            else if (read_path)
                FUZZ_CHECK(r->status == 403, "%s %s as nobody answered %d: %.*s", method, path, r->status,
                           (int)r->body_len, r->body);
            else
                FUZZ_CHECK(r->status != 401 && r->status != 200, "%s %s as nobody answered %d: %.*s", method, path,
                           r->status, (int)r->body_len, r->body);
            break;
        default:
            break; /* other credentials: whatever the login decides (401 carries WWW-Authenticate, above) */
        }
    }
    if (strncmp(r->content_type, "application/json", 16) == 0) {
        FUZZ_CHECK(api || r->status == 401 || r->status == 403, "JSON from %s (status %d)", path, r->status);
        check_json(req, r);
        return;
    }
    if (api) {
        FUZZ_CHECK(false, "/api/ttl answered %s (status %d)", r->content_type, r->status);
        return;
    }
    if (strcmp(path, "/metrics") == 0 && r->status == 200) {
        FUZZ_CHECK(strncmp(r->content_type, "text/plain; version=0.0.4", 25) == 0, "metrics as %s", r->content_type);
        check_metrics(r->body, r->body_len);
        return;
    }
    if (r->status == 200) {
        const mf_http_asset_t *a = mf_http_assets;
        while (a->path != NULL && strcmp(a->path, path) != 0)
            a++;
        FUZZ_CHECK(a->path != NULL && get, "200 for %s %s", method, path);
        FUZZ_CHECK(r->body_len == a->len && memcmp(r->body, a->data, a->len) == 0, "%s not served byte for byte",
                   path);
    }
}

/* ---------- one input ---------- */

/* Answers one parsed request on e and checks the answer. Returns whether it was a write to /api/ttl. */
static bool
route(fz_engine_t *e, mf_http_reader_t *rd, bool loopback)
{
    mf_http_req_t req;
    mf_http_resp_t resp;
    char *path, *query, *body;
    bool wrote;

    memset(&req, 0, sizeof(req));
    memset(&resp, 0, sizeof(resp));
    /* The request as the server hands it to a worker, its strings then copied to exact size. */
    mf_http_reader_request(rd, &req);
    path = dup_exact(req.path, strlen(req.path));
    query = dup_exact(req.query, strlen(req.query));
    body = dup_exact(req.body, req.body_len);
    req.path = path;
    req.query = query;
    req.body = body;
    req.loopback = loopback;
    req.remote = loopback ? "127.0.0.1:40000" : "198.51.100.7:40000";
    wrote = strcmp(path, "/api/ttl") == 0 && (req.method == HTTP_POST || req.method == HTTP_PATCH);

    if (e == &g_auth && !g_strict && basic_underflows(req.authorization)) {
        wrote = false; /* an open finding: client_for would write before its buffer (basic_underflows) */
        goto out;
    }
    mf_http_route(e->eng, &req, &resp);
    if (g_verbose)
        fprintf(stderr, "fuzz_http: %s%s %s -> %d %s\n%.*s\n", e == &g_auth ? "[auth] " : "",
                http_method_str((enum http_method)req.method), req.path, resp.status,
                resp.content_type ? resp.content_type : "(null)", (int)resp.body_len, resp.body ? resp.body : "");
    check_resp(e, &req, &resp);
    free(resp.body);
out:
    free(path);
    free(query);
    free(body);
    return wrote;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mf_http_reader_t rd;
    fz_engine_t *e = &g_open;
    bool loopback = true;
    bool wrote = false;
    size_t off = 0;

    if (size > FUZZ_HTTP_MAX_INPUT)
        return 0;
    /* The line ends before the first request line choose the peer and the engine (see the file comment). */
    for (size_t i = 0; i < size && (data[i] == '\r' || data[i] == '\n'); i++) {
        if (data[i] == '\n')
            loopback = false;
        else
            e = &g_auth;
    }
    mf_http_reader_init(&rd);
    for (int n = 0; n < (e == &g_auth ? MAX_AUTH_REQUESTS : MAX_REQUESTS) && off < size; n++) {
        off += mf_http_reader_execute(&rd, (const char *)data + off, size - off);
        if (!rd.complete)
            break; /* a parse error (the server answers 400), a limit (413, 414, 431), or a request cut short */
        wrote |= route(e, &rd, loopback);
    }
    mf_http_reader_free(&rd);
    if (wrote)
        baseline_restore(e);
    return 0;
}
