/*
 * bucket.h: time-series bucket documents (MongoDB 8.0, uncompressed,
 * control.version 1), built, reopened, unpacked and filtered in memory.
 *
 * A time-series collection stores its measurements in buckets; one bucket
 * document, as db.system.buckets.X.find() shows it, reads
 *
 *   { _id: ObjectId,
 *     control: { version: 1,
 *                min: { <field>: <min>, ... },
 *                max: { <field>: <max>, ... } },
 *     meta: <meta value>,             only when the collection has a metaField
 *                                     and the measurements carried it
 *     data: { <field>: { "0": v0, "1": v1, ... }, ... } }
 *
 * data holds one column per measurement field except the metaField (the
 * measurement's _id is an ordinary column); a column's keys are the indexes
 * of the measurements that have the field, as decimal strings, ascending, so
 * a measurement missing a field has no entry in that column. Columns appear in
 * the order their fields were first seen. control.min.<timeField> is the
 * bucket's start, the first measurement's time rounded down (floor, also for
 * times before 1970) to a multiple of bucketRoundingSeconds;
 * control.max.<timeField> is the largest time. Other fields' min and max
 * follow MongoDB's rules (timeseries/minmax.cpp): embedded documents and
 * arrays are summarised sub-field by sub-field, recursively; a value of
 * another canonical type replaces a summary only if its type orders
 * below (for min) or above (for max) the summary's type. The _id is an
 * ObjectId whose 4-byte timestamp is the start in seconds, clamped to
 * [0, 2^32 - 1]: times out of that range rely on control.min/max, never on
 * the _id.
 *
 * Everything here is pure: no storage, no catalog, no globals. Choosing the
 * bucket for a measurement (by meta value and mf_bucket_fits), grouping
 * null and missing meta, and keeping meta documents in one field order are
 * the caller's business. Whole-document equality on the metaField is pushed
 * down unchanged, so meta must be stored as the measurement had it.
 */
#ifndef MF_BUCKET_H
#define MF_BUCKET_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* A collection's time-series options. The strings are borrowed by each call. */
typedef struct mf_ts_spec {
    const char *time_field;
    const char *meta_field; /* NULL: the collection has no metaField */
    int64_t max_span_s;     /* bucketMaxSpanSeconds */
    int64_t rounding_s;     /* bucketRoundingSeconds */
} mf_ts_spec_t;

/*
 * mf_ts_granularity_spans: bucketMaxSpanSeconds and bucketRoundingSeconds of
 * a granularity: "seconds" 3600/60, "minutes" 86400/3600, "hours"
 * 2592000/86400. Returns 0, or -1 (outputs untouched) for another string.
 */
int mf_ts_granularity_spans(const char *granularity, int64_t *max_span_s, int64_t *rounding_s) MF_WUR;

/*
 * mf_bucket_round_down: t_ms rounded down to a multiple of
 * spec->rounding_s seconds (floor, so -1 ms goes to -rounding). A
 * rounding_s <= 0 leaves t_ms as is; a result below INT64_MIN is clamped to it.
 */
int64_t mf_bucket_round_down(const mf_ts_spec_t *spec, int64_t t_ms);

/* ---- Building a bucket ---------------------------------------------------- */

typedef struct mf_bucket mf_bucket_t; /* an open bucket being filled, in memory */

/*
 * mf_bucket_new: an empty bucket starting at mf_bucket_round_down(first_time_ms),
 * with a fresh _id. meta is the bucket's meta value (copied; NULL or EOD when
 * the measurements have none). Copies what it needs of spec. Never NULL; free
 * with mf_bucket_free.
 */
mf_bucket_t *mf_bucket_new(const mf_ts_spec_t *spec, const bson_value_t *meta, int64_t first_time_ms);

/*
 * mf_bucket_from_doc: reopens a stored bucket document to append to it. The
 * start is control.min.<timeField> and the _id is kept; columns, min and max
 * are rebuilt from data (control's other fields are not kept). Returns NULL
 * and fills err (BadValue, or InvalidBSON for corrupt bytes) if doc is not a
 * version 1 bucket of spec. Does not keep a reference to doc.
 */
mf_bucket_t *mf_bucket_from_doc(const mf_ts_spec_t *spec, const bson_t *doc, mf_error_t *err);

/*
 * mf_bucket_fits: would a measurement of time t_ms and m_bytes bytes go into
 * b: start <= t_ms < start + max_span, count < max_count, and bytes + m_bytes
 * <= max_bytes. An empty bucket takes a measurement of any size, so one larger
 * than max_bytes still gets a bucket of its own.
 */
bool mf_bucket_fits(const mf_bucket_t *b, int64_t t_ms, size_t m_bytes, size_t max_count, size_t max_bytes);

/*
 * mf_bucket_add: appends measurement as the next index: every field but the
 * metaField goes to its column, and control.min/max are updated. The caller
 * has checked mf_bucket_fits and that the meta value is the bucket's; a time
 * before the start lowers control.min.<timeField> to it (so filters stay
 * conservative). Returns 0, or -1 with BadValue and b unchanged when the time
 * field is missing or not a Date or a field name repeats. Does not keep a
 * reference to measurement; mf_bucket_bytes grows by measurement->len.
 */
int mf_bucket_add(mf_bucket_t *b, const bson_t *measurement, mf_error_t *err) MF_WUR;

/* mf_bucket_count: measurements in b. */
size_t mf_bucket_count(const mf_bucket_t *b);
/* mf_bucket_bytes: the sum of the sizes of b's measurements (BSON bytes, meta included). */
size_t mf_bucket_bytes(const mf_bucket_t *b);
/* mf_bucket_start_ms: b's start (control.min.<timeField> while no earlier time was added). */
int64_t mf_bucket_start_ms(const mf_bucket_t *b);
/* mf_bucket_id: b's _id, valid until mf_bucket_free(b). */
const bson_oid_t *mf_bucket_id(const mf_bucket_t *b);
/* mf_bucket_meta: b's meta value, NULL when it has none; valid until mf_bucket_free(b). */
const bson_value_t *mf_bucket_meta(const mf_bucket_t *b);

/*
 * mf_bucket_to_doc: the bucket document of b (shape above). Initialises out;
 * the caller bson_destroys it. b is unchanged and may keep growing.
 */
void mf_bucket_to_doc(const mf_bucket_t *b, bson_t *out);

/* mf_bucket_free: frees b; NULL is allowed. */
void mf_bucket_free(mf_bucket_t *b);

/* ---- Unpacking ------------------------------------------------------------ */

typedef struct mf_bucket_unpacker mf_bucket_unpacker_t;

/*
 * mf_bucket_unpacker_new: an iterator over the measurements of bucket_doc,
 * in index order. Checks the whole bucket first (control.version 1, data a
 * document of documents, decimal keys ascending in every column, the time
 * column holding "0".."n-1", no column past n, meta only with a metaField);
 * returns NULL and fills err (BadValue, or InvalidBSON for corrupt bytes) if
 * not. Copies what it needs of spec; bucket_doc is borrowed and must stay
 * valid and unchanged until mf_bucket_unpacker_free.
 */
mf_bucket_unpacker_t *mf_bucket_unpacker_new(const mf_ts_spec_t *spec, const bson_t *bucket_doc, mf_error_t *err);

/* mf_bucket_unpacker_count: the number of measurements in the bucket. */
size_t mf_bucket_unpacker_count(const mf_bucket_unpacker_t *u);

/*
 * mf_bucket_unpacker_next: the next measurement, as MongoDB returns it:
 * timeField first, then the metaField (from meta, when the bucket has one),
 * then the other columns in column order. Returns 1 and initialises out (the
 * caller bson_destroys it), or 0 at the end (out untouched). Each call costs
 * the number of columns plus the measurement's size: every column is read
 * once over the whole bucket.
 */
int mf_bucket_unpacker_next(mf_bucket_unpacker_t *u, bson_t *out);

/* mf_bucket_unpacker_free: frees u; NULL is allowed. */
void mf_bucket_unpacker_free(mf_bucket_unpacker_t *u);

/* ---- Predicate push-down -------------------------------------------------- */

/*
 * mf_bucket_filter_from_match: from a filter on measurements, a filter on
 * buckets that keeps every bucket that may hold a matching measurement (it
 * may keep too many, never too few; the exact filter runs on the unpacked
 * measurements). From the top-level conjunction (implicit and $and):
 *   - a condition on the metaField, or a dotted path under it, becomes the
 *     same condition on meta / meta.<rest>;
 *   - on the timeField, with a Date operand: $gt/$gte v becomes
 *     control.max.<time> $gt/$gte v; $lt/$lte v becomes control.min.<time>
 *     $lt/$lte v (control.min is at or below every time in the bucket, however
 *     out of order they came); equality or $eq v becomes control.min.<time>
 *     $lte v and control.max.<time> $gte v;
 *   - an $or whose every branch yields a condition becomes an $or of them;
 * everything else (other fields, non-Date time bounds, $ne, $in, $nor, $expr
 * ...) is dropped. Several conditions are joined with $and; none gives {}.
 * Initialises out (the caller bson_destroys it). match is not validated: a
 * bad operator is copied or dropped, and the exact filter reports it.
 */
void mf_bucket_filter_from_match(const mf_ts_spec_t *spec, const bson_t *match, bson_t *out);

/*
 * mf_bucket_filter_meta_only: true if every condition of filter is on the
 * metaField or under it (through $and, $or, $nor; $comment is allowed), so a
 * delete or update can act on whole buckets; then out is filter with the
 * metaField renamed to meta. An empty filter is meta-only (out {}). Always
 * initialises out ({} when false); the caller bson_destroys it.
 */
bool mf_bucket_filter_meta_only(const mf_ts_spec_t *spec, const bson_t *filter, bson_t *out);

#endif /* MF_BUCKET_H */
