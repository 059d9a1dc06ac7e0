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

/*
 * v1 memory: the level's own limit, and the lowest over it and every level
 * above (memory.stat's hierarchical_memory_limit), which counts the levels
 * a container cannot see (its mount's root is its own cgroup).
 */
static void
read_v1_mem(const char *root, const char *dir, level_t *l)
{
    char path[PATH_MAX_LEN], line[128], full[PATH_MAX_LEN];
    int64_t v;
    l->quota = 0;
    l->mem = 0;
    snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir);
    if (read_line(root, path, line, sizeof(line)) && parse_i64(line, &v) && v > 0 && v < NO_LIMIT_BYTES)
        l->mem = v;
    if ((size_t)snprintf(full, sizeof(full), "%s%s/memory.stat", root, dir) >= sizeof(full))
        return;
    FILE *f = fopen(full, "r");
    if (f == NULL)
        return;
    while (fgets(line, sizeof(line), f) != NULL) {
        long long h;
        char extra;
        if (sscanf(line, "hierarchical_memory_limit %lld %c", &h, &extra) == 1) {
            if (h > 0 && h < NO_LIMIT_BYTES && (l->mem == 0 || h < l->mem))
                l->mem = h;
            break;
        }
    }
    fclose(f);
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

/*
 * A cgroup hierarchy's mount as /proc/self/mountinfo shows it: where it is
 * mounted (point) and which cgroup its root directory is (croot: "/", or
 * the host's name for a container's own cgroup). point[0] == '\0': not found.
 */
typedef struct {
    char point[PATH_MAX_LEN], croot[PATH_MAX_LEN];
} mount_t;

typedef struct {
    mount_t v2, mem, cpu;
} mounts_t;

/* Copies field src into dst (cap bytes), decoding mountinfo's octal escapes (\040 for a space). */
static void
unescape(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    while (*src != '\0' && n + 1 < cap) {
        if (src[0] == '\\' && src[1] >= '0' && src[1] <= '3' && src[2] >= '0' && src[2] <= '7' && src[3] >= '0' &&
            src[3] <= '7') {
            dst[n++] = (char)((src[1] - '0') * 64 + (src[2] - '0') * 8 + (src[3] - '0'));
            src += 4;
        } else {
            dst[n++] = *src++;
        }
    }
    dst[n] = '\0';
}

/* Takes a mount line's root and point (escaped fields) into m. */
static void
mount_set(mount_t *m, const char *croot, const char *point)
{
    unescape(m->point, sizeof(m->point), point);
    unescape(m->croot, sizeof(m->croot), croot);
}

/* Whether m is unset, or set from an earlier mount at the escaped point (which a later one there hides). */
static bool
mount_open(const mount_t *m, const char *point)
{
    char p[PATH_MAX_LEN];
    if (m->point[0] == '\0')
        return true;
    unescape(p, sizeof(p), point);
    return strcmp(p, m->point) == 0;
}

/*
 * The cgroup mounts this process sees, the first of each kind (or the last
 * at that first one's point, which hides those before it): the v2
 * hierarchy (fstype cgroup2) and the v1 hierarchies carrying the memory and
 * the cpu controllers (fstype cgroup, the controller among the super
 * options). A line reads "id parent major:minor root point options
 * [optional...] - fstype source superoptions".
 */
static void
read_mounts(const char *root, mounts_t *mt)
{
    char full[PATH_MAX_LEN];
    char *line = NULL;
    size_t cap = 0;
    memset(mt, 0, sizeof(*mt));
    snprintf(full, sizeof(full), "%s/proc/self/mountinfo", root);
    FILE *f = fopen(full, "r");
    if (f == NULL)
        return;
    while (getline(&line, &cap, f) > 0) {
        size_t len = strcspn(line, "\n");
        line[len] = '\0';
        char *field[5], *save = NULL, *p = line;
        int n = 0;
        for (char *t; n < 5 && (t = strtok_r(p, " ", &save)) != NULL; p = NULL)
            field[n++] = t;
        char *rest = n == 5 ? field[4] + strlen(field[4]) + 1 : NULL; /* past the point's end: the options on */
        char *sep = rest != NULL && rest <= line + len ? strstr(rest, " - ") : NULL;
        if (sep == NULL)
            continue;
        char *fstype = strtok_r(sep + 3, " ", &save), *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
        char *opts = source ? strtok_r(NULL, " ", &save) : NULL;
        if (fstype == NULL)
            continue;
        if (strcmp(fstype, "cgroup2") == 0 && mount_open(&mt->v2, field[4])) {
            mount_set(&mt->v2, field[3], field[4]);
        } else if (strcmp(fstype, "cgroup") == 0 && opts != NULL) {
            /* memory and cpu may be mounted together */
            if (has_controller(opts, "memory") && mount_open(&mt->mem, field[4]))
                mount_set(&mt->mem, field[3], field[4]);
            if (has_controller(opts, "cpu") && mount_open(&mt->cpu, field[4]))
                mount_set(&mt->cpu, field[3], field[4]);
        }
    }
    free(line);
    fclose(f);
}

/*
 * The process's cgroup path cg as a path under mount m (into out, cap
 * bytes): cg less the mount's root cgroup when cg lies under it; else cg
 * itself (a namespace's own view; levels that do not exist are skipped).
 */
static const char *
under_mount(const mount_t *m, const char *cg, char *out, size_t cap)
{
    size_t n = strlen(m->croot);
    while (n > 0 && m->croot[n - 1] == '/')
        n--; /* "/" is the empty prefix */
    if (n > 0 && strncmp(cg, m->croot, n) == 0 && (cg[n] == '/' || cg[n] == '\0')) {
        snprintf(out, cap, "%s", cg[n] == '\0' ? "/" : cg + n);
        return out;
    }
    return cg;
}

/*
 * Walks cgroup path cg of hierarchy m with rd: from where mountinfo says m
 * is mounted, relative to the cgroup at the mount's root; or, when
 * mountinfo named no such mount, from the usual place (cg whole).
 */
static void
walk_mount(const char *root, const mount_t *m, const char *usual, const char *cg,
           void (*rd)(const char *, const char *, level_t *), double *quota, int64_t *mem)
{
    char rel[PATH_MAX_LEN];
    if (m->point[0] != '\0')
        walk(root, m->point, under_mount(m, cg, rel, sizeof(rel)), rd, quota, mem);
    else
        walk(root, usual, cg, rd, quota, mem);
}

/* The cgroup limits of this process (see the header comment of sysres.h). */
static void
read_cgroups(const char *root, double *quota, int64_t *mem)
{
    char full[PATH_MAX_LEN];
    char *line = NULL; /* getline's: a cgroup path may be longer than any fixed buffer */
    size_t cap = 0;
    mounts_t mt;
    *quota = 0;
    *mem = 0;
    read_mounts(root, &mt);
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
        /*
         * Where each hierarchy is mounted comes from mountinfo; without it,
         * where systemd and Docker mount them.
         */
        if (ctrls[0] == '\0') {
            /* cgroup v2: one hierarchy for every controller (under /sys/fs/cgroup/unified beside v1 ones). */
            walk_mount(root, &mt.v2, "/sys/fs/cgroup", path, read_v2, quota, mem);
            continue;
        }
        /* v1: a hierarchy may carry several controllers (memory and cpu mounted together, say). */
        if (has_controller(ctrls, "memory"))
            walk_mount(root, &mt.mem, "/sys/fs/cgroup/memory", path, read_v1_mem, quota, mem);
        if (has_controller(ctrls, "cpu")) {
            /* Mounted under its joint name (cpu,cpuacct) on most systems, else as cpu. */
            const char *usual =
                is_dir(root, "/sys/fs/cgroup/cpu,cpuacct") ? "/sys/fs/cgroup/cpu,cpuacct" : "/sys/fs/cgroup/cpu";
            walk_mount(root, &mt.cpu, usual, path, read_v1_cpu, quota, mem);
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
