/*
 * http.h: mayfly's HTTP port (SPEC I1): the TTL console, its JSON API and
 * Prometheus metrics, served on the server's own libuv loop (see http.c for
 * the connection handling, http_api.c for what each path answers).
 *
 * Layering: like net/, a front end over the command layer. Every write the
 * API makes runs as a command (createIndexes, collMod) through mf_cmd_run, as
 * an HTTP Basic user when access control is on, so it is checked, logged
 * and replicated exactly like the same command from a driver.
 */
#ifndef MF_HTTP_H
#define MF_HTTP_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "cmd/cmd.h"
#include "common/error.h"

typedef struct mf_http mf_http_t;

typedef struct mf_http_opts {
    const char *bind_ip;
    int port;        /* 0: no HTTP port */
    bool port_given; /* --httpPort / net.http.port was set: a busy port stops start-up; else it is skipped */
} mf_http_opts_t;

/*
 * mf_http_start: listens on bind_ip:port on loop (the caller's thread runs
 * it). Returns 0 with *out set, or with *out NULL when there is no port (0)
 * or the default port is busy (logged); -1 with err when a port given
 * explicitly cannot be listened on. Loop thread only.
 */
int mf_http_start(mf_engine_t *eng, uv_loop_t *loop, const mf_http_opts_t *o, mf_http_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_http_stop: stops accepting, closes idle connections and, once requests
 * in flight have been answered, every handle; h frees itself then (the
 * loop's uv_run returns only after that). NULL is fine. Loop thread only.
 */
void mf_http_stop(mf_http_t *h);

/* One parsed request, as http_api.c sees it. Strings are NUL-terminated; all owned by the connection. */
typedef struct mf_http_req {
    int method;          /* enum http_method (http_parser.h) */
    const char *path;    /* "/api/ttl" (no query string) */
    const char *query;   /* after '?', or "" */
    const char *body;    /* may contain NULs; body_len bytes */
    size_t body_len;
    const char *authorization; /* the Authorization header, or NULL */
    const char *content_type;  /* the Content-Type header, or NULL */
    const char *host;          /* the Host header, or NULL */
    const char *origin;        /* the Origin header (a browser's request), or NULL */
    const char *fetch_site;    /* the Sec-Fetch-Site header (a browser's request), or NULL */
    bool loopback;       /* the peer is 127.0.0.0/8 or ::1 */
    const char *remote;  /* "ip:port" */
} mf_http_req_t;

/* The answer; body is malloc'ed (or NULL for none) and taken by the server. */
typedef struct mf_http_resp {
    int status;
    const char *content_type; /* static string */
    char *body;
    size_t body_len;
    bool www_authenticate;    /* add WWW-Authenticate: Basic (a 401) */
    const char *allow;        /* add Allow: (a 405), or NULL */
} mf_http_resp_t;

/*
 * A growable byte string, NUL-terminated after len (p is NULL until the first
 * add). mf_http_buf_add appends n bytes; _reset empties it (keeping the
 * memory); _free releases it. The HTTP module's own helper.
 */
typedef struct mf_http_buf {
    char *p;
    size_t len, cap;
} mf_http_buf_t;
void mf_http_buf_add(mf_http_buf_t *b, const char *p, size_t n);
void mf_http_buf_reset(mf_http_buf_t *b);
void mf_http_buf_free(mf_http_buf_t *b);

/* The reader's limits: a request past one is refused with fail_status. */
#define MF_HTTP_MAX_URL (8 * 1024)      /* 414 */
#define MF_HTTP_MAX_HEADERS (64 * 1024) /* 431: header names and values together */
#define MF_HTTP_MAX_BODY (1024 * 1024)  /* 413 */

/*
 * One connection's requests as they are read (http.c's connections, and
 * fuzz/fuzz_http.c, so that the fuzz target reads bytes exactly as the
 * server does): Debian's http_parser with callbacks that keep the URL, the
 * body and the two headers the API reads (Authorization, Content-Type),
 * within the limits above, one request at a time.
 *
 * mf_http_reader_init: a reader for a new connection. mf_http_reader_execute:
 * parses data[0..n) and returns the bytes used; it stops after one whole
 * request (the parser is paused: complete is set) and resumes on the next
 * call. When it used fewer bytes and the parser is not paused
 * (HTTP_PARSER_ERRNO(&r->parser) other than HPE_OK / HPE_PAUSED), the
 * request is bad: fail_status is 413, 414 or 431 for a limit, else 0 (a
 * malformed request). mf_http_reader_request: the complete request into req
 * (method, path, query, body, headers; not loopback or remote), clearing
 * complete; it splits the URL in place, and req's strings point into r,
 * valid until the next execute or free. mf_http_reader_free releases what r
 * holds.
 */
typedef struct mf_http_reader {
    http_parser parser;
    mf_http_buf_t url, body, hfield, hvalue, authz, ctype, host, origin, fetch_site;
    size_t header_bytes;
    bool hvalue_open; /* the last callback was a header value */
    bool complete;    /* a whole request is in */
    int fail_status;  /* a limit was hit: 413, 414 or 431 */
} mf_http_reader_t;
void mf_http_reader_init(mf_http_reader_t *r);
size_t mf_http_reader_execute(mf_http_reader_t *r, const char *data, size_t n);
void mf_http_reader_request(mf_http_reader_t *r, mf_http_req_t *req);
void mf_http_reader_free(mf_http_reader_t *r);

/*
 * mf_http_route: answers one request (http_api.c). Runs on an HTTP worker
 * thread, may run commands (it uses that thread's storage session) and may
 * block for as long as they take.
 */
void mf_http_route(mf_engine_t *eng, const mf_http_req_t *req, mf_http_resp_t *resp);

/* The console's files, embedded at build time (scripts/embed.sh → build/gen/console_assets.c). */
typedef struct mf_http_asset {
    const char *path; /* "/index.html" */
    const unsigned char *data;
    size_t len;
} mf_http_asset_t;
extern const mf_http_asset_t mf_http_assets[]; /* NULL-path terminated */

#endif /* MF_HTTP_H */
