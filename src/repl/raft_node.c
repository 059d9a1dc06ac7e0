/*
 * raft_node.c: one raft group member on libraft 0.15 with its libuv I/O back
 * end (raft_uv_init), on the raft port's own transport (raft_transport.c:
 * libraft's TCP transport behind a listening side that caps, times out,
 * checks and, with a key, authenticates handshakes). See raft_node.h for
 * the contract.
 *
 * Design. The node owns a struct raft, its raft_io and TCP transport, a
 * uv_async_t that drains a mutex-protected FIFO of requests (submits and
 * membership changes) from any thread, and a uv_timer_t that polls raft's
 * role and leader (libraft 0.15 has no state-change callback) and reports
 * changes. All raft calls happen on the loop thread: in the async and timer
 * callbacks, raft's own callbacks, and open/bootstrap/start before the loop
 * runs.
 *
 * Invariants. Once `closing` is set (under the lock) no request is queued
 * and uv_async_send is never called again, so the async handle can be
 * closed safely. raft_close is only called from the async callback, never
 * from inside an apply (closing raft there would free what raft is still
 * iterating). The node's memory is freed only after raft's close callback
 * and both uv handles' close callbacks have run.
 */
#include "repl/raft_node.h"

#include <endian.h>
#include <limits.h>
#include <pthread.h>
#include <raft.h>
#include <raft/uv.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "repl/raft_transport.h"

/* "MFRN", the first four bytes of every entry, little-endian. */
#define ENTRY_MAGIC 0x4e52464du
#define ENTRY_HEADER 8
/* How often the role and leader are polled, in milliseconds (1 while writers watch replication). */
#define STATE_POLL_MS 20
#define WATCH_POLL_MS 1
/* Members whose match index is kept (repl.c's configs hold at most 50). */
#define MATCH_MAX 64

typedef enum req_kind { REQ_SUBMIT, REQ_ADD_VOTER, REQ_REMOVE, REQ_TRANSFER } req_kind_t;

/* One queued request; owned by the queue, then by raft while in flight. */
typedef struct req {
    struct req *next;
    req_kind_t kind;
    mf_raft_node_t *node;
    struct raft_buffer buf; /* REQ_SUBMIT: the encoded entry (raft_malloc'd until raft takes it) */
    uint64_t id;            /* REQ_ADD_VOTER, REQ_REMOVE */
    char *address;          /* REQ_ADD_VOTER */
    mf_raft_done_fn done;
    void *arg;
    union {
        struct raft_apply apply;
        struct raft_change change;
        struct raft_transfer transfer;
    } r;
} req_t;

struct mf_raft_node {
    uv_loop_t *loop;
    struct raft raft;
    struct raft_io io;
    struct raft_uv_transport transport;
    struct raft_fsm fsm;
    uv_async_t async;
    uv_timer_t timer;
    bool raft_inited; /* raft_init succeeded: raft_close is due */
    bool started;
    int handles_open; /* uv handles not yet closed */
    bool raft_closed; /* raft's close callback ran (or raft was never initialised) */

    uint64_t id;
    char *address;
    char *dir;
    mf_raft_apply_fn apply;
    mf_raft_snapshot_fn snapshot;
    mf_raft_restore_fn restore;
    mf_raft_state_fn on_state;
    void *arg;
    uint64_t last_applied; /* index of the last entry handed to apply */

    /* Shared with other threads, under lock. */
    pthread_mutex_t lock;
    req_t *head, *tail;
    bool closing;
    mf_raft_close_fn close_cb;
    void *close_arg;
    mf_raft_role_t role;
    uint64_t leader_id;
    char *leader_address;
    uint64_t term, commit_index;
    /* The leader's match index of each other server (poll_state); nmatch 0 when not the leader. */
    uint64_t match[MATCH_MAX];
    unsigned nmatch;
    int watchers;     /* mf_raft_node_watch(true) calls not yet undone */

    bool close_started; /* loop thread only */
    bool fast_poll;     /* loop thread only: the timer runs every WATCH_POLL_MS */
};

/* Maps a raft error to a MongoDB code and sets err (what names the action). Returns -1. */
static int
raft_err(mf_error_t *err, int rv, const char *what)
{
    int code;
    switch (rv) {
    case RAFT_NOTLEADER:
        code = MF_E_NotWritablePrimary;
        break;
    case RAFT_LEADERSHIPLOST:
        code = MF_E_PrimarySteppedDown;
        break;
    case RAFT_SHUTDOWN:
    case RAFT_CANCELED:
        code = MF_E_InterruptedAtShutdown;
        break;
    case RAFT_CANTBOOTSTRAP:
        code = MF_E_AlreadyInitialized;
        break;
    case RAFT_CANTCHANGE:
    case RAFT_BUSY:
        code = MF_E_ConflictingOperationInProgress;
        break;
    case RAFT_BADID:
    case RAFT_DUPLICATEID:
    case RAFT_DUPLICATEADDRESS:
    case RAFT_BADROLE:
    case RAFT_INVALID:
    case RAFT_NAMETOOLONG:
        code = MF_E_BadValue;
        break;
    default:
        code = MF_E_InternalError;
        break;
    }
    return mf_err_set(err, code, "raft: %s: %s", what, raft_strerror(rv));
}

static mf_raft_role_t
role_of(int raft_state)
{
    switch (raft_state) {
    case RAFT_FOLLOWER:
        return MF_RAFT_ROLE_FOLLOWER;
    case RAFT_CANDIDATE:
        return MF_RAFT_ROLE_CANDIDATE;
    case RAFT_LEADER:
        return MF_RAFT_ROLE_LEADER;
    default:
        return MF_RAFT_ROLE_UNAVAILABLE;
    }
}

const char *
mf_raft_node_role_name(mf_raft_role_t role)
{
    switch (role) {
    case MF_RAFT_ROLE_FOLLOWER:
        return "follower";
    case MF_RAFT_ROLE_CANDIDATE:
        return "candidate";
    case MF_RAFT_ROLE_LEADER:
        return "leader";
    default:
        return "unavailable";
    }
}

/* Writes v at p as 4 little-endian bytes (p need not be aligned). */
static void
put_u32le(uint8_t *p, uint32_t v)
{
    v = htole32(v);
    memcpy(p, &v, sizeof(v));
}

/* Reads 4 little-endian bytes at p. */
static uint32_t
get_u32le(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return le32toh(v);
}

/* ---- the state machine raft drives (loop thread) ---- */

/* Decodes an entry and hands its payload to the user's apply with its index. */
static int
fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    mf_raft_node_t *node = fsm->data;
    const uint8_t *p = buf->base;
    /*
     * libraft 0.15 applies entries one at a time in log order and advances
     * last_applied after this returns, so the entry's index is the next one.
     */
    uint64_t index = raft_last_applied(&node->raft) + 1;
    *result = NULL;
    if (buf->len < ENTRY_HEADER || get_u32le(p) != ENTRY_MAGIC || get_u32le(p + 4) > buf->len - ENTRY_HEADER) {
        mf_log(MF_LOG_ERROR, "REPL", "raft entry %llu is malformed (%zu bytes)", (unsigned long long)index, buf->len);
        return RAFT_MALFORMED;
    }
    if (index <= node->last_applied)
        mf_log(MF_LOG_WARN, "REPL", "raft entry %llu applied after entry %llu", (unsigned long long)index,
               (unsigned long long)node->last_applied);
    int rc = node->apply(node->arg, index, p + ENTRY_HEADER, get_u32le(p + 4));
    if (rc != 0)
        return RAFT_IOERR; /* raft retries this entry when the next one commits */
    node->last_applied = index;
    return 0;
}

/* A snapshot: the owner's payload behind the same header as entries, in one raft_malloc'd buffer. */
static int
fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n_bufs)
{
    mf_raft_node_t *node = fsm->data;
    void *payload = NULL;
    size_t len = 0;
    if (node->snapshot == NULL ||
        node->snapshot(node->arg, raft_last_applied(&node->raft), &payload, &len) != 0 || len > UINT32_MAX / 2) {
        free(payload);
        return RAFT_NOTFOUND;
    }
    size_t total = ENTRY_HEADER + ((len + 7) & ~(size_t)7);
    struct raft_buffer *b = raft_malloc(sizeof(*b));
    uint8_t *p = raft_malloc(total);
    if (b == NULL || p == NULL) {
        raft_free(b);
        raft_free(p);
        free(payload);
        return RAFT_NOMEM;
    }
    put_u32le(p, ENTRY_MAGIC);
    put_u32le(p + 4, (uint32_t)len);
    memcpy(p + ENTRY_HEADER, payload, len);
    memset(p + ENTRY_HEADER + len, 0, total - ENTRY_HEADER - len);
    free(payload);
    b->base = p;
    b->len = total;
    *bufs = b;
    *n_bufs = 1;
    return 0;
}

/* A snapshot to start from (at start-up, or sent by the leader): the owner's restore; the buffer is ours to free. */
static int
fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    mf_raft_node_t *node = fsm->data;
    const uint8_t *p = buf->base;
    if (node->restore == NULL || buf->len < ENTRY_HEADER || get_u32le(p) != ENTRY_MAGIC ||
        get_u32le(p + 4) > buf->len - ENTRY_HEADER) {
        mf_log(MF_LOG_ERROR, "REPL", "raft snapshot is malformed or unexpected (%zu bytes)", buf->len);
        return RAFT_MALFORMED;
    }
    if (node->restore(node->arg, p + ENTRY_HEADER, get_u32le(p + 4)) != 0)
        return RAFT_IOERR;
    raft_free(buf->base);
    return 0;
}

/* ---- role and leader (loop thread) ---- */

static void timer_cb(uv_timer_t *t);

/* Reads raft's role, leader and (as leader) match indexes; caches them and reports a change. */
static void
poll_state(mf_raft_node_t *node)
{
    mf_raft_role_t role = role_of(raft_state(&node->raft));
    raft_id lid = 0;
    const char *laddr = NULL;
    raft_leader(&node->raft, &lid, &laddr);
    if (lid == 0)
        laddr = NULL;

    pthread_mutex_lock(&node->lock);
    node->term = node->raft.current_term;
    node->commit_index = node->raft.commit_index;
    node->nmatch = 0;
    if (node->raft.state == RAFT_LEADER && node->raft.leader_state.progress != NULL) {
        /* progress[] parallels raft's current configuration; this member's own slot is skipped. */
        const struct raft_configuration *c = &node->raft.configuration;
        for (unsigned i = 0; i < c->n && node->nmatch < MATCH_MAX; i++)
            if (c->servers[i].id != node->id)
                node->match[node->nmatch++] = node->raft.leader_state.progress[i].match_index;
    }
    bool want_fast = node->watchers > 0;
    bool changed = role != node->role || lid != node->leader_id ||
                   (laddr && (!node->leader_address || strcmp(laddr, node->leader_address) != 0));
    if (changed) {
        node->role = role;
        node->leader_id = lid;
        char *old = node->leader_address;
        node->leader_address = laddr ? mf_strdup(laddr) : NULL;
        free(old);
    }
    pthread_mutex_unlock(&node->lock);
    if (want_fast != node->fast_poll && node->started && !node->close_started) {
        unsigned ms = want_fast ? WATCH_POLL_MS : STATE_POLL_MS;
        node->fast_poll = want_fast;
        uv_timer_start(&node->timer, timer_cb, ms, ms);
    }
    if (changed) {
        mf_log(MF_LOG_INFO, "REPL", "raft member %llu is %s, leader %llu%s%s", (unsigned long long)node->id,
               mf_raft_node_role_name(role), (unsigned long long)lid, laddr ? " at " : "", laddr ? laddr : "");
        if (node->on_state)
            node->on_state(node->arg, role, lid, laddr);
    }
}

static void
timer_cb(uv_timer_t *t)
{
    poll_state(t->data);
}

/* ---- requests (loop thread) ---- */

static void
req_free(req_t *req)
{
    if (req->buf.base)
        raft_free(req->buf.base);
    free(req->address);
    free(req);
}

static const char *
req_what(const req_t *req)
{
    switch (req->kind) {
    case REQ_SUBMIT:
        return "submit";
    case REQ_REMOVE:
        return "remove";
    case REQ_TRANSFER:
        return "transfer leadership";
    default:
        return "add voter";
    }
}

/* Calls the request's done callback with rv mapped to an error (0: success), then frees it. */
static void
req_finish(req_t *req, int rv, uint64_t index)
{
    if (rv == 0) {
        req->done(req->arg, index, NULL);
    } else {
        mf_error_t err = {0};
        raft_err(&err, rv, req_what(req));
        req->done(req->arg, 0, &err);
    }
    req_free(req);
}

static void
apply_cb(struct raft_apply *a, int status, void *result)
{
    req_t *req = a->data;
    req_finish(req, status, a->index);
}

static void
change_cb(struct raft_change *c, int status)
{
    req_t *req = c->data;
    raft_index index = raft_last_applied(&req->node->raft);
    req_finish(req, status, status == 0 ? index : 0);
}

/* The server was added as a spare; now promote it (raft catches it up first). */
static void
added_cb(struct raft_change *c, int status)
{
    req_t *req = c->data;
    if (status != 0) {
        req_finish(req, status, 0);
        return;
    }
    int rv = raft_assign(&req->node->raft, &req->r.change, req->id, RAFT_VOTER, change_cb);
    if (rv != 0)
        req_finish(req, rv, 0);
}

/* A leadership transfer ended: it worked if another member leads now. */
static void
transfer_cb(struct raft_transfer *t)
{
    req_t *req = t->data;
    raft_id lid = 0;
    const char *laddr = NULL;
    raft_leader(&req->node->raft, &lid, &laddr);
    poll_state(req->node);
    if (lid != 0 && lid != req->node->id) {
        req_finish(req, 0, 0);
    } else {
        mf_error_t err;
        mf_err_set(&err, MF_E_ExceededTimeLimit, "no electable member caught up in time to take over");
        req->done(req->arg, 0, &err);
        req_free(req);
    }
}

/* Hands one request to raft; failures complete it at once. */
static void
req_start(mf_raft_node_t *node, req_t *req)
{
    int rv;
    switch (req->kind) {
    case REQ_SUBMIT:
        req->r.apply.data = req;
        rv = raft_apply(&node->raft, &req->r.apply, &req->buf, 1, apply_cb);
        if (rv == 0)
            req->buf.base = NULL; /* raft owns the entry now */
        break;
    case REQ_ADD_VOTER:
        req->r.change.data = req;
        rv = raft_add(&node->raft, &req->r.change, req->id, req->address, added_cb);
        if (rv == RAFT_DUPLICATEID) /* added by an earlier try whose promotion failed: promote it now */
            rv = raft_assign(&node->raft, &req->r.change, req->id, RAFT_VOTER, change_cb);
        break;
    case REQ_TRANSFER:
        req->r.transfer.data = req;
        rv = raft_transfer(&node->raft, &req->r.transfer, req->id, transfer_cb);
        break;
    case REQ_REMOVE:
    default:
        req->r.change.data = req;
        rv = raft_remove(&node->raft, &req->r.change, req->id, change_cb);
        break;
    }
    if (rv != 0)
        req_finish(req, rv, 0);
}

static void
node_free(mf_raft_node_t *node)
{
    free(node->leader_address);
    free(node->address);
    free(node->dir);
    pthread_mutex_destroy(&node->lock);
    free(node);
}

/* Frees the node once raft and both handles are closed, after the user's callback. */
static void
maybe_finish_close(mf_raft_node_t *node)
{
    if (node->handles_open > 0 || !node->raft_closed)
        return;
    if (node->raft_inited) {
        raft_uv_close(&node->io);
        mf_raft_transport_release(&node->transport);
    }
    if (node->close_cb)
        node->close_cb(node->close_arg);
    node_free(node);
}

static void
handle_closed_cb(uv_handle_t *h)
{
    mf_raft_node_t *node = h->data;
    node->handles_open--;
    maybe_finish_close(node);
}

static void
raft_closed_cb(struct raft *r)
{
    mf_raft_node_t *node = r->data;
    node->raft_closed = true;
    /* Close the handles now, so the node is freed on a later callback, outside raft's stack. */
    uv_close((uv_handle_t *)&node->timer, handle_closed_cb);
    uv_close((uv_handle_t *)&node->async, handle_closed_cb);
}

static void
async_cb(uv_async_t *a)
{
    mf_raft_node_t *node = a->data;
    pthread_mutex_lock(&node->lock);
    req_t *list = node->head;
    node->head = node->tail = NULL;
    bool closing = node->closing;
    pthread_mutex_unlock(&node->lock);

    if (node->close_started)
        return;
    poll_state(node);
    while (list) {
        req_t *req = list;
        list = req->next;
        if (closing)
            req_finish(req, RAFT_SHUTDOWN, 0);
        else
            req_start(node, req);
    }
    if (closing) {
        node->close_started = true;
        uv_timer_stop(&node->timer);
        pthread_mutex_lock(&node->lock);
        node->role = MF_RAFT_ROLE_UNAVAILABLE;
        pthread_mutex_unlock(&node->lock);
        raft_close(&node->raft, raft_closed_cb);
    }
}

/* Queues a request. Returns 0, or -1 with err (node closing, or not the leader); req is freed on failure. */
static int
enqueue(mf_raft_node_t *node, req_t *req, mf_error_t *err)
{
    pthread_mutex_lock(&node->lock);
    if (node->closing) {
        pthread_mutex_unlock(&node->lock);
        req_free(req);
        return mf_err_set(err, MF_E_InterruptedAtShutdown, "raft member is closing");
    }
    if (node->role != MF_RAFT_ROLE_LEADER) {
        pthread_mutex_unlock(&node->lock);
        req_free(req);
        return mf_err_set(err, MF_E_NotWritablePrimary, "not primary");
    }
    if (node->tail)
        node->tail->next = req;
    else
        node->head = req;
    node->tail = req;
    uv_async_send(&node->async); /* under the lock: close cannot slip in between */
    pthread_mutex_unlock(&node->lock);
    return 0;
}

static req_t *
req_new(mf_raft_node_t *node, req_kind_t kind, mf_raft_done_fn done, void *arg)
{
    req_t *req = mf_calloc(1, sizeof(*req));
    req->kind = kind;
    req->node = node;
    req->done = done;
    req->arg = arg;
    return req;
}

/* ---- public API ---- */

mf_raft_node_t *
mf_raft_node_open(const mf_raft_node_opts_t *opts, mf_error_t *err)
{
    if (!opts || opts->id == 0 || !opts->address || !opts->dir || !opts->loop || !opts->apply) {
        mf_err_set(err, MF_E_BadValue, "raft member needs an id > 0, an address, a directory, a loop and apply");
        return NULL;
    }
    mf_raft_node_t *node = mf_calloc(1, sizeof(*node));
    node->loop = opts->loop;
    node->id = opts->id;
    node->address = mf_strdup(opts->address);
    node->dir = mf_strdup(opts->dir);
    node->apply = opts->apply;
    node->snapshot = opts->snapshot;
    node->restore = opts->restore;
    node->on_state = opts->on_state;
    node->arg = opts->arg;
    pthread_mutex_init(&node->lock, NULL);

    int rv = uv_async_init(node->loop, &node->async, async_cb);
    if (rv != 0) {
        mf_err_set(err, MF_E_InternalError, "raft member: uv_async_init: %s", uv_strerror(rv));
        node_free(node);
        return NULL;
    }
    node->async.data = node;
    uv_timer_init(node->loop, &node->timer);
    node->timer.data = node;
    node->handles_open = 2;

    mf_raft_transport_opts_t topts = {.loop = node->loop, .key = opts->key, .admit = opts->admit,
                                      .admit_arg = opts->admit_arg, .handshake_ms = opts->handshake_ms};
    rv = mf_raft_transport_init(&node->transport, &topts);
    if (rv != 0) {
        raft_err(err, rv, "transport");
        goto err_close_handles;
    }
    rv = raft_uv_init(&node->io, node->loop, node->dir, &node->transport);
    if (rv != 0) {
        raft_err(err, rv, "libuv I/O");
        goto err_close_transport;
    }
    node->fsm.version = 1;
    node->fsm.data = node;
    node->fsm.apply = fsm_apply;
    node->fsm.snapshot = fsm_snapshot;
    node->fsm.restore = fsm_restore;
    rv = raft_init(&node->raft, &node->io, &node->fsm, node->id, node->address);
    if (rv != 0) {
        mf_err_set(err, MF_E_InternalError, "raft: init: %s%s%s", raft_strerror(rv),
                   *raft_errmsg(&node->raft) ? ": " : "", raft_errmsg(&node->raft));
        goto err_close_io;
    }
    node->raft.data = node;
    node->raft_inited = true;
    if (opts->election_timeout_ms)
        raft_set_election_timeout(&node->raft, opts->election_timeout_ms);
    if (opts->heartbeat_timeout_ms)
        raft_set_heartbeat_timeout(&node->raft, opts->heartbeat_timeout_ms);
    /*
     * Pre-vote (MongoDB's dry-run election): a member that timed out asks
     * first whether it could win, and only then bumps the term. Without it
     * a restarted member, which hears nothing while the leader's reconnect
     * backs off (longer than an election timeout), stood for election with
     * a higher term and deposed a healthy leader: about 1 s without a
     * primary, writes in flight lost.
     */
    raft_set_pre_vote(&node->raft, true);
    /* Without a snapshot callback raft must never ask for one (see raft_node.h). */
    raft_set_snapshot_threshold(&node->raft, opts->snapshot == NULL ? UINT_MAX
                                             : opts->snapshot_threshold ? opts->snapshot_threshold : 1024);
    if (opts->snapshot != NULL && opts->snapshot_trailing)
        raft_set_snapshot_trailing(&node->raft, opts->snapshot_trailing);
    return node;

err_close_io:
    raft_uv_close(&node->io);
err_close_transport:
    mf_raft_transport_release(&node->transport);
err_close_handles:
    /* The handles close on the loop's next run, which then frees the node. */
    node->raft_closed = true;
    uv_close((uv_handle_t *)&node->timer, handle_closed_cb);
    uv_close((uv_handle_t *)&node->async, handle_closed_cb);
    return NULL;
}

int
mf_raft_node_bootstrap(mf_raft_node_t *node, const mf_raft_server_t *servers, size_t n, mf_error_t *err)
{
    struct raft_configuration conf;
    int rv = 0;
    raft_configuration_init(&conf);
    for (size_t i = 0; i < n && rv == 0; i++)
        rv = raft_configuration_add(&conf, servers[i].id, servers[i].address, RAFT_VOTER);
    if (rv != 0) {
        raft_configuration_close(&conf);
        return raft_err(err, rv, "bootstrap configuration");
    }
    rv = raft_bootstrap(&node->raft, &conf);
    raft_configuration_close(&conf);
    if (rv != 0)
        return raft_err(err, rv, "bootstrap");
    return 0;
}

int
mf_raft_node_start(mf_raft_node_t *node, mf_error_t *err)
{
    if (node->started)
        return mf_err_set(err, MF_E_IllegalOperation, "raft member already started");
    int rv = raft_start(&node->raft);
    if (rv != 0)
        return mf_err_set(err, MF_E_InternalError, "raft: start on %s: %s%s%s", node->address, raft_strerror(rv),
                          *raft_errmsg(&node->raft) ? ": " : "", raft_errmsg(&node->raft));
    node->started = true;
    uv_timer_start(&node->timer, timer_cb, STATE_POLL_MS, STATE_POLL_MS);
    return 0;
}

int
mf_raft_node_submit(mf_raft_node_t *node, const void *payload, size_t len, mf_raft_done_fn done, void *arg,
                    mf_error_t *err)
{
    if (len > UINT32_MAX - 2 * ENTRY_HEADER)
        return mf_err_set(err, MF_E_BadValue, "raft entry of %zu bytes is too large", len);
    size_t total = ENTRY_HEADER + ((len + 7) & ~(size_t)7);
    uint8_t *p = raft_malloc(total);
    if (!p)
        return mf_err_set(err, MF_E_InternalError, "raft entry: out of memory");
    put_u32le(p, ENTRY_MAGIC);
    put_u32le(p + 4, (uint32_t)len);
    if (len)
        memcpy(p + ENTRY_HEADER, payload, len);
    memset(p + ENTRY_HEADER + len, 0, total - ENTRY_HEADER - len);
    req_t *req = req_new(node, REQ_SUBMIT, done, arg);
    req->buf.base = p;
    req->buf.len = total;
    return enqueue(node, req, err);
}

/* What submit_wait waits on, on the waiting thread's stack. */
typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    uint64_t index;
    mf_error_t err;
} waiter_t;

static void
waiter_done(void *arg, uint64_t index, const mf_error_t *err)
{
    waiter_t *w = arg;
    pthread_mutex_lock(&w->lock);
    w->index = index;
    if (err)
        w->err = *err;
    w->done = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int
mf_raft_node_submit_wait(mf_raft_node_t *node, const void *payload, size_t len, uint64_t *index, mf_error_t *err)
{
    waiter_t w = {.done = false};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    int rc = mf_raft_node_submit(node, payload, len, waiter_done, &w, err);
    if (rc == 0) {
        pthread_mutex_lock(&w.lock);
        while (!w.done)
            pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        if (w.err.code != 0) {
            if (err)
                *err = w.err;
            rc = -1;
        } else if (index) {
            *index = w.index;
        }
    }
    pthread_cond_destroy(&w.cond);
    pthread_mutex_destroy(&w.lock);
    return rc;
}

int
mf_raft_node_add_voter(mf_raft_node_t *node, uint64_t id, const char *address, mf_raft_done_fn done, void *arg,
                       mf_error_t *err)
{
    if (id == 0 || !address)
        return mf_err_set(err, MF_E_BadValue, "a raft member needs an id > 0 and an address");
    req_t *req = req_new(node, REQ_ADD_VOTER, done, arg);
    req->id = id;
    req->address = mf_strdup(address);
    return enqueue(node, req, err);
}

int
mf_raft_node_remove(mf_raft_node_t *node, uint64_t id, mf_raft_done_fn done, void *arg, mf_error_t *err)
{
    req_t *req = req_new(node, REQ_REMOVE, done, arg);
    req->id = id;
    return enqueue(node, req, err);
}

int
mf_raft_node_transfer(mf_raft_node_t *node, uint64_t id, mf_raft_done_fn done, void *arg, mf_error_t *err)
{
    req_t *req = req_new(node, REQ_TRANSFER, done, arg);
    req->id = id;
    return enqueue(node, req, err);
}

void
mf_raft_node_progress(mf_raft_node_t *node, uint64_t *term, uint64_t *commit_index)
{
    pthread_mutex_lock(&node->lock);
    if (term)
        *term = node->term;
    if (commit_index)
        *commit_index = node->commit_index;
    pthread_mutex_unlock(&node->lock);
}

int
mf_raft_node_replicated(mf_raft_node_t *node, uint64_t index)
{
    pthread_mutex_lock(&node->lock);
    int n = 0;
    if (node->role == MF_RAFT_ROLE_LEADER) {
        n = 1;
        for (unsigned i = 0; i < node->nmatch; i++)
            n += node->match[i] >= index;
    }
    pthread_mutex_unlock(&node->lock);
    return n;
}

void
mf_raft_node_watch(mf_raft_node_t *node, bool on)
{
    pthread_mutex_lock(&node->lock);
    node->watchers += on ? 1 : -1;
    if (on && node->watchers == 1 && !node->closing)
        uv_async_send(&node->async); /* the loop switches to fast polls now, not at its next 20 ms tick */
    pthread_mutex_unlock(&node->lock);
}

bool
mf_raft_node_leader(mf_raft_node_t *node, uint64_t *id, char *address, size_t size)
{
    pthread_mutex_lock(&node->lock);
    uint64_t lid = node->leader_id;
    if (id)
        *id = lid;
    if (address && size > 0) {
        const char *a = node->leader_address ? node->leader_address : "";
        size_t n = strlen(a) < size - 1 ? strlen(a) : size - 1;
        memcpy(address, a, n);
        address[n] = '\0';
    }
    pthread_mutex_unlock(&node->lock);
    return lid != 0;
}

mf_raft_role_t
mf_raft_node_state(mf_raft_node_t *node)
{
    pthread_mutex_lock(&node->lock);
    mf_raft_role_t role = node->role;
    pthread_mutex_unlock(&node->lock);
    return role;
}

void
mf_raft_node_close(mf_raft_node_t *node, mf_raft_close_fn cb, void *arg)
{
    pthread_mutex_lock(&node->lock);
    if (!node->closing) {
        node->closing = true;
        node->close_cb = cb;
        node->close_arg = arg;
        uv_async_send(&node->async);
    }
    pthread_mutex_unlock(&node->lock);
}
