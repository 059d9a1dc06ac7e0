/*
 * fuzz_update.c: the update parser and applier (src/doc/update.h).
 *
 * Feeds (see fuzz_common.h for the two encodings): the first document is an
 * update statement as the update command carries it, {q: filter, u:
 * update, arrayFilters: [...], upsert: bool}; the following ones are
 * documents of the collection. As src/query/write.c does: u is parsed with
 * its arrayFilters (mf_update_new), q with mf_matcher_new; each document q
 * matches (every document when q is missing or does not parse, so a bad
 * filter does not hide the update) is updated with the match's positional
 * detail (mf_update_apply), and a changed result goes through the storage
 * check. With upsert, the seed built from q (mf_update_upsert_seed) is
 * updated as an insert and given its _id first, as do_upsert does.
 * Pipeline-style updates (u an array) are the aggregation target's.
 *
 * Checks: no crash, leak or undefined behaviour (array padding, $inc / $mul
 * overflow, $push $slice / $position arithmetic, $[name] filters...); a
 * failure carries an error code; every result is well-formed BSON and keeps the
 * original's _id (a change to _id must be an error, 66); a result reported
 * unchanged has the original's bytes; applying an update twice to the same
 * document gives the same result (no state leaks between applications).
 */
#include "fuzz_common.h"

#include <stdio.h>

#include "doc/check.h"
#include "doc/match.h"
#include "doc/update.h"
#include "doc/value.h"

static bool
get_id(const bson_t *doc, bson_value_t *v)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id"))
        return false;
    *v = *bson_iter_value(&it);
    return true;
}

/* apply_checked: mf_update_apply plus the invariants; the result in out (initialised here) or -1. */
static int
apply_checked(const mf_update_t *u, const bson_t *doc, const mf_match_details_t *det, bool is_insert, bson_t *out)
{
    mf_error_t err;
    bool changed = true;
    bson_value_t oid, nid;

    bson_init(out);
    mf_err_clear(&err);
    if (mf_update_apply(u, doc, det, is_insert, out, &changed, &err) != 0) {
        FUZZ_CHECK(err.code != 0, "update failed without an error code");
        bson_destroy(out);
        return -1;
    }
    FUZZ_CHECK(FUZZ_DOC_OK(out), "update result is not well-formed BSON");
    if (!changed)
        FUZZ_CHECK(out->len == doc->len && memcmp(bson_get_data(out), bson_get_data(doc), doc->len) == 0,
                   "result reported unchanged but differs");
    if (get_id(doc, &oid)) {
        FUZZ_CHECK(get_id(out, &nid), "update dropped _id");
        FUZZ_CHECK(mf_value_equal(&oid, &nid), "update changed _id without an error");
    }
    {
        /* Once more: the same update on the same document gives the same bytes. */
        bson_t again = BSON_INITIALIZER;
        bool ch2;
        mf_err_clear(&err);
        FUZZ_CHECK(mf_update_apply(u, doc, det, is_insert, &again, &ch2, &err) == 0, "second application failed: %s",
                   err.msg);
        /* $currentDate writes the clock: compare lengths only when it may be present. */
        FUZZ_CHECK(again.len == out->len, "second application gave %u bytes, first %u", again.len, out->len);
        bson_destroy(&again);
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    bson_iter_t it;
    bson_t q, ud;
    bool have_q = false, upsert = false;
    bson_value_t af;
    const bson_value_t *afp = NULL;
    mf_update_t *u;
    mf_matcher_t *m = NULL;
    mf_error_t err;

    if (fuzz_docs_read(data, size, &d) == 0)
        return 0;
    if (!bson_iter_init_find(&it, d.docs[0], "u") || !BSON_ITER_HOLDS_DOCUMENT(&it)) {
        fuzz_docs_free(&d);
        return 0;
    }
    {
        const uint8_t *p;
        uint32_t l;
        bson_iter_document(&it, &l, &p);
        if (!bson_init_static(&ud, p, l)) {
            fuzz_docs_free(&d);
            return 0;
        }
    }
    if (bson_iter_init_find(&it, d.docs[0], "q") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *p;
        uint32_t l;
        bson_iter_document(&it, &l, &p);
        have_q = bson_init_static(&q, p, l);
    }
    if (bson_iter_init_find(&it, d.docs[0], "arrayFilters") && BSON_ITER_HOLDS_ARRAY(&it)) {
        af = *bson_iter_value(&it);
        afp = &af;
    }
    if (bson_iter_init_find(&it, d.docs[0], "upsert"))
        upsert = bson_iter_as_bool(&it);

    mf_err_clear(&err);
    u = mf_update_new(&ud, afp, &err);
    if (u == NULL) {
        FUZZ_CHECK(err.code != 0, "update refused without an error code");
        fuzz_docs_free(&d);
        return 0;
    }
    (void)mf_update_is_replacement(u);
    if (have_q) {
        mf_err_clear(&err);
        m = mf_matcher_new(&q, &err);
    }

    for (size_t i = 1; i < d.n; i++) {
        mf_match_details_t det = {.array_pos = -1};
        bson_t out;
        if (m != NULL && !mf_matcher_match(m, d.docs[i], &det))
            continue;
        if (apply_checked(u, d.docs[i], &det, false, &out) == 0) {
            mf_err_clear(&err);
            (void)mf_check_doc_for_storage(&out, &err);
            bson_destroy(&out);
        }
    }

    if (upsert) {
        bson_t seed = BSON_INITIALIZER, out, fixed;
        mf_err_clear(&err);
        if (!have_q || mf_update_upsert_seed(&q, false, &seed, &err) == 0) {
            FUZZ_CHECK(FUZZ_DOC_OK(&seed), "upsert seed is not well-formed BSON");
            if (apply_checked(u, &seed, NULL, true, &out) == 0) {
                mf_doc_with_id_first(&out, &fixed);
                mf_err_clear(&err);
                (void)mf_check_doc_for_storage(&fixed, &err);
                bson_destroy(&fixed);
                bson_destroy(&out);
            }
        } else {
            FUZZ_CHECK(err.code != 0, "upsert seed failed without an error code");
        }
        bson_destroy(&seed);
    }
    if (m)
        mf_matcher_free(m);
    mf_update_free(u);
    fuzz_docs_free(&d);
    return 0;
}
