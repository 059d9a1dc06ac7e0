/*
 * test_latency.c: the operation latency histograms behind serverStatus
 * opLatencies and $collStats latencyStats (common/curop.h). Buckets are
 * MongoDB's: every bucket's lower bound maps back to it, the value just
 * below the next bound still does, and the bounds are the ones mongod
 * prints. Client operations are counted by kind when they end, server-wide
 * and per namespace; background work and operations left without a kind
 * are not.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "common/curop.h"

Test(latency, bucket_bounds_are_mongods)
{
    /* Spot values of mongod's OperationLatencyHistogram bounds. */
    static const uint64_t known[][2] = {{0, 0},        {1, 2},        {10, 1024},        {11, 2048},
                                        {12, 3072},    {13, 4096},    {14, 6144},        {29, 1048576},
                                        {30, 1572864}, {31, 2097152}, {32, 4194304},     {50, 1099511627776ULL}};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        cr_assert_eq(mf_latency_lower_bound((int)known[i][0]), known[i][1], "bucket %d", (int)known[i][0]);
    for (int b = 0; b < MF_LAT_BUCKETS; b++) {
        cr_assert_eq(mf_latency_bucket(mf_latency_lower_bound(b)), b, "lower bound of %d", b);
        if (b + 1 < MF_LAT_BUCKETS) {
            cr_assert_lt(mf_latency_lower_bound(b), mf_latency_lower_bound(b + 1));
            cr_assert_eq(mf_latency_bucket(mf_latency_lower_bound(b + 1) - 1), b, "just below bucket %d", b + 1);
        }
    }
    cr_assert_eq(mf_latency_bucket(1), 0, "0 and 1 µs share the first bucket");
    cr_assert_eq(mf_latency_bucket(UINT64_MAX), MF_LAT_BUCKETS - 1, "the last bucket takes everything above");
}

Test(latency, client_operations_are_counted_by_kind_server_wide_and_per_namespace)
{
    mf_curops_t *reg = mf_curops_new();
    mf_latency_t all[MF_LAT_N], ns[MF_LAT_N];

    mf_curop_t *r = mf_curop_begin(reg, "query", "db.c", "conn1", NULL, 1);
    mf_curop_set_latency_kind(r, MF_LAT_READS);
    mf_curop_end(r);
    mf_curop_t *w = mf_curop_begin(reg, "insert", "db.c", "conn1", NULL, 1);
    mf_curop_set_latency_kind(w, MF_LAT_WRITES);
    mf_curop_end(w);
    mf_curop_t *cmd = mf_curop_begin(reg, "command", "admin.$cmd", "conn2", NULL, 2);
    mf_curop_set_latency_kind(cmd, MF_LAT_COMMANDS);
    mf_curop_end(cmd);
    mf_curop_end(mf_curop_begin(reg, "command", "db.c", "conn2", NULL, 2)); /* no kind: not counted */
    mf_curop_t *bg = mf_curop_begin(reg, "remove", "db.c", "TTLMonitor", NULL, 0);
    mf_curop_set_latency_kind(bg, MF_LAT_WRITES); /* the server's own work never is */
    mf_curop_end(bg);

    cr_assert(mf_curops_latency_get(reg, NULL, all));
    cr_assert_eq(all[MF_LAT_READS].ops, 1);
    cr_assert_eq(all[MF_LAT_WRITES].ops, 1);
    cr_assert_eq(all[MF_LAT_COMMANDS].ops, 1);
    cr_assert_eq(all[MF_LAT_TRANSACTIONS].ops, 0);
    int64_t in_buckets = 0;
    for (int b = 0; b < MF_LAT_BUCKETS; b++)
        in_buckets += all[MF_LAT_READS].buckets[b];
    cr_assert_eq(in_buckets, 1);

    cr_assert(mf_curops_latency_get(reg, "db.c", ns));
    cr_assert_eq(ns[MF_LAT_READS].ops, 1);
    cr_assert_eq(ns[MF_LAT_WRITES].ops, 1);
    cr_assert_eq(ns[MF_LAT_COMMANDS].ops, 0, "admin.$cmd is not a collection");
    cr_assert_not(mf_curops_latency_get(reg, "db.other", ns));
    cr_assert_eq(ns[MF_LAT_READS].ops, 0);

    mf_curops_top_forget(reg, "db", "c"); /* a drop: the entry goes */
    cr_assert_not(mf_curops_latency_get(reg, "db.c", ns));
    cr_assert_eq(ns[MF_LAT_READS].ops + ns[MF_LAT_WRITES].ops, 0);
    mf_curops_latency_get(reg, NULL, all);
    cr_assert_eq(all[MF_LAT_READS].ops, 1, "server-wide counts survive a drop");
    mf_curops_free(reg);
}

/* A command adds no namespace (ping: "x" is open to anyone); reads and writes do, MF_TOP_MAX_NS at most. */
Test(latency, only_reads_and_writes_add_namespaces_and_at_most_MF_TOP_MAX_NS)
{
    mf_curops_t *reg = mf_curops_new();
    mf_latency_t ns[MF_LAT_N];
    char name[64];

    mf_curop_t *cmd = mf_curop_begin(reg, "command", "db.junk", "conn1", NULL, 1);
    mf_curop_set_latency_kind(cmd, MF_LAT_COMMANDS);
    mf_curop_end(cmd);
    cr_assert_not(mf_curops_latency_get(reg, "db.junk", ns));

    for (int i = 0; i < MF_TOP_MAX_NS + 10; i++) {
        snprintf(name, sizeof(name), "db.c%d", i);
        mf_curop_t *r = mf_curop_begin(reg, "query", name, "conn1", NULL, 1);
        mf_curop_set_latency_kind(r, MF_LAT_READS);
        mf_curop_end(r);
    }
    cr_assert(mf_curops_latency_get(reg, "db.c0", ns));
    snprintf(name, sizeof(name), "db.c%d", MF_TOP_MAX_NS - 1);
    cr_assert(mf_curops_latency_get(reg, name, ns));
    snprintf(name, sizeof(name), "db.c%d", MF_TOP_MAX_NS);
    cr_assert_not(mf_curops_latency_get(reg, name, ns), "the table is full");

    /* A command on a namespace that has an entry counts there. */
    cmd = mf_curop_begin(reg, "command", "db.c0", "conn1", NULL, 1);
    mf_curop_set_latency_kind(cmd, MF_LAT_COMMANDS);
    mf_curop_end(cmd);
    cr_assert(mf_curops_latency_get(reg, "db.c0", ns));
    cr_assert_eq(ns[MF_LAT_COMMANDS].ops, 1);

    mf_curops_top_forget(reg, "db", NULL); /* a dropDatabase frees them all: room again */
    cr_assert_not(mf_curops_latency_get(reg, "db.c0", ns));
    mf_curop_t *r = mf_curop_begin(reg, "query", "db.new", "conn1", NULL, 1);
    mf_curop_set_latency_kind(r, MF_LAT_READS);
    mf_curop_end(r);
    cr_assert(mf_curops_latency_get(reg, "db.new", ns));
    mf_curops_free(reg);
}
