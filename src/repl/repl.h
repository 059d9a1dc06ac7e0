/*
 * repl.h: a replica-set member (mayflyd --replSet): canonical raft under
 * MongoDB's replica-set commands, hello fields and oplog (issue 9;
 * ARCHITECTURE.md "Replication").
 *
 * The raft log is the oplog. On the primary, every write transaction that
 * changed replicated data becomes one raft entry just before it commits
 * (the oplog observer's prepare step): the writer submits the entry, waits
 * until raft has committed it (a majority holds it) and its turn in log
 * order has come, then commits locally. So every write a client sees on
 * any member is majority-committed: `w: 1` and `w: "majority"` both answer
 * after the raft commit, `readConcern: "majority"` reads what every read
 * reads, and a failover never rolls back an acknowledged write. DDL
 * commits first and is logged right after (under the collection's
 * exclusive lock, so no write of that collection interleaves); its
 * command waits for the entry's commit before answering.
 *
 * Secondaries apply committed entries in log order through the command
 * layer (oplog.h), idempotently, and record the applied index with the
 * data, so a restart (raft replays its log) skips what is applied. The TTL
 * monitor runs only on a writable primary (SPEC E1); losing the primary
 * role pauses it and kills its batch in flight (E2); its deletes replicate
 * like any write. local.oplog.rs (capped, --oplogSize MB) gets one document
 * per op for tools that tail it.
 *
 * Threads: raft's libuv loop (its own thread), an applier, a writer of
 * local.oplog.rs, and a heartbeat thread that asks the other members for
 * their state over the wire protocol (replSetGetStatus).
 */
#ifndef MF_REPL_H
#define MF_REPL_H

#include "common/error.h"
#include "engine/engine.h"

typedef struct mf_repl mf_repl_t;

typedef struct mf_repl_opts {
    const char *set_name; /* --replSet */
    const char *bind_ip;  /* raft listens on this member's host from the config; bind_ip names it by default */
    int port;             /* the client port */
    int raft_port;        /* --raftPort (0: port + 10000) */
    const char *dbpath;   /* raft's log lives in <dbpath>/raft */
    int64_t oplog_size_mb; /* local.oplog.rs's cap (0: 1024) */
    const char *key;       /* the keyFile's key (copied), NULL for none: peer connections authenticate as __system */
    bool tls;              /* connect to the other members over TLS (--tlsMode preferTLS or requireTLS) */
    const char *tls_cert_key_file, *tls_ca_file; /* this member's certificate, the CAs to verify theirs (may be NULL) */
} mf_repl_opts_t;

/*
 * mf_repl_open: makes eng a replica-set member: hooks (eng->repl), the
 * oplog observer, local.oplog.rs, and, if local.system.replset holds this
 * set's config, raft started from its log. Call after mf_engine_open and
 * before serving. Returns 0 with *out, or -1 with err.
 */
int mf_repl_open(mf_engine_t *eng, const mf_repl_opts_t *opts, mf_repl_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_repl_close: stops raft and the threads (writes from then on fail with
 * 10107); call after serving, before mf_engine_close. mf_repl_free frees r
 * after mf_engine_close (its oplog observer lives as long as the engine).
 * NULL is ignored by both.
 */
void mf_repl_close(mf_repl_t *r);
void mf_repl_free(mf_repl_t *r);

#endif /* MF_REPL_H */
