/*
 * repl.c: the replica-set member (see repl.h for the model).
 *
 * Entries. Each raft entry is a BSON document
 *     {k: "ops"|"ddl"|"noop"|"config", m: <origin raft id>, e: <origin's
 *      process epoch>, s: <origin's sequence number>, t: <term>, w: <wall ms>,
 *      o: <oplog entry {ops: [...]}> | cfg: <replica-set config>}
 * m/e/s name the entry's writer: the applier recognises the entries this
 * process submitted and hands them back to their writers instead of
 * applying them a second time.
 *
 * The writer's turn. A primary's writer (oplog prepare step, inside its
 * WiredTiger transaction) registers a waiter, submits, and sleeps. The
 * applier takes committed entries in log order; for a waiter's entry it
 * sets W_TURN and sleeps until the writer has recorded the applied index
 * in its transaction and committed (W_DONE) or failed (W_FAILED: the
 * applier then applies the entry itself). So local commits follow log
 * order exactly, the applied index moves with the data, and an entry whose
 * writer gave up (time-out, lost primary role) is still applied if raft
 * commits it. A writer holds its collection's lock while it waits, so the
 * applier never takes a catalog lock for an entry of this process (its
 * local.oplog.rs and config writes go to other threads).
 *
 * Becoming writable. A new leader first commits a no-op entry of its own
 * (drain): once the applier reaches it, everything earlier leaders
 * committed is applied here, and only then does hello say
 * isWritablePrimary and the TTL monitor resume.
 *
 * Locks: r->mu guards everything shared (role, config, waiters, queues,
 * applied optime, member states); r->cv signals changes of any of it.
 */
#include "repl/repl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/limits.h"
#include "common/clock.h"
#include "common/curop.h"
#include "common/fds.h"
#include "common/log.h"
#include "doc/match.h"
#include "doc/project.h"
#include "doc/value.h"
#include "repl/oplog.h"
#include "repl/peer.h"
#include "repl/raft_node.h"
#include "ttl/ttl.h"

#define MAX_MEMBERS 50
#define HEARTBEAT_MS 1000
#define PEER_TIMEOUT_MS 2000
#define TAKEOVER_FRESH_MS 2000   /* priorityTakeoverFreshnessWindowSeconds */
#define ELECTION_TIMEOUT_MS 500 /* replElectionTimeoutMillis's default */
#define APPLIED_URI "table:mf_repl_applied"
#define DDL_WAIT_MS 30000

/* MongoDB's member states. */
enum { ST_STARTUP = 0, ST_PRIMARY = 1, ST_SECONDARY = 2, ST_RECOVERING = 3, ST_STARTUP2 = 5, ST_UNKNOWN = 6,
       ST_REMOVED = 10 };

static const char *
state_str(int st)
{
    switch (st) {
    case ST_PRIMARY:
        return "PRIMARY";
    case ST_SECONDARY:
        return "SECONDARY";
    case ST_RECOVERING:
        return "RECOVERING";
    case ST_REMOVED:
        return "REMOVED";
    case ST_STARTUP:
        return "STARTUP";
    case ST_STARTUP2:
        return "STARTUP2";
    default:
        return "UNKNOWN";
    }
}

typedef enum { W_WAITING, W_TURN, W_DONE, W_FAILED, W_APPLIED } wstate_t;

/* A writer waiting for its entry (doc writes: its turn; DDL: its application). */
typedef struct waiter {
    struct waiter *next;
    struct mf_repl *r;
    uint64_t seq;
    bool has_deadline; /* the writer waits until a wtimeout */
    pthread_cond_t cv; /* the writer sleeps on it (a waiter for doc writes; DDL waiters use r->cv) */
    bool ddl;
    wstate_t state;
    uint64_t index, term;
    int64_t wall;
    uint64_t op_ts; /* a DDL entry's last oplog timestamp (ts_pack), set with W_APPLIED */
    mf_error_t err; /* the submit's failure, if any */
    bool failed;
} waiter_t;

/* A committed entry on its way to the applier, or an applied one to local.oplog.rs. */
typedef struct qent {
    struct qent *next;
    uint64_t index;
    uint32_t ts_secs, ts_inc; /* oplog writer: the first op's timestamp */
    size_t len;
    uint8_t data[];
} qent_t;

typedef struct member {
    int id;
    char host[256];
    /* from the config */
    double priority; /* 0: never primary (hidden and arbiter members too) */
    bool hidden;     /* left out of hello's hosts */
    bool arbiter;    /* arbiterOnly: listed in hello's arbiters (it holds the data all the same) */
    bool delayed;    /* secondaryDelaySecs > 0: left out of hello's lists (not delayed here) */
    /* from heartbeats (self: from this process) */
    int health; /* -1 not yet known, 0 down, 1 up */
    int state;
    int64_t last_hb_ms, last_ok_ms, ping_ms, up_since_ms;
    uint64_t applied_index, applied_term;
    int64_t applied_wall;
    uint32_t ts_secs, ts_inc;
    bool frozen; /* replSetStepDown's or replSetFreeze's seconds, or priority 0 */
    char msg[160];
} member_t;

struct mf_repl {
    mf_engine_t *eng;
    char set_name[128], bind_ip[128], raft_dir[1100];
    int port, raft_port;
    int64_t oplog_size;
    int64_t epoch;
    char *key;   /* the keyFile's key: members authenticate to each other with it (NULL: no keyFile) */
    mf_peer_sec_t sec; /* key and TLS for the connections to the other members */

    pthread_mutex_t mu;
    /* Held (never under mu) by whoever hands the primary role over: a step-down, or heartbeat_main. */
    pthread_mutex_t transfer_mu;
    int64_t hand_over_logged_ms; /* heartbeat_main's last logged hand-over failure (transfer_mu) */
    /*
     * Condition variables, all under mu, each woken only for its own
     * sleepers (one shared one woke every writer on every entry): cv for
     * the rare state changes (applied index, role, config) that DDL waiters
     * and reconfig wait on; work_cv for the applier (its queue, a writer's
     * commit); oplog_cv for the local.oplog.rs thread; stop_cv for the
     * heartbeat and initial-sync sleeps. Each writer has its own (waiter_t).
     */
    pthread_cond_t cv, work_cv, oplog_cv, stop_cv;
    /* The raft index of the last commit notice (notice_done) committed and applied here. */
    uint64_t notice_index;
    /*
     * Retryable writes in flight, by session id (under mu): a second
     * attempt of a session's write waits on sess_cv for the first to end,
     * then finds its row and is answered from it, as mongod's session
     * checkout makes it wait (hook_command_begin).
     */
    pthread_cond_t sess_cv;
    uint8_t (*busy_ids)[16];
    size_t nbusy, capbusy;
    bool stop;
    bool apply_halted; /* an entry's application (or its wait for file descriptors) was cut by shutdown: apply nothing more (a restart redoes it) */

    /* config (NULL until initiated) */
    bson_t *config;
    int64_t config_version;
    member_t members[MAX_MEMBERS];
    int nmembers, self; /* self: index in members, -1 when not in the config */

    /* raft */
    uv_loop_t loop;
    bool loop_inited;
    pthread_t loop_thread;
    bool loop_running;
    mf_raft_node_t *node;
    mf_raft_role_t role;
    uint64_t leader_id, term;
    int64_t elected_ms; /* when this member last became primary (wall clock), 0 never: rs.status()'s electionDate */
    bool writable;
    uint64_t drain_seq;
    uint64_t next_seq;
    waiter_t *waiters;
    int64_t frozen_until_ms;

    /* applier */
    pthread_t applier;
    qent_t *qhead, *qtail;
    uint64_t applied_index, applied_term;
    int64_t applied_wall, last_wall;
    uint32_t ts_secs, ts_inc;
    uint64_t cluster_ts; /* the highest cluster time handed out or gossiped here (ts_pack), r->mu */
    uint64_t acked_ts;   /* the latest operationTime a write's reply here carried (ts_pack), r->mu */
    bool syncing; /* an initial sync is copying the primary's data (STARTUP2) */
    uint64_t oplog_written; /* the raft index of the newest entry in local.oplog.rs (read at open) */

    /* local.oplog.rs writer, config persistence, heartbeats */
    pthread_t oplog_thread, hb_thread;
    qent_t *ohead, *otail;
    bson_t *config_to_save;
    bool threads_started;

    mf_oplog_t *oplog;
    int64_t started_ms;

    /*
     * serverStatus figures (hook_stats), relaxed atomics: the operations
     * the applier applied for other members' entries (opcountersRepl:
     * inserts, updates, deletes, commands), retried retryable writes
     * answered from their session rows and the statements they held
     * (transactions.retriedCommandsCount / retriedStatementsCount), and
     * the session rows written (transactionsCollectionWriteCount).
     */
    _Atomic int64_t st_applied[4];
    _Atomic int64_t st_retried_cmds, st_retried_stmts, st_sess_writes;
};

static waiter_t *
waiter_new(struct mf_repl *r)
{
    waiter_t *w = mf_calloc(1, sizeof(*w));
    w->r = r;
    mf_cond_init_mono(&w->cv);
    return w;
}

static void
waiter_free(waiter_t *w)
{
    pthread_cond_destroy(&w->cv);
    free(w);
}

static _Thread_local bool tls_applying;       /* this thread applies entries: its writes are not logged */
static _Thread_local int64_t tls_wtimeout;    /* the command's wtimeout (ms), 0 none */
static _Thread_local waiter_t *tls_ddl_waiter; /* the last DDL entry this thread's command logged */
/*
 * The timestamp (secs, inc) of the last oplog document this thread's
 * command wrote, 0 when none: its reply's operationTime is at least this,
 * so a causally consistent read elsewhere (afterClusterTime) waits for it.
 * Computed at the entry's turn (prepare), when every entry before it has
 * been stamped, exactly as stamp_ts will stamp it.
 */
static _Thread_local uint64_t tls_op_ts;
/* The raft index of the last entry this thread's command wrote (0 none): what a w above a majority waits for. */
static _Thread_local uint64_t tls_last_index;

/* A Timestamp (secs, inc) as one comparable number. */
static uint64_t
ts_pack(uint32_t secs, uint32_t inc)
{
    return ((uint64_t)secs << 32) | inc;
}

/*
 * Retryable writes: the insert, update or delete command this thread runs
 * with lsid and txnNumber. Each entry it logs carries x: {id, txn, i, u, d}
 * (the statements' ops so far), and every member stores that row, keyed by
 * the session id, with the entry's data (SESSIONS_URI). A retry of the same
 * txnNumber (a driver resending after a failover) is answered from the row
 * instead of running again, on whichever member is primary by then. A
 * findAndModify's row also keeps f: {k: the op it logged ("d", "u", "i"),
 * v: the document its reply returned before projection (the pre-image for
 * a remove or new: false, the post-image for new: true, the inserted
 * document for an upsert), post: whether v is the post-image, up: an
 * upsert's _id}, from which its retry's reply is rebuilt as mongod rebuilds
 * it from its oplog's pre- and post-images (write_ops_retryability.cpp).
 */
typedef struct {
    bool active;
    bool busy;      /* id is in r->busy_ids: released by hook_command_end */
    bool fam;       /* a findAndModify: the row keeps f (above) */
    bool fam_new;   /* its new: true (v is the post-image) */
    bool upd1;      /* an update of one statement: the row keeps an upsert's _id (uid) for the retry's reply */
    bool commit;    /* a multi-document transaction's commitTransaction: the row says it committed (c) */
    uint8_t id[16];
    int64_t txn;
    int64_t ops[3]; /* inserts, updates, deletes logged so far (count_ops) */
    /*
     * Statement tracking of an insert, update or delete (hook_stmt), so a
     * retry re-runs what did not write (mongod re-runs the statements its
     * oplog does not show). The row keeps s and e: every statement below s
     * was done (wrote, or ran and had nothing to write) except those in e,
     * which failed without writing; eo: more failed than e can list.
     * kind: 'i', 'u' or 'd' (0: untracked, the row keeps counts only).
     * A retry runs e's statements and those from s on (resume), so its
     * statements go in that order: prior_e, then prior_s onwards. kind 'b'
     * (bulkWrite) tells its ops apart the same way: an update's or delete's
     * by MF_STMT_BEGIN, a run of inserts by MF_STMT_BEGIN_INSERTS (run_*);
     * the row also keeps up, the inserts its updates made (upserts).
     */
    char kind;
    int64_t cur;       /* an update's or delete's statement running now (MF_STMT_BEGIN), -1 none */
    bool ins_run;      /* a bulkWrite's run of inserts: from run_base, ops[0] was run_ops0, nfailed_all run_failed0 */
    int64_t run_base, run_ops0, run_failed0;
    int64_t upserts;   /* a bulkWrite's inserts made by its updates, so far (with a retry's prior ones) */
    int64_t prior_s;   /* a retry: its first attempts' s, e and inserts; 0 / none / 0 otherwise */
    int64_t prior_e[MF_STMT_RESUME_MAX];
    int nprior_e;
    int64_t prior_i;
    int64_t failed[MF_STMT_RESUME_MAX]; /* statements this run found failed (MF_STMT_FAILED) */
    int nfailed;
    int64_t nfailed_all; /* all of them, past the list's room too */
} sess_t;
static _Thread_local sess_t tls_sess;
/* The ops (inserts, updates, deletes) of this thread's command whose replication outlived its wtimeout. */
static _Thread_local int64_t tls_wto[3];
#define SESSIONS_URI "table:mf_repl_sessions"


/* ---------- small helpers ---------- */

static mf_client_t *
internal_client(mf_client_t *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->remote, sizeof(c->remote), "replication");
    c->helloed = true;
    c->internal = true;
    return c;
}

static uint64_t
raft_id_of(int member_id)
{
    return (uint64_t)member_id + 1;
}

/* The member state of this process (r->mu held). */
static int
self_state(const mf_repl_t *r)
{
    if (r->config == NULL)
        return ST_STARTUP;
    if (r->self < 0)
        return ST_REMOVED;
    if (r->syncing)
        return ST_STARTUP2;
    if (r->writable)
        return ST_PRIMARY;
    if (r->role == MF_RAFT_ROLE_FOLLOWER || r->role == MF_RAFT_ROLE_LEADER || r->role == MF_RAFT_ROLE_CANDIDATE)
        return ST_SECONDARY;
    return ST_STARTUP;
}

/*
 * Whether this member may not be primary now (r->mu held): priority 0 (hidden
 * members too), or frozen by replSetStepDown's or replSetFreeze's seconds.
 */
static bool
self_frozen(const mf_repl_t *r)
{
    return (r->self >= 0 && r->members[r->self].priority == 0) || r->frozen_until_ms > mf_mono_ms();
}

/* The member index of raft server id (r->mu held), or -1. */
static int
member_of_raft(const mf_repl_t *r, uint64_t id)
{
    for (int i = 0; i < r->nmembers; i++)
        if (raft_id_of(r->members[i].id) == id)
            return i;
    return -1;
}

static void
append_optime(bson_t *b, const char *key, uint32_t secs, uint32_t inc, uint64_t term)
{
    bson_t o;
    BSON_APPEND_DOCUMENT_BEGIN(b, key, &o);
    BSON_APPEND_TIMESTAMP(&o, "ts", secs, inc);
    BSON_APPEND_INT64(&o, "t", (int64_t)term);
    bson_append_document_end(b, &o);
}

/* electionId: MongoDB's ObjectId 7fffffff + the term as 8 bytes, so later terms compare greater. */
static void
election_id(uint64_t term, bson_oid_t *oid)
{
    uint8_t *b = oid->bytes;
    b[0] = 0x7f;
    b[1] = b[2] = b[3] = 0xff;
    for (int i = 0; i < 8; i++)
        b[4 + i] = (uint8_t)(term >> (56 - 8 * i));
}

/* Whether host "name:port" names this process (its client port on a local name). */
static bool
host_is_me(const mf_repl_t *r, const char *host)
{
    char name[256], hn[256] = "";
    int port;
    if (mf_peer_split_host(host, name, sizeof(name), &port) != 0 || port != r->port)
        return false;
    gethostname(hn, sizeof(hn) - 1);
    return strcmp(name, "127.0.0.1") == 0 || strcmp(name, "localhost") == 0 || strcmp(name, "::1") == 0 ||
           strcmp(name, hn) == 0 || strcmp(name, r->bind_ip) == 0;
}

/* ---------- the config ---------- */

/*
 * Checks a replica-set config as MongoDB does (93 InvalidReplicaSetConfig)
 * and fills members (ids and hosts). Returns 0, or -1 with err.
 */
static int
parse_config(mf_repl_t *r, const bson_t *cfg, member_t *members, int *n, int64_t *version, mf_error_t *err)
{
    bson_iter_t it, mi, f;
    bool have_id = false, have_members = false;
    *n = 0;
    *version = 1;
    if (!bson_iter_init(&it, cfg))
        return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "invalid replica set config");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field '_id' is the wrong type, expected type 'string'");
            if (strcmp(bson_iter_utf8(&it, NULL), r->set_name) != 0)
                return mf_err_set(err, MF_E_InvalidReplicaSetConfig,
                                  "Attempting to initiate a replica set with name %s, but command line reports %s; "
                                  "rejecting", bson_iter_utf8(&it, NULL), r->set_name);
            have_id = true;
        } else if (strcmp(k, "version") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&it) || bson_iter_as_int64(&it) < 1)
                return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "version field value must be a positive number");
            *version = bson_iter_as_int64(&it);
        } else if (strcmp(k, "members") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'members' is the wrong type, expected type 'array'");
            have_members = true;
            bson_iter_recurse(&it, &mi);
            while (bson_iter_next(&mi)) {
                if (*n == MAX_MEMBERS)
                    return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "Replica set configuration contains %d "
                                      "members, but must have at most %d members.", *n + 1, MAX_MEMBERS);
                member_t *m = &members[*n];
                memset(m, 0, sizeof(*m));
                m->id = -1;
                m->priority = -1; /* not given: 1, or 0 for an arbiter */
                bool voter = true, build_indexes = true;
                if (!BSON_ITER_HOLDS_DOCUMENT(&mi))
                    return mf_err_set(err, MF_E_TypeMismatch, "a member must be an object");
                bson_iter_recurse(&mi, &f);
                while (bson_iter_next(&f)) {
                    const char *fk = bson_iter_key(&f);
                    if (strcmp(fk, "_id") == 0 && BSON_ITER_HOLDS_NUMBER(&f)) {
                        m->id = (int)bson_iter_as_int64(&f);
                    } else if (strcmp(fk, "host") == 0 && BSON_ITER_HOLDS_UTF8(&f)) {
                        snprintf(m->host, sizeof(m->host), "%s", bson_iter_utf8(&f, NULL));
                    } else if (strcmp(fk, "priority") == 0 || strcmp(fk, "votes") == 0 ||
                               strcmp(fk, "secondaryDelaySecs") == 0) {
                        if (!BSON_ITER_HOLDS_NUMBER(&f))
                            return mf_err_set(err, MF_E_TypeMismatch, "BSON field 'MemberConfig.%s' is the wrong type "
                                              "'%s', expected types '[long, int, decimal, double]'", fk,
                                              mf_type_name(bson_iter_type(&f)));
                        double v = bson_iter_as_double(&f);
                        if (fk[0] == 'p') {
                            if (!(v >= 0 && v <= 1000)) /* mongod's IDL validator */
                                return mf_err_set(err, MF_E_Location51024, "BSON field 'MemberConfig.priority' value "
                                                  "must be %s, actual value '%g'", v < 0 ? ">= 0" : "<= 1000", v);
                            m->priority = v;
                        } else if (fk[0] == 'v') {
                            if (v != 0 && v != 1)
                                return mf_err_set(err, MF_E_BadValue, "votes field value is %g. If set, it must be "
                                                  "0 or 1", v);
                            voter = v != 0; /* raft makes every member a voter; votes: 0 only rules out priority */
                        } else {
                            if (v < 0)
                                return mf_err_set(err, MF_E_BadValue, "secondaryDelaySecs field value of %g seconds "
                                                  "is out of range", v);
                            m->delayed = v > 0; /* accepted; secondaries apply at once */
                        }
                    } else if (strcmp(fk, "hidden") == 0 || strcmp(fk, "buildIndexes") == 0) {
                        bool v = bson_iter_as_bool(&f);
                        if (fk[0] == 'h')
                            m->hidden = v;
                        else
                            build_indexes = v;
                    } else if (strcmp(fk, "arbiterOnly") == 0) {
                        m->arbiter = bson_iter_as_bool(&f); /* never primary; it holds the data all the same */
                    } else if (strcmp(fk, "tags") == 0) {
                        continue; /* accepted */
                    } else {
                        return mf_err_set(err, MF_E_Location40415, "BSON field 'MemberConfig.%s' is an unknown field.", fk);
                    }
                }
                if (m->id < 0 || m->id > 255)
                    return mf_err_set(err, MF_E_BadValue, "_id field value of %d is out of range (0-255)", m->id);
                if (m->priority < 0)
                    m->priority = m->arbiter ? 0 : 1;
                if (m->arbiter && m->priority != 0)
                    return mf_err_set(err, MF_E_BadValue, "priority must be 0 when arbiterOnly=true");
                /* mongod's MemberConfig: what may become primary must be a visible, undelayed, indexed voter. */
                if (m->priority != 0) {
                    const char *why = !voter ? "when non-voting (votes:0)"
                                    : m->delayed ? "when secondaryDelaySecs is used"
                                    : m->hidden ? "when hidden=true"
                                    : !build_indexes ? "when buildIndexes=false" : NULL;
                    if (why)
                        return mf_err_set(err, MF_E_BadValue, "priority must be 0 %s", why);
                }
                char name[256];
                int port;
                if (m->host[0] == '\0' || mf_peer_split_host(m->host, name, sizeof(name), &port) != 0)
                    return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "member %d needs a host of the form name:port", m->id);
                for (int j = 0; j < *n; j++) {
                    if (members[j].id == m->id)
                        return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "Found two member configurations with "
                                          "same _id field, members.%d._id == members.%d._id == %d", j, *n, m->id);
                    if (strcmp(members[j].host, m->host) == 0)
                        return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "Found two member configurations with "
                                          "same host field, members.%d.host == members.%d.host == %s", j, *n, m->host);
                }
                m->health = -1;
                (*n)++;
            }
        } else if (strcmp(k, "term") == 0 || strcmp(k, "protocolVersion") == 0 || strcmp(k, "settings") == 0 ||
                   strcmp(k, "writeConcernMajorityJournalDefault") == 0 || strcmp(k, "configsvr") == 0 ||
                   strcmp(k, "replicaSetId") == 0) {
            continue;
        } else {
            return mf_err_set(err, MF_E_Location40415, "BSON field 'ReplSetConfig.%s' is an unknown field.", k);
        }
    }
    if (!have_id)
        return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "Missing expected field \"_id\"");
    if (!have_members || *n == 0)
        return mf_err_set(err, MF_E_InvalidReplicaSetConfig, "Replica set configuration must contain at least one member");
    bool electable = false;
    for (int i = 0; i < *n; i++)
        electable = electable || members[i].priority > 0;
    if (!electable)
        return mf_err_set(err, MF_E_BadValue, "Replica set configuration must contain at least one non-arbiter member "
                          "with priority > 0");
    return 0;
}

/* Allowed, but worth a warning (as mongod's startup warnings): an even number of voters. */
static void
warn_even(const mf_repl_t *r, int n)
{
    if (n % 2 == 0)
        mf_log(MF_LOG_WARN, "REPL", "replica set %s has an even number of voters (%d): an odd number survives the "
               "same failures with one member fewer", r->set_name, n);
}

/* Installs cfg as the current config (r->mu held). */
static void
install_config(mf_repl_t *r, const bson_t *cfg, const member_t *members, int n, int64_t version)
{
    member_t old[MAX_MEMBERS];
    int nold = r->nmembers;
    memcpy(old, r->members, sizeof(old));
    if (r->config)
        bson_destroy(r->config);
    r->config = bson_copy(cfg);
    r->config_version = version;
    r->nmembers = n;
    r->self = -1;
    for (int i = 0; i < n; i++) {
        r->members[i] = members[i];
        for (int j = 0; j < nold; j++) /* keep what heartbeats learned */
            if (old[j].id == members[i].id && strcmp(old[j].host, members[i].host) == 0) {
                r->members[i] = old[j];
                r->members[i].priority = members[i].priority;
                r->members[i].hidden = members[i].hidden;
                r->members[i].arbiter = members[i].arbiter;
                r->members[i].delayed = members[i].delayed;
            }
        if (host_is_me(r, members[i].host))
            r->self = i;
    }
}

/* Writes cfg to local.system.replset (replacing any earlier one). Not on the applier (see the header). */
static int
save_config(mf_repl_t *r, const bson_t *cfg, mf_error_t *err)
{
    bson_t cmd, ups, u, q;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "update", "system.replset");
    BSON_APPEND_ARRAY_BEGIN(&cmd, "updates", &ups);
    BSON_APPEND_DOCUMENT_BEGIN(&ups, "0", &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "q", &q);
    bson_append_document_end(&u, &q);
    BSON_APPEND_DOCUMENT(&u, "u", cfg);
    BSON_APPEND_BOOL(&u, "upsert", true);
    bson_append_document_end(&ups, &u);
    bson_append_array_end(&cmd, &ups);
    if (!r->eng->in_memory) {
        /* Durable before it counts; an in-memory server has no journal (and refuses j: true). */
        bson_t wc;
        BSON_APPEND_DOCUMENT_BEGIN(&cmd, "writeConcern", &wc);
        BSON_APPEND_BOOL(&wc, "j", true);
        bson_append_document_end(&cmd, &wc);
    }
    int rc = mf_oplog_run(r->eng, "local", &cmd, NULL, err);
    bson_destroy(&cmd);
    return rc;
}

/*
 * fds_pause: after TooManyFilesOpen (264), waits 100 ms for the storage to
 * close idle tables (storage_wt.c, "Open files"); false once the set is
 * stopping. A plain sleep in steps, so that no condition variable's signal
 * meant for another thread is taken. Any repl thread.
 */
static bool
fds_pause(mf_repl_t *r)
{
    for (int i = 0; i < 2; i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&r->mu);
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            return false;
    }
    return true;
}

/*
 * run_local_find: runs the find cmd on local into reply (initialised here;
 * caller destroys), waiting out TooManyFilesOpen for up to a minute: at
 * start-up the TTL monitor's first reads may hold every descriptor for a
 * moment, and a refused read must not pass for "nothing stored".
 */
static void
run_local_find(mf_repl_t *r, const bson_t *cmd, bson_t *reply)
{
    mf_client_t ic;
    bson_iter_t it;
    for (int waited = 0;; waited += 100) {
        bson_init(reply);
        mf_cmd_run(r->eng, internal_client(&ic), "local", cmd, NULL, 0, false, reply);
        if (!bson_iter_init_find(&it, reply, "code") || bson_iter_as_int64(&it) != MF_E_TooManyFilesOpen ||
            waited >= 60000 || !fds_pause(r))
            return;
        bson_destroy(reply);
    }
}

/* The stored config of this set, or NULL (caller destroys). */
static bson_t *
load_config(mf_repl_t *r)
{
    bson_t cmd, reply;
    bson_iter_t it, b, d;
    bson_t *cfg = NULL;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "find", "system.replset");
    BSON_APPEND_INT32(&cmd, "limit", 1);
    run_local_find(r, &cmd, &reply);
    if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.firstBatch", &b) &&
        BSON_ITER_HOLDS_ARRAY(&b) && bson_iter_recurse(&b, &d) && bson_iter_next(&d) && BSON_ITER_HOLDS_DOCUMENT(&d)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&d, &len, &data);
        cfg = bson_new_from_data(data, len);
    }
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return cfg;
}

/* ---------- the applied index (stored with the data) ---------- */

/*
 * Records entry index as applied, in s's open transaction (or in one of its
 * own when none is open). One row per index, so writers in consecutive
 * turns never update the same row (their snapshots would conflict).
 */
static int
record_applied(mf_sess_t *s, uint64_t index, uint64_t term, int64_t wall, const bson_t *x, mf_error_t *err)
{
    bool own_txn = !mf_txn_active(s);
    mf_cur_t *c;
    bson_t v;
    bson_iter_t it;
    if (own_txn && mf_txn_begin(s, err) != 0)
        return -1;
    if (x != NULL && bson_iter_init_find(&it, x, "id") && BSON_ITER_HOLDS_BINARY(&it)) {
        /* The retryable write's session row goes in with the data. */
        const uint8_t *id;
        uint32_t idlen;
        bson_subtype_t st;
        bson_iter_binary(&it, &st, &idlen, &id);
        if (mf_cur_open(s, SESSIONS_URI, &c, err) != 0)
            goto fail;
        int sret = mf_cur_put_bytes(c, id, idlen, bson_get_data(x), x->len);
        mf_cur_close(c);
        if (sret != 0) {
            mf_err_set(err, MF_E_WriteConflict, "recording a retryable write failed");
            goto fail;
        }
    }
    if (mf_cur_open(s, APPLIED_URI, &c, err) != 0)
        goto fail;
    bson_init(&v);
    BSON_APPEND_INT64(&v, "t", (int64_t)term);
    BSON_APPEND_DATE_TIME(&v, "w", wall);
    int ret = mf_cur_insert_rid(c, (int64_t)index, bson_get_data(&v), v.len);
    /* Every 1,000 entries, forget rows far behind (only the newest is ever read). */
    if (ret == 0 && index % 1000 == 0 && index > 2000) {
        /* The prune 1,000 entries ago left nothing below index - 2000: start there, not at the table's start. */
        for (int rr = mf_cur_seek_rid_ge(c, (int64_t)index - 2000); rr == 0 && mf_cur_rid(c) < (int64_t)index - 1000;
             rr = mf_cur_next(c))
            (void)mf_cur_remove_rid(c, mf_cur_rid(c));
    }
    mf_cur_close(c);
    bson_destroy(&v);
    if (ret != 0 && ret != MF_DUPKEY) {
        mf_err_set(err, MF_E_WriteConflict, "recording the applied raft index %llu failed", (unsigned long long)index);
        goto fail;
    }
    if (own_txn && mf_txn_commit(s, false, err) != 0)
        return -1;
    return 0;
fail:
    if (own_txn)
        mf_txn_abort(s);
    return -1;
}

/* Reads the newest applied index into r (at open). */
static void
load_applied(mf_repl_t *r)
{
    mf_sess_t *s = mf_storage_session(r->eng->st);
    mf_cur_t *c;
    mf_error_t err;
    if (mf_storage_create(s, APPLIED_URI, "key_format=q,value_format=u", &err) != 0)
        mf_log(MF_LOG_ERROR, "REPL", "cannot create %s: %s", APPLIED_URI, err.msg);
    if (mf_storage_create(s, SESSIONS_URI, "key_format=u,value_format=u", &err) != 0)
        mf_log(MF_LOG_ERROR, "REPL", "cannot create %s: %s", SESSIONS_URI, err.msg);
    if (mf_cur_open(s, APPLIED_URI, &c, &err) == 0) {
        if (mf_cur_prev(c) == 0) {
            const uint8_t *val;
            size_t len;
            bson_t v;
            bson_iter_t it;
            r->applied_index = (uint64_t)mf_cur_rid(c);
            mf_cur_value(c, &val, &len);
            if (bson_init_static(&v, val, len)) {
                if (bson_iter_init_find(&it, &v, "t"))
                    r->applied_term = (uint64_t)bson_iter_as_int64(&it);
                if (bson_iter_init_find(&it, &v, "w") && BSON_ITER_HOLDS_DATE_TIME(&it))
                    r->applied_wall = r->last_wall = bson_iter_date_time(&it);
            }
            r->ts_secs = (uint32_t)(r->applied_wall / 1000);
            r->ts_inc = 1u << 20; /* later than any op of that second before the restart */
        }
        mf_cur_close(c);
    }
    mf_storage_session_release(s);
}

/* ---------- raft callbacks (loop thread) ---------- */

static void
wake_waiters_failed(mf_repl_t *r, int code, const char *msg)
{
    for (waiter_t *w = r->waiters; w; w = w->next) {
        /*
         * A writer with a wtimeout waits on through a role change: its entry
         * may still commit under the next leader (then it commits too), and
         * if not, its wtimeout answers (64), as the client asked.
         */
        if (w->has_deadline && code == MF_E_InterruptedDueToReplStateChange)
            continue;
        if (w->state == W_WAITING && !w->failed) {
            w->failed = true;
            mf_err_set(&w->err, code, "%s", msg);
            if (!w->ddl)
                pthread_cond_signal(&w->cv);
        }
    }
}

/* Appends q to the FIFO head/tail (one of r's queues) and wakes its thread (cv). */
static void
qpush(mf_repl_t *r, qent_t **head, qent_t **tail, qent_t *q, pthread_cond_t *cv)
{
    q->next = NULL;
    pthread_mutex_lock(&r->mu);
    if (*tail)
        (*tail)->next = q;
    else
        *head = q;
    *tail = q;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(&r->mu);
}

static int
on_apply(void *arg, uint64_t index, const void *payload, size_t len)
{
    mf_repl_t *r = arg;
    qent_t *q = mf_malloc(sizeof(*q) + len);
    q->index = index;
    q->len = len;
    memcpy(q->data, payload, len);
    qpush(r, &r->qhead, &r->qtail, q, &r->work_cv);
    return 0;
}

/* A raft snapshot's payload: a marker of the index (the data is copied by initial sync, not shipped by raft). */
static int
on_snapshot(void *arg, uint64_t index, void **payload, size_t *len)
{
    mf_repl_t *r = arg;
    bson_t m;
    pthread_mutex_lock(&r->mu);
    uint64_t term = r->term;
    int64_t wall = r->last_wall;
    pthread_mutex_unlock(&r->mu);
    bson_init(&m);
    BSON_APPEND_UTF8(&m, "k", "restore");
    BSON_APPEND_INT64(&m, "i", (int64_t)index);
    BSON_APPEND_INT64(&m, "t", (int64_t)term);
    BSON_APPEND_DATE_TIME(&m, "w", wall);
    *len = m.len;
    *payload = mf_malloc(m.len);
    memcpy(*payload, bson_get_data(&m), m.len);
    bson_destroy(&m);
    mf_log(MF_LOG_INFO, "REPL", "raft snapshot at index %llu: the log before it is truncated", (unsigned long long)index);
    return 0;
}

/* A snapshot to start from: queued for the applier like an entry at the snapshot's index. */
static int
on_restore(void *arg, const void *payload, size_t len)
{
    bson_t m;
    bson_iter_t it;
    if (!bson_init_static(&m, payload, len) || !bson_iter_init_find(&it, &m, "i"))
        return -1;
    return on_apply(arg, (uint64_t)bson_iter_as_int64(&it), payload, len);
}

static void submit_noop(mf_repl_t *r, uint64_t seq, uint64_t term);

static void
on_state(void *arg, mf_raft_role_t role, uint64_t leader_id, const char *leader_address)
{
    mf_repl_t *r = arg;
    uint64_t term = 0, seq = 0;
    bool lost, won;
    pthread_mutex_lock(&r->mu);
    mf_raft_node_t *node = r->node; /* NULL once mf_repl_close has begun: raft may still report a role then */
    pthread_mutex_unlock(&r->mu);
    if (node != NULL)
        mf_raft_node_progress(node, &term, NULL);
    pthread_mutex_lock(&r->mu);
    if (node == NULL)
        term = r->term;
    lost = r->role == MF_RAFT_ROLE_LEADER && role != MF_RAFT_ROLE_LEADER;
    won = r->role != MF_RAFT_ROLE_LEADER && role == MF_RAFT_ROLE_LEADER;
    r->role = role;
    r->leader_id = leader_id;
    r->term = term;
    if (lost || won) {
        r->writable = false;
        wake_waiters_failed(r, MF_E_InterruptedDueToReplStateChange, "operation was interrupted because a node "
                            "stepped down from primary");
    }
    if (won) {
        r->drain_seq = seq = ++r->next_seq;
        r->elected_ms = mf_now_ms();
    }
    pthread_cond_broadcast(&r->cv);
    pthread_cond_signal(&r->stop_cv); /* a heartbeat round now: replSetGetStatus shows the new roles */
    pthread_mutex_unlock(&r->mu);
    if (lost || won)
        mf_ttl_monitor_pause(r->eng->ttl, "this replica-set member is not primary");
    if (won) {
        mf_log(MF_LOG_INFO, "REPL", "elected primary of %s in term %llu; applying what earlier primaries committed",
               r->set_name, (unsigned long long)term);
        submit_noop(r, seq, term);
    }
    mf_engine_topology_changed(r->eng);
}

/* ---------- submitting ---------- */

static void
submit_done(void *arg, uint64_t index, const mf_error_t *err)
{
    (void)arg;
    (void)index;
    (void)err; /* writers learn their entry's fate from the applier or from a role change */
}

/*
 * Builds the payload of an entry of kind k with body (key bkey) and submits
 * it. r->mu held (so the node cannot be closed under it).
 */
static int
submit_entry_cb(mf_repl_t *r, const char *k, const char *bkey, const bson_t *body, const bson_t *x, uint64_t seq,
                uint64_t term, mf_raft_done_fn done, mf_error_t *err)
{
    bson_t p;
    int64_t now = mf_now_ms();
    if (r->node == NULL || r->stop)
        return mf_err_set(err, MF_E_InterruptedAtShutdown, "replication is shutting down");
    if (now <= r->last_wall)
        now = r->last_wall; /* walls never go backwards in the log */
    r->last_wall = now;
    bson_init(&p);
    BSON_APPEND_UTF8(&p, "k", k);
    BSON_APPEND_INT64(&p, "m", (int64_t)raft_id_of(r->self >= 0 ? r->members[r->self].id : 0));
    BSON_APPEND_INT64(&p, "e", r->epoch);
    BSON_APPEND_INT64(&p, "s", (int64_t)seq);
    BSON_APPEND_INT64(&p, "t", (int64_t)term);
    BSON_APPEND_DATE_TIME(&p, "w", now);
    if (body)
        BSON_APPEND_DOCUMENT(&p, bkey, body);
    if (x)
        BSON_APPEND_DOCUMENT(&p, "x", x);
    int rc = mf_raft_node_submit(r->node, bson_get_data(&p), p.len, done, r, err);
    bson_destroy(&p);
    return rc;
}

static int
submit_entry_x(mf_repl_t *r, const char *k, const char *bkey, const bson_t *body, const bson_t *x, uint64_t seq,
               uint64_t term, mf_error_t *err)
{
    return submit_entry_cb(r, k, bkey, body, x, seq, term, submit_done, err);
}

/* A no-op a writer submitted to push the commit index to the followers (hook_wait_members). */
static void
notice_done(void *arg, uint64_t index, const mf_error_t *err)
{
    mf_repl_t *r = arg;
    if (err != NULL)
        return;
    pthread_mutex_lock(&r->mu);
    if (index > r->notice_index)
        r->notice_index = index;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static int
submit_entry(mf_repl_t *r, const char *k, const char *bkey, const bson_t *body, uint64_t seq, uint64_t term,
             mf_error_t *err)
{
    return submit_entry_x(r, k, bkey, body, NULL, seq, term, err);
}

/* Adds entry's inserts, updates and deletes to counts[0..2]. */
static void
count_ops(const bson_t *entry, int64_t counts[3])
{
    bson_iter_t it, a, f;
    if (!bson_iter_init_find(&it, entry, "ops") || !bson_iter_recurse(&it, &a))
        return;
    while (bson_iter_next(&a)) {
        if (bson_iter_recurse(&a, &f) && bson_iter_find(&f, "op") && BSON_ITER_HOLDS_UTF8(&f)) {
            char op = bson_iter_utf8(&f, NULL)[0];
            counts[0] += op == 'i';
            counts[1] += op == 'u';
            counts[2] += op == 'd';
        }
    }
}

/*
 * Adds the operations of body (an entry's oplog entry {ops: [...]}) that the
 * applier applied to serverStatus's opcountersRepl, as mongod counts each
 * applied oplog entry by its op: i, u, d, and c (a command).
 */
static void
count_applied(mf_repl_t *r, const bson_t *body)
{
    static const char kinds[] = "iudc"; /* st_applied's order */
    bson_iter_t it, a, f;
    if (!bson_iter_init_find(&it, body, "ops") || !bson_iter_recurse(&it, &a))
        return;
    while (bson_iter_next(&a)) {
        if (!bson_iter_recurse(&a, &f) || !bson_iter_find(&f, "op") || !BSON_ITER_HOLDS_UTF8(&f))
            continue;
        const char *k = strchr(kinds, bson_iter_utf8(&f, NULL)[0]);
        if (k != NULL && *k != '\0')
            atomic_fetch_add_explicit(&r->st_applied[k - kinds], 1, memory_order_relaxed);
    }
}

/*
 * A findAndModify's f (see sess_t) into x, from entry's first op and pre (the
 * document it replaced, NULL when not kept). Nothing when the op is not one
 * a findAndModify writes.
 */
static void
sess_row_fam(const bson_t *entry, const bson_t *pre, bson_t *x)
{
    bson_iter_t it, a, op;
    const char *k = NULL;
    bson_t o = BSON_INITIALIZER, f;
    bool has_o = false;
    if (!bson_iter_init_find(&it, entry, "ops") || !bson_iter_recurse(&it, &a) || !bson_iter_next(&a) ||
        !bson_iter_recurse(&a, &op))
        return;
    while (bson_iter_next(&op)) {
        if (strcmp(bson_iter_key(&op), "op") == 0 && BSON_ITER_HOLDS_UTF8(&op)) {
            k = bson_iter_utf8(&op, NULL);
        } else if (strcmp(bson_iter_key(&op), "o") == 0 && BSON_ITER_HOLDS_DOCUMENT(&op)) {
            const uint8_t *d;
            uint32_t len;
            bson_iter_document(&op, &len, &d);
            has_o = bson_init_static(&o, d, len);
        }
    }
    if (k == NULL || !has_o || (strcmp(k, "d") != 0 && strcmp(k, "u") != 0 && strcmp(k, "i") != 0))
        return;
    /* An upsert's reply shows the inserted document; an update's, the image its new asked for. */
    bool post = k[0] == 'i' || (k[0] == 'u' && tls_sess.fam_new);
    const bson_t *v = post ? &o : pre;
    BSON_APPEND_DOCUMENT_BEGIN(x, "f", &f);
    BSON_APPEND_UTF8(&f, "k", k);
    BSON_APPEND_BOOL(&f, "post", post);
    if (v != NULL)
        BSON_APPEND_DOCUMENT(&f, "v", v);
    if (k[0] == 'i' && bson_iter_init_find(&it, &o, "_id"))
        bson_append_value(&f, "up", 2, bson_iter_value(&it));
    bson_append_document_end(x, &f);
}

/*
 * The retryable-write row for this thread's command after entry (pre: see
 * mf_oplog_prepare_fn): counts its ops into tls_sess; x initialised here.
 */
/*
 * The k-th statement (from 0) this thread's tracked command runs, as an
 * index into its array: a retry runs its first attempts' failed ones, then
 * those from their s on (see sess_t).
 */
static int64_t
stmt_kth(int64_t k)
{
    return k < tls_sess.nprior_e ? tls_sess.prior_e[k] : tls_sess.prior_s + (k - tls_sess.nprior_e);
}

/*
 * A tracked command's s, e and eo into x (see sess_t), as of the entry
 * being logged: the statement it is at (an update's or delete's from
 * MF_STMT_BEGIN; an insert's from its documents inserted and failed so far,
 * each document one op) and everything before it are done, but for the
 * failed ones and the first attempts' failed ones it has not reached.
 */
static void
sess_row_stmts(bson_t *x)
{
    int64_t done = tls_sess.ops[0] - tls_sess.prior_i + tls_sess.nfailed_all; /* an insert's statements run */
    int64_t cur = tls_sess.kind == 'i' ? (done > 0 ? stmt_kth(done - 1) : -1)
                  : tls_sess.ins_run ? tls_sess.run_base + (tls_sess.ops[0] - tls_sess.run_ops0) +
                                           (tls_sess.nfailed_all - tls_sess.run_failed0) - 1
                                     : tls_sess.cur;
    int64_t s = cur + 1 > tls_sess.prior_s ? cur + 1 : tls_sess.prior_s;
    int64_t e[2 * MF_STMT_RESUME_MAX];
    int ne = 0;
    bool over = tls_sess.nfailed_all > tls_sess.nfailed;
    for (int k = 0; k < tls_sess.nfailed; k++)
        e[ne++] = tls_sess.failed[k];
    for (int k = 0; k < tls_sess.nprior_e; k++)
        if (tls_sess.prior_e[k] > cur)
            e[ne++] = tls_sess.prior_e[k];
    BSON_APPEND_INT64(x, "s", s);
    if (ne > MF_STMT_RESUME_MAX)
        over = true;
    if (over) {
        BSON_APPEND_BOOL(x, "eo", true);
    } else if (ne > 0) {
        bson_t arr;
        char key[16];
        const char *k;
        BSON_APPEND_ARRAY_BEGIN(x, "e", &arr);
        for (int j = 0; j < ne; j++) {
            bson_uint32_to_string((uint32_t)j, &k, key, sizeof(key));
            BSON_APPEND_INT64(&arr, k, e[j]);
        }
        bson_append_array_end(x, &arr);
    }
}

static void
sess_row(const bson_t *entry, const bson_t *pre, bson_t *x)
{
    int64_t inserts0 = tls_sess.ops[0];
    count_ops(entry, tls_sess.ops);
    if (tls_sess.kind == 'b' && !tls_sess.ins_run)
        tls_sess.upserts += tls_sess.ops[0] - inserts0; /* a bulkWrite update's inserts: upserts */
    bson_init(x);
    BSON_APPEND_BINARY(x, "id", BSON_SUBTYPE_UUID, tls_sess.id, 16);
    BSON_APPEND_INT64(x, "txn", tls_sess.txn);
    BSON_APPEND_INT64(x, "i", tls_sess.ops[0]);
    BSON_APPEND_INT64(x, "u", tls_sess.ops[1]);
    BSON_APPEND_INT64(x, "d", tls_sess.ops[2]);
    if (tls_sess.kind != 0)
        sess_row_stmts(x);
    if (tls_sess.kind == 'b')
        BSON_APPEND_INT64(x, "up", tls_sess.upserts);
    if (tls_sess.commit)
        BSON_APPEND_BOOL(x, "c", true);
    if (tls_sess.fam)
        sess_row_fam(entry, pre, x);
    bson_iter_t it, a, f, o;
    if (tls_sess.upd1 && bson_iter_init_find(&it, entry, "ops") && bson_iter_recurse(&it, &a)) {
        /* The upsert's insert: its _id answers the retry's upserted (mongod reads it from the oplog). */
        while (bson_iter_next(&a)) {
            if (!bson_iter_recurse(&a, &f) || !bson_iter_find(&f, "op") || !BSON_ITER_HOLDS_UTF8(&f) ||
                strcmp(bson_iter_utf8(&f, NULL), "i") != 0)
                continue;
            if (bson_iter_recurse(&a, &f) && bson_iter_find(&f, "o") && BSON_ITER_HOLDS_DOCUMENT(&f) &&
                bson_iter_recurse(&f, &o) && bson_iter_find(&o, "_id"))
                bson_append_value(x, "uid", 3, bson_iter_value(&o));
            break;
        }
    }
}

static void
submit_noop(mf_repl_t *r, uint64_t seq, uint64_t term)
{
    mf_error_t err;
    pthread_mutex_lock(&r->mu);
    int rc = submit_entry(r, "noop", NULL, NULL, seq, term, &err);
    pthread_mutex_unlock(&r->mu);
    if (rc != 0)
        mf_log(MF_LOG_WARN, "REPL", "cannot log the new primary's no-op: %s", err.msg);
}

static void
waiter_unlink(mf_repl_t *r, waiter_t *w)
{
    for (waiter_t **p = &r->waiters; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            return;
        }
    }
}

/* After the writer's commit: tell the applier (which frees the waiter). */
static void
writer_committed(void *arg, bool committed)
{
    waiter_t *w = arg;
    mf_repl_t *r = w->r;
    pthread_mutex_lock(&r->mu);
    w->state = committed ? W_DONE : W_FAILED;
    pthread_cond_signal(&r->work_cv);
    pthread_mutex_unlock(&r->mu);
}

/*
 * Sleeps on cv (r->mu held) until woken or deadline_ms (monotonic; 0: no
 * deadline). Returns false without sleeping once the deadline has passed.
 */
static bool
wait_until(mf_repl_t *r, pthread_cond_t *cv, int64_t deadline_ms)
{
    if (deadline_ms == 0) {
        pthread_cond_wait(cv, &r->mu);
        return true;
    }
    int64_t left = deadline_ms - mf_mono_ms();
    if (left <= 0)
        return false;
    struct timespec ts = mf_mono_deadline(left);
    pthread_cond_timedwait(cv, &r->mu, &ts);
    return true;
}

/*
 * The oplog's prepare step (writer thread, inside its transaction): logs
 * the entry and waits for its turn (see the header comment).
 */
static int
prepare(void *arg, const bson_t *entry, const bson_t *pre, mf_sess_t *s, mf_error_t *err)
{
    mf_repl_t *r = arg;
    if (tls_applying)
        return 0;
    pthread_mutex_lock(&r->mu);
    if (!r->writable) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NotWritablePrimary, "not primary");
    }
    waiter_t *w = waiter_new(r);
    w->seq = ++r->next_seq;
    w->has_deadline = tls_wtimeout > 0;
    w->next = r->waiters;
    r->waiters = w;
    bson_t x;
    bool has_x = tls_sess.active;
    if (has_x)
        sess_row(entry, pre, &x);
    int rc = submit_entry_x(r, "ops", "o", entry, has_x ? &x : NULL, w->seq, r->term, err);
    int64_t deadline = tls_wtimeout > 0 ? mf_mono_ms() + tls_wtimeout : 0;
    if (rc != 0)
        goto give_up;
    /* Wakes at least every 100 ms to honour killOp, maxTimeMS and shutdown (the operation's own checks). */
    mf_error_t ierr = {0};
    bool interrupted = false;
    while (w->state == W_WAITING && !w->failed && !r->stop) {
        int64_t now = mf_mono_ms(), step = now + 100;
        if (deadline != 0 && deadline <= now)
            break;
        wait_until(r, &w->cv, deadline != 0 && deadline < step ? deadline : step);
        if (w->state == W_WAITING && mf_curop_check_current(&ierr) != 0) {
            interrupted = true;
            break;
        }
    }
    if (w->state != W_TURN) {
        if (w->failed)
            *err = w->err;
        else if (r->stop)
            mf_err_set(err, MF_E_InterruptedAtShutdown, "interrupted at shutdown");
        else if (interrupted)
            *err = ierr;
        else {
            mf_err_set(err, MF_E_WriteConcernFailed, "waiting for replication timed out");
            count_ops(entry, tls_wto);
        }
        goto give_up;
    }
    uint64_t index = w->index, wterm = w->term;
    int64_t wall = w->wall;
    if (index > tls_last_index)
        tls_last_index = index;
    {
        /* The timestamp stamp_ts gives this entry's last document (every entry before it is stamped now). */
        bson_iter_t oi, oa;
        uint32_t secs = (uint32_t)(wall / 1000), n = 0;
        if (bson_iter_init_find(&oi, entry, "ops") && bson_iter_recurse(&oi, &oa))
            while (bson_iter_next(&oa))
                n++;
        if (n == 0)
            n = 1; /* as ops_in */
        uint64_t last = secs > r->ts_secs ? ts_pack(secs, n) : ts_pack(r->ts_secs, r->ts_inc + n);
        if (last > tls_op_ts)
            tls_op_ts = last;
    }
    pthread_mutex_unlock(&r->mu);
    /* Our turn: the applied index goes in with the data; the applier waits for the commit. */
    int rrc = record_applied(s, index, wterm, wall, has_x ? &x : NULL, err);
    if (has_x)
        bson_destroy(&x);
    if (rrc == 0 && has_x)
        atomic_fetch_add_explicit(&r->st_sess_writes, 1, memory_order_relaxed);
    if (rrc == 0 && !mf_txn_on_end(s, writer_committed, w))
        rrc = mf_err_set(err, MF_E_InternalError, "replication: commit callback already registered");
    if (rrc != 0)
        writer_committed(w, false); /* the turn failed: the applier applies the entry itself */
    return rrc;

give_up:
    /* r->mu held. If raft commits the entry anyway, the applier applies it. */
    waiter_unlink(r, w);
    pthread_mutex_unlock(&r->mu);
    waiter_free(w);
    if (has_x)
        bson_destroy(&x);
    return -1;
}

/*
 * A DDL waiter its command no longer waits for (r->mu held): freed now if
 * its entry was applied (or failed), else left for the applier to free.
 */
static void
ddl_waiter_release(mf_repl_t *r, waiter_t *w)
{
    if (w->state == W_APPLIED || w->failed) {
        waiter_unlink(r, w);
        waiter_free(w);
    } else {
        w->ddl = false;
        w->state = W_DONE;
    }
}

/* The DDL sink: the catalog change has committed; log it now and let the command wait at its end. */
static void
ddl_sink(void *arg, const bson_t *entry)
{
    mf_repl_t *r = arg;
    mf_error_t err;
    if (tls_applying)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->node == NULL || r->role != MF_RAFT_ROLE_LEADER) {
        pthread_mutex_unlock(&r->mu);
        mf_log(MF_LOG_ERROR, "REPL", "a DDL change committed on a member that is not primary; not replicated");
        return;
    }
    waiter_t *w = waiter_new(r);
    w->seq = ++r->next_seq;
    w->ddl = true;
    w->next = r->waiters;
    r->waiters = w;
    int rc = submit_entry(r, "ddl", "o", entry, w->seq, r->term, &err);
    if (rc != 0)
        waiter_unlink(r, w);
    pthread_mutex_unlock(&r->mu);
    if (rc != 0) {
        waiter_free(w);
        mf_log(MF_LOG_ERROR, "REPL", "cannot log a DDL change: %s", err.msg);
        return;
    }
    if (tls_ddl_waiter != NULL) {
        /* A command with several DDL changes waits for its last one only (log order). */
        pthread_mutex_lock(&r->mu);
        ddl_waiter_release(r, tls_ddl_waiter);
        pthread_mutex_unlock(&r->mu);
    }
    tls_ddl_waiter = w;
}

/* ---------- the applier ---------- */

typedef struct {
    const char *k;
    uint64_t m, s, t;
    int64_t e, w;
    bson_t body;
    bool has_body;
    bson_t x;
    bool has_x;
} payload_t;

static int
parse_payload(const qent_t *q, payload_t *p)
{
    bson_t b;
    bson_iter_t it;
    memset(p, 0, sizeof(*p));
    p->k = "";
    if (!bson_init_static(&b, q->data, q->len) || !bson_iter_init(&it, &b))
        return -1;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "k") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            p->k = bson_iter_utf8(&it, NULL);
        else if (strcmp(k, "m") == 0)
            p->m = (uint64_t)bson_iter_as_int64(&it);
        else if (strcmp(k, "e") == 0)
            p->e = bson_iter_as_int64(&it);
        else if (strcmp(k, "s") == 0)
            p->s = (uint64_t)bson_iter_as_int64(&it);
        else if (strcmp(k, "t") == 0)
            p->t = (uint64_t)bson_iter_as_int64(&it);
        else if (strcmp(k, "w") == 0 && BSON_ITER_HOLDS_DATE_TIME(&it))
            p->w = bson_iter_date_time(&it);
        else if ((strcmp(k, "o") == 0 || strcmp(k, "cfg") == 0) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&it, &l, &d);
            p->has_body = bson_init_static(&p->body, d, l);
        } else if (strcmp(k, "x") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&it, &l, &d);
            p->has_x = bson_init_static(&p->x, d, l);
        }
    }
    return 0;
}

static waiter_t *
find_waiter(mf_repl_t *r, uint64_t seq)
{
    for (waiter_t *w = r->waiters; w; w = w->next)
        if (w->seq == seq)
            return w;
    return NULL;
}

/* The number of oplog documents an entry makes. */
static uint32_t
ops_in(const payload_t *p)
{
    bson_iter_t it, a;
    uint32_t n = 0;
    if ((strcmp(p->k, "ops") == 0 || strcmp(p->k, "ddl") == 0) && p->has_body &&
        bson_iter_init_find(&it, &p->body, "ops") && bson_iter_recurse(&it, &a)) {
        while (bson_iter_next(&a))
            n++;
    }
    return n ? n : 1;
}

/* The timestamp of entry q's first oplog document, from its wall clock; r->mu held. */
static void
stamp_ts(mf_repl_t *r, qent_t *q, const payload_t *p)
{
    uint32_t secs = (uint32_t)(p->w / 1000);
    if (secs > r->ts_secs) {
        r->ts_secs = secs;
        r->ts_inc = 0;
    }
    q->ts_secs = r->ts_secs;
    q->ts_inc = r->ts_inc + 1;
    r->ts_inc += ops_in(p);
}

/* A config entry: install it now, save it from another thread (see the header comment). */
static void
apply_config(mf_repl_t *r, const payload_t *p)
{
    member_t members[MAX_MEMBERS];
    int n;
    int64_t version;
    mf_error_t err;
    if (!p->has_body || parse_config(r, &p->body, members, &n, &version, &err) != 0) {
        mf_log(MF_LOG_ERROR, "REPL", "ignoring a malformed config entry");
        return;
    }
    pthread_mutex_lock(&r->mu);
    install_config(r, &p->body, members, n, version);
    if (r->config_to_save)
        bson_destroy(r->config_to_save);
    r->config_to_save = bson_copy(&p->body);
    pthread_cond_signal(&r->oplog_cv);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    mf_log(MF_LOG_INFO, "REPL", "replica set config version %lld installed", (long long)version);
    mf_engine_topology_changed(r->eng);
}

/* ---------- initial sync (a snapshot this member does not hold) ---------- */

/* Calls fn on every document a cursor command cmd on db at host returns (firstBatch, then getMores). */
static int
remote_each(const char *host, const mf_peer_sec_t *sec, const char *db, const bson_t *cmd, int (*fn)(void *arg, const bson_t *doc), void *arg,
            mf_error_t *err)
{
    bson_t reply, more;
    bson_iter_t it, b, d;
    int64_t id = 0;
    char coll[256] = "";
    int rc = 0;
    if (mf_peer_call(host, db, cmd, sec, 30000, &reply, err) != 0)
        return -1;
    for (;;) {
        if (!bson_iter_init_find(&it, &reply, "ok") || bson_iter_as_double(&it) != 1.0) {
            rc = mf_err_set(err, MF_E_CommandFailed, "initial sync: a read from %s failed", host);
            break;
        }
        bson_iter_init(&it, &reply);
        if (bson_iter_find_descendant(&it, "cursor.id", &b))
            id = bson_iter_as_int64(&b);
        bson_iter_init(&it, &reply);
        if (coll[0] == '\0' && bson_iter_find_descendant(&it, "cursor.ns", &b) && BSON_ITER_HOLDS_UTF8(&b)) {
            const char *ns = strchr(bson_iter_utf8(&b, NULL), '.');
            snprintf(coll, sizeof(coll), "%s", ns ? ns + 1 : "");
        }
        bson_iter_init(&it, &reply);
        if ((bson_iter_find_descendant(&it, "cursor.firstBatch", &b) ||
             (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.nextBatch", &b))) &&
            bson_iter_recurse(&b, &d)) {
            while (rc == 0 && bson_iter_next(&d)) {
                const uint8_t *data;
                uint32_t len;
                bson_t doc;
                if (!BSON_ITER_HOLDS_DOCUMENT(&d))
                    continue;
                bson_iter_document(&d, &len, &data);
                if (bson_init_static(&doc, data, len))
                    rc = fn(arg, &doc);
            }
        }
        bson_destroy(&reply);
        if (rc != 0 || id == 0)
            return rc;
        bson_init(&more);
        BSON_APPEND_INT64(&more, "getMore", id);
        BSON_APPEND_UTF8(&more, "collection", coll);
        int prc = mf_peer_call(host, db, &more, sec, 30000, &reply, err);
        bson_destroy(&more);
        if (prc != 0)
            return -1;
    }
    bson_destroy(&reply);
    return rc;
}

typedef struct {
    mf_repl_t *r;
    const char *host;
    char db[128];
    bson_t batch, docs; /* documents being copied (docs open inside batch) */
    uint32_t ndocs;
    const char *coll;
    mf_error_t err;
} sync_ctx_t;

static void
batch_begin(sync_ctx_t *sc)
{
    bson_init(&sc->batch);
    BSON_APPEND_UTF8(&sc->batch, "insert", sc->coll);
    BSON_APPEND_BOOL(&sc->batch, "bypassDocumentValidation", true);
    BSON_APPEND_ARRAY_BEGIN(&sc->batch, "documents", &sc->docs);
    sc->ndocs = 0;
}

static int
batch_flush(sync_ctx_t *sc)
{
    bson_append_array_end(&sc->batch, &sc->docs);
    int rc = sc->ndocs > 0 ? mf_oplog_run(sc->r->eng, sc->db, &sc->batch, NULL, &sc->err) : 0;
    bson_destroy(&sc->batch);
    return rc;
}

static int
copy_doc(void *arg, const bson_t *doc)
{
    sync_ctx_t *sc = arg;
    char key[16];
    const char *kp;
    if (sc->ndocs >= 1000 || sc->batch.len + doc->len > 8 * 1024 * 1024) {
        if (batch_flush(sc) != 0)
            return -1;
        batch_begin(sc);
    }
    bson_uint32_to_string(sc->ndocs++, &kp, key, sizeof(key));
    bson_append_document(&sc->docs, kp, -1, doc);
    return sc->r->stop ? -1 : 0;
}

/* One collection (or view) listed by listCollections: create it, copy its documents and indexes. */
static int
copy_collection(void *arg, const bson_t *info)
{
    static const int exists[] = {MF_E_NamespaceExists, 0};
    static const int ix_ok[] = {MF_E_IndexOptionsConflict, MF_E_IndexKeySpecsConflict, 0};
    sync_ctx_t *sc = arg;
    bson_iter_t it, o;
    const char *name = bson_iter_init_find(&it, info, "name") && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
    const char *type = bson_iter_init_find(&it, info, "type") && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL)
                                                                                           : "collection";
    if (name == NULL)
        return 0;
    bson_t cmd;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "create", name);
    if (bson_iter_init_find(&it, info, "options") && bson_iter_recurse(&it, &o)) {
        while (bson_iter_next(&o)) {
            if (strcmp(bson_iter_key(&o), "uuid") != 0)
                bson_append_value(&cmd, bson_iter_key(&o), -1, bson_iter_value(&o));
        }
    }
    bson_iter_t ii;
    if (strcmp(type, "collection") == 0 && bson_iter_init_find(&it, info, "info") && bson_iter_recurse(&it, &ii) &&
        bson_iter_find(&ii, "uuid") && BSON_ITER_HOLDS_BINARY(&ii))
        bson_append_value(&cmd, "uuid", 4, bson_iter_value(&ii)); /* the same collection as the primary's */
    int rc = mf_oplog_run(sc->r->eng, sc->db, &cmd, exists, &sc->err);
    bson_destroy(&cmd);
    /* system.views mirrors the views, which this member's catalog writes there as it creates them. */
    if (rc != 0 || strcmp(type, "collection") != 0 || strcmp(name, "system.views") == 0)
        return rc;
    /* The documents. */
    sc->coll = name;
    batch_begin(sc);
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "find", name);
    BSON_APPEND_INT32(&cmd, "batchSize", 5000);
    rc = remote_each(sc->host, &sc->r->sec, sc->db, &cmd, copy_doc, sc, &sc->err);
    bson_destroy(&cmd);
    if (rc == 0)
        rc = batch_flush(sc);
    else
        bson_destroy(&sc->batch);
    if (rc != 0)
        return rc;
    /* The indexes (the _id index exists already). */
    bson_t specs, ci;
    sync_ctx_t ix = {.r = sc->r, .host = sc->host};
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "listIndexes", name);
    /* The document copier's batch collects the index specs. */
    ix.coll = name;
    batch_begin(&ix);
    rc = remote_each(sc->host, &sc->r->sec, sc->db, &cmd, copy_doc, &ix, &sc->err);
    bson_destroy(&cmd);
    bson_append_array_end(&ix.batch, &ix.docs);
    bson_iter_t di, spec;
    uint32_t nspec = 0;
    bson_init(&ci);
    BSON_APPEND_UTF8(&ci, "createIndexes", name);
    BSON_APPEND_ARRAY_BEGIN(&ci, "indexes", &specs);
    if (rc == 0 && bson_iter_init_find(&di, &ix.batch, "documents") && bson_iter_recurse(&di, &spec)) {
        while (bson_iter_next(&spec)) {
            bson_iter_t f;
            char key[16];
            const char *kp;
            bson_t one;
            if (!bson_iter_recurse(&spec, &f) || !bson_iter_find(&f, "name") || !BSON_ITER_HOLDS_UTF8(&f) ||
                strcmp(bson_iter_utf8(&f, NULL), "_id_") == 0)
                continue;
            bson_uint32_to_string(nspec++, &kp, key, sizeof(key));
            bson_append_document_begin(&specs, kp, -1, &one);
            bson_iter_recurse(&spec, &f);
            while (bson_iter_next(&f))
                if (strcmp(bson_iter_key(&f), "ns") != 0)
                    bson_append_value(&one, bson_iter_key(&f), -1, bson_iter_value(&f));
            bson_append_document_end(&specs, &one);
        }
    }
    bson_append_array_end(&ci, &specs);
    if (rc == 0 && nspec > 0)
        rc = mf_oplog_run(sc->r->eng, sc->db, &ci, ix_ok, &sc->err);
    bson_destroy(&ci);
    bson_destroy(&ix.batch);
    return rc;
}

/*
 * peer_ask --
 *     Sends the one-field command {name: 1} to the member at host on admin,
 *     with the peer timeout. reply is initialised here, always, and the caller
 *     destroys it. Returns 0, or -1 with err (an unreachable member, or its
 *     {ok: 0} answer). Called without r->mu: it waits on the network.
 */
static int
peer_ask(mf_repl_t *r, const char *host, const char *name, bson_t *reply, mf_error_t *err)
{
    bson_t cmd;
    bson_init(&cmd);
    BSON_APPEND_INT32(&cmd, name, 1);
    int rc = mf_peer_command(host, &cmd, &r->sec, PEER_TIMEOUT_MS, reply, err);
    bson_destroy(&cmd);
    return rc;
}

/* Replaces every database but local with a copy of host's. Returns 0, or -1 with sc->err. */
static int
clone_from(mf_repl_t *r, const char *host, mf_error_t *err)
{
    sync_ctx_t sc = {.r = r, .host = host};
    bson_t cmd;
    int rc;
    static const int none[] = {MF_E_NamespaceNotFound, 0};

    /* Drop what this member holds. */
    bool dropped_all = true;
    mf_client_t ic;
    bson_t reply;
    bson_init(&cmd);
    BSON_APPEND_INT32(&cmd, "listDatabases", 1);
    BSON_APPEND_BOOL(&cmd, "nameOnly", true);
    bson_init(&reply);
    mf_cmd_run(r->eng, internal_client(&ic), "admin", &cmd, NULL, 0, false, &reply);
    bson_iter_t dbs, one, f;
    if (bson_iter_init_find(&dbs, &reply, "databases") && bson_iter_recurse(&dbs, &one)) {
        while (bson_iter_next(&one)) {
            if (!bson_iter_recurse(&one, &f) || !bson_iter_find(&f, "name") || !BSON_ITER_HOLDS_UTF8(&f) ||
                strcmp(bson_iter_utf8(&f, NULL), "local") == 0)
                continue;
            bson_t drop;
            bson_init(&drop);
            BSON_APPEND_INT32(&drop, "dropDatabase", 1);
            if (mf_oplog_run(r->eng, bson_iter_utf8(&f, NULL), &drop, none, err) != 0)
                dropped_all = false;
            bson_destroy(&drop);
        }
    }
    bson_destroy(&reply);
    if (!dropped_all) {
        bson_destroy(&cmd);
        return -1; /* err says which; the sync is tried again */
    }

    /* Copy the primary's. */
    rc = mf_peer_call(host, "admin", &cmd, &r->sec, 30000, &reply, err);
    bson_destroy(&cmd);
    if (rc != 0)
        return rc;
    uint32_t ndb = 0;
    char dbnames[64][128];
    if (bson_iter_init_find(&dbs, &reply, "databases") && bson_iter_recurse(&dbs, &one)) {
        while (bson_iter_next(&one) && ndb < 64) {
            if (bson_iter_recurse(&one, &f) && bson_iter_find(&f, "name") && BSON_ITER_HOLDS_UTF8(&f) &&
                strcmp(bson_iter_utf8(&f, NULL), "local") != 0)
                snprintf(dbnames[ndb++], sizeof(dbnames[0]), "%.127s", bson_iter_utf8(&f, NULL));
        }
    }
    bson_destroy(&reply);
    for (uint32_t i = 0; i < ndb && rc == 0 && !r->stop; i++) {
        snprintf(sc.db, sizeof(sc.db), "%.127s", dbnames[i]);
        bson_init(&cmd);
        BSON_APPEND_INT32(&cmd, "listCollections", 1);
        rc = remote_each(host, &r->sec, sc.db, &cmd, copy_collection, &sc, err);
        bson_destroy(&cmd);
        if (rc != 0 && sc.err.code != 0)
            *err = sc.err;
        else if (rc == 0)
            mf_log(MF_LOG_INFO, "REPL", "initial sync: database %s copied from %s", sc.db, host);
    }
    if (r->stop)
        rc = mf_err_set(err, MF_E_InterruptedAtShutdown, "initial sync interrupted at shutdown");
    return rc;
}

/*
 * Brings this member to a snapshot at raft index `index` it does not hold:
 * copies the data of the primary once that has applied the index (entries
 * after it follow in the log and are applied on top, idempotently).
 * Retries until it succeeds or the member shuts down.
 */
static void
initial_sync(mf_repl_t *r, mf_sess_t *s, uint64_t index, uint64_t term, int64_t wall)
{
    mf_error_t err;
    mf_log(MF_LOG_INFO, "REPL", "initial sync: this member needs the data up to raft index %llu from the primary",
           (unsigned long long)index);
    pthread_mutex_lock(&r->mu);
    r->syncing = true;
    pthread_mutex_unlock(&r->mu);
    mf_engine_topology_changed(r->eng);
    for (int attempt = 0; !r->stop; attempt++) {
        char host[256] = "";
        if (attempt > 0) {
            pthread_mutex_lock(&r->mu);
            int64_t until = mf_mono_ms() + 500;
            while (!r->stop && wait_until(r, &r->stop_cv, until))
                ;
            pthread_mutex_unlock(&r->mu);
        }
        pthread_mutex_lock(&r->mu);
        int li = member_of_raft(r, r->leader_id);
        if (li >= 0 && li != r->self)
            snprintf(host, sizeof(host), "%s", r->members[li].host);
        pthread_mutex_unlock(&r->mu);
        if (host[0] == '\0')
            continue;
        bson_t reply;
        bson_iter_t it;
        int rc = peer_ask(r, host, "_mfReplInfo", &reply, &err);
        uint64_t theirs = rc == 0 && bson_iter_init_find(&it, &reply, "appliedIndex") ? (uint64_t)bson_iter_as_int64(&it) : 0;
        bool ok = rc == 0 && bson_iter_init_find(&it, &reply, "state") && bson_iter_as_int64(&it) == ST_PRIMARY;
        bson_destroy(&reply);
        if (!ok || theirs < index)
            continue;
        tls_applying = true;
        rc = clone_from(r, host, &err);
        tls_applying = false;
        if (rc != 0) {
            mf_log(MF_LOG_WARN, "REPL", "initial sync from %s failed, retrying: %s", host, err.msg);
            continue;
        }
        if (record_applied(s, index, term, wall, NULL, &err) != 0)
            mf_log(MF_LOG_ERROR, "REPL", "initial sync: recording raft index %llu failed: %s",
                   (unsigned long long)index, err.msg);
        mf_log(MF_LOG_INFO, "REPL", "initial sync from %s done (raft index %llu)", host, (unsigned long long)index);
        break;
    }
    pthread_mutex_lock(&r->mu);
    r->syncing = false;
    pthread_mutex_unlock(&r->mu);
    mf_engine_topology_changed(r->eng);
}

/*
 * apply_body: applies an entry's body (mf_oplog_apply). Running out of file
 * descriptors passes (the storage closes idle tables under that pressure,
 * see storage_wt.c), so TooManyFilesOpen is retried every 100 ms for as
 * long as it lasts, logged once a minute, instead of skipping the entry or
 * stopping; only shutdown ends the wait (then 264 is returned, and
 * apply_one halts as at shutdown). No other error is retried. Applier
 * thread.
 */
static int
apply_body(mf_repl_t *r, mf_sess_t *s, uint64_t index, const bson_t *body, mf_error_t *err)
{
    for (int64_t waited = 0;; waited += 100) {
        tls_applying = true;
        int arc = mf_oplog_apply(r->eng, body, err);
        tls_applying = false;
        if (arc == 0 || err->code != MF_E_TooManyFilesOpen)
            return arc;
        if (waited % 60000 == 0)
            mf_log(MF_LOG_WARN, "REPL", "applying raft entry %llu waits for file descriptors: %s",
                   (unsigned long long)index, err->msg);
        mf_storage_session_release(s);
        if (!fds_pause(r))
            return arc;
    }
}

/* Whether body's ops are all document ops (no DDL), and more than one: applied as one storage transaction. */
static bool
docs_only(const bson_t *body)
{
    bson_iter_t it, a, o;
    int n = 0;
    if (!bson_iter_init_find(&it, body, "ops") || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &a))
        return false;
    while (bson_iter_next(&a)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&a) || !bson_iter_recurse(&a, &o) || !bson_iter_find(&o, "op") ||
            !BSON_ITER_HOLDS_UTF8(&o))
            return false;
        const char *op = bson_iter_utf8(&o, NULL);
        if (strcmp(op, "i") != 0 && strcmp(op, "u") != 0 && strcmp(op, "d") != 0)
            return false;
        n++;
    }
    return n > 1;
}

/*
 * apply_whole: applies an entry of document ops and records it applied in
 * one storage transaction (a user transaction, storage.h: the commands
 * replaying it nest inside), so a reader on this member sees all of a
 * multi-document transaction or none of it, as on mongod's secondaries.
 * Returns 0 (applied and recorded), 1 when shutdown or file descriptors cut
 * it short (nothing applied: *err says which), or -1 when it failed
 * otherwise (nothing applied: the caller applies it op by op as before).
 */
static int
apply_whole(mf_repl_t *r, mf_sess_t *s, qent_t *q, const payload_t *p, mf_error_t *err)
{
    if (mf_txn_user_begin(s, err) != 0)
        return -1;
    int arc = apply_body(r, s, q->index, &p->body, err);
    if (arc != 0) {
        mf_txn_user_abort(s);
        return err->code == MF_E_InterruptedAtShutdown || err->code == MF_E_TooManyFilesOpen ? 1 : -1;
    }
    if (record_applied(s, q->index, p->t, p->w, p->has_x ? &p->x : NULL, err) != 0) {
        mf_txn_user_abort(s);
        return -1;
    }
    tls_applying = true; /* the commit's pre-commit step logs nothing: this member only applies it */
    int crc = mf_txn_user_commit(s, false, err);
    tls_applying = false;
    return crc == 0 ? 0 : -1;
}

/* Applies entry q (unless applied before a restart). Returns true if it was applied now. */
static bool
apply_one(mf_repl_t *r, mf_sess_t *s, qent_t *q)
{
    payload_t p;
    mf_error_t err;
    bool recorded = false;
    if (parse_payload(q, &p) != 0) {
        mf_log(MF_LOG_ERROR, "REPL", "raft entry %llu is not a mayfly entry; skipped", (unsigned long long)q->index);
        return false;
    }
    pthread_mutex_lock(&r->mu);
    if (r->apply_halted) {
        pthread_mutex_unlock(&r->mu);
        return false;
    }
    bool skip = q->index <= r->applied_index;
    uint64_t self_raft = r->self >= 0 ? raft_id_of(r->members[r->self].id) : 0;
    bool own = p.m == self_raft && p.e == r->epoch;
    /*
     * Applied before a restart, but its local.oplog.rs documents were not
     * written yet (that thread trails the data): write them now.
     */
    bool oplog_only = skip && q->index > r->oplog_written && strcmp(p.k, "restore") != 0;
    if (oplog_only)
        stamp_ts(r, q, &p);
    pthread_mutex_unlock(&r->mu);
    if (skip)
        return oplog_only;
    if (strcmp(p.k, "restore") == 0) {
        initial_sync(r, s, q->index, p.t, p.w);
        pthread_mutex_lock(&r->mu);
        r->applied_index = q->index;
        r->applied_term = p.t;
        r->applied_wall = p.w;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        return false;
    }

    if (strcmp(p.k, "ops") == 0 || strcmp(p.k, "ddl") == 0) {
        bool handled = false;
        if (own) {
            pthread_mutex_lock(&r->mu);
            waiter_t *w = find_waiter(r, p.s);
            if (w != NULL && strcmp(p.k, "ops") == 0 && w->state == W_WAITING && !w->failed) {
                w->state = W_TURN;
                w->index = q->index;
                w->term = p.t;
                w->wall = p.w;
                pthread_cond_signal(&w->cv);
                while (w->state == W_TURN)
                    pthread_cond_wait(&r->work_cv, &r->mu);
                handled = w->state == W_DONE;
                recorded = handled;
                waiter_unlink(r, w);
                waiter_free(w);
            } else if (strcmp(p.k, "ddl") == 0) {
                handled = true; /* committed before it was logged */
                if (w != NULL) {
                    if (w->ddl) {
                        /* The timestamp stamp_ts gives it below (every entry before it is stamped). */
                        uint32_t secs = (uint32_t)(p.w / 1000), n = ops_in(&p);
                        w->op_ts = secs > r->ts_secs ? ts_pack(secs, n) : ts_pack(r->ts_secs, r->ts_inc + n);
                        w->state = W_APPLIED;
                    } else {
                        waiter_unlink(r, w);
                        waiter_free(w);
                    }
                }
            }
            pthread_mutex_unlock(&r->mu);
        }
        int whole = !handled && p.has_body && docs_only(&p.body) ? apply_whole(r, s, q, &p, &err) : -1;
        if (whole == 0) {
            recorded = true;
            count_applied(r, &p.body);
            if (p.has_x)
                atomic_fetch_add_explicit(&r->st_sess_writes, 1, memory_order_relaxed);
        } else if (whole < 0 && !handled && p.has_body && docs_only(&p.body)) {
            mf_log(MF_LOG_INFO, "REPL", "raft entry %llu could not be applied in one transaction (%s); applying it "
                   "op by op (a reader here may see part of it meanwhile)", (unsigned long long)q->index, err.msg);
            mf_err_clear(&err);
        }
        if (!handled && p.has_body && whole != 0) {
            int arc = whole == 1 ? -1 : apply_body(r, s, q->index, &p.body, &err);
            bool at_shutdown = arc != 0 && err.code == MF_E_InterruptedAtShutdown;
            if (at_shutdown || (arc != 0 && err.code == MF_E_TooManyFilesOpen)) {
                /*
                 * Shutdown cut this entry short (an index build, a large
                 * batch, or its wait for file descriptors, see apply_body):
                 * it is not recorded as applied and nothing after it is
                 * applied, so the next start applies it again -- its
                 * application tolerates what it already did -- instead of
                 * skipping it for good.
                 */
                pthread_mutex_lock(&r->mu);
                r->apply_halted = true;
                pthread_mutex_unlock(&r->mu);
                if (at_shutdown)
                    mf_log(MF_LOG_INFO, "REPL", "applying raft entry %llu interrupted by shutdown; it is applied again "
                           "at the next start", (unsigned long long)q->index);
                else
                    mf_log(MF_LOG_INFO, "REPL", "applying raft entry %llu stopped waiting for file descriptors at "
                           "shutdown; it is applied again at the next start", (unsigned long long)q->index);
                return false;
            }
            if (arc != 0)
                mf_log(MF_LOG_ERROR, "REPL", "applying raft entry %llu failed: %d %s", (unsigned long long)q->index,
                       err.code, err.msg);
            else
                count_applied(r, &p.body);
        }
    } else if (strcmp(p.k, "config") == 0) {
        apply_config(r, &p);
    }
    if (!recorded && record_applied(s, q->index, p.t, p.w, p.has_x ? &p.x : NULL, &err) != 0)
        mf_log(MF_LOG_ERROR, "REPL", "recording raft entry %llu as applied failed: %s", (unsigned long long)q->index,
               err.msg);
    else if (!recorded && p.has_x)
        atomic_fetch_add_explicit(&r->st_sess_writes, 1, memory_order_relaxed);

    /* The applied optime, and this entry's oplog documents' timestamps. */
    bool drained = false;
    pthread_mutex_lock(&r->mu);
    stamp_ts(r, q, &p);
    r->applied_index = q->index;
    r->applied_term = p.t;
    r->applied_wall = p.w;
    if (p.w > r->last_wall)
        r->last_wall = p.w;
    /* A priority-0 member that won raft's election anyway never takes writes; it hands over (heartbeat_main). */
    if (own && strcmp(p.k, "noop") == 0 && p.s == r->drain_seq && r->role == MF_RAFT_ROLE_LEADER && !r->writable &&
        !(r->self >= 0 && r->members[r->self].priority == 0)) {
        r->writable = true;
        drained = true;
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (drained) {
        mf_log(MF_LOG_INFO, "REPL", "this member is primary of %s and accepts writes", r->set_name);
        mf_ttl_monitor_pause(r->eng->ttl, NULL);
        mf_engine_topology_changed(r->eng);
    }
    return true;
}

static void *
applier_main(void *arg)
{
    mf_repl_t *r = arg;
    mf_sess_t *s = mf_storage_session(r->eng->st);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->stop && r->qhead == NULL)
            pthread_cond_wait(&r->work_cv, &r->mu);
        qent_t *q = r->qhead;
        if (q == NULL) {
            pthread_mutex_unlock(&r->mu);
            break;
        }
        r->qhead = q->next;
        if (r->qhead == NULL)
            r->qtail = NULL;
        pthread_mutex_unlock(&r->mu);
        if (!apply_one(r, s, q)) {
            free(q);
            mf_storage_session_release(s);
            continue;
        }
        qpush(r, &r->ohead, &r->otail, q, &r->oplog_cv); /* on to local.oplog.rs */
        mf_storage_session_release(s);
    }
    mf_storage_session_close_thread(r->eng->st);
    return NULL;
}

/* ---------- local.oplog.rs ---------- */

/*
 * local.oplog.rs documents' _id: the raft index and the op's place in its
 * entry, so the newest _id tells which entry was written last (MongoDB's
 * oplog has no _id; tools ignore it).
 */
#define OPLOG_OPS_BITS MF_OPLOG_OPS_BITS

static int64_t
oplog_id(uint64_t index, uint32_t k)
{
    return (int64_t)(index << OPLOG_OPS_BITS | (k & ((1u << OPLOG_OPS_BITS) - 1)));
}

/* The raft index of the newest document in local.oplog.rs, 0 if none. */
static uint64_t
oplog_newest(mf_repl_t *r)
{
    bson_t cmd, reply, sort;
    bson_iter_t it;
    uint64_t index = 0;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "find", "oplog.rs");
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "sort", &sort);
    BSON_APPEND_INT32(&sort, "_id", -1);
    bson_append_document_end(&cmd, &sort);
    BSON_APPEND_INT32(&cmd, "limit", 1);
    run_local_find(r, &cmd, &reply);
    if (bson_iter_init(&it, &reply) && bson_iter_find_descendant(&it, "cursor.firstBatch.0._id", &it) &&
        BSON_ITER_HOLDS_INT64(&it) && bson_iter_int64(&it) > 0)
        index = (uint64_t)bson_iter_int64(&it) >> OPLOG_OPS_BITS;
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return index;
}

/* Appends the oplog documents of entry q to arr (keys from *n on). */
static void
oplog_docs(const qent_t *q, bson_t *arr, uint32_t *n)
{
    payload_t p;
    char key[16];
    const char *kp;
    bson_t d;
    if (parse_payload(q, &p) != 0)
        return;
    uint32_t inc = q->ts_inc;
    bson_iter_t it, a, f;
    if ((strcmp(p.k, "ops") == 0 || strcmp(p.k, "ddl") == 0) && p.has_body &&
        bson_iter_init_find(&it, &p.body, "ops") && bson_iter_recurse(&it, &a)) {
        while (bson_iter_next(&a)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&a) || !bson_iter_recurse(&a, &f))
                continue;
            /*
             * An update logs its whole new document beside its description
             * (and maybe its old one): past mongod's internal limit for an
             * entry (16 MB + 16 KB) the images give way ("o" empty, no
             * "pre"), as mongod logs an update as its diff alone; a change
             * stream then reports the update's description, and a post- or
             * pre-image as not available.
             */
            uint32_t olen = 0, prelen = 0;
            const uint8_t *odata;
            bool has_diff = false;
            bson_iter_document(&a, &olen, &odata);
            bson_iter_t g = f;
            while (bson_iter_next(&g)) {
                if (strcmp(bson_iter_key(&g), "pre") == 0)
                    prelen = bson_iter_value(&g)->value.v_doc.data_len;
                else if (strcmp(bson_iter_key(&g), "diff") == 0)
                    has_diff = true;
            }
            bool no_pre = olen + 128 > MF_MAX_BSON_INTERNAL_SIZE;
            bool no_post = no_pre && has_diff && olen - prelen + 128 > MF_MAX_BSON_INTERNAL_SIZE;
            bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
            bson_append_document_begin(arr, kp, -1, &d);
            BSON_APPEND_INT64(&d, "_id", oplog_id(q->index, inc - q->ts_inc));
            BSON_APPEND_TIMESTAMP(&d, "ts", q->ts_secs, inc++);
            BSON_APPEND_INT64(&d, "t", (int64_t)p.t);
            BSON_APPEND_INT32(&d, "v", 2);
            while (bson_iter_next(&f)) {
                const char *fk = bson_iter_key(&f);
                if (no_pre && strcmp(fk, "pre") == 0)
                    continue;
                if (no_post && strcmp(fk, "o") == 0) {
                    bson_t empty = BSON_INITIALIZER;
                    BSON_APPEND_DOCUMENT(&d, "o", &empty);
                    continue;
                }
                bson_append_value(&d, fk, -1, bson_iter_value(&f));
            }
            BSON_APPEND_DATE_TIME(&d, "wall", p.w);
            bson_append_document_end(arr, &d);
        }
        return;
    }
    bson_t o;
    bson_uint32_to_string((*n)++, &kp, key, sizeof(key));
    bson_append_document_begin(arr, kp, -1, &d);
    BSON_APPEND_INT64(&d, "_id", oplog_id(q->index, 0));
    BSON_APPEND_TIMESTAMP(&d, "ts", q->ts_secs, inc);
    BSON_APPEND_INT64(&d, "t", (int64_t)p.t);
    BSON_APPEND_INT32(&d, "v", 2);
    BSON_APPEND_UTF8(&d, "op", "n");
    BSON_APPEND_UTF8(&d, "ns", "");
    BSON_APPEND_DOCUMENT_BEGIN(&d, "o", &o);
    BSON_APPEND_UTF8(&o, "msg", strcmp(p.k, "config") == 0 ? "Reconfig set" : "new primary");
    bson_append_document_end(&d, &o);
    BSON_APPEND_DATE_TIME(&d, "wall", p.w);
    bson_append_document_end(arr, &d);
}

static void *
oplog_main(void *arg)
{
    mf_repl_t *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->stop && r->ohead == NULL && r->config_to_save == NULL)
            pthread_cond_wait(&r->oplog_cv, &r->mu);
        qent_t *list = r->ohead;
        r->ohead = r->otail = NULL;
        bson_t *cfg = r->config_to_save;
        r->config_to_save = NULL;
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        mf_error_t err;
        if (cfg != NULL) {
            /* TooManyFilesOpen is waited out (fds_pause) here and below: a config or oplog write is never dropped for it. */
            int rc;
            while ((rc = save_config(r, cfg, &err)) != 0 && err.code == MF_E_TooManyFilesOpen && fds_pause(r))
                ;
            if (rc != 0)
                mf_log(MF_LOG_ERROR, "REPL", "cannot save the replica set config: %s", err.msg);
            bson_destroy(cfg);
        }
        while (list != NULL) {
            /* Up to ~1,000 documents per insert. */
            bson_t cmd, arr;
            uint32_t n = 0;
            bson_init(&cmd);
            BSON_APPEND_UTF8(&cmd, "insert", "oplog.rs");
            BSON_APPEND_ARRAY_BEGIN(&cmd, "documents", &arr);
            while (list != NULL && n < 1000 && arr.len < 8 * 1024 * 1024) {
                qent_t *q = list;
                list = q->next;
                oplog_docs(q, &arr, &n);
                free(q);
            }
            bson_append_array_end(&cmd, &arr);
            int rc = 0;
            while (n > 0 && (rc = mf_oplog_run(r->eng, "local", &cmd, NULL, &err)) != 0 &&
                   err.code == MF_E_TooManyFilesOpen && fds_pause(r))
                ;
            if (rc != 0)
                mf_log(MF_LOG_WARN, "REPL", "writing local.oplog.rs failed: %s", err.msg);
            bson_destroy(&cmd);
        }
        if (stop)
            break;
    }
    mf_storage_session_close_thread(r->eng->st);
    return NULL;
}

/* ---------- heartbeats ---------- */

/*
 * A member that raft no longer includes (removed by a reconfig) never
 * receives the config entry that removed it: it learns the newer config
 * from a heartbeat reply and installs it, so it reports REMOVED.
 */
static void
adopt_newer_config(mf_repl_t *r, const char *host)
{
    bson_t reply;
    bson_iter_t it;
    mf_error_t err;
    member_t members[MAX_MEMBERS];
    int n;
    int64_t version;
    int rc = peer_ask(r, host, "replSetGetConfig", &reply, &err);
    if (rc == 0 && bson_iter_init_find(&it, &reply, "config") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *d;
        uint32_t l;
        bson_t cfg;
        bson_iter_document(&it, &l, &d);
        if (bson_init_static(&cfg, d, l) && parse_config(r, &cfg, members, &n, &version, &err) == 0) {
            pthread_mutex_lock(&r->mu);
            bool newer = version > r->config_version;
            if (newer) {
                install_config(r, &cfg, members, n, version);
                if (r->config_to_save)
                    bson_destroy(r->config_to_save);
                r->config_to_save = bson_copy(&cfg);
                pthread_cond_signal(&r->oplog_cv);
                pthread_cond_broadcast(&r->cv);
            }
            bool removed = r->self < 0;
            pthread_mutex_unlock(&r->mu);
            if (newer) {
                mf_log(MF_LOG_INFO, "REPL", "replica set config version %lld learned from %s%s", (long long)version,
                       host, removed ? ": this member is no longer in the set (REMOVED)" : "");
                mf_engine_topology_changed(r->eng);
            }
        }
    }
    bson_destroy(&reply);
}

/*
 * other_members --
 *     Copies the other members' hosts and ids (and priorities, if prio is not
 *     NULL) of the current config, only those of positive priority if
 *     electable; returns how many. Takes r->mu: the copies outlive it, for
 *     the network calls made without it.
 */
static int
other_members(mf_repl_t *r, bool electable, char hosts[][256], int *ids, double *prio)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->nmembers; i++) {
        if (i == r->self || (electable && r->members[i].priority == 0))
            continue;
        snprintf(hosts[n], 256, "%s", r->members[i].host);
        if (prio != NULL)
            prio[n] = r->members[i].priority;
        ids[n++] = r->members[i].id;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void
heartbeat_round(mf_repl_t *r)
{
    char hosts[MAX_MEMBERS][256];
    char newer_host[256] = "";
    int ids[MAX_MEMBERS];
    int n = other_members(r, false, hosts, ids, NULL);
    for (int i = 0; i < n; i++) {
        bson_t reply;
        bson_iter_t it;
        mf_error_t err;
        int64_t t0 = mf_mono_ms();
        int rc = peer_ask(r, hosts[i], "_mfReplInfo", &reply, &err);
        int64_t ping = mf_mono_ms() - t0;
        pthread_mutex_lock(&r->mu);
        for (int j = 0; j < r->nmembers; j++) {
            member_t *m = &r->members[j];
            if (m->id != ids[i] || strcmp(m->host, hosts[i]) != 0)
                continue;
            m->last_hb_ms = mf_now_ms();
            if (rc != 0) {
                m->health = 0;
                m->state = ST_UNKNOWN;
                m->up_since_ms = 0;
                snprintf(m->msg, sizeof(m->msg), "%.150s", err.msg);
                break;
            }
            if (m->health != 1)
                m->up_since_ms = mf_now_ms();
            m->health = 1;
            m->ping_ms = ping;
            m->last_ok_ms = mf_now_ms();
            m->msg[0] = '\0';
            if (bson_iter_init_find(&it, &reply, "state"))
                m->state = (int)bson_iter_as_int64(&it);
            if (bson_iter_init_find(&it, &reply, "appliedIndex"))
                m->applied_index = (uint64_t)bson_iter_as_int64(&it);
            m->frozen = bson_iter_init_find(&it, &reply, "frozen") && bson_iter_as_bool(&it);
            if (bson_iter_init_find(&it, &reply, "appliedTerm"))
                m->applied_term = (uint64_t)bson_iter_as_int64(&it);
            if (bson_iter_init_find(&it, &reply, "appliedWall") && BSON_ITER_HOLDS_DATE_TIME(&it))
                m->applied_wall = bson_iter_date_time(&it);
            if (bson_iter_init_find(&it, &reply, "ts") && BSON_ITER_HOLDS_TIMESTAMP(&it))
                bson_iter_timestamp(&it, &m->ts_secs, &m->ts_inc);
            if (bson_iter_init_find(&it, &reply, "configVersion") && bson_iter_as_int64(&it) > r->config_version &&
                r->config != NULL)
                snprintf(newer_host, sizeof(newer_host), "%.255s", hosts[i]);
            break;
        }
        pthread_mutex_unlock(&r->mu);
        bson_destroy(&reply);
    }
    if (newer_host[0] != '\0')
        adopt_newer_config(r, newer_host);
}

/*
 * ask_member --
 *     Asks the member at host afresh (heartbeats can be a second old) whether
 *     it may take the primary role: it answers as a secondary and is not
 *     frozen (replSetStepDown's or replSetFreeze's seconds, priority 0). Sets
 *     *applied to its applied raft index. Called without r->mu.
 */
static bool
ask_member(mf_repl_t *r, const char *host, uint64_t *applied)
{
    bson_t reply;
    bson_iter_t it;
    mf_error_t err;
    if (peer_ask(r, host, "_mfReplInfo", &reply, &err) != 0) {
        bson_destroy(&reply);
        return false;
    }
    bool electable = bson_iter_init_find(&it, &reply, "state") && bson_iter_as_int64(&it) == ST_SECONDARY &&
                     !(bson_iter_init_find(&it, &reply, "frozen") && bson_iter_as_bool(&it));
    *applied = bson_iter_init_find(&it, &reply, "appliedIndex") ? (uint64_t)bson_iter_as_int64(&it) : 0;
    bson_destroy(&reply);
    return electable;
}

/*
 * choose_successor --
 *     The raft id of the member a primary should hand over to: among the other
 *     members of positive priority that ask_member finds electable, the most
 *     caught up, then the one of highest priority (a priority takeover moves
 *     the role on later, as in mongod). 0 if none qualifies: raft's own choice
 *     could be a member stepped down a moment ago, which would hand the role
 *     back a heartbeat later, to and fro until both thawed, or a priority-0
 *     member, which never takes writes. Called without r->mu.
 */
static uint64_t
choose_successor(mf_repl_t *r)
{
    char hosts[MAX_MEMBERS][256];
    int ids[MAX_MEMBERS];
    double prio[MAX_MEMBERS], best_prio = 0;
    int n = other_members(r, true, hosts, ids, prio);
    uint64_t best = 0, best_applied = 0;
    for (int i = 0; i < n; i++) {
        uint64_t applied = 0;
        if (!ask_member(r, hosts[i], &applied))
            continue;
        if (best == 0 || applied > best_applied || (applied == best_applied && prio[i] > best_prio)) {
            best = raft_id_of(ids[i]);
            best_applied = applied;
            best_prio = prio[i];
        }
    }
    return best;
}

/*
 * priority_takeover --
 *     On a writable primary (r->mu held): the member index of one of higher
 *     priority that heartbeats show healthy, secondary, not frozen and within
 *     two seconds of this member's writes, to hand the role to, as mongod's
 *     priority takeover; -1 if none. Equal priorities never take over, so
 *     the role cannot go round.
 */
static int
priority_takeover(mf_repl_t *r)
{
    if (!r->writable || r->self < 0)
        return -1;
    int best = -1;
    for (int i = 0; i < r->nmembers; i++) {
        const member_t *m = &r->members[i];
        if (i == r->self || m->priority <= r->members[r->self].priority || m->health != 1 ||
            m->state != ST_SECONDARY || m->frozen || m->applied_wall < r->applied_wall - TAKEOVER_FRESH_MS)
            continue;
        if (best < 0 || m->priority > r->members[best].priority)
            best = i;
    }
    return best;
}

static int change_membership(mf_repl_t *r, uint64_t id, const char *address, bool transfer, mf_error_t *err);

/*
 * hand_over --
 *     heartbeat_main's hand-overs, under r->transfer_mu so that none runs
 *     beside a step-down's: a raft leader that may not be primary (priority
 *     0, or frozen and writable) hands the role to choose_successor's member;
 *     a writable primary hands it to a member of higher priority that still
 *     answers as electable. Every condition is checked again under the lock;
 *     the transfer is waited for. A failure is logged once per minute.
 */
static void
hand_over(mf_repl_t *r)
{
    char host[256] = "";
    uint64_t to = 0, applied = 0;
    double mine = 0, theirs = 0;
    pthread_mutex_lock(&r->transfer_mu);
    pthread_mutex_lock(&r->mu);
    bool frozen_leader = !r->stop && r->role == MF_RAFT_ROLE_LEADER && r->nmembers > 1 && r->self >= 0 &&
                         (r->members[r->self].priority == 0 || (r->writable && self_frozen(r)));
    int t = frozen_leader || r->stop ? -1 : priority_takeover(r);
    if (t >= 0) {
        snprintf(host, sizeof(host), "%s", r->members[t].host);
        to = raft_id_of(r->members[t].id);
        mine = r->members[r->self].priority;
        theirs = r->members[t].priority;
    }
    pthread_mutex_unlock(&r->mu);
    if (frozen_leader)
        to = choose_successor(r);
    else if (to != 0 && !ask_member(r, host, &applied))
        to = 0; /* frozen or gone since its last heartbeat */
    if (to != 0) {
        mf_error_t err;
        if (t >= 0)
            mf_log(MF_LOG_INFO, "REPL", "handing the primary role to %s, of higher priority (%g against %g)", host,
                   theirs, mine);
        if (change_membership(r, to, NULL, true, &err) != 0 && mf_mono_ms() - r->hand_over_logged_ms > 60000) {
            r->hand_over_logged_ms = mf_mono_ms();
            mf_log(MF_LOG_WARN, "REPL", "cannot hand the primary role over: %s", err.msg);
        }
    }
    pthread_mutex_unlock(&r->transfer_mu);
}

static void *
heartbeat_main(void *arg)
{
    mf_repl_t *r = arg;
    heartbeat_round(r);
    for (;;) {
        pthread_mutex_lock(&r->mu);
        int64_t until = mf_mono_ms() + HEARTBEAT_MS;
        if (!r->stop) /* one sleep: a role change wakes it early (on_state) */
            wait_until(r, &r->stop_cv, until);
        bool stop = r->stop;
        bool leading = r->role == MF_RAFT_ROLE_LEADER;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;
        if (leading)
            hand_over(r);
        heartbeat_round(r);
    }
    return NULL;
}

/* ---------- starting raft ---------- */

static void *
loop_main(void *arg)
{
    mf_repl_t *r = arg;
    uv_run(&r->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void
start_threads(mf_repl_t *r)
{
    if (r->threads_started)
        return;
    r->threads_started = true;
    if (pthread_create(&r->applier, NULL, applier_main, r) != 0 ||
        pthread_create(&r->oplog_thread, NULL, oplog_main, r) != 0 ||
        pthread_create(&r->hb_thread, NULL, heartbeat_main, r) != 0) {
        mf_log(MF_LOG_ERROR, "REPL", "cannot start the replication threads");
        abort();
    }
}

/*
 * Opens and starts this member's raft node (bootstrapping it with servers
 * when n > 0), then runs its loop in a thread. Called once per process, from
 * open or from a command thread, with the config installed.
 */
/*
 * The raft port's socket accept check (mf_raft_node_opts_t.admit), as the
 * client port's: a socket numbered within the open-files reserve is closed
 * and the storage engine counts again; any other takes one from its budget.
 */
static bool
raft_admit(void *arg, int fd)
{
    mf_repl_t *r = arg;
    if (mf_fd_in_reserve(fd, mf_fds_limit(), MF_FDS_CONN_RESERVE)) {
        mf_storage_fds_low(r->eng->st);
        return false;
    }
    mf_storage_fd_taken(r->eng->st);
    return true;
}

static int
start_raft(mf_repl_t *r, const mf_raft_server_t *servers, size_t n, mf_error_t *err)
{
    char name[256], address[300];
    int port;
    pthread_mutex_lock(&r->mu);
    if (r->node != NULL) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_AlreadyInitialized, "already initialized");
    }
    if (r->self < 0) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NodeNotFound, "this member is not in the replica set config");
    }
    uint64_t id = raft_id_of(r->members[r->self].id);
    if (mf_peer_split_host(r->members[r->self].host, name, sizeof(name), &port) != 0)
        snprintf(name, sizeof(name), "%s", r->bind_ip);
    pthread_mutex_unlock(&r->mu);
    snprintf(address, sizeof(address), "%s:%d", name, r->raft_port);
    if (mkdir(r->raft_dir, 0700) != 0 && errno != EEXIST)
        return mf_err_set(err, MF_E_InternalError, "cannot create %s: %s", r->raft_dir, strerror(errno));
    if (!r->loop_inited) {
        uv_loop_init(&r->loop);
        r->loop_inited = true;
    }
    mf_raft_node_opts_t o = {.id = id, .address = address, .dir = r->raft_dir, .loop = &r->loop,
                             .apply = on_apply, .on_state = on_state, .arg = r,
                             .election_timeout_ms = (unsigned)mf_param_get(r->eng->params, "replElectionTimeoutMillis"),
                             .heartbeat_timeout_ms = (unsigned)mf_param_get(r->eng->params, "replHeartbeatMillis"),
                             .snapshot = on_snapshot, .restore = on_restore,
                             .snapshot_threshold = (unsigned)mf_param_get(r->eng->params, "replSnapshotThreshold"),
                             .snapshot_trailing = (unsigned)mf_param_get(r->eng->params, "replSnapshotTrailing"),
                             .key = r->key, .admit = raft_admit, .admit_arg = r};
    mf_raft_node_t *node = mf_raft_node_open(&o, err);
    if (node == NULL) {
        uv_run(&r->loop, UV_RUN_NOWAIT);
        return -1;
    }
    if ((n > 0 && mf_raft_node_bootstrap(node, servers, n, err) != 0) || mf_raft_node_start(node, err) != 0) {
        mf_raft_node_close(node, NULL, NULL);
        uv_run(&r->loop, UV_RUN_DEFAULT);
        return -1;
    }
    pthread_mutex_lock(&r->mu);
    r->node = node;
    pthread_mutex_unlock(&r->mu);
    start_threads(r);
    if (pthread_create(&r->loop_thread, NULL, loop_main, r) != 0) {
        mf_log(MF_LOG_ERROR, "REPL", "cannot start the raft thread");
        abort();
    }
    r->loop_running = true;
    mf_log(MF_LOG_INFO, "REPL", "raft member %llu of %s listening on %s", (unsigned long long)id, r->set_name, address);
    return 0;
}

/* ---------- commands ---------- */

/* Asks host for its raft port; checks its set name. */
static int
peer_raft_address(mf_repl_t *r, const char *host, char *address, size_t size, bool *initialized, mf_error_t *err)
{
    bson_t reply;
    bson_iter_t it;
    char name[256];
    int port;
    int rc = peer_ask(r, host, "_mfReplInfo", &reply, err);
    if (rc != 0) {
        char cause[sizeof(err->msg)];
        snprintf(cause, sizeof(cause), "%s", err->msg); /* err->msg is overwritten below */
        mf_err_set(err, MF_E_NodeNotFound, "quorum check failed because not all proposed set members responded "
                   "affirmatively: %s failed with %s", host, cause);
        bson_destroy(&reply);
        return -1;
    }
    const char *set = bson_iter_init_find(&it, &reply, "setName") && BSON_ITER_HOLDS_UTF8(&it)
                          ? bson_iter_utf8(&it, NULL) : "";
    if (strcmp(set, r->set_name) != 0) {
        mf_err_set(err, MF_E_InvalidReplicaSetConfig, "member %s reports replica set name '%s', not '%s'", host, set,
                   r->set_name);
        bson_destroy(&reply);
        return -1;
    }
    *initialized = bson_iter_init_find(&it, &reply, "initialized") && bson_iter_as_bool(&it);
    port = bson_iter_init_find(&it, &reply, "raftPort") ? (int)bson_iter_as_int64(&it) : 0;
    bson_destroy(&reply);
    int p2;
    if (port <= 0 || mf_peer_split_host(host, name, sizeof(name), &p2) != 0)
        return mf_err_set(err, MF_E_NodeNotFound, "member %s did not report its raft port", host);
    snprintf(address, size, "%s:%d", name, port);
    return 0;
}

/* {_id: set, version: 1, members: [{_id: 0, host: <this member>}]}: rs.initiate() without a config. */
static void
default_config(mf_repl_t *r, bson_t *cfg)
{
    bson_t ms, m;
    char host[300];
    snprintf(host, sizeof(host), "%s:%d", strcmp(r->bind_ip, "0.0.0.0") == 0 ? "127.0.0.1" : r->bind_ip, r->port);
    bson_init(cfg);
    BSON_APPEND_UTF8(cfg, "_id", r->set_name);
    BSON_APPEND_INT32(cfg, "version", 1);
    BSON_APPEND_ARRAY_BEGIN(cfg, "members", &ms);
    BSON_APPEND_DOCUMENT_BEGIN(&ms, "0", &m);
    BSON_APPEND_INT32(&m, "_id", 0);
    BSON_APPEND_UTF8(&m, "host", host);
    bson_append_document_end(&ms, &m);
    bson_append_array_end(cfg, &ms);
}

/*
 * cfg as MongoDB shows and stores it (out initialised here): _id, version,
 * term, every member with its defaults filled in, protocolVersion and
 * settings (with a replicaSetId, kept from cfg or made here).
 */
static void
versioned_config(const bson_t *cfg, int64_t version, uint64_t term, bson_t *out)
{
    bson_iter_t it, mi, f;
    bson_t ms, m, st, gd, empty;
    bson_init(out);
    bson_init(&empty);
    if (bson_iter_init_find(&it, cfg, "_id"))
        bson_append_value(out, "_id", 3, bson_iter_value(&it));
    BSON_APPEND_INT32(out, "version", (int32_t)version);
    BSON_APPEND_INT64(out, "term", (int64_t)term);
    BSON_APPEND_ARRAY_BEGIN(out, "members", &ms);
    if (bson_iter_init_find(&it, cfg, "members") && bson_iter_recurse(&it, &mi)) {
        uint32_t i = 0;
        while (bson_iter_next(&mi)) {
            char key[16];
            const char *kp;
            static const char *const defaults[] = {"arbiterOnly", "buildIndexes", "hidden", "priority", "tags",
                                                   "secondaryDelaySecs", "votes", NULL};
            if (!bson_iter_recurse(&mi, &f))
                continue;
            bson_uint32_to_string(i++, &kp, key, sizeof(key));
            bson_append_document_begin(&ms, kp, -1, &m);
            while (bson_iter_next(&f))
                bson_append_value(&m, bson_iter_key(&f), -1, bson_iter_value(&f));
            for (int d = 0; defaults[d]; d++) {
                bson_iter_recurse(&mi, &f);
                if (bson_iter_find(&f, defaults[d]))
                    continue;
                switch (d) {
                case 0:
                case 2:
                    BSON_APPEND_BOOL(&m, defaults[d], false);
                    break;
                case 1:
                    BSON_APPEND_BOOL(&m, defaults[d], true);
                    break;
                case 3: { /* priority: 1, or 0 for an arbiter */
                    bson_iter_t a;
                    bool arbiter = bson_iter_recurse(&mi, &a) && bson_iter_find(&a, "arbiterOnly") && bson_iter_as_bool(&a);
                    BSON_APPEND_INT32(&m, defaults[d], arbiter ? 0 : 1);
                    break;
                }
                case 4:
                    BSON_APPEND_DOCUMENT(&m, defaults[d], &empty);
                    break;
                case 5:
                    BSON_APPEND_INT64(&m, defaults[d], 0);
                    break;
                default:
                    BSON_APPEND_INT32(&m, defaults[d], 1);
                }
            }
            bson_append_document_end(&ms, &m);
        }
    }
    bson_append_array_end(out, &ms);
    BSON_APPEND_INT64(out, "protocolVersion", 1);
    BSON_APPEND_BOOL(out, "writeConcernMajorityJournalDefault", true);
    BSON_APPEND_DOCUMENT_BEGIN(out, "settings", &st);
    bson_t given = BSON_INITIALIZER;
    if (bson_iter_init_find(&it, cfg, "settings") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *d;
        uint32_t l;
        bson_iter_document(&it, &l, &d);
        bson_init_static(&given, d, l);
    }
    bson_iter_t gi;
    if (bson_iter_init(&gi, &given))
        while (bson_iter_next(&gi))
            bson_append_value(&st, bson_iter_key(&gi), -1, bson_iter_value(&gi));
    if (!bson_has_field(&given, "chainingAllowed"))
        BSON_APPEND_BOOL(&st, "chainingAllowed", false);
    if (!bson_has_field(&given, "heartbeatIntervalMillis"))
        BSON_APPEND_INT32(&st, "heartbeatIntervalMillis", HEARTBEAT_MS);
    if (!bson_has_field(&given, "heartbeatTimeoutSecs"))
        BSON_APPEND_INT32(&st, "heartbeatTimeoutSecs", PEER_TIMEOUT_MS / 1000);
    if (!bson_has_field(&given, "electionTimeoutMillis"))
        BSON_APPEND_INT32(&st, "electionTimeoutMillis", ELECTION_TIMEOUT_MS); /* the default; replElectionTimeoutMillis */
    if (!bson_has_field(&given, "catchUpTimeoutMillis"))
        BSON_APPEND_INT32(&st, "catchUpTimeoutMillis", -1);
    if (!bson_has_field(&given, "getLastErrorModes"))
        BSON_APPEND_DOCUMENT(&st, "getLastErrorModes", &empty);
    if (!bson_has_field(&given, "getLastErrorDefaults")) {
        BSON_APPEND_DOCUMENT_BEGIN(&st, "getLastErrorDefaults", &gd);
        BSON_APPEND_INT32(&gd, "w", 1);
        BSON_APPEND_INT32(&gd, "wtimeout", 0);
        bson_append_document_end(&st, &gd);
    }
    if (!bson_has_field(&given, "replicaSetId")) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(&st, "replicaSetId", &oid);
    }
    bson_append_document_end(out, &st);
    bson_destroy(&empty);
}

static int
cmd_initiate(mf_repl_t *r, const bson_t *cmd, bson_t *reply, mf_error_t *err)
{
    bson_iter_t it;
    bson_t given, cfg;
    member_t members[MAX_MEMBERS];
    mf_raft_server_t servers[MAX_MEMBERS];
    char addrs[MAX_MEMBERS][300];
    int n;
    int64_t version;
    int rc = -1;

    pthread_mutex_lock(&r->mu);
    bool have = r->config != NULL;
    pthread_mutex_unlock(&r->mu);
    if (have)
        return mf_err_set(err, MF_E_AlreadyInitialized, "already initialized");
    bson_init(&given);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *d;
        uint32_t l;
        bson_iter_document(&it, &l, &d);
        bson_destroy(&given);
        bson_init_static(&given, d, l);
    }
    if (bson_empty(&given)) {
        bson_t dflt;
        default_config(r, &dflt);
        versioned_config(&dflt, 1, 0, &cfg);
        bson_destroy(&dflt);
    } else {
        if (parse_config(r, &given, members, &n, &version, err) != 0) {
            err->code = MF_E_InvalidReplicaSetConfig; /* as mongod: any parse error of an initiate is 93 */
            return -1;
        }
        versioned_config(&given, version, 0, &cfg);
    }
    if (parse_config(r, &cfg, members, &n, &version, err) != 0)
        goto out;
    warn_even(r, n);
    int self = -1;
    for (int i = 0; i < n; i++)
        if (host_is_me(r, members[i].host))
            self = i;
    if (self < 0) {
        mf_err_set(err, MF_E_InvalidReplicaSetConfig, "No host described in new configuration with {version: 1, "
                   "term: 0} for replica set %s maps to this node", r->set_name);
        goto out;
    }
    if (members[self].priority == 0) { /* mongod's checkElectable: the member initiating becomes primary */
        mf_err_set(err, MF_E_InvalidReplicaSetConfig, "This node, %s, with _id %d is not electable under the new "
                   "configuration with {version: 1, term: 0} for replica set %s", members[self].host, members[self].id,
                   r->set_name);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        bool initialized = false;
        servers[i].id = raft_id_of(members[i].id);
        servers[i].address = addrs[i];
        if (i == self) {
            char name[256];
            int port;
            if (mf_peer_split_host(members[i].host, name, sizeof(name), &port) != 0)
                snprintf(name, sizeof(name), "%s", r->bind_ip);
            snprintf(addrs[i], sizeof(addrs[i]), "%s:%d", name, r->raft_port);
            continue;
        }
        if (peer_raft_address(r, members[i].host, addrs[i], sizeof(addrs[i]), &initialized, err) != 0)
            goto out;
        if (initialized) {
            mf_err_set(err, MF_E_InvalidReplicaSetConfig, "member %s is already initialized", members[i].host);
            goto out;
        }
    }
    /* Every other member first: each bootstraps raft with the same list and starts. */
    for (int i = 0; i < n; i++) {
        if (i == self)
            continue;
        bson_t join, arr, sv, rep;
        char key[16];
        const char *kp;
        bson_init(&join);
        BSON_APPEND_INT32(&join, "_mfReplJoin", 1);
        BSON_APPEND_DOCUMENT(&join, "config", &cfg);
        BSON_APPEND_BOOL(&join, "bootstrap", true);
        BSON_APPEND_ARRAY_BEGIN(&join, "servers", &arr);
        for (int j = 0; j < n; j++) {
            bson_uint32_to_string((uint32_t)j, &kp, key, sizeof(key));
            bson_append_document_begin(&arr, kp, -1, &sv);
            BSON_APPEND_INT64(&sv, "id", (int64_t)servers[j].id);
            BSON_APPEND_UTF8(&sv, "address", servers[j].address);
            bson_append_document_end(&arr, &sv);
        }
        bson_append_array_end(&join, &arr);
        int jrc = mf_peer_command(members[i].host, &join, &r->sec, PEER_TIMEOUT_MS * 5, &rep, err);
        bson_destroy(&join);
        bson_destroy(&rep);
        if (jrc != 0)
            goto out;
    }
    pthread_mutex_lock(&r->mu);
    install_config(r, &cfg, members, n, version);
    pthread_mutex_unlock(&r->mu);
    if (save_config(r, &cfg, err) != 0 || start_raft(r, servers, (size_t)n, err) != 0)
        goto out;
    mf_log(MF_LOG_INFO, "REPL", "replica set %s initiated with %d member(s)", r->set_name, n);
    mf_engine_topology_changed(r->eng);
    rc = 0;
out:
    bson_destroy(&cfg);
    return rc;
}

/* _mfReplJoin {config, servers, bootstrap}: an initiating or reconfiguring primary makes this member join. */
static int
cmd_join(mf_repl_t *r, const bson_t *cmd, mf_error_t *err)
{
    bson_iter_t it, a, f;
    bson_t cfg;
    member_t members[MAX_MEMBERS];
    mf_raft_server_t servers[MAX_MEMBERS];
    char addrs[MAX_MEMBERS][300];
    int n, ns = 0;
    int64_t version;
    bool bootstrap = bson_iter_init_find(&it, cmd, "bootstrap") && bson_iter_as_bool(&it);
    if (!bson_iter_init_find(&it, cmd, "config") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(err, MF_E_BadValue, "_mfReplJoin needs a config");
    const uint8_t *d;
    uint32_t l;
    bson_iter_document(&it, &l, &d);
    bson_init_static(&cfg, d, l);
    if (parse_config(r, &cfg, members, &n, &version, err) != 0)
        return -1;
    if (bootstrap && bson_iter_init_find(&it, cmd, "servers") && bson_iter_recurse(&it, &a)) {
        while (bson_iter_next(&a) && ns < MAX_MEMBERS) {
            if (!bson_iter_recurse(&a, &f))
                continue;
            servers[ns].id = 0;
            addrs[ns][0] = '\0';
            while (bson_iter_next(&f)) {
                if (strcmp(bson_iter_key(&f), "id") == 0)
                    servers[ns].id = (uint64_t)bson_iter_as_int64(&f);
                else if (strcmp(bson_iter_key(&f), "address") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                    snprintf(addrs[ns], sizeof(addrs[ns]), "%s", bson_iter_utf8(&f, NULL));
            }
            servers[ns].address = addrs[ns];
            ns++;
        }
    }
    pthread_mutex_lock(&r->mu);
    bool have = r->node != NULL;
    if (!have)
        install_config(r, &cfg, members, n, version);
    pthread_mutex_unlock(&r->mu);
    if (have)
        return mf_err_set(err, MF_E_AlreadyInitialized, "already initialized");
    if (save_config(r, &cfg, err) != 0 || start_raft(r, servers, bootstrap ? (size_t)ns : 0, err) != 0)
        return -1;
    mf_engine_topology_changed(r->eng);
    return 0;
}

/* What a raft membership change waits on. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    mf_error_t err;
} change_wait_t;

static void
change_done(void *arg, uint64_t index, const mf_error_t *err)
{
    change_wait_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done = true;
    if (err)
        w->err = *err;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Runs a raft membership change (add: address != NULL) and waits for it. */
static int
change_membership(mf_repl_t *r, uint64_t id, const char *address, bool transfer, mf_error_t *err)
{
    change_wait_t w = {.done = false};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_mutex_lock(&r->mu);
    mf_raft_node_t *node = r->stop ? NULL : r->node;
    int rc = node == NULL ? mf_err_set(err, MF_E_InterruptedAtShutdown, "replication is shutting down")
             : transfer   ? mf_raft_node_transfer(node, id, change_done, &w, err)
             : address    ? mf_raft_node_add_voter(node, id, address, change_done, &w, err)
                          : mf_raft_node_remove(node, id, change_done, &w, err);
    pthread_mutex_unlock(&r->mu);
    if (rc == 0) {
        pthread_mutex_lock(&w.mu);
        while (!w.done)
            pthread_cond_wait(&w.cv, &w.mu);
        pthread_mutex_unlock(&w.mu);
        if (w.err.code != 0) {
            *err = w.err;
            rc = -1;
        }
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

/* Waits until this member has applied index (or the deadline). */
static bool
wait_applied(mf_repl_t *r, uint64_t index, int64_t timeout_ms)
{
    int64_t deadline = mf_mono_ms() + timeout_ms;
    pthread_mutex_lock(&r->mu);
    while (r->applied_index < index && !r->stop && wait_until(r, &r->cv, deadline))
        ;
    bool ok = r->applied_index >= index;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static int
cmd_reconfig(mf_repl_t *r, const bson_t *cmd, mf_error_t *err)
{
    bson_iter_t it;
    member_t members[MAX_MEMBERS], old[MAX_MEMBERS];
    int n, nold;
    int64_t version;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(err, MF_E_TypeMismatch, "replSetReconfig needs a config object");
    const uint8_t *d;
    uint32_t l;
    bson_t given;
    bson_iter_document(&it, &l, &d);
    bson_init_static(&given, d, l);
    if (parse_config(r, &given, members, &n, &version, err) != 0) {
        if (err->code != MF_E_TypeMismatch && err->code != MF_E_Location40415)
            err->code = MF_E_NewReplicaSetConfigurationIncompatible; /* as mongod: a reconfig's validation fails with 103 */
        return -1;
    }
    pthread_mutex_lock(&r->mu);
    if (r->config == NULL) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NotYetInitialized, "no replset config has been received");
    }
    if (!r->writable) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NotWritablePrimary, "replSetReconfig should only be run on a writable PRIMARY. "
                          "Current state %s;", state_str(self_state(r)));
    }
    if (version <= r->config_version) {
        int64_t cur = r->config_version;
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NewReplicaSetConfigurationIncompatible, "New config is rejected :: caused by :: "
                          "version field value of %lld is not greater than the current version %lld",
                          (long long)version, (long long)cur);
    }
    nold = r->nmembers;
    memcpy(old, r->members, sizeof(old));
    uint64_t term = r->term;
    for (int i = 0; i < n; i++) {
        if (host_is_me(r, members[i].host) && members[i].priority == 0) { /* the primary must stay electable */
            mf_err_set(err, MF_E_NewReplicaSetConfigurationIncompatible, "This node, %s, with _id %d is not "
                       "electable under the new configuration with {version: %lld, term: %llu} for replica set %s",
                       members[i].host, members[i].id, (long long)version, (unsigned long long)term, r->set_name);
            pthread_mutex_unlock(&r->mu);
            return -1;
        }
    }
    pthread_mutex_unlock(&r->mu);
    warn_even(r, n);

    /* Added members: learn their raft address, make them join, add them to raft. */
    for (int i = 0; i < n; i++) {
        bool known = false;
        for (int j = 0; j < nold; j++)
            known |= old[j].id == members[i].id;
        if (known)
            continue;
        char addr[300];
        bool initialized = false;
        if (peer_raft_address(r, members[i].host, addr, sizeof(addr), &initialized, err) != 0)
            return -1;
        bson_t join, rep, cfg;
        versioned_config(&given, version, term, &cfg);
        bson_init(&join);
        BSON_APPEND_INT32(&join, "_mfReplJoin", 1);
        BSON_APPEND_DOCUMENT(&join, "config", &cfg);
        BSON_APPEND_BOOL(&join, "bootstrap", false);
        int jrc = initialized ? 0 : mf_peer_command(members[i].host, &join, &r->sec, PEER_TIMEOUT_MS * 5, &rep, err);
        if (!initialized)
            bson_destroy(&rep);
        bson_destroy(&join);
        bson_destroy(&cfg);
        if (jrc != 0)
            return -1;
        /* Raft catches the new member up before it votes; a first connection may still be coming up. */
        int arc = -1;
        for (int attempt = 0; attempt < 20 && arc != 0 && !r->stop; attempt++) {
            if (attempt > 0)
                usleep(250 * 1000);
            arc = change_membership(r, raft_id_of(members[i].id), addr, false, err);
            if (arc != 0 && err->code != MF_E_InternalError && err->code != MF_E_ConflictingOperationInProgress)
                break;
        }
        if (arc != 0)
            return -1;
        mf_log(MF_LOG_INFO, "REPL", "added member %s (raft %s)", members[i].host, addr);
    }
    for (int j = 0; j < nold; j++) {
        bool kept = false;
        for (int i = 0; i < n; i++)
            kept |= old[j].id == members[i].id;
        if (!kept) {
            if (change_membership(r, raft_id_of(old[j].id), NULL, false, err) != 0)
                return -1;
            mf_log(MF_LOG_INFO, "REPL", "removed member %s", old[j].host);
        }
    }
    /* The new config itself, as an entry every member installs. */
    bson_t cfg;
    mf_error_t serr;
    versioned_config(&given, version, term, &cfg);
    pthread_mutex_lock(&r->mu);
    uint64_t seq = ++r->next_seq;
    pthread_mutex_unlock(&r->mu);
    bson_t p;
    bson_init(&p);
    BSON_APPEND_UTF8(&p, "k", "config");
    BSON_APPEND_INT64(&p, "m", 0);
    BSON_APPEND_INT64(&p, "e", r->epoch);
    BSON_APPEND_INT64(&p, "s", (int64_t)seq);
    BSON_APPEND_INT64(&p, "t", (int64_t)term);
    BSON_APPEND_DATE_TIME(&p, "w", mf_now_ms());
    BSON_APPEND_DOCUMENT(&p, "cfg", &cfg);
    uint64_t index = 0;
    pthread_mutex_lock(&r->mu);
    mf_raft_node_t *node = r->stop ? NULL : r->node;
    pthread_mutex_unlock(&r->mu);
    int rc = node ? mf_raft_node_submit_wait(node, bson_get_data(&p), p.len, &index, &serr)
                  : mf_err_set(&serr, MF_E_InterruptedAtShutdown, "replication is shutting down");
    bson_destroy(&p);
    bson_destroy(&cfg);
    if (rc != 0) {
        *err = serr;
        return -1;
    }
    wait_applied(r, index, 10000);
    return 0;
}

/*
 * replSetStepDown: checks its periods as mongod, hands the role to
 * choose_successor's member and stays away for the given seconds. With none electable it stays primary and
 * answers 262, as mongod, unless force lets raft pick any member. Under
 * r->transfer_mu, so that no hand-over of heartbeat_main runs beside it.
 */
static int
cmd_step_down(mf_repl_t *r, const bson_t *cmd, mf_error_t *err)
{
    bson_iter_t it;
    int64_t secs = 60;
    bool force = false;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_NUMBER(&it))
        secs = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, cmd, "force"))
        force = bson_iter_as_bool(&it);
    /* As mongod's CmdReplSetStepDown: the catch-up period (default 10 s, 0 with force) fits in the step-down's. */
    int64_t catch_up = force ? 0 : 10;
    if (bson_iter_init_find(&it, cmd, "secondaryCatchUpPeriodSecs") && BSON_ITER_HOLDS_NUMBER(&it))
        catch_up = bson_iter_as_int64(&it);
    if (secs <= 0)
        return mf_err_set(err, MF_E_BadValue, "stepdown period must be a positive integer");
    if (catch_up < 0)
        return mf_err_set(err, MF_E_BadValue, "secondaryCatchUpPeriodSecs period must be a positive or absent");
    if (secs < catch_up)
        return mf_err_set(err, MF_E_BadValue, "stepdown period must be longer than secondaryCatchUpPeriodSecs");
    pthread_mutex_lock(&r->transfer_mu);
    pthread_mutex_lock(&r->mu);
    bool ok = r->writable;
    int nm = r->nmembers;
    if (ok) {
        r->writable = false;
        r->frozen_until_ms = mf_mono_ms() + secs * 1000;
        wake_waiters_failed(r, MF_E_InterruptedDueToReplStateChange, "operation was interrupted because a node "
                            "stepped down from primary");
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        rc = mf_err_set(err, MF_E_NotWritablePrimary, "not primary so can't step down");
        goto out;
    }
    mf_ttl_monitor_pause(r->eng->ttl, "this replica-set member stepped down");
    mf_engine_topology_changed(r->eng);
    uint64_t to = nm < 2 ? 0 : choose_successor(r);
    if (to == 0 && !force) {
        char now[64];
        struct tm tm;
        time_t t = (time_t)(mf_now_ms() / 1000);
        gmtime_r(&t, &tm);
        strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%S+00:00", &tm);
        rc = mf_err_set(err, MF_E_ExceededTimeLimit, "No electable secondaries caught up as of %s. Please use the "
                        "replSetStepDown command with the argument {force: true} to force node to step down.", now);
    } else if (nm < 2) {
        rc = mf_err_set(err, MF_E_ExceededTimeLimit, "No electable secondaries caught up: this member is the only one");
    } else {
        rc = change_membership(r, to, NULL, true, err); /* to 0 (force): raft picks a member */
    }
    if (rc != 0) {
        /* Nobody took over: stay primary (drained already). */
        pthread_mutex_lock(&r->mu);
        if (r->role == MF_RAFT_ROLE_LEADER) {
            r->writable = true;
            r->frozen_until_ms = 0;
        }
        pthread_mutex_unlock(&r->mu);
        mf_ttl_monitor_pause(r->eng->ttl, NULL);
        mf_engine_topology_changed(r->eng);
        goto out;
    }
    mf_log(MF_LOG_INFO, "REPL", "stepped down from primary; not seeking election for %lld s", (long long)secs);
out:
    pthread_mutex_unlock(&r->transfer_mu);
    return rc;
}

static int
cmd_freeze(mf_repl_t *r, const bson_t *cmd, bson_t *reply, mf_error_t *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    int64_t secs = BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
    pthread_mutex_lock(&r->mu);
    if (r->writable) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NotSecondary, "cannot freeze node when primary or running for election. state: Primary");
    }
    r->frozen_until_ms = secs > 0 ? mf_mono_ms() + secs * 1000 : 0;
    pthread_mutex_unlock(&r->mu);
    if (secs == 0)
        BSON_APPEND_UTF8(reply, "info", "unfreezing");
    return 0;
}

static void
append_member_status(mf_repl_t *r, bson_t *arr, int i, int64_t now)
{
    member_t *m = &r->members[i];
    bson_t d;
    char key[16];
    const char *kp;
    bool self = i == r->self;
    bson_uint32_to_string((uint32_t)i, &kp, key, sizeof(key));
    bson_append_document_begin(arr, kp, -1, &d);
    BSON_APPEND_INT32(&d, "_id", m->id);
    BSON_APPEND_UTF8(&d, "name", m->host);
    int st = self ? self_state(r) : (m->health == 1 ? m->state : ST_UNKNOWN);
    /* A heartbeat up to a second old may still say PRIMARY for a member raft no longer follows. */
    if (!self && st == ST_PRIMARY && raft_id_of(m->id) != r->leader_id)
        st = ST_SECONDARY;
    BSON_APPEND_DOUBLE(&d, "health", self ? 1.0 : (m->health == 1 ? 1.0 : 0.0));
    BSON_APPEND_INT32(&d, "state", st);
    BSON_APPEND_UTF8(&d, "stateStr", self ? state_str(st) : (m->health == 1 ? state_str(st) : "(not reachable/healthy)"));
    int64_t up = self ? (now - r->started_ms) / 1000 : (m->health == 1 ? (now - m->up_since_ms) / 1000 : 0);
    BSON_APPEND_INT64(&d, "uptime", up);
    uint32_t ts_s = self ? r->ts_secs : m->ts_secs, ts_i = self ? r->ts_inc : m->ts_inc;
    uint64_t t = self ? r->applied_term : m->applied_term;
    int64_t wall = self ? r->applied_wall : m->applied_wall;
    append_optime(&d, "optime", ts_s, ts_i, t);
    BSON_APPEND_DATE_TIME(&d, "optimeDate", (ts_s * (int64_t)1000));
    if (!self) {
        append_optime(&d, "optimeDurable", ts_s, ts_i, t);
        BSON_APPEND_DATE_TIME(&d, "optimeDurableDate", ts_s * (int64_t)1000);
    }
    BSON_APPEND_DATE_TIME(&d, "lastAppliedWallTime", wall);
    BSON_APPEND_DATE_TIME(&d, "lastDurableWallTime", wall);
    if (!self) {
        BSON_APPEND_DATE_TIME(&d, "lastHeartbeat", m->last_hb_ms);
        BSON_APPEND_DATE_TIME(&d, "lastHeartbeatRecv", m->last_ok_ms);
        BSON_APPEND_INT64(&d, "pingMs", m->ping_ms);
        BSON_APPEND_UTF8(&d, "lastHeartbeatMessage", m->msg);
    }
    /* A secondary replicates from the primary (raft's leader sends every entry): its sync source. */
    int src = st == ST_SECONDARY ? member_of_raft(r, r->leader_id) : -1;
    if (src == i)
        src = -1;
    BSON_APPEND_UTF8(&d, "syncSourceHost", src >= 0 ? r->members[src].host : "");
    BSON_APPEND_INT32(&d, "syncSourceId", src >= 0 ? r->members[src].id : -1);
    BSON_APPEND_UTF8(&d, "infoMessage", "");
    if (st == ST_PRIMARY) {
        bson_oid_t eid;
        if (self && r->elected_ms > 0) {
            /* When it won its election, as mongod's electionTime and electionDate. */
            BSON_APPEND_TIMESTAMP(&d, "electionTime", (uint32_t)(r->elected_ms / 1000), 1);
            BSON_APPEND_DATE_TIME(&d, "electionDate", r->elected_ms);
        }
        election_id(self ? r->term : t, &eid);
        BSON_APPEND_OID(&d, "electionId", &eid);
    }
    BSON_APPEND_INT64(&d, "configVersion", r->config_version);
    BSON_APPEND_INT64(&d, "configTerm", (int64_t)r->term);
    if (self)
        BSON_APPEND_BOOL(&d, "self", true);
    bson_append_document_end(arr, &d);
}

static int
cmd_status(mf_repl_t *r, bson_t *reply, mf_error_t *err)
{
    bson_t arr, o;
    int64_t now = mf_now_ms();
    pthread_mutex_lock(&r->mu);
    if (r->config == NULL) {
        pthread_mutex_unlock(&r->mu);
        return mf_err_set(err, MF_E_NotYetInitialized, "no replset config has been received");
    }
    int voters = r->nmembers;
    BSON_APPEND_UTF8(reply, "set", r->set_name);
    BSON_APPEND_DATE_TIME(reply, "date", now);
    BSON_APPEND_INT32(reply, "myState", self_state(r));
    BSON_APPEND_INT64(reply, "term", (int64_t)r->term);
    int src = self_state(r) == ST_SECONDARY ? member_of_raft(r, r->leader_id) : -1;
    if (src == r->self)
        src = -1;
    BSON_APPEND_UTF8(reply, "syncSourceHost", src >= 0 ? r->members[src].host : "");
    BSON_APPEND_INT32(reply, "syncSourceId", src >= 0 ? r->members[src].id : -1);
    BSON_APPEND_INT32(reply, "heartbeatIntervalMillis", HEARTBEAT_MS);
    BSON_APPEND_INT32(reply, "majorityVoteCount", voters / 2 + 1);
    BSON_APPEND_INT32(reply, "writeMajorityCount", voters / 2 + 1);
    BSON_APPEND_INT32(reply, "votingMembersCount", voters);
    BSON_APPEND_INT32(reply, "writableVotingMembersCount", voters);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "optimes", &o);
    append_optime(&o, "lastCommittedOpTime", r->ts_secs, r->ts_inc, r->applied_term);
    BSON_APPEND_DATE_TIME(&o, "lastCommittedWallTime", r->applied_wall);
    append_optime(&o, "readConcernMajorityOpTime", r->ts_secs, r->ts_inc, r->applied_term);
    append_optime(&o, "appliedOpTime", r->ts_secs, r->ts_inc, r->applied_term);
    append_optime(&o, "durableOpTime", r->ts_secs, r->ts_inc, r->applied_term);
    BSON_APPEND_DATE_TIME(&o, "lastAppliedWallTime", r->applied_wall);
    BSON_APPEND_DATE_TIME(&o, "lastDurableWallTime", r->applied_wall);
    bson_append_document_end(reply, &o);
    BSON_APPEND_ARRAY_BEGIN(reply, "members", &arr);
    for (int i = 0; i < r->nmembers; i++)
        append_member_status(r, &arr, i, now);
    bson_append_array_end(reply, &arr);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int
cmd_info(mf_repl_t *r, bson_t *reply)
{
    pthread_mutex_lock(&r->mu);
    BSON_APPEND_UTF8(reply, "setName", r->set_name);
    BSON_APPEND_INT32(reply, "raftPort", r->raft_port);
    BSON_APPEND_BOOL(reply, "initialized", r->node != NULL);
    BSON_APPEND_INT32(reply, "state", self_state(r));
    BSON_APPEND_INT64(reply, "appliedIndex", (int64_t)r->applied_index);
    BSON_APPEND_INT64(reply, "appliedTerm", (int64_t)r->applied_term);
    BSON_APPEND_DATE_TIME(reply, "appliedWall", r->applied_wall);
    BSON_APPEND_TIMESTAMP(reply, "ts", r->ts_secs, r->ts_inc);
    BSON_APPEND_INT64(reply, "configVersion", r->config_version);
    BSON_APPEND_BOOL(reply, "frozen", self_frozen(r));
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int
hook_command(void *arg, const char *name, const bson_t *cmd, bson_t *reply, mf_error_t *err)
{
    mf_repl_t *r = arg;
    if (strcmp(name, "replSetInitiate") == 0)
        return cmd_initiate(r, cmd, reply, err);
    if (strcmp(name, "_mfReplJoin") == 0)
        return cmd_join(r, cmd, err);
    if (strcmp(name, "_mfReplInfo") == 0)
        return cmd_info(r, reply);
    if (strcmp(name, "replSetGetStatus") == 0)
        return cmd_status(r, reply, err);
    if (strcmp(name, "replSetGetConfig") == 0) {
        pthread_mutex_lock(&r->mu);
        if (r->config == NULL) {
            pthread_mutex_unlock(&r->mu);
            return mf_err_set(err, MF_E_NotYetInitialized, "no replset config has been received");
        }
        bson_t cfg;
        versioned_config(r->config, r->config_version, r->term, &cfg);
        BSON_APPEND_DOCUMENT(reply, "config", &cfg);
        bson_destroy(&cfg);
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    if (r->config == NULL && r->node == NULL)
        return mf_err_set(err, MF_E_NotYetInitialized, "no replset config has been received");
    if (strcmp(name, "replSetReconfig") == 0)
        return cmd_reconfig(r, cmd, err);
    if (strcmp(name, "replSetStepDown") == 0)
        return cmd_step_down(r, cmd, err);
    if (strcmp(name, "replSetFreeze") == 0)
        return cmd_freeze(r, cmd, reply, err);
    return mf_err_set(err, MF_E_CommandNotSupported, "%s is not supported by mayfly's raft replica sets", name);
}

/* ---------- hooks for the command layer ---------- */

static void
hook_hello(void *arg, const bson_t *cmd, bool legacy_name, bson_t *reply)
{
    mf_repl_t *r = arg;
    bson_t arr, lw;
    pthread_mutex_lock(&r->mu);
    int st = self_state(r);
    BSON_APPEND_BOOL(reply, legacy_name ? "ismaster" : "isWritablePrimary", st == ST_PRIMARY);
    BSON_APPEND_BOOL(reply, "secondary", st == ST_SECONDARY);
    BSON_APPEND_UTF8(reply, "setName", r->set_name);
    if (r->config == NULL || r->self < 0) {
        BSON_APPEND_BOOL(reply, "isreplicaset", true);
        BSON_APPEND_UTF8(reply, "info", "Does not have a valid replica set config");
        pthread_mutex_unlock(&r->mu);
        return;
    }
    BSON_APPEND_INT64(reply, "setVersion", r->config_version);
    /*
     * As mongod: hosts are the members that may be primary, arbiters the
     * arbiters, passives the others; hidden and delayed members in none.
     */
    static const char *const lists[] = {"hosts", "passives", "arbiters"};
    for (int pass = 0; pass < 3; pass++) {
        uint32_t k = 0;
        for (int i = 0; i < r->nmembers; i++) {
            const member_t *m = &r->members[i];
            int list = m->priority > 0 ? 0 : m->arbiter ? 2 : 1;
            if (m->hidden || m->delayed || list != pass)
                continue;
            char key[16];
            const char *kp;
            if (k == 0)
                bson_append_array_begin(reply, lists[pass], -1, &arr);
            bson_uint32_to_string(k++, &kp, key, sizeof(key));
            bson_append_utf8(&arr, kp, -1, m->host, -1);
        }
        if (k > 0)
            bson_append_array_end(reply, &arr);
    }
    if (r->members[r->self].priority == 0)
        BSON_APPEND_BOOL(reply, "passive", true);
    if (r->members[r->self].hidden)
        BSON_APPEND_BOOL(reply, "hidden", true);
    if (r->members[r->self].arbiter)
        BSON_APPEND_BOOL(reply, "arbiterOnly", true);
    int li = member_of_raft(r, r->leader_id);
    bool leader_ready = li >= 0 && (li != r->self || r->writable);
    if (leader_ready)
        BSON_APPEND_UTF8(reply, "primary", r->members[li].host);
    BSON_APPEND_UTF8(reply, "me", r->members[r->self].host);
    if (st == ST_PRIMARY) {
        bson_oid_t eid;
        election_id(r->term, &eid);
        BSON_APPEND_OID(reply, "electionId", &eid);
    }
    BSON_APPEND_DOCUMENT_BEGIN(reply, "lastWrite", &lw);
    append_optime(&lw, "opTime", r->ts_secs, r->ts_inc, r->applied_term);
    BSON_APPEND_DATE_TIME(&lw, "lastWriteDate", r->ts_secs * (int64_t)1000);
    append_optime(&lw, "majorityOpTime", r->ts_secs, r->ts_inc, r->applied_term);
    BSON_APPEND_DATE_TIME(&lw, "majorityWriteDate", r->ts_secs * (int64_t)1000);
    bson_append_document_end(reply, &lw);
    pthread_mutex_unlock(&r->mu);
}

static int
hook_admit(void *arg, const char *db, mf_repl_kind_t kind, bool secondary_ok, mf_error_t *err)
{
    mf_repl_t *r = arg;
    if (kind == MF_REPL_OTHER || strcmp(db, "local") == 0)
        return 0;
    pthread_mutex_lock(&r->mu);
    int st = self_state(r);
    pthread_mutex_unlock(&r->mu);
    if (st == ST_PRIMARY)
        return 0;
    if (kind == MF_REPL_WRITE)
        return mf_err_set(err, MF_E_NotWritablePrimary, "not primary");
    if (!secondary_ok)
        return mf_err_set(err, MF_E_NotPrimaryNoSecondaryOk, "not primary and secondaryOk=false");
    if (st != ST_SECONDARY)
        return mf_err_set(err, MF_E_NotPrimaryOrSecondary, "node is not in primary or recovering state");
    return 0;
}

static bool
is_fam(const char *name)
{
    return strcmp(name, "findAndModify") == 0 || strcmp(name, "findandmodify") == 0;
}

/*
 * Retryable commands whose retry is not answered from the session row's
 * counts: findAndModify (answered from the row's f when it has one) and
 * bulkWrite (run again by its handler over the ops its row's s and e do
 * not show done, which rebuilds its reply; see sess_t). A retry of one
 * that already wrote and whose row cannot answer it (no f, no s) is
 * refused with 217 IncompleteTransactionHistory, as mongod refuses a retry
 * whose history it no longer has, rather than run a second time.
 */
static bool
answered_by_error(const char *name)
{
    return is_fam(name) || strcmp(name, "bulkWrite") == 0;
}

/* cmd's boolean field name (false when absent or not a boolean or number). */
static bool
cmd_flag(const bson_t *cmd, const char *name)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, cmd, name) && (BSON_ITER_HOLDS_BOOL(&it) || BSON_ITER_HOLDS_NUMBER(&it)) &&
           bson_iter_as_bool(&it);
}

/* Fails a findAndModify retry that does not fit the write it retries (mongod's codes and message). */
static int
fam_mismatch(mf_error_t *err, int code, const bson_t *cmd, const char *k)
{
    char *json = bson_as_relaxed_extended_json(cmd, NULL);
    mf_err_set(err, code, "findAndModify retry request: %s is not compatible with previous write in the transaction "
               "of type: %s", json ? json : "{}", k);
    bson_free(json);
    return -1;
}

/*
 * The reply of a retried findAndModify that already wrote, rebuilt from its
 * row's f (see sess_t) as mongod's parseOplogEntryForFindAndModify rebuilds
 * it: lastErrorObject {n: 1, updatedExisting, upserted} and the stored image
 * as value, here projected by the retry's own fields, so the reply is the
 * one the first attempt sent. Mismatched retries (a remove retried as an
 * update, new changed) fail with mongod's 40606-40612. Returns 0 with reply
 * filled, or -1 with err.
 */
static int
fam_retry_reply(const bson_t *cmd, const bson_t *f, bson_t *reply, mf_error_t *err)
{
    bson_iter_t it;
    const char *k = bson_iter_init_find(&it, f, "k") && BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : "";
    bool post = bson_iter_init_find(&it, f, "post") && bson_iter_as_bool(&it);
    bool remove = cmd_flag(cmd, "remove"), want_new = cmd_flag(cmd, "new");
    bson_t v, le, out, query = BSON_INITIALIZER, fields = BSON_INITIALIZER;
    bool has_v = false;
    int rc = -1;

    if (k[0] == 'd' && !remove)
        return fam_mismatch(err, MF_E_Location40606, cmd, k);
    if (k[0] == 'i' && !cmd_flag(cmd, "upsert"))
        return fam_mismatch(err, MF_E_Location40608, cmd, k);
    if (k[0] != 'd' && k[0] != 'i' && k[0] != 'u')
        return fam_mismatch(err, MF_E_Location40609, cmd, k);
    if (k[0] == 'u' && want_new && !post)
        return mf_err_set(err, MF_E_Location40611, "findAndModify retry request wants the document after update "
                          "returned, but only before update document is stored");
    if (k[0] == 'u' && !want_new && post)
        return mf_err_set(err, MF_E_Location40612, "findAndModify retry request wants the document before update "
                          "returned, but only after update document is stored");
    if (bson_iter_init_find(&it, f, "v") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *d;
        uint32_t len;
        bson_iter_document(&it, &len, &d);
        has_v = bson_init_static(&v, d, len);
    }
    /* An upsert answers with its document only when new asked for it. */
    if (k[0] == 'i' && !want_new)
        has_v = false;

    bson_init(&out);
    if (has_v) {
        mf_projection_t *p = NULL;
        mf_matcher_t *m = NULL;
        mf_match_details_t d = {.array_pos = -1};
        const uint8_t *data;
        uint32_t len;
        if (bson_iter_init_find(&it, cmd, "fields") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            (void)bson_init_static(&fields, data, len);
        }
        if (bson_iter_init_find(&it, cmd, "query") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            (void)bson_init_static(&query, data, len);
        }
        if (bson_empty(&fields)) {
            bson_concat(&out, &v);
        } else if ((p = mf_projection_new(&fields, err)) == NULL) {
            goto out;
        } else {
            /* A positional projection needs the query's match on the image (the pre-image: new: true refuses it). */
            if (mf_projection_is_positional(p) && ((m = mf_matcher_new(&query, err)) == NULL ||
                                                   !mf_matcher_match(m, &v, &d))) {
                mf_projection_free(p);
                mf_matcher_free(m);
                if (err->code == 0)
                    mf_err_set(err, MF_E_BadValue, "positional operator '.$' couldn't find a matching element in the "
                               "array");
                goto out;
            }
            int prc = mf_projection_apply(p, &v, &d, &out, err);
            mf_projection_free(p);
            mf_matcher_free(m);
            if (prc != 0)
                goto out;
        }
    }
    BSON_APPEND_DOCUMENT_BEGIN(reply, "lastErrorObject", &le);
    BSON_APPEND_INT32(&le, "n", 1);
    if (k[0] != 'd')
        BSON_APPEND_BOOL(&le, "updatedExisting", k[0] == 'u');
    if (k[0] == 'i' && bson_iter_init_find(&it, f, "up"))
        bson_append_value(&le, "upserted", 8, bson_iter_value(&it));
    bson_append_document_end(reply, &le);
    if (has_v)
        BSON_APPEND_DOCUMENT(reply, "value", &out);
    else
        BSON_APPEND_NULL(reply, "value");
    rc = 0;
out:
    bson_destroy(&out);
    return rc;
}

/* cmd's txnNumber and lsid id (16 bytes): false if it lacks either. */
static bool
session_txn_of(const bson_t *cmd, uint8_t id[16], int64_t *txn)
{
    bson_iter_t it, l;
    const uint8_t *b;
    uint32_t len;
    bson_subtype_t st;
    if (!bson_iter_init_find(&it, cmd, "txnNumber") || !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    *txn = bson_iter_as_int64(&it);
    if (!bson_iter_init_find(&it, cmd, "lsid") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &l) ||
        !bson_iter_find(&l, "id") || !BSON_ITER_HOLDS_BINARY(&l))
        return false;
    bson_iter_binary(&l, &st, &len, &b);
    if (len != 16)
        return false;
    memcpy(id, b, 16);
    return true;
}

/* The session id (lsid.id, 16 bytes) and txnNumber of a retryable write command, if it is one. */
static bool
retryable_write(const char *name, const bson_t *cmd, uint8_t id[16], int64_t *txn)
{
    if (strcmp(name, "insert") != 0 && strcmp(name, "update") != 0 && strcmp(name, "delete") != 0 &&
        !answered_by_error(name))
        return false;
    return !bson_has_field(cmd, "autocommit") && session_txn_of(cmd, id, txn);
}

/* The stored row of session id, into row (initialised here when found). */
static bool
sess_lookup(mf_repl_t *r, const uint8_t id[16], bson_t *row)
{
    mf_sess_t *s = mf_storage_session(r->eng->st);
    mf_cur_t *c;
    mf_error_t err;
    bool found = false;
    if (mf_cur_open(s, SESSIONS_URI, &c, &err) == 0) {
        if (mf_cur_search_bytes(c, id, 16) == 0) {
            const uint8_t *v;
            size_t vl;
            bson_t tmp;
            mf_cur_value(c, &v, &vl);
            if (bson_init_static(&tmp, v, vl)) {
                bson_init(row);
                bson_concat(row, &tmp);
                found = true;
            }
        }
        mf_cur_close(c);
    }
    mf_storage_session_release(s);
    return found;
}

/*
 * A retried retryable write: one retried command, and stmts of its
 * statements (of an insert, update or delete, those found done already;
 * one for findAndModify), as mongod counts each statement it finds
 * executed already.
 */
static void
count_retried(mf_repl_t *r, int64_t stmts)
{
    atomic_fetch_add_explicit(&r->st_retried_cmds, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->st_retried_stmts, stmts, memory_order_relaxed);
}

/* A commitTransaction's lsid id and txnNumber (with autocommit: false): false if it lacks them. */
static bool
txn_commit_of(const bson_t *cmd, uint8_t id[16], int64_t *txn)
{
    return bson_has_field(cmd, "autocommit") && session_txn_of(cmd, id, txn);
}

/*
 * Whether a retry of name (insert, update or delete) whose session row is
 * row must run some statements: those its row does not show done (see
 * sess_t); they and the counts of the done ones go into *resume. A row
 * without s (a time-series insert, or written before rows kept s) is
 * answered from its counts.
 */
static bool
resume_of(const char *name, int64_t nstmts, const bson_t *row, mf_stmt_resume_t *resume)
{
    bson_iter_t it, a;
    bool bulk = strcmp(name, "bulkWrite") == 0;
    if (strcmp(name, "insert") != 0 && strcmp(name, "update") != 0 && strcmp(name, "delete") != 0 && !bulk)
        return false;
    if (!bson_iter_init_find(&it, row, "s"))
        return false;
    memset(resume, 0, sizeof(*resume));
    resume->s = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, row, "e") && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &a))
        while (bson_iter_next(&a) && resume->ne < MF_STMT_RESUME_MAX)
            resume->e[resume->ne++] = bson_iter_as_int64(&a);
    if (resume->ne == 0 && resume->s >= nstmts && !bulk)
        return false; /* all done: answered from the counts (a bulkWrite's reply is rebuilt by its handler) */
    static const char *const keys[3] = {"i", "u", "d"};
    for (int k = 0; k < 3; k++)
        resume->counts[k] = bson_iter_init_find(&it, row, keys[k]) ? bson_iter_as_int64(&it) : 0;
    resume->upserts = bson_iter_init_find(&it, row, "up") ? bson_iter_as_int64(&it) : 0;
    return true;
}

static int
hook_command_begin(void *arg, const char *name, const bson_t *cmd, int64_t nstmts, int64_t wtimeout_ms,
                   bson_t *reply, mf_stmt_resume_t *resume, mf_error_t *err)
{
    mf_repl_t *r = arg;
    uint8_t id[16];
    int64_t txn;
    bson_t row;
    bson_iter_t it;
    bool resumed = false;
    tls_wtimeout = wtimeout_ms > 0 ? wtimeout_ms : 0;
    tls_last_index = 0;
    memset(&tls_sess, 0, sizeof(tls_sess));
    memset(tls_wto, 0, sizeof(tls_wto));
    if (strcmp(name, "commitTransaction") == 0 && txn_commit_of(cmd, id, &txn)) {
        /*
         * A transaction's commit: its entry carries the session row {txn, c},
         * which every member stores with the data, so a commit retried on a
         * later primary learns that it committed (hook_txn_committed).
         */
        tls_sess.active = tls_sess.commit = true;
        memcpy(tls_sess.id, id, 16);
        tls_sess.txn = txn;
        return 0;
    }
    if (!retryable_write(name, cmd, id, &txn))
        return 0;
    /* One write of a session at a time: a concurrent retry waits for the first attempt, then reads its row. */
    pthread_mutex_lock(&r->mu);
    for (;;) {
        bool in_flight = false;
        for (size_t i = 0; i < r->nbusy && !in_flight; i++)
            in_flight = memcmp(r->busy_ids[i], id, 16) == 0;
        if (!in_flight || r->stop)
            break;
        pthread_cond_wait(&r->sess_cv, &r->mu);
    }
    if (r->nbusy == r->capbusy) {
        r->capbusy = r->capbusy ? r->capbusy * 2 : 16;
        r->busy_ids = mf_realloc(r->busy_ids, r->capbusy * sizeof(*r->busy_ids));
    }
    memcpy(r->busy_ids[r->nbusy++], id, 16);
    pthread_mutex_unlock(&r->mu);
    memcpy(tls_sess.id, id, 16);
    tls_sess.busy = true;
    if (sess_lookup(r, id, &row)) {
        int64_t stored = bson_iter_init_find(&it, &row, "txn") ? bson_iter_as_int64(&it) : -1;
        if (stored > txn) {
            bson_destroy(&row);
            return mf_err_set(err, MF_E_TransactionTooOld, "Retryable write with txnNumber %lld is prohibited on "
                              "session because a newer retryable write with txnNumber %lld has already started on "
                              "this session.", (long long)txn, (long long)stored);
        }
        if (stored == txn && is_fam(name) && bson_iter_init_find(&it, &row, "f") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            /* A findAndModify done already: its reply again, from the images its row keeps. */
            const uint8_t *d;
            uint32_t len;
            bson_t f;
            bson_iter_document(&it, &len, &d);
            int rc = bson_init_static(&f, d, len) ? fam_retry_reply(cmd, &f, reply, err)
                                                  : mf_err_set(err, MF_E_IncompleteTransactionHistory,
                                                               "the session's findAndModify record is damaged");
            bson_destroy(&row);
            if (rc == 0)
                count_retried(r, nstmts);
            return rc == 0 ? 1 : -1;
        }
        bool tracked_bulk = strcmp(name, "bulkWrite") == 0 && bson_has_field(&row, "s"); /* rebuilt by resume_of */
        if (stored == txn && answered_by_error(name) && !tracked_bulk) {
            bson_destroy(&row);
            return mf_err_set(err, MF_E_IncompleteTransactionHistory,
                              "Incomplete history detected for transaction %lld on session: the %s it retries was "
                              "applied already, and its reply cannot be rebuilt",
                              (long long)txn, name);
        }
        if (stored == txn && bson_iter_init_find(&it, &row, "eo")) {
            bson_destroy(&row);
            return mf_err_set(err, MF_E_IncompleteTransactionHistory,
                              "Incomplete history detected for transaction %lld on session: more than %d of the "
                              "%s's statements failed, and which ones is not kept",
                              (long long)txn, MF_STMT_RESUME_MAX, name);
        }
        if (stored == txn && resume_of(name, nstmts, &row, resume)) {
            /* Part done (a retry): the statements that did not write run now, the others are not run again. */
            bson_destroy(&row);
            count_retried(r, resume->s - resume->ne);
            tls_sess.prior_s = resume->s;
            tls_sess.nprior_e = resume->ne;
            memcpy(tls_sess.prior_e, resume->e, (size_t)resume->ne * sizeof(resume->e[0]));
            memcpy(tls_sess.ops, resume->counts, sizeof(tls_sess.ops));
            tls_sess.prior_i = resume->counts[0];
            tls_sess.upserts = resume->upserts;
            resumed = true;
        }
        if (stored == txn && !resumed) {
            /* Done already (a retry): answer with what it did, without running it again. */
            int64_t i = bson_iter_init_find(&it, &row, "i") ? bson_iter_as_int64(&it) : 0;
            int64_t u = bson_iter_init_find(&it, &row, "u") ? bson_iter_as_int64(&it) : 0;
            int64_t d = bson_iter_init_find(&it, &row, "d") ? bson_iter_as_int64(&it) : 0;
            bson_value_t uid = {.value_type = BSON_TYPE_NULL};
            bool uid_found = bson_iter_init_find(&it, &row, "uid");
            if (uid_found)
                bson_value_copy(bson_iter_value(&it), &uid);
            bson_destroy(&row);
            if (strcmp(name, "insert") == 0) {
                BSON_APPEND_INT32(reply, "n", (int32_t)i);
            } else if (strcmp(name, "delete") == 0) {
                BSON_APPEND_INT32(reply, "n", (int32_t)d);
            } else {
                BSON_APPEND_INT32(reply, "n", (int32_t)(u + i));
                BSON_APPEND_INT32(reply, "nModified", (int32_t)u);
                if (i == 1 && uid_found) {
                    bson_t ups, up;
                    BSON_APPEND_ARRAY_BEGIN(reply, "upserted", &ups);
                    BSON_APPEND_DOCUMENT_BEGIN(&ups, "0", &up);
                    BSON_APPEND_INT32(&up, "index", 0);
                    bson_append_value(&up, "_id", 3, &uid);
                    bson_append_document_end(&ups, &up);
                    bson_append_array_end(reply, &ups);
                }
            }
            bson_value_destroy(&uid);
            count_retried(r, nstmts);
            return 1;
        }
        if (!resumed)
            bson_destroy(&row);
    }
    tls_sess.active = true;
    memcpy(tls_sess.id, id, 16);
    tls_sess.txn = txn;
    tls_sess.cur = -1;
    if (strcmp(name, "insert") == 0 || strcmp(name, "update") == 0 || strcmp(name, "delete") == 0)
        tls_sess.kind = name[0];
    else if (strcmp(name, "bulkWrite") == 0)
        tls_sess.kind = 'b';
    if (strcmp(name, "update") == 0 && bson_iter_init_find(&it, cmd, "updates") && BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t a;
        int n = 0;
        if (bson_iter_recurse(&it, &a))
            while (bson_iter_next(&a))
                n++;
        tls_sess.upd1 = n == 1;
    }
    if (is_fam(name)) {
        /* Its row keeps the image the reply returns: the pre-image unless new: true asks for the post-image. */
        tls_sess.fam = true;
        tls_sess.fam_new = cmd_flag(cmd, "new") && !cmd_flag(cmd, "remove");
        if (!tls_sess.fam_new)
            mf_oplog_keep_preimage(true);
    }
    return resumed ? 2 : 0;
}

/* engine.h's stmt: notes this thread's tracked command's statement (see sess_t). */
static void
hook_stmt(void *arg, int64_t index, mf_stmt_event_t what)
{
    (void)arg;
    if (!tls_sess.active || tls_sess.kind == 0)
        return;
    if (what == MF_STMT_UNTRACKED) {
        tls_sess.kind = 0;
    } else if (what == MF_STMT_BEGIN) {
        tls_sess.cur = index;
        tls_sess.ins_run = false;
    } else if (what == MF_STMT_BEGIN_INSERTS) {
        tls_sess.ins_run = true;
        tls_sess.run_base = index;
        tls_sess.run_ops0 = tls_sess.ops[0];
        tls_sess.run_failed0 = tls_sess.nfailed_all;
    } else {
        if (tls_sess.nfailed < MF_STMT_RESUME_MAX)
            tls_sess.failed[tls_sess.nfailed++] = index;
        tls_sess.nfailed_all++;
    }
}

/* engine.h's txn_committed: session id's row says its transaction txn committed. */
static bool
hook_txn_committed(void *arg, const uint8_t id[16], int64_t txn)
{
    mf_repl_t *r = arg;
    bson_t row;
    bson_iter_t it;
    if (!sess_lookup(r, id, &row))
        return false;
    bool yes = bson_iter_init_find(&it, &row, "txn") && bson_iter_as_int64(&it) == txn &&
               bson_iter_init_find(&it, &row, "c") && bson_iter_as_bool(&it);
    bson_destroy(&row);
    return yes;
}

/* engine.h's session_txn. */
static int64_t
hook_session_txn(void *arg, const uint8_t id[16])
{
    mf_repl_t *r = arg;
    bson_t row;
    bson_iter_t it;
    if (!sess_lookup(r, id, &row))
        return -1;
    int64_t txn = bson_iter_init_find(&it, &row, "txn") ? bson_iter_as_int64(&it) : -1;
    bson_destroy(&row);
    return txn;
}

static void
hook_command_end(void *arg)
{
    mf_repl_t *r = arg;
    tls_wtimeout = 0;
    tls_sess.active = tls_sess.commit = false;
    if (tls_sess.fam) {
        tls_sess.fam = false;
        mf_oplog_keep_preimage(false);
    }
    if (tls_sess.busy) {
        tls_sess.busy = false;
        pthread_mutex_lock(&r->mu);
        for (size_t i = 0; i < r->nbusy; i++) {
            if (memcmp(r->busy_ids[i], tls_sess.id, 16) == 0) {
                memmove(r->busy_ids[i], r->busy_ids[r->nbusy - 1], 16);
                r->nbusy--;
                break;
            }
        }
        pthread_cond_broadcast(&r->sess_cv);
        pthread_mutex_unlock(&r->mu);
    }
    if (tls_ddl_waiter == NULL)
        return;
    /* The command is over: it answers once its DDL change is applied here (so majority-committed). */
    waiter_t *w = tls_ddl_waiter;
    tls_ddl_waiter = NULL;
    int64_t deadline = mf_mono_ms() + DDL_WAIT_MS;
    pthread_mutex_lock(&r->mu);
    while (w->state != W_APPLIED && !w->failed && !r->stop && wait_until(r, &r->cv, deadline))
        ;
    if (w->state == W_APPLIED && w->op_ts > tls_op_ts)
        tls_op_ts = w->op_ts;
    if (w->state == W_APPLIED && w->index > tls_last_index)
        tls_last_index = w->index;
    ddl_waiter_release(r, w);
    pthread_mutex_unlock(&r->mu);
}

static bool
hook_wtimeout_counts(void *arg, int64_t counts[3])
{
    memcpy(counts, tls_wto, sizeof(tls_wto));
    return tls_wto[0] + tls_wto[1] + tls_wto[2] > 0;
}

/*
 * operationTime / $clusterTime for the reply of this thread's command: the
 * last applied timestamp, or later the last one any write's reply here
 * carried (see tls_op_ts, r->acked_ts); the command's own record is cleared. Also the highest time
 * this member has handed out (r->cluster_ts), which afterClusterTime may
 * not exceed.
 */
static void
hook_op_time(void *arg, uint32_t *secs, uint32_t *inc)
{
    mf_repl_t *r = arg;
    pthread_mutex_lock(&r->mu);
    uint64_t t = ts_pack(r->ts_secs, r->ts_inc);
    /*
     * A write answers once raft committed its entry, maybe before the applier
     * stamped it into r->ts: a read after it must not answer an earlier time.
     */
    if (tls_op_ts > r->acked_ts)
        r->acked_ts = tls_op_ts;
    if (r->acked_ts > t)
        t = r->acked_ts;
    if (t > r->cluster_ts)
        r->cluster_ts = t;
    pthread_mutex_unlock(&r->mu);
    tls_op_ts = 0;
    *secs = (uint32_t)(t >> 32);
    *inc = (uint32_t)t;
}

/*
 * readConcern afterClusterTime: waits until this member has applied
 * everything up to (secs, inc), as mongod's waitForReadConcern, checking
 * for interruption (killOp, maxTimeMS, shutdown) every 100 ms. A time later
 * than any this member or its client (gossip: the command's $clusterTime,
 * 0 if none) has seen is refused, as mongod refuses one past its cluster
 * time. Returns 0, or -1 with err.
 */
static int
hook_after_cluster_time(void *arg, const char *field, uint32_t secs, uint32_t inc, uint32_t gsecs, uint32_t ginc,
                        mf_error_t *err)
{
    mf_repl_t *r = arg;
    uint64_t want = ts_pack(secs, inc), gossip = ts_pack(gsecs, ginc);
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    uint64_t known = ts_pack(r->ts_secs, r->ts_inc);
    if (r->cluster_ts > known)
        known = r->cluster_ts;
    if (gossip > known)
        known = gossip;
    if (want > known) {
        rc = mf_err_set(err, MF_E_InvalidOptions, "readConcern %s value must not be greater than the "
                        "current clusterTime. Requested clusterTime: { ts: Timestamp(%u, %u) }; current clusterTime: "
                        "{ ts: Timestamp(%u, %u) }", field, secs, inc, (uint32_t)(known >> 32), (uint32_t)known);
        goto out;
    }
    if (gossip > r->cluster_ts)
        r->cluster_ts = gossip;
    while (ts_pack(r->ts_secs, r->ts_inc) < want) {
        if (r->stop) {
            rc = mf_err_set(err, MF_E_InterruptedAtShutdown, "interrupted at shutdown");
            break;
        }
        wait_until(r, &r->cv, mf_mono_ms() + 100);
        if (mf_curop_check_current(err) != 0) {
            rc = -1;
            break;
        }
    }
out:
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/*
 * A numeric w above a majority (mongod counts members that have the write;
 * raft's commit counted a majority of logs): waits until w members' raft
 * logs hold the command's last entry, by the match indexes the leader keeps
 * (mf_raft_node_replicated, polled every millisecond while someone waits).
 * Every member in a config is a voter, so a majority is nmembers / 2 + 1.
 */
static int
hook_wait_members(void *arg, int w, int64_t wtimeout_ms, mf_error_t *err)
{
    mf_repl_t *r = arg;
    uint64_t index = tls_last_index;
    int rc = 0;
    if (index == 0)
        return 0;
    pthread_mutex_lock(&r->mu);
    if (w <= r->nmembers / 2 + 1 || r->node == NULL) {
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    mf_raft_node_t *node = r->node;
    mf_raft_node_watch(node, true);
    int64_t deadline = wtimeout_ms > 0 ? mf_mono_ms() + wtimeout_ms : 0;
    bool noticed = false, submitted = false;
    for (;;) {
        if (r->stop || r->node != node) {
            rc = mf_err_set(err, MF_E_InterruptedAtShutdown, "interrupted at shutdown");
            break;
        }
        if (!r->writable) {
            rc = mf_err_set(err, MF_E_PrimarySteppedDown, "Primary stepped down while waiting for replication");
            break;
        }
        if (mf_raft_node_replicated(node, index) >= w) {
            if (noticed)
                break;
            /*
             * w logs hold the entry, but a follower applies it only once it
             * learns the entry committed, from the leader's next append: a
             * heartbeat, up to two heartbeat intervals away. A no-op entry
             * appended now carries the commit index at once; when w logs
             * hold it, w members know to apply the write (within a
             * millisecond or so), as mongod's w counts applied members.
             */
            if (r->notice_index > index) {
                index = r->notice_index;
                noticed = true;
                continue;
            }
            if (!submitted) {
                mf_error_t serr;
                submitted = true;
                if (submit_entry_cb(r, "noop", NULL, NULL, NULL, 0, r->term, notice_done, &serr) != 0)
                    break; /* no notice: the next heartbeat carries the commit */
            }
        }
        int64_t now = mf_mono_ms();
        if (deadline != 0 && now >= deadline) {
            rc = mf_err_set(err, MF_E_WriteConcernFailed, "waiting for replication timed out");
            break;
        }
        /* Nothing signals a follower's progress: look again after the loop's next poll. */
        int64_t next = now + 1;
        wait_until(r, &r->cv, deadline != 0 && deadline < next ? deadline : next);
        pthread_mutex_unlock(&r->mu);
        int irc = mf_curop_check_current(err);
        pthread_mutex_lock(&r->mu);
        if (irc != 0) {
            rc = -1;
            break;
        }
    }
    if (r->node == node)
        mf_raft_node_watch(node, false);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

static int
hook_data_members(void *arg)
{
    mf_repl_t *r = arg;
    pthread_mutex_lock(&r->mu);
    int n = r->nmembers;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void
hook_stats(void *arg, mf_repl_stats_t *out)
{
    mf_repl_t *r = arg;
    for (int i = 0; i < 4; i++)
        out->applied[i] = atomic_load_explicit(&r->st_applied[i], memory_order_relaxed);
    out->retried_commands = atomic_load_explicit(&r->st_retried_cmds, memory_order_relaxed);
    out->retried_statements = atomic_load_explicit(&r->st_retried_stmts, memory_order_relaxed);
    out->session_writes = atomic_load_explicit(&r->st_sess_writes, memory_order_relaxed);
}

static const mf_repl_hooks_t hooks = {
    .stats = hook_stats,
    .txn_committed = hook_txn_committed,
    .session_txn = hook_session_txn,
    .wtimeout_counts = hook_wtimeout_counts,
    .data_members = hook_data_members,
    .wait_members = hook_wait_members,
    .op_time = hook_op_time,
    .after_cluster_time = hook_after_cluster_time,
    .hello = hook_hello,
    .admit = hook_admit,
    .command = hook_command,
    .command_begin = hook_command_begin,
    .command_end = hook_command_end,
    .stmt = hook_stmt,
};

/* ---------- open and close ---------- */

int
mf_repl_open(mf_engine_t *eng, const mf_repl_opts_t *o, mf_repl_t **out, mf_error_t *err)
{
    static const int exists[] = {MF_E_NamespaceExists, 0};
    mf_repl_t *r = mf_calloc(1, sizeof(*r));
    r->eng = eng;
    r->key = o->key != NULL ? mf_strdup(o->key) : NULL;
    r->sec.key = r->key;
    if (o->tls && mf_peer_tls_new(o->tls_cert_key_file, o->tls_ca_file, &r->sec.tls, err) != 0) {
        free(r->key);
        free(r);
        return -1;
    }
    snprintf(r->set_name, sizeof(r->set_name), "%s", o->set_name);
    snprintf(r->bind_ip, sizeof(r->bind_ip), "%s", o->bind_ip ? o->bind_ip : "127.0.0.1");
    snprintf(r->raft_dir, sizeof(r->raft_dir), "%s/raft", o->dbpath);
    r->port = o->port;
    r->raft_port = o->raft_port > 0 ? o->raft_port : o->port + 10000;
    r->oplog_size = (o->oplog_size_mb > 0 ? o->oplog_size_mb : 1024) * 1024 * 1024;
    r->self = -1;
    r->started_ms = mf_now_ms();
    bson_oid_t oid;
    bson_oid_init(&oid, NULL);
    memcpy(&r->epoch, oid.bytes + 4, sizeof(r->epoch));
    r->epoch &= INT64_MAX;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->transfer_mu, NULL);
    mf_cond_init_mono(&r->cv);
    mf_cond_init_mono(&r->work_cv);
    mf_cond_init_mono(&r->oplog_cv);
    mf_cond_init_mono(&r->stop_cv);
    mf_cond_init_mono(&r->sess_cv);

    /* local.oplog.rs (capped) and local.system.replset exist before anything is logged. */
    bson_t cmd;
    bson_init(&cmd);
    BSON_APPEND_UTF8(&cmd, "create", "oplog.rs");
    BSON_APPEND_BOOL(&cmd, "capped", true);
    BSON_APPEND_INT64(&cmd, "size", r->oplog_size);
    int rc = mf_oplog_run(r->eng, "local", &cmd, exists, err);
    bson_reinit(&cmd);
    BSON_APPEND_UTF8(&cmd, "create", "system.replset");
    if (rc == 0)
        rc = mf_oplog_run(r->eng, "local", &cmd, exists, err);
    bson_destroy(&cmd);
    if (rc != 0)
        goto fail;
    load_applied(r);
    r->oplog_written = oplog_newest(r);
    if (mf_oplog_attach(eng, ddl_sink, r, &r->oplog, err) != 0)
        goto fail;
    mf_oplog_set_prepare(r->oplog, prepare);
    eng->repl = &hooks;
    eng->repl_arg = r;

    bson_t *cfg = load_config(r);
    if (cfg != NULL) {
        member_t members[MAX_MEMBERS];
        int n;
        int64_t version;
        mf_error_t cerr;
        if (parse_config(r, cfg, members, &n, &version, &cerr) != 0) {
            mf_log(MF_LOG_WARN, "REPL", "the stored replica set config is not usable here: %s", cerr.msg);
        } else {
            pthread_mutex_lock(&r->mu);
            install_config(r, cfg, members, n, version);
            pthread_mutex_unlock(&r->mu);
            if (start_raft(r, NULL, 0, &cerr) != 0)
                mf_log(MF_LOG_ERROR, "REPL", "cannot start raft: %s", cerr.msg);
        }
        bson_destroy(cfg);
    } else {
        mf_log(MF_LOG_INFO, "REPL", "replica set %s: no config yet; waiting for replSetInitiate", r->set_name);
    }
    *out = r;
    return 0;
fail:
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->work_cv);
    pthread_cond_destroy(&r->oplog_cv);
    pthread_cond_destroy(&r->stop_cv);
    pthread_cond_destroy(&r->sess_cv);
    pthread_mutex_destroy(&r->transfer_mu);
    pthread_mutex_destroy(&r->mu);
    free(r);
    return -1;
}

void
mf_repl_close(mf_repl_t *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    r->writable = false;
    wake_waiters_failed(r, MF_E_InterruptedAtShutdown, "interrupted at shutdown");
    pthread_cond_broadcast(&r->cv);
    pthread_cond_broadcast(&r->work_cv);
    pthread_cond_broadcast(&r->oplog_cv);
    pthread_cond_broadcast(&r->stop_cv);
    pthread_cond_broadcast(&r->sess_cv);
    mf_raft_node_t *node = r->node;
    r->node = NULL; /* submitters check it under r->mu */
    pthread_mutex_unlock(&r->mu);
    if (node != NULL)
        mf_raft_node_close(node, NULL, NULL);
    if (r->loop_running)
        pthread_join(r->loop_thread, NULL);
    if (r->threads_started) {
        pthread_join(r->applier, NULL);
        pthread_join(r->oplog_thread, NULL);
        pthread_join(r->hb_thread, NULL);
    }
    if (r->loop_inited)
        uv_loop_close(&r->loop);
    r->loop_inited = r->loop_running = r->threads_started = false;
}

void
mf_repl_free(mf_repl_t *r)
{
    if (r == NULL)
        return;
    mf_oplog_free(r->oplog);
    while (r->qhead) {
        qent_t *q = r->qhead;
        r->qhead = q->next;
        free(q);
    }
    while (r->ohead) {
        qent_t *q = r->ohead;
        r->ohead = q->next;
        free(q);
    }
    while (r->waiters) {
        waiter_t *w = r->waiters;
        r->waiters = w->next;
        waiter_free(w);
    }
    if (r->config_to_save)
        bson_destroy(r->config_to_save);
    if (r->config)
        bson_destroy(r->config);
    pthread_cond_destroy(&r->cv);
    pthread_cond_destroy(&r->work_cv);
    pthread_cond_destroy(&r->oplog_cv);
    pthread_cond_destroy(&r->stop_cv);
    pthread_cond_destroy(&r->sess_cv);
    free(r->busy_ids);
    pthread_mutex_destroy(&r->transfer_mu);
    pthread_mutex_destroy(&r->mu);
    free(r->key);
    mf_peer_tls_free(r->sec.tls);
    free(r);
}
