/*
 * peer.h: a replica-set member's blocking client for the other members'
 * wire protocol port (OP_MSG, one command per fresh connection). Members
 * learn each other's raft address and state this way (replSetInitiate,
 * replSetReconfig, heartbeats), so a config names only client hosts.
 */
#ifndef MF_PEER_H
#define MF_PEER_H

#include <bson/bson.h>

#include "common/error.h"

/*
 * How a member reaches the others: key (the keyFile's key, NULL for none)
 * makes each connection first authenticate as the members' internal user
 * __system@local with SCRAM-SHA-256, as mongod's members do; tls (an
 * SSL_CTX from mf_peer_tls_new, NULL for none) runs the connection over
 * TLS. NULL as a whole: plain and unauthenticated.
 */
typedef struct mf_peer_sec {
    const char *key;
    void *tls;
} mf_peer_sec_t;

/*
 * mf_peer_call: sends cmd to db on host ("name:port") and reads the reply
 * into reply (initialised here, always; the caller destroys it). Gives up
 * after timeout_ms (<= 0: 10 s). Returns 0 when a reply arrived (which may
 * be {ok: 0}), or -1 with err (6 HostUnreachable, 89 NetworkTimeout, 17
 * ProtocolError, 18 AuthenticationFailed, 141 SSLHandshakeFailed).
 */
int mf_peer_call(const char *host, const char *db, const bson_t *cmd, const mf_peer_sec_t *sec, int timeout_ms,
                 bson_t *reply, mf_error_t *err) MF_WUR;

/* mf_peer_command: mf_peer_call on admin; an {ok: 0} reply becomes -1 with its code and errmsg in err. */
int mf_peer_command(const char *host, const bson_t *cmd, const mf_peer_sec_t *sec, int timeout_ms, bson_t *reply,
                    mf_error_t *err) MF_WUR;

/*
 * mf_peer_tls_new: a TLS client context for the members' connections:
 * cert_key_file (may be NULL) is presented as this member's certificate,
 * ca_file (may be NULL: not verified) must have signed theirs, naming the
 * host. 0 with *out (free with mf_peer_tls_free), or -1 with err (140).
 */
int mf_peer_tls_new(const char *cert_key_file, const char *ca_file, void **out, mf_error_t *err) MF_WUR;
void mf_peer_tls_free(void *ctx);

/* mf_peer_split_host: "name:port" into name (size bytes) and *port. Returns 0, or -1 if malformed. */
int mf_peer_split_host(const char *host, char *name, size_t size, int *port);

#endif /* MF_PEER_H */
