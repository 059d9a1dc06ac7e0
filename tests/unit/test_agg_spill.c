/*
 * test_agg_spill.c: the external sorter (src/query/agg_spill.c): sorted runs
 * on disk past the budget, a stable k-way merge, 292 without disk use, and
 * temporary files removed when the sorter is freed and at startup, and the
 * memory accounting (what counts against the budget is what is allocated).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "query/agg_spill.h"

static char dir[256];
static char *spill_dir; /* <dir>/_tmp, from mf_spill_dir_prepare */

/* Open file descriptors of this process (run files left open would show here). */
static int
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int
count_files(void)
{
    char p[300];
    DIR *d;
    struct dirent *e;
    int n = 0;

    snprintf(p, sizeof p, "%s/_tmp", dir);
    if ((d = opendir(p)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "agg-", 4) == 0)
            n++;
    closedir(d);
    return n;
}

static void
setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/mf-spill-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    spill_dir = mf_spill_dir_prepare(dir);
}

static void
teardown(void)
{
    char cmd[300];
    free(spill_dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Orders by "k" (int32), ties left in input order. */
static int
by_k(void *arg, const bson_t *a, const bson_t *b)
{
    bson_iter_t ia, ib;
    (void)arg;
    cr_assert(bson_iter_init_find(&ia, a, "k") && bson_iter_init_find(&ib, b, "k"));
    return bson_iter_int32(&ia) - bson_iter_int32(&ib);
}

static bson_t *
doc(int i, int k)
{
    bson_t *d = bson_new();
    char pad[100];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    BSON_APPEND_INT32(d, "i", i);
    BSON_APPEND_INT32(d, "k", k);
    BSON_APPEND_UTF8(d, "pad", pad);
    return d;
}

TestSuite(agg_spill, .init = setup, .fini = teardown);

Test(agg_spill, spills_runs_and_merges_stably)
{
    const int n = 5000;
    mf_error_t err = {0};
    int fds_before = count_fds();
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, 100000, true, "over", spill_dir);
    for (int i = 0; i < n; i++)
        cr_assert_eq(mf_sorter_add(s, doc(i, (i * 7919) % 97), &err), 0, "%s", err.msg);
    cr_assert_gt(mf_sorter_spilled(s), 1, "runs written: %lld", (long long)mf_sorter_spilled(s));
    cr_assert_eq(count_files(), (int)mf_sorter_spilled(s));
    cr_assert_eq(mf_sorter_finish(s, &err), 0, "%s", err.msg);
    int got = 0, prev_k = -1, prev_i = -1;
    for (;;) {
        bson_t *d;
        bson_iter_t it;
        cr_assert_eq(mf_sorter_next(s, &d, &err), 0, "%s", err.msg);
        if (d == NULL)
            break;
        cr_assert(bson_iter_init_find(&it, d, "k"));
        int k = bson_iter_int32(&it);
        cr_assert(bson_iter_init_find(&it, d, "i"));
        int i = bson_iter_int32(&it);
        cr_assert_geq(k, prev_k, "order: %d after %d", k, prev_k);
        if (k == prev_k)
            cr_assert_gt(i, prev_i, "stable: input %d after %d for key %d", i, prev_i, k);
        prev_k = k;
        prev_i = i;
        got++;
        bson_destroy(d);
    }
    cr_assert_eq(got, n);
    mf_sorter_free(s);
    cr_assert_eq(count_files(), 0, "files removed on free");
    cr_assert_eq(count_fds(), fds_before, "no run file left open");
}

Test(agg_spill, without_disk_use_the_budget_is_292)
{
    mf_error_t err = {0};
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, 10000, false, "Sort exceeded memory limit", spill_dir);
    int rc = 0;
    for (int i = 0; i < 1000 && rc == 0; i++)
        rc = mf_sorter_add(s, doc(i, i), &err);
    cr_assert_eq(rc, -1);
    cr_assert_eq(err.code, MF_E_QueryExceededMemoryLimitNoDiskUseAllowed);
    cr_assert_str_eq(err.msg, "Sort exceeded memory limit");
    cr_assert_eq(count_files(), 0);
    mf_sorter_free(s);
}

Test(agg_spill, freeing_mid_merge_removes_files_and_startup_clears_leftovers)
{
    mf_error_t err = {0};
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, 1000, true, "over", spill_dir);
    for (int i = 0; i < 3000; i++)
        cr_assert_eq(mf_sorter_add(s, doc(i, 3000 - i), &err), 0, "%s", err.msg);
    cr_assert_eq(mf_sorter_finish(s, &err), 0);
    bson_t *d;
    cr_assert_eq(mf_sorter_next(s, &d, &err), 0);
    cr_assert_not_null(d);
    bson_destroy(d);
    cr_assert_gt(count_files(), 0);
    mf_sorter_free(s);
    cr_assert_eq(count_files(), 0);

    /* A file left by an earlier process is removed by mf_spill_dir_prepare. */
    char p[320];
    snprintf(p, sizeof p, "%s/_tmp/agg-1-1.run", dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(count_files(), 1);
    free(mf_spill_dir_prepare(dir));
    cr_assert_eq(count_files(), 0);
}

Test(agg_spill, many_runs_are_compacted_and_stay_stable)
{
    const int n = 40000;
    mf_error_t err = {0};
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, 1, true, "over", spill_dir);
    for (int i = 0; i < n; i++)
        cr_assert_eq(mf_sorter_add(s, doc(i, (i * 31) % 11), &err), 0, "%s", err.msg);
    cr_assert_gt(mf_sorter_spilled(s), 64, "runs written: %lld", (long long)mf_sorter_spilled(s));
    cr_assert_leq(count_files(), 64, "files open at once: %d", count_files());
    cr_assert_eq(mf_sorter_finish(s, &err), 0, "%s", err.msg);
    int got = 0, prev_k = -1, prev_i = -1;
    bson_t *d;
    while (mf_sorter_next(s, &d, &err) == 0 && d != NULL) {
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, d, "k"));
        int k = bson_iter_int32(&it);
        cr_assert(bson_iter_init_find(&it, d, "i"));
        int i = bson_iter_int32(&it);
        cr_assert_geq(k, prev_k);
        if (k == prev_k)
            cr_assert_gt(i, prev_i, "stable: input %d after %d for key %d", i, prev_i, k);
        prev_k = k;
        prev_i = i;
        got++;
        bson_destroy(d);
    }
    cr_assert_eq(got, n);
    mf_sorter_free(s);
    cr_assert_eq(count_files(), 0);
}

Test(agg_spill, top_k_keeps_only_the_first_documents_in_memory)
{
    mf_error_t err = {0};
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, 1 << 20, false, "over", spill_dir);
    mf_sorter_set_limit(s, 10);
    for (int i = 0; i < 100000; i++)
        cr_assert_eq(mf_sorter_add(s, doc(i, 100000 - i), &err), 0, "%s", err.msg);
    cr_assert_eq(mf_sorter_spilled(s), 0);
    cr_assert_lt(mf_sorter_mem(s), 1 << 20);
    cr_assert_eq(mf_sorter_finish(s, &err), 0);
    bson_t *d;
    bson_iter_t it;
    cr_assert_eq(mf_sorter_next(s, &d, &err), 0);
    cr_assert(bson_iter_init_find(&it, d, "k"));
    cr_assert_eq(bson_iter_int32(&it), 1);
    bson_destroy(d);
    mf_sorter_free(s);
}

Test(agg_spill, the_budget_counts_documents_and_pointer_arrays)
{
    mf_error_t err = {0};
    const int n = 500;
    int64_t bytes = 0;
    /* A 100,000-byte budget: 4 KiB chunks (a power of two up to a sixteenth of it). */
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, 100000, false, "over", spill_dir);
    for (int i = 0; i < n; i++) {
        bson_t *d = doc(i, n - i);
        bytes += d->len;
        cr_assert_eq(mf_sorter_add(s, d, &err), 0, "%s", err.msg);
    }
    /* The documents, the pointer array (512 entries) and the sort's scratch pointers (one per document). */
    int64_t floor = bytes + (512 + n) * (int64_t)sizeof(void *);
    cr_assert_geq(mf_sorter_mem(s), floor, "accounted %lld, allocated at least %lld", (long long)mf_sorter_mem(s),
                  (long long)floor);
    /* Chunks add at most a document's worth of slack each, plus the last chunk's free space. */
    cr_assert_leq(mf_sorter_mem(s), floor + (bytes / 4096 + 2) * 150 + 4096, "accounted %lld for %lld", (long long)mf_sorter_mem(s),
                  (long long)floor);
    cr_assert_eq(mf_sorter_finish(s, &err), 0, "%s", err.msg);
    bson_t *d;
    int got = 0;
    while (mf_sorter_next(s, &d, &err) == 0 && d != NULL) {
        got++;
        bson_destroy(d);
    }
    cr_assert_eq(got, n);
    cr_assert_eq(mf_sorter_mem(s), 0, "the drained in-memory run is released: %lld", (long long)mf_sorter_mem(s));
    mf_sorter_free(s);
}

Test(agg_spill, a_spilling_sorter_stays_within_its_budget)
{
    mf_error_t err = {0};
    const int64_t budget = 200000;
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, budget, true, "over", spill_dir);
    for (int i = 0; i < 20000; i++) {
        cr_assert_eq(mf_sorter_add(s, doc(i, (i * 7919) % 1000), &err), 0, "%s", err.msg);
        cr_assert_leq(mf_sorter_mem(s), budget, "after %d documents: %lld bytes held", i + 1,
                      (long long)mf_sorter_mem(s));
    }
    cr_assert_gt(mf_sorter_spilled(s), 5);
    mf_sorter_free(s);
}

Test(agg_spill, without_disk_use_292_comes_when_the_documents_reach_the_budget)
{
    /* Neither much earlier (MongoDB fails once the input exceeds the budget) nor later. */
    mf_error_t err = {0};
    const int64_t budget = 100000;
    int64_t bytes = 0;
    int rc = 0;
    mf_sorter_t *s = mf_sorter_new(by_k, NULL, budget, false, "over", spill_dir);
    while (rc == 0) {
        bson_t *d = doc(0, 0);
        bytes += d->len;
        rc = mf_sorter_add(s, d, &err);
    }
    cr_assert_eq(err.code, MF_E_QueryExceededMemoryLimitNoDiskUseAllowed);
    cr_assert_geq(bytes, budget * 8 / 10, "failed after %lld bytes of documents", (long long)bytes);
    cr_assert_leq(bytes, budget, "failed after %lld bytes of documents", (long long)bytes);
    mf_sorter_free(s);
}
