/*
 * sched.c: per-thread slice requests, the autogroup's nice value and a
 * thread's scheduling times (see sched.h). glibc declares neither
 * sched_setattr nor sched_getattr nor their attribute struct, so both are
 * called through syscall(2) with the struct's first version (48 bytes). The
 * autogroup and the times are read from and written to /proc, the only
 * interface the kernel gives them.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/sched.h"

typedef struct sched_attr_v0 {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
} sched_attr_v0_t;

#define RESET_ON_FORK 0x01 /* SCHED_FLAG_RESET_ON_FORK: kept as it was */

int
mf_sched_slice_set(uint64_t ns, uint64_t *old)
{
    sched_attr_v0_t a;
    memset(&a, 0, sizeof(a));
    if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof(a), 0) != 0)
        return -1;
    if (old != NULL)
        *old = a.sched_runtime;
    if (a.sched_policy != SCHED_OTHER && a.sched_policy != SCHED_BATCH)
        return 0; /* real-time, deadline or idle threads: no slice to ask for */
    a.size = sizeof(a);
    a.sched_flags &= RESET_ON_FORK;
    a.sched_runtime = ns;
    a.sched_deadline = a.sched_period = 0;
    return syscall(SYS_sched_setattr, 0, &a, 0) == 0 ? 0 : -1;
}

/* Reads a small /proc file whole into buf (NUL-terminated); returns its length, or -1. */
static int
read_proc(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    int saved = errno;
    close(fd);
    errno = saved;
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return (int)n;
}

int
mf_sched_group_nice(int *nice)
{
    char buf[128];
    /* "/autogroup-<id> nice <n>\n" */
    if (read_proc("/proc/self/autogroup", buf, sizeof(buf)) < 0)
        return -1;
    const char *p = strstr(buf, " nice ");
    return p != NULL && sscanf(p + 6, "%d", nice) == 1 ? 0 : -1;
}

int
mf_sched_group_nice_set(int nice)
{
    char buf[16];
    int len = snprintf(buf, sizeof(buf), "%d", nice);
    int fd = open("/proc/self/autogroup", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, buf, (size_t)len);
    int saved = errno;
    close(fd);
    errno = saved;
    return n == len ? 0 : -1;
}

int
mf_sched_thread_times(int64_t *run_ns, int64_t *wait_ns)
{
    char buf[128];
    long long run, wait;
    /* "<on a CPU, ns> <runnable and waiting, ns> <time slices>\n" */
    if (read_proc("/proc/thread-self/schedstat", buf, sizeof(buf)) < 0 || sscanf(buf, "%lld %lld", &run, &wait) != 2)
        return -1;
    *run_ns = run;
    *wait_ns = wait;
    return 0;
}

int
mf_sched_busy_ns(int64_t *busy_ns, int64_t *counted_ns)
{
    char buf[512];
    unsigned long long v[8] = {0};
    /* "cpu  user nice system idle iowait irq softirq steal ..." (clock ticks) */
    if (read_proc("/proc/stat", buf, sizeof(buf)) < 0 ||
        sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) < 4)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return -1;
    unsigned long long tick_ns = 1000000000ULL / (unsigned long long)hz;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6]; /* not steal: the host's, not this machine's */
    *busy_ns = (int64_t)(busy * tick_ns);
    if (counted_ns != NULL)
        *counted_ns = (int64_t)((busy + v[3] + v[4] + v[7]) * tick_ns);
    return 0;
}

/* /proc/stat accounting less than this share of an interval's CPU time: ticks were lost (see sched.h). */
#define MIN_LOST_SHARE 0.9

int64_t
mf_sched_others_ns(int64_t busy_ns, int64_t counted_ns, int64_t own_ns, int64_t wall_ns, int ncpu)
{
    if (wall_ns <= 0 || ncpu <= 0)
        return 0;
    double share = counted_ns <= 0 ? 0 : (double)counted_ns / ((double)wall_ns * ncpu);
    if (share >= MIN_LOST_SHARE)
        share = 1; /* a tick or two short (or over): the ticks' coarseness, not a host's taking */
    return busy_ns - (int64_t)((double)own_ns * share);
}
