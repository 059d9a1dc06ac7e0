/*
 * text.c: tokenising, stemming and scoring for text indexes and $text (see
 * text.h).
 *
 * Tokens. A string is cut into words at every code point that is not a
 * letter, a digit or a combining mark (an apostrophe stays inside English
 * words, so "don't" is one word, as in mongod's English delimiters). Each
 * word is case folded and stripped of its diacritics (NFD decomposition,
 * nonspacing marks dropped), unless a $text query asks for case / diacritic
 * sensitivity; a stop word of the language is dropped; what is left is
 * stemmed with the language's Snowball stemmer. Language "none" neither
 * drops stop words nor stems. Stop word lists: mongod's (text_stopwords.h).
 *
 * Scores (mongod's fts_spec.cpp, textIndexVersion 2 and 3). For one string
 * of field weight W with N kept tokens, a term seen c times gets
 *     W * freq * (0.5 * c / N + 0.5) * adj
 * where freq = 1 + 1/2 + 1/4 + ... (c terms: each repetition counts half the
 * one before) and adj = 1.1 when the whole string is the term (compared
 * case-insensitively), else 1. A term's scores add up over the strings of a
 * document (several fields, array elements).
 *
 * Documents are walked from the root: a string whose dotted path (array
 * positions omitted) has a weight is scored with it; with "$**" every other
 * string is scored with weight 1. A document (the root or an embedded one)
 * with a string language_override field is read in that language (17262 for
 * one mongod does not know, 17261 for a non-string); the field itself is not
 * indexed.
 *
 * Every loop here is bounded by the size of one document or one query string,
 * so none checks for interruption: the scans calling in do (query/exec.c).
 *
 * Stemmers (struct sb_stemmer) are not thread-safe: each call that tokenises
 * makes the ones it needs and frees them before returning.
 */
#include "common/alloc.h"
#include "doc/text.h"

#include <libstemmer.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf8.h>
#include <unicode/utf16.h>

#include "doc/value.h"

#define TEXT_INDEX_VERSION 3
#define MAX_WORD_WEIGHT 100000.0 /* mongod: MAX_WEIGHT / 10000 */
#define MAX_TERM_BYTES 1024      /* longer terms are cut (keeps index keys bounded) */

#include "doc/text_stopwords.h"

/*
 * The languages of textIndexVersion 3, by name and ISO code; algo is the
 * libstemmer algorithm, stop the raw stop word list (text_stopwords.h).
 */
typedef struct lang {
    const char *name, *iso, *algo;
    const char *const *stop;
    size_t nstop;
    bool english; /* an apostrophe stays inside words */
} lang_t;

#define NSTOP(a) (sizeof(a) / sizeof((a)[0]))
#define L(name, iso, list) {name, iso, name, list, NSTOP(list), false}
static const lang_t langs[] = {
    {"none", "none", NULL, NULL, 0, false},
    L("danish", "da", stop_danish),
    L("dutch", "nl", stop_dutch),
    {"english", "en", "english", stop_english, NSTOP(stop_english), true},
    L("finnish", "fi", stop_finnish),
    L("french", "fr", stop_french),
    L("german", "de", stop_german),
    L("hungarian", "hu", stop_hungarian),
    L("italian", "it", stop_italian),
    L("norwegian", "nb", stop_norwegian),
    L("portuguese", "pt", stop_portuguese),
    {"romanian", "ro", "romanian", NULL, 0, false},
    L("russian", "ru", stop_russian),
    L("spanish", "es", stop_spanish),
    L("swedish", "sv", stop_swedish),
    L("turkish", "tr", stop_turkish),
};
#undef L
#define NLANGS (sizeof(langs) / sizeof(langs[0]))

/* A growable byte buffer (NUL-terminated). */
typedef struct buf {
    char *p;
    size_t n, cap;
} buf_t;

static void normalise(buf_t *b, const char *s, size_t n, bool fold, bool strip);

/* Language by name or ISO code (case-insensitive, as mongod), or NULL. */
static const lang_t *
lang_find(const char *s)
{
    for (size_t i = 0; i < NLANGS; i++)
        if (strcasecmp(s, langs[i].name) == 0 || strcasecmp(s, langs[i].iso) == 0)
            return &langs[i];
    return NULL;
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The stop words of each language, folded and without diacritics, sorted: made once, never freed. */
static char **stop_norm[NLANGS];
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

static void
stop_init(void)
{
    for (size_t i = 0; i < NLANGS; i++) {
        if (langs[i].stop == NULL)
            continue;
        stop_norm[i] = mf_calloc(langs[i].nstop, sizeof(char *));
        for (size_t k = 0; k < langs[i].nstop; k++) {
            buf_t b = {0};
            normalise(&b, langs[i].stop[k], strlen(langs[i].stop[k]), true, true);
            stop_norm[i][k] = b.p;
        }
        qsort(stop_norm[i], langs[i].nstop, sizeof(char *), cmp_str);
    }
}

/* Whether w (folded, without diacritics) is a stop word of l. */
static bool
is_stop(const lang_t *l, const char *w)
{
    size_t i = (size_t)(l - langs);
    if (l->stop == NULL)
        return false;
    pthread_once(&stop_once, stop_init);
    return bsearch(&w, stop_norm[i], l->nstop, sizeof(char *), cmp_str) != NULL;
}

/* The stemmers one call uses, made on first use (not thread-safe: never shared). */
typedef struct stemmers {
    struct sb_stemmer *st[NLANGS];
} stemmers_t;

static void
stemmers_free(stemmers_t *sm)
{
    for (size_t i = 0; i < NLANGS; i++)
        if (sm->st[i])
            sb_stemmer_delete(sm->st[i]);
}


static void
buf_put(buf_t *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = mf_realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void
buf_cp(buf_t *b, UChar32 c)
{
    char tmp[4];
    int32_t i = 0;
    UBool bad = 0;
    U8_APPEND(tmp, i, 4, c, bad);
    if (!bad)
        buf_put(b, tmp, (size_t)i);
}

/*
 * Appends s[0..n) to b, case folded when fold and without diacritics when
 * strip (each code point's canonical decomposition minus its nonspacing
 * marks). Invalid UTF-8 bytes are dropped.
 */
static void
normalise(buf_t *b, const char *s, size_t n, bool fold, bool strip)
{
    UErrorCode ec = U_ZERO_ERROR;
    const UNormalizer2 *nfd = strip ? unorm2_getNFDInstance(&ec) : NULL;
    int32_t i = 0, len = (int32_t)n;
    if (U_FAILURE(ec))
        nfd = NULL;
    if (b->p == NULL)
        buf_put(b, "", 0);
    while (i < len) {
        UChar32 c;
        U8_NEXT(s, i, len, c);
        if (c < 0)
            continue;
        if (fold)
            c = u_foldCase(c, U_FOLD_CASE_DEFAULT);
        if (nfd != NULL) {
            UChar dec[32];
            UErrorCode e2 = U_ZERO_ERROR;
            int32_t dl = unorm2_getDecomposition(nfd, c, dec, 32, &e2);
            if (U_SUCCESS(e2) && dl > 0) {
                for (int32_t k = 0; k < dl;) {
                    UChar32 d;
                    U16_NEXT(dec, k, dl, d);
                    if (u_charType(d) != U_NON_SPACING_MARK)
                        buf_cp(b, d);
                }
                continue;
            }
            if (u_charType(c) == U_NON_SPACING_MARK)
                continue;
        }
        buf_cp(b, c);
    }
}

static bool
is_word_cp(UChar32 c, const lang_t *l)
{
    if (c < 0)
        return false;
    if (c == '\'' && l->english)
        return true;
    return u_isalnum(c) || (U_GET_GC_MASK(c) & U_GC_M_MASK) != 0;
}

/* Called with each kept, stemmed token (NUL-terminated, valid during the call). 0 to go on, else stop. */
typedef int (*token_fn)(void *arg, const char *tok, size_t len);

/*
 * Tokenises s[0..n) in language l: words, normalised (fold / strip), stop
 * words dropped, stemmed. Calls fn per token; returns what fn returned to
 * stop, else 0.
 */
static int
tokenise(const char *s, size_t n, const lang_t *l, bool fold, bool strip, stemmers_t *sm, token_fn fn, void *arg)
{
    int32_t i = 0, len = (int32_t)n;
    buf_t w = {0};
    int rc = 0;
    size_t li = (size_t)(l - langs);

    while (i < len && rc == 0) {
        int32_t start, end;
        UChar32 c;
        /* skip delimiters */
        for (;;) {
            start = i;
            if (i >= len)
                break;
            U8_NEXT(s, i, len, c);
            if (is_word_cp(c, l)) {
                i = start;
                break;
            }
        }
        if (i >= len)
            break;
        end = i;
        while (end < len) {
            int32_t at = end;
            U8_NEXT(s, end, len, c);
            if (!is_word_cp(c, l)) {
                end = at;
                break;
            }
        }
        i = end;
        w.n = 0;
        normalise(&w, s + start, (size_t)(end - start), fold, strip);
        if (w.n == 0)
            continue;
        /* Stop words are looked up folded and without diacritics, whatever the sensitivity. */
        if (l->stop != NULL) {
            buf_t lw = {0};
            const char *probe = w.p;
            if (!fold || !strip) {
                normalise(&lw, w.p, w.n, true, true);
                probe = lw.p ? lw.p : "";
            }
            bool stop = is_stop(l, probe);
            free(lw.p);
            if (stop)
                continue;
        }
        const char *tok = w.p;
        size_t tl = w.n;
        if (l->algo != NULL) {
            if (sm->st[li] == NULL)
                sm->st[li] = sb_stemmer_new(l->algo, "UTF_8");
            if (sm->st[li] != NULL) {
                const sb_symbol *r = sb_stemmer_stem(sm->st[li], (const sb_symbol *)w.p, (int)w.n);
                if (r != NULL) {
                    tok = (const char *)r;
                    tl = (size_t)sb_stemmer_length(sm->st[li]);
                }
            }
        }
        if (tl > MAX_TERM_BYTES)
            tl = MAX_TERM_BYTES;
        char *t = mf_malloc(tl + 1);
        memcpy(t, tok, tl);
        t[tl] = '\0';
        rc = fn(arg, t, tl);
        free(t);
    }
    free(w.p);
    return rc;
}

/* ---------- term sets ---------- */

void
mf_text_terms_init(mf_text_terms_t *t)
{
    memset(t, 0, sizeof(*t));
}

static void
terms_clear(mf_text_terms_t *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->term[i]);
    t->n = 0;
    if (t->slots)
        memset(t->slots, 0, t->nslots * sizeof(*t->slots));
}

void
mf_text_terms_destroy(mf_text_terms_t *t)
{
    terms_clear(t);
    free(t->term);
    free(t->score);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

static uint64_t
hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

/* The index of term s in t, or (add) a new entry with score 0; SIZE_MAX when absent and !add. */
static size_t
terms_slot(mf_text_terms_t *t, const char *s, bool add)
{
    if (t->nslots == 0 || (add && (t->n + 1) * 2 > t->nslots)) {
        if (!add && t->nslots == 0)
            return SIZE_MAX;
        size_t ns = t->nslots ? t->nslots * 2 : 16;
        free(t->slots);
        t->slots = mf_calloc(ns, sizeof(*t->slots));
        t->nslots = ns;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = (size_t)hash_str(t->term[i]) & (ns - 1);
            while (t->slots[h])
                h = (h + 1) & (ns - 1);
            t->slots[h] = i + 1;
        }
    }
    size_t h = (size_t)hash_str(s) & (t->nslots - 1);
    while (t->slots[h]) {
        size_t i = t->slots[h] - 1;
        if (strcmp(t->term[i], s) == 0)
            return i;
        h = (h + 1) & (t->nslots - 1);
    }
    if (!add)
        return SIZE_MAX;
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->term = mf_realloc(t->term, t->cap * sizeof(*t->term));
        t->score = mf_realloc(t->score, t->cap * sizeof(*t->score));
    }
    t->term[t->n] = mf_strdup(s);
    t->score[t->n] = 0;
    t->slots[h] = t->n + 1;
    return t->n++;
}

/* ---------- specs ---------- */

struct mf_text_spec {
    size_t n;
    char **field;   /* weighted paths, sorted */
    double *weight;
    bool wildcard;
    const lang_t *deflang;
    char *override; /* language_override */
};

void
mf_text_spec_free(mf_text_spec_t *ts)
{
    if (ts == NULL)
        return;
    for (size_t i = 0; i < ts->n; i++)
        free(ts->field[i]);
    free(ts->field);
    free(ts->weight);
    free(ts->override);
    free(ts);
}

mf_text_spec_t *
mf_text_spec_new(const bson_t *spec, mf_error_t *err)
{
    bson_iter_t it, wi;
    mf_text_spec_t *ts = mf_calloc(1, sizeof(*ts));

    ts->deflang = lang_find("english");
    if (bson_iter_init_find(&it, spec, "default_language") && BSON_ITER_HOLDS_UTF8(&it) &&
        lang_find(bson_iter_utf8(&it, NULL)) != NULL)
        ts->deflang = lang_find(bson_iter_utf8(&it, NULL));
    ts->override = mf_strdup(bson_iter_init_find(&it, spec, "language_override") && BSON_ITER_HOLDS_UTF8(&it)
                                 ? bson_iter_utf8(&it, NULL)
                                 : "language");
    if (!bson_iter_init_find(&it, spec, "weights") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &wi)) {
        mf_text_spec_free(ts);
        mf_err_set(err, MF_E_CannotCreateIndex, "found invalid spec for text index");
        return NULL;
    }
    while (bson_iter_next(&wi)) {
        if (strcmp(bson_iter_key(&wi), "$**") == 0) {
            ts->wildcard = true;
            continue;
        }
        ts->field = mf_realloc(ts->field, (ts->n + 1) * sizeof(*ts->field));
        ts->weight = mf_realloc(ts->weight, (ts->n + 1) * sizeof(*ts->weight));
        ts->field[ts->n] = mf_strdup(bson_iter_key(&wi));
        ts->weight[ts->n] = mf_value_as_double(bson_iter_value(&wi));
        ts->n++;
    }
    return ts;
}

/* The weight of path, or 0 when it is not indexed. */
static double
path_weight(const mf_text_spec_t *ts, const char *path)
{
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->field[i], path) == 0)
            return ts->weight[i];
    return ts->wildcard ? 1.0 : 0.0;
}

/* Whether some weighted path lies under path (so its subdocuments must be walked). */
static bool
path_has_below(const mf_text_spec_t *ts, const char *path)
{
    size_t pl = strlen(path);
    if (ts->wildcard)
        return true;
    for (size_t i = 0; i < ts->n; i++)
        if (strncmp(ts->field[i], path, pl) == 0 && ts->field[i][pl] == '.')
            return true;
    return false;
}

bool
mf_text_key_is_text(const bson_t *key)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, key))
        return false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_fts") == 0 ||
            (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "text") == 0))
            return true;
    }
    return false;
}

/* Checks a weighted field name as mongod's fixSpec does (67 CannotCreateIndex). */
static int
check_weight_field(const char *f, mf_error_t *err)
{
    if (strcmp(f, "$**") == 0)
        return 0;
    if (f[0] == '\0')
        return mf_err_set(err, MF_E_CannotCreateIndex, "weight cannot be on an empty field");
    for (const char *p = f;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n == 0)
            return mf_err_set(err, MF_E_CannotCreateIndex, "weight cannot have empty path component");
        if (p[0] == '$')
            return mf_err_set(err, MF_E_CannotCreateIndex, "weight cannot have path component with $ prefix");
        if (dot == NULL)
            return 0;
        p = dot + 1;
    }
}

/* Sorted (name, weight) pairs being collected. */
typedef struct wlist {
    const char *name[256];
    int w[256];
    int n;
} wlist_t;

static void
wlist_set(wlist_t *l, const char *name, int w)
{
    for (int i = 0; i < l->n; i++) {
        if (strcmp(l->name[i], name) == 0) {
            l->w[i] = w;
            return;
        }
    }
    if (l->n == 256)
        return;
    int pos = l->n++;
    while (pos > 0 && strcmp(l->name[pos - 1], name) > 0) {
        l->name[pos] = l->name[pos - 1];
        l->w[pos] = l->w[pos - 1];
        pos--;
    }
    l->name[pos] = name;
    l->w[pos] = w;
}

static bool
is_reserved(const char *f)
{
    return strcmp(f, "_fts") == 0 || strcmp(f, "_ftsx") == 0;
}

/*
 * mongod's FTSSpec::fixSpec (textIndexVersion 2 and 3): every refusal is 67
 * CannotCreateIndex. Weights are whole numbers (numberInt) in (0, 100000).
 */
int
mf_text_spec_fix(const bson_t *spec, bson_t *out, mf_error_t *err)
{
    bson_iter_t it, kt;
    wlist_t wl = {.n = 0};
    const char *deflang = "english", *override = "language";
    int version = TEXT_INDEX_VERSION;
    int phase = 0; /* 0: prefix fields, 1: text fields, 2: suffix fields */

    if (!bson_iter_init_find(&it, spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &kt))
        return mf_err_set(err, MF_E_CannotCreateIndex, "found invalid spec for text index");
    while (bson_iter_next(&kt)) {
        const char *f = bson_iter_key(&kt);
        const bson_value_t *v = bson_iter_value(&kt);
        bool is_text = v->value_type == BSON_TYPE_UTF8 && strcmp(v->value.v_utf8.str, "text") == 0;
        if (strcmp(f, "_fts") == 0) {
            if (!is_text)
                return mf_err_set(err, MF_E_CannotCreateIndex, "expecting _fts:\"text\"");
            if (phase == 2)
                return mf_err_set(err, MF_E_CannotCreateIndex, "'text' fields in index must all be adjacent");
            if (!bson_iter_next(&kt) || strcmp(bson_iter_key(&kt), "_ftsx") != 0)
                return mf_err_set(err, MF_E_CannotCreateIndex, "expected _ftsx after _fts");
            if (!mf_value_is_number(bson_iter_value(&kt)) || mf_value_number_int(bson_iter_value(&kt)) != 1)
                return mf_err_set(err, MF_E_CannotCreateIndex, "expecting _ftsx:1");
            phase = 2;
            continue;
        }
        if (is_text) {
            if (phase == 2)
                return mf_err_set(err, MF_E_CannotCreateIndex, "'text' fields in index must all be adjacent");
            if (is_reserved(f))
                return mf_err_set(err, MF_E_CannotCreateIndex, "text index with reserved fields _fts/_ftsx not allowed");
            phase = 1;
            wlist_set(&wl, f, 1);
            continue;
        }
        int d = mf_value_is_number(v) ? mf_value_number_int(v) : 0;
        if (d != 1 && d != -1)
            return mf_err_set(err, MF_E_CannotCreateIndex, "expected value 1 or -1 for non-text key in compound index");
        if (is_reserved(f))
            return mf_err_set(err, MF_E_CannotCreateIndex, "text index with reserved fields _fts/_ftsx not allowed");
        if (phase == 1)
            phase = 2;
    }
    if (phase == 0)
        return mf_err_set(err, MF_E_CannotCreateIndex, "expected additional fields in text index key pattern");
    if (bson_iter_init_find(&it, spec, "weights")) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t wi;
            bson_iter_recurse(&it, &wi);
            while (bson_iter_next(&wi)) {
                if (!mf_value_is_number(bson_iter_value(&wi)))
                    return mf_err_set(err, MF_E_CannotCreateIndex, "weight for text index needs numeric type");
                wlist_set(&wl, bson_iter_key(&wi), mf_value_number_int(bson_iter_value(&wi)));
            }
        } else if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "$**") == 0) {
            wlist_set(&wl, "$**", 1);
        } else {
            return mf_err_set(err, MF_E_CannotCreateIndex, "text index option 'weights' must be an object");
        }
    }
    if (wl.n == 0)
        return mf_err_set(err, MF_E_CannotCreateIndex, "text index option 'weights' must specify fields or the wildcard");
    for (int i = 0; i < wl.n; i++) {
        if (wl.w[i] <= 0 || wl.w[i] >= (int)MAX_WORD_WEIGHT)
            return mf_err_set(err, MF_E_CannotCreateIndex,
                              "text index weight must be in the exclusive interval (0,%d) but found: %d",
                              (int)MAX_WORD_WEIGHT, wl.w[i]);
        if (check_weight_field(wl.name[i], err) != 0)
            return -1;
    }
    if (bson_iter_init_find(&it, spec, "default_language")) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(err, MF_E_CannotCreateIndex, "default_language needs a string type");
        deflang = bson_iter_utf8(&it, NULL);
        if (lang_find(deflang) == NULL)
            return mf_err_set(err, MF_E_CannotCreateIndex, "default_language is not valid");
    }
    if (bson_iter_init_find(&it, spec, "language_override")) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(err, MF_E_CannotCreateIndex, "language_override must be a string");
        override = bson_iter_utf8(&it, NULL);
        if (override[0] == '\0' || override[0] == '$' || strchr(override, '.') != NULL)
            return mf_err_set(err, MF_E_CannotCreateIndex, "language_override is not valid");
    }
    if (bson_iter_init_find(&it, spec, "textIndexVersion")) {
        if (!mf_value_is_number(bson_iter_value(&it)))
            return mf_err_set(err, MF_E_CannotCreateIndex, "text index option 'textIndexVersion' must be a number");
        version = mf_value_number_int(bson_iter_value(&it));
        if (version != 2 && version != TEXT_INDEX_VERSION)
            return mf_err_set(err, MF_E_CannotCreateIndex, "bad textIndexVersion: %d", version);
    }
    /*
     * The spec in its order, the key fixed, weights / default_language /
     * language_override normalised in place; those not given, then
     * textIndexVersion, appended (mongod's order; v stays where mayfly put it).
     */
    bson_t b, key, w;
    bool put_w = false, put_dl = false, put_lo = false;
    bson_init(&b);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "key") == 0) {
            /* prefix fields, {_fts: "text", _ftsx: 1} in place of the text fields, suffix fields */
            bool added = false;
            BSON_APPEND_DOCUMENT_BEGIN(&b, "key", &key);
            bson_iter_recurse(&it, &kt);
            while (bson_iter_next(&kt)) {
                const char *f = bson_iter_key(&kt);
                bool text = is_reserved(f) ||
                            (BSON_ITER_HOLDS_UTF8(&kt) && strcmp(bson_iter_utf8(&kt, NULL), "text") == 0);
                if (!text) {
                    bson_append_value(&key, f, -1, bson_iter_value(&kt));
                } else if (!added) {
                    BSON_APPEND_UTF8(&key, "_fts", "text");
                    BSON_APPEND_INT32(&key, "_ftsx", 1);
                    added = true;
                }
            }
            bson_append_document_end(&b, &key);
        } else if (strcmp(k, "weights") == 0) {
            BSON_APPEND_DOCUMENT_BEGIN(&b, "weights", &w);
            for (int i = 0; i < wl.n; i++)
                BSON_APPEND_INT32(&w, wl.name[i], wl.w[i]);
            bson_append_document_end(&b, &w);
            put_w = true;
        } else if (strcmp(k, "default_language") == 0) {
            BSON_APPEND_UTF8(&b, "default_language", deflang);
            put_dl = true;
        } else if (strcmp(k, "language_override") == 0) {
            BSON_APPEND_UTF8(&b, "language_override", override);
            put_lo = true;
        } else if (strcmp(k, "textIndexVersion") != 0) {
            bson_append_value(&b, k, -1, bson_iter_value(&it));
        }
    }
    if (!put_w) {
        BSON_APPEND_DOCUMENT_BEGIN(&b, "weights", &w);
        for (int i = 0; i < wl.n; i++)
            BSON_APPEND_INT32(&w, wl.name[i], wl.w[i]);
        bson_append_document_end(&b, &w);
    }
    if (!put_dl)
        BSON_APPEND_UTF8(&b, "default_language", deflang);
    if (!put_lo)
        BSON_APPEND_UTF8(&b, "language_override", override);
    BSON_APPEND_INT32(&b, "textIndexVersion", version);
    bson_steal(out, &b);
    return 0;
}

/* ---------- walking a document's indexed strings ---------- */

/* Called per indexed string with its weight and language. 0 to go on, -1 on error, 1 to stop. */
typedef int (*string_fn)(void *arg, const char *s, size_t n, double weight, const lang_t *l);

typedef struct walk {
    const mf_text_spec_t *ts;
    string_fn fn;
    void *arg;
    mf_error_t *err;
    char path[1024];
} walk_t;

static int walk_doc(walk_t *w, const uint8_t *data, uint32_t len, size_t plen, const lang_t *l, int depth);

static int
walk_value(walk_t *w, const bson_value_t *v, size_t plen, const lang_t *l, int depth, bool in_array)
{
    if (v->value_type == BSON_TYPE_UTF8) {
        double wt = path_weight(w->ts, w->path);
        if (wt > 0)
            return w->fn(w->arg, v->value.v_utf8.str, v->value.v_utf8.len, wt, l);
        return 0;
    }
    if (depth > 200)
        return 0;
    if (v->value_type == BSON_TYPE_DOCUMENT && path_has_below(w->ts, w->path))
        return walk_doc(w, v->value.v_doc.data, v->value.v_doc.data_len, plen, l, depth + 1);
    if (v->value_type == BSON_TYPE_ARRAY && !in_array) {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return 0;
        while (bson_iter_next(&it)) {
            int r = walk_value(w, bson_iter_value(&it), plen, l, depth + 1, true);
            if (r != 0)
                return r;
        }
    }
    return 0;
}

static int
walk_doc(walk_t *w, const uint8_t *data, uint32_t len, size_t plen, const lang_t *l, int depth)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len))
        return 0;
    if (bson_iter_find(&it, w->ts->override)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return mf_err_set(w->err, MF_E_Location17261, "found language override field in document with non-string type");
        const char *name = bson_iter_utf8(&it, NULL);
        l = lang_find(name);
        if (l == NULL)
            return mf_err_set(w->err, MF_E_Location17262, "language override unsupported: %s", name);
    }
    bson_iter_init_from_data(&it, data, len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        size_t kl = strlen(k);
        if (strcmp(k, w->ts->override) == 0)
            continue;
        if (plen + kl + 2 > sizeof(w->path))
            continue;
        size_t np = plen;
        if (plen > 0)
            w->path[np++] = '.';
        memcpy(w->path + np, k, kl + 1);
        int r = walk_value(w, bson_iter_value(&it), np + kl, l, depth, false);
        w->path[plen] = '\0';
        if (r != 0)
            return r;
    }
    return 0;
}

/* Runs fn over doc's indexed strings. 0, or -1 with err (or what fn returned to stop). */
static int
walk_strings(const mf_text_spec_t *ts, const bson_t *doc, string_fn fn, void *arg, mf_error_t *err)
{
    walk_t w = {.ts = ts, .fn = fn, .arg = arg, .err = err};
    w.path[0] = '\0';
    return walk_doc(&w, bson_get_data(doc), doc->len, 0, ts->deflang, 0);
}

/* ---------- scoring ---------- */

typedef struct score_ctx {
    mf_text_terms_t *doc_terms; /* the document's accumulated scores */
    mf_text_terms_t one;        /* the current string's counts (score holds the count) */
    double *freq;               /* per entry of one: the running frequency sum */
    size_t freqcap;
    size_t ntokens;
    stemmers_t sm;
} score_ctx_t;

static int
score_token(void *arg, const char *tok, size_t len)
{
    score_ctx_t *x = arg;
    (void)len;
    size_t i = terms_slot(&x->one, tok, true);
    if (i >= x->freqcap) {
        x->freqcap = x->one.cap;
        x->freq = mf_realloc(x->freq, x->freqcap * sizeof(*x->freq));
    }
    if (x->one.score[i] == 0)
        x->freq[i] = 0;
    /* each repetition counts half as much as the one before: 1, 1/2, 1/4, ... */
    x->freq[i] += 1.0 / ldexp(1.0, (int)(x->one.score[i] < 60 ? x->one.score[i] : 60));
    x->one.score[i] += 1;
    x->ntokens++;
    return 0;
}

static int
score_string(void *arg, const char *s, size_t n, double weight, const lang_t *l)
{
    score_ctx_t *x = arg;
    terms_clear(&x->one);
    x->ntokens = 0;
    tokenise(s, n, l, true, true, &x->sm, score_token, x);
    for (size_t i = 0; i < x->one.n; i++) {
        double coeff = 0.5 * x->one.score[i] / (double)x->ntokens + 0.5;
        double adj = 1;
        if (strlen(x->one.term[i]) == n && strncasecmp(x->one.term[i], s, n) == 0)
            adj += 0.1;
        size_t k = terms_slot(x->doc_terms, x->one.term[i], true);
        x->doc_terms->score[k] += weight * x->freq[i] * coeff * adj;
    }
    return 0;
}

int
mf_text_doc_terms(const mf_text_spec_t *ts, const bson_t *doc, mf_text_terms_t *t, mf_error_t *err)
{
    score_ctx_t x = {.doc_terms = t};
    terms_clear(t);
    mf_text_terms_init(&x.one);
    int rc = walk_strings(ts, doc, score_string, &x, err);
    mf_text_terms_destroy(&x.one);
    free(x.freq);
    stemmers_free(&x.sm);
    if (rc != 0)
        terms_clear(t);
    return rc;
}

/* ---------- $text queries ---------- */

/* A list of distinct strings in insertion order, with a hash set for O(1) membership (queries can be long). */
typedef struct strlist {
    char **s;
    size_t n, cap;
    mf_text_terms_t set;
} strlist_t;

static void
strlist_add(strlist_t *l, const char *s)
{
    if (terms_slot(&l->set, s, false) != SIZE_MAX)
        return;
    terms_slot(&l->set, s, true);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->s = mf_realloc(l->s, l->cap * sizeof(*l->s));
    }
    l->s[l->n++] = mf_strdup(s);
}

static bool
strlist_has(const strlist_t *l, const char *s)
{
    return terms_slot((mf_text_terms_t *)&l->set, s, false) != SIZE_MAX;
}

static void
strlist_free(strlist_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i]);
    free(l->s);
    mf_text_terms_destroy(&l->set);
}

struct mf_text_query {
    mf_text_spec_t *spec; /* owned: the index's spec */
    const lang_t *lang;   /* $language, or the index's default */
    bool case_sens, diac_sens;
    strlist_t bound;      /* folded positive terms: what the index is scanned for (sorted) */
    strlist_t pos, neg;   /* positive / negated terms under the query's sensitivity */
    strlist_t pos_phrase, neg_phrase; /* normalised under the query's sensitivity */
};

void
mf_text_query_free(mf_text_query_t *q)
{
    if (q == NULL)
        return;
    mf_text_spec_free(q->spec);
    strlist_free(&q->bound);
    strlist_free(&q->pos);
    strlist_free(&q->neg);
    strlist_free(&q->pos_phrase);
    strlist_free(&q->neg_phrase);
    free(q);
}

size_t
mf_text_query_nterms(const mf_text_query_t *q)
{
    return q->bound.n;
}

const char *
mf_text_query_term(const mf_text_query_t *q, size_t i)
{
    return q->bound.s[i];
}

static void
append_list(bson_t *out, const char *name, const strlist_t *l, bool sort)
{
    bson_t arr;
    char **v = mf_calloc(l->n + 1, sizeof(char *));
    if (l->n > 0)
        memcpy(v, l->s, l->n * sizeof(char *));
    if (sort && l->n > 1)
        qsort(v, l->n, sizeof(char *), cmp_str);
    BSON_APPEND_ARRAY_BEGIN(out, name, &arr);
    for (size_t i = 0; i < l->n; i++) {
        char key[16];
        const char *k;
        bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
        BSON_APPEND_UTF8(&arr, k, v[i]);
    }
    bson_append_array_end(out, &arr);
    free(v);
}

void
mf_text_query_explain(const mf_text_query_t *q, bson_t *out)
{
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(out, "parsedTextQuery", &d);
    append_list(&d, "terms", &q->pos, true);
    append_list(&d, "negatedTerms", &q->neg, true);
    append_list(&d, "phrases", &q->pos_phrase, false);
    append_list(&d, "negatedPhrases", &q->neg_phrase, false);
    bson_append_document_end(out, &d);
}

int
mf_text_check(const bson_value_t *v, mf_error_t *err)
{
    bson_iter_t it;
    int expected = 1, n = 0;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return mf_err_set(err, MF_E_BadValue, "$text expects an object");
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
        return mf_err_set(err, MF_E_BadValue, "$text expects an object");
    if (!bson_iter_find(&it, "$search"))
        return mf_err_set(err, MF_E_NoSuchKey, "Missing expected field \"$search\"");
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(err, MF_E_TypeMismatch, "\"$search\" had the wrong type. Expected string, found %s",
                          mf_type_name(bson_iter_type(&it)));
    static const char *const opt[] = {"$language", "$caseSensitive", "$diacriticSensitive"};
    for (int i = 0; i < 3; i++) {
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        if (!bson_iter_find(&it, opt[i]))
            continue;
        bool ok = i == 0 ? BSON_ITER_HOLDS_UTF8(&it) : BSON_ITER_HOLDS_BOOL(&it);
        if (!ok)
            return mf_err_set(err, MF_E_TypeMismatch, "\"%s\" had the wrong type. Expected %s, found %s", opt[i],
                              i == 0 ? "string" : "bool", mf_type_name(bson_iter_type(&it)));
        expected++;
    }
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it))
        n++;
    if (n != expected)
        return mf_err_set(err, MF_E_BadValue, "extra fields in $text");
    return 0;
}

enum { IN_TOP = 0, IN_OR = 1, IN_NOR = 2 };

static void
find_rec(const uint8_t *data, uint32_t len, int where, int depth, int *count, int *worst, bson_value_t *v)
{
    bson_iter_t it;
    if (depth > 200 || !bson_iter_init_from_data(&it, data, len))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$text") == 0) {
            (*count)++;
            *v = *bson_iter_value(&it);
            if (where > *worst)
                *worst = where;
        } else if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                   BSON_ITER_HOLDS_ARRAY(&it)) {
            int w2 = k[1] == 'n' ? IN_NOR : k[1] == 'o' ? (where == IN_NOR ? IN_NOR : IN_OR) : where;
            bson_iter_t ai;
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai)) {
                if (BSON_ITER_HOLDS_DOCUMENT(&ai)) {
                    const bson_value_t *e = bson_iter_value(&ai);
                    find_rec(e->value.v_doc.data, e->value.v_doc.data_len, w2, depth + 1, count, worst, v);
                }
            }
        }
    }
}

int
mf_text_find(const bson_t *filter, bson_value_t *v, mf_error_t *err)
{
    int count = 0, worst = IN_TOP;
    if (filter == NULL)
        return 0;
    find_rec(bson_get_data(filter), filter->len, IN_TOP, 0, &count, &worst, v);
    if (count == 0)
        return 0;
    if (count > 1)
        return mf_err_set(err, MF_E_BadValue, "Too many text expressions");
    if (worst == IN_NOR)
        return mf_err_set(err, MF_E_BadValue, "text expression not allowed in nor");
    return worst == IN_OR ? 2 : 1; /* under $or: the planner decides (query/plan.c's text_or_plan) */
}

typedef struct add_ctx {
    strlist_t *to;
} add_ctx_t;

static int
add_token(void *arg, const char *tok, size_t len)
{
    (void)len;
    strlist_add(((add_ctx_t *)arg)->to, tok);
    return 0;
}

/* Adds the terms of one run of the query (mongod's _addTerms). */
static void
add_terms(mf_text_query_t *q, const char *s, size_t n, bool negated, stemmers_t *sm)
{
    add_ctx_t a = {negated ? &q->neg : &q->pos};
    tokenise(s, n, q->lang, !q->case_sens, !q->diac_sens, sm, add_token, &a);
    if (!negated) {
        a.to = &q->bound;
        tokenise(s, n, q->lang, true, true, sm, add_token, &a);
    }
}

static void
add_phrase(mf_text_query_t *q, const char *s, size_t n, bool negated)
{
    buf_t b = {0};
    normalise(&b, s, n, !q->case_sens, !q->diac_sens);
    strlist_add(negated ? &q->neg_phrase : &q->pos_phrase, b.p ? b.p : "");
    free(b.p);
}

static bool
is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* mongod's FTSQueryImpl::parse: terms, -terms, "phrases", -"phrases". */
static void
parse_search(mf_text_query_t *q, const char *s, size_t n)
{
    stemmers_t sm = {0};
    bool prev_ws = true, in_neg = false, in_phrase = false;
    size_t qstart = 0;
    int32_t i = 0, len = (int32_t)n;

    while (i < len) {
        char ch = s[i];
        if (is_space(ch)) {
            prev_ws = true;
            i++;
            continue;
        }
        if (ch == '-') {
            if (!in_phrase && prev_ws)
                in_neg = true;
            prev_ws = false;
            i++;
            continue;
        }
        if (ch == '"') {
            if (in_phrase) {
                add_phrase(q, s + qstart + 1, (size_t)i - qstart - 1, in_neg);
                in_neg = false;
                in_phrase = false;
            } else {
                in_phrase = true;
                if (in_neg && prev_ws)
                    in_neg = false;
                qstart = (size_t)i;
            }
            prev_ws = false;
            i++;
            continue;
        }
        int32_t start = i, at = i;
        UChar32 c;
        U8_NEXT(s, at, len, c);
        if (!is_word_cp(c, q->lang)) {
            prev_ws = false; /* another delimiter */
            i = at;
            continue;
        }
        i = at;
        while (i < len) {
            int32_t p = i;
            U8_NEXT(s, i, len, c);
            if (!is_word_cp(c, q->lang)) {
                i = p;
                break;
            }
        }
        if (!(in_phrase && in_neg))
            add_terms(q, s + start, (size_t)(i - start), in_neg, &sm);
        if (in_neg && !in_phrase)
            in_neg = false;
        prev_ws = false;
    }
    stemmers_free(&sm);
    if (q->bound.n > 1)
        qsort(q->bound.s, q->bound.n, sizeof(*q->bound.s), cmp_str);
}

mf_text_query_t *
mf_text_query_new(const bson_value_t *v, const bson_t *index_spec, mf_error_t *err)
{
    bson_iter_t it;
    mf_text_query_t *q;

    if (mf_text_check(v, err) != 0)
        return NULL;
    q = mf_calloc(1, sizeof(*q));
    if ((q->spec = mf_text_spec_new(index_spec, err)) == NULL) {
        free(q);
        return NULL;
    }
    q->lang = q->spec->deflang;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$language") == 0) {
            const char *name = bson_iter_utf8(&it, NULL);
            q->lang = lang_find(name);
            if (q->lang == NULL) {
                mf_err_set(err, MF_E_BadValue, "unsupported language: \"%s\" for text index version %d", name,
                           TEXT_INDEX_VERSION);
                mf_text_query_free(q);
                return NULL;
            }
        } else if (strcmp(k, "$caseSensitive") == 0) {
            q->case_sens = bson_iter_bool(&it);
        } else if (strcmp(k, "$diacriticSensitive") == 0) {
            q->diac_sens = bson_iter_bool(&it);
        }
    }
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    bson_iter_find(&it, "$search");
    uint32_t slen;
    const char *search = bson_iter_utf8(&it, &slen);
    parse_search(q, search, slen);
    return q;
}

/* State of checking one document against a query's sensitive terms, negations and phrases. */
typedef struct match_ctx {
    const mf_text_query_t *q;
    stemmers_t sm;
    bool any_pos, any_neg;
    bool *phrase_found;
    buf_t norm;
} match_ctx_t;

static int
match_token(void *arg, const char *tok, size_t len)
{
    match_ctx_t *x = arg;
    (void)len;
    if (!x->any_pos && strlist_has(&x->q->pos, tok))
        x->any_pos = true;
    if (strlist_has(&x->q->neg, tok)) {
        x->any_neg = true;
        return 1;
    }
    return 0;
}

static int
match_string(void *arg, const char *s, size_t n, double weight, const lang_t *l)
{
    match_ctx_t *x = arg;
    const mf_text_query_t *q = x->q;
    (void)weight;
    if (q->case_sens || q->diac_sens || q->neg.n > 0)
        tokenise(s, n, l, !q->case_sens, !q->diac_sens, &x->sm, match_token, x);
    if (x->any_neg)
        return 1;
    if (q->pos_phrase.n > 0 || q->neg_phrase.n > 0) {
        x->norm.n = 0;
        normalise(&x->norm, s, n, !q->case_sens, !q->diac_sens);
        for (size_t i = 0; i < q->pos_phrase.n; i++)
            if (!x->phrase_found[i] && strstr(x->norm.p, q->pos_phrase.s[i]) != NULL)
                x->phrase_found[i] = true;
        for (size_t i = 0; i < q->neg_phrase.n; i++) {
            if (strstr(x->norm.p, q->neg_phrase.s[i]) != NULL) {
                x->any_neg = true;
                return 1;
            }
        }
    }
    return 0;
}

bool
mf_text_query_match(const mf_text_query_t *q, const bson_t *doc, double *score)
{
    mf_text_terms_t t;
    bool ok = false;

    *score = 0;
    mf_text_terms_init(&t);
    if (mf_text_doc_terms(q->spec, doc, &t, NULL) != 0)
        goto out;
    for (size_t i = 0; i < q->bound.n; i++) {
        size_t k = terms_slot(&t, q->bound.s[i], false);
        if (k != SIZE_MAX) {
            *score += t.score[k];
            ok = true;
        }
    }
    if (!ok)
        goto out;
    if (q->case_sens || q->diac_sens || q->neg.n > 0 || q->pos_phrase.n > 0 || q->neg_phrase.n > 0) {
        match_ctx_t x = {.q = q};
        x.phrase_found = mf_calloc(q->pos_phrase.n + 1, sizeof(bool));
        walk_strings(q->spec, doc, match_string, &x, NULL);
        if (x.any_neg || ((q->case_sens || q->diac_sens) && !x.any_pos))
            ok = false;
        for (size_t i = 0; i < q->pos_phrase.n; i++)
            if (!x.phrase_found[i])
                ok = false;
        free(x.phrase_found);
        free(x.norm.p);
        stemmers_free(&x.sm);
    }
out:
    mf_text_terms_destroy(&t);
    return ok;
}

/* ---------- the hidden score field ---------- */

/* Whether the hidden score field is anywhere in data (embedded by $facet, $push: "$$ROOT" ...). */
static bool
has_score(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    if (depth > 200 || !bson_iter_init_from_data(&it, data, len))
        return false;
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (mf_hidden_meta_field(bson_iter_key(&it)))
            return true;
        if ((v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) &&
            has_score(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1))
            return true;
    }
    return false;
}

static void
copy_without_score(bson_t *out, const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    if (!bson_iter_init_from_data(&it, data, len))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bson_t child;
        if (mf_hidden_meta_field(k))
            continue;
        if (depth < 200 && v->value_type == BSON_TYPE_DOCUMENT) {
            bson_append_document_begin(out, k, -1, &child);
            copy_without_score(&child, v->value.v_doc.data, v->value.v_doc.data_len, depth + 1);
            bson_append_document_end(out, &child);
        } else if (depth < 200 && v->value_type == BSON_TYPE_ARRAY) {
            bson_append_array_begin(out, k, -1, &child);
            copy_without_score(&child, v->value.v_doc.data, v->value.v_doc.data_len, depth + 1);
            bson_append_array_end(out, &child);
        } else {
            bson_append_value(out, k, -1, v);
        }
    }
}

void
mf_text_strip_score(bson_t **doc)
{
    if (!has_score(bson_get_data(*doc), (*doc)->len, 0))
        return;
    bson_t *o = bson_new();
    copy_without_score(o, bson_get_data(*doc), (*doc)->len, 0);
    bson_destroy(*doc);
    *doc = o;
}
