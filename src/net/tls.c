/*
 * tls.c: OpenSSL between memory BIOs (see tls.h).
 */
#include "net/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

struct mf_tls_ctx {
    SSL_CTX *ssl;
};

struct mf_tls_conn {
    SSL *ssl;
    BIO *in;  /* what the socket delivered, for OpenSSL to read */
    BIO *out; /* what OpenSSL wrote, for the socket */
};

int
mf_tls_mode_parse(const char *s, mf_tls_mode_t *out)
{
    static const struct {
        const char *name;
        mf_tls_mode_t mode;
    } modes[] = {{"disabled", MF_TLS_DISABLED}, {"allowTLS", MF_TLS_ALLOW}, {"preferTLS", MF_TLS_PREFER},
                 {"requireTLS", MF_TLS_REQUIRE}};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        if (strcmp(s, modes[i].name) == 0) {
            *out = modes[i].mode;
            return 0;
        }
    }
    return -1;
}

/* OpenSSL's last error as text into err with code and what. */
static int
ssl_err(mf_error_t *err, int code, const char *what)
{
    char buf[256] = "";
    unsigned long e = ERR_get_error();
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return mf_err_set(err, code, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

/* --tlsAllowInvalidCertificates: a certificate that does not verify is accepted (and logged by the caller). */
static int
accept_any(int preverify_ok, X509_STORE_CTX *x)
{
    (void)preverify_ok;
    (void)x;
    return 1;
}

int
mf_tls_ctx_new(const mf_tls_opts_t *o, mf_tls_ctx_t **out, mf_error_t *err)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    if (ssl == NULL)
        return ssl_err(err, MF_E_InvalidSSLConfiguration, "cannot create a TLS context");
    SSL_CTX_set_min_proto_version(ssl, TLS1_2_VERSION);
    SSL_CTX_set_options(ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    if (o->cert_key_file == NULL) {
        SSL_CTX_free(ssl);
        return mf_err_set(err, MF_E_InvalidSSLConfiguration, "need tlsCertificateKeyFile when tlsMode != disabled");
    }
    if (SSL_CTX_use_certificate_chain_file(ssl, o->cert_key_file) != 1) {
        SSL_CTX_free(ssl);
        return ssl_err(err, MF_E_InvalidSSLConfiguration, "cannot read the certificate of tlsCertificateKeyFile");
    }
    if (SSL_CTX_use_PrivateKey_file(ssl, o->cert_key_file, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ssl) != 1) {
        SSL_CTX_free(ssl);
        return ssl_err(err, MF_E_InvalidSSLConfiguration, "cannot read the private key of tlsCertificateKeyFile");
    }
    if (o->ca_file != NULL) {
        if (SSL_CTX_load_verify_locations(ssl, o->ca_file, NULL) != 1) {
            SSL_CTX_free(ssl);
            return ssl_err(err, MF_E_InvalidSSLConfiguration, "cannot read tlsCAFile");
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->ca_file);
        if (names != NULL)
            SSL_CTX_set_client_CA_list(ssl, names);
        int mode = SSL_VERIFY_PEER | (o->allow_no_client_cert ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
        SSL_CTX_set_verify(ssl, mode, o->allow_invalid_certs ? accept_any : NULL);
    } else {
        SSL_CTX_set_verify(ssl, SSL_VERIFY_NONE, NULL);
    }
    *out = mf_calloc(1, sizeof(**out));
    (*out)->ssl = ssl;
    return 0;
}

void
mf_tls_ctx_free(mf_tls_ctx_t *ctx)
{
    if (ctx == NULL)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

mf_tls_conn_t *
mf_tls_conn_new(mf_tls_ctx_t *ctx)
{
    mf_tls_conn_t *t = mf_calloc(1, sizeof(*t));
    t->ssl = SSL_new(ctx->ssl);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->in == NULL || t->out == NULL)
        abort(); /* out of memory */
    BIO_set_mem_eof_return(t->in, -1); /* an empty input BIO means "retry", not end of stream */
    SSL_set_bio(t->ssl, t->in, t->out); /* the SSL owns both now */
    SSL_set_accept_state(t->ssl);
    return t;
}

void
mf_tls_conn_free(mf_tls_conn_t *t)
{
    if (t == NULL)
        return;
    SSL_free(t->ssl);
    free(t);
}

void
mf_tls_feed(mf_tls_conn_t *t, const uint8_t *in, size_t n)
{
    while (n > 0) {
        int w = BIO_write(t->in, in, n > INT32_MAX ? INT32_MAX : (int)n);
        if (w <= 0)
            abort(); /* a memory BIO only fails when out of memory */
        in += w;
        n -= (size_t)w;
    }
}

ssize_t
mf_tls_read(mf_tls_conn_t *t, uint8_t *out, size_t cap, mf_error_t *err)
{
    bool handshaking = !SSL_is_init_finished(t->ssl);
    int r = SSL_read(t->ssl, out, cap > INT32_MAX ? INT32_MAX : (int)cap);
    if (r > 0)
        return r;
    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return 0; /* close_notify: the socket's end follows */
    default:
        return ssl_err(err, handshaking ? MF_E_SSLHandshakeFailed : MF_E_ProtocolError,
                       handshaking ? "TLS handshake failed" : "TLS error");
    }
}

int
mf_tls_write(mf_tls_conn_t *t, const uint8_t *in, size_t n, mf_error_t *err)
{
    while (n > 0) {
        int w = SSL_write(t->ssl, in, n > INT32_MAX ? INT32_MAX : (int)n);
        if (w <= 0)
            return ssl_err(err, MF_E_ProtocolError, "TLS write failed");
        in += w;
        n -= (size_t)w;
    }
    return 0;
}

bool
mf_tls_take_out(mf_tls_conn_t *t, uint8_t **buf, size_t *len)
{
    size_t n = BIO_ctrl_pending(t->out);
    *buf = NULL;
    *len = 0;
    if (n == 0)
        return false;
    *buf = mf_malloc(n);
    int r = BIO_read(t->out, *buf, (int)n);
    if (r <= 0) {
        free(*buf);
        *buf = NULL;
        return false;
    }
    *len = (size_t)r;
    return true;
}

void
mf_tls_describe(mf_tls_conn_t *t, char *out, size_t cap)
{
    char subject[256] = "no client certificate";
    X509 *peer = SSL_get_peer_certificate(t->ssl);
    if (peer != NULL) {
        X509_NAME_oneline(X509_get_subject_name(peer), subject, sizeof(subject));
        X509_free(peer);
    }
    snprintf(out, cap, "%s %s, %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl), subject);
}
