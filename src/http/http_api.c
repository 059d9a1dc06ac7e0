/*
 * http_api.c: what the HTTP port answers (SPEC I1; see http.h).
 *
 *   GET  /, /console.js, /console.css   the console page (embedded files)
 *   GET  /api/ttl     every TTL index with its next due time and backlog,
 *                     plus serverStatus().metrics.ttl's counters
 *   POST /api/ttl     {db, collection, key, expireAfterSeconds[, archive]}:
 *                     creates a TTL index (createIndexes)
 *   PATCH /api/ttl    {db, collection, name, expireAfterSeconds | archive}:
 *                     changes one (collMod)
 *   GET  /metrics     Prometheus text exposition format 0.0.4
 *
 * Access: with access control off, reads are open and writes are taken only
 * from loopback (403 otherwise). Whatever a web page in a browser on the
 * same machine could make the browser send is refused (browser_guard):
 * writes need Content-Type application/json and the console's own origin,
 * and with access control off a Host naming something other than an
 * address, localhost or this machine is 403 (DNS rebinding). Responses
 * forbid framing (X-Frame-Options, CSP frame-ancestors). With it on, every request, the console's
 * files included (so the browser asks at once), needs HTTP Basic credentials of a user (401 with WWW-Authenticate
 * otherwise). They are checked by a real SCRAM conversation with the command
 * layer (saslStart/saslContinue through mf_cmd_run, the client side of
 * auth/scram.c), so the request then runs as that user and every command it
 * makes is authorized as it would be from a driver: reads need
 * serverStatus's privilege (clusterMonitor), writes those of createIndexes
 * or collMod (403 with code 13 otherwise). Users are looked up in admin.
 *
 * Errors are JSON {error, code, codeName} with MongoDB's message and code;
 * the HTTP status follows the code (13 → 403, 18 → 401, 26/27 → 404, else
 * 400). JSON is read by libbson (bson_init_from_json) and written here from
 * BSON (dates as ISO-8601 strings, 64-bit integers as numbers).
 */
#include "common/alloc.h"
#include "http/http.h"

#include <http_parser.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "auth/saslprep.h"
#include "auth/scram.h"
#include "doc/value.h"
#include "index/index_spec.h"
#include "ttl/ttl.h"

#define JSON_TYPE "application/json; charset=utf-8"
#define PROM_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---------- writing text ---------- */

typedef mf_http_buf_t sbuf_t;

static void
sb_add(sbuf_t *b, const char *s)
{
    mf_http_buf_add(b, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3)))
sb_printf(sbuf_t *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(tmp)) {
        mf_http_buf_add(b, tmp, (size_t)n);
        return;
    }
    char *big = mf_malloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    mf_http_buf_add(b, big, (size_t)n);
    free(big);
}

/* ---------- JSON out ---------- */

/*
 * A JSON string. Text that is not valid UTF-8 (an error message cut inside a
 * character, a request's own bytes quoted back) has its non-ASCII bytes
 * written as '?', so the answer is always valid JSON in UTF-8.
 */
static void
json_string(sbuf_t *b, const char *s, size_t n)
{
    bool valid = bson_utf8_validate(s, n, true);
    sb_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80 && !valid) {
            sb_add(b, "?");
        } else if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            mf_http_buf_add(b, e, 2);
        } else if (ch < 0x20) {
            sb_printf(b, "\\u%04x", ch);
        } else {
            mf_http_buf_add(b, (const char *)&s[i], 1);
        }
    }
    sb_add(b, "\"");
}

/* An ISO-8601 UTC time with milliseconds, as JavaScript's Date#toJSON writes it. */
static void
iso_date(int64_t ms, char *out, size_t cap)
{
    int64_t secs = ms / 1000, milli = ms % 1000;
    if (milli < 0) {
        milli += 1000;
        secs -= 1;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL) {
        snprintf(out, cap, "%lld", (long long)ms);
        return;
    }
    snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)milli);
}

static void json_doc(sbuf_t *b, const bson_t *doc, bool array);

static void
json_value(sbuf_t *b, bson_iter_t *it)
{
    char tmp[64];
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        uint32_t n;
        const char *s = bson_iter_utf8(it, &n);
        json_string(b, s, n);
        break;
    }
    case BSON_TYPE_INT32:
        sb_printf(b, "%d", bson_iter_int32(it));
        break;
    case BSON_TYPE_INT64:
        sb_printf(b, "%lld", (long long)bson_iter_int64(it));
        break;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (isfinite(d))
            sb_printf(b, "%.17g", d);
        else
            sb_add(b, "null");
        break;
    }
    case BSON_TYPE_BOOL:
        sb_add(b, bson_iter_bool(it) ? "true" : "false");
        break;
    case BSON_TYPE_DATE_TIME:
        iso_date(bson_iter_date_time(it), tmp, sizeof(tmp));
        json_string(b, tmp, strlen(tmp));
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY: {
        bson_t sub;
        const uint8_t *data;
        uint32_t len;
        bool arr = BSON_ITER_HOLDS_ARRAY(it);
        if (arr)
            bson_iter_array(it, &len, &data);
        else
            bson_iter_document(it, &len, &data);
        if (bson_init_static(&sub, data, len))
            json_doc(b, &sub, arr);
        else
            sb_add(b, "null");
        break;
    }
    default:
        sb_add(b, "null");
        break;
    }
}

/* Writes doc as a JSON object (array: a JSON array). Fields starting with '$' and operationTime are left out. */
static void
json_doc(sbuf_t *b, const bson_t *doc, bool array)
{
    bson_iter_t it;
    bool first = true;
    sb_add(b, array ? "[" : "{");
    if (bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (!array && (k[0] == '$' || strcmp(k, "operationTime") == 0))
                continue;
            if (!first)
                sb_add(b, ",");
            first = false;
            if (!array) {
                json_string(b, k, bson_iter_key_len(&it));
                sb_add(b, ":");
            }
            json_value(b, &it);
        }
    }
    sb_add(b, array ? "]" : "}");
}

/* ---------- responses ---------- */

static void
respond_json(mf_http_resp_t *r, int status, const bson_t *doc)
{
    sbuf_t b = {0};
    json_doc(&b, doc, false);
    sb_add(&b, "\n");
    r->status = status;
    r->content_type = JSON_TYPE;
    r->body = b.p;
    r->body_len = b.len;
}

static int
status_of_code(int code)
{
    switch (code) {
    case MF_E_Unauthorized:
        return 403;
    case MF_E_AuthenticationFailed:
        return 401;
    case MF_E_NamespaceNotFound:
    case MF_E_IndexNotFound:
        return 404;
    default:
        return 400;
    }
}

static void
respond_error(mf_http_resp_t *r, int code, const char *msg)
{
    bson_t d = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&d, "error", msg);
    BSON_APPEND_INT32(&d, "code", code);
    BSON_APPEND_UTF8(&d, "codeName", mf_err_codename(code));
    respond_json(r, status_of_code(code), &d);
    bson_destroy(&d);
}

static void
respond_err(mf_http_resp_t *r, const mf_error_t *err)
{
    respond_error(r, err->code, err->msg);
}

/* A command's reply: ok → 200 with the reply; else the error with its status. */
static void
respond_reply(mf_http_resp_t *r, const bson_t *reply)
{
    bson_iter_t it;
    double ok = bson_iter_init_find(&it, reply, "ok") ? bson_iter_as_double(&it) : 0;
    if (ok == 1) {
        respond_json(r, 200, reply);
        return;
    }
    int code = bson_iter_init_find(&it, reply, "code") ? (int)bson_iter_as_int64(&it) : 8;
    const char *msg = bson_iter_init_find(&it, reply, "errmsg") && BSON_ITER_HOLDS_UTF8(&it)
                          ? bson_iter_utf8(&it, NULL) : "command failed";
    respond_error(r, code, msg);
}

static void
respond_text(mf_http_resp_t *r, int status, const char *text)
{
    r->status = status;
    r->content_type = "text/plain; charset=utf-8";
    r->body = mf_strdup(text);
    r->body_len = strlen(text);
}

/* ---------- authentication (HTTP Basic over SCRAM) ---------- */

/* Runs one SASL step; returns the server's payload (a view into reply) or NULL. */
static const char *
sasl_step(mf_engine_t *eng, mf_client_t *cl, const bson_t *cmd, bson_t *reply, uint32_t *plen, int32_t *conv)
{
    bson_iter_t it;
    const uint8_t *p = NULL;
    bson_subtype_t sub;

    bson_reinit(reply);
    mf_cmd_run(eng, cl, "admin", cmd, NULL, 0, false, reply);
    if (!bson_iter_init_find(&it, reply, "ok") || bson_iter_as_double(&it) != 1)
        return NULL;
    if (bson_iter_init_find(&it, reply, "conversationId"))
        *conv = (int32_t)bson_iter_as_int64(&it);
    if (!bson_iter_init_find(&it, reply, "payload") || !BSON_ITER_HOLDS_BINARY(&it))
        return NULL;
    bson_iter_binary(&it, &sub, plen, &p);
    return (const char *)p;
}

/*
 * Logs cl in as user with password through SCRAM mechanism mech, deriving
 * the proof as a driver does: SHA-1 from hex(MD5(user:mongo:password)),
 * SHA-256 from the SASLprep'd password (a password SASLprep refuses cannot
 * have a SHA-256 credential). Returns 0 or -1.
 */
static int
scram_login(mf_engine_t *eng, mf_client_t *cl, mf_scram_mech_t mech, const char *user, const char *password)
{
    mf_scram_t *s = mf_scram_new(mech);
    char *first = NULL, *final = NULL, *prepped = NULL, sha1pw[33] = "";
    bson_t cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER, opts;
    const char *p;
    uint32_t plen;
    int32_t conv = 0;
    mf_error_t err;
    int rc = -1;

    if (mf_scram_client_begin(s, user, &first, &err) != 0)
        goto out;
    BSON_APPEND_INT32(&cmd, "saslStart", 1);
    BSON_APPEND_UTF8(&cmd, "mechanism", mech == MF_SCRAM_SHA1 ? "SCRAM-SHA-1" : "SCRAM-SHA-256");
    bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)first, (uint32_t)strlen(first));
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "options", &opts);
    BSON_APPEND_BOOL(&opts, "skipEmptyExchange", true);
    bson_append_document_end(&cmd, &opts);
    if ((p = sasl_step(eng, cl, &cmd, &reply, &plen, &conv)) == NULL)
        goto out;
    if (mech == MF_SCRAM_SHA1)
        mf_scram_sha1_password(user, password, sha1pw);
    else if (mf_saslprep_prepare(eng->saslprep, password, strlen(password), &prepped, &err) != 0)
        goto out;
    if (mf_scram_client_respond(s, mech == MF_SCRAM_SHA1 ? sha1pw : prepped, p, plen, &final, &err) != 0)
        goto out;
    bson_reinit(&cmd);
    BSON_APPEND_INT32(&cmd, "saslContinue", 1);
    BSON_APPEND_INT32(&cmd, "conversationId", conv);
    bson_append_binary(&cmd, "payload", -1, BSON_SUBTYPE_BINARY, (const uint8_t *)final, (uint32_t)strlen(final));
    if ((p = sasl_step(eng, cl, &cmd, &reply, &plen, &conv)) == NULL)
        goto out;
    if (mf_scram_client_check(s, p, plen, &err) != 0)
        goto out;
    rc = 0;
out:
    OPENSSL_cleanse(sha1pw, sizeof(sha1pw));
    if (prepped != NULL)
        OPENSSL_cleanse(prepped, strlen(prepped));
    free(prepped);
    free(first);
    free(final);
    bson_destroy(&cmd);
    bson_destroy(&reply);
    mf_scram_free(s);
    return rc;
}

/*
 * True when host (a Host header: name or address, then an optional port)
 * names this machine the way a browser does only when the user typed it:
 * an IPv4 or IPv6 address, localhost, or the machine's own host name, short
 * or in any domain (a scraper may use the qualified name). A web page that
 * points a name of its own at 127.0.0.1 (DNS rebinding) sends that name,
 * and is refused unless it guessed the machine's name.
 */
static bool
host_is_local(const char *host)
{
    char name[256], me[256];
    size_t n;

    if (host == NULL)
        return true; /* HTTP/1.0 without Host: no browser sends that */
    if (host[0] == '[')
        return strchr(host, ']') != NULL;
    n = strcspn(host, ":");
    if (n == 0 || n >= sizeof(name))
        return false;
    memcpy(name, host, n);
    name[n] = '\0';
    struct in_addr a4;
    if (inet_pton(AF_INET, name, &a4) == 1 || strcasecmp(name, "localhost") == 0)
        return true;
    if (gethostname(me, sizeof(me)) != 0)
        return false;
    me[sizeof(me) - 1] = '\0';
    /* The host name, short or qualified ("db1" and "db1.example.net" for a machine named either). */
    size_t nl = strcspn(name, "."), ml = strcspn(me, ".");
    return nl == ml && strncasecmp(name, me, nl) == 0;
}

/* The media type of a Content-Type header (before any ';'), compared without case or spaces. */
static bool
content_type_is(const char *ct, const char *type)
{
    size_t n = strlen(type);
    if (ct == NULL)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, type, n) != 0)
        return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

/*
 * What a web page open in a browser on this machine could make it send on
 * its own is refused (cross-site request forgery; DNS rebinding): with
 * access control off, a Host that is not an address, localhost or this
 * machine's name (403); and every write needs Content-Type
 * application/json (415: a browser asks first, CORS's preflight, which
 * this port never allows) and, from a browser, to come from the console's
 * own origin (Sec-Fetch-Site same-origin or none, an Origin equal to
 * http(s)://Host; 403). Returns 0, or -1 with resp filled.
 */
static int
browser_guard(mf_engine_t *eng, const mf_http_req_t *req, bool write, mf_http_resp_t *resp)
{
    if (!eng->auth_enabled && !host_is_local(req->host)) {
        respond_error(resp, MF_E_Unauthorized,
                      "the Host header names neither an address nor this machine; with access control off the HTTP "
                      "port answers only requests sent to an address, localhost or the host name");
        return -1;
    }
    if (!write)
        return 0;
    if (!content_type_is(req->content_type, "application/json")) {
        respond_error(resp, MF_E_BadValue, "a write through the HTTP port needs Content-Type: application/json");
        resp->status = 415;
        return -1;
    }
    bool cross = req->fetch_site != NULL && strcasecmp(req->fetch_site, "same-origin") != 0 &&
                 strcasecmp(req->fetch_site, "none") != 0;
    if (!cross && req->origin != NULL) {
        const char *o = req->origin, *h = req->host;
        size_t skip = strncasecmp(o, "http://", 7) == 0 ? 7 : strncasecmp(o, "https://", 8) == 0 ? 8 : 0;
        cross = skip == 0 || h == NULL || strcasecmp(o + skip, h) != 0;
    }
    if (cross) {
        respond_error(resp, MF_E_Unauthorized,
                      "cross-origin write refused: writes through the HTTP port come from the console's own page");
        return -1;
    }
    return 0;
}

/*
 * Sets up cl for req: with access control off a trusted client (writes only
 * from loopback); with it on, a network client logged in with the request's
 * Basic credentials. Returns 0, or -1 with resp filled (401/403).
 */
static int
client_for(mf_engine_t *eng, const mf_http_req_t *req, bool write, mf_client_t *cl, mf_http_resp_t *resp)
{
    memset(cl, 0, sizeof(*cl));
    cl->id = -1;
    snprintf(cl->remote, sizeof(cl->remote), "%s", req->remote);
    cl->loopback = req->loopback;
    if (!eng->auth_enabled) {
        if (write && !req->loopback) {
            respond_error(resp, MF_E_Unauthorized,
                          "writes through the HTTP port are accepted only from localhost unless access control "
                          "(--auth) is on");
            return -1;
        }
        return 0; /* not a network client: the command layer trusts it */
    }
    cl->net = true;
    const char *a = req->authorization;
    if (a == NULL || strncasecmp(a, "Basic ", 6) != 0) {
        respond_error(resp, MF_E_AuthenticationFailed, "authentication required: use HTTP Basic with a user's name and password");
        resp->www_authenticate = true;
        return -1;
    }
    a += 6;
    while (*a == ' ')
        a++;
    size_t n = strlen(a);
    unsigned char *dec = mf_malloc(n + 4);
    int dl = n > 0 && n % 4 == 0 && n < 4096 ? EVP_DecodeBlock(dec, (const unsigned char *)a, (int)n) : -1;
    if (dl >= 0) {
        /* EVP_DecodeBlock counts padding as data: at most two '=' end a valid block. */
        int pad = 0;
        for (size_t i = n; i > 0 && a[i - 1] == '=' && pad < 3; i--)
            pad++;
        dl = pad > 2 || pad > dl ? -1 : dl - pad;
        if (dl >= 0)
            dec[dl] = '\0';
    }
    char *colon = dl > 0 ? memchr(dec, ':', (size_t)dl) : NULL;
    int rc = -1;
    if (colon == NULL || memchr(dec, '\0', (size_t)dl) != NULL) {
        respond_error(resp, MF_E_AuthenticationFailed, "malformed Basic credentials");
        resp->www_authenticate = true;
        goto out;
    }
    *colon = '\0';
    const char *user = (const char *)dec, *pw = colon + 1;
    /* SHA-256 first (the default), then SHA-1 for a user that has only that. */
    if (scram_login(eng, cl, MF_SCRAM_SHA256, user, pw) != 0 && scram_login(eng, cl, MF_SCRAM_SHA1, user, pw) != 0) {
        respond_error(resp, MF_E_AuthenticationFailed, "Authentication failed.");
        resp->www_authenticate = true;
        goto out;
    }
    rc = 0;
out:
    OPENSSL_cleanse(dec, n + 4);
    free(dec);
    if (rc != 0)
        mf_client_release(cl);
    return rc;
}

/* ---------- request bodies ---------- */

/* Parses req's body as a JSON object into doc. Returns 0, or -1 with resp filled (400, code 9). */
static int
body_doc(const mf_http_req_t *req, bson_t *doc, mf_http_resp_t *resp)
{
    bson_error_t e;
    if (req->body_len == 0 || !bson_init_from_json(doc, req->body, (ssize_t)req->body_len, &e)) {
        char msg[600];
        snprintf(msg, sizeof(msg), "the request body must be a JSON object: %s",
                 req->body_len == 0 ? "it is empty" : e.message);
        respond_error(resp, MF_E_FailedToParse, msg);
        return -1;
    }
    return 0;
}

/* A required string field f of doc; NULL with resp filled if missing or not a non-empty string. */
static const char *
need_string(const bson_t *doc, const char *f, mf_http_resp_t *resp)
{
    bson_iter_t it;
    char msg[200];
    if (!bson_iter_init_find(&it, doc, f)) {
        snprintf(msg, sizeof(msg), "BSON field '%s' is missing but a required field", f);
        respond_error(resp, 40414, msg);
        return NULL;
    }
    uint32_t len = 0;
    if (!BSON_ITER_HOLDS_UTF8(&it) || bson_iter_utf8(&it, &len)[0] == '\0' || strlen(bson_iter_utf8(&it, NULL)) != len) {
        /* A NUL inside would cut the name the command sees: refused, not truncated. */
        snprintf(msg, sizeof(msg), "BSON field '%s' is the wrong type '%s', expected a non-empty string", f,
                 mf_type_name(bson_iter_type(&it)));
        respond_error(resp, MF_E_TypeMismatch, msg);
        return NULL;
    }
    return bson_iter_utf8(&it, NULL);
}

/* Checks doc's expireAfterSeconds (if present, or if required): 67 as createIndexes gives it. */
static int
check_seconds(const bson_t *doc, bool required, bool *present, bson_value_t *v, mf_http_resp_t *resp)
{
    bson_iter_t it;
    mf_error_t err;
    int32_t secs;
    *present = bson_iter_init_find(&it, doc, "expireAfterSeconds");
    if (!*present) {
        if (required)
            respond_error(resp, 40414, "BSON field 'expireAfterSeconds' is missing but a required field");
        return required ? -1 : 0;
    }
    bson_value_copy(bson_iter_value(&it), v);
    if (mf_ttl_check_seconds(v, &secs, &err) != 0) {
        bson_value_destroy(v);
        *present = false; /* nothing left for the caller to free */
        respond_err(resp, &err);
        return -1;
    }
    return 0;
}

/* ---------- the API ---------- */

/* The caller's view of serverStatus (as that user when access control is on). Returns 0, or -1 with resp. */
static int
server_status(mf_engine_t *eng, mf_client_t *cl, bson_t *reply, mf_http_resp_t *resp)
{
    bson_t cmd = BSON_INITIALIZER;
    bson_iter_t it;
    BSON_APPEND_INT32(&cmd, "serverStatus", 1);
    mf_cmd_run(eng, cl, "admin", &cmd, NULL, 0, false, reply);
    bson_destroy(&cmd);
    if (bson_iter_init_find(&it, reply, "ok") && bson_iter_as_double(&it) == 1)
        return 0;
    respond_reply(resp, reply);
    return -1;
}

static void
api_ttl_get(mf_engine_t *eng, mf_client_t *cl, mf_http_resp_t *resp)
{
    bson_t st = BSON_INITIALIZER, out = BSON_INITIALIZER, arr, ttl;
    bson_iter_t it, sub;

    if (server_status(eng, cl, &st, resp) != 0)
        goto out;
    BSON_APPEND_ARRAY_BEGIN(&out, "indexes", &arr);
    mf_ttl_indexes_append(eng->ttl, &arr);
    bson_append_array_end(&out, &arr);
    /* Then serverStatus().metrics.ttl's fields, under the same names. */
    if (bson_iter_init_find(&it, &st, "metrics") && BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &sub) &&
        bson_iter_find(&sub, "ttl") && BSON_ITER_HOLDS_DOCUMENT(&sub)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&sub, &len, &data);
        if (bson_init_static(&ttl, data, len))
            bson_concat(&out, &ttl);
    }
    respond_json(resp, 200, &out);
out:
    bson_destroy(&st);
    bson_destroy(&out);
}

/* POST /api/ttl: {db, collection, key, expireAfterSeconds[, archive]} → createIndexes. */
static void
api_ttl_post(mf_engine_t *eng, mf_client_t *cl, const mf_http_req_t *req, mf_http_resp_t *resp)
{
    bson_t body, cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER, arr, ix, key;
    bson_iter_t it;
    bson_value_t secs = {0};
    bool have_secs = false;
    char name[600];

    if (body_doc(req, &body, resp) != 0)
        goto done;
    const char *db = need_string(&body, "db", resp);
    const char *coll = db ? need_string(&body, "collection", resp) : NULL;
    if (coll == NULL)
        goto out;
    /* key: a field name, or {field: 1 | -1}. The console's form names it "field". */
    bson_init(&key);
    if ((bson_iter_init_find(&it, &body, "key") || bson_iter_init_find(&it, &body, "field")) &&
        BSON_ITER_HOLDS_UTF8(&it) && bson_iter_utf8(&it, NULL)[0] != '\0') {
        uint32_t flen;
        const char *field = bson_iter_utf8(&it, &flen);
        if (strlen(field) != flen || flen > sizeof(name) - 8) {
            respond_error(resp, MF_E_CannotCreateIndex,
                          "the key's field name must have no NUL and at most 590 bytes");
            bson_destroy(&key);
            goto out;
        }
        BSON_APPEND_INT32(&key, bson_iter_utf8(&it, NULL), 1);
        snprintf(name, sizeof(name), "%s_1", bson_iter_utf8(&it, NULL));
    } else if (bson_iter_init_find(&it, &body, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_t k;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&k, data, len) || bson_count_keys(&k) == 0) {
            respond_error(resp, MF_E_CannotCreateIndex, "the index key must name a field");
            bson_destroy(&key);
            goto out;
        }
        bson_copy_to_excluding_noinit(&k, &key, "", NULL);
        bson_iter_t kit;
        bson_iter_init(&kit, &k);
        bson_iter_next(&kit);
        if (strlen(bson_iter_key(&kit)) > sizeof(name) - 32) {
            respond_error(resp, MF_E_CannotCreateIndex, "the key's field name must have at most 568 bytes");
            bson_destroy(&key);
            goto out;
        }
        snprintf(name, sizeof(name), "%s_%lld", bson_iter_key(&kit),
                 BSON_ITER_HOLDS_NUMBER(&kit) ? (long long)bson_iter_as_int64(&kit) : 1LL);
    } else {
        respond_error(resp, 40414, "BSON field 'key' is missing but a required field (a field name, or {field: 1})");
        bson_destroy(&key);
        goto out;
    }
    if (check_seconds(&body, true, &have_secs, &secs, resp) != 0) {
        bson_destroy(&key);
        goto out;
    }
    BSON_APPEND_UTF8(&cmd, "createIndexes", coll);
    BSON_APPEND_ARRAY_BEGIN(&cmd, "indexes", &arr);
    BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &ix);
    BSON_APPEND_DOCUMENT(&ix, "key", &key);
    BSON_APPEND_UTF8(&ix, "name", name);
    BSON_APPEND_VALUE(&ix, "expireAfterSeconds", &secs);
    if (bson_iter_init_find(&it, &body, "archive"))
        BSON_APPEND_VALUE(&ix, "archive", bson_iter_value(&it));
    bson_append_document_end(&arr, &ix);
    bson_append_array_end(&cmd, &arr);
    bson_destroy(&key);
    mf_cmd_run(eng, cl, db, &cmd, NULL, 0, false, &reply);
    if (bson_iter_init_find(&it, &reply, "ok") && bson_iter_as_double(&it) == 1) {
        bson_t ok = BSON_INITIALIZER;
        BSON_APPEND_INT32(&ok, "ok", 1);
        BSON_APPEND_UTF8(&ok, "name", name);
        if (bson_iter_init_find(&it, &reply, "note"))
            BSON_APPEND_VALUE(&ok, "note", bson_iter_value(&it));
        respond_json(resp, 200, &ok);
        bson_destroy(&ok);
    } else {
        respond_reply(resp, &reply);
    }
out:
    if (have_secs)
        bson_value_destroy(&secs);
    bson_destroy(&body);
done:
    bson_destroy(&cmd);
    bson_destroy(&reply);
}

/* PATCH /api/ttl: {db, collection, name, expireAfterSeconds and/or archive} → collMod. */
static void
api_ttl_patch(mf_engine_t *eng, mf_client_t *cl, const mf_http_req_t *req, mf_http_resp_t *resp)
{
    bson_t body, cmd = BSON_INITIALIZER, reply = BSON_INITIALIZER, ix;
    bson_iter_t it;
    bson_value_t secs = {0};
    bool have_secs = false;

    if (body_doc(req, &body, resp) != 0)
        goto done;
    const char *db = need_string(&body, "db", resp);
    const char *coll = db ? need_string(&body, "collection", resp) : NULL;
    const char *name = coll ? need_string(&body, "name", resp) : NULL;
    if (name == NULL)
        goto out;
    if (check_seconds(&body, false, &have_secs, &secs, resp) != 0)
        goto out;
    bool archive = bson_iter_init_find(&it, &body, "archive");
    if (!have_secs && !archive) {
        respond_error(resp, MF_E_InvalidOptions, "give expireAfterSeconds or archive to change");
        goto out;
    }
    BSON_APPEND_UTF8(&cmd, "collMod", coll);
    BSON_APPEND_DOCUMENT_BEGIN(&cmd, "index", &ix);
    BSON_APPEND_UTF8(&ix, "name", name);
    if (have_secs)
        BSON_APPEND_VALUE(&ix, "expireAfterSeconds", &secs);
    if (archive)
        BSON_APPEND_VALUE(&ix, "archive", bson_iter_value(&it));
    bson_append_document_end(&cmd, &ix);
    mf_cmd_run(eng, cl, db, &cmd, NULL, 0, false, &reply);
    respond_reply(resp, &reply);
out:
    if (have_secs)
        bson_value_destroy(&secs);
    bson_destroy(&body);
done:
    bson_destroy(&cmd);
    bson_destroy(&reply);
}

/* ---------- /metrics ---------- */

/* A number at dotted path in doc, or def. */
static double
num_at(const bson_t *doc, const char *path, double def)
{
    bson_iter_t it, d;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, &d) &&
        (BSON_ITER_HOLDS_NUMBER(&d) || BSON_ITER_HOLDS_BOOL(&d)))
        return bson_iter_as_double(&d);
    return def;
}

static void
family(sbuf_t *b, const char *name, const char *type, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value, escaped as the exposition format wants (\\, \", \n). */
static void
label(sbuf_t *b, const char *k, const char *v, size_t n, bool first)
{
    sb_printf(b, "%s%s=\"", first ? "" : ",", k);
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\\')
            sb_add(b, "\\\\");
        else if (v[i] == '"')
            sb_add(b, "\\\"");
        else if (v[i] == '\n')
            sb_add(b, "\\n");
        else
            mf_http_buf_add(b, &v[i], 1);
    }
    sb_add(b, "\"");
}

static void
sample(sbuf_t *b, const char *name, double v)
{
    sb_printf(b, "%s %.17g\n", name, v);
}

/* Emits one series per element of the array at path in doc: labels db, collection (and index), value field vf. */
static void
per_index(sbuf_t *b, const bson_t *indexes, const char *name, const char *vf, bool with_index)
{
    bson_iter_t it, e;
    if (!bson_iter_init(&it, indexes))
        return;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &e))
            continue;
        const char *db = "", *coll = "", *ix = "";
        uint32_t dl = 0, cl = 0, il = 0;
        double v = 0;
        bool have = false;
        while (bson_iter_next(&e)) {
            const char *k = bson_iter_key(&e);
            if (strcmp(k, "db") == 0 && BSON_ITER_HOLDS_UTF8(&e))
                db = bson_iter_utf8(&e, &dl);
            else if (strcmp(k, "collection") == 0 && BSON_ITER_HOLDS_UTF8(&e))
                coll = bson_iter_utf8(&e, &cl);
            else if (strcmp(k, "name") == 0 && BSON_ITER_HOLDS_UTF8(&e))
                ix = bson_iter_utf8(&e, &il);
            else if (strcmp(k, vf) == 0 && BSON_ITER_HOLDS_NUMBER(&e)) {
                v = bson_iter_as_double(&e);
                have = true;
            } else if (strcmp(k, vf) == 0 && BSON_ITER_HOLDS_DATE_TIME(&e)) {
                v = (double)bson_iter_date_time(&e) / 1000.0;
                have = true;
            }
        }
        if (!have)
            continue;
        sb_add(b, name);
        sb_add(b, "{");
        label(b, "db", db, dl, true);
        label(b, "collection", coll, cl, false);
        if (with_index)
            label(b, "index", ix, il, false);
        sb_printf(b, "} %.17g\n", v);
    }
}

/* The lateness histogram: fixed buckets 1 ms .. 2^20 ms, cumulative, from metrics.ttl.lateness. */
static void
lateness_histogram(sbuf_t *b, const bson_t *st)
{
    enum { NB = 21 };
    double cum[NB] = {0};
    bson_iter_t it, h;
    double count = num_at(st, "metrics.ttl.lateness.count", 0);
    double sum_ms = num_at(st, "metrics.ttl.lateness.sumMs", 0);

    if (bson_iter_init(&it, st) && bson_iter_find_descendant(&it, "metrics.ttl.lateness.histogram", &h) &&
        BSON_ITER_HOLDS_DOCUMENT(&h)) {
        bson_iter_t e;
        bson_iter_recurse(&h, &e);
        while (bson_iter_next(&e)) {
            long long lt = 0;
            if (sscanf(bson_iter_key(&e), "lt%lldms", &lt) != 1 || lt <= 0)
                continue;
            int bucket = 0;
            while (bucket < 63 && (1LL << bucket) < lt)
                bucket++;
            for (int i = bucket; i < NB; i++)
                cum[i] += bson_iter_as_double(&e);
        }
    }
    family(b, "mayfly_ttl_lateness_seconds", "histogram",
           "How long after its expiry time each document was deleted (SPEC D8).");
    for (int i = 0; i < NB; i++)
        sb_printf(b, "mayfly_ttl_lateness_seconds_bucket{le=\"%lld.%03lld\"} %.17g\n", (1LL << i) / 1000,
                  (1LL << i) % 1000, cum[i] < count ? cum[i] : count);
    sb_printf(b, "mayfly_ttl_lateness_seconds_bucket{le=\"+Inf\"} %.17g\n", count);
    sb_printf(b, "mayfly_ttl_lateness_seconds_sum %.17g\n", sum_ms / 1000.0);
    sb_printf(b, "mayfly_ttl_lateness_seconds_count %.17g\n", count);
}

static void
metrics_get(mf_engine_t *eng, mf_client_t *cl, mf_http_resp_t *resp)
{
    bson_t st = BSON_INITIALIZER, indexes = BSON_INITIALIZER, archive;
    bson_iter_t it;
    sbuf_t b = {0};
    static const char *const ops[] = {"insert", "query", "update", "delete", "getmore", "command"};

    if (server_status(eng, cl, &st, resp) != 0)
        goto out;
    mf_ttl_indexes_append(eng->ttl, &indexes);

    family(&b, "mayfly_ttl_deleted_documents_total", "counter", "Documents the TTL monitor has deleted.");
    sample(&b, "mayfly_ttl_deleted_documents_total", num_at(&st, "metrics.ttl.deletedDocuments", 0));
    family(&b, "mayfly_ttl_passes_total", "counter", "TTL monitor passes.");
    sample(&b, "mayfly_ttl_passes_total", num_at(&st, "metrics.ttl.passes", 0));
    family(&b, "mayfly_ttl_subpasses_total", "counter", "TTL monitor sub-passes.");
    sample(&b, "mayfly_ttl_subpasses_total", num_at(&st, "metrics.ttl.subPasses", 0));
    family(&b, "mayfly_ttl_backlog_documents", "gauge", "Documents due for deletion now, per TTL index.");
    per_index(&b, &indexes, "mayfly_ttl_backlog_documents", "backlog", true);
    family(&b, "mayfly_ttl_next_due_timestamp_seconds", "gauge",
           "When each TTL index next has a document due (Unix time); absent when none is indexed by a date.");
    per_index(&b, &indexes, "mayfly_ttl_next_due_timestamp_seconds", "nextDueAt", true);
    family(&b, "mayfly_ttl_deletes_per_second", "gauge", "TTL deletions per second over the last 10 seconds.");
    sample(&b, "mayfly_ttl_deletes_per_second", num_at(&st, "metrics.ttl.deletesPerSecond", 0));
    lateness_histogram(&b, &st);

    family(&b, "mayfly_connections_current", "gauge", "Client connections open now.");
    sample(&b, "mayfly_connections_current", num_at(&st, "connections.current", 0));
    family(&b, "mayfly_connections_created_total", "counter", "Client connections accepted since start-up.");
    sample(&b, "mayfly_connections_created_total", num_at(&st, "connections.totalCreated", 0));
    family(&b, "mayfly_opcounters_total", "counter", "Operations by type since start-up (serverStatus().opcounters).");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "opcounters.%s", ops[i]);
        sb_printf(&b, "mayfly_opcounters_total{type=\"%s\"} %.17g\n", ops[i], num_at(&st, path, 0));
    }
    family(&b, "mayfly_uptime_seconds", "gauge", "Seconds since the server started.");
    sample(&b, "mayfly_uptime_seconds", num_at(&st, "uptimeMillis", 0) / 1000.0);
    family(&b, "mayfly_memory_resident_bytes", "gauge", "Resident memory of the server process.");
    sample(&b, "mayfly_memory_resident_bytes", num_at(&st, "mem.resident", 0) * 1048576.0);
    family(&b, "mayfly_memory_virtual_bytes", "gauge", "Virtual memory of the server process.");
    sample(&b, "mayfly_memory_virtual_bytes", num_at(&st, "mem.virtual", 0) * 1048576.0);
    family(&b, "mayfly_storage_cache_bytes", "gauge", "Bytes in the WiredTiger cache now.");
    sample(&b, "mayfly_storage_cache_bytes", num_at(&st, "wiredTiger.cache.bytes currently in the cache", 0));
    family(&b, "mayfly_storage_cache_max_bytes", "gauge", "The WiredTiger cache's configured size.");
    sample(&b, "mayfly_storage_cache_max_bytes", num_at(&st, "wiredTiger.cache.maximum bytes configured", 0));
    bson_init(&archive);
    if (bson_iter_init(&it, &st) && bson_iter_find_descendant(&it, "archive.collections", &it) &&
        BSON_ITER_HOLDS_ARRAY(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_array(&it, &len, &data);
        bson_destroy(&archive);
        if (!bson_init_static(&archive, data, len))
            bson_init(&archive);
    }
    family(&b, "mayfly_archive_bytes", "gauge", "Compressed bytes in each collection's expiry archive (SPEC I2).");
    per_index(&b, &archive, "mayfly_archive_bytes", "bytes", false);
    family(&b, "mayfly_archive_documents", "gauge", "Documents in each collection's expiry archive (SPEC I2).");
    per_index(&b, &archive, "mayfly_archive_documents", "documents", false);
    bson_destroy(&archive);
    resp->status = 200;
    resp->content_type = PROM_TYPE;
    resp->body = b.p ? b.p : mf_strdup("");
    resp->body_len = b.len;
out:
    bson_destroy(&st);
    bson_destroy(&indexes);
}

/* ---------- routing ---------- */

static const char *
asset_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (dot && strcmp(dot, ".js") == 0)
        return "application/javascript; charset=utf-8";
    if (dot && strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (dot && strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    if (dot && strcmp(dot, ".png") == 0)
        return "image/png";
    return "text/html; charset=utf-8";
}

void
mf_http_route(mf_engine_t *eng, const mf_http_req_t *req, mf_http_resp_t *resp)
{
    mf_client_t cl;
    const char *path = strcmp(req->path, "/") == 0 ? "/index.html" : req->path;
    bool get = req->method == HTTP_GET;

    if (strcmp(path, "/api/ttl") == 0) {
        bool write = req->method == HTTP_POST || req->method == HTTP_PATCH;
        if (!get && !write) {
            respond_error(resp, MF_E_IllegalOperation, "method not allowed on /api/ttl");
            resp->status = 405;
            resp->allow = "GET, POST, PATCH";
            return;
        }
        if (browser_guard(eng, req, write, resp) != 0 || client_for(eng, req, write, &cl, resp) != 0)
            return;
        if (get)
            api_ttl_get(eng, &cl, resp);
        else if (req->method == HTTP_POST)
            api_ttl_post(eng, &cl, req, resp);
        else
            api_ttl_patch(eng, &cl, req, resp);
        mf_client_release(&cl);
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        if (!get) {
            respond_text(resp, 405, "method not allowed\n");
            resp->allow = "GET";
            return;
        }
        if (browser_guard(eng, req, false, resp) != 0 || client_for(eng, req, false, &cl, resp) != 0)
            return;
        metrics_get(eng, &cl, resp);
        mf_client_release(&cl);
        return;
    }
    for (const mf_http_asset_t *a = mf_http_assets; a->path != NULL; a++) {
        if (strcmp(a->path, path) != 0)
            continue;
        if (!get) {
            respond_text(resp, 405, "method not allowed\n");
            resp->allow = "GET";
            return;
        }
        if (browser_guard(eng, req, false, resp) != 0 || client_for(eng, req, false, &cl, resp) != 0)
            return;
        mf_client_release(&cl);
        resp->status = 200;
        resp->content_type = asset_type(path);
        resp->body = mf_malloc(a->len + 1);
        memcpy(resp->body, a->data, a->len);
        resp->body_len = a->len;
        return;
    }
    respond_text(resp, 404, "not found\n");
}
