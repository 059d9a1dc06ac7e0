/*
 * batch.c: chunked transactions and the batched delete (see batch.h).
 */
#include "common/alloc.h"
#include "query/batch.h"

#include <stdlib.h>
#include <time.h>

#include "catalog/coll_write.h"
#include "common/curop.h"

/*
 * Retries of one chunk after write conflicts (at most 2 ms apart). The
 * default outlasts transactionLifetimeLimitSeconds (60 s): a write that
 * meets an open transaction's document waits for it to commit or be
 * aborted, as mongod's writeConflictRetry does, while killOp, maxTimeMS
 * and shutdown end the wait at once (checked before every retry).
 */
static __thread int conflict_limit = 40000;

void
mf_batch_set_conflict_limit(int limit)
{
    conflict_limit = limit > 0 ? limit : 1;
}

void
mf_batch_backoff(int attempt)
{
    mf_curop_note_conflict(mf_curop_current());
    struct timespec ts = {0, (long)(attempt < 10 ? attempt * 100000 : 2000000)};
    nanosleep(&ts, NULL);
}

int
mf_batch_conflict_retry(int attempt, mf_error_t *err)
{
    mf_err_clear(err);
    if (mf_curop_check_current(err) != 0)
        return -1;
    if (attempt >= conflict_limit)
        return mf_err_set(err, MF_E_WriteConflict, "too many write conflicts");
    mf_batch_backoff(attempt);
    return 0;
}

/* The item loop's own result when a yield point stopped it (never an item function's: 0, -1 or MF_CONFLICT). */
#define ITEMS_INTERRUPTED (-2)

int
mf_batch_run(mf_sess_t *s, size_t *start, size_t n, size_t chunk, bool durable, mf_batch_item_fn fn,
             mf_batch_commit_fn on_commit, void *arg, mf_error_t *err)
{
    return mf_batch_run_hooked(s, start, n, chunk, durable, fn, on_commit, NULL, arg, err);
}

int
mf_batch_run_hooked(mf_sess_t *s, size_t *start, size_t n, size_t chunk, bool durable, mf_batch_item_fn fn,
                    mf_batch_commit_fn on_commit, const mf_batch_hooks_t *hooks, void *arg, mf_error_t *err)
{
    size_t i = *start;
    int attempt = 0;

    if (chunk == 0)
        chunk = n > 0 ? n : 1;
    /*
     * In a multi-document transaction every item is a transaction of its
     * own (nested, so they cost nothing): a failing item is then alone in
     * its transaction, whose abort (which dooms the user transaction) need
     * not be followed by a retry of the items before it.
     */
    if (mf_txn_user(s))
        chunk = 1;
    while (i < n) {
        size_t end = i + chunk < n ? i + chunk : n, j;
        int r = 0;
        /* A yield point: killOp, maxTimeMS and shutdown stop the write between chunks. */
        if (mf_curop_check_current(err) != 0) {
            *start = i;
            return -1;
        }
    again:
        if (hooks != NULL && hooks->before_items(arg, i, end, err) != 0) {
            *start = i;
            return -1;
        }
        if (mf_txn_begin(s, err) != 0) {
            if (hooks != NULL)
                hooks->after_items(arg);
            return -1;
        }
        for (j = i; j < end; j++) {
            /* Inside a large chunk too: every 256 items is a yield point (the chunk is rolled back). */
            if ((j - i) % 256 == 255 && mf_curop_check_current(err) != 0) {
                r = ITEMS_INTERRUPTED;
                break;
            }
            r = fn(arg, j, err);
            if (r != 0)
                break;
        }
        if (r == 0 && hooks != NULL)
            r = hooks->finish_items(arg, i, end, &j, err);
        if (hooks != NULL)
            hooks->after_items(arg);
        if (r == ITEMS_INTERRUPTED) {
            mf_txn_abort(s);
            *start = i;
            return -1;
        }
        if (r == 0) {
            if (mf_txn_commit(s, durable, err) != 0) {
                if (err->code == MF_E_WriteConflict && attempt++ < conflict_limit) {
                    if (mf_curop_check_current(err) != 0) {
                        *start = i;
                        return -1;
                    }
                    mf_batch_backoff(attempt);
                    goto again;
                }
                *start = i;
                return -1;
            }
            attempt = 0;
            if (on_commit)
                on_commit(arg, i, end);
            i = end;
            continue;
        }
        mf_txn_abort(s);
        /* An item that met a conflict deeper down (WT_ROLLBACK reported as WriteConflict) is retried the same way. */
        if (r == MF_CONFLICT || (r < 0 && err->code == MF_E_WriteConflict)) {
            if (r < 0)
                mf_err_clear(err);
            if (attempt++ > conflict_limit) {
                *start = j;
                mf_err_set(err, MF_E_WriteConflict, "too many write conflicts");
                return 1;
            }
            /* A yield point between retries: maxTimeMS, killOp and shutdown end a wait behind another writer. */
            if (mf_curop_check_current(err) != 0) {
                *start = i;
                return -1;
            }
            mf_batch_backoff(attempt);
            goto again;
        }
        if (j > i) {
            /* Commit the items before the failing one on their own, then fail at j. */
            end = j;
            goto again;
        }
        *start = j;
        return 1;
    }
    *start = n;
    return 0;
}

typedef struct del_ctx {
    mf_sess_t *s;
    mf_coll_t *c;
    const int64_t *rids;
    size_t n;
    uint8_t *slot;
    mf_delete_check_fn check;
    void *check_arg;
    mf_delete_stats_t *stats;
    /* ranges: MF_DEL_RANGE_* flags; defer collects the open transaction's (when collecting). */
    int ranges;
    size_t chunk; /* items per transaction */
    mf_removals_t defer;
    bool txn_seen, collecting; /* an item of the open transaction was seen; it collects (its pre-commit step is ours) */
    size_t ranged;             /* this many of its records went in ranges */
    int ix_ranged;             /* ... and this many indexes' entries (some of them) */
    /*
     * The collection's range guard token (mf_rguard_token), read before each
     * transaction begins: at the start and at every transaction's end, which
     * comes before mf_batch_run begins the next.
     */
    int64_t token;
    bool ix_failed; /* the last transaction's index ranges rolled back: its retry goes one by one */
    int64_t *scratch; /* room for a transaction's record ids (mf_rids_in_runs) */
} del_ctx_t;

/* The transaction's end, committed or not: the next item starts a new one. */
static void
del_txn_end(void *arg, bool committed)
{
    del_ctx_t *x = arg;
    x->ix_failed = !committed && x->ix_ranged > 0;
    x->collecting = x->txn_seen = false;
    x->token = mf_rguard_token(&x->c->guard);
}

/* Before the commit: the collected records and index entries go, as ranges where they can. */
static int
del_prepare(void *arg, mf_sess_t *s, mf_error_t *err)
{
    del_ctx_t *x = arg;
    int r = mf_coll_remove_deferred(s, x->c, &x->defer, x->token, &x->ranged, &x->ix_ranged, err);
    return r == MF_CONFLICT ? mf_err_write_conflict(err) : r;
}

static int
del_item(void *arg, size_t i, mf_error_t *err)
{
    del_ctx_t *x = arg;
    bool removed = false;
    if (x->ranges && !x->txn_seen) {
        /* The first item of a transaction (a retry starts one afresh): ranges or not, for all of it. */
        size_t to = i + x->chunk < x->n ? i + x->chunk : x->n;
        x->txn_seen = true;
        x->collecting = false;
        x->ranged = 0;
        x->ix_ranged = 0;
        mf_txn_on_end(x->s, del_txn_end, x);
        /*
         * Records are collected when at least half of them are in runs of
         * consecutive ids (see mf_coll_remove_deferred for why nothing else
         * can be in such a run): the others then cost a second search each.
         */
        bool rec = (x->ranges & MF_DEL_RANGE_RECORDS) && to - i >= MF_RANGE_MIN_ITEMS &&
                   mf_rids_in_runs(x->rids + i, to - i, x->scratch) * 2 >= to - i;
        /* Index entries: only if no writer was in the collection's indexes when the transaction began. */
        bool ix = (x->ranges & MF_DEL_RANGE_INDEXES) && x->token >= 0 && !x->ix_failed;
        if (to - i >= MF_RANGE_MIN_ITEMS && (rec || ix) && mf_txn_on_prepare(x->s, del_prepare, x)) {
            x->collecting = true;
            mf_removals_begin(&x->defer, x->c, rec, ix);
        }
    }
    int ret = mf_coll_remove_if(x->s, x->c, x->rids[i], x->check, x->check_arg, x->collecting ? &x->defer : NULL,
                                &removed, err);
    x->slot[i] = removed ? 1 : 0;
    return ret;
}

static void
del_commit(void *arg, size_t from, size_t to)
{
    del_ctx_t *x = arg;
    for (size_t i = from; i < to; i++)
        x->stats->deleted += x->slot[i];
    x->stats->batches++;
    x->stats->ranges += x->ranged > 0;
    x->stats->range_records += (int64_t)x->ranged;
    x->stats->ix_ranges += x->ix_ranged;
    x->ranged = 0;
    x->ix_ranged = 0;
}

int
mf_delete_rids(mf_sess_t *s, mf_coll_t *c, const int64_t *rids, size_t n, size_t batch_docs, bool durable,
               mf_delete_check_fn check, void *check_arg, int ranges, mf_delete_stats_t *stats, mf_error_t *err)
{
    del_ctx_t x = {.s = s, .c = c, .rids = rids, .n = n, .slot = mf_calloc(n + 1, 1), .check = check,
                   .check_arg = check_arg, .stats = stats, .ranges = ranges, .chunk = batch_docs ? batch_docs : n};
    size_t start = 0;
    x.token = mf_rguard_token(&c->guard); /* before the first transaction begins */
    x.scratch = ranges ? mf_malloc((x.chunk < n ? x.chunk : n) * sizeof(*x.scratch) + 1) : NULL;
    int r = mf_batch_run(s, &start, n, batch_docs, durable, del_item, del_commit, &x, err);
    free(x.scratch);
    free(x.slot);
    mf_removals_free(&x.defer);
    return r == 0 ? 0 : -1;
}
