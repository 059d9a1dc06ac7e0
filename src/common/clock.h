/*
 * clock.h: the two clocks mayfly reads.
 *
 * Wall-clock time (CLOCK_REALTIME) is what TTL expiry, Dates and log stamps
 * are about; monotonic time (CLOCK_MONOTONIC) measures durations (uptime,
 * command time, pacing), unaffected by clock jumps. Inline: these are read on
 * hot paths.
 */
#ifndef MF_CLOCK_H
#define MF_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* mf_now_ms: wall-clock milliseconds since the Unix epoch. */
static inline int64_t
mf_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* mf_mono_ms: monotonic milliseconds (arbitrary origin). */
static inline int64_t
mf_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* mf_mono_us: monotonic microseconds (arbitrary origin). */
static inline int64_t
mf_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * mf_mono_at_us: the monotonic time us (an mf_mono_us value) as the absolute
 * timespec a CLOCK_MONOTONIC condition variable's timed wait wants.
 */
static inline struct timespec
mf_mono_at_us(int64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000};
    return ts;
}

/* The time on clock clk ms milliseconds from now, as an absolute timespec (mf_mono_deadline, mf_real_deadline). */
static inline struct timespec
mf_deadline_on(clockid_t clk, int64_t ms)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    int64_t ns = ts.tv_nsec + (ms % 1000) * 1000000;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    return ts;
}

/*
 * mf_mono_deadline: the monotonic time ms milliseconds from now, as the
 * absolute timespec pthread_cond_timedwait wants from a condition variable
 * whose clock is CLOCK_MONOTONIC (most waiting threads in mayfly use such
 * condvars, so wall-clock jumps never stall a wait).
 */
static inline struct timespec
mf_mono_deadline(int64_t ms)
{
    return mf_deadline_on(CLOCK_MONOTONIC, ms);
}

/*
 * mf_cond_init_mono: initialises *cv on CLOCK_MONOTONIC, the clock
 * mf_mono_deadline's timespecs are on (pthread_cond_destroy frees it).
 */
static inline void
mf_cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

/*
 * mf_real_deadline: the same on the wall clock, for the waits that can only
 * take one: pthread_mutex_timedlock, and condition variables left on the
 * default clock. Used for short slices (a wall-clock jump ends one early
 * or late by the jump, and the waiter then checks its own deadline).
 */
static inline struct timespec
mf_real_deadline(int64_t ms)
{
    return mf_deadline_on(CLOCK_REALTIME, ms);
}

#endif /* MF_CLOCK_H */
