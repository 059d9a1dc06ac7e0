/*
 * tls.h: TLS for client connections, OpenSSL over libuv (issue 10).
 *
 * libuv moves bytes; OpenSSL never touches the socket. Each TLS connection
 * (mf_tls_conn_t) is an SSL object between two memory BIOs: the network
 * layer feeds what it read from the socket in (mf_tls_feed), takes the
 * plaintext out (mf_tls_read, which also drives the handshake), encrypts
 * replies (mf_tls_write), and sends whatever ciphertext OpenSSL produced
 * (mf_tls_take_out: handshake messages, records, alerts). Everything runs
 * on the loop thread; nothing here blocks or locks.
 *
 * The context (mf_tls_ctx_t, one per server) holds the certificate and key
 * (--tlsCertificateKeyFile, one PEM file with both, as mongod's) and, with
 * --tlsCAFile, the CAs that client certificates must chain to: then, as
 * mongod, a client without a certificate is refused unless
 * --tlsAllowConnectionsWithoutCertificates; --tlsAllowInvalidCertificates
 * accepts certificates that do not verify. TLS 1.2 is the minimum.
 */
#ifndef MF_TLS_H
#define MF_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* --tlsMode */
typedef enum { MF_TLS_DISABLED = 0, MF_TLS_ALLOW, MF_TLS_PREFER, MF_TLS_REQUIRE } mf_tls_mode_t;

typedef struct mf_tls_opts {
    mf_tls_mode_t mode;
    const char *cert_key_file;     /* --tlsCertificateKeyFile (needed unless disabled) */
    const char *ca_file;           /* --tlsCAFile, or NULL */
    bool allow_no_client_cert;     /* --tlsAllowConnectionsWithoutCertificates */
    bool allow_invalid_certs;      /* --tlsAllowInvalidCertificates */
} mf_tls_opts_t;

typedef struct mf_tls_ctx mf_tls_ctx_t;
typedef struct mf_tls_conn mf_tls_conn_t;

/* mf_tls_mode_parse: "disabled", "allowTLS", "preferTLS", "requireTLS". 0, or -1 if none of those. */
int mf_tls_mode_parse(const char *s, mf_tls_mode_t *out);

/*
 * mf_tls_ctx_new: the server's context from o (mode not disabled). Returns
 * 0 with *out (free with mf_tls_ctx_free), or -1 with err (140
 * InvalidSSLConfiguration: unreadable or mismatched certificate and key,
 * unreadable CA file).
 */
int mf_tls_ctx_new(const mf_tls_opts_t *o, mf_tls_ctx_t **out, mf_error_t *err) MF_WUR;
void mf_tls_ctx_free(mf_tls_ctx_t *ctx);

/* mf_tls_conn_new: a server-side TLS connection. Never NULL. */
mf_tls_conn_t *mf_tls_conn_new(mf_tls_ctx_t *ctx);
void mf_tls_conn_free(mf_tls_conn_t *t);

/* mf_tls_feed: n bytes read from the socket. */
void mf_tls_feed(mf_tls_conn_t *t, const uint8_t *in, size_t n);

/*
 * mf_tls_read: decrypted bytes into out (cap bytes), driving the handshake
 * first. Returns how many (> 0), 0 when more input is needed (or the peer
 * closed TLS), or -1 with err (141 SSLHandshakeFailed, or a broken record).
 */
ssize_t mf_tls_read(mf_tls_conn_t *t, uint8_t *out, size_t cap, mf_error_t *err);

/* mf_tls_write: encrypts n bytes (the output waits for mf_tls_take_out). 0, or -1 with err. */
int mf_tls_write(mf_tls_conn_t *t, const uint8_t *in, size_t n, mf_error_t *err) MF_WUR;

/*
 * mf_tls_take_out: the ciphertext waiting to be sent, into *buf (malloc'd,
 * the caller frees it) and *len; false (and *buf NULL) when there is none.
 */
bool mf_tls_take_out(mf_tls_conn_t *t, uint8_t **buf, size_t *len);

/* mf_tls_describe: "TLSv1.3 TLS_AES_256_GCM_SHA384" and the client certificate's subject, for the log. */
void mf_tls_describe(mf_tls_conn_t *t, char *out, size_t cap);

#endif /* MF_TLS_H */
