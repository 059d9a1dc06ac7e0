/*
 * profile.h: the database profiler (see profile.c).
 */
#ifndef MF_PROFILE_H
#define MF_PROFILE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"

/* mf_profiler_new / free: an engine's profiler settings (levels per database, slowms). */
mf_profiler_t *mf_profiler_new(void);
void mf_profiler_free(mf_profiler_t *p);
/* mf_profile_level: 0, 1 or 2 for db (thread-safe, cheap when nothing profiles). */
int mf_profile_level(mf_profiler_t *p, const char *db);
/* mf_profile_slowms: the slow-operation threshold in ms. */
int64_t mf_profile_slowms(mf_profiler_t *p);
/* mf_profile_wants: whether an operation of millis ms on db is to be profiled. */
bool mf_profile_wants(mf_profiler_t *p, const char *db, int64_t millis);
/*
 * mf_profile_write: appends entry (copied, given an _id) to db.system.profile.
 * Call with no catalog lock held and no transaction open on this thread.
 */
void mf_profile_write(mf_engine_t *eng, const char *db, const bson_t *entry);

extern const mf_cmd_def_t mf_cmds_profile[];

#endif /* MF_PROFILE_H */
