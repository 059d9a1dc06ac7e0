/*
 * keystring.c: order-preserving binary encoding of index keys (see keystring.h).
 *
 * A key is a concatenation of components, one per indexed field, optionally
 * followed by an 8-byte record id. memcmp() on two keys orders them exactly as
 * MongoDB orders the corresponding values (field by field, honouring each
 * field's direction). Every component encoding is prefix-free (no encoding is
 * a proper prefix of another), so the first differing byte always falls
 * inside both encodings; that is what makes "invert every byte" a correct
 * descending order and lets components and the record id simply be
 * concatenated.
 *
 * Component format (ascending; a descending component is the same bytes with
 * every byte XORed with 0xFF):
 *
 *   tag   type                 content after the tag
 *   ----  -------------------  ------------------------------------------------
 *   0x00  bound: below all     (none)   mf_ks_append_minkey, never inverted
 *   0x0A  MinKey               (none)
 *   0x0F  Undefined            (none)
 *   0x14  Null                 (none)
 *   0x1E  number               8-byte ordered double D, then 2-byte suffix S
 *   0x3C  String / Symbol      escaped bytes, then 0x00 0x00
 *   0x46  Object               elements, then 0x00
 *   0x50  Array                elements (field name omitted), then 0x00
 *   0x5A  BinData              uint32 BE length, subtype byte, bytes
 *   0x64  ObjectId             12 bytes
 *   0x6E  Boolean              0x00 false / 0x01 true
 *   0x78  Date                 int64 ms BE with the sign bit flipped
 *   0x7D  Timestamp            uint32 BE seconds, uint32 BE increment
 *   0x82  Regex                pattern, 0x00, flags, 0x00
 *   0x8C  DBPointer            uint32 BE (ns length + 1), ns bytes, 12-byte oid
 *   0x96  JavaScript           escaped bytes, then 0x00 0x00
 *   0xA0  JavaScriptWithScope  escaped code, 0x00 0x00, then an Object content
 *   0xF0  MaxKey               (none)
 *   0xFF  bound: above all     (none)   mf_ks_append_maxkey, never inverted
 *
 *   Object element: the element value's tag, the field name bytes, 0x00, then
 *   the value's content. This matches MongoDB's document comparison: canonical
 *   type first, then field name, then value. An Array element is the tag
 *   followed by the content (arrays compare element by element). The 0x00 end
 *   marker is below every tag, so shorter documents and arrays sort first.
 *
 *   String escaping: 0x00 becomes 0x00 0xFF and the terminator is 0x00 0x00,
 *   so embedded NULs are kept and a prefix sorts before its extensions.
 *
 *   Numbers: D is the value rounded to a double, -0.0 folded into 0.0, with
 *   the usual order-preserving transform (positive: flip the sign bit;
 *   negative: flip every bit), big-endian; NaN is eight 0x00 bytes, below
 *   -infinity. S is 0x8000 + 8 * (exact value - D) for integral values, so an
 *   int64 beyond 2^53 that no double represents still sorts correctly against
 *   its neighbouring doubles and decodes exactly. A decimal128 equal to D
 *   (as MongoDB compares a decimal with a double, compareDecimalToDouble:
 *   with D rounded to 34 digits) is D's key. Any other adds 8 *
 *   floor(residual), plus 2 for a fractional residual followed then by its
 *   exact value (DECIMAL EXTENSION below), so decimals that share D and the
 *   residual's floor still sort and compare exactly: 1.0000000000000000000001
 *   and ...0002 are two keys, and neither is 1. The residual's floor is
 *   exact up to 2^112 (-1 or 0 below 2^52; above, decimal arithmetic on D,
 *   an integer of at most 34 digits there), a long double estimate beyond,
 *   where no int64 lives and the extension orders what the estimate
 *   groups (every decimal there carries it). Equal values of any
 *   numeric type therefore encode to identical bytes: 5, NumberLong(5) and 5.0
 *   are the same key, which is what unique indexes and equality scans need.
 *
 *   DECIMAL EXTENSION: the decimal's 16 order bytes (mf_dec_order_bytes:
 *   exponent and coefficient scaled to 34 digits, inverted when negative).
 *   All decimals of one (D, suffix) group have one sign, so byte order is
 *   value order there. Decimals beyond the double range take D = +-DBL_MAX
 *   with the suffix 0xFFFA (0x0002 below zero) and the extension.
 *
 *   KEY FORMAT 1 (ks->legacy_decimals; indexes created before format 2,
 *   whose catalog entry has no keyFormat: 2, keep it for as long as they
 *   exist, because their stored keys were encoded so): no extension and no
 *   34-digit comparison; a decimal that is not exactly D adds 8 *
 *   floor(residual) plus 4 for a fractional residual, residuals computed in
 *   long double, so two decimals with the same D and residual floor tie, and
 *   one beyond the double range takes 0xFFFF / 0x0000. Both formats decode:
 *   the suffix's low bits say whether an extension follows.
 *
 * Type preservation: because equal numbers share bytes, the key itself
 * cannot say which numeric type a value had. mf_ks_decode returns the
 * canonical type: int32 for integral values that fit, then int64, else
 * double (decimal128 comes back as its nearest double). For exact round
 * trips the encoder also records "type bits" beside the key (ks->tb, one
 * byte per number in encoding order, plus 16 raw bytes after a decimal128
 * marker); store them in the index entry's value and pass them to
 * mf_ks_decode_typed. Symbols come back as strings.
 *
 * Record id: 8 bytes big-endian after the last component (record ids are
 * positive, so unsigned byte order is numeric order).
 *
 * Bounds: mf_ks_append_minkey / maxkey write a raw 0x00 / 0xFF regardless of
 * direction: byte-wise below / above every encoded value in that position.
 * They decode as MinKey / MaxKey.
 */
#include "common/alloc.h"
#include "doc/dec128.h"
#include "index/keystring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    TAG_BOUND_MIN = 0x00,
    TAG_MINKEY = 0x0A,
    TAG_UNDEFINED = 0x0F,
    TAG_NULL = 0x14,
    TAG_NUMBER = 0x1E,
    TAG_STRING = 0x3C,
    TAG_OBJECT = 0x46,
    TAG_ARRAY = 0x50,
    TAG_BINDATA = 0x5A,
    TAG_OID = 0x64,
    TAG_BOOL = 0x6E,
    TAG_DATE = 0x78,
    TAG_TIMESTAMP = 0x7D,
    TAG_REGEX = 0x82,
    TAG_DBPOINTER = 0x8C,
    TAG_CODE = 0x96,
    TAG_CODEWSCOPE = 0xA0,
    TAG_MAXKEY = 0xF0,
    TAG_BOUND_MAX = 0xFF,
};

/* Type bits recorded per number. */
enum { TB_INT32 = 1, TB_INT64 = 2, TB_DOUBLE = 3, TB_DECIMAL = 4, TB_NEGZERO = 5 };

#define KS_MAX_DEPTH 200
#define SUFFIX_EXACT 0x8000
#define SUFFIX_FRAC_EXT 2 /* low bits of a fractional decimal's suffix: its exact value follows (format 1: 4, without) */

/* ---- buffer ---- */

void
mf_ks_init(mf_keystring_t *ks)
{
    memset(ks, 0, sizeof(*ks));
}

void
mf_ks_destroy(mf_keystring_t *ks)
{
    free(ks->data);
    free(ks->tb);
    memset(ks, 0, sizeof(*ks));
}

void
mf_ks_reset(mf_keystring_t *ks)
{
    ks->len = 0;
    ks->tblen = 0;
}

static void
grow(uint8_t **data, size_t *cap, size_t need)
{
    size_t c = *cap ? *cap : 64;
    uint8_t *p;

    if (need <= *cap)
        return;
    while (c < need)
        c *= 2;
    p = mf_realloc(*data, c);
    if (p == NULL)
        abort(); /* Out of memory: nothing sensible to do in an encoder. */
    *data = p;
    *cap = c;
}

/*
 * Makes room for n more bytes at the end of the buffer *data (*len used,
 * *cap allocated) and returns where they go (valid until it grows again);
 * *len already counts them. One capacity check per field, and fixed-size
 * fields are stored in place instead of through memcpy calls of a few
 * bytes: keys are built for every index of every written document.
 */
static inline uint8_t *
reserve_in(uint8_t **data, size_t *len, size_t *cap, size_t n)
{
    if (*len + n > *cap)
        grow(data, cap, *len + n);
    uint8_t *p = *data + *len;
    *len += n;
    return p;
}

/* reserve_in for the key's bytes. */
static inline uint8_t *
reserve(mf_keystring_t *ks, size_t n)
{
    return reserve_in(&ks->data, &ks->len, &ks->cap, n);
}

static inline void
store_be(uint8_t *p, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++)
        p[i] = (uint8_t)(v >> (8 * (nbytes - 1 - i)));
}

static void
put(mf_keystring_t *ks, const void *src, size_t n)
{
    memcpy(reserve(ks, n), src, n);
}

static inline void
put_u8(mf_keystring_t *ks, uint8_t b)
{
    *reserve(ks, 1) = b;
}

static inline void
put_be(mf_keystring_t *ks, uint64_t v, int nbytes)
{
    store_be(reserve(ks, (size_t)nbytes), v, nbytes);
}

/* Type bits (ks->tb) go through the same reserve_in. */
static void
put_tb(mf_keystring_t *ks, const void *src, size_t n)
{
    memcpy(reserve_in(&ks->tb, &ks->tblen, &ks->tbcap, n), src, n);
}

/* One type-bits byte (a number's type). */
static inline void
put_tb_u8(mf_keystring_t *ks, uint8_t b)
{
    *reserve_in(&ks->tb, &ks->tblen, &ks->tbcap, 1) = b;
}

const uint8_t *
mf_ks_typebits(const mf_keystring_t *ks, size_t *len)
{
    *len = ks->tblen;
    return ks->tb;
}

/* ---- encoding ---- */

/* s (n bytes) with each NUL as 00 FF, then 00 00: copied a NUL-free stretch at a time. */
static void
put_escaped(mf_keystring_t *ks, const char *s, size_t n)
{
    while (n > 0) {
        const char *z = memchr(s, 0, n);
        size_t run = z != NULL ? (size_t)(z - s) : n;
        put(ks, s, run);
        if (z == NULL)
            break;
        uint8_t *p = reserve(ks, 2);
        p[0] = 0x00;
        p[1] = 0xFF;
        s += run + 1;
        n -= run + 1;
    }
    uint8_t *p = reserve(ks, 2);
    p[0] = 0x00;
    p[1] = 0x00;
}

static uint64_t
ordered_double(double d)
{
    uint64_t bits;

    if (isnan(d))
        return 0;
    if (d == 0)
        d = 0.0; /* fold -0.0 */
    memcpy(&bits, &d, 8);
    return (bits & 0x8000000000000000ull) ? ~bits : bits ^ 0x8000000000000000ull;
}

static double
unordered_double(uint64_t bits)
{
    double d;

    if (bits == 0)
        return NAN;
    bits = (bits & 0x8000000000000000ull) ? bits ^ 0x8000000000000000ull : ~bits;
    memcpy(&d, &bits, 8);
    return d;
}

static void
put_number(mf_keystring_t *ks, double d, int suffix)
{
    uint8_t *p = reserve(ks, 10);
    store_be(p, ordered_double(d), 8);
    store_be(p + 8, (uint64_t)(uint16_t)suffix, 2);
}

static void
encode_int64(mf_keystring_t *ks, int64_t i)
{
    double d = (double)i;
    __int128 delta = (__int128)i - (__int128)d; /* |delta| <= 1024 */

    put_number(ks, d, SUFFIX_EXACT + (int)delta * 8);
}

/* A decimal's key in KEY FORMAT 1 (an index created before format 2), from its value ld (not a NaN). */
static void
encode_decimal_v1(mf_keystring_t *ks, long double ld)
{
    long double r, fl;
    double d = (double)ld;
    int suffix = SUFFIX_EXACT;

    if (isinf(d) && !isinf(ld)) {
        /* Beyond the double range: just inside the infinity. */
        d = d > 0 ? 1.7976931348623157e308 : -1.7976931348623157e308;
        put_number(ks, d, d > 0 ? 0xFFFF : 0x0000);
        return;
    }
    if (!isinf(ld)) {
        r = ld - (long double)d;
        if (r != 0) {
            fl = floorl(r);
            if (fl < -4000)
                fl = -4000;
            if (fl > 4000)
                fl = 4000;
            suffix = SUFFIX_EXACT + (int)fl * 8 + (r != fl ? 4 : 0);
        }
    }
    put_number(ks, d, suffix);
}

/* A fractional decimal's key: D, its suffix (floor * 8 + SUFFIX_FRAC_EXT), then the DECIMAL EXTENSION. */
static void
put_decimal_with_extension(mf_keystring_t *ks, double d, int suffix, const bson_decimal128_t *dec)
{
    put_number(ks, d, suffix);
    mf_dec_order_bytes(dec, reserve(ks, 16));
}

/* A decimal's key: exact (format 2), or as format 1 for an older index. */
static void
encode_decimal(mf_keystring_t *ks, const bson_decimal128_t *dec)
{
    char s[BSON_DECIMAL128_STRING];
    long double ld;
    double d;

    bson_decimal128_to_string(dec, s);
    ld = strtold(s, NULL);
    if (isnan(ld)) {
        put_number(ks, NAN, SUFFIX_EXACT);
        return;
    }
    if (ks->legacy_decimals) {
        encode_decimal_v1(ks, ld);
        return;
    }
    d = (double)ld;
    if (isinf(ld)) {
        put_number(ks, d, SUFFIX_EXACT);
        return;
    }
    if (isinf(d)) {
        /* Beyond the double range: just inside the infinity, in value order among themselves. */
        bool pos = d > 0;
        put_decimal_with_extension(ks, pos ? 1.7976931348623157e308 : -1.7976931348623157e308,
                                   pos ? 0xFFFF - 7 + SUFFIX_FRAC_EXT : SUFFIX_FRAC_EXT, dec);
        return;
    }
    /* Equal to D as MongoDB compares a decimal with a double (compareDecimalToDouble: D to 34 digits)? */
    bson_decimal128_t d34;
    mf_dec_from_double(d, 34, &d34);
    int c = mf_dec_cmp(dec, &d34);
    if (c == 0) {
        put_number(ks, d, SUFFIX_EXACT);
        return;
    }
    long double fl;
    bool frac = true;
    if (fabs(d) < 0x1p52) {
        /* Doubles here are at most 1/2 apart: the residual is a fraction of one sign. */
        fl = c > 0 ? 0 : -1;
    } else if (fabs(d) < 0x1p112) {
        /* D is an integer of at most 34 digits, d34 exactly: the residual, exactly, in decimal. */
        bson_decimal128_t r, rf;
        int64_t fi = 0;
        mf_dec_arith(MF_DEC_SUB, dec, &d34, &r);
        mf_dec_quantize(&r, 0, MF_DEC_FLOOR, &rf);
        frac = mf_dec_cmp(&r, &rf) != 0;
        fl = mf_dec_to_int64(&rf, &fi) ? (long double)fi : (c > 0 ? 4000 : -4000);
    } else {
        /* No int64 lives here: an estimate of the floor places it among D's neighbours; the extension orders it. */
        fl = floorl(ld - (long double)d);
        if (c > 0 && fl < 0)
            fl = 0;
        if (c < 0 && fl >= 0)
            fl = -1;
    }
    if (fl < -4000)
        fl = -4000;
    if (fl > 4000)
        fl = 4000;
    if (frac)
        put_decimal_with_extension(ks, d, SUFFIX_EXACT + (int)fl * 8 + SUFFIX_FRAC_EXT, dec);
    else
        put_number(ks, d, SUFFIX_EXACT + (int)fl * 8);
}

static int encode_doc(mf_keystring_t *ks, const uint8_t *data, size_t len, bool is_array, int depth,
                      mf_error_t *err);

static int
encode_content(mf_keystring_t *ks, const bson_value_t *v, int depth, mf_error_t *err);

static uint8_t
tag_of(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY:
        return TAG_MINKEY;
    case BSON_TYPE_UNDEFINED:
        return TAG_UNDEFINED;
    case BSON_TYPE_NULL:
        return TAG_NULL;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        return TAG_NUMBER;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        return TAG_STRING;
    case BSON_TYPE_DOCUMENT:
        return TAG_OBJECT;
    case BSON_TYPE_ARRAY:
        return TAG_ARRAY;
    case BSON_TYPE_BINARY:
        return TAG_BINDATA;
    case BSON_TYPE_OID:
        return TAG_OID;
    case BSON_TYPE_BOOL:
        return TAG_BOOL;
    case BSON_TYPE_DATE_TIME:
        return TAG_DATE;
    case BSON_TYPE_TIMESTAMP:
        return TAG_TIMESTAMP;
    case BSON_TYPE_REGEX:
        return TAG_REGEX;
    case BSON_TYPE_DBPOINTER:
        return TAG_DBPOINTER;
    case BSON_TYPE_CODE:
        return TAG_CODE;
    case BSON_TYPE_CODEWSCOPE:
        return TAG_CODEWSCOPE;
    case BSON_TYPE_MAXKEY:
        return TAG_MAXKEY;
    default:
        return 0;
    }
}

/* encode_content: the bytes after the tag for v. */
static int
encode_content(mf_keystring_t *ks, const bson_value_t *v, int depth, mf_error_t *err)
{
    switch (v->value_type) {
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
        return 0;
    case BSON_TYPE_INT32:
        put_number(ks, (double)v->value.v_int32, SUFFIX_EXACT);
        put_tb_u8(ks, TB_INT32);
        return 0;
    case BSON_TYPE_INT64:
        encode_int64(ks, v->value.v_int64);
        put_tb_u8(ks, TB_INT64);
        return 0;
    case BSON_TYPE_DOUBLE:
        put_number(ks, v->value.v_double, SUFFIX_EXACT);
        put_tb_u8(ks, (v->value.v_double == 0 && signbit(v->value.v_double)) ? TB_NEGZERO : TB_DOUBLE);
        return 0;
    case BSON_TYPE_DECIMAL128: {
        uint8_t raw[17];
        encode_decimal(ks, &v->value.v_decimal128);
        raw[0] = TB_DECIMAL;
        memcpy(raw + 1, &v->value.v_decimal128.low, 8);
        memcpy(raw + 9, &v->value.v_decimal128.high, 8);
        put_tb(ks, raw, sizeof raw);
        return 0;
    }
    case BSON_TYPE_UTF8:
        put_escaped(ks, v->value.v_utf8.str, v->value.v_utf8.len);
        return 0;
    case BSON_TYPE_SYMBOL:
        put_escaped(ks, v->value.v_symbol.symbol, v->value.v_symbol.len);
        return 0;
    case BSON_TYPE_CODE:
        put_escaped(ks, v->value.v_code.code, v->value.v_code.code_len);
        return 0;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return encode_doc(ks, v->value.v_doc.data, v->value.v_doc.data_len, v->value_type == BSON_TYPE_ARRAY,
                          depth + 1, err);
    case BSON_TYPE_CODEWSCOPE:
        put_escaped(ks, v->value.v_codewscope.code, v->value.v_codewscope.code_len);
        return encode_doc(ks, v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len, false, depth + 1,
                          err);
    case BSON_TYPE_BINARY:
        put_be(ks, v->value.v_binary.data_len, 4);
        put_u8(ks, (uint8_t)v->value.v_binary.subtype);
        put(ks, v->value.v_binary.data, v->value.v_binary.data_len);
        return 0;
    case BSON_TYPE_OID:
        put(ks, v->value.v_oid.bytes, 12);
        return 0;
    case BSON_TYPE_BOOL:
        put_u8(ks, v->value.v_bool ? 1 : 0);
        return 0;
    case BSON_TYPE_DATE_TIME:
        put_be(ks, (uint64_t)v->value.v_datetime ^ 0x8000000000000000ull, 8);
        return 0;
    case BSON_TYPE_TIMESTAMP:
        put_be(ks, v->value.v_timestamp.timestamp, 4);
        put_be(ks, v->value.v_timestamp.increment, 4);
        return 0;
    case BSON_TYPE_REGEX: {
        const char *opt = v->value.v_regex.options ? v->value.v_regex.options : "";
        put(ks, v->value.v_regex.regex, strlen(v->value.v_regex.regex) + 1);
        put(ks, opt, strlen(opt) + 1);
        return 0;
    }
    case BSON_TYPE_DBPOINTER:
        put_be(ks, (uint64_t)v->value.v_dbpointer.collection_len + 1, 4);
        put(ks, v->value.v_dbpointer.collection, v->value.v_dbpointer.collection_len);
        put(ks, v->value.v_dbpointer.oid.bytes, 12);
        return 0;
    default:
        return mf_err_set(err, MF_E_BadValue, "cannot index a value of BSON type %d", (int)v->value_type);
    }
}

/* encode_doc: elements of the document (or array) at data, then the end marker. */
static int
encode_doc(mf_keystring_t *ks, const uint8_t *data, size_t len, bool is_array, int depth, mf_error_t *err)
{
    bson_t doc;
    bson_iter_t it;

    if (depth > KS_MAX_DEPTH)
        return mf_err_set(err, MF_E_Overflow, "BSONObj exceeded maximum nested object depth: %d", KS_MAX_DEPTH);
    if (!bson_init_static(&doc, data, len) || !bson_iter_init(&it, &doc))
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON in an index key");
    while (bson_iter_next(&it)) {
        const bson_value_t *ev = bson_iter_value(&it);
        uint8_t tag = tag_of(ev->value_type);
        if (tag == 0)
            return mf_err_set(err, MF_E_BadValue, "cannot index a value of BSON type %d", (int)ev->value_type);
        put_u8(ks, tag);
        if (!is_array)
            put(ks, bson_iter_key(&it), bson_iter_key_len(&it) + 1);
        if (encode_content(ks, ev, depth, err) != 0)
            return -1;
    }
    put_u8(ks, 0x00);
    return 0;
}

int
mf_ks_append_value(mf_keystring_t *ks, const bson_value_t *v, bool descending, mf_error_t *err)
{
    size_t start = ks->len, tbstart = ks->tblen;
    uint8_t tag = tag_of(v->value_type);

    if (tag == 0)
        return mf_err_set(err, MF_E_BadValue, "cannot index a value of BSON type %d", (int)v->value_type);
    put_u8(ks, tag);
    if (encode_content(ks, v, 0, err) != 0) {
        ks->len = start;
        ks->tblen = tbstart;
        return -1;
    }
    if (descending)
        for (size_t i = start; i < ks->len; i++)
            ks->data[i] ^= 0xFF;
    return 0;
}

void
mf_ks_append_minkey(mf_keystring_t *ks, bool descending)
{
    (void)descending;
    put_u8(ks, TAG_BOUND_MIN);
}

void
mf_ks_append_maxkey(mf_keystring_t *ks, bool descending)
{
    (void)descending;
    put_u8(ks, TAG_BOUND_MAX);
}

void
mf_ks_append_recordid(mf_keystring_t *ks, int64_t rid)
{
    put_be(ks, (uint64_t)rid, 8);
}

int64_t
mf_ks_read_recordid(const uint8_t *key, size_t len)
{
    uint64_t v = 0;

    if (len < 8)
        return 0;
    for (size_t i = len - 8; i < len; i++)
        v = (v << 8) | key[i];
    return (int64_t)v;
}

/* ---- decoding ---- */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    uint8_t mask; /* 0xFF while reading a descending component */
    const uint8_t *tb;
    size_t tblen, tbpos;
    bool typed;
    mf_error_t *err;
} reader_t;

static int
rd_u8(reader_t *r, uint8_t *out)
{
    *out = 0;
    if (r->pos >= r->len)
        return mf_err_set(r->err, MF_E_InvalidBSON, "truncated index key");
    *out = r->p[r->pos++] ^ r->mask;
    return 0;
}

static int
rd_be(reader_t *r, int nbytes, uint64_t *out)
{
    uint64_t v = 0;
    uint8_t b;

    for (int i = 0; i < nbytes; i++) {
        if (rd_u8(r, &b) != 0)
            return -1;
        v = (v << 8) | b;
    }
    *out = v;
    return 0;
}

static int
rd_bytes(reader_t *r, uint8_t *dst, size_t n)
{
    if (r->len - r->pos < n)
        return mf_err_set(r->err, MF_E_InvalidBSON, "truncated index key");
    for (size_t i = 0; i < n; i++)
        dst[i] = r->p[r->pos + i] ^ r->mask;
    r->pos += n;
    return 0;
}

/* rd_escaped: an escaped string into a malloc'd buffer (*out, *outlen); caller frees. */
static int
rd_escaped(reader_t *r, char **out, size_t *outlen)
{
    size_t cap = 16, n = 0;
    char *s = mf_malloc(cap);
    uint8_t b, c;

    if (s == NULL)
        return mf_err_set(r->err, MF_E_InternalError, "out of memory");
    for (;;) {
        if (rd_u8(r, &b) != 0)
            goto fail;
        if (b == 0) {
            if (rd_u8(r, &c) != 0)
                goto fail;
            if (c == 0)
                break;
            if (c != 0xFF) {
                mf_err_set(r->err, MF_E_InvalidBSON, "bad string escape in index key");
                goto fail;
            }
        }
        if (n + 2 > cap) {
            char *t;
            cap *= 2;
            t = mf_realloc(s, cap);
            if (t == NULL) {
                mf_err_set(r->err, MF_E_InternalError, "out of memory");
                goto fail;
            }
            s = t;
        }
        s[n++] = (char)b;
    }
    s[n] = '\0';
    *out = s;
    *outlen = n;
    return 0;
fail:
    free(s);
    return -1;
}

/* rd_cstring: a NUL-terminated string into a malloc'd buffer; caller frees. */
static int
rd_cstring(reader_t *r, char **out)
{
    size_t start = r->pos, n = 0;
    uint8_t b;
    char *s;

    do {
        if (rd_u8(r, &b) != 0)
            return -1;
        n++;
    } while (b != 0);
    s = mf_malloc(n);
    if (s == NULL)
        return mf_err_set(r->err, MF_E_InternalError, "out of memory");
    for (size_t i = 0; i < n; i++)
        s[i] = (char)(r->p[start + i] ^ r->mask);
    *out = s;
    return 0;
}

static int decode_content(reader_t *r, uint8_t tag, bson_t *out, const char *key, int keylen, int depth);

static int
decode_doc(reader_t *r, bson_t *out, bool is_array, int depth)
{
    uint32_t idx = 0;

    if (depth > KS_MAX_DEPTH)
        return mf_err_set(r->err, MF_E_Overflow, "index key nested too deeply");
    for (;;) {
        uint8_t tag;
        if (rd_u8(r, &tag) != 0)
            return -1;
        if (tag == 0)
            return 0;
        if (is_array) {
            char buf[16];
            const char *key;
            size_t kl = bson_uint32_to_string(idx++, &key, buf, sizeof buf);
            if (decode_content(r, tag, out, key, (int)kl, depth) != 0)
                return -1;
        } else {
            char *name;
            int rc;
            if (rd_cstring(r, &name) != 0)
                return -1;
            rc = decode_content(r, tag, out, name, -1, depth);
            free(name);
            if (rc != 0)
                return -1;
        }
    }
}

/* appended: turns a bson_append_* result into 0 / -1 with r->err. */
static int
appended(reader_t *r, bool ok)
{
    return ok ? 0 : mf_err_set(r->err, MF_E_InvalidBSON, "decoded index key value does not fit in a document");
}

static int
decode_number(reader_t *r, bson_t *out, const char *key, int keylen)
{
    uint64_t bits, sfx;
    double d;
    int delta8;

    if (rd_be(r, 8, &bits) != 0 || rd_be(r, 2, &sfx) != 0)
        return -1;
    d = unordered_double(bits);
    delta8 = (int)sfx - SUFFIX_EXACT;
    if ((delta8 & 7) == SUFFIX_FRAC_EXT) {
        /* A DECIMAL EXTENSION follows: the type bits (or the double) give the value. */
        if (r->len - r->pos < 16)
            return mf_err_set(r->err, MF_E_InvalidBSON, "truncated index key");
        r->pos += 16;
    }

    if (r->typed) {
        uint8_t t;
        if (r->tbpos >= r->tblen)
            return mf_err_set(r->err, MF_E_InvalidBSON, "index key type bits exhausted");
        t = r->tb[r->tbpos++];
        switch (t) {
        case TB_INT32:
            if (!(d >= INT32_MIN && d <= INT32_MAX) || delta8 != 0)
                return mf_err_set(r->err, MF_E_InvalidBSON, "bad int32 in index key");
            return appended(r, bson_append_int32(out, key, keylen, (int32_t)d));
        case TB_INT64:
            if (delta8 % 8 != 0 || isnan(d) || fabs(d) > 9.3e18)
                return mf_err_set(r->err, MF_E_InvalidBSON, "bad int64 in index key");
            return appended(r, bson_append_int64(out, key, keylen, (int64_t)((__int128)d + delta8 / 8)));
        case TB_DOUBLE:
            return appended(r, bson_append_double(out, key, keylen, d));
        case TB_NEGZERO:
            return appended(r, bson_append_double(out, key, keylen, -0.0));
        case TB_DECIMAL: {
            bson_decimal128_t dec;
            if (r->tblen - r->tbpos < 16)
                return mf_err_set(r->err, MF_E_InvalidBSON, "index key type bits truncated");
            memcpy(&dec.low, r->tb + r->tbpos, 8);
            memcpy(&dec.high, r->tb + r->tbpos + 8, 8);
            r->tbpos += 16;
            return appended(r, bson_append_decimal128(out, key, keylen, &dec));
        }
        default:
            return mf_err_set(r->err, MF_E_InvalidBSON, "bad index key type bits");
        }
    }

    /* Canonical type: int32, then int64, else double. */
    if (!isnan(d) && !isinf(d) && delta8 % 8 == 0 && floor(d) == d && fabs(d) < 1e19) {
        __int128 v = (__int128)d + delta8 / 8;
        if (v >= INT32_MIN && v <= INT32_MAX)
            return appended(r, bson_append_int32(out, key, keylen, (int32_t)v));
        if (v >= INT64_MIN && v <= INT64_MAX)
            return appended(r, bson_append_int64(out, key, keylen, (int64_t)v));
    }
    return appended(r, bson_append_double(out, key, keylen, d));
}

/* decode_content: the value whose tag was just read, appended to out under key. */
static int
decode_content(reader_t *r, uint8_t tag, bson_t *out, const char *key, int keylen, int depth)
{
    bool ok = true;

    switch (tag) {
    case TAG_MINKEY:
        ok = bson_append_minkey(out, key, keylen);
        break;
    case TAG_MAXKEY:
        ok = bson_append_maxkey(out, key, keylen);
        break;
    case TAG_UNDEFINED:
        ok = bson_append_undefined(out, key, keylen);
        break;
    case TAG_NULL:
        ok = bson_append_null(out, key, keylen);
        break;
    case TAG_NUMBER:
        return decode_number(r, out, key, keylen);
    case TAG_STRING:
    case TAG_CODE: {
        char *s;
        size_t n;
        if (rd_escaped(r, &s, &n) != 0)
            return -1;
        if (n > INT32_MAX - 1) {
            free(s);
            return mf_err_set(r->err, MF_E_InvalidBSON, "string too long in index key");
        }
        ok = tag == TAG_STRING ? bson_append_utf8(out, key, keylen, s, (int)n) : bson_append_code(out, key, keylen, s);
        free(s);
        break;
    }
    case TAG_OBJECT:
    case TAG_ARRAY: {
        bson_t child;
        int rc;
        if (tag == TAG_OBJECT)
            ok = bson_append_document_begin(out, key, keylen, &child);
        else
            ok = bson_append_array_begin(out, key, keylen, &child);
        if (!ok)
            break;
        rc = decode_doc(r, &child, tag == TAG_ARRAY, depth + 1);
        ok = tag == TAG_OBJECT ? bson_append_document_end(out, &child) : bson_append_array_end(out, &child);
        if (rc != 0)
            return -1;
        break;
    }
    case TAG_CODEWSCOPE: {
        char *s;
        size_t n;
        bson_t scope = BSON_INITIALIZER;
        if (rd_escaped(r, &s, &n) != 0)
            return -1;
        if (decode_doc(r, &scope, false, depth + 1) != 0) {
            free(s);
            bson_destroy(&scope);
            return -1;
        }
        ok = bson_append_code_with_scope(out, key, keylen, s, &scope);
        free(s);
        bson_destroy(&scope);
        break;
    }
    case TAG_BINDATA: {
        uint64_t n;
        uint8_t sub;
        uint8_t *b;
        if (rd_be(r, 4, &n) != 0 || rd_u8(r, &sub) != 0)
            return -1;
        if (r->len - r->pos < n)
            return mf_err_set(r->err, MF_E_InvalidBSON, "truncated index key");
        b = mf_malloc(n ? n : 1);
        if (b == NULL)
            return mf_err_set(r->err, MF_E_InternalError, "out of memory");
        (void)rd_bytes(r, b, n);
        ok = bson_append_binary(out, key, keylen, (bson_subtype_t)sub, b, (uint32_t)n);
        free(b);
        break;
    }
    case TAG_OID: {
        bson_oid_t oid;
        if (rd_bytes(r, oid.bytes, 12) != 0)
            return -1;
        ok = bson_append_oid(out, key, keylen, &oid);
        break;
    }
    case TAG_BOOL: {
        uint8_t b;
        if (rd_u8(r, &b) != 0)
            return -1;
        ok = bson_append_bool(out, key, keylen, b != 0);
        break;
    }
    case TAG_DATE: {
        uint64_t v;
        if (rd_be(r, 8, &v) != 0)
            return -1;
        ok = bson_append_date_time(out, key, keylen, (int64_t)(v ^ 0x8000000000000000ull));
        break;
    }
    case TAG_TIMESTAMP: {
        uint64_t t, i;
        if (rd_be(r, 4, &t) != 0 || rd_be(r, 4, &i) != 0)
            return -1;
        ok = bson_append_timestamp(out, key, keylen, (uint32_t)t, (uint32_t)i);
        break;
    }
    case TAG_REGEX: {
        char *pat, *opt;
        if (rd_cstring(r, &pat) != 0)
            return -1;
        if (rd_cstring(r, &opt) != 0) {
            free(pat);
            return -1;
        }
        ok = bson_append_regex(out, key, keylen, pat, opt);
        free(pat);
        free(opt);
        break;
    }
    case TAG_DBPOINTER: {
        uint64_t n;
        char *ns;
        bson_oid_t oid;
        if (rd_be(r, 4, &n) != 0)
            return -1;
        if (n < 1 || r->len - r->pos < n - 1 + 12)
            return mf_err_set(r->err, MF_E_InvalidBSON, "truncated index key");
        ns = mf_malloc(n);
        if (ns == NULL)
            return mf_err_set(r->err, MF_E_InternalError, "out of memory");
        (void)rd_bytes(r, (uint8_t *)ns, n - 1);
        ns[n - 1] = '\0';
        (void)rd_bytes(r, oid.bytes, 12);
        ok = bson_append_dbpointer(out, key, keylen, ns, &oid);
        free(ns);
        break;
    }
    default:
        return mf_err_set(r->err, MF_E_InvalidBSON, "unknown tag 0x%02x in index key", tag);
    }
    if (!ok)
        return mf_err_set(r->err, MF_E_InvalidBSON, "decoded index key value does not fit in a document");
    return 0;
}

/* Decodes n components from r into out; with whole, the key must end there (no record id). */
static int
decode_n(reader_t *r, const bool *directions, int n, bson_t *out, bool whole)
{
    for (int i = 0; i < n; i++) {
        char buf[16];
        const char *key;
        size_t kl = bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        uint8_t raw, tag;

        if (r->pos >= r->len)
            return mf_err_set(r->err, MF_E_InvalidBSON, "index key has fewer than %d components", n);
        raw = r->p[r->pos];
        if (raw == TAG_BOUND_MIN || raw == TAG_BOUND_MAX) {
            r->pos++;
            if (!(raw == TAG_BOUND_MIN ? bson_append_minkey(out, key, (int)kl) : bson_append_maxkey(out, key, (int)kl)))
                return mf_err_set(r->err, MF_E_InvalidBSON, "decoded index key does not fit in a document");
            continue;
        }
        r->mask = (directions != NULL && directions[i]) ? 0xFF : 0x00;
        if (rd_u8(r, &tag) != 0 || decode_content(r, tag, out, key, (int)kl, 0) != 0)
            return -1;
    }
    if (whole && r->pos != r->len)
        return mf_err_set(r->err, MF_E_InvalidBSON, "trailing bytes after the index key");
    return 0;
}

static int
decode_all(reader_t *r, const bool *directions, int n, bson_t *out)
{
    return decode_n(r, directions, n, out, true);
}

int
mf_ks_decode(const uint8_t *key, size_t len, const bool *directions, int n, bson_t *out, mf_error_t *err)
{
    reader_t r = {.p = key, .len = len, .err = err};

    return decode_all(&r, directions, n, out);
}

int
mf_ks_decode_typed(const uint8_t *key, size_t len, const uint8_t *tb, size_t tblen, const bool *directions, int n,
                   bson_t *out, mf_error_t *err)
{
    reader_t r = {.p = key, .len = len, .tb = tb, .tblen = tblen, .typed = true, .err = err};

    return decode_all(&r, directions, n, out);
}

int
mf_ks_decode_prefix(const uint8_t *key, size_t len, const uint8_t *tb, size_t tblen, const bool *directions, int n,
                    bson_t *out, size_t *used, mf_error_t *err)
{
    reader_t r = {.p = key, .len = len, .tb = tb, .tblen = tblen, .typed = tb != NULL, .err = err};

    *used = 0;
    if (decode_n(&r, directions, n, out, false) != 0)
        return -1;
    *used = r.pos;
    return 0;
}

void
mf_ks_date_key(int64_t ms, bool descending, uint8_t out[MF_KS_DATE_LEN])
{
    uint64_t u = (uint64_t)ms ^ 0x8000000000000000ull;
    out[0] = TAG_DATE;
    for (int i = 0; i < 8; i++)
        out[1 + i] = (uint8_t)(u >> (56 - 8 * i));
    if (descending) {
        for (int i = 0; i < MF_KS_DATE_LEN; i++)
            out[i] ^= 0xFF;
    }
}

bool
mf_ks_date_from_key(const uint8_t *key, size_t len, bool descending, int64_t *ms)
{
    uint8_t flip = descending ? 0xFF : 0x00;
    if (len < MF_KS_DATE_LEN || (uint8_t)(key[0] ^ flip) != TAG_DATE)
        return false;
    uint64_t u = 0;
    for (int i = 1; i < MF_KS_DATE_LEN; i++)
        u = (u << 8) | (uint8_t)(key[i] ^ flip);
    *ms = (int64_t)(u ^ 0x8000000000000000ull);
    return true;
}
