/*
 * raft_node.h: one member of a raft group, the thin boundary between mayfly
 * and canonical raft (libraft 0.15, libuv I/O; its maintained successor
 * cowsql/raft has the same API).
 *
 * Everything raft-specific stays behind this header: the rest of mayfly sees
 * opaque byte payloads that are committed in one order on every member and
 * handed to an apply callback with their log index, a role, and a leader.
 *
 * Threads. A node runs on a libuv loop the caller owns and runs in its own
 * thread (raft's libuv back end does its disk and network I/O there). Every
 * raft call happens on that loop thread. The functions below say which
 * thread may call them: open, bootstrap and start run before the loop runs
 * (or on its thread); submit, add_voter, remove, close, leader and state are
 * safe from any thread (requests go through a mutex-protected queue and a
 * uv_async_t; role and leader are cached under the same mutex). Callbacks
 * (apply, state change, done, close) always run on the loop thread, so they
 * must not block on work that needs the loop.
 *
 * Entries. libraft 0.15's libuv back end needs entry payloads whose length is
 * a multiple of 8 bytes, so each entry is an 8-byte header (the magic
 * "MFRN" and the payload's real length, both little-endian uint32) followed
 * by the payload and zero padding; apply gets the exact payload back.
 *
 * Snapshots. With a snapshot callback, raft takes a snapshot every
 * snapshot_threshold applied entries (keeping snapshot_trailing entries
 * behind it) and truncates its log there: the snapshot's payload is what the
 * owner's callback returns (a small marker; the owner's data is its own
 * business, see repl.c's initial sync). A member that starts from a snapshot,
 * or is sent one because it is too far behind, gets restore with that
 * payload, in log order before the entries that follow it. Without a
 * snapshot callback raft never takes one and the log grows without bound.
 * libraft keeps no applied index on disk: after a restart it applies the
 * committed log again from its last snapshot, so the state machine must skip
 * the indexes it has already applied.
 *
 * Processes using a node should ignore SIGPIPE (mayflyd does), as raft's
 * transport writes to sockets whose peer may be gone.
 */
#ifndef MF_RAFT_NODE_H
#define MF_RAFT_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/error.h"

typedef enum mf_raft_role {
    MF_RAFT_ROLE_UNAVAILABLE = 0, /* not started, or closing */
    MF_RAFT_ROLE_FOLLOWER,
    MF_RAFT_ROLE_CANDIDATE,
    MF_RAFT_ROLE_LEADER,
} mf_raft_role_t;

/*
 * Applies one committed entry: called on every member, on the loop thread,
 * once per entry in log order (index strictly increasing). payload is valid
 * only during the call. Returns 0; a non-zero return stops applying at this
 * entry and raft retries it when the next entry commits, so it is only for
 * transient failures. Never close the node from here (close is queued anyway).
 */
typedef int (*mf_raft_apply_fn)(void *arg, uint64_t index, const void *payload, size_t len);

/*
 * Reports a change of role or of the known leader, on the loop thread.
 * leader_id is 0 and leader_address NULL while no leader is known;
 * leader_address is valid only during the call.
 */
typedef void (*mf_raft_state_fn)(void *arg, mf_raft_role_t role, uint64_t leader_id, const char *leader_address);

/*
 * Completes a submit or a membership change, on the loop thread. err is NULL
 * on success (index: the entry's log index, after it was committed and
 * applied on this member), or the failure: 10107 NotWritablePrimary (not the
 * leader), 189 PrimarySteppedDown (leadership lost before the commit; the
 * entry may still commit later), 11600 InterruptedAtShutdown (closing), 117
 * ConflictingOperationInProgress (a membership change is in progress), ...
 */
typedef void (*mf_raft_done_fn)(void *arg, uint64_t index, const mf_error_t *err);

/*
 * Snapshots (see the header comment), on the loop thread. snapshot returns
 * a payload (mf_malloc'd; the node frees it) for the state at applied index
 * index, or -1. restore gets a snapshot's payload (valid during the call);
 * it must not block; 0, or -1 to fail the restore.
 */
typedef int (*mf_raft_snapshot_fn)(void *arg, uint64_t index, void **payload, size_t *len);
typedef int (*mf_raft_restore_fn)(void *arg, const void *payload, size_t len);

/* Called once the node is closed, on the loop thread; the node is freed right after it returns. */
typedef void (*mf_raft_close_fn)(void *arg);

typedef struct mf_raft_node_opts {
    uint64_t id;             /* raft server id, > 0, unique in the group */
    const char *address;     /* "127.0.0.1:port": listened on, and how peers reach this member */
    const char *dir;         /* existing directory for the raft log and metadata */
    uv_loop_t *loop;         /* the loop the node runs on (caller runs it in its own thread) */
    mf_raft_apply_fn apply;  /* required */
    mf_raft_state_fn on_state; /* may be NULL */
    void *arg;               /* passed to apply and on_state */
    unsigned election_timeout_ms;  /* 0: raft's default (1000); randomised between 1x and 2x */
    unsigned heartbeat_timeout_ms; /* 0: raft's default (100); must be below the election timeout */
    mf_raft_snapshot_fn snapshot;  /* NULL: no snapshots */
    mf_raft_restore_fn restore;    /* required with snapshot */
    unsigned snapshot_threshold;   /* 0: raft's default (1024) */
    unsigned snapshot_trailing;    /* 0: raft's default (128) */
    const char *key;               /* members prove they hold it on every raft connection (raft_transport.h); NULL: no proof */
    bool (*admit)(void *arg, int fd); /* each socket accepted on the raft port; false closes it (may be NULL) */
    void *admit_arg;
    unsigned handshake_ms;         /* 0: MF_RAFT_HANDSHAKE_MS; a raft handshake must finish within it */
} mf_raft_node_opts_t;

typedef struct mf_raft_server {
    uint64_t id;
    const char *address;
} mf_raft_server_t;

typedef struct mf_raft_node mf_raft_node_t;

/*
 * mf_raft_node_open: creates a node on opts->loop (strings are copied).
 * Call before the loop runs or on its thread. Returns the node, or NULL with
 * err (on failure, handles already made are released by the loop's next run).
 */
mf_raft_node_t *mf_raft_node_open(const mf_raft_node_opts_t *opts, mf_error_t *err);

/*
 * mf_raft_node_bootstrap: writes the group's initial configuration (all
 * voters) into a pristine data directory. Call after open and before start,
 * on every founding member with the same list. Returns 0, or -1 with err (23
 * AlreadyInitialized when the directory already holds raft state).
 */
int mf_raft_node_bootstrap(mf_raft_node_t *node, const mf_raft_server_t *servers, size_t n, mf_error_t *err) MF_WUR;

/*
 * mf_raft_node_start: loads the log, starts listening and takes part in
 * elections. Call once, before the loop runs or on its thread. Returns 0 or
 * -1 with err (e.g. the address is in use); the node must then be closed.
 */
int mf_raft_node_start(mf_raft_node_t *node, mf_error_t *err) MF_WUR;

/*
 * mf_raft_node_submit: proposes payload (copied) as a new entry. Any thread.
 * Returns 0 when queued: done is then called exactly once, on the loop
 * thread. Returns -1 with err, and never calls done, when the node is
 * closing or is known not to be the leader (10107).
 */
int mf_raft_node_submit(mf_raft_node_t *node, const void *payload, size_t len, mf_raft_done_fn done, void *arg,
                        mf_error_t *err) MF_WUR;

/*
 * mf_raft_node_submit_wait: submit, then blocks until done. For worker
 * threads, never the loop thread. Returns 0 with *index set (may be NULL),
 * or -1 with err.
 */
int mf_raft_node_submit_wait(mf_raft_node_t *node, const void *payload, size_t len, uint64_t *index,
                             mf_error_t *err) MF_WUR;

/*
 * mf_raft_node_add_voter: on the leader, adds server id at address and
 * promotes it to voter once it has caught up. Any thread; same contract as
 * submit (index is that of the promoting configuration entry).
 */
int mf_raft_node_add_voter(mf_raft_node_t *node, uint64_t id, const char *address, mf_raft_done_fn done, void *arg,
                           mf_error_t *err) MF_WUR;

/* mf_raft_node_remove: on the leader, removes server id from the configuration. Any thread; as submit. */
int mf_raft_node_remove(mf_raft_node_t *node, uint64_t id, mf_raft_done_fn done, void *arg, mf_error_t *err) MF_WUR;

/*
 * mf_raft_node_transfer: on the leader, hands leadership to member id (0:
 * the most caught-up voter raft picks). Any thread; as submit: done gets
 * NULL once another member leads, 262 ExceededTimeLimit when none took
 * over within an election timeout.
 */
int mf_raft_node_transfer(mf_raft_node_t *node, uint64_t id, mf_raft_done_fn done, void *arg, mf_error_t *err) MF_WUR;

/* mf_raft_node_progress: the current term and commit index as last seen on the loop thread. Any thread. */
void mf_raft_node_progress(mf_raft_node_t *node, uint64_t *term, uint64_t *commit_index);

/*
 * mf_raft_node_replicated: on the leader, how many members' logs hold the
 * entry at index (this member counted; the others by the match index raft
 * keeps for each, as last polled on the loop thread); 0 when this member is
 * not the leader. Any thread. mf_raft_node_watch(node, true) makes the loop
 * poll every millisecond (instead of every 20) until as many
 * mf_raft_node_watch(node, false) calls undo it: for writers waiting on
 * a write concern above a majority.
 */
int mf_raft_node_replicated(mf_raft_node_t *node, uint64_t index);
void mf_raft_node_watch(mf_raft_node_t *node, bool on);

/*
 * mf_raft_node_leader: the leader this member knows of. Any thread. Returns
 * true with *id and address (NUL-terminated, truncated to size) set, or false
 * when none is known (both then zero/empty). id and address may be NULL.
 */
bool mf_raft_node_leader(mf_raft_node_t *node, uint64_t *id, char *address, size_t size);

/* mf_raft_node_state: this member's role as last seen on the loop thread. Any thread. */
mf_raft_role_t mf_raft_node_state(mf_raft_node_t *node);

/* mf_raft_node_role_name: "leader", "follower", "candidate" or "unavailable". */
const char *mf_raft_node_role_name(mf_raft_role_t role);

/*
 * mf_raft_node_close: asks the node to close. Any thread, once. Submits still
 * queued fail with 11600; raft then closes (its pending entries fail the
 * same way), the node's handles close, cb (may be NULL) runs on the loop
 * thread and the node is freed. The loop has nothing of the node left
 * afterwards, so a loop that served only this node returns from uv_run.
 * The node must not be used once this is called.
 */
void mf_raft_node_close(mf_raft_node_t *node, mf_raft_close_fn cb, void *arg);

#endif /* MF_RAFT_NODE_H */
