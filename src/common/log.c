/*
 * log.c: JSON-lines logging to stderr plus a ring of recent lines for getLog.
 *
 * The ring holds the last MF_LOG_RING lines under a mutex; it is the only
 * shared state. Formatting happens on the caller's stack.
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

static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static char *ring[MF_LOG_RING];
static long ring_total;

static size_t
json_escape(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; *src && n + 7 < cap; src++) {
        unsigned char c = (unsigned char)*src;
        if (c == '"' || c == '\\') {
            dst[n++] = '\\';
            dst[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(dst + n, cap - n, "\\u%04x", c);
        } else {
            dst[n++] = (char)c;
        }
    }
    dst[n] = '\0';
    return n;
}

void
mf_log(char severity, const char *component, const char *fmt, ...)
{
    char msg[2048], esc[4096], line[4600], ts[64];
    struct timeval tv;
    struct tm tm;
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_escape(esc, sizeof(esc), msg);

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(line, sizeof(line), "{\"t\":{\"$date\":\"%s.%03ldZ\"},\"s\":\"%c\",\"c\":\"%s\",\"msg\":\"%s\"}\n", ts,
                 (long)(tv.tv_usec / 1000), severity, component, esc);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line))
        n = (int)sizeof(line) - 1;
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* Nothing sensible to do when stderr is gone. */
    }

    line[n - 1] = '\0'; /* drop the newline for the ring */
    pthread_mutex_lock(&ring_lock);
    free(ring[ring_total % MF_LOG_RING]);
    ring[ring_total % MF_LOG_RING] = mf_strdup(line);
    ring_total++;
    pthread_mutex_unlock(&ring_lock);
}

int
mf_log_recent(char **out, int max, long *total)
{
    int n = 0;
    pthread_mutex_lock(&ring_lock);
    long have = ring_total < MF_LOG_RING ? ring_total : MF_LOG_RING;
    if (have > max)
        have = max;
    for (long i = ring_total - have; i < ring_total; i++)
        out[n++] = mf_strdup(ring[i % MF_LOG_RING]);
    if (total)
        *total = ring_total;
    pthread_mutex_unlock(&ring_lock);
    return n;
}
