/*
 * api_internal.h: what the engine's own modules and unit tests may know of
 * an mf_db beyond include/mayfly.h (not exported from libmayfly.so).
 */
#ifndef MF_API_INTERNAL_H
#define MF_API_INTERNAL_H

#include "engine/engine.h"
#include "mayfly.h"

/* mf_db_engine: the engine behind db, valid until mf_db_close (to attach observers such as the oplog). */
mf_engine_t *mf_db_engine(mf_db *db);

#endif /* MF_API_INTERNAL_H */
