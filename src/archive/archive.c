/*
 * archive.c: archive-on-expire (SPEC I2), the segment files and their rows.
 *
 * On disk (see archive.h for the why):
 *
 *   <dir>/<uuid, 32 lowercase hex>/<segment number, %08 decimal>.zst
 *       a run of zstd frames (level 1, with zstd's content checksum), one
 *       per 256 KB chunk of a committed archiving transaction's documents;
 *       a frame's content is documents' BSON back to back (each document
 *       starts with its int32 length, so no other framing is needed)
 *
 *   table:_mf_archive (key_format=u, value_format=u), one row per segment:
 *       key    uuid (16 bytes) + segment number (uint64, big-endian, so a
 *              collection's rows sort together and by number)
 *       value  BSON {len, docs, raw, first, last}, all int64: committed
 *              bytes of the file, documents in them, their BSON size before
 *              compression, wall-clock ms of the first and last append
 *
 * The row is the truth: bytes of a file past its row's len were written by a
 * transaction that did not commit (rolled back, or lost to kill -9 before
 * its commit reached the journal). Readers stop at len, the next append
 * overwrites from len, and mf_archive_open cuts the file to len. A file or
 * a uuid directory with no row at all (a new segment whose first commit was
 * lost, a drop or retention pass that crashed between its commit and its
 * unlinks) is removed at open.
 *
 * Appending (exactly once): mf_archive_stage copies each document into a
 * staging struct owned by the transaction (txn_stage_t, one per session with
 * a transaction open, listed in the archive so the next stage of the same
 * transaction finds it; one buffer per collection). The first stage
 * registers stage_prepare as the transaction's pre-commit step and
 * stage_end as an end callback. stage_prepare, inside the transaction and
 * per collection: compresses the buffer into frames, reserves the
 * collection (busy, under the mutex: a second transaction archiving to the
 * same collection before the first has ended fails with WriteConflict,
 * which it would meet anyway on the row), picks the target (the last
 * segment at its committed length, or a new segment number when the last is
 * at least segment_bytes long or was closed by retention), pwrites the frames
 * there, fdatasyncs them (sync) and puts the segment's new row in the same
 * transaction. stage_end releases the reservations and, only if the
 * transaction committed, moves the in-memory committed state forward; then
 * it frees the staging struct.
 *
 * Compression off the deleting thread: each time a transaction's buffer for
 * a collection reaches CHUNK_BYTES, the chunk goes to the archive's
 * compressor thread (cjob_t, a FIFO under a->jmu) and a new chunk starts,
 * so the chunks compress on another core while the TTL monitor goes on
 * deleting. stage_prepare compresses the last, partial chunk itself, waits
 * for the earlier ones and writes all the frames in order, then fsyncs once.
 * Measured (bench/archive_bench.js, 1,000,000 documents): compression was
 * the largest part of what archiving cost the monitor, ahead of the fsync.
 * A rolled-back transaction waits for its chunks before freeing them.
 *
 * In memory (under one mutex, a->mu): per collection, its committed
 * segments (mirroring the rows, ascending number), the next segment number
 * (never reused while the process runs: retention that removes the last
 * segment closes it first) and the busy flag (an append between its prepare
 * step and its end, or a drop, holds it). Statistics come from there.
 *
 * Readers snapshot (segment number, committed length) pairs under the mutex
 * and then read without it, file by file, streaming each through one zstd
 * decompression context; memory is bounded by the largest document plus
 * zstd's buffers, not by a frame or a segment. A file removed meanwhile
 * (retention, drop) is skipped; an open descriptor keeps reading an
 * unlinked file. Every document is length-checked and validated, so a
 * damaged file yields an error, never a crash.
 */
#include "archive/archive.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"

#define ARCHIVE_URI "table:_mf_archive"
#define ARCHIVE_TABLE_CONFIG "key_format=u,value_format=u"
#define KEY_LEN 24
#define ZSTD_LEVEL 1
/* The largest document archived or read back: a stored document's limit plus MongoDB's internal slack. */
#define MAX_DOC ((size_t)MF_MAX_BSON_SIZE + 16 * 1024)
#define PATH_BYTES 4096
/* Staged bytes per chunk handed to the compressor thread. */
#define CHUNK_BYTES (256 * 1024)

typedef struct seg {
    uint64_t no;
    int64_t len;   /* committed bytes */
    int64_t docs;  /* documents in them */
    int64_t raw;   /* their BSON bytes before compression */
    int64_t first; /* wall-clock ms of the first append */
    int64_t last;  /* and of the last */
} seg_t;

/* One collection's archive in memory (guarded by a->mu). */
typedef struct coll {
    uint8_t uuid[16];
    seg_t *segs; /* committed segments, ascending number */
    size_t nsegs, capsegs;
    uint64_t next_no; /* the number a new segment takes: above every number used */
    bool closed;      /* the last segment takes no more appends (retention removed it) */
    bool busy;        /* an append is between its prepare step and its end, or a drop runs */
} coll_t;

/*
 * A chunk of one transaction's staged documents, compressed into a frame of
 * its own by the archive's compressor thread while the transaction goes on
 * deleting (the commit then only compresses its last, partial chunk).
 * Fields after done are the worker's until done is set (under a->jmu).
 */
typedef struct cjob {
    struct cjob *next; /* the queue (a->jq_head), under a->jmu */
    uint8_t *src;      /* owned: documents back to back */
    size_t srclen;
    uint8_t *dst; /* owned: the frame */
    size_t result; /* the frame's size or a zstd error code */
    bool done;
} cjob_t;

/* What one transaction archives for one collection (touched only by the transaction's thread). */
typedef struct stage_coll {
    uint8_t uuid[16];
    uint8_t *buf; /* the current chunk: documents back to back, owned */
    size_t len, cap;
    cjob_t **jobs; /* earlier chunks, in order, handed to the compressor */
    size_t njobs, capjobs;
    int64_t raw;   /* BSON bytes staged in all */
    int64_t ndocs;
    bool reserved; /* this transaction set the collection's busy flag */
    bool new_seg;  /* seg is a new segment (not yet in memory) */
    seg_t seg;     /* the target segment's state once this transaction commits */
} stage_coll_t;

/* A transaction's staged documents, from its first mf_archive_stage to its end. */
typedef struct txn_stage {
    mf_archive_t *a;
    mf_sess_t *s;
    stage_coll_t *colls;
    size_t ncolls, capcolls;
    struct txn_stage *next; /* a->stages, under a->mu */
} txn_stage_t;

struct mf_archive {
    mf_storage_t *st;
    char *dir; /* owned copy */
    int64_t segment_bytes;
    bool sync;
    pthread_mutex_t mu;
    coll_t **colls; /* linear: few collections archive */
    size_t ncolls, capcolls;
    txn_stage_t *stages; /* transactions with documents staged */
    /* One compression context for commits, reused (making one per frame costs more than compressing a batch). */
    pthread_mutex_t cmu;
    ZSTD_CCtx *cctx; /* created on first use, guarded by cmu */
    /* The compressor thread (CHUNK_BYTES chunks, see cjob_t), started on first use. */
    pthread_mutex_t jmu;
    pthread_cond_t jcv;      /* work queued, or stop */
    pthread_cond_t jdone_cv; /* a job finished */
    cjob_t *jq_head, *jq_tail;
    bool worker_started, worker_failed, worker_stop;
    pthread_t worker;
};

typedef struct seg_ref {
    uint64_t no;
    int64_t len;
} seg_ref_t;

struct mf_archive_reader {
    char *udir; /* <dir>/<uuid hex>, owned */
    seg_ref_t *segs;
    size_t nsegs, next; /* next: the segment to open after the current one */
    int fd;             /* the current segment, -1 between segments */
    int64_t len, off;   /* its committed length and how much of it was read */
    ZSTD_DCtx *dctx;
    uint8_t *in; /* compressed input */
    size_t in_cap;
    ZSTD_inBuffer inb;
    size_t zret;  /* ZSTD_decompressStream's last return: 0 at a frame's end */
    uint8_t *buf; /* decompressed bytes; documents are taken from [start, end) */
    size_t cap, start, end;
    size_t consumed; /* the document last handed out, dropped at the next call */
    bson_t doc;      /* a static view of it (bson_t wants 128-byte alignment: see reader_open) */
};

/* ---- keys, rows, paths ---- */

static void
key_make(uint8_t key[KEY_LEN], const uint8_t uuid[16], uint64_t no)
{
    memcpy(key, uuid, 16);
    for (int i = 0; i < 8; i++)
        key[16 + i] = (uint8_t)(no >> (56 - 8 * i));
}

static uint64_t
key_no(const uint8_t *key)
{
    uint64_t no = 0;
    for (int i = 0; i < 8; i++)
        no = (no << 8) | key[16 + i];
    return no;
}

static void
uuid_hex(char out[33], const uint8_t uuid[16])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = digits[uuid[i] >> 4];
        out[2 * i + 1] = digits[uuid[i] & 15];
    }
    out[32] = '\0';
}

static int
hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* True if name is a uuid directory's name (32 lowercase hex digits); fills uuid. */
static bool
uuid_parse(const char *name, uint8_t uuid[16])
{
    if (strlen(name) != 32)
        return false;
    for (int i = 0; i < 16; i++) {
        int hi = hex_val(name[2 * i]), lo = hex_val(name[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        uuid[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* True if name is a segment file's name (decimal digits + ".zst"); fills *no. */
static bool
seg_name_parse(const char *name, uint64_t *no)
{
    uint64_t v = 0;
    const char *p = name;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (strcmp(p, ".zst") != 0)
        return false;
    *no = v;
    return true;
}

/* <dir>/<uuid hex> into out. Returns 0, or -1 with err when it does not fit. */
static int
udir_path(const char *dir, const uint8_t uuid[16], char *out, size_t size, mf_error_t *err)
{
    char hex[33];
    uuid_hex(hex, uuid);
    if ((size_t)snprintf(out, size, "%s/%s", dir, hex) >= size)
        return mf_err_set(err, MF_E_InternalError, "archive path too long under %s", dir);
    return 0;
}

/* <udir>/<no>.zst into out. Returns 0, or -1 with err when it does not fit. */
static int
seg_path(const char *udir, uint64_t no, char *out, size_t size, mf_error_t *err)
{
    if ((size_t)snprintf(out, size, "%s/%08" PRIu64 ".zst", udir, no) >= size)
        return mf_err_set(err, MF_E_InternalError, "archive path too long under %s", udir);
    return 0;
}

/* The row value of s (BSON {len, docs, raw, first, last}) into out (initialised here; caller destroys). */
static void
row_build(bson_t *out, const seg_t *s)
{
    bson_init(out);
    BSON_APPEND_INT64(out, "len", s->len);
    BSON_APPEND_INT64(out, "docs", s->docs);
    BSON_APPEND_INT64(out, "raw", s->raw);
    BSON_APPEND_INT64(out, "first", s->first);
    BSON_APPEND_INT64(out, "last", s->last);
}

/* Parses a row (key and value bytes) into s. False if it is not one. */
static bool
row_parse(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen, seg_t *s)
{
    bson_t doc;
    bson_iter_t it;
    int found = 0;
    if (klen != KEY_LEN || !bson_init_static(&doc, val, vlen) || !bson_iter_init(&it, &doc))
        return false;
    memset(s, 0, sizeof(*s));
    s->no = key_no(key);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int64_t *dst = strcmp(k, "len") == 0     ? &s->len
                       : strcmp(k, "docs") == 0  ? &s->docs
                       : strcmp(k, "raw") == 0   ? &s->raw
                       : strcmp(k, "first") == 0 ? &s->first
                       : strcmp(k, "last") == 0  ? &s->last
                                                 : NULL;
        if (dst == NULL || !BSON_ITER_HOLDS_INT64(&it))
            continue;
        *dst = bson_iter_int64(&it);
        found++;
    }
    return found == 5 && s->len >= 0;
}

/* fsyncs directory path (so an entry created or removed in it is durable). Returns 0 or -1 with err. */
static int
fsync_dir(const char *path, mf_error_t *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return mf_err_set(err, MF_E_InternalError, "cannot open archive directory %s: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0)
        return mf_err_set(err, MF_E_InternalError, "cannot sync archive directory %s: %s", path, strerror(e));
    return 0;
}

/* Best-effort fsync of a directory after removals (recovery redoes them if lost). */
static void
fsync_dir_quiet(const char *path)
{
    mf_error_t err;
    if (fsync_dir(path, &err) != 0)
        mf_log(MF_LOG_WARN, "STORAGE", "%s", err.msg);
}

/* Removes every file in udir and udir itself. Best effort: a failure is logged (open cleans up later). */
static void
udir_remove(const char *dir, const char *udir, bool sync)
{
    DIR *d = opendir(udir);
    struct dirent *de;
    char path[PATH_BYTES];
    if (d == NULL) {
        if (errno != ENOENT)
            mf_log(MF_LOG_WARN, "STORAGE", "cannot list archive directory %s: %s", udir, strerror(errno));
        return;
    }
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", udir, de->d_name) >= sizeof(path) ||
            (unlink(path) != 0 && errno != ENOENT))
            mf_log(MF_LOG_WARN, "STORAGE", "cannot remove archive file %s/%s: %s", udir, de->d_name,
                   strerror(errno));
    }
    closedir(d);
    if (rmdir(udir) != 0 && errno != ENOENT)
        mf_log(MF_LOG_WARN, "STORAGE", "cannot remove archive directory %s: %s", udir, strerror(errno));
    else if (sync)
        fsync_dir_quiet(dir);
}

/* ---- in-memory state (callers hold a->mu) ---- */

static coll_t *
coll_find(mf_archive_t *a, const uint8_t uuid[16])
{
    for (size_t i = 0; i < a->ncolls; i++) {
        if (memcmp(a->colls[i]->uuid, uuid, 16) == 0)
            return a->colls[i];
    }
    return NULL;
}

/* uuid's state, created (empty) if missing. Never NULL. */
static coll_t *
coll_get(mf_archive_t *a, const uint8_t uuid[16])
{
    coll_t *c = coll_find(a, uuid);
    if (c != NULL)
        return c;
    c = mf_calloc(1, sizeof(*c));
    memcpy(c->uuid, uuid, 16);
    c->next_no = 1;
    if (a->ncolls == a->capcolls) {
        a->capcolls = a->capcolls ? a->capcolls * 2 : 8;
        a->colls = mf_realloc(a->colls, a->capcolls * sizeof(*a->colls));
    }
    a->colls[a->ncolls++] = c;
    return c;
}

static void
coll_remove(mf_archive_t *a, coll_t *c)
{
    for (size_t i = 0; i < a->ncolls; i++) {
        if (a->colls[i] == c) {
            a->colls[i] = a->colls[--a->ncolls];
            break;
        }
    }
    free(c->segs);
    free(c);
}

/* Appends s as c's newest segment (its number is above all of c's). */
static void
coll_push_seg(coll_t *c, const seg_t *s)
{
    if (c->nsegs == c->capsegs) {
        c->capsegs = c->capsegs ? c->capsegs * 2 : 4;
        c->segs = mf_realloc(c->segs, c->capsegs * sizeof(*c->segs));
    }
    c->segs[c->nsegs++] = *s;
    if (s->no >= c->next_no)
        c->next_no = s->no + 1;
    c->closed = false;
}

static seg_t *
coll_seg(coll_t *c, uint64_t no)
{
    for (size_t i = 0; i < c->nsegs; i++) {
        if (c->segs[i].no == no)
            return &c->segs[i];
    }
    return NULL;
}

static void
coll_remove_seg(coll_t *c, uint64_t no)
{
    for (size_t i = 0; i < c->nsegs; i++) {
        if (c->segs[i].no == no) {
            memmove(&c->segs[i], &c->segs[i + 1], (c->nsegs - i - 1) * sizeof(*c->segs));
            c->nsegs--;
            return;
        }
    }
}

/* ---- opening and recovery ---- */

/* Cuts segment s of uuid to its committed length (what a lost commit left past it goes). Logs failures. */
static void
recover_cut(mf_archive_t *a, const uint8_t uuid[16], const seg_t *s)
{
    char udir[PATH_BYTES], path[PATH_BYTES];
    mf_error_t err;
    struct stat sb;
    if (udir_path(a->dir, uuid, udir, sizeof(udir), &err) != 0 ||
        seg_path(udir, s->no, path, sizeof(path), &err) != 0) {
        mf_log(MF_LOG_WARN, "STORAGE", "%s", err.msg);
        return;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        mf_log(MF_LOG_WARN, "STORAGE", "archive segment %s (%" PRId64 " committed bytes) cannot be opened: %s", path,
               s->len, strerror(errno));
        return;
    }
    if (fstat(fd, &sb) != 0)
        mf_log(MF_LOG_WARN, "STORAGE", "cannot stat archive segment %s: %s", path, strerror(errno));
    else if (sb.st_size > s->len && ftruncate(fd, s->len) != 0)
        mf_log(MF_LOG_WARN, "STORAGE", "cannot cut archive segment %s to %" PRId64 " bytes: %s", path, s->len,
               strerror(errno));
    else if (sb.st_size < s->len)
        mf_log(MF_LOG_WARN, "STORAGE", "archive segment %s is shorter (%lld bytes) than committed (%" PRId64 ")",
               path, (long long)sb.st_size, s->len);
    close(fd);
}

/* Removes segment files of c's directory that have no row. */
static void
recover_orphan_files(mf_archive_t *a, const coll_t *c, const char *udir)
{
    DIR *d = opendir(udir);
    struct dirent *de;
    char path[PATH_BYTES];
    bool removed = false;
    if (d == NULL) {
        if (errno != ENOENT)
            mf_log(MF_LOG_WARN, "STORAGE", "cannot list archive directory %s: %s", udir, strerror(errno));
        return;
    }
    while ((de = readdir(d)) != NULL) {
        uint64_t no;
        bool known = false;
        if (!seg_name_parse(de->d_name, &no))
            continue;
        for (size_t i = 0; i < c->nsegs && !known; i++)
            known = c->segs[i].no == no;
        if (known || (size_t)snprintf(path, sizeof(path), "%s/%s", udir, de->d_name) >= sizeof(path))
            continue;
        if (unlink(path) != 0)
            mf_log(MF_LOG_WARN, "STORAGE", "cannot remove uncommitted archive segment %s: %s", path, strerror(errno));
        else
            removed = true;
    }
    closedir(d);
    if (removed && a->sync)
        fsync_dir_quiet(udir);
}

/* Cuts every segment to its row's length, removes files and uuid directories without rows. */
static void
recover_files(mf_archive_t *a)
{
    DIR *d;
    struct dirent *de;
    char udir[PATH_BYTES];
    mf_error_t err;

    for (size_t i = 0; i < a->ncolls; i++) {
        for (size_t k = 0; k < a->colls[i]->nsegs; k++)
            recover_cut(a, a->colls[i]->uuid, &a->colls[i]->segs[k]);
    }
    d = opendir(a->dir);
    if (d == NULL) {
        mf_log(MF_LOG_WARN, "STORAGE", "cannot list archive directory %s: %s", a->dir, strerror(errno));
        return;
    }
    while ((de = readdir(d)) != NULL) {
        uint8_t uuid[16];
        if (!uuid_parse(de->d_name, uuid) || udir_path(a->dir, uuid, udir, sizeof(udir), &err) != 0)
            continue;
        coll_t *c = coll_find(a, uuid);
        if (c == NULL) {
            mf_log(MF_LOG_INFO, "STORAGE", "removing archive %s, which has no committed segment", udir);
            udir_remove(a->dir, udir, a->sync);
        } else {
            recover_orphan_files(a, c, udir);
        }
    }
    closedir(d);
}

/*
 * Loads every row of table:_mf_archive into a's collections. *unreadable
 * gets the number of rows that could not be parsed (skipped). Returns 0 or
 * -1 with err.
 */
static int
load_rows(mf_archive_t *a, mf_sess_t *s, int *unreadable, mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;
    if (mf_cur_open(s, ARCHIVE_URI, &cur, err) != 0)
        return -1;
    while ((ret = mf_cur_next(cur)) == 0) {
        const uint8_t *k, *v;
        size_t klen, vlen;
        seg_t sg;
        mf_cur_key_bytes(cur, &k, &klen);
        mf_cur_value(cur, &v, &vlen);
        if (!row_parse(k, klen, v, vlen, &sg)) {
            (*unreadable)++;
            continue;
        }
        /* Rows come in key order: by collection, then by segment number, so each push is the newest. */
        coll_push_seg(coll_get(a, k), &sg);
    }
    mf_cur_close(cur);
    if (ret != MF_NOTFOUND)
        return mf_err_set(err, ret == MF_CONFLICT ? MF_E_WriteConflict : MF_E_InternalError,
                          "reading %s failed", ARCHIVE_URI);
    return 0;
}

static void
archive_free(mf_archive_t *a)
{
    while (a->ncolls > 0)
        coll_remove(a, a->colls[0]);
    free(a->colls);
    pthread_mutex_lock(&a->jmu);
    bool started = a->worker_started;
    a->worker_stop = true;
    pthread_cond_broadcast(&a->jcv);
    pthread_mutex_unlock(&a->jmu);
    if (started)
        pthread_join(a->worker, NULL);
    pthread_cond_destroy(&a->jdone_cv);
    pthread_cond_destroy(&a->jcv);
    pthread_mutex_destroy(&a->jmu);
    pthread_mutex_destroy(&a->mu);
    ZSTD_freeCCtx(a->cctx);
    pthread_mutex_destroy(&a->cmu);
    free(a->dir);
    free(a);
}

int
mf_archive_open(mf_storage_t *st, const char *dir, int64_t segment_bytes, bool sync, mf_archive_t **out,
                mf_error_t *err)
{
    mf_archive_t *a = mf_calloc(1, sizeof(*a));
    mf_sess_t *s = mf_storage_session(st);
    int unreadable = 0;

    a->st = st;
    a->dir = mf_strdup(dir);
    a->segment_bytes = segment_bytes > 0 ? segment_bytes : MF_ARCHIVE_SEGMENT_BYTES;
    a->sync = sync;
    pthread_mutex_init(&a->mu, NULL);
    pthread_mutex_init(&a->cmu, NULL);
    pthread_mutex_init(&a->jmu, NULL);
    pthread_cond_init(&a->jcv, NULL);
    pthread_cond_init(&a->jdone_cv, NULL);
    if (strlen(dir) + 64 >= PATH_BYTES) {
        mf_err_set(err, MF_E_InternalError, "archive directory path too long: %s", dir);
        goto err_free;
    }
    if (mkdir(dir, 0700) == 0) {
        /* Make the new directory's entry durable in its parent. */
        char parent[PATH_BYTES];
        snprintf(parent, sizeof(parent), "%s", dir);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = '\0';
        else if (slash != NULL)
            *slash = '\0';
        else
            snprintf(parent, sizeof(parent), ".");
        if (sync && fsync_dir(parent, err) != 0)
            goto err_free;
    } else if (errno != EEXIST) {
        mf_err_set(err, MF_E_InternalError, "cannot create archive directory %s: %s", dir, strerror(errno));
        goto err_free;
    }
    if (mf_storage_create(s, ARCHIVE_URI, ARCHIVE_TABLE_CONFIG, err) != 0 || load_rows(a, s, &unreadable, err) != 0)
        goto err_release;
    mf_storage_session_release(s);
    /* An unreadable row may name a file: then nothing counts as orphaned (never remove data on a guess). */
    if (unreadable > 0)
        mf_log(MF_LOG_WARN, "STORAGE", "%d unreadable rows in %s: not removing archive files without rows",
               unreadable, ARCHIVE_URI);
    else
        recover_files(a);
    *out = a;
    return 0;

err_release:
    mf_storage_session_release(s);
err_free:
    mf_log(MF_LOG_ERROR, "STORAGE", "cannot open the archive: %s", err != NULL ? err->msg : "");
    archive_free(a);
    return -1;
}

void
mf_archive_close(mf_archive_t *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    bool staged = a->stages != NULL;
    pthread_mutex_unlock(&a->mu);
    if (staged) {
        /* Their sessions' callbacks still point at them: leaking is the only safe thing left. */
        mf_log(MF_LOG_ERROR, "STORAGE", "archive closed while a transaction has documents staged");
        return;
    }
    archive_free(a);
}

/* ---- staging and the commit ---- */

static void chunks_wait(mf_archive_t *a, stage_coll_t *sc);

static void
stage_free(txn_stage_t *t)
{
    for (size_t i = 0; i < t->ncolls; i++) {
        stage_coll_t *sc = &t->colls[i];
        chunks_wait(t->a, sc); /* the compressor may still hold a chunk */
        for (size_t j = 0; j < sc->njobs; j++) {
            free(sc->jobs[j]->src);
            free(sc->jobs[j]->dst);
            free(sc->jobs[j]);
        }
        free(sc->jobs);
        free(sc->buf);
    }
    free(t->colls);
    free(t);
}

/*
 * Opens (creating, with its directory, if needed) segment no of uuid for
 * writing. When a->sync, the directory entries are fsynced if anything was
 * created, and always for a new segment (new_seg): an earlier attempt that
 * created the file may have failed before its own fsync. Returns the
 * descriptor (caller closes) or -1 with err.
 */
static int
segment_open_write(mf_archive_t *a, const uint8_t uuid[16], uint64_t no, bool new_seg, mf_error_t *err)
{
    char udir[PATH_BYTES], path[PATH_BYTES];
    bool made_dir = false, made_file = false;
    int fd;
    if (udir_path(a->dir, uuid, udir, sizeof(udir), err) != 0 || seg_path(udir, no, path, sizeof(path), err) != 0)
        return -1;
    if (mkdir(udir, 0700) == 0)
        made_dir = true;
    else if (errno != EEXIST)
        return mf_err_set(err, MF_E_InternalError, "cannot create archive directory %s: %s", udir, strerror(errno));
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
        made_file = true;
    else if (errno == EEXIST)
        fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return mf_err_set(err, MF_E_InternalError, "cannot open archive segment %s: %s", path, strerror(errno));
    if (a->sync && (((made_dir || new_seg) && fsync_dir(a->dir, err) != 0) ||
                    ((made_file || new_seg) && fsync_dir(udir, err) != 0))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes len bytes of buf at off in fd. Returns 0 or -1 with err. */
static int
write_at(int fd, const uint8_t *buf, size_t len, int64_t off, mf_error_t *err)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return mf_err_set(err, MF_E_InternalError, "writing an archive segment failed: %s",
                              n < 0 ? strerror(errno) : "no progress");
        buf += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

/*
 * Compresses src into one zstd frame at dst (bound: ZSTD_compressBound). The
 * frame carries zstd's content checksum, so a damaged segment fails to read
 * instead of yielding altered documents. Returns the frame's size or a zstd
 * error code (ZSTD_isError).
 */
/* Sets up cctx for archive frames (level, content checksum). A zstd result. */
static size_t
cctx_setup(ZSTD_CCtx *cctx)
{
    size_t ret = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    if (!ZSTD_isError(ret))
        ret = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
    return ret;
}

/* The compressor thread: compresses queued chunks, oldest first, until the archive closes. */
static void *
compressor_main(void *arg)
{
    mf_archive_t *a = arg;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    bool ok = cctx != NULL && !ZSTD_isError(cctx_setup(cctx));

    pthread_mutex_lock(&a->jmu);
    for (;;) {
        while (a->jq_head == NULL && !a->worker_stop)
            pthread_cond_wait(&a->jcv, &a->jmu);
        if (a->jq_head == NULL)
            break; /* stopping, and nothing left */
        cjob_t *j = a->jq_head;
        a->jq_head = j->next;
        if (a->jq_head == NULL)
            a->jq_tail = NULL;
        pthread_mutex_unlock(&a->jmu);
        size_t bound = ZSTD_compressBound(j->srclen);
        uint8_t *dst = mf_malloc(bound);
        size_t r = ok ? ZSTD_compress2(cctx, dst, bound, j->src, j->srclen) : (size_t)-ZSTD_error_memory_allocation;
        pthread_mutex_lock(&a->jmu);
        j->dst = dst;
        j->result = r;
        j->done = true;
        pthread_cond_broadcast(&a->jdone_cv);
    }
    pthread_mutex_unlock(&a->jmu);
    ZSTD_freeCCtx(cctx);
    return NULL;
}

/*
 * Hands sc's current chunk to the compressor thread (starting it if need
 * be) and starts a new chunk. Without a thread (it could not start) the
 * chunk stays and is compressed at the commit.
 */
static void
chunk_submit(mf_archive_t *a, stage_coll_t *sc)
{
    pthread_mutex_lock(&a->jmu);
    if (!a->worker_started && !a->worker_failed && !a->worker_stop) {
        if (pthread_create(&a->worker, NULL, compressor_main, a) == 0)
            a->worker_started = true;
        else
            a->worker_failed = true;
    }
    if (!a->worker_started || a->worker_stop) {
        pthread_mutex_unlock(&a->jmu);
        return;
    }
    cjob_t *j = mf_calloc(1, sizeof(*j));
    j->src = sc->buf;
    j->srclen = sc->len;
    if (a->jq_tail)
        a->jq_tail->next = j;
    else
        a->jq_head = j;
    a->jq_tail = j;
    pthread_cond_signal(&a->jcv);
    pthread_mutex_unlock(&a->jmu);
    if (sc->njobs == sc->capjobs) {
        sc->capjobs = sc->capjobs ? sc->capjobs * 2 : 8;
        sc->jobs = mf_realloc(sc->jobs, sc->capjobs * sizeof(*sc->jobs));
    }
    sc->jobs[sc->njobs++] = j;
    sc->buf = NULL;
    sc->len = sc->cap = 0;
}

/* Waits until every chunk sc handed to the compressor is compressed. */
static void
chunks_wait(mf_archive_t *a, stage_coll_t *sc)
{
    pthread_mutex_lock(&a->jmu);
    for (size_t i = 0; i < sc->njobs; i++) {
        while (!sc->jobs[i]->done)
            pthread_cond_wait(&a->jdone_cv, &a->jmu);
    }
    pthread_mutex_unlock(&a->jmu);
}

static size_t
frame_compress(mf_archive_t *a, uint8_t *dst, size_t bound, const uint8_t *src, size_t len)
{
    size_t ret = 0;
    pthread_mutex_lock(&a->cmu);
    if (a->cctx == NULL) {
        a->cctx = ZSTD_createCCtx();
        ret = a->cctx == NULL ? (size_t)-ZSTD_error_memory_allocation : cctx_setup(a->cctx);
        if (ZSTD_isError(ret)) {
            ZSTD_freeCCtx(a->cctx);
            a->cctx = NULL;
        }
    }
    /* ZSTD_compress2 starts a new frame each call and keeps the parameters set above. */
    if (!ZSTD_isError(ret))
        ret = ZSTD_compress2(a->cctx, dst, bound, src, len);
    pthread_mutex_unlock(&a->cmu);
    return ret;
}

/*
 * Appends sc's documents as one frame to its collection's archive, inside
 * s's transaction (cur: a cursor on the archive table in s). Reserves the
 * collection (sc->reserved) before writing; stage_end releases it. Returns
 * 0 or -1 with err (the transaction is then rolled back).
 */
static int
append_one(mf_archive_t *a, mf_cur_t *cur, stage_coll_t *sc, mf_error_t *err)
{
    size_t bound = ZSTD_compressBound(sc->len);
    uint8_t *frame = mf_malloc(bound);
    uint8_t key[KEY_LEN];
    char hex[33];
    bson_t row;
    int fd = -1, rc = -1;

    uuid_hex(hex, sc->uuid);
    /* The last chunk here, while the compressor finishes the earlier ones; then all of them, in order. */
    size_t flen = sc->len > 0 ? frame_compress(a, frame, bound, sc->buf, sc->len) : 0;
    if (ZSTD_isError(flen)) {
        mf_err_set(err, MF_E_InternalError, "compressing archived documents failed: %s", ZSTD_getErrorName(flen));
        goto free_frame;
    }
    chunks_wait(a, sc);
    size_t total = flen;
    for (size_t i = 0; i < sc->njobs; i++) {
        if (ZSTD_isError(sc->jobs[i]->result)) {
            mf_err_set(err, MF_E_InternalError, "compressing archived documents failed: %s",
                       ZSTD_getErrorName(sc->jobs[i]->result));
            goto free_frame;
        }
        total += sc->jobs[i]->result;
    }
    int64_t now = mf_now_ms();

    pthread_mutex_lock(&a->mu);
    coll_t *c = coll_get(a, sc->uuid);
    if (c->busy) {
        pthread_mutex_unlock(&a->mu);
        mf_err_set(err, MF_E_WriteConflict, "another transaction is writing the archive of collection %s", hex);
        goto free_frame;
    }
    seg_t *last = c->nsegs > 0 ? &c->segs[c->nsegs - 1] : NULL;
    if (last != NULL && !c->closed && last->len < a->segment_bytes) {
        sc->seg = *last;
        sc->new_seg = false;
    } else {
        memset(&sc->seg, 0, sizeof(sc->seg));
        sc->seg.no = c->next_no;
        sc->seg.first = now;
        sc->new_seg = true;
    }
    c->busy = true;
    sc->reserved = true;
    pthread_mutex_unlock(&a->mu);

    /* The collection is ours until stage_end: nobody else writes past its committed length. */
    fd = segment_open_write(a, sc->uuid, sc->seg.no, sc->new_seg, err);
    if (fd < 0)
        goto free_frame;
    int64_t off = sc->seg.len;
    for (size_t i = 0; i < sc->njobs; i++) {
        if (write_at(fd, sc->jobs[i]->dst, sc->jobs[i]->result, off, err) != 0)
            goto close_fd;
        off += (int64_t)sc->jobs[i]->result;
    }
    if (flen > 0 && write_at(fd, frame, flen, off, err) != 0)
        goto close_fd;
    if (a->sync && fdatasync(fd) != 0) {
        mf_err_set(err, MF_E_InternalError, "syncing archive segment %s/%08" PRIu64 " failed: %s", hex, sc->seg.no,
                   strerror(errno));
        goto close_fd;
    }
    sc->seg.len += (int64_t)total;
    sc->seg.docs += sc->ndocs;
    sc->seg.raw += sc->raw;
    sc->seg.last = now;
    key_make(key, sc->uuid, sc->seg.no);
    row_build(&row, &sc->seg);
    int ret = mf_cur_put_bytes(cur, key, sizeof(key), bson_get_data(&row), row.len);
    bson_destroy(&row);
    if (ret == MF_CONFLICT)
        mf_err_set(err, MF_E_WriteConflict, "writing the archive row of collection %s conflicted", hex);
    else if (ret != 0)
        mf_err_set(err, MF_E_InternalError, "writing the archive row of collection %s failed", hex);
    else
        rc = 0;

close_fd:
    close(fd);
free_frame:
    free(frame);
    return rc;
}

/* The transaction's pre-commit step (mf_txn_on_prepare): one frame and one row per collection staged. */
static int
stage_prepare(void *arg, mf_sess_t *s, mf_error_t *err)
{
    txn_stage_t *t = arg;
    mf_cur_t *cur;
    int rc = 0;
    if (mf_cur_open(s, ARCHIVE_URI, &cur, err) != 0)
        return -1;
    for (size_t i = 0; i < t->ncolls && rc == 0; i++)
        rc = append_one(t->a, cur, &t->colls[i], err);
    mf_cur_close(cur);
    return rc;
}

/* The transaction's end (mf_txn_on_end): commits or forgets the appends, releases, frees t. */
static void
stage_end(void *arg, bool committed)
{
    txn_stage_t *t = arg;
    mf_archive_t *a = t->a;

    pthread_mutex_lock(&a->mu);
    for (txn_stage_t **p = &a->stages; *p != NULL; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    for (size_t i = 0; i < t->ncolls; i++) {
        stage_coll_t *sc = &t->colls[i];
        coll_t *c = sc->reserved ? coll_find(a, sc->uuid) : NULL;
        if (c == NULL)
            continue;
        c->busy = false;
        if (!committed)
            continue; /* what was written past the committed length is overwritten by the next append */
        if (sc->new_seg) {
            coll_push_seg(c, &sc->seg);
        } else {
            seg_t *sg = coll_seg(c, sc->seg.no);
            if (sg != NULL)
                *sg = sc->seg;
        }
    }
    pthread_mutex_unlock(&a->mu);
    stage_free(t);
}

int
mf_archive_stage(mf_archive_t *a, mf_sess_t *s, const uint8_t uuid[16], const bson_t *doc, mf_error_t *err)
{
    txn_stage_t *t;
    stage_coll_t *sc = NULL;

    if (!mf_txn_active(s))
        return mf_err_set(err, MF_E_InternalError, "archiving a document outside a transaction");
    if (doc->len < 5 || doc->len > MAX_DOC)
        return mf_err_set(err, MF_E_BSONObjectTooLarge, "cannot archive a document of %u bytes", doc->len);

    pthread_mutex_lock(&a->mu);
    for (t = a->stages; t != NULL && t->s != s; t = t->next)
        ;
    if (t == NULL) {
        t = mf_calloc(1, sizeof(*t));
        t->a = a;
        t->s = s;
        if (!mf_txn_on_prepare(s, stage_prepare, t)) {
            pthread_mutex_unlock(&a->mu);
            free(t);
            return mf_err_set(err, MF_E_InternalError,
                              "cannot archive: the transaction already has another pre-commit step");
        }
        mf_txn_on_end(s, stage_end, t);
        t->next = a->stages;
        a->stages = t;
    }
    pthread_mutex_unlock(&a->mu);

    /* t belongs to this session's transaction: only this thread touches its buffers. */
    for (size_t i = 0; i < t->ncolls && sc == NULL; i++) {
        if (memcmp(t->colls[i].uuid, uuid, 16) == 0)
            sc = &t->colls[i];
    }
    if (sc == NULL) {
        if (t->ncolls == t->capcolls) {
            t->capcolls = t->capcolls ? t->capcolls * 2 : 2;
            t->colls = mf_realloc(t->colls, t->capcolls * sizeof(*t->colls));
        }
        sc = &t->colls[t->ncolls++];
        memset(sc, 0, sizeof(*sc));
        memcpy(sc->uuid, uuid, 16);
    }
    if (sc->cap - sc->len < doc->len) {
        size_t cap = sc->cap ? sc->cap : 4096;
        while (cap - sc->len < doc->len)
            cap *= 2;
        sc->buf = mf_realloc(sc->buf, cap);
        sc->cap = cap;
    }
    memcpy(sc->buf + sc->len, bson_get_data(doc), doc->len);
    sc->len += doc->len;
    sc->raw += doc->len;
    if (sc->len >= CHUNK_BYTES)
        chunk_submit(a, sc);
    sc->ndocs++;
    return 0;
}

/* ---- drop and retention ---- */

/* Collects the segment numbers of uuid's rows, read through cur, into *nos (caller frees). Returns 0 or -1 with err. */
static int
rows_of(mf_cur_t *cur, const uint8_t uuid[16], uint64_t **nos, size_t *n, mf_error_t *err)
{
    uint8_t start[KEY_LEN];
    size_t cap = 0;
    int ret;
    *nos = NULL;
    *n = 0;
    key_make(start, uuid, 0);
    for (ret = mf_cur_seek_bytes_ge(cur, start, sizeof(start)); ret == 0; ret = mf_cur_next(cur)) {
        const uint8_t *k;
        size_t klen;
        mf_cur_key_bytes(cur, &k, &klen);
        if (klen < 16 || memcmp(k, uuid, 16) != 0)
            break;
        if (klen != KEY_LEN)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            *nos = mf_realloc(*nos, cap * sizeof(**nos));
        }
        (*nos)[(*n)++] = key_no(k);
    }
    if (ret != 0 && ret != MF_NOTFOUND) {
        free(*nos);
        *nos = NULL;
        return mf_err_set(err, ret == MF_CONFLICT ? MF_E_WriteConflict : MF_E_InternalError,
                          "reading %s failed", ARCHIVE_URI);
    }
    return 0;
}

/* Removes the rows (uuids[i], nos[i]) in one transaction of s's own. Returns 0 or -1 with err. */
static int
rows_remove(mf_archive_t *a, mf_sess_t *s, const uint8_t *uuids, size_t uuid_stride, const uint64_t *nos, size_t n,
            mf_error_t *err)
{
    mf_cur_t *cur = NULL;
    if (mf_txn_begin(s, err) != 0)
        return -1;
    if (mf_cur_open(s, ARCHIVE_URI, &cur, err) != 0)
        goto err_abort;
    for (size_t i = 0; i < n; i++) {
        uint8_t key[KEY_LEN];
        key_make(key, uuids + i * uuid_stride, nos[i]);
        int ret = mf_cur_remove_bytes(cur, key, sizeof(key));
        if (ret == MF_CONFLICT) {
            mf_err_set(err, MF_E_WriteConflict, "removing an archive row conflicted");
            goto err_abort;
        }
        if (ret != 0 && ret != MF_NOTFOUND) {
            mf_err_set(err, MF_E_InternalError, "removing an archive row failed");
            goto err_abort;
        }
    }
    mf_cur_close(cur);
    cur = NULL;
    if (mf_txn_commit(s, a->sync, err) != 0)
        goto err_release;
    mf_storage_session_release(s);
    return 0;

err_abort:
    mf_cur_close(cur);
    mf_txn_abort(s);
err_release:
    mf_storage_session_release(s);
    return -1;
}

int
mf_archive_drop(mf_archive_t *a, mf_sess_t *s, const uint8_t uuid[16], mf_error_t *err)
{
    char udir[PATH_BYTES], hex[33];
    mf_cur_t *cur = NULL;
    uint64_t *nos = NULL;
    size_t n = 0;
    int rc;

    uuid_hex(hex, uuid);
    if (mf_txn_active(s))
        return mf_err_set(err, MF_E_InternalError, "dropping an archive inside a transaction");
    if (udir_path(a->dir, uuid, udir, sizeof(udir), err) != 0)
        return -1;
    pthread_mutex_lock(&a->mu);
    coll_t *c = coll_get(a, uuid);
    if (c->busy) {
        pthread_mutex_unlock(&a->mu);
        return mf_err_set(err, MF_E_WriteConflict, "the archive of collection %s is being written", hex);
    }
    c->busy = true; /* no append starts until the drop is done */
    pthread_mutex_unlock(&a->mu);

    /* The rows first: once they are gone, the files are garbage that the next open would remove anyway. */
    rc = mf_cur_open(s, ARCHIVE_URI, &cur, err);
    if (rc == 0) {
        rc = rows_of(cur, uuid, &nos, &n, err);
        mf_cur_close(cur);
    }
    if (rc == 0 && n > 0)
        rc = rows_remove(a, s, uuid, 0, nos, n, err); /* stride 0: every row is uuid's */
    mf_storage_session_release(s);
    free(nos);

    pthread_mutex_lock(&a->mu);
    c = coll_find(a, uuid); /* still there: busy kept everyone else from removing it */
    if (c != NULL && rc == 0)
        coll_remove(a, c);
    else if (c != NULL)
        c->busy = false;
    pthread_mutex_unlock(&a->mu);
    if (rc != 0)
        return -1;
    udir_remove(a->dir, udir, a->sync);
    return 0;
}

int
mf_archive_expire(mf_archive_t *a, mf_sess_t *s, int64_t cutoff_ms, int64_t *removed, mf_error_t *err)
{
    uint8_t *uuids = NULL; /* victims: uuids[16 * i], nos[i] */
    uint64_t *nos = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;

    if (removed != NULL)
        *removed = 0;
    if (mf_txn_active(s))
        return mf_err_set(err, MF_E_InternalError, "archive retention inside a transaction");

    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->ncolls; i++) {
        coll_t *c = a->colls[i];
        if (c->busy)
            continue; /* an append or a drop is under way: the next pass gets it */
        for (size_t k = 0; k < c->nsegs; k++) {
            if (c->segs[k].last >= cutoff_ms)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                uuids = mf_realloc(uuids, cap * 16);
                nos = mf_realloc(nos, cap * sizeof(*nos));
            }
            memcpy(uuids + 16 * n, c->uuid, 16);
            nos[n++] = c->segs[k].no;
            if (k == c->nsegs - 1)
                c->closed = true; /* the next append starts a new segment number */
        }
    }
    pthread_mutex_unlock(&a->mu);
    if (n == 0) {
        rc = 0;
        goto done;
    }
    if (rows_remove(a, s, uuids, 16, nos, n, err) != 0)
        goto done;

    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < n; i++) {
        coll_t *c = coll_find(a, uuids + 16 * i);
        if (c != NULL)
            coll_remove_seg(c, nos[i]);
    }
    pthread_mutex_unlock(&a->mu);
    /* Readers that have the file open keep reading it; later ones skip it. */
    for (size_t i = 0; i < n; i++) {
        char udir[PATH_BYTES], path[PATH_BYTES];
        mf_error_t perr;
        if (udir_path(a->dir, uuids + 16 * i, udir, sizeof(udir), &perr) != 0 ||
            seg_path(udir, nos[i], path, sizeof(path), &perr) != 0)
            continue;
        if (unlink(path) != 0 && errno != ENOENT)
            mf_log(MF_LOG_WARN, "STORAGE", "cannot remove expired archive segment %s: %s", path, strerror(errno));
        else if (a->sync && (i + 1 == n || memcmp(uuids + 16 * i, uuids + 16 * (i + 1), 16) != 0))
            fsync_dir_quiet(udir);
    }
    if (removed != NULL)
        *removed = (int64_t)n;
    rc = 0;

done:
    free(uuids);
    free(nos);
    return rc;
}

void
mf_archive_stats(mf_archive_t *a, const uint8_t *uuid, mf_archive_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->ncolls; i++) {
        const coll_t *c = a->colls[i];
        if (uuid != NULL && memcmp(c->uuid, uuid, 16) != 0)
            continue;
        for (size_t k = 0; k < c->nsegs; k++) {
            out->bytes += c->segs[k].len;
            out->docs += c->segs[k].docs;
            out->raw_bytes += c->segs[k].raw;
            out->segments++;
        }
    }
    pthread_mutex_unlock(&a->mu);
}

/* ---- readers ---- */

int
mf_archive_reader_open(mf_archive_t *a, const uint8_t uuid[16], mf_archive_reader_t **out, mf_error_t *err)
{
    char udir[PATH_BYTES];
    if (udir_path(a->dir, uuid, udir, sizeof(udir), err) != 0)
        return -1;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    if (dctx == NULL)
        return mf_err_set(err, MF_E_InternalError, "cannot create a zstd decompression context");
    /* bson_t asks for 128-byte alignment, which mf_calloc does not give; like it, bson_aligned_alloc0 aborts on failure. */
    mf_archive_reader_t *r = bson_aligned_alloc0(_Alignof(mf_archive_reader_t), sizeof(*r));
    r->udir = mf_strdup(udir);
    r->fd = -1;
    r->dctx = dctx;
    pthread_mutex_lock(&a->mu);
    const coll_t *c = coll_find(a, uuid);
    if (c != NULL && c->nsegs > 0) {
        r->segs = mf_malloc(c->nsegs * sizeof(*r->segs));
        for (size_t i = 0; i < c->nsegs; i++)
            r->segs[i] = (seg_ref_t){c->segs[i].no, c->segs[i].len};
        r->nsegs = c->nsegs;
    }
    pthread_mutex_unlock(&a->mu);
    *out = r;
    return 0;
}

void
mf_archive_reader_close(mf_archive_reader_t *r)
{
    if (r == NULL)
        return;
    if (r->fd >= 0)
        close(r->fd);
    ZSTD_freeDCtx(r->dctx);
    free(r->in);
    free(r->buf);
    free(r->segs);
    free(r->udir);
    bson_free(r);
}

/*
 * Opens the next segment that still exists. Returns 1 (opened), 0 (no more
 * segments) or -1 with err.
 */
static int
reader_open_next(mf_archive_reader_t *r, mf_error_t *err)
{
    char path[PATH_BYTES];
    while (r->next < r->nsegs) {
        const seg_ref_t *sr = &r->segs[r->next++];
        if (sr->len == 0 || seg_path(r->udir, sr->no, path, sizeof(path), err) != 0)
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue; /* removed by retention or a drop since the reader opened */
        if (fd < 0)
            return mf_err_set(err, MF_E_InternalError, "cannot open archive segment %s: %s", path, strerror(errno));
        size_t zr = ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only);
        if (ZSTD_isError(zr)) {
            close(fd);
            return mf_err_set(err, MF_E_InternalError, "zstd: %s", ZSTD_getErrorName(zr));
        }
        r->fd = fd;
        r->len = sr->len;
        r->off = 0;
        r->inb = (ZSTD_inBuffer){r->in, 0, 0};
        r->zret = 0;
        return 1;
    }
    return 0;
}

/* Makes room for at least want more decompressed bytes at r->buf + r->end (dropping what was consumed). */
static void
reader_room(mf_archive_reader_t *r, size_t want)
{
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->cap - r->end >= want)
        return;
    size_t cap = r->cap ? r->cap * 2 : ZSTD_DStreamOutSize();
    if (cap < r->end + want)
        cap = r->end + want;
    r->buf = mf_realloc(r->buf, cap);
    r->cap = cap;
}

/*
 * Decompresses more of the current segment (want: bytes still missing for
 * the document at r->start, 0 if unknown). Returns 1 if bytes were added, 0
 * at the segment's committed end (every frame complete), -1 with err.
 */
static int
reader_fill(mf_archive_reader_t *r, size_t want, mf_error_t *err)
{
    size_t out_chunk = ZSTD_DStreamOutSize();
    reader_room(r, want > out_chunk ? want : out_chunk);
    if (r->in == NULL) {
        r->in_cap = ZSTD_DStreamInSize();
        r->in = mf_malloc(r->in_cap);
        r->inb.src = r->in;
    }
    for (;;) {
        if (r->inb.pos == r->inb.size && r->off < r->len) {
            size_t ask = (size_t)(r->len - r->off) < r->in_cap ? (size_t)(r->len - r->off) : r->in_cap;
            ssize_t n = pread(r->fd, r->in, ask, (off_t)r->off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return mf_err_set(err, MF_E_InternalError, "reading an archive segment in %s failed: %s", r->udir,
                                  strerror(errno));
            if (n == 0)
                return mf_err_set(err, MF_E_InternalError,
                                  "archive segment in %s is damaged: it ends before its committed length", r->udir);
            r->inb = (ZSTD_inBuffer){r->in, (size_t)n, 0};
            r->off += n;
        }
        bool input_done = r->inb.pos == r->inb.size && r->off == r->len;
        if (input_done && r->zret == 0)
            return 0;
        ZSTD_outBuffer o = {r->buf, r->cap, r->end};
        size_t ret = ZSTD_decompressStream(r->dctx, &o, &r->inb);
        if (ZSTD_isError(ret))
            return mf_err_set(err, MF_E_InternalError, "archive segment in %s is damaged: %s", r->udir,
                              ZSTD_getErrorName(ret));
        r->zret = ret;
        bool added = o.pos > r->end;
        r->end = o.pos;
        if (added)
            return 1;
        if (input_done && r->inb.pos == r->inb.size && ret != 0)
            return mf_err_set(err, MF_E_InternalError, "archive segment in %s is damaged: it ends inside a frame",
                              r->udir);
    }
}

int
mf_archive_reader_next(mf_archive_reader_t *r, const bson_t **doc, mf_error_t *err)
{
    r->start += r->consumed;
    r->consumed = 0;
    for (;;) {
        if (r->fd < 0) {
            int rc = reader_open_next(r, err);
            if (rc <= 0)
                return rc;
        }
        size_t avail = r->end - r->start, want = 0;
        if (avail >= 4) {
            const uint8_t *p = r->buf + r->start;
            uint32_t dlen = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
            if (dlen < 5 || dlen > MAX_DOC)
                return mf_err_set(err, MF_E_InvalidBSON,
                                  "archive segment in %s is damaged: a document claims %u bytes", r->udir, dlen);
            if (avail >= dlen) {
                size_t off;
                if (p[dlen - 1] != 0 || !bson_init_static(&r->doc, p, dlen) ||
                    !bson_validate(&r->doc, BSON_VALIDATE_NONE, &off))
                    return mf_err_set(err, MF_E_InvalidBSON, "archive segment in %s is damaged: invalid BSON",
                                      r->udir);
                r->consumed = dlen;
                *doc = &r->doc;
                return 1;
            }
            want = dlen - avail;
        }
        int rc = reader_fill(r, want, err);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            if (r->end != r->start)
                return mf_err_set(err, MF_E_InvalidBSON,
                                  "archive segment in %s is damaged: it ends inside a document", r->udir);
            close(r->fd);
            r->fd = -1;
        }
    }
}
