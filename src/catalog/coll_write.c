/*
 * coll_write.c: record and index writes in one transaction (see coll_write.h).
 *
 * Updates remove the old document's keys that the new one lacks and add the
 * new ones it did not have, so an update that leaves indexed fields alone
 * touches no index table. Unique indexes detect duplicates by inserting the
 * key without overwrite: WiredTiger answers WT_DUPLICATE_KEY, which becomes
 * 11000 with MongoDB's message shape.
 *
 * Capped collections: after an insert the oldest records (lowest record
 * ids, i.e. insertion order) are removed in the same transaction while the
 * running count or size exceeds max / size; the new record is never removed.
 */
#include "common/alloc.h"
#include "catalog/coll_write.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/curop.h"
#include "common/fmt.h"
#include "common/log.h"
#include "index/index.h"
#include "catalog/timeseries.h"
#include "doc/bucket.h"
#include "doc/collation.h"
#include "doc/match.h"
#include "doc/path.h"


static void
rid_be(int64_t rid, uint8_t out[8])
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)(rid & 0xff);
        rid >>= 8;
    }
}

static int64_t
rid_from_be(const uint8_t *in)
{
    int64_t rid = 0;
    for (int i = 0; i < 8; i++)
        rid = (rid << 8) | in[i];
    return rid;
}

/*
 * Does ix index doc at all (partial filter)? The filter compares strings
 * under the index's collation, as mongod parses it with the index's
 * collator, whatever the collation of the write (a statement's, the
 * collection's default, or none for an index build): otherwise a document
 * with 'A' went into an index with filter {s: 'a'} and strength 1 on insert
 * and not on its build.
 */
bool
mf_index_covers(const mf_index_t *ix, const bson_t *doc)
{
    if (ix->partial == NULL)
        return true;
    const mf_collation_t *saved = mf_collation_current();
    mf_collation_set_current(ix->kp.collation);
    bool in = mf_matcher_match(ix->partial, doc, NULL);
    mf_collation_set_current(saved);
    return in;
}

/*
 * The components of key (ix's encoding of one of doc's keys) into *vals
 * ("0", "1", ... as mf_ks_decode gives them), when they differ from what
 * doc holds at ix's paths: one of those is an array (a multikey index's key
 * is one element). False when doc's own values describe the key (or no
 * key, or a collation index, whose string components are sort keys).
 */
static bool
key_components(const mf_index_t *ix, const bson_t *doc, const mf_keystring_t *key, bson_t *vals)
{
    bool array = false;
    if (key == NULL || ix->kp.collation != NULL)
        return false;
    for (int i = 0; i < ix->kp.nfields && !array; i++) {
        bson_value_t v;
        array = mf_path_get(doc, ix->kp.fields[i], &v) && v.value_type == BSON_TYPE_ARRAY;
    }
    if (!array)
        return false;
    size_t tblen;
    const uint8_t *tb = mf_ks_typebits(key, &tblen);
    mf_error_t e;
    bson_init(vals);
    if (mf_ks_decode_typed(key->data, key->len, tb, tblen, ix->kp.desc, ix->kp.nfields, vals, &e) != 0 ||
        (int)bson_count_keys(vals) != ix->kp.nfields) {
        bson_destroy(vals);
        return false;
    }
    return true;
}

int
mf_coll_dup_key_error(mf_coll_t *c, mf_index_t *ix, const bson_t *doc, const mf_keystring_t *key, mf_error_t *err)
{
    bson_t kv, kp, spec = BSON_INITIALIZER;
    char text[900], val[300], coll_text[400] = "";
    size_t n = 0;
    bson_iter_t it;
    const mf_collation_t *coll = ix->kp.collation;

    bson_t comps;
    bson_iter_t ci;
    bool from_key = key_components(ix, doc, key, &comps) && bson_iter_init(&ci, &comps);
    bson_init(&kv);
    text[0] = '\0';
    for (int i = 0; i < ix->kp.nfields; i++) {
        bson_value_t v;
        bson_value_t nullv = {.value_type = BSON_TYPE_NULL};
        if (from_key) /* the array element that collided, not the whole array */
            v = bson_iter_next(&ci) ? *bson_iter_value(&ci) : nullv;
        else if (!mf_path_get(doc, ix->kp.fields[i], &v))
            v = nullv;
        if (coll != NULL && v.value_type == BSON_TYPE_UTF8) {
            char *hex = mf_collation_key_hex(coll, v.value.v_utf8.str, v.value.v_utf8.len);
            bson_value_t hv = {.value_type = BSON_TYPE_UTF8};
            hv.value.v_utf8.str = hex;
            hv.value.v_utf8.len = (uint32_t)strlen(hex);
            mf_fmt_value(&hv, val, sizeof(val)); /* a long one shortened as any string in a message */
            bson_append_utf8(&kv, ix->kp.fields[i], -1, hex, -1);
            free(hex);
        } else {
            mf_fmt_value(&v, val, sizeof(val));
            bson_append_value(&kv, ix->kp.fields[i], -1, &v);
        }
        n += (size_t)snprintf(text + n, n < sizeof(text) ? sizeof(text) - n : 0, "%s%s: %s", i ? ", " : "",
                              ix->kp.fields[i], val);
    }
    if (coll != NULL) {
        char spec_text[360];
        mf_collation_append_spec(coll, &spec);
        mf_fmt_doc(&spec, spec_text, sizeof(spec_text));
        snprintf(coll_text, sizeof(coll_text), " collation: %s", spec_text);
    }
    mf_err_set(err, MF_E_DuplicateKey, "E11000 duplicate key error collection: %s index: %s%s dup key: { %s }", c->ns,
               ix->name, coll_text, text);
    bson_t info;
    bson_init(&info);
    if (bson_iter_init_find(&it, ix->spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&kp, data, len))
            BSON_APPEND_DOCUMENT(&info, "keyPattern", &kp);
    }
    BSON_APPEND_DOCUMENT(&info, "keyValue", &kv);
    if (coll != NULL)
        BSON_APPEND_DOCUMENT(&info, "collation", &spec);
    mf_err_set_info(err, bson_get_data(&info), info.len);
    bson_destroy(&info);
    bson_destroy(&kv);
    bson_destroy(&spec);
    if (from_key)
        bson_destroy(&comps);
    return -1;
}

/*
 * Uniqueness on an index whose entries are key + record id (rid_in_key,
 * with unique or prepare_unique set): fails with 11000 when another
 * document already has key. First the bare key is written and removed
 * again, in this transaction: two transactions adding the same value then
 * write the same WiredTiger key, so one of them conflicts (MF_CONFLICT, and
 * retries to find the other's entry), as two inserts into a key -> record
 * id index do. Then the value's entries are looked at: each is key followed
 * by 8 bytes of record id, so an entry of exactly that length starting with
 * key is this value's (keystrings are prefix-free per component). Leaves
 * cur positioned anywhere.
 */
static int
index_probe_unique(mf_coll_t *c, mf_index_t *ix, mf_cur_t *cur, const mf_keystring_t *key, int64_t rid,
                   const bson_t *doc, mf_error_t *err)
{
    int ret = mf_cur_put_bytes(cur, key->data, key->len, "", 0);
    if (ret == 0)
        ret = mf_cur_remove_bytes(cur, key->data, key->len);
    if (ret == 0)
        ret = mf_cur_seek_bytes_ge(cur, key->data, key->len);
    while (ret == 0) {
        const uint8_t *k;
        size_t klen;
        mf_cur_key_bytes(cur, &k, &klen);
        if (klen < key->len || memcmp(k, key->data, key->len) != 0)
            break;
        if (klen == key->len + 8 && mf_ks_read_recordid(k, klen) != rid)
            return mf_coll_dup_key_error(c, ix, doc, key, err);
        ret = mf_cur_next(cur);
    }
    if (ret == 0 || ret == MF_NOTFOUND)
        return 0;
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    return mf_err_set(err, MF_E_InternalError, "index insert failed on %s", ix->name);
}

/*
 * A unique (key -> record id) entry for key exists: when it is rid's (an
 * update re-adding it), its value is made val (the record id and the key's
 * type bits, which may have changed: 5 to 5.0) and 1 is returned; another
 * document's is the duplicate key error (-1); MF_CONFLICT passes through.
 */
static int
unique_readd(mf_coll_t *c, mf_index_t *ix, mf_cur_t *cur, const mf_keystring_t *key, int64_t rid, const bson_t *doc,
             const uint8_t *val, size_t vallen, mf_error_t *err)
{
    if (mf_cur_search_bytes(cur, key->data, key->len) == 0) {
        const uint8_t *v;
        size_t vlen;
        mf_cur_value(cur, &v, &vlen);
        if (vlen >= 8 && rid_from_be(v) == rid) {
            if (vlen == vallen && memcmp(v, val, vlen) == 0)
                return 1;
            int ret = mf_cur_put_bytes(cur, key->data, key->len, val, vallen);
            if (ret == 0)
                return 1;
            return ret == MF_CONFLICT ? MF_CONFLICT
                                      : mf_err_set(err, MF_E_InternalError, "index insert failed on %s", ix->name);
        }
    }
    return mf_coll_dup_key_error(c, ix, doc, key, err);
}

/*
 * Inserts one key of ix pointing at rid (index_put's work). build: an index
 * build's own insert, which prepareUnique does not check (documents that
 * already share a value are indexed; only later writes may not add one).
 */
static int
index_put_key(mf_sess_t *s, mf_coll_t *c, mf_index_t *ix, mf_cur_t *cur, mf_keystring_t *key, int64_t rid,
              const bson_t *doc, bool build, mf_error_t *err)
{
    uint8_t stackval[64], *val = stackval;
    size_t tblen = 0;
    const uint8_t *tb = ix->key_types ? mf_ks_typebits(key, &tblen) : NULL;
    int ret;

    if (ix->rid_in_key && (ix->unique || (ix->prepare_unique && !build && !ix->building)) &&
        (ret = index_probe_unique(c, ix, cur, key, rid, doc, err)) != 0)
        return ret;
    if (!ix->rid_in_key) {
        /* key -> record id, then the type bits (keyFormat 3, mf_index_t.key_types; an object's numbers may be many) */
        if (8 + tblen > sizeof(stackval))
            val = mf_malloc(8 + tblen);
        rid_be(rid, val);
        if (tblen > 0)
            memcpy(val + 8, tb, tblen);
        ret = mf_cur_insert_bytes(cur, key->data, key->len, val, 8 + tblen);
        if (ret == MF_DUPKEY)
            ret = unique_readd(c, ix, cur, key, rid, doc, val, 8 + tblen, err);
        if (val != stackval)
            free(val);
        if (ret == 1)
            return 0;
        if (ret < 0)
            return -1;
    } else {
        size_t base = key->len;
        mf_ks_append_recordid(key, rid);
        ret = mf_cur_insert_bytes(cur, key->data, key->len, tb != NULL ? tb : (const uint8_t *)"", tblen);
        if (ret == MF_DUPKEY && tblen > 0) /* the entry is there: its type bits may be another document's version's */
            ret = mf_cur_put_bytes(cur, key->data, key->len, tb, tblen);
        key->len = base;
        if (ret == MF_DUPKEY)
            ret = 0;
    }
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    if (ret != 0)
        return mf_err_set(err, MF_E_InternalError, "index insert failed on %s", ix->name);
    (void)s;
    return 0;
}

/*
 * Inserts one key of ix pointing at rid, inside c's range guard: a TTL
 * batch truncating a range of c's indexes commits before or after this
 * transaction, never around it (storage.h "Range guards").
 */
static int
index_put(mf_sess_t *s, mf_coll_t *c, mf_index_t *ix, mf_cur_t *cur, mf_keystring_t *key, int64_t rid,
          const bson_t *doc, bool build, mf_error_t *err)
{
    bool own = mf_rguard_enter(s, &c->guard);
    int ret = index_put_key(s, c, ix, cur, key, rid, doc, build, err);
    if (own)
        mf_rguard_exit(&c->guard);
    return ret;
}

/*
 * Removes key (len bytes) from cur's index: found near the cursor's last
 * entry and removed in place, or, blind, removed by key. A blind remove
 * conflicts with a key written after this transaction's snapshot, which a
 * find would not see and so leave behind (index builds need that).
 */
static int
remove_key(mf_cur_t *cur, const uint8_t *key, size_t len, bool blind)
{
    if (blind)
        return mf_cur_remove_bytes(cur, key, len);
    int ret = mf_cur_find_bytes(cur, key, len);
    return ret == 0 ? mf_cur_remove_here(cur) : ret;
}

static int
index_del(mf_index_t *ix, mf_cur_t *cur, mf_keystring_t *key, int64_t rid, bool doc_removed, mf_error_t *err)
{
    int ret;
    if (!ix->rid_in_key && doc_removed && !ix->building) {
        /*
         * The document owned this key (a unique key has one owner) -- except
         * during a build, when a document not yet scanned may hold a value
         * that a writer has already given a scanned one: then check.
         */
        ret = remove_key(cur, key->data, key->len, false);
    } else if (!ix->rid_in_key) {
        /* Only remove the entry if it belongs to this record. */
        bool mine = false;
        ret = mf_cur_find_bytes(cur, key->data, key->len);
        if (ret == 0) {
            const uint8_t *v;
            size_t vlen;
            mf_cur_value(cur, &v, &vlen);
            mine = vlen >= 8 && rid_from_be(v) == rid;
        }
        if (mine) {
            ret = mf_cur_remove_here(cur); /* the find left cur on the key */
        } else if (ix->building && (ret == 0 || ret == MF_NOTFOUND)) {
            /*
             * Not ours in this snapshot. During a build, a chunk that
             * indexed this document may have committed since the snapshot
             * was taken (its reservation of the record ended at its commit,
             * so the record write did not conflict): probe the key, so that
             * a key written after the snapshot is a conflict and the write
             * retries and sees it, instead of leaving it behind.
             */
            ret = mf_cur_reserve_bytes(cur, key->data, key->len);
        } else if (ret == 0) {
            return 0;
        }
    } else {
        size_t base = key->len;
        mf_ks_append_recordid(key, rid);
        /* During a build, blind: a build chunk may have written the key after this snapshot. */
        ret = remove_key(cur, key->data, key->len, ix->building);
        key->len = base;
    }
    if (ret == MF_NOTFOUND || ret == 0)
        return 0;
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    return mf_err_set(err, MF_E_InternalError, "index remove failed on %s", ix->name);
}

/*
 * Generates ix's keys for doc (empty set when the index does not cover doc).
 * A multikey doc about to be written (s and c given) makes the flag durable
 * in the caller's transaction (mf_catalog_index_mark_multikey); otherwise
 * (an old document, or an index build whose DDL persists the flag) it is
 * only set in memory. Returns 0, MF_CONFLICT, or -1 with err.
 */
static int
keys_make(mf_index_t *ix, const bson_t *doc, mf_keyset_t *ks, bool *multikey, mf_error_t *err)
{
    bool skip = false;
    *multikey = false;
    if (doc == NULL || !mf_index_covers(ix, doc)) {
        ks->n = 0;
        return 0;
    }
    if (mf_index_keys(&ix->kp, ix->sparse, doc, ks, &skip, multikey, err) != 0)
        return -1;
    if (skip)
        ks->n = 0;
    return 0;
}

/* Whether ix's committed entry already counts every component of every field's path as an array. */
static bool
mk_all_durable(mf_index_t *ix)
{
    if (!atomic_load(&ix->multikey_durable))
        return false;
    for (int f = 0; f < ix->kp.nfields; f++)
        if ((atomic_load(&ix->mk_durable[f]) & ix->kp.mk_all[f]) != ix->kp.mk_all[f])
            return false;
    return true;
}

/*
 * keys_for's second half: what a multikey document doc does to ix's flags
 * and multikey paths (s NULL: in memory only).
 */
static int
keys_note_multikey(mf_sess_t *s, mf_coll_t *c, mf_index_t *ix, bool multikey, const bson_t *doc, mf_error_t *err)
{
    uint32_t mk[MF_KP_MAX_FIELDS];
    if (!multikey || mk_all_durable(ix))
        return 0;
    mf_index_multikey_paths(&ix->kp, doc, mk);
    if (s != NULL)
        return mf_catalog_index_mark_multikey(s, c, ix, mk, err);
    for (int f = 0; f < ix->kp.nfields; f++)
        atomic_fetch_or(&ix->mk_paths[f], mk[f]);
    if (!atomic_load(&ix->multikey))
        atomic_store(&ix->multikey, true);
    return 0;
}

static int
keys_for(mf_sess_t *s, mf_coll_t *c, mf_index_t *ix, const bson_t *doc, mf_keyset_t *ks, mf_error_t *err)
{
    bool multikey;
    if (keys_make(ix, doc, ks, &multikey, err) != 0)
        return -1;
    return keys_note_multikey(s, c, ix, multikey, doc, err);
}

/* Whether two keys of the same bytes hold their numbers in the same types (keyFormat 3's type bits). */
static bool
same_types(const mf_keystring_t *a, const mf_keystring_t *b)
{
    size_t al, bl;
    const uint8_t *at = mf_ks_typebits(a, &al), *bt = mf_ks_typebits(b, &bl);
    return al == bl && (al == 0 || memcmp(at, bt, al) == 0);
}

/* mf_index_keys leaves key sets sorted, so this is a binary search (updates of big arrays stay O(N log N)). */
static bool
keyset_has(const mf_keyset_t *ks, const mf_keystring_t *k)
{
    return mf_keyset_contains(ks, k);
}

/*
 * Per-thread key buffers, reused across documents so a write allocates
 * nothing once warm. Freed by a thread-key destructor when the thread ends.
 */
typedef struct size_delta {
    mf_coll_t *c;
    int64_t count, size;
} size_delta_t;

/* One document's keys made ahead (mf_coll_keys_prepare): a key set per index, in c->indexes order. */
typedef struct prep_slot {
    mf_keyset_t sets[MF_PREP_MAX_INDEXES];
    uint64_t multikey; /* bit i: index i's keys came from an array */
    int nsets;         /* sets[0 .. nsets) initialised */
} prep_slot_t;

typedef struct keybufs {
    mf_keyset_t oldk, newk;
    size_delta_t *deltas; /* count/size changes of the thread's open transaction, per collection */
    int ndeltas, capdeltas;
    prep_slot_t *prep; /* MF_PREP_SLOTS of them once a bulk insert used them, else NULL */
    mf_cur_t *rec_cur; /* mf_coll_insert_record's cursor, held until mf_coll_prepared_release */
} keybufs_t;

static pthread_key_t keybufs_key;
static pthread_once_t keybufs_once = PTHREAD_ONCE_INIT;

static void
keybufs_free(void *p)
{
    keybufs_t *kb = p;
    mf_keyset_destroy(&kb->oldk);
    mf_keyset_destroy(&kb->newk);
    for (int i = 0; kb->prep != NULL && i < MF_PREP_SLOTS; i++) {
        for (int k = 0; k < kb->prep[i].nsets; k++)
            mf_keyset_destroy(&kb->prep[i].sets[k]);
    }
    free(kb->prep);
    free(kb->deltas);
    free(kb);
}

static void
keybufs_init_key(void)
{
    pthread_key_create(&keybufs_key, keybufs_free);
}

static keybufs_t *
thread_keybufs(void)
{
    pthread_once(&keybufs_once, keybufs_init_key);
    keybufs_t *kb = pthread_getspecific(keybufs_key);
    if (kb == NULL) {
        kb = mf_calloc(1, sizeof(*kb));
        pthread_setspecific(keybufs_key, kb);
    }
    return kb;
}

/*
 * Count and size changes take effect when their transaction commits (an
 * aborted or retried write must not move them: they are persisted in
 * table:_mf_sizes and trusted at the next start). Until then they wait in a
 * per-thread list; the storage end-of-transaction callback applies or drops
 * them on the writing thread.
 */
static void
sizes_txn_end(void *arg, bool committed)
{
    keybufs_t *kb = thread_keybufs();
    for (int i = 0; i < kb->ndeltas; i++) {
        if (kb->deltas[i].c != arg)
            continue;
        /* Only a commit touches c (the catalog lock is still held then); an abort only forgets. */
        if (committed) {
            atomic_fetch_add(&kb->deltas[i].c->approx_count, kb->deltas[i].count);
            atomic_fetch_add(&kb->deltas[i].c->approx_size, kb->deltas[i].size);
        }
        kb->deltas[i] = kb->deltas[--kb->ndeltas];
        return;
    }
}

static void
size_delta(mf_sess_t *s, mf_coll_t *c, int64_t count, int64_t size)
{
    if (!mf_txn_active(s)) {
        atomic_fetch_add(&c->approx_count, count);
        atomic_fetch_add(&c->approx_size, size);
        return;
    }
    keybufs_t *kb = thread_keybufs();
    size_delta_t *d = NULL;
    for (int i = 0; i < kb->ndeltas && d == NULL; i++) {
        if (kb->deltas[i].c == c)
            d = &kb->deltas[i];
    }
    if (d == NULL) {
        if (kb->ndeltas == kb->capdeltas) {
            kb->capdeltas = kb->capdeltas ? kb->capdeltas * 2 : 4;
            kb->deltas = mf_realloc(kb->deltas, (size_t)kb->capdeltas * sizeof(*kb->deltas));
        }
        d = &kb->deltas[kb->ndeltas++];
        d->c = c;
        d->count = d->size = 0;
    }
    d->count += count;
    d->size += size;
    mf_txn_on_end(s, sizes_txn_end, c);
}

/* c's count and size as this thread's open transaction sees them (committed plus its own changes). */
static void
sizes_seen(mf_coll_t *c, int64_t *count, int64_t *size)
{
    keybufs_t *kb = thread_keybufs();
    *count = atomic_load(&c->approx_count);
    *size = atomic_load(&c->approx_size);
    for (int i = 0; i < kb->ndeltas; i++) {
        if (kb->deltas[i].c == c) {
            *count += kb->deltas[i].count;
            *size += kb->deltas[i].size;
        }
    }
}

/* The key of t starting at offset off (its 2-byte length first): *key and its length. */
static size_t
removal_key(const mf_removal_keys_t *t, size_t off, const uint8_t **key)
{
    uint16_t len;
    memcpy(&len, t->buf + off, 2);
    *key = t->buf + off + 2;
    return len;
}

/* Adds key (len bytes) to t. */
static void
removal_add(mf_removal_keys_t *t, const uint8_t *key, size_t len)
{
    uint16_t l = (uint16_t)len;
    if (t->len + 2 + len > t->cap) {
        t->cap = (t->len + 2 + len) * 2 + 256;
        t->buf = mf_realloc(t->buf, t->cap);
    }
    size_t off = t->len;
    memcpy(t->buf + off, &l, 2);
    memcpy(t->buf + off + 2, key, len);
    t->len += 2 + len;
    t->n++;
}

/* Adds the entry for key of ix (record id rid appended on a non-unique index) to t. */
static void
removal_add_key(mf_removal_keys_t *t, const mf_index_t *ix, mf_keystring_t *key, int64_t rid)
{
    size_t base = key->len;
    if (ix->rid_in_key)
        mf_ks_append_recordid(key, rid);
    removal_add(t, key->data, key->len);
    key->len = base;
}

static int
span_cmp(const void *a, const void *b)
{
    const mf_key_span_t *x = a, *y = b;
    return mf_key_cmp(x->data, x->len, y->data, y->len);
}

/*
 * t's keys in key order (an index's, which the deletions' order, the TTL
 * index's, need not follow): spans into t->buf, valid until t changes.
 */
static const mf_key_span_t *
removal_sorted(mf_removal_keys_t *t)
{
    bool ordered = true;
    if (t->n > t->sorted_cap) {
        t->sorted_cap = t->n * 2;
        t->sorted = mf_realloc(t->sorted, t->sorted_cap * sizeof(*t->sorted));
        t->runs = mf_realloc(t->runs, t->sorted_cap * sizeof(*t->runs));
    }
    size_t off = 0;
    for (size_t i = 0; i < t->n; i++) {
        t->sorted[i].len = removal_key(t, off, &t->sorted[i].data);
        off += 2 + t->sorted[i].len;
        if (i > 0 && ordered && span_cmp(&t->sorted[i - 1], &t->sorted[i]) > 0)
            ordered = false;
    }
    if (!ordered)
        qsort(t->sorted, t->n, sizeof(*t->sorted), span_cmp);
    return t->sorted;
}

static int
rid_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

size_t
mf_rids_in_runs(const int64_t *ids, size_t n, int64_t *scratch)
{
    size_t in = 0;
    bool ordered = true; /* a TTL index's due range is often in record id order already */
    for (size_t i = 1; i < n && ordered; i++)
        ordered = ids[i - 1] <= ids[i];
    if (!ordered) {
        memcpy(scratch, ids, n * sizeof(*ids));
        qsort(scratch, n, sizeof(*scratch), rid_cmp);
        ids = scratch;
    }
    for (size_t i = 0; i < n;) {
        size_t first = i++;
        while (i < n && ids[i] == ids[i - 1] + 1)
            i++;
        if (i < n && ids[i] == ids[i - 1])
            return 0; /* an id twice: a collected record is still there for its second visit */
        if (i - first >= MF_RANGE_MIN_ITEMS)
            in += i - first;
    }
    return in;
}

void
mf_removals_begin(mf_removals_t *d, const mf_coll_t *c, bool rec_runs, bool indexes)
{
    if (d->nix < c->nindexes) {
        d->ix = mf_realloc(d->ix, (size_t)c->nindexes * sizeof(*d->ix));
        memset(d->ix + d->nix, 0, (size_t)(c->nindexes - d->nix) * sizeof(*d->ix));
        d->nix = c->nindexes;
    }
    d->rec.len = d->rec.n = 0;
    d->rec.on = rec_runs;
    for (int i = 0; i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        mf_removal_keys_t *t = &d->ix[i];
        t->len = t->n = 0;
        t->on = false;
        if (!indexes || ix->building)
            continue;
        int skip = atomic_load(&ix->range_skip);
        if (skip > 0)
            atomic_compare_exchange_strong(&ix->range_skip, &skip, skip - 1);
        else
            t->on = true;
    }
}

void
mf_removals_free(mf_removals_t *d)
{
    free(d->rec.buf);
    free(d->rec.sorted);
    free(d->rec.runs);
    for (int i = 0; i < d->nix; i++) {
        free(d->ix[i].buf);
        free(d->ix[i].sorted);
        free(d->ix[i].runs);
    }
    free(d->ix);
    memset(d, 0, sizeof(*d));
}

/*
 * The keys of a removed document olddoc for ix into ks: from known's value
 * when it is ix's (no walk of the document), else as keys_for finds them.
 */
static int
removed_keys(mf_coll_t *c, mf_index_t *ix, const bson_t *olddoc, const mf_known_value_t *known, mf_keyset_t *ks,
             mf_error_t *err)
{
    if (known != NULL && known->ix == ix) {
        if (!mf_index_covers(ix, olddoc)) {
            ks->n = 0;
            return 0;
        }
        int r = mf_index_keys_of_value(&ix->kp, &known->value, ks, err);
        if (r <= 0)
            return r;
    }
    return keys_for(NULL, c, ix, olddoc, ks, err);
}

/*
 * Applies the index changes of going from olddoc to newdoc (either may be
 * NULL) for record rid, across every index of c. A removal (newdoc NULL)
 * adds the keys of the indexes collecting in defer (may be NULL) to it
 * instead, and takes one index's keys from known (may be NULL).
 */
static int
update_indexes(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, const bson_t *newdoc,
               mf_removals_t *defer, const mf_known_value_t *known, mf_error_t *err)
{
    keybufs_t *kb = thread_keybufs();
    mf_keyset_t *oldk = &kb->oldk, *newk = &kb->newk;
    int ret = 0;

    for (int i = 0; i < c->nindexes && ret == 0; i++) {
        mf_index_t *ix = c->indexes[i];
        mf_cur_t *cur;
        if (newdoc == NULL && olddoc != NULL)
            ret = removed_keys(c, ix, olddoc, known, oldk, err);
        else
            ret = keys_for(NULL, c, ix, olddoc, oldk, err);
        if (ret != 0 || (ret = keys_for(s, c, ix, newdoc, newk, err)) != 0)
            break;
        if (oldk->n == 0 && newk->n == 0)
            continue;
        if (defer != NULL && newdoc == NULL && i < defer->nix && defer->ix[i].on) {
            bool fits = true; /* a key's length is kept in 2 bytes: a longer one is removed here */
            for (int k = 0; k < oldk->n && fits; k++)
                fits = oldk->keys[k].len + 9 <= UINT16_MAX;
            for (int k = 0; fits && k < oldk->n; k++)
                removal_add_key(&defer->ix[i], ix, &oldk->keys[k], rid);
            if (fits)
                continue;
        }
        /* A removal keeps the index's cursor on its last key: the next document's key is often just past it. */
        if ((newdoc == NULL ? mf_cur_open_near(s, ix->uri, &cur, err) : mf_cur_open(s, ix->uri, &cur, err)) != 0) {
            ret = -1;
            break;
        }
        for (int k = 0; k < oldk->n && ret == 0; k++) {
            if (!keyset_has(newk, &oldk->keys[k]))
                ret = index_del(ix, cur, &oldk->keys[k], rid, newdoc == NULL, err);
        }
        for (int k = 0; k < newk->n && ret == 0; k++) {
            const mf_keystring_t *was = mf_keyset_find(oldk, &newk->keys[k]);
            if (was == NULL || (ix->key_types && newdoc != NULL && !same_types(was, &newk->keys[k])))
                ret = index_put(s, c, ix, cur, &newk->keys[k], rid, newdoc, false, err); /* new, or retyped (5 to 5.0) */
        }
        if (newdoc == NULL)
            mf_cur_close_near(cur);
        else
            mf_cur_close(cur);
    }
    return ret;
}

/*
 * Removes the oldest records of capped collection c until it is within its
 * limits, sparing record keep (the one just inserted). Same transaction.
 */
static int
capped_trim(mf_sess_t *s, mf_coll_t *c, int64_t keep, mf_error_t *err)
{
    for (;;) {
        int64_t count, size;
        sizes_seen(c, &count, &size);
        if (!((c->capped_max > 0 && count > c->capped_max) || (c->capped_size > 0 && size > c->capped_size)))
            break;
        mf_cur_t *cur;
        bson_t old;
        int ret;
        if (mf_cur_open(s, c->uri, &cur, err) != 0)
            return -1;
        ret = mf_cur_next(cur);
        if (ret != 0) {
            mf_cur_close(cur);
            return ret == MF_NOTFOUND ? 0 : ret == MF_CONFLICT ? MF_CONFLICT : mf_err_set(err, MF_E_InternalError, "capped scan failed in %s", c->ns);
        }
        int64_t rid = mf_cur_rid(cur);
        const uint8_t *v;
        size_t len;
        mf_cur_value(cur, &v, &len);
        bson_t tmp;
        bool ok = rid != keep && bson_init_static(&tmp, v, len);
        if (ok)
            bson_copy_to(&tmp, &old);
        mf_cur_close(cur);
        if (!ok)
            return 0; /* only the new record is left */
        ret = mf_coll_remove(s, c, rid, &old, err);
        bson_destroy(&old);
        if (ret == MF_NOTFOUND)
            return MF_CONFLICT;
        if (ret != 0)
            return ret;
    }
    return 0;
}

/* A Date field f under doc's control.<which> (min or max). */
static bool
control_date(const bson_t *doc, const char *which, const char *f)
{
    char path[600];
    bson_iter_t it;
    snprintf(path, sizeof(path), "control.%s.%s", which, f);
    return bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &it) && BSON_ITER_HOLDS_DATE_TIME(&it);
}

/*
 * A document a client writes into a time-series collection's buckets
 * (system.buckets.<name>): mongod gives the buckets collection a
 * $jsonSchema validator; here the bucket must be one reads can unpack (the
 * unpacker's whole check) with an ObjectId _id and Date control.min and
 * control.max of the time field, which reads, the planner and the TTL
 * monitor rely on. One that is not would make every read of the collection
 * fail. 0, or 121 DocumentValidationFailure.
 */
static int
bucket_doc_check(const mf_coll_t *c, const bson_t *doc, mf_error_t *err)
{
    mf_ts_spec_t spec;
    bson_iter_t it;
    mf_error_t why;
    mf_err_clear(&why);
    if (!mf_ts_spec_of(c, &spec))
        return 0;
    mf_bucket_unpacker_t *u = mf_bucket_unpacker_new(&spec, doc, &why);
    bool ok = u != NULL && bson_iter_init_find(&it, doc, "_id") && BSON_ITER_HOLDS_OID(&it) &&
              control_date(doc, "min", spec.time_field) && control_date(doc, "max", spec.time_field);
    mf_bucket_unpacker_free(u);
    if (ok)
        return 0;
    return mf_err_set(err, MF_E_DocumentValidationFailure, "Document failed validation: not a time-series bucket of "
                      "%s%s%s", c->ns, why.code != 0 ? ": " : "", why.code != 0 ? why.msg : "");
}

/* The errInfo of a document that failed c's validator (err's info), mongod's details; under the validator's collation. */
static void
validation_failure_info(const mf_coll_t *c, const bson_t *newdoc, mf_error_t *err)
{
    bson_iter_t it;
    bson_t spec, details, info, ei;
    if (!bson_iter_init_find(&it, c->options, "validator") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return;
    const uint8_t *data;
    uint32_t len;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&spec, data, len))
        return;
    for (uint32_t budget = 700; budget >= 100; budget /= 2) {
        mf_matcher_failure_details(&spec, newdoc, &details, budget);
        bson_init(&info);
        BSON_APPEND_DOCUMENT_BEGIN(&info, "errInfo", &ei);
        if (bson_iter_init_find(&it, newdoc, "_id"))
            bson_append_value(&ei, "failingDocumentId", -1, bson_iter_value(&it));
        BSON_APPEND_DOCUMENT(&ei, "details", &details);
        bson_append_document_end(&info, &ei);
        bson_destroy(&details);
        bool fits = info.len <= sizeof(err->info);
        if (fits)
            mf_err_set_info(err, bson_get_data(&info), info.len);
        bson_destroy(&info);
        if (fits)
            return;
    }
    /* Too large to explain: still say which rule kind failed. */
    bson_init(&info);
    BSON_APPEND_DOCUMENT_BEGIN(&info, "errInfo", &ei);
    BSON_APPEND_DOCUMENT_BEGIN(&ei, "details", &details);
    BSON_APPEND_UTF8(&details, "operatorName", "$and");
    bson_append_document_end(&ei, &details);
    bson_append_document_end(&info, &ei);
    mf_err_set_info(err, bson_get_data(&info), info.len);
    bson_destroy(&info);
}

/*
 * validationAction "warn": mongod's log line 20294 "Document would fail
 * validation" with attr {namespace, document, errInfo} (collection_impl.cpp
 * checkValidation), errInfo as a 121 would carry it.
 */
static void
log_would_fail(const mf_coll_t *c, const bson_t *newdoc)
{
    mf_error_t e;
    bson_t attr, info;
    bson_iter_t it;
    char ctx[32];
    mf_err_clear(&e);
    validation_failure_info(c, newdoc, &e);
    bson_init(&attr);
    BSON_APPEND_UTF8(&attr, "namespace", c->ns);
    BSON_APPEND_DOCUMENT(&attr, "document", newdoc);
    if (e.info_len > 0 && bson_init_static(&info, e.info, e.info_len) && bson_iter_init_find(&it, &info, "errInfo"))
        bson_append_value(&attr, "errInfo", -1, bson_iter_value(&it));
    int64_t conn = mf_curop_client_id(mf_curop_current());
    if (conn > 0)
        snprintf(ctx, sizeof(ctx), "conn%lld", (long long)conn);
    else
        snprintf(ctx, sizeof(ctx), "%s", "-");
    char *json = bson_as_relaxed_extended_json(&attr, NULL);
    if (json != NULL)
        mf_log_attr(MF_LOG_WARN, "STORAGE", 20294, ctx, "Document would fail validation", json);
    bson_free(json);
    bson_destroy(&attr);
}

int
mf_coll_schema_check(mf_coll_t *c, const bson_t *doc)
{
    if (c->validator == NULL || c->validation_level == MF_VALIDATION_OFF)
        return 0;
    const mf_collation_t *saved = mf_collation_current();
    mf_collation_set_current(c->validator_coll);
    int r = mf_matcher_match(c->validator, doc, NULL) ? 0 : c->validation_action == MF_VALIDATION_WARN ? 1 : 2;
    if (r == 1)
        log_would_fail(c, doc);
    mf_collation_set_current(saved);
    return r;
}

int
mf_coll_validate(mf_coll_t *c, const bson_t *newdoc, const bson_t *olddoc, mf_error_t *err)
{
    if (c->is_timeseries && !c->is_view && bucket_doc_check(c, newdoc, err) != 0)
        return -1;
    if (c->validator == NULL || c->validation_level == MF_VALIDATION_OFF)
        return 0;
    /* Under the collection's collation, whatever the write's (catalog.c parse_options). */
    const mf_collation_t *saved = mf_collation_current();
    mf_collation_set_current(c->validator_coll);
    bool pass = mf_matcher_match(c->validator, newdoc, NULL) ||
                (olddoc != NULL && c->validation_level == MF_VALIDATION_MODERATE &&
                 !mf_matcher_match(c->validator, olddoc, NULL));
    if (!pass && c->validation_action == MF_VALIDATION_WARN) {
        log_would_fail(c, newdoc);
        pass = true;
    }
    if (!pass) {
        mf_err_set(err, MF_E_DocumentValidationFailure, "Document failed validation");
        validation_failure_info(c, newdoc, err);
    }
    mf_collation_set_current(saved);
    return pass ? 0 : -1;
}

int64_t
mf_rids_take(mf_rids_t *r, mf_coll_t *c, int64_t want)
{
    if (r->next >= r->end) {
        want = c->capped || want < 1 ? 1 : want;
        r->next = atomic_fetch_add(&c->next_rid, want);
        r->end = r->next + want;
    }
    return r->next++;
}

int
mf_coll_insert(mf_sess_t *s, mf_coll_t *c, const bson_t *doc, int64_t *rid_out, mf_error_t *err)
{
    int64_t rid = atomic_fetch_add(&c->next_rid, 1);
    int ret = mf_coll_insert_rid(s, c, doc, rid, err);
    if (ret == 0 && rid_out)
        *rid_out = rid;
    return ret;
}

/* Writes doc as record rid of c through cur: 0, MF_CONFLICT, or -1 with err. */
static int
record_put(mf_cur_t *cur, mf_coll_t *c, const bson_t *doc, int64_t rid, mf_error_t *err)
{
    int ret = mf_cur_insert_rid(cur, rid, bson_get_data(doc), doc->len);
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    if (ret != 0)
        return mf_err_set(err, MF_E_InternalError, "record insert failed in %s", c->ns);
    return 0;
}

/* After a new document's record and keys: its count and size, and the write observers. */
static void
doc_inserted(mf_sess_t *s, mf_coll_t *c, const bson_t *doc)
{
    size_delta(s, c, 1, doc->len);
    mf_observers_insert(c->observers, c, doc);
}

int
mf_coll_insert_rid(mf_sess_t *s, mf_coll_t *c, const bson_t *doc, int64_t rid, mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;

    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    ret = record_put(cur, c, doc, rid, err);
    mf_cur_close(cur);
    if (ret != 0)
        return ret;
    ret = update_indexes(s, c, rid, NULL, doc, NULL, NULL, err);
    if (ret != 0)
        return ret;
    doc_inserted(s, c, doc);
    if (c->capped)
        return capped_trim(s, c, rid, err);
    return 0;
}

int
mf_coll_keys_prepare(mf_coll_t *c, const bson_t *doc, int slot)
{
    if (c->capped || c->nindexes > MF_PREP_MAX_INDEXES || slot < 0 || slot >= MF_PREP_SLOTS)
        return 1;
    keybufs_t *kb = thread_keybufs();
    if (kb->prep == NULL)
        kb->prep = mf_calloc(MF_PREP_SLOTS, sizeof(*kb->prep));
    prep_slot_t *p = &kb->prep[slot];
    mf_error_t err;
    p->multikey = 0;
    for (int i = 0; i < c->nindexes; i++) {
        bool multikey;
        if (i == p->nsets)
            mf_keyset_init(&p->sets[p->nsets++]);
        if (keys_make(c->indexes[i], doc, &p->sets[i], &multikey, &err) != 0)
            return 1; /* mf_coll_insert_rid makes them again and reports the error */
        if (multikey)
            p->multikey |= UINT64_C(1) << i;
    }
    return 0;
}

int
mf_coll_insert_record(mf_sess_t *s, mf_coll_t *c, const bson_t *doc, int64_t rid, mf_error_t *err)
{
    keybufs_t *kb = thread_keybufs();
    if (kb->rec_cur == NULL && mf_cur_open(s, c->uri, &kb->rec_cur, err) != 0) {
        kb->rec_cur = NULL;
        return -1;
    }
    return record_put(kb->rec_cur, c, doc, rid, err);
}

void
mf_coll_prepared_release(void)
{
    keybufs_t *kb = thread_keybufs();
    if (kb->rec_cur != NULL) {
        mf_cur_close(kb->rec_cur);
        kb->rec_cur = NULL;
    }
}

int
mf_coll_insert_prepared_keys(mf_sess_t *s, mf_coll_t *c, const mf_prepared_t *docs, int n, int *failed,
                             mf_error_t *err)
{
    keybufs_t *kb = thread_keybufs();
    int ret = 0;

    mf_coll_prepared_release();
    *failed = 0;
    /* Index by index, each document's keys in turn: one table's pages at a time. */
    for (int i = 0; i < c->nindexes && ret == 0; i++) {
        mf_index_t *ix = c->indexes[i];
        mf_cur_t *cur = NULL;
        for (int k = 0; k < n && ret == 0; k++) {
            prep_slot_t *p = &kb->prep[docs[k].slot];
            mf_keyset_t *keys = &p->sets[i];
            *failed = k;
            if ((ret = keys_note_multikey(s, c, ix, (p->multikey >> i) & 1, docs[k].doc, err)) != 0)
                break;
            if (keys->n > 0 && cur == NULL && mf_cur_open(s, ix->uri, &cur, err) != 0) {
                cur = NULL;
                ret = -1;
                break;
            }
            for (int j = 0; j < keys->n && ret == 0; j++)
                ret = index_put(s, c, ix, cur, &keys->keys[j], docs[k].rid, docs[k].doc, false, err);
        }
        if (cur != NULL)
            mf_cur_close(cur);
    }
    if (ret != 0)
        return ret;
    for (int k = 0; k < n; k++)
        doc_inserted(s, c, docs[k].doc);
    return 0;
}

int
mf_coll_replace(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, const bson_t *newdoc,
                mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;

    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    ret = mf_cur_update_rid(cur, rid, bson_get_data(newdoc), newdoc->len);
    mf_cur_close(cur);
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    if (ret != 0)
        return mf_err_set(err, MF_E_InternalError, "record update failed in %s", c->ns);
    ret = update_indexes(s, c, rid, olddoc, newdoc, NULL, NULL, err);
    if (ret != 0)
        return ret;
    size_delta(s, c, 0, (int64_t)newdoc->len - (int64_t)olddoc->len);
    mf_observers_update(c->observers, c, olddoc, newdoc);
    return 0;
}

int
mf_coll_remove(mf_sess_t *s, mf_coll_t *c, int64_t rid, const bson_t *olddoc, mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;

    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    ret = mf_cur_remove_rid(cur, rid);
    mf_cur_close(cur);
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    if (ret == MF_NOTFOUND)
        return MF_NOTFOUND;
    if (ret != 0)
        return mf_err_set(err, MF_E_InternalError, "record remove failed in %s", c->ns);
    ret = update_indexes(s, c, rid, olddoc, NULL, NULL, NULL, err);
    if (ret != 0)
        return ret;
    size_delta(s, c, -1, -(int64_t)olddoc->len);
    mf_observers_delete(c->observers, c, olddoc);
    return 0;
}

int
mf_coll_remove_if(mf_sess_t *s, mf_coll_t *c, int64_t rid, mf_remove_check_fn check, void *arg, mf_removals_t *defer,
                  bool *removed, mf_error_t *err)
{
    mf_cur_t *cur;
    const uint8_t *v;
    size_t len;
    bson_t doc;
    mf_known_value_t known = {0};
    int ret;

    *removed = false;
    /* Batches delete in index order, often record id order too: the record cursor stays near (storage.h). */
    if (mf_cur_open_near(s, c->uri, &cur, err) != 0)
        return -1;
    ret = mf_cur_find_rid(cur, rid);
    if (ret != 0) {
        mf_cur_close_near(cur);
        return ret == MF_NOTFOUND ? 0 : ret == MF_CONFLICT ? MF_CONFLICT
                                                           : mf_err_set(err, MF_E_InternalError, "record read failed in %s", c->ns);
    }
    /* The view stays valid while cur stays positioned: index work uses other cursors. */
    mf_cur_value(cur, &v, &len);
    if (!bson_init_static(&doc, v, len)) {
        mf_cur_close(cur);
        return mf_err_set(err, MF_E_InternalError, "corrupt record %lld in %s", (long long)rid, c->ns);
    }
    if (check != NULL && !check(arg, rid, &doc, &known)) {
        mf_cur_close_near(cur);
        return 0;
    }
    ret = update_indexes(s, c, rid, &doc, NULL, defer, &known, err);
    if (ret == 0)
        mf_observers_delete(c->observers, c, &doc);
    uint32_t doclen = doc.len;
    if (ret == 0 && defer != NULL && defer->rec.on) {
        uint8_t be[8];
        rid_be(rid, be);
        removal_add(&defer->rec, be, 8); /* removed with the others before the commit */
    } else if (ret == 0) {
        ret = mf_cur_remove_here(cur); /* still on the record: no second search */
    }
    mf_cur_close_near(cur);
    if (ret == MF_CONFLICT)
        return MF_CONFLICT;
    if (ret == MF_NOTFOUND)
        return 0;
    if (ret != 0)
        return err->code ? -1 : mf_err_set(err, MF_E_InternalError, "record remove failed in %s", c->ns);
    size_delta(s, c, -1, -(int64_t)doclen);
    *removed = true;
    return 0;
}

/*
 * Removes table uri's collected keys t (record ids if rec), in key order:
 * each run of them that nothing else lies between goes as one truncate
 * when it holds at least MF_RANGE_MIN_ITEMS, the rest one by one. Record
 * ids: every run of consecutive ids (see mf_coll_remove_deferred for why
 * nothing else is there). Index entries, only with may_check: the runs a
 * walk finds where the transaction sees exactly the collected entries,
 * compared key by key (a count alone would let an entry of another
 * document stand in for one of ours that the index lacks, and truncate
 * it); a walk that finds more than half the keys in short runs stops and
 * they all go one by one. *ranged: how many keys went in ranges.
 */
static int
removal_run(mf_sess_t *s, const char *uri, mf_removal_keys_t *t, bool rec, bool may_check, size_t *ranged,
            mf_error_t *err)
{
    mf_cur_t *cur = NULL;
    size_t nruns = 0;
    int ret = 0;

    *ranged = 0;
    if (t->n == 0)
        return 0;
    const mf_key_span_t *keys = removal_sorted(t);
    if (rec) {
        for (size_t i = 0; i < t->n;) {
            size_t first = i++;
            while (i < t->n && rid_from_be(keys[i].data) == rid_from_be(keys[i - 1].data) + 1)
                i++;
            t->runs[nruns++] = i - first;
        }
    } else if (may_check && t->n >= MF_RANGE_MIN_ITEMS) {
        if (mf_cur_open(s, uri, &cur, err) != 0)
            return -1;
        ret = mf_cur_range_runs(cur, keys, t->n, MF_RANGE_MIN_ITEMS, t->n / 2, t->runs, &nruns);
        mf_cur_close(cur);
        cur = NULL;
        if (ret != 0)
            return ret == MF_CONFLICT ? MF_CONFLICT : mf_err_set(err, MF_E_InternalError, "reading %s failed", uri);
    }
    bool known = nruns > 0;
    if (!known) {
        t->runs[0] = t->n; /* not checked, or too scattered: one by one */
        nruns = 1;
    }
    size_t i = 0;
    for (size_t r = 0; ret == 0 && r < nruns; r++) {
        size_t len = t->runs[r];
        if (known && len >= MF_RANGE_MIN_ITEMS) {
            ret = mf_truncate_range(s, uri, keys[i].data, keys[i].len, keys[i + len - 1].data, keys[i + len - 1].len,
                                    err);
            if (ret == 0)
                *ranged += len;
            i += len;
            continue;
        }
        if (cur == NULL && mf_cur_open(s, uri, &cur, err) != 0)
            return -1;
        for (size_t end = i + len; ret == 0 && i < end; i++) {
            ret = rec ? mf_cur_remove_rid(cur, rid_from_be(keys[i].data))
                      : mf_cur_remove_bytes(cur, keys[i].data, keys[i].len);
            if (ret == MF_NOTFOUND)
                ret = 0;
        }
        if (ret != 0 && ret != MF_CONFLICT)
            ret = mf_err_set(err, MF_E_InternalError, "removing from %s failed", uri);
    }
    if (cur != NULL)
        mf_cur_close(cur);
    return ret;
}

#define RANGE_SKIP_TXNS 64 /* transactions an index whose keys mostly did not go as ranges waits before it tries again */

int
mf_coll_remove_deferred(mf_sess_t *s, mf_coll_t *c, mf_removals_t *d, int64_t token, size_t *rec_ranged,
                        int *ix_ranges, mf_error_t *err)
{
    size_t ranged = 0;
    int ret = 0;

    *ix_ranges = 0;
    ret = removal_run(s, c->uri, &d->rec, true, true, rec_ranged, err);
    /* A writer entered the guard since the transaction began: its entries could be in a range, unseen. */
    bool guarded = mf_rguard_unchanged(&c->guard, token);
    for (int i = 0; ret == 0 && i < d->nix && i < c->nindexes; i++) {
        mf_removal_keys_t *t = &d->ix[i];
        mf_index_t *ix = c->indexes[i];
        if (t->n == 0)
            continue;
        ret = removal_run(s, ix->uri, t, false, guarded, &ranged, err);
        *ix_ranges += ranged > 0;
        if (ret == 0 && guarded && ranged < t->n / 2)
            atomic_store(&ix->range_skip, RANGE_SKIP_TXNS);
    }
    if (ret == 0 && *ix_ranges > 0)
        mf_txn_commit_unless_entered(s, &c->guard, token);
    return ret;
}

int
mf_coll_find_id(mf_sess_t *s, mf_coll_t *c, const bson_value_t *idv, int64_t *rid, mf_error_t *err)
{
    mf_index_t *ix = c->nindexes > 0 && c->indexes[0]->is_id ? c->indexes[0] : NULL;
    mf_keystring_t key;
    mf_cur_t *cur;
    int ret;

    if (ix == NULL)
        return mf_err_set(err, MF_E_InternalError, "collection %s has no _id index", c->ns);
    mf_ks_init(&key);
    if (mf_index_key_of_value(&ix->kp, idv, &key, err) != 0) {
        mf_ks_destroy(&key);
        return -1;
    }
    if (mf_cur_open(s, ix->uri, &cur, err) != 0) {
        mf_ks_destroy(&key);
        return -1;
    }
    ret = mf_cur_search_bytes(cur, key.data, key.len);
    if (ret == 0) {
        const uint8_t *v;
        size_t vlen;
        mf_cur_value(cur, &v, &vlen);
        *rid = vlen >= 8 ? rid_from_be(v) : 0;
    }
    mf_cur_close(cur);
    mf_ks_destroy(&key);
    return ret;
}

int
mf_coll_fetch(mf_sess_t *s, mf_coll_t *c, int64_t rid, bson_t *out, mf_error_t *err)
{
    mf_cur_t *cur;
    int ret;

    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    ret = mf_cur_search_rid(cur, rid);
    if (ret == 0) {
        const uint8_t *v;
        size_t len;
        mf_cur_value(cur, &v, &len);
        bson_t tmp;
        if (bson_init_static(&tmp, v, len))
            bson_copy_to(&tmp, out);
        else
            ret = mf_err_set(err, MF_E_InternalError, "corrupt record %lld in %s", (long long)rid, c->ns);
    }
    mf_cur_close(cur);
    return ret;
}

/*
 * Called by mf_catalog_index_add with the write lock held: builds ix over all
 * documents, committing every 1000 documents and reporting progress to fn
 * after each commit. The caller drops ix's table on failure.
 */
int mf_coll_index_build(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, mf_build_progress_fn fn, void *arg,
                        mf_error_t *err);

int
mf_coll_index_build(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, mf_build_progress_fn fn, void *arg,
                    mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    mf_cur_t *rc, *ic;
    mf_keyset_t ks;
    int ret = 0;
    int64_t done = 0, in_txn = 0;

    if (mf_cur_open(s, c->uri, &rc, err) != 0)
        return -1;
    if (mf_cur_open(s, ix->uri, &ic, err) != 0) {
        mf_cur_close(rc);
        return -1;
    }
    mf_keyset_init(&ks);
    if (mf_txn_begin(s, err) != 0) {
        ret = -1;
        goto out;
    }
    int nr = MF_NOTFOUND;
    while (ret == 0 && (nr = mf_cur_next(rc)) == 0) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        int64_t rid = mf_cur_rid(rc);
        mf_cur_value(rc, &v, &len);
        if (!bson_init_static(&doc, v, len))
            continue;
        if (keys_for(NULL, c, ix, &doc, &ks, err) != 0) {
            ret = -1;
            break;
        }
        for (int k = 0; k < ks.n && ret == 0; k++)
            ret = index_put(s, c, ix, ic, &ks.keys[k], rid, &doc, true, err);
        done++;
        if (++in_txn >= 1000 && ret == 0) {
            /* Commit in chunks so a large build does not hold one huge transaction. */
            ret = mf_txn_commit(s, false, err);
            if (ret == 0)
                ret = mf_txn_begin(s, err);
            in_txn = 0;
            if (ret == 0 && fn != NULL && !fn(arg, done, atomic_load(&c->approx_count)))
                ret = mf_err_set(err, MF_E_Interrupted, "Index build aborted: %s on %s: operation was interrupted",
                                 ix->name, c->ns);
        }
    }
    /* A storage error ends the scan early: the build fails instead of leaving an index with missing keys. */
    if (ret == 0 && nr != MF_NOTFOUND)
        ret = nr == MF_CONFLICT ? MF_CONFLICT : mf_err_set(err, MF_E_InternalError, "storage error while scanning %s to build index %s", c->ns, ix->name);
    if (ret == 0 && fn != NULL)
        (void)fn(arg, done, done);
    if (ret == MF_CONFLICT)
        ret = mf_err_set(err, MF_E_WriteConflict, "write conflict during index build");
    if (ret == 0)
        ret = mf_txn_commit(s, true, err);
    else
        mf_txn_abort(s);
out:
    mf_keyset_destroy(&ks);
    mf_cur_close(ic);
    mf_cur_close(rc);
    return ret;
}

void
mf_build_dups_free(mf_build_dups_t *d)
{
    free(d->key);
    d->key = NULL;
    d->have = false;
}

/* Keeps err (a duplicate of key in the index at position index) in d when it comes first; err is cleared. */
static void
build_dup_note(mf_build_dups_t *d, int index, const mf_keystring_t *key, mf_error_t *err)
{
    bool first = !d->have || index < d->index;
    if (d->have && index == d->index) {
        size_t m = key->len < d->len ? key->len : d->len;
        int cmp = memcmp(key->data, d->key, m);
        first = cmp < 0 || (cmp == 0 && key->len < d->len);
    }
    if (first) {
        free(d->key);
        d->key = mf_malloc(key->len ? key->len : 1);
        memcpy(d->key, key->data, key->len);
        d->len = key->len;
        d->index = index;
        d->err = *err;
        d->have = true;
    }
    mf_err_clear(err);
}

int
mf_coll_index_build_chunk(mf_sess_t *s, mf_coll_t *c, mf_index_t *const *ixs, int n, int64_t *after,
                          int64_t max_docs, int64_t *ndocs, bool *eof, mf_build_dups_t *dups, mf_error_t *err)
{
    mf_cur_t *rc = NULL, *ic[MF_MAX_INDEXES] = {0};
    mf_keyset_t ks;
    int64_t last = *after, done = 0;
    int ret = 0, r;

    *eof = false;
    mf_keyset_init(&ks);
    if (mf_txn_begin(s, err) != 0) {
        mf_keyset_destroy(&ks);
        return -1;
    }
    if (mf_cur_open(s, c->uri, &rc, err) != 0) {
        ret = -1;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (mf_cur_open(s, ixs[i]->uri, &ic[i], err) != 0) {
            ret = -1;
            goto out;
        }
    }
    r = mf_cur_seek_rid_ge(rc, *after + 1);
    while (r == 0 && done < max_docs) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        int64_t rid = mf_cur_rid(rc);
        if ((r = mf_cur_reserve(rc)) != 0)
            break;
        mf_cur_value(rc, &v, &len);
        if (bson_init_static(&doc, v, len)) {
            for (int i = 0; i < n && ret == 0; i++) {
                if ((ret = keys_for(NULL, c, ixs[i], &doc, &ks, err)) != 0)
                    break;
                for (int k = 0; k < ks.n && ret == 0; k++) {
                    ret = index_put(s, c, ixs[i], ic[i], &ks.keys[k], rid, &doc, true, err);
                    if (ret == -1 && dups != NULL && err->code == MF_E_DuplicateKey) {
                        build_dup_note(dups, i, &ks.keys[k], err);
                        ret = 0;
                    }
                }
            }
        }
        if (ret != 0)
            goto out;
        last = rid;
        done++;
        r = mf_cur_next(rc);
    }
    if (r == MF_NOTFOUND)
        *eof = true;
    else if (r == MF_CONFLICT)
        ret = MF_CONFLICT;
    else if (r != 0)
        ret = mf_err_set(err, MF_E_InternalError, "reading %s during an index build failed", c->ns);
out:
    for (int i = 0; i < n; i++)
        mf_cur_close(ic[i]);
    if (rc)
        mf_cur_close(rc);
    mf_keyset_destroy(&ks);
    if (ret == 0) {
        if (mf_txn_commit(s, false, err) != 0)
            return err->code == MF_E_WriteConflict ? MF_CONFLICT : -1;
        *after = last;
        *ndocs = done;
        return 0;
    }
    mf_txn_abort(s);
    return ret;
}
