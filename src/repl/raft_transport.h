/*
 * raft_transport.h: the raft port's TCP transport (a struct
 * raft_uv_transport), in front of libraft's own.
 *
 * libraft's TCP transport (raft_uv_tcp_init) accepts every connection on
 * the raft port and believes whatever the peer's handshake says: no cap on
 * connections still in their handshake and no time limit for one (each
 * holds a descriptor for as long as the peer likes), an address buffer of
 * whatever length the peer claims, handed on as a C string whether or not
 * it holds a NUL, and no check of who is connecting, so anyone who can
 * reach the port can speak raft to the group (vote, append entries: write
 * data) even where the client port requires authentication.
 *
 * This transport keeps libraft's handshake on the wire (its connect side
 * is libraft's own, see raft_transport.c) and replaces the listening side:
 *   - at most max_pending connections in their handshake at once: a new one
 *     over the cap ends the oldest (a member's handshake is one round trip,
 *     so silent sockets held open cannot lock members out); a socket the
 *     admit hook refuses (the open-files reserve, common/fds.h) is closed at
 *     accept;
 *   - a handshake not complete within handshake_ms is closed;
 *   - the preamble must name protocol 1; the address must be 1 to
 *     MF_RAFT_MAX_ADDRESS bytes and hold its terminating NUL;
 *   - with a key (the keyFile's), both ends prove they hold it before raft
 *     sees the connection: the listener sends a random nonce at accept, the
 *     connecting member answers with its own nonce and an HMAC-SHA256 of
 *     both nonces and its id under the key, and the listener answers with
 *     its HMAC of them the other way round. A connection that fails either
 *     proof is closed (and logged, at most once a minute); raft never sees
 *     it. Traffic after the proofs is not encrypted or signed: the raft port
 *     still belongs on a private network, but reaching it is no longer
 *     enough to join the group.
 * Everything runs on the transport's loop thread.
 */
#ifndef MF_RAFT_TRANSPORT_H
#define MF_RAFT_TRANSPORT_H

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stddef.h>

#define MF_RAFT_MAX_ADDRESS 1024     /* longest handshake address accepted (libraft pads to 8 bytes) */
#define MF_RAFT_HANDSHAKE_MS 10000   /* default time limit for a handshake, proofs included */
#define MF_RAFT_MAX_PENDING 32       /* default cap on connections in their handshake */

typedef struct mf_raft_transport_opts {
    uv_loop_t *loop;
    const char *key;       /* the members' shared key (NUL-terminated; copied), NULL: no proofs */
    unsigned handshake_ms; /* 0: MF_RAFT_HANDSHAKE_MS */
    unsigned max_pending;  /* 0: MF_RAFT_MAX_PENDING */
    /* Each accepted socket's descriptor: false closes it at once (may be NULL). */
    bool (*admit)(void *arg, int fd);
    void *admit_arg;
} mf_raft_transport_opts_t;

/* What the listening side refused so far (tests and logs). */
typedef struct mf_raft_transport_stats {
    unsigned long accepted;   /* handed to raft */
    unsigned long over_cap;   /* ended by a newer one over max_pending, or refused by admit */
    unsigned long malformed;  /* bad preamble or address */
    unsigned long timed_out;  /* handshake not finished in time */
    unsigned long auth_failed; /* wrong proof */
} mf_raft_transport_stats_t;

/*
 * mf_raft_transport_init: sets up t (then given to raft_uv_init). Returns 0
 * or a raft error code. After raft has closed t (the close callback ran),
 * mf_raft_transport_release frees what init allocated.
 */
int mf_raft_transport_init(struct raft_uv_transport *t, const mf_raft_transport_opts_t *opts);
void mf_raft_transport_release(struct raft_uv_transport *t);

/* mf_raft_transport_stats: copies t's counters (loop thread, or after it stopped). */
void mf_raft_transport_stats(struct raft_uv_transport *t, mf_raft_transport_stats_t *out);

#endif /* MF_RAFT_TRANSPORT_H */
