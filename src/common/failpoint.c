/*
 * failpoint.c: the fail point registry (see failpoint.h).
 *
 * Each point has an atomic "on" flag read without a lock, and a mutex that
 * guards its mode, counter and data. Evaluating an "off" point is one
 * relaxed load. Evaluating an "on" point takes the mutex, runs the caller's
 * filter on the data, and only then applies the mode, so a filter that
 * declines (failCommand for a command it does not name) never uses up a
 * {times: n}. The random mode uses a per-registry xorshift generator under
 * the same mutex: no process-global state.
 */
#include "common/failpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"

enum fp_mode { FP_OFF, FP_ALWAYS, FP_TIMES, FP_SKIP, FP_RANDOM };

static const char *const fp_names[] = {"failCommand", "maxTimeAlwaysTimeOut", "hangTTLMonitorBetweenPasses",
                                       "ttlMonitorFailBatch", "hangTTLMonitorAfterReadAhead", "slowTTLDeleters",
                                       "hangTTLDeleterInBatch", "pauseTTLWriterBeforeNote",
                                       "failGetMoreAfterCursorCheckout", "hangWhileHoldingUserManagementLock",
                                       NULL};
#define NPOINTS (sizeof(fp_names) / sizeof(fp_names[0]) - 1)

struct mf_failpoint {
    const char *name;
    _Atomic bool on;
    pthread_mutex_t mu;
    enum fp_mode mode;
    int64_t n;       /* times left ({times}) or evaluations to let pass ({skip}) */
    double prob;     /* {activationProbability} */
    bson_t data;     /* always initialised */
    _Atomic int64_t entered;
    uint64_t *rng;   /* the registry's generator state */
};

struct mf_failpoints {
    mf_failpoint_t points[NPOINTS];
    uint64_t rng;
};

mf_failpoints_t *
mf_failpoints_new(void)
{
    mf_failpoints_t *reg = mf_calloc(1, sizeof(*reg));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    reg->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)reg;
    if (reg->rng == 0)
        reg->rng = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < NPOINTS; i++) {
        mf_failpoint_t *fp = &reg->points[i];
        fp->name = fp_names[i];
        pthread_mutex_init(&fp->mu, NULL);
        bson_init(&fp->data);
        fp->rng = &reg->rng;
    }
    return reg;
}

void
mf_failpoints_free(mf_failpoints_t *reg)
{
    if (reg == NULL)
        return;
    for (size_t i = 0; i < NPOINTS; i++) {
        pthread_mutex_destroy(&reg->points[i].mu);
        bson_destroy(&reg->points[i].data);
    }
    free(reg);
}

mf_failpoint_t *
mf_failpoint_find(mf_failpoints_t *reg, const char *name)
{
    if (reg == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < NPOINTS; i++)
        if (strcmp(reg->points[i].name, name) == 0)
            return &reg->points[i];
    return NULL;
}

/* Sets the mode under the point's mutex; data NULL means empty. Returns the count before. */
static int64_t
set_mode(mf_failpoint_t *fp, enum fp_mode mode, int64_t n, double prob, const bson_t *data)
{
    pthread_mutex_lock(&fp->mu);
    fp->mode = mode;
    fp->n = n;
    fp->prob = prob;
    bson_reinit(&fp->data);
    if (data != NULL)
        bson_concat(&fp->data, data);
    atomic_store(&fp->on, mode != FP_OFF && !(mode == FP_TIMES && n <= 0));
    int64_t before = atomic_load(&fp->entered);
    pthread_mutex_unlock(&fp->mu);
    return before;
}

/* An integer mode argument ({times: n} / {skip: n}) as mongod's bsonExtractIntegerField reads it. */
static int
mode_int(const bson_iter_t *it, const char *what, int64_t *out, mf_error_t *err)
{
    const bson_value_t *v = bson_iter_value((bson_iter_t *)it);
    double d;
    switch (v->value_type) {
    case BSON_TYPE_INT32: d = v->value.v_int32; break;
    case BSON_TYPE_INT64: d = (double)v->value.v_int64; break;
    case BSON_TYPE_DOUBLE: d = v->value.v_double; break;
    default:
        return mf_err_set(err, MF_E_TypeMismatch, "Expected field \"%s\" to have numeric type", what);
    }
    if (d != d || d != (double)(int64_t)d)
        return mf_err_set(err, MF_E_BadValue, "Expected field \"%s\" to have a value exactly representable as a 64-bit integer, but found %g.", what, d);
    if (d < 0)
        return mf_err_set(err, MF_E_BadValue, "'%s' option to 'mode' must be positive", what);
    if (d > 2147483647.0)
        return mf_err_set(err, MF_E_BadValue, "'%s' option to 'mode' is too large", what);
    *out = (int64_t)d;
    return 0;
}

int
mf_failpoint_configure(mf_failpoints_t *reg, const bson_t *cmd, int64_t *count, mf_error_t *err)
{
    bson_iter_t it, m;
    const char *name = NULL;
    enum fp_mode mode = FP_ALWAYS;
    int64_t n = 0;
    double prob = 0;
    bson_t data;
    bool have_data = false;

    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        name = bson_iter_utf8(&it, NULL);
    if (name == NULL)
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'configureFailPoint' is the wrong type, expected type 'string'");
    mf_failpoint_t *fp = mf_failpoint_find(reg, name);
    if (fp == NULL)
        return mf_err_set(err, MF_E_FailPointSetFailed, "%s not found", name);
    if (!bson_iter_init_find(&it, cmd, "mode"))
        return mf_err_set(err, MF_E_IllegalOperation, "When setting a failpoint, you must supply a 'mode'");
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        const char *s = bson_iter_utf8(&it, NULL);
        if (strcmp(s, "off") == 0)
            mode = FP_OFF;
        else if (strcmp(s, "alwaysOn") == 0)
            mode = FP_ALWAYS;
        else
            return mf_err_set(err, MF_E_BadValue, "unknown mode: %s", s);
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_recurse(&it, &m);
        if (bson_iter_find(&m, "times")) {
            mode = FP_TIMES;
            if (mode_int(&m, "times", &n, err) != 0)
                return -1;
        } else if (bson_iter_recurse(&it, &m) && bson_iter_find(&m, "skip")) {
            mode = FP_SKIP;
            if (mode_int(&m, "skip", &n, err) != 0)
                return -1;
        } else if (bson_iter_recurse(&it, &m) && bson_iter_find(&m, "activationProbability")) {
            mode = FP_RANDOM;
            if (!BSON_ITER_HOLDS_NUMBER(&m))
                return mf_err_set(err, MF_E_TypeMismatch,
                                  "the 'activationProbability' option to 'mode' must be a double between 0 and 1");
            prob = bson_iter_as_double(&m);
            if (!(prob >= 0 && prob <= 1))
                return mf_err_set(err, MF_E_BadValue, "activationProbability must be between 0.0 and 1.0; found %g", prob);
        } else {
            return mf_err_set(err, MF_E_BadValue,
                              "'mode' must be one of 'off', 'alwaysOn', '{times:n}', '{skip:n}' or '{activationProbability:p}'");
        }
    } else {
        return mf_err_set(err, MF_E_TypeMismatch, "'mode' must be a string or JSON object");
    }
    if (bson_iter_init_find(&it, cmd, "data")) {
        const uint8_t *d;
        uint32_t l;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_err_set(err, MF_E_TypeMismatch, "the 'data' option must be a JSON object");
        bson_iter_document(&it, &l, &d);
        if (!bson_init_static(&data, d, l))
            return mf_err_set(err, MF_E_InvalidBSON, "the 'data' option is not valid BSON");
        have_data = true;
    }
    *count = set_mode(fp, mode, n, prob, have_data ? &data : NULL);
    return 0;
}

/* xorshift64*: a uniform double in [0, 1). Caller holds a point's mutex. */
static double
next_random(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

bool
mf_failpoint_eval(mf_failpoint_t *fp, bool (*filter)(void *arg, const bson_t *data), void *arg, bson_t *data_out)
{
    bool fire = false;
    if (fp == NULL || !atomic_load_explicit(&fp->on, memory_order_relaxed))
        return false;
    pthread_mutex_lock(&fp->mu);
    if (!atomic_load(&fp->on) || (filter != NULL && !filter(arg, &fp->data)))
        goto done;
    switch (fp->mode) {
    case FP_ALWAYS: fire = true; break;
    case FP_TIMES:
        fire = fp->n > 0;
        if (--fp->n <= 0) {
            fp->mode = FP_OFF;
            atomic_store(&fp->on, false);
        }
        break;
    case FP_SKIP:
        if (fp->n > 0)
            fp->n--;
        else
            fire = true;
        break;
    case FP_RANDOM: fire = next_random(fp->rng) < fp->prob; break;
    case FP_OFF: break;
    }
    if (fire) {
        atomic_fetch_add(&fp->entered, 1);
        if (data_out != NULL)
            bson_copy_to(&fp->data, data_out);
    }
done:
    pthread_mutex_unlock(&fp->mu);
    return fire;
}

bool
mf_failpoint_on(const mf_failpoint_t *fp)
{
    return fp != NULL && atomic_load_explicit(&((mf_failpoint_t *)fp)->on, memory_order_relaxed);
}

int64_t
mf_failpoint_times_entered(mf_failpoint_t *fp)
{
    return fp != NULL ? atomic_load(&fp->entered) : 0;
}

void
mf_failpoint_set(mf_failpoint_t *fp, bool on, int64_t times, const bson_t *data)
{
    if (fp == NULL)
        return;
    (void)set_mode(fp, !on ? FP_OFF : times > 0 ? FP_TIMES : FP_ALWAYS, times, 0, data);
}
