/*
 * alloc.h: the one allocation policy of the code base.
 *
 * Every heap allocation goes through these wrappers. On failure they write
 * one log line to stderr and abort the process, as Redis's zmalloc does: a
 * server that runs out of memory half-way through a write cannot be trusted
 * to unwind correctly from every call site, while WiredTiger's journal makes
 * an abort safe (committed data survives, uncommitted data was never
 * acknowledged). So callers never check for NULL, and `p = mf_realloc(p, n)`
 * is correct (the old block is never lost, because failure does not return).
 *
 * libbson's own bson_malloc family already aborts on failure the same way.
 * scripts/check-alloc.sh fails the test run if a raw malloc, calloc, realloc,
 * strdup or strndup appears in src/ outside alloc.c.
 */
#ifndef MF_ALLOC_H
#define MF_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* mf_malloc: malloc(n) that never returns NULL (n == 0 allocates 1 byte). */
void *mf_malloc(size_t n) __attribute__((malloc, returns_nonnull));
/* mf_calloc: zeroed array of count items of size bytes; never NULL; aborts on overflow. */
void *mf_calloc(size_t count, size_t size) __attribute__((malloc, returns_nonnull));
/* mf_realloc: resizes p (may be NULL) to n bytes; never NULL. */
void *mf_realloc(void *p, size_t n) __attribute__((returns_nonnull));
/* mf_strdup / mf_strndup: copies of a NUL-terminated string; never NULL. */
char *mf_strdup(const char *s) __attribute__((malloc, returns_nonnull));
char *mf_strndup(const char *s, size_t n) __attribute__((malloc, returns_nonnull));

/*
 * mf_alloc_release_free: asks the allocator to return the pages of freed
 * memory to the OS now, in every arena (only memory already free is
 * affected): jemalloc's purge when the server links it, glibc's malloc_trim
 * otherwise. For after a large transient allocation (the external sorter's
 * spills).
 * mf_alloc_decay: lets jemalloc return the free pages whose dirty decay
 * (10 s) has passed, as it does itself only when an arena allocates again:
 * called every second by the engine's reaper, so the pages an idle server
 * kept after large documents go back to the OS. Nothing without jemalloc.
 */
void mf_alloc_release_free(void);
/* mf_alloc_name: the allocator in use, as buildInfo's allocator shows it: "jemalloc" or "system". */
const char *mf_alloc_name(void);
void mf_alloc_decay(void);

/*
 * mf_strlcpy: copies src into the buffer dst of size bytes (size > 0), cut
 * to fit, always NUL-terminated; returns strlen(src), as BSD's strlcpy (a
 * result >= size means it was cut). A cut falls between UTF-8 characters,
 * never inside one (names end up in BSON strings, which must be valid
 * UTF-8), so a cut copy may be shorter than size - 1. The fixed-buffer counterpart of
 * mf_strdup, a tenth of the instructions of snprintf(dst, size, "%s", src)
 * on the paths that copy names per operation (curop, the TTL monitor).
 */
static inline size_t
mf_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = __builtin_strlen(src);
    size_t k = n < size ? n : size - 1;
    while (k < n && k > 0 && ((unsigned char)src[k] & 0xC0) == 0x80)
        k--; /* src[k] continues a character: cut before that character */
    __builtin_memcpy(dst, src, k);
    dst[k] = '\0';
    return n;
}

/*
 * mf_utf8_char_len: the length of the well-formed UTF-8 character at s
 * (1-4), or 0 when the bytes there are not one (a stray continuation byte,
 * an overlong form, a surrogate, a character cut short by a NUL). Reads no
 * further than the first byte that does not fit, so never past a NUL.
 */
static inline size_t
mf_utf8_char_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (n == 0)
        return 0;
    unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    }
    return n;
}

/*
 * mf_utf8_scrub: replaces, in place, every byte of the NUL-terminated s
 * that is not part of a well-formed UTF-8 character with '?', so s can go
 * into a BSON string a driver decodes (error messages quoting user input
 * cut inside a character, or bytes that never were UTF-8).
 */
static inline void
mf_utf8_scrub(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t k = mf_utf8_char_len(p);
        if (k == 0) {
            *p++ = '?';
        } else {
            p += k;
        }
    }
}

/*
 * mf_utf8_cut_tail: s holds len bytes of a string cut at a byte count
 * (snprintf's, say); drops a last UTF-8 character that the cut left
 * incomplete, NUL-terminating s there. Returns the new length.
 */
static inline size_t
mf_utf8_cut_tail(char *s, size_t len)
{
    size_t i = len;
    while (i > 0 && len - i < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--; /* back over continuation bytes to the character's first byte */
    if (i == 0)
        return len;
    unsigned char lead = (unsigned char)s[i - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if ((i - 1) + need > len) {
        s[i - 1] = '\0';
        return i - 1;
    }
    return len;
}

/*
 * mf_strjoin: a, b and c one after the other into dst (size > 0), cut to
 * fit (between UTF-8 characters, as mf_strlcpy: once one part is cut, the
 * later ones only write the NUL at size - 1, past the string's end),
 * always NUL-terminated; returns the length uncut, as mf_strlcpy.
 * Namespaces ("db" "." "coll") built per operation, without snprintf.
 */
static inline size_t
mf_strjoin(char *dst, size_t size, const char *a, const char *b, const char *c)
{
    size_t n = mf_strlcpy(dst, a, size);
    size_t at = n < size ? n : size - 1;
    n += mf_strlcpy(dst + at, b, size - at);
    at = n < size ? n : size - 1;
    return n + mf_strlcpy(dst + at, c, size - at);
}

/*
 * mf_i64_str: v in decimal into dst (size > 0), cut to fit, always
 * NUL-terminated; returns its length uncut.
 */
static inline size_t
mf_i64_str(char *dst, size_t size, int64_t v)
{
    char tmp[24];
    size_t k = sizeof(tmp);
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    tmp[--k] = '\0';
    do {
        tmp[--k] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        tmp[--k] = '-';
    return mf_strlcpy(dst, tmp + k, size);
}

#endif /* MF_ALLOC_H */
