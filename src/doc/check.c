/*
 * check.c: what a document must satisfy to be stored (mf_check_doc_for_storage:
 * size, nesting depth, field names), the size every document the server
 * builds and hands on must keep (mf_check_doc_built_size), and the _id-first
 * shape every stored document has (mf_doc_with_id_first). Pure functions
 * over BSON.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fmt.h"
#include "common/limits.h"
#include "doc/check.h"
#include "doc/value.h"

/* _id's own rules (MongoDB 5.0+ stores $-prefixed field names; only _id's subfields are refused). */
static int
check_id(bson_iter_t *it, mf_error_t *err)
{
    bson_type_t t = bson_iter_type(it);
    if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
        return mf_err_set(err, MF_E_BadValue, "can't use a%s %s for _id", t == BSON_TYPE_ARRAY ? "n" : "",
                          mf_type_name(t));
    if (t == BSON_TYPE_DOCUMENT) {
        bson_iter_t child;
        bson_iter_recurse(it, &child);
        while (bson_iter_next(&child)) {
            if (bson_iter_key(&child)[0] == '$')
                return mf_err_set(err, MF_E_DollarPrefixedFieldName,
                                  "_id fields may not contain '$'-prefixed fields: %s is not valid for storage.",
                                  bson_iter_key(&child));
        }
    }
    return 0;
}

/*
 * Every level of nesting takes at least 7 bytes (a type byte, an empty
 * name's NUL, a length and a terminator) on top of the outer document's 5:
 * a document shorter than this cannot go deeper than MF_MAX_STORED_DEPTH,
 * and most documents are, so they skip the walk below.
 */
#define SMALL_DOC_BYTES (5 + 7 * MF_MAX_STORED_DEPTH)

/* One walk: the nesting depth everywhere, and _id's rules at the top level (depth 1). */
static int
check_depth(bson_iter_t *it, int depth, mf_error_t *err)
{
    while (bson_iter_next(it)) {
        if (depth == 1 && bson_iter_key_len(it) == 3 && memcmp(bson_iter_key(it), "_id", 3) == 0 &&
            check_id(it, err) != 0)
            return -1;
        if (BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) {
            bson_iter_t child;
            if (depth + 1 > MF_MAX_STORED_DEPTH)
                return mf_err_set(err, MF_E_Overflow, "Document exceeds maximum nesting depth of %d",
                                  MF_MAX_STORED_DEPTH);
            if (!bson_iter_recurse(it, &child))
                return mf_err_set(err, MF_E_InvalidBSON, "invalid embedded document");
            if (check_depth(&child, depth + 1, err) != 0)
                return -1;
        }
    }
    return 0;
}

/*
 * first_element: doc's first field as mongod's BSONElement::toString prints
 * it in a message ("_id: null", "b: \"xxx...\""), into buf (cap bytes): a
 * string of 160 bytes or more shows its first 150 and "...", as there.
 */
static void
first_element(const bson_t *doc, char *buf, size_t cap)
{
    bson_iter_t it;
    const bson_value_t *v;
    int n;

    if (!bson_iter_init(&it, doc) || !bson_iter_next(&it)) {
        snprintf(buf, cap, "EOO");
        return;
    }
    v = bson_iter_value(&it);
    n = snprintf(buf, cap, "%s: ", bson_iter_key(&it));
    if (n < 0 || (size_t)n >= cap)
        return;
    if (v->value_type == BSON_TYPE_UTF8 && v->value.v_utf8.len >= 160 && cap - (size_t)n > 160) {
        char head[151];
        memcpy(head, v->value.v_utf8.str, 150);
        head[150] = '\0';
        mf_utf8_cut_tail(head, 150); /* the message stays UTF-8 */
        snprintf(buf + n, cap - (size_t)n, "\"%s...\"", head);
    } else {
        mf_fmt_value(v, buf + n, cap - (size_t)n);
    }
}

int
mf_check_doc_built_size(const bson_t *doc, mf_error_t *err)
{
    char first[512];

    if (doc->len <= MF_MAX_BSON_INTERNAL_SIZE)
        return 0;
    first_element(doc, first, sizeof(first));
    /* BSONObj::_assertInvalid's wording, as mongod 8.0 answers it. */
    return mf_err_set(err, MF_E_BSONObjectTooLarge,
                      "BSONObj size: %u (0x%X) is invalid. Size must be between 0 and %d(%dMB) First element: %s",
                      doc->len, doc->len, MF_MAX_BSON_INTERNAL_SIZE, MF_MAX_BSON_INTERNAL_SIZE / (1024 * 1024), first);
}

int
mf_check_id_storable(const bson_value_t *id, mf_error_t *err)
{
    bson_type_t t = id->value_type;
    if (t == BSON_TYPE_ARRAY || t == BSON_TYPE_REGEX || t == BSON_TYPE_UNDEFINED)
        return mf_err_set(err, MF_E_InvalidIdField, "The '_id' value cannot be of type %s", mf_type_name(t));
    return 0;
}

int
mf_check_upsert_id(const bson_t *doc, mf_error_t *err)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, "_id") ? mf_check_id_storable(bson_iter_value(&it), err) : 0;
}

int
mf_check_doc_size(const bson_t *doc, mf_doc_write_t how, mf_error_t *err)
{
    if (doc->len <= MF_MAX_BSON_SIZE)
        return 0;
    switch (how) {
    case MF_DOC_UPDATED:
        return mf_err_set(err, MF_E_BSONObjectTooLarge, "Resulting document after update is larger than %d",
                          MF_MAX_BSON_SIZE);
    case MF_DOC_UPSERTED:
        return mf_err_set(err, MF_E_Location17420, "Document to upsert is larger than %d", MF_MAX_BSON_SIZE);
    case MF_DOC_INSERTED:
    default:
        return mf_err_set(err, MF_E_BadValue, "object to insert too large. size in bytes: %u, max size: %d", doc->len,
                          MF_MAX_BSON_SIZE);
    }
}

int
mf_check_doc_for_storage(const bson_t *doc, mf_error_t *err)
{
    bson_iter_t it;
    if (doc->len > MF_MAX_BSON_SIZE)
        return mf_err_set(err, MF_E_BSONObjectTooLarge, "object to insert too large. size in bytes: %u, max size: %d",
                          doc->len, MF_MAX_BSON_SIZE);
    if (!bson_iter_init(&it, doc))
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON document");
    if (doc->len >= SMALL_DOC_BYTES)
        return check_depth(&it, 1, err);
    /* Too short to nest too deep: only _id's rules, at the top level. */
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) == 3 && memcmp(bson_iter_key(&it), "_id", 3) == 0)
            return check_id(&it, err);
    }
    return 0;
}

/* Whether the element at it is Timestamp(0, 0). */
static bool
is_empty_ts(const bson_iter_t *it)
{
    uint32_t t, i;
    if (!BSON_ITER_HOLDS_TIMESTAMP(it))
        return false;
    bson_iter_timestamp(it, &t, &i);
    return t == 0 && i == 0;
}

bool
mf_doc_has_empty_ts(const bson_t *doc)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it)) {
        if (is_empty_ts(&it) && strcmp(bson_iter_key(&it), "_id") != 0)
            return true;
    }
    return false;
}

void
mf_doc_append_filled(bson_t *out, const bson_iter_t *it, mf_ts_tick_fn tick, void *arg)
{
    if (tick != NULL && is_empty_ts(it)) {
        uint64_t ts = tick(arg);
        bson_append_timestamp(out, bson_iter_key(it), (int)bson_iter_key_len(it), (uint32_t)(ts >> 32), (uint32_t)ts);
    } else {
        bson_append_iter(out, bson_iter_key(it), (int)bson_iter_key_len(it), it);
    }
}

void
mf_doc_for_insert(const bson_t *doc, mf_ts_tick_fn tick, void *arg, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    if (bson_iter_init_find(&it, doc, "_id")) {
        bson_append_value(out, "_id", 3, bson_iter_value(&it));
    } else {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        BSON_APPEND_OID(out, "_id", &oid);
    }
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "_id") != 0)
            mf_doc_append_filled(out, &it, tick, arg);
    }
}

/* Copies doc into out with _id first (generating an ObjectId if absent). */
void
mf_doc_with_id_first(const bson_t *doc, bson_t *out)
{
    mf_doc_for_insert(doc, NULL, NULL, out);
}

bool
mf_doc_id_is_first(const bson_t *doc)
{
    bson_iter_t it;
    return bson_iter_init(&it, doc) && bson_iter_next(&it) && strcmp(bson_iter_key(&it), "_id") == 0;
}

