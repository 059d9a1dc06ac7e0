/*
 * alloc.c: allocation wrappers that abort with a log line on failure
 * (see alloc.h for the policy and why).
 */
#include "common/alloc.h"

#if !defined(MF_HAVE_JEMALLOC) && defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef MF_HAVE_JEMALLOC
/*
 * jemalloc's control interface. Weak: the objects that the server links
 * with jemalloc also go into libmayfly.so, whose host process may use
 * another allocator; there mallctl is NULL and nothing is done.
 */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));
#endif

void
mf_alloc_release_free(void)
{
#if defined(MF_HAVE_JEMALLOC)
    if (mallctl != NULL)
        (void)mallctl("arena.4096.purge", NULL, NULL, NULL, 0); /* 4096: MALLCTL_ARENAS_ALL */
#elif defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
    (void)malloc_trim(0);
#endif
}

const char *
mf_alloc_name(void)
{
#if defined(MF_HAVE_JEMALLOC)
    if (mallctl != NULL)
        return "jemalloc";
#endif
    return "system";
}

void
mf_alloc_decay(void)
{
#if defined(MF_HAVE_JEMALLOC)
    if (mallctl != NULL)
        (void)mallctl("arena.4096.decay", NULL, NULL, NULL, 0);
#endif
}

/*
 * oom: reports and aborts. Formats into a stack buffer and writes with one
 * write(2): it must not allocate, and must not go through mf_log (which
 * allocates for its ring).
 */
static void __attribute__((noreturn))
oom(const char *what, size_t n)
{
    char line[160];
    int len = snprintf(line, sizeof(line),
                       "{\"s\":\"F\",\"c\":\"CONTROL\",\"msg\":\"out of memory: %s of %zu bytes failed, aborting\"}\n",
                       what, n);
    if (len > 0) {
        ssize_t w = write(STDERR_FILENO, line, (size_t)len < sizeof(line) ? (size_t)len : sizeof(line) - 1);
        (void)w;
    }
    abort();
}

void *
mf_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom("malloc", n);
    return p;
}

void *
mf_calloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p == NULL)
        oom("calloc", count * size);
    return p;
}

void *
mf_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom("realloc", n);
    return q;
}

char *
mf_strdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL)
        oom("strdup", strlen(s) + 1);
    return p;
}

char *
mf_strndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (p == NULL)
        oom("strndup", n + 1);
    return p;
}
