/*
 * match.h: the query matcher (find/update/delete/count filters, $match).
 *
 * A filter is parsed once into a tree of match expressions; matching a document
 * walks the tree and never re-reads the filter BSON. Supported: implicit
 * equality, $eq $ne $gt $gte $lt $lte $in $nin $and $or $nor $not $exists
 * $type $all $elemMatch $size $regex (with $options, and /re/ values) $mod
 * $bitsAllSet $bitsAllClear $bitsAnySet $bitsAnyClear (a bitmask number,
 * BinData or a list of bit positions; numbers are tested only when they hold
 * a 64-bit integer, sign-extended, BinData little-endian and zero-extended)
 * $expr, $jsonSchema (query/jsonschema.h), $sampleRate, $comment (ignored),
 * the geo operators $geoWithin/$within $geoIntersects $near $nearSphere
 * (doc/geo.h; $near as a distance range, the order is the command's
 * business), dotted paths with array traversal, comparison
 * across numeric types. Unknown $operators are refused with 2 BadValue
 * ("unknown operator: $foo"); unknown top-level operators likewise
 * ("unknown top level operator: $foo. If you have a field name ..."). Operand
 * checks follow mongod's expression_parser.cpp: $size takes a non-negative
 * 32-bit whole number (2 "Failed to parse $size. ..."), $gt/$gte/$lt/$lte
 * refuse a regex (2), $expr is refused inside $elemMatch (2), $alwaysTrue /
 * $alwaysFalse take 1 (9), flags in both $regex and $options are 51075, or
 * 51074 when the regex comes after $options.
 */
#ifndef MF_MATCH_H
#define MF_MATCH_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/error.h"

typedef struct mf_matcher mf_matcher_t;

/*
 * The hidden last field that carries a $text query's score on each document
 * of an aggregation (doc/text.h); {$meta: "textScore"} reads it and the
 * command layer strips it from results.
 */
#define MF_TEXT_SCORE_FIELD "$__mf_textScore"

/*
 * The hidden fields that carry a $geoNear stage's metadata (the multiplied
 * distance and the location used) on each document it outputs, when the
 * pipeline or the find projection reads {$meta: "geoNearDistance" |
 * "geoNearPoint"} (query/agg_geo.h); stripped with the text score
 * (mf_text_strip_score).
 */
#define MF_GEO_DIST_FIELD "$__mf_geoNearDistance"
#define MF_GEO_POINT_FIELD "$__mf_geoNearPoint"

/* mf_hidden_meta_field: whether key is one of the hidden metadata fields above. */
static inline bool
mf_hidden_meta_field(const char *key)
{
    return key[0] == '$' && (strcmp(key, MF_TEXT_SCORE_FIELD) == 0 || strcmp(key, MF_GEO_DIST_FIELD) == 0 ||
                             strcmp(key, MF_GEO_POINT_FIELD) == 0);
}

/* What a successful match found out, for the positional update/projection "$". */
typedef struct mf_match_details {
    int32_t array_pos; /* position in the first array traversed by the matching predicate, -1 if none */
    bool has_text_score; /* a $text plan matched: text_score is the document's score (doc/text.h) */
    double text_score;
    /*
     * An index scan's visit: the key entry that led to the document (its
     * components only, no record id) and the index's key pattern, for
     * find's returnKey; NULL otherwise. Views valid during the visit only.
     */
    const uint8_t *index_key;
    size_t index_key_len;
    const bson_t *index_key_pattern;
    /*
     * A find projection's {$meta: "recordId"} and {$meta: "sortKey"}: the
     * document's record id, and its sort key as an array document (the
     * command layer's, valid during the projection); unset, the field is
     * left out, as mongod leaves out metadata a plan does not have.
     */
    bool has_record_id;
    int64_t record_id;
    const bson_t *sort_key;
} mf_match_details_t;

/* mf_match_opdoc_has_near: whether v, a filter field's value, is an operator document with $near or $nearSphere. */
bool mf_match_opdoc_has_near(const bson_value_t *v);

/*
 * mf_matcher_new: parses filter (NULL or empty matches everything). Returns
 * NULL and fills err on a bad filter. The matcher does not keep a reference
 * to filter's memory. Free with mf_matcher_free.
 */
mf_matcher_t *mf_matcher_new(const bson_t *filter, mf_error_t *err);

/*
 * mf_matcher_new_banned: mf_matcher_new for a filter parsed as mongod's
 * MatchExpressionParser with kBanAllSpecialFeatures (a partialFilterExpression):
 * $expr and $jsonSchema are 224 QueryFeatureNotAllowed, $where 2, $near,
 * $nearSphere and $geoNear 5626500. Freed with mf_matcher_free.
 */
mf_matcher_t *mf_matcher_new_banned(const bson_t *filter, mf_error_t *err);

/*
 * mf_matcher_new_text_false: as mf_matcher_new for a filter with $text
 * (not NULL), except that $text is false where mf_matcher_new's is true:
 * what a document the text search does not match must still satisfy to
 * match (a $text inside $or, query/plan.c). Freed with mf_matcher_free.
 */
mf_matcher_t *mf_matcher_new_text_false(const bson_t *filter, mf_error_t *err);
void mf_matcher_free(mf_matcher_t *m);

/*
 * mf_match_parse_long: mongod's BSONElement::parseIntegerElementToLong (and,
 * with non_negative, ...ToNonNegativeLong) for the element "name: v": a number
 * holding an exact 64-bit integer. Fails with 9 FailedToParse and mongod's
 * reason ("Expected a number in: $skip: \"x\""), prefixed by prefix.
 */
int mf_match_parse_long(const char *prefix, const char *name, const bson_value_t *v, bool non_negative,
                        int64_t *out, mf_error_t *err);

/*
 * mf_matcher_take_failure: true, with err (may be NULL) set, if an $expr
 * failed to evaluate on this thread (the match was then false) since the
 * last call; clears the failure. A query that matched documents fails with
 * it, as mongod's does; callers that only test (validators, partial
 * indexes) may ignore it, and the command dispatcher clears it first.
 */
bool mf_matcher_take_failure(mf_error_t *err);

/* mf_matcher_match: true if doc matches. details may be NULL. */
bool mf_matcher_match(const mf_matcher_t *m, const bson_t *doc, mf_match_details_t *details);

/*
 * mf_matcher_match_value: matches a single value as $elemMatch and $pull do:
 * the filter's top-level fields are applied to v when v is a document, and a
 * filter made only of operators ({$gt: 3}) is applied to v itself. Used by
 * update's $pull and arrayFilters.
 */
bool mf_matcher_match_value(const mf_matcher_t *m, const bson_value_t *v);

/*
 * mf_matcher_new_value: parses a filter meant for mf_matcher_match_value:
 * either a document of field conditions or an operator document ({$gte: 5}).
 */
mf_matcher_t *mf_matcher_new_value(const bson_value_t *filter, mf_error_t *err);

/*
 * mf_matcher_new_pull: mf_matcher_new_value for a $pull condition, parsed as
 * mongod's PullNode does (kBanAllSpecialFeatures): $expr and $jsonSchema are
 * refused with 224 QueryFeatureNotAllowed. A condition of fields ({x: 1},
 * {}) matches documents only, never an array element that is an array.
 */
mf_matcher_t *mf_matcher_new_pull(const bson_value_t *filter, mf_error_t *err);

/*
 * A read-only view of a parsed filter, for renderings of it (mongod's
 * MatchExpression::debugString in planner errors, query/plan_cq.c): the
 * matcher's tree as its parser built it, before matching-time preparation.
 * Nodes are borrowed from the matcher and valid while it lives. Walking is
 * for error paths: it costs the matcher nothing when unused.
 *
 * The tree is mongod's parse tree, with these differences a renderer
 * undoes: an operator document on a path ({a: {$gt: 1, $lt: 5}}) is an
 * $and of its operators (mongod adds them to the enclosing $and); $ne,
 * $nin, $exists: false and $not are a $not of the positive operator;
 * equalities on one path under an $or are already one $in (or_merged, and
 * when an $in branch was absorbed, the branches as parsed in orig); $all is
 * an $and of equalities / regexes / $elemMatch ($alwaysFalse when empty);
 * $text is ALWAYS_TRUE / ALWAYS_FALSE with text set; $sampleRate is
 * SAMPLE_RATE (or ALWAYS_FALSE / ALWAYS_TRUE at 0 / 1) with sample set.
 */
typedef struct mf_match_node mf_match_node_t;

typedef enum mf_match_kind {
    MF_MATCH_AND,
    MF_MATCH_OR,
    MF_MATCH_NOR,
    MF_MATCH_NOT,
    MF_MATCH_ALWAYS_TRUE,
    MF_MATCH_ALWAYS_FALSE,
    MF_MATCH_EXPR,
    MF_MATCH_JSON_SCHEMA,
    MF_MATCH_SAMPLE_RATE,
    MF_MATCH_EQ,
    MF_MATCH_LT,
    MF_MATCH_LTE,
    MF_MATCH_GT,
    MF_MATCH_GTE,
    MF_MATCH_IN,
    MF_MATCH_REGEX,
    MF_MATCH_TYPE,
    MF_MATCH_MOD,
    MF_MATCH_BITS_ALL_SET,
    MF_MATCH_BITS_ALL_CLEAR,
    MF_MATCH_BITS_ANY_SET,
    MF_MATCH_BITS_ANY_CLEAR,
    MF_MATCH_GEO,      /* $geoWithin / $within / $geoIntersects */
    MF_MATCH_GEO_NEAR, /* $near / $nearSphere */
    MF_MATCH_EXISTS,
    MF_MATCH_SIZE,
    MF_MATCH_ELEM_MATCH_OBJECT,
    MF_MATCH_ELEM_MATCH_VALUE,
} mf_match_kind_t;

/* One node as mf_match_node_view shows it; pointers borrowed from the matcher. */
typedef struct mf_match_view {
    mf_match_kind_t kind;
    const char *path; /* NULL: none, or the value under test (inside an $elemMatch value form) */
    /*
     * EQ, LT, LTE, GT, GTE: the operand. EXPR, JSON_SCHEMA, and a $text:
     * the operand as written. GEO, GEO_NEAR: the operator document
     * ({$geoWithin: ...}, {$near: ..., $maxDistance: ...}). BITS_* with a
     * BinData mask: the mask. NULL otherwise.
     */
    const bson_value_t *value;
    const bson_value_t *in_values; /* IN: the equalities, in BSON order without duplicates */
    size_t n_in_values;
    size_t n_in_regexes; /* IN: its regexes, read with mf_match_node_in_regex */
    bool or_merged;      /* IN: made of the equalities of $or branches on its path */
    size_t n_orig;       /* IN: the $or branches it was made of, when one was an $in (mf_match_node_orig) */
    const char *regex, *flags; /* REGEX */
    const int *types;          /* TYPE: libbson type codes (MinKey 0xFF, MaxKey 0x7F), as given */
    int ntypes;
    bool type_number;          /* TYPE: "number" was given */
    int64_t size;              /* SIZE */
    int64_t divisor, remainder; /* MOD */
    const uint32_t *bit_positions; /* BITS_* with a number or a list: the positions (as given, or the mask's set bits) */
    size_t n_bit_positions;
    bool text;                 /* ALWAYS_TRUE / ALWAYS_FALSE: a $text (value its operand) */
    bool sample;               /* SAMPLE_RATE, ALWAYS_TRUE / ALWAYS_FALSE: a $sampleRate of rate */
    double rate;
    double max_distance;       /* GEO_NEAR: $maxDistance, or -1 for none */
    bool near_sphere;          /* GEO_NEAR: $nearSphere */
    size_t nkids;              /* children (mf_match_node_kid) */
} mf_match_view_t;

/* mf_matcher_root: the root of m's parsed filter (an AND for a filter document). */
const mf_match_node_t *mf_matcher_root(const mf_matcher_t *m);

/* mf_match_node_view: fills *out with n's view. */
void mf_match_node_view(const mf_match_node_t *n, mf_match_view_t *out);

/* mf_match_node_kid: n's i-th child (i < nkids). */
const mf_match_node_t *mf_match_node_kid(const mf_match_node_t *n, size_t i);

/* mf_match_node_orig: an or-merged IN's i-th original $or branch (i < n_orig). */
const mf_match_node_t *mf_match_node_orig(const mf_match_node_t *n, size_t i);

/* mf_match_node_in_regex: an IN's i-th regex (i < n_in_regexes): its pattern and flags. */
void mf_match_node_in_regex(const mf_match_node_t *n, size_t i, const char **pattern, const char **flags);

/*
 * mf_matcher_failure_details: explains why doc does not match filter (a
 * collection validator), in the shape of MongoDB's errInfo.details:
 * {operatorName: "$jsonSchema", schemaRulesNotSatisfied: [...]} for a lone
 * $jsonSchema, {operatorName: "$type", specifiedAs, reason, consideredValue,
 * ...} for a lone clause, else {operatorName: "$and", clausesNotSatisfied:
 * [{index, details}, ...]}. Initialises out (the caller destroys it). Stays
 * near max_bytes by leaving out detail once the document grows past it.
 */
void mf_matcher_failure_details(const bson_t *filter, const bson_t *doc, bson_t *out, uint32_t max_bytes);

#endif /* MF_MATCH_H */
