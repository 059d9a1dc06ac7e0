/*
 * storage.h: the WiredTiger adapter, the only module that includes wiredtiger.h.
 *
 * One WT_CONNECTION per process (mf_storage_t). Each thread that touches data
 * uses its own session (mf_sess_t), created on first use and kept for the
 * thread's life (WT sessions are not thread-safe). Tables:
 *
 *   table:_mf_catalog       key "u" namespace, value "u" BSON catalog entry
 *   table:_mf_sizes         key "u" collection ident, value "u" BSON {count, size}
 *   table:coll-<ident>      key "q" record id,  value "u" BSON document
 *   table:index-<ident>     key "u" keystring [+ record id], value "u"
 *
 * Durability: the log (journal) is on and commits do not sync one by one; a
 * flusher thread syncs the log every 100 ms (mongod's commitIntervalMs), and
 * a commit that asks for durability (j: true) syncs on commit, which
 * WiredTiger group-commits across concurrent threads. Checkpoints run every
 * 60 s and at clean shutdown.
 *
 * Errors: functions return 0, MF_NOTFOUND, MF_DUPKEY, MF_CONFLICT (a
 * WT_ROLLBACK: the caller aborts the transaction and retries), or -1 with err
 * set for anything else.
 */
#ifndef MF_STORAGE_H
#define MF_STORAGE_H

#include <bson/bson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define MF_NOTFOUND 1
#define MF_DUPKEY 2
#define MF_CONFLICT 3

typedef struct mf_storage mf_storage_t;
typedef struct mf_sess mf_sess_t;
typedef struct mf_cur mf_cur_t;

/* mf_storage_open: opens (creating if needed) the database at dbpath. */
int mf_storage_open(const char *dbpath, mf_storage_t **out, mf_error_t *err) MF_WUR;
/*
 * mf_storage_open_ex: as mf_storage_open; with in_memory, WiredTiger keeps
 * everything in its cache (no journal, no files in dbpath, which must exist)
 * and the data is gone after close. cache_mb: WiredTiger's cache in MB, 0
 * for mf_storage_cache_mb_default of the memory this process is granted
 * (common/sysres.h), as mongod sizes it.
 */
int mf_storage_open_ex(const char *dbpath, bool in_memory, int64_t cache_mb, mf_storage_t **out,
                       mf_error_t *err) MF_WUR;

#define MF_STORAGE_CACHE_MIN_MB 256        /* mongod's floor for the cache, also for a percentage */
#define MF_STORAGE_CACHE_MAX_MB 10000000LL /* mongod's ceiling (10 TB as 10,000,000 MB), also for 10000 GB */
/*
 * mf_storage_cache_mb_default: mongod's default WiredTiger cache for
 * mem_limit bytes of memory: half of what is left after 1 GB, at least
 * MF_STORAGE_CACHE_MIN_MB (a 4 GB machine gets 1,536 MB, a 1 GB container 256).
 */
int64_t mf_storage_cache_mb_default(int64_t mem_limit);
/* mf_storage_close: stops the flusher, checkpoints and closes. All sessions die with it. */
void mf_storage_close(mf_storage_t *st);

/* mf_storage_session: this thread's session on st, opened on first call. Never NULL (aborts on failure). */
mf_sess_t *mf_storage_session(mf_storage_t *st);

/*
 * mf_storage_session_close_thread: closes the calling thread's session (if it
 * has one on st) and forgets it, for a thread that is about to exit (a pool
 * worker retiring while the server runs). The thread must have no
 * transaction or cursor open; a later mf_storage_session opens a new one.
 */
void mf_storage_session_close_thread(mf_storage_t *st);

/*
 * mf_storage_session_release: closes the cursors s keeps cached. Called when
 * a command ends (and by background tasks between batches) so no idle
 * session pins a table that DDL wants to drop.
 */
void mf_storage_session_release(mf_sess_t *s);

/* mf_storage_table_size: bytes on disk of a table's file ("table:..."), 0 if unknown. */
int64_t mf_storage_table_size(mf_sess_t *s, const char *uri);

/*
 * mf_storage_table_config: the creation config for a table of kind
 * MF_TABLE_DOCS (a collection's records: snappy, as mongod), MF_TABLE_DOCS_DENSE
 * (time-series buckets: zlib, whose columns compress far better) or
 * MF_TABLE_INDEX (keys: prefix compression, as mongod); without the
 * compressor extensions, uncompressed. Static string. As in mongod, document
 * tables keep every document on its leaf page (leaf_value_max=64MB):
 * WiredTiger would otherwise store a document over about 15 KB (a
 * time-series bucket, say) as an overflow item, which compaction cannot
 * move, so the space deleting such documents frees could not be given back.
 */
enum { MF_TABLE_DOCS = 0, MF_TABLE_DOCS_DENSE = 1, MF_TABLE_INDEX = 2 };
const char *mf_storage_table_config(mf_storage_t *st, int kind);

/* mf_storage_home: the directory the engine was opened on (its dbpath); owned by st, valid while it is open. */
const char *mf_storage_home(mf_storage_t *st);

/*
 * mf_storage_table_space: the size of table uri's file and the bytes inside
 * it that are free for reuse (blocks no checkpoint needs any more; known as of
 * the last checkpoint), as collStats' storageSize and freeStorageSize.
 * Both 0 in memory. Returns 0 or -1 with err.
 */
int mf_storage_table_space(mf_sess_t *s, const char *uri, int64_t *file_bytes, int64_t *free_bytes,
                           mf_error_t *err) MF_WUR;

/*
 * mf_storage_table_stats_bson: appends to out what mongod's collStats shows
 * of table uri under "wiredTiger" (its record store's or an index's
 * appendCustomStats), in mongod's order:
 *   metadata        a copy of the caller's document: mayfly's tables carry
 *                   no app_metadata, so the caller, which knows what kind of
 *                   table this is, says what mongod would have stored there;
 *   creationString  the creation config of the table's file (WiredTiger's
 *                   "metadata:create" cursor, keyed by the column group's
 *                   source), or {error, code, reason} when it cannot be read;
 *   type            the column group's type ("file");
 *   uri             "statistics:" + uri;
 *   then the table's data-source statistics (a statistics cursor opened
 *   with statistics=(fast)), each description split at its first ':' into
 *   a group and a name, as mongod's WiredTigerUtil::exportTableToBSON: one
 *   sub-document per group ("block-manager", "btree", "cache", ...), groups
 *   in byte order, names in WiredTiger's order, values as mf_append_number.
 * Nothing is scaled (mongod does not scale these either).
 *
 * out is the caller's open document (a sub-document it began, typically);
 * this only appends to it and keeps no pointer to it or to metadata. Every
 * string WiredTiger hands out is copied into out before the cursor that
 * returned it moves or closes. Statistics that cannot be read (too few
 * file descriptors left, say) add mongod's error, code and reason fields
 * instead. Returns 0, or -1 with err when the statistics could not be read;
 * out is a complete document either way, so collStats may show it as it
 * is. The caller keeps the table from being dropped meanwhile (the
 * catalog's lock on its collection).
 */
int mf_storage_table_stats_bson(mf_sess_t *s, const char *uri, const bson_t *metadata, bson_t *out,
                                mf_error_t *err);

/*
 * mf_storage_conn_stats_bson: the WiredTiger connection's statistics as
 * mongod's serverStatus shows them under wiredTiger: uri "statistics:",
 * then one document per group ("cache", "connection", "transaction", ...)
 * in byte order, each statistic by its description. 0, or -1 with err.
 */
int mf_storage_conn_stats_bson(mf_sess_t *s, bson_t *out, mf_error_t *err);

/*
 * mf_storage_checkpoint: writes a checkpoint of every table
 * (WT_SESSION::checkpoint), so the table files alone hold every committed
 * write and the blocks deletions freed become reusable. s must have no
 * transaction open. Nothing to do in memory. Returns 0 or -1 with err.
 */
int mf_storage_checkpoint(mf_sess_t *s, mf_error_t *err) MF_WUR;

/*
 * mf_storage_compact: WT_SESSION::compact on table uri: moves the blocks at
 * the end of its file into free space earlier in it and truncates the file,
 * so the space of deleted data goes back to the file system. s must have no
 * transaction open (its cached cursors are closed first). Writes to the
 * table while it runs make it less effective, so callers keep writers out.
 * Runs in rounds of about a second and checks the calling thread's operation
 * between them (common/curop.h: killOp, maxTimeMS, shutdown), failing with
 * its error. Nothing to do in memory. Returns 0 or -1 with err.
 */
int mf_storage_compact(mf_sess_t *s, const char *uri, mf_error_t *err) MF_WUR;

/*
 * mf_storage_compact_round: one round of mf_storage_compact (about a
 * second of WT_SESSION::compact on table uri), for a caller that paces
 * itself (the background compactor, catalog/autocompact.h). *out says what
 * is left: DONE, MORE (call again), BUSY (the file is in use by a drop or
 * a checkpoint: try later) or GONE (the table was dropped). Returns 0, or
 * -1 with err for any other failure. Same preconditions as
 * mf_storage_compact; checks no operation.
 */
typedef enum { MF_COMPACT_DONE, MF_COMPACT_MORE, MF_COMPACT_BUSY, MF_COMPACT_GONE } mf_compact_round_t;
int mf_storage_compact_round(mf_sess_t *s, const char *uri, mf_compact_round_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_storage_fds_low: a descriptor handed out elsewhere (an accepted socket)
 * lay within the reserve below the open-files limit (common/fds.h): the
 * next table open counts the free descriptors instead of spending a budget
 * counted earlier, and idle tables are closed to make room (descriptor
 * pressure, see "Open files" in storage_wt.c). Any thread; cheap.
 */
void mf_storage_fds_low(mf_storage_t *st);

/* mf_storage_fd_taken: a descriptor was handed out elsewhere (an accepted socket): one fewer for table opens. */
void mf_storage_fd_taken(mf_storage_t *st);

/* Table management. create is idempotent. drop is deferred if the table is busy. */
int mf_storage_create(mf_sess_t *s, const char *uri, const char *config, mf_error_t *err) MF_WUR;
void mf_storage_drop(mf_storage_t *st, const char *uri);

/* mf_storage_drop_later: queues uri for the flusher's next drop attempt (no attempt now). */
void mf_storage_drop_later(mf_storage_t *st, const char *uri);
/* mf_storage_pending_drops: how many drops are queued. */
int mf_storage_pending_drops(mf_storage_t *st);
/* mf_storage_retry_drops: retries every queued drop now (the flusher does it every 100 ms). */
void mf_storage_retry_drops(mf_storage_t *st);

/*
 * mf_storage_list_tables: calls fn with every table uri starting with prefix
 * (e.g. "table:coll-"), in key order. uri is valid only during the call.
 * Returns 0 or -1 with err.
 */
int mf_storage_list_tables(mf_storage_t *st, const char *prefix, void (*fn)(void *arg, const char *uri), void *arg,
                           mf_error_t *err) MF_WUR;

/*
 * mf_storage_set_periodic: fn(arg) runs on the flusher thread about once a
 * second (NULL removes it). Setting waits for a running call to finish, so
 * after mf_storage_set_periodic(st, NULL, NULL) returns, arg may be freed.
 */
void mf_storage_set_periodic(mf_storage_t *st, void (*fn)(void *arg), void *arg);

/*
 * mf_storage_fault_set (tests): after after_ops more cursor operations on
 * table uri (any session), the next one fails with -1 as a WiredTiger error
 * would, once; then the fault is disarmed. uri NULL disarms it.
 */
void mf_storage_fault_set(mf_storage_t *st, const char *uri, int after_ops);

/*
 * mf_storage_set_txn_hook: fn(arg, committed) runs on the committing (or
 * aborting) thread right after every transaction on st ends; one hook per
 * storage, set before serving. The engine's observer list uses it to report
 * commit and abort to its observers.
 */
void mf_storage_set_txn_hook(mf_storage_t *st, void (*fn)(void *arg, bool committed), void *arg);

/*
 * mf_storage_set_precommit_hook: fn(arg, s, err) runs on the committing
 * thread inside every transaction on st, just before its commit: it may
 * still write through s (in the same transaction) and may block. A non-zero
 * return rolls the transaction back and mf_txn_commit fails with fn's err.
 * One hook per storage, set before serving (the observer list's prepare
 * step: replication holds a commit until its raft entry is committed).
 */
void mf_storage_set_precommit_hook(mf_storage_t *st, int (*fn)(void *arg, mf_sess_t *s, mf_error_t *err), void *arg);

/* Transactions on a session. commit with durable=true syncs the log before returning. */
int mf_txn_begin(mf_sess_t *s, mf_error_t *err) MF_WUR;
int mf_txn_commit(mf_sess_t *s, bool durable, mf_error_t *err) MF_WUR;
void mf_txn_abort(mf_sess_t *s);
bool mf_txn_active(mf_sess_t *s);

/*
 * User (multi-document) transactions. mf_txn_user_begin opens a
 * transaction on s that stays open across commands: while it does,
 * mf_txn_begin/commit/abort on s nest inside it and only count (so the
 * commands' own transactions become parts of it), mf_txn_active is true
 * only inside such a nested one, and mf_txn_on_prepare refuses (returns
 * false: a nested step's argument would not live until the end). A nested
 * abort after a write attempt dooms the user transaction (what was written
 * cannot be undone alone): nested begins and commits then fail with
 * WriteConflict, and it can only roll back. mf_txn_user_commit commits it
 * (pre-commit steps, replication, end callbacks, as mf_txn_commit), or
 * rolls it back and fails with WriteConflict when doomed;
 * mf_txn_user_abort rolls it back. s's thread only.
 */
int mf_txn_user_begin(mf_sess_t *s, mf_error_t *err) MF_WUR;
int mf_txn_user_commit(mf_sess_t *s, bool durable, mf_error_t *err) MF_WUR;
void mf_txn_user_abort(mf_sess_t *s);
bool mf_txn_user(mf_sess_t *s);
bool mf_txn_user_doomed(mf_sess_t *s);
/*
 * mf_txn_on_end: fn(arg, committed) runs once on this thread right after s's
 * current transaction commits or rolls back (registering the same fn and arg
 * twice in one transaction registers it once). arg must stay valid until then.
 * Returns true if newly registered, false if already registered.
 */
bool mf_txn_on_end(mf_sess_t *s, void (*fn)(void *arg, bool committed), void *arg);
/*
 * mf_txn_on_end_find: the arg of a callback fn registered in s's current
 * transaction for which match(arg, key) is true, or NULL (the caller's to
 * use until fn runs).
 */
void *mf_txn_on_end_find(mf_sess_t *s, void (*fn)(void *arg, bool committed), bool (*match)(const void *arg, const void *key),
                         const void *key);

/*
 * mf_txn_on_prepare: fn(arg, s, err) runs at the start of mf_txn_commit of
 * s's current transaction, inside it (it may still write; the engine's
 * pre-commit hook, replication's, runs after it); non-zero vetoes the commit
 * (the transaction rolls back and mf_txn_commit fails with err). One step per
 * transaction: returns false if another fn/arg is already registered, true
 * if fn/arg is (now) the one. Cleared when the transaction ends.
 */
bool mf_txn_on_prepare(mf_sess_t *s, int (*fn)(void *arg, mf_sess_t *s, mf_error_t *err), void *arg);

/*
 * Cursors. A cursor is opened on a table in a session and closed with
 * mf_cur_close; it must not outlive the session's current command. Keys are
 * either record ids (record tables) or byte strings (index and catalog
 * tables: the catalog's string key is passed as bytes including its NUL).
 * Values handed out (mf_cur_value) point into WiredTiger's memory and are
 * valid only until the next operation on that cursor.
 */
int mf_cur_open(mf_sess_t *s, const char *uri, mf_cur_t **out, mf_error_t *err) MF_WUR;
void mf_cur_close(mf_cur_t *c);
/* Positioning. Return 0, MF_NOTFOUND, or -1/MF_CONFLICT. */
int mf_cur_next(mf_cur_t *c);
int mf_cur_prev(mf_cur_t *c);
void mf_cur_reset(mf_cur_t *c);
int mf_cur_search_rid(mf_cur_t *c, int64_t rid);
int mf_cur_search_bytes(mf_cur_t *c, const void *key, size_t len);
/* search_near_ge: positions on the smallest key >= key (by record id or bytes). */
int mf_cur_seek_rid_ge(mf_cur_t *c, int64_t rid);
int mf_cur_seek_bytes_ge(mf_cur_t *c, const void *key, size_t len);
/* Reading the current entry. */
int64_t mf_cur_rid(mf_cur_t *c);
void mf_cur_key_bytes(mf_cur_t *c, const uint8_t **key, size_t *len);
void mf_cur_value(mf_cur_t *c, const uint8_t **val, size_t *len);
/* Writes: insert fails with MF_DUPKEY if the key exists; update overwrites an existing one. */
int mf_cur_insert_rid(mf_cur_t *c, int64_t rid, const void *val, size_t len);
int mf_cur_update_rid(mf_cur_t *c, int64_t rid, const void *val, size_t len);
int mf_cur_remove_rid(mf_cur_t *c, int64_t rid);
int mf_cur_insert_bytes(mf_cur_t *c, const void *key, size_t klen, const void *val, size_t vlen);
int mf_cur_put_bytes(mf_cur_t *c, const void *key, size_t klen, const void *val, size_t vlen);
int mf_cur_remove_bytes(mf_cur_t *c, const void *key, size_t klen);
/*
 * mf_cur_remove_here: removes the entry c is positioned on (after a search,
 * next or prev that returned 0, with no key set since). WiredTiger removes
 * it in place on the page the cursor holds, without the search from the
 * root that removing by key costs; the cursor stays positioned. Returns 0,
 * MF_NOTFOUND, or -1/MF_CONFLICT.
 */
int mf_cur_remove_here(mf_cur_t *c);
/*
 * Walking keys in ascending order inside a transaction (a batch of deletes
 * in index order: the TTL index's keys, and usually the record ids and _id
 * keys of documents inserted in the order they expire):
 *   mf_cur_find_bytes / mf_cur_find_rid: position c exactly on key (0,
 *   MF_NOTFOUND, or -1/MF_CONFLICT), as a search does, but when the last
 *   find or mf_cur_remove_here left c on an entry, first step a few entries
 *   forward from there: a key just past the last one is found without a
 *   search from the root;
 *   mf_cur_close_near: closes c but, inside a transaction, leaves it on its
 *   entry; mf_cur_open_near gets it back as it was (mf_cur_open always gets
 *   a reset cursor). The transaction's commit or abort resets it.
 */
int mf_cur_find_bytes(mf_cur_t *c, const void *key, size_t len);
int mf_cur_find_rid(mf_cur_t *c, int64_t rid);
int mf_cur_open_near(mf_sess_t *s, const char *uri, mf_cur_t **out, mf_error_t *err) MF_WUR;
void mf_cur_close_near(mf_cur_t *c);
/*
 * Removing a contiguous range of a table (a batch of TTL deletions, whose
 * documents the same transaction deletes); on a record table the keys are
 * record ids given as 8 bytes big-endian:
 *   mf_cur_range_runs: splits the n keys given (strictly ascending in
 *   mf_key_cmp order) into runs, in order, runs[0..*nruns) their lengths:
 *   the entries c's transaction sees with byte keys in [first, last] of a
 *   run are exactly that run's keys. A key it does not see is a run of
 *   one. Each run costs one search. Once more than max_short keys are in
 *   runs shorter than min_run it stops: *nruns 0 (go one by one). runs
 *   has room for n. Byte-keyed tables only (-1 on a record table).
 *   Returns 0, or -1/MF_CONFLICT. Leaves c reset.
 *   mf_truncate_range: removes every entry with a key in [lo, hi] in s's
 *   transaction (WT_SESSION::truncate between two cursors): WiredTiger logs
 *   the range as one record instead of one per key. At run time it removes
 *   what the transaction sees (an entry it sees that another transaction
 *   changed since conflicts: MF_CONFLICT), but recovery replays it as a
 *   range with no snapshot: an entry another transaction inserted into the
 *   range after this one's snapshot and committed first is replayed, then
 *   truncated. The caller must rule that out (record ids handed out once;
 *   for index entries, a range guard, below). Returns 0, MF_CONFLICT, or -1
 *   with err.
 */
/* mf_key_cmp: the order of byte keys a (alen bytes) and b: memcmp order, a prefix first (WiredTiger's default collation). */
int mf_key_cmp(const void *a, size_t alen, const void *b, size_t blen);
typedef struct mf_key_span {
    const uint8_t *data;
    size_t len;
} mf_key_span_t;
int mf_cur_range_runs(mf_cur_t *c, const mf_key_span_t *keys, size_t n, size_t min_run, size_t max_short, size_t *runs,
                      size_t *nruns);
int mf_truncate_range(mf_sess_t *s, const char *uri, const void *lo, size_t lolen, const void *hi, size_t hilen,
                      mf_error_t *err) MF_WUR;

/*
 * Range guards: what makes a truncate of index entries safe for recovery
 * (see mf_truncate_range). A guard covers a set of tables (a collection's
 * indexes). Every transaction that inserts into them enters the guard
 * (mf_rguard_enter: counted in gen, and in active until it ends); a
 * transaction that truncates a range of them reads mf_rguard_token before
 * it begins (-1 while a writer is in flight) and commits through
 * mf_txn_commit_unless_entered: at its commit the guard is closed, and the
 * commit goes on only if no writer entered since the token; a writer's
 * commit waits while the guard is closed (for the truncater's engine
 * commit, not for its work; 20 ms at most, then the writer rolls back with
 * MF_E_WriteConflict). So a writer either is seen (and the truncating
 * transaction rolls back, MF_E_WriteConflict) or commits after it, which
 * recovery replays after the truncate too. A transaction that enters a
 * guard cannot also commit through one (it would roll back). The check
 * comes after every pre-commit step and hook (replication's wait for its
 * raft entry included), so a transaction whose hook may wait long must not
 * commit through a guard.
 *   mf_rguard_enter: s's transaction is about to insert into g's tables.
 *   Outside a transaction (an operation that commits on its own) it returns
 *   true and the caller calls mf_rguard_exit after the operation; inside,
 *   false, and the transaction's end leaves it.
 *   mf_rguard_unchanged: no writer entered g since token (an early look; the
 *   commit checks again).
 * g must outlive every transaction that entered or commits through it.
 */
typedef struct mf_rguard {
    _Atomic int64_t gen;    /* writers that entered, ever */
    _Atomic int64_t active; /* ... whose transaction has not ended */
    _Atomic int64_t closed; /* truncating transactions in their engine commit */
} mf_rguard_t;

bool mf_rguard_enter(mf_sess_t *s, mf_rguard_t *g);
void mf_rguard_exit(mf_rguard_t *g);
int64_t mf_rguard_token(mf_rguard_t *g);
bool mf_rguard_unchanged(mf_rguard_t *g, int64_t token);
void mf_txn_commit_unless_entered(mf_sess_t *s, mf_rguard_t *g, int64_t token);

/*
 * mf_cur_reserve: reserves the record the cursor is on for the transaction
 * (WT_CURSOR::reserve): a concurrent transaction that updates or removes it
 * conflicts (MF_CONFLICT for one of the two) as if this one had written it.
 * Background index builds use it so that no concurrent write can slip
 * between reading a document and indexing it.
 * The reservation lasts only while the transaction is open: WiredTiger
 * drops it at commit, so a transaction whose snapshot is older than that
 * commit can still update the record without a conflict. Such a writer
 * conflicts instead on what the reserving transaction wrote, which it must
 * touch itself (see mf_cur_reserve_bytes).
 *
 * mf_cur_reserve_bytes: the same for key (klen bytes) of a byte-keyed table
 * without a positioned cursor: 0 (reserved), MF_NOTFOUND (no key visible to
 * this transaction, and none written since its snapshot), MF_CONFLICT (a
 * transaction this one cannot see wrote the key), -1. Used as a conflict
 * probe: a writer that found no key of its own in its snapshot learns
 * whether a newer transaction put one there.
 */
int mf_cur_reserve(mf_cur_t *c);
int mf_cur_reserve_bytes(mf_cur_t *c, const void *key, size_t klen);

/* mf_storage_strerror: text for the last WiredTiger error code seen on c's session (for logs). */
const char *mf_storage_strerror(int wt_ret);

#endif /* MF_STORAGE_H */
