/*
 * index_ttl.c: validation of expireAfterSeconds (SPEC A2-A4, B3).
 *
 * MongoDB 8.0's rules for a secondary TTL index, in its order:
 *   1. the value must be a number (int, long, double, decimal) → 67;
 *   2. not NaN → 67;
 *   3. its truncation must fit a 32-bit int (safeNumberInt == safeNumberLong,
 *      so 2^31, ±Infinity and 2^63 fail) → 67 "must be within the range of
 *      a 32-bit integer";
 *   4. not negative → 67 "cannot be less than 0";
 *   5. a single-field key → 67 "TTL indexes are single-field indexes...";
 *   6. never on the _id index → 197 InvalidIndexSpecificationOption.
 * A non-integer is truncated (10000.7 → 10000) and stored as an int32.
 * collMod reads its index.expireAfterSeconds as its IDL's safeInt
 * (safeNumberInt: truncated, saturated to the int32 range, NaN as 0), so only
 * a negative value is a fault there, 72 InvalidOptions (SPEC B3); a
 * non-numeric value its IDL rejects with 14 TypeMismatch.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/fmt.h"
#include "index/index.h"
#include "doc/value.h"
#include "index/index_spec.h"

/* Truncates v toward zero into an int64, saturating like MongoDB's safeNumberLong. */
static int64_t
safe_long(const bson_value_t *v)
{
    int64_t i;
    if (mf_value_as_int64(v, &i))
        return i;
    double d = mf_value_as_double(v);
    if (d != d)
        return 0;
    if (d >= 9223372036854775807.0)
        return INT64_MAX;
    if (d <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)trunc(d);
}

int
mf_ttl_check_seconds(const bson_value_t *v, int32_t *out, mf_error_t *err)
{
    if (!mf_value_is_number(v))
        return mf_err_set(err, MF_E_CannotCreateIndex,
                          "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s",
                          mf_type_name(v->value_type));
    double d = mf_value_as_double(v);
    if (d != d)
        return mf_err_set(err, MF_E_CannotCreateIndex, "TTL index 'expireAfterSeconds' option must not be NaN");
    int64_t l = safe_long(v);
    if (l > INT32_MAX || l < INT32_MIN)
        return mf_err_set(err, MF_E_CannotCreateIndex,
                          "TTL index 'expireAfterSeconds' must be within the range of a 32-bit integer");
    if (l < 0)
        return mf_err_set(err, MF_E_CannotCreateIndex, "TTL index 'expireAfterSeconds' option cannot be less than 0");
    *out = (int32_t)l;
    return 0;
}

int
mf_ttl_collmod_seconds(const bson_value_t *v, int32_t *out, mf_error_t *err)
{
    int64_t l = safe_long(v); /* NaN is 0 */
    if (l > INT32_MAX)
        l = INT32_MAX;
    if (l < 0)
        return mf_err_set(err, MF_E_InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0");
    *out = (int32_t)l;
    return 0;
}

int
mf_ttl_normalise_spec(const bson_t *spec, const bson_t *as_sent, bson_t *out, mf_error_t *err)
{
    bson_iter_t it;
    bson_t key;
    int32_t secs = 0;
    char shown[700];

    if (!bson_iter_init_find(&it, spec, "expireAfterSeconds")) {
        bson_copy_to(spec, out);
        return 0;
    }
    mf_fmt_doc(as_sent != NULL ? as_sent : spec, shown, sizeof(shown));
    bool have_key = mf_index_spec_key(spec, &key);
    /* The _id index's pattern only ({_id: 1} or -1): {_id: "hashed"} may carry a TTL, as mongod's isIdIndexPattern. */
    if (have_key && mf_index_spec_is_id_pattern(spec))
        return mf_err_set(err, MF_E_InvalidIndexSpecificationOption,
                          "The field 'expireAfterSeconds' is not valid for an _id index specification. Specification: %s",
                          shown);
    if (mf_ttl_check_seconds(bson_iter_value(&it), &secs, err) != 0) {
        /* mongod's validateIndexSpecTTL: the reason under the spec as sent, ". Index spec: {...} :: caused by :: ..." */
        char context[sizeof(shown) + 16];
        snprintf(context, sizeof(context), ". Index spec: %s", shown);
        return mf_err_context(err, context);
    }
    if (!have_key || bson_count_keys(&key) != 1)
        return mf_err_set(err, MF_E_CannotCreateIndex,
                          "TTL indexes are single-field indexes, compound indexes do not support TTL. Index spec: %s",
                          shown);
    /* Store N truncated to an int32, in its place among the spec's fields. */
    bson_init(out);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "expireAfterSeconds") == 0)
            BSON_APPEND_INT32(out, "expireAfterSeconds", secs);
        else
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    return 0;
}

bool
mf_ttl_index_seconds(const bson_t *spec, int64_t *secs)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, spec, "expireAfterSeconds"))
        return false;
    const bson_value_t *v = bson_iter_value(&it);
    if (!mf_value_is_number(v))
        return false;
    double d = mf_value_as_double(v);
    if (d != d || d < 0)
        return false;
    *secs = safe_long(v);
    return true;
}
