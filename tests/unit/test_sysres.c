/*
 * test_sysres.c: the CPUs and memory granted to the process (common/sysres.h).
 *
 * mf_sysres_read takes a root that prefixes every path it reads, so each
 * case builds a fake /proc/self/cgroup, /proc/meminfo and /sys/fs/cgroup
 * tree in a fresh temporary directory (removed by the suite's fini) and
 * checks what is read from it:
 *   - cgroup v2 (cpu.max, memory.max): a quota at the process's own level
 *     (with a period other than 100000); a lower quota and the only memory
 *     limit at a parent level (the lowest over the hierarchy wins); "max"
 *     everywhere (no limits); a path that does not exist under the mount
 *     (the container case: the mount root's files count);
 *   - where the hierarchies are mounted, from /proc/self/mountinfo: v1
 *     ones elsewhere (a mount point with an escaped space), v2 at
 *     /sys/fs/cgroup/unified beside v1 ones, a mount whose root is the
 *     process's own cgroup (a container without a cgroup namespace), a
 *     later mount hiding an earlier one at its point, memory and cpu in
 *     one v1 hierarchy, and none listed (the usual places);
 *   - v1's memory.stat hierarchical_memory_limit (the levels above a
 *     container's own, out of its sight);
 *   - cgroup v1 (memory.limit_in_bytes, cpu.cfs_quota_us/cfs_period_us):
 *     the "unlimited" huge values and a quota of -1 (no limits); a real
 *     512 MiB limit and a half-CPU quota (usable rounds up to 1); the CPU
 *     hierarchy mounted as "cpu" rather than "cpu,cpuacct";
 *   - mem_limit as the lower of MemTotal and the cgroup limit, both ways,
 *     and whichever is known when the other is not;
 *   - malformed and empty files, and a root with no files at all: no
 *     limit, no crash, and a valid limit at another level still counts;
 *   - mf_sysres_cpus_from over a table of (affinity, quota);
 *   - the real machine (root ""): sane values consistent with sysconf,
 *     sched_getaffinity and /proc/meminfo as read here.
 * CPU counts always come from the running process, so expectations about
 * cpus_usable are computed from the real affinity mask, never hard-coded.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sysres.h"

#define KiB ((int64_t)1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

/* The MemTotal written into every fake meminfo, and that in bytes. */
#define MEMTOTAL_KB ((int64_t)24683520)
#define MEMTOTAL_BYTES (MEMTOTAL_KB * KiB)

/* v1's "no limit" as the kernel reports it (LONG_MAX rounded to a page). */
#define V1_UNLIMITED "9223372036854771712"

static char base[64]; /* the suite's temporary directory; each case's roots live under it */

static void
make_base(void)
{
    snprintf(base, sizeof base, "/tmp/mf-test-sysres-XXXXXX");
    cr_assert_not_null(mkdtemp(base), "mkdtemp: %s", strerror(errno));
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void
remove_base(void)
{
    if (base[0])
        nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(sysres, .init = make_base, .fini = remove_base);

/* A fresh root named name under the suite's directory (its path into out, 256 bytes). */
static void
new_root(char *out, const char *name)
{
    snprintf(out, 256, "%s/%s", base, name);
    cr_assert_eq(mkdir(out, 0755), 0, "mkdir %s: %s", out, strerror(errno));
}

/* mkdir -p of root/rel. */
static void
mkdirs(const char *root, const char *rel)
{
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/%s", root, rel);
    cr_assert(n > 0 && (size_t)n < sizeof path);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* Writes text to root/rel, creating the directories above it. */
static void
put(const char *root, const char *rel, const char *text)
{
    char dir[4096], path[4096];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        mkdirs(root, dir);
    }
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
    size_t len = strlen(text);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* A meminfo as the kernel writes it, MemTotal first. */
static void
put_meminfo(const char *root)
{
    put(root, "proc/meminfo",
        "MemTotal:       24683520 kB\n"
        "MemFree:         1834372 kB\n"
        "MemAvailable:   19022716 kB\n"
        "Buffers:          412396 kB\n"
        "Cached:         16420332 kB\n"
        "SwapTotal:             0 kB\n");
}

/* Writes text as root/proc/self/cgroup, the lines naming the process's cgroups. */
static void
proc_cgroup(const char *root, const char *text)
{
    put(root, "proc/self/cgroup", text);
}

/* A fresh root named name (its path into out, 256 bytes) with the fake meminfo and cgroup text as /proc/self/cgroup. */
static void
fake_root(char *out, const char *name, const char *cgroup)
{
    new_root(out, name);
    put_meminfo(out);
    proc_cgroup(out, cgroup);
}

/*
 * Writes text, as it is (the newline included, if any), to
 * root/sys/fs/cgroup<dir>/file; nothing when text is NULL. dir is "" for
 * /sys/fs/cgroup itself, else a path beginning with '/'.
 */
static void
put_cgroup_file(const char *root, const char *dir, const char *file, const char *text)
{
    char rel[4096];
    if (text == NULL)
        return;
    int n = snprintf(rel, sizeof rel, "sys/fs/cgroup%s/%s", dir, file);
    cr_assert(n > 0 && (size_t)n < sizeof rel);
    put(root, rel, text);
}

/* A v2 level (path: "" for the mount's root, else "/a/b"): memory.max and cpu.max, each as given, NULL for none. */
static void
v2_level(const char *root, const char *path, const char *memory_max, const char *cpu_max)
{
    put_cgroup_file(root, path, "memory.max", memory_max);
    put_cgroup_file(root, path, "cpu.max", cpu_max);
}

/* A v1 memory level (path: "" for the hierarchy's root, else "/a/b"): memory.limit_in_bytes, written as given. */
static void
v1_mem_level(const char *root, const char *path, const char *limit_in_bytes)
{
    char dir[4096];
    int n = snprintf(dir, sizeof dir, "/memory%s", path);
    cr_assert(n > 0 && (size_t)n < sizeof dir);
    put_cgroup_file(root, dir, "memory.limit_in_bytes", limit_in_bytes);
}

/*
 * A v1 CPU level of the hierarchy mounted as mount ("cpu,cpuacct" or "cpu";
 * path as for v1_mem_level): cpu.cfs_quota_us and cpu.cfs_period_us, each
 * written as given or NULL for none.
 */
static void
v1_cpu_level(const char *root, const char *mount, const char *path, const char *quota_us, const char *period_us)
{
    char dir[4096];
    int n = snprintf(dir, sizeof dir, "/%s%s", mount, path);
    cr_assert(n > 0 && (size_t)n < sizeof dir);
    put_cgroup_file(root, dir, "cpu.cfs_quota_us", quota_us);
    put_cgroup_file(root, dir, "cpu.cfs_period_us", period_us);
}

/* The real affinity count, read here independently of sysres.c. */
static int
real_affinity(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* min(affinity, ceil(quota)) for quota > 0, else affinity; at least 1 (computed here). */
static int
expect_usable(int affinity, double quota)
{
    int n = affinity;
    if (quota > 0) {
        double c = ceil(quota);
        if (c < n)
            n = (int)c;
    }
    return n < 1 ? 1 : n;
}

/* Reads root and checks what every case shares: CPU counts from the process, usable from the quota. */
static mf_sysres_t
read_root(const char *root)
{
    mf_sysres_t r;
    memset(&r, 0xA5, sizeof r); /* nothing may be left unset */
    mf_sysres_read(root, &r);
    int aff = real_affinity();
    cr_assert_eq(r.cpus_affinity, aff, "%s: cpus_affinity %d, the process has %d", root,
                 r.cpus_affinity, aff);
    cr_assert_geq(r.cpus_online, 1, "%s: cpus_online %d", root, r.cpus_online);
    cr_assert(r.cpu_quota >= 0.0, "%s: cpu_quota %f", root, r.cpu_quota);
    cr_assert_eq(r.cpus_usable, expect_usable(aff, r.cpu_quota),
                 "%s: cpus_usable %d for affinity %d and quota %f", root, r.cpus_usable, aff,
                 r.cpu_quota);
    cr_assert_geq(r.mem_cgroup, 0, "%s: mem_cgroup %lld", root, (long long)r.mem_cgroup);
    cr_assert_geq(r.mem_total, 0, "%s: mem_total %lld", root, (long long)r.mem_total);
    return r;
}

static void
assert_quota(const mf_sysres_t *r, double want, const char *what)
{
    cr_assert(fabs(r->cpu_quota - want) < 1e-9, "%s: cpu_quota %f, want %f", what, r->cpu_quota,
              want);
}

static void
assert_mem(const mf_sysres_t *r, int64_t total, int64_t cgroup, int64_t limit, const char *what)
{
    cr_assert_eq(r->mem_total, total, "%s: mem_total %lld, want %lld", what,
                 (long long)r->mem_total, (long long)total);
    cr_assert_eq(r->mem_cgroup, cgroup, "%s: mem_cgroup %lld, want %lld", what,
                 (long long)r->mem_cgroup, (long long)cgroup);
    cr_assert_eq(r->mem_limit, limit, "%s: mem_limit %lld, want %lld", what,
                 (long long)r->mem_limit, (long long)limit);
}

/* ---- cgroup v2 ---- */

/* A quota and a memory limit at the process's own level; its parent and the root say "max". */
Test(sysres, v2_own_level_quota)
{
    char root[256];
    fake_root(root, "r", "0::/system.slice/mayfly.service\n");
    v2_level(root, "", "max\n", "max 100000\n");
    v2_level(root, "/system.slice", "max\n", "max 100000\n");
    /* 1.5 CPUs over a 50 ms period: the quota is quota / period, not quota / 100000 */
    v2_level(root, "/system.slice/mayfly.service", "536870912\n", "75000 50000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 1.5, "own level");
    cr_assert_eq(r.cpus_usable, expect_usable(real_affinity(), 1.5));
    cr_assert_leq(r.cpus_usable, 2, "1.5 CPUs round up to 2, not more: %d", r.cpus_usable);
    assert_mem(&r, MEMTOTAL_BYTES, 512 * MiB, 512 * MiB, "own level");
}

/* The parent's lower quota beats the own level's; the memory limit is only at the parent. */
Test(sysres, v2_parent_lower_wins)
{
    char root[256];
    fake_root(root, "r", "0::/kubepods/pod1/ctr\n");
    /* the root cgroup has neither file in v2 */
    mkdirs(root, "sys/fs/cgroup");
    v2_level(root, "/kubepods", "max\n", "max 100000\n");
    v2_level(root, "/kubepods/pod1", "1073741824\n", "50000 100000\n");
    v2_level(root, "/kubepods/pod1/ctr", "max\n", "400000 100000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.5, "parent 0.5 under own 4");
    cr_assert_eq(r.cpus_usable, 1, "half a CPU gives 1 usable: %d", r.cpus_usable);
    assert_mem(&r, MEMTOTAL_BYTES, 1 * GiB, 1 * GiB, "parent-only memory limit");
}

/* "max" at every level: no quota, no memory limit. */
Test(sysres, v2_max_everywhere)
{
    char root[256];
    fake_root(root, "r", "0::/user.slice/user-1000.slice/session-2.scope\n");
    v2_level(root, "", "max\n", "max 100000\n");
    v2_level(root, "/user.slice", "max\n", "max 100000\n");
    v2_level(root, "/user.slice/user-1000.slice", "max\n", "max 100000\n");
    v2_level(root, "/user.slice/user-1000.slice/session-2.scope", "max\n", "max 100000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.0, "max everywhere");
    cr_assert_eq(r.cpus_usable, r.cpus_affinity, "no quota: usable %d, affinity %d",
                 r.cpus_usable, r.cpus_affinity);
    assert_mem(&r, MEMTOTAL_BYTES, 0, MEMTOTAL_BYTES, "max everywhere");

    /* byte counts from 2^62 up are no limit either */
    char huge[256];
    fake_root(huge, "huge", "0::/a/b\n");
    v2_level(huge, "/a", "9223372036854775807\n", NULL);
    v2_level(huge, "/a/b", "4611686018427387904\n", NULL); /* 2^62 */
    r = read_root(huge);
    assert_mem(&r, MEMTOTAL_BYTES, 0, MEMTOTAL_BYTES, "huge byte counts");
}

/*
 * The container case: /proc/self/cgroup names the host's path, which does
 * not exist under the container's own mount; the mount root's limits count.
 */
Test(sysres, v2_path_missing_uses_mount_root)
{
    char root[256];
    fake_root(root, "r", "0::/system.slice/docker-0123456789abcdef.scope\n");
    v2_level(root, "", "268435456\n", "150000 100000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 1.5, "mount root quota");
    cr_assert_eq(r.cpus_usable, expect_usable(real_affinity(), 1.5));
    assert_mem(&r, MEMTOTAL_BYTES, 256 * MiB, 256 * MiB, "mount root memory limit");

    /* the same with the process at the root ("0::/"), as in a private cgroup namespace */
    char root2[256];
    fake_root(root2, "r2", "0::/\n");
    v2_level(root2, "", "2147483648\n", "300000 100000\n");
    r = read_root(root2);
    assert_quota(&r, 3.0, "process at the root");
    cr_assert_eq(r.cpus_usable, expect_usable(real_affinity(), 3.0));
    assert_mem(&r, MEMTOTAL_BYTES, 2 * GiB, 2 * GiB, "process at the root");
}

/* ---- cgroup v1 ---- */

/* The kernel's "unlimited" memory value (and anything from 2^62 up) and a quota of -1: no limits. */
Test(sysres, v1_unlimited)
{
    char root[256];
    fake_root(root, "r",
              "12:pids:/docker/abc\n"
              "4:memory:/docker/abc\n"
              "3:cpuset:/docker/abc\n"
              "1:cpu,cpuacct:/docker/abc\n");
    v1_mem_level(root, "", V1_UNLIMITED "\n");
    v1_mem_level(root, "/docker", "4611686018427387904\n"); /* 2^62 */
    v1_mem_level(root, "/docker/abc", V1_UNLIMITED "\n");
    v1_cpu_level(root, "cpu,cpuacct", "", "-1\n", "100000\n");
    v1_cpu_level(root, "cpu,cpuacct", "/docker", "-1\n", "100000\n");
    v1_cpu_level(root, "cpu,cpuacct", "/docker/abc", "-1\n", "100000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.0, "v1 -1 quota");
    cr_assert_eq(r.cpus_usable, r.cpus_affinity, "no quota: usable %d, affinity %d",
                 r.cpus_usable, r.cpus_affinity);
    assert_mem(&r, MEMTOTAL_BYTES, 0, MEMTOTAL_BYTES, "v1 unlimited");
}

/* A 512 MiB limit and 50000/100000 (half a CPU) at the own level, higher or none above. */
Test(sysres, v1_real_limits)
{
    char root[256];
    fake_root(root, "r",
              "9:name=systemd:/a/b\n"
              "4:memory:/a/b\n"
              "1:cpu,cpuacct:/a/b\n");
    v1_mem_level(root, "", V1_UNLIMITED "\n");
    v1_mem_level(root, "/a", "2147483648\n");
    v1_mem_level(root, "/a/b", "536870912\n");
    v1_cpu_level(root, "cpu,cpuacct", "", "-1\n", "100000\n");
    v1_cpu_level(root, "cpu,cpuacct", "/a", "-1\n", "100000\n");
    v1_cpu_level(root, "cpu,cpuacct", "/a/b", "50000\n", "100000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.5, "v1 50000/100000");
    cr_assert_eq(r.cpus_usable, 1, "half a CPU gives 1 usable: %d", r.cpus_usable);
    assert_mem(&r, MEMTOTAL_BYTES, 512 * MiB, 512 * MiB, "v1 512 MiB");
}

/* A cgroup path longer than a kilobyte (systemd's nested slices can be): its own level's limits still count. */
Test(sysres, long_cgroup_path_keeps_its_own_limits)
{
    char root[256], path[1400] = "", line[1500];
    for (int i = 0; i < 30; i++) /* 30 levels of 41 characters: 1,230 */
        strcat(path, "/level-with-a-rather-long-name-0123456789");
    snprintf(line, sizeof line, "0::%s\n", path);
    fake_root(root, "r", line);
    v2_level(root, path, "268435456\n", "150000 100000\n");
    mf_sysres_t r = read_root(root);
    assert_quota(&r, 1.5, "the leaf's quota under a 1,230-character path");
    assert_mem(&r, MEMTOTAL_BYTES, 256 * MiB, 256 * MiB, "the leaf's limit under a 1,230-character path");
}

/* The CPU hierarchy mounted as "cpu": listed as "cpu,cpuacct", and listed as "cpu" alone. */
Test(sysres, v1_cpu_directory_named_cpu)
{
    char root[256];
    fake_root(root, "r",
              "4:memory:/svc\n"
              "1:cpu,cpuacct:/svc\n");
    v1_mem_level(root, "/svc", V1_UNLIMITED "\n");
    v1_cpu_level(root, "cpu", "", "-1\n", "100000\n");
    v1_cpu_level(root, "cpu", "/svc", "150000\n", "100000\n");
    mf_sysres_t r = read_root(root);
    assert_quota(&r, 1.5, "\"cpu,cpuacct\" listed, \"cpu\" mounted");
    cr_assert_eq(r.cpus_usable, expect_usable(real_affinity(), 1.5));
    assert_mem(&r, MEMTOTAL_BYTES, 0, MEMTOTAL_BYTES, "\"cpu,cpuacct\" listed, \"cpu\" mounted");

    /* separate cpu and cpuacct hierarchies (as on a hybrid host): "1:cpu:/svc" */
    char root2[256];
    fake_root(root2, "r2",
              "4:memory:/svc\n"
              "2:cpuacct:/svc\n"
              "1:cpu:/svc\n");
    v1_mem_level(root2, "/svc", "805306368\n");
    v1_cpu_level(root2, "cpu", "/svc", "25000\n", "100000\n");
    r = read_root(root2);
    assert_quota(&r, 0.25, "\"cpu\" listed and mounted");
    cr_assert_eq(r.cpus_usable, 1, "a quarter CPU gives 1 usable: %d", r.cpus_usable);
    assert_mem(&r, MEMTOTAL_BYTES, 768 * MiB, 768 * MiB, "\"cpu\" listed and mounted");
}

/* ---- where the hierarchies are mounted (/proc/self/mountinfo) ---- */

/* Writes text as root/proc/self/mountinfo. */
static void
mountinfo(const char *root, const char *text)
{
    put(root, "proc/self/mountinfo", text);
}

/* v1 hierarchies mounted elsewhere than /sys/fs/cgroup, one under a name with a space (escaped as \040). */
Test(sysres, v1_hierarchies_are_read_where_mountinfo_says)
{
    char root[256];
    fake_root(root, "r",
              "12:memory:/app\n"
              "4:cpu,cpuacct:/app\n");
    mountinfo(root,
              "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
              "30 22 0:26 / /cg/mem rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,memory\n"
              "31 22 0:27 / /cg/cpu\\040acct rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup "
              "rw,cpu,cpuacct\n"
              "32 22 0:28 / /cg/cpuset rw,nosuid shared:12 - cgroup cgroup rw,cpuset\n");
    put(root, "cg/mem/app/memory.limit_in_bytes", "268435456\n");
    put(root, "cg/cpu acct/app/cpu.cfs_quota_us", "150000\n");
    put(root, "cg/cpu acct/app/cpu.cfs_period_us", "100000\n");
    /* Where they would be without mountinfo: lower limits that must not be read. */
    v1_mem_level(root, "/app", "1048576\n");
    v1_cpu_level(root, "cpu,cpuacct", "/app", "10000\n", "100000\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 1.5, "cpu,cpuacct mounted at /cg/cpu acct");
    assert_mem(&r, MEMTOTAL_BYTES, 256 * MiB, 256 * MiB, "memory mounted at /cg/mem");
}

/* A hybrid host: v1 hierarchies under /sys/fs/cgroup, the v2 one at /sys/fs/cgroup/unified. */
Test(sysres, v2_beside_v1_is_read_at_its_unified_mount)
{
    char root[256];
    fake_root(root, "r",
              "5:memory:/svc\n"
              "0::/svc\n");
    mountinfo(root,
              "24 22 0:21 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755\n"
              "25 24 0:22 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 "
              "rw,nsdelegate\n"
              "27 24 0:24 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:7 - cgroup cgroup "
              "rw,memory\n");
    put(root, "sys/fs/cgroup/unified/svc/memory.max", "536870912\n");
    put(root, "sys/fs/cgroup/unified/svc/cpu.max", "50000 100000\n");
    v1_mem_level(root, "/svc", V1_UNLIMITED "\n");

    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.5, "cpu.max under the unified mount");
    assert_mem(&r, MEMTOTAL_BYTES, 512 * MiB, 512 * MiB, "memory.max under the unified mount");
}

/*
 * A container without a cgroup namespace: /proc/self/cgroup names the
 * host's path, and the mount's root is that very cgroup, so its limits are
 * at the mount point itself; a directory of that name below the mount
 * (another cgroup) is not the process's.
 */
Test(sysres, a_mount_whose_root_is_the_process_cgroup_is_read_at_its_point)
{
    char root[256];
    fake_root(root, "r", "9:memory:/docker/abc\n");
    mountinfo(root, "40 35 0:30 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:12 - cgroup cgroup rw,memory\n");
    v1_mem_level(root, "", "314572800\n");
    v1_mem_level(root, "/docker/abc", "104857600\n"); /* not this process's cgroup */

    mf_sysres_t r = read_root(root);
    assert_mem(&r, MEMTOTAL_BYTES, 300 * MiB, 300 * MiB, "the mount root, the container's own cgroup");

    /* Below the mount's root: the path less that root. */
    char root2[256];
    fake_root(root2, "r2", "9:memory:/docker/abc/job\n");
    mountinfo(root2, "40 35 0:30 /docker/abc /sys/fs/cgroup/memory ro,nosuid master:12 - cgroup cgroup rw,memory\n");
    v1_mem_level(root2, "", V1_UNLIMITED "\n");
    v1_mem_level(root2, "/job", "209715200\n");
    r = read_root(root2);
    assert_mem(&r, MEMTOTAL_BYTES, 200 * MiB, 200 * MiB, "a level below the mount's root");
}

/* v1's memory.stat: the lowest limit over the levels above, which a container cannot see, counts. */
Test(sysres, v1_hierarchical_memory_limit_counts_levels_out_of_sight)
{
    char root[256];
    fake_root(root, "r", "4:memory:/\n");
    v1_mem_level(root, "", V1_UNLIMITED "\n");
    put_cgroup_file(root, "/memory", "memory.stat",
                    "cache 4096\n"
                    "rss 8192\n"
                    "hierarchical_memory_limit 402653184\n"
                    "hierarchical_memsw_limit 9223372036854771712\n"
                    "total_cache 4096\n");
    mf_sysres_t r = read_root(root);
    assert_mem(&r, MEMTOTAL_BYTES, 384 * MiB, 384 * MiB, "hierarchical_memory_limit");

    /* Unlimited above as well: no limit; an own limit lower than the hierarchy's is kept. */
    char root2[256];
    fake_root(root2, "r2", "4:memory:/a\n");
    v1_mem_level(root2, "/a", "134217728\n");
    put_cgroup_file(root2, "/memory/a", "memory.stat", "hierarchical_memory_limit 402653184\n");
    v1_mem_level(root2, "", V1_UNLIMITED "\n");
    put_cgroup_file(root2, "/memory", "memory.stat", "hierarchical_memory_limit " V1_UNLIMITED "\n");
    r = read_root(root2);
    assert_mem(&r, MEMTOTAL_BYTES, 128 * MiB, 128 * MiB, "own limit below the hierarchy's");
}

/* A mount at a point where another was mounted before hides it: the later one's root cgroup counts. */
Test(sysres, a_later_mount_at_the_same_point_hides_the_earlier)
{
    char root[256];
    fake_root(root, "r", "0::/lxc/c1/app\n");
    mountinfo(root,
              "25 24 0:22 / /sys/fs/cgroup rw,nosuid shared:5 - cgroup2 cgroup2 rw\n"
              "60 25 0:22 /lxc/c1 /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n");
    v2_level(root, "/app", "268435456\n", "50000 100000\n");
    v2_level(root, "/lxc/c1/app", "67108864\n", "10000 100000\n"); /* as the hidden mount would name it */
    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.5, "the later mount's root taken off the path");
    assert_mem(&r, MEMTOTAL_BYTES, 256 * MiB, 256 * MiB, "the later mount's root taken off the path");
}

/* memory and cpu in one v1 hierarchy, mounted where mountinfo says. */
Test(sysres, v1_memory_and_cpu_mounted_together)
{
    char root[256];
    fake_root(root, "r", "4:cpu,memory:/j\n");
    mountinfo(root, "30 22 0:26 / /cg/joint rw - cgroup cgroup rw,cpu,memory\n");
    put(root, "cg/joint/j/memory.limit_in_bytes", "805306368\n");
    put(root, "cg/joint/j/cpu.cfs_quota_us", "250000\n");
    put(root, "cg/joint/j/cpu.cfs_period_us", "100000\n");
    mf_sysres_t r = read_root(root);
    assert_quota(&r, 2.5, "cpu of the joint mount");
    assert_mem(&r, MEMTOTAL_BYTES, 768 * MiB, 768 * MiB, "memory of the joint mount");
}

/* A mountinfo with no cgroup mount (or a line cut short): the usual places are read. */
Test(sysres, mountinfo_without_cgroup_mounts_falls_back_to_the_usual_places)
{
    char root[256];
    fake_root(root, "r", "0::/u\n");
    mountinfo(root,
              "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
              "23 22 0:5 / /proc rw\n"
              "garbage\n");
    v2_level(root, "/u", "1073741824\n", "200000 100000\n");
    mf_sysres_t r = read_root(root);
    assert_quota(&r, 2.0, "/sys/fs/cgroup");
    assert_mem(&r, MEMTOTAL_BYTES, 1 * GiB, 1 * GiB, "/sys/fs/cgroup");
}

/* ---- memory ---- */

/* mem_limit is the lower of MemTotal and the cgroup limit, and whichever is known alone. */
Test(sysres, mem_limit_is_lower_of_total_and_cgroup)
{
    /* cgroup below MemTotal: the cgroup limit */
    char low[256];
    fake_root(low, "low", "0::/app\n");
    v2_level(low, "/app", "1073741824\n", NULL);
    mf_sysres_t r = read_root(low);
    assert_mem(&r, MEMTOTAL_BYTES, 1 * GiB, 1 * GiB, "cgroup below MemTotal");

    /* cgroup above MemTotal (64 GiB on a ~23.5 GiB machine): MemTotal */
    char high[256];
    fake_root(high, "high", "0::/app\n");
    v2_level(high, "/app", "68719476736\n", NULL);
    r = read_root(high);
    assert_mem(&r, MEMTOTAL_BYTES, 64 * GiB, MEMTOTAL_BYTES, "cgroup above MemTotal");

    /* the same through v1 */
    char high1[256];
    fake_root(high1, "high1", "4:memory:/app\n");
    v1_mem_level(high1, "/app", "68719476736\n");
    r = read_root(high1);
    assert_mem(&r, MEMTOTAL_BYTES, 64 * GiB, MEMTOTAL_BYTES, "v1 cgroup above MemTotal");

    /* no meminfo: MemTotal unknown (0), the cgroup limit alone */
    char nomem[256];
    new_root(nomem, "nomem");
    proc_cgroup(nomem, "0::/app\n");
    v2_level(nomem, "/app", "536870912\n", NULL);
    r = read_root(nomem);
    assert_mem(&r, 0, 512 * MiB, 512 * MiB, "no meminfo");

    /* neither known: all 0 */
    char neither[256];
    new_root(neither, "neither");
    proc_cgroup(neither, "0::/app\n");
    v2_level(neither, "/app", "max\n", NULL);
    r = read_root(neither);
    assert_mem(&r, 0, 0, 0, "neither known");
}

/* ---- bad input ---- */

/* A root with no files at all: no limits, MemTotal unknown, CPUs from the process. */
Test(sysres, empty_root)
{
    char root[256];
    new_root(root, "r");
    mf_sysres_t r = read_root(root);
    assert_quota(&r, 0.0, "empty root");
    cr_assert_eq(r.cpus_usable, r.cpus_affinity, "no quota: usable %d, affinity %d",
                 r.cpus_usable, r.cpus_affinity);
    assert_mem(&r, 0, 0, 0, "empty root");

    /* a root that does not exist at all */
    char missing[256];
    snprintf(missing, sizeof missing, "%s/does-not-exist", base);
    r = read_root(missing);
    assert_quota(&r, 0.0, "missing root");
    assert_mem(&r, 0, 0, 0, "missing root");
}

/* Garbage and empty files are no limit; they do not hide a valid limit at another level. */
Test(sysres, malformed_files_are_no_limit)
{
    /* v2: garbage and empty files at every level */
    char v2[256];
    fake_root(v2, "v2", "0::/a/b\n");
    v2_level(v2, "", "", "");
    v2_level(v2, "/a", "lots of memory\n", "garbage\n");
    v2_level(v2, "/a/b", "\n", "100000 0\n"); /* a zero period: no quota */
    mf_sysres_t r = read_root(v2);
    assert_quota(&r, 0.0, "v2 garbage");
    cr_assert_eq(r.cpus_usable, r.cpus_affinity);
    assert_mem(&r, MEMTOTAL_BYTES, 0, MEMTOTAL_BYTES, "v2 garbage");

    /* v2: garbage at the own level, a valid limit at the parent still counts */
    char mixed[256];
    fake_root(mixed, "mixed", "0::/a/b\n");
    v2_level(mixed, "/a", "1073741824\n", "50000 100000\n");
    v2_level(mixed, "/a/b", "garbage\n", "garbage 100000\n");
    r = read_root(mixed);
    assert_quota(&r, 0.5, "garbage below a valid parent");
    cr_assert_eq(r.cpus_usable, 1);
    assert_mem(&r, MEMTOTAL_BYTES, 1 * GiB, 1 * GiB, "garbage below a valid parent");

    /* v1: garbage and empty files */
    char v1[256];
    fake_root(v1, "v1", "4:memory:/a\n1:cpu,cpuacct:/a\n");
    v1_mem_level(v1, "", "");
    v1_mem_level(v1, "/a", "garbage\n");
    v1_cpu_level(v1, "cpu,cpuacct", "", "", "");
    v1_cpu_level(v1, "cpu,cpuacct", "/a", "garbage\n", "100000\n");
    r = read_root(v1);
    assert_quota(&r, 0.0, "v1 garbage");
    assert_mem(&r, MEMTOTAL_BYTES, 0, MEMTOTAL_BYTES, "v1 garbage");

    /* v1: a quota with an empty period file is no quota */
    char noperiod[256];
    fake_root(noperiod, "noperiod", "1:cpu,cpuacct:/a\n");
    v1_cpu_level(noperiod, "cpu,cpuacct", "/a", "50000\n", "");
    r = read_root(noperiod);
    assert_quota(&r, 0.0, "v1 empty period");

    /* garbage /proc/self/cgroup and /proc/meminfo */
    char junk[256];
    new_root(junk, "junk");
    put(junk, "proc/meminfo", "MemTotal: lots kB\nnonsense\n");
    proc_cgroup(junk, "no colons here\n::\n:::\n\n");
    r = read_root(junk);
    assert_quota(&r, 0.0, "garbage cgroup file");
    assert_mem(&r, 0, 0, 0, "garbage cgroup and meminfo");

    /* empty /proc/self/cgroup and /proc/meminfo */
    char empty[256];
    new_root(empty, "empty");
    put(empty, "proc/meminfo", "");
    proc_cgroup(empty, "");
    r = read_root(empty);
    assert_quota(&r, 0.0, "empty cgroup file");
    assert_mem(&r, 0, 0, 0, "empty cgroup and meminfo");
}

/* ---- mf_sysres_cpus_from ---- */

Test(sysres, cpus_from_table)
{
    static const struct {
        int affinity;
        double quota;
        int want;
    } cases[] = {
        {8, 1.5, 2},   /* rounded up */
        {2, 0.2, 1},   /* a fraction of a CPU is one */
        {2, 4.0, 2},   /* the quota above the mask: the mask */
        {4, 0.0, 4},   /* no quota */
        {0, 0.0, 1},   /* at least 1 */
        {4, 2.0, 2},   /* a whole quota is not rounded up further */
        {16, 3.01, 4}, /* just above a whole number */
        {4, -1.0, 4},  /* a negative quota is none */
        {1, 0.5, 1},
        {0, 2.0, 1},   /* no affinity known: still 1 */
        {64, 63.5, 64},
        {32, 1.0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = mf_sysres_cpus_from(cases[i].affinity, cases[i].quota);
        cr_assert_eq(got, cases[i].want, "cpus_from(%d, %g) = %d, want %d", cases[i].affinity,
                     cases[i].quota, got, cases[i].want);
    }
}

/* ---- the real machine ---- */

/* MemTotal in bytes from the real /proc/meminfo, read here. */
static int64_t
real_memtotal(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    cr_assert_not_null(f);
    char line[256];
    long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return (int64_t)kb * 1024;
}

Test(sysres, real_machine)
{
    mf_sysres_t r = read_root("");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_eq(r.cpus_online, online > 0 ? (int)online : 1, "cpus_online %d, sysconf %ld",
                 r.cpus_online, online);
    cr_assert_geq(r.cpus_affinity, 1);
    cr_assert_geq(r.cpus_usable, 1, "cpus_usable %d", r.cpus_usable);
    cr_assert_leq(r.cpus_usable, r.cpus_affinity, "cpus_usable %d above affinity %d",
                  r.cpus_usable, r.cpus_affinity);
    cr_assert_eq(r.cpus_usable, mf_sysres_cpus_from(r.cpus_affinity, r.cpu_quota));

    int64_t total = real_memtotal();
    cr_assert_gt(r.mem_total, 0, "mem_total %lld", (long long)r.mem_total);
    /* MemTotal can move slightly (memory hotplug, balloon); within 1% of what was read here */
    cr_assert_lt(llabs((long long)(r.mem_total - total)), (long long)(total / 100),
                 "mem_total %lld, /proc/meminfo %lld", (long long)r.mem_total, (long long)total);
    cr_assert_gt(r.mem_limit, 0);
    cr_assert_leq(r.mem_limit, r.mem_total);
    if (r.mem_cgroup > 0)
        cr_assert_eq(r.mem_limit, r.mem_cgroup < r.mem_total ? r.mem_cgroup : r.mem_total);
    else
        cr_assert_eq(r.mem_limit, r.mem_total);

    /* the shorthand agrees */
    cr_assert_eq(mf_sysres_cpus(), r.cpus_usable);
}
