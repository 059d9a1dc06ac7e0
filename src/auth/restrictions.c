/*
 * restrictions.c: authenticationRestrictions (see restrictions.h).
 *
 * A range is parsed as mongod's CIDR: the text before an optional '/' must
 * be an IPv4 or IPv6 address for inet_pton, the length after it a decimal
 * number from 0 to 32 (IPv4) or 128 (IPv6); without one the range is the
 * address alone. A range contains an address of the same family whose first
 * `length` bits are its own. Stored lists keep their strings as given (as
 * mongod's user and role documents do); messages and the resolved form
 * print a range as "address/length", as mongod's CIDR::toString.
 */
#include "auth/restrictions.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/value.h"

/* The restriction document's two fields, in the order mongod serializes them. */
static const char *const fields[2] = {"clientSource", "serverAddress"};
static const char *const labels[2] = {"Client source", "Server address"};

typedef struct cidr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t ip[16];
    int len;    /* prefix length in bits */
} cidr_t;

/*
 * cidr_parse: s as a range. NULL on success, else mongod's message
 * (UnsupportedFormat in its CIDR constructor, BadValue by the time a
 * command reports it).
 */
static const char *
cidr_parse(const char *s, cidr_t *c)
{
    char ip[INET6_ADDRSTRLEN + 1];
    const char *slash = strchr(s, '/');
    size_t n = slash != NULL ? (size_t)(slash - s) : strlen(s);
    memset(c, 0, sizeof(*c));
    if (n >= sizeof(ip))
        return "Invalid IP address in CIDR string";
    memcpy(ip, s, n);
    ip[n] = '\0';
    if (inet_pton(AF_INET, ip, c->ip) == 1) {
        c->family = AF_INET;
        c->len = 32;
    } else if (inet_pton(AF_INET6, ip, c->ip) == 1) {
        c->family = AF_INET6;
        c->len = 128;
    } else {
        return "Invalid IP address in CIDR string";
    }
    if (slash == NULL)
        return NULL;
    /* As std::stoi with mongod's strict_stoi: the whole rest must be the number. */
    char *end;
    errno = 0;
    long v = strtol(slash + 1, &end, 10);
    if (end == slash + 1 || *end != '\0')
        return "Non-numeric length in CIDR string";
    if (errno == ERANGE || v < 0 || v > c->len)
        return "Invalid length in CIDR string";
    c->len = (int)v;
    return NULL;
}

static bool
cidr_contains(const cidr_t *range, const cidr_t *addr)
{
    if (range->family != addr->family || range->len > addr->len)
        return false;
    int full = range->len / 8, rem = range->len % 8;
    if (memcmp(range->ip, addr->ip, (size_t)full) != 0)
        return false;
    if (rem == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rem));
    return (range->ip[full] & mask) == (addr->ip[full] & mask);
}

/* "address/length", as mongod prints a CIDR. */
static void
cidr_format(const cidr_t *c, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN + 1] = "";
    inet_ntop(c->family, c->ip, ip, sizeof(ip));
    snprintf(out, cap, "%s/%d", ip, c->len);
}

/*
 * addr_parse: a connection's IP as a full-length range. An IPv4-mapped IPv6
 * address (a dual-stack listener's IPv4 client) counts as its IPv4 address,
 * so "127.0.0.1" restrictions hold whichever socket family accepted it.
 */
static bool
addr_parse(const char *ip, cidr_t *c)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (ip == NULL || ip[0] == '\0' || strchr(ip, '/') != NULL || cidr_parse(ip, c) != NULL)
        return false;
    if (c->family == AF_INET6 && memcmp(c->ip, mapped, sizeof(mapped)) == 0) {
        memmove(c->ip, c->ip + 12, 4);
        memset(c->ip + 4, 0, 12);
        c->family = AF_INET;
        c->len = 32;
    }
    return true;
}

int
mf_restrictions_parse(const bson_iter_t *it, const char *cmd, bson_t *out, mf_error_t *err)
{
    bson_iter_t a;
    uint32_t n = 0;
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_err_set(err, MF_E_TypeMismatch,
                          "BSON field '%s.authenticationRestrictions' is the wrong type '%s', expected type 'array'", cmd,
                          mf_type_name(bson_iter_type(it)));
    bson_iter_recurse(it, &a);
    while (bson_iter_next(&a)) {
        bson_iter_t f, g0, g1;
        bson_iter_t *given[2] = {&g0, &g1}; /* (bson_iter_t is over-aligned: no array of them) */
        bool has[2] = {false, false};
        if (!BSON_ITER_HOLDS_DOCUMENT(&a) || !bson_iter_recurse(&a, &f))
            return mf_err_set(err, MF_E_UnsupportedFormat,
                              "'authenticationRestrictions' array sub-documents must be address restriction objects");
        /* The IDL struct first (strict: unknown, duplicate and mistyped fields), in field order ... */
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            int i = strcmp(k, fields[0]) == 0 ? 0 : strcmp(k, fields[1]) == 0 ? 1 : -1;
            bson_iter_t s;
            if (i < 0)
                return mf_err_set(err, MF_E_BadValue, "BSON field 'address restriction.%s' is an unknown field.", k);
            if (has[i])
                return mf_err_set(err, MF_E_BadValue, "BSON field 'address restriction.%s' is a duplicate field", k);
            if (!BSON_ITER_HOLDS_ARRAY(&f))
                return mf_err_set(err, MF_E_BadValue,
                                  "BSON field 'address restriction.%s' is the wrong type '%s', expected type 'array'", k,
                                  mf_type_name(bson_iter_type(&f)));
            bson_iter_recurse(&f, &s);
            while (bson_iter_next(&s)) {
                if (!BSON_ITER_HOLDS_UTF8(&s))
                    return mf_err_set(err, MF_E_BadValue,
                                      "BSON field 'address restriction.%s.%s' is the wrong type '%s', expected type "
                                      "'string'",
                                      k, bson_iter_key(&s), mf_type_name(bson_iter_type(&s)));
            }
            has[i] = true;
            *given[i] = f;
        }
        /* ... then every range, clientSource's before serverAddress's, then "at least one". */
        for (int i = 0; i < 2; i++) {
            bson_iter_t s;
            if (!has[i])
                continue;
            bson_iter_recurse(given[i], &s);
            while (bson_iter_next(&s)) {
                cidr_t c;
                const char *why = cidr_parse(bson_iter_utf8(&s, NULL), &c);
                if (why != NULL)
                    return mf_err_set(err, MF_E_BadValue, "%s", why);
            }
        }
        if (!has[0] && !has[1])
            return mf_err_set(err, MF_E_CollectionIsEmpty,
                              "At least one of 'clientSource' and/or 'serverAddress' must be set");
        char key[16];
        const char *kp;
        bson_t doc;
        bson_uint32_to_string(n++, &kp, key, sizeof(key));
        BSON_APPEND_DOCUMENT_BEGIN(out, kp, &doc);
        for (int i = 0; i < 2; i++)
            if (has[i])
                bson_append_value(&doc, fields[i], -1, bson_iter_value(given[i]));
        bson_append_document_end(out, &doc);
    }
    return 0;
}

/* A stored range as mongod prints its parsed form ("address/length"); one that does not parse, as given. */
static void
range_text(const char *s, char *out, size_t cap)
{
    cidr_t c;
    if (cidr_parse(s, &c) == NULL)
        cidr_format(&c, out, cap);
    else
        snprintf(out, cap, "%s", s);
}

/* Appends `{"<field>": ["r1", "r2"]}` (ranges as address/length) to why, as mongod's AddressRestriction prints. */
static void
describe_field(const bson_iter_t *field, char *why, size_t cap)
{
    bson_iter_t s;
    size_t len = strlen(why);
    bool first = true;
    snprintf(why + len, cap - len, "{\"%s\": [", bson_iter_key(field));
    if (bson_iter_recurse(field, &s)) {
        while (bson_iter_next(&s)) {
            char r[INET6_ADDRSTRLEN + 8];
            if (!BSON_ITER_HOLDS_UTF8(&s))
                continue;
            range_text(bson_iter_utf8(&s, NULL), r, sizeof(r));
            len = strlen(why);
            snprintf(why + len, cap - len, "%s\"%s\"", first ? "" : ", ", r);
            first = false;
        }
    }
    len = strlen(why);
    snprintf(why + len, cap - len, "]}");
}

/* Whether the address (text) falls within one of field's ranges; why (appended) when not. */
static bool
field_met(const bson_iter_t *field, int which, const char *ip, char *why, size_t cap)
{
    bson_iter_t s;
    cidr_t addr;
    size_t len = strlen(why);
    if (!addr_parse(ip, &addr)) {
        snprintf(why + len, cap - len, "%s is not an IP address: %s", labels[which], ip != NULL ? ip : "");
        return false;
    }
    if (BSON_ITER_HOLDS_ARRAY(field) && bson_iter_recurse(field, &s)) {
        while (bson_iter_next(&s)) {
            cidr_t range;
            if (BSON_ITER_HOLDS_UTF8(&s) && cidr_parse(bson_iter_utf8(&s, NULL), &range) == NULL &&
                cidr_contains(&range, &addr))
                return true;
        }
    }
    snprintf(why + len, cap - len, "%s does not fall within: ", ip);
    describe_field(field, why, cap);
    return false;
}

/* One restriction document: every field it gives met (an empty or malformed one is not). */
static bool
document_met(const bson_iter_t *d, const char *client_ip, const char *server_ip, char *why, size_t cap)
{
    bson_iter_t f;
    bool any = false;
    if (!BSON_ITER_HOLDS_DOCUMENT(d) || !bson_iter_recurse(d, &f))
        return false;
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        int i = strcmp(k, fields[0]) == 0 ? 0 : strcmp(k, fields[1]) == 0 ? 1 : -1;
        if (i < 0 || !field_met(&f, i, i == 0 ? client_ip : server_ip, why, cap))
            return false;
        any = true;
    }
    return any;
}

bool
mf_restrictions_met(const bson_t *list, const char *client_ip, const char *server_ip, char *why, size_t cap)
{
    bson_iter_t d;
    bool any = false;
    why[0] = '\0';
    if (!bson_iter_init(&d, list))
        return false;
    /* ANY of the documents; each failure's reason is kept, separated, for the log. */
    while (bson_iter_next(&d)) {
        size_t len = strlen(why);
        if (any && len + 3 < cap)
            snprintf(why + len, cap - len, "; ");
        any = true;
        if (document_met(&d, client_ip, server_ip, why, cap))
            return true;
    }
    return !any;
}

void
mf_restrictions_append_resolved(bson_t *out, const char *key, const bson_t *list)
{
    bson_t arr;
    bson_iter_t d;
    uint32_t nd = 0;
    BSON_APPEND_ARRAY_BEGIN(out, key, &arr);
    if (bson_iter_init(&d, list)) {
        while (bson_iter_next(&d)) {
            bson_iter_t f;
            bson_t doc;
            char dkey[16];
            const char *dkp;
            if (!BSON_ITER_HOLDS_DOCUMENT(&d) || !bson_iter_recurse(&d, &f))
                continue;
            bson_uint32_to_string(nd++, &dkp, dkey, sizeof(dkey));
            BSON_APPEND_DOCUMENT_BEGIN(&arr, dkp, &doc);
            for (int i = 0; i < 2; i++) {
                bson_iter_t g = f, s;
                bson_t ranges;
                uint32_t nr = 0;
                if (!bson_iter_find(&g, fields[i]) || !BSON_ITER_HOLDS_ARRAY(&g) || !bson_iter_recurse(&g, &s))
                    continue;
                BSON_APPEND_ARRAY_BEGIN(&doc, fields[i], &ranges);
                while (bson_iter_next(&s)) {
                    char r[INET6_ADDRSTRLEN + 8], rkey[16];
                    const char *rkp;
                    if (!BSON_ITER_HOLDS_UTF8(&s))
                        continue;
                    range_text(bson_iter_utf8(&s, NULL), r, sizeof(r));
                    bson_uint32_to_string(nr++, &rkp, rkey, sizeof(rkey));
                    BSON_APPEND_UTF8(&ranges, rkp, r);
                }
                bson_append_array_end(&doc, &ranges);
            }
            bson_append_document_end(&arr, &doc);
        }
    }
    bson_append_array_end(out, &arr);
}

void
mf_restrictions_ip_of(const char *addr, char *buf, size_t cap)
{
    const char *colon = addr != NULL ? strrchr(addr, ':') : NULL;
    size_t n = colon != NULL ? (size_t)(colon - addr) : 0;
    cidr_t c;
    buf[0] = '\0';
    if (colon == NULL || n == 0 || n >= cap)
        return;
    memcpy(buf, addr, n);
    buf[n] = '\0';
    if (buf[0] == '[' && buf[n - 1] == ']') { /* "[::1]:27017", should a caller bracket it */
        memmove(buf, buf + 1, n - 2);
        buf[n - 2] = '\0';
    }
    if (!addr_parse(buf, &c))
        buf[0] = '\0';
}
