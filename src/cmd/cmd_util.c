/*
 * cmd_util.c: argument parsing helpers shared by the command handlers, the
 * storage checks every written document passes, and engine open/close.
 *
 * Type errors follow MongoDB's IDL wording: "BSON field 'find.filter' is the
 * wrong type 'string', expected type 'object'" with 14 TypeMismatch;
 * mf_op_check_types checks a whole field table (types, 51024 for negative
 * counts, 40415 for unknown fields) the way IDL's generated parsers do.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/curop.h"
#include "doc/collation.h"
#include "cmd/cmd.h"
#include "engine/cursor.h"
#include "common/log.h"
#include "doc/value.h"
#include "cmd/profile.h"
#include "ttl/ttl.h"

int
mf_write_concern_shape(mf_error_t *err, const bson_t *wc, mf_wc_shape_t *out)
{
    bson_iter_t it;
    memset(out, 0, sizeof(*out));
    out->w.value_type = BSON_TYPE_EOD;
    bson_iter_init(&it, wc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(k, "w") == 0) {
            if (mf_value_is_number(v)) {
                /* safeNumberLong: a double truncated, a decimal rounded half to even (Decimal128::toLong), NaN 0. */
                double w = v->value_type == BSON_TYPE_DECIMAL128 ? rint(mf_value_as_double(v)) : mf_value_as_double(v);
                if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64)
                    out->wnum = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
                else
                    out->wnum = w != w ? 0 : w >= 9.2e18 ? INT64_MAX : w <= -9.2e18 ? INT64_MIN : (int64_t)w;
                if (out->wnum < 0 || out->wnum > 50)
                    return mf_err_set(err, MF_E_FailedToParse,
                                      "w has to be a non-negative number and not greater than 50; found: %lld",
                                      (long long)out->wnum);
            } else if (v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_UNDEFINED) {
                continue; /* deserializeWriteConcernW: null and undefined are no w (the default) */
            } else if (v->value_type == BSON_TYPE_DOCUMENT) {
                /* Tags: a non-empty single-level document of numbers (deserializeWriteConcernW). */
                bson_iter_t tag;
                if (!bson_iter_recurse(&it, &tag) || !bson_iter_next(&tag))
                    return mf_err_set(err, MF_E_FailedToParse, "tagged write concern requires tags");
                do {
                    if (!mf_value_is_number(bson_iter_value(&tag))) {
                        char val[256];
                        mf_fmt_value(bson_iter_value(&tag), val, sizeof(val));
                        return mf_err_set(err, MF_E_FailedToParse,
                                          "tags must be a single level document with only number values; found: %s: %s",
                                          bson_iter_key(&tag), val);
                    }
                } while (bson_iter_next(&tag));
            } else if (v->value_type != BSON_TYPE_UTF8) {
                return mf_err_set(err, MF_E_FailedToParse, "w has to be a number, string, or object; found: %s",
                                  mf_type_name(v->value_type));
            }
            out->w = *v;
        } else if (strcmp(k, "j") == 0 || strcmp(k, "fsync") == 0) {
            if (v->value_type != BSON_TYPE_BOOL && !mf_value_is_number(v) && v->value_type != BSON_TYPE_NULL)
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field 'writeConcern.%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double']",
                                  k, mf_type_name(v->value_type));
            *(k[0] == 'j' ? &out->journal : &out->fsync) = mf_value_truthy(v);
        } else if (strcmp(k, "wtimeout") == 0 || strcmp(k, "wtimeoutMS") == 0) {
            if (!mf_value_is_number(v) && v->value_type != BSON_TYPE_NULL)
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "BSON field 'writeConcern.%s' is the wrong type '%s', expected types '[int, long, decimal, double]'",
                                  k, mf_type_name(v->value_type));
        } else if (strcmp(k, "provenance") == 0) {
            out->provenance = true;
        } else if (strcmp(k, "getLastError") != 0 && strcmp(k, "wOpTime") != 0 && strcmp(k, "wElectionId") != 0) {
            return mf_err_set(err, MF_E_FailedToParse, "unrecognized write concern field: %s", k);
        }
    }
    if (out->journal && out->fsync)
        return mf_err_set(err, MF_E_FailedToParse, "fsync and j options cannot be used together");
    return 0;
}

int
mf_read_concern_shape(mf_error_t *err, const bson_iter_t *field)
{
    bson_iter_t rc;
    const char *level = "local";
    bool after_ct = false, at_ct = false, after_op = false, null_after = false, null_at = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(field))
        return mf_err_set(err, MF_E_FailedToParse, "readConcern field should be an object");
    bson_iter_recurse(field, &rc);
    while (bson_iter_next(&rc)) {
        const char *k = bson_iter_key(&rc);
        bson_type_t t = bson_iter_type(&rc);
        if (strcmp(k, "afterClusterTime") == 0 || strcmp(k, "atClusterTime") == 0) {
            uint32_t ts = 1, inc = 1;
            if (t == BSON_TYPE_TIMESTAMP)
                bson_iter_timestamp(&rc, &ts, &inc);
            bool null_ts = ts == 0 && inc == 0;
            if (k[1] == 'f') {
                after_ct = true;
                null_after = null_ts;
            } else {
                at_ct = true;
                null_at = null_ts;
            }
        } else if (strcmp(k, "afterOpTime") == 0) {
            after_op = true;
        } else if (strcmp(k, "level") == 0 && t == BSON_TYPE_UTF8) {
            level = bson_iter_utf8(&rc, NULL);
        }
        if (strcmp(k, "level") == 0) {
            static const char *const levels[] = {"local", "majority", "linearizable", "available", "snapshot", NULL};
            int i = 0;
            if (t != BSON_TYPE_UTF8)
                return mf_err_set(err, MF_E_TypeMismatch, "\"level\" had the wrong type. Expected string, found %s",
                                  mf_type_name(t));
            while (levels[i] != NULL && strcmp(levels[i], bson_iter_utf8(&rc, NULL)) != 0)
                i++;
            if (levels[i] == NULL)
                return mf_err_set(err, MF_E_FailedToParse,
                                  "readConcern.level must be either 'local', 'majority', 'linearizable', 'available', or 'snapshot'");
        } else if (strcmp(k, "afterClusterTime") == 0 || strcmp(k, "atClusterTime") == 0) {
            if (t != BSON_TYPE_TIMESTAMP)
                return mf_err_set(err, MF_E_TypeMismatch, "\"%s\" had the wrong type. Expected timestamp, found %s",
                                  k, mf_type_name(t));
        } else if (strcmp(k, "afterOpTime") != 0 && strcmp(k, "provenance") != 0 &&
                   strcmp(k, "$_allowTransactionTableSnapshot") != 0) {
            return mf_err_set(err, MF_E_InvalidOptions, "Unrecognized option in readConcern: %s", k);
        }
    }
    /* The combinations mongod's ReadConcernArgs::parse refuses, in its order. */
    bool snapshot = strcmp(level, "snapshot") == 0;
    if (after_ct && after_op)
        return mf_err_set(err, MF_E_InvalidOptions, "Can not specify both afterClusterTime and afterOpTime");
    if (after_ct && at_ct)
        return mf_err_set(err, MF_E_InvalidOptions, "Can not specify both afterClusterTime and atClusterTime");
    if (after_ct && strcmp(level, "majority") != 0 && strcmp(level, "local") != 0 && !snapshot)
        return mf_err_set(err, MF_E_InvalidOptions,
                          "afterClusterTime field can be set only if level is equal to majority, local, or snapshot");
    if (after_op && snapshot)
        return mf_err_set(err, MF_E_InvalidOptions, "afterOpTime field cannot be set if level is equal to snapshot");
    if (at_ct && !snapshot)
        return mf_err_set(err, MF_E_InvalidOptions, "atClusterTime field can be set only if level is equal to snapshot");
    if (null_after)
        return mf_err_set(err, MF_E_InvalidOptions, "afterClusterTime cannot be a null timestamp");
    if (null_at)
        return mf_err_set(err, MF_E_InvalidOptions, "atClusterTime cannot be a null timestamp");
    return 0;
}

static int
wrong_type(mf_op_t *op, const char *field, bson_type_t got, const char *expected)
{
    return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type '%s'",
                      op->name, field, mf_type_name(got), expected);
}

static const char *
expected_name(mf_field_type_t t)
{
    switch (t) {
    case MF_FT_OBJ:
        return "expected type 'object'";
    case MF_FT_ARR:
        return "expected type 'array'";
    case MF_FT_STR:
        return "expected type 'string'";
    case MF_FT_BOOL:
        return "expected types '[bool, long, int, decimal, double']";
    default:
        return "expected types '[long, int, decimal, double']";
    }
}

static bool
type_ok(mf_field_type_t t, const bson_value_t *v)
{
    switch (t) {
    case MF_FT_ANY:
        return true;
    case MF_FT_OBJ:
        return v->value_type == BSON_TYPE_DOCUMENT;
    case MF_FT_ARR:
        return v->value_type == BSON_TYPE_ARRAY;
    case MF_FT_STR:
        return v->value_type == BSON_TYPE_UTF8;
    case MF_FT_BOOL:
        return v->value_type == BSON_TYPE_BOOL || mf_value_is_number(v);
    case MF_FT_NUM:
    case MF_FT_NONNEG:
        return mf_value_is_number(v);
    }
    return false;
}

int
mf_op_check_types(mf_op_t *op, const char *ctx, const bson_t *doc, const mf_field_spec_t *spec, bool strict,
                  bool top_level)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return 0;
    if (top_level && !bson_iter_next(&it))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const mf_field_spec_t *f = spec;
        while (f->name != NULL && (f->name[0] != k[0] || strcmp(f->name, k) != 0))
            f++;
        if (f->name == NULL) {
            if (strict && !(top_level && mf_cmd_is_generic_arg(k)))
                return mf_err_set(&op->err, MF_E_Location40415, "BSON field '%s.%s' is an unknown field.", ctx, k);
            continue;
        }
        const bson_value_t *v = bson_iter_value(&it);
        if (v->value_type == BSON_TYPE_NULL || v->value_type == BSON_TYPE_UNDEFINED)
            continue;
        if (!type_ok(f->type, v))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', %s", ctx, k,
                              mf_type_name(v->value_type), expected_name(f->type));
        if (f->type == MF_FT_NONNEG && mf_value_as_double(v) < 0) {
            int64_t n;
            if (!mf_value_as_int64(v, &n))
                n = (int64_t)mf_value_as_double(v);
            return mf_err_set(&op->err, MF_E_Location51024, "BSON field '%s' value must be >= 0, actual value '%lld'", k,
                              (long long)n);
        }
    }
    return 0;
}

/* Builds op's index of the command's top-level fields (op->nfields -1: too many); data is op->cmd's. */
static void
op_fields_build(mf_op_t *op, const uint8_t *data)
{
    const bson_t *cmd = op->cmd;
    bson_iter_t w;
    int n = 0;
    if (bson_iter_init(&w, cmd)) {
        while (bson_iter_next(&w)) {
            if (n == MF_OP_FIELDS) {
                n = -1;
                break;
            }
            op->fields[n].key = bson_iter_key(&w);
            op->fields[n].keylen = bson_iter_key_len(&w);
            op->fields[n].off = bson_iter_offset(&w);
            n++;
        }
    }
    op->fields_of = cmd;
    op->fields_data = data;
    op->fields_len = cmd->len;
    op->nfields = n;
}

/* op's field index, built again only when op->cmd changed since (data: op->cmd's). */
static inline void
op_fields(mf_op_t *op, const uint8_t *data)
{
    if (op->fields_of != op->cmd || op->fields_data != data || op->fields_len != op->cmd->len)
        op_fields_build(op, data);
}

bool
mf_op_find(mf_op_t *op, const char *field, bson_iter_t *it)
{
    const bson_t *cmd = op->cmd;
    const uint8_t *data = bson_get_data(cmd);

    op_fields(op, data);
    if (op->nfields < 0)
        return bson_iter_init_find(it, cmd, field);
    for (int i = 0; i < op->nfields; i++) {
        const mf_op_field_t *f = &op->fields[i];
        if (f->key[0] == field[0] && strcmp(f->key, field) == 0)
            return bson_iter_init_from_data_at_offset(it, data, cmd->len, f->off, f->keylen);
    }
    return false;
}

bool
mf_op_has(mf_op_t *op, const char *field)
{
    bson_iter_t it;
    return mf_op_find(op, field, &it);
}

int
mf_op_docs(mf_op_t *op, const char *field, bool optional, bson_t **docs, size_t *n)
{
    bson_iter_t it, ai;

    *docs = NULL;
    *n = 0;
    if (mf_op_find(op, field, &it)) {
        if (!BSON_ITER_HOLDS_ARRAY(&it))
            return wrong_type(op, field, bson_iter_type(&it), "array");
        size_t cap = 0, len = 0;
        bson_iter_recurse(&it, &ai);
        while (bson_iter_next(&ai))
            cap++;
        /* bson_t demands 128-byte alignment (libbson declares it so). */
        bson_t *v = aligned_alloc(128, (cap ? cap : 1) * sizeof(bson_t));
        bson_iter_recurse(&it, &ai);
        while (bson_iter_next(&ai)) {
            const uint8_t *data;
            uint32_t dlen;
            if (!BSON_ITER_HOLDS_DOCUMENT(&ai)) {
                free(v);
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field '%s.%s.%s' is the wrong type '%s', expected type 'object'", op->name,
                                  field, bson_iter_key(&ai), mf_type_name(bson_iter_type(&ai)));
            }
            bson_iter_document(&ai, &dlen, &data);
            if (!bson_init_static(&v[len], data, dlen)) {
                free(v);
                return mf_err_set(&op->err, MF_E_InvalidBSON, "invalid document in '%s'", field);
            }
            len++;
        }
        *docs = v;
        *n = len;
        return 0;
    }
    for (size_t i = 0; i < op->nseqs; i++) {
        if (strcmp(op->seqs[i].identifier, field) == 0) {
            size_t cnt = op->seqs[i].ndocs;
            bson_t *v = aligned_alloc(128, (cnt ? cnt : 1) * sizeof(*v));
            for (size_t k = 0; k < cnt; k++)
                bson_init_static(&v[k], bson_get_data(&op->seqs[i].docs[k]), op->seqs[i].docs[k].len);
            *docs = v;
            *n = cnt;
            return 0;
        }
    }
    if (optional)
        return 0;
    return mf_err_set(&op->err, MF_E_Location40414, "BSON field '%s.%s' is missing but a required field", op->name,
                      field);
}

int
mf_op_get_doc(mf_op_t *op, const char *field, bson_t *out, bool *present)
{
    bson_iter_t it;
    *present = false;
    if (!mf_op_find(op, field, &it))
        return 0;
    if (BSON_ITER_HOLDS_NULL(&it))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return wrong_type(op, field, bson_iter_type(&it), "object");
    const uint8_t *data;
    uint32_t len;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(out, data, len))
        return mf_err_set(&op->err, MF_E_InvalidBSON, "invalid document in '%s'", field);
    *present = true;
    return 0;
}

int
mf_op_get_int64(mf_op_t *op, const char *field, int64_t *out, bool *present)
{
    bson_iter_t it;
    *present = false;
    if (!mf_op_find(op, field, &it))
        return 0;
    if (BSON_ITER_HOLDS_NULL(&it))
        return 0;
    const bson_value_t *v = bson_iter_value(&it);
    if (!mf_value_is_number(v))
        return wrong_type(op, field, v->value_type, "long");
    double d = mf_value_as_double(v);
    if (d != d)
        return mf_err_set(&op->err, MF_E_BadValue, "BSON field '%s.%s' must not be NaN", op->name, field);
    if (!mf_value_as_int64(v, out))
        *out = d > 9.2e18 ? INT64_MAX : d < -9.2e18 ? INT64_MIN : (int64_t)d;
    *present = true;
    return 0;
}

int
mf_op_get_bool(mf_op_t *op, const char *field, bool *out, bool *present)
{
    bson_iter_t it;
    *present = false;
    if (!mf_op_find(op, field, &it))
        return 0;
    const bson_value_t *v = bson_iter_value(&it);
    if (v->value_type == BSON_TYPE_BOOL)
        *out = v->value.v_bool;
    else if (mf_value_is_number(v))
        *out = mf_value_as_double(v) != 0;
    else if (v->value_type == BSON_TYPE_NULL)
        return 0;
    else
        return wrong_type(op, field, v->value_type, "bool");
    *present = true;
    return 0;
}

int
mf_op_get_string(mf_op_t *op, const char *field, const char **out, bool *present)
{
    bson_iter_t it;
    *present = false;
    if (!mf_op_find(op, field, &it))
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return wrong_type(op, field, bson_iter_type(&it), "string");
    *out = bson_iter_utf8(&it, NULL);
    *present = true;
    return 0;
}

int
mf_op_coll_name(mf_op_t *op, const char **name)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, op->cmd) || !bson_iter_next(&it))
        return mf_err_set(&op->err, MF_E_FailedToParse, "empty command");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_InvalidNamespace,
                          "collection name has invalid type %s", mf_type_name(bson_iter_type(&it)));
    uint32_t len;
    *name = bson_iter_utf8(&it, &len);
    if (strlen(*name) != len)
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "collection name contains a NUL byte");
    return mf_catalog_check_coll_name(op->db, *name, &op->err);
}



int
mf_op_coll_expire_range(mf_op_t *op, double d)
{
    /*
     * mongod's validateExpireAfterSeconds for a clustered TTL (the value read
     * as safeInt64: NaN is 0): no later than now since the epoch, as a
     * time-series bucket's _id keeps its time in 32-bit seconds.
     */
    long long secs = mf_double_clamp_ll(d);
    if (secs <= INT64_MAX / 1000 && secs * 1000 <= mf_now_ms())
        return 0;
    return mf_err_set(&op->err, MF_E_InvalidOptions,
                      "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number");
}

long long
mf_double_clamp_ll(double d)
{
    if (d != d)
        return 0;
    return d <= -9223372036854775808.0 ? INT64_MIN : d >= 9223372036854775807.0 ? INT64_MAX : (long long)d;
}

int
mf_op_doc_array(mf_op_t *op, const char *path, const bson_iter_t *arr)
{
    bson_iter_t el;
    if (bson_iter_recurse(arr, &el))
        while (bson_iter_next(&el))
            if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'",
                                  path, bson_iter_key(&el), mf_type_name(bson_iter_type(&el)));
    return 0;
}

bool
mf_cmd_view_collation_is(const mf_coll_t *v, const mf_collation_t *c)
{
    bson_iter_t in;
    mf_collation_t *vc = NULL;
    mf_error_t e; /* written only on failure: not zeroed (5 KB) */
    if (v->options != NULL && bson_iter_init_find(&in, v->options, "collation") &&
        mf_collation_from_value(bson_iter_value(&in), &vc, &e) != 0)
        vc = NULL;
    bool same = mf_collation_equal(c, vc);
    mf_collation_free(vc);
    return same;
}

int
mf_op_safe_bool(mf_op_t *op, const char *path, const bson_iter_t *it, bool *out)
{
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    if (v->value_type == BSON_TYPE_BOOL) {
        *out = v->value.v_bool;
        return 0;
    }
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field '%s' is the wrong type '%s', expected types '[bool, long, int, decimal, double]'",
                          path, mf_type_name(v->value_type));
    *out = mf_value_truthy(v); /* NaN is true, as BSONElement::trueValue */
    return 0;
}

/* Whether it holds a string with a NUL byte inside (a C string would end there). */
static bool
utf8_has_nul(const bson_iter_t *it)
{
    uint32_t len;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return false;
    const char *s = bson_iter_utf8(it, &len);
    return memchr(s, '\0', len) != NULL;
}

static int
nul_namespace(mf_op_t *op, const char *field)
{
    return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace in '%s': contains a NUL byte", field);
}

/* A target that names a collection (stage, for the message): a string, or {db, coll}. */
static int
target_name(mf_op_t *op, const bson_iter_t *v, const char *stage)
{
    bson_iter_t in;
    if (utf8_has_nul(v))
        return nul_namespace(op, stage);
    if (!BSON_ITER_HOLDS_DOCUMENT(v) || !bson_iter_recurse(v, &in))
        return 0;
    while (bson_iter_next(&in)) {
        const char *k = bson_iter_key(&in);
        if ((strcmp(k, "db") == 0 || strcmp(k, "coll") == 0) && utf8_has_nul(&in))
            return nul_namespace(op, stage);
    }
    return 0;
}

#define NAMES_MAX_DEPTH 32 /* sub-pipelines deeper than this are refused by the pipeline parser anyway */

/* A pipeline's stages that name other collections, and their sub-pipelines. */
static int
pipeline_names(mf_op_t *op, const bson_iter_t *arr, int depth)
{
    bson_iter_t st, s, f;
    if (depth > NAMES_MAX_DEPTH || !BSON_ITER_HOLDS_ARRAY(arr) || !bson_iter_recurse(arr, &st))
        return 0;
    while (bson_iter_next(&st)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &s) || !bson_iter_next(&s))
            continue;
        const char *name = bson_iter_key(&s);
        if ((strcmp(name, "$out") == 0 || strcmp(name, "$unionWith") == 0 || strcmp(name, "$merge") == 0 ||
             strcmp(name, "$lookup") == 0 || strcmp(name, "$graphLookup") == 0) &&
            target_name(op, &s, name) != 0)
            return -1;
        if (!BSON_ITER_HOLDS_DOCUMENT(&s) || !bson_iter_recurse(&s, &f))
            continue;
        bool facet = strcmp(name, "$facet") == 0;
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (facet || strcmp(k, "pipeline") == 0) {
                if (pipeline_names(op, &f, depth + 1) != 0)
                    return -1;
            } else if (strcmp(name, "$lookup") == 0 || strcmp(name, "$graphLookup") == 0 ||
                       strcmp(name, "$merge") == 0) {
                if ((strcmp(k, "from") == 0 || strcmp(k, "into") == 0) && target_name(op, &f, name) != 0)
                    return -1;
            }
        }
    }
    return 0;
}

/*
 * One top-level field of the command for mf_cmd_check_names (k its name, it
 * on it, first for the command's own field; *indexes: -1 until worked out).
 */
static int
check_name_field(mf_op_t *op, bool first, const char *k, bson_iter_t *it, int *indexes)
{
    bson_iter_t sub;
    if (first || strcmp(k, "to") == 0 || strcmp(k, "toCollection") == 0 || strcmp(k, "viewOn") == 0 ||
        strcmp(k, "collection") == 0)
        return utf8_has_nul(it) ? nul_namespace(op, k) : 0;
    if (strcmp(k, "pipeline") == 0)
        return pipeline_names(op, it, 0);
    if (strcmp(k, "hint") == 0) {
        /* Read as a C string it would name another index (a sparse or partial one changes the result). */
        return utf8_has_nul(it) ? mf_err_set(&op->err, MF_E_BadValue, "hint provided does not correspond to an existing index")
                                : 0;
    }
    if (strcmp(k, "index") != 0)
        return 0;
    if (*indexes < 0)
        *indexes = strcmp(op->name, "dropIndexes") == 0 || strcmp(op->name, "deleteIndexes") == 0 ||
                   strcmp(op->name, "collMod") == 0;
    if (!*indexes)
        return 0;
    bool bad = utf8_has_nul(it);
    if (!bad && (BSON_ITER_HOLDS_ARRAY(it) || BSON_ITER_HOLDS_DOCUMENT(it)) && bson_iter_recurse(it, &sub)) {
        /* dropIndexes' list of names; collMod's {name: ...} */
        while (!bad && bson_iter_next(&sub))
            bad = (BSON_ITER_HOLDS_ARRAY(it) || strcmp(bson_iter_key(&sub), "name") == 0) && utf8_has_nul(&sub);
    }
    return bad ? mf_err_set(&op->err, MF_E_IndexNotFound, "index not found: its name contains a NUL byte") : 0;
}

/* Whether a top-level field named k can name a namespace or an index (its first letter, then check_name_field). */
static inline bool
may_name(const char *k)
{
    return k[0] == 't' || k[0] == 'v' || k[0] == 'c' || k[0] == 'p' || k[0] == 'h' || k[0] == 'i';
}

int
mf_cmd_check_names(mf_op_t *op)
{
    bson_iter_t it;
    int indexes = -1;
    const uint8_t *data = bson_get_data(op->cmd);
    op_fields(op, data); /* the field index mf_op_find keeps: no second walk of the command per request */
    if (op->nfields > 0) {
        for (int i = 0; i < op->nfields; i++) {
            const mf_op_field_t *f = &op->fields[i];
            if (i > 0 && !may_name(f->key))
                continue;
            if (!bson_iter_init_from_data_at_offset(&it, data, op->cmd->len, f->off, f->keylen))
                return 0;
            if (check_name_field(op, i == 0, f->key, &it, &indexes) != 0)
                return -1;
        }
        return 0;
    }
    if (!bson_iter_init(&it, op->cmd))
        return 0;
    for (bool first = true; bson_iter_next(&it); first = false) {
        const char *k = bson_iter_key(&it);
        if ((first || may_name(k)) && check_name_field(op, first, k, &it, &indexes) != 0)
            return -1;
    }
    return 0;
}

int64_t
mf_cmd_cursor_register(mf_op_t *op, mf_cursor_t *cur)
{
    int64_t total = mf_param_get(op->eng->params, "maxOpenCursors");
    int64_t per_conn = mf_param_get(op->eng->params, "maxOpenCursorsPerConnection");
    cur->client_id = op->client != NULL ? op->client->id : 0;
    mf_cmd_auth_owner(op, cur->owner, sizeof(cur->owner));
    cur->has_lsid = mf_cmd_session_id(op, cur->lsid);
    cur->in_txn = mf_cmd_txn_number(op, &cur->txn_number);
    /* For $currentOp's idleCursors: the opening command, its plan, and the options the reaper heeds. */
    bson_iter_t it;
    cur->tailable = mf_op_find(op, "tailable", &it) && bson_iter_as_bool(&it);
    cur->no_timeout = mf_op_find(op, "noCursorTimeout", &it) && bson_iter_as_bool(&it);
    if (cur->origin == NULL)
        cur->origin = bson_copy(op->cmd);
    mf_curop_scan_t scan;
    mf_curop_scan_of(mf_curop_current(), &scan);
    if (scan.plan[0] && cur->plan_summary == NULL)
        cur->plan_summary = mf_strdup(scan.plan);
    cur->has_sort_stage = cur->has_sort_stage || scan.has_sort_stage;
    if (mf_collation_current() != NULL && cur->collation == NULL) {
        cur->collation = bson_new();
        mf_collation_append_spec(mf_collation_current(), cur->collation);
    }
    /* A find's or aggregate's time limit rolls over to its getMores (find_cmd.cpp, run_aggregate.cpp). */
    int64_t deadline = mf_curop_deadline(mf_curop_current());
    if (deadline > 0 && cur->ext_fill == NULL && op->name != NULL &&
        (strcmp(op->name, "find") == 0 || strcmp(op->name, "aggregate") == 0)) {
        int64_t left = deadline - mf_mono_ms();
        cur->max_time_left_ms = left > 0 ? left : 0;
    }
    int64_t id = mf_cursors_register(op->eng->cursors, cur, total, cur->client_id != 0 ? per_conn : 0);
    if (id < 0)
        mf_err_set(&op->err, MF_E_ExceededMemoryLimit,
                   "too many open cursors (maxOpenCursors %lld in all, maxOpenCursorsPerConnection %lld per "
                   "connection): close or exhaust some first",
                   (long long)total, (long long)per_conn);
    return id;
}

bool
mf_cmd_validator_parses(const bson_t *opts)
{
    static const char *const keys[] = {"validator", "validationLevel", "validationAction", "collation", NULL};
    bson_t v;
    bson_iter_t it;
    mf_error_t e;
    bson_init(&v);
    for (int i = 0; keys[i] != NULL; i++) {
        if (bson_iter_init_find(&it, opts, keys[i]))
            bson_append_value(&v, keys[i], -1, bson_iter_value(&it));
    }
    mf_err_clear(&e);
    bool ok = mf_coll_options_check(&v, false, &e) == 0;
    bson_destroy(&v);
    return ok;
}

void
mf_cmd_count_validator(mf_op_t *op, bool collmod, const bson_value_t *v, bool parsed)
{
    bson_iter_t it;
    if (v == NULL || v->value_type != BSON_TYPE_DOCUMENT || v->value.v_doc.data_len <= 5)
        return;
    _Atomic int64_t *c = op->eng->validator_counts[collmod ? 1 : 0];
    atomic_fetch_add_explicit(&c[0], 1, memory_order_relaxed);
    if (!parsed)
        atomic_fetch_add_explicit(&c[1], 1, memory_order_relaxed);
    if (bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) && bson_iter_find(&it, "$jsonSchema"))
        atomic_fetch_add_explicit(&c[2], 1, memory_order_relaxed);
}

void
mf_cmd_options_canonical(bson_t *opts)
{
    static const char *const order[] = {"capped", "size", "max", "autoIndexId", "temp", "recordPreImages",
                                        "changeStreamPreAndPostImages", "storageEngine", "indexOptionDefaults",
                                        "validator", "validationLevel", "validationAction", "collation",
                                        "clusteredIndex", "expireAfterSeconds", "viewOn", "pipeline", "idIndex",
                                        "timeseries", "encryptedFields", NULL};
    bson_iter_t it;
    bson_t out;
    if (bson_has_field(opts, "viewOn"))
        return; /* a view's options are listed viewOn, pipeline, collation (list_collections.cpp) */
    bson_init(&out);
    for (int i = 0; order[i] != NULL; i++) {
        if (bson_iter_init_find(&it, opts, order[i]))
            bson_append_value(&out, order[i], -1, bson_iter_value(&it));
    }
    bson_iter_init(&it, opts);
    while (bson_iter_next(&it)) {
        bool known = false;
        for (int i = 0; order[i] != NULL && !known; i++)
            known = strcmp(order[i], bson_iter_key(&it)) == 0;
        if (!known)
            bson_append_value(&out, bson_iter_key(&it), -1, bson_iter_value(&it));
    }
    bson_destroy(opts);
    bson_init(opts);
    bson_concat(opts, &out);
    bson_destroy(&out);
}

int
mf_cmd_validation_option(mf_op_t *op, const char *cmd_name, const bson_iter_t *it)
{
    static const char *const levels[] = {"off", "strict", "moderate", NULL};
    /*
     * 8.0's ValidationAction IDL enum is error and warn: "errorAndLog" came in 8.1 (behind
     * featureFlagErrorAndLogValidationAction; Compass offers it from 8.1.0-rc.0), so 8.0
     * refuses it as any other unknown value.
     */
    static const char *const actions[] = {"error", "warn", NULL};
    const char *k = bson_iter_key(it);
    const char *const *values = strcmp(k, "validationLevel") == 0 ? levels : strcmp(k, "validationAction") == 0 ? actions : NULL;
    if (strcmp(k, "validator") == 0) {
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'object'",
                              cmd_name, k, mf_type_name(bson_iter_type(it)));
        return 0;
    }
    if (values == NULL)
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field '%s.%s' is the wrong type '%s', expected type 'string'",
                          cmd_name, k, mf_type_name(bson_iter_type(it)));
    const char *v = bson_iter_utf8(it, NULL);
    for (int i = 0; values[i] != NULL; i++) {
        if (strcmp(values[i], v) == 0)
            return 0;
    }
    /* IDLParserContext::throwBadEnumValue: the field's whole path. */
    return mf_err_set(&op->err, MF_E_BadValue, "Enumeration value '%s' for field '%s.%s' is not a valid value.", v, cmd_name, k);
}

int
mf_cmd_pre_images_option(mf_op_t *op, const char *cmd_name, const bson_iter_t *it, bool *enabled)
{
    bson_iter_t e;
    bool found = false;
    *enabled = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field '%s.changeStreamPreAndPostImages' is the wrong type '%s', expected type 'object'",
                          cmd_name, mf_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, &e);
    while (bson_iter_next(&e)) {
        if (strcmp(bson_iter_key(&e), "enabled") != 0)
            return mf_err_set(&op->err, MF_E_Location40415,
                              "BSON field '%s.changeStreamPreAndPostImages.%s' is an unknown field.", cmd_name,
                              bson_iter_key(&e));
        if (!BSON_ITER_HOLDS_BOOL(&e))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field '%s.changeStreamPreAndPostImages.enabled' is the wrong type '%s', expected "
                              "type 'bool'", cmd_name, mf_type_name(bson_iter_type(&e)));
        *enabled = bson_iter_bool(&e);
        found = true;
    }
    if (!found)
        return mf_err_set(&op->err, MF_E_Location40414,
                          "BSON field '%s.changeStreamPreAndPostImages.enabled' is missing but a required field",
                          cmd_name);
    if (*enabled && (strcmp(op->db, "admin") == 0 || strcmp(op->db, "local") == 0 || strcmp(op->db, "config") == 0))
        return mf_err_set(&op->err, MF_E_InvalidOptions,
                          "changeStreamPreAndPostImages collection option is not supported on the %s database", op->db);
    return 0;
}

