/*
 * collation.h: MongoDB collations (locale-aware string comparison) on ICU.
 *
 * A collation document {locale, strength, caseLevel, caseFirst,
 * numericOrdering, alternate, maxVariable, normalization, backwards} is
 * parsed once into an mf_collation_t wrapping an ICU UCollator with those
 * attributes; {locale: "simple"} is the binary comparison and parses to
 * NULL. Errors are mongod's: 40414 for a missing locale, 14 for a wrong
 * type, 40415 for an unknown field, 2 for a locale ICU does not have or an
 * enumeration value it does not know, 51024 for a strength outside 1-5.
 *
 * Where a collation applies. Comparison of strings anywhere in the document
 * layer goes through mf_value_cmp (value.c), which asks
 * mf_collation_current(): the calling thread's collation, installed by the
 * command layer for the duration of a command (its "collation" argument,
 * else the collection's default) and by a write statement that names its
 * own. So matching, sorting, grouping, distinct, $min/$max and expression
 * comparisons all follow it without any interface change, as expr.c's
 * ambient variables do. Hashes that must agree with that equality
 * ($group keys, $addToSet sets) use mf_value_hash_string, which hashes the
 * collation's sort key. An index with a collation stores sort keys in place
 * of strings (index.c), so a unique index with strength 2 refuses "A" beside
 * "a"; the planner uses an index only for queries with the same collation.
 *
 * Thread safety: a collation is immutable once made, and ICU's comparison
 * and sort-key functions on a const collator are thread-safe, so one
 * collation (an index's) may be used by many threads at once.
 */
#ifndef MF_COLLATION_H
#define MF_COLLATION_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct mf_collation mf_collation_t;

/*
 * mf_collation_new: parses spec (a collation document). On success *out is
 * the collation (owned by the caller, mf_collation_free), or NULL for the
 * simple collation. field names the argument in messages ("collation").
 */
int mf_collation_new(const bson_t *spec, mf_collation_t **out, mf_error_t *err) MF_WUR;
/* mf_collation_from_value: as mf_collation_new, from a BSON value (14 if it is not a document). */
int mf_collation_from_value(const bson_value_t *v, mf_collation_t **out, mf_error_t *err) MF_WUR;
void mf_collation_free(mf_collation_t *c);

/* mf_collation_append_spec: appends the full normalised spec (every field, as listIndexes shows it) to doc. */
void mf_collation_append_spec(const mf_collation_t *c, bson_t *doc);

/* mf_collation_equal: same rules (NULL is simple). */
bool mf_collation_equal(const mf_collation_t *a, const mf_collation_t *b);

/* mf_collation_cmp: compares two UTF-8 strings under c (never NULL): <0, 0, >0. */
int mf_collation_cmp(const mf_collation_t *c, const char *a, size_t alen, const char *b, size_t blen);

/*
 * mf_collation_key: the sort key of s under c: bytes whose memcmp order is
 * the collation's order, with no zero byte inside. *buf (with *cap bytes,
 * grown with realloc as needed; the caller frees it) receives it; returns
 * its length.
 */
size_t mf_collation_key(const mf_collation_t *c, const char *s, size_t len, uint8_t **buf, size_t *cap);

/*
 * mf_collation_key_hex: s's sort key under c as mongod's duplicate key
 * errors show a collated index's string: "0x" and the key's bytes in
 * lower-case hex. Returns a new string (the caller frees it).
 */
char *mf_collation_key_hex(const mf_collation_t *c, const char *s, size_t len);

/* The calling thread's collation (NULL: simple) and its installation. */
const mf_collation_t *mf_collation_current(void);
void mf_collation_set_current(const mf_collation_t *c);

#endif /* MF_COLLATION_H */
