/*
 * keystring.h: order-preserving binary encoding of index keys.
 *
 * An index key (one or more BSON values, each with a direction) is encoded so
 * that memcmp() of two encodings orders them exactly as MongoDB orders the
 * keys: canonical type rank first (MinKey < Null < numbers < strings < objects
 * < arrays < BinData < ObjectId < Boolean < Date < Timestamp < Regex <
 * MaxKey), numbers of every type by value (int32 5 == int64 5 == double 5.0),
 * and a descending field inverting its bytes. WiredTiger's default collator
 * (memcmp) then orders the index table. The file header of keystring.c lays
 * out the format as a table. A record id can be appended after the key so that
 * equal keys sort by record id and every index entry is unique in its table.
 */
#ifndef MF_KEYSTRING_H
#define MF_KEYSTRING_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct mf_keystring {
    uint8_t *data; /* owned */
    size_t len;
    size_t cap;
    /* Type bits: the numeric types of the values encoded so far (see
     * mf_ks_typebits); owned, reset with the key. */
    uint8_t *tb;
    size_t tblen;
    size_t tbcap;
    /*
     * The key format of the index the key is for (kept by mf_ks_reset):
     * false (what mf_ks_init and zeroed memory give) orders decimals
     * exactly (format 2); true encodes them as an index written before
     * format 2 holds them (format 1: decimals that share their double and
     * residual's floor tie). Keys meant for one index must all use its
     * format (mf_keypattern_t.legacy_decimals).
     */
    bool legacy_decimals;
} mf_keystring_t;

void mf_ks_init(mf_keystring_t *ks);
void mf_ks_destroy(mf_keystring_t *ks);
void mf_ks_reset(mf_keystring_t *ks); /* len = 0, keeps the buffer */

/*
 * mf_ks_append_value: appends one key component. descending inverts it.
 * Returns 0, or -1 with err (e.g. nesting too deep).
 */
int mf_ks_append_value(mf_keystring_t *ks, const bson_value_t *v, bool descending, mf_error_t *err) MF_WUR;

/*
 * mf_ks_append_minkey / maxkey: bound components that sort below / above
 * every value in that position (used for range bounds). Byte-wise: a raw 0x00
 * / 0xFF whatever the direction, so minkey is always the low end of a memcmp
 * range and maxkey the high end, even on a descending field. They decode as
 * MinKey / MaxKey.
 */
void mf_ks_append_minkey(mf_keystring_t *ks, bool descending);
void mf_ks_append_maxkey(mf_keystring_t *ks, bool descending);

/* mf_ks_append_recordid: appends a record id (int64 > 0), fixed 8 bytes big-endian. */
void mf_ks_append_recordid(mf_keystring_t *ks, int64_t rid);

/*
 * Dates as a single-field key (the TTL monitor's ranges). Every Date key of
 * an index lies in one contiguous range, the tag followed by the
 * sign-flipped big-endian milliseconds, MF_KS_DATE_LEN bytes; descending
 * keys are the bytes inverted. mf_ks_date_key writes the key of ms;
 * mf_ks_date_from_key reads the Date at the start of key (false if the key
 * does not start with a Date).
 */
#define MF_KS_DATE_LEN 9
void mf_ks_date_key(int64_t ms, bool descending, uint8_t out[MF_KS_DATE_LEN]);
bool mf_ks_date_from_key(const uint8_t *key, size_t len, bool descending, int64_t *ms);

/* mf_ks_read_recordid: the record id in the last 8 bytes of an encoded key of len bytes. */
int64_t mf_ks_read_recordid(const uint8_t *key, size_t len);

/*
 * mf_ks_decode: decodes an encoding produced by mf_ks_append_value calls
 * (without a record id) back into values, appended to out as fields "0",
 * "1", ... . directions[i] says whether component i was descending; n is the
 * number of components. Numbers come back as the type they were encoded from
 * where the format keeps it (see keystring.c). Returns 0 or -1 with err.
 */
int mf_ks_decode(const uint8_t *key, size_t len, const bool *directions, int n, bson_t *out, mf_error_t *err) MF_WUR;

/*
 * Equal numbers of different types (5, NumberLong(5), 5.0) encode to the same
 * key bytes, so mf_ks_decode returns numbers in a canonical type (int32 if
 * integral and in range, else int64 if integral and in range, else double).
 * For exact types, keep the type bits recorded while encoding:
 * mf_ks_typebits returns them (a view into ks, valid until ks changes; may be
 * NULL when *len is 0), and mf_ks_decode_typed decodes with them exactly
 * (int32 / int64 / double / -0.0 / decimal128).
 */
const uint8_t *mf_ks_typebits(const mf_keystring_t *ks, size_t *len);
int mf_ks_decode_typed(const uint8_t *key, size_t len, const uint8_t *tb, size_t tblen, const bool *directions, int n,
                       bson_t *out, mf_error_t *err) MF_WUR;

/*
 * mf_ks_decode_prefix: decodes the first n components of key (len bytes,
 * which may go on with more components and a record id) into out as
 * mf_ks_decode_typed does (tb NULL: as mf_ks_decode), and sets *used to the
 * bytes they take: every key starting with those bytes has the same first
 * n components (a DISTINCT_SCAN seeks past them). Returns 0 or -1 with err.
 */
int mf_ks_decode_prefix(const uint8_t *key, size_t len, const uint8_t *tb, size_t tblen, const bool *directions, int n,
                        bson_t *out, size_t *used, mf_error_t *err) MF_WUR;

#endif /* MF_KEYSTRING_H */
