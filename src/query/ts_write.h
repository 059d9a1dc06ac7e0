/*
 * ts_write.h: writes to time-series collections (query/ts_write.c).
 *
 * Inserts group measurements into buckets (doc/bucket.h) of the view's
 * system.buckets collection; deletes remove whole buckets when the filter
 * is on the metaField only, and otherwise rewrite each candidate bucket
 * without the matching measurements; updates likewise (mf_ts_update).
 * Each takes its own catalog lock session (call with none held) and
 * reports like its mf_write_* counterpart (query/write.h), with counts in
 * measurements.
 */
#ifndef MF_TS_WRITE_H
#define MF_TS_WRITE_H

#include <bson/bson.h>
#include <stdbool.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "query/write.h"
#include "storage/storage.h"

/* The most measurements and bytes of measurements a bucket takes (MongoDB's timeseriesBucketMaxCount / MaxSize). */
#define MF_TS_BUCKET_MAX_COUNT 1000
#define MF_TS_BUCKET_MAX_BYTES 128000

/*
 * mf_ts_is_timeseries: whether db.coll is a time-series collection (takes
 * and releases its own catalog session).
 */
bool mf_ts_is_timeseries(mf_catalog_t *cat, const char *db, const char *coll);

/*
 * mf_ts_insert: inserts measurements docs[0..n) into time-series collection
 * db.coll. A measurement without a Date in the timeField fails with 2
 * BadValue ("'<timeField>' must be present and contain a valid BSON UTC
 * datetime value") and goes to on_error; ordered batches stop there. A
 * measurement without _id gets an ObjectId (appended, as MongoDB does).
 * *inserted counts committed measurements. Returns 0, or -1 with err.
 */
int mf_ts_insert(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *docs,
                 size_t n, bool ordered, mf_write_error_fn on_error, void *arg, int64_t *inserted,
                 mf_error_t *err) MF_WUR;

/* mf_ts_delete: one statement of a delete command ({q, limit}) on time-series db.coll; res counts measurements. */
int mf_ts_delete(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *stmt,
                 mf_write_delete_result_t *res, mf_error_t *err) MF_WUR;

/*
 * mf_ts_update: one statement of an update command on time-series db.coll,
 * as MongoDB 8.0 runs it: any filter and update document (a pipeline is 72),
 * multi or not, upsert. A multi update of the metaField alone, filtered on
 * the metaField alone, changes whole buckets; anything else rewrites each
 * candidate bucket measurement by measurement (a measurement whose meta or
 * time no longer fits its bucket moves to a bucket of its own). A result
 * without a Date in the timeField is 2 BadValue. res counts measurements.
 */
int mf_ts_update(mf_catalog_t *cat, mf_sess_t *s, bool durable, const char *db, const char *coll, const bson_t *stmt,
                 mf_write_update_result_t *res, mf_error_t *err) MF_WUR;

#endif /* MF_TS_WRITE_H */
