/*
 * path.h: dotted field paths with MongoDB's array traversal.
 *
 * A path "a.b.c" applied to a document yields zero or more values. MongoDB's
 * rules (the ones a query matcher uses):
 *   - an embedded document is descended by field name;
 *   - an array met on the way is traversed: the rest of the path is applied to
 *     every element that is a document, and, if the next component is a
 *     decimal number, also to that element of the array by position;
 *   - the value reached at the end of the path is produced as is, and, when it
 *     is an array, the matcher also considers each element (implicit array
 *     traversal; that last step is the matcher's business, see mf_path_walk),
 *     unless an array's position gave it (mf_path_walk_whole).
 * Values handed to callbacks point into the document; they are valid only
 * while the document is.
 */
#ifndef MF_PATH_H
#define MF_PATH_H

#include <bson/bson.h>
#include "common/error.h"
#include <stdbool.h>
#include <stdint.h>

/*
 * Callback for mf_path_walk. v is the value reached (NULL when the path is
 * missing along a branch, so $exists:false / {$eq:null} can match).
 * array_pos is the position within the first array traversed on the way
 * (-1 if none), which the positional update operator "$" needs.
 * Return true to stop the walk early.
 */
typedef bool (*mf_path_visit_fn)(void *arg, const bson_value_t *v, int32_t array_pos);

/* mf_path_walk: applies path to doc as described above, calling visit per value. */
void mf_path_walk(const bson_t *doc, const char *path, mf_path_visit_fn visit, void *arg);

/*
 * mf_path_walk_whole: mf_path_walk for the matcher, whose visit also learns
 * whether the value was taken from an array by position at the path's last
 * component ("a.0" of {a: [[42]]} gives [42] so). mongod's matcher takes
 * such a value whole: an array there is not looked into, so {"a.0": 42}
 * does not match {a: [[42]]} while {"a.0": [42]} does
 * (jstests/core/match_numeric_components.js).
 */
typedef bool (*mf_path_visit_whole_fn)(void *arg, const bson_value_t *v, int32_t array_pos, bool whole);
void mf_path_walk_whole(const bson_t *doc, const char *path, mf_path_visit_whole_fn visit, void *arg);

/*
 * mf_path_walk_leaves: like mf_path_walk, but reports only present values,
 * and a value that is an array is reported element by element (an empty
 * array reports nothing). What distinct and TTL's "earliest date" need.
 * visit returns true to stop.
 */
typedef bool (*mf_path_leaf_fn)(void *arg, const bson_value_t *v);
void mf_path_walk_leaves(const bson_t *doc, const char *path, mf_path_leaf_fn visit, void *arg);

/*
 * mf_path_get: the value at path when it is reached without traversing any
 * array (plain descent through documents, or numeric components indexing
 * arrays). Returns false if absent. *out points into doc.
 */
bool mf_path_get(const bson_t *doc, const char *path, bson_value_t *out);

/*
 * mf_field_path_check: mongod's FieldPath rules for a field path a stage,
 * sort or projection names (not a query filter's path, which may hold
 * anything): 40352 empty, 40353 a trailing '.', 15998 an empty component,
 * 16410 a component starting with '$' other than the few mongod allows
 * ($id, $ref, $db and its metadata names). Returns 0, or -1 with err.
 */
int mf_field_path_check(const char *path, mf_error_t *err);

/*
 * mf_path_components: how many components a dotted path has (its dots plus
 * one). The code that applies a path spends a level of recursion or a node
 * on each, so callers bound it (MF_MAX_FIELD_PATH_COMPONENTS,
 * MF_MAX_STORED_DEPTH) before they build anything.
 */
size_t mf_path_components(const char *path);

#endif /* MF_PATH_H */
