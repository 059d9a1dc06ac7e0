/*
 * catalog.h: databases, collections and index specs, persisted in WiredTiger.
 *
 * Every collection has one entry in table:_mf_catalog, keyed by namespace
 * ("db.coll"), holding BSON:
 *
 *   { ns, db, name, uuid: BinData(4), ident: "coll-<hex>",
 *     options: {...as given to create...},
 *     indexes: [ { spec: {v: 2, key: {...}, name: "...", <every other option
 *                 verbatim>}, ident: "index-<hex>", multikey: bool,
 *                 ridInKey?: true, keyFormat?: 2 | 3 } ] }
 *
 * keyFormat 2: the index's keys hold decimals exactly (index/keystring.c);
 * an entry without it was written before and its index keeps format 1
 * (mf_keypattern_t.legacy_decimals) for as long as it exists. keyFormat 3
 * (every index created since session 58): format 2 keys whose entries also
 * hold the key's type bits (mf_index_t.key_types), so a covered query can
 * give each number back in its document's type.
 *
 * Index specs are stored verbatim, so an option this version does not know
 * survives a round trip through listIndexes. A database exists while it has
 * at least one collection. Each collection's count and size live apart, in
 * table:_mf_sizes keyed by its ident (see catalog.c).
 *
 * Concurrency: locks per collection. A thread opens a lock session with
 * mf_catalog_rdlock (to read or write documents) or mf_catalog_wrlock (for
 * DDL) and closes it with mf_catalog_unlock; every collection it finds
 * (mf_catalog_coll_find, _find_uuid, _coll_list) during the session is
 * locked, shared or exclusive, until the session ends, so a collection
 * cannot be dropped or changed under a reader, and DDL on one collection
 * waits only for that collection's readers, never for other collections'
 * commands. The map itself has its own lock, held only for the lookup.
 * mf_coll_t objects are owned by the catalog and valid only while the
 * caller's session holds them.
 */
#ifndef MF_CATALOG_H
#define MF_CATALOG_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/observer.h"
#include "common/error.h"
#include "index/index.h"
#include "storage/storage.h"

#define MF_MAX_INDEXES 64

typedef struct mf_index {
    char *name;
    bson_t *spec;    /* owned; the full spec as listIndexes shows it */
    char *uri;       /* "table:index-<hex>" */
    char *ident;
    mf_keypattern_t kp;
    /*
     * unique: no two documents may have the same key (the spec's unique).
     * prepare_unique: the spec's prepareUnique: no write may add a key
     * another document already has, though keys held twice before it was
     * set stay (collMod's first step to unique). Both change only under the
     * exclusive catalog lock (collMod).
     */
    bool unique;
    bool prepare_unique;
    uint32_t unique_gen; /* changed with either: a scan for duplicates that began earlier must be redone */
    /*
     * The table's layout. false: key -> 8-byte big-endian record id, one
     * entry per key value (an index created unique, and _id). true: key +
     * record id -> empty, so a value can have many entries (every other
     * index, and one collMod made unique, which keeps its layout: its
     * catalog entry says ridInKey). Where rid_in_key and unique or
     * prepare_unique are both set, writers enforce uniqueness by a probe of
     * the key's range (coll_write.c index_put_key).
     */
    bool rid_in_key;
    /*
     * keyFormat 3: each entry's value ends with the key's type bits
     * (mf_ks_typebits: the numeric types of its components), after the
     * record id of a key -> record id entry and alone in a key + record id
     * entry's value, so the key decodes into the document's own values
     * (mf_ks_decode_typed; covered queries, query/plan.h). Writers keep them
     * current: a change of type only (5 to 5.0) rewrites the entry.
     */
    bool key_types;
    bool sparse;
    bool is_id;      /* the _id index */
    /*
     * expireAfterSeconds read from spec (mf_ttl_index_seconds), -1 when spec
     * has none: the TTL observer asks for every written document. Kept in
     * step with spec by mf_index_set_spec.
     */
    int64_t expire_secs;
    /*
     * multikey: some document gave (or may have given) more than one key.
     * Set before the commit of the first multikey write (conservative: it
     * may stay set after that transaction aborts), never cleared while the
     * index lives. multikey_durable: a committed catalog entry says so, so
     * writers need not write it again (mf_catalog_index_mark_multikey).
     */
    _Atomic bool multikey;
    _Atomic bool multikey_durable;
    /*
     * mk_paths[i]: which components of field i's path held an array in a
     * document (bit p: the prefix of p + 1 components; see
     * mf_index_multikey_paths), mongod's multikey paths: set with multikey,
     * before the commit, and as conservatively; bits are never cleared.
     * mk_durable[i]: as far as a committed catalog entry says. An entry
     * written before these existed counts every component of every field.
     * The planner bounds, intersects and sorts by a field whose bits are
     * clear as on an index that is not multikey (query/plan.c).
     */
    _Atomic uint32_t mk_paths[MF_KP_MAX_FIELDS];
    _Atomic uint32_t mk_durable[MF_KP_MAX_FIELDS];
    /*
     * Being built in the background (mf_index_build_run): writers keep it
     * up to date, but queries, listIndexes, the TTL monitor and the stored
     * catalog entry leave it out until the build commits. Changed only under
     * the exclusive catalog lock.
     */
    bool building;
    /*
     * $indexStats' accesses: the client queries whose plan used it (counted
     * once per query, by query/exec.c), since since_ms (wall clock: when
     * this process loaded or created it).
     */
    _Atomic int64_t accesses;
    int64_t since_ms;
    struct mf_matcher *partial; /* partialFilterExpression, or NULL */
    /*
     * For the TTL monitor's floors (src/ttl/ttl_monitor.c): the earliest
     * Date a committed write put in this index since the monitor last read
     * it (INT64_MAX: none). Written after commit by writers, exchanged by
     * the monitor. Starts at INT64_MIN (unknown) for an index just loaded
     * or created.
     */
    _Atomic int64_t ttl_dirty_min;
    /*
     * For the TTL monitor's per-index deadlines: the earliest deadline
     * (Date + expireAfterSeconds, ms) a committed write gave this index
     * that the monitor has not taken yet (INT64_MAX: none). Lowered after
     * commit by writers, exchanged by the monitor (see "Deadlines" there).
     */
    _Atomic int64_t ttl_noted_due;
    /*
     * Range removal (mf_coll_remove_deferred): transactions left to pass
     * before this index's removals are tried as ranges again, after a
     * transaction whose entries mostly did not go as ranges (keys in random order: session ids as
     * _id, say). 0: try.
     */
    _Atomic int range_skip;
} mf_index_t;

typedef struct mf_coll {
    char *db;
    char *name;
    char *ns;
    uint8_t uuid[16];
    char *ident;
    char *uri;       /* "table:coll-<hex>" */
    bson_t *options; /* owned; as given to create (minus the command's own fields) */
    mf_index_t *indexes[MF_MAX_INDEXES];
    int nindexes;
    mf_observers_t *observers; /* the engine's write observers (set by the catalog) */
    /*
     * Per-collection lock (catalog.c "Locking"): shared while a command
     * reads or writes the collection, exclusive for DDL on it. refs counts
     * the catalog's own reference and every thread that found it; the
     * object is freed when a dropped collection's last reference goes.
     */
    pthread_rwlock_t lock;
    _Atomic int refs;
    bool dropped;
    _Atomic int64_t next_rid;
    /*
     * The range guard of the collection's indexes (storage.h): every
     * transaction that inserts an index entry enters it, so a TTL batch may
     * remove its entries as ranges (mf_coll_remove_deferred).
     */
    mf_rguard_t guard;
    /*
     * Document count and bytes of BSON, maintained by writes and kept in
     * table:_mf_sizes (flushed about once a second and at close, as mongod's
     * sizeStorer): after an unclean shutdown they may be slightly off until
     * validate recounts them (mf_catalog_coll_set_sizes).
     */
    _Atomic int64_t approx_count;
    _Atomic int64_t approx_size;
    int64_t flushed_count, flushed_size; /* last values written to _mf_sizes (the flusher's) */
    /*
     * $collStats queryExecStats (mongod's collectionScans): the client
     * queries whose plan scanned the whole collection (COLLSCAN) since this
     * process loaded or created it, and those of them that were not
     * tailable. Counted once per query by query/exec.c, on its plan's first
     * run; in memory only, as mongod's. Zero from the catalog's calloc.
     */
    _Atomic int64_t collscans;
    _Atomic int64_t collscans_nontailable;
    /*
     * Parsed from options by the catalog (at load, create and every
     * mf_catalog_coll_persist, so a collMod that replaces options is seen):
     * read them, never set them.
     */
    bool capped;
    int64_t capped_size;              /* bytes (0 = no limit) */
    int64_t capped_max;               /* documents (0 = no limit) */
    /*
     * options.size was set by collMod cappedSize and is used as stored (not
     * rounded as create rounds it); the entry's cappedExact. Changed only by
     * mf_catalog_coll_resize_capped, under the exclusive catalog lock.
     */
    bool capped_exact;
    bool is_view;                     /* options.viewOn: no documents, no indexes */
    bool is_timeseries;               /* options.timeseries: the view and its system.buckets.<name> */
    int64_t ts_expire;                /* options.expireAfterSeconds of a time-series collection, or -1 */
    bool clustered;                   /* options.clusteredIndex: its _id index is the clustered index */
    int64_t clustered_expire;         /* options.expireAfterSeconds of a clustered collection (TTL on _id), or -1 */
    bool pre_images;                  /* options.changeStreamPreAndPostImages.enabled: the oplog keeps old images */
    struct mf_matcher *validator;     /* options.validator parsed, or NULL */
    struct mf_collation *validator_coll; /* options.collation, which the validator compares under (NULL: simple) */
    int validation_level;             /* MF_VALIDATION_STRICT / _MODERATE / _OFF */
    int validation_action;            /* MF_VALIDATION_ERROR / _WARN */
    /*
     * State a higher layer keeps with the collection (the open buckets of a
     * time-series collection): set once under ts_mu by its owner, freed with
     * the collection by ts_state_free. ts_mu also guards installing
     * index_filters below.
     */
    pthread_mutex_t ts_mu;
    void *ts_state;
    void (*ts_state_free)(void *);
    /*
     * The query layer's index filters for this collection (query/index_filter.c,
     * in memory only, as mongod's): installed once under ts_mu, read without
     * it (NULL: none ever set), freed with the collection by index_filters_free.
     */
    void *_Atomic index_filters;
    void (*index_filters_free)(void *);
} mf_coll_t;

enum { MF_VALIDATION_STRICT = 0, MF_VALIDATION_MODERATE = 1, MF_VALIDATION_OFF = 2 };
enum { MF_VALIDATION_ERROR = 0, MF_VALIDATION_WARN = 1 };

/*
 * mf_coll_options_check: validates collection options as create and collMod
 * accept them (validator parses, validationLevel / validationAction known,
 * capped size, view definition). collmod: a validator that does not parse
 * gets collMod's context ("Parsing of collection validator failed :: caused
 * by :: ..."), as mongod's parseValidator; create's error is bare. Returns 0
 * or -1 with err.
 */
int mf_coll_options_check(const bson_t *options, bool collmod, mf_error_t *err) MF_WUR;

/*
 * mf_coll_validator_allowed: whether collection db.name (UUID uuid) may have
 * the validator in options (none, or empty, always may), as mongod's
 * collection_impl.cpp checkValidatorCanBeUsedOnNs: not on a system.*
 * collection (system.buckets.* aside), not in admin, local or config
 * (config.settings aside); 72 InvalidOptions. Returns 0 or -1 with err.
 */
int mf_coll_validator_allowed(const char *db, const char *name, const uint8_t uuid[16], const bson_t *options,
                              mf_error_t *err) MF_WUR;

typedef struct mf_catalog mf_catalog_t;

/*
 * mf_catalog_open: loads the catalog from storage (creating its tables):
 * every entry, each collection's stored count and size (a full count only for
 * a collection without one), its next record id (one cursor step), and drops
 * coll-* / index-* tables that no entry names (left by a crash or a failed
 * drop). A storage error fails the open with err set and a log line; nothing
 * is half-loaded. Starts the once-a-second size flush.
 */
int mf_catalog_open(mf_storage_t *st, mf_catalog_t **out, mf_error_t *err) MF_WUR;
/* mf_catalog_close: stops the size flush, writes the sizes (synced), frees everything. */
void mf_catalog_close(mf_catalog_t *cat);

/*
 * mf_catalog_flush_sizes: writes every collection's count and size that
 * changed since the last flush to table:_mf_sizes. Takes the lock shared.
 * Returns 0 or -1 with err.
 */
int mf_catalog_flush_sizes(mf_catalog_t *cat, bool durable, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_coll_set_sizes: replaces c's count and size with recounted
 * values (validate). Caller holds the write lock, so no write is in flight.
 */
void mf_catalog_coll_set_sizes(mf_coll_t *c, int64_t count, int64_t size);

/*
 * mf_catalog_index_mark_multikey: records that ix of c is multikey, called by
 * a writer inside its transaction on s (catalog lock shared) before it writes
 * a document that gives ix more than one key, with the document's multikey
 * paths mk (ix->kp.nfields entries, mf_index_multikey_paths). Sets
 * ix->multikey and ors mk into ix->mk_paths at once and, until a committed
 * entry says so (or this transaction wrote one that does), rewrites c's
 * catalog entry in the same transaction, so the flag and paths commit (or
 * abort) with the document. Two
 * writers doing it at once conflict: one gets MF_CONFLICT and retries.
 * Returns 0, MF_CONFLICT, or -1 with err.
 */
int mf_catalog_index_mark_multikey(mf_sess_t *s, mf_coll_t *c, mf_index_t *ix, const uint32_t *mk,
                                   mf_error_t *err) MF_WUR;

/*
 * mf_catalog_db_drop: drops every collection of db in one catalog
 * transaction (all or none). Write lock held. *ndropped gets how many.
 */
int mf_catalog_db_drop(mf_catalog_t *cat, const char *db, int *ndropped, mf_error_t *err) MF_WUR;
mf_storage_t *mf_catalog_storage(mf_catalog_t *cat);

/*
 * mf_catalog_set_observers: the write observers every collection reports to
 * (document writes from coll_write.c, DDL from this module). Set once, before
 * serving. mf_catalog_observers returns it.
 */
void mf_catalog_set_observers(mf_catalog_t *cat, mf_observers_t *obs);

/*
 * mf_catalog_set_ddl_gate: fn runs before every catalog change begins its
 * transaction (create, drop, rename, index builds and drops, collMod ...);
 * non-zero fails the change with err. done runs once a transaction fn let
 * through has committed or rolled back. The engine's fsync lock waits in
 * fn and counts the changes in flight between the two. Set once, before
 * serving.
 */
void mf_catalog_set_ddl_gate(mf_catalog_t *cat, int (*fn)(void *arg, mf_error_t *err), void (*done)(void *arg),
                             void *arg);
mf_observers_t *mf_catalog_observers(mf_catalog_t *cat);

/*
 * mf_catalog_session_end_all: ends the calling thread's lock session if one
 * is still open (releasing every collection it holds) and says whether one
 * was. The command layer calls it after each command as a safety net: a
 * handler that returned without unlocking must not leave collections locked.
 */
bool mf_catalog_session_end_all(void);

/*
 * mf_catalog_session_hold: opens a shared lock session on the calling thread
 * that the commands it runs next do not end (their lock/unlock pairs nest
 * inside it): a multi-document transaction keeps the collections it touched
 * until it commits or aborts, as mongod's transaction keeps its intent
 * locks, so no DDL changes them under it. In it, a write that would create
 * its collection fails with 263 (the transaction creates it beforehand).
 * mf_catalog_session_unhold ends it, releasing them all.
 */
void mf_catalog_session_hold(mf_catalog_t *cat);
void mf_catalog_session_unhold(void);

/* mf_catalog_session_has: whether the calling thread's lock session holds db.name (its name as held). */
bool mf_catalog_session_has(const char *db, const char *name);
void mf_catalog_rdlock(mf_catalog_t *cat);
void mf_catalog_wrlock(mf_catalog_t *cat);
void mf_catalog_unlock(mf_catalog_t *cat);

/*
 * Collection lock figures since the catalog opened, for serverStatus's
 * locks and globalLock sections: index 0 the shared lock (reads and
 * document writes; MongoDB's mode S, "R"), 1 the exclusive one (DDL; mode
 * X, "W"). acquired counts locks taken, waits those that were not free at
 * once, wait_us the microseconds those waited, waiting the threads waiting
 * now. mf_catalog_lock_stats reads them (relaxed: each figure is exact,
 * the set is not one instant's). Any thread, no lock session needed.
 */
typedef struct mf_lock_stats {
    int64_t acquired[2], waits[2], wait_us[2], waiting[2];
} mf_lock_stats_t;
void mf_catalog_lock_stats(mf_catalog_t *cat, mf_lock_stats_t *out);

/*
 * mf_catalog_version: a counter that changes whenever a collection is
 * added, dropped or renamed, or its catalog entry (options, indexes, an
 * index build's end) is rewritten. What a reader derives from the catalog
 * and keeps (the TTL monitor's list of TTL indexes) stays valid while this
 * has not moved; read it before deriving, so a change made meanwhile is
 * seen next time. No lock needed.
 */
uint64_t mf_catalog_version(mf_catalog_t *cat);

/* mf_catalog_coll_find: the collection db.name, or NULL. Caller holds the lock. */
mf_coll_t *mf_catalog_coll_find(mf_catalog_t *cat, const char *db, const char *name);

/*
 * mf_catalog_coll_list: calls fn for every collection of db (all databases if
 * db is NULL), in namespace order. Caller holds the lock.
 */
void mf_catalog_coll_list(mf_catalog_t *cat, const char *db, void (*fn)(void *arg, mf_coll_t *c), void *arg);

/*
 * mf_catalog_coll_visit: as mf_catalog_coll_list, but each collection is
 * locked only while fn runs (fn must not keep the pointer). For sweeps such
 * as the TTL monitor's: holding every collection at once would block a DDL
 * that locks two of them (a rename over a target) and could form a cycle.
 */
void mf_catalog_coll_visit(mf_catalog_t *cat, const char *db, void (*fn)(void *arg, mf_coll_t *c), void *arg);

/*
 * mf_catalog_name_tables: rewrites each "table:<ident>" in msg (a
 * NUL-terminated message in a buffer of cap bytes, such as mf_error_t's)
 * that names one of cat's tables as a user knows it: "collection db.c" or
 * "index 'k_1' of db.c". Storage messages (TooManyFilesOpen) name the table
 * they could not open; the names live here. A table no collection names is
 * left as it is, and a rewrite that would not fit is cut at cap. Visits
 * every collection (mf_catalog_coll_visit): call with none held.
 */
void mf_catalog_name_tables(mf_catalog_t *cat, char *msg, size_t cap);

/*
 * mf_catalog_coll_find_pair: finds db.name (returned) and db2.name2 (in
 * *second), locking them in namespace order, as every multi-collection
 * session does, so two DDLs or a DDL and a listing never wait on each other
 * in a cycle. Either may be NULL (missing, or a bounded wait gave up: see
 * mf_catalog_lock_timed_out). Caller holds the lock.
 */
mf_coll_t *mf_catalog_coll_find_pair(mf_catalog_t *cat, const char *db, const char *name, const char *db2,
                                     const char *name2, mf_coll_t **second);

/* mf_catalog_lock_timed_out: true once a bounded wait of this thread's DDL session gave up. */
bool mf_catalog_lock_timed_out(void);

/* mf_catalog_db_is_internal: whether db is admin, config or local (mongod's NamespaceString::isOnInternalDb). */
bool mf_catalog_db_is_internal(const char *db);
/*
 * mf_catalog_names: calls fn with every collection's names and UUID, under
 * the map lock only: no collection is locked, so it never waits for a
 * command or DDL (for status reports: serverStatus runs on the fast lane).
 * The strings are valid during the call; fn must not block or call into the
 * catalog. No lock session needed.
 */
void mf_catalog_names(mf_catalog_t *cat, void (*fn)(void *arg, const char *db, const char *name, const uint8_t uuid[16]),
                      void *arg);

/*
 * mf_catalog_drop_where: a start-up sweep. Drops every collection that
 * candidate accepts (judged while the catalog is listed: it must not call
 * the catalog) and then doomed accepts (judged again under the exclusive
 * session of its drop, where it may look other collections up; NULL
 * accepts all), each in its own exclusive session. Each drop is logged
 * with why; a failed one is logged and the sweep goes on. Call with no
 * lock session open.
 */
void mf_catalog_drop_where(mf_catalog_t *cat, bool (*candidate)(const mf_coll_t *c),
                           bool (*doomed)(mf_catalog_t *cat, const mf_coll_t *c), const char *why);

/*
 * mf_catalog_coll_acquire: opens a shared lock session and finds db.name
 * (*out NULL when missing); with create, a missing collection is created
 * first under a short exclusive session (another thread creating it first
 * is fine). On return the thread holds a shared lock session, failed or
 * not: the caller ends it with mf_catalog_unlock. 0, or -1 with err.
 */
int mf_catalog_coll_acquire(mf_catalog_t *cat, const char *db, const char *name, bool create, mf_coll_t **out,
                            mf_error_t *err) MF_WUR;

/*
 * mf_catalog_has_collations: false while no collection or view of this
 * catalog has ever had a default collation, so commands can skip looking
 * for one (a cheap relaxed read; it never turns false again).
 */
bool mf_catalog_has_collations(mf_catalog_t *cat);

/*
 * mf_catalog_coll_create: creates db.name with options (may be NULL) and its
 * _id index. Caller holds the write lock. NamespaceExists (48) if present.
 * Options with viewOn make a view: a catalog entry (and an empty record
 * table) without indexes, whose definition is also written into db's
 * system.views (created first when missing) in the same transaction.
 */
int mf_catalog_coll_create(mf_catalog_t *cat, const char *db, const char *name, const bson_t *options,
                           mf_coll_t **out, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_coll_drop: removes the collection, its indexes and their
 * tables. A view's document leaves system.views in the same transaction;
 * dropping system.views drops every view of its database with it. Write
 * lock held.
 */
int mf_catalog_coll_drop(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_coll_drop_if_empty: drops c (as mf_catalog_coll_drop) only when
 * its record table holds no committed document. Write lock held, so no
 * writer is in flight. Returns 1 dropped, 0 kept (not empty), -1 with err.
 */
int mf_catalog_coll_drop_if_empty(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err) MF_WUR;

/* mf_catalog_coll_rename: renames c to to_db.to_name (must not exist). Write lock held. */
int mf_catalog_coll_rename(mf_catalog_t *cat, mf_coll_t *c, const char *to_db, const char *to_name,
                           mf_error_t *err) MF_WUR;

/*
 * mf_catalog_coll_rename_replace: renames c to to_db.to_name, dropping target
 * (the collection now there, may be NULL) in the same transaction
 * (renameCollection with dropTarget). Write lock held.
 */
int mf_catalog_coll_rename_replace(mf_catalog_t *cat, mf_coll_t *c, mf_coll_t *target, const char *to_db,
                                   const char *to_name, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_coll_persist: rewrites c's catalog entry (after an options or
 * index change) and re-derives the parsed option fields (validator, capped,
 * view) from c->options. A bad validator fails it before anything is written.
 */
int mf_catalog_coll_persist(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_coll_resize_capped: collMod's cappedSize / cappedMax on capped
 * collection c: sets options.size to size (bytes, kept as given) unless size
 * is -1, and options.max to max unless max is -1, then persists the entry.
 * The caller checked both values. Documents beyond the new limits are
 * removed by the next insert, as mongod. Write lock held. On failure c is
 * as it was. Returns 0 or -1 with err.
 */
int mf_catalog_coll_resize_capped(mf_catalog_t *cat, mf_coll_t *c, int64_t size, int64_t max, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_index_add: adds an index built from spec (already validated by
 * the caller: has key and name) and builds it over the existing documents.
 * Write lock held. On failure nothing is left in the catalog.
 */
int mf_catalog_index_add(mf_catalog_t *cat, mf_coll_t *c, const bson_t *spec, mf_error_t *err) MF_WUR;

/*
 * mf_build_progress_fn: called by an index build after each chunk of
 * documents with the number scanned and the collection's approximate
 * count. Returning false stops the build (11601 Interrupted).
 */
typedef bool (*mf_build_progress_fn)(void *arg, int64_t done, int64_t total);

/*
 * mf_catalog_index_add_progress: mf_catalog_index_add, reporting progress to
 * fn (may be NULL) and stopping when it returns false. On any failure
 * (duplicate key, parallel arrays, interruption) the index's table is dropped
 * and nothing is left in the catalog.
 */
int mf_catalog_index_add_progress(mf_catalog_t *cat, mf_coll_t *c, const bson_t *spec, mf_build_progress_fn fn,
                                  void *arg, mf_error_t *err) MF_WUR;

/*
 * Background index builds (catalog/index_build.c drives them):
 *   mf_catalog_index_begin  (write lock) adds an index built from spec to c
 *                           with building set and creates its table; nothing
 *                           is stored in the catalog yet.
 *   mf_catalog_index_commit (write lock) clears building on ixs[0..n) and
 *                           stores c's entry (one transaction); reports DDL.
 *   mf_catalog_index_abort  (write lock) removes a building index and drops
 *                           its table.
 * mf_catalog_coll_find_uuid: the collection with that UUID, or NULL (any lock).
 */
int mf_catalog_index_begin(mf_catalog_t *cat, mf_coll_t *c, const bson_t *spec, mf_index_t **out,
                           mf_error_t *err) MF_WUR;
int mf_catalog_index_commit(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *const *ixs, int n, mf_error_t *err) MF_WUR;
void mf_catalog_index_abort(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix);
mf_coll_t *mf_catalog_coll_find_uuid(mf_catalog_t *cat, const uint8_t uuid[16]);

/*
 * mf_index_set_spec: replaces ix's spec by spec (ownership passes to ix) and
 * refreshes what is read from it at every write (expire_secs); returns the
 * old spec, which the caller owns. Exclusive catalog lock held (collMod).
 */
bson_t *mf_index_set_spec(mf_index_t *ix, bson_t *spec);

/*
 * mf_coll_building_indexes: the indexes of c that one build request added:
 * named names[i] with table idents[i] and still building. Stores them in out
 * (room for n) and returns how many were found (fewer than n: some were
 * dropped, or dropped and added again by another request). Lock held.
 */
int mf_coll_building_indexes(mf_coll_t *c, char *const *names, char *const *idents, int n, mf_index_t **out);

/*
 * mf_index_build_run: the scan phase of a background build of the indexes
 * named names[0..n), whose tables are idents[0..n) (building: a request
 * knows its indexes by table, so an index of the same name dropped and added
 * again by another request is not taken for its own), of the collection
 * with uuid. Called with no
 * catalog lock held: it takes the shared lock for one chunk of documents at
 * a time (mf_coll_index_build_chunk), so reads, writes and other DDL go on
 * between chunks; writers keep the building indexes up to date themselves.
 * Reports progress to fn (returning false stops it with 11601) and checks
 * the calling thread's operation for interruption. Fails with 276
 * IndexBuildAborted if the collection or an index went away (dropped).
 */
int mf_index_build_run(mf_catalog_t *cat, const uint8_t uuid[16], char *const *names, char *const *idents, int n,
                       mf_build_progress_fn fn, void *arg, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_index_add_many: builds n indexes from specs (validated, distinct
 * names) and names them all in one catalog transaction: all or none. fn (may
 * be NULL) gets args[k] (args may be NULL) while index k builds. Write lock
 * held.
 */
int mf_catalog_index_add_many(mf_catalog_t *cat, mf_coll_t *c, const bson_t *const *specs, int n,
                              mf_build_progress_fn fn, void *const *args, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_validate: the validate command's check of c (catalog/validate.c),
 * appending mongod's report fields to report (ns, nInvalidDocuments,
 * nrecords, nIndexes, keysPerIndex, indexDetails, valid, warnings, errors,
 * missingIndexEntriesCount, extraIndexEntriesCount, ...). Replaces c's stored
 * count and size with the recount and stores a missing multikey flag.
 * Caller holds c exclusively (a DDL session). Returns 0, or -1 with err (a
 * storage error fails the check).
 */
int mf_catalog_validate(mf_catalog_t *cat, mf_sess_t *s, mf_coll_t *c, bson_t *report, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_reindex: rebuilds every index of c (none building) from its
 * spec into a new table, in the current key format (index/keystring.c), then
 * swaps them all in with one catalog entry rewrite and drops the old tables
 * (reIndex). Write lock held. On failure (a duplicate under the current
 * format, an interruption, a storage error) c keeps its indexes and nothing
 * new is left behind. Returns 0 or -1 with err.
 */
int mf_catalog_reindex(mf_catalog_t *cat, mf_coll_t *c, mf_error_t *err) MF_WUR;

/* mf_catalog_index_drop: drops index ix of c. Write lock held. */
int mf_catalog_index_drop(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, mf_error_t *err) MF_WUR;
/*
 * mf_catalog_index_relayout: replaces ix, an index whose entries are key ->
 * record id (rid_in_key false), by a copy whose entries are key + record id
 * and whose spec is spec (collMod's forceNonUnique: such a table cannot
 * hold a value twice). Exclusive lock held; the copy reads only the index,
 * RELAYOUT_TXN entries per transaction, checking killOp and maxTimeMS.
 * The catalog entry names the copy in one write, so a crash leaves the old
 * index or the new one (the other's table is an orphan dropped at open).
 * ix is freed on success. Returns 0 or -1 with err.
 */
int mf_catalog_index_relayout(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *ix, const bson_t *spec,
                              mf_error_t *err) MF_WUR;
/*
 * mf_catalog_index_drop_many: drops the n indexes ixs of c (distinct) with one
 * catalog transaction: all or none. Write lock held. On success the
 * mf_index_t objects are freed.
 */
int mf_catalog_index_drop_many(mf_catalog_t *cat, mf_coll_t *c, mf_index_t *const *ixs, int n, mf_error_t *err) MF_WUR;

mf_index_t *mf_coll_index_by_name(mf_coll_t *c, const char *name);
/*
 * mf_key_pattern_equal: whether two key patterns are the same as mongod's
 * findIndexesByKeyPattern and hint matching compare them
 * (SimpleBSONObjComparator): the same field names in order, numbers by value
 * whatever their type ({a: 1.0} is {a: 1}), strings by bytes; any other
 * value (never in a stored key pattern) is unequal.
 */
bool mf_key_pattern_equal(const bson_t *a, const bson_t *b);
/*
 * mf_coll_indexes_by_key: how many of c's indexes have key pattern kp
 * (several can: their collation, partial filter, sparse or unique differ),
 * skipping those being built when ready_only; the first two in *first and
 * *second (NULL when fewer). Pointers valid while c's lock is held.
 */
int mf_coll_indexes_by_key(mf_coll_t *c, const bson_t *kp, bool ready_only, mf_index_t **first, mf_index_t **second);

/* mf_coll_ready_indexes: c's indexes that are not being built (what listIndexes shows). */
int mf_coll_ready_indexes(const mf_coll_t *c);

/*
 * mf_catalog_db_name_ok: whether db (len bytes, no NUL) is a name mongod's
 * DatabaseName::isValid takes: not empty, under 64 bytes, none of / \ .
 * space " (nor $ unless dollar_ok: a command's $db may be $external, a
 * database this server stores may not).
 */
bool mf_catalog_db_name_ok(const char *db, size_t len, bool dollar_ok);
/*
 * mf_catalog_check_db_name / coll_name: MongoDB's namespace rules for what
 * is stored (73 InvalidNamespace): mf_catalog_db_name_ok without $, and
 * valid UTF-8.
 */
int mf_catalog_check_db_name(const char *db, mf_error_t *err) MF_WUR;
int mf_catalog_check_coll_name(const char *db, const char *name, mf_error_t *err) MF_WUR;

/*
 * mf_catalog_tick_ts: a new Timestamp from the engine's clock (an
 * mf_ts_tick_fn, arg the catalog): the wall clock's second, and an
 * increment that makes each later than the one before (as mongod's
 * tickClusterTime), for the Timestamp(0, 0) an insert or a replacement
 * leaves the server to fill. Any thread.
 */
uint64_t mf_catalog_tick_ts(void *arg);

#endif /* MF_CATALOG_H */
