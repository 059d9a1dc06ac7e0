/*
 * ttl.h: TTL indexes: spec validation and the TTL monitor.
 *
 * A TTL index is a single-field index whose spec has expireAfterSeconds N.
 * The monitor (ttl_monitor.c) deletes documents whose indexed date + N has
 * passed (SPEC C1-C8), in passes and sub-passes (SPEC D1-D3), through the
 * same batched-delete path as a user's multi-delete (query/batch.h), and, beyond
 * MongoDB, wakes when the earliest document is due (SPEC D7).
 */
#ifndef MF_TTL_H
#define MF_TTL_H

#include <bson/bson.h>
#include <stdbool.h>

#include "catalog/catalog.h"
#include "catalog/observer.h"
#include "common/curop.h"
#include "common/error.h"
#include "common/failpoint.h"
#include "common/params.h"
#include "index/index_spec.h"

/* The TTL option of index specs (mf_ttl_normalise_spec, _check_seconds, _index_seconds): index/index_spec.h. */

/* What the monitor needs from the engine; everything stays owned by the engine. */
typedef struct mf_ttl_env {
    mf_storage_t *st;
    mf_catalog_t *cat;
    mf_params_t *params;         /* the engine's parameters (ttl*) */
    mf_curops_t *curops;         /* batches register here (currentOp, killOp) */
    mf_failpoints_t *failpoints; /* hangTTLMonitorBetweenPasses, ttlMonitorFailBatch (common/failpoint.h); may be NULL */
    mf_observers_t *observers;   /* the monitor adds itself (wake-ups) */
    _Atomic int64_t *batched_docs;    /* serverStatus().batchedDeletes.docs */
    _Atomic int64_t *batched_batches; /* serverStatus().batchedDeletes.batches */
    /* Total foreground operations so far (any monotonic count); the pacer yields while it grows. */
    int64_t (*foreground_ops)(void *arg);
    /*
     * Called after each committed batch, with no lock held (the profiler
     * records TTL deletes, SPEC D4). May be NULL.
     */
    void (*on_batch)(void *arg, const char *ns, const char *index, int64_t secs, int64_t deleted, int64_t millis);
    void *arg;
    /*
     * Why this node must not expire anything, or NULL (SPEC E3: a replica-set
     * member restarted as a standalone). The monitor then never runs a pass
     * and logs the reason once.
     */
    const char *disabled_reason;
    /* The initial pause (mf_ttl_monitor_pause), NULL for none: a replica-set member starts paused. */
    const char *paused_reason;
    /*
     * Archive-on-expire (SPEC I2): documents of an index with archive: true
     * are staged here inside the transaction that deletes them; the
     * monitor also applies archiveRetentionSeconds. NULL: no archive.
     */
    struct mf_archive *archive;
    /*
     * A replica-set member: a commit first waits for its raft entry (the
     * engine's pre-commit hook), so TTL batches remove index entries one by
     * one, never as ranges under a range guard, whose check comes after that
     * wait (see mf_delete_rids).
     */
    bool replicated;
    /*
     * The CPUs this process is granted (common/sysres.h, read once by the
     * engine): ttlMonitorWorkers 0 runs this many deleters. 0: read here.
     */
    int cpus;
} mf_ttl_env_t;

typedef struct mf_ttl_monitor mf_ttl_monitor_t;

/*
 * mf_ttl_monitor_start: starts an engine's monitor thread (it idles while
 * ttlMonitorEnabled is false) and adds the write observer that wakes it for
 * earlier deadlines and on DDL. Returns 0 with *out set, or -1 with err.
 */
int mf_ttl_monitor_start(const mf_ttl_env_t *env, mf_ttl_monitor_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_ttl_monitor_stop: stops and joins the thread (a batch in flight stops
 * at its next yield point if interrupted, else finishes). Idempotent.
 */
void mf_ttl_monitor_stop(mf_ttl_monitor_t *m);

/*
 * mf_ttl_monitor_pause: reason (a static string) pauses passes (SPEC E1: a
 * member that is not primary deletes nothing) and kills the batch in flight
 * (E2: a step-down interrupts a pass); NULL resumes them. Any thread.
 */
void mf_ttl_monitor_pause(mf_ttl_monitor_t *m, const char *reason);

/*
 * mf_ttl_group_poll: SPEC D9, called by the threads that serve clients before
 * each command (any thread; m may be NULL). While the monitor has lowered
 * the server's scheduling group (ttlMonitorGroupNice), at most every 100 ms
 * one caller looks at the CPU other programs used since the last look, and
 * if they kept 125 % of a CPU busy puts the group back at once (the monitor
 * counts it in ttl.groupStarved). The clients' threads get most of a
 * lowered group's CPU, where the monitor, niced inside it, can wait
 * seconds for one. Costs one atomic load when the group is not lowered.
 */
void mf_ttl_group_poll(mf_ttl_monitor_t *m);

/* mf_ttl_monitor_free: stops (if needed) and frees m, once no write can reach its observer (NULL is ignored). */
void mf_ttl_monitor_free(mf_ttl_monitor_t *m);

/*
 * mf_ttl_status_append: appends the monitor's metrics to doc (the
 * serverStatus().metrics.ttl sub-document): deletedDocuments, passes,
 * subPasses (SPEC D3) and, beyond MongoDB (SPEC D8/D9), lateness, backlog,
 * nextDueAt and pace. Reads the catalog (takes its shared lock) for the
 * backlog estimate unless cat is NULL.
 */
void mf_ttl_status_append(mf_ttl_monitor_t *m, bson_t *doc);

/*
 * mf_ttl_indexes_append: appends one document per TTL index to the array arr
 * (the console's list, GET /api/ttl): db, collection, name, key,
 * expireAfterSeconds, archive, nextDueAt (Date, or null when no document is
 * indexed by a Date) and backlog (documents due now), as of the monitor's
 * last recount. It does not ask for a fresh count itself: call
 * mf_ttl_status_append first (it does, waiting up to 250 ms), as
 * serverStatus does, so one request costs one recount.
 */
void mf_ttl_indexes_append(mf_ttl_monitor_t *m, bson_t *arr);

/*
 * mf_ttl_notify: tells the monitor to recompute its next deadline now (it
 * does so by itself on every DDL event it observes). Cheap; callable with
 * any lock held.
 */
void mf_ttl_notify(mf_ttl_monitor_t *m);

#endif /* MF_TTL_H */
