/*
 * sched.h: the time slice a thread asks Linux's scheduler for.
 *
 * Since Linux 6.12 the EEVDF scheduler honours a per-thread slice request
 * (sched_setattr's sched_runtime for SCHED_OTHER, 0.1-100 ms; 0 is the
 * kernel's default, 1.4 ms on 2 CPUs here). A scheduling group (a
 * service's cgroup, a session's autogroup) takes the shortest slice among
 * its runnable threads, and a thread that wakes with a shorter slice than
 * the running group's may preempt it at once (PREEMPT_SHORT) instead of
 * waiting for the scheduler's tick (4 ms at HZ=250). mayfly's background
 * threads (WiredTiger's eviction, log and checkpoint threads, the
 * flusher, the reaper, the TTL monitor and its deleters) ask for
 * MF_BACKGROUND_SLICE_NS, longer than the default, so that while only they
 * run, a client's thread waking in another program comes first; the
 * threads that answer clients (the I/O thread and the workers) keep the
 * default. Older kernels accept the request and ignore it.
 * docs/ARCHITECTURE.md ("Background threads' time slices") has the figures.
 */
#ifndef MF_COMMON_SCHED_H
#define MF_COMMON_SCHED_H

#include <stdint.h>

#define MF_BACKGROUND_SLICE_NS 8000000ULL /* 8 ms: two of the 4 ms ticks */

/*
 * mf_sched_slice_set: asks for a slice of ns nanoseconds (0: the kernel's
 * default) for the calling thread, keeping its policy and nice value.
 * Threads it creates afterwards inherit the request. *old (may be NULL)
 * gets the slice it had (the kernel reports its default as a value), for
 * mf_sched_slice_set(old) to put back. A thread that is not SCHED_OTHER or
 * SCHED_BATCH (real-time, deadline, idle) is left as it is. Returns
 * 0, or -1 when the kernel refused (errno set; nothing changed).
 */
int mf_sched_slice_set(uint64_t ns, uint64_t *old);

/*
 * The calling process's scheduling group when it is a session's autogroup
 * (Linux with CONFIG_SCHED_AUTOGROUP; /proc/self/autogroup). Nice values of
 * threads weigh them inside their group; the group's own nice value weighs
 * the whole group against other programs' groups. A process in a cgroup
 * other than the root one (a systemd service, a container) is scheduled by
 * that cgroup instead, and its autogroup's nice value has no effect.
 *
 * mf_sched_group_nice: the group's nice value into *nice; returns 0, or -1
 * when there is no autogroup to read. mf_sched_group_nice_set: sets it
 * (0-19 without privileges; only the superuser may set a negative value);
 * returns 0, or -1 with errno set (EAGAIN: an unprivileged process may
 * change it at most every 100 ms).
 */
int mf_sched_group_nice(int *nice);
int mf_sched_group_nice_set(int nice);

/*
 * mf_sched_thread_times: the calling thread's time on a CPU and time spent
 * runnable but waiting for one, in ns, since it started
 * (/proc/thread-self/schedstat). Returns 0, or -1 when the kernel does not
 * keep them (both left untouched).
 */
int mf_sched_thread_times(int64_t *run_ns, int64_t *wait_ns);

/*
 * A sample of what the machine's CPUs did, to tell what other programs use
 * (the TTL monitor's scheduling group, SPEC D9). busy_ns: the time every
 * CPU spent busy (neither idle, waiting for I/O nor stolen by the
 * hypervisor) since boot, summed over CPUs; counted_ns: all the time
 * /proc/stat accounted (busy, idle, I/O wait and stolen); both counted in
 * clock ticks (10 ms here), unsigned so that differences stay defined
 * however long the machine has run. ncpu: the CPUs /proc/stat lists (the
 * online ones, those whose time the sums grow by). own_ns: the process's
 * CPU time (CLOCK_PROCESS_CPUTIME_ID); at_ns: the monotonic clock when the
 * sample was taken; tick_ns: a clock tick (the unit of the sums).
 */
typedef struct mf_sched_sample {
    uint64_t busy_ns, counted_ns;
    int ncpu;
    int64_t own_ns, at_ns, tick_ns;
} mf_sched_sample_t;

/* mf_sched_sample: takes a sample into *out; returns 0, or -1 when /proc/stat cannot be read. */
int mf_sched_sample(mf_sched_sample_t *out);

/*
 * mf_sched_others_ns: what other programs (and the kernel) kept the CPUs
 * busy between samples from and to, in ns: the machine's busy time less
 * the process's own, the latter scaled by the share of the interval's CPU
 * time (wall time times to->ncpu) that /proc/stat accounted, when it
 * accounted less than that by more than a tenth and three ticks (short of
 * that, the ticks' coarseness: every field of /proc/stat is rounded down
 * to a tick, 20 ticks in 100 ms on 2 CPUs, 10 on one). A virtual machine
 * whose host takes its CPUs without reporting it as stolen loses those
 * clock ticks from /proc/stat, while the process's own time, read from a
 * clock the host keeps running, still counts them: unscaled, the process's
 * time would be taken off a busy time that never held it, and busy
 * programs beside it would look idle. When every tick was accounted, the
 * plain difference. May be negative (ticks are coarse); 0 when to is not
 * later than from.
 */
int64_t mf_sched_others_ns(const mf_sched_sample_t *from, const mf_sched_sample_t *to);

#endif
