/*
 * autocompact.h: background compaction, mongod 8.0's autoCompact.
 *
 * {autoCompact: true} starts a thread that goes through every collection's
 * and index's table (the oplog excluded) and compacts each file that has at
 * least freeSpaceTargetMB free, one table at a time, in rounds of about a
 * second (mf_storage_compact_round), so the space that mass deletions (a
 * TTL index's) leave behind goes back to the file system without anyone
 * asking. {autoCompact: false} stops it; runOnce stops it after one pass.
 * See autocompact.c for the pacing and what a pass skips.
 *
 * The handle belongs to the engine: created with it (no thread until the
 * first enable), freed with it (the thread is stopped first). Its state is
 * in memory only: a restart leaves background compaction off, as mongod's.
 */
#ifndef MF_AUTOCOMPACT_H
#define MF_AUTOCOMPACT_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "storage/storage.h"

typedef struct mf_autocompact mf_autocompact_t;

typedef struct mf_autocompact_env {
    mf_storage_t *st;
    mf_catalog_t *cat;
    /*
     * Around each compaction round and checkpoint: enter returns false
     * while files must not change (an fsyncLock holds them still; the
     * thread waits and tries again), else counts the writer in until
     * leave, so an fsyncLock taken meanwhile waits for the round. NULL:
     * never held.
     */
    bool (*enter)(void *arg);
    void (*leave)(void *arg);
    void *arg;
} mf_autocompact_env_t;

/* mf_autocompact_new: a stopped background compactor over env (copied). Never NULL. */
mf_autocompact_t *mf_autocompact_new(const mf_autocompact_env_t *env);

/* mf_autocompact_free: stops the thread (waits for its current round, about a second at most) and frees ac. NULL is a no-op. */
void mf_autocompact_free(mf_autocompact_t *ac);

/*
 * mf_autocompact_set: enables background compaction (with run_once and
 * free_space_target_mb, at least 1) or disables it. Enabling when it is
 * already enabled, or disabling when it is not, fails with 2 BadValue, as
 * WiredTiger's background compaction refuses it in mongod (stop it first
 * to change its options). Returns 0 or -1 with err.
 */
int mf_autocompact_set(mf_autocompact_t *ac, bool enable, bool run_once, int64_t free_space_target_mb, mf_error_t *err);

/*
 * mf_autocompact_stats_bson: appends the "compact" group of serverStatus's
 * wiredTiger section: what WiredTiger's background compaction counts in
 * mongod 8.0 (running, successful / failed calls, files skipped for too
 * little free space, bytes recovered, ...). Any thread.
 */
void mf_autocompact_stats_bson(mf_autocompact_t *ac, bson_t *out);

#endif
