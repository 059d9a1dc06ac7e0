/*
 * unit_catalog.h: helpers for the unit tests that drive the catalog layer
 * directly, below the command layer (header-only, as unit_util.h). Each
 * fails the calling test on any error.
 */
#ifndef MF_UNIT_CATALOG_H
#define MF_UNIT_CATALOG_H

#include <criterion/criterion.h>
#include <stdbool.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "storage/storage.h"

/* Adds the index spec json (extended JSON) to c as the catalog takes it, without createIndexes' checks. */
static inline void
unit_index_add(mf_catalog_t *cat, mf_coll_t *c, const char *json)
{
    bson_error_t berr;
    mf_error_t err = {0};
    bson_t *spec = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(spec, "bad spec %s", json);
    mf_catalog_wrlock(cat);
    cr_assert_eq(mf_catalog_index_add(cat, c, spec, &err), 0, "index %s: %s", json, err.msg);
    mf_catalog_unlock(cat);
    bson_destroy(spec);
}

/* Inserts the document json into c in one transaction; commits it, or aborts it when commit is false. */
static inline void
unit_insert_json(mf_storage_t *st, mf_catalog_t *cat, mf_coll_t *c, const char *json, bool commit)
{
    bson_error_t berr;
    mf_error_t err = {0};
    mf_sess_t *s = mf_storage_session(st);
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(doc, "bad doc %s", json);
    mf_catalog_rdlock(cat);
    cr_assert_eq(mf_txn_begin(s, &err), 0);
    cr_assert_eq(mf_coll_insert(s, c, doc, NULL, &err), 0, "insert %s: %s", json, err.msg);
    if (commit)
        cr_assert_eq(mf_txn_commit(s, false, &err), 0, "commit: %s", err.msg);
    else
        mf_txn_abort(s);
    mf_storage_session_release(s);
    mf_catalog_unlock(cat);
    bson_destroy(doc);
}

#endif /* MF_UNIT_CATALOG_H */
