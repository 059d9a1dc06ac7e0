/*
 * sessions.c: the logical session cache (see sessions.h for the design).
 *
 * Entries live in two structures at once: a chained hash table keyed by
 * (id, uid), whose bucket array doubles when the entries outnumber the
 * buckets (so a lookup stays O(1) on average), and a doubly linked list in
 * order of last use, most recent first. The hash is FNV-1a over the 48 key
 * bytes mixed with a random per-cache seed, so clients choosing their own
 * session UUIDs cannot aim them all at one bucket of a known hash.
 */
#include "common/alloc.h"
#include "engine/sessions.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KEY_LEN (16 + MF_SESSION_UID_LEN)
#define MIN_BUCKETS 64
#define EXPIRE_PER_TOUCH 2 /* expired entries a touch drops from the tail, at most */

typedef struct entry {
    uint8_t key[KEY_LEN];    /* id, then uid */
    uint64_t hash;
    int64_t last_use_ms;
    char *user;              /* owned */
    struct entry *chain;     /* next in the bucket */
    struct entry *newer, *older;
} entry_t;

struct mf_sessions {
    pthread_mutex_t mu;
    entry_t **buckets;
    size_t nbuckets; /* a power of two */
    size_t n;
    int64_t max;
    uint64_t seed;
    uint8_t noauth_uid[MF_SESSION_UID_LEN]; /* SHA-256 of "": every session's uid without access control */
    entry_t *newest, *oldest;
};

static uint64_t
key_hash(const mf_sessions_t *s, const uint8_t *key)
{
    uint64_t h = 1469598103934665603ULL ^ s->seed;
    for (int i = 0; i < KEY_LEN; i++) {
        h ^= key[i];
        h *= 1099511628211ULL;
    }
    return h ^ (h >> 29);
}

mf_sessions_t *
mf_sessions_new(int64_t max_sessions)
{
    mf_sessions_t *s = mf_calloc(1, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    s->nbuckets = MIN_BUCKETS;
    s->buckets = mf_calloc(s->nbuckets, sizeof(*s->buckets));
    s->max = max_sessions > 0 ? max_sessions : 1;
    if (RAND_bytes((unsigned char *)&s->seed, sizeof(s->seed)) != 1)
        s->seed = (uint64_t)(uintptr_t)s * 0x9E3779B97F4A7C15ULL; /* still differs per cache and per run (ASLR) */
    mf_session_uid("", s->noauth_uid);
    return s;
}

void
mf_sessions_free(mf_sessions_t *s)
{
    if (s == NULL)
        return;
    for (entry_t *e = s->newest, *next; e != NULL; e = next) {
        next = e->older;
        free(e->user);
        free(e);
    }
    free(s->buckets);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void
mf_session_uid(const char *user, uint8_t uid[MF_SESSION_UID_LEN])
{
    unsigned int len = 0;
    memset(uid, 0, MF_SESSION_UID_LEN);
    EVP_Digest(user, strlen(user), uid, &len, EVP_sha256(), NULL);
}

/* Caller holds mu. The entry for key, or NULL; *slot (may be NULL) receives the link that points at it. */
static entry_t *
find(mf_sessions_t *s, const uint8_t *key, uint64_t h, entry_t ***slot)
{
    entry_t **p = &s->buckets[h & (s->nbuckets - 1)];
    for (; *p != NULL; p = &(*p)->chain) {
        if ((*p)->hash == h && memcmp((*p)->key, key, KEY_LEN) == 0)
            break;
    }
    if (slot != NULL)
        *slot = p;
    return *p;
}

/* Caller holds mu. Unlinks e from the last-use list. */
static void
list_unlink(mf_sessions_t *s, entry_t *e)
{
    if (e->newer != NULL)
        e->newer->older = e->older;
    else
        s->newest = e->older;
    if (e->older != NULL)
        e->older->newer = e->newer;
    else
        s->oldest = e->newer;
    e->newer = e->older = NULL;
}

/* Caller holds mu. Puts e at the head (most recently used). */
static void
list_push_newest(mf_sessions_t *s, entry_t *e)
{
    e->newer = NULL;
    e->older = s->newest;
    if (s->newest != NULL)
        s->newest->newer = e;
    s->newest = e;
    if (s->oldest == NULL)
        s->oldest = e;
}

/* Caller holds mu. Removes e from both structures and frees it. */
static void
drop(mf_sessions_t *s, entry_t *e)
{
    entry_t **slot;
    if (find(s, e->key, e->hash, &slot) == e)
        *slot = e->chain;
    list_unlink(s, e);
    s->n--;
    free(e->user);
    free(e);
}

/* Caller holds mu. Doubles the bucket array, rehashing every entry. */
static void
grow(mf_sessions_t *s)
{
    size_t nb = s->nbuckets * 2;
    entry_t **b = mf_calloc(nb, sizeof(*b));
    for (entry_t *e = s->newest; e != NULL; e = e->older) {
        size_t i = e->hash & (nb - 1);
        e->chain = b[i];
        b[i] = e;
    }
    free(s->buckets);
    s->buckets = b;
    s->nbuckets = nb;
}

static bool
expired(const entry_t *e, int64_t now_ms, int64_t timeout_ms)
{
    return now_ms - e->last_use_ms >= timeout_ms;
}

/* Caller holds mu. Drops at most max expired entries from the stale end. */
static void
expire_some(mf_sessions_t *s, int64_t now_ms, int64_t timeout_ms, int max)
{
    for (int i = 0; i < max && s->oldest != NULL && expired(s->oldest, now_ms, timeout_ms); i++)
        drop(s, s->oldest);
}

int
mf_sessions_touch(mf_sessions_t *s, const uint8_t id[16], const char *user, int64_t now_ms, int64_t timeout_ms,
                  mf_error_t *err)
{
    uint8_t uid[MF_SESSION_UID_LEN];
    return mf_sessions_touch_uid(s, id, user, now_ms, timeout_ms, uid, err);
}

int
mf_sessions_touch_uid(mf_sessions_t *s, const uint8_t id[16], const char *user, int64_t now_ms, int64_t timeout_ms,
                      uint8_t uid[MF_SESSION_UID_LEN], mf_error_t *err)
{
    uint8_t key[KEY_LEN];
    int rc = 0;
    memcpy(key, id, 16);
    if (user[0] == '\0')
        memcpy(key + 16, s->noauth_uid, MF_SESSION_UID_LEN); /* the common case: no digest per command */
    else
        mf_session_uid(user, key + 16);
    memcpy(uid, key + 16, MF_SESSION_UID_LEN);
    uint64_t h = key_hash(s, key);

    pthread_mutex_lock(&s->mu);
    entry_t **slot;
    entry_t *e = find(s, key, h, &slot);
    if (e != NULL && expired(e, now_ms, timeout_ms)) {
        /* Gone already: it comes back as a new session (the limit applies again). */
        drop(s, e);
        e = NULL;
        find(s, key, h, &slot);
    }
    if (e != NULL) {
        e->last_use_ms = now_ms;
        list_unlink(s, e);
        list_push_newest(s, e);
    } else {
        expire_some(s, now_ms, timeout_ms, EXPIRE_PER_TOUCH);
        if ((int64_t)s->n >= s->max) {
            rc = mf_err_set(err, MF_E_TooManyLogicalSessions,
                            "Unable to add session into the cache because the number of active sessions is too high");
            goto done;
        }
        if (s->n >= s->nbuckets)
            grow(s);
        e = mf_calloc(1, sizeof(*e));
        memcpy(e->key, key, KEY_LEN);
        e->hash = h;
        e->last_use_ms = now_ms;
        e->user = mf_strdup(user);
        find(s, key, h, &slot); /* the table may have grown */
        *slot = e;
        list_push_newest(s, e);
        s->n++;
        goto done;
    }
    expire_some(s, now_ms, timeout_ms, EXPIRE_PER_TOUCH);
done:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

bool
mf_sessions_end(mf_sessions_t *s, const uint8_t id[16], const uint8_t uid[MF_SESSION_UID_LEN])
{
    uint8_t key[KEY_LEN];
    memcpy(key, id, 16);
    memcpy(key + 16, uid, MF_SESSION_UID_LEN);
    uint64_t h = key_hash(s, key);
    pthread_mutex_lock(&s->mu);
    entry_t *e = find(s, key, h, NULL);
    if (e != NULL)
        drop(s, e);
    pthread_mutex_unlock(&s->mu);
    return e != NULL;
}

size_t
mf_sessions_end_all(mf_sessions_t *s, const uint8_t *uid)
{
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    for (entry_t *e = s->newest, *next; e != NULL; e = next) {
        next = e->older;
        if (uid == NULL || memcmp(e->key + 16, uid, MF_SESSION_UID_LEN) == 0) {
            drop(s, e);
            n++;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

void
mf_sessions_each(mf_sessions_t *s, int64_t now_ms, int64_t timeout_ms, const uint8_t (*uids)[MF_SESSION_UID_LEN],
                 size_t nuids, void (*fn)(void *arg, const mf_session_info_t *info), void *arg)
{
    mf_session_info_t info;
    pthread_mutex_lock(&s->mu);
    for (entry_t *e = s->newest, *next; e != NULL; e = next) {
        next = e->older;
        if (expired(e, now_ms, timeout_ms)) {
            drop(s, e);
            continue;
        }
        bool wanted = uids == NULL;
        for (size_t i = 0; !wanted && i < nuids; i++)
            wanted = memcmp(e->key + 16, uids[i], MF_SESSION_UID_LEN) == 0;
        if (!wanted)
            continue;
        memcpy(info.id, e->key, 16);
        memcpy(info.uid, e->key + 16, MF_SESSION_UID_LEN);
        info.last_use_ms = e->last_use_ms;
        info.user = e->user;
        fn(arg, &info);
    }
    pthread_mutex_unlock(&s->mu);
}

size_t
mf_sessions_count(mf_sessions_t *s)
{
    pthread_mutex_lock(&s->mu);
    size_t n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}
