/*
 * test_archive.c: the expiry archive (SPEC I2, src/archive/), socket-free:
 * mf_storage_open + mf_archive_open on a temporary directory under /tmp,
 * closed and reopened to play a restart.
 *
 * What is checked: documents staged in a transaction read back byte for
 * byte, in order, once it commits (every BSON type); a rollback, or a
 * commit that fails in the archive's own row write, leaves nothing (and the
 * bytes it wrote are overwritten by the next append); bytes past a
 * segment's committed length (a lost commit) are never read and are cut at
 * reopen; a restart keeps everything; segments roll at segment_bytes;
 * retention removes old segments only and never reuses a segment number;
 * a drop removes rows and files; one transaction may archive for two
 * collections; files and directories without rows are removed at open; a
 * second transaction archiving to a collection whose append has not ended
 * fails with WriteConflict; damaged segments read as an error.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "archive/archive.h"
#include "common/clock.h"
#include "storage/storage.h"

static const uint8_t UUID_A[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                   0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
static const uint8_t UUID_B[16] = {0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
                                   0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
#define HEX_A "00112233445566778899aabbccddeeff"
#define HEX_B "fedcba98765432100123456789abcdef"

typedef struct env {
    char dir[64];
    char adir[96];
    int64_t segment_bytes;
    mf_storage_t *st;
    mf_archive_t *a;
} env_t;

static void
env_open(env_t *e)
{
    mf_error_t err = {0};
    cr_assert_eq(mf_storage_open(e->dir, &e->st, &err), 0, "storage open: %s", err.msg);
    cr_assert_eq(mf_archive_open(e->st, e->adir, e->segment_bytes, true, &e->a, &err), 0, "archive open: %s",
                 err.msg);
}

static void
env_close(env_t *e)
{
    mf_archive_close(e->a);
    mf_storage_close(e->st);
    e->a = NULL;
    e->st = NULL;
}

static void
env_init(env_t *e, int64_t segment_bytes)
{
    snprintf(e->dir, sizeof(e->dir), "/tmp/mf-test-archive-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
    snprintf(e->adir, sizeof(e->adir), "%s/archive", e->dir);
    e->segment_bytes = segment_bytes;
    env_open(e);
}

static void
env_destroy(env_t *e)
{
    char cmd[128];
    env_close(e);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->dir);
    cr_assert_eq(system(cmd), 0);
}

/* {i: i, pad: "..."}: a small document numbered i (caller destroys). */
static bson_t *
doc_num(int i)
{
    bson_t *d = bson_new();
    BSON_APPEND_INT32(d, "i", i);
    BSON_APPEND_UTF8(d, "pad", "the quick brown fox jumps over the lazy dog");
    return d;
}

/* One transaction on this thread's session that stages docs[0..n) for uuid, then commits. */
static void
archive_txn(env_t *e, const uint8_t *uuid, bson_t **docs, size_t n)
{
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(e->st);
    cr_assert_eq(mf_txn_begin(s, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(mf_archive_stage(e->a, s, uuid, docs[i], &err), 0, "stage: %s", err.msg);
    cr_assert_eq(mf_txn_commit(s, false, &err), 0, "commit: %s", err.msg);
}

/* Archives document i (doc_num) for uuid in its own transaction. */
static void
archive_num(env_t *e, const uint8_t *uuid, int i)
{
    bson_t *d = doc_num(i);
    archive_txn(e, uuid, &d, 1);
    bson_destroy(d);
}

/* Reads uuid's whole archive; asserts it is exactly docs[0..n), byte for byte. */
static void
expect_docs(env_t *e, const uint8_t *uuid, bson_t **docs, size_t n)
{
    mf_error_t err = {0};
    mf_archive_reader_t *r;
    const bson_t *d;
    size_t got = 0;
    int rc;
    cr_assert_eq(mf_archive_reader_open(e->a, uuid, &r, &err), 0, "%s", err.msg);
    while ((rc = mf_archive_reader_next(r, &d, &err)) == 1) {
        cr_assert_lt(got, n, "more documents than archived (%zu)", n);
        cr_assert_eq(d->len, docs[got]->len, "document %zu: %u bytes, expected %u", got, d->len, docs[got]->len);
        cr_assert_eq(memcmp(bson_get_data(d), bson_get_data(docs[got]), d->len), 0, "document %zu differs", got);
        got++;
    }
    cr_assert_eq(rc, 0, "reader: %d %s", rc, err.msg);
    cr_assert_eq(got, n, "read %zu documents, expected %zu", got, n);
    mf_archive_reader_close(r);
}

/* Reads uuid's archive; asserts it holds the doc_num documents listed in nums[0..n). */
static void
expect_nums(env_t *e, const uint8_t *uuid, const int *nums, size_t n)
{
    bson_t **docs = calloc(n ? n : 1, sizeof(*docs));
    for (size_t i = 0; i < n; i++)
        docs[i] = doc_num(nums[i]);
    expect_docs(e, uuid, docs, n);
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
}

static void
seg_path(env_t *e, const char *hex, int no, char *out, size_t size)
{
    snprintf(out, size, "%s/%s/%08d.zst", e->adir, hex, no);
}

static bool
exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int64_t
file_size(const char *path)
{
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0, "stat %s", path);
    return (int64_t)sb.st_size;
}

/* Number of *.zst files in <adir>/<hex> and their total size. */
static int
count_files(env_t *e, const char *hex, int64_t *bytes)
{
    char udir[256], path[512];
    DIR *d;
    struct dirent *de;
    int n = 0;
    *bytes = 0;
    snprintf(udir, sizeof(udir), "%s/%s", e->adir, hex);
    d = opendir(udir);
    if (d == NULL)
        return 0;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l < 4 || strcmp(de->d_name + l - 4, ".zst") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", udir, de->d_name);
        *bytes += file_size(path);
        n++;
    }
    closedir(d);
    return n;
}

/* Appends len bytes to the file at path. */
static void
append_bytes(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    cr_assert_geq(fd, 0, "open %s", path);
    cr_assert_eq(write(fd, buf, len), (ssize_t)len);
    close(fd);
}

/* A document with a field of every BSON type (binary in several subtypes). */
static bson_t *
doc_every_type(int variant)
{
    bson_t *d = bson_new(), sub, arr, scope;
    bson_oid_t oid;
    bson_decimal128_t dec;
    static const uint8_t bytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

    bson_oid_init_from_string(&oid, "0123456789abcdef01234567");
    BSON_APPEND_DOUBLE(d, "double", 3.25 + variant);
    BSON_APPEND_UTF8(d, "string", "héllo wörld");
    BSON_APPEND_DOCUMENT_BEGIN(d, "doc", &sub);
    BSON_APPEND_INT32(&sub, "x", variant);
    BSON_APPEND_UTF8(&sub, "y", "nested");
    bson_append_document_end(d, &sub);
    BSON_APPEND_ARRAY_BEGIN(d, "array", &arr);
    BSON_APPEND_INT32(&arr, "0", 1);
    BSON_APPEND_UTF8(&arr, "1", "two");
    BSON_APPEND_NULL(&arr, "2");
    bson_append_array_end(d, &arr);
    cr_assert(bson_append_binary(d, "bin_generic", -1, BSON_SUBTYPE_BINARY, bytes, 5));
    cr_assert(bson_append_binary(d, "bin_function", -1, BSON_SUBTYPE_FUNCTION, bytes, 3));
    cr_assert(bson_append_binary(d, "bin_old", -1, BSON_SUBTYPE_BINARY_DEPRECATED, bytes, 4));
    cr_assert(bson_append_binary(d, "bin_uuid_old", -1, BSON_SUBTYPE_UUID_DEPRECATED, bytes, 16));
    cr_assert(bson_append_binary(d, "bin_uuid", -1, BSON_SUBTYPE_UUID, bytes, 16));
    cr_assert(bson_append_binary(d, "bin_md5", -1, BSON_SUBTYPE_MD5, bytes, 16));
    cr_assert(bson_append_binary(d, "bin_encrypted", -1, BSON_SUBTYPE_ENCRYPTED, bytes, 7));
    cr_assert(bson_append_binary(d, "bin_user", -1, BSON_SUBTYPE_USER, bytes, 9));
    cr_assert(bson_append_binary(d, "bin_empty", -1, BSON_SUBTYPE_BINARY, NULL, 0));
    BSON_APPEND_UNDEFINED(d, "undefined");
    BSON_APPEND_OID(d, "oid", &oid);
    BSON_APPEND_BOOL(d, "bool", variant % 2 == 0);
    BSON_APPEND_DATE_TIME(d, "date", 1700000000000LL + variant);
    BSON_APPEND_NULL(d, "null");
    BSON_APPEND_REGEX(d, "regex", "^ab+c$", "imsx");
    BSON_APPEND_DBPOINTER(d, "dbpointer", "db.coll", &oid);
    BSON_APPEND_CODE(d, "code", "function () { return 1; }");
    BSON_APPEND_SYMBOL(d, "symbol", "sym");
    bson_init(&scope);
    BSON_APPEND_INT32(&scope, "k", 42);
    BSON_APPEND_CODE_WITH_SCOPE(d, "code_w_scope", "function () { return k; }", &scope);
    bson_destroy(&scope);
    BSON_APPEND_INT32(d, "int32", -123456 - variant);
    BSON_APPEND_TIMESTAMP(d, "timestamp", 1700000000u, (uint32_t)(7 + variant));
    BSON_APPEND_INT64(d, "int64", INT64_C(0x7fffffffffff0000) + variant);
    cr_assert(bson_decimal128_from_string("-1234.5678E-90", &dec));
    BSON_APPEND_DECIMAL128(d, "decimal128", &dec);
    BSON_APPEND_MINKEY(d, "minkey");
    BSON_APPEND_MAXKEY(d, "maxkey");
    return d;
}

Test(archive, commit_reads_back_every_bson_type_in_order)
{
    env_t e;
    bson_t *docs[3];
    mf_archive_stats_t st;
    env_init(&e, 0);
    for (int i = 0; i < 3; i++)
        docs[i] = doc_every_type(i);
    archive_txn(&e, UUID_A, docs, 3);
    expect_docs(&e, UUID_A, docs, 3);

    char path[256];
    seg_path(&e, HEX_A, 1, path, sizeof(path));
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.docs, 3);
    cr_assert_eq(st.segments, 1);
    cr_assert_eq(st.bytes, file_size(path), "stats bytes %lld, file %lld", (long long)st.bytes,
                 (long long)file_size(path));
    cr_assert_eq(st.raw_bytes, (int64_t)(docs[0]->len + docs[1]->len + docs[2]->len));
    /* One frame per transaction: the file is exactly one zstd frame. */
    cr_assert_eq(st.bytes > 0, true);
    for (int i = 0; i < 3; i++)
        bson_destroy(docs[i]);
    env_destroy(&e);
}

Test(archive, rollback_and_failed_commit_leave_nothing)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_stats_t st;
    env_init(&e, 0);
    mf_sess_t *s = mf_storage_session(e.st);

    /* Rolled back: nothing is written at all. */
    bson_t *d = doc_num(1);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_archive_stage(e.a, s, UUID_A, d, &err), 0, "%s", err.msg);
    mf_txn_abort(s);
    bson_destroy(d);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.docs, 0);
    cr_assert_eq(st.segments, 0);
    expect_nums(&e, UUID_A, NULL, 0);

    /* The row write fails inside the commit: the frame was written, but past the committed length. */
    d = doc_num(2);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_archive_stage(e.a, s, UUID_A, d, &err), 0, "%s", err.msg);
    mf_storage_fault_set(e.st, "table:_mf_archive", 0);
    cr_assert_eq(mf_txn_commit(s, false, &err), -1, "the commit should fail with the row write");
    mf_storage_fault_set(e.st, NULL, 0);
    bson_destroy(d);
    mf_archive_stats(e.a, NULL, &st);
    cr_assert_eq(st.docs, 0);
    cr_assert_eq(st.segments, 0);
    expect_nums(&e, UUID_A, NULL, 0);

    /* The next append takes the same place and reads back alone. */
    archive_num(&e, UUID_A, 3);
    int want[] = {3};
    expect_nums(&e, UUID_A, want, 1);
    env_close(&e);
    env_open(&e);
    expect_nums(&e, UUID_A, want, 1);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.docs, 1);
    cr_assert_eq(st.segments, 1);
    env_destroy(&e);
}

Test(archive, bytes_past_the_committed_length_are_cut_at_reopen)
{
    env_t e;
    char path[256];
    mf_archive_stats_t st;
    env_init(&e, 0);
    archive_num(&e, UUID_A, 1);
    archive_num(&e, UUID_A, 2);
    seg_path(&e, HEX_A, 1, path, sizeof(path));
    int64_t committed = file_size(path);

    /* A lost commit: a whole valid frame (of document 99), then some junk. */
    bson_t *lost = doc_num(99);
    size_t bound = ZSTD_compressBound(lost->len);
    uint8_t *frame = malloc(bound);
    size_t flen = ZSTD_compress(frame, bound, bson_get_data(lost), lost->len, 3);
    cr_assert(!ZSTD_isError(flen));
    append_bytes(path, frame, flen);
    append_bytes(path, "\x01\x02garbage", 9);
    free(frame);
    bson_destroy(lost);

    int want12[] = {1, 2};
    expect_nums(&e, UUID_A, want12, 2); /* never read past the committed length */
    env_close(&e);
    env_open(&e);
    cr_assert_eq(file_size(path), committed, "reopen cut the file to %lld bytes, committed %lld",
                 (long long)file_size(path), (long long)committed);
    expect_nums(&e, UUID_A, want12, 2);
    archive_num(&e, UUID_A, 3);
    int want123[] = {1, 2, 3};
    expect_nums(&e, UUID_A, want123, 3);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.bytes, file_size(path));
    cr_assert_eq(st.docs, 3);
    env_destroy(&e);
}

Test(archive, reopen_keeps_everything)
{
    env_t e;
    mf_archive_stats_t before, after;
    env_init(&e, 0);
    for (int i = 0; i < 10; i++)
        archive_num(&e, i % 2 ? UUID_B : UUID_A, i);
    mf_archive_stats(e.a, NULL, &before);
    env_close(&e);
    env_open(&e);
    mf_archive_stats(e.a, NULL, &after);
    cr_assert_eq(after.docs, before.docs);
    cr_assert_eq(after.bytes, before.bytes);
    cr_assert_eq(after.raw_bytes, before.raw_bytes);
    cr_assert_eq(after.segments, 2);
    int even[] = {0, 2, 4, 6, 8}, odd[] = {1, 3, 5, 7, 9};
    expect_nums(&e, UUID_A, even, 5);
    expect_nums(&e, UUID_B, odd, 5);
    /* Appends after the restart continue the same segment. */
    archive_num(&e, UUID_A, 10);
    int even2[] = {0, 2, 4, 6, 8, 10};
    expect_nums(&e, UUID_A, even2, 6);
    mf_archive_stats(e.a, UUID_A, &after);
    cr_assert_eq(after.segments, 1);
    env_destroy(&e);
}

Test(archive, small_segments_roll_and_are_counted)
{
    env_t e;
    mf_archive_stats_t st;
    int64_t bytes;
    int nums[40];
    env_init(&e, 150);
    for (int i = 0; i < 40; i++) {
        nums[i] = i;
        archive_num(&e, UUID_A, i);
    }
    mf_archive_stats(e.a, UUID_A, &st);
    int files = count_files(&e, HEX_A, &bytes);
    cr_assert_gt(st.segments, 3, "only %lld segments", (long long)st.segments);
    cr_assert_lt(st.segments, 40, "a segment per commit (%lld): nothing was appended", (long long)st.segments);
    cr_assert_eq(st.segments, files, "stats %lld segments, %d files", (long long)st.segments, files);
    cr_assert_eq(st.bytes, bytes);
    cr_assert_eq(st.docs, 40);
    expect_nums(&e, UUID_A, nums, 40);
    env_close(&e);
    env_open(&e);
    mf_archive_stats_t again;
    mf_archive_stats(e.a, UUID_A, &again);
    cr_assert_eq(again.segments, st.segments);
    cr_assert_eq(again.bytes, st.bytes);
    expect_nums(&e, UUID_A, nums, 40);
    env_destroy(&e);
}

Test(archive, expire_removes_old_segments_only)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_stats_t st;
    char path[256];
    int64_t removed = -1;
    env_init(&e, 1); /* every commit starts a segment */
    mf_sess_t *s = mf_storage_session(e.st);
    archive_num(&e, UUID_A, 1);
    archive_num(&e, UUID_A, 2);
    archive_num(&e, UUID_B, 100);
    usleep(20 * 1000);
    int64_t cutoff = mf_now_ms();
    usleep(20 * 1000);
    archive_num(&e, UUID_A, 3);

    cr_assert_eq(mf_archive_expire(e.a, s, cutoff, &removed, &err), 0, "%s", err.msg);
    cr_assert_eq(removed, 3);
    seg_path(&e, HEX_A, 1, path, sizeof(path));
    cr_assert(!exists(path));
    seg_path(&e, HEX_A, 2, path, sizeof(path));
    cr_assert(!exists(path));
    seg_path(&e, HEX_A, 3, path, sizeof(path));
    cr_assert(exists(path));
    int want3[] = {3};
    expect_nums(&e, UUID_A, want3, 1);
    expect_nums(&e, UUID_B, NULL, 0);
    mf_archive_stats(e.a, NULL, &st);
    cr_assert_eq(st.segments, 1);
    cr_assert_eq(st.docs, 1);

    /* Nothing older than the cutoff is left. */
    cr_assert_eq(mf_archive_expire(e.a, s, cutoff, &removed, &err), 0, "%s", err.msg);
    cr_assert_eq(removed, 0);

    /* The rows went too: a restart sees the same. */
    env_close(&e);
    env_open(&e);
    s = mf_storage_session(e.st);
    expect_nums(&e, UUID_A, want3, 1);
    mf_archive_stats(e.a, NULL, &st);
    cr_assert_eq(st.segments, 1);
    env_destroy(&e);
}

Test(archive, expiring_the_current_segment_starts_a_new_number)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_stats_t st;
    char path[256];
    int64_t removed = 0;
    env_init(&e, 0);
    mf_sess_t *s = mf_storage_session(e.st);
    archive_num(&e, UUID_A, 1);
    archive_num(&e, UUID_A, 2);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.segments, 1);

    cr_assert_eq(mf_archive_expire(e.a, s, mf_now_ms() + 1000, &removed, &err), 0, "%s", err.msg);
    cr_assert_eq(removed, 1);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.segments, 0);
    cr_assert_eq(st.docs, 0);
    expect_nums(&e, UUID_A, NULL, 0);

    archive_num(&e, UUID_A, 3);
    seg_path(&e, HEX_A, 1, path, sizeof(path));
    cr_assert(!exists(path), "segment 1 was reused");
    seg_path(&e, HEX_A, 2, path, sizeof(path));
    cr_assert(exists(path), "the append after retention did not start segment 2");
    int want3[] = {3};
    expect_nums(&e, UUID_A, want3, 1);
    env_destroy(&e);
}

Test(archive, reader_skips_segments_removed_while_it_is_open)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_reader_t *r;
    const bson_t *d;
    int64_t removed = 0;
    bson_iter_t it;
    env_init(&e, 1);
    mf_sess_t *s = mf_storage_session(e.st);
    for (int i = 0; i < 3; i++)
        archive_num(&e, UUID_A, i);
    cr_assert_eq(mf_archive_reader_open(e.a, UUID_A, &r, &err), 0);
    cr_assert_eq(mf_archive_reader_next(r, &d, &err), 1, "%s", err.msg);
    cr_assert(bson_iter_init_find(&it, d, "i") && bson_iter_int32(&it) == 0);
    cr_assert_eq(mf_archive_expire(e.a, s, mf_now_ms() + 1000, &removed, &err), 0, "%s", err.msg);
    cr_assert_eq(removed, 3);
    /* Segment 1 is open and keeps reading; 2 and 3 are gone and skipped. */
    cr_assert_eq(mf_archive_reader_next(r, &d, &err), 0, "%s", err.msg);
    mf_archive_reader_close(r);
    env_destroy(&e);
}

Test(archive, drop_removes_rows_and_files)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_stats_t st;
    char udir[256];
    env_init(&e, 1);
    mf_sess_t *s = mf_storage_session(e.st);
    for (int i = 0; i < 4; i++) {
        archive_num(&e, UUID_A, i);
        archive_num(&e, UUID_B, 100 + i);
    }
    cr_assert_eq(mf_archive_drop(e.a, s, UUID_A, &err), 0, "%s", err.msg);
    snprintf(udir, sizeof(udir), "%s/%s", e.adir, HEX_A);
    cr_assert(!exists(udir), "the dropped archive's directory is still there");
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.segments, 0);
    cr_assert_eq(st.docs, 0);
    expect_nums(&e, UUID_A, NULL, 0);
    int b[] = {100, 101, 102, 103};
    expect_nums(&e, UUID_B, b, 4);
    /* Nothing to remove is not an error. */
    cr_assert_eq(mf_archive_drop(e.a, s, UUID_A, &err), 0, "%s", err.msg);
    env_close(&e);
    env_open(&e);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.segments, 0, "rows of the dropped archive came back");
    expect_nums(&e, UUID_B, b, 4);
    /* A new archive for the same uuid starts from scratch. */
    archive_num(&e, UUID_A, 7);
    int a7[] = {7};
    expect_nums(&e, UUID_A, a7, 1);
    env_destroy(&e);
}

Test(archive, one_transaction_archives_two_collections)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_stats_t sa, sb, all;
    env_init(&e, 0);
    mf_sess_t *s = mf_storage_session(e.st);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    for (int i = 0; i < 6; i++) {
        bson_t *d = doc_num(i);
        cr_assert_eq(mf_archive_stage(e.a, s, i % 3 == 0 ? UUID_B : UUID_A, d, &err), 0, "%s", err.msg);
        bson_destroy(d);
    }
    cr_assert_eq(mf_txn_commit(s, false, &err), 0, "%s", err.msg);
    int a[] = {1, 2, 4, 5}, b[] = {0, 3};
    expect_nums(&e, UUID_A, a, 4);
    expect_nums(&e, UUID_B, b, 2);
    mf_archive_stats(e.a, UUID_A, &sa);
    mf_archive_stats(e.a, UUID_B, &sb);
    mf_archive_stats(e.a, NULL, &all);
    cr_assert_eq(sa.docs, 4);
    cr_assert_eq(sb.docs, 2);
    cr_assert_eq(all.docs, 6);
    cr_assert_eq(all.segments, 2);
    cr_assert_eq(all.bytes, sa.bytes + sb.bytes);
    env_destroy(&e);
}

Test(archive, unknown_uuid_reads_empty)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_reader_t *r;
    const bson_t *d;
    mf_archive_stats_t st;
    static const uint8_t none[16] = {9};
    env_init(&e, 0);
    archive_num(&e, UUID_A, 1);
    cr_assert_eq(mf_archive_reader_open(e.a, none, &r, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_archive_reader_next(r, &d, &err), 0);
    cr_assert_eq(mf_archive_reader_next(r, &d, &err), 0);
    mf_archive_reader_close(r);
    mf_archive_stats(e.a, none, &st);
    cr_assert_eq(st.segments + st.docs + st.bytes + st.raw_bytes, 0);
    env_destroy(&e);
}

Test(archive, open_removes_files_and_directories_without_rows)
{
    env_t e;
    char path[256], udir[256];
    env_init(&e, 0);
    archive_num(&e, UUID_A, 1);
    env_close(&e);

    /* A drop that crashed after its commit, and a new segment whose first commit was lost. */
    snprintf(udir, sizeof(udir), "%s/%s", e.adir, HEX_B);
    cr_assert_eq(mkdir(udir, 0700), 0);
    seg_path(&e, HEX_B, 1, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "junk", 4), 4);
    close(fd);
    char stray[256];
    seg_path(&e, HEX_A, 2, stray, sizeof(stray));
    fd = open(stray, O_WRONLY | O_CREAT, 0600);
    cr_assert_geq(fd, 0);
    close(fd);
    /* Not a segment's name: left alone. */
    char other[256];
    snprintf(other, sizeof(other), "%s/README", e.adir);
    fd = open(other, O_WRONLY | O_CREAT, 0600);
    close(fd);

    env_open(&e);
    cr_assert(!exists(udir), "the directory without rows is still there");
    cr_assert(!exists(stray), "the segment without a row is still there");
    cr_assert(exists(other));
    seg_path(&e, HEX_A, 1, path, sizeof(path));
    cr_assert(exists(path));
    int want[] = {1};
    expect_nums(&e, UUID_A, want, 1);
    /* The next segment of A may take number 2 again: the stray file is gone. */
    env_destroy(&e);
}

Test(archive, damaged_segment_reads_as_an_error)
{
    env_t e;
    mf_error_t err = {0};
    char path[256];
    env_init(&e, 0);
    bson_t *docs[20];
    for (int i = 0; i < 20; i++)
        docs[i] = doc_every_type(i);
    archive_txn(&e, UUID_A, docs, 20);
    for (int i = 0; i < 20; i++)
        bson_destroy(docs[i]);
    seg_path(&e, HEX_A, 1, path, sizeof(path));
    int64_t size = file_size(path);

    /* Every single-byte change anywhere in the file: an error or (never) a crash. */
    for (int64_t off = 0; off < size; off += 7) {
        uint8_t b, flipped;
        int fd = open(path, O_RDWR);
        cr_assert_geq(fd, 0);
        cr_assert_eq(pread(fd, &b, 1, off), 1);
        flipped = (uint8_t)(b ^ 0x5a);
        cr_assert_eq(pwrite(fd, &flipped, 1, off), 1);
        mf_archive_reader_t *r;
        const bson_t *d;
        int rc, n = 0;
        cr_assert_eq(mf_archive_reader_open(e.a, UUID_A, &r, &err), 0);
        while ((rc = mf_archive_reader_next(r, &d, &err)) == 1)
            n++;
        mf_archive_reader_close(r);
        cr_assert_eq(rc, -1, "a change at byte %lld of %lld went unnoticed (%d documents)", (long long)off,
                     (long long)size, n);
        cr_assert_neq(err.code, 0);
        cr_assert_eq(pwrite(fd, &b, 1, off), 1);
        close(fd);
    }
    env_destroy(&e);
}

/* ---- two sessions ---- */

typedef struct hold {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t holder; /* the thread whose commit is held in the engine-wide pre-commit hook */
    bool in_hook, release;
} hold_t;

/* Runs after the archive's own pre-commit step: holds the holder's commit until released. */
static int
hold_hook(void *arg, mf_sess_t *s, mf_error_t *err)
{
    hold_t *h = arg;
    pthread_mutex_lock(&h->mu);
    if (!pthread_equal(pthread_self(), h->holder)) {
        pthread_mutex_unlock(&h->mu);
        return 0;
    }
    h->in_hook = true;
    pthread_cond_broadcast(&h->cv);
    while (!h->release)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
    return 0;
}

typedef struct holder_arg {
    env_t *e;
    hold_t *h;
} holder_arg_t;

static void *
holder_main(void *arg)
{
    holder_arg_t *x = arg;
    archive_num(x->e, UUID_A, 1);
    mf_storage_session_close_thread(x->e->st);
    return NULL;
}

Test(archive, a_second_append_to_a_collection_in_flight_conflicts)
{
    env_t e;
    mf_error_t err = {0};
    hold_t h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    env_init(&e, 0);
    mf_storage_set_precommit_hook(e.st, hold_hook, &h);
    holder_arg_t x = {&e, &h};
    pthread_mutex_lock(&h.mu);
    cr_assert_eq(pthread_create(&t, NULL, holder_main, &x), 0);
    h.holder = t;
    while (!h.in_hook)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);

    /* The holder's frame is written and its row put, its commit not yet done. */
    mf_sess_t *s = mf_storage_session(e.st);
    bson_t *d = doc_num(2);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_archive_stage(e.a, s, UUID_A, d, &err), 0, "%s", err.msg);
    cr_assert_eq(mf_txn_commit(s, false, &err), -1, "a second append went through");
    cr_assert_eq(err.code, MF_E_WriteConflict, "code %d: %s", err.code, err.msg);
    /* Another collection is not held up. */
    archive_num(&e, UUID_B, 3);

    pthread_mutex_lock(&h.mu);
    h.release = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    cr_assert_eq(pthread_join(t, NULL), 0);

    /* Retried after the holder's end, it goes through. */
    archive_txn(&e, UUID_A, &d, 1);
    bson_destroy(d);
    int a[] = {1, 2}, b[] = {3};
    expect_nums(&e, UUID_A, a, 2);
    expect_nums(&e, UUID_B, b, 1);
    mf_storage_set_precommit_hook(e.st, NULL, NULL);
    env_destroy(&e);
}

typedef struct writer_arg {
    env_t *e;
    const uint8_t *uuid;
    int base;
} writer_arg_t;

static void *
writer_main(void *arg)
{
    writer_arg_t *w = arg;
    for (int i = 0; i < 50; i++)
        archive_num(w->e, w->uuid, w->base + i);
    mf_storage_session_close_thread(w->e->st);
    return NULL;
}

Test(archive, two_sessions_archive_two_collections_at_once)
{
    env_t e;
    pthread_t ta, tb;
    int a[50], b[50];
    env_init(&e, 2000);
    writer_arg_t wa = {&e, UUID_A, 0}, wb = {&e, UUID_B, 1000};
    cr_assert_eq(pthread_create(&ta, NULL, writer_main, &wa), 0);
    cr_assert_eq(pthread_create(&tb, NULL, writer_main, &wb), 0);
    cr_assert_eq(pthread_join(ta, NULL), 0);
    cr_assert_eq(pthread_join(tb, NULL), 0);
    for (int i = 0; i < 50; i++) {
        a[i] = i;
        b[i] = 1000 + i;
    }
    expect_nums(&e, UUID_A, a, 50);
    expect_nums(&e, UUID_B, b, 50);
    env_close(&e);
    env_open(&e);
    expect_nums(&e, UUID_A, a, 50);
    expect_nums(&e, UUID_B, b, 50);
    env_destroy(&e);
}

/*
 * A transaction that stages more than a chunk (256 KB) hands the earlier
 * chunks to the compressor thread and writes one frame per chunk at its
 * commit: every document reads back, in order, across the frames; a
 * transaction with chunks in flight that rolls back leaves nothing, and the
 * next one takes its place.
 */
Test(archive, chunks_compressed_in_the_background_read_back_in_order)
{
    env_t e;
    mf_error_t err = {0};
    mf_archive_stats_t st;
    enum { N = 20000 }; /* ~1.2 MB of documents: several chunks */
    int *nums = malloc(N * sizeof(*nums));
    bson_t **docs = malloc(N * sizeof(*docs));
    env_init(&e, 0);
    mf_sess_t *s = mf_storage_session(e.st);

    for (int i = 0; i < N; i++) {
        nums[i] = i;
        docs[i] = doc_num(i);
    }
    /* Rolled back with chunks handed out: nothing reads back. */
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    for (int i = 0; i < N; i++)
        cr_assert_eq(mf_archive_stage(e.a, s, UUID_A, docs[i], &err), 0, "%s", err.msg);
    mf_txn_abort(s);
    expect_nums(&e, UUID_A, NULL, 0);

    archive_txn(&e, UUID_A, docs, N);
    expect_docs(&e, UUID_A, docs, N);
    mf_archive_stats(e.a, UUID_A, &st);
    cr_assert_eq(st.docs, N);
    cr_assert_eq(st.segments, 1);
    int64_t raw = 0;
    for (int i = 0; i < N; i++)
        raw += docs[i]->len;
    cr_assert_eq(st.raw_bytes, raw);
    cr_assert_lt(st.bytes, raw / 3, "compressed: %lld of %lld bytes", (long long)st.bytes, (long long)raw);
    env_close(&e);
    env_open(&e);
    expect_nums(&e, UUID_A, nums, N);
    for (int i = 0; i < N; i++)
        bson_destroy(docs[i]);
    free(docs);
    free(nums);
    env_destroy(&e);
}
