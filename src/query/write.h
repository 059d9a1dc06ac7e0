/*
 * write.h: the write algorithms behind the insert, update, delete and
 * findAndModify commands (query/write.c).
 *
 * The command layer parses a command and checks its statements; each
 * function here runs one statement (an insert runs its whole batch) against
 * db.coll. It opens and ends its own catalog lock session (call with none
 * held), finds the target record ids through the planner, and applies the
 * write in chunked transactions (query/batch.h), re-fetching and
 * re-matching every document inside its transaction. Failures come back as
 * an mf_error_t: the caller decides whether one is a writeError or fails the
 * command, and builds the reply. Counters always say what was committed,
 * whether the call failed or not.
 */
#ifndef MF_WRITE_H
#define MF_WRITE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "doc/expr.h"
#include "storage/storage.h"

/*
 * An update's change, as the write commands parse it: an update document
 * (operators or a replacement) or a pipeline. mf_update_spec_new parses ud,
 * or pipeline (an array value) when not NULL, with arrayFilters af (or
 * NULL); the caller frees the spec with mf_update_spec_free. Returns NULL
 * with err when invalid. mf_update_spec_apply is mf_update_apply for
 * either kind (out initialised by the caller; *changed false when the
 * result equals doc).
 */
typedef struct mf_update_spec mf_update_spec_t;
mf_update_spec_t *mf_update_spec_new(const bson_t *ud, const bson_value_t *pipeline, const bson_value_t *af,
                                     mf_error_t *err);
void mf_update_spec_free(mf_update_spec_t *x);
int mf_update_spec_apply(const mf_update_spec_t *x, const bson_t *doc, const struct mf_match_details *d,
                         bool is_insert, bson_t *out, bool *changed, mf_error_t *err) MF_WUR;

/* Told about a document that failed to insert: its index in the batch and its error (valid during the call). */
typedef void (*mf_write_error_fn)(void *arg, size_t index, const mf_error_t *err);

/*
 * How a write command runs (its wflags): MF_WRITE_VALIDATE applies the
 * collection's validator (no bypassDocumentValidation);
 * MF_WRITE_KEEP_EMPTY_TS stores a top-level Timestamp(0, 0) as given
 * (bypassEmptyTsReplacement, and replication's own writes: a member applying
 * the oplog or copying documents stores what the primary stored) instead of
 * filling it with the server's time.
 */
#define MF_WRITE_VALIDATE 1u
#define MF_WRITE_KEEP_EMPTY_TS 2u

/*
 * mf_write_insert: inserts docs[0..n) into db.coll, creating it when
 * missing; each document goes in with _id first (generated when absent),
 * checked for storage and (wflags) against the collection's validator, a
 * top-level Timestamp(0, 0) filled. A document that fails is handed to on_error and, when ordered,
 * ends the batch. *inserted gets the number committed. Commits with sync when
 * durable. Returns 0 (per-document failures included), or -1 with err when
 * the whole command fails (a view, a failed creation, a failed commit).
 */
int mf_write_insert(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db, const char *coll,
                    const bson_t *docs, size_t n, bool ordered, mf_write_error_fn on_error, void *arg,
                    int64_t *inserted, mf_error_t *err) MF_WUR;

typedef struct mf_write_update_result {
    int64_t matched;          /* the reply's n (1 for an upsert) */
    int64_t modified;         /* nModified */
    bool upserted;            /* an upsert inserted a document, whose _id is upserted_id */
    bson_value_t upserted_id; /* when upserted: a copy the caller destroys (bson_value_destroy) */
} mf_write_update_result_t;

/*
 * A statement's constants (c; bulkWrite's constants): the variables of a
 * pipeline update, as mongod's PipelineExecutor defines them.
 * mf_write_consts_begin installs them as the thread's ambient frame
 * (doc/expr.h) until mf_write_consts_end, which the caller calls after a
 * 0 return (nothing to end after -1); their names and values point into
 * stmt, which must outlive the frame. A statement without c installs
 * nothing; c on an update that is not a pipeline is 51198.
 */
typedef struct mf_write_consts {
    const char **names;
    bson_value_t *vals;
    mf_expr_vars_t frame;
    bool set;
} mf_write_consts_t;

int mf_write_consts_begin(const bson_t *stmt, mf_write_consts_t *k, mf_error_t *err) MF_WUR;
void mf_write_consts_end(mf_write_consts_t *k);

/*
 * mf_write_update: runs one statement of an update command ({q, u, upsert,
 * multi, arrayFilters, hint, sort, ...}, already checked for unknown fields and
 * field types) against db.coll. u is an update document (operators or a
 * replacement) or a pipeline. An upsert creates the collection when missing.
 * Commits with sync when durable; validate applies the collection's
 * validator. A sort (8.0, single-document updates only: 9 with multi)
 * updates the first match in that order, as findAndModify picks it.
 * Returns 0, or -1 with err (res still counts what committed).
 */
int mf_write_update(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db, const char *coll,
                    const bson_t *stmt, mf_write_update_result_t *res, mf_error_t *err) MF_WUR;

typedef struct mf_write_delete_result {
    int64_t deleted;
    int64_t batches; /* transactions committed */
    bool batched;    /* a multi-document delete (limit 0) that had targets: serverStatus().batchedDeletes counts it */
} mf_write_delete_result_t;

/*
 * mf_write_delete: runs one statement of a delete command ({q, limit, hint,
 * ...}, limit 0 or 1) against db.coll. limit 0 deletes batch_docs documents
 * per transaction (the batchedDeletesTargetBatchDocs parameter; 0 or less:
 * all in one). Commits with sync when durable. Returns 0, or -1 with err
 * (res still counts what committed).
 */
int mf_write_delete(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll,
                    const bson_t *stmt, int64_t batch_docs, mf_write_delete_result_t *res, mf_error_t *err) MF_WUR;

/* A findAndModify request, as the command layer parsed it. Pointers are borrowed for the call. */
typedef struct mf_write_fam {
    const bson_t *query;               /* filter; NULL matches every document */
    const bson_t *sort;                /* NULL or empty: none */
    const bson_t *fields;              /* projection of the returned document; NULL or empty: all of it */
    const bson_t *update;              /* an update document, or NULL */
    const bson_value_t *pipeline;      /* a pipeline-style update (an array), or NULL */
    const bson_value_t *array_filters; /* or NULL */
    const bson_value_t *hint;          /* or NULL */
    /* An update statement's upsertSupplied document (c.new): what an upsert inserts over the query's seed; or NULL */
    const bson_t *upsert_supplied;
    bool remove, want_new, upsert;
} mf_write_fam_t;

typedef struct mf_write_fam_result {
    int n;                    /* documents updated, removed or inserted: 0 or 1 */
    bool updated_existing;    /* a document was found and updated */
    bool modified;            /* ... and the update changed it (an update's nModified) */
    bool upserted;            /* a document was inserted, whose _id is upserted_id */
    bson_value_t upserted_id; /* when upserted: a copy the caller destroys (bson_value_destroy) */
    bool has_value;           /* value holds the document to return; else the reply's value is null */
    bson_t value;             /* when has_value: the projected old or new image, the caller destroys it */
    bool exec_failed;         /* on error: it arose while the plan ran (mongod's executor), not parsing or planning */
} mf_write_fam_result_t;

/*
 * mf_write_find_and_modify: the core of findAndModify on db.coll: finds the
 * first document matching f->query (in f->sort order), then removes or
 * updates it in one transaction (upserting when nothing matches and
 * f->upsert, creating the collection when missing), retrying when the
 * document changed or conflicted meanwhile. Commits with sync when durable;
 * validate applies the collection's validator. Returns 0 with res filled, or
 * -1 with err (res then holds nothing to free but exec_failed: the error
 * came from finding, updating, removing, upserting or projecting, which
 * findAndModify reports as mongod's executor errors).
 */
int mf_write_find_and_modify(mf_catalog_t *cat, mf_sess_t *s, bool durable, unsigned wflags, const char *db,
                             const char *coll, const mf_write_fam_t *f, mf_write_fam_result_t *res,
                             mf_error_t *err) MF_WUR;

#endif /* MF_WRITE_H */
