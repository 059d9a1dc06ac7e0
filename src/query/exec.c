/*
 * exec.c: running a plan's access path (see exec.h).
 *
 * IXSCAN walks the plan's byte intervals with one index cursor and fetches
 * each record with one record cursor (both opened once per run, reused for
 * every key: no per-document allocation; documents are static views of
 * WiredTiger's memory, valid until the next cursor operation, which is after
 * the visitor returns). A key is inside an interval under prefix semantics
 * (mf_interval_key_cmp): the bound holds the leading components only, and a
 * key whose leading bytes equal the bound compares equal to it.
 *
 * Resumption: p->last_key holds the full key (components + record id for
 * non-unique indexes) of the last key examined, p->cur_iv the interval (in
 * scan order). A resumed forward scan seeks to last_key and steps past it; a
 * backward scan seeks there and steps back. Keys are unique in an index
 * table, so "past last_key" is exact even if documents changed meanwhile.
 * COLLSCAN resumes after p->last_rid. OR (an index union) runs its IXSCAN
 * inputs one after another, each as above, with p->cur_input the input
 * being scanned; record ids are de-duplicated across inputs in p->seen.
 * TEXT_OR runs as OR; each fetched document then passes the text checks
 * (mf_text_query_match), which give its score to the visitor's details.
 * A $text under $or (mf_plan_t.text_false) runs as OR too: a fetched
 * document the text query matches (and scores) must pass the caller's
 * matcher, one it does not the plan's text_false matcher.
 *
 * A covered plan (mf_plan_t.covered) fetches nothing: each key is decoded
 * with the type bits its entry holds (keyFormat 3) into the document the
 * visitor gets (covered_doc, mongod's rehydrateIndexKey), unless a covered
 * field's path has held an array since planning (still_covered), when the
 * scan goes back to fetching.
 *
 * DISTINCT_SCAN (run_distinct) seeks past each distinct prefix of the key
 * fields up to the distinct one, reading one key per value, forward or
 * backward, and resumes where it stopped (an aggregate's $group over it).
 *
 * Time limits: a thread-local deadline (monotonic ms, 0 = none) set by the
 * command layer; the scan loops look at the clock every kDeadlineEvery
 * documents or keys, so the check costs nothing measurable.
 */
#include "common/alloc.h"
#include "query/exec.h"

#include "common/clock.h"
#include "common/curop.h"
#include "common/fmt.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "catalog/coll_write.h"
#include "doc/text.h"
#include "index/keystring.h"

enum { kDeadlineEvery = 128 };

int
mf_exec_check_deadline(mf_error_t *err)
{
    /* maxTimeMS, killOp and shutdown: the calling thread's registered operation (common/curop.h). */
    return mf_curop_check_current(err);
}

static int
storage_err(int ret, const mf_coll_t *c, mf_error_t *err)
{
    if (ret == MF_CONFLICT)
        return mf_err_set(err, MF_E_WriteConflict, "WriteConflict during plan execution");
    return mf_err_set(err, MF_E_InternalError, "scan failed on %s", c->ns);
}

static int
run_idhack(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
           mf_error_t *err)
{
    int64_t rid;
    bson_t doc;
    mf_match_details_t d = {.array_pos = -1};
    mf_stage_t *st = p->leaf;
    int ret = mf_coll_find_id(s, c, &p->idv, &rid, err);

    p->done = true;
    st->keys_examined++;
    if (ret == MF_NOTFOUND)
        return 0;
    if (ret != 0)
        return ret == MF_CONFLICT ? mf_err_set(err, MF_E_WriteConflict, "WriteConflict during _id lookup") : -1;
    ret = mf_coll_fetch(s, c, rid, &doc, err);
    if (ret == MF_NOTFOUND)
        return 0;
    if (ret != 0)
        return ret == MF_CONFLICT ? mf_err_set(err, MF_E_WriteConflict, "WriteConflict") : -1;
    st->docs_examined++;
    ret = 0;
    if (m == NULL || mf_matcher_match(m, &doc, &d)) {
        st->n_returned++;
        ret = visit(arg, rid, &doc, &d);
    } else if (mf_matcher_take_failure(err)) {
        ret = -1;
    }
    bson_destroy(&doc);
    return ret < 0 ? -1 : 0;
}

static int
run_collscan(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
             mf_error_t *err)
{
    mf_stage_t *st = p->leaf;
    mf_cur_t *cur;
    int ret;
    bool fwd = st->direction >= 0;

    if (mf_cur_open(s, c->uri, &cur, err) != 0)
        return -1;
    if (!p->started || p->last_rid <= 0) {
        ret = fwd ? mf_cur_next(cur) : mf_cur_prev(cur);
    } else if (fwd) {
        ret = mf_cur_seek_rid_ge(cur, p->last_rid + 1);
    } else {
        ret = mf_cur_seek_rid_ge(cur, p->last_rid);
        if (ret == MF_NOTFOUND) {
            mf_cur_reset(cur);
            ret = mf_cur_prev(cur);
        } else if (ret == 0) {
            ret = mf_cur_prev(cur);
        }
    }
    p->started = true;
    while (ret == 0) {
        const uint8_t *v;
        size_t len;
        bson_t doc;
        mf_match_details_t d = {.array_pos = -1};
        int64_t rid = mf_cur_rid(cur);
        mf_cur_value(cur, &v, &len);
        st->docs_examined++;
        st->works++;
        if (st->works % kDeadlineEvery == 0 && mf_exec_check_deadline(err) != 0) {
            mf_cur_close(cur);
            return -1;
        }
        p->last_rid = rid;
        if (bson_init_static(&doc, v, len) && (m == NULL || mf_matcher_match(m, &doc, &d))) {
            st->n_returned++;
            int r = visit(arg, rid, &doc, &d);
            if (r < 0) {
                mf_cur_close(cur);
                return -1;
            }
            if (r > 0) {
                mf_cur_close(cur);
                return 0;
            }
        } else if (m != NULL && mf_matcher_take_failure(err)) {
            mf_cur_close(cur);
            return -1;
        }
        ret = fwd ? mf_cur_next(cur) : mf_cur_prev(cur);
    }
    mf_cur_close(cur);
    if (ret != MF_NOTFOUND)
        return storage_err(ret, c, err);
    p->done = true;
    return 0;
}

/* Remembers key as the scan position (buffer reused between keys). */
static void
save_key(mf_plan_t *p, const uint8_t *key, size_t len)
{
    if (len > p->last_key_cap) {
        p->last_key_cap = len * 2 + 16;
        p->last_key = mf_realloc(p->last_key, p->last_key_cap);
    }
    memcpy(p->last_key, key, len);
    p->last_key_len = len;
}

/* Positions cur at the first key of interval iv in direction fwd. */
static int
seek_interval(mf_cur_t *cur, const mf_interval_t *iv, bool fwd, uint8_t *tmp)
{
    int ret;
    if (fwd) {
        if (iv->lolen == 0) {
            mf_cur_reset(cur);
            return mf_cur_next(cur);
        }
        if (iv->lo_incl)
            return mf_cur_seek_bytes_ge(cur, iv->lo, iv->lolen);
        memcpy(tmp, iv->lo, iv->lolen);
        memset(tmp + iv->lolen, 0xff, 9);
        return mf_cur_seek_bytes_ge(cur, tmp, iv->lolen + 9);
    }
    if (iv->hilen == 0) {
        mf_cur_reset(cur);
        return mf_cur_prev(cur);
    }
    if (iv->hi_incl) {
        memcpy(tmp, iv->hi, iv->hilen);
        memset(tmp + iv->hilen, 0xff, 9);
        ret = mf_cur_seek_bytes_ge(cur, tmp, iv->hilen + 9);
    } else {
        ret = mf_cur_seek_bytes_ge(cur, iv->hi, iv->hilen);
    }
    if (ret == MF_NOTFOUND) {
        mf_cur_reset(cur);
        return mf_cur_prev(cur);
    }
    if (ret != 0)
        return ret;
    return mf_cur_prev(cur);
}

/*
 * Cursors an OR run shares between its inputs: opening a WiredTiger cursor
 * costs far more than a seek, and a $or of 1,000 branches often uses only a
 * few indexes. Up to kCurCache index cursors are kept, by index URI.
 */
enum { kCurCache = 8 };
typedef struct cur_cache {
    mf_cur_t *ccur; /* record cursor, NULL until first used */
    const char *uri[kCurCache];
    mf_cur_t *icur[kCurCache];
    int n;
} cur_cache_t;

static void
cur_cache_close(cur_cache_t *cc)
{
    for (int i = 0; i < cc->n; i++)
        mf_cur_close(cc->icur[i]);
    if (cc->ccur)
        mf_cur_close(cc->ccur);
    memset(cc, 0, sizeof(*cc));
}

/* One field of a covered key: the rest of its path at this depth and its value. */
typedef struct nest_ent {
    const char *rest;
    const bson_value_t *v;
} nest_ent_t;

/*
 * Appends e[0..n) to out in order, fields sharing a first component
 * grouped into one subdocument at its first place ({"a.b", c, "a.d"} is
 * {a: {b, d}, c}), as mongod's rehydrateIndexKey sets nested fields.
 */
static void
nest_fields(bson_t *out, const nest_ent_t *e, int n)
{
    bool used[MF_KP_MAX_FIELDS] = {false};
    for (int i = 0; i < n; i++) {
        if (used[i])
            continue;
        const char *dot = strchr(e[i].rest, '.');
        used[i] = true;
        if (dot == NULL) {
            bson_append_value(out, e[i].rest, -1, e[i].v);
            continue;
        }
        size_t nl = (size_t)(dot - e[i].rest);
        nest_ent_t sub[MF_KP_MAX_FIELDS];
        int m = 0;
        sub[m++] = (nest_ent_t){dot + 1, e[i].v};
        for (int j = i + 1; j < n; j++) {
            if (!used[j] && strncmp(e[j].rest, e[i].rest, nl) == 0 && e[j].rest[nl] == '.') {
                sub[m++] = (nest_ent_t){e[j].rest + nl + 1, e[j].v};
                used[j] = true;
            }
        }
        bson_t child;
        bson_append_document_begin(out, e[i].rest, (int)nl, &child);
        nest_fields(&child, sub, m);
        bson_append_document_end(out, &child);
    }
}

/*
 * A covered scan's document for one key of ix (mf_plan_t.covered): key's
 * components (klen bytes, no record id) decoded with the entry's type bits
 * tb into out (reinitialised here) as {field: value} by the key pattern,
 * dotted fields nested. vals is scratch. Returns 0 or -1 with err.
 */
static int
covered_doc(const mf_index_t *ix, const uint8_t *key, size_t klen, const uint8_t *tb, size_t tblen, bson_t *vals,
            bson_t *out, mf_error_t *err)
{
    const mf_keypattern_t *kp = &ix->kp;
    nest_ent_t e[MF_KP_MAX_FIELDS];
    bson_value_t v[MF_KP_MAX_FIELDS];
    bson_iter_t it;
    int n = 0;
    bson_reinit(vals);
    bson_reinit(out);
    if (mf_ks_decode_typed(key, klen, tb, tblen, kp->desc, kp->nfields, vals, err) != 0)
        return -1;
    if (!bson_iter_init(&it, vals))
        return mf_err_set(err, MF_E_InternalError, "bad index key in %s", ix->name);
    while (n < kp->nfields && bson_iter_next(&it)) {
        v[n] = *bson_iter_value(&it);
        e[n] = (nest_ent_t){kp->fields[n], &v[n]};
        n++;
    }
    nest_fields(out, e, n);
    return 0;
}

/*
 * index_gone: true when st's index ix (NULL: not found) was dropped, is
 * being built again or was dropped and rebuilt since planning: a resumed
 * plan over it cannot go on.
 */
static bool
index_gone(const mf_index_t *ix, const mf_stage_t *st)
{
    return ix == NULL || ix->building || (st->index_ident != NULL && strcmp(ix->ident, st->index_ident) != 0);
}

/*
 * scratch_len: the bytes a seek key of index stage st's scan needs (its
 * widest bound, or p's resume key, plus a record id), at least min.
 */
static size_t
scratch_len(const mf_stage_t *st, const mf_plan_t *p, size_t min)
{
    size_t len = min;
    for (size_t i = 0; i < st->niv; i++) {
        size_t need = (st->iv[i].lolen > st->iv[i].hilen ? st->iv[i].lolen : st->iv[i].hilen) + 16;
        if (need > len)
            len = need;
    }
    if (p->last_key_len + 16 > len)
        len = p->last_key_len + 16;
    return len;
}

/* Whether a covered scan may go on reading keys only: no covered field's path has held an array since planning. */
static bool
still_covered(const mf_plan_t *p, mf_index_t *ix)
{
    if (!atomic_load(&ix->multikey))
        return true;
    for (int f = 0; f < ix->kp.nfields && f < 32; f++)
        if ((p->cover_fields & (UINT32_C(1) << f)) && atomic_load(&ix->mk_paths[f]) != 0)
            return false;
    return true;
}

/*
 * Runs (or resumes) the IXSCAN st and its FETCH. orst is the OR stage st is
 * an input of (record ids are then de-duplicated across all inputs), or
 * NULL. cc, when not NULL, lends and keeps the cursors (else they are
 * opened and closed here). Returns 0 when st is exhausted, 1 when the
 * visitor stopped the scan, -1 on error.
 */
static int
scan_index(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, mf_stage_t *st, mf_stage_t *orst, cur_cache_t *cc,
           const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg, mf_error_t *err)
{
    mf_stage_t *fetch = p->fetch;
    mf_stage_t *tmatch = p->text != NULL ? mf_plan_find_stage(p, MF_ST_TEXT_MATCH) : NULL;
    mf_index_t *ix = mf_coll_index_by_name(c, st->index_name);
    mf_cur_t *icur = NULL, *ccur = NULL;
    bool own_icur = true, own_ccur = true;
    bool fwd = st->direction >= 0;
    uint8_t *tmp = NULL;
    size_t tmpcap = 0;
    int ret = MF_NOTFOUND, rc = 0;

    /* Dropped, or dropped and being (or been) built again: the resumed plan cannot go on. */
    if (index_gone(ix, st))
        return mf_err_set(err, MF_E_QueryPlanKilled, "query plan killed :: caused by :: index '%s' dropped",
                          st->index_name);
    bool dedup = ix->multikey || st->multikey || orst != NULL;
    if (cc != NULL) {
        for (int i = 0; i < cc->n && icur == NULL; i++) {
            if (strcmp(cc->uri[i], ix->uri) == 0)
                icur = cc->icur[i];
        }
        own_icur = icur == NULL && cc->n == kCurCache;
        own_ccur = false;
    }
    if (icur == NULL) {
        if (mf_cur_open(s, ix->uri, &icur, err) != 0)
            return -1;
        if (cc != NULL && !own_icur) {
            cc->uri[cc->n] = ix->uri;
            cc->icur[cc->n++] = icur;
        }
    }
    if (cc != NULL && cc->ccur == NULL && mf_cur_open(s, c->uri, &cc->ccur, err) != 0) {
        if (own_icur)
            mf_cur_close(icur);
        return -1;
    }
    if (cc != NULL) {
        ccur = cc->ccur;
    } else if (mf_cur_open(s, c->uri, &ccur, err) != 0) {
        mf_cur_close(icur);
        return -1;
    }
    tmpcap = scratch_len(st, p, tmpcap);
    tmp = mf_malloc(tmpcap);
    bson_t cvals = BSON_INITIALIZER, cdoc = BSON_INITIALIZER; /* a covered scan's scratch, reused per key */

    bool resume = p->started && p->last_key_len > 0;
    p->started = true;
    for (; p->cur_iv < st->niv; p->cur_iv++) {
        const mf_interval_t *iv = &st->iv[fwd ? p->cur_iv : st->niv - 1 - p->cur_iv];
        if (resume) {
            resume = false;
            ret = mf_cur_seek_bytes_ge(icur, p->last_key, p->last_key_len);
            if (fwd) {
                if (ret == 0) {
                    const uint8_t *k;
                    size_t kl;
                    mf_cur_key_bytes(icur, &k, &kl);
                    if (kl == p->last_key_len && memcmp(k, p->last_key, kl) == 0)
                        ret = mf_cur_next(icur);
                }
            } else if (ret == MF_NOTFOUND) {
                mf_cur_reset(icur);
                ret = mf_cur_prev(icur);
            } else if (ret == 0) {
                ret = mf_cur_prev(icur);
            }
        } else {
            ret = seek_interval(icur, iv, fwd, tmp);
        }
        while (ret == 0) {
            const uint8_t *key, *val;
            size_t klen, vlen;
            mf_cur_key_bytes(icur, &key, &klen);
            st->works++;
            if (st->works % kDeadlineEvery == 0 && mf_exec_check_deadline(err) != 0) {
                rc = -1;
                goto out;
            }
            if (fwd) {
                int r = mf_interval_key_cmp(key, klen, iv->hi, iv->hilen);
                if (r > 0 || (r == 0 && !iv->hi_incl))
                    break;
            } else {
                int r = mf_interval_key_cmp(key, klen, iv->lo, iv->lolen);
                if (r < 0 || (r == 0 && !iv->lo_incl))
                    break;
            }
            st->keys_examined++;
            if (orst)
                orst->keys_examined++;
            save_key(p, key, klen);
            int64_t rid;
            if (!ix->rid_in_key) {
                mf_cur_value(icur, &val, &vlen);
                rid = 0;
                for (size_t b = 0; b < vlen && b < 8; b++)
                    rid = (int64_t)(((uint64_t)rid << 8) | val[b]);
            } else {
                rid = klen >= 8 ? mf_ks_read_recordid(key, klen) : 0;
            }
            /*
             * Re-read the flag per key: a writer sets it before its first
             * multikey document commits, so any key of such a document seen
             * here is seen with the flag set, even when the scan began first.
             */
            if (!dedup && atomic_load(&ix->multikey))
                dedup = true;
            if (orst && rid > 0) {
                st->n_returned++;
                orst->dups_tested++;
            }
            if (rid <= 0 || (dedup && !mf_ridset_add(&p->seen, rid))) {
                if (orst && rid > 0)
                    orst->dups_dropped++;
                ret = fwd ? mf_cur_next(icur) : mf_cur_prev(icur);
                continue;
            }
            if (orst)
                orst->n_returned++;
            else
                st->n_returned++;
            if (p->keys_only && orst == NULL) {
                /* The bounds answer the whole filter: the key is the match (mf_plan_t.keys_only). */
                fetch->n_returned++;
                int r = visit(arg, rid, NULL, NULL);
                if (r != 0) {
                    rc = r < 0 ? -1 : 1;
                    goto out;
                }
                ret = fwd ? mf_cur_next(icur) : mf_cur_prev(icur);
                continue;
            }
            if (p->covered && orst == NULL && still_covered(p, ix)) {
                /* The key is the document's projected fields (mf_plan_t.covered): decoded, not fetched. */
                const uint8_t *tb = NULL;
                size_t tblen = 0;
                mf_cur_value(icur, &val, &vlen);
                if (!ix->rid_in_key) {
                    tb = vlen > 8 ? val + 8 : NULL;
                    tblen = vlen > 8 ? vlen - 8 : 0;
                } else {
                    tb = vlen > 0 ? val : NULL;
                    tblen = vlen;
                }
                mf_match_details_t d = {.array_pos = -1, .index_key = key, .index_key_pattern = st->key_pattern};
                d.index_key_len = ix->rid_in_key && klen >= 8 ? klen - 8 : klen;
                if (covered_doc(ix, key, d.index_key_len, tb, tblen, &cvals, &cdoc, err) != 0) {
                    rc = -1;
                    goto out;
                }
                if (st->filter != NULL && m != NULL && !mf_matcher_match(m, &cdoc, &d)) {
                    /* The filter's predicates the bounds leave, on the key's values (the IXSCAN filter). */
                    if (mf_matcher_take_failure(err)) {
                        rc = -1;
                        goto out;
                    }
                    st->n_returned--;
                    ret = fwd ? mf_cur_next(icur) : mf_cur_prev(icur);
                    continue;
                }
                fetch->n_returned++;
                int r = visit(arg, rid, &cdoc, &d);
                if (r != 0) {
                    rc = r < 0 ? -1 : 1;
                    goto out;
                }
                ret = fwd ? mf_cur_next(icur) : mf_cur_prev(icur);
                continue;
            }
            int fr = mf_cur_search_rid(ccur, rid);
            if (fr == 0) {
                const uint8_t *dv;
                size_t dl;
                bson_t doc;
                mf_match_details_t d = {.array_pos = -1, .index_key = key, .index_key_pattern = st->key_pattern};
                /* The key's components, without the record id that ends a non-unique index's key. */
                d.index_key_len = ix->rid_in_key && klen >= 8 ? klen - 8 : klen;
                mf_cur_value(ccur, &dv, &dl);
                fetch->docs_examined++;
                fetch->works++;
                bool ok = bson_init_static(&doc, dv, dl);
                if (ok && p->text_false != NULL) {
                    /* $text under $or: the text query decides which form of the filter the document must pass. */
                    d.has_text_score = mf_text_query_match(p->text, &doc, &d.text_score);
                    ok = d.has_text_score ? m == NULL || mf_matcher_match(m, &doc, &d)
                                          : mf_matcher_match(p->text_false, &doc, &d);
                } else {
                    ok = ok && (m == NULL || mf_matcher_match(m, &doc, &d));
                    if (ok && p->text != NULL) {
                        ok = mf_text_query_match(p->text, &doc, &d.text_score);
                        d.has_text_score = ok;
                        if (tmatch != NULL) {
                            tmatch->works++;
                            tmatch->n_returned += ok;
                        }
                    }
                }
                if (!ok && mf_matcher_take_failure(err)) {
                    rc = -1;
                    goto out;
                }
                if (ok) {
                    fetch->n_returned++;
                    int r = visit(arg, rid, &doc, &d);
                    if (r < 0) {
                        rc = -1;
                        goto out;
                    }
                    if (r > 0) {
                        rc = 1;
                        goto out;
                    }
                }
            } else if (fr != MF_NOTFOUND) {
                rc = storage_err(fr, c, err);
                goto out;
            }
            ret = fwd ? mf_cur_next(icur) : mf_cur_prev(icur);
        }
        if (ret != 0 && ret != MF_NOTFOUND) {
            rc = storage_err(ret, c, err);
            goto out;
        }
    }
out:
    free(tmp);
    bson_destroy(&cvals);
    bson_destroy(&cdoc);
    if (own_ccur)
        mf_cur_close(ccur);
    if (own_icur)
        mf_cur_close(icur);
    return rc;
}

/*
 * Where a DISTINCT_SCAN goes after handing out an entry whose first
 * components (the distinct prefix) take the first used bytes of key: past
 * every key sharing them. Forward, that is the first key at or after the
 * prefix followed by 0xff bytes (above any continuation); backward, the last
 * key before the prefix itself (every key holding it sorts at or after it).
 */
static int
distinct_skip(mf_cur_t *icur, const uint8_t *key, size_t used, bool fwd, uint8_t *tmp)
{
    memcpy(tmp, key, used);
    if (fwd) {
        memset(tmp + used, 0xff, 9);
        return mf_cur_seek_bytes_ge(icur, tmp, used + 9);
    }
    int ret = mf_cur_seek_bytes_ge(icur, tmp, used);
    if (ret == MF_NOTFOUND) {
        mf_cur_reset(icur);
        return mf_cur_prev(icur);
    }
    return ret != 0 ? ret : mf_cur_prev(icur);
}

/*
 * DISTINCT_SCAN (mongod's DistinctScan): walks the leaf's intervals with one
 * index cursor in the stage's direction, handing out the first entry (in
 * that direction) of each distinct prefix of fields 0..field_no and then
 * seeking past every key that shares that prefix (distinct_skip), so it
 * reads one key per distinct value (per combination of the fields before
 * it), not one per document. Each seek that lands on a key counts as a key
 * examined, the one found past the last interval too (as mongod's checker
 * counts the key that ends the scan). A key before the next interval seeks
 * to that interval. Covered (no FETCH): the visitor gets {key: value}, the
 * value decoded with the entry's type bits, dotted keys nested, or with
 * mf_plan_t.distinct_whole every key field ($groupByDistinctScan); else
 * the fetched document, re-checked by the matcher (a document that fails
 * it, or is gone, moves the scan to the next key, not past the value).
 * When the visitor stops the scan, the position (where the next seek goes:
 * p->last_key, p->cur_iv) is kept, and the next call resumes there (an
 * aggregate's getMore); a distinct runs it to the end in one call.
 */
static int
run_distinct(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
             mf_error_t *err)
{
    mf_stage_t *st = p->leaf, *fetch = p->fetch;
    mf_index_t *ix = mf_coll_index_by_name(c, st->index_name);
    mf_cur_t *icur = NULL, *ccur = NULL;
    uint8_t *tmp = NULL;
    size_t tmpcap = 64, iv = p->cur_iv;
    bool fwd = st->direction >= 0;
    bson_t vals = BSON_INITIALIZER, doc = BSON_INITIALIZER;
    int ret, rc = 0;

    if (index_gone(ix, st))
        return mf_err_set(err, MF_E_QueryPlanKilled, "query plan killed :: caused by :: index '%s' dropped",
                          st->index_name);
    /*
     * A $group's scan keys each value once only while the key's path holds no
     * array: should one have come since planning (a getMore after a write),
     * its groups would split by element, so the plan ends instead.
     */
    bool paths_known = false;
    for (int f = 0; f < ix->kp.nfields && !paths_known; f++)
        paths_known = atomic_load(&ix->mk_paths[f]) != 0;
    if (p->distinct_strict && atomic_load(&ix->multikey) &&
        (!paths_known || atomic_load(&ix->mk_paths[st->field_no]) != 0 || (p->distinct_whole && !still_covered(p, ix))))
        return mf_err_set(err, MF_E_QueryPlanKilled,
                          "query plan killed :: caused by :: index '%s' became multikey on the group key",
                          st->index_name);
    bool resume = p->started && p->last_key_len > 0;
    p->started = true;
    if (st->niv == 0 || p->done) {
        p->done = true;
        goto out;
    }
    if (mf_cur_open(s, ix->uri, &icur, err) != 0 || (fetch != NULL && mf_cur_open(s, c->uri, &ccur, err) != 0)) {
        rc = -1;
        goto out;
    }
    tmpcap = scratch_len(st, p, tmpcap);
    tmp = mf_malloc(tmpcap);
    /* Intervals are kept in ascending byte order: a backward scan takes them from the last. */
#define DS_IV(n) (&st->iv[fwd ? (n) : st->niv - 1 - (n)])
    if (resume)
        ret = distinct_skip(icur, p->last_key, p->last_key_len, fwd, tmp);
    else
        ret = seek_interval(icur, DS_IV(0), fwd, tmp);
    while (ret == 0) {
        const uint8_t *key, *val;
        size_t klen, vlen, used = 0;
        mf_cur_key_bytes(icur, &key, &klen);
        st->keys_examined++;
        st->works++;
        if (st->works % kDeadlineEvery == 0 && mf_exec_check_deadline(err) != 0) {
            rc = -1;
            goto out;
        }
        /* Past the interval: on to the first one that may hold the key, or done. */
        while (iv < st->niv) {
            const mf_interval_t *x = DS_IV(iv);
            int r = fwd ? mf_interval_key_cmp(key, klen, x->hi, x->hilen)
                        : -mf_interval_key_cmp(key, klen, x->lo, x->lolen);
            if (r < 0 || (r == 0 && (fwd ? x->hi_incl : x->lo_incl)))
                break;
            iv++;
        }
        if (iv == st->niv)
            break;
        const mf_interval_t *x = DS_IV(iv);
        int lr = fwd ? mf_interval_key_cmp(key, klen, x->lo, x->lolen) : -mf_interval_key_cmp(key, klen, x->hi, x->hilen);
        if (lr < 0 || (lr == 0 && !(fwd ? x->lo_incl : x->hi_incl))) {
            ret = seek_interval(icur, x, fwd, tmp);
            continue;
        }
        int64_t rid;
        const uint8_t *tb = NULL;
        size_t tblen = 0;
        mf_cur_value(icur, &val, &vlen);
        if (!ix->rid_in_key) {
            rid = 0;
            for (size_t b = 0; b < vlen && b < 8; b++)
                rid = (int64_t)(((uint64_t)rid << 8) | val[b]);
            tb = vlen > 8 ? val + 8 : NULL;
            tblen = vlen > 8 ? vlen - 8 : 0;
        } else {
            rid = klen >= 8 ? mf_ks_read_recordid(key, klen) : 0;
            tb = vlen > 0 ? val : NULL;
            tblen = vlen;
        }
        bson_reinit(&vals);
        if (mf_ks_decode_prefix(key, klen, tb, tblen, ix->kp.desc, st->field_no + 1, &vals, &used, err) != 0) {
            rc = -1;
            goto out;
        }
        mf_match_details_t d = {.array_pos = -1};
        int r = 0;
        if (fetch == NULL && p->distinct_whole) {
            /* Covered, every key field (the $group reads them): as a covered IXSCAN decodes its keys. */
            size_t kl = ix->rid_in_key && klen >= 8 ? klen - 8 : klen;
            if (covered_doc(ix, key, kl, tb, tblen, &vals, &doc, err) != 0) {
                rc = -1;
                goto out;
            }
            st->n_returned++;
            r = visit(arg, rid, &doc, &d);
        } else if (fetch == NULL) {
            /* Covered: {key: value} from the key (nested for a dotted key, as rehydrateIndexKey sets it). */
            bson_iter_t it;
            int n = 0;
            bool found = false;
            if (bson_iter_init(&it, &vals))
                while (!found && bson_iter_next(&it))
                    found = n++ == st->field_no;
            if (!found) {
                rc = mf_err_set(err, MF_E_InternalError, "bad index key in %s", ix->name);
                goto out;
            }
            bson_value_t v = *bson_iter_value(&it);
            nest_ent_t e = {ix->kp.fields[st->field_no], &v};
            bson_reinit(&doc);
            nest_fields(&doc, &e, 1);
            st->n_returned++;
            r = visit(arg, rid, &doc, &d);
        } else {
            int fr = mf_cur_search_rid(ccur, rid);
            if (fr != 0 && fr != MF_NOTFOUND) {
                rc = storage_err(fr, c, err);
                goto out;
            }
            bson_t fdoc;
            const uint8_t *dv;
            size_t dl;
            bool ok = fr == 0;
            if (ok) {
                mf_cur_value(ccur, &dv, &dl);
                fetch->docs_examined++;
                fetch->works++;
                ok = bson_init_static(&fdoc, dv, dl) && (m == NULL || mf_matcher_match(m, &fdoc, &d));
                if (!ok && m != NULL && mf_matcher_take_failure(err)) {
                    rc = -1;
                    goto out;
                }
            }
            if (!ok) {
                /* Gone, or not a match: another document may hold this value. */
                ret = fwd ? mf_cur_next(icur) : mf_cur_prev(icur);
                continue;
            }
            st->n_returned++;
            fetch->n_returned++;
            r = visit(arg, rid, &fdoc, &d);
        }
        if (r < 0) {
            rc = -1;
            goto out;
        }
        if (r > 0) {
            /* Stopped: the next call goes on past this prefix. */
            save_key(p, key, used);
            p->cur_iv = iv;
            goto out;
        }
        if (used + 9 > tmpcap) {
            tmpcap = used + 16;
            tmp = mf_realloc(tmp, tmpcap);
        }
        ret = distinct_skip(icur, key, used, fwd, tmp);
    }
#undef DS_IV
    p->done = true;
    if (ret != 0 && ret != MF_NOTFOUND)
        rc = storage_err(ret, c, err);
out:
    free(tmp);
    bson_destroy(&vals);
    bson_destroy(&doc);
    if (ccur != NULL)
        mf_cur_close(ccur);
    if (icur != NULL)
        mf_cur_close(icur);
    return rc;
}

static int
run_ixscan(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
           mf_error_t *err)
{
    int rc = scan_index(s, c, p, p->leaf, NULL, NULL, m, visit, arg, err);
    if (rc == 0)
        p->done = true;
    return rc < 0 ? -1 : 0;
}

/*
 * OR: the inputs one after another (p->cur_input), each resumable as a lone
 * IXSCAN; a record id seen from an earlier input (or earlier in this one) is
 * dropped, so each document is fetched and returned once.
 */
static int
run_or(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
       mf_error_t *err)
{
    mf_stage_t *orst = p->leaf;
    cur_cache_t cc = {0};
    int rc = 0;
    while (p->cur_input < orst->ninputs) {
        rc = scan_index(s, c, p, orst->inputs[p->cur_input], orst, &cc, m, visit, arg, err);
        if (rc != 0)
            break;
        p->cur_input++;
        p->cur_iv = 0;
        p->last_key_len = 0;
    }
    cur_cache_close(&cc);
    if (rc < 0)
        return -1;
    if (rc == 0)
        p->done = true;
    return 0;
}

/* Appends src to the NUL-terminated text in buf (cap bytes), cut to fit. */
static void
summary_add(char *buf, size_t cap, const char *src)
{
    size_t len = strlen(buf);
    if (len + 1 < cap)
        mf_strlcpy(buf + len, src, cap - len);
}

/*
 * A stage's part of a plan summary: "COLLSCAN", "IXSCAN { a: 1 }", an OR's
 * scans joined by ", ". Plain copies, no snprintf: every query's first
 * mf_exec_run writes it (find by _id writes "IDHACK").
 */
static void
stage_summary(const mf_stage_t *st, char *buf, size_t cap)
{
    if (st->kind == MF_ST_OR || st->kind == MF_ST_TEXT_OR) {
        for (size_t i = 0; i < st->ninputs && strlen(buf) + 2 < cap; i++) {
            if (i > 0)
                summary_add(buf, cap, ", ");
            stage_summary(st->inputs[i], buf, cap);
        }
        return;
    }
    summary_add(buf, cap, mf_plan_stage_name(st->kind));
    if ((st->kind == MF_ST_IXSCAN || st->kind == MF_ST_DISTINCT_SCAN) && st->key_pattern != NULL) {
        char kp[128];
        mf_fmt_doc(st->key_pattern, kp, sizeof(kp));
        if (kp[0]) {
            summary_add(buf, cap, " ");
            summary_add(buf, cap, kp);
        }
    }
}

/* mf_curop_note_scan's plan text: the plan's leaf (mongod's planSummary). */
static void
plan_summary(const void *arg, char *buf, size_t cap)
{
    buf[0] = '\0';
    stage_summary(((const mf_plan_t *)arg)->leaf, buf, cap);
}

/* The keys and documents p's scan has examined so far (what explain's executionStats report). */
static void
examined(const mf_plan_t *p, int64_t *keys, int64_t *docs)
{
    *keys = p->leaf->keys_examined;
    *docs = p->fetch ? p->fetch->docs_examined : p->leaf->docs_examined;
}

/* Counts one access of the index a scan stage reads ($indexStats). */
static void
count_access(mf_coll_t *c, const mf_stage_t *st)
{
    mf_index_t *ix = NULL;
    if (st->kind == MF_ST_IDHACK) {
        for (int i = 0; i < c->nindexes && ix == NULL; i++)
            if (c->indexes[i]->is_id)
                ix = c->indexes[i];
    } else if ((st->kind == MF_ST_IXSCAN || st->kind == MF_ST_DISTINCT_SCAN) && st->index_name != NULL) {
        ix = mf_coll_index_by_name(c, st->index_name);
    }
    if (ix != NULL)
        atomic_fetch_add_explicit(&ix->accesses, 1, memory_order_relaxed);
}

/*
 * $indexStats: a client query's plan uses each of its indexes once, on its
 * first run (a getMore resumes it: no new access), as mongod counts at the
 * end of a query's planning. An OR counts each index once. The server's own
 * scans (the TTL monitor) do not count. A plan that scans the whole
 * collection counts as one of its collection scans the same way
 * ($collStats queryExecStats: mongod's collectionScans, total and
 * nonTailable).
 */
static void
count_accesses(mf_coll_t *c, mf_plan_t *p)
{
    p->counted = true;
    if (mf_curop_is_background(mf_curop_current()))
        return;
    const mf_stage_t *leaf = p->leaf;
    if (leaf->kind == MF_ST_COLLSCAN) {
        atomic_fetch_add_explicit(&c->collscans, 1, memory_order_relaxed);
        if (!p->tailable)
            atomic_fetch_add_explicit(&c->collscans_nontailable, 1, memory_order_relaxed);
        return;
    }
    if (leaf->kind != MF_ST_OR && leaf->kind != MF_ST_TEXT_OR) {
        count_access(c, leaf);
        return;
    }
    for (size_t i = 0; i < leaf->ninputs; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = leaf->inputs[j]->index_name != NULL && leaf->inputs[i]->index_name != NULL &&
                   strcmp(leaf->inputs[j]->index_name, leaf->inputs[i]->index_name) == 0;
        if (!seen)
            count_access(c, leaf->inputs[i]);
    }
}

int
mf_exec_run(mf_sess_t *s, mf_coll_t *c, mf_plan_t *p, const mf_matcher_t *m, mf_exec_visit_fn visit, void *arg,
            mf_error_t *err)
{
    int64_t t0 = mf_mono_ms();
    int64_t keys0, docs0, keys1, docs1;
    int rc = 0;
    if (p->done || c == NULL)
        return 0;
    /* Its plan first, so currentOp shows it while the scan runs. */
    mf_curop_note_scan(mf_curop_current(), 0, 0, false, plan_summary, p);
    if (!p->counted)
        count_accesses(c, p);
    examined(p, &keys0, &docs0);
    switch (p->leaf->kind) {
    case MF_ST_IDHACK:
        rc = run_idhack(s, c, p, m, visit, arg, err);
        break;
    case MF_ST_COLLSCAN:
        rc = run_collscan(s, c, p, m, visit, arg, err);
        break;
    case MF_ST_IXSCAN:
        rc = run_ixscan(s, c, p, m, visit, arg, err);
        break;
    case MF_ST_DISTINCT_SCAN:
        rc = run_distinct(s, c, p, m, visit, arg, err);
        break;
    case MF_ST_OR:
    case MF_ST_TEXT_OR:
        rc = run_or(s, c, p, m, visit, arg, err);
        break;
    default:
        p->done = true;
        break;
    }
    p->exec_ms += mf_mono_ms() - t0;
    /* The operation's totals, for the profiler and the slow query log (a getMore's resumed scan adds its part). */
    examined(p, &keys1, &docs1);
    mf_curop_note_scan(mf_curop_current(), keys1 - keys0, docs1 - docs0, p->leaf->kind == MF_ST_COLLSCAN, plan_summary,
                       p);
    return rc;
}

int
mf_exec_query(mf_sess_t *s, mf_coll_t *c, const mf_plan_request_t *req, const mf_matcher_t *m, mf_exec_visit_fn visit,
              void *arg, mf_plan_t **plan_out, mf_error_t *err)
{
    mf_plan_t *p;
    if (plan_out)
        *plan_out = NULL;
    if (mf_plan_build(c, req, &p, err) != 0)
        return -1;
    int rc = mf_exec_run(s, c, p, m, visit, arg, err);
    if (plan_out)
        *plan_out = p;
    else
        mf_plan_free(p);
    return rc;
}

int
mf_exec_scan(mf_sess_t *s, mf_coll_t *c, const bson_t *filter, const mf_matcher_t *m, int64_t after_rid,
             mf_exec_visit_fn visit, void *arg, mf_exec_stats_t *stats, mf_error_t *err)
{
    mf_plan_request_t req = {.filter = filter, .force_collscan = after_rid > 0};
    mf_plan_t *p;
    if (mf_plan_build(c, &req, &p, err) != 0)
        return -1;
    if (after_rid > 0) {
        p->started = true;
        p->last_rid = after_rid;
        p->counted = true; /* a scan resumed by the server (a change stream's next read of the oplog): not a new query */
    }
    int rc = mf_exec_run(s, c, p, m, visit, arg, err);
    if (stats) {
        stats->plan = mf_plan_stage_name(p->leaf->kind);
        stats->keys_examined = p->leaf->keys_examined;
        stats->docs_examined = p->fetch ? p->fetch->docs_examined : p->leaf->docs_examined;
    }
    mf_plan_free(p);
    return rc;
}

int
mf_exec_first_visit(void *arg, int64_t rid, const bson_t *doc, const mf_match_details_t *details)
{
    mf_exec_first_t *f = arg;
    (void)doc;
    (void)details;
    f->rid = rid;
    f->found = true;
    return 1;
}
