/*
 * unit_util.h: helpers shared by the unit tests (header-only: each test is
 * one .c file built on its own).
 */
#ifndef MF_UNIT_UTIL_H
#define MF_UNIT_UTIL_H

#include <arpa/inet.h>
#include <bson/bson.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* A loopback TCP port that was free a moment ago (another process may still take it). */
static inline int
unit_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &l), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* The document of relaxed extended JSON s (the caller destroys it); fails the test on bad JSON. */
static inline bson_t *
unit_json(const char *s)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &e);
    cr_assert_not_null(b, "bad test JSON %s: %s", s, e.message);
    return b;
}

/* Numeric values of each BSON type, for tests of value code. */
static inline bson_value_t
i32(int32_t x)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT32};
    v.value.v_int32 = x;
    return v;
}

static inline bson_value_t
i64(int64_t x)
{
    bson_value_t v = {.value_type = BSON_TYPE_INT64};
    v.value.v_int64 = x;
    return v;
}

static inline bson_value_t
dbl(double x)
{
    bson_value_t v = {.value_type = BSON_TYPE_DOUBLE};
    v.value.v_double = x;
    return v;
}

#endif /* MF_UNIT_UTIL_H */
