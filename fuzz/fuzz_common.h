/*
 * fuzz_common.h: what the libFuzzer targets in fuzz/ share.
 *
 * Most targets take a few BSON documents (a filter and the documents it is
 * matched against, an update and its targets, a pipeline and its source).
 * fuzz_docs_read turns one fuzzer input into those documents, in one of two
 * encodings, chosen by the input's first byte:
 *
 *   - '{' or '[': JSON lines. Each line is one MongoDB Extended JSON
 *     document (a top-level array is read as an array document), parsed by
 *     libbson. Mutations of text keep the structure valid far more often
 *     than mutations of BSON bytes, whose length prefixes break, and the
 *     seed files stay readable. A line that does not parse ends the list.
 *   - anything else: raw BSON documents, one after another. Each must pass
 *     the server's own gate for incoming documents: it is framed as the body
 *     of an OP_MSG and given to mf_wire_parse (check_document's structural
 *     walk, the 200-level depth bound, bson_validate), so the targets see
 *     exactly the documents a client can get past the wire layer, including
 *     invalid UTF-8, embedded NULs in strings and odd array keys, which JSON
 *     cannot express. The first document that fails ends the list.
 *
 * Everything returned is owned by the caller (fuzz_docs_free). Nothing here
 * is part of the server.
 */
#ifndef MF_FUZZ_COMMON_H
#define MF_FUZZ_COMMON_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/wire.h"

#define FUZZ_MAX_DOCS 16

typedef struct fuzz_docs {
    bson_t *docs[FUZZ_MAX_DOCS]; /* owned (bson_new_from_json / bson_new_from_data) */
    size_t n;
    bool json;                   /* read from JSON lines */
} fuzz_docs_t;

/* Stops the fuzzer with a message: a broken invariant is a finding like a crash. */
#define FUZZ_CHECK(cond, ...)                                                         \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s\n  ", __FILE__, __LINE__, \
                    #cond);                                                           \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
            abort();                                                                  \
        }                                                                             \
    } while (0)

static inline void
fuzz_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t
fuzz_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/*
 * fuzz_wire_accepts: whether the document doc/len gets past mf_wire_parse as
 * the body of an OP_MSG. *code gets the parse error's code (0 on success).
 */
static inline bool
fuzz_wire_accepts(const uint8_t *doc, size_t len, int *code)
{
    size_t n = 16 + 4 + 1 + len;
    uint8_t *frame = malloc(n);
    mf_msg_t msg;
    mf_error_t err;
    bool ok;

    fuzz_put_u32(frame, (uint32_t)n);
    fuzz_put_u32(frame + 4, 1);
    fuzz_put_u32(frame + 8, 0);
    fuzz_put_u32(frame + 12, MF_OP_MSG);
    fuzz_put_u32(frame + 16, 0);
    frame[20] = 0;
    memcpy(frame + 21, doc, len);
    mf_err_clear(&err);
    ok = mf_wire_parse(frame, n, &msg, &err) == 0;
    *code = ok ? 0 : err.code;
    if (ok)
        mf_wire_msg_destroy(&msg);
    free(frame);
    return ok;
}

static inline void
fuzz_docs_free(fuzz_docs_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        bson_destroy(d->docs[i]);
    d->n = 0;
}

/* fuzz_docs_read: fills d from the input (see the file comment). Returns d->n. */
static inline size_t
fuzz_docs_read(const uint8_t *data, size_t size, fuzz_docs_t *d)
{
    memset(d, 0, sizeof(*d));
    if (size == 0)
        return 0;
    if (data[0] == '{' || data[0] == '[') {
        size_t off = 0;
        d->json = true;
        while (off < size && d->n < FUZZ_MAX_DOCS) {
            const uint8_t *nl = memchr(data + off, '\n', size - off);
            size_t end = nl ? (size_t)(nl - data) : size;
            bson_error_t berr;
            bson_t *b;
            if (end > off) {
                b = bson_new_from_json(data + off, (ssize_t)(end - off), &berr);
                if (b == NULL)
                    break;
                d->docs[d->n++] = b;
            }
            off = end + 1;
        }
        return d->n;
    }
    for (size_t off = 0; size - off >= 5 && d->n < FUZZ_MAX_DOCS;) {
        uint32_t len = fuzz_get_u32(data + off);
        int code;
        if (len < 5 || len > size - off || !fuzz_wire_accepts(data + off, len, &code))
            break;
        d->docs[d->n++] = bson_new_from_data(data + off, len);
        off += len;
    }
    return d->n;
}

/* fuzz_value_of_doc: a bson_value_t view of doc as a document (or, with as_array, an array). */
static inline bson_value_t
fuzz_value_of_doc(const bson_t *doc, bool as_array)
{
    bson_value_t v;
    memset(&v, 0, sizeof(v));
    v.value_type = as_array ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT;
    v.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    v.value.v_doc.data_len = doc->len;
    return v;
}

/* fuzz_walk: visits every element of doc, recursively, reading every value, so a bad view trips ASan. */
static inline size_t
fuzz_walk(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    size_t n = 0;

    if (depth > 256 || !bson_iter_init_from_data(&it, data, len))
        return 0;
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        n++;
        n += strlen(bson_iter_key(&it)) & 1;
        switch (v->value_type) {
        case BSON_TYPE_DOCUMENT:
        case BSON_TYPE_ARRAY:
            n += fuzz_walk(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1);
            break;
        case BSON_TYPE_CODEWSCOPE:
            n += fuzz_walk(v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len, depth + 1);
            if (v->value.v_codewscope.code_len)
                n += (uint8_t)v->value.v_codewscope.code[v->value.v_codewscope.code_len - 1];
            break;
        case BSON_TYPE_UTF8:
            n += v->value.v_utf8.len ? (uint8_t)v->value.v_utf8.str[v->value.v_utf8.len - 1] : 0;
            break;
        case BSON_TYPE_BINARY:
            n += v->value.v_binary.data_len ? v->value.v_binary.data[v->value.v_binary.data_len - 1] : 0;
            break;
        case BSON_TYPE_REGEX:
            n += strlen(v->value.v_regex.regex) + strlen(v->value.v_regex.options);
            break;
        default:
            break;
        }
    }
    return n;
}

/*
 * fuzz_walk_ok: one walk of data/len and everything nested in it, for the
 * two checks below (utf8_keys: also every field name is UTF-8).
 *
 * fuzz_well_formed: whether data/len is a structurally sound document:
 * bson_iter reaches the end of it and of every nested document, array and
 * code-with-scope scope without an error, and every code-with-scope's code
 * ends with its NUL. The targets check results with this rather than with
 * bson_validate, whose verdict (libbson 1.23) depends on where it stops: it
 * stops early, reporting success, at some elements (after a code-with-scope,
 * a code string holding a NUL), and otherwise refuses field names that are
 * not UTF-8, which clients can send and MongoDB stores.
 */
static inline bool
fuzz_walk_ok(const uint8_t *data, uint32_t len, int depth, bool utf8_keys)
{
    bson_iter_t it;

    if (depth > 1000 || !bson_iter_init_from_data(&it, data, len))
        return false;
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        if (utf8_keys && !bson_utf8_validate(bson_iter_key(&it), bson_iter_key_len(&it), false))
            return false;
        if ((v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) &&
            !fuzz_walk_ok(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1, utf8_keys))
            return false;
        if (v->value_type == BSON_TYPE_CODEWSCOPE &&
            (v->value.v_codewscope.code[v->value.v_codewscope.code_len] != 0 ||
             !fuzz_walk_ok(v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len, depth + 1, utf8_keys)))
            return false;
    }
    return it.err_off == 0;
}

static inline bool
fuzz_well_formed(const uint8_t *data, uint32_t len, int depth)
{
    return fuzz_walk_ok(data, len, depth, false);
}

#define FUZZ_DOC_OK(b) fuzz_well_formed(bson_get_data(b), (b)->len, 0)

/*
 * fuzz_keys_utf8: whether data/len is well formed (as fuzz_well_formed) and
 * every field name in it, at every level (code-with-scope scopes included),
 * is UTF-8. The wire refuses the others everywhere (libbson's bson_validate
 * refuses them only where it looks).
 */
static inline bool
fuzz_keys_utf8(const uint8_t *data, uint32_t len, int depth)
{
    return fuzz_walk_ok(data, len, depth, true);
}

#endif /* MF_FUZZ_COMMON_H */
