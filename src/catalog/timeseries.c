/*
 * timeseries.c: time-series collections in the catalog (see timeseries.h).
 *
 * Option validation follows MongoDB 8.0's create command and its
 * TimeseriesOptions IDL (strict fields, safeInt spans >= 1) and
 * validateAndSetBucketingParameters: granularity fixes both spans (seconds:
 * 3600/60, minutes: 86400/3600, hours: 2592000/86400); the custom form needs
 * bucketMaxSpanSeconds and bucketRoundingSeconds together and equal.
 */
#include <stdio.h>
#include <string.h>

#include "catalog/timeseries.h"
#include "common/alloc.h"
#include "common/fmt.h"
#include "common/log.h"
#include "doc/value.h"

static const struct {
    const char *name;
    int64_t span, rounding;
} granularities[] = {
    {"seconds", 3600, 60},
    {"minutes", 86400, 3600},
    {"hours", 2592000, 86400},
};

static int
span_field(const bson_iter_t *it, const char *k, int64_t *out, mf_error_t *err)
{
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'timeseries.%s' is the wrong type '%s', expected types '[long, int, decimal, double]'",
                          k, mf_type_name(v->value_type));
    double d = mf_value_as_double(v);
    if (d < 1)
        return mf_err_set(err, MF_E_Location51024, "BSON field 'timeseries.%s' value must be >= 1, actual value '%lld'", k,
                          (long long)d);
    if (d > MF_TS_MAX_SPAN_LIMIT)
        return mf_err_set(err, MF_E_Location51024, "BSON field 'timeseries.%s' value must be <= %d, actual value '%lld'",
                          k, MF_TS_MAX_SPAN_LIMIT, (long long)d);
    *out = (int64_t)d;
    return 0;
}

static int
string_field(const bson_iter_t *it, const char *k, const char **out, mf_error_t *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'timeseries.%s' is the wrong type '%s', expected type 'string'",
                          k, mf_type_name(bson_iter_type(it)));
    *out = bson_iter_utf8(it, NULL);
    return 0;
}

int
mf_ts_options_normalize(const char *ns, const bson_value_t *ts, bson_t *out, mf_error_t *err)
{
    const char *time = NULL, *meta = NULL, *gran = NULL;
    int64_t span = 0, rounding = 0;
    int gi = -1;
    bson_iter_t it;

    bson_init(out);
    if (ts->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'create.timeseries' is the wrong type '%s', expected type 'object'",
                          mf_type_name(ts->value_type));
    bson_iter_init_from_data(&it, ts->value.v_doc.data, ts->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int rc;
        if (strcmp(k, "timeField") == 0)
            rc = string_field(&it, k, &time, err);
        else if (strcmp(k, "metaField") == 0)
            rc = string_field(&it, k, &meta, err);
        else if (strcmp(k, "granularity") == 0)
            rc = string_field(&it, k, &gran, err);
        else if (strcmp(k, "bucketMaxSpanSeconds") == 0)
            rc = span_field(&it, k, &span, err);
        else if (strcmp(k, "bucketRoundingSeconds") == 0)
            rc = span_field(&it, k, &rounding, err);
        else
            rc = mf_err_set(err, MF_E_Location40415, "BSON field 'timeseries.%s' is an unknown field.", k);
        if (rc != 0)
            return -1;
    }
    if (time == NULL)
        return mf_err_set(err, MF_E_Location40414, "BSON field 'timeseries.timeField' is missing but a required field");
    if (gran != NULL) {
        for (size_t i = 0; i < sizeof granularities / sizeof granularities[0]; i++)
            if (strcmp(gran, granularities[i].name) == 0)
                gi = (int)i;
        if (gi < 0)
            return mf_err_set(err, MF_E_BadValue, "Enumeration value '%s' for field 'timeseries.granularity' is not a valid value.",
                              gran);
    }
    if (strchr(time, '.') != NULL)
        return mf_err_set(err, MF_E_InvalidOptions, "%s: 'timeField' must be a top-level field and not contain a '.'", ns);
    if (strcmp(time, "_id") == 0)
        return mf_err_set(err, MF_E_InvalidOptions, "'timeField' cannot be \"_id\"");
    if (meta != NULL) {
        if (strcmp(meta, "_id") == 0)
            return mf_err_set(err, MF_E_InvalidOptions, "'metaField' cannot be \"_id\"");
        if (strcmp(meta, time) == 0)
            return mf_err_set(err, MF_E_InvalidOptions, "'metaField' cannot be the same as 'timeField'");
        if (strchr(meta, '.') != NULL)
            return mf_err_set(err, MF_E_InvalidOptions, "%s: 'metaField' must be a top-level field and not contain a '.'", ns);
    }
    if (gi >= 0) {
        if (span != 0 && span != granularities[gi].span)
            return mf_err_set(err, MF_E_InvalidOptions,
                              "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the default of %lld for the provided granularity",
                              (long long)granularities[gi].span);
        if (rounding != 0 && rounding != granularities[gi].rounding)
            return mf_err_set(err, MF_E_InvalidOptions,
                              "Timeseries 'bucketRoundingSeconds' is not configurable to a value other than the default of %lld for the provided granularity",
                              (long long)granularities[gi].rounding);
    } else if ((span != 0) != (rounding != 0)) {
        return mf_err_set(err, MF_E_InvalidOptions,
                          "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other");
    } else if (span != rounding) {
        return mf_err_set(err, MF_E_InvalidOptions, "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'");
    } else if (span == 0) {
        gi = 0; /* the default: seconds */
    }
    BSON_APPEND_UTF8(out, "timeField", time);
    if (meta != NULL)
        BSON_APPEND_UTF8(out, "metaField", meta);
    if (gi >= 0) {
        BSON_APPEND_UTF8(out, "granularity", granularities[gi].name);
        BSON_APPEND_INT32(out, "bucketMaxSpanSeconds", (int32_t)granularities[gi].span);
    } else {
        BSON_APPEND_INT32(out, "bucketRoundingSeconds", (int32_t)rounding);
        BSON_APPEND_INT32(out, "bucketMaxSpanSeconds", (int32_t)span);
    }
    return 0;
}

void
mf_ts_buckets_name(const char *name, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s%s", MF_TS_BUCKETS_PREFIX, name);
}

bool
mf_ts_options_of(const mf_coll_t *c, bson_t *ts)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;

    if (c == NULL || !c->is_timeseries || !bson_iter_init_find(&it, c->options, "timeseries") ||
        !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(ts, data, len);
}

bool
mf_ts_spec_of(const mf_coll_t *c, mf_ts_spec_t *spec)
{
    bson_t ts;
    bson_iter_t it;

    memset(spec, 0, sizeof *spec);
    if (!mf_ts_options_of(c, &ts) || !bson_iter_init_find(&it, &ts, "timeField") || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    spec->time_field = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, &ts, "metaField") && BSON_ITER_HOLDS_UTF8(&it))
        spec->meta_field = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, &ts, "granularity") && BSON_ITER_HOLDS_UTF8(&it))
        if (mf_ts_granularity_spans(bson_iter_utf8(&it, NULL), &spec->max_span_s, &spec->rounding_s) != 0)
            spec->max_span_s = 0;
    if (bson_iter_init_find(&it, &ts, "bucketMaxSpanSeconds") && mf_value_is_number(bson_iter_value(&it)))
        spec->max_span_s = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, &ts, "bucketRoundingSeconds") && mf_value_is_number(bson_iter_value(&it)))
        spec->rounding_s = bson_iter_as_int64(&it);
    if (spec->max_span_s <= 0)
        spec->max_span_s = 3600;
    if (spec->rounding_s <= 0)
        spec->rounding_s = 60;
    return true;
}

/* index_spec: {v: 2, key: <key>, name: <name>} into spec (initialised here). */
static void
index_spec(bson_t *spec, const bson_t *key, const char *name)
{
    bson_init(spec);
    BSON_APPEND_INT32(spec, "v", 2);
    BSON_APPEND_DOCUMENT(spec, "key", key);
    BSON_APPEND_UTF8(spec, "name", name);
}

/*
 * buckets_indexes: the time index {control.min.<time>: 1, _id: 1} (its key
 * differs from a user's TTL index {control.min.<time>: 1}, which may sit
 * beside it), and with a metaField MongoDB's default one.
 */
static int
buckets_indexes(mf_catalog_t *cat, mf_coll_t *b, const char *time, const char *meta, mf_error_t *err)
{
    char minf[300], maxf[300], name[700];
    bson_t key, spec;
    int rc;

    snprintf(minf, sizeof minf, "control.min.%s", time);
    snprintf(maxf, sizeof maxf, "control.max.%s", time);
    bson_init(&key);
    BSON_APPEND_INT32(&key, minf, 1);
    BSON_APPEND_INT32(&key, "_id", 1);
    snprintf(name, sizeof name, "%s_1__id_1", minf);
    index_spec(&spec, &key, name);
    rc = mf_catalog_index_add(cat, b, &spec, err);
    bson_destroy(&spec);
    bson_destroy(&key);
    if (rc != 0 || meta == NULL)
        return rc;
    bson_init(&key);
    BSON_APPEND_INT32(&key, "meta", 1);
    BSON_APPEND_INT32(&key, minf, 1);
    BSON_APPEND_INT32(&key, maxf, 1);
    snprintf(name, sizeof name, "%s_1_%s_1", meta, time);
    index_spec(&spec, &key, name);
    rc = mf_catalog_index_add(cat, b, &spec, err);
    bson_destroy(&spec);
    bson_destroy(&key);
    return rc;
}

int
mf_ts_create(mf_catalog_t *cat, const char *db, const char *name, const bson_t *ts, int64_t expire, mf_error_t *err)
{
    char bname[256];
    bson_t bopts, vopts, pipeline, stage, unpack;
    bson_iter_t it;
    const char *time = NULL, *meta = NULL;
    int32_t span = 0;
    mf_coll_t *b = NULL;
    int rc = -1;

    if (bson_iter_init_find(&it, ts, "timeField"))
        time = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, ts, "metaField"))
        meta = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, ts, "bucketMaxSpanSeconds"))
        span = bson_iter_int32(&it);
    mf_ts_buckets_name(name, bname, sizeof bname);
    if (mf_catalog_coll_find(cat, db, name) != NULL || mf_catalog_coll_find(cat, db, bname) != NULL)
        return mf_err_set(err, MF_E_NamespaceExists, "Collection %s.%s already exists.", db, name);

    bson_init(&bopts);
    BSON_APPEND_DOCUMENT(&bopts, "timeseries", ts);
    if (expire >= 0)
        BSON_APPEND_INT64(&bopts, "expireAfterSeconds", expire);
    bson_init(&vopts);
    BSON_APPEND_UTF8(&vopts, "viewOn", bname);
    BSON_APPEND_ARRAY_BEGIN(&vopts, "pipeline", &pipeline);
    BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$_internalUnpackBucket", &unpack);
    BSON_APPEND_UTF8(&unpack, "timeField", time);
    if (meta != NULL)
        BSON_APPEND_UTF8(&unpack, "metaField", meta);
    BSON_APPEND_INT32(&unpack, "bucketMaxSpanSeconds", span);
    bson_append_document_end(&stage, &unpack);
    bson_append_document_end(&pipeline, &stage);
    bson_append_array_end(&vopts, &pipeline);
    BSON_APPEND_DOCUMENT(&vopts, "timeseries", ts);

    if (mf_catalog_coll_create(cat, db, bname, &bopts, &b, err) != 0)
        goto out;
    if (buckets_indexes(cat, b, time, meta, err) != 0 || mf_catalog_coll_create(cat, db, name, &vopts, NULL, err) != 0) {
        mf_error_t e2;
        mf_err_clear(&e2);
        if (mf_catalog_coll_drop(cat, b, &e2) != 0)
            mf_log(MF_LOG_WARN, "STORAGE", "could not drop %s.%s after a failed create: %s", db, bname, e2.msg);
        goto out;
    }
    rc = 0;
out:
    bson_destroy(&bopts);
    bson_destroy(&vopts);
    return rc;
}

mf_coll_t *
mf_ts_buckets_of(mf_catalog_t *cat, const mf_coll_t *v)
{
    char bname[256];
    if (v == NULL || !v->is_view || !v->is_timeseries)
        return NULL;
    mf_ts_buckets_name(v->name, bname, sizeof bname);
    mf_coll_t *b = mf_catalog_coll_find(cat, v->db, bname);
    return b != NULL && !b->is_view ? b : NULL;
}

static bool
is_timeseries_entry(const mf_coll_t *c)
{
    return c->is_timeseries;
}

/* is_orphan: c, a time-series view or buckets collection, lacks its other half. Catalog lock held. */
static bool
is_orphan(mf_catalog_t *cat, const mf_coll_t *c)
{
    char other[256];
    size_t pl = strlen(MF_TS_BUCKETS_PREFIX);
    if (c->is_view) {
        mf_ts_buckets_name(c->name, other, sizeof other);
        mf_coll_t *b = mf_catalog_coll_find(cat, c->db, other);
        return b == NULL || b->is_view;
    }
    if (strncmp(c->name, MF_TS_BUCKETS_PREFIX, pl) != 0)
        return false;
    mf_coll_t *v = mf_catalog_coll_find(cat, c->db, c->name + pl);
    return v == NULL || !v->is_view || !v->is_timeseries;
}

void
mf_ts_drop_orphans(mf_catalog_t *cat)
{
    mf_catalog_drop_where(cat, is_timeseries_entry, is_orphan, "half of a time-series collection a crash left");
}

/* ---------- index translation ---------- */

static bool
is_meta_path(const mf_ts_spec_t *spec, const char *f)
{
    size_t ml = spec->meta_field ? strlen(spec->meta_field) : 0;
    return ml > 0 && strncmp(f, spec->meta_field, ml) == 0 && (f[ml] == '\0' || f[ml] == '.');
}

void
mf_ts_key_to_buckets(const mf_ts_spec_t *spec, const bson_t *key, bool ttl, bson_t *out)
{
    bson_iter_t it;
    char a[600], b[600];

    bson_init(out);
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        const bson_value_t *dir = bson_iter_value(&it);
        bool desc = mf_value_is_number(dir) && mf_value_as_double(dir) < 0;
        if (is_meta_path(spec, f)) {
            snprintf(a, sizeof a, "meta%s", f + strlen(spec->meta_field));
            bson_append_value(out, a, -1, dir);
            continue;
        }
        snprintf(a, sizeof a, "control.%s.%s", desc ? "max" : "min", f);
        snprintf(b, sizeof b, "control.%s.%s", desc ? "min" : "max", f);
        bson_append_value(out, a, -1, dir);
        if (!ttl)
            bson_append_value(out, b, -1, dir);
    }
}

/* auto_name: MongoDB's generated index name for key ("a_1_b_-1"). */
static void
auto_name(const bson_t *key, char *out, size_t outlen)
{
    bson_iter_t it;
    size_t n = 0;
    out[0] = '\0';
    bson_iter_init(&it, key);
    while (bson_iter_next(&it) && n < outlen) {
        const bson_value_t *v = bson_iter_value(&it);
        char dir[64];
        if (v->value_type == BSON_TYPE_UTF8)
            snprintf(dir, sizeof dir, "%s", v->value.v_utf8.str);
        else
            snprintf(dir, sizeof dir, "%lld", (long long)mf_value_as_double(v));
        n += (size_t)snprintf(out + n, outlen - n, "%s%s_%s", n ? "_" : "", bson_iter_key(&it), dir);
    }
}

/*
 * The index kinds mongod's time-series conversion refuses (user: the whole
 * spec, key its key): a text index (72), a sparse index on a measurement,
 * that is any field but the timeField and the metaField's paths (72), and on a measurement or the time field anything but a number or
 * "2dsphere", or a wildcard (67: hashed, $**, 2d). 0, or -1 with err.
 */
static int
ts_key_check(const mf_ts_spec_t *spec, const bson_t *user, const bson_t *key, mf_error_t *err)
{
    bson_iter_t it;
    bool measurement = false, sparse = bson_iter_init_find(&it, user, "sparse") && bson_iter_as_bool(&it);

    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "text") == 0)
            return mf_err_set(err, MF_E_InvalidOptions, "Text indexes are not supported on time-series collections");
        /* mongod allows sparse on the timeField itself (not a path under it) and the metaField's paths. */
        if (!is_meta_path(spec, bson_iter_key(&it)) && strcmp(bson_iter_key(&it), spec->time_field) != 0)
            measurement = true;
    }
    if (sparse && measurement)
        return mf_err_set(err, MF_E_InvalidOptions, "Sparse indexes are not supported on time-series measurements");
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        const char *f = bson_iter_key(&it);
        size_t fl = strlen(f);
        bool wildcard = fl >= 3 && strcmp(f + fl - 3, "$**") == 0;
        if (is_meta_path(spec, f) ||
            (!wildcard && (mf_value_is_number(v) ||
                           (v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "2dsphere") == 0))))
            continue;
        char shown[512];
        mf_fmt_doc(key, shown, sizeof(shown));
        return mf_err_set(err, MF_E_CannotCreateIndex, "Invalid index spec for time-series collection: { key: %s }. "
                          "Indexes on measurement fields must be ascending or descending (numbers only), or "
                          "'2dsphere'", shown);
    }
    return 0;
}

int
mf_ts_index_to_buckets(const mf_ts_spec_t *spec, const bson_t *user, bson_t *out, mf_error_t *err)
{
    bson_iter_t it;
    bson_t key, pf, bpf;
    bool have_key = false, ttl = false, have_pf = false, have_name = false;
    char name[512];

    bson_init(out);
    bson_iter_init(&it, user);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const uint8_t *data;
        uint32_t len;
        if (strcmp(k, "key") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            bson_init_static(&key, data, len);
            have_key = true;
        } else if (strcmp(k, "partialFilterExpression") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            /*
             * As mongod's translateIndexSpecFromLogicalToBuckets: the filter is
             * rewritten for the buckets without knowing how an index collation
             * would compare its values, so the two are refused together.
             */
            if (bson_has_field(user, "collation"))
                return mf_err_set(err, MF_E_IndexOptionsConflict,
                                  "On a time-series collection, partialFilterExpression and collation arguments are incompatible");
            bson_iter_document(&it, &len, &data);
            bson_init_static(&pf, data, len);
            have_pf = true;
        } else if (strcmp(k, "expireAfterSeconds") == 0) {
            ttl = true;
        } else if (strcmp(k, "unique") == 0 && bson_iter_as_bool(&it)) {
            return mf_err_set(err, MF_E_InvalidOptions, "Unique indexes are not supported on time-series collections");
        } else if (strcmp(k, "name") == 0) {
            have_name = true;
        }
    }
    if (!have_key)
        return 0; /* the spec checks report it */
    if (ts_key_check(spec, user, &key, err) != 0)
        return -1;
    bson_init(&bpf);
    if (have_pf && !mf_bucket_filter_meta_only(spec, &pf, &bpf)) {
        bson_destroy(&bpf);
        return mf_err_set(err, MF_E_InvalidOptions,
                          ttl ? "TTL indexes on time-series collections require a partialFilterExpression on the metaField"
                              : "Partial indexes on time-series collections may only refer to the metaField");
    }
    if (ttl) {
        bson_iter_t ki;
        if (!have_pf) {
            bson_destroy(&bpf);
            return mf_err_set(err, MF_E_InvalidOptions,
                              "TTL indexes on time-series collections require a partialFilterExpression on the metaField");
        }
        if (bson_count_keys(&key) != 1) {
            char shown[300];
            mf_fmt_doc(&key, shown, sizeof(shown)); /* the key alone, as mongod's convertToTTLTimeField */
            bson_destroy(&bpf);
            return mf_err_set(err, MF_E_CannotCreateIndex,
                              "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s",
                              shown);
        }
        bson_iter_init(&ki, &key);
        bson_iter_next(&ki);
        if (strcmp(bson_iter_key(&ki), spec->time_field) != 0) {
            bson_destroy(&bpf);
            return mf_err_set(err, MF_E_InvalidOptions, "TTL indexes on non-time fields are not supported on time-series collections");
        }
    }
    bson_iter_init(&it, user);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "key") == 0) {
            bson_t bk;
            mf_ts_key_to_buckets(spec, &key, ttl, &bk);
            BSON_APPEND_DOCUMENT(out, "key", &bk);
            bson_destroy(&bk);
        } else if (strcmp(k, "partialFilterExpression") == 0) {
            BSON_APPEND_DOCUMENT(out, k, &bpf);
        } else {
            bson_append_value(out, k, -1, bson_iter_value(&it));
        }
    }
    if (!have_name) {
        auto_name(&key, name, sizeof name);
        BSON_APPEND_UTF8(out, "name", name);
    }
    bson_destroy(&bpf);
    return 0;
}

/* rename_meta: a bucket-level filter with "meta" paths back under the metaField. */
static void
rename_meta(const mf_ts_spec_t *spec, const bson_t *in, bson_t *out)
{
    bson_iter_t it;
    char f[600];
    bson_init(out);
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (spec->meta_field && strncmp(k, "meta", 4) == 0 && (k[4] == '\0' || k[4] == '.')) {
            snprintf(f, sizeof f, "%s%s", spec->meta_field, k + 4);
            bson_append_value(out, f, -1, bson_iter_value(&it));
        } else if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                   BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t ai;
            bson_t arr;
            bson_append_array_begin(out, k, -1, &arr);
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai)) {
                if (BSON_ITER_HOLDS_DOCUMENT(&ai)) {
                    const uint8_t *data;
                    uint32_t len;
                    bson_t sub, conv;
                    bson_iter_document(&ai, &len, &data);
                    bson_init_static(&sub, data, len);
                    rename_meta(spec, &sub, &conv);
                    bson_append_document(&arr, bson_iter_key(&ai), -1, &conv);
                    bson_destroy(&conv);
                } else {
                    bson_append_value(&arr, bson_iter_key(&ai), -1, bson_iter_value(&ai));
                }
            }
            bson_append_array_end(out, &arr);
        } else {
            bson_append_value(out, k, -1, bson_iter_value(&it));
        }
    }
}

bool
mf_ts_index_from_buckets(const mf_ts_spec_t *spec, const bson_t *bspec, bson_t *out)
{
    bson_iter_t it, ki;
    char minf[300], maxf[300], f[600];

    snprintf(minf, sizeof minf, "control.min.");
    snprintf(maxf, sizeof maxf, "control.max.");
    if (!bson_iter_init_find(&it, bspec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &ki))
        return false;
    /* Hidden: _id and the time index {control.min.<time>: 1, _id: 1}. */
    bson_t key;
    bson_init(&key);
    bool hidden = false;
    while (bson_iter_next(&ki)) {
        const char *k = bson_iter_key(&ki);
        if (strcmp(k, "_id") == 0) {
            hidden = true;
            break;
        }
        if (strncmp(k, "meta", 4) == 0 && (k[4] == '\0' || k[4] == '.') && spec->meta_field) {
            snprintf(f, sizeof f, "%s%s", spec->meta_field, k + 4);
            bson_append_value(&key, f, -1, bson_iter_value(&ki));
        } else if (strncmp(k, minf, strlen(minf)) == 0 || strncmp(k, maxf, strlen(maxf)) == 0) {
            /* control.min.f then control.max.f (or max then min, descending) are one user field. */
            const char *uf = k + strlen(minf);
            if (!bson_has_field(&key, uf))
                bson_append_value(&key, uf, -1, bson_iter_value(&ki));
        } else {
            bson_append_value(&key, k, -1, bson_iter_value(&ki));
        }
    }
    if (hidden) {
        bson_destroy(&key);
        return false;
    }
    bson_init(out);
    bson_iter_init(&it, bspec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "key") == 0) {
            BSON_APPEND_DOCUMENT(out, "key", &key);
        } else if (strcmp(k, "partialFilterExpression") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t pf, upf;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&pf, data, len);
            rename_meta(spec, &pf, &upf);
            BSON_APPEND_DOCUMENT(out, k, &upf);
            bson_destroy(&upf);
        } else {
            bson_append_value(out, k, -1, bson_iter_value(&it));
        }
    }
    bson_destroy(&key);
    return true;
}
