/*
 * hash.c: the hash of a hashed index's field and of $toHashedIndexKey, MongoDB's
 * BSONElementHasher::hash64 (src/mongo/db/hasher.cpp), bit for bit, so that
 * keys, explain's bounds and convertShardKeyToHashed show mongod's values.
 *
 * The hash is MD5 over, in order:
 *   seed                      int32, little-endian (0 for indexes)
 *   then the value, recursively:
 *   canonical type            int32 little-endian (canonicalizeBSONType:
 *                             MinKey -1, EOO/undefined 0, null 5, numbers 10,
 *                             string/symbol 15, object 20, array 25, BinData 30,
 *                             ObjectId 35, bool 40, date 45, timestamp 47,
 *                             regex 50, DBPointer 55, code 60, code w/ scope 65)
 *   field name + NUL          only for the elements of an embedded document
 *   a number                  int64 little-endian (safeNumberLongForHash: NaN
 *                             0, a double truncated, 2^63 exactly gives -2^63,
 *                             beyond the range clamped; a decimal rounded half
 *                             to even, clamped)
 *   a document / array        each element (canonical type, name, value), then
 *                             the end: canonical type 0 only (8.0's EOO element
 *                             has no name bytes); code w/ scope first adds its
 *                             code string with its NUL
 *   anything else             the value's BSON bytes as stored
 * The result is the digest's first 8 bytes read as a little-endian int64.
 * So 1, NumberLong(1) and 1.0 hash alike (and so do 2.2 and 2.9: a hashed
 * index is for equality, and the matcher re-checks every fetched document).
 * MD5 comes from OpenSSL's EVP (an error where it is refused, as in FIPS mode).
 */
#include <math.h>
#include <string.h>

#include <openssl/evp.h>

#include "doc/dec128.h"
#include "doc/value.h"
#include "doc/hash.h"

/* BSONElement::safeNumberLongForHash for a number v. */
static int64_t
number_for_hash(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        return v->value.v_int32;
    case BSON_TYPE_INT64:
        return v->value.v_int64;
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        if (isnan(d))
            return 0;
        if (d == 9223372036854775808.0)
            return INT64_MIN; /* kept from older servers (SERVER-37183) */
        if (!(d < 9223372036854775808.0))
            return INT64_MAX;
        if (d < -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)d;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t max, min, r;
        int64_t out = 0;
        if (mf_dec_is_nan(&v->value.v_decimal128))
            return 0;
        mf_dec_from_int64(INT64_MAX, &max);
        mf_dec_from_int64(INT64_MIN, &min);
        if (mf_dec_cmp(&v->value.v_decimal128, &max) > 0)
            return INT64_MAX;
        if (mf_dec_cmp(&v->value.v_decimal128, &min) < 0)
            return INT64_MIN;
        /* Decimal128::toLong's default rounding: to nearest, ties to even. */
        mf_dec_quantize(&v->value.v_decimal128, 0, MF_DEC_HALF_EVEN, &r);
        if (!mf_dec_to_int64(&r, &out))
            out = 0;
        return out;
    }
    default:
        return 0;
    }
}

static void
add_i32(EVP_MD_CTX *md, int32_t x)
{
    uint32_t u = (uint32_t)x;
    uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    EVP_DigestUpdate(md, b, sizeof(b));
}

static void
add_i64(EVP_MD_CTX *md, int64_t x)
{
    uint64_t u = (uint64_t)x;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    EVP_DigestUpdate(md, b, sizeof(b));
}

static void hash_elements(EVP_MD_CTX *md, const uint8_t *data, uint32_t len);

/*
 * Hashes one element's value: v, whose field name (with its NUL) is added
 * when name is not NULL (elements of an embedded document).
 */
static void
hash_value(EVP_MD_CTX *md, const char *name, const bson_value_t *v)
{
    add_i32(md, mf_value_type_rank(v->value_type)); /* canonicalizeBSONType */
    if (name != NULL)
        EVP_DigestUpdate(md, name, strlen(name) + 1);
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        add_i64(md, number_for_hash(v));
        return;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        hash_elements(md, v->value.v_doc.data, v->value.v_doc.data_len);
        return;
    case BSON_TYPE_CODEWSCOPE:
        EVP_DigestUpdate(md, v->value.v_codewscope.code, (size_t)v->value.v_codewscope.code_len + 1);
        hash_elements(md, v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len);
        return;
    default: {
        /* The value's bytes as BSON stores them: {"": v} is 4 + 1 + 1 + value + 1 bytes. */
        bson_t tmp = BSON_INITIALIZER;
        bson_append_value(&tmp, "", 0, v);
        EVP_DigestUpdate(md, bson_get_data(&tmp) + 6, tmp.len - 7);
        bson_destroy(&tmp);
        return;
    }
    }
}

/* Hashes each element of a document's bytes, then its end (EOO: canonical type 0, no name, no value). */
static void
hash_elements(EVP_MD_CTX *md, const uint8_t *data, uint32_t len)
{
    bson_iter_t it;
    if (bson_iter_init_from_data(&it, data, len)) {
        while (bson_iter_next(&it))
            hash_value(md, bson_iter_key(&it), bson_iter_value(&it));
    }
    add_i32(md, 0);
}

int
mf_hash64(const bson_value_t *v, int32_t seed, int64_t *out, mf_error_t *err)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    uint64_t h = 0;
    int rc = -1;

    /* MD5 is refused by an OpenSSL in FIPS mode: an error then, never a made-up key. */
    if (md == NULL || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1) {
        mf_err_set(err, MF_E_InternalError, "MD5 is not available for hashed index keys");
        goto err_free_md;
    }
    add_i32(md, seed);
    hash_value(md, NULL, v);
    if (EVP_DigestFinal_ex(md, d, &dlen) != 1 || dlen < 8) {
        mf_err_set(err, MF_E_InternalError, "MD5 failed");
        goto err_free_md;
    }
    for (int i = 7; i >= 0; i--)
        h = (h << 8) | d[i];
    *out = (int64_t)h;
    rc = 0;
err_free_md:
    EVP_MD_CTX_free(md);
    return rc;
}
