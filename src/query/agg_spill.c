/*
 * agg_spill.c: the external sorter (see agg_spill.h for the design).
 *
 * In memory, documents are copies of their BSON bytes packed into chunks
 * (bump allocation) of a power of two bytes, the largest not above a
 * sixteenth of the budget, within 4 KiB to 1 MiB: power-of-two sizes are
 * allocator size classes, so a chunk costs what it is asked for. A larger
 * document gets a chunk of its own. A heap bson_t per document would round
 * its buffer up to a power of two (doubling the footprint of 1 KB
 * documents), and freeing a run's documents one by one after each spill lets
 * the allocator's pages drift apart from the next run's, so the process grew
 * well past the budget. Chunks are reused run after run.
 *
 * Accounting. What counts against the budget is what the sorter has
 * allocated: the chunks in use, the pointer array as allocated (its
 * capacity, not its length) and the scratch array of the merge sort (a
 * pointer per document, allocated while a run is sorted). So the budget
 * bounds the sorter's real footprint, as MongoDB's sorter counts each
 * document's size with its overhead.
 *
 * Memory given back. A large sort streams its whole input through the
 * WiredTiger cache; when the data is larger than the cache, every page read
 * evicts another, and the evicted pages' memory is freed into whichever
 * allocator arena allocated it (often another worker's, idle now), where it
 * stays resident: jemalloc returns an arena's dirty pages only as that arena
 * is used. Over a 1 GB sort that retained memory grew the process by more
 * than the budget itself, and returning it only at each spill still let a
 * budget's worth pile up between spills. So every kReleaseBytes of input the
 * sorter asks the allocator to return free pages to the OS
 * (mf_alloc_release_free: jemalloc's purge of every arena when the server
 * links jemalloc, a build-time probe; glibc's malloc_trim otherwise; a
 * no-op under the sanitizers), and again when it frees its in-memory run
 * (finish, the last in-memory document, free). Only memory that is already
 * free goes back, never the sorter's own chunks, which stay for the next
 * run; a sort of less than kReleaseBytes never asks.
 *
 * Runs are stdio files with large buffers; a run is read back sequentially,
 * one document at a time. Runs smaller than kMinRunBytes are not written: a
 * tiny budget (tests lower it to force spilling) would otherwise open one
 * file per document.
 */
#include "query/agg_spill.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "query/exec.h"

enum { kMinRunBytes = 64 * 1024, kCheckEvery = 1024, kIoBuf = 64 * 1024, kMaxRuns = 64, kChunkMin = 4 * 1024,
       kChunkMax = 1024 * 1024, kReleaseBytes = 16 * 1024 * 1024 };

typedef struct chunk {
    uint8_t *data; /* owned */
    size_t cap, used;
} chunk_t;


typedef struct run {
    FILE *f;
    char *path;   /* owned */
    char *iobuf;  /* owned, stdio buffer */
    bson_t *head; /* owned: the run's next document, NULL when exhausted */
} run_t;

struct mf_sorter {
    mf_sorter_cmp_fn cmp;
    void *arg;
    int64_t budget;
    bool allow_disk;
    char *errmsg;     /* owned */
    char *dir;        /* owned, NULL: $TMPDIR or /tmp */
    uint8_t **docs;   /* owned array (cap entries): in-memory documents (raw BSON) inside chunks */
    chunk_t *chunks;  /* owned; chunks[0..cur) in use, the rest kept for reuse */
    size_t nchunks, cur;
    size_t chunk_size; /* a power of two <= budget / 16, within [4 KiB, 1 MiB] */
    size_t n, cap;
    int64_t chunk_mem; /* capacity of chunks[0..cur) */
    int64_t unreleased; /* input bytes since the allocator last returned free memory */
    run_t *runs;      /* owned */
    size_t nruns;
    bool finished;
    size_t mem_pos;   /* after finish: next in-memory document */
    int64_t steps;    /* for the interruption check */
    int64_t limit;    /* > 0: only the first limit documents are wanted (top-k) */
    int64_t spilled;  /* runs written (compaction merges them; this counts every one) */
    int64_t spilled_docs, spilled_bytes; /* documents and bytes those runs took (explain's spill counters) */
};

char *
mf_spill_dir_prepare(const char *dbpath)
{
    DIR *d;
    struct dirent *e;
    size_t n = strlen(dbpath) + 8;
    char *dir = mf_malloc(n);

    snprintf(dir, n, "%s/_tmp", dbpath);
    (void)mkdir(dir, 0700);
    /* Leftovers of an earlier process (crash, kill -9) are never needed again. */
    if ((d = opendir(dir)) == NULL)
        return dir;
    while ((e = readdir(d)) != NULL) {
        char p[4096];
        if (strncmp(e->d_name, "agg-", 4) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        (void)unlink(p);
    }
    closedir(d);
    return dir;
}


mf_sorter_t *
mf_sorter_new(mf_sorter_cmp_fn cmp, void *arg, int64_t budget, bool allow_disk, const char *errmsg, const char *dir)
{
    mf_sorter_t *s = mf_calloc(1, sizeof *s);
    s->dir = dir ? mf_strdup(dir) : NULL;
    s->chunk_size = kChunkMin;
    while (s->chunk_size < kChunkMax && (int64_t)s->chunk_size * 2 <= budget / 16)
        s->chunk_size *= 2;
    s->cmp = cmp;
    s->arg = arg;
    s->budget = budget;
    s->allow_disk = allow_disk;
    s->errmsg = mf_strdup(errmsg ? errmsg : "memory limit exceeded");
    return s;
}

mf_sorter_t *
mf_sorter_new_sort(mf_sorter_cmp_fn cmp, void *arg, int64_t budget, bool allow_disk, const char *dir)
{
    char msg[160];
    snprintf(msg, sizeof msg, "Sort exceeded memory limit of %lld bytes, but did not opt in to external sorting.",
             (long long)budget);
    return mf_sorter_new(cmp, arg, budget, allow_disk, msg, dir);
}

static void
run_close(run_t *r)
{
    if (r->f) {
        fclose(r->f);
    }
    if (r->path) {
        (void)unlink(r->path);
        free(r->path);
    }
    free(r->iobuf);
    if (r->head)
        bson_destroy(r->head);
    memset(r, 0, sizeof *r);
}

/* mem_used: the bytes the sorter's in-memory run costs (see "Accounting" above). */
static int64_t
mem_used(const mf_sorter_t *s)
{
    return s->chunk_mem + (int64_t)(s->cap + s->n) * (int64_t)sizeof *s->docs;
}

/*
 * chunks_free: frees chunks[from..nchunks) (unused ones, or all of them with
 * from 0, when no document is held in them any more). Returns the bytes freed.
 */
static size_t
chunks_free(mf_sorter_t *s, size_t from)
{
    size_t freed = 0;
    for (size_t i = from; i < s->nchunks; i++) {
        freed += s->chunks[i].cap;
        free(s->chunks[i].data);
    }
    s->nchunks = from;
    if (from == 0) {
        free(s->chunks);
        s->chunks = NULL;
        s->cur = 0;
        s->chunk_mem = 0;
    }
    return freed;
}

void
mf_sorter_free(mf_sorter_t *s)
{
    if (s == NULL)
        return;
    size_t freed = chunks_free(s, 0);
    free(s->docs);
    for (size_t i = 0; i < s->nruns; i++)
        run_close(&s->runs[i]);
    free(s->runs);
    free(s->errmsg);
    free(s->dir);
    free(s);
    if (freed >= kReleaseBytes)
        mf_alloc_release_free();
}

static int
check_interrupt(mf_sorter_t *s, mf_error_t *err)
{
    if (++s->steps % kCheckEvery == 0)
        return mf_exec_check_deadline(err);
    return 0;
}

/*
 * chunk_alloc: n bytes in the current chunk, else in the next one (a kept
 * chunk when it is big enough, else a new one: 1 MiB, or n for a bigger
 * document). A chunk's capacity counts in s->chunk_mem from when it comes into use.
 */
static uint8_t *
chunk_alloc(mf_sorter_t *s, size_t n)
{
    if (s->cur == 0 || s->chunks[s->cur - 1].cap - s->chunks[s->cur - 1].used < n) {
        if (s->cur >= s->nchunks || s->chunks[s->cur].cap < n) {
            size_t cap = n > s->chunk_size ? n : s->chunk_size;
            s->chunks = mf_realloc(s->chunks, (s->nchunks + 1) * sizeof *s->chunks);
            memmove(&s->chunks[s->cur + 1], &s->chunks[s->cur], (s->nchunks - s->cur) * sizeof *s->chunks);
            s->nchunks++;
            s->chunks[s->cur].data = mf_malloc(cap);
            s->chunks[s->cur].cap = cap;
        }
        s->chunks[s->cur].used = 0;
        s->chunk_mem += (int64_t)s->chunks[s->cur].cap;
        s->cur++;
    }
    chunk_t *c = &s->chunks[s->cur - 1];
    uint8_t *p = c->data + c->used;
    c->used += n;
    return p;
}

/* chunks_reset: no document is held any more (spilled); the chunks stay for the next run. */
static void
chunks_reset(mf_sorter_t *s)
{
    s->cur = 0;
    s->n = 0;
    s->chunk_mem = 0;
}

static uint32_t
raw_len(const uint8_t *d)
{
    uint32_t len;
    memcpy(&len, d, 4);
    return BSON_UINT32_FROM_LE(len);
}

/* raw_cmp: s->cmp over two raw BSON buffers. */
static int
raw_cmp(mf_sorter_t *s, const uint8_t *a, const uint8_t *b)
{
    bson_t ba, bb;
    bson_init_static(&ba, a, raw_len(a));
    bson_init_static(&bb, b, raw_len(b));
    return s->cmp(s->arg, &ba, &bb);
}

/* Stable merge sort of s->docs[0..n) by s->cmp. Returns 0 or -1 (interrupted). */
static int
sort_mem(mf_sorter_t *s, mf_error_t *err)
{
    size_t n = s->n;
    if (n < 2)
        return 0;
    uint8_t **a = s->docs, **b = mf_malloc(n * sizeof *b);
    int rc = 0;
    for (size_t w = 1; w < n && rc == 0; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = raw_cmp(s, a[j], a[i]) < 0 ? a[j++] : a[i++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        uint8_t **t = a;
        a = b;
        b = t;
        if (mf_exec_check_deadline(err) != 0)
            rc = -1;
    }
    if (a != s->docs) {
        memcpy(s->docs, a, n * sizeof *a);
        b = a;
    }
    free(b);
    return rc;
}

/* Reads the next document of r into r->head (NULL at the end). */
static int
run_read(run_t *r, mf_error_t *err)
{
    uint8_t lenb[4];
    int32_t len;

    if (r->head) {
        bson_destroy(r->head);
        r->head = NULL;
    }
    if (fread(lenb, 1, 4, r->f) != 4)
        return 0; /* end of run */
    memcpy(&len, lenb, 4);
    len = (int32_t)BSON_UINT32_FROM_LE((uint32_t)len);
    if (len < 5)
        return mf_err_set(err, MF_E_InternalError, "corrupt aggregation spill file %s", r->path);
    uint8_t *buf = mf_malloc((size_t)len);
    memcpy(buf, lenb, 4);
    if (fread(buf + 4, 1, (size_t)len - 4, r->f) != (size_t)len - 4) {
        free(buf);
        return mf_err_set(err, MF_E_InternalError, "short read from aggregation spill file %s", r->path);
    }
    r->head = bson_new_from_data(buf, (size_t)len);
    free(buf);
    if (r->head == NULL)
        return mf_err_set(err, MF_E_InternalError, "corrupt aggregation spill file %s", r->path);
    return 0;
}

/* run_create: a new empty run file open for writing and reading. */
static int
run_create(const mf_sorter_t *s, run_t *r, mf_error_t *err)
{
    char path[4096];
    const char *dir = s->dir ? s->dir : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");

    memset(r, 0, sizeof *r);
    /* A unique name from mkstemps: no counter shared between sorters or engines. */
    snprintf(path, sizeof path, "%s/agg-XXXXXX.run", dir);
    int fd = mkstemps(path, 4);
    if (fd < 0 || (r->f = fdopen(fd, "w+b")) == NULL) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            (void)unlink(path);
        }
        return mf_err_set(err, MF_E_InternalError, "cannot create aggregation spill file %s: %s", path, strerror(e));
    }
    r->path = mf_strdup(path);
    r->iobuf = mf_malloc(kIoBuf);
    setvbuf(r->f, r->iobuf, _IOFBF, kIoBuf);
    return 0;
}

static int
run_write(run_t *r, const uint8_t *data, uint32_t len, mf_error_t *err)
{
    if (fwrite(data, 1, len, r->f) != len)
        return mf_err_set(err, MF_E_InternalError, "cannot write aggregation spill file %s: %s", r->path, strerror(errno));
    return 0;
}

/* run_rewind: finishes writing r and positions it at its start for reading. */
static int
run_rewind(run_t *r, mf_error_t *err)
{
    if (fflush(r->f) != 0 || fseek(r->f, 0, SEEK_SET) != 0)
        return mf_err_set(err, MF_E_InternalError, "cannot write aggregation spill file %s: %s", r->path, strerror(errno));
    return 0;
}

/*
 * pick: among runs [lo, hi) and mem_head (the in-memory run's next
 * document, may be NULL), the one whose head sorts first; ties go to the
 * earliest run (the in-memory run is the latest). Sets *from to the run
 * index, or -1 for the in-memory run; returns -2 when all are exhausted.
 */
static ssize_t
pick(mf_sorter_t *s, size_t lo, size_t hi, const bson_t *mem_head, ssize_t *from)
{
    const bson_t *best = mem_head;
    *from = -1;
    for (size_t i = hi; i-- > lo;) {
        const bson_t *h = s->runs[i].head;
        if (h != NULL && (best == NULL || s->cmp(s->arg, h, best) <= 0)) {
            best = h;
            *from = (ssize_t)i;
        }
    }
    return best == NULL ? -2 : *from;
}

/*
 * compact: merges runs [lo, nruns) into one (a stable k-way merge into a new
 * file), so a small budget over a large input never holds more than
 * kMaxRuns files. The newest half is merged each time, so older data is
 * rewritten only a logarithmic number of times. Runs are in input order, so
 * the merged run takes the place of the runs it replaces.
 */
static int
compact(mf_sorter_t *s, size_t lo, mf_error_t *err)
{
    run_t out;
    int rc = 0;
    ssize_t from;

    if (run_create(s, &out, err) != 0)
        return -1;
    for (size_t i = lo; i < s->nruns && rc == 0; i++)
        rc = run_read(&s->runs[i], err);
    while (rc == 0 && pick(s, lo, s->nruns, NULL, &from) >= 0) {
        run_t *r = &s->runs[from];
        rc = run_write(&out, bson_get_data(r->head), r->head->len, err);
        if (rc == 0)
            rc = run_read(r, err);
        if (rc == 0)
            rc = check_interrupt(s, err);
    }
    if (rc == 0)
        rc = run_rewind(&out, err);
    for (size_t i = lo; i < s->nruns; i++)
        run_close(&s->runs[i]);
    s->nruns = lo;
    if (rc != 0) {
        run_close(&out);
        return -1;
    }
    s->runs[s->nruns++] = out;
    return 0;
}

/* Sorts the in-memory documents and writes them as a new run. */
static int
spill(mf_sorter_t *s, mf_error_t *err)
{
    run_t r;
    int rc = 0;

    if (s->n == 0)
        return 0;
    if (s->nruns >= kMaxRuns && compact(s, s->nruns - kMaxRuns / 2, err) != 0)
        return -1;
    if (sort_mem(s, err) != 0 || run_create(s, &r, err) != 0)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        if (rc == 0)
            rc = run_write(&r, s->docs[i], raw_len(s->docs[i]), err);
        s->spilled_bytes += raw_len(s->docs[i]);
        if (rc == 0 && check_interrupt(s, err) != 0)
            rc = -1;
    }
    s->spilled_docs += (int64_t)s->n;
    chunks_reset(s);
    if (rc == 0)
        rc = run_rewind(&r, err);
    if (rc != 0) {
        run_close(&r);
        return -1;
    }
    s->runs = mf_realloc(s->runs, (s->nruns + 1) * sizeof *s->runs);
    s->runs[s->nruns++] = r;
    s->spilled++;
    return 0;
}

int
mf_sorter_spill_now(mf_sorter_t *s, mf_error_t *err)
{
    return spill(s, err);
}

void
mf_sorter_set_limit(mf_sorter_t *s, int64_t limit)
{
    s->limit = limit;
}

/* trim: keeps the first s->limit documents in order (stable), releasing the rest. */
static int
trim(mf_sorter_t *s, mf_error_t *err)
{
    size_t keep = (size_t)s->limit;
    if (sort_mem(s, err) != 0)
        return -1;
    /* Copy the survivors out, then back into the reset chunks (in order). */
    uint8_t **tmp = mf_malloc(keep * sizeof *tmp);
    for (size_t i = 0; i < keep; i++) {
        uint32_t len = raw_len(s->docs[i]);
        tmp[i] = mf_malloc(len);
        memcpy(tmp[i], s->docs[i], len);
    }
    chunks_reset(s);
    for (size_t i = 0; i < keep; i++) {
        uint32_t len = raw_len(tmp[i]);
        s->docs[i] = chunk_alloc(s, len);
        memcpy(s->docs[i], tmp[i], len);
        free(tmp[i]);
    }
    s->n = keep;
    free(tmp);
    return 0;
}

int
mf_sorter_add(mf_sorter_t *s, bson_t *doc, mf_error_t *err)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->docs = mf_realloc(s->docs, s->cap * sizeof *s->docs);
    }
    s->docs[s->n] = chunk_alloc(s, doc->len);
    memcpy(s->docs[s->n++], bson_get_data(doc), doc->len);
    /* The scan that feeds a long sort churns the storage cache: hand back what that freed (see the top). */
    s->unreleased += doc->len;
    if (s->unreleased >= kReleaseBytes) {
        mf_alloc_release_free();
        s->unreleased = 0;
    }
    bson_destroy(doc);
    if (check_interrupt(s, err) != 0)
        return -1;
    /* Top-k: whenever twice the wanted count is held, the tail can never be returned. */
    if (s->limit > 0 && s->n >= (size_t)s->limit * 2 + 1024 && trim(s, err) != 0)
        return -1;
    if (mem_used(s) > s->budget && s->limit > 0 && s->n > (size_t)s->limit && trim(s, err) != 0)
        return -1;
    if (mem_used(s) <= s->budget)
        return 0;
    if (!s->allow_disk)
        return mf_err_set(err, MF_E_QueryExceededMemoryLimitNoDiskUseAllowed, "%s", s->errmsg);
    if (mem_used(s) < kMinRunBytes)
        return 0;
    return spill(s, err);
}

int
mf_sorter_finish(mf_sorter_t *s, mf_error_t *err)
{
    s->finished = true;
    s->mem_pos = 0;
    if (sort_mem(s, err) != 0)
        return -1;
    /* Chunks kept for a next run that will not come. */
    if (chunks_free(s, s->cur) >= kReleaseBytes)
        mf_alloc_release_free();
    for (size_t i = 0; i < s->nruns; i++)
        if (run_read(&s->runs[i], err) != 0)
            return -1;
    return 0;
}

int
mf_sorter_next(mf_sorter_t *s, bson_t **out, mf_error_t *err)
{
    bson_t mem_head;
    const bson_t *best = NULL;
    ssize_t from = -1; /* -1: the in-memory run */

    if (s->mem_pos < s->n) {
        bson_init_static(&mem_head, s->docs[s->mem_pos], raw_len(s->docs[s->mem_pos]));
        best = &mem_head;
    }

    *out = NULL;
    if (check_interrupt(s, err) != 0)
        return -1;
    /* Disk runs hold earlier input than the in-memory run: they win ties. */
    if (pick(s, 0, s->nruns, best, &from) == -2)
        return 0;
    if (from < 0) {
        uint8_t *d = s->docs[s->mem_pos++];
        *out = bson_new_from_data(d, raw_len(d));
        if (s->mem_pos == s->n) {
            /* The in-memory run is exhausted: its chunks go now, not when the cursor does. */
            size_t freed = chunks_free(s, 0);
            free(s->docs);
            s->docs = NULL;
            s->n = s->cap = s->mem_pos = 0;
            if (freed >= kReleaseBytes)
                mf_alloc_release_free();
        }
        return 0;
    }
    *out = s->runs[from].head;
    s->runs[from].head = NULL;
    return run_read(&s->runs[from], err);
}

int64_t
mf_sorter_spilled(const mf_sorter_t *s)
{
    return s->spilled;
}

void
mf_sorter_spill_totals(const mf_sorter_t *s, int64_t *docs, int64_t *bytes)
{
    *docs = s == NULL ? 0 : s->spilled_docs;
    *bytes = s == NULL ? 0 : s->spilled_bytes;
}

int64_t
mf_sorter_mem(const mf_sorter_t *s)
{
    return mem_used(s);
}
