/*
 * observer.h: the engine's list of write observers (DESIGN.md "write
 * observers", the seam the oplog plugs into).
 *
 * Every change to data or to the catalog is reported to every registered
 * observer, after it is applied:
 *   - document writes (insert, update with old and new image, delete) from
 *     catalog/coll_write.c, inside the writer's WiredTiger transaction, on
 *     the writing thread, in the order the writes happen;
 *   - the end of each transaction that reported at least one document write
 *     (on_txn_end, committed or aborted), on the same thread, right after the
 *     commit or abort, so an observer can buffer what a transaction did and
 *     publish it only if it committed (the TTL monitor's wake-ups; an oplog);
 *   - DDL (create, drop, rename, index build, index drop, collMod), after the
 *     catalog change has committed, while the collection's exclusive lock is
 *     still held, so no document write of the same collection interleaves.
 * Commit order: WiredTiger serialises conflicting transactions, and each
 * on_txn_end runs after its commit, so per document the observers see
 * changes in commit order.
 *
 * Observers are added before the engine serves and never removed (the list
 * is fixed-size and published with an atomic count, so reporting takes no
 * lock). Callbacks must be quick and must not write through the engine.
 */
#ifndef MF_OBSERVER_H
#define MF_OBSERVER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "storage/storage.h"

struct mf_coll;

typedef enum {
    MF_DDL_CREATE_COLL,  /* detail: the collection's options */
    MF_DDL_DROP_COLL,    /* detail: NULL */
    MF_DDL_RENAME_COLL,  /* to_ns set; detail: NULL */
    MF_DDL_CREATE_INDEX, /* detail: the index spec */
    MF_DDL_DROP_INDEX,   /* detail: {index: name} */
    MF_DDL_COLLMOD,      /* detail: the collMod command, with "$o2": the state before it (oplog o2) */
    MF_DDL_DROP_DB,      /* after the drops of its collections: ns is the database's name, uuid NULL, detail NULL */
    MF_DDL_REINDEX,      /* every index rebuilt into new tables (reIndex: a standalone's, never logged); detail: NULL */
} mf_ddl_kind_t;

typedef struct mf_ddl_event {
    mf_ddl_kind_t kind;
    const char *ns;      /* "db.coll" (for a rename, the old namespace) */
    const char *to_ns;   /* rename: the new namespace; else NULL */
    const uint8_t *uuid; /* the collection's UUID (16 bytes); NULL for MF_DDL_DROP_DB */
    const bson_t *detail; /* see mf_ddl_kind_t; may be NULL */
} mf_ddl_event_t;

/* Every member may be NULL. Pointers passed in are valid only during the call. */
typedef struct mf_observer {
    void (*on_insert)(void *arg, struct mf_coll *c, const bson_t *doc);
    void (*on_update)(void *arg, struct mf_coll *c, const bson_t *olddoc, const bson_t *newdoc);
    void (*on_delete)(void *arg, struct mf_coll *c, const bson_t *olddoc);
    void (*on_ddl)(void *arg, const mf_ddl_event_t *ev);
    void (*on_txn_end)(void *arg, bool committed);
    /*
     * Just before such a transaction commits, on its thread, inside it (s
     * may still be written): non-zero vetoes the commit (the transaction
     * rolls back, on_txn_end(false) follows) with err set. May block.
     */
    int (*on_txn_prepare)(void *arg, mf_sess_t *s, mf_error_t *err);
    void *arg;
} mf_observer_t;

typedef struct mf_observers mf_observers_t;

/*
 * mf_observers_new: an empty list that learns of transaction ends from st
 * (it installs st's transaction hook). Never NULL.
 */
mf_observers_t *mf_observers_new(mf_storage_t *st);
void mf_observers_free(mf_observers_t *obs);

/* mf_observers_add: registers a copy of o. Returns 0, or -1 with err when the list is full (16). */
int mf_observers_add(mf_observers_t *obs, const mf_observer_t *o, mf_error_t *err) MF_WUR;

/* Reporting (catalog/coll_write.c and catalog.c; obs may be NULL). */
void mf_observers_insert(mf_observers_t *obs, struct mf_coll *c, const bson_t *doc);
void mf_observers_update(mf_observers_t *obs, struct mf_coll *c, const bson_t *olddoc, const bson_t *newdoc);
void mf_observers_delete(mf_observers_t *obs, struct mf_coll *c, const bson_t *olddoc);
void mf_observers_ddl(mf_observers_t *obs, const mf_ddl_event_t *ev);

/*
 * mf_observers_set_replacing / mf_observers_replacing: whether the updates
 * this thread reports next come from a replacement-style update ({_id, a: 1}
 * rather than update operators or a pipeline). The update path sets it
 * around mf_coll_replace; an observer that logs changes reads it in
 * on_update (the oplog tells change streams "replace" from "update" by it).
 * Per thread, like the transaction the update runs in; false by default.
 */
void mf_observers_set_replacing(bool on);
bool mf_observers_replacing(void);

#endif /* MF_OBSERVER_H */
