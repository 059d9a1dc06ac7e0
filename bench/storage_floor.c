/*
 * storage_floor.c: what the storage layer alone costs for the ingest that
 * bench/latency_bench.js measures (issue 13, "ingest at least Redis's
 * rate"), so that the server's figure can be read against its floor.
 *
 *   build/storage_floor --dbpath DIR [--docs N] [--threads T]
 *
 * The same writes the server makes for `insert` batches of 1,000 documents
 * {_id: int32, at: Date, v: 32 bytes} into a collection with one TTL index
 * ({at: 1}), with nothing else: no socket, no OP_MSG, no BSON checks, no
 * catalog, no observers. Per document, three inserts through src/storage
 * (WiredTiger, opened by mf_storage_open with the server's configuration
 * and journal, the tables created with mf_storage_table_config's
 * configurations):
 *   - the record: record id -> the document's BSON bytes (MF_TABLE_DOCS);
 *   - the _id index (unique): keystring(_id) -> big-endian record id;
 *   - the TTL index: keystring(at) + record id -> empty (MF_TABLE_INDEX).
 * As the server does (src/query/write.c, "Bulk inserts"), 500 documents
 * per transaction, their records first and then each index's keys,
 * committed without waiting for the journal's sync (w: 1), their record ids
 * reserved as one block; T threads (default 2) take batches of 1,000 in turn
 * from a shared counter, as the server's workers take the loader's requests.
 * The keys are made by the server's own keystring code, so they are byte for
 * byte the server's.
 *
 * Prints one line of JSON: {"threads", "docs", "seconds", "docsPerSec",
 * "cpuUsPerDoc"} (process CPU, WiredTiger's own threads included, per
 * document). Exit status 1 on any storage error.
 */
#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "index/keystring.h"
#include "storage/storage.h"

#define BATCH 1000      /* documents per request, as the loader sends them */
#define TXN_DOCS 500    /* documents per transaction (INSERT_CHUNK in src/query/write.c) */
#define MAX_THREADS 64
#define VALUE_LEN 32

#define RECORDS_URI "table:floor-records"
#define ID_URI "table:floor-id"
#define TTL_URI "table:floor-ttl"

typedef struct floor {
    mf_storage_t *st;
    int64_t docs;
    _Atomic int64_t next_batch; /* batches handed out */
    _Atomic int64_t next_rid;   /* record ids reserved */
    _Atomic int failed;
} floor_t;

static double
clock_sec(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
rid_be(int64_t rid, uint8_t out[8])
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)(rid & 0xff);
        rid >>= 8;
    }
}

/* The document {_id: id, at: Date(at_ms), v: 'x' * 32} as BSON; the caller destroys it. */
static void
make_doc(bson_t *doc, int32_t id, int64_t at_ms)
{
    char v[VALUE_LEN + 1];
    memset(v, 'x', VALUE_LEN);
    v[VALUE_LEN] = '\0';
    bson_init(doc);
    BSON_APPEND_INT32(doc, "_id", id);
    BSON_APPEND_DATE_TIME(doc, "at", at_ms);
    BSON_APPEND_UTF8(doc, "v", v);
}

/* Fails the floor's run: a message on stderr, -1. */
static int
insert_failed(const char *what, int64_t id, int ret)
{
    fprintf(stderr, "storage_floor: %s insert of document %lld failed (%d)\n", what, (long long)id, ret);
    return -1;
}

/*
 * A transaction's inserts in the server's order (query/write.c, "Bulk
 * inserts"): the n records, then their _id keys, then their TTL keys.
 */
static int
insert_docs(mf_cur_t *rec, mf_cur_t *idx, mf_cur_t *ttl, mf_keystring_t *key, int64_t first, int64_t n,
            int64_t at_ms, int64_t rid)
{
    mf_error_t err;
    uint8_t be[8];
    bson_value_t v;
    int ret;

    for (int64_t i = 0; i < n; i++) {
        bson_t doc;
        make_doc(&doc, (int32_t)(first + i), at_ms);
        ret = mf_cur_insert_rid(rec, rid + i, bson_get_data(&doc), doc.len);
        bson_destroy(&doc);
        if (ret != 0)
            return insert_failed("record", first + i, ret);
    }
    mf_err_clear(&err);
    for (int64_t i = 0; i < n; i++) {
        mf_ks_reset(key);
        v.value_type = BSON_TYPE_INT32;
        v.value.v_int32 = (int32_t)(first + i);
        if (mf_ks_append_value(key, &v, false, &err) != 0)
            return insert_failed("_id key", first + i, -1);
        rid_be(rid + i, be);
        if ((ret = mf_cur_insert_bytes(idx, key->data, key->len, be, sizeof be)) != 0)
            return insert_failed("_id key", first + i, ret);
    }
    for (int64_t i = 0; i < n; i++) {
        mf_ks_reset(key);
        v.value_type = BSON_TYPE_DATE_TIME;
        v.value.v_datetime = at_ms;
        if (mf_ks_append_value(key, &v, false, &err) != 0)
            return insert_failed("TTL key", first + i, -1);
        mf_ks_append_recordid(key, rid + i);
        if ((ret = mf_cur_insert_bytes(ttl, key->data, key->len, "", 0)) != 0)
            return insert_failed("TTL key", first + i, ret);
    }
    return 0;
}

/* One transaction: documents [first, first + n), their record ids a block reserved here. */
static int
insert_txn(floor_t *f, mf_sess_t *s, mf_keystring_t *key, int64_t first, int64_t n, int64_t at_ms)
{
    mf_cur_t *rec = NULL, *idx = NULL, *ttl = NULL;
    mf_error_t err;
    int ret = -1;

    int64_t rid = atomic_fetch_add(&f->next_rid, n);
    mf_err_clear(&err);
    if (mf_txn_begin(s, &err) != 0)
        goto out;
    if (mf_cur_open(s, RECORDS_URI, &rec, &err) != 0 || mf_cur_open(s, ID_URI, &idx, &err) != 0 ||
        mf_cur_open(s, TTL_URI, &ttl, &err) != 0)
        goto out;
    if (insert_docs(rec, idx, ttl, key, first, n, at_ms, rid) != 0)
        goto out;
    ret = 0;
out:
    if (ttl != NULL)
        mf_cur_close(ttl);
    if (idx != NULL)
        mf_cur_close(idx);
    if (rec != NULL)
        mf_cur_close(rec);
    if (ret == 0 && mf_txn_commit(s, false, &err) != 0)
        ret = -1;
    else if (ret != 0 && mf_txn_active(s))
        mf_txn_abort(s);
    if (ret != 0)
        fprintf(stderr, "storage_floor: transaction failed: %s\n", err.msg);
    return ret;
}

static void *
worker(void *arg)
{
    floor_t *f = arg;
    mf_sess_t *s = mf_storage_session(f->st);
    mf_keystring_t key;

    mf_ks_init(&key);
    while (!atomic_load(&f->failed)) {
        int64_t first = atomic_fetch_add(&f->next_batch, 1) * BATCH;
        if (first >= f->docs)
            break;
        int64_t end = first + BATCH < f->docs ? first + BATCH : f->docs;
        /* One Date per batch, as the loader stamps each request's documents. */
        int64_t at_ms = (int64_t)(clock_sec(CLOCK_REALTIME) * 1000);
        for (int64_t t = first; t < end; t += TXN_DOCS) {
            if (insert_txn(f, s, &key, t, end - t < TXN_DOCS ? end - t : TXN_DOCS, at_ms) != 0) {
                atomic_store(&f->failed, 1);
                break;
            }
        }
    }
    mf_ks_destroy(&key);
    mf_storage_session_close_thread(f->st);
    return NULL;
}

static int
usage(void)
{
    fprintf(stderr, "usage: storage_floor --dbpath DIR [--docs N] [--threads T]\n");
    return 2;
}

int
main(int argc, char **argv)
{
    const char *dbpath = NULL;
    floor_t f = {.docs = 1000000};
    int nthreads = 2, rc = 1;
    pthread_t th[MAX_THREADS];
    mf_error_t err;

    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--dbpath") == 0)
            dbpath = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--docs") == 0)
            f.docs = atoll(argv[++i]);
        else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
            nthreads = atoi(argv[++i]);
        else
            return usage();
    }
    if (dbpath == NULL || f.docs < 1 || nthreads < 1 || nthreads > MAX_THREADS || f.docs > INT32_MAX)
        return usage();
    atomic_store(&f.next_rid, 1);
    mf_err_clear(&err);
    if (mf_storage_open(dbpath, &f.st, &err) != 0) {
        fprintf(stderr, "storage_floor: open %s: %s\n", dbpath, err.msg);
        return 1;
    }
    mf_sess_t *s = mf_storage_session(f.st);
    if (mf_storage_create(s, RECORDS_URI, mf_storage_table_config(f.st, MF_TABLE_DOCS), &err) != 0 ||
        mf_storage_create(s, ID_URI, mf_storage_table_config(f.st, MF_TABLE_INDEX), &err) != 0 ||
        mf_storage_create(s, TTL_URI, mf_storage_table_config(f.st, MF_TABLE_INDEX), &err) != 0 ||
        mf_storage_checkpoint(s, &err) != 0) {
        fprintf(stderr, "storage_floor: create: %s\n", err.msg);
        goto out;
    }
    double cpu0 = clock_sec(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_sec(CLOCK_MONOTONIC);
    int started = 0;
    for (; started < nthreads; started++) {
        if (pthread_create(&th[started], NULL, worker, &f) != 0) {
            atomic_store(&f.failed, 1);
            break;
        }
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    double secs = clock_sec(CLOCK_MONOTONIC) - t0, cpu = clock_sec(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (atomic_load(&f.failed))
        goto out;
    printf("{\"threads\": %d, \"docs\": %lld, \"seconds\": %.3f, \"docsPerSec\": %.0f, \"cpuUsPerDoc\": %.2f}\n",
           nthreads, (long long)f.docs, secs, (double)f.docs / secs, cpu * 1e6 / (double)f.docs);
    rc = 0;
out:
    mf_storage_close(f.st);
    return rc;
}
