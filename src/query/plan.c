/*
 * plan.c: the rule-based planner, index bounds and the explain form of a
 * plan (see plan.h for the rules).
 *
 * Bounds are computed in two steps. First, per index field, a list of
 * value-space intervals (bson values with inclusivity, sorted, disjoint) is
 * derived from the filter's predicates on that path: equality and $in give
 * points (a $in of n values is sorted and merged in O(n log n), with no cap
 * on the leading field), $gt/$gte/$lt/$lte give ranges clipped to the
 * value's type bracket (numbers [-inf, inf], strings ["", {}), ...), and a
 * regex (alone or in $in) gives its literal prefix as a string range plus
 * itself as a point. Predicates that cannot be expressed ($ne, $regex with
 * $options, arrays, $exists ...) leave the field unbounded, which is always
 * safe because the matcher re-checks every document. A $or whose branches
 * are all equalities / $in on one path is one $in predicate; any other $or
 * is planned as an index union (or_stage) when nothing else bounds the scan.
 * Second, the leading point fields and at most one following range field are
 * combined (cartesian product, capped) into keystring byte intervals; a
 * descending field inverts its bytes, which swaps the ends of its interval.
 *
 * Invariants: every interval's lo <= hi byte-wise; intervals are sorted by lo
 * and disjoint, so a forward scan visits them in order and a backward scan in
 * reverse. Value-space bounds point into the filter's memory or into static
 * constants, so they are only used while the request lives; the plan keeps
 * only owned bytes and an explain rendering.
 */
#include "common/alloc.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "query/plan.h"
#include "doc/dec128.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index/keystring.h"
#include "doc/text.h"
#include "doc/collation.h"
#include "doc/project.h"
#include "doc/geo.h"
#include "query/index_filter.h"
#include "doc/value.h"

#define MAX_PREDS 128
/*
 * Cap on the cartesian product of several bounded fields' intervals. The
 * leading field is never capped: a $in of any size gives one point per
 * distinct value (one interval each, built in O(n log n)).
 */
#define MAX_PRODUCT_INTERVALS 65536

/* ---------- record-id set ---------- */

bool
mf_ridset_add(mf_ridset_t *s, int64_t rid)
{
    if ((s->n + 1) * 2 > s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 256;
        int64_t *ns = mf_calloc(ncap, sizeof(*ns));
        for (size_t i = 0; i < s->cap; i++) {
            if (s->slots[i] != 0) {
                size_t h = ((uint64_t)s->slots[i] * 0x9E3779B97F4A7C15ULL) & (ncap - 1);
                while (ns[h] != 0)
                    h = (h + 1) & (ncap - 1);
                ns[h] = s->slots[i];
            }
        }
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    size_t h = ((uint64_t)rid * 0x9E3779B97F4A7C15ULL) & (s->cap - 1);
    while (s->slots[h] != 0) {
        if (s->slots[h] == rid)
            return false;
        h = (h + 1) & (s->cap - 1);
    }
    s->slots[h] = rid;
    s->n++;
    return true;
}

void
mf_ridset_destroy(mf_ridset_t *s)
{
    free(s->slots);
    memset(s, 0, sizeof(*s));
}

int
mf_interval_key_cmp(const uint8_t *key, size_t klen, const uint8_t *bound, size_t blen)
{
    size_t n = klen < blen ? klen : blen;
    int r = n ? memcmp(key, bound, n) : 0;
    if (r != 0)
        return r;
    return klen < blen ? -1 : 0;
}

/* ---------- static bound values ---------- */

static const uint8_t empty_doc_bytes[5] = {5, 0, 0, 0, 0};

static bson_value_t
v_minkey(void)
{
    bson_value_t v = {.value_type = BSON_TYPE_MINKEY};
    return v;
}

static bson_value_t
v_maxkey(void)
{
    bson_value_t v = {.value_type = BSON_TYPE_MAXKEY};
    return v;
}

static bson_value_t
v_double(double d)
{
    bson_value_t v = {.value_type = BSON_TYPE_DOUBLE};
    v.value.v_double = d;
    return v;
}

static bson_value_t
v_type_only(bson_type_t t)
{
    bson_value_t v;
    memset(&v, 0, sizeof(v));
    v.value_type = t;
    if (t == BSON_TYPE_DOCUMENT || t == BSON_TYPE_ARRAY) {
        v.value.v_doc.data = (uint8_t *)empty_doc_bytes;
        v.value.v_doc.data_len = 5;
    } else if (t == BSON_TYPE_UTF8) {
        v.value.v_utf8.str = (char *)"";
        v.value.v_utf8.len = 0;
    }
    return v;
}

/* ---------- value-space intervals ---------- */

typedef struct vint {
    bson_value_t lo, hi;
    bool li, hincl;
} vint_t;

typedef struct vlist {
    vint_t *v;
    size_t n, cap;
    bool all; /* [MinKey, MaxKey]: unbounded */
} vlist_t;

static void
vlist_push(vlist_t *l, bson_value_t lo, bool li, bson_value_t hi, bool hincl)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4; /* doubling: a $in of n values costs O(n), not O(n^2) copies */
        l->v = mf_realloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n].lo = lo;
    l->v[l->n].hi = hi;
    l->v[l->n].li = li;
    l->v[l->n].hincl = hincl;
    l->n++;
}

static bool
is_point(const vint_t *x)
{
    return x->li && x->hincl && mf_value_cmp(&x->lo, &x->hi) == 0 && x->lo.value_type == x->hi.value_type;
}

/* The [lo, hi] type bracket of v's canonical type; false when none is used. */
static bool
bracket(const bson_value_t *v, bson_value_t *lo, bson_value_t *hi, bool *hi_incl)
{
    *hi_incl = true;
    switch (v->value_type) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128:
        if ((v->value_type == BSON_TYPE_DOUBLE && isnan(v->value.v_double)) ||
            (v->value_type == BSON_TYPE_DECIMAL128 && mf_dec_is_nan(&v->value.v_decimal128)))
            return false; /* NaN sorts below -infinity: a range to or from it is left to the matcher */
        *lo = v_double(-INFINITY);
        *hi = v_double(INFINITY);
        return true;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        *lo = v_type_only(BSON_TYPE_UTF8);
        *hi = v_type_only(BSON_TYPE_DOCUMENT);
        *hi_incl = false;
        return true;
    case BSON_TYPE_DOCUMENT:
        *lo = v_type_only(BSON_TYPE_DOCUMENT);
        *hi = v_type_only(BSON_TYPE_ARRAY);
        *hi_incl = false;
        return true;
    case BSON_TYPE_OID: {
        bson_value_t a = {.value_type = BSON_TYPE_OID}, b = {.value_type = BSON_TYPE_OID};
        memset(a.value.v_oid.bytes, 0, 12);
        memset(b.value.v_oid.bytes, 0xff, 12);
        *lo = a;
        *hi = b;
        return true;
    }
    case BSON_TYPE_DATE_TIME: {
        bson_value_t a = {.value_type = BSON_TYPE_DATE_TIME}, b = {.value_type = BSON_TYPE_DATE_TIME};
        a.value.v_datetime = INT64_MIN;
        b.value.v_datetime = INT64_MAX;
        *lo = a;
        *hi = b;
        return true;
    }
    case BSON_TYPE_BOOL: {
        bson_value_t a = {.value_type = BSON_TYPE_BOOL}, b = {.value_type = BSON_TYPE_BOOL};
        a.value.v_bool = false;
        b.value.v_bool = true;
        *lo = a;
        *hi = b;
        return true;
    }
    case BSON_TYPE_TIMESTAMP: {
        bson_value_t a = {.value_type = BSON_TYPE_TIMESTAMP}, b = {.value_type = BSON_TYPE_TIMESTAMP};
        a.value.v_timestamp.timestamp = 0;
        a.value.v_timestamp.increment = 0;
        b.value.v_timestamp.timestamp = UINT32_MAX;
        b.value.v_timestamp.increment = UINT32_MAX;
        *lo = a;
        *hi = b;
        return true;
    }
    default:
        return false;
    }
}

/*
 * Whether a collation can change how v compares: a string or symbol, itself
 * or inside a document or array (mongod's isCollatableType, which counts
 * every document and array; one without strings compares alike under any
 * collation, so it is not counted here).
 */
static bool
value_collatable(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        return true;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return true;
        while (bson_iter_next(&it))
            if (value_collatable(bson_iter_value(&it)))
                return true;
        return false;
    }
    default:
        return false;
    }
}

/* A value usable as an equality point (arrays, regexes, null handled apart). */
static bool
point_ok(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_REGEX:
    case BSON_TYPE_UNDEFINED:
        return false;
    case BSON_TYPE_DOUBLE:
        return !isnan(v->value.v_double);
    default:
        return true;
    }
}

/* Strings made for bounds (regex prefixes), owned by the candidate whose intervals point at them. */
typedef struct strpool {
    char **s;
    size_t n, cap;
} strpool_t;

static char *
pool_add(strpool_t *pool, const char *data, size_t len)
{
    char *c = mf_strndup(data, len);
    if (pool->n == pool->cap) {
        pool->cap = pool->cap ? pool->cap * 2 : 4;
        pool->s = mf_realloc(pool->s, pool->cap * sizeof(*pool->s));
    }
    pool->s[pool->n++] = c;
    return c;
}

static void
pool_destroy(strpool_t *pool)
{
    for (size_t i = 0; i < pool->n; i++)
        free(pool->s[i]);
    free(pool->s);
    memset(pool, 0, sizeof(*pool));
}

/*
 * regex_prefix: MongoDB's simpleRegex: the literal prefix every string
 * matching re (with flags) starts with. False when re is not anchored (^ or
 * \A), is case-insensitive, multi-line with ^, extended, or has an
 * alternation; then only the whole string bracket bounds it. The prefix is
 * appended to out (may stay empty, e.g. for /^.x/).
 */
static bool
regex_prefix(const char *re, const char *flags, bson_string_t *out)
{
    bool multiline_ok;
    const char *p;

    if (re[0] == '\\' && re[1] == 'A') {
        multiline_ok = true;
        p = re + 2;
    } else if (re[0] == '^') {
        multiline_ok = false;
        p = re + 1;
    } else {
        return false;
    }
    for (const char *f = flags ? flags : ""; *f; f++) {
        if (*f == 'i' || *f == 'x' || (*f == 'm' && !multiline_ok))
            return false;
    }
    if (strchr(re, '|') != NULL)
        return false; /* /^ab|cd/ also matches "xcd" */
    while (*p) {
        unsigned char c = (unsigned char)*p;
        if (c == '\\') {
            c = (unsigned char)p[1];
            if (c == 'Q') { /* \Q...\E quotes literally */
                p += 2;
                while (*p && !(p[0] == '\\' && p[1] == 'E'))
                    bson_string_append_c(out, *p++);
                if (*p == '\0')
                    break;
                p += 2;
                continue;
            }
            if (c == '\0' || isalnum(c) || c >= 0x80)
                break; /* \d, \w, \1 ...: a class or a reference, not a literal */
            bson_string_append_c(out, (char)c);
            p += 2;
            continue;
        }
        if (c == '*' || c == '?' || c == '{') {
            /* The previous character may occur zero times: it is not part of the prefix. */
            if (out->len > 0) {
                /* Drop the whole previous UTF-8 character. */
                uint32_t l = out->len - 1;
                while (l > 0 && ((unsigned char)out->str[l] & 0xC0) == 0x80)
                    l--;
                out->str[l] = '\0';
                out->len = l;
            }
            break;
        }
        if (strchr("^$.[()+", (int)c) != NULL)
            break;
        bson_string_append_c(out, (char)c);
        p++;
    }
    return true;
}

/*
 * Interval list of a regex value rv (a /re/ literal or a regex in $in): the
 * strings starting with its literal prefix (["ab", "ac") for /^ab/), or all
 * strings ["", {}) when it has none, plus the regex value itself, which a
 * regex also matches. Never exact: the matcher re-checks.
 */
/*
 * The key pattern of the index whose bounds are being built (NULL: none;
 * bounds_index sets it). Its collation (bounds_coll; NULL: simple): enc()
 * encodes strings as its sort keys, and a regex's literal prefix, which
 * says nothing about collation order, gives no string range. Its key
 * format: dec_key_ties.
 */
static _Thread_local const mf_keypattern_t *tls_bounds_kp;

static const mf_collation_t *
bounds_coll(void)
{
    return tls_bounds_kp != NULL ? tls_bounds_kp->collation : NULL;
}

static void
regex_list(const bson_value_t *rv, strpool_t *pool, vlist_t *out)
{
    bson_string_t *pre = bson_string_new(NULL);
    bool anchored = regex_prefix(rv->value.v_regex.regex, rv->value.v_regex.options, pre);
    size_t len = pre->len;

    while (anchored && len > 0 && (unsigned char)pre->str[len - 1] == 0xFF)
        len--;
    if (anchored && len > 0 && bounds_coll() == NULL) {
        bson_value_t lo = {.value_type = BSON_TYPE_UTF8}, hi = {.value_type = BSON_TYPE_UTF8};
        char *l = pool_add(pool, pre->str, pre->len);
        char *h = pool_add(pool, pre->str, len);
        h[len - 1] = (char)((unsigned char)h[len - 1] + 1);
        lo.value.v_utf8.str = l;
        lo.value.v_utf8.len = pre->len;
        hi.value.v_utf8.str = h;
        hi.value.v_utf8.len = (uint32_t)len;
        vlist_push(out, lo, true, hi, false);
    } else {
        vlist_push(out, v_type_only(BSON_TYPE_UTF8), true, v_type_only(BSON_TYPE_DOCUMENT), false);
    }
    vlist_push(out, *rv, true, *rv, true);
    bson_string_free(pre, true);
}

/* Names kp as the key pattern whose bounds are built (NULL: none), for enc() and dec_key_ties. */
static void
bounds_index(const mf_keypattern_t *kp)
{
    tls_bounds_kp = kp;
}

/*
 * Whether v's index key (or, for a document or an array, the key of a
 * number inside it) may be shared by an unequal value, so that bounds at v
 * are made inclusive and left to the matcher, which compares decimals
 * exactly (value.c), and the scan reads the few keys equal to the bound's.
 *
 * In KEY FORMAT 1 (an index created before format 2) a decimal is its
 * nearest double plus a residual of long-double precision, so one that
 * differs from a number only past about 19 digits (1.00000000000000000001
 * beside 1) has that number's key: every number may tie. In format 2
 * (keystring.c) equal numbers of any type share a key and unequal ones do
 * not, except at the ends of its range (helper-97's review): a finite
 * decimal past a long double's range (1E+5000) has Infinity's key, and an
 * integral decimal whose residual from its double passes the suffix's
 * clamp (beyond about 2^65) shares its key with its neighbours. So a number
 * that is infinite or of magnitude 2^64 or more may tie there too; every
 * other number's bounds are exact. (Until session 56 every number was
 * treated as format 1's: {a: {$gt: 5}} read and fetched every 5, and no
 * numeric count could skip the documents.)
 */
static bool
dec_key_ties(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) {
        bson_iter_t it;
        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return true;
        while (bson_iter_next(&it))
            if (dec_key_ties(bson_iter_value(&it)))
                return true;
        return false;
    }
    if (!mf_value_is_number(v))
        return false;
    if (tls_bounds_kp == NULL || tls_bounds_kp->legacy_decimals)
        return true; /* KEY FORMAT 1, or no index named: the safe answer */
    double d = mf_value_as_double(v);
    return isinf(d) || fabs(d) >= 0x1p64;
}

/* Interval list of an equality on v; false if not indexable. *exact: bounds equal the predicate. */
static bool
eq_list(const bson_value_t *v, vlist_t *out, bool *exact)
{
    if (dec_key_ties(v))
        *exact = false;
    if (v->value_type == BSON_TYPE_NULL) {
        /* Null equality also matches missing fields (indexed as null) and undefined. */
        vlist_push(out, v_type_only(BSON_TYPE_UNDEFINED), true, v_type_only(BSON_TYPE_NULL), true);
        *exact = false;
        return true;
    }
    if (!point_ok(v))
        return false;
    vlist_push(out, *v, true, *v, true);
    return true;
}

static int
vint_lo_cmp(const void *a, const void *b)
{
    const vint_t *x = a, *y = b;
    return mf_value_cmp(&x->lo, &y->lo);
}

/*
 * Field i's multikey paths on ix (mf_index_t.mk_paths): 0 when no document
 * held an array on its path, so it bounds, intersects and sorts as on an
 * index that is not multikey. Geo fields (many cells) and wildcard indexes
 * count as arrays everywhere.
 */
static uint32_t
field_mk(const mf_index_t *ix, int i)
{
    if (!atomic_load(&ix->multikey))
        return 0;
    if (ix->kp.is_wildcard || ix->kp.geo[i] != MF_GEO_IX_NONE)
        return UINT32_MAX;
    uint32_t m = atomic_load(&ix->mk_paths[i]);
    for (int f = 0; m == 0 && f < ix->kp.nfields; f++)
        if (atomic_load(&ix->mk_paths[f]) != 0)
            return 0;
    return m != 0 ? m : UINT32_MAX; /* multikey with no paths known: every field may hold an array */
}

/*
 * Whether fields i and j of ix share a path prefix that held an array:
 * their keys pair up element by element ({"a.b": 1, "a.c": 1} keys each
 * element of a), so bounds on both would miss a document whose elements
 * match them separately (mongod's shared multikey prefix).
 */
static bool
shared_mk_prefix(const mf_index_t *ix, int i, int j)
{
    const char *a = ix->kp.fields[i], *b = ix->kp.fields[j];
    uint32_t m = field_mk(ix, i) & field_mk(ix, j);
    for (int p = 0; m != 0; p++) {
        const char *da = strchr(a, '.'), *db = strchr(b, '.');
        size_t la = da ? (size_t)(da - a) : strlen(a), lb = db ? (size_t)(db - b) : strlen(b);
        if (la != lb || memcmp(a, b, la) != 0)
            return false;
        if (m & (UINT32_C(1) << (p < 31 ? p : 31)))
            return true;
        if (da == NULL || db == NULL)
            return false;
        a = da + 1;
        b = db + 1;
    }
    return false;
}

/*
 * Interval list of one predicate value (implicit equality or an operator
 * document). Returns false when the predicate gives no usable bound.
 */
static bool
pred_list(const bson_value_t *pv, bool multikey, strpool_t *pool, vlist_t *out, bool *exact)
{
    bson_t d;
    bson_iter_t it;
    *exact = true;
    if (pv->value_type == BSON_TYPE_REGEX) {
        regex_list(pv, pool, out);
        *exact = false;
        return true;
    }
    if (pv->value_type != BSON_TYPE_DOCUMENT)
        return eq_list(pv, out, exact);
    if (!bson_init_static(&d, pv->value.v_doc.data, pv->value.v_doc.data_len) || !bson_iter_init(&it, &d))
        return false;
    if (!bson_iter_next(&it) || bson_iter_key(&it)[0] != '$')
        return eq_list(pv, out, exact); /* a plain embedded document */
    bool have = false;
    vint_t acc = {v_minkey(), v_maxkey(), true, true};
    bson_iter_init(&it, &d);
    while (bson_iter_next(&it)) {
        const char *op = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(op, "$eq") == 0) {
            if (have)
                goto inexact;
            vlist_t tmp = {0};
            if (!eq_list(v, &tmp, exact)) {
                free(tmp.v);
                goto inexact;
            }
            acc = tmp.v[0];
            free(tmp.v);
            have = true;
        } else if (strcmp(op, "$in") == 0) {
            if (have || v->value_type != BSON_TYPE_ARRAY)
                goto inexact;
            bson_t arr;
            bson_iter_t ai;
            vlist_t tmp = {0};
            bool ok = bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len) && bson_iter_init(&ai, &arr);
            while (ok && bson_iter_next(&ai)) {
                bool ex = true;
                const bson_value_t *e = bson_iter_value(&ai);
                if (e->value_type == BSON_TYPE_REGEX) {
                    regex_list(e, pool, &tmp);
                    ex = false;
                } else if (!eq_list(e, &tmp, &ex)) {
                    ok = false;
                }
                if (!ex)
                    *exact = false;
            }
            if (!ok || tmp.n == 0) {
                free(tmp.v);
                if (ok && tmp.n == 0) {
                    /* $in: [] matches nothing: an empty list. */
                    out->n = 0;
                    return true;
                }
                goto inexact;
            }
            qsort(tmp.v, tmp.n, sizeof(*tmp.v), vint_lo_cmp);
            size_t k = 0;
            for (size_t i = 0; i < tmp.n; i++) {
                if (k > 0 && mf_value_cmp(&tmp.v[k - 1].hi, &tmp.v[i].lo) >= 0) {
                    if (mf_value_cmp(&tmp.v[i].hi, &tmp.v[k - 1].hi) > 0)
                        tmp.v[k - 1].hi = tmp.v[i].hi;
                    continue;
                }
                tmp.v[k++] = tmp.v[i];
            }
            tmp.n = k;
            for (bson_iter_t rest = it; bson_iter_next(&rest);)
                *exact = false; /* other operators beside $in are left to the matcher */
            *out = tmp;
            return true;
        } else if (strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 || strcmp(op, "$lt") == 0 ||
                   strcmp(op, "$lte") == 0) {
            bson_value_t blo, bhi;
            bool bhi_incl;
            if (multikey && have) {
                *exact = false;
                continue;
            }
            if (v->value_type == BSON_TYPE_MINKEY || v->value_type == BSON_TYPE_MAXKEY ||
                !bracket(v, &blo, &bhi, &bhi_incl)) {
                *exact = false;
                continue;
            }
            vint_t r;
            if (dec_key_ties(v))
                *exact = false; /* build_intervals_coll scans its key inclusively */
            if (op[1] == 'g') {
                r.lo = *v;
                r.li = op[3] == 'e';
                r.hi = bhi;
                r.hincl = bhi_incl;
            } else {
                r.lo = blo;
                r.li = true;
                r.hi = *v;
                r.hincl = op[3] == 'e';
            }
            /* intersect acc with r */
            int c = mf_value_cmp(&r.lo, &acc.lo);
            if (c > 0 || (c == 0 && !r.li)) {
                acc.lo = r.lo;
                acc.li = r.li;
            }
            c = mf_value_cmp(&r.hi, &acc.hi);
            if (c < 0 || (c == 0 && !r.hincl)) {
                acc.hi = r.hi;
                acc.hincl = r.hincl;
            }
            have = true;
        } else {
            *exact = false; /* $ne, $exists, $regex ...: the matcher decides */
        }
    }
    if (!have)
        return false;
    int c = mf_value_cmp(&acc.lo, &acc.hi);
    if (c > 0 || (c == 0 && !(acc.li && acc.hincl))) {
        out->n = 0; /* empty: matches nothing */
        return true;
    }
    vlist_push(out, acc.lo, acc.li, acc.hi, acc.hincl);
    return true;
inexact:
    *exact = false;
    return false;
}

/* Intersects two sorted disjoint lists into out: a merge, O(|a| + |b|). */
static void
vlist_intersect(const vlist_t *a, const vlist_t *b, vlist_t *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0, j = 0; i < a->n && j < b->n;) {
        {
            vint_t r = a->v[i];
            int c = mf_value_cmp(&b->v[j].lo, &r.lo);
            if (c > 0 || (c == 0 && !b->v[j].li)) {
                r.lo = b->v[j].lo;
                r.li = b->v[j].li;
            }
            c = mf_value_cmp(&b->v[j].hi, &r.hi);
            if (c < 0 || (c == 0 && !b->v[j].hincl)) {
                r.hi = b->v[j].hi;
                r.hincl = b->v[j].hincl;
            }
            c = mf_value_cmp(&r.lo, &r.hi);
            if (c < 0 || (c == 0 && r.li && r.hincl))
                vlist_push(out, r.lo, r.li, r.hi, r.hincl);
        }
        /* Advance the interval that ends first; the other may meet the next one. */
        int c = mf_value_cmp(&a->v[i].hi, &b->v[j].hi);
        if (c < 0 || (c == 0 && !a->v[i].hincl))
            i++;
        else
            j++;
    }
}

/* ---------- predicates ---------- */

typedef struct pred {
    char path[256];
    bson_value_t v; /* view into the filter */
    int elem;       /* top-level element index of the filter it came from */
    bool from_elem_match;
} pred_t;

typedef struct preds {
    pred_t p[MAX_PREDS];
    int n;
    bson_t *owned[8]; /* synthesized operands ($or read as $in) that preds point into */
    int nowned;
} preds_t;

static void add_pred(preds_t *ps, const char *path, const bson_value_t *v, int elem, bool em);

static void
preds_free(preds_t *ps)
{
    if (ps == NULL)
        return;
    for (int i = 0; i < ps->nowned; i++)
        bson_destroy(ps->owned[i]);
    free(ps);
}

/* Appends values to an array under consecutive index keys. */
typedef struct arrb {
    bson_t arr;
    uint32_t i;
} arrb_t;

static void
arrb_append(arrb_t *a, const bson_value_t *v)
{
    char buf[16];
    const char *key;
    size_t kl = bson_uint32_to_string(a->i++, &key, buf, sizeof(buf));
    bson_append_value(&a->arr, key, (int)kl, v);
}

/*
 * The path of a $or branch that is a single equality or $in ({a: 5}, {a:
 * {$eq: 5}}, {a: {$in: [...]}}), with its values appended to arr; NULL if
 * the branch is anything else. A regex literal or {$eq: /re/} is not one
 * (the matcher keeps those as they are, see match.c or_to_in).
 */
static const char *
or_branch_values(const bson_value_t *b, arrb_t *arr)
{
    bson_iter_t it, op;
    if (b->value_type != BSON_TYPE_DOCUMENT || !bson_iter_init_from_data(&it, b->value.v_doc.data, b->value.v_doc.data_len) ||
        !bson_iter_next(&it))
        return NULL;
    const char *path = bson_iter_key(&it);
    const bson_value_t *v = bson_iter_value(&it);
    bson_iter_t rest = it;
    if (path[0] == '$' || bson_iter_next(&rest) || v->value_type == BSON_TYPE_REGEX)
        return NULL;
    if (v->value_type == BSON_TYPE_DOCUMENT && bson_iter_recurse(&it, &op) && bson_iter_next(&op) &&
        bson_iter_key(&op)[0] == '$') {
        const char *o = bson_iter_key(&op);
        const bson_value_t *ov = bson_iter_value(&op);
        bson_iter_t more = op;
        if (bson_iter_next(&more))
            return NULL;
        if (strcmp(o, "$eq") == 0 && ov->value_type != BSON_TYPE_REGEX) {
            arrb_append(arr, ov);
            return path;
        }
        if (strcmp(o, "$in") == 0 && ov->value_type == BSON_TYPE_ARRAY) {
            bson_iter_t ai;
            if (!bson_iter_recurse(&op, &ai))
                return NULL;
            while (bson_iter_next(&ai))
                arrb_append(arr, bson_iter_value(&ai));
            return path;
        }
        return NULL;
    }
    arrb_append(arr, v);
    return path;
}

/* A $or of equalities / $in on one path, as the predicate {path: {$in: [...]}} (MongoDB's rewrite). */
static void
add_or_as_in(preds_t *ps, const bson_iter_t *orit, int elem)
{
    bson_iter_t ai;
    const char *path = NULL;
    bool ok = true;
    if (ps->nowned >= (int)(sizeof(ps->owned) / sizeof(ps->owned[0])) || !bson_iter_recurse(orit, &ai))
        return;
    bson_t *doc = bson_new();
    arrb_t arr = {.i = 0};
    BSON_APPEND_ARRAY_BEGIN(doc, "$in", &arr.arr);
    while (ok && bson_iter_next(&ai)) {
        const char *p = or_branch_values(bson_iter_value(&ai), &arr);
        ok = p != NULL && (path == NULL || strcmp(p, path) == 0);
        if (path == NULL)
            path = p;
    }
    bson_append_array_end(doc, &arr.arr);
    if (!ok || path == NULL) {
        bson_destroy(doc);
        return;
    }
    ps->owned[ps->nowned++] = doc;
    bson_value_t v = {.value_type = BSON_TYPE_DOCUMENT};
    v.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    v.value.v_doc.data_len = doc->len;
    add_pred(ps, path, &v, elem, true);
}

static void
add_pred(preds_t *ps, const char *path, const bson_value_t *v, int elem, bool em)
{
    size_t len = strlen(path);
    if (ps->n >= MAX_PREDS || len >= sizeof(ps->p[0].path))
        return;
    pred_t *p = &ps->p[ps->n++];
    memcpy(p->path, path, len + 1);
    p->v = *v;
    p->elem = elem;
    p->from_elem_match = em;
}

/* Collects field predicates of filter (top level, $and children, $elemMatch object forms). */
static void
collect_preds(const bson_t *filter, preds_t *ps, int elem_base, int depth)
{
    bson_iter_t it;
    int idx = 0;
    if (filter == NULL || depth > 8 || !bson_iter_init(&it, filter))
        return;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int elem = depth == 0 ? idx : elem_base;
        idx++;
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t ai;
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai)) {
                if (BSON_ITER_HOLDS_DOCUMENT(&ai)) {
                    const uint8_t *data;
                    uint32_t len;
                    bson_t sub;
                    bson_iter_document(&ai, &len, &data);
                    if (bson_init_static(&sub, data, len))
                        collect_preds(&sub, ps, elem, depth + 1);
                }
            }
            continue;
        }
        if (strcmp(k, "$or") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            add_or_as_in(ps, &it, elem);
            continue;
        }
        if (k[0] == '$')
            continue;
        add_pred(ps, k, bson_iter_value(&it), elem, depth > 0);
        /* {p: {$elemMatch: {f: cond}}} implies {"p.f": cond}. */
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t oi, em;
            bson_iter_recurse(&it, &oi);
            if (bson_iter_find(&oi, "$elemMatch") && BSON_ITER_HOLDS_DOCUMENT(&oi) && bson_iter_recurse(&oi, &em)) {
                while (bson_iter_next(&em)) {
                    const char *sk = bson_iter_key(&em);
                    char path[256];
                    if (sk[0] == '$')
                        continue;
                    if ((size_t)snprintf(path, sizeof(path), "%s.%s", k, sk) >= sizeof(path))
                        continue;
                    add_pred(ps, path, bson_iter_value(&em), elem, true);
                }
            }
        }
    }
}

/* ---------- index choice ---------- */

bool
mf_plan_id_equality(const bson_t *filter, bson_value_t *v)
{
    bson_iter_t it;
    if (filter == NULL || bson_count_keys(filter) != 1 || !bson_iter_init_find(&it, filter, "_id"))
        return false;
    const bson_value_t *val = bson_iter_value(&it);
    if (val->value_type == BSON_TYPE_DOCUMENT) {
        bson_iter_t sub;
        if (!bson_iter_recurse(&it, &sub) || !bson_iter_next(&sub))
            goto plain; /* {} is a plain value */
        if (bson_iter_key(&sub)[0] != '$')
            goto plain;
        if (strcmp(bson_iter_key(&sub), "$eq") != 0)
            return false;
        const bson_value_t *inner = bson_iter_value(&sub);
        if (bson_iter_next(&sub))
            return false;
        if (inner->value_type == BSON_TYPE_ARRAY || inner->value_type == BSON_TYPE_REGEX ||
            inner->value_type == BSON_TYPE_DOCUMENT || inner->value_type == BSON_TYPE_NULL)
            return false;
        *v = *inner;
        return true;
    }
    if (val->value_type == BSON_TYPE_ARRAY || val->value_type == BSON_TYPE_REGEX || val->value_type == BSON_TYPE_NULL ||
        val->value_type == BSON_TYPE_UNDEFINED)
        return false;
plain:
    *v = *val;
    return true;
}

bool
mf_plan_index_hidden(const mf_index_t *ix)
{
    bson_iter_t it;
    return ix->spec && bson_iter_init_find(&it, ix->spec, "hidden") && bson_iter_as_bool(&it);
}

/* Whether index ix's key pattern is the hint document h (numbers compared by value, as mongod). */
static bool
index_key_is(const mf_index_t *ix, const bson_t *h)
{
    bson_iter_t it;
    bson_t key;
    const uint8_t *data;
    uint32_t len;
    if (!bson_iter_init_find(&it, ix->spec, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(&key, data, len) && mf_key_pattern_equal(&key, h);
}

/*
 * A key-pattern hint that matches more than one visible index (indexes may
 * share a key pattern when their collation, filter, sparse or unique
 * differ): 27 IndexNotFound, as mongod's planner. Returns true with err set.
 */
static bool
hint_ambiguous(const mf_coll_t *c, const mf_plan_request_t *req, const bson_value_t *hint, mf_error_t *err)
{
    bson_t h;
    const mf_index_t *first = NULL;
    if (hint->value_type != BSON_TYPE_DOCUMENT ||
        !bson_init_static(&h, hint->value.v_doc.data, hint->value.v_doc.data_len))
        return false;
    for (int i = 0; i < c->nindexes; i++) {
        const mf_index_t *ix = c->indexes[i];
        if (ix->building || mf_plan_index_hidden(ix) || !index_key_is(ix, &h))
            continue;
        if (first == NULL) {
            first = ix;
            continue;
        }
        char kp[200];
        mf_fmt_doc(&h, kp, sizeof(kp));
        mf_plan_error(err, MF_E_IndexNotFound, c->ns, req,
                   "Hint matched multiple indexes, must hint by index name. Matched: kp: %s name: '%s' and kp: %s "
                   "name: '%s'", kp, first->name, kp, ix->name);
        return true;
    }
    return false;
}

mf_index_t *
mf_plan_hint_index(const mf_coll_t *c, const bson_value_t *hint)
{
    if (c == NULL || hint == NULL)
        return NULL;
    for (int i = 0; i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        if (ix->building)
            continue; /* not usable until its build commits */
        if (hint->value_type == BSON_TYPE_UTF8) {
            if (strcmp(ix->name, hint->value.v_utf8.str) == 0)
                return ix;
        } else if (hint->value_type == BSON_TYPE_DOCUMENT) {
            bson_t h;
            if (bson_init_static(&h, hint->value.v_doc.data, hint->value.v_doc.data_len) && index_key_is(ix, &h))
                return ix;
        }
    }
    return NULL;
}

/* {$natural: d}: sets *dir and returns true. */
static bool
hint_natural(const bson_value_t *hint, int *dir)
{
    bson_t h;
    bson_iter_t it;
    if (hint == NULL || hint->value_type != BSON_TYPE_DOCUMENT ||
        !bson_init_static(&h, hint->value.v_doc.data, hint->value.v_doc.data_len) ||
        !bson_iter_init_find(&it, &h, "$natural"))
        return false;
    *dir = mf_value_as_double(bson_iter_value(&it)) < 0 ? -1 : 1;
    return true;
}

static bool
hint_empty(const bson_value_t *hint)
{
    if (hint == NULL)
        return true;
    if (hint->value_type == BSON_TYPE_UTF8)
        return hint->value.v_utf8.len == 0;
    if (hint->value_type == BSON_TYPE_DOCUMENT)
        return hint->value.v_doc.data_len <= 5;
    return false;
}

/*
 * The partial filter's top-level predicates all appear literally in filter
 * (strings byte for byte), and the query has the index's collation: under
 * another, {s: 'a'} would also match documents with 'A' that a filter
 * {s: 'a'} kept out of the index.
 */
static bool
partial_implied(const mf_index_t *ix, const preds_t *ps)
{
    bson_iter_t it, pi;
    if (!mf_collation_equal(ix->kp.collation, mf_collation_current()) ||
        !bson_iter_init_find(&it, ix->spec, "partialFilterExpression") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    preds_t *pf = mf_malloc(sizeof(*pf)); /* only p[0..n) and owned[0..nowned) are read */
    pf->n = pf->nowned = 0;
    const uint8_t *data;
    uint32_t len;
    bson_t pdoc;
    bson_iter_document(&it, &len, &data);
    if (bson_init_static(&pdoc, data, len))
        collect_preds(&pdoc, pf, 0, 0);
    bool ok = pf->n > 0 && bson_iter_init(&pi, &pdoc);
    for (int i = 0; ok && i < pf->n; i++) {
        bool found = false;
        for (int j = 0; j < ps->n && !found; j++) {
            const bson_value_t *a = &pf->p[i].v, *b = &ps->p[j].v;
            if (strcmp(pf->p[i].path, ps->p[j].path) != 0 || a->value_type != b->value_type)
                continue;
            if (a->value_type == BSON_TYPE_DOCUMENT || a->value_type == BSON_TYPE_ARRAY)
                found = a->value.v_doc.data_len == b->value.v_doc.data_len &&
                        memcmp(a->value.v_doc.data, b->value.v_doc.data, a->value.v_doc.data_len) == 0;
            else if (a->value_type == BSON_TYPE_UTF8)
                found = a->value.v_utf8.len == b->value.v_utf8.len &&
                        memcmp(a->value.v_utf8.str, b->value.v_utf8.str, a->value.v_utf8.len) == 0;
            else
                found = mf_value_cmp(a, b) == 0;
        }
        ok = found;
    }
    preds_free(pf);
    return ok;
}

/* Per-candidate analysis. */
typedef struct cand {
    mf_index_t *ix;
    vlist_t f[MF_KP_MAX_FIELDS];
    int nbounded;  /* fields turned into byte bounds */
    int npoints;   /* leading fields with point intervals only */
    int nsingle;   /* leading fields with exactly one point */
    bool range;    /* field nbounded-1 is a range */
    bool empty;    /* some bounded field has no interval: nothing matches */
    bool null_ok;  /* some bounded field excludes null (sparse usable) */
    bool used[MAX_PREDS];
    bool inexact[MAX_PREDS];
    bool mk_only[MAX_PREDS]; /* inexact only because its field's path held an array (distinct_mk_exact) */
    int sort_dir;  /* 0 no sort provided, 1 forward, -1 backward */
    strpool_t pool; /* strings the intervals point at (regex prefixes) */
} cand_t;

static void
cand_destroy(cand_t *k)
{
    for (int i = 0; i < MF_KP_MAX_FIELDS; i++)
        free(k->f[i].v);
    pool_destroy(&k->pool);
}

/*
 * keep_better: a candidate loop's step. When tmp's score sc beats
 * *best_score, tmp becomes *best (the old one freed) and a fresh scratch
 * candidate is returned; else tmp is emptied and returned for reuse.
 */
static cand_t *
keep_better(cand_t **best, int *best_score, cand_t *tmp, int sc)
{
    if (sc <= *best_score) {
        cand_destroy(tmp);
        return tmp;
    }
    if (*best) {
        cand_destroy(*best);
        free(*best);
    }
    *best = tmp;
    *best_score = sc;
    return mf_malloc(sizeof(*tmp));
}

/*
 * Whether an interval of l has an end a collation compares (a string, or a
 * document or array holding one): such bounds mean nothing in an index of
 * another collation, whose keys hold its own sort keys for strings.
 */
static bool
vlist_ends_collatable(const vlist_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (value_collatable(&l->v[i].lo) || value_collatable(&l->v[i].hi))
            return true;
    return false;
}

/*
 * Whether the values l admits may include strings (or documents and arrays,
 * which may hold them): unbounded, an end a collation compares, or an
 * interval that spans the strings' type bracket. An index of another
 * collation orders such values its own way, so it gives no sort on them
 * (mongod's getFieldsWithStringBounds).
 */
static bool
vlist_may_collate(const vlist_t *l)
{
    if (l->all || vlist_ends_collatable(l))
        return true;
    int s = mf_value_type_rank(BSON_TYPE_UTF8), a = mf_value_type_rank(BSON_TYPE_ARRAY);
    for (size_t i = 0; i < l->n; i++)
        if (mf_value_type_rank(l->v[i].lo.value_type) <= a && mf_value_type_rank(l->v[i].hi.value_type) >= s)
            return true;
    return false;
}

static bool
interval_has_null(const vint_t *x)
{
    bson_value_t n = v_type_only(BSON_TYPE_NULL);
    int a = mf_value_cmp(&x->lo, &n), b = mf_value_cmp(&n, &x->hi);
    return (a < 0 || (a == 0 && x->li)) && (b < 0 || (b == 0 && x->hincl));
}

/* The first geo field of an index: the one keyed by cells (index.h), or -1. */
static int
geo_cell_field(const mf_index_t *ix)
{
    for (int i = 0; i < ix->kp.nfields; i++)
        if (ix->kp.geo[i] != MF_GEO_IX_NONE)
            return i;
    return -1;
}

/* Whether the cell field of k's geo index got bounds from a $geoWithin / $geoIntersects. */
static bool
geo_bounded(const cand_t *k)
{
    int cf = geo_cell_field(k->ix);
    return cf >= 0 && cf < k->nbounded && !k->f[cf].all;
}

/* A geo cell field's intervals: the cells covering a $geoWithin / $geoIntersects operand. */
static bool
geo_pred_list(const mf_index_t *ix, int field, const bson_value_t *pv, vlist_t *out)
{
    mf_geo_cell_range_t *r;
    size_t n;
    int rc = ix->kp.geo[field] == MF_GEO_IX_2DSPHERE ? mf_geo_cover(pv, &r, &n)
                                                     : mf_geo_cover_2d(pv, ix->kp.geo_min, ix->kp.geo_max, &r, &n);
    if (rc != 0)
        return false;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        bson_value_t lo = {.value_type = BSON_TYPE_INT64}, hi = {.value_type = BSON_TYPE_INT64};
        lo.value.v_int64 = r[i].lo;
        hi.value.v_int64 = r[i].hi;
        vlist_push(out, lo, true, hi, true);
    }
    free(r);
    return true;
}

static int
hashed_point_cmp(const void *a, const void *b)
{
    const vint_t *x = a, *y = b;
    return x->lo.value.v_int64 < y->lo.value.v_int64 ? -1 : x->lo.value.v_int64 > y->lo.value.v_int64;
}

/* Pushes the point of v's hash (under the bounds' collation) onto out; false if it cannot be computed. */
static bool
hashed_push(const bson_value_t *v, vlist_t *out)
{
    bson_value_t h;
    mf_error_t e;
    if (mf_index_hashed_component(v, bounds_coll(), &h, &e) != 0)
        return false;
    vlist_push(out, h, true, h, true);
    return true;
}

/*
 * A hashed field's intervals (index.h): an equality or $in (points only;
 * a range, regex or $exists cannot use the hash) becomes the sorted,
 * distinct points of its values' hashes, NumberLongs as explain shows
 * them. Null equality's [undefined, null] gives both hashes (a missing
 * field is hashed as null). A number that is not whole also gives the
 * hash the other type of an equal value gets (a double hashes truncated,
 * a decimal rounded half to even), so 1.5 finds NumberDecimal("1.5").
 * Every use is inexact: hashes collide, the matcher re-checks. *has_null
 * is set when the values include null. Returns false when the predicate
 * cannot use the index.
 */
static bool
hashed_list(const bson_value_t *pv, strpool_t *pool, vlist_t *out, bool *has_null)
{
    vlist_t l = {0};
    bool exact = true, ok;
    memset(out, 0, sizeof(*out));
    *has_null = false;
    ok = pred_list(pv, false, pool, &l, &exact);
    for (size_t i = 0; ok && i < l.n; i++) {
        const vint_t *x = &l.v[i];
        if (x->lo.value_type == BSON_TYPE_UNDEFINED && x->hi.value_type == BSON_TYPE_NULL && x->li && x->hincl) {
            *has_null = true;
            ok = hashed_push(&x->lo, out) && hashed_push(&x->hi, out);
            continue;
        }
        if (!is_point(x) || x->lo.value_type == BSON_TYPE_MINKEY || x->lo.value_type == BSON_TYPE_MAXKEY) {
            ok = false;
            break;
        }
        ok = hashed_push(&x->lo, out);
        if (ok && (x->lo.value_type == BSON_TYPE_DOUBLE || x->lo.value_type == BSON_TYPE_DECIMAL128)) {
            bson_value_t other = {.value_type = BSON_TYPE_DECIMAL128};
            if (x->lo.value_type == BSON_TYPE_DOUBLE) {
                double d = x->lo.value.v_double;
                if (isfinite(d) && d != trunc(d)) {
                    mf_dec_from_double(d, 34, &other.value.v_decimal128);
                    ok = hashed_push(&other, out);
                }
            } else {
                other = v_double(mf_dec_to_double(&x->lo.value.v_decimal128));
                ok = hashed_push(&other, out);
            }
        }
    }
    free(l.v);
    if (!ok || out->n == 0) {
        free(out->v);
        memset(out, 0, sizeof(*out));
        return false;
    }
    qsort(out->v, out->n, sizeof(*out->v), hashed_point_cmp);
    size_t k = 0;
    for (size_t i = 0; i < out->n; i++)
        if (k == 0 || out->v[k - 1].lo.value.v_int64 != out->v[i].lo.value.v_int64)
            out->v[k++] = out->v[i];
    out->n = k;
    return true;
}

/*
 * Whether a component of path after its first is a number: at an array it
 * names a position as well as the field of the array's documents, and an
 * index holds only the position's value (index.c's dotted_or_array, which
 * counts such an index multikey), so on a multikey index the field gives
 * no bounds.
 */
static bool
path_positional(const char *path)
{
    for (const char *p = strchr(path, '.'); p != NULL; p = strchr(p, '.')) {
        p++;
        size_t n = strcspn(p, ".");
        if (n > 0 && strspn(p, "0123456789") >= n)
            return true;
    }
    return false;
}

static void
analyse(mf_index_t *ix, const preds_t *ps, cand_t *k)
{
    memset(k, 0, sizeof(*k));
    k->ix = ix;
    int nf = ix->kp.nfields;
    int cf = ix->kp.has_geo ? geo_cell_field(ix) : -1;
    /* An index of another collation than the query's bounds only predicates on values no collation compares. */
    bool foreign = !mf_collation_equal(ix->kp.collation, mf_collation_current());
    for (int i = 0; i < nf; i++) {
        k->f[i].all = true;
        bool fmk = field_mk(ix, i) != 0, shared = false;
        for (int b = 0; b < i && !shared; b++)
            shared = !k->f[b].all && shared_mk_prefix(ix, i, b);
        if (shared)
            continue; /* its keys pair with a bounded field's through one array: left to the matcher */
        if (fmk && path_positional(ix->kp.fields[i]))
            continue; /* keys of one reading of "a.0" (the position), the matcher's of both: left to it */
        for (int j = 0; j < ps->n; j++) {
            if (strcmp(ps->p[j].path, ix->kp.fields[i]) != 0)
                continue;
            if (ix->kp.geo[i] != MF_GEO_IX_NONE) {
                /* Geo fields: only the cell field, only from a geo predicate; always re-checked. */
                vlist_t gl = {0};
                k->inexact[j] = true;
                if (i != cf || !k->f[i].all || !geo_pred_list(ix, i, &ps->p[j].v, &gl))
                    continue;
                k->used[j] = true;
                k->f[i] = gl;
                continue;
            }
            if (ix->kp.has_hashed && i == ix->kp.hashed_field) {
                /* Only the first equality / $in, as points of hashes; a sparse index never for null. */
                vlist_t hl;
                bool has_null;
                k->inexact[j] = true;
                if (!k->f[i].all || ps->p[j].from_elem_match || foreign ||
                    !hashed_list(&ps->p[j].v, &k->pool, &hl, &has_null))
                    continue;
                if (has_null && ix->sparse) {
                    free(hl.v);
                    continue;
                }
                k->used[j] = true;
                free(k->f[i].v);
                k->f[i] = hl;
                continue;
            }
            if (fmk && !k->f[i].all) {
                k->inexact[j] = true; /* an array's elements may meet each predicate apart: one is used */
                continue;
            }
            vlist_t l = {0};
            bool exact = true;
            if (!pred_list(&ps->p[j].v, fmk, &k->pool, &l, &exact) || (foreign && vlist_ends_collatable(&l))) {
                free(l.v);
                k->inexact[j] = true;
                continue;
            }
            k->used[j] = true;
            k->inexact[j] = !exact || ps->p[j].from_elem_match || fmk;
            k->mk_only[j] = exact && !ps->p[j].from_elem_match && fmk;
            if (k->f[i].all) {
                free(k->f[i].v);
                k->f[i] = l;
                k->f[i].all = false;
            } else {
                vlist_t r;
                vlist_intersect(&k->f[i], &l, &r);
                free(k->f[i].v);
                free(l.v);
                k->f[i] = r;
            }
        }
    }
    /* Leading points, then at most one range. */
    size_t product = 1;
    for (int i = 0; i < nf; i++) {
        if (k->f[i].all)
            break;
        if (k->f[i].n == 0) {
            k->empty = true;
            k->nbounded = i + 1;
            break;
        }
        bool points = true;
        for (size_t j = 0; j < k->f[i].n; j++)
            points = points && is_point(&k->f[i].v[j]);
        if (i > 0 && product * k->f[i].n > MAX_PRODUCT_INTERVALS)
            break;
        product *= k->f[i].n;
        k->nbounded = i + 1;
        bool nulls = false;
        for (size_t j = 0; j < k->f[i].n; j++)
            nulls = nulls || interval_has_null(&k->f[i].v[j]);
        if (!nulls)
            k->null_ok = true;
        if (!points) {
            k->range = true;
            break;
        }
        k->npoints = i + 1;
        if (k->f[i].n == 1 && k->nsingle == i)
            k->nsingle = i + 1;
    }
}

/* Whether k's index yields sort spec's order; sets k->sort_dir. */
static void
check_sort(cand_t *k, const bson_t *sort)
{
    bson_iter_t it;
    k->sort_dir = 0;
    if (sort == NULL || bson_empty(sort))
        return;
    bool foreign = !mf_collation_equal(k->ix->kp.collation, mf_collation_current());
    for (int off = 0; off <= k->nsingle; off++) {
        int dir = 0, pos = off;
        bool ok = bson_iter_init(&it, sort);
        while (ok && bson_iter_next(&it)) {
            const bson_value_t *v = bson_iter_value(&it);
            if (pos >= k->ix->kp.nfields || !mf_value_is_number(v) || field_mk(k->ix, pos) != 0 ||
                (k->ix->kp.has_hashed && pos == k->ix->kp.hashed_field) ||
                strcmp(bson_iter_key(&it), k->ix->kp.fields[pos]) != 0 ||
                (foreign && vlist_may_collate(&k->f[pos]))) {
                ok = false;
                break;
            }
            bool want_desc = mf_value_as_double(v) < 0;
            int d = want_desc == k->ix->kp.desc[pos] ? 1 : -1;
            if (dir != 0 && d != dir)
                ok = false;
            dir = d;
            pos++;
        }
        if (ok && dir != 0) {
            k->sort_dir = dir;
            return;
        }
    }
}

static int
score(const cand_t *k)
{
    int s = 0;
    if (k->empty)
        s = 1000;
    else if (k->npoints > 0)
        s = 100 + 10 * k->npoints + (k->range ? 5 : 0) +
            (k->ix->unique && k->npoints == k->ix->kp.nfields && !k->ix->multikey ? 50 : 0);
    else if (k->range)
        s = 50;
    if (k->sort_dir != 0)
        s += 3;
    if (s > 0)
        s = s * 4 - (k->ix->kp.nfields > 3 ? 3 : k->ix->kp.nfields);
    return s;
}

/* ---------- rendering bounds ---------- */

static void
fmt_value(bson_string_t *s, const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_MINKEY:
        bson_string_append(s, "MinKey");
        return;
    case BSON_TYPE_MAXKEY:
        bson_string_append(s, "MaxKey");
        return;
    case BSON_TYPE_NULL:
        bson_string_append(s, "null");
        return;
    case BSON_TYPE_UNDEFINED:
        bson_string_append(s, "undefined");
        return;
    case BSON_TYPE_INT32:
        bson_string_append_printf(s, "%d", v->value.v_int32);
        return;
    case BSON_TYPE_INT64:
        bson_string_append_printf(s, "%lld", (long long)v->value.v_int64);
        return;
    case BSON_TYPE_DOUBLE: {
        double d = v->value.v_double;
        if (isinf(d))
            bson_string_append(s, d > 0 ? "inf.0" : "-inf.0");
        else if (isnan(d))
            bson_string_append(s, "nan.0");
        else if (d == floor(d) && fabs(d) < 1e15)
            bson_string_append_printf(s, "%.1f", d);
        else
            bson_string_append_printf(s, "%.17g", d);
        return;
    }
    case BSON_TYPE_UTF8:
        bson_string_append_printf(s, "\"%.*s\"", (int)v->value.v_utf8.len, v->value.v_utf8.str);
        return;
    case BSON_TYPE_BOOL:
        bson_string_append(s, v->value.v_bool ? "true" : "false");
        return;
    case BSON_TYPE_OID: {
        char hex[25];
        bson_oid_to_string(&v->value.v_oid, hex);
        bson_string_append_printf(s, "ObjectId('%s')", hex);
        return;
    }
    case BSON_TYPE_DATE_TIME:
        bson_string_append_printf(s, "new Date(%lld)", (long long)v->value.v_datetime);
        return;
    case BSON_TYPE_REGEX:
        bson_string_append_printf(s, "/%s/%s", v->value.v_regex.regex,
                                  v->value.v_regex.options ? v->value.v_regex.options : "");
        return;
    case BSON_TYPE_TIMESTAMP:
        bson_string_append_printf(s, "Timestamp(%u, %u)", v->value.v_timestamp.timestamp,
                                  v->value.v_timestamp.increment);
        return;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        bson_t d;
        if (v->value.v_doc.data_len <= 5) {
            bson_string_append(s, v->value_type == BSON_TYPE_ARRAY ? "[]" : "{}");
            return;
        }
        if (bson_init_static(&d, v->value.v_doc.data, v->value.v_doc.data_len)) {
            char *j = v->value_type == BSON_TYPE_ARRAY ? bson_array_as_json(&d, NULL)
                                                       : bson_as_relaxed_extended_json(&d, NULL);
            if (j)
                bson_string_append(s, j);
            bson_free(j);
        }
        return;
    }
    default:
        bson_string_append_printf(s, "<%s>", mf_type_name(v->value_type));
    }
}

/* Appends "[lo, hi]" for x, reversed when rev. */
static void
fmt_interval(bson_t *arr, int idx, const vint_t *x, bool rev)
{
    bson_string_t *s = bson_string_new(NULL);
    char key[16];
    if (!rev) {
        bson_string_append(s, x->li ? "[" : "(");
        fmt_value(s, &x->lo);
        bson_string_append(s, ", ");
        fmt_value(s, &x->hi);
        bson_string_append(s, x->hincl ? "]" : ")");
    } else {
        bson_string_append(s, x->hincl ? "[" : "(");
        fmt_value(s, &x->hi);
        bson_string_append(s, ", ");
        fmt_value(s, &x->lo);
        bson_string_append(s, x->li ? "]" : ")");
    }
    snprintf(key, sizeof(key), "%d", idx);
    BSON_APPEND_UTF8(arr, key, s->str);
    bson_string_free(s, true);
}

static void
render_bounds(const cand_t *k, int direction, bson_t *out)
{
    for (int i = 0; i < k->ix->kp.nfields; i++) {
        bson_t arr;
        bool rev = k->ix->kp.desc[i] != (direction < 0);
        BSON_APPEND_ARRAY_BEGIN(out, k->ix->kp.fields[i], &arr);
        if (i >= k->nbounded) {
            vint_t all = {v_minkey(), v_maxkey(), true, true};
            fmt_interval(&arr, 0, &all, rev);
        } else {
            size_t n = k->f[i].n;
            for (size_t j = 0; j < n; j++)
                fmt_interval(&arr, (int)j, &k->f[i].v[rev ? n - 1 - j : j], rev);
        }
        bson_append_array_end(out, &arr);
    }
}

/* ---------- byte intervals ---------- */

static int
enc(mf_keystring_t *ks, const bson_value_t *v, bool desc)
{
    mf_error_t e;
    return mf_index_append_component(ks, v, desc, bounds_coll(), &e);
}

static int
iv_cmp(const void *a, const void *b)
{
    const mf_interval_t *x = a, *y = b;
    int r = mf_interval_key_cmp(x->lo, x->lolen, y->lo, y->lolen);
    if (r == 0 && x->lolen != y->lolen)
        r = x->lolen < y->lolen ? -1 : 1;
    if (r == 0) /* ties ordered by their other end too, so equal intervals sort together (iv_dedup) */
        r = mf_interval_key_cmp(x->hi, x->hilen, y->hi, y->hilen);
    if (r == 0 && x->hilen != y->hilen)
        r = x->hilen < y->hilen ? -1 : 1;
    if (r == 0 && (x->lo_incl != y->lo_incl || x->hi_incl != y->hi_incl))
        r = (x->lo_incl * 2 + x->hi_incl) - (y->lo_incl * 2 + y->hi_incl);
    return r;
}

/*
 * Drops the intervals of st (sorted by iv_cmp) equal to the one before:
 * values that differ may have one key (a decimal past a long double's range
 * and Infinity, keystring.c), and a $in of both would scan, and return, the
 * documents of that key twice on an index that de-duplicates nothing.
 */
static void
iv_dedup(mf_stage_t *st)
{
    size_t k = 0;
    for (size_t i = 0; i < st->niv; i++) {
        if (k > 0 && iv_cmp(&st->iv[k - 1], &st->iv[i]) == 0) {
            free(st->iv[i].lo);
            free(st->iv[i].hi);
            continue;
        }
        st->iv[k++] = st->iv[i];
    }
    st->niv = k;
}

static uint8_t *
dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = mf_malloc(n ? n : 1);
    if (n)
        memcpy(d, p, n);
    return d;
}

/* Builds the byte intervals of k into st. Returns 0 or -1 (encoding failed). */
static int build_intervals_coll(const cand_t *k, mf_stage_t *st);

static int
build_intervals(const cand_t *k, mf_stage_t *st)
{
    bounds_index(&k->ix->kp);
    int rc = build_intervals_coll(k, st);
    bounds_index(NULL);
    return rc;
}

static int
build_intervals_coll(const cand_t *k, mf_stage_t *st)
{
    int nb = k->nbounded;
    size_t total = 1;
    if (k->empty) {
        st->niv = 0;
        return 0;
    }
    for (int i = 0; i < nb; i++)
        total *= k->f[i].n;
    st->iv = mf_calloc(total ? total : 1, sizeof(*st->iv));
    st->niv = 0;
    size_t idx[MF_KP_MAX_FIELDS] = {0};
    mf_keystring_t lo, hi;
    mf_index_ks_init(&lo, &k->ix->kp);
    mf_index_ks_init(&hi, &k->ix->kp);
    for (size_t t = 0; t < total; t++) {
        size_t r = t;
        for (int i = nb - 1; i >= 0; i--) {
            idx[i] = r % k->f[i].n;
            r /= k->f[i].n;
        }
        mf_ks_reset(&lo);
        mf_ks_reset(&hi);
        bool li = true, hincl = true;
        for (int i = 0; i < nb; i++) {
            const vint_t *x = &k->f[i].v[idx[i]];
            bool desc = k->ix->kp.desc[i];
            /* A number's key may be a decimal's too (dec_key_ties): its end is read, the matcher decides. */
            bool lo_in = x->li || dec_key_ties(&x->lo), hi_in = x->hincl || dec_key_ties(&x->hi);
            if (!desc) {
                if (enc(&lo, &x->lo, false) != 0 || enc(&hi, &x->hi, false) != 0)
                    goto fail;
                li = lo_in;
                hincl = hi_in;
            } else {
                if (enc(&lo, &x->hi, true) != 0 || enc(&hi, &x->lo, true) != 0)
                    goto fail;
                li = hi_in;
                hincl = lo_in;
            }
        }
        mf_interval_t *iv = &st->iv[st->niv++];
        iv->lo = dup_bytes(lo.data, lo.len);
        iv->lolen = lo.len;
        iv->hi = dup_bytes(hi.data, hi.len);
        iv->hilen = hi.len;
        iv->lo_incl = nb == 0 ? true : li;
        iv->hi_incl = nb == 0 ? true : hincl;
    }
    mf_ks_destroy(&lo);
    mf_ks_destroy(&hi);
    qsort(st->iv, st->niv, sizeof(*st->iv), iv_cmp);
    iv_dedup(st);
    return 0;
fail:
    mf_ks_destroy(&lo);
    mf_ks_destroy(&hi);
    return -1;
}

/* ---------- stages ---------- */

static mf_stage_t *
stage_new(mf_stage_kind_t kind, mf_stage_t *child)
{
    mf_stage_t *s = mf_calloc(1, sizeof(*s));
    s->kind = kind;
    s->child = child;
    s->direction = 1;
    return s;
}

static void
stage_free(mf_stage_t *s)
{
    while (s) {
        mf_stage_t *c = s->child;
        free(s->index_name);
        free(s->index_ident);
        if (s->key_pattern)
            bson_destroy(s->key_pattern);
        if (s->bounds)
            bson_destroy(s->bounds);
        for (size_t i = 0; i < s->niv; i++) {
            free(s->iv[i].lo);
            free(s->iv[i].hi);
        }
        free(s->iv);
        if (s->filter)
            bson_destroy(s->filter);
        if (s->spec)
            bson_destroy(s->spec);
        for (size_t i = 0; i < s->ninputs; i++)
            stage_free(s->inputs[i]);
        free(s->inputs);
        free(s);
        s = c;
    }
}

void
mf_plan_free(mf_plan_t *p)
{
    if (p == NULL)
        return;
    stage_free(p->root);
    if (p->id_is_eq)
        bson_value_destroy(&p->idv);
    free(p->last_key);
    mf_ridset_destroy(&p->seen);
    mf_text_query_free(p->text);
    mf_matcher_free(p->text_false);
    free(p);
}

mf_stage_t *
mf_plan_find_stage(const mf_plan_t *p, mf_stage_kind_t kind)
{
    for (mf_stage_t *s = p ? p->root : NULL; s; s = s->child)
        if (s->kind == kind)
            return s;
    return NULL;
}

const char *
mf_plan_stage_name(mf_stage_kind_t kind)
{
    static const char *names[] = {"EOF", "COLLSCAN", "IXSCAN", "IDHACK", "FETCH", "SORT", "SKIP", "LIMIT",
                                  "PROJECTION_SIMPLE", "PROJECTION_DEFAULT", "COUNT", "DELETE",
                                  "BATCHED_DELETE", "UPDATE", "OR", "TEXT_OR", "TEXT_MATCH",
                                  "PROJECTION_COVERED", "DISTINCT_SCAN"};
    return (unsigned)kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "UNKNOWN";
}

/* The filter minus the top-level elements the bounds answer exactly; NULL if nothing is left. */
static bson_t *
residual_filter(const bson_t *filter, const preds_t *ps, const cand_t *k)
{
    bson_iter_t it;
    if (filter == NULL || bson_empty(filter))
        return NULL;
    bson_t *out = bson_new();
    int idx = 0;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it)) {
        bool exact = false;
        if (k != NULL) { /* a field whose path held an array has its predicates inexact (analyse) */
            bool any = false, all_exact = true;
            for (int j = 0; j < ps->n; j++) {
                if (ps->p[j].elem != idx)
                    continue;
                any = true;
                bool bounded = false;
                for (int f = 0; f < k->nbounded; f++)
                    bounded = bounded || strcmp(ps->p[j].path, k->ix->kp.fields[f]) == 0;
                if (!k->used[j] || k->inexact[j] || !bounded || ps->p[j].from_elem_match)
                    all_exact = false;
            }
            exact = any && all_exact && bson_iter_key(&it)[0] != '$';
        }
        if (!exact)
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
        idx++;
    }
    if (bson_empty(out)) {
        bson_destroy(out);
        return NULL;
    }
    return out;
}

bool
mf_plan_projection_simple(const bson_t *proj)
{
    bson_iter_t it;
    bson_iter_init(&it, proj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_type_t t = bson_iter_type(&it);
        if (strchr(k, '.') || k[0] == '$' ||
            !(t == BSON_TYPE_BOOL || t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE))
            return false;
    }
    return true;
}

/*
 * Whether proj holds inclusions and exclusions only (a true or false number
 * or boolean for each field): no operator, expression or literal.
 */
bool
mf_plan_projection_inclusions(const bson_t *proj)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, proj))
        return false;
    while (bson_iter_next(&it)) {
        bson_type_t t = bson_iter_type(&it);
        if (!(t == BSON_TYPE_BOOL || t == BSON_TYPE_INT32 || t == BSON_TYPE_INT64 || t == BSON_TYPE_DOUBLE))
            return false;
    }
    return true;
}

/* The key fields a projection reads (key_read, over mf_projection_reads): their positions in fields. */
typedef struct key_reads {
    const mf_index_t *ix;
    uint32_t fields;
} key_reads_t;

/*
 * The position of path among ix's key pattern fields when a covered scan
 * can give it (projection_coverable), or -1: not hashed, its path never
 * held an array, no numeric component ("a.0": the key holds one reading of
 * the path, a projection another).
 */
static int
key_field_readable(const mf_index_t *ix, const char *path)
{
    const mf_keypattern_t *kp = &ix->kp;
    int f = -1;
    for (int i = 0; i < kp->nfields && f < 0; i++)
        if (strcmp(kp->fields[i], path) == 0)
            f = i;
    if (f < 0 || (kp->has_hashed && f == kp->hashed_field) || field_mk(ix, f) != 0 || path_positional(path))
        return -1;
    return f;
}

/* mf_projection_reads' visitor: each path read must be a readable key field. */
static bool
key_read(void *arg, const char *path)
{
    key_reads_t *r = arg;
    int f = key_field_readable(r->ix, path);
    if (f < 0)
        return false;
    r->fields |= UINT32_C(1) << f;
    return true;
}

/*
 * Whether an index scan of ix can cover the find projection proj (mongod's
 * analyzeProjection: an inclusion projection whose required fields the
 * IXSCAN provides, IndexScanNode::getFieldAvailability). proj: only
 * inclusions (a true number or boolean) of paths that are ix's key
 * pattern fields exactly, _id among them unless excluded; no operator, no
 * expression, no positional path ("a.$"), no numeric component ("a.0",
 * which keys read as an array position and a projection does not). ix: a
 * btree (or compound hashed, the hashed field not projected) index without
 * collation whose entries hold type bits, no key pattern field a prefix of
 * another, and no projected field whose path held an array. With parsed
 * (proj parsed, may be NULL), a projection with expressions is covered
 * too when every path it reads is such a key field (mf_projection_reads).
 * *fields gets the positions read.
 */
static bool
projection_coverable(const mf_index_t *ix, const bson_t *proj, const struct mf_projection *parsed, uint32_t *fields)
{
    const mf_keypattern_t *kp = &ix->kp;
    bson_iter_t it;
    bool id_out = false, any = false;
    *fields = 0;
    if (proj == NULL || bson_empty(proj) || !ix->key_types || kp->collation != NULL || kp->is_text ||
        kp->is_wildcard || kp->wildcard_compound || kp->has_geo || kp->nfields > 32)
        return false;
    for (int a = 0; a < kp->nfields; a++) {
        size_t al = strlen(kp->fields[a]);
        for (int b = 0; b < kp->nfields; b++)
            if (a != b && strncmp(kp->fields[a], kp->fields[b], al) == 0 && kp->fields[b][al] == '.')
                return false; /* {a: 1, "a.b": 1}: no one document holds both as keys give them */
    }
    if (parsed != NULL && !mf_plan_projection_inclusions(proj)) {
        /*
         * Expressions: covered when every path the projection reads is a key
         * field a covered scan gives (mongod's analyzeProjection:
         * getRequiredFields all provided, no requiresDocument); the
         * projection then runs on the decoded keys (PROJECTION_DEFAULT).
         */
        key_reads_t r = {.ix = ix};
        if (!mf_projection_reads(parsed, key_read, &r))
            return false;
        *fields = r.fields;
        return true;
    }
    if (!bson_iter_init(&it, proj))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bool truthy;
        if (v->value_type == BSON_TYPE_BOOL)
            truthy = v->value.v_bool;
        else if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
                 v->value_type == BSON_TYPE_DOUBLE)
            truthy = mf_value_as_double(v) != 0;
        else
            return false; /* an expression, $slice, $elemMatch, $meta or literal */
        if (strchr(k, '$') != NULL)
            return false; /* positional */
        if (!truthy) {
            if (strcmp(k, "_id") != 0)
                return false; /* an exclusion projection needs the document */
            id_out = true;
            continue;
        }
        int f = key_field_readable(ix, k);
        if (f < 0)
            return false;
        *fields |= UINT32_C(1) << f;
        any = true;
    }
    if (!id_out) {
        int f = key_field_readable(ix, "_id");
        if (f < 0)
            return false;
        *fields |= UINT32_C(1) << f;
    }
    return any || !id_out;
}

/*
 * Whether a sort no scan of ix provides can run over the keys a covered
 * scan decodes (mongod's analyzeSort: every sort field available from the
 * IXSCAN, IndexScanNode::getFieldAvailability): each field of sort is one
 * of ix's key pattern fields exactly, with an ascending or descending
 * number (no $meta), not hashed, no numeric component, and its path never
 * held an array. *fields gets their positions. sort NULL or empty: true.
 */
static bool
sort_coverable(const mf_index_t *ix, const bson_t *sort, uint32_t *fields)
{
    const mf_keypattern_t *kp = &ix->kp;
    bson_iter_t it;
    *fields = 0;
    if (sort == NULL || bson_empty(sort))
        return true;
    if (kp->nfields > 32 || !bson_iter_init(&it, sort))
        return false;
    while (bson_iter_next(&it)) {
        int f;
        if (!BSON_ITER_HOLDS_NUMBER(&it))
            return false; /* {$meta: ...} */
        if ((f = key_field_readable(ix, bson_iter_key(&it))) < 0 || kp->geo[f] != MF_GEO_IX_NONE)
            return false;
        *fields |= UINT32_C(1) << f;
    }
    return true;
}

/* Whether path a is a proper prefix of path b at a component boundary ("a" of "a.b"). */
static bool
path_prefix_of(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '.';
}

/*
 * Whether find projection proj keeps path as the document has it (mongod's
 * Projection::isFieldRetainedExactly), for a projection of inclusions and
 * exclusions only (false for any operator, expression or positional path):
 * _id unless excluded; else, for an inclusion, a path included or under
 * one; for an exclusion, a path neither excluded nor over or under an
 * excluded one.
 */
static bool
projection_keeps(const bson_t *proj, const char *path)
{
    bson_iter_t it;
    bool inclusion = false, id_out = false;
    if (!bson_iter_init(&it, proj))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (!(v->value_type == BSON_TYPE_BOOL || v->value_type == BSON_TYPE_INT32 ||
              v->value_type == BSON_TYPE_INT64 || v->value_type == BSON_TYPE_DOUBLE) ||
            strchr(k, '$') != NULL)
            return false;
        bool truthy = v->value_type == BSON_TYPE_BOOL ? v->value.v_bool : mf_value_as_double(v) != 0;
        if (strcmp(k, "_id") == 0)
            id_out = !truthy;
        else if (truthy)
            inclusion = true;
    }
    if (strcmp(path, "_id") == 0 || path_prefix_of("_id", path))
        return !id_out;
    bson_iter_init(&it, proj);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bool truthy = v->value_type == BSON_TYPE_BOOL ? v->value.v_bool : mf_value_as_double(v) != 0;
        if (strcmp(k, "_id") == 0)
            continue;
        if (inclusion && truthy && (strcmp(k, path) == 0 || path_prefix_of(k, path)))
            return true;
        if (!inclusion && !truthy && (strcmp(k, path) == 0 || path_prefix_of(k, path) || path_prefix_of(path, k)))
            return false;
    }
    return !inclusion;
}

/*
 * needs_metadata: whether spec (a sort or a projection; may be NULL) reads
 * document metadata other than the sort key ({$meta: "textScore"},
 * {$meta: "recordId"} ... at any depth): mongod's SORT_SIMPLE drops all
 * metadata but the sort key, so such a sort is SORT_DEFAULT.
 */
static bool
needs_metadata(const bson_t *spec)
{
    bson_iter_t it;
    if (spec == NULL || !bson_iter_init(&it, spec))
        return false;
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$meta") == 0 &&
            !(BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "sortKey") == 0))
            return true;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t child;
            uint32_t len;
            const uint8_t *data;
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                bson_iter_document(&it, &len, &data);
            else
                bson_iter_array(&it, &len, &data);
            if (bson_init_static(&child, data, len) && needs_metadata(&child))
                return true;
        }
    }
    return false;
}

/*
 * Whether the projection stage goes below a blocking sort (mongod's
 * tryPushdownProjectBeneathSort): the sort has no limit (a top-k sort
 * would project documents it then drops), and proj has no expression and
 * keeps every field sort sorts by as it is.
 */
static bool
projection_below_sort(const bson_t *proj, const bson_t *sort, int64_t limit)
{
    bson_iter_t it;
    if (limit > 0 || !bson_iter_init(&it, sort))
        return false;
    while (bson_iter_next(&it))
        if (!projection_keeps(proj, bson_iter_key(&it)))
            return false;
    return true;
}

/*
 * Whether v, a predicate's operand, reads the same on a key's value as on
 * the document: not null or undefined (a key's null is also a missing
 * field), not MinKey / MaxKey, no array (a path that held none), nothing
 * the matcher evaluates apart from the value ($expr and the like never
 * reach here: their keys start with '$').
 */
static bool
key_operand_ok(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
    case BSON_TYPE_ARRAY:
        return false;
    default:
        return true;
    }
}

/*
 * Whether the residual filter (top-level field predicates the bounds do not
 * answer exactly) can be evaluated on a covered scan's decoded key, as
 * mongod's IXSCAN filter evaluates its INEXACT_COVERED predicates: each one
 * is on a key pattern field of ix (not hashed, none of whose path held an
 * array, no numeric component) and is a value, a regex, or operators from
 * $eq, $gt, $gte, $lt, $lte, $ne, $in, $nin, $regex / $options, $mod with
 * operands that read the same whether the field is null or missing ($exists,
 * $type, null equality do not: the key's null is both).
 */
static bool
key_filter_ok(const mf_index_t *ix, const bson_t *residual)
{
    static const char *const ops[] = {"$eq", "$gt", "$gte", "$lt", "$lte", "$ne", "$in", "$nin", "$regex",
                                      "$options", "$mod", NULL};
    const mf_keypattern_t *kp = &ix->kp;
    bson_iter_t it, oi, ai;
    if (!bson_iter_init(&it, residual))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        int f = -1;
        for (int i = 0; i < kp->nfields && f < 0; i++)
            if (strcmp(kp->fields[i], k) == 0)
                f = i;
        if (f < 0 || k[0] == '$' || (kp->has_hashed && f == kp->hashed_field) || kp->geo[f] != MF_GEO_IX_NONE ||
            field_mk(ix, f) != 0 || path_positional(k))
            return false;
        if (v->value_type != BSON_TYPE_DOCUMENT) {
            if (!key_operand_ok(v))
                return false;
            continue;
        }
        if (!bson_iter_recurse(&it, &oi) || !bson_iter_next(&oi) || bson_iter_key(&oi)[0] != '$')
            continue; /* equality to an embedded document */
        bson_iter_recurse(&it, &oi);
        while (bson_iter_next(&oi)) {
            const char *op = bson_iter_key(&oi);
            const bson_value_t *ov = bson_iter_value(&oi);
            bool known = false;
            for (int i = 0; ops[i] != NULL && !known; i++)
                known = strcmp(op, ops[i]) == 0;
            if (!known)
                return false;
            if (strcmp(op, "$in") == 0 || strcmp(op, "$nin") == 0) {
                if (ov->value_type != BSON_TYPE_ARRAY || !bson_iter_recurse(&oi, &ai))
                    return false;
                while (bson_iter_next(&ai))
                    if (!key_operand_ok(bson_iter_value(&ai)))
                        return false;
            } else if (strcmp(op, "$mod") != 0 && !key_operand_ok(ov)) {
                return false;
            }
        }
    }
    return true;
}

/* Whether k bounds the scan (points, a range, or nothing to scan), not only provides the sort. */
static bool
cand_bounded(const cand_t *k)
{
    return k->empty || k->npoints > 0 || k->range;
}

/*
 * Whether c's _id index finds the documents whose _id equals idv under the
 * query's collation: the index has that collation, or idv holds nothing a
 * collation compares (a number, an ObjectId, a date: its key is the same
 * under any collation), as mongod's IDHACK takes a query whose collation
 * matches the collection's or whose _id is not collatable.
 */
static bool
id_lookup_exact(const mf_coll_t *c, const bson_value_t *idv)
{
    for (int i = 0; i < c->nindexes; i++)
        if (c->indexes[i]->is_id)
            return mf_collation_equal(c->indexes[i]->kp.collation, mf_collation_current()) ||
                   !value_collatable(idv);
    return false;
}

/*
 * The best usable index of c for ps (and sort), or NULL. With hinted, only
 * that index (any score); otherwise, with allowed (an index filter), only
 * the indexes it marks. The result is owned by the caller (cand_destroy,
 * free).
 */
static cand_t *
best_candidate(const mf_coll_t *c, const preds_t *ps, const bson_t *sort, mf_index_t *hinted, const bool *allowed)
{
    cand_t *best = NULL, *tmp = mf_malloc(sizeof(*tmp));
    int best_score = 0;
    for (int i = 0; i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        if (ix->building || ix->kp.is_text || ix->kp.is_wildcard || (hinted != NULL && ix != hinted) ||
            (hinted == NULL && allowed != NULL && !allowed[i]))
            continue;
        if (hinted == NULL && (mf_plan_index_hidden(ix) || (ix->partial && !partial_implied(ix, ps))))
            continue;
        /*
         * An index of another collation orders and compares strings its own
         * way: analyse bounds it only by predicates on other values, and
         * check_sort takes its order only where the bounds hold no strings.
         */
        bounds_index(&ix->kp);
        analyse(ix, ps, tmp);
        bounds_index(NULL);
        check_sort(tmp, sort);
        if (ix->kp.has_geo) {
            /* A geo index serves only a geo predicate's covering, and its keys give no order (index.h). */
            tmp->sort_dir = 0;
            if (!geo_bounded(tmp)) {
                cand_destroy(tmp);
                continue;
            }
        }
        if (hinted == NULL && ix->sparse && !tmp->null_ok) {
            cand_destroy(tmp);
            continue;
        }
        int sc = hinted ? 1 : score(tmp);
        tmp = keep_better(&best, &best_score, tmp, sc);
    }
    free(tmp);
    return best;
}

/* An IXSCAN stage over index x in direction dir (1 / -1), without bounds or intervals yet. */
static mf_stage_t *
ixscan_new(const mf_index_t *x, int dir)
{
    mf_stage_t *ix = stage_new(MF_ST_IXSCAN, NULL);
    bson_iter_t it;
    ix->index_name = mf_strdup(x->name);
    ix->index_ident = x->ident ? mf_strdup(x->ident) : NULL; /* unit tests build indexes without tables */
    if (bson_iter_init_find(&it, x->spec, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        ix->key_pattern = bson_new_from_data(data, len);
    } else {
        ix->key_pattern = bson_new();
    }
    ix->multikey = x->multikey;
    for (int f = 0; f < x->kp.nfields; f++)
        ix->mk_paths[f] = field_mk(x, f);
    ix->unique = x->unique;
    ix->sparse = x->sparse;
    ix->partial = x->partial != NULL;
    ix->direction = dir;
    ix->bounds = bson_new();
    return ix;
}

/* An IXSCAN stage for candidate k scanned in direction dir (1 / -1). */
static mf_stage_t *
ixscan_stage(const cand_t *k, int dir)
{
    mf_stage_t *ix = ixscan_new(k->ix, dir);
    render_bounds(k, ix->direction, ix->bounds);
    if (build_intervals(k, ix) != 0) {
        /* An unencodable bound: fall back to the whole index. */
        for (size_t i = 0; i < ix->niv; i++) {
            free(ix->iv[i].lo);
            free(ix->iv[i].hi);
        }
        free(ix->iv);
        ix->iv = mf_calloc(1, sizeof(*ix->iv));
        ix->iv[0].lo = dup_bytes(NULL, 0);
        ix->iv[0].hi = dup_bytes(NULL, 0);
        ix->iv[0].lo_incl = ix->iv[0].hi_incl = true;
        ix->niv = 1;
        ix->loose = true;
    }
    return ix;
}

/* ---------- wildcard indexes ---------- */

/*
 * A value a wildcard index can bound a path with (index/index_wild.c): a
 * scalar. Null and undefined also match missing paths, and documents,
 * arrays, regexes and MinKey / MaxKey compare with keys the index holds
 * under other paths (an object's fields) or not at all, so they never do.
 */
static bool
wild_operand_ok(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_REGEX:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
        return false;
    default:
        return true;
    }
}

/*
 * The value intervals a wildcard index scans for predicate pv on a covered
 * path: an equality, $eq, $in, $gt / $gte / $lt / $lte with scalar operands
 * (one range at most: the path may hold an array); other operators beside
 * them ($ne, $not ...) are left to the FETCH, the bounds being implied by
 * the ones used. Failing those, $exists: true sets *exists (out stays
 * empty): every key of the path and of its subpaths. false when pv gives
 * no usable bound.
 */
static bool
wild_pred_list(const bson_value_t *pv, strpool_t *pool, vlist_t *out, bool *exists)
{
    bson_iter_t it;
    bool exact, usable = false, exists_true = false;
    memset(out, 0, sizeof(*out));
    *exists = false;
    if (pv->value_type != BSON_TYPE_DOCUMENT) {
        if (!wild_operand_ok(pv))
            return false;
        return pred_list(pv, true, pool, out, &exact);
    }
    if (!bson_iter_init_from_data(&it, pv->value.v_doc.data, pv->value.v_doc.data_len) || !bson_iter_next(&it) ||
        bson_iter_key(&it)[0] != '$')
        return false; /* equality with an object */
    do {
        const char *op = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (strcmp(op, "$eq") == 0 || strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 || strcmp(op, "$lt") == 0 ||
            strcmp(op, "$lte") == 0) {
            if (!wild_operand_ok(v))
                return false;
            usable = true;
        } else if (strcmp(op, "$in") == 0) {
            bson_iter_t ai;
            if (v->value_type != BSON_TYPE_ARRAY || !bson_iter_recurse(&it, &ai))
                return false;
            while (bson_iter_next(&ai))
                if (!wild_operand_ok(bson_iter_value(&ai)))
                    return false;
            usable = true;
        } else if (strcmp(op, "$exists") == 0 && bson_iter_as_bool(&it)) {
            exists_true = true;
        }
    } while (bson_iter_next(&it));
    if (!usable) {
        *exists = exists_true;
        return exists_true;
    }
    if (!pred_list(pv, true, pool, out, &exact)) {
        free(out->v);
        memset(out, 0, sizeof(*out));
        return false;
    }
    return true;
}

/*
 * $exists: true on path (mongod's bounds): every key of the path itself,
 * ["a", "a"] with any value, and of its subpaths, ["a.", "a/") (the
 * strings starting with "a.": '/' follows '.'), into st.
 */
static void
wild_exists_intervals(const char *path, mf_stage_t *st)
{
    bson_t arr;
    mf_keystring_t k;
    mf_error_t e;
    size_t n = strlen(path);
    char *sub = mf_malloc(n + 2);
    bson_value_t pv = {.value_type = BSON_TYPE_UTF8}, lo = pv, hi = pv;
    memcpy(sub, path, n);
    sub[n] = '.';
    sub[n + 1] = '\0';
    pv.value.v_utf8.str = (char *)path;
    pv.value.v_utf8.len = (uint32_t)n;
    lo.value.v_utf8.str = sub;
    lo.value.v_utf8.len = (uint32_t)n + 1;
    vint_t px = {pv, pv, true, true}, all = {v_minkey(), v_maxkey(), true, true};

    BSON_APPEND_ARRAY_BEGIN(st->bounds, "$_path", &arr);
    fmt_interval(&arr, 0, &px, false);
    {
        /* ["a.", "a/"): rendered from a copy whose last byte is '/'. */
        char *end = mf_strdup(sub);
        end[n] = '/';
        hi.value.v_utf8.str = end;
        hi.value.v_utf8.len = (uint32_t)n + 1;
        vint_t sx = {lo, hi, true, false};
        fmt_interval(&arr, 1, &sx, false);
        free(end);
    }
    bson_append_array_end(st->bounds, &arr);
    BSON_APPEND_ARRAY_BEGIN(st->bounds, path, &arr);
    fmt_interval(&arr, 0, &all, false);
    bson_append_array_end(st->bounds, &arr);

    st->iv = mf_calloc(2, sizeof(*st->iv));
    mf_ks_init(&k);
    if (mf_wildcard_append_path(&k, path, &e) == 0) {
        mf_interval_t *iv = &st->iv[st->niv++];
        iv->lo = dup_bytes(k.data, k.len);
        iv->hi = dup_bytes(k.data, k.len);
        iv->lolen = iv->hilen = k.len;
        iv->lo_incl = iv->hi_incl = true;
    }
    mf_ks_reset(&k);
    if (mf_wildcard_append_path(&k, sub, &e) == 0) {
        mf_interval_t *iv = &st->iv[st->niv];
        iv->lo = dup_bytes(k.data, k.len);
        iv->lolen = k.len;
        sub[n] = '/';
        mf_ks_reset(&k);
        if (mf_wildcard_append_path(&k, sub, &e) == 0) {
            iv->hi = dup_bytes(k.data, k.len);
            iv->hilen = k.len;
            iv->lo_incl = true;
            iv->hi_incl = false;
            st->niv++;
        } else {
            free(iv->lo);
            iv->lo = NULL;
        }
    }
    mf_ks_destroy(&k);
    free(sub);
}

/*
 * The IXSCAN of wildcard index ix over path's value intervals l: each
 * interval is [path, lo] .. [path, hi] (the path never collated, the
 * value under the index's collation and direction), shown by explain as
 * mongod's expanded key pattern {$_path: 1, <path>: ±1} and its bounds.
 * Always multikey (record ids de-duplicated): one path may hold an array.
 */
static mf_stage_t *
wild_ixscan(const mf_index_t *ix, const char *path, const vlist_t *l, bool exists)
{
    mf_stage_t *st = ixscan_new(ix, 1);
    bson_t arr;
    bool desc = ix->kp.desc[1];
    mf_keystring_t lo, hi;
    mf_error_t e;
    bson_value_t pv = {.value_type = BSON_TYPE_UTF8};
    pv.value.v_utf8.str = (char *)path;
    pv.value.v_utf8.len = (uint32_t)strlen(path);
    vint_t px = {pv, pv, true, true};

    bson_reinit(st->key_pattern);
    BSON_APPEND_INT32(st->key_pattern, "$_path", 1);
    BSON_APPEND_INT32(st->key_pattern, path, desc ? -1 : 1);
    st->multikey = true;
    /* Explain's multiKeyPaths for the expanded pattern: each field as a whole ("$_path", "a.b"). */
    uint32_t all = mf_path_mk_all(path);
    st->mk_paths[0] = 1;
    st->mk_paths[1] = all ^ (all >> 1); /* the last component's bit */
    if (exists) {
        wild_exists_intervals(path, st);
        return st;
    }
    BSON_APPEND_ARRAY_BEGIN(st->bounds, "$_path", &arr);
    fmt_interval(&arr, 0, &px, false);
    bson_append_array_end(st->bounds, &arr);
    BSON_APPEND_ARRAY_BEGIN(st->bounds, path, &arr);
    for (size_t j = 0; j < l->n; j++)
        fmt_interval(&arr, (int)j, &l->v[desc ? l->n - 1 - j : j], desc);
    bson_append_array_end(st->bounds, &arr);

    st->iv = mf_calloc(l->n ? l->n : 1, sizeof(*st->iv));
    mf_index_ks_init(&lo, &ix->kp);
    mf_index_ks_init(&hi, &ix->kp);
    bounds_index(&ix->kp);
    for (size_t j = 0; j < l->n; j++) {
        const vint_t *x = &l->v[j];
        /* A number's key may be a decimal's too (dec_key_ties): its end is read, the matcher decides. */
        bool lo_in = x->li || dec_key_ties(&x->lo), hi_in = x->hincl || dec_key_ties(&x->hi);
        mf_ks_reset(&lo);
        mf_ks_reset(&hi);
        if (mf_wildcard_append_path(&lo, path, &e) != 0 || mf_wildcard_append_path(&hi, path, &e) != 0 ||
            enc(&lo, desc ? &x->hi : &x->lo, desc) != 0 || enc(&hi, desc ? &x->lo : &x->hi, desc) != 0) {
            /* An unencodable bound: every key of the path (the bound a prefix of each), the FETCH decides. */
            mf_ks_reset(&lo);
            if (mf_wildcard_append_path(&lo, path, &e) != 0)
                continue;
            mf_interval_t *iv = &st->iv[st->niv++];
            iv->lo = dup_bytes(lo.data, lo.len);
            iv->lolen = lo.len;
            iv->hi = dup_bytes(lo.data, lo.len);
            iv->hilen = lo.len;
            iv->lo_incl = iv->hi_incl = true;
            continue;
        }
        mf_interval_t *iv = &st->iv[st->niv++];
        iv->lo = dup_bytes(lo.data, lo.len);
        iv->lolen = lo.len;
        iv->hi = dup_bytes(hi.data, hi.len);
        iv->hilen = hi.len;
        iv->lo_incl = desc ? hi_in : lo_in;
        iv->hi_incl = desc ? lo_in : hi_in;
    }
    bounds_index(NULL);
    mf_ks_destroy(&lo);
    mf_ks_destroy(&hi);
    qsort(st->iv, st->niv, sizeof(*st->iv), iv_cmp);
    iv_dedup(st);
    return st;
}

/*
 * The IXSCAN of the wildcard index that best bounds one of ps's predicates
 * (a point list beats a range beats $exists; the first found wins a tie),
 * or NULL. With
 * hinted (a wildcard index), only that one; otherwise not hidden, its
 * partial filter implied, allowed by an index filter. The predicate's path
 * must be covered by the index (mf_wildcard_covers: not _id, no positional
 * component) and the index's collation the query's. The caller puts the
 * whole filter in the FETCH above it.
 */
static mf_stage_t *
wildcard_stage(const mf_coll_t *c, const preds_t *ps, mf_index_t *hinted, const bool *allowed)
{
    mf_index_t *best_ix = NULL;
    int best_pred = -1, best_rank = 0;
    bool best_exists = false;
    vlist_t best_l = {0};
    strpool_t pool = {0};

    for (int i = 0; i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        if (!ix->kp.is_wildcard || ix->building || (hinted != NULL && ix != hinted) ||
            (hinted == NULL && allowed != NULL && !allowed[i]))
            continue;
        if (hinted == NULL && (mf_plan_index_hidden(ix) || (ix->partial && !partial_implied(ix, ps))))
            continue;
        if (!mf_collation_equal(ix->kp.collation, mf_collation_current()))
            continue;
        for (int j = 0; j < ps->n; j++) {
            vlist_t l;
            bool exists;
            if (!mf_wildcard_covers(&ix->kp, ps->p[j].path))
                continue;
            bounds_index(&ix->kp);
            bool ok = wild_pred_list(&ps->p[j].v, &pool, &l, &exists);
            bounds_index(NULL);
            if (!ok)
                continue;
            bool points = true;
            for (size_t k = 0; k < l.n; k++)
                points = points && is_point(&l.v[k]);
            int rank = exists ? 1 : points ? 3 : 2;
            if (rank > best_rank) {
                free(best_l.v);
                best_l = l;
                best_ix = ix;
                best_pred = j;
                best_rank = rank;
                best_exists = exists;
            } else {
                free(l.v);
            }
        }
    }
    mf_stage_t *st = best_ix != NULL ? wild_ixscan(best_ix, ps->p[best_pred].path, &best_l, best_exists) : NULL;
    free(best_l.v);
    pool_destroy(&pool);
    return st;
}

/* The first $or array of filter's top level or of a top-level $and's children (a view), for an index union. */
static bool
find_or(const bson_t *filter, bson_iter_t *orit, int depth)
{
    bson_iter_t it;
    if (filter == NULL || depth > 2 || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$or") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            *orit = it;
            return true;
        }
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t ai;
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai)) {
                bson_t sub;
                if (BSON_ITER_HOLDS_DOCUMENT(&ai) &&
                    bson_init_static(&sub, bson_iter_value(&ai)->value.v_doc.data,
                                     bson_iter_value(&ai)->value.v_doc.data_len) &&
                    find_or(&sub, orit, depth + 1))
                    return true;
            }
        }
    }
    return false;
}

/* A $or branch that is an equality / $in on path (for grouping), by position. */
typedef struct obr {
    const char *path;
    size_t idx;
} obr_t;

static int
obr_cmp(const void *a, const void *b)
{
    const obr_t *x = a, *y = b;
    int r = strcmp(x->path, y->path);
    if (r != 0)
        return r;
    return x->idx < y->idx ? -1 : (x->idx > y->idx ? 1 : 0);
}

/* Plans one $or branch (with the filter's other predicates ps) as an IXSCAN; NULL if no index bounds it. */
static mf_stage_t *
or_branch_stage(const mf_coll_t *c, const bson_t *branch, const preds_t *ps, preds_t *bp, const bool *allowed)
{
    mf_stage_t *st = NULL;
    for (int i = 0; i < bp->nowned; i++)
        bson_destroy(bp->owned[i]);
    bp->nowned = 0;
    memcpy(bp->p, ps->p, (size_t)ps->n * sizeof(ps->p[0]));
    bp->n = ps->n;
    collect_preds(branch, bp, -1, 1);
    cand_t *k = best_candidate(c, bp, NULL, NULL, allowed);
    if (k != NULL && cand_bounded(k))
        st = ixscan_stage(k, 1);
    if (k != NULL) {
        cand_destroy(k);
        free(k);
    }
    if (st == NULL)
        st = wildcard_stage(c, bp, NULL, allowed); /* the FETCH above the OR re-checks the whole filter */
    return st;
}

/*
 * An OR stage over one IXSCAN per branch of filter's $or, or NULL when some
 * branch can use no index. A branch is planned with its own predicates plus
 * the filter's other ones (ps): every document the filter matches matches
 * both, so the bounds stay loose, never tight. Branches that are equalities
 * or $in on one path are planned together as one $in (one IXSCAN with point
 * intervals, at the place of the path's first branch), as MongoDB rewrites
 * them before planning; so 1,000 equality branches over two fields are two
 * IXSCANs, not 1,000.
 */
static void text_term_scans(const mf_index_t *tix, const struct mf_text_query *q, const bson_value_t *prefix,
                            int nprefix, mf_stage_t *st, size_t extra);

/* or_stage's $text branch: the text index, its prefix values and query; used is set once a branch took them. */
typedef struct text_or_ctx {
    const mf_index_t *tix;
    const bson_value_t *prefix;
    int nprefix;
    const struct mf_text_query *q;
    bool used;
} text_or_ctx_t;

/* Whether an $or branch value is a document with $text at its top level. */
static bool
branch_has_text(const bson_value_t *bv)
{
    bson_iter_t it;
    return bv->value_type == BSON_TYPE_DOCUMENT &&
           bson_iter_init_from_data(&it, bv->value.v_doc.data, bv->value.v_doc.data_len) &&
           bson_iter_find(&it, "$text");
}

/*
 * or_stage: an OR of one index scan per branch of filter's first top-level
 * $or (grouped equalities as one $in), or NULL when a branch has none. With
 * tx, a branch holding $text is the text index's term scans instead.
 */
static mf_stage_t *
or_stage(const mf_coll_t *c, const bson_t *filter, const preds_t *ps, const bool *allowed, text_or_ctx_t *tx)
{
    bson_iter_t orit, bi;
    size_t nb = 0, ng = 0;
    if (!find_or(filter, &orit, 0) || !bson_iter_recurse(&orit, &bi))
        return NULL;
    while (bson_iter_next(&bi))
        nb++;
    if (nb == 0)
        return NULL;
    bson_value_t *bv = mf_calloc(nb, sizeof(*bv));
    obr_t *g = mf_calloc(nb, sizeof(*g));
    size_t *leader = mf_calloc(nb, sizeof(*leader)); /* the group's first branch, or the branch itself */
    bson_t **gdoc = mf_calloc(nb, sizeof(*gdoc));     /* leader's grouped {path: {$in: [...]}} */
    mf_stage_t *orst = stage_new(MF_ST_OR, NULL);
    preds_t *bp = mf_malloc(sizeof(*bp)); /* only p[0..n) and owned[0..nowned) are read */
    bp->n = bp->nowned = 0;
    size_t i = 0;

    orst->inputs = mf_calloc(nb, sizeof(*orst->inputs));
    bson_iter_recurse(&orit, &bi);
    for (i = 0; bson_iter_next(&bi); i++) {
        arrb_t scratch = {.i = 0};
        bv[i] = *bson_iter_value(&bi);
        leader[i] = i;
        bson_init(&scratch.arr);
        const char *path = or_branch_values(&bv[i], &scratch);
        bson_destroy(&scratch.arr);
        if (path != NULL) {
            g[ng].path = path;
            g[ng++].idx = i;
        }
    }
    qsort(g, ng, sizeof(*g), obr_cmp);
    for (size_t r = 0; r < ng;) {
        size_t e = r + 1;
        while (e < ng && strcmp(g[e].path, g[r].path) == 0)
            e++;
        if (e - r >= 2) {
            bson_t *doc = bson_new(), in;
            arrb_t arr = {.i = 0};
            BSON_APPEND_DOCUMENT_BEGIN(doc, g[r].path, &in);
            BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr.arr);
            for (size_t j = r; j < e; j++) {
                leader[g[j].idx] = g[r].idx;
                (void)or_branch_values(&bv[g[j].idx], &arr);
            }
            bson_append_array_end(&in, &arr.arr);
            bson_append_document_end(doc, &in);
            gdoc[g[r].idx] = doc;
        }
        r = e;
    }
    for (i = 0; i < nb; i++) {
        bson_t branch;
        mf_stage_t *st;
        if (leader[i] != i)
            continue; /* planned with its group's first branch */
        if (tx != NULL && branch_has_text(&bv[i])) {
            text_term_scans(tx->tix, tx->q, tx->prefix, tx->nprefix, orst, nb - i); /* the branches after it */
            tx->used = true;
            continue;
        }
        if (gdoc[i] != NULL) {
            st = or_branch_stage(c, gdoc[i], ps, bp, allowed);
        } else if (bv[i].value_type == BSON_TYPE_DOCUMENT &&
                   bson_init_static(&branch, bv[i].value.v_doc.data, bv[i].value.v_doc.data_len)) {
            st = or_branch_stage(c, &branch, ps, bp, allowed);
        } else {
            st = NULL;
        }
        if (st == NULL)
            break;
        orst->inputs[orst->ninputs++] = st;
    }
    if (i < nb) {
        stage_free(orst);
        orst = NULL;
    }
    for (i = 0; i < nb; i++) {
        if (gdoc[i] != NULL)
            bson_destroy(gdoc[i]);
    }
    free(gdoc);
    free(leader);
    free(g);
    free(bv);
    preds_free(bp);
    return orst;
}

/*
 * The access path of a $text query (operand tv) over c: TEXT_MATCH over
 * FETCH (the whole filter, re-checked by the matcher, where $text is true)
 * over TEXT_OR, one IXSCAN per distinct term, each bounded to the keys
 * starting with that term. Sets p->leaf, p->fetch and p->text; returns the
 * top stage, or NULL with err (27 without a text index).
 */
/*
 * The value filter compares path equal to (top level or under top-level
 * $and): what a compound text index's prefix field needs. A view into
 * filter; false when there is none (a range, $in or regex is not one).
 */
static bool
text_prefix_eq(const bson_t *filter, const char *path, bson_value_t *v, int depth)
{
    bson_iter_t it;
    if (filter == NULL || depth > 8 || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *x = bson_iter_value(&it);
        if (strcmp(k, "$and") == 0 && x->value_type == BSON_TYPE_ARRAY) {
            bson_iter_t ai;
            bson_iter_recurse(&it, &ai);
            while (bson_iter_next(&ai)) {
                bson_t sub;
                const bson_value_t *e = bson_iter_value(&ai);
                if (e->value_type == BSON_TYPE_DOCUMENT &&
                    bson_init_static(&sub, e->value.v_doc.data, e->value.v_doc.data_len) &&
                    text_prefix_eq(&sub, path, v, depth + 1))
                    return true;
            }
            continue;
        }
        if (strcmp(k, path) != 0 || x->value_type == BSON_TYPE_REGEX)
            continue;
        if (x->value_type == BSON_TYPE_DOCUMENT) {
            bson_iter_t o;
            if (bson_iter_recurse(&it, &o) && bson_iter_next(&o) && bson_iter_key(&o)[0] == '$') {
                if (strcmp(bson_iter_key(&o), "$eq") == 0 && BSON_ITER_HOLDS_REGEX(&o) == false) {
                    *v = *bson_iter_value(&o);
                    if (!bson_iter_next(&o))
                        return true;
                }
                continue;
            }
        }
        *v = *x;
        return true;
    }
    return false;
}

/* The collection's text index the planner may use, or NULL with err (27). */
static mf_index_t *
text_index(const mf_coll_t *c, mf_error_t *err)
{
    for (int i = 0; i < c->nindexes; i++)
        if (c->indexes[i]->kp.is_text && !c->indexes[i]->building && !mf_plan_index_hidden(c->indexes[i]))
            return c->indexes[i];
    mf_err_set(err, MF_E_IndexNotFound, "text index required for $text query");
    return NULL;
}

/*
 * The equalities filter gives a compound text index's prefix fields (those
 * before _fts) into prefix (views into filter); their number, or -1 with
 * err (291) when one is missing.
 */
static int
text_prefix(const mf_index_t *tix, const bson_t *filter, bson_value_t prefix[MF_KP_MAX_FIELDS], mf_error_t *err)
{
    int nprefix = 0;
    while (nprefix < tix->kp.nfields && strcmp(tix->kp.fields[nprefix], "_fts") != 0) {
        if (!text_prefix_eq(filter, tix->kp.fields[nprefix], &prefix[nprefix], 0)) {
            mf_err_set(err, MF_E_NoQueryExecutionPlans,
                       "error processing query: planner returned error :: caused by :: failed to use text index to "
                       "satisfy $text query (if text index is compound, are equality predicates given for all "
                       "prefix fields?)");
            return -1;
        }
        nprefix++;
    }
    return nprefix;
}

/*
 * Appends to st->inputs one IXSCAN of text index tix per distinct term of
 * text query q, each bounded to the keys starting with the prefix values
 * and that term. The array is made room for them and extra more inputs.
 */
static void
text_term_scans(const mf_index_t *tix, const struct mf_text_query *q, const bson_value_t *prefix, int nprefix,
                mf_stage_t *st, size_t extra)
{
    size_t nt = mf_text_query_nterms(q);
    st->inputs = mf_realloc(st->inputs, (st->ninputs + nt + extra + 1) * sizeof(*st->inputs));
    for (size_t i = 0; i < nt; i++) {
        mf_stage_t *ix = stage_new(MF_ST_IXSCAN, NULL);
        mf_keystring_t ks;
        bson_value_t term = {.value_type = BSON_TYPE_UTF8};
        mf_error_t e2; /* written only on failure: not zeroed (5 KB) */
        const char *t = mf_text_query_term(q, i);
        ix->index_name = mf_strdup(tix->name);
        ix->index_ident = mf_strdup(tix->ident);
        bson_t kpat;
        ix->key_pattern = mf_index_spec_key(tix->spec, &kpat) ? bson_copy(&kpat) : bson_new();
        ix->bounds = bson_new();
        term.value.v_utf8.str = (char *)t;
        term.value.v_utf8.len = (uint32_t)strlen(t);
        mf_index_ks_init(&ks, &tix->kp);
        int kr = 0;
        for (int f = 0; f < nprefix && kr == 0; f++)
            kr = mf_index_append_component(&ks, &prefix[f], tix->kp.desc[f], tix->kp.collation, &e2);
        if (kr == 0 && mf_ks_append_value(&ks, &term, false, &e2) == 0) {
            ix->iv = mf_calloc(1, sizeof(*ix->iv));
            ix->niv = 1;
            ix->iv[0].lo = dup_bytes(ks.data, ks.len);
            ix->iv[0].hi = dup_bytes(ks.data, ks.len);
            ix->iv[0].lolen = ix->iv[0].hilen = ks.len;
            ix->iv[0].lo_incl = ix->iv[0].hi_incl = true;
        }
        mf_ks_destroy(&ks);
        st->inputs[st->ninputs++] = ix;
    }
}

/*
 * What both $text plans start from: the text index (27 without one), the
 * equalities on a compound one's prefix fields (291 when one is missing:
 * they bound each term's scan) into prefix / *nprefix, and the parsed query
 * (p->text). Returns the index, or NULL with err.
 */
static mf_index_t *
text_setup(const mf_coll_t *c, const bson_value_t *tv, const bson_t *filter, mf_plan_t *p,
           bson_value_t prefix[MF_KP_MAX_FIELDS], int *nprefix, mf_error_t *err)
{
    mf_index_t *tix = text_index(c, err);
    if (tix == NULL || (*nprefix = text_prefix(tix, filter, prefix, err)) < 0 ||
        (p->text = mf_text_query_new(tv, tix->spec, err)) == NULL)
        return NULL;
    return tix;
}

static mf_stage_t *
text_stage(const mf_coll_t *c, const bson_value_t *tv, const bson_t *filter, mf_plan_t *p, mf_error_t *err)
{
    bson_value_t prefix[MF_KP_MAX_FIELDS];
    int nprefix = 0;
    mf_index_t *tix = text_setup(c, tv, filter, p, prefix, &nprefix, err);
    if (tix == NULL)
        return NULL;
    mf_stage_t *orst = stage_new(MF_ST_TEXT_OR, NULL);
    text_term_scans(tix, p->text, prefix, nprefix, orst, 0);
    p->leaf = orst;
    p->fetch = stage_new(MF_ST_FETCH, orst);
    p->fetch->filter = filter ? bson_copy(filter) : NULL;
    mf_stage_t *tm = stage_new(MF_ST_TEXT_MATCH, p->fetch);
    tm->index_name = mf_strdup(tix->name);
    tm->spec = bson_new(); /* explain's indexPrefix: the prefix fields' values */
    for (int f = 0; f < nprefix; f++)
        bson_append_value(tm->spec, tix->kp.fields[f], -1, &prefix[f]);
    return tm;
}

/*
 * A $text in a branch of the filter's top-level $or (mongod's TEXT under
 * OR): FETCH (the whole filter) over an OR whose inputs are the text
 * index's term scans for that branch and an index scan for every other
 * branch (each must have one: 291 otherwise, as mongod). The executor
 * matches each fetched document against the text query and then against
 * the filter with $text true or false accordingly (p->text_false). Sets
 * p->leaf, p->fetch, p->text; returns the top stage, or NULL with err.
 */
static mf_stage_t *
text_or_plan(const mf_coll_t *c, const bson_value_t *tv, const bson_t *filter, const preds_t *ps, mf_plan_t *p,
             mf_error_t *err)
{
    bson_value_t prefix[MF_KP_MAX_FIELDS];
    int nprefix = 0;
    mf_index_t *tix = text_setup(c, tv, filter, p, prefix, &nprefix, err);
    if (tix == NULL)
        return NULL;
    text_or_ctx_t tx = {tix, prefix, nprefix, p->text, false};
    mf_stage_t *orst = or_stage(c, filter, ps, NULL, &tx);
    if (orst == NULL || !tx.used) {
        if (orst != NULL)
            stage_free(orst);
        mf_err_set(err, MF_E_NoQueryExecutionPlans,
                   "error processing query: planner returned error :: caused by :: Failed to produce a solution for "
                   "TEXT under OR - other non-TEXT clauses under OR have to be indexed as well.");
        return NULL;
    }
    if ((p->text_false = mf_matcher_new_text_false(filter, err)) == NULL) {
        stage_free(orst);
        return NULL;
    }
    p->leaf = orst;
    p->fetch = stage_new(MF_ST_FETCH, orst);
    p->fetch->filter = bson_copy(filter);
    return p->fetch;
}

/* ---------- min / max ---------- */


/* ---------- distinct ---------- */

/* The position of path among ix's key pattern fields, or -1. */
static int
kp_field(const mf_index_t *ix, const char *path)
{
    for (int i = 0; i < ix->kp.nfields; i++)
        if (strcmp(ix->kp.fields[i], path) == 0)
            return i;
    return -1;
}

/*
 * Turns the IXSCAN st into the DISTINCT_SCAN of field f and puts the stages
 * above it into p: PROJECTION_COVERED (PROJECTION_DEFAULT for a dotted key)
 * showing proj over it when covered, else a FETCH, under a projection when
 * projected (the empty filter's plan, which mongod's analyzeDataAccess
 * finishes). Returns the top stage.
 */
static mf_stage_t *
distinct_stages(mf_plan_t *p, mf_stage_t *st, int f, bool covered, bool projected, const bson_t *proj)
{
    mf_stage_t *top = st;
    st->kind = MF_ST_DISTINCT_SCAN;
    st->field_no = f;
    p->leaf = st;
    p->sort_provided = true;
    bool simple = proj != NULL && mf_plan_projection_simple(proj);
    if (!covered) {
        p->fetch = stage_new(MF_ST_FETCH, st);
        top = p->fetch;
        if (!projected || proj == NULL)
            return top;
    }
    top = stage_new(covered && simple ? MF_ST_PROJECTION_COVERED
                    : simple          ? MF_ST_PROJECTION_SIMPLE
                                      : MF_ST_PROJECTION_DEFAULT,
                    top);
    top->spec = proj != NULL ? bson_copy(proj) : bson_new();
    return top;
}

/*
 * Whether predicate value v, on a field whose path held an array, is
 * answered exactly by its bounds all the same, as mongod's planner takes it
 * (one bound, no intersection: some element, or the value, meets it exactly
 * when some key does): an equality, or one $eq, $in, $gt, $gte, $lt or $lte.
 * A predicate with two bounds ({$gt: 2, $lt: 5}) is not: its elements may
 * meet each apart.
 */
static bool
distinct_mk_exact(const bson_value_t *v)
{
    static const char *const ops[] = {"$eq", "$in", "$gt", "$gte", "$lt", "$lte", NULL};
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return true;
    if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len) || !bson_iter_next(&it))
        return true; /* {} : an equality */
    const char *op = bson_iter_key(&it);
    if (op[0] != '$')
        return true; /* an embedded document's equality */
    bool known = false;
    for (int i = 0; ops[i] != NULL && !known; i++)
        known = strcmp(op, ops[i]) == 0;
    return known && !bson_iter_next(&it);
}

/*
 * group_sort_dir: the direction candidate k gives sort in, as check_sort
 * finds it, but where a field whose path held an array may sort too when its
 * bounds are [MinKey, MaxKey] (mongod's planner gives such a sort: a scan of
 * every key reaches each document first at its least element forward, at its
 * greatest backward, where an ascending / descending $sort puts it; an empty
 * array's undefined key before null, as the $sort puts []). 0: none.
 */
static int
group_sort_dir(const cand_t *k, const bson_t *sort)
{
    bson_iter_t it;
    bool foreign = !mf_collation_equal(k->ix->kp.collation, mf_collation_current());
    for (int off = 0; off <= k->nsingle; off++) {
        int dir = 0, pos = off;
        bool ok = bson_iter_init(&it, sort);
        while (ok && bson_iter_next(&it)) {
            const bson_value_t *v = bson_iter_value(&it);
            if (pos >= k->ix->kp.nfields || !mf_value_is_number(v) ||
                (field_mk(k->ix, pos) != 0 && !(pos >= k->nbounded || k->f[pos].all)) ||
                (k->ix->kp.has_hashed && pos == k->ix->kp.hashed_field) ||
                strcmp(bson_iter_key(&it), k->ix->kp.fields[pos]) != 0 ||
                (foreign && vlist_may_collate(&k->f[pos]))) {
                ok = false;
                break;
            }
            int d = (mf_value_as_double(v) < 0) == k->ix->kp.desc[pos] ? 1 : -1;
            if (dir != 0 && d != dir)
                ok = false;
            dir = d;
            pos++;
        }
        if (ok && dir != 0)
            return dir;
    }
    return 0;
}

/*
 * group_sort_candidate: among the indexes cands marks (hinted: that one),
 * the best that gives sort by group_sort_dir, or NULL; owned by the caller
 * (cand_destroy, free). The candidates best_candidate would skip are
 * skipped.
 */
static cand_t *
group_sort_candidate(const mf_coll_t *c, const preds_t *ps, const bson_t *sort, mf_index_t *hinted,
                     const bool *cands)
{
    cand_t *best = NULL, *tmp = mf_malloc(sizeof(*tmp));
    int best_score = 0;
    for (int i = 0; i < c->nindexes && i < MF_MAX_INDEXES; i++) {
        mf_index_t *ix = c->indexes[i];
        if (!cands[i] || (hinted == NULL && ix->partial && !partial_implied(ix, ps)))
            continue;
        bounds_index(&ix->kp);
        analyse(ix, ps, tmp);
        bounds_index(NULL);
        tmp->sort_dir = group_sort_dir(tmp, sort);
        int sc = tmp->sort_dir == 0 || (hinted == NULL && ix->sparse && !tmp->null_ok) ? 0 : score(tmp);
        tmp = keep_better(&best, &best_score, tmp, sc);
    }
    free(tmp);
    return best;
}

/*
 * distinct_plan: mongod 8.0's DISTINCT_SCAN for a distinct command on c
 * (get_executor.cpp tryGetExecutorDistinct, see plan.h), hinted the hinted
 * index (NULL: none). Only indexes whose entries hold type bits (keyFormat
 * 3) take part: the scan may hand out key values. Returns the plan's top
 * stage, with p's leaf, fetch and index_filter_set set, or NULL when no
 * DISTINCT_SCAN applies (p untouched but index_filter_set).
 */
static mf_stage_t *
distinct_plan(const mf_coll_t *c, const mf_plan_request_t *req, mf_index_t *hinted, mf_plan_t *p)
{
    const char *key = req->distinct_key;
    const bson_t *proj = req->shown.projection;
    bool group = req->distinct_group, flip = group && req->distinct_last;
    bool has_sort = group && req->sort != NULL && !bson_empty(req->sort);
    bool allowed[MF_MAX_INDEXES], cands[MF_MAX_INDEXES];
    bool filtered = false, any = false;
    mf_stage_t *top = NULL;
    if (hinted == NULL && mf_index_filter_allowed(c, req->filter, req->sort, req->shape_projection, allowed)) {
        filtered = true;
        p->index_filter_set = true;
    }
    for (int i = 0; i < c->nindexes && i < MF_MAX_INDEXES; i++) {
        const mf_index_t *ix = c->indexes[i];
        int f = kp_field(ix, key);
        cands[i] = !ix->building && ix->key_types && !ix->kp.is_text && !ix->kp.is_wildcard &&
                   !ix->kp.wildcard_compound && !ix->kp.has_geo && f >= 0 &&
                   (hinted != NULL ? ix == hinted : !mf_plan_index_hidden(ix) && (!filtered || allowed[i])) &&
                   !(c->clustered && ix->is_id) &&
                   /*
                    * $groupByDistinctScan (getIndexEntriesForDistinct): STRICT_DISTINCT_ONLY leaves out an
                    * index multikey on the key's path (its keys unwind arrays a $group keys whole), and a
                    * flipped scan ($last) any multikey index (a reversed scan does not reverse the order
                    * of arrays, which sort by their least / greatest element).
                    */
                   !(group && field_mk(ix, f) != 0) && !(flip && atomic_load(&ix->multikey));
        any = any || cands[i];
    }
    /* "a.0": keys hold one reading of the path (the position), distinct walks both: left to the documents. */
    if (!any || path_positional(key))
        return NULL;
    preds_t *ps = mf_malloc(sizeof(*ps));
    ps->n = ps->nowned = 0;
    collect_preds(req->filter, ps, 0, 0);
    cand_t *k = mf_malloc(sizeof(*k));
    bool have = false;
    if ((req->filter == NULL || bson_empty(req->filter)) && !has_sort) {
        /* getDistinctNodeIndex: the key leads, same collation, not partial, not hashed; fewest fields wins. */
        mf_index_t *pick = NULL;
        for (int i = 0; i < c->nindexes && i < MF_MAX_INDEXES; i++) {
            mf_index_t *ix = c->indexes[i];
            if (!cands[i] || kp_field(ix, key) != 0 || ix->partial != NULL ||
                !mf_collation_equal(ix->kp.collation, mf_collation_current()) ||
                (ix->kp.has_hashed && ix->kp.hashed_field == 0))
                continue;
            /* A $group's null group holds the documents missing the key, which a sparse index leaves out. */
            if (group && ix->sparse && hinted == NULL)
                continue;
            if (pick == NULL || ix->kp.nfields < pick->kp.nfields)
                pick = ix;
        }
        if (pick != NULL) {
            bounds_index(&pick->kp);
            analyse(pick, ps, k);
            bounds_index(NULL);
            have = true;
            /* Forward even for $last: with no filter nor sort the direction does not matter (createDistinctScanSolution). */
            mf_stage_t *st = ixscan_stage(k, 1);
            bool covered;
            if (group) {
                /* The group's dependencies from the keys alone (analyzeDataAccess), else FETCH. */
                covered = proj != NULL && projection_coverable(pick, proj, NULL, &p->cover_fields);
                p->distinct_whole = covered;
            } else {
                /* DistinctNode provides the key's field (multikey too: distinct unwinds arrays anyway). */
                covered = pick->kp.collation == NULL;
            }
            top = distinct_stages(p, st, 0, covered, true, proj);
        }
    } else {
        /* turnIxscanIntoDistinctIxscan over the plan rule 3 makes of the candidates (in the sort's order). */
        cand_t *best = best_candidate(c, ps, has_sort ? req->sort : NULL, hinted, cands);
        if (has_sort && (best == NULL || best->sort_dir == 0)) {
            /* A sort on a field whose path held an array, which no bound narrows. */
            cand_t *alt = group_sort_candidate(c, ps, req->sort, hinted, cands);
            if (alt != NULL) {
                if (best != NULL) {
                    cand_destroy(best);
                    free(best);
                }
                best = alt;
            }
        }
        if (best != NULL) {
            *k = *best;
            free(best);
            have = true;
            mf_index_t *ix = k->ix;
            int f = kp_field(ix, key);
            /* mongod's bounds on a multikey field are exact but for intersections (mayfly's never are). */
            for (int j = 0; j < ps->n; j++)
                if (k->mk_only[j] && distinct_mk_exact(&ps->p[j].v))
                    k->inexact[j] = false;
            bson_t *residual = residual_filter(req->filter, ps, k);
            bool ok = residual == NULL && (hinted != NULL || cand_bounded(k) || (has_sort && k->sort_dir != 0)) &&
                      !k->empty && field_mk(ix, f) == 0 && (!has_sort || k->sort_dir != 0) &&
                      mf_collation_equal(ix->kp.collation, mf_collation_current());
            /*
             * STRICT_DISTINCT_ONLY: one point on each field before the key, or a value of the key
             * would come once per value of those fields.
             */
            for (int i = 0; ok && group && i < f; i++)
                ok = i < k->nbounded && !k->f[i].all && k->f[i].n == 1 && is_point(&k->f[i].v[0]);
            if (residual != NULL)
                bson_destroy(residual);
            int dir = has_sort && k->sort_dir < 0 ? -1 : 1;
            mf_stage_t *st = ok ? ixscan_stage(k, flip ? -dir : dir) : NULL;
            if (st != NULL && st->loose) {
                stage_free(st);
                st = NULL;
            }
            if (st != NULL) {
                uint32_t fields = 0;
                bool covered = proj != NULL && projection_coverable(ix, proj, NULL, &fields);
                if (group) {
                    p->cover_fields = fields;
                    p->distinct_whole = covered;
                }
                top = distinct_stages(p, st, f, covered, false, proj);
            }
        }
    }
    p->distinct_strict = group && top != NULL;
    if (have)
        cand_destroy(k);
    free(k);
    preds_free(ps);
    return top;
}

static bool
minmax_given(const bson_t *b)
{
    return b != NULL && !bson_empty(b);
}

int
mf_plan_minmax_check(const bson_t *min, const bson_t *max, mf_error_t *err)
{
    bson_iter_t a, b;
    if (!minmax_given(min) || !minmax_given(max) || !bson_iter_init(&a, min) || !bson_iter_init(&b, max))
        return 0;
    for (;;) {
        bool na = bson_iter_next(&a), nb = bson_iter_next(&b);
        if (!na && !nb)
            return 0;
        if (na != nb || strcmp(bson_iter_key(&a), bson_iter_key(&b)) != 0)
            return mf_err_set(err, MF_E_Location51176, "min and max must have the same field names");
    }
}

/*
 * Whether bound (non-empty) names exactly ix's key pattern fields, in
 * order, and holds no string, symbol, object or array when the query's
 * collation is not the index's: mongod's indexCompatibleMaxMin.
 */
static bool
minmax_compatible(const mf_index_t *ix, const bson_t *bound)
{
    bson_iter_t it;
    int i = 0;
    bool same_coll = mf_collation_equal(ix->kp.collation, mf_collation_current());
    if (ix->kp.is_wildcard || ix->kp.wildcard_compound || !bson_iter_init(&it, bound))
        return false; /* mongod bans wildcard indexes for min / max */
    while (bson_iter_next(&it)) {
        bson_type_t t = bson_iter_type(&it);
        if (i >= ix->kp.nfields || strcmp(bson_iter_key(&it), ix->kp.fields[i]) != 0)
            return false;
        if (!same_coll && (t == BSON_TYPE_UTF8 || t == BSON_TYPE_SYMBOL || t == BSON_TYPE_DOCUMENT ||
                           t == BSON_TYPE_ARRAY))
            return false;
        i++;
    }
    return i == ix->kp.nfields;
}

/*
 * The value of field i of a finished bound (mongod's finishMinObj /
 * finishMaxObj): bound's i-th value, or for an absent bound the end of the
 * field's order where the scan starts (lo) or stops: MinKey ascending,
 * MaxKey descending for lo, the reverse for hi. *it walks bound.
 */
static bson_value_t
minmax_value(const mf_index_t *ix, int i, bool given, bson_iter_t *it, bool lo)
{
    if (given && bson_iter_next(it))
        return *bson_iter_value(it);
    return lo != ix->kp.desc[i] ? v_minkey() : v_maxkey();
}

/* Encodes the finished bound (NULL or empty: absent) as ix's keys are encoded, into ks. */
static int
minmax_encode(const mf_index_t *ix, const bson_t *bound, bool lo, mf_keystring_t *ks)
{
    bson_iter_t it;
    bool given = minmax_given(bound) && bson_iter_init(&it, bound);
    for (int i = 0; i < ix->kp.nfields; i++) {
        bson_value_t v = minmax_value(ix, i, given, &it, lo);
        mf_error_t e;
        if (mf_index_append_component(ks, &v, ix->kp.desc[i], ix->kp.collation, &e) != 0)
            return -1;
    }
    return 0;
}

/*
 * explain's indexBounds of a [min, max) scan in direction dir: one field's
 * interval exactly ("[2, 3)"); for a compound index the leading field's
 * values between the two bounds, both ends included, and the other fields
 * unbounded, which every key of the range satisfies.
 */
static void
minmax_render(const mf_index_t *ix, const bson_t *min, const bson_t *max, int dir, bson_t *out)
{
    bson_iter_t li, hi;
    bool lg = minmax_given(min) && bson_iter_init(&li, min), hg = minmax_given(max) && bson_iter_init(&hi, max);
    bool one = ix->kp.nfields == 1;
    for (int i = 0; i < ix->kp.nfields; i++) {
        bson_value_t lo = minmax_value(ix, i, lg, &li, true), up = minmax_value(ix, i, hg, &hi, false);
        bson_string_t *s = bson_string_new(NULL);
        bson_t arr;
        if (i > 0) {
            lo = ix->kp.desc[i] ? v_maxkey() : v_minkey();
            up = ix->kp.desc[i] ? v_minkey() : v_maxkey();
        }
        bson_string_append(s, dir > 0 ? "[" : (one ? "(" : "["));
        fmt_value(s, dir > 0 ? &lo : &up);
        bson_string_append(s, ", ");
        fmt_value(s, dir > 0 ? &up : &lo);
        bson_string_append(s, dir > 0 && one ? ")" : "]");
        BSON_APPEND_ARRAY_BEGIN(out, ix->kp.fields[i], &arr);
        BSON_APPEND_UTF8(&arr, "0", s->str);
        bson_append_array_end(out, &arr);
        bson_string_free(s, true);
    }
}

/*
 * The IXSCAN + FETCH of a request with min / max (see plan.h), in p (leaf,
 * fetch, sort_provided); *top is its top stage. hinted is the hinted index
 * (NULL: none), natural whether a $natural hint or sort was given. Returns
 * 0, or -1 with err.
 */
static int
minmax_plan(const mf_coll_t *c, const mf_plan_request_t *req, mf_index_t *hinted, bool natural, mf_plan_t *p,
            mf_stage_t **top, mf_error_t *err)
{
    bool has_min = minmax_given(req->min), has_max = minmax_given(req->max);
    mf_keystring_t lo, hi;
    cand_t k;
    int rc = -1;

    if (natural)
        return mf_plan_error(err, MF_E_NoQueryExecutionPlans, c->ns, req, "min and max are incompatible with $natural");
    if (hinted == NULL)
        return mf_plan_error(err, MF_E_Location51173, c->ns, req,
                          "When using min()/max() a hint of which index to use must be provided");
    bool compatible = (!has_min || minmax_compatible(hinted, req->min)) &&
                      (!has_max || minmax_compatible(hinted, req->max));
    bool clustered = c->clustered && hinted->is_id;
    if (!compatible && clustered)
        return mf_plan_error(err, MF_E_Location6137400, c->ns, req,
                          "The clustered index is not compatible with the values provided for min/max due "
                                      "to the query collation");
    if (!compatible)
        return mf_plan_error(err, MF_E_Location51174, c->ns, req, "The index chosen is not compatible with min/max");
    mf_index_ks_init(&lo, &hinted->kp);
    mf_index_ks_init(&hi, &hinted->kp);
    if (minmax_encode(hinted, req->min, true, &lo) != 0 || minmax_encode(hinted, req->max, false, &hi) != 0) {
        mf_plan_error(err, MF_E_BadValue, c->ns, req, "min/max values cannot be encoded as index keys");
        goto out_free_keys;
    }
    size_t n = lo.len < hi.len ? lo.len : hi.len;
    int cmp = n ? memcmp(lo.data, hi.data, n) : 0;
    if (cmp == 0)
        cmp = lo.len < hi.len ? -1 : (lo.len > hi.len ? 1 : 0);
    if (cmp >= 0 && clustered && has_min && has_max) {
        mf_plan_error(err, MF_E_Location6137401, c->ns, req, "max() must be greater than min()");
        goto out_free_keys;
    }
    if (cmp >= 0 && !clustered) {
        mf_plan_error(err, MF_E_Location51175, c->ns, req,
                   "The value provided for min() does not come before the value provided for max() in "
                               "the hinted index");
        goto out_free_keys;
    }
    /* A sort the index gives forward or backward is provided by the scan (mongod reverses a simple range). */
    memset(&k, 0, sizeof(k));
    k.ix = hinted;
    for (int f = 0; f < MF_KP_MAX_FIELDS; f++)
        k.f[f].all = true; /* min / max bound the key, not a field's values: no field is known string-free */
    check_sort(&k, req->sort);
    mf_stage_t *ix = ixscan_new(hinted, k.sort_dir < 0 ? -1 : 1);
    minmax_render(hinted, req->min, req->max, ix->direction, ix->bounds);
    ix->iv = mf_calloc(1, sizeof(*ix->iv));
    ix->niv = 1;
    ix->iv[0].lo = dup_bytes(lo.data, lo.len);
    ix->iv[0].lolen = lo.len;
    ix->iv[0].hi = dup_bytes(hi.data, hi.len);
    ix->iv[0].hilen = hi.len;
    ix->iv[0].lo_incl = true;
    ix->iv[0].hi_incl = false;
    p->leaf = ix;
    p->fetch = stage_new(MF_ST_FETCH, ix);
    p->fetch->filter = req->filter != NULL && !bson_empty(req->filter) ? bson_copy(req->filter) : NULL;
    p->sort_provided = req->sort == NULL || bson_empty(req->sort) || k.sort_dir != 0;
    *top = p->fetch;
    rc = 0;
out_free_keys:
    mf_ks_destroy(&lo);
    mf_ks_destroy(&hi);
    return rc;
}

/*
 * mongod's NO_TABLE_SCAN: with the notablescan parameter on when a client's
 * command began (mf_curop_no_table_scan), a query with a non-empty filter
 * on a collection outside admin, local and config, not system.*, may not
 * scan the whole collection (get_executor.cpp: "There are certain cases
 * where we ignore this restriction"). The server's own scans never ask.
 */
static bool
no_table_scan(const mf_coll_t *c, const mf_plan_request_t *req)
{
    if (!mf_curop_no_table_scan(mf_curop_current()) || (req->force_collscan && !req->tailable) ||
        req->filter == NULL || bson_empty(req->filter))
        return false;
    return !mf_catalog_db_is_internal(c->db) && strncmp(c->name, "system.", 7) != 0;
}

/*
 * Whether filter can match nothing by its shape: a field's $in of no
 * values, at the top or in a $and's clause, or a $or all of whose clauses
 * cannot match, which mongod's optimizer makes AlwaysFalse and plans as EOF
 * (so notablescan does not refuse it). depth bounds the nesting looked at.
 */
static bool
filter_always_false_at(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it, op;
    if (depth > 8 || !bson_iter_init_from_data(&it, data, len))
        return false;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if ((strcmp(key, "$and") == 0 || strcmp(key, "$or") == 0) && BSON_ITER_HOLDS_ARRAY(&it) &&
            bson_iter_recurse(&it, &op)) {
            bool is_and = key[1] == 'a', all = true, any = false, none = true;
            while (bson_iter_next(&op)) {
                uint32_t l;
                const uint8_t *d;
                bool f = false;
                if (BSON_ITER_HOLDS_DOCUMENT(&op)) {
                    bson_iter_document(&op, &l, &d);
                    f = filter_always_false_at(d, l, depth + 1);
                }
                all = all && f;
                any = any || f;
                none = false;
            }
            if (is_and ? any : all && !none)
                return true;
            continue;
        }
        if (key[0] == '$' || !BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &op))
            continue;
        bson_iter_t first = op;
        if (!bson_iter_next(&first) || bson_iter_key(&first)[0] != '$')
            continue; /* an embedded document's equality, not operators */
        while (bson_iter_next(&op)) {
            uint32_t l;
            const uint8_t *d;
            if (strcmp(bson_iter_key(&op), "$in") != 0 || !BSON_ITER_HOLDS_ARRAY(&op))
                continue;
            bson_iter_array(&op, &l, &d);
            if (l <= 5)
                return true;
        }
    }
    return false;
}

static bool
filter_always_false(const bson_t *filter)
{
    return filter != NULL && filter_always_false_at(bson_get_data(filter), filter->len, 0);
}

/*
 * Whether a find over best's scan ix, with FETCH filter residual (may be
 * NULL), is covered (mf_plan_t.covered): the residual is left to the keys
 * (key_filter_ok), the bounds are not loose, no $text, the sort is the
 * index's or sorts by key fields (sort_coverable, also req's cover_sort),
 * and the projection reads key fields only (projection_coverable). *fields
 * gets the key fields read (cover_fields).
 */
static bool
find_covered(const mf_coll_t *c, const mf_plan_request_t *req, const mf_plan_t *p, const cand_t *best,
             const mf_stage_t *ix, const bson_t *residual, bool has_sort, uint32_t *fields)
{
    uint32_t sort_fields = 0, cover_sort_fields = 0;
    *fields = 0;
    if (req->cover_projection == NULL || req->root != MF_PLAN_ROOT_NONE ||
        (residual != NULL && !key_filter_ok(best->ix, residual)) || ix->loose || p->text != NULL ||
        p->text_false != NULL || (c->clustered && best->ix->is_id))
        return false;
    /* A sort the index does not give is run over the decoded keys when it sorts by key fields only. */
    if (has_sort && best->sort_dir == 0 && !sort_coverable(best->ix, req->sort, &sort_fields))
        return false;
    if (!sort_coverable(best->ix, req->cover_sort, &cover_sort_fields) ||
        !projection_coverable(best->ix, req->cover_projection, req->cover_parsed, fields))
        return false;
    *fields |= sort_fields | cover_sort_fields;
    return true;
}

/*
 * Marks (take) or unmarks as exact the predicates of best that are inexact
 * only because their field's path held an array and that one bound answers
 * all the same (mk_only, distinct_mk_exact). Returns whether there was any.
 */
static bool
mk_exact_take(cand_t *best, const preds_t *ps, bool take)
{
    bool any = false;
    for (int j = 0; j < ps->n; j++) {
        if (best->mk_only[j] && distinct_mk_exact(&ps->p[j].v)) {
            best->inexact[j] = !take;
            any = true;
        }
    }
    return any;
}

/*
 * The projection stage of proj over child: PROJECTION_COVERED for a simple
 * projection of a covered plan, PROJECTION_SIMPLE for another simple one,
 * else PROJECTION_DEFAULT (mongod's analyzeProjection). Owned by the tree.
 */
static mf_stage_t *
projection_stage(const bson_t *proj, bool covered, mf_stage_t *child)
{
    bool simple = mf_plan_projection_simple(proj);
    mf_stage_t *s = stage_new(simple && covered ? MF_ST_PROJECTION_COVERED
                              : simple          ? MF_ST_PROJECTION_SIMPLE
                                                : MF_ST_PROJECTION_DEFAULT,
                              child);
    s->spec = bson_copy(proj);
    return s;
}

int
mf_plan_build(const mf_coll_t *c, const mf_plan_request_t *req, mf_plan_t **out, mf_error_t *err)
{
    mf_plan_t *p = mf_calloc(1, sizeof(*p));
    /* Only index selection reads the predicates: an IDHACK, a text or an EOF plan never allocates them. */
    preds_t *ps = NULL;
    cand_t *best = NULL;
    mf_stage_t *top = NULL;
    int natural_dir = 1;
    bool natural = hint_natural(req->hint, &natural_dir);
    bool has_sort = req->sort != NULL && !bson_empty(req->sort);
    mf_index_t *hinted = NULL;
    bson_iter_t si;
    /* sort {$natural: d} alone is a collection scan in that direction (tools tailing local.oplog.rs use -1). */
    if (has_sort && bson_iter_init(&si, req->sort) && bson_iter_next(&si) &&
        strcmp(bson_iter_key(&si), "$natural") == 0 && BSON_ITER_HOLDS_NUMBER(&si)) {
        int d = bson_iter_as_int64(&si) < 0 ? -1 : 1;
        if (!bson_iter_next(&si) && (!natural || d == natural_dir)) {
            natural = true;
            natural_dir = d;
            has_sort = false;
        }
    }

    *out = NULL;
    if (c != NULL && req->tailable && no_table_scan(c, req)) {
        free(p);
        return mf_plan_error(err, MF_E_NoQueryExecutionPlans, c->ns, req,
                          "Running with 'notablescan', so tailable cursors (which always do a table "
                          "scan) are not allowed");
    }
    if (c != NULL && natural && no_table_scan(c, req)) {
        free(p);
        return mf_plan_error(err, MF_E_NoQueryExecutionPlans, c->ns, req,
                          "hint $natural is not allowed, because 'notablescan' is enabled");
    }
    if (c != NULL && !natural && !hint_empty(req->hint) && hint_ambiguous(c, req, req->hint, err)) {
        preds_free(ps);
        free(p);
        return -1;
    }
    if (c != NULL && !natural && !hint_empty(req->hint)) {
        hinted = mf_plan_hint_index(c, req->hint);
        if (hinted == NULL || mf_plan_index_hidden(hinted)) {
            preds_free(ps);
            free(p);
            return mf_plan_error(err, MF_E_BadValue, c->ns, req, "hint provided does not correspond to an existing index");
        }
    }
    bson_value_t idv, tv;
    int has_text = mf_text_find(req->filter, &tv, err);
    if (has_text < 0) {
        preds_free(ps);
        free(p);
        return -1;
    }
    if (c != NULL && req->distinct_key != NULL && !natural && !req->force_collscan && !has_text &&
        !minmax_given(req->min) && !minmax_given(req->max) &&
        (top = distinct_plan(c, req, hinted, p)) != NULL) {
        /* A distinct's DISTINCT_SCAN (distinct_plan). */
    } else if (c == NULL) {
        p->leaf = stage_new(MF_ST_EOF, NULL);
        top = p->leaf;
    } else if (!req->force_collscan && (minmax_given(req->min) || minmax_given(req->max))) {
        if (minmax_plan(c, req, hinted, natural, p, &top, err) != 0) {
            mf_plan_free(p);
            return -1;
        }
    } else if (has_text == 2) {
        /* $text in a branch of a $or: an index union with the text index's scans (text_or_plan). */
        ps = mf_malloc(sizeof(*ps));
        ps->n = ps->nowned = 0;
        collect_preds(req->filter, ps, 0, 0);
        if ((top = text_or_plan(c, &tv, req->filter, ps, p, err)) == NULL) {
            preds_free(ps);
            mf_plan_free(p);
            return -1;
        }
        p->sort_provided = !has_sort;
    } else if (has_text) {
        if ((top = text_stage(c, &tv, req->filter, p, err)) == NULL) {
            preds_free(ps);
            mf_plan_free(p);
            return -1;
        }
        p->sort_provided = !has_sort;
    } else if (!natural && hinted == NULL && !req->force_collscan && mf_plan_id_equality(req->filter, &idv) &&
               id_lookup_exact(c, &idv)) {
        p->leaf = stage_new(MF_ST_IDHACK, NULL);
        p->id_is_eq = true;
        bson_value_copy(&idv, &p->idv);
        top = p->leaf;
        p->sort_provided = true;
    } else {
        /* Not zeroed (about 37 KB): only p[0..n) and owned[0..nowned) are ever read. */
        ps = mf_malloc(sizeof(*ps));
        ps->n = ps->nowned = 0;
        collect_preds(req->filter, ps, 0, 0);
        if (hinted != NULL && hinted->partial != NULL && !partial_implied(hinted, ps)) {
            /*
             * A partial index holds only the documents its filter matches; a
             * query that does not imply that filter would lose the rest (a
             * hinted deleteMany deleted only those). mongod refuses such a
             * hint; partial_implied is stricter than mongod's implication
             * test, so rather than refuse a query mongod runs, scan the
             * collection: the results are complete either way.
             */
            hinted = NULL;
            natural = true;
            natural_dir = 1;
        }
        mf_stage_t *orst = NULL;
        bool allowed[MF_MAX_INDEXES];
        const bool *filter_allowed = NULL;
        if (!natural && !req->force_collscan && hinted == NULL &&
            mf_index_filter_allowed(c, req->filter, req->sort,
                                    req->projection != NULL ? req->projection : req->shape_projection, allowed)) {
            filter_allowed = allowed;
            p->index_filter_set = true;
        }
        if (!natural && !req->force_collscan)
            best = best_candidate(c, ps, req->sort, hinted, filter_allowed);
        /* A wildcard index, when no regular index bounds the filter (or it is the one hinted). */
        mf_stage_t *wst = NULL;
        if (!natural && !req->force_collscan &&
            (hinted != NULL ? hinted->kp.is_wildcard : (best == NULL || !cand_bounded(best)))) {
            wst = wildcard_stage(c, ps, hinted, filter_allowed);
            if (wst == NULL && hinted != NULL) {
                /* mongod's QueryPlanner::plan: never a whole-index scan of a wildcard index (it lacks documents). */
                preds_free(ps);
                mf_plan_free(p);
                return mf_plan_error(err, MF_E_NoQueryExecutionPlans, c->ns, req,
                                  "$hint: refusing to build whole-index solution, because it's a wildcard index");
            }
        }
        if (!natural && !req->force_collscan && hinted == NULL && wst == NULL && (best == NULL || !cand_bounded(best)))
            orst = or_stage(c, req->filter, ps, filter_allowed, NULL);
        if (wst != NULL) {
            if (best) {
                cand_destroy(best);
                free(best);
            }
            p->leaf = wst;
            p->fetch = stage_new(MF_ST_FETCH, wst);
            p->fetch->filter = req->filter != NULL && !bson_empty(req->filter) ? bson_copy(req->filter) : NULL;
            top = p->fetch;
            p->sort_provided = !has_sort;
        } else if (orst != NULL) {
            if (best) {
                cand_destroy(best);
                free(best);
            }
            p->leaf = orst;
            p->fetch = stage_new(MF_ST_FETCH, orst);
            p->fetch->filter = residual_filter(req->filter, ps, NULL);
            top = p->fetch;
            p->sort_provided = !has_sort;
        } else if (best == NULL && no_table_scan(c, req) && filter_always_false(req->filter)) {
            p->leaf = stage_new(MF_ST_EOF, NULL);
            top = p->leaf;
            p->sort_provided = true;
        } else if (best == NULL && no_table_scan(c, req)) {
            preds_free(ps);
            mf_plan_free(p);
            return mf_plan_error(err, MF_E_NoQueryExecutionPlans, c->ns, req,
                              "No indexed plans available, and running with 'notablescan'");
        } else if (best == NULL) {
            p->leaf = stage_new(MF_ST_COLLSCAN, NULL);
            p->leaf->direction = natural_dir;
            p->leaf->filter = residual_filter(req->filter, ps, NULL);
            top = p->leaf;
            p->sort_provided = !has_sort;
        } else {
            mf_stage_t *ix = ixscan_stage(best, best->sort_dir < 0 ? -1 : 1);
            p->leaf = ix;
            p->fetch = stage_new(MF_ST_FETCH, ix);
            p->fetch->filter = residual_filter(req->filter, ps, best);
            /* A count the bounds answer exactly reads keys only (mf_plan_t.keys_only). */
            p->keys_only = (req->root == MF_PLAN_ROOT_COUNT || req->count_only) && p->fetch->filter == NULL &&
                           p->text == NULL && p->text_false == NULL && !has_sort && req->projection == NULL;
            /* A find the bounds answer exactly, sorted by key fields, projecting what key fields give (mf_plan_t.covered). */
            p->covered = !p->keys_only && find_covered(c, req, p, best, ix, p->fetch->filter, has_sort, &p->cover_fields);
            if (!p->covered && !p->keys_only && req->cover_projection != NULL && p->fetch->filter != NULL &&
                mk_exact_take(best, ps, true)) {
                /*
                 * One bound on a field whose path held an array answers its
                 * predicate all the same (mongod's planner takes it as exact:
                 * some element meets it when some key does), so a scan that
                 * gives no such field may still be covered, its record ids
                 * de-duplicated; the FETCH filter is the rest. Only then: a
                 * fetching plan keeps re-checking them.
                 */
                bson_t *rest = residual_filter(req->filter, ps, best);
                if (find_covered(c, req, p, best, ix, rest, has_sort, &p->cover_fields)) {
                    if (p->fetch->filter != NULL)
                        bson_destroy(p->fetch->filter);
                    p->fetch->filter = rest;
                    p->covered = true;
                } else {
                    if (rest != NULL)
                        bson_destroy(rest);
                    mk_exact_take(best, ps, false);
                }
            }
            if (p->covered && p->fetch->filter != NULL) {
                /* Evaluated on the decoded keys (mongod's IXSCAN filter): the IXSCAN shows it. */
                ix->filter = p->fetch->filter;
                p->fetch->filter = NULL;
            }
            top = p->fetch;
            p->sort_provided = !has_sort || best->sort_dir != 0;
            cand_destroy(best);
            free(best);
        }
    }
    if (c == NULL)
        p->sort_provided = true;
    bool has_proj = req->projection != NULL && !bson_empty(req->projection);
    bool blocking = has_sort && !p->sort_provided;
    /* The projection goes below a blocking sort when it keeps what the sort reads (projection_below_sort). */
    bool proj_below = has_proj && blocking && projection_below_sort(req->projection, req->sort, req->limit);
    if (proj_below)
        top = projection_stage(req->projection, p->covered, top);
    if (blocking) {
        top = stage_new(MF_ST_SORT, top);
        top->spec = bson_copy(req->sort);
        top->amount = req->limit > 0 ? req->limit + req->skip : 0;
        /* mongod's canUseSimpleSort: fetched input, no metadata but the sort key, record ids not kept. */
        top->sort_default = p->covered || req->preserve_record_id || needs_metadata(req->sort) ||
                            needs_metadata(req->projection);
        p->sort = top;
    }
    if (req->skip > 0) {
        top = stage_new(MF_ST_SKIP, top);
        top->amount = req->skip;
    }
    if (req->limit > 0 && p->sort == NULL) {
        top = stage_new(MF_ST_LIMIT, top);
        top->amount = req->limit;
    }
    if (has_proj && !proj_below)
        top = projection_stage(req->projection, p->covered, top);
    switch (req->root) {
    case MF_PLAN_ROOT_COUNT:
        top = stage_new(MF_ST_COUNT, top);
        break;
    case MF_PLAN_ROOT_DELETE:
        top = stage_new(MF_ST_DELETE, top);
        break;
    case MF_PLAN_ROOT_BATCHED_DELETE:
        top = stage_new(MF_ST_BATCHED_DELETE, top);
        break;
    case MF_PLAN_ROOT_UPDATE:
        top = stage_new(MF_ST_UPDATE, top);
        break;
    default:
        break;
    }
    p->root = top;
    preds_free(ps);
    *out = p;
    return 0;
}

/* ---------- explain ---------- */

static void
append_number(bson_t *out, const char *key, int64_t v)
{
    if (v < (1LL << 30) && v > -(1LL << 30))
        BSON_APPEND_INT32(out, key, (int32_t)v);
    else
        BSON_APPEND_INT64(out, key, v);
}

static void
explain_stage(const mf_plan_t *p, const mf_stage_t *s, bool stats, bson_t *out)
{
    if (s->kind == MF_ST_FETCH && (p->keys_only || p->covered) && s->child != NULL) {
        /* A count over keys only, or a covered find: no FETCH runs (mf_plan_t.keys_only, covered). */
        explain_stage(p, s->child, stats, out);
        return;
    }
    BSON_APPEND_UTF8(out, "stage", mf_plan_stage_name(s->kind));
    switch (s->kind) {
    case MF_ST_COLLSCAN:
        if (s->filter)
            BSON_APPEND_DOCUMENT(out, "filter", s->filter);
        BSON_APPEND_UTF8(out, "direction", s->direction < 0 ? "backward" : "forward");
        break;
    case MF_ST_FETCH:
        if (s->filter)
            BSON_APPEND_DOCUMENT(out, "filter", s->filter);
        break;
    case MF_ST_IXSCAN:
    case MF_ST_DISTINCT_SCAN:
        if (s->filter) /* a covered scan's predicates on the keys (mf_plan_t.covered) */
            BSON_APPEND_DOCUMENT(out, "filter", s->filter);
        BSON_APPEND_DOCUMENT(out, "keyPattern", s->key_pattern);
        BSON_APPEND_UTF8(out, "indexName", s->index_name);
        BSON_APPEND_BOOL(out, "isMultiKey", s->multikey);
        {
            bson_t mkp;
            bson_iter_t it;
            BSON_APPEND_DOCUMENT_BEGIN(out, "multiKeyPaths", &mkp);
            bson_iter_init(&it, s->key_pattern);
            for (int f = 0; bson_iter_next(&it); f++) {
                bson_t a;
                const char *name = bson_iter_key(&it);
                BSON_APPEND_ARRAY_BEGIN(&mkp, name, &a);
                /* mongod's multikey paths: each prefix of the path that held an array. */
                uint32_t m = !s->multikey ? 0 : f < MF_KP_MAX_FIELDS ? s->mk_paths[f] : UINT32_MAX;
                int n = 0;
                for (int p = 0; m != 0; p++) {
                    const char *dot = strchr(name, '.');
                    for (int q = 0; dot != NULL && q < p; q++)
                        dot = strchr(dot + 1, '.');
                    if (m & (UINT32_C(1) << (p < 31 ? p : 31))) {
                        char nk[16];
                        snprintf(nk, sizeof(nk), "%d", n++);
                        bson_append_utf8(&a, nk, -1, name, dot ? (int)(dot - name) : -1);
                    }
                    if (dot == NULL || p >= 31)
                        break;
                }
                bson_append_array_end(&mkp, &a);
            }
            bson_append_document_end(out, &mkp);
        }
        BSON_APPEND_BOOL(out, "isUnique", s->unique);
        BSON_APPEND_BOOL(out, "isSparse", s->sparse);
        BSON_APPEND_BOOL(out, "isPartial", s->partial);
        BSON_APPEND_INT32(out, "indexVersion", 2);
        BSON_APPEND_UTF8(out, "direction", s->direction < 0 ? "backward" : "forward");
        BSON_APPEND_DOCUMENT(out, "indexBounds", s->bounds);
        break;
    case MF_ST_SORT:
        BSON_APPEND_DOCUMENT(out, "sortPattern", s->spec);
        /* appendNumber, as mongod's: an int below 2^30. */
        append_number(out, "memLimit", s->mem_limit > 0 ? s->mem_limit : 104857600);
        if (s->amount > 0)
            append_number(out, "limitAmount", s->amount);
        /* SortNodeSimple needs fetched documents and no metadata but the sort key (stage_t.sort_default). */
        BSON_APPEND_UTF8(out, "type", s->sort_default || p->covered ? "default" : "simple");
        break;
    case MF_ST_SKIP:
        BSON_APPEND_INT64(out, "skipAmount", s->amount);
        break;
    case MF_ST_TEXT_MATCH:
        BSON_APPEND_DOCUMENT(out, "indexPrefix", s->spec);
        BSON_APPEND_UTF8(out, "indexName", s->index_name);
        if (p->text != NULL)
            mf_text_query_explain(p->text, out);
        BSON_APPEND_INT32(out, "textIndexVersion", 3);
        break;
    case MF_ST_LIMIT:
        BSON_APPEND_INT64(out, "limitAmount", s->amount);
        break;
    case MF_ST_PROJECTION_SIMPLE:
    case MF_ST_PROJECTION_DEFAULT:
    case MF_ST_PROJECTION_COVERED:
        BSON_APPEND_DOCUMENT(out, "transformBy", s->spec);
        break;
    default:
        break;
    }
    if (stats) {
        BSON_APPEND_INT32(out, "nReturned", (int32_t)s->n_returned);
        BSON_APPEND_INT32(out, "executionTimeMillisEstimate", (int32_t)p->exec_ms);
        BSON_APPEND_INT32(out, "works", (int32_t)(s->works > s->n_returned ? s->works : s->n_returned + 1));
        BSON_APPEND_INT32(out, "advanced", (int32_t)s->n_returned);
        BSON_APPEND_INT32(out, "needTime", (int32_t)(s->works > s->n_returned ? s->works - s->n_returned : 0));
        BSON_APPEND_INT32(out, "needYield", 0);
        BSON_APPEND_INT32(out, "saveState", 0);
        BSON_APPEND_INT32(out, "restoreState", 0);
        BSON_APPEND_BOOL(out, "isEOF", true);
        if (s->kind == MF_ST_IXSCAN || s->kind == MF_ST_IDHACK || s->kind == MF_ST_DISTINCT_SCAN)
            BSON_APPEND_INT32(out, "keysExamined", (int32_t)s->keys_examined);
        if (s->kind == MF_ST_COLLSCAN || s->kind == MF_ST_FETCH || s->kind == MF_ST_IDHACK)
            BSON_APPEND_INT32(out, "docsExamined", (int32_t)s->docs_examined);
        if (s->kind == MF_ST_IXSCAN) {
            BSON_APPEND_INT32(out, "seeks", (int32_t)(s->niv > 0 ? s->niv : 1));
            BSON_APPEND_INT32(out, "dupsTested", (int32_t)(s->multikey ? s->keys_examined : 0));
        }
    }
    /* mongod's appendNumber: an int while it fits in 2^30, a long beyond. */
    if (stats && s->kind == MF_ST_UPDATE) {
        append_number(out, "nMatched", s->n_matched);
        append_number(out, "nWouldModify", s->n_would_modify);
        append_number(out, "nWouldUpsert", s->n_would_upsert);
    }
    /* plan_explainer_impl.cpp's SortStats at executionStats: only once explain ran the sort (sort_ran). */
    if (stats && s->kind == MF_ST_SORT && s->sort_ran) {
        append_number(out, "totalDataSizeSorted", s->sort_bytes);
        BSON_APPEND_BOOL(out, "usedDisk", s->sort_spills > 0);
        append_number(out, "spills", s->sort_spills);
        append_number(out, "spilledDataStorageSize", s->sort_spilled_bytes);
    }
    if (stats && (s->kind == MF_ST_DELETE || s->kind == MF_ST_BATCHED_DELETE))
        append_number(out, "nWouldDelete", s->n_matched);
    if (stats && (s->kind == MF_ST_OR || s->kind == MF_ST_TEXT_OR)) {
        BSON_APPEND_INT32(out, "dupsTested", (int32_t)s->dups_tested);
        BSON_APPEND_INT32(out, "dupsDropped", (int32_t)s->dups_dropped);
    }
    if (s->kind == MF_ST_OR || s->kind == MF_ST_TEXT_OR) {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(out, "inputStages", &arr);
        for (size_t i = 0; i < s->ninputs; i++) {
            bson_t in;
            char key[16];
            const char *k;
            size_t kl = bson_uint32_to_string((uint32_t)i, &k, key, sizeof(key));
            bson_append_document_begin(&arr, k, (int)kl, &in);
            explain_stage(p, s->inputs[i], stats, &in);
            bson_append_document_end(&arr, &in);
        }
        bson_append_array_end(out, &arr);
    }
    if (s->child) {
        bson_t in;
        BSON_APPEND_DOCUMENT_BEGIN(out, "inputStage", &in);
        explain_stage(p, s->child, stats, &in);
        bson_append_document_end(out, &in);
    }
}

void
mf_plan_explain(const mf_plan_t *p, bool with_stats, bson_t *out)
{
    explain_stage(p, p->root, with_stats, out);
}
