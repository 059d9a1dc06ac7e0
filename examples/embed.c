/*
 * embed.c: mayfly embedded in a C program (include/mayfly.h).
 *
 * Opens a database in memory, creates a TTL index, inserts an already
 * expired session and a live one, waits for the TTL monitor to delete the
 * expired one, and prints what is left. Build against an installed mayfly:
 *
 *     cc embed.c $(pkg-config --cflags --libs mayfly) -o embed
 */
#define _DEFAULT_SOURCE /* usleep */
#include <mayfly.h>
#include <stdio.h>
#include <sys/time.h>
#include <unistd.h>

static int64_t
now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int64_t
count(mf_db *db)
{
    bson_t *cmd = BCON_NEW("count", "sessions"), reply;
    bson_iter_t it;
    int64_t n = -1;
    if (mf_db_command(db, "app", cmd, &reply) == 0 && bson_iter_init_find(&it, &reply, "n"))
        n = bson_iter_as_int64(&it);
    bson_destroy(&reply);
    bson_destroy(cmd);
    return n;
}

int
main(void)
{
    mf_db *db;
    mf_db_error err;
    bson_t *config = BCON_NEW("inMemory", BCON_BOOL(true)), reply;

    if (mf_db_open(NULL, config, &db, &err) != 0) {
        fprintf(stderr, "open: %d %s\n", err.code, err.message);
        return 1;
    }
    bson_destroy(config);
    bson_t *cmd = BCON_NEW("createIndexes", "sessions", "indexes", "[", "{", "key", "{", "lastSeen", BCON_INT32(1), "}",
                           "name", "lastSeen_1", "expireAfterSeconds", BCON_INT32(60), "}", "]");
    int code = mf_db_command(db, "app", cmd, &reply);
    bson_destroy(&reply);
    bson_destroy(cmd);
    cmd = BCON_NEW("insert", "sessions", "documents", "[", "{", "user", "ada", "lastSeen",
                   BCON_DATE_TIME(now_ms() - 120000), "}", "{", "user", "bob", "lastSeen", BCON_DATE_TIME(now_ms()), "}",
                   "]");
    code = code ? code : mf_db_command(db, "app", cmd, &reply);
    bson_destroy(&reply);
    bson_destroy(cmd);
    if (code != 0) {
        fprintf(stderr, "command failed: %d\n", code);
        mf_db_close(db);
        return 1;
    }
    for (int i = 0; i < 500 && count(db) != 1; i++)
        usleep(10000);
    int64_t left = count(db);
    printf("mayfly %s: %lld session(s) left after expiry\n", mf_db_version(), (long long)left);
    mf_db_close(db);
    return left == 1 ? 0 : 1;
}
