/*
 * cmd_hash.c: the hash of hashed indexes as commands.
 *
 * {_hashBSONElement: <value>, seed: <n>} is mongod's test-only HashCmd
 * (src/mongo/db/commands/hashcmd.cpp): it exists with enableTestCommands
 * and answers {key: <value>, seed: <int>, out: NumberLong}, the
 * BSONElementHasher::hash64 of the value (doc/hash.c); a seed that
 * is not a number is refused. jstests/core/hashtest*.js and
 * hash_function_invariance pin its outputs.
 *
 * {convertShardKeyToHashed: <value>} is mayfly's own: in MongoDB the name
 * is a shell helper (mongosh, shell_utils.cpp) computing the same hash on
 * the client, with no server command behind it. mayfly answers it as a
 * command too, {out: NumberLong}, with seed 0 (what a hashed index stores),
 * so applications and tests can ask the server which key a value gets.
 */
#include <string.h>

#include "cmd/cmd.h"
#include "doc/hash.h"
#include "doc/value.h"
#include "index/index.h"

/*
 * Reads the command's first value and the optional seed (a number,
 * truncated to an int32 as numberInt does). Returns 0, or -1 with op->err.
 * *v is a shallow copy whose data points into op->cmd.
 */
static int
hash_args(mf_op_t *op, bool seed_allowed, bson_value_t *v, int32_t *seed)
{
    bson_iter_t it;
    *seed = 0;
    if (!bson_iter_init(&it, op->cmd) || !bson_iter_next(&it))
        return mf_err_set(&op->err, MF_E_BadValue, "missing value to hash");
    *v = *bson_iter_value(&it); /* copied: the iterator moves on to seed */
    if (seed_allowed && mf_op_find(op, "seed", &it)) {
        if (!mf_value_is_number(bson_iter_value(&it)))
            return mf_err_set(&op->err, MF_E_BadValue, "seed must be a number");
        *seed = (int32_t)bson_iter_as_int64(&it);
    }
    return 0;
}

/* _hashBSONElement: {key, seed, out}, as mongod's HashCmd. */
int
mf_cmd_hash_bson_element(mf_op_t *op)
{
    bson_value_t v;
    int32_t seed;
    int64_t h;
    if (hash_args(op, true, &v, &seed) != 0 || mf_hash64(&v, seed, &h, &op->err) != 0)
        return -1;
    bson_append_value(op->reply, "key", -1, &v);
    BSON_APPEND_INT32(op->reply, "seed", seed);
    BSON_APPEND_INT64(op->reply, "out", h);
    return 0;
}

/* convertShardKeyToHashed: {out}, the hashed index key of the value. */
static int
cmd_convert_shard_key_to_hashed(mf_op_t *op)
{
    bson_value_t v;
    int32_t seed;
    int64_t h;
    if (hash_args(op, false, &v, &seed) != 0 || mf_hash64(&v, 0, &h, &op->err) != 0)
        return -1;
    BSON_APPEND_INT64(op->reply, "out", h);
    return 0;
}

static const char *const convert_fields[] = {NULL};

const mf_cmd_def_t mf_cmds_hash[] = {
    {"convertShardKeyToHashed", cmd_convert_shard_key_to_hashed, MF_CMD_NO_DB, convert_fields},
    {NULL, NULL, 0, NULL},
};
