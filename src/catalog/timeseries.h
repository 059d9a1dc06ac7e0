/*
 * timeseries.h: time-series collections in the catalog (SPEC F1).
 *
 * A time-series collection <name> is two catalog entries, as in MongoDB 8.0:
 *
 *   system.buckets.<name>  a real collection of bucket documents
 *                          (doc/bucket.h), options {timeseries,
 *                          expireAfterSeconds?}. Indexes: _id; the time
 *                          index {control.min.<time>: 1, _id: 1} (the TTL monitor's
 *                          range for the collection's expiry, and bucket
 *                          skipping for time ranges); with a metaField,
 *                          MongoDB's default {meta: 1, control.min.<time>:
 *                          1, control.max.<time>: 1}, which users see as
 *                          {<meta>: 1, <time>: 1}.
 *   <name>                 a view on it, options {viewOn, pipeline:
 *                          [{$_internalUnpackBucket: {timeField,
 *                          metaField?, bucketMaxSpanSeconds}}],
 *                          timeseries}. Reads resolve through it.
 *
 * The buckets collection holds the one copy of expireAfterSeconds (collMod
 * changes it there). Both entries are created under one exclusive catalog
 * session; a failure drops what was created, and start-up drops either half
 * left alone by a crash (mf_ts_drop_orphans).
 */
#ifndef MF_TIMESERIES_H
#define MF_TIMESERIES_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "doc/bucket.h"

#define MF_TS_BUCKETS_PREFIX "system.buckets."
#define MF_TS_MAX_SPAN_LIMIT 31536000 /* seconds: bucketMaxSpanSeconds' upper bound (one year) */

/*
 * mf_ts_options_normalize: validates the create command's timeseries
 * option ts (for namespace ns, used in messages) and writes it as MongoDB
 * 8.0 stores it to out (initialised by the callee): timeField, metaField?,
 * then granularity + bucketMaxSpanSeconds (defaults: "seconds", 3600), or
 * bucketRoundingSeconds + bucketMaxSpanSeconds for the custom form.
 * MongoDB's codes: 40414 missing timeField, 40415 unknown field, 14 wrong
 * type, 2 bad granularity, 51024 a span out of range, 72 the rest.
 * Returns 0, or -1 with err (out then empty).
 */
int mf_ts_options_normalize(const char *ns, const bson_value_t *ts, bson_t *out, mf_error_t *err) MF_WUR;

/* The buckets collection's name: "system.buckets." + name (out must hold 256 bytes). */
void mf_ts_buckets_name(const char *name, char *out, size_t outlen);

/*
 * mf_ts_create: creates time-series collection db.name with normalized
 * options ts and expireAfterSeconds expire (-1: none): its buckets
 * collection, their indexes, then the view. Exclusive catalog session held
 * (mf_catalog_wrlock). All or nothing: on failure whatever was created is
 * dropped. Returns 0, or -1 with err (48 NamespaceExists when either name
 * is taken).
 */
int mf_ts_create(mf_catalog_t *cat, const char *db, const char *name, const bson_t *ts, int64_t expire,
                 mf_error_t *err) MF_WUR;

/*
 * mf_ts_buckets_of: the buckets collection of time-series view v (NULL if
 * v is not one, or its buckets are missing). Catalog lock held; the result
 * is valid while the caller's session holds it.
 */
mf_coll_t *mf_ts_buckets_of(mf_catalog_t *cat, const mf_coll_t *v);

/*
 * mf_ts_options_of: c's options.timeseries (view or buckets collection) as
 * a document aliasing c->options; false when c is not time-series.
 */
bool mf_ts_options_of(const mf_coll_t *c, bson_t *ts);

/*
 * mf_ts_spec_of: c's bucketing spec (view or buckets collection); its
 * strings alias c->options. False when c is not time-series.
 */
bool mf_ts_spec_of(const mf_coll_t *c, mf_ts_spec_t *spec);

/*
 * mf_ts_index_to_buckets: a createIndexes spec on time-series collection
 * (spec) as the index of its buckets collection, as MongoDB 8.0 translates
 * it: the timeField becomes control.min/max.<time> (control.min only for a
 * TTL index), the metaField "meta", other fields their control.min/max;
 * the name stays the user's (generated from the user's key when absent); a
 * partialFilterExpression must be on the metaField only (72), and not
 * come with a collation (85, as mongod); sparse only on the timeField and
 * the metaField (72). A TTL index
 * must be on the timeField alone (72, 67 when compound) with such a
 * filter (72). unique: 72. out is initialised by the callee. 0 or -1.
 */
int mf_ts_index_to_buckets(const mf_ts_spec_t *spec, const bson_t *user, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_ts_index_from_buckets: a buckets index spec as users see it on the
 * time-series collection (out initialised by the callee), or false for the
 * indexes users do not see (_id, the time index).
 */
bool mf_ts_index_from_buckets(const mf_ts_spec_t *spec, const bson_t *bspec, bson_t *out);

/* mf_ts_key_to_buckets: a user key pattern in buckets form (out initialised by the callee). */
void mf_ts_key_to_buckets(const mf_ts_spec_t *spec, const bson_t *key, bool ttl, bson_t *out);

/*
 * mf_ts_drop_orphans: drops the half of a time-series collection a crash
 * left alone (a buckets collection without its view, or a time-series view
 * without its buckets). Takes its own catalog sessions; logs what it drops.
 */
void mf_ts_drop_orphans(mf_catalog_t *cat);

#endif /* MF_TIMESERIES_H */
