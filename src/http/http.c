/*
 * http.c: the HTTP port's connections (see http.h).
 *
 * Design:
 *   - The listener and its connections live on the server's libuv loop (the
 *     one net.c runs); bytes are parsed there by http_parser (Debian's
 *     libhttp-parser), never by hand. A connection gathers one request (URL,
 *     the few headers the API reads, the body), then stops reading.
 *   - The request becomes a job on the port's own worker pool (net_pool.c,
 *     up to HTTP_MAX_WORKERS): answering may run commands or wait up to
 *     250 ms for the TTL monitor's counts, which the loop must never do.
 *     The worker builds the whole response (mf_http_route, http_api.c),
 *     links the job on the done list and wakes the loop (uv_async_send under
 *     the list's lock), which writes the response and, for a keep-alive
 *     connection, parses the bytes that followed.
 *   - Limits (bad input never costs more than its own bytes): a URL over
 *     8 KB, headers over 64 KB in all or a body over 1 MB answer 414/431/413
 *     and close; a parse error answers 400 and closes; at most
 *     HTTP_MAX_CONNS connections are open at once, and no more than a tenth
 *     of the open-files limit (the MongoDB port takes up to four fifths, see
 *     net.c, and the storage engine keeps the rest); more, or one whose
 *     socket is numbered within MF_FDS_CONN_RESERVE of the limit
 *     (common/fds.h), are closed on accept; a connection idle for
 *     HTTP_IDLE_MS is closed.
 *   - Stopping (mf_http_stop, from net.c's shutdown): close the listener and
 *     idle connections; a connection with a job in flight closes when its
 *     response is written. When no connection and no job is left, the async
 *     handle closes and the last close callback frees the server.
 */
#include "common/alloc.h"
#include "http/http.h"

#include <http_parser.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fds.h"
#include "common/fmt.h"
#include "common/log.h"
#include "net/net_pool.h"
#include "storage/storage.h"

#define HTTP_MAX_CONNS 1024
#define HTTP_MAX_WORKERS 8
#define HTTP_IDLE_MS 60000

typedef struct hconn hconn_t;

typedef struct hjob {
    mf_net_pool_job_t pj; /* first: the pool hands it back */
    struct hjob *done_next;
    hconn_t *conn;
    mf_http_req_t req;
    mf_http_resp_t resp;
} hjob_t;

struct hconn {
    uv_tcp_t tcp;
    uv_timer_t idle;
    mf_http_t *h;
    mf_http_reader_t rd; /* the request being read */
    char remote[80];
    bool loopback;
    /* Bytes read but not yet parsed (received while a request was being answered). */
    mf_http_buf_t unparsed;
    bool busy;         /* a job is in flight */
    bool closing;
    bool close_after;  /* close once the response is written */
    int handles;       /* open uv handles (tcp, timer) */
};

struct mf_http {
    mf_engine_t *eng;
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening;
    uv_async_t done_async;
    pthread_mutex_t done_lock;
    hjob_t *done_head, *done_tail;
    mf_net_pool_t *pool;
    hconn_t **conns;
    size_t nconns, capconns;
    size_t max_conns; /* HTTP_MAX_CONNS, or a tenth of the open-files limit when that is lower */
    int64_t nofile;   /* the open-files limit at start (mf_fds_limit) */
    int64_t inflight;
    bool stopping;
    int open_handles; /* listener + async: the server is freed when they and every connection have closed */
};

static void conn_close(hconn_t *c);
static void parse_more(hconn_t *c);
static void alloc_cb(uv_handle_t *hd, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);
static void maybe_free(mf_http_t *h);

/* ---------- small helpers ---------- */

void
mf_http_buf_add(mf_http_buf_t *b, const char *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = mf_realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void
mf_http_buf_reset(mf_http_buf_t *b)
{
    b->len = 0;
    if (b->p)
        b->p[0] = '\0';
}

void
mf_http_buf_free(mf_http_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static const char *
hbuf_str(const mf_http_buf_t *b)
{
    return b->p ? b->p : "";
}

/* ---------- reading requests (mf_http_reader_t; loop thread) ---------- */

static int
on_message_begin(http_parser *p)
{
    mf_http_reader_t *r = p->data;
    mf_http_buf_reset(&r->url);
    mf_http_buf_reset(&r->body);
    mf_http_buf_reset(&r->hfield);
    mf_http_buf_reset(&r->hvalue);
    mf_http_buf_reset(&r->authz);
    mf_http_buf_reset(&r->ctype);
    mf_http_buf_reset(&r->host);
    mf_http_buf_reset(&r->origin);
    mf_http_buf_reset(&r->fetch_site);
    r->header_bytes = 0;
    r->hvalue_open = false;
    return 0;
}

static int
on_url(http_parser *p, const char *at, size_t n)
{
    mf_http_reader_t *r = p->data;
    if (r->url.len + n > MF_HTTP_MAX_URL) {
        r->fail_status = 414;
        return -1;
    }
    mf_http_buf_add(&r->url, at, n);
    return 0;
}

/* A header is complete (its value ended): keep the ones the API reads. */
static void
header_done(mf_http_reader_t *r)
{
    static const struct {
        const char *name;
        size_t off;
    } kept[] = {
        {"authorization", offsetof(mf_http_reader_t, authz)}, {"content-type", offsetof(mf_http_reader_t, ctype)},
        {"host", offsetof(mf_http_reader_t, host)},           {"origin", offsetof(mf_http_reader_t, origin)},
        {"sec-fetch-site", offsetof(mf_http_reader_t, fetch_site)},
    };
    if (!r->hvalue_open)
        return;
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
        if (strcasecmp(hbuf_str(&r->hfield), kept[i].name) == 0) {
            mf_http_buf_t *b = (mf_http_buf_t *)((char *)r + kept[i].off);
            mf_http_buf_reset(b);
            mf_http_buf_add(b, hbuf_str(&r->hvalue), r->hvalue.len);
        }
    }
    mf_http_buf_reset(&r->hfield);
    mf_http_buf_reset(&r->hvalue);
    r->hvalue_open = false;
}

static int
header_bytes(mf_http_reader_t *r, size_t n)
{
    r->header_bytes += n;
    if (r->header_bytes > MF_HTTP_MAX_HEADERS) {
        r->fail_status = 431;
        return -1;
    }
    return 0;
}

static int
on_header_field(http_parser *p, const char *at, size_t n)
{
    mf_http_reader_t *r = p->data;
    if (header_bytes(r, n) != 0)
        return -1;
    header_done(r);
    mf_http_buf_add(&r->hfield, at, n);
    return 0;
}

static int
on_header_value(http_parser *p, const char *at, size_t n)
{
    mf_http_reader_t *r = p->data;
    if (header_bytes(r, n) != 0)
        return -1;
    mf_http_buf_add(&r->hvalue, at, n);
    r->hvalue_open = true;
    return 0;
}

static int
on_headers_complete(http_parser *p)
{
    mf_http_reader_t *r = p->data;
    header_done(r);
    if (p->content_length != (uint64_t)-1 && p->content_length > MF_HTTP_MAX_BODY) {
        r->fail_status = 413;
        return -1;
    }
    return 0;
}

static int
on_body(http_parser *p, const char *at, size_t n)
{
    mf_http_reader_t *r = p->data;
    if (r->body.len + n > MF_HTTP_MAX_BODY) {
        r->fail_status = 413;
        return -1;
    }
    mf_http_buf_add(&r->body, at, n);
    return 0;
}

static int
on_message_complete(http_parser *p)
{
    mf_http_reader_t *r = p->data;
    r->complete = true;
    http_parser_pause(p, 1); /* one request at a time: the rest waits for the next execute */
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void
mf_http_reader_init(mf_http_reader_t *r)
{
    memset(r, 0, sizeof(*r));
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
}

size_t
mf_http_reader_execute(mf_http_reader_t *r, const char *data, size_t n)
{
    if (HTTP_PARSER_ERRNO(&r->parser) == HPE_PAUSED)
        http_parser_pause(&r->parser, 0);
    return n ? http_parser_execute(&r->parser, &parser_settings, data, n) : 0;
}

void
mf_http_reader_request(mf_http_reader_t *r, mf_http_req_t *req)
{
    static const char root[] = "/";
    struct http_parser_url u;

    r->complete = false;
    req->method = (int)r->parser.method;
    req->path = root;
    req->query = "";
    /* Split the URL in place: path, then query. */
    http_parser_url_init(&u);
    if (r->url.len > 0 && http_parser_parse_url(r->url.p, r->url.len, 0, &u) == 0 && (u.field_set & (1 << UF_PATH))) {
        char *path = r->url.p + u.field_data[UF_PATH].off;
        if (u.field_set & (1 << UF_QUERY)) {
            char *q = r->url.p + u.field_data[UF_QUERY].off;
            q[u.field_data[UF_QUERY].len] = '\0';
            req->query = q;
        }
        path[u.field_data[UF_PATH].len] = '\0';
        req->path = path;
    }
    req->body = r->body.p ? r->body.p : "";
    req->body_len = r->body.len;
    req->authorization = r->authz.len ? r->authz.p : NULL;
    req->content_type = r->ctype.len ? r->ctype.p : NULL;
    req->host = r->host.len ? r->host.p : NULL;
    req->origin = r->origin.len ? r->origin.p : NULL;
    req->fetch_site = r->fetch_site.len ? r->fetch_site.p : NULL;
}

void
mf_http_reader_free(mf_http_reader_t *r)
{
    mf_http_buf_free(&r->url);
    mf_http_buf_free(&r->body);
    mf_http_buf_free(&r->hfield);
    mf_http_buf_free(&r->hvalue);
    mf_http_buf_free(&r->authz);
    mf_http_buf_free(&r->ctype);
    mf_http_buf_free(&r->host);
    mf_http_buf_free(&r->origin);
    mf_http_buf_free(&r->fetch_site);
}

/* ---------- writing responses (loop thread) ---------- */

typedef struct hwrite {
    uv_write_t w;
    char *head;
    char *body;
    hconn_t *conn;
    bool close_after;
} hwrite_t;

static void
on_write_done(uv_write_t *w, int status)
{
    hwrite_t *hw = (hwrite_t *)w;
    hconn_t *c = hw->conn;
    free(hw->head);
    free(hw->body);
    bool close_after = hw->close_after;
    free(hw);
    if (c->closing)
        return;
    if (status != 0 || close_after || c->h->stopping) {
        conn_close(c);
        return;
    }
    /* Keep-alive: the next request may already be in. */
    parse_more(c);
}

/* Writes resp (taking its body) on c. */
static void
conn_respond(hconn_t *c, mf_http_resp_t *resp, bool close_after)
{
    hwrite_t *hw = mf_calloc(1, sizeof(*hw));
    const char *reason = http_status_str((enum http_status)resp->status);
    char extra[256] = "";
    size_t off = 0;

    if (resp->www_authenticate)
        off += (size_t)snprintf(extra + off, sizeof(extra) - off, "WWW-Authenticate: Basic realm=\"mayfly\", charset=\"UTF-8\"\r\n");
    if (resp->allow != NULL && off < sizeof(extra))
        off += (size_t)snprintf(extra + off, sizeof(extra) - off, "Allow: %s\r\n", resp->allow);
    hw->head = mf_malloc(1024);
    int hn = snprintf(hw->head, 1024,
                      "HTTP/1.1 %d %s\r\n"
                      "Content-Type: %s\r\n"
                      "Content-Length: %zu\r\n"
                      "Cache-Control: no-store\r\n"
                      "X-Content-Type-Options: nosniff\r\n"
                      "X-Frame-Options: DENY\r\n"
                      "Content-Security-Policy: frame-ancestors 'none'\r\n"
                      "%s%s\r\n",
                      resp->status, reason, resp->content_type ? resp->content_type : "text/plain; charset=utf-8",
                      resp->body_len, extra, close_after ? "Connection: close\r\n" : "");
    hw->body = resp->body;
    resp->body = NULL;
    hw->conn = c;
    hw->close_after = close_after;
    uv_buf_t bufs[2] = {uv_buf_init(hw->head, (unsigned)hn), uv_buf_init(hw->body ? hw->body : "", (unsigned)resp->body_len)};
    if (uv_write(&hw->w, (uv_stream_t *)&c->tcp, bufs, 2, on_write_done) != 0) {
        free(hw->head);
        free(hw->body);
        free(hw);
        conn_close(c);
    }
}

/* Answers a request that never reaches a worker (a limit, a parse error) and closes. */
static void
conn_fail(hconn_t *c, int status, const char *msg)
{
    mf_http_resp_t r = {.status = status, .content_type = "text/plain; charset=utf-8"};
    r.body = mf_strdup(msg);
    r.body_len = strlen(msg);
    uv_read_stop((uv_stream_t *)&c->tcp);
    conn_respond(c, &r, true);
}

/* ---------- jobs ---------- */

static void
work_cb(mf_net_pool_job_t *pj)
{
    hjob_t *j = (hjob_t *)pj;
    j->resp.status = 500;
    j->resp.content_type = "text/plain; charset=utf-8";
    mf_http_route(j->conn->h->eng, &j->req, &j->resp);
}

/* Worker thread, after work_cb: hand the job back to the loop. */
static void
on_pool_job_done(mf_net_pool_job_t *pj, void *arg)
{
    mf_http_t *h = arg;
    hjob_t *j = (hjob_t *)pj;
    pthread_mutex_lock(&h->done_lock);
    j->done_next = NULL;
    if (h->done_tail)
        h->done_tail->done_next = j;
    else
        h->done_head = j;
    h->done_tail = j;
    uv_async_send(&h->done_async);
    pthread_mutex_unlock(&h->done_lock);
}

static void
on_pool_thread_exit(void *arg)
{
    mf_http_t *h = arg;
    mf_storage_session_close_thread(h->eng->st);
}

static void
job_free(hjob_t *j)
{
    free(j->resp.body);
    free(j);
}

/* Loop thread: write the responses of finished jobs. */
static void
on_jobs_done(uv_async_t *a)
{
    mf_http_t *h = a->data;
    pthread_mutex_lock(&h->done_lock);
    hjob_t *j = h->done_head;
    h->done_head = h->done_tail = NULL;
    pthread_mutex_unlock(&h->done_lock);
    while (j != NULL) {
        hjob_t *next = j->done_next;
        hconn_t *c = j->conn;
        h->inflight--;
        c->busy = false;
        if (c->closing) {
            conn_close(c); /* closed while the job ran: now it can go */
        } else {
            bool keep = http_should_keep_alive(&c->rd.parser) && !h->stopping;
            conn_respond(c, &j->resp, !keep);
        }
        job_free(j);
        j = next;
    }
    maybe_free(h);
}

/* Loop thread: a whole request is in; hand it to a worker. */
static void
submit(hconn_t *c)
{
    mf_http_t *h = c->h;
    hjob_t *j = mf_calloc(1, sizeof(*j));

    j->pj.work = work_cb;
    j->conn = c;
    /* The request's strings stay the connection's until the job is done (it is not read meanwhile). */
    mf_http_reader_request(&c->rd, &j->req);
    j->req.loopback = c->loopback;
    j->req.remote = c->remote;
    c->busy = true;
    h->inflight++;
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_timer_again(&c->idle);
    mf_net_pool_submit(h->pool, &j->pj);
}

/*
 * Loop thread: parses what is in c->unparsed; submits a complete request,
 * answers a bad one, or reads on for more.
 */
static void
parse_more(hconn_t *c)
{
    if (c->busy || c->closing)
        return;
    size_t n = c->unparsed.len;
    size_t used = mf_http_reader_execute(&c->rd, c->unparsed.p, n);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->rd.parser);
    if (used < n && e == HPE_PAUSED)
        memmove(c->unparsed.p, c->unparsed.p + used, n - used);
    c->unparsed.len = used < n && e == HPE_PAUSED ? n - used : 0;
    if (c->rd.complete) {
        submit(c);
        return;
    }
    if (e != HPE_OK && e != HPE_PAUSED) {
        if (c->rd.fail_status == 413)
            conn_fail(c, 413, "request body too large (the limit is 1 MB)\n");
        else if (c->rd.fail_status == 414)
            conn_fail(c, 414, "URL too long\n");
        else if (c->rd.fail_status == 431)
            conn_fail(c, 431, "request headers too large\n");
        else
            conn_fail(c, 400, "malformed HTTP request\n");
        return;
    }
    if (c->rd.parser.upgrade) {
        conn_fail(c, 400, "protocol upgrades are not supported\n");
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

/* ---------- reading and connections (loop thread) ---------- */

static void
alloc_cb(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    (void)hd;
    (void)suggested;
    buf->base = mf_malloc(16384);
    buf->len = 16384;
}

static void
read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    hconn_t *c = st->data;
    if (nread > 0 && !c->closing) {
        mf_http_buf_add(&c->unparsed, buf->base, (size_t)nread);
        uv_timer_again(&c->idle);
    }
    free(buf->base);
    if (c->closing)
        return;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread > 0)
        parse_more(c);
}

static void
on_conn_handle_closed(uv_handle_t *hd)
{
    hconn_t *c = hd->data;
    if (--c->handles > 0)
        return;
    mf_http_t *h = c->h;
    for (size_t i = 0; i < h->nconns; i++) {
        if (h->conns[i] == c) {
            h->conns[i] = h->conns[--h->nconns];
            break;
        }
    }
    mf_http_reader_free(&c->rd);
    mf_http_buf_free(&c->unparsed);
    free(c);
    maybe_free(h);
}

/* Closes c now, or (a job in flight still points at it) once that job is done. */
static void
conn_close(hconn_t *c)
{
    if (c->busy) {
        c->closing = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
        return;
    }
    if (c->handles > 0 && !uv_is_closing((uv_handle_t *)&c->tcp)) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
        uv_close((uv_handle_t *)&c->idle, on_conn_handle_closed);
    }
}

static void
on_idle(uv_timer_t *t)
{
    hconn_t *c = t->data;
    if (!c->busy)
        conn_close(c);
}

static void
on_connection(uv_stream_t *listener, int status)
{
    mf_http_t *h = listener->data;
    if (status != 0 || h->stopping)
        return;
    hconn_t *c = mf_calloc(1, sizeof(*c));
    c->h = h;
    uv_tcp_init(h->loop, &c->tcp);
    c->tcp.data = c;
    c->handles = 1;
    uv_os_fd_t fd = -1;
    bool accepted = uv_accept(listener, (uv_stream_t *)&c->tcp) == 0;
    bool reserve = accepted && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
                   mf_fd_in_reserve(fd, h->nofile, MF_FDS_CONN_RESERVE);
    if (!accepted || h->nconns >= h->max_conns || reserve) {
        if (reserve)
            mf_storage_fds_low(h->eng->st); /* table opens count again before they take the last ones */
        if (accepted && h->nconns >= h->max_conns)
            mf_log(MF_LOG_WARN, "NETWORK", "HTTP: %zu connections open, closing a new one", h->max_conns);
        else if (reserve)
            mf_log(MF_LOG_WARN, "NETWORK", "HTTP: closing a new connection: too few file descriptors are left (this "
                   "one is number %d of %lld allowed)", (int)fd, (long long)h->nofile);
        c->closing = true;
        if (h->nconns == h->capconns) {
            h->capconns = h->capconns ? h->capconns * 2 : 16;
            h->conns = mf_realloc(h->conns, h->capconns * sizeof(*h->conns));
        }
        h->conns[h->nconns++] = c; /* found and removed by the close callback */
        uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
        return;
    }
    mf_storage_fd_taken(h->eng->st);
    uv_timer_init(h->loop, &c->idle);
    c->idle.data = c;
    c->handles = 2;
    uv_timer_start(&c->idle, on_idle, HTTP_IDLE_MS, HTTP_IDLE_MS);
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    char ip[64];
    int port;
    mf_fmt_sockaddr(uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0 ? &ss : NULL, ip, sizeof(ip), &port);
    snprintf(c->remote, sizeof(c->remote), "%s:%d", ip, port);
    c->loopback = strncmp(ip, "127.", 4) == 0 || strcmp(ip, "::1") == 0 || strncmp(ip, "::ffff:127.", 11) == 0;
    mf_http_reader_init(&c->rd);
    if (h->nconns == h->capconns) {
        h->capconns = h->capconns ? h->capconns * 2 : 16;
        h->conns = mf_realloc(h->conns, h->capconns * sizeof(*h->conns));
    }
    h->conns[h->nconns++] = c;
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

/* ---------- start and stop ---------- */

static void
on_server_handle_closed(uv_handle_t *hd)
{
    mf_http_t *h = hd->data;
    h->open_handles--;
    maybe_free(h);
}

/* Loop thread: once stopping and nothing is left, close the last handles; free h after them. */
static void
maybe_free(mf_http_t *h)
{
    if (!h->stopping || h->inflight > 0 || h->nconns > 0)
        return;
    if (h->listening) {
        h->listening = false;
        uv_close((uv_handle_t *)&h->listener, on_server_handle_closed);
    }
    if (!uv_is_closing((uv_handle_t *)&h->done_async)) {
        uv_close((uv_handle_t *)&h->done_async, on_server_handle_closed);
        return;
    }
    if (h->open_handles > 0)
        return;
    /* Every handle is closed and no job is queued or running: join the workers and go. */
    mf_net_pool_destroy(h->pool);
    pthread_mutex_destroy(&h->done_lock);
    free(h->conns);
    free(h);
}

void
mf_http_stop(mf_http_t *h)
{
    if (h == NULL || h->stopping)
        return;
    h->stopping = true;
    if (h->listening) {
        h->listening = false;
        uv_close((uv_handle_t *)&h->listener, on_server_handle_closed);
    }
    /* conn_close edits h->conns only from close callbacks, later. */
    for (size_t i = 0; i < h->nconns; i++)
        conn_close(h->conns[i]);
    maybe_free(h);
}

static void
free_on_close(uv_handle_t *hd)
{
    free(hd->data);
}

int
mf_http_start(mf_engine_t *eng, uv_loop_t *loop, const mf_http_opts_t *o, mf_http_t **out, mf_error_t *err)
{
    struct sockaddr_storage addr;
    int r;

    *out = NULL;
    if (o->port <= 0)
        return 0;
    if (strchr(o->bind_ip, ':'))
        r = uv_ip6_addr(o->bind_ip, o->port, (struct sockaddr_in6 *)&addr);
    else
        r = uv_ip4_addr(o->bind_ip, o->port, (struct sockaddr_in *)&addr);
    if (r != 0)
        return mf_err_set(err, MF_E_BadValue, "invalid --bind_ip %s for the HTTP port: %s", o->bind_ip, uv_strerror(r));

    mf_http_t *h = mf_calloc(1, sizeof(*h));
    h->nofile = mf_fds_limit();
    h->max_conns = HTTP_MAX_CONNS;
    if (h->nofile / 10 < (int64_t)h->max_conns)
        h->max_conns = h->nofile / 10 > 4 ? (size_t)(h->nofile / 10) : 4;
    h->eng = eng;
    h->loop = loop;
    uv_tcp_init(loop, &h->listener);
    h->listener.data = h;
    h->open_handles = 1;
    if ((r = uv_tcp_bind(&h->listener, (struct sockaddr *)&addr, 0)) != 0 ||
        (r = uv_listen((uv_stream_t *)&h->listener, 128, on_connection)) != 0) {
        /* h is freed by the close callback, on the loop's next turn. */
        uv_close((uv_handle_t *)&h->listener, free_on_close);
        if (o->port_given)
            return mf_err_set(err, MF_E_HostUnreachable, "cannot listen for HTTP on %s:%d: %s", o->bind_ip, o->port,
                              uv_strerror(r));
        mf_log(MF_LOG_WARN, "NETWORK",
               "HTTP port %s:%d is not available (%s); the console and /metrics are off (--httpPort chooses another)",
               o->bind_ip, o->port, uv_strerror(r));
        return 0;
    }
    h->listening = true;
    pthread_mutex_init(&h->done_lock, NULL);
    uv_async_init(loop, &h->done_async, on_jobs_done);
    h->done_async.data = h;
    h->open_handles = 2;
    mf_net_pool_config_t pc = {.name = "mf-http", .warm = 1, .cap = HTTP_MAX_WORKERS, .idle_ms = 5000,
                               .done = on_pool_job_done, .thread_exit = on_pool_thread_exit, .arg = h};
    if (mf_net_pool_create(&pc, &h->pool, err) != 0) {
        h->stopping = true;
        h->listening = false;
        uv_close((uv_handle_t *)&h->listener, on_server_handle_closed);
        uv_close((uv_handle_t *)&h->done_async, on_server_handle_closed);
        /* maybe_free runs from the callbacks and frees h (pool NULL is fine). */
        return -1;
    }
    mf_log(MF_LOG_INFO, "NETWORK", "HTTP console and metrics on http://%s:%d/", o->bind_ip, o->port);
    *out = h;
    return 0;
}
