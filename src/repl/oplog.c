/*
 * oplog.c: the oplog observer and applier (see oplog.h).
 *
 * Buffering. Document writes are reported on the writing thread inside its
 * transaction, and that transaction's end on the same thread
 * (catalog/observer.h). Each thread keeps, in a thread-local list, one
 * buffer per oplog it has reported to in its open transaction (normally
 * one: a thread runs one transaction at a time, on one engine; the list
 * only keeps two oplogs on one engine apart). on_txn_end hands the buffer
 * to the sink if the transaction committed and frees it either way, so
 * nothing outlives a transaction and nothing is shared between threads.
 * This thread-local is the only state outside mf_oplog_t, keyed by it.
 */
#include "repl/oplog.h"

#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/limits.h"
#include "doc/value.h"

struct mf_oplog {
    mf_oplog_sink_fn sink;
    mf_oplog_prepare_fn prepare; /* NULL: document writes go to sink after the commit */
    void *arg;
};

/* One open transaction's ops for one oplog. */
typedef struct txn_buf {
    const mf_oplog_t *owner;
    bson_t *ops; /* the array being built (heap: bson_t wants more alignment than calloc gives) */
    bson_t *pre; /* the first update's or delete's old document, when tls_keep_pre; else NULL */
    uint32_t n;
    struct txn_buf *next;
} txn_buf_t;

static _Thread_local txn_buf_t *tls_bufs;
static _Thread_local bool tls_keep_pre; /* mf_oplog_keep_preimage */

/* ---------- gathering ---------- */

/* Whether writes to ns are replicated: not `local`, not system.profile (as in mongod). */
static bool
logged_ns(const char *ns)
{
    if (strncmp(ns, "local.", 6) == 0)
        return false;
    const char *dot = strchr(ns, '.');
    return dot == NULL || strcmp(dot + 1, "system.profile") != 0;
}

static txn_buf_t *
buf_for(const mf_oplog_t *log)
{
    for (txn_buf_t *b = tls_bufs; b != NULL; b = b->next) {
        if (b->owner == log)
            return b;
    }
    txn_buf_t *b = mf_calloc(1, sizeof(*b));
    b->owner = log;
    b->ops = bson_new();
    b->next = tls_bufs;
    tls_bufs = b;
    return b;
}

/*
 * The largest op a pre-image may join: the op goes whole into one
 * local.oplog.rs document, which must stay a valid BSON document (16 MB,
 * less room for the document's own fields). A bigger one is logged without
 * its pre-image, which a change stream then reports as not available.
 */
#define PRE_IMAGE_ROOM (16 * 1024 * 1024 - 16 * 1024)

/* Appends {op, ns, ui, o, o2, diff, pre} (o2, diff and pre may be NULL) to arr under key. */
static void
append_op(bson_t *arr, const char *key, const char *op, const char *ns, const uint8_t *uuid, const bson_t *o,
          const bson_t *o2, const bson_t *diff, const bson_t *pre)
{
    bson_t d;
    bson_append_document_begin(arr, key, -1, &d);
    BSON_APPEND_UTF8(&d, "op", op);
    BSON_APPEND_UTF8(&d, "ns", ns);
    if (uuid != NULL)
        BSON_APPEND_BINARY(&d, "ui", BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_DOCUMENT(&d, "o", o);
    if (o2 != NULL)
        BSON_APPEND_DOCUMENT(&d, "o2", o2);
    if (diff != NULL)
        BSON_APPEND_DOCUMENT(&d, "diff", diff);
    if (pre != NULL && (size_t)d.len + pre->len < PRE_IMAGE_ROOM)
        BSON_APPEND_DOCUMENT(&d, "pre", pre);
    /* A multi-document transaction's ops name it (lsid, txnNumber), as mongod's applyOps entry does. */
    (void)mf_cmd_txn_identity(&d);
    bson_append_document_end(arr, &d);
}

/* Buffers one op; pre (the old document of an update or delete) is kept when c records pre-images. */
static void
buffer_op(const mf_oplog_t *log, const char *op, mf_coll_t *c, const bson_t *o, const bson_t *o2, const bson_t *diff,
          const bson_t *pre)
{
    if (!logged_ns(c->ns))
        return;
    txn_buf_t *b = buf_for(log);
    char idx[16];
    const char *key;
    bson_uint32_to_string(b->n++, &key, idx, sizeof(idx));
    append_op(b->ops, key, op, c->ns, c->uuid, o, o2, diff, c->pre_images ? pre : NULL);
}

/* {_id: doc._id} into out (initialised here); an _id-less document gives {}. */
static void
id_doc(const bson_t *doc, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    if (bson_iter_init_find(&it, doc, "_id"))
        bson_append_value(out, "_id", 3, bson_iter_value(&it));
}

static void
on_insert(void *arg, mf_coll_t *c, const bson_t *doc)
{
    buffer_op(arg, "i", c, doc, NULL, NULL, NULL);
}

/* Keeps olddoc as the buffer's pre-image when this thread asked for one and it is the first. */
static void
keep_pre(const mf_oplog_t *log, mf_coll_t *c, const bson_t *olddoc)
{
    if (!tls_keep_pre || !logged_ns(c->ns))
        return;
    txn_buf_t *b = buf_for(log);
    if (b->pre == NULL)
        b->pre = bson_copy(olddoc);
}

void
mf_oplog_keep_preimage(bool on)
{
    tls_keep_pre = on;
}

/* Whether a and b are the same value of the same type (1 and 1.0 differ: a change stream reports the new type). */
static bool
same_value(const bson_iter_t *a, const bson_iter_t *b)
{
    if (bson_iter_type(a) != bson_iter_type(b))
        return false;
    const bson_value_t *va = bson_iter_value((bson_iter_t *)a), *vb = bson_iter_value((bson_iter_t *)b);
    switch (va->value_type) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return va->value.v_doc.data_len == vb->value.v_doc.data_len &&
               memcmp(va->value.v_doc.data, vb->value.v_doc.data, va->value.v_doc.data_len) == 0;
    case BSON_TYPE_UTF8:
        /* Bytes, not the writer's collation: "a" to "A" is a change. */
        return va->value.v_utf8.len == vb->value.v_utf8.len &&
               memcmp(va->value.v_utf8.str, vb->value.v_utf8.str, va->value.v_utf8.len) == 0;
    default:
        return mf_value_equal(va, vb);
    }
}

/*
 * An update's description, built from its two images: u the changed fields
 * by dotted path with their new values, r the removed paths, t the arrays
 * that became shorter ({field, newSize}), nr and nt the counts of r and t;
 * dis the paths a dotted string does not say unambiguously, each as the
 * list of its parts (a change stream's updateDescription.disambiguatedPaths).
 */
typedef struct diff_out {
    bson_t u, r, t, dis;
    uint32_t nr, nt;
} diff_out_t;

/*
 * One part of the path being compared, linked to its parent: a field name,
 * or an array index (name NULL). ambiguous: the path up to here cannot be
 * read back from its dotted form, by mongod's rule
 * (change_stream_document_diff_parser.cpp): a field name that is a number
 * (below the top level; an array index is not ambiguous by itself) or holds
 * a dot makes it so, and everything under it.
 */
typedef struct path_part {
    const struct path_part *up;
    const char *name;
    uint32_t index;
    int depth;
    bool ambiguous;
} path_part_t;

/* mongod's FieldRef::isNumericPathComponentStrict: digits only, no leading zero but "0" itself. */
static bool
numeric_strict(const char *s)
{
    if (s[0] == '\0' || (s[0] == '0' && s[1] != '\0'))
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* The part for field name (an array element when name is NULL: its index i) under up (NULL: the top). */
static path_part_t
path_child(const path_part_t *up, const char *name, uint32_t i)
{
    path_part_t p = {up, name, i, up != NULL ? up->depth + 1 : 1, up != NULL && up->ambiguous};
    if (!p.ambiguous && name != NULL)
        p.ambiguous = (p.depth > 1 && numeric_strict(name)) || strchr(name, '.') != NULL;
    return p;
}

static void
append_parts(bson_t *arr, const path_part_t *p, uint32_t *n)
{
    char idx[16];
    const char *key;
    if (p == NULL)
        return;
    append_parts(arr, p->up, n);
    bson_uint32_to_string((*n)++, &key, idx, sizeof(idx));
    if (p->name != NULL)
        BSON_APPEND_UTF8(arr, key, p->name);
    else
        BSON_APPEND_INT32(arr, key, (int32_t)p->index);
}

/* Whether d->dis holds the key path itself (a dotted string is one key here, not a path to descend). */
static bool
dis_has(const bson_t *dis, const char *path)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, dis, path);
}

/* Records path (the dotted form of p) in d->dis when it is ambiguous. */
static void
diff_disambiguate(diff_out_t *d, const char *path, const path_part_t *p)
{
    bson_t arr;
    uint32_t n = 0;
    if (p == NULL || !p->ambiguous || dis_has(&d->dis, path))
        return;
    bson_append_array_begin(&d->dis, path, -1, &arr);
    append_parts(&arr, p, &n);
    bson_append_array_end(&d->dis, &arr);
}

static void
diff_init(diff_out_t *d)
{
    bson_init(&d->u);
    bson_init(&d->r);
    bson_init(&d->t);
    bson_init(&d->dis);
    d->nr = d->nt = 0;
}

static void
diff_destroy(diff_out_t *d)
{
    bson_destroy(&d->u);
    bson_destroy(&d->r);
    bson_destroy(&d->t);
    bson_destroy(&d->dis);
}

static void
diff_removed(diff_out_t *d, const char *path)
{
    char idx[16];
    const char *key;
    bson_uint32_to_string(d->nr++, &key, idx, sizeof(idx));
    BSON_APPEND_UTF8(&d->r, key, path);
}

/* Records the new value at path (p its parts). */
static void
diff_updated(diff_out_t *d, const char *path, const path_part_t *p, const bson_value_t *v)
{
    bson_append_value(&d->u, path, -1, v);
    diff_disambiguate(d, path, p);
}

static bool
sub_value(const bson_iter_t *it, bson_t *out)
{
    const uint8_t *p;
    uint32_t l;
    if (BSON_ITER_HOLDS_DOCUMENT(it))
        bson_iter_document(it, &l, &p);
    else if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &l, &p);
    else
        return false;
    return bson_init_static(out, p, l);
}

static void diff_docs(const bson_t *olddoc, const bson_t *newdoc, const char *prefix, const path_part_t *pp,
                      diff_out_t *d);
static void diff_arrays(const bson_t *olda, const bson_t *newa, const char *path, const path_part_t *pp,
                        diff_out_t *d);

/* The description of a field at path (pp its parts) that changed from *o to *n (not the same value). */
static void
diff_value(const bson_iter_t *o, const bson_iter_t *n, const char *path, const path_part_t *pp, diff_out_t *d)
{
    bson_t od, nd;
    if (BSON_ITER_HOLDS_DOCUMENT(n) && BSON_ITER_HOLDS_DOCUMENT(o) && sub_value(o, &od) && sub_value(n, &nd))
        diff_docs(&od, &nd, path, pp, d);
    else if (BSON_ITER_HOLDS_ARRAY(n) && BSON_ITER_HOLDS_ARRAY(o) && sub_value(o, &od) && sub_value(n, &nd))
        diff_arrays(&od, &nd, path, pp, d);
    else
        diff_updated(d, path, pp, bson_iter_value((bson_iter_t *)n));
}

/*
 * Appends to d the fields of newdoc that differ from olddoc's (dotted paths
 * under prefix; embedded documents and arrays present in both are compared
 * inside, other values whole) and the paths olddoc had and newdoc lacks.
 */
static void
diff_docs(const bson_t *olddoc, const bson_t *newdoc, const char *prefix, const path_part_t *pp, diff_out_t *d)
{
    bson_iter_t it, ot;
    char path[1024];
    if (!bson_iter_init(&it, newdoc))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        path_part_t part = path_child(pp, k, 0);
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", k);
        if (bson_iter_init_find(&ot, olddoc, k)) {
            if (!same_value(&it, &ot))
                diff_value(&ot, &it, path, &part, d);
            continue;
        }
        diff_updated(d, path, &part, bson_iter_value(&it));
    }
    if (!bson_iter_init(&ot, olddoc))
        return;
    while (bson_iter_next(&ot)) {
        const char *k = bson_iter_key(&ot);
        if (bson_iter_init_find(&it, newdoc, k))
            continue;
        path_part_t part = path_child(pp, k, 0);
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", k);
        diff_removed(d, path);
        diff_disambiguate(d, path, &part);
    }
}

/*
 * About what e would take in mongod's own diff format, which names an
 * array's elements by index rather than by full path: each changed value
 * with a few bytes of field name, 4 bytes a removal, 8 a truncation.
 */
static uint32_t
diff_cost(const diff_out_t *e)
{
    bson_iter_t it;
    uint32_t cost = e->u.len - 5 + 4 * e->nr + 8 * e->nt;
    if (bson_iter_init(&it, &e->u))
        while (bson_iter_next(&it))
            cost = cost + 4 - (bson_iter_key_len(&it) + 2); /* its key, NUL and type byte, for 4 */
    return cost;
}

/*
 * An array present in both images, as mongod's oplog diffs describe one
 * (doc_diff.cpp, which change streams read): elements that changed by
 * index ("a.1", or inside a changed embedded document "a.1.b"), elements
 * appended by index (a $push: "a.2"), and a shorter array as
 * truncatedArrays {field, newSize} (a pipeline update or $pop from the
 * end). When that description would not be smaller than the new array (a
 * $pull from the middle, a $set of the whole array), the array is reported
 * whole, as mongod logs a modifier that rewrote it.
 */
static void
diff_arrays(const bson_t *olda, const bson_t *newa, const char *path, const path_part_t *pp, diff_out_t *d)
{
    bson_iter_t oi, ni;
    char ipath[1024];
    diff_out_t e;
    uint32_t i = 0, m = bson_count_keys(olda), n = bson_count_keys(newa);
    if (!bson_iter_init(&oi, olda) || !bson_iter_init(&ni, newa))
        return;
    diff_init(&e);
    for (; i < n && bson_iter_next(&ni); i++) {
        path_part_t part = path_child(pp, NULL, i);
        snprintf(ipath, sizeof(ipath), "%s.%u", path, i);
        if (i < m && bson_iter_next(&oi)) {
            if (!same_value(&oi, &ni))
                diff_value(&oi, &ni, ipath, &part, &e);
        } else {
            diff_updated(&e, ipath, &part, bson_iter_value(&ni));
        }
    }
    if (n < m) {
        char idx[16];
        const char *key;
        bson_t tr;
        bson_uint32_to_string(e.nt++, &key, idx, sizeof(idx));
        bson_append_document_begin(&e.t, key, -1, &tr);
        BSON_APPEND_UTF8(&tr, "field", path);
        BSON_APPEND_INT32(&tr, "newSize", (int32_t)n);
        bson_append_document_end(&e.t, &tr);
        diff_disambiguate(&e, path, pp);
    }
    if (diff_cost(&e) >= newa->len - 5) {
        bson_value_t whole = {.value_type = BSON_TYPE_ARRAY};
        whole.value.v_doc.data = (uint8_t *)bson_get_data(newa);
        whole.value.v_doc.data_len = newa->len;
        diff_updated(d, path, pp, &whole);
    } else {
        bson_iter_t it;
        bson_concat(&d->u, &e.u);
        if (bson_iter_init(&it, &e.dis))
            while (bson_iter_next(&it))
                if (!dis_has(&d->dis, bson_iter_key(&it)))
                    bson_append_value(&d->dis, bson_iter_key(&it), -1, bson_iter_value(&it));
        if (bson_iter_init(&it, &e.r))
            while (bson_iter_next(&it))
                diff_removed(d, bson_iter_utf8(&it, NULL));
        if (bson_iter_init(&it, &e.t)) {
            while (bson_iter_next(&it)) {
                char idx[16];
                const char *key;
                bson_uint32_to_string(d->nt++, &key, idx, sizeof(idx));
                bson_append_value(&d->t, key, -1, bson_iter_value(&it));
            }
        }
    }
    diff_destroy(&e);
}

/*
 * An update logs the whole new document (applying it is a replace). For
 * change streams it also carries, unless the update was a replacement
 * (mf_observers_replacing), diff: {u: {<dotted path>: <new value>}, r:
 * [<removed path>], t: [{field, newSize}] (only when an array shrank),
 * d: {<dotted path>: [<its parts>]} (only for paths a dotted string leaves
 * ambiguous: a field name that holds a dot or is a number)},
 * computed here where both images are at hand: a change stream's
 * updateDescription is read from it ("replace" events have none).
 */
static void
on_update(void *arg, mf_coll_t *c, const bson_t *olddoc, const bson_t *newdoc)
{
    bson_t id, diff;
    bool replacing = mf_observers_replacing();
    keep_pre(arg, c, olddoc);
    /* o2 names the document that was replaced (a time-series bucket rewrite may give the new one another _id). */
    id_doc(olddoc, &id);
    bson_init(&diff);
    if (!replacing) {
        diff_out_t d;
        diff_init(&d);
        diff_docs(olddoc, newdoc, "", NULL, &d);
        BSON_APPEND_DOCUMENT(&diff, "u", &d.u);
        BSON_APPEND_ARRAY(&diff, "r", &d.r);
        if (d.nt > 0)
            BSON_APPEND_ARRAY(&diff, "t", &d.t);
        if (!bson_empty(&d.dis))
            BSON_APPEND_DOCUMENT(&diff, "d", &d.dis);
        diff_destroy(&d);
        /*
         * mongod logs an operator update as its $v: 2 diff whatever its size
         * (UpdateTreeExecutor), so a change stream reports an "update" with
         * its updatedFields even when a $set rewrote most of a document
         * (helper-122: a 1.2 MB $set on a 2 MB document was a "replace"
         * here). This entry carries the whole new document (and the old one
         * for pre-images) besides the diff, so the diff is dropped (a
         * "replace") only when it is over half the document and all of it
         * would not fit one oplog document: that bounds a raft entry (about
         * 46 MB for a 15 MB $set with pre-images kept step-downs coming,
         * helper-126) and keeps the images, which an entry past the limit
         * loses (repl.c oplog_docs). A smaller diff always stays.
         */
        size_t whole = (size_t)newdoc->len + diff.len + (c->pre_images ? olddoc->len : 0);
        if (diff.len > newdoc->len / 2 && whole > MF_MAX_BSON_INTERNAL_SIZE - 64 * 1024)
            replacing = true;
    }
    buffer_op(arg, "u", c, newdoc, &id, replacing ? NULL : &diff, olddoc);
    bson_destroy(&diff);
    bson_destroy(&id);
}

static void
on_delete(void *arg, mf_coll_t *c, const bson_t *olddoc)
{
    bson_t id;
    keep_pre(arg, c, olddoc);
    id_doc(olddoc, &id);
    buffer_op(arg, "d", c, &id, NULL, NULL, olddoc);
    bson_destroy(&id);
}

/* The open transaction's ops as an entry {ops: [...]} into entry (initialised here). */
static void
entry_of(const txn_buf_t *b, bson_t *entry)
{
    bson_init(entry);
    BSON_APPEND_ARRAY(entry, "ops", b->ops);
}

static int
on_txn_prepare(void *arg, mf_sess_t *s, mf_error_t *err)
{
    const mf_oplog_t *log = arg;
    if (log->prepare == NULL)
        return 0;
    for (txn_buf_t *b = tls_bufs; b != NULL; b = b->next) {
        if (b->owner != log || b->n == 0)
            continue;
        bson_t entry;
        entry_of(b, &entry);
        int rc = log->prepare(log->arg, &entry, b->pre, s, err);
        bson_destroy(&entry);
        return rc;
    }
    return 0;
}

static void
on_txn_end(void *arg, bool committed)
{
    const mf_oplog_t *log = arg;
    for (txn_buf_t **p = &tls_bufs; *p != NULL; p = &(*p)->next) {
        txn_buf_t *b = *p;
        if (b->owner != log)
            continue;
        *p = b->next;
        if (committed && b->n > 0 && log->prepare == NULL) {
            bson_t entry;
            entry_of(b, &entry);
            log->sink(log->arg, &entry);
            bson_destroy(&entry);
        }
        bson_destroy(b->ops);
        if (b->pre != NULL)
            bson_destroy(b->pre);
        free(b);
        return;
    }
}

/* Command fields that belong to the request, not to the change (collMod's detail is the whole command). */
static bool
request_field(const char *k)
{
    static const char *const names[] = {"lsid", "txnNumber", "autocommit", "startTransaction", "writeConcern",
                                        "readConcern", "maxTimeMS", "comment", "apiVersion", "apiStrict",
                                        "apiDeprecationErrors", NULL};
    if (k[0] == '$')
        return true;
    for (int i = 0; names[i] != NULL; i++) {
        if (strcmp(k, names[i]) == 0)
            return true;
    }
    return false;
}

/* Appends to o {first: value} then detail's fields (request fields and first itself skipped). */
static void
append_detail(bson_t *o, const bson_t *detail, const char *first)
{
    bson_iter_t it;
    if (detail == NULL || !bson_iter_init(&it, detail))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, first) == 0 || request_field(k))
            continue;
        bson_append_value(o, k, -1, bson_iter_value(&it));
    }
}

/* A DDL change is committed already: one entry with one "c" op, now. */
static void
on_ddl(void *arg, const mf_ddl_event_t *ev)
{
    const mf_oplog_t *log = arg;
    if (ev->kind == MF_DDL_DROP_DB) {
        /* {op: "c", ns: "db.$cmd", o: {dropDatabase: 1}}, after the drops of its collections. */
        char cmd_ns[160];
        bson_t o, entry, ops;
        if (strcmp(ev->ns, "local") == 0)
            return;
        snprintf(cmd_ns, sizeof(cmd_ns), "%s.$cmd", ev->ns);
        bson_init(&o);
        BSON_APPEND_INT32(&o, "dropDatabase", 1);
        bson_init(&entry);
        BSON_APPEND_ARRAY_BEGIN(&entry, "ops", &ops);
        append_op(&ops, "0", "c", cmd_ns, NULL, &o, NULL, NULL, NULL);
        bson_append_array_end(&entry, &ops);
        log->sink(log->arg, &entry);
        bson_destroy(&entry);
        bson_destroy(&o);
        return;
    }
    if (!logged_ns(ev->ns))
        return;
    const char *dot = strchr(ev->ns, '.');
    if (dot == NULL)
        return;
    const char *coll = dot + 1;
    char cmd_ns[160];
    snprintf(cmd_ns, sizeof(cmd_ns), "%.*s.$cmd", (int)(dot - ev->ns), ev->ns);

    bson_t o, entry, ops, o2;
    bool has_o2 = false;
    bson_iter_t it;
    bson_init(&o);
    switch (ev->kind) {
    case MF_DDL_CREATE_COLL:
        BSON_APPEND_UTF8(&o, "create", coll);
        append_detail(&o, ev->detail, "create");
        break;
    case MF_DDL_DROP_COLL:
        BSON_APPEND_UTF8(&o, "drop", coll);
        break;
    case MF_DDL_RENAME_COLL:
        BSON_APPEND_UTF8(&o, "renameCollection", ev->ns);
        BSON_APPEND_UTF8(&o, "to", ev->to_ns);
        break;
    case MF_DDL_CREATE_INDEX:
        BSON_APPEND_UTF8(&o, "createIndexes", coll);
        append_detail(&o, ev->detail, "createIndexes");
        break;
    case MF_DDL_DROP_INDEX:
        BSON_APPEND_UTF8(&o, "dropIndexes", coll);
        append_detail(&o, ev->detail, "dropIndexes");
        break;
    case MF_DDL_COLLMOD:
        BSON_APPEND_UTF8(&o, "collMod", coll);
        append_detail(&o, ev->detail, "collMod");
        /*
         * The state before the change, which cmd_collmod.c adds to the
         * command as "$o2": mongod's OpObserverImpl::onCollMod logs it as
         * o2 {collectionOptions_old, indexOptions_old}, a modify event's
         * stateBeforeChange. Appliers ignore it.
         */
        if (ev->detail != NULL && bson_iter_init_find(&it, ev->detail, "$o2") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_iter_document(&it, &len, &data);
            has_o2 = bson_init_static(&o2, data, len);
        }
        break;
    default:
        bson_destroy(&o);
        return;
    }
    bson_init(&entry);
    BSON_APPEND_ARRAY_BEGIN(&entry, "ops", &ops);
    append_op(&ops, "0", "c", cmd_ns, ev->uuid, &o, has_o2 ? &o2 : NULL, NULL, NULL);
    bson_append_array_end(&entry, &ops);
    log->sink(log->arg, &entry);
    bson_destroy(&entry);
    bson_destroy(&o);
}

int
mf_oplog_attach(mf_engine_t *eng, mf_oplog_sink_fn sink, void *arg, mf_oplog_t **out, mf_error_t *err)
{
    mf_oplog_t *log = mf_calloc(1, sizeof(*log));
    log->sink = sink;
    log->arg = arg;
    mf_observer_t o = {.on_insert = on_insert, .on_update = on_update, .on_delete = on_delete, .on_ddl = on_ddl,
                       .on_txn_end = on_txn_end, .on_txn_prepare = on_txn_prepare, .arg = log};
    if (mf_observers_add(eng->observers, &o, err) != 0) {
        free(log);
        return -1;
    }
    *out = log;
    return 0;
}

void
mf_oplog_set_prepare(mf_oplog_t *log, mf_oplog_prepare_fn prepare)
{
    log->prepare = prepare;
}

void
mf_oplog_free(mf_oplog_t *log)
{
    free(log);
}

/* ---------- applying ---------- */

int
mf_oplog_run(mf_engine_t *eng, const char *db, const bson_t *cmd, const int *tolerated, mf_error_t *err)
{
    mf_client_t client = {.id = 0, .remote = "oplog", .helloed = true, .internal = true};
    bson_t reply;
    bson_iter_t it;
    int rc = 0;

    bson_init(&reply);
    mf_cmd_run(eng, &client, db, cmd, NULL, 0, false, &reply);
    if (bson_iter_init_find(&it, &reply, "ok") && bson_iter_as_double(&it) == 1.0) {
        /* A write command reports a failed document in writeErrors with ok: 1. */
        if (bson_iter_init_find(&it, &reply, "writeErrors")) {
            bson_iter_t we;
            int code = MF_E_InternalError;
            const char *msg = "write error";
            if (bson_iter_recurse(&it, &we) && bson_iter_next(&we) && BSON_ITER_HOLDS_DOCUMENT(&we)) {
                bson_iter_t f;
                bson_iter_recurse(&we, &f);
                while (bson_iter_next(&f)) {
                    if (strcmp(bson_iter_key(&f), "code") == 0)
                        code = (int)bson_iter_as_int64(&f);
                    else if (strcmp(bson_iter_key(&f), "errmsg") == 0 && BSON_ITER_HOLDS_UTF8(&f))
                        msg = bson_iter_utf8(&f, NULL);
                }
            }
            rc = mf_err_set(err, code, "replication: %s", msg);
        }
        goto out;
    }
    int code = MF_E_InternalError;
    if (bson_iter_init_find(&it, &reply, "code"))
        code = (int)bson_iter_as_int64(&it);
    for (int i = 0; tolerated != NULL && tolerated[i] != 0; i++) {
        if (code == tolerated[i])
            goto out;
    }
    const char *msg = "command failed";
    if (bson_iter_init_find(&it, &reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it))
        msg = bson_iter_utf8(&it, NULL);
    rc = mf_err_set(err, code, "replication: %s", msg);
out:
    bson_destroy(&reply);
    return rc;
}

/* The fields of one op; o and o2 are views into the entry (valid while it is). */
typedef struct {
    const char *op;
    const char *ns;
    bson_t o, o2;
    bool has_o, has_o2;
    uint8_t ui[16];
    bool has_ui;
} op_fields_t;

static int
parse_op(bson_iter_t *el, op_fields_t *f, mf_error_t *err)
{
    bson_iter_t it;
    memset(f, 0, sizeof(*f));
    if (!BSON_ITER_HOLDS_DOCUMENT(el) || !bson_iter_recurse(el, &it))
        return mf_err_set(err, MF_E_BadValue, "oplog entry: an op must be a document");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "op") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
            f->op = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "ns") == 0 && BSON_ITER_HOLDS_UTF8(&it)) {
            f->ns = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "ui") == 0 && BSON_ITER_HOLDS_BINARY(&it)) {
            const uint8_t *bin;
            uint32_t blen;
            bson_subtype_t st;
            bson_iter_binary(&it, &st, &blen, &bin);
            if (blen == 16) {
                memcpy(f->ui, bin, 16);
                f->has_ui = true;
            }
        } else if ((strcmp(k, "o") == 0 || strcmp(k, "o2") == 0) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *data;
            uint32_t len;
            bool is_o = k[1] == '\0';
            bson_iter_document(&it, &len, &data);
            if (!bson_init_static(is_o ? &f->o : &f->o2, data, len))
                return mf_err_set(err, MF_E_BadValue, "oplog entry: malformed %s", k);
            *(is_o ? &f->has_o : &f->has_o2) = true;
        }
    }
    if (f->op == NULL || f->ns == NULL || !f->has_o || strchr(f->ns, '.') == NULL)
        return mf_err_set(err, MF_E_BadValue, "oplog entry: an op needs op, ns and o");
    return 0;
}

/*
 * A run of consecutive document ops of one kind on one namespace, applied
 * as one command: "i" and "u" replace the document with that _id (inserting
 * it when missing), "d" deletes the documents with those _ids (gone
 * already is fine). A TTL batch of 1,000 deletions is one delete command.
 */
typedef struct doc_run {
    char db[128];
    const char *coll;
    bool del;
    bson_t cmd, arr; /* arr is open inside cmd */
    bson_t ids;      /* "d": the _ids, open inside arr's statement */
    bson_t stmt, q, in;
    uint32_t n;
    bool open;
} doc_run_t;

#define RUN_MAX_OPS 1000
#define RUN_MAX_BYTES (8 * 1024 * 1024)

static void
run_begin(doc_run_t *run, const char *db, const char *coll, bool del)
{
    snprintf(run->db, sizeof(run->db), "%s", db);
    run->coll = coll;
    run->del = del;
    run->n = 0;
    run->open = true;
    bson_init(&run->cmd);
    BSON_APPEND_UTF8(&run->cmd, del ? "delete" : "update", coll);
    BSON_APPEND_ARRAY_BEGIN(&run->cmd, del ? "deletes" : "updates", &run->arr);
    if (del) {
        BSON_APPEND_DOCUMENT_BEGIN(&run->arr, "0", &run->stmt);
        BSON_APPEND_DOCUMENT_BEGIN(&run->stmt, "q", &run->q);
        BSON_APPEND_DOCUMENT_BEGIN(&run->q, "_id", &run->in);
        BSON_APPEND_ARRAY_BEGIN(&run->in, "$in", &run->ids);
    }
}

/* Runs and frees the open run (if any). */
static int
run_flush(mf_engine_t *eng, doc_run_t *run, mf_error_t *err)
{
    static const int none[] = {0};
    if (!run->open)
        return 0;
    run->open = false;
    if (run->del) {
        bson_append_array_end(&run->in, &run->ids);
        bson_append_document_end(&run->q, &run->in);
        bson_append_document_end(&run->stmt, &run->q);
        BSON_APPEND_INT32(&run->stmt, "limit", 0);
        bson_append_document_end(&run->arr, &run->stmt);
    }
    bson_append_array_end(&run->cmd, &run->arr);
    if (!run->del)
        BSON_APPEND_BOOL(&run->cmd, "bypassDocumentValidation", true);
    int rc = mf_oplog_run(eng, run->db, &run->cmd, none, err);
    bson_destroy(&run->cmd);
    return rc;
}

/* Adds one "i", "u" or "d" op to the run, flushing it first when the op does not belong to it. */
static int
run_add(mf_engine_t *eng, doc_run_t *run, const char *db, const char *coll, const op_fields_t *f, mf_error_t *err)
{
    bool del = f->op[0] == 'd';
    bson_iter_t it;
    char key[16];
    const char *kp;
    if (!bson_iter_init_find(&it, &f->o, "_id"))
        return mf_err_set(err, MF_E_BadValue, "oplog entry: %s op on %s without _id", f->op, f->ns);
    if (run->open && (run->del != del || strcmp(run->db, db) != 0 || strcmp(run->coll, coll) != 0 ||
                      run->n >= RUN_MAX_OPS || run->cmd.len > RUN_MAX_BYTES)) {
        if (run_flush(eng, run, err) != 0)
            return -1;
    }
    if (!run->open)
        run_begin(run, db, coll, del);
    bson_uint32_to_string(run->n++, &kp, key, sizeof(key));
    if (del) {
        bson_append_value(&run->ids, kp, -1, bson_iter_value(&it));
        return 0;
    }
    bson_t u, q;
    bson_append_document_begin(&run->arr, kp, -1, &u);
    BSON_APPEND_DOCUMENT_BEGIN(&u, "q", &q);
    bson_append_value(&q, "_id", 3, bson_iter_value(&it));
    bson_append_document_end(&u, &q);
    BSON_APPEND_DOCUMENT(&u, "u", &f->o);
    BSON_APPEND_BOOL(&u, "upsert", true);
    bson_append_document_end(&run->arr, &u);
    return 0;
}

/* "c": the DDL command, tolerating what a second application meets. */
static int
apply_command(mf_engine_t *eng, const char *db, const op_fields_t *f, mf_error_t *err)
{
    static const int exists[] = {MF_E_NamespaceExists, 0};
    static const int missing[] = {MF_E_NamespaceNotFound, 0};
    static const int ix_missing[] = {MF_E_NamespaceNotFound, MF_E_IndexNotFound, 0};
    /* A same-named index with another spec: a replay meets it before the log's later drop and re-create. */
    static const int ix_conflict[] = {MF_E_IndexOptionsConflict, MF_E_IndexKeySpecsConflict, 0};
    bson_iter_t it;
    int rc;

    /* A dropDatabase follows the drops of its collections, each an entry applied already: nothing is left to do. */
    if (bson_iter_init(&it, &f->o) && bson_iter_next(&it) && strcmp(bson_iter_key(&it), "dropDatabase") == 0)
        return 0;
    if (!bson_iter_init(&it, &f->o) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(err, MF_E_BadValue, "oplog entry: a c op needs a command");
    const char *name = bson_iter_key(&it);
    const char *target = bson_iter_utf8(&it, NULL);

    if (strcmp(name, "create") == 0) {
        bson_iter_t o;
        /*
         * A time-series collection is logged as its two catalog entries:
         * the buckets collection (with the timeseries options), then the
         * view over it. Creating the collection by its name makes both, as
         * on the primary; the view's own entry then has nothing to add.
         */
        if (strncmp(target, "system.buckets.", 15) == 0 && bson_has_field(&f->o, "timeseries")) {
            bson_t cmd;
            bson_init(&cmd);
            BSON_APPEND_UTF8(&cmd, "create", target + 15);
            bson_iter_init(&o, &f->o);
            bson_iter_next(&o);
            while (bson_iter_next(&o))
                bson_append_value(&cmd, bson_iter_key(&o), -1, bson_iter_value(&o));
            rc = mf_oplog_run(eng, db, &cmd, exists, err);
            bson_destroy(&cmd);
            return rc;
        }
        if (bson_iter_init_find(&o, &f->o, "viewOn") && BSON_ITER_HOLDS_UTF8(&o) &&
            strncmp(bson_iter_utf8(&o, NULL), "system.buckets.", 15) == 0) {
            /*
             * Its buckets' entry made it already, but for the commit of an
             * $out into a new time-series collection (query/agg_write.c),
             * which renames buckets into place and then creates their view
             * alone: made here as the primary made it, with its options.
             */
            bson_t opts;
            bson_init(&opts);
            bson_copy_to_excluding_noinit(&f->o, &opts, "create", NULL);
            rc = 0;
            mf_catalog_wrlock(eng->cat);
            if (mf_catalog_coll_find(eng->cat, db, target) == NULL &&
                mf_catalog_coll_find(eng->cat, db, bson_iter_utf8(&o, NULL)) != NULL)
                rc = mf_catalog_coll_create(eng->cat, db, target, &opts, NULL, err);
            mf_catalog_unlock(eng->cat);
            bson_destroy(&opts);
            return rc;
        }
        if (!f->has_ui)
            return mf_oplog_run(eng, db, &f->o, exists, err);
        /* The primary's UUID, so a collection is the same one on every member. */
        bson_t cmd;
        bson_init(&cmd);
        bson_concat(&cmd, &f->o);
        BSON_APPEND_BINARY(&cmd, "uuid", BSON_SUBTYPE_UUID, f->ui, 16);
        rc = mf_oplog_run(eng, db, &cmd, exists, err);
        bson_destroy(&cmd);
        return rc;
    }
    if (strcmp(name, "drop") == 0 || strcmp(name, "collMod") == 0)
        return mf_oplog_run(eng, db, &f->o, missing, err);
    if (strcmp(name, "dropIndexes") == 0)
        return mf_oplog_run(eng, db, &f->o, ix_missing, err);
    if (strcmp(name, "createIndexes") == 0) {
        /* o is {createIndexes: coll, <spec>}: the command takes the spec in an array. */
        bson_t cmd, arr, spec;
        bson_init(&cmd);
        BSON_APPEND_UTF8(&cmd, "createIndexes", target);
        BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &spec);
        while (bson_iter_next(&it))
            bson_append_value(&spec, bson_iter_key(&it), -1, bson_iter_value(&it));
        bson_append_document_end(&arr, &spec);
        bson_append_array_end(&cmd, &arr);
        rc = mf_oplog_run(eng, db, &cmd, ix_conflict, err);
        bson_destroy(&cmd);
        return rc;
    }
    if (strcmp(name, "renameCollection") == 0) {
        /*
         * Always with dropTarget: in log order the target was absent when
         * the rename first ran, so dropping it only matters on a replay,
         * where the target holds an older copy of the same collection.
         */
        bson_t cmd;
        bson_init(&cmd);
        bson_copy_to_excluding_noinit(&f->o, &cmd, "dropTarget", NULL);
        BSON_APPEND_BOOL(&cmd, "dropTarget", true);
        rc = mf_oplog_run(eng, "admin", &cmd, missing, err);
        bson_destroy(&cmd);
        return rc;
    }
    return mf_err_set(err, MF_E_BadValue, "oplog entry: unknown command %s", name);
}

int
mf_oplog_apply(mf_engine_t *eng, const bson_t *entry, mf_error_t *err)
{
    bson_iter_t it, el;
    doc_run_t run = {.open = false};

    if (!bson_iter_init_find(&it, entry, "ops") || !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &el))
        return mf_err_set(err, MF_E_BadValue, "oplog entry: ops must be an array");
    while (bson_iter_next(&el)) {
        op_fields_t f;
        char db[128];
        if (parse_op(&el, &f, err) != 0)
            goto fail;
        const char *dot = strchr(f.ns, '.');
        if ((size_t)(dot - f.ns) >= sizeof(db)) {
            mf_err_set(err, MF_E_InvalidNamespace, "oplog entry: namespace too long: %s", f.ns);
            goto fail;
        }
        memcpy(db, f.ns, (size_t)(dot - f.ns));
        db[dot - f.ns] = '\0';
        int rc;
        bson_iter_t a, b;
        if (strcmp(f.op, "u") == 0 && f.has_o2 && bson_iter_init_find(&a, &f.o, "_id") &&
            bson_iter_init_find(&b, &f.o2, "_id") && !mf_value_equal(bson_iter_value(&a), bson_iter_value(&b))) {
            /* The replacement has another _id: delete the old document, then insert the new one. */
            op_fields_t del = f;
            del.op = "d";
            del.o = f.o2;
            rc = run_add(eng, &run, db, dot + 1, &del, err);
            if (rc == 0)
                rc = run_add(eng, &run, db, dot + 1, &f, err);
        } else if (strcmp(f.op, "i") == 0 || strcmp(f.op, "u") == 0 || strcmp(f.op, "d") == 0) {
            rc = run_add(eng, &run, db, dot + 1, &f, err);
        } else if (strcmp(f.op, "c") == 0) {
            rc = run_flush(eng, &run, err) == 0 ? apply_command(eng, db, &f, err) : -1;
        } else {
            rc = mf_err_set(err, MF_E_BadValue, "oplog entry: unknown op %s", f.op);
        }
        if (rc != 0)
            goto fail;
    }
    return run_flush(eng, &run, err);
fail:
    if (run.open)
        bson_destroy(&run.cmd);
    return -1;
}
