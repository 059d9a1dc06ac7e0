/*
 * net.h: the network front end over the engine (see net.c).
 */
#ifndef MF_NET_H
#define MF_NET_H

#include "cmd/cmd.h"
#include "common/error.h"
#include "net/tls.h"

/*
 * The data lane's default worker cap: mongod runs a thread per connection;
 * 512 concurrent commands is far past what 2-16 cores serve usefully, and
 * bounds threads (stacks are reserved lazily, so idle ones cost little).
 */
#define MF_NET_DEFAULT_MAX_WORKERS 512

typedef struct mf_net_opts {
    const char *bind_ip;
    int port;
    int workers;     /* data-lane workers kept warm (>= 1) */
    int max_workers; /* data-lane cap; 0 = MF_NET_DEFAULT_MAX_WORKERS; raised to workers if lower */
    int max_conns;   /* --maxConns: connections open at once beyond which new ones are closed at once; 0 = 1,000,000 */
    const mf_tls_opts_t *tls; /* --tlsMode and its files; NULL: TLS disabled */
    mf_compressor_list_t compressors; /* --networkMessageCompressors, in preference order; empty: none offered */
    void (*ready)(void *arg); /* called once the listener is up, or NULL */
    void *ready_arg;
    /*
     * Other front ends on the same loop (the HTTP port): attach runs once the
     * listener is up (non-zero stops start-up, err set); detach runs at
     * shutdown, when the listener closes. Either may be NULL.
     */
    int (*attach)(void *arg, void *uv_loop, mf_error_t *err);
    void (*detach)(void *arg);
    void *attach_arg;
} mf_net_opts_t;

/*
 * mf_net_serve: listens on opts->bind_ip:port and serves until SIGINT/SIGTERM,
 * then closes every connection, calls eng->on_shutdown (if set), and returns
 * once in-flight commands have finished and every worker has exited (the
 * caller then closes the engine, which checkpoints). Returns 0, or -1 with
 * err if it cannot listen or start workers.
 */
int mf_net_serve(mf_engine_t *eng, const mf_net_opts_t *opts, mf_error_t *err) MF_WUR;

#endif /* MF_NET_H */
