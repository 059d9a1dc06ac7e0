/*
 * net.c: the I/O thread: libuv accept/read/write, handing whole messages to
 * worker threads.
 *
 * Design:
 *   - One libuv loop on the main thread accepts connections and reads bytes
 *     into a per-connection buffer. The 4-byte length prefix is checked
 *     before the body is read: a length under 16 or over maxMessageSizeBytes
 *     closes the connection with a log line (never a crash).
 *   - Each complete message becomes a job on one of two worker pools
 *     (net_pool.c), chosen by the command name (mf_wire_peek_command):
 *       fast lane: commands that never touch collection data (hello, ping,
 *                  serverStatus, currentOp, killOp, ... see fast_cmds), so
 *                  they are never queued behind slow queries and drivers'
 *                  monitors always get an answer;
 *       data lane: everything else.
 *     Both pools start a worker whenever a job is queued and none is idle
 *     (data: up to a soft cap of SOFT_WORKERS_PER_CPU per CPU, past it only
 *     for a job waiting behind stuck workers, and up to --maxWorkers,
 *     default MF_NET_DEFAULT_MAX_WORKERS; fast: up to FAST_MAX_WORKERS),
 *     keep --workers (data) / 1 (fast) warm, and retire extra workers after
 *     WORKER_IDLE_MS idle; a retiring worker closes its
 *     WiredTiger session first (mf_storage_session_close_thread).
 *   - A worker parses the message (wire.c), runs the command (cmd/), and
 *     builds the reply bytes; it never touches libuv handles. It then links
 *     the job on the server's done list and wakes the loop (uv_async_send,
 *     under the done-list lock, so the async handle cannot be closed between
 *     the two). The loop drains the list (on_jobs_done): it writes the reply
 *     and starts the connection's next message.
 *   - Short paths: a few commands run inline on the loop thread
 *     (inline_cmds), and a data job may take its connection over: the
 *     worker answers on the socket and parks the connection in a set that
 *     a few workers wait on, and whichever of them is free reads and runs
 *     its next request (held connections, see work_hold_cb), so a request
 *     usually pays no thread hand-off at all.
 *   - One connection has at most one job in flight, whatever its lane, so its
 *     commands run in order; different connections run in parallel.
 *     eng->conn_active counts connections with a job in flight (a held
 *     awaitable hello and a parked connection are waiting, not running,
 *     and do not count).
 *   - A connection closed while a job is in flight is freed by that job's
 *     completion on the loop thread.
 *   - Wire compression (OP_COMPRESSED, wire_compress.c): a compressed
 *     request is unwrapped before anything looks at its command and its
 *     reply is compressed with the same compressor, as mongod. Where it is
 *     decompressed is a cost trade: a small request (LOOP_UNWRAP_MAX,
 *     16 KiB uncompressed) on the loop thread, in start_next, a few
 *     microseconds that let a compressed ping or serverStatus keep the fast
 *     lane and the inline path; a larger one (up to 48 MB, milliseconds or
 *     more of inflating that would stall every connection on the loop) on
 *     the data-lane worker that runs it (work_cb), costing only its own
 *     connection. Replies are compressed by the worker that built them.
 *     Both run while the connection has no other job in flight, so a hello
 *     renegotiating the connection's compressors never races the check of
 *     a request's compressor. A refused envelope closes the connection
 *     without a reply, as mongod ends the session.
 *   - A message that fails to parse closes its connection after logging.
 *     The legacy opcodes MongoDB 5.1+ refuses are answered as mongod 8.0
 *     answers them (legacy_opcode): OP_GET_MORE gets a QueryFailure reply
 *     and the connection lives on; the fire-and-forget writes close it.
 *   - Shutdown (SIGINT/SIGTERM, or the shutdown command through the
 *     engine's stop hook, stop_async): stop accepting, close idle connections
 *     (and held hellos); a connection with a job running stops reading and
 *     closes once that reply is written (conn->draining), so its client gets
 *     an answer. Then call eng->on_shutdown (the engine interrupts running
 *     operations there) and wait for the jobs in flight, logging every few
 *     seconds while any remain. When none remain, the done-list handle closes, uv_run returns,
 *     and the pools are joined (the caller then closes the engine).
 */
#include "common/alloc.h"
#include "net/net.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "catalog/catalog.h"
#include "cmd/cmd.h"
#include "engine/cursor.h"
#include "engine/profiler.h"
#include "common/clock.h"
#include "common/failpoint.h"
#include "common/fds.h"
#include "common/fmt.h"
#include "common/log.h"
#include "common/params.h"
#include "net/net_pool.h"
#include "net/tls.h"
#include "net/wire.h"
#include "storage/storage.h"

typedef struct msgbuf {
    uint8_t *data;
    size_t len;
    int compressor;      /* came as OP_COMPRESSED with this compressor (data is unwrapped); -1: plain, or not unwrapped yet */
    struct msgbuf *next;
} msgbuf_t;

/* Frees one queued message (NULL is fine). */
static void
msgbuf_free(msgbuf_t *m)
{
    if (m == NULL)
        return;
    free(m->data);
    free(m);
}

typedef struct conn {
    uv_tcp_t tcp;
    struct server *srv;
    mf_client_t client;
    uint8_t *rbuf;
    size_t rlen, rcap;
    msgbuf_t *qhead, *qtail; /* complete messages waiting for the worker */
    size_t qbytes;           /* their total size */
    bool paused;             /* reading stopped: too much queued (backpressure) */
    bool busy;               /* a job is in flight */
    bool closing;
    bool draining;           /* shutting down: close once the reply being computed is written */
    bool handle_closed;      /* on_conn_closed has run */
    bool in_start_next;      /* start_next is running (inline commands): not re-entered */
    /*
     * Awaitable hello (the drivers' streaming monitor): the reply waits in
     * held_* until the timer fires; with exhaust the request is re-run
     * after each reply, answering the reply just sent.
     */
    uv_timer_t timer;
    bool timer_closed;
    uint8_t *held;
    size_t held_len;
    msgbuf_t *held_req;      /* the hello request, re-run on a topology change (and, streaming, after each reply) */
    int32_t held_reply_id;
    int32_t held_response_to; /* what the held reply answers (its job's response_to) */
    int64_t held_counter;     /* the topologyVersion counter in the held reply */
    int64_t held_seen;        /* the counter the held job compared against (its seen_counter) */
    bool held_exhaust;
    /*
     * TLS (tls.h): the first byte a client sends tells a TLS handshake
     * (0x16, a handshake record) from a plain message, as mongod tells
     * them apart under allowTLS / preferTLS. With tls set, what read_cb
     * receives is ciphertext, decrypted into rbuf, and replies are
     * encrypted on their way out.
     */
    bool sniffed;
    mf_tls_conn_t *tls;
    bool tls_logged;
} conn_t;

/*
 * Framing, shared by the loop (parse_rbuf) and a worker holding the
 * connection (hold_next): the length of the message at the start of
 * c->rbuf + off, 0 while its 4-byte prefix or body is still incomplete, or
 * -1 with *bad set to the length when it is outside 16..MF_MAX_MESSAGE_SIZE.
 */
static int32_t
frame_len(const conn_t *c, size_t off, int32_t *bad)
{
    int32_t mlen;
    if (c->rlen - off < 4)
        return 0;
    memcpy(&mlen, c->rbuf + off, 4);
    mlen = (int32_t)le32toh((uint32_t)mlen);
    if (mlen < 16 || mlen > MF_MAX_MESSAGE_SIZE) {
        *bad = mlen;
        return -1;
    }
    return c->rlen - off < (size_t)mlen ? 0 : mlen;
}

/* A copy of the mlen bytes at c->rbuf + off as a message (caller owns it). */
static msgbuf_t *
frame_copy(const conn_t *c, size_t off, int32_t mlen)
{
    msgbuf_t *m = mf_malloc(sizeof(*m));
    m->data = mf_malloc((size_t)mlen);
    memcpy(m->data, c->rbuf + off, (size_t)mlen);
    m->len = (size_t)mlen;
    m->compressor = -1;
    m->next = NULL;
    return m;
}

/*
 * A whole message came in: serverStatus network.numRequests and bytesIn, as
 * mongod counts them (messages from the client: a held hello run again on a
 * topology change or streamed is not one; a TLS connection's records are
 * counted as the messages they carry).
 */
static void
count_request(mf_engine_t *eng, int32_t mlen)
{
    atomic_fetch_add(&eng->net_requests, 1);
    atomic_fetch_add(&eng->net_bytes_in, mlen);
}

/* Frees c->rbuf when it is empty and was left large by a big message (its owner: the loop, or a held job's worker). */
static void
rbuf_shrink(conn_t *c)
{
    if (c->rlen == 0 && c->rcap > (1u << 20)) {
        free(c->rbuf);
        c->rbuf = NULL;
        c->rcap = 0;
    }
}

/* Grows c->rbuf so at least want bytes are free after c->rlen. */
static void
rbuf_reserve(conn_t *c, size_t want)
{
    if (c->rcap - c->rlen >= want)
        return;
    size_t ncap = c->rcap ? c->rcap : 65536;
    while (ncap - c->rlen < want)
        ncap *= 2;
    c->rbuf = mf_realloc(c->rbuf, ncap);
    c->rcap = ncap;
}

typedef struct job {
    mf_net_pool_job_t pj; /* first: the pool hands it back */
    struct job *done_next; /* the server's done list */
    conn_t *conn;
    msgbuf_t *msg;
    uint8_t *reply;
    size_t reply_len;
    bool fatal;          /* close the connection after this job */
    const char *why;     /* the log line's reason for that (NULL: a malformed or unsupported message) */
    char why_buf[240];   /* a reason composed for this job (why points here) */
    int64_t await_ms;    /* awaitable hello: hold the reply this long */
    bool exhaust;        /* ... and keep streaming replies (moreToCome) */
    int32_t response_to; /* 0: the request's id; else answer to this (exhaust chain) */
    int32_t reply_id;    /* the requestID written in the reply */
    int64_t seen_counter; /* exhaust chain: the topologyVersion counter last sent (-1: the request's own) */
    int64_t counter;      /* the counter in this job's hello reply */
    /*
     * Held connection (see work_hold_cb): the loop stopped reading it; the
     * job's owner (a worker, or the parked set) reads and answers its
     * requests. held_fd is its descriptor; held_back tells after_work to
     * read again.
     */
    int held_fd;
    bool held_back;
    bool in_hold_ep;   /* held_fd is in the server's parked set (hold_ep; removed before the loop gets it back) */
    int held_served;   /* requests served on this connection one after another, with no parking between them */
    int64_t held_took_us; /* how long its last request ran (work_cb), µs: a slow one's next goes to the pool */
} job_t;

/* A parked connection (see "Held connections"): a slot of server_t's hold_slots. */
typedef struct hold_slot {
    job_t *job;       /* NULL: free */
    uint32_t gen;     /* bumped when freed: an epoll event of an earlier parking is told apart */
    int64_t deadline; /* monotonic µs its wait ends (then it goes back to the loop) */
    int prev, next;   /* the parked list, by deadline (or the free list, next only); -1 ends */
} hold_slot_t;

typedef struct server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_signal_t sigint, sigterm;
    mf_engine_t *eng;
    bool stopping;
    conn_t **conns;
    size_t nconns, capconns;
    /* Worker lanes (see the header comment). */
    mf_net_pool_t *fast_pool, *data_pool;
    /* Finished jobs, linked by workers, drained on the loop thread. */
    uv_async_t done_async;
    pthread_mutex_t done_lock;
    job_t *done_head, *done_tail;
    int64_t inflight;       /* jobs submitted and not yet drained (loop thread only) */
    uv_timer_t stop_timer;  /* shutdown progress log while jobs remain */
    bool stop_timer_open;
    bool done_async_open;
    int max_conns;          /* --maxConns */
    int64_t nofile;         /* the open-files limit when serving began (mf_fds_limit) */
    _Atomic bool no_hold;   /* shutting down: workers give held connections back at once */
    int64_t hold_us;        /* netConnectionHoldMicros at startup (0: never hold) */
    /* The parked set (see "Held connections"); hold_lock guards the fields after it. */
    int hold_ep;            /* epoll: parked connections (one-shot), the pool's wake and hold_stop_fd; -1: none */
    int hold_stop_fd;       /* eventfd made readable at shutdown: every waiter leaves */
    pthread_mutex_t hold_lock;
    pthread_cond_t hold_cv; /* wakes the watchdog: a first connection parked after a quiet spell, or its stop */
    hold_slot_t *hold_slots; /* HOLD_SLOTS of them */
    int hold_free;          /* the first free slot, -1 none */
    int hold_first, hold_last; /* the parked list, oldest deadline first; -1 when empty */
    int hold_parked;        /* connections parked */
    int hold_waiters;       /* workers waiting on hold_ep */
    int max_waiters;        /* at most this many at once */
    int64_t hold_seq;       /* bumped whenever a worker parks a connection or waits: the watchdog's sign of life */
    mf_net_pool_job_t waiter_job; /* a pool job that makes its worker one more waiter (hold_wait's slow requests) */
    _Atomic bool waiter_job_queued; /* waiter_job is in the pool's queue (it must not be queued twice) */
    int64_t hold_rescued;   /* connections the watchdog gave back (no worker waited: every waiter was slow) */
    int64_t hold_called;    /* times waiter_job was queued for a slow connection's request */
    bool watch_sleeping;    /* the watchdog waits, untimed, for a connection to be parked (the set was empty) */
    bool watch_resting;     /* ... or for the last waiter to leave with others parked (a waiter was always there) */
    bool watch_stop;
    pthread_t hold_watch;
    bool hold_watch_started;
    int ncpu;               /* the CPUs granted (eng->sysres, read once at start): the pools' sizes follow it */
    uv_async_t topo_async;  /* the engine's topology changed: answer the held hellos */
    bool topo_async_open;
    uv_async_t stop_async;  /* the shutdown command asked for a clean stop */
    bool stop_async_open;
    mf_tls_mode_t tls_mode; /* --tlsMode */
    mf_tls_ctx_t *tls;      /* NULL when TLS is disabled */
    void (*detach)(void *arg); /* mf_net_opts_t's other front ends */
    void *attach_arg;
} server_t;

/* Queued request bytes per connection beyond which reading pauses. */
#define MAX_QUEUED_BYTES (64u * 1024 * 1024)
/* The fast lane's worker cap: its commands take microseconds. */
#define FAST_MAX_WORKERS 64
/* Workers above the warm count exit after idling this long. */
#define WORKER_IDLE_MS 5000
/* While shutting down, log the jobs still running this often. */
#define STOP_LOG_MS 5000

/*
 * Commands that never touch collection data (nor wait on a collection's
 * locks): they run on the fast lane. Names as sent (case-sensitive, as in
 * mongod's command lookup).
 */
static const char *const fast_cmds[] = {
    "hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "serverStatus", "currentOp", "killOp",
    "getParameter", "whatsmyuri", "connectionStatus", "hostInfo", "getLog", "listCommands", "getCmdLineOpts",
    "startSession", "endSessions", "killSessions", "killAllSessions", "refreshSessions", "logout", "saslStart",
    "saslContinue", "authenticate", "replSetGetStatus", "replSetGetConfig", "_mfReplInfo", "getDefaultRWConcern",
    "getDiagnosticData", NULL};

/* True if the message is a command for the fast lane. */
static bool
is_fast_message(const msgbuf_t *m)
{
    char name[64];
    if (!mf_wire_peek_command(m->data, m->len, name, sizeof(name)))
        return false;
    for (int i = 0; fast_cmds[i]; i++)
        if (strcmp(name, fast_cmds[i]) == 0)
            return true;
    return false;
}

/*
 * Commands answered on the loop thread itself, without a worker: they take
 * a few microseconds, touch no collection, storage or lock, and never wait,
 * so running them inline costs other connections nothing, while a thread
 * hand-off each way (a wake-up of an idle CPU) would cost the request more
 * than the command itself. Not an awaitable hello (it holds its reply), and
 * nothing while a failCommand fail point is on (it can block or close).
 */
static const char *const inline_cmds[] = {"ping", "hello", "isMaster", "ismaster", "buildInfo", "buildinfo",
                                          "whatsmyuri", NULL};

static bool
is_inline_message(const conn_t *c, const msgbuf_t *m)
{
    char name[32];
    uint32_t opcode, flags;
    if (m->len < 21)
        return false;
    memcpy(&opcode, m->data + 12, 4);
    memcpy(&flags, m->data + 16, 4);
    if (le32toh(opcode) != MF_OP_MSG || le32toh(flags) != 0 || m->data[20] != 0 /* one body section, no checksum */)
        return false;
    if (!mf_wire_peek_command(m->data, m->len, name, sizeof(name)))
        return false;
    bool listed = false;
    for (int i = 0; inline_cmds[i] && !listed; i++)
        listed = strcmp(name, inline_cmds[i]) == 0;
    /* Only a hello can be awaitable (memmem over every ping cost 250 instructions). */
    if (!listed || ((name[0] == 'h' || name[0] == 'i') && memmem(m->data, m->len, "maxAwaitTimeMS", 14) != NULL))
        return false;
    /* Nor while anything is profiled: writing system.profile takes the catalog's lock and storage. */
    return !mf_failpoint_on(c->srv->eng->fp_fail_command) && !mf_profile_any(c->srv->eng->profiler);
}

static void start_next(conn_t *c);
static void parse_rbuf(conn_t *c);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void free_conn_if_orphaned(conn_t *c);
static void on_await_timer(uv_timer_t *t);

static void
on_conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    server_t *srv = c->srv;
    for (size_t i = 0; i < srv->nconns; i++) {
        if (srv->conns[i] == c) {
            srv->conns[i] = srv->conns[--srv->nconns];
            break;
        }
    }
    atomic_fetch_sub(&srv->eng->conn_current, 1);
    c->handle_closed = true;
    /* Memory is freed by the last of: this, the timer's close, an in-flight job. */
    if (!c->busy && c->timer_closed)
        free_conn_if_orphaned(c);
}

static void
on_timer_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    c->timer_closed = true;
    if (c->handle_closed && !c->busy)
        free_conn_if_orphaned(c);
}

static void queue_job(conn_t *c, msgbuf_t *m, int32_t response_to, int64_t seen_counter);

/*
 * Loop thread: the engine's topology changed (a replica-set member's role):
 * every held hello is run again now, and answers at once with the new
 * topologyVersion (streaming ones keep streaming).
 */
static void
on_topology_async(uv_async_t *a)
{
    server_t *srv = a->data;
    for (size_t i = 0; i < srv->nconns; i++) {
        conn_t *c = srv->conns[i];
        if (c->held == NULL || c->closing || c->draining)
            continue;
        uv_timer_stop(&c->timer);
        free(c->held);
        c->held = NULL;
        msgbuf_t *req = c->held_req;
        c->held_req = NULL;
        c->busy = false;
        queue_job(c, req, c->held_response_to, c->held_seen);
    }
}

/*
 * serverStatus.network.workers (mayfly's): each pool's threads and counters
 * (net_pool.h), so the soft cap's work is visible: threads alive, idle and
 * at most at once, jobs queued, the caps, and the threads the judge started
 * past the soft cap (grown) and that left once not needed (shrunk). Called
 * under the engine's net_status_mu (mf_engine_net_status_append); the pools
 * live until the hook is cleared.
 */
static void
append_pool(bson_t *doc, const char *name, mf_net_pool_t *p)
{
    mf_net_pool_stats_t st;
    bson_t sub;
    mf_net_pool_stats(p, &st);
    BSON_APPEND_DOCUMENT_BEGIN(doc, name, &sub);
    BSON_APPEND_INT32(&sub, "threads", st.threads);
    BSON_APPEND_INT32(&sub, "idle", st.idle);
    BSON_APPEND_INT32(&sub, "queued", st.queued);
    BSON_APPEND_INT32(&sub, "peak", st.peak);
    BSON_APPEND_INT32(&sub, "softCap", st.soft);
    BSON_APPEND_INT32(&sub, "maxWorkers", st.cap);
    BSON_APPEND_INT64(&sub, "started", st.started);
    BSON_APPEND_INT64(&sub, "retired", st.retired);
    BSON_APPEND_INT64(&sub, "grown", st.grown);
    BSON_APPEND_INT64(&sub, "shrunk", st.shrunk);
    bson_append_document_end(doc, &sub);
}

static void
on_net_status(void *arg, bson_t *network)
{
    server_t *srv = arg;
    bson_t w;
    BSON_APPEND_DOCUMENT_BEGIN(network, "workers", &w);
    append_pool(&w, "data", srv->data_pool);
    append_pool(&w, "fast", srv->fast_pool);
    BSON_APPEND_INT32(&w, "cpus", srv->ncpu);
    /* The parked set of held connections (see "Held connections"). */
    bson_t h;
    BSON_APPEND_DOCUMENT_BEGIN(&w, "held", &h);
    pthread_mutex_lock(&srv->hold_lock);
    BSON_APPEND_INT32(&h, "parked", srv->hold_parked);
    BSON_APPEND_INT32(&h, "waiters", srv->hold_waiters);
    BSON_APPEND_INT32(&h, "maxWaiters", srv->hold_ep >= 0 ? srv->max_waiters : 0);
    BSON_APPEND_INT64(&h, "rescued", srv->hold_rescued);
    BSON_APPEND_INT64(&h, "waitersCalled", srv->hold_called);
    pthread_mutex_unlock(&srv->hold_lock);
    bson_append_document_end(&w, &h);
    bson_append_document_end(network, &w);
}

/* Any thread (the engine calls it under its topology lock). */
static void
on_topology(void *arg)
{
    server_t *srv = arg;
    uv_async_send(&srv->topo_async);
}

static void
conn_close(conn_t *c, const char *why)
{
    if (c->closing)
        return;
    c->closing = true;
    /* Before the socket closes: a command still running (an awaitData getMore) stops polling it (client_hung_up). */
    atomic_store(&c->client.hung_up, true);
    if (why)
        mf_log(MF_LOG_INFO, "NETWORK", "conn%lld: closing connection from %s: %s", (long long)c->client.id,
               c->client.remote, why);
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_stop(&c->timer);
    if (c->held != NULL) {
        /* A held hello reply will never be sent; the connection is no longer busy with it. */
        free(c->held);
        c->held = NULL;
        msgbuf_free(c->held_req);
        c->held_req = NULL;
        c->busy = false;
    }
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static _Atomic int32_t next_reply_id = 1;

/*
 * An awaitable hello carries the topologyVersion the client last saw and
 * maxAwaitTimeMS. If the topology is unchanged (same processId and counter:
 * a standalone's never changes), the server holds the reply for
 * maxAwaitTimeMS. Returns that time, or 0 to answer at once.
 */
static int64_t
awaitable_hello(const bson_t *body, const bson_t *reply, int64_t seen_counter, bool *awaitable, int64_t *counter)
{
    bson_iter_t it, a, b;
    const char *name;
    *awaitable = false;
    *counter = 0;
    if (!bson_iter_init(&it, body) || !bson_iter_next(&it))
        return 0;
    name = bson_iter_key(&it);
    if (strcmp(name, "hello") != 0 && strcmp(name, "isMaster") != 0 && strcmp(name, "ismaster") != 0)
        return 0;
    if (!bson_iter_init_find(&it, body, "maxAwaitTimeMS") || !BSON_ITER_HOLDS_NUMBER(&it))
        return 0;
    int64_t ms = bson_iter_as_int64(&it);
    if (ms <= 0 || ms > 3600 * 1000)
        return 0;
    if (!bson_iter_init_find(&a, body, "topologyVersion") || !BSON_ITER_HOLDS_DOCUMENT(&a) ||
        !bson_iter_init_find(&b, reply, "topologyVersion") || !BSON_ITER_HOLDS_DOCUMENT(&b))
        return 0;
    bson_t ta, tb;
    const uint8_t *d;
    uint32_t l;
    bson_iter_document(&a, &l, &d);
    bson_init_static(&ta, d, l);
    bson_iter_document(&b, &l, &d);
    bson_init_static(&tb, d, l);
    bson_iter_t pa, pb;
    if (!bson_iter_init_find(&pa, &ta, "processId") || !bson_iter_init_find(&pb, &tb, "processId") ||
        !BSON_ITER_HOLDS_OID(&pa) || !BSON_ITER_HOLDS_OID(&pb) ||
        !bson_oid_equal(bson_iter_oid(&pa), bson_iter_oid(&pb)))
        return 0;
    *awaitable = true;
    if (bson_iter_init_find(&pb, &tb, "counter") && BSON_ITER_HOLDS_NUMBER(&pb))
        *counter = bson_iter_as_int64(&pb);
    int64_t theirs = seen_counter;
    if (theirs < 0)
        theirs = bson_iter_init_find(&pa, &ta, "counter") && BSON_ITER_HOLDS_NUMBER(&pa) ? bson_iter_as_int64(&pa) : -1;
    return theirs == *counter ? ms : 0; /* a changed topology answers at once */
}

/*
 * The legacy opcodes MongoDB 5.1+ no longer serves, answered as mongod 8.0
 * answers them (service_entry_point_common.cpp): OP_GET_MORE, a read, gets
 * an OP_REPLY with QueryFailure and {$err, code: 5739101, ok: 0} and the
 * connection lives on; the fire-and-forget writes have no reply to carry an
 * error, so mongod fails the request (uasserted with the code below), logs
 * "Failed to handle request" and closes the connection. Returns true when
 * opcode is one of them (the job is answered or marked fatal).
 */
static bool
legacy_opcode(job_t *job, const mf_msg_header_t *hdr)
{
    static const struct {
        int32_t opcode;
        const char *why; /* the close's log reason: mongod's error */
    } writes[] = {
        {MF_OP_KILL_CURSORS, "Failed to handle request: Location5745703: OP_KILL_CURSORS is no longer supported"},
        {MF_OP_INSERT, "Failed to handle request: Location5745702: OP_INSERT is no longer supported"},
        {MF_OP_UPDATE, "Failed to handle request: Location5745701: OP_UPDATE is no longer supported"},
        {MF_OP_DELETE, "Failed to handle request: Location5745700: OP_DELETE is no longer supported"},
    };

    if (hdr->opcode == MF_OP_GET_MORE) {
        bson_t reply = BSON_INITIALIZER;
        mf_log(MF_LOG_WARN, "COMMAND", "conn%lld: deprecated operation requested: getmore",
               (long long)job->conn->client.id);
        mf_cmd_legacy_op_error(&reply, "OP_GET_MORE");
        job->reply = mf_wire_build_reply(job->reply_id, hdr->request_id, MF_REPLY_QUERY_FAILURE, &reply,
                                         &job->reply_len);
        bson_destroy(&reply);
        return true;
    }
    for (size_t i = 0; i < sizeof(writes) / sizeof(writes[0]); i++) {
        if (writes[i].opcode == hdr->opcode) {
            job->fatal = true;
            job->why = writes[i].why;
            return true;
        }
    }
    return false;
}

/* The opcode in the header of m (at least 16 bytes: the loop framed it). */
static int32_t
msg_opcode(const msgbuf_t *m)
{
    uint32_t op;
    memcpy(&op, m->data + 12, 4);
    return (int32_t)le32toh(op);
}

/*
 * If m is an OP_COMPRESSED request, replaces its bytes with the message it
 * carries (wire_compress.c checks the envelope, as mongod's
 * decompressMessage) and records the compressor in m->compressor, so that
 * its reply is compressed the same way; counts the decompressor's bytes and
 * the logical bytes in. Call it where the connection's negotiated
 * compressors cannot change meanwhile (a hello renegotiates them): on the
 * loop thread while the connection has no job in flight, or on the worker
 * running its job. Returns 0 (m plain, or unwrapped), or -1 with err: the
 * connection must close without a reply, as mongod ends the session when
 * decompressMessage fails.
 */
static int
unwrap_request(conn_t *c, msgbuf_t *m, mf_error_t *err)
{
    mf_engine_t *eng = c->srv->eng;
    uint8_t *out;
    size_t out_len;
    int id = -1;

    if (m->compressor >= 0 || msg_opcode(m) != MF_OP_COMPRESSED)
        return 0; /* plain, or unwrapped already (an envelope inside an envelope is left to fail as an unknown opcode) */
    if (mf_wire_decompress(m->data, m->len, &eng->net_compressors, &c->client.compressors, &out, &out_len, &id,
                           err) != 0)
        return -1;
    atomic_fetch_add(&eng->net_compression[id][2], (int64_t)(m->len - MF_WIRE_HEADER_SIZE - MF_COMPRESSED_HEADER_SIZE));
    atomic_fetch_add(&eng->net_compression[id][3], (int64_t)(out_len - MF_WIRE_HEADER_SIZE));
    atomic_fetch_add(&eng->net_logical_in_extra, (int64_t)out_len - (int64_t)m->len);
    free(m->data);
    m->data = out;
    m->len = out_len;
    m->compressor = id;
    return 0;
}

/*
 * Worker (or loop, inline): the reply to a compressed request goes out
 * compressed with the request's compressor, as mongod's
 * SessionWorkflow::compressResponse, whatever the command (mongod has no
 * server-side list of commands it never compresses: that list is the
 * drivers', which never compress those requests). A reply that might not
 * fit maxMessageSizeBytes compressed, or that the library fails on, goes as
 * it is.
 */
static void
compress_reply(job_t *job)
{
    mf_engine_t *eng = job->conn->srv->eng;
    int id = job->msg->compressor;
    size_t n;
    uint8_t *out = mf_wire_compress(job->reply, job->reply_len, id, &n);

    if (out == NULL)
        return;
    atomic_fetch_add(&eng->net_compression[id][0], (int64_t)(job->reply_len - MF_WIRE_HEADER_SIZE));
    atomic_fetch_add(&eng->net_compression[id][1], (int64_t)(n - MF_WIRE_HEADER_SIZE - MF_COMPRESSED_HEADER_SIZE));
    atomic_fetch_add(&eng->net_logical_out_extra, (int64_t)job->reply_len - (int64_t)n);
    free(job->reply);
    job->reply = out;
    job->reply_len = n;
}

static void run_request(job_t *job);

/*
 * Worker thread (or the loop, for an inline command): unwrap a compressed
 * request, run it, compress its reply as the request was. Touches no libuv
 * handle.
 */
static void
work_cb(mf_net_pool_job_t *pj)
{
    job_t *job = (job_t *)pj;
    mf_error_t err;

    if (unwrap_request(job->conn, job->msg, &err) != 0) {
        snprintf(job->why_buf, sizeof(job->why_buf), "Error receiving request from client: %s: %.180s",
                 mf_err_codename(err.code), err.msg);
        job->why = job->why_buf;
        job->fatal = true;
        return;
    }
    run_request(job);
    if (job->reply != NULL && !job->fatal && job->msg->compressor >= 0)
        compress_reply(job);
}

/* Parse, run, build the reply (work_cb's middle). */
static void
run_request(job_t *job)
{
    conn_t *c = job->conn;
    mf_engine_t *eng = c->srv->eng;
    mf_msg_header_t lhdr;
    mf_msg_t msg;
    mf_error_t err;
    bson_t reply;
    char dbname[128];

    mf_err_clear(&err);
    mf_wire_read_header(job->msg->data, &lhdr); /* the loop framed it: at least 16 bytes, its length right */
    if (legacy_opcode(job, &lhdr))
        return;
    if (mf_wire_parse(job->msg->data, job->msg->len, &msg, &err) != 0) {
        mf_msg_header_t hdr;
        mf_wire_read_header(job->msg->data, &hdr);
        mf_log(MF_LOG_WARN, "NETWORK", "conn%lld: malformed message (%s): %s", (long long)c->client.id,
               mf_err_codename(err.code), err.msg);
        /*
         * A well-framed message whose documents are bad (invalid BSON, too
         * deep, too large) gets an error reply and the connection lives on;
         * a framing fault closes it.
         */
        if (err.code != MF_E_ProtocolError && (hdr.opcode == MF_OP_MSG || hdr.opcode == MF_OP_QUERY)) {
            bson_init(&reply);
            mf_cmd_error_reply(&reply, &err);
            if (hdr.opcode == MF_OP_MSG)
                job->reply = mf_wire_build_msg(job->reply_id, hdr.request_id, 0, &reply, &job->reply_len);
            else
                job->reply = mf_wire_build_reply(job->reply_id, hdr.request_id, MF_REPLY_AWAIT_CAPABLE, &reply,
                                                 &job->reply_len);
            bson_destroy(&reply);
            return;
        }
        job->fatal = true;
        return;
    }
    bson_init(&reply);
    if (msg.hdr.opcode == MF_OP_MSG) {
        bson_iter_t it;
        const char *db = NULL;
        uint32_t dblen = 0;
        if (bson_iter_init_find(&it, &msg.body, "$db") && BSON_ITER_HOLDS_UTF8(&it))
            db = bson_iter_utf8(&it, &dblen);
        if (db == NULL) {
            mf_error_t e;
            mf_err_set(&e, MF_E_Location40571, "OP_MSG requests require a $db argument");
            mf_cmd_error_reply(&reply, &e);
        } else if (strlen(db) != dblen) {
            /* "secret\0evil" must not read, write or drop "secret". */
            mf_error_t e;
            mf_err_set(&e, MF_E_InvalidNamespace, "Invalid database name: contains a NUL byte");
            mf_cmd_error_reply(&reply, &e);
        } else if (!mf_catalog_db_name_ok(db, dblen, true)) {
            /* As mongod checks every command's $db first (DatabaseName::isValid, '$' allowed: $external). */
            mf_error_t e;
            mf_err_set(&e, MF_E_InvalidNamespace, "Invalid database name: '%s'", db);
            mf_cmd_error_reply(&reply, &e);
        } else {
            mf_cmd_run(eng, &c->client, db, &msg.body, msg.seqs, msg.nseqs, false, &reply);
            if (c->client.close_requested) {
                /* failCommand's closeConnection: no reply, the connection goes. */
                c->client.close_requested = false;
                job->fatal = true;
                job->why = "closed by the failCommand fail point";
                bson_destroy(&reply);
                mf_wire_msg_destroy(&msg);
                return;
            }
            bool awaitable;
            job->await_ms = awaitable_hello(&msg.body, &reply, job->seen_counter, &awaitable, &job->counter);
            job->exhaust = awaitable && (msg.flags & MF_MSG_EXHAUST_ALLOWED);
        }
        if (!(msg.flags & MF_MSG_MORE_TO_COME))
            job->reply = mf_wire_build_msg(job->reply_id, job->response_to ? job->response_to : msg.hdr.request_id,
                                           job->exhaust ? MF_MSG_MORE_TO_COME : 0, &reply, &job->reply_len);
    } else if (msg.hdr.opcode == MF_OP_QUERY) {
        const char *ns = msg.full_collection_name;
        const char *dot = strchr(ns, '.');
        size_t dl = dot ? (size_t)(dot - ns) : strlen(ns);
        /* As mongod's LegacyReplyBuilder: a command's reply, error or not, says AwaitCapable. */
        uint32_t rflags = MF_REPLY_AWAIT_CAPABLE;
        if (dot == NULL || strcmp(dot + 1, "$cmd") != 0 || dl >= sizeof(dbname)) {
            /* A query on a collection: mongod's $err document with QueryFailure, so drivers raise it. */
            mf_log(MF_LOG_WARN, "COMMAND", "conn%lld: deprecated operation requested: query", (long long)c->client.id);
            mf_cmd_legacy_op_error(&reply, "OP_QUERY");
            rflags = MF_REPLY_QUERY_FAILURE;
        } else {
            memcpy(dbname, ns, dl);
            dbname[dl] = '\0';
            /* Legacy commands may be wrapped as {$query: {...}, $readPreference: ...}. */
            bson_t inner;
            bson_iter_t it;
            const bson_t *cmd = &msg.body;
            if (bson_iter_init_find(&it, &msg.body, "$query") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
                const uint8_t *d;
                uint32_t l;
                bson_iter_document(&it, &l, &d);
                if (bson_init_static(&inner, d, l))
                    cmd = &inner;
            }
            /* As mongod 5.1+: OP_QUERY only for the handshake and authentication; every other command is 352. */
            static const char *const allowed[] = {"_isSelf", "authenticate", "buildinfo", "buildInfo", "hello",
                                                  "isMaster", "ismaster", "saslContinue", "saslStart", NULL};
            const char *name = bson_iter_init(&it, cmd) && bson_iter_next(&it) ? bson_iter_key(&it) : "";
            bool ok = false;
            for (int i = 0; allowed[i] != NULL && !ok; i++)
                ok = strcmp(allowed[i], name) == 0;
            if (ok) {
                mf_cmd_run(eng, &c->client, dbname, cmd, NULL, 0, true, &reply);
            } else {
                mf_error_t e;
                mf_err_set(&e, MF_E_UnsupportedOpQueryCommand,
                           "Unsupported OP_QUERY command: %s. The client driver may require an upgrade. For more "
                           "details see https://dochub.mongodb.org/core/legacy-opcode-removal", name);
                mf_cmd_error_reply(&reply, &e);
            }
        }
        job->reply = mf_wire_build_reply(job->reply_id, msg.hdr.request_id, rflags, &reply, &job->reply_len);
    } else {
        mf_log(MF_LOG_WARN, "NETWORK", "conn%lld: unsupported opCode %d", (long long)c->client.id, msg.hdr.opcode);
        job->fatal = true;
    }
    bson_destroy(&reply);
    mf_wire_msg_destroy(&msg);
}

/*
 * Held connections. A data command's worker answers on the socket itself,
 * and the connection is then parked: its descriptor goes into the server's
 * parked set (hold_ep, an epoll set, one-shot per connection) for up to
 * hold_us, and a worker waiting on that set reads and runs its next request
 * as soon as it comes, on whichever connection it comes, so a client sending
 * one request after another is served with no hand-off between threads (the
 * loop-thread to worker to loop-thread trip costs two wake-ups of idle
 * CPUs, more than a point read itself).
 *
 * Why a shared set, not a worker per connection: with a worker waiting on
 * each held connection, 8 closed-loop clients on 2 CPUs woke 8 threads for
 * every round of 8 requests, one context switch per request (1.05-1.17
 * voluntary switches per find by _id measured, the paravirtualised switch
 * the largest single cost in a perf profile of the server). At most
 * max_waiters workers (HOLD_WAITERS_PER_CPU per CPU) wait on the set; a
 * worker that has served a request parks its connection and waits if there
 * is room among them, else goes back to the pool. A waiter takes the next
 * parked connection with a request (epoll wakes one waiter per ready
 * connection, and a waiter that finds another connection ready when it
 * comes back takes it without sleeping), so a round of requests wakes at
 * most max_waiters threads.
 *
 * The wait ends (the connection goes back to the loop, which reads it
 * again) at its deadline, after HOLD_MAX_REQUESTS requests read one with
 * another (a pipelining client; a connection that was parked between its
 * requests starts counting again, so a client making request after request
 * is not sent through the loop every 256th: 64 trips a second at 16,500
 * finds a second cost the loop 0.46 µs of CPU per find), when jobs are
 * queued for workers (a waiter sees the pool's wake descriptor, readable
 * while jobs wait with the pool at its soft cap or cap, gives every parked
 * connection back and leaves to take them), on
 * anything but a plain complete reply (held hello, exhaust, fatal, a
 * partial send), or at shutdown (hold_stop_fd). Parked connections never
 * wait behind a slow request: a watchdog thread, ticking every
 * HOLD_TICK_US while any connection is parked and unattended (see
 * hold_watch_main for when it sleeps and rests), gives them all back to the
 * loop once no worker has waited on the set for HOLD_STALL_US (every waiter
 * busy with a long query, a lock or a journal wait), and the loop hands
 * their requests to the pool like any other.
 *
 * Ownership: the loop stops reading a connection before handing it over
 * (queue_job) and starts again when its job comes back (after_work); in
 * between only the thread that owns the job reads or writes it, and the
 * loop never closes it (it is busy). A parked job is owned by the set
 * (hold_lock): a waiter takes it out with the slot index and generation its
 * epoll event carries, so an event of an earlier parking, or of one given
 * back meanwhile, is ignored. Bytes read past a request stay in c->rbuf.
 */
#define HOLD_MAX_REQUESTS 256
#define HOLD_WAITERS_PER_CPU 1
#define HOLD_SLOTS 1024     /* connections parked at once, at most (past it, they go back to the loop) */
#define HOLD_TICK_US 2000   /* the watchdog's look, while anything is parked */
#define HOLD_STALL_US 2000  /* no waiter and no sign of one this long, with connections parked: back to the loop */
#define HOLD_QUIET_TICKS 10 /* nothing parked for this many looks: the watchdog sleeps until something is */
#define HOLD_REST_LOOK_MS 100 /* the resting watchdog's look all the same (see hold_watch_main) */
#define HOLD_SLOW_US 500    /* a connection whose last request ran this long is a slow one (see hold_wait) */
#define HOLD_TOKEN_WAKE UINT64_MAX       /* hold_ep's event for the pool's wake descriptor */
#define HOLD_TOKEN_STOP (UINT64_MAX - 1) /* ... and for hold_stop_fd */
/*
 * The data pool's soft cap per CPU (at least 16 in all; see net_pool.c, "Soft
 * cap"): the workers serving held connections leave room for requests that
 * are not held before it is reached.
 */
#define SOFT_WORKERS_PER_CPU 8

static void on_pool_job_done(mf_net_pool_job_t *pj, void *arg);
static void work_hold_cb(mf_net_pool_job_t *pj);

/* Worker: sends all of buf on fd, non-blocking. Returns the bytes sent (len when all went). */
static size_t
hold_send(int fd, const uint8_t *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, buf + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            break;
    }
    return off;
}

/*
 * The owner of a held job: takes the connection's next whole request into
 * job->msg, from c->rbuf and, with may_recv, from the socket (not waiting).
 * Returns 1 with a request, 0 when none is whole yet, -1 on end of stream,
 * an error or an invalid length (the loop sees to those when it gets the
 * connection back).
 */
static int
hold_next(job_t *job, bool may_recv)
{
    conn_t *c = job->conn;
    mf_engine_t *eng = c->srv->eng;
    for (;;) {
        int32_t bad, mlen = frame_len(c, 0, &bad);
        if (mlen < 0)
            return -1;
        if (mlen > 0) {
            msgbuf_t *m = frame_copy(c, 0, mlen);
            count_request(eng, mlen);
            memmove(c->rbuf, c->rbuf + mlen, c->rlen - (size_t)mlen);
            c->rlen -= (size_t)mlen;
            atomic_fetch_add(&eng->net_held_requests, 1);
            msgbuf_free(job->msg);
            job->msg = m;
            job->reply_id = atomic_fetch_add(&next_reply_id, 1);
            job->response_to = 0;
            job->seen_counter = -1;
            job->await_ms = 0;
            job->exhaust = false;
            return 1;
        }
        if (!may_recv)
            return 0;
        rbuf_reserve(c, 65536);
        ssize_t n = recv(job->held_fd, c->rbuf + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
        if (n > 0)
            c->rlen += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    }
}

/* The owner of a held job: takes its descriptor out of the parked set before the loop reads it again. */
static void
hold_unregister(server_t *srv, job_t *job)
{
    if (job->in_hold_ep) {
        epoll_ctl(srv->hold_ep, EPOLL_CTL_DEL, job->held_fd, NULL);
        job->in_hold_ep = false;
    }
}

/* The owner of a held job, not parked: gives the connection back to the loop (as a finished job). */
static void
hold_give_back(server_t *srv, job_t *job)
{
    hold_unregister(srv, job);
    on_pool_job_done(&job->pj, srv);
}

/* Unlinks parked slot i and frees it; returns its job (now the caller's, counted active). Caller holds hold_lock. */
static job_t *
hold_unpark_locked(server_t *srv, int i)
{
    hold_slot_t *sl = &srv->hold_slots[i];
    job_t *job = sl->job;
    if (sl->prev >= 0)
        srv->hold_slots[sl->prev].next = sl->next;
    else
        srv->hold_first = sl->next;
    if (sl->next >= 0)
        srv->hold_slots[sl->next].prev = sl->prev;
    else
        srv->hold_last = sl->prev;
    sl->job = NULL;
    sl->gen++;
    sl->prev = -1;
    sl->next = srv->hold_free;
    srv->hold_free = i;
    srv->hold_parked--;
    atomic_fetch_add(&srv->eng->conn_active, 1); /* running again (or handed back, which counts it out) */
    return job;
}

/*
 * The owner of a held job: parks its connection (see above); the job is the
 * set's from then on. Returns false, the job still the caller's, when the
 * set is full, shutting down or the descriptor cannot be watched.
 */
static bool
hold_park(server_t *srv, job_t *job)
{
    bool ok = false;
    pthread_mutex_lock(&srv->hold_lock);
    int i = srv->hold_free;
    if (i >= 0 && !atomic_load(&srv->no_hold)) {
        hold_slot_t *sl = &srv->hold_slots[i];
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
                                 .data.u64 = ((uint64_t)sl->gen << 32) | (uint32_t)i};
        if (epoll_ctl(srv->hold_ep, job->in_hold_ep ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, job->held_fd, &ev) == 0) {
            job->in_hold_ep = true;
            srv->hold_free = sl->next;
            sl->job = job;
            sl->deadline = mf_mono_us() + srv->hold_us; /* under the lock: the list stays in deadline order */
            sl->next = -1;
            sl->prev = srv->hold_last;
            if (srv->hold_last >= 0)
                srv->hold_slots[srv->hold_last].next = i;
            else
                srv->hold_first = i;
            srv->hold_last = i;
            srv->hold_parked++;
            srv->hold_seq++;
            atomic_fetch_sub(&srv->eng->conn_active, 1); /* waiting, not running */
            if (srv->watch_sleeping) {
                srv->watch_sleeping = false;
                pthread_cond_signal(&srv->hold_cv);
            }
            ok = true;
        }
    }
    pthread_mutex_unlock(&srv->hold_lock);
    return ok;
}

/* Gives the parked connections back to the loop: those whose wait is over, or all of them. */
static void
hold_expire(server_t *srv, bool all)
{
    job_t *list = NULL;
    int64_t now = mf_mono_us();
    pthread_mutex_lock(&srv->hold_lock);
    while (srv->hold_first >= 0 && (all || srv->hold_slots[srv->hold_first].deadline <= now)) {
        job_t *job = hold_unpark_locked(srv, srv->hold_first);
        job->done_next = list; /* a private list until on_pool_job_done links it for the loop */
        list = job;
    }
    pthread_mutex_unlock(&srv->hold_lock);
    while (list != NULL) {
        job_t *next = list->done_next;
        hold_give_back(srv, list);
        list = next;
    }
}

/* Caller holds hold_lock: a resting watchdog (see hold_watch_main) looks now. */
static void
watch_wake_locked(server_t *srv)
{
    if (srv->watch_resting) {
        srv->watch_resting = false;
        pthread_cond_signal(&srv->hold_cv);
    }
}

/*
 * Worker: waits on the parked set (see above) and returns a parked job whose
 * next request it has read (now this worker's, counted active), or NULL
 * when the wait is over: nothing parked, shutdown, jobs queued for the
 * pool, or max_waiters already waiting.
 */
static job_t *
hold_wait(server_t *srv)
{
    job_t *got = NULL;
    pthread_mutex_lock(&srv->hold_lock);
    if (srv->hold_waiters >= srv->max_waiters) {
        pthread_mutex_unlock(&srv->hold_lock);
        return NULL;
    }
    srv->hold_waiters++;
    for (;;) {
        /* Decided under the lock with the count: a connection parked later finds this waiter gone, and waits itself. */
        if (srv->hold_first < 0 || atomic_load(&srv->no_hold))
            break;
        int64_t left = srv->hold_slots[srv->hold_first].deadline - mf_mono_us();
        srv->hold_seq++;
        pthread_mutex_unlock(&srv->hold_lock);
        if (left <= 0) {
            hold_expire(srv, false);
            pthread_mutex_lock(&srv->hold_lock);
            continue;
        }
        struct epoll_event ev;
        int n = epoll_wait(srv->hold_ep, &ev, 1, (int)((left + 999) / 1000));
        if (n == 1 && (ev.data.u64 == HOLD_TOKEN_WAKE || ev.data.u64 == HOLD_TOKEN_STOP)) {
            /* The pool wants workers, or shutdown: every parked connection goes back, and this waiter goes. */
            hold_expire(srv, true);
            pthread_mutex_lock(&srv->hold_lock);
            break;
        }
        if (n == 1) {
            uint32_t i = (uint32_t)ev.data.u64, gen = (uint32_t)(ev.data.u64 >> 32);
            job_t *job = NULL;
            pthread_mutex_lock(&srv->hold_lock);
            if (i < HOLD_SLOTS && srv->hold_slots[i].job != NULL && srv->hold_slots[i].gen == gen)
                job = hold_unpark_locked(srv, (int)i);
            pthread_mutex_unlock(&srv->hold_lock);
            if (job != NULL) {
                int r = hold_next(job, true);
                if (r > 0) {
                    pthread_mutex_lock(&srv->hold_lock);
                    /*
                     * The last waiter taking a slow connection's request (its
                     * last one ran HOLD_SLOW_US or more: a journal wait, a
                     * long query; or a CPU shared with other work) while
                     * others are parked would leave them no waiter until the
                     * watchdog (8 closed-loop clients writing with j: true
                     * lost their group commits). It asks the pool for one
                     * more waiter (waiter_job) and runs the request itself,
                     * so the request pays no hand-off.
                     */
                    bool call = job->held_took_us >= HOLD_SLOW_US && srv->hold_waiters == 1 && srv->hold_first >= 0;
                    got = job;
                    if (call && !atomic_exchange(&srv->waiter_job_queued, true)) {
                        srv->hold_called++;
                        pthread_mutex_unlock(&srv->hold_lock);
                        mf_net_pool_submit(srv->data_pool, &srv->waiter_job);
                        pthread_mutex_lock(&srv->hold_lock);
                    }
                    break;
                }
                if (r < 0 || !hold_park(srv, job)) /* part of a request: parked again for the rest */
                    hold_give_back(srv, job);
            }
        }
        pthread_mutex_lock(&srv->hold_lock);
    }
    /*
     * The last waiter leaving while connections stay parked, whatever it
     * leaves for (a request, which a slow one can keep it from coming back
     * after; or the pool's wake descriptor, while another worker parked a
     * connection and was refused as a waiter because this one still
     * counted): the set is unattended until a waiter comes (see the
     * watchdog).
     */
    if (srv->hold_waiters == 1 && srv->hold_first >= 0)
        watch_wake_locked(srv);
    srv->hold_waiters--;
    pthread_mutex_unlock(&srv->hold_lock);
    return got;
}

/*
 * The watchdog (see above): while connections are parked, looks every
 * HOLD_TICK_US; once no worker has waited on the set for HOLD_STALL_US, or
 * at shutdown, gives every parked connection back to the loop. Sleeps,
 * untimed, once nothing has been parked for HOLD_QUIET_TICKS looks (until a
 * connection is parked), or rests once a waiter has been there at each of
 * them: until the last waiter leaves the set with others parked, for
 * whatever reason, or shutdown (a worker that parks a connection waits on
 * the set itself, or is refused because max_waiters are there, so only a
 * waiter leaving makes the set unattended), looking every
 * HOLD_REST_LOOK_MS all the same. helper-84 found the first version, which
 * only a waiter leaving with a request woke, leaving connections parked
 * with no waiter and no time limit: the last waiter left on the pool's
 * wake descriptor while a worker parked a connection and was refused as a
 * waiter (24 connections, --maxWorkers 2: 5 of 6 stress runs stuck). One
 * client making request after request keeps its connection parked or a waiter on the set nearly all the time, and a
 * watchdog ticking through that cost 484 wake-ups a second, 0.37 µs of the
 * server's CPU per find by _id (session 53).
 */
static void *
hold_watch_main(void *arg)
{
    server_t *srv = arg;
    int64_t unattended_since = 0, seen_seq = -1;
    int quiet = 0, attended = 0;
    pthread_setname_np(pthread_self(), "mf-holdwatch");
    pthread_mutex_lock(&srv->hold_lock);
    while (!srv->watch_stop) {
        int64_t now = mf_mono_us();
        bool give_all = false;
        if (srv->hold_parked == 0) {
            unattended_since = 0;
            if (++quiet >= HOLD_QUIET_TICKS) {
                srv->watch_sleeping = true;
                while (srv->watch_sleeping && !srv->watch_stop)
                    pthread_cond_wait(&srv->hold_cv, &srv->hold_lock);
                quiet = 0;
                continue;
            }
        } else {
            /*
             * Stuck: no worker waiting, and none has parked a connection or
             * come to wait since the last look (a sampled "no waiter" alone
             * would catch the single waiter of a busy client between requests).
             */
            quiet = 0;
            if (srv->hold_waiters > 0 && !atomic_load(&srv->no_hold) && ++attended >= HOLD_QUIET_TICKS) {
                /*
                 * Attended look after look: until the last waiter leaves with
                 * others parked (hold_wait), with a look every
                 * HOLD_REST_LOOK_MS all the same, should a way to leave the
                 * set unattended have been missed.
                 */
                srv->watch_resting = true;
                while (srv->watch_resting && !srv->watch_stop) {
                    struct timespec rest = mf_mono_deadline(HOLD_REST_LOOK_MS);
                    if (pthread_cond_timedwait(&srv->hold_cv, &srv->hold_lock, &rest) == ETIMEDOUT &&
                        ((srv->hold_waiters == 0 && srv->hold_parked > 0) || atomic_load(&srv->no_hold)))
                        break;
                }
                srv->watch_resting = false;
                attended = 0;
                unattended_since = 0;
                seen_seq = -1;
                continue;
            }
            if (srv->hold_waiters == 0)
                attended = 0;
            if (srv->hold_waiters > 0 || srv->hold_seq != seen_seq) {
                unattended_since = 0;
                seen_seq = srv->hold_seq;
            } else if (unattended_since == 0) {
                unattended_since = now;
            } else if (now - unattended_since >= HOLD_STALL_US) {
                give_all = true;
            }
            if (atomic_load(&srv->no_hold))
                give_all = true;
        }
        if (give_all) {
            unattended_since = 0;
            if (!atomic_load(&srv->no_hold))
                srv->hold_rescued += srv->hold_parked;
            pthread_mutex_unlock(&srv->hold_lock);
            hold_expire(srv, true);
            pthread_mutex_lock(&srv->hold_lock);
            continue;
        }
        struct timespec ts = mf_mono_deadline(HOLD_TICK_US / 1000);
        pthread_cond_timedwait(&srv->hold_cv, &srv->hold_lock, &ts);
    }
    pthread_mutex_unlock(&srv->hold_lock);
    return NULL;
}

/* Worker thread: a data command on a held connection, then whatever parked connections have (see above). */
static void hold_serve(server_t *srv, mf_net_pool_worker_t *w, job_t *job);

static void
work_hold_cb(mf_net_pool_job_t *pj)
{
    job_t *job = (job_t *)pj;
    hold_serve(job->conn->srv, mf_net_pool_job_worker(pj), job);
}

/* Worker thread: srv->waiter_job, one more worker waiting on the parked set (see hold_wait). */
static void
work_waiter_cb(mf_net_pool_job_t *pj)
{
    server_t *srv = (server_t *)((char *)pj - offsetof(server_t, waiter_job));
    mf_net_pool_worker_t *w = mf_net_pool_job_worker(pj);
    mf_net_pool_worker_take(w, NULL); /* not a connection's job: nothing for the pool's done */
    atomic_store(&srv->waiter_job_queued, false);
    hold_serve(srv, w, NULL);
}

/*
 * Worker thread: runs job's request (the worker answers for job; NULL:
 * begins by waiting on the parked set), then the next requests of
 * whichever parked connections have them, until a connection goes back to
 * the loop (returned as the worker's job, for the pool's done) or the wait
 * ends (none).
 */
static void
hold_serve(server_t *srv, mf_net_pool_worker_t *w, job_t *job)
{
    mf_engine_t *eng = srv->eng;

    for (;;) {
        if (job == NULL) {
            job = hold_wait(srv);
            if (job == NULL)
                return; /* nothing for the pool's done: every job this worker served is parked or given back */
            mf_net_pool_worker_take(w, &job->pj);
            mf_net_pool_worker_progress(w); /* its request starts now, not when the last one ended */
        }
        int64_t t0 = mf_mono_us();
        work_cb(&job->pj);
        job->held_took_us = mf_mono_us() - t0;
        bool again = !job->fatal && job->await_ms == 0 && !job->exhaust && !atomic_load(&srv->no_hold);
        if (again && job->reply != NULL) {
            /* Counted before it is sent: a client that has its reply sees it in serverStatus. */
            atomic_fetch_add(&eng->net_bytes_out, (int64_t)job->reply_len);
            size_t sent = hold_send(job->held_fd, job->reply, job->reply_len);
            if (sent < job->reply_len) {
                /* The rest goes out through the loop's write queue, in order (conn_write counts it again). */
                atomic_fetch_sub(&eng->net_bytes_out, (int64_t)(job->reply_len - sent));
                memmove(job->reply, job->reply + sent, job->reply_len - sent);
                job->reply_len -= sent;
                again = false;
            } else {
                free(job->reply);
                job->reply = NULL;
            }
        }
        if (again) {
            mf_net_pool_worker_progress(w); /* a request done: counted as a finished job (net_pool.c's soft cap) */
            if (++job->held_served >= HOLD_MAX_REQUESTS || mf_net_pool_queued(srv->data_pool) > 0)
                again = false;
        }
        /* -1 also for an invalid length read with the last request: the loop closes with the reason. */
        int next = again ? hold_next(job, false) : -1;
        if (next > 0)
            continue; /* the next request was read with the last one */
        if (next == 0) {
            mf_net_pool_worker_take(w, NULL); /* before it is parked: another worker may take it at once */
            job->held_served = 0; /* only requests read with the last one (pipelined) count towards the cap */
            rbuf_shrink(job->conn); /* the loop, which did it, may not see this connection again for long */
            if (hold_park(srv, job)) {
                job = NULL;
                continue;
            }
            mf_net_pool_worker_take(w, &job->pj); /* no room: it goes back to the loop */
        }
        hold_unregister(srv, job);
        return; /* the pool's done hands the job back to the loop */
    }
}

/*
 * Loop thread, before serving: the parked set and its watchdog (see "Held
 * connections"). Without them (no descriptor or thread to be had) nothing
 * is held: requests go through the loop.
 */
static void
hold_open(server_t *srv)
{
    srv->hold_ep = srv->hold_stop_fd = -1;
    pthread_mutex_init(&srv->hold_lock, NULL);
    mf_cond_init_mono(&srv->hold_cv);
    srv->hold_first = srv->hold_last = -1;
    srv->hold_slots = mf_calloc(HOLD_SLOTS, sizeof(*srv->hold_slots));
    for (int i = 0; i < HOLD_SLOTS; i++) {
        srv->hold_slots[i].prev = -1;
        srv->hold_slots[i].next = i + 1 < HOLD_SLOTS ? i + 1 : -1;
    }
    srv->hold_free = 0;
    srv->waiter_job.work = work_waiter_cb;
    if (srv->hold_us <= 0 || srv->max_waiters < 1)
        return; /* nothing held (with --maxWorkers 1 no worker could wait: every request would wait for the watchdog) */
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int wake = mf_net_pool_wake_fd(srv->data_pool);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = HOLD_TOKEN_STOP};
    struct epoll_event wev = {.events = EPOLLIN, .data.u64 = HOLD_TOKEN_WAKE};
    bool ok = ep >= 0 && stop >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, stop, &ev) == 0 &&
              (wake < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, wake, &wev) == 0);
    int e = ok ? pthread_create(&srv->hold_watch, NULL, hold_watch_main, srv) : errno;
    if (ok && e == 0) {
        srv->hold_watch_started = true;
        srv->hold_ep = ep;
        srv->hold_stop_fd = stop;
        return;
    }
    mf_log(MF_LOG_WARN, "NETWORK", "cannot watch held connections (%s): every request goes through the I/O thread",
           strerror(e));
    if (ep >= 0)
        close(ep);
    if (stop >= 0)
        close(stop);
}

/* After the pools are gone: stops the watchdog and frees the parked set (empty by then). */
static void
hold_close(server_t *srv)
{
    if (srv->hold_slots == NULL)
        return; /* never opened (serving failed before) */
    if (srv->hold_watch_started) {
        pthread_mutex_lock(&srv->hold_lock);
        srv->watch_stop = true;
        pthread_cond_signal(&srv->hold_cv);
        pthread_mutex_unlock(&srv->hold_lock);
        pthread_join(srv->hold_watch, NULL);
        srv->hold_watch_started = false;
    }
    if (srv->hold_ep >= 0)
        close(srv->hold_ep);
    if (srv->hold_stop_fd >= 0)
        close(srv->hold_stop_fd);
    srv->hold_ep = srv->hold_stop_fd = -1;
    free(srv->hold_slots);
    srv->hold_slots = NULL;
    pthread_cond_destroy(&srv->hold_cv);
    pthread_mutex_destroy(&srv->hold_lock);
}

typedef struct write_req {
    uv_write_t w;
    uint8_t *buf;
    bool close_after; /* the connection's last reply (shutdown) */
} write_req_t;

static void
on_write_done(uv_write_t *w, int status)
{
    write_req_t *wr = (write_req_t *)w;
    conn_t *c = w->handle->data;
    if (wr->close_after)
        conn_close(c, NULL); /* after a cancelled write (status < 0) too: it is already closing */
    free(wr->buf);
    free(wr);
    (void)status;
}

/*
 * Writes reply bytes on c, taking ownership of buf (freed when written).
 * With close_after, the connection closes once they are out. Returns 0, or
 * -1 if the write could not start (buf is freed; the caller closes c).
 *
 * A reply is first written at once (uv_try_write: it fails, writing
 * nothing, while earlier writes are queued, so replies stay in order); only
 * what the socket did not take goes through a write request. A completed
 * uv_write re-arms the socket's epoll watcher (libuv's drain stops
 * POLLOUT, which costs an epoll_ctl on the next turn of the loop even if
 * POLLOUT was never started): measured with strace, an inline ping cost
 * epoll_wait, read, write and epoll_ctl; written at once, the first three.
 */
static int
raw_write(conn_t *c, uint8_t *buf, size_t len, bool close_after)
{
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    if (!close_after) {
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n == (int)len) {
            free(buf);
            return 0;
        }
        if (n > 0) {
            b.base += n;
            b.len -= (size_t)n;
        }
    }
    write_req_t *wr = mf_malloc(sizeof(*wr));
    wr->buf = buf;
    wr->close_after = close_after;
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_write_done) != 0) {
        free(buf);
        free(wr);
        return -1;
    }
    return 0;
}

/* Sends the ciphertext OpenSSL has waiting (handshake messages, records, alerts). 0, or -1 (the caller closes c). */
static int
tls_flush(conn_t *c, bool close_after)
{
    uint8_t *out;
    size_t n;
    if (!mf_tls_take_out(c->tls, &out, &n)) {
        if (close_after)
            conn_close(c, NULL);
        return 0;
    }
    return raw_write(c, out, n, close_after);
}

/*
 * Writes reply bytes on c (encrypted first on a TLS connection), taking
 * ownership of buf; they count in network.bytesOut (the messages, not TLS's
 * records, as mongod counts them). With close_after, the connection closes
 * once they are out. Returns 0, or -1 if the write could not start (the
 * caller closes c).
 */
static int
conn_write(conn_t *c, uint8_t *buf, size_t len, bool close_after)
{
    atomic_fetch_add(&c->srv->eng->net_bytes_out, (int64_t)len);
    if (c->tls == NULL)
        return raw_write(c, buf, len, close_after);
    mf_error_t err;
    int r = mf_tls_write(c->tls, buf, len, &err);
    free(buf);
    if (r != 0) {
        mf_log(MF_LOG_WARN, "NETWORK", "conn%lld: %s", (long long)c->client.id, err.msg);
        return -1;
    }
    return tls_flush(c, close_after);
}

static void
free_conn_if_orphaned(conn_t *c)
{
    /* Called after a job when the handle has already been closed. */
    while (c->qhead) {
        msgbuf_t *m = c->qhead;
        c->qhead = m->next;
        msgbuf_free(m);
    }
    free(c->rbuf);
    mf_tls_conn_free(c->tls);
    mf_client_release(&c->client);
    free(c);
}

/* Loop thread: a job has finished; send its reply and go on with the connection. */
static void
after_work(job_t *job)
{
    conn_t *c = job->conn;

    c->busy = false;
    if (job->held_back && !c->closing && !c->draining) {
        /* The worker gave the connection back: read again, first what it read past its last request. */
        if (!c->paused)
            uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
        parse_rbuf(c);
    }
    if (c->closing) {
        msgbuf_free(job->msg);
        free(job->reply);
        free(job);
        /* If the close callbacks already ran, they left the memory to us. */
        if (c->handle_closed && c->timer_closed)
            free_conn_if_orphaned(c);
        return;
    }
    if (c->draining) {
        /* Shutting down: send this last reply (an awaitable hello too, at once), then close. */
        msgbuf_free(job->msg);
        if (job->reply == NULL || job->fatal || conn_write(c, job->reply, job->reply_len, true) != 0) {
            if (job->fatal)
                free(job->reply);
            conn_close(c, NULL);
        }
        free(job);
        return;
    }
    if (job->reply && job->await_ms > 0 && !job->fatal) {
        /* Hold the reply; on_await_timer writes it (and, streaming, asks again). */
        c->held = job->reply;
        c->held_len = job->reply_len;
        c->held_exhaust = job->exhaust;
        c->held_reply_id = job->reply_id;
        c->held_response_to = job->response_to;
        c->held_counter = job->counter;
        c->held_seen = job->seen_counter;
        c->held_req = job->msg; /* kept: re-run on a topology change, and streaming, after the reply */
        job->msg = NULL;
        c->busy = true;
        uv_timer_start(&c->timer, on_await_timer, (uint64_t)job->await_ms, 0);
        free(job);
        return;
    }
    if (job->reply && conn_write(c, job->reply, job->reply_len, false) != 0)
        job->fatal = true;
    if (job->fatal) {
        /* Closed before the job is freed: why may point into it (why_buf). */
        conn_close(c, job->why ? job->why : "malformed or unsupported message");
        msgbuf_free(job->msg);
        free(job);
        return;
    }
    if (job->exhaust) {
        /* Streaming, and the topology had changed: answered at once; the stream goes on from this reply. */
        msgbuf_t *req = job->msg;
        int32_t rid = job->reply_id;
        int64_t counter = job->counter;
        free(job);
        queue_job(c, req, rid, counter);
        return;
    }
    msgbuf_free(job->msg);
    free(job);
    start_next(c);
}


/* Loop thread: a job for message m on c (taking m); c is busy and counted active from now. */
static job_t *
job_new(conn_t *c, msgbuf_t *m, int32_t response_to, int64_t seen_counter)
{
    job_t *job = mf_calloc(1, sizeof(*job));
    job->conn = c;
    job->msg = m;
    job->response_to = response_to;
    job->seen_counter = seen_counter;
    job->reply_id = atomic_fetch_add(&next_reply_id, 1);
    c->busy = true;
    atomic_fetch_add(&c->srv->eng->conn_active, 1);
    return job;
}

/* Loop thread: runs m's command here and now (is_inline_message), then sends its reply as after_work does. */
static void
run_inline(conn_t *c, msgbuf_t *m)
{
    job_t *job = job_new(c, m, 0, -1);
    work_cb(&job->pj);
    atomic_fetch_sub(&c->srv->eng->conn_active, 1);
    after_work(job);
}

/*
 * Where a compressed request is decompressed. A small one (at most
 * LOOP_UNWRAP_MAX bytes uncompressed) on the loop thread, in start_next,
 * before anything looks at its command: decompressing a few KiB takes
 * microseconds, and unwrapped it goes to the lane its command belongs to
 * and may run inline (a compressed ping, serverStatus or killOp would
 * otherwise wait in the data lane behind slow queries, the thing the fast
 * lane exists to prevent). A larger one, up to 48 MB, would hold the loop,
 * and with it every other connection, for milliseconds or more: it goes to
 * a data-lane worker as it is and work_cb decompresses it there, where it
 * costs only its own connection. A held connection's worker decompresses
 * what it reads itself, whatever the size. Either place runs while the
 * connection has no other job, so a hello renegotiating its compressors
 * never races the check of a request's compressor.
 */
#define LOOP_UNWRAP_MAX (16 * 1024)

/*
 * Loop thread, in start_next (the connection idle): unwraps m there when it
 * is a small compressed request (see above). Returns 0 (m may now be
 * plain), or -1 after closing the connection (m freed) for an envelope
 * mongod would refuse.
 */
static int
unwrap_on_loop(conn_t *c, msgbuf_t *m)
{
    mf_error_t err;
    int32_t usize;
    char why[240];

    if (m->len < MF_WIRE_HEADER_SIZE + MF_COMPRESSED_HEADER_SIZE || msg_opcode(m) != MF_OP_COMPRESSED)
        return 0;
    memcpy(&usize, m->data + 20, 4);
    usize = (int32_t)le32toh((uint32_t)usize);
    if (usize < 0 || usize > LOOP_UNWRAP_MAX)
        return 0; /* large (or refused): on a worker */
    if (unwrap_request(c, m, &err) == 0)
        return 0;
    snprintf(why, sizeof(why), "Error receiving request from client: %s: %.180s", mf_err_codename(err.code), err.msg);
    msgbuf_free(m);
    conn_close(c, why);
    return -1;
}

/*
 * Loop thread: starts the connection's next queued message, if it is idle.
 * Inline commands run here one after another; the first other one goes to
 * a worker. Not re-entered (after_work calls it back): the loop goes on.
 */
static void
start_next(conn_t *c)
{
    if (c->in_start_next)
        return;
    c->in_start_next = true;
    while (!c->busy && !c->closing && !c->draining && c->qhead != NULL) {
        msgbuf_t *m = c->qhead;
        c->qhead = m->next;
        if (c->qhead == NULL)
            c->qtail = NULL;
        c->qbytes -= m->len;
        if (c->paused && c->qbytes <= MAX_QUEUED_BYTES / 2) {
            c->paused = false;
            uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
        }
        if (unwrap_on_loop(c, m) != 0)
            break;
        if (is_inline_message(c, m)) {
            run_inline(c, m);
        } else {
            queue_job(c, m, 0, -1);
            break;
        }
    }
    c->in_start_next = false;
}

static void
on_await_timer(uv_timer_t *t)
{
    conn_t *c = t->data;
    uint8_t *reply = c->held;
    msgbuf_t *req = c->held_req;
    c->held = NULL;
    c->held_req = NULL;
    c->busy = false;
    if (c->closing) {
        free(reply);
        msgbuf_free(req);
        return;
    }
    if (conn_write(c, reply, c->held_len, false) != 0) {
        msgbuf_free(req);
        conn_close(c, "write failed");
        return;
    }
    if (req != NULL && c->held_exhaust) {
        /* Streaming: run the hello again; its reply answers the one just sent. */
        queue_job(c, req, c->held_reply_id, c->held_counter);
        return;
    }
    msgbuf_free(req);
    start_next(c);
}

static void
queue_job(conn_t *c, msgbuf_t *m, int32_t response_to, int64_t seen_counter)
{
    server_t *srv = c->srv;
    job_t *job = job_new(c, m, response_to, seen_counter);
    job->pj.work = work_cb;
    srv->inflight++;
    bool fast = is_fast_message(m);
    uv_os_fd_t fd;
    /* Held (work_hold_cb): plain TCP, nothing else queued or partly read, no reply still being written. */
    if (!fast && srv->hold_us > 0 && srv->hold_ep >= 0 && c->tls == NULL && c->qhead == NULL && c->rlen == 0 && !c->paused &&
        response_to == 0 && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0 &&
        uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        job->held_fd = fd;
        job->held_back = true;
        job->pj.work = work_hold_cb;
    }
    mf_net_pool_submit(fast ? srv->fast_pool : srv->data_pool, &job->pj);
}

/* Worker thread, after work_cb: hand the job back to the loop. */
static void
on_pool_job_done(mf_net_pool_job_t *pj, void *arg)
{
    server_t *srv = arg;
    job_t *job = (job_t *)pj;
    pthread_mutex_lock(&srv->done_lock);
    job->done_next = NULL;
    if (srv->done_tail)
        srv->done_tail->done_next = job;
    else
        srv->done_head = job;
    srv->done_tail = job;
    /* Under the lock: the loop cannot drain this job and close the handle before the send. */
    uv_async_send(&srv->done_async);
    pthread_mutex_unlock(&srv->done_lock);
}

/* Worker thread about to exit: release its storage session. */
static void
on_pool_thread_exit(void *arg)
{
    server_t *srv = arg;
    mf_storage_session_close_thread(srv->eng->st);
}

static void maybe_finish_stop(server_t *srv);

/* Loop thread: drain the finished jobs. */
static void
on_jobs_done(uv_async_t *a)
{
    server_t *srv = a->data;
    pthread_mutex_lock(&srv->done_lock);
    job_t *job = srv->done_head;
    srv->done_head = srv->done_tail = NULL;
    pthread_mutex_unlock(&srv->done_lock);
    while (job != NULL) {
        job_t *next = job->done_next;
        srv->inflight--;
        atomic_fetch_sub(&srv->eng->conn_active, 1);
        after_work(job);
        job = next;
    }
    if (srv->stopping)
        maybe_finish_stop(srv);
}

static void
alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    rbuf_reserve(c, suggested < 65536 ? 65536 : suggested);
    *buf = uv_buf_init((char *)c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

/*
 * n bytes of ciphertext arrived at rbuf + rlen: hands them to OpenSSL and
 * decrypts whatever it can into rbuf from rlen on, then sends what the
 * handshake wants sent. Returns 0, or -1 when the connection was closed
 * (a failed handshake, a broken record).
 */
static int
tls_input(conn_t *c, size_t n)
{
    mf_error_t err;
    mf_tls_feed(c->tls, c->rbuf + c->rlen, n);
    for (;;) {
        if (c->rcap - c->rlen < 16384) {
            size_t ncap = c->rcap ? c->rcap * 2 : 65536;
            c->rbuf = mf_realloc(c->rbuf, ncap);
            c->rcap = ncap;
        }
        ssize_t r = mf_tls_read(c->tls, c->rbuf + c->rlen, c->rcap - c->rlen, &err);
        if (r < 0) {
            (void)tls_flush(c, false); /* the alert, if OpenSSL made one */
            conn_close(c, err.msg);
            return -1;
        }
        if (r == 0)
            break;
        c->rlen += (size_t)r;
        if (!c->tls_logged) {
            char how[400];
            c->tls_logged = true;
            mf_tls_describe(c->tls, how, sizeof(how));
            mf_log(MF_LOG_INFO, "NETWORK", "conn%lld: TLS connection from %s (%s)", (long long)c->client.id,
                   c->client.remote, how);
        }
    }
    if (tls_flush(c, false) != 0) {
        conn_close(c, "cannot write the TLS handshake");
        return -1;
    }
    return 0;
}

static void
read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    (void)buf;
    if (nread < 0) {
        conn_close(c, nread == UV_EOF ? NULL : uv_strerror((int)nread));
        if (nread == UV_EOF)
            mf_log(MF_LOG_INFO, "NETWORK", "conn%lld: connection ended", (long long)c->client.id);
        return;
    }
    if (nread > 0 && !c->sniffed) {
        /*
         * TLS or plain, told as mongod tells them: a plain client's first
         * bytes are its message's header, whose responseTo (bytes 8-11) is
         * 0 in a request; a TLS client's are a handshake record (0x16) with
         * a ClientHello, whose bytes 8-11 hold its version (3.x), never 0 or
         * -1. The first byte alone would take plain first messages of 278,
         * 534 ... bytes for TLS. Until 12 bytes have come, bytes starting
         * with 0x16 wait in rbuf (c->rlen) as plain ones do.
         */
        server_t *srv = c->srv;
        size_t have = c->rlen + (size_t)nread; /* from rbuf[0]: nothing was taken as anything yet */
        const uint8_t *b = c->rbuf;
        if (b[0] == 0x16 && have < 12) {
            c->rlen = have;
            return;
        }
        bool handshake = false;
        if (b[0] == 0x16) { /* 12 bytes or more have come */
            int32_t response_to =
                (int32_t)((uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24);
            handshake = response_to != 0 && response_to != -1;
        }
        c->sniffed = true;
        if (handshake && srv->tls == NULL) {
            conn_close(c, "a TLS handshake, but TLS is disabled (--tlsMode)");
            return;
        }
        if (!handshake && srv->tls_mode == MF_TLS_REQUIRE) {
            conn_close(c, "a connection without TLS, but --tlsMode is requireTLS");
            return;
        }
        if (handshake) {
            c->tls = mf_tls_conn_new(srv->tls);
            c->rlen = 0; /* everything so far is ciphertext: fed from rbuf[0] */
            if (tls_input(c, have) != 0)
                return;
            nread = 0;
        }
    }
    if (c->tls != NULL) {
        if (nread > 0 && tls_input(c, (size_t)nread) != 0)
            return;
    } else {
        c->rlen += (size_t)nread;
    }
    parse_rbuf(c);
    if (!c->closing)
        start_next(c);
}

/*
 * Loop thread: moves every whole message in c->rbuf to the connection's
 * queue (closing it on an invalid length) and applies backpressure. The
 * caller starts the next message.
 */
static void
parse_rbuf(conn_t *c)
{
    size_t off = 0;
    int32_t bad, mlen;
    while ((mlen = frame_len(c, off, &bad)) != 0) {
        if (mlen < 0) {
            char why[96];
            snprintf(why, sizeof(why), "invalid message length %d (must be 16..%d)", bad, MF_MAX_MESSAGE_SIZE);
            conn_close(c, why);
            return;
        }
        msgbuf_t *m = frame_copy(c, off, mlen);
        count_request(c->srv->eng, mlen);
        if (c->qtail)
            c->qtail->next = m;
        else
            c->qhead = m;
        c->qtail = m;
        c->qbytes += m->len;
        off += (size_t)mlen;
    }
    /*
     * Backpressure: a client that pipelines faster than its commands run
     * stops being read (TCP then slows it down) until the queue drains.
     */
    if (!c->paused && (c->qbytes > MAX_QUEUED_BYTES || c->rlen > MAX_QUEUED_BYTES)) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->paused = true;
    }
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    rbuf_shrink(c);
}

static void
on_connection(uv_stream_t *listener, int status)
{
    server_t *srv = listener->data;
    if (status < 0 || srv->stopping)
        return;
    conn_t *c = mf_calloc(1, sizeof(*c));
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    if (srv->nconns >= (size_t)srv->max_conns) {
        /* As mongod: over --maxConns a new connection is closed at once; the open ones carry on. */
        mf_log(MF_LOG_WARN, "NETWORK", "connection refused because too many open connections: %zu", srv->nconns);
        atomic_fetch_add(&srv->eng->conn_rejected, 1);
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && mf_fd_in_reserve(fd, srv->nofile, MF_FDS_CONN_RESERVE)) {
        /* Below --maxConns, but the storage engine's files hold the rest of the limit (common/fds.h). */
        mf_storage_fds_low(srv->eng->st); /* table opens count again before they take the last ones */
        mf_log(MF_LOG_WARN, "NETWORK", "connection refused because too few file descriptors are left: this one is "
               "number %d of %lld allowed (ulimit -n), the last %d are kept for the storage engine", (int)fd,
               (long long)srv->nofile, MF_FDS_CONN_RESERVE);
        atomic_fetch_add(&srv->eng->conn_rejected, 1);
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    mf_storage_fd_taken(srv->eng->st);
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_init(srv->loop, &c->timer);
    c->timer.data = c;
    c->client.id = atomic_fetch_add(&srv->eng->next_conn_id, 1);
    struct sockaddr_storage ss;
    int sslen = sizeof(ss);
    char ip[64];
    int port;
    mf_fmt_sockaddr(uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0 ? &ss : NULL, ip, sizeof(ip),
                    &port);
    snprintf(c->client.remote, sizeof(c->client.remote), "%s:%d", ip, port);
    c->client.loopback = strncmp(ip, "127.", 4) == 0 || strcmp(ip, "::1") == 0 || strncmp(ip, "::ffff:127.", 11) == 0;
    sslen = sizeof(ss);
    if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&ss, &sslen) == 0) {
        mf_fmt_sockaddr(&ss, ip, sizeof(ip), &port);
        snprintf(c->client.local, sizeof(c->client.local), "%s:%d", ip, port);
    }
    c->client.net = true;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
        c->client.has_sock = true; /* an awaitData getMore watches it for the client hanging up */
        c->client.sock = fd;
    }
    c->client.conn = mf_curops_conn_open(srv->eng->curops, c->client.id, c->client.remote);
    atomic_fetch_add(&srv->eng->conn_current, 1);
    atomic_fetch_add(&srv->eng->conn_total, 1);
    if (srv->nconns == srv->capconns) {
        srv->capconns = srv->capconns ? srv->capconns * 2 : 64;
        srv->conns = mf_realloc(srv->conns, srv->capconns * sizeof(*srv->conns));
    }
    srv->conns[srv->nconns++] = c;
    mf_log(MF_LOG_INFO, "NETWORK", "conn%lld: connection accepted from %s (%lld now open)", (long long)c->client.id,
           c->client.remote, (long long)atomic_load(&srv->eng->conn_current));
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

/*
 * Loop thread, while stopping: once no job is in flight, close the handles
 * that keep the loop alive, so uv_run returns.
 */
static void
maybe_finish_stop(server_t *srv)
{
    if (srv->inflight > 0)
        return;
    if (srv->stop_timer_open) {
        srv->stop_timer_open = false;
        uv_timer_stop(&srv->stop_timer);
        uv_close((uv_handle_t *)&srv->stop_timer, NULL);
    }
    if (srv->done_async_open) {
        srv->done_async_open = false;
        uv_close((uv_handle_t *)&srv->done_async, NULL);
    }
    if (srv->topo_async_open) {
        srv->topo_async_open = false;
        mf_engine_set_topology_hook(srv->eng, NULL, NULL);
        uv_close((uv_handle_t *)&srv->topo_async, NULL);
    }
}

static void
on_stop_timer(uv_timer_t *t)
{
    server_t *srv = t->data;
    mf_log(MF_LOG_INFO, "CONTROL", "shutdown: waiting for %lld command(s) in progress", (long long)srv->inflight);
}

static void begin_stop(server_t *srv);

static void
on_signal(uv_signal_t *h, int signum)
{
    server_t *srv = h->data;
    if (srv->stopping)
        return;
    mf_log(MF_LOG_INFO, "CONTROL", "received signal %d (%s), shutting down", signum, signum == SIGINT ? "SIGINT" : "SIGTERM");
    begin_stop(srv);
}

/* Any thread (the engine calls it under its hook lock): the shutdown command. */
static void
on_stop_request(void *arg)
{
    server_t *srv = arg;
    uv_async_send(&srv->stop_async);
}

static void
on_stop_async(uv_async_t *a)
{
    server_t *srv = a->data;
    if (srv->stopping)
        return;
    mf_log(MF_LOG_INFO, "CONTROL", "shutdown command received, shutting down");
    begin_stop(srv);
}

/* Loop thread: the clean stop of a signal or of the shutdown command, once. */
static void
begin_stop(server_t *srv)
{
    srv->stopping = true;
    atomic_store(&srv->no_hold, true);
    if (srv->hold_stop_fd >= 0) {
        /* Every worker waiting on the parked set leaves, the last one giving the connections back. */
        uint64_t one = 1;
        ssize_t wn = write(srv->hold_stop_fd, &one, sizeof one);
        (void)wn;
        /* ... and the watchdog gives back any left with no waiter. */
        pthread_mutex_lock(&srv->hold_lock);
        watch_wake_locked(srv);
        pthread_mutex_unlock(&srv->hold_lock);
    }
    if (srv->stop_async_open) {
        srv->stop_async_open = false;
        mf_engine_set_stop_hook(srv->eng, NULL, NULL);
        uv_close((uv_handle_t *)&srv->stop_async, NULL);
    }
    uv_close((uv_handle_t *)&srv->listener, NULL);
    if (srv->detach)
        srv->detach(srv->attach_arg);
    uv_close((uv_handle_t *)&srv->sigint, NULL);
    uv_close((uv_handle_t *)&srv->sigterm, NULL);
    /*
     * Idle connections (and held hellos) close now; one with a command
     * running stops reading and closes after writing that reply, so its
     * client gets an answer (InterruptedAtShutdown once on_shutdown
     * interrupts operations) rather than a dropped connection.
     * conn_close's callbacks edit srv->conns later, not now.
     */
    for (size_t i = 0; i < srv->nconns; i++) {
        conn_t *c = srv->conns[i];
        if (c->busy && c->held == NULL && !c->closing) {
            c->draining = true;
            uv_read_stop((uv_stream_t *)&c->tcp);
        } else {
            conn_close(c, NULL);
        }
    }
    /* Let the engine interrupt what is running, then wait for it. */
    if (srv->eng->on_shutdown)
        srv->eng->on_shutdown(srv->eng->on_shutdown_arg);
    if (srv->inflight > 0) {
        mf_log(MF_LOG_INFO, "CONTROL", "shutdown: waiting for %lld command(s) in progress", (long long)srv->inflight);
        uv_timer_init(srv->loop, &srv->stop_timer);
        srv->stop_timer.data = srv;
        srv->stop_timer_open = true;
        uv_timer_start(&srv->stop_timer, on_stop_timer, STOP_LOG_MS, STOP_LOG_MS);
    }
    maybe_finish_stop(srv);
}

/*
 * max_conns_supported: the connections to accept at once. --maxConns
 * (asked; 0 when not given: 1,000,000), capped as mongod caps it at 80% of
 * the soft limit on open files (nofile: mf_fds_limit's RLIMIT_NOFILE), the rest being for the
 * HTTP port (a tenth at most) and WiredTiger's files and journal. Logged as
 * mongod does when an explicit --maxConns is above the cap. As tables hold
 * more of the limit, on_connection also refuses a socket numbered within
 * MF_FDS_CONN_RESERVE of it (common/fds.h), so that a flood of connections
 * is refused one by one instead of leaving the storage engine without a
 * descriptor (WiredTiger panics when it cannot open its next journal file).
 */
static int
max_conns_supported(int asked, int64_t nofile)
{
    int want = asked > 0 ? asked : 1000000;

    if (nofile == INT64_MAX)
        return want;
    double cap = (double)nofile * 0.8;
    mf_log(MF_LOG_DEBUG, "NETWORK", "file descriptor limit %lld; connections at most %.0f", (long long)nofile, cap);
    if (cap >= (double)want)
        return want;
    if (asked > 0)
        mf_log(MF_LOG_INFO, "NETWORK", "--maxConns too high, can only handle %d", (int)cap);
    return cap >= 1 ? (int)cap : 1;
}

int
mf_net_serve(mf_engine_t *eng, const mf_net_opts_t *opts, mf_error_t *err)
{
    server_t srv;
    struct sockaddr_storage addr;
    const char *bind_ip = opts->bind_ip;
    int port = opts->port;
    int r, rc = 0;

    memset(&srv, 0, sizeof(srv));
    srv.hold_ep = srv.hold_stop_fd = -1; /* hold_open makes them */
    srv.loop = uv_default_loop();
    srv.eng = eng;
    srv.nofile = mf_fds_limit();
    eng->net_compressors = opts->compressors; /* before any connection: read-only from here on */
    srv.max_conns = max_conns_supported(opts->max_conns, srv.nofile);
    atomic_store(&eng->conn_max, srv.max_conns);
    if (strchr(bind_ip, ':'))
        r = uv_ip6_addr(bind_ip, port, (struct sockaddr_in6 *)&addr);
    else
        r = uv_ip4_addr(bind_ip, port, (struct sockaddr_in *)&addr);
    if (r != 0)
        return mf_err_set(err, MF_E_BadValue, "invalid --bind_ip %s: %s", bind_ip, uv_strerror(r));
    if (opts->tls != NULL && opts->tls->mode != MF_TLS_DISABLED) {
        if (mf_tls_ctx_new(opts->tls, &srv.tls, err) != 0)
            return -1;
        srv.tls_mode = opts->tls->mode;
    }

    int warm = opts->workers > 0 ? opts->workers : 1;
    srv.hold_us = mf_param_get(eng->params, "netConnectionHoldMicros");
    /* HOLD_WAITERS_PER_CPU workers per CPU wait on the parked set (see "Held connections"). */
    int ncpu = eng->sysres.cpus_usable; /* affinity and cgroup quota, read once by the engine (common/sysres.h) */
    srv.max_waiters = ncpu * HOLD_WAITERS_PER_CPU;
    int cap = opts->max_workers > 0 ? opts->max_workers : MF_NET_DEFAULT_MAX_WORKERS;
    if (cap < warm)
        cap = warm;
    if (srv.max_waiters > cap - 1)
        srv.max_waiters = cap - 1; /* a worker is always left for a request that is not held */
    /* SOFT_WORKERS_PER_CPU data workers per CPU start at once, more only for jobs stuck behind slow ones (net_pool.c). */
    int soft = ncpu * SOFT_WORKERS_PER_CPU;
    mf_net_pool_config_t pc = {.name = "mf-data", .warm = warm, .cap = cap, .soft = soft < 16 ? 16 : soft,
                               .idle_ms = WORKER_IDLE_MS, .done = on_pool_job_done,
                               .thread_exit = on_pool_thread_exit, .arg = &srv};
    pthread_mutex_init(&srv.done_lock, NULL);
    uv_async_init(srv.loop, &srv.done_async, on_jobs_done);
    srv.done_async.data = &srv;
    srv.done_async_open = true;
    uv_async_init(srv.loop, &srv.topo_async, on_topology_async);
    srv.topo_async.data = &srv;
    srv.topo_async_open = true;
    mf_engine_set_topology_hook(eng, on_topology, &srv);
    uv_async_init(srv.loop, &srv.stop_async, on_stop_async);
    srv.stop_async.data = &srv;
    srv.stop_async_open = true;
    mf_engine_set_stop_hook(eng, on_stop_request, &srv);
    if (mf_net_pool_create(&pc, &srv.data_pool, err) != 0) {
        rc = -1;
        goto err_close_async;
    }
    pc.name = "mf-fast";
    pc.warm = 1;
    pc.cap = FAST_MAX_WORKERS;
    pc.soft = 0; /* its commands are quick, or wait (awaitable hello) without CPU: a thread per job */
    if (mf_net_pool_create(&pc, &srv.fast_pool, err) != 0) {
        rc = -1;
        goto err_close_async;
    }
    srv.ncpu = ncpu;
    hold_open(&srv);
    mf_engine_set_net_status_hook(eng, on_net_status, &srv);

    uv_tcp_init(srv.loop, &srv.listener);
    srv.listener.data = &srv;
    if ((r = uv_tcp_bind(&srv.listener, (struct sockaddr *)&addr, 0)) != 0 ||
        (r = uv_listen((uv_stream_t *)&srv.listener, 511, on_connection)) != 0) {
        uv_close((uv_handle_t *)&srv.listener, NULL);
        rc = mf_err_set(err, MF_E_HostUnreachable, "cannot listen on %s:%d: %s", bind_ip, port, uv_strerror(r));
        goto err_close_async;
    }
    if (opts->attach != NULL && opts->attach(opts->attach_arg, srv.loop, err) != 0) {
        uv_close((uv_handle_t *)&srv.listener, NULL);
        rc = -1;
        goto err_close_async;
    }
    srv.detach = opts->detach;
    srv.attach_arg = opts->attach_arg;
    uv_signal_init(srv.loop, &srv.sigint);
    uv_signal_init(srv.loop, &srv.sigterm);
    srv.sigint.data = srv.sigterm.data = &srv;
    uv_signal_start(&srv.sigint, on_signal, SIGINT);
    uv_signal_start(&srv.sigterm, on_signal, SIGTERM);
    mf_log(MF_LOG_INFO, "NETWORK", "Waiting for connections on %s:%d (workers: %d warm, up to %d)", bind_ip, port,
           warm, cap);
    if (opts->ready)
        opts->ready(opts->ready_arg);
    /* Runs until every handle is closed: after a signal, once no job is in flight. */
    uv_run(srv.loop, UV_RUN_DEFAULT);
    goto done;

err_close_async:
    srv.done_async_open = false;
    uv_close((uv_handle_t *)&srv.done_async, NULL);
    srv.topo_async_open = false;
    mf_engine_set_topology_hook(eng, NULL, NULL);
    uv_close((uv_handle_t *)&srv.topo_async, NULL);
    srv.stop_async_open = false;
    mf_engine_set_stop_hook(eng, NULL, NULL);
    uv_close((uv_handle_t *)&srv.stop_async, NULL);
    uv_run(srv.loop, UV_RUN_DEFAULT);
done:
    mf_engine_set_net_status_hook(eng, NULL, NULL); /* before the pools it reads go */
    /* No job is queued or running now; joining runs each worker's thread_exit. */
    mf_net_pool_destroy(srv.fast_pool);
    mf_net_pool_destroy(srv.data_pool);
    hold_close(&srv); /* after the workers: none waits on the set now */
    pthread_mutex_destroy(&srv.done_lock);
    free(srv.conns);
    mf_tls_ctx_free(srv.tls);
    uv_loop_close(srv.loop);
    return rc;
}
