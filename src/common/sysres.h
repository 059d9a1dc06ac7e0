/*
 * sysres.h: the CPUs and memory this process may use, as a container or a
 * service manager grants them, not as the machine has them.
 *
 * A server sized from the machine's totals misjudges itself in a container:
 * with a CPU quota of one CPU on a 32-CPU host it starts 32 TTL deleters and
 * a soft cap of 256 request workers, which burn the quota in a few
 * milliseconds and then leave the whole process throttled for the rest of
 * the scheduler's period (up to 100 ms, a load spike for every client); with
 * a 1 GB memory limit on a 64 GB host it sizes a cache the kernel kills it
 * for. So the sizes come from what is granted:
 *   - CPUs: the affinity mask (taskset, cpuset), then the CFS quota of the
 *     process's cgroup and of each cgroup above it, the lowest one, rounded
 *     up to whole CPUs (cgroup v2 cpu.max, v1 cpu.cfs_quota_us and
 *     cpu.cfs_period_us);
 *   - memory: MemTotal, then the memory limit of the process's cgroup and of
 *     each above it, the lowest one (v2 memory.max, v1
 *     memory.limit_in_bytes, and v1 memory.stat's hierarchical_memory_limit,
 *     the lowest over the levels above, which a container cannot see), as
 *     mongod's hostInfo memLimitMB, the base its WiredTiger cache is sized
 *     from.
 * The process's cgroup path comes from /proc/self/cgroup, and where each
 * hierarchy is mounted, with the cgroup its root directory is, from
 * /proc/self/mountinfo (v2 at /sys/fs/cgroup, or /sys/fs/cgroup/unified
 * beside v1 ones; v1 wherever it was mounted); without those lines, where
 * systemd and Docker mount them. A container without a cgroup namespace
 * sees the host's path for its cgroup, which is its mount's root: the path
 * less that root is read. A path that does not lie under the mount's root
 * (a namespace's own view) is read as it is, its levels that do not exist
 * skipped, so the mount's root, the container's own cgroup, is read.
 *
 * A few small files are read on each call: once at start-up (main, or
 * mf_engine_open for an embedded engine; the engine keeps the result in
 * eng->sysres for the network layer and the TTL monitor) and by hostInfo,
 * never per request. Every result is the caller's (plain values); no state
 * is kept.
 */
#ifndef MF_SYSRES_H
#define MF_SYSRES_H

#include <stdint.h>

typedef struct mf_sysres {
    int cpus_online;    /* sysconf(_SC_NPROCESSORS_ONLN), at least 1 */
    int cpus_affinity;  /* CPUs in the affinity mask (cpus_online if it cannot be read) */
    double cpu_quota;   /* the lowest cgroup CPU quota in CPUs (quota / period), 0 when none */
    int cpus_usable;    /* cpus_affinity, lowered to ceil(cpu_quota) when that is lower; at least 1 */
    int64_t mem_total;  /* bytes of RAM (MemTotal), 0 if unknown */
    int64_t mem_cgroup; /* the lowest cgroup memory limit in bytes, 0 when none */
    int64_t mem_limit;  /* mem_total, lowered to mem_cgroup when that is lower (0 if both unknown) */
} mf_sysres_t;

/*
 * mf_sysres_read: fills *out for this process. root prefixes every path read
 * (/proc/self/cgroup, /proc/self/mountinfo, /proc/meminfo, the cgroup
 * files under the mount points it names): "" for the real
 * ones, a directory holding a fake tree in tests. CPU counts always come
 * from the running process (sysconf, sched_getaffinity).
 */
void mf_sysres_read(const char *root, mf_sysres_t *out);

/* mf_sysres_cpus_from: min(affinity, ceil(quota)) for quota > 0, else affinity; at least 1. */
int mf_sysres_cpus_from(int affinity, double quota);

/* mf_sysres_cpus: cpus_usable of mf_sysres_read(""), for code that only wants the count. */
int mf_sysres_cpus(void);

#endif /* MF_SYSRES_H */
