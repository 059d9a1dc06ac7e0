/*
 * scratch.c: in-memory engines' scratch home directories (see scratch.h).
 * The tree is removed depth first with nftw(3), never crossing a symbolic
 * link or another file system.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/scratch.h"

int
mf_scratch_make(char *buf, size_t len)
{
    if (len < 32) {
        if (len > 0)
            buf[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    snprintf(buf, len, "/tmp/mayfly-mem-XXXXXX");
    if (mkdtemp(buf) == NULL) {
        buf[0] = '\0';
        return -1;
    }
    return 0;
}

static int
remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    (void)remove(path);
    return 0; /* carry on past what cannot be removed */
}

void
mf_scratch_remove(const char *dir)
{
    if (dir == NULL || dir[0] == '\0')
        return;
    (void)nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
