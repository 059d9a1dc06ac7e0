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
 * mf_peer_call: sends cmd to db on host ("name:port") and reads the reply
 * into reply (initialised here, always; the caller destroys it). Gives up
 * after timeout_ms (<= 0: 10 s). Returns 0 when a reply arrived (which may
 * be {ok: 0}), or -1 with err (6 HostUnreachable, 89 NetworkTimeout, 17
 * ProtocolError, 18 AuthenticationFailed). With key (the keyFile's key,
 * NULL for none) the connection first authenticates as the members'
 * internal user __system@local with SCRAM-SHA-256, as mongod's members do.
 */
int mf_peer_call(const char *host, const char *db, const bson_t *cmd, const char *key, int timeout_ms, bson_t *reply,
                 mf_error_t *err) MF_WUR;

/* mf_peer_command: mf_peer_call on admin; an {ok: 0} reply becomes -1 with its code and errmsg in err. */
int mf_peer_command(const char *host, const bson_t *cmd, const char *key, int timeout_ms, bson_t *reply,
                    mf_error_t *err) MF_WUR;

/* mf_peer_split_host: "name:port" into name (size bytes) and *port. Returns 0, or -1 if malformed. */
int mf_peer_split_host(const char *host, char *name, size_t size, int *port);

#endif /* MF_PEER_H */
