/*
 * sysres.c: the CPUs and memory granted to this process (see sysres.h).
 *
 * Only small text files are read, each with one fopen; a file that is
 * missing, unreadable or malformed is "no limit" at that level, never an
 * error: the server then sizes itself from the machine as before.
 */
#include "common/sysres.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_MAX_LEN 4096
#define NO_LIMIT_BYTES (INT64_C(1) << 62) /* cgroup v1 writes "unlimited" as a page-rounded INT64_MAX */

/* Reads the first line of root+path into buf (newline stripped). true on success. */
static bool
read_line(const char *root, const char *path, char *buf, size_t len)
{
    char full[PATH_MAX_LEN];
    bool ok = false;
    if ((size_t)snprintf(full, sizeof(full), "%s%s", root, path) >= sizeof(full))
        return false;
    FILE *f = fopen(full, "r");
    if (f == NULL)
        return false;
    if (fgets(buf, (int)len, f) != NULL) {
        buf[strcspn(buf, "\n")] = '\0';
        ok = true;
    }
    fclose(f);
    return ok;
}

/* Parses a whole decimal integer (surrounding blanks allowed). */
static bool
parse_i64(const char *s, int64_t *out)
{
    char *end;
    while (*s == ' ' || *s == '\t')
        s++;
    if (*s == '\0')
        return false;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool
is_dir(const char *root, const char *path)
{
    char full[PATH_MAX_LEN];
    struct stat sb;
    if ((size_t)snprintf(full, sizeof(full), "%s%s", root, path) >= sizeof(full))
        return false;
    return stat(full, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* One cgroup level's limits (dir: the level's directory, root-relative). */
typedef struct {
    double quota;  /* CPUs, 0 = none */
    int64_t mem;   /* bytes, 0 = none */
} level_t;

static void
read_v2(const char *root, const char *dir, level_t *l)
{
    char path[PATH_MAX_LEN], line[128];
    int64_t v;
    l->quota = 0;
    l->mem = 0;
    snprintf(path, sizeof(path), "%s/memory.max", dir);
    if (read_line(root, path, line, sizeof(line)) && parse_i64(line, &v) && v > 0 && v < NO_LIMIT_BYTES)
        l->mem = v;
    snprintf(path, sizeof(path), "%s/cpu.max", dir);
    if (read_line(root, path, line, sizeof(line))) {
        long long q, p;
        char extra;
        if (sscanf(line, "%lld %lld %c", &q, &p, &extra) == 2 && q > 0 && p > 0)
            l->quota = (double)q / (double)p;
    }
}

static void
read_v1_mem(const char *root, const char *dir, level_t *l)
{
    char path[PATH_MAX_LEN], line[128];
    int64_t v;
    l->quota = 0;
    l->mem = 0;
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir);
    if (read_line(root, path, line, sizeof(line)) && parse_i64(line, &v) && v > 0 && v < NO_LIMIT_BYTES)
        l->mem = v;
}

static void
read_v1_cpu(const char *root, const char *dir, level_t *l)
{
    char path[PATH_MAX_LEN], line[128];
    int64_t q, p;
    l->quota = 0;
    l->mem = 0;
    snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
    if (!read_line(root, path, line, sizeof(line)) || !parse_i64(line, &q) || q <= 0)
        return;
    snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
    if (read_line(root, path, line, sizeof(line)) && parse_i64(line, &p) && p > 0)
        l->quota = (double)q / (double)p;
}

/*
 * Walks from mount/cg up to mount, calling rd at each level that exists, and
 * lowers *quota / *mem (0 = none so far) to each level's non-zero limit.
 */
static void
walk(const char *root, const char *mount, const char *cg, void (*rd)(const char *, const char *, level_t *),
     double *quota, int64_t *mem)
{
    char rel[PATH_MAX_LEN], dir[PATH_MAX_LEN];
    snprintf(rel, sizeof(rel), "%s", cg[0] == '/' ? cg : "/");
    for (;;) {
        size_t n = strlen(rel);
        while (n > 1 && rel[n - 1] == '/')
            rel[--n] = '\0';
        snprintf(dir, sizeof(dir), "%s%s", mount, strcmp(rel, "/") == 0 ? "" : rel);
        if (is_dir(root, dir)) {
            level_t l;
            rd(root, dir, &l);
            if (l.quota > 0 && (*quota == 0 || l.quota < *quota))
                *quota = l.quota;
            if (l.mem > 0 && (*mem == 0 || l.mem < *mem))
                *mem = l.mem;
        }
        if (strcmp(rel, "/") == 0)
            break;
        char *slash = strrchr(rel, '/');
        if (slash == rel)
            rel[1] = '\0';
        else
            *slash = '\0';
    }
}

/* Whether the comma-separated list names controller c. */
static bool
has_controller(const char *list, const char *c)
{
    size_t n = strlen(c);
    for (const char *p = list; *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && strncmp(p, c, n) == 0)
            return true;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return false;
}

/* The cgroup limits of this process (see the header comment of sysres.h). */
static void
read_cgroups(const char *root, double *quota, int64_t *mem)
{
    char full[PATH_MAX_LEN];
    char *line = NULL; /* getline's: a cgroup path may be longer than any fixed buffer */
    size_t cap = 0;
    *quota = 0;
    *mem = 0;
    snprintf(full, sizeof(full), "%s/proc/self/cgroup", root);
    FILE *f = fopen(full, "r");
    if (f == NULL)
        return;
    while (getline(&line, &cap, f) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (strlen(path) >= PATH_MAX_LEN - 64)
            continue; /* longer than the files under it could be named here: no limit read */
        if (ctrls[0] == '\0') {
            /* cgroup v2: one hierarchy for every controller. */
            walk(root, "/sys/fs/cgroup", path, read_v2, quota, mem);
            continue;
        }
        /* v1: a hierarchy may carry several controllers (memory and cpu mounted together, say). */
        if (has_controller(ctrls, "memory"))
            walk(root, "/sys/fs/cgroup/memory", path, read_v1_mem, quota, mem);
        if (has_controller(ctrls, "cpu")) {
            /* Mounted under its joint name (cpu,cpuacct) on most systems, else as cpu. */
            const char *mount = is_dir(root, "/sys/fs/cgroup/cpu,cpuacct") ? "/sys/fs/cgroup/cpu,cpuacct"
                                                                              : "/sys/fs/cgroup/cpu";
            walk(root, mount, path, read_v1_cpu, quota, mem);
        }
    }
    free(line);
    fclose(f);
}

static int64_t
read_mem_total(const char *root)
{
    char full[PATH_MAX_LEN], line[256];
    int64_t kb = 0;
    snprintf(full, sizeof(full), "%s/proc/meminfo", root);
    FILE *f = fopen(full, "r");
    if (f != NULL) {
        while (fgets(line, sizeof(line), f) != NULL) {
            long long v;
            if (sscanf(line, "MemTotal: %lld kB", &v) == 1 && v > 0) {
                kb = v;
                break;
            }
        }
        fclose(f);
    }
    if (kb > 0)
        return kb * 1024;
    if (root[0] != '\0')
        return 0; /* a fake tree without meminfo: unknown, not this machine's */
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (int64_t)pages * psize : 0;
}

int
mf_sysres_cpus_from(int affinity, double quota)
{
    int n = affinity > 0 ? affinity : 1;
    if (quota > 0) {
        double q = ceil(quota);
        if (q < (double)n)
            n = (int)q;
    }
    return n > 0 ? n : 1;
}

void
mf_sysres_read(const char *root, mf_sysres_t *out)
{
    memset(out, 0, sizeof(*out));
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    out->cpus_online = online > 0 ? (int)online : 1;
    cpu_set_t set;
    out->cpus_affinity = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 ? CPU_COUNT(&set)
                                                                                             : out->cpus_online;
    read_cgroups(root, &out->cpu_quota, &out->mem_cgroup);
    out->cpus_usable = mf_sysres_cpus_from(out->cpus_affinity, out->cpu_quota);
    out->mem_total = read_mem_total(root);
    out->mem_limit = out->mem_total;
    if (out->mem_cgroup > 0 && (out->mem_limit == 0 || out->mem_cgroup < out->mem_limit))
        out->mem_limit = out->mem_cgroup;
}

int
mf_sysres_cpus(void)
{
    mf_sysres_t r;
    mf_sysres_read("", &r);
    return r.cpus_usable;
}
