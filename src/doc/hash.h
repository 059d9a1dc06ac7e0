/*
 * hash.h: MongoDB's BSONElementHasher::hash64 (hash.c has the layout): what
 * a hashed index stores for a value, and what $toHashedIndexKey,
 * convertShardKeyToHashed and _hashBSONElement answer.
 */
#ifndef MF_DOC_HASH_H
#define MF_DOC_HASH_H

#include <bson/bson.h>
#include <stdint.h>

#include "common/error.h"

/* mf_hash64: the hash of v with seed (0 for indexes). Returns 0 with *out set, or -1 with err (MD5 unavailable). */
int mf_hash64(const bson_value_t *v, int32_t seed, int64_t *out, mf_error_t *err) MF_WUR;

#endif
