/*
 * fuzz_match.c: the matcher and query parser (src/doc/match.h, with the
 * $expr expressions of src/doc/expr.c and $jsonSchema of src/doc/jsonschema.c
 * that filters reach).
 *
 * Feeds (see fuzz_common.h for the two encodings): the first document is a
 * filter, as a find, update, delete or $match would pass it to
 * mf_matcher_new; the following ones are documents it is matched against
 * with mf_matcher_match. The filter also goes through mf_matcher_new_value
 * (the $pull / arrayFilters form) and is applied to every top-level value of
 * every document; for a document that does not match, the validator's
 * explanation mf_matcher_failure_details is built. The parsed filter is
 * also rendered as a planner error shows it (query/plan_cq.c walking the
 * matcher's read-only view, mf_match_node_view), from the matcher and,
 * for $nor / $and / $or, from their matchers too.
 *
 * Checks: no crash, leak or undefined behaviour (PCRE2 patterns, $expr
 * arithmetic, $mod, $size, $type, $bitsAll... on hostile values); a failed
 * parse carries an error code; the positional detail is -1 or a valid array
 * position; {$nor: [filter]} matches exactly the documents filter does not,
 * and {$and: [filter]} and {$or: [filter]} exactly those it does (the
 * logical operators must agree with the top level, whatever rewriting the
 * parser does); the failure explanation is well-formed BSON; the rendering
 * is NUL-terminated within its buffer and starts with the namespace.
 */
#include "fuzz_common.h"

#include <stdio.h>

#include "doc/match.h"
#include "query/plan.h"

/* The planner-error rendering of f as parsed by m: NUL-terminated within its buffer, ns first. */
static void
describe(const bson_t *f, const mf_matcher_t *m)
{
    char buf[600];
    mf_plan_request_t req = {.filter = f, .matcher = m};
    mf_plan_cq_describe("f.c", &req, buf, sizeof(buf));
    FUZZ_CHECK(memchr(buf, '\0', sizeof(buf)) != NULL, "rendering not terminated");
    FUZZ_CHECK(strncmp(buf, "ns=f.cTree: ", 12) == 0, "rendering starts with %.20s", buf);
}

/* wrap: {op: [filter]} */
static mf_matcher_t *
wrapped(const char *op, const bson_t *filter)
{
    bson_t w, arr;
    mf_error_t err;
    mf_matcher_t *m;

    bson_init(&w);
    bson_append_array_begin(&w, op, -1, &arr);
    bson_append_document(&arr, "0", 1, filter);
    bson_append_array_end(&w, &arr);
    mf_err_clear(&err);
    m = mf_matcher_new(&w, &err);
    bson_destroy(&w);
    return m;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    mf_matcher_t *m, *mv, *nor, *and, *or;
    mf_error_t err;
    bson_value_t fv;

    if (fuzz_docs_read(data, size, &d) == 0)
        return 0;
    mf_err_clear(&err);
    m = mf_matcher_new(d.docs[0], &err);
    if (m == NULL) {
        FUZZ_CHECK(err.code != 0, "filter refused without an error code");
        fuzz_docs_free(&d);
        return 0;
    }
    nor = wrapped("$nor", d.docs[0]);
    and = wrapped("$and", d.docs[0]);
    or = wrapped("$or", d.docs[0]);
    describe(d.docs[0], m);
    if (nor)
        describe(d.docs[0], nor); /* the tree of {$nor: [f]}, shown beside f's filter: only the walk matters */
    if (or)
        describe(d.docs[0], or);
    fv = fuzz_value_of_doc(d.docs[0], false);
    mf_err_clear(&err);
    mv = mf_matcher_new_value(&fv, &err);
    if (mv == NULL)
        FUZZ_CHECK(err.code != 0, "value filter refused without an error code");

    for (size_t i = 1; i < d.n; i++) {
        const bson_t *doc = d.docs[i];
        mf_match_details_t det = {.array_pos = -1};
        bool hit = mf_matcher_match(m, doc, &det);
        FUZZ_CHECK(det.array_pos >= -1, "array_pos %d", det.array_pos);
        FUZZ_CHECK(mf_matcher_match(m, doc, NULL) == hit, "matching twice gave two answers");
        if (nor)
            FUZZ_CHECK(mf_matcher_match(nor, doc, NULL) == !hit, "{$nor: [f]} gives %d, f gives %d",
                       !hit ? 0 : 1, hit);
        if (and)
            FUZZ_CHECK(mf_matcher_match(and, doc, NULL) == hit, "{$and: [f]} disagrees with f (%d)", hit);
        if (or)
            FUZZ_CHECK(mf_matcher_match(or, doc, NULL) == hit, "{$or: [f]} disagrees with f (%d)", hit);
        if (!hit) {
            bson_t why;
            mf_matcher_failure_details(d.docs[0], doc, &why, 4096);
            FUZZ_CHECK(FUZZ_DOC_OK(&why), "failure details are not well-formed BSON");
            bson_destroy(&why);
        }
        if (mv) {
            bson_iter_t it;
            if (bson_iter_init(&it, doc))
                while (bson_iter_next(&it))
                    (void)mf_matcher_match_value(mv, bson_iter_value(&it));
        }
    }
    if (mv)
        mf_matcher_free(mv);
    if (nor)
        mf_matcher_free(nor);
    if (and)
        mf_matcher_free(and);
    if (or)
        mf_matcher_free(or);
    mf_matcher_free(m);
    fuzz_docs_free(&d);
    return 0;
}
