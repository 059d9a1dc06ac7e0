/*
 * test_text.c: text search (doc/text.c): spec normalisation, the terms of
 * a document (folding, diacritics, stop words, Snowball stemming, language
 * override) with mongod's scores, $text query parsing (terms, phrases,
 * negations) and the per-document checks and score.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doc/text.h"

static bson_t *
json(const char *s)
{
    bson_error_t berr;
    bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &berr);
    cr_assert(b != NULL, "bad test JSON %s: %s", s, berr.message);
    return b;
}

/* The normalised spec of a user spec (JSON). */
static mf_text_spec_t *
spec_of(const char *user, bson_t *fixed)
{
    bson_t *req = json(user);
    mf_error_t err = {0};
    cr_assert_eq(mf_text_spec_fix(req, fixed, &err), 0, "fix %s: %s", user, err.msg);
    bson_destroy(req);
    mf_text_spec_t *ts = mf_text_spec_new(fixed, &err);
    cr_assert(ts != NULL, "spec: %s", err.msg);
    return ts;
}

/* The score of term in doc under ts, or -1 when the document has no such term. */
static double
score_of(const mf_text_spec_t *ts, const char *doc_json, const char *term, size_t *nterms)
{
    bson_t *doc = json(doc_json);
    mf_text_terms_t t;
    mf_error_t err = {0};
    double r = -1;
    mf_text_terms_init(&t);
    cr_assert_eq(mf_text_doc_terms(ts, doc, &t, &err), 0, "terms of %s: %s", doc_json, err.msg);
    for (size_t i = 0; i < t.n; i++)
        if (strcmp(t.term[i], term) == 0)
            r = t.score[i];
    if (nterms)
        *nterms = t.n;
    mf_text_terms_destroy(&t);
    bson_destroy(doc);
    return r;
}

Test(text, spec_is_normalised_as_mongod)
{
    bson_t fixed;
    mf_text_spec_t *ts = spec_of("{\"v\": 2, \"key\": {\"b\": \"text\", \"a\": \"text\"}, \"name\": \"n\", \"weights\": {\"b\": 3}}", &fixed);
    char *s = bson_as_relaxed_extended_json(&fixed, NULL);
    cr_assert_str_eq(s, "{ \"v\" : 2, \"key\" : { \"_fts\" : \"text\", \"_ftsx\" : 1 }, \"name\" : \"n\", \"weights\" : "
                        "{ \"a\" : 1, \"b\" : 3 }, \"default_language\" : \"english\", \"language_override\" : "
                        "\"language\", \"textIndexVersion\" : 3 }");
    bson_free(s);
    mf_text_spec_free(ts);
    bson_destroy(&fixed);
}

Test(text, terms_are_folded_stemmed_and_scored)
{
    bson_t fixed;
    size_t n;
    mf_text_spec_t *ts = spec_of("{\"key\": {\"s\": \"text\"}}", &fixed);
    /* one word alone: weight 1, coefficient 1 */
    cr_assert_float_eq(score_of(ts, "{\"s\": \"coffee\"}", "coffe", &n), 1.0, 1e-12);
    cr_assert_eq(n, 1);
    /* the stop words are dropped before counting: 2 tokens, each 0.75 */
    cr_assert_float_eq(score_of(ts, "{\"s\": \"Coffee and the Cream\"}", "cream", &n), 0.75, 1e-12);
    cr_assert_eq(n, 2);
    /* a repeated word: freq 1 + 1/2 + 1/4, coefficient 0.5 * 3/3 + 0.5; then 1 + 1/2 and 0.5 * 2/3 + 0.5 */
    cr_assert_float_eq(score_of(ts, "{\"s\": \"run running runs\"}", "run", &n), 1.75, 1e-12);
    cr_assert_eq(n, 1);
    cr_assert_float_eq(score_of(ts, "{\"s\": \"run fast run\"}", "run", NULL), 1.5 * (0.5 * 2 / 3.0 + 0.5), 1e-12);
    /* the whole string is the term: 1.1 */
    cr_assert_float_eq(score_of(ts, "{\"s\": \"Cake\"}", "cake", NULL), 1.1, 1e-12);
    /* diacritics go, case folds; no bonus: the raw string is longer in bytes than "cafe" (as mongod compares) */
    cr_assert_float_eq(score_of(ts, "{\"s\": \"CAFÉ\"}", "cafe", NULL), 1.0, 1e-12);
    /* array elements each count; other fields are not indexed */
    cr_assert_float_eq(score_of(ts, "{\"s\": [\"tea\", \"tea\"], \"t\": \"tea\"}", "tea", NULL), 2.2, 1e-12);
    /* language override: Spanish stop words are not English ones, and "none" does not stem */
    cr_assert_float_eq(score_of(ts, "{\"s\": \"corriendo\", \"language\": \"spanish\"}", "corr", NULL), 1.0, 1e-12);
    cr_assert_float_eq(score_of(ts, "{\"s\": \"the runners\", \"language\": \"none\"}", "runners", &n), 0.75, 1e-12);
    cr_assert_eq(n, 2);
    mf_text_spec_free(ts);
    bson_destroy(&fixed);
}

Test(text, bad_language_field)
{
    bson_t fixed;
    mf_text_spec_t *ts = spec_of("{\"key\": {\"s\": \"text\"}}", &fixed);
    bson_t *doc = json("{\"s\": \"x\", \"language\": \"klingon\"}");
    mf_text_terms_t t;
    mf_error_t err = {0};
    mf_text_terms_init(&t);
    cr_assert_eq(mf_text_doc_terms(ts, doc, &t, &err), -1);
    cr_assert_eq(err.code, 17262);
    cr_assert_str_eq(err.msg, "language override unsupported: klingon");
    mf_text_terms_destroy(&t);
    bson_destroy(doc);
    mf_text_spec_free(ts);
    bson_destroy(&fixed);
}

/* Parses search under the spec and checks doc_json: returns whether it matches (score in *score). */
static bool
query_match(const char *search, const char *doc_json, double *score, char *terms, size_t cap)
{
    bson_t fixed;
    mf_error_t err = {0};
    mf_text_spec_t *ts = spec_of("{\"key\": {\"s\": \"text\"}}", &fixed);
    bson_t *op = BCON_NEW("$search", BCON_UTF8(search));
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    v.value.v_doc.data = (uint8_t *)bson_get_data(op);
    v.value.v_doc.data_len = op->len;
    mf_text_query_t *q = mf_text_query_new(&v, &fixed, &err);
    cr_assert(q != NULL, "query %s: %s", search, err.msg);
    terms[0] = '\0';
    for (size_t i = 0; i < mf_text_query_nterms(q); i++) {
        strncat(terms, mf_text_query_term(q, i), cap - strlen(terms) - 2);
        strcat(terms, " ");
    }
    bson_t *doc = json(doc_json);
    bool r = mf_text_query_match(q, doc, score);
    bson_destroy(doc);
    mf_text_query_free(q);
    bson_destroy(op);
    mf_text_spec_free(ts);
    bson_destroy(&fixed);
    return r;
}

Test(text, queries_terms_phrases_negations)
{
    char terms[256];
    double sc;
    cr_assert(query_match("coffees shop", "{\"s\": \"Coffee Shopping\"}", &sc, terms, sizeof terms));
    cr_assert_str_eq(terms, "coffe shop ");
    cr_assert_float_eq(sc, 1.5, 1e-12);
    cr_assert(!query_match("coffee -shop", "{\"s\": \"Coffee Shopping\"}", &sc, terms, sizeof terms));
    cr_assert_str_eq(terms, "coffe "); /* negated terms are not scanned for */
    cr_assert(query_match("\"coffee shop\"", "{\"s\": \"Coffee Shopping\"}", &sc, terms, sizeof terms));
    cr_assert(!query_match("\"shop coffee\"", "{\"s\": \"Coffee Shopping\"}", &sc, terms, sizeof terms));
    cr_assert(!query_match("coffee -\"coffee shop\"", "{\"s\": \"Coffee Shopping\"}", &sc, terms, sizeof terms));
    /* a hyphen inside a word is no negation */
    cr_assert(query_match("coffee-shop", "{\"s\": \"Coffee Shopping\"}", &sc, terms, sizeof terms));
    cr_assert(!query_match("the", "{\"s\": \"the coffee\"}", &sc, terms, sizeof terms));
    cr_assert_str_eq(terms, "");
}
