/*
 * ttl_monitor.c: the TTL monitor, the thread that deletes expired documents.
 *
 * The algorithm (SPEC D1-D9):
 *
 *   loop:
 *     if ttlMonitorEnabled: run one PASS
 *     sleep until the earliest deadline (precise mode, SPEC D7 beyond) or
 *       ttlMonitorSleepSecs, whichever is sooner; woken early by setParameter,
 *       DDL (mf_ttl_notify) and writes that create an earlier deadline.
 *
 *   PASS: a sequence of SUB-PASSES until no TTL index has expired documents
 *   left. A sub-pass takes the list of TTL indexes (copied out of the
 *   catalog again only when the catalog's version moved, or once a second:
 *   targets_get, so a pass does not walk every collection) and visits
 *   them round-robin; a visit deletes from one index until it has deleted
 *   ttlIndexDeleteTargetDocs documents, spent ttlIndexDeleteTargetTimeMS, or
 *   found nothing more due; an index that hit a target is visited again in
 *   the next round. A sub-pass ends when no index has work or after
 *   ttlMonitorSubPassTargetSecs; then a new one starts (SPEC D2).
 *
 *   A VISIT reads the TTL index itself: its keys are keystrings, and every
 *   Date key lies in one contiguous range (mf_ks_date_key, keystring.h), so the
 *   documents due are exactly the keys in [Date(min), Date(now - N)]. It
 *   collects up to a batch of record ids from that range, then deletes them
 *   through mf_delete_rids (query/batch.c), the same path as a user's
 *   multi-delete, in one WiredTiger transaction per batch. Each document is
 *   re-fetched and re-checked inside the transaction: its earliest Date in
 *   the field (arrays: the earliest element, SPEC C2) plus N must have
 *   passed, and a partial filter must still match (SPEC C5); a document
 *   updated since the scan is judged on its new content. Non-date values
 *   never fall in the Date range (SPEC C3); pre-1970 dates are negative and
 *   sort first (SPEC C8). Hidden indexes are visited like any other (C6).
 *
 *   Deadlines: the smallest Date key of each TTL index plus N is when that
 *   index next has work. The minimum over all indexes is the monitor's
 *   deadline; the write observer compares each inserted or updated
 *   document's deadline with it and wakes the monitor if earlier.
 *   Each index's deadline is kept with its target (beyond MongoDB), so a
 *   precise pass and the recomputation after it cost what the due indexes
 *   cost, not what every TTL index does (with 300 TTL collections beside one
 *   whose documents expire 5,000 a second, each 5 ms pass visited and read
 *   all 301: the monitor used a whole core, 197 us per deleted document
 *   against 16 alone). A precise pass visits only the indexes whose
 *   deadline has come (or is not known); the recomputation after it reads
 *   only those it visited, and takes the deadlines writers noted: after its
 *   commit a write lowers its index's ttl_noted_due, and the first such
 *   note names the index to the monitor (note_due; more than NOTED_MAX
 *   named, or a transaction over more TTL indexes than it records, and it
 *   reads them all); a write whose deadline comes before the monitor's,
 *   compared again after its note, wakes it. Every index is visited by a
 *   periodic pass (every ttlMonitorSleepSecs, as MongoDB's) and by the pass
 *   that forgets the floors (every FULL_SCAN_MS), and every deadline is read
 *   after DDL or a parameter change, for a reader of the backlog (the
 *   console's per-index view and the backlog are rebuilt only then), and at
 *   the first recomputation ttlMonitorDeadlineRefreshMS (1 s) after the last
 *   such refresh: all of them with at most REFRESH_SLICE TTL indexes, else
 *   the next REFRESH_SLICE, round robin, so the refresh costs no more with
 *   1,000 TTL collections than with 64 (it was 1,000 reads a second, and the
 *   precise pass after each full read waited for it: lateness p99 17-19 ms
 *   with 1,000 other TTL collections, 6-7 ms with slices). A visit that
 *   reads no due key from an index whose deadline has not come leaves the
 *   deadline as read. A pass over every index is a sweep that precise
 *   passes carry out SWEEP_SLICE indexes at a time (see run_pass).
 *
 *   Floors (beyond MongoDB): deleted keys stay in WiredTiger's pages as
 *   tombstones until the pages are reconciled, and a scan from Date(min)
 *   steps over every one of them (and then forces the page's eviction), so
 *   each pass would cost more the more was already deleted. For each
 *   ascending TTL index the monitor keeps a floor, the Date below which it
 *   has deleted every key (set when a batch deleted every key it read: the
 *   cutoff, or the resume key), and scans from there. Writes lower it: each
 *   committed write records the earliest TTL Date it put into each TTL index
 *   (mf_index_t.ttl_dirty_min, after the commit, so a scan that takes the
 *   value sees the document); a batch takes that value, scans from the lower
 *   of the two, and gives it back unless it moved the floor past it. A new
 *   index (and every index after a restart) starts unknown (INT64_MIN), and
 *   the first pass FULL_SCAN_MS after the last forgetting forgets all
 *   floors anyway, as a safety net (with nothing due anywhere, that is the
 *   periodic pass, ttlMonitorSleepSecs on: no pass is made just for it).
 *   A batch that deleted every key it read and whose read met the end of
 *   the index (no key of any type past the due range) sets the floor past
 *   every Date (FLOOR_ALL): until a write records a Date, the index has no
 *   deadline and a visit nothing to read, without a seek. Such a seek is
 *   what an emptied index made costly: WiredTiger's search_near, finding
 *   nothing at or after the key, walks back over every tombstone before it
 *   (a burst's million, 8 ms, at each read until the pages are reconciled).
 *
 *   Coalescing (beyond MongoDB): precise passes start at most every
 *   ttlMonitorCoalesceMS (5 ms), so a stream of deadlines is deleted in
 *   batches per window, not a pass per document (lateness stays within the
 *   window); a lone deadline after a quiet spell still runs at once.
 *
 *   Parallel batches (beyond MongoDB): a visit works in rounds. A round
 *   reads up to ROUND_TXNS * W batches of record ids, cuts them into pieces
 *   of at most a batch (one transaction each), and W threads (the monitor
 *   and W-1 deleters, ttlMonitorWorkers, default one per CPU) take the
 *   pieces in order from a shared counter until none is left, so a mass
 *   expiry uses every core and a thread slowed down by other work on its
 *   core (a busy neighbour, a client) simply takes fewer pieces; all finish
 *   before the round ends, under the same catalog lock. While the deleters
 *   start on the first pieces the monitor reads the next round's keys (read
 *   ahead, from the resume key), then takes pieces too. The read
 *   ahead is only used by the next round if the index is still the same one
 *   (ident, expireAfterSeconds); its floor comes from the cutoff it was read
 *   at, and every document is re-checked in its transaction anyway.
 *   Deleters run at the monitor's lower priority and pace themselves as it
 *   does.
 *   An archiving index (SPEC I2) deletes on the monitor's thread only.
 *
 *   Pacing (SPEC D9 beyond): batches are small (ttlMonitorBatchDocs) and
 *   the catalog lock is dropped between them. While foreground operations
 *   are running (their counter moved during the last batch), every thread
 *   deleting gives the CPU up (sched_yield) every YIELD_EVERY documents
 *   (about 0.3 ms of work): on Linux's EEVDF scheduler a waking client
 *   thread does not get in before the running thread's slice ends (1.4 ms
 *   here by default), which was the whole of a client's p99 during a mass
 *   expiry (1.1-1.4 ms against 0.3-0.4 ms with the yields, at the same
 *   deletion rate, on 2 cores). The monitor and the deleters run at
 *   nice 10 (TTL_NICE, ttl_lower_priority) and ask for the background
 *   threads' long time slice (common/sched.h): short ones made clients in
 *   other programs wait longer (see ttl_lower_priority). Nice
 *   weighs threads inside one scheduling group, and Linux puts each service
 *   (systemd: a cgroup) or session (an autogroup) in a group of its own: a
 *   busy program elsewhere on the machine shares the CPU with the server as
 *   a whole, and inside the server the clients' threads come first. With
 *   a busy loop started as a program of its own, a mass expiry with a
 *   client running kept 0.32-1.10x of its rate (median 0.62x, 14 runs, 2
 *   cores); a busy loop in the server's own session gets the share of a
 *   nice-0 thread against nice-10 ones, and the expiry fell to 0.13-0.38x.
 *   At nice 0 in one session it kept 0.55-0.86x, but the client's own
 *   process then shared its core evenly with the deleters, and its p99
 *   during a 1,000,000-document mass expiry rose to 3.5-4.7x idle
 *   (bench/ttl_bench.js, against about 1-2x at nice 10): the clients come
 *   first. A client is another program, though, in a group of its own, and
 *   beside the deleters and WiredTiger's threads its thread waited for the
 *   scheduler's tick (4 ms here) whatever their nice: with
 *   ttlMonitorGroupNice (19 by default; 0: off), while clients run and a visit
 *   has more rounds to go, the monitor lowers the server's whole group
 *   (group_watch) until the backlog is gone, or at once if that starves the
 *   expiry. Optionally (ttlMonitorYieldPercent, default 0) the monitor also
 *   sleeps between batches for that percentage of the batch's time.
 *
 * Concurrency: the monitor thread owns its WiredTiger session. It holds the
 * catalog's shared lock only while scanning and deleting one round, and
 * re-finds the collection and index by namespace, UUID and name for every
 * round, so a drop or rename between rounds is seen (drop stops expiry,
 * rename does not, SPEC D6). Metrics are atomics; the lateness histogram is
 * updated under its own mutex.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/sysres.h"
#include "common/alloc.h"
#include "archive/archive.h"
#include "catalog/coll_write.h"
#include "catalog/observer.h"
#include "catalog/timeseries.h"
#include "common/curop.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "common/sched.h"
#include "index/index.h"
#include "index/keystring.h"
#include "query/batch.h"
#include "doc/match.h"
#include "doc/path.h"
#include "ttl/ttl.h"

#define DATE_KEY_LEN MF_KS_DATE_LEN
#define NO_DEADLINE INT64_MAX
#define BACKLOG_CAP 1000000
#define LAT_BUCKETS 64
#define LAT_FINE 128 /* latenesses below this many ms are also counted per millisecond (exact quantiles) */
#define RATE_SECS 10
#define ARCHIVE_BATCH_FACTOR 4
#define MAX_WORKERS 16 /* ttlMonitorWorkers' maximum */
#define ROUND_TXNS 4 /* pieces (transactions) per deleting thread a round reads (see "Parallel batches") */
#define MAX_PIECES (ROUND_TXNS * MAX_WORKERS) /* a round's pieces at most */
#define FULL_SCAN_MS 10000 /* floors are forgotten this often (see "Floors") */
#define FLOOR_ALL INT64_MAX /* a floor past every Date: the index's last read met its end (see "Floors") */
#define FDS_RESUME_MS 100 /* a pass cut short by TooManyFilesOpen goes on after this long (see monitor_main) */
#define TTL_NICE 10 /* the monitor's and deleters' nice value (see "Pacing") */
#define YIELD_EVERY 96 /* documents deleted between two sched_yield()s while clients run (see "Pacing") */
#define HOLD_CURSORS_MS 50      /* the monitor keeps its cursors across waits shorter than this (see monitor_main) */
#define HOLD_CURSORS_MAX_MS 1000 /* ... and closes them at least this often */
#define TARGETS_MAX_AGE_MS 1000 /* the cached list of TTL indexes is rebuilt at least this often (see targets_get) */
#define DUE_UNKNOWN INT64_MIN   /* a target's deadline not read yet: a pass visits it */
#define NOTED_MAX 64            /* writers' notes a recomputation takes one by one (more: it reads every index) */
#define REFRESH_SLICE 64        /* deadlines the periodic refresh reads again at most (see compute_next_due) */
#define SWEEP_SLICE 32          /* indexes a precise pass visits beyond the due ones while a sweep runs (see run_pass) */

/* One TTL index as a sub-pass sees it (copied out of the catalog). */
typedef struct ttl_target {
    /*
     * What every pass and recomputation looks at, for every target, comes
     * first (one cache line per target; the rest is read only for the
     * targets visited or read). Its deadline as last read (see
     * "Deadlines"): DUE_UNKNOWN until read, NO_DEADLINE when nothing is
     * indexed by a Date. stale: a pass visited it since, so the next
     * recomputation reads it again.
     */
    int64_t due;
    size_t resume_len; /* 0: start of the Date range */
    bool more; /* selected by this sub-pass, and hit a target on its last visit */
    bool stale;
    int64_t secs;
    char *index; /* owned; index names have no length limit */
    uint8_t uuid[16];
    char ns[256];
    uint8_t resume[128]; /* a Date, then the rest of the key (a record id, or a compound key's other fields) */
    char ident[80]; /* the index's ident: writers' notes name it (see note_due) */
} ttl_target_t;

/* One TTL index as the console shows it (mf_ttl_indexes_append). */
typedef struct idx_snap {
    char ns[256];
    char *index;    /* owned */
    char field[256]; /* the key's field */
    int desc;       /* -1 for a descending key, else 1 */
    int64_t secs;   /* expireAfterSeconds as specified (not the bucket span a time-series adds) */
    bool archive;   /* the index's archive option (SPEC I2) */
    int64_t due;    /* NO_DEADLINE if nothing is indexed by a Date */
    int64_t backlog;
} idx_snap_t;

struct mf_ttl_monitor {
    mf_ttl_env_t env;
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool kick;
    _Atomic int64_t next_due_ms; /* computed from the indexes (committed data) */
    /*
     * What a write is compared with to decide whether to wake the monitor:
     * next_due_ms once computed, but "no deadline" from the start of a pass
     * or a recomputation until its result is known, so a write that commits
     * while the monitor is looking (its index already read) still wakes it.
     */
    _Atomic int64_t watch_due;
    _Atomic bool busy; /* in a pass: serverStatus does not wait for a fresh backlog */
    /* Why passes are paused now (mf_ttl_monitor_pause: a replica-set member that is not primary), or NULL. */
    _Atomic(const char *) paused;
    _Atomic int64_t batch_opid; /* the batch in flight's operation id, 0 if none (a pause kills it) */
    _Atomic int64_t deleted, passes, subpasses;
    _Atomic int64_t invalid_skips; /* serverStatus metrics.ttl.invalidTTLIndexSkips (collect_targets) */
    _Atomic int64_t visits; /* TTL indexes visited by passes, summed (serverStatus metrics.ttl.indexVisits) */
    _Atomic int64_t sweeps; /* passes over every TTL index begun, whole or sliced (metrics.ttl.sweeps) */
    _Atomic int64_t deadline_reads; /* TTL index deadlines read from their indexes (metrics.ttl.deadlineReads) */
    /* Committed batches, those whose records went in ranges, and the records that did (query/batch.h). */
    _Atomic int64_t batches, range_batches, range_records;
    _Atomic int64_t index_ranges; /* indexes whose entries a batch removed in ranges, summed */
    _Atomic int64_t pace_dps;
    /*
     * Backlog (SPEC D8 beyond): due keys counted by the monitor whenever it
     * recomputes its deadline, lowered as it deletes. serverStatus asks for a
     * fresh count (refresh_req) and waits a little for it (refresh_done,
     * refresh_cv); it never reads an index itself.
     */
    _Atomic int64_t backlog;
    _Atomic bool backlog_capped;
    int64_t refresh_req, refresh_done; /* guarded by mu */
    /*
     * Out of file descriptors (TooManyFilesOpen; monitor thread only): when
     * it was last logged; fds_short, set by the visit or read that met it;
     * fds_from and fds_from_due, the target where passes and deadline
     * reads start (each its own, so that neither skips what the other
     * reached), so that with more TTL indexes than files this process may
     * open, each round goes on where the last one stopped and the files it
     * does not touch are closed in the meantime (see storage_wt.c, "Open
     * files").
     */
    int64_t fds_warned_ms;
    bool fds_short;
    int fds_from, fds_from_due;
    pthread_cond_t refresh_cv;    /* deletions per second over the last visit that deleted */
    /*
     * Per-index view for the console (mf_ttl_indexes_append): rebuilt with
     * every deadline recomputation, each backlog lowered as its index's
     * batches commit. Guarded by lat_mu.
     */
    idx_snap_t *snap;
    int nsnap, capsnap;
    /* lateness histogram: bucket i holds latenesses in [2^(i-1), 2^i) ms; bucket 0 is < 1 ms */
    pthread_mutex_t lat_mu;
    int64_t lat_sum;   /* ms, for Prometheus's _sum */
    /* Deletions in each of the last RATE_SECS wall seconds (rate[s % RATE_SECS], stamped with s). */
    int64_t rate_n[RATE_SECS], rate_sec[RATE_SECS];
    int64_t lat_count;
    int64_t lat_max;
    int64_t lat_buckets[LAT_BUCKETS];
    /*
     * lat_fine[i] counts latenesses of exactly i ms (i < LAT_FINE): the
     * quantiles (p50Ms, p99Ms) are read from it to the millisecond where they
     * fall below LAT_FINE, instead of as a power-of-two bucket's upper edge
     * (a p99 of 6 ms and one of 9 ms are both "8" in the log2 histogram).
     */
    int64_t lat_fine[LAT_FINE];
    /*
     * Deleters (see "Parallel batches"): threads started on first use.
     * pool_cv wakes them for a round, done_cv wakes the monitor when the
     * last of them finds no piece left. A round's pieces are
     * jobs[0..round_np) (set under pool_mu before the wake-up), taken in
     * order through round_next by every deleting thread; round_failed stops
     * the taking once a piece has failed.
     */
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv, done_cv;
    struct deleter *deleters;
    int ndeleters, pending;
    bool pool_quit;
    struct del_job *jobs; /* MAX_PIECES of them for the rounds, allocated on first use (monitor thread) */
    int round_np;
    _Atomic int round_next;
    _Atomic bool round_failed;
    _Atomic int64_t deleter_deleted; /* documents deleted by deleters (not by the monitor's own pieces) */
    /*
     * Floors (see "Floors" above; monitor thread only): per TTL index
     * instance (by ident), the Date below which its keys are known deleted.
     * dirty_min: the earliest Date committed by a write since the last full
     * scan (INT64_MAX: none).
     */
    struct floor *floors;
    int nfloors, capfloors;
    int64_t last_full_ms;
    int ncpu; /* CPUs granted (env->cpus, read once at start: not once per visit) */
    _Atomic bool force_full; /* a write could not record its Dates (see obs_txn_end): forget the floors */
    int64_t cursors_released_ms; /* monitor thread only: when it last closed its cached cursors (release_cursors) */
    /*
     * The parameters and fail points the monitor reads on every pass, found
     * once by name at start: both tables are fixed arrays owned by the
     * engine and outlive the monitor, and a lookup by name costs about 40
     * string compares (a fifth of a one-document pass's instructions).
     */
    struct {
        mf_param_t *enabled, *sleep_secs, *precise, *coalesce_ms, *batch_deletes, *batch_docs, *target_docs,
            *target_ms, *subpass_secs, *yield_pct, *workers, *archive_retention, *due_refresh_ms, *group_nice;
    } prm;
    /*
     * The server's scheduling group during a mass expiry beside clients
     * (see "Pacing"; monitor thread only). group_base: the group's nice
     * value when the monitor started, -1 when the server has no group of
     * its own to lower; group_lowered: this monitor set it to
     * ttlMonitorGroupNice (atomic: serverStatus ttl.groupLowered reads
     * it); group_probing: it is watching what other programs use before
     * lowering it, since group_check_ms, from group_seen, what the
     * machine's CPUs and the process had used then; while
     * lowered, group_run_ns and group_wait_ns: the monitor thread's times
     * at group_check_ms; group_hold_ms: no lowering before then.
     */
    int group_base;
    _Atomic bool group_lowered;
    bool group_probing;
    int64_t group_check_ms, group_run_ns, group_wait_ns, group_hold_ms;
    mf_sched_sample_t group_seen;
    /* serverStatus ttl.groupLowerings, groupStarved (put back early), groupDeclined (not lowered). */
    _Atomic int64_t group_lowerings, group_starved, group_declined;
    /*
     * The clients' look while the group is lowered (mf_ttl_group_poll, any
     * thread): poll_check_ms, claimed by compare-and-swap, spaces the looks
     * GROUP_CHECK_MS apart; a look compares a new sample with poll_seen and
     * replaces it, under poll_mu (tried, not waited for: a look under way
     * is enough); poll_restored: a client thread put the group back,
     * for the monitor to take over at its next look.
     */
    _Atomic int64_t poll_check_ms;
    pthread_mutex_t poll_mu;
    mf_sched_sample_t poll_seen; /* poll_mu */
    _Atomic bool poll_restored;
    mf_failpoint_t *fp_hang_between, *fp_fail_batch, *fp_slow_deleters, *fp_hang_read_ahead, *fp_hang_in_batch,
        *fp_pause_note;
    /*
     * The TTL indexes (targets_get; monitor thread only): copied out of the
     * catalog when its version moves, or every TARGETS_MAX_AGE_MS, instead
     * of by a walk over every collection twice a pass.
     */
    struct target_list *targets;
    uint64_t targets_version;
    int64_t targets_ms; /* monotonic ms of the last rebuild (long ago at start: the first call builds it) */
    /*
     * Deadlines (see "Deadlines" above). Monitor thread only: due_gen, the
     * target list's generation whose deadlines were read (another: read them
     * all); due_full_ms, when the periodic refresh last ran (every index
     * read, or a slice of REFRESH_SLICE of them from refresh_pos, round
     * robin, when there are more). Guarded by mu:
     * full_due, a kick that needs every index read (DDL, a parameter, a
     * pause); noted, the idents of indexes whose writers noted an earlier
     * deadline (note_due); noted_over when more than NOTED_MAX did, or a
     * transaction wrote more TTL indexes than it records (DIRTY_SLOTS).
     */
    uint64_t due_gen;
    int64_t due_full_ms;
    int refresh_pos;
    int *sel, nsel; /* run_pass's selected targets (monitor thread only; nsel: room) */
    int sweep_left, sweep_pos; /* a sweep over every index in slices: positions left, the next one (see run_pass) */
    bool full_due;
    char noted[NOTED_MAX][80];
    int nnoted;
    bool noted_over;
};


/* Wakes the monitor; full: it reads every index's deadline again (else only what changed). */
static void
kick(mf_ttl_monitor_t *m, bool full)
{
    pthread_mutex_lock(&m->mu);
    m->kick = true;
    if (full)
        m->full_due = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

void
mf_ttl_notify(mf_ttl_monitor_t *m)
{
    kick(m, true);
}

void
mf_ttl_monitor_pause(mf_ttl_monitor_t *m, const char *reason)
{
    const char *old = atomic_exchange(&m->paused, reason);
    if ((old == NULL) != (reason == NULL))
        mf_log(MF_LOG_INFO, "TTL", "TTL monitor %s%s", reason ? "paused: " : "resumed", reason ? reason : "");
    if (reason != NULL) {
        int64_t opid = atomic_load(&m->batch_opid);
        if (opid != 0)
            mf_curops_kill(m->env.curops, opid); /* SPEC E2: the batch in flight stops at its next yield point */
    }
    mf_ttl_notify(m);
}

static void
on_param_change(void *arg, mf_param_t *p)
{
    if (strncmp(p->name, "ttl", 3) == 0)
        mf_ttl_notify(arg);
}

/* ---------- lateness histogram ---------- */

/* Records the lateness of n deletions committed at after_ms, whose expiry times are exps, under one lock. */
static void
lateness_record_many(mf_ttl_monitor_t *m, const int64_t *exps, size_t n, int64_t after_ms)
{
    if (n == 0)
        return;
    int64_t sec = mf_mono_ms() / 1000;
    int slot = (int)(sec % RATE_SECS);
    pthread_mutex_lock(&m->lat_mu);
    for (size_t i = 0; i < n; i++) {
        /* A date near the minimum Date expires at about INT64_MIN: the difference saturates. */
        int64_t ms, b = 0;
        if (__builtin_sub_overflow(after_ms, exps[i], &ms))
            ms = INT64_MAX;
        if (ms < 0)
            ms = 0;
        while (b < LAT_BUCKETS - 1 && ms >= ((int64_t)1 << b))
            b++;
        m->lat_buckets[b]++;
        if (ms < LAT_FINE)
            m->lat_fine[ms]++;
        if (m->lat_sum <= INT64_MAX - ms)
            m->lat_sum += ms;
        if (ms > m->lat_max)
            m->lat_max = ms;
    }
    m->lat_count += (int64_t)n;
    if (m->rate_sec[slot] != sec) {
        m->rate_sec[slot] = sec;
        m->rate_n[slot] = 0;
    }
    m->rate_n[slot] += (int64_t)n;
    pthread_mutex_unlock(&m->lat_mu);
}

/*
 * Lateness quantile q in ms: exact (latenesses are whole ms) when it falls
 * below LAT_FINE ms, else the upper edge of the log2 bucket holding it;
 * never above max.
 */
static int64_t
lateness_quantile(const int64_t *buckets, const int64_t *fine, int64_t count, int64_t max, double q)
{
    if (count == 0)
        return 0;
    int64_t want = (int64_t)ceil(q * (double)count), seen = 0;
    for (int i = 0; i < LAT_FINE; i++) {
        seen += fine[i];
        if (seen >= want)
            return i < max ? i : max;
    }
    seen = 0;
    for (int b = 0; b < LAT_BUCKETS; b++) {
        seen += buckets[b];
        if (seen >= want) {
            int64_t edge = b == 0 ? 1 : ((int64_t)1 << b);
            return edge < max ? edge : max;
        }
    }
    return max;
}

/* ---------- keys and dates ---------- */

typedef struct earliest_ctx {
    int64_t min;
    bool found;
} earliest_ctx_t;

static bool
consider(void *arg, const bson_value_t *v)
{
    earliest_ctx_t *e = arg;
    if (v->value_type == BSON_TYPE_DATE_TIME && (!e->found || v->value.v_datetime < e->min)) {
        e->min = v->value.v_datetime;
        e->found = true;
    }
    return false;
}

/* SPEC C2/C3: the earliest Date the field holds (arrays: earliest element). */
static bool
doc_earliest_date(const bson_t *doc, const char *field, int64_t *ms)
{
    earliest_ctx_t e = {0, false};
    mf_path_walk_leaves(doc, field, consider, &e);
    *ms = e.min;
    return e.found;
}

static int64_t
add_secs(int64_t date_ms, int64_t secs)
{
    /* Saturating date + N seconds. */
    if (secs > (INT64_MAX - (date_ms > 0 ? date_ms : 0)) / 1000)
        return NO_DEADLINE;
    return date_ms + secs * 1000;
}

/* ---------- the catalog view ---------- */

/*
 * ttl_secs: whether ix is a TTL index of c, and *secs, the seconds after
 * its first key's Date that a document is due. Ordinary collections: a
 * single-field index with expireAfterSeconds. A time-series buckets
 * collection (SPEC F2/F3): indexes led by control.min.<timeField>; the time
 * index carries the collection's expireAfterSeconds, a TTL index (a partial
 * one on the metaField) its own; both plus bucketMaxSpanSeconds, because the
 * key is the bucket's rounded start and a bucket may hold measurements up
 * to start + span: it goes at start + span + N (MongoDB 8.0's
 * safeExpirationDate), never while one of its measurements is not due.
 */
static bool
ttl_secs(const mf_coll_t *c, const mf_index_t *ix, int64_t *secs)
{
    if (ix->building)
        return false;
    if (ix->is_id) {
        /* A clustered collection's expireAfterSeconds makes its _id index a TTL index (dates in _id expire). */
        if (!c->clustered || c->clustered_expire < 0)
            return false;
        *secs = c->clustered_expire;
        return true;
    }
    if (c->is_timeseries && !c->is_view) {
        mf_ts_spec_t spec;
        char minf[300];
        int64_t n;
        if (!mf_ts_spec_of(c, &spec))
            return false;
        snprintf(minf, sizeof minf, "control.min.%s", spec.time_field);
        if (strcmp(ix->kp.fields[0], minf) != 0 || ix->kp.desc[0])
            return false;
        if (mf_ttl_index_seconds(ix->spec, &n)) {
            if (ix->kp.nfields != 1)
                return false;
        } else {
            /* The time index {control.min.<time>: 1, _id: 1}: the collection's expiry. */
            if (ix->kp.nfields != 2 || strcmp(ix->kp.fields[1], "_id") != 0 || c->ts_expire < 0)
                return false;
            n = c->ts_expire;
        }
        if (n > INT64_MAX / 2000 - spec.max_span_s)
            return false;
        *secs = n + spec.max_span_s;
        return true;
    }
    /*
     * A hashed index may carry expireAfterSeconds (createIndexes checks
     * only that it has one field, as mongod's validateIndexSpecTTL), but its
     * keys are hashes: mongod's date bounds never meet them, so it expires
     * nothing, and neither does mayfly.
     */
    if (ix->kp.nfields != 1 || ix->expire_secs < 0 || ix->kp.has_hashed)
        return false;
    *secs = ix->expire_secs;
    return true;
}

static mf_index_t *
find_ttl_index(mf_coll_t *c, const char *name, int64_t *secs)
{
    mf_index_t *ix = mf_coll_index_by_name(c, name);
    if (ix == NULL || !ttl_secs(c, ix, secs))
        return NULL;
    return ix;
}

typedef struct target_list {
    ttl_target_t *v;
    int n, cap;
    uint64_t gen; /* bumped by every rebuild: the deadlines read before are gone with it */
    int invalid;  /* indexes with expireAfterSeconds that are no TTL index (collect_targets; counted per full pass) */
} target_list_t;

static void
collect_targets(void *arg, mf_coll_t *c)
{
    target_list_t *l = arg;
    for (int i = 0; i < c->nindexes; i++) {
        int64_t secs;
        mf_index_t *ix = c->indexes[i];
        if (!ttl_secs(c, ix, &secs)) {
            /*
             * mongod's invalidTTLIndexSkips: an ordinary index that carries
             * expireAfterSeconds but cannot be a TTL index (more than one
             * field: createIndexes and collMod refuse to make one, so only
             * a catalog written otherwise has it) is skipped and counted.
             */
            if (!ix->building && !ix->is_id && !c->is_timeseries && ix->expire_secs >= 0 && ix->kp.nfields != 1)
                l->invalid++;
            continue;
        }
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 8;
            l->v = mf_realloc(l->v, (size_t)l->cap * sizeof(*l->v));
        }
        ttl_target_t *t = &l->v[l->n++];
        memset(t, 0, sizeof(*t));
        mf_strlcpy(t->ns, c->ns, sizeof(t->ns));
        memcpy(t->uuid, c->uuid, 16);
        t->index = mf_strdup(ix->name);
        t->secs = secs;
        t->due = DUE_UNKNOWN;
        mf_strlcpy(t->ident, ix->ident, sizeof(t->ident));
    }
}

/* Whether a and b list the same TTL indexes (collection, index, N and ident) in the same order. */
static bool
targets_same(const target_list_t *a, const target_list_t *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++) {
        const ttl_target_t *x = &a->v[i], *y = &b->v[i];
        if (x->secs != y->secs || memcmp(x->uuid, y->uuid, 16) != 0 || strcmp(x->ns, y->ns) != 0 ||
            strcmp(x->index, y->index) != 0 || strcmp(x->ident, y->ident) != 0)
            return false;
    }
    return true;
}

/* Empties l, freeing what its targets own (l stays reusable). */
static void
targets_clear(target_list_t *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->v[i].index);
    l->n = 0;
}

/*
 * The TTL indexes of every collection, each as a target, owned by m (valid
 * until the next call; monitor thread only; run_pass sets each sub-pass's
 * more and resume points). The
 * list is rebuilt by a walk over the catalog (which takes every
 * collection's shared lock in turn) only when the catalog's version has
 * moved since the last walk, or the list is TARGETS_MAX_AGE_MS old (a
 * safety net): a pass costs what its TTL indexes cost, not what the
 * number of collections does, and between catalog changes it does not
 * wait on the lock of a collection that has none (one held by a long
 * operation). The version is read before the walk, so a change during it
 * makes the next call walk again.
 */
static target_list_t *
targets_get(mf_ttl_monitor_t *m)
{
    target_list_t *l = m->targets;
    int64_t now = mf_mono_ms();
    uint64_t v = mf_catalog_version(m->env.cat);
    if (v != m->targets_version || now - m->targets_ms >= TARGETS_MAX_AGE_MS) {
        target_list_t fresh = {0};
        m->targets_version = v;
        m->targets_ms = now;
        mf_catalog_rdlock(m->env.cat);
        mf_catalog_coll_visit(m->env.cat, NULL, collect_targets, &fresh);
        mf_catalog_unlock(m->env.cat);
        if (targets_same(l, &fresh)) {
            targets_clear(&fresh); /* the same indexes: the list keeps the deadlines read */
            free(fresh.v);
            l->invalid = fresh.invalid;
        } else {
            targets_clear(l);
            free(l->v);
            fresh.gen = l->gen + 1;
            *l = fresh;
        }
    }
    return l;
}

/* Finds the target's collection again (by namespace and UUID). Catalog lock held. */
static mf_coll_t *
refind(mf_ttl_monitor_t *m, const ttl_target_t *t)
{
    char db[128];
    const char *dot = strchr(t->ns, '.');
    if (dot == NULL || (size_t)(dot - t->ns) >= sizeof(db))
        return NULL;
    memcpy(db, t->ns, (size_t)(dot - t->ns));
    db[dot - t->ns] = '\0';
    mf_coll_t *c = mf_catalog_coll_find(m->env.cat, db, dot + 1);
    if (c == NULL || memcmp(c->uuid, t->uuid, 16) != 0)
        return NULL;
    return c;
}

/*
 * fds_warn_due: whether to log that a table could not be opened for want of
 * file descriptors (TooManyFilesOpen). Every index meets it alike for a
 * while, so once a minute, not once per index per pass. Monitor thread only.
 */
static bool
fds_warn_due(mf_ttl_monitor_t *m)
{
    return mf_log_due(&m->fds_warned_ms, 60000);
}

/*
 * The earliest deadline of index ix (smallest Date key + N), or NO_DEADLINE.
 * Also counts keys already due into *backlog when backlog is not NULL (at
 * most cap keys). An index that cannot be read has its deadline a second
 * from now, and *no_fds set when that was for want of file descriptors.
 */
static int64_t
index_deadline(mf_sess_t *s, mf_index_t *ix, int64_t start, int64_t secs, int64_t now, int64_t *backlog, int64_t cap,
               bool *no_fds)
{
    mf_cur_t *cur;
    mf_error_t err;
    uint8_t lo[DATE_KEY_LEN];
    bool desc = ix->kp.desc[0];
    int64_t deadline = NO_DEADLINE, ms;
    const uint8_t *k;
    size_t klen;
    int r;

    if (!desc && start == FLOOR_ALL)
        return NO_DEADLINE; /* every key deleted as last read, none written since (see "Floors") */
    if (mf_cur_open(s, ix->uri, &cur, &err) != 0) {
        *no_fds = err.code == MF_E_TooManyFilesOpen;
        return now + 1000; /* not "nothing due" either: look again in a second */
    }
    if (!desc) {
        mf_ks_date_key(start, false, lo); /* the index's floor: every key before it is deleted */
        r = mf_cur_seek_bytes_ge(cur, lo, DATE_KEY_LEN);
    } else {
        /* Descending: the earliest date has the largest bytes; step back from just above the range. */
        uint8_t above[MF_KS_DATE_LEN];
        mf_ks_date_key(0, true, above);
        above[0]++; /* every descending Date key starts with the byte below */
        /* Found or not, the earliest date is the entry just before that point. */
        r = mf_cur_seek_bytes_ge(cur, above, 1);
        r = r == 0 || r == MF_NOTFOUND ? mf_cur_prev(cur) : r;
    }
    if (r != 0 && r != MF_NOTFOUND) {
        /* A storage error is not "nothing due": look again in a second. */
        mf_cur_close(cur);
        mf_log(MF_LOG_WARN, "TTL", "reading TTL index %s failed; retrying", ix->name);
        return now + 1000;
    }
    if (r == 0) {
        mf_cur_key_bytes(cur, &k, &klen);
        if (mf_ks_date_from_key(k, klen, desc, &ms))
            deadline = add_secs(ms, secs);
    }
    if (backlog != NULL && deadline != NO_DEADLINE && deadline <= now) {
        int64_t n = 0;
        int64_t cutoff = now - secs * 1000;
        while (r == 0 && n < cap) {
            mf_cur_key_bytes(cur, &k, &klen);
            if (!mf_ks_date_from_key(k, klen, desc, &ms) || ms > cutoff)
                break;
            n++;
            r = desc ? mf_cur_prev(cur) : mf_cur_next(cur);
        }
        *backlog += n;
    }
    mf_cur_close(cur);
    return deadline;
}

/* Fills e for index ix of collection c (catalog lock held). */
static void
snap_fill(idx_snap_t *e, const mf_coll_t *c, const mf_index_t *ix, int64_t due, int64_t backlog)
{
    bson_iter_t it;
    int64_t n;

    mf_strlcpy(e->ns, c->ns, sizeof(e->ns));
    e->index = mf_strdup(ix->name);
    mf_strlcpy(e->field, ix->kp.fields[0], sizeof(e->field));
    e->desc = ix->kp.desc[0] ? -1 : 1;
    e->secs = mf_ttl_index_seconds(ix->spec, &n) ? n : c->ts_expire;
    e->archive = bson_iter_init_find(&it, ix->spec, "archive") && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
    e->due = due;
    e->backlog = backlog;
}

static void
snap_free(idx_snap_t *v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i].index);
    free(v);
}

/* Lowers the console's backlog of index (ns, name) by n after a committed batch. */
static void
snap_deleted(mf_ttl_monitor_t *m, const char *ns, const char *name, int64_t n)
{
    pthread_mutex_lock(&m->lat_mu);
    for (int i = 0; i < m->nsnap; i++) {
        idx_snap_t *e = &m->snap[i];
        if (strcmp(e->ns, ns) == 0 && strcmp(e->index, name) == 0) {
            e->backlog = e->backlog > n ? e->backlog - n : 0;
            break;
        }
    }
    pthread_mutex_unlock(&m->lat_mu);
}

/* ---------- one visit ---------- */

typedef struct check_ctx {
    const char *field;
    /* The TTL index when field is a top-level name: a plain Date there is handed on (mf_known_value_t). */
    const mf_index_t *plain_ix;
    size_t field_len;
    int64_t secs;
    int64_t now;
    const mf_index_t *partial_ix; /* the TTL index when it has a partial filter, else NULL */
    int64_t *expiries; /* expiry time of each accepted document, for lateness */
    size_t nexp, capexp;
    size_t committed; /* expiries[0..committed) belong to committed deletions */
    /* SPEC I2: archive each accepted document first (NULL: the index does not archive). */
    mf_archive_t *archive;
    mf_sess_t *s;
    const uint8_t *uuid;
    bool yield_often; /* clients are running: give the CPU up every YIELD_EVERY documents */
    unsigned seen;
    /* Tests: hangTTLDeleterInBatch holds the piece's transaction open at its first document (once). */
    mf_failpoint_t *fp_hang;
    /*
     * SPEC D9: the monitor, when the piece runs on its own thread (NULL on a
     * deleter's): the scheduling group's check runs between documents, so a
     * lowered group that starves the expiry is put back at the first
     * document the starved thread gets to, not at the end of a piece that
     * can take seconds of waiting for a CPU.
     */
    struct mf_ttl_monitor *group_m;
} check_ctx_t;

static void group_check(struct mf_ttl_monitor *m);

/* Lateness bookkeeping of the monitor's own batch (set only on its thread, see on_txn_end). */
static __thread check_ctx_t *tls_batch;

static bool
ttl_check(void *arg, int64_t rid, const bson_t *doc, mf_known_value_t *known)
{
    check_ctx_t *x = arg;
    int64_t earliest;
    bson_iter_t it;
    const bson_value_t *date = NULL;
    (void)rid;
    if (x->fp_hang != NULL && mf_failpoint_eval(x->fp_hang, NULL, NULL, NULL)) {
        /* Tests: writes land while a batch's transaction is open (its range guard token already read). */
        for (int i = 0; i < 12000 && mf_failpoint_on(x->fp_hang); i++) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    x->fp_hang = NULL;
    /* SPEC C1-C3, C5: judged on the document as it is now. */
    if (x->plain_ix != NULL && bson_iter_init_find_w_len(&it, doc, x->field, (int)x->field_len) &&
        BSON_ITER_HOLDS_DATE_TIME(&it)) {
        date = bson_iter_value(&it); /* the common case: one Date at the top level, its index key known */
        earliest = date->value.v_datetime;
    } else if (!doc_earliest_date(doc, x->field, &earliest)) {
        return false;
    }
    int64_t expiry = add_secs(earliest, x->secs);
    if (expiry > x->now)
        return false;
    if (x->partial_ix != NULL && !mf_index_covers(x->partial_ix, doc))
        return false;
    if (x->archive != NULL) {
        /* Never deleted without being archived: a document that cannot be staged stays. */
        mf_error_t err;
        if (mf_archive_stage(x->archive, x->s, x->uuid, doc, &err) != 0) {
            mf_log(MF_LOG_WARN, "TTL", "cannot archive an expired document, keeping it: %s", err.msg);
            return false;
        }
    }
    if (date != NULL) {
        known->ix = x->plain_ix;
        known->value = *date;
    }
    if (x->nexp < x->capexp)
        x->expiries[x->nexp++] = expiry;
    /* SPEC D9: see "Pacing" above. */
    if (x->group_m != NULL)
        group_check(x->group_m);
    if (x->yield_often && ++x->seen % YIELD_EVERY == 0)
        sched_yield();
    return true;
}

static int64_t
foreground_ops(mf_ttl_monitor_t *m)
{
    return m->env.foreground_ops ? m->env.foreground_ops(m->env.arg) : 0;
}

/* True when passes must not run: parameter off, E3's reason, or a pause (not primary). */
static bool
idle(mf_ttl_monitor_t *m)
{
    return mf_param_value(m->prm.enabled) == 0 || m->env.disabled_reason != NULL ||
           atomic_load(&m->paused) != NULL ||
           mf_failpoint_on(m->fp_hang_between);
}

static bool
should_stop(mf_ttl_monitor_t *m)
{
    pthread_mutex_lock(&m->mu);
    bool s = m->stop;
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* ---------- floors ---------- */

typedef struct floor {
    char *ident; /* owned: the index's table ident (a re-created index has a new one) */
    int64_t date;
} floor_t;

/* The floor recorded for ix (INT64_MIN: none, or a descending index). */
static int64_t
floor_of(mf_ttl_monitor_t *m, const mf_index_t *ix)
{
    if (ix->kp.desc[0])
        return INT64_MIN;
    for (int i = 0; i < m->nfloors; i++)
        if (strcmp(m->floors[i].ident, ix->ident) == 0)
            return m->floors[i].date;
    return INT64_MIN;
}

/* The Date an ascending TTL index's scan may start from: its floor, lowered by writes since (INT64_MIN: unknown). */
static int64_t
floor_start(mf_ttl_monitor_t *m, mf_index_t *ix)
{
    int64_t f = floor_of(m, ix);
    int64_t d = atomic_load(&ix->ttl_dirty_min);
    return d < f ? d : f;
}

/* Lowers ix's dirty Date to at most d (a write's, or one a failed visit took and must give back). */
static void
dirty_lower(mf_index_t *ix, int64_t d)
{
    int64_t cur = atomic_load(&ix->ttl_dirty_min);
    while (d < cur && !atomic_compare_exchange_weak(&ix->ttl_dirty_min, &cur, d))
        ;
}

/* Records that every key of ix dated before date is deleted. */
static void
floor_set(mf_ttl_monitor_t *m, const mf_index_t *ix, int64_t date)
{
    if (ix->kp.desc[0])
        return;
    for (int i = 0; i < m->nfloors; i++) {
        if (strcmp(m->floors[i].ident, ix->ident) == 0) {
            m->floors[i].date = date;
            return;
        }
    }
    if (m->nfloors == m->capfloors) {
        m->capfloors = m->capfloors ? m->capfloors * 2 : 8;
        m->floors = mf_realloc(m->floors, (size_t)m->capfloors * sizeof(*m->floors));
    }
    m->floors[m->nfloors].ident = mf_strdup(ix->ident);
    m->floors[m->nfloors++].date = date;
}

/* Forgets every floor (a full scan starts from the first Date again). */
static void
floors_clear(mf_ttl_monitor_t *m)
{
    for (int i = 0; i < m->nfloors; i++)
        free(m->floors[i].ident);
    m->nfloors = 0;
}

/* ---------- parallel batches ---------- */

/*
 * One piece of a round's record ids, deleted in one transaction (of at most
 * a batch) on whichever deleting thread takes it. The visit fills the
 * inputs and takes pieces itself beside the deleters; it holds the
 * catalog's shared lock (so c stays valid) until every piece is done.
 */
typedef struct del_job {
    mf_coll_t *c;
    const int64_t *rids;
    size_t n;
    check_ctx_t cx;  /* this piece's own check context (expiries point into the visit's array) */
    mf_curop_t *op;  /* the visit's operation: killOp stops every piece */
    size_t batch_docs; /* documents per transaction (0: all in one) */
    int ranges;        /* MF_DEL_RANGE_*: each transaction's records and index entries may go as ranges (mf_delete_rids) */
    int rc;
    mf_error_t err;
    mf_delete_stats_t st;
} del_job_t;

typedef struct deleter {
    mf_ttl_monitor_t *m;
    pthread_t thread;
    bool go;      /* guarded by pool_mu: take pieces of the current round */
    bool running; /* guarded by pool_mu: it is doing so (woken up, not yet done) */
} deleter_t;

/*
 * Closes the monitor's cached cursors (its session s) if force, or if it has
 * kept them for HOLD_CURSORS_MAX_MS: so no table stays open on its behalf for
 * long, even through a long pass over other collections (see monitor_main).
 */
static void
release_cursors(mf_ttl_monitor_t *m, mf_sess_t *s, bool force)
{
    int64_t now = mf_mono_ms();
    if (force || now - m->cursors_released_ms >= HOLD_CURSORS_MAX_MS) {
        mf_storage_session_release(s);
        m->cursors_released_ms = now;
    }
}

/* Runs job j on the calling thread (a deleter, or the monitor) with its WiredTiger session s. */
static void
job_run(mf_ttl_monitor_t *m, mf_sess_t *s, del_job_t *j, bool batched, bool deleter)
{
    bson_t fpdata;

    j->cx.s = s;
    j->cx.group_m = deleter ? NULL : m;
    j->st = (mf_delete_stats_t){0};
    mf_err_clear(&j->err);
    tls_batch = &j->cx;
    mf_curop_set_current(j->op);
    if (mf_failpoint_eval(m->fp_fail_batch, NULL, NULL, &fpdata)) {
        /* Fault injection (common/failpoint.h): the batch fails as a storage error would, nothing deleted. */
        bson_iter_t fit;
        int code = bson_iter_init_find(&fit, &fpdata, "errorCode") && BSON_ITER_HOLDS_NUMBER(&fit)
                       ? (int)bson_iter_as_int64(&fit) : MF_E_WriteConflict;
        bson_destroy(&fpdata);
        j->rc = mf_err_set(&j->err, code, "TTL batch failed by the ttlMonitorFailBatch fail point");
    } else {
        j->rc = mf_delete_rids(s, j->c, j->rids, j->n, batched ? j->batch_docs : 1, false, ttl_check, &j->cx,
                               j->ranges, &j->st, &j->err);
    }
    if (deleter && mf_failpoint_eval(m->fp_slow_deleters, NULL, NULL, &fpdata)) {
        /* Tests: this deleter is slow, as if a busy neighbour shared its core (it then takes fewer pieces). */
        bson_iter_t fit;
        int64_t us = bson_iter_init_find(&fit, &fpdata, "usPerDoc") && BSON_ITER_HOLDS_NUMBER(&fit)
                         ? bson_iter_as_int64(&fit) : 1000;
        bson_destroy(&fpdata);
        us = us < 0 ? 0 : us > 1000000 ? 1000000 : us;
        int64_t total = us * (int64_t)j->n > 1000000 ? 1000000 : us * (int64_t)j->n; /* 1 s at most */
        struct timespec ts = {(time_t)(total / 1000000), (long)(total % 1000000) * 1000};
        nanosleep(&ts, NULL);
    }
    mf_curop_set_current(NULL);
    tls_batch = NULL;
}

/*
 * SPEC D9 (beyond), ttlMonitorGroupNice (19 by default; 0: off): the server's
 * whole scheduling group gives way to other programs while a mass expiry
 * runs beside clients. Nice values weigh threads only inside their group,
 * and a client is a program of its own (see "Pacing"): a client thread
 * waking on a CPU where the deleters or WiredTiger's threads run waited for
 * the scheduler's tick, 4 ms here, however low their nice. While clients
 * run (their operations moved during the last round) and a visit has more
 * rounds to go, the monitor first looks for GROUP_CHECK_MS at what other
 * programs use (group_probing): the machine's busy CPU time (/proc/stat)
 * less the process's own (scaled down when the host took clock ticks
 * without reporting them stolen, mf_sched_others_ns: on such a host, busy
 * with other guests, four busy programs beside a lowered-to-be server once
 * measured under GROUP_OTHERS_PCT, and the group was lowered). If they kept GROUP_OTHERS_PCT of a CPU busy, a
 * busy program (or a heavy client) shares the CPUs and a lower weight would
 * hand it the expiry's CPU: the group is left alone for GROUP_HOLD_MS.
 * Otherwise the monitor sets the group's nice value to ttlMonitorGroupNice.
 * It puts the value back when it next waits (the backlog is gone), at
 * shutdown, and as soon as the lower weight starves the expiry (a busy
 * program turned up): since its last look the monitor thread waited for a
 * CPU GROUP_STARVED times as long as it ran, or other programs kept
 * GROUP_CROWDED_PCT of a CPU busy (the probe's test, with room for a
 * closed-loop client that the lower weight lets use a whole CPU); then it
 * leaves the group alone for GROUP_HOLD_MS. It looks between documents of
 * its own pieces and every GROUP_CHECK_MS while it waits for the deleters,
 * but only when it gets a CPU: a lowered group beside four busy programs on
 * two CPUs got one for a few ms in 0.4-7 s, once 22 s (its first look came
 * that late; the waiting-to-running test alone missed it when the thread
 * slept waiting for a starved deleter, and the CI run at 78833f9 saw a
 * 240,000-document expiry outlast 60 s). So the client threads, which get
 * most of the lowered group's CPU, repeat the other-programs test too
 * (mf_ttl_group_poll, before each command) and put the group back
 * themselves; the monitor takes that over (group_take_client_restore).
 * Measured over 100 ms before lowering
 * (bench/ttl_bench.js): other programs used 44 ms beside the paced client,
 * 70 ms beside the closed-loop one, 135 ms beside that and the busy
 * neighbour, 85-126 ms while a build ran; lowered beside the busy
 * neighbour, the monitor ran 2 ms and waited 265. (Its own thread's wait
 * before lowering did not tell a client from a neighbour: it waits behind
 * the server's own threads too.) Only a server that leads its own session
 * (started by a service manager, a daemon launcher or setsid) lowers it: a
 * session's autogroup is shared by every process in it, and the server must
 * not lower the shell or the programs it was started beside. As a service
 * in a cgroup of its own the value is set but has no effect (the cgroup is
 * what is scheduled). On by default since six ttl_bench runs at 19 against
 * four at 0 (docs/ARCHITECTURE.md): a paced client's insert p99 during a
 * mass expiry 1.6-2.5x idle against 3.0-6.6x (its find p99 unchanged), a
 * closed-loop client's insert p99 0.80-1.71x against 0.85-2.54x, and the
 * expiry beside a busy neighbour kept 0.65-0.90x of its rate against
 * 0.36-0.70x. The price: beside a closed-loop client the expiry gives that
 * client more CPU and deletes more slowly (551,000-625,000/s against
 * 507,000-760,000/s). A lowered group loses more of the expiry's CPU to a
 * program that turns busy meanwhile, until the starvation check puts it
 * back.
 */
#define GROUP_CHECK_MS 100
#define GROUP_HOLD_MS 10000
#define GROUP_STARVED 4 /* waited this many times as long as it ran: starved */
#define GROUP_OTHERS_PCT 85 /* other programs kept this % of a CPU busy while probing: not lowered */
#define GROUP_CROWDED_PCT 125 /* ... or this % once lowered (a closed-loop client alone stays under it): put back */

/*
 * Whether other programs kept pct % of a CPU busy between samples from and
 * to: the machine's busy time less the process's own, with the ticks a
 * host took unreported allowed for (mf_sched_others_ns). The probe's test,
 * the lowered monitor's and the clients'.
 */
static bool
others_crowd(const mf_sched_sample_t *from, const mf_sched_sample_t *to, int pct)
{
    return mf_sched_others_ns(from, to) > (to->at_ns - from->at_ns) / 100 * pct;
}

static void
group_init(mf_ttl_monitor_t *m)
{
    int nice;
    m->group_base = (getsid(0) == getpid() && mf_sched_group_nice(&nice) == 0) ? nice : -1;
    m->group_lowered = m->group_probing = false;
    m->group_hold_ms = 0;
}

/*
 * A client thread found other programs crowding the lowered group and put it
 * back (mf_ttl_group_poll): the monitor takes that over (not lowered, held
 * off GROUP_HOLD_MS, counted as starved). True if it did.
 */
static bool
group_take_client_restore(mf_ttl_monitor_t *m)
{
    if (!m->group_lowered || !atomic_exchange(&m->poll_restored, false))
        return false;
    atomic_store(&m->group_lowered, false);
    m->group_probing = false;
    m->group_hold_ms = mf_mono_ms() + GROUP_HOLD_MS;
    atomic_fetch_add(&m->group_starved, 1);
    mf_log(MF_LOG_INFO, "TTL",
           "other programs kept a CPU busy beside the lowered TTL expiry: scheduling group put back by a client thread");
    return true;
}

/* Puts the group's nice value back; false if the kernel refused (EAGAIN: try again later). */
static bool
group_restore(mf_ttl_monitor_t *m)
{
    if (group_take_client_restore(m))
        return true;
    m->group_probing = false;
    if (!m->group_lowered)
        return true;
    if (mf_sched_group_nice_set(m->group_base) != 0 && errno == EAGAIN)
        return false;
    m->group_lowered = false; /* put back, or nothing more can be done */
    return true;
}

/*
 * Every GROUP_CHECK_MS while the group is lowered or about to be (monitor
 * thread; between documents, pieces and rounds). Before lowering (group_probing):
 * other programs kept GROUP_OTHERS_PCT of a CPU busy since the look began,
 * so it is not lowered, nor tried again for GROUP_HOLD_MS
 * (serverStatus ttl.groupDeclined). Once lowered: the monitor thread
 * waited for a CPU GROUP_STARVED times as long as it ran since the last
 * look, or other programs kept GROUP_CROWDED_PCT of a CPU busy, so the lower
 * weight starves the expiry: the group is put back
 * (ttl.groupStarved) and left alone for GROUP_HOLD_MS.
 */
static void
group_check(mf_ttl_monitor_t *m)
{
    int64_t now, run, wait;

    if (group_take_client_restore(m))
        return;
    if ((!m->group_lowered && !m->group_probing) || (now = mf_mono_ms()) - m->group_check_ms < GROUP_CHECK_MS ||
        mf_sched_thread_times(&run, &wait) != 0)
        return;
    int64_t ran = run - m->group_run_ns, waited = wait - m->group_wait_ns;
    mf_sched_sample_t seen;
    bool measured = mf_sched_sample(&seen) == 0;
    /*
     * Other programs kept GROUP_OTHERS_PCT of a CPU busy over the window
     * (GROUP_CROWDED_PCT once lowered: the lower weight hands a client more
     * of the CPU, and a single-threaded one can take all of one).
     */
    bool crowded = measured && others_crowd(&m->group_seen, &seen,
                                            m->group_probing ? GROUP_OTHERS_PCT : GROUP_CROWDED_PCT);
    m->group_check_ms = now;
    m->group_run_ns = run; /* the baselines of the next look, the first one's once lowered */
    m->group_wait_ns = wait;
    if (measured)
        m->group_seen = seen;
    if (m->group_probing) {
        m->group_probing = false;
        if (!measured)
            return;
        if (crowded) {
            m->group_hold_ms = now + GROUP_HOLD_MS;
            atomic_fetch_add(&m->group_declined, 1);
            return;
        }
        if (mf_sched_group_nice_set((int)mf_param_value(m->prm.group_nice)) != 0)
            return;
        pthread_mutex_lock(&m->poll_mu);
        m->poll_seen = seen; /* the clients' look starts from here (mf_ttl_group_poll) */
        pthread_mutex_unlock(&m->poll_mu);
        atomic_store(&m->poll_check_ms, now);
        atomic_store(&m->poll_restored, false);
        m->group_lowered = true;
        atomic_fetch_add(&m->group_lowerings, 1);
        return;
    }
    if ((crowded || waited > GROUP_STARVED * ran) && group_restore(m)) {
        m->group_hold_ms = now + GROUP_HOLD_MS;
        atomic_fetch_add(&m->group_starved, 1);
        mf_log(MF_LOG_INFO, "TTL",
               "the TTL monitor waited %lld ms for a CPU and ran %lld ms%s: scheduling group put back",
               (long long)(waited / 1000000), (long long)(ran / 1000000),
               crowded ? ", other programs kept a CPU busy" : "");
    }
}

/* After a round of a visit with more to go: starts watching towards lowering the group while clients run (fg_busy). */
static void
group_watch(mf_ttl_monitor_t *m, bool fg_busy)
{
    int64_t now = mf_mono_ms();
    int target = (int)mf_param_value(m->prm.group_nice);

    if (m->group_lowered || m->group_probing) {
        group_check(m);
        return;
    }
    if (!fg_busy || m->group_base < 0 || target <= m->group_base || now < m->group_hold_ms)
        return;
    if (mf_sched_sample(&m->group_seen) != 0)
        return;
    m->group_probing = true;
    m->group_check_ms = now;
}

void
mf_ttl_group_poll(mf_ttl_monitor_t *m)
{
    int64_t now, last;
    if (m == NULL || !atomic_load_explicit(&m->group_lowered, memory_order_relaxed) ||
        atomic_load(&m->poll_restored))
        return;
    now = mf_mono_ms();
    last = atomic_load(&m->poll_check_ms);
    if (now - last < GROUP_CHECK_MS || !atomic_compare_exchange_strong(&m->poll_check_ms, &last, now))
        return; /* not due, or another thread claimed this look */
    if (pthread_mutex_trylock(&m->poll_mu) != 0)
        return; /* an earlier look is still under way (its thread waited for a CPU) */
    mf_sched_sample_t seen;
    bool crowded = false;
    if (mf_sched_sample(&seen) == 0) {
        crowded = others_crowd(&m->poll_seen, &seen, GROUP_CROWDED_PCT);
        m->poll_seen = seen;
    }
    pthread_mutex_unlock(&m->poll_mu);
    if (!crowded || !atomic_load(&m->group_lowered))
        return;
    if (mf_sched_group_nice_set(m->group_base) == 0) /* EAGAIN: the next look tries again */
        atomic_store(&m->poll_restored, true);
}

/*
 * Takes the current round's pieces in order, on the calling thread, until
 * none is left or one has failed (the round then ends as soon as the
 * pieces already taken are done; what is left stays for a later round).
 * Returns the documents this thread deleted.
 */
static int64_t
take_pieces(mf_ttl_monitor_t *m, mf_sess_t *s, bool batched, bool deleter)
{
    int64_t deleted = 0;
    for (int k; !atomic_load(&m->round_failed) && (k = atomic_fetch_add(&m->round_next, 1)) < m->round_np;) {
        del_job_t *j = &m->jobs[k];
        job_run(m, s, j, batched, deleter);
        if (!deleter)
            group_check(m); /* a starved round can take seconds: look between its pieces */
        deleted += j->st.deleted;
        if (j->rc != 0)
            atomic_store(&m->round_failed, true);
    }
    return deleted;
}

/*
 * SPEC D9: gives the calling (TTL) thread a lower priority than the
 * server's client threads, nice TTL_NICE; returns 0, or -1 if it could not
 * be set. Under contention the thread gets about a tenth of the CPU time
 * of a client thread at nice 0. Nice values weigh threads inside one
 * scheduling group: the server's service cgroup, or the autogroup of the
 * session it was started from. Other programs, in their own groups, share
 * the CPU with the server as a whole, so a busy neighbour does not starve
 * the expiry any more than the server.
 *
 * It also asks for the background threads' slice, MF_BACKGROUND_SLICE_NS
 * (8 ms, common/sched.h; the engine's other background threads inherit it),
 * which the monitor already has when the engine started it. Until session
 * 22 the TTL threads asked for 100 µs slices, so that a waking thread
 * would not wait out a deleter's; measured, that made clients in other
 * programs wait longer (a group's scheduling entity takes the shortest
 * slice of its threads, so the server's deadlines came sooner and a client
 * waking with the default slice waited for the scheduler's 4 ms tick), and
 * the default slice did better (docs/ARCHITECTURE.md, "TTL threads' time
 * slices"). Long slices on every background thread, WiredTiger's included,
 * did better still (session 23, "Background threads' time slices"): while
 * only they run, a client waking with the default slice preempts them.
 */
static int
ttl_lower_priority(void)
{
    int rc = setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), TTL_NICE);
    (void)mf_sched_slice_set(MF_BACKGROUND_SLICE_NS, NULL); /* after the nice value, which it keeps */
    return rc;
}

static void *
deleter_main(void *arg)
{
    deleter_t *d = arg;
    mf_ttl_monitor_t *m = d->m;
    mf_sess_t *s = mf_storage_session(m->env.st);

    mf_batch_set_conflict_limit(5);
    pthread_setname_np(pthread_self(), "mf-ttl-del");
    (void)ttl_lower_priority(); /* SPEC D9, as the monitor */
    pthread_mutex_lock(&m->pool_mu);
    for (;;) {
        while (!d->go && !m->pool_quit)
            pthread_cond_wait(&m->pool_cv, &m->pool_mu);
        if (!d->go)
            break;
        d->running = true;
        pthread_mutex_unlock(&m->pool_mu);
        atomic_fetch_add(&m->deleter_deleted, take_pieces(m, s, mf_param_value(m->prm.batch_deletes) != 0, true));
        mf_storage_session_release(s); /* its cursors: a deleter holds none between rounds */
        pthread_mutex_lock(&m->pool_mu);
        d->go = d->running = false;
        if (--m->pending == 0)
            pthread_cond_signal(&m->done_cv);
    }
    pthread_mutex_unlock(&m->pool_mu);
    mf_storage_session_close_thread(m->env.st);
    return NULL;
}

/* How many threads a visit may delete with (ttlMonitorWorkers; 0: the CPUs granted), at least 1. */
static int
workers_wanted(mf_ttl_monitor_t *m)
{
    int64_t w = mf_param_value(m->prm.workers);
    if (w <= 0)
        w = m->ncpu;
    return w > MAX_WORKERS ? MAX_WORKERS : (int)w;
}

/* Starts deleters up to want - 1 (the monitor is the other one); returns how many run. */
static int
pool_grow(mf_ttl_monitor_t *m, int want)
{
    if (m->deleters == NULL)
        m->deleters = mf_calloc(MAX_WORKERS, sizeof(*m->deleters));
    while (m->ndeleters < want - 1) {
        deleter_t *d = &m->deleters[m->ndeleters];
        d->m = m;
        d->go = d->running = false;
        if (pthread_create(&d->thread, NULL, deleter_main, d) != 0) {
            mf_log(MF_LOG_WARN, "TTL", "cannot start a TTL deleter thread; deleting with %d", m->ndeleters + 1);
            break;
        }
        m->ndeleters++;
    }
    return m->ndeleters;
}

/* Stops and joins every deleter (monitor shutdown). */
static void
pool_stop(mf_ttl_monitor_t *m)
{
    pthread_mutex_lock(&m->pool_mu);
    m->pool_quit = true;
    pthread_cond_broadcast(&m->pool_cv);
    pthread_mutex_unlock(&m->pool_mu);
    for (int i = 0; i < m->ndeleters; i++)
        pthread_join(m->deleters[i].thread, NULL);
    m->ndeleters = 0;
    free(m->deleters);
    m->deleters = NULL;
}

/*
 * Starts a round of the n pieces m->jobs[0..n): with more than one, wakes up to
 * nw - 1 deleters (fewer than there are pieces) to take them; the monitor
 * takes its own in round_finish, after its read ahead.
 */
static void
round_start(mf_ttl_monitor_t *m, int n, int nw)
{
    int nd = n > 1 ? (nw - 1 < n - 1 ? nw - 1 : n - 1) : 0;
    if (nd > m->ndeleters)
        nd = m->ndeleters;
    pthread_mutex_lock(&m->pool_mu);
    m->round_np = n;
    atomic_store(&m->round_next, 0);
    atomic_store(&m->round_failed, false);
    m->pending = nd;
    for (int i = 0; i < nd; i++)
        m->deleters[i].go = true;
    if (nd > 0)
        pthread_cond_broadcast(&m->pool_cv);
    pthread_mutex_unlock(&m->pool_mu);
}

/*
 * Takes pieces of the round on the calling (monitor) thread, then waits
 * until the deleters working on it are done. A deleter woken for the round
 * that has not started yet (its CPU was busy) is called off instead: there
 * is nothing left for it to take.
 */
static void
round_finish(mf_ttl_monitor_t *m, mf_sess_t *s, bool batched)
{
    (void)take_pieces(m, s, batched, false); /* the monitor's own cursors: see monitor_main */
    pthread_mutex_lock(&m->pool_mu);
    for (int i = 0; i < m->ndeleters; i++) {
        deleter_t *d = &m->deleters[i];
        if (d->go && !d->running) {
            d->go = false;
            m->pending--;
        }
    }
    while (m->pending > 0) {
        /* SPEC D9: a deleter starved by a lowered group keeps the monitor here, so it looks from here too. */
        if (!m->group_lowered) {
            pthread_cond_wait(&m->done_cv, &m->pool_mu);
            continue;
        }
        struct timespec ts = mf_mono_deadline(GROUP_CHECK_MS);
        if (pthread_cond_timedwait(&m->done_cv, &m->pool_mu, &ts) == ETIMEDOUT) {
            pthread_mutex_unlock(&m->pool_mu);
            group_check(m);
            pthread_mutex_lock(&m->pool_mu);
        }
    }
    pthread_mutex_unlock(&m->pool_mu);
}

/* Orders (record id, position) pairs by record id, then position. */
static int
rid_pos_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Removes repeated record ids from rids[0..n), keeping each one's first place; returns the new count. */
static size_t
dedup_rids(int64_t *rids, size_t n)
{
    if (n < 2)
        return n;
    int64_t(*pairs)[2] = mf_malloc(n * sizeof(*pairs));
    for (size_t i = 0; i < n; i++) {
        pairs[i][0] = rids[i];
        pairs[i][1] = (int64_t)i;
    }
    qsort(pairs, n, sizeof(*pairs), rid_pos_cmp);
    for (size_t i = 1; i < n; i++) {
        if (pairs[i][0] == pairs[i - 1][0])
            rids[pairs[i][1]] = 0; /* a later place of the same document */
    }
    free(pairs);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (rids[i] != 0)
            rids[m++] = rids[i];
    }
    return m;
}

/* What one read of a TTL index's due range found (scan_due). */
typedef struct scan_res {
    size_t n;           /* record ids read */
    bool hit_limit;     /* stopped at the limit, a key still ahead */
    bool range_left;    /* ... and that key is still in the due range: resume there */
    bool at_end;        /* the read met the end of the index: no key of any type past what it read */
    int64_t cutoff;     /* the Date up to which keys were due when read */
    uint8_t resume[128]; /* the resume key (the rest as in ttl_target_t) */
    size_t resume_len;  /* 0: no resume point */
} scan_res_t;

/*
 * Reads the record ids of ix's keys from the key from[0..from_len) up to the
 * Date key hi (its Date part, inclusive) into rids, at most lim, skipping a
 * multikey document's repeated ids; out says where it stopped. Returns 0,
 * 1 if the index cannot be opened (err set), -1 on a storage error while
 * reading. Its cursor (session s) is closed before it returns.
 */
static int
scan_due(mf_sess_t *s, const mf_index_t *ix, const uint8_t *from, size_t from_len, const uint8_t *hi, int64_t *rids,
         size_t lim, scan_res_t *out, mf_error_t *err)
{
    mf_cur_t *cur;
    const uint8_t *k = NULL;
    size_t klen = 0, n = 0;

    out->n = 0;
    out->hit_limit = out->range_left = out->at_end = false;
    out->resume_len = 0;
    if (mf_cur_open(s, ix->uri, &cur, err) != 0)
        return 1;
    int r = mf_cur_seek_bytes_ge(cur, from, from_len);
    while (r == 0 && n < lim) {
        mf_cur_key_bytes(cur, &k, &klen);
        if (klen < DATE_KEY_LEN || memcmp(k, hi, DATE_KEY_LEN) > 0)
            break;
        int64_t rid;
        if (!ix->rid_in_key) {
            const uint8_t *v;
            size_t vlen;
            mf_cur_value(cur, &v, &vlen);
            rid = vlen >= 8 ? mf_ks_read_recordid(v, 8) : 0;
        } else {
            rid = mf_ks_read_recordid(k, klen);
        }
        if (rid > 0)
            rids[n++] = rid;
        r = mf_cur_next(cur);
    }
    if (r != 0 && r != MF_NOTFOUND) {
        /* A storage error is not the end of the due range. */
        mf_cur_close(cur);
        return -1;
    }
    /*
     * Multikey: one document may have several due keys; keep it once. The
     * flag is set before the commit of a document's first multikey write, so
     * read after the keys it is set for any multikey document they include.
     */
    out->hit_limit = r == 0 && n >= lim;
    out->at_end = r == MF_NOTFOUND;
    if (atomic_load(&ix->multikey))
        n = dedup_rids(rids, n);
    out->n = n;
    /*
     * Resume at the first key not taken (the cursor sits on it), so the next
     * read does not walk again over what this one took. Only a key still
     * inside the due range is a resume point; any other key (longer, of
     * another type) ends the range.
     */
    if (out->hit_limit) {
        mf_cur_key_bytes(cur, &k, &klen);
        if (klen >= DATE_KEY_LEN && klen <= sizeof(out->resume) && memcmp(k, hi, DATE_KEY_LEN) <= 0) {
            memcpy(out->resume, k, klen);
            out->resume_len = klen;
            out->range_left = true;
        }
    }
    mf_cur_close(cur);
    return 0;
}

/*
 * Deletes due documents of target t until a target is hit or none is left.
 * Returns true if it stopped because of a target (more may be due). Sets
 * *saw_due when it read any due key (every deletion is of one it read).
 */
static bool
visit(mf_ttl_monitor_t *m, mf_sess_t *s, ttl_target_t *t, bool *saw_due)
{
    int64_t target_docs = mf_param_value(m->prm.target_docs);
    int64_t target_ms = mf_param_value(m->prm.target_ms);
    bool batched = mf_param_value(m->prm.batch_deletes) != 0;
    int64_t batch_docs = mf_param_value(m->prm.batch_docs);
    int64_t yield_pct = mf_param_value(m->prm.yield_pct);
    bool precise = mf_param_value(m->prm.precise) != 0;
    int64_t start_us = mf_mono_us(), deleted_here = 0;
    size_t cap = (size_t)(batch_docs > 0 ? batch_docs : 500);
    /*
     * An archiving index (SPEC I2) deletes ARCHIVE_BATCH_FACTOR times as many
     * documents per transaction: each commit fsyncs its archive frame, and
     * that fsync, not the compression, is what archiving costs; spread over
     * more documents it costs a quarter as much per document.
     */
    size_t cap_archive = cap * ARCHIVE_BATCH_FACTOR;
    /* Parallel batches: a round reads ROUND_TXNS batches per thread; this thread and the deleters take its pieces. */
    int workers = pool_grow(m, workers_wanted(m)) + 1;
    size_t room = cap * (size_t)(ROUND_TXNS * workers > ARCHIVE_BATCH_FACTOR ? ROUND_TXNS * workers : ARCHIVE_BATCH_FACTOR);
    int64_t *rids = mf_malloc(room * sizeof(*rids));
    int64_t *rids2 = mf_malloc(room * sizeof(*rids2)); /* the next round's, read ahead (prefetch) */
    int64_t *exps = mf_malloc(room * sizeof(*exps));
    scan_res_t pre; /* what the read ahead found, valid while pre_ok */
    bool pre_ok = false;
    int64_t pre_secs = 0;
    char pre_ident[512];
    if (m->jobs == NULL)
        m->jobs = mf_calloc(MAX_PIECES, sizeof(*m->jobs));
    del_job_t *jobs = m->jobs;
    bool more = false, fg_busy = false;

    for (;;) {
        if (should_stop(m) || idle(m))
            break;
        int64_t fg_before = foreground_ops(m);
        int64_t batch_start = mf_mono_us();
        mf_catalog_rdlock(m->env.cat);
        mf_coll_t *c = refind(m, t);
        int64_t secs;
        mf_index_t *ix = c ? find_ttl_index(c, t->index, &secs) : NULL;
        if (ix == NULL) {
            /* Dropped (collection or index) or no longer TTL: nothing to do (SPEC D6). */
            mf_catalog_unlock(m->env.cat);
            break;
        }
        t->secs = secs;
        bson_iter_t ait;
        bool archive = m->env.archive != NULL && !c->is_timeseries && bson_iter_init_find(&ait, ix->spec, "archive") &&
                       BSON_ITER_HOLDS_BOOL(&ait) && bson_iter_bool(&ait);
        /* An archiving index stages into its transaction's archive frame: its pieces on this thread. */
        size_t lim = archive ? cap_archive : cap;
        int nw = archive ? 1 : workers;
        size_t scan_lim = lim * (size_t)(nw > 1 ? ROUND_TXNS * nw : 1);
        int64_t now = mf_now_ms();
        bool desc = ix->kp.desc[0];
        uint8_t lo[DATE_KEY_LEN], hi[DATE_KEY_LEN];
        int64_t cutoff = now - secs * 1000;
        if (secs > now / 1000 + 1000000000LL)
            cutoff = INT64_MIN; /* nothing can be due */
        /*
         * Floors: the writes recorded since the last batch are taken now; they
         * stay taken only if this batch read from at or before their Dates and
         * moved the floor (every key read deleted), else they are given back.
         */
        int64_t taken = desc ? INT64_MAX : atomic_exchange(&ix->ttl_dirty_min, INT64_MAX);
        int64_t start = floor_of(m, ix), begin;
        if (taken < start)
            start = taken;
        begin = start;
        if (t->resume_len && !mf_ks_date_from_key(t->resume, t->resume_len, false, &begin))
            begin = INT64_MAX;
        /*
         * Whether this read can have missed a write taken above: one that
         * starts after its Date, or at a resume key of that very Date (the
         * key's rest, a record id, passes the Date's smaller ones).
         */
        bool missed = t->resume_len ? begin >= taken : begin > taken;
        bool floor_moved = false;
        /* Byte range of due keys: ascending [Date(floor), Date(cutoff)]; descending [Date(cutoff), Date(min)]. */
        if (!desc) {
            mf_ks_date_key(start, false, lo);
            mf_ks_date_key(cutoff, false, hi);
        } else {
            mf_ks_date_key(cutoff, true, lo);
            mf_ks_date_key(INT64_MIN, true, hi);
        }
        mf_error_t err;
        scan_res_t sr;
        int sc;
        /*
         * A read made during the last round cannot have seen what was
         * committed after it: the writes this round took (taken) are always
         * given back below, so a document that came into the read range
         * since is found from the dirty Date by a later read.
         */
        bool ahead = pre_ok && pre_secs == secs && strcmp(pre_ident, ix->ident) == 0;
        if (ahead) {
            /* This round's read was made during the last one (see "Parallel batches"). */
            int64_t *tmp = rids;
            rids = rids2;
            rids2 = tmp;
            sr = pre;
            sc = 0;
        } else if (!desc && start == FLOOR_ALL && t->resume_len == 0) {
            /* Every key deleted as last read, and no write recorded since (floors): nothing to read. */
            memset(&sr, 0, sizeof(sr));
            sr.at_end = true;
            sr.cutoff = cutoff;
            sc = 0;
        } else {
            sc = t->resume_len ? scan_due(s, ix, t->resume, t->resume_len, hi, rids, scan_lim, &sr, &err)
                               : scan_due(s, ix, lo, DATE_KEY_LEN, hi, rids, scan_lim, &sr, &err);
            sr.cutoff = cutoff;
        }
        pre_ok = false;
        if (sc != 0) {
            dirty_lower(ix, taken);
            mf_catalog_unlock(m->env.cat);
            if (sc > 0 && err.code == MF_E_TooManyFilesOpen) {
                m->fds_short = true;
                if (fds_warn_due(m))
                    mf_log(MF_LOG_WARN, "TTL", "cannot open index %s on %s: %s (expiry resumes as tables are "
                           "closed; this is logged once a minute)", t->index, t->ns, err.msg);
            } else if (sc > 0)
                mf_log(MF_LOG_WARN, "TTL", "cannot open index %s on %s: %s", t->index, t->ns, err.msg);
            else
                mf_log(MF_LOG_WARN, "TTL", "reading TTL index %s on %s failed; will retry", t->index, t->ns);
            break;
        }
        /* Keys read were due as of the read's cutoff (a prefetched read's is a round older). */
        int64_t scut = sr.cutoff;
        size_t n = sr.n;
        bool hit_limit = sr.hit_limit, range_left = sr.range_left;
        /* Once every key read is deleted: the floor past the cutoff, or past every Date at the index's end. */
        int64_t cleared = sr.at_end ? FLOOR_ALL : scut == INT64_MAX ? scut : scut + 1;
        *saw_due |= n > 0;
        memcpy(t->resume, sr.resume, sr.resume_len);
        t->resume_len = sr.resume_len;
        if (n == 0) {
            if (t->resume_len == 0 && !desc) {
                floor_set(m, ix, cleared); /* nothing due is left */
                floor_moved = true;
            }
            if (!floor_moved || missed || ahead)
                dirty_lower(ix, taken);
            mf_catalog_unlock(m->env.cat);
            break;
        }

        bson_t desc_cmd;
        char cname[256];
        const char *dot = strchr(t->ns, '.');
        mf_strlcpy(cname, dot ? dot + 1 : t->ns, sizeof(cname));
        bson_init(&desc_cmd);
        BSON_APPEND_UTF8(&desc_cmd, "delete", cname);
        BSON_APPEND_UTF8(&desc_cmd, "ttlIndex", t->index);
        BSON_APPEND_INT64(&desc_cmd, "expireAfterSeconds", secs);
        mf_curop_t *op = mf_curop_begin(m->env.curops, "remove", t->ns, "TTLMonitor", &desc_cmd, 0);
        bson_destroy(&desc_cmd);
        atomic_store(&m->batch_opid, mf_curop_opid(op));
        /*
         * n record ids in nj pieces of at most lim (one transaction each),
         * taken by the deleting threads in order (see "Parallel batches").
         * With more to read after this round, the monitor reads the next
         * round's keys while the deleters start (prefetch), then takes
         * pieces too.
         */
        int nj = (int)((n + lim - 1) / lim);
        if (nj > MAX_PIECES)
            nj = MAX_PIECES; /* n is at most lim * ROUND_TXNS * nw: never */
        bool prefetch = nj > 1 && nw > 1 && hit_limit && range_left &&
                        !(target_docs > 0 && deleted_here + (int64_t)n >= target_docs);
        /* A TTL index on a top-level field: its checks look the Date up directly and hand it on (ttl_check). */
        const mf_index_t *plain_ix = !ix->is_id && mf_keypattern_one_plain_field(&ix->kp) ? ix : NULL;
        size_t field_len = strlen(ix->kp.fields[0]);
        size_t off = 0;
        for (int i = 0; i < nj; i++) {
            size_t len = n / (size_t)nj + ((size_t)i < n % (size_t)nj);
            /*
             * Not archiving (its staging owns the transaction's pre-commit step): records may go as ranges, and
             * index entries on a standalone server (see mf_delete_rids).
             */
            int ranges = archive ? 0 : MF_DEL_RANGE_RECORDS | (m->env.replicated ? 0 : MF_DEL_RANGE_INDEXES);
            jobs[i] = (del_job_t){.c = c, .rids = rids + off, .n = len, .op = op, .batch_docs = len, .ranges = ranges};
            jobs[i].cx = (check_ctx_t){ix->kp.fields[0], plain_ix, field_len, secs, now, ix->partial ? ix : NULL, exps + off, 0,
                                       len, 0, archive ? m->env.archive : NULL, NULL, c->uuid, fg_busy, 0};
            jobs[i].cx.fp_hang = mf_failpoint_on(m->fp_hang_in_batch) ? m->fp_hang_in_batch : NULL;
            off += len;
        }
        round_start(m, nj, nw);
        if (prefetch) {
            mf_error_t perr;
            /* The index is known again by its ident (a longer one than fits is not read ahead for). */
            pre_ok = mf_strlcpy(pre_ident, ix->ident, sizeof(pre_ident)) < sizeof(pre_ident) &&
                     scan_due(s, ix, t->resume, t->resume_len, hi, rids2, scan_lim, &pre, &perr) == 0;
            pre.cutoff = cutoff;
            pre_secs = secs;
            mf_failpoint_t *fp = m->fp_hang_read_ahead;
            if (pre_ok && mf_failpoint_eval(fp, NULL, NULL, NULL)) {
                /* Tests: writes land between this read and the round that uses it. */
                while (mf_failpoint_on(fp) && !should_stop(m)) {
                    struct timespec ts = {0, 5000000};
                    nanosleep(&ts, NULL);
                }
            }
        }
        round_finish(m, s, batched);
        mf_delete_stats_t st = {0, 0, 0, 0};
        int rc = 0;
        mf_err_clear(&err);
        for (int i = 0; i < nj; i++) {
            st.deleted += jobs[i].st.deleted;
            st.batches += jobs[i].st.batches;
            st.ranges += jobs[i].st.ranges;
            st.range_records += jobs[i].st.range_records;
            st.ix_ranges += jobs[i].st.ix_ranges;
            if (jobs[i].rc != 0 && rc == 0) {
                rc = jobs[i].rc;
                err = jobs[i].err;
            }
        }
        /*
         * Floors: when every key read was deleted, nothing before where the
         * next read starts is left: the resume key, or past the cutoff.
         */
        if (rc == 0 && st.deleted == (int64_t)n && !desc) {
            int64_t rd;
            if (!hit_limit) {
                floor_set(m, ix, cleared);
                floor_moved = true;
            } else if (range_left && mf_ks_date_from_key(t->resume, t->resume_len, false, &rd)) {
                floor_set(m, ix, rd);
                floor_moved = true;
            }
        }
        if (!floor_moved || missed || ahead)
            dirty_lower(ix, taken);
        atomic_store(&m->batch_opid, 0);
        mf_curop_end(op);
        mf_catalog_unlock(m->env.cat);
        release_cursors(m, s, false);
        bool interrupted = rc != 0 && (err.code == MF_E_Interrupted || err.code == MF_E_InterruptedAtShutdown);
        bool no_fds = rc != 0 && err.code == MF_E_TooManyFilesOpen;
        m->fds_short |= no_fds;
        if (interrupted)
            mf_log(MF_LOG_INFO, "TTL", "TTL batch on %s (index %s) interrupted: %d %s", t->ns, t->index, err.code,
                   err.msg);
        else if (rc != 0 && (!no_fds || fds_warn_due(m)))
            mf_log(MF_LOG_WARN, "TTL", "deleting expired documents from %s (index %s) failed, will retry: %s", t->ns,
                   t->index, err.msg);

        int64_t after = mf_now_ms();
        if (m->env.on_batch && st.deleted > 0)
            m->env.on_batch(m->env.arg, t->ns, t->index, secs, st.deleted, (mf_mono_us() - batch_start) / 1000);
        for (int i = 0; i < nj; i++)
            lateness_record_many(m, jobs[i].cx.expiries, jobs[i].cx.committed, after);
        atomic_fetch_add(&m->deleted, st.deleted);
        atomic_fetch_add(&m->batches, st.batches);
        atomic_fetch_add(&m->range_batches, st.ranges);
        atomic_fetch_add(&m->range_records, st.range_records);
        atomic_fetch_add(&m->index_ranges, st.ix_ranges);
        if (st.deleted > 0)
            snap_deleted(m, t->ns, t->index, st.deleted);
        int64_t b = atomic_load(&m->backlog);
        while (b > 0 && !atomic_compare_exchange_weak(&m->backlog, &b, b > st.deleted ? b - st.deleted : 0))
            ;
        if (batched && m->env.batched_docs) {
            atomic_fetch_add(m->env.batched_docs, st.deleted);
            atomic_fetch_add(m->env.batched_batches, st.batches);
        }
        deleted_here += st.deleted;
        int64_t elapsed_us = mf_mono_us() - start_us;
        if (elapsed_us > 0 && deleted_here > 0)
            atomic_store(&m->pace_dps, deleted_here * 1000000 / elapsed_us);

        if (rc != 0 || (!range_left && st.deleted == 0))
            break; /* nothing deletable in what is left of the range */
        /*
         * The whole due range was read and every key deleted: nothing due as
         * of this round's cutoff is left. A precise monitor stops here -- what
         * fell due meanwhile is the next pass's, a coalescing window away --
         * instead of reading the empty range once more (spread deadlines: a
         * second visit round per pass, every 5 ms).
         */
        if (precise && !hit_limit && st.deleted == (int64_t)n)
            break;
        if ((target_docs > 0 && deleted_here >= target_docs) ||
            (target_ms > 0 && elapsed_us / 1000 >= target_ms)) {
            more = true;
            break;
        }
        /* SPEC D9 (beyond): yield to foreground work between batches. */
        fg_busy = foreground_ops(m) != fg_before;
        group_watch(m, fg_busy);
        if (yield_pct > 0 && fg_busy) {
            int64_t pause_us = (mf_mono_us() - batch_start) * yield_pct / 100;
            if (pause_us > 0) {
                struct timespec ts = {pause_us / 1000000, (long)(pause_us % 1000000) * 1000};
                nanosleep(&ts, NULL);
            }
        }
    }
    free(rids);
    free(rids2);
    free(exps);
    t->more = more;
    return more;
}

/* ---------- passes ---------- */

/*
 * One pass: every TTL index (all), or those due. sliced: a pass over every
 * index (MongoDB's periodic one, the one that forgets the floors) becomes a
 * sweep that the precise passes carry out SWEEP_SLICE indexes at a time
 * beside the due ones, a pass every ttlMonitorCoalesceMS until it is done
 * (monitor_main), so documents falling due meanwhile never wait for a visit
 * of every index (with 1,000 TTL collections, tens of milliseconds).
 */
static void
run_pass(mf_ttl_monitor_t *m, mf_sess_t *s, bool all, bool sliced)
{
    int64_t subpass_secs;
    bool work_left = true;

    atomic_fetch_add(&m->passes, 1);
    if (mf_mono_ms() - m->last_full_ms >= FULL_SCAN_MS || atomic_exchange(&m->force_full, false)) {
        /* A full scan now and then: every index from its first Date (a safety net; floors are exact). */
        floors_clear(m);
        m->last_full_ms = mf_mono_ms();
        all = true;
    }
    if (all) { /* a pass over every index, as mongod's periodic one: each invalid TTL index is skipped once */
        atomic_fetch_add(&m->sweeps, 1);
        atomic_fetch_add(&m->invalid_skips, targets_get(m)->invalid);
    }
    if (all && sliced) {
        m->sweep_left = INT_MAX; /* every index: bounded by the list's length below */
        all = false;
    }
    while (work_left && !should_stop(m) && !idle(m)) {
        /* A sub-pass: the TTL indexes as of now (targets_get), visited round-robin. */
        atomic_fetch_add(&m->subpasses, 1);
        subpass_secs = mf_param_value(m->prm.subpass_secs);
        int64_t sub_start = mf_mono_us();
        target_list_t *l = targets_get(m);
        /*
         * The sub-pass's targets, from the start of their ranges, in the
         * order its rounds visit them (from fds_from): every one, or for a
         * precise pass those whose deadline has come (or is not known yet).
         * Its rounds then go over these, not every TTL index.
         */
        int64_t now = mf_now_ms();
        if (l->n > m->nsel) {
            m->sel = mf_realloc(m->sel, (size_t)l->n * sizeof(*m->sel));
            m->nsel = l->n;
        }
        int nsel = 0;
        if (m->sweep_left > l->n)
            m->sweep_left = l->n;
        int slice = m->sweep_left < SWEEP_SLICE ? m->sweep_left : SWEEP_SLICE;
        if (l->n > 0)
            m->sweep_pos %= l->n;
        for (int j = 0; j < l->n; j++) {
            int i = (m->fds_from + j) % l->n;
            ttl_target_t *t = &l->v[i];
            t->more = all || t->due == DUE_UNKNOWN || t->due <= now || (i - m->sweep_pos + l->n) % l->n < slice;
            if (t->more) {
                t->resume_len = 0;
                m->sel[nsel++] = i;
            }
        }
        if (slice > 0) {
            m->sweep_pos = (m->sweep_pos + slice) % l->n;
            m->sweep_left -= slice;
        }
        work_left = false;
        bool any = true;
        while (any && !should_stop(m)) {
            any = false;
            m->fds_short = false;
            for (int j = 0; j < nsel; j++) {
                int i = m->sel[j];
                if (!l->v[i].more)
                    continue;
                atomic_fetch_add(&m->visits, 1);
                int64_t visit_now = mf_now_ms(), due_before = l->v[i].due;
                bool saw_due = false;
                if (visit(m, s, &l->v[i], &saw_due))
                    any = true;
                /*
                 * Its deadline moves with what the visit deletes: read it
                 * again, unless the visit read no due key from an index
                 * whose deadline (as read, or as writers brought it
                 * forward) had not come. A pass over every index then
                 * costs its visits, not another read of each; one that
                 * found due keys it could not delete (a write conflict, an
                 * archive that failed) has them read as its deadline.
                 */
                if (saw_due || due_before == DUE_UNKNOWN || due_before <= visit_now)
                    l->v[i].stale = true;
                if (m->fds_short) {
                    /* The rest would meet it too; the next round starts here (see fds_from). */
                    m->fds_from = i;
                    return;
                }
            }
            if (any && subpass_secs > 0 && (mf_mono_us() - sub_start) / 1000000 >= subpass_secs) {
                work_left = true; /* start a new sub-pass with the work that is left */
                break;
            }
        }
    }
}

/* Target t's collection (*cp) and TTL index, with its expireAfterSeconds (*secs); NULL when gone. Catalog lock held. */
static mf_index_t *
target_index(mf_ttl_monitor_t *m, const ttl_target_t *t, mf_coll_t **cp, int64_t *secs)
{
    mf_coll_t *c = refind(m, t);
    *cp = c;
    return c ? find_ttl_index(c, t->index, secs) : NULL;
}

/*
 * Reads target t's deadline from its index (catalog lock held) into t->due,
 * having taken what writers noted for it (the read sees their commits).
 * backlog, if not NULL, counts its keys already due (at most cap). Returns
 * the collection and index (NULL when gone: t->due is then NO_DEADLINE).
 */
static mf_index_t *
target_read(mf_ttl_monitor_t *m, mf_sess_t *s, ttl_target_t *t, int64_t now, int64_t *backlog, int64_t cap,
            bool *no_fds, mf_coll_t **cp)
{
    int64_t secs;
    mf_index_t *ix = target_index(m, t, cp, &secs);
    t->stale = false;
    atomic_fetch_add(&m->deadline_reads, 1);
    if (ix == NULL) {
        t->due = NO_DEADLINE;
        return NULL;
    }
    atomic_store(&ix->ttl_noted_due, NO_DEADLINE);
    t->due = index_deadline(s, ix, floor_start(m, ix), secs, now, backlog, cap, no_fds);
    return ix;
}

/*
 * compute_next_due's usual read: the targets a pass visited since (or not
 * read yet) read again, the deadlines writers noted (noted, nnoted idents)
 * taken; the earliest over every target.
 */
static int64_t
read_changed(mf_ttl_monitor_t *m, mf_sess_t *s, target_list_t *l, int64_t now, char (*noted)[80], int nnoted)
{
    int64_t best = NO_DEADLINE;
    bool no_fds = false; /* TooManyFilesOpen: the rest stay stale, read by a later recomputation */

    mf_catalog_rdlock(m->env.cat);
    for (int i = 0; i < l->n; i++) {
        ttl_target_t *t = &l->v[i];
        bool named = false;
        for (int k = 0; k < nnoted && !named; k++)
            named = strcmp(noted[k], t->ident) == 0;
        mf_coll_t *c;
        if ((t->stale || t->due == DUE_UNKNOWN) && !no_fds) {
            target_read(m, s, t, now, NULL, 0, &no_fds, &c);
        } else if (named) {
            /* Writes only bring a deadline forward: the earlier of the two. */
            int64_t secs;
            mf_index_t *ix = target_index(m, t, &c, &secs);
            int64_t d = ix ? atomic_exchange(&ix->ttl_noted_due, NO_DEADLINE) : NO_DEADLINE;
            if (d < t->due)
                t->due = d;
        }
        if (t->due < best)
            best = t->due;
    }
    mf_catalog_unlock(m->env.cat);
    return best;
}

/*
 * compute_next_due's full read: every target's deadline read, the console's
 * per-index view and the backlog rebuilt, and the refresh a reader asked
 * for (gen) marked done; the earliest over every target.
 */
static int64_t
read_all(mf_ttl_monitor_t *m, mf_sess_t *s, target_list_t *l, int64_t now, int64_t gen)
{
    int64_t best = NO_DEADLINE, backlog = 0;
    const int64_t cap = BACKLOG_CAP;
    idx_snap_t *snap = l->n ? mf_calloc((size_t)l->n, sizeof(*snap)) : NULL;
    int nsnap = 0;

    mf_catalog_rdlock(m->env.cat);
    for (int i = 0; i < l->n; i++)
        l->v[i].due = DUE_UNKNOWN; /* until read below */
    for (int j = 0; j < l->n; j++) {
        int i = (m->fds_from_due + j) % l->n;
        /* The backlog is counted here, on the monitor's thread (bounded), never by serverStatus. */
        int64_t before = backlog;
        bool no_fds = false;
        mf_coll_t *c;
        mf_index_t *ix = target_read(m, s, &l->v[i], now, &backlog, cap > backlog ? cap - backlog : 0, &no_fds, &c);
        if (ix == NULL)
            continue;
        int64_t d = l->v[i].due;
        if (d < best)
            best = d;
        snap_fill(&snap[nsnap++], c, ix, d, backlog - before);
        if (no_fds) {
            /* As in run_pass: the rest would meet it too; the next read starts here (see fds_from_due). */
            m->fds_from_due = i;
            break;
        }
    }
    mf_catalog_unlock(m->env.cat);
    m->due_gen = l->gen;
    m->due_full_ms = mf_mono_ms();
    pthread_mutex_lock(&m->lat_mu);
    snap_free(m->snap, m->nsnap);
    m->snap = snap;
    m->nsnap = nsnap;
    pthread_mutex_unlock(&m->lat_mu);
    atomic_store(&m->backlog, backlog);
    atomic_store(&m->backlog_capped, backlog >= cap);
    pthread_mutex_lock(&m->mu);
    m->refresh_done = gen;
    pthread_cond_broadcast(&m->refresh_cv);
    pthread_mutex_unlock(&m->mu);
    return best;
}

/*
 * Earliest deadline over every TTL index (NO_DEADLINE if none): each
 * target's as last read (see "Deadlines"). Usually only what changed is
 * read (read_changed); every index is read (read_all) when full, when a kick
 * asked for it (DDL, a parameter, a reader of the backlog), when writers
 * noted more indexes than NOTED_MAX, after the target list changed, and
 * when ttlMonitorDeadlineRefreshMS has passed since the last periodic
 * refresh with at most REFRESH_SLICE TTL indexes (more: that many of them
 * are read again, round robin).
 * Returns now while a write's Dates went unrecorded (force_full): the pass
 * that forgets the floors must run.
 */
static int64_t
compute_next_due(mf_ttl_monitor_t *m, mf_sess_t *s, bool full)
{
    int64_t now = mf_now_ms();
    char noted[NOTED_MAX][80];
    int nnoted;

    atomic_store(&m->watch_due, NO_DEADLINE);
    /* The refresh a reader may be waiting for covers from here on. */
    pthread_mutex_lock(&m->mu);
    int64_t gen = m->refresh_req;
    full = full || m->full_due || m->noted_over || m->refresh_done < gen;
    m->full_due = false;
    m->noted_over = false;
    nnoted = m->nnoted;
    memcpy(noted, m->noted, (size_t)nnoted * sizeof(noted[0]));
    m->nnoted = 0;
    pthread_mutex_unlock(&m->mu);
    target_list_t *l = targets_get(m);
    if (l->gen != m->due_gen)
        full = true;
    if (!full && mf_mono_ms() - m->due_full_ms >= mf_param_value(m->prm.due_refresh_ms)) {
        /*
         * The periodic refresh (a safety net: writers note their deadlines,
         * DDL and readers of the backlog ask for full reads) costs a bounded
         * slice: with more than REFRESH_SLICE TTL indexes, the next
         * REFRESH_SLICE of them, round robin, are read again. Before, every
         * index was read: with 1,000 TTL collections 1,000 reads a second,
         * each one holding up the precise pass after it.
         */
        if (l->n <= REFRESH_SLICE) {
            full = true;
        } else {
            for (int j = 0; j < REFRESH_SLICE; j++)
                l->v[(m->refresh_pos + j) % l->n].stale = true;
            m->refresh_pos = (m->refresh_pos + REFRESH_SLICE) % l->n;
            m->due_full_ms = mf_mono_ms();
        }
    }
    int64_t best = full ? read_all(m, s, l, now, gen) : read_changed(m, s, l, now, noted, nnoted);
    if (atomic_load(&m->force_full) && best > now)
        best = now; /* a write's Dates went unrecorded: the floors go and every index is visited, now */
    atomic_store(&m->watch_due, best);
    return best;
}

/*
 * Waits on the monitor's condition variable (monotonic clock, so a wall
 * clock jump cannot stall it) for at most wait_ms, unless kicked or stopped.
 * Returns true if it was kicked (and clears the kick). Called with mu free.
 */
static bool
wait_for(mf_ttl_monitor_t *m, int64_t wait_ms)
{
    pthread_mutex_lock(&m->mu);
    if (!m->stop && !m->kick && wait_ms > 0) {
        struct timespec ts = mf_mono_deadline(wait_ms);
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    bool kicked = m->kick;
    m->kick = false;
    pthread_mutex_unlock(&m->mu);
    return kicked;
}

/* Milliseconds from now to t (a wall-clock ms), saturated to [0, cap]. */
static int64_t
ms_until(int64_t t, int64_t now, int64_t cap)
{
    if (t <= now)
        return 0;
    return t - now > cap ? cap : t - now;
}

/*
 * The monitor's loop. Each turn decides whether a pass is due now:
 *   - periodically: ttlMonitorSleepSecs after the end of the last pass
 *     (read afresh every turn, so a change takes effect at once, SPEC D1);
 *   - precisely (ttlMonitorPrecise): as soon as the earliest deadline has
 *     come (SPEC D7 beyond).
 * Otherwise it waits for the sooner of the two (at most a second, to re-read
 * parameters) or a kick. A kick (DDL, setParameter, or a committed write
 * that moved the deadline earlier) recomputes the deadline from the indexes.
 */
static void *
monitor_main(void *arg)
{
    mf_ttl_monitor_t *m = arg;
    mf_sess_t *s = mf_storage_session(m->env.st);
    int64_t last_pass_end = 0, not_before = 0, last_pass_start = INT64_MIN / 2;
    int64_t resume_at = NO_DEADLINE; /* a pass cut short by TooManyFilesOpen goes on from here, precise or not */

    /*
     * A batch runs under the catalog's shared lock: on repeated write
     * conflicts give the batch up and retry on a later visit instead of
     * holding the lock while backing off.
     */
    mf_batch_set_conflict_limit(5);
    /* SPEC D9: under CPU contention, client threads come first (see "Pacing"). */
    pthread_setname_np(pthread_self(), "mf-ttl");
    if (ttl_lower_priority() != 0)
        mf_log(MF_LOG_INFO, "TTL", "could not lower the TTL monitor's priority");
    group_init(m);
    mf_log(MF_LOG_INFO, "TTL", "TTL monitor started (sleep %llds, precise %s)",
           (long long)mf_param_value(m->prm.sleep_secs), mf_param_value(m->prm.precise) ? "on" : "off");
    atomic_store(&m->next_due_ms, compute_next_due(m, s, true));
    if (m->env.disabled_reason != NULL)
        mf_log(MF_LOG_WARN, "TTL", "TTL monitor not running: %s", m->env.disabled_reason);
    int64_t last_retention = 0;
    for (;;) {
        if (should_stop(m))
            break;
        int64_t retention = mf_param_value(m->prm.archive_retention);
        if (m->env.archive != NULL && retention > 0 && mf_mono_ms() - last_retention >= 1000) {
            /* SPEC I2: archive segments older than archiveRetentionSeconds go (checked every second). */
            mf_error_t err;
            int64_t removed = 0;
            last_retention = mf_mono_ms();
            if (mf_archive_expire(m->env.archive, s, mf_now_ms() - retention * 1000, &removed, &err) != 0)
                mf_log(MF_LOG_WARN, "TTL", "archive retention failed, will retry: %s", err.msg);
            else if (removed > 0)
                mf_log(MF_LOG_INFO, "TTL", "archive retention removed %lld segment(s)", (long long)removed);
            mf_storage_session_release(s);
        }
        bool enabled = !idle(m);
        bool precise = mf_param_value(m->prm.precise) != 0;
        int64_t sleep_ms = mf_param_value(m->prm.sleep_secs) * 1000; /* bounded: the parameter is an int32 */
        int64_t now = mf_now_ms();
        int64_t periodic = last_pass_end + sleep_ms;
        int64_t due = atomic_load(&m->next_due_ms);
        if (m->sweep_left > 0 && precise)
            due = now; /* a sweep is under way: its next slice (see run_pass) */
        if (due < not_before)
            due = not_before;
        /*
         * Coalescing: a precise pass starts at most every ttlMonitorCoalesceMS,
         * so documents due within a few milliseconds of each other go in one
         * pass (a batch per deadline window, not a pass per document); a lone
         * document after a quiet spell is still deleted at once.
         */
        int64_t coalesce = mf_param_value(m->prm.coalesce_ms);
        if (due != NO_DEADLINE && due < last_pass_start + coalesce)
            due = last_pass_start + coalesce;
        if (enabled && (now >= periodic || (precise && due <= now) || now >= resume_at)) {
            int64_t before = atomic_load(&m->deleted);
            atomic_store(&m->watch_due, NO_DEADLINE);
            atomic_store(&m->busy, true);
            last_pass_start = now;
            /* A periodic pass (MongoDB's) visits every TTL index, a precise one those due (see "Deadlines"). */
            run_pass(m, s, !precise || now >= periodic || now >= resume_at, precise && now < resume_at);
            atomic_store(&m->busy, false);
            last_pass_end = mf_now_ms();
            int64_t next = compute_next_due(m, s, false);
            atomic_store(&m->next_due_ms, next);
            /*
             * Something still due that the pass could not delete (every batch
             * failed): do not spin; try again in a second.
             */
            not_before = (next <= last_pass_end && atomic_load(&m->deleted) == before) ? last_pass_end + 1000 : 0;
            /*
             * Cut short by TooManyFilesOpen (fds_short): the indexes it did
             * not reach go on shortly, once idle tables have closed, also
             * with ttlMonitorPrecise off, whose next periodic pass could be
             * ttlMonitorSleepSecs away.
             */
            resume_at = m->fds_short ? (not_before > 0 ? not_before : last_pass_end + FDS_RESUME_MS) : NO_DEADLINE;
            continue;
        }
        int64_t wait = 1000; /* disabled, or nothing sooner: re-read parameters every second */
        if (enabled) {
            wait = ms_until(periodic, now, 1000);
            if (precise)
                wait = ms_until(due, now, wait);
            if (resume_at != NO_DEADLINE)
                wait = ms_until(resume_at, now, wait);
        }
        /*
         * The monitor's cached cursors outlive a pass only while passes come
         * close together (spread deadlines: one every ttlMonitorCoalesceMS),
         * where opening them again was a good part of a pass's own work. Before
         * a longer sleep, after any kick (DDL among them), and at least every
         * HOLD_CURSORS_MAX_MS (also between the rounds of a long pass) it
         * closes them, so an idle monitor holds no cursor and a dropped
         * table's files go soon.
         */
        if (!group_restore(m))
            wait = wait < GROUP_CHECK_MS ? wait : GROUP_CHECK_MS; /* refused for now: again shortly */
        release_cursors(m, s, wait >= HOLD_CURSORS_MS);
        if (wait_for(m, wait) && !should_stop(m)) {
            release_cursors(m, s, true);
            atomic_store(&m->next_due_ms, compute_next_due(m, s, false));
            not_before = 0;
        }
    }
    pool_stop(m);
    /* Refused for now (EAGAIN: one change every 100 ms for all unprivileged processes): tries for 200 ms. */
    for (int i = 0; i < 20 && !group_restore(m); i++)
        usleep(10000);
    free(m->jobs);
    m->jobs = NULL;
    floors_clear(m);
    free(m->floors);
    m->floors = NULL;
    free(m->sel);
    m->sel = NULL;
    m->nsel = 0;
    mf_storage_session_close_thread(m->env.st);
    mf_log(MF_LOG_INFO, "TTL", "TTL monitor stopped");
    return NULL;
}

/* ---------- the write observer: earlier deadlines wake the monitor ---------- */

/*
 * The observer runs inside the writer's transaction, before it commits, so
 * the monitor cannot see the document yet. It only marks the writing thread
 * with the monitor to wake; the observer list's on_txn_end then kicks that
 * monitor once the transaction has committed, and the monitor recomputes its
 * deadline from the index. No wake-up is lost and none relies on timing.
 */
static __thread mf_ttl_monitor_t *tls_moved_deadline;
/*
 * The earliest TTL Date the writing thread's transaction wrote into each TTL
 * index (for floors), recorded into the index after the commit.
 */
#define DIRTY_SLOTS 8
static __thread mf_ttl_monitor_t *tls_dirty_m;
static __thread struct {
    mf_index_t *ix;
    int64_t min; /* the earliest Date written */
    int64_t due; /* the earliest deadline written (min + expireAfterSeconds) */
} tls_dirty[DIRTY_SLOTS];
static __thread int tls_ndirty;
static __thread bool tls_dirty_overflow;

static void
dirty_note(mf_ttl_monitor_t *m, mf_index_t *ix, int64_t date, int64_t due)
{
    if (tls_dirty_m != m) {
        tls_dirty_m = m;
        tls_ndirty = 0;
        tls_dirty_overflow = false;
    }
    for (int i = 0; i < tls_ndirty; i++) {
        if (tls_dirty[i].ix == ix) {
            if (date < tls_dirty[i].min)
                tls_dirty[i].min = date;
            if (due < tls_dirty[i].due)
                tls_dirty[i].due = due;
            return;
        }
    }
    if (tls_ndirty == DIRTY_SLOTS) {
        /* Too many TTL indexes in one transaction: the monitor forgets its floors and reads every deadline. */
        tls_dirty_overflow = true;
        return;
    }
    tls_dirty[tls_ndirty].ix = ix;
    tls_dirty[tls_ndirty].min = date;
    tls_dirty[tls_ndirty++].due = due;
}

/*
 * After a commit that gave index ix a deadline due: lowers its noted
 * deadline, and the first note since the monitor last took it also names the
 * index to the monitor, whose next recomputation then takes it (ix->
 * ttl_noted_due is exchanged there). A lower note to an index already named
 * only lowers the value. The writer still holds its collection: ix lives.
 */
static void
note_due(mf_ttl_monitor_t *m, mf_index_t *ix, int64_t due)
{
    int64_t cur = atomic_load(&ix->ttl_noted_due);
    while (due < cur) {
        if (!atomic_compare_exchange_weak(&ix->ttl_noted_due, &cur, due))
            continue;
        if (cur != NO_DEADLINE)
            return; /* already named, not yet taken */
        pthread_mutex_lock(&m->mu);
        if (m->nnoted < NOTED_MAX)
            mf_strlcpy(m->noted[m->nnoted++], ix->ident, sizeof(m->noted[0]));
        else
            m->noted_over = true;
        pthread_mutex_unlock(&m->mu);
        return;
    }
}

static void
observe_doc(mf_ttl_monitor_t *m, mf_coll_t *c, const bson_t *doc)
{
    int64_t due = atomic_load(&m->watch_due);
    for (int i = 0; i < c->nindexes; i++) {
        int64_t secs, earliest;
        mf_index_t *ix = c->indexes[i];
        if (!ttl_secs(c, ix, &secs))
            continue;
        if (!doc_earliest_date(doc, ix->kp.fields[0], &earliest))
            continue;
        int64_t d = add_secs(earliest, secs);
        dirty_note(m, ix, earliest, d);
        if (d < due)
            tls_moved_deadline = m;
    }
}

static void
obs_txn_end(void *arg, bool committed)
{
    mf_ttl_monitor_t *m = arg;
    if (tls_batch != NULL) {
        /* The monitor's batch: keep the lateness of committed deletions only. */
        if (committed)
            tls_batch->committed = tls_batch->nexp;
        else
            tls_batch->nexp = tls_batch->committed;
    }
    if (tls_dirty_m == m) {
        /*
         * After the commit (the writer still holds its collection, so the
         * indexes live): a scan that takes these Dates starts at or before them.
         */
        tls_dirty_m = NULL;
        bool wake = false;
        bson_t fpdata;
        if (committed && tls_ndirty > 0 && mf_failpoint_eval(m->fp_pause_note, NULL, NULL, &fpdata)) {
            /* Tests: a writer slow between its commit and its notes (see the comparison below). */
            bson_iter_t fit;
            int64_t ms = bson_iter_init_find(&fit, &fpdata, "ms") && BSON_ITER_HOLDS_NUMBER(&fit) ? bson_iter_as_int64(&fit) : 100;
            bson_destroy(&fpdata);
            struct timespec ts = {0, (long)(ms < 0 ? 0 : ms > 999 ? 999 : ms) * 1000000L};
            nanosleep(&ts, NULL);
        }
        for (int i = 0; committed && i < tls_ndirty; i++) {
            dirty_lower(tls_dirty[i].ix, tls_dirty[i].min);
            note_due(m, tls_dirty[i].ix, tls_dirty[i].due);
            /*
             * Compared again after the note: a recomputation that began
             * before it, took the notes without it and settled on a later
             * deadline has stored that deadline by now (or shows "none", as
             * during a pass), so this write wakes the monitor; otherwise the
             * monitor has taken the note.
             */
            if (tls_dirty[i].due < atomic_load(&m->watch_due))
                wake = true;
        }
        if (committed && tls_dirty_overflow) {
            /* Indexes it did not record: floors forgotten, a pass at once, every deadline read. */
            atomic_store(&m->force_full, true);
            pthread_mutex_lock(&m->mu);
            m->noted_over = true;
            pthread_mutex_unlock(&m->mu);
            wake = true;
        }
        tls_ndirty = 0;
        if (wake)
            tls_moved_deadline = m;
    }
    if (tls_moved_deadline != m)
        return;
    tls_moved_deadline = NULL;
    if (committed)
        kick(m, false); /* only what changed is read again: the notes just made say which */
}

static void
obs_insert(void *arg, mf_coll_t *c, const bson_t *doc)
{
    observe_doc(arg, c, doc);
}

static void
obs_update(void *arg, mf_coll_t *c, const bson_t *olddoc, const bson_t *newdoc)
{
    (void)olddoc;
    observe_doc(arg, c, newdoc);
}

/* DDL can add, drop, move or change a TTL index: recompute the deadline. */
static void
obs_ddl(void *arg, const mf_ddl_event_t *ev)
{
    (void)ev;
    mf_ttl_notify(arg);
}

int
mf_ttl_monitor_start(const mf_ttl_env_t *env, mf_ttl_monitor_t **out, mf_error_t *err)
{
    mf_ttl_monitor_t *m = mf_calloc(1, sizeof(*m));
    mf_observer_t obs = {.on_insert = obs_insert, .on_update = obs_update, .on_ddl = obs_ddl,
                         .on_txn_end = obs_txn_end, .arg = m};

    m->env = *env;
    m->targets = mf_calloc(1, sizeof(*m->targets));
    m->targets_ms = INT64_MIN / 2;
    m->prm.enabled = mf_param_find(env->params, "ttlMonitorEnabled");
    m->prm.sleep_secs = mf_param_find(env->params, "ttlMonitorSleepSecs");
    m->prm.precise = mf_param_find(env->params, "ttlMonitorPrecise");
    m->prm.coalesce_ms = mf_param_find(env->params, "ttlMonitorCoalesceMS");
    m->prm.batch_deletes = mf_param_find(env->params, "ttlMonitorBatchDeletes");
    m->prm.batch_docs = mf_param_find(env->params, "ttlMonitorBatchDocs");
    m->prm.target_docs = mf_param_find(env->params, "ttlIndexDeleteTargetDocs");
    m->prm.target_ms = mf_param_find(env->params, "ttlIndexDeleteTargetTimeMS");
    m->prm.subpass_secs = mf_param_find(env->params, "ttlMonitorSubPassTargetSecs");
    m->prm.yield_pct = mf_param_find(env->params, "ttlMonitorYieldPercent");
    m->prm.workers = mf_param_find(env->params, "ttlMonitorWorkers");
    m->prm.archive_retention = mf_param_find(env->params, "archiveRetentionSeconds");
    m->prm.due_refresh_ms = mf_param_find(env->params, "ttlMonitorDeadlineRefreshMS");
    m->prm.group_nice = mf_param_find(env->params, "ttlMonitorGroupNice");
    m->fp_hang_between = mf_failpoint_find(env->failpoints, "hangTTLMonitorBetweenPasses");
    m->fp_fail_batch = mf_failpoint_find(env->failpoints, "ttlMonitorFailBatch");
    m->fp_slow_deleters = mf_failpoint_find(env->failpoints, "slowTTLDeleters");
    m->fp_pause_note = mf_failpoint_find(env->failpoints, "pauseTTLWriterBeforeNote");
    m->fp_hang_read_ahead = mf_failpoint_find(env->failpoints, "hangTTLMonitorAfterReadAhead");
    m->fp_hang_in_batch = mf_failpoint_find(env->failpoints, "hangTTLDeleterInBatch");
    atomic_store(&m->paused, env->paused_reason);
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->lat_mu, NULL);
    pthread_mutex_init(&m->pool_mu, NULL);
    pthread_mutex_init(&m->poll_mu, NULL);
    pthread_cond_init(&m->pool_cv, NULL);
    /* The condition variable waits on the monotonic clock (wall-clock jumps must not stall it). */
    mf_cond_init_mono(&m->cv);
    mf_cond_init_mono(&m->refresh_cv);
    mf_cond_init_mono(&m->done_cv);
    atomic_store(&m->next_due_ms, NO_DEADLINE);
    atomic_store(&m->watch_due, NO_DEADLINE);
    m->last_full_ms = INT64_MIN / 2;
    m->ncpu = env->cpus > 0 ? env->cpus : mf_sysres_cpus(); /* a container's one CPU gets one thread */
    if (mf_observers_add(env->observers, &obs, err) != 0)
        goto err_free;
    mf_param_on_change(env->params, on_param_change, m);
    if (pthread_create(&m->thread, NULL, monitor_main, m) != 0) {
        mf_err_set(err, MF_E_InternalError, "cannot start the TTL monitor thread");
        goto err_free;
    }
    m->running = true;
    *out = m;
    return 0;

err_free:
    /* An observer already added stays registered with arg m: only reached before serving, and the engine then fails to open. */
    pthread_cond_destroy(&m->refresh_cv);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->lat_mu);
    pthread_cond_destroy(&m->pool_cv);
    pthread_cond_destroy(&m->done_cv);
    pthread_mutex_destroy(&m->pool_mu);
    pthread_mutex_destroy(&m->poll_mu);
    free(m->targets);
    free(m);
    return -1;
}

void
mf_ttl_monitor_stop(mf_ttl_monitor_t *m)
{
    if (m == NULL)
        return;
    if (m->running) {
        pthread_mutex_lock(&m->mu);
        m->stop = true;
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->mu);
        pthread_join(m->thread, NULL);
        m->running = false;
    }
}

void
mf_ttl_monitor_free(mf_ttl_monitor_t *m)
{
    if (m == NULL)
        return;
    mf_ttl_monitor_stop(m);
    snap_free(m->snap, m->nsnap);
    targets_clear(m->targets);
    free(m->targets->v);
    free(m->targets);
    pthread_cond_destroy(&m->refresh_cv);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->lat_mu);
    pthread_cond_destroy(&m->pool_cv);
    pthread_cond_destroy(&m->done_cv);
    pthread_mutex_destroy(&m->pool_mu);
    pthread_mutex_destroy(&m->poll_mu);
    free(m);
}

/* ---------- serverStatus ---------- */

/*
 * Asks the monitor for a fresh backlog count and waits for it briefly (it is
 * counted on the monitor's thread); while the monitor is busy with a pass,
 * the counts it keeps (lowered as it deletes) stand.
 */
static void
refresh(mf_ttl_monitor_t *m)
{
    if (!m->running || atomic_load(&m->busy))
        return;
    pthread_mutex_lock(&m->mu);
    int64_t want = ++m->refresh_req;
    m->kick = true;
    pthread_cond_signal(&m->cv);
    struct timespec ts = mf_mono_deadline(250);
    while (m->refresh_done < want && !m->stop) {
        if (pthread_cond_timedwait(&m->refresh_cv, &m->mu, &ts) != 0)
            break;
    }
    pthread_mutex_unlock(&m->mu);
}

void
mf_ttl_indexes_append(mf_ttl_monitor_t *m, bson_t *arr)
{
    char key[16];
    bson_t e, k;

    /* No refresh of its own: callers read serverStatus first, whose mf_ttl_status_append just refreshed. */
    pthread_mutex_lock(&m->lat_mu);
    for (int i = 0; i < m->nsnap; i++) {
        const idx_snap_t *x = &m->snap[i];
        const char *dot = strchr(x->ns, '.');
        size_t dblen = dot ? (size_t)(dot - x->ns) : strlen(x->ns);
        const char *kp;
        bson_uint32_to_string((uint32_t)i, &kp, key, sizeof(key));
        BSON_APPEND_DOCUMENT_BEGIN(arr, kp, &e);
        bson_append_utf8(&e, "db", 2, x->ns, (int)dblen);
        BSON_APPEND_UTF8(&e, "collection", dot ? dot + 1 : "");
        BSON_APPEND_UTF8(&e, "name", x->index);
        BSON_APPEND_DOCUMENT_BEGIN(&e, "key", &k);
        BSON_APPEND_INT32(&k, x->field, x->desc);
        bson_append_document_end(&e, &k);
        BSON_APPEND_INT64(&e, "expireAfterSeconds", x->secs);
        BSON_APPEND_BOOL(&e, "archive", x->archive);
        if (x->due == NO_DEADLINE)
            BSON_APPEND_NULL(&e, "nextDueAt");
        else
            BSON_APPEND_DATE_TIME(&e, "nextDueAt", x->due);
        BSON_APPEND_INT64(&e, "backlog", x->backlog);
        bson_append_document_end(arr, &e);
    }
    pthread_mutex_unlock(&m->lat_mu);
}

void
mf_ttl_status_append(mf_ttl_monitor_t *m, bson_t *doc)
{
    int64_t buckets[LAT_BUCKETS], fine[LAT_FINE], count, max;
    bson_t sub, hist;

    BSON_APPEND_INT64(doc, "deletedDocuments", atomic_load(&m->deleted));
    BSON_APPEND_INT64(doc, "passes", atomic_load(&m->passes));
    BSON_APPEND_INT64(doc, "subPasses", atomic_load(&m->subpasses));
    BSON_APPEND_INT64(doc, "invalidTTLIndexSkips", atomic_load(&m->invalid_skips));
    BSON_APPEND_INT64(doc, "indexVisits", atomic_load(&m->visits));
    BSON_APPEND_INT64(doc, "sweeps", atomic_load(&m->sweeps));
    BSON_APPEND_INT64(doc, "deadlineReads", atomic_load(&m->deadline_reads));

    pthread_mutex_lock(&m->lat_mu);
    memcpy(buckets, m->lat_buckets, sizeof(buckets));
    memcpy(fine, m->lat_fine, sizeof(fine));
    count = m->lat_count;
    max = m->lat_max;
    int64_t sum = m->lat_sum, recent = 0, now_sec = mf_mono_ms() / 1000;
    for (int i = 0; i < RATE_SECS; i++) {
        /* The last RATE_SECS whole seconds, not the one in progress. */
        if (m->rate_sec[i] < now_sec && m->rate_sec[i] >= now_sec - RATE_SECS)
            recent += m->rate_n[i];
    }
    pthread_mutex_unlock(&m->lat_mu);
    BSON_APPEND_DOUBLE(doc, "deletesPerSecond", (double)recent / RATE_SECS);
    BSON_APPEND_DOCUMENT_BEGIN(doc, "lateness", &sub);
    BSON_APPEND_INT64(&sub, "count", count);
    BSON_APPEND_INT64(&sub, "sumMs", sum);
    BSON_APPEND_INT64(&sub, "p50Ms", lateness_quantile(buckets, fine, count, max, 0.50));
    BSON_APPEND_INT64(&sub, "p99Ms", lateness_quantile(buckets, fine, count, max, 0.99));
    BSON_APPEND_INT64(&sub, "maxMs", max);
    BSON_APPEND_DOCUMENT_BEGIN(&sub, "histogram", &hist);
    for (int b = 0; b < LAT_BUCKETS; b++) {
        if (buckets[b] == 0)
            continue;
        char key[32];
        snprintf(key, sizeof(key), "lt%lldms", (long long)(b == 0 ? 1 : ((int64_t)1 << b)));
        BSON_APPEND_INT64(&hist, key, buckets[b]);
    }
    bson_append_document_end(&sub, &hist);
    bson_append_document_end(doc, &sub);

    /*
     * Backlog: ask the monitor for a fresh count and wait for it briefly (it
     * is counted on the monitor's thread); while the monitor is busy with a
     * pass, the count it keeps (lowered as it deletes) is reported.
     */
    refresh(m);
    int64_t backlog = atomic_load(&m->backlog);
    bool capped = atomic_load(&m->backlog_capped);
    BSON_APPEND_INT64(doc, "backlog", backlog);
    BSON_APPEND_BOOL(doc, "backlogIsLowerBound", capped);
    int64_t due = atomic_load(&m->next_due_ms);
    if (due == NO_DEADLINE)
        BSON_APPEND_NULL(doc, "nextDueAt");
    else
        BSON_APPEND_DATE_TIME(doc, "nextDueAt", due);
    BSON_APPEND_INT64(doc, "paceDocsPerSec", atomic_load(&m->pace_dps));
    BSON_APPEND_INT32(doc, "workers", workers_wanted(m));
    BSON_APPEND_INT64(doc, "deletedByWorkers", atomic_load(&m->deleter_deleted));
    BSON_APPEND_INT64(doc, "batches", atomic_load(&m->batches));
    BSON_APPEND_INT64(doc, "rangeBatches", atomic_load(&m->range_batches));
    BSON_APPEND_INT64(doc, "rangeRecords", atomic_load(&m->range_records));
    BSON_APPEND_INT64(doc, "indexRanges", atomic_load(&m->index_ranges));
    BSON_APPEND_BOOL(doc, "precise", mf_param_value(m->prm.precise) != 0);
    BSON_APPEND_INT64(doc, "groupLowerings", atomic_load(&m->group_lowerings));
    BSON_APPEND_INT64(doc, "groupStarved", atomic_load(&m->group_starved));
    BSON_APPEND_INT64(doc, "groupDeclined", atomic_load(&m->group_declined));
    BSON_APPEND_BOOL(doc, "groupLowered", atomic_load(&m->group_lowered));
}
