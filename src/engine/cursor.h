/*
 * cursor.h: server-side cursors that outlive one command (find, aggregate,
 * listCollections ... then getMore).
 *
 * A cursor is either materialised (a vector of result documents and a
 * position) or a resumable collection scan (the last record id returned, the
 * matcher, projection and the query plan, whose position says where an
 * index or collection scan resumes): a WiredTiger cursor cannot outlive the command,
 * because sessions belong to worker threads, so a scan re-seeks to the record
 * after last_rid on each getMore. Cursors are owned by the table; a command
 * checks one out (exclusive use) and checks it back in, or destroys it when
 * exhausted. Idle cursors are reaped after cursorTimeoutMillis. A cursor
 * remembers the logical session that opened it (has_lsid, lsid): getMore
 * must come from the same one, and killing the session kills the cursor
 * (cmd/cmd_sessions.c).
 */
#ifndef MF_CURSOR_H
#define MF_CURSOR_H

#include <stdbool.h>
#include <stdint.h>

#include "common/docvec.h"
#include "doc/match.h"
#include "query/plan.h"
#include "doc/project.h"
#include "doc/sort.h"

typedef struct mf_cursors mf_cursors_t;

/*
 * MF_CURSOR_EXT: an opaque state owned by the command that created the
 * cursor (a streaming aggregation), freed with ext_free when the cursor is
 * freed (exhausted, killed, reaped).
 */
enum { MF_CURSOR_DOCS = 1, MF_CURSOR_SCAN = 2, MF_CURSOR_EXT = 3 };

typedef struct mf_cursor {
    int64_t id;
    int kind;
    char *db;
    char *coll;          /* collection name (for the ns reply field) */
    /* MF_CURSOR_DOCS */
    mf_docvec_t docs;
    size_t pos;
    /* MF_CURSOR_SCAN */
    uint8_t coll_uuid[16];      /* the collection it scans: a getMore finding another (or none) there fails with 175 */
    int64_t last_rid;
    mf_matcher_t *matcher;      /* owned */
    mf_projection_t *proj;      /* owned, may be NULL */
    int64_t limit_left;         /* < 0: unlimited */
    int64_t skip_left;          /* documents still to skip */
    bson_t *filter;             /* owned copy of the filter (plan choice on resume) */
    mf_plan_t *plan;            /* owned, may be NULL: the plan being resumed (its position included) */
    bool await_data;            /* tailable with awaitData: an empty getMore waits for new documents */
    bool return_key;            /* find's returnKey: each result is the index key that led to it */
    bool show_record_id;        /* find's showRecordId: each result ends with $recordId (the record id) */
    bson_t *key_meta;           /* owned, or NULL: returnKey's {$meta: "sortKey"} projection paths, {path: 1} */
    mf_sort_t *sort_spec;       /* owned, or NULL: the find's sort, whose key those paths (or the projection's) show */
    /* MF_CURSOR_EXT */
    void *ext;                  /* owned through ext_free */
    void (*ext_free)(void *ext);
    /*
     * ext_fill (optional): fills the next batch of an MF_CURSOR_EXT cursor
     * that is not a streaming aggregation (a change stream,
     * cmd/cmd_changestream.c); op is the command's mf_op_t. Same contract
     * as mf_crud_cursor_fill: appends up to max documents to arr, sets
     * *exhausted, 0 or -1 with the op's error. Catalog lock held.
     */
    int (*ext_fill)(void *op, struct mf_cursor *cur, int64_t max, bson_t *arr, bool *exhausted);
    /*
     * A change stream's postBatchResumeToken after its last batch (owned,
     * or NULL: none), which every cursor reply carries.
     */
    bson_t *resume_token;
    bson_t *collation;          /* owned, or NULL: the collation spec of the command that opened it (getMore reinstalls it) */
    /*
     * What is left of the opening find's or aggregate's maxTimeMS (ms), -1
     * when it had none: it bounds the getMores of a cursor that does not
     * await data, each leaving what it did not use to the next (mongod's
     * ClientCursor leftoverMaxTimeMicros).
     */
    int64_t max_time_left_ms;
    /*
     * Any kind: a result the last batch produced but had no room for
     * (mongod's stashResult: a batch stays within 16 MiB); the next batch
     * starts with it. Owned, or NULL.
     */
    bson_t *stash;
    /* bookkeeping (table-owned) */
    int64_t last_used_ms;
    bool in_use;
    bool killed;
    /*
     * The operation of the getMore that has it checked out (set by
     * mf_cursors_checkout, cleared at check-in; table lock), or NULL:
     * killCursors interrupts that operation with 237 CursorKilled, as
     * mongod's CursorManager::killCursor kills the operation using a pinned
     * cursor. Valid while set: a getMore checks its cursor in before it ends.
     */
    struct mf_curop *pinned_by;
    int64_t client_id;
    char owner[400];  /* "user@db" who opened it, "" without access control: only they may use or kill it */
    bool has_lsid;    /* opened by a command with an lsid: its getMores must name the same session */
    uint8_t lsid[16]; /* that session's id (its uid is owner's) */
    bool in_txn;        /* opened inside a multi-document transaction: its getMores must be in that one */
    int64_t txn_number; /* that transaction's txnNumber */
    /*
     * What $currentOp's idleCursors shows (and the reaper heeds): the
     * command that opened it (owned, or NULL), its plan summary (owned, or
     * NULL), wall-clock creation and last use (ms), documents and batches
     * returned so far (the opening batch included), its tailable and
     * noCursorTimeout options. A noCursorTimeout cursor is never reaped for
     * idleness, except one opened in a session, which lasts as long as an
     * idle session would (30 minutes), as mongod's.
     */
    bson_t *origin;
    char *plan_summary;
    int64_t created_wall_ms, used_wall_ms;
    int64_t now_ms; /* the opening command's $$NOW (mf_curop_now_ms), which each getMore takes on */
    int64_t n_docs, n_batches;
    bool tailable, no_timeout;
    bool has_sort_stage; /* its plan sorted in memory: each getMore counts as such an operation too, as mongod's */
    bool lists_indexes;  /* listIndexes': its getMores need listIndexes on the collection, not find (mongod's) */
} mf_cursor_t;

mf_cursors_t *mf_cursors_new(void);
void mf_cursors_free(mf_cursors_t *t);

/* mf_cursor_new: an empty cursor of kind for db.coll (caller fills the rest). */
mf_cursor_t *mf_cursor_new(int kind, const char *db, const char *coll);
void mf_cursor_free(mf_cursor_t *c);

/*
 * mf_cursors_register: takes ownership of c (its client_id set), gives it a
 * fresh id and returns it; c stays checked out. -1 (c not taken) when
 * max_total cursors are open, or max_per_client of c's client (0: no
 * limit). Lookups by id are a hash probe: no cost grows with the number of
 * open cursors.
 */
int64_t mf_cursors_register(mf_cursors_t *t, mf_cursor_t *c, int64_t max_total, int64_t max_per_client);
/*
 * mf_cursors_checkout: exclusive use of cursor id, or NULL (unknown, or
 * busy: *busy set); the calling thread's current operation pins it (see
 * pinned_by) until mf_cursors_checkin or mf_cursors_release.
 */
mf_cursor_t *mf_cursors_checkout(mf_cursors_t *t, int64_t id, bool *busy);
/* mf_cursors_lists_indexes: whether cursor id is open and a listIndexes' (for getMore's privilege check). */
bool mf_cursors_lists_indexes(mf_cursors_t *t, int64_t id);
/* mf_cursors_checkin: returns c to the table (or frees it if it was killed meanwhile). */
void mf_cursors_checkin(mf_cursors_t *t, mf_cursor_t *c);
/* mf_cursors_release: removes a checked-out c from the table and frees it. */
void mf_cursors_release(mf_cursors_t *t, mf_cursor_t *c);
/*
 * mf_cursors_kill: kills cursor id if owner (NULL: anyone) opened it; a
 * getMore using it is interrupted with 237 CursorKilled and the cursor goes
 * when that getMore checks it in. Returns 1 when killed, 0 if unknown, -1
 * if another user's (its namespace "db.coll" then in ns, ns_cap bytes).
 */
int mf_cursors_kill(mf_cursors_t *t, int64_t id, const char *owner, char *ns, size_t ns_cap);
/*
 * mf_cursors_others: whether cursor id is open and another user's than
 * owner (its namespace "db.coll" then in ns, ns_cap bytes): killCursors
 * checks every id so before killing any, as mongod's doCheckAuthorization.
 */
bool mf_cursors_others(mf_cursors_t *t, int64_t id, const char *owner, char *ns, size_t ns_cap);
/*
 * mf_cursors_kill_where: kills every cursor match(arg, c) selects (one in
 * use is marked killed and goes when checked in; a getMore using it is
 * interrupted with 11601 Interrupted, as killSessions kills its sessions'
 * operations). match runs under the table's lock and must not call back
 * in. Returns how many.
 */
int mf_cursors_kill_where(mf_cursors_t *t, bool (*match)(void *arg, const mf_cursor_t *c), void *arg);
/*
 * mf_cursors_report_idle: calls fn(arg, doc) with $currentOp's idleCursor
 * document ({type: "idleCursor", ns, lsid?, planSummary?, cursor: {...}})
 * of every cursor not in use (doc valid during the call). fn runs under
 * the table's lock and must not call back in.
 */
void mf_cursors_report_idle(mf_cursors_t *t, void (*fn)(void *arg, const bson_t *doc), void *arg);
/* mf_cursors_reap: kills cursors idle for more than timeout_ms (noCursorTimeout ones: see mf_cursor_t). Returns how many. */
int mf_cursors_reap(mf_cursors_t *t, int64_t now_ms, int64_t timeout_ms);
/* mf_cursors_open_count: number of live cursors. */
int64_t mf_cursors_open_count(mf_cursors_t *t);
/*
 * mf_cursors_open_stats: serverStatus metrics.cursor.open: live cursors,
 * those opened with noCursorTimeout, and those pinned (in use by a command
 * now). One pass over the open cursors, under the table's lock.
 */
void mf_cursors_open_stats(mf_cursors_t *t, int64_t *total, int64_t *no_timeout, int64_t *pinned);
/* mf_cursors_timed_out: cursors reaped since start. */
int64_t mf_cursors_timed_out(mf_cursors_t *t);

/*
 * serverStatus metrics.cursor's counters since start, as mongod's
 * clientcursor.cpp keeps them: cursors opened (totalOpened), closed ones
 * that had returned more than one batch (moreThanOneBatch), and how long
 * closed ones lived, in MF_CURSOR_LIFESPANS buckets in mongod's order:
 * less than 1 s, 5 s, 15 s, 30 s, 1 min, 10 min, then 10 min or more.
 */
#define MF_CURSOR_LIFESPANS 7
typedef struct mf_cursors_metrics {
    int64_t total_opened, more_than_one_batch;
    int64_t lifespan[MF_CURSOR_LIFESPANS];
} mf_cursors_metrics_t;
/* mf_cursors_metrics: copies the counters into *out (under the table's lock). */
void mf_cursors_metrics(mf_cursors_t *t, mf_cursors_metrics_t *out);

#endif /* MF_CURSOR_H */
