/*
 * fds.c: counting file descriptors against RLIMIT_NOFILE (see fds.h).
 */
#include "common/fds.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

int64_t
mf_fds_limit(void)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > (rlim_t)INT64_MAX)
        return INT64_MAX;
    return (int64_t)lim.rlim_cur;
}

/* The size of this process's descriptor table (FDSize), or -1: no descriptor open is numbered at or above it. */
static int64_t
table_size(void)
{
    char line[128];
    long long n = -1;
    FILE *f = fopen("/proc/self/status", "re");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "FDSize:", 7) == 0) {
            if (sscanf(line + 7, "%lld", &n) != 1)
                n = -1;
            break;
        }
    }
    fclose(f);
    return n;
}

int64_t
mf_fds_free(void)
{
    int64_t limit = mf_fds_limit(), open_fds = 0;
    if (limit == INT64_MAX)
        return INT64_MAX;
    int64_t size = table_size();
    if (size >= 0 && size + MF_FDS_CONN_RESERVE <= limit)
        return limit - size; /* at most size are open */
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return errno == EMFILE || errno == ENFILE ? 0 : INT64_MAX; /* no /proc: not known, not refused */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.')
            open_fds++;
    }
    closedir(d);
    open_fds--; /* the directory's own descriptor, closed now */
    return open_fds < limit ? limit - open_fds : 0;
}
