/*
 * test_check.c: unit tests for src/doc/check.c, what a document must satisfy
 * to be stored: its nesting depth (MF_MAX_STORED_DEPTH levels kept, one more
 * refused with 15 Overflow) and _id's rules, both for documents long enough
 * to be walked and for short ones, which cannot nest too deep and only have
 * their _id checked.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "doc/check.h"

/*
 * A document nested `levels` deep below the top ({"": {"": ... {}}}), with
 * empty field names: the shortest document of that depth, 5 + 7 x levels
 * bytes. pad, if not NULL, adds a top-level string field of that value.
 */
static void
nested(bson_t *out, int levels, const char *pad)
{
    bson_t *chain = bson_new();
    for (int i = 0; i < levels; i++) {
        bson_t *up = bson_new();
        bson_append_document(up, "", 0, chain);
        bson_destroy(chain);
        chain = up;
    }
    bson_init(out);
    bson_concat(out, chain);
    if (pad != NULL)
        BSON_APPEND_UTF8(out, "pad", pad);
    bson_destroy(chain);
}

static int
check(const bson_t *doc, mf_error_t *err)
{
    memset(err, 0, sizeof(*err));
    return mf_check_doc_for_storage(doc, err);
}

Test(check, depth_limit_on_the_shortest_documents)
{
    bson_t ok, deep;
    mf_error_t err;

    /* 179 nested levels: depth 180 with the top, the most a stored document may have. */
    nested(&ok, MF_MAX_STORED_DEPTH - 1, NULL);
    cr_assert_eq(ok.len, 5 + 7 * (MF_MAX_STORED_DEPTH - 1));
    cr_assert_eq(check(&ok, &err), 0, "%s", err.msg);
    /* One more: refused, and it is the shortest such document, so no shortcut may skip it. */
    nested(&deep, MF_MAX_STORED_DEPTH, NULL);
    cr_assert_eq(deep.len, 5 + 7 * MF_MAX_STORED_DEPTH);
    cr_assert_neq(check(&deep, &err), 0);
    cr_assert_eq(err.code, MF_E_Overflow);
    bson_destroy(&ok);
    bson_destroy(&deep);
}

Test(check, depth_limit_on_longer_documents)
{
    char pad[4096];
    bson_t ok, deep;
    mf_error_t err;

    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    nested(&ok, MF_MAX_STORED_DEPTH - 1, pad);
    cr_assert_eq(check(&ok, &err), 0, "%s", err.msg);
    nested(&deep, MF_MAX_STORED_DEPTH, pad);
    cr_assert_neq(check(&deep, &err), 0);
    cr_assert_eq(err.code, MF_E_Overflow);
    bson_destroy(&ok);
    bson_destroy(&deep);
}

/* _id's rules hold for a short document (no walk) and for a long one (the walk) alike. */
static void
id_rules(const char *pad)
{
    mf_error_t err;
    bson_t arr, sub, rx, dollar, fine, kids;

    bson_init(&arr);
    BSON_APPEND_UTF8(&arr, "a", "b");
    BSON_APPEND_ARRAY_BEGIN(&arr, "_id", &kids);
    BSON_APPEND_INT32(&kids, "0", 1);
    bson_append_array_end(&arr, &kids);
    if (pad)
        BSON_APPEND_UTF8(&arr, "pad", pad);
    cr_assert_neq(check(&arr, &err), 0);
    cr_assert_eq(err.code, MF_E_BadValue, "an array _id: %d %s", err.code, err.msg);

    bson_init(&rx);
    BSON_APPEND_REGEX(&rx, "_id", "^a", "");
    if (pad)
        BSON_APPEND_UTF8(&rx, "pad", pad);
    cr_assert_neq(check(&rx, &err), 0);
    cr_assert_eq(err.code, MF_E_BadValue);

    bson_init(&dollar);
    BSON_APPEND_DOCUMENT_BEGIN(&dollar, "_id", &sub);
    BSON_APPEND_INT32(&sub, "$x", 1);
    bson_append_document_end(&dollar, &sub);
    if (pad)
        BSON_APPEND_UTF8(&dollar, "pad", pad);
    cr_assert_neq(check(&dollar, &err), 0);
    cr_assert_eq(err.code, MF_E_DollarPrefixedFieldName);

    /* $-prefixed names elsewhere are stored (MongoDB 5.0+), and so is a plain document _id. */
    bson_init(&fine);
    BSON_APPEND_DOCUMENT_BEGIN(&fine, "_id", &sub);
    BSON_APPEND_INT32(&sub, "x", 1);
    bson_append_document_end(&fine, &sub);
    BSON_APPEND_INT32(&fine, "$y", 2);
    if (pad)
        BSON_APPEND_UTF8(&fine, "pad", pad);
    cr_assert_eq(check(&fine, &err), 0, "%s", err.msg);

    bson_destroy(&arr);
    bson_destroy(&rx);
    bson_destroy(&dollar);
    bson_destroy(&fine);
}

Test(check, id_rules_short_and_long)
{
    char pad[2048];
    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    id_rules(NULL);
    id_rules(pad);
}

Test(check, too_large)
{
    mf_error_t err;
    bson_t big;
    size_t n = (size_t)MF_MAX_BSON_SIZE;
    char *s = malloc(n);
    memset(s, 'z', n - 1);
    s[n - 1] = '\0';
    bson_init(&big);
    BSON_APPEND_UTF8(&big, "s", s);
    cr_assert_neq(check(&big, &err), 0);
    cr_assert_eq(err.code, MF_E_BSONObjectTooLarge);
    bson_destroy(&big);
    free(s);
}

/* A test clock: 100 seconds, increments counting up from 1. */
static uint64_t
test_tick(void *arg)
{
    uint32_t *inc = arg;
    return (uint64_t)100 << 32 | ++*inc;
}

/* fixDocumentForInsert: _id first; each top-level Timestamp(0, 0) but _id's filled, in order; nested ones kept. */
Test(check, insert_fills_empty_timestamps)
{
    bson_t *doc = BCON_NEW("a", BCON_TIMESTAMP(0, 0), "_id", BCON_TIMESTAMP(0, 0), "n", "{", "x", BCON_TIMESTAMP(0, 0),
                           "}", "b", BCON_TIMESTAMP(5, 0), "c", BCON_TIMESTAMP(0, 0));
    cr_assert(mf_doc_has_empty_ts(doc));
    uint32_t inc = 0;
    bson_t out;
    mf_doc_for_insert(doc, test_tick, &inc, &out);
    bson_iter_t it;
    uint32_t t, i;
    cr_assert(bson_iter_init(&it, &out) && bson_iter_next(&it));
    cr_assert_str_eq(bson_iter_key(&it), "_id");
    bson_iter_timestamp(&it, &t, &i);
    cr_assert(t == 0 && i == 0, "_id keeps its Timestamp(0, 0)");
    cr_assert(bson_iter_next(&it));
    bson_iter_timestamp(&it, &t, &i);
    cr_assert(t == 100 && i == 1, "a filled first");
    cr_assert(bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it), "n");
    cr_assert(bson_iter_next(&it));
    bson_iter_timestamp(&it, &t, &i);
    cr_assert(t == 5 && i == 0, "a non-empty one kept");
    cr_assert(bson_iter_next(&it));
    bson_iter_timestamp(&it, &t, &i);
    cr_assert(t == 100 && i == 2, "c filled second");
    cr_assert(!mf_doc_has_empty_ts(&out));
    bson_t *id_only = BCON_NEW("_id", BCON_TIMESTAMP(0, 0), "n", "{", "x", BCON_TIMESTAMP(0, 0), "}");
    cr_assert(!mf_doc_has_empty_ts(id_only), "_id's and nested ones do not count");
    bson_destroy(id_only);
    bson_destroy(&out);
    bson_destroy(doc);
}
