/*
 * fuzz_keystring.c: the index key encoding (src/index/keystring.h).
 *
 * Feeds (see fuzz_common.h for the two encodings): the first document is an
 * index key, one component per top-level field, descending when the field
 * name starts with '-' ({a: 1, "-b": "x"}); a second document, if any, is
 * another key read with the same directions. Each key is encoded
 * (mf_ks_append_value), decoded back with and without its type bits, and the
 * two keys are compared. The raw input bytes are also decoded as if they
 * were a stored key, as validate and the TTL monitor read keys from disk.
 *
 * Checks: no crash, leak or undefined behaviour; a failure carries an error
 * code; a typed decode gives back exactly the values encoded (type and bits;
 * symbols come back as strings, NaN as a NaN; values libbson cannot rebuild
 * as they are are left out, see regex_options_canonical); an untyped decode
 * gives values equal to them in MongoDB's order (mf_value_cmp, except decimal128, which
 * comes back as its nearest double); encodings are prefix-free (one key is
 * never a proper prefix of a different one, the property that lets record
 * ids and further components be appended); memcmp of two keys orders them
 * as mf_value_cmp orders their values, field by field with directions, and
 * equal values give equal keys (unique indexes and equality scans rely on
 * it; in key format 1, which indexes created before format 2 keep,
 * decimal128 values closer than the encoding resolves may tie, as
 * keystring.c documents; format 2, chosen by the input's length, orders
 * them exactly; arrays whose keys are not "0", "1"... are left out
 * since the key drops array field names); the minkey / maxkey bounds after a
 * prefix enclose every key with that prefix; a Date component is the key
 * mf_ks_date_key builds and mf_ks_date_from_key reads it back; a record id
 * appended reads back.
 */
#include "fuzz_common.h"

#include <math.h>
#include <stdio.h>

#include "doc/value.h"
#include "index/keystring.h"

#define MAX_COMPONENTS 32

typedef struct fkey {
    bson_value_t v[MAX_COMPONENTS]; /* views into the input document */
    bool desc[MAX_COMPONENTS];
    size_t start[MAX_COMPONENTS + 1]; /* component i's bytes: [start[i], start[i + 1]) */
    int n;
    mf_keystring_t ks;
    bool encoded;
    bool has_decimal, odd_arrays;
    bool unbuildable[MAX_COMPONENTS]; /* component holds a value libbson cannot rebuild as it is */
} fkey_t;

/*
 * regex_options_canonical: whether libbson keeps opts as they are. Building a
 * regex (bson_append_regex, as the decoder does) sorts the options and drops
 * unknown letters, so /x/Im decodes as /x/m: a round trip cannot give back
 * options that were not already canonical. Likewise the decoder builds Code,
 * Code with scope and DBPointer values from C strings, so a NUL inside their
 * code or namespace (legal in BSON, meaningless to MongoDB) cannot come back.
 * Such values are left out of the round-trip checks (see buildable), not out
 * of the order checks.
 */
static bool
regex_options_canonical(const char *opts)
{
    bson_t b = BSON_INITIALIZER;
    bson_iter_t it;
    const char *back = NULL;
    bool same;

    bson_append_regex(&b, "r", 1, "x", opts);
    if (bson_iter_init_find(&it, &b, "r"))
        bson_iter_regex(&it, &back);
    same = back != NULL && strcmp(back, opts) == 0;
    bson_destroy(&b);
    return same;
}

static bool
buildable(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_REGEX:
        return regex_options_canonical(v->value.v_regex.options);
    case BSON_TYPE_CODE:
        return memchr(v->value.v_code.code, 0, v->value.v_code.code_len) == NULL;
    case BSON_TYPE_CODEWSCOPE:
        return memchr(v->value.v_codewscope.code, 0, v->value.v_codewscope.code_len) == NULL;
    case BSON_TYPE_DBPOINTER:
        return memchr(v->value.v_dbpointer.collection, 0, v->value.v_dbpointer.collection_len) == NULL;
    default:
        return true;
    }
}

/* scan_value: notes decimals, values libbson cannot rebuild and arrays whose keys are not 0, 1, ... inside v. */
static void
scan_value(const bson_value_t *v, fkey_t *k, int depth)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    bool array = v->value_type == BSON_TYPE_ARRAY;
    unsigned i = 0;

    if (v->value_type == BSON_TYPE_DECIMAL128)
        k->has_decimal = true;
    if (!buildable(v))
        k->unbuildable[k->n] = true;
    if (v->value_type == BSON_TYPE_DOCUMENT || array) {
        data = v->value.v_doc.data;
        len = v->value.v_doc.data_len;
    } else if (v->value_type == BSON_TYPE_CODEWSCOPE) {
        data = v->value.v_codewscope.scope_data;
        len = v->value.v_codewscope.scope_len;
    } else {
        return;
    }
    if (depth > 250 || !bson_iter_init_from_data(&it, data, len))
        return;
    while (bson_iter_next(&it)) {
        if (array) {
            char want[16];
            snprintf(want, sizeof want, "%u", i++);
            if (strcmp(bson_iter_key(&it), want) != 0)
                k->odd_arrays = true;
        }
        scan_value(bson_iter_value(&it), k, depth + 1);
    }
}

/* same_value: the typed round trip's notion of "exactly the value encoded". */
static bool
same_value(const bson_value_t *a, const bson_value_t *b, int depth)
{
    if (a->value_type == BSON_TYPE_SYMBOL)
        return b->value_type == BSON_TYPE_UTF8 && mf_value_cmp(a, b) == 0;
    if (a->value_type != b->value_type)
        return false;
    switch (a->value_type) {
    case BSON_TYPE_DOUBLE:
        if (isnan(a->value.v_double))
            return isnan(b->value.v_double);
        return memcmp(&a->value.v_double, &b->value.v_double, sizeof(double)) == 0;
    case BSON_TYPE_INT32:
        return a->value.v_int32 == b->value.v_int32;
    case BSON_TYPE_INT64:
        return a->value.v_int64 == b->value.v_int64;
    case BSON_TYPE_DECIMAL128:
        return a->value.v_decimal128.low == b->value.v_decimal128.low &&
               a->value.v_decimal128.high == b->value.v_decimal128.high;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_CODEWSCOPE: {
        bson_iter_t ia, ib;
        bool ha, hb;
        if (a->value_type == BSON_TYPE_CODEWSCOPE) {
            if (a->value.v_codewscope.code_len != b->value.v_codewscope.code_len ||
                memcmp(a->value.v_codewscope.code, b->value.v_codewscope.code, a->value.v_codewscope.code_len) != 0)
                return false;
            if (!bson_iter_init_from_data(&ia, a->value.v_codewscope.scope_data, a->value.v_codewscope.scope_len) ||
                !bson_iter_init_from_data(&ib, b->value.v_codewscope.scope_data, b->value.v_codewscope.scope_len))
                return false;
        } else if (!bson_iter_init_from_data(&ia, a->value.v_doc.data, a->value.v_doc.data_len) ||
                   !bson_iter_init_from_data(&ib, b->value.v_doc.data, b->value.v_doc.data_len)) {
            return false;
        }
        if (depth > 250)
            return true;
        for (;;) {
            ha = bson_iter_next(&ia);
            hb = bson_iter_next(&ib);
            if (!ha || !hb)
                return ha == hb;
            if (a->value_type != BSON_TYPE_ARRAY && strcmp(bson_iter_key(&ia), bson_iter_key(&ib)) != 0)
                return false;
            if (!same_value(bson_iter_value(&ia), bson_iter_value(&ib), depth + 1))
                return false;
        }
    }
    default:
        return mf_value_cmp(a, b) == 0;
    }
}

/* key_load: the components of doc; false if there are none or too many. */
static bool
key_load(fkey_t *k, const bson_t *doc, const fkey_t *dirs_from, bool legacy)
{
    bson_iter_t it;

    memset(k, 0, sizeof(*k));
    mf_ks_init(&k->ks);
    k->ks.legacy_decimals = legacy;
    if (!bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it)) {
        if (k->n == MAX_COMPONENTS)
            return false;
        k->v[k->n] = *bson_iter_value(&it);
        k->desc[k->n] = dirs_from ? (k->n < dirs_from->n && dirs_from->desc[k->n]) : bson_iter_key(&it)[0] == '-';
        scan_value(&k->v[k->n], k, 0);
        k->n++;
    }
    return k->n > 0;
}

/* key_encode: encodes k's components; checks the round trips. */
static void
key_encode(fkey_t *k)
{
    mf_error_t err;
    bson_t dec;
    bson_iter_t it;
    size_t tblen;
    const uint8_t *tb;

    for (int i = 0; i < k->n; i++) {
        k->start[i] = k->ks.len;
        mf_err_clear(&err);
        if (mf_ks_append_value(&k->ks, &k->v[i], k->desc[i], &err) != 0) {
            FUZZ_CHECK(err.code != 0, "encode failed without an error code");
            FUZZ_CHECK(k->ks.len == k->start[i], "failed encode left %zu bytes behind", k->ks.len - k->start[i]);
            return;
        }
        FUZZ_CHECK(k->ks.len > k->start[i], "component %d encoded to nothing", i);
        if (k->v[i].value_type == BSON_TYPE_DATE_TIME) {
            uint8_t dk[MF_KS_DATE_LEN];
            int64_t ms = 0;
            mf_ks_date_key(k->v[i].value.v_datetime, k->desc[i], dk);
            FUZZ_CHECK(k->ks.len - k->start[i] == MF_KS_DATE_LEN &&
                           memcmp(dk, k->ks.data + k->start[i], sizeof dk) == 0,
                       "Date component differs from mf_ks_date_key");
            FUZZ_CHECK(mf_ks_date_from_key(k->ks.data + k->start[i], MF_KS_DATE_LEN, k->desc[i], &ms) &&
                           ms == k->v[i].value.v_datetime,
                       "mf_ks_date_from_key read %lld for %lld", (long long)ms, (long long)k->v[i].value.v_datetime);
        }
    }
    k->start[k->n] = k->ks.len;
    k->encoded = true;

    /* Typed: exactly the values. */
    tb = mf_ks_typebits(&k->ks, &tblen);
    bson_init(&dec);
    mf_err_clear(&err);
    FUZZ_CHECK(mf_ks_decode_typed(k->ks.data, k->ks.len, tb, tblen, k->desc, k->n, &dec, &err) == 0,
               "typed decode of a fresh key failed: %s", err.msg);
    FUZZ_CHECK(bson_iter_init(&it, &dec), "decoded key is not BSON");
    for (int i = 0; i < k->n; i++) {
        FUZZ_CHECK(bson_iter_next(&it), "typed decode gave fewer than %d values", k->n);
        FUZZ_CHECK(k->unbuildable[i] || same_value(&k->v[i], bson_iter_value(&it), 0),
                   "typed decode of component %d (type 0x%02x) differs", i, (unsigned)k->v[i].value_type);
    }
    FUZZ_CHECK(!bson_iter_next(&it), "typed decode gave more than %d values", k->n);
    bson_destroy(&dec);

    /* Untyped: equal values in MongoDB's order. */
    bson_init(&dec);
    mf_err_clear(&err);
    FUZZ_CHECK(mf_ks_decode(k->ks.data, k->ks.len, k->desc, k->n, &dec, &err) == 0, "decode of a fresh key failed: %s",
               err.msg);
    if (!k->has_decimal && !k->odd_arrays) {
        FUZZ_CHECK(bson_iter_init(&it, &dec), "decoded key is not BSON");
        for (int i = 0; i < k->n; i++) {
            FUZZ_CHECK(bson_iter_next(&it), "decode gave fewer than %d values", k->n);
            FUZZ_CHECK(k->unbuildable[i] || mf_value_cmp(&k->v[i], bson_iter_value(&it)) == 0,
                       "decode of component %d (type 0x%02x) is not equal to it", i, (unsigned)k->v[i].value_type);
        }
    }
    bson_destroy(&dec);

    /* Deterministic, and a record id appended reads back. */
    {
        mf_keystring_t c;
        int64_t rid = (int64_t)(k->ks.len * 2654435761u % 0x7FFFFFFFFFFFull) + 1;
        mf_ks_init(&c);
        c.legacy_decimals = k->ks.legacy_decimals;
        for (int i = 0; i < k->n; i++) {
            mf_err_clear(&err);
            FUZZ_CHECK(mf_ks_append_value(&c, &k->v[i], k->desc[i], &err) == 0, "second encode failed");
        }
        FUZZ_CHECK(c.len == k->ks.len && memcmp(c.data, k->ks.data, c.len) == 0, "encoding is not deterministic");
        mf_ks_append_recordid(&c, rid);
        FUZZ_CHECK(mf_ks_read_recordid(c.data, c.len) == rid, "record id did not read back");
        mf_ks_destroy(&c);
    }
}

static int
sign(int c)
{
    return (c > 0) - (c < 0);
}

static int
key_memcmp(const fkey_t *a, const fkey_t *b)
{
    size_t n = a->ks.len < b->ks.len ? a->ks.len : b->ks.len;
    int c = memcmp(a->ks.data, b->ks.data, n);
    if (c != 0)
        return sign(c);
    return a->ks.len < b->ks.len ? -1 : (a->ks.len > b->ks.len ? 1 : 0);
}

static void
check_bounds(const fkey_t *k)
{
    for (int i = 0; i < k->n; i++) {
        size_t pl = k->start[i];
        uint8_t *lo = malloc(pl + 1), *hi = malloc(pl + 1);
        memcpy(lo, k->ks.data, pl);
        memcpy(hi, k->ks.data, pl);
        {
            mf_keystring_t b;
            mf_ks_init(&b);
            mf_ks_append_minkey(&b, k->desc[i]);
            FUZZ_CHECK(b.len == 1, "minkey bound is %zu bytes", b.len);
            lo[pl] = b.data[0];
            mf_ks_reset(&b);
            mf_ks_append_maxkey(&b, k->desc[i]);
            FUZZ_CHECK(b.len == 1, "maxkey bound is %zu bytes", b.len);
            hi[pl] = b.data[0];
            mf_ks_destroy(&b);
        }
        FUZZ_CHECK(memcmp(lo, k->ks.data, pl + 1) < 0, "minkey bound after prefix %d is not below the key", i);
        FUZZ_CHECK(memcmp(hi, k->ks.data, pl + 1) > 0, "maxkey bound after prefix %d is not above the key", i);
        free(lo);
        free(hi);
    }
}

static void
compare_keys(const fkey_t *a, const fkey_t *b)
{
    int vc = 0, kc;
    size_t n = a->ks.len < b->ks.len ? a->ks.len : b->ks.len;

    if (a->n != b->n)
        return;
    kc = key_memcmp(a, b);
    if (kc != 0)
        FUZZ_CHECK(a->ks.len == b->ks.len ? true : memcmp(a->ks.data, b->ks.data, n) != 0,
                   "one key is a proper prefix of a different key (%zu and %zu bytes)", a->ks.len, b->ks.len);
    if (a->odd_arrays || b->odd_arrays)
        return;
    for (int i = 0; i < a->n && vc == 0; i++) {
        vc = sign(mf_value_cmp(&a->v[i], &b->v[i]));
        if (a->desc[i])
            vc = -vc;
    }
    if (vc == 0)
        FUZZ_CHECK(kc == 0, "equal values give different keys (memcmp %d)", kc);
    else if (kc == 0)
        FUZZ_CHECK(a->ks.legacy_decimals && (a->has_decimal || b->has_decimal),
                   "different values (order %d) give the same key", vc);
    else
        FUZZ_CHECK(kc == vc, "keys order %d, values order %d", kc, vc);
}

/* The raw input as a stored key: the decoder must refuse garbage cleanly. */
static void
decode_raw(const uint8_t *data, size_t size)
{
    bool dirs[4];
    mf_error_t err;

    for (int n = 1; n <= 3; n++) {
        bson_t out;
        for (int i = 0; i < 4; i++)
            dirs[i] = size > 0 && (data[size - 1] >> i) & 1;
        bson_init(&out);
        mf_err_clear(&err);
        /*
         * What garbage decodes to need not be valid BSON to libbson (a field
         * name that is not UTF-8 is "corrupt" to it); it must be a document
         * that can be walked.
         */
        if (mf_ks_decode(data, size, dirs, n, &out, &err) == 0)
            fuzz_walk(bson_get_data(&out), out.len, 0);
        else
            FUZZ_CHECK(err.code != 0, "decode failed without an error code");
        bson_destroy(&out);
        bson_init(&out);
        mf_err_clear(&err);
        if (mf_ks_decode_typed(data, size / 2, data + size / 2, size - size / 2, dirs, n, &out, &err) == 0)
            fuzz_walk(bson_get_data(&out), out.len, 0);
        bson_destroy(&out);
    }
    {
        int64_t ms;
        (void)mf_ks_date_from_key(data, size, size & 1, &ms);
        (void)mf_ks_read_recordid(data, size);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    fkey_t *a = calloc(1, sizeof(fkey_t)), *b = calloc(1, sizeof(fkey_t));

    /* Both keys in one format: 1 (an older index's) for a third of the inputs, else 2. */
    bool legacy = size % 3 == 0;
    decode_raw(data, size);
    if (fuzz_docs_read(data, size, &d) > 0 && key_load(a, d.docs[0], NULL, legacy)) {
        key_encode(a);
        if (a->encoded) {
            check_bounds(a);
            if (d.n > 1 && key_load(b, d.docs[1], a, legacy)) {
                key_encode(b);
                if (b->encoded)
                    compare_keys(a, b);
            }
        }
    }
    mf_ks_destroy(&a->ks);
    mf_ks_destroy(&b->ks);
    free(a);
    free(b);
    fuzz_docs_free(&d);
    return 0;
}
