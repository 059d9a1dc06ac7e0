/*
 * test_rguard.c: range guards (storage.h "Range guards"), socket-free.
 *
 * Why they exist, shown on WiredTiger itself: a transaction truncates a
 * range of an index table while another transaction inserts a key into that
 * range after the first one's snapshot and commits first. At run time the
 * key stays (the truncate removed only what it saw), but recovery replays
 * the insert and then the truncate, which has no snapshot, and the key is
 * gone. The recovery tests run the writes in a child process that ends with
 * _exit (no close, as kill -9 would leave the files; the truncater's commit
 * syncs the log, which holds the insert before it), then open the files
 * again in the test's own process.
 *
 * With the guard, the writer enters it and the truncater commits through it:
 * the truncater rolls back (WriteConflict) and both keep their keys, at run
 * time and after recovery. The rest: tokens and writers in flight, a writer
 * waiting while a guard is closed (and rolling back if it stays closed), an
 * operation outside a transaction, and a transaction that entered a guard
 * cannot commit through one.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storage/storage.h"

#define URI "table:ix-test"

typedef struct env {
    char dir[64];
    mf_storage_t *st;
    mf_rguard_t g;
} env_t;

static void
env_mkdir(env_t *e)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->dir, sizeof(e->dir), "/tmp/mf-test-rguard-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
}

static void
env_open(env_t *e)
{
    mf_error_t err = {0};
    cr_assert_eq(mf_storage_open_ex(e->dir, false, 0, &e->st, &err), 0, "open: %s", err.msg);
}

static void
env_rm(env_t *e)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
    cr_assert_eq(system(cmd), 0);
}

/* Key "k%03d" of index entry i (0..999) into k (16 bytes). */
static void
key_of(int i, char *k)
{
    snprintf(k, 16, "k%03d", i % 1000);
}

/* Creates the index table with entries k000..k099, committed and synced. */
static void
fill(env_t *e)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    mf_cur_t *c;
    char k[16];
    cr_assert_eq(mf_storage_create(s, URI, mf_storage_table_config(e->st, MF_TABLE_INDEX), &err), 0, "%s", err.msg);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_cur_open(s, URI, &c, &err), 0, "%s", err.msg);
    for (int i = 0; i < 100; i++) {
        key_of(i, k);
        cr_assert_eq(mf_cur_insert_bytes(c, k, 4, "", 0), 0);
    }
    mf_cur_close(c);
    cr_assert_eq(mf_txn_commit(s, true, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_checkpoint(s, &err), 0, "%s", err.msg);
}

/* A fresh directory, the storage open on it and the table filled (fill). */
static void
env_start(env_t *e)
{
    env_mkdir(e);
    env_open(e);
    fill(e);
}

/* Closes the storage and removes its directory. */
static void
env_finish(env_t *e)
{
    mf_storage_close(e->st);
    env_rm(e);
}

/* Whether key k (NUL-terminated) is in the table, read in a transaction of its own on this thread. */
static bool
has_key(env_t *e, const char *k)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    mf_cur_t *c;
    cr_assert_eq(mf_cur_open(s, URI, &c, &err), 0, "%s", err.msg);
    int r = mf_cur_search_bytes(c, k, strlen(k));
    mf_cur_close(c);
    cr_assert(r == 0 || r == MF_NOTFOUND);
    return r == 0;
}

/*
 * The runs mf_cur_range_runs finds in s's open transaction for the keys
 * k<from>..k<to> (0 <= from <= to < 100): their number, lengths in runs.
 */
static size_t
runs_of(mf_sess_t *s, int from, int to, size_t min_run, size_t max_short, size_t *runs)
{
    mf_error_t err = {0};
    mf_cur_t *c;
    char keys[100][16];
    mf_key_span_t spans[100];
    size_t nruns = 0;
    int n = to - from + 1;
    for (int i = 0; i < n; i++) {
        key_of(from + i, keys[i]);
        spans[i] = (mf_key_span_t){(const uint8_t *)keys[i], strlen(keys[i])};
    }
    cr_assert_eq(mf_cur_open(s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_range_runs(c, spans, (size_t)n, min_run, max_short, runs, &nruns), 0);
    mf_cur_close(c);
    return nruns;
}

/* Whether s's open transaction sees exactly the keys k<from>..k<to> in [k<from>, k<to>]: one run of them all. */
static bool
sees_exactly(mf_sess_t *s, int from, int to)
{
    size_t runs[100];
    return runs_of(s, from, to, 1, 100, runs) == 1 && runs[0] == (size_t)(to - from + 1);
}

/*
 * A writer on a thread of its own: inserts key (entering guard unless NULL)
 * in one transaction, committed durably (as j: true), so the recovery tests
 * find it in the log whatever the truncater does.
 */
typedef struct writer {
    env_t *e;
    mf_rguard_t *guard;
    const char *key;
    int rc;
} writer_t;

static void *
writer_main(void *arg)
{
    writer_t *w = arg;
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(w->e->st);
    mf_cur_t *c;
    w->rc = mf_txn_begin(s, &err);
    if (w->rc == 0 && w->guard != NULL && mf_rguard_enter(s, w->guard))
        w->rc = -2; /* inside a transaction: the transaction's end leaves */
    if (w->rc == 0)
        w->rc = mf_cur_open(s, URI, &c, &err);
    if (w->rc == 0) {
        w->rc = mf_cur_insert_bytes(c, w->key, strlen(w->key), "", 0);
        mf_cur_close(c);
    }
    if (w->rc == 0)
        w->rc = mf_txn_commit(s, true, &err);
    else
        mf_txn_abort(s);
    mf_storage_session_close_thread(w->e->st);
    return NULL;
}

/* Runs a writer of key to its commit on another thread. Returns its result. */
static int
write_on_thread(env_t *e, mf_rguard_t *guard, const char *key)
{
    writer_t w = {.e = e, .guard = guard, .key = key};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, writer_main, &w), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    return w.rc;
}

/*
 * The truncater: with its token read before it begins, truncates [k010,
 * k020] after checking that it sees exactly those 11 entries; meanwhile a
 * writer inserts k015x (inside the range) and commits. guarded: through
 * the range guard. Returns the truncater's commit result.
 */
static int
truncate_around_a_writer(env_t *e, bool guarded)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    int64_t token = mf_rguard_token(&e->g);
    cr_assert_geq(token, 0);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert(sees_exactly(s, 10, 20), "the truncater sees exactly k010..k020");
    cr_assert_eq(mf_truncate_range(s, URI, "k010", 4, "k020", 4, &err), 0, "%s", err.msg);
    if (guarded)
        mf_txn_commit_unless_entered(s, &e->g, token);
    cr_assert_eq(write_on_thread(e, guarded ? &e->g : NULL, "k015x"), 0, "the writer commits first");
    int rc = mf_txn_commit(s, true, &err);
    if (rc != 0)
        cr_assert_eq(err.code, MF_E_WriteConflict, "%d %s", err.code, err.msg);
    return rc;
}

/* The child's part of a recovery test: the writes, then _exit without closing; exit status 0 if all went as expected. */
static void
child_writes(env_t *e, bool guarded)
{
    env_open(e);
    fill(e);
    int rc = truncate_around_a_writer(e, guarded);
    bool ok = guarded ? rc != 0 : rc == 0;
    /* At run time the writer's key is there either way. */
    ok = ok && has_key(e, "k015x");
    ok = ok && has_key(e, "k015") == guarded;
    _exit(ok ? 0 : 1);
}

/* Runs child_writes in a child process; then opens the files again here (recovery). */
static void
crash_and_recover(env_t *e, bool guarded)
{
    env_mkdir(e);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        child_writes(e, guarded);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's writes went as expected (status %d)", status);
    env_open(e);
}

Test(rguard, without_a_guard_recovery_replays_the_truncate_over_a_key_committed_before_it)
{
    env_t e;
    crash_and_recover(&e, false);
    cr_assert_not(has_key(&e, "k015"), "the truncate is recovered");
    cr_assert_not(has_key(&e, "k015x"),
                  "WiredTiger's recovery removes the key another transaction inserted into the range and "
                  "committed first (present at run time): the reason for range guards");
    cr_assert(has_key(&e, "k009") && has_key(&e, "k021"));
    env_finish(&e);
}

Test(rguard, with_a_guard_the_truncater_rolls_back_and_recovery_keeps_every_key)
{
    env_t e;
    crash_and_recover(&e, true);
    cr_assert(has_key(&e, "k015x"), "the writer's key survives recovery");
    for (int i = 10; i <= 20; i++) {
        char k[16];
        key_of(i, k);
        cr_assert(has_key(&e, k), "%s: the truncater rolled back", k);
    }
    env_finish(&e);
}

Test(rguard, with_no_writer_the_truncate_commits_through_the_guard)
{
    env_t e;
    mf_error_t err = {0};
    env_start(&e);
    mf_sess_t *s = mf_storage_session(e.st);
    /* A writer that committed before the token does not stop it. */
    cr_assert_eq(write_on_thread(&e, &e.g, "k050x"), 0);
    int64_t token = mf_rguard_token(&e.g);
    cr_assert_eq(token, 1);
    cr_assert(mf_rguard_unchanged(&e.g, token));
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_truncate_range(s, URI, "k010", 4, "k020", 4, &err), 0, "%s", err.msg);
    mf_txn_commit_unless_entered(s, &e.g, token);
    cr_assert_eq(mf_txn_commit(s, false, &err), 0, "%s", err.msg);
    cr_assert_eq(atomic_load(&e.g.closed), 0, "open again after the commit");
    cr_assert_not(has_key(&e, "k015"));
    cr_assert(has_key(&e, "k050x") && has_key(&e, "k009") && has_key(&e, "k021"));
    env_finish(&e);
}

Test(rguard, a_writer_in_flight_makes_the_token_negative_until_its_transaction_ends)
{
    env_t e;
    mf_error_t err = {0};
    env_start(&e);
    mf_sess_t *s = mf_storage_session(e.st);
    int64_t t0 = mf_rguard_token(&e.g);
    cr_assert_eq(t0, 0);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_not(mf_rguard_enter(s, &e.g), "inside a transaction: no exit to call");
    cr_assert_not(mf_rguard_enter(s, &e.g), "entered once per transaction");
    cr_assert_eq(atomic_load(&e.g.active), 1);
    cr_assert_eq(mf_rguard_token(&e.g), -1);
    cr_assert_not(mf_rguard_unchanged(&e.g, t0));
    mf_txn_abort(s);
    cr_assert_eq(atomic_load(&e.g.active), 0, "a rollback ends it too");
    int64_t t1 = mf_rguard_token(&e.g);
    cr_assert_eq(t1, 1);
    /* Outside a transaction: counted until mf_rguard_exit. */
    cr_assert(mf_rguard_enter(s, &e.g));
    cr_assert_eq(mf_rguard_token(&e.g), -1);
    mf_rguard_exit(&e.g);
    cr_assert_eq(mf_rguard_token(&e.g), 2);
    cr_assert_not(mf_rguard_unchanged(&e.g, t1));
    env_finish(&e);
}

/* Monotonic milliseconds. */
static double
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

Test(rguard, a_writer_waits_while_the_guard_is_closed_and_then_rolls_back)
{
    env_t e;
    env_start(&e);
    atomic_store(&e.g.closed, 1); /* as a truncater in its engine commit holds it, here for good */
    double t0 = now_ms();
    int rc = write_on_thread(&e, &e.g, "k033x");
    double waited = now_ms() - t0;
    cr_assert_neq(rc, 0, "the writer cannot commit while the guard is closed");
    cr_assert_geq(waited, 20.0, "it waited 20 ms for the guard first (%.1f ms)", waited);
    cr_assert_not(has_key(&e, "k033x"), "rolled back");
    cr_assert_eq(atomic_load(&e.g.active), 0, "its transaction ended");
    atomic_store(&e.g.closed, 0);
    cr_assert_eq(write_on_thread(&e, &e.g, "k033x"), 0, "open again: it commits");
    cr_assert(has_key(&e, "k033x"));
    env_finish(&e);
}

Test(rguard, a_transaction_that_entered_a_guard_cannot_commit_through_one)
{
    env_t e;
    mf_error_t err = {0};
    mf_rguard_t other = {0};
    env_start(&e);
    mf_sess_t *s = mf_storage_session(e.st);
    int64_t token = mf_rguard_token(&e.g);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_not(mf_rguard_enter(s, &other));
    cr_assert_eq(mf_truncate_range(s, URI, "k010", 4, "k020", 4, &err), 0, "%s", err.msg);
    mf_txn_commit_unless_entered(s, &e.g, token);
    cr_assert_neq(mf_txn_commit(s, false, &err), 0, "two guards held in opposite orders could wait for each other");
    cr_assert_eq(err.code, MF_E_WriteConflict);
    cr_assert(has_key(&e, "k015"), "rolled back");
    cr_assert_eq(atomic_load(&e.g.closed), 0);
    cr_assert_eq(atomic_load(&other.active), 0);
    env_finish(&e);
}

/* Whether the table's entries in [k<from>, k<to>] are exactly the keys k<from>..k<to>, in one transaction. */
static bool
range_is_exactly(env_t *e, int from, int to)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    bool same = sees_exactly(s, from, to);
    mf_txn_abort(s);
    return same;
}

/* Applies one change to the table in a transaction of its own: insert key k, or remove it. */
static void
change(env_t *e, const char *k, bool insert)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    mf_cur_t *c;
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_cur_open(s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(insert ? mf_cur_insert_bytes(c, k, strlen(k), "", 0) : mf_cur_remove_bytes(c, k, strlen(k)), 0);
    mf_cur_close(c);
    cr_assert_eq(mf_txn_commit(s, false, &err), 0, "%s", err.msg);
}

Test(rguard, the_range_check_compares_keys_so_a_foreign_entry_never_stands_in_for_a_missing_one)
{
    env_t e;
    env_start(&e);
    cr_assert(range_is_exactly(&e, 10, 20), "k010..k020 as filled");
    cr_assert(range_is_exactly(&e, 0, 99), "the whole table, up to its last entry");
    /* An index already lacking k012 (damage), with another document's k015x inside the range: 11 entries still. */
    change(&e, "k012", false);
    change(&e, "k015x", true);
    cr_assert_not(range_is_exactly(&e, 10, 20), "the same count, other keys: not a range to truncate");
    cr_assert_not(range_is_exactly(&e, 13, 16), "a foreign entry inside");
    cr_assert(range_is_exactly(&e, 16, 20));
    cr_assert_not(range_is_exactly(&e, 10, 12), "k012 missing at the range's end");
    cr_assert_not(range_is_exactly(&e, 12, 13), "k012 missing at the range's start");
    /* Keys past the table's last entry. */
    change(&e, "k099", false);
    cr_assert_not(range_is_exactly(&e, 98, 99));
    env_finish(&e);
}

/* The runs of k<from>..k<to>, in one transaction, as text ("2 1 3 5"; "" when the walk gave up). */
static void
runs_text(env_t *e, int from, int to, size_t min_run, size_t max_short, char *out, size_t cap)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    size_t runs[100], used = 0;
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    size_t nruns = runs_of(s, from, to, min_run, max_short, runs);
    mf_txn_abort(s);
    out[0] = '\0';
    for (size_t i = 0; i < nruns; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%zu", i ? " " : "", runs[i]);
}

Test(rguard, runs_end_at_a_foreign_entry_and_a_missing_key_is_a_run_of_one)
{
    env_t e;
    char got[256];
    env_start(&e);
    runs_text(&e, 10, 20, 1, 100, got, sizeof(got));
    cr_assert_str_eq(got, "11");
    change(&e, "k012", false);
    change(&e, "k015x", true);
    /* k010 k011 | k012 (not seen) | k013 k014 k015 | (k015x) k016 .. k020 */
    runs_text(&e, 10, 20, 1, 100, got, sizeof(got));
    cr_assert_str_eq(got, "2 1 3 5");
    /* Past the table's last entry: each key it lacks is a run of one. */
    change(&e, "k099", false);
    runs_text(&e, 96, 99, 1, 100, got, sizeof(got));
    cr_assert_str_eq(got, "3 1");
    /* More than max_short keys in runs shorter than min_run: it gives up. */
    runs_text(&e, 10, 20, 3, 2, got, sizeof(got));
    cr_assert_str_eq(got, "", "2 + 1 keys in short runs > 2");
    runs_text(&e, 10, 20, 3, 3, got, sizeof(got));
    cr_assert_str_eq(got, "2 1 3 5");
    env_finish(&e);
}
