/*
 * test_sched.c: common/sched.h, what the TTL monitor's pacing (SPEC D9)
 * asks of Linux's scheduler. A thread's slice request reads back as set;
 * the autogroup's nice value reads back as written, checked in a child that
 * leads a session of its own (so the test runner's group is never touched)
 * and against /proc read here independently; and a thread's times grow by
 * the CPU it used. Where the kernel lacks a feature (no autogroups, no
 * schedstat, slices older than 6.12) the test says so and checks what the
 * functions report instead. The machine's busy time (/proc/stat) grows by
 * at least the CPU this thread used; what other programs used is that less
 * the process's own, scaled when a host took ticks without reporting them
 * (mf_sched_others_ns, checked on figures, across the counters' wrap too).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/sched.h"

/* The group's nice value as /proc shows it, parsed here; -100 when there is none. */
static int
proc_group_nice(void)
{
    char buf[128] = {0};
    FILE *f = fopen("/proc/self/autogroup", "r");
    if (f == NULL)
        return -100;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strstr(buf, " nice ");
    return p != NULL ? atoi(p + 6) : -100;
}

/* Uses ns of this thread's CPU time. */
static void
spin(int64_t ns)
{
    struct timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    volatile uint64_t x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += (uint64_t)i * 2654435761u;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec) < ns);
}

Test(sched, a_slice_request_reads_back_and_is_put_back)
{
    uint64_t orig = 0, got = 0;
    cr_assert_eq(mf_sched_slice_set(8000000ULL, &orig), 0);
    cr_assert_eq(mf_sched_slice_set(3000000ULL, &got), 0);
    if (got == 0) {
        cr_log_info("this kernel reports no slice (before Linux 6.12): requests accepted and ignored");
    } else {
        cr_assert_eq(got, 8000000ULL, "the slice read back is the one asked for");
    }
    cr_assert_eq(mf_sched_slice_set(orig, NULL), 0);
}

Test(sched, the_group_nice_value_reads_back_as_written_in_a_session_of_its_own)
{
    int nice = -1;
    FILE *en = fopen("/proc/sys/kernel/sched_autogroup_enabled", "r");
    int enabled = en != NULL && fgetc(en) == '1';
    if (en != NULL)
        fclose(en);
    if (!enabled || access("/proc/self/autogroup", F_OK) != 0) {
        cr_log_info("no autogroups on this kernel");
        return;
    }
    /* A runner in the root group (started by init in no session of its own)
     * reads an empty file: no nice value, and none reported. */
    if (mf_sched_group_nice(&nice) != 0) {
        nice = -100;
        cr_assert_eq(proc_group_nice(), nice, "no nice value reported only when /proc shows none");
    } else
        cr_assert_eq(nice, proc_group_nice());
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* A new session is a new autogroup, at nice 0; the runner's stays as it is. */
        if (setsid() < 0)
            _exit(10);
        int n = -1;
        if (mf_sched_group_nice(&n) != 0 || n != 0)
            _exit(11);
        if (mf_sched_group_nice_set(7) != 0)
            _exit(12);
        if (mf_sched_group_nice(&n) != 0 || n != 7 || proc_group_nice() != 7)
            _exit(13);
        /* Out of range: refused, nothing changed. */
        if (mf_sched_group_nice_set(40) == 0 || proc_group_nice() != 7)
            _exit(14);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 0, "child step %d failed", WEXITSTATUS(st));
    cr_assert_eq(proc_group_nice(), nice, "the runner's own group is untouched");
}

Test(sched, a_threads_run_time_grows_by_the_cpu_it_used)
{
    int64_t run0 = -1, wait0 = -1, run1 = -1, wait1 = -1;
    if (mf_sched_thread_times(&run0, &wait0) != 0) {
        cr_assert_eq(run0, -1, "left untouched");
        cr_log_info("this kernel keeps no schedstat");
        return;
    }
    spin(30000000LL);
    cr_assert_eq(mf_sched_thread_times(&run1, &wait1), 0);
    cr_assert_geq(run1 - run0, 25000000, "30 ms of CPU used, %lld ns counted", (long long)(run1 - run0));
    cr_assert_geq(wait1, wait0, "waiting time never goes back");
}

Test(sched, the_machines_busy_time_grows_by_at_least_what_this_thread_used)
{
    mf_sched_sample_t a, b;
    cr_assert_eq(mf_sched_sample(&a), 0, "/proc/stat is readable");
    spin(100000000LL);
    cr_assert_eq(mf_sched_sample(&b), 0);
    /* 100 ms used here; /proc/stat counts clock ticks (10 ms), so allow two of them per CPU short. */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t slack = 2 * 10000000LL * online;
    cr_assert_geq((int64_t)(b.busy_ns - a.busy_ns), 100000000LL - slack, "busy time grew by %lld ns",
                  (long long)(b.busy_ns - a.busy_ns));
    cr_assert_geq(b.counted_ns - a.counted_ns, b.busy_ns - a.busy_ns, "what was accounted holds what was busy");
    cr_assert_gt(a.counted_ns, a.busy_ns, "since boot, idle time was accounted too");
    cr_assert_eq(b.ncpu, online, "/proc/stat lists the %ld online CPUs: %d", online, b.ncpu);
    cr_assert_eq(b.tick_ns, 1000000000LL / sysconf(_SC_CLK_TCK), "a clock tick");
    cr_assert_geq(b.own_ns - a.own_ns, 90000000LL, "the process's own time grew by the spin");
    cr_assert_geq(b.at_ns - a.at_ns, b.own_ns - a.own_ns - 5000000LL, "one thread's CPU within the wall time");
}

/* Samples 100 ms apart on 2 CPUs (200 ms of CPU time to account), as the TTL monitor's looks are. */
#define MS 1000000LL

static int64_t
others(uint64_t busy_ms, uint64_t counted_ms, int64_t own_ms, int64_t wall_ms, int ncpu)
{
    /* Large bases: since boot, summed over CPUs; the differences are what count. */
    mf_sched_sample_t from = {UINT64_C(1) << 62, (UINT64_C(1) << 62) + 5, ncpu, 123456789, 1000 * MS, 10 * MS};
    mf_sched_sample_t to = from;
    to.busy_ns += busy_ms * MS;
    to.counted_ns += counted_ms * MS;
    to.own_ns += own_ms * MS;
    to.at_ns += wall_ms * MS;
    return mf_sched_others_ns(&from, &to);
}

Test(sched, others_are_the_busy_time_less_the_process_own_when_every_tick_was_accounted)
{
    /* Four busy programs beside a server that used 40 ms: 160 ms was theirs. */
    cr_assert_eq(others(200, 200, 40, 100, 2), 160 * MS);
    /* A quiet machine: the server's own 60 ms is all that was busy. */
    cr_assert_eq(others(60, 200, 60, 100, 2), 0);
    /* A few ticks short (every field rounded down) or over: still the plain difference. */
    cr_assert_eq(others(170, 170, 40, 100, 2), 130 * MS, "3 ticks short of 20");
    cr_assert_eq(others(210, 210, 40, 100, 2), 170 * MS, "more than the interval");
    /* One CPU: 10 ticks in 100 ms, 3 short is still coarseness (an idle CPU's 100 ms once read 79). */
    cr_assert_eq(others(30, 70, 30, 100, 1), 0, "1 CPU, 3 ticks short");
    /* The counters wrapping past 2^64 (the unsigned difference) change nothing. */
    mf_sched_sample_t from = {UINT64_MAX - 50 * MS, UINT64_MAX - 50 * MS, 2, 0, 0, 10 * MS};
    mf_sched_sample_t to = {from.busy_ns + 200 * MS, from.counted_ns + 200 * MS, 2, 40 * MS, 100 * MS, 10 * MS};
    cr_assert_eq(mf_sched_others_ns(&from, &to), 160 * MS);
}

Test(sched, a_host_that_took_ticks_unreported_scales_the_process_own_time_down)
{
    /*
     * The host ran the machine's CPUs 60 % of the interval, reporting no
     * steal: /proc/stat accounted 120 ms, all busy, while the server's own
     * clock, which keeps running, counted 50 ms. Unscaled, the others would
     * be 70 ms (under 85 % of a CPU: a server beside busy programs would
     * lower its group); scaled, the server's share of the ticks is 30 ms
     * and the others' 90 ms.
     */
    cr_assert_eq(others(120, 120, 50, 100, 2), 90 * MS);
    /* Half the ticks lost on a machine where only the server ran: nothing of others. */
    cr_assert_eq(others(25, 100, 50, 100, 2), 0);
    /* Nothing accounted at all: nothing busy to take the process's time from. */
    cr_assert_eq(others(0, 0, 50, 100, 2), 0);
}

Test(sched, others_are_zero_without_an_interval)
{
    cr_assert_eq(others(100, 100, 10, 0, 2), 0);
    cr_assert_eq(others(100, 100, 10, -5, 2), 0, "samples out of order");
}
