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
#include "common/error.h"

/*
 * mf_ttl_normalise_spec: validates the expireAfterSeconds of a createIndexes
 * spec that has one (SPEC A2-A4: numeric, not NaN, 0..2147483647, truncated
 * to an integer; single field; not _id) and writes the spec to store into
 * out (initialised here; N stored as an int32 when integral). Returns 0, or
 * -1 with err (67 CannotCreateIndex / 197 InvalidIndexSpecificationOption)
 * and out untouched.
 */
int mf_ttl_normalise_spec(const bson_t *spec, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_ttl_notify: tells the monitor that the set of TTL indexes or their N
 * changed (createIndexes, dropIndexes, collMod, drop, rename), so it
 * recomputes its next deadline now. Cheap; callable with any lock held.
 */
void mf_ttl_notify(void);

#endif /* MF_TTL_H */
