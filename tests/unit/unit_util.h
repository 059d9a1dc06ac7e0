/*
 * unit_util.h: helpers shared by the unit tests (header-only: each test is
 * one .c file built on its own).
 */
#ifndef MF_UNIT_UTIL_H
#define MF_UNIT_UTIL_H

#include <arpa/inet.h>
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

#endif /* MF_UNIT_UTIL_H */
