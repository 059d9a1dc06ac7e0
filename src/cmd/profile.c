/*
 * profile.c: the `profile` command (the profiler itself is engine/profiler.c).
 *
 * {profile: level, slowms, sampleRate}: level 0 off, 1 operations slower
 * than slowms (sampled at sampleRate, which samples the slow-query log
 * too), 2 all, -1 only reads the settings; replies with the settings as
 * they were (was, slowms, sampleRate), as mongod does.
 */
#include "cmd/cmd.h"
#include "cmd/profile.h"
#include "doc/value.h"
#include "engine/profiler.h"
#include "common/log.h"

static int
cmd_profile(mf_op_t *op)
{
    bson_iter_t it;
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    const bson_value_t *v = bson_iter_value(&it);
    if (!mf_value_is_number(v))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'profile.profile' is the wrong type '%s', expected type 'int'",
                          mf_type_name(v->value_type));
    double dl = mf_value_as_double(v);
    if (!(dl >= -1 && dl <= 2))
        return mf_err_set(&op->err, MF_E_BadValue, "Bad profiling level: %g", dl);
    int64_t level = (int64_t)dl;
    mf_profiler_t *P = op->eng->profiler;
    int was = mf_profile_level(P, op->db);
    double rate = -1;
    /* Checked before anything changes (mongod 8.0). */
    if (mf_op_find(op, "sampleRate", &it)) {
        if (!mf_value_is_number(bson_iter_value(&it)))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field 'profile.sampleRate' is the wrong type '%s', expected type 'double'",
                              mf_type_name(bson_iter_type(&it)));
        rate = mf_value_as_double(bson_iter_value(&it));
        if (!(rate >= 0.0 && rate <= 1.0))
            return mf_err_set(&op->err, MF_E_BadValue, "'sampleRate' must be between 0.0 and 1.0 inclusive");
    }
    double ms = -1;
    if (mf_op_find(op, "slowms", &it) && mf_value_is_number(bson_iter_value(&it))) {
        ms = mf_value_as_double(bson_iter_value(&it));
        if (!(ms >= 0 && ms <= 2147483647.0))
            return mf_err_set(&op->err, MF_E_BadValue, "slowms must be between 0 and 2147483647");
    }
    /* The settings as they were, then the new ones take effect (mongod's reply). */
    int64_t old_ms = mf_profile_slowms(P);
    double old_rate = mf_profile_sample_rate(P);
    BSON_APPEND_INT32(op->reply, "was", was);
    BSON_APPEND_INT32(op->reply, "slowms", (int32_t)old_ms);
    BSON_APPEND_DOUBLE(op->reply, "sampleRate", old_rate);
    if (ms >= 0)
        (void)mf_profile_set_slowms(P, (int64_t)ms);
    if (rate >= 0)
        (void)mf_profile_set_sample_rate(P, rate);
    if (level >= 0)
        mf_profile_set_level(P, op->db, (int)level);
    if (level >= 0 || ms >= 0 || rate >= 0) {
        /* mongod logs every request that asks for a change, as id 48742. */
        char attr[256], ctx[32];
        snprintf(attr, sizeof(attr),
                 "{\"from\":{\"level\":%d,\"slowms\":%lld,\"sampleRate\":%g},"
                 "\"to\":{\"level\":%d,\"slowms\":%lld,\"sampleRate\":%g}}",
                 was, (long long)old_ms, old_rate, mf_profile_level(P, op->db), (long long)mf_profile_slowms(P),
                 mf_profile_sample_rate(P));
        snprintf(ctx, sizeof(ctx), "conn%lld", (long long)(op->client != NULL ? op->client->id : 0));
        mf_log_attr(MF_LOG_INFO, "COMMAND", 48742, ctx, "Profiler settings changed", attr);
    }
    return 0;
}

const mf_cmd_def_t mf_cmds_profile[] = {
    {"profile", cmd_profile, 0, NULL},
    {NULL, NULL, 0, NULL},
};
