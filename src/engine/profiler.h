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
/* mf_profile_set_level: sets db's level (0, 1, 2); any number of databases may have one. */
void mf_profile_set_level(mf_profiler_t *p, const char *db, int level);
/* mf_profile_forget: db goes back to the default level (dropDatabase, as mongod clears a dropped database's settings). */
void mf_profile_forget(mf_profiler_t *p, const char *db);
/* mf_profile_any: whether any database profiles (a cheap check). */
bool mf_profile_any(mf_profiler_t *p);
/*
 * mf_profile_set_default_level: the level of every database not given its
 * own (0 unless set; mongod's --profile). A database profiled only by it is
 * not created for its system.profile (mf_profile_write).
 */
void mf_profile_set_default_level(mf_profiler_t *p, int level);
/* mf_profile_slowms / set_slowms: the slow-operation threshold in ms (set returns the old one). */
int64_t mf_profile_slowms(mf_profiler_t *p);
int64_t mf_profile_set_slowms(mf_profiler_t *p, int64_t ms);
/* mf_profile_sample_rate / set_sample_rate: the fraction of slow operations logged and profiled (set returns the old one). */
double mf_profile_sample_rate(mf_profiler_t *p);
double mf_profile_set_sample_rate(mf_profiler_t *p, double rate);
/*
 * mf_profile_slow: whether an operation of millis ms counts as slow, as
 * mongod's shouldLogSlowOpWithSampling decides: it took slowms or more and
 * it is drawn at sampleRate (a new draw on each call: call once per
 * operation). Slow operations are logged ("Slow query") and profiled at
 * level 1.
 */
bool mf_profile_slow(mf_profiler_t *p, int64_t millis);
/* mf_profile_wants: whether an operation on db is profiled: every one at level 2, a slow one (mf_profile_slow) at 1. */
bool mf_profile_wants(mf_profiler_t *p, const char *db, bool slow);
/*
 * A database's profile filter (profile's `filter`): a query over an
 * operation's profile entry that decides, in place of slowms and
 * sampleRate, what level 1 profiles and what the slow query log shows.
 *
 * mf_profile_set_filter: sets db's filter to spec (copied and compiled;
 * NULL: "unset"); -1 with err when spec does not parse, nothing changed.
 * mf_profile_filter_get: db's filter, a reference the caller releases with
 * mf_profile_filter_release, or NULL (cheap when no database has one).
 * mf_profile_filter_and_level: the same, and (when it returns one) db's
 * level in *level (may be NULL), read under the same lock: what a finishing
 * operation needs in one lookup.
 * mf_profile_filter_spec: the filter as set (valid while the reference is
 * held). mf_profile_filter_match: whether entry passes it (thread-safe).
 */
typedef struct mf_profile_filter mf_profile_filter_t;
int mf_profile_set_filter(mf_profiler_t *p, const char *db, const bson_t *spec, mf_error_t *err);
mf_profile_filter_t *mf_profile_filter_get(mf_profiler_t *p, const char *db);
mf_profile_filter_t *mf_profile_filter_and_level(mf_profiler_t *p, const char *db, int *level);
void mf_profile_filter_release(mf_profile_filter_t *f);
const bson_t *mf_profile_filter_spec(const mf_profile_filter_t *f);
bool mf_profile_filter_match(const mf_profile_filter_t *f, const bson_t *entry);
/*
 * mf_profile_write: appends entry (copied, given an _id) to db.system.profile
 * of eng, created on first use as a 1 MiB capped collection. Call with no
 * catalog lock held and no transaction open on this thread.
 */
void mf_profile_write(mf_engine_t *eng, const char *db, const bson_t *entry);

#endif /* MF_PROFILER_H */
