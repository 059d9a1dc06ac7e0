/*
 * test_fds.c: file descriptors as a shared resource (common/fds.h), socket-
 * free. Near the soft limit mf_fds_free counts exactly (each descriptor
 * opened is one fewer, 0 when none can be opened); mf_fd_in_reserve is true
 * only within the last reserve numbers below the limit; and the storage
 * adapter refuses a table create with TooManyFilesOpen (264) while fewer
 * than MF_FDS_CREATE_RESERVE descriptors are left, creating it once some
 * are free again (WiredTiger would otherwise panic mid-create), and a
 * cursor open likewise under MF_FDS_OPEN_RESERVE (the server's own _mf_
 * tables excepted) once a socket in the reserve makes it count.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fds.h"
#include "storage/storage.h"

static struct rlimit saved;

/* Descriptors open now, counted here independently of fds.c. */
static int64_t
count_open(void)
{
    int64_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own */
}

/*
 * Lowers the soft limit to what is open now plus room (under
 * MF_FDS_CONN_RESERVE, so that mf_fds_free counts exactly).
 */
static int64_t
limit_to_room(int64_t room)
{
    int64_t open_now = count_open();
    struct rlimit lim = saved;
    lim.rlim_cur = (rlim_t)(open_now + room);
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
    return open_now + room;
}

static void
save_limit(void)
{
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
}

static void
restore_limit(void)
{
    setrlimit(RLIMIT_NOFILE, &saved);
}

TestSuite(fds, .init = save_limit, .fini = restore_limit);

/* A storage in a fresh temporary directory (its path into dir, 64 bytes). */
static mf_storage_t *
storage_in(char *dir)
{
    mf_storage_t *st;
    mf_error_t err = {0};
    snprintf(dir, 64, "/tmp/mf-test-fds-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(mf_storage_open(dir, &st, &err), 0, "open: %s", err.msg);
    return st;
}

/* Closes st and removes its directory. */
static void
storage_done(mf_storage_t *st, const char *dir)
{
    char cmd[128];
    mf_storage_close(st);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(fds, free_counts_exactly_near_the_limit_and_bounds_it_below_otherwise)
{
    int fds[200], n = 0;
    limit_to_room(40);
    int64_t before = mf_fds_free();
    cr_assert_eq(before, 40);
    for (; n < 10; n++)
        cr_assert_geq(fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
    cr_assert_eq(mf_fds_free(), before - 10);
    while (n < 200 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        n++;
    cr_assert_lt(n, 200, "the limit stopped the opens");
    cr_assert_eq(mf_fds_free(), 0, "not one more can be opened");
    for (int i = 0; i < n; i++)
        close(fds[i]);
    cr_assert_eq(mf_fds_free(), before);
    /* Far from it, a lower bound (the descriptor table's size stands for the open ones). */
    int64_t limit = limit_to_room(5000);
    int64_t lower = mf_fds_free();
    cr_assert(lower >= limit - 1024 && lower <= 5000, "free %lld with 5000 of room", (long long)lower);
}

Test(fds, reserve_is_the_last_numbers_below_the_limit)
{
    cr_assert(!mf_fd_in_reserve(10, 1024, 64));
    cr_assert(!mf_fd_in_reserve(959, 1024, 64));
    cr_assert(mf_fd_in_reserve(960, 1024, 64));
    cr_assert(mf_fd_in_reserve(1023, 1024, 64));
    cr_assert(!mf_fd_in_reserve(1000000, INT64_MAX, 64), "no limit: never");
    cr_assert(!mf_fd_in_reserve(-1, 10, 64), "not a descriptor");
}

Test(fds, a_table_create_is_refused_with_264_while_too_few_are_left)
{
    char dir[64];
    mf_error_t err = {0};
    mf_storage_t *st = storage_in(dir);
    mf_sess_t *s = mf_storage_session(st);

    limit_to_room(MF_FDS_CREATE_RESERVE - 5);
    cr_assert_neq(mf_storage_create(s, "table:coll-a", "key_format=q,value_format=u", &err), 0);
    cr_assert_eq(err.code, MF_E_TooManyFilesOpen, "code %d: %s", err.code, err.msg);
    cr_assert_not_null(strstr(err.msg, "Too many open files"), "%s", err.msg);

    limit_to_room(MF_FDS_CREATE_RESERVE + 30);
    mf_err_clear(&err);
    cr_assert_eq(mf_storage_create(s, "table:coll-a", "key_format=q,value_format=u", &err), 0, "%s", err.msg);
    restore_limit();
    storage_done(st, dir);
}

Test(fds, a_cursor_open_is_refused_with_264_while_too_few_are_left_and_the_servers_own_tables_are_not)
{
    char dir[64];
    mf_cur_t *cur;
    mf_error_t err = {0};
    mf_storage_t *st = storage_in(dir);
    mf_sess_t *s = mf_storage_session(st);
    cr_assert_eq(mf_storage_create(s, "table:coll-b", "key_format=q,value_format=u", &err), 0, "%s", err.msg);
    cr_assert_eq(mf_storage_create(s, "table:_mf_test", "key_format=q,value_format=u", &err), 0, "%s", err.msg);
    /* Far from the limit an open spends a budget counted once. */
    cr_assert_eq(mf_cur_open(s, "table:coll-b", &cur, &err), 0, "%s", err.msg);
    mf_cur_close(cur);
    mf_storage_session_release(s);

    /* Near it: an accepted socket in the reserve makes the next open count, and it is refused. */
    limit_to_room(MF_FDS_OPEN_RESERVE - 5);
    mf_storage_fds_low(st);
    cr_assert_neq(mf_cur_open(s, "table:coll-b", &cur, &err), 0, "refused near the limit");
    cr_assert_eq(err.code, MF_E_TooManyFilesOpen, "code %d: %s", err.code, err.msg);
    cr_assert_not_null(strstr(err.msg, "too few to open table:coll-b"), "%s", err.msg);
    /* The server's own tables (catalog, sizes: a bounded number) are not refused. */
    mf_err_clear(&err);
    cr_assert_eq(mf_cur_open(s, "table:_mf_test", &cur, &err), 0, "%s", err.msg);
    mf_cur_close(cur);
    mf_storage_session_release(s);

    /* Room again: the next open counts and goes ahead. */
    limit_to_room(MF_FDS_OPEN_RESERVE + 60);
    mf_err_clear(&err);
    cr_assert_eq(mf_cur_open(s, "table:coll-b", &cur, &err), 0, "%s", err.msg);
    mf_cur_close(cur);
    mf_storage_session_release(s);
    restore_limit();
    storage_done(st, dir);
}
