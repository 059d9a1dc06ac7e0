/*
 * mayfly.h: the embedding API of the mayfly document engine.
 *
 * mayfly is a MongoDB-compatible document database with TTL indexes. This
 * header lets a C program use the engine in-process, as SQLite is used: no
 * server, no sockets. A database handle is opened on a directory (or in
 * memory), takes MongoDB commands as BSON documents and answers with BSON
 * replies, exactly as mayflyd answers its clients over the wire protocol
 * (the same command table runs behind both), and is closed. The TTL monitor
 * runs inside the handle and expires its data on time.
 *
 *     mf_db *db;
 *     mf_db_error err;
 *     if (mf_db_open("/var/lib/app/db", NULL, &db, &err) != 0)
 *         fprintf(stderr, "%s\n", err.message);
 *     bson_t *cmd = BCON_NEW("insert", "events", "documents", "[", "{", "at", BCON_DATE_TIME(now), "}", "]");
 *     bson_t reply;
 *     int code = mf_db_command(db, "app", cmd, &reply);   // 0: ok
 *     bson_destroy(&reply);
 *     bson_destroy(cmd);
 *     mf_db_close(db);
 *
 * Threads: one handle may be used by any number of threads at once. Any
 * number of handles may be open in one process, on different directories;
 * each has its own parameters, TTL monitor, cursors and operations.
 *
 * Link with `pkg-config --cflags --libs mayfly` (it requires libbson-1.0).
 */
#ifndef MAYFLY_H
#define MAYFLY_H

#include <bson/bson.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MAYFLY_API __attribute__((visibility("default")))
#else
#define MAYFLY_API
#endif

/* An open database (opaque). */
typedef struct mf_db mf_db;

/* Why an open failed: a MongoDB error code and message. */
typedef struct mf_db_error {
    int code;
    char message[512];
} mf_db_error;

/*
 * mf_db_open: opens (creating if needed) the database in directory path.
 *
 * config may be NULL or a document with:
 *   inMemory: true       keep everything in memory; nothing is written, the
 *                        data is gone after mf_db_close; path may be NULL
 *   cacheSizeGB: 1.5     WiredTiger's cache (in memory: all the data must
 *                        fit), 0.25 to 10000; default as mongod's, half of
 *                        (memory granted - 1 GB), at least 256 MB, where the
 *                        memory granted is RAM or a lower cgroup limit
 *   setParameter: {...}  server parameters at startup, as mayflyd's
 *                        --setParameter (ttlMonitorSleepSecs, ...)
 * Returns 0 with *db set, or the error code with *err filled (err may be
 * NULL) and *db NULL.
 */
MAYFLY_API int mf_db_open(const char *path, const bson_t *config, mf_db **db, mf_db_error *err);

/*
 * mf_db_command: runs one command (for example {find: "c", filter: {...}})
 * against database dbname and stores the reply in *reply, which it
 * initialises: the caller must bson_destroy it, whatever the result.
 * Returns 0 when the reply says ok: 1, else the reply's error code (the
 * reply then holds MongoDB's {ok: 0, errmsg, code, codeName}). Cursors work
 * as over the wire: a find's reply has cursor.id; getMore continues it.
 */
MAYFLY_API int mf_db_command(mf_db *db, const char *dbname, const bson_t *cmd, bson_t *reply);

/*
 * mf_db_close: interrupts what is still running on db (11600), stops its TTL
 * monitor, checkpoints and frees it. No call on db may be in progress or
 * follow. NULL is ignored.
 */
MAYFLY_API void mf_db_close(mf_db *db);

/* mf_db_version: the MongoDB version mayfly is compatible with ("8.0.0"). */
MAYFLY_API const char *mf_db_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MAYFLY_H */
