/*
 * project.h: projections, for find and for aggregation's $project / $unset.
 *
 * Inclusion ({a: 1, "b.c": 1}), exclusion ({a: 0}), _id included unless
 * {_id: 0}, dotted paths (through arrays of documents as MongoDB does),
 * $slice (n, -n, [skip, n]), $elemMatch, the positional "a.$" form, and
 * (4.4+) expression values ({x: "$a", y: {$add: [...]}}), which make it an
 * inclusion projection. Mixing inclusion and exclusion (other than _id) →
 * 31254 / 31253 as MongoDB ("Cannot do exclusion on field b in inclusion
 * projection").
 */
#ifndef MF_PROJECT_H
#define MF_PROJECT_H

#include <bson/bson.h>

#include "common/error.h"
#include "doc/match.h"

typedef struct mf_projection mf_projection_t;

/* mf_projection_new: parses spec; NULL with err on a bad spec. No references kept into spec. */
mf_projection_t *mf_projection_new(const bson_t *spec, mf_error_t *err);
void mf_projection_free(mf_projection_t *p);

/*
 * mf_projection_new_agg: parses the projection of an aggregation stage
 * (stage is "$project" or "$unset", for messages): an empty spec is 51272;
 * a sub-document with one $-operator is an aggregation expression ($slice
 * included, not find's $slice); positional "a.$" is 31324; errors are
 * prefixed "Invalid <stage> :: caused by :: ". NULL with err on error.
 */
mf_projection_t *mf_projection_new_agg(const bson_t *spec, const char *stage, mf_error_t *err);

/*
 * mf_projection_new_add_fields: parses an $addFields / $set spec (stage
 * names it in messages): every value is an expression except a
 * sub-document of field names, which nests. mf_projection_apply then keeps
 * every field of the document and sets the named ones (in place, or
 * appended in spec order; through arrays element by element). NULL with err.
 */
mf_projection_t *mf_projection_new_add_fields(const bson_t *spec, const char *stage, mf_error_t *err);

/*
 * mf_projection_is_positional: true when p has a positional "a.$" part, which
 * needs the match details of the query against the document it projects
 * (mongod's requiresMatchDetails). False for NULL.
 */
bool mf_projection_is_positional(const mf_projection_t *p);

/*
 * mf_projection_reads: for an inclusion projection whose parts are
 * inclusions, expressions and an _id exclusion only, calls fn with every
 * path it reads from the document (each included path, the implicit _id,
 * each field path its expressions read, the first component of a path an
 * expression sets below the top level: mongod's getRequiredFields; the
 * string is valid during the call) and returns true; false when fn does, or
 * when p needs the whole document (an exclusion projection, $slice,
 * $elemMatch, positional, $meta, an expression reading $$ROOT).
 */
bool mf_projection_reads(const mf_projection_t *p, bool (*fn)(void *arg, const char *path), void *arg);

/* The {$meta: ...} kinds a find projection may name (bits 1 << kind in mf_projection_metas). */
enum {
    MF_PROJ_META_TEXT_SCORE = 0,
    MF_PROJ_META_RECORD_ID = 1,
    MF_PROJ_META_SORT_KEY = 2,
    MF_PROJ_META_GEO_DIST = 3,  /* "geoNearDistance": read from the hidden MF_GEO_DIST_FIELD (doc/match.h) */
    MF_PROJ_META_GEO_POINT = 4, /* "geoNearPoint": from MF_GEO_POINT_FIELD */
};

/*
 * mf_projection_metas: which {$meta: ...} kinds p names, as bits 1 <<
 * MF_PROJ_META_*: applying it needs the document's record id or sort key in
 * the match details for those. 0 for NULL.
 */
unsigned mf_projection_metas(const mf_projection_t *p);

/*
 * mf_projection_set_sort_key_source: the $sort whose key the expressions'
 * {$meta: "sortKey"} show (a pipeline $project / $addFields that follows a
 * $sort with only $match, $limit, $skip between, so it sees the documents
 * the $sort ordered, unchanged). s is borrowed: it must outlive p.
 */
typedef struct mf_sort mf_sort_t;
void mf_projection_set_sort_key_source(mf_projection_t *p, const mf_sort_t *s);

/*
 * mf_projection_apply: writes the projected doc into out, which the caller
 * has initialised (bson_init). details carries the matched array position for
 * "a.$" (may be NULL when the projection has no positional part).
 * Returns 0, or -1 with err.
 */
int mf_projection_apply(const mf_projection_t *p, const bson_t *doc, const mf_match_details_t *details,
                        bson_t *out, mf_error_t *err) MF_WUR;

#endif /* MF_PROJECT_H */
