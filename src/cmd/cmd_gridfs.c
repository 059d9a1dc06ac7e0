/*
 * cmd_gridfs.c: filemd5, the GridFS checksum command.
 *
 * {filemd5: <files_id>, root: <bucket>} answers {numChunks, md5} for the
 * chunks of one file in <root>.chunks ("fs" when root is absent or empty),
 * as MongoDB 8.0's CmdFileMD5 (src/mongo/db/commands/dbcommands.cpp), which
 * older GridFS clients (mgo, the legacy Java GridFSInputFile.validate, old
 * pymongo and PHP drivers) call after an upload. The chunks are those
 * matching {files_id: <files_id>, n: {$gte: 0}} in n order; each chunk's
 * `data` (BinData) is hashed in turn, and the n of the k-th chunk must be k.
 *
 * mongod's errors, in its order:
 *   - root not a string: 73 InvalidNamespace "'root' must be of type String"
 *     (from parseNs, so before the privilege check);
 *   - no index can answer the query (mongod plans it with NO_TABLE_SCAN):
 *     291 NoQueryExecutionPlans. mayfly asks its own planner and refuses a
 *     plan that would scan the collection; drivers create {files_id: 1, n: 1}
 *     with the first chunk, so a real bucket always has one;
 *   - a chunk whose n is not the next number: 10040 "chunks out of order"
 *     (a gap, a duplicate, or a first chunk other than 0);
 *   - a chunk without data: 50848, data not BinData: 50849;
 *   these three prefixed "Executor error during filemd5 command :: caused
 *   by :: " as mongod's executor catch block adds.
 * A missing collection is no error: {numChunks: 0, md5 of nothing}.
 *
 * partialOk (with startAt and md5state) is mongos's internal protocol for
 * sharded chunks: its md5state is the raw memory of mongod's own MD5
 * implementation's state, which OpenSSL's EVP digests cannot import or
 * export, so mayfly refuses partialOk: true with 115 CommandNotSupported
 * rather than hand-writing MD5 (no driver sends it to a standalone).
 *
 * The digest is OpenSSL's EVP MD5. Everything runs under the catalog's
 * shared lock in one read transaction (a consistent snapshot of the
 * chunks); the interrupt check runs between chunks.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/coll_write.h"
#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "doc/match.h"
#include "doc/value.h"
#include "query/exec.h"
#include "query/plan.h"

#define FILEMD5_CONTEXT "Executor error during filemd5 command :: caused by :: "

/* One matching chunk: its n (as the index orders it) and its record. */
typedef struct chunk_ref {
    double n;
    int32_t n_int; /* mongod's numberInt() of n (mf_value_number_int) */
    int64_t rid;
} chunk_ref_t;

typedef struct chunk_list {
    chunk_ref_t *v;
    size_t n, cap;
} chunk_list_t;

/* Visitor: records the chunk's n and record id (doc is valid only during the call). */
static int
chunk_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *details)
{
    chunk_list_t *l = arg;
    bson_iter_t it;
    (void)details;
    if (!bson_iter_init_find(&it, doc, "n") || !mf_value_is_number(bson_iter_value(&it)))
        return 0; /* {n: {$gte: 0}} only matches numbers */
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = mf_realloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n].n = mf_value_as_double(bson_iter_value(&it));
    l->v[l->n].n_int = mf_value_number_int(bson_iter_value(&it));
    l->v[l->n++].rid = rid;
    return 0;
}

/* Index order of {files_id: v, n: ...}: n ascending; equal n in record order, as an index keeps them. */
static int
chunk_cmp(const void *a, const void *b)
{
    const chunk_ref_t *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return x->rid < y->rid ? -1 : x->rid > y->rid;
}

/*
 * Hashes the chunks of l (sorted) of collection c into md, checking their
 * numbering and data as mongod does. *count: the chunks hashed. Caller holds
 * the catalog lock and a read transaction. Returns 0 or -1 with op->err.
 */
static int
hash_chunks(mf_op_t *op, mf_coll_t *c, const chunk_list_t *l, EVP_MD_CTX *md, int32_t *count)
{
    int32_t expect = 0;
    for (size_t i = 0; i < l->n; i++) {
        bson_t doc;
        bson_iter_t it;
        int r;
        if (mf_curop_check_current(&op->err) != 0)
            return -1;
        if (l->v[i].n_int != expect)
            return mf_err_set(&op->err, MF_E_Location10040, FILEMD5_CONTEXT "chunks out of order");
        r = mf_coll_fetch(op->sess, c, l->v[i].rid, &doc, &op->err);
        if (r == MF_NOTFOUND)
            return mf_err_write_conflict(&op->err); /* gone within the snapshot: cannot happen */
        if (r != 0)
            return -1;
        if (!bson_iter_init_find(&it, &doc, "data")) {
            bson_destroy(&doc);
            /* mongod's own wording, misspelling included. */
            return mf_err_set(&op->err, MF_E_Location50848,
                              FILEMD5_CONTEXT "The element that calls binDataClean() must be type of BinData, but "
                                              "type of misisng found. Field name is required");
        }
        if (!BSON_ITER_HOLDS_BINARY(&it)) {
            mf_err_set(&op->err, MF_E_Location50849,
                       FILEMD5_CONTEXT "The element that calls binDataClean() must be type of BinData, but type of %s found.",
                       mf_type_name(bson_iter_type(&it)));
            bson_destroy(&doc);
            return -1;
        }
        const uint8_t *data;
        uint32_t len;
        bson_subtype_t st;
        /* libbson gives subtype 2's payload without its inner length, as binDataClean does. */
        bson_iter_binary(&it, &st, &len, &data);
        if (len > 0 && EVP_DigestUpdate(md, data, len) != 1) {
            bson_destroy(&doc);
            return mf_err_set(&op->err, MF_E_InternalError, "MD5 failed");
        }
        bson_destroy(&doc);
        expect++;
    }
    *count = expect;
    return 0;
}

/*
 * The chunks of collection c (may be NULL) matching query in n order,
 * hashed into md. Catalog lock held by the caller.
 */
static int
filemd5_coll(mf_op_t *op, mf_coll_t *c, const bson_t *query, EVP_MD_CTX *md, int32_t *count)
{
    static const char sort_json[] = "{\"files_id\": 1, \"n\": 1}";
    bson_t sort;
    bson_error_t berr;
    mf_matcher_t *m = NULL;
    mf_plan_t *p = NULL;
    chunk_list_t l = {0};
    int rc = -1;

    *count = 0;
    if (c == NULL)
        return 0;
    if (c->is_view)
        return mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s is a view, not a collection", c->ns);
    if (!bson_init_from_json(&sort, sort_json, -1, &berr))
        return mf_err_set(&op->err, MF_E_InternalError, "filemd5: bad sort");
    mf_plan_request_t req = {.filter = query, .sort = &sort};
    if ((m = mf_matcher_new(query, &op->err)) == NULL)
        goto out;
    if (mf_plan_build(c, &req, &p, &op->err) != 0)
        goto out;
    if (p->leaf == NULL || p->leaf->kind == MF_ST_COLLSCAN) {
        /* mongod plans with NO_TABLE_SCAN. */
        mf_err_set(&op->err, MF_E_NoQueryExecutionPlans,
                   "error processing query: ns=%s planner returned error :: caused by :: No indexed plans available, "
                   "and running with 'notablescan'",
                   c->ns);
        goto out;
    }
    if (mf_txn_begin(op->sess, &op->err) != 0)
        goto out;
    rc = mf_exec_run(op->sess, c, p, m, chunk_visit, &l, &op->err);
    if (rc == 0) {
        if (l.n > 1)
            qsort(l.v, l.n, sizeof(*l.v), chunk_cmp);
        rc = hash_chunks(op, c, &l, md, count);
    }
    mf_txn_abort(op->sess);
out:
    free(l.v);
    if (p != NULL)
        mf_plan_free(p);
    if (m != NULL)
        mf_matcher_free(m);
    bson_destroy(&sort);
    return rc;
}

static int
cmd_filemd5(mf_op_t *op)
{
    bson_iter_t it;
    char chunks[512];
    const char *root = "fs";
    bson_t query = BSON_INITIALIZER, gte;
    EVP_MD_CTX *md = NULL;
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    int32_t count = 0;
    int rc = -1;

    if (mf_op_find(op, "root", &it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(&op->err, MF_E_InvalidNamespace, "'root' must be of type String");
        if (bson_iter_utf8(&it, NULL)[0] != '\0')
            root = bson_iter_utf8(&it, NULL);
    }
    if (strlen(root) + sizeof(".chunks") > sizeof(chunks))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace specified '%s.%s.chunks'", op->db, root);
    snprintf(chunks, sizeof(chunks), "%s.chunks", root);
    if (mf_op_find(op, "partialOk", &it) && bson_iter_as_bool(&it))
        return mf_err_set(&op->err, MF_E_CommandNotSupported,
                          "filemd5 with partialOk is not supported: its md5state is mongod's internal MD5 state");

    /* {files_id: <the command's value>, n: {$gte: 0}}, as mongod builds it. */
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    bson_append_value(&query, "files_id", -1, bson_iter_value(&it));
    BSON_APPEND_DOCUMENT_BEGIN(&query, "n", &gte);
    BSON_APPEND_INT32(&gte, "$gte", 0);
    bson_append_document_end(&query, &gte);

    md = EVP_MD_CTX_new();
    if (md == NULL || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1) {
        mf_err_set(&op->err, MF_E_InternalError, "MD5 is not available");
        goto out;
    }
    mf_catalog_rdlock(op->eng->cat);
    rc = filemd5_coll(op, mf_catalog_coll_find(op->eng->cat, op->db, chunks), &query, md, &count);
    mf_catalog_unlock(op->eng->cat);
    mf_storage_session_release(op->sess);
    if (rc != 0)
        goto out;
    if (EVP_DigestFinal_ex(md, d, &dlen) != 1) {
        rc = mf_err_set(&op->err, MF_E_InternalError, "MD5 failed");
        goto out;
    }
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < dlen; i++) {
        hex[2 * i] = hx[d[i] >> 4];
        hex[2 * i + 1] = hx[d[i] & 15];
    }
    hex[2 * dlen] = '\0';
    BSON_APPEND_INT32(op->reply, "numChunks", count);
    BSON_APPEND_UTF8(op->reply, "md5", hex);
out:
    EVP_MD_CTX_free(md);
    bson_destroy(&query);
    return rc;
}

const mf_cmd_def_t mf_cmds_gridfs[] = {
    {"filemd5", cmd_filemd5, 0, NULL},
    {NULL, NULL, 0, NULL},
};
