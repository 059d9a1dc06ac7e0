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

/* mf_coll_replace: replaces record rid, whose current content is olddoc, with newdoc. */
int mf_coll_replace(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, const bson_t *newdoc,
                    mf_error_t *err) MF_WUR;

/* mf_coll_remove: deletes record rid, whose current content is olddoc. */
int mf_coll_remove(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, mf_error_t *err) MF_WUR;

/*
 * Records a run of deletions in one transaction leaves to its end
 * (mf_coll_remove_if's defer; mf_coll_remove_deferred runs before the
 * commit): their record ids, the smallest and the largest.
 * mf_removals_begin empties d for a transaction; mf_removals_free releases
 * its buffer.
 */
typedef struct mf_removals {
    int64_t *rids; /* n of them, mf_malloc'd, grown */
    size_t n, cap;
    int64_t min, max;
} mf_removals_t;

void mf_removals_begin(mf_removals_t *d);
void mf_removals_free(mf_removals_t *d);

/*
 * mf_coll_remove_if: deletes record rid if check(arg, rid, doc) accepts its
 * current content (check may be NULL), reading and removing through one
 * positioned cursor without copying the document. doc is valid only during
 * check. *removed tells whether it was deleted; a missing record is not an
 * error. With defer (may be NULL), the record (not its index entries) is
 * added to defer instead of removed. Returns 0, MF_CONFLICT, or -1 with
 * err.
 */
int mf_coll_remove_if(mf_sess_t *s, mf_coll_t *c, int64_t rid, bool (*check)(void *arg, int64_t rid, const bson_t *doc),
                      void *arg, mf_removals_t *defer, bool *removed, mf_error_t *err) MF_WUR;

/*
 * mf_coll_remove_deferred: removes the records d collected from c, in the
 * transaction that collected them, before it commits. When their ids are
 * consecutive (n ids from min to max), they go as one truncate of
 * [min, max], one log record instead of one per record (*ranged). Nothing
 * else can be in that range, even for recovery, which replays the truncate
 * without a snapshot: record ids are handed out once (c->next_rid only
 * grows), so no other transaction can insert one there, and an update or
 * removal of one of them by another transaction conflicts with the
 * truncate. (Index entries have no such property: a key another
 * transaction inserts into a range after this one's snapshot and commits
 * first would be replayed, then truncated, so they are removed one by
 * one.) Otherwise the records go one by one. Returns 0, MF_CONFLICT, or -1
 * with err.
 */
int mf_coll_remove_deferred(mf_sess_t *s, mf_coll_t *c, mf_removals_t *d, bool *ranged, mf_error_t *err) MF_WUR;

/*
 * mf_coll_find_id: looks up the document whose _id equals idv through the _id
 * index. Returns 0 with *rid set, MF_NOTFOUND, or -1/MF_CONFLICT.
 */
int mf_coll_find_id(mf_sess_t *s, mf_coll_t *c, const bson_value_t *idv, int64_t *rid, mf_error_t *err) MF_WUR;

/*
 * mf_coll_fetch: reads record rid into out (initialised here with a copy).
 * Returns 0, MF_NOTFOUND, or -1/MF_CONFLICT.
 */
int mf_coll_fetch(mf_sess_t *s, mf_coll_t *c, int64_t rid, bson_t *out, mf_error_t *err) MF_WUR;

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
 * mf_coll_index_build_chunk: indexes up to max_docs documents of c, those
 * with record ids above *after, into each of the n indexes ixs (being
 * built), in one transaction on s. Each document read is reserved
 * (mf_cur_reserve), so a concurrent update or delete of it conflicts instead
 * of leaving a stale key; concurrent writers maintain the building indexes
 * themselves. On success *after is the last record id indexed, *ndocs how
 * many documents were, and *eof whether the collection has no more. Returns
 * 0, MF_CONFLICT (nothing committed: retry the same chunk), or -1 with err
 * (11000 for a duplicate in a unique index). Caller holds the catalog lock
 * (shared is enough) and checks for interruption between chunks.
 */
int mf_coll_index_build_chunk(mf_sess_t *s, mf_coll_t *c, mf_index_t *const *ixs, int n, int64_t *after,
                              int64_t max_docs, int64_t *ndocs, bool *eof, mf_error_t *err) MF_WUR;

#endif /* MF_COLL_WRITE_H */
