/*
 * raft_transport.c: the raft port's transport (see raft_transport.h).
 *
 * Design. The struct raft_uv_transport given to raft is ours (t->impl is an
 * rt_t); inside it sits libraft's own TCP transport (rt->inner). Outgoing
 * connections go through inner's connect, which resolves the peer, connects
 * and writes libraft's handshake (protocol, id, address); without a key its
 * callback goes straight to raft's, with a key the stream first goes
 * through the proof exchange here. The listening side is all ours: inner
 * never listens. Each connection still in its handshake is a conn_t on
 * rt->conns with a timer; it ends one of two ways, exactly once (conn_end):
 * handed over (the socket now belongs to raft, only the timer is closed
 * here) or failed (socket and timer closed here, an outgoing request's
 * callback told). A conn's memory is freed when the handles it closed have
 * their close callbacks.
 *
 * Wire format after libraft's handshake, with a key only (K the key, || 
 * concatenation, ids as 8 bytes little-endian; Nl, Nc 32 random bytes each):
 *   listener -> member: Nl                         (sent at accept)
 *   member -> listener: Nc || HMAC-SHA256(K, "mayfly-raft client" || Nl || Nc || id)
 *   listener -> member: HMAC-SHA256(K, "mayfly-raft server" || Nc || Nl || id)
 * where id is the connecting member's. Reads take exactly the bytes a step
 * needs (the buffer libuv is given is no larger), so nothing raft sends
 * next is consumed here. Proofs are compared in constant time.
 *
 * Close (raft's transport->close): listeners and connections in their
 * handshake are closed (an outgoing one's callback gets RAFT_CANCELED),
 * inner is closed (it cancels the connects it still runs), and raft's close
 * callback runs once all of that has finished.
 */
#include "repl/raft_transport.h"

#include <endian.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/fmt.h"
#include "common/log.h"

#define PROTOCOL 1 /* libraft's handshake protocol version */
#define NONCE_LEN 32
#define MAC_LEN 32
#define MAX_LISTENERS 4
#define LISTEN_BACKLOG 128
#define LOG_EVERY_MS 60000

typedef struct rt rt_t;

typedef enum stage {
    ST_INNER,        /* outgoing: inner's connect and handshake write in progress */
    ST_PREAMBLE,     /* incoming: protocol, id, address length (3 x 8 bytes) */
    ST_ADDRESS,      /* incoming: the address */
    ST_PROOF,        /* incoming: the member's nonce and proof; outgoing: the listener's nonce */
    ST_SERVER_PROOF, /* outgoing: the listener's proof */
} stage_t;

typedef struct conn {
    rt_t *rt;
    struct conn *prev, *next; /* rt->conns, while not ended */
    bool incoming;
    bool ended;
    stage_t stage;
    uv_tcp_t *tcp;   /* raft_malloc'd (raft frees what it is handed); NULL once handed over */
    uv_timer_t timer;
    int handles;     /* handles closed by conn_end whose callbacks are still due */
    uint8_t *rd;     /* the current read: need bytes into rd, got so far */
    size_t need, got;
    uint64_t preamble[3];
    char *address;   /* incoming: the peer's address (mf_malloc'd, alen bytes, NUL inside) */
    size_t alen;
    raft_id id;      /* incoming: the peer's id; outgoing: the id connected to */
    uint8_t buf[NONCE_LEN + MAC_LEN];
    uint8_t nonce[NONCE_LEN];
    uint8_t peer_nonce[NONCE_LEN];
    struct raft_uv_connect inner_req; /* outgoing: the request given to inner */
    struct raft_uv_connect *req;      /* outgoing: raft's request */
    raft_uv_connect_cb cb;
} conn_t;

struct rt {
    struct raft_uv_transport *t;
    struct raft_uv_transport inner;
    uv_loop_t *loop;
    char *key; /* NULL: no proofs */
    size_t keylen;
    unsigned handshake_ms, max_pending;
    bool (*admit)(void *arg, int fd);
    void *admit_arg;
    raft_id id;
    char *address;
    raft_uv_accept_cb accept_cb;
    uv_tcp_t listeners[MAX_LISTENERS];
    int listeners_open;
    conn_t *conns;     /* connections in their handshake (not ended) */
    unsigned live;     /* conn_t not yet freed (ended ones wait for their handles' close callbacks) */
    unsigned pending_in;
    bool closing, inner_closed;
    raft_uv_transport_close_cb close_cb;
    mf_raft_transport_stats_t stats;
    int64_t last_log_ms;
};

static void read_start(conn_t *c, void *into, size_t n, stage_t st);

/* Fires raft's close callback once everything close started has finished. */
static void
maybe_closed(rt_t *rt)
{
    if (!rt->closing || !rt->inner_closed || rt->listeners_open > 0 || rt->live > 0 || rt->close_cb == NULL)
        return;
    raft_uv_transport_close_cb cb = rt->close_cb;
    rt->close_cb = NULL;
    cb(rt->t);
}

/* HMAC-SHA256 under the key of label || a || b || id. */
static void
proof(const rt_t *rt, const char *label, const uint8_t *a, const uint8_t *b, raft_id id, uint8_t out[MAC_LEN])
{
    uint8_t msg[32 + 2 * NONCE_LEN + 8];
    size_t n = strlen(label);
    uint64_t le = htole64(id);
    memcpy(msg, label, n);
    memcpy(msg + n, a, NONCE_LEN);
    memcpy(msg + n + NONCE_LEN, b, NONCE_LEN);
    memcpy(msg + n + 2 * NONCE_LEN, &le, 8);
    unsigned outlen = MAC_LEN;
    if (HMAC(EVP_sha256(), rt->key, (int)rt->keylen, msg, n + 2 * NONCE_LEN + 8, out, &outlen) == NULL)
        memset(out, 0, MAC_LEN); /* never matches a real proof: RAND below would have failed first */
}

static void
conn_handle_closed(conn_t *c)
{
    if (--c->handles > 0)
        return;
    rt_t *rt = c->rt;
    free(c->address);
    free(c);
    rt->live--;
    maybe_closed(rt);
}

static void
tcp_closed_cb(uv_handle_t *h)
{
    conn_t *c = h->data;
    raft_free(h);
    conn_handle_closed(c);
}

static void
timer_closed_cb(uv_handle_t *h)
{
    conn_handle_closed(h->data);
}

static void
free_tcp_cb(uv_handle_t *h)
{
    raft_free(h);
}

/* The peer's "ip:port" for logs. */
static void
peer_name(uv_tcp_t *tcp, char *out, size_t size)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[64];
    int port;
    mf_fmt_sockaddr(tcp != NULL && uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &len) == 0 ? &ss : NULL, ip,
                    sizeof(ip), &port);
    snprintf(out, size, "%s:%d", ip, port);
}

/*
 * Ends c once: handed over (status 0; the socket is already raft's, c->tcp
 * NULL) or failed (status != 0: an outgoing request's callback gets it).
 * why, when given, is logged (at most once a minute). Closes what c still
 * owns; c itself is freed by the close callbacks.
 */
static void
conn_end(conn_t *c, const char *why, int status)
{
    rt_t *rt = c->rt;
    if (c->ended)
        return;
    c->ended = true;
    if (c->prev)
        c->prev->next = c->next;
    else
        rt->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    if (c->incoming)
        rt->pending_in--;
    if (why != NULL && mf_log_due(&rt->last_log_ms, LOG_EVERY_MS)) {
        char peer[96];
        peer_name(c->tcp, peer, sizeof(peer));
        mf_log(MF_LOG_WARN, "REPL", "raft port: %s connection %s %s closed: %s (logged at most once a minute)",
               c->incoming ? "incoming" : "outgoing", c->incoming ? "from" : "to", peer, why);
    }
    c->handles = 1 + (c->tcp != NULL);
    if (!c->incoming && status != 0 && c->cb != NULL)
        c->cb(c->req, NULL, status);
    if (c->tcp != NULL) {
        c->tcp->data = c;
        uv_close((uv_handle_t *)c->tcp, tcp_closed_cb);
        c->tcp = NULL;
    }
    uv_close((uv_handle_t *)&c->timer, timer_closed_cb);
}

static void
timeout_cb(uv_timer_t *timer)
{
    conn_t *c = timer->data;
    c->rt->stats.timed_out++;
    conn_end(c, "handshake not finished in time", RAFT_NOCONNECTION);
}

/* Writes n bytes (copied) on c's socket; a failure shows as a failed or timed-out read. */
static void
write_done_cb(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void
write_bytes(conn_t *c, const uint8_t *p, size_t n)
{
    uv_write_t *w = mf_malloc(sizeof(*w) + n);
    memcpy(w + 1, p, n);
    uv_buf_t b = uv_buf_init((char *)(w + 1), (unsigned)n);
    if (uv_write(w, (uv_stream_t *)c->tcp, &b, 1, write_done_cb) != 0)
        free(w);
}

/* The handshake is complete: raft gets the connection. */
static void
hand_over(conn_t *c)
{
    rt_t *rt = c->rt;
    uv_tcp_t *tcp = c->tcp;
    uv_read_stop((uv_stream_t *)tcp);
    c->tcp = NULL;
    conn_end(c, NULL, 0);
    if (c->incoming) {
        rt->stats.accepted++;
        rt->accept_cb(rt->t, c->id, c->address, (uv_stream_t *)tcp);
    } else {
        c->cb(c->req, (uv_stream_t *)tcp, 0);
    }
}

/* The current read is complete: the next step of c's handshake. */
static void
step(conn_t *c)
{
    rt_t *rt = c->rt;
    uint8_t mac[MAC_LEN];

    switch (c->stage) {
    case ST_PREAMBLE: {
        uint64_t protocol = le64toh(c->preamble[0]);
        c->id = le64toh(c->preamble[1]);
        uint64_t alen = le64toh(c->preamble[2]);
        if (protocol != PROTOCOL || c->id == 0 || alen == 0 || alen > MF_RAFT_MAX_ADDRESS) {
            rt->stats.malformed++;
            conn_end(c, "malformed handshake", RAFT_MALFORMED);
            return;
        }
        c->alen = (size_t)alen;
        c->address = mf_malloc(c->alen);
        read_start(c, c->address, c->alen, ST_ADDRESS);
        return;
    }
    case ST_ADDRESS:
        if (memchr(c->address, 0, c->alen) == NULL) {
            rt->stats.malformed++;
            conn_end(c, "malformed handshake address", RAFT_MALFORMED);
            return;
        }
        if (rt->key == NULL) {
            hand_over(c);
            return;
        }
        read_start(c, c->buf, NONCE_LEN + MAC_LEN, ST_PROOF);
        return;
    case ST_PROOF:
        if (c->incoming) {
            memcpy(c->peer_nonce, c->buf, NONCE_LEN);
            proof(rt, "mayfly-raft client", c->nonce, c->peer_nonce, c->id, mac);
            if (CRYPTO_memcmp(mac, c->buf + NONCE_LEN, MAC_LEN) != 0) {
                rt->stats.auth_failed++;
                conn_end(c, "the member did not prove it holds the keyFile's key", RAFT_UNAUTHORIZED);
                return;
            }
            proof(rt, "mayfly-raft server", c->peer_nonce, c->nonce, c->id, mac);
            write_bytes(c, mac, MAC_LEN);
            hand_over(c);
            return;
        }
        memcpy(c->peer_nonce, c->buf, NONCE_LEN);
        memcpy(c->buf, c->nonce, NONCE_LEN);
        proof(rt, "mayfly-raft client", c->peer_nonce, c->nonce, rt->id, c->buf + NONCE_LEN);
        write_bytes(c, c->buf, NONCE_LEN + MAC_LEN);
        read_start(c, c->buf, MAC_LEN, ST_SERVER_PROOF);
        return;
    case ST_SERVER_PROOF:
        proof(rt, "mayfly-raft server", c->nonce, c->peer_nonce, rt->id, mac);
        if (CRYPTO_memcmp(mac, c->buf, MAC_LEN) != 0) {
            rt->stats.auth_failed++;
            conn_end(c, "the listener did not prove it holds the keyFile's key", RAFT_NOCONNECTION);
            return;
        }
        hand_over(c);
        return;
    case ST_INNER:
    default:
        conn_end(c, "unexpected handshake state", RAFT_NOCONNECTION);
        return;
    }
}

static void
alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    conn_t *c = h->data;
    (void)suggested;
    b->base = (char *)c->rd + c->got;
    b->len = c->need - c->got; /* never more than this step needs: the rest is raft's */
}

static void
read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn_t *c = s->data;
    (void)b;
    if (n == 0)
        return;
    if (n < 0) {
        conn_end(c, n == UV_EOF ? "closed by the peer during the handshake" : uv_strerror((int)n), RAFT_NOCONNECTION);
        return;
    }
    c->got += (size_t)n;
    if (c->got < c->need)
        return;
    uv_read_stop(s);
    step(c);
}

static void
read_start(conn_t *c, void *into, size_t n, stage_t st)
{
    c->rd = into;
    c->need = n;
    c->got = 0;
    c->stage = st;
    if (uv_read_start((uv_stream_t *)c->tcp, alloc_cb, read_cb) != 0)
        conn_end(c, "cannot read", RAFT_NOCONNECTION);
}

static conn_t *
conn_new(rt_t *rt, bool incoming)
{
    conn_t *c = mf_calloc(1, sizeof(*c));
    c->rt = rt;
    c->incoming = incoming;
    rt->live++;
    uv_timer_init(rt->loop, &c->timer);
    c->timer.data = c;
    c->next = rt->conns;
    if (rt->conns)
        rt->conns->prev = c;
    rt->conns = c;
    if (incoming)
        rt->pending_in++;
    return c;
}

/* ---- listening side ---- */

static void
on_connection(uv_stream_t *listener, int status)
{
    rt_t *rt = listener->data;
    if (status < 0 || rt->closing)
        return;
    uv_tcp_t *tcp = raft_malloc(sizeof(*tcp));
    if (tcp == NULL)
        return;
    uv_tcp_init(rt->loop, tcp);
    if (uv_accept(listener, (uv_stream_t *)tcp) != 0) {
        uv_close((uv_handle_t *)tcp, free_tcp_cb);
        return;
    }
    uv_os_fd_t fd = -1;
    if (rt->admit != NULL && (uv_fileno((uv_handle_t *)tcp, &fd) != 0 || !rt->admit(rt->admit_arg, fd))) {
        rt->stats.over_cap++;
        if (mf_log_due(&rt->last_log_ms, LOG_EVERY_MS)) {
            char peer[96];
            peer_name(tcp, peer, sizeof(peer));
            mf_log(MF_LOG_WARN, "REPL", "raft port: connection from %s closed at once: too few file descriptors are "
                   "left (logged at most once a minute)", peer);
        }
        uv_close((uv_handle_t *)tcp, free_tcp_cb);
        return;
    }
    if (rt->pending_in >= rt->max_pending) {
        /*
         * Full: the oldest handshake gives way, not the newcomer, so silent
         * sockets held open by someone cannot keep a member from reconnecting
         * (a member's handshake takes one round trip; theirs never ends).
         */
        conn_t *oldest = NULL;
        for (conn_t *o = rt->conns; o != NULL; o = o->next)
            if (o->incoming)
                oldest = o; /* the list is newest first */
        if (oldest != NULL) {
            rt->stats.over_cap++;
            conn_end(oldest, "too many connections in their handshake: the oldest gave way", RAFT_NOCONNECTION);
        }
    }
    conn_t *c = conn_new(rt, true);
    c->tcp = tcp;
    tcp->data = c;
    uv_tcp_nodelay(tcp, 1);
    uv_timer_start(&c->timer, timeout_cb, rt->handshake_ms, 0);
    if (rt->key != NULL) {
        if (RAND_bytes(c->nonce, NONCE_LEN) != 1) {
            conn_end(c, "no random bytes for the nonce", RAFT_NOCONNECTION);
            return;
        }
        write_bytes(c, c->nonce, NONCE_LEN);
    }
    read_start(c, c->preamble, sizeof(c->preamble), ST_PREAMBLE);
}

static void
listener_closed_cb(uv_handle_t *h)
{
    rt_t *rt = h->data;
    rt->listeners_open--;
    maybe_closed(rt);
}

/* Splits "host:port" (host may be "[v6]") into host and port strings. Returns 0 or -1. */
static int
split_address(const char *address, char *host, size_t hsize, char *port, size_t psize)
{
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= psize)
        return -1;
    const char *h = address;
    size_t hl = (size_t)(colon - address);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hsize)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, psize, "%s", colon + 1);
    return 0;
}

static int
rt_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    rt_t *rt = t->impl;
    char host[256], port[16];
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;

    rt->accept_cb = cb;
    if (split_address(rt->address, host, sizeof(host), port, sizeof(port)) != 0) {
        snprintf(t->errmsg, sizeof(t->errmsg), "bad raft address %s", rt->address);
        return RAFT_INVALID;
    }
    int gr = getaddrinfo(host, port, &hints, &res);
    if (gr != 0 || res == NULL) {
        snprintf(t->errmsg, sizeof(t->errmsg), "cannot resolve %s: %s", rt->address, gai_strerror(gr));
        return RAFT_IOERR;
    }
    int rv = 0, n = 0;
    for (struct addrinfo *ai = res; ai != NULL && n < MAX_LISTENERS && rv == 0; ai = ai->ai_next) {
        bool dup = false; /* glibc may list one address twice (localhost) */
        for (struct addrinfo *p = res; p != ai && !dup; p = p->ai_next)
            dup = p->ai_addrlen == ai->ai_addrlen && memcmp(p->ai_addr, ai->ai_addr, ai->ai_addrlen) == 0;
        if (dup)
            continue;
        uv_tcp_t *l = &rt->listeners[n++];
        uv_tcp_init(rt->loop, l);
        l->data = rt;
        rt->listeners_open++;
        int r = uv_tcp_bind(l, ai->ai_addr, 0);
        if (r == 0)
            r = uv_listen((uv_stream_t *)l, LISTEN_BACKLOG, on_connection);
        if (r != 0) {
            snprintf(t->errmsg, sizeof(t->errmsg), "cannot listen on %s: %s", rt->address, uv_strerror(r));
            rv = RAFT_IOERR;
        }
    }
    freeaddrinfo(res);
    if (rv != 0) {
        for (int i = 0; i < n; i++)
            uv_close((uv_handle_t *)&rt->listeners[i], listener_closed_cb);
    }
    return rv;
}

/* ---- connecting side ---- */

static void
inner_connected_cb(struct raft_uv_connect *ireq, uv_stream_t *stream, int status)
{
    conn_t *c = ireq->data;
    rt_t *rt = c->rt;
    if (status != 0 || rt->closing) {
        if (status == 0) {
            uv_close((uv_handle_t *)stream, free_tcp_cb);
            status = RAFT_CANCELED;
        }
        conn_end(c, NULL, status);
        return;
    }
    c->tcp = (uv_tcp_t *)stream;
    stream->data = c;
    if (RAND_bytes(c->nonce, NONCE_LEN) != 1) {
        conn_end(c, "no random bytes for the nonce", RAFT_NOCONNECTION);
        return;
    }
    uv_timer_start(&c->timer, timeout_cb, rt->handshake_ms, 0);
    read_start(c, c->buf, NONCE_LEN, ST_PROOF);
}

static int
rt_connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id, const char *address,
           raft_uv_connect_cb cb)
{
    rt_t *rt = t->impl;
    if (rt->key == NULL)
        return rt->inner.connect(&rt->inner, req, id, address, cb);
    conn_t *c = conn_new(rt, false);
    c->stage = ST_INNER;
    c->id = id;
    c->req = req;
    c->cb = cb;
    c->inner_req.data = c;
    int rv = rt->inner.connect(&rt->inner, &c->inner_req, id, address, inner_connected_cb);
    if (rv != 0) {
        c->cb = NULL; /* the caller learns from rv */
        conn_end(c, NULL, rv);
        snprintf(t->errmsg, sizeof(t->errmsg), "%s", rt->inner.errmsg);
    }
    return rv;
}

/* ---- setup and close ---- */

static int
rt_init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    rt_t *rt = t->impl;
    rt->id = id;
    free(rt->address);
    rt->address = mf_strdup(address);
    int rv = rt->inner.init(&rt->inner, id, address);
    if (rv != 0)
        snprintf(t->errmsg, sizeof(t->errmsg), "%s", rt->inner.errmsg);
    return rv;
}

static void
inner_closed_cb(struct raft_uv_transport *inner)
{
    rt_t *rt = inner->data;
    rt->inner_closed = true;
    maybe_closed(rt);
}

static void
rt_close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    rt_t *rt = t->impl;
    rt->closing = true;
    rt->close_cb = cb;
    for (int i = 0; i < MAX_LISTENERS; i++) {
        if (rt->listeners[i].data == rt && !uv_is_closing((uv_handle_t *)&rt->listeners[i]))
            uv_close((uv_handle_t *)&rt->listeners[i], listener_closed_cb);
    }
    /* Connections in their handshake; those still in inner's connect are cancelled by inner's close. */
    conn_t *c = rt->conns;
    while (c != NULL) {
        conn_t *next = c->next;
        if (c->stage != ST_INNER)
            conn_end(c, NULL, RAFT_CANCELED);
        c = next;
    }
    rt->inner.data = rt;
    rt->inner.close(&rt->inner, inner_closed_cb);
}

int
mf_raft_transport_init(struct raft_uv_transport *t, const mf_raft_transport_opts_t *opts)
{
    rt_t *rt = mf_calloc(1, sizeof(*rt));
    int rv = raft_uv_tcp_init(&rt->inner, opts->loop);
    if (rv != 0) {
        free(rt);
        return rv;
    }
    rt->t = t;
    rt->loop = opts->loop;
    if (opts->key != NULL) {
        rt->key = mf_strdup(opts->key);
        rt->keylen = strlen(opts->key);
    }
    rt->handshake_ms = opts->handshake_ms ? opts->handshake_ms : MF_RAFT_HANDSHAKE_MS;
    rt->max_pending = opts->max_pending ? opts->max_pending : MF_RAFT_MAX_PENDING;
    rt->admit = opts->admit;
    rt->admit_arg = opts->admit_arg;
    memset(t, 0, sizeof(*t));
    t->impl = rt;
    t->init = rt_init;
    t->listen = rt_listen;
    t->connect = rt_connect;
    t->close = rt_close;
    return 0;
}

void
mf_raft_transport_release(struct raft_uv_transport *t)
{
    rt_t *rt = t->impl;
    if (rt == NULL)
        return;
    raft_uv_tcp_close(&rt->inner);
    if (rt->key != NULL)
        OPENSSL_cleanse(rt->key, rt->keylen);
    free(rt->key);
    free(rt->address);
    free(rt);
    t->impl = NULL;
}

void
mf_raft_transport_stats(struct raft_uv_transport *t, mf_raft_transport_stats_t *out)
{
    rt_t *rt = t->impl;
    *out = rt->stats;
}
