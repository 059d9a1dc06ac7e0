/*
 * profile.h: the database profiler (see profile.c).
 */
#ifndef MF_PROFILE_H
#define MF_PROFILE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"

/* mf_profile_level: 0, 1 or 2 for db (thread-safe, cheap when nothing profiles). */
int mf_profile_level(const char *db);
/* mf_profile_slowms: the slow-operation threshold in ms. */
int64_t mf_profile_slowms(void);
/* mf_profile_wants: whether an operation of millis ms on db is to be profiled. */
bool mf_profile_wants(const char *db, int64_t millis);
/*
 * mf_profile_write: appends entry (copied, given an _id) to db.system.profile.
 * Call with no catalog lock held and no transaction open on this thread.
 */
void mf_profile_write(mf_engine_t *eng, const char *db, const bson_t *entry);

extern const mf_cmd_def_t mf_cmds_profile[];

#endif /* MF_PROFILE_H */
