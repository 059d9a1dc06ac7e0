/*
 * log.c: JSON-lines logging to stderr plus a ring of recent lines for getLog.
 *
 * The ring holds the last MF_LOG_RING lines, MF_LOG_RING_BYTES at most (the
 * oldest go first, as in mongod's RamLog: a few long lines, slow-query
 * lines with big commands, cannot make getLog's reply or the ring's memory
 * grow past a megabyte), under a mutex; it is the only shared state.
 * Formatting happens on the caller's stack.
 */
#include "common/alloc.h"
#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MF_LOG_RING 1024
#define MF_LOG_RING_BYTES (1024 * 1024)

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static char *ring[MF_LOG_RING];
static long ring_total;   /* lines ever kept; the newest is ring[(ring_total - 1) % MF_LOG_RING] */
static long ring_count;   /* lines held, the last ring_count of them */
static size_t ring_bytes; /* their total length */

/*
 * Escapes src as the inside of a JSON string into dst (cap bytes, always
 * NUL-terminated): quotes, backslashes and control bytes escaped. Stops
 * before a character that does not fit whole. Bytes that are not UTF-8 are
 * copied as they are; log_emit writes every line's as U+FFFD.
 */
static size_t
json_escape(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)src;
    while (*p && n + 7 < cap) {
        unsigned char c = *p;
        size_t len = mf_utf8_char_len(p);
        if (c == '"' || c == '\\') {
            dst[n++] = '\\';
            dst[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", c);
        } else if (len > 1) {
            memcpy(dst + n, p, len);
            n += len;
            p += len;
            continue;
        } else {
            dst[n++] = (char)c;
        }
        p++;
    }
    dst[n] = '\0';
    return n;
}

/* The line's timestamp, "2026-12-01T12:00:00.123Z", into ts (at least 32 bytes). */
static void
log_time(char *ts, size_t cap)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t k = strftime(ts, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + k, cap - k, ".%03ldZ", (long)(tv.tv_usec / 1000));
}

/*
 * A line holding bytes that are not UTF-8 (a message, or a string value of
 * a logged command, may) copied with each such byte as U+FFFD: such bytes
 * only occur inside JSON strings, where "\ufffd" is text. NULL when the
 * line is valid UTF-8 already (the usual case: one scan). Owned by the caller.
 */
static char *
utf8_repaired(const char *line, size_t len)
{
    const unsigned char *p = (const unsigned char *)line;
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        size_t k = mf_utf8_char_len(p + i);
        bad += k == 0;
        i += k ? k : 1;
    }
    if (bad == 0)
        return NULL;
    char *out = mf_malloc(len + bad * 5 + 1);
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t k = mf_utf8_char_len(p + i);
        if (k == 0) {
            memcpy(out + n, "\\ufffd", 6);
            n += 6;
            i++;
        } else {
            memcpy(out + n, p + i, k);
            n += k;
            i += k;
        }
    }
    out[n] = '\0';
    return out;
}

/* Writes line[0..n) (ending in a newline) to stderr and keeps it, without the newline, in the ring. */
static void
log_emit(char *line, int n)
{
    char *fixed = utf8_repaired(line, (size_t)n);
    if (fixed != NULL) {
        line = fixed;
        n = (int)strlen(fixed);
    }
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* Nothing sensible to do when stderr is gone. */
    }
    line[n - 1] = '\0'; /* drop the newline for the ring */
    size_t len = (size_t)n - 1;
    pthread_mutex_lock(&ring_lock);
    while (ring_count > 0 && (ring_count == MF_LOG_RING || ring_bytes + len > MF_LOG_RING_BYTES)) {
        char **oldest = &ring[(ring_total - ring_count) % MF_LOG_RING];
        ring_bytes -= strlen(*oldest);
        free(*oldest);
        *oldest = NULL;
        ring_count--;
    }
    ring[ring_total % MF_LOG_RING] = mf_strdup(line);
    ring_total++;
    ring_count++;
    ring_bytes += len;
    pthread_mutex_unlock(&ring_lock);
    free(fixed);
}

void
mf_log(char severity, const char *component, const char *fmt, ...)
{
    char msg[2048], esc[4096], line[4600], ts[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof(msg))
        (void)mf_utf8_cut_tail(msg, sizeof(msg) - 1); /* cut between characters, not inside one */
    json_escape(esc, sizeof(esc), msg);
    log_time(ts, sizeof(ts));
    n = snprintf(line, sizeof(line), "{\"t\":{\"$date\":\"%s\"},\"s\":\"%c\",\"c\":\"%s\",\"msg\":\"%s\"}\n", ts, severity,
                 component, esc);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line)) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    log_emit(line, n);
}

void
mf_log_attr(char severity, const char *component, int id, const char *ctx, const char *msg, const char *attr_json)
{
    char esc_msg[512], esc_ctx[160], ts[64];
    json_escape(esc_msg, sizeof(esc_msg), msg);
    json_escape(esc_ctx, sizeof(esc_ctx), ctx ? ctx : "");
    log_time(ts, sizeof(ts));
    size_t cap = 512 + strlen(esc_msg) + strlen(esc_ctx) + (attr_json ? strlen(attr_json) : 0);
    char *line = mf_malloc(cap);
    int n = snprintf(line, cap, "{\"t\":{\"$date\":\"%s\"},\"s\":\"%c\",\"c\":\"%s\",\"id\":%d,\"ctx\":\"%s\",\"msg\":\"%s\"%s%s}\n",
                     ts, severity, component, id, esc_ctx, esc_msg, attr_json ? ",\"attr\":" : "",
                     attr_json ? attr_json : "");
    if (n > 0 && (size_t)n < cap)
        log_emit(line, n);
    free(line);
}

int
mf_log_recent(char **out, int max, long *total)
{
    int n = 0;
    pthread_mutex_lock(&ring_lock);
    long have = ring_count;
    if (have > max)
        have = max;
    for (long i = ring_total - have; i < ring_total; i++)
        out[n++] = mf_strdup(ring[i % MF_LOG_RING]);
    if (total)
        *total = ring_total;
    pthread_mutex_unlock(&ring_lock);
    return n;
}
