/*
 * fuzz_text.c: text search (src/doc/text.h): index specs, a document's
 * terms and scores, $text query parsing, per-document matching.
 *
 * Feeds: the first document is a text index spec without its v and name
 * ({key: {...}, weights, default_language, language_override, ...}; a first
 * document without "key" is read as the $text operand instead, over the
 * index {key: {"$**": "text"}}); the second, when the first was a spec, is
 * the $text operand; the rest are documents.
 *
 * Checks: no crash, leak or undefined behaviour; every refusal carries an
 * error code; a normalised spec normalises to itself; every term is a
 * non-empty string with a finite positive score, and computing the terms
 * twice gives the same set; the query's scan terms are distinct and sorted;
 * a document that matches has a finite positive score, and matching twice
 * gives the same answer and score.
 */
#include "fuzz_common.h"

#include <math.h>
#include <stdio.h>

#include "doc/text.h"

static void
check_terms(const mf_text_spec_t *ts, const bson_t *doc)
{
    mf_text_terms_t t, u;
    mf_error_t err;
    mf_text_terms_init(&t);
    mf_text_terms_init(&u);
    mf_err_clear(&err);
    if (mf_text_doc_terms(ts, doc, &t, &err) != 0) {
        FUZZ_CHECK(err.code != 0, "terms refused without an error code");
    } else {
        for (size_t i = 0; i < t.n; i++) {
            FUZZ_CHECK(t.term[i][0] != '\0', "empty term");
            FUZZ_CHECK(isfinite(t.score[i]) && t.score[i] > 0, "term %s has score %g", t.term[i], t.score[i]);
        }
        FUZZ_CHECK(mf_text_doc_terms(ts, doc, &u, &err) == 0 && u.n == t.n, "terms differ on a second run");
    }
    mf_text_terms_destroy(&t);
    mf_text_terms_destroy(&u);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_docs_t d;
    bson_t spec, refixed;
    mf_error_t err;
    mf_text_spec_t *ts = NULL;
    mf_text_query_t *q = NULL;
    size_t first_doc;
    bson_value_t qv;

    if (fuzz_docs_read(data, size, &d) == 0)
        return 0;
    mf_err_clear(&err);
    if (bson_has_field(d.docs[0], "key")) {
        if (mf_text_spec_fix(d.docs[0], &spec, &err) != 0) {
            FUZZ_CHECK(err.code != 0, "spec refused without an error code");
            fuzz_docs_free(&d);
            return 0;
        }
        first_doc = 2;
    } else {
        bson_t *def = BCON_NEW("key", "{", "$**", BCON_UTF8("text"), "}");
        FUZZ_CHECK(mf_text_spec_fix(def, &spec, &err) == 0, "default spec refused: %s", err.msg);
        bson_destroy(def);
        first_doc = 1;
    }
    FUZZ_CHECK(mf_text_spec_fix(&spec, &refixed, &err) == 0 && bson_equal(&spec, &refixed),
               "a normalised spec does not normalise to itself");
    bson_destroy(&refixed);
    ts = mf_text_spec_new(&spec, &err);
    FUZZ_CHECK(ts != NULL, "normalised spec refused: %s", err.msg);
    for (size_t i = first_doc; i < d.n; i++)
        check_terms(ts, d.docs[i]);
    if (first_doc - 1 < d.n) {
        qv = fuzz_value_of_doc(d.docs[first_doc - 1], false);
        mf_err_clear(&err);
        q = mf_text_query_new(&qv, &spec, &err);
        if (q == NULL) {
            FUZZ_CHECK(err.code != 0, "$text refused without an error code");
        } else {
            for (size_t k = 1; k < mf_text_query_nterms(q); k++)
                FUZZ_CHECK(strcmp(mf_text_query_term(q, k - 1), mf_text_query_term(q, k)) < 0, "scan terms out of order");
            for (size_t i = first_doc; i < d.n; i++) {
                double s1 = 0, s2 = 0;
                bool m1 = mf_text_query_match(q, d.docs[i], &s1);
                bool m2 = mf_text_query_match(q, d.docs[i], &s2);
                FUZZ_CHECK(m1 == m2 && s1 == s2, "matching twice gave two answers");
                if (m1)
                    FUZZ_CHECK(isfinite(s1) && s1 > 0, "a match with score %g", s1);
            }
            mf_text_query_free(q);
        }
    }
    mf_text_spec_free(ts);
    bson_destroy(&spec);
    fuzz_docs_free(&d);
    return 0;
}
