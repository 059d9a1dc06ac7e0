/*
 * index_spec.c: validation of createIndexes specs with MongoDB 8.0's rules
 * (index_key_validate.cpp): allowed fields (197 otherwise), key patterns,
 * names, partial filter expressions, hashed key patterns (one hashed field,
 * not unique), wildcard key patterns and wildcardProjection (mongod's
 * wildcard_validation.cpp and validateWildcardSpec: one wildcard field, not
 * sparse, unique or TTL; compound ones with their projection rules), the
 * TTL option (index_ttl.c), and the
 * default name; and the comparison of a requested spec with an existing one
 * (85 IndexOptionsConflict, 86 IndexKeySpecsConflict, or "already exists").
 * Pure functions over BSON: createIndexes (cmd/) calls them before touching
 * the catalog.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fmt.h"
#include "doc/match.h"
#include "doc/value.h"
#include "index/index.h"
#include "index/index_spec.h"
#include "doc/text.h"
#include "doc/collation.h"
#include "doc/project.h"

/* Builds the default index name: field_1_other_-1. */
static void
default_index_name(const bson_t *key, char *out, size_t cap)
{
    bson_iter_t it;
    size_t n = 0;
    out[0] = '\0';
    bson_iter_init(&it, key);
    while (bson_iter_next(&it) && n < cap) {
        char val[64];
        const bson_value_t *v = bson_iter_value(&it);
        if (v->value_type == BSON_TYPE_UTF8)
            snprintf(val, sizeof(val), "%s", v->value.v_utf8.str);
        else if (v->value_type == BSON_TYPE_DOUBLE && v->value.v_double != (double)(int64_t)v->value.v_double)
            snprintf(val, sizeof(val), "%g", v->value.v_double);
        else
            snprintf(val, sizeof(val), "%lld", (long long)mf_value_as_double(v));
        n += (size_t)snprintf(out + n, cap - n, "%s%s_%s", n ? "_" : "", bson_iter_key(&it), val);
    }
}

/* Boolean-valued options compare by truth, with absent meaning false (MongoDB's compareIndexOptions). */
static bool
is_bool_option(const char *k)
{
    return strcmp(k, "unique") == 0 || strcmp(k, "sparse") == 0 || strcmp(k, "hidden") == 0 ||
           strcmp(k, "dropDups") == 0 || strcmp(k, "prepareUnique") == 0;
}

/*
 * Options that define an index's identity for conflict checks: everything
 * but v, name, key, ns, background and storageEngine; boolean options
 * normalised to true (and left out when false), in name order so the
 * order they were given in does not matter.
 */
/* collation_is_simple: whether v is the simple collation's spec, {locale: "simple"}. */
static bool
collation_is_simple(const bson_value_t *v)
{
    bson_t c;
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_DOCUMENT || !bson_init_static(&c, v->value.v_doc.data, v->value.v_doc.data_len))
        return false;
    return bson_count_keys(&c) == 1 && bson_iter_init_find(&it, &c, "locale") && BSON_ITER_HOLDS_UTF8(&it) &&
           strcmp(bson_iter_utf8(&it, NULL), "simple") == 0;
}

void
mf_index_spec_drop_simple_collation(bson_t *spec)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, spec, "collation") || !collation_is_simple(bson_iter_value(&it)))
        return;
    bson_t copy;
    bson_init(&copy);
    bson_copy_to_excluding_noinit(spec, &copy, "collation", NULL);
    bson_reinit(spec);
    bson_concat(spec, &copy);
    bson_destroy(&copy);
}

/*
 * key_is_id_pattern: whether key is {_id: 1} or {_id: -1}, what mongod's
 * IndexDescriptor::isIdIndexPattern calls an _id index, whatever its name:
 * such an index is unique whether or not its spec says so.
 */
static bool
key_is_id_pattern(const bson_t *key)
{
    bson_iter_t it;
    if (bson_count_keys(key) != 1 || !bson_iter_init_find(&it, key, "_id") || !mf_value_is_number(bson_iter_value(&it)))
        return false;
    double v = mf_value_as_double(bson_iter_value(&it));
    if (!(v > -2 && v < 2))
        return false; /* also NaN, and values no int holds */
    return (int)v == 1 || (int)v == -1; /* numberInt(): 1.5 is 1 */
}

bool
mf_index_spec_is_id_pattern(const bson_t *spec)
{
    bson_t key;
    return mf_index_spec_key(spec, &key) && key_is_id_pattern(&key);
}

static void
identity_options(const bson_t *spec, bson_t *out)
{
    /* wildcardProjection is compared normalised (wild_proj_equal), as part of the signature. */
    static const char *skip[] = {"v", "name", "key", "ns", "background", "storageEngine", "wildcardProjection", NULL};
    const char *keys[64];
    bson_value_t vals[64]; /* copies: bson_iter_value points into the iterator, which moves on */
    int n = 0;
    bson_iter_t it;

    bson_init(out);
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it) && n < 64) {
        const char *k = bson_iter_key(&it);
        bool skipped = false;
        for (int i = 0; skip[i]; i++)
            skipped = skipped || strcmp(k, skip[i]) == 0;
        if (skipped)
            continue;
        if (is_bool_option(k) && !bson_iter_as_bool(&it))
            continue;
        if (strcmp(k, "collation") == 0 && collation_is_simple(bson_iter_value(&it)))
            continue; /* an index stored with {locale: "simple"} (before session 58) is a simple one */
        int pos = n++;
        while (pos > 0 && strcmp(keys[pos - 1], k) > 0) {
            keys[pos] = keys[pos - 1];
            vals[pos] = vals[pos - 1];
            pos--;
        }
        keys[pos] = k;
        vals[pos] = *bson_iter_value(&it);
    }
    /* An _id index is unique (IndexDescriptor::unique()), so {_id: 1} with unique: true is the _id_ index's twin. */
    bool add_unique = mf_index_spec_is_id_pattern(spec);
    for (int i = 0; i < n && add_unique; i++)
        add_unique = strcmp(keys[i], "unique") != 0;
    for (int i = 0; i <= n; i++) {
        if (add_unique && (i == n || strcmp(keys[i], "unique") > 0)) {
            BSON_APPEND_BOOL(out, "unique", true); /* in its sorted place */
            add_unique = false;
        }
        if (i == n)
            break;
        if (is_bool_option(keys[i]))
            BSON_APPEND_BOOL(out, keys[i], true);
        else
            bson_append_value(out, keys[i], -1, &vals[i]);
    }
}

/* The index spec fields MongoDB 8.0 accepts (index_key_validate.cpp); any other is 197. */
static const char *const allowed_spec_fields[] = {
    "v", "key", "name", "ns", "unique", "sparse", "partialFilterExpression", "expireAfterSeconds", "hidden",
    "archive", /* mayfly: archive-on-expire (SPEC I2) */
    "collation", "background", "storageEngine", "weights", "default_language", "language_override",
    "textIndexVersion", "2dsphereIndexVersion", "bits", "min", "max", "dropDups", "prepareUnique",
    "wildcardProjection", "coarsestIndexedLevel", "finestIndexedLevel", "clustered", "columnstoreProjection",
    "columnstoreCompressor", "originalSpec", NULL};

int
mf_index_spec_remove_unknown(const bson_t *req, bson_t *out)
{
    bson_iter_t it;
    int removed = 0;
    bson_init(out);
    if (!bson_iter_init(&it, req))
        return 0;
    while (bson_iter_next(&it)) {
        bool ok = false;
        for (int i = 0; allowed_spec_fields[i] && !ok; i++)
            ok = strcmp(allowed_spec_fields[i], bson_iter_key(&it)) == 0;
        if (ok)
            bson_append_value(out, bson_iter_key(&it), -1, bson_iter_value(&it));
        else
            removed++;
    }
    return removed;
}

/* Index plugins MongoDB knows (string key pattern values); mayfly builds 2dsphere, 2d, text and hashed. */
static const char *const known_plugins[] = {"2d", "2dsphere", "2dsphere_bucket", "text", "hashed", "wildcard",
                                            "columnstore", NULL};

#define SPEC_ERR(err, code, shown, ...) spec_err(err, code, shown, __VA_ARGS__)

static int __attribute__((format(printf, 4, 5)))
spec_err(mf_error_t *err, int code, const char *shown, const char *fmt, ...)
{
    char why[sizeof(err->msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return mf_err_set(err, code, "Error in specification %s :: caused by :: %s", shown, why);
}

/*
 * mongod's IndexNames::findPluginName: the first string value of the key
 * pattern, or "wildcard" when a wildcard field ("$**", "a.$**") comes
 * first, or "" (a btree index).
 */
static const char *
plugin_name(const bson_t *key)
{
    bson_iter_t it;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it))
            return bson_iter_utf8(&it, NULL);
        if (mf_wildcard_field_name(bson_iter_key(&it)))
            return "wildcard";
    }
    return "";
}

/* Whether a is the path b or a prefix of it (FieldRef::isPrefixOfOrEqualTo); an empty a is neither. */
static bool
path_prefix_or_equal(const char *a, size_t alen, const char *b)
{
    size_t blen = strlen(b);
    return alen > 0 && alen <= blen && memcmp(a, b, alen) == 0 && (alen == blen || b[alen] == '.');
}

/*
 * mongod's validateWildcardIndex (wildcard_validation.cpp), run on a key
 * pattern whose plugin is wildcard: one wildcard field (7246201), and a
 * subtree wildcard ("a.$**") that does not hold a regular field (7246204).
 */
static int
wildcard_key_rules(const bson_t *key, mf_error_t *err)
{
    bson_iter_t it;
    const char *wild = NULL;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        if (!mf_wildcard_field_name(bson_iter_key(&it)))
            continue;
        if (wild != NULL)
            return mf_err_set(err, MF_E_Location7246201, "Index Key can contain only one wildcard index field");
        wild = bson_iter_key(&it);
    }
    size_t rlen = wild != NULL && strcmp(wild, "$**") != 0 ? strlen(wild) - 4 : 0;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (!mf_wildcard_field_name(f) && path_prefix_or_equal(wild, rlen, f))
            return mf_err_set(err, MF_E_Location7246204,
                              "A wildcard index field should not overlap with and index key fields if wildcard "
                              "projection is empty, however '%s' is overlapping with the wildcard index field.",
                              f);
    }
    return 0;
}

/* Checks a key pattern with MongoDB's rules (validateKeyPattern and the duplicate-field check). */
static int
check_key_pattern(const bson_t *key, const char *shown, mf_error_t *err)
{
    bson_iter_t it, jt;
    char kshown[300];

    if (key->len > 2048)
        return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Index key pattern too large.");
    if (bson_empty(key))
        return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Index keys cannot be empty.");
    const char *plugin = plugin_name(key);
    bool wildcard = strcmp(plugin, "wildcard") == 0;
    if (wildcard && wildcard_key_rules(key, err) != 0)
        return -1;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bson_iter_init(&jt, key);
        while (bson_iter_next(&jt) && bson_iter_key(&jt) != f) {
            if (strcmp(bson_iter_key(&jt), f) == 0) {
                mf_fmt_doc(key, kshown, sizeof(kshown));
                return SPEC_ERR(err, MF_E_BadValue, shown,
                                "The field '%s' appears multiple times in the index key pattern %s", f, kshown);
            }
        }
        if (v->value_type == BSON_TYPE_UTF8) {
            const char *p = v->value.v_utf8.str;
            bool known = false;
            for (int i = 0; known_plugins[i]; i++)
                known = known || strcmp(known_plugins[i], p) == 0;
            if (p[0] == '\0')
                return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Values in the index key pattern cannot be empty strings");
            if ((wildcard && strcmp(p, "wildcard") != 0) || (!wildcard && strcmp(p, plugin) != 0))
                return mf_err_set(err, MF_E_CannotCreateIndex,
                                  "Can't use more than one index plugin for a single index.");
            if (strcmp(p, "wildcard") == 0)
                return mf_err_set(err, MF_E_CannotCreateIndex, "The key pattern value for an 'wildcard' index must "
                                                               "be a non-zero number, not a string.");
            if (strcmp(p, "2dsphere") == 0 || strcmp(p, "2d") == 0)
                goto field_name; /* geo indexes (index.h, doc/geo.h): their field names are checked as a btree's */
            if (!known)
                return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Unknown index plugin '%s'", p);
            if (strcmp(p, "hashed") == 0)
                goto field_name; /* hashed_rules checks the rest of a hashed spec */
            if (strcmp(p, "text") == 0)
                continue; /* doc/text.c normalises a text spec ({_fts: "text", _ftsx: 1} included) */
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "mayfly does not support '%s' indexes", p);
        }
        if (!mf_value_is_number(v))
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown,
                            "Values in v:2 index key pattern cannot be of type %s. Only numbers > 0, numbers < 0, and strings are allowed.",
                            mf_type_name(v->value_type));
        double d = mf_value_as_double(v);
        if (d != d)
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Values in the index key pattern cannot be NaN.");
        if (d == 0.0)
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Values in the index key pattern cannot be 0.");
    field_name:
        if (f[0] == '\0')
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Index keys cannot be an empty field.");
        if (v->value_type == BSON_TYPE_UTF8 && strcmp(f, "_fts") == 0)
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Index key contains an illegal field name: '_fts'");
        if (!wildcard && plugin[0] != '\0' && v->value_type != BSON_TYPE_UTF8 && mf_wildcard_field_name(f))
            return mf_err_set(err, MF_E_CannotCreateIndex, "Can't use more than one index plugin for a single index.");
        if (strcmp(f, "$**") == 0 && wildcard)
            continue;
        const char *part = f;
        for (int i = 0;; i++) {
            const char *dot = strchr(part, '.');
            size_t plen = dot ? (size_t)(dot - part) : strlen(part);
            if (plen == 0)
                return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Index keys cannot contain an empty field.");
            /* "$**" ends a wildcard index's field ("a.b.$**"). */
            bool wild_part = wildcard && dot == NULL && plen == 3 && strncmp(part, "$**", 3) == 0;
            if (part[0] == '$' && !wild_part &&
                !(i > 0 && ((plen == 3 && (strncmp(part, "$db", 3) == 0 || strncmp(part, "$id", 3) == 0)) ||
                            (plen == 4 && strncmp(part, "$ref", 4) == 0))))
                return SPEC_ERR(err, MF_E_CannotCreateIndex, shown,
                                "Index key contains an illegal field name: field name starts with '$'.");
            if (dot == NULL)
                break;
            part = dot + 1;
        }
    }
    return 0;
}

/*
 * The rules of a key pattern with a "hashed" field, after the common ones
 * (mongod's IndexNames::findPluginName, then HashAccessMethod's constructor
 * and ExpressionParams::parseHashParams, in that order): no other plugin
 * (67), not unique (16764), one hashed field (31303). Returns 0 or -1 with
 * err.
 */
static int
hashed_rules(const bson_t *key, bool unique, mf_error_t *err)
{
    bson_iter_t it;
    int nhashed = 0;
    bool other_plugin = false;
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            continue;
        if (strcmp(bson_iter_utf8(&it, NULL), "hashed") == 0)
            nhashed++;
        else
            other_plugin = true;
    }
    if (nhashed == 0)
        return 0;
    if (other_plugin)
        return mf_err_set(err, MF_E_CannotCreateIndex, "Can't use more than one index plugin for a single index.");
    if (unique)
        return mf_err_set(err, MF_E_Location16764,
                          "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.");
    if (nhashed > 1) {
        char kshown[300];
        mf_fmt_doc(key, kshown, sizeof(kshown));
        return mf_err_set(err, MF_E_Location31303,
                          "A maximum of one index field is allowed to be hashed but found %d for 'key' %s", nhashed,
                          kshown);
    }
    return 0;
}

/* Sorts paths by strcmp (FieldRef order for the comparisons below: '.' sorts before letters and digits). */
static int
path_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Collects a projection's leaf paths (nested documents flattened) into inc / exc. */
static void
projection_paths(const bson_t *proj, const char *prefix, char ***inc, int *ninc, char ***exc, int *nexc)
{
    bson_iter_t it;
    bson_iter_init(&it, proj);
    while (bson_iter_next(&it)) {
        char path[512];
        snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", bson_iter_key(&it));
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_t sub;
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&it, &l, &d);
            if (bson_init_static(&sub, d, l))
                projection_paths(&sub, path, inc, ninc, exc, nexc);
            continue;
        }
        bool in = bson_iter_as_bool(&it);
        char ***list = in ? inc : exc;
        int *n = in ? ninc : nexc;
        *list = mf_realloc(*list, (size_t)(*n + 1) * sizeof(**list));
        (*list)[(*n)++] = mf_strdup(path);
    }
}

static void
free_paths(char **list, int n)
{
    for (int i = 0; i < n; i++)
        free(list[i]);
    free(list);
}

/*
 * mongod's validateWildcardProjection for a compound wildcard index
 * (wildcard_validation.cpp): no overlapping paths among the included or
 * the excluded ones (7246200), no regular field under an included path
 * (7246208), an exclusion that excludes every regular field
 * (7246209 / 7246210), no mix of inclusion and exclusion but for _id
 * (7246211). Returns 0 or -1 with err.
 */
static int
compound_projection_rules(const bson_t *key, const bson_t *proj, mf_error_t *err)
{
    char **inc = NULL, **exc = NULL, **fields = NULL;
    int ninc = 0, nexc = 0, nfields = 0, rc = 0;
    bson_iter_t it;

    projection_paths(proj, "", &inc, &ninc, &exc, &nexc);
    bson_iter_init(&it, key);
    while (bson_iter_next(&it)) {
        if (mf_wildcard_field_name(bson_iter_key(&it)))
            continue;
        fields = mf_realloc(fields, (size_t)(nfields + 1) * sizeof(*fields));
        fields[nfields++] = mf_strdup(bson_iter_key(&it));
    }
    if (ninc > 1) /* qsort of a NULL (empty) list is undefined */
        qsort(inc, (size_t)ninc, sizeof(*inc), path_cmp);
    if (nexc > 1)
        qsort(exc, (size_t)nexc, sizeof(*exc), path_cmp);
    if (nfields > 1)
        qsort(fields, (size_t)nfields, sizeof(*fields), path_cmp);
    for (int l = 0; l < 2 && rc == 0; l++) {
        char **list = l == 0 ? inc : exc;
        int n = l == 0 ? ninc : nexc;
        for (int i = 1; i < n && rc == 0; i++) {
            if (path_prefix_or_equal(list[i - 1], strlen(list[i - 1]), list[i]) ||
                path_prefix_or_equal(list[i], strlen(list[i]), list[i - 1]))
                rc = mf_err_set(err, MF_E_Location7246200,
                                "Fields in Wildcard Projection cannot overlap, however '%s' is overlapped with '%s",
                                list[i - 1], list[i]);
        }
    }
    for (int f = 0, p = 0; rc == 0 && f < nfields && p < ninc;) {
        if (path_prefix_or_equal(inc[p], strlen(inc[p]), fields[f])) {
            rc = mf_err_set(err, MF_E_Location7246208,
                            "Index Key and Wildcard Projection cannot contain overlapping fields, however '%s' index "
                            "field is ovverlapping with '%s' wildcardProjection path.",
                            fields[f], inc[p]);
        } else if (strcmp(inc[p], fields[f]) < 0) {
            p++;
        } else {
            f++;
        }
    }
    if (rc == 0 && nexc > 0) {
        int f = 0, p = 0;
        while (rc == 0 && f < nfields && p < nexc) {
            if (path_prefix_or_equal(exc[p], strlen(exc[p]), fields[f]))
                f++;
            else if (strcmp(exc[p], fields[f]) < 0)
                p++;
            else
                rc = mf_err_set(err, MF_E_Location7246209,
                                "wildcardProjection paths must exclude all regular index fields, however '%s'is not "
                                "excluded.",
                                fields[f]);
        }
        if (rc == 0 && f < nfields)
            rc = mf_err_set(err, MF_E_Location7246210,
                            "wildcardProjection paths must exclude all regular index fields, however '%s'is not "
                            "excluded.",
                            fields[f]);
    }
    if (rc == 0 && ninc > 0 && nexc > 0 && !((ninc == 1 && strcmp(inc[0], "_id") == 0) ||
                                             (nexc == 1 && strcmp(exc[0], "_id") == 0)))
        rc = mf_err_set(err, MF_E_Location7246211,
                        "Inclusion and exclusion statements cannot combine in the wildcardProjection with an "
                        "exception of explicitly including _id field");
    free_paths(inc, ninc);
    free_paths(exc, nexc);
    free_paths(fields, nfields);
    return rc;
}

/* Whether every leaf of a projection is a number or a bool (no computed fields or operators). */
static bool
projection_plain(const bson_t *proj)
{
    bson_iter_t it;
    bson_iter_init(&it, proj);
    while (bson_iter_next(&it)) {
        if (bson_iter_key(&it)[0] == '$')
            return false;
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_t sub;
            const uint8_t *d;
            uint32_t l;
            bson_iter_document(&it, &l, &d);
            if (!bson_init_static(&sub, d, l) || bson_empty(&sub) || !projection_plain(&sub))
                return false;
        } else if (!BSON_ITER_HOLDS_BOOL(&it) && !mf_value_is_number(bson_iter_value(&it))) {
            return false;
        }
    }
    return true;
}

/*
 * The rules of a wildcard index spec, in mongod's order: the key pattern's
 * (validateIndexSpec: a compound "$**" needs a wildcardProjection, 67),
 * the wildcardProjection option's (only with a wildcard key, 2; an object,
 * 14; only when the key has "$**", 9; not empty, 9; a compound index's
 * projection rules; a plain inclusion or exclusion projection, its parse
 * errors under "Failed to parse projection: wildcardProjection"), then
 * IndexCatalogImpl's validateWildcardSpec: not sparse, unique or TTL, v 2
 * (67). Returns 0 or -1 with err.
 */
static int
wildcard_rules(const bson_t *req, const bson_t *key, mf_error_t *err)
{
    bson_iter_t it;
    bool wildcard = strcmp(plugin_name(key), "wildcard") == 0;
    bool has_proj = bson_iter_init_find(&it, req, "wildcardProjection");
    bool all_fields = bson_has_field(key, "$**");
    int nkey = (int)bson_count_keys(key);

    if (wildcard && all_fields && nkey > 1 && !has_proj)
        return mf_err_set(err, MF_E_CannotCreateIndex,
                          "Compound wildcard indexes on all fields must also specify 'wildcardProjection' option");
    if (has_proj) {
        bson_t proj;
        const uint8_t *d;
        uint32_t l;
        if (!wildcard)
            return mf_err_set(err, MF_E_BadValue,
                              "The field 'wildcardProjection' is only allowed in 'wildcard' indexes");
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_err_set(err, MF_E_TypeMismatch,
                              "The field 'wildcardProjection' must be a non-empty object, but got %s",
                              mf_type_name(bson_iter_type(&it)));
        if (!all_fields)
            return mf_err_set(err, MF_E_FailedToParse,
                              "The field 'wildcardProjection' is only allowed when 'key' is {\"$**\": ±1} or "
                              "{\"$**\": \"columnstore\"}");
        bson_iter_document(&it, &l, &d);
        if (!bson_init_static(&proj, d, l) || bson_empty(&proj))
            return mf_err_set(err, MF_E_FailedToParse, "The 'wildcardProjection' field can't be an empty object");
        if (nkey > 1 && compound_projection_rules(key, &proj, err) != 0)
            return -1;
        mf_error_t perr = {0};
        mf_projection_t *p = mf_projection_new(&proj, &perr);
        if (p == NULL)
            return mf_err_set(err, perr.code, "Failed to parse projection: wildcardProjection :: caused by :: %s",
                              perr.msg);
        mf_projection_free(p);
        if (!projection_plain(&proj))
            return mf_err_set(err, MF_E_BadValue,
                              "Failed to parse projection: wildcardProjection :: caused by :: Bad projection "
                              "specification, cannot use computed fields when parsing a spec in "
                              "kBanComputedFields mode");
    }
    if (!wildcard)
        return 0;
    if (bson_iter_init_find(&it, req, "sparse") && bson_iter_as_bool(&it))
        return mf_err_set(err, MF_E_CannotCreateIndex, "Index type 'wildcard' does not support the 'sparse' option");
    if (bson_iter_init_find(&it, req, "unique") && bson_iter_as_bool(&it))
        return mf_err_set(err, MF_E_CannotCreateIndex, "Index type 'wildcard' does not support the 'unique' option");
    if (bson_has_field(req, "expireAfterSeconds"))
        return mf_err_set(err, MF_E_CannotCreateIndex,
                          "cannot make a TTL index :: caused by :: Index type 'wildcard' does not support the "
                          "'expireAfterSeconds' option");
    if (bson_iter_init_find(&it, req, "v") && mf_value_is_number(bson_iter_value(&it)) &&
        mf_value_as_double(bson_iter_value(&it)) < 2)
        return mf_err_set(err, MF_E_CannotCreateIndex, "Index type 'wildcard' is not allowed with index version v: 1");
    return 0;
}

/*
 * The partialFilterExpression rules of mongod 8.0's IndexCatalogImpl::_isSpecOk
 * (index_catalog_impl.cpp, _checkValidFilterExpressions), walked over the
 * filter's BSON in the shape of the MatchExpression tree mongod parses it into:
 * a document with one predicate is that predicate, with several an $and of
 * them; each operator of {x: {$gt: 1, $lt: 5}} is a predicate of its own;
 * $ne, $nin and $exists: false are $not over $eq, $in and exists; $all is an
 * $and of equalities. Allowed: $and and $or over equality, $lt, $lte, $gt,
 * $gte, $exists (true), $type, $in and the geo predicates ($geoWithin,
 * $geoIntersects), no node deeper than internalPartialFilterExpressionMaxDepth
 * (4) levels. Anything else is 67 "Expression not supported in partial index: "
 * with the node's MatchExpression::debugString (four spaces a level, a newline
 * after each node).
 */
#define PARTIAL_MAX_DEPTH 4

/* One predicate of a filter document: a top-level operator (path NULL) or a path and its operator. */
typedef struct {
    const char *path;
    const char *op;   /* "$eq" for a plain value, "$regex" for a regex value */
    bson_value_t v;   /* borrowed from the filter */
    const char *opts; /* the $options beside a $regex, or NULL */
} pitem_t;

/* A debugString under construction: appends past cap are dropped. */
typedef struct {
    char *buf;
    size_t cap, len;
} dbg_t;

static void __attribute__((format(printf, 2, 3)))
dbg_add(dbg_t *d, const char *fmt, ...)
{
    va_list ap;
    if (d->len + 1 >= d->cap)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(d->buf + d->len, d->cap - d->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        d->len = d->len + (size_t)n < d->cap ? d->len + (size_t)n : d->cap - 1;
}

static void
dbg_line_start(dbg_t *d, int indent)
{
    for (int i = 0; i < indent; i++)
        dbg_add(d, "    ");
}

/*
 * The predicates of a filter document, in order ($comment makes none).
 * Returns a malloc'd array (the caller frees it), *n its length.
 */
static pitem_t *
partial_items(const bson_t *doc, int *n)
{
    bson_iter_t it;
    int cap = 8;
    pitem_t *items = mf_malloc(sizeof(*items) * (size_t)cap);
    *n = 0;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bson_iter_t oi;
        if (strcmp(k, "$comment") == 0)
            continue;
        bool opdoc = v->value_type == BSON_TYPE_DOCUMENT && bson_iter_recurse(&it, &oi) && bson_iter_next(&oi) &&
                     bson_iter_key(&oi)[0] == '$' && k[0] != '$';
        do {
            if (*n + 1 >= cap) {
                cap *= 2;
                items = mf_realloc(items, sizeof(*items) * (size_t)cap);
            }
            pitem_t *p = &items[*n];
            p->opts = NULL;
            if (k[0] == '$') {
                p->path = NULL;
                p->op = k;
                p->v = *v;
            } else if (!opdoc) {
                p->path = k;
                p->op = v->value_type == BSON_TYPE_REGEX ? "$regex" : "$eq";
                p->v = *v;
            } else {
                const char *op = bson_iter_key(&oi);
                if (strcmp(op, "$options") == 0)
                    continue; /* read with its $regex */
                p->path = k;
                p->op = op;
                p->v = *bson_iter_value(&oi);
                if (strcmp(op, "$regex") == 0) {
                    bson_iter_t oo;
                    if (bson_iter_recurse(&it, &oo) && bson_iter_find(&oo, "$options") && BSON_ITER_HOLDS_UTF8(&oo))
                        p->opts = bson_iter_utf8(&oo, NULL);
                }
            }
            (*n)++;
        } while (opdoc && bson_iter_next(&oi));
    }
    return items;
}

static void dbg_doc(const bson_t *doc, int indent, dbg_t *d);
static void dbg_item(const pitem_t *p, int indent, dbg_t *d);

/* A document value as a bson_t (static, borrowing v's bytes); false if v is no document or array. */
static bool
value_doc(const bson_value_t *v, bson_t *out)
{
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return false;
    return bson_init_static(out, v->value.v_doc.data, v->value.v_doc.data_len);
}

/* The children of an $and / $or / $nor: each array element a document parsed on its own. */
static void
dbg_list(const bson_value_t *arr, int indent, dbg_t *d)
{
    bson_t a;
    bson_iter_t ai;
    if (!value_doc(arr, &a) || !bson_iter_init(&ai, &a))
        return;
    while (bson_iter_next(&ai)) {
        bson_t sub;
        if (value_doc(bson_iter_value(&ai), &sub))
            dbg_doc(&sub, indent, d);
    }
}

/* InMatchExpression::debugString's list: distinct equalities in BSON order, then the regexes. */
static void
dbg_in_list(const bson_value_t *arr, dbg_t *d)
{
    bson_t a;
    bson_iter_t ai;
    int n = 0;
    dbg_add(d, "[ ");
    if (value_doc(arr, &a) && bson_iter_init(&ai, &a)) {
        uint32_t cnt = bson_count_keys(&a);
        const bson_value_t **vals = mf_malloc(sizeof(*vals) * (cnt + 1));
        bson_value_t *copies = mf_malloc(sizeof(*copies) * (cnt + 1));
        while (bson_iter_next(&ai)) {
            copies[n] = *bson_iter_value(&ai);
            vals[n] = &copies[n];
            n++;
        }
        /* Insertion sort: these lists are short. */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && mf_value_cmp(vals[j - 1], vals[j]) > 0; j--) {
                const bson_value_t *t = vals[j];
                vals[j] = vals[j - 1];
                vals[j - 1] = t;
            }
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < n; i++) {
                bool rx = vals[i]->value_type == BSON_TYPE_REGEX;
                if (rx != (pass == 1) || (!rx && i > 0 && mf_value_cmp(vals[i - 1], vals[i]) == 0))
                    continue;
                if (rx) {
                    dbg_add(d, "/%s/%s ", vals[i]->value.v_regex.regex, vals[i]->value.v_regex.options);
                } else {
                    char val[200];
                    mf_fmt_value(vals[i], val, sizeof(val));
                    dbg_add(d, "%s ", val);
                }
            }
        free(vals);
        free(copies);
    }
    dbg_add(d, "]\n");
}

/* A number operand as a long long, saturating (NaN 0): no undefined conversion. */
static long long
dbg_ll(const bson_value_t *v)
{
    double d = mf_value_as_double(v);
    if (d != d)
        return 0;
    if (d >= 9223372036854775807.0)
        return LLONG_MAX;
    if (d <= -9223372036854775808.0)
        return LLONG_MIN;
    return (long long)d;
}

/* BitTestMatchExpression's positions: the set bits of a number, or the array's. */
static void
dbg_bits(const bson_value_t *v, dbg_t *d)
{
    bool first = true;
    dbg_add(d, "[");
    if (mf_value_is_number(v)) {
        uint64_t mask = (uint64_t)dbg_ll(v);
        for (int b = 0; b < 64; b++)
            if (mask & ((uint64_t)1 << b)) {
                dbg_add(d, first ? "%d" : ", %d", b);
                first = false;
            }
    } else {
        bson_t a;
        bson_iter_t ai;
        if (value_doc(v, &a) && bson_iter_init(&ai, &a))
            while (bson_iter_next(&ai)) {
                dbg_add(d, first ? "%lld" : ", %lld", dbg_ll(bson_iter_value(&ai)));
                first = false;
            }
    }
    dbg_add(d, "]\n");
}

/* An operator document under a path ({$gt: 1, $lt: 5} of a $not or $elemMatch) as its predicates. */
static void
dbg_opdoc(const char *path, const bson_value_t *v, int indent, dbg_t *d)
{
    bson_t od, wrap;
    int n;
    if (!value_doc(v, &od))
        return;
    bson_init(&wrap);
    BSON_APPEND_DOCUMENT(&wrap, path, &od);
    pitem_t *items = partial_items(&wrap, &n);
    for (int i = 0; i < n; i++)
        dbg_item(&items[i], indent, d);
    free(items);
    bson_destroy(&wrap);
}

/* MatchExpression::debugString of one predicate at an indentation level. */
static void
dbg_item(const pitem_t *p, int indent, dbg_t *d)
{
    char val[200];
    const char *op = p->op;
    dbg_line_start(d, indent);
    if (p->path == NULL) {
        if (strcmp(op, "$and") == 0 || strcmp(op, "$or") == 0 || strcmp(op, "$nor") == 0) {
            dbg_add(d, "%s\n", op);
            dbg_list(&p->v, indent + 1, d);
        } else {
            dbg_add(d, "%s\n", op);
        }
        return;
    }
    if (strcmp(op, "$eq") == 0 || strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 || strcmp(op, "$lt") == 0 ||
        strcmp(op, "$lte") == 0) {
        mf_fmt_value(&p->v, val, sizeof(val));
        dbg_add(d, "%s %s %s\n", p->path, op, val);
    } else if (strcmp(op, "$regex") == 0) {
        if (p->v.value_type == BSON_TYPE_REGEX)
            dbg_add(d, "%s regex /%s/%s\n", p->path, p->v.value.v_regex.regex,
                    p->opts ? p->opts : p->v.value.v_regex.options);
        else if (p->v.value_type == BSON_TYPE_UTF8)
            dbg_add(d, "%s regex /%s/%s\n", p->path, p->v.value.v_utf8.str, p->opts ? p->opts : "");
        else
            dbg_add(d, "%s regex\n", p->path);
    } else if (strcmp(op, "$ne") == 0) {
        mf_fmt_value(&p->v, val, sizeof(val));
        dbg_add(d, "$not\n");
        dbg_line_start(d, indent + 1);
        dbg_add(d, "%s $eq %s\n", p->path, val);
    } else if (strcmp(op, "$in") == 0 || strcmp(op, "$nin") == 0) {
        if (op[1] == 'n' && op[2] == 'i') {
            dbg_add(d, "$not\n");
            dbg_line_start(d, indent + 1);
        }
        dbg_add(d, "%s $in ", p->path);
        dbg_in_list(&p->v, d);
    } else if (strcmp(op, "$exists") == 0) {
        if (!mf_value_truthy(&p->v)) {
            dbg_add(d, "$not\n");
            dbg_line_start(d, indent + 1);
        }
        dbg_add(d, "%s exists\n", p->path);
    } else if (strcmp(op, "$not") == 0) {
        dbg_add(d, "$not\n");
        if (p->v.value_type == BSON_TYPE_REGEX) {
            pitem_t rx = {p->path, "$regex", p->v, NULL};
            dbg_item(&rx, indent + 1, d);
        } else {
            dbg_line_start(d, indent + 1);
            dbg_add(d, "$and\n");
            dbg_opdoc(p->path, &p->v, indent + 2, d);
        }
    } else if (strcmp(op, "$size") == 0) {
        dbg_add(d, "%s $size : %lld\n", p->path, dbg_ll(&p->v));
    } else if (strcmp(op, "$mod") == 0) {
        bson_t a;
        bson_iter_t ai;
        long long dv = 0, rm = 0;
        if (value_doc(&p->v, &a) && bson_iter_init(&ai, &a)) {
            if (bson_iter_next(&ai))
                dv = dbg_ll(bson_iter_value(&ai));
            if (bson_iter_next(&ai))
                rm = dbg_ll(bson_iter_value(&ai));
        }
        dbg_add(d, "%s mod %lld %% x == %lld\n", p->path, dv, rm);
    } else if (strcmp(op, "$elemMatch") == 0) {
        bson_t sub;
        bson_iter_t si;
        bool value_form = value_doc(&p->v, &sub) && bson_iter_init(&si, &sub) && bson_iter_next(&si) &&
                          bson_iter_key(&si)[0] == '$' && strcmp(bson_iter_key(&si), "$and") != 0 &&
                          strcmp(bson_iter_key(&si), "$or") != 0 && strcmp(bson_iter_key(&si), "$nor") != 0;
        if (value_form) {
            dbg_add(d, "%s $elemMatch (value)\n", p->path);
            dbg_opdoc("", &p->v, indent + 1, d);
        } else {
            dbg_add(d, "%s $elemMatch (obj)\n", p->path);
            if (value_doc(&p->v, &sub))
                dbg_doc(&sub, indent + 1, d);
        }
    } else if (strncmp(op, "$bits", 5) == 0) {
        dbg_add(d, "%s %s: ", p->path, op);
        dbg_bits(&p->v, d);
    } else if (strcmp(op, "$all") == 0) {
        bson_t a;
        if (value_doc(&p->v, &a) && bson_count_keys(&a) == 0) {
            dbg_add(d, "$alwaysFalse\n");
        } else {
            mf_fmt_value(&p->v, val, sizeof(val));
            dbg_add(d, "%s $all %s\n", p->path, val);
        }
    } else {
        mf_fmt_value(&p->v, val, sizeof(val));
        dbg_add(d, "%s %s %s\n", p->path, op, val);
    }
}

/* debugString of a parsed document: its one predicate, or an $and of them. */
static void
dbg_doc(const bson_t *doc, int indent, dbg_t *d)
{
    int n;
    pitem_t *items = partial_items(doc, &n);
    if (n == 1) {
        dbg_item(&items[0], indent, d);
    } else {
        dbg_line_start(d, indent);
        dbg_add(d, "$and\n");
        for (int i = 0; i < n; i++)
            dbg_item(&items[i], indent + 1, d);
    }
    free(items);
}

static int partial_check_doc(const bson_t *doc, int level, const char *shown, mf_error_t *err);

static int
partial_depth_err(const char *shown, mf_error_t *err)
{
    return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "partialFilterExpression depth may not exceed %d",
                    PARTIAL_MAX_DEPTH);
}

static int
partial_unsupported(const pitem_t *p, const char *shown, mf_error_t *err)
{
    char buf[600];
    dbg_t d = {buf, sizeof(buf), 0};
    buf[0] = '\0';
    dbg_item(p, 0, &d);
    return SPEC_ERR(err, MF_E_CannotCreateIndex, shown, "Expression not supported in partial index: %s", buf);
}

/* _checkValidFilterExpressions on one predicate at a level of the tree. Returns 0 or -1 with err. */
static int
partial_check_item(const pitem_t *p, int level, const char *shown, mf_error_t *err)
{
    static const char *const allowed[] = {"$eq", "$gt", "$gte", "$lt", "$lte", "$in", "$type",
                                          "$geoWithin", "$within", "$geoIntersects", NULL};
    if (level + 1 > PARTIAL_MAX_DEPTH)
        return partial_depth_err(shown, err);
    if (p->path == NULL) {
        bson_t a;
        bson_iter_t ai;
        if (strcmp(p->op, "$and") != 0 && strcmp(p->op, "$or") != 0)
            return partial_unsupported(p, shown, err);
        if (!value_doc(&p->v, &a) || !bson_iter_init(&ai, &a))
            return 0;
        while (bson_iter_next(&ai)) {
            bson_t sub;
            if (value_doc(bson_iter_value(&ai), &sub) && partial_check_doc(&sub, level + 1, shown, err) != 0)
                return -1;
        }
        return 0;
    }
    for (int i = 0; allowed[i]; i++)
        if (strcmp(p->op, allowed[i]) == 0)
            return 0;
    if (strcmp(p->op, "$exists") == 0 && mf_value_truthy(&p->v))
        return 0;
    if (strcmp(p->op, "$all") == 0) {
        /* An $and of one equality (or regex, or $elemMatch) per element; none is $alwaysFalse. */
        bson_t a;
        bson_iter_t ai;
        if (!value_doc(&p->v, &a) || bson_count_keys(&a) == 0 || !bson_iter_init(&ai, &a))
            return partial_unsupported(p, shown, err);
        while (bson_iter_next(&ai)) {
            const bson_value_t *e = bson_iter_value(&ai);
            bson_t ed;
            bson_iter_t ei;
            pitem_t child = {p->path, "$eq", *e, NULL};
            if (level + 2 > PARTIAL_MAX_DEPTH)
                return partial_depth_err(shown, err);
            if (e->value_type == BSON_TYPE_REGEX)
                child.op = "$regex";
            else if (value_doc(e, &ed) && bson_iter_init_find(&ei, &ed, "$elemMatch"))
                child.op = "$elemMatch", child.v = *bson_iter_value(&ei);
            if (strcmp(child.op, "$eq") != 0)
                return partial_unsupported(&child, shown, err);
        }
        return 0;
    }
    return partial_unsupported(p, shown, err);
}

/* _checkValidFilterExpressions on a document parsed at a level: one predicate, or an $and of them. */
static int
partial_check_doc(const bson_t *doc, int level, const char *shown, mf_error_t *err)
{
    int n, rc = 0;
    pitem_t *items = partial_items(doc, &n);
    if (n == 1) {
        rc = partial_check_item(&items[0], level, shown, err);
    } else if (level + 1 > PARTIAL_MAX_DEPTH) {
        rc = partial_depth_err(shown, err);
    } else {
        for (int i = 0; i < n && rc == 0; i++)
            rc = partial_check_item(&items[i], level + 1, shown, err);
    }
    free(items);
    return rc;
}

/*
 * BSONElement::numberInt(), as GeoHashConverter reads a 2d index's bits: a
 * double cast to int (x86's answer, INT_MIN, when out of range or NaN), a
 * long's low 32 bits, a decimal rounded half to even.
 */
static int32_t
number_int_cast(const bson_value_t *v)
{
    if (v->value_type == BSON_TYPE_INT32)
        return v->value.v_int32;
    if (v->value_type == BSON_TYPE_INT64)
        return (int32_t)(uint32_t)(uint64_t)v->value.v_int64;
    double d = mf_value_as_double(v);
    if (v->value_type == BSON_TYPE_DECIMAL128)
        d = nearbyint(d);
    return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
}

/*
 * mongod's bsonExtractIntegerField on a number: safeNumberLong() (NaN 0,
 * saturating), which must equal the value as a double.
 */
static bool
exact_int64(const bson_value_t *v, int64_t *out)
{
    if (v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64) {
        *out = v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
        return true;
    }
    double d = mf_value_as_double(v);
    *out = d != d ? 0 : d >= 9223372036854775808.0 ? INT64_MAX : d <= -9223372036854775808.0 ? INT64_MIN : (int64_t)d;
    return (double)*out == d;
}

/*
 * GeoHashConverter::createFromDoc, the hash parameters of a 2d index: bits
 * (default 26) in 1..32, then min < max (defaults -180, 180), both finite,
 * and a range wide enough for 2^32 buckets, else 72 InvalidOptions.
 */
static int
twod_hash_params_check(const bson_t *req, mf_error_t *err)
{
    bson_iter_t it;
    int32_t bits = 26;
    double min = -180.0, max = 180.0;

    if (bson_iter_init_find(&it, req, "bits"))
        bits = number_int_cast(bson_iter_value(&it));
    if (bson_iter_init_find(&it, req, "max"))
        max = mf_value_as_double(bson_iter_value(&it));
    if (bson_iter_init_find(&it, req, "min"))
        min = mf_value_as_double(bson_iter_value(&it));
    if (bits < 1 || bits > 32)
        return mf_err_set(err, MF_E_InvalidOptions,
                          "bits for hash must be > 0 and <= 32, but %d bits were specified", (int)bits);
    if (!(min < max) || isinf(min) || isinf(max))
        return mf_err_set(err, MF_E_InvalidOptions,
                          "region for hash must be valid and have positive area, but [%g, %g] was specified", min, max);
    double scaling = 4.0 * 1024 * 1024 * 1024 / (max - min);
    if (!(scaling > 0) || isinf(scaling))
        return mf_err_set(err, MF_E_InvalidOptions, "range [%g, %g] is too small.", min, max);
    return 0;
}

/* key_has_type: whether a key pattern names an index type (a string value: "2dsphere", "2d", ...). */
static bool
key_has_type(const bson_t *key, const char *type)
{
    bson_iter_t kt;
    bson_iter_init(&kt, key);
    while (bson_iter_next(&kt))
        if (BSON_ITER_HOLDS_UTF8(&kt) && strcmp(bson_iter_utf8(&kt, NULL), type) == 0)
            return true;
    return false;
}

/*
 * createIndexes' parseAndValidateIndexSpecs, after validateIndexSpec: a key
 * pattern IndexDescriptor::isIdIndexPattern calls the _id index's ({_id: n},
 * n's int value 1 or -1), under any name, must pass validateIdIndexSpec:
 * no field but v, key, name, ns, collation and _id (197; not checked for a
 * clustered spec), the key exactly {_id: 1} (2: {_id: -1} and {_id: 1.5} are
 * refused), no hidden (2); any other key pattern may not take the name
 * "_id_" (2). shown_v: the validated spec as mongod prints it. Returns 0 or
 * -1 with err.
 */
static int
id_spec_check(const bson_t *req, const bson_t *key, const char *given_name, const char *shown_v, mf_error_t *err)
{
    bson_iter_t it;
    char kshown[200];
    mf_fmt_doc(key, kshown, sizeof(kshown));
    if (!key_is_id_pattern(key)) {
        if (given_name != NULL && strcmp(given_name, "_id_") == 0)
            return mf_err_set(err, MF_E_BadValue,
                              "The index name '_id_' is reserved for the _id index, which must have key pattern "
                              "{_id: 1}, found key: %s",
                              kshown);
        return 0;
    }
    if (!bson_has_field(req, "clustered") && bson_iter_init(&it, req)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "v") && strcmp(k, "key") && strcmp(k, "name") && strcmp(k, "ns") && strcmp(k, "collation") &&
                strcmp(k, "_id"))
                return mf_err_set(err, MF_E_InvalidIndexSpecificationOption,
                                  "The field '%s' is not valid for an _id index specification. Specification: %s", k,
                                  shown_v);
        }
    }
    bson_iter_init(&it, key);
    bson_iter_next(&it);
    if (mf_value_as_double(bson_iter_value(&it)) != 1.0)
        return mf_err_set(err, MF_E_BadValue, "The field 'key' for an _id index must be {_id: 1}, but got %s", kshown);
    if (bson_has_field(req, "hidden"))
        return mf_err_set(err, MF_E_BadValue, "can't hide _id index");
    return 0;
}

/*
 * Validates one requested spec and normalises it into out (v, key, name,
 * then every other option verbatim, in the order given). A spec with
 * expireAfterSeconds goes through mf_ttl_normalise_spec, whose output is
 * what is stored. Returns 0, or -1 with err (out untouched).
 */
int
mf_index_spec_normalise(const bson_t *req, bson_t *out, mf_error_t *err)
{
    bson_t key, built;
    bson_iter_t it;
    char name[1024];
    const char *given_name = NULL;
    char shown[600];
    bool has_partial = false, sparse = false, has_ttl = false, has_archive = false, unique = false;
    /* A copy: bson_iter_value points into the iterator, which moves on (a number, so nothing to free). */
    bson_value_t version_value;
    const bson_value_t *version = NULL;

    mf_fmt_doc(req, shown, sizeof(shown));
    /*
     * The spec as validateIndexSpec returns it ("v" appended when not given): what
     * _isSpecOk's refusals (prepareSpecForCreate's "Error in specification") and
     * validateIdIndexSpec show.
     */
    char shown_v[640];
    size_t sl = strlen(shown);
    if (!bson_has_field(req, "v") && sl >= 2 && strcmp(shown + sl - 2, " }") == 0)
        snprintf(shown_v, sizeof(shown_v), "%.*s, v: 2 }", (int)(sl - 2), shown);
    else
        snprintf(shown_v, sizeof(shown_v), "%s", shown);
    bson_iter_init(&it, req);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool ok = false;
        for (int i = 0; allowed_spec_fields[i]; i++)
            ok = ok || strcmp(allowed_spec_fields[i], k) == 0;
        if (!ok)
            return SPEC_ERR(err, MF_E_InvalidIndexSpecificationOption, shown,
                            "The field '%s' is not valid for an index specification. Specification: %s", k, shown);
    }
    if (!bson_iter_init_find(&it, req, "key"))
        return SPEC_ERR(err, MF_E_FailedToParse, shown, "The 'key' field is a required property of an index specification");
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field 'key' must be an object, but got %s",
                        mf_type_name(bson_iter_type(&it)));
    mf_index_spec_key(req, &key);
    if (check_key_pattern(&key, shown, err) != 0)
        return -1;
    if (bson_iter_init_find(&it, req, "name")) {
        if (!BSON_ITER_HOLDS_UTF8(&it))
            return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field 'name' must be a string, but got %s",
                            mf_type_name(bson_iter_type(&it)));
        uint32_t name_len;
        given_name = bson_iter_utf8(&it, &name_len);
        if (strlen(given_name) != name_len)
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown_v, "index name cannot contain NUL bytes");
        if (given_name[0] == '\0')
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown_v, "index name cannot be empty");
        if (strcmp(given_name, "*") == 0)
            return mf_err_set(err, MF_E_BadValue, "The index name '*' is not valid.");
    }
    bson_iter_init(&it, req);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        char val[200];
        if (is_bool_option(k) && strcmp(k, "hidden") != 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it) && !mf_value_is_number(v)) {
                mf_fmt_value(v, val, sizeof(val));
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field '%s has value %s: %s, which is not convertible to bool",
                                k, k, val);
            }
            if (strcmp(k, "sparse") == 0)
                sparse = bson_iter_as_bool(&it);
        } else if (strcmp(k, "background") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it) && !mf_value_is_number(v)) {
                mf_fmt_value(v, val, sizeof(val));
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field 'background has value background: %s, which is not convertible to bool", val);
            }
        } else if (strcmp(k, "hidden") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field 'hidden' must be a bool, but got %s",
                                mf_type_name(v->value_type));
        } else if (strcmp(k, "archive") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field 'archive' must be a bool, but got %s",
                                mf_type_name(v->value_type));
            has_archive = true;
        } else if (strcmp(k, "partialFilterExpression") == 0 || strcmp(k, "collation") == 0 ||
                   strcmp(k, "storageEngine") == 0 || strcmp(k, "originalSpec") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field '%s' must be an object, but got %s", k,
                                mf_type_name(v->value_type));
            if (strcmp(k, "partialFilterExpression") == 0)
                has_partial = true;
            else if (strcmp(k, "collation") == 0 && v->value.v_doc.data_len <= 5)
                return SPEC_ERR(err, MF_E_BadValue, shown, "The field 'collation' cannot be an empty object.");
        } else if (strcmp(k, "v") == 0) {
            if (!mf_value_is_number(v))
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field 'v' must be a number, but got %s",
                                mf_type_name(v->value_type));
            /*
             * index_key_validate.cpp's validateIndexSpec: representAs<int>, then
             * isIndexVersionAllowedForCreation (v 1 or 2); createIndexes names the spec.
             */
            double d = mf_value_as_double(v);
            if (!(d >= -2147483648.0 && d <= 2147483647.0) || d != floor(d)) {
                char val[64];
                mf_fmt_value(v, val, sizeof(val));
                return SPEC_ERR(err, MF_E_BadValue, shown,
                                "Index version must be representable as a 32-bit integer, but got %s", val);
            }
            if (d != 1 && d != 2)
                return SPEC_ERR(err, MF_E_CannotCreateIndex, shown,
                                "Invalid index specification %s; cannot create an index with v=%d", shown, (int)d);
            version_value = *v;
            version = &version_value;
        } else if (strcmp(k, "expireAfterSeconds") == 0) {
            has_ttl = true;
        } else if (strcmp(k, "2dsphereIndexVersion") == 0 || strcmp(k, "textIndexVersion") == 0 ||
                   strcmp(k, "bits") == 0 || strcmp(k, "min") == 0 || strcmp(k, "max") == 0 ||
                   strcmp(k, "coarsestIndexedLevel") == 0 || strcmp(k, "finestIndexedLevel") == 0) {
            /* mongod's validateIndexSpec: numbers, whatever the index type (before any plugin's rules). */
            if (!mf_value_is_number(v))
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field '%s' must be a number, but got %s", k,
                                mf_type_name(v->value_type));
        } else if (strcmp(k, "default_language") == 0 || strcmp(k, "language_override") == 0) {
            if (v->value_type != BSON_TYPE_UTF8)
                return SPEC_ERR(err, MF_E_TypeMismatch, shown, "The field '%s' must be a string, but got %s", k,
                                mf_type_name(v->value_type));
        }
    }
    /* validateIndexSpec: a collation (even the simple one) needs a v2 index. */
    if (bson_has_field(req, "collation") && version != NULL && mf_value_as_double(version) < 2)
        return SPEC_ERR(err, MF_E_CannotCreateIndex, shown,
                        "Invalid index specification %s; cannot create an index with the 'collation' option and v=%d",
                        shown, (int)mf_value_as_double(version));
    if (bson_has_field(req, "weights") && strcmp(plugin_name(&key), "text") != 0)
        return SPEC_ERR(err, MF_E_CannotCreateIndex, shown,
                        "Invalid index specification %s; the field 'weights' can only be specified with text indexes",
                        shown);
    if (bson_iter_init_find(&it, req, "unique") && (BSON_ITER_HOLDS_BOOL(&it) || mf_value_is_number(bson_iter_value(&it))))
        unique = bson_iter_as_bool(&it);
    if (hashed_rules(&key, unique, err) != 0 || wildcard_rules(req, &key, err) != 0)
        return -1;
    if (has_archive && !has_ttl)
        return SPEC_ERR(err, MF_E_CannotCreateIndex, shown,
                        "The field 'archive' is only valid for a TTL index (one with 'expireAfterSeconds')");
    if (has_partial) {
        /*
         * validateIndexSpec parses the filter with kBanAllSpecialFeatures (its errors name the
         * spec as given); _isSpecOk then checks the sparse mix and the tree (its errors name the
         * validated spec, "v" appended when it was not given).
         */
        bson_t pf;
        const uint8_t *d;
        uint32_t l;
        mf_error_t perr = {0};
        bson_iter_init_find(&it, req, "partialFilterExpression");
        bson_iter_document(&it, &l, &d);
        if (!bson_init_static(&pf, d, l))
            return SPEC_ERR(err, MF_E_FailedToParse, shown, "bad partialFilterExpression");
        /*
         * kBanAllSpecialFeatures leaves out kText: a $text anywhere is expression_parser.cpp's
         * parseText refusal, 2 "$text is not allowed in this context" ("$text can only be
         * applied to the top-level document" under a field), never the 67 of the tree check.
         */
        mf_matcher_t *m = mf_matcher_new_banned(&pf, &perr);
        if (m == NULL)
            return SPEC_ERR(err, perr.code, shown, "%s", perr.msg);
        mf_matcher_free(m);
    }
    if (id_spec_check(req, &key, given_name, shown_v, err) != 0)
        return -1;
    if (has_partial) {
        bson_t pf;
        const uint8_t *d;
        uint32_t l;
        bson_iter_init_find(&it, req, "partialFilterExpression");
        bson_iter_document(&it, &l, &d);
        if (!bson_init_static(&pf, d, l))
            return SPEC_ERR(err, MF_E_FailedToParse, shown, "bad partialFilterExpression");
        if (sparse)
            return SPEC_ERR(err, MF_E_CannotCreateIndex, shown_v,
                            "cannot mix \"partialFilterExpression\" and \"sparse\" options");
        if (partial_check_doc(&pf, 0, shown_v, err) != 0)
            return -1;
    }
    if (key_is_id_pattern(&key)) {
        /* IndexCatalogImpl::_isSpecOk: an index on {_id: 1} or {_id: -1}, under any name, is an _id index. */
        if (bson_iter_init_find(&it, req, "unique") && !bson_iter_as_bool(&it))
            return mf_err_set(err, MF_E_CannotCreateIndex, "_id index cannot be non-unique");
        if (has_partial)
            return mf_err_set(err, MF_E_CannotCreateIndex, "_id index cannot be a partial index");
        if (sparse)
            return mf_err_set(err, MF_E_CannotCreateIndex, "_id index cannot be sparse");
    }
    /*
     * More than 32 key fields: Ordering::make's uassert (bson/ordering.h), met when
     * prepareSpecForCreate builds the spec's IndexDescriptor, after validateIndexSpec.
     */
    if (bson_count_keys(&key) > 32 && strcmp(plugin_name(&key), "text") != 0)
        return mf_err_set(err, MF_E_Location13103, "too many compound keys");
    if (given_name == NULL)
        default_index_name(&key, name, sizeof(name));
    bson_init(&built);
    if (version)
        bson_append_value(&built, "v", -1, version);
    else
        BSON_APPEND_INT32(&built, "v", 2);
    BSON_APPEND_DOCUMENT(&built, "key", &key);
    BSON_APPEND_UTF8(&built, "name", given_name ? given_name : name);
    bson_iter_init(&it, req);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "v") == 0 || strcmp(k, "name") == 0 || strcmp(k, "key") == 0 || strcmp(k, "ns") == 0)
            continue;
        if (strcmp(k, "collation") == 0) {
            /* Stored in full, as listIndexes shows it. */
            mf_collation_t *coll;
            bson_t cs;
            if (mf_collation_from_value(bson_iter_value(&it), &coll, err) != 0) {
                bson_destroy(&built);
                return -1;
            }
            /*
             * An explicit simple collation stays {locale: "simple"} here, so
             * that createIndexes does not give the index the collection's
             * default; it then drops it (mf_index_spec_drop_simple_collation).
             */
            bson_append_document_begin(&built, "collation", -1, &cs);
            mf_collation_append_spec(coll, &cs);
            bson_append_document_end(&built, &cs);
            mf_collation_free(coll);
            continue;
        }
        bson_append_value(&built, k, -1, bson_iter_value(&it));
    }
    if (mf_text_key_is_text(&key)) {
        bson_t fixed;
        if (bson_iter_init_find(&it, req, "collation") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_t li;
            if (!(bson_iter_recurse(&it, &li) && bson_iter_find(&li, "locale") && BSON_ITER_HOLDS_UTF8(&li) &&
                  strcmp(bson_iter_utf8(&li, NULL), "simple") == 0)) {
                char cshown[300];
                bson_t cdoc;
                const uint8_t *cd;
                uint32_t cl;
                bson_iter_document(&it, &cl, &cd);
                if (bson_init_static(&cdoc, cd, cl))
                    mf_fmt_doc(&cdoc, cshown, sizeof(cshown));
                else
                    cshown[0] = '\0';
                bson_destroy(&built);
                return mf_err_set(err, MF_E_CannotCreateIndex, "Index type 'text' does not support collation: %s", cshown);
            }
        }
        if (mf_text_spec_fix(&built, &fixed, err) != 0) {
            bson_destroy(&built);
            return -1;
        }
        bson_destroy(&built);
        bson_steal(&built, &fixed);
    }
    {
        /*
         * A 2d index (mongod's index2d::parse2dParams, run when the index is
         * built): one 2d field (16800), first (16801), then the hash
         * parameters GeoHashConverter::createFromDoc checks (72).
         */
        bson_iter_t kt;
        int pos = 0, n2d = 0, first2d = -1;
        bson_iter_init(&kt, &key);
        while (bson_iter_next(&kt)) {
            if (BSON_ITER_HOLDS_UTF8(&kt) && strcmp(bson_iter_utf8(&kt, NULL), "2d") == 0) {
                n2d++;
                if (first2d < 0)
                    first2d = pos;
            }
            pos++;
        }
        int gerr = 0;
        if (n2d > 1)
            gerr = mf_err_set(err, MF_E_Location16800, "can't have 2 geo fields");
        else if (n2d == 1 && first2d != 0)
            gerr = mf_err_set(err, MF_E_Location16801, "2d has to be first in index");
        else if (n2d == 1)
            gerr = twod_hash_params_check(req, err);
        if (gerr != 0) {
            bson_destroy(&built);
            return -1;
        }
    }
    if (bson_iter_init_find(&it, req, "2dsphereIndexVersion") && key_has_type(&key, "2dsphere")) {
        /* mongod's S2AccessMethod::fixSpec: a number, a normal one if a double, 1, 2 or 3 (67). */
        const bson_value_t *v = bson_iter_value(&it);
        char shown[128];
        const char *what = NULL;
        mf_fmt_value(v, shown, sizeof shown);
        if (!mf_value_is_number(v))
            what = "Invalid type for geo index version";
        else if (v->value_type == BSON_TYPE_DOUBLE && !isnormal(v->value.v_double))
            what = "Invalid value for geo index version";
        else if (!(mf_value_as_double(v) >= 1 && mf_value_as_double(v) < 4))
            what = "unsupported geo index version";
        if (what != NULL) {
            bson_destroy(&built);
            return mf_err_set(err, MF_E_CannotCreateIndex,
                              "%s { 2dsphereIndexVersion : 2dsphereIndexVersion: %s }, only versions: [1,2,3] are supported",
                              what, shown);
        }
    }
    if (key_has_type(&key, "2dsphere")) {
        /*
         * mongod's initialize2dsphereParams, run when the index is built: the
         * version and the S2 cell levels are read with
         * bsonExtractIntegerFieldWithDefault (an exact integer, else 2
         * BadValue), then the levels are bounded (16747, 16748, 16749). A
         * level not given defaults by version: S2's closest levels to 500 m
         * and 100 km on the Earth (14, 7) up to version 2, to 110 m and
         * 2000 km (16, 2) from version 3, which fixSpec makes the default.
         */
        static const char *const names[] = {"2dsphereIndexVersion", "finestIndexedLevel", "coarsestIndexedLevel"};
        int64_t val[3] = {3, 0, 0};
        bool given[3] = {false, false, false};
        for (int i = 0; i < 3; i++) {
            if (!bson_iter_init_find(&it, req, names[i]))
                continue;
            given[i] = true;
            if (!exact_int64(bson_iter_value(&it), &val[i])) {
                char shown[128];
                mf_fmt_value(bson_iter_value(&it), shown, sizeof shown);
                bson_destroy(&built);
                return mf_err_set(err, MF_E_BadValue,
                                  "Expected field \"%s\" to have a value exactly representable as a 64-bit integer, "
                                  "but found %s: %s",
                                  names[i], names[i], shown);
            }
        }
        int64_t finest = given[1] ? val[1] : val[0] <= 2 ? 14 : 16;
        int64_t coarsest = given[2] ? val[2] : val[0] <= 2 ? 7 : 2;
        int lerr = coarsest < 0 ? mf_err_set(err, MF_E_Location16747, "coarsestIndexedLevel must be >= 0")
                   : finest > 30 ? mf_err_set(err, MF_E_Location16748, "finestIndexedLevel must be <= 30")
                   : finest < coarsest
                       ? mf_err_set(err, MF_E_Location16749, "finestIndexedLevel must be >= coarsestIndexedLevel")
                       : 0;
        if (lerr != 0) {
            bson_destroy(&built);
            return -1;
        }
    }
    if (!bson_has_field(req, "2dsphereIndexVersion")) {
        /* A 2dsphere index is created at version 3, as listIndexes shows. */
        bson_iter_t kt;
        bool sphere = false;
        bson_iter_init(&kt, &key);
        while (bson_iter_next(&kt))
            sphere = sphere || (BSON_ITER_HOLDS_UTF8(&kt) && strcmp(bson_iter_utf8(&kt, NULL), "2dsphere") == 0);
        if (sphere)
            BSON_APPEND_INT32(&built, "2dsphereIndexVersion", 3);
    }
    if (has_ttl) {
        bson_t ttl;
        if (mf_ttl_normalise_spec(&built, req, &ttl, err) != 0) {
            bson_destroy(&built);
            return -1;
        }
        bson_destroy(&built);
        bson_steal(out, &ttl);
                return 0;
    }
    bson_steal(out, &built);
    return 0;
}

/* Drops "_id" from list when drop_id (freeing it), sorts the rest; returns the new count. */
static int
paths_normal(char **list, int n, bool drop_id)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (drop_id && strcmp(list[i], "_id") == 0)
            free(list[i]);
        else
            list[k++] = list[i];
    }
    if (k > 1)
        qsort(list, (size_t)k, sizeof(*list), path_cmp);
    return k;
}

static bool
paths_equal(char **a, int na, char **b, int nb)
{
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

/*
 * Whether two wildcardProjections select the same paths, as mongod compares
 * them normalised: nested and dotted forms alike (projection_paths), in any
 * order, and `_id: 0` the default (`_id` is left out unless included).
 */
static bool
wild_proj_equal(const bson_value_t *a, const bson_value_t *b)
{
    bson_t pa, pb;
    char **ia = NULL, **ea = NULL, **ib = NULL, **eb = NULL;
    int nia = 0, nea = 0, nib = 0, neb = 0;
    if (a->value_type != BSON_TYPE_DOCUMENT || b->value_type != BSON_TYPE_DOCUMENT ||
        !bson_init_static(&pa, a->value.v_doc.data, a->value.v_doc.data_len) ||
        !bson_init_static(&pb, b->value.v_doc.data, b->value.v_doc.data_len))
        return mf_value_cmp(a, b) == 0;
    projection_paths(&pa, "", &ia, &nia, &ea, &nea);
    projection_paths(&pb, "", &ib, &nib, &eb, &neb);
    nia = paths_normal(ia, nia, false);
    nib = paths_normal(ib, nib, false);
    nea = paths_normal(ea, nea, true);
    neb = paths_normal(eb, neb, true);
    bool eq = paths_equal(ia, nia, ib, nib) && paths_equal(ea, nea, eb, neb);
    free_paths(ia, nia);
    free_paths(ib, nib);
    free_paths(ea, nea);
    free_paths(eb, neb);
    return eq;
}

/*
 * The options that, with the key pattern, make an index's signature, as
 * mongod's IndexDescriptor::compareIndexOptions: two indexes on one key
 * pattern may coexist when any of these differ (a case-insensitive
 * collation beside the simple one, a partial index beside a full one...),
 * or their wildcardProjection, compared normalised (wild_proj_equal).
 */
static const char *const signature_fields[] = {"collation", "partialFilterExpression", "sparse", "unique", NULL};

/*
 * Compares a requested (normalised) spec with an existing one (SPEC A6), as
 * mongod's createIndexes: the same name is a no-op when everything matches,
 * 85 when only non-signature options differ, 86 otherwise; another name is
 * unrelated unless the signature matches (85 either way). Returns 0 when
 * unrelated, 1 when identical (nothing to do), or -1 with err for a conflict.
 */
int
mf_index_spec_compare(const bson_t *want, const bson_t *have, mf_error_t *err)
{
    bson_t wkey, hkey, wopts, hopts;
    bson_iter_t it;
    const char *wname = "", *hname = "";
    char req[400], cur[400];
    int rc = 0;

    mf_index_spec_key(want, &wkey);
    mf_index_spec_key(have, &hkey);
    if (bson_iter_init_find(&it, want, "name") && BSON_ITER_HOLDS_UTF8(&it))
        wname = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, have, "name") && BSON_ITER_HOLDS_UTF8(&it))
        hname = bson_iter_utf8(&it, NULL);
    bool same_name = strcmp(wname, hname) == 0;
    /*
     * findIndexesByKeyPattern / compareIndexOptions compare key patterns with
     * SimpleBSONObjComparator: field names in order, numbers by value, so
     * {a: 1.0} and {a: NumberLong(1)} are the index {a: 1}.
     */
    bool same_key = mf_doc_cmp(&wkey, &hkey) == 0;
    if (!same_name && !same_key)
        return 0;
    identity_options(want, &wopts);
    identity_options(have, &hopts);
    bool same_opts = bson_equal(&wopts, &hopts);
    /* The index's signature: the key and these options; indexes differing in it coexist. */
    bool same_sig = same_key;
    for (int i = 0; signature_fields[i] != NULL && same_sig; i++) {
        bson_iter_t a, b;
        bool ha = bson_iter_init_find(&a, &wopts, signature_fields[i]);
        bool hb = bson_iter_init_find(&b, &hopts, signature_fields[i]);
        same_sig = ha == hb && (!ha || mf_value_cmp(bson_iter_value(&a), bson_iter_value(&b)) == 0);
    }
    if (same_sig) {
        /* ... and the wildcardProjection, normalised (absent: every path). */
        bson_iter_t a, b;
        bool ha = bson_iter_init_find(&a, want, "wildcardProjection");
        bool hb = bson_iter_init_find(&b, have, "wildcardProjection");
        same_sig = ha == hb && (!ha || wild_proj_equal(bson_iter_value(&a), bson_iter_value(&b)));
    }
    bson_destroy(&wopts);
    bson_destroy(&hopts);
    if (!same_name && !same_sig)
        return 0;
    mf_fmt_doc(want, req, sizeof(req));
    mf_fmt_doc(have, cur, sizeof(cur));
    if (same_name && same_sig && same_opts)
        rc = 1;
    else if (same_name && same_sig)
        rc = mf_err_set(err, MF_E_IndexOptionsConflict,
                        "An equivalent index already exists with the same name but different options. Requested index: %s, existing index: %s",
                        req, cur);
    else if (same_name)
        rc = mf_err_set(err, MF_E_IndexKeySpecsConflict,
                        "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: %s, existing index: %s",
                        req, cur);
    else if (same_opts)
        rc = mf_err_set(err, MF_E_IndexOptionsConflict, "Index already exists with a different name: %s", hname);
    else
        rc = mf_err_set(err, MF_E_IndexOptionsConflict,
                        "An equivalent index already exists with a different name and options. Requested index: %s, existing index: %s",
                        req, cur);
    return rc;
}

/*
 * listIndexes' fields, in the order and types of MongoDB 8.0's
 * ListIndexesReplyItem (list_indexes.idl): mongod parses each catalog entry
 * into that struct and serialises it again, so whatever order an index was
 * created with, it lists in this one, its safeBool options as bools and its
 * safeInt ones as 32-bit ints.
 */
typedef enum { LIST_ANY, LIST_BOOL, LIST_INT, LIST_DOUBLE } list_type_t;
static const struct {
    const char *name;
    list_type_t type;
} listed_fields[] = {
    {"v", LIST_INT},
    {"key", LIST_ANY},
    {"name", LIST_ANY},
    {"background", LIST_BOOL},
    {"unique", LIST_BOOL},
    {"hidden", LIST_BOOL},
    {"partialFilterExpression", LIST_ANY},
    {"sparse", LIST_BOOL},
    {"expireAfterSeconds", LIST_INT},
    {"storageEngine", LIST_ANY},
    {"weights", LIST_ANY},
    {"default_language", LIST_ANY},
    {"language_override", LIST_ANY},
    {"textIndexVersion", LIST_INT},
    {"2dsphereIndexVersion", LIST_INT},
    {"bits", LIST_INT},
    {"min", LIST_DOUBLE},
    {"max", LIST_DOUBLE},
    {"bucketSize", LIST_DOUBLE},
    {"collation", LIST_ANY},
    {"wildcardProjection", LIST_ANY},
    {"columnstoreProjection", LIST_ANY},
    {"coarsestIndexedLevel", LIST_INT},
    {"finestIndexedLevel", LIST_INT},
    {"dropDups", LIST_BOOL},
    {"originalSpec", LIST_ANY},
    {"clustered", LIST_BOOL},
    {"prepareUnique", LIST_BOOL},
    {NULL, LIST_ANY},
};

static void
append_listed(bson_t *out, const char *k, const bson_value_t *v, list_type_t type)
{
    if (type != LIST_ANY && mf_value_is_number(v)) {
        if (type == LIST_BOOL) {
            BSON_APPEND_BOOL(out, k, mf_value_truthy(v)); /* safeBool: trueValue */
            return;
        }
        double d = mf_value_as_double(v);
        if (type == LIST_DOUBLE) {
            BSON_APPEND_DOUBLE(out, k, d);
            return;
        }
        if (d == d && d >= INT32_MIN && d <= INT32_MAX) {
            BSON_APPEND_INT32(out, k, (int32_t)d);
            return;
        }
    }
    bson_append_value(out, k, -1, v);
}

void
mf_index_spec_listed(const bson_t *spec, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    for (int i = 0; listed_fields[i].name != NULL; i++) {
        if (bson_iter_init_find(&it, spec, listed_fields[i].name) &&
            !(strcmp(listed_fields[i].name, "collation") == 0 && collation_is_simple(bson_iter_value(&it))))
            append_listed(out, listed_fields[i].name, bson_iter_value(&it), listed_fields[i].type);
    }
    /* mayfly's own options (archive, ...) after mongod's, as stored; ns (4.2 and older) is not listed, as mongod. */
    bson_iter_init(&it, spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bool known = strcmp(k, "ns") == 0;
        for (int i = 0; !known && listed_fields[i].name != NULL; i++)
            known = strcmp(listed_fields[i].name, k) == 0;
        if (!known)
            bson_append_value(out, k, -1, bson_iter_value(&it));
    }
}
