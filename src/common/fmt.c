/*
 * fmt.c: mongod-style rendering of BSON for messages (see fmt.h).
 */
#include "common/alloc.h"
#include "common/fmt.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

typedef struct out {
    char *buf;
    size_t cap, len;
} out_t;

static void
put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(out_t *o, const char *fmt, ...)
{
    va_list ap;
    if (o->len + 1 >= o->cap)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0 && o->len + (size_t)n < o->cap)
        o->len += (size_t)n;
    else if (n > 0)
        o->len = mf_utf8_cut_tail(o->buf, o->cap - 1); /* cut between UTF-8 characters: messages must stay UTF-8 */
}

static void fmt_value(out_t *o, const bson_value_t *v, int depth);

static void
fmt_container(out_t *o, const uint8_t *data, uint32_t len, bool array, int depth)
{
    bson_t b;
    bson_iter_t it;
    bool first = true;
    if (depth > 20 || !bson_init_static(&b, data, len) || !bson_iter_init(&it, &b)) {
        put(o, array ? "[]" : "{}");
        return;
    }
    put(o, array ? "[" : "{");
    while (bson_iter_next(&it)) {
        put(o, first ? " " : ", ");
        first = false;
        if (!array)
            put(o, "%s: ", bson_iter_key(&it));
        fmt_value(o, bson_iter_value(&it), depth + 1);
    }
    put(o, first ? "%s" : " %s", array ? "]" : "}");
}

static void
fmt_value(out_t *o, const bson_value_t *v, int depth)
{
    char oid[25];
    switch (v->value_type) {
    case BSON_TYPE_DOUBLE: {
        char b[40];
        mf_fmt_double(v->value.v_double, b, sizeof(b));
        put(o, "%s", b);
        break;
    }
    case BSON_TYPE_INT32:
        put(o, "%d", v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        put(o, "%" PRId64, v->value.v_int64);
        break;
    case BSON_TYPE_UTF8: {
        /*
         * As mongod's BSONElement::toString (not full): a string of 160 bytes
         * or more shows its first 150 and "...", here ending on a whole
         * UTF-8 character (mongod cuts bytes; a reply must stay valid UTF-8).
         */
        uint32_t n = v->value.v_utf8.len;
        const char *str = v->value.v_utf8.str;
        if (n >= 160) {
            n = 150;
            while (n > 0 && ((unsigned char)str[n] & 0xC0) == 0x80)
                n--;
            put(o, "\"%.*s...\"", (int)n, str);
        } else {
            put(o, "\"%.*s\"", (int)n, str);
        }
        break;
    }
    case BSON_TYPE_OID:
        bson_oid_to_string(&v->value.v_oid, oid);
        put(o, "ObjectId('%s')", oid);
        break;
    case BSON_TYPE_BOOL:
        put(o, v->value.v_bool ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
        put(o, "null");
        break;
    case BSON_TYPE_UNDEFINED:
        put(o, "undefined");
        break;
    case BSON_TYPE_DATE_TIME:
        put(o, "new Date(%" PRId64 ")", v->value.v_datetime);
        break;
    case BSON_TYPE_DOCUMENT:
        fmt_container(o, v->value.v_doc.data, v->value.v_doc.data_len, false, depth);
        break;
    case BSON_TYPE_ARRAY:
        fmt_container(o, v->value.v_doc.data, v->value.v_doc.data_len, true, depth);
        break;
    case BSON_TYPE_TIMESTAMP:
        put(o, "Timestamp(%u, %u)", v->value.v_timestamp.timestamp, v->value.v_timestamp.increment);
        break;
    case BSON_TYPE_MINKEY:
        put(o, "MinKey");
        break;
    case BSON_TYPE_MAXKEY:
        put(o, "MaxKey");
        break;
    case BSON_TYPE_DECIMAL128: {
        char s[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, s);
        put(o, "%s", s);
        break;
    }
    case BSON_TYPE_REGEX:
        put(o, "/%s/%s", v->value.v_regex.regex, v->value.v_regex.options ? v->value.v_regex.options : "");
        break;
    default:
        put(o, "<type %d>", (int)v->value_type);
        break;
    }
}

void
mf_fmt_double(double d, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%.16g", d);
    if (n >= 0 && (size_t)n + 3 <= cap && !strchr(buf, '.') && !strchr(buf, 'E') && !strchr(buf, 'N'))
        memcpy(buf + n, ".0", 3);
}

void
mf_fmt_value(const bson_value_t *v, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0};
    if (cap)
        buf[0] = '\0';
    fmt_value(&o, v, 0);
}

void
mf_fmt_doc(const bson_t *doc, char *buf, size_t cap)
{
    out_t o = {buf, cap, 0};
    const uint8_t *data = bson_get_data(doc);
    uint32_t len;
    if (cap)
        buf[0] = '\0';
    /* The length from the bytes: callers sometimes hold a bson_t in memory not aligned as libbson declares. */
    memcpy(&len, data, 4);
    fmt_container(&o, data, BSON_UINT32_FROM_LE(len), false, 0);
}

void
mf_fmt_sockaddr(const struct sockaddr_storage *ss, char *ip, size_t cap, int *port)
{
    snprintf(ip, cap, "?");
    *port = 0;
    if (ss != NULL && ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, (socklen_t)cap);
        *port = ntohs(a->sin_port);
    } else if (ss != NULL && ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, (socklen_t)cap);
        *port = ntohs(a->sin6_port);
    }
}

void
mf_fmt_uuid(const uint8_t u[16], char out[37])
{
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
             u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

void
mf_append_number(bson_t *out, const char *key, int64_t v)
{
    if (v > -(1LL << 30) && v < (1LL << 30))
        BSON_APPEND_INT32(out, key, (int32_t)v);
    else
        BSON_APPEND_INT64(out, key, v);
}
