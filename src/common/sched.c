/*
 * sched.c: per-thread slice requests (see sched.h). glibc declares neither
 * sched_setattr nor sched_getattr nor their attribute struct, so both are
 * called through syscall(2) with the struct's first version (48 bytes).
 */
#include <sched.h>
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
