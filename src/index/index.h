/*
 * index.h: index key patterns and key generation.
 *
 * An index on key pattern {a: 1, "b.c": -1} produces, for a document, one or
 * more keys, each the keystring of the values at those paths (keystring.h).
 * A path that reaches an array produces one key per element (multikey); a
 * compound pattern where two paths reach arrays is refused with 171
 * CannotIndexParallelArrays. A missing field indexes as null; an empty array
 * as undefined. A sparse index skips documents missing every key field.
 */
#ifndef MF_INDEX_H
#define MF_INDEX_H

#include <bson/bson.h>
#include <stdbool.h>

#include "common/error.h"
#include "index/keystring.h"

#define MF_KP_MAX_FIELDS 32

typedef struct mf_keypattern {
    int nfields;
    char *fields[MF_KP_MAX_FIELDS]; /* owned */
    bool desc[MF_KP_MAX_FIELDS];
    /*
     * Geo fields ("2dsphere" / "2d" values, doc/geo.h's mf_geo_ix_t per
     * field, 0 for ordinary ones). A geo field's values are validated at
     * key generation (16755 for bad GeoJSON, 13026/13027 for 2d). The first
     * geo field gives one key per cell of its geometries' covering (int64
     * ids: mf_geo_doc_cells for 2dsphere, mf_geo_doc_cells_2d for 2d), so
     * the planner can bound it with a query region's covering
     * (mf_geo_cover / mf_geo_cover_2d; the matcher re-checks every
     * candidate); any other geo field gives one constant component and is
     * never bounded. Documents without a location are left
     * out, as mongod's 2dsphere version 2+ and 2d indexes do.
     */
    unsigned char geo[MF_KP_MAX_FIELDS];
    /* Per field, the multikey-paths bits of every component of its path (mf_path_mk_all). */
    uint32_t mk_all[MF_KP_MAX_FIELDS];
    bool has_geo;
    double geo_min, geo_max; /* a 2d index's coordinate range ("min", "max"; default [-180, 180]) */
    /*
     * The index's collation (doc/collation.h), owned, or NULL (simple): its
     * keys hold the collation's sort key in place of each string, so they
     * order and compare (unique) as the collation does.
     */
    struct mf_collation *collation;
    /*
     * A text index ({_fts: "text", _ftsx: 1}): is_text is set by
     * mf_keypattern_parse; text, owned, is the parsed spec (doc/text.h)
     * that whoever has the full index spec sets (the catalog). Its keys are
     * [term, score] per distinct term of the document.
     */
    bool is_text;
    struct mf_text_spec *text;
    /*
     * A hashed index ({a: "hashed"}, or compound with one hashed field
     * anywhere): has_hashed is set and hashed_field is that field's
     * position. Its key component is the NumberLong mf_hash64 (doc/hash.h) of the
     * field's value (under the index's collation); the other fields are
     * ordinary. An array anywhere on any of its paths is refused (16766),
     * so such an index is never multikey; a missing field is null (hashed
     * as null), and a sparse one skips documents missing every field.
     */
    bool has_hashed;
    int hashed_field;
    /*
     * The index's key format (index/keystring.c KEY FORMAT 1): true for an
     * index created before decimals were keyed exactly, whose catalog
     * entry has no keyFormat: 2 (the catalog sets it when it loads one).
     * Every key generated or bounded for the index uses it
     * (mf_index_ks_init; mf_index_keys and mf_index_keys_of_value set it on
     * the keyset).
     */
    bool legacy_decimals;
    /*
     * A wildcard index ({"$**": 1}, {"a.b.$**": -1}; index_wild.c): is_wildcard
     * is set, nfields is 2, fields[0] is "$_path" and fields[1] the key
     * pattern's field as given, and every key is [path string, value]
     * (desc[1] from the pattern's sign), one per leaf path the document has
     * under the index's projection. wild, owned, is that projection (the
     * subtree of "a.b.$**", or the spec's wildcardProjection, set by whoever
     * has the full spec through mf_keypattern_set_wildcard_projection).
     * A compound wildcard pattern ({a: 1, "$**": 1}) is not is_wildcard: its
     * fields are the regular ones only (the wildcard field is left out, so
     * its keys and bounds are a regular index's over those fields) and
     * wildcard_compound is set.
     */
    bool is_wildcard;
    bool wildcard_compound;
    struct mf_wildcard *wild;
} mf_keypattern_t;

/*
 * mf_index_append_component: appends one key component for v to ks, as
 * mf_ks_append_value does, but under coll (may be NULL) every string in v
 * is replaced by its collation sort key first (how a collation index's keys
 * and the bounds of queries on it are encoded).
 */
struct mf_collation;
int mf_index_append_component(mf_keystring_t *ks, const bson_value_t *v, bool desc, const struct mf_collation *coll,
                              mf_error_t *err) MF_WUR;

/* A set of generated keys (each an encoded keystring without record id). */
typedef struct mf_keyset {
    mf_keystring_t *keys;
    int n;
    int cap;
    bool legacy_decimals; /* the key format of the keys it hands out (set by the generator from its kp) */
} mf_keyset_t;

/* mf_index_ks_init: mf_ks_init for a key or bound of the index whose pattern is kp (its key format). */
static inline void
mf_index_ks_init(mf_keystring_t *ks, const mf_keypattern_t *kp)
{
    mf_ks_init(ks);
    ks->legacy_decimals = kp->legacy_decimals;
}

/*
 * mf_keypattern_parse: parses a key pattern document ({a: 1, b: -1}).
 * Numeric directions, the geo types "2dsphere" and "2d", "text" and
 * "hashed" are accepted here (other index types are refused by the caller
 * with 67; index_spec.c checks the rest of a hashed pattern, 31303). Returns 0 or
 * -1 with err.
 */
int mf_keypattern_parse(const bson_t *key, mf_keypattern_t *kp, mf_error_t *err) MF_WUR;
void mf_keypattern_destroy(mf_keypattern_t *kp);

/*
 * mf_keypattern_one_plain_field: whether kp is one ordinary field at the
 * top level ({at: 1}, {_id: -1}): not dotted, not text or geo. Its keys
 * come from that field's value alone (mf_index_keys_of_value).
 */
bool mf_keypattern_one_plain_field(const mf_keypattern_t *kp);

void mf_keyset_init(mf_keyset_t *ks);
void mf_keyset_destroy(mf_keyset_t *ks);

/*
 * mf_index_keys: generates doc's keys for kp into out (cleared first).
 * *skip is set true when a sparse index should hold no entry for doc.
 * *multikey is set true when more than one key came out of an array.
 * The keys come out sorted by their bytes, each once (of equal keys, the
 * first generated is kept). O(N log N) in the number of keys. Returns 0 or
 * -1 with err.
 */
int mf_index_keys(const mf_keypattern_t *kp, bool sparse, const bson_t *doc, mf_keyset_t *out, bool *skip,
                  bool *multikey, mf_error_t *err) MF_WUR;

/*
 * mf_index_multikey_paths: for each field i of kp, the components of its
 * path at which doc holds an array, as bits into mk[i] (bit p: the prefix
 * of p + 1 components; components past the 32nd share bit 31): mongod's
 * MultikeyPaths. Conservative, never less than key generation meets: every
 * array on the way is descended into, whatever the key generator does
 * with a positional component ("a.0.b"). A geo field whose value gives
 * several cells and every field of a wildcard index count as arrays at
 * every component (all bits). mk holds kp->nfields entries.
 */
void mf_index_multikey_paths(const mf_keypattern_t *kp, const bson_t *doc, uint32_t *mk);

/*
 * mf_path_mk_all: the multikey-paths bits (as mf_index_multikey_paths sets
 * them) of every component of dotted path: "a.b.c" gives 0b111; components
 * past the 32nd share bit 31.
 */
uint32_t mf_path_mk_all(const char *path);

/*
 * mf_index_keys_of_value: what mf_index_keys gives for a document whose
 * value under kp's one field is v, a value that is not an array (found
 * by the caller, who knows the document holds it and nothing else there),
 * without walking the document: one key, into out (cleared first).
 * Returns 0, -1 with err, or 1 when kp is not one plain field
 * (mf_keypattern_one_plain_field) and the caller must use mf_index_keys.
 */
int mf_index_keys_of_value(const mf_keypattern_t *kp, const bson_value_t *v, mf_keyset_t *out, mf_error_t *err) MF_WUR;

/* mf_keyset_contains: whether ks (as mf_index_keys left it: sorted) holds key's bytes; O(log n). */
bool mf_keyset_contains(const mf_keyset_t *ks, const mf_keystring_t *key);

/* mf_keyset_find: the key of ks (sorted) with key's bytes, or NULL; valid while ks is unchanged. */
const mf_keystring_t *mf_keyset_find(const mf_keyset_t *ks, const mf_keystring_t *key);

/*
 * mf_index_spec_key: points key at the key pattern of an index spec
 * ({v, key: {...}, name, ...}); false if the spec has no key document. key is
 * a static view valid while spec is.
 */
bool mf_index_spec_key(const bson_t *spec, bson_t *key);

/* The hash a hashed field's key holds is doc/hash.h's mf_hash64 (seed 0). */

/*
 * mf_index_hashed_component: the value a hashed field's key component holds
 * for v under coll (may be NULL): the NumberLong hash of v with every string
 * replaced by its collation sort key first, as mongod's getHashKeys. The
 * planner bounds an equality with it. Returns 0 or -1 with err.
 */
int mf_index_hashed_component(const bson_value_t *v, const struct mf_collation *coll, bson_value_t *out,
                              mf_error_t *err) MF_WUR;

struct mf_wildcard;
/* mf_wildcard_field_name: whether a key pattern field name is a wildcard field ("$**" or ending in ".$**"). */
bool mf_wildcard_field_name(const char *name);
/* mf_wildcard_free: frees a wildcard projection (NULL is fine). */
void mf_wildcard_free(struct mf_wildcard *w);

/*
 * mf_keypattern_set_wildcard_projection: replaces the projection of kp, a
 * wildcard pattern (is_wildcard), by its spec's wildcardProjection proj
 * (validated by createIndexes; NULL: the default, everything but _id).
 * Returns 0, or -1 with err (kp unchanged).
 */
int mf_keypattern_set_wildcard_projection(mf_keypattern_t *kp, const bson_t *proj, mf_error_t *err) MF_WUR;

/*
 * mf_wildcard_covers: whether every value a document has at path (dotted,
 * no positional or '$' components) is in kp's wildcard keys under that very
 * path: the path is inside the projection (not excluded, _id only when
 * projected). The planner bounds such a path's predicates in the index.
 */
bool mf_wildcard_covers(const mf_keypattern_t *kp, const char *path);

/*
 * mf_wildcard_append_path: appends the path component of a wildcard key
 * (the path as a string, never collated) to ks. Returns 0 or -1 with err.
 */
int mf_wildcard_append_path(mf_keystring_t *ks, const char *path, mf_error_t *err) MF_WUR;

/*
 * mf_keyset_push: appends an empty key to ks and returns it (valid until the
 * next push); for key generators outside index.c (index_wild.c).
 */
mf_keystring_t *mf_keyset_push(mf_keyset_t *ks);

/*
 * mf_wildcard_keys: appends doc's wildcard keys for kp (is_wildcard) to out,
 * unsorted (mf_index_keys sorts them); *multikey is set when an array was
 * traversed. Returns 0 or -1 with err.
 */
int mf_wildcard_keys(const mf_keypattern_t *kp, const bson_t *doc, mf_keyset_t *out, bool *multikey,
                     mf_error_t *err) MF_WUR;

/*
 * mf_index_key_of_value: the keystring of value v in kp's single-field
 * index (for _id lookups; its direction, key format and collation: under a
 * collation, strings the collation calls equal share a key).
 */
int mf_index_key_of_value(const mf_keypattern_t *kp, const bson_value_t *v, mf_keystring_t *out,
                          mf_error_t *err) MF_WUR;

#endif /* MF_INDEX_H */
