/*
 * index_build.c: the scan phase of background index builds (catalog.h).
 *
 * A build has three phases, like MongoDB's hybrid builds:
 *   1. begin (exclusive catalog lock, brief): the index is added to the
 *      collection marked building, its table created. From here on every
 *      insert, update and delete of the collection maintains it.
 *   2. scan (this file; shared lock one chunk at a time): the existing
 *      documents are indexed in chunks of BUILD_CHUNK documents, each in its
 *      own transaction, in record-id order, resuming after the last record
 *      id done (the chunk halves after a write conflict, down to one
 *      document, and doubles back after each success, so a build on a
 *      collection under heavy writes redoes little and keeps moving). Each
 *      document read is reserved in the chunk's transaction,
 *      so a concurrent write of the same document conflicts with the chunk
 *      (one of them retries) instead of slipping between the read and the
 *      key insert; a key a writer already inserted is found and accepted.
 *      The reservation ends when the chunk commits, so a writer whose
 *      snapshot is older than that commit conflicts on the keys instead:
 *      removing a key the chunk wrote conflicts in WiredTiger, and a unique
 *      index's remove, which first looks for the key's owner, probes a key
 *      it does not own in its snapshot (coll_write.c index_del).
 *      Between chunks the lock is released: DDL, other collections' work and
 *      the TTL monitor are never held up for more than one chunk.
 *   3. commit (exclusive lock, brief): building is cleared and the catalog
 *      entry stored; or, on failure, the index is removed and its table
 *      dropped.
 * The collection is found again by UUID and the indexes by name for every
 * chunk, so a rename during the build is followed and a drop aborts it
 * (276 IndexBuildAborted).
 */
#include <string.h>
#include <time.h>

#include "catalog/catalog.h"
#include "catalog/coll_write.h"
#include "common/curop.h"
#include "common/log.h"

#define BUILD_CHUNK 1000
#define BUILD_MAX_CONFLICTS 100000

int
mf_coll_building_indexes(mf_coll_t *c, char *const *names, char *const *idents, int n, mf_index_t **out)
{
    int found = 0;
    for (int i = 0; i < n; i++) {
        mf_index_t *ix = mf_coll_index_by_name(c, names[i]);
        /* This request's index: same name and same table (a dropped and re-added one is another build's). */
        if (ix != NULL && ix->building && strcmp(ix->ident, idents[i]) == 0)
            out[found++] = ix;
    }
    return found;
}

int
mf_index_build_run(mf_catalog_t *cat, const uint8_t uuid[16], char *const *names, char *const *idents, int n,
                   mf_build_progress_fn fn, void *arg, mf_error_t *err)
{
    mf_sess_t *s = mf_storage_session(mf_catalog_storage(cat));
    mf_index_t *ixs[MF_MAX_INDEXES];
    int64_t after = 0, done = 0, chunk = BUILD_CHUNK;
    int conflicts = 0, rc = 0;
    bool eof = false;
    mf_build_dups_t dups = {0}; /* duplicates met on the way: the build fails with the lowest once the scan ends */

    while (!eof) {
        if ((rc = mf_curop_check_current(err)) != 0)
            goto out;
        mf_catalog_rdlock(cat);
        mf_coll_t *c = mf_catalog_coll_find_uuid(cat, uuid);
        int found = c != NULL ? mf_coll_building_indexes(c, names, idents, n, ixs) : 0;
        if (c == NULL || found != n) {
            mf_catalog_unlock(cat);
            rc = mf_err_set(err, MF_E_IndexBuildAborted, "Index build aborted: %s: the %s was dropped", names[0],
                            c == NULL ? "collection" : "index");
            goto out;
        }
        int64_t total = atomic_load(&c->approx_count), ndocs = 0;
        int r = mf_coll_index_build_chunk(s, c, ixs, n, &after, chunk, &ndocs, &eof, &dups, err);
        mf_catalog_unlock(cat);
        mf_storage_session_release(s);
        if (r == MF_CONFLICT) {
            /* A concurrent write of a document in this chunk: back off and redo the chunk. */
            if (++conflicts > BUILD_MAX_CONFLICTS) {
                rc = mf_err_set(err, MF_E_WriteConflict, "index build: too many write conflicts");
                goto out;
            }
            if (chunk > 1)
                chunk /= 2;
            struct timespec ts = {0, (long)(conflicts < 10 ? conflicts * 100000 : 1000000)};
            nanosleep(&ts, NULL);
            continue;
        }
        if (r != 0) {
            rc = -1;
            goto out;
        }
        conflicts = 0;
        if (chunk < BUILD_CHUNK)
            chunk *= 2;
        done += ndocs;
        if (fn != NULL && !fn(arg, done, eof ? done : total)) {
            /* Stopped: report the operation's own reason (11601 killOp, 11600 shutdown, 50 maxTimeMS). */
            if ((rc = mf_curop_check_current(err)) == 0)
                rc = mf_err_set(err, MF_E_Interrupted, "Index build aborted: %s: operation was interrupted", names[0]);
            goto out;
        }
    }
    if (dups.have) {
        *err = dups.err;
        rc = -1;
    }
out:
    mf_build_dups_free(&dups);
    return rc;
}
