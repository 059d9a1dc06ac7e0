/*
 * test_raft_node.c: the raft boundary (src/repl/raft_node.c) with three real
 * members in one process, each on its own libuv loop in its own thread, on
 * free loopback ports, each with its own temporary directory.
 *
 * It shows: a bootstrapped group elects a leader; entries of odd sizes
 * (1..1000 bytes, never a multiple of 8) submitted through the leader are
 * applied on every member in the same order with the same bytes and the
 * same indexes; a follower refuses submits (10107); closing the leader lets
 * the other two elect a new one, which accepts more entries; a fresh fourth
 * member added as a voter replays the whole log; everything closes cleanly
 * (the sanitizer build reports any leak).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "repl/raft_node.h"
#include "unit_util.h"

#define MAX_MEMBERS 4
#define MAX_ENTRIES 256

/* What one member applied, in order. */
typedef struct applied {
    uint64_t index;
    size_t len;
    uint8_t *bytes;
} applied_t;

typedef struct member {
    uint64_t id;
    char address[32];
    char dir[64];
    uv_loop_t loop;
    pthread_t thread;
    bool running;
    mf_raft_node_t *node;
    pthread_mutex_t lock;
    applied_t log[MAX_ENTRIES];
    int n;
    _Atomic int state_calls;
    _Atomic int closed;
} member_t;

static member_t members[MAX_MEMBERS];

static int
apply(void *arg, uint64_t index, const void *payload, size_t len)
{
    member_t *m = arg;
    pthread_mutex_lock(&m->lock);
    cr_assert_lt(m->n, MAX_ENTRIES);
    m->log[m->n].index = index;
    m->log[m->n].len = len;
    m->log[m->n].bytes = malloc(len ? len : 1);
    memcpy(m->log[m->n].bytes, payload, len);
    m->n++;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static void
on_state(void *arg, mf_raft_role_t role, uint64_t leader_id, const char *leader_address)
{
    member_t *m = arg;
    atomic_fetch_add(&m->state_calls, 1);
}

static void
on_closed(void *arg)
{
    member_t *m = arg;
    atomic_store(&m->closed, 1);
}

static void *
loop_main(void *arg)
{
    member_t *m = arg;
    uv_run(&m->loop, UV_RUN_DEFAULT);
    return NULL;
}

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Opens member i (its id and address set) on a fresh directory; bootstraps it with the first nboot members when nboot > 0. */
static void
member_open(int i, int nboot)
{
    member_t *m = &members[i];
    mf_error_t err = {0};
    snprintf(m->dir, sizeof(m->dir), "/tmp/mf-raft-XXXXXX");
    cr_assert_not_null(mkdtemp(m->dir));
    pthread_mutex_init(&m->lock, NULL);
    cr_assert_eq(uv_loop_init(&m->loop), 0);
    mf_raft_node_opts_t opts = {
        .id = m->id,
        .address = m->address,
        .dir = m->dir,
        .loop = &m->loop,
        .apply = apply,
        .on_state = on_state,
        .arg = m,
        .election_timeout_ms = 500,
        .heartbeat_timeout_ms = 50,
    };
    m->node = mf_raft_node_open(&opts, &err);
    cr_assert_not_null(m->node, "open member %d: %s", i, err.msg);
    if (nboot > 0) {
        mf_raft_server_t servers[MAX_MEMBERS];
        for (int k = 0; k < nboot; k++)
            servers[k] = (mf_raft_server_t){members[k].id, members[k].address};
        cr_assert_eq(mf_raft_node_bootstrap(m->node, servers, (size_t)nboot, &err), 0, "bootstrap %d: %s", i, err.msg);
    }
    cr_assert_eq(mf_raft_node_start(m->node, &err), 0, "start %d: %s", i, err.msg);
    cr_assert_eq(pthread_create(&m->thread, NULL, loop_main, m), 0);
    m->running = true;
}

/* Closes member i's node and waits for its loop thread to finish. */
static void
member_close(int i)
{
    member_t *m = &members[i];
    if (!m->running)
        return;
    mf_raft_node_close(m->node, on_closed, m);
    pthread_join(m->thread, NULL);
    cr_assert_eq(atomic_load(&m->closed), 1, "member %d's close callback ran", i);
    cr_assert_eq(uv_loop_close(&m->loop), 0, "member %d's loop has no handles left", i);
    m->running = false;
    m->node = NULL;
}

static void
member_free(int i)
{
    member_t *m = &members[i];
    for (int k = 0; k < m->n; k++)
        free(m->log[k].bytes);
    m->n = 0;
    pthread_mutex_destroy(&m->lock);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", m->dir);
    cr_assert_eq(system(cmd), 0);
}

/* Waits (up to timeout_ms) until a running member sees itself leader and the others agree; returns its index. */
static int
wait_leader(int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        for (int i = 0; i < MAX_MEMBERS; i++) {
            if (!members[i].running || mf_raft_node_state(members[i].node) != MF_RAFT_ROLE_LEADER)
                continue;
            bool agree = true;
            for (int k = 0; k < MAX_MEMBERS; k++) {
                uint64_t lid = 0;
                char addr[64];
                if (!members[k].running)
                    continue;
                if (!mf_raft_node_leader(members[k].node, &lid, addr, sizeof(addr)) || lid != members[i].id ||
                    strcmp(addr, members[i].address) != 0)
                    agree = false;
            }
            if (agree)
                return i;
        }
        sleep_ms(20);
    }
    cr_assert_fail("no leader within %d ms", timeout_ms);
    return -1;
}

static int
applied_count(int i)
{
    pthread_mutex_lock(&members[i].lock);
    int n = members[i].n;
    pthread_mutex_unlock(&members[i].lock);
    return n;
}

static void
wait_applied(int i, int n, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (applied_count(i) < n && now_ms() < deadline)
        sleep_ms(10);
    cr_assert_eq(applied_count(i), n, "member %d applied %d entries, want %d", i, applied_count(i), n);
}

/* Entry k's payload: size 1..1000, never a multiple of 8, bytes derived from k. */
static size_t
entry_make(int k, uint8_t *buf)
{
    size_t len = (size_t)(k * 37 % 1000) + 1;
    if (len % 8 == 0)
        len--;
    for (size_t b = 0; b < len; b++)
        buf[b] = (uint8_t)(k * 131 + b * 7);
    return len;
}

/* Member i applied entries [from, to) exactly as entry_make built them, with indexes increasing. */
static void
check_applied(int i, int from, int to)
{
    uint8_t want[1000];
    member_t *m = &members[i];
    pthread_mutex_lock(&m->lock);
    for (int k = from; k < to; k++) {
        size_t len = entry_make(k, want);
        cr_assert_eq(m->log[k].len, len, "member %d entry %d: %zu bytes, want %zu", i, k, m->log[k].len, len);
        cr_assert_eq(memcmp(m->log[k].bytes, want, len), 0, "member %d entry %d bytes differ", i, k);
        if (k > 0)
            cr_assert_gt(m->log[k].index, m->log[k - 1].index, "member %d: index of entry %d", i, k);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Members a and b applied the same indexes for entries [0, n). */
static void
check_same_indexes(int a, int b, int n)
{
    for (int k = 0; k < n; k++)
        cr_assert_eq(members[a].log[k].index, members[b].log[k].index, "entry %d: index %llu on %d, %llu on %d", k,
                     (unsigned long long)members[a].log[k].index, a, (unsigned long long)members[b].log[k].index, b);
}

/* Counts completions of async submits; checks each succeeded with a larger index than the one before. */
typedef struct counter {
    pthread_mutex_t lock;
    int done, failed;
    uint64_t last_index;
    bool in_order;
} counter_t;

static void
count_done(void *arg, uint64_t index, const mf_error_t *err)
{
    counter_t *c = arg;
    pthread_mutex_lock(&c->lock);
    c->done++;
    if (err)
        c->failed++;
    else if (index <= c->last_index)
        c->in_order = false;
    else
        c->last_index = index;
    pthread_mutex_unlock(&c->lock);
}

static int
counter_done(counter_t *c)
{
    pthread_mutex_lock(&c->lock);
    int n = c->done;
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* A membership change's outcome, waited for by the test thread. */
typedef struct change {
    _Atomic int done;
    int code;
} change_t;

static void
change_done(void *arg, uint64_t index, const mf_error_t *err)
{
    change_t *c = arg;
    c->code = err ? err->code : 0;
    atomic_store(&c->done, 1);
}

static void
wait_change(change_t *c, const char *what)
{
    int64_t deadline = now_ms() + 10000;
    while (!atomic_load(&c->done) && now_ms() < deadline)
        sleep_ms(10);
    cr_assert_eq(atomic_load(&c->done), 1, "%s finished", what);
    cr_assert_eq(c->code, 0, "%s: code %d", what, c->code);
}

Test(raft_node, three_members_replicate_fail_over_and_add_a_voter, .timeout = 120)
{
    signal(SIGPIPE, SIG_IGN);
    memset(members, 0, sizeof(members));
    for (int i = 0; i < MAX_MEMBERS; i++) {
        members[i].id = (uint64_t)i + 1;
        snprintf(members[i].address, sizeof(members[i].address), "127.0.0.1:%d", unit_free_port());
    }
    for (int i = 0; i < 3; i++)
        member_open(i, 3);

    /* A leader within a few seconds, which every member knows. */
    int leader = wait_leader(5000);
    for (int i = 0; i < 3; i++)
        cr_assert_gt(atomic_load(&members[i].state_calls), 0, "member %d reported its state", i);

    /* A follower refuses entries. */
    int follower = (leader + 1) % 3;
    mf_error_t err = {0};
    uint8_t buf[1000];
    size_t len = entry_make(0, buf);
    cr_assert_eq(mf_raft_node_submit(members[follower].node, buf, len, count_done, NULL, &err), -1);
    cr_assert_eq(err.code, MF_E_NotWritablePrimary, "code %d", err.code);

    /* 100 entries submitted at once through the leader, from this (non-loop) thread. */
    counter_t c = {.in_order = true};
    pthread_mutex_init(&c.lock, NULL);
    for (int k = 0; k < 100; k++) {
        len = entry_make(k, buf);
        cr_assert_eq(mf_raft_node_submit(members[leader].node, buf, len, count_done, &c, &err), 0, "submit %d: %s", k,
                     err.msg);
    }
    int64_t deadline = now_ms() + 10000;
    while (counter_done(&c) < 100 && now_ms() < deadline)
        sleep_ms(10);
    cr_assert_eq(counter_done(&c), 100);
    cr_assert_eq(c.failed, 0);
    cr_assert(c.in_order, "done callbacks came in index order");
    for (int i = 0; i < 3; i++) {
        wait_applied(i, 100, 5000);
        check_applied(i, 0, 100);
    }
    check_same_indexes(0, 1, 100);
    check_same_indexes(0, 2, 100);

    /* Closing the leader: the other two elect a new one, which takes more entries. */
    member_close(leader);
    int next = wait_leader(5000);
    cr_assert_neq(next, leader);
    uint64_t indexes[120] = {0};
    for (int k = 100; k < 120; k++) {
        len = entry_make(k, buf);
        cr_assert_eq(mf_raft_node_submit_wait(members[next].node, buf, len, &indexes[k], &err), 0, "submit %d: %s", k,
                     err.msg);
        cr_assert_gt(indexes[k], 0);
    }
    int other = 3 - leader - next;
    for (int i = 0; i < 3; i++) {
        if (i == leader)
            continue;
        wait_applied(i, 120, 5000);
        check_applied(i, 0, 120);
    }
    check_same_indexes(next, other, 120);
    for (int k = 100; k < 120; k++)
        cr_assert_eq(members[next].log[k].index, indexes[k], "entry %d: applied at %llu, submit said %llu", k,
                     (unsigned long long)members[next].log[k].index, (unsigned long long)indexes[k]);

    /* A fresh fourth member joins as a voter and replays the whole log; the old leader is removed. */
    member_open(3, 0);
    change_t add = {0};
    cr_assert_eq(mf_raft_node_add_voter(members[next].node, members[3].id, members[3].address, change_done, &add, &err),
                 0, "add voter: %s", err.msg);
    wait_change(&add, "add voter");
    wait_applied(3, 120, 10000);
    check_applied(3, 0, 120);
    check_same_indexes(next, 3, 120);
    change_t rm = {0};
    cr_assert_eq(mf_raft_node_remove(members[next].node, members[leader].id, change_done, &rm, &err), 0, "remove: %s",
                 err.msg);
    wait_change(&rm, "remove");
    len = entry_make(120, buf);
    cr_assert_eq(mf_raft_node_submit_wait(members[next].node, buf, len, NULL, &err), 0, "submit after remove: %s",
                 err.msg);
    wait_applied(3, 121, 5000);
    check_applied(3, 0, 121);

    for (int i = 0; i < MAX_MEMBERS; i++)
        member_close(i);
    for (int i = 0; i < MAX_MEMBERS; i++)
        member_free(i);
    pthread_mutex_destroy(&c.lock);
}

/* A second bootstrap of the same directory is refused with 23, and a node closed before its loop ever ran closes cleanly. */
Test(raft_node, bootstrap_twice_is_refused_and_close_before_running)
{
    char dir[] = "/tmp/mf-raft-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char address[32];
    snprintf(address, sizeof(address), "127.0.0.1:%d", unit_free_port());
    mf_raft_server_t self = {1, address};
    for (int round = 0; round < 2; round++) {
        uv_loop_t loop;
        mf_error_t err = {0};
        cr_assert_eq(uv_loop_init(&loop), 0);
        member_t m = {0};
        mf_raft_node_opts_t opts = {.id = 1, .address = address, .dir = dir, .loop = &loop, .apply = apply, .arg = &m};
        mf_raft_node_t *node = mf_raft_node_open(&opts, &err);
        cr_assert_not_null(node, "open: %s", err.msg);
        int rc = mf_raft_node_bootstrap(node, &self, 1, &err);
        if (round == 0) {
            cr_assert_eq(rc, 0, "first bootstrap: %s", err.msg);
        } else {
            cr_assert_eq(rc, -1);
            cr_assert_eq(err.code, MF_E_AlreadyInitialized, "code %d: %s", err.code, err.msg);
        }
        mf_raft_node_close(node, on_closed, &m);
        uv_run(&loop, UV_RUN_DEFAULT);
        cr_assert_eq(atomic_load(&m.closed), 1);
        cr_assert_eq(uv_loop_close(&loop), 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
