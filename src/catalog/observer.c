/*
 * observer.c: the write observer list (see observer.h).
 *
 * Transaction ends: the list installs itself as its storage's transaction
 * hook. A thread that reports a document write remembers, in a thread-local
 * pointer, which list it reported to; when that thread's transaction ends,
 * the hook calls every observer's on_txn_end and forgets. A transaction that
 * reported nothing (a read, a catalog change) costs one comparison.
 */
#include "common/alloc.h"
#include "catalog/observer.h"

#include <stdatomic.h>
#include <stdlib.h>

#define MF_MAX_OBSERVERS 16

struct mf_observers {
    mf_observer_t list[MF_MAX_OBSERVERS];
    _Atomic int n;
};

/* The list the calling thread's open transaction has reported to, or NULL. */
static _Thread_local mf_observers_t *tls_reported;

static void
txn_end(void *arg, bool committed)
{
    mf_observers_t *obs = arg;
    if (tls_reported != obs)
        return;
    tls_reported = NULL;
    int n = atomic_load(&obs->n);
    for (int i = 0; i < n; i++) {
        if (obs->list[i].on_txn_end)
            obs->list[i].on_txn_end(obs->list[i].arg, committed);
    }
}

/* Before a commit: observers with a prepare step may still veto it (replication). */
static int
txn_prepare(void *arg, mf_sess_t *s, mf_error_t *err)
{
    mf_observers_t *obs = arg;
    if (tls_reported != obs)
        return 0;
    int n = atomic_load(&obs->n);
    for (int i = 0; i < n; i++) {
        if (obs->list[i].on_txn_prepare && obs->list[i].on_txn_prepare(obs->list[i].arg, s, err) != 0)
            return -1;
    }
    return 0;
}

mf_observers_t *
mf_observers_new(mf_storage_t *st)
{
    mf_observers_t *obs = mf_calloc(1, sizeof(*obs));
    mf_storage_set_txn_hook(st, txn_end, obs);
    mf_storage_set_precommit_hook(st, txn_prepare, obs);
    return obs;
}

void
mf_observers_free(mf_observers_t *obs)
{
    free(obs);
}

int
mf_observers_add(mf_observers_t *obs, const mf_observer_t *o, mf_error_t *err)
{
    int n = atomic_load(&obs->n);
    if (n == MF_MAX_OBSERVERS)
        return mf_err_set(err, MF_E_InternalError, "too many write observers (at most %d)", MF_MAX_OBSERVERS);
    obs->list[n] = *o;
    atomic_store(&obs->n, n + 1); /* publishes the entry */
    return 0;
}

void
mf_observers_insert(mf_observers_t *obs, struct mf_coll *c, const bson_t *doc)
{
    if (obs == NULL)
        return;
    tls_reported = obs;
    int n = atomic_load(&obs->n);
    for (int i = 0; i < n; i++) {
        if (obs->list[i].on_insert)
            obs->list[i].on_insert(obs->list[i].arg, c, doc);
    }
}

void
mf_observers_update(mf_observers_t *obs, struct mf_coll *c, const bson_t *olddoc, const bson_t *newdoc)
{
    if (obs == NULL)
        return;
    tls_reported = obs;
    int n = atomic_load(&obs->n);
    for (int i = 0; i < n; i++) {
        if (obs->list[i].on_update)
            obs->list[i].on_update(obs->list[i].arg, c, olddoc, newdoc);
    }
}

void
mf_observers_delete(mf_observers_t *obs, struct mf_coll *c, const bson_t *olddoc)
{
    if (obs == NULL)
        return;
    tls_reported = obs;
    int n = atomic_load(&obs->n);
    for (int i = 0; i < n; i++) {
        if (obs->list[i].on_delete)
            obs->list[i].on_delete(obs->list[i].arg, c, olddoc);
    }
}

void
mf_observers_ddl(mf_observers_t *obs, const mf_ddl_event_t *ev)
{
    if (obs == NULL)
        return;
    int n = atomic_load(&obs->n);
    for (int i = 0; i < n; i++) {
        if (obs->list[i].on_ddl)
            obs->list[i].on_ddl(obs->list[i].arg, ev);
    }
}

/* The only state outside the engine: a property of the update this thread is making (see observer.h). */
static _Thread_local bool tls_replacing;

void
mf_observers_set_replacing(bool on)
{
    tls_replacing = on;
}

bool
mf_observers_replacing(void)
{
    return tls_replacing;
}
