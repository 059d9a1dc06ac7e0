/*
 * agg_spill.h: the external sorter behind the blocking aggregation stages.
 *
 * Design. A sorter collects documents in memory and counts the bytes it
 * has allocated for them (documents packed in chunks, pointer arrays; see
 * agg_spill.c). Past its budget it either fails (disk use
 * not allowed: 292 QueryExceededMemoryLimitNoDiskUseAllowed, with the
 * caller's message) or sorts what it holds (stable) and writes it as a
 * sorted run to a temporary file under <dbpath>/_tmp/ (the documents' raw
 * BSON, back to back: each starts with its own length). At most 64 runs
 * exist at once: beyond that the runs are first merged into one. When input ends,
 * the in-memory remainder is sorted and becomes the last run, and
 * mf_sorter_next merges all runs k ways, holding one document per run in
 * memory. Ties go to the earlier run, so the sort is stable overall (a
 * $group that spills relies on it to keep $first/$last/$push in input order).
 * Every 16 MiB of input, and when its in-memory run is released, a sorter
 * asks the allocator to return free pages to the OS (jemalloc, when linked),
 * so storage-cache churn during a long sort does not pile up in the process.
 *
 * Temporary files belong to their sorter: mf_sorter_free closes and removes
 * them (cursor exhausted, killed, or reaped by the idle timeout), and
 * mf_spill_dir_prepare removes leftovers of an earlier process at startup.
 * Long loops (sorting, writing, merging) check the thread's interruption
 * deadline (mf_exec_check_deadline in query/exec.h).
 *
 * A sorter is used by one thread at a time (a cursor is checked out
 * exclusively); nothing in it is shared.
 */
#ifndef MF_AGG_SPILL_H
#define MF_AGG_SPILL_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/* Comparison of two documents: <0, 0, >0. */
typedef int (*mf_sorter_cmp_fn)(void *arg, const bson_t *a, const bson_t *b);

typedef struct mf_sorter mf_sorter_t;

/*
 * mf_spill_dir_prepare: the directory for an engine's temporary files,
 * <dbpath>/_tmp (created if needed), emptied of any files left by an
 * earlier process. Returns an owned string (free), never NULL.
 */
char *mf_spill_dir_prepare(const char *dbpath);


/*
 * mf_sorter_new: a sorter ordering by cmp(arg, ...) (arg must outlive the
 * sorter) with a memory budget of budget bytes, writing its runs under dir
 * (NULL: $TMPDIR or /tmp; copied). allow_disk false makes exceeding the
 * budget fail with 292 and errmsg; errmsg is copied.
 */
mf_sorter_t *mf_sorter_new(mf_sorter_cmp_fn cmp, void *arg, int64_t budget, bool allow_disk, const char *errmsg,
                           const char *dir);

/*
 * mf_sorter_new_sort: mf_sorter_new for a blocking sort ($sort, a find's
 * SORT, $setWindowFields' partitions), failing past the budget without
 * allow_disk with mongod's "Sort exceeded memory limit of <budget> bytes,
 * but did not opt in to external sorting."
 */
mf_sorter_t *mf_sorter_new_sort(mf_sorter_cmp_fn cmp, void *arg, int64_t budget, bool allow_disk, const char *dir);

/* mf_sorter_free: frees s, its documents, and closes and removes its temporary files. NULL is a no-op. */
void mf_sorter_free(mf_sorter_t *s);

/*
 * mf_sorter_add: adds doc; takes ownership of doc (heap bson_t). May write
 * a sorted run to disk. Returns 0, or -1 with err (292, I/O 1 InternalError,
 * or the interruption deadline).
 */
int mf_sorter_add(mf_sorter_t *s, bson_t *doc, mf_error_t *err) MF_WUR;

/* mf_sorter_finish: no more input; prepares the merge. Returns 0 or -1 with err. */
int mf_sorter_finish(mf_sorter_t *s, mf_error_t *err) MF_WUR;

/*
 * mf_sorter_next: the next document in order, owned by the caller (*out
 * NULL at the end). Only after mf_sorter_finish. Returns 0 or -1 with err.
 */
int mf_sorter_next(mf_sorter_t *s, bson_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_sorter_set_limit: only the first limit documents in order will be read
 * ($sort followed by $limit): the sorter keeps at most about twice that many
 * in memory, discarding the tail, and spills only if those exceed the budget.
 */
void mf_sorter_set_limit(mf_sorter_t *s, int64_t limit);

/* mf_sorter_spill_now: writes what the sorter holds as a sorted run now (a $group flushing partial groups). */
int mf_sorter_spill_now(mf_sorter_t *s, mf_error_t *err) MF_WUR;

/* mf_sorter_spilled: number of runs written to disk so far. */
int64_t mf_sorter_spilled(const mf_sorter_t *s);

/* mf_sorter_spill_totals: the documents and bytes written in those runs (s may be NULL: none). */
void mf_sorter_spill_totals(const mf_sorter_t *s, int64_t *docs, int64_t *bytes);

/* mf_sorter_mem: the bytes the sorter's in-memory run has allocated now (what counts against the budget). */
int64_t mf_sorter_mem(const mf_sorter_t *s);

#endif /* MF_AGG_SPILL_H */
