/*
 * fuzz_bson.c: BSON validation of incoming documents (src/net/wire.c's
 * check_document, src/doc/check.c's storage checks).
 *
 * Feeds: the input as one raw BSON document, framed three ways, as a client
 * could send it: the body of an OP_MSG, a document of an OP_MSG kind-1
 * sequence ("documents", beside a small valid body), and the query of an
 * OP_QUERY on admin.$cmd. A document the wire accepts then goes through what
 * an insert does to it: mf_doc_with_id_first and mf_check_doc_for_storage.
 *
 * Checks: no crash, leak or undefined behaviour; when the input is exactly
 * one document the three framings agree (same verdict, same error code); an
 * accepted document is walked to its end with bson_iter; libbson's own
 * bson_validate agrees with the wire's verdict both ways: whatever the wire
 * accepts libbson accepts (bson_validate plus fuzz_well_formed; see
 * lib_strict_ok), and a document libbson accepts that nests at most
 * 150 levels and whose field names are all UTF-8 is not refused as invalid
 * BSON (the server must not turn away documents drivers may send; it refuses
 * non-UTF-8 field names at every level, where libbson's check misses some); a failed storage check carries an error code;
 * the _id-first copy is well-formed BSON, starts with _id, and passes the storage
 * check whenever the original did.
 */
#include "fuzz_common.h"

#include <stdio.h>

#include "common/limits.h"
#include "doc/check.h"

/* Depth of the raw document (1 for a flat one), or -1 if libbson cannot iterate it. */
static int
depth_of(const uint8_t *data, uint32_t len, int depth)
{
    bson_iter_t it;
    int max = depth;

    if (depth > 1000 || !bson_iter_init_from_data(&it, data, len))
        return -1;
    while (bson_iter_next(&it)) {
        const bson_value_t *v = bson_iter_value(&it);
        int d = depth;
        if (v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY)
            d = depth_of(v->value.v_doc.data, v->value.v_doc.data_len, depth + 1);
        else if (v->value_type == BSON_TYPE_CODEWSCOPE)
            d = depth_of(v->value.v_codewscope.scope_data, v->value.v_codewscope.scope_len, depth + 1);
        if (d < 0)
            return -1;
        if (d > max)
            max = d;
    }
    return max;
}

/*
 * lib_strict_ok: libbson's verdict, made strict. bson_validate (libbson
 * 1.23) alone misses corruption after a code-with-scope element (it accepts
 * {c: Code("f()", {x: 1}), i: 1, <unknown type 0x74>}) and a code-with-scope
 * whose code string does not end with a NUL, so the document must also be
 * well formed to the end (fuzz_well_formed).
 */
static bool
lib_strict_ok(const uint8_t *data, size_t size)
{
    bson_t view;
    return size <= UINT32_MAX && fuzz_get_u32(data) == size && bson_init_static(&view, data, size) &&
           bson_validate(&view, BSON_VALIDATE_NONE, NULL) && fuzz_well_formed(data, (uint32_t)size, 0);
}

/* parse_framed: mf_wire_parse of frame; the error code (0 if accepted). */
static int
parse_framed(uint8_t *frame, size_t n)
{
    mf_msg_t msg;
    mf_error_t err;

    fuzz_put_u32(frame, (uint32_t)n);
    mf_err_clear(&err);
    if (mf_wire_parse(frame, n, &msg, &err) != 0)
        return err.code ? err.code : -1;
    mf_wire_msg_destroy(&msg);
    return 0;
}

static int
as_sequence(const uint8_t *doc, size_t len)
{
    static const uint8_t body[] = {0x0c, 0, 0, 0, 0x10, 'x', 0, 1, 0, 0, 0, 0}; /* {x: 1} */
    const char ident[] = "documents";
    size_t seq = 4 + sizeof(ident) + len;
    size_t n = 16 + 4 + 1 + sizeof(body) + 1 + seq;
    uint8_t *f = calloc(1, n), *p;
    int code;

    fuzz_put_u32(f + 12, MF_OP_MSG);
    p = f + 20;
    *p++ = 0;
    memcpy(p, body, sizeof(body));
    p += sizeof(body);
    *p++ = 1;
    fuzz_put_u32(p, (uint32_t)seq);
    memcpy(p + 4, ident, sizeof(ident));
    memcpy(p + 4 + sizeof(ident), doc, len);
    code = parse_framed(f, n);
    free(f);
    return code;
}

static int
as_query(const uint8_t *doc, size_t len)
{
    const char ns[] = "admin.$cmd";
    size_t n = 16 + 4 + sizeof(ns) + 8 + len;
    uint8_t *f = calloc(1, n);
    int code;

    fuzz_put_u32(f + 12, MF_OP_QUERY);
    memcpy(f + 20, ns, sizeof(ns));
    fuzz_put_u32(f + 20 + sizeof(ns) + 4, 0xFFFFFFFFu); /* numberToReturn -1 */
    memcpy(f + 20 + sizeof(ns) + 8, doc, len);
    code = parse_framed(f, n);
    free(f);
    return code;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int c_body, c_seq, c_query;
    bool lib_ok;
    bson_t view, fixed;
    mf_error_t err;
    int code_orig;

    if (size < 5 || size > 1 << 20)
        return 0;
    fuzz_wire_accepts(data, size, &c_body);
    c_seq = as_sequence(data, size);
    c_query = as_query(data, size);
    /*
     * With bytes after the document the framings read them differently
     * (another section, a returnFieldsSelector): nothing more to compare.
     */
    if (fuzz_get_u32(data) != size)
        return 0;
    FUZZ_CHECK(c_body == c_seq && c_body == c_query, "framings disagree: body %d, sequence %d, query %d", c_body,
               c_seq, c_query);

    lib_ok = lib_strict_ok(data, size);
    if (c_body != 0) {
        if (lib_ok && c_body == MF_E_InvalidBSON && fuzz_keys_utf8(data, (uint32_t)size, 1)) {
            int d = depth_of(data, (uint32_t)size, 1);
            FUZZ_CHECK(d < 0 || d > 150, "wire refuses a document libbson accepts (depth %d)", d);
        }
        return 0;
    }
    FUZZ_CHECK(lib_ok, "wire accepts a document libbson refuses");
    bson_init_static(&view, data, size);
    fuzz_walk(data, (uint32_t)size, 0);

    /* What an insert does with it. */
    mf_err_clear(&err);
    code_orig = mf_check_doc_for_storage(&view, &err) == 0 ? 0 : -1;
    if (code_orig != 0)
        FUZZ_CHECK(err.code != 0, "storage check failed without a code");
    mf_doc_with_id_first(&view, &fixed);
    FUZZ_CHECK(FUZZ_DOC_OK(&fixed), "_id-first copy is not well-formed BSON");
    FUZZ_CHECK(mf_doc_id_is_first(&fixed), "_id-first copy does not start with _id");
    if (code_orig == 0 && fixed.len <= MF_MAX_BSON_SIZE) {
        mf_err_clear(&err);
        FUZZ_CHECK(mf_check_doc_for_storage(&fixed, &err) == 0, "_id-first copy of a storable document refused: %s",
                   err.msg);
    }
    bson_destroy(&fixed);
    return 0;
}
