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
#include <time.h>
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
mf_sched_sample(mf_sched_sample_t *out)
{
    char line[512]; /* a cpu line is at most about 230 characters */
    unsigned long long v[8] = {0};
    struct timespec ts;
    int ncpu = 0, n = -1;
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = hz > 0 ? fopen("/proc/stat", "re") : NULL;
    if (f == NULL)
        return -1;
    /* "cpu  user nice system idle iowait irq softirq steal ...", then a "cpuN ..." line per online CPU. */
    while (fgets(line, sizeof(line), f) != NULL && strncmp(line, "cpu", 3) == 0) {
        if (line[3] == ' ')
            n = sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                       &v[6], &v[7]);
        else
            ncpu++;
    }
    fclose(f);
    if (n < 4)
        return -1;
    unsigned long long tick_ns = 1000000000ULL / (unsigned long long)hz;
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6]; /* not steal: the host's, not this machine's */
    out->busy_ns = busy * tick_ns;
    out->counted_ns = (busy + v[3] + v[4] + v[7]) * tick_ns;
    out->ncpu = ncpu > 0 ? ncpu : 1;
    out->tick_ns = (int64_t)tick_ns;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    out->own_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    out->at_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return 0;
}

/* Ticks /proc/stat may fall short of an interval by without any being lost (see sched.h). */
#define SHORT_TICKS 3

int64_t
mf_sched_others_ns(const mf_sched_sample_t *from, const mf_sched_sample_t *to)
{
    int64_t wall = to->at_ns - from->at_ns;
    if (wall <= 0)
        return 0;
    int64_t busy = (int64_t)(to->busy_ns - from->busy_ns), counted = (int64_t)(to->counted_ns - from->counted_ns);
    int64_t own = to->own_ns - from->own_ns;
    double span = (double)wall * (to->ncpu > 0 ? to->ncpu : 1);
    double slack = SHORT_TICKS * (double)to->tick_ns;
    if (slack < span / 10)
        slack = span / 10;
    if ((double)counted >= span - slack)
        return busy - own; /* every tick accounted, give or take the ticks' coarseness */
    double share = counted > 0 ? (double)counted / span : 0;
    return busy - (int64_t)((double)own * share);
}
