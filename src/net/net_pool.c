/*
 * net_pool.c: a worker pool that grows with demand and shrinks when idle.
 *
 * Why: libuv's thread pool has a fixed size, so a few slow commands used to
 * hold every worker while hello/ping from other clients waited behind them
 * (drivers then mark the server down). mongod runs a thread per connection;
 * this pool gets the same effect without a thread per idle connection.
 *
 * Design:
 *   - One mutex guards a FIFO of jobs and the counters; one condition
 *     variable (on the monotonic clock) wakes idle workers.
 *   - submit queues the job, and if more jobs are queued than workers are
 *     idle, starts a new worker (up to the soft cap, below). Beyond it, jobs
 *     wait in the FIFO for the next free worker.
 *   - cfg.warm workers start with the pool and never retire. A worker above
 *     that count that idles cfg.idle_ms exits; before it does, it runs
 *     cfg.thread_exit (net.c closes the thread's WiredTiger session there).
 *   - Threads live in a fixed array of cfg.cap slots (RUNNING / EXITED /
 *     FREE). A retired thread marks its slot EXITED as its last locked act;
 *     whoever next needs the slot joins it, so no thread is left unjoined and
 *     no pool memory is touched after destroy.
 *   - destroy lets the workers drain the queue, then stops and joins all.
 *   - The wake descriptor (an eventfd, mf_net_pool_wake_fd) is readable
 *     while jobs wait and no worker starts for them at once (the pool is at
 *     its soft cap or cap, or a thread could not start), until the queue is
 *     empty again.
 *     Threads the pool's jobs park elsewhere (net.c's workers waiting on
 *     the parked held connections for a client's next request) watch it
 *     and come back to take the job: otherwise a queued job waited out
 *     their wait (up to netConnectionHoldMicros) for the workers they
 *     occupy. Set and
 *     cleared under the lock, only on that path (a write and a read of 8
 *     bytes); nobody else reads it.
 *   - Soft cap (cfg.soft, below cfg.cap). A thread per busy job costs more
 *     than it gives once the CPUs are full: 64 closed-loop connections on 2
 *     CPUs kept ~60 data workers alive, and each find by _id cost the
 *     server 54-79 µs of CPU at 14-21k/s, against 36-45 µs at 23-30k/s with
 *     the pool held to 16 (a raw-client probe, alternating binaries; the
 *     threads' WiredTiger sessions, caches and run queue). So past the soft
 *     cap submit does not start a worker: the job waits in the FIFO for one
 *     to come free, and the wake descriptor calls the held connections'
 *     workers back to take it. What a thread per job is for, a quick
 *     command never waiting behind slow ones, is kept by a judge thread
 *     (started the first time the soft cap is met, asleep while no job
 *     waits). Once the queue's head has waited stall_us, the workers that
 *     have been on one job that long (busy_since: a blocked command, an
 *     awaitData getMore, a lock or journal wait, a long scan; a held
 *     connection's worker counts from its last request,
 *     mf_net_pool_worker_progress) stop counting against the soft cap, and
 *     it starts workers for the waiting jobs within that room (less the
 *     workers started that have not yet taken one, `starting`); if no job
 *     at all finished since its last look (`finished`), confirmed by another
 *     look a quarter stall later (a whole process paused and resumed with
 *     the judge first finishes its quick jobs meanwhile), every busy worker
 *     is stuck and each waiting job gets one. At most GROW_BATCH per look,
 *     so submit is not held up behind thread starts; then it looks again
 *     at once, else every stall_us while jobs wait (every second after a
 *     thread that would not start). Counted in `grown`. When every worker
 *     is busy with quick jobs the head's wait is the CPUs' queue, which
 *     more threads would not shorten. Workers past the soft cap go once not
 *     needed: one that finishes a job with nothing queued exits, unless the
 *     judge started a worker within the last second or the workers left
 *     that are not stuck would be fewer than the soft cap (`shrunk`), so a
 *     passing stall does not leave a thread per connection behind. The
 *     caller sets the soft cap (net.c: from the CPUs granted, the affinity
 *     mask lowered to a cgroup's CPU quota, common/sysres.h).
 *
 * Invariants: nthreads counts workers that have not decided to exit;
 * nidle <= nthreads; a slot is FREE only once its thread has been joined.
 * No process globals: all state hangs off the mf_net_pool_t.
 */
#include "common/alloc.h"
#include "net/net_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

enum { SLOT_FREE = 0, SLOT_RUNNING, SLOT_EXITED };

#define WORKER_STACK_BYTES ((size_t)8 << 20)

typedef struct mf_net_pool_slot {
    struct mf_net_pool *pool;
    pthread_t tid;
    int state;
    _Atomic int64_t busy_since; /* monotonic µs its current job (or a held connection's request) began; 0 idle */
    mf_net_pool_job_t *job;     /* the job cfg.done runs for when work returns (mf_net_pool_worker_take); its thread's */
} slot_t;

#define DEFAULT_STALL_US 2000
#define SHRINK_AFTER_US 1000000 /* workers past the soft cap go once the judge has started none for this long */
#define GROW_BATCH 32 /* workers the judge starts per look, at most */

struct mf_net_pool {
    mf_net_pool_config_t cfg;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    mf_net_pool_job_t *head, *tail;
    int queued;
    _Atomic int queued_hint; /* queued, readable without the lock (mf_net_pool_queued) */
    int nthreads;
    int nidle;
    int starting; /* workers started that have not yet looked at the queue (they will take a job each) */
    int peak;
    int64_t started, retired;
    bool stopping;
    int wake_fd;   /* readable while jobs wait and no worker can start (see above); -1 if none could be made */
    bool wake_set; /* wake_fd holds a count */
    slot_t *slots; /* cfg.cap of them */
    /* The soft cap's judge (see above). */
    int soft;              /* cfg.soft, within warm..cap */
    int stall_us;
    pthread_cond_t judge_cond; /* wakes the judge: a job queued past the soft cap, or destroy */
    pthread_t judge;
    bool judge_started;
    bool judge_idle;       /* waiting for a job queued past the soft cap, with no deadline */
    int64_t judge_failed_us; /* when it last could not start (tried again a second later); 0 never */
    bool judge_suspect;    /* its last look saw no job finished: the next one, soon, confirms */
    int64_t judge_seen;    /* finished at its last look */
    int64_t grew_us;       /* when the judge last started a worker (monotonic µs) */
    _Atomic int64_t finished; /* jobs, and held connections' requests, finished (see "Soft cap") */
    int64_t grown;
    int64_t shrunk;        /* workers past the soft cap that went once not needed */
};

/* Makes wake_fd readable (jobs wait and no worker can start). Caller holds p->lock. */
static void
wake_set_locked(mf_net_pool_t *p)
{
    uint64_t one = 1;
    if (p->wake_fd >= 0 && !p->wake_set && write(p->wake_fd, &one, sizeof(one)) == (ssize_t)sizeof(one))
        p->wake_set = true;
}

/* Makes wake_fd unreadable again (the queue is empty). Caller holds p->lock. */
static void
wake_clear_locked(mf_net_pool_t *p)
{
    uint64_t n;
    if (p->wake_set && read(p->wake_fd, &n, sizeof(n)) == (ssize_t)sizeof(n))
        p->wake_set = false;
}

static void *worker_main(void *arg);

/* Workers on one job (or one held connection's request) for stall_us or more at now. Caller holds p->lock. */
static int
stuck_locked(mf_net_pool_t *p, int64_t now)
{
    int stuck = 0;
    for (int i = 0; i < p->cfg.cap; i++) {
        int64_t b = atomic_load_explicit(&p->slots[i].busy_since, memory_order_relaxed);
        if (p->slots[i].state == SLOT_RUNNING && b != 0 && now - b >= p->stall_us)
            stuck++;
    }
    return stuck;
}

/* Starts one worker. Caller holds p->lock. Returns 0, or -1 if none could start. */
static int
spawn_locked(mf_net_pool_t *p)
{
    slot_t *free_slot = NULL;
    for (int i = 0; i < p->cfg.cap && free_slot == NULL; i++) {
        slot_t *s = &p->slots[i];
        if (s->state == SLOT_EXITED) {
            /* Its thread has released the lock for the last time: the join is immediate. */
            pthread_join(s->tid, NULL);
            s->state = SLOT_FREE;
        }
        if (s->state == SLOT_FREE)
            free_slot = &p->slots[i];
    }
    if (free_slot == NULL)
        return -1; /* every slot holds a live or retiring thread: the queue waits */
    free_slot->pool = p;
    /*
     * 8 MiB stacks, as libuv gave its pool threads: commands recurse over
     * documents nested up to 200 deep. Only touched pages cost memory.
     */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
    int rc = pthread_create(&free_slot->tid, &attr, worker_main, free_slot);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        mf_log(MF_LOG_WARN, "NETWORK", "%s pool: cannot start a worker (%s); %d running", p->cfg.name, strerror(rc),
               p->nthreads);
        return -1;
    }
    free_slot->state = SLOT_RUNNING;
    p->nthreads++;
    p->starting++;
    p->started++;
    if (p->nthreads > p->peak)
        p->peak = p->nthreads;
    return 0;
}

static void *
worker_main(void *arg)
{
    slot_t *self = arg;
    mf_net_pool_t *p = self->pool;
    char name[16];

    snprintf(name, sizeof(name), "%.10s", p->cfg.name);
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&p->lock);
    p->starting--;
    for (;;) {
        if (p->head != NULL) {
            mf_net_pool_job_t *job = p->head;
            p->head = job->next;
            if (p->head == NULL)
                p->tail = NULL;
            p->queued--;
            atomic_store_explicit(&p->queued_hint, p->queued, memory_order_relaxed);
            if (p->queued == 0)
                wake_clear_locked(p);
            int64_t now = mf_mono_us();
            atomic_store_explicit(&self->busy_since, now, memory_order_relaxed);
            pthread_mutex_unlock(&p->lock);
            job->next = NULL;
            job->owner = self;
            self->job = job;
            job->work(job);
            /*
             * done may hand job to another thread, which frees it: job is not
             * touched after. The job done runs for is the one the worker
             * answers for now (work may have taken another, or none).
             */
            job = self->job;
            self->job = NULL;
            if (job != NULL && p->cfg.done)
                p->cfg.done(job, p->cfg.arg);
            atomic_store_explicit(&self->busy_since, 0, memory_order_relaxed);
            atomic_fetch_add_explicit(&p->finished, 1, memory_order_relaxed);
            pthread_mutex_lock(&p->lock);
            /*
             * Past the soft cap with nothing queued, no worker started for stuck
             * ones lately, and enough left that are not stuck: not needed.
             */
            int64_t end = mf_mono_us(); /* the job's end, not its start (now): the judge may have grown for this job */
            if (p->head == NULL && p->nthreads > p->soft && !p->stopping && end - p->grew_us > SHRINK_AFTER_US &&
                p->nthreads - stuck_locked(p, end) > p->soft) {
                p->shrunk++;
                break;
            }
            continue;
        }
        if (p->stopping)
            break;
        int rc = 0;
        p->nidle++;
        if (p->nthreads > p->cfg.warm) {
            struct timespec ts = mf_mono_deadline(p->cfg.idle_ms);
            rc = pthread_cond_timedwait(&p->cond, &p->lock, &ts);
        } else {
            pthread_cond_wait(&p->cond, &p->lock);
        }
        p->nidle--;
        if (rc == ETIMEDOUT && p->head == NULL && !p->stopping && p->nthreads > p->cfg.warm) {
            p->retired++;
            break;
        }
    }
    p->nthreads--;
    pthread_mutex_unlock(&p->lock);
    if (p->cfg.thread_exit)
        p->cfg.thread_exit(p->cfg.arg);
    pthread_mutex_lock(&p->lock);
    self->state = SLOT_EXITED;
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/*
 * The soft cap's judge (see "Soft cap" above). Holds p->lock except while it
 * waits; starts workers only through spawn_locked, under the lock, and never
 * once stopping is set.
 */
static void *
judge_main(void *arg)
{
    mf_net_pool_t *p = arg;
    char name[16];

    snprintf(name, sizeof(name), "%.10s-j", p->cfg.name);
    pthread_setname_np(pthread_self(), name);
    pthread_mutex_lock(&p->lock);
    while (!p->stopping) {
        if (p->head == NULL || p->nthreads >= p->cfg.cap) {
            p->judge_idle = true;
            pthread_cond_wait(&p->judge_cond, &p->lock);
            p->judge_idle = false;
            p->judge_seen = atomic_load_explicit(&p->finished, memory_order_relaxed);
            p->judge_suspect = false;
            continue;
        }
        int64_t now = mf_mono_us();
        int64_t due = p->head->queued_us + p->stall_us;
        if (now >= due) {
            /*
             * The head has waited stall_us. Workers on one job that long do
             * not count against the soft cap; if no job at all finished
             * meanwhile, every busy worker is stuck and each waiting job gets one.
             */
            int64_t fin = atomic_load_explicit(&p->finished, memory_order_relaxed);
            /*
             * No job finished since the last look: confirmed by a second look a
             * quarter stall later (a whole process paused, then resumed with the
             * judge first, finishes its quick jobs meanwhile).
             */
            bool none_finished = fin == p->judge_seen && p->judge_suspect;
            p->judge_suspect = fin == p->judge_seen && !none_finished;
            p->judge_seen = fin;
            int want = p->queued - p->nidle - p->starting; /* started ones take a job each */
            int room = none_finished ? want : p->soft + stuck_locked(p, now) - p->nthreads;
            due = now + (p->judge_suspect ? p->stall_us / 4 : p->stall_us);
            for (int n = 0; n < want && n < room && n < GROW_BATCH && p->nthreads < p->cfg.cap; n++) {
                if (spawn_locked(p) != 0) {
                    due = now + 1000000; /* no thread now: look again in a second, not every stall */
                    break;
                }
                p->grown++;
                p->grew_us = now;
            }
            if (want > GROW_BATCH && room > GROW_BATCH && due < now + 1000000) {
                due = now; /* more to start: let submit in, then go on */
                p->judge_suspect = none_finished; /* and if none finished meanwhile, all of them still */
            }
        }
        struct timespec ts = mf_mono_at_us(due);
        pthread_cond_timedwait(&p->judge_cond, &p->lock, &ts);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* A job was queued past the soft cap: starts the judge, or wakes it if it waits for one. Caller holds p->lock. */
static void
judge_kick_locked(mf_net_pool_t *p)
{
    if (p->judge_started) {
        if (p->judge_idle)
            pthread_cond_signal(&p->judge_cond);
        return;
    }
    if (p->judge_failed_us != 0 && mf_mono_us() - p->judge_failed_us < 1000000)
        return;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, (size_t)256 << 10);
    int rc = pthread_create(&p->judge, &attr, judge_main, p);
    pthread_attr_destroy(&attr);
    p->judge_started = rc == 0;
    p->judge_failed_us = rc != 0 ? mf_mono_us() : 0;
    if (rc != 0)
        /* Without it the pool still runs every job, only with no more workers than the soft cap. */
        mf_log(MF_LOG_WARN, "NETWORK", "%s pool: cannot start the soft cap's judge (%s)", p->cfg.name, strerror(rc));
}

int
mf_net_pool_create(const mf_net_pool_config_t *cfg, mf_net_pool_t **out, mf_error_t *err)
{
    mf_net_pool_t *p = mf_calloc(1, sizeof(*p));

    p->cfg = *cfg;
    if (p->cfg.warm < 1)
        p->cfg.warm = 1;
    if (p->cfg.cap < p->cfg.warm)
        p->cfg.cap = p->cfg.warm;
    if (p->cfg.idle_ms <= 0)
        p->cfg.idle_ms = 1;
    p->soft = p->cfg.soft <= 0 || p->cfg.soft > p->cfg.cap ? p->cfg.cap
              : p->cfg.soft < p->cfg.warm                  ? p->cfg.warm
                                                           : p->cfg.soft;
    p->stall_us = p->cfg.stall_us > 0 ? p->cfg.stall_us : DEFAULT_STALL_US;
    p->slots = mf_calloc((size_t)p->cfg.cap, sizeof(*p->slots));
    p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->wake_fd < 0)
        mf_log(MF_LOG_WARN, "NETWORK", "%s pool: no wake descriptor (%s); a job queued at the cap waits for a free worker",
               p->cfg.name, strerror(errno));
    pthread_mutex_init(&p->lock, NULL);
    mf_cond_init_mono(&p->cond);
    mf_cond_init_mono(&p->judge_cond);
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->cfg.warm; i++)
        if (spawn_locked(p) != 0)
            break;
    int n = p->nthreads;
    pthread_mutex_unlock(&p->lock);
    if (n == 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        pthread_cond_destroy(&p->judge_cond);
        if (p->wake_fd >= 0)
            close(p->wake_fd);
        free(p->slots);
        free(p);
        return mf_err_set(err, MF_E_InternalError, "cannot start any %s worker thread", cfg->name);
    }
    *out = p;
    return 0;
}

void
mf_net_pool_submit(mf_net_pool_t *p, mf_net_pool_job_t *job)
{
    job->next = NULL;
    job->owner = NULL;
    job->queued_us = mf_mono_us();
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->next = job;
    else
        p->head = job;
    p->tail = job;
    p->queued++;
    atomic_store_explicit(&p->queued_hint, p->queued, memory_order_relaxed);
    /*
     * Every idle worker will take one queued job; start one for each job
     * beyond that up to the soft cap. Past it call back the workers parked
     * elsewhere, and below the cap let the judge see whether the job waits
     * behind slow ones.
     */
    if (p->queued > p->nidle + p->starting && (p->nthreads >= p->soft || spawn_locked(p) != 0)) {
        wake_set_locked(p);
        if (p->nthreads < p->cfg.cap && p->soft < p->cfg.cap)
            judge_kick_locked(p);
    }
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

void
mf_net_pool_stats(mf_net_pool_t *p, mf_net_pool_stats_t *out)
{
    pthread_mutex_lock(&p->lock);
    out->threads = p->nthreads;
    out->idle = p->nidle;
    out->queued = p->queued;
    out->peak = p->peak;
    out->soft = p->soft;
    out->cap = p->cfg.cap;
    out->started = p->started;
    out->retired = p->retired;
    out->grown = p->grown;
    out->shrunk = p->shrunk;
    pthread_mutex_unlock(&p->lock);
}

void
mf_net_pool_destroy(mf_net_pool_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->cond);
    pthread_cond_signal(&p->judge_cond);
    bool judge = p->judge_started;
    pthread_mutex_unlock(&p->lock);
    /* The judge starts no worker once stopping is set, so the slots below are final after it ends. */
    if (judge)
        pthread_join(p->judge, NULL);
    /* No submit runs concurrently with destroy, so no slot changes hands from here on. */
    for (int i = 0; i < p->cfg.cap; i++) {
        pthread_mutex_lock(&p->lock);
        int state = p->slots[i].state;
        pthread_mutex_unlock(&p->lock);
        if (state != SLOT_FREE)
            pthread_join(p->slots[i].tid, NULL);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    pthread_cond_destroy(&p->judge_cond);
    if (p->wake_fd >= 0)
        close(p->wake_fd);
    free(p->slots);
    free(p);
}

void
mf_net_pool_job_progress(mf_net_pool_job_t *job)
{
    if (job->owner != NULL) {
        atomic_store_explicit(&job->owner->busy_since, mf_mono_us(), memory_order_relaxed);
        atomic_fetch_add_explicit(&job->owner->pool->finished, 1, memory_order_relaxed);
    }
}

mf_net_pool_worker_t *
mf_net_pool_job_worker(mf_net_pool_job_t *job)
{
    return job->owner;
}

void
mf_net_pool_worker_take(mf_net_pool_worker_t *w, mf_net_pool_job_t *job)
{
    if (w->job != NULL && w->job != job)
        w->job->owner = NULL;
    w->job = job;
    if (job != NULL)
        job->owner = w;
}

void
mf_net_pool_worker_progress(mf_net_pool_worker_t *w)
{
    atomic_store_explicit(&w->busy_since, mf_mono_us(), memory_order_relaxed);
    atomic_fetch_add_explicit(&w->pool->finished, 1, memory_order_relaxed);
}

int
mf_net_pool_wake_fd(mf_net_pool_t *p)
{
    return p->wake_fd;
}

int
mf_net_pool_queued(mf_net_pool_t *p)
{
    return atomic_load_explicit(&p->queued_hint, memory_order_relaxed);
}
