/*
 * sort.h: sort specifications ({a: 1, "b.c": -1}).
 *
 * MongoDB's sort key for a path that reaches arrays is the smallest element
 * (ascending) or the largest (descending); a missing field sorts as null.
 * Values compare in the canonical order of value.h.
 */
#ifndef MF_SORT_H
#define MF_SORT_H

#include <bson/bson.h>

#include "common/error.h"

typedef struct mf_sort mf_sort_t;

/*
 * mf_sort_new: parses spec; each value must be 1 or -1 (any numeric type),
 * or {$meta: "textScore"} (the text score, highest first; any other
 * document is 2 "Illegal key in $sort specification"). Bad specs → 2 BadValue
 * ("$sort key ordering must be 1 (for ascending) or -1 (for descending)").
 * An empty spec is allowed and sorts nothing. Does not keep references into spec.
 */
mf_sort_t *mf_sort_new(const bson_t *spec, mf_error_t *err);
void mf_sort_free(mf_sort_t *s);

/* mf_sort_uses_text_score: whether a key is {$meta: "textScore"} (read from MF_TEXT_SCORE_FIELD, descending). */
bool mf_sort_uses_text_score(const mf_sort_t *s);

/* mf_sort_uses_geo_distance: whether a key is {$meta: "geoNearDistance"} (read from MF_GEO_DIST_FIELD, descending). */
bool mf_sort_uses_geo_distance(const mf_sort_t *s);

/* mf_sort_cmp: <0, 0, >0 as document a sorts before, with, after b. */
int mf_sort_cmp(const mf_sort_t *s, const bson_t *a, const bson_t *b);

/* mf_sort_docs: stable sort of an array of document pointers in place. */
void mf_sort_docs(const mf_sort_t *s, bson_t **docs, size_t n);

/*
 * mf_sort_key_append: appends doc's sort key under s to arr (an array being
 * built), one element per sort field: what find's {$meta: "sortKey"} shows.
 */
void mf_sort_key_append(const mf_sort_t *s, const bson_t *doc, bson_t *arr);

#endif /* MF_SORT_H */
