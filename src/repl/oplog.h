/*
 * oplog.h: the oplog observer and the applier of its entries (the
 * replica-set foundation; ARCHITECTURE.md "Replication (foundation)").
 *
 * The observer (catalog/observer.h) gathers what one write transaction did
 * and, when that transaction commits, hands one entry to a sink:
 *
 *     {ops: [{op: "i", ns: "db.c", ui: UUID, o: <the inserted document>},
 *            {op: "u", ns, ui, o: <the new full document>, o2: {_id},
 *                      diff: {u: {path: value}, r: [path]}},   (no diff: a replacement)
 *            {op: "d", ns, ui, o: {_id}},
 *            {op: "c", ns: "db.$cmd", ui, o: <command>}, ...]}
 *
 * Field names are those of MongoDB's oplog; unlike mongod's, an update
 * carries the whole new image, so applying it is a replace; its diff
 * (changed and removed dotted paths, from the old and new images) is there
 * for change streams only (cmd/cmd_changestream.c), absent when the update
 * was a replacement (mf_observers_replacing). DDL
 * (create with its options, drop, renameCollection, createIndexes with one
 * spec, dropIndexes with one name, collMod, and {dropDatabase: 1} after the
 * drops of a database's collections, which applying skips) is reported after the catalog
 * change committed, so each DDL change is an entry of its own with one "c"
 * op, handed to the sink at once. An aborted transaction hands nothing.
 * Not logged: the `local` database and system.profile collections (as in
 * mongod).
 *
 * mf_oplog_apply replays an entry on another engine, idempotently, through
 * the command layer (the same mf_cmd_run as clients): "i" and "u" replace
 * by _id with upsert (document validation bypassed), "d" deletes by _id
 * (a missing document is fine), "c" runs the command and tolerates "already
 * exists" and "not found"; a rename replaces its target, so replaying a log
 * from its start converges on the same state. Collections are matched by
 * name: each member's collections have their own UUIDs for now (ui is
 * carried for the later by-UUID apply of the replication plan).
 */
#ifndef MF_OPLOG_H
#define MF_OPLOG_H

#include <bson/bson.h>

#include "common/error.h"
#include "engine/engine.h"

typedef struct mf_oplog mf_oplog_t;

/*
 * The sink: called once per committed entry, on the writing thread, right
 * after the commit (document writes) or with the catalog's exclusive lock
 * held (DDL), so it must be quick and must not write through the engine.
 * entry is valid only during the call. Entries of one collection arrive in
 * commit order; the caller orders entries of concurrent writers if it needs
 * one global order (the replication plan's sequence lock).
 */
typedef void (*mf_oplog_sink_fn)(void *arg, const bson_t *entry);

/*
 * mf_oplog_attach: registers an oplog observer on eng's write observers
 * (before eng serves). Returns 0 with *out, or -1 with err (the observer
 * list is full). Observers are never removed, so free *out with
 * mf_oplog_free only after eng is closed.
 */
int mf_oplog_attach(mf_engine_t *eng, mf_oplog_sink_fn sink, void *arg, mf_oplog_t **out, mf_error_t *err) MF_WUR;

/*
 * The prepare sink: called with a document-write transaction's entry just
 * before it commits, on the writing thread, inside the transaction (s may
 * still be written, in it). pre is the document the transaction's first
 * update or delete replaced, when this thread asked for it
 * (mf_oplog_keep_preimage), else NULL; entry and pre are valid only during
 * the call. Non-zero rolls the transaction back with err. May block
 * (replication waits here for the entry's raft commit).
 */
typedef int (*mf_oplog_prepare_fn)(void *arg, const bson_t *entry, const bson_t *pre, mf_sess_t *s,
                                   mf_error_t *err);

/*
 * mf_oplog_keep_preimage: while on, this thread's transactions keep a copy
 * of the document their first update or delete replaced, for the prepare
 * sink (a retryable findAndModify's retry answers with it). Per thread;
 * the caller turns it off when its command ends.
 */
void mf_oplog_keep_preimage(bool on);

/*
 * mf_oplog_set_prepare: document-write entries go to prepare before each
 * commit instead of to the sink after it (DDL entries still go to the sink,
 * after their catalog change committed). Set before eng serves.
 */
void mf_oplog_set_prepare(mf_oplog_t *log, mf_oplog_prepare_fn prepare);

/* mf_oplog_free: frees an oplog whose engine is closed. NULL is ignored. */
void mf_oplog_free(mf_oplog_t *log);

/*
 * mf_oplog_run: runs cmd on db through the command layer as replication (an
 * internal client: no admission check, nothing logged again on a member
 * that applies). Returns 0 when it succeeded or failed with one of the
 * tolerated codes (0-terminated; NULL for none), else -1 with err (a write
 * command's first writeError counts as its failure).
 */
int mf_oplog_run(mf_engine_t *eng, const char *db, const bson_t *cmd, const int *tolerated, mf_error_t *err) MF_WUR;

/*
 * mf_oplog_apply: applies every op of entry to eng, in order. Returns 0, or
 * -1 with err (a malformed entry, or a command that failed for another
 * reason than the tolerated ones); ops before the failing one stay applied.
 */
int mf_oplog_apply(mf_engine_t *eng, const bson_t *entry, mf_error_t *err) MF_WUR;

#endif /* MF_OPLOG_H */
