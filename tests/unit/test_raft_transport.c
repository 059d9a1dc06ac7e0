/*
 * test_raft_transport.c: the raft port's transport (src/repl/raft_transport.c)
 * against hostile and honest peers, on one libuv loop pumped by the test
 * (no threads): raw sockets play the hostile peers, a second transport the
 * honest member.
 *
 * It shows, without a key: a handshake naming another protocol, one
 * claiming a 1 TB address, and an address without its NUL are closed at
 * once and raft never sees them; a connection that sends nothing is closed
 * after the handshake time limit; over the cap of connections in their
 * handshake a new one is closed at accept, and once the silent ones time
 * out new ones are taken again; libraft's own handshake is handed to raft
 * with its id and address; the admit hook's refusal closes the socket. With
 * a key: libraft's handshake without a proof is never handed over (closed
 * at the time limit), a wrong proof is closed at once, a member with the
 * same key connects (both ends get the connection, the listener's raft sees
 * its id), a member with another key fails on both ends. Everything closes
 * and is freed (the sanitizer build reports any leak).
 */
#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "repl/raft_transport.h"
#include "unit_util.h"

typedef struct side {
    struct raft_uv_transport t;
    char address[32];
    int accepted;
    raft_id last_id;
    char last_address[64];
    bool closed;
} side_t;

static uv_loop_t loop;

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs the loop until *flag is set or ms pass; returns whether it was set. */
static bool
pump_until(volatile bool *flag, int ms)
{
    int64_t end = now_ms() + ms;
    while (!*flag && now_ms() < end) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    return *flag;
}

static void
pump(int ms)
{
    bool never = false;
    pump_until(&never, ms);
}

static void
close_stream_cb(uv_handle_t *h)
{
    raft_free(h);
}

static void
on_accept(struct raft_uv_transport *t, raft_id id, const char *address, uv_stream_t *stream)
{
    side_t *s = t->data;
    s->accepted++;
    s->last_id = id;
    snprintf(s->last_address, sizeof(s->last_address), "%s", address);
    uv_close((uv_handle_t *)stream, close_stream_cb);
}

static bool refuse_all;

static bool
admit(void *arg, int fd)
{
    (void)arg;
    return fd >= 0 && !refuse_all;
}

static void
side_open_ms(side_t *s, raft_id id, const char *key, bool listen, unsigned handshake_ms)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->address, sizeof(s->address), "127.0.0.1:%d", unit_free_port());
    mf_raft_transport_opts_t o = {.loop = &loop, .key = key, .handshake_ms = handshake_ms, .max_pending = 4,
                                  .admit = admit};
    cr_assert_eq(mf_raft_transport_init(&s->t, &o), 0);
    s->t.data = s;
    cr_assert_eq(s->t.init(&s->t, id, s->address), 0);
    if (listen)
        cr_assert_eq(s->t.listen(&s->t, on_accept), 0, "%s", s->t.errmsg);
}

static void
side_open(side_t *s, raft_id id, const char *key, bool listen)
{
    side_open_ms(s, id, key, listen, 300);
}

static void
side_closed_cb(struct raft_uv_transport *t)
{
    ((side_t *)t->data)->closed = true;
}

static void
side_close(side_t *s)
{
    s->t.close(&s->t, side_closed_cb);
    cr_assert(pump_until(&s->closed, 5000), "the transport closed");
    mf_raft_transport_release(&s->t);
}

static int
raw_connect(const side_t *s)
{
    int port = atoi(strrchr(s->address, ':') + 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Whether the server closed fd within ms (pumping the loop meanwhile); bytes it sent first are skipped. */
static bool
closed_within(int fd, int ms)
{
    int64_t end = now_ms() + ms;
    char buf[256];
    while (now_ms() < end) {
        uv_run(&loop, UV_RUN_NOWAIT);
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            return true;
        if (n < 0)
            usleep(1000);
    }
    return false;
}

/*
 * A plain listening socket on a free loopback port that never accepts: its
 * address ("127.0.0.1:port") into address, its own into *sa. Returns the fd.
 */
static int
raw_listen(int backlog, struct sockaddr_in *sa, char *address, size_t size)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t sl = sizeof(*sa);
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(ls, (struct sockaddr *)sa, sizeof(*sa)), 0);
    cr_assert_eq(listen(ls, backlog), 0);
    getsockname(ls, (struct sockaddr *)sa, &sl);
    snprintf(address, size, "127.0.0.1:%d", ntohs(sa->sin_port));
    return ls;
}

/* libraft's handshake: protocol, id, address length, then the address padded to 8 bytes with NULs. */
static size_t
handshake(uint8_t *out, uint64_t protocol, uint64_t id, const char *address, uint64_t claimed_len, bool nul)
{
    size_t alen = strlen(address) + (nul ? 1 : 0);
    size_t padded = (alen + 7) / 8 * 8;
    uint64_t p[3] = {htole64(protocol), htole64(id), htole64(claimed_len ? claimed_len : padded)};
    memcpy(out, p, sizeof(p));
    memset(out + 24, nul ? 0 : 'x', padded);
    memcpy(out + 24, address, strlen(address));
    return 24 + padded;
}

static void
send_all(int fd, const uint8_t *p, size_t n)
{
    cr_assert_eq(send(fd, p, n, 0), (ssize_t)n);
}

static void
setup(void)
{
    uv_loop_init(&loop);
    refuse_all = false;
}

static void
teardown(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0, "every handle is closed");
}

TestSuite(raft_transport, .init = setup, .fini = teardown, .timeout = 60);

Test(raft_transport, hostile_handshakes_are_closed_and_the_listener_carries_on)
{
    side_t a;
    uint8_t msg[256];
    mf_raft_transport_stats_t st;
    side_open(&a, 1, NULL, true);

    /* Another protocol. */
    int fd = raw_connect(&a);
    send_all(fd, msg, handshake(msg, 7, 2, "127.0.0.1:1", 0, true));
    cr_assert(closed_within(fd, 200), "a wrong protocol is closed at once");
    close(fd);

    /* A 1 TB address: closed without waiting for (or allocating) it. */
    fd = raw_connect(&a);
    handshake(msg, 1, 2, "1234567", 1ull << 40, true);
    send_all(fd, msg, 24); /* the preamble alone */
    cr_assert(closed_within(fd, 200), "an address longer than MF_RAFT_MAX_ADDRESS is closed at once");
    close(fd);

    /* An address with no NUL in it. */
    fd = raw_connect(&a);
    send_all(fd, msg, handshake(msg, 1, 2, "127.0.0.1:12345678", 0, false));
    cr_assert(closed_within(fd, 200), "an address without its NUL is closed");
    close(fd);

    /* Server id 0 is not a member. */
    fd = raw_connect(&a);
    send_all(fd, msg, handshake(msg, 1, 0, "127.0.0.1:1", 0, true));
    cr_assert(closed_within(fd, 200), "id 0 is closed");
    close(fd);

    mf_raft_transport_stats(&a.t, &st);
    cr_assert_eq(st.malformed, 4);
    cr_assert_eq(a.accepted, 0, "raft saw none of them");

    /* A connection that sends nothing is closed at the time limit (300 ms), not before. */
    int64_t t0 = now_ms();
    int silent0 = raw_connect(&a);
    cr_assert(closed_within(silent0, 5000), "a silent connection is closed at the time limit");
    close(silent0);
    cr_assert_geq(now_ms() - t0, 250, "not before the time limit (300 ms)");
    mf_raft_transport_stats(&a.t, &st);
    cr_assert_eq(st.timed_out, 1);

    /* Then an honest handshake, sent in two pieces, is handed to raft. */
    fd = raw_connect(&a);
    size_t n = handshake(msg, 1, 42, "127.0.0.1:4242", 0, true);
    send_all(fd, msg, 10);
    pump(20);
    send_all(fd, msg + 10, n - 10);
    for (int64_t end = now_ms() + 2000; a.accepted == 0 && now_ms() < end;)
        pump(5);
    cr_assert_eq(a.accepted, 1, "libraft's handshake is accepted");
    cr_assert_eq(a.last_id, 42);
    cr_assert_str_eq(a.last_address, "127.0.0.1:4242");
    close(fd);

    /* The admit hook's refusal (the open-files reserve) closes the socket. */
    refuse_all = true;
    fd = raw_connect(&a);
    cr_assert(closed_within(fd, 200), "a refused socket is closed at accept");
    close(fd);
    refuse_all = false;

    side_close(&a);
}

typedef struct conn_result {
    bool done;
    int status;
} conn_result_t;

static void
connect_cb(struct raft_uv_connect *req, uv_stream_t *stream, int status)
{
    conn_result_t *r = req->data;
    r->done = true;
    r->status = status;
    if (stream != NULL)
        uv_close((uv_handle_t *)stream, close_stream_cb);
}

Test(raft_transport, with_a_key_only_members_holding_it_get_through)
{
    side_t a, b, c;
    uint8_t msg[256];
    mf_raft_transport_stats_t st;
    side_open(&a, 1, "the-members-key", true);

    /* libraft's handshake alone: never handed over, closed at the time limit. */
    int fd = raw_connect(&a);
    send_all(fd, msg, handshake(msg, 1, 9, "127.0.0.1:9", 0, true));
    cr_assert(closed_within(fd, 2000), "no proof: closed at the time limit");
    close(fd);

    /* A made-up proof: closed at once. */
    fd = raw_connect(&a);
    size_t n = handshake(msg, 1, 9, "127.0.0.1:9", 0, true);
    memset(msg + n, 0x5a, 64);
    send_all(fd, msg, n + 64);
    cr_assert(closed_within(fd, 200), "a wrong proof is closed at once");
    close(fd);
    cr_assert_eq(a.accepted, 0, "raft saw neither");
    mf_raft_transport_stats(&a.t, &st);
    cr_assert_eq(st.timed_out, 1);
    cr_assert_eq(st.auth_failed, 1);

    /* A member with the same key. */
    side_open(&b, 2, "the-members-key", false);
    struct raft_uv_connect req;
    conn_result_t r = {0};
    req.data = &r;
    cr_assert_eq(b.t.connect(&b.t, &req, 1, a.address, connect_cb), 0);
    cr_assert(pump_until(&r.done, 3000), "the connect finished");
    cr_assert_eq(r.status, 0, "the member got through");
    for (int64_t end = now_ms() + 2000; a.accepted == 0 && now_ms() < end;)
        pump(5);
    cr_assert_eq(a.accepted, 1, "the listener handed it to raft");
    cr_assert_eq(a.last_id, 2);
    cr_assert_str_eq(a.last_address, b.address);

    /* A member with another key fails on both ends. */
    side_open(&c, 3, "another-key", false);
    conn_result_t r2 = {0};
    req.data = &r2;
    cr_assert_eq(c.t.connect(&c.t, &req, 1, a.address, connect_cb), 0);
    cr_assert(pump_until(&r2.done, 3000), "the connect finished");
    cr_assert_neq(r2.status, 0, "a member with another key is refused");
    pump(50);
    cr_assert_eq(a.accepted, 1, "raft never saw it");
    mf_raft_transport_stats(&a.t, &st);
    cr_assert_eq(st.auth_failed, 2);

    /* A connect still in its proof exchange when its transport closes is cancelled. */
    fd = -1;
    conn_result_t r3 = {0};
    req.data = &r3;
    side_t d;
    side_open(&d, 4, "the-members-key", false);
    /* A listener that never answers: a raw socket server. */
    struct sockaddr_in sa;
    char mute[32];
    int ls = raw_listen(4, &sa, mute, sizeof(mute));
    cr_assert_eq(d.t.connect(&d.t, &req, 9, mute, connect_cb), 0);
    pump(100);
    cr_assert_not(r3.done, "still waiting for the listener's nonce");
    side_close(&d);
    cr_assert(r3.done, "closing the transport ended the connect");
    cr_assert_eq(r3.status, RAFT_CANCELED);
    close(ls);

    side_close(&c);
    side_close(&b);
    side_close(&a);
}

Test(raft_transport, over_the_cap_the_oldest_handshake_gives_way_so_members_still_get_in)
{
    side_t a;
    uint8_t msg[256];
    mf_raft_transport_stats_t st;
    side_open_ms(&a, 1, NULL, true, 60000); /* no time limit in play */

    /* Four silent sockets fill the cap (4); each new one ends the oldest. */
    int silent[6];
    for (int i = 0; i < 4; i++)
        silent[i] = raw_connect(&a);
    pump(100);
    silent[4] = raw_connect(&a);
    cr_assert(closed_within(silent[0], 2000), "the oldest handshake gave way");
    cr_assert_not(closed_within(silent[4], 100), "the newcomer is kept");
    for (int i = 1; i <= 4; i++)
        cr_assert_not(closed_within(silent[i], 20), "the others are kept");

    /* A member's handshake still gets through while the silent ones hold the cap. */
    int fd = raw_connect(&a);
    send_all(fd, msg, handshake(msg, 1, 42, "127.0.0.1:4242", 0, true));
    for (int64_t end = now_ms() + 2000; a.accepted == 0 && now_ms() < end;)
        pump(5);
    cr_assert_eq(a.accepted, 1, "the member is handed to raft");
    cr_assert(closed_within(silent[1], 2000), "the next oldest gave way to it");
    mf_raft_transport_stats(&a.t, &st);
    cr_assert_eq(st.over_cap, 2);
    close(fd);
    for (int i = 0; i <= 4; i++)
        close(silent[i]);
    side_close(&a);
}

Test(raft_transport, closing_with_a_connect_still_in_libraft_s_tcp_connect_cancels_it_and_frees_everything)
{
    /* A listener whose accept queue is full: a further connect hangs in its SYN retries. */
    struct sockaddr_in sa;
    char full[32];
    int ls = raw_listen(0, &sa, full, sizeof(full));
    int fill[4];
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM, 0);
        fcntl(fill[i], F_SETFL, O_NONBLOCK);
        connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
    }

    for (int keyed = 0; keyed < 2; keyed++) {
        side_t d;
        side_open(&d, 4, keyed ? "the-members-key" : NULL, true);
        struct raft_uv_connect req;
        conn_result_t r = {0};
        req.data = &r;
        cr_assert_eq(d.t.connect(&d.t, &req, 9, full, connect_cb), 0);
        pump(200);
        cr_assert_not(r.done, "the connect is still in progress");
        side_close(&d);
        pump(50); /* every close callback left runs here, inside the test: the sanitizer build reports a use after free */
        cr_assert(r.done, "closing the transport ended the connect");
        cr_assert_neq(r.status, 0);
    }
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(ls);
}
