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
 * (mf_sched_others_ns, checked on figures).
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
    int64_t b0 = -1, b1 = -1, c0 = -1, c1 = -1;
    cr_assert_eq(mf_sched_busy_ns(&b0, &c0), 0, "/proc/stat is readable");
    spin(100000000LL);
    cr_assert_eq(mf_sched_busy_ns(&b1, NULL), 0, "the accounted time is optional");
    cr_assert_eq(mf_sched_busy_ns(&b1, &c1), 0);
    /* 100 ms used here; /proc/stat counts clock ticks (10 ms), so allow two of them per CPU short. */
    int64_t slack = 2 * 10000000LL * sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_geq(b1 - b0, 100000000LL - slack, "busy time grew by %lld ns", (long long)(b1 - b0));
    cr_assert_geq(c1 - c0, b1 - b0, "what was accounted holds what was busy: %lld of %lld ns", (long long)(b1 - b0),
                  (long long)(c1 - c0));
    cr_assert_gt(c0, b0, "since boot, idle time was accounted too");
}

/* 100 ms on 2 CPUs: 200 ms of CPU time to account. */
#define WALL 100000000LL
#define MS 1000000LL

Test(sched, others_are_the_busy_time_less_the_process_own_when_every_tick_was_accounted)
{
    /* Four busy programs beside a server that used 40 ms: 160 ms was theirs. */
    cr_assert_eq(mf_sched_others_ns(200 * MS, 200 * MS, 40 * MS, WALL, 2), 160 * MS);
    /* A quiet machine: the server's own 60 ms is all that was busy. */
    cr_assert_eq(mf_sched_others_ns(60 * MS, 200 * MS, 60 * MS, WALL, 2), 0);
    /* A tick or two short or over (coarse ticks): still the plain difference. */
    cr_assert_eq(mf_sched_others_ns(180 * MS, 180 * MS, 40 * MS, WALL, 2), 140 * MS, "90 %% accounted");
    cr_assert_eq(mf_sched_others_ns(210 * MS, 210 * MS, 40 * MS, WALL, 2), 170 * MS, "more than the interval");
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
    cr_assert_eq(mf_sched_others_ns(120 * MS, 120 * MS, 50 * MS, WALL, 2), 90 * MS);
    /* Half the ticks lost on an idle machine besides the server: nothing of others. */
    cr_assert_eq(mf_sched_others_ns(25 * MS, 100 * MS, 50 * MS, WALL, 2), 0);
    /* Nothing accounted at all: nothing busy to take the process's time from. */
    cr_assert_eq(mf_sched_others_ns(0, 0, 50 * MS, WALL, 2), 0);
}

Test(sched, others_are_zero_without_an_interval_or_cpus)
{
    cr_assert_eq(mf_sched_others_ns(100 * MS, 100 * MS, 10 * MS, 0, 2), 0);
    cr_assert_eq(mf_sched_others_ns(100 * MS, 100 * MS, 10 * MS, WALL, 0), 0);
}
