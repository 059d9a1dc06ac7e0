/*
 * cmd_changestream.c: change streams ($changeStream) on a replica-set
 * member, as mongod 8.0 answers them (ARCHITECTURE.md "Change streams").
 *
 * Source. Events are read from this member's local.oplog.rs, the capped
 * collection replication writes one document per op into ({ts, t, op, ns,
 * ui, o, o2, diff, wall}, repl/repl.c), so a stream on a secondary sees
 * the primary's writes once this member applied them. Everything in it is
 * majority-committed: raft commits an entry before any member applies it.
 * The command layer reads it as any collection (no call into repl, which
 * sits above); only the start time comes through the repl hooks
 * (op_time: the last applied timestamp).
 *
 * Position. The cursor keeps the record id of the last oplog document it
 * scanned (after_rid): each batch is a collection scan resuming after it,
 * so a getMore costs what is new, not the oplog's size. Each event has a
 * position (ts, kind): kind 0 for the op's own event, 1 for the invalidate
 * that follows a drop or rename, 0xff for a "high-water mark" (everything
 * at ts seen). An event is returned when its position is after the
 * stream's start position.
 *
 * clusterTime. An event's is its op's timestamp, except a multi-document
 * transaction's events: all carry its first op's (the ops of one
 * transaction are one raft entry with consecutive timestamps, and the op's
 * place in it is in its oplog _id: limits.h), as mongod's carry their one
 * applyOps entry's; startAtOperationTime at it gives the whole transaction.
 *
 * Resume token. {_data: hex string}: 16 hex digits of the op's timestamp
 * (seconds << 32 | increment) then 2 of the kind, upper case, so tokens
 * compare as strings in stream order and are the same on every member (a
 * driver may resume on another one); a fragment of a split event adds 4
 * hex digits of its number. resumeAfter / startAfter start after the
 * token's position, and an event's token (not a high-water mark) must
 * name an event of this stream: when a later event comes first, 280, as
 * mongod's DocumentSourceChangeStreamEnsureResumeTokenPresent (a token
 * from another collection's stream). startAtOperationTime T at (T, 0). A new stream
 * starts after the member's last applied timestamp. To find where to scan
 * from, a stream opens with a backward scan from the oplog's newest
 * document to the first one older than the start (short for a recent
 * start); the oplog's oldest document newer than the start answers 286
 * ChangeStreamHistoryLost.
 *
 * Updates are logged as whole new documents; the oplog observer adds a
 * diff {u: {dotted path: value}, r: [paths], t: [{field, newSize}],
 * d: {ambiguous path: [parts]}} computed from the old and new images
 * (array elements by index, shrunk arrays as truncatedArrays) when the
 * update used operators or a pipeline, and none for a replacement
 * (repl/oplog.c): that is what tells "update" from "replace". d becomes
 * updateDescription.disambiguatedPaths under showExpandedEvents. A collMod
 * entry's o2 (the state before it) becomes a modify event's
 * stateBeforeChange.
 *
 * The stages after $changeStream run over each event (a fresh stream of
 * the parsed pipeline per event; only stages that keep one document in,
 * at most one out are allowed, as mongod), then, when the pipeline ends
 * with $changeStreamSplitLargeEvent, an event over 16 MB + 8 KB is split
 * into fragments as mongod splits it (split_event). The cursor is an
 * MF_CURSOR_EXT with ext_fill, await_data set (an empty getMore waits up
 * to its maxTimeMS, cmd_find.c) and resume_token (postBatchResumeToken).
 *
 * The oplog is capped: a stream whose last read record is gone when it
 * looks again (the oplog rolled over it) fails with 286, as tailable finds
 * fail with 136.
 *
 * Pre- and post-images. An update's or delete's op carries the old
 * document as `pre` when its collection has changeStreamPreAndPostImages
 * enabled (repl/oplog.c), so images live as long as the oplog keeps their
 * op (mongod keeps them in config.system.preimages, removed with the
 * oplog's oldest entry by default: the same lifetime). fullDocumentBeforeChange
 * reads it; fullDocument "whenAvailable" / "required" reports an update's
 * logged new document only when the pre-image is there, as mongod derives
 * the post-image from it. "required" without one is 47 NoMatchingDocument.
 *
 * Not supported: events on the target of a rename.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "cmd/cmd.h"
#include "cmd/crud.h"
#include "common/alloc.h"
#include "common/docvec.h"
#include "common/limits.h"
#include "doc/collation.h"
#include "doc/value.h"
#include "engine/cursor.h"
#include "query/agg.h"
#include "query/exec.h"

enum { CS_COLL, CS_DB, CS_CLUSTER };
enum { FD_DEFAULT, FD_UPDATE_LOOKUP, FD_WHEN_AVAILABLE, FD_REQUIRED };
enum { FB_OFF, FB_WHEN_AVAILABLE, FB_REQUIRED }; /* fullDocumentBeforeChange */
enum { K_EVENT = 0, K_INVALIDATE = 1, K_HWM = 0xff };
#define SCAN_EVENTS 1000

/* A position in the stream: an op's timestamp and the event's kind. */
typedef struct cs_pos {
    uint64_t ts;
    int kind;
    int frag; /* 0: a whole event; n > 0: fragment n of a split event ($changeStreamSplitLargeEvent) */
} cs_pos_t;

/* One stream's state, owned by its cursor (ext). */
typedef struct cs_state {
    int scope;
    char *db, *coll;          /* owned; coll NULL unless CS_COLL */
    int full_doc;
    int before;               /* fullDocumentBeforeChange (FB_*) */
    bool expanded;            /* showExpandedEvents */
    mf_pipeline_t *pl;        /* owned: the stages after $changeStream, or NULL */
    cs_pos_t start;           /* events after this position only */
    int64_t after_rid;        /* the last local.oplog.rs record scanned (0: from the beginning) */
    cs_pos_t scanned;         /* the position of everything scanned (high-water mark) */
    mf_docvec_t pending;      /* events produced but not returned yet (owned) */
    size_t head;              /* the next one to return */
    bool invalidate_queued;   /* an invalidate is in pending: the stream ends with it */
    const char *tmp_dir;      /* the engine's spill directory (not owned) */
    bool split;               /* the pipeline ends with $changeStreamSplitLargeEvent */
    int split_skip;           /* resumed from fragment n of the event at start: its first n fragments are skipped */
    bool tok_check;           /* resumed from an event's token: that event must be in this stream (else 280) */
    cs_pos_t tok;             /* that token's position */
} cs_state_t;

static void
cs_free(void *arg)
{
    cs_state_t *st = arg;
    if (st == NULL)
        return;
    free(st->db);
    free(st->coll);
    mf_pipeline_free(st->pl);
    mf_docvec_destroy(&st->pending);
    free(st);
}

static int
pos_cmp(cs_pos_t a, cs_pos_t b)
{
    if (a.ts != b.ts)
        return a.ts < b.ts ? -1 : 1;
    if (a.kind != b.kind)
        return a.kind < b.kind ? -1 : 1;
    return a.frag < b.frag ? -1 : a.frag > b.frag;
}

/*
 * Whether the event at p (a whole event's position) is returned: after the
 * stream's start, or the very event a fragment token named when the stream
 * resumed from one (its later fragments are still to come).
 */
static bool
after_start(const cs_state_t *st, cs_pos_t p)
{
    if (pos_cmp(p, st->start) > 0)
        return true;
    return st->split_skip > 0 && p.ts == st->start.ts && p.kind == st->start.kind;
}

/*
 * {_data: "<16 hex ts><2 hex kind>"} into out (initialised here); a
 * fragment's token has 4 more hex digits, its number, so that it sorts
 * after the event's other tokens before it and before the next event's.
 */
static void
token_of(cs_pos_t p, bson_t *out)
{
    char hex[32];
    if (p.frag > 0)
        snprintf(hex, sizeof(hex), "%016llX%02X%04X", (unsigned long long)p.ts, (unsigned)p.kind & 0xff,
                 (unsigned)p.frag & 0xffff);
    else
        snprintf(hex, sizeof(hex), "%016llX%02X", (unsigned long long)p.ts, (unsigned)p.kind & 0xff);
    bson_init(out);
    BSON_APPEND_UTF8(out, "_data", hex);
}

/* Parses a resume token (the option's value) into *p; 0 or -1 with err. */
static int
token_parse(const bson_iter_t *opt, const char *name, cs_pos_t *p, mf_error_t *err)
{
    bson_iter_t it;
    if (!BSON_ITER_HOLDS_DOCUMENT(opt))
        return mf_err_set(err, MF_E_TypeMismatch, "BSON field '$changeStream.%s' is the wrong type '%s', expected type 'object'",
                          name, mf_type_name(bson_iter_type(opt)));
    if (!bson_iter_recurse(opt, &it) || !bson_iter_find(&it, "_data") || !BSON_ITER_HOLDS_UTF8(&it)) {
        char shown[256];
        mf_fmt_value(bson_iter_value((bson_iter_t *)opt), shown, sizeof(shown));
        return mf_err_set(err, MF_E_Location40647, "Bad resume token: _data of missing or of wrong type. Expected "
                          "string, got %s", shown);
    }
    uint32_t len;
    const char *s = bson_iter_utf8(&it, &len);
    unsigned long long ts;
    unsigned kind, frag = 0;
    char tail;
    if ((len != 18 || sscanf(s, "%16llx%2x%c", &ts, &kind, &tail) != 2) &&
        (len != 22 || sscanf(s, "%16llx%2x%4x%c", &ts, &kind, &frag, &tail) != 3 || frag == 0))
        return mf_err_set(err, MF_E_FailedToParse, "Bad resume token: '%s' is not a token of this server", s);
    p->ts = ts;
    p->kind = (int)kind;
    p->frag = (int)frag;
    return 0;
}

static uint64_t
ts_of(const bson_iter_t *it)
{
    uint32_t t, i;
    bson_iter_timestamp(it, &t, &i);
    return (uint64_t)t << 32 | i;
}

/* ---------- locating the start ---------- */

typedef struct back_ctx {
    uint64_t before;   /* the first document older than this */
    int64_t rid;       /* its record id (0: none) */
    uint64_t oldest;   /* the oldest ts seen (the scan ran to the oplog's start when rid is 0) */
    bool any;
} back_ctx_t;

static int
back_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    back_ctx_t *b = arg;
    bson_iter_t it;
    (void)d;
    if (!bson_iter_init_find(&it, doc, "ts") || !BSON_ITER_HOLDS_TIMESTAMP(&it))
        return 0;
    uint64_t ts = ts_of(&it);
    b->any = true;
    b->oldest = ts;
    if (ts < b->before) {
        b->rid = rid;
        return 1;
    }
    return 0;
}

/*
 * Sets st->after_rid to the newest oplog record older than st->start.ts
 * (0: none). check_lost: fails with 286 when the oplog's oldest document is
 * newer than lost_ts (a resume point the oplog no longer holds).
 */
static int
locate_start(mf_op_t *op, cs_state_t *st, bool check_lost, uint64_t lost_ts)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, "local", "oplog.rs");
    st->after_rid = 0;
    if (c == NULL)
        return 0;
    bson_t sort;
    bson_init(&sort);
    BSON_APPEND_INT32(&sort, "$natural", -1);
    mf_plan_request_t req = {.sort = &sort};
    back_ctx_t b = {.before = st->start.ts};
    int rc = mf_exec_query(op->sess, c, &req, NULL, back_visit, &b, NULL, &op->err);
    bson_destroy(&sort);
    if (rc != 0)
        return -1;
    st->after_rid = b.rid;
    if (check_lost && b.rid == 0 && b.any && b.oldest > lost_ts)
        return mf_err_set(&op->err, MF_E_ChangeStreamHistoryLost,
                          "Resume of change stream was not possible, as the resume point may no longer be in the oplog.");
    return 0;
}

/* ---------- events ---------- */

static void
append_ns(bson_t *ev, const char *key, const char *db, const char *coll)
{
    bson_t ns;
    BSON_APPEND_DOCUMENT_BEGIN(ev, key, &ns);
    BSON_APPEND_UTF8(&ns, "db", db);
    if (coll != NULL)
        BSON_APPEND_UTF8(&ns, "coll", coll);
    bson_append_document_end(ev, &ns);
}

/* Splits "db.coll" into db (copied into dbbuf) and coll (pointing into ns). False if no dot. */
static bool
split_ns(const char *ns, char *dbbuf, size_t cap, const char **coll)
{
    const char *dot = strchr(ns, '.');
    if (dot == NULL || (size_t)(dot - ns) >= cap)
        return false;
    memcpy(dbbuf, ns, (size_t)(dot - ns));
    dbbuf[dot - ns] = '\0';
    *coll = dot + 1;
    return true;
}

/* Whether the stream watches documents of db.coll. */
static bool
watches(const cs_state_t *st, const char *db, const char *coll)
{
    if (strncmp(coll, "system.", 7) == 0)
        return false;
    switch (st->scope) {
    case CS_COLL:
        return strcmp(db, st->db) == 0 && strcmp(coll, st->coll) == 0;
    case CS_DB:
        return strcmp(db, st->db) == 0;
    default:
        return !mf_catalog_db_is_internal(db);
    }
}

typedef struct lookup_ctx {
    bson_t *doc;
} lookup_ctx_t;

static int
lookup_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    lookup_ctx_t *l = arg;
    (void)rid;
    (void)d;
    l->doc = bson_copy(doc);
    return 1;
}

/*
 * The current document of db.coll with _id key (owned; NULL when there is
 * none). It is looked up under the collection's default collation (its _id
 * index's), whatever the stream's, as mongod's updateLookup: under another
 * collation a string _id could tie with another document's.
 */
static int
lookup_current(mf_op_t *op, const char *db, const char *coll, const bson_t *key, bson_t **out)
{
    mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, db, coll);
    lookup_ctx_t l = {NULL};
    *out = NULL;
    if (c == NULL || c->is_view)
        return 0;
    const mf_collation_t *saved = mf_collation_current(), *cc = NULL;
    for (int i = 0; i < c->nindexes; i++)
        if (c->indexes[i]->is_id)
            cc = c->indexes[i]->kp.collation;
    mf_collation_set_current(cc);
    mf_plan_request_t req = {.filter = key};
    int rc = mf_exec_query(op->sess, c, &req, NULL, lookup_visit, &l, NULL, &op->err);
    mf_collation_set_current(saved);
    if (rc != 0)
        return -1;
    *out = l.doc;
    return 0;
}

/*
 * The common head, in mongod's order (change_stream_event_transform.cpp):
 * a transaction's txnNumber and lsid (txn, its op's oplog document, or
 * NULL), then _id, operationType, clusterTime, the collection's UUID when
 * uuid is given (showExpandedEvents), wallTime. Fields an event adds
 * before its resume token (a rename's "to") are the caller's, appended to
 * ev before (ev initialised by the caller then: pre_init). clusterTime is
 * the op's timestamp less back: a transaction's events all carry its first
 * op's (txn_back), as mongod's carry their one applyOps entry's.
 */
static void
event_head_full(bson_t *ev, bool pre_init, cs_pos_t p, const char *type, const bson_iter_t *ts, uint32_t back,
                int64_t wall, const bson_t *txn, const bson_value_t *uuid)
{
    bson_t tok;
    bson_iter_t li, ni;
    uint32_t t, i;
    token_of(p, &tok);
    if (!pre_init)
        bson_init(ev);
    /* mongod adds a transaction's ids first (addTransactionIdFieldsIfPresent, before the resume token). */
    if (txn != NULL && bson_iter_init_find(&li, txn, "lsid") && BSON_ITER_HOLDS_DOCUMENT(&li) &&
        bson_iter_init_find(&ni, txn, "txnNumber")) {
        bson_append_value(ev, "txnNumber", -1, bson_iter_value(&ni));
        bson_append_value(ev, "lsid", -1, bson_iter_value(&li));
    }
    BSON_APPEND_DOCUMENT(ev, "_id", &tok);
    bson_destroy(&tok);
    BSON_APPEND_UTF8(ev, "operationType", type);
    bson_iter_timestamp(ts, &t, &i);
    BSON_APPEND_TIMESTAMP(ev, "clusterTime", t, back <= i ? i - back : i);
    if (uuid != NULL)
        bson_append_value(ev, "collectionUUID", -1, uuid);
    BSON_APPEND_DATE_TIME(ev, "wallTime", wall);
}

static void
event_head(bson_t *ev, cs_pos_t p, const char *type, const bson_iter_t *ts, int64_t wall, const bson_value_t *uuid)
{
    event_head_full(ev, false, p, type, ts, 0, wall, NULL, uuid);
}

/*
 * How far a transaction's op (one naming lsid and txnNumber: repl/oplog.c
 * logs a multi-document transaction's ops so, and only those) is from its
 * entry's first op, which has the transaction's timestamp; 0 for any other.
 */
static uint32_t
txn_back(const bson_t *opdoc)
{
    bson_iter_t it;
    if (opdoc == NULL || !bson_iter_init_find(&it, opdoc, "txnNumber") || !bson_iter_init_find(&it, opdoc, "_id") ||
        !BSON_ITER_HOLDS_INT64(&it))
        return 0;
    return (uint32_t)((uint64_t)bson_iter_int64(&it) & ((1u << MF_OPLOG_OPS_BITS) - 1));
}

static bool
sub_doc(const bson_iter_t *it, bson_t *out)
{
    const uint8_t *d;
    uint32_t l;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return false;
    bson_iter_document(it, &l, &d);
    return bson_init_static(out, d, l);
}

/* ---------- filling a batch ---------- */

typedef struct one_src {
    bson_t *doc; /* handed to the stream once (ownership passes) */
} one_src_t;

static int
one_pull(void *ctx, size_t max, mf_docvec_t *out, bool *eof, mf_error_t *err)
{
    one_src_t *s = ctx;
    (void)max;
    (void)err;
    if (s->doc != NULL) {
        mf_docvec_push_steal(out, s->doc);
        s->doc = NULL;
    }
    *eof = true;
    return 0;
}

/*
 * $changeStreamSplitLargeEvent's limit (mongod's kBSONObjMaxChangeEventSize:
 * the internal BSON limit less 8 KB): a larger event is split.
 */
#define SPLIT_MAX_EVENT (MF_MAX_BSON_INTERNAL_SIZE - 8 * 1024)

typedef struct split_field {
    uint32_t size; /* the element's BSON size (type byte, key, value) */
    const char *key;
    bson_iter_t it;
} split_field_t;

static int
split_field_cmp(const void *a, const void *b)
{
    const split_field_t *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return strcmp(x->key, y->key);
}

/* Appends {_id: <fragment's token>, splitEvent: {fragment: n, of: total}} to out (an empty document). */
static void
fragment_head(cs_pos_t p, int n, int total, bson_t *out)
{
    bson_t tok, se;
    p.frag = n;
    token_of(p, &tok);
    BSON_APPEND_DOCUMENT(out, "_id", &tok);
    bson_destroy(&tok);
    BSON_APPEND_DOCUMENT_BEGIN(out, "splitEvent", &se);
    BSON_APPEND_INT32(&se, "fragment", n);
    BSON_APPEND_INT32(&se, "of", total);
    bson_append_document_end(out, &se);
}

/*
 * Queues the fragments of ev (an event at p larger than SPLIT_MAX_EVENT)
 * but its first skip ones, as mongod's change_stream_split_event.cpp
 * splits: every field but _id, smallest first (by BSON size, then name),
 * packed greedily into fragments each with its own token (the event's
 * and the fragment's number) and splitEvent {fragment, of}. 0 or -1 with
 * op->err. ev stays the caller's.
 */
static int
split_event(mf_op_t *op, cs_state_t *st, const bson_t *ev, cs_pos_t p, int skip)
{
    bson_iter_t it;
    bson_t tok, head;
    uint32_t nf = 0, cap = 16;
    split_field_t *f = mf_calloc(cap, sizeof(*f));
    int *starts = NULL, rc = -1, total = 0;

    if (!bson_iter_init(&it, ev))
        goto err_free_fields;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") == 0)
            continue;
        if (nf == cap) {
            cap *= 2;
            f = mf_realloc(f, cap * sizeof(*f));
        }
        f[nf].size = it.next_off - it.off;
        f[nf].key = bson_iter_key(&it);
        f[nf].it = it;
        nf++;
    }
    if (nf == 0) {
        mf_err_set(&op->err, MF_E_Location7182502, "Cannot split an empty event or an event containing solely '_id' field");
        goto err_free_fields;
    }
    qsort(f, nf, sizeof(*f), split_field_cmp);
    /* Room is left for the postBatchResumeToken, as mongod leaves it. */
    token_of(p, &tok);
    size_t max_frag = SPLIT_MAX_EVENT - tok.len;
    bson_destroy(&tok);
    starts = mf_calloc(nf + 1, sizeof(*starts));
    for (uint32_t i = 0; i < nf;) {
        bson_init(&head);
        fragment_head(p, total + 1, 0, &head);
        size_t size = head.len;
        bson_destroy(&head);
        starts[total++] = (int)i;
        do {
            size += f[i].size;
        } while (++i < nf && size + f[i].size <= max_frag);
        if (size > max_frag) {
            mf_err_set(&op->err, MF_E_Location7182500,
                       "Splitting change event failed: fragment size %zu is greater than maximum allowed fragment "
                       "size %zu", size, max_frag);
            goto err_free_fields;
        }
    }
    starts[total] = (int)nf;
    /* Resumed from the last fragment: nothing of this event is left (mongod keeps the fragment, which its resume check drops). */
    if (skip > total) {
        mf_err_set(&op->err, MF_E_ChangeStreamFatalError,
                   "Attempted to resume from a split event, but the resumed stream produced a different split. "
                   "Ensure that the pipeline used to resume is the same as the original");
        goto err_free_fields;
    }
    for (int g = skip; g < total; g++) {
        bson_t *frag = bson_new(); /* heap-allocated as st->pending's documents are (bson_destroy frees them) */
        fragment_head(p, g + 1, total, frag);
        for (int i = starts[g]; i < starts[g + 1]; i++)
            bson_append_value(frag, f[i].key, -1, bson_iter_value(&f[i].it));
        mf_docvec_push_steal(&st->pending, frag);
    }
    rc = 0;
err_free_fields:
    free(starts);
    free(f);
    return rc;
}

/*
 * Queues one event the user's stages returned (takes ownership of ev): as
 * it is, or split when the pipeline ends with $changeStreamSplitLargeEvent
 * and it is too large. skip: the fragments of it already returned before
 * the stream resumed (from a fragment's token).
 */
static int
queue_event(mf_op_t *op, cs_state_t *st, bson_t *ev, cs_pos_t p, int skip)
{
    int rc = 0;
    if (st->split && ev->len > SPLIT_MAX_EVENT) {
        rc = split_event(op, st, ev, p, skip);
        bson_destroy(ev);
        return rc;
    }
    if (skip > 0) {
        bson_destroy(ev);
        return mf_err_set(&op->err, MF_E_ChangeStreamFatalError,
                          "Attempted to resume from a split event fragment, but the event in the resumed stream was "
                          "not large enough to be split");
    }
    mf_docvec_push_steal(&st->pending, ev);
    return 0;
}

/*
 * Runs the user's stages over ev (takes ownership of ev) and queues what
 * comes out in st->pending: 0 or -1 with err (280 when a stage changed or
 * removed the resume token, or when the stream resumed from an event's
 * token and this later event came first).
 */
static int
emit(mf_op_t *op, cs_state_t *st, bson_t *ev)
{
    bson_iter_t it;
    bson_value_t want;
    cs_pos_t p = {0, 0, 0};
    mf_error_t ignored;
    int rc = 0, skip = 0;

    if (bson_iter_init_find(&it, ev, "_id"))
        (void)token_parse(&it, "_id", &p, &ignored);
    if (st->tok_check) {
        /*
         * As mongod's DocumentSourceChangeStreamEnsureResumeTokenPresent:
         * an event after the resume token came before the token's own
         * event, so the token is not from this stream (another
         * collection's, say) and resuming cannot be trusted.
         */
        char tok[64];
        bson_iter_t d;
        snprintf(tok, sizeof(tok), "?");
        if (bson_iter_recurse(&it, &d) && bson_iter_find(&d, "_data") && BSON_ITER_HOLDS_UTF8(&d))
            snprintf(tok, sizeof(tok), "%s", bson_iter_utf8(&d, NULL));
        bson_destroy(ev);
        return mf_err_set(&op->err, MF_E_ChangeStreamFatalError,
                          "cannot resume stream; the resume token was not found. {_data: \"%s\"}", tok);
    }
    if (st->split_skip > 0 && p.ts == st->start.ts && p.kind == st->start.kind) {
        skip = st->split_skip; /* the event a fragment token named: its fragments up to that one are skipped */
        st->split_skip = 0;
    }
    /*
     * As mongod: an event past the internal BSON limit (a near-16 MB document
     * and its metadata) fails the stream, unless $changeStreamSplitLargeEvent
     * splits it.
     */
    if (!st->split && ev->len > MF_MAX_BSON_INTERNAL_SIZE) {
        rc = mf_err_set(&op->err, MF_E_BSONObjectTooLarge,
                        "BSONObj size: %u (0x%X) is invalid. Size "
                        "must be between 0 and %d(16MB)", ev->len, ev->len, MF_MAX_BSON_INTERNAL_SIZE);
        bson_destroy(ev);
        return rc;
    }
    if (st->pl == NULL)
        return queue_event(op, st, ev, p, skip);
    bson_iter_init_find(&it, ev, "_id");
    bson_value_copy(bson_iter_value(&it), &want);
    mf_agg_limits_t lim = {.allow_disk = false, .sort_bytes = 100 * 1024 * 1024, .group_bytes = 100 * 1024 * 1024,
                           .tmp_dir = st->tmp_dir};
    mf_agg_stream_t *s = mf_agg_stream_new(st->pl, 0, &lim);
    one_src_t src = {ev};
    mf_agg_env_t env;
    memset(&env, 0, sizeof(env));
    env.pull = one_pull;
    env.ctx = &src;
    for (;;) {
        bson_t *out = NULL;
        if (mf_agg_stream_next(s, &env, &out, &op->err) != 0) {
            rc = -1;
            break;
        }
        if (out == NULL)
            break;
        if (!bson_iter_init_find(&it, out, "_id") || !mf_value_equal(bson_iter_value(&it), &want)) {
            bson_destroy(out);
            rc = mf_err_set(&op->err, MF_E_ChangeStreamFatalError,
                            "Encountered an event whose _id field, which contains the resume token, was modified by "
                            "the pipeline. Modifying the _id field of an event makes it impossible to resume the "
                            "stream from that point. Only transformations that retain the unmodified _id field are "
                            "allowed.");
            break;
        }
        if ((rc = queue_event(op, st, out, p, skip)) != 0)
            break;
        skip = 0;
    }
    if (src.doc != NULL)
        bson_destroy(src.doc);
    mf_agg_stream_free(s);
    bson_value_destroy(&want);
    return rc;
}

typedef struct scan_ctx {
    mf_op_t *op;
    cs_state_t *st;
    size_t want; /* stop scanning once this many events are pending */
    int rc;
    const bson_value_t *ui; /* the current op's collection UUID, or NULL (valid during its visit) */
} scan_ctx_t;

/* showExpandedEvents: each event names its collection's UUID, between clusterTime and wallTime (as mongod 8.0). */
static const bson_value_t *
event_uuid(const scan_ctx_t *x)
{
    return x->st->expanded ? x->ui : NULL;
}

/*
 * 47 NoMatchingDocument for an event whose pre- or post-image a stream
 * requires and the oplog does not hold, as mongod's image stages word it.
 */
static int
image_missing(scan_ctx_t *x, bool post, const char *type, const char *db, const char *coll, const bson_iter_t *ts)
{
    uint32_t t, i;
    bson_iter_timestamp(ts, &t, &i);
    return mf_err_set(&x->op->err, MF_E_NoMatchingDocument,
                      "Change stream was configured to require a %s for all update%s events, but the %s was not "
                      "found for event: {operationType: \"%s\", ns: {db: \"%s\", coll: \"%s\"}, clusterTime: "
                      "Timestamp(%u, %u)}",
                      post ? "post-image" : "pre-image", post ? "" : ", delete and replace",
                      post ? "post-image" : "pre-image", type, db, coll, t, i);
}

/*
 * Appends field (fullDocument or fullDocumentBeforeChange): image when the
 * op logged a pre-image (pre != NULL; an update's post-image is its logged
 * new document then), else null; -1 with 47 when the stream requires the
 * image and the oplog does not hold it (ev is left to the caller).
 */
static int
append_image(scan_ctx_t *x, bson_t *ev, bool post, const bson_t *image, const bson_t *pre, bool required,
             const char *type, const char *db, const char *coll, const bson_iter_t *ts)
{
    const char *field = post ? "fullDocument" : "fullDocumentBeforeChange";
    if (pre == NULL && required)
        return image_missing(x, post, type, db, coll, ts);
    if (pre != NULL)
        BSON_APPEND_DOCUMENT(ev, field, image);
    else
        BSON_APPEND_NULL(ev, field);
    return 0;
}

/*
 * The events of one document op (i/u/d), queued through emit. pre is the
 * op's pre-image, logged when its collection had changeStreamPreAndPostImages
 * enabled (repl/oplog.c), or NULL: fullDocumentBeforeChange comes from it,
 * and so does an update's post-image for fullDocument "whenAvailable" /
 * "required" (the logged new document is only reported as one when the
 * collection recorded images then, as mongod derives it from the pre-image).
 */
static int
doc_event(scan_ctx_t *x, const char *op, const char *db, const char *coll, const bson_iter_t *ts, int64_t wall,
          cs_pos_t p, const bson_t *o, const bson_t *o2, const bson_t *diff, const bson_t *pre, const bson_t *opdoc)
{
    cs_state_t *st = x->st;
    bson_t ev, key;
    bson_iter_t it;
    const char *type = op[0] == 'i' ? "insert" : op[0] == 'd' ? "delete" : diff != NULL ? "update" : "replace";
    const bson_t *keysrc = op[0] == 'u' && o2 != NULL ? o2 : o;
    bson_init(&key);
    if (bson_iter_init_find(&it, keysrc, "_id"))
        bson_append_value(&key, "_id", 3, bson_iter_value(&it));
    event_head_full(&ev, false, p, type, ts, txn_back(opdoc), wall, opdoc, event_uuid(x));
    if (op[0] == 'i' || (op[0] == 'u' && diff == NULL)) {
        BSON_APPEND_DOCUMENT(&ev, "fullDocument", o);
    } else if (op[0] == 'u' && (st->full_doc == FD_WHEN_AVAILABLE || st->full_doc == FD_REQUIRED)) {
        if (append_image(x, &ev, true, o, pre, st->full_doc == FD_REQUIRED, type, db, coll, ts) != 0) {
            bson_destroy(&ev);
            bson_destroy(&key);
            return -1;
        }
    } else if (op[0] == 'u' && st->full_doc == FD_UPDATE_LOOKUP) {
        bson_t *cur = NULL;
        if (lookup_current(x->op, db, coll, &key, &cur) != 0) {
            bson_destroy(&ev);
            bson_destroy(&key);
            return -1;
        }
        if (cur != NULL) {
            BSON_APPEND_DOCUMENT(&ev, "fullDocument", cur);
            bson_destroy(cur);
        } else {
            BSON_APPEND_NULL(&ev, "fullDocument");
        }
    }
    append_ns(&ev, "ns", db, coll);
    BSON_APPEND_DOCUMENT(&ev, "documentKey", &key);
    bson_destroy(&key);
    if (diff != NULL) {
        bson_t ud, empty;
        bson_t u, r;
        bson_init(&u);
        bson_init(&r);
        if (bson_iter_init_find(&it, diff, "u") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_destroy(&u);
            sub_doc(&it, &u);
        }
        bson_iter_t ri;
        bool have_r = bson_iter_init_find(&ri, diff, "r") && BSON_ITER_HOLDS_ARRAY(&ri);
        BSON_APPEND_DOCUMENT_BEGIN(&ev, "updateDescription", &ud);
        BSON_APPEND_DOCUMENT(&ud, "updatedFields", &u);
        if (have_r)
            bson_append_value(&ud, "removedFields", -1, bson_iter_value(&ri));
        else
            BSON_APPEND_ARRAY(&ud, "removedFields", &r);
        bson_iter_t ti;
        if (bson_iter_init_find(&ti, diff, "t") && BSON_ITER_HOLDS_ARRAY(&ti)) {
            bson_append_value(&ud, "truncatedArrays", -1, bson_iter_value(&ti));
        } else {
            bson_init(&empty);
            BSON_APPEND_ARRAY(&ud, "truncatedArrays", &empty);
            bson_destroy(&empty);
        }
        if (st->expanded) {
            /*
             * As mongod under showExpandedEvents, always: the paths whose
             * dotted form is ambiguous (a field name with a dot, or a
             * number), each as its parts; the oplog observer lists them.
             */
            bson_iter_t di;
            if (bson_iter_init_find(&di, diff, "d") && BSON_ITER_HOLDS_DOCUMENT(&di)) {
                bson_append_value(&ud, "disambiguatedPaths", -1, bson_iter_value(&di));
            } else {
                bson_init(&empty);
                BSON_APPEND_DOCUMENT(&ud, "disambiguatedPaths", &empty);
                bson_destroy(&empty);
            }
        }
        bson_append_document_end(&ev, &ud);
        bson_destroy(&u);
        bson_destroy(&r);
    }
    if (op[0] != 'i' && st->before != FB_OFF &&
        append_image(x, &ev, false, pre, pre, st->before == FB_REQUIRED, type, db, coll, ts) != 0) {
        bson_destroy(&ev);
        return -1;
    }
    int rc = emit(x->op, st, bson_copy(&ev));
    bson_destroy(&ev);
    return rc;
}

/* Queues the invalidate that follows p's drop or rename of the watched collection. */
static int
invalidate_event(scan_ctx_t *x, const bson_iter_t *ts, int64_t wall, cs_pos_t p)
{
    cs_pos_t ip = {p.ts, K_INVALIDATE};
    if (!after_start(x->st, ip))
        return 0;
    bson_t ev;
    event_head(&ev, ip, "invalidate", ts, wall, NULL);
    x->st->invalidate_queued = true;
    int rc = emit(x->op, x->st, bson_copy(&ev));
    bson_destroy(&ev);
    return rc;
}

/* The events of a command op ("c" on db.$cmd). */
static int
cmd_event(scan_ctx_t *x, const char *db, const bson_iter_t *ts, int64_t wall, cs_pos_t p, const bson_t *o,
          const bson_t *o2, const bson_value_t *ui)
{
    cs_state_t *st = x->st;
    bson_iter_t it;
    if (!bson_iter_init(&it, o) || !bson_iter_next(&it))
        return 0;
    const char *k = bson_iter_key(&it);
    const char *coll = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, NULL) : NULL;
    bson_t ev;
    if (strcmp(k, "dropDatabase") == 0) {
        /* A database or cluster stream; a collection stream ended with its collection's drop, logged before. */
        if (st->scope == CS_COLL || !watches(st, db, "$cmd"))
            return 0;
        if (after_start(st, p)) {
            event_head(&ev, p, "dropDatabase", ts, wall, NULL);
            append_ns(&ev, "ns", db, NULL);
            int rc = emit(x->op, st, bson_copy(&ev));
            bson_destroy(&ev);
            if (rc != 0)
                return -1;
        }
        return st->scope == CS_DB ? invalidate_event(x, ts, wall, p) : 0;
    }
    if (strcmp(k, "drop") == 0 && coll != NULL) {
        if (!watches(st, db, coll))
            return 0;
        if (after_start(st, p)) {
            /*
             * mongod names no collection UUID in a view's drop (its
             * ChangeStreamViewDefinitionEventTransformation); the logged
             * drop does not say whether it dropped a view, so this one does.
             */
            event_head(&ev, p, "drop", ts, wall, event_uuid(x));
            append_ns(&ev, "ns", db, coll);
            if (emit(x->op, st, bson_copy(&ev)) != 0) {
                bson_destroy(&ev);
                return -1;
            }
            bson_destroy(&ev);
        }
        return st->scope == CS_COLL ? invalidate_event(x, ts, wall, p) : 0;
    }
    if (strcmp(k, "renameCollection") == 0 && coll != NULL) {
        char fdb[128], tdb[128];
        const char *fcoll, *tcoll;
        bson_iter_t to;
        if (!split_ns(coll, fdb, sizeof(fdb), &fcoll) || !bson_iter_init_find(&to, o, "to") ||
            !BSON_ITER_HOLDS_UTF8(&to) || !split_ns(bson_iter_utf8(&to, NULL), tdb, sizeof(tdb), &tcoll))
            return 0;
        if (!watches(st, fdb, fcoll))
            return 0;
        if (after_start(st, p)) {
            /* mongod adds the top-level "to" while it reads the op, before the resume token. */
            bson_init(&ev);
            append_ns(&ev, "to", tdb, tcoll);
            event_head_full(&ev, true, p, "rename", ts, 0, wall, NULL, event_uuid(x));
            append_ns(&ev, "ns", fdb, fcoll);
            if (st->expanded) {
                /* showExpandedEvents: the target again, as mongod's operationDescription {to: {db, coll}}. */
                bson_t od;
                BSON_APPEND_DOCUMENT_BEGIN(&ev, "operationDescription", &od);
                append_ns(&od, "to", tdb, tcoll);
                bson_append_document_end(&ev, &od);
            }
            if (emit(x->op, st, bson_copy(&ev)) != 0) {
                bson_destroy(&ev);
                return -1;
            }
            bson_destroy(&ev);
        }
        return st->scope == CS_COLL ? invalidate_event(x, ts, wall, p) : 0;
    }
    if (!st->expanded || coll == NULL || !watches(st, db, coll) || !after_start(st, p))
        return 0;
    /* showExpandedEvents: create, createIndexes, dropIndexes, modify. */
    const char *type = strcmp(k, "create") == 0          ? "create"
                       : strcmp(k, "createIndexes") == 0 ? "createIndexes"
                       : strcmp(k, "dropIndexes") == 0   ? "dropIndexes"
                       : strcmp(k, "collMod") == 0       ? "modify"
                                                         : NULL;
    if (type == NULL)
        return 0;
    bson_iter_t vi;
    bool view = (strcmp(type, "create") == 0 || strcmp(type, "modify") == 0) && bson_iter_init_find(&vi, o, "viewOn");
    /* A view's create or modify names no collection UUID (mongod's ChangeStreamViewDefinitionEventTransformation). */
    event_head(&ev, p, type, ts, wall, view ? NULL : ui);
    append_ns(&ev, "ns", db, coll);
    /*
     * operationDescription: the logged command's detail; an index change as
     * {indexes: [spec]} (a dropIndexes names the index only: the log keeps
     * no spec for it).
     */
    bson_t od, arr, one;
    bool indexes = strcmp(type, "createIndexes") == 0 || strcmp(type, "dropIndexes") == 0;
    BSON_APPEND_DOCUMENT_BEGIN(&ev, "operationDescription", &od);
    if (indexes) {
        BSON_APPEND_ARRAY_BEGIN(&od, "indexes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &one);
        while (bson_iter_next(&it))
            bson_append_value(&one, strcmp(bson_iter_key(&it), "index") == 0 ? "name" : bson_iter_key(&it), -1,
                              bson_iter_value(&it));
        bson_append_document_end(&arr, &one);
        bson_append_array_end(&od, &arr);
    } else {
        bool id_index = strcmp(type, "create") == 0; /* a collection with an _id index (mongod's oplog has its spec) */
        while (bson_iter_next(&it)) {
            const char *f = bson_iter_key(&it);
            if (strcmp(f, "viewOn") == 0 || strcmp(f, "clusteredIndex") == 0 || strcmp(f, "idIndex") == 0)
                id_index = false;
            bson_append_value(&od, f, -1, bson_iter_value(&it));
        }
        if (id_index) {
            bson_t ix, key;
            BSON_APPEND_DOCUMENT_BEGIN(&od, "idIndex", &ix);
            BSON_APPEND_INT32(&ix, "v", 2);
            BSON_APPEND_DOCUMENT_BEGIN(&ix, "key", &key);
            BSON_APPEND_INT32(&key, "_id", 1);
            bson_append_document_end(&ix, &key);
            BSON_APPEND_UTF8(&ix, "name", "_id_");
            bson_append_document_end(&od, &ix);
        }
    }
    bson_append_document_end(&ev, &od);
    bson_iter_t oi;
    if (strcmp(type, "modify") == 0 && !view && o2 != NULL && bson_iter_init_find(&oi, o2, "collectionOptions_old")) {
        /*
         * As mongod: the logged state before the change (o2, written by
         * the oplog observer as OpObserverImpl::onCollMod writes it), with
         * indexOptions only when the collMod changed an index.
         */
        bson_t sb;
        BSON_APPEND_DOCUMENT_BEGIN(&ev, "stateBeforeChange", &sb);
        bson_append_value(&sb, "collectionOptions", -1, bson_iter_value(&oi));
        if (bson_iter_init_find(&oi, o2, "indexOptions_old"))
            bson_append_value(&sb, "indexOptions", -1, bson_iter_value(&oi));
        bson_append_document_end(&ev, &sb);
    }
    int rc = emit(x->op, st, bson_copy(&ev));
    bson_destroy(&ev);
    return rc;
}

/*
 * Whether the op (op, db.coll, its o) gives this stream the event of kind
 * at its timestamp, before any filtering by type: what mongod's
 * DocumentSourceChangeStreamEnsureResumeTokenPresent compares a resume
 * token with (it runs before the filter that hides expanded events from a
 * stream without showExpandedEvents, so their tokens are found too).
 */
static bool
op_in_stream(const cs_state_t *st, const char *op, const char *db, const char *coll, const bson_t *o, int kind)
{
    bson_iter_t it;
    if (op[0] != 'c')
        return kind == K_EVENT && (op[0] == 'i' || op[0] == 'u' || op[0] == 'd') && op[1] == '\0' &&
               watches(st, db, coll);
    if (strcmp(coll, "$cmd") != 0 || !bson_iter_init(&it, o) || !bson_iter_next(&it))
        return false;
    const char *k = bson_iter_key(&it);
    if (strcmp(k, "dropDatabase") == 0)
        return st->scope != CS_COLL && watches(st, db, "$cmd") && (kind == K_EVENT || st->scope == CS_DB);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return false;
    const char *target = bson_iter_utf8(&it, NULL);
    if (strcmp(k, "renameCollection") == 0) {
        char fdb[128];
        const char *fcoll;
        return split_ns(target, fdb, sizeof(fdb), &fcoll) && watches(st, fdb, fcoll) &&
               (kind == K_EVENT || st->scope == CS_COLL);
    }
    if (strcmp(k, "drop") == 0)
        return watches(st, db, target) && (kind == K_EVENT || st->scope == CS_COLL);
    if (strcmp(k, "create") == 0 || strcmp(k, "createIndexes") == 0 || strcmp(k, "dropIndexes") == 0 ||
        strcmp(k, "collMod") == 0)
        return kind == K_EVENT && watches(st, db, target);
    return false;
}

/* One local.oplog.rs document: its events, if the stream watches them. */
static int
scan_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *d)
{
    scan_ctx_t *x = arg;
    cs_state_t *st = x->st;
    bson_iter_t it, ts_it;
    const char *op = NULL, *ns = NULL;
    bson_t o, o2, diff, pre;
    bool has_o = false, has_o2 = false, has_diff = false, has_pre = false;
    bson_value_t ui_v; /* its binary data points into doc, valid during the call */
    const bson_value_t *ui = NULL;
    int64_t wall = 0;
    (void)d;
    st->after_rid = rid;
    if (!bson_iter_init_find(&ts_it, doc, "ts") || !BSON_ITER_HOLDS_TIMESTAMP(&ts_it))
        return 0;
    cs_pos_t p = {ts_of(&ts_it), K_EVENT};
    cs_pos_t hwm = {p.ts, K_HWM};
    if (pos_cmp(hwm, st->scanned) > 0)
        st->scanned = hwm;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "op") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            op = bson_iter_utf8(&it, NULL);
        else if (strcmp(k, "ns") == 0 && BSON_ITER_HOLDS_UTF8(&it))
            ns = bson_iter_utf8(&it, NULL);
        else if (strcmp(k, "o") == 0)
            has_o = sub_doc(&it, &o);
        else if (strcmp(k, "o2") == 0)
            has_o2 = sub_doc(&it, &o2);
        else if (strcmp(k, "diff") == 0)
            has_diff = sub_doc(&it, &diff);
        else if (strcmp(k, "pre") == 0)
            has_pre = sub_doc(&it, &pre);
        else if (strcmp(k, "wall") == 0 && BSON_ITER_HOLDS_DATE_TIME(&it))
            wall = bson_iter_date_time(&it);
        else if (strcmp(k, "ui") == 0 && BSON_ITER_HOLDS_BINARY(&it)) {
            ui_v = *bson_iter_value(&it);
            ui = &ui_v;
        }
    }
    if (op == NULL || ns == NULL || !has_o)
        return 0;
    char db[128];
    const char *coll;
    if (!split_ns(ns, db, sizeof(db), &coll))
        return 0;
    int rc = 0;
    x->ui = ui;
    if (st->tok_check && p.ts == st->tok.ts && op_in_stream(st, op, db, coll, &o, st->tok.kind))
        st->tok_check = false; /* the resumed-from event is there: it is not returned again (start is its position) */
    if (op[0] == 'c' && strcmp(coll, "$cmd") == 0) {
        rc = cmd_event(x, db, &ts_it, wall, p, &o, has_o2 ? &o2 : NULL, ui);
    } else if ((op[0] == 'i' || op[0] == 'u' || op[0] == 'd') && op[1] == '\0' && watches(st, db, coll) &&
               after_start(st, p)) {
        rc = doc_event(x, op, db, coll, &ts_it, wall, p, &o, has_o2 ? &o2 : NULL,
                       op[0] == 'u' && has_diff ? &diff : NULL, has_pre ? &pre : NULL, doc);
    }
    if (rc != 0) {
        x->rc = -1;
        return -1;
    }
    /* Past an invalidate nothing more is read; past enough events the next batch goes on from here. */
    return st->invalidate_queued || st->pending.len - st->head >= x->want ? 1 : 0;
}

/*
 * The cursor's ext_fill: returns queued events first, then scans the
 * oplog after the last record read for more. The batch's
 * postBatchResumeToken is the last returned event's token while events
 * remain queued, else the high-water mark of what was scanned.
 */
static int
cs_fill(void *opv, mf_cursor_t *cur, int64_t max, bson_t *arr, bool *exhausted)
{
    mf_op_t *op = opv;
    cs_state_t *st = cur->ext;
    int64_t count = 0;
    cs_pos_t last = st->start;
    bool have_last = false;

    *exhausted = false;
    if (max <= 0)
        max = 0;
    if (st->pending.len - st->head < (size_t)max && !st->invalidate_queued) {
        mf_coll_t *c = mf_catalog_coll_find(op->eng->cat, "local", "oplog.rs");
        if (c != NULL && st->after_rid > 0) {
            /*
             * The oplog is capped: if the last record this stream read is
             * gone, the ones after it may have gone unread (mongod: the
             * resume point is no longer in the oplog).
             */
            bson_t rec;
            int fr = mf_coll_fetch(op->sess, c, st->after_rid, &rec, &op->err);
            if (fr == 0)
                bson_destroy(&rec);
            else if (fr == MF_NOTFOUND)
                return mf_err_set(&op->err, MF_E_ChangeStreamHistoryLost,
                                  "Resume of change stream was not possible, as the resume point may no longer be in "
                                  "the oplog: the oplog rolled over past this stream's position");
            else
                return fr == MF_CONFLICT ? mf_err_set(&op->err, MF_E_WriteConflict, "write conflict reading %s", c->ns)
                                         : -1;
        }
        if (c != NULL) {
            /* At most SCAN_EVENTS events are queued per scan (a getMore without batchSize asks for all). */
            scan_ctx_t x = {op, st, max < SCAN_EVENTS ? (size_t)max : SCAN_EVENTS, 0};
            int rc = mf_exec_scan(op->sess, c, NULL, NULL, st->after_rid, scan_visit, &x, NULL, &op->err);
            if (rc != 0 || x.rc != 0)
                return -1;
        }
    }
    while (st->head < st->pending.len && count < max) {
        bson_t *ev = st->pending.docs[st->head];
        int r = mf_crud_batch_add(arr, &count, ev, &op->err);
        if (r < 0)
            return -1;
        if (r > 0)
            break; /* no room: it starts the next batch */
        bson_iter_t it;
        mf_error_t ignored;
        cs_pos_t p;
        if (bson_iter_init_find(&it, ev, "_id") && token_parse(&it, "_id", &p, &ignored) == 0) {
            last = p;
            have_last = true;
        }
        bson_destroy(ev);
        st->pending.docs[st->head++] = NULL;
    }
    if (st->head == st->pending.len) {
        st->pending.len = 0;
        st->head = 0;
    }
    bool drained = st->pending.len == 0;
    if (drained && st->invalidate_queued) {
        *exhausted = true; /* the invalidate was returned (or filtered out): the stream is over */
    }
    cs_pos_t pbrt = st->start;
    if (have_last && pos_cmp(last, pbrt) > 0)
        pbrt = last;
    /* As mongod: a batch whose last event is the newest op scanned ends on that event's own token. */
    if (drained && !st->invalidate_queued && pos_cmp(st->scanned, pbrt) > 0 && !(have_last && last.ts == st->scanned.ts))
        pbrt = st->scanned;
    if (drained && !st->invalidate_queued && pos_cmp(pbrt, st->start) > 0)
        st->start = pbrt; /* everything up to here was seen: a later scan never returns it again */
    bson_t tok;
    token_of(pbrt, &tok);
    if (cur->resume_token != NULL)
        bson_destroy(cur->resume_token);
    cur->resume_token = bson_copy(&tok);
    bson_destroy(&tok);
    return 0;
}

/* ---------- opening ---------- */

/* Stages that keep each event to at most one (mongod's change stream whitelist). */
static bool
stage_allowed(const char *name)
{
    static const char *const ok[] = {"$match", "$project", "$addFields", "$set", "$unset", "$replaceRoot",
                                     "$replaceWith", "$redact", NULL};
    for (int i = 0; ok[i] != NULL; i++) {
        if (strcmp(name, ok[i]) == 0)
            return true;
    }
    return false;
}

/* One of an IDL enum's names (modes, NULL-ended) as its index into *out: 0, or -1 with op->err (14, 2). */
static int
parse_mode(mf_op_t *op, const bson_iter_t *it, const char *field, const char *const *modes, int *out)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field '$changeStream.%s' is the wrong type '%s', expected type 'string'", field,
                          mf_type_name(bson_iter_type(it)));
    const char *v = bson_iter_utf8(it, NULL);
    for (int i = 0; modes[i] != NULL; i++) {
        if (strcmp(v, modes[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return mf_err_set(&op->err, MF_E_BadValue, "Enumeration value '%s' for field '$changeStream.%s' is not a valid value.",
                      v, field);
}

/* Parses the $changeStream options into st (with the start position and whether it must be checked). */
static int
parse_options(mf_op_t *op, const bson_iter_t *spec, cs_state_t *st, bool *resuming, uint64_t *lost_ts,
              bool *have_start)
{
    bson_iter_t it;
    int nresume = 0;
    bool all_cluster = false;
    *resuming = false;
    *have_start = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(spec))
        return mf_err_set(&op->err, MF_E_Location50808, "$changeStream stage expects a document as argument");
    bson_iter_recurse(spec, &it);
    bson_iter_t ra = it, sa = it;
    if (bson_iter_find(&ra, "resumeAfter") && bson_iter_find(&sa, "startAfter"))
        return mf_err_set(&op->err, MF_E_Location50865,
                          "Do not specify both 'resumeAfter' and 'startAfter' in a $changeStream stage");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "fullDocument") == 0) {
            static const char *const modes[] = {"default", "updateLookup", "whenAvailable", "required", NULL};
            if (parse_mode(op, &it, k, modes, &st->full_doc) != 0) /* in FD_* order */
                return -1;
        } else if (strcmp(k, "fullDocumentBeforeChange") == 0) {
            static const char *const modes[] = {"off", "whenAvailable", "required", NULL};
            if (parse_mode(op, &it, k, modes, &st->before) != 0) /* in FB_* order */
                return -1;
        } else if (strcmp(k, "resumeAfter") == 0 || strcmp(k, "startAfter") == 0) {
            cs_pos_t p;
            if (token_parse(&it, k, &p, &op->err) != 0)
                return -1;
            if (k[0] == 'r' && p.kind == K_INVALIDATE)
                return mf_err_set(&op->err, MF_E_InvalidResumeToken,
                                  "Attempting to resume a change stream using 'resumeAfter' is not allowed from an "
                                  "invalidate notification.");
            st->start = p;
            *lost_ts = p.ts;
            *resuming = true;
            nresume++;
            /* An event's token must name an event of this stream (a high-water mark need not). */
            st->tok_check = p.kind != K_HWM;
            st->tok = p;
            st->split_skip = p.frag;
        } else if (strcmp(k, "startAtOperationTime") == 0) {
            if (!BSON_ITER_HOLDS_TIMESTAMP(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field '$changeStream.startAtOperationTime' is the wrong type '%s', expected "
                                  "type 'timestamp'",
                                  mf_type_name(bson_iter_type(&it)));
            uint64_t t = ts_of(&it);
            st->start.ts = t == 0 ? 0 : t - 1;
            st->start.kind = t == 0 ? 0 : K_HWM;
            *lost_ts = t;
            *resuming = true;
            nresume++;
        } else if (strcmp(k, "allChangesForCluster") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field '$changeStream.allChangesForCluster' is the wrong type '%s', expected "
                                  "type 'bool'",
                                  mf_type_name(bson_iter_type(&it)));
            all_cluster = bson_iter_bool(&it);
        } else if (strcmp(k, "showExpandedEvents") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return mf_err_set(&op->err, MF_E_TypeMismatch,
                                  "BSON field '$changeStream.showExpandedEvents' is the wrong type '%s', expected "
                                  "type 'bool'",
                                  mf_type_name(bson_iter_type(&it)));
            st->expanded = bson_iter_bool(&it);
        } else if (strcmp(k, "allowToRunOnConfigDB") == 0 || strcmp(k, "allowToRunOnSystemNS") == 0 ||
                   strcmp(k, "showSystemEvents") == 0 || strcmp(k, "showRawUpdateDescription") == 0) {
            /* accepted and ignored (internal / diagnostic options) */
        } else {
            return mf_err_set(&op->err, MF_E_Location40415, "BSON field '$changeStream.%s' is an unknown field.", k);
        }
    }
    if (nresume > 1)
        return mf_err_set(&op->err, MF_E_Location40674, "Only one type of resume option is allowed, but multiple were found");
    *have_start = nresume > 0;
    if (all_cluster) {
        if (strcmp(op->db, "admin") != 0 || st->scope != CS_DB)
            return mf_err_set(&op->err, MF_E_InvalidNamespace,
                              "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' "
                              "database, and with no collection name; found %s.%s",
                              op->db, st->coll != NULL ? st->coll : "$cmd.aggregate");
        st->scope = CS_CLUSTER;
    }
    return 0;
}

/*
 * The command's readConcern: only "majority" may be named, as mongod's
 * $changeStream declares (onlySingleReadConcernSupported; one without a
 * level, such as a causally consistent session's {afterClusterTime}, is
 * the implicit default and passes). 0 or -1 with 72 InvalidOptions.
 */
static int
check_read_concern(mf_op_t *op)
{
    bson_iter_t rc, level;
    if (!mf_op_find(op, "readConcern", &rc) || !BSON_ITER_HOLDS_DOCUMENT(&rc) || !bson_iter_recurse(&rc, &level) ||
        !bson_iter_find(&level, "level") || !BSON_ITER_HOLDS_UTF8(&level))
        return 0;
    const char *l = bson_iter_utf8(&level, NULL);
    if (strcmp(l, "majority") == 0)
        return 0;
    return mf_err_set(&op->err, MF_E_InvalidOptions,
                      "Aggregation stage $changeStream cannot run with a readConcern other than 'majority'. Current "
                      "readConcern: %s", l);
}

/* The namespaces mongod refuses to watch (73). */
static int
check_namespace(mf_op_t *op, const cs_state_t *st)
{
    const char *db = op->db;
    bool internal_db = mf_catalog_db_is_internal(db);
    if ((st->scope != CS_CLUSTER && internal_db) || (st->coll != NULL && strncmp(st->coll, "system.", 7) == 0))
        return mf_err_set(&op->err, MF_E_InvalidNamespace, "$changeStream may not be opened on the internal %s%s%s %s",
                          db, st->coll ? "." : "", st->coll ? st->coll : "", st->coll ? "collection" : "database");
    return 0;
}

int
mf_cmd_changestream_open(mf_op_t *op, const char *coll, const bson_value_t *pipeline, int64_t batch)
{
    op->change_stream = true; /* its resumable errors are labelled so (mf_failcommand_labels) */
    bson_t arr, rest, first_batch;
    bson_iter_t si, first;
    cs_state_t *st = mf_calloc(1, sizeof(*st));
    bool resuming, have_start, exhausted = false;
    uint64_t lost_ts = 0;
    int k = 0, rc = -1;
    char key[16];
    mf_cursor_t *cur = NULL;

    mf_docvec_init(&st->pending);
    st->scope = coll != NULL ? CS_COLL : CS_DB;
    st->db = mf_strdup(op->db);
    st->coll = coll != NULL ? mf_strdup(coll) : NULL;
    st->tmp_dir = op->eng->tmp_dir;
    bson_init(&rest);
    bson_init(&first_batch);
    bson_init_static(&arr, pipeline->value.v_doc.data, pipeline->value.v_doc.data_len);
    bson_iter_init(&si, &arr);
    bson_iter_next(&si);
    bson_iter_recurse(&si, &first);
    bson_iter_next(&first);
    if (check_read_concern(op) != 0)
        goto err_free_state;
    if (parse_options(op, &first, st, &resuming, &lost_ts, &have_start) != 0 || check_namespace(op, st) != 0)
        goto err_free_state;
    while (bson_iter_next(&si)) {
        bson_iter_t sf;
        if (!BSON_ITER_HOLDS_DOCUMENT(&si) || !bson_iter_recurse(&si, &sf) || !bson_iter_next(&sf)) {
            mf_err_set(&op->err, MF_E_Location40323, "A pipeline stage specification object must contain exactly one field.");
            goto err_free_state;
        }
        const char *name = bson_iter_key(&sf);
        if (strcmp(name, "$changeStream") == 0) {
            mf_err_set(&op->err, MF_E_Location40602, "$changeStream is only valid as the first stage in a pipeline");
            goto err_free_state;
        }
        if (strcmp(name, "$changeStreamSplitLargeEvent") == 0) {
            /* MongoDB 7.0+: its spec is {} and it ends the pipeline (document_source_change_stream_split_large_event.cpp). */
            bson_iter_t spec, after = si;
            if (!BSON_ITER_HOLDS_DOCUMENT(&sf) || !bson_iter_recurse(&sf, &spec) || bson_iter_next(&spec)) {
                mf_err_set(&op->err, MF_E_Location7182800, "$changeStreamSplitLargeEvent spec should be an empty object");
                goto err_free_state;
            }
            if (bson_iter_next(&after)) {
                mf_err_set(&op->err, MF_E_Location7182802, "$changeStreamSplitLargeEvent must be the last stage in the pipeline");
                goto err_free_state;
            }
            st->split = true;
            continue;
        }
        if (!stage_allowed(name)) {
            mf_err_set(&op->err, MF_E_IllegalOperation, "%s is not permitted in a $changeStream pipeline", name);
            goto err_free_state;
        }
        snprintf(key, sizeof(key), "%d", k++);
        bson_append_value(&rest, key, -1, bson_iter_value(&si));
    }
    if (st->split_skip > 0 && !st->split) {
        mf_err_set(&op->err, MF_E_ChangeStreamFatalError,
                   "To resume from a split event, the $changeStream pipeline must include a "
                   "$changeStreamSplitLargeEvent stage");
        goto err_free_state;
    }
    if (k > 0) {
        bson_value_t rv = {.value_type = BSON_TYPE_ARRAY};
        rv.value.v_doc.data = (uint8_t *)bson_get_data(&rest);
        rv.value.v_doc.data_len = rest.len;
        if ((st->pl = mf_pipeline_new(&rv, &op->err)) == NULL) {
            mf_crud_optimize_context(&op->err);
            goto err_free_state;
        }
    }
    mf_catalog_rdlock(op->eng->cat);
    if (!have_start) {
        /* A new stream starts after what this member applied (the reply's operationTime is at least that). */
        uint32_t secs = 0, inc = 0;
        op->eng->repl->op_time(op->eng->repl_arg, &secs, &inc);
        st->start.ts = (uint64_t)secs << 32 | inc;
        st->start.kind = K_HWM;
    }
    st->scanned = st->start;
    mf_coll_t *vc = coll != NULL ? mf_catalog_coll_find(op->eng->cat, op->db, coll) : NULL;
    if (vc != NULL && vc->is_view)
        rc = mf_err_set(&op->err, MF_E_CommandNotSupportedOnView, "Namespace %s.%s is a view, not a collection", op->db,
                        coll);
    else
        rc = locate_start(op, st, resuming, lost_ts);
    mf_catalog_unlock(op->eng->cat);
    if (rc != 0)
        goto err_free_state;
    rc = -1;
    cur = mf_cursor_new(MF_CURSOR_EXT, op->db, coll != NULL ? coll : "$cmd.aggregate");
    cur->ext = st;
    cur->ext_free = cs_free;
    cur->ext_fill = cs_fill;
    cur->await_data = true;
    st = NULL;
    /* The first batch holds what is there already (resuming), never waits. */
    mf_catalog_rdlock(op->eng->cat);
    int fr = cs_fill(op, cur, batch, &first_batch, &exhausted);
    mf_catalog_unlock(op->eng->cat);
    if (fr != 0)
        goto err_free_cursor;
    int64_t id = 0;
    if (!exhausted) {
        id = mf_cmd_cursor_register(op, cur);
        if (id < 0)
            goto err_free_cursor;
    }
    mf_crud_append_cursor_reply_token(op, "firstBatch", &first_batch, id, cur->coll, cur->resume_token);
    if (exhausted)
        mf_cursor_free(cur);
    else
        mf_cursors_checkin(op->eng->cursors, cur);
    cur = NULL;
    rc = 0;
err_free_cursor:
    if (cur != NULL)
        mf_cursor_free(cur);
err_free_state:
    cs_free(st);
    bson_destroy(&rest);
    bson_destroy(&first_batch);
    return rc;
}
