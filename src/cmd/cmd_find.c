/*
 * cmd_find.c: find, getMore, killCursors, count and distinct (see
 * cmd_crud.c for how reads run). A find's first batch comes from a plan
 * (query/plan.c); what is left is kept in the engine's cursor table
 * (engine/cursor.c), either as a resumable plan or materialised, and
 * getMore continues it.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/alloc.h"
#include "catalog/coll_write.h"
#include "auth/roles.h"
#include "cmd/cmd.h"
#include "common/curop.h"
#include "engine/cursor.h"
#include "common/docvec.h"
#include "common/log.h"
#include "common/params.h"
#include "query/agg.h"
#include "query/batch.h"
#include "query/exec.h"
#include "doc/check.h"
#include "doc/text.h"
#include "doc/match.h"
#include "doc/path.h"
#include "doc/project.h"
#include "doc/sort.h"
#include "doc/update.h"
#include "doc/value.h"
#include "cmd/crud.h"
#include "query/agg_geo.h"
#include "doc/collation.h"
#include "index/keystring.h"

/* ---------- find / getMore ---------- */

typedef struct fill_ctx {
    mf_cursor_t *cur;
    bson_t *arr;
    int64_t count;
    int64_t max;
    bool full;
    mf_error_t *err;
} fill_ctx_t;

/*
 * mf_crud_batch_add: appends doc to the batch array arr as element *count,
 * as mongod fills a find / getMore / aggregate batch. doc must be within
 * 16 MiB + 16 KiB (10334 otherwise, mongod's check when it serialises a
 * result); the first document always goes in, a later one only while the
 * batch stays within 16 MiB (FindCommon::haveSpaceForNext), so a reply
 * stays far below maxMessageSizeBytes. Returns 0 when added (*count grows),
 * 1 when doc does not fit (the caller keeps it for the next batch), -1 with
 * err. Does not take ownership of doc.
 */
int
mf_crud_batch_add(bson_t *arr, int64_t *count, const bson_t *doc, mf_error_t *err)
{
    char key[24];
    const char *k;

    if (mf_check_doc_built_size(doc, err) != 0)
        return -1;
    if (*count > 0 && (size_t)arr->len + doc->len > MF_MAX_BSON_SIZE)
        return 1;
    bson_uint32_to_string((uint32_t)*count, &k, key, sizeof(key));
    BSON_APPEND_DOCUMENT(arr, k, doc);
    (*count)++;
    return 0;
}

/*
 * Appends to out under name the index key value v, with the type doc
 * holds at path when it is the same value (a key's numbers decode in one
 * canonical type; 5.0 stays 5.0); an array's equal element for a multikey
 * key. Other values (collation keys, hashes) are appended as decoded.
 */
static void
append_key_value(bson_t *out, const char *name, const bson_value_t *v, const bson_t *doc)
{
    bson_value_t dv;
    const bson_value_t *emit = v;
    bson_iter_t ai;
    if (mf_path_get(doc, name, &dv)) {
        if (dv.value_type == BSON_TYPE_ARRAY &&
            bson_iter_init_from_data(&ai, dv.value.v_doc.data, dv.value.v_doc.data_len)) {
            while (bson_iter_next(&ai)) {
                if (mf_value_cmp(bson_iter_value(&ai), v) == 0) {
                    emit = bson_iter_value(&ai);
                    break;
                }
            }
        } else if (mf_value_cmp(&dv, v) == 0) {
            emit = &dv;
        }
    }
    bson_append_value(out, name, -1, emit);
}

/*
 * returnKey's document for doc (mongod's ReturnKeyStage): the index key
 * that led to it, named by the key pattern's fields ({a: 2}); {_id: v} from
 * an _id lookup; {} from a collection scan.
 */
static void
return_key_doc(const mf_plan_t *plan, const bson_t *doc, const mf_match_details_t *d, bson_t *out)
{
    bson_iter_t di;

    if (d == NULL || d->index_key == NULL || d->index_key_pattern == NULL) {
        if (plan != NULL && plan->leaf != NULL && plan->leaf->kind == MF_ST_IDHACK &&
            bson_iter_init_find(&di, doc, "_id"))
            bson_append_value(out, "_id", 3, bson_iter_value(&di));
        return;
    }
    mf_crud_return_key_doc(d->index_key_pattern, d->index_key, d->index_key_len, doc, out);
}

/* mf_crud_return_key_doc: see crud.h. */
void
mf_crud_return_key_doc(const bson_t *key_pattern, const uint8_t *key, size_t len, const bson_t *doc, bson_t *out)
{
    bson_iter_t kp, di;
    bool dirs[MF_KP_MAX_FIELDS];
    int n = 0;
    mf_error_t e;
    bson_t dec;

    if (!bson_iter_init(&kp, key_pattern))
        return;
    while (n < MF_KP_MAX_FIELDS && bson_iter_next(&kp))
        dirs[n++] = mf_value_is_number(bson_iter_value(&kp)) && mf_value_as_double(bson_iter_value(&kp)) < 0;
    bson_init(&dec);
    if (mf_ks_decode(key, len, dirs, n, &dec, &e) == 0 && bson_iter_init(&kp, key_pattern) && bson_iter_init(&di, &dec)) {
        while (bson_iter_next(&kp) && bson_iter_next(&di))
            append_key_value(out, bson_iter_key(&kp), bson_iter_value(&di), doc);
    }
    bson_destroy(&dec);
}

/* Appends {a: {b: value}} for path "a.b" (value an array being built elsewhere, copied). */
static void
append_at_path(bson_t *out, const char *path, const bson_t *arr)
{
    const char *dot = strchr(path, '.');
    bson_t sub;
    if (dot == NULL) {
        BSON_APPEND_ARRAY(out, path, arr);
        return;
    }
    bson_append_document_begin(out, path, (int)(dot - path), &sub);
    append_at_path(&sub, dot + 1, arr);
    bson_append_document_end(out, &sub);
}

/*
 * cur's projection of doc (rid its record id, d its match details) into out
 * (initialised). A {$meta: "recordId"} or {$meta: "sortKey"} field reads the
 * document's record id and its key under the find's sort from the details,
 * filled in here (mongod's per-document metadata). Returns 0 or -1 with err.
 */
static int
project_doc(const mf_cursor_t *cur, int64_t rid, const bson_t *doc, const mf_match_details_t *d, bson_t *out,
            mf_error_t *err)
{
    unsigned metas = mf_projection_metas(cur->proj);
    mf_match_details_t md = d != NULL ? *d : (mf_match_details_t){.array_pos = -1};
    bson_t key = BSON_INITIALIZER;
    int rc;

    if (metas == 0)
        return mf_projection_apply(cur->proj, doc, d, out, err);
    md.has_record_id = true;
    md.record_id = rid;
    if ((metas & (1u << MF_PROJ_META_SORT_KEY)) && cur->sort_spec != NULL) {
        mf_sort_key_append(cur->sort_spec, doc, &key);
        md.sort_key = &key;
    }
    rc = mf_projection_apply(cur->proj, doc, &md, out, err);
    bson_destroy(&key);
    return rc;
}

/*
 * The document find returns for doc (rid its record id) when returnKey or
 * showRecordId is set, into out (initialised): returnKey's index key plus
 * the sort key at each {$meta: "sortKey"} path of the projection (the rest
 * of the projection is ignored, as mongod does); otherwise the projected
 * document, then $recordId: NumberLong(rid) for showRecordId (mongod adds
 * {$recordId: {$meta: "recordId"}} to the projection, unless the projection
 * names $recordId itself). Returns 0 or -1 with err.
 */
static int
find_output(const mf_cursor_t *cur, int64_t rid, const bson_t *doc, const mf_match_details_t *d, bson_t *out,
            mf_error_t *err)
{
    if (cur->return_key) {
        bson_iter_t it;
        return_key_doc(cur->plan, doc, d, out);
        if (cur->key_meta != NULL && cur->sort_spec != NULL && bson_iter_init(&it, cur->key_meta)) {
            while (bson_iter_next(&it)) {
                bson_t arr;
                bson_init(&arr);
                mf_sort_key_append(cur->sort_spec, doc, &arr);
                append_at_path(out, bson_iter_key(&it), &arr);
                bson_destroy(&arr);
            }
        }
        return 0;
    }
    if (cur->proj != NULL) {
        if (project_doc(cur, rid, doc, d, out, err) != 0)
            return -1;
    } else {
        bson_concat(out, doc);
    }
    if (cur->show_record_id && !bson_has_field(out, "$recordId"))
        BSON_APPEND_INT64(out, "$recordId", rid);
    return 0;
}

/* Adds doc (as find_output makes it) to the batch; a document with no room is stashed. */
static int
append_projected(fill_ctx_t *f, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    bson_t out;
    const bson_t *emit = doc;
    int rc;

    if (f->cur->return_key || f->cur->show_record_id) {
        bson_init(&out);
        if (find_output(f->cur, rid, doc, d, &out, f->err) != 0) {
            bson_destroy(&out);
            return -1;
        }
        emit = &out;
    } else if (f->cur->proj) {
        bson_init(&out);
        if (project_doc(f->cur, rid, doc, d, &out, f->err) != 0) {
            bson_destroy(&out);
            return -1;
        }
        emit = &out;
    }
    rc = mf_crud_batch_add(f->arr, &f->count, emit, f->err);
    if (rc == 1) {
        f->cur->stash = bson_copy(emit);
        f->full = true;
        rc = 0;
    }
    if (emit == &out)
        bson_destroy(&out);
    return rc;
}

static int
fill_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    fill_ctx_t *f = arg;
    mf_cursor_t *cur = f->cur;

    cur->last_rid = rid;
    if (cur->skip_left > 0) {
        cur->skip_left--;
        return 0;
    }
    if (cur->limit_left == 0)
        return 1;
    if (append_projected(f, rid, doc, d) != 0)
        return -1;
    if (cur->limit_left > 0)
        cur->limit_left--;
    if (cur->limit_left == 0 || f->full)
        return 1; /* a stashed document is consumed too: the plan resumes after it */
    if (f->count >= f->max) {
        f->full = true; /* this document is consumed; the plan resumes after it */
        return 1;
    }
    return 0;
}

/*
 * Fills arr with up to max documents from cur, within 16 MiB (see
 * mf_crud_batch_add): a document left over from the last batch comes
 * first. *exhausted tells whether the cursor has nothing more. The catalog
 * lock is held by the caller.
 */

static int cursor_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted);

int
mf_crud_cursor_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted)
{
    uint32_t before = bson_count_keys(arr);
    int rc = cursor_fill(op, cur, max, arr, exhausted);
    if (rc == 0) {
        /* What $currentOp's idleCursors reports: the documents and batches the cursor has returned. */
        cur->n_docs += (int64_t)(bson_count_keys(arr) - before);
        cur->n_batches++;
    }
    return rc;
}

/*
 * A scan cursor's collection is gone from its name (dropped, renamed, or
 * dropped and created again): mongod's PlanExecutor restore fails with 175
 * QueryPlanKilled, naming the new name of a renamed one.
 */
static int
scan_killed(mf_op_t *op, const mf_cursor_t *cur)
{
    char uuid[40];
    const uint8_t *u = cur->coll_uuid;
    snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
             u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
    mf_coll_t *now = mf_catalog_coll_find_uuid(op->eng->cat, cur->coll_uuid);
    if (now != NULL)
        return mf_err_set(&op->err, MF_E_QueryPlanKilled,
                          "collection renamed from '%s.%s' to '%s'. UUID %s",
                          cur->db, cur->coll, now->ns, uuid);
    return mf_err_set(&op->err, MF_E_QueryPlanKilled,
                      "collection dropped. UUID %s", uuid);
}

/* mf_crud_cursor_fill's work. */
static int
cursor_fill(mf_op_t *op, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted)
{
    fill_ctx_t f = {cur, arr, 0, max, false, &op->err};

    *exhausted = false;
    if (cur->stash != NULL) {
        if (max <= 0)
            return 0;
        /* The first document of a batch always fits, and its size was checked when it was stashed. */
        if (mf_crud_batch_add(arr, &f.count, cur->stash, &op->err) != 0)
            return -1;
        bson_destroy(cur->stash);
        cur->stash = NULL;
        if (f.count >= max) {
            /* A stream cannot tell whether more follow without producing it: the next getMore says. */
            if (cur->kind == MF_CURSOR_DOCS)
                *exhausted = cur->pos >= cur->docs.len;
            else if (cur->kind == MF_CURSOR_SCAN)
                *exhausted = cur->plan == NULL || (cur->plan->done && !cur->plan->tailable) || cur->limit_left == 0;
            return 0;
        }
    }
    if (cur->kind == MF_CURSOR_EXT && cur->ext_fill != NULL)
        return cur->ext_fill(op, cur, max, arr, exhausted);
    if (cur->kind == MF_CURSOR_EXT)
        return mf_crud_agg_stream_fill(op, cur, max, f.count, arr, exhausted);
    if (cur->kind == MF_CURSOR_DOCS) {
        while (cur->pos < cur->docs.len && f.count < max) {
            int r = mf_crud_batch_add(arr, &f.count, cur->docs.docs[cur->pos], &op->err);
            if (r < 0)
                return -1;
            if (r > 0)
                break; /* no room: it starts the next batch */
            cur->pos++;
        }
        *exhausted = cur->pos >= cur->docs.len;
        return 0;
    }
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, cur->db, cur->coll);
    bool more = cur->plan != NULL && (!cur->plan->done || cur->plan->tailable) && cur->limit_left != 0;
    if ((c == NULL || memcmp(c->uuid, cur->coll_uuid, 16) != 0) && more)
        return scan_killed(op, cur);
    if (c == NULL) {
        *exhausted = true;
        return 0;
    }
    if (cur->plan != NULL && cur->plan->tailable && cur->limit_left != 0) {
        /*
         * A tailable cursor resumes after the last record its scan saw; if
         * that record was deleted (a capped collection's rollover or a
         * delete), mongod's collection scan cannot restore its position and
         * the cursor dies with 136 CappedPositionLost.
         */
        if (cur->plan->started && cur->plan->last_rid > 0) {
            bson_t last;
            int fr = mf_coll_fetch(op->sess, c, cur->plan->last_rid, &last, &op->err);
            if (fr == 0)
                bson_destroy(&last);
            else if (fr == MF_NOTFOUND)
                return mf_err_set(&op->err, MF_E_CappedPositionLost,
                                  "CollectionScan died due to failure to restore tailable cursor position. Last seen record id: RecordId(%lld)",
                                  (long long)cur->plan->last_rid);
            else
                return fr == MF_CONFLICT ? mf_err_set(&op->err, MF_E_WriteConflict, "write conflict reading %s", c->ns)
                                         : -1;
        }
        cur->plan->done = false; /* a tailable cursor looks again for documents inserted since */
    }
    if (cur->limit_left == 0 || cur->plan == NULL || cur->plan->done) {
        *exhausted = true;
        return 0;
    }
    if (max <= 0)
        return 0;
    if (mf_exec_run(op->sess, c, cur->plan, cur->matcher, fill_visit, &f, &op->err) != 0)
        return -1;
    *exhausted = ((cur->plan->done && !cur->plan->tailable) || cur->limit_left == 0) && cur->stash == NULL;
    return 0;
}

/* Appends {cursor: {<batch>: arr, id, ns}} to the reply. */
void
mf_crud_append_cursor_reply(mf_op_t *op, const char *batch_name, bson_t *arr, int64_t id, const char *coll)
{
    mf_crud_append_cursor_reply_token(op, batch_name, arr, id, coll, NULL);
}

void
mf_crud_append_cursor_reply_token(mf_op_t *op, const char *batch_name, bson_t *arr, int64_t id, const char *coll,
                                  const bson_t *token)
{
    bson_t cd;
    char ns[512];
    mf_strjoin(ns, sizeof(ns), op->db, ".", coll);
    atomic_fetch_add_explicit(&op->eng->docs_returned, bson_count_keys(arr), memory_order_relaxed);
    BSON_APPEND_DOCUMENT_BEGIN(op->reply, "cursor", &cd);
    BSON_APPEND_ARRAY(&cd, batch_name, arr);
    if (token != NULL)
        BSON_APPEND_DOCUMENT(&cd, "postBatchResumeToken", token);
    BSON_APPEND_INT64(&cd, "id", id);
    BSON_APPEND_UTF8(&cd, "ns", ns);
    bson_append_document_end(op->reply, &cd);
}

static int
get_nonneg(mf_op_t *op, const char *field, int64_t *out, bool *present, int64_t dflt)
{
    *out = dflt;
    if (mf_op_get_int64(op, field, out, present) != 0)
        return -1;
    if (!*present)
        *out = dflt;
    if (*out < 0)
        return mf_err_set(&op->err, MF_E_Location51024, "BSON field '%s' value must be >= 0, actual value '%lld'",
                          field, (long long)*out);
    return 0;
}

/*
 * natural_param: a sort or hint (what: "sort" / "hint"; NULL: none) that
 * names $natural is exactly {$natural: 1} or {$natural: -1}, as mongod's
 * validateFindCommandRequest (hasInvalidNaturalParam) requires: otherwise
 * 2 BadValue "$natural <what> cannot be set to a value other than -1 or 1."
 * (a compound one included).
 */
static int
natural_param(mf_op_t *op, const bson_t *doc, const char *what)
{
    bson_iter_t it;
    if (doc == NULL || !bson_iter_init_find(&it, doc, "$natural"))
        return 0;
    if (bson_count_keys(doc) == 1 && BSON_ITER_HOLDS_NUMBER(&it)) {
        double d = mf_value_as_double(bson_iter_value(&it));
        if (d == 1 || d == -1)
            return 0;
    }
    return mf_err_set(&op->err, MF_E_BadValue, "$natural %s cannot be set to a value other than -1 or 1.", what);
}

const bson_t *
mf_crud_doc_field(const bson_t *doc, const char *key, bson_t *store)
{
    bson_iter_t it;
    const uint8_t *data;
    uint32_t len;
    if (doc == NULL || !bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return NULL;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(store, data, len) ? store : NULL;
}

/*
 * mf_crud_get_hint: the "hint" field of doc (a command or a statement): an index
 * name or a key pattern ({$natural: 1} included). *hint is a view into doc,
 * NULL when absent. A hint of another type is 2 BadValue.
 */
int
mf_crud_get_hint(mf_op_t *op, const bson_t *doc, const bson_value_t **hint, bson_value_t *store)
{
    bson_iter_t it;
    *hint = NULL;
    if (!bson_iter_init_find(&it, doc, "hint"))
        return 0;
    if (!BSON_ITER_HOLDS_UTF8(&it) && !BSON_ITER_HOLDS_DOCUMENT(&it))
        return mf_err_set(&op->err, MF_E_FailedToParse, "Hint must be a string or an object"); /* mongod's parseHint, null too */
    *store = *bson_iter_value(&it); /* the iterator's value slot does not outlive it */
    *hint = store;
    return 0;
}

/* The documents a blocking sort of plan-dependent results collects (see sort_plan_results). */
typedef struct sorted_ctx {
    mf_cursor_t *cur;
    bson_t **docs; /* owned: each the original document plus its output under the empty field name, last */
    size_t n, cap;
    mf_error_t *err;
} sorted_ctx_t;

static int
sorted_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    sorted_ctx_t *x = arg;
    bson_t out;
    bson_init(&out);
    if (find_output(x->cur, rid, doc, d, &out, x->err) != 0) {
        bson_destroy(&out);
        return -1;
    }
    if (x->n == x->cap) {
        x->cap = x->cap ? x->cap * 2 : 64;
        x->docs = mf_realloc(x->docs, x->cap * sizeof(*x->docs));
    }
    bson_t *aug = bson_copy(doc);
    BSON_APPEND_DOCUMENT(aug, "", &out); /* a sort path is never empty: the output cannot change the order */
    x->docs[x->n++] = aug;
    bson_destroy(&out);
    return 0;
}

/*
 * A find whose sort no index provides and whose results depend on the plan
 * (min / max bounds, returnKey's index keys, showRecordId's record ids, a
 * projection's {$meta: "recordId"} or {$meta: "sortKey"}),
 * which the aggregation route of other blocking sorts cannot carry: runs
 * cur's plan to its end, keeping each match with its output, sorts by the
 * matched documents (stable), applies skip and limit, and turns cur into a
 * materialised cursor of the outputs. The caller holds the catalog lock.
 * Returns 0 or -1 with op->err.
 */
static int
sort_plan_results(mf_op_t *op, mf_coll_t *c, mf_cursor_t *cur, const mf_sort_t *srt, int64_t skip, int64_t limit)
{
    sorted_ctx_t x = {.cur = cur, .err = &op->err};
    int rc = mf_exec_run(op->sess, c, cur->plan, cur->matcher, sorted_visit, &x, &op->err);
    if (rc == 0) {
        mf_curop_note_sort(mf_curop_current());
        mf_sort_docs(srt, x.docs, x.n);
        for (size_t i = (size_t)skip; i < x.n && (limit <= 0 || i < (size_t)skip + (size_t)limit); i++) {
            bson_iter_t it, last;
            bool any = false;
            bson_iter_init(&it, x.docs[i]);
            while (bson_iter_next(&it)) {
                last = it;
                any = true;
            }
            if (any && BSON_ITER_HOLDS_DOCUMENT(&last)) {
                bson_t out;
                const uint8_t *data;
                uint32_t len;
                bson_iter_document(&last, &len, &data);
                if (bson_init_static(&out, data, len))
                    mf_docvec_push(&cur->docs, &out);
            }
        }
        cur->kind = MF_CURSOR_DOCS;
    }
    for (size_t i = 0; i < x.n; i++)
        bson_destroy(x.docs[i]);
    free(x.docs);
    return rc;
}

/*
 * natural_dir: the direction of a {$natural: d} in doc (a sort, or a hint
 * given as a document), 0 when it has none.
 */
static int
natural_dir(const bson_t *doc)
{
    bson_iter_t it;
    if (doc == NULL || !bson_iter_init_find(&it, doc, "$natural"))
        return 0;
    return mf_value_as_double(bson_iter_value(&it)) < 0 ? -1 : 1;
}

/*
 * find_combinations_check: mongod 8.0's parsed_find_command::isValid, run
 * (as there) right after the filter parses and before the projection and
 * the sort do, all 2 BadValue in its order: one $text at most and none
 * under $nor (mf_text_find), one $near at most, then $near with a $natural
 * sort or hint, $text with $near, with a $natural sort, with any non-empty
 * hint or with tailable, $near with tailable, and a hint that disagrees
 * with a $natural sort. filter and sort may be NULL; sort is the command's
 * own (a tailable {$natural: 1} included); hint is the command's field (a
 * name or a key pattern) or NULL. Whether the $near is top-level is
 * checked later, on the normalised filter (mf_geo_near_normalize). Sets
 * *text_out and *near_out to the filter's $text and $near counts (0 before
 * they are known).
 */
static int
find_combinations_check(const bson_t *filter, const bson_t *sort, const bson_value_t *hint, bool tailable,
                        int *text_out, int *near_out, mf_error_t *err)
{
    bson_t hdoc;
    bool hinted = hint != NULL && !(hint->value_type == BSON_TYPE_DOCUMENT && hint->value.v_doc.data_len <= 5);
    int sort_nat = natural_dir(sort), hint_nat = 0;
    bson_value_t tv;
    int text, near;

    *text_out = *near_out = 0;

    if (hint != NULL && hint->value_type == BSON_TYPE_DOCUMENT &&
        bson_init_static(&hdoc, hint->value.v_doc.data, hint->value.v_doc.data_len))
        hint_nat = natural_dir(&hdoc);
    if ((text = mf_text_find(filter, &tv, err)) < 0)
        return -1;
    near = mf_geo_near_count(filter);
    *text_out = text;
    *near_out = near;
    if (near > 1)
        return mf_err_set(err, MF_E_BadValue, "Too many geoNear expressions");
    if (near > 0 && (sort_nat != 0 || hint_nat != 0))
        return mf_err_set(err, MF_E_BadValue, "geoNear expression not allowed with $natural %s",
                          sort_nat != 0 ? "sort order" : "hint");
    if (text > 0 && near > 0)
        return mf_err_set(err, MF_E_BadValue, "text and geoNear not allowed in same query");
    if (text > 0 && sort_nat != 0)
        return mf_err_set(err, MF_E_BadValue, "text expression not allowed with $natural sort order");
    if (text > 0 && hinted)
        return mf_err_set(err, MF_E_BadValue, "text and hint not allowed in same query");
    if (text > 0 && tailable)
        return mf_err_set(err, MF_E_BadValue, "text and tailable cursor not allowed in same query");
    if (near > 0 && tailable)
        return mf_err_set(err, MF_E_BadValue, "Tailable cursors and geo $near cannot be used together");
    if (sort_nat != 0 && hinted && hint_nat == 0)
        return mf_err_set(err, MF_E_BadValue, "index hint not allowed with $natural sort order");
    if (sort_nat != 0 && hint_nat != 0 && sort_nat != hint_nat)
        return mf_err_set(err, MF_E_BadValue, "$natural hint must be in the same direction as $natural sort order");
    return 0;
}

/* find_on_view: whether db.name is a view (not a time-series collection) now, under a short read lock. */
static bool
find_on_view(mf_op_t *op, const char *name)
{
    mf_catalog_rdlock(op->eng->cat);
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    bool v = c != NULL && c->is_view && !c->is_timeseries;
    mf_catalog_unlock(op->eng->cat);
    return v;
}

/*
 * view_find_check: a find on a view runs as an aggregate, which has none of
 * these options: mongod's asAggregationCommand refuses them in this order
 * (168 InvalidPipelineOperator; ntoreturn is no find field since 7.0: 40415). minmax names a non-empty min
 * or max (NULL: neither); singleBatch is allowed with limit 1.
 */
static int
view_find_check(mf_op_t *op, const char *minmax, bool return_key, bool show_rid, bool tailable, const bson_t *sort,
                bool single, int64_t limit)
{
    static const char *const flags[] = {"noCursorTimeout", "allowPartialResults", NULL};
    bson_iter_t it;
    const char *opt = minmax ? minmax : return_key ? "returnKey" : show_rid ? "showRecordId" : NULL;

    if (opt != NULL)
        return mf_err_set(&op->err, MF_E_InvalidPipelineOperator, "Option %s not supported in aggregation.", opt);
    if (tailable)
        return mf_err_set(&op->err, MF_E_InvalidPipelineOperator, "Tailable cursors are not supported in aggregation.");
    for (int i = 0; flags[i] != NULL; i++)
        if (bson_iter_init_find(&it, op->cmd, flags[i]) && bson_iter_as_bool(&it))
            return mf_err_set(&op->err, MF_E_InvalidPipelineOperator, "Option %s not supported in aggregation.",
                              flags[i]);
    if (sort != NULL && bson_iter_init_find(&it, sort, "$natural"))
        return mf_err_set(&op->err, MF_E_InvalidPipelineOperator, "Sort option $natural not supported in aggregation.");
    if (single && limit != 1)
        return mf_err_set(&op->err, MF_E_InvalidPipelineOperator, "Option singleBatch not supported in aggregation.");
    if (bson_iter_init_find(&it, op->cmd, "readOnce") && bson_iter_as_bool(&it))
        return mf_err_set(&op->err, MF_E_InvalidPipelineOperator, "Option readOnce not supported in aggregation.");
    return 0;
}

/* find's typed fields (find_command.idl), checked in document order before anything runs. */
static const mf_field_spec_t find_types[] = {
    {"filter", MF_FT_OBJ},       {"projection", MF_FT_OBJ},    {"sort", MF_FT_OBJ},
    {"collation", MF_FT_OBJ},    {"min", MF_FT_OBJ},           {"max", MF_FT_OBJ},
    {"let", MF_FT_OBJ},          {"skip", MF_FT_NONNEG},       {"limit", MF_FT_NONNEG},
    {"batchSize", MF_FT_NONNEG}, {"singleBatch", MF_FT_BOOL},
    {"allowDiskUse", MF_FT_BOOL}, {"returnKey", MF_FT_BOOL},   {"showRecordId", MF_FT_BOOL},
    {"tailable", MF_FT_BOOL},    {"noCursorTimeout", MF_FT_BOOL}, {"awaitData", MF_FT_BOOL},
    {"allowPartialResults", MF_FT_BOOL}, {"oplogReplay", MF_FT_BOOL}, {"readOnce", MF_FT_BOOL},
    {NULL, MF_FT_ANY}};

int
mf_cmd_find(mf_op_t *op)
{
    const char *name;
    bson_t filter, projection, sort, min, max;
    bool has_filter, has_proj, has_sort, present, single = false, tailable = false, await_data = false;
    bool has_min, has_max, return_key = false, show_rid = false;
    bson_t *key_meta = NULL;
    bson_t *near_filter = NULL; /* the filter with its $near hoisted to the top (mf_geo_near_normalize), or NULL */
    bool allow_disk = mf_param_get(op->eng->params, "allowDiskUseByDefault") != 0;
    int64_t skip, limit = 0, batch;
    mf_coll_t *c;
    mf_cursor_t *cur = NULL;
    mf_plan_t *plan = NULL;
    const bson_value_t *hint = NULL;
    bson_value_t hint_store;
    mf_matcher_t *m = NULL;
    mf_projection_t *p = NULL;
    mf_sort_t *srt = NULL;
    int rc = -1;
    bool running = false; /* the plan is built: what fails now is an executor error */
    bool near_run = false; /* a $near find runs as a $geoNear stage (its planner error is rewritten below) */
    int64_t near_batch = 0; /* its batchSize as given */

    if (mf_op_coll_name(op, &name) != 0 || mf_op_check_types(op, op->name, op->cmd, find_types, false, true) != 0)
        return -1;
    if (mf_op_get_doc(op, "filter", &filter, &has_filter) != 0 ||
        mf_op_get_doc(op, "projection", &projection, &has_proj) != 0 ||
        mf_op_get_doc(op, "sort", &sort, &has_sort) != 0 || get_nonneg(op, "skip", &skip, &present, 0) != 0 ||
        get_nonneg(op, "batchSize", &batch, &present, FIRST_BATCH_DEFAULT) != 0 ||
        mf_op_get_bool(op, "singleBatch", &single, &present) != 0 ||
        mf_op_get_bool(op, "tailable", &tailable, &present) != 0 ||
        mf_op_get_bool(op, "awaitData", &await_data, &present) != 0 ||
        mf_op_get_bool(op, "allowDiskUse", &allow_disk, &present) != 0 ||
        mf_op_get_doc(op, "min", &min, &has_min) != 0 || mf_op_get_doc(op, "max", &max, &has_max) != 0 ||
        mf_op_get_bool(op, "returnKey", &return_key, &present) != 0 ||
        mf_op_get_bool(op, "showRecordId", &show_rid, &present) != 0 ||
        mf_plan_minmax_check(has_min ? &min : NULL, has_max ? &max : NULL, &op->err) != 0)
        return -1;
    bool minmax = (has_min && !bson_empty(&min)) || (has_max && !bson_empty(&max));
    if (await_data && !tailable)
        return mf_err_set(&op->err, MF_E_FailedToParse, "Cannot set 'awaitData' without also setting 'tailable'");
    if (mf_op_get_int64(op, "limit", &limit, &present) != 0)
        return -1;
    if (limit < 0) {
        if (mf_err_set(&op->err, MF_E_Location51024, "BSON field 'limit' value must be >= 0, actual value '%lld'",
                       (long long)limit))
            return -1;
    }
    /* validateFindCommandRequest's order: $natural in the sort, then in the hint, then tailable's rules. */
    if (mf_crud_get_hint(op, op->cmd, &hint, &hint_store) != 0 ||
        natural_param(op, has_sort ? &sort : NULL, "sort") != 0)
        return -1;
    if (hint != NULL && hint->value_type == BSON_TYPE_DOCUMENT) {
        bson_t h;
        if (bson_init_static(&h, hint->value.v_doc.data, hint->value.v_doc.data_len) &&
            natural_param(op, &h, "hint") != 0)
            return -1;
    }
    const bson_t *valid_sort = has_sort && !bson_empty(&sort) ? &sort : NULL; /* isValid sees a tailable {$natural: 1} */
    if (tailable && has_sort && !bson_empty(&sort)) {
        bson_iter_t si;
        if (!(bson_iter_init(&si, &sort) && bson_iter_next(&si) && strcmp(bson_iter_key(&si), "$natural") == 0 &&
              mf_value_as_double(bson_iter_value(&si)) > 0 && !bson_iter_next(&si)))
            return mf_err_set(&op->err, MF_E_BadValue, "cannot use tailable option with a sort other than {$natural: 1}");
        has_sort = false;
    }
    if (tailable && single)
        return mf_err_set(&op->err, MF_E_BadValue, "cannot use tailable option with the 'singleBatch' option");
    atomic_fetch_add(&op->eng->op_query, 1);

    if ((m = mf_matcher_new(has_filter ? &filter : NULL, &op->err)) == NULL) {
        if (op->err.optimizing && find_on_view(op, name))
            mf_crud_optimize_context(&op->err); /* a find on a view runs as an aggregation, optimized */
        return -1;
    }
    int text_n, near_n;
    if (find_combinations_check(has_filter ? &filter : NULL, valid_sort, hint, tailable, &text_n, &near_n,
                                &op->err) != 0)
        goto out;
    if (return_key && has_proj) {
        /* returnKey ignores the projection but for its {$meta: "sortKey"} fields (mongod's ReturnKeyStage). */
        bson_iter_t pi, mi;
        bson_iter_init(&pi, &projection);
        while (bson_iter_next(&pi)) {
            if (BSON_ITER_HOLDS_DOCUMENT(&pi) && bson_iter_recurse(&pi, &mi) && bson_iter_find(&mi, "$meta") &&
                BSON_ITER_HOLDS_UTF8(&mi) && strcmp(bson_iter_utf8(&mi, NULL), "sortKey") == 0) {
                if (key_meta == NULL)
                    key_meta = bson_new();
                BSON_APPEND_INT32(key_meta, bson_iter_key(&pi), 1);
            }
        }
    } else if (has_proj && !bson_empty(&projection) && (p = mf_projection_new(&projection, &op->err)) == NULL) {
        /* A view takes it as an aggregation projection instead (below): its parse decides then. */
        if (!find_on_view(op, name))
            goto out;
        mf_err_clear(&op->err);
    }
    /*
     * mongod 8.0's order from here: the projection's metadata (40218 for a
     * text score without $text, even when nothing matches: a top-level,
     * nested or in-expression {$meta: "textScore"}), the sort, then
     * isValidNormalized (the $near's place), the sortKey rule, and last the
     * sort's own metadata.
     */
    bool meta_proj = (mf_projection_metas(p) & (1u << MF_PROJ_META_TEXT_SCORE)) != 0;
    if (has_proj && !meta_proj) {
        /* p is NULL for returnKey: a top-level {$meta: "textScore"} still counts. */
        bson_iter_t pi, mi;
        bson_iter_init(&pi, &projection);
        while (bson_iter_next(&pi))
            if (BSON_ITER_HOLDS_DOCUMENT(&pi) && bson_iter_recurse(&pi, &mi) && bson_iter_find(&mi, "$meta") &&
                BSON_ITER_HOLDS_UTF8(&mi) && strcmp(bson_iter_utf8(&mi, NULL), "textScore") == 0)
                meta_proj = true;
    }
    if (meta_proj && text_n == 0) {
        mf_err_set(&op->err, MF_E_Location40218, "query requires text score metadata, but it is not available");
        goto out;
    }
    /* {$meta: "geoNearDistance" | "geoNearPoint"} needs a $near (40218, as the text score a $text). */
    unsigned geo_bits = 0;
    if (has_proj && !return_key) {
        bson_value_t pv = {.value_type = BSON_TYPE_DOCUMENT};
        pv.value.v_doc.data = (uint8_t *)bson_get_data(&projection);
        pv.value.v_doc.data_len = projection.len;
        geo_bits = mf_geo_meta_mentioned(&pv);
    }
    bool geo_meta = geo_bits != 0;
    if (geo_meta && near_n == 0) {
        mf_err_set(&op->err, MF_E_Location40218, "query requires $geoNear %s metadata, but it is not available",
                   (geo_bits & MF_GEO_META_DIST) ? "distance" : "point");
        goto out;
    }
    if (has_sort && !bson_empty(&sort) && (srt = mf_sort_new(&sort, &op->err)) == NULL)
        goto out;
    if (near_n > 0 && mf_geo_near_normalize(&filter, &near_filter, &op->err) < 0)
        goto out;
    if ((key_meta != NULL || (mf_projection_metas(p) & (1u << MF_PROJ_META_SORT_KEY))) && srt == NULL) {
        mf_err_set(&op->err, MF_E_BadValue, "cannot use sortKey $meta projection without a sort");
        goto out;
    }
    if (mf_sort_uses_text_score(srt) && text_n == 0) {
        mf_err_set(&op->err, MF_E_Location40218, "query requires text score metadata, but it is not available");
        goto out;
    }
    if (mf_sort_uses_geo_distance(srt) && near_n == 0) {
        mf_err_set(&op->err, MF_E_Location40218, "query requires $geoNear distance metadata, but it is not available");
        goto out;
    }
    if (mf_sort_uses_geo_distance(srt))
        geo_meta = true; /* the $geoNear stage below carries the distance for the $sort */
    if (mf_crud_coll_acquire(op, name, false, &c) != 0)
        goto out_unlock;
    if (c != NULL && c->is_view &&
        view_find_check(op, minmax ? (has_min && !bson_empty(&min) ? "min" : "max") : NULL, return_key, show_rid,
                        tailable, srt ? &sort : NULL, single, limit) != 0)
        goto out_unlock;
    if (c != NULL && c->is_view && !c->is_timeseries && has_proj && !bson_empty(&projection)) {
        /*
         * mongod runs a find on a view as an aggregate whose $project is the
         * find's projection: it is parsed and applied as one, so what an
         * aggregation projection refuses (positional 31324, $elemMatch 168,
         * find's $slice forms) fails the same way, and $slice is the expression.
         */
        mf_projection_t *ap = mf_projection_new_agg(&projection, "$project", &op->err);
        if (ap == NULL) {
            mf_crud_optimize_context(&op->err); /* a find on a view runs as an aggregation */
            goto out_unlock;
        }
        if (p != NULL)
            mf_projection_free(p);
        p = ap;
    } else if (has_proj && !bson_empty(&projection) && p == NULL && !return_key &&
               (p = mf_projection_new(&projection, &op->err)) == NULL) {
        goto out_unlock; /* was a view when first looked at; no longer one: find's parse decides */
    }
    if (tailable && c != NULL) {
        /* Tailable cursors need a capped collection (and are not resumable here beyond a normal cursor). */
        bson_iter_t ci;
        if (!(c->options && bson_iter_init_find(&ci, c->options, "capped") && bson_iter_as_bool(&ci))) {
            /* get_executor: "error processing query: <canonical query> tailable cursor requested ..." */
            bson_t shown_coll;
            char cq[768];
            mf_plan_request_t q = {.filter = has_filter ? &filter : NULL, .matcher = m, .sort = has_sort ? &sort : NULL,
                                   .shown = {.limit = limit, .skip = skip, .batch_size = batch,
                                             .has_batch_size = bson_has_field(op->cmd, "batchSize"),
                                             .projection = has_proj ? &projection : NULL,
                                             .collation = mf_crud_doc_field(op->cmd, "collation", &shown_coll)}};
            mf_plan_cq_describe(c->ns, &q, cq, sizeof(cq));
            mf_err_set(&op->err, MF_E_BadValue, "error processing query: %s tailable cursor requested on non capped collection", cq);
            goto out_unlock;
        }
    }
    if (c != NULL && !c->is_view && has_filter && near_n > 0) {
        /*
         * A $near / $nearSphere returns documents nearest first: the find
         * runs as a $geoNear stage (query/agg_geo.h) keyed on the clause's
         * field, then its own sort, skip and limit.
         */
        bson_t gn;
        int near = mf_geonear_from_find(near_filter != NULL ? near_filter : &filter, &gn, &op->err);
        if (near < 0)
            goto out_unlock;
        if (near > 0) {
            bson_t stages;
            int k = 0;
            bson_init(&stages);
            mf_crud_stage_doc(&stages, &k, "$geoNear", &gn);
            const mf_index_t *near_ix = return_key ? mf_crud_near_index(c, &gn) : NULL;
            bson_destroy(&gn);
            if (srt)
                mf_crud_stage_doc(&stages, &k, "$sort", &sort);
            if (skip > 0)
                mf_crud_stage_int(&stages, &k, "$skip", skip);
            if (limit > 0)
                mf_crud_stage_int(&stages, &k, "$limit", limit);
            cur = mf_cursor_new(MF_CURSOR_DOCS, op->db, name);
            near_run = true;
            near_batch = batch;
            int vr = mf_crud_view_cursor(op, name, &stages, NULL, allow_disk, p, NULL, m, cur);
            p = NULL;
            m = NULL;
            bson_destroy(&stages);
            if (vr != 0)
                goto out_unlock;
            if (geo_meta)
                mf_crud_cursor_set_geo_meta(cur);
            if (near_ix != NULL && mf_crud_cursor_set_return_key(cur, near_ix, &op->err) != 0)
                goto out_unlock;
            goto fill;
        }
    }
    if (c != NULL && !c->is_view) {
        bson_t shown_coll;
        mf_plan_request_t req = {.filter = has_filter ? &filter : NULL, .matcher = m, .sort = srt ? &sort : NULL, .hint = hint,
                                 .force_collscan = tailable, .tailable = tailable,
                                 .shape_projection = has_proj ? &projection : NULL,
                                 .min = has_min ? &min : NULL, .max = has_max ? &max : NULL,
                                 /* a projection of key fields only may be covered (mf_plan_t.covered) */
                                 .cover_projection = has_proj && p != NULL && !return_key && !show_rid && !minmax &&
                                                             mf_projection_metas(p) == 0
                                                         ? &projection
                                                         : NULL,
                                 .cover_parsed = p,
                                 .shown = {.limit = limit, .skip = skip, .batch_size = batch,
                                           .has_batch_size = bson_has_field(op->cmd, "batchSize"),
                                           .projection = has_proj ? &projection : NULL,
                                           .collation = mf_crud_doc_field(op->cmd, "collation", &shown_coll)}};
        if (mf_plan_build(c, &req, &plan, &op->err) != 0)
            goto out_unlock;
        plan->tailable = tailable;
        running = true;
    }
    /* A record id or sort key in the projection ({$meta: ...}) is the plan's, as showRecordId's. */
    bool plan_results = minmax || return_key || show_rid ||
                        (mf_projection_metas(p) & (1u << MF_PROJ_META_RECORD_ID | 1u << MF_PROJ_META_SORT_KEY));
    /* The find's plan is covered: the scan its blocking sort reads may be too (the same plan rules). */
    bool covered = c != NULL && !c->is_view && plan != NULL && plan->covered;
    if (c != NULL && (c->is_view || (srt && !plan->sort_provided && !plan_results))) {
        /*
         * A find on a view is the view's pipeline followed by the find's own
         * stages; a sort no index provides is a blocking $sort. Both stream
         * through the aggregation pipeline (the sort keeps its memory budget
         * and spills); the find's projection applies to each result.
         */
        bson_t stages;
        int k = 0;
        bson_init(&stages);
        if (has_filter && !bson_empty(&filter))
            mf_crud_stage_doc(&stages, &k, "$match", &filter);
        if (srt)
            mf_crud_stage_doc(&stages, &k, "$sort", &sort);
        if (skip > 0)
            mf_crud_stage_int(&stages, &k, "$skip", skip);
        if (limit > 0)
            mf_crud_stage_int(&stages, &k, "$limit", limit);
        mf_plan_free(plan);
        plan = NULL;
        cur = mf_cursor_new(MF_CURSOR_DOCS, op->db, name);
        /* A projection of key fields may cover the scan the $sort reads (mf_crud_agg_cover_tail), as the plan had it. */
        int vr = mf_crud_view_cursor(op, name, &stages, hint, allow_disk, p, covered ? &projection : NULL, m, cur);
        p = NULL;
        m = NULL;
        bson_destroy(&stages);
        if (vr != 0)
            goto out_unlock;
        goto fill;
    }
    cur = mf_cursor_new(MF_CURSOR_SCAN, op->db, name);
    if (c == NULL) {
        cur->kind = MF_CURSOR_DOCS; /* empty */
    } else {
        memcpy(cur->coll_uuid, c->uuid, 16);
        cur->matcher = m;
        m = NULL;
        cur->proj = p;
        p = NULL;
        cur->skip_left = skip;
        cur->limit_left = limit > 0 ? limit : -1;
        if (has_filter)
            cur->filter = bson_copy(&filter);
        cur->plan = plan;
        plan = NULL;
        cur->await_data = await_data;
        cur->return_key = return_key;
        cur->show_record_id = show_rid;
        cur->key_meta = key_meta;
        key_meta = NULL;
        if (cur->key_meta != NULL || (mf_projection_metas(cur->proj) & (1u << MF_PROJ_META_SORT_KEY))) {
            cur->sort_spec = srt;
            srt = NULL;
        }
        if (srt != NULL && !cur->plan->sort_provided) {
            /* plan_results: the plan's own bounds, keys or record ids, sorted here. */
            if (sort_plan_results(op, c, cur, srt, skip, limit) != 0)
                goto out_unlock;
            limit = 0;
        } else if (cur->sort_spec != NULL && !cur->plan->sort_provided) {
            if (sort_plan_results(op, c, cur, cur->sort_spec, skip, limit) != 0)
                goto out_unlock;
            limit = 0;
        }
    }
fill:
    if (limit > 0 && batch > limit)
        batch = limit;
    {
        bson_t arr;
        bool exhausted;
        int64_t id = 0;
        bson_init(&arr);
        if (mf_crud_cursor_fill(op, cur, batch, &arr, &exhausted) != 0) {
            bson_destroy(&arr);
            goto out_unlock;
        }
        /*
         * A tailable cursor stays open at the end of the collection, unless
         * its scan saw no record at all (an empty collection): mongod's
         * collection scan then reaches a permanent EOF and find answers a
         * dead cursor (id 0), so a driver's awaitData loop ends.
         */
        bool keep = !exhausted;
        if (tailable && batch > 0 && cur->kind == MF_CURSOR_SCAN && cur->plan != NULL && cur->plan->last_rid <= 0)
            keep = false;
        if (keep && !single) {
            id = mf_cmd_cursor_register(op, cur);
            if (id < 0) {
                bson_destroy(&arr);
                goto out_unlock;
            }
            mf_cursors_checkin(op->eng->cursors, cur);
            cur = NULL;
        }
        mf_crud_append_cursor_reply(op, "firstBatch", &arr, id, name);
        bson_destroy(&arr);
    }
    rc = 0;
out_unlock:
    if (rc != 0 && near_run && op->err.code == MF_E_NoQueryExecutionPlans &&
        strstr(op->err.msg, "unable to find index for $geoNear query") != NULL) {
        /* mongod plans the find itself: its planner error shows the find's canonical query (GEONEAR ...) */
        bson_t shown_coll;
        mf_plan_request_t q = {.filter = &filter, .sort = srt ? &sort : NULL,
                               .shown = {.limit = limit, .skip = skip, .batch_size = near_batch,
                                         .has_batch_size = bson_has_field(op->cmd, "batchSize"),
                                         .projection = has_proj ? &projection : NULL,
                                         .collation = mf_crud_doc_field(op->cmd, "collation", &shown_coll)}};
        mf_plan_error(&op->err, MF_E_NoQueryExecutionPlans, c->ns, &q, "unable to find index for $geoNear query");
    }
    /* What failed once the plan ran, rather than in parsing or planning, is mongod's executor error. */
    if (rc != 0 && running)
        mf_err_context(&op->err, "Executor error during find command");
    mf_catalog_unlock(op->eng->cat);
out:
    if (cur)
        mf_cursor_free(cur);
    mf_plan_free(plan);
    if (m)
        mf_matcher_free(m);
    if (p)
        mf_projection_free(p);
    if (srt)
        mf_sort_free(srt);
    if (key_meta)
        bson_destroy(key_meta);
    if (near_filter)
        bson_destroy(near_filter);
    return rc;
}

/*
 * client_hung_up: whether the client of the connection the command came on
 * has closed it (a half-close included), without reading what it sent.
 * False for a command that came another way (HTTP, embedding API). The
 * network loop, when it reads the connection, sees the hang-up first and
 * closes the socket: hung_up then tells, and the socket is not polled.
 */
static bool
client_hung_up(mf_client_t *c)
{
    if (c == NULL || !c->has_sock)
        return false;
    if (atomic_load(&c->hung_up))
        return true;
    struct pollfd p = {.fd = c->sock, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/*
 * await_data: a getMore on a tailable awaitData cursor that found nothing
 * waits, as mongod does, up to the getMore's maxTimeMS (default 1 s) for
 * new documents, looking again every few milliseconds without holding any
 * lock in between; then it answers an empty batch (not 50
 * MaxTimeMSExpired). killOp and shutdown end the wait with their error; a
 * client that hung up ends it with 279 ClientDisconnect (mongod kills an
 * operation whose client disconnected, markKillOnClientDisconnect), and
 * the getMore's failure frees the cursor rather than a worker polling for
 * no one until maxTimeMS.
 */
static int
await_data(mf_op_t *op, mf_cursor_t *cur, int64_t batch, bson_t *arr, bool *exhausted)
{
    bson_iter_t it;
    int64_t wait_ms = 1000, start = mf_mono_ms();
    if (mf_op_find(op, "maxTimeMS", &it) && mf_value_is_number(bson_iter_value(&it)))
        wait_ms = (int64_t)mf_value_as_double(bson_iter_value(&it));
    while (bson_empty(arr) && !*exhausted && mf_mono_ms() - start + 10 < wait_ms) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        int64_t slept = mf_mono_us();
        nanosleep(&ts, NULL);
        mf_curop_add_paused(mf_curop_current(), mf_mono_us() - slept); /* waiting, not work (opLatencies, slow log) */
        if (mf_curop_current() != NULL && client_hung_up(op->client))
            mf_curop_interrupt(mf_curop_current(), MF_E_ClientDisconnect);
        if (mf_curop_killed(mf_curop_current()))
            return mf_curop_check_current(&op->err) != 0 ? -1 : 0;
        /*
         * Each look is part of the getMore's one batch, counted when the
         * getMore began (mf_crud_cursor_fill): only the documents it finds
         * add to what $currentOp's idleCursors reports.
         */
        mf_catalog_rdlock(op->eng->cat);
        int r = cursor_fill(op, cur, batch, arr, exhausted);
        mf_catalog_unlock(op->eng->cat);
        if (r == 0)
            cur->n_docs += (int64_t)bson_count_keys(arr);
        if (r != 0 && op->err.code == MF_E_MaxTimeMSExpired) {
            memset(&op->err, 0, sizeof(op->err));
            return 0; /* the await time is over: an empty batch */
        }
        if (r != 0)
            return -1;
    }
    return 0;
}

int
mf_cmd_get_more(mf_op_t *op)
{
    bson_iter_t it;
    int64_t id, batch;
    bool present, busy, exhausted;
    const char *coll = NULL;
    mf_cursor_t *cur;

    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_INT64(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'getMore.getMore' is the wrong type '%s', expected type 'long'",
                          mf_type_name(bson_iter_type(&it)));
    id = bson_iter_as_int64(&it);
    if (mf_op_get_string(op, "collection", &coll, &present) != 0)
        return -1;
    if (!present)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'getMore.collection' is missing but a required field");
    /* The IDL's validator of collection (query_request_helper::validateGetMoreCollectionName; a NUL byte is refused before). */
    if (coll[0] == '\0')
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Collection names cannot be empty");
    if (coll[0] == '.')
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Collection names cannot start with '.': %s", coll);
    if (get_nonneg(op, "batchSize", &batch, &present, INT32_MAX) != 0)
        return -1;
    if (batch == 0)
        batch = INT32_MAX;
    atomic_fetch_add(&op->eng->op_getmore, 1);
    cur = mf_cursors_checkout(op->eng->cursors, id, &busy);
    if (cur == NULL) {
        if (busy)
            return mf_err_set(&op->err, MF_E_CursorInUse, "cursor id %lld is already in use", (long long)id);
        return mf_err_set(&op->err, MF_E_CursorNotFound, "cursor id %lld not found", (long long)id);
    }
    char me[400];
    mf_cmd_auth_owner(op, me, sizeof(me));
    if (strcmp(cur->owner, me) != 0) {
        mf_cursors_checkin(op->eng->cursors, cur);
        return mf_err_set(&op->err, MF_E_Unauthorized, "cursor id %lld was not created by the authenticated user",
                          (long long)id);
    }
    if (strcmp(cur->coll, coll) != 0 || strcmp(cur->db, op->db) != 0) {
        mf_cursors_checkin(op->eng->cursors, cur);
        return mf_err_set(&op->err, MF_E_Unauthorized, "Requested getMore on namespace '%s.%s', but cursor belongs to a different namespace %s.%s",
                          op->db, coll, cur->db, cur->coll);
    }
    if (mf_cmd_session_check_cursor(op, id, cur->has_lsid, cur->lsid, cur->owner) != 0 ||
        mf_cmd_txn_check_cursor(op, id, cur->in_txn, cur->txn_number) != 0) {
        mf_cursors_checkin(op->eng->cursors, cur);
        return -1;
    }
    op->change_stream = cur->kind == MF_CURSOR_EXT && cur->ext_fill != NULL;
    mf_curop_set_origin(mf_curop_current(), cur->origin); /* currentOp's, the profiler's originatingCommand */
    /* $$NOW stays the opening command's for the cursor's life, as mongod's ExpressionContext. */
    mf_curop_set_now_ms(mf_curop_current(), cur->now_ms);
    bson_t fpd;
    if (mf_failpoint_eval(op->eng->fp_getmore, NULL, NULL, &fpd)) {
        bson_iter_t fi;
        int code = bson_iter_init_find(&fi, &fpd, "errorCode") && BSON_ITER_HOLDS_NUMBER(&fi)
                       ? (int)bson_iter_as_int64(&fi) : MF_E_InternalError;
        bson_destroy(&fpd);
        mf_cursors_release(op->eng->cursors, cur); /* as mongod: a getMore that fails deletes its pinned cursor */
        return mf_err_set(&op->err, code, "Hit the 'failGetMoreAfterCursorCheckout' failpoint");
    }
    if (cur->kind == MF_CURSOR_SCAN && !cur->await_data && mf_op_has(op, "maxTimeMS")) {
        /* As mongod: only an awaitData cursor's getMore takes a maxTimeMS (how long to wait); the cursor lives on. */
        mf_cursors_checkin(op->eng->cursors, cur);
        return mf_err_set(&op->err, MF_E_BadValue, "cannot set maxTimeMS on getMore command for a non-awaitData cursor");
    }
    /*
     * What is left of the opening command's maxTimeMS bounds a getMore of a
     * cursor that does not await data (mongod's setUpOperationDeadline:
     * getLeftoverMaxTimeMicros, MaxTimeMSExpired once it runs out, the
     * maxTimeAlwaysTimeOut fail point included); what it does not use is
     * left to the next.
     */
    bool leftover = cur->max_time_left_ms >= 0 && !cur->await_data && cur->ext_fill == NULL;
    int64_t deadline = 0;
    if (leftover) {
        deadline = mf_mono_ms() + cur->max_time_left_ms;
        mf_curop_set_deadline(mf_curop_current(), deadline);
        if (mf_failpoint_max_time(op) || mf_mono_ms() >= deadline) {
            mf_cursors_release(op->eng->cursors, cur); /* as mongod: a getMore that fails deletes its cursor */
            return mf_err_set(&op->err, MF_E_MaxTimeMSExpired, "operation exceeded time limit");
        }
    }
    bson_t arr;
    bson_init(&arr);
    /* The collation of the command that opened the cursor applies to what it still matches and sorts. */
    mf_collation_t *cc = NULL;
    const mf_collation_t *saved = mf_collation_current();
    if (cur->collation != NULL && mf_collation_new(cur->collation, &cc, &op->err) == 0)
        mf_collation_set_current(cc);
    mf_catalog_rdlock(op->eng->cat);
    int r = mf_crud_cursor_fill(op, cur, batch, &arr, &exhausted);
    mf_catalog_unlock(op->eng->cat);
    if (r == 0 && !exhausted && cur->await_data && bson_empty(&arr))
        r = await_data(op, cur, batch, &arr, &exhausted);
    mf_collation_set_current(saved);
    mf_collation_free(cc);
    if (r != 0) {
        mf_err_context(&op->err, "Executor error during getMore");
        bson_destroy(&arr);
        mf_cursors_release(op->eng->cursors, cur);
        return -1;
    }
    /* Its plan's sort stage is this operation's too (mongod's getMore reports the plan's summary stats). */
    if (cur->has_sort_stage)
        mf_curop_note_sort(mf_curop_current());
    char name[256];
    mf_strlcpy(name, cur->coll, sizeof(name));
    bson_t *token = cur->resume_token != NULL ? bson_copy(cur->resume_token) : NULL;
    if (exhausted) {
        mf_cursors_release(op->eng->cursors, cur);
        id = 0;
    } else {
        if (leftover) {
            int64_t left = deadline - mf_mono_ms();
            cur->max_time_left_ms = left > 0 ? left : 0;
        }
        mf_cursors_checkin(op->eng->cursors, cur);
    }
    mf_crud_append_cursor_reply_token(op, "nextBatch", &arr, id, name, token);
    if (token != NULL)
        bson_destroy(token);
    bson_destroy(&arr);
    return 0;
}

int
mf_cmd_kill_cursors(mf_op_t *op)
{
    bson_iter_t it, ai;
    bson_t killed, notfound, empty;
    int nk = 0, nn = 0;
    char key[16];

    /*
     * The namespace first, as the IDL parses it (concatenate_with_db:
     * IDLParserContext::parseNSCollectionRequired): a string naming a
     * collection. "$cmd.listCollections" is one: listCollections' cursors
     * are killed under it.
     */
    bson_iter_init(&it, op->cmd);
    bson_iter_next(&it);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "collection name has invalid type %s",
                          mf_type_name(bson_iter_type(&it)));
    if (bson_iter_utf8(&it, NULL)[0] == '\0')
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "Invalid namespace specified '%s.'", op->db);
    if (!mf_op_find(op, "cursors", &it) || BSON_ITER_HOLDS_NULL(&it))
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'killCursors.cursors' is missing but a required field");
    if (!BSON_ITER_HOLDS_ARRAY(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch, "BSON field 'killCursors.cursors' is the wrong type '%s', expected type 'array'",
                          mf_type_name(bson_iter_type(&it)));
    /* Every id is a number (IDL array<long>), checked before any cursor is killed. */
    bson_iter_recurse(&it, &ai);
    while (bson_iter_next(&ai)) {
        if (!mf_value_is_number(bson_iter_value(&ai)))
            return mf_err_set(&op->err, MF_E_TypeMismatch,
                              "BSON field 'killCursors.cursors.%s' is the wrong type '%s', expected type 'long'",
                              bson_iter_key(&ai), mf_type_name(bson_iter_type(&ai)));
    }
    bson_init(&killed);
    bson_init(&notfound);
    bson_init(&empty);
    /*
     * One's own cursors, or anyone's with killAnyCursor on the cluster
     * (hostManager's, root's: mayfly's cluster administration actions), as
     * mongod's checkAuthForKillCursors (authorization_checks.cpp).
     */
    char me[400];
    mf_cmd_auth_owner(op, me, sizeof(me));
    bool any = mf_cmd_auth_cluster(op, MF_CACT_ADMIN);
    char ns[512];
    /* Every id's owner first: one of another user's fails the command before any is killed (doCheckAuthorization). */
    bson_iter_recurse(&it, &ai);
    while (!any && bson_iter_next(&ai)) {
        if (mf_cursors_others(op->eng->cursors, bson_iter_as_int64(&ai), me, ns, sizeof(ns))) {
            bson_destroy(&killed);
            bson_destroy(&notfound);
            bson_destroy(&empty);
            return mf_err_set(&op->err, MF_E_Unauthorized, "not authorized to kill cursor on %s", ns);
        }
    }
    bson_iter_recurse(&it, &ai);
    while (bson_iter_next(&ai)) {
        int64_t id = bson_iter_as_int64(&ai);
        int k = mf_cursors_kill(op->eng->cursors, id, any ? NULL : me, ns, sizeof(ns));
        if (k < 0) {
            bson_destroy(&killed);
            bson_destroy(&notfound);
            bson_destroy(&empty);
            return mf_err_set(&op->err, MF_E_Unauthorized, "not authorized to kill cursor on %s", ns);
        }
        if (k > 0) {
            snprintf(key, sizeof(key), "%d", nk++);
            BSON_APPEND_INT64(&killed, key, id);
        } else {
            snprintf(key, sizeof(key), "%d", nn++);
            BSON_APPEND_INT64(&notfound, key, id);
        }
    }
    BSON_APPEND_ARRAY(op->reply, "cursorsKilled", &killed);
    BSON_APPEND_ARRAY(op->reply, "cursorsNotFound", &notfound);
    BSON_APPEND_ARRAY(op->reply, "cursorsAlive", &empty);
    BSON_APPEND_ARRAY(op->reply, "cursorsUnknown", &empty);
    bson_destroy(&killed);
    bson_destroy(&notfound);
    bson_destroy(&empty);
    return 0;
}

/* ---------- count / distinct ---------- */

typedef struct count_ctx {
    int64_t n, skip, limit;
} count_ctx_t;

static int
count_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    count_ctx_t *x = arg;
    (void)rid;
    (void)doc;
    (void)d;
    if (x->skip > 0) {
        x->skip--;
        return 0;
    }
    x->n++;
    return x->limit > 0 && x->n >= x->limit ? 1 : 0;
}

/* A view's count: its pipeline already applied the skip and limit. */
static int
view_count_visit(void *arg, const bson_t *doc)
{
    (void)doc;
    (*(int64_t *)arg)++;
    return 0;
}

int
mf_cmd_count(mf_op_t *op)
{
    const char *name;
    bson_t query;
    bool has_query, present;
    count_ctx_t x = {0, 0, 0};
    mf_coll_t *c;
    mf_matcher_t *m;
    const bson_value_t *hint;
    bson_value_t hint_store;
    int rc = 0;

    bson_iter_t ni;
    if (mf_crud_get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    /* countParseLimit / countParseSkip (count_command.idl): any non-number, null included, is 2 BadValue. */
    if (mf_op_find(op, "limit", &ni) && !mf_value_is_number(bson_iter_value(&ni)))
        return mf_err_set(&op->err, MF_E_BadValue, "limit value is not a valid number");
    if (mf_op_find(op, "skip", &ni) && !mf_value_is_number(bson_iter_value(&ni)))
        return mf_err_set(&op->err, MF_E_BadValue, "skip value is not a valid number");
    if (mf_op_coll_name(op, &name) != 0 || mf_op_get_doc(op, "query", &query, &has_query) != 0 ||
        mf_op_get_int64(op, "skip", &x.skip, &present) != 0 || mf_op_get_int64(op, "limit", &x.limit, &present) != 0)
        return -1;
    if (x.skip < 0)
        return mf_err_set(&op->err, MF_E_BadValue, "skip value is negative in count query");
    if (x.limit < 0)
        x.limit = -x.limit;
    if ((m = mf_matcher_new(has_query ? &query : NULL, &op->err)) == NULL)
        return -1;
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && c->is_view) {
        bson_t stages;
        int k = 0;
        bson_init(&stages);
        if (has_query)
            mf_crud_stage_doc(&stages, &k, "$match", &query);
        if (x.skip > 0)
            mf_crud_stage_int(&stages, &k, "$skip", x.skip);
        if (x.limit > 0)
            mf_crud_stage_int(&stages, &k, "$limit", x.limit);
        rc = mf_crud_view_each(op, name, &stages, hint, view_count_visit, &x.n);
        bson_destroy(&stages);
    } else if (c != NULL) {
        if ((!has_query || bson_empty(&query)) && hint == NULL) {
            int64_t total = atomic_load(&c->approx_count);
            total -= x.skip;
            if (total < 0)
                total = 0;
            if (x.limit > 0 && total > x.limit)
                total = x.limit;
            x.n = total;
        } else {
            /* mongod's count is a find of its query, limit (made positive) and skip (parseFromCount). */
            bson_t shown_coll;
            mf_plan_request_t req = {.filter = has_query ? &query : NULL, .matcher = m, .hint = hint, .root = MF_PLAN_ROOT_COUNT,
                                     .shown = {.limit = x.limit, .skip = x.skip,
                                               .collation = mf_crud_doc_field(op->cmd, "collation", &shown_coll)}};
            rc = mf_exec_query(op->sess, c, &req, m, count_visit, &x, NULL, &op->err);
        }
    }
    mf_catalog_unlock(op->eng->cat);
    mf_matcher_free(m);
    if (rc != 0)
        return -1;
    BSON_APPEND_INT32(op->reply, "n", (int32_t)x.n);
    return 0;
}

typedef struct distinct_ctx {
    const char *key;
    bson_t *vals; /* holder document keeping values alive */
    int n;
} distinct_ctx_t;

static bool
distinct_path(void *arg, const bson_value_t *v)
{
    distinct_ctx_t *x = arg;
    char key[16];
    snprintf(key, sizeof(key), "%d", x->n++);
    bson_append_value(x->vals, key, -1, v);
    return false;
}

static int
distinct_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    distinct_ctx_t *x = arg;
    (void)rid;
    (void)d;
    mf_path_walk_leaves(doc, x->key, distinct_path, x);
    return 0;
}

static int
view_distinct_visit(void *arg, const bson_t *doc)
{
    return distinct_visit(arg, 0, doc, NULL);
}

/*
 * Orders distinct values, equal ones in the order they were found, so the
 * first found is the one kept (mongod inserts into its set and keeps the
 * first: with 1 and 1.0 both present, the earlier document's type).
 */
static int
value_ptr_cmp(const void *a, const void *b)
{
    const bson_value_t *const *x = a, *const *y = b;
    int r = mf_value_cmp(*x, *y);
    if (r != 0)
        return r;
    return *x < *y ? -1 : *x > *y ? 1 : 0; /* pointers into one array, in the order found */
}

void
mf_crud_distinct_projection(const char *key, bson_t *out)
{
    char field[1024];
    size_t n = 0;
    const char *p = key;
    while (*p != '\0') {
        const char *e = strchr(p, '.');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        bool digits = len > 0;
        for (size_t i = 0; i < len && digits; i++)
            digits = p[i] >= '0' && p[i] <= '9';
        if (digits && p != key)
            break;
        n = (size_t)(p - key) + len;
        if (e == NULL)
            break;
        p = e + 1;
    }
    if (n >= sizeof(field))
        n = sizeof(field) - 1;
    memcpy(field, key, n);
    field[n] = '\0';
    bson_init(out);
    if (strcmp(field, "_id") != 0)
        BSON_APPEND_INT32(out, "_id", 0);
    BSON_APPEND_INT32(out, field, 1);
}

int
mf_cmd_distinct(mf_op_t *op)
{
    const char *name, *key;
    bson_t query, vals, out;
    bool has_query, present;
    mf_coll_t *c;
    mf_matcher_t *m;
    const bson_value_t *hint;
    bson_value_t hint_store;
    int rc = 0;

    if (mf_crud_get_hint(op, op->cmd, &hint, &hint_store) != 0)
        return -1;
    if (mf_op_coll_name(op, &name) != 0 || mf_op_get_string(op, "key", &key, &present) != 0 ||
        mf_op_get_doc(op, "query", &query, &has_query) != 0)
        return -1;
    if (!present)
        return mf_err_set(&op->err, MF_E_Location40414, "BSON field 'distinct.key' is missing but a required field");
    if ((m = mf_matcher_new(has_query ? &query : NULL, &op->err)) == NULL)
        return -1;
    bson_init(&vals);
    distinct_ctx_t x = {key, &vals, 0};
    mf_catalog_rdlock(op->eng->cat);
    c = mf_catalog_coll_find(op->eng->cat, op->db, name);
    if (c != NULL && c->is_view) {
        bson_t stages;
        int k = 0;
        bson_init(&stages);
        if (has_query)
            mf_crud_stage_doc(&stages, &k, "$match", &query);
        rc = mf_crud_view_each(op, name, &stages, hint, view_distinct_visit, &x);
        bson_destroy(&stages);
    } else if (c != NULL) {
        bson_t shown_proj, shown_coll;
        mf_crud_distinct_projection(key, &shown_proj);
        /* A DISTINCT_SCAN when an index holds the key (mf_plan_build), else the filter's plan. */
        mf_plan_request_t req = {.filter = has_query ? &query : NULL, .matcher = m, .hint = hint, .distinct_key = key,
                                 .shown = {.projection = &shown_proj,
                                           .collation = mf_crud_doc_field(op->cmd, "collation", &shown_coll)}};
        mf_plan_t *p;
        if ((rc = mf_plan_build(c, &req, &p, &op->err)) == 0) {
            /* What fails once the plan runs is mongod's executor error; a planning error has its own context. */
            if ((rc = mf_exec_run(op->sess, c, p, m, distinct_visit, &x, &op->err)) != 0)
                mf_err_context(&op->err, "Executor error during distinct command");
            mf_plan_free(p);
        }
        bson_destroy(&shown_proj);
    }
    mf_catalog_unlock(op->eng->cat);
    mf_matcher_free(m);
    if (rc != 0) {
        bson_destroy(&vals);
        return -1;
    }
    /* Sort, then keep the first of each run of equal values. */
    bson_value_t *store = mf_calloc((size_t)x.n + 1, sizeof(*store));
    const bson_value_t **ptrs = mf_calloc((size_t)x.n + 1, sizeof(*ptrs));
    bson_iter_t it;
    int k = 0;
    bson_iter_init(&it, &vals);
    while (bson_iter_next(&it) && k < x.n) {
        store[k] = *bson_iter_value(&it);
        ptrs[k] = &store[k];
        k++;
    }
    qsort(ptrs, (size_t)k, sizeof(*ptrs), value_ptr_cmp);
    bson_init(&out);
    int outn = 0;
    for (int i = 0; i < k; i++) {
        if (i > 0 && mf_value_cmp(ptrs[i], ptrs[i - 1]) == 0)
            continue;
        char kb[16];
        snprintf(kb, sizeof(kb), "%d", outn++);
        bson_append_value(&out, kb, -1, ptrs[i]);
    }
    if (out.len > MF_MAX_BSON_SIZE) {
        rc = mf_err_set(&op->err, MF_E_Location17217, "distinct too big, 16mb cap");
    } else {
        BSON_APPEND_ARRAY(op->reply, "values", &out);
    }
    bson_destroy(&out);
    free(store);
    free(ptrs);
    bson_destroy(&vals);
    return rc;
}
