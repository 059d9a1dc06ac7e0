/*
 * batch.h: applying a write to many documents in chunked transactions, and
 * the batched multi-document delete built on it.
 *
 * mf_batch_run runs a per-item function over items [*start, n), up to chunk
 * items per WiredTiger transaction. A write conflict (WT_ROLLBACK) aborts the
 * chunk and retries it after a short backoff. An item that fails aborts the
 * chunk; the items before it are committed again on their own, and the
 * failure is reported at its index, so callers can give MongoDB's
 * per-document writeErrors (ordered batches stop there, unordered ones call
 * again from the next item). Side effects that must survive only a commit
 * belong in per-item slots that on_commit folds in.
 *
 * mf_delete_rids is the one multi-document delete path: the delete command
 * (limit: 0) and the TTL monitor both use it. Each record is re-fetched and
 * re-checked by the caller's predicate inside its transaction, so a document
 * changed since it was selected is judged on its current content.
 */
#ifndef MF_BATCH_H
#define MF_BATCH_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "common/error.h"
#include "storage/storage.h"

/* Per-item function: 0 done, MF_CONFLICT to retry the chunk, -1 failed with err. */
typedef int (*mf_batch_item_fn)(void *arg, size_t i, mf_error_t *err);
/* Called after items [from, to) committed. */
typedef void (*mf_batch_commit_fn)(void *arg, size_t from, size_t to);

/*
 * mf_batch_run: see above. Returns 0 when all committed (*start = n); 1 when
 * item *start failed (err holds its error); -1 when a commit itself failed.
 */
int mf_batch_run(mf_sess_t *s, size_t *start, size_t n, size_t chunk, bool durable, mf_batch_item_fn fn,
                 mf_batch_commit_fn on_commit, void *arg, mf_error_t *err) MF_WUR;

/*
 * mf_batch_run_hooked: mf_batch_run with hooks around the items of each
 * transaction, all three required:
 * - before_items(arg, from, to, err) before a transaction of items [from,
 *   to) begins (outside any transaction; non-zero stops the run, which then
 *   returns -1 with err);
 * - finish_items(arg, from, to, &failed, err) once every item ran, before
 *   the commit: 0, or as an item function fails (-1 with err, MF_CONFLICT),
 *   with failed the item it failed on (from <= failed < to);
 * - after_items(arg) on every path that called before_items, once the
 *   items (and finish_items) have run, before the commit or abort.
 */
typedef struct mf_batch_hooks {
    int (*before_items)(void *arg, size_t from, size_t to, mf_error_t *err);
    int (*finish_items)(void *arg, size_t from, size_t to, size_t *failed, mf_error_t *err);
    void (*after_items)(void *arg);
} mf_batch_hooks_t;

int mf_batch_run_hooked(mf_sess_t *s, size_t *start, size_t n, size_t chunk, bool durable, mf_batch_item_fn fn,
                        mf_batch_commit_fn on_commit, const mf_batch_hooks_t *hooks, void *arg,
                        mf_error_t *err) MF_WUR;

/*
 * mf_batch_set_conflict_limit: how many write-conflict retries of one chunk
 * this thread's mf_batch_run makes before giving up with 112 WriteConflict
 * (default 40000, about 80 s: longer than a transaction may stay open). Background work that
 * holds locks (the TTL monitor) sets a small limit and tries again later.
 */
void mf_batch_set_conflict_limit(int limit);

/*
 * mf_batch_backoff: sleeps a little longer for each attempt (write-conflict
 * retry), and counts the conflict for the calling thread's operation.
 */
void mf_batch_backoff(int attempt);

/*
 * mf_batch_conflict_retry: after attempt (from 0) of a one-document write
 * met a write conflict: 0 to try again (err cleared, after a backoff), or -1
 * with err: the operation was interrupted (maxTimeMS, killOp, shutdown) or
 * the thread's conflict limit is used up (112 "too many write conflicts").
 * mongod retries until the conflicting transaction ends; so does this, up
 * to the limit (about 20 s by default).
 */
int mf_batch_conflict_retry(int attempt, mf_error_t *err) MF_WUR;

/* Predicate for mf_delete_rids: true if doc (record rid) should still be deleted (mf_coll_remove_if's check). */
typedef mf_remove_check_fn mf_delete_check_fn;

typedef struct mf_delete_stats {
    int64_t deleted;
    int64_t batches;
    int64_t ranges;        /* batches whose records went in ranges (some of them) */
    int64_t range_records; /* records that went in ranges */
    int64_t ix_ranges;     /* indexes whose entries a batch removed in ranges (some of them), summed over batches */
} mf_delete_stats_t;

/*
 * mf_delete_rids: deletes the records rids[0..n) of c that check() still
 * accepts, batch_docs per transaction (0 = all in one). ranges (flags
 * MF_DEL_RANGE_*, 0 for none): a transaction of at least
 * MF_RANGE_MIN_ITEMS documents removes its records in ranges when most of
 * their ids are in runs of consecutive ids (documents inserted in the order
 * they expire, also by several clients at once), and each index's entries
 * in ranges (the runs of them nothing else lies between) when no other
 * transaction inserted into c's indexes meanwhile: one log record per run
 * instead of one per entry (mf_coll_remove_deferred); the transaction's
 * pre-commit step is then its
 * own (mf_txn_on_prepare). Index ranges commit through c's range guard,
 * whose check comes after every pre-commit step, replication's wait for
 * its raft entry included: a writer could enter meanwhile and roll the
 * transaction back after its entry was committed, so a replica-set member
 * must not ask for them. Returns 0, or -1 with err (stats say what was
 * committed before the failure).
 */
#define MF_DEL_RANGE_RECORDS 0x1 /* records may go as ranges */
#define MF_DEL_RANGE_INDEXES 0x2 /* index entries may go as ranges (not on a replica-set member, see above) */
int mf_delete_rids(mf_sess_t *s, mf_coll_t *c, const int64_t *rids, size_t n, size_t batch_docs, bool durable,
                   mf_delete_check_fn check, void *check_arg, int ranges, mf_delete_stats_t *stats,
                   mf_error_t *err) MF_WUR;

#endif /* MF_BATCH_H */
