/*
 * update.h: update documents (replacement and operators).
 *
 * An update is parsed once and applied to each matched document. Operators:
 * $set $unset $inc $mul $min $max $rename $push ($each $slice $sort
 * $position) $addToSet ($each) $pull $pullAll $pop $currentDate (true,
 * {$type: "date"}, {$type: "timestamp"}) $setOnInsert $bit (and / or / xor
 * with int32 / int64 operands on int32 / int64 values, a missing field
 * starting from int32 0, int64 if either side is), positional "$", "$[]"
 * and "$[name]" with arrayFilters. Errors follow MongoDB: conflicting paths →
 * 40 ConflictingUpdateOperators (also when "$" or array filters make two
 * paths reach one array element), unknown operator → 9 FailedToParse
 * ("Unknown modifier: $foo. Expected a valid update modifier or pipeline-style
 * update specified as an array"), $inc of a non-number → 14 TypeMismatch,
 * changing _id → 66 ImmutableField, a bad $bit operand or a $bit on a
 * non-integer → 2 BadValue, $expr / $jsonSchema in a $pull condition → 224, a path through a non-container → 28
 * PathNotViable, dotted / $-prefixed field names in a replacement → 52/57...
 * A replacement document may not contain update operators and vice versa.
 */
#ifndef MF_UPDATE_H
#define MF_UPDATE_H

#include <bson/bson.h>
#include "doc/check.h"
#include <stdbool.h>

#include "common/error.h"
#include "doc/match.h"

typedef struct mf_update mf_update_t;

/*
 * mf_update_new: parses update (a replacement document or a document of
 * operators) with optional array_filters (an array value, or NULL). Returns
 * NULL and fills err when invalid. Keeps no references into its arguments.
 */
mf_update_t *mf_update_new(const bson_t *update, const bson_value_t *array_filters, mf_error_t *err);
void mf_update_free(mf_update_t *u);

/* mf_update_is_replacement: true when the update is a whole-document replacement. */
bool mf_update_is_replacement(const mf_update_t *u);

/*
 * mf_update_set_clock: the server's clock for u (tick(arg) any number of
 * times, from any thread applying u): $currentDate's timestamps take it,
 * and, when fill_empty, a replacement's top-level Timestamp(0, 0) fields
 * (not _id) are filled from it now, once for every document it replaces,
 * as mongod's ObjectReplaceExecutor fills them.
 */
void mf_update_set_clock(mf_update_t *u, mf_ts_tick_fn tick, void *arg, bool fill_empty);

/*
 * mf_update_apply: applies u to doc, writing the new document into out
 * (initialised by the caller with bson_init). details gives the array
 * position the query matched (for "$"), may be NULL. is_insert is true for an
 * upsert's insert (only then does $setOnInsert apply). A replacement keeps
 * doc's _id (and fails with 66 if it names a different one). Field order
 * follows MongoDB: existing fields keep their place, new fields are appended.
 * *changed is set false when the result equals doc (nModified counts only
 * changed documents). Returns 0, or -1 with err.
 */
int mf_update_apply(const mf_update_t *u, const bson_t *doc, const mf_match_details_t *details, bool is_insert,
                    bson_t *out, bool *changed, mf_error_t *err) MF_WUR;

/*
 * mf_update_upsert_seed: the document an upsert starts from: the equality
 * conditions of query ({a: 1, "b.c": 2, $and: [{d: 3}]} → {a: 1, b: {c: 2}, d: 3};
 * operators other than $eq, a one-value $in, $and and a one-clause $or are
 * skipped). id_only (a replacement upsert): only the _id equality is taken,
 * and one on a path under _id is 111. out is initialised by the caller.
 * Returns 0, or -1 with err.
 */
int mf_update_upsert_seed(const bson_t *query, bool id_only, bson_t *out, mf_error_t *err) MF_WUR;

#endif /* MF_UPDATE_H */
