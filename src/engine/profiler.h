/*
 * profiler.h: the database profiler (engine/profiler.c): per-database levels
 * and the slow threshold, and writing entries to <db>.system.profile.
 */
#ifndef MF_PROFILER_H
#define MF_PROFILER_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "engine/engine.h"

/* mf_profiler_new / free: an engine's profiler settings (levels per database, slowms). */
mf_profiler_t *mf_profiler_new(void);
void mf_profiler_free(mf_profiler_t *p);
/* mf_profile_level: 0, 1 or 2 for db (thread-safe, cheap when nothing profiles). */
int mf_profile_level(mf_profiler_t *p, const char *db);
/* mf_profile_set_level: sets db's level (0, 1, 2); at most 256 databases keep one (logged beyond). */
void mf_profile_set_level(mf_profiler_t *p, const char *db, int level);
/* mf_profile_slowms / set_slowms: the slow-operation threshold in ms (set returns the old one). */
int64_t mf_profile_slowms(mf_profiler_t *p);
int64_t mf_profile_set_slowms(mf_profiler_t *p, int64_t ms);
/* mf_profile_wants: whether an operation of millis ms on db is to be profiled. */
bool mf_profile_wants(mf_profiler_t *p, const char *db, int64_t millis);
/*
 * mf_profile_write: appends entry (copied, given an _id) to db.system.profile
 * of eng, created on first use as a 1 MiB capped collection. Call with no
 * catalog lock held and no transaction open on this thread.
 */
void mf_profile_write(mf_engine_t *eng, const char *db, const bson_t *entry);

#endif /* MF_PROFILER_H */
