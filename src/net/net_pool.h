/*
 * net_pool.h: a worker pool that grows with demand (see net_pool.c).
 *
 * mayfly runs commands on its own pools instead of libuv's fixed thread pool,
 * so that slow commands cannot starve the rest: a job queued while no worker
 * is idle starts a new worker, up to a cap, the way mongod runs one thread per
 * connection. Workers above the warm count retire after idling a few seconds.
 */
#ifndef MF_NET_POOL_H
#define MF_NET_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct mf_net_pool mf_net_pool_t;

/*
 * One unit of work. The caller allocates it (usually embedded in a larger
 * struct) and keeps it alive until done runs; the pool only links it.
 */
typedef struct mf_net_pool_job {
    struct mf_net_pool_job *next; /* the pool's queue link */
    void (*work)(struct mf_net_pool_job *job);
    int64_t queued_us;            /* the pool's: when it was queued (monotonic µs) */
    struct mf_net_pool_slot *owner; /* the pool's: the worker running it (mf_net_pool_job_progress) */
} mf_net_pool_job_t;

typedef struct mf_net_pool_config {
    const char *name;    /* thread name prefix (at most 10 characters shown) */
    int warm;            /* workers started up front and never retired (>= 1) */
    int cap;             /* most workers at once (>= warm) */
    /*
     * Workers started at once for queued jobs, at most (warm..cap; 0 or
     * cap: no soft cap). Past it a queued job waits for a worker to come
     * free, unless it has waited stall_us while workers are stuck on one
     * job that long: then workers start for it (see net_pool.c, "Soft
     * cap").
     */
    int soft;
    int stall_us;        /* 0: 2,000 µs */
    int idle_ms;         /* a worker above warm exits after idling this long */
    /* Runs on the worker thread after each job->work (not under any pool lock). */
    void (*done)(mf_net_pool_job_t *job, void *arg);
    /* Runs on a worker thread just before it exits (retired or at destroy). */
    void (*thread_exit)(void *arg);
    void *arg;
} mf_net_pool_config_t;

/* Counters for logs and tests; a snapshot taken under the pool's lock. */
typedef struct mf_net_pool_stats {
    int threads;     /* alive now */
    int idle;        /* waiting for a job */
    int queued;      /* jobs not yet picked up */
    int peak;        /* most threads alive at once so far */
    int soft;        /* the soft cap (cfg.soft; without one, cfg.cap) */
    int cap;         /* the hard cap (cfg.cap) */
    int64_t started; /* threads started so far */
    int64_t retired; /* threads that exited because they idled */
    int64_t grown;   /* threads started past the soft cap for jobs that waited (see cfg.soft) */
    int64_t shrunk;  /* threads past the soft cap that exited once not needed */
} mf_net_pool_stats_t;

/*
 * mf_net_pool_create: starts cfg->warm workers. Returns 0 and *out, or -1 with
 * err if not even one thread could start. cfg is copied; cfg->name must stay
 * valid for the pool's life.
 */
int mf_net_pool_create(const mf_net_pool_config_t *cfg, mf_net_pool_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_net_pool_submit: queues job (FIFO) and starts a worker if none is idle
 * and the soft cap allows; if none starts, makes the wake descriptor
 * readable (mf_net_pool_wake_fd). Any thread may call it. The pool does not
 * own job.
 */
void mf_net_pool_submit(mf_net_pool_t *p, mf_net_pool_job_t *job);

/* mf_net_pool_stats: a consistent snapshot of the counters. */
void mf_net_pool_stats(mf_net_pool_t *p, mf_net_pool_stats_t *out);

/*
 * mf_net_pool_job_progress: called by a job's work on its worker thread when
 * it has finished a piece or starts another (as net.c's held connections do
 * through mf_net_pool_worker_progress): counted as a finished job, and the worker's time on one
 * job starts again, so that the soft cap's judge does not take a worker
 * serving one quick request after another for one stuck in a long job.
 */
void mf_net_pool_job_progress(mf_net_pool_job_t *job);

/*
 * A worker as its job's work sees it: what lets work hand the job it runs
 * over and go on with another (net.c's held connections, where one worker
 * serves whichever parked connection has a request and parks the one it
 * served). Valid on that worker's thread while work runs.
 */
typedef struct mf_net_pool_slot mf_net_pool_worker_t;

/* mf_net_pool_job_worker: the worker running job (call from job's work only). */
mf_net_pool_worker_t *mf_net_pool_job_worker(mf_net_pool_job_t *job);

/*
 * mf_net_pool_worker_take: from now on the worker answers for job instead
 * of the one it answered for (which is no longer the pool's: it may be
 * handed to another thread and freed; the pool does not touch it again).
 * When work returns, cfg.done runs for the job the worker answers for then,
 * and for none if that is NULL. Call it before the old job can reach
 * another thread (it clears that job's tie to this worker). job (when not NULL) counts as the worker's
 * for mf_net_pool_job_progress.
 */
void mf_net_pool_worker_take(mf_net_pool_worker_t *w, mf_net_pool_job_t *job);

/* mf_net_pool_worker_progress: mf_net_pool_job_progress for whatever job the worker answers for (even none). */
void mf_net_pool_worker_progress(mf_net_pool_worker_t *w);

/* mf_net_pool_queued: jobs waiting for a worker, read without the pool's lock (a hint: it may be stale). */
int mf_net_pool_queued(mf_net_pool_t *p);

/*
 * mf_net_pool_wake_fd: a descriptor that polls readable while jobs wait for
 * a worker and no more start at once (the soft cap or the cap, or a thread
 * that could not start), and not once the queue is empty. A job that parks its worker in
 * a wait of its own (net.c's workers waiting on held connections) watches
 * it too (poll, epoll) and ends the wait early. Only watch it: never read,
 * write or close it. -1 when the pool has none. Valid until mf_net_pool_destroy.
 */
int mf_net_pool_wake_fd(mf_net_pool_t *p);

/*
 * mf_net_pool_destroy: runs the jobs still queued, then stops and joins every
 * worker (each runs thread_exit) and frees the pool. NULL is fine.
 */
void mf_net_pool_destroy(mf_net_pool_t *p);

#endif /* MF_NET_POOL_H */
