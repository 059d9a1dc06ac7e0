/*
 * archive.h: archive-on-expire (SPEC I2): documents a TTL index with
 * archive: true expires are written to compressed segment files before they
 * are deleted, exactly once, and can be read back (see archive.c).
 *
 * Layout: <dir>/<uuid as 32 hex digits>/<segment number, 8 digits>.zst, one
 * directory per collection (its UUID, so a rename keeps its archive and a
 * drop removes it). A segment is a sequence of zstd frames, one per 256 KB
 * chunk of an archiving transaction's documents; a frame's content is BSON
 * documents back to back. A segment is closed when it passes the segment size, and a
 * new one started.
 *
 * Exactly once: every segment has a row in the WiredTiger table
 * table:_mf_archive (key: uuid + segment number; value: committed length,
 * documents, first and last archive time). A transaction that deletes
 * archived documents stages them (mf_archive_stage); at its commit (a
 * pre-commit step on the session, storage.h mf_txn_on_prepare) the staged
 * documents become frames, written at the segment's committed end and
 * fsynced, and the row's new length is written in that same transaction.
 * So the deletes and the new length commit together or not at all. Bytes
 * past a committed length (a transaction that rolled back, or was lost to
 * kill -9 before its commit reached the log) are never read, are overwritten
 * by the next append, and are cut off when the archive is opened.
 *
 * Threading: every function may be called from any thread; one mutex guards
 * the per-collection state. Appends to one collection are serialised by it
 * (the TTL monitor is the only writer in practice).
 */
#ifndef MF_ARCHIVE_H
#define MF_ARCHIVE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "storage/storage.h"

typedef struct mf_archive mf_archive_t;

/* Default size past which a segment is closed and a new one started. */
#define MF_ARCHIVE_SEGMENT_BYTES (64 * 1024 * 1024)

/*
 * mf_archive_open: opens (creating if needed) the archive kept in directory
 * dir with its metadata table in st, and recovers it: each segment file is
 * cut to its committed length, files and directories without a committed row
 * are removed. segment_bytes: 0 for MF_ARCHIVE_SEGMENT_BYTES. sync: fsync
 * segment files before each commit (false only for an in-memory engine).
 * Returns 0 with *out, or -1 with err. dir is copied.
 */
int mf_archive_open(mf_storage_t *st, const char *dir, int64_t segment_bytes, bool sync, mf_archive_t **out,
                    mf_error_t *err) MF_WUR;

/* mf_archive_close: frees a (NULL is fine); no transaction may have documents staged. */
void mf_archive_close(mf_archive_t *a);

/*
 * mf_archive_stage: adds doc (copied) to what session s's current transaction
 * archives for collection uuid. Call inside the transaction that deletes doc.
 * The first call in a transaction registers the session's pre-commit step and
 * an end callback; if the transaction rolls back, the staged documents are
 * forgotten. Returns 0, or -1 with err (the caller should abort).
 * At commit, if another transaction's append to the same collection has
 * written its frame but not yet ended (or a drop of it runs), this one's
 * commit fails with WriteConflict (it would meet the other's row anyway);
 * the caller retries as for any write conflict.
 */
int mf_archive_stage(mf_archive_t *a, mf_sess_t *s, const uint8_t uuid[16], const bson_t *doc, mf_error_t *err) MF_WUR;

/*
 * Reading: a reader sees the documents committed to uuid's archive when it
 * was opened, oldest first, one at a time. *doc from mf_archive_reader_next
 * is valid until the next call or close. next returns 1 with *doc, 0 at the
 * end, or -1 with err (a damaged segment). A collection with no archive
 * reads as empty.
 */
typedef struct mf_archive_reader mf_archive_reader_t;
int mf_archive_reader_open(mf_archive_t *a, const uint8_t uuid[16], mf_archive_reader_t **out, mf_error_t *err) MF_WUR;
int mf_archive_reader_next(mf_archive_reader_t *r, const bson_t **doc, mf_error_t *err) MF_WUR;
void mf_archive_reader_close(mf_archive_reader_t *r);

/*
 * mf_archive_drop: removes uuid's archive (its rows, in a transaction of
 * session s's own, and its files). Nothing to remove is not an error.
 * s must have no transaction open. WriteConflict while an append to uuid is
 * being committed.
 */
int mf_archive_drop(mf_archive_t *a, mf_sess_t *s, const uint8_t uuid[16], mf_error_t *err) MF_WUR;

/*
 * mf_archive_expire: retention (archiveRetentionSeconds): removes every
 * segment whose last document was archived before cutoff_ms, closing the
 * current segment first if it is one of them. *removed gets the number of
 * segments removed (may be NULL). s must have no transaction open (the
 * rows go in a transaction of its own). A collection whose append is being
 * committed at that moment is left for the next call.
 */
int mf_archive_expire(mf_archive_t *a, mf_sess_t *s, int64_t cutoff_ms, int64_t *removed, mf_error_t *err) MF_WUR;

typedef struct mf_archive_stats {
    int64_t bytes;    /* committed bytes of the segment files */
    int64_t docs;     /* documents archived */
    int64_t segments; /* segment files */
    int64_t raw_bytes; /* the documents' BSON size before compression */
} mf_archive_stats_t;

/* mf_archive_stats: totals for uuid, or for the whole archive when uuid is NULL (from memory, no I/O). */
void mf_archive_stats(mf_archive_t *a, const uint8_t *uuid, mf_archive_stats_t *out);

#endif /* MF_ARCHIVE_H */
