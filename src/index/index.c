/*
 * index.c: key patterns and key generation (see index.h).
 *
 * Generation per field: every value the path reaches (walking arrays met on
 * the way, as path.h describes); a value that is itself an array contributes
 * each element. If more than one field of a compound pattern contributes
 * several values from arrays, the document is refused (171). Keys are the
 * cross product of per-field value lists, which with at most one multi-valued
 * field is that field's list with the other fields fixed. Duplicates are
 * removed so one document never holds the same key twice in an index.
 */
#include "index/index.h"

#include <stdlib.h>
#include <string.h>

#include "query/path.h"
#include "query/value.h"

#define MAX_VALUES_PER_FIELD 100000

int
mf_keypattern_parse(const bson_t *key, mf_keypattern_t *kp, mf_error_t *err)
{
    bson_iter_t it;
    memset(kp, 0, sizeof(*kp));
    if (!bson_iter_init(&it, key))
        return mf_err_set(err, MF_E_CannotCreateIndex, "bad key pattern");
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (kp->nfields >= MF_KP_MAX_FIELDS) {
            mf_keypattern_destroy(kp);
            return mf_err_set(err, MF_E_CannotCreateIndex, "Index key pattern has too many fields (max %d)",
                              MF_KP_MAX_FIELDS);
        }
        if (!mf_value_is_number(v)) {
            mf_keypattern_destroy(kp);
            return mf_err_set(err, MF_E_CannotCreateIndex, "Unknown index plugin '%s'",
                              v->value_type == BSON_TYPE_UTF8 ? v->value.v_utf8.str : "?");
        }
        kp->fields[kp->nfields] = strdup(bson_iter_key(&it));
        kp->desc[kp->nfields] = mf_value_as_double(v) < 0;
        kp->nfields++;
    }
    return 0;
}

void
mf_keypattern_destroy(mf_keypattern_t *kp)
{
    for (int i = 0; i < kp->nfields; i++)
        free(kp->fields[i]);
    kp->nfields = 0;
}

void
mf_keyset_init(mf_keyset_t *ks)
{
    memset(ks, 0, sizeof(*ks));
}

static void
keyset_clear(mf_keyset_t *ks)
{
    for (int i = 0; i < ks->n; i++)
        mf_ks_reset(&ks->keys[i]);
    ks->n = 0;
}

void
mf_keyset_destroy(mf_keyset_t *ks)
{
    for (int i = 0; i < ks->cap; i++)
        mf_ks_destroy(&ks->keys[i]);
    free(ks->keys);
    memset(ks, 0, sizeof(*ks));
}

static mf_keystring_t *
keyset_add(mf_keyset_t *ks)
{
    if (ks->n == ks->cap) {
        int ncap = ks->cap ? ks->cap * 2 : 4;
        ks->keys = realloc(ks->keys, (size_t)ncap * sizeof(*ks->keys));
        for (int i = ks->cap; i < ncap; i++)
            mf_ks_init(&ks->keys[i]);
        ks->cap = ncap;
    }
    mf_keystring_t *k = &ks->keys[ks->n++];
    mf_ks_reset(k);
    return k;
}

/* Values gathered for one field of the pattern. */
typedef struct field_vals {
    bson_value_t *v; /* borrowed (point into the document) */
    int n, cap;
    bool from_array;
    bool any_present;
    bool overflow;
} field_vals_t;

static void
vals_push(field_vals_t *fv, const bson_value_t *v)
{
    if (fv->n >= MAX_VALUES_PER_FIELD) {
        fv->overflow = true;
        return;
    }
    if (fv->n == fv->cap) {
        fv->cap = fv->cap ? fv->cap * 2 : 4;
        fv->v = realloc(fv->v, (size_t)fv->cap * sizeof(*fv->v));
    }
    fv->v[fv->n++] = *v;
}

static bool
gather(void *arg, const bson_value_t *v, int32_t array_pos)
{
    field_vals_t *fv = arg;
    bson_value_t nullv = {.value_type = BSON_TYPE_NULL};

    if (array_pos >= 0)
        fv->from_array = true;
    if (v == NULL) {
        vals_push(fv, &nullv);
        return false;
    }
    fv->any_present = true;
    if (v->value_type == BSON_TYPE_ARRAY) {
        bson_t arr;
        bson_iter_t it;
        int count = 0;
        fv->from_array = true;
        if (bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len) && bson_iter_init(&it, &arr)) {
            while (bson_iter_next(&it)) {
                vals_push(fv, bson_iter_value(&it));
                count++;
            }
        }
        if (count == 0) {
            bson_value_t undef = {.value_type = BSON_TYPE_UNDEFINED};
            vals_push(fv, &undef);
        }
        return false;
    }
    vals_push(fv, v);
    return false;
}

int
mf_index_keys(const mf_keypattern_t *kp, bool sparse, const bson_t *doc, mf_keyset_t *out, bool *skip,
              bool *multikey, mf_error_t *err)
{
    field_vals_t fv[MF_KP_MAX_FIELDS];
    int multi_field = -1, ret = 0;
    bool any_present = false;

    keyset_clear(out);
    *skip = false;
    *multikey = false;
    memset(fv, 0, sizeof(fv));
    for (int i = 0; i < kp->nfields; i++) {
        mf_path_walk(doc, kp->fields[i], gather, &fv[i]);
        if (fv[i].n == 0) {
            bson_value_t nullv = {.value_type = BSON_TYPE_NULL};
            vals_push(&fv[i], &nullv);
        }
        if (fv[i].any_present)
            any_present = true;
        if (fv[i].overflow) {
            ret = mf_err_set(err, MF_E_CannotCreateIndex, "too many index keys for field '%s'", kp->fields[i]);
            goto done;
        }
        if (fv[i].from_array && fv[i].n > 1) {
            if (multi_field >= 0) {
                ret = mf_err_set(err, MF_E_CannotIndexParallelArrays,
                                 "cannot index parallel arrays [%s] [%s]", kp->fields[i], kp->fields[multi_field]);
                goto done;
            }
            multi_field = i;
        }
    }
    if (sparse && !any_present) {
        *skip = true;
        goto done;
    }
    int nkeys = multi_field >= 0 ? fv[multi_field].n : 1;
    for (int k = 0; k < nkeys; k++) {
        mf_keystring_t *key = keyset_add(out);
        for (int i = 0; i < kp->nfields; i++) {
            const bson_value_t *v = (i == multi_field) ? &fv[i].v[k] : &fv[i].v[0];
            if (mf_ks_append_value(key, v, kp->desc[i], err) != 0) {
                ret = -1;
                goto done;
            }
        }
        /* Drop a key equal to one already generated. */
        for (int j = 0; j < out->n - 1; j++) {
            if (out->keys[j].len == key->len && memcmp(out->keys[j].data, key->data, key->len) == 0) {
                out->n--;
                break;
            }
        }
    }
    *multikey = out->n > 1 || multi_field >= 0;
done:
    for (int i = 0; i < kp->nfields; i++)
        free(fv[i].v);
    return ret;
}

int
mf_index_key_of_value(const bson_value_t *v, bool desc, mf_keystring_t *out, mf_error_t *err)
{
    mf_ks_reset(out);
    return mf_ks_append_value(out, v, desc, err);
}
