/*
 * net.h: the network front end over the engine (see net.c).
 */
#ifndef MF_NET_H
#define MF_NET_H

#include "cmd/cmd.h"
#include "common/error.h"

/*
 * mf_net_serve: listens on bind_ip:port and serves until SIGINT/SIGTERM, then
 * closes every connection and returns once in-flight commands have finished
 * (the caller then closes the engine, which checkpoints). ready(arg) is called
 * once the listener is up. Returns 0, or -1 with err if it cannot listen.
 */
int mf_net_serve(mf_engine_t *eng, const char *bind_ip, int port, void (*ready)(void *), void *ready_arg,
                 mf_error_t *err) MF_WUR;

#endif /* MF_NET_H */
