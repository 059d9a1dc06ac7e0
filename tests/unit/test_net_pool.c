/*
 * test_net_pool.c: the growing worker pool (src/net/net_pool.c).
 *
 * Growth is shown without timing: N jobs that each wait until all N are
 * running can only finish if the pool started N workers (a fixed pool
 * smaller than N would hang, which the suite's timeout turns into a
 * failure). The cap, FIFO order, retirement of idle extras (with
 * thread_exit run on each), and destroy draining the queue are checked
 * through the pool's counters; the wake descriptor by polling it.
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "net/net_pool.h"

typedef struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int arrived;
    int need;      /* jobs wait until this many have arrived (0: do not wait) */
    bool open;     /* or until opened */
    int running, max_running;
    _Atomic int done, exits;
    int order[64];
    _Atomic int norder;
} gate_t;

typedef struct tjob {
    mf_net_pool_job_t pj;
    gate_t *g;
    int id;
} tjob_t;

static void
gate_init(gate_t *g, int need)
{
    memset(g, 0, sizeof(*g));
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->need = need;
}

static void
work(mf_net_pool_job_t *pj)
{
    tjob_t *j = (tjob_t *)pj;
    gate_t *g = j->g;
    pthread_mutex_lock(&g->lock);
    g->arrived++;
    g->running++;
    if (g->running > g->max_running)
        g->max_running = g->running;
    pthread_cond_broadcast(&g->cond);
    while (!g->open && g->arrived < g->need)
        pthread_cond_wait(&g->cond, &g->lock);
    g->running--;
    pthread_mutex_unlock(&g->lock);
    int k = atomic_fetch_add(&g->norder, 1);
    if (k < 64)
        g->order[k] = j->id;
}

static void
done(mf_net_pool_job_t *pj, void *arg)
{
    gate_t *g = arg;
    (void)pj;
    atomic_fetch_add(&g->done, 1);
}

static void
thread_exit(void *arg)
{
    gate_t *g = arg;
    atomic_fetch_add(&g->exits, 1);
}

static void
open_gate(gate_t *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

static void
wait_done(gate_t *g, int n)
{
    for (int i = 0; i < 60000 && atomic_load(&g->done) < n; i++)
        usleep(1000);
    cr_assert_eq(atomic_load(&g->done), n, "%d of %d jobs done", atomic_load(&g->done), n);
}

/* Waits (at most 10 s) until n jobs are running at once, held at the gate. */
static void
wait_running(gate_t *g, int n)
{
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&g->lock);
        int r = g->running;
        pthread_mutex_unlock(&g->lock);
        if (r == n)
            return;
        usleep(1000);
    }
}

/* Submits job j (number id) to p, to run work() at gate g. */
static void
submit_job(mf_net_pool_t *p, gate_t *g, tjob_t *j, int id)
{
    *j = (tjob_t){.g = g, .id = id};
    j->pj.work = work;
    mf_net_pool_submit(p, &j->pj);
}

/* A pool whose jobs count into g; soft and stall_us as mf_net_pool_config_t's (0: no soft cap, the default stall). */
static mf_net_pool_t *
make_pool_soft(gate_t *g, int warm, int cap, int idle_ms, int soft, int stall_us)
{
    mf_net_pool_t *p;
    mf_error_t err;
    mf_net_pool_config_t cfg = {.name = "test", .warm = warm, .cap = cap, .soft = soft, .stall_us = stall_us,
                                .idle_ms = idle_ms, .done = done, .thread_exit = thread_exit, .arg = g};
    cr_assert_eq(mf_net_pool_create(&cfg, &p, &err), 0);
    return p;
}

static mf_net_pool_t *
make_pool(gate_t *g, int warm, int cap, int idle_ms)
{
    return make_pool_soft(g, warm, cap, idle_ms, 0, 0);
}

TestSuite(net_pool, .timeout = 60);

Test(net_pool, grows_past_warm_when_every_worker_is_busy)
{
    enum { N = 12 };
    gate_t g;
    tjob_t jobs[N];
    gate_init(&g, N);
    mf_net_pool_t *p = make_pool(&g, 2, 64, 60000);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    wait_done(&g, N); /* only possible if N jobs ran at once */
    cr_assert_eq(g.max_running, N);
    mf_net_pool_stats_t st;
    mf_net_pool_stats(p, &st);
    cr_assert_geq(st.peak, N, "peak %d", st.peak);
    cr_assert_leq(st.peak, 64);
    mf_net_pool_destroy(p);
    cr_assert_eq(atomic_load(&g.exits), (int)st.started, "every started worker ran thread_exit (%d of %lld)",
                 atomic_load(&g.exits), (long long)st.started);
}

Test(net_pool, cap_bounds_threads_and_the_rest_queue)
{
    enum { N = 20, CAP = 3 };
    gate_t g;
    tjob_t jobs[N];
    gate_init(&g, 1000); /* held until opened */
    mf_net_pool_t *p = make_pool(&g, 1, CAP, 60000);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    /* The first CAP jobs hold every worker; the rest queue. */
    wait_running(&g, CAP);
    mf_net_pool_stats_t st;
    mf_net_pool_stats(p, &st);
    cr_assert_eq(st.threads, CAP, "threads %d", st.threads);
    cr_assert_eq(st.queued, N - CAP, "queued %d", st.queued);
    open_gate(&g);
    wait_done(&g, N);
    cr_assert_leq(g.max_running, CAP);
    mf_net_pool_destroy(p);
}

/* Whether the pool's wake descriptor polls readable now. */
static bool
wake_readable(mf_net_pool_t *p)
{
    struct pollfd pfd = {.fd = mf_net_pool_wake_fd(p), .events = POLLIN};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN) != 0;
}

Test(net_pool, wake_fd_is_readable_while_jobs_wait_at_the_cap)
{
    enum { CAP = 2 };
    gate_t g;
    tjob_t jobs[CAP + 2];
    gate_init(&g, 1000); /* held until opened */
    mf_net_pool_t *p = make_pool(&g, 1, CAP, 60000);
    cr_assert_geq(mf_net_pool_wake_fd(p), 0);
    /* Below the cap a queued job starts a worker: nobody needs calling back. */
    for (int i = 0; i < CAP; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    wait_running(&g, CAP);
    cr_assert(!wake_readable(p), "every job found a worker");
    /* At the cap, with every worker busy, a queued job makes it readable, and it stays so while jobs wait. */
    for (int i = CAP; i < CAP + 2; i++) {
        submit_job(p, &g, &jobs[i], i);
        cr_assert(wake_readable(p), "job %d waits at the cap", i);
    }
    cr_assert(wake_readable(p), "polling does not consume it");
    /* Once the workers have taken every queued job it is not readable any more. */
    open_gate(&g);
    wait_done(&g, CAP + 2);
    cr_assert(!wake_readable(p), "the queue is empty");
    mf_net_pool_destroy(p);
}

Test(net_pool, idle_extra_workers_retire_and_warm_ones_stay)
{
    enum { N = 6 };
    gate_t g;
    tjob_t jobs[N];
    gate_init(&g, N);
    mf_net_pool_t *p = make_pool(&g, 2, 16, 50);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    wait_done(&g, N);
    mf_net_pool_stats_t st;
    for (int i = 0; i < 20000; i++) {
        mf_net_pool_stats(p, &st);
        if (st.threads == 2)
            break;
        usleep(1000);
    }
    cr_assert_eq(st.threads, 2, "back to the warm count, got %d", st.threads);
    cr_assert_geq(st.retired, N - 2, "retired %lld", (long long)st.retired);
    for (int i = 0; i < 20000 && atomic_load(&g.exits) < (int)st.retired; i++)
        usleep(1000);
    cr_assert_eq(atomic_load(&g.exits), (int)st.retired, "a retiring worker runs thread_exit");
    /* The pool still grows again after shrinking. */
    gate_t g2;
    gate_init(&g2, N);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g2, &jobs[i], i);
    }
    for (int i = 0; i < 60000; i++) {
        pthread_mutex_lock(&g2.lock);
        int a = g2.arrived;
        pthread_mutex_unlock(&g2.lock);
        if (a == N)
            break;
        usleep(1000);
    }
    cr_assert_eq(g2.max_running, N);
    mf_net_pool_destroy(p); /* waits for the jobs (their gate is met) */
}

Test(net_pool, destroy_runs_queued_jobs)
{
    enum { N = 10 };
    gate_t g;
    tjob_t jobs[N];
    gate_init(&g, 0);
    g.open = true;
    mf_net_pool_t *p = make_pool(&g, 1, 1, 60000);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    mf_net_pool_destroy(p);
    cr_assert_eq(atomic_load(&g.done), N);
    for (int k = 0; k < N; k++)
        cr_assert_eq(g.order[k], k, "one worker runs the queue in order");
}

/*
 * Soft cap: past it, a queued job waits for a worker instead of starting
 * one. The judge's stall is 100 s, so it never starts one here: the jobs
 * held at the gate occupy exactly the soft cap's workers and the rest
 * queue (without the soft cap every job would have a worker), then all run
 * on those workers.
 */
Test(net_pool, soft_cap_bounds_the_workers_started_at_once)
{
    enum { N = 20, SOFT = 3 };
    gate_t g;
    tjob_t jobs[N];
    gate_init(&g, 1000); /* held until opened */
    mf_net_pool_t *p = make_pool_soft(&g, 1, 64, 60000, SOFT, 100 * 1000 * 1000);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    wait_running(&g, SOFT);
    usleep(50 * 1000); /* time for a wrongly started worker to show */
    mf_net_pool_stats_t st;
    mf_net_pool_stats(p, &st);
    cr_assert_eq(st.threads, SOFT, "threads %d", st.threads);
    cr_assert_eq(st.queued, N - SOFT, "queued %d", st.queued);
    cr_assert(wake_readable(p), "jobs wait at the soft cap: workers parked elsewhere are called back");
    open_gate(&g);
    wait_done(&g, N);
    mf_net_pool_stats(p, &st);
    cr_assert_eq(st.peak, SOFT, "peak %d", st.peak);
    cr_assert_eq(st.grown, 0);
    mf_net_pool_destroy(p);
    cr_assert_eq(atomic_load(&g.exits), (int)st.started);
}

/*
 * Soft cap: jobs stuck on the soft cap's workers (slow commands, waits) do
 * not hold back the jobs queued behind them: once the head has waited the
 * stall with no job finished meanwhile, the judge starts a worker for every
 * waiting one (40, more than it starts in one look). Every job arrives at
 * the gate while the others still wait there, which a pool kept to the soft
 * cap never allows (wait_done then fails).
 */
Test(net_pool, soft_cap_grows_for_jobs_queued_behind_stuck_workers)
{
    enum { SOFT = 2, N = SOFT + 40 };
    gate_t g;
    tjob_t jobs[N];
    gate_init(&g, N); /* every job waits until all N have arrived */
    mf_net_pool_t *p = make_pool_soft(&g, 1, 64, 60000, SOFT, 2000);
    for (int i = 0; i < N; i++) {
        submit_job(p, &g, &jobs[i], i);
    }
    wait_done(&g, N);
    cr_assert_eq(g.max_running, N);
    mf_net_pool_stats_t st;
    mf_net_pool_stats(p, &st);
    cr_assert_geq(st.grown, N - SOFT, "grown %lld", (long long)st.grown);
    cr_assert_leq(st.peak, N, "peak %d: a worker for each job, not more", st.peak);
    /*
     * Not needed any more: a second after the judge last started one, each
     * worker past the soft cap that finishes a job with nothing queued
     * exits (their idle timeout here is a minute), one quick job at a time.
     */
    usleep(1100 * 1000);
    tjob_t more[4 * N];
    for (int i = 0; i < 4 * N && (mf_net_pool_stats(p, &st), st.threads > SOFT); i++) {
        submit_job(p, &g, &more[i], N + i);
        wait_done(&g, N + i + 1);
        usleep(2000); /* its worker exits before the next one is queued (else it takes that one) */
    }
    for (int i = 0; i < 1000 && (mf_net_pool_stats(p, &st), st.threads > SOFT); i++)
        usleep(1000);
    cr_assert_eq(st.threads, SOFT, "%d workers left", st.threads);
    cr_assert_eq(st.shrunk, st.started - SOFT, "shrunk %lld of %lld started", (long long)st.shrunk,
                 (long long)st.started);
    mf_net_pool_destroy(p);
    cr_assert_eq(atomic_load(&g.exits), (int)st.started);
}

/* A job that sleeps its own time (ms), then counts into the gate as done. */
typedef struct sleep_job {
    mf_net_pool_job_t pj;
    int ms;
} sleep_job_t;

static void
sleeping_work(mf_net_pool_job_t *pj)
{
    usleep((useconds_t)((sleep_job_t *)pj)->ms * 1000);
}

/*
 * The workers the judge started for stuck jobs leave as those very jobs end
 * (a second and more after it started them), not an idle timeout later:
 * the shrink compares the judge's last start with the job's end. Each job
 * ends 20 ms after the one before, so the first two to end find the rest
 * still stuck and stay (the soft cap's worth that are not stuck), and every
 * later one leaves.
 */
Test(net_pool, workers_grown_for_stuck_jobs_leave_when_those_jobs_end)
{
    enum { SOFT = 2, N = SOFT + 10 };
    gate_t g;
    sleep_job_t jobs[N];
    gate_init(&g, 0);
    mf_net_pool_t *p = make_pool_soft(&g, 1, 64, 60000, SOFT, 2000); /* idle workers would wait a minute */
    for (int i = 0; i < N; i++) {
        jobs[i] = (sleep_job_t){.ms = 1200 + 20 * i};
        jobs[i].pj.work = sleeping_work;
        mf_net_pool_submit(p, &jobs[i].pj);
    }
    wait_done(&g, N);
    mf_net_pool_stats_t st;
    for (int i = 0; i < 1000 && (mf_net_pool_stats(p, &st), st.threads > SOFT); i++)
        usleep(1000);
    cr_assert_eq(st.peak, N, "peak %d: a worker for each stuck job", st.peak);
    cr_assert_geq(st.grown, N - SOFT, "grown %lld", (long long)st.grown);
    cr_assert_eq(st.threads, SOFT, "%d workers left once the jobs ended", st.threads);
    cr_assert_eq(st.shrunk, st.started - SOFT, "shrunk %lld of %lld started", (long long)st.shrunk,
                 (long long)st.started);
    cr_assert_eq(st.retired, 0, "none waited out the idle timeout");
    mf_net_pool_destroy(p);
}

/* A job that moves on (mf_net_pool_job_progress, a held connection's next request) counts as finishing jobs. */
typedef struct prog_job {
    mf_net_pool_job_t pj;
    _Atomic int *stop;
} prog_job_t;

static void
progressing_work(mf_net_pool_job_t *pj)
{
    prog_job_t *j = (prog_job_t *)pj;
    for (int i = 0; i < 20000 && !atomic_load(j->stop); i++) {
        mf_net_pool_job_progress(pj);
        usleep(1000);
    }
}

/*
 * With a busy job on the soft cap's one worker and another job queued
 * behind it: after a second (the waiting job's stall passes three times),
 * the judge has started no worker (why says what that would mean) and the
 * job still waits; then the busy job is told to end.
 */
static void
assert_no_growth_behind_progress(mf_net_pool_t *p, _Atomic int *stop, const char *why)
{
    usleep(1000 * 1000);
    mf_net_pool_stats_t st;
    mf_net_pool_stats(p, &st);
    cr_assert_eq(st.grown, 0, "%s", why);
    cr_assert_eq(st.queued, 1, "the job waits for the soft cap's worker");
    atomic_store(stop, 1);
}

Test(net_pool, soft_cap_does_not_grow_for_a_worker_that_makes_progress)
{
    gate_t g;
    gate_init(&g, 0);
    _Atomic int stop = 0;
    /* Stall 300 ms, progress every millisecond: only a thread kept off its CPU for 300 ms could look stuck. The
     * judge looks at 300 ms and 600 ms after the job was queued (and 900): by then hundreds of pieces finished. */
    mf_net_pool_t *p = make_pool_soft(&g, 1, 16, 60000, 1, 300 * 1000);
    prog_job_t busy = {.pj.work = progressing_work, .stop = &stop};
    mf_net_pool_submit(p, &busy.pj);
    tjob_t waiting;
    submit_job(p, &g, &waiting, 1);
    assert_no_growth_behind_progress(p, &stop, "a worker making progress counted as stuck");
    wait_done(&g, 2);
    mf_net_pool_destroy(p);
}

/*
 * A job's work may hand its worker over to another job
 * (mf_net_pool_worker_take): cfg.done then runs for the job the worker
 * answers for when work returns (once), or for none. These jobs count the
 * done calls made for each of them; their work records the worker it saw
 * (read back on the test's thread, after mf_net_pool_destroy has joined
 * every worker).
 */
enum { PROG_NONE, PROG_TAKEN, PROG_WORKER, PROG_HANDED };

typedef struct own_job {
    mf_net_pool_job_t pj;
    bool takes;                /* its work calls mf_net_pool_worker_take(w, take) */
    mf_net_pool_job_t *take;   /* the job the worker answers for from then on (NULL: none) */
    int progress;              /* then, until *stop: mf_net_pool_job_progress(take), mf_net_pool_worker_progress(w),
                                  or mf_net_pool_job_progress of the job handed over (PROG_*) */
    _Atomic int *stop;
    _Atomic int *raise;        /* set to 1 when its work runs */
    bool stopped;              /* its progress loop ended on *stop (not on its own limit) */
    _Atomic int ran;
    _Atomic int dones;         /* done calls made for this job */
    mf_net_pool_worker_t *w;   /* mf_net_pool_job_worker(its job) on entry */
    mf_net_pool_worker_t *w_taken, *w_self; /* mf_net_pool_job_worker of take and of its own job after the take */
} own_job_t;

static void
owning_work(mf_net_pool_job_t *pj)
{
    own_job_t *j = (own_job_t *)pj;
    atomic_fetch_add(&j->ran, 1);
    mf_net_pool_worker_t *w = mf_net_pool_job_worker(pj);
    j->w = w;
    if (j->takes) {
        mf_net_pool_worker_take(w, j->take);
        j->w_taken = j->take != NULL ? mf_net_pool_job_worker(j->take) : NULL;
        j->w_self = mf_net_pool_job_worker(pj);
    }
    if (j->raise != NULL)
        atomic_store(j->raise, 1);
    if (j->progress == PROG_NONE)
        return;
    int i = 0;
    for (; i < 10000 && !atomic_load(j->stop); i++) {
        if (j->progress == PROG_TAKEN)
            mf_net_pool_job_progress(j->take);
        else if (j->progress == PROG_WORKER)
            mf_net_pool_worker_progress(w);
        else
            mf_net_pool_job_progress(pj);
        usleep(1000);
    }
    j->stopped = i < 10000;
}

static void
done_each(mf_net_pool_job_t *pj, void *arg)
{
    gate_t *g = arg;
    atomic_fetch_add(&((own_job_t *)pj)->dones, 1);
    atomic_fetch_add(&g->done, 1);
}

/* A pool whose done counts into the own_job_t it runs for (and into g). */
static mf_net_pool_t *
make_pool_each(gate_t *g, int warm, int cap, int soft, int stall_us)
{
    mf_net_pool_t *p;
    mf_error_t err;
    mf_net_pool_config_t cfg = {.name = "test", .warm = warm, .cap = cap, .soft = soft, .stall_us = stall_us,
                                .idle_ms = 60000, .done = done_each, .thread_exit = thread_exit, .arg = g};
    cr_assert_eq(mf_net_pool_create(&cfg, &p, &err), 0);
    return p;
}

/* One worker runs them all in turn: it answers for no job after the odd ones' take, and again for the next one. */
Test(net_pool, a_job_whose_worker_takes_no_job_gets_no_done_and_the_others_still_do)
{
    enum { N = 6 };
    gate_t g;
    own_job_t jobs[N];
    gate_init(&g, 0);
    mf_net_pool_t *p = make_pool_each(&g, 1, 1, 0, 0);
    for (int i = 0; i < N; i++) {
        jobs[i] = (own_job_t){.pj.work = owning_work, .takes = i % 2 == 1, .take = NULL};
        mf_net_pool_submit(p, &jobs[i].pj);
    }
    mf_net_pool_destroy(p); /* runs every job, and every done call, before it returns */
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&jobs[i].ran), 1, "job %d ran once", i);
        cr_assert_not_null(jobs[i].w, "job %d saw its worker", i);
        cr_assert_eq(atomic_load(&jobs[i].dones), i % 2 == 1 ? 0 : 1, "job %d: %d done calls", i,
                     atomic_load(&jobs[i].dones));
    }
    for (int i = 1; i < N; i += 2)
        cr_assert_null(jobs[i].w_self, "job %d is no longer its worker's", i);
    cr_assert_eq(atomic_load(&g.done), N / 2);
}

/* A takes B, which was never submitted: done runs once, for B; then the worker goes on with C as usual. */
Test(net_pool, done_runs_once_for_the_job_taken_and_not_for_the_job_that_took_it)
{
    gate_t g;
    gate_init(&g, 0);
    mf_net_pool_t *p = make_pool_each(&g, 1, 1, 0, 0);
    own_job_t b = {.pj.work = owning_work};
    own_job_t a = {.pj.work = owning_work, .takes = true, .take = &b.pj};
    own_job_t c = {.pj.work = owning_work};
    mf_net_pool_submit(p, &a.pj);
    mf_net_pool_submit(p, &c.pj);
    mf_net_pool_destroy(p);
    cr_assert_eq(atomic_load(&a.ran), 1);
    cr_assert_eq(atomic_load(&b.ran), 0, "B's work never runs: it was not submitted");
    cr_assert_eq(atomic_load(&c.ran), 1);
    cr_assert_eq(atomic_load(&a.dones), 0, "no done for the job handed over (%d)", atomic_load(&a.dones));
    cr_assert_eq(atomic_load(&b.dones), 1, "one done for the job taken (%d)", atomic_load(&b.dones));
    cr_assert_eq(atomic_load(&c.dones), 1, "the next job's done as usual (%d)", atomic_load(&c.dones));
    cr_assert_eq(atomic_load(&g.done), 2);
    cr_assert_not_null(a.w);
    cr_assert_eq(a.w_taken, a.w, "the job taken is the worker's");
    cr_assert_null(a.w_self, "the job handed over is no longer tied to the worker");
    cr_assert_eq(c.w, a.w, "one worker");
}

/*
 * As soft_cap_does_not_grow_for_a_worker_that_makes_progress, with the
 * progress made on a job the worker took (never submitted): it counts for
 * the worker, so the judge does not take it for stuck and the second job
 * waits for it. done runs for the job taken only.
 */
Test(net_pool, soft_cap_does_not_grow_for_a_worker_that_makes_progress_on_the_job_it_took)
{
    gate_t g;
    gate_init(&g, 0);
    _Atomic int stop = 0;
    mf_net_pool_t *p = make_pool_each(&g, 1, 16, 1, 300 * 1000);
    own_job_t taken = {.pj.work = owning_work};
    own_job_t busy = {.pj.work = owning_work, .takes = true, .take = &taken.pj, .progress = PROG_TAKEN, .stop = &stop};
    own_job_t waiting = {.pj.work = owning_work};
    mf_net_pool_submit(p, &busy.pj);
    mf_net_pool_submit(p, &waiting.pj);
    assert_no_growth_behind_progress(p, &stop,
                                     "progress on the job taken did not count: the worker was taken for stuck");
    wait_done(&g, 2);
    mf_net_pool_destroy(p);
    cr_assert(busy.stopped);
    cr_assert_eq(atomic_load(&busy.dones), 0);
    cr_assert_eq(atomic_load(&taken.dones), 1);
    cr_assert_eq(atomic_load(&waiting.dones), 1);
}

/* The same with mf_net_pool_worker_progress on a worker that answers for no job (its work took NULL). */
Test(net_pool, soft_cap_does_not_grow_for_a_worker_that_makes_progress_answering_for_no_job)
{
    gate_t g;
    gate_init(&g, 0);
    _Atomic int stop = 0;
    mf_net_pool_t *p = make_pool_each(&g, 1, 16, 1, 300 * 1000);
    own_job_t busy = {.pj.work = owning_work, .takes = true, .take = NULL, .progress = PROG_WORKER, .stop = &stop};
    own_job_t waiting = {.pj.work = owning_work};
    mf_net_pool_submit(p, &busy.pj);
    mf_net_pool_submit(p, &waiting.pj);
    assert_no_growth_behind_progress(p, &stop, "the worker's progress did not count: it was taken for stuck");
    wait_done(&g, 1);
    mf_net_pool_destroy(p);
    cr_assert(busy.stopped);
    cr_assert_eq(atomic_load(&busy.dones), 0, "no done: the worker answered for no job");
    cr_assert_eq(atomic_load(&waiting.dones), 1);
    cr_assert_eq(atomic_load(&g.done), 1);
}

/*
 * The job handed over is no longer tied to the worker: progress on it
 * counts for nobody, so the worker, on its job since it began, looks stuck
 * and the judge starts a worker for the job queued behind it, which ends
 * the first one's loop (else it would run out its 10 s first).
 */
Test(net_pool, progress_on_the_job_handed_over_no_longer_counts_for_the_worker)
{
    gate_t g;
    gate_init(&g, 0);
    _Atomic int stop = 0;
    mf_net_pool_t *p = make_pool_each(&g, 1, 16, 1, 20 * 1000);
    own_job_t taken = {.pj.work = owning_work};
    own_job_t busy = {.pj.work = owning_work, .takes = true, .take = &taken.pj, .progress = PROG_HANDED, .stop = &stop};
    own_job_t waiting = {.pj.work = owning_work, .raise = &stop};
    mf_net_pool_submit(p, &busy.pj);
    mf_net_pool_submit(p, &waiting.pj);
    wait_done(&g, 2);
    mf_net_pool_stats_t st;
    mf_net_pool_stats(p, &st);
    mf_net_pool_destroy(p);
    cr_assert(busy.stopped, "the queued job waited for the busy worker: its progress still counted");
    cr_assert_geq(st.grown, 1, "grown %lld", (long long)st.grown);
    cr_assert_neq(waiting.w, busy.w, "the queued job ran on a worker started for it");
    cr_assert_eq(atomic_load(&busy.dones), 0);
    cr_assert_eq(atomic_load(&taken.dones), 1);
    cr_assert_eq(atomic_load(&waiting.dones), 1);
}
