/*
 * profile.c: the `profile` command (the profiler itself is engine/profiler.c).
 *
 * {profile: level, slowms, sampleRate}: level 0 off, 1 operations slower
 * than slowms (sampled at sampleRate, which samples the slow-query log
 * too), 2 all, -1 only reads the settings; replies with the settings as
 * they were (was, slowms, sampleRate, filter), as mongod does. `filter`
 * (a query, or "unset") is the database's profile filter: when set, it
 * decides what level 1 profiles and the slow query log shows, in place of
 * slowms and sampleRate (engine/profiler.c), and the reply adds mongod's
 * note saying so.
 */
#include "cmd/cmd.h"
#include "cmd/profile.h"
#include "doc/value.h"
#include "engine/profiler.h"
#include "common/log.h"

/* Appends {level, slowms, sampleRate, filter?} of a profiler state under name. */
static void
append_state(bson_t *attr, const char *name, int level, int64_t ms, double rate, const mf_profile_filter_t *f)
{
    bson_t s;
    BSON_APPEND_DOCUMENT_BEGIN(attr, name, &s);
    BSON_APPEND_INT32(&s, "level", level);
    BSON_APPEND_INT32(&s, "slowms", (int32_t)ms);
    BSON_APPEND_DOUBLE(&s, "sampleRate", rate);
    if (f != NULL)
        BSON_APPEND_DOCUMENT(&s, "filter", mf_profile_filter_spec(f));
    bson_append_document_end(attr, &s);
}

/* mongod logs every profile request that asks for a change, as id 48742: the settings before and after. */
static void
log_change(mf_op_t *op, int was, int64_t old_ms, double old_rate, const mf_profile_filter_t *old_filter)
{
    mf_profiler_t *P = op->eng->profiler;
    mf_profile_filter_t *now = mf_profile_filter_get(P, op->db);
    bson_t attr;
    char ctx[32];
    bson_init(&attr);
    append_state(&attr, "from", was, old_ms, old_rate, old_filter);
    append_state(&attr, "to", mf_profile_level(P, op->db), mf_profile_slowms(P), mf_profile_sample_rate(P), now);
    mf_profile_filter_release(now);
    char *json = bson_as_relaxed_extended_json(&attr, NULL);
    snprintf(ctx, sizeof(ctx), "conn%lld", (long long)(op->client != NULL ? op->client->id : 0));
    if (json != NULL)
        mf_log_attr(MF_LOG_INFO, "COMMAND", 48742, ctx, "Profiler settings changed", json);
    bson_free(json);
    bson_destroy(&attr);
}

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
    /* filter: a query (compiled now: a bad one changes nothing), or "unset". */
    bool set_filter = false, filter_doc = false;
    bson_t filter;
    if (mf_op_find(op, "filter", &it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const bson_value_t *fv = bson_iter_value(&it);
            if (!bson_init_static(&filter, fv->value.v_doc.data, fv->value.v_doc.data_len))
                return mf_err_set(&op->err, MF_E_BadValue, "Expected an object, or the string 'unset'.");
            filter_doc = true;
        } else if (!(BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "unset") == 0)) {
            return mf_err_set(&op->err, MF_E_BadValue, "Expected an object, or the string 'unset'.");
        }
        set_filter = true;
    }
    /* The settings as they were, then the new ones take effect (mongod's reply). */
    int64_t old_ms = mf_profile_slowms(P);
    double old_rate = mf_profile_sample_rate(P);
    mf_profile_filter_t *old_filter = mf_profile_filter_get(P, op->db);
    if (set_filter &&
        mf_profile_set_filter(P, op->db, filter_doc ? &filter : NULL, &op->err) != 0) {
        mf_profile_filter_release(old_filter);
        return -1;
    }
    BSON_APPEND_INT32(op->reply, "was", was);
    BSON_APPEND_INT32(op->reply, "slowms", (int32_t)old_ms);
    BSON_APPEND_DOUBLE(op->reply, "sampleRate", old_rate);
    if (old_filter != NULL)
        BSON_APPEND_DOCUMENT(op->reply, "filter", mf_profile_filter_spec(old_filter));
    if (old_filter != NULL || set_filter)
        BSON_APPEND_UTF8(op->reply, "note",
                         "When a filter expression is set, slowms and sampleRate are not used for profiling and "
                         "slow-query log lines.");
    if (ms >= 0)
        (void)mf_profile_set_slowms(P, (int64_t)ms);
    if (rate >= 0)
        (void)mf_profile_set_sample_rate(P, rate);
    if (level >= 0)
        mf_profile_set_level(P, op->db, (int)level);
    if (level >= 0 || ms >= 0 || rate >= 0 || set_filter)
        log_change(op, was, old_ms, old_rate, old_filter);
    mf_profile_filter_release(old_filter);
    return 0;
}

const mf_cmd_def_t mf_cmds_profile[] = {
    {"profile", cmd_profile, 0, NULL},
    {NULL, NULL, 0, NULL},
};
