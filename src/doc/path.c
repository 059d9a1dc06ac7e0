/*
 * path.c: dotted field paths with MongoDB's array traversal (see path.h).
 *
 * Design: the walk is a recursion over (value, remaining path). At a
 * document the first component is looked up by name; a missing field yields
 * one NULL visit (so {$exists: false} and {$eq: null} can match). At an array
 * with path left, the rest of the path is applied to every element that is a
 * document, and, when the component is a decimal index, also to that element
 * by position; scalar elements and nested arrays produce nothing (MongoDB
 * does not look into arrays of arrays by field name). A scalar with path left
 * yields one NULL visit. The value at the end of the path is visited as is.
 *
 * Invariants: nothing is allocated; recursion depth is bounded by the number
 * of path components; visited values point into the caller's document. The
 * first array traversed fixes array_pos for everything below it.
 */
#include "doc/path.h"

#include <string.h>

typedef struct walk {
    mf_path_visit_fn visit;
    mf_path_visit_whole_fn visit_whole; /* instead of visit (mf_path_walk_whole) */
    void *arg;
    bool stop;
} walk_t;

/*
 * component_index: parses a path component made only of digits; -1 if not
 * an index. A leading zero ("00", "01") names no position: mongod compares
 * the component with the element's name, "0", "1", ..., as index keys do
 * (index.c is_index_component).
 */
static int64_t
component_index(const char *c, size_t len)
{
    int64_t n = 0;

    if (len == 0 || len > 9 || (len > 1 && c[0] == '0'))
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (c[i] < '0' || c[i] > '9')
            return -1;
        n = n * 10 + (c[i] - '0');
    }
    return n;
}

static void walk_value(walk_t *w, const bson_value_t *v, const char *path, int32_t pos, bool by_pos);

/* whole: v was taken from an array by position at the path's last component. */
static void
emit(walk_t *w, const bson_value_t *v, int32_t pos, bool whole)
{
    if (!w->stop && (w->visit_whole != NULL ? w->visit_whole(w->arg, v, pos, whole) : w->visit(w->arg, v, pos)))
        w->stop = true;
}

/* walk_doc: applies path (non-empty) to the document held in raw data. */
static void
walk_doc(walk_t *w, const uint8_t *data, uint32_t len, const char *path, int32_t pos)
{
    const char *dot = strchr(path, '.');
    size_t clen = dot ? (size_t)(dot - path) : strlen(path);
    bson_iter_t it;

    if (!bson_iter_init_from_data(&it, data, len)) {
        emit(w, NULL, pos, false);
        return;
    }
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) == clen && memcmp(bson_iter_key(&it), path, clen) == 0) {
            walk_value(w, bson_iter_value(&it), dot ? dot + 1 : "", pos, false);
            return;
        }
    }
    emit(w, NULL, pos, false);
}

static void
walk_value(walk_t *w, const bson_value_t *v, const char *path, int32_t pos, bool by_pos)
{
    if (w->stop)
        return;
    if (*path == '\0') {
        emit(w, v, pos, by_pos);
        return;
    }
    if (v->value_type == BSON_TYPE_DOCUMENT) {
        walk_doc(w, v->value.v_doc.data, v->value.v_doc.data_len, path, pos);
        return;
    }
    if (v->value_type == BSON_TYPE_ARRAY) {
        const char *dot = strchr(path, '.');
        size_t clen = dot ? (size_t)(dot - path) : strlen(path);
        int64_t idx = component_index(path, clen);
        bson_iter_t it;
        int32_t i = 0;

        if (!bson_iter_init_from_data(&it, v->value.v_doc.data, v->value.v_doc.data_len))
            return;
        while (!w->stop && bson_iter_next(&it)) {
            const bson_value_t *e = bson_iter_value(&it);
            int32_t epos = pos >= 0 ? pos : i;
            if (idx == i)
                walk_value(w, e, dot ? dot + 1 : "", pos, true);
            if (!w->stop && e->value_type == BSON_TYPE_DOCUMENT)
                walk_doc(w, e->value.v_doc.data, e->value.v_doc.data_len, path, epos);
            i++;
        }
        return;
    }
    emit(w, NULL, pos, false);
}

void
mf_path_walk(const bson_t *doc, const char *path, mf_path_visit_fn visit, void *arg)
{
    walk_t w = {visit, NULL, arg, false};

    if (path == NULL || *path == '\0') {
        emit(&w, NULL, -1, false);
        return;
    }
    walk_doc(&w, bson_get_data(doc), doc->len, path, -1);
}

void
mf_path_walk_whole(const bson_t *doc, const char *path, mf_path_visit_whole_fn visit, void *arg)
{
    walk_t w = {NULL, visit, arg, false};

    if (path == NULL || *path == '\0') {
        emit(&w, NULL, -1, false);
        return;
    }
    walk_doc(&w, bson_get_data(doc), doc->len, path, -1);
}

bool
mf_path_get(const bson_t *doc, const char *path, bson_value_t *out)
{
    bson_value_t cur;
    const char *p = path;

    cur.value_type = BSON_TYPE_DOCUMENT;
    cur.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    cur.value.v_doc.data_len = doc->len;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t clen = dot ? (size_t)(dot - p) : strlen(p);
        bson_iter_t it;
        bool found = false;
        int64_t idx = -1;

        if (cur.value_type == BSON_TYPE_ARRAY) {
            idx = component_index(p, clen);
            if (idx < 0)
                return false;
        } else if (cur.value_type != BSON_TYPE_DOCUMENT) {
            return false;
        }
        if (!bson_iter_init_from_data(&it, cur.value.v_doc.data, cur.value.v_doc.data_len))
            return false;
        for (int64_t i = 0; bson_iter_next(&it); i++) {
            if (idx >= 0 ? i == idx
                         : (bson_iter_key_len(&it) == clen &&
                            memcmp(bson_iter_key(&it), p, clen) == 0)) {
                cur = *bson_iter_value(&it);
                found = true;
                break;
            }
        }
        if (!found)
            return false;
        if (!dot) {
            *out = cur;
            return true;
        }
        p = dot + 1;
    }
}

typedef struct leaf_ctx {
    mf_path_leaf_fn visit;
    void *arg;
    bool stop;
} leaf_ctx_t;

static bool
leaf_visit(void *arg, const bson_value_t *v, int32_t array_pos)
{
    leaf_ctx_t *x = arg;
    (void)array_pos;
    if (v == NULL)
        return false;
    if (v->value_type != BSON_TYPE_ARRAY) {
        x->stop = x->visit(x->arg, v);
        return x->stop;
    }
    bson_t arr;
    bson_iter_t it;
    if (bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len) && bson_iter_init(&it, &arr)) {
        while (!x->stop && bson_iter_next(&it))
            x->stop = x->visit(x->arg, bson_iter_value(&it));
    }
    return x->stop;
}

void
mf_path_walk_leaves(const bson_t *doc, const char *path, mf_path_leaf_fn visit, void *arg)
{
    leaf_ctx_t x = {visit, arg, false};
    mf_path_walk(doc, path, leaf_visit, &x);
}

/* The '$'-prefixed components FieldPath accepts: DBRef's, and the metadata fields mongod itself writes. */
static const char *const dollar_ok[] = {"$id", "$ref", "$db", "$sortKey", "$recordId", "$searchSortValues", "$searchScore"};

size_t
mf_path_components(const char *path)
{
    size_t n = 1;
    for (; *path; path++)
        n += *path == '.';
    return n;
}

int
mf_field_path_check(const char *path, mf_error_t *err)
{
    size_t len = strlen(path);

    if (len == 0)
        return mf_err_set(err, MF_E_Location40352, "FieldPath cannot be constructed with empty string");
    if (path[len - 1] == '.')
        return mf_err_set(err, MF_E_Location40353, "FieldPath must not end with a '.'.");
    for (const char *c = path;;) {
        const char *dot = strchr(c, '.');
        size_t clen = dot ? (size_t)(dot - c) : strlen(c);
        bool allowed = false;
        if (clen == 0)
            return mf_err_set(err, MF_E_Location15998, "FieldPath field names may not be empty strings.");
        for (size_t i = 0; c[0] == '$' && i < sizeof(dollar_ok) / sizeof(dollar_ok[0]) && !allowed; i++)
            allowed = strlen(dollar_ok[i]) == clen && memcmp(dollar_ok[i], c, clen) == 0;
        if (c[0] == '$' && !allowed)
            return mf_err_set(err, MF_E_Location16410,
                              "FieldPath field names may not start with '$'. Consider using $getField or $setField.");
        if (dot == NULL)
            return 0;
        c = dot + 1;
    }
}
