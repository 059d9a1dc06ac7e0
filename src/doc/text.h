/*
 * text.h: text search (MongoDB 8.0's text indexes, textIndexVersion 3).
 *
 * A text index has the key pattern {_fts: "text", _ftsx: 1} (with, in a
 * compound text index, other fields before and after) and a spec that
 * says which string fields are indexed with which weight (weights, "$**" for
 * every string), the default language and the name of the per-document
 * language field (language_override). For each document the index holds one
 * key per distinct term: [term (string), score (double)] plus the record id
 * (between the prefix and the suffix fields' values, index.c).
 * A term is a word of an indexed string, case folded, without diacritics,
 * stop words of its language dropped, stemmed by Snowball (libstemmer).
 *
 * A $text query ({$search, $language, $caseSensitive, $diacriticSensitive})
 * is parsed into positive terms (any may match), negated terms, and
 * "phrases" (all must appear in the raw text), "-phrases" (none may). The
 * planner scans the index once per positive term (TEXT_OR); the executor
 * then checks phrases and negations against the fetched document and
 * computes its score, the sum over the query's terms of the document's
 * score for that term, which equals what mongod adds up from the index keys.
 *
 * The score travels with the document: in the executor's match details
 * (mf_match_details_t.text_score) for find, and for aggregation as a hidden
 * last field MF_TEXT_SCORE_FIELD appended to each source document, which
 * {$meta: "textScore"} reads and the command layer strips from results.
 */
#ifndef MF_TEXT_H
#define MF_TEXT_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* MF_TEXT_SCORE_FIELD, the hidden field carrying a document's text score through a pipeline, is in doc/match.h. */
#include "doc/match.h"

typedef struct mf_text_spec mf_text_spec_t;
typedef struct mf_text_query mf_text_query_t;

/* The terms of one document: parallel arrays, each term once (owned by the set). */
typedef struct mf_text_terms {
    char **term;
    double *score;
    size_t n, cap;
    size_t *slots; /* open addressing: index + 1, 0 = empty */
    size_t nslots;
} mf_text_terms_t;

/* mf_text_key_is_text: whether a user key pattern asks for a text index (a "text" value or _fts). */
bool mf_text_key_is_text(const bson_t *key);

/*
 * mf_text_spec_fix: validates a text index spec (already through the
 * generic checks, key as the user gave it) and writes mongod's normalised
 * spec into out (initialised here): key {_fts: "text", _ftsx: 1}, weights
 * sorted by field, default_language (english), language_override
 * (language), textIndexVersion 3 (or 2 when asked); non-text fields of a
 * compound text index stay before / after _fts, _ftsx. Returns 0, or -1
 * with err (67 CannotCreateIndex and mongod's fixSpec messages).
 */
int mf_text_spec_fix(const bson_t *spec, bson_t *out, mf_error_t *err) MF_WUR;

/* mf_text_spec_new: parses a normalised (stored) spec. NULL with err on a bad one. */
mf_text_spec_t *mf_text_spec_new(const bson_t *spec, mf_error_t *err);
void mf_text_spec_free(mf_text_spec_t *ts);

void mf_text_terms_init(mf_text_terms_t *t);
void mf_text_terms_destroy(mf_text_terms_t *t);

/*
 * mf_text_doc_terms: the terms of doc under ts with their scores (mongod's
 * formula: weight * frequency * length coefficient, see text.c), into t
 * (cleared first). Returns 0, or -1 with err (17261 / 17262 for a bad
 * language field).
 */
int mf_text_doc_terms(const mf_text_spec_t *ts, const bson_t *doc, mf_text_terms_t *t, mf_error_t *err) MF_WUR;

/*
 * mf_text_check: checks the operand of $text as mongod's parser does (2
 * "$text expects an object", 4 / 14 for $search, 14 for the other fields'
 * types, 2 "extra fields in $text"). Returns 0 or -1 with err.
 */
int mf_text_check(const bson_value_t *v, mf_error_t *err) MF_WUR;

/*
 * mf_text_find: looks for $text in filter. Returns 1 and points *v at its
 * operand (a view into filter) when it is at the top level or under
 * top-level $and, 2 likewise when it is under a $or (the planner then
 * decides: query/plan.c), 0 when there is none, or -1 with err: 2 "Too
 * many text expressions", 2 "text expression not allowed in nor".
 */
int mf_text_find(const bson_t *filter, bson_value_t *v, mf_error_t *err) MF_WUR;

/*
 * mf_text_query_new: parses a $text operand against the text index spec
 * index_spec (its default language applies without $language). NULL with
 * err (2 for an unsupported $language).
 */
mf_text_query_t *mf_text_query_new(const bson_value_t *v, const bson_t *index_spec, mf_error_t *err);
void mf_text_query_free(mf_text_query_t *q);

/*
 * mf_text_query_explain: appends explain's parsedTextQuery to out: {terms,
 * negatedTerms, phrases, negatedPhrases} (terms under the query's
 * sensitivity, phrases normalised as they are matched).
 */
void mf_text_query_explain(const mf_text_query_t *q, bson_t *out);

/* The distinct terms to scan the index for (folded, stemmed), in byte order. */
size_t mf_text_query_nterms(const mf_text_query_t *q);
const char *mf_text_query_term(const mf_text_query_t *q, size_t i);

/*
 * mf_text_query_match: whether doc satisfies q beyond the index scan (some
 * positive term under case / diacritic sensitivity, no negated term, every
 * phrase, no negated phrase) and its score. A document whose language field
 * is bad does not match.
 */
bool mf_text_query_match(const mf_text_query_t *q, const bson_t *doc, double *score);

/*
 * mf_text_strip_score: if doc carries the hidden score field or the hidden
 * $geoNear metadata fields (mf_hidden_meta_field, at any depth: $facet and
 * $push: "$$ROOT" embed documents), replaces *doc (heap, owned) by a copy
 * without them.
 */
void mf_text_strip_score(bson_t **doc);

#endif /* MF_TEXT_H */
