/*
 * test_scratch.c: the scratch home of an in-memory engine opened without a
 * path (common/scratch.h). It is made fresh under /tmp and removed at close
 * with everything the engine kept in it (the archive's directory and its
 * files), never following a symbolic link out of it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/scratch.h"

static void
write_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0, "create %s", path);
    cr_assert_eq(write(fd, "x", 1), 1);
    close(fd);
}

Test(scratch, a_made_directory_is_new_and_removed_with_its_tree)
{
    char a[64], b[64], path[256];
    cr_assert_eq(mf_scratch_make(a, sizeof(a)), 0);
    cr_assert_eq(mf_scratch_make(b, sizeof(b)), 0);
    cr_assert_str_neq(a, b);
    cr_assert_eq(strncmp(a, "/tmp/mayfly-mem-", 16), 0, "%s", a);
    snprintf(path, sizeof(path), "%s/archive", a);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/archive/0001", a);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/archive/0001/seg.zst", a);
    write_file(path);
    snprintf(path, sizeof(path), "%s/WiredTiger.lock", a);
    write_file(path);
    mf_scratch_remove(a);
    cr_assert_eq(access(a, F_OK), -1, "%s removed", a);
    cr_assert_eq(access(b, F_OK), 0, "the other one stays");
    mf_scratch_remove(b);
    cr_assert_eq(access(b, F_OK), -1);
    mf_scratch_remove(""); /* a no-op */
}

Test(scratch, removal_never_follows_a_link_out_of_the_tree)
{
    char dir[64], outside[64], path[256], target[256];
    cr_assert_eq(mf_scratch_make(dir, sizeof(dir)), 0);
    cr_assert_eq(mf_scratch_make(outside, sizeof(outside)), 0);
    snprintf(target, sizeof(target), "%s/keep", outside);
    write_file(target);
    snprintf(path, sizeof(path), "%s/link", dir);
    cr_assert_eq(symlink(outside, path), 0);
    mf_scratch_remove(dir);
    cr_assert_eq(access(dir, F_OK), -1);
    cr_assert_eq(access(target, F_OK), 0, "the linked directory's file survives");
    mf_scratch_remove(outside);
}

Test(scratch, a_too_short_buffer_is_refused)
{
    char small[16] = "x";
    cr_assert_eq(mf_scratch_make(small, sizeof(small)), -1);
    cr_assert_str_eq(small, "");
}
