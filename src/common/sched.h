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
 * mf_sched_busy_ns: the time every CPU of the machine spent busy (neither
 * idle, waiting for I/O nor stolen by the hypervisor) since boot, summed
 * over CPUs, in ns, into *busy_ns, and the time /proc/stat accounted at
 * all (busy, idle, I/O wait and stolen) into *counted_ns (may be NULL);
 * counted in clock ticks, 10 ms here. Returns 0, or -1 when /proc/stat
 * cannot be read.
 */
int mf_sched_busy_ns(int64_t *busy_ns, int64_t *counted_ns);

/*
 * mf_sched_others_ns: what other programs (and the kernel) kept the CPUs
 * busy over an interval of wall_ns on ncpu CPUs, in ns, from the deltas of
 * mf_sched_busy_ns over it (busy_ns, counted_ns) and the process's own CPU
 * time over it (own_ns, CLOCK_PROCESS_CPUTIME_ID): busy_ns less own_ns, the
 * latter scaled by the share of the interval's CPU time /proc/stat
 * accounted when that is under nine tenths (a shortfall of a tick or two
 * is the ticks' coarseness: 20 of them in 100 ms on 2 CPUs). A virtual machine whose host takes its CPUs
 * without reporting it as stolen loses those clock ticks from /proc/stat,
 * while the process's own time, read from a clock the host keeps running,
 * still counts them: unscaled, the process's time would be taken off a
 * busy time that never held it, and busy programs beside it would look
 * idle. May be negative (ticks are coarse); 0 with no interval.
 */
int64_t mf_sched_others_ns(int64_t busy_ns, int64_t counted_ns, int64_t own_ns, int64_t wall_ns, int ncpu);

#endif
