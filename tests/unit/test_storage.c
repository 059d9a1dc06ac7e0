/*
 * test_storage.c: the storage adapter's space functions (SPEC G3), socket-free:
 * a table's file grows with its data, deletions leave its size alone but
 * make space free for reuse once a checkpoint has run, and compaction gives
 * that space back to the file system, keeping every remaining record;
 * compaction stops with the calling operation's kill code; in memory there is
 * nothing to checkpoint or compact. Records of 120 KB (over the size
 * WiredTiger would keep as overflow items, which compaction cannot move, were
 * it not for leaf_value_max in mf_storage_table_config) are given back too.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/curop.h"
#include "storage/storage.h"

#define URI "table:coll-test"
#define NRECORDS 30000
#define RECORD_BYTES 1000
#define BIG_RECORD_BYTES (120 * 1024)

typedef struct env {
    char dir[64];
    mf_storage_t *st;
    mf_sess_t *s;
    size_t record_bytes;
} env_t;

static void
env_init(env_t *e, bool in_memory, size_t record_bytes)
{
    mf_error_t err = {0};
    e->record_bytes = record_bytes;
    snprintf(e->dir, sizeof(e->dir), "/tmp/mf-test-storage-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
    cr_assert_eq(mf_storage_open_ex(e->dir, in_memory, 0, &e->st, &err), 0, "open: %s", err.msg);
    e->s = mf_storage_session(e->st);
    cr_assert_eq(mf_storage_create(e->s, URI, mf_storage_table_config(e->st, MF_TABLE_DOCS), &err), 0, "create: %s", err.msg);
}

static void
env_destroy(env_t *e)
{
    char cmd[128];
    mf_storage_close(e->st);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
    cr_assert_eq(system(cmd), 0);
}

/* Writes records 0..n-1 of e->record_bytes pseudo-random bytes (incompressible, like the client test's). */
static void
fill(env_t *e, int n)
{
    mf_error_t err = {0};
    mf_cur_t *c;
    uint8_t *buf = mf_malloc(e->record_bytes);
    uint32_t x = 12345;
    cr_assert_eq(mf_txn_begin(e->s, &err), 0);
    cr_assert_eq(mf_cur_open(e->s, URI, &c, &err), 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < e->record_bytes; k++) {
            x = x * 1103515245u + 12345u;
            buf[k] = (uint8_t)(x >> 16);
        }
        cr_assert_eq(mf_cur_insert_rid(c, i, buf, e->record_bytes), 0);
    }
    mf_cur_close(c);
    free(buf);
    cr_assert_eq(mf_txn_commit(e->s, false, &err), 0, "%s", err.msg);
}

/* Removes every record whose id is not a multiple of 10. */
static void
delete_most(env_t *e, int n)
{
    mf_error_t err = {0};
    mf_cur_t *c;
    cr_assert_eq(mf_txn_begin(e->s, &err), 0);
    cr_assert_eq(mf_cur_open(e->s, URI, &c, &err), 0, "%s", err.msg);
    for (int i = 0; i < n; i++) {
        if (i % 10 != 0)
            cr_assert_eq(mf_cur_remove_rid(c, i), 0);
    }
    mf_cur_close(c);
    cr_assert_eq(mf_txn_commit(e->s, false, &err), 0, "%s", err.msg);
}

static int
count_records(env_t *e)
{
    mf_error_t err = {0};
    mf_cur_t *c;
    int n = 0;
    cr_assert_eq(mf_cur_open(e->s, URI, &c, &err), 0, "%s", err.msg);
    while (mf_cur_next(c) == 0) {
        cr_assert_eq(mf_cur_rid(c) % 10, 0, "record %lld should be gone", (long long)mf_cur_rid(c));
        const uint8_t *v;
        size_t len;
        mf_cur_value(c, &v, &len);
        cr_assert_eq(len, e->record_bytes);
        n++;
    }
    mf_cur_close(c);
    mf_storage_session_release(e->s);
    return n;
}

/* Moves c back to the table's start and counts the records it steps over. */
static int
count_from_start(mf_cur_t *c)
{
    int n = 0;
    mf_cur_reset(c);
    while (mf_cur_next(c) == 0)
        n++;
    return n;
}

/* Fills n records of record_bytes, deletes 90% of them and checks what compaction gives back. */
static void
check_compaction(int n, size_t record_bytes)
{
    env_t e;
    mf_error_t err = {0};
    int64_t file0, free0, file1, free1, file2, free2;

    env_init(&e, false, record_bytes);
    fill(&e, n);
    cr_assert_eq(mf_storage_checkpoint(e.s, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_table_space(e.s, URI, &file0, &free0, &err), 0, "%s", err.msg);
    cr_assert_gt(file0, (int64_t)n * (int64_t)record_bytes, "file %lld", (long long)file0);
    cr_assert_eq(mf_storage_table_size(e.s, URI), file0);

    delete_most(&e, n);
    cr_assert_eq(mf_storage_checkpoint(e.s, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_table_space(e.s, URI, &file1, &free1, &err), 0, "%s", err.msg);
    cr_assert_geq(file1, file0 * 9 / 10, "deleting does not shrink the file: %lld -> %lld", (long long)file0,
                  (long long)file1);
    cr_assert_gt(free1, file0 * 8 / 10, "free after the deletions: %lld of %lld", (long long)free1, (long long)file1);

    cr_assert_eq(mf_storage_compact(e.s, URI, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_table_space(e.s, URI, &file2, &free2, &err), 0, "%s", err.msg);
    cr_assert_lt(file2, file1 / 4, "compact: %lld -> %lld bytes", (long long)file1, (long long)file2);
    cr_assert_lt(free2, free1 / 10);
    cr_assert_eq(count_records(&e), n / 10);
    env_destroy(&e);
}

Test(storage, compact_returns_the_space_of_deleted_records)
{
    check_compaction(NRECORDS, RECORD_BYTES);
}

Test(storage, compact_returns_the_space_of_deleted_large_records)
{
    check_compaction(300, BIG_RECORD_BYTES);
}

Test(storage, compact_stops_when_the_operation_is_killed)
{
    env_t e;
    mf_error_t err = {0};
    int64_t before, after, free_bytes;

    env_init(&e, false, RECORD_BYTES);
    fill(&e, NRECORDS);
    cr_assert_eq(mf_storage_checkpoint(e.s, &err), 0, "%s", err.msg);
    delete_most(&e, NRECORDS);
    cr_assert_eq(mf_storage_checkpoint(e.s, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_table_space(e.s, URI, &before, &free_bytes, &err), 0, "%s", err.msg);

    mf_curops_t *reg = mf_curops_new();
    mf_curop_t *op = mf_curop_begin(reg, "command", "test.c", "conn1", NULL, 1);
    mf_curop_set_current(op);
    cr_assert(mf_curops_kill(reg, mf_curop_opid(op)));
    cr_assert_eq(mf_storage_compact(e.s, URI, &err), -1);
    cr_assert_eq(err.code, 11601, "code %d: %s", err.code, err.msg);
    mf_curop_set_current(NULL);
    mf_curop_end(op);
    mf_curops_free(reg);

    cr_assert_eq(mf_storage_table_space(e.s, URI, &after, &free_bytes, &err), 0, "%s", err.msg);
    cr_assert_eq(after, before, "a killed compact did nothing: %lld -> %lld", (long long)before, (long long)after);
    cr_assert_eq(count_records(&e), NRECORDS / 10);
    env_destroy(&e);
}

Test(storage, in_memory_has_nothing_to_checkpoint_or_compact)
{
    env_t e;
    mf_error_t err = {0};
    int64_t file_bytes = -1, free_bytes = -1;

    env_init(&e, true, RECORD_BYTES);
    fill(&e, 1000);
    delete_most(&e, 1000);
    cr_assert_eq(mf_storage_checkpoint(e.s, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_compact(e.s, URI, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_table_space(e.s, URI, &file_bytes, &free_bytes, &err), 0, "%s", err.msg);
    cr_assert_eq(file_bytes, 0);
    cr_assert_eq(free_bytes, 0);
    cr_assert_eq(count_records(&e), 100);
    env_destroy(&e);
}

/*
 * mf_cur_remove_here removes the entry a search or a step left the cursor
 * on, and only that one; the cursor stays where it was, so the walk goes on
 * to the next entry. Committed and read back on a fresh cursor.
 */
Test(storage, remove_here_removes_the_entry_the_cursor_is_on)
{
    env_t e;
    mf_error_t err = {0};
    mf_cur_t *c;

    env_init(&e, false, 16);
    fill(&e, 100);
    cr_assert_eq(mf_txn_begin(e.s, &err), 0);
    cr_assert_eq(mf_cur_open(e.s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_search_rid(c, 42), 0);
    cr_assert_eq(mf_cur_remove_here(c), 0);
    cr_assert_eq(mf_cur_next(c), 0);
    cr_assert_eq(mf_cur_rid(c), 43, "the cursor stayed on 42 and stepped to 43");
    cr_assert_eq(mf_cur_remove_here(c), 0, "after a step too");
    mf_cur_close(c);
    cr_assert_eq(mf_txn_commit(e.s, false, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_open(e.s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_search_rid(c, 42), MF_NOTFOUND);
    cr_assert_eq(mf_cur_search_rid(c, 43), MF_NOTFOUND);
    cr_assert_eq(mf_cur_search_rid(c, 41), 0);
    cr_assert_eq(mf_cur_search_rid(c, 44), 0);
    cr_assert_eq(count_from_start(c), 98, "only 42 and 43 are gone");
    mf_cur_close(c);
    env_destroy(&e);
}

/*
 * mf_cur_find_rid finds a record wherever its cursor is: just past its last
 * entry (the ascending walk of a delete batch), behind it, far ahead or not
 * at all. A cursor closed with mf_cur_close_near comes back from
 * mf_cur_open_near on its entry inside the transaction, and reset from
 * mf_cur_open or once the transaction has ended.
 */
Test(storage, find_is_exact_from_any_position_and_near_cursors_end_with_the_transaction)
{
    env_t e;
    mf_error_t err = {0};
    mf_cur_t *c;

    env_init(&e, false, 16);
    fill(&e, 100);
    cr_assert_eq(mf_txn_begin(e.s, &err), 0);
    cr_assert_eq(mf_cur_open_near(e.s, URI, &c, &err), 0, "%s", err.msg);
    for (int64_t rid = 10; rid < 20; rid++) {
        cr_assert_eq(mf_cur_find_rid(c, rid), 0);
        cr_assert_eq(mf_cur_rid(c), rid);
        if (rid % 3 == 0)
            cr_assert_eq(mf_cur_remove_here(c), 0);
    }
    cr_assert_eq(mf_cur_find_rid(c, 12), MF_NOTFOUND, "removed in this transaction");
    cr_assert_eq(mf_cur_find_rid(c, 5), 0, "behind the position");
    cr_assert_eq(mf_cur_rid(c), 5);
    cr_assert_eq(mf_cur_find_rid(c, 90), 0, "far ahead");
    cr_assert_eq(mf_cur_rid(c), 90);
    cr_assert_eq(mf_cur_find_rid(c, 1000), MF_NOTFOUND);
    cr_assert_eq(mf_cur_find_rid(c, 40), 0);
    mf_cur_close_near(c);
    cr_assert_eq(mf_cur_open_near(e.s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_rid(c), 40, "parked on its entry");
    cr_assert_eq(mf_cur_next(c), 0);
    cr_assert_eq(mf_cur_rid(c), 41);
    mf_cur_close_near(c);
    cr_assert_eq(mf_cur_open(e.s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_next(c), 0);
    cr_assert_eq(mf_cur_rid(c), 0, "mf_cur_open resets a parked cursor");
    mf_cur_close_near(c);
    cr_assert_eq(mf_txn_commit(e.s, false, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_open_near(e.s, URI, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_cur_next(c), 0);
    cr_assert_eq(mf_cur_rid(c), 0, "the commit reset it");
    cr_assert_eq(count_from_start(c), 97, "12, 15 and 18 are gone");
    mf_cur_close(c);
    env_destroy(&e);
}

/* Counts callback calls (mf_txn_on_end) and remembers the last outcome. */
static int ends, last_committed = -1;
static void
on_end(void *arg, bool committed)
{
    (void)arg;
    ends++;
    last_committed = committed;
}

/* Inserts record rid in a transaction of its own (nested inside a user transaction when one is open). */
static int
insert_one(env_t *e, int64_t rid, mf_error_t *err)
{
    mf_cur_t *c;
    if (mf_txn_begin(e->s, err) != 0)
        return -1;
    if (mf_cur_open(e->s, URI, &c, err) != 0) {
        mf_txn_abort(e->s);
        return -1;
    }
    int ret = mf_cur_insert_rid(c, rid, "abcd", 4);
    mf_cur_close(c);
    if (ret != 0) {
        mf_txn_abort(e->s);
        return ret;
    }
    return mf_txn_commit(e->s, false, err);
}

/* Whether record rid is there, read on a second thread's session (what another client sees). */
typedef struct peek {
    env_t *e;
    int64_t rid;
    int found;
} peek_t;

static void *
peek_main(void *arg)
{
    peek_t *p = arg;
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(p->e->st);
    mf_cur_t *c;
    cr_assert_eq(mf_cur_open(s, URI, &c, &err), 0, "%s", err.msg);
    p->found = mf_cur_search_rid(c, p->rid) == 0;
    mf_cur_close(c);
    mf_storage_session_close_thread(p->e->st);
    return NULL;
}

static bool
seen_elsewhere(env_t *e, int64_t rid)
{
    pthread_t th;
    peek_t p = {e, rid, -1};
    cr_assert_eq(pthread_create(&th, NULL, peek_main, &p), 0);
    pthread_join(th, NULL);
    return p.found == 1;
}

/*
 * A user transaction (a multi-document transaction's): the commands' own
 * transactions nest inside it and commit nothing; end callbacks wait for
 * its end; other sessions see its writes only once it commits, all of them.
 */
Test(storage, user_transaction_commits_its_nested_transactions_together)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e, false, 16);
    ends = 0;
    cr_assert_eq(mf_txn_user_begin(e.s, &err), 0, "%s", err.msg);
    cr_assert(mf_txn_user(e.s));
    cr_assert(!mf_txn_active(e.s), "between commands, no nested transaction is active");
    cr_assert_eq(insert_one(&e, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_txn_begin(e.s, &err), 0);
    cr_assert(mf_txn_active(e.s));
    mf_txn_on_end(e.s, on_end, NULL);
    cr_assert(!mf_txn_on_prepare(e.s, NULL, NULL), "no pre-commit step of a nested transaction");
    cr_assert_eq(mf_txn_commit(e.s, false, &err), 0);
    cr_assert_eq(insert_one(&e, 2, &err), 0, "%s", err.msg);
    cr_assert_eq(ends, 0, "a nested commit ends nothing");
    cr_assert(!seen_elsewhere(&e, 1) && !seen_elsewhere(&e, 2), "nothing visible before the commit");
    cr_assert_eq(mf_txn_user_commit(e.s, false, &err), 0, "%s", err.msg);
    cr_assert(!mf_txn_user(e.s));
    cr_assert_eq(ends, 1);
    cr_assert_eq(last_committed, 1);
    cr_assert(seen_elsewhere(&e, 1) && seen_elsewhere(&e, 2), "both visible after it");
    env_destroy(&e);
}

/* Its abort rolls back every nested transaction's writes; end callbacks hear of the abort. */
Test(storage, user_transaction_abort_rolls_back_everything)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e, false, 16);
    ends = 0;
    cr_assert_eq(mf_txn_user_begin(e.s, &err), 0, "%s", err.msg);
    cr_assert_eq(insert_one(&e, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_txn_begin(e.s, &err), 0);
    mf_txn_on_end(e.s, on_end, NULL);
    cr_assert_eq(mf_txn_commit(e.s, false, &err), 0);
    mf_txn_user_abort(e.s);
    cr_assert_eq(ends, 1);
    cr_assert_eq(last_committed, 0);
    cr_assert(!seen_elsewhere(&e, 1));
    /* The session works normally afterwards. */
    cr_assert_eq(insert_one(&e, 3, &err), 0, "%s", err.msg);
    cr_assert(seen_elsewhere(&e, 3));
    env_destroy(&e);
}

/*
 * A nested abort after a write cannot undo that write alone: the user
 * transaction is doomed (nested begins fail with WriteConflict, so a retry
 * loop cannot write twice), and its commit rolls back and fails. A nested
 * abort that wrote nothing (a read) leaves it be.
 */
Test(storage, nested_abort_after_a_write_dooms_the_user_transaction)
{
    env_t e;
    mf_error_t err = {0};
    env_init(&e, false, 16);
    cr_assert_eq(mf_txn_user_begin(e.s, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_txn_begin(e.s, &err), 0);
    mf_txn_abort(e.s); /* a read-only nested transaction */
    cr_assert(!mf_txn_user_doomed(e.s));
    cr_assert_eq(insert_one(&e, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(insert_one(&e, 1, &err), MF_DUPKEY, "the second insert of 1 fails and is aborted");
    cr_assert(mf_txn_user_doomed(e.s));
    cr_assert_neq(mf_txn_begin(e.s, &err), 0);
    cr_assert_eq(err.code, MF_E_WriteConflict);
    cr_assert_neq(mf_txn_user_commit(e.s, false, &err), 0);
    cr_assert_eq(err.code, MF_E_WriteConflict);
    cr_assert(!mf_txn_user(e.s));
    cr_assert(!seen_elsewhere(&e, 1), "the doomed transaction's first insert was rolled back too");
    env_destroy(&e);
}
