/*
 * agg_optimize.h: which part of a $match may move ahead of the stage before
 * it (internal to query/agg.c).
 *
 * mongod moves a $match, or the part of it that does not read what a stage
 * changes, in front of that stage (DocumentSource::pushMatchBefore with the
 * stage's getModifiedPaths, DocumentSourceMatch::splitMatchByModifiedFields,
 * expression::splitMatchExpressionBy). agg.c describes each stage's effect
 * as an mf_modpaths_t and asks mf_match_split how the filter divides; it
 * then reorders its stages. This module only reads and builds BSON. See
 * agg_optimize.c for the rules.
 */
#ifndef MF_AGG_OPTIMIZE_H
#define MF_AGG_OPTIMIZE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

/* The paths a stage changes, as mongod's DocumentSource::GetModPathsReturn. */
enum mf_mods_type {
    MF_MODS_ALL,        /* every path (or unknown): no $match moves ahead */
    MF_MODS_FINITE,     /* paths[] are changed, every other path is kept */
    MF_MODS_ALL_EXCEPT, /* paths[] (and the renamed names) are kept, every other path changes */
};

typedef struct mf_modpaths {
    enum mf_mods_type type;
    char **paths; /* owned */
    size_t npaths;
    char **ren_new, **ren_old; /* renames: output field ren_new[i] holds input field ren_old[i]; owned */
    size_t nren;
} mf_modpaths_t;

/* mf_modpaths_init: m describes a stage of the given type that changes (or keeps) nothing yet. */
void mf_modpaths_init(mf_modpaths_t *m, enum mf_mods_type type);
/* mf_modpaths_add: appends a copy of path to m's paths. */
void mf_modpaths_add(mf_modpaths_t *m, const char *path);
void mf_modpaths_free(mf_modpaths_t *m);

/*
 * mf_modpaths_from_projection: m describes a $project (is_add_fields false)
 * or an $addFields / $set (true) whose specification is spec, as mongod's
 * ProjectionExecutor::getModifiedPaths: an inclusion $project keeps its
 * included paths (and _id unless excluded), an exclusion one changes its
 * excluded paths, $addFields changes its computed paths; a field computed
 * as "$x" (one component, top level on both sides) is a rename
 * (ExpressionFieldPath::getComputedPaths). m must be uninitialised.
 */
void mf_modpaths_from_projection(mf_modpaths_t *m, const bson_t *spec, bool is_add_fields);

/*
 * mf_modpaths_from_group: m describes a $group whose _id is id, as
 * DocumentSourceGroupBase::getModifiedPaths: no path kept but the key's
 * "$x" parts, renamed (_id, or _id.<f> of an _id document, holds x). When
 * filter may not pass the $group (groupMatchSwapVerified: a $type on a key
 * field, an $exists on the key when it has one field, an $expr reading _id)
 * m changes every path. m must be uninitialised.
 */
void mf_modpaths_from_group(mf_modpaths_t *m, const bson_value_t *id, const bson_t *filter);

/* What mf_match_split found. */
enum mf_split {
    MF_SPLIT_NONE,  /* nothing moves */
    MF_SPLIT_WHOLE, /* the whole filter moves unchanged (nothing to rename) */
    MF_SPLIT_PARTS, /* *moved (renamed) moves ahead, *kept (NULL if nothing) stays */
};

/*
 * mf_match_split: divides filter as mongod's splitMatchExpressionBy with
 * isIndependentOf divides it before a stage that changes m. With
 * MF_SPLIT_PARTS the caller owns *moved and *kept (bson_destroy); they are
 * NULL otherwise. A filter with $text anywhere never moves
 * (DocumentSourceMatch::isTextQuery).
 */
enum mf_split mf_match_split(const bson_t *filter, const mf_modpaths_t *m, bson_t **moved, bson_t **kept);

/*
 * mf_match_descend: when every predicate of filter is on a path strictly
 * under prefix (no $expr, no $elemMatch, nothing but $and / $or / $nor /
 * $not around them), the filter with prefix and its dot taken off each
 * path, for the caller to destroy (DocumentSourceMatch::descendMatchOnPath,
 * as DocumentSourceLookUp::doOptimizeAt takes a $match into the $lookup
 * that unwinds prefix); NULL otherwise.
 */
bson_t *mf_match_descend(const bson_t *filter, const char *prefix);

/*
 * mf_match_redact_safe: the part of filter that a document before a $redact
 * must match if it matches after it (DocumentSourceMatch::redactSafePortion,
 * which DocumentSourceRedact::doOptimizeAt puts in a $match ahead of the
 * $redact): comparisons with scalars, $in of scalars, the scalar elements
 * of an $all, $type / $regex / $mod / $bits*, the safe part of an
 * $elemMatch, the safe children of an $and and an $or all of whose children
 * have one; never a null, array or document operand, $exists, $ne, $nin,
 * $size, $not, $nor, $expr, nor a path with a numeric component. NULL when
 * nothing is safe; else the caller's, to bson_destroy.
 */
bson_t *mf_match_redact_safe(const bson_t *filter);

/* mf_agg_is_operator_doc: v is a document whose first field is an operator ("$..."): an expression, not a nested spec. */
bool mf_agg_is_operator_doc(const bson_value_t *v);

#endif
