/*
 * coll_write.h: document writes with index maintenance, and the write observer.
 *
 * Each function writes a record and all its index entries on the caller's
 * session, inside the caller's WiredTiger transaction, so a document and its
 * index entries can never be out of step after a crash. Index layout:
 *
 *   unique index (and _id): key = keystring(values)          value = record id (8 bytes BE)
 *   other index:            key = keystring(values) + rid    value = empty
 *
 * Return values: 0; MF_CONFLICT when WiredTiger reports a write conflict
 * (the caller aborts the transaction and retries); -1 with err set otherwise
 * (11000 DuplicateKey carries keyPattern and keyValue in err->info).
 *
 * Each successful write is reported to the collection's observer list
 * (catalog/observer.h) inside the transaction: opcounters and the TTL
 * monitor's wake-ups today, the oplog with replication.
 */
#ifndef MF_COLL_WRITE_H
#define MF_COLL_WRITE_H

#include <bson/bson.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "storage/storage.h"


/*
 * mf_coll_insert: inserts doc (which has its _id) as a new record; *rid_out
 * gets its record id (may be NULL). On a capped collection the oldest
 * records (lowest record ids) are removed in the same transaction until the
 * collection is back within its size and max (never the new record itself).
 */
int mf_coll_insert(mf_sess_t *s, mf_coll_t *c, const bson_t *doc, int64_t *rid_out, mf_error_t *err) MF_WUR;

/*
 * Record ids reserved in a block, so that the documents of one insert
 * command get consecutive ids even while other commands insert into the
 * same collection (a TTL batch then removes their records as ranges,
 * mf_coll_remove_deferred): mf_rids_take returns the next id of r,
 * reserving up to want more of c's ids (one atomic step) when r is used up;
 * a reserved id never used is simply skipped. Not for capped collections,
 * whose record ids must follow insertion order: their ids are taken one at
 * a time. mf_coll_insert_rid: mf_coll_insert with the record id given (from
 * mf_rids_take).
 */
typedef struct mf_rids {
    int64_t next, end; /* [next, end) still reserved */
} mf_rids_t;

int64_t mf_rids_take(mf_rids_t *r, mf_coll_t *c, int64_t want);
int mf_coll_insert_rid(mf_sess_t *s, mf_coll_t *c, const bson_t *doc, int64_t rid, mf_error_t *err) MF_WUR;

/*
 * Bulk inserts (query/write.c), which write a transaction's records first
 * and then each index's keys in turn, one table at a time:
 * - mf_coll_keys_prepare makes doc's keys for every index of c into the
 *   calling thread's slot (0 .. MF_PREP_SLOTS - 1), outside any
 *   transaction; they stay there until the slot is prepared again. Returns
 *   0, or 1 when doc must take mf_coll_insert_rid (a capped collection,
 *   more than MF_PREP_MAX_INDEXES indexes, or a key that cannot be made,
 *   whose error that path reports).
 * - mf_coll_insert_record inserts doc as record rid and nothing else,
 *   through a cursor it holds until mf_coll_prepared_release (or
 *   mf_coll_insert_prepared_keys); the caller releases it before its
 *   transaction ends and before writing to another collection.
 * - mf_coll_insert_prepared_keys, in the same transaction, inserts the keys
 *   of the n documents (each a record just inserted, its keys in slot) as
 *   mf_coll_insert_rid would (multikey flags made durable, duplicate keys
 *   reported), index by index, then counts the documents and calls the
 *   write observers for each. Returns 0, MF_CONFLICT, or -1 with err; on
 *   failure *failed is the position in docs of the document it failed on.
 * The caller holds c's shared lock throughout, so c's indexes do not
 * change between the steps.
 */
#define MF_PREP_SLOTS 500
#define MF_PREP_MAX_INDEXES 8
typedef struct mf_prepared {
    const bson_t *doc;
    int64_t rid;
    int slot;
} mf_prepared_t;

int mf_coll_keys_prepare(mf_coll_t *c, const bson_t *doc, int slot);
int mf_coll_insert_record(mf_sess_t *s, mf_coll_t *c, const bson_t *doc, int64_t rid, mf_error_t *err) MF_WUR;
void mf_coll_prepared_release(void);
int mf_coll_insert_prepared_keys(mf_sess_t *s, mf_coll_t *c, const mf_prepared_t *docs, int n, int *failed,
                                 mf_error_t *err) MF_WUR;

/* mf_coll_replace: replaces record rid, whose current content is olddoc, with newdoc. */
int mf_coll_replace(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, const bson_t *newdoc,
                    mf_error_t *err) MF_WUR;

/* mf_coll_remove: deletes record rid, whose current content is olddoc. */
int mf_coll_remove(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, mf_error_t *err) MF_WUR;

/*
 * Removals a run of deletions in one transaction leaves to its end
 * (mf_coll_remove_if's defer; mf_coll_remove_deferred runs before the
 * commit). Per table: the record store (rec, its record ids as 8 bytes
 * big-endian) and each index of the collection (ix[i] for c->indexes[i],
 * its full entry keys, record id included on a non-unique index). A table
 * collects only while its on flag is set (mf_removals_begin decides, per
 * transaction); the others are removed from as each document goes.
 */
typedef struct mf_removal_keys {
    uint8_t *buf; /* n keys, each a 2-byte length (host order) then the key; mf_malloc'd, grown */
    size_t len, cap, n;
    bool on;
    mf_key_span_t *sorted; /* the keys in key order, for finding runs; mf_malloc'd, grown */
    size_t sorted_cap;
    size_t *runs; /* lengths of the runs found in sorted (removal_run); mf_malloc'd, grown with sorted */
} mf_removal_keys_t;

typedef struct mf_removals {
    mf_removal_keys_t rec;
    mf_removal_keys_t *ix; /* nix of them, grown to the collection's index count */
    int nix;
} mf_removals_t;

/*
 * mf_removals_begin: starts d for a transaction's deletions from c: the
 * record store collects if rec_runs (the caller's record ids fall mostly in
 * runs of consecutive ids, mf_rids_in_runs); with indexes, every index
 * collects unless it is being built or its range_skip says to wait.
 * mf_removals_free releases d's buffers.
 */
void mf_removals_begin(mf_removals_t *d, const mf_coll_t *c, bool rec_runs, bool indexes);

/*
 * MF_RANGE_MIN_ITEMS: the fewest keys of one table that go as a range (a
 * truncate costs two searches from the root and, for index entries, a walk
 * that compares them, which only pays off over a few). mf_rids_in_runs: how
 * many of the n record ids ids (any order; scratch has room for n, and is
 * used only when they are not ascending already) lie in runs of at least
 * that many consecutive ids; 0 when an id is there twice (a collected
 * record is removed only before the commit, so a second visit would find it
 * again and delete it twice).
 */
#define MF_RANGE_MIN_ITEMS 8
size_t mf_rids_in_runs(const int64_t *ids, size_t n, int64_t *scratch);
void mf_removals_free(mf_removals_t *d);

/*
 * mf_known_value_t: what a removal's check found in the document it
 * accepted, so that the removal need not look for it again: value is the
 * document's top-level field ix->kp.fields[0], not an array (ix NULL:
 * nothing known). Its keys for ix are then mf_index_keys_of_value's.
 * value points into the document: valid while the check's doc is.
 */
typedef struct mf_known_value {
    const mf_index_t *ix;
    bson_value_t value;
} mf_known_value_t;

/* A removal's check: true if doc (record rid) is still to go; may fill *known (cleared before the call). */
typedef bool (*mf_remove_check_fn)(void *arg, int64_t rid, const bson_t *doc, mf_known_value_t *known);

/*
 * mf_coll_remove_if: deletes record rid if check(arg, rid, doc, known)
 * accepts its current content (check may be NULL), reading and removing
 * through one positioned cursor without copying the document. doc is valid
 * only during check. *removed tells whether it was deleted; a missing
 * record is not an error. With defer (may be NULL), the record and the
 * index entries of the tables collecting in defer are added to it instead
 * of removed. Returns 0, MF_CONFLICT, or -1 with err.
 */
int mf_coll_remove_if(mf_sess_t *s, mf_coll_t *c, int64_t rid, mf_remove_check_fn check, void *arg,
                      mf_removals_t *defer, bool *removed, mf_error_t *err) MF_WUR;

/*
 * mf_coll_remove_deferred: removes what d collected from c, in the
 * transaction that collected it, before it commits. Each table's keys go
 * in key order, every run of at least MF_RANGE_MIN_ITEMS of them that
 * holds nothing else as one truncate (one log record instead of one per
 * key), the rest one by one.
 *   Records: runs of consecutive ids. Nothing else can be in such a run,
 *   even for recovery, which replays a truncate without a snapshot: record
 *   ids are handed out once, and another transaction's update or removal of
 *   one of them conflicts with the truncate. *rec_ranged: how many went
 *   in ranges.
 *   Index entries: the runs where the entries the transaction sees are
 *   exactly the collected ones (compared key by key, one search per run),
 *   only while no writer has entered c's range guard since token
 *   (mf_rguard_token, read before the transaction began): the transaction
 *   then commits through the guard (mf_txn_commit_unless_entered), so a
 *   key another transaction inserts into a range unseen cannot commit
 *   before it (recovery would replay that insert, then the truncate). An
 *   index whose keys mostly did not go as ranges (keys in random order)
 *   waits a while before it is tried again (range_skip). *ix_ranges counts
 *   the indexes removed from with at least one range.
 * Returns 0, MF_CONFLICT, or -1 with err.
 */
int mf_coll_remove_deferred(mf_sess_t *s, mf_coll_t *c, mf_removals_t *d, int64_t token, size_t *rec_ranged,
                            int *ix_ranges, mf_error_t *err) MF_WUR;

/*
 * mf_index_covers: whether ix indexes doc at all, its partial filter (if
 * any) matched under the index's collation, whatever the calling thread's.
 */
bool mf_index_covers(const mf_index_t *ix, const bson_t *doc);

/*
 * mf_coll_find_id: looks up the document whose _id equals idv through the _id
 * index, under that index's collation (the collection's default). Returns 0 with *rid set, MF_NOTFOUND, or -1/MF_CONFLICT.
 */
int mf_coll_find_id(mf_sess_t *s, mf_coll_t *c, const bson_value_t *idv, int64_t *rid, mf_error_t *err) MF_WUR;

/*
 * mf_coll_fetch: reads record rid into out (initialised here with a copy).
 * Returns 0, MF_NOTFOUND, or -1/MF_CONFLICT.
 */
int mf_coll_fetch(mf_sess_t *s, mf_coll_t *c, int64_t rid, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_coll_dup_key_error: fills err with MongoDB's duplicate key error for
 * index ix of c and doc: the message and {keyPattern, keyValue}; on a
 * collated index, as mongod 8.0's, the message names the collation and
 * string components are the hex of their collation key, in the message and
 * in keyValue, and {collation} follows. key (NULL: none) is the key that
 * collided: when doc holds an array at one of ix's paths, the message and
 * keyValue show that key's element, as mongod, not the whole array.
 * Returns -1.
 */
int mf_coll_dup_key_error(mf_coll_t *c, mf_index_t *ix, const bson_t *doc, const mf_keystring_t *key,
                          mf_error_t *err);

/*
 * mf_coll_validate: schema validation (collection option validator). newdoc
 * is the document about to be written; olddoc the one it replaces (NULL for
 * an insert or upsert). Returns 0 when the write may proceed: no validator,
 * validationLevel "off", "moderate" with an olddoc that did not match
 * either, a matching newdoc, or validationAction "warn" (the failure is
 * logged). Otherwise -1 with 121 DocumentValidationFailure "Document failed
 * validation" and err->info = {errInfo: {failingDocumentId, details}}.
 */
int mf_coll_validate(mf_coll_t *c, const bson_t *newdoc, const bson_t *olddoc, mf_error_t *err) MF_WUR;

/*
 * mf_coll_schema_check: what mongod's CollectionImpl::checkValidation says
 * of a stored doc, as the validate command asks it: 0 it passes (no
 * validator, validationLevel "off", or it matches), 1 it fails under
 * validationAction "warn" (logged as 20294), 2 it fails under "error".
 */
int mf_coll_schema_check(mf_coll_t *c, const bson_t *doc);

/*
 * The duplicates a unique index build met (mf_coll_index_build_chunk): its
 * scan goes on past them, and the build then fails with the lowest key of
 * the first index that has one, as mongod's, which checks the keys in
 * sorted order once its scan is done. key is owned (mf_build_dups_free).
 */
typedef struct mf_build_dups {
    bool have;
    int index;     /* its position among the indexes being built */
    uint8_t *key;  /* its key string, without a record id */
    size_t len;
    mf_error_t err; /* its duplicate key error */
} mf_build_dups_t;

void mf_build_dups_free(mf_build_dups_t *d);

/*
 * mf_coll_index_build_chunk: indexes up to max_docs documents of c, those
 * with record ids above *after, into each of the n indexes ixs (being
 * built), in one transaction on s. Each document read is reserved
 * (mf_cur_reserve), so a concurrent update or delete of it conflicts instead
 * of leaving a stale key; concurrent writers maintain the building indexes
 * themselves. On success *after is the last record id indexed, *ndocs how
 * many documents were, and *eof whether the collection has no more. Returns
 * 0, MF_CONFLICT (nothing committed: retry the same chunk), or -1 with err
 * (11000 for a duplicate in a unique index when dups is NULL; else the
 * duplicate is noted in dups and the scan goes on). Caller holds the
 * catalog lock (shared is enough) and checks for interruption between
 * chunks.
 */
int mf_coll_index_build_chunk(mf_sess_t *s, mf_coll_t *c, mf_index_t *const *ixs, int n, int64_t *after,
                              int64_t max_docs, int64_t *ndocs, bool *eof, mf_build_dups_t *dups, mf_error_t *err) MF_WUR;

#endif /* MF_COLL_WRITE_H */
