/*
 * peer.c: one blocking command to another member over the wire protocol
 * (see peer.h). A fresh TCP connection per call: members talk rarely
 * (initiate, reconfig, a heartbeat a second), so a connection pool would be
 * more code than it saves.
 */
#include "repl/peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "auth/scram.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/limits.h"

#define OP_MSG 2013

int
mf_peer_split_host(const char *host, char *name, size_t size, int *port)
{
    const char *colon = strrchr(host, ':');
    if (colon == NULL || colon == host || (size_t)(colon - host) >= size)
        return -1;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end != '\0' || p <= 0 || p > 65535)
        return -1;
    memcpy(name, host, (size_t)(colon - host));
    name[colon - host] = '\0';
    *port = (int)p;
    return 0;
}

/* Waits until fd is ready for events or the deadline passes. Returns 0, or -1 (errno ETIMEDOUT on time-out). */
static int
wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - mf_mono_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int
connect_to(const char *host, int64_t deadline, mf_error_t *err)
{
    char name[256], port_s[16];
    int port;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (mf_peer_split_host(host, name, sizeof(name), &port) != 0) {
        mf_err_set(err, MF_E_FailedToParse, "bad host:port '%s'", host);
        return -1;
    }
    snprintf(port_s, sizeof(port_s), "%d", port);
    int gai = getaddrinfo(name, port_s, &hints, &res);
    if (gai != 0) {
        mf_err_set(err, MF_E_HostUnreachable, "cannot resolve %s: %s", name, gai_strerror(gai));
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            int ok = errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0;
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (!ok || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
                if (soerr != 0)
                    errno = soerr;
                close(fd);
                fd = -1;
            }
        }
    }
    freeaddrinfo(res);
    if (fd < 0)
        mf_err_set(err, MF_E_HostUnreachable, "cannot connect to %s: %s", host, strerror(errno));
    return fd;
}

/* One connection to a member: a socket, with TLS over it when the member set speaks TLS. */
typedef struct chan {
    int fd;
    SSL *ssl; /* NULL: plain TCP */
} chan_t;

/* Waits as OpenSSL asks after a non-blocking call returned r. 0 to retry, -1 on failure. */
static int
ssl_wait(chan_t *ch, int r, int64_t deadline)
{
    switch (SSL_get_error(ch->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return wait_fd(ch->fd, POLLIN, deadline);
    case SSL_ERROR_WANT_WRITE:
        return wait_fd(ch->fd, POLLOUT, deadline);
    default:
        ERR_clear_error();
        errno = ECONNRESET;
        return -1;
    }
}

/*
 * Moves all n bytes at p over ch, writing them (write) or reading them,
 * waiting as the socket or OpenSSL asks until deadline. 0, or -1 with errno
 * (ETIMEDOUT past the deadline; ECONNRESET if the peer closed).
 */
static int
chan_io(chan_t *ch, uint8_t *p, size_t n, bool write, int64_t deadline)
{
    while (n > 0) {
        ssize_t r;
        if (ch->ssl != NULL) {
            int c = n > INT32_MAX ? INT32_MAX : (int)n;
            int k = write ? SSL_write(ch->ssl, p, c) : SSL_read(ch->ssl, p, c);
            if (k <= 0) {
                if (ssl_wait(ch, k, deadline) != 0)
                    return -1;
                continue;
            }
            r = k;
        } else {
            r = write ? send(ch->fd, p, n, MSG_NOSIGNAL) : recv(ch->fd, p, n, 0);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
                if (wait_fd(ch->fd, write ? POLLOUT : POLLIN, deadline) != 0)
                    return -1;
                continue;
            }
            if (r <= 0) {
                if (r == 0)
                    errno = ECONNRESET;
                return -1;
            }
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int
send_all(chan_t *ch, const uint8_t *p, size_t n, int64_t deadline)
{
    return chan_io(ch, (uint8_t *)p, n, true, deadline);
}

static int
recv_all(chan_t *ch, uint8_t *p, size_t n, int64_t deadline)
{
    return chan_io(ch, p, n, false, deadline);
}

int
mf_peer_tls_new(const char *cert_key_file, const char *ca_file, void **out, mf_error_t *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        return mf_err_set(err, MF_E_InvalidSSLConfiguration, "cannot create a TLS client context");
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* The member's own certificate, for members that require client certificates (mongod's default). */
    if (cert_key_file != NULL && (SSL_CTX_use_certificate_chain_file(ctx, cert_key_file) != 1 ||
                                  SSL_CTX_use_PrivateKey_file(ctx, cert_key_file, SSL_FILETYPE_PEM) != 1)) {
        SSL_CTX_free(ctx);
        ERR_clear_error();
        return mf_err_set(err, MF_E_InvalidSSLConfiguration, "cannot read %s for TLS to the other members",
                          cert_key_file);
    }
    if (ca_file != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            SSL_CTX_free(ctx);
            ERR_clear_error();
            return mf_err_set(err, MF_E_InvalidSSLConfiguration, "cannot read tlsCAFile %s", ca_file);
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    *out = ctx;
    return 0;
}

void
mf_peer_tls_free(void *ctx)
{
    SSL_CTX_free(ctx);
}

/* The TLS handshake on ch->fd (connected, non-blocking) for host. 0, or -1 with err. */
static int
tls_start(chan_t *ch, void *ctx, const char *host, int64_t deadline, mf_error_t *err)
{
    char name[256];
    int port;
    ch->ssl = SSL_new(ctx);
    if (ch->ssl == NULL || SSL_set_fd(ch->ssl, ch->fd) != 1)
        return mf_err_set(err, MF_E_SSLHandshakeFailed, "cannot start TLS to %s", host);
    if (mf_peer_split_host(host, name, sizeof(name), &port) == 0) {
        /* The certificate must name the member (when verified): by IP address or host name. */
        unsigned char addr[16];
        if (inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1) {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ch->ssl), name);
        } else {
            SSL_set_tlsext_host_name(ch->ssl, name);
            SSL_set1_host(ch->ssl, name);
        }
    }
    for (;;) {
        int r = SSL_connect(ch->ssl);
        if (r == 1)
            return 0;
        int e = SSL_get_error(ch->ssl, r);
        if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || ssl_wait(ch, r, deadline) != 0) {
            char why[200] = "";
            unsigned long code = ERR_get_error();
            if (code != 0)
                ERR_error_string_n(code, why, sizeof(why));
            ERR_clear_error();
            return mf_err_set(err, MF_E_SSLHandshakeFailed, "TLS handshake with %s failed: %s", host,
                              why[0] ? why : "the connection closed");
        }
    }
}

static void
put_i32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)u;
    p[1] = (uint8_t)(u >> 8);
    p[2] = (uint8_t)(u >> 16);
    p[3] = (uint8_t)(u >> 24);
}

static int32_t
get_i32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* One OP_MSG request of cmd on db over fd and its reply into reply (appended). 0, or -1 with err. */
static int
roundtrip(chan_t *fd, const char *host, const char *db, const bson_t *cmd, int64_t deadline, bson_t *reply,
          mf_error_t *err)
{
    bson_t body;
    uint8_t *msg = NULL, *in = NULL;
    int rc = -1;

    bson_init(&body);
    bson_concat(&body, cmd);
    BSON_APPEND_UTF8(&body, "$db", db);
    size_t total = 16 + 4 + 1 + body.len;
    msg = mf_malloc(total);
    put_i32(msg, (int32_t)total);
    put_i32(msg + 4, 1);
    put_i32(msg + 8, 0);
    put_i32(msg + 12, OP_MSG);
    put_i32(msg + 16, 0);
    msg[20] = 0;
    memcpy(msg + 21, bson_get_data(&body), body.len);

    uint8_t hdr[16];
    if (send_all(fd, msg, total, deadline) != 0 || recv_all(fd, hdr, sizeof(hdr), deadline) != 0) {
        mf_err_set(err, errno == ETIMEDOUT ? MF_E_NetworkTimeout : MF_E_HostUnreachable, "%s: %s", host,
                   strerror(errno));
        goto out;
    }
    int32_t len = get_i32(hdr);
    if (len < 16 + 5 + 5 || len > MF_MAX_MESSAGE_SIZE || get_i32(hdr + 12) != OP_MSG) {
        mf_err_set(err, MF_E_ProtocolError, "%s answered with a malformed message", host);
        goto out;
    }
    in = mf_malloc((size_t)len - 16);
    if (recv_all(fd, in, (size_t)len - 16, deadline) != 0) {
        mf_err_set(err, errno == ETIMEDOUT ? MF_E_NetworkTimeout : MF_E_HostUnreachable, "%s: %s", host,
                   strerror(errno));
        goto out;
    }
    bson_t r;
    if (in[4] != 0 || !bson_init_static(&r, in + 5, (size_t)len - 16 - 5) || !bson_validate(&r, 0, NULL)) {
        mf_err_set(err, MF_E_ProtocolError, "%s answered with a malformed reply", host);
        goto out;
    }
    bson_concat(reply, &r);
    rc = 0;
out:
    free(in);
    free(msg);
    bson_destroy(&body);
    return rc;
}

/* The payload of a SASL reply (BinData), or NULL; with *done. */
static const char *
sasl_payload(const bson_t *reply, uint32_t *len, bool *done, int32_t *conv)
{
    bson_iter_t it;
    const uint8_t *data = NULL;
    bson_subtype_t st;
    *done = bson_iter_init_find(&it, reply, "done") && bson_iter_as_bool(&it);
    *conv = bson_iter_init_find(&it, reply, "conversationId") ? (int32_t)bson_iter_as_int64(&it) : 0;
    if (!bson_iter_init_find(&it, reply, "payload") || !BSON_ITER_HOLDS_BINARY(&it))
        return NULL;
    bson_iter_binary(&it, &st, len, &data);
    return (const char *)data;
}

/*
 * Authenticates the connection fd as the members' internal user
 * (__system@local, SCRAM-SHA-256, the keyFile's key as the password), as
 * mongod's internal authentication does. 0, or -1 with err.
 */
static int
authenticate(chan_t *fd, const char *host, const char *key, int64_t deadline, mf_error_t *err)
{
    mf_scram_t *s = mf_scram_new(MF_SCRAM_SHA256);
    char *first = NULL, *final = NULL;
    bson_t cmd, reply;
    const char *p;
    uint32_t plen;
    bool done;
    int32_t conv;
    int rc = -1;

    bson_init(&cmd);
    bson_init(&reply);
    if (mf_scram_client_begin(s, "__system", &first, err) != 0)
        goto out;
    BSON_APPEND_INT32(&cmd, "saslStart", 1);
    BSON_APPEND_UTF8(&cmd, "mechanism", "SCRAM-SHA-256");
    bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)first, (uint32_t)strlen(first));
    bson_t opts;
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "options", &opts);
    BSON_APPEND_BOOL(&opts, "skipEmptyExchange", true);
    bson_append_document_end(&cmd, &opts);
    if (roundtrip(fd, host, "local", &cmd, deadline, &reply, err) != 0)
        goto out;
    if ((p = sasl_payload(&reply, &plen, &done, &conv)) == NULL) {
        mf_err_set(err, MF_E_AuthenticationFailed, "%s refused the members' authentication (is its keyFile the same?)",
                   host);
        goto out;
    }
    if (mf_scram_client_respond(s, key, p, plen, &final, err) != 0)
        goto out;
    bson_reinit(&cmd);
    bson_reinit(&reply);
    BSON_APPEND_INT32(&cmd, "saslContinue", 1);
    BSON_APPEND_INT32(&cmd, "conversationId", conv);
    bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)final, (uint32_t)strlen(final));
    if (roundtrip(fd, host, "local", &cmd, deadline, &reply, err) != 0)
        goto out;
    if ((p = sasl_payload(&reply, &plen, &done, &conv)) == NULL) {
        mf_err_set(err, MF_E_AuthenticationFailed, "%s refused the members' authentication (is its keyFile the same?)",
                   host);
        goto out;
    }
    if (mf_scram_client_check(s, p, plen, err) != 0)
        goto out;
    rc = 0;
out:
    free(first);
    free(final);
    bson_destroy(&cmd);
    bson_destroy(&reply);
    mf_scram_free(s);
    return rc;
}

int
mf_peer_call(const char *host, const char *db, const bson_t *cmd, const mf_peer_sec_t *sec, int timeout_ms,
             bson_t *reply, mf_error_t *err)
{
    int64_t deadline = mf_mono_ms() + (timeout_ms > 0 ? timeout_ms : 10000);
    chan_t ch = {.fd = -1, .ssl = NULL};
    int rc = -1;

    bson_init(reply);
    ch.fd = connect_to(host, deadline, err);
    if (ch.fd < 0)
        return -1;
    if ((sec == NULL || sec->tls == NULL || tls_start(&ch, sec->tls, host, deadline, err) == 0) &&
        (sec == NULL || sec->key == NULL || authenticate(&ch, host, sec->key, deadline, err) == 0))
        rc = roundtrip(&ch, host, db, cmd, deadline, reply, err);
    if (ch.ssl != NULL) {
        SSL_shutdown(ch.ssl); /* close_notify, best effort: the socket is non-blocking */
        SSL_free(ch.ssl);
        ERR_clear_error();
    }
    close(ch.fd);
    return rc;
}

int
mf_peer_command(const char *host, const bson_t *cmd, const mf_peer_sec_t *sec, int timeout_ms, bson_t *reply,
                mf_error_t *err)
{
    bson_iter_t it;
    if (mf_peer_call(host, "admin", cmd, sec, timeout_ms, reply, err) != 0)
        return -1;
    if (bson_iter_init_find(&it, reply, "ok") && bson_iter_as_double(&it) == 1.0)
        return 0;
    int code = MF_E_InternalError;
    const char *msg = "command failed";
    if (bson_iter_init_find(&it, reply, "code"))
        code = (int)bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
        msg = bson_iter_utf8(&it, NULL);
    return mf_err_set(err, code, "%s", msg);
}
