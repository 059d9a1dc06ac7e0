/*
 * agg_optimize.c: dividing a $match by the paths the stage before it changes.
 *
 * Design. mongod's optimizer (Pipeline::optimizeContainer calling each
 * stage's optimizeAt) tries, for a stage followed by a $match, to move the
 * $match ahead of it (DocumentSource::pushMatchBefore). The stage says which
 * paths it changes (getModifiedPaths: a finite set, every path but a set,
 * or all of them, and renames "new name holds old name"), and the $match is
 * split as expression::splitMatchExpressionBy splits it:
 *
 *  - the filter is a conjunction of clauses (top-level fields, and the
 *    children of a top-level $and, flattened); each clause that is
 *    independent of the changed paths moves, the others stay;
 *  - a $nor clause splits by its children (!(x|y) is !x & !y), a child
 *    moving when it is independent as a whole; $or and $not move whole or
 *    stay whole;
 *  - a clause is independent (expression::isIndependentOf) when every path
 *    it reads neither equals, nor is a prefix of, nor has as prefix a
 *    changed path. Clauses mongod cannot rename never move: $elemMatch and
 *    $size (array matching), $where, $jsonSchema, $alwaysTrue / False and
 *    other "kOther" expressions; nor does an $expr needing the whole
 *    document ($$ROOT, $$CURRENT) or randomness ($rand), nor, here, one
 *    that reads through $getField / $setField / $meta (whose paths are not
 *    "$x" strings; mayfly is conservative where mongod is precise);
 *  - paths of moved clauses are renamed back (findNewName: the renamed
 *    prefix replaced), an $expr's field paths too ("$bb" behind
 *    {bb: "$b"} becomes "$b": ExprMatchExpression::applyRename).
 *
 * With every path "kept but some" (an inclusion $project), the changed
 * paths are those the filter reads that no kept path covers
 * (semantic_analysis::extractModifiedDependencies). A filter with $text
 * never moves: it is the first stage already.
 *
 * Clauses are held as one-field documents (owned copies), so that split
 * $nor clauses and renamed ones need no other storage. Moved or kept parts
 * of more than one clause are {$and: [clause, ...]}, as mongod serialises
 * the AND it builds (createAndOfNodes).
 */
#include "query/agg_optimize.h"

#include <string.h>

/* ---- mf_modpaths_t ---- */

void
mf_modpaths_init(mf_modpaths_t *m, enum mf_mods_type type)
{
    memset(m, 0, sizeof *m);
    m->type = type;
}

void
mf_modpaths_add(mf_modpaths_t *m, const char *path)
{
    m->paths = bson_realloc(m->paths, (m->npaths + 1) * sizeof *m->paths);
    m->paths[m->npaths++] = bson_strdup(path);
}

static void
modpaths_rename(mf_modpaths_t *m, const char *new_name, const char *old_name)
{
    m->ren_new = bson_realloc(m->ren_new, (m->nren + 1) * sizeof *m->ren_new);
    m->ren_old = bson_realloc(m->ren_old, (m->nren + 1) * sizeof *m->ren_old);
    m->ren_new[m->nren] = bson_strdup(new_name);
    m->ren_old[m->nren++] = bson_strdup(old_name);
}

void
mf_modpaths_free(mf_modpaths_t *m)
{
    for (size_t i = 0; i < m->npaths; i++)
        bson_free(m->paths[i]);
    for (size_t i = 0; i < m->nren; i++) {
        bson_free(m->ren_new[i]);
        bson_free(m->ren_old[i]);
    }
    bson_free(m->paths);
    bson_free(m->ren_new);
    bson_free(m->ren_old);
    memset(m, 0, sizeof *m);
}

bool
mf_agg_is_operator_doc(const bson_value_t *v)
{
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_DOCUMENT)
        return false;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    return bson_iter_next(&it) && bson_iter_key(&it)[0] == '$';
}

static bool
is_nested_spec(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_DOCUMENT && v->value.v_doc.data_len > 5 && !mf_agg_is_operator_doc(v);
}

/* proj_bool: 1 / 0 for a $project inclusion / exclusion flag (number or bool), -1 for an expression. */
static int
proj_bool(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_BOOL:
        return v->value.v_bool ? 1 : 0;
    case BSON_TYPE_INT32:
        return v->value.v_int32 != 0;
    case BSON_TYPE_INT64:
        return v->value.v_int64 != 0;
    case BSON_TYPE_DOUBLE:
        return v->value.v_double != 0;
    default: /* a decimal too: read as computed, which keeps nothing (the safe side) */
        return -1;
    }
}

/*
 * proj_includes: true when some leaf of spec includes or computes a field,
 * the top-level _id counting only when it is the only field ({_id: 1} is an
 * inclusion, {_id: 1, a: 0} an exclusion).
 */
static bool
proj_includes(const bson_value_t *spec, bool top)
{
    bson_iter_t it;
    int id = -2; /* the top-level _id's flag; -2: none */
    bool others = false;

    bson_iter_init_from_data(&it, spec->value.v_doc.data, spec->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (top && strcmp(bson_iter_key(&it), "_id") == 0 && proj_bool(v) >= 0) {
            id = proj_bool(v);
            continue;
        }
        others = true;
        if (is_nested_spec(v) ? proj_includes(v, false) : proj_bool(v) != 0)
            return true;
    }
    return !others && id == 1;
}

/* simple_field_ref: "$x", "$$ROOT.x" or "$$CURRENT.x" with x one component: the input field x, else NULL
 * (ExpressionFieldPath::getComputedPaths: a path of two parts on the current document). */
static const char *
simple_field_ref(const bson_value_t *v)
{
    if (v->value_type != BSON_TYPE_UTF8 || v->value.v_utf8.str[0] != '$')
        return NULL;
    const char *x = v->value.v_utf8.str + 1;
    if (strncmp(x, "$ROOT.", 6) == 0)
        x += 6;
    else if (strncmp(x, "$CURRENT.", 9) == 0)
        x += 9;
    return x[0] != '\0' && x[0] != '$' && strchr(x, '.') == NULL ? x : NULL;
}

/*
 * proj_walk: adds to m the paths spec (at prefix) keeps (inclusion), changes
 * (exclusion, $addFields) and renames, as ProjectionNode::reportProjectedPaths
 * / reportComputedPaths report them.
 */
static void
proj_walk(mf_modpaths_t *m, const bson_value_t *spec, const char *prefix, bool inclusion, bool add_fields)
{
    bson_iter_t it;
    bson_iter_init_from_data(&it, spec->value.v_doc.data, spec->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        const char *k = bson_iter_key(&it);
        char *path = prefix[0] ? bson_strdup_printf("%s.%s", prefix, k) : bson_strdup(k);
        const char *src = prefix[0] || strchr(path, '.') ? NULL : simple_field_ref(v);
        int flag = add_fields ? -1 : proj_bool(v);
        if (is_nested_spec(v))
            proj_walk(m, v, path, inclusion, add_fields);
        else if (src != NULL && (inclusion || add_fields))
            modpaths_rename(m, path, src);
        else if (inclusion ? flag == 1 : flag != 1)
            mf_modpaths_add(m, path); /* inclusion: kept; exclusion / $addFields: changed */
        bson_free(path);
    }
}

void
mf_modpaths_from_projection(mf_modpaths_t *m, const bson_t *spec, bool is_add_fields)
{
    bson_value_t sv;
    bson_iter_t it;

    sv.value_type = BSON_TYPE_DOCUMENT;
    sv.value.v_doc.data = (uint8_t *)bson_get_data(spec);
    sv.value.v_doc.data_len = spec->len;
    bool inclusion = !is_add_fields && proj_includes(&sv, true);
    mf_modpaths_init(m, inclusion ? MF_MODS_ALL_EXCEPT : MF_MODS_FINITE);
    proj_walk(m, &sv, "", inclusion, is_add_fields);
    /* An inclusion keeps _id unless it says otherwise. */
    if (inclusion && !bson_iter_init_find(&it, spec, "_id"))
        mf_modpaths_add(m, "_id");
}

/* has_pred_on: filter document doc holds an op ("$type", "$exists") predicate on one of paths[n]
 * (expression::hasPredicateOnPaths). */
static bool
has_pred_on(const bson_value_t *doc, char *const *paths, size_t n, const char *op)
{
    bson_iter_t it, ai, oi;

    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) && BSON_ITER_HOLDS_ARRAY(&it)) {
            for (bson_iter_recurse(&it, &ai); bson_iter_next(&ai);)
                if (BSON_ITER_HOLDS_DOCUMENT(&ai) && has_pred_on(bson_iter_value(&ai), paths, n, op))
                    return true;
            continue;
        }
        bool on = false;
        for (size_t i = 0; i < n; i++)
            on |= strcmp(k, paths[i]) == 0;
        if (!on || !mf_agg_is_operator_doc(bson_iter_value(&it)))
            continue;
        for (bson_iter_recurse(&it, &oi); bson_iter_next(&oi);) {
            const char *o = bson_iter_key(&oi);
            if (strcmp(o, op) == 0)
                return true;
            if (strcmp(o, "$not") == 0 && BSON_ITER_HOLDS_DOCUMENT(&oi) && bson_iter_recurse(&oi, &ai))
                while (bson_iter_next(&ai))
                    if (strcmp(bson_iter_key(&ai), op) == 0)
                        return true;
        }
    }
    return false;
}

static bool expr_reads_id(const bson_value_t *doc);

void
mf_modpaths_from_group(mf_modpaths_t *m, const bson_value_t *id, const bson_t *filter)
{
    mf_modpaths_t keys; /* the key fields, as paths of the output */
    bson_iter_t it;
    bson_value_t fv;

    mf_modpaths_init(m, MF_MODS_ALL_EXCEPT);
    mf_modpaths_init(&keys, MF_MODS_FINITE);
    if (is_nested_spec(id)) {
        bson_iter_init_from_data(&it, id->value.v_doc.data, id->value.v_doc.data_len);
        while (bson_iter_next(&it)) {
            char *path = bson_strdup_printf("_id.%s", bson_iter_key(&it));
            const char *src = simple_field_ref(bson_iter_value(&it));
            if (src != NULL)
                modpaths_rename(m, path, src);
            mf_modpaths_add(&keys, path);
            bson_free(path);
        }
    } else {
        if (simple_field_ref(id) != NULL)
            modpaths_rename(m, "_id", simple_field_ref(id));
        mf_modpaths_add(&keys, "_id");
    }
    fv.value_type = BSON_TYPE_DOCUMENT;
    fv.value.v_doc.data = (uint8_t *)bson_get_data(filter);
    fv.value.v_doc.data_len = filter->len;
    if (has_pred_on(&fv, keys.paths, keys.npaths, "$type") ||
        (keys.npaths == 1 && has_pred_on(&fv, keys.paths, keys.npaths, "$exists")) || expr_reads_id(&fv))
        m->type = MF_MODS_ALL;
    mf_modpaths_free(&keys);
}

/* ---- dependencies of a clause ---- */

typedef struct deps {
    char **paths; /* paths the clause reads; owned */
    size_t n;
    bool pinned; /* the clause may not move at all */
} deps_t;

static void
deps_add(deps_t *d, const char *path, size_t len)
{
    d->paths = bson_realloc(d->paths, (d->n + 1) * sizeof *d->paths);
    d->paths[d->n++] = bson_strndup(path, len);
}

static void
deps_free(deps_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        bson_free(d->paths[i]);
    bson_free(d->paths);
}

/* expr_string_deps: the field a "$x" / "$$ROOT.x" / "$$CURRENT.x" string reads; the whole document pins. */
static void
expr_string_deps(const char *s, deps_t *d)
{
    if (s[0] != '$')
        return;
    if (s[1] != '$') {
        deps_add(d, s + 1, strlen(s + 1));
        return;
    }
    const char *var = s + 2, *dot = strchr(var, '.');
    size_t vlen = dot ? (size_t)(dot - var) : strlen(var);
    bool doc = (vlen == 4 && strncmp(var, "ROOT", 4) == 0) || (vlen == 7 && strncmp(var, "CURRENT", 7) == 0);
    if (doc && dot == NULL)
        d->pinned = true; /* needWholeDocument */
    else if (doc)
        deps_add(d, dot + 1, strlen(dot + 1));
}

/*
 * expr_deps: the fields an aggregation expression reads (Expression::addDependencies),
 * over-approximated: every "$path" string counts, $literal's argument does not.
 */
static void
expr_deps(const bson_value_t *v, deps_t *d)
{
    static const char *const pin[] = {"$getField", "$setField", "$unsetField", "$meta", "$rand", "$function",
                                      "$accumulator", "$where"};
    bson_iter_t it;

    if (v->value_type == BSON_TYPE_UTF8) {
        expr_string_deps(v->value.v_utf8.str, d);
        return;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it) && !d->pinned) {
        const char *k = bson_iter_key(&it);
        for (size_t i = 0; i < sizeof pin / sizeof pin[0]; i++)
            if (strcmp(k, pin[i]) == 0)
                d->pinned = true;
        if (strcmp(k, "CURRENT") == 0 || strcmp(k, "ROOT") == 0)
            d->pinned = true; /* a $let rebinding the current document */
        if (strcmp(k, "$literal") != 0)
            expr_deps(bson_iter_value(&it), d);
    }
}

/* pins_path_ops: an operator document on a path holds $elemMatch or $size (kArrayMatching: never
 * renamed, never moved). */
static bool
pins_path_ops(const bson_value_t *v)
{
    bson_iter_t it, ai;

    if (!mf_agg_is_operator_doc(v))
        return false;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$elemMatch") == 0 || strcmp(k, "$size") == 0)
            return true;
        if (strcmp(k, "$not") == 0 && pins_path_ops(bson_iter_value(&it)))
            return true;
        if (strcmp(k, "$all") == 0 && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai))
            while (bson_iter_next(&ai))
                if (mf_agg_is_operator_doc(bson_iter_value(&ai)))
                    return true; /* {$all: [{$elemMatch: ...}]} */
    }
    return false;
}

static void clause_deps(const char *key, const bson_value_t *v, deps_t *d);

/* doc_deps: the dependencies of every clause of a filter document. */
static void
doc_deps(const bson_value_t *doc, deps_t *d)
{
    bson_iter_t it;
    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it) && !d->pinned)
        clause_deps(bson_iter_key(&it), bson_iter_value(&it), d);
}

/* clause_deps: adds what the clause {key: v} reads to d (match_expression::addDependencies), or pins it. */
static void
clause_deps(const char *key, const bson_value_t *v, deps_t *d)
{
    bson_iter_t it;

    if (key[0] != '$') {
        if (pins_path_ops(v))
            d->pinned = true;
        else
            deps_add(d, key, strlen(key));
        return;
    }
    if (strcmp(key, "$and") == 0 || strcmp(key, "$or") == 0 || strcmp(key, "$nor") == 0) {
        bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
        while (bson_iter_next(&it) && !d->pinned)
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                doc_deps(bson_iter_value(&it), d);
        return;
    }
    if (strcmp(key, "$expr") == 0) {
        expr_deps(v, d);
        return;
    }
    if (strcmp(key, "$comment") == 0)
        return; /* no expression at all in mongod's parse */
    d->pinned = true; /* $where, $jsonSchema, $alwaysTrue, $text, $sampleRate ...: "kOther" or random */
}

static bool overlaps(const char *a, const char *b);

/*
 * expr_reads_id: an $expr anywhere in filter document doc reads _id or a
 * path under it. After a $group such an $expr does not move: the group key
 * puts null and missing, and numbers that compare equal, in one group, so
 * an expression over _id may not mean the same over the key's source
 * (validateExprMatchExpressionsForSwapWithGroup in later mongod versions,
 * which allow a few safe shapes; none here).
 */
static bool
expr_reads_id(const bson_value_t *doc)
{
    bson_iter_t it, ai;
    bool reads = false;

    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (!reads && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$expr") == 0) {
            deps_t d = {0};
            expr_deps(bson_iter_value(&it), &d);
            for (size_t i = 0; i < d.n; i++)
                reads |= overlaps(d.paths[i], "_id");
            deps_free(&d);
        } else if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                   BSON_ITER_HOLDS_ARRAY(&it)) {
            for (bson_iter_recurse(&it, &ai); !reads && bson_iter_next(&ai);)
                reads = BSON_ITER_HOLDS_DOCUMENT(&ai) && expr_reads_id(bson_iter_value(&ai));
        }
    }
    return reads;
}

/* overlaps: a equals b or one is a path prefix of the other (expression::bidirectionalPathPrefixOf). */
static bool
overlaps(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), l = la < lb ? la : lb;
    return strncmp(a, b, l) == 0 && (la == lb || (la < lb ? b[la] : a[lb]) == '.');
}

/* covers: kept path p keeps path dep (p equals dep or is its ancestor). */
static bool
covers(const char *p, const char *dep)
{
    size_t lp = strlen(p);
    return strncmp(p, dep, lp) == 0 && (dep[lp] == '\0' || dep[lp] == '.');
}

/* dep_changed: the stage described by m may change what path reads. */
static bool
dep_changed(const mf_modpaths_t *m, const char *path)
{
    if (m->type == MF_MODS_ALL)
        return true;
    if (m->type == MF_MODS_FINITE) {
        for (size_t i = 0; i < m->npaths; i++)
            if (overlaps(m->paths[i], path))
                return true;
        return false;
    }
    for (size_t i = 0; i < m->npaths; i++)
        if (covers(m->paths[i], path))
            return false;
    for (size_t i = 0; i < m->nren; i++)
        if (covers(m->ren_new[i], path))
            return false;
    return true;
}

/* rename_of: the input path m's renames make path read, or NULL when no rename applies (findNewName). */
static char *
rename_of(const mf_modpaths_t *m, const char *path)
{
    for (size_t i = 0; i < m->nren; i++)
        if (covers(m->ren_new[i], path) && strcmp(m->ren_new[i], m->ren_old[i]) != 0)
            return bson_strdup_printf("%s%s", m->ren_old[i], path + strlen(m->ren_new[i]));
    return NULL;
}

/* independent: the clause {key: v} may move ahead of m's stage (expression::isIndependentOf). */
static bool
independent(const char *key, const bson_value_t *v, const mf_modpaths_t *m)
{
    deps_t d = {0};
    clause_deps(key, v, &d);
    bool ok = !d.pinned;
    for (size_t i = 0; ok && i < d.n; i++)
        ok = !dep_changed(m, d.paths[i]);
    deps_free(&d);
    return ok;
}

/* doc_independent: every clause of a filter document may move (a $nor child as a whole). */
static bool
doc_independent(const bson_value_t *doc, const mf_modpaths_t *m)
{
    bson_iter_t it;
    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it))
        if (!independent(bson_iter_key(&it), bson_iter_value(&it), m))
            return false;
    return true;
}

/* ---- renaming ---- */

static bool append_renamed(bson_t *out, const char *key, const bson_value_t *v, const mf_modpaths_t *m);

/* append_renamed_doc: appends each clause of filter document doc to out, renamed; true if a name changed. */
static bool
append_renamed_doc(bson_t *out, const bson_value_t *doc, const mf_modpaths_t *m)
{
    bson_iter_t it;
    bool changed = false;
    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it))
        changed |= append_renamed(out, bson_iter_key(&it), bson_iter_value(&it), m);
    return changed;
}

/*
 * expr_renamed: appends v (an aggregation expression, or a part of one) to out
 * as key with the renames of m applied to its field paths, "$x.y",
 * "$$ROOT.x" and "$$CURRENT.x" (ExprMatchExpression::applyRename,
 * ExpressionFieldPath::copyWithSubstitution); $literal's argument is left
 * alone. True if a path changed.
 */
static bool
expr_renamed(bson_t *out, const char *key, const bson_value_t *v, const mf_modpaths_t *m)
{
    static const char *const docs[] = {"$$ROOT.", "$$CURRENT."};
    bson_iter_t it;
    bson_t child;
    bool changed = false;

    if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.str[0] == '$') {
        const char *s = v->value.v_utf8.str, *path = s[1] != '$' ? s + 1 : NULL;
        size_t pre = 1;
        for (size_t i = 0; path == NULL && i < 2; i++)
            if (strncmp(s, docs[i], strlen(docs[i])) == 0)
                path = s + (pre = strlen(docs[i]));
        char *r = path != NULL ? rename_of(m, path) : NULL;
        if (r == NULL) {
            bson_append_value(out, key, -1, v);
            return false;
        }
        char *ns = bson_strdup_printf("%.*s%s", (int)pre, s, r);
        bson_append_utf8(out, key, -1, ns, -1);
        bson_free(ns);
        bson_free(r);
        return true;
    }
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY) {
        bson_append_value(out, key, -1, v);
        return false;
    }
    if (v->value_type == BSON_TYPE_DOCUMENT)
        bson_append_document_begin(out, key, -1, &child);
    else
        bson_append_array_begin(out, key, -1, &child);
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$literal") == 0)
            bson_append_value(&child, "$literal", -1, bson_iter_value(&it));
        else
            changed |= expr_renamed(&child, bson_iter_key(&it), bson_iter_value(&it), m);
    }
    if (v->value_type == BSON_TYPE_DOCUMENT)
        bson_append_document_end(out, &child);
    else
        bson_append_array_end(out, &child);
    return changed;
}

/* append_renamed: appends {key: v} to out with m's renames applied (applyRenamesToExpression);
 * true if a name changed. */
static bool
append_renamed(bson_t *out, const char *key, const bson_value_t *v, const mf_modpaths_t *m)
{
    bson_t arr, child;
    bson_iter_t it;
    bool changed = false;

    if (key[0] != '$') {
        char *r = rename_of(m, key);
        bson_append_value(out, r ? r : key, -1, v);
        bson_free(r);
        return r != NULL;
    }
    if (strcmp(key, "$expr") == 0)
        return expr_renamed(out, key, v, m);
    if (strcmp(key, "$and") != 0 && strcmp(key, "$or") != 0 && strcmp(key, "$nor") != 0) {
        bson_append_value(out, key, -1, v); /* $comment */
        return false;
    }
    bson_append_array_begin(out, key, -1, &arr);
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    for (unsigned i = 0; bson_iter_next(&it); i++) {
        char idx[16];
        bson_snprintf(idx, sizeof idx, "%u", i);
        bson_append_document_begin(&arr, idx, -1, &child);
        changed |= append_renamed_doc(&child, bson_iter_value(&it), m);
        bson_append_document_end(&arr, &child);
    }
    bson_append_array_end(out, &arr);
    return changed;
}

/* ---- clauses ---- */

typedef struct clauses {
    bson_t **c; /* one-field documents, owned */
    size_t n;
} clauses_t;

static void
clauses_push(clauses_t *cs, bson_t *c)
{
    cs->c = bson_realloc(cs->c, (cs->n + 1) * sizeof *cs->c);
    cs->c[cs->n++] = c;
}

static void
clauses_free(clauses_t *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        bson_destroy(cs->c[i]);
    bson_free(cs->c);
}

/*
 * split_ops: the clauses of {path: ops}, one per operator, as mongod's parser
 * makes one expression of each operator and adds it to the enclosing $and
 * ({a: {$gt: 1, $size: 2}} is {a: {$gt: 1}} and {a: {$size: 2}}, whose
 * parts move apart); $options stays with its $regex.
 */
static void
split_ops(const char *path, const bson_value_t *ops, clauses_t *cs)
{
    bson_iter_t it, ot;
    bool has_regex = false;

    bson_iter_init_from_data(&it, ops->value.v_doc.data, ops->value.v_doc.data_len);
    while (bson_iter_next(&it))
        has_regex |= strcmp(bson_iter_key(&it), "$regex") == 0;
    bson_iter_init_from_data(&it, ops->value.v_doc.data, ops->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (has_regex && strcmp(k, "$options") == 0)
            continue; /* with the $regex */
        bson_t *c = bson_new(), sub;
        bson_append_document_begin(c, path, -1, &sub);
        bson_append_value(&sub, k, -1, bson_iter_value(&it));
        if (strcmp(k, "$regex") == 0 && bson_iter_init_from_data(&ot, ops->value.v_doc.data, ops->value.v_doc.data_len) &&
            bson_iter_find(&ot, "$options"))
            bson_append_value(&sub, "$options", -1, bson_iter_value(&ot));
        bson_append_document_end(c, &sub);
        clauses_push(cs, c);
    }
}

/* flatten: the clauses of filter document doc, a top-level $and's children's clauses in its place. */
static void
flatten(const bson_value_t *doc, clauses_t *cs)
{
    bson_iter_t it, ai;
    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &ai)) {
            while (bson_iter_next(&ai))
                if (BSON_ITER_HOLDS_DOCUMENT(&ai))
                    flatten(bson_iter_value(&ai), cs);
            continue;
        }
        if (bson_iter_key(&it)[0] != '$' && mf_agg_is_operator_doc(bson_iter_value(&it))) {
            split_ops(bson_iter_key(&it), bson_iter_value(&it), cs);
            continue;
        }
        bson_t *c = bson_new();
        bson_append_value(c, bson_iter_key(&it), -1, bson_iter_value(&it));
        clauses_push(cs, c);
    }
}

/* nor_part: {$nor: [children of nor whose independence is want]}, or NULL if there are none. */
static bson_t *
nor_part(const bson_value_t *nor, const mf_modpaths_t *m, bool want)
{
    bson_t *c = bson_new(), arr;
    bson_iter_t it;
    unsigned k = 0;

    bson_append_array_begin(c, "$nor", -1, &arr);
    bson_iter_init_from_data(&it, nor->value.v_doc.data, nor->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || doc_independent(bson_iter_value(&it), m) != want)
            continue;
        char idx[16];
        bson_snprintf(idx, sizeof idx, "%u", k++);
        bson_append_value(&arr, idx, -1, bson_iter_value(&it));
    }
    bson_append_array_end(c, &arr);
    if (k == 0) {
        bson_destroy(c);
        return NULL;
    }
    return c;
}

/* split_clause: sends clause c (taken over) to moved or kept, or divides a $nor between them. */
static void
split_clause(bson_t *c, const mf_modpaths_t *m, clauses_t *moved, clauses_t *kept)
{
    bson_iter_t it;
    bson_iter_init(&it, c);
    bson_iter_next(&it);
    const char *key = bson_iter_key(&it);
    if (independent(key, bson_iter_value(&it), m)) {
        clauses_push(moved, c);
        return;
    }
    if (strcmp(key, "$nor") != 0 || !BSON_ITER_HOLDS_ARRAY(&it)) {
        clauses_push(kept, c);
        return;
    }
    bson_t *in = nor_part(bson_iter_value(&it), m, true), *out = nor_part(bson_iter_value(&it), m, false);
    if (in != NULL)
        clauses_push(moved, in);
    if (out != NULL)
        clauses_push(kept, out);
    bson_destroy(c);
}

/* build: one filter from clauses, renamed by m (NULL: as they are); *changed is set if a name changed. */
static bson_t *
build(const clauses_t *cs, const mf_modpaths_t *m, bool *changed)
{
    bson_t *out = bson_new(), arr, child, *target = out;
    bson_iter_t it;

    if (cs->n > 1)
        bson_append_array_begin(out, "$and", -1, &arr);
    for (size_t i = 0; i < cs->n; i++) {
        char idx[16];
        bson_snprintf(idx, sizeof idx, "%zu", i);
        if (cs->n > 1) {
            bson_append_document_begin(&arr, idx, -1, &child);
            target = &child;
        }
        bson_iter_init(&it, cs->c[i]);
        bson_iter_next(&it);
        if (m != NULL)
            *changed |= append_renamed(target, bson_iter_key(&it), bson_iter_value(&it), m);
        else
            bson_append_value(target, bson_iter_key(&it), -1, bson_iter_value(&it));
        if (cs->n > 1)
            bson_append_document_end(&arr, &child);
    }
    if (cs->n > 1)
        bson_append_array_end(out, &arr);
    return out;
}

/* has_text: a $text anywhere in v (DocumentSourceMatch::isTextQuery). */
static bool
has_text(const bson_value_t *v)
{
    bson_iter_t it;
    if (v->value_type != BSON_TYPE_DOCUMENT && v->value_type != BSON_TYPE_ARRAY)
        return false;
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    while (bson_iter_next(&it))
        if (strcmp(bson_iter_key(&it), "$text") == 0 || has_text(bson_iter_value(&it)))
            return true;
    return false;
}

enum mf_split
mf_match_split(const bson_t *filter, const mf_modpaths_t *m, bson_t **moved, bson_t **kept)
{
    clauses_t all = {0}, mv = {0}, kp = {0};
    bson_value_t fv;
    enum mf_split rc = MF_SPLIT_NONE;
    bool renamed = false;

    *moved = *kept = NULL;
    fv.value_type = BSON_TYPE_DOCUMENT;
    fv.value.v_doc.data = (uint8_t *)bson_get_data(filter);
    fv.value.v_doc.data_len = filter->len;
    if (m->type == MF_MODS_ALL || bson_empty(filter) || has_text(&fv))
        goto out;
    flatten(&fv, &all);
    for (size_t i = 0; i < all.n; i++)
        split_clause(all.c[i], m, &mv, &kp);
    all.n = 0; /* every clause now belongs to mv or kp */
    if (mv.n == 0)
        goto out;
    *moved = build(&mv, m, &renamed);
    if (kp.n == 0 && !renamed) {
        bson_destroy(*moved);
        *moved = NULL;
        rc = MF_SPLIT_WHOLE;
        goto out;
    }
    *kept = kp.n > 0 ? build(&kp, NULL, &renamed) : NULL;
    rc = MF_SPLIT_PARTS;
out:
    clauses_free(&all);
    clauses_free(&mv);
    clauses_free(&kp);
    return rc;
}

/* ---- descending into the path a $lookup unwinds ---- */

static bool descend_doc(const bson_value_t *doc, const char *prefix, bson_t *out);

/* descend_clause: appends {key: v} to out with prefix taken off its paths; false when it is not all under prefix. */
static bool
descend_clause(const char *key, const bson_value_t *v, const char *prefix, bson_t *out)
{
    size_t lp = strlen(prefix);
    bson_t arr, child;
    bson_iter_t it;
    bool ok = true;

    if (key[0] != '$') {
        /* isPathPrefixOf(as, path), and no internal node with a path ($elemMatch: isInternalNodeWithPath). */
        if (strncmp(key, prefix, lp) != 0 || key[lp] != '.' || key[lp + 1] == '\0' || pins_path_ops(v))
            return false;
        bson_append_value(out, key + lp + 1, -1, v);
        return true;
    }
    if (strcmp(key, "$and") != 0 && strcmp(key, "$or") != 0 && strcmp(key, "$nor") != 0)
        return false; /* $expr, $where, $text ...: no path of their own */
    bson_append_array_begin(out, key, -1, &arr);
    bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len);
    for (unsigned i = 0; ok && bson_iter_next(&it); i++) {
        char idx[16];
        bson_snprintf(idx, sizeof idx, "%u", i);
        bson_append_document_begin(&arr, idx, -1, &child);
        ok = BSON_ITER_HOLDS_DOCUMENT(&it) && descend_doc(bson_iter_value(&it), prefix, &child);
        bson_append_document_end(&arr, &child);
    }
    bson_append_array_end(out, &arr);
    return ok;
}

static bool
descend_doc(const bson_value_t *doc, const char *prefix, bson_t *out)
{
    bson_iter_t it;
    bool any = false;
    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        if (!descend_clause(bson_iter_key(&it), bson_iter_value(&it), prefix, out))
            return false;
        any = true;
    }
    return any;
}

bson_t *
mf_match_descend(const bson_t *filter, const char *prefix)
{
    bson_t *out = bson_new();
    bson_value_t fv;

    fv.value_type = BSON_TYPE_DOCUMENT;
    fv.value.v_doc.data = (uint8_t *)bson_get_data(filter);
    fv.value.v_doc.data_len = filter->len;
    if (!descend_doc(&fv, prefix, out)) {
        bson_destroy(out);
        return NULL;
    }
    return out;
}

/* ---- the part of a $match that may go ahead of a $redact ---- */

/* redact_safe_type: a comparison operand of this type keeps its meaning once $redact removed parts
 * (isTypeRedactSafeInComparison: not an array, a document, null or undefined). */
static bool
redact_safe_type(bson_type_t t)
{
    return t != BSON_TYPE_ARRAY && t != BSON_TYPE_DOCUMENT && t != BSON_TYPE_NULL && t != BSON_TYPE_UNDEFINED;
}

/* redact_safe_name: no component of path is all digits (an array index that redaction could shift). */
static bool
redact_safe_name(const char *path)
{
    const char *p = path;
    while (true) {
        size_t n = strcspn(p, "."), d = 0;
        while (d < n && p[d] >= '0' && p[d] <= '9')
            d++;
        if (n > 0 && d == n)
            return false;
        if (p[n] == '\0')
            return true;
        p += n + 1;
    }
}

static void redact_safe_top(const bson_value_t *doc, bson_t *out);

/* redact_safe_ops: the safe operators of an operator document {$gt: 5, ...} (redactSafePortionDollarOps). */
static void
redact_safe_ops(const bson_value_t *doc, bson_t *out)
{
    static const char *const always[] = {"$type", "$regex", "$options", "$mod", "$bitsAllSet", "$bitsAllClear",
                                         "$bitsAnySet", "$bitsAnyClear"};
    static const char *const cmp[] = {"$eq", "$lt", "$lte", "$gt", "$gte"};
    bson_iter_t it, ai;

    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bool ok = false;
        for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
            ok |= strcmp(k, always[i]) == 0;
        for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++)
            ok |= strcmp(k, cmp[i]) == 0 && redact_safe_type(v->value_type);
        if (strcmp(k, "$in") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            ok = true; /* all or nothing, as $or */
            for (bson_iter_recurse(&it, &ai); bson_iter_next(&ai);)
                ok &= redact_safe_type(bson_iter_type(&ai));
        }
        if (ok) {
            bson_append_value(out, k, -1, v);
        } else if (strcmp(k, "$all") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t arr = BSON_INITIALIZER; /* the safe elements, as an $and's children */
            unsigned n = 0;
            for (bson_iter_recurse(&it, &ai); bson_iter_next(&ai);) {
                if (!redact_safe_type(bson_iter_type(&ai)))
                    continue;
                char idx[16];
                bson_snprintf(idx, sizeof idx, "%u", n++);
                bson_append_value(&arr, idx, -1, bson_iter_value(&ai));
            }
            if (n > 0)
                bson_append_array(out, k, -1, &arr);
            bson_destroy(&arr);
        } else if (strcmp(k, "$elemMatch") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_t sub;
            bson_init(&sub);
            if (mf_agg_is_operator_doc(v))
                redact_safe_ops(v, &sub);
            else
                redact_safe_top(v, &sub);
            if (!bson_empty(&sub))
                bson_append_document(out, k, -1, &sub);
            bson_destroy(&sub);
        }
    }
}

/* redact_safe_top: the safe clauses of a filter document (redactSafePortionTopLevel). */
static void
redact_safe_top(const bson_value_t *doc, bson_t *out)
{
    bson_iter_t it, ai;

    bson_iter_init_from_data(&it, doc->value.v_doc.data, doc->value.v_doc.data_len);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        bool is_or = strcmp(k, "$or") == 0;
        if ((is_or || strcmp(k, "$and") == 0) && BSON_ITER_HOLDS_ARRAY(&it)) {
            /* $and keeps its safe children; $or all of them or nothing */
            bson_t arr = BSON_INITIALIZER;
            unsigned n = 0;
            bool all = true;
            for (bson_iter_recurse(&it, &ai); all && bson_iter_next(&ai);) {
                bson_t sub = BSON_INITIALIZER;
                if (BSON_ITER_HOLDS_DOCUMENT(&ai))
                    redact_safe_top(bson_iter_value(&ai), &sub);
                if (!bson_empty(&sub)) {
                    char idx[16];
                    bson_snprintf(idx, sizeof idx, "%u", n++);
                    bson_append_document(&arr, idx, -1, &sub);
                } else if (is_or) {
                    all = false;
                }
                bson_destroy(&sub);
            }
            if (n > 0 && all)
                bson_append_array(out, k, -1, &arr);
            bson_destroy(&arr);
            continue;
        }
        if (k[0] == '$' || !redact_safe_name(k))
            continue; /* $nor, $expr, $where, $comment ...; a numeric path component */
        if (v->value_type == BSON_TYPE_DOCUMENT) {
            bson_t sub = BSON_INITIALIZER;
            redact_safe_ops(v, &sub); /* a plain document (equality to it) has no "$" keys: nothing */
            if (!bson_empty(&sub))
                bson_append_document(out, k, -1, &sub);
            bson_destroy(&sub);
        } else if (redact_safe_type(v->value_type)) {
            bson_append_value(out, k, -1, v);
        }
    }
}

bson_t *
mf_match_redact_safe(const bson_t *filter)
{
    bson_value_t fv;
    bson_t *out = bson_new();

    fv.value_type = BSON_TYPE_DOCUMENT;
    fv.value.v_doc.data = (uint8_t *)bson_get_data(filter);
    fv.value.v_doc.data_len = filter->len;
    redact_safe_top(&fv, out);
    if (bson_empty(out)) {
        bson_destroy(out);
        return NULL;
    }
    return out;
}
