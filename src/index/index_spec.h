/*
 * index_spec.h: index specs as createIndexes and collMod accept them:
 * validation and normalisation (index_spec.c) and the TTL option
 * expireAfterSeconds (index_ttl.c, SPEC A2-A4).
 */
#ifndef MF_INDEX_SPEC_H
#define MF_INDEX_SPEC_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

/*
 * mf_index_spec_normalise: validates a requested index spec and writes the
 * spec to store into out (initialised here on success): v: 2, key, name
 * (the default one when absent), the accepted options verbatim, TTL
 * normalised. Returns 0, or -1 with err (MongoDB's code and message).
 */
int mf_index_spec_normalise(const bson_t *req, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_index_spec_remove_unknown: initialises out (the caller destroys it) with
 * the fields of req an index spec may have, in order, as mongod's
 * index_key_validate::removeUnknownFields does for createIndexes'
 * ignoreUnknownIndexOptions; returns how many fields it left out.
 */
int mf_index_spec_remove_unknown(const bson_t *req, bson_t *out);

/*
 * mf_index_spec_drop_simple_collation: removes a collation of {locale:
 * "simple"} from a normalised spec, once the collection's default has been
 * given to the specs without one: mongod stores a simple index without a
 * collation (validateIndexSpecCollation), and an index without one is simple.
 */
void mf_index_spec_drop_simple_collation(bson_t *spec);

/* mf_index_spec_is_id_pattern: whether spec's key is {_id: 1} or {_id: -1}, an _id index whatever its name. */
bool mf_index_spec_is_id_pattern(const bson_t *spec);

/*
 * mf_index_spec_compare: compares a normalised requested spec with an
 * existing one. Returns 0 when they are unrelated, 1 when the same index
 * already exists, or -1 with err (85 IndexOptionsConflict, 86
 * IndexKeySpecsConflict).
 */
int mf_index_spec_compare(const bson_t *want, const bson_t *have, mf_error_t *err) MF_WUR;

/*
 * mf_index_spec_listed: writes a stored spec into out (initialised here; the
 * caller destroys it) as listIndexes shows it: MongoDB 8.0's field order and
 * types (list_indexes.idl), then any other option as stored.
 */
void mf_index_spec_listed(const bson_t *spec, bson_t *out);

/*
 * mf_ttl_normalise_spec: validates the expireAfterSeconds of a createIndexes
 * spec that has one (SPEC A2-A4: numeric, not NaN, 0..2147483647, truncated
 * to an integer; single field; not _id) and writes the spec to store into
 * out (initialised here; N stored as an int32 when integral). Returns 0, or
 * -1 with err (67 CannotCreateIndex / 197 InvalidIndexSpecificationOption)
 * and out untouched. Messages quote as_sent (the spec as the command gave
 * it, as mongod's validateIndexSpecTTL does), or spec when it is NULL.
 */
int mf_ttl_normalise_spec(const bson_t *spec, const bson_t *as_sent, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_ttl_check_seconds: checks an expireAfterSeconds value (rules 1-4 of
 * index_ttl.c) and gives its truncated value. Returns 0, or -1 with err (67).
 */
int mf_ttl_check_seconds(const bson_value_t *v, int32_t *out, mf_error_t *err) MF_WUR;
/*
 * mf_ttl_collmod_seconds: collMod's index.expireAfterSeconds (a number) as
 * mongod's IDL safeInt reads it: truncated, saturated to the int32 range,
 * NaN as 0; negative fails with 72 InvalidOptions. *out set on success.
 */
int mf_ttl_collmod_seconds(const bson_value_t *v, int32_t *out, mf_error_t *err) MF_WUR;

/* mf_ttl_index_seconds: true if spec is a TTL index spec; *secs gets N. */
bool mf_ttl_index_seconds(const bson_t *spec, int64_t *secs);

#endif /* MF_INDEX_SPEC_H */
