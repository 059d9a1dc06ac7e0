/*
 * validate.c: the validate command's check of one collection
 * (mf_catalog_validate, catalog.h).
 *
 * In one storage snapshot: every record is read and checked as BSON, the
 * keys each ready index should hold for it are generated and looked up
 * (missing entries), and each index's entries are counted (extra entries).
 * The stored count and size are replaced by the recount, and a multikey flag
 * that should be set but is not (data written before the flag was durable)
 * is set and stored. A storage error fails the check instead of reading as
 * the end of the data. Every 1024 records or index entries the check
 * yields to killOp, maxTimeMS and shutdown. The report has mongod's fields.
 */
#include <stdio.h>
#include <string.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "common/alloc.h"
#include "common/curop.h"
#include "common/fmt.h"
#include "common/log.h"
#include "doc/match.h"
#include "index/index.h"
#include "index/keystring.h"

int
mf_catalog_validate(mf_catalog_t *cat, mf_sess_t *s, mf_coll_t *c, bson_t *report, mf_error_t *err)
{
    mf_cur_t *rc = NULL;
    int64_t nrecords = 0, missing = 0, extra = 0, corrupt = 0, datasize = 0;
    int64_t expected[MF_MAX_INDEXES] = {0}, actual[MF_MAX_INDEXES] = {0};
    int64_t noncompliant = 0; /* documents the validator refuses */
    int schema_first = 0;     /* mf_coll_schema_check's answer for the first of them */
    int sret = MF_NOTFOUND; /* the first storage error of the scans (MF_NOTFOUND: none) */
    bool saw_multikey[MF_MAX_INDEXES] = {false};
    uint32_t(*saw_paths)[MF_KP_MAX_FIELDS] = mf_calloc(MF_MAX_INDEXES, sizeof(*saw_paths)); /* multikey paths seen */
    mf_keyset_t ks;
    bson_t errors, kpi, details;
    int nerrors = 0;
    char key[16];

    mf_keyset_init(&ks);
    bson_init(&errors);
    /* One snapshot for the whole check, so concurrent writes cannot make it disagree with itself. */
    if (mf_txn_begin(s, err) != 0)
        goto err_free;
    if (mf_cur_open(s, c->uri, &rc, err) != 0) {
        mf_txn_abort(s);
        goto err_free;
    }
    mf_cur_t *ic[MF_MAX_INDEXES] = {0};
    for (int i = 0; i < c->nindexes; i++) {
        /* An index still being built is checked once its build has committed. */
        if (c->indexes[i]->building)
            continue;
        if (mf_cur_open(s, c->indexes[i]->uri, &ic[i], err) != 0) {
            /* An index that cannot be opened (TooManyFilesOpen, say) is not "valid": the check fails with why. */
            for (int k = 0; k < i; k++)
                mf_cur_close(ic[k]);
            mf_cur_close(rc);
            mf_txn_abort(s);
            goto err_free;
        }
    }
    int nr;
    bool interrupted = false;
    while ((nr = mf_cur_next(rc)) == 0) {
        /* A yield point every 1024 records: killOp, maxTimeMS and shutdown stop a long check. */
        if ((nrecords & 1023) == 1023 && mf_curop_check_current(err) != 0) {
            interrupted = true;
            break;
        }
        const uint8_t *v;
        size_t len;
        bson_t doc;
        int64_t rid = mf_cur_rid(rc);
        mf_cur_value(rc, &v, &len);
        nrecords++;
        datasize += (int64_t)len;
        if (!bson_init_static(&doc, v, len) || !bson_validate(&doc, BSON_VALIDATE_NONE, NULL)) {
            corrupt++;
            continue;
        }
        /*
         * validate_adaptor.cpp: a document the collection's validator refuses
         * is counted (nNonCompliantDocuments) and logged (5363500); the first
         * one decides the one message (schemaValidationFailed).
         */
        int schema = mf_coll_schema_check(c, &doc);
        if (schema != 0) {
            char ridbuf[32];
            bson_t attr;
            bson_init(&attr);
            snprintf(ridbuf, sizeof(ridbuf), "%lld", (long long)rid);
            BSON_APPEND_UTF8(&attr, "namespace", c->ns);
            BSON_APPEND_UTF8(&attr, "recordId", ridbuf);
            char *json = bson_as_relaxed_extended_json(&attr, NULL);
            if (json != NULL)
                mf_log_attr(MF_LOG_WARN, "STORAGE", 5363500, "-", "Document is not compliant with the collection's schema",
                            json);
            bson_free(json);
            bson_destroy(&attr);
            if (noncompliant++ == 0)
                schema_first = schema;
        }
        for (int i = 0; i < c->nindexes; i++) {
            mf_index_t *ix = c->indexes[i];
            bool skip = false, mk = false;
            if (ix->building)
                continue;
            mf_error_t e;
            if (ic[i] == NULL)
                continue;
            if (!mf_index_covers(ix, &doc))
                continue;
            if (mf_index_keys(&ix->kp, ix->sparse, &doc, &ks, &skip, &mk, &e) != 0 || skip)
                continue;
            saw_multikey[i] = saw_multikey[i] || mk;
            if (mk) {
                uint32_t p[MF_KP_MAX_FIELDS];
                mf_index_multikey_paths(&ix->kp, &doc, p);
                for (int f = 0; f < ix->kp.nfields; f++)
                    saw_paths[i][f] |= p[f];
            }
            for (int k = 0; k < ks.n; k++) {
                int r;
                expected[i]++;
                if (!ix->rid_in_key) {
                    r = mf_cur_search_bytes(ic[i], ks.keys[k].data, ks.keys[k].len);
                } else {
                    size_t base = ks.keys[k].len;
                    mf_ks_append_recordid(&ks.keys[k], rid);
                    r = mf_cur_search_bytes(ic[i], ks.keys[k].data, ks.keys[k].len);
                    ks.keys[k].len = base;
                }
                if (r == MF_NOTFOUND)
                    missing++;
                else if (r != 0 && sret == MF_NOTFOUND)
                    sret = r;
            }
        }
    }
    if (nr != MF_NOTFOUND && sret == MF_NOTFOUND)
        sret = nr;
    for (int i = 0; i < c->nindexes; i++) {
        if (ic[i] == NULL)
            continue;
        mf_cur_reset(ic[i]);
        while (!interrupted && (nr = mf_cur_next(ic[i])) == 0) {
            if ((++actual[i] & 1023) == 0 && mf_curop_check_current(err) != 0)
                interrupted = true;
        }
        if (nr != MF_NOTFOUND && sret == MF_NOTFOUND)
            sret = nr;
        if (actual[i] > expected[i])
            extra += actual[i] - expected[i];
        mf_cur_close(ic[i]);
    }
    mf_cur_close(rc);
    mf_txn_abort(s);
    if (interrupted)
        goto err_free;
    if (sret != MF_NOTFOUND) {
        /* A storage error is never read as the end of the data: the check fails instead of reporting a short count. */
        mf_err_set(err, sret == MF_CONFLICT ? MF_E_WriteConflict : MF_E_InternalError,
                   "validate: storage error while reading %s", c->ns);
        goto err_free;
    }
    if (nrecords != atomic_load(&c->approx_count) || datasize != atomic_load(&c->approx_size)) {
        mf_log(MF_LOG_INFO, "STORAGE", "validate %s: stored count %lld / size %lld corrected to %lld / %lld", c->ns,
               (long long)atomic_load(&c->approx_count), (long long)atomic_load(&c->approx_size),
               (long long)nrecords, (long long)datasize);
        mf_catalog_coll_set_sizes(c, nrecords, datasize);
    }
    /*
     * Recompute the multikey flags: a document giving an index several keys
     * while its flag is unset (data written before the flag was durable)
     * would make queries return it more than once. Set and persist it.
     */
    bson_t warnings;
    int nwarnings = 0;
    bson_init(&warnings);
    for (int i = 0; i < c->nindexes; i++) {
        mf_index_t *ix = c->indexes[i];
        bool paths_short = false;
        for (int f = 0; f < ix->kp.nfields; f++)
            paths_short = paths_short || (saw_paths[i][f] & ~atomic_load(&ix->mk_paths[f])) != 0;
        if (!saw_multikey[i] || (atomic_load(&ix->multikey) && !paths_short))
            continue;
        char msg[300];
        for (int f = 0; f < ix->kp.nfields; f++)
            atomic_fetch_or(&ix->mk_paths[f], saw_paths[i][f]);
        if (atomic_load(&ix->multikey)) {
            snprintf(msg, sizeof(msg), "index %s has multikey paths it was not marked with: paths set", ix->name);
        } else {
            atomic_store(&ix->multikey, true);
            snprintf(msg, sizeof(msg), "index %s is multikey but was not marked so: flag set", ix->name);
        }
        snprintf(key, sizeof(key), "%d", nwarnings++);
        BSON_APPEND_UTF8(&warnings, key, msg);
        mf_log(MF_LOG_WARN, "STORAGE", "validate %s: %s", c->ns, msg);
    }
    if (nwarnings > 0 && mf_catalog_coll_persist(cat, c, err) != 0) {
        bson_destroy(&warnings);
        goto err_free;
    }
    if (noncompliant > 0) {
        /* schemaValidationFailed: a warning under validationAction "warn", else an error (not valid). */
        static const char schema_msg[] =
            "Detected one or more documents not compliant with the collection's schema. Check logs for log id 5363500.";
        if (schema_first == 1) {
            snprintf(key, sizeof(key), "%d", nwarnings++);
            BSON_APPEND_UTF8(&warnings, key, schema_msg);
        } else {
            snprintf(key, sizeof(key), "%d", nerrors++);
            BSON_APPEND_UTF8(&errors, key, schema_msg);
        }
    }
    bson_init(&kpi);
    bson_init(&details);
    for (int i = 0; i < c->nindexes; i++) {
        bson_t d;
        if (c->indexes[i]->building)
            continue;
        bool ok = actual[i] == expected[i];
        mf_append_number(&kpi, c->indexes[i]->name, actual[i]);
        BSON_APPEND_DOCUMENT_BEGIN(&details, c->indexes[i]->name, &d);
        BSON_APPEND_BOOL(&d, "valid", ok);
        bson_append_document_end(&details, &d);
        if (!ok) {
            char msg[256];
            snprintf(msg, sizeof(msg), "index %s has %lld entries but the documents give %lld keys",
                     c->indexes[i]->name, (long long)actual[i], (long long)expected[i]);
            snprintf(key, sizeof(key), "%d", nerrors++);
            BSON_APPEND_UTF8(&errors, key, msg);
        }
    }
    if (missing > 0) {
        snprintf(key, sizeof(key), "%d", nerrors++);
        BSON_APPEND_UTF8(&errors, key, "index entries are missing for some documents");
    }
    if (corrupt > 0) {
        snprintf(key, sizeof(key), "%d", nerrors++);
        BSON_APPEND_UTF8(&errors, key, "corrupt records found");
    }
    bool valid = nerrors == 0;
    /* Counts as mongod's appendNumber writes them: an int while it fits (scripts add to them). */
    bson_t empty = BSON_INITIALIZER;
    BSON_APPEND_UTF8(report, "ns", c->ns);
    bson_append_binary(report, "uuid", 4, BSON_SUBTYPE_UUID, c->uuid, 16);
    mf_append_number(report, "nInvalidDocuments", corrupt);
    mf_append_number(report, "nNonCompliantDocuments", noncompliant);
    mf_append_number(report, "nrecords", nrecords);
    BSON_APPEND_INT32(report, "nIndexes", mf_coll_ready_indexes(c));
    BSON_APPEND_DOCUMENT(report, "keysPerIndex", &kpi);
    BSON_APPEND_DOCUMENT(report, "indexDetails", &details);
    BSON_APPEND_BOOL(report, "valid", valid);
    BSON_APPEND_BOOL(report, "repaired", false);
    BSON_APPEND_ARRAY(report, "warnings", &warnings);
    BSON_APPEND_ARRAY(report, "errors", &errors);
    /* mongod's arrays list each entry; this check counts them (the counts and errors say how many). */
    BSON_APPEND_ARRAY(report, "extraIndexEntries", &empty);
    BSON_APPEND_ARRAY(report, "missingIndexEntries", &empty);
    mf_append_number(report, "missingIndexEntriesCount", missing);
    mf_append_number(report, "extraIndexEntriesCount", extra);
    BSON_APPEND_ARRAY(report, "corruptRecords", &empty);
    mf_keyset_destroy(&ks);
    bson_destroy(&kpi);
    bson_destroy(&details);
    bson_destroy(&errors);
    bson_destroy(&warnings);
    free(saw_paths);
    return 0;

err_free:
    mf_keyset_destroy(&ks);
    bson_destroy(&errors);
    free(saw_paths);
    return -1;
}
