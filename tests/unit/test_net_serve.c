/*
 * test_net_serve.c: the network front end embedded in-process: it serves a
 * command over a real socket, and on SIGTERM calls the engine's shutdown
 * hook (eng->on_shutdown) exactly once, closes the connections, and returns
 * 0 with nothing left in flight.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"
#include "net/wire.h"
#include "unit_util.h"

typedef struct ctx {
    mf_engine_t *eng;
    int port;
    int rc;
    _Atomic int ready;
    _Atomic int hook_calls;
} ctx_t;

static char dir[] = "/tmp/mf-netserve-XXXXXX";

static void
on_ready(void *arg)
{
    ctx_t *c = arg;
    atomic_store(&c->ready, 1);
}

static void
on_shutdown(void *arg)
{
    ctx_t *c = arg;
    atomic_fetch_add(&c->hook_calls, 1);
}

static void *
serve_main(void *arg)
{
    ctx_t *c = arg;
    mf_error_t err;
    mf_net_opts_t o = {.bind_ip = "127.0.0.1", .port = c->port, .workers = 1, .max_workers = 8,
                       .ready = on_ready, .ready_arg = c};
    c->rc = mf_net_serve(c->eng, &o, &err);
    return NULL;
}

/* Sends an OP_MSG with body json on a new connection; returns the socket. */
static int
send_cmd(int port, const char *json)
{
    bson_error_t berr;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(b);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    size_t len = 16 + 4 + 1 + b->len;
    uint8_t *m = calloc(1, len);
    int32_t hdr[4] = {(int32_t)len, 1, 0, MF_OP_MSG};
    memcpy(m, hdr, 16); /* little-endian host assumed, as on the CI machines */
    m[20] = 0;
    memcpy(m + 21, bson_get_data(b), b->len);
    cr_assert_eq(write(s, m, len), (ssize_t)len);
    free(m);
    bson_destroy(b);
    return s;
}

/* Reads one reply on s and returns its body's "ok" (or -1 if none / closed). */
static double
read_ok(int s)
{
    uint8_t buf[65536];
    size_t got = 0;
    while (got < 4 || got < (size_t)(buf[0] | buf[1] << 8 | buf[2] << 16 | buf[3] << 24)) {
        ssize_t n = read(s, buf + got, sizeof(buf) - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    bson_t body;
    bson_iter_t it;
    uint32_t blen = buf[21] | buf[22] << 8 | buf[23] << 16 | (uint32_t)buf[24] << 24;
    cr_assert(bson_init_static(&body, buf + 21, blen));
    return bson_iter_init_find(&it, &body, "ok") ? bson_iter_as_double(&it) : -1;
}

Test(net_serve, serves_and_calls_the_shutdown_hook_once, .timeout = 120)
{
    ctx_t c;
    mf_error_t err;
    pthread_t th;
    memset(&c, 0, sizeof(c));
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(mf_engine_open(&(mf_engine_opts_t){.dbpath = dir}, &c.eng, &err), 0, "%s", err.msg);
    c.eng->on_shutdown = on_shutdown;
    c.eng->on_shutdown_arg = &c;
    c.port = unit_free_port();
    /* libuv's SIGTERM handler is process-wide; block it here so the loop thread takes it. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    cr_assert_eq(pthread_create(&th, NULL, serve_main, &c), 0);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    for (int i = 0; i < 20000 && !atomic_load(&c.ready); i++)
        usleep(1000);
    cr_assert(atomic_load(&c.ready), "listening");

    int s = send_cmd(c.port, "{\"ping\": 1, \"$db\": \"admin\"}");
    cr_assert_eq(read_ok(s), 1.0, "ping answered");
    /* A data-lane command on another connection. */
    int w = send_cmd(c.port, "{\"insert\": \"c\", \"documents\": [{\"a\": 1}, {\"a\": 2}], \"$db\": \"test\"}");
    cr_assert_eq(read_ok(w), 1.0, "insert answered");
    close(w);
    cr_assert_eq(atomic_load(&c.hook_calls), 0);

    kill(getpid(), SIGTERM);
    pthread_join(th, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    cr_assert_eq(c.rc, 0);
    cr_assert_eq(atomic_load(&c.hook_calls), 1, "on_shutdown called once");
    cr_assert_eq(read_ok(s), -1, "connections are closed at shutdown");
    close(s);
    cr_assert_eq(atomic_load(&c.eng->conn_active), 0, "nothing in flight after serve returns");
    mf_engine_close(c.eng);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
