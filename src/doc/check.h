/*
 * check.h: documents as they are stored (doc/check.c).
 */
#ifndef MF_DOC_CHECK_H
#define MF_DOC_CHECK_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/error.h"

/* mf_check_doc_for_storage: depth, size and field-name checks before a document is written. */
int mf_check_doc_for_storage(const bson_t *doc, mf_error_t *err) MF_WUR;

/* What wrote a document, for the error mongod gives when it is over 16 MiB. */
typedef enum { MF_DOC_INSERTED, MF_DOC_UPDATED, MF_DOC_UPSERTED } mf_doc_write_t;

/*
 * mf_check_doc_size: 0 when doc fits the 16 MiB user limit; else -1 with
 * mongod's error for how it was written: an insert 2 BadValue "object to
 * insert too large...", an update's result 10334 "Resulting document after
 * update is larger than 16777216", an upsert's 17420 "Document to upsert is
 * larger than 16777216".
 */
int mf_check_doc_size(const bson_t *doc, mf_doc_write_t how, mf_error_t *err) MF_WUR;

/*
 * mf_check_id_storable: an _id value as mongod's storage validation takes it
 * (storage_validation.cpp, storageValidIdField): an array, regex or
 * undefined is 53 InvalidIdField "The '_id' value cannot be of type <type>".
 * An update's replacement or pipeline result and an upsert's new document
 * are held to it. 0, or -1 with err.
 */
int mf_check_id_storable(const bson_value_t *id, mf_error_t *err) MF_WUR;

/*
 * mf_check_upsert_id: an upsert's new document's _id, checked as mongod
 * 8.0's UpsertStage::_assertDocumentToBeInsertedIsValid does before the size
 * (storage_validation::scanDocument's storageValidIdField): a regex,
 * undefined or array _id is 53 InvalidIdField "The '_id' value cannot be of
 * type <type>". A plain insert's refusal is another (fixDocumentForInsert's
 * 2 "can't use a regex for _id", mf_check_doc_for_storage). 0, or -1 with err.
 */
int mf_check_upsert_id(const bson_t *doc, mf_error_t *err) MF_WUR;

/*
 * mf_check_doc_built_size: the check mongod makes of every document it
 * serialises (BSONObj's size check): a pipeline's output, a projected find
 * result, a document a stage builds at its end. Over 16 MiB + 16 KiB
 * (MF_MAX_BSON_INTERNAL_SIZE) is 10334 BSONObjectTooLarge "BSONObj size: N
 * (0xN) is invalid. Size must be between 0 and 16793600(16MB) First element:
 * <field: value>"; returns 0 or -1 with err.
 */
int mf_check_doc_built_size(const bson_t *doc, mf_error_t *err) MF_WUR;

/* mf_doc_with_id_first: copies doc into out (initialised here) with _id first, generating an ObjectId if absent. */
void mf_doc_with_id_first(const bson_t *doc, bson_t *out);

/*
 * The server's clock for Timestamp values it makes: each call returns a new
 * Timestamp, later than any before it, as (seconds << 32 | increment).
 */
typedef uint64_t (*mf_ts_tick_fn)(void *arg);

/*
 * mf_doc_has_empty_ts: whether a top-level field other than _id holds
 * Timestamp(0, 0), which mongod replaces with the current time when it
 * inserts or replaces a document (fixDocumentForInsert,
 * ObjectReplaceExecutor).
 */
bool mf_doc_has_empty_ts(const bson_t *doc);

/*
 * mf_doc_append_filled: appends the element at it to out, under its own
 * key; a Timestamp(0, 0) as a new one from tick(arg) instead, when tick is
 * not NULL. The caller decides which fields may be filled (never _id).
 */
void mf_doc_append_filled(bson_t *out, const bson_iter_t *it, mf_ts_tick_fn tick, void *arg);

/*
 * mf_doc_for_insert: mf_doc_with_id_first, each top-level Timestamp(0, 0)
 * but _id's replaced by tick(arg) (tick may be NULL: none replaced).
 */
void mf_doc_for_insert(const bson_t *doc, mf_ts_tick_fn tick, void *arg, bson_t *out);

/* mf_doc_id_is_first: whether doc's first field is _id. */
bool mf_doc_id_is_first(const bson_t *doc);

#endif /* MF_DOC_CHECK_H */
