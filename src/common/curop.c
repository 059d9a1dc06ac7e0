/*
 * curop.c: the registry of operations in flight (see curop.h).
 *
 * A doubly linked list under one mutex, in registration (and so opid)
 * order. Reports build each entry's document under the mutex into a private
 * array and only then hand the documents out, so a caller's callback (the
 * matcher of a currentOp filter) never runs with the mutex held. The killed
 * flag and progress counters are atomics, so a long loop can poll
 * mf_curop_killed without taking the mutex. The mutex is a leaf lock: no
 * other lock is taken while it is held, in particular never the catalog's.
 *
 * Each client operation that ends adds its duration to its namespace's
 * counters (the top command) and latency histograms, in a small hash table
 * under the same mutex the unregistering already takes, and to the
 * server-wide histograms (opLatencies) beside it.
 */
#include "common/alloc.h"
#include "common/curop.h"
#include "common/clock.h"
#include "common/fmt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_COMMAND_SHOWN 1024
#define MAX_ORIGIN_KEPT (64 * 1024) /* a getMore's originatingCommand, as the profiler shows a command */

/* One namespace's usage counters (the top command), under the registry mutex. */
typedef struct top_entry {
    char *ns; /* owned; NULL: free slot */
    int64_t time_us[MF_TOP_N];
    int64_t count[MF_TOP_N];
    mf_latency_t lat[MF_LAT_N]; /* $collStats latencyStats */
} top_entry_t;

struct mf_curops {
    pthread_mutex_t lock;
    mf_curop_t *head, *tail;
    int64_t next_opid;
    int count;
    _Atomic int kill_all; /* nonzero: every operation is killed with this code */
    top_entry_t **top;    /* open-addressing table by ns, top_cap slots (a power of two), entries owned */
    size_t top_cap, top_n;
    mf_latency_t lat[MF_LAT_N]; /* serverStatus opLatencies */
    mf_curop_conn_t *conns;     /* client connections (mf_curops_conn_open), a doubly linked list */
};

/*
 * A client connection, for $currentOp's idleConnections: guarded by the
 * registry mutex. nops counts the operations running for it (set by
 * mf_curop_set_client, dropped by mf_curop_end), so an idle connection is
 * one with none, told in O(1).
 */
struct mf_curop_conn {
    mf_curops_t *reg;
    mf_curop_conn_t *prev, *next;
    int64_t id;
    char remote[80];
    char app[129];
    const bson_t *meta; /* borrowed: the connection's handshake metadata (see mf_curop_conn_hello) */
    char *user, *user_db; /* owned copies: the user of its last command, NULL none */
    int nops;
};

struct mf_curop {
    mf_curops_t *reg;
    struct mf_curop *prev, *next;
    int64_t opid;
    int64_t client_id;
    char op_type[16];
    char *ns;
    char desc[64];
    char client[64];
    char app[129];        /* the client's appName, "" if none */
    const bson_t *client_meta; /* the connection's handshake metadata, or NULL (borrowed, see mf_curop_set_client) */
    /* The authenticated user ("" none): copies, as a logout or SASL step on the connection rewrites its own. */
    char user[MF_CUROP_USER_MAX], user_db[MF_CUROP_DB_MAX];
    bool has_lsid;             /* lsid_id and lsid_uid hold the command's session (guarded by the registry mutex) */
    uint8_t lsid_id[16], lsid_uid[32];
    bson_t *command;      /* owned */
    int64_t start_us;     /* monotonic */
    int64_t start_wall_ms; /* wall clock at mf_curop_begin: the operation's $$NOW */
    char msg[96];         /* guarded by the registry mutex */
    _Atomic int64_t done, total;
    _Atomic bool has_progress;
    _Atomic int kill_code;   /* 0 while alive */
    _Atomic int64_t deadline; /* monotonic ms, 0 = none */
    int lat_kind;             /* MF_LAT_*, MF_LAT_NONE: not counted */
    int64_t paused_us;        /* waited, not worked (mf_curop_add_paused); its own thread only */
    mf_curop_conn_t *conn;    /* the connection it runs for (counted in its nops), NULL none; registry mutex */
    mf_curop_scan_t scan;     /* its own thread only (mf_curop_note_scan); write_conflicts unused there */
    /* Write conflicts retried: atomic, as a TTL pass's deleter threads share its operation. */
    _Atomic int64_t write_conflicts;
    _Atomic bool waiting_for_lock; /* inside mf_curop_lock's wait */
    /*
     * scan.plan is written once, by its own thread, before this is set
     * (release); currentOp reads it only once this is set (acquire).
     */
    _Atomic bool plan_ready;
    bool no_table_scan; /* mf_curop_set_no_table_scan; its own thread only */
    bson_t *origin;     /* a getMore's cursor's opening command (mf_curop_set_origin), owned; registry mutex */
};

/* The calling thread's operation: per-thread state, not shared. */
static _Thread_local mf_curop_t *current_op;

int64_t
mf_curop_client_id(const mf_curop_t *op)
{
    return op != NULL ? op->client_id : 0;
}

mf_curops_t *
mf_curops_new(void)
{
    mf_curops_t *reg = mf_calloc(1, sizeof(*reg));
    pthread_mutex_init(&reg->lock, NULL);
    reg->next_opid = 1;
    return reg;
}

static void
top_entry_free(top_entry_t *e)
{
    if (e != NULL) {
        free(e->ns);
        free(e);
    }
}

void
mf_curops_free(mf_curops_t *reg)
{
    if (reg == NULL)
        return;
    for (size_t i = 0; i < reg->top_cap; i++)
        top_entry_free(reg->top[i]);
    free(reg->top);
    pthread_mutex_destroy(&reg->lock);
    free(reg);
}


bson_t *
mf_command_redacted(const bson_t *command)
{
    /* The commands that carry them, as mongod's redactForLogging: one look at the first key for every other. */
    static const char *const carriers[] = {"createUser", "updateUser", "saslStart", "saslContinue", "authenticate",
                                           NULL};
    bson_iter_t it;
    bool secret = false;
    if (command == NULL || command->len <= 5)
        return NULL;
    /* The first key sits after the length and the type byte, NUL-terminated inside the document (validated). */
    const char *first = (const char *)bson_get_data(command) + 5;
    if (memchr(first, '\0', command->len - 5) == NULL)
        return NULL;
    for (int i = 0; carriers[i] != NULL && !secret; i++)
        secret = first[0] == carriers[i][0] && strcmp(first, carriers[i]) == 0;
    if (!secret || !bson_iter_init(&it, command))
        return NULL;
    bson_t *out = bson_new();
    bson_iter_init(&it, command);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "pwd") == 0 || strcmp(k, "payload") == 0)
            BSON_APPEND_UTF8(out, k, "xxx");
        else
            bson_append_iter(out, k, -1, &it);
    }
    return out;
}

/*
 * The start of a large command, for its JSON's first max characters: the
 * JSON of a 16 MB insert would cost hundreds of milliseconds (and as much
 * memory) to show 1 KB of it, on every operation. preview_append copies doc's
 * elements into out, strings cut to cap bytes and binaries to cap bytes (cap
 * a multiple of 3, so their base64 is the start of the whole's), documents and
 * arrays likewise, until out passes PREVIEW_BSON_PER_CHAR * cap + 64 bytes:
 * an element's JSON is at least a sixth of its BSON (the worst is a number
 * in a long array, "0, " for 1 + 8 bytes of key "1234567" + 8 of value), so
 * the copy's JSON has the same first cap characters as the whole command's.
 * Below MAX_PREVIEW_DEPTH nesting an element is copied whole (libbson's JSON
 * stops descending there anyway).
 */
#define PREVIEW_BSON_PER_CHAR 6
#define MAX_PREVIEW_DEPTH 100

static void
preview_append(bson_t *out, const bson_t *doc, size_t cap, int depth)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return;
    while (out->len <= PREVIEW_BSON_PER_CHAR * cap + 64 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_type_t t = bson_iter_type(&it);
        if (t == BSON_TYPE_UTF8) {
            uint32_t n;
            const char *str = bson_iter_utf8(&it, &n);
            if (n > cap) {
                n = (uint32_t)cap;
                while (n > 0 && ((unsigned char)str[n] & 0xC0) == 0x80)
                    n--; /* not in the middle of a character */
            }
            bson_append_utf8(out, k, -1, str, (int)n);
        } else if (t == BSON_TYPE_BINARY) {
            bson_subtype_t sub;
            uint32_t n;
            const uint8_t *bin;
            bson_iter_binary(&it, &sub, &n, &bin);
            bson_append_binary(out, k, -1, sub, bin, n > cap ? (uint32_t)cap : n);
        } else if ((t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY) && depth < MAX_PREVIEW_DEPTH) {
            uint32_t n;
            const uint8_t *data;
            bson_t sub, child;
            if (t == BSON_TYPE_DOCUMENT)
                bson_iter_document(&it, &n, &data);
            else
                bson_iter_array(&it, &n, &data);
            if (!bson_init_static(&sub, data, n))
                continue;
            if (t == BSON_TYPE_DOCUMENT)
                bson_append_document_begin(out, k, -1, &child);
            else
                bson_append_array_begin(out, k, -1, &child);
            preview_append(&child, &sub, cap, depth + 1);
            if (t == BSON_TYPE_DOCUMENT)
                bson_append_document_end(out, &child);
            else
                bson_append_array_end(out, &child);
        } else {
            bson_append_iter(out, k, -1, &it);
        }
    }
}

/*
 * preview_of: a new document (the caller owns it) holding doc whole when it
 * is at most max bytes, else the start that shows its JSON's first max
 * characters (preview_append, its cap rounded up to a multiple of 3).
 * *cut (may be NULL) says which.
 */
static bson_t *
preview_of(const bson_t *doc, size_t max, bool *cut)
{
    if (cut != NULL)
        *cut = doc->len > max;
    if (doc->len <= max)
        return bson_copy(doc);
    bson_t *out = bson_new();
    preview_append(out, doc, (max + 2) / 3 * 3, 0);
    return out;
}

/* command as shown (mf_command_shown), its secrets already blanked. */
static bson_t *
shown_of(const bson_t *command, size_t max)
{
    bool cut;
    bson_t *preview = preview_of(command, max, &cut);
    if (!cut)
        return preview;
    char *json = bson_as_relaxed_extended_json(preview, NULL);
    bson_destroy(preview);
    bson_t *out = bson_new();
    if (json != NULL) {
        size_t n = strlen(json);
        if (n > max)
            n = max;
        /* Do not cut a UTF-8 sequence in half. */
        while (n > 0 && ((unsigned char)json[n] & 0xC0) == 0x80)
            n--;
        bson_append_utf8(out, "$truncated", -1, json, (int)n);
        bson_free(json);
    }
    return out;
}

bson_t *
mf_command_shown(const bson_t *command, size_t max)
{
    if (command == NULL)
        return bson_new();
    bson_t *redacted = mf_command_redacted(command);
    bson_t *shown = shown_of(redacted ? redacted : command, max);
    if (redacted != NULL)
        bson_destroy(redacted);
    return shown;
}

mf_curop_t *
mf_curop_begin(mf_curops_t *reg, const char *op_type, const char *ns, const char *desc, const bson_t *command, int64_t client_id)
{
    mf_curop_t *op = mf_calloc(1, sizeof(*op));
    mf_strlcpy(op->op_type, op_type ? op_type : "none", sizeof(op->op_type));
    op->ns = mf_strdup(ns ? ns : "");
    mf_strlcpy(op->desc, desc ? desc : "", sizeof(op->desc));
    op->command = mf_command_shown(command, MAX_COMMAND_SHOWN);
    op->client_id = client_id;
    op->lat_kind = MF_LAT_NONE;
    op->start_us = mf_mono_us();
    op->start_wall_ms = mf_now_ms();
    op->reg = reg;
    pthread_mutex_lock(&reg->lock);
    /* Opids stay within 1..2^31-1, as mongod's 32-bit ones, so killOp (which takes an int32) reaches every one. */
    op->opid = reg->next_opid;
    reg->next_opid = reg->next_opid >= INT32_MAX ? 1 : reg->next_opid + 1;
    op->prev = reg->tail;
    if (reg->tail)
        reg->tail->next = op;
    else
        reg->head = op;
    reg->tail = op;
    reg->count++;
    atomic_store(&op->kill_code, atomic_load(&reg->kill_all));
    pthread_mutex_unlock(&reg->lock);
    return op;
}

void
mf_curop_note_scan(mf_curop_t *op, int64_t keys, int64_t docs, bool collscan,
                   void (*plan_fn)(const void *arg, char *buf, size_t cap), const void *arg)
{
    if (op == NULL)
        return;
    op->scan.keys_examined += keys;
    op->scan.docs_examined += docs;
    op->scan.collscan |= collscan;
    if (op->scan.plan[0] == '\0' && plan_fn != NULL) {
        plan_fn(arg, op->scan.plan, sizeof(op->scan.plan));
        if (op->scan.plan[0] != '\0')
            atomic_store_explicit(&op->plan_ready, true, memory_order_release);
    }
}

void
mf_curop_note_sort(mf_curop_t *op)
{
    if (op != NULL)
        op->scan.has_sort_stage = true;
}

void
mf_curop_note_conflict(mf_curop_t *op)
{
    if (op != NULL)
        atomic_fetch_add_explicit(&op->write_conflicts, 1, memory_order_relaxed);
}

void
mf_curop_scan_of(const mf_curop_t *op, mf_curop_scan_t *out)
{
    if (op == NULL) {
        memset(out, 0, sizeof(*out));
    } else {
        *out = op->scan;
        out->write_conflicts = atomic_load_explicit(&((mf_curop_t *)op)->write_conflicts, memory_order_relaxed);
    }
}

void
mf_curop_set_client(mf_curop_t *op, const mf_curop_client_t *who)
{
    if (op == NULL || who->remote == NULL)
        return;
    pthread_mutex_lock(&op->reg->lock);
    mf_strlcpy(op->client, who->remote, sizeof(op->client));
    if (who->app != NULL && who->app[0])
        mf_strlcpy(op->app, who->app, sizeof(op->app));
    op->client_meta = who->metadata;
    mf_strlcpy(op->user, who->user != NULL ? who->user : "", sizeof(op->user));
    mf_strlcpy(op->user_db, who->user != NULL ? who->user_db : "", sizeof(op->user_db));
    if (who->conn != NULL && op->conn == NULL) {
        mf_curop_conn_t *c = op->conn = who->conn;
        c->nops++;
        /* Its user, as an idle connection shows it: copied only when it changes (a login, a logout). */
        if ((who->user == NULL) != (c->user == NULL) || (who->user != NULL && (strcmp(who->user, c->user) != 0 ||
                                                                              strcmp(who->user_db, c->user_db) != 0))) {
            free(c->user);
            free(c->user_db);
            c->user = who->user ? mf_strdup(who->user) : NULL;
            c->user_db = who->user ? mf_strdup(who->user_db) : NULL;
        }
    }
    if (who->lsid_id != NULL) {
        memcpy(op->lsid_id, who->lsid_id, 16);
        memcpy(op->lsid_uid, who->lsid_uid, 32);
        op->has_lsid = true;
    }
    pthread_mutex_unlock(&op->reg->lock);
}

void
mf_curop_set_progress(mf_curop_t *op, const char *msg, int64_t done, int64_t total)
{
    if (op == NULL)
        return;
    pthread_mutex_lock(&op->reg->lock);
    mf_strlcpy(op->msg, msg ? msg : "", sizeof(op->msg));
    pthread_mutex_unlock(&op->reg->lock);
    atomic_store(&op->done, done);
    atomic_store(&op->total, total);
    atomic_store(&op->has_progress, true);
}

void
mf_curop_interrupt(mf_curop_t *op, int code)
{
    int none = 0;
    atomic_compare_exchange_strong(&op->kill_code, &none, code);
}

bool
mf_curop_killed(const mf_curop_t *op)
{
    return op != NULL && atomic_load(&((mf_curop_t *)op)->kill_code) != 0;
}

void
mf_curop_set_deadline(mf_curop_t *op, int64_t mono_ms)
{
    if (op != NULL)
        atomic_store(&op->deadline, mono_ms);
}

int64_t
mf_curop_deadline(const mf_curop_t *op)
{
    return op != NULL ? atomic_load(&((mf_curop_t *)op)->deadline) : 0;
}

int
mf_curop_check(const mf_curop_t *cop, mf_error_t *err)
{
    mf_curop_t *op = (mf_curop_t *)cop;
    if (op == NULL)
        return 0;
    int code = atomic_load(&op->kill_code);
    if (code == MF_E_InterruptedAtShutdown)
        return mf_err_set(err, code, "interrupted at shutdown");
    if (code != 0)
        return mf_err_set(err, code, "operation was interrupted");
    int64_t d = atomic_load(&op->deadline);
    if (d != 0 && mf_mono_ms() >= d)
        return mf_err_set(err, MF_E_MaxTimeMSExpired, "operation exceeded time limit");
    return 0;
}

int
mf_curop_check_current(mf_error_t *err)
{
    return mf_curop_check(current_op, err);
}

/* How long one timed wait of mf_curop_lock lasts before it checks again. */
#define LOCK_SLICE_MS 20

int
mf_curop_lock(pthread_mutex_t *mu, mf_error_t *err)
{
    mf_curop_t *op = current_op;
    if (pthread_mutex_trylock(mu) == 0)
        return 0;
    if (op == NULL) {
        pthread_mutex_lock(mu);
        return 0;
    }
    int rc = 0;
    int64_t t0 = mf_mono_us();
    atomic_store(&op->waiting_for_lock, true);
    for (;;) {
        if ((rc = mf_curop_check(op, err)) != 0)
            break;
        struct timespec ts = mf_real_deadline(LOCK_SLICE_MS);
        if (pthread_mutex_timedlock(mu, &ts) == 0)
            break;
    }
    atomic_store(&op->waiting_for_lock, false);
    mf_curop_add_paused(op, mf_mono_us() - t0);
    return rc;
}

void
mf_curop_set_waiting_for_lock(mf_curop_t *op, bool waiting)
{
    if (op != NULL)
        atomic_store(&op->waiting_for_lock, waiting);
}

bool
mf_curop_is_background(const mf_curop_t *op)
{
    return op != NULL && strncmp(op->desc, "conn", 4) != 0;
}

int64_t
mf_curop_opid(const mf_curop_t *op)
{
    return op ? op->opid : 0;
}

static uint64_t
ns_hash(const char *ns)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *ns; ns++)
        h = (h ^ (unsigned char)*ns) * 1099511628211ULL;
    return h;
}

/* The slot of ns in the top table (an empty one if absent); the table has a free slot. Mutex held. */
static top_entry_t **
top_slot(top_entry_t **tab, size_t cap, const char *ns)
{
    size_t i = (size_t)ns_hash(ns) & (cap - 1);
    while (tab[i] != NULL && strcmp(tab[i]->ns, ns) != 0)
        i = (i + 1) & (cap - 1);
    return &tab[i];
}

/* ns's entry in the top table, or NULL. Mutex held. */
static top_entry_t *
top_find(mf_curops_t *reg, const char *ns)
{
    return reg->top_cap > 0 ? *top_slot(reg->top, reg->top_cap, ns) : NULL;
}

/* Rebuilds the top table with cap slots, keeping the entries keep() accepts and freeing the others. Mutex held. */
static void
top_rebuild(mf_curops_t *reg, size_t cap, bool (*keep)(const top_entry_t *e, const void *arg), const void *arg)
{
    top_entry_t **tab = mf_calloc(cap, sizeof(*tab));
    size_t n = 0;
    for (size_t i = 0; i < reg->top_cap; i++) {
        top_entry_t *e = reg->top[i];
        if (e == NULL)
            continue;
        if (keep != NULL && !keep(e, arg)) {
            top_entry_free(e);
            continue;
        }
        *top_slot(tab, cap, e->ns) = e;
        n++;
    }
    free(reg->top);
    reg->top = tab;
    reg->top_cap = cap;
    reg->top_n = n;
}

int
mf_latency_bucket(uint64_t us)
{
    if (us == 0)
        return 0;
    int log2 = 63 - __builtin_clzll(us);
    if (log2 < 11)
        return log2; /* [2^k, 2^(k+1)) in bucket k; 0 and 1 in bucket 0 */
    if (log2 < 21)   /* two buckets per power: [2^k, 1.5 x 2^k) and [1.5 x 2^k, 2^(k+1)) */
        return 11 + 2 * (log2 - 11) + (us >= (3ULL << (log2 - 1)));
    return log2 + 10 < MF_LAT_BUCKETS - 1 ? log2 + 10 : MF_LAT_BUCKETS - 1;
}

uint64_t
mf_latency_lower_bound(int b)
{
    if (b <= 0)
        return 0;
    if (b < 11)
        return 1ULL << b;
    if (b < 31) {
        int log2 = 11 + (b - 11) / 2;
        return (b - 11) % 2 == 0 ? 1ULL << log2 : 3ULL << (log2 - 1);
    }
    return 1ULL << (b - 10);
}

/* Counts one operation of us microseconds in h. Registry mutex held. */
static void
lat_add(mf_latency_t *h, int64_t us)
{
    if (us < 0)
        us = 0;
    h->buckets[mf_latency_bucket((uint64_t)us)]++;
    h->sum_us += us;
    h->ops++;
}

void
mf_curop_add_paused(mf_curop_t *op, int64_t us)
{
    if (op != NULL && us > 0)
        op->paused_us += us;
}

int64_t
mf_curop_paused_us(const mf_curop_t *op)
{
    return op != NULL ? op->paused_us : 0;
}

void
mf_curop_set_latency_kind(mf_curop_t *op, int kind)
{
    if (op != NULL)
        op->lat_kind = kind >= 0 && kind < MF_LAT_N ? kind : MF_LAT_NONE; /* read at mf_curop_end, by this thread */
}

int64_t
mf_curop_now_ms(const mf_curop_t *op)
{
    return op != NULL ? op->start_wall_ms : mf_now_ms();
}

void
mf_curop_set_now_ms(mf_curop_t *op, int64_t ms)
{
    if (op != NULL && ms != 0)
        op->start_wall_ms = ms;
}

void
mf_curop_set_no_table_scan(mf_curop_t *op, bool on)
{
    if (op != NULL)
        op->no_table_scan = on;
}

bool
mf_curop_no_table_scan(const mf_curop_t *op)
{
    return op != NULL && op->no_table_scan;
}

void
mf_curop_set_origin(mf_curop_t *op, const bson_t *origin)
{
    if (op == NULL || origin == NULL)
        return;
    /*
     * Bounded (a 1 MB find iterated by 1,000 getMores would copy 1 GB): a
     * larger one keeps the bounded copy of its start that shows its first
     * 64 KB of JSON (preview_append), still a command document, so each
     * place that shows it cuts the command's own text (not a $truncated one).
     */
    bson_t *redacted = mf_command_redacted(origin);
    const bson_t *src = redacted ? redacted : origin;
    bson_t *copy = preview_of(src, MAX_ORIGIN_KEPT, NULL);
    if (redacted != NULL)
        bson_destroy(redacted);
    /*
     * A getMore without a comment takes the opening command's, which its
     * command shows appended (mongod's appendCommentField, curop.cpp).
     */
    bson_iter_t ci;
    bson_t *commented = NULL;
    if (op->command != NULL && !bson_has_field(op->command, "comment") && bson_iter_init_find(&ci, origin, "comment")) {
        commented = bson_copy(op->command);
        bson_append_iter(commented, "comment", -1, &ci);
    }
    pthread_mutex_lock(&op->reg->lock);
    bson_t *old = op->origin;
    op->origin = copy;
    bson_t *old_command = NULL;
    if (commented != NULL) {
        old_command = op->command;
        op->command = commented;
    }
    pthread_mutex_unlock(&op->reg->lock);
    if (old != NULL)
        bson_destroy(old);
    if (old_command != NULL)
        bson_destroy(old_command);
}

bson_t *
mf_curop_take_origin(mf_curop_t *op)
{
    if (op == NULL)
        return NULL;
    pthread_mutex_lock(&op->reg->lock);
    bson_t *origin = op->origin;
    op->origin = NULL;
    pthread_mutex_unlock(&op->reg->lock);
    return origin;
}

bool
mf_curops_latency_get(mf_curops_t *reg, const char *ns, mf_latency_t out[MF_LAT_N])
{
    bool found = false;
    pthread_mutex_lock(&reg->lock);
    if (ns == NULL) {
        memcpy(out, reg->lat, sizeof(reg->lat));
        found = true;
    } else {
        top_entry_t *e = top_find(reg, ns);
        if (e != NULL) {
            memcpy(out, e->lat, sizeof(e->lat));
            found = true;
        }
    }
    pthread_mutex_unlock(&reg->lock);
    if (!found)
        memset(out, 0, sizeof(mf_latency_t) * MF_LAT_N);
    return found;
}

void
mf_latency_append(bson_t *parent, const char *key, const mf_latency_t lat[MF_LAT_N], bool histograms)
{
    static const char *const names[MF_LAT_N] = {"reads", "writes", "commands", "transactions"};
    bson_t all, one, arr, entry;
    char idx[16];
    bson_append_document_begin(parent, key, -1, &all);
    for (int k = 0; k < MF_LAT_N; k++) {
        bson_append_document_begin(&all, names[k], -1, &one);
        if (histograms) {
            int n = 0;
            bson_append_array_begin(&one, "histogram", -1, &arr);
            for (int b = 0; b < MF_LAT_BUCKETS; b++) {
                if (lat[k].buckets[b] == 0)
                    continue;
                snprintf(idx, sizeof(idx), "%d", n++);
                bson_append_document_begin(&arr, idx, -1, &entry);
                BSON_APPEND_INT64(&entry, "micros", (int64_t)mf_latency_lower_bound(b));
                BSON_APPEND_INT64(&entry, "count", lat[k].buckets[b]);
                bson_append_document_end(&arr, &entry);
            }
            bson_append_array_end(&one, &arr);
        }
        BSON_APPEND_INT64(&one, "latency", lat[k].sum_us);
        BSON_APPEND_INT64(&one, "ops", lat[k].ops);
        BSON_APPEND_INT64(&one, "queryableEncryptionLatencyMicros", 0); /* mongod 7.0+; mayfly has no Queryable Encryption */
        bson_append_document_end(&all, &one);
    }
    bson_append_document_end(parent, &all);
}

/* A command that writes the collection it names (its lock in mongod's top is a write lock). */
static bool
top_writes(const mf_curop_t *op)
{
    static const char *const writers[] = {"findAndModify", "findandmodify", "create", "drop", "createIndexes",
                                          "dropIndexes", "deleteIndexes", "collMod", "compact", "convertToCapped",
                                          "cloneCollectionAsCapped", NULL};
    bson_iter_t it;
    if (strcmp(op->op_type, "command") != 0 || op->command == NULL || !bson_iter_init(&it, op->command) ||
        !bson_iter_next(&it))
        return false;
    for (int i = 0; writers[i]; i++)
        if (strcmp(bson_iter_key(&it), writers[i]) == 0)
            return true;
    return false;
}

/*
 * Adds a finished client operation to its namespace's counters (mongod's
 * Top): total, readLock or writeLock, and its kind. Commands not naming a
 * collection (db.$cmd) and the server's own operations are not counted.
 * Only reads and writes of documents add a namespace to the table (they
 * need a user's privileges on it when authorization is on); other commands
 * count in an entry that exists, so a command that merely carries a string
 * first (ping: "x", open to anyone) adds nothing, nor does a drop after it
 * cleared its collection's entry. At most MF_TOP_MAX_NS namespaces are
 * kept (a dropped collection's entry is freed), so the table's memory
 * stays bounded whatever names clients send. Mutex held.
 */
static void
top_record(mf_curops_t *reg, const mf_curop_t *op, int64_t us)
{
    static const char *const kinds[] = {"query", "getmore", "insert", "update", "remove", "command"};
    int kind = -1;
    if (mf_curop_is_background(op))
        return;
    if (op->lat_kind != MF_LAT_NONE)
        lat_add(&reg->lat[op->lat_kind], us);
    if (op->ns[0] == '\0' || strstr(op->ns, ".$cmd") != NULL)
        return;
    for (int k = 0; k < 6; k++)
        if (strcmp(op->op_type, kinds[k]) == 0)
            kind = MF_TOP_QUERIES + k;
    if (kind < 0)
        return;
    top_entry_t *e = top_find(reg, op->ns);
    if (e == NULL) {
        bool adds = kind != MF_TOP_COMMANDS || op->lat_kind == MF_LAT_READS || op->lat_kind == MF_LAT_WRITES;
        if (!adds || reg->top_n >= MF_TOP_MAX_NS)
            return;
        if (reg->top_n + 1 > reg->top_cap / 2)
            top_rebuild(reg, reg->top_cap ? reg->top_cap * 2 : 64, NULL, NULL);
        e = mf_calloc(1, sizeof(*e));
        e->ns = mf_strdup(op->ns);
        *top_slot(reg->top, reg->top_cap, op->ns) = e;
        reg->top_n++;
    }
    int lock = kind == MF_TOP_INSERT || kind == MF_TOP_UPDATE || kind == MF_TOP_REMOVE || top_writes(op)
                   ? MF_TOP_WRITE_LOCK
                   : MF_TOP_READ_LOCK;
    int slots[3] = {MF_TOP_TOTAL, lock, kind};
    for (int k = 0; k < 3; k++) {
        e->time_us[slots[k]] += us;
        e->count[slots[k]]++;
    }
    if (op->lat_kind != MF_LAT_NONE)
        lat_add(&e->lat[op->lat_kind], us);
}

bool
mf_curops_top_get(mf_curops_t *reg, const char *ns, int64_t time_us[MF_TOP_N], int64_t count[MF_TOP_N])
{
    bool found = false;
    pthread_mutex_lock(&reg->lock);
    top_entry_t *e = top_find(reg, ns);
    if (e != NULL) {
        memcpy(time_us, e->time_us, sizeof(e->time_us));
        memcpy(count, e->count, sizeof(e->count));
        found = true;
    }
    pthread_mutex_unlock(&reg->lock);
    if (!found) {
        memset(time_us, 0, sizeof(int64_t) * MF_TOP_N);
        memset(count, 0, sizeof(int64_t) * MF_TOP_N);
    }
    return found;
}

typedef struct {
    const char *db, *coll;
    size_t dblen;
} forget_arg_t;

/* top_rebuild's keep for mf_curops_top_forget: every entry but db.coll's (db's, coll NULL). */
static bool
top_not_forgotten(const top_entry_t *e, const void *arg)
{
    const forget_arg_t *f = arg;
    return strncmp(e->ns, f->db, f->dblen) != 0 || e->ns[f->dblen] != '.' ||
           (f->coll != NULL && strcmp(e->ns + f->dblen + 1, f->coll) != 0);
}

void
mf_curops_top_forget(mf_curops_t *reg, const char *db, const char *coll)
{
    forget_arg_t f = {db, coll, strlen(db)};
    char ns[512];
    bool any = false;
    if (coll != NULL)
        mf_strjoin(ns, sizeof(ns), db, ".", coll);
    pthread_mutex_lock(&reg->lock);
    if (coll != NULL) {
        any = top_find(reg, ns) != NULL;
    } else {
        for (size_t i = 0; i < reg->top_cap && !any; i++)
            any = reg->top[i] != NULL && !top_not_forgotten(reg->top[i], &f);
    }
    if (any)
        top_rebuild(reg, reg->top_cap, top_not_forgotten, &f); /* linear probing: rebuilt rather than emptied in place */
    pthread_mutex_unlock(&reg->lock);
}

void
mf_curop_end(mf_curop_t *op)
{
    if (op == NULL)
        return;
    mf_curops_t *reg = op->reg;
    int64_t us = mf_mono_us() - op->start_us - op->paused_us;
    pthread_mutex_lock(&reg->lock);
    top_record(reg, op, us);
    if (op->conn != NULL)
        op->conn->nops--;
    if (op->prev)
        op->prev->next = op->next;
    else
        reg->head = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        reg->tail = op->prev;
    reg->count--;
    pthread_mutex_unlock(&reg->lock);
    if (current_op == op)
        current_op = NULL;
    bson_destroy(op->command);
    if (op->origin != NULL)
        bson_destroy(op->origin);
    free(op->ns);
    free(op);
}

void
mf_curop_set_current(mf_curop_t *op)
{
    current_op = op;
}

mf_curop_t *
mf_curop_current(void)
{
    return current_op;
}

/* mongod's Date_t::toString: "2026-12-04T01:02:03.456+00:00" (UTC). */
static void
iso_utc(int64_t ms, char *buf, size_t cap)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, cap - n, ".%03d+00:00", (int)(ms % 1000));
}

/*
 * The fields every client entry of currentOp starts with, an operation's
 * and an idle connection's alike (mongod's reportCurrentOpForClient): out
 * initialised here; client_id 0 is the server's own work (no
 * connectionId); remote, app may be ""; meta, host and user may be NULL.
 */
static void
client_head(bson_t *out, const char *host, const char *desc, int64_t client_id, const char *remote, const char *app,
            const bson_t *meta, bool active, const char *now, const char *user, const char *user_db)
{
    bson_init(out);
    BSON_APPEND_UTF8(out, "type", "op");
    if (host != NULL)
        BSON_APPEND_UTF8(out, "host", host);
    BSON_APPEND_UTF8(out, "desc", desc);
    if (client_id > 0)
        mf_append_number(out, "connectionId", client_id); /* as mongod: an int */
    if (remote[0])
        BSON_APPEND_UTF8(out, "client", remote);
    if (app[0])
        BSON_APPEND_UTF8(out, "appName", app);
    if (meta != NULL)
        BSON_APPEND_DOCUMENT(out, "clientMetadata", meta);
    BSON_APPEND_BOOL(out, "active", active);
    BSON_APPEND_UTF8(out, "currentOpTime", now);
    if (user != NULL) {
        bson_t users, u;
        BSON_APPEND_ARRAY_BEGIN(out, "effectiveUsers", &users);
        BSON_APPEND_DOCUMENT_BEGIN(&users, "0", &u);
        BSON_APPEND_UTF8(&u, "user", user);
        BSON_APPEND_UTF8(&u, "db", user_db);
        bson_append_document_end(&users, &u);
        bson_append_array_end(out, &users);
    }
    BSON_APPEND_BOOL(out, "isFromUserConnection", client_id > 0);
    BSON_APPEND_BOOL(out, "threaded", true); /* a thread per client, as mongod says of every entry */
}

/* Builds op's currentOp document into out (initialised here); now is the report's time. Registry mutex held. */
static void
op_doc(const mf_curop_t *op, const char *host, int64_t now_us, const char *now, bson_t *out)
{
    int64_t us = now_us - op->start_us;
    client_head(out, host, op->desc, op->client_id, op->client, op->app, op->client_meta, true, now,
                op->user[0] ? op->user : NULL, op->user_db);
    /* An int, as mongod's (static_cast<int>): exporters read it as int32 and skip an entry that is not. */
    BSON_APPEND_INT32(out, "opid", (int32_t)op->opid);
    if (op->has_lsid) {
        bson_t ls;
        BSON_APPEND_DOCUMENT_BEGIN(out, "lsid", &ls);
        BSON_APPEND_BINARY(&ls, "id", BSON_SUBTYPE_UUID, op->lsid_id, 16);
        BSON_APPEND_BINARY(&ls, "uid", BSON_SUBTYPE_BINARY, op->lsid_uid, 32);
        bson_append_document_end(out, &ls);
    }
    BSON_APPEND_INT64(out, "secs_running", us / 1000000);
    BSON_APPEND_INT64(out, "microsecs_running", us);
    BSON_APPEND_UTF8(out, "op", op->op_type);
    BSON_APPEND_UTF8(out, "ns", op->ns);
    BSON_APPEND_DOCUMENT(out, "command", op->command);
    if (op->origin != NULL) {
        bson_t *shown = mf_command_shown(op->origin, MAX_COMMAND_SHOWN); /* as its command: 1 KB */
        BSON_APPEND_DOCUMENT(out, "originatingCommand", shown);
        bson_destroy(shown);
    }
    if (atomic_load(&((mf_curop_t *)op)->has_progress)) {
        bson_t pr;
        BSON_APPEND_UTF8(out, "msg", op->msg);
        BSON_APPEND_DOCUMENT_BEGIN(out, "progress", &pr);
        BSON_APPEND_INT64(&pr, "done", atomic_load(&((mf_curop_t *)op)->done));
        BSON_APPEND_INT64(&pr, "total", atomic_load(&((mf_curop_t *)op)->total));
        bson_append_document_end(out, &pr);
    }
    if (atomic_load_explicit(&((mf_curop_t *)op)->plan_ready, memory_order_acquire))
        BSON_APPEND_UTF8(out, "planSummary", op->scan.plan);
    bson_t none;
    BSON_APPEND_INT32(out, "numYields", 0);
    BSON_APPEND_DOCUMENT_BEGIN(out, "locks", &none); /* mayfly takes no lock manager's locks to list */
    bson_append_document_end(out, &none);
    BSON_APPEND_BOOL(out, "waitingForLock", atomic_load(&((mf_curop_t *)op)->waiting_for_lock));
    BSON_APPEND_DOCUMENT_BEGIN(out, "lockStats", &none);
    bson_append_document_end(out, &none);
    BSON_APPEND_BOOL(out, "waitingForFlowControl", false);
    BSON_APPEND_DOCUMENT_BEGIN(out, "flowControlStats", &none);
    bson_append_document_end(out, &none);
    if (atomic_load(&((mf_curop_t *)op)->kill_code) != 0)
        BSON_APPEND_BOOL(out, "killPending", true);
}

/* Snapshot of every entry's document, taken under the mutex. */
static bson_t *
snapshot(mf_curops_t *reg, const char *host, int *n)
{
    int cap = 16;
    bson_t *docs = mf_malloc((size_t)cap * sizeof(*docs));
    int64_t now = mf_mono_us();
    char wall[40];
    iso_utc(mf_now_ms(), wall, sizeof(wall));
    *n = 0;
    pthread_mutex_lock(&reg->lock);
    for (mf_curop_t *op = reg->head; op; op = op->next) {
        if (*n == cap) {
            cap *= 2;
            docs = mf_realloc(docs, (size_t)cap * sizeof(*docs));
        }
        op_doc(op, host, now, wall, &docs[(*n)++]);
    }
    pthread_mutex_unlock(&reg->lock);
    return docs;
}

void
mf_curops_report_each(mf_curops_t *reg, const char *host, void (*fn)(void *arg, const bson_t *doc), void *arg)
{
    int n;
    bson_t *docs = snapshot(reg, host, &n);
    for (int i = 0; i < n; i++) {
        fn(arg, &docs[i]);
        bson_destroy(&docs[i]);
    }
    free(docs);
}

/* ---------- client connections ---------- */

mf_curop_conn_t *
mf_curops_conn_open(mf_curops_t *reg, int64_t id, const char *remote)
{
    mf_curop_conn_t *c = mf_calloc(1, sizeof(*c));
    c->reg = reg;
    c->id = id;
    mf_strlcpy(c->remote, remote ? remote : "", sizeof(c->remote));
    pthread_mutex_lock(&reg->lock);
    c->next = reg->conns;
    if (reg->conns != NULL)
        reg->conns->prev = c;
    reg->conns = c;
    pthread_mutex_unlock(&reg->lock);
    return c;
}

void
mf_curop_conn_hello(mf_curop_conn_t *c, const char *app, const bson_t *metadata)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->reg->lock);
    mf_strlcpy(c->app, app ? app : "", sizeof(c->app));
    c->meta = metadata;
    pthread_mutex_unlock(&c->reg->lock);
}

void
mf_curop_conn_close(mf_curop_conn_t *c)
{
    if (c == NULL)
        return;
    mf_curops_t *reg = c->reg;
    pthread_mutex_lock(&reg->lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        reg->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&reg->lock);
    free(c->user);
    free(c->user_db);
    free(c);
}


/* An idle connection's currentOp document (registry mutex held), as mongod's reportCurrentOpForClient without an operation. */
static void
conn_doc(const mf_curop_conn_t *c, const char *host, const char *now, bson_t *out)
{
    char desc[32];
    snprintf(desc, sizeof(desc), "conn%lld", (long long)c->id);
    client_head(out, host, desc, c->id, c->remote, c->app, c->meta, false, now, c->user, c->user_db);
}

void
mf_curops_report_idle_conns(mf_curops_t *reg, const char *host, void (*fn)(void *arg, const bson_t *doc), void *arg)
{
    size_t n = 0, cap = 0;
    bson_t *docs = NULL;
    char now[40];
    iso_utc(mf_now_ms(), now, sizeof(now));
    pthread_mutex_lock(&reg->lock);
    for (mf_curop_conn_t *c = reg->conns; c != NULL; c = c->next) {
        if (c->nops > 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            docs = mf_realloc(docs, cap * sizeof(*docs));
        }
        conn_doc(c, host, now, &docs[n++]);
    }
    pthread_mutex_unlock(&reg->lock);
    for (size_t i = 0; i < n; i++) {
        fn(arg, &docs[i]);
        bson_destroy(&docs[i]);
    }
    free(docs);
}


void
mf_curops_seed_opid(mf_curops_t *reg, int64_t next)
{
    pthread_mutex_lock(&reg->lock);
    reg->next_opid = next;
    pthread_mutex_unlock(&reg->lock);
}

bool
mf_curops_kill(mf_curops_t *reg, int64_t opid)
{
    return mf_curops_kill_as(reg, opid, NULL) == 1;
}

bool
mf_curop_owner_is(const char *owner, const char *user, const char *db)
{
    size_t ul = strlen(user);
    return strncmp(owner, user, ul) == 0 && owner[ul] == '@' && strcmp(owner + ul + 1, db) == 0;
}

int
mf_curops_kill_as(mf_curops_t *reg, int64_t opid, const char *owner)
{
    int ret = 0;
    pthread_mutex_lock(&reg->lock);
    for (mf_curop_t *op = reg->head; op; op = op->next) {
        if (op->opid == opid) {
            /* op's user is set under reg->lock (mf_curop_set_client). */
            if (owner != NULL && (!op->user[0] || !mf_curop_owner_is(owner, op->user, op->user_db))) {
                ret = -1;
                break;
            }
            int none = 0;
            atomic_compare_exchange_strong(&op->kill_code, &none, MF_E_Interrupted);
            ret = 1;
            break;
        }
    }
    pthread_mutex_unlock(&reg->lock);
    return ret;
}

void
mf_curops_interrupt_all(mf_curops_t *reg, int code)
{
    pthread_mutex_lock(&reg->lock);
    atomic_store(&reg->kill_all, code);
    for (mf_curop_t *op = reg->head; op; op = op->next)
        atomic_store(&op->kill_code, code);
    pthread_mutex_unlock(&reg->lock);
}

int
mf_curops_count(mf_curops_t *reg)
{
    pthread_mutex_lock(&reg->lock);
    int n = reg->count;
    pthread_mutex_unlock(&reg->lock);
    return n;
}
